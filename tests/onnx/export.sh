#!/usr/bin/env bash
# gnc export, end to end: export.sh GNC SOURCE_DIR WORK_DIR [DATA_DIR].
#
# Every model of models/ (at batch 2), of tests/golden/ops.net and the
# patterns.net written below (every multi-node pattern once) exports, and
# each file passes ONNX's own checker with full_check (its strict shape
# inference compares every node's result with the type gnc gave it: the
# exporter writes a value_info for each).  Each file is checked further in
# Python, without numpy: opset 17 and ir_version 8, every IR value of
# `gnc dump` is a node's output of the same name, the graph's inputs and
# outputs are the model's, the initializers are its parameters and buffers.
# The weights: exporting with --weights writes the checkpoint's bytes (a
# checkpoint written here in Python, and one of `gnc train --steps 1` when
# DATA_DIR has Fashion-MNIST); the same seed gives the same file, another
# seed other values.  Errors: an op without an ONNX form, a model with no
# output but its loss, bad flags and files: an error naming the problem, a
# non-zero status and no file (no temporary one either).  The round trip:
# `gnc dump` of each exported file gives the IR text of its source again (up
# to the initializers and the loss), and a pattern whose names or constants
# are not gnc export's stays as its ONNX nodes.  Attention exports as its
# pattern (Transpose, MatMul, Mul, a Where of a constant lower-triangular
# bool mask and -inf, Softmax, MatMul: checked node by node in gpt_tiny) and
# comes back as one attention node (passes/attention.c); a mask or fill
# that is not causal attention's stays unfused; an ONNX Trilu of a constant
# makes a mask as well; attention's lse read by anything refuses the export.
#
# Skips (77) where gnc was built without ONNX, or where no python3 imports
# onnx (Debian's python3-onnx).  Where onnxruntime and numpy import too, the
# models also run there against `gnc run` (within 1e-4).
set -u
gnc=$1 src=$2 work=$3 data=${4:-}
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

out=$("$gnc" export "$src/models/mlp.net" -D batch=2 -o probe.onnx 2>&1)
if grep -q "without ONNX support" <<<"$out"; then
    echo "SKIP: $out"
    exit 77
fi
py=
for p in python3 /usr/bin/python3; do
    if "$p" -c "import onnx" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 imports onnx (install python3-onnx)"; exit 77; }

# check.py ONNX DUMP: the checker, then the file against gnc dump's IR text
cat >check.py <<'EOF'
import re, sys, onnx
path, dump = sys.argv[1], sys.argv[2]
m = onnx.load(path)
onnx.checker.check_model(m, full_check=True)
assert m.ir_version == 8, m.ir_version
assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)], m.opset_import
assert m.producer_name == "gnc", m.producer_name
text = open(dump).read()
values = re.findall(r"^  %(\S+): [^=]*= ", text, re.M)
inputs = re.findall(r"^  input %(\S+):", text, re.M)
params = re.findall(r"^  (?:param|buffer) %(\S+):", text, re.M)
outputs = re.findall(r"^  output (\S+) = %", text, re.M)
produced = {o for n in m.graph.node for o in n.output}
missing = [v for v in values if v not in produced]
assert not missing, "IR values no node writes: %s" % missing[:5]
assert [i.name for i in m.graph.input] == inputs, ([i.name for i in m.graph.input], inputs)
assert [o.name for o in m.graph.output] == outputs, ([o.name for o in m.graph.output], outputs)
inits = {t.name for t in m.graph.initializer}
assert set(params) <= inits, "parameters not initializers: %s" % (set(params) - inits)
for n in m.graph.node:
    assert n.name == n.output[0], (n.name, n.output)
print("%s: %d nodes, %d initializers" % (path, len(m.graph.node), len(m.graph.initializer)))
EOF

# the model's IR without its loss, as gnc export writes it: the loss, the
# nodes only it reads and the inputs only they read go
strip_loss() {
    "$py" - "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
loss = re.search(r"^  loss %(\S+)$", text, re.M)
if loss:
    lines = text.split("\n")
    used = set(re.findall(r"^  output \S+ = %(\S+)", text, re.M))
    keep = []
    for line in reversed(lines):
        d = re.match(r"^  %(\S+): [^=]*= \w+\((.*?)\)", line)
        if d:
            if d.group(1) not in used:
                continue
            used |= set(re.findall(r"%([^,\s)]+)", d.group(2)))
        keep.append(line)
    keep = [l for l in reversed(keep) if not l.startswith("  loss ")]
    keep = [l for l in keep if not re.match(r"^  input %(\S+):", l) or
            re.match(r"^  input %(\S+):", l).group(1) in used]
    text = "\n".join(keep)
open(sys.argv[1], "w").write(text)
EOF
}

