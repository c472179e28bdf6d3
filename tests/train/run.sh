#!/usr/bin/env bash
# gnc train and gnc eval, end to end: run.sh GNC SOURCE_DIR WORK_DIR DATA_DIR.
# Uses a small slice of Fashion-MNIST (512 training, 200 test images) cut from
# DATA_DIR, so every run takes a second or two.  Checks: bitwise-exact resume
# (at an epoch end and mid-epoch, with momentum, and with dropout and AdamW),
# the same bits on any number of threads, a checkpoint killed mid-write, eval,
# the CSV log, and bad data, checkpoints and flags.  Ends with "N passed, M
# failed"; fails if any did.
set -u
gnc=$1 src=$2 work=$3 data=$4
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -r "$data/$f.gz" ] || [ -r "$data/$f" ] || { echo "run.sh: $data lacks $f (install dataset-fashion-mnist)"; exit 1; }
done

mkdir tiny
idx_slice train-images-idx3-ubyte 512 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 512 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 200 3 "$data" | gzip >tiny/t10k-images-idx3-ubyte.gz
idx_slice t10k-labels-idx1-ubyte 200 1 "$data" | gzip >tiny/t10k-labels-idx1-ubyte.gz
lenet=$src/models/lenet.net
T=("$gnc" train "$lenet" --data tiny --batch 64 --lr 0.05 --momentum 0.9 --seed 7)

# training runs, learns something, logs one CSV row per epoch
expect 0 "${T[@]}" --epochs 2 --checkpoint a.st --log a.csv
has "epoch 2: train loss"
if [ "$(head -1 a.csv)" = "epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds" ] &&
   [ "$(wc -l <a.csv)" = 3 ] && [ "$(cut -d, -f1,2 a.csv | tail -1)" = "2,16" ]; then ok; else bad "a.csv: $(cat a.csv)"; fi

# resume at an epoch end: 2 epochs == 1 epoch + resume + 1 epoch, bit for bit
expect 0 "${T[@]}" --epochs 1 --checkpoint b.st
expect 0 "${T[@]}" --epochs 2 --resume b.st --checkpoint b.st
has "resuming b.st at step 8"
same a.st b.st "resume at an epoch end"

# resume mid-epoch
expect 0 "${T[@]}" --epochs 2 --steps 11 --checkpoint c.st
has "stopped after step 11"
expect 0 "${T[@]}" --epochs 2 --resume c.st --checkpoint c.st
same a.st c.st "resume mid-epoch"

# a NaN in fc3.bias's momentum buffer: the step's loss is finite, the update is
# not, and training stops there naming it (on the CPU, after every step)
python3 - c.st nan.st <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
at = 8 + n + json.loads(b[8:8 + n])['fc3.bias.momentum_buffer']['data_offsets'][0]
b[at:at + 4] = struct.pack('<f', float('nan'))
open(sys.argv[2], 'wb').write(b)
PY
expect 1 "${T[@]}" --epochs 3 --resume nan.st
has "gnc: error: step 16: fc3.bias is not finite after the update"

# a checkpoint's metadata may hold any number of keys (20 more here, before
# step and seed: they were dropped past the 16th, and the step with them)
python3 - c.st meta.st <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
h['__metadata__'] = dict({'x%02d' % i: 'y' for i in range(20)}, **h['__metadata__'])
j = json.dumps(h).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(j)) + j + b[8 + n:])
PY
expect 0 "${T[@]}" --epochs 3 --steps 17 --resume meta.st
has "resuming meta.st at step 16"

# dropout masks and AdamW state resume exactly too (mlp)
M=("$gnc" train "$src/models/mlp.net" --data tiny --batch 32 --optimizer adamw --lr 0.001 --seed 3)
expect 0 "${M[@]}" --epochs 2 --checkpoint m1.st
expect 0 "${M[@]}" --epochs 2 --steps 21 --checkpoint m2.st
expect 0 "${M[@]}" --epochs 2 --resume m2.st --checkpoint m2.st
same m1.st m2.st "mlp with dropout and AdamW"

