#!/usr/bin/env bash
# A rank that stops is found by the others (docs/reliability.md, "MPI rank
# failures"); part 5 of tests/mpi/run.sh, and on its own:
#   stop.sh GNC WORK_DIR DATA_DIR [TIMEOUT]      (TIMEOUT: --timeout, default 5)
#
#   0. --timeout's values: 0, negative, not a number, past 1000000 are usage
#      errors (exit 2); compile does not take it.
#   1. mpirun -np 2 gnc train lenet --timeout TIMEOUT on a slice of
#      Fashion-MNIST, a checkpoint after every epoch; once one is written,
#      rank 1 gets SIGSTOP (a hung process).  Rank 0, waiting in a collective,
#      must end the job with a non-zero status within TIMEOUT + 10 s of the
#      stop, saying which rank and op it waited for, while using under 20% of
#      a core (its wait backs off instead of spinning); the checkpoint left is
#      whole (gnc eval reads it) and no partial one is beside it.  Prints
#      "mpi: rank 1 stopped, the job ended in N s ...".
#   2. The GPU path on the stand-ins (tests/fakecuda/, next to GNC in the
#      build; skipped where gnc has no CUDA runtime): GNC_FAKECUDA_NCCL_STALL=1
#      hangs rank 1's GPU's NCCL calls; with --timeout 2 a rank must give up
#      on the collective (cuStreamQuery polled, ncclCommAbort) and end the job
#      within 12 s, naming it; and the same in one process driving two GPUs.
#      GNC_FAKECUDA_NCCL_STALL_INIT=1 hangs rank 1's ncclCommInitRank: with
#      --timeout 2 rank 0 gives up on it (a watch over the blocking call)
#      and the job ends within 12 s.  Two ranks on a node of one GPU are
#      refused by every rank, before NCCL (which does not support them).
#   3. A rank that never starts: rank 1 sleeps 60 s before gnc starts; with
#      --timeout 3 rank 0 gives up in MPI_Init (watched as NCCL's set-up is)
#      and the job ends within 13 s, rank 0 naming what it waited for.
# Ends with "stop: N passed, M failed"; fails if any did.
set -u
here=$(cd "$(dirname "$0")" && pwd)
gnc=$(realpath "$1") work=$2 data=$(realpath "$3") limit=${4:-5}
. "$here/../lib.sh"

rm -rf "$work" && mkdir -p "$work/tiny" && cd "$work" || exit 1
MPI=(mpirun --oversubscribe --allow-run-as-root)
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader
supp=$here/lsan.supp
export LSAN_OPTIONS=suppressions=$supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}
idx_slice train-images-idx3-ubyte 160 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 160 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 100 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 100 1 "$data" >tiny/t10k-labels-idx1-ubyte
lenet=$here/../../models/lenet.net
T=("$gnc" train "$lenet" --data tiny --batch 16 --lr 0.05 --momentum 0.9 --seed 3)

# 0. --timeout: seconds above 0; anything else is a usage error, as elsewhere
for v in 0 -1 abc inf nan 1e7 ""; do
    expect 2 "${T[@]}" --timeout "$v"
    has "--timeout needs a number of seconds above 0, up to 1000000, got '$v'"
done
expect 2 "$gnc" compile "$lenet" --timeout 5
has "option '--timeout' does not apply to this command"
expect 0 "$gnc" run --help
has "--timeout S"

now() { date +%s.%N; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# the rank of process $1 under mpirun
rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }
# waits (polling) until process $1 ends or $2 seconds pass; its status in $rc (124: it did not end)
wait_end() {
    local t0; t0=$(now)
    while kill -0 "$1" 2>/dev/null; do
        if [ "$(echo "$(now) - $t0 > $2" | bc)" = 1 ]; then rc=124; return; fi
        sleep 0.05
    done
    wait "$1"; rc=$?
}

