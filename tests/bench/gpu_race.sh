#!/usr/bin/env bash
# bench/gpu_race.sh without a GPU: gpu_race.sh GNC SOURCE_DIR WORK_DIR.
# Runs the race on stand-ins: nvidia-smi on PATH, PYTHON a wrapper that answers
# the peak matmul and runs a fake torch_fmnist.py (its arguments parsed by the
# real script's own add_argument calls where ../shared/bench/torch_fmnist.py
# is there, so a flag it lacks fails the run), GNC_BUILD_DIR a fake gnc that
# writes the real --log CSV header.  Each stand-in appends its call to
# calls.log.  Checks: the order of the configurations (torch.compile
# max-autotune bf16 first of PyTorch's, right after gnc-bf16); every precision
# run by PyTorch in channels-last and in its default layout; the same
# --momentum given to gnc compile, gnc train and torch_fmnist.py, and stated
# in every race.jsonl line and in race.md; a --done file's lines of another
# momentum (or none recorded) not merged, a folder of another momentum
# refused; a configuration over the budget left, with the ones after it run;
# images/s read from the CSV's images_per_s column; every flag given to the
# fake gnc one that the real gnc's help lists.  Ends with "N passed, M failed".
set -u
gnc=$(realpath "$1") src=$2 work=$3
. "$src/tests/lib.sh"
rm -rf "$work" && mkdir -p "$work/bin" "$work/gnc-build" && cd "$work" || exit 1
command -v python3 >/dev/null || { echo "gpu_race: needs python3"; exit 1; }

# ---------------------------------------------------------------- stand-ins
cat >bin/nvidia-smi <<'EOF'
#!/usr/bin/env bash
case "$*" in
*--query-gpu=name*) echo "NVIDIA H200 (stand-in)" ;;
*-lms*) echo 1234; echo 2345; exec sleep 60 ;; # killed by the race's sampled()
*) exit 1 ;;
esac
EOF
cat >bin/python <<'EOF'
#!/usr/bin/env bash
# "-": a program on standard input (the race's bookkeeping, or its peak matmul)
if [ "${1:-}" = - ]; then
    prog=$(cat)
    if grep -q 'torch.randn(8192' <<<"$prog"; then
        echo "peak" >>"$FAKE_LOG"
        echo "tflops 800.5"
        exit 0
    fi
    exec python3 -c "$prog" "${@:2}"