# --steps without --epochs: that many steps, over as many epochs as they take
# (8 a epoch here), the same bits as --epochs 2; with --epochs the first to end
expect 0 "${T[@]}" --steps 16 --checkpoint s.st
has "epoch 2: train loss"
same a.st s.st "--steps 16 alone runs 2 epochs"
expect 0 "${T[@]}" --epochs 1 --checkpoint e1.st
expect 0 "${T[@]}" --epochs 1 --steps 16 --checkpoint s1.st
same e1.st s1.st "--epochs 1 --steps 16 stops after the epoch"

# --weights: a new run from given weights at step 0, its optimizer state fresh:
# another run's checkpoint (a.st, its momentum left out), or a PyTorch-style
# state_dict (the weights alone under gnc's names, and a num_batches_tracked
# the model lacks).  At a learning rate too small to move a weight, the
# weights stay a.st's (eval agrees) and the run is at step 1 of its own.
python3 - a.st sd.st <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h, data = json.loads(b[8:8 + n]), b[8 + n:]
out, blob = {}, b''
for k, v in h.items():
    if k == '__metadata__' or k.endswith('.momentum_buffer'):
        continue
    lo, hi = v['data_offsets']
    out[k] = dict(v, data_offsets=[len(blob), len(blob) + hi - lo])
    blob += data[lo:hi]
out['fc1.num_batches_tracked'] = {'dtype': 'I64', 'shape': [], 'data_offsets': [len(blob), len(blob) + 8]}
blob += struct.pack('<q', 16)
j = json.dumps(out).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(j)) + j + blob)
PY
expect 0 "$gnc" eval "$lenet" --data tiny --weights a.st; want=$(grep '^test accuracy' <<<"$out")
for w in a.st sd.st; do
    expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --lr 1e-30 --momentum 0.9 --steps 1 \
        --weights $w --checkpoint w.st
    has "starting from the weights of $w"
    expect 0 "$gnc" eval "$lenet" --data tiny --weights w.st
    if [ "$(grep '^test accuracy' <<<"$out")" = "$want" ]; then ok; else bad "--weights $w: $out, not $want"; fi
    expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --lr 0.05 --momentum 0.9 --steps 2 \
        --resume w.st # its seed, 0 (a --seed 7 would contradict it)
    has "resuming w.st at step 1"
done
expect 2 "${T[@]}" --steps 2 --weights a.st --resume a.st;  has "give one of them"
expect 1 "${T[@]}" --steps 2 --weights missing.st;  has "missing.st: cannot read"
expect 1 "${T[@]}" --steps 2 --weights m1.st;  has "m1.st does not match the model"

# --remat recomputes batchnorm-ReLU results: the same bits (resnet18, 2 steps)
R=("$gnc" train "$src/models/resnet18.net" --data tiny --batch 4 --steps 2 --momentum 0.9)
expect 0 "${R[@]}" --checkpoint r1.st
expect 0 "${R[@]}" --remat --checkpoint r2.st
same r1.st r2.st "--remat"

# any number of threads computes the same bits: lenet's 11 steps on 1 thread and
# the rest on 3 against a.st's on all cores; resnet18 (image-by-image
# convolutions at batch 8) on 1 thread against 3
expect 0 "${T[@]}" --epochs 2 --steps 11 --threads 1 --checkpoint v.st
expect 0 "${T[@]}" --epochs 2 --resume v.st --threads 3 --checkpoint v.st
same a.st v.st "lenet on 1 thread, resumed on 3, and on all cores"
R8=("$gnc" train "$src/models/resnet18.net" --data tiny --batch 8 --steps 2 --momentum 0.9)
expect 0 "${R8[@]}" --threads 1 --checkpoint t1.st
expect 0 "${R8[@]}" --threads 3 --checkpoint t3.st
same t1.st t3.st "resnet18 on 1 thread and on 3"

# the seed matters
expect 0 "$gnc" train "$lenet" --data tiny --batch 64 --lr 0.05 --seed 8 --epochs 1 --checkpoint s.st
if cmp -s s.st b.st; then bad "a different seed gave the same weights"; else ok; fi

