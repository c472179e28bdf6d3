#!/usr/bin/env bash
# libgnc installed and used as an application would: install.sh BUILD_DIR
# SOURCE_DIR WORK_DIR CC [CFLAGS...].  cmake --install into WORK_DIR/prefix;
# examples/app.c built with `cc app.c $(pkg-config --cflags --libs gnc)` and
# with find_package(gnc); both run plans compiled by the installed gnc, to the
# outputs gnc run prints; the library exports gnc_* alone; the header compiles
# on its own as C99 and as C++.  CFLAGS: the sanitizer flags of an ASan build.
# Ends with "N passed, M failed"; fails if any did.
set -u
build=$1 src=$2 work=$3 cc=$4
shift 4
cflags=("$@")
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
strip() { grep -v -e '^time:' -e '^memory:' <<<"$1"; }

expect 0 cmake --install "$build" --prefix "$work/prefix"
pc=$(find prefix -name gnc.pc | head -1)
for f in prefix/include/gnc/gnc.h prefix/bin/gnc "$pc"; do
    if [ -f "$f" ]; then ok; else bad "not installed: $f"; fi
done
# the manual page (made from the table gnc's help comes from: every command
# and option of the help is in it), the bash completion, the documentation
man=prefix/share/man/man1/gnc.1 comp=prefix/share/bash-completion/completions/gnc
for f in "$man" "$comp" prefix/share/doc/gnc/cli.md prefix/share/doc/gnc/dsl.md; do
    if [ -f "$f" ]; then ok; else bad "not installed: $f"; fi
done
if command -v groff >/dev/null; then
    expect 0 groff -man -Tutf8 -ww "$man"
    if [ -z "$(groff -man -Tutf8 -ww "$man" 2>&1 >/dev/null)" ]; then ok; else bad "groff warns about gnc.1"; fi
fi
for cmd in dump compile run train eval inspect devices; do
    grep -q "^\.SH GNC $cmd\$" "$man" || { bad "gnc.1 has no section for $cmd"; continue; }
    section=$(sed -n "/^\.SH GNC $cmd\$/,/^\.SH/p" "$man" | sed 's/\\-/-/g')
    missing=
    for opt in $(prefix/bin/gnc $cmd --help | grep -oE '^  (-[A-Za-z]|--[a-z-]+)' | grep -v '^  -h$'); do
        grep -qE "^\\.B $opt(\\\\|\$)" <<<"$section" || missing="$missing $opt"
    done
    if [ -z "$missing" ]; then ok; else bad "gnc.1's section for $cmd lacks$missing"; fi
done
out=$(bash -c '. "$1"; COMP_WORDS=("$2" compile --gp); COMP_CWORD=2; _gnc; echo "${COMPREPLY[*]}"
               COMP_WORDS=("$2" train --device ""); COMP_CWORD=3; _gnc; echo "${COMPREPLY[*]}"
               COMP_WORDS=("$2" ev); COMP_CWORD=1; _gnc; echo "${COMPREPLY[*]}"' _ "$comp" prefix/bin/gnc)
if [ "$out" = $'--gpus\ncpu cuda\neval' ]; then ok; else bad "the bash completion: $out"; fi

export PKG_CONFIG_PATH=$work/${pc%/gnc.pc}
expect 0 pkg-config --modversion gnc;  has "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")"
libdir=$(pkg-config --variable=libdir gnc)
if [ -e "$libdir/libgnc.so" ] && [ -e "$libdir/cmake/gnc/gncConfig.cmake" ]; then ok
else bad "libdir $libdir lacks libgnc.so or cmake/gnc/gncConfig.cmake"; fi
others=$(nm -D --defined-only "$libdir/libgnc.so" | awk '{print $3}' | grep -v '^gnc_' | grep -v '^_init$\|^_fini$')
if [ -z "$others" ]; then ok; else bad "libgnc exports more than gnc_*: $(head -5 <<<"$others")"; fi
if nm -D --defined-only "$libdir/libgnc.so" | grep -q ' gnc_session_train_step$'; then ok; else bad "no gnc_session_train_step"; fi

