#!/usr/bin/env bash
# ONNX import speed: ResNet-18 (models/resnet18.net, 11.7 M parameters, 45 MB
# of weights) written by gnc export, then read back by `gnc dump` (the import
# and printing its IR) and by `gnc compile` (import, passes, plan), five times
# each; prints each time and the median.  Bar: the import under 0.5 s on a
# 2-core machine (docs/perf.md).
#   bash bench/onnx_import.sh [path/to/gnc]
set -euo pipefail
gnc=${1:-build/gnc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gnc" export models/resnet18.net -o "$work/resnet18.onnx"
echo "resnet18.onnx: $(stat -c %s "$work/resnet18.onnx") bytes"
time_of() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
for what in dump compile; do
    ts=()
    for i in 1 2 3 4 5; do ts+=("$(time_of "$gnc" "$what" "$work/resnet18.onnx")"); done
    median=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 3p)
    echo "gnc $what resnet18.onnx: ${ts[*]} s; median $median s"
done
