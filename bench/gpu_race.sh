#!/usr/bin/env bash
# The race on one GPU: gnc against PyTorch training the d2l ResNet-18 on
# Fashion-MNIST, the same data, batch, epochs, learning rate and momentum, one
# run per configuration, each kept as one JSON line so that a later GPU span
# picks up where this one stopped (docs/gpu.md, "The race"):
#
#   bench/gpu_race.sh OUT [--budget SECONDS] [--done FILE] [--epochs N]
#                         [--momentum M] [--model resnet18|lenet] [--only NAME,...]
#
#   OUT             folder for race.jsonl (the lines of this run and the done
#                   ones), race.md (the tables) and logs/; a folder holds the
#                   runs of one momentum
#   --budget S      stop starting configurations when S seconds are spent
#                   (default 540); one that would not fit is left for later,
#                   and the ones after it that fit still run
#   --done FILE     race.jsonl of earlier spans (bench/results/...): what it
#                   holds is not run again and joins the table; its lines of
#                   another momentum (or none recorded) are not merged, each
#                   named in the output
#   --epochs N      epochs per configuration (default 10)
#   --momentum M    SGD momentum of both sides (default 0, the d2l chapter's
#                   SGD): gnc train --momentum M, torch_fmnist.py --momentum M
#   --only LIST     just these configurations (names below)
#
# Configurations, in this order (gnc first at each precision, then PyTorch;
# -cl: PyTorch in channels-last, without it PyTorch's default layout, NCHW;
# gnc keeps its activations NCHW):
#   peak (PyTorch's bf16 8192^3 matmul, for the TFLOP/s column);
#   gnc-bf16, torch-compile-max-bf16-cl (torch.compile max-autotune: the
#   strongest anchor, first of PyTorch's), torch-eager-bf16-cl,
#   torch-eager-bf16; gnc-tf32, torch-eager-tf32-cl, torch-eager-tf32;
#   gnc-fp32, torch-eager-fp32-cl, torch-eager-fp32;
#   torch-compile-bf16-cl (torch.compile reduce-overhead).
# gnc-P is gnc train --precision P; torch-MODE-P is torch_fmnist.py --mode
# MODE --amp P (bf16: autocast; tf32: TF32 matmuls and convolutions).
# Every run: batch 256, SGD lr 0.1 with --momentum, the whole training set
# per epoch (234 steps, 59904 images), test accuracy after each.  Every JSON
# line says what ran: framework, mode, precision (amp), layout, momentum, lr,
# batch.  PYTHON names the Python with PyTorch (default python3).  Run it from
# a pack (tools/gpu_check.sh --pack DIR, which copies it to DIR/bench/) or a
# checkout with a build (GNC_BUILD_DIR, default build/).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out='' budget=540 done_file='' epochs=10 model=resnet18 only='' momentum=0
while [ $# -gt 0 ]; do
    case $1 in
    --budget) budget=${2:?}; shift ;;
    --done) done_file=${2:?}; shift ;;
    --epochs) epochs=${2:?}; shift ;;
    --momentum) momentum=${2:?}; shift ;;
    --model) model=${2:?}; shift ;;
    --only) only=,${2:?},; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    -*) echo "gpu_race: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) out=$1 ;;
    esac
    shift
