#!/usr/bin/env bash
# Long runs of gnc train are safe (docs/cli.md, "Stopping a run" and "Logs"):
#   long_runs.sh GNC SOURCE_DIR WORK_DIR DATA_DIR
# on a slice of Fashion-MNIST (512 training, 200 test images):
#   1. the output is line-buffered into a file: the first progress line is
#      there while the run goes on;
#   2. SIGINT (and SIGTERM): the run finishes its step, writes the checkpoint
#      and the log row, prints the command that resumes and exits 130; that
#      command, run as printed, ends with the checkpoint of a run that was
#      never stopped, bit for bit;
#   3. a second SIGINT ends the process at once, leaving the last checkpoint
#      whole and no FILE.tmp;
#   4. --checkpoint and --log make their folders, or say why they cannot;
#   5. --log-every N gives a row every N steps (counted from the run's
#      first) besides the epochs', in CSV
#      and in JSON lines (--log FILE.jsonl), with test_loss beside test_acc;
#   6. a reader that goes away (gnc dump | head) ends gnc quietly, status 0,
#      and a training run whose output is closed stops as at SIGINT.
#   7. --plot FILE.svg draws the rows as they come (train loss at every row,
#      test loss and accuracy at the epochs' ends), the same points gnc plot
#      draws from the run's log; a resumed run's picture starts with its
#      log's rows; gnc plot puts several logs side by side (a PyTorch log of
#      ../shared/bench/torch_fmnist.py's form among them); a bad log is an
#      error at its line and column, and nothing is written.
# Ends with "long_runs: N passed, M failed"; fails if any did.
set -u
gnc=$(realpath "$1") src=$2 work=$3 data=$(realpath "$4")
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work/tiny" && cd "$work" || exit 1
idx_slice train-images-idx3-ubyte 512 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 512 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 200 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 200 1 "$data" >tiny/t10k-labels-idx1-ubyte
lenet=$src/models/lenet.net
T=("$gnc" train "$lenet" --data tiny --batch 32 --lr 0.05 --momentum 0.9 --seed 5 --threads 1)

# waits up to 300 s (sanitizer builds are slow) for file $1 to hold a line
# matching $2
wait_for() {
    for _ in $(seq 3000); do grep -qE -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# 1 and 2: the reference, never stopped; then the same run stopped by SIGINT
expect 0 "${T[@]}" --epochs 100 --steps 1000 --checkpoint ref.st
"${T[@]}" --epochs 100 --steps 1000 --checkpoint run/b.st --log logs/b.csv >b.out 2>b.err &
pid=$!
if wait_for b.out "step 1/16" && kill -0 $pid 2>/dev/null; then ok; else bad "no progress line in the file while the run went on (is stdout line-buffered?)"; fi
wait_for b.out "step 3/16"
kill -INT $pid
wait $pid; rc=$?
if [ $rc = 130 ]; then ok; else bad "SIGINT: exit $rc, want 130"; cat b.err; fi
if grep -qE "^gnc: stopped by SIGINT after step [0-9]+ of 1000; checkpoint run/b.st written$" b.err; then ok; else bad "SIGINT: the message"; cat b.err; fi
resume=$(sed -n 's/^resume with: //p' b.err)
case "$resume" in
    *" --resume run/b.st") ok ;;
    *) bad "SIGINT: no command that resumes: '$resume'" ;;
esac
at=$(sed -n 's/^gnc: stopped by SIGINT after step \([0-9]*\) .*/\1/p' b.err)
if [ -n "$at" ] && [ "$(tail -1 logs/b.csv | cut -d, -f2)" = "$at" ]; then ok; else bad "SIGINT: the log's last row is not at step '$at': $(tail -1 logs/b.csv)"; fi
if [ ! -e run/b.st.tmp ]; then ok; else bad "SIGINT: run/b.st.tmp left"; fi
out=$(eval "$resume" 2>&1); rc=$?
if [ $rc = 0 ] && grep -qF "resuming run/b.st at step $at" <<<"$out"; then ok; else bad "the printed command: exit $rc"; echo "$out" | tail -5; fi
same ref.st run/b.st "stopped by SIGINT and resumed, against a run never stopped"
if [ "$(head -1 logs/b.csv)" = "epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds" ] &&
   [ "$(tail -1 logs/b.csv | cut -d, -f1,2)" = "63,1000" ]; then ok; else bad "logs/b.csv after the resume: $(head -1 logs/b.csv) ... $(tail -1 logs/b.csv)"; fi

