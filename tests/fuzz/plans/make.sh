#!/usr/bin/env bash
# Writes the seed plans of the plan loader's fuzzer (tests/fuzz/fuzz_plan.c) again:
#   bash tests/fuzz/plans/make.sh build/gnc      (from the repository's root)
# small.net in five shapes (inference, a training step with Adam, data-, tensor-
# and pipeline-parallel on 2 devices) and lenet: every section kind gnc writes,
# collectives, sends and shards.  The ctest plan_cli checks that they load.
set -euo pipefail
gnc=${1:?usage: make.sh GNC}
dir=tests/fuzz/plans
"$gnc" compile $dir/small.net -o $dir/small.gnc >/dev/null
"$gnc" compile $dir/small.net --train --optimizer adam -o $dir/small-train.gnc >/dev/null
"$gnc" compile $dir/small.net --train -D batch=4 --devices cpu:2 --strategy data \
    -o $dir/small-data2.gnc >/dev/null
"$gnc" compile $dir/small.net -D batch=4 --devices cpu:2 --strategy tensor \
    -o $dir/small-tensor2.gnc >/dev/null
"$gnc" compile $dir/small.net -D batch=4 --devices cpu:2 --strategy pipeline \
    -o $dir/small-pipeline2.gnc >/dev/null
"$gnc" compile models/lenet.net -D batch=2 -o $dir/lenet.gnc >/dev/null
