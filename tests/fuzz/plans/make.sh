#!/usr/bin/env bash
# Writes the seed plans of the plan loader's fuzzer (tests/fuzz/fuzz_plan.c) again:
#   bash tests/fuzz/plans/make.sh build/gnc      (from the repository's root)
# small.net in five shapes (inference, a training step with Adam, data-, tensor-
# and pipeline-parallel on 2 devices) and lenet: every section kind gnc writes,
# collectives, sends and shards; --no-kernels keeps them small, and
# small-kernels.gnc (one arch, with gnc built with NVRTC) has the kernels'
# sections.  The ctest plan_cli checks that they load.
set -euo pipefail
gnc=${1:?usage: make.sh GNC}
dir=tests/fuzz/plans
"$gnc" compile $dir/small.net --no-kernels -o $dir/small.gnc >/dev/null
"$gnc" compile $dir/small.net --train --optimizer adam --no-kernels -o $dir/small-train.gnc >/dev/null
"$gnc" compile $dir/small.net --train -D batch=4 --devices cpu:2 --strategy data \
    --no-kernels -o $dir/small-data2.gnc >/dev/null
"$gnc" compile $dir/small.net -D batch=4 --devices cpu:2 --strategy tensor \
    --no-kernels -o $dir/small-tensor2.gnc >/dev/null
"$gnc" compile $dir/small.net -D batch=4 --devices cpu:2 --strategy pipeline \
    --no-kernels -o $dir/small-pipeline2.gnc >/dev/null
"$gnc" compile models/lenet.net -D batch=2 --no-kernels -o $dir/lenet.gnc >/dev/null
"$gnc" compile $dir/small.net --arch sm_80 -o $dir/small-kernels.gnc >/dev/null
