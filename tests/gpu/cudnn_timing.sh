#!/usr/bin/env bash
# cuDNN's algorithms timed at open and kept (runtime/cuda/cuda_lib.c, "cuDNN's
# timed choices"), on the stand-ins, which count cudnnFind calls
# (GNC_FAKECUDA_STATS):
#   cudnn_timing.sh GNC SOURCE_DIR WORK_DIR FAKECUDA_DIR
# 1. a first open times each convolution once and keeps a file per problem;
# 2. a second reads them back and times none; gnc inspect lists them;
# 3. a damaged file, or another cuDNN version, is timed again;
# 4. GNC_CUDNN_TIMING=0 times nothing and keeps nothing;
# 5. a training step: every convolution timed once.
# Exit 77 (skipped) where gnc has no NVRTC to compile the kernels.
set -u
gnc=$(realpath "$1") src=$(realpath "$2") work=$3 fake=$(realpath "$4")
. "$src/tests/lib.sh"
on_stand_in cudnn_timing
# finds: the stand-in's cudnnFind calls in the last run
finds() { sed -n 's/^cudnn.finds //p' stats; }
entries() { find cache/cudnn -name '*.txt' 2>/dev/null | wc -l; }
run() { rm -f stats; expect 0 env GNC_FAKECUDA_STATS="$work/stats" "$@"; }

expect 0 "$gnc" compile "$src/models/lenet.net" -D batch=8 --precision bf16 -o l.gnc
run "$gnc" run l.gnc --device cuda
n=$(finds)
if [ "$n" = 2 ] && [ "$(entries)" = 2 ]; then ok; else bad "first open: $n finds, $(entries) entries (want 2, 2)"; fi
f=$(find cache/cudnn -name '*.txt' | head -1)
if grep -q '^gpu .*, cudnn 90000, forward' "$f" && grep -qE '^algo [0-9]+ math [0-9] ms [0-9.]+$' "$f"
then ok; else bad "an entry: $(cat "$f")"; fi
run "$gnc" run l.gnc --device cuda
if [ "$(finds)" = 0 ]; then ok; else bad "second open timed $(finds) (want 0)"; fi
# gnc inspect lists them under their steps, with no GPU needed
expect 0 "$gnc" inspect l.gnc
n=$(grep -cE '^ +cuDNN, timed on .*, cudnn 90000: algorithm [0-9]+, [0-9.]+ ms$' <<<"$out")
if [ "$n" = 2 ]; then ok; else bad "inspect lists $n kept choices (want 2): $out"; fi
expect 0 "$gnc" inspect l.gnc --json
python3 -c 'import json,sys; c=json.loads(sys.argv[1])["devices"][0]["cudnn_choices"]
assert len(c) == 2 and all(x["ms"] > 0 and x["algorithm"] >= 0 for x in c), c' "$out" && ok ||
    bad "inspect --json: $out"
head -c 20 "$f" >"$f.cut" && mv "$f.cut" "$f"
run "$gnc" run l.gnc --device cuda
if [ "$(finds)" = 1 ] && grep -qE '^algo ' "$f"; then ok; else bad "a damaged entry: $(finds) finds, $(cat "$f")"; fi
run env GNC_FAKECUDA_CUDNN_VERSION=90100 "$gnc" run l.gnc --device cuda
if [ "$(finds)" = 2 ] && [ "$(entries)" = 4 ]; then ok; else bad "another cuDNN: $(finds) finds, $(entries) entries"; fi
rm -rf cache
run env GNC_CUDNN_TIMING=0 "$gnc" run l.gnc --device cuda
if [ "$(finds)" = 0 ] && [ "$(entries)" = 0 ]; then ok; else bad "GNC_CUDNN_TIMING=0: $(finds) finds, $(entries) entries"; fi

# 5: a training step (lenet's 5 convolutions: 2 forward, 1 backward data, 2
# backward filter), each timed once
data=/usr/share/datasets/fashion-mnist
expect 0 "$gnc" compile "$src/models/lenet.net" -D batch=8 --precision bf16 --train -o t.gnc
run "$gnc" train t.gnc --device cuda --steps 2 --data "$data"
if [ "$(finds)" = 5 ] && [ "$(entries)" = 5 ]; then ok
else bad "training: $(finds) finds, $(entries) entries (want 5, 5)"; fi
# 6: the non-deterministic algorithms timed fastest: taken, but not with
# --deterministic (the problem's text says so, and its choice is another)
rm -rf cache
run env GNC_FAKECUDA_NONDET_FASTEST=1 "$gnc" train t.gnc --device cuda --steps 1 --data "$data"
# the backward filter's ALGO_0 and ALGO_3 are non-deterministic
if grep -lq 'backward_filter' cache/cudnn/*.txt && ! grep -l 'backward_filter' cache/cudnn/*.txt |
    xargs grep -LE '^algo (0|3) ' | grep -q .; then ok
else bad "the fastest (non-deterministic) filter gradients not taken: $(cat cache/cudnn/*.txt)"; fi
rm -rf cache
run env GNC_FAKECUDA_NONDET_FASTEST=1 "$gnc" train "$src/models/lenet.net" -D batch=8 \
    --precision bf16 --deterministic --device cuda --steps 1 --data "$data"
# (deterministic mode's micro-shards and the evaluation: more problems than 5)
if [ "$(grep -l ', deterministic$' cache/cudnn/*.txt | wc -l)" = "$(entries)" ] &&
    [ "$(entries)" -ge 5 ] &&
    ! grep -l 'backward_filter' cache/cudnn/*.txt | xargs grep -qE '^algo (0|3) '; then ok
else bad "--deterministic: $(cat cache/cudnn/*.txt | tr '\n' ' ')"; fi
summary cudnn_timing
