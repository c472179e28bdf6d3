#!/usr/bin/env bash
# Plan files from the command line: run.sh GNC SOURCE_DIR WORK_DIR DATA_DIR.
# gnc compile -o writes the same bytes for the same model and flags (1 and 2
# devices, inference and training); a plan runs to the same outputs as its
# model (every strategy), trains to the same checkpoint, evaluates alike;
# gnc inspect prints valid plans and refuses broken ones with a message;
# options a plan cannot take, training plans run and inference plans trained,
# and devices (cuda, the default, counts) give their errors; the fuzzer's
# seed plans still load.  Ends with "N passed, M failed"; fails if any did.
set -u
gnc=$1 src=$2 work=$3 data=$4 nvrtc=${5:-OFF} fake=${6:-}
. "$(cd "$(dirname "$0")/.." && pwd)/lib.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
lenet=$src/models/lenet.net mlp=$src/models/mlp.net
strip() { grep -vE '^(time|memory):' <<<"$1"; }
# the data of a safetensors checkpoint: what follows its header (whose metadata
# says which model wrote it)
tensors() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((9 + n)) "$1"; }

# a slice of Fashion-MNIST for training and evaluation
mkdir tiny
idx_slice train-images-idx3-ubyte 256 3 "$data" >tiny/train-images-idx3-ubyte
idx_slice train-labels-idx1-ubyte 256 1 "$data" >tiny/train-labels-idx1-ubyte
idx_slice t10k-images-idx3-ubyte 200 3 "$data" >tiny/t10k-images-idx3-ubyte
idx_slice t10k-labels-idx1-ubyte 200 1 "$data" >tiny/t10k-labels-idx1-ubyte

# a model path of any bytes: its meta escaped (it was refused as not printable)
cp "$mlp" "lé net.net"
expect 0 "$gnc" compile "lé net.net" -D batch=4 --no-kernels -o le.gnc
expect 0 "$gnc" inspect le.gnc
has 'source: l\xc3\xa9 net.net'

