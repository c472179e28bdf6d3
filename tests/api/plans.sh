#!/usr/bin/env bash
# The plans the API tests run: plans.sh GNC SOURCE_DIR WORK_DIR.
#   lenet.gnc        lenet inference, batch 4, one device
#   lenet-train2.gnc lenet's training step (SGD, momentum 0.9), batch 8, data-parallel on 2
#   mlp-tensor2.gnc  mlp inference, batch 4, tensor-parallel on 2 (shards)
set -euo pipefail
gnc=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$gnc" compile "$src/models/lenet.net" -D batch=4 -o "$work/lenet.gnc" >/dev/null
"$gnc" compile "$src/models/lenet.net" --train -D batch=8 --momentum 0.9 --devices cpu:2 \
    --strategy data -o "$work/lenet-train2.gnc" >/dev/null
"$gnc" compile "$src/models/mlp.net" -D batch=4 --devices cpu:2 --strategy tensor \
    -o "$work/mlp-tensor2.gnc" >/dev/null
echo "plans: $(ls "$work")"
