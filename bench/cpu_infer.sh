#!/usr/bin/env bash
# CPU inference, gnc against PyTorch on the same machine in the same run.
#   bash bench/cpu_infer.sh [BUILD_DIR]      (default: build)
# Prints each side's CPU kernels (gnc: its libraries; PyTorch: its version and
# instruction set); per model both medians and the ratio gnc/PyTorch (the bar for
# resnet18 at batch 64 is <= 2.0), and the convolution kernels oneDNN ran for each
# side; and the time of `gnc dump models/resnet18.net` (bar: 50 ms).
set -euo pipefail
. "$(dirname "$0")/common.sh" "$0" "$@"
threads=$(nproc)
repeat=10
printf '%-9s %5s %12s %12s %7s\n' model batch gnc_ms torch_ms ratio
for spec in resnet18:64 lenet:256; do
    model=${spec%:*} batch=${spec#*:}
    g=$("$gnc" run "$root/models/$model.net" -D batch=$batch --repeat $repeat --threads $threads |
        sed -n 's/^time: \([0-9.]*\) ms.*/\1/p')
    t=$(/usr/bin/python3 "$root/bench/torch_infer.py" --model $model --batch $batch \
        --repeat $repeat --threads $threads | /usr/bin/python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["median_ms"])')
    printf '%-9s %5d %12.2f %12.2f %7.2f\n' $model $batch "$g" "$t" "$(awk -v a="$g" -v b="$t" 'BEGIN { print a / b }')"
    # the kernels behind the figures: one more run of each side, verbose
    echo "  convolutions: gnc $(conv_kernels "$gnc" run "$root/models/$model.net" -D batch=$batch \
        --repeat 1 --threads $threads); PyTorch $(conv_kernels /usr/bin/python3 \
        "$root/bench/torch_infer.py" --model $model --batch $batch --repeat 1 --threads $threads)"
done

# gnc dump of resnet18: parse, elaborate, verify, print; median of 10 runs
ms=()
for i in $(seq 10); do
    t0=$(date +%s%N); "$gnc" dump "$root/models/resnet18.net" >/dev/null; t1=$(date +%s%N)
    ms+=($(( (t1 - t0) / 1000 )))
done
med=$(printf '%s\n' "${ms[@]}" | sort -n | sed -n 5p)
printf 'gnc dump models/resnet18.net: %.1f ms (median of 10, whole process)\n' "$(awk -v a="$med" 'BEGIN { print a / 1000 }')"
