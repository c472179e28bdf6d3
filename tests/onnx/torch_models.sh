#!/usr/bin/env bash
# PyTorch as an oracle of the ONNX importer: torch_models.sh GNC SOURCE_DIR WORK_DIR.
# Each model of tests/onnx/models/ (written by tests/onnx/gen.py from PyTorch,
# with its weights; the encoder's and decoder's attention fused by
# passes/attention.c, which is checked too) runs through `gnc run NAME.onnx --input IN=NAME.input.npy
# -o WORK_DIR/NAME` on the CPU, and its output must match PyTorch's
# (NAME.output.npy) element by element within 1e-5 + 1e-4 * |PyTorch's value|.
# Prints the worst error of each model; ends with "onnx_torch: N passed, M
# failed".  Needs python3 (its standard library reads the .npy files), neither
# torch nor numpy.  Exits 77 (skipped) when this gnc has no ONNX import yet:
# built without ONNX support, or with the importer's placeholder.
set -u
gnc=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
models=$src/tests/onnx/models
rm -rf "$work" && mkdir -p "$work" || exit 1

# NAME INPUT OUTPUT: the model and the names gen.py gave its input and output
MODELS="
lenet    image logits
resnet18 image logits
dwcnn    image logits
encoder  x     y
decoder  x     y
"

probe=$("$gnc" dump "$models/lenet.onnx" 2>&1 >/dev/null)
if grep -qE 'ONNX import is not written yet|without ONNX support' <<<"$probe"; then
    echo "SKIP: $(head -1 <<<"$probe")"
    exit 77
fi

# compare GOT WANT: both .npy float32 of one shape; prints the worst error and
# fails (listing the first mismatches) beyond the tolerance
compare() {
    python3 - "$1" "$2" <<'EOF'
import ast, struct, sys

ATOL, RTOL = 1e-5, 1e-4


def npy(path):
    """(shape, values) of a little-endian float32 .npy file, C order."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:6] != b"\x93NUMPY" or b[6] not in (1, 2, 3):
        sys.exit(f"{path}: not a .npy file")
    if b[6] == 1:
        hlen, at = struct.unpack_from("<H", b, 8)[0], 10
    else:
        hlen, at = struct.unpack_from("<I", b, 8)[0], 12
    h = ast.literal_eval(b[at:at + hlen].decode("latin1"))
    if h.get("descr") != "<f4" or h.get("fortran_order"):
        sys.exit(f"{path}: {h.get('descr')!r}, fortran_order {h.get('fortran_order')}: "
                 "want '<f4' in C order")
    n = 1
    for d in h["shape"]:
        n *= d
    data = b[at + hlen:]
    if len(data) != 4 * n:
        sys.exit(f"{path}: {len(data)} data bytes for shape {h['shape']}")
    return tuple(h["shape"]), struct.unpack(f"<{n}f", data)


(gs, got), (ws, want) = npy(sys.argv[1]), npy(sys.argv[2])
if gs != ws:
    sys.exit(f"shape {gs}, PyTorch's {ws}")
worst_abs = worst = 0.0
bad = []
for i, (g, w) in enumerate(zip(got, want)):
    d = abs(g - w)
    if not d <= ATOL + RTOL * abs(w):        # a NaN fails too
        bad.append((i, g, w))
    worst_abs = max(worst_abs, d)
    worst = max(worst, d / (ATOL + RTOL * abs(w)))
print(f"{len(want)} values, worst |gnc - torch| {worst_abs:.3g}, "
      f"worst error / tolerance {worst:.3g}")
for i, g, w in bad[:5]:
    print(f"  [{i}] gnc {g!r}, torch {w!r}")
sys.exit(1 if bad else 0)
EOF
}

# (lib.sh's expect sets $out: the names here are x and y)
while read -r name x y; do
    [ -n "$name" ] || continue
    expect 0 "$gnc" run "$models/$name.onnx" --device cpu --input "$x=$models/$name.input.npy" \
        -o "$work/$name"
    if [ ! -f "$work/$name/$y.npy" ]; then
        bad "$name: gnc wrote no $y.npy (in $work/$name: $(ls "$work/$name" 2>/dev/null | tr '\n' ' '))"
        continue
    fi
    if res=$(compare "$work/$name/$y.npy" "$models/$name.output.npy" 2>&1); then
        ok; echo "$name: $res"
    else
        bad "$name: $res"
    fi
done <<<"$MODELS"

# the attention these write out comes in as attention nodes (passes/attention.c),
# which the outputs above are computed with: the encoder's softmax(q k^T
# scale) v; the decoder's causal masks, a masked_fill of a tril buffer with
# -inf and an additive buffer of 0 and -inf; no softmax is left
# NAME COUNT CAUSAL
while read -r name count causal; do
    [ -n "$name" ] || continue
    expect 0 "$gnc" dump "$models/$name.onnx" -o "$work/$name.gir"
    got=$(grep -c " = attention(.*causal = $causal," "$work/$name.gir")
    if [ "$got" = "$count" ] && ! grep -q " = softmax(" "$work/$name.gir"; then ok
    else bad "$name: $got attention nodes with causal = $causal, want $count"; fi
done <<<"
encoder 2 0
decoder 2 1
"

summary onnx_torch