# every model of models/, at batch 2, and patterns.net: each IR op that
# export writes as several ONNX nodes, or as nodes on constants that an
# importer would fold (a causal mask: const, arange, le, where), once
cat >patterns.net <<'EOF'
model patterns(batch = 2) {
    input x: f32[batch, 3, 8]
    input k: i32[batch, 3]
    input v: f32[8]
    h = dense(x, 6, name = "fc")
    output y_vec = dense(v, 3, name = "fv")
    output y_gelu = gelu(h)
    output y_gelu_tanh = gelu(h, approximate = "tanh")
    output y_silu = silu(h)
    output y_rsqrt = rsqrt(h * h + 1.0)
    output y_nobias = dense(x, 5, bias = false, name = "nb")
    output y_arg = argmax(h, axis = 2)
    output y_ne = h != 0.5
    output y_mask = where(tril(full([3, 3], 1.0)), h[:, :, 0:3], -1e9)
    output y_emb = embedding(k, 10, 4, name = "emb")
    output y_ar = arange(0.0, 6.0, 1.0) + h
    output y_ari = arange(2, 11, 3)
    output y_att = scaled_dot_product_attention(x, x, x, causal = true)
    output y_att_cross = scaled_dot_product_attention(x[:, 0:2, :], x, h, scale = 0.6)
}
EOF
nets=("$src"/models/*.net "$PWD/patterns.net")
for net in "${nets[@]}"; do
    name=$(basename "$net" .net)
    expect 0 "$gnc" export "$net" -D batch=2 -o "$name.onnx"
    expect 0 "$gnc" dump "$net" -D batch=2 -o "$name.gir"
    strip_loss "$name.gir"
    expect 0 "$py" check.py "$name.onnx" "$name.gir"
    echo "$out" | tail -1
done

# every single-op model of tests/golden/ops.net that has an ONNX form; the
# others refuse, naming the node
ops=$src/tests/golden/ops.net
for name in $(sed -n 's/^model \([a-z0-9_]*\).*/\1/p' "$ops"); do
    "$gnc" export "$ops" --model "$name" -o "g_$name.onnx" >err.txt 2>&1
    case $name in
    pooling) # a ceil_mode window that starts in the padding: PyTorch drops it, ONNX not
        if grep -q "maxpool2d4 (maxpool2d) has no ONNX form" err.txt && [ ! -e "g_$name.onnx" ]
        then ok; else bad "golden $name: $(cat err.txt)"; fi ;;
    cross_entropy|cross_entropy_large) # a loss and nothing else
        if grep -q "has no outputs" err.txt && [ ! -e "g_$name.onnx" ]; then ok
        else bad "golden $name: $(cat err.txt)"; fi ;;
    *)
        if [ -s "g_$name.onnx" ]; then ok; else bad "golden $name: $(cat err.txt)"; fi
        expect 0 "$gnc" dump "$ops" --model "$name" -o "g_$name.gir"
        strip_loss "g_$name.gir"
        expect 0 "$py" check.py "g_$name.onnx" "g_$name.gir" ;;
    esac
done

# weights: a checkpoint's bytes are the initializers' (compare.py ONNX CKPT
# checks every tensor the two share, and that they share every parameter)
cat >compare.py <<'EOF'
import json, struct, sys, onnx
m = onnx.load(sys.argv[1])
raw = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
inits = {t.name: t for t in m.graph.initializer}
shared = [k for k in header if k in inits]
for k in shared:
    h, t = header[k], inits[k]
    assert h["dtype"] == "F32" and list(t.dims) == h["shape"], (k, h, list(t.dims))
    a, b = h["data_offsets"]
    assert t.raw_data == raw[8 + n + a:8 + n + b], "%s: values differ" % k