fi
case ${1:-} in
*/torch_fmnist.py) exec python3 "$FAKE_DIR/fake_torch.py" "$@" ;;
*) exec python3 "$@" ;;
esac
EOF
cat >bin/fake_torch.py <<'EOF'
# torch_fmnist.py's stand-in: fake_torch.py SCRIPT ARGS...  Parses ARGS with the
# add_argument calls of SCRIPT (the real one) where it exists, then prints an
# epoch line per epoch and the summary line, as the real script does, with
# images/s that depend on the mode, precision and layout.
import argparse, ast, json, os, sys
script, argv = sys.argv[1], sys.argv[2:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write("torch " + " ".join(argv) + "\n")
ap = argparse.ArgumentParser(prog="torch_fmnist.py")
if os.path.exists(script):
    for node in ast.walk(ast.parse(open(script).read())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            kw = {}
            for k in node.keywords:
                if k.arg == "type":
                    kw["type"] = {"int": int, "float": float, "str": str}[k.value.id]
                elif k.arg in ("choices", "action"):
                    kw[k.arg] = ast.literal_eval(k.value)
            ap.add_argument(*[ast.literal_eval(a) for a in node.args], **kw)
else:
    print("fake torch_fmnist.py: no %s, flags not checked against it" % script, file=sys.stderr)
    ap = argparse.ArgumentParser(prog="torch_fmnist.py")
    for a in ("--model", "--data", "--mode", "--amp"):
        ap.add_argument(a)
    for a in ("--epochs", "--batch"):
        ap.add_argument(a, type=int)
    for a in ("--lr", "--momentum"):
        ap.add_argument(a, type=float)
    ap.add_argument("--channels-last", action="store_true")
a = ap.parse_args(argv)
ips = {("compile-max", "bf16"): 30000, ("compile", "bf16"): 26000, ("eager", "bf16"): 23000,
       ("eager", "tf32"): 20000, ("eager", "fp32"): 10000}[(a.mode, a.amp)]
if not a.channels_last:  # NCHW: slower at bf16, faster at tf32 and fp32 (made up)
    ips = ips * 0.6 if a.amp == "bf16" else ips * 1.1
for e in range(1, a.epochs + 1):
    print(json.dumps({"model": a.model, "mode": a.mode, "amp": a.amp, "channels_last": a.channels_last,
                      "epoch": e, "epoch_s": 59904 / ips, "img_per_s": ips, "test_acc": round(0.8 + e / 100, 4)}))
print(json.dumps({"summary": True, "model": a.model, "mode": a.mode, "amp": a.amp,
                  "warmup_s": 12.5, "median_epoch_s": round(59904 / ips, 4), "peak_mem_mib": 704.0}))
EOF
cat >gnc-build/gnc <<'EOF'
#!/usr/bin/env bash
# gnc's stand-in: compile prints the summary line the race reads; train
# writes the --log CSV with the real header, test_loss beside images_per_s
echo "gnc $*" >>"$FAKE_LOG"
case $1 in
compile) echo "forward and backward: 142.000 GFLOP (0.5547 GFLOP per sample of 256)" ;;
train)
    log= epochs=1 prec=fp32
    while [ $# -gt 0 ]; do
        case $1 in --log) log=$2 ;; --epochs) epochs=$2 ;; --precision) prec=$2 ;; esac
        shift
    done
    case $prec in bf16) base=44000 ;; tf32) base=15000 ;; *) base=6700 ;; esac
    echo "epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds" >"$log"
    for ((e = 1; e <= epochs; e++)); do
        # the first epoch slowest (its first step), then the base, then a little faster
        echo "$e,$((234 * e)),0.5,0.8$e,0.3$e,$((base - (e == 1 ? 4000 : 0) + (e > 2 ? 500 : 0))),1.4" >>"$log"
    done ;;
*) exit 2 ;;
esac
EOF
chmod +x bin/nvidia-smi bin/python gnc-build/gnc
export PATH=$work/bin:$PATH PYTHON=$work/bin/python GNC_BUILD_DIR=$work/gnc-build \
       FAKE_DIR=$work/bin FAKE_LOG=$work/calls.log
race=(bash "$src/bench/gpu_race.sh")

# configs: the configuration each training call of calls.log ran, in order
configs() {
    awk '$1 == "peak" {print "peak"; next}
         $1 == "gnc" && $2 == "train" {for (i = 3; i < NF; i++) if ($i == "--precision") print "gnc-" $(i + 1)}
         $1 == "torch" {m = a = ""; cl = ""
                        for (i = 2; i <= NF; i++) {
                            if ($i == "--mode") m = $(i + 1)
                            if ($i == "--amp") a = $(i + 1)
                            if ($i == "--channels-last") cl = "-cl"
                        }
                        print "torch-" m "-" a cl}' calls.log | tr '\n' ' '
}
# jsonl_check FILE PYTHON-EXPRESSION WHAT: the expression holds of the list L
# of FILE's records
jsonl_check() {
    if python3 -c 'import json, sys
L = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; then ok; else bad "$3: $(cat "$1")"; fi
}

# ------------------------------------------- the whole race, momentum 0.9
: >calls.log
expect 0 "${race[@]}" out1 --momentum 0.9 --epochs 3 --budget 100000
has "momentum 0.9 on both sides (gnc train --momentum 0.9, torch_fmnist.py --momentum 0.9)"
want="peak gnc-bf16 torch-compile-max-bf16-cl torch-eager-bf16-cl torch-eager-bf16 gnc-tf32 torch-eager-tf32-cl torch-eager-tf32 gnc-fp32 torch-eager-fp32-cl torch-eager-fp32 torch-compile-bf16-cl "
got=$(configs)
[ "$got" = "$want" ] && ok || bad "the order: got '$got', want '$want'"
first_torch=$(grep -m1 '^torch ' calls.log)
case $first_torch in
*"--mode compile-max "*"--amp bf16"*) ok ;;
*) bad "PyTorch's first configuration is not torch.compile max-autotune at bf16: $first_torch" ;;
esac
for p in bf16 tf32 fp32; do
    grep -E "^torch .*--mode eager .*--amp $p --channels-last( |$)" calls.log >/dev/null && ok ||
        bad "no PyTorch eager $p in channels-last"
    grep -E "^torch .*--mode eager .*--amp $p$" calls.log >/dev/null && ok ||
        bad "no PyTorch eager $p in the default layout"
