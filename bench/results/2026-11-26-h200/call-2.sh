#!/bin/bash
# second call: the GPU tests after the fixes, throughput by precision beside
# PyTorch's, and a per-kernel profile of a bf16 step
cd "$(dirname "$0")"; P=$PWD/pack; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
LIBS=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/targets/x86_64-linux/lib:/lib/x86_64-linux-gnu
export GNC_CACHE_DIR=/tmp/kc; mkdir -p /tmp/w /tmp/kc
el tests
LD_LIBRARY_PATH=$LIBS timeout 200 stdbuf -oL $P/bin/test_gpu_train $P /tmp/w >$OUT/train.log 2>&1; echo "rc=$?" >>$OUT/train.log
tail -12 $OUT/train.log
for p in bf16 tf32; do
  el "gnc $p"
  LD_LIBRARY_PATH=$LIBS timeout 60 $P/bin/gnc train $PWD/r$p.gnc --device cuda --data $P/data --steps 25 --lr 0.05 2>&1 | tail -2
done
el torch
for a in "bf16 --channels-last" tf32; do
  timeout 60 python3 $P/bench/torch_fmnist.py --model resnet18 --synthetic --steps 25 --batch 256 --epochs 4 --amp $a 2>&1 | tail -1
done
el ncu
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LD_LIBRARY_PATH=$LIBS GNC_CUDA_EAGER=1 timeout 100 $NCU --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_bf16.csv $P/bin/gnc train $PWD/rbf16.gnc --device cuda --data $P/data --steps 2 --lr 0.05 >$OUT/ncu.log 2>&1
echo "ncu rc=$?"; tail -3 $OUT/ncu.log; wc -l $OUT/ncu_bf16.csv
el done