# 1. SIGSTOP of rank 1 in training
"${MPI[@]}" -np 2 "${T[@]}" --strategy data --epochs 100000 --timeout "$limit" \
    --checkpoint stop.st >stop.log 2>&1 &
mp=$!
for _ in $(seq 600); do [ -e stop.st ] || ! kill -0 "$mp" 2>/dev/null && break; sleep 0.1; done
r0= r1=
for p in $(pgrep -P "$mp"); do
    case $(rank_of "$p") in 0) r0=$p ;; 1) r1=$p ;; esac
done
if [ -z "$r0" ] || [ -z "$r1" ] || [ ! -e stop.st ]; then
    bad "the training run did not start (ranks '$r0' '$r1', checkpoint: $(ls stop.st 2>&1))"
    tail -20 stop.log
    kill -9 "$mp" $r0 $r1 2>/dev/null
else
    kill -STOP "$r1"
    t0=$(now) c0=$(ticks "$r0")
    # rank 0's processor time over most of its wait
    window=$(( limit > 2 ? limit - 1 : 1 ))
    sleep "$window"
    c1=$(ticks "$r0")
    wait_end "$mp" $((limit + 60))
    took=$(echo "$(now) - $t0" | bc)
    kill -CONT "$r1" 2>/dev/null
    kill -9 "$mp" "$r0" "$r1" 2>/dev/null
    out=$(cat stop.log)
    share=$(( (c1 - c0) * 100 / $(getconf CLK_TCK) / window ))
    printf 'mpi: rank 1 stopped, the job ended in %.1f s (--timeout %s, exit %s); rank 0 used %d%% of a core while it waited\n' \
        "$took" "$limit" "$rc" "$share"
    if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then ok; else bad "a stopped rank: exit $rc, want non-zero"; tail -20 stop.log; fi
    if [ "$(echo "$took < $limit + 10" | bc)" = 1 ]; then ok; else bad "a stopped rank was found after $took s, over --timeout $limit + 10"; fi
    if grep -qE "rank 0: waited $limit s for ([a-z_]+ [0-9]+|the gather of [^ ]+) \((with ranks 0, 1|from rank 1|to rank 1)\): giving up" <<<"$out"; then
        ok; else bad "rank 0 should name the op and the ranks it waited for"; tail -20 stop.log; fi
    if [ "$share" -lt 20 ]; then ok; else bad "rank 0 used $share% of a core waiting for a stopped rank"; fi
    if [ ! -e stop.st.tmp ]; then ok; else bad "a partial checkpoint (stop.st.tmp) was left"; fi
    expect 0 "$gnc" eval "$lenet" --data tiny --weights stop.st
    has "test accuracy"
fi

# 2. a hung GPU's NCCL calls, on the stand-ins
fake=${GNC_FAKECUDA_DIR:-$(dirname "$gnc")/tests/fakecuda}
G=(env TMPDIR="$work/fakecuda-tmp" GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_UNEMULATED=skip
   FAKECUDA_NCCL_TIMEOUT=120 "${MPI[@]}" -np 2 "${T[@]}" --strategy data --steps 2 --device cuda)
mkdir -p fakecuda-tmp
if [ ! -e "$fake/libnccl.so.2" ]; then
    echo "  the GPU path: skipped, no stand-ins in $fake"