# SIGTERM: the same
"${T[@]}" --epochs 100 --steps 1000 --checkpoint c.st >c.out 2>c.err &
pid=$!
wait_for c.out "step 2/16"
kill -TERM $pid
wait $pid; rc=$?
if [ $rc = 130 ] && grep -q "^gnc: stopped by SIGTERM after step" c.err && [ -s c.st ]; then ok; else bad "SIGTERM: exit $rc"; cat c.err; fi

# 3. a second SIGINT: at once, in the middle of a step of 2 s (resnet18 on
# 16 images); the checkpoint of the epoch before stays as it was
mkdir -p t16
idx_slice train-images-idx3-ubyte 32 3 "$data" >t16/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 32 1 "$data" >t16/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 16 3 "$data" >t16/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 16 1 "$data" >t16/t10k-labels-idx1-ubyte
"$gnc" train "$src/models/resnet18.net" --data t16 --batch 16 --threads 1 --epochs 1000 \
    --checkpoint d.st >d.out 2>d.err &
pid=$!
wait_for d.out "epoch 2  step 1/2"     # epoch 1's checkpoint is written
cp d.st d.before
kill -INT $pid
sleep 0.3
kill -INT $pid
t0=$(date +%s.%N)
wait $pid; rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
if [ $rc = 130 ] && [ "$(echo "$took < 1" | bc)" = 1 ] && ! grep -q "stopped by" d.err; then ok; else bad "a second SIGINT: exit $rc after $took s: $(cat d.err)"; fi
if [ ! -e d.st.tmp ]; then ok; else bad "a second SIGINT left d.st.tmp"; fi
same d.before d.st "a second SIGINT: the checkpoint before"

# 4. folders
expect 0 "${T[@]}" --steps 2 --checkpoint deep/er/e.st --log deep/log/e.csv
if [ -s deep/er/e.st ] && [ -s deep/log/e.csv ]; then ok; else bad "--checkpoint and --log did not make their folders"; fi
expect 1 "${T[@]}" --steps 2 --checkpoint tiny/train-images-idx3-ubyte/e.st
has "gnc: error: --checkpoint: cannot make the folder 'tiny/train-images-idx3-ubyte': Not a directory"
expect 1 "${T[@]}" --steps 2 --log tiny/train-labels-idx1-ubyte/x/e.csv
has "gnc: error: --log: cannot make the folder 'tiny/train-labels-idx1-ubyte': Not a directory"

# 5. --log-every: rows at steps 5, 10, 15, the epoch's at 16, then 20, ...
expect 0 "${T[@]}" --epochs 2 --log-every 5 --log f.csv
if [ "$(cut -d, -f1,2 f.csv | tr '\n' ' ')" = "epoch,steps 1,5 1,10 1,15 1,16 2,20 2,25 2,30 2,32 " ]; then ok; else bad "--log-every 5: $(cut -d, -f1,2 f.csv | tr '\n' ' ')"; fi
# the epochs' rows have the test accuracy and loss, the others nan
if awk -F, 'NR > 1 && ($2 % 16 == 0) != ($4 != "nan" && $5 != "nan") {exit 1}' f.csv; then ok; else bad "f.csv's test columns: $(cat f.csv)"; fi
expect 0 "${T[@]}" --epochs 2 --log-every 5 --log f.jsonl
if python3 - f.jsonl f.csv <<'PY'
import csv, json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ref = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == len(ref) == 8, (len(rows), len(ref))
for j, c in zip(rows, ref):
    assert list(j) == list(c), (list(j), list(c))
    for k in ("epoch", "steps", "train_loss", "test_acc", "test_loss"):
        v = float(c[k])
        assert (j[k] is None) if math.isnan(v) else j[k] == v, (k, j[k], c[k])
PY
then ok; else bad "f.jsonl does not hold f.csv's rows as JSON"; fi
expect 2 "${T[@]}" --steps 2 --log-every 0
has "--log-every needs a positive integer"

# 7. pictures
P=(python3 "$src/tests/cli/pictures.py" plot)
expect 0 "${T[@]}" --epochs 2 --log-every 5 --log p.csv --plot pics/p.svg
expect 0 "${P[@]}" pics/p.svg :train_loss=8 :test_loss=2 :test_acc=2
expect 0 "$gnc" plot p.csv -o from_log.svg
expect 0 "${P[@]}" from_log.svg p.csv:train_loss=8 p.csv:test_loss=2 p.csv:test_acc=2 --same pics/p.svg
expect 0 "${T[@]}" --epochs 2 --steps 20 --log-every 5 --log q.jsonl --checkpoint q.st
expect 0 "${T[@]}" --epochs 2 --resume q.st --log-every 5 --log q.jsonl --plot q.svg
expect 0 "${P[@]}" q.svg :train_loss=8 :test_loss=2 :test_acc=2 --same pics/p.svg
cat >torch.jsonl <<'EOF'
{"model": "lenet", "mode": "eager", "epoch": 1, "steps": 16, "epoch_s": 1.5, "img_per_s": 341.3, "train_loss": 2.1, "test_acc": 0.31}
{"model": "lenet", "mode": "eager", "epoch": 2, "steps": 16, "epoch_s": 1.4, "img_per_s": 365.7, "train_loss": 1.2, "test_acc": 0.55}
{"summary": true, "model": "lenet", "median_epoch_s": 1.4}
EOF
expect 0 "$gnc" plot p.csv --name pytorch torch.jsonl f.jsonl -o side.svg
expect 0 "${P[@]}" side.svg p.csv:train_loss=8 p.csv:test_loss=2 p.csv:test_acc=2 \
    pytorch:train_loss=2 pytorch:test_loss=0 pytorch:test_acc=2 \
    f.jsonl:train_loss=8 f.jsonl:test_loss=2 f.jsonl:test_acc=2