# the header alone, as C99 and as C++ (no internal header behind it)
printf '#include <gnc/gnc.h>\nint main(void) { gnc_error e; return gnc_plan_load(0, "x", &e) != GNC_ERROR_ARGUMENT; }\n' >h.c
expect 0 "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I prefix/include h.c
if command -v c++ >/dev/null; then
    expect 0 c++ -x c++ -Wall -Wextra -Werror -fsyntax-only -I prefix/include h.c
fi

# examples/app.c against the installed library, as CI builds it
expect 0 "$cc" "${cflags[@]}" "$src/examples/app.c" $(pkg-config --cflags --libs gnc) -o app
gnc=prefix/bin/gnc
expect 0 "$gnc" compile "$src/models/lenet.net" -D batch=4 -o lenet.gnc
expect 0 "$gnc" compile "$src/models/mlp.net" -D batch=4 --devices cpu:2 --strategy pipeline -o mlp2.gnc
expect 0 "$gnc" compile "$src/models/lenet.net" --train -D batch=8 -o step.gnc
export LD_LIBRARY_PATH=$libdir
for plan in lenet.gnc mlp2.gnc; do
    expect 0 "$gnc" run $plan --seed 3 --device cpu;  want=$(strip "$out")
    expect 0 ./app $plan --seed 3 --device cpu;        got=$out
    if [ -n "$got" ] && [ "$want" = "$got" ]; then ok
    else bad "$plan: app printed otherwise than gnc run"; echo "$got" | head -5; fi
done
has "probs: f32[4, 10]"
expect 0 ./app step.gnc --steps 3 --lr 0.05 --device cpu;  has "step 3: loss"
# cuda where the driver cannot load: the GPU executor's message (a build
# without the toolkit refuses the device; GNC_TEST_CUDA_RUNTIME from tests/api.cmake)
if [ "${GNC_TEST_CUDA_RUNTIME:-ON}" = ON ]; then
    expect 1 env GNC_CUDA_LIBDIR=/nonexistent-gnc ./app lenet.gnc --device cuda
    has "no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
    expect 1 env GNC_CUDA_LIBDIR=/nonexistent-gnc ./app step.gnc --steps 1 --device cuda
    has "no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
else
    expect 1 ./app lenet.gnc --device cuda;  has "no CUDA runtime (built without the CUDA toolkit)"
fi
expect 1 ./app "$src/models/lenet.net" --device cpu;  has "not a gnc plan file"
# a given input: a file of its raw bytes (zeros), against --input of gnc run
head -c $((4 * 784 * 4)) /dev/zero >zeros.bin
expect 0 ./app lenet.gnc image=zeros.bin --device cpu;  a=$out
expect 0 ./app lenet.gnc --device cpu;                  b=$out
if [ "$a" != "$b" ]; then ok; else bad "app ignores a given input"; fi
head -c 10 /dev/zero >short.bin
expect 1 ./app lenet.gnc image=short.bin --device cpu;  has "does not hold exactly 12544 bytes"

# find_package(gnc) in a CMake project of its own
mkdir consumer
cat >consumer/CMakeLists.txt <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(gnc 0.2 REQUIRED)
add_executable(app "$src/examples/app.c")
target_link_libraries(app PRIVATE gnc::gnc)
CMAKE
expect 0 cmake -S consumer -B consumer/build -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${cflags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${cflags[*]}"
expect 0 cmake --build consumer/build
expect 0 env -u LD_LIBRARY_PATH consumer/build/app lenet.gnc --seed 3 --device cpu
if [ "$(strip "$out")" = "$(./app lenet.gnc --seed 3 --device cpu)" ]; then ok
else bad "the find_package build printed otherwise"; fi
summary api-install