done
[ -n "$out" ] || { echo "gpu_race: which folder for the results? (see --help)" >&2; exit 2; }
# the same string goes to both sides; gnc takes [0, 1]
if ! [[ $momentum =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || ! awk -v m="$momentum" 'BEGIN {exit !(m <= 1)}'; then
    echo "gpu_race: --momentum needs a number in [0, 1], got '$momentum'" >&2
    exit 2
fi
if [ -e "$here/../pack.txt" ]; then # in a pack
    root=$(cd "$here/.." && pwd) gnc=$root/bin/gnc data=$root/data torch_script=$here/torch_fmnist.py
    [ -d "$root/lib" ] || bash "$root/gpu_check.sh" --unpack || exit 1
    export LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    root=$(cd "$here/.." && pwd) gnc=${GNC_BUILD_DIR:-$root/build}/gnc
    data=/usr/share/datasets/fashion-mnist torch_script=$root/../shared/bench/torch_fmnist.py
fi
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
jsonl=$out/race.jsonl
touch "$jsonl"
py=${PYTHON:-python3} # the one with PyTorch

# Only runs of this momentum are compared: OUT/race.jsonl must hold no other
# (a folder per momentum), and the --done lines of another momentum, or of
# none recorded (before the race stated it), stay out, each named.  peak is
# no training run: its line joins whatever its momentum.
[ -n "$done_file" ] && [ ! -e "$done_file" ] && echo "gpu_race: --done $done_file: no such file, nothing merged"
[ -n "$done_file" ] && [ -e "$done_file" ] && [ "$(realpath "$done_file")" != "$jsonl" ] || done_file=
"$py" - "$jsonl" "$momentum" "$done_file" <<'EOF' || exit 2
import json, sys
jsonl, m, done = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def lines(path):
    return [(l, json.loads(l)) for l in open(path) if l.strip()]
def momentum(r):
    return "none recorded" if r.get("momentum") is None else "%g" % r["momentum"]
other = sorted({momentum(r) for _, r in lines(jsonl) if r["name"] != "peak" and r.get("momentum") != m})
if other:
    sys.exit("gpu_race: %s holds runs with momentum %s; this race is at %g: give it a folder of its own"
             % (jsonl, ", ".join(other), m))
if done:
    kept = []
    for l, r in lines(done):
        if r["name"] == "peak" or r.get("momentum") == m:
            kept.append(l if l.endswith("\n") else l + "\n")
        else:
            print("gpu_race: %s: %s ran with momentum %s, this race with %g: not merged, not comparable"
                  % (done, r["name"], momentum(r), m))
    with open(jsonl, "a") as f:
        f.writelines(kept)
EOF
export GNC_CACHE_DIR=$out/kernel-cache
t_start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

# The seconds each configuration is expected to take for 10 epochs, with room
# for start-up, data loading, warm-up and the test passes: estimates, from
# the H200 figures of 2026-11-26 (docs/perf.md: PyTorch eager bf16 in
# channels-last 23.4k images/s, tf32 NCHW 22.9k, fp32 NCHW 11.5k,
# torch.compile reduce-overhead fp32 12.3k after a 30 s warm-up) where there
# are any; PyTorch bf16 in NCHW (its convolutions wrapped in layout
# transposes), tf32 and fp32 in channels-last, and max-autotune (minutes of
# autotuning) were not measured.  One is started only where it fits.
declare -A need=([peak]=20 [gnc-bf16]=60 [gnc-tf32]=120 [gnc-fp32]=200
                 [torch-compile-max-bf16-cl]=480
                 [torch-eager-bf16-cl]=90 [torch-eager-bf16]=120
                 [torch-eager-tf32-cl]=100 [torch-eager-tf32]=90
                 [torch-eager-fp32-cl]=160 [torch-eager-fp32]=150
                 [torch-compile-bf16-cl]=180)
# (the order is the help's, at the top)
order=(peak gnc-bf16 torch-compile-max-bf16-cl torch-eager-bf16-cl torch-eager-bf16
       gnc-tf32 torch-eager-tf32-cl torch-eager-tf32 gnc-fp32 torch-eager-fp32-cl torch-eager-fp32
       torch-compile-bf16-cl)

# describe NAME: what the configuration is, as KEY=VALUE words for record
# (torch-MODE-PRECISION[-cl], gnc-PRECISION, peak)
describe() {
    local rest layout=nchw
    case $1 in
    peak) echo "framework=torch mode=matmul precision=bf16" ;;
    gnc-*) echo "framework=gnc mode=plan precision=${1#gnc-} layout=nchw" ;;
    torch-*)
        rest=${1#torch-}
        case $rest in *-cl) layout=channels-last rest=${rest%-cl} ;; esac
        echo "framework=torch mode=${rest%-*} precision=${rest##*-} amp=${rest##*-} layout=$layout" ;;
    esac
}

# sampled NAME COMMAND...: runs the command while nvidia-smi samples the
# memory in use into $out/logs/NAME.mem (peak_smi NAME: the largest, MiB)
sampled() {
    local name=$1; shift
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
        >"$out/logs/$name.mem" 2>/dev/null &
    local mon=$! rc
    "$@"
    rc=$?
    kill $mon 2>/dev/null
    wait $mon 2>/dev/null
    return $rc
}

# record NAME KEY=VALUE...: one JSON line (values that are numbers stay
# numbers), with what the configuration is and the settings of the race
record() {
    local name=$1; shift
    # shellcheck disable=SC2046
    "$py" - "$name" "$gpu" "$epochs" "$model" $(describe "$name") momentum="$momentum" lr=0.1 \
        batch=256 "$@" >>"$jsonl" <<'EOF'
import json, sys, time
name, gpu, epochs, model, *kv = sys.argv[1:]
r = {"name": name, "gpu": gpu, "model": model, "epochs": int(epochs),
     "date": time.strftime("%Y-%m-%d")}
for a in kv:
    k, v = a.split("=", 1)
    for number in (int, float):
        try:
            v = number(v)
            break
        except ValueError:
            pass
    r[k] = v
print(json.dumps(r))
EOF
}

