#!/usr/bin/env bash
# CLI tests: run.sh GNC SOURCE_DIR WORK_DIR.  Each check prints "ok" or "FAIL" with
# what differed; the script ends with "N passed, M failed" and fails if any did.
set -u
gnc=$1 src=$2 work=$3
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# help and usage errors
expect 0 "$gnc" --help;                    has "usage: gnc <command>"
expect 0 "$gnc" dump --help;               has "usage: gnc dump"
expect 0 "$gnc" help run;                  has "--seed N"
expect 0 "$gnc" --version;                 has "gnc 0."
has "built with:"
has "OpenBLAS "     # the CPU kernels' library and the kernels it picked here
out=$(OPENBLAS_CORETYPE=Haswell "$gnc" --version)
has "(its Haswell kernels, as OPENBLAS_CORETYPE sets)"
# the commit it was built from (this checkout's, built just now)
if head=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null); then has "(commit $head"; fi
if grep -q "the CUDA runtime: --device cuda" <<<"$out"; then
    fake=$(dirname "$gnc")/tests/fakecuda
    out=$(GNC_CUDA_LIBDIR=/nonexistent-gnc "$gnc" --version)
    if [ "$(grep -c 'does not load' <<<"$out")" = 4 ]; then ok; else bad "--version with no libraries: $out"; fi
    if [ -e "$fake/libcuda.so.1" ]; then
        out=$(GNC_CUDA_LIBDIR=$fake "$gnc" --version)
        if [ "$(grep -cE '^  lib[a-zA-Z]+\.so\.[0-9]+ +loads ' <<<"$out")" = 4 ]; then ok; else bad "--version with the stand-ins: $out"; fi
    fi
else
    has "no CUDA runtime"
fi
expect 2 "$gnc";                           has "usage: gnc"
expect 2 "$gnc" dmp x.net;                 has "unknown command 'dmp'; did you mean 'dump'?"
expect 2 "$gnc" dump;                      has "no input file"
expect 2 "$gnc" dump --frobnicate x.net;   has "unknown option '--frobnicate'"
expect 2 "$gnc" dump -D batch x.net;       has "-D needs NAME=VALUE"
expect 2 "$gnc" run --seed -3 x.net;       has "--seed needs a non-negative integer"
expect 2 "$gnc" run --threads 0 x.net;     has "--threads needs an integer"
expect 2 "$gnc" compile --seed 1 x.net;    has "does not apply to this command"
expect 2 "$gnc" dump a.net b.net;          has "more than one input file"
expect 1 "$gnc" dump missing.net;          has "missing.net: error: cannot read file"
expect 2 "$gnc" compile x.net --gpu 2;     has "unknown option '--gpu'; did you mean '--gpus'?"
expect 2 "$gnc" train x.net --chekpoint=a; has "unknown option '--chekpoint=a'; did you mean '--checkpoint'?"

# every option a command's help lists is one the command takes (the help is
# made from the parser's table), and the help lists every one it takes
for cmd in dump compile run train eval inspect; do
    listed=$("$gnc" $cmd --help | grep -oE '^  (-[A-Za-z]|--[a-z-]+)' | sort -u)
    n=0
    for opt in $listed; do
        [ "$opt" = -h ] && continue
        err=$("$gnc" $cmd "$opt" 2>&1 >/dev/null)
        n=$((n + 1))
        if grep -qE "does not apply|unknown option" <<<"$err"; then bad "gnc $cmd --help lists $opt, which gnc $cmd refuses: $err"; else ok; fi
    done
    [ $n -gt 0 ] || bad "gnc $cmd --help lists no options"
done
for opt in --gpus --dump-plan --checkpoint --weights --json --train; do
    for cmd in dump compile run train eval inspect; do
        err=$("$gnc" $cmd "$opt" 2>&1 >/dev/null)
        takes=$(grep -qE "does not apply|unknown option" <<<"$err" && echo no || echo yes)
        lists=$("$gnc" $cmd --help | grep -qE "^  $opt( |=|\[|$)" && echo yes || echo no)
        if [ "$takes" = "$lists" ]; then ok; else bad "gnc $cmd: takes $opt: $takes, its help lists it: $lists"; fi
    done