printf 'epoch,steps,train_loss\n1,5,0.5\n1,x7,0.4\n' >bad.csv
expect 1 "$gnc" plot bad.csv -o bad.svg
has "bad.csv:3:3: error: 'x7' is not a number"
has "1,x7,0.4"
printf '{"epoch": 1, "train_loss": 2}\n{"epoch": 2, "train_loss": [1]}\n' >bad.jsonl
expect 1 "$gnc" plot bad.jsonl -o bad.svg
has "bad.jsonl:2:1: error: 'train_loss' is not a number"
printf 'steps,train_loss\n5,0.5\n' >noepoch.csv
expect 1 "$gnc" plot noepoch.csv -o bad.svg
has "noepoch.csv:1:1: error: the header names no 'epoch' column"
: >empty.csv
expect 1 "$gnc" plot empty.csv -o bad.svg
has "empty.csv:1:1: error: the log is empty"
if [ ! -e bad.svg ]; then ok; else bad "a failed gnc plot left bad.svg"; fi
# PNG: the same picture drawn by rsvg-convert (tools/deps.sh installs it),
# its size the SVG's; without rsvg-convert an error and no file
png_of() { # PNG SVG: a PNG of the SVG's width and height
    python3 - "$1" "$2" <<'PY'
import re, struct, sys
png, svg = open(sys.argv[1], "rb").read(), open(sys.argv[2]).read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", "not a PNG"
w, h = struct.unpack(">II", png[16:24])
m = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg)
assert (w, h) == (int(m.group(1)), int(m.group(2))), ((w, h), m.groups())
PY
}
if command -v rsvg-convert >/dev/null; then
    expect 0 "$gnc" plot p.csv -o p.png
    if png_of p.png from_log.svg; then ok; else bad "gnc plot -o p.png drew no PNG of the SVG's size"; fi
    expect 0 "${T[@]}" --steps 10 --log-every 5 --plot t.png
    if python3 -c 'import sys; sys.exit(open("t.png", "rb").read(8) != b"\x89PNG\r\n\x1a\n")'; then
        ok; else bad "--plot t.png drew no PNG"; fi
else
    echo "rsvg-convert is not installed (Debian: librsvg2-bin): PNG's drawing not checked"
fi
mkdir -p nodraw && ln -sf "$(command -v python3)" nodraw/python3
PATH=$PWD/nodraw expect 1 "$gnc" plot p.csv -o nopng.png
has "rsvg-convert is not installed (Debian: librsvg2-bin)"
if [ ! -e nopng.png ]; then ok; else bad "a failed PNG left nopng.png"; fi
expect 2 "$gnc" plot p.csv -o p.gif
has "the picture is SVG or PNG"
expect 2 "$gnc" plot p.csv
has "-o FILE.svg is required"
expect 2 "${T[@]}" --steps 2 --plot p.gif
has "--plot p.gif: the picture is SVG or PNG"
expect 1 "$gnc" plot missing.csv -o bad.svg
has "cannot read the log 'missing.csv'"

# 6. a reader that goes away
out=$("$gnc" dump "$src/models/resnet18.net" 2>dump.err | head -1); rc=${PIPESTATUS[0]}
if [ $rc = 0 ] && [ "$out" = "# gnc IR" ] && [ ! -s dump.err ]; then ok; else bad "gnc dump | head: exit $rc, stderr: $(cat dump.err)"; fi
{ "${T[@]}" --epochs 100 --steps 400 --checkpoint g.st 2>g.err; echo $? >g.rc; } | head -3 >/dev/null
wait
if [ "$(cat g.rc)" = 130 ] && grep -q "^gnc: stopped by a closed output after step" g.err && [ -s g.st ]; then ok; else bad "train | head: exit $(cat g.rc)"; cat g.err; fi

summary long_runs
