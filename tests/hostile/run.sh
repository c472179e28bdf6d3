#!/usr/bin/env bash
# The hostile-input corpus: run.sh GNC SOURCE_DIR WORK_DIR.
# gen.py writes the inputs into WORK_DIR (checkpoints, IDX data, plans, DSL
# and IR text, from a tiny model and synthetic data: no data set needed);
# cases.txt says, a line each, the command, its exit status and a string its
# message must hold.  Each case must exit with that status (never 0, never a
# signal), print the string, print no sanitizer report, and leave nothing in
# out/ or at its -o, --checkpoint or --log path.  A command ending in
# ">/dev/full" runs with its standard output there.  Ends with "hostile: N
# passed, M failed" (cases; the baseline counts as one); fails if any did.
set -u
gnc=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export GNC_CACHE_DIR=$work/cache
/usr/bin/python3 "$here/gen.py" . "$src" || { echo "hostile: gen.py failed"; exit 1; }

# the baseline each case breaks one thing of works, so a case cannot pass by
# failing for another reason
expect 0 "$gnc" train tiny.net --data data --device cpu --epochs 2 --checkpoint base.st
expect 0 "$gnc" train tiny.net --data data-gz --device cpu --epochs 2 --resume base.st
has "resuming base.st at step 8"
expect 0 "$gnc" eval tiny.net --data data --device cpu --weights ckpt/good.st
has "on 32 of 32 images"
expect 0 "$gnc" inspect plan/good.gnc
expect 0 "$gnc" dump plan/good.gnc
cases_pass=0 cases_fail=0
[ "$fail" = 0 ] && cases_pass=1 || cases_fail=1

# outputs CMD...: the paths the command's options write
outputs() {
    while [ $# -gt 0 ]; do
        case $1 in
            -o|--checkpoint|--log) [ $# -gt 1 ] && echo "$2"; shift ;;
            --checkpoint=*|--log=*) echo "${1#*=}" ;;
        esac
        shift
    done
}

while IFS='|' read -r -u 3 want text cmd; do
    want=${want// /} text=$(sed 's/^ *//; s/ *$//' <<<"$text")
    read -ra args <<<"$cmd"
    cmd=${args[*]}
    failed=$fail
    case $want in
        [1-9]|[1-9][0-9]|1[01][0-9]|12[0-7]) ;;
        *) bad "cases.txt: '$cmd': status '$want' is not 1 to 127"
           cases_fail=$((cases_fail + 1)); continue ;;
    esac
    mapfile -t outs < <(outputs "${args[@]}")
    before=()
    for o in "${outs[@]}"; do [ -e "$o" ] && before+=(y) || before+=(n); done
    if [ "${args[-1]}" = ">/dev/full" ]; then      # standard output on a full disk
        unset 'args[-1]'
        expect "$want" bash -c 'exec "$@" >/dev/full' - "$gnc" "${args[@]}" </dev/null
    else
        expect "$want" "$gnc" "${args[@]}" </dev/null
    fi
    has "$text"
    if grep -qE 'Sanitizer|runtime error:' <<<"$out"; then bad "'$cmd': a sanitizer report"; else ok; fi
    marked=()
    for i in "${!outs[@]}"; do
        [ "${before[$i]}" = n ] && marked+=("${outs[$i]}") || marked+=("=${outs[$i]}")
    done
    left_behind "$cmd" "${marked[@]}"
    rm -rf out && mkdir out
    [ "$fail" = "$failed" ] && cases_pass=$((cases_pass + 1)) || cases_fail=$((cases_fail + 1))
done 3< <(grep -vE '^[[:space:]]*(#|$)' "$here/cases.txt")
[ $((cases_pass + cases_fail)) -gt 1 ] || { bad "cases.txt: no cases"; cases_fail=$((cases_fail + 1)); }

