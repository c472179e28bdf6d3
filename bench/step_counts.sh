#!/usr/bin/env bash
# What one training step asks of a GPU, from the plan gnc would compile (no
# GPU needed): steps, kernel launches, library calls, communication calls,
# copies and their bytes, and the smallest grid among kernels over a million
# elements, for lenet and resnet18 at fp32 and bf16 on 1 and 2 devices (data
# parallel), batch 256.  Device 0's run; a Markdown table (docs/perf.md).
#   bash bench/step_counts.sh [path/to/gnc]
set -euo pipefail
gnc=${1:-build/gnc}
echo "| model | precision | devices | steps | kernels | library calls | communication | copies | bytes copied | smallest grid over 1M elements |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for m in lenet resnet18; do
    for p in fp32 bf16; do
        for d in 1 2; do
            flags=(--train --precision "$p" -D batch=256)
            [ "$d" = 2 ] && flags+=(--gpus 2 --strategy data)
            stats=$("$gnc" compile "models/$m.net" "${flags[@]}" --stats)
            get() { awk -F': ' -v k="cuda.d0.$1" '$1 == k {print $2}' <<<"$stats"; }
            echo "| $m | $p | $d | $(get steps) | $(get kernels) | $(get library_calls) |" \
                 "$(get communication) | $(get copies) | $(get copy_bytes) | $(get smallest_big_grid) |"
        done
    done
done
