#!/bin/bash
# mpirun.sh N COMMAND...: COMMAND on N MPI ranks of this machine
# (tests/gpu/test_gpu_train --mpi), set up as tests/mpi/run.sh sets up its
# ranks; exits 77 (skipped) where there is no mpirun.  Every rank of the test
# exits with the same code, which mpirun passes on.
n=$1
shift
if ! command -v mpirun >/dev/null; then
    echo "skipped: no mpirun (install openmpi-bin, tools/deps.sh)"
    exit 77
fi
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl=self,vader
supp=$(cd "$(dirname "$0")/../mpi" && pwd)/lsan.supp
export LSAN_OPTIONS=suppressions=$supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}
exec mpirun --oversubscribe --allow-run-as-root -np "$n" "$@"