# a checkpoint killed mid-write (file size limit: SIGXFSZ) leaves the old one
cp a.st a.orig
exec 3>&2 2>/dev/null  # quiet: the shell reports the killed child
( ulimit -f 64; exec "${T[@]}" --epochs 3 --resume a.st --checkpoint a.st ) >/dev/null
rc=$?
exec 2>&3 3>&-
if [ $rc -ge 128 ]; then ok; else bad "the write was not killed (exit $rc)"; fi
same a.st a.orig "the checkpoint after a killed write"
expect 0 "$gnc" eval "$lenet" --data tiny --weights a.st
has "test accuracy"
has "on 200 of 200 images"

# checkpoints that do not fit
expect 1 "$gnc" eval "$src/models/mlp.net" --data tiny --weights a.st
has "does not match the model"
has "head.weight: in the model, not in the checkpoint"
expect 1 "$gnc" train "$lenet" --data tiny --batch 64 --optimizer adam --epochs 1 --resume a.st
has "conv1.weight.exp_avg: in the model, not in the checkpoint"
has "conv1.weight.momentum_buffer: in the checkpoint, not in the model"
printf 'not a checkpoint at all' >junk.st
expect 1 "$gnc" eval "$lenet" --data tiny --weights junk.st
has "not a safetensors file"
head -c 300 a.st >short.st
expect 1 "$gnc" eval "$lenet" --data tiny --weights short.st
has "short.st"
# a directory is named as one (it read as "not a safetensors file", from a read
# that failed)
mkdir -p ckdir.st
expect 1 "$gnc" eval "$lenet" --data tiny --weights ckdir.st
has "ckdir.st: is a directory, not a checkpoint"
expect 1 "${T[@]}" --epochs 1 --resume ckdir.st
has "ckdir.st: is a directory, not a checkpoint"