peak_smi() { sort -n "$out/logs/$1.mem" 2>/dev/null | tail -1; }

run_peak() {
    "$py" - <<'EOF' >"$out/logs/peak.log" 2>&1 || return 1
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(10):
    a @ b
torch.cuda.synchronize()
print("tflops", 2 * 8192**3 * 10 / (time.perf_counter() - t) / 1e12)
EOF
    record peak tflops="$(awk '/^tflops/ {print $2}' "$out/logs/peak.log")"
}

# csv_column FILE NAME: the column of that name of each row of a --log CSV
csv_column() {
    awk -F, -v k="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == k) c = i; next}
                       c {print $c}' "$1"
}

# gnc-P: compile time cold (no kernel cache) and warm, then the training run
run_gnc() {
    local name=$1 prec=${1#gnc-} log=$out/logs/$1.log csv=$out/logs/$1.csv
    local flags=(--train -D batch=256 --precision "$prec" --momentum "$momentum")
    rm -rf "$GNC_CACHE_DIR"
    local t0 t1 t2
    t0=$(date +%s.%N)
    "$gnc" compile "$root/models/$model.net" "${flags[@]}" -o "$out/logs/$name.gnc" >"$log" 2>&1 || return 1
    t1=$(date +%s.%N)
    "$gnc" compile "$root/models/$model.net" "${flags[@]}" -o "$out/logs/$name.gnc" >>"$log" 2>&1 || return 1
    t2=$(date +%s.%N)
    local gflop
    gflop=$(grep -oE 'forward and backward: [0-9.]+ GFLOP \([0-9.]+' "$log" | head -1 | grep -oE '[0-9.]+$')
    rm -f "$csv"
    sampled "$name" timeout "$limit" "$gnc" train "$root/models/$model.net" --device cuda \
        --precision "$prec" --data "$data" --epochs "$epochs" --batch 256 --lr 0.1 \
        --momentum "$momentum" --log "$csv" >>"$log" 2>&1 || return 1
    # the CSV (columns by name: epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds)
    local ips acc
    ips=$(csv_column "$csv" images_per_s | grep -E '^[0-9.]+$' | sort -n |
          awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    acc=$(csv_column "$csv" test_acc | tail -1)
    [ -n "$ips" ] || return 1
    record "$name" img_per_s="$ips" median_epoch_s="$(awk -v i="$ips" 'BEGIN {print 59904 / i}')" \
        test_acc="$acc" peak_mib_smi="$(peak_smi "$name")" \
        compile_cold_s="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
        compile_warm_s="$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')" \
        gflop_per_image="${gflop:-0}"
}

# torch-MODE-AMP[-cl]: ../shared/bench/torch_fmnist.py; its summary line and last epoch
run_torch() {
    local name=$1 log=$out/logs/$1.log rest=${1#torch-} extra=()
    case $rest in *-cl) extra=(--channels-last) rest=${rest%-cl} ;; esac
    sampled "$name" timeout "$limit" "$py" "$torch_script" --model "$model" --data "$data" \
        --epochs "$epochs" --batch 256 --lr 0.1 --momentum "$momentum" --mode "${rest%-*}" \
        --amp "${rest##*-}" "${extra[@]}" >"$log" 2>&1 || return 1
    "$py" - "$log" "$name" "$(peak_smi "$name")" >"$out/logs/$name.kv" <<'EOF' || return 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
s = [l for l in lines if l.get("summary")][-1]
e = [l for l in lines if "epoch" in l and not l.get("summary")][-1]
print("img_per_s=%s median_epoch_s=%s test_acc=%s peak_mib_alloc=%s peak_mib_smi=%s compile_cold_s=%s"
      % (round(59904 / s["median_epoch_s"], 1), s["median_epoch_s"], e.get("test_acc"),
         s.get("peak_mem_mib"), sys.argv[3] or 0, s.get("warmup_s")))
EOF
    # shellcheck disable=SC2046
    record "$name" $(cat "$out/logs/$name.kv")
}

echo "gpu_race: SGD lr 0.1, momentum $momentum on both sides (gnc train --momentum $momentum," \
     "torch_fmnist.py --momentum $momentum), batch 256, $epochs epochs, $budget s of budget"
for name in "${order[@]}"; do
    [ -n "$only" ] && [[ $only != *",$name,"* ]] && continue
    if grep "\"name\": \"$name\"" "$jsonl" | grep -qv '"failed"'; then
        echo "$name: done already"
        continue
    fi
    left=$(( budget - ($(date +%s) - t_start) ))
    if [ "${need[$name]}" -gt "$left" ]; then
        echo "$name: left for the next span (needs about ${need[$name]} s, an estimate; $left s left)"
        continue
    fi
    limit=$left
    echo "$name: running (at most $left s)"
    t0=$(date +%s)
    case $name in
    peak) run_peak ;;
    gnc-*) run_gnc "$name" ;;
    torch-*) run_torch "$name" ;;
    esac
    rc=$?
    [ $rc = 0 ] || record "$name" failed=1 rc=$rc
    echo "    rc $rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$jsonl")"
