#!/usr/bin/env bash
# Hostile ONNX models: hostile.sh GNC SOURCE_DIR WORK_DIR.
# hostile_gen.py writes them into WORK_DIR (Python's standard library only);
# hostile_cases.txt says, a line each, the command, its exit status and the
# words its message must hold.  Each case must exit with that status (never 0,
# never a signal or a timeout), print "error:" with the model's path and each
# word (case ignored, the path taken out first), print no sanitizer report,
# and leave nothing in out/ or at its -o path.  First the baselines that the
# cases break one thing each of must work: good.onnx, sym.onnx with -D batch,
# ext/good.onnx with its weights in ext/weights.bin, all three computing the
# same; valid GELU variants against a float64 reference, graph names of any
# bytes, and the format known by content through a pipe.  Ends with "onnx_hostile: N passed, M failed" (cases; the baselines
# count as one).  Exits 77 (skipped) when this gnc has no ONNX import yet:
# built without ONNX support, or with the importer's placeholder.
set -u
gnc=$1 src=$2 work=$3
case $gnc in */*) gnc=$(cd "$(dirname "$gnc")" && pwd)/$(basename "$gnc") ;; esac   # we cd below
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
python3 "$here/hostile_gen.py" . || { echo "onnx_hostile: hostile_gen.py failed"; exit 1; }

probe=$("$gnc" dump good.onnx 2>&1 >/dev/null)
if grep -qE 'ONNX import is not written yet|without ONNX support' <<<"$probe"; then
    echo "SKIP: $(head -1 <<<"$probe")"
    exit 77
fi

# the baselines: each imports and computes the logits that hostile_gen.py
# computed from the weights (logits.expected.npy), so the weights were read,
# and read right, from the model and from ext/weights.bin
expect 0 "$gnc" dump good.onnx
has "conv0.weight"
expect 0 "$gnc" dump sym.onnx -D batch=2
expect 0 "$gnc" dump ext/good.onnx
for m in good sym ext; do
    model=$m.onnx define=()
    [ $m = ext ] && model=ext/good.onnx
    [ $m = sym ] && define=(-D batch=2)
    expect 0 "$gnc" run $model "${define[@]}" --device cpu --input image=image.npy -o run/$m
    if python3 - run/$m/logits.npy logits.expected.npy <<'EOF'; then ok; else bad "$model: the logits differ from hostile_gen.py's"; fi
import os, struct, sys
if not os.path.isfile(sys.argv[1]):
    sys.exit(f"  no {sys.argv[1]}")
a, b = (open(p, "rb").read() for p in sys.argv[1:])
# both float32 [2, 10], written by numpy's rules: the last 80 bytes are the values
if len(a) < 80 + 10 or b"(2, 10)" not in a[:128]:
    sys.exit(f"  {sys.argv[1]}: not a .npy of shape (2, 10)")
x, y = struct.unpack("<20f", a[-80:]), struct.unpack("<20f", b[-80:])
bad = [(i, u, v) for i, (u, v) in enumerate(zip(x, y)) if not abs(u - v) <= 1e-5 + 1e-4 * abs(v)]
for i, u, v in bad[:5]:
    print(f"  [{i}] gnc {u!r}, expected {v!r}")
sys.exit(1 if bad else 0)
EOF
done
# the symbolic batch takes the value given
expect 0 "$gnc" run sym.onnx -D batch=3 --device cpu -o run/sym3
if head -c 128 run/sym3/logits.npy 2>/dev/null | grep -qF "(3, 10)"; then ok
else bad "sym.onnx -D batch=3: logits.npy is not of shape (3, 10)"; fi
# valid GELU patterns (hostile_gen.py, gelu_models): the pattern's last
# halving taken by several nodes, or its doubling used besides; each imports
# and computes every output as Python's float64 reference does
for m in gelu/*.onnx; do
    n=$(basename "$m" .onnx)
    expect 0 "$gnc" run "$m" --device cpu --input x=gelu/x.npy -o "run/$n"
    for e in gelu/$n.expected/*.npy; do
        if python3 - "run/$n/$(basename "$e")" "$e" <<'EOF'; then ok; else bad "$m: $(basename "$e" .npy) differs from hostile_gen.py's"; fi
import os, struct, sys
def floats(p):
    b = open(p, "rb").read()
    if b[:6] != b"\x93NUMPY" or b"'<f4'" not in b[:128]:
        sys.exit(f"  {p}: not a float32 .npy")
    h = 10 + struct.unpack("<H", b[8:10])[0]
    return struct.unpack(f"<{(len(b) - h) // 4}f", b[h:])
if not os.path.isfile(sys.argv[1]):
    sys.exit(f"  no {sys.argv[1]}")
x, y = floats(sys.argv[1]), floats(sys.argv[2])
bad = [(i, u, v) for i, (u, v) in enumerate(zip(x, y)) if not abs(u - v) <= 1e-5 + 1e-4 * abs(v)]
for i, u, v in bad[:5]:
    print(f"  [{i}] gnc {u!r}, expected {v!r}")
sys.exit(1 if bad or len(x) != len(y) else 0)
EOF
    done
done
# graph names of any byte and length: a plan holds them (its meta escaped and
# cut, its program whole), and what gnc prints shows them escaped
expect 0 "$gnc" compile name/newline.onnx --no-kernels -o run/newline.gnc
has 'model "two\nlines\x1b[31m" (name/newline.onnx)'
expect 0 "$gnc" inspect run/newline.gnc
has 'model "two\nlines\x1b[31m": an inference program'
if grep -q $'\x1b' <<<"$out"; then bad "inspect printed the name's escape byte"; else ok; fi
expect 0 "$gnc" compile name/long.onnx --no-kernels -o run/long.gnc
expect 0 "$gnc" run run/long.gnc --device cpu -o run/long
# the format by content where the name does not say: an ONNX model or IR
# text through a pipe, or in a file named otherwise, imports as with its name
expect 0 "$gnc" dump good.onnx -o run/good.gir
want=$(grep -v '^#' run/good.gir | sed 's/ @[^ ]*$//')
for how in pipe stdin noname ir; do
    case $how in
        pipe) expect 0 bash -c 'cat good.onnx | "$0" dump /dev/stdin' "$gnc" ;;
        stdin) expect 0 bash -c '"$0" dump - < good.onnx' "$gnc" ;;
        noname) cp good.onnx run/model.bin && expect 0 "$gnc" dump run/model.bin ;;
        ir) expect 0 bash -c 'cat run/good.gir | "$0" dump -' "$gnc" ;;
    esac
    got=$(grep -v '^#' <<<"$out" | sed 's/ @[^ ]*$//')
    if [ -n "$want" ] && [ "$got" = "$want" ]; then ok; else bad "good.onnx by $how: another graph"; fi
done
cases_pass=0 cases_fail=0
[ "$fail" = 0 ] && cases_pass=1 || cases_fail=1

while IFS='|' read -r -u 3 want words cmd; do
    want=${want// /}
    read -ra args <<<"$cmd"
    cmd=${args[*]}
    failed=$fail
    case $want in
        [1-9]|[1-9][0-9]|1[01][0-9]|12[0-7]) ;;
        *) bad "hostile_cases.txt: '$cmd': status '$want' is not 1 to 127"
           cases_fail=$((cases_fail + 1)); continue ;;
    esac
    file=${args[1]:-}
    outs=()
    for i in "${!args[@]}"; do
        [ "${args[$i]}" = -o ] && outs+=("${args[$((i + 1))]:-}")
    done
    expect "$want" timeout 60 "$gnc" "${args[@]}" </dev/null
    has "error:"
    has "$file"
    rest=${out//"$file"/FILE}
    IFS=',' read -ra ws <<<"$words"
    for w in "${ws[@]}"; do
        w=$(sed 's/^ *//; s/ *$//' <<<"$w")
        [ "$w" = - ] && continue
        if grep -qiF -- "$w" <<<"$rest"; then ok; else bad "'$cmd': the message lacks '$w'"; fi
    done
    if grep -qE 'Sanitizer|runtime error:' <<<"$out"; then bad "'$cmd': a sanitizer report"; else ok; fi
    left_behind "$cmd" "${outs[@]}"
    rm -rf out && mkdir out
    [ "$fail" = "$failed" ] && cases_pass=$((cases_pass + 1)) || cases_fail=$((cases_fail + 1))
done 3< <(grep -vE '^[[:space:]]*(#|$)' "$here/hostile_cases.txt")
[ $((cases_pass + cases_fail)) -gt 1 ] || { bad "hostile_cases.txt: no cases"; cases_fail=$((cases_fail + 1)); }

pass=$cases_pass fail=$cases_fail
summary onnx_hostile