done

# bad -D values are located errors
expect 1 "$gnc" dump "$src/models/lenet.net" -D batchh=3
has "model 'lenet' has no parameter 'batchh'; did you mean 'batch'?"
expect 1 "$gnc" dump "$src/models/lenet.net" -D batch=abc
has "the value must be a number"
expect 1 "$gnc" dump "$src/models/lenet.net" -D batch=0
has "a dimension must be a positive integer"

# IR round trip of every model: dump, parse back, dump again, identical
for m in "$src"/models/*.net; do
    name=$(basename "$m" .net)
    expect 0 "$gnc" dump "$m" -D batch=4 -o "$name.gir"
    expect 0 "$gnc" dump "$name.gir" -o "$name.again.gir"
    if cmp -s "$name.gir" "$name.again.gir"; then ok; else bad "$name: IR text does not round-trip"; fi
    expect 0 "$gnc" compile "$m"
    has "model $name"
done
# a model or a plan from a pipe, read once (its first 4096 bytes went to the
# probe for a plan, and training reads the model twice)
expect 0 bash -c "cat '$src/models/resnet18.net' | '$gnc' dump /dev/stdin --train -o piped.gir"
expect 0 "$gnc" dump "$src/models/resnet18.net" --train -o file.gir
if cmp -s <(sed 's/ @[^ ]*:/ @:/' piped.gir) <(sed 's/ @[^ ]*:/ @:/' file.gir); then ok
else bad "a model from a pipe dumps otherwise"; fi
expect 0 "$gnc" compile "$src/models/lenet.net" -D batch=2 --no-kernels -o piped.gnc
expect 0 bash -c "cat piped.gnc | '$gnc' run /dev/stdin --device cpu"
has "logits: f32[2, 10]"
expect 0 "$gnc" compile "$src/models/resnet18.net"
has "parameters: 11175818 trainable"
has "(0.9116 GFLOP per sample of 256)"   # 0.91 GFLOP per 28x28 image forward, as the issue says

# the pass pipeline, memory plan and statistics
expect 0 "$gnc" compile "$src/models/resnet18.net" --stats
for key in ops fused_nodes kernels memory.peak_bytes memory.lower_bound_bytes \
           memory.no_reuse_bytes params.bytes compile_ms; do has "$key: "; done
expect 0 "$gnc" compile "$src/models/resnet18.net" --train --stats -D batch=256
peak=$(sed -n 's/^memory.peak_bytes: //p' <<<"$out"); lb=$(sed -n 's/^memory.lower_bound_bytes: //p' <<<"$out")
if awk -v p="$peak" -v l="$lb" 'BEGIN { exit !(p <= 1.10 * l && p >= l) }'; then ok; else bad "resnet18 training plan $peak vs lower bound $lb"; fi
# what the GPU's run would be: the optimizer in one launch, nothing copied
for key in steps kernels library_calls communication copies copy_bytes kernel_read_bytes \
           kernel_written_bytes smallest_big_grid predicted_run_ms launch_ms; do
    has "cuda.d0.$key: "; done
# the run's prediction counts every launch: 149 steps of 3 us
launch=$(sed -n 's/^cuda.d0.launch_ms: //p' <<<"$out"); run=$(sed -n 's/^cuda.d0.predicted_run_ms: //p' <<<"$out")
awk -v l="$launch" -v r="$run" 'BEGIN { exit !(l == 0.447 && r > l) }' && ok ||
    bad "resnet18's run: $run ms predicted, $launch ms of launches"
has "cuda.d0.copies: 0"; has "cuda.d0.library_calls: 62"; has "cuda.d0.steps: 149"
# reductions in parts: every kernel over a million elements fills an H100 (264 blocks)
grid=$(sed -n 's/^cuda.d0.smallest_big_grid: //p' <<<"$out")
[ "${grid:-0}" -ge 264 ] && ok || bad "resnet18's smallest grid over 1M elements is $grid blocks"
# resnet18 inference: every batchnorm folded into its convolution, every ReLU and
# residual add fused into a producer
expect 0 "$gnc" dump "$src/models/resnet18.net" --passes=simplify,fold_bn,schedule,fuse
if [ "$(grep -cE '= batchnorm\(' <<<"$out")" = 0 ] &&
   [ "$(grep -cE '^  %[^ ]+: [^=]+= (relu|add)\(' <<<"$out")" = 0 ] &&
   [ "$(grep -cE '^    %[^ ]+: [^=]+= relu\(' <<<"$out")" = 17 ]; then ok
else bad "resnet18: a batchnorm left, or a relu or add outside a fused node"; fi
expect 0 "$gnc" compile "$src/models/resnet18.net" --stats
has "fused_nodes: 17"
has "kernels: 23"
has "weight_ops: 102"
expect 0 "$gnc" compile "$src/models/resnet18.net" --train --remat
has "remat: 9 batchnorm-ReLU results recomputed"
has "saved), "
expect 0 "$gnc" compile "$src/models/lenet.net" --dump-memory
has "# memory plan: arena"
has "%fc3"
expect 0 "$gnc" compile "$src/models/lenet.net" --time-passes --verify-each
has "pass simplify"
has "pass schedule"
expect 0 "$gnc" compile "$src/models/lenet.net" --passes=simplify --dump-ir=after:simplify
has "# ---- IR after simplify"
mkdir -p dumps
expect 0 "$gnc" compile "$src/models/lenet.net" --train --dump-ir=all --dump-dir dumps
if [ -s dumps/00-before-input.gir ] && [ -s dumps/02-after-schedule.gir ]; then ok; else bad "--dump-dir wrote $(ls dumps)"; fi
expect 0 "$gnc" dump dumps/02-after-schedule.gir
expect 2 "$gnc" compile "$src/models/lenet.net" --passes=simplify,frobnicate
has "unknown pass"
expect 2 "$gnc" compile "$src/models/lenet.net" --dump-ir=during:fold
has "--dump-ir needs all, before:PASS or after:PASS"

# -o writes nothing on failure, and never leaves a temporary file
printf 'model m() {\n    input x: f32[2]\n    output y = relu(x) +\n}\n' >broken.net
expect 1 "$gnc" dump broken.net -o broken.gir
if [ ! -e broken.gir ] && ! ls broken.gir.tmp* >/dev/null 2>&1; then ok; else bad "-o left a file after an error"; fi

# IR text errors are located
printf 'graph g {\n  input %%x: f33[2]\n}\n' >bad.gir
expect 1 "$gnc" dump bad.gir;              has "bad.gir:2:"
expect 1 "$gnc" dump bad.gir -D batch=2;   has "-D and --model apply to .net models"

# inference: deterministic for a seed, different across seeds
expect 0 "$gnc" run "$src/models/lenet.net" -D batch=4 --seed 1;  a=$out
expect 0 "$gnc" run "$src/models/lenet.net" -D batch=4 --seed 1;  b=$out
expect 0 "$gnc" run "$src/models/lenet.net" -D batch=4 --seed 2;  c=$out
strip() { grep -vE '^(time|memory):' <<<"$1"; }
if [ "$(strip "$a")" = "$(strip "$b")" ]; then ok; else bad "run is not deterministic for a seed"; fi
if [ "$(strip "$a")" != "$(strip "$c")" ]; then ok; else bad "run ignores --seed"; fi
has "logits: f32[4, 10]"
expect 0 "$gnc" run "$src/models/mlp.net" -D batch=2 --repeat 3
has "probs: f32[2, 10]"
# random labels below the class count of the loss that reads them (lenet of 5
# classes, every seed of 8), indices below an embedding's rows (the least of
# two embeddings: 3), labels through a reshape, and an input that nothing
# bounds in [0, 10)
for seed in 1 2 3 4 5 6 7 8; do
    expect 0 "$gnc" run "$src/models/lenet.net" -D batch=64 -D classes=5 --seed $seed
done
has "loss: "
cat >idx.net <<'EOF'
model idx(batch = 64) {
    input ids: i32[batch]
    input labels: i32[batch, 1]
    input other: i32[batch]
    e = embedding(ids, 3, 4, name = "small") + embedding(ids, 7, 4, name = "large")
    output logits = dense(e, 6)
    output other
    loss cross_entropy(logits, reshape(labels, [batch]))
}
EOF
for seed in 1 2 3 4; do expect 0 "$gnc" run idx.net --seed $seed --json; done
if /usr/bin/python3 -c 'import json, sys; v = json.loads(sys.argv[1])["outputs"]["other"]["values"]
sys.exit(not (min(v) >= 0 and max(v) == 9))' "$out"; then ok; else bad "other: not in [0, 10)"; fi

# .npy outputs, then fed back as inputs
expect 0 "$gnc" run "$src/models/lenet.net" -D batch=2 --seed 3 -o outs
if [ -s outs/logits.npy ] && head -c 6 outs/logits.npy | grep -q NUMPY; then ok; else bad "-o DIR wrote no logits.npy"; fi
expect 1 "$gnc" run "$src/models/lenet.net" -D batch=2 --input image=outs/logits.npy
has "does not match the input's f32[2, 1, 28, 28]"
expect 1 "$gnc" run "$src/models/lenet.net" -D batch=2 --input outs/logits.npy
has "name one"
expect 1 "$gnc" run "$src/models/lenet.net" -D batch=2 --input nosuch=outs/logits.npy
has "the model has no input 'nosuch'"
printf 'garbage' >junk.npy
expect 1 "$gnc" run "$src/models/lenet.net" -D batch=2 --input image=junk.npy
has "not a .npy file"

# a compile that takes over a second shows NVRTC's progress on a terminal, and
# "compiled in" counts NVRTC's time (the progress line's seconds are rounded to
# a tenth: 4.39 s shows as 4.4, so within 0.05 s of it)
if "$gnc" --version | grep -q "^  NVRTC" && command -v script >/dev/null; then
    out=$(GNC_CACHE_DIR=$PWD/cold-cache script -qec "'$gnc' compile '$src/models/resnet18.net' --train -o r18.gnc" /dev/null | tr '\r' '\n')
    last=$(grep "compiling CUDA kernels: " <<<"$out" | tail -1)
    total=$(sed -n 's/^compiled in \([0-9.]*\) ms.*/\1/p' <<<"$out")
    nvrtc=$(sed -n 's/.* images (\([0-9.]*\) s)$/\1/p' <<<"$last")
    of=$(sed -n 's/.*kernels: \([0-9]*\) of \([0-9]*\) images.*/\1 \2/p' <<<"$last")
    if [ -n "$of" ] && [ "${of% *}" = "${of#* }" ] && [ -n "$total" ] && [ -n "$nvrtc" ] &&
       [ "$(echo "$total >= ($nvrtc - 0.05) * 1000" | bc)" = 1 ]; then ok; else bad "NVRTC's progress ('$last') or 'compiled in $total ms'"; fi
    out=$(GNC_CACHE_DIR=$PWD/cold-cache2 "$gnc" compile "$src/models/lenet.net" -o l.gnc 2>&1)
    if ! grep -q "compiling CUDA" <<<"$out"; then ok; else bad "NVRTC's progress where standard error is no terminal"; fi
