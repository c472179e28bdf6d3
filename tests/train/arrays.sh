#!/usr/bin/env bash
# gnc train and gnc eval on data sets of named arrays (docs/train.md, "Data
# sets"): arrays.sh GNC SOURCE_DIR WORK_DIR.  Makes its own small data: a
# regression (mse) from a folder of .npy files, its train/ and test/ split,
# the same in a safetensors file, a token stream (text and .npy) for a tiny
# language model with an embedding; then every refusal: a missing array, a
# sample shape, a dtype, sample counts, too few samples, a short stream, ids
# past the embedding, a model without tokens and next.  Ends with "N passed,
# M failed"; fails if any did.
set -u
gnc=$1 src=$2 work=$3
. "$src/tests/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
py=python3

cat >regress.net <<'NET'
model regress(batch = 16) {
    input x: f32[batch, 4]
    input target: f32[batch, 1]
    y = dense(x, 1)
    output y
    loss mse(y, target)
}
NET
cat >lm.net <<'NET'
model lm(batch = 4, seq = 8) {
    input tokens: i32[batch, seq]
    input next: i32[batch, seq]
    loss cross_entropy(transpose(dense(embedding(tokens, 256, 16), 256), [0, 2, 1]), next)
}
NET
$py - <<'PY'
# the arrays with the standard library alone (the tests need no numpy)
import array, json, os, random, struct
r = random.Random(0)
w = [1, -2, 0.5, 3]
x = [[r.gauss(0, 1) for _ in range(4)] for _ in range(200)]
t = [[sum(a * b for a, b in zip(row, w)) + 0.1] for row in x]
CODES = {'f': ('<f4', 'F32'), 'i': ('<i4', 'I32'), 'q': ('<i8', 'I64')}
def raw(rows, code):
    flat = [v for row in rows for v in row] if isinstance(rows[0], list) else rows
    return array.array(code, flat).tobytes()  # little-endian machine
def shape(rows):
    return (len(rows), len(rows[0])) if isinstance(rows[0], list) else (len(rows),)
def npy(path, rows, code='f'):
    sh = shape(rows)
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        CODES[code][0], ', '.join(map(str, sh)) + (',' if len(sh) == 1 else ''))
    head += ' ' * (-(len(head) + 11) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(head)) + head.encode() + raw(rows, code))
def save(d, **arrays):
    os.makedirs(d, exist_ok=True)
    for k, (rows, code) in arrays.items():
        npy(f'{d}/{k}.npy', rows, code)
save('reg', x=(x, 'f'), target=(t, 'f'))
save('split/train', x=(x[:160], 'f'), target=(t[:160], 'f'))
save('split/test', x=(x[160:], 'f'), target=(t[160:], 'f'))
save('missing', x=(x, 'f'))
save('shape', x=([[0.0] * 5] * 40, 'f'), target=(t[:40], 'f'))
save('dtype', x=([[0] * 4] * 40, 'i'), target=(t[:40], 'f'))
save('count', x=(x[:40], 'f'), target=(t[:30], 'f'))
save('few', x=(x[:10], 'f'), target=(t[:10], 'f'))
npy('ids.npy', [k % 300 for k in range(400)], 'q')
npy('ids_ok.npy', [k % 7 for k in range(400)], 'q')
# safetensors: train.NAME and test.NAME
tensors = {'train.x': x[:160], 'train.target': t[:160], 'test.x': x[160:], 'test.target': t[160:]}
head, body = {}, b''
for k, v in tensors.items():
    b = raw(v, 'f')
    head[k] = {'dtype': 'F32', 'shape': list(shape(v)), 'data_offsets': [len(body), len(body) + len(b)]}
    body += b
h = json.dumps(head).encode()
h += b' ' * (-len(h) % 8)
open('reg.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + body)
PY
for i in $(seq 40); do printf 'hello world, the quick brown fox jumps over the lazy dog. '; done >text.txt
printf 'short' >short.txt

# a regression from NAME.npy: the loss goes down; the test set is the last
# tenth; the accuracy is not measured (nan in the CSV, null in JSON)
expect 0 "$gnc" train regress.net --data reg --epochs 3 --lr 0.05 --seed 1 --checkpoint r.st --log r.csv
has "training regress: 11 steps of 16 samples per epoch"
first=$(sed -n 2p r.csv | cut -d, -f5) last=$(sed -n 4p r.csv | cut -d, -f5)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 10) }'; then ok; else bad "test loss $first -> $last"; fi
if [ "$(sed -n 4p r.csv | cut -d, -f4)" = nan ]; then ok; else bad "r.csv: $(cat r.csv)"; fi
has "epoch 3: train loss"
expect 0 "$gnc" eval regress.net --data reg --weights r.st
has "test loss 0.0"
has "on 20 of 20 samples"
expect 0 "$gnc" eval regress.net --data reg --weights r.st --json
has '"accuracy":	null'

