#!/usr/bin/env bash
# Predicted beside measured (docs/cli.md, "Predicted and measured"):
# memory.sh GNC SOURCE_DIR WORK_DIR DATA_DIR.  gnc run (text and --json) and
# gnc train print the predicted step beside the measured one, and the memory
# the plan counts beside the measured peak, on the CPU:
#   1. run --json carries time_ms and predicted_ms, memory.planned_bytes (the
#      sum of memory.planned's items) and memory.measured_bytes; the text has
#      the same two lines;
#   2. the measured peak is within 10% of the plan, or 4 MiB where that is
#      more (a small model: the threads' stacks and the code a run touches
#      first are a few MiB the plan cannot count), for lenet and resnet18 at a
#      small batch, with and without oneDNN, and for training lenet and
#      resnet18 on a slice of Fashion-MNIST;
#   3. the checker refuses a report whose peak is 25% over its plan, and one
#      without its measured figure, so that it can fail.
# Ends with "memory: N passed, M failed"; fails if any did.
set -u
gnc=$(realpath "$1") src=$2 work=$3 data=$(realpath "$4")
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work/tiny" && cd "$work" || exit 1
lenet=$src/models/lenet.net resnet=$src/models/resnet18.net
# --threads 2: the stacks and OpenBLAS's buffers of every core of a large
# machine would be more than the 4 MiB
T=(--threads 2 --device cpu)

# within FILE: the report in FILE (run --json, or train's text) holds both
# figures and its peak is within the tolerance of its plan
within() {
    python3 - "$1" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
units = {'B': 1, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30, 'TiB': 2**40}
def size(s):
    v, u = s.split()
    return float(v) * units[u]
if text.lstrip().startswith('{'):
    d = json.loads(text)
    m = d['memory']
    assert d['time_ms'] > 0 and d['predicted_ms'] > 0, (d['time_ms'], d['predicted_ms'])
    assert abs(sum(m['planned'].values()) - m['planned_bytes']) < 1, m
    assert m['measured_as'] == 'rss_peak_above_start', m
    planned, measured = m['planned_bytes'], m['measured_bytes']
else:
    s = re.search(r'^step: ([\d.]+) ms \(.*\), predicted ([\d.]+) ms on \S+$', text, re.M)
    assert s and float(s.group(1)) > 0 and float(s.group(2)) > 0, 'no step line'
    s = re.search(r'^memory: planned ([\d.]+ \w+) \((.*)\), measured peak ([\d.]+ \w+) '
                  r'\([+-][\d.]+%\) above start$', text, re.M)
    assert s, 'no memory line with a measured peak'
    planned, measured = size(s.group(1)), size(s.group(3))
    items = sum(size(i.rsplit(' ', 2)[-2] + ' ' + i.rsplit(' ', 2)[-1])
                for i in s.group(2).split(', '))
    assert abs(items - planned) <= 0.002 * planned + 2**20, (items, planned)
assert measured is not None, 'no measured peak'
slack = max(0.10 * planned, 4 * 2**20)
print('  planned %.1f MiB, measured %.1f MiB (%+.1f%%)' % (planned / 2**20, measured / 2**20,
      100 * (measured - planned) / planned))
assert abs(measured - planned) <= slack, 'measured %.1f MiB, planned %.1f MiB' % (
    measured / 2**20, planned / 2**20)
PY
}

# 1, 2: gnc run
for dnnl in 1 0; do
    for m in "$lenet -D batch=8" "$resnet -D batch=4"; do
        name="$(basename ${m%% *} .net) GNC_DNNL=$dnnl"
        # shellcheck disable=SC2086
        expect 0 env GNC_DNNL=$dnnl "$gnc" run $m "${T[@]}" --json
        echo "$out" >run.json
        echo "run $name:"
        if within run.json; then ok; else bad "run $name: $(grep -A40 memory run.json)"; fi
    done
done
expect 0 "$gnc" run "$lenet" -D batch=8 "${T[@]}"
if grep -qE '^time: [0-9.]+ ms \(median of 1\), predicted [0-9.]+ ms on cpu$' <<<"$out"; then ok
else bad "run: no time line with the predicted step: $out"; fi
if grep -qE '^memory: planned [0-9.]+ [KMG]iB \(activations .*\), measured peak [0-9.]+ [KMG]iB \([+-][0-9.]+%\) above start$' <<<"$out"
then ok; else bad "run: no memory line: $out"; fi

# 2: gnc train on a slice of the data set
idx_slice train-images-idx3-ubyte 512 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 512 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 64 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 64 1 "$data" >tiny/t10k-labels-idx1-ubyte
for m in "$lenet --batch 32 --steps 4" "$resnet --batch 8 --steps 2" "$lenet --batch 64 --epochs 1"; do
    name=$(basename ${m%% *} .net)${m#* }
    # shellcheck disable=SC2086
    expect 0 "$gnc" train $m --data tiny "${T[@]}"
    echo "$out" >train.txt
    echo "train $name:"
    if within train.txt; then ok; else bad "train $name: $(tail -3 train.txt)"; fi
done
has "evaluation program" # the epoch's end evaluated: its buffers counted whole

# 3: the checker can fail
python3 - run.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d['memory']['measured_bytes'] = 1.25 * d['memory']['planned_bytes'] + 8 * 2**20
json.dump(d, open('over.json', 'w'))
d['memory']['measured_bytes'] = None
json.dump(d, open('none.json', 'w'))
PY
if within over.json 2>/dev/null; then bad "a peak 25% over the plan passed"; else ok; fi
if within none.json 2>/dev/null; then bad "a report without a measured peak passed"; else ok; fi

summary memory