# --- output paths and temporaries (docs/reliability.md): what stands at an
# output path is written in place (a FIFO, a device, a link to one) or
# replaced by a whole new file through a unique temporary (a regular file, or
# the file a link names: the link stays), never replaced when not a regular
# file; a link planted where a temporary of old was named is not followed
pass=0 fail=0
mkdir -p paths && cd paths || exit 1
mkfifo fifo
timeout 30 cat fifo > from-fifo & reader=$! # ends even where gnc replaced the FIFO
expect 0 "$gnc" dump ../tiny.net -o fifo
wait $reader
if [ -p fifo ] && grep -q "^graph" from-fifo; then ok; else bad "a FIFO at -o: replaced or not written"; fi
ln -s /dev/null to-null
expect 0 "$gnc" dump ../tiny.net -o to-null
if [ -L to-null ] && [ -c /dev/null ]; then ok; else bad "a link to /dev/null at -o: replaced"; fi
expect 0 "$gnc" dump ../tiny.net -o /dev/null
if [ -c /dev/null ]; then ok; else bad "/dev/null is no longer a character device"; fi
mkdir adir
expect 1 "$gnc" dump ../tiny.net -o adir
has "cannot write 'adir': it is a directory"
ln -s nowhere/x dangling
expect 1 "$gnc" dump ../tiny.net -o dangling
has "cannot write 'dangling': it is a link to nothing"
echo old > real.gir && chmod 600 real.gir && ln -s real.gir link.gir
expect 0 "$gnc" dump ../tiny.net -o link.gir
if [ -L link.gir ] && grep -q "^graph" real.gir && [ "$(stat -c %a real.gir)" = 600 ]; then ok
else bad "a link to a regular file at -o: the link replaced, or the file's mode changed"; fi
echo precious > victim && ln -s victim ck.st.tmp
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --epochs 1 --checkpoint ck.st
if [ "$(cat victim)" = precious ] && [ -s ck.st ]; then ok
else bad "the checkpoint followed a link at ck.st.tmp"; fi
ln -s /dev/null null.gnc && ln -s /dev/null null.onnx
expect 0 "$gnc" compile ../tiny.net --no-kernels -o null.gnc
expect 0 "$gnc" export ../tiny.net -o null.onnx
if [ -L null.gnc ] && [ -L null.onnx ]; then ok; else bad "compile or export -o replaced a link"; fi
# a resumed run's checkpoint records the seed the run used, its checkpoint's
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --epochs 1 --seed 3 --checkpoint s3.st
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --epochs 2 --resume s3.st --checkpoint s3b.st
has "seed 3"
if grep -aq '"seed":"3"' s3b.st; then ok; else bad "s3b.st does not record seed 3"; fi
# an epoch resumed in its middle: its log row's train_loss covers the whole
# epoch, as the uninterrupted run's does (the checkpoint carries the sum)
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --epochs 1 --log whole.csv
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --steps 3 --checkpoint part.st --log part.csv
expect 0 "$gnc" train ../tiny.net --data ../data --device cpu --epochs 1 --resume part.st --log part.csv
w=$(tail -1 whole.csv | cut -d, -f1-3) p=$(tail -1 part.csv | cut -d, -f1-3)
if [ -n "$w" ] && [ "$w" = "$p" ]; then ok; else bad "resumed mid-epoch, the epoch's row is '$p', not '$w'"; fi
left=$(ls -A | grep -vxE 'fifo|from-fifo|to-null|adir|dangling|real.gir|link.gir|victim|ck.st.tmp|ck.st|null.gnc|null.onnx|s3.st|s3b.st|whole.csv|part.st|part.csv')
if [ -z "$left" ]; then ok; else bad "temporaries left: $left"; fi
cd .. || exit 1
paths_pass=$pass paths_fail=$fail
echo "output paths: $paths_pass passed, $paths_fail failed"

# --- data sets in a safetensors file read through a pipe or from a device:
# the data its header promises, as it arrives, then nothing more
pass=0 fail=0
expect 0 "$gnc" train tiny.net --device cpu --data dst/good.st --epochs 1 --checkpoint out/f.st
has "training tiny: 1 steps of 16 samples per epoch"
expect 0 bash -c 'cat dst/good.st | "$0" train tiny.net --device cpu --data /dev/stdin --epochs 1 --checkpoint out/p.st' "$gnc"
has "training tiny: 1 steps of 16 samples per epoch"
if cmp -s out/f.st out/p.st; then ok; else bad "trained from a pipe, the checkpoint differs from the file's"; fi
expect 1 bash -c 'head -c 50000 dst/good.st | "$0" train tiny.net --device cpu --data /dev/stdin --epochs 1' "$gnc"
has "/dev/stdin: truncated: its header promises 100480 bytes of data, it holds"
expect 1 bash -c 'cat dst/good.st dst/good.st | "$0" train tiny.net --device cpu --data /dev/stdin --epochs 1' "$gnc"
has "/dev/stdin: bytes after the 100480 bytes of data its header promises"
# a header promising a petabyte, and a pipe that ends: refused as it ends,
# never allocated up front
python3 -c 'import json, struct, sys
h = json.dumps({"image": {"dtype": "U8", "shape": [1 << 50], "data_offsets": [0, 1 << 50]}}).encode()
sys.stdout.buffer.write(struct.pack("<Q", len(h)) + h + b"x" * 1000)' > dst/petabyte.st
expect 1 bash -c 'cat dst/petabyte.st | "$0" train tiny.net --device cpu --data /dev/stdin --epochs 1' "$gnc"
has "truncated: its header promises 1125899906842624 bytes of data, it holds 1000"
rm -rf out && mkdir out
datast_pass=$pass datast_fail=$fail
echo "data-set safetensors: $datast_pass passed, $datast_fail failed"

pass=$((cases_pass + paths_pass + datast_pass)) fail=$((cases_fail + paths_fail + datast_fail))
summary hostile
