#!/usr/bin/env bash
# tools/gpu_check.sh without a GPU: run.sh SOURCE_DIR BUILD_DIR WORK_DIR [plain|sanitized|pack]
# (pack: step 1's pack and its size alone, as CI checks the build without oneDNN).
#   1. --pack gathers a build that needs nothing from Debian's packages: every
#      library its binaries load, but glibc's and CUDA's, resolves into the
#      pack with LD_LIBRARY_PATH limited to it, and its gnc compiles a model
#      there from an empty environment;
#   2. --fake runs every step on the stand-in libraries and writes both
#      reports, the JSON one well formed, each step passed.
set -u
src=$1 build=$2 work=$3 kind=${4:-plain}
. "$src/tests/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export GNC_BUILD_DIR=$build

expect 0 bash "$src/tools/gpu_check.sh" --pack "$work/pack"
has "packed into $work/pack"
for f in bin/gnc bin/test_gpu_ops bin/test_gpu_train bin/test_codegen gpu_check.sh pack.txt \
         models/resnet18.net data.tar.xz bench/gpu_race.sh lib.tar.xz; do
    [ -e "pack/$f" ] && ok || bad "the pack lacks $f"
done
# a device call carries at most 64 MiB, the checkout included: the pack of a
# build without oneDNN (the GPU build, docs/gpu.md) at most 40 MiB, 48 with
# its 8 (a sanitized build's binaries are larger, and never go to a GPU)
size=$(du -sm pack | cut -f1) most=40
grep -q libdnnl pack/pack.txt && most=48
[ "$kind" = sanitized ] || [ "$size" -le $most ] && ok ||
    bad "the pack is $size MiB, over $most"
echo "the pack: $size MiB"
[ "$kind" = pack ] && { summary gpu-check-pack; exit; }
expect 0 bash pack/gpu_check.sh --unpack
[ -e pack/lib/libopenblas.so.0 ] && ok || bad "--unpack left no pack/lib/libopenblas.so.0"
[ "$(wc -c <pack/data/train-images-idx3-ubyte)" = 47040016 ] && ok ||
    bad "--unpack left no whole pack/data/train-images-idx3-ubyte"
missing=$(env -i LD_LIBRARY_PATH="$work/pack/lib" ldd pack/bin/* |
          awk '/=>/ && $1 !~ /^(libc|libm|libpthread|libdl|librt|ld-linux|libcuda|libnvrtc)[.-]/ {print $1, $3}' |
          grep -v " $work/pack/lib/")
[ -z "$missing" ] && ok || bad "libraries outside the pack: $missing"
expect 0 env -i LD_LIBRARY_PATH="$work/pack/lib" GNC_CACHE_DIR="$work/cache" \
    pack/bin/gnc compile pack/models/lenet.net --no-kernels -o lenet.gnc
has "plan: lenet.gnc"
expect 2 bash "$src/tools/gpu_check.sh" --budget x out
has "--budget needs SECONDS"

expect 0 bash "$src/tools/gpu_check.sh" --fake "$work/report" --budget 400
[ -s report/gpu-report.md ] && grep -q "no GPU ran anything" report/gpu-report.md && ok ||
    bad "gpu-report.md does not say it ran on the stand-ins"
if python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["fake"] and len(r["steps"]) == 6 and all(s["result"] == "passed" for s in r["steps"]), r' \
    report/gpu-report.json; then ok; else bad "gpu-report.json: $(cat report/gpu-report.json)"; fi
summary gpu-check
