# Helpers of the shell test scripts (tests/cli/run.sh, tests/train/run.sh):
# each check counts as passed or prints "FAIL: ..." and counts as failed.
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# expect CODE CMD...: the command exits with CODE; its stdout and stderr go to $out
# (LeakSanitizer's own crash at exit, "Tracer caught signal", is a known fault
# of the sanitizer's thread walk, not of the command: such a run is repeated once
# without the walk of thread-local storage, its leak check otherwise the same)
expect() {
    local want=$1; shift
    out=$("$@" 2>&1); local got=$?
    if grep -q "^Tracer caught signal" <<<"$out" &&
       grep -q "LeakSanitizer has encountered a fatal error" <<<"$out"; then
        echo "note: LeakSanitizer's tracer crashed; '$*' again with use_tls=0"
        out=$(LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0 "$@" 2>&1); got=$?
    fi
    if [ "$got" = "$want" ]; then ok; else bad "'$*' exited $got, want $want"; echo "$out" | tail -20; fi
}
# has TEXT: the last output contains TEXT
has() { if grep -qF -- "$1" <<<"$out"; then ok; else bad "output lacks '$1'"; echo "$out" | tail -20; fi; }
# same A B WHAT: the files are byte for byte equal
same() { if cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ ($3)"; fi; }
# summary NAME: prints the counts; fails if a check did
# left_behind CMD OUT...: after CMD was refused, nothing is left in out/, nor
# any OUT, nor a temporary of one (OUT.XXXXXX, base_out's; OUT.tmp*, of
# before) (an OUT written =PATH was there before: only its temporaries
# count)
left_behind() {
    local cmd=$1 left o t
    shift
    left=$(find out -mindepth 1 -maxdepth 1)
    for o in "$@"; do
        if [ "${o#=}" = "$o" ] && [ -e "$o" ]; then left+=$'\n'$o; fi
        for t in "${o#=}".tmp* "${o#=}".??????; do [ -e "$t" ] && left+=$'\n'$t; done
    done
    left=$(sort -u <<<"$left" | grep . | tr '\n' ' ')
    if [ -z "$left" ]; then ok; else bad "'$cmd' left ${left% }"; fi
}
summary() { echo "$1: $pass passed, $fail failed"; [ "$fail" = 0 ]; }
# on_stand_in NAME: the stand-in GPU tests (tests/gpu/*.sh GNC SOURCE_DIR
# WORK_DIR FAKECUDA_DIR, after gnc, work and fake are set): gnc on one
# stand-in GPU, its kernels not emulated, its caches in WORK_DIR/cache, run
# from a fresh WORK_DIR; exits 77 (skipped) where gnc has no NVRTC to compile
# the kernels the stand-ins run.
on_stand_in() {
    "$gnc" --version | grep -q "^  NVRTC" || { echo "$1: skipped: gnc has no NVRTC"; exit 77; }
    rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
    export GNC_CUDA_LIBDIR=$fake GNC_FAKECUDA_GPUS=1 GNC_FAKECUDA_UNEMULATED=skip
    export GNC_CACHE_DIR=$work/cache
}
# idx_slice NAME COUNT RANK DATA_DIR: the first COUNT examples of IDX file NAME
# (plain or .gz in DATA_DIR) on standard output, with a new header; RANK is 3
# for 28x28 images, 1 for labels
idx_slice() {
    local name=$1 n=$2 rank=$3 src=$4/$1
    local cat=cat; [ -r "$src" ] || { src=$src.gz; cat=zcat; }
    {
        printf '\0\0\010'"\\$(printf %03o "$rank")"
        printf "\\$(printf %03o $((n >> 24 & 255)))\\$(printf %03o $((n >> 16 & 255)))\\$(printf %03o $((n >> 8 & 255)))\\$(printf %03o $((n & 255)))"
        if [ "$rank" = 3 ]; then printf '\0\0\0\034\0\0\0\034'; fi
        local skip=$((4 + 4 * rank)) size=$(( rank == 3 ? 784 : 1 ))
        $cat "$src" | tail -c +$((skip + 1)) | head -c $((n * size))
    }
}