done
# the same momentum everywhere: each call of gnc and of torch_fmnist.py says
# --momentum 0.9 once, and none says another
n_calls=$(grep -cE '^(gnc compile|gnc train|torch) ' calls.log)
n_m=$(grep -E '^(gnc compile|gnc train|torch) ' calls.log | grep -c -- ' --momentum 0.9\( \|$\)')
n_any=$(grep -o -- '--momentum [^ ]*' calls.log | grep -vc -- '--momentum 0.9$')
[ "$n_calls" = 17 ] && [ "$n_m" = "$n_calls" ] && [ "$n_any" = 0 ] && ok ||
    bad "--momentum 0.9 in $n_m of $n_calls calls (want 17), $n_any other values: $(cat calls.log)"
grep -E '^(gnc (compile|train)|torch) ' calls.log | grep -v -- '--lr 0.1 ' | grep -v '^gnc compile' | grep -q . &&
    bad "a training call without --lr 0.1" || ok
jsonl_check out1/race.jsonl 'len(L) == 12 and all(r["momentum"] == 0.9 and r["lr"] == 0.1 and r["batch"] == 256 for r in L)' \
    "race.jsonl: 12 lines, each with momentum 0.9, lr 0.1, batch 256"
jsonl_check out1/race.jsonl 'all(r["layout"] == ("channels-last" if r["name"].endswith("-cl") else "nchw") and r["framework"] == r["name"].split("-")[0] and r["precision"] == r["name"].replace("-cl", "").split("-")[-1] for r in L if r["name"] != "peak")' \
    "race.jsonl: each line's layout, framework, precision as its name says"
jsonl_check out1/race.jsonl 'all(r["mode"] == {"torch-compile-max-bf16-cl": "compile-max", "torch-compile-bf16-cl": "compile"}.get(r["name"], "plan" if r["framework"] == "gnc" else "eager") and (r["framework"] == "gnc" or r["amp"] == r["precision"]) for r in L if r["name"] != "peak")' \
    "race.jsonl: each line's mode and amp"
# images/s from the images_per_s column (test_loss is the one before it):
# the median of 40000, 44000, 44500
jsonl_check out1/race.jsonl '[r["img_per_s"] for r in L if r["name"] == "gnc-bf16"] == [44000] and [r["test_acc"] for r in L if r["name"] == "gnc-bf16"] == [0.83]' \
    "gnc-bf16: images/s 44000 and test acc 0.83 from the CSV"
jsonl_check out1/race.jsonl '[round(r["img_per_s"]) for r in L if r["name"] == "torch-eager-tf32"] == [22000]' \
    "torch-eager-tf32: images/s from its summary"
