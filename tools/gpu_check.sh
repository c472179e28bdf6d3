#!/usr/bin/env bash
# One call on a GPU machine that checks as much of the GPU path as it can and
# leaves a report even when a step fails (docs/gpu.md):
#
#   tools/gpu_check.sh OUT            on this machine's GPU; writes OUT/gpu-report.md,
#                                     OUT/gpu-report.json and OUT/logs/
#   tools/gpu_check.sh --fake OUT     the same on the stand-in libraries (tests/fakecuda/),
#                                     smaller: CI's proof that the script runs
#   tools/gpu_check.sh --pack DIR     gather what it needs from this build into DIR, for a
#                                     machine without Debian's packages (run DIR/gpu_check.sh;
#                                     its libraries and data travel as lib.tar.xz and
#                                     data.tar.xz, unpacked at the first run, or by
#                                     DIR/gpu_check.sh --unpack)
#   --budget SECONDS                  the whole run's time (default 520: under 9 minutes)
#
# Steps, each timed and kept whatever the others do: 1 the GPU; 2 the GPU tests;
# 3 every op at fp32, tf32, bf16 and fp16; 4 resnet18 with each convolution way;
# 5 every strategy on devices sharing the GPU; 6 resnet18 training throughput beside
# PyTorch's.  The build: build/ (or $GNC_BUILD_DIR) of a checkout, or a pack.
set -u
here=$(cd "$(dirname "$0")" && pwd)
self=$here/$(basename "$0")
fake=0 pack= out= budget=520 in_step=0 unpack=0
if [ "${1:-}" = --in-step ]; then # a step run by step() under timeout: FAKE OUT FUNCTION ARGS...
    in_step=1 fake=$2 out=$3
    shift 3
fi
while [ $in_step = 0 ] && [ $# -gt 0 ]; do
    case $1 in
    --fake) fake=1 ;;
    --unpack) unpack=1 ;;
    --pack) [ $# -ge 2 ] || { echo "gpu_check: --pack needs DIR" >&2; exit 2; }; pack=$2; shift ;;
    --budget)
        [ $# -ge 2 ] && [ "$2" -gt 0 ] 2>/dev/null || { echo "gpu_check: --budget needs SECONDS" >&2; exit 2; }
        budget=$2; shift ;;
    -h|--help) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "gpu_check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu_check: one OUT folder, not '$out' and '$1'" >&2; exit 2; }
       out=$1 ;;
    esac
    shift
done

# where things are: a pack (DIR/pack.txt) or a checkout with its build
if [ -e "$here/pack.txt" ]; then
    root=$here bin=$here/bin lib=$here/lib data=$here/data
    torch_script=$here/bench/torch_fmnist.py
    for part in lib data; do
        [ ! -d "$here/$part" ] && [ -e "$here/$part.tar.xz" ] || continue
        # tar's xz, or Python's (a machine without xz-utils has python3)
        tar -xJf "$here/$part.tar.xz" -C "$here" 2>/dev/null ||
            python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
                "$here/$part.tar.xz" "$here" ||
            { echo "gpu_check: cannot unpack $part.tar.xz" >&2; exit 1; }
    done
    [ $unpack = 1 ] && exit 0
elif [ $unpack = 1 ]; then
    echo "gpu_check: --unpack is for a pack (DIR/gpu_check.sh); a checkout has its libraries" >&2
    exit 2
else
    root=$(cd "$here/.." && pwd)
    bin=${GNC_BUILD_DIR:-$root/build} lib= data=/usr/share/datasets/fashion-mnist
    torch_script=$root/../shared/bench/torch_fmnist.py
fi
gnc=$bin/gnc
test_bin() { if [ -x "$bin/tests/$1" ]; then echo "$bin/tests/$1"; else echo "$bin/$1"; fi; }