done

# the tables: every configuration done, this span's and the earlier ones', in
# the order above; gnc against PyTorch's fastest at each precision
"$py" - "$jsonl" "$momentum" "$model" "$epochs" "${order[*]}" >"$out/race.md" <<'EOF'
import json, sys
path, mtext, model, epochs, order = sys.argv[1:]
m, order = float(mtext), order.split()
rows = {}
for l in open(path):
    if l.strip():
        r = json.loads(l)
        if r["name"] != "peak" and r.get("momentum") != m:
            continue  # never written by this script (it refuses such a folder)
        if not r.get("failed") or r["name"] not in rows or rows[r["name"]].get("failed"):
            rows[r["name"]] = r
rows = dict(sorted(rows.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
peak = rows.get("peak", {}).get("tflops")
print("%s on Fashion-MNIST, %s epochs, batch 256, SGD lr 0.1 with momentum %s on both sides"
      " (gnc train --momentum %s, torch_fmnist.py --momentum %s); gnc keeps activations NCHW,"
      " PyTorch runs each precision in channels-last (-cl) and in its default layout (NCHW).\n"
      % (model, epochs, mtext, mtext, mtext))
print("| configuration | precision | layout | GPU | median epoch s | images/s | test acc |"
      " peak MiB (nvidia-smi) | peak MiB (allocator) | compile cold s | warm s |"
      " TFLOP/s (of bf16 peak) |")
print("| --- " * 12 + "|")
for name, r in rows.items():
    if name == "peak":
        continue
    g = lambda k, f="%s": f % r[k] if r.get(k) not in (None, "") else ""
    if r.get("failed"):
        print("| %s | %s | %s | %s | failed (rc %s) |  |  |  |  |  |  |  |"
              % (name, g("precision"), g("layout"), r["gpu"], r.get("rc")))
        continue
    tf = ""
    if r.get("gflop_per_image"):
        t = r["img_per_s"] * r["gflop_per_image"] / 1e3
        tf = "%.1f" % t + (" (%.0f%%)" % (100 * t / peak) if peak else "")
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name, g("precision"), g("layout"), r["gpu"], g("median_epoch_s", "%.3f"),
        g("img_per_s", "%.0f"), g("test_acc"), g("peak_mib_smi", "%.0f"), g("peak_mib_alloc", "%.0f"),
        g("compile_cold_s", "%.1f"), g("compile_warm_s", "%.2f"), tf))
if peak:
    print("\nbf16 peak (PyTorch, 8192^3 matmul): %.0f TFLOP/s" % peak)
fair = []
for p in ("bf16", "tf32", "fp32"):
    gn = rows.get("gnc-" + p)
    ts = [r for n, r in rows.items() if n.startswith("torch-") and r.get("precision") == p
          and not r.get("failed")]
    if gn and not gn.get("failed") and ts:
        best = max(ts, key=lambda r: r["img_per_s"])
        fair.append("| %s | %.0f | %s (%s, %s) | %.0f | %.2f |" % (
            p, gn["img_per_s"], best["name"], best.get("mode"), best.get("layout"),
            best["img_per_s"], best["img_per_s"] / gn["img_per_s"]))
if fair:
    print("\ngnc (NCHW) against PyTorch's fastest configuration at each precision"
          " (either layout, any mode), momentum %s on both sides:\n" % mtext)
    print("| precision | gnc images/s | PyTorch's fastest | its images/s | gnc / PyTorch epoch time |")
    print("| --- " * 5 + "|")
    print("\n".join(fair))
EOF
cat "$out/race.md"
echo "spent $(( $(date +%s) - t_start )) s; lines in $jsonl"
