#!/usr/bin/env bash
# Partitioning from the command line: run.sh GNC SOURCE_DIR WORK_DIR.
#   - flags and their errors; requests that cannot be met;
#   - plans: the JSON has every documented field, the text every device;
#     resnet18's 2-stage pipeline is balanced (the slowest stage's predicted
#     compute within 15% of the mean); data parallelism's gradient buckets
#     start with backward work still left (they overlap it); auto lists its
#     candidates and keeps the fastest; a plan over a memory cap is refused
#     with what is live at the peak, and auto passes over it;
#   - gnc run and gnc train on virtual devices agree with one device.
set -u
gnc=$1 src=$2 work=$3
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
r18=$src/models/resnet18.net lenet=$src/models/lenet.net mlp=$src/models/mlp.net
json() { /usr/bin/env python3 -c "import json,sys; p=json.load(open(sys.argv[1])); $2" "$1"; }

# flags
expect 2 "$gnc" compile "$lenet" --gpus 0;            has "--gpus needs a device count"
expect 2 "$gnc" compile "$lenet" --devices gpu:2;     has "--devices needs cpu:N"
expect 2 "$gnc" compile "$lenet" --gpus 2 --devices cpu:3; has "different device counts"
expect 2 "$gnc" compile "$lenet" --strategy diagonal; has "--strategy needs data, zero1, zero2, zero3, pipeline, tensor"
expect 2 "$gnc" compile "$lenet" --strategy zero4;    has "--strategy needs"
expect 2 "$gnc" compile "$lenet" --accumulate 0;      has "--accumulate needs an integer from 1 to 64"
expect 2 "$gnc" compile "$lenet" --strategy hybrid:dp=2; has "--strategy needs"
expect 2 "$gnc" compile "$lenet" --pipeline-schedule zigzag; has "needs 1f1b or gpipe"
expect 2 "$gnc" compile "$lenet" --microbatches 0;    has "--microbatches needs an integer from 1 to 64"
expect 2 "$gnc" compile "$lenet" --mem-cap 80Gb;      has "--mem-cap needs a size"
expect 2 "$gnc" compile "$lenet" --mem-cap 0=1GiB,x=2GiB; has "--mem-cap needs a size"
expect 2 "$gnc" compile "$lenet" --mem-cap 1=1GiB; has "--mem-cap names device 1, but the program has 1"
expect 2 "$gnc" compile "$lenet" --gpus 2 --mem-cap 1=1GiB,1=2GiB; has "device 1 two caps"
expect 2 "$gnc" compile "$lenet" --device-model h200-nvl; has "--device-model"
expect 2 "$gnc" eval "$lenet" --gpus 2;               has "does not apply to this command"

# requests that cannot be met
expect 1 "$gnc" compile "$lenet" -D batch=6 --gpus 4 --strategy data
has "the batch of 6 does not split into 4 equal parts"
expect 1 "$gnc" compile "$lenet" -D batch=8 --gpus 8 --strategy pipeline --microbatches 1
has "a pipeline of 8 stages needs at least 8 layers, and 'lenet' has 5"
expect 1 "$gnc" compile "$lenet" -D batch=8 --gpus 3 --strategy data --deterministic
has "which 3 devices do not share evenly"
expect 1 "$gnc" compile "$r18" --gpus 2 --strategy data --train --mem-cap 200MiB
has "error: device 0 needs"; has "over its cap of 200.0 MiB"
has "activations live at the peak"
expect 1 "$gnc" compile "$r18" --gpus 2 --train --mem-cap 100MiB
has "no strategy fits 2 devices"

# plans
expect 0 "$gnc" compile "$r18" --gpus 2 --train --strategy data --dump-plan=dp.json
json dp.json 'assert p["strategy"].startswith("data") and p["predicted_step_ms"] > 0
for d in p["per_device"]:
    for k in ("param_bytes", "activation_peak_bytes", "predicted_ms", "communications"):
        assert k in d, k
    assert d["param_bytes"] > 40e6 and d["activation_peak_bytes"] > 0
    assert all(c["bytes"] > 0 for c in d["communications"])
