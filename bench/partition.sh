#!/usr/bin/env bash
# Partitioning: how long gnc takes to compile and plan, and what virtual devices
# do for training throughput on this machine:
#   bash bench/partition.sh [BUILD_DIR]      (default: build)
# Prints
#   - the time of gnc compile models/resnet18.net --gpus 2 --dump-plan (the bar:
#     under 200 ms), and of the training step's plan for 2, 4 and 8 GPUs by each
#     strategy (the median of 5 runs);
#   - the predicted step and idle fraction of each (h100-nvlink);
#   - lenet (batch 256) and resnet18 (batch 32) training images/s on 1 device
#     and on 2 and 4 virtual devices, data parallel and pipelined (the machine's
#     cores are shared: virtual devices show overheads, not speed-ups, beyond
#     its core count).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gnc=$root/${1:-build}/gnc
[ -x "$gnc" ] || { echo "bench: build gnc first (bash tools/test.sh)" >&2; exit 1; }
data=/usr/share/datasets/fashion-mnist
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%Y-%m-%d), commit $(git -C "$root" rev-parse --short HEAD)"
r18=$root/models/resnet18.net

median_ms() { # median wall time of 5 runs of "$@", in ms
    local ts=()
    for i in 1 2 3 4 5; do
        local t0=$(date +%s%N)
        "$@" > /dev/null
        ts+=($(( ($(date +%s%N) - t0) / 1000 )))
    done
    printf '%s\n' "${ts[@]}" | sort -n | sed -n 3p | awk '{ printf "%.1f", $1 / 1000 }'
}

echo
printf '%-48s %9s\n' "gnc compile resnet18 ..." "ms"
printf '%-48s %9s\n' "--gpus 2 --dump-plan (inference, auto)" "$(median_ms "$gnc" compile "$r18" --gpus 2 --dump-plan)"
printf '%-48s %9s\n' "--gpus 2 --train --dump-plan (auto)" "$(median_ms "$gnc" compile "$r18" --gpus 2 --train --dump-plan)"

echo
printf '%-44s %5s %9s %11s %7s %10s\n' "training step of resnet18, batch 256" gpus compile_ms predicted_ms idle peak_MiB
for n in 2 4 8; do
    for s in data pipeline "hybrid:dp=2,pp=$((n / 2))"; do
        [ "$s" = "hybrid:dp=2,pp=1" ] && continue
        ms=$(median_ms "$gnc" compile "$r18" --gpus "$n" --train --strategy "$s")
        "$gnc" compile "$r18" --gpus "$n" --train --strategy "$s" --dump-plan=/tmp/gnc-bench-plan.json > /dev/null
        /usr/bin/python3 - "$s" "$n" "$ms" <<'PY'
import json, sys
p = json.load(open("/tmp/gnc-bench-plan.json"))
peak = max(d["peak_bytes"] for d in p["per_device"]) / 2**20
print("%-44s %5s %9s %11.3f %6.1f%% %10.0f" % (p["strategy"], sys.argv[2], sys.argv[3],
      p["predicted_step_ms"], 100 * p["idle_fraction"], peak))
PY
    done
done
rm -f /tmp/gnc-bench-plan.json

echo
printf '%-9s %5s %-22s %12s\n' model batch devices img_per_s
for spec in lenet:256:60 resnet18:32:8; do
    IFS=: read -r model batch steps <<<"$spec"
    for dev in "" "--devices cpu:2 --strategy data" "--devices cpu:2 --strategy pipeline" \
               "--devices cpu:4 --strategy data"; do
        # shellcheck disable=SC2086
        ips=$("$gnc" train "$root/models/$model.net" --data "$data" --batch "$batch" --steps "$steps" \
              --lr 0.05 --momentum 0.9 $dev 2>&1 | sed -n 's/.* \([0-9]*\) images\/s.*/\1/p' | tail -1)
        printf '%-9s %5d %-22s %12s\n' "$model" "$batch" "${dev:-one device}" "$ips"
    done
done