# reproducible: the same model and flags, the same bytes (-o's name is no flag)
expect 0 "$gnc" compile "$lenet" -D batch=4 -o a.gnc
has "plan: a.gnc"
expect 0 "$gnc" compile "$lenet" -D batch=4 -o b.gnc
same a.gnc b.gnc "lenet, 1 device, compiled twice"
expect 0 "$gnc" compile "$lenet" -D batch=4 -o a.gnc --stats
same a.gnc b.gnc "lenet, written over itself (--stats prints, it does not shape)"
if ! ls ./*.tmp* >/dev/null 2>&1; then ok; else bad "-o left a temporary file"; fi
T2=(--train -D batch=64 --momentum 0.9 --devices cpu:2 --strategy data)
expect 0 "$gnc" compile "$lenet" "${T2[@]}" -o t2a.gnc
expect 0 "$gnc" compile "$lenet" "${T2[@]}" -o t2b.gnc
same t2a.gnc t2b.gnc "lenet training step, 2 devices, compiled twice"
expect 0 "$gnc" compile "$mlp" -D batch=8 --gpus 2 -o g2a.gnc
expect 0 "$gnc" compile "$mlp" -D batch=8 --gpus 2 -o g2b.gnc
same g2a.gnc g2b.gnc "mlp for 2 GPUs (auto strategy), compiled twice"
expect 2 "$gnc" compile "$lenet" -D batch=4 --seed 3 -o c.gnc
if [ ! -e c.gnc ]; then ok; else bad "a compile with a usage error wrote a plan"; fi
cmp -s a.gnc t2a.gnc && bad "different flags gave the same plan" || ok
# the CUDA kernels (docs/codegen.md): where gnc has NVRTC a plan holds them, and
# the same bytes with a cold compile cache and a warm one
export GNC_CACHE_DIR=$work/cache
if [ "$nvrtc" = ON ]; then
    rm -rf "$GNC_CACHE_DIR"
    K=(--train -D batch=8 --gpus 2 --precision bf16 --arch sm_80)
    expect 0 "$gnc" compile "$lenet" "${K[@]}" -o kcold.gnc
    expect 0 "$gnc" compile "$lenet" "${K[@]}" -o kwarm.gnc
    same kcold.gnc kwarm.gnc "lenet kernels, a cold compile cache and a warm one"
    expect 0 "$gnc" inspect kwarm.gnc
    has "cuda: bf16, "; has "archs sm_80"; has "ptx compute_80 "
    grep -qF "cubin sm_90" <<<"$out" && bad "--arch sm_80 gave an sm_90 cubin" || ok
    # the training step moves no bytes it need not: parameters, optimizer state
    # and running statistics updated in place, flatten a view (no copy steps)
    n=$(grep -cE "^ +[0-9]+ copy " <<<"$out")
    [ "$n" = 0 ] && ok || bad "lenet's training step on 2 devices copies $n times"
    expect 0 "$gnc" compile "$src/models/resnet18.net" --train -D batch=4 --precision bf16 \
        --arch sm_80 -o rn.gnc
    expect 0 "$gnc" inspect rn.gnc
    n=$(grep -cE "^ +[0-9]+ copy " <<<"$out")
    [ "$n" = 0 ] && ok || bad "resnet18's bf16 training step copies $n times"
    grep -q "update %" <<<"$out" && bad "an update copied back" || ok
    # the optimizer's 76 steps in one launch, the 16-bit copies of the
    # weights in one, the convolutions' biases and their gradients in the
    # batchnorms' kernels: 150 steps in all (from 388), at most 210 with the
    # reductions in parts (channels-last, every batchnorm is a kernel of
    # partial sums, one that merges them per channel and one that normalizes:
    # layer4's too; 188 now)
    n=$(grep -cE "^ +[0-9]+ (kernel|gemm|conv|copy)" <<<"$out")
    [ "$n" -le 210 ] && ok || bad "resnet18's bf16 training step takes $n steps, more than 210"
    has "sgd of 76 tensors (one launch)"
    # adam's four pointers a tensor, 162 tensors: 120 do not fit CUDA's 4 KiB
    # of parameters, 90 and 72 do; each kernel has thousands of identifiers,
    # every one declared once (past 512 names some were declared twice, and
    # the accesses of such a launch overran an array: resnet18 --optimizer
    # adam crashed)
    expect 0 "$gnc" compile "$src/tests/plan/deep.net" --train --optimizer adam --arch sm_80 \
        -o deep.gnc
    expect 0 "$gnc" inspect deep.gnc
    has "adam of 90 tensors (one launch)"; has "adam of 72 tensors (one launch)"
    # data parallel: the same goal; the filter gradients converted to float
    # in one launch a bucket
    expect 0 "$gnc" compile "$src/models/resnet18.net" --train -D batch=256 --precision bf16 \
        --gpus 2 --strategy data --stats
    for d in 0 1; do
        n2=$(sed -n "s/^cuda.d$d.steps: //p" <<<"$out")
        [ "${n2:-999}" -le 210 ] && ok || bad "resnet18 bf16 on 2 devices: device $d takes $n2 steps"
    done
    # the same counts for scripts
    steps=$n
    expect 0 "$gnc" inspect rn.gnc --json
    has '"model":	"resnet18"'; has '"copies":	0'; has '"library_calls":	62'
    has "\"steps\":	$steps,"
    grep -q '"smallest_big_grid":	[0-9]' <<<"$out" && ok || bad "inspect --json: no smallest grid"
    expect 2 "$gnc" inspect rn.gnc --json=1
    expect 0 "$gnc" inspect rn.gnc
    has "22 shadows (16-bit copies) in one launch"
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --no-kernels -o knone.gnc
    expect 0 "$gnc" inspect knone.gnc; has "kernels: none"
    if [ "$(stat -c %s knone.gnc)" -lt "$(stat -c %s kwarm.gnc)" ]; then ok; else bad "--no-kernels plan not smaller"; fi
    # a plan whose stored source is not what its program generates: refused
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --precision fp32 -o k32.gnc
    cmp -s k32.gnc kwarm.gnc && bad "another precision gave the same plan" || ok
    # --conv igemm: the convolutions as generated kernels, the choice in the meta
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --conv igemm -o kig.gnc
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --conv igemm -o kig2.gnc
    same kig.gnc kig2.gnc "lenet with --conv igemm, compiled twice"
    cmp -s kig.gnc kwarm.gnc && bad "--conv igemm gave the same plan as cuDNN" || ok
    expect 0 "$gnc" inspect kig.gnc
    has "conv: igemm"; has "convolutions by igemm"; has "kernel conv2d_igemm"
    has "kernel conv2d_grad_input_igemm"; has "kernel conv2d_grad_weight_igemm"
    grep -qF "conv forward" <<<"$out" && bad "--conv igemm left a cuDNN convolution" || ok
    # --conv cudnn-nhwc: cuDNN calls on channels-last copies, transposes around them
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --conv cudnn-nhwc -o knhwc.gnc
    expect 0 "$gnc" compile "$lenet" "${K[@]}" --conv cudnn-nhwc -o knhwc2.gnc
    same knhwc.gnc knhwc2.gnc "lenet with --conv cudnn-nhwc, compiled twice"
    expect 0 "$gnc" inspect knhwc.gnc
    has "conv: cudnn-nhwc"; has "convolutions by cudnn-nhwc"
    has "conv forward x=[4,6,14,14] w=[16,6,5,5] y=[4,16,10,10] stride 1 pad 0 bf16 tensor-op channels-last"
    has "kernel transpose_bf16_to_bf16"
    grep -q "conv .*tensor-op$" <<<"$out" && bad "--conv cudnn-nhwc left an NCHW cuDNN convolution" || ok
fi
expect 2 "$gnc" compile "$lenet" --conv winograd -o p.gnc; has "--conv needs cudnn, igemm, cudnn-nhwc or auto, got 'winograd'"
expect 2 "$gnc" run a.gnc --conv igemm; has "does not apply"
expect 2 "$gnc" compile "$lenet" --precision fp8 -o p.gnc; has "--precision needs fp32, tf32, bf16 or fp16"
expect 2 "$gnc" compile "$lenet" --arch sm_80,sm_80 -o p.gnc; has "--arch needs"
expect 2 "$gnc" run a.gnc --precision fp16; has "does not apply"
# a compile that fails writes nothing
printf 'model m() {\n    input x: f32[2]\n    output y = relu(x) +\n}\n' >broken.net
expect 1 "$gnc" compile broken.net -o broken.gnc
if [ ! -e broken.gnc ] && ! ls broken.gnc.tmp* >/dev/null 2>&1; then ok; else bad "a failed compile left a plan"; fi

# a plan runs to its model's outputs: 1 device, and every strategy on 2
expect 0 "$gnc" run "$lenet" -D batch=4 --seed 5;  want=$(strip "$out")
expect 0 "$gnc" run a.gnc --seed 5 --device cpu;   got=$(strip "$out")
if [ "$want" = "$got" ]; then ok; else bad "lenet: the plan's outputs differ from the model's"; fi
lenet_out=$want
has "logits: f32[4, 10]"
for s in data pipeline tensor; do
    P=(-D batch=8 --devices cpu:2 --strategy $s)
    expect 0 "$gnc" run "$mlp" "${P[@]}" --seed 2;   want=$(strip "$out")
    expect 0 "$gnc" compile "$mlp" "${P[@]}" -o mlp-$s.gnc
    expect 0 "$gnc" run mlp-$s.gnc --seed 2 --device cpu;  got=$(strip "$out")
    if [ "$want" = "$got" ]; then ok; else bad "mlp $s x2: the plan's outputs differ"; fi
    expect 0 "$gnc" run mlp-$s.gnc --seed 2 --devices cpu:2 --device cpu
done
# given inputs, written by the model's run and fed to the plan's
expect 0 "$gnc" run "$lenet" -D batch=4 --seed 6 -o outs
expect 1 "$gnc" run a.gnc --device cpu --input image=outs/logits.npy
has "does not match the input's f32[4, 1, 28, 28]"
# the plan's program is the compiled one, and dumps as IR text that loads
expect 0 "$gnc" dump a.gnc -o a.gir
expect 0 "$gnc" dump a.gir
has "graph lenet {"

# inspect: every part of a valid plan
expect 0 "$gnc" inspect t2a.gnc
for want in "gnc plan format 2" "program " "memory " "meta " "a training step on 2 devices" \
            "strategy: data" "flags: --train -D batch=64 --momentum 0.9 --devices cpu:2 --strategy data" \
            "optimizer: sgd momentum=0.9" "device 0: " "device 1: " "arena " "inputs: 5" \
            "train.lr" "outputs: " "loss: " "parameters: 20 tensors (10 trainable, 0 buffers, 10 optimizer state)" \
            "conv1.weight" "uniform(-0.2, 0.2)" "momentum_buffer" "all_reduce #1 over [0, 1]: 10 tensors, 241.0 KiB" \
            ; do
    has "$want"
done
if [ "$nvrtc" = ON ]; then
    for want in "cuda_source " "kernel_image " "cuda: fp32, " "archs sm_80 sm_90" "workspace " \
                "kernel " "grid " "block " "conv forward x=[32,1,28,28]" "gemm TN" "all_reduce #1 group [0,1]" \
                "cubin sm_80 " "cubin sm_90 " "ptx compute_90 " "precision: fp32" "archs: sm_80,sm_90"; do
        has "$want"
    done
else
    has "kernels: none: compiled with --no-kernels or by a gnc without NVRTC"
fi
expect 0 "$gnc" inspect mlp-tensor.gnc
has "shard of fc0.weight"
expect 0 "$gnc" inspect mlp-pipeline.gnc
has "send #"
has "recv #"
expect 0 "$gnc" inspect a.gnc
has "device 0: none"
# ... and a clear error for a broken one
size=$(stat -c %s a.gnc)
head -c $((size - 100)) a.gnc >cut.gnc
expect 1 "$gnc" inspect cut.gnc;  has "cut.gnc: truncated: the header says $size bytes"
cp a.gnc flip.gnc; printf '\x01' | dd of=flip.gnc bs=1 seek=300 conv=notrunc 2>/dev/null
expect 1 "$gnc" inspect flip.gnc; has "checksum does not match"
expect 1 "$gnc" run flip.gnc --device cpu;  has "checksum does not match"
cp a.gnc ver.gnc; printf '\x07' | dd of=ver.gnc bs=1 seek=8 conv=notrunc 2>/dev/null
expect 1 "$gnc" inspect ver.gnc;  has "plan format version 7, written by gnc "; has "reads version 2: it needs a newer gnc"
# a plan of format version 1, written by gnc 0.1.0 before the ops' attributes
# changed (kept as it was: tests/plan/v1-small.gnc): refused by its version,
# with its writer, not by a missing attribute
for cmd in inspect run; do
    expect 1 "$gnc" $cmd "$src/tests/plan/v1-small.gnc"
    has "plan format version 1, written by gnc 0.1.0; this gnc"
    has "reads version 2: compile the model again (gnc compile -o)"
done
expect 1 "$gnc" inspect "$lenet"; has "not a gnc plan file"
expect 1 "$gnc" inspect missing.gnc; has "missing.gnc: cannot read"
: >empty.gnc
expect 1 "$gnc" run empty.gnc --device cpu;  has "not a gnc plan file"
expect 2 "$gnc" inspect;          has "no input file"
expect 0 "$gnc" help inspect;     has "usage: gnc inspect FILE.gnc"

# what a plan cannot take
expect 2 "$gnc" run a.gnc -D batch=8;           has "option '-D' shapes a compiled program"
expect 2 "$gnc" run a.gnc --strategy data;      has "option '--strategy' shapes"
expect 2 "$gnc" train t2a.gnc --batch 32;       has "option '--batch' shapes"
expect 2 "$gnc" compile a.gnc;                  has "a.gnc is a plan, compiled already"
expect 1 "$gnc" run a.gnc --devices cpu:2 --device cpu;  has "compiled for 1 device"
expect 1 "$gnc" run t2a.gnc --device cpu;       has "t2a.gnc is a training step; train it with"
expect 1 "$gnc" train a.gnc --data tiny --device cpu;  has "is an inference program, no training step"
expect 1 "$gnc" eval t2a.gnc --weights x --data tiny --device cpu;  has "is a training step; evaluate"

# devices: the default is cuda where a GPU is present, else cpu;
# --precision and --conv choose GPU kernels, refused on the CPU
expect 1 "$gnc" train "$lenet" --data tiny --device cpu --precision bf16;  has "they need --device cuda"
expect 1 "$gnc" eval "$lenet" --weights x --data tiny --device cpu --conv igemm;  has "they need --device cuda"
expect 2 "$gnc" train a.gnc --data tiny --precision bf16;  has "--precision"
# cuda where the driver cannot load (GNC_CUDA_LIBDIR names no folder, even on a
# machine with a GPU): the GPU executor's message, status 1, nothing written;
# a build without the toolkit refuses the device (GNC_TEST_CUDA_RUNTIME, set by
# tests/CMakeLists.txt)
if [ "${GNC_TEST_CUDA_RUNTIME:-ON}" = ON ]; then
    nocuda="no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
else
    nocuda="this build of gnc has no CUDA runtime (built without the CUDA toolkit)"
fi
X=(env GNC_CUDA_LIBDIR=/nonexistent-gnc "$gnc")
rm -rf cudaout
expect 1 "${X[@]}" run a.gnc --device cuda -o cudaout;      has "$nocuda"
expect 1 "${X[@]}" run "$lenet" --device cuda -o cudaout;   has "$nocuda"
if [ ! -e cudaout ]; then ok; else bad "a failed cuda run left cudaout"; fi
expect 1 "${X[@]}" eval a.gnc --weights x --data tiny --device cuda;  has "$nocuda"
expect 1 "${X[@]}" run a.gnc --device cuda --profile
if [ "${GNC_TEST_CUDA_RUNTIME:-ON}" = ON ]; then has "--profile times the CPU executor's ops"
else has "$nocuda"; fi
# gnc devices: the GPUs the driver sees, or why none
expect 1 "${X[@]}" devices;  has "$nocuda"
expect 2 "$gnc" devices --all;  has "unknown option '--all'"
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ]; then
    expect 0 env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=2 "$gnc" devices
    has "GPU 1: gnc fake GPU 1 (host memory), sm_90, 132 SMs, 80000 MiB (80000 MiB free), CUDA driver 13.0"
fi
# a plan of 2 devices on a machine of 1 GPU: refused, naming both counts,
# unless its devices may share the GPU (docs/runtime.md)
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ] && [ "$nvrtc" = ON ]; then
    F=(env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=1 GNC_FAKECUDA_UNEMULATED=skip "$gnc")
    expect 0 "$gnc" compile "$src/models/mlp.net" -D batch=4 --gpus 2 --strategy data -o two.gnc
    rm -rf twoout
    expect 1 "${F[@]}" run two.gnc --device cuda -o twoout
    has "the program has 2 devices and this machine 1 GPU: compile it for 1, or let its devices share GPUs"
    if [ ! -e twoout ]; then ok; else bad "a refused run left twoout"; fi
    expect 0 "${F[@]}" run two.gnc --device cuda --share-gpus -o twoout
    [ -d twoout ] && ok || bad "--share-gpus: no twoout"
    expect 0 env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=2 GNC_FAKECUDA_UNEMULATED=skip \
        "$gnc" run two.gnc --device cuda -o twoout
    # GPUs without peer access: copies through the host, said
    expect 0 env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=2 GNC_FAKECUDA_UNEMULATED=skip \
        GNC_FAKECUDA_NO_PEER_ACCESS=1 "$gnc" run two.gnc --device cuda -o twoout
    has "GPU 0 cannot reach GPU 1 directly (no peer access): gnc's copies between their devices go through the host"
    # an NCCL older than 2.18 has no ncclCommSplit, which the collectives of
    # a group of devices need (hybrid: two data-parallel pairs); the world's
    # alone do not
    H=(env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=4 GNC_FAKECUDA_UNEMULATED=skip
       GNC_FAKECUDA_NCCL_VERSION=21403 "$gnc" train "$lenet" --data tiny --steps 1 -D batch=8
       --device cuda)
    expect 1 "${H[@]}" --devices cpu:4 --strategy hybrid:dp=2,pp=2
    has "NCCL 2.14.3 has no ncclCommSplit (2.18 and newer have): the program needs a communicator of 2 of its 4 devices"
    expect 0 "${H[@]}" --devices cpu:2 --strategy data
    # one process over 4 GPUs through NCCL: a host thread and a CUDA graph a
    # GPU; lenet's hybrid 1F1B, whose sends cross, passes NCCL's order check
    expect 0 env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_GPUS=4 GNC_FAKECUDA_UNEMULATED=skip \
        "$gnc" train "$lenet" --data tiny --steps 3 -D batch=8 --device cuda --devices cpu:4 \
        --strategy hybrid:dp=2,pp=2
    has "4 CUDA graphs, a host thread each"
fi
expect 1 "$gnc" run a.gnc --device cpu --share-gpus;  has "--share-gpus places devices on GPUs"
expect 2 "$gnc" run a.gnc --device tpu;    has "--device needs cpu or cuda"
# --autotune times the library calls on a GPU: without one, an error and no
# plan; on the stand-in libraries (tests/fakecuda/, where the build has them)
# the plan's tuning section names each matmul and convolution
rm -f tuned.gnc
expect 1 "${X[@]}" compile "$lenet" --train --autotune -o tuned.gnc
if [ "$nvrtc" = ON ]; then has "--autotune times the library calls on a GPU"
else has "--autotune tunes the plan's CUDA kernels' library calls, and the plan has none"; fi
if [ ! -e tuned.gnc ]; then ok; else bad "a failed --autotune left tuned.gnc"; fi
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ]; then
    expect 0 env GNC_CUDA_LIBDIR="$fake" "$gnc" compile "$lenet" --train --autotune -o tuned.gnc
    expect 0 "$gnc" inspect tuned.gnc
    has "tuning "
    has "conv forward x=[256,1,28,28] w=[6,1,5,5] y=[256,6,28,28] stride 1 pad 2 f32, algorithm 1 (tuned)"
    has "gemm TN m=120 n=256 k=400 f32, tuned"
    if ! grep -q "not read by this gnc" <<<"$out"; then ok; else bad "inspect skips the tuning section"; fi
fi
# a kernel cache that cannot be written: the plan all the same, and a warning
if [ "$nvrtc" = ON ]; then
    expect 0 env GNC_CACHE_DIR=/dev/null/gnc-cache "$gnc" compile "$lenet" -D batch=4 -o nc.gnc
    has "gnc: warning: 3 compiled kernel images could not be written to the kernel cache"
    same a.gnc nc.gnc "lenet compiled without a cache it could write"
fi
# --conv auto: each convolution timed as a cuDNN call, as implicit-GEMM
# kernels and as a cuDNN call on channels-last copies, the fastest recorded
# (the tuning section's convolution lines).  On the stand-ins a kernel costs
# 0.6 ms and a library call 1 ms of their clock: igemm wins but where split k
# makes it two launches (the filter gradients); cudnn-nhwc, a call and its
# transposes (conv1's one channel and its filter need none), never.  At 2 ms
# a kernel cuDNN wins everywhere; with a cuDNN call on channels-last copies at
# 0.2 ms, kernels at 0.1 and igemm's at 2, cudnn-nhwc does.  A filter's
# channels-last copy is a shadow made once per step, by the first convolution
# that reads it: conv2's forward pays for the transposes of x, w and y and
# for the kernel that adds its bias and applies its ReLU (cuDNN's fused call
# is not documented for NHWC), its backward data for dy's and dx's only.
expect 2 "$gnc" compile "$lenet" --train --conv auto -o auto.gnc
has "--conv auto times every way of each convolution on the GPU: it needs --autotune"
expect 2 "$gnc" compile "$lenet" --train --conv fft -o auto.gnc
has "--conv needs cudnn, igemm, cudnn-nhwc or auto, got 'fft'"
expect 1 "${X[@]}" compile "$lenet" --train --conv auto --autotune -o auto.gnc
if [ "$nvrtc" = ON ]; then has "--autotune times the library calls on a GPU, and this machine has none"
else has "--autotune tunes the plan's CUDA kernels' library calls, and the plan has none"; fi
if [ ! -e auto.gnc ]; then ok; else bad "a failed --conv auto left auto.gnc"; fi
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ]; then
    F=(env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_UNEMULATED=skip GNC_FAKECUDA_LIBRARY_MS=1)
    expect 0 "${F[@]}" GNC_FAKECUDA_KERNEL_MS=0.6 "$gnc" compile "$lenet" --train --conv auto \
        --autotune -o auto.gnc
    has "conv2d             %conv1                    cudnn   1.0000  igemm   0.6000  cudnn-nhwc   2.2000 ms  -> igemm"
    has "conv2d_grad_weight %conv1.weight.grad        cudnn   1.0000  igemm   1.2000  cudnn-nhwc   1.6000 ms  -> cudnn"
    has "convolutions (--conv auto, timed on this GPU): 2 by cuDNN, 3 by igemm, 0 by cuDNN on channels-last copies"
    expect 0 "$gnc" inspect auto.gnc
    has "conv: auto"
    has "convolutions each timed: 2 by cudnn, 3 by igemm, 0 by cudnn-nhwc"
    has "conv backward_filter x=[256,1,28,28] w=[6,1,5,5] y=[256,6,28,28] stride 1 pad 2 f32, algorithm 1 (tuned)"
    has "kernel conv2d_igemm"
    expect 0 "${F[@]}" GNC_FAKECUDA_KERNEL_MS=2 "$gnc" compile "$lenet" --train --conv auto \
        --autotune -o auto.gnc
    has "convolutions (--conv auto, timed on this GPU): 5 by cuDNN, 0 by igemm, 0 by cuDNN on channels-last copies"
    expect 0 "$gnc" inspect auto.gnc
    has "convolutions each timed: 5 by cudnn, 0 by igemm, 0 by cudnn-nhwc"
    if ! grep -q " kernel conv2d.*igemm" <<<"$out"; then ok; else bad "cuDNN chosen everywhere, yet igemm kernels"; fi
    if ! grep -q "transpose" <<<"$out"; then ok; else bad "cuDNN chosen everywhere, yet transposes"; fi
    expect 0 "${F[@]}" GNC_FAKECUDA_KERNEL_MS=0.1 GNC_FAKECUDA_IGEMM_MS=2 GNC_FAKECUDA_NHWC_MS=0.2 \
        "$gnc" compile "$lenet" --train --conv auto --autotune -o auto.gnc
    has "conv2d             %conv2                    cudnn   1.0000  igemm   2.0000  cudnn-nhwc   0.6000 ms  -> cudnn-nhwc"
    has "conv2d_grad_input  %avgpool2d0.grad          cudnn   1.0000  igemm   2.0000  cudnn-nhwc   0.4000 ms  -> cudnn-nhwc"
    has "conv2d_grad_weight %conv1.weight.grad        cudnn   1.0000  igemm   4.0000  cudnn-nhwc   0.3000 ms  -> cudnn-nhwc"
    has "convolutions (--conv auto, timed on this GPU): 0 by cuDNN, 0 by igemm, 5 by cuDNN on channels-last copies"
    expect 0 "$gnc" inspect auto.gnc
    has "convolutions each timed: 0 by cudnn, 0 by igemm, 5 by cudnn-nhwc"
    has "conv backward_data x=[256,6,14,14] w=[16,6,5,5] y=[256,16,10,10] stride 1 pad 0 f32 channels-last, algorithm 1 (tuned)"
    has "kernel transpose_f32_to_f32_2 grid 7x1x256 block 32x8x1 smem 0, 2 args   # conv2d+relu %relu1: x channels-last"
    n=$(grep -c "# %conv2.weight channels-last as f32$" <<<"$out")
    [ "$n" = 1 ] && ok || bad "conv2's filter made channels-last $n times in a step, not once"
    grep -q ": w channels-last" <<<"$out" && bad "a convolution copied its filter itself" || ok
    grep -qF "convolution conv2 cudnn-nhwc" auto.gnc && ok || bad "no 'convolution conv2 cudnn-nhwc' in the plan's tuning"
fi
expect 0 "$gnc" run a.gnc --seed 5
if [ "$(strip "$out")" = "$lenet_out" ]; then ok; else bad "the default device (cpu) ran otherwise"; fi

# CUDA graphs: the first run step by step, the next captured.  On the
# stand-ins, a capture the driver refuses (GNC_FAKECUDA_GRAPHS) warns once and
# the runs go on step by step; --eager and GNC_CUDA_EAGER=1 never capture;
# GNC_CUDA_EAGER's other values are refused, and so is --eager on the CPU
expect 1 "$gnc" run a.gnc --eager --device cpu
has "--eager launches CUDA step by step: it needs --device cuda"
if [ -n "$fake" ] && [ -e "$fake/libcuda.so.1" ] && [ "$nvrtc" = ON ]; then
    G=(env GNC_CUDA_LIBDIR="$fake" GNC_FAKECUDA_UNEMULATED=skip)
    expect 0 "$gnc" compile "$mlp" --train -D batch=8 -o graphs.gnc
    expect 0 "${G[@]}" GNC_FAKECUDA_GRAPHS=invalidate "$gnc" train graphs.gnc --data tiny \
        --steps 3 --device cuda
    n=$(grep -c "^gnc: warning: capturing the run into a CUDA graph failed" <<<"$out")
    [ "$n" = 1 ] && ok || bad "a refused capture warned $n times, not once"
    has "running step by step from now on"
    expect 0 "${G[@]}" GNC_FAKECUDA_GRAPHS=noinstantiate "$gnc" run a.gnc --device cuda --repeat 3
    has "gnc: warning: instantiating the run's CUDA graph failed: operation not supported"
    expect 0 "${G[@]}" GNC_FAKECUDA_GRAPHS=invalidate "$gnc" train graphs.gnc --data tiny \
        --steps 3 --device cuda --eager
    grep -q "warning" <<<"$out" && bad "--eager tried a CUDA graph" || ok
    expect 0 "${G[@]}" GNC_FAKECUDA_GRAPHS=invalidate GNC_CUDA_EAGER=1 "$gnc" run a.gnc \
        --device cuda --repeat 3
    grep -q "warning" <<<"$out" && bad "GNC_CUDA_EAGER=1 tried a CUDA graph" || ok
    expect 1 "${G[@]}" GNC_CUDA_EAGER=yes "$gnc" run a.gnc --device cuda
    has "GNC_CUDA_EAGER must be 0 or 1, not 'yes'"
    # --profile=FILE on cuda: each step between CUDA events, launched step by
    # step (no capture tried); the stand-ins' kernels and library calls take
    # 0.5 ms of their clock each, so every step lasts a multiple of it, and
    # both runs time the same steps in order
    P=("${G[@]}" GNC_FAKECUDA_GRAPHS=invalidate GNC_FAKECUDA_KERNEL_MS=0.5
       GNC_FAKECUDA_LIBRARY_MS=0.5)
    expect 0 "${P[@]}" "$gnc" run a.gnc --device cuda --repeat 2 --profile=gpu.json
    grep -q "warning" <<<"$out" && bad "--profile=FILE on cuda tried a CUDA graph" || ok
    expect 0 python3 "$src/tests/cli/pictures.py" trace gpu.json 1 measured
    expect 0 python3 -c "
import json, sys
x = [e for e in json.load(open('gpu.json'))['traceEvents'] if e['ph'] == 'X']
x.sort(key=lambda e: e['ts'])
h = len(x) // 2
ok = (x and len(x) % 2 == 0 and [e['name'] for e in x[:h]] == [e['name'] for e in x[h:]]
      and any(e['dur'] > 0 for e in x)
      and all(abs(e['dur'] / 500 - round(e['dur'] / 500)) < 1e-3 for e in x))
sys.exit(0 if ok else 1)"
    expect 0 "${P[@]}" "$gnc" train graphs.gnc --data tiny --steps 2 --device cuda \
        --profile=gpu-train.json
    expect 0 python3 "$src/tests/cli/pictures.py" trace gpu-train.json 1 measured
    expect 1 "${G[@]}" "$gnc" run a.gnc --device cuda --profile
    has "or write the GPU's steps with --profile=FILE.json"
fi

# training from a plan: the same bits as from the model, resume included
R=(--data tiny --epochs 2 --lr 0.05 --seed 7 --device cpu)
expect 0 "$gnc" train "$lenet" --batch 64 --momentum 0.9 --devices cpu:2 --strategy data "${R[@]}" \
    --checkpoint model.st
expect 0 "$gnc" train t2a.gnc "${R[@]}" --checkpoint plan.st --log plan.csv
has "on 2 virtual devices: data (as compiled into t2a.gnc)"
has "epoch 2: train loss"
has "no test: a plan holds the training step alone"
if cmp -s <(tensors model.st) <(tensors plan.st); then ok; else bad "training from the plan and from the model differ"; fi
if [ "$(cut -d, -f1,2,4 plan.csv | tail -1)" = "2,8,nan" ]; then ok; else bad "plan.csv: $(cat plan.csv)"; fi
expect 1 "${X[@]}" train t2a.gnc "${R[@]}" --device cuda --checkpoint cuda.st --log cuda.csv
has "$nocuda"
if [ ! -e cuda.st ] && [ ! -e cuda.csv ]; then ok; else bad "a failed cuda training left files"; fi
expect 0 "$gnc" train t2a.gnc "${R[@]}" --epochs 1 --checkpoint resumed.st
expect 0 "$gnc" train t2a.gnc "${R[@]}" --resume resumed.st --checkpoint resumed.st
has "resuming resumed.st at step 4"
same plan.st resumed.st "a plan's training resumed at an epoch end"
# an inference plan evaluates the checkpoint as the model does
expect 0 "$gnc" eval "$lenet" --weights plan.st --data tiny --batch 100
want=$out
expect 0 "$gnc" compile "$lenet" -D batch=100 -o eval.gnc
expect 0 "$gnc" eval eval.gnc --weights plan.st --data tiny --device cpu
if [ "$want" = "$out" ]; then ok; else bad "eval of a plan: $out, of the model: $want"; fi
# a plan with weights to start from: inspect shows the section as read
expect 0 "$gnc" compile "$lenet" -D batch=100 --weights plan.st --no-kernels -o weighted.gnc
expect 0 "$gnc" inspect weighted.gnc
has "weights"
if ! grep -q "not read by this gnc" <<<"$out"; then ok; else bad "inspect: the weights section 'not read'"; fi

# the fuzzer's seeds (tests/fuzz/plans/) are plans this gnc reads
for f in "$src"/tests/fuzz/plans/*.gnc; do
    expect 0 "$gnc" inspect "$f"
done
summary plan-cli