buckets = [c for c in p["per_device"][0]["communications"] if c["op"] == "all_reduce" and len(c["tensors"]) > 1]
assert len(buckets) >= 2, buckets
assert all(b["bytes"] <= 40 << 20 for b in buckets)
assert buckets[0]["compute_left_ms"] > 0, buckets[0]' && ok || bad "data-parallel plan JSON"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --strategy data --dump-plan
has "device 0:"; has "device 1:"; has "starts with"; has "compute left"
has "memory: peak"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --strategy pipeline --dump-plan=pp.json
json pp.json 'c = [d["compute_ms"] for d in p["per_device"]]
mean = sum(c) / len(c)
assert max(c) <= 1.15 * mean, c
assert any(x["op"] == "send" for x in p["per_device"][0]["communications"])' && ok \
    || bad "the resnet18 pipeline on 2 devices is balanced within 15%"
# auto: the simplest candidate (they come simplest first) predicted within the
# model's error of the fastest; with error=0 the fastest; a candidate faster
# by more than the error is taken however complex
pick='c = p["candidates"]
ok = [x for x in c if "rejected" not in x]
assert len(ok) >= 3, c
fast = min(ok, key=lambda x: x["predicted_step_ms"])
bar = fast["predicted_step_ms"] * (1 + p["model_error"])
want = next(x for x in ok if x["predicted_step_ms"] <= bar)
chosen = [x for x in c if x["chosen"]]
assert chosen == [want] and p["strategy"] == want["strategy"], (want, chosen, p["strategy"])
assert [x for x in c if x["fastest"]] == [fast], c'
expect 0 "$gnc" compile "$r18" --gpus 4 --train --dump-plan=auto.json
json auto.json "$pick"'
assert p["model_error"] == 0.15, p["model_error"]' && ok \
    || bad "auto keeps the simplest candidate within the model's error of the fastest"
# resnet18 on 2 devices: ZeRO-3 and data parallelism come within 2% of each
# other; data parallelism, the simpler, is kept, and --dump-plan says which was
# the fastest predicted
expect 0 "$gnc" compile "$r18" --gpus 2 --train --dump-plan=tie.json
json tie.json "$pick"'
assert p["strategy"] == "data", p["strategy"]
assert not [x for x in c if x["fastest"]][0]["chosen"], c' && ok \
    || bad "a near tie goes to data parallelism, the simplest"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --dump-plan
has "simplest first: the simplest predicted within the model's error (15%) of the fastest"
has "<- fastest predicted"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --device-model h100-nvlink,error=0 --dump-plan=exact.json
json exact.json "$pick"'
assert p["model_error"] == 0 and [x for x in c if x["fastest"]][0]["chosen"], c' && ok \
    || bad "error=0: auto takes the fastest"
# links 4500x slower: the pipeline, which sends less, is predicted 12% faster
# than data parallelism; taken under a 5% error, not under the 15%
expect 0 "$gnc" compile "$r18" --gpus 2 --train --device-model h100-nvlink,link_bw=0.1e9 --dump-plan=slow.json
json slow.json "$pick"'
assert p["strategy"] == "data", p["strategy"]' && ok || bad "12% faster is within the error"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --device-model h100-nvlink,link_bw=0.1e9,error=0.05 --dump-plan=slow.json
json slow.json "$pick"'
assert p["strategy"].startswith("pipeline"), p["strategy"]' && ok \
    || bad "a strategy faster by more than the error is taken over data parallelism"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --mem-cap 450MiB --dump-plan=capped.json
json capped.json 'c = p["candidates"]
assert any("over its cap" in x.get("rejected", "") for x in c), c
assert all(d["peak_bytes"] <= 450 << 20 for d in p["per_device"])' && ok \
    || bad "auto passes over a strategy that does not fit the cap"
expect 0 "$gnc" compile "$r18" --gpus 2 --train --mem-cap 0=400MiB,1=2GiB --strategy pipeline
expect 0 "$gnc" compile "$lenet" --devices cpu:2 --dump-plan
has "(cpu)"

# runs on virtual devices agree with one device
expect 0 "$gnc" run "$r18" -D batch=8 --seed 3 -o one
for s in data pipeline "hybrid:dp=2,pp=2"; do
    expect 0 "$gnc" run "$r18" -D batch=8 --seed 3 --devices cpu:4 --strategy "$s" -o "dev4"
    python3 - one/logits.npy dev4/logits.npy <<'PY' && ok || bad "run on 4 devices ($s) differs"
