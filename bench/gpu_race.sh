#!/usr/bin/env bash
# The race on one GPU: gnc against PyTorch training the d2l ResNet-18 on
# Fashion-MNIST, the same data, batch and epochs, one run per configuration,
# each kept as one JSON line so that a later GPU span picks up where this one
# stopped (docs/gpu.md, "The race"):
#
#   bench/gpu_race.sh OUT [--budget SECONDS] [--done FILE] [--epochs N]
#                         [--model resnet18|lenet] [--only NAME,...]
#
#   OUT             folder for race.jsonl (the lines of this run and the done
#                   ones), race.md (the table) and logs/
#   --budget S      stop starting configurations when S seconds are spent
#                   (default 540); one that would not fit is left for later
#   --done FILE     race.jsonl of earlier spans (bench/results/...): what it
#                   holds is not run again and joins the table
#   --epochs N      epochs per configuration (default 10)
#   --only LIST     just these configurations (names below)
#
# Configurations, in this order: peak (PyTorch's bf16 8192^3 matmul, for the
# TFLOP/s column); gnc-bf16, gnc-tf32, gnc-fp32 (gnc train --precision P);
# torch-eager-bf16 (autocast, channels-last), torch-eager-fp32,
# torch-compile-bf16 (reduce-overhead), torch-compile-max-bf16 (max-autotune).
# Every run: batch 256, SGD lr 0.1 without momentum (the d2l chapter's), the
# whole training set per epoch (234 steps, 59904 images), test accuracy after
# each.  PYTHON names the Python with PyTorch (default python3).  Run it from a pack
# (tools/gpu_check.sh --pack DIR, which copies it to DIR/bench/) or a checkout
# with a build.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out= budget=540 done_file= epochs=10 model=resnet18 only=
while [ $# -gt 0 ]; do
    case $1 in
    --budget) budget=${2:?}; shift ;;
    --done) done_file=${2:?}; shift ;;
    --epochs) epochs=${2:?}; shift ;;
    --model) model=${2:?}; shift ;;
    --only) only=,${2:?},; shift ;;
    -h|--help) sed -n '2,27s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "gpu_race: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) out=$1 ;;
    esac
    shift
done
[ -n "$out" ] || { echo "gpu_race: which folder for the results? (see --help)" >&2; exit 2; }
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
[ -n "$done_file" ] && [ -e "$done_file" ] && [ "$(realpath "$done_file")" != "$jsonl" ] &&
    cat "$done_file" >>"$jsonl"
export GNC_CACHE_DIR=$out/kernel-cache
py=${PYTHON:-python3} # the one with PyTorch
t_start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

# The seconds each configuration is expected to take (H200 figures of
# 2026-11-26 for 10 epochs, with room): one is started only where it fits.
declare -A need=([peak]=20 [gnc-bf16]=60 [gnc-tf32]=120 [gnc-fp32]=200 [torch-eager-bf16]=90
                 [torch-eager-fp32]=150 [torch-compile-bf16]=180 [torch-compile-max-bf16]=480)
order=(peak gnc-bf16 torch-eager-bf16 gnc-tf32 torch-eager-fp32 gnc-fp32 torch-compile-bf16
       torch-compile-max-bf16)

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

