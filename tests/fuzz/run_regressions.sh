#!/usr/bin/env bash
# Runs every tests/fuzz/regressions/*.net and *.onnx (inputs that once crashed the
# frontend or the ONNX importer under the fuzzer) through the ordinary loader:
# run_regressions.sh GNC DIR.
# Each must end with exit code 0 or 1 (an error message is fine), with no signal,
# no timeout, no sanitizer report and no internal error.  Ends with
# "N passed, M failed" and fails if any did.
set -u
gnc=$1 dir=$2
pass=0 fail=0
shopt -s nullglob
for f in "$dir"/*.net "$dir"/*.onnx; do
    out=$(timeout 60 "$gnc" dump "$f" 2>&1 >/dev/null)
    rc=$?
    why=
    if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
        why="exit code $rc"
    elif grep -qE 'Sanitizer|runtime error:|internal error' <<<"$out"; then
        why="sanitizer report or internal error"
    fi
    if [ -n "$why" ]; then
        fail=$((fail + 1))
        echo "FAIL: $f: $why"
        head -40 <<<"$out"
    else
        pass=$((pass + 1))
    fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
