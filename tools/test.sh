#!/usr/bin/env bash
# Set-up and the tests:
#   bash tools/test.sh                 install what is missing, build in build/, run ctest
#   bash tools/test.sh --asan          the same with AddressSanitizer and UBSan, in build-asan/
#   bash tools/test.sh --clang         build with clang instead, in build-clang/ (no tests:
#                                      a second compiler's warnings)
#   bash tools/test.sh --tsan          ThreadSanitizer (clang), in build-tsan/: the tests
#                                      that run threads (OpenMP, virtual devices, sessions
#                                      on several threads)
#   bash tools/test.sh --fuzz SECONDS [frontend|ir|plan|checkpoint|idx|npy|onnx]
#                                      fuzz the frontend, the IR parser, the plan
#                                      or checkpoint loader, the IDX or .npy reader
#                                      or the ONNX importer instead (tools/fuzz.sh)
# GNC_BUILD_DIR overrides the build directory; GNC_WERROR=ON makes warnings errors
# (CI sets it).  Exits non-zero if a step or a test fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
asan=0 clang=0 tsan=0 fuzz= fuzz_target=frontend
while [ $# -gt 0 ]; do
    case $1 in
    --asan) asan=1 ;;
    --clang) clang=1 ;;
    --tsan) tsan=1 ;;
    --fuzz)
        [ $# -ge 2 ] || { echo "test: --fuzz needs SECONDS" >&2; exit 2; }
        fuzz=$2; shift
        case ${2:-} in frontend|ir|plan|checkpoint|idx|npy|onnx) fuzz_target=$2; shift ;; esac ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "test: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

bash "$root/tools/deps.sh"
if [ -n "$fuzz" ]; then
    exec bash "$root/tools/fuzz.sh" "$fuzz" "$fuzz_target"
fi

if [ $asan = 1 ]; then
    build=${GNC_BUILD_DIR:-$root/build-asan}
    flags=(-DGNC_SANITIZE=ON)
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    build=${GNC_BUILD_DIR:-$root/build}
    flags=(-DGNC_SANITIZE=OFF)
fi
flags+=(-DGNC_WERROR="${GNC_WERROR:-OFF}")
if [ $clang = 1 ]; then
    build=${GNC_BUILD_DIR:-$root/build-clang}
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja "${flags[@]}"
    cmake --build "$build"
    exit 0
fi
if [ $tsan = 1 ]; then
    # the threaded tests: OpenMP regions on 1 to 4 threads and 2 virtual
    # devices (threads), the virtual devices' collectives (comm), tensor
    # parallelism (tensor), sessions of one plan on 4 threads at once (api)
    build=${GNC_BUILD_DIR:-$root/build-tsan}
    CC=clang cmake -S "$root" -B "$build" -G Ninja -DGNC_TSAN=ON -DGNC_SANITIZE=OFF \
        -DGNC_WERROR="${GNC_WERROR:-OFF}"
    cmake --build "$build" --target gnc test_api test_threads test_comm test_tensor
    archer=$(clang -print-resource-dir)/../../libarcher.so
    [ -r "$archer" ] || { echo "test: no $archer (libomp-14-dev)" >&2; exit 1; }
    export OMP_TOOL_LIBRARIES=$archer
    export TSAN_OPTIONS=${TSAN_OPTIONS:-ignore_noninstrumented_modules=1:halt_on_error=1}
    ctest --test-dir "$build" --output-on-failure --no-tests=error -j2 \
        -R '^(api_plans|api|threads|comm|tensor)$'
    exit 0
fi
cmake -S "$root" -B "$build" -G Ninja "${flags[@]}"
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j2