# record NAME KEY=VALUE...: one JSON line (values that are numbers stay numbers)
record() {
    local name=$1; shift
    "$py" - "$name" "$gpu" "$epochs" "$model" "$@" >>"$jsonl" <<'EOF'
import json, sys, time
name, gpu, epochs, model, *kv = sys.argv[1:]
r = {"name": name, "gpu": gpu, "model": model, "epochs": int(epochs),
     "date": time.strftime("%Y-%m-%d")}
for a in kv:
    k, v = a.split("=", 1)
    try:
        v = float(v)
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

# gnc-P: compile time cold (no kernel cache) and warm, then the training run
run_gnc() {
    local name=$1 prec=${1#gnc-} log=$out/logs/$1.log csv=$out/logs/$1.csv
    local flags=(--train -D batch=256 --precision "$prec")
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
        --precision "$prec" --data "$data" --epochs "$epochs" --batch 256 --lr 0.1 --log "$csv" \
        >>"$log" 2>&1 || return 1
    # the CSV: epoch,steps,train_loss,test_acc,images_per_s,seconds
    local ips acc
    ips=$(awk -F, 'NR > 1 {print $5}' "$csv" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    acc=$(awk -F, 'END {print $4}' "$csv")
    record "$name" img_per_s="$ips" median_epoch_s="$(awk -v i="$ips" 'BEGIN {print 59904 / i}')" \
        test_acc="$acc" peak_mib_smi="$(peak_smi "$name")" \
        compile_cold_s="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
        compile_warm_s="$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')" \
        gflop_per_image="${gflop:-0}"
}

# torch-MODE-AMP: ../shared/bench/torch_fmnist.py; its summary line and last epoch
run_torch() {
    local name=$1 log=$out/logs/$1.log mode amp=fp32 extra=()
    case $name in
    torch-eager-*) mode=eager ;;
    torch-compile-max-*) mode=compile-max ;;
    torch-compile-*) mode=compile ;;
    esac
    case $name in *-bf16) amp=bf16 extra=(--channels-last) ;; esac
    sampled "$name" timeout "$limit" "$py" "$torch_script" --model "$model" --data "$data" \
        --epochs "$epochs" --batch 256 --lr 0.1 --mode "$mode" --amp "$amp" "${extra[@]}" \
        >"$log" 2>&1 || return 1
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

for name in "${order[@]}"; do
    [ -n "$only" ] && [[ $only != *",$name,"* ]] && continue
    if grep "\"name\": \"$name\"" "$jsonl" | grep -qv '"failed"'; then
        echo "$name: done already"
        continue
    fi
    left=$(( budget - ($(date +%s) - t_start) ))
    if [ "${need[$name]}" -gt "$left" ]; then
        echo "$name: left for the next span (needs about ${need[$name]} s, $left s left)"
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
    echo "    rc $rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$jsonl")"
    [ $rc = 0 ] || record "$name" failed=1 rc=$rc
done

# the table: every configuration done, this span's and the earlier ones'
"$py" - "$jsonl" >"$out/race.md" <<'EOF'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    if l.strip():
        r = json.loads(l)
        if not r.get("failed") or r["name"] not in rows or rows[r["name"]].get("failed"):
            rows[r["name"]] = r
peak = rows.get("peak", {}).get("tflops")
print("| configuration | GPU | median epoch s | images/s | test acc | peak MiB (nvidia-smi) |"
      " peak MiB (allocator) | compile cold s | warm s | TFLOP/s (of bf16 peak) |")
print("| --- " * 10 + "|")
for name, r in rows.items():
    if name == "peak":
        continue
    if r.get("failed"):
        print("| %s | %s | failed (rc %s) |  |  |  |  |  |  |  |" % (name, r["gpu"], r.get("rc")))
        continue
    tf = ""
    if r.get("gflop_per_image"):
        t = r["img_per_s"] * r["gflop_per_image"] / 1e3
        tf = "%.1f" % t + (" (%.0f%%)" % (100 * t / peak) if peak else "")
    g = lambda k, f="%s": f % r[k] if r.get(k) not in (None, "") else ""
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name, r["gpu"], g("median_epoch_s", "%.3f"), g("img_per_s", "%.0f"), g("test_acc"),
        g("peak_mib_smi", "%.0f"), g("peak_mib_alloc", "%.0f"), g("compile_cold_s", "%.1f"),
        g("compile_warm_s", "%.2f"), tf))
if peak:
    print("\nbf16 peak (PyTorch, 8192^3 matmul): %.0f TFLOP/s" % peak)
EOF
cat "$out/race.md"
echo "spent $(( $(date +%s) - t_start )) s; lines in $jsonl"