# ---------------------------------------------------------------- --pack
if [ -n "$pack" ]; then
    [ -x "$gnc" ] || { echo "gpu_check: no build at $bin (bash tools/test.sh builds it)" >&2; exit 1; }
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib" "$pack/data" "$pack/bench" || exit 1
    bins=("$gnc" "$(test_bin test_gpu_ops)" "$(test_bin test_gpu_train)" "$(test_bin test_codegen)")
    # stripped: the symbols are two thirds of the binaries' bytes
    for b in "${bins[@]}"; do
        strip -o "$pack/bin/${b##*/}" "$b" 2>/dev/null || cp "$b" "$pack/bin/" || exit 1
    done
    cp -r "$root/models" "$pack/" && cp "$0" "$pack/gpu_check.sh" &&
        cp "$root/bench/gpu_race.sh" "$pack/bench/" || exit 1
    [ -e "$torch_script" ] && cp "$torch_script" "$pack/bench/"
    # the shared libraries the binaries need that are neither the C library's
    # own (glibc is on every Linux) nor CUDA's (the GPU machine has its own)
    ldd "${bins[@]}" | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
        case $name in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libnvrtc*) ;;
        *) cp -L "$path" "$pack/lib/$name" || exit 1 ;;
        esac
    done
    # Fashion-MNIST whole (bench/gpu_race.sh trains on it), its raw IDX
    # files, and the libraries, each part compressed by xz (OpenBLAS's 35 MB
    # to 5, oneDNN's 38 to 8; the data set's 31 MB of gzip to 26), unpacked
    # at the first run, so that the pack and a checkout stay well under a
    # device call's 64 MiB
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
             t10k-labels-idx1-ubyte; do
        if [ -e "$data/$f" ]; then cp -L "$data/$f" "$pack/data/"
        else gzip -dc "$data/$f.gz" >"$pack/data/$f"; fi || exit 1
    done
    for part in lib:-3 data:-6; do
        tar -cf - -C "$pack" "${part%:*}" | xz "${part#*:}" -T0 >"$pack/${part%:*}.tar.xz" &&
            rm -rf "${pack:?}/${part%:*}" || exit 1
    done
    { echo "gnc GPU check pack, $(date -u +%Y-%m-%dT%H:%MZ)"; "$gnc" --version
      echo "libraries:"; xz -dc "$pack/lib.tar.xz" | tar -tf -; } >"$pack/pack.txt"
    echo "packed into $pack ($(du -sh "$pack" | cut -f1)); on the GPU machine: bash $pack/gpu_check.sh OUT"
    grep -q "libdnnl" "$pack/pack.txt" &&
        echo "note: the pack carries oneDNN (8 MB of it): a build with -DGNC_DNNL=OFF leaves it out (docs/gpu.md)"
    exit 0
fi

[ -n "$out" ] || { echo "gpu_check: which folder for the report? (see --help)" >&2; exit 2; }
[ -x "$gnc" ] || { echo "gpu_check: no gnc at $gnc (bash tools/test.sh builds it)" >&2; exit 1; }
mkdir -p "$out/logs" "$out/work" || exit 1
out=$(cd "$out" && pwd)
work=$out/work
fk=(); [ $fake = 1 ] && fk=(--fake "$bin/tests/fakecuda")
steps=50 batch=256 model=resnet18
[ $fake = 1 ] && steps=3 batch=8 model=lenet # the stand-ins emulate nothing here: it runs, no more
peak=$out/logs/memory.csv

# ---------------------------------------------------------------- the libraries
# The driver and cuBLASLt, cuDNN, NCCL and NVRTC wherever they are: the loader's
# paths, the CUDA toolkit, or Python wheels' nvidia/*/lib folders.
libdirs=()
found=()
if [ $fake = 1 ]; then
    export GNC_CUDA_LIBDIR=$bin/tests/fakecuda GNC_FAKECUDA_GPUS=2
    found+=("stand-ins: $GNC_CUDA_LIBDIR")
else
    unset GNC_CUDA_LIBDIR
    cands=(/usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/lib64
           /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
    for d in /usr/local/cuda-*/lib64; do cands+=("$d"); done
    py=$(python3 -c 'import nvidia, os; print("\n".join(os.path.join(p, q, "lib") for p in nvidia.__path__ for q in os.listdir(p)))' 2>/dev/null)
    while read -r d; do [ -n "$d" ] && cands+=("$d"); done <<<"$py"
    for d in /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
        cands+=("$d")
    done
    for so in libcuda.so.1 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libnvrtc.so.13; do
        hit=$(ldconfig -p 2>/dev/null | awk -v s="$so" '$1 == s {print $NF; exit}')
        for d in "${cands[@]}"; do
            [ -z "$hit" ] && [ -e "$d/$so" ] && hit=$d/$so
        done
        if [ -n "$hit" ]; then
            found+=("$so: $hit")
            libdirs+=("$(dirname "$hit")")
        else
            found+=("$so: not found")
        fi
    done
fi
ld=$lib
for d in "${libdirs[@]}"; do case ":$ld:" in *":$d:"*) ;; *) ld=${ld:+$ld:}$d ;; esac; done
export LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GNC_CACHE_DIR=$out/work/kernel-cache