# shellcheck disable=SC2034 # has (tests/lib.sh) reads $out
out=$(cat out1/race.md)
has "SGD lr 0.1 with momentum 0.9 on both sides (gnc train --momentum 0.9, torch_fmnist.py --momentum 0.9)"
for c in ${want#peak }; do
    grep -q "^| $c | " out1/race.md && ok || bad "race.md has no row $c"
done
has "| torch-eager-bf16 | bf16 | nchw |"
has "| torch-eager-bf16-cl | bf16 | channels-last |"
has "| bf16 | 44000 | torch-compile-max-bf16-cl (compile-max, channels-last) | 30000 | 0.68 |"
has "| tf32 | 15000 | torch-eager-tf32 (eager, nchw) | 22000 | 1.47 |"
has "| fp32 | 6700 | torch-eager-fp32 (eager, nchw) | 11000 | 1.64 |"

# every flag given to the stand-in is one the real gnc takes
for cmd in compile train; do
    help=$("$gnc" help "$cmd" 2>&1)
    for f in $(grep "^gnc $cmd " calls.log | grep -oE -- ' --[a-z-]+' | sort -u); do
        grep -qE -- "^ +$f( |$)" <<<"$help" && ok || bad "gnc $cmd takes no $f (gnc help $cmd)"
    done
done

# ------------------------------------- the folder of another momentum, refused
: >calls.log
expect 2 "${race[@]}" out1 --momentum 0 --epochs 3
has "holds runs with momentum 0.9; this race is at 0: give it a folder of its own"
[ -s calls.log ] && bad "a refused race ran something: $(cat calls.log)" || ok
expect 2 "${race[@]}" out9 --momentum 1.5
has "--momentum needs a number in [0, 1], got '1.5'"
expect 2 "${race[@]}" out9 --momentum x
has "--momentum needs a number in [0, 1], got 'x'"

# -------------------- --done: lines of another momentum, or none, not merged
cat >done.jsonl <<'EOF'
{"name": "peak", "gpu": "NVIDIA H200", "momentum": 0.0, "tflops": 555.0}
{"name": "gnc-bf16", "gpu": "NVIDIA H200", "framework": "gnc", "precision": "bf16", "layout": "nchw", "momentum": 0.0, "img_per_s": 99999.0}
{"name": "gnc-tf32", "gpu": "NVIDIA H200", "framework": "gnc", "precision": "tf32", "layout": "nchw", "momentum": 0.9, "img_per_s": 77777.0}
{"name": "torch-eager-fp32-cl", "gpu": "NVIDIA H200", "img_per_s": 88888.0}
EOF
: >calls.log
expect 0 "${race[@]}" out2 --momentum 0.9 --epochs 3 --done done.jsonl \
    --only peak,gnc-bf16,gnc-tf32,torch-eager-fp32-cl
has "done.jsonl: gnc-bf16 ran with momentum 0, this race with 0.9: not merged, not comparable"
has "done.jsonl: torch-eager-fp32-cl ran with momentum none recorded, this race with 0.9: not merged"
has "gnc-tf32: done already"
has "peak: done already"
got=$(configs)
[ "$got" = "gnc-bf16 torch-eager-fp32-cl " ] && ok || bad "after --done, ran '$got', want 'gnc-bf16 torch-eager-fp32-cl '"
jsonl_check out2/race.jsonl 'sorted(r["name"] for r in L) == ["gnc-bf16", "gnc-tf32", "peak", "torch-eager-fp32-cl"] and all(r["momentum"] == 0.9 for r in L if r["name"] != "peak")' \
    "out2/race.jsonl: the merged gnc-tf32 and peak, the new gnc-bf16 and torch-eager-fp32-cl, all at 0.9"
grep -qE '99999|88888' out2/race.md && bad "race.md shows a run of another momentum: $(cat out2/race.md)" || ok
grep -q '| gnc-tf32 | tf32 | nchw | NVIDIA H200 |  | 77777 |' out2/race.md && ok ||
    bad "race.md lacks the merged gnc-tf32: $(cat out2/race.md)"

# ---------------- the budget: max-autotune left when it does not fit, the rest run
: >calls.log
expect 0 "${race[@]}" out3 --epochs 1 --budget 300
has "torch-compile-max-bf16-cl: left for the next span (needs about 480 s, an estimate;"
has "momentum 0 on both sides"
got=$(configs)
want3="peak gnc-bf16 torch-eager-bf16-cl torch-eager-bf16 gnc-tf32 torch-eager-tf32-cl torch-eager-tf32 gnc-fp32 torch-eager-fp32-cl torch-eager-fp32 torch-compile-bf16-cl "
[ "$got" = "$want3" ] && ok || bad "budget 300: ran '$got', want '$want3'"
n_m=$(grep -E '^(gnc compile|gnc train|torch) ' calls.log | grep -c -- ' --momentum 0\( \|$\)')
[ "$n_m" = "$(grep -cE '^(gnc compile|gnc train|torch) ' calls.log)" ] && ok ||
    bad "the default momentum is not --momentum 0 on both sides: $(cat calls.log)"
jsonl_check out3/race.jsonl 'len(L) == 11 and all(r["momentum"] == 0 for r in L)' "out3/race.jsonl: momentum 0"

summary gpu-race
