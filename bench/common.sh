# What the bench scripts share; sourced as: . bench/common.sh "$0" "$@"
# Sets root and gnc (the binary of BUILD_DIR, default build), checks it exists,
# and prints the machine line.
#
# OpenBLAS picks its kernels for the CPU (AVX-512 ones where there are) unless
# OPENBLAS_CORETYPE says otherwise; some environments preset it (this project's
# machines to Haswell, AVX2), so then the script runs twice and the figures are
# taken both ways.
bench_script=$1
shift
if [ -n "${OPENBLAS_CORETYPE:-}" ] && [ -z "${GNC_BENCH_INNER:-}" ]; then
    echo "== OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, as the environment sets it"
    GNC_BENCH_INNER=1 bash "$bench_script" "$@"
    echo "== OPENBLAS_CORETYPE unset: OpenBLAS's own choice for this CPU"
    env -u OPENBLAS_CORETYPE GNC_BENCH_INNER=1 bash "$bench_script" "$@"
    exit
fi
root=$(cd "$(dirname "$bench_script")/.." && pwd)
gnc=$root/${1:-build}/gnc
[ -x "$gnc" ] || { echo "bench: build gnc first (bash tools/test.sh)" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
    { echo "bench: needs python3-torch (bash tools/deps.sh --torch)" >&2; exit 1; }
# the widest vector ISA, which decides the kernels OpenBLAS and oneDNN pick
if grep -qw avx512f /proc/cpuinfo; then isa=AVX-512
elif grep -qw avx2 /proc/cpuinfo; then isa=AVX2
else isa="x86-64 without AVX2"; fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $isa, $(date -u +%Y-%m-%d)"
# what each side's kernels are on this CPU: gnc's libraries (gnc --version), and
# PyTorch's version with the instruction set of its own kernels
echo "gnc: $("$gnc" --version | sed -n 's/^  \(OpenBLAS\|oneDNN\)/\1/p' | paste -sd ';' | sed 's/;/; /g')"
echo "PyTorch: $(/usr/bin/python3 -c 'import torch; c = [l.split(":")[1].strip() for l in torch.__config__.show().splitlines() if "CPU capability" in l]; print(torch.__version__ + " (its " + (c[0] if c else "?") + " kernels), convolutions on its own oneDNN")')"

# The convolution kernels a command ran, from oneDNN's verbose lines (each
# implementation with its count: "brgconv:avx512_core x20"), or "none on
# oneDNN" (gnc: its own loops and OpenBLAS).
conv_kernels() {
    ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 "$@" 2>&1 |
        awk -F, '$2 == "exec" && $4 == "convolution" { n[$5]++ }
                 END { s = ""; for (k in n) s = s (s ? ", " : "") k " x" n[k]; print s ? s : "none on oneDNN" }'
}