# ---------------------------------------------------------------- what the steps run
gpu_info() {
    "$gnc" devices || return 1
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.used,memory.total --format=csv
    fi
}
# 2: the gpu-labelled tests' programs; on the stand-ins the op tests alone
# (CI runs the rest as unit tests)
gpu_tests() {
    "$(test_bin test_gpu_ops)" "$work" "${fk[@]}" || return 1
    [ $fake = 1 ] || "$(test_bin test_gpu_train)" "$root" "$work"
}
# 6: throughput, gnc then PyTorch (eager, torch.compile) at the same batch
throughput() {
    local mon=
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$peak" 2>/dev/null &
        mon=$!
    fi
    local extra=(); [ $fake = 1 ] && extra=(env GNC_FAKECUDA_UNEMULATED=skip)
    "${extra[@]}" "$gnc" train "$root/models/$model.net" --device cuda --data "$data" \
        --steps $steps --batch $batch --lr 0.05
    local rc=$?
    [ -n "$mon" ] && kill "$mon" 2>/dev/null
    [ $rc = 0 ] || return $rc
    if [ $fake = 0 ] && [ -e "$torch_script" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
        for mode in eager compile; do
            python3 "$torch_script" --model resnet18 --synthetic --steps $steps --batch $batch \
                --mode $mode | tail -1 | sed "s/^/torch $mode: /"
        done
    else
        echo "torch: not run (no PyTorch with CUDA here, or no $torch_script)"
    fi
}

if [ $in_step = 1 ]; then
    "$@"
    exit $?
fi

# ---------------------------------------------------------------- steps
t_start=$(date +%s)
names=() states=() secs=() notes=()
# step NAME SECONDS WHAT COMMAND...: the command under a time limit (the
# smaller of SECONDS and what the budget has left), its output in logs/
step() {
    local name=$1 limit=$2 what=$3; shift 3
    local n=$(( ${#names[@]} + 1 )) left=$(( budget - ($(date +%s) - t_start) ))
    local log=$out/logs/$n-$name.log
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 10 ]; then
        names+=("$name") states+=(skipped) secs+=(0) notes+=("$what: out of time")
        echo "[$n] $name: skipped (out of time)"
        return
    fi
    echo "[$n] $name: $what (at most ${limit} s)"
    local t0; t0=$(date +%s)
    timeout -k 10 "$limit" bash "$self" --in-step $fake "$out" "$@" >"$log" 2>&1
    local rc=$? state=passed
    case $rc in 0) ;; 77) state=skipped ;; 124|137) state="timed out" ;; *) state="failed ($rc)" ;; esac
    names+=("$name") states+=("$state") secs+=($(( $(date +%s) - t0 ))) notes+=("$what")
    echo "    $state in ${secs[-1]} s: $(grep -E 'passed, [0-9]+ failed|images/s|^GPU [0-9]' "$log" | tail -1)"
}

step gpu 30 "the GPU, its driver and memory" gpu_info
step gpu-tests 240 "test_gpu_ops and test_gpu_train (ctest -L gpu)" gpu_tests
# the stand-ins emulate on the host, which takes a host (a sanitized build's above
# all, beside the other tests) longer than a GPU: ops runs a sample of its cases,
# and ops and shared have more time (shared took 69 s alone under ASan, over 120 s
# in CI's ctest -j2)
only=() ops_limit=150 shared_limit=120
[ $fake = 1 ] && only=(--only "relu") ops_limit=240 shared_limit=240
step ops $ops_limit "every op at fp32, tf32, bf16 and fp16 against the CPU executor" \
    "$(test_bin test_codegen)" "$root" "$work" --gpu "${fk[@]}" "${only[@]}"