# train/ and test/ subfolders, and the same split in a safetensors file: the
# same runs, bit for bit
expect 0 "$gnc" train regress.net --data split --epochs 2 --lr 0.05 --checkpoint s1.st
has "10 steps of 16 samples"
expect 0 "$gnc" train regress.net --data reg.safetensors --epochs 2 --lr 0.05 --checkpoint s2.st
same s1.st s2.st "train/ test/ folders and a safetensors file"
expect 0 "$gnc" eval regress.net --data reg.safetensors --weights s2.st
has "on 40 of 40 samples"
# --test-fraction
expect 0 "$gnc" train regress.net --data reg --test-fraction 0.2 --steps 1
has "10 steps of 16 samples"

# a token stream: text as bytes, and .npy ids
expect 0 "$gnc" train lm.net --tokens text.txt --epochs 2 --lr 0.5 --log l.csv --checkpoint l.st
first=$(sed -n 2p l.csv | cut -d, -f3) last=$(sed -n 3p l.csv | cut -d, -f3)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then ok; else bad "lm loss $first -> $last"; fi
expect 0 "$gnc" eval lm.net --tokens text.txt --weights l.st
has "test loss"
expect 0 "$gnc" train lm.net --tokens ids_ok.npy --steps 2
# through a pipe: the same tokens, the same training
expect 0 "$gnc" train lm.net --tokens text.txt --steps 3 --checkpoint f.st
want=$(grep "^training" <<<"$out")
expect 0 bash -c 'cat text.txt | "$0" train lm.net --tokens /dev/stdin --steps 3 --checkpoint p.st' "$gnc"
has "$want"
if cmp -s f.st p.st; then ok; else bad "--tokens through a pipe trained otherwise"; fi

# refusals: each names the array and the problem, and nothing is trained
R=("$gnc" train regress.net --checkpoint none.st --data)
expect 1 "${R[@]}" missing
has "gnc: error: missing: no training array 'target' for the model's input 'target' f32[16, 1] (the arrays: x)"
expect 1 "${R[@]}" shape
has "gnc: error: shape: the training array 'x' has samples of shape f32[5], but the model's input 'x' is f32[16, 4]: each sample must be f32[4]"
expect 1 "${R[@]}" dtype
has "gnc: error: dtype: the training array 'x' is i32, which does not convert losslessly to the model's input 'x' (f32)"
expect 1 "${R[@]}" count
has "samples, but '"
has "every array needs one entry per sample"
expect 1 "${R[@]}" few
has "gnc: error: few: the training data holds 9 samples, too few for one batch of 16"
expect 1 "$gnc" train lm.net --tokens short.txt
has "gnc: error: short.txt: its training part holds 5 tokens, fewer than one window of seq + 1 = 9"
expect 1 "$gnc" train lm.net --tokens ids.npy
has "gnc: error: ids.npy: token ids go up to 299, but the embedding 'embedding0.weight' has 256 rows"
expect 1 "$gnc" train regress.net --tokens text.txt
has "--tokens needs the inputs 'tokens' and 'next', both i32 or i64 [batch, seq]"
expect 1 "$gnc" eval regress.net --data missing --weights r.st
has "no test array 'target'"
printf 'xx' >bad.safetensors
expect 1 "$gnc" train regress.net --data bad.safetensors
has "gnc: error: bad.safetensors: not a safetensors file (shorter than its 8-byte header length)"
expect 1 "$gnc" train regress.net --data gone.safetensors
has "gnc: error: gone.safetensors: No such file or directory"
expect 2 "$gnc" train regress.net --data reg --test-fraction 1
has "--test-fraction needs a number in [0, 1)"
if [ ! -e none.st ]; then ok; else bad "a refused run wrote none.st"; fi

# tools/sample.py draws text from a trained byte model through gnc run
cat >lm_out.net <<'NET'
model lm_out(batch = 4, seq = 8) {
    input tokens: i32[batch, seq]
    input next: i32[batch, seq]
    logits = dense(embedding(tokens, 256, 16, name = "emb"), 256, name = "head")
    output logits
    loss cross_entropy(transpose(logits, [0, 2, 1]), next)
}
NET
expect 0 "$gnc" train lm_out.net --tokens text.txt --epochs 3 --lr 0.5 --checkpoint lo.st
expect 0 $py "$src/tools/sample.py" "$gnc" lm_out.net lo.st --prompt "the qu" --chars 12 \
    --seq 8 --temperature 0
if [ ${#out} -eq 18 ] && [ "${out:0:6}" = "the qu" ]; then ok; else bad "sample.py printed '$out'"; fi

summary arrays
