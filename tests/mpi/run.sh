#!/usr/bin/env bash
# Partitioned programs under MPI, one device per process, against the same
# programs in one process (--devices cpu:2):
#   run.sh GNC TEST_MPI SOURCE_DIR WORK_DIR DATA_DIR
# TEST_MPI (tests/test_mpi.c) is empty when gnc was built without MPI; then, or
# without mpirun, the test exits 77, which ctest reports as skipped.
#
#   1. test_mpi on 2 and on 4 ranks: the runtime, model by model and strategy
#      by strategy, bitwise (its header says what and why).
#   2. gnc train, lenet on a slice of Fashion-MNIST (160 images: one epoch of 10
#      steps of 16, then an evaluation on 100 test images), with data
#      parallelism, pipelines of the default 4 and of 1 microbatch, hybrid dp=2
#      x pp=1, and deterministic data parallelism: the printed losses of the 10
#      steps, the epoch's line (train loss, test loss, test accuracy), the CSV
#      log and the checkpoint file are those of the one-process run, byte for
#      byte; a resumed pipeline run too.  (Tensor parallelism is left out here:
#      gnc train's evaluation does not assemble sharded weights yet, and fails
#      in one process too; test_mpi checks it.)  Then tensor parallelism's
#      checkpoint, whose shards rank 0 gathers and assembles, after 8 steps
#      without an evaluation.  Each run takes its default threads
#      (the one process two, each rank one): the executor's bits do not depend
#      on them (runtime/cpu/exec.h).
#   3. gnc run: the outputs (.npy files) of lenet, mlp and resnet18 with data
#      parallelism and a pipeline, byte for byte; gnc compile and gnc eval print
#      once, rank 0's.
#   4. Failures: --devices that disagree with the ranks; a bad label that only
#      rank 1 reads (so rank 0 is left waiting in a collective) ends the whole
#      job with a non-zero status and the failing device's message, well within
#      a time limit.
#   5. A stopped rank (tests/mpi/stop.sh, with --timeout 5): SIGSTOP of rank 1
#      in training ends the job within the deadline + 10 s, rank 0 naming the
#      op and the ranks it waited for, its wait taking under 20% of a core,
#      the checkpoint whole; on the GPU stand-ins, a GPU whose NCCL calls hang
#      ends the job the same way.  Prints the time the job took to end.
# Ends with "N passed, M failed"; fails if any did.
set -u
gnc=$1 test_mpi=$2 src=$3 work=$4 data=$5
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"

if [ -z "$test_mpi" ]; then
    echo "mpi: skipped: gnc was built without MPI (install libopenmpi-dev, tools/deps.sh)"
    exit 77
fi
if ! command -v mpirun >/dev/null; then
    echo "mpi: skipped: no mpirun (install openmpi-bin, tools/deps.sh)"
    exit 77
fi
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# CI runs as root on 2 cores; 4 ranks oversubscribe them
MPI=(mpirun --oversubscribe --allow-run-as-root)
export OMPI_MCA_mpi_yield_when_idle=1   # a waiting rank leaves its core to the others
export OMPI_MCA_btl=self,vader          # this machine's ranks only: shared memory
# Open MPI's own allocations that it keeps to the end (tests/mpi/lsan.supp).
# The slow unwinder follows their stacks through Open MPI's libraries, which
# are built without frame pointers: the fast one stops in a component that is
# unloaded by the end, an "<unknown module>" that no suppression can name.
export LSAN_OPTIONS=suppressions=$src/tests/mpi/lsan.supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}

# 1. the runtime
for np in 2 4; do
    expect 0 "${MPI[@]}" -np $np "$test_mpi" "$src"
    grep -E '^  |passed' <<<"$out"
    has "mpi x$np: "
done

# 2. gnc train
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -r "$data/$f.gz" ] || [ -r "$data/$f" ] || { echo "run.sh: $data lacks $f (install dataset-fashion-mnist)"; exit 1; }
done
mkdir tiny
idx_slice train-images-idx3-ubyte 160 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 160 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 100 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 100 1 "$data" >tiny/t10k-labels-idx1-ubyte
lenet=$src/models/lenet.net
T=("$gnc" train "$lenet" --data tiny --batch 16 --lr 0.05 --momentum 0.9 --seed 3)

# the figures of a run's output that do not depend on time
figures() { grep -oE 'step [0-9]+/[0-9]+  loss [0-9.]+|train loss [0-9.]+, test loss [0-9.]+, test accuracy [0-9.]+' <<<"$1"; }