fi

# '-': standard input for FILE and --input, standard output for compile -o
# and --dump-plan (then the summary goes to standard error)
out=$("$gnc" compile - <"$src/models/lenet.net" 2>&1); rc=$?
if [ $rc = 0 ] && grep -qF "model lenet (<stdin>)" <<<"$out"; then ok; else bad "compile - (stdin): exit $rc"; echo "$out" | tail -3; fi
out=$(printf 'model m {\n  input x: f32[2]\n  output y = relu(z)\n}\n' | "$gnc" compile - 2>&1); rc=$?
if [ $rc = 1 ] && grep -qF "<stdin>:" <<<"$out"; then ok; else bad "a bad model on stdin: exit $rc: $out"; fi
"$gnc" compile "$src/models/lenet.net" --no-kernels -o - >stdout.gnc 2>stdout.err; rc=$?
expect 0 "$gnc" inspect stdout.gnc
if [ $rc = 0 ] && cmp -s stdout.gnc <("$gnc" compile "$src/models/lenet.net" --no-kernels -o file.gnc >/dev/null && cat file.gnc) &&
   grep -qF "model lenet" stdout.err; then ok; else bad "compile -o -: exit $rc, or not the plan -o FILE writes"; fi
"$gnc" compile "$src/models/lenet.net" --gpus 2 --dump-plan=- >plan.json 2>plan.err; rc=$?
if [ $rc = 0 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' plan.json &&
   grep -qF "model lenet" plan.err; then ok; else bad "--dump-plan=-: exit $rc, or not JSON alone"; fi
expect 2 "$gnc" compile "$src/models/lenet.net" -o - --dump-plan=-
has "-o - and --dump-plan=- both write to standard output"
expect 0 "$gnc" compile "$src/models/lenet.net" --gpus 2 --stats --dump-plan=both.json
has "fused_nodes: "
if python3 -c 'import json, sys; json.load(open(sys.argv[1]))' both.json; then ok; else bad "--stats with --dump-plan=FILE wrote no plan"; fi

# .npy headers are read as the format has them: a Python dict literal with the
# keys 'descr', 'fortran_order' and 'shape' once each, padded with spaces to a
# '\n'; the data and nothing after it.  mknpy FILE HEADER [DATA_BYTES [PAD]]
# writes a version 1.0 file (PAD, default a space, pads the header to 64 bytes
# before its '\n'); the data is DATA_BYTES zero bytes (default 24: f32[2, 3]).
mknpy() {
    local f=$1 h=$2 bytes=${3:-24} pad=${4:- } n i
    n=$(( (10 + ${#h} + 1 + 63) / 64 * 64 - 10 ))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf %03o $((n & 255)))\\$(printf %03o $((n >> 8)))"
        printf '%s' "$h"
        for ((i = ${#h} + 1; i < n; i++)); do printf '%s' "$pad"; done
        printf '\n'
        head -c "$bytes" /dev/zero
    } >"$f"
}
printf 'model m() {\n    input x: f32[2, 3]\n    output y = relu(x)\n}\n' >tiny.net
R=("$gnc" run tiny.net --device cpu --input)
mknpy plain.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
expect 0 "${R[@]}" x=plain.npy;     has "y: f32[2, 3]"
expect 0 "${R[@]}" x=- <plain.npy;   has "y: f32[2, 3]"
expect 1 "${R[@]}" x=- </dev/null;   has "<stdin>: not a .npy file"
# any whitespace Python takes between the tokens, either quote, no trailing comma
mknpy spaced.npy $'{\n\t"descr"\t: \'<f4\' ,\n  \'fortran_order\':\tFalse,\r\n\t\'shape\' : (\n\t\t2 ,\n\t\t3\n\t)\n}'
expect 0 "${R[@]}" x=spaced.npy;    has "y: f32[2, 3]"
mknpy dup.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (2, 3)}"
expect 1 "${R[@]}" x=dup.npy;       has "dup.npy: malformed .npy header: the key 'shape' appears twice"
mknpy extra.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}"
expect 1 "${R[@]}" x=extra.npy;     has "extra.npy: malformed .npy header: unknown key 'extra'"
# 'shape': in a string is text, not the key: this descr is "<f4, 'shape': (2, 3)"
mknpy instr.npy "{'descr': '<f4' \", 'shape': (2, 3)\", 'fortran_order': False, 'shape': (6,)}"
expect 1 "${R[@]}" x=instr.npy;     has "instr.npy: dtype <f4, 'shape': (2, 3) does not match"
mknpy notuple.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (6)}"
expect 1 "${R[@]}" x=notuple.npy;   has "notuple.npy: malformed .npy header: the shape (6) is not a tuple"
mknpy tabpad.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" 24 $'\t'
expect 1 "${R[@]}" x=tabpad.npy;    has "tabpad.npy: malformed .npy header: the padding after '}'"
mknpy trailing.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" 28
expect 1 "${R[@]}" x=trailing.npy;  has "trailing.npy: has trailing bytes after the data its header describes"
mknpy short.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" 20
expect 1 "${R[@]}" x=short.npy;     has "short.npy: truncated .npy data"
mkdir -p dir.npy
expect 1 "${R[@]}" x=dir.npy;       has "dir.npy: is a directory, not a .npy file"

# run --weights: the parameters from a safetensors file (here bias = [0.5,
# -1.25], so y = bias for x = 0); -o DIR writes the loss beside the outputs
printf 'model d() {\n    input x: f32[2, 3]\n    input t: f32[2, 2]\n    y = dense(x, 2)\n    output y\n    loss mse(y, t)\n}\n' >dense.net
python3 - <<'PY'
import json, struct
w, b = [0.0] * 6, [0.5, -1.25]
data = struct.pack('<6f', *w) + struct.pack('<2f', *b)
h = json.dumps({"dense0.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                "dense0.bias": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]}}).encode()
open('dense.st', 'wb').write(struct.pack('<Q', len(h)) + h + data)
PY
mknpy zeros.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
expect 0 "$gnc" run dense.net --weights dense.st --input x=zeros.npy -o dense-out
has "[0.5 -1.25]"
if [ -s dense-out/y.npy ] && [ -s dense-out/loss.npy ]; then ok; else bad "run -o wrote no loss.npy: $(ls dense-out)"; fi
expect 0 "$gnc" run dense.net --input x=zeros.npy
if ! grep -qF "[0.5 -1.25]" <<<"$out"; then ok; else bad "without --weights, the same bias"; fi
expect 1 "$gnc" run dense.net --weights zeros.npy
has "zeros.npy"
expect 1 "$gnc" run "$src/models/lenet.net" -D batch=2 --weights dense.st
has "dense.st"
# compile --weights: the plan carries them (its weights section), and a run of
# the plan starts from them; a checkpoint that does not fit is refused
expect 0 "$gnc" compile dense.net --weights dense.st -o dw.gnc --no-kernels
expect 0 "$gnc" inspect dw.gnc;    has "weights"
expect 0 "$gnc" run dw.gnc --input x=zeros.npy
has "[0.5 -1.25]"
expect 2 "$gnc" compile dense.net --weights dense.st
has "--weights goes into the plan: it needs -o FILE.gnc"
expect 1 "$gnc" compile "$src/models/lenet.net" -D batch=2 --weights dense.st -o bad.gnc --no-kernels
has "dense.st does not match the model:"
has "conv1.weight: in the model, not in the checkpoint"
if [ ! -e bad.gnc ]; then ok; else bad "a plan whose weights do not fit was written"; fi

# --loss: a model without one (an imported ONNX one) gets it on an output, its
# target a new input; a model with one, an unknown output, a bad spec: errors
cat > noloss.net <<'NET'
model m(batch = 4) {
    input image: f32[batch, 1, 6, 6]
    logits = dense(flatten(image), 3, name = "fc")
    output logits
}
NET
expect 0 "$gnc" dump noloss.net --loss cross_entropy:logits
has "input %label: i32[4]"
has "cross_entropy(%fc, %label)"
has "loss %loss"
expect 0 "$gnc" dump noloss.net --loss mse:logits
has "input %target: f32[4, 3]"
has "mse(%fc, %target)"
expect 0 "$gnc" compile noloss.net --loss cross_entropy:logits --train
expect 1 "$gnc" dump "$src/models/lenet.net" --loss cross_entropy:logits
has "the model has a loss already"
expect 1 "$gnc" dump noloss.net --loss cross_entropy:nope
has "the model has no output 'nope'"
expect 1 "$gnc" dump noloss.net --loss hinge:logits
has "expected cross_entropy:OUTPUT or mse:OUTPUT"
# IR text of data parameters (an imported model's) holds no values: a run
# without --weights is refused, one with them runs
"$gnc" dump dense.net | sed 's/= uniform([^)]*)/= data/' > dense-data.gir
expect 1 "$gnc" run dense-data.gir --input x=zeros.npy
has "are not in IR text"
expect 0 "$gnc" run dense-data.gir --input x=zeros.npy --weights dense.st
has "[0.5 -1.25]"
expect 1 "$gnc" compile dense-data.gir -o dd.gnc --no-kernels
has "are not in IR text"
if [ ! -e dd.gnc ]; then ok; else bad "a plan without the data of its parameters was written"; fi

# --format dot: the golden picture of LeNet pipelined over 2 devices (fused
# kernels, devices, sends and recvs); drawn by Graphviz where it is installed
part=(-D batch=8 --gpus 2 --strategy pipeline --passes simplify,schedule,partition,fuse)
expect 0 "$gnc" dump "$src/models/lenet.net" "${part[@]}" --format dot -o lenet.dot
same lenet.dot "$src/tests/cli/lenet-pipeline.dot" "dump --format dot; regenerate the golden file if the change is meant"
expect 2 "$gnc" dump "$src/models/lenet.net" --format svg
has "--format needs ir or dot, got 'svg'"
if command -v dot >/dev/null; then
    expect 0 "$gnc" dump "$src/models/lenet.net" "${part[@]}" --format dot -o lenet.svg
    if grep -q "<svg" lenet.svg && grep -q "device 1" lenet.svg; then ok; else bad "lenet.svg is no drawing of both devices"; fi
fi
expect 1 env PATH=/nonexistent "$gnc" dump "$src/models/lenet.net" --format dot -o nodot.svg
has "Graphviz's dot is not installed"
if [ ! -e nodot.svg ]; then ok; else bad "a failed drawing left nodot.svg"; fi

# the predicted step (compile --trace), the measured one (run and train
# --profile=FILE), the memory plan (--dump-memory=FILE.json|.svg), checked
# by their schema
expect 0 "$gnc" compile "$src/models/lenet.net" "${part[@]:0:6}" --train --trace pred.json
expect 0 python3 "$src/tests/cli/pictures.py" trace pred.json 2 predicted
expect 0 "$gnc" run "$src/models/lenet.net" -D batch=8 --devices cpu:2 --strategy pipeline --profile=meas.json
has "total"
expect 0 python3 "$src/tests/cli/pictures.py" trace meas.json 2 measured
expect 0 "$gnc" train "$src/models/lenet.net" --steps 2 --batch 16 --profile=train.json
expect 0 python3 "$src/tests/cli/pictures.py" trace train.json 1 measured
expect 0 "$gnc" compile "$src/models/lenet.net" "${part[@]:0:6}" --train --dump-memory=mem.json
has "memory:"
expect 0 "$gnc" compile "$src/models/lenet.net" "${part[@]:0:6}" --train --dump-memory=mem.svg
expect 0 python3 "$src/tests/cli/pictures.py" memory mem.json mem.svg
expect 1 "$gnc" compile "$src/models/lenet.net" --dump-memory=mem.txt
has "write FILE.json or FILE.svg"
expect 2 "$gnc" compile "$src/models/lenet.net" --dump-memory --json
has "--json and --dump-memory without a file"
expect 0 "$gnc" compile "$src/models/lenet.net" "${part[@]:0:6}" --train --trace pred.svg
expect 0 python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse('pred.svg').getroot(); n = len(r.findall('{http://www.w3.org/2000/svg}rect')); sys.exit(0 if n > 20 else 1)"
expect 1 "$gnc" compile "$src/models/lenet.net" --trace /nonexistent/t.json
has "cannot write '/nonexistent/t.json'"

# an imported ONNX model: its weights run (directly and from a plan, which
# carries them), and --loss makes it trainable
onnx=$src/tests/onnx/models
if "$gnc" dump "$onnx/lenet.onnx" >/dev/null 2>&1; then
    expect 0 "$gnc" run "$onnx/lenet.onnx" --input image="$onnx/lenet.input.npy" -o onnx-direct
    expect 0 "$gnc" compile "$onnx/lenet.onnx" -o lenet-onnx.gnc --no-kernels
    expect 0 "$gnc" inspect lenet-onnx.gnc;    has "weights"
    expect 0 "$gnc" run lenet-onnx.gnc --input image="$onnx/lenet.input.npy" -o onnx-plan
    same onnx-direct/logits.npy onnx-plan/logits.npy "lenet.onnx run directly and from its plan"
    expect 0 "$gnc" dump "$onnx/lenet.onnx" -o lenet-onnx.gir
    expect 1 "$gnc" run lenet-onnx.gir;        has "are not in IR text"
    expect 0 "$gnc" train "$onnx/lenet.onnx" --loss cross_entropy:logits --steps 3
    has "step 3/"
    expect 1 "$gnc" train "$onnx/lenet.onnx" --steps 3
    has "has no loss to train on"
fi

summary cli
