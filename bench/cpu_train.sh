#!/usr/bin/env bash
# CPU training throughput, gnc against PyTorch (../shared/bench/torch_fmnist.py, eager,
# PyTorch's default initializers) on the same machine in the same run, on the real
# Fashion-MNIST data:
#   bash bench/cpu_train.sh [BUILD_DIR]      (default: build)
# Prints each side's CPU kernels, then images/s of both and the ratio gnc/PyTorch (the
# bar is >= 1.0) for lenet (batch 256, SGD lr 0.1 momentum 0.9, 100 steps) and resnet18
# (batch 32, 12 steps), with the convolution kernels each side ran.
# gnc leaves its first step out of the figure, PyTorch its three warm-up steps.
# Each side times its steps only (no start-up, no evaluation).
set -euo pipefail
. "$(dirname "$0")/common.sh" "$0" "$@"
torch_fmnist=$root/../shared/bench/torch_fmnist.py
data=/usr/share/datasets/fashion-mnist
[ -r "$torch_fmnist" ] || { echo "bench: $torch_fmnist is missing" >&2; exit 1; }
printf '%-9s %5s %6s %12s %12s %7s\n' model batch steps gnc_img_s torch_img_s ratio
for spec in lenet:256:100 resnet18:32:12; do
    IFS=: read -r model batch steps <<<"$spec"
    # gnc: the run's images/s over its steps, from the last progress line
    g=$("$gnc" train "$root/models/$model.net" --data "$data" --batch "$batch" --steps "$steps" \
        --lr 0.1 --momentum 0.9 2>&1 | sed -n 's/.* \([0-9]*\) images\/s.*/\1/p' | tail -1)
    t=$(/usr/bin/python3 "$torch_fmnist" --model "$model" --data "$data" --batch "$batch" \
        --steps "$steps" --epochs 1 --lr 0.1 --momentum 0.9 --init default --device cpu |
        sed -n 1p | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["img_per_s"])')
    printf '%-9s %5d %6d %12.0f %12.0f %7.2f\n' "$model" "$batch" "$steps" "$g" "$t" \
        "$(awk -v a="$g" -v b="$t" 'BEGIN { print a / b }')"
    # the kernels behind the figures: two more steps of each side, verbose
    gk=$(conv_kernels "$gnc" train "$root/models/$model.net" --data "$data" --batch "$batch" \
        --steps 2)
    tk=$(conv_kernels /usr/bin/python3 "$torch_fmnist" --model "$model" --data "$data" \
        --batch "$batch" --steps 2 --epochs 1 --init default --device cpu)
    echo "  convolutions: gnc $gk; PyTorch $tk"
done