else
    out=$("${G[@]}" 2>&1); rc=$?
    if [ $rc != 0 ] && grep -qE "no CUDA runtime|built without|NVRTC" <<<"$out"; then
        echo "  the GPU path: skipped, $(grep -m1 'error' <<<"$out")"
    else
        if [ $rc = 0 ]; then ok; else bad "the GPU path on the stand-ins, unstalled: exit $rc"; echo "$out" | tail -20; fi
        # two ranks on a node of one GPU: refused by every rank, before NCCL
        # (mpirun may end the job at the first rank's exit, before the other
        # has said it: once at least)
        out=$(GNC_FAKECUDA_GPUS=1 timeout 130 "${G[@]}" 2>&1); rc=$?
        if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "mpirun started 2 ranks on this node, which has 1 GPU: local ranks 0 and 1 would share GPU 0" <<<"$out"; then
            ok; else bad "two ranks on one GPU: exit $rc"; echo "$out" | tail -20; fi
        t0=$(now)
        out=$(GNC_FAKECUDA_NCCL_STALL=1 timeout 130 "${G[@]}" --timeout 2 2>&1); rc=$?
        took=$(echo "$(now) - $t0" | bc)
        printf '  a GPU whose NCCL calls hang (the stand-ins): the job ended in %.1f s (--timeout 2, exit %s)\n' "$took" "$rc"
        if [ $rc != 0 ] && [ $rc != 124 ] && [ "$(echo "$took < 12" | bc)" = 1 ]; then ok; else bad "a hung GPU: exit $rc after $took s, want non-zero within 12 s"; echo "$out" | tail -20; fi
        if grep -qE "device [01] \(rank [01]\): waited 2 s for all_reduce [0-9]+ \(with devices 0, 1\): giving up; NCCL's communicators aborted" <<<"$out"; then
            ok; else bad "a hung GPU: the message should name the collective"; echo "$out" | tail -20; fi
        # the same in one process driving both GPUs
        out=$(GNC_FAKECUDA_NCCL_STALL=1 TMPDIR="$work/fakecuda-tmp" GNC_CUDA_LIBDIR="$fake" \
              GNC_FAKECUDA_UNEMULATED=skip FAKECUDA_NCCL_TIMEOUT=120 timeout 130 "${T[@]}" \
              --strategy data --devices cpu:2 --steps 2 --device cuda --timeout 2 2>&1); rc=$?
        if [ $rc = 1 ] && grep -qE "device 0: waited 2 s for all_reduce [0-9]+ \(with devices 0, 1\): giving up; NCCL's communicators aborted" <<<"$out"; then
            ok; else bad "a hung GPU in one process: exit $rc"; echo "$out" | tail -20; fi
        # a GPU that hangs in NCCL's set-up
        t0=$(now)
        out=$(GNC_FAKECUDA_NCCL_STALL_INIT=1 timeout 130 "${G[@]}" --timeout 2 2>&1); rc=$?
        took=$(echo "$(now) - $t0" | bc)
        printf '  a GPU that hangs in ncclCommInitRank (the stand-ins): the job ended in %.1f s (--timeout 2, exit %s)\n' "$took" "$rc"
        if [ $rc != 0 ] && [ $rc != 124 ] && [ "$(echo "$took < 12" | bc)" = 1 ]; then ok; else bad "a hung NCCL set-up: exit $rc after $took s, want non-zero within 12 s"; echo "$out" | tail -20; fi
        if grep -qE "rank 0: waited 2 s for ncclCommInitRank on the other ranks \(with ranks 0 to 1\): giving up" <<<"$out"; then
            ok; else bad "a hung NCCL set-up: rank 0 should name it"; echo "$out" | tail -20; fi
    fi
fi

# 3. a rank that never starts: rank 0 waits in MPI_Init
t0=$(now)
out=$(timeout 120 "${MPI[@]}" -np 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && sleep 60; exec "$0" "$@"' \
      "${T[@]}" --steps 1 --timeout 3 2>&1); rc=$?
took=$(echo "$(now) - $t0" | bc)
printf 'mpi: a rank that never starts: the job ended in %.1f s (--timeout 3, exit %s)\n' "$took" "$rc"
if [ $rc != 0 ] && [ $rc != 124 ] && [ "$(echo "$took < 13" | bc)" = 1 ]; then ok; else bad "a rank that never starts: exit $rc after $took s, want non-zero within 13 s"; echo "$out" | tail -20; fi
if grep -qE "rank 0: waited 3 s for MPI_Init on the other ranks \(with ranks 0 to 1\): giving up" <<<"$out"; then
    ok; else bad "a rank that never starts: rank 0 should say what it waited for"; echo "$out" | tail -20; fi

summary stop
