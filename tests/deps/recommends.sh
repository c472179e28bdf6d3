#!/usr/bin/env bash
# Every package that tools/deps.sh installs has each of its recommendations
# either in deps.sh's list or waived below with the reason the build needs
# none of it: deps.sh installs with --no-install-recommends, so a
# recommendation the build needs (libdnnl-dev's ocl-icd-opencl-dev, which
# oneDNN's CMake config requires) must be named there, or a clean machine
# fails where the development machine passed.  A metapackage's versioned
# package (clang's clang-14) is read too.  Needs the packages installed (it
# reads dpkg's records).
#   recommends.sh SOURCE_DIR
set -uo pipefail
src=$1
. "$src/tests/lib.sh"

# recommendation: why the build needs none of it
declare -A waived=(
    [gcc]="build-essential depends on it"
    [make]="build-essential depends on it"
    [c-compiler]="gcc, through build-essential"
    [libfl-dev]="the lexer is %option noyywrap: nothing of libfl is linked"
    [fonts-liberation2]="dot writes SVG text by font name; no font files are read"
    [libcoarrays-openmpi-dev]="Fortran coarrays: gnc has no Fortran"
    [libgl-dev]="OpenGL interop headers: oneDNN's config finds OpenCL without them"
    [llvm-14-dev]="LLVM's headers and libraries: gnc links none of LLVM"
    [libeigen3-dev]="pybind11's Eigen bindings: nothing here builds against pybind11"
)
mapfile -t pkgs < <(bash "$src/tools/deps.sh" --list)
declare -A listed
for p in "${pkgs[@]}"; do listed[$p]=1; done

# names PACKAGE FIELD: the package names of a dpkg field, one alternative group
# a line ("a|b"), versions and architectures dropped
names() {
    dpkg-query -W -f="\${$2}" "$1" 2>/dev/null | tr ',' '\n' |
        sed 's/([^)]*)//g; s/:[a-z0-9]*//g; s/ //g' | grep .
}

for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        bad "$p is not installed (run tools/deps.sh first)"
        continue
    fi
    # the package itself, and a metapackage's versioned package (clang-14)
    readers=("$p")
    while read -r d; do
        case ${d%%|*} in "$p"-[0-9]*|"$p"[0-9]*) readers+=("${d%%|*}") ;; esac
    done < <(names "$p" Depends)
    for r in "${readers[@]}"; do
        while read -r group; do
            met=
            IFS='|' read -ra alts <<<"$group"
            for a in "${alts[@]}"; do
                if [ -n "${listed[$a]:-}" ] || [ -n "${waived[$a]:-}" ]; then met=$a; fi
            done
            if [ -n "$met" ]; then ok
            else bad "$r recommends $group, which tools/deps.sh neither installs nor waives"; fi
        done < <(names "$r" Recommends)
    done
done
summary recommends