print("%d tensors equal" % len(shared))
assert len(shared) >= int(sys.argv[3]), "only %d tensors shared" % len(shared)
EOF
# a checkpoint of lenet's 10 parameters with values of its own, in Python
"$py" - lenet.onnx mine.safetensors <<'EOF'
import json, struct, sys, onnx
m = onnx.load(sys.argv[1])
header, blobs, off = {}, [], 0
for t in m.graph.initializer:
    if t.data_type != 1 or "." not in t.name or t.name.split(".")[-1] not in ("weight", "bias"):
        continue
    count = 1
    for d in t.dims:
        count *= d
    data = struct.pack("<%df" % count, *[(i % 97) / 97.0 - 0.5 for i in range(count)])
    header[t.name] = {"dtype": "F32", "shape": list(t.dims), "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(header).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
EOF
expect 0 "$gnc" export "$src/models/lenet.net" -D batch=2 --weights mine.safetensors -o w.onnx
expect 0 "$py" compare.py w.onnx mine.safetensors 10
has "10 tensors equal"
# the initializers' draw: the same for a seed, other values for another
expect 0 "$gnc" export "$src/models/lenet.net" -D batch=2 -o seed0.onnx
same lenet.onnx seed0.onnx "an export is deterministic"
expect 0 "$gnc" export "$src/models/lenet.net" -D batch=2 --seed 3 -o seed3.onnx
if cmp -s seed0.onnx seed3.onnx; then bad "--seed 3 exports the values of seed 0"; else ok; fi
# IR text whose weights are 'data' (an imported model's) holds no values: it
# needs --weights, which gives them
sed 's/^\(  param %fc3\.bias: [^=]*= \)uniform([^)]*)/\1data/' lenet.gir >data.gir
if grep -q "fc3.bias: f32\[10\] = data" data.gir; then ok; else bad "data.gir: no data initializer"; fi
expect 1 "$gnc" export data.gir -o bad.onnx
has "the values of 'fc3.bias' (initializer 'data') are not in IR text"
expect 0 "$gnc" export data.gir --weights mine.safetensors -o data.onnx
expect 0 "$py" compare.py data.onnx mine.safetensors 10

# a trained checkpoint (gnc train --steps 1), where the data is here
if [ -n "$data" ] && { [ -r "$data/train-images-idx3-ubyte.gz" ] || [ -r "$data/train-images-idx3-ubyte" ]; }; then
    mkdir -p tiny
    idx_slice train-images-idx3-ubyte 64 3 "$data" >tiny/train-images-idx3-ubyte
    idx_slice train-labels-idx1-ubyte 64 1 "$data" >tiny/train-labels-idx1-ubyte
    idx_slice t10k-images-idx3-ubyte 32 3 "$data" >tiny/t10k-images-idx3-ubyte
    idx_slice t10k-labels-idx1-ubyte 32 1 "$data" >tiny/t10k-labels-idx1-ubyte
    for m in lenet resnet18; do
        expect 0 "$gnc" train "$src/models/$m.net" --data tiny --batch 32 --steps 1 --device cpu \
            --checkpoint "$m.st"
        expect 0 "$gnc" export "$src/models/$m.net" -D batch=2 --weights "$m.st" -o "$m-trained.onnx"
        expect 0 "$py" compare.py "$m-trained.onnx" "$m.st" 10
        expect 0 "$py" check.py "$m-trained.onnx" "$m.gir"
    done
else
    echo "note: no Fashion-MNIST in '$data': no trained checkpoint exported"
fi

# errors: a message, a non-zero status, no file and no temporary one
none_left() { if compgen -G "$1*" >/dev/null; then bad "$1 left behind: $(ls "$1"*)"; else ok; fi; }
cat >uneven.net <<'EOF'
model uneven() {
    input x: f32[1, 2, 9, 8]
    y = relu(x)
    output z = adaptive_avgpool2d(y, [4, 3])
}
EOF
expect 1 "$gnc" export uneven.net -o bad.onnx
has "uneven.net:4:16: node %adaptive_avgpool2d0 (adaptive_avgpool2d) has no ONNX form"
none_left bad.onnx
# attention's lse (its row log-sum-exp) has no ONNX form: an output of it, or
# a node reading it, is refused naming the node
cat >lse.gir <<'EOF'
graph lse {
  input %q: f32[1, 2, 4, 8]
  %y: f32[1, 2, 4, 8], %y.1: f32[1, 2, 4] = attention(%q, %q, %q) {causal = 1, scale = 0.5}
  %z: f32[1, 2, 4] = exp(%y.1)
  output y = %y
  output z = %z
}
EOF
expect 1 "$gnc" export lse.gir -o bad.onnx
has "node %y (attention) has no ONNX form: its row log-sum-exp y.1 is read by z"
none_left bad.onnx
sed -e '/= exp(/d' -e 's/output z = %z/output lse = %y.1/' lse.gir >lse_out.gir
expect 1 "$gnc" export lse_out.gir -o bad.onnx
has "node %y (attention) has no ONNX form: its row log-sum-exp y.1 is output lse"
none_left bad.onnx
cat >lossonly.net <<'EOF'
model lossonly() {
    input x: f32[4, 3]
    input label: i32[4]
    loss cross_entropy(dense(x, 3), label)
}
EOF
expect 1 "$gnc" export lossonly.net -o bad.onnx
has "lossonly has no outputs (besides a loss): nothing to export"
none_left bad.onnx
expect 2 "$gnc" export "$src/models/mlp.net"
has "export needs -o FILE.onnx"
expect 1 "$gnc" export "$src/models/mlp.net" -D batch=2 --weights nonexistent.safetensors -o bad.onnx
has "nonexistent.safetensors"
none_left bad.onnx
expect 1 "$gnc" export "$src/models/mlp.net" -D batch=2 --weights mine.safetensors -o bad.onnx
has "fc0.weight"
none_left bad.onnx
expect 1 "$gnc" export "$src/models/mlp.net" -D batch=2 -o nodir/bad.onnx
has "cannot write 'nodir/bad.onnx'"
expect 1 "$gnc" export nonexistent.net -o bad.onnx
none_left bad.onnx
expect 2 "$gnc" export "$src/models/mlp.net" -o bad.onnx --repeat 3
has "option '--repeat' does not apply to this command"
expect 0 "$gnc" compile "$src/models/mlp.net" -D batch=2 -o mlp.gnc
expect 1 "$gnc" export mlp.gnc -o bad.onnx
has "is a plan"
none_left bad.onnx
expect 0 "$gnc" export --help
has "usage: gnc export"
# every option the help lists is one gnc export takes
for opt in $("$gnc" export --help | grep -oE '^  (-[A-Za-z]|--[a-z-]+)' | sort -u); do
    [ "$opt" = -h ] && continue
    err=$("$gnc" export "$opt" 2>&1 >/dev/null)
    if grep -qE "does not apply|unknown option" <<<"$err"; then bad "gnc export refuses $opt: $err"; else ok; fi
done

# onnxruntime against gnc run, where both import (not required: a pip
# package): each exported model on the same random inputs as gnc run of its
# source and of the exported file itself (as gnc imports it), within
# 1e-5 + 1e-4 |gnc's|
cat >ort.py <<'EOF'
import os, shutil, subprocess, sys, numpy as np, onnxruntime as ort
gnc, net, path = sys.argv[1:4]
s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
feeds, args = {}, []
for i in s.get_inputs():
    kind = {"tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(uint8)": np.uint8}
    if i.type in kind:
        a = rng.integers(0, 3, size=i.shape).astype(kind[i.type])
    else:
        a = rng.standard_normal(i.shape).astype(np.float32)
    feeds[i.name] = a
    np.save(i.name + ".npy", a)
    args += ["--input", "%s=%s.npy" % (i.name, i.name)]
shutil.rmtree("ort-out", ignore_errors=True)
subprocess.run([gnc, "run", net, "--device", "cpu", "-o", "ort-out"] + args + sys.argv[4:],
               check=True, stdout=subprocess.DEVNULL)
for o, y in zip(s.get_outputs(), s.run(None, feeds)):
    ref = np.load(os.path.join("ort-out", o.name + ".npy"))
    bad = np.abs(y - ref) > 1e-5 + 1e-4 * np.abs(ref)
    assert y.shape == ref.shape and not bad.any(), (path, o.name, np.max(np.abs(y - ref)))
print(path, "matches onnxruntime")
EOF
if "$py" -c "import onnxruntime, numpy" 2>/dev/null; then
    for net in "${nets[@]}"; do
        name=$(basename "$net" .net)
        expect 0 "$py" ort.py "$gnc" "$net" "$name.onnx" -D batch=2
        expect 0 "$py" ort.py "$gnc" "$name.onnx" "$name.onnx"
    done
    for f in g_*.onnx; do
        name=${f#g_}
        expect 0 "$py" ort.py "$gnc" "$ops" "$f" --model "${name%.onnx}"
        expect 0 "$py" ort.py "$gnc" "$f" "$f"
    done
else
    echo "note: no onnxruntime and numpy: exported models not run"
fi

# the round trip: gnc export, then the import, gives the model's IR text
# again (without the loss, which export leaves out, and with the
# initializers' draws as their data) for every model of models/ and
# patterns.net: each IR op's ONNX pattern imports as that op again
# (attention, through the attention pass, with its scale; patterns.net's
# causal mask's const, arange, le and where, not folded into data;
# gelu_tanh; dense of rank 3).  gpt_tiny's outputs through ONNX are also
# compared with the .net's.  reduce_max's and reduce_min's ties are left
# out: ONNX's ReduceMax carries no gradient convention, and imports as
# torch.amax's (ties split), so a max along an axis (ties 0) comes back with 1
if "$gnc" dump lenet.onnx >/dev/null 2>&1; then
    # (an imported weight's 'from "NAME"', the initializer it came from, is
    # checked apart: the name the export gave it, its own)
    noinit() { sed -E 's/ = (uniform|normal)\([^)]*\)( zero_row\([0-9]+\))?| = (data|zeros|ones)//; s/ from "[^"]*"//; s/ @.*//; s/, ties = [01]//' "$1"; }
    for net in "${nets[@]}"; do
        name=$(basename "$net" .net)
        expect 0 "$gnc" dump "$name.onnx" -o "$name.back.gir"
        if diff <(noinit "$name.gir") <(noinit "$name.back.gir") >"$name.rt.diff"; then ok; else
            bad "$name: export then import changes the IR text:"; head -20 "$name.rt.diff"; fi
        if python3 - "$name.back.gir" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if re.match(r"  (param|buffer) ", l)]
for l in lines:
    m = re.match(r'  \w+ %("?)(.*?)\1: .* from "(.*?)"', l)
    assert m and m.group(2) == m.group(3), l
PY
        then ok; else bad "$name: an imported weight's source is not its own name"; fi
    done
    # and every single-op model of tests/golden/ops.net that exports, but for
    # reduce (its const 1/24 comes back as the float it is, 0.041666668) and
    # shaping (a slice that nothing reads, which the import drops)
    for f in g_*.onnx; do
        name=${f#g_}
        name=${name%.onnx}
        case $name in reduce|shaping) continue ;; esac
        expect 0 "$gnc" dump "$f" -o "g_$name.back.gir"
        if diff <(noinit "g_$name.gir") <(noinit "g_$name.back.gir") >"g_$name.rt.diff"; then ok
        else
            bad "golden $name: export then import changes the IR text:"
            head -20 "g_$name.rt.diff"
        fi
    done
    # sum_to, which only passes make (IR text, then): with leading axes it
    # is ReduceSum and a Reshape dropping them
    cat >sum_to.gir <<'EOF'
graph sum_to {
  input %x: f32[2, 3, 4]
  %s: f32[3, 1] = sum_to(%x) {shape = [3, 1]}
  %t: f32[1, 3, 1] = sum_to(%x) {shape = [1, 3, 1]}
  %u: f32[2, 3, 4] = sum_to(%x) {shape = [2, 3, 4]}
  %v: f32[1, 3, 1] = add(%s, %t)
  %w: f32[2, 3, 4] = mul(%u, %v)
  output w = %w
}
EOF
    expect 0 "$gnc" export sum_to.gir -o sum_to.onnx
    expect 0 "$py" check.py sum_to.onnx sum_to.gir
    expect 0 "$gnc" dump sum_to.gir -o sum_to.a.gir
    expect 0 "$gnc" dump sum_to.onnx -o sum_to.b.gir
    if diff <(noinit sum_to.a.gir) <(noinit sum_to.b.gir) >sum_to.rt.diff; then ok
    else bad "sum_to: export then import changes the IR text:"; head -20 sum_to.rt.diff; fi
    # the patterns are recognized by their names and values, nothing less:
    # block 0's gelu_tanh with another coefficient stays its Mul/Tanh/Pow
    # nodes; block 0's causal mask with one key above the diagonal and block
    # 1's fill of -1e4 (not -inf to a softmax) stay their MatMul, Where and
    # Softmax nodes, blocks 2 and 3 come back as attention (passes/attention.c)
    expect 0 "$py" - gpt_tiny.onnx other.onnx <<'EOF'
import struct, sys, onnx
m = onnx.load(sys.argv[1])
masks = sorted(t.name for t in m.graph.initializer if t.name.startswith("gpt.block0.") and
               t.name.endswith(".mask") and t.data_type == onnx.TensorProto.BOOL)
fills = sorted(t.name for t in m.graph.initializer if t.name.startswith("gpt.block1.") and
               t.name.endswith(".fill"))
assert len(masks) == 1 and len(fills) == 1, (masks, fills)
for t in m.graph.initializer:
    if t.name == "gpt.block0.gelu0.coef":
        t.raw_data = struct.pack("<f", 0.05)
    if t.name == masks[0]:
        raw = bytearray(t.raw_data)
        raw[1] = 1    # row 0 sees key 1
        t.raw_data = bytes(raw)
    if t.name == fills[0]:
        t.raw_data = struct.pack("<f", -1e4)
onnx.save(m, sys.argv[2])
EOF
    expect 0 "$gnc" dump other.onnx -o other.gir
    if grep -q "^  %gpt.block0.gelu0.tanh: .* = tanh(" other.gir &&
       grep -q "^  %gpt.block1.gelu0: .* = gelu_tanh(" other.gir; then ok
    else bad "a GELU of another coefficient taken for gelu_tanh"; fi
    if [ "$(grep -c ' = attention(' other.gir)" = 2 ] && [ "$(grep -c ' = softmax(' other.gir)" = 2 ] &&
       grep -q "^  %gpt.block0\.[^:]*: .* = softmax(" other.gir &&
       grep -q "^  %gpt.block1\.[^:]*: .* = softmax(" other.gir &&
       grep -q "^  %gpt.block2\.[^:]*: .* = attention(.*causal = 1" other.gir; then ok
    else bad "a mask not lower-triangular, or a fill of -1e4, taken for causal attention"; fi
    # gpt_tiny's attention exports as the pattern: for each of its 4 blocks a
    # Softmax (axis -1) of Where(a bool [64, 64] initializer true where
    # j <= i, Mul(MatMul(q, Transpose(k, the last two axes)), 1/sqrt(64)),
    # -inf), read by one MatMul as its first operand; and comes back as
    # attention nodes, causal, with no softmax left
    expect 0 "$py" - gpt_tiny.onnx <<'EOF'
import math, struct, sys, onnx
m = onnx.load(sys.argv[1])
inits = {t.name: t for t in m.graph.initializer}
by_out = {o: n for n in m.graph.node for o in n.output}
readers = {}
for n in m.graph.node:
    for i in n.input:
        readers.setdefault(i, []).append(n)
def scalar(name):
    t = inits[name]
    assert t.data_type == 1 and list(t.dims) == [], name
    return struct.unpack("<f", t.raw_data)[0]
softmax = [n for n in m.graph.node if n.op_type == "Softmax"]
assert len(softmax) == 4, len(softmax)
for sm in softmax:
    assert [a.i for a in sm.attribute if a.name == "axis"] == [-1], sm
    (mm,) = readers[sm.output[0]]
    assert mm.op_type == "MatMul" and mm.input[0] == sm.output[0], mm
    where = by_out[sm.input[0]]
    assert where.op_type == "Where", where.op_type
    mask = inits[where.input[0]]
    assert mask.data_type == onnx.TensorProto.BOOL and list(mask.dims) == [64, 64], mask.name
    assert mask.raw_data == bytes(j <= i for i in range(64) for j in range(64)), mask.name
    assert scalar(where.input[2]) == -math.inf
    mul = by_out[where.input[1]]
    assert mul.op_type == "Mul" and abs(scalar(mul.input[1]) - 64 ** -0.5) < 1e-7, mul
    scores = by_out[mul.input[0]]
    assert scores.op_type == "MatMul", scores.op_type
    kt = by_out[scores.input[1]]
    assert kt.op_type == "Transpose", kt.op_type
    assert [list(a.ints) for a in kt.attribute if a.name == "perm"] == [[0, 1, 3, 2]], kt
print("gpt_tiny.onnx: 4 attention patterns")
EOF
    for f in gpt_tiny.gir gpt_tiny.back.gir; do
        if [ "$(grep -c ' = attention(.*causal = 1, scale = 0.125}' "$f")" = 4 ] &&
           ! grep -qE ' = (softmax|where)\(' "$f"; then ok
        else bad "$f: not 4 causal attention nodes of scale 1/8 and no softmax"; fi
    done
    # the outputs through ONNX are the .net's (one program: within rounding)
    expect 0 "$gnc" export "$src/models/gpt_tiny.net" -D batch=2 --seed 7 -o gpt7.onnx
    expect 0 "$gnc" run "$src/models/gpt_tiny.net" -D batch=2 --seed 7 -o gpt-net
    expect 0 "$gnc" run gpt7.onnx --seed 7 -o gpt-onnx
    expect 0 python3 - gpt-net/logits.npy gpt-onnx/logits.npy <<'PY'
import ast, struct, sys
def npy(path):
    b = open(path, "rb").read()
    hlen = struct.unpack_from("<H", b, 8)[0]
    h = ast.literal_eval(b[10:10 + hlen].decode("latin1"))
    n = len(b[10 + hlen:]) // 4
    return h["shape"], struct.unpack("<%df" % n, b[10 + hlen:])
(sa, a), (sb, b) = npy(sys.argv[1]), npy(sys.argv[2])
worst = max(abs(x - y) / (1e-6 + 1e-6 * abs(x)) for x, y in zip(a, b))
print("gpt_tiny through ONNX: worst error %.3g of 1e-6 + 1e-6 |x|" % worst)
sys.exit(0 if sa == sb and worst <= 1 else 1)
PY
    echo "$out"
    # an ONNX model's causal attention with the mask a Trilu of a constant
    # (folded at import) cast to bool, -inf beside it: one attention node; a
    # Trilu of a run-time tensor (k = 1, upper) is where(ge(aranges), x, 0),
    # the DSL's triu; both compute what the .net of the same names computes
    expect 0 "$py" - trilu.onnx <<'EOF'
import math, sys, onnx
from onnx import TensorProto as T, helper as h
f32 = lambda name, dims: h.make_tensor_value_info(name, T.FLOAT, dims)
nodes = [
    h.make_node("Trilu", ["ones"], ["tri"], upper=0),
    h.make_node("Cast", ["tri"], ["cond"], to=T.BOOL),
    h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
    h.make_node("MatMul", ["q", "kt"], ["s"]),
    h.make_node("Mul", ["s", "half"], ["ss"]),
    h.make_node("Where", ["cond", "ss", "neginf"], ["m"]),
    h.make_node("Softmax", ["m"], ["p"], axis=-1),
    h.make_node("MatMul", ["p", "v"], ["y"]),
    h.make_node("Trilu", ["x", "one"], ["z"], upper=1),
]
inits = [h.make_tensor("ones", T.FLOAT, [4, 4], [1.0] * 16),
         h.make_tensor("half", T.FLOAT, [], [0.5]),
         h.make_tensor("neginf", T.FLOAT, [], [-math.inf]),
         h.make_tensor("one", T.INT64, [], [1])]
g = h.make_graph(nodes, "trilu", [f32(n, [1, 2, 4, 8]) for n in "qkv"] + [f32("x", [3, 5])],
                 [f32("y", [1, 2, 4, 8]), f32("z", [3, 5])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
EOF
    cat >trilu.net <<'EOF'
model trilu() {
    input q: f32[1, 2, 4, 8]
    input k: f32[1, 2, 4, 8]
    input v: f32[1, 2, 4, 8]
    input x: f32[3, 5]
    output y = scaled_dot_product_attention(q, k, v, causal = true, scale = 0.5)
    output z = triu(x, 1)
}
EOF
    expect 0 "$gnc" dump trilu.onnx -o trilu.gir
    if grep -q "^  %y: f32\[1, 2, 4, 8\], %y.1: f32\[1, 2, 4\] = attention(%q, %k, %v) {causal = 1, scale = 0.5}" trilu.gir &&
       grep -q "^  %z: f32\[3, 5\] = where(" trilu.gir && [ "$(grep -c '^  param' trilu.gir)" = 0 ]; then ok
    else bad "trilu.onnx: not attention and a where:"; cat trilu.gir; fi
    expect 0 "$gnc" run trilu.onnx --seed 3 -o trilu-onnx
    expect 0 "$gnc" run trilu.net --seed 3 -o trilu-net
    for o in y z; do same "trilu-onnx/$o.npy" "trilu-net/$o.npy" "trilu.onnx's $o"; done
else
    echo "note: this gnc imports no ONNX: the round trip is not run"
fi

summary onnx_export
