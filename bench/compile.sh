#!/usr/bin/env bash
# gnc compile -o with kernels: resnet18's training step on 2 GPUs, with a cold
# compile cache (an empty GNC_CACHE_DIR: every module through NVRTC) and a warm
# one (every image from the cache).  Bars: cold under 10 s, warm under 0.5 s on
# a 2-core machine (docs/perf.md).  Flags after the gnc path are added to the
# compile: --conv igemm, --precision tf32, ...
#   bash bench/compile.sh [path/to/gnc [FLAGS...]]
set -euo pipefail
gnc=${1:-build/gnc}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=("$@")
echo "resnet18 --train --gpus 2 ${flags[*]}"
run() {
    local t0 t1
    t0=$(date +%s.%N)
    GNC_CACHE_DIR=$work/cache "$gnc" compile models/resnet18.net --train --gpus 2 "${flags[@]}" \
        -o "$work/$1.gnc" >/dev/null
    t1=$(date +%s.%N)
    echo "$1: $(echo "$t1 - $t0" | bc) s, $(stat -c %s "$work/$1.gnc") bytes"
}
run cold
run warm
cmp "$work/cold.gnc" "$work/warm.gnc" && echo "cold and warm plans identical"