k=0
for s in data pipeline "pipeline --microbatches 1" "hybrid:dp=2,pp=1" "data --deterministic --sync-bn" zero1 zero3 "data --accumulate 2"; do
    k=$((k + 1))
    expect 0 "${T[@]}" --devices cpu:2 --strategy $s --checkpoint one$k.st --log one$k.csv
    one=$out
    expect 0 "${MPI[@]}" -np 2 "${T[@]}" --strategy $s --checkpoint mpi$k.st --log mpi$k.csv
    has "on 2 MPI ranks, one device each"
    if [ "$(grep -c 'step 10/10  loss' <<<"$out")" = 1 ]; then ok; else bad "--strategy $s: rank 0 alone should print"; fi
    if [ "$(figures "$out")" = "$(figures "$one")" ] && [ "$(figures "$out" | wc -l)" = 11 ]; then
        ok; else bad "--strategy $s: the losses differ:"; diff <(figures "$one") <(figures "$out"); fi
    if [ "$(cut -d, -f1-4 mpi$k.csv)" = "$(cut -d, -f1-4 one$k.csv)" ]; then ok; else bad "--strategy $s: the logs differ"; fi
    same mpi$k.st one$k.st "--strategy $s: the checkpoints"
    echo "  gnc train lenet --strategy $s: $(figures "$out" | tail -1)"
done

# tensor parallelism: 8 steps, before the epoch ends (see above)
expect 0 "${T[@]}" --devices cpu:2 --strategy tensor --steps 8 --checkpoint tp-one.st
one=$out
expect 0 "${MPI[@]}" -np 2 "${T[@]}" --strategy tensor --steps 8 --checkpoint tp-mpi.st
if [ "$(figures "$out")" = "$(figures "$one")" ]; then ok; else bad "--strategy tensor: the losses differ"; fi
same tp-mpi.st tp-one.st "--strategy tensor: the checkpoints"

# resume: a pipeline's stage-1 parameters come back from the checkpoint
expect 0 "${T[@]}" --devices cpu:2 --strategy pipeline --epochs 2 --checkpoint full.st
expect 0 "${MPI[@]}" -np 2 "${T[@]}" --strategy pipeline --epochs 1 --checkpoint half.st
expect 0 "${MPI[@]}" -np 2 "${T[@]}" --strategy pipeline --epochs 2 --resume half.st --checkpoint half.st
has "resuming half.st at step 10"
same half.st full.st "a resumed pipeline under MPI"

# 3. gnc run, compile and eval
for m in lenet mlp resnet18; do
    for s in data pipeline; do
        R=("$gnc" run "$src/models/$m.net" -D batch=4 --seed 5 --strategy $s)
        expect 0 "${R[@]}" --devices cpu:2 -o "run-one-$m-$s"
        expect 0 "${MPI[@]}" -np 2 "${R[@]}" -o "run-mpi-$m-$s"
        for f in run-one-$m-$s/*.npy; do same "$f" "run-mpi-$m-$s/$(basename "$f")" "gnc run $m --strategy $s"; done
    done
done
expect 0 "${MPI[@]}" -np 2 "$gnc" compile "$lenet" --train --strategy pipeline
if [ "$(grep -c '^model lenet' <<<"$out")" = 1 ]; then ok; else bad "gnc compile printed $(grep -c '^model lenet' <<<"$out") summaries"; fi
expect 0 "${MPI[@]}" -np 2 "$gnc" eval "$lenet" --data tiny --weights mpi1.st
if [ "$(grep -c 'test accuracy' <<<"$out")" = 1 ]; then ok; else bad "gnc eval should print once"; fi

# 4. failures
expect 2 "${MPI[@]}" -np 2 "${T[@]}" --devices cpu:4
has "--devices gives 4 devices, but mpirun started 2 ranks"
if [ "$(grep -c 'but mpirun started' <<<"$out")" = 1 ]; then ok; else bad "the mismatch should be said once"; fi
# --device cuda under mpirun where there is no GPU: said before anything runs
if ! command -v nvidia-smi >/dev/null; then
    expect 1 "${MPI[@]}" -np 2 "${T[@]}" --device cuda --steps 2 --checkpoint cuda.st
    has "gnc: error: device cuda: "
    if [ ! -e cuda.st ]; then ok; else bad "a failed cuda run left cuda.st"; fi
fi
# labels 0 1 2 99: with data parallelism rank 1 reads 2 and 99
{
    printf '\223NUMPY\001\000\166\000'
    printf "%-117s\n" "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"
    printf '\000\000\000\000\001\000\000\000\002\000\000\000\143\000\000\000'
} >bad-label.npy
start=$SECONDS
out=$(timeout 120 "${MPI[@]}" -np 2 "$gnc" run "$lenet" -D batch=4 --strategy data --input label=bad-label.npy 2>&1)
rc=$?
if [ $rc != 0 ] && [ $rc != 124 ]; then ok; else bad "a failing rank: exit $rc, want non-zero within the limit"; echo "$out" | tail -20; fi
has "device 1: "
has "label 99 at position 1"
echo "  a failure on rank 1 ended the job in $((SECONDS - start)) s (exit $rc)"

# 5. a stopped rank, and a GPU whose NCCL calls hang
stop=$(bash "$src/tests/mpi/stop.sh" "$gnc" "$PWD/stop" "$data" 5 2>&1)
rc=$?
grep -E '^mpi:|^  ' <<<"$stop"
if [ $rc = 0 ]; then ok; else bad "a stopped rank (tests/mpi/stop.sh):"; echo "$stop" | tail -30; fi

summary mpi
