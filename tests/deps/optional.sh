#!/usr/bin/env bash
# Optional dependencies that fail to load leave their feature out; they never
# stop the configure (cmake/optional.cmake).  For each of oneDNN, MPI, the
# CUDA toolkit and ONNX (protoc-c), a configure with that one made unloadable:
# a config or Find module that ends in an error, as Debian's oneDNN config
# does without OpenCL, or a protoc-c that fails.  The configure must succeed,
# warn that the feature is left out, and leave every other feature as a plain
# configure has it.  Then all four at once, and that build must complete and
# run a model.
#   optional.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=$1 work=$2
. "$src/tests/lib.sh"
rm -rf "$work"
mkdir -p "$work/broken"
cd "$work"

# what each feature's configure message says when it is built
declare -A built=([dnnl]="gnc: CPU convolutions on oneDNN" [MPI]="gnc: the MPI backend is built"
                  [CUDAToolkit]="codegen: NVRTC" [onnx]="gnc: ONNX import and export")
declare -A left=([dnnl]="dnnl's CMake files fail to load" [MPI]="MPI's CMake files fail to load"
                 [CUDAToolkit]="CUDAToolkit's CMake files fail to load"
                 [onnx]="fails on")
# each one's unloadable stand-in, and the cmake flags that bring it in
mkdir -p broken/dnnl/lib/cmake/dnnl broken/MPI broken/CUDAToolkit broken/onnx
echo 'find_package(GncNoSuchDependency REQUIRED)' >broken/dnnl/lib/cmake/dnnl/dnnl-config.cmake
echo 'message(FATAL_ERROR "this FindMPI.cmake fails on purpose")' >broken/MPI/FindMPI.cmake
echo 'message(FATAL_ERROR "this FindCUDAToolkit.cmake fails on purpose")' \
    >broken/CUDAToolkit/FindCUDAToolkit.cmake
printf '#!/bin/sh\necho "protoc-c: fails on purpose" >&2\nexit 1\n' >broken/onnx/protoc-c
chmod +x broken/onnx/protoc-c
declare -A flags=([dnnl]="-DCMAKE_PREFIX_PATH=$work/broken/dnnl"
                  [MPI]="-DCMAKE_MODULE_PATH=$work/broken/MPI"
                  [CUDAToolkit]="-DCMAKE_MODULE_PATH=$work/broken/CUDAToolkit"
                  [onnx]="-DGNC_PROTOC_C=$work/broken/onnx/protoc-c")
deps=(dnnl MPI CUDAToolkit onnx)

# configure NAME FLAGS...: configures into NAME/, its output in $out
configure() {
    local dir=$1; shift
    expect 0 cmake -S "$src" -B "$dir" -G Ninja -DGNC_WERROR=OFF "$@"
}

configure plain
declare -A have
for d in "${deps[@]}"; do
    if grep -qF -- "${built[$d]}" <<<"$out"; then have[$d]=1; else have[$d]=0; fi
    echo "plain configure: $d $([ "${have[$d]}" = 1 ] && echo built || echo absent here)"
done

for d in "${deps[@]}"; do
    configure "no-$d" ${flags[$d]}
    has "${left[$d]}"
    if grep -qF -- "${built[$d]}" <<<"$out"; then bad "$d broken, still built"; else ok; fi
    for o in "${deps[@]}"; do
        [ "$o" = "$d" ] && continue
        got=0; grep -qF -- "${built[$o]}" <<<"$out" && got=1
        if [ "$got" = "${have[$o]}" ]; then ok; else bad "$d broken changed $o ($got)"; fi
    done
done

# all four at once (one CMAKE_MODULE_PATH holds both Find modules): it builds and runs
mkdir -p broken/modules
cp broken/MPI/FindMPI.cmake broken/CUDAToolkit/FindCUDAToolkit.cmake broken/modules/
configure none -DCMAKE_PREFIX_PATH="$work/broken/dnnl" -DCMAKE_MODULE_PATH="$work/broken/modules" \
    -DGNC_PROTOC_C="$work/broken/onnx/protoc-c"
for d in "${deps[@]}"; do
    if grep -qF -- "${built[$d]}" <<<"$out"; then bad "all broken, $d still built"; else ok; fi
done
expect 0 cmake --build none --target gnc
expect 0 none/gnc run "$src/models/lenet.net" -D batch=2 --seed 1
has "logits: f32[2, 10]"
: >empty.onnx
expect 1 none/gnc dump empty.onnx
has "built without ONNX support"
summary optional_deps
