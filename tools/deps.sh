#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) packages that gnc needs, if any is missing:
#   bash tools/deps.sh            build tools, libraries, clang for the fuzzer, data,
#                                 PyTorch (the tests of gnc.from_torch, bench/, the
#                                 golden file generator)
#   bash tools/deps.sh --torch    the same (PyTorch was an option once)
#   bash tools/deps.sh --list     print the packages, one a line, install nothing
# Idempotent, and quick when everything is there: it asks dpkg first and runs
# apt-get (update, then install) only for what is missing.  Runs as root, or
# through sudo when that is available.
set -euo pipefail

# build-essential, cmake, ninja-build: the C17 toolchain and the build
# flex, bison (>= 3.6):               the .net lexer and parser
# pkg-config, libopenblas-openmp-dev: BLAS for the CPU runtime's GEMMs, on the
#                                     runtime's own OpenMP threads
# zlib1g-dev:                         reading gzip-compressed data files
# libcjson-dev:                       the JSON header of safetensors checkpoints
# clang, libclang-rt-14-dev:          libFuzzer and clang's sanitizer runtimes
# libomp-14-dev:                      LLVM's OpenMP for clang, with Archer, which
#                                     tells ThreadSanitizer of its barriers
#                                     (clang only recommends the latter, and
#                                     recommends are not installed here)
# dataset-fashion-mnist:              the data of the main job
# python3:                            the test scripts' file surgery (checkpoints,
#                                     .npy, hostile inputs), standard library only
# protobuf-c-compiler, libprotobuf-c-dev, ONNX import and export (frontend/onnx/): protoc-c
# python3-onnx:                       generates C bindings from python3-onnx's onnx.proto;
#                                     gnc builds without them, ONNX left out
# libonnx-testdata:                   ONNX's conformance cases (tests/onnx/)
# xz-utils:                           tools/gpu_check.sh --pack compresses the libraries
# graphviz:                           gnc dump --format dot -o FILE.svg draws with dot
#                                     (tests/cli draws one); optional at run time
# librsvg2-bin:                       rsvg-convert, which draws gnc train --plot FILE.png
#                                     and gnc plot -o FILE.png; optional at run time
# python3-torch, and what it          gnc.from_torch (python/gnc/_torch.py) and its test
# recommends: libtorch-dev,           (python/tests/test_torch.py, skipped without it),
# pybind11-dev:                       bench/'s PyTorch side, tests/*/gen*.py
# python3-numpy, python3-venv,        the Python module over libgnc (python/, docs/api.md):
# python3-setuptools, python3-wheel:  its test's arrays (skipped without NumPy), and
#                                     `pip install ./python` into a venv offline
# libopenmpi-dev, openmpi-bin:        the MPI backend (one device of a partitioned
#                                     program per process, runtime/cpu/comm_mpi.c) and
#                                     mpirun, which its tests (tests/mpi.cmake) need;
#                                     gnc builds without them, the backend left out
# libdnnl-dev, ocl-icd-opencl-dev:    oneDNN, the CPU executor's convolutions
#                                     (runtime/cpu/dnnl.c); gnc builds without it,
#                                     its convolutions then on OpenBLAS.  Its CMake
#                                     config calls find_package(OpenCL REQUIRED),
#                                     which needs OpenCL's headers and library: only
#                                     a recommendation of libdnnl-dev, so named here
pkgs=(build-essential cmake ninja-build flex bison pkg-config libopenblas-openmp-dev zlib1g-dev
      libcjson-dev
      clang libclang-rt-14-dev libomp-14-dev dataset-fashion-mnist python3
      protobuf-c-compiler libprotobuf-c-dev python3-onnx libonnx-testdata graphviz xz-utils
      python3-numpy python3-venv python3-setuptools python3-wheel
      libopenmpi-dev openmpi-bin libdnnl-dev ocl-icd-opencl-dev librsvg2-bin
      python3-torch libtorch-dev pybind11-dev)
for arg in "$@"; do
    case $arg in
    --torch) ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "deps: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

if [ "${list:-0}" = 1 ]; then
    printf '%s\n' "${pkgs[@]}"
    exit 0
fi

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

missing=()
for p in "${pkgs[@]}"; do
    installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null; then
    sudo=(sudo)
else
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run this script as root (or with sudo) to install them" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
for p in "${missing[@]}"; do
    installed "$p" || { echo "deps: $p did not install" >&2; exit 1; }
done
