#!/usr/bin/env bash
# ONNX import speed: ResNet-18 (models/resnet18.net, 11.7 M parameters, 45 MB
# of weights) written by gnc export, then read back by `gnc dump` (the import
# and printing its IR) and by `gnc compile` (import, passes, plan), five times
# each; prints each wall and CPU time and their medians.  Bar: the import under 0.5 s on a
# 2-core machine (docs/perf.md).
#   bash bench/onnx_import.sh [path/to/gnc]
set -euo pipefail
gnc=${1:-build/gnc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gnc" export models/resnet18.net -o "$work/resnet18.onnx"
echo "resnet18.onnx: $(stat -c %s "$work/resnet18.onnx") bytes"
# wall and CPU (user + system) seconds of a command; the CPU time is what a
# shared machine's load changes least
time_of() {
    /usr/bin/time -f "%e %U %S" "$@" 2>&1 >/dev/null | tail -1 |
        awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }'
}
for what in dump compile; do
    walls=() cpus=()
    for i in 1 2 3 4 5; do
        read -r w c <<<"$(time_of "$gnc" "$what" "$work/resnet18.onnx")"
        walls+=("$w") cpus+=("$c")
    done
    wm=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n 3p)
    cm=$(printf '%s\n' "${cpus[@]}" | sort -n | sed -n 3p)
    echo "gnc $what resnet18.onnx: wall ${walls[*]} s (median $wm), CPU ${cpus[*]} s (median $cm)"
done