import sys, struct
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<H", b[8:10])[0]
    return struct.unpack("<%df" % ((len(b) - 10 - n) // 4), b[10 + n:])
a, b = load(sys.argv[1]), load(sys.argv[2])
rms = (sum(x * x for x in a) / len(a)) ** 0.5
assert max(abs(x - y) / (abs(x) + rms) for x, y in zip(a, b)) < 1e-5
PY
done
data=$src/tests/train/data
[ -d "$data" ] || data=/usr/share/datasets/fashion-mnist
expect 0 "$gnc" train "$lenet" --steps 5 --batch 64 --seed 4 --log one.csv
grep "step 5/" <<<"$out" | sed 's/.*loss \([0-9.]*\).*/\1/' > one.loss
expect 0 "$gnc" train "$lenet" --steps 5 --batch 64 --seed 4 --devices cpu:2 --strategy data
has "on 2 virtual devices: data"
grep "step 5/" <<<"$out" | sed 's/.*loss \([0-9.]*\).*/\1/' > two.loss
same one.loss two.loss "lenet: the 5th step's loss on 1 and 2 devices (4 digits)"
expect 0 "$gnc" train "$lenet" --steps 5 --batch 64 --seed 4 --devices cpu:2 --strategy pipeline
grep "step 5/" <<<"$out" | sed 's/.*loss \([0-9.]*\).*/\1/' > pp.loss
same one.loss pp.loss "lenet: the 5th step's loss on 1 device and a 2-stage pipeline"
# label smoothing splits with the batch; a class ignored is refused there
sed 's/cross_entropy(logits, label)/cross_entropy(logits, label, label_smoothing = 0.1)/' \
    "$lenet" >smooth.net
expect 0 "$gnc" train smooth.net --steps 5 --batch 64 --seed 4
grep "step 5/" <<<"$out" | sed 's/.*loss \([0-9.]*\).*/\1/' > smooth1.loss
expect 0 "$gnc" train smooth.net --steps 5 --batch 64 --seed 4 --devices cpu:2 --strategy data
grep "step 5/" <<<"$out" | sed 's/.*loss \([0-9.]*\).*/\1/' > smooth2.loss
same smooth1.loss smooth2.loss "lenet, smoothed labels: the 5th step's loss on 1 and 2 devices"
if ! cmp -s one.loss smooth1.loss; then ok; else bad "label smoothing changed nothing"; fi
sed 's/cross_entropy(logits, label)/cross_entropy(logits, label, ignore_index = 3)/' \
    "$lenet" >ignore.net
expect 1 "$gnc" train ignore.net --steps 1 --batch 64 --devices cpu:2 --strategy data
has "the loss 'cross_entropy0' ignores class 3: splitting the batch between devices"
# whole epochs on a small slice of the data: evaluation reads the weights back
# from every strategy's devices (a tensor-parallel program's shards assembled)
data=/usr/share/datasets/fashion-mnist
mkdir -p tiny
idx_slice train-images-idx3-ubyte 256 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 256 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 200 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 200 1 "$data" >tiny/t10k-labels-idx1-ubyte
expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --epochs 1 --seed 2 --momentum 0.9
grep "^epoch 1" <<<"$out" | sed 's/, [0-9]* images.*//' > epoch.one
for s in data pipeline tensor; do
    expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --epochs 1 --seed 2 --momentum 0.9 \
        --devices cpu:2 --strategy $s --checkpoint $s.safetensors
    grep "^epoch 1" <<<"$out" | sed 's/, [0-9]* images.*//' > epoch.$s
    same epoch.one epoch.$s "lenet's epoch (train loss, test loss and accuracy) on 1 device and $s x2"
    expect 0 "$gnc" eval "$lenet" --data tiny --weights $s.safetensors
    has "test accuracy"
done

# ZeRO and accumulation: the plan names them and each stage keeps less per
# device; what they do not combine with is refused; auto takes a ZeRO stage
# where replicated data parallelism is over the cap, and names the smallest
# peak where nothing fits
state() { grep -m1 -oE 'parameters and state [0-9.]+ [KM]iB' <<<"$out" | grep -oE '[0-9.]+ [KM]iB'; }
expect 0 "$gnc" compile "$lenet" --train --momentum 0.9 --gpus 4 --strategy data --dump-plan
s0=$(state)
for z in 1 2 3; do
    expect 0 "$gnc" compile "$lenet" --train --momentum 0.9 --gpus 4 --strategy zero$z --dump-plan
    has "plan: data, zero$z on 4 devices"
    eval "s$z=\$(state)"
done
if [ "$s0" != "$s1" ] && [ "$s1" = "$s2" ] && [ "$s2" != "$s3" ]; then ok; else bad "parameters and state per device: data $s0, zero1 $s1, zero2 $s2, zero3 $s3"; fi
expect 0 "$gnc" compile "$lenet" --train --gpus 2 --strategy zero2 --dump-ir after:partition
has "reduce_scatter"
expect 0 "$gnc" compile "$lenet" --train --gpus 2 --strategy zero3 --dump-ir after:partition
has "conv2.weight.gathered_bwd"
has "param %conv1.weight.shard1: f32[3, 1, 5, 5]"
# ZeRO-3 gathers each convolution's bias, a layer ahead; the GPU adds it in
# the batchnorm after the convolution, so the memory plan keeps it until then
# (else the batchnorm's result lands on it and codegen refuses the kernel)
expect 0 "$gnc" compile "$r18" --train --momentum 0.9 --gpus 4 --strategy zero3 -o r18-zero3.gnc
expect 1 "$gnc" compile "$lenet" --train --gpus 2 --strategy zero1 --deterministic
has "ZeRO (--strategy zero1) shards data parallelism, not its deterministic mode"
expect 1 "$gnc" compile "$mlp" --train --gpus 2 --strategy tensor --accumulate 2
has "--accumulate does not apply to --strategy tensor"
expect 1 "$gnc" compile "$lenet" --train --gpus 2 --deterministic --accumulate 2
has "--accumulate does not combine with deterministic mode"
expect 0 "$gnc" compile "$lenet" --train --gpus 2 --strategy pipeline --microbatches 2 --accumulate 3 -D batch=48 --dump-plan
has "pipeline 1f1b, 2 microbatches, accumulate 3"
expect 0 "$gnc" compile "$r18" --train -D batch=64 --accumulate 4 --stats
acc=$(grep -oE '^memory.peak_bytes: [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
expect 0 "$gnc" compile "$r18" --train -D batch=64 --stats
whole=$(grep -oE '^memory.peak_bytes: [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
if [ -n "$acc" ] && [ -n "$whole" ] && [ $((acc * 3)) -lt $((whole * 2)) ]; then ok; else bad "--accumulate 4 should keep under 2/3 of the activations: $acc against $whole"; fi
expect 0 "$gnc" compile "$r18" --train --optimizer adam --gpus 2 --mem-cap 537MiB --dump-plan
has "plan: data, zero3 on 2 devices"
has "data                         rejected: device 0 needs 597.0 MiB, over its cap of 537.0 MiB"
expect 1 "$gnc" compile "$r18" --train --optimizer adam --gpus 2 --mem-cap 200MiB
has "no strategy fits 2 devices"
has "the smallest peak found: 523.8 MiB per device (data, zero3)"
expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --devices cpu:2 --strategy zero3 --steps 3 --checkpoint z3.safetensors
expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --devices cpu:2 --strategy data --steps 3 --checkpoint d.safetensors
same z3.safetensors d.safetensors "a zero3 checkpoint and data parallelism's"
expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --accumulate 2 --steps 2
has "step 2/"

# 1F1B's bubble against the formula (p - 1) / (m + p - 1) on a model of equal
# blocks (gpt_tiny, 8 blocks on 4 stages): within 3 points for 4, 8 and 16
# microbatches (measured 0.5, 1.3 and 2.2 above it: the step's fixed work, the
# optimizer's, does not shrink with the microbatches); every send between
# neighbouring stages but the tied embedding's and the loss's, none of an
# activation skipping stages (the last stage once computed each block's
# attention transpose and residual gradient sum, and the tied embedding's
# input gradient ran on the first stage: a round trip a microbatch, 2026-12-03)
gpt=(-D width=512 -D layers=8 -D heads=4 -D seq=256 -D batch=16)
for m in 4 8 16; do
    expect 0 "$gnc" compile "$src/models/gpt_tiny.net" "${gpt[@]}" --train --gpus 4 \
        --strategy pipeline --microbatches $m --no-kernels --dump-plan=bubble$m.json
    json bubble$m.json "formula = 3 / ($m + 3)
assert abs(p['idle_fraction'] - formula) <= 0.03, (p['idle_fraction'], formula)
for d in p['per_device']:
    for c in d['communications']:
        a, b = c['devices'][0], c['devices'][-1]
        if c['op'] in ('send', 'recv') and abs(a - b) != 1:  # the tied embedding's, the loss
            assert all(t.startswith(('gpt.wte', 'gpt.head', 'loss')) for t in c['tensors']), c" \
        && ok || bad "1F1B on 4 stages, $m microbatches: the bubble is not the formula's"
done

