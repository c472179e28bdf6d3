#!/usr/bin/env bash
# Set-up and the main job: installs what is missing (tools/deps.sh), builds gnc in
# build/, checks ResNet-18 and plans its training on 2 GPUs, prints the start of
# LeNet's graph IR, runs LeNet's inference on random inputs, then trains LeNet on
# Fashion-MNIST on the CPU.
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
# what runs where on 2 GPUs: the strategies costed, the plan of the fastest
"$gnc" compile models/resnet18.net --gpus 2 --train --dump-plan | sed -n '/^plan:/,/^device 0:/p'
# sed rather than head: it reads to the end, so gnc never dies of SIGPIPE
"$gnc" dump models/lenet.net | sed -n '1,10p'
"$gnc" run models/lenet.net --seed 1

# Training on Fashion-MNIST (the dataset-fashion-mnist package): LeNet, 2 epochs
# of SGD with momentum, then the test accuracy of the checkpoint
mkdir -p out
"$gnc" train models/lenet.net --epochs 2 --batch 256 --lr 0.1 --momentum 0.9 --seed 27 \
    --checkpoint out/lenet.safetensors --log out/lenet.csv
"$gnc" eval models/lenet.net --weights out/lenet.safetensors
