#!/usr/bin/env bash
# Set-up and the main job: installs what is missing (tools/deps.sh), builds gnc in
# build/, then checks ResNet-18, prints the start of LeNet's graph IR and runs
# LeNet's inference on random inputs.
#   bash tools/main.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh
cmake -S . -B build -G Ninja
cmake --build build
gnc=build/gnc

set -x
"$gnc" compile models/resnet18.net
# sed rather than head: it reads to the end, so gnc never dies of SIGPIPE
"$gnc" dump models/lenet.net | sed -n '1,10p'
"$gnc" run models/lenet.net --seed 1

# Training (a later issue adds it here): on Fashion-MNIST from the
# dataset-fashion-mnist package, /usr/share/datasets/fashion-mnist/*.gz