step convs 150 "resnet18 (stand-ins: lenet), each convolution way, inference and training" \
    "$(test_bin test_gpu_train)" "$root" "$work" "${fk[@]}" --case convs
step shared $shared_limit "every strategy on devices sharing one GPU against the CPU (data, pipeline at 3 and 4 stages, tensor, hybrid, ZeRO 1-3, --accumulate, bf16 and fp16)" \
    "$(test_bin test_gpu_train)" "$root" "$work" "${fk[@]}" --case shared
step throughput 200 "$steps $model training steps of $batch images: gnc, then PyTorch" throughput

# ---------------------------------------------------------------- the reports
gnc_ips=$(grep -oE '[0-9.]+ images/s' "$out/logs/6-throughput.log" 2>/dev/null | tail -1 | cut -d' ' -f1)
# PyTorch's summary line: images/s from its median epoch (steps x batch images)
torch_ips() {
    grep -oE "^torch $1: .*\"median_epoch_s\": [0-9.]+" "$out/logs/6-throughput.log" 2>/dev/null |
        grep -oE '[0-9.]+$' | awk -v n=$((steps * batch)) '$1 > 0 {printf "%.0f\n", n / $1}'
}
eager_ips=$(torch_ips eager)
compile_ips=$(torch_ips compile)
peak_mib=$( [ -s "$peak" ] && sort -n "$peak" | tail -1 )
device=$(grep -m1 '^GPU 0' "$out/logs/1-gpu.log" 2>/dev/null)
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\000-\037')"; }
{
    echo "# GPU check, $(date -u +%Y-%m-%d)"
    echo
    [ $fake = 1 ] && echo "**On the stand-in libraries (--fake): no GPU ran anything.**" && echo
    echo "- device: ${device:-unknown}"
    echo "- gnc: $("$gnc" --version 2>/dev/null)"
    for f in "${found[@]}"; do echo "- $f"; done
    echo
    echo "| step | what | result | seconds |"
    echo "| --- | --- | --- | --- |"
    for i in "${!names[@]}"; do
        echo "| $((i + 1)) ${names[$i]} | ${notes[$i]} | ${states[$i]} | ${secs[$i]} |"
    done
    echo
    echo "$model training, batch $batch, $steps steps: gnc ${gnc_ips:-?} images/s;" \
         "PyTorch eager ${eager_ips:-not run}, torch.compile ${compile_ips:-not run};" \
         "peak GPU memory ${peak_mib:-unknown} MiB."
    echo
    for i in "${!names[@]}"; do
        echo "## $((i + 1)) ${names[$i]}: ${states[$i]}"
        echo '```'
        tail -25 "$out/logs/$((i + 1))-${names[$i]}.log" 2>/dev/null
        echo '```'
    done
} >"$out/gpu-report.md"
{
    echo "{"
    echo "  \"date\": $(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)"),"
    echo "  \"fake\": $([ $fake = 1 ] && echo true || echo false),"
    echo "  \"device\": $(json_str "${device:-}"),"
    echo "  \"libraries\": ["
    for i in "${!found[@]}"; do
        echo "    $(json_str "${found[$i]}")$([ $i -lt $((${#found[@]} - 1)) ] && echo ,)"
    done
    echo "  ],"
    echo "  \"steps\": ["
    for i in "${!names[@]}"; do
        echo "    {\"name\": $(json_str "${names[$i]}"), \"what\": $(json_str "${notes[$i]}"), \"result\": $(json_str "${states[$i]}"), \"seconds\": ${secs[$i]}}$([ $i -lt $((${#names[@]} - 1)) ] && echo ,)"
    done
    echo "  ],"
    echo "  \"training\": {\"model\": $(json_str $model), \"batch\": $batch, \"steps\": $steps, \"gnc_images_per_s\": ${gnc_ips:-null}, \"torch_eager_images_per_s\": ${eager_ips:-null}, \"torch_compile_images_per_s\": ${compile_ips:-null}, \"peak_memory_mib\": ${peak_mib:-null}}"
    echo "}"
} >"$out/gpu-report.json"
echo "report: $out/gpu-report.md, $out/gpu-report.json ($(( $(date +%s) - t_start )) s)"
# the exit status: 0 when no step failed or timed out
for s in "${states[@]}"; do case $s in passed|skipped) ;; *) exit 1 ;; esac; done
exit 0
