# Helpers of the shell test scripts (tests/cli/run.sh, tests/train/run.sh):
# each check counts as passed or prints "FAIL: ..." and counts as failed.
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# expect CODE CMD...: the command exits with CODE; its stdout and stderr go to $out
expect() {
    local want=$1; shift
    out=$("$@" 2>&1); local got=$?
    if [ "$got" = "$want" ]; then ok; else bad "'$*' exited $got, want $want"; echo "$out" | tail -20; fi
}
# has TEXT: the last output contains TEXT
has() { if grep -qF -- "$1" <<<"$out"; then ok; else bad "output lacks '$1'"; echo "$out" | tail -20; fi; }
# same A B WHAT: the files are byte for byte equal
same() { if cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ ($3)"; fi; }
# summary NAME: prints the counts; fails if a check did
summary() { echo "$1: $pass passed, $fail failed"; [ "$fail" = 0 ]; }
