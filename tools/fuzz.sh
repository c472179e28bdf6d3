#!/usr/bin/env bash
# Fuzzes the frontend, the IR text parser, the plan loader, the checkpoint
# loader, the IDX data set reader, the .npy reader or the ONNX importer with
# libFuzzer for SECONDS seconds:
#   bash tools/fuzz.sh SECONDS [frontend|ir|plan|checkpoint|idx|npy|onnx]
#                                 (build dir: build-fuzz, or $GNC_FUZZ_BUILD)
# Builds tests/fuzz/fuzz_TARGET.c with clang, AddressSanitizer and UBSan, then runs
# it on a working copy of its seed corpus (frontend: models/*.net, tests/dsl/**/*.net,
# tests/fuzz/regressions/*.net; ir: tests/{ir,passes,comm}/*.gir; plan:
# tests/fuzz/plans/*.gnc; checkpoint: the checkpoints of its own two programs;
# idx: small IDX files, plain and gzipped; npy: files of its wanted types; the
# last three write their own; onnx: small models tests/onnx/hostile_gen.py
# --seeds writes, tests/onnx/models/{dwcnn,encoder}.onnx and
# tests/fuzz/regressions/*.onnx) kept in the build dir, so nothing is written into
# the repository.  Exits non-zero on any crash, sanitizer report, leak or timeout,
# and prints the path of the input that caused it and how to reproduce it.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] ||
   ! [[ ${2:-frontend} =~ ^(frontend|ir|plan|checkpoint|idx|npy|onnx)$ ]]; then
    echo "usage: bash tools/fuzz.sh SECONDS [frontend|ir|plan|checkpoint|idx|npy|onnx]" >&2
    exit 2
fi
seconds=$1
target=${2:-frontend}         # frontend: .net files; ir: .gir text; plan: .gnc plan files
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GNC_FUZZ_BUILD:-$root/build-fuzz}
command -v clang >/dev/null || { echo "fuzz: needs clang (bash tools/deps.sh)" >&2; exit 1; }

CC=clang cmake -S "$root" -B "$build" -G Ninja -DGNC_FUZZ=ON >/dev/null
ninja -C "$build" "fuzz_$target"

work=$build/fuzz-$target
corpus=$work/corpus          # grows from run to run; the seeds are copied in each time
artifacts=$work/artifacts
mkdir -p "$corpus" "$artifacts"
shopt -s nullglob globstar
max_len=4096
if [ "$target" = ir ]; then
    seeds=("$root"/tests/ir/*.gir "$root"/tests/passes/*.gir "$root"/tests/comm/*.gir)
    dict=()
elif [ "$target" = plan ]; then
    seeds=("$root"/tests/fuzz/plans/*.gnc)
    dict=()
    max_len=65536             # the largest seed (with kernels) is about 40 KiB
elif [ "$target" = checkpoint ] || [ "$target" = idx ] || [ "$target" = npy ]; then
    seeds=()
    dict=()
    "$build/fuzz_$target" --seeds "$corpus"   # files it writes: see tests/fuzz/fuzz_$target.c
elif [ "$target" = onnx ]; then
    seeds=("$root"/tests/onnx/models/dwcnn.onnx "$root"/tests/onnx/models/encoder.onnx
           "$root"/tests/fuzz/regressions/*.onnx)
    dict=(-dict="$root/tests/fuzz/onnx.dict")   # attribute types, names and op types
    max_len=131072            # the PyTorch exports are 45 and 75 KiB
    python3 "$root/tests/onnx/hostile_gen.py" --seeds "$corpus"   # seed_*.onnx
else
    seeds=("$root"/models/*.net "$root"/tests/dsl/**/*.net "$root"/tests/fuzz/regressions/*.net)
    dict=(-dict="$root/tests/fuzz/dsl.dict")
fi
for f in "${seeds[@]}"; do
    # flatten the path into a unique name: tests/dsl/a/b.net -> tests_dsl_a_b.net
    rel=${f#"$root"/}
    cp "$f" "$corpus/seed_${rel//\//_}"
done
echo "fuzz: ${#seeds[@]} seeds, $(ls "$corpus" | wc -l) inputs in $corpus; running ${seconds}s"

before=$(ls "$artifacts" | sort)
log=$work/fuzz.log
set +e
"$build/fuzz_$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    "${dict[@]}" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$corpus" 2>&1 | tee "$log" | grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse)'
rc=${PIPESTATUS[0]}
set -e
after=$(ls "$artifacts" | sort)
new=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^slow-unit-' || true)

if [ "$rc" -ne 0 ] || [ -n "$new" ]; then
    echo "fuzz: FAILED (libFuzzer exit code $rc); full log: $log" >&2
    for a in $new; do
        echo "fuzz: crash input: $artifacts/$a" >&2
    done
    grep -o 'Test unit written to .*' "$log" >&2 || true
    echo "fuzz: reproduce with: $build/fuzz_$target INPUT" >&2
    if [ "$target" = idx ] || [ "$target" = npy ]; then
        echo "fuzz: minimize with:  $build/fuzz_$target -minimize_crash=1 -runs=100000 -exact_artifact_path=min INPUT" >&2
        echo "fuzz: then add it to the seeds tests/fuzz/fuzz_$target.c writes (--seeds): every run replays them" >&2
    elif [ "$target" = onnx ]; then
        echo "fuzz: minimize with:  $build/fuzz_$target -minimize_crash=1 -runs=100000 -exact_artifact_path=min.onnx INPUT" >&2
        echo "fuzz: then save it as tests/fuzz/regressions/NAME.onnx (checked by ctest -R fuzz_regressions)" >&2
    else
        echo "fuzz: minimize with:  $build/fuzz_$target -minimize_crash=1 -runs=100000 -exact_artifact_path=min.net INPUT" >&2
        echo "fuzz: then save it as tests/fuzz/regressions/NAME.net (checked by ctest -R fuzz_regressions)" >&2
    fi
    exit 1
fi
echo "fuzz: no crash in ${seconds}s"
