#!/usr/bin/env bash
# The measured choice among cuDNN, the generated implicit-GEMM convolutions
# and cuDNN on channels-last copies (gnc compile --conv
# cudnn|igemm|cudnn-nhwc, docs/codegen.md): a training step of resnet18 (and
# lenet) on one GPU, each way and each convolution the fastest way (--conv
# auto --autotune), at fp32, tf32 and bf16, on the real Fashion-MNIST data.
# Needs a GPU; the same machine, the same run.
#   bash bench/gpu_conv.sh [BUILD_DIR [STEPS]]      (default: build, 60)
# Prints images/s of each and its ratio to cuDNN (> 1: better than cuDNN
# alone).  gnc train leaves its first step out of the figure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gnc=$root/${1:-build}/gnc
steps=${2:-60}
data=${GNC_DATA:-/usr/share/datasets/fashion-mnist}
[ -x "$gnc" ] || { echo "bench: build gnc first (bash tools/test.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no GPU'), $(date -u +%Y-%m-%d)"
printf '%-9s %5s %-9s %12s %12s %12s %12s %7s %7s %7s\n' model batch precision cudnn_img_s \
    igemm_img_s nhwc_img_s auto_img_s igemm/c nhwc/c auto/c
for spec in resnet18:32 resnet18:128 lenet:256; do
    IFS=: read -r model batch <<<"$spec"
    for precision in fp32 tf32 bf16; do
        declare -A rate=()
        for conv in cudnn igemm cudnn-nhwc auto; do
            plan=$work/$model-$batch-$precision-$conv.gnc
            tune=()
            [ "$conv" = auto ] && tune=(--autotune)
            "$gnc" compile "$root/models/$model.net" --train -D batch="$batch" --momentum 0.9 \
                --precision "$precision" --conv "$conv" "${tune[@]}" -o "$plan" >/dev/null
            rate[$conv]=$("$gnc" train "$plan" --data "$data" --steps "$steps" --lr 0.05 \
                --device cuda 2>&1 | sed -n 's/.* \([0-9]*\) images\/s.*/\1/p' | tail -1)
            [ -n "${rate[$conv]}" ] || { echo "bench: gnc train $plan --device cuda failed" >&2; exit 1; }
        done
        ratio() { awk -v a="${rate[$1]}" -v b="${rate[cudnn]}" 'BEGIN { print a / b }'; }
        printf '%-9s %5d %-9s %12.0f %12.0f %12.0f %12.0f %7.2f %7.2f %7.2f\n' "$model" "$batch" \
            "$precision" "${rate[cudnn]}" "${rate[igemm]}" "${rate[cudnn-nhwc]}" "${rate[auto]}" \
            "$(ratio igemm)" "$(ratio cudnn-nhwc)" "$(ratio auto)"
    done
done
