#!/bin/bash
# third call: bf16 throughput with channels-last cuDNN and igemm, then the GPU
# training tests again (3 free steps) in what time is left
cd "$(dirname "$0")"; P=$PWD/pack; T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
LIBS=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/targets/x86_64-linux/lib:/lib/x86_64-linux-gnu
mkdir -p /tmp/w
for c in cudnn-nhwc igemm; do
  el "gnc bf16 $c"
  LD_LIBRARY_PATH=$LIBS timeout 30 $P/bin/gnc train $PWD/rbf16-$c.gnc --device cuda --data $P/data --steps 25 --lr 0.05 2>&1 | tail -1
done
el tests
LD_LIBRARY_PATH=$LIBS timeout $(( 190 - ($(date +%s) - T0) )) stdbuf -oL $P/bin/test_gpu_train $P /tmp/w >$OUT/train3.log 2>&1; echo "rc=$?" >>$OUT/train3.log
cat $OUT/train3.log; el done