# a checkpoint's step and seed are read strictly: a negative step indexed the
# epoch's order before its start, and atoll read "ab" as 0
for kv in step:-9 step:ab seed:z; do
    key=${kv%%:*} val=${kv#*:}
    cp a.st meta.st
    perl -0777 -pi -e "s/\"$key\":\"[0-9]+\"/\"$key\":\"$val\"/" meta.st
    expect 1 "${T[@]}" --epochs 3 --resume meta.st
    has "meta.st: the metadata's $key is '$val'"
done

# the loop fills whole batches: inputs and logits must agree on the batch (as
# plans, which train and eval take as compiled, they wrote past the labels)
expect 0 "$gnc" compile "$src/tests/train/batches.net" --train -o batches-train.gnc
expect 1 "$gnc" train batches-train.gnc --data tiny --epochs 1
has "all three take the batch as their first dimension"
expect 0 "$gnc" compile "$src/tests/train/batches.net" -o batches.gnc
expect 1 "$gnc" eval batches.gnc --data tiny --weights a.st
has "the label input 'label' i32[8]"

# the model a checkpoint names is its parameters, not the test set's size
# (which sets the evaluation batch): resuming with other data does not warn
mkdir tiny100 && cp tiny/train-* tiny100/
idx_slice t10k-images-idx3-ubyte 100 3 "$data" >tiny100/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 100 1 "$data" >tiny100/t10k-labels-idx1-ubyte
cp a.st other.st
expect 0 "$gnc" train "$lenet" --data tiny100 --batch 64 --lr 0.05 --momentum 0.9 --seed 7 \
    --epochs 3 --resume other.st
grep -q "another version of the model" <<<"$out" && bad "resuming with another test set warns" || ok
# ... and an edited model with the same parameters does
sed 's/relu(/gelu(/' "$lenet" >gelu.net
cp a.st other.st
expect 0 "$gnc" train gelu.net --data tiny --batch 64 --lr 0.05 --epochs 3 --resume other.st
has "other.st was written for another version of the model"

# an evaluation batch larger than the test set (it printed accuracy -nan on 0
# of 200 images, and exit 0)
expect 1 "$gnc" eval "$lenet" --data tiny --weights a.st --batch 256
has "the batch (256) is larger than the test set (200)"

# an output that cannot be written is an error (exit 0 before)
if "$gnc" eval "$lenet" --data tiny --weights a.st >/dev/full 2>err.txt; then
    bad "eval > /dev/full exited 0"
else
    grep -q "cannot write the standard output" err.txt && ok || bad "eval > /dev/full: $(cat err.txt)"
fi

# safetensors as the format has it: each of these was read (or matched
# against the model) before; now the header alone refuses it
refused_st() { # refused_st MESSAGE HEADER DATA_BYTES: a file of that header
    local n=${#2}
    printf "$(printf '\\x%02x' $((n & 255)) $((n >> 8 & 255)) 0 0 0 0 0 0)" >bad.st
    printf '%s' "$2" >>bad.st
    head -c "$3" /dev/zero >>bad.st
    expect 1 "$gnc" eval "$lenet" --data tiny --weights bad.st
    has "$1"
}
A='"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
refused_st "names 'a' twice" "{$A,$A}" 4
refused_st "more after its JSON object" "{$A} x" 4
refused_st "two whole data offsets" '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0.5,4.5]}}' 5
refused_st "share bytes" "{$A,"'"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}' 6
refused_st "4 bytes of data after the last tensor" "{$A}" 8
refused_st "not a dtype of the format" '{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}' 4

# a model input the data does not fill, and a loss that is not
# cross_entropy(logits, label), are refused before any step (else zeros are fed
# or another loss trained without a word)
printf 'model m(batch = 8) {\n  input image: f32[batch, 1, 28, 28]\n  input label: i32[batch]\n  input target: f32[batch, 10]\n  logits = dense(flatten(image), 10)\n  output logits\n  loss cross_entropy(logits, label)\n}\n' >extra.net
expect 1 "$gnc" train extra.net --data tiny --steps 1 --checkpoint extra.st
has "extra.net: the input 'target' (f32[8, 10]) is not one gnc train and gnc eval fill"
if [ ! -e extra.st ]; then ok; else bad "a refused model left extra.st"; fi
printf 'model m(batch = 8) {\n  input image: f32[batch, 1, 28, 28]\n  input label: i32[batch]\n  logits = dense(flatten(image), 10)\n  output logits\n  loss mean(logits)\n}\n' >meanloss.net
expect 1 "$gnc" train meanloss.net --data tiny --steps 1
has "meanloss.net: the loss 'mean0' is reshape, not cross_entropy(logits, label)"
if ! grep -q "step 1/" <<<"$out"; then ok; else bad "a refused loss trained a step"; fi
# and on two devices the partitioner refuses it (it crashed): the replicas'
# losses are averaged, right for cross_entropy, nll_loss and mse alone
expect 1 "$gnc" train meanloss.net --data tiny --steps 1 --devices cpu:2 --strategy data
has "meanloss.net:6:8: error: the loss 'mean0' is reshape, not cross_entropy, nll_loss or mse"
if ! grep -q "step 1/" <<<"$out"; then ok; else bad "a refused loss trained a step"; fi

# bad data
expect 1 "$gnc" train "$lenet" --data nowhere --epochs 1
has "nowhere/train-images-idx3-ubyte"
mkdir trunc && cp tiny/* trunc/ && head -c 10000 tiny/train-images-idx3-ubyte >trunc/train-images-idx3-ubyte
expect 1 "$gnc" train "$lenet" --data trunc --epochs 1
has "truncated"
mkdir corrupt && cp tiny/* corrupt/ && printf '\037\213garbage-that-is-not-deflate' >corrupt/t10k-images-idx3-ubyte.gz
expect 1 "$gnc" train "$lenet" --data corrupt --epochs 1
has "t10k-images-idx3-ubyte.gz"
# an IDX header whose sizes multiply past 64 bits ([2^17, 2^17, 2^30] wrapped
# to 0 bytes and loaded), and a directory where a file should be
mkdir huge && cp tiny/* huge/
printf '\x00\x00\x08\x03\x00\x02\x00\x00\x00\x02\x00\x00\x40\x00\x00\x00' >huge/train-images-idx3-ubyte
expect 1 "$gnc" train "$lenet" --data huge --epochs 1
has "train-images-idx3-ubyte: too large"
mkdir dirs && cp tiny/* dirs/ && rm dirs/train-labels-idx1-ubyte && mkdir dirs/train-labels-idx1-ubyte
expect 1 "$gnc" train "$lenet" --data dirs --epochs 1
has "train-labels-idx1-ubyte: is a directory"
expect 1 "$gnc" train "$lenet" --data tiny --epochs 1 -D classes=5
has "the training labels go up to 9, but the model has 5 classes"
expect 1 "$gnc" train "$src/models/resnet18.net" --data tiny --epochs 1 -D batch=2000
has "larger than the training set"

# training graphs: print, parse back, verify; no gradient for the image
for m in "$src"/models/*.net; do
    name=$(basename "$m" .net)
    for opt in "--momentum 0.9" "--optimizer adamw" "--momentum 0.5 --nesterov --weight-decay 0.1"; do
        expect 0 "$gnc" dump "$m" --train $opt -D batch=4 -o "$name.train.gir"
        expect 0 "$gnc" dump "$name.train.gir" -o "$name.train2.gir"
        same "$name.train.gir" "$name.train2.gir" "$name --train $opt round trip"
    done
done
expect 0 "$gnc" dump "$lenet" --train
if [ "$(grep -c '= conv2d_grad_input(' <<<"$out")" = 1 ] && ! grep -q '%image.grad' <<<"$out"; then
    ok; else bad "lenet's training graph computes a gradient for its input"; fi
has "update %conv1.weight = "
has "= sgd(%fc3.bias, %fc3.bias.grad, %train.lr)"
expect 0 "$gnc" dump "$src/models/resnet18.net" --train --momentum 0.9
has "state %layer4.block1.conv2d1.weight.momentum_buffer"
has "update %batchnorm0.running_mean = "
expect 1 "$gnc" dump lenet.train.gir --train
has "reserved for training"

# learning-rate schedules: the lr of each step is in the log lines
S=("$gnc" train "$lenet" --data tiny --batch 64 --lr 0.2 --epochs 3)
expect 0 "${S[@]}" --warmup 4
has "step 1/8  loss"
has "lr 0.05  "
has "step 4/8  loss"
expect 0 "${S[@]}" --schedule step --step-size 1 --gamma 0.5
has "epoch 3  step 8/8  loss"
if grep -q "epoch 2  step 1/8 .* lr 0.1  " <<<"$out" && grep -q "epoch 3  step 1/8 .* lr 0.05  " <<<"$out"; then
    ok; else bad "step schedule: $(grep 'step 1/8' <<<"$out")"; fi
expect 0 "${S[@]}" --schedule cosine
if grep -q "epoch 1  step 1/8 .* lr 0.2  " <<<"$out" && grep -q "epoch 2  step 5/8 .* lr 0.1  " <<<"$out"; then
    ok; else bad "cosine schedule: $(grep -E 'step (1|5)/8' <<<"$out")"; fi

# cuda where the driver cannot load (GNC_CUDA_LIBDIR names no folder, even on a
# machine with a GPU): the GPU executor's message, status 1, nothing written;
# a build without the toolkit refuses the device (GNC_TEST_CUDA_RUNTIME, set by
# tests/CMakeLists.txt)
if [ "${GNC_TEST_CUDA_RUNTIME:-ON}" = ON ]; then
    nocuda="no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
else
    nocuda="this build of gnc has no CUDA runtime (built without the CUDA toolkit)"
fi

# flags
expect 2 "$gnc" train "$lenet" --lr -1;               has "--lr needs a positive number"
expect 2 "$gnc" train "$lenet" --optimizer rmsprop;   has "--optimizer needs sgd, adam or adamw"
expect 1 env GNC_CUDA_LIBDIR=/nonexistent-gnc "$gnc" train "$lenet" --device cuda --checkpoint cuda.st --log cuda.csv
has "$nocuda"
if [ ! -e cuda.st ] && [ ! -e cuda.csv ]; then ok; else bad "a failed cuda training left files"; fi
expect 2 "$gnc" train "$lenet" --device tpu;          has "--device needs cpu or cuda"
expect 2 "$gnc" train "$lenet" --epochs 0;            has "--epochs needs a positive integer"
expect 2 "$gnc" train "$lenet" --optimizer adam --momentum 0.9;  has "apply to --optimizer sgd"
expect 2 "$gnc" dump "$lenet" --train --nesterov;     has "--nesterov needs a --momentum"
expect 2 "$gnc" eval "$lenet" --lr 0.1;               has "does not apply to this command"
expect 2 "$gnc" eval "$lenet" --data tiny;            has "eval needs --weights"

summary train
