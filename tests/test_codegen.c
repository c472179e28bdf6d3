/* Codegen's kernels against the CPU executor, on the host: the generated CUDA
 * C compiled by the host C++ compiler through tests/cg_emu.h, library calls by
 * reference implementations (tests/cg_host.c).  No GPU and no CUDA toolkit
 * needed.
 *
 *   1. every op of ir/ops.def but the communication ones (section 3 has
 *      those): a graph of the op over graph inputs (IR text below), fp32;
 *      the elementwise ops and reductions also at bf16 and fp16, between two
 *      other kernels so that they read and write 16-bit activations;
 *   2. every kind of fused node (a library call with its epilogue, map
 *      chains, reductions with prologues and epilogues): small graphs
 *      through the fuse pass;
 *   3. whole programs: lenet and mlp, inference and one training step (SGD
 *      with momentum, mlp's dropout masks), fp32, on one device and on two
 *      (data parallel: all_reduce buckets, slices, all_gather), plus tf32;
 *   4. the program's state: an out-of-range label and embedding index are
 *      reported with their step, position and value; fp16 loss scaling
 *      counts a good step, and after an overflowing one skips the update
 *      and halves the scale;
 *   5. what is generated, not run: every kernel family on tensors of 2^31
 *      elements indexes in i64 (the small cases of 1 in int), a grid CUDA
 *      cannot launch is refused, cuDNN's fused call comes only where it is
 *      documented (elsewhere a kernel after the plain call, checked on
 *      every convolution run too), and the cuBLASLt workspace per target;
 *   6. the emulation's alignment checks (tests/cg_emu.h): a misaligned
 *      ldv<4>/stv<4> (float4, and 4 16-bit values) and a misaligned WMMA
 *      load_matrix_sync/store_matrix_sync pointer or ldm each fail their
 *      kernel, naming the access; the aligned ones run.
 * Inputs and weights are seeded random values, the same for both; every
 * output, the loss and every updated weight must satisfy
 *   |got - ref| <= atol + rtol |ref|
 * per case; a failure names the case, the value and its first mismatches.
 *
 *   test_codegen SOURCE_DIR WORK_DIR [-v] [--gpu [--fake DIR]] [--only TEXT]
 *
 * --gpu runs the cases of 1 to 3 on the GPU executor instead (on a GPU, or on
 * the stand-ins of --fake DIR; tools/gpu_check.sh's step 3), against the same
 * references within the same tolerances; --only runs the cases whose names
 * hold TEXT.  Without a GPU, --gpu exits 77 (skipped). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_host.h"
#include "op_walk.h"
#include "gpu_env.h"
#include "codegen.h"
#include "exec.h"
#include "frontend.h"
#include "passes.h"

static int npassed, nfailed, verbose;
static const char *workdir;

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", what);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    nfailed++;
}

/* ---------------------------------------------------------------- cases */

typedef struct {
    const char *name;
    const char *ir;
    double atol, rtol;
    int fuse;                   /* through the fuse pass */
    int lowp;                   /* also at bf16 and fp16, between two kernels */
} op_case;

#define G(body) "graph t {\n" body "}\n"
#define EL(op, shape) G("  input %x: f32" shape "\n  %y: f32" shape " = " op "(%x)\n  output y = %y\n")
/* the same on an operand in [0.5, 1.5) (fill: a name pos_*), for log, sqrt, rsqrt */
#define ELP(op, shape) \
    G("  input %pos_x: f32" shape "\n  %y: f32" shape " = " op "(%pos_x)\n  output y = %y\n")
/* a unary op's gradient of dy and V (y or x; pos_* for one in [0.5, 1.5)) */
#define GR(op, v) \
    G("  input %dy: f32[3, 37]\n  input %" v ": f32[3, 37]\n  %y: f32[3, 37] = " op "(%dy, %" v \
      ")\n  output y = %y\n")

/* cross_entropy's attributes as the frontend sets them by default */
#define CE " {label_smoothing = 0.0, ignore_index = -100, split = 1}"

static const op_case cases[] = {
    /* elementwise: an odd element count (one element a thread) and a multiple of 4 (float4) */
    {"neg", EL("neg", "[3, 37]"), 0, 0, 0, 1},
    {"relu", EL("relu", "[4, 64]"), 0, 0, 0, 1},
    /* an input named nan_* holds a NaN every 5 elements: it stays NaN, as PyTorch's */
    {"relu of NaN", G("  input %nan_x: f32[3, 37]\n  %y: f32[3, 37] = relu(%nan_x)\n  output y = %y\n"),
     0, 0, 0, 1},
    {"sigmoid", EL("sigmoid", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"tanh", EL("tanh", "[4, 64]"), 1e-6, 1e-5, 0, 1},
    {"gelu", EL("gelu", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"silu", EL("silu", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"exp", EL("exp", "[4, 64]"), 1e-6, 1e-5, 0, 1},
    {"log", ELP("log", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"sqrt", ELP("sqrt", "[4, 64]"), 1e-6, 1e-5, 0, 1},
    {"rsqrt", ELP("rsqrt", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"abs", EL("abs", "[3, 37]"), 0, 0, 0, 1},
    {"softplus", EL("softplus", "[4, 64]"), 1e-6, 1e-5, 0, 1},
    {"hardswish", EL("hardswish", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"softsign", EL("softsign", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"leaky_relu", G("  input %x: f32[4, 64]\n  %y: f32[4, 64] = leaky_relu(%x) {slope = 0.2}\n"
                     "  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"elu", G("  input %x: f32[3, 37]\n  %y: f32[3, 37] = elu(%x) {alpha = 0.7}\n"
              "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"gelu_tanh", EL("gelu_tanh", "[3, 37]"), 1e-6, 1e-5, 0, 1},
    {"pow", G("  input %pos_x: f32[4, 64]\n  %y: f32[4, 64] = pow(%pos_x) {p = -1.5}\n"
              "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"pow of negatives", G("  input %x: f32[3, 37]\n  %y: f32[3, 37] = pow(%x) {p = 3.0}\n"
                           "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    /* tie_*: halves in [-1, 1] and NaNs, so clamp's bounds and ties are met */
    {"clamp", G("  input %tie_x: f32[3, 37]\n  %y: f32[3, 37] = clamp(%tie_x) {min = -0.5, "
                "max = 0.5}\n  output y = %y\n"), 0, 0, 0, 1},
    {"clamp one bound", G("  input %x: f32[4, 64]\n  %y: f32[4, 64] = clamp(%x) {min = -inf, "
                          "max = 0.25}\n  output y = %y\n"), 0, 0, 0, 1},
    {"dropout", G("  input %x: f32[4, 64]\n  %y: f32[4, 64] = dropout(%x) {p = 0.5}\n  output y = %y\n"),
     0, 0, 0, 1},
    {"add", G("  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n  %y: f32[3, 37] = add(%a, %b)\n"
              "  output y = %y\n"), 0, 1e-7, 0, 1},
    {"sub broadcast row", G("  input %a: f32[3, 37]\n  input %b: f32[37]\n"
                            "  %y: f32[3, 37] = sub(%a, %b)\n  output y = %y\n"), 0, 1e-7, 0, 1},
    {"mul broadcast column", G("  input %a: f32[4, 64]\n  input %b: f32[4, 1]\n"
                               "  %y: f32[4, 64] = mul(%a, %b)\n  output y = %y\n"), 0, 1e-7, 0, 1},
    {"div scalar", G("  input %a: f32[3, 37]\n  input %pos_b: f32[]\n"
                     "  %y: f32[3, 37] = div(%a, %pos_b)\n  output y = %y\n"), 0, 1e-6, 0, 1},
    {"add two broadcasts", G("  input %a: f32[2, 3, 1, 5]\n  input %b: f32[3, 4, 5]\n"
                             "  %y: f32[2, 3, 4, 5] = add(%a, %b)\n  output y = %y\n"), 0, 1e-7, 0, 1},
    {"maximum", G("  input %tie_a: f32[3, 37]\n  input %tie_b: f32[3, 37]\n"
                  "  %y: f32[3, 37] = maximum(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"minimum broadcast", G("  input %tie_a: f32[4, 64]\n  input %tie_b: f32[64]\n"
                            "  %y: f32[4, 64] = minimum(%tie_a, %tie_b)\n  output y = %y\n"),
     0, 0, 0, 1},
    {"gt", G("  input %tie_a: f32[3, 37]\n  input %tie_b: f32[3, 37]\n"
             "  %y: f32[3, 37] = gt(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"lt scalar", G("  input %tie_a: f32[4, 64]\n  input %tie_b: f32[]\n"
                    "  %y: f32[4, 64] = lt(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"ge", G("  input %tie_a: f32[3, 37]\n  input %tie_b: f32[3, 1]\n"
             "  %y: f32[3, 37] = ge(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"le", G("  input %tie_a: f32[4, 64]\n  input %tie_b: f32[4, 64]\n"
             "  %y: f32[4, 64] = le(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"eq", G("  input %tie_a: f32[3, 37]\n  input %tie_b: f32[3, 37]\n"
             "  %y: f32[3, 37] = eq(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"ne", G("  input %tie_a: f32[2, 3, 1, 5]\n  input %tie_b: f32[3, 4, 5]\n"
             "  %y: f32[2, 3, 4, 5] = ne(%tie_a, %tie_b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"where", G("  input %tie_c: f32[3, 37]\n  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n"
                "  %y: f32[3, 37] = where(%tie_c, %a, %b)\n  output y = %y\n"), 0, 0, 0, 1},
    {"where broadcast", G("  input %tie_c: f32[4, 1]\n  input %a: f32[64]\n  input %b: f32[]\n"
                          "  %y: f32[4, 64] = where(%tie_c, %a, %b)\n  output y = %y\n"), 0, 0, 0, 1},
    /* a scan along the axis per element; tie_* lines hold ties (the first counts) and NaNs */
    {"reduce_max rows", G("  input %tie_x: f32[3, 37]\n  %y: f32[3, 1] = reduce_max(%tie_x) "
                          "{axis = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"reduce_min middle", G("  input %tie_x: f32[2, 5, 8]\n  %y: f32[2, 1, 8] = reduce_min(%tie_x) "
                            "{axis = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"argmax", G("  input %tie_x: f32[4, 64]\n  %y: i32[1, 64] = argmax(%tie_x) {axis = 0}\n"
                 "  output y = %y\n"), 0, 0, 0, 0},
    {"argmax rows", G("  input %tie_x: f32[3, 37]\n  %y: i32[3, 1] = argmax(%tie_x) {axis = 1}\n"
                      "  output y = %y\n"), 0, 0, 0, 0},
    {"const", G("  input %x: f32[3, 4]\n  %c: f32[3, 4] = const() {value = 0.5}\n"
                "  %s: f32[] = const() {value = 2.5}\n  %y: f32[3, 4] = mul(%x, %s)\n"
                "  output c = %c\n  output y = %y\n"), 0, 1e-7, 0, 0},
    /* linear algebra: cuBLASLt */
    {"matmul", G("  input %a: f32[2, 3, 5]\n  input %b: f32[5, 4]\n"
                 "  %y: f32[2, 3, 4] = matmul(%a, %b)\n  output y = %y\n"), 1e-6, 1e-5, 0, 0},
    {"matmul broadcast batch", G("  input %a: f32[2, 3, 4, 5]\n  input %b: f32[2, 1, 5, 6]\n"
                                 "  %y: f32[2, 3, 4, 6] = matmul(%a, %b)\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"dense", G("  input %x: f32[2, 3, 7]\n  input %w: f32[5, 7]\n  input %b: f32[5]\n"
                "  %y: f32[2, 3, 5] = dense(%x, %w, %b)\n  output y = %y\n"), 1e-6, 1e-5, 0, 0},
    {"dense without bias", G("  input %x: f32[6, 7]\n  input %w: f32[5, 7]\n"
                             "  %y: f32[6, 5] = dense(%x, %w)\n  output y = %y\n"), 1e-6, 1e-5, 0, 0},
    /* convolutions: cuDNN */
    {"conv2d stride pad", G("  input %x: f32[2, 4, 9, 9]\n  input %w: f32[6, 4, 3, 3]\n  input %b: f32[6]\n"
                            "  %y: f32[2, 6, 5, 5] = conv2d(%x, %w, %b) {stride = [2, 2], pad = [1, 1], "
                            "dilation = [1, 1], groups = 1}\n  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    {"conv2d groups dilation", G("  input %x: f32[2, 4, 8, 8]\n  input %w: f32[6, 2, 3, 3]\n"
                                 "  %y: f32[2, 6, 8, 8] = conv2d(%x, %w) {stride = [1, 1], pad = [2, 2], "
                                 "dilation = [2, 2], groups = 2}\n  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    /* normalization, softmax */
    {"batchnorm", G("  input %x: f32[2, 3, 4, 5]\n  input %w: f32[3]\n  input %b: f32[3]\n"
                    "  input %m: f32[3]\n  input %pos_var: f32[3]\n"
                    "  %y: f32[2, 3, 4, 5] = batchnorm(%x, %w, %b, %m, %pos_var) {eps = 1e-05, momentum = 0.1}\n"
                    "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"layernorm over 2 dims", G("  input %x: f32[3, 4, 6]\n  input %w: f32[4, 6]\n  input %b: f32[4, 6]\n"
                                "  %y: f32[3, 4, 6] = layernorm(%x, %w, %b) {eps = 1e-05}\n"
                                "  output y = %y\n"), 1e-5, 1e-5, 0, 1},
    {"layernorm long rows", G("  input %x: f32[2, 1500]\n  input %w: f32[1500]\n  input %b: f32[1500]\n"
                              "  %y: f32[2, 1500] = layernorm(%x, %w, %b) {eps = 1e-05}\n"
                              "  output y = %y\n"), 1e-5, 1e-5, 0, 1},
    {"softmax columns", G("  input %x: f32[3, 5, 4]\n  %y: f32[3, 5, 4] = softmax(%x) {axis = 1}\n"
                          "  output y = %y\n"), 1e-7, 1e-5, 0, 1},
    {"softmax rows", G("  input %x: f32[3, 5, 40]\n  %y: f32[3, 5, 40] = softmax(%x) {axis = 2}\n"
                       "  output y = %y\n"), 1e-7, 1e-5, 0, 1},
    {"softmax long rows", G("  input %x: f32[300, 1100]\n  %y: f32[300, 1100] = softmax(%x) {axis = 1}\n"
                            "  output y = %y\n"), 1e-8, 1e-5, 0, 0},
    {"softmax long rows in parts", G("  input %x: f32[2, 3000]\n  %y: f32[2, 3000] = softmax(%x) "
                                     "{axis = 1}\n  output y = %y\n"), 1e-8, 1e-5, 0, 1},
    {"log_softmax long rows in parts", G("  input %x: f32[3, 5000]\n  %y: f32[3, 5000] = "
                                         "log_softmax(%x) {axis = 1}\n  output y = %y\n"),
     1e-5, 1e-5, 0, 1},
    {"log_softmax columns", G("  input %x: f32[3, 5, 4]\n  %y: f32[3, 5, 4] = log_softmax(%x) {axis = 1}\n"
                              "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"log_softmax rows", G("  input %x: f32[6, 10]\n  %y: f32[6, 10] = log_softmax(%x) {axis = 1}\n"
                           "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    /* pooling */
    {"maxpool2d", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = maxpool2d(%x) {kernel = [3, 3], "
                    "stride = [2, 2], pad = [1, 1], dilation = [1, 1], ceil_mode = 0}\n  output y = %y\n"), 0, 0, 0, 1},
    /* pooling then global average pooling: the pooled tensor is the
       program's own (a channels-last run's, section 2c), not an output
       computed in place */
    {"maxpool2d then global_avgpool",
     G("  input %x: f32[2, 3, 9, 9]\n  %p: f32[2, 3, 5, 5] = maxpool2d(%x) {kernel = [3, 3], "
       "stride = [2, 2], pad = [1, 1], dilation = [1, 1], ceil_mode = 0}\n"
       "  %y: f32[2, 3, 1, 1] = global_avgpool(%p)\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"avgpool2d then global_avgpool",
     G("  input %x: f32[2, 3, 9, 9]\n  %p: f32[2, 3, 5, 5] = avgpool2d(%x) {kernel = [3, 3], "
       "stride = [2, 2], pad = [1, 1], count_include_pad = 0, ceil_mode = 0}\n"
       "  %y: f32[2, 3, 1, 1] = global_avgpool(%p)\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"maxpool2d_grad then global_avgpool",
     G("  input %dy: f32[2, 3, 5, 5]\n  input %x: f32[2, 3, 9, 9]\n"
       "  %p: f32[2, 3, 9, 9] = maxpool2d_grad(%dy, %x) {kernel = [3, 3], stride = [2, 2], "
       "pad = [1, 1], dilation = [1, 1], ceil_mode = 0}\n"
       "  %y: f32[2, 3, 1, 1] = global_avgpool(%p)\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"maxpool2d dilation", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 7, 7] = maxpool2d(%x) "
                             "{kernel = [2, 2], stride = [1, 1], pad = [0, 0], dilation = [2, 2], ceil_mode = 0}\n"
                             "  output y = %y\n"), 0, 0, 0, 0},
    {"avgpool2d tiles", G("  input %x: f32[2, 3, 8, 8]\n  %y: f32[2, 3, 4, 4] = avgpool2d(%x) {kernel = [2, 2], "
                          "stride = [2, 2], pad = [0, 0], count_include_pad = 1, ceil_mode = 0}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 1},
    {"avgpool2d padded", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = avgpool2d(%x) {kernel = [3, 3], "
                           "stride = [2, 2], pad = [1, 1], count_include_pad = 0, ceil_mode = 0}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 0},
    {"avgpool2d padded counted", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = avgpool2d(%x) "
                                   "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], count_include_pad = 1, ceil_mode = 0}\n"
                                   "  output y = %y\n"), 1e-7, 1e-6, 0, 0},
    /* ceil_mode: last windows past the input; "tiles" that do not (a clipped last one) */
    {"maxpool2d ceil", G("  input %x: f32[2, 3, 8, 8]\n  %y: f32[2, 3, 5, 5] = maxpool2d(%x) "
                         "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], dilation = [1, 1], "
                         "ceil_mode = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"avgpool2d ceil clipped tiles", G("  input %x: f32[2, 3, 9, 7]\n  %y: f32[2, 3, 5, 4] = "
                                       "avgpool2d(%x) {kernel = [2, 2], stride = [2, 2], "
                                       "pad = [0, 0], count_include_pad = 1, ceil_mode = 1}\n"
                                       "  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"avgpool2d ceil padded counted", G("  input %x: f32[2, 3, 8, 8]\n  %y: f32[2, 3, 5, 5] = "
                                        "avgpool2d(%x) {kernel = [3, 3], stride = [2, 2], "
                                        "pad = [1, 1], count_include_pad = 1, ceil_mode = 1}\n"
                                        "  output y = %y\n"), 1e-7, 1e-6, 0, 0},
    {"avgpool2d ceil padded", G("  input %x: f32[2, 3, 8, 8]\n  %y: f32[2, 3, 5, 5] = avgpool2d(%x) "
                                "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], "
                                "count_include_pad = 0, ceil_mode = 1}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 0},
    {"adaptive_avgpool2d", G("  input %x: f32[2, 3, 9, 7]\n  %y: f32[2, 3, 4, 5] = "
                             "adaptive_avgpool2d(%x) {size = [4, 5]}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 1},
    {"adaptive_avgpool2d past the input", G("  input %x: f32[2, 2, 3, 4]\n  %y: f32[2, 2, 5, 7] = "
                                            "adaptive_avgpool2d(%x) {size = [5, 7]}\n"
                                            "  output y = %y\n"), 1e-7, 1e-6, 0, 0},
    /* upsample2d: fractional nearest, its shift by 2, bilinear both ways, down */
    {"upsample2d nearest", G("  input %x: f32[2, 3, 4, 5]\n  %y: f32[2, 3, 6, 7] = upsample2d(%x) "
                             "{size = [6, 7], mode = 0, align_corners = 0, scale_h = 1.5, "
                             "scale_w = 1.5}\n  output y = %y\n"), 0, 0, 0, 1},
    {"upsample2d nearest sized", G("  input %x: f32[2, 3, 5, 7]\n  %y: f32[2, 3, 10, 4] = "
                                   "upsample2d(%x) {size = [10, 4], mode = 0, align_corners = 0, "
                                   "scale_h = 0.0, scale_w = 0.0}\n  output y = %y\n"), 0, 0, 0, 0},
    {"upsample2d bilinear", G("  input %x: f32[2, 3, 4, 5]\n  %y: f32[2, 3, 6, 7] = upsample2d(%x) "
                              "{size = [6, 7], mode = 1, align_corners = 0, scale_h = 1.5, "
                              "scale_w = 1.5}\n  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"upsample2d bilinear corners", G("  input %x: f32[2, 3, 9, 5]\n  %y: f32[2, 3, 4, 11] = "
                                      "upsample2d(%x) {size = [4, 11], mode = 1, align_corners = 1, "
                                      "scale_h = 0.0, scale_w = 0.0}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 0},
    {"global_avgpool warps", G("  input %x: f32[2, 3, 6, 6]\n  %y: f32[2, 3, 1, 1] = global_avgpool(%x)\n"
                               "  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"global_avgpool threads", G("  input %x: f32[2, 3, 4, 4]\n  %y: f32[2, 3, 1, 1] = global_avgpool(%x)\n"
                                 "  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    /* data movement */
    {"reshape", G("  input %x: f32[2, 12]\n  %y: f32[4, 6] = reshape(%x) {shape = [4, 6]}\n"
                  "  output y = %y\n"), 0, 0, 0, 0},
    {"transpose", G("  input %x: f32[2, 3, 4]\n  %y: f32[4, 2, 3] = transpose(%x) {perm = [2, 0, 1]}\n"
                    "  output y = %y\n"), 0, 0, 0, 1},
    {"concat", G("  input %a: f32[2, 3, 4]\n  input %b: f32[2, 1, 4]\n  input %c: f32[2, 2, 4]\n"
                 "  %y: f32[2, 6, 4] = concat(%a, %b, %c) {axis = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"concat i32", G("  input %a: i32[2, 3]\n  input %b: i32[2, 2]\n"
                     "  %y: i32[2, 5] = concat(%a, %b) {axis = 1}\n  output y = %y\n"), 0, 0, 0, 0},
    {"embedding", G("  input %idx: i32[3, 4]\n  input %w: f32[10, 5]\n"
                    "  %y: f32[3, 4, 5] = embedding(%idx, %w) {padding_idx = -1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"embedding i64", G("  input %idx: i64[6]\n  input %w: f32[10, 5]\n"
                        "  %y: f32[6, 5] = embedding(%idx, %w) {padding_idx = -1}\n  output y = %y\n"), 0, 0, 0, 0},
    /* rows 3 to 6 of a vocabulary of 10 split between devices: zeros for the others' ids */
    {"embedding shard", G("  input %idx: i32[3, 4]\n  input %w: f32[4, 5]\n"
                          "  %y: f32[3, 4, 5] = embedding(%idx, %w) {padding_idx = -1, shard_start = 3, "
                          "shard_of = 10}\n  output y = %y\n"), 0, 0, 0, 0},
    /* losses */
    {"cross_entropy", G("  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                        "  %y: f32[] = cross_entropy(%x, %label)" CE "\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"cross_entropy many logits in parts", G("  input %x: f32[1024, 1024]\n  input %label: i32[1024]\n"
                                             "  %y: f32[] = cross_entropy(%x, %label)" CE "\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"cross_entropy long rows in parts", G("  input %x: f32[256, 4096]\n  input %label: i64[256]\n"
                                           "  %y: f32[] = cross_entropy(%x, %label)" CE "\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    /* label smoothing; a class id ignored (labels drawn from the classes: about
       a fifth of them); logits [n, c, h, w] with their classes apart */
    {"cross_entropy smoothed, ignoring", G("  input %x: f32[6, 5]\n  input %label: i32[6]\n"
                                           "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.1, ignore_index = 2, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"cross_entropy 4-d", G("  input %x: f32[2, 5, 3, 4]\n  input %label: i64[2, 3, 4]\n"
                            "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.2, ignore_index = 1, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"cross_entropy 4-d in parts", G("  input %x: f32[2, 32, 128, 128]\n  input %label: i32[2, 128, 128]\n"
                                     "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.1, ignore_index = 3, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"nll_loss 4-d, ignoring", G("  input %x: f32[2, 5, 3, 4]\n  input %label: i64[2, 3, 4]\n"
                                 "  %y: f32[] = nll_loss(%x, %label) {ignore_index = 1, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"nll_loss in parts", G("  input %x: f32[1024, 1024]\n  input %label: i32[1024]\n"
                            "  %y: f32[] = nll_loss(%x, %label) {ignore_index = -100, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"cross_entropy i64", G("  input %x: f32[40, 3]\n  input %label: i64[40]\n"
                            "  %y: f32[] = cross_entropy(%x, %label)" CE "\n  output y = %y\n"), 1e-6, 1e-5, 0, 0},
    {"mse", G("  input %a: f32[5, 7]\n  input %b: f32[5, 7]\n  %y: f32[] = mse(%a, %b)\n  output y = %y\n"),
     1e-7, 1e-5, 0, 1},
    /* training forms */
    {"batchnorm_train", G("  input %x: f32[4, 3, 5, 5]\n  input %w: f32[3]\n  input %b: f32[3]\n"
                          "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
                          "  %y: f32[4, 3, 5, 5], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], %rv2: f32[3] = "
                          "batchnorm_train(%x, %w, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
                          "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
                          "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    /* reductions in parts (kernels.c parts_of): 7 parts a channel, the last shorter */
    {"batchnorm_train in parts", G("  input %x: f32[8, 3, 30, 30]\n  input %w: f32[3]\n  input %b: f32[3]\n"
                                   "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
                                   "  %y: f32[8, 3, 30, 30], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], "
                                   "%rv2: f32[3] = batchnorm_train(%x, %w, %b, %rm, %pos_rv) "
                                   "{eps = 1e-05, momentum = 0.1}\n"
                                   "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
                                   "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    {"batchnorm_grad in parts", G("  input %dy: f32[8, 3, 30, 30]\n  input %x: f32[8, 3, 30, 30]\n"
                                  "  input %w: f32[3]\n  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
                                  "  %dx: f32[8, 3, 30, 30], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, "
                                  "%w, %m, %pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
                                  "  output dx = %dx\n  output dw = %dw\n  output db = %db\n"), 1e-5, 1e-4, 0, 1},
    {"sum_to channels in parts", G("  input %x: f32[8, 3, 30, 30]\n"
                                   "  %y: f32[1, 3, 1, 1] = sum_to(%x) {shape = [1, 3, 1, 1]}\n"
                                   "  output y = %y\n"), 1e-4, 1e-5, 0, 1},
    {"sum_to rows in parts", G("  input %x: f32[3000, 5]\n  %y: f32[5] = sum_to(%x) {shape = [5]}\n"
                               "  output y = %y\n"), 1e-4, 1e-5, 0, 1},
    {"mse in parts", G("  input %a: f32[64, 100]\n  input %b: f32[64, 100]\n  %y: f32[] = mse(%a, %b)\n"
                       "  output y = %y\n"), 1e-7, 1e-5, 0, 1},
    /* a convolution's bias added by the batchnorm_train after it (library.c
       bias_folds): in its first pass, and in the first kernel of parts */
    {"conv2d+batchnorm_train, the bias added",
     G("  input %x: f32[2, 2, 6, 6]\n  input %w: f32[3, 2, 3, 3]\n  input %cb: f32[3]\n"
       "  input %g: f32[3]\n  input %b: f32[3]\n  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
       "  %c: f32[2, 3, 6, 6] = conv2d(%x, %w, %cb) {stride = [1, 1], pad = [1, 1], dilation = [1, 1], "
       "groups = 1}\n"
       "  %y: f32[2, 3, 6, 6], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], %rv2: f32[3] = "
       "batchnorm_train(%c, %g, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  output c = %c\n  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    {"conv2d+batchnorm_train, the bias added in parts",
     G("  input %x: f32[8, 2, 30, 30]\n  input %w: f32[3, 2, 1, 1]\n  input %cb: f32[3]\n"
       "  input %g: f32[3]\n  input %b: f32[3]\n  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
       "  %c: f32[8, 3, 30, 30] = conv2d(%x, %w, %cb) {stride = [1, 1], pad = [0, 0], dilation = [1, 1], "
       "groups = 1}\n"
       "  %y: f32[8, 3, 30, 30], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], %rv2: f32[3] = "
       "batchnorm_train(%c, %g, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  output c = %c\n  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    {"batchnorm_apply", G("  input %x: f32[4, 3, 5, 5]\n  input %w: f32[3]\n  input %b: f32[3]\n"
                          "  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
                          "  %y: f32[4, 3, 5, 5] = batchnorm_apply(%x, %w, %b, %m, %pos_invstd) "
                          "{eps = 1e-05, momentum = 0.1}\n  output y = %y\n"), 1e-6, 1e-6, 0, 1},
    {"dropout_train", G("  input %x: f32[4, 64]\n  input %train.step: i64[]\n  input %train.seed: i64[]\n"
                        "  %y: f32[4, 64], %mask: f32[4, 64] = dropout_train(%x, %train.step, %train.seed) "
                        "{p = 0.3, salt = 5, shard = []}\n  output y = %y\n  output mask = %mask\n"),
     0, 0, 0, 1},
    {"dropout_train shard", G("  input %x: f32[4, 8, 6]\n  input %train.step: i64[]\n  input %train.seed: i64[]\n"
                              "  %y: f32[4, 8, 6], %mask: f32[4, 8, 6] = dropout_train(%x, %train.step, "
                              "%train.seed) {p = 0.5, salt = 2, shard = [1, 8, 32]}\n"
                              "  output y = %y\n  output mask = %mask\n"), 0, 0, 0, 0},
    {"sum_to channels", G("  input %x: f32[4, 6, 5, 5]\n  %y: f32[1, 6, 1, 1] = sum_to(%x) {shape = [1, 6, 1, 1]}\n"
                          "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"sum_to rows", G("  input %x: f32[4, 10]\n  %y: f32[10] = sum_to(%x) {shape = [10]}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 1},
    {"sum_to long", G("  input %x: f32[4096, 3]\n  %y: f32[3] = sum_to(%x) {shape = [3]}\n  output y = %y\n"),
     1e-5, 1e-5, 0, 1},
    {"broadcast_to", G("  input %x: f32[3, 1]\n  %y: f32[2, 3, 4] = broadcast_to(%x) {shape = [2, 3, 4]}\n"
                       "  output y = %y\n"), 0, 0, 0, 1},
    /* upsample's nearest repeats, and their gradient */
    {"upsample nearest", G("  input %x: f32[2, 3, 4, 5]\n  %r: f32[2, 3, 4, 1, 5, 1] = reshape(%x) "
                           "{shape = [2, 3, 4, 1, 5, 1]}\n  %b: f32[2, 3, 4, 2, 5, 3] = "
                           "broadcast_to(%r) {shape = [2, 3, 4, 2, 5, 3]}\n  %y: f32[2, 3, 8, 15] "
                           "= reshape(%b) {shape = [2, 3, 8, 15]}\n  output y = %y\n"), 0, 0, 0, 1},
    {"upsample nearest grad", G("  input %dy: f32[2, 3, 4, 2, 5, 3]\n  %y: f32[2, 3, 4, 1, 5, 1] = "
                                "sum_to(%dy) {shape = [2, 3, 4, 1, 5, 1]}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 0},
    {"slice", G("  input %x: f32[4, 6, 3]\n  %y: f32[4, 3, 3] = slice(%x) {axis = 1, start = 2, size = 3}\n"
                "  output y = %y\n"), 0, 0, 0, 1},
    {"arange", G("  %y: f32[300] = arange() {start = -2.5, step = 0.125}\n  output y = %y\n"), 0, 0, 0, 1},
    {"arange i64", G("  %y: i64[40] = arange() {start = 5.0, step = -3.0}\n  output y = %y\n"), 0, 0, 0, 0},
    {"cast to i32", G("  input %x: f32[6, 50]\n  %s: f32[] = const() {value = 1e9}\n"
                      "  %m: f32[6, 50] = mul(%x, %s)\n  %y: i32[6, 50] = cast(%m)\n  output y = %y\n"),
     0, 0, 0, 0},
    {"cast to u8", G("  input %x: f32[6, 50]\n  %s: f32[] = const() {value = 400.0}\n"
                     "  %m: f32[6, 50] = mul(%x, %s)\n  %y: u8[6, 50] = cast(%m)\n  output y = %y\n"),
     0, 0, 0, 0},
    /* values named as the prelude's own functions and types (kb.c reserves
       every name the prelude declares): a parameter must not hide them */
    {"cast to u8 of a value named cast_u8_f",
     G("  input %transpose_tiles: f32[6, 50]\n  %IG_BM: f32[] = const() {value = 400.0}\n"
       "  %cast_u8_f: f32[6, 50] = mul(%transpose_tiles, %IG_BM)\n"
       "  %ig_elem: u8[6, 50] = cast(%cast_u8_f)\n  output y = %ig_elem\n"),
     0, 0, 0, 0},
    {"cast i64 to i32", G("  %a: i64[30] = arange() {start = 2147483000.0, step = 97.0}\n"
                          "  %y: i32[30] = cast(%a)\n  output y = %y\n"), 0, 0, 0, 0},
    {"cast i32 to f32", G("  input %x: i32[20]\n  %y: f32[20] = cast(%x)\n  output y = %y\n"),
     0, 0, 0, 1},
    {"pad", G("  input %x: f32[4, 6, 3]\n  %y: f32[5, 6, 7] = pad(%x) {before = [1, 0, 3], after = [0, 0, 1], "
              "value = -0.5}\n  output y = %y\n"), 0, 0, 0, 1},
    {"pad i64", G("  input %x: i64[3, 2]\n  %y: i64[3, 5] = pad(%x) {before = [0, 2], after = [0, 1], "
                  "value = 9.0}\n  output y = %y\n"), 0, 0, 0, 0},
    {"slice i32", G("  input %x: i32[8]\n  %y: i32[4] = slice(%x) {axis = 0, start = 4, size = 4}\n"
                    "  output y = %y\n"), 0, 0, 0, 0},
    /* gradients */
    {"relu_grad", G("  input %dy: f32[3, 37]\n  input %y0: f32[3, 37]\n"
                    "  %y: f32[3, 37] = relu_grad(%dy, %y0)\n  output y = %y\n"), 0, 0, 0, 1},
    {"relu_grad of NaN", G("  input %dy: f32[3, 37]\n  input %nan_y0: f32[3, 37]\n"
                           "  %y: f32[3, 37] = relu_grad(%dy, %nan_y0)\n  output y = %y\n"), 0, 0, 0, 1},
    {"sigmoid_grad", G("  input %dy: f32[3, 37]\n  input %y0: f32[3, 37]\n"
                       "  %y: f32[3, 37] = sigmoid_grad(%dy, %y0)\n  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"tanh_grad", G("  input %dy: f32[4, 64]\n  input %y0: f32[4, 64]\n"
                    "  %y: f32[4, 64] = tanh_grad(%dy, %y0)\n  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"gelu_grad", G("  input %dy: f32[3, 37]\n  input %x: f32[3, 37]\n"
                    "  %y: f32[3, 37] = gelu_grad(%dy, %x)\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"silu_grad", G("  input %dy: f32[3, 37]\n  input %x: f32[3, 37]\n"
                    "  %y: f32[3, 37] = silu_grad(%dy, %x)\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"exp_grad", GR("exp_grad", "y0"), 1e-7, 1e-6, 0, 1},
    {"log_grad", GR("log_grad", "pos_x"), 1e-7, 1e-6, 0, 1},
    {"sqrt_grad", GR("sqrt_grad", "pos_y0"), 1e-7, 1e-6, 0, 1},
    {"rsqrt_grad", GR("rsqrt_grad", "pos_y0"), 1e-7, 1e-6, 0, 1},
    {"abs_grad", GR("abs_grad", "x"), 0, 0, 0, 1},
    {"softplus_grad", GR("softplus_grad", "x"), 1e-6, 1e-5, 0, 1},
    {"hardswish_grad", GR("hardswish_grad", "x"), 1e-7, 1e-6, 0, 1},
    {"softsign_grad", GR("softsign_grad", "x"), 1e-7, 1e-6, 0, 1},
    {"leaky_relu_grad", G("  input %dy: f32[3, 37]\n  input %x: f32[3, 37]\n  %y: f32[3, 37] = "
                          "leaky_relu_grad(%dy, %x) {slope = 0.2}\n  output y = %y\n"),
     1e-7, 1e-6, 0, 1},
    {"elu_grad", G("  input %dy: f32[3, 37]\n  input %x: f32[3, 37]\n  %y: f32[3, 37] = "
                   "elu_grad(%dy, %x) {alpha = 0.7}\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"gelu_tanh_grad", GR("gelu_tanh_grad", "x"), 1e-6, 1e-5, 0, 1},
    {"reduce_max_grad", G("  input %dy: f32[3, 1]\n  input %tie_x: f32[3, 37]\n  %y: f32[3, 37] = "
                          "reduce_max_grad(%dy, %tie_x) {axis = 1}\n  output y = %y\n"),
     0, 0, 0, 1},
    {"reduce_min_grad", G("  input %dy: f32[2, 1, 8]\n  input %tie_x: f32[2, 5, 8]\n"
                          "  %y: f32[2, 5, 8] = reduce_min_grad(%dy, %tie_x) {axis = 1}\n"
                          "  output y = %y\n"), 0, 0, 0, 1},
    /* ties 1: dy / count to each tied extreme (the NaNs where one is NaN) */
    {"reduce_max_grad ties", G("  input %dy: f32[3, 1]\n  input %tie_x: f32[3, 37]\n"
                               "  %y: f32[3, 37] = reduce_max_grad(%dy, %tie_x) {axis = 1, "
                               "ties = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"reduce_min_grad ties", G("  input %dy: f32[2, 1, 8]\n  input %tie_x: f32[2, 5, 8]\n"
                               "  %y: f32[2, 5, 8] = reduce_min_grad(%dy, %tie_x) {axis = 1, "
                               "ties = 1}\n  output y = %y\n"), 0, 0, 0, 1},
    {"pow_grad", G("  input %dy: f32[3, 37]\n  input %pos_x: f32[3, 37]\n  %y: f32[3, 37] = "
                   "pow_grad(%dy, %pos_x) {p = 2.5}\n  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"clamp_grad", G("  input %dy: f32[3, 37]\n  input %tie_x: f32[3, 37]\n  %y: f32[3, 37] = "
                     "clamp_grad(%dy, %tie_x) {min = -0.5, max = inf}\n  output y = %y\n"),
     0, 0, 0, 1},
    {"dense_grad_input", G("  input %dy: f32[2, 3, 5]\n  input %w: f32[5, 7]\n"
                           "  %y: f32[2, 3, 7] = dense_grad_input(%dy, %w)\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"dense_grad_weight", G("  input %dy: f32[2, 3, 5]\n  input %x: f32[2, 3, 7]\n"
                            "  %y: f32[5, 7] = dense_grad_weight(%dy, %x)\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"conv2d_grad_input", G("  input %dy: f32[2, 6, 5, 5]\n  input %w: f32[6, 4, 3, 3]\n"
                            "  %y: f32[2, 4, 9, 9] = conv2d_grad_input(%dy, %w) {stride = [2, 2], pad = [1, 1], "
                            "dilation = [1, 1], groups = 1, shape = [2, 4, 9, 9]}\n  output y = %y\n"),
     1e-5, 1e-5, 0, 0},
    /* conv_transpose2d: output_padding (one row past the window's reach), dilation,
       groups, and its bias added */
    {"conv_transpose2d", G("  input %x: f32[2, 4, 5, 4]\n  input %w: f32[4, 3, 3, 3]\n  input %b: f32[6, 1, 1]\n"
                           "  %c: f32[2, 6, 12, 8] = conv2d_grad_input(%x, %w) {stride = [2, 2], pad = [1, 1], "
                           "dilation = [2, 1], groups = 2, shape = [2, 6, 12, 8]}\n"
                           "  %y: f32[2, 6, 12, 8] = add(%c, %b)\n  output y = %y\n"),
     1e-5, 1e-5, 0, 0},
    {"conv2d_grad_weight", G("  input %dy: f32[2, 6, 5, 5]\n  input %x: f32[2, 4, 9, 9]\n"
                             "  %y: f32[6, 4, 3, 3] = conv2d_grad_weight(%dy, %x) {stride = [2, 2], "
                             "pad = [1, 1], dilation = [1, 1], groups = 1, shape = [6, 4, 3, 3]}\n"
                             "  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    /* shapes for the implicit-GEMM kernels: several 64 x 64 tiles each way; a
       gradient whose k (n, p, q) is split over blocks; groups and dilation */
    {"conv2d tiles", G("  input %x: f32[2, 8, 12, 12]\n  input %w: f32[72, 8, 3, 3]\n"
                       "  %y: f32[2, 72, 12, 12] = conv2d(%x, %w) {stride = [1, 1], pad = [1, 1], "
                       "dilation = [1, 1], groups = 1}\n  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    {"conv2d_grad_weight split", G("  input %dy: f32[4, 8, 16, 16]\n  input %x: f32[4, 4, 16, 16]\n"
                                   "  %y: f32[8, 4, 3, 3] = conv2d_grad_weight(%dy, %x) {stride = [1, 1], "
                                   "pad = [1, 1], dilation = [1, 1], groups = 1, shape = [8, 4, 3, 3]}\n"
                                   "  output y = %y\n"), 1e-4, 1e-5, 0, 0},
    {"conv2d_grad_input groups dilation", G("  input %dy: f32[2, 6, 8, 8]\n  input %w: f32[6, 2, 3, 3]\n"
                                            "  %y: f32[2, 4, 8, 8] = conv2d_grad_input(%dy, %w) {stride = [1, 1], "
                                            "pad = [2, 2], dilation = [2, 2], groups = 2, shape = [2, 4, 8, 8]}\n"
                                            "  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    {"conv2d_grad_weight groups stride", G("  input %dy: f32[2, 6, 4, 4]\n  input %x: f32[2, 4, 8, 8]\n"
                                           "  %y: f32[6, 2, 3, 3] = conv2d_grad_weight(%dy, %x) {stride = [2, 2], "
                                           "pad = [1, 1], dilation = [1, 1], groups = 2, shape = [6, 2, 3, 3]}\n"
                                           "  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    {"batchnorm_grad", G("  input %dy: f32[4, 3, 5, 5]\n  input %x: f32[4, 3, 5, 5]\n  input %w: f32[3]\n"
                         "  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
                         "  %dx: f32[4, 3, 5, 5], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, %w, %m, "
                         "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
                         "  output dx = %dx\n  output dw = %dw\n  output db = %db\n"), 1e-5, 1e-5, 0, 1},
    {"layernorm_grad", G("  input %dy: f32[3, 24]\n  input %x: f32[3, 24]\n  input %w: f32[24]\n"
                         "  %dx: f32[3, 24], %dw: f32[24], %db: f32[24] = layernorm_grad(%dy, %x, %w) "
                         "{eps = 1e-05}\n  output dx = %dx\n  output dw = %dw\n  output db = %db\n"),
     1e-5, 1e-5, 0, 1},
    /* attention (codegen/attention.c): ragged tiles everywhere (l, s not multiples of a
       tile), l != s, e != ev, a batch shape of rank 2, causal with l > s and l < s, and
       each tile size (max(e, ev) up to 32, 64, 128, 256); scales that make the rows'
       softmax peaked.  fp32: a few float roundings of a sum of e products and of s terms
       apart from the CPU's order (measured: 1e-6 at most, a tenth of the tolerance).  At
       bf16 and fp16 the defaults hold: the operands' 8 (11) bits move a score by about
       2^-9 (2^-12) of |q| |k| scale e, which e^s carries into the result relatively
       (measured: 0.13 of the tolerance at most, the gradient's) */
#define ATT(name, b, l, s, e, ev, attrs) ATTK(name, b, b, l, s, e, ev, attrs)
/* the same with k and v of batch shape bk: grouped-query attention where its
   heads (dim -3) are fewer than q's */
#define ATTK(name, b, bk, l, s, e, ev, attrs)                                                 \
    {name, G("  input %q: f32[" b l ", " e "]\n  input %k: f32[" bk s ", " e "]\n"            \
             "  input %v: f32[" bk s ", " ev "]\n  %o: f32[" b l ", " ev "], %lse: f32[" b l    \
             "] = attention(%q, %k, %v) {" attrs "}\n  output o = %o\n  output lse = %lse\n"), \
     1e-5, 1e-5, 0, 1}
    ATT("attention", "2, 3, ", "37", "45", "40", "24", "causal = 0, scale = 0.3"),
    ATT("attention causal l > s", "3, ", "70", "50", "16", "20", "causal = 1, scale = 0.6"),
    ATT("attention causal l < s", "2, ", "20", "75", "8", "8", "causal = 1, scale = 0.9"),
    ATT("attention e 100", "2, ", "33", "40", "100", "72", "causal = 1, scale = 0.15"),
    ATT("attention ev 256", "1, 2, ", "19", "21", "200", "256", "causal = 0, scale = 0.1"),
    /* grouped-query attention: 4 query heads over 2 key heads, 6 over 1 (rank 3, the
       batch the heads), causal and not, ragged */
    ATTK("attention gqa 4/2", "2, 4, ", "2, 2, ", "37", "45", "40", "24", "causal = 0, scale = 0.3"),
    ATTK("attention gqa 6/1 causal", "6, ", "1, ", "70", "50", "16", "20", "causal = 1, scale = 0.6"),
    ATTK("attention gqa 6/3 e 100", "2, 6, ", "2, 3, ", "33", "40", "100", "72",
         "causal = 1, scale = 0.15"),
    /* the gradient of attention's own results (out and lse as the forward made them):
       dq, dk and dv are sums of s (dq) or l (dk, dv) terms of both signs, so an atol of
       the terms' size */
#define ATTG(name, b, l, s, e, ev, attrs) ATTGK(name, b, b, l, s, e, ev, attrs)
#define ATTGK(name, b, bk, l, s, e, ev, attrs)                                                \
    {name, G("  input %q: f32[" b l ", " e "]\n  input %k: f32[" bk s ", " e "]\n"            \
             "  input %v: f32[" bk s ", " ev "]\n  input %dy: f32[" b l ", " ev "]\n"            \
             "  %o: f32[" b l ", " ev "], %lse: f32[" b l "] = attention(%q, %k, %v) {" attrs     \
             "}\n  %dq: f32[" b l ", " e "], %dk: f32[" bk s ", " e "], %dv: f32[" bk s ", " ev \
             "] = attention_grad(%dy, %q, %k, %v, %o, %lse) {" attrs "}\n"                     \
             "  output dq = %dq\n  output dk = %dk\n  output dv = %dv\n"),                     \
     1e-5, 1e-5, 0, 1}
    ATTG("attention_grad", "2, 3, ", "37", "45", "24", "30", "causal = 0, scale = 0.35"),
    ATTG("attention_grad causal l > s", "3, ", "70", "50", "48", "40", "causal = 1, scale = 0.25"),
    ATTG("attention_grad causal l < s", "2, ", "20", "75", "8", "12", "causal = 1, scale = 0.9"),
    ATTG("attention_grad e 100", "2, ", "33", "40", "100", "72", "causal = 1, scale = 0.15"),
    ATTG("attention_grad ev 256", "1, 2, ", "19", "21", "200", "256", "causal = 0, scale = 0.1"),
    /* grouped-query attention: a key block walks each query head of its group; dk and
       dv sum 2, 6 and 3 heads' terms */
    ATTGK("attention_grad gqa 4/2 causal", "2, 4, ", "2, 2, ", "37", "45", "24", "30",
          "causal = 1, scale = 0.35"),
    ATTGK("attention_grad gqa 6/1", "6, ", "1, ", "70", "50", "48", "40",
          "causal = 0, scale = 0.25"),
    ATTGK("attention_grad gqa 6/3 l < s", "1, 6, ", "1, 3, ", "20", "75", "8", "12",
          "causal = 1, scale = 0.9"),
    {"attention_grad alone", G("  input %dy: f32[2, 9, 6]\n  input %q: f32[2, 9, 5]\n"
                               "  input %k: f32[2, 11, 5]\n  input %v: f32[2, 11, 6]\n"
                               "  input %o: f32[2, 9, 6]\n  input %lse: f32[2, 9]\n"
                               "  %dq: f32[2, 9, 5], %dk: f32[2, 11, 5], %dv: f32[2, 11, 6] = "
                               "attention_grad(%dy, %q, %k, %v, %o, %lse) {causal = 1, scale = 0.5}\n"
                               "  output dq = %dq\n  output dk = %dk\n  output dv = %dv\n"),
     1e-5, 1e-5, 0, 1},
    /* an epilogue after attention and its gradient, fused in the IR text: the fuse pass
       leaves attention alone, but its kernels store out and dq through y_put as every
       special op's do */
    {"fused attention+add", G("  input %q: f32[2, 13, 8]\n  input %k: f32[2, 17, 8]\n"
                              "  input %v: f32[2, 17, 6]\n  input %r: f32[2, 13, 6]\n"
                              "  fused {\n  %o: f32[2, 13, 6], %lse: f32[2, 13] = attention(%q, %k, %v) "
                              "{causal = 1, scale = 0.7}\n  %y: f32[2, 13, 6] = add(%o, %r)\n  }\n"
                              "  output y = %y\n  output lse = %lse\n"), 1e-5, 1e-5, 0, 1},
    {"fused attention_grad+add", G("  input %dy: f32[2, 13, 6]\n  input %q: f32[2, 13, 8]\n"
                                   "  input %k: f32[2, 17, 8]\n  input %v: f32[2, 17, 6]\n"
                                   "  input %o: f32[2, 13, 6]\n  input %lse: f32[2, 13]\n"
                                   "  input %g: f32[2, 13, 8]\n"
                                   "  fused {\n  %dq: f32[2, 13, 8], %dk: f32[2, 17, 8], %dv: f32[2, 17, 6] = "
                                   "attention_grad(%dy, %q, %k, %v, %o, %lse) {causal = 0, scale = 0.5}\n"
                                   "  %z: f32[2, 13, 8] = add(%dq, %g)\n  }\n"
                                   "  output z = %z\n  output dk = %dk\n  output dv = %dv\n"),
     1e-5, 1e-5, 0, 1},
    {"softmax_grad rows", G("  input %dy: f32[3, 5, 7]\n  input %y0: f32[3, 5, 7]\n"
                            "  %y: f32[3, 5, 7] = softmax_grad(%dy, %y0) {axis = 2}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 1},
    {"softmax_grad columns", G("  input %dy: f32[3, 5, 7]\n  input %y0: f32[3, 5, 7]\n"
                               "  %y: f32[3, 5, 7] = softmax_grad(%dy, %y0) {axis = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 0},
    {"softmax_grad long rows in parts", G("  input %dy: f32[2, 4000]\n  input %y0: f32[2, 4000]\n"
                                          "  %y: f32[2, 4000] = softmax_grad(%dy, %y0) {axis = 1}\n"
                                          "  output y = %y\n"), 1e-6, 1e-5, 0, 1},
    {"log_softmax_grad long rows in parts", G("  input %dy: f32[2, 4000]\n  input %y0: f32[2, 4000]\n"
                                              "  %y: f32[2, 4000] = log_softmax_grad(%dy, %y0) "
                                              "{axis = 1}\n  output y = %y\n"), 1e-5, 1e-5, 0, 0},
    {"log_softmax_grad", G("  input %dy: f32[6, 10]\n  input %y0: f32[6, 10]\n"
                           "  %y: f32[6, 10] = log_softmax_grad(%dy, %y0) {axis = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0, 1},
    {"maxpool2d_grad", G("  input %dy: f32[2, 3, 5, 5]\n  input %x: f32[2, 3, 9, 9]\n"
                         "  %y: f32[2, 3, 9, 9] = maxpool2d_grad(%dy, %x) {kernel = [3, 3], stride = [2, 2], "
                         "pad = [1, 1], dilation = [1, 1], ceil_mode = 0}\n  output y = %y\n"), 0, 0, 0, 1},
    {"avgpool2d_grad tiles", G("  input %dy: f32[2, 3, 4, 4]\n  %y: f32[2, 3, 8, 8] = avgpool2d_grad(%dy) "
                               "{kernel = [2, 2], stride = [2, 2], pad = [0, 0], count_include_pad = 1, ceil_mode = 0, "
                               "shape = [2, 3, 8, 8]}\n  output y = %y\n"), 0, 0, 0, 1},
    {"avgpool2d_grad padded", G("  input %dy: f32[2, 3, 5, 5]\n  %y: f32[2, 3, 9, 9] = avgpool2d_grad(%dy) "
                                "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], count_include_pad = 0, ceil_mode = 0, "
                                "shape = [2, 3, 9, 9]}\n  output y = %y\n"), 0, 0, 0, 0},
    {"maxpool2d_grad ceil", G("  input %dy: f32[2, 3, 5, 5]\n  input %x: f32[2, 3, 8, 8]\n"
                              "  %y: f32[2, 3, 8, 8] = maxpool2d_grad(%dy, %x) {kernel = [3, 3], "
                              "stride = [2, 2], pad = [1, 1], dilation = [1, 1], ceil_mode = 1}\n"
                              "  output y = %y\n"), 0, 0, 0, 1},
    {"avgpool2d_grad ceil clipped tiles", G("  input %dy: f32[2, 3, 5, 4]\n  %y: f32[2, 3, 9, 7] = "
                                            "avgpool2d_grad(%dy) {kernel = [2, 2], stride = [2, 2], "
                                            "pad = [0, 0], count_include_pad = 1, ceil_mode = 1, "
                                            "shape = [2, 3, 9, 7]}\n  output y = %y\n"),
     0, 0, 0, 1},
    {"avgpool2d_grad ceil padded counted", G("  input %dy: f32[2, 3, 5, 5]\n  %y: f32[2, 3, 8, 8] = "
                                             "avgpool2d_grad(%dy) {kernel = [3, 3], stride = [2, 2], "
                                             "pad = [1, 1], count_include_pad = 1, ceil_mode = 1, "
                                             "shape = [2, 3, 8, 8]}\n  output y = %y\n"),
     0, 0, 0, 0},
    {"adaptive_avgpool2d_grad", G("  input %dy: f32[2, 3, 4, 5]\n  %y: f32[2, 3, 9, 7] = "
                                  "adaptive_avgpool2d_grad(%dy) {shape = [2, 3, 9, 7]}\n"
                                  "  output y = %y\n"), 0, 0, 0, 1},
    {"adaptive_avgpool2d_grad past the input", G("  input %dy: f32[2, 2, 5, 7]\n"
                                                 "  %y: f32[2, 2, 3, 4] = adaptive_avgpool2d_grad(%dy) "
                                                 "{shape = [2, 2, 3, 4]}\n  output y = %y\n"),
     0, 0, 0, 0},
    {"upsample2d_grad nearest", G("  input %dy: f32[2, 3, 6, 7]\n  %y: f32[2, 3, 4, 5] = "
                                  "upsample2d_grad(%dy) {shape = [2, 3, 4, 5], mode = 0, "
                                  "align_corners = 0, scale_h = 1.5, scale_w = 1.5}\n"
                                  "  output y = %y\n"), 0, 0, 0, 1},
    {"upsample2d_grad nearest down", G("  input %dy: f32[2, 3, 3, 4]\n  %y: f32[2, 3, 5, 7] = "
                                       "upsample2d_grad(%dy) {shape = [2, 3, 5, 7], mode = 0, "
                                       "align_corners = 0, scale_h = 0.7, scale_w = 0.6}\n"
                                       "  output y = %y\n"), 0, 0, 0, 0},
    {"upsample2d_grad bilinear", G("  input %dy: f32[2, 3, 6, 7]\n  %y: f32[2, 3, 4, 5] = "
                                   "upsample2d_grad(%dy) {shape = [2, 3, 4, 5], mode = 1, "
                                   "align_corners = 0, scale_h = 1.5, scale_w = 1.5}\n"
                                   "  output y = %y\n"), 1e-7, 1e-6, 0, 1},
    {"upsample2d_grad bilinear corners", G("  input %dy: f32[2, 3, 4, 11]\n  %y: f32[2, 3, 9, 5] = "
                                           "upsample2d_grad(%dy) {shape = [2, 3, 9, 5], mode = 1, "
                                           "align_corners = 1, scale_h = 0.0, scale_w = 0.0}\n"
                                           "  output y = %y\n"), 1e-7, 1e-6, 0, 0},
    {"embedding_grad", G("  input %dy: f32[3, 4, 5]\n  input %idx: i32[3, 4]\n"
                         "  %y: f32[10, 5] = embedding_grad(%dy, %idx) {shape = [10, 5], padding_idx = -1}\n  output y = %y\n"),
     0, 0, 0, 0},
    {"embedding_grad padding_idx", G("  input %dy: f32[3, 4, 5]\n  input %idx: i32[3, 4]\n"
                                     "  %y: f32[10, 5] = embedding_grad(%dy, %idx) {shape = [10, 5], padding_idx = 3}\n  output y = %y\n"),
     0, 0, 0, 0},
    {"embedding_grad shard", G("  input %dy: f32[3, 4, 5]\n  input %idx: i32[3, 4]\n"
                               "  %y: f32[4, 5] = embedding_grad(%dy, %idx) {shape = [4, 5], padding_idx = 4, "
                               "shard_start = 3, shard_of = 10}\n  output y = %y\n"),
     0, 0, 0, 0},
    {"cross_entropy_grad", G("  input %dl: f32[]\n  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                             "  %y: f32[6, 10] = cross_entropy_grad(%dl, %x, %label)" CE "\n  output y = %y\n"),
     1e-7, 1e-5, 0, 1},
    {"cross_entropy_grad 4-d smoothed, ignoring", G("  input %dl: f32[]\n  input %x: f32[2, 5, 3, 4]\n  input %label: i32[2, 3, 4]\n"
                                                    "  %y: f32[2, 5, 3, 4] = cross_entropy_grad(%dl, %x, %label) {label_smoothing = 0.1, ignore_index = 2, split = 1}\n"
                                                    "  output y = %y\n"),
     1e-7, 1e-5, 0, 0},
    {"cross_entropy_grad long rows, apart", G("  input %dl: f32[]\n  input %x: f32[2, 1100, 3]\n  input %label: i64[2, 3]\n"
                                              "  %y: f32[2, 1100, 3] = cross_entropy_grad(%dl, %x, %label) {label_smoothing = 0.05, ignore_index = 7, split = 1}\n"
                                              "  output y = %y\n"),
     1e-7, 1e-5, 0, 0},
    {"nll_loss_grad 4-d, ignoring", G("  input %dl: f32[]\n  input %x: f32[2, 5, 3, 4]\n  input %label: i32[2, 3, 4]\n"
                                      "  %y: f32[2, 5, 3, 4] = nll_loss_grad(%dl, %x, %label) {ignore_index = 2, split = 1}\n"
                                      "  output y = %y\n"),
     1e-7, 1e-5, 0, 0},
    /* optimizers */
    {"sgd", G("  input %p: f32[3, 7]\n  input %g: f32[3, 7]\n  input %train.lr: f32[]\n"
              "  %y: f32[3, 7] = sgd(%p, %g, %train.lr) {momentum = 0.0, nesterov = 0, weight_decay = 0.0}\n"
              "  output y = %y\n"), 1e-7, 1e-6, 0, 0},
    {"sgd nesterov", G("  input %p: f32[3, 8]\n  input %g: f32[3, 8]\n  input %train.lr: f32[]\n"
                       "  input %buf: f32[3, 8]\n"
                       "  %y: f32[3, 8], %buf2: f32[3, 8] = sgd(%p, %g, %train.lr, %buf) {momentum = 0.9, "
                       "nesterov = 1, weight_decay = 0.01}\n  output y = %y\n  output buf2 = %buf2\n"),
     1e-7, 1e-6, 0, 0},
    {"adam", G("  input %p: f32[3, 7]\n  input %g: f32[3, 7]\n  input %m: f32[3, 7]\n"
               "  input %pos_v: f32[3, 7]\n  input %train.lr: f32[]\n  input %train.step: i64[]\n"
               "  %y: f32[3, 7], %m2: f32[3, 7], %v2: f32[3, 7] = adam(%p, %g, %m, %pos_v, %train.lr, "
               "%train.step) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.0, decoupled = 0}\n"
               "  output y = %y\n  output m2 = %m2\n  output v2 = %v2\n"), 1e-6, 1e-5, 0, 0},
    {"adamw", G("  input %p: f32[4, 8]\n  input %g: f32[4, 8]\n  input %m: f32[4, 8]\n"
                "  input %pos_v: f32[4, 8]\n  input %train.lr: f32[]\n  input %train.step: i64[]\n"
                "  %y: f32[4, 8], %m2: f32[4, 8], %v2: f32[4, 8] = adam(%p, %g, %m, %pos_v, %train.lr, "
                "%train.step) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.01, decoupled = 1}\n"
                "  output y = %y\n  output m2 = %m2\n  output v2 = %v2\n"), 1e-6, 1e-5, 0, 0},
    {"bn_fold_scale", G("  input %g: f32[8]\n  input %pos_var: f32[8]\n"
                        "  %y: f32[8] = bn_fold_scale(%g, %pos_var) {eps = 1e-05}\n  output y = %y\n"),
     0, 1e-6, 0, 0},

    /* ---- fused nodes (the fuse pass makes them) ---- */
    {"fused dense+relu", G("  input %x: f32[4, 7]\n  input %w: f32[5, 7]\n  input %b: f32[5]\n"
                           "  %d: f32[4, 5] = dense(%x, %w, %b)\n  %y: f32[4, 5] = relu(%d)\n"
                           "  output y = %y\n"), 1e-6, 1e-5, 1, 0},
    {"fused conv2d+add+relu", G("  input %x: f32[2, 3, 6, 6]\n  input %w: f32[4, 3, 3, 3]\n  input %b: f32[4]\n"
                                "  input %r: f32[2, 4, 6, 6]\n"
                                "  %c: f32[2, 4, 6, 6] = conv2d(%x, %w, %b) {stride = [1, 1], pad = [1, 1], "
                                "dilation = [1, 1], groups = 1}\n  %s: f32[2, 4, 6, 6] = add(%r, %c)\n"
                                "  %y: f32[2, 4, 6, 6] = relu(%s)\n  output y = %y\n"), 1e-5, 1e-5, 1, 0},
    {"fused conv2d+relu+global_avgpool", G("  input %x: f32[2, 3, 6, 6]\n  input %w: f32[4, 3, 3, 3]\n"
                                           "  %c: f32[2, 4, 6, 6] = conv2d(%x, %w) {stride = [1, 1], "
                                           "pad = [1, 1], dilation = [1, 1], groups = 1}\n"
                                           "  %r: f32[2, 4, 6, 6] = relu(%c)\n"
                                           "  %y: f32[2, 4, 1, 1] = global_avgpool(%r)\n  output y = %y\n"),
     1e-5, 1e-5, 1, 0},
    {"fused conv2d+batchnorm+sigmoid", G("  input %x: f32[2, 3, 6, 6]\n  input %w: f32[4, 3, 3, 3]\n"
                                         "  input %g: f32[4]\n  input %b: f32[4]\n  input %m: f32[4]\n"
                                         "  input %pos_v: f32[4]\n"
                                         "  %c: f32[2, 4, 6, 6] = conv2d(%x, %w) {stride = [1, 1], "
                                         "pad = [1, 1], dilation = [1, 1], groups = 1}\n"
                                         "  %n: f32[2, 4, 6, 6] = batchnorm(%c, %g, %b, %m, %pos_v) "
                                         "{eps = 1e-05, momentum = 0.1}\n"
                                         "  %y: f32[2, 4, 6, 6] = sigmoid(%n)\n  output y = %y\n"),
     1e-5, 1e-5, 1, 0},
    {"fused elementwise chain", G("  input %x: f32[4, 64]\n  input %b: f32[64]\n  input %s: f32[]\n"
                                  "  input %x2: f32[4, 64]\n  %a: f32[4, 64] = sub(%x, %b)\n"
                                  "  %c: f32[4, 64] = mul(%a, %s)\n  %d: f32[4, 64] = add(%c, %x2)\n"
                                  "  %y: f32[4, 64] = tanh(%d)\n  output y = %y\n"), 1e-6, 1e-5, 1, 1},
    {"fused dense+layernorm+gelu+dropout", G("  input %x: f32[4, 7]\n  input %w: f32[16, 7]\n  input %b: f32[16]\n"
                                             "  input %g: f32[16]\n  input %be: f32[16]\n"
                                             "  %d: f32[4, 16] = dense(%x, %w, %b)\n"
                                             "  %n: f32[4, 16] = layernorm(%d, %g, %be) {eps = 1e-05}\n"
                                             "  %e: f32[4, 16] = gelu(%n)\n"
                                             "  %y: f32[4, 16] = dropout(%e) {p = 0.1}\n  output y = %y\n"),
     1e-5, 1e-5, 1, 0},
    {"fused batchnorm_train+add+relu", G("  input %x: f32[4, 3, 5, 5]\n  input %w: f32[3]\n  input %b: f32[3]\n"
                                         "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n  input %r: f32[4, 3, 5, 5]\n"
                                         "  %n: f32[4, 3, 5, 5], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], "
                                         "%rv2: f32[3] = batchnorm_train(%x, %w, %b, %rm, %pos_rv) "
                                         "{eps = 1e-05, momentum = 0.1}\n"
                                         "  %s: f32[4, 3, 5, 5] = add(%n, %r)\n  %y: f32[4, 3, 5, 5] = relu(%s)\n"
                                         "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
                                         "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 1, 1},
    {"fused dense_grad_input+relu_grad", G("  input %dy: f32[4, 5]\n  input %w: f32[5, 7]\n  input %y0: f32[4, 7]\n"
                                           "  %g: f32[4, 7] = dense_grad_input(%dy, %w)\n"
                                           "  %y: f32[4, 7] = relu_grad(%g, %y0)\n  output y = %y\n"),
     1e-6, 1e-5, 1, 0},
    {"fused avgpool2d_grad+relu_grad", G("  input %dy: f32[2, 3, 4, 4]\n  input %y0: f32[2, 3, 8, 8]\n"
                                         "  %g: f32[2, 3, 8, 8] = avgpool2d_grad(%dy) {kernel = [2, 2], stride = [2, 2], "
                                         "pad = [0, 0], count_include_pad = 1, ceil_mode = 0, shape = [2, 3, 8, 8]}\n"
                                         "  %y: f32[2, 3, 8, 8] = relu_grad(%g, %y0)\n  output y = %y\n"),
     0, 0, 1, 1},
    {"fused broadcast_to+relu_grad", G("  input %dy: f32[2, 3, 1, 1]\n  input %y0: f32[2, 3, 4, 4]\n"
                                       "  %g: f32[2, 3, 4, 4] = broadcast_to(%dy) {shape = [2, 3, 4, 4]}\n"
                                       "  %y: f32[2, 3, 4, 4] = relu_grad(%g, %y0)\n  output y = %y\n"),
     0, 0, 1, 1},
    {"fused add+relu+layernorm+gelu", G("  input %x: f32[4, 16]\n  input %r: f32[4, 16]\n  input %g: f32[16]\n"
                                        "  input %b: f32[16]\n  %a: f32[4, 16] = add(%x, %r)\n"
                                        "  %u: f32[4, 16] = relu(%a)\n"
                                        "  %n: f32[4, 16] = layernorm(%u, %g, %b) {eps = 1e-05}\n"
                                        "  %y: f32[4, 16] = gelu(%n)\n  output y = %y\n"), 1e-5, 1e-5, 1, 1},
    {"fused softmax+mul", G("  input %x: f32[3, 10]\n  input %s: f32[3, 10]\n"
                            "  %p: f32[3, 10] = softmax(%x) {axis = 1}\n  %y: f32[3, 10] = mul(%p, %s)\n"
                            "  output y = %y\n"), 1e-7, 1e-5, 1, 1},
    {"fused add+relu+global_avgpool", G("  input %x: f32[2, 3, 6, 6]\n  input %r: f32[2, 3, 6, 6]\n"
                                        "  %a: f32[2, 3, 6, 6] = add(%x, %r)\n  %u: f32[2, 3, 6, 6] = relu(%a)\n"
                                        "  %y: f32[2, 3, 1, 1] = global_avgpool(%u)\n  output y = %y\n"),
     1e-6, 1e-5, 1, 1},
    {"fused reshape+mul", G("  input %x: f32[2, 12]\n  input %s: f32[4, 6]\n"
                            "  %r: f32[4, 6] = reshape(%x) {shape = [4, 6]}\n"
                            "  %y: f32[4, 6] = mul(%r, %s)\n  output y = %y\n"), 0, 1e-7, 1, 1},
    {"fused mul+cross_entropy", G("  input %x: f32[6, 10]\n  input %s: f32[]\n  input %label: i32[6]\n"
                                  "  %z: f32[6, 10] = mul(%x, %s)\n  %y: f32[] = cross_entropy(%z, %label)" CE "\n"
                                  "  output y = %y\n"), 1e-6, 1e-5, 1, 0},
    {"fused batchnorm_train+add+relu in parts",
     G("  input %x: f32[8, 3, 30, 30]\n  input %w: f32[3]\n  input %b: f32[3]\n"
       "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n  input %r: f32[8, 3, 30, 30]\n"
       "  %n: f32[8, 3, 30, 30], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], "
       "%rv2: f32[3] = batchnorm_train(%x, %w, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  %s: f32[8, 3, 30, 30] = add(%n, %r)\n  %y: f32[8, 3, 30, 30] = relu(%s)\n"
       "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 1, 1},
    /* 264 channels: channels-last, a tile of 128 (fp32) or 256 (16-bit)
       channels, so several tiles and a partial one, in parts; the statistics
       of x + 300 (the fused add a prologue), whose float sums about the
       thread's first element keep the variance (3e-4 of the mean square) */
    {"fused add+batchnorm_train+add+relu, 264 channels, several tiles",
     G("  input %x: f32[8, 264, 6, 6]\n  input %w: f32[264]\n  input %b: f32[264]\n"
       "  input %rm: f32[264]\n  input %pos_rv: f32[264]\n  input %r: f32[8, 264, 6, 6]\n"
       "  %k: f32[] = const() {value = 300}\n  %xk: f32[8, 264, 6, 6] = add(%x, %k)\n"
       "  %n: f32[8, 264, 6, 6], %mean: f32[264], %invstd: f32[264], %rm2: f32[264], "
       "%rv2: f32[264] = batchnorm_train(%xk, %w, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  %s: f32[8, 264, 6, 6] = add(%n, %r)\n  %y: f32[8, 264, 6, 6] = relu(%s)\n"
       "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-4, 1e-4, 1, 1},
    {"fused relu_grad+batchnorm_grad+sum_to, 264 channels, several tiles",
     G("  input %g: f32[8, 264, 6, 6]\n  input %y0: f32[8, 264, 6, 6]\n  input %x: f32[8, 264, 6, 6]\n"
       "  input %w: f32[264]\n  input %m: f32[264]\n  input %pos_invstd: f32[264]\n"
       "  %dy: f32[8, 264, 6, 6] = relu_grad(%g, %y0)\n"
       "  %dx: f32[8, 264, 6, 6], %dw: f32[264], %db: f32[264] = batchnorm_grad(%dy, %x, %w, %m, "
       "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
       "  %cb: f32[1, 264, 1, 1] = sum_to(%dx) {shape = [1, 264, 1, 1]}\n"
       "  output dx = %dx\n  output dw = %dw\n  output db = %db\n  output cb = %cb\n"),
     1e-4, 1e-4, 1, 1},
    {"fused sub+mse in parts", G("  input %a: f32[64, 100]\n  input %c: f32[64, 100]\n  input %b: f32[64, 100]\n"
                                 "  %z: f32[64, 100] = sub(%a, %c)\n  %y: f32[] = mse(%z, %b)\n"
                                 "  output y = %y\n"), 1e-7, 1e-5, 1, 0},
    /* a convolution's bias gradient (the sum_to of dx per channel) computed by
       the batchnorm_grad kernel (kernels.c bias_grad_of): in one block a
       channel, and in parts (the last part adds them); with a ReLU's gradient
       as the prologue */
    {"batchnorm_grad+sum_to, the bias gradient",
     G("  input %dy: f32[2, 3, 6, 6]\n  input %x: f32[2, 3, 6, 6]\n"
       "  input %w: f32[3]\n  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
       "  %dx: f32[2, 3, 6, 6], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, %w, %m, "
       "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
       "  %cb: f32[1, 3, 1, 1] = sum_to(%dx) {shape = [1, 3, 1, 1]}\n"
       "  output dx = %dx\n  output dw = %dw\n  output db = %db\n  output cb = %cb\n"),
     1e-5, 1e-4, 0, 1},
    {"batchnorm_grad+sum_to, the bias gradient in parts",
     G("  input %dy: f32[8, 3, 30, 30]\n  input %x: f32[8, 3, 30, 30]\n"
       "  input %w: f32[3]\n  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
       "  %dx: f32[8, 3, 30, 30], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, %w, %m, "
       "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
       "  %cb: f32[1, 3, 1, 1] = sum_to(%dx) {shape = [1, 3, 1, 1]}\n"
       "  output dx = %dx\n  output dw = %dw\n  output db = %db\n  output cb = %cb\n"),
     1e-5, 1e-4, 0, 1},
    {"fused relu_grad+batchnorm_grad+sum_to, the bias gradient in parts",
     G("  input %g: f32[8, 3, 30, 30]\n  input %y0: f32[8, 3, 30, 30]\n  input %x: f32[8, 3, 30, 30]\n"
       "  input %w: f32[3]\n  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
       "  %dy: f32[8, 3, 30, 30] = relu_grad(%g, %y0)\n"
       "  %dx: f32[8, 3, 30, 30], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, %w, %m, "
       "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
       "  %cb: f32[1, 3, 1, 1] = sum_to(%dx) {shape = [1, 3, 1, 1]}\n"
       "  output dx = %dx\n  output dw = %dw\n  output db = %db\n  output cb = %cb\n"),
     1e-5, 1e-4, 1, 1},
    /* channel-major planes of 256: 16-byte accesses at every precision (4
       floats, 8 bf16 or fp16), in parts; the statistics of x + 300 (a
       prologue), whose float sums about the thread's first element keep the
       variance */
    {"batchnorm_train in parts, 16-byte accesses",
     G("  input %x: f32[16, 3, 16, 16]\n  input %w: f32[3]\n  input %b: f32[3]\n"
       "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
       "  %y: f32[16, 3, 16, 16], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], "
       "%rv2: f32[3] = batchnorm_train(%x, %w, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    {"fused add+batchnorm_train in parts, x + 300",
     G("  input %x: f32[16, 3, 16, 16]\n  input %w: f32[3]\n  input %b: f32[3]\n"
       "  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
       "  %k: f32[] = const() {value = 300}\n  %xk: f32[16, 3, 16, 16] = add(%x, %k)\n"
       "  %y: f32[16, 3, 16, 16], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], "
       "%rv2: f32[3] = batchnorm_train(%xk, %w, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-4, 1e-4, 1, 1},
    {"conv2d+batchnorm_train, the bias added, 16-byte accesses",
     G("  input %x: f32[4, 2, 8, 8]\n  input %w: f32[3, 2, 3, 3]\n  input %cb: f32[3]\n"
       "  input %g: f32[3]\n  input %b: f32[3]\n  input %rm: f32[3]\n  input %pos_rv: f32[3]\n"
       "  %c: f32[4, 3, 8, 8] = conv2d(%x, %w, %cb) {stride = [1, 1], pad = [1, 1], dilation = [1, 1], "
       "groups = 1}\n"
       "  %y: f32[4, 3, 8, 8], %mean: f32[3], %invstd: f32[3], %rm2: f32[3], %rv2: f32[3] = "
       "batchnorm_train(%c, %g, %b, %rm, %pos_rv) {eps = 1e-05, momentum = 0.1}\n"
       "  output c = %c\n  output y = %y\n  output mean = %mean\n  output invstd = %invstd\n"
       "  output rm2 = %rm2\n  output rv2 = %rv2\n"), 1e-5, 1e-5, 0, 1},
    {"batchnorm_grad+sum_to, the bias gradient in parts, 16-byte accesses",
     G("  input %dy: f32[16, 3, 16, 16]\n  input %x: f32[16, 3, 16, 16]\n"
       "  input %w: f32[3]\n  input %m: f32[3]\n  input %pos_invstd: f32[3]\n"
       "  %dx: f32[16, 3, 16, 16], %dw: f32[3], %db: f32[3] = batchnorm_grad(%dy, %x, %w, %m, "
       "%pos_invstd) {eps = 1e-05, momentum = 0.1}\n"
       "  %cb: f32[1, 3, 1, 1] = sum_to(%dx) {shape = [1, 3, 1, 1]}\n"
       "  output dx = %dx\n  output dw = %dw\n  output db = %db\n  output cb = %cb\n"),
     1e-5, 1e-4, 0, 1},
    {"fused sub+mse", G("  input %a: f32[5, 8]\n  input %c: f32[5, 8]\n  input %b: f32[5, 8]\n"
                        "  %z: f32[5, 8] = sub(%a, %c)\n  %y: f32[] = mse(%z, %b)\n  output y = %y\n"),
     1e-7, 1e-5, 1, 0},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---------------------------------------------------------------- data */

static uint64_t rng;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static size_t value_size(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    size_t es = t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
    return (size_t)ir_type_numel(&v->type) * es;
}

/* The largest index integer input v may hold: classes, rows of an embedding. */
static int64_t index_bound(const ir_graph *g, const ir_value *v)
{
    int64_t bound = 10;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++) {
            if (n->in[i] != v)
                continue;
            if ((n->op == IR_OP_CROSS_ENTROPY || n->op == IR_OP_NLL_LOSS) && i == 1)
                bound = n->in[0]->type.dims[1];
            if ((n->op == IR_OP_CROSS_ENTROPY_GRAD || n->op == IR_OP_NLL_LOSS_GRAD) && i == 2)
                bound = n->in[1]->type.dims[1];
            if (n->op == IR_OP_EMBEDDING && i == 0)
                bound = n->in[1]->type.dims[0];
            if (n->op == IR_OP_EMBEDDING_GRAD && i == 1)
                bound = ir_attr_ints(n, "shape", NULL)[0];
            if ((n->op == IR_OP_EMBEDDING || n->op == IR_OP_EMBEDDING_GRAD) &&
                ir_attr_int(n, "shard_of"))
                bound = ir_attr_int(n, "shard_of"); /* ids of the others' rows too */
        }
    return bound;
}

/* Seeded by v's name, so that every program of a graph gets the same data. */
static void fill(const ir_graph *g, const ir_value *v, void *data, uint64_t seed)
{
    uint64_t h = seed;
    const char *name = pt_dsl_name(v->name);
    for (const char *s = name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    rng = h | 1;
    int64_t n = ir_type_numel(&v->type), bound = index_bound(g, v);
    int pos = strncmp(name, "pos_", 4) == 0 || strstr(name, "running_var") || strstr(name, "exp_avg_sq");
    int nan = strncmp(name, "nan_", 4) == 0, tie = strncmp(name, "tie_", 4) == 0;
    for (int64_t i = 0; i < n; i++)
        switch (v->type.dtype) {
        case IR_I32: ((int32_t *)data)[i] = (int32_t)(uniform() * (double)bound); break;
        case IR_I64:
            ((int64_t *)data)[i] = strcmp(name, "train.seed") == 0   ? 7
                                   : strcmp(name, "train.step") == 0 ? 3
                                                                      : (int64_t)(uniform() * (double)bound);
            break;
        case IR_U8: ((uint8_t *)data)[i] = (uint8_t)(uniform() * 256); break;
        default:
            ((float *)data)[i] = strcmp(name, "train.lr") == 0 ? 0.01f
                                 : pos                         ? (float)(0.5 + uniform())
                                 : nan && i % 5 == 0           ? NAN
                                 : tie && (i + name[4]) % 7 == 0 ? NAN /* apart per name */
                                 : tie ? (float)((int)(uniform() * 5) - 2) * 0.5f
                                                               : (float)(2 * uniform() - 1);
        }
}

/* ---------------------------------------------------------------- running */

typedef struct {
    char what[160];
    ir_graph *g;
    mp_plan *mp;
    cg_program *p;
    double atol, rtol;
    int prog;                   /* index in the host library */
    int model;                  /* weights from their initializers */
    int compile_only;           /* shapes too large to run: the host compiles its kernels */
} run;

/* Each float input x read through neg(x), each float output y written through
 * neg(y): the kernel under test reads and writes the program's activations. */
static void sandwich(ir_graph *g)
{
    for (int i = 0; i < g->ninputs; i++) {
        ir_value *x = g->inputs[i];
        if (x->type.dtype != IR_F32 || strncmp(x->name, "train.", 6) == 0)
            continue;
        ir_node *n = ir_node_new(g, IR_OP_NEG, 1, &x, 1, "in", (ir_loc){0});
        n->out[0]->type = x->type;
        ir_replace_uses(g, x, n->out[0]);
        ir_insert_before(g, g->head, n);
    }
    for (int i = 0; i < g->noutputs; i++) {
        ir_value *y = g->outputs[i].value;
        if (y->type.dtype != IR_F32 || y->type.rank == 0)
            continue;
        ir_node *n = ir_node_new(g, IR_OP_NEG, 1, &y, 1, "out", (ir_loc){0});
        n->out[0]->type = y->type;
        ir_append(g, n);
        g->outputs[i].value = n->out[0];
    }
}

/* A case's program with options o; NULL (reported) when it cannot be made. */
static run *prepare_opts(const char *what, ir_graph *g, const cg_options *o, double atol,
                         double rtol)
{
    diag d;
    diag_init(&d);
    run *r = calloc(1, sizeof *r);
    snprintf(r->what, sizeof r->what, "%s [%s%s%s%s]", what, ir_precision_name(o->precision),
             o->conv != CG_CONV_CUDNN ? ", " : "",
             o->conv != CG_CONV_CUDNN ? cg_conv_name(o->conv) : "",
             o->layout == CG_LAYOUT_NHWC ? ", channels-last" : "");
    r->g = g;
    r->atol = atol;
    r->rtol = rtol;
    char err[512];
    if (ir_verify(g, &d)) {
        diag_print(&d, stdout);
        fail(r->what, "the graph does not verify");
        goto bad;
    }
    r->mp = mp_plan_graph(g);
    if (mp_check(g, r->mp, err, sizeof err)) {
        fail(r->what, "%s", err);
        goto bad;
    }
    r->p = cg_generate(g, r->mp, o, &d);
    if (!r->p) {
        diag_print(&d, stdout);
        fail(r->what, "cg_generate failed");
        goto bad;
    }
    diag_free(&d);
    return r;
bad:
    diag_free(&d);
    mp_plan_free(r->mp);
    ir_graph_free(r->g);
    free(r);
    return NULL;
}

/* A case's program at precision prec, convolutions by conv. */
static run *prepare_conv(const char *what, ir_graph *g, ir_precision prec, cg_conv_impl conv,
                         double atol, double rtol)
{
    cg_options o = cg_options_default();
    o.precision = prec;
    o.conv = conv;
    return prepare_opts(what, g, &o, atol, rtol);
}

static run *prepare(const char *what, ir_graph *g, ir_precision prec, double atol, double rtol)
{
    return prepare_conv(what, g, prec, CG_CONV_CUDNN, atol, rtol);
}

static void run_free(run *r)
{
    if (!r)
        return;
    cg_program_free(r->p);
    mp_plan_free(r->mp);
    ir_graph_free(r->g);
    free(r);
}

/* got against ref, n floats: 1 when all are within tolerance, else 0 and the
 * first mismatches reported. */
static int compare(const char *what, const char *name, const float *got, const float *ref,
                   int64_t n, double atol, double rtol)
{
    int64_t bad = 0, first[3];
    double worst = 0, most = 0, most_ref = 0, used = 0; /* -v: the largest error, its share */
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]), tol = atol + rtol * fabs(ref[i]);
        int same_nan = isnan(got[i]) && isnan(ref[i]);
        if (e > most)
            most = e, most_ref = ref[i];
        if (tol > 0 && e / tol > used)
            used = e / tol;
        if (!(e <= tol) && !same_nan) {
            if (bad < 3)
                first[bad] = i;
            bad++;
            worst = e > worst ? e : worst;
        }
    }
    if (verbose)
        printf("  %s: %%%s: largest error %.3g (at %.3g), %.2f of its tolerance\n", what, name,
               most, most_ref, used);
    if (!bad)
        return 1;
    printf("FAIL %s: %%%s: %lld of %lld elements off (worst by %.3g):", what, name, (long long)bad,
           (long long)n, worst);
    for (int64_t k = 0; k < bad && k < 3; k++)
        printf(" [%lld] got %.9g want %.9g;", (long long)first[k], got[first[k]], ref[first[k]]);
    printf(" (atol %g, rtol %g)\n", atol, rtol);
    return 0;
}

static int compare_value(run *r, rt_exec *x, cg_host_mem *m, int d, const ir_value *v)
{
    size_t bytes = value_size(v);
    void *got = malloc(bytes ? bytes : 1);
    if (cg_host_read(r->p, m, d, v, got) != 0) {
        free(got);
        return 1; /* this device holds no copy */
    }
    const void *ref = rt_exec_data(x, v);
    int ok;
    if (ir_is_float(v->type.dtype)) {
        ok = compare(r->what, v->name, got, ref, ir_type_numel(&v->type), r->atol, r->rtol);
    } else {
        ok = memcmp(got, ref, bytes) == 0;
        if (!ok)
            printf("FAIL %s: %%%s: integers differ\n", r->what, v->name);
    }
    free(got);
    return ok;
}

/* The same run on the GPU executor (--gpu: a real GPU, or the stand-ins with
 * --fake DIR), compiled by NVRTC, launched step by step, its outputs, loss
 * and updated values against the CPU executor's within the run's tolerance
 * (the emulation's: what the host checks, a GPU must meet). */
static void check_gpu(const gpu_env *env, run *r)
{
    char err[1024];
    const ir_graph *g = r->g;
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    gpu_run *gr = NULL;
    if (!x || cg_compile(r->p, NULL, NULL, err, sizeof err) ||
        !(gr = gpu_open(env, r->p, NULL, 1, err, sizeof err))) {
        fail(r->what, "%s", err);
        rt_exec_free(x);
        return;
    }
    int ok = 1;
    for (int i = 0; i < g->ninputs && ok; i++) {
        fill(g, g->inputs[i], rt_exec_data(x, g->inputs[i]), 1);
        ok = !rt_cuda_write(gr->x, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]), err,
                            sizeof err);
    }
    if (r->model)
        rt_exec_init_params(x, 3);
    for (int i = 0; i < g->nparams && ok; i++) {
        if (!r->model)
            fill(g, g->params[i], rt_exec_data(x, g->params[i]), 2);
        rt_exec_weights_changed(x);
        ok = !rt_cuda_holds(gr->x, g->params[i]) ||
             !rt_cuda_write(gr->x, -1, g->params[i], rt_exec_data(x, g->params[i]), err,
                            sizeof err);
    }
    ok = ok && !rt_exec_run(x, err, sizeof err) && !rt_cuda_run(gr->x, err, sizeof err);
    if (!ok)
        fail(r->what, "%s", err);
    const ir_value *check_vals[1024];
    int dev[1024], n = 0;
    for (int i = 0; ok && i < g->noutputs && n < 1024; i++, n++) {
        check_vals[n] = g->outputs[i].value;
        dev[n] = check_vals[n]->kind == IR_VALUE_NODE ? check_vals[n]->def->device : 0;
    }
    if (ok && g->loss && n < 1024)
        check_vals[n] = g->loss, dev[n++] = g->loss->def->device;
    for (int i = 0; ok && i < g->nupdates && n < 1024; i++, n++)
        check_vals[n] = g->updates[i].target, dev[n] = g->updates[i].device;
    for (int i = 0; ok && i < n; i++) {
        const ir_value *v = check_vals[i];
        size_t bytes = value_size(v);
        void *got = malloc(bytes ? bytes : 1);
        if (rt_cuda_read(gr->x, dev[i], v, got, err, sizeof err)) {
            fail(r->what, "%%%s: %s", v->name, err);
            ok = 0;
        } else if (ir_is_float(v->type.dtype)) {
            ok = compare(r->what, v->name, got, rt_exec_data(x, v), ir_type_numel(&v->type),
                         r->atol, r->rtol);
        } else if (memcmp(got, rt_exec_data(x, v), bytes) != 0) {
            printf("FAIL %s: %%%s: integers differ\n", r->what, v->name);
            ok = 0;
        }
        free(got);
    }
    if (ok) {
        npassed++;
        if (verbose)
            printf("ok %s (GPU)\n", r->what);
    } else if (!ok) {
        nfailed++;
    }
    gpu_close(gr);
    rt_exec_free(x);
}

/* The program on the host against the CPU executor on the same graph. */
static void check(cg_host *h, run *r)
{
    char err[1024];
    const ir_graph *g = r->g;
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    if (!x) {
        fail(r->what, "rt_exec_new: %s", err);
        return;
    }
    cg_host_mem *m = cg_host_mem_new(r->p);
    for (int i = 0; i < g->ninputs; i++) {
        fill(g, g->inputs[i], rt_exec_data(x, g->inputs[i]), 1);
        for (int d = 0; d < r->p->ndevices; d++)
            cg_host_write(r->p, m, d, g->inputs[i], rt_exec_data(x, g->inputs[i]));
    }
    /* a model's weights from its initializers (activations of the sizes
       training sees); an op's parameters at random */
    if (r->model)
        rt_exec_init_params(x, 3);
    for (int i = 0; i < g->nparams; i++) {
        if (!r->model)
            fill(g, g->params[i], rt_exec_data(x, g->params[i]), 2);
        rt_exec_weights_changed(x);
        for (int d = 0; d < r->p->ndevices; d++)
            cg_host_write(r->p, m, d, g->params[i], rt_exec_data(x, g->params[i]));
    }
    if (r->p->loss_scale.enabled)
        for (int d = 0; d < r->p->ndevices; d++) {
            float *s = (float *)(m[d].region[CG_PARAMS] + r->p->devices[d].loss_scale.offset);
            s[0] = r->p->loss_scale.init, s[3] = 1 / r->p->loss_scale.init;
        }
    if (rt_exec_run(x, err, sizeof err)) {
        fail(r->what, "the CPU executor: %s", err);
        goto done;
    }
    if (cg_host_run(h, r->prog, r->p, m, 1, err, sizeof err) ||
        cg_host_run(h, r->prog, r->p, m, 0, err, sizeof err)) {
        fail(r->what, "%s", err);
        goto done;
    }
    int ok = 1;
    for (int i = 0; i < g->noutputs; i++) {
        const ir_value *v = g->outputs[i].value;
        int d = v->kind == IR_VALUE_NODE ? v->def->device : 0;
        ok &= compare_value(r, x, m, d, v);
    }
    if (g->loss)
        ok &= compare_value(r, x, m, g->loss->def->device, g->loss);
    for (int i = 0; i < g->nupdates; i++)
        ok &= compare_value(r, x, m, g->updates[i].device, g->updates[i].target);
    for (int d = 0; d < r->p->ndevices; d++) {
        const cg_status *st =
            (const cg_status *)(m[d].region[CG_PARAMS] + r->p->devices[d].status.offset);
        if (st->code) {
            printf("FAIL %s: device %d reports status %d at step %d\n", r->what, d, st->code,
                   st->step);
            ok = 0;
        }
    }
    if (ok) {
        npassed++;
        if (verbose)
            printf("ok %s\n", r->what);
    } else {
        nfailed++;
    }
done:
    cg_host_mem_free(r->p, m);
    rt_exec_free(x);
}

static ir_graph *parse_case(const op_case *c, int fuse, int sand)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(c->name, c->ir, strlen(c->ir), &d);
    if (!g || ir_verify(g, &d)) {
        diag_print(&d, stdout);
        fail(c->name, "the case does not parse");
        if (g)
            ir_graph_free(g);
        diag_free(&d);
        return NULL;
    }
    if (sand)
        sandwich(g);
    if (fuse && pass_fuse(g, &d) < 0) {
        fail(c->name, "the fuse pass fails");
        ir_graph_free(g);
        g = NULL;
    } else if (fuse && g) {
        int fused = 0;
        ir_for_each_node(g, n)
            fused |= n->group != 0;
        if (!fused) {
            fail(c->name, "the case has no fused node");
            ir_graph_free(g);
            g = NULL;
        }
    }
    diag_free(&d);
    return g;
}

/* lenet or mlp at batch 4: inference, or one training step; on devices devices */
static ir_graph *model(const char *src, const char *name, int train, int devices)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s.net", src, name);
    const char *dn[] = {"batch"}, *dv[] = {"4"};
    fe_options fo = {NULL, 1, dn, dv};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &fo, &d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    pt_options po = {0};
    po.devices = devices;
    po.strategy = PT_DATA;
    pm_options pm = {1, 0, NULL, NULL, stdout, devices > 1 ? &po : NULL};
    if (!g || (train && ad_training_graph(g, &opt, &d) != 0) ||
        pm_run(g, pm_default_pipeline(train, 0, devices > 1), &pm, &d) != 0) {
        diag_print(&d, stdout);
        fail(name, "does not compile");
        if (g)
            ir_graph_free(g);
        g = NULL;
    }
    diag_free(&d);
    return g;
}

/* A small ResNet (resnet18.net's blocks: convolutions with biases,
 * batchnorm, a residual add, a strided shortcut; a max-pool and global
 * average pooling) on 3-channel images: one training step of batch 4 with
 * SGD and momentum, channels-last where the program is (layout.c). */
static const char resnet_mini[] =
    "def residual(x, channels, stride = 1) {\n"
    "    y = relu(batchnorm(conv2d(x, channels, kernel = 3, stride = stride, pad = 1)))\n"
    "    y = batchnorm(conv2d(y, channels, kernel = 3, pad = 1))\n"
    "    if stride != 1 {\n"
    "        x = conv2d(x, channels, kernel = 1, stride = stride, name = \"shortcut\")\n"
    "    }\n"
    "    return relu(y + x)\n"
    "}\n"
    "model resnet_mini(batch = 4) {\n"
    "    input image: f32[batch, 3, 12, 12]\n"
    "    input label: i32[batch]\n"
    "    x = relu(batchnorm(conv2d(image, 8, kernel = 3, pad = 1, name = \"stem\")))\n"
    "    x = maxpool2d(x, 3, stride = 2, pad = 1)\n"
    "    x = residual(x, 8, name = \"block0\")\n"
    "    x = residual(x, 40, stride = 2, name = \"block1\")\n"
    "    logits = dense(flatten(global_avgpool(x)), 10, name = \"fc\")\n"
    "    output logits\n"
    "    loss cross_entropy(logits, label)\n"
    "}\n";

static ir_graph *resnet_mini_graph(int devices, pt_strategy strategy)
{
    diag d;
    diag_init(&d);
    pt_options po = {0};
    po.devices = devices;
    po.strategy = strategy;
    /* one set of running statistics (else each device keeps its own, and
       the CPU executor's one update of each is one device's) */
    po.sync_bn = strategy == PT_DATA;
    fe_options fo = {NULL, 0, NULL, NULL};
    ir_graph *g = fe_load_string("resnet_mini.net", resnet_mini, strlen(resnet_mini), &fo, &d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    pm_options pm = {1, 0, NULL, NULL, stdout, devices > 1 ? &po : NULL};
    if (!g || ad_training_graph(g, &opt, &d) != 0 ||
        pm_run(g, pm_default_pipeline(1, 0, devices > 1), &pm, &d) != 0) {
        diag_print(&d, stdout);
        fail("resnet_mini", "does not compile");
        if (g)
            ir_graph_free(g);
        g = NULL;
    }
    diag_free(&d);
    return g;
}

/* ---------------------------------------------------------------- 4. state */

/* A program whose label (or index) is out of range: the status names the
 * step, the row and the label. */
static void status_case(cg_host *h, run *r, int code, int64_t pos, int64_t bad)
{
    char err[512];
    const ir_graph *g = r->g;
    cg_host_mem *m = cg_host_mem_new(r->p);
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        void *data = calloc(1, value_size(v) + 8);
        fill(g, v, data, 1);
        if (!ir_is_float(v->type.dtype)) {
            if (v->type.dtype == IR_I32)
                ((int32_t *)data)[pos] = (int32_t)bad;
            else
                ((int64_t *)data)[pos] = bad;
        }
        cg_host_write(r->p, m, 0, v, data);
        free(data);
    }
    if (cg_host_run(h, r->prog, r->p, m, 0, err, sizeof err)) {
        fail(r->what, "%s", err);
    } else {
        const cg_status *st = (const cg_status *)(m[0].region[CG_PARAMS] + r->p->devices[0].status.offset);
        int want_step = -1;
        for (int s = 0; s < r->p->devices[0].nsteps; s++)
            if (r->p->devices[0].steps[s].kind == CG_STEP_KERNEL)
                want_step = want_step < 0 ? s : want_step;
        if (st->code != code || st->index != pos || st->value != bad || st->step != want_step)
            fail(r->what, "status %d step %d position %lld value %lld, want %d, %d, %lld, %lld",
                 st->code, st->step, (long long)st->index, (long long)st->value, code, want_step,
                 (long long)pos, (long long)bad);
        else
            npassed++;
    }
    cg_host_mem_free(r->p, m);
}

/* fp16 training: a step with the initial scale counts a good step; a step
 * whose scale makes the gradients overflow leaves every weight as it was,
 * halves the scale and starts counting again. */
static void loss_scale_case(cg_host *h, run *r)
{
    char err[512];
    const ir_graph *g = r->g;
    const cg_program *p = r->p;
    cg_host_mem *m = cg_host_mem_new(p);
    float *before = NULL, *after = NULL;
    for (int i = 0; i < g->ninputs; i++) {
        void *data = calloc(1, value_size(g->inputs[i]) + 8);
        fill(g, g->inputs[i], data, 1);
        cg_host_write(p, m, 0, g->inputs[i], data);
        free(data);
    }
    for (int i = 0; i < g->nparams; i++) {
        void *data = calloc(1, value_size(g->params[i]) + 8);
        fill(g, g->params[i], data, 2);
        cg_host_write(p, m, 0, g->params[i], data);
        free(data);
    }
    float *sc = (float *)(m[0].region[CG_PARAMS] + p->devices[0].loss_scale.offset);
    int32_t *si = (int32_t *)sc;
    sc[0] = 2, sc[3] = 0.5f; /* small: fp16 weight gradients of sums of many terms fit */
    const ir_value *w = NULL;
    for (int i = 0; i < g->nparams && !w; i++)
        if (g->params[i]->kind == IR_VALUE_PARAM)
            w = g->params[i];
    int64_t n = ir_type_numel(&w->type);
    before = malloc((size_t)n * sizeof *before);
    after = malloc((size_t)n * sizeof *after);
    cg_host_read(p, m, 0, w, before);
    if (cg_host_run(h, r->prog, p, m, 0, err, sizeof err)) {
        fail(r->what, "%s", err);
        goto done;
    }
    cg_host_read(p, m, 0, w, after);
    if (!(sc[0] == 2 && si[1] == 1 && si[2] == 0 && memcmp(before, after, (size_t)n * 4) != 0)) {
        fail(r->what, "after a good step: scale %g, %d good steps, overflow %d, weights %s", sc[0],
             si[1], si[2], memcmp(before, after, (size_t)n * 4) ? "updated" : "not updated");
        goto done;
    }
    sc[0] = 3e38f, sc[3] = 1.0f / 3e38f; /* the scaled loss gradient overflows fp16 */
    memcpy(before, after, (size_t)n * 4);
    if (cg_host_run(h, r->prog, p, m, 0, err, sizeof err)) {
        fail(r->what, "%s", err);
        goto done;
    }
    cg_host_read(p, m, 0, w, after);
    if (!(sc[0] == 1.5e38f && si[1] == 0 && si[2] == 0 && memcmp(before, after, (size_t)n * 4) == 0)) {
        fail(r->what, "after an overflow: scale %g, %d good steps, overflow %d, weights %s", sc[0],
             si[1], si[2], memcmp(before, after, (size_t)n * 4) ? "changed" : "kept");
        goto done;
    }
    npassed++;
done:
    free(before);
    free(after);
    cg_host_mem_free(p, m);
}

/* ---------------------------------------------------------------- 5. what is generated */

/* The text of kernel k of p in its module: from its first line to the next
 * kernel's (malloc'd). */
static char *kernel_text(const cg_program *p, int k)
{
    for (int m = 0; m < p->nmodules; m++) {
        const cg_module *M = &p->modules[m];
        for (int j = 0; j < M->nkernels; j++) {
            if (M->kernels[j] != k)
                continue;
            int first = M->kernel_line[j], last = j + 1 < M->nkernels ? M->kernel_line[j + 1] : 0;
            size_t at = 0, end;
            for (int line = 1; at < M->source_len && line < first; at++)
                line += M->source[at] == '\n';
            end = at;
            for (int line = first; end < M->source_len && (!last || line < last); end++)
                line += M->source[end] == '\n';
            char *t = malloc(end - at + 1);
            memcpy(t, M->source + at, end - at);
            t[end - at] = 0;
            return t;
        }
    }
    return calloc(1, 1);
}

/* The int declarations in kernel text that may hold a tensor's index: "int
 * NAME" but for names bounded by a block or a window (lane, a vector's j, a
 * pooling window's ky and kx, the channel of a block per channel).  Into
 * first, the first such name. */
static int int_indices(const char *text, char *first, size_t n)
{
    static const char *const bounded[] = {"lane", "j", "ky", "kx", "ch", NULL};
    int count = 0;
    for (const char *s = strstr(text, "int "); s; s = strstr(s + 4, "int ")) {
        if (s > text && (isalnum((unsigned char)s[-1]) || s[-1] == '_'))
            continue;
        const char *id = s + 4;
        size_t len = 0;
        while (isalnum((unsigned char)id[len]) || id[len] == '_')
            len++;
        int ok = len == 0; /* a pointer */
        for (int i = 0; bounded[i] && !ok; i++)
            ok = strlen(bounded[i]) == len && strncmp(bounded[i], id, len) == 0;
        if (!ok && count++ == 0)
            snprintf(first, n, "%.*s", (int)len, id);
    }
    return count;
}

/* Kernels index in int while every tensor they touch has at most 2^31 - 4096
 * elements (cheap arithmetic for the common case), in i64 from there on:
 * with big, every kernel of r declares no int index and uses i64 (but a
 * transpose, whose indices are the prelude's); without, every kernel but
 * those always in i64 (casts, transposes, local reductions, the fp16
 * updates) has an int index. */
/* A reduction in parts: a kernel of partial sums, its grid several blocks
 * per reduction, before the kernel that adds them (the case's results then
 * compare as every case's do). */
static void check_parts(const run *r, int reductions)
{
    const cg_device *D = &r->p->devices[0];
    for (int i = 0; i + 1 < D->nsteps; i++) {
        const cg_step *st = &D->steps[i];
        if (st->kind == CG_STEP_KERNEL && st->what && strstr(st->what, "partial sums")) {
            if (st->u.launch.grid[0] < 2u * (unsigned)reductions)
                fail(r->what, "the partial sums run %u blocks for %d reductions",
                     st->u.launch.grid[0], reductions);
            else
                npassed++;
            return;
        }
    }
    fail(r->what, "no kernel of partial sums: the reduction ran in one block each");
}

/* A bias gradient computed by the batchnorm_grad before it: no sum_to kernel,
 * and where fused, no kernel for the ReLU's gradient either. */
static void check_no_sum_to(const run *r)
{
    const cg_device *D = &r->p->devices[0];
    for (int i = 0; i < D->nsteps; i++)
        if (D->steps[i].kind == CG_STEP_KERNEL && D->steps[i].what &&
            (strstr(D->steps[i].what, "sum_to") || strstr(D->steps[i].what, "relu_grad %"))) {
            fail(r->what, "a kernel of its own: %s", D->steps[i].what);
            return;
        }
    npassed++;
}

/* A convolution's bias left to the batchnorm after it: no kernel of its own. */
static void check_no_bias_kernel(const run *r)
{
    const cg_device *D = &r->p->devices[0];
    for (int i = 0; i < D->nsteps; i++)
        if (D->steps[i].kind == CG_STEP_KERNEL && D->steps[i].what &&
            strstr(D->steps[i].what, ": bias")) {
            fail(r->what, "the convolution's bias has a kernel of its own (%s)", D->steps[i].what);
            return;
        }
    npassed++;
}

static void check_index_width(const run *r, int big)
{
    static const char *const always64[] = {"cast_", "local_", "update_unless", "loss_scale",
                                           NULL};
    int ok = 1;
    for (int k = 0; k < r->p->nkernels && ok; k++) {
        const char *name = r->p->kernels[k].name;
        char *t = kernel_text(r->p, k), first[64] = "";
        /* transpose_f32_to_bf16, not the op's transpose__y */
        int tiles = strncmp(name, "transpose_", 10) == 0 && name[10] != '_';
        int ints = int_indices(t, first, sizeof first), own = tiles;
        for (int i = 0; always64[i]; i++)
            own |= strncmp(name, always64[i], strlen(always64[i])) == 0;
        if (big && (ints || (!strstr(t, "i64") && !tiles))) {
            fail(r->what, "kernel %s indexes in int (int %s; %d such) or never in i64", name,
                 first, ints);
            ok = 0;
        } else if (!big && !own && !ints) {
            fail(r->what, "kernel %s of small tensors declares no int index", name);
            ok = 0;
        }
        free(t);
    }
    if (ok && big)
        npassed++;
}

/* A graph of tensors with 2^31 elements or more per kernel family: shapes only,
 * generated and never run. */
typedef struct {
    const char *name, *ir;
    ir_precision prec;
    cg_conv_impl conv;
} big_case;

#define X4 "[2048, 64, 128, 128]"       /* 2^31 elements, NCHW */
#define R2 "[2097152, 1024]"            /* 2^31 elements, rows */
#define BIG(name, body) {name, G(body), PREC_FP32, CG_CONV_CUDNN}
static const big_case big_cases[] = {
    BIG("relu", "  input %x: f32[65536, 32768]\n  %y: f32[65536, 32768] = relu(%x)\n"
                "  output y = %y\n"),
    BIG("neg, one element a thread", "  input %x: f32[3, 715827883]\n"
                                     "  %y: f32[3, 715827883] = neg(%x)\n  output y = %y\n"),
    BIG("add broadcast row", "  input %a: f32[32768, 65536]\n  input %b: f32[65536]\n"
                             "  %y: f32[32768, 65536] = add(%a, %b)\n  output y = %y\n"),
    BIG("transpose", "  input %x: f32[65536, 32768]\n"
                     "  %y: f32[32768, 65536] = transpose(%x) {perm = [1, 0]}\n  output y = %y\n"),
    BIG("slice", "  input %x: f32[2, 1073741824]\n  %y: f32[1, 1073741824] = slice(%x) "
                 "{axis = 0, start = 1, size = 1}\n  output y = %y\n"),
    BIG("concat", "  input %a: f32[65536, 16384]\n  input %b: f32[65536, 16384]\n"
                  "  %y: f32[65536, 32768] = concat(%a, %b) {axis = 1}\n  output y = %y\n"),
    BIG("embedding", "  input %idx: i32[2097152]\n  input %w: f32[1000, 1024]\n"
                     "  %y: f32" R2 " = embedding(%idx, %w) {padding_idx = -1}\n  output y = %y\n"),
    BIG("adaptive_avgpool2d", "  input %x: f32" X4 "\n  %y: f32[2048, 64, 50, 70] = "
                              "adaptive_avgpool2d(%x) {size = [50, 70]}\n  output y = %y\n"),
    BIG("adaptive_avgpool2d_grad", "  input %dy: f32[2048, 64, 50, 70]\n  %y: f32" X4 " = "
                                   "adaptive_avgpool2d_grad(%dy) {shape = " X4 "}\n"
                                   "  output y = %y\n"),
    BIG("upsample2d", "  input %x: f32" X4 "\n  %y: f32[2048, 64, 50, 70] = upsample2d(%x) "
                      "{size = [50, 70], mode = 1, align_corners = 0, scale_h = 0.0, "
                      "scale_w = 0.0}\n  output y = %y\n"),
    BIG("upsample2d_grad", "  input %dy: f32[2048, 64, 50, 70]\n  %y: f32" X4 " = "
                           "upsample2d_grad(%dy) {shape = " X4 ", mode = 0, align_corners = 0, "
                           "scale_h = 0.0, scale_w = 0.0}\n  output y = %y\n"),
    BIG("maxpool2d", "  input %x: f32" X4 "\n  %y: f32[2048, 64, 64, 64] = maxpool2d(%x) "
                     "{kernel = [2, 2], stride = [2, 2], pad = [0, 0], dilation = [1, 1], ceil_mode = 0}\n"
                     "  output y = %y\n"),
    BIG("avgpool2d padded", "  input %x: f32" X4 "\n  %y: f32[2048, 64, 64, 64] = avgpool2d(%x) "
                            "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], "
                            "count_include_pad = 0, ceil_mode = 0}\n  output y = %y\n"),
    BIG("maxpool2d_grad", "  input %dy: f32[2048, 64, 64, 64]\n  input %x: f32" X4 "\n"
                          "  %y: f32" X4 " = maxpool2d_grad(%dy, %x) {kernel = [2, 2], "
                          "stride = [2, 2], pad = [0, 0], dilation = [1, 1], ceil_mode = 0}\n  output y = %y\n"),
    BIG("avgpool2d_grad padded", "  input %dy: f32[2048, 64, 64, 64]\n"
                                 "  %y: f32" X4 " = avgpool2d_grad(%dy) {kernel = [3, 3], "
                                 "stride = [2, 2], pad = [1, 1], count_include_pad = 0, ceil_mode = 0, "
                                 "shape = [2048, 64, 128, 128]}\n  output y = %y\n"),
    BIG("batchnorm", "  input %x: f32" X4 "\n  input %w: f32[64]\n  input %b: f32[64]\n"
                     "  input %m: f32[64]\n  input %pos_var: f32[64]\n"
                     "  %y: f32" X4 " = batchnorm(%x, %w, %b, %m, %pos_var) "
                     "{eps = 1e-05, momentum = 0.1}\n  output y = %y\n"),
    BIG("dropout_train shard", "  input %x: f32[4, 8, 67108864]\n  input %train.step: i64[]\n"
                               "  input %train.seed: i64[]\n"
                               "  %y: f32[4, 8, 67108864], %mask: f32[4, 8, 67108864] = "
                               "dropout_train(%x, %train.step, %train.seed) {p = 0.5, salt = 2, "
                               "shard = [1, 8, 32]}\n  output y = %y\n  output mask = %mask\n"),
    BIG("sgd", "  input %p: f32[65536, 32768]\n  input %g: f32[65536, 32768]\n"
               "  input %train.lr: f32[]\n  input %buf: f32[65536, 32768]\n"
               "  %y: f32[65536, 32768], %buf2: f32[65536, 32768] = sgd(%p, %g, %train.lr, %buf) "
               "{momentum = 0.9, nesterov = 0, weight_decay = 0.0}\n"
               "  output y = %y\n  output buf2 = %buf2\n"),
    BIG("adam", "  input %p: f32[65536, 32768]\n  input %g: f32[65536, 32768]\n"
                "  input %m: f32[65536, 32768]\n  input %pos_v: f32[65536, 32768]\n"
                "  input %train.lr: f32[]\n  input %train.step: i64[]\n"
                "  %y: f32[65536, 32768], %m2: f32[65536, 32768], %v2: f32[65536, 32768] = "
                "adam(%p, %g, %m, %pos_v, %train.lr, %train.step) {beta1 = 0.9, beta2 = 0.999, "
                "eps = 1e-08, weight_decay = 0.0, decoupled = 0}\n"
                "  output y = %y\n  output m2 = %m2\n  output v2 = %v2\n"),
#define A3 "[32768, 256, 256]"           /* 2^31 elements, attention's q, k, v */
    BIG("attention", "  input %q: f32" A3 "\n  input %k: f32" A3 "\n  input %v: f32" A3 "\n"
                     "  %o: f32" A3 ", %lse: f32[32768, 256] = attention(%q, %k, %v) "
                     "{causal = 1, scale = 0.0625}\n  output o = %o\n  output lse = %lse\n"),
    BIG("attention_grad", "  input %dy: f32" A3 "\n  input %q: f32" A3 "\n  input %k: f32" A3
                          "\n  input %v: f32" A3 "\n  input %o: f32" A3 "\n"
                          "  input %lse: f32[32768, 256]\n"
                          "  %dq: f32" A3 ", %dk: f32" A3 ", %dv: f32" A3 " = attention_grad(%dy, "
                          "%q, %k, %v, %o, %lse) {causal = 0, scale = 0.0625}\n"
                          "  output dq = %dq\n  output dk = %dk\n  output dv = %dv\n"),
    BIG("softmax rows", "  input %x: f32" R2 "\n  %y: f32" R2 " = softmax(%x) {axis = 1}\n"
                        "  output y = %y\n"),
    BIG("softmax long rows", "  input %x: f32[1048576, 2048]\n"
                             "  %y: f32[1048576, 2048] = softmax(%x) {axis = 1}\n"
                             "  output y = %y\n"),
    BIG("log_softmax columns", "  input %x: f32[1048576, 64, 32]\n"
                               "  %y: f32[1048576, 64, 32] = log_softmax(%x) {axis = 1}\n"
                               "  output y = %y\n"),
    BIG("softmax_grad columns", "  input %dy: f32[1048576, 64, 32]\n"
                                "  input %y0: f32[1048576, 64, 32]\n"
                                "  %y: f32[1048576, 64, 32] = softmax_grad(%dy, %y0) {axis = 1}\n"
                                "  output y = %y\n"),
    BIG("log_softmax_grad rows", "  input %dy: f32" R2 "\n  input %y0: f32" R2 "\n"
                                 "  %y: f32" R2 " = log_softmax_grad(%dy, %y0) {axis = 1}\n"
                                 "  output y = %y\n"),
    BIG("layernorm", "  input %x: f32" R2 "\n  input %w: f32[1024]\n  input %b: f32[1024]\n"
                     "  %y: f32" R2 " = layernorm(%x, %w, %b) {eps = 1e-05}\n  output y = %y\n"),
    BIG("layernorm_grad", "  input %dy: f32" R2 "\n  input %x: f32" R2 "\n  input %w: f32[1024]\n"
                          "  %dx: f32" R2 ", %dw: f32[1024], %db: f32[1024] = "
                          "layernorm_grad(%dy, %x, %w) {eps = 1e-05}\n"
                          "  output dx = %dx\n  output dw = %dw\n  output db = %db\n"),
    BIG("batchnorm_train", "  input %x: f32" X4 "\n  input %w: f32[64]\n  input %b: f32[64]\n"
                           "  input %rm: f32[64]\n  input %pos_rv: f32[64]\n"
                           "  %y: f32" X4 ", %mean: f32[64], %invstd: f32[64], %rm2: f32[64], "
                           "%rv2: f32[64] = batchnorm_train(%x, %w, %b, %rm, %pos_rv) "
                           "{eps = 1e-05, momentum = 0.1}\n"
                           "  output y = %y\n  output mean = %mean\n  output rv2 = %rv2\n"),
    BIG("batchnorm_grad", "  input %dy: f32" X4 "\n  input %x: f32" X4 "\n  input %w: f32[64]\n"
                          "  input %m: f32[64]\n  input %pos_invstd: f32[64]\n"
                          "  %dx: f32" X4 ", %dw: f32[64], %db: f32[64] = "
                          "batchnorm_grad(%dy, %x, %w, %m, %pos_invstd) "
                          "{eps = 1e-05, momentum = 0.1}\n"
                          "  output dx = %dx\n  output dw = %dw\n  output db = %db\n"),
    BIG("sum_to a block per output", "  input %x: f32" R2 "\n"
                                     "  %y: f32[1024] = sum_to(%x) {shape = [1024]}\n"
                                     "  output y = %y\n"),
    BIG("sum_to a thread per output", "  input %x: f32[4, 536870912]\n"
                                      "  %y: f32[536870912] = sum_to(%x) {shape = [536870912]}\n"
                                      "  output y = %y\n"),
    BIG("global_avgpool warps", "  input %x: f32" X4 "\n"
                                "  %y: f32[2048, 64, 1, 1] = global_avgpool(%x)\n"
                                "  output y = %y\n"),
    BIG("global_avgpool threads", "  input %x: f32[16777216, 8, 4, 4]\n"
                                  "  %y: f32[16777216, 8, 1, 1] = global_avgpool(%x)\n"
                                  "  output y = %y\n"),
    BIG("cross_entropy", "  input %x: f32" R2 "\n  input %label: i32[2097152]\n"
                         "  %y: f32[] = cross_entropy(%x, %label)" CE "\n  output y = %y\n"),
    BIG("cross_entropy_grad", "  input %dl: f32[]\n  input %x: f32" R2 "\n"
                              "  input %label: i32[2097152]\n"
                              "  %y: f32" R2 " = cross_entropy_grad(%dl, %x, %label)" CE "\n"
                              "  output y = %y\n"),
    BIG("mse", "  input %a: f32[65536, 32768]\n  input %b: f32[65536, 32768]\n"
               "  %y: f32[] = mse(%a, %b)\n  output y = %y\n"),
    BIG("embedding_grad", "  input %dy: f32" R2 "\n  input %idx: i32[2097152]\n"
                          "  %y: f32[1000, 1024] = embedding_grad(%dy, %idx) "
                          "{shape = [1000, 1024], padding_idx = -1}\n  output y = %y\n"),
    /* the input's 16-bit copy for cuBLASLt */
    {"cast", G("  input %x: f32" R2 "\n  input %w: f32[8, 1024]\n"
               "  %y: f32[2097152, 8] = dense(%x, %w)\n  output y = %y\n"),
     PREC_BF16, CG_CONV_CUDNN},
    /* x's channels-last copy */
    {"transpose_tiles", G("  input %x: f32[64, 512, 256, 256]\n  input %w: f32[8, 512, 1, 1]\n"
                          "  %y: f32[64, 8, 256, 256] = conv2d(%x, %w) {stride = [1, 1], "
                          "pad = [0, 0], dilation = [1, 1], groups = 1}\n  output y = %y\n"),
     PREC_FP32, CG_CONV_CUDNN_NHWC},
    /* the bias after a cuDNN call, NCHW and NHWC */
    BIG("conv2d bias", "  input %x: f32[32, 16, 256, 256]\n  input %w: f32[2048, 16, 1, 1]\n"
                       "  input %b: f32[2048]\n  %y: f32[32, 2048, 256, 256] = conv2d(%x, %w, %b) "
                       "{stride = [1, 1], pad = [0, 0], dilation = [1, 1], groups = 1}\n"
                       "  output y = %y\n"),
    {"conv2d bias", G("  input %x: f32[32, 16, 256, 256]\n  input %w: f32[2048, 16, 1, 1]\n"
                      "  input %b: f32[2048]\n  %y: f32[32, 2048, 256, 256] = conv2d(%x, %w, %b) "
                      "{stride = [1, 1], pad = [0, 0], dilation = [1, 1], groups = 1}\n"
                      "  output y = %y\n"),
     PREC_BF16, CG_CONV_CUDNN_NHWC},
    /* two devices: all_gather along axis 1 unpacks from staging, reduce_scatter
       packs into it; all_reduce's local reduction */
    BIG("gather, scatter, local reduce",
        "  input %x: f32[2, 1073741824]\n  %a: f32[2, 1073741824] = neg(%x)\n"
        "  %b: f32[2, 1073741824] = neg(%x) on 1\n"
        "  %g: f32[2, 2147483648] = all_gather(%a) {id = 1, group = [0, 1], axis = 1}\n"
        "  %h: f32[2, 2147483648] = all_gather(%b) {id = 1, group = [0, 1], axis = 1} on 1\n"
        "  %r: f32[2, 2147483648] = all_reduce(%g) {id = 2, group = [0, 1]}\n"
        "  %s: f32[2, 2147483648] = all_reduce(%h) {id = 2, group = [0, 1]} on 1\n"
        "  %p: f32[2, 1073741824] = reduce_scatter(%r) {id = 3, group = [0, 1], axis = 1}\n"
        "  %q: f32[2, 1073741824] = reduce_scatter(%s) {id = 3, group = [0, 1], axis = 1} on 1\n"
        "  output p = %p\n  output q = %q\n"),
};
#undef BIG
#undef X4
#undef R2

/* Generates ir with o, expecting it to fail with a message holding want. */
static void refused(const char *what, const char *ir, const cg_options *o, const char *want)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(what, ir, strlen(ir), &d);
    mp_plan *mp = g && !ir_verify(g, &d) ? mp_plan_graph(g) : NULL;
    cg_program *p = mp ? cg_generate(g, mp, o, &d) : NULL;
    const char *msg = "";
    for (int i = 0; i < d.n; i++)
        if (d.entries[i].level == DIAG_ERROR) {
            msg = d.entries[i].msg;
            break;
        }
    if (!mp)
        fail(what, "the graph does not verify: %s", msg);
    else if (p || !strstr(msg, want))
        fail(what, "generated%s, want a refusal saying \"%s\" (%s)", p ? "" : " nothing",
             want, msg);
    else
        npassed++;
    cg_program_free(p);
    mp_plan_free(mp);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
}

/* A forward convolution's bias and ReLU: cuDNN's fused call takes them (relu
 * and has_bias set) only with a ReLU at fp32 (tf32) or fp16 on NCHW, where the
 * deprecated call is documented to run; elsewhere the step is a plain
 * convolution (z through beta) and the very next a kernel that adds the bias
 * and applies the ReLU in place on what the call wrote, before the result
 * moves.  Checked on every forward convolution of r; into *fused and *kernels,
 * how many of each. */
static int check_conv_epilogue(const run *r, int *fused, int *kernels)
{
    for (int d = 0; d < r->p->ndevices; d++) {
        const cg_device *D = &r->p->devices[d];
        for (int k = 0; k < D->nsteps; k++) {
            const cg_step *st = &D->steps[k];
            if (st->kind != CG_STEP_CONV || st->u.conv.kind != CG_CONV_FORWARD)
                continue;
            const cg_conv *c = &st->u.conv;
            int relu = strstr(st->what, "+relu") != NULL, bias = st->node->nin == 3;
            int want_fused = relu && !c->nhwc && (c->dtype == IR_F32 || c->dtype == IR_F16);
            const cg_step *nx = k + 1 < D->nsteps ? &D->steps[k + 1] : NULL;
            const char *kn = nx && nx->kind == CG_STEP_KERNEL
                                 ? r->p->kernels[nx->u.launch.kernel].name : "";
            int kernel = strncmp(kn, "conv_bias", 9) == 0 || strncmp(kn, "conv_relu", 9) == 0;
            /* the bias left to the batchnorm_train that reads y next */
            if (bias && !relu && !want_fused && !c->has_bias &&
                (strncmp(kn, "batchnorm_train", 15) == 0 ||
                 strncmp(kn, "parts_batchnorm_train", 21) == 0))
                continue;
            if (c->relu != want_fused || c->has_bias != (want_fused && bias) ||
                kernel != (!want_fused && (relu || bias)) ||
                (kernel && ((strstr(kn, "bias") != NULL) != bias ||
                            (strstr(kn, "relu") != NULL) != relu ||
                            strstr(kn, c->nhwc ? "_nhwc" : "_nchw") == NULL ||
                            nx->u.launch.args[0].buf.region != c->y.region ||
                            nx->u.launch.args[0].buf.offset != c->y.offset))) {
                fail(r->what, "step %d (%s, %s): relu %d, bias %d, then %s; want %s", k, st->what,
                     ir_dtype_name(c->dtype), c->relu, c->has_bias, *kn ? kn : "no kernel",
                     want_fused ? "the fused call alone"
                                : "a plain call, then a kernel on what it wrote");
                return 0;
            }
            *fused += want_fused;
            *kernels += kernel;
        }
    }
    return 1;
}

/* cuBLASLt's workspace: 32 MiB where a target is Hopper (sm_90) or later, as
 * NVIDIA advises, else 4 MiB; the option overrides both. */
static void check_gemm_workspace(void)
{
    static const struct {
        int narchs;
        const char *archs[2];
        int64_t option, want;
    } ws[] = {
        {0, {NULL, NULL}, 0, (int64_t)32 << 20},        /* the default: sm_80 and sm_90 */
        {1, {"sm_80", NULL}, 0, (int64_t)4 << 20},
        {2, {"sm_80", "sm_86"}, 0, (int64_t)4 << 20},
        {1, {"sm_90a", NULL}, 0, (int64_t)32 << 20},
        {2, {"sm_100", "sm_80"}, 0, (int64_t)32 << 20},
        {0, {NULL, NULL}, (int64_t)1 << 20, (int64_t)1 << 20},
    };
    static const op_case dense = {"dense workspace",
        G("  input %x: f32[6, 7]\n  input %w: f32[5, 7]\n  %y: f32[6, 5] = dense(%x, %w)\n"
          "  output y = %y\n"), 0, 0, 0, 0};
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) {
        cg_options o = cg_options_default();
        o.narchs = ws[i].narchs;
        for (int a = 0; a < ws[i].narchs; a++)
            o.archs[a] = ws[i].archs[a];
        o.gemm_workspace = ws[i].option;
        ir_graph *g = parse_case(&dense, 0, 0);
        run *r = g ? prepare_opts(dense.name, g, &o, 0, 0) : NULL;
        if (!r)
            continue;
        const cg_device *D = &r->p->devices[0];
        int64_t got = -1;
        for (int k = 0; k < D->nsteps; k++)
            if (D->steps[k].kind == CG_STEP_GEMM)
                got = D->steps[k].u.gemm.workspace_bytes;
        if (got != ws[i].want || D->region_bytes[CG_WORKSPACE] < ws[i].want)
            fail(r->what, "archs %s%s%s, option %lld: a matmul's workspace %lld bytes (region "
                 "%lld), want %lld", ws[i].narchs ? ws[i].archs[0] : "(default)",
                 ws[i].narchs > 1 ? " " : "", ws[i].narchs > 1 ? ws[i].archs[1] : "",
                 (long long)ws[i].option, (long long)got,
                 (long long)D->region_bytes[CG_WORKSPACE], (long long)ws[i].want);
        else
            npassed++;
        run_free(r);
    }
}

/* ---------------------------------------------------------------- main */

/* ---------------------------------------------------------------- alignment */

/* Kernels that break (or keep) the alignments a GPU needs of vector and
 * tensor-core accesses, after a generated program's prelude: the emulation
 * must fail each that breaks one, naming the access (tests/cg_emu.h). */
static const char align_kernels[] =
    "GNC_KERNEL void al_ldv(const float *p, i64 e, float *out)\n"
    "{\n    float v[4];\n    ldv<4>(p, e, v);\n    out[0] = v[0] + v[1] + v[2] + v[3];\n}\n"
    "GNC_KERNEL void al_stv(float *p, i64 e)\n"
    "{\n    float v[4] = {1, 2, 3, 4};\n    stv<4>(p, e, v);\n}\n"
    "GNC_KERNEL void al_ldv16(const bf16 *p, i64 e, float *out)\n"
    "{\n    float v[4];\n    ldv<4>(p, e, v);\n    out[0] = v[0] + v[1] + v[2] + v[3];\n}\n"
    "GNC_KERNEL void al_stv16(f16 *p, i64 e)\n"
    "{\n    float v[4] = {1, 2, 3, 4};\n    stv<4>(p, e, v);\n}\n"
    "GNC_KERNEL void al_wmma_tf32(i64 off, i64 ldm)\n"
    "{\n    __shared__ __align__(32) float t[16 * 96];\n"
    "    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32,\n"
    "                           nvcuda::wmma::col_major> a;\n"
    "    nvcuda::wmma::load_matrix_sync(a, t + off, (unsigned)ldm);\n}\n"
    "GNC_KERNEL void al_wmma_half(i64 off, i64 ldm)\n"
    "{\n    __shared__ __align__(32) __half t[16 * 96];\n"
    "    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half,\n"
    "                           nvcuda::wmma::row_major> b;\n"
    "    nvcuda::wmma::load_matrix_sync(b, t + off, (unsigned)ldm);\n}\n"
    "GNC_KERNEL void al_wmma_store(i64 off, i64 ldm)\n"
    "{\n    __shared__ __align__(32) float t[16 * 96];\n"
    "    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> c;\n"
    "    nvcuda::wmma::fill_fragment(c, 0.0f);\n"
    "    nvcuda::wmma::store_matrix_sync(t + off, c, (unsigned)ldm, nvcuda::wmma::mem_col_major);\n}\n";

enum { AL_LDV, AL_STV, AL_LDV16, AL_STV16, AL_WMMA_TF32, AL_WMMA_HALF, AL_WMMA_STORE, AL_NKERNELS };

static void check_alignment(const char *relu_ir)
{
    const op_case c = {"alignment", relu_ir, 0, 0, 0, 0};
    run *r = prepare("the emulation's alignment checks", parse_case(&c, 0, 0), PREC_FP32, 0, 0);
    if (!r)
        return;
    /* one module: the program's prelude, then the kernels above */
    const cg_module *pm = &r->p->modules[0];
    size_t n = pm->body_offset + sizeof align_kernels;
    char *src = malloc(n);
    memcpy(src, pm->source, pm->body_offset);
    memcpy(src + pm->body_offset, align_kernels, sizeof align_kernels);
    cg_kernel ks[AL_NKERNELS] = {{.name = "al_ldv"}, {.name = "al_stv"}, {.name = "al_ldv16"},
                                 {.name = "al_stv16"}, {.name = "al_wmma_tf32"},
                                 {.name = "al_wmma_half"}, {.name = "al_wmma_store"}};
    cg_module mod = {.source = src, .source_len = n - 1, .body_offset = pm->body_offset};
    cg_program prog = {.nkernels = AL_NKERNELS, .kernels = ks, .nmodules = 1, .modules = &mod};
    cg_program *progs[1] = {&prog};
    char err[4096];
    cg_host *h = cg_host_build(progs, 1, workdir, err, sizeof err);
    if (!h) {
        fail("the emulation's alignment checks", "%s", err);
        free(src);
        run_free(r);
        return;
    }
    void *buf = aligned_alloc(256, 4096);
    memset(buf, 0, 4096);
    float out;
    void *p = buf, *po = &out;
    const unsigned grid[3] = {1, 1, 1}, warp[3] = {32, 1, 1};
    static const struct {
        int kernel;
        int64_t a, b;           /* the element offset (and ldm for wmma) */
        const char *want;       /* in the failure; NULL: runs */
    } cases_[] = {
        {AL_LDV, 4, 0, NULL},
        {AL_LDV, 1, 0, "a 16-byte float4 load (ldv<4> of float)"},
        {AL_STV, 8, 0, NULL},
        {AL_STV, 2, 0, "a 16-byte float4 store (stv<4> of float)"},
        {AL_LDV16, 4, 0, NULL},
        {AL_LDV16, 2, 0, "an 8-byte uint2 load (ldv<4> of 16-bit values)"},
        {AL_STV16, 8, 0, NULL},
        {AL_STV16, 6, 0, "an 8-byte uint2 store (stv<4> of 16-bit values)"},
        {AL_WMMA_TF32, 8, 72, NULL},
        {AL_WMMA_TF32, 4, 72, "load_matrix_sync: mptr"},
        {AL_WMMA_TF32, 8, 70, "load_matrix_sync: ldm 70 is not a multiple of 4"},
        {AL_WMMA_HALF, 16, 72, NULL},
        {AL_WMMA_HALF, 8, 72, "load_matrix_sync: mptr"},
        {AL_WMMA_HALF, 16, 68, "load_matrix_sync: ldm 68 is not a multiple of 8"},
        {AL_WMMA_STORE, 0, 72, NULL},
        {AL_WMMA_STORE, 4, 72, "store_matrix_sync: mptr"},
        {AL_WMMA_STORE, 0, 74, "store_matrix_sync: ldm 74 is not a multiple of 4"},
    };
    for (size_t i = 0; i < sizeof cases_ / sizeof *cases_; i++) {
        int64_t a = cases_[i].a, b = cases_[i].b;
        void *args3[3] = {&p, &a, &po}, *args2[2] = {&a, &b}, *argsp[2] = {&p, &a};
        int k = cases_[i].kernel;
        void **args = k == AL_LDV || k == AL_LDV16 ? args3 : k == AL_STV || k == AL_STV16 ? argsp : args2;
        const char *e = cg_host_entry(h, 0, k)(grid, warp, args);
        char what[128];
        snprintf(what, sizeof what, "kernel %s (%lld, %lld)", ks[k].name, (long long)a, (long long)b);
        if (!cases_[i].want && e)
            fail(what, "an aligned access failed: %s", e);
        else if (cases_[i].want && (!e || !strstr(e, cases_[i].want)))
            fail(what, "a misaligned access: want a failure naming '%s', got %s", cases_[i].want,
                 e ? e : "none");
        else
            npassed++;
    }
    free(buf);
    cg_host_free(h);
    free(src);
    run_free(r);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_codegen SOURCE_DIR WORK_DIR [-v] [--gpu [--fake DIR]] "
                "[--only TEXT]\n");
        return 2;
    }
    const char *src = argv[1], *fake = NULL, *only = NULL;
    int on_gpu = 0;
    workdir = argv[2];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "--gpu") == 0)
            on_gpu = 1;
        else if (strcmp(argv[i], "--fake") == 0 && i + 1 < argc)
            fake = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "test_codegen: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    rt_set_threads(1);

    run *runs[2048];
    int nruns = 0;
    int ops_seen[IR_NOPS] = {0};
    /* 1, 2: the cases */
    for (int i = 0; i < NCASES; i++) {
        const op_case *c = &cases[i];
        ir_graph *g = parse_case(c, c->fuse, 0);
        if (!g)
            continue;
        ir_for_each_node(g, n)
            ops_seen[n->op] = 1;
        run *r = prepare(c->name, g, PREC_FP32, c->atol, c->rtol);
        if (r) {
            runs[nruns++] = r;
            check_index_width(r, 0);
            if (strstr(c->name, "in parts"))
                check_parts(r, strstr(c->name, "mse") || strstr(c->name, "cross") ? 1
                               : strstr(c->name, "long rows") ? 2
                               : strstr(c->name, "rows") ? 5 : 3);
            if (strstr(c->name, "the bias added"))
                check_no_bias_kernel(r);
            if (strstr(c->name, "the bias gradient"))
                check_no_sum_to(r);
        }
        for (int lp = 0; c->lowp && lp < 2; lp++) {
            ir_graph *h = parse_case(c, c->fuse, 1);
            /* a few roundings to 8 (bf16) or 11 (fp16) bits of the operands'
               and results' size */
            double tol = lp ? 4e-3 : 3e-2;
            if (h && (r = prepare(c->name, h, lp ? PREC_FP16 : PREC_BF16, tol, tol)))
                runs[nruns++] = r;
        }
    }
    /* 2b: the convolutions as cuDNN calls at the other precisions (section 1
       has fp32: where the fused call does not run, the bias and ReLU are a
       kernel of their own), as implicit-GEMM kernels (--conv igemm: fp32
       FMAs; TF32, bf16, fp16 on the tensor cores through wmma) and as cuDNN
       on channels-last copies (--conv cudnn-nhwc: the transposes around each
       call), at every precision */
    int nways[CG_CONV_NIMPLS] = {0};
    for (int impl = CG_CONV_CUDNN; impl < CG_CONV_NIMPLS; impl++)
        for (int i = 0; i < NCASES; i++) {
            const op_case *c = &cases[i];
            if (!strstr(c->name, "conv2d"))
                continue;
            static const double tol[] = {0, 1e-2, 3e-2, 4e-3};
            for (int prec = PREC_FP32; prec <= PREC_FP16; prec++) {
                if (impl == CG_CONV_CUDNN && prec == PREC_FP32)
                    continue;
                ir_graph *g = parse_case(c, c->fuse, prec >= PREC_BF16);
                double atol = prec == PREC_FP32 ? c->atol : tol[prec];
                double rtol = prec == PREC_FP32 ? c->rtol : tol[prec];
                run *r = g ? prepare_conv(c->name, g, (ir_precision)prec, (cg_conv_impl)impl, atol,
                                          rtol)
                           : NULL;
                if (!r)
                    continue;
                runs[nruns++] = r;
                const char *kernel = impl == CG_CONV_IGEMM ? "igemm" : "transpose";
                int conv_steps = 0, nhwc_steps = 0, launches = 0;
                for (int d = 0; d < r->p->ndevices; d++)
                    for (int k = 0; k < r->p->devices[d].nsteps; k++) {
                        const cg_step *st = &r->p->devices[d].steps[k];
                        conv_steps += st->kind == CG_STEP_CONV;
                        nhwc_steps += st->kind == CG_STEP_CONV && st->u.conv.nhwc;
                        launches += st->kind == CG_STEP_KERNEL &&
                                    strstr(r->p->kernels[st->u.launch.kernel].name, kernel);
                    }
                if (impl == CG_CONV_IGEMM && (conv_steps || !launches))
                    fail(r->what, "%d cuDNN steps and %d implicit-GEMM launches: want 0 and some",
                         conv_steps, launches);
                if (impl == CG_CONV_CUDNN_NHWC && (!nhwc_steps || nhwc_steps != conv_steps ||
                                                   !launches))
                    fail(r->what, "%d of %d cuDNN steps channels-last, %d transposes: want all "
                         "and some", nhwc_steps, conv_steps, launches);
                if (impl == CG_CONV_IGEMM && strstr(c->name, "split") && launches < 2)
                    fail(r->what, "the gradient's k is not split (%d launches)", launches);
                nways[impl]++;
            }
        }
    for (int impl = CG_CONV_CUDNN; impl < CG_CONV_NIMPLS; impl++)
        if (nways[impl] < (impl == CG_CONV_CUDNN ? 3 : 4) * 8)
            fail(cg_conv_name((cg_conv_impl)impl), "only %d convolution runs", nways[impl]);
    /* 2c: channels-last (codegen/layout.c): every case between two kernels
       (sandwich) with its activations stored NHWC, at fp32, and those of the
       convolutions and the low-precision cases at bf16 and fp16: every
       kernel's channels-last form, and the crossings at the program's edge
       (its inputs and outputs stay NCHW).  A case whose values have the
       same bytes either way is left to section 1. */
    int nhwc_runs = 0, nhwc_ops[IR_NOPS] = {0};
    for (int i = 0; i < NCASES; i++) {
        const op_case *c = &cases[i];
        static const double tol[] = {0, 1e-2, 3e-2, 4e-3};
        for (int prec = PREC_FP32; prec <= PREC_FP16; prec += prec == PREC_FP32 ? 2 : 1) {
            if (prec != PREC_FP32 && !c->lowp && !strstr(c->name, "conv2d"))
                continue;
            ir_graph *g = parse_case(c, c->fuse, 1);
            cg_options o = cg_options_default();
            o.precision = (ir_precision)prec;
            o.layout = CG_LAYOUT_NHWC;
            double atol = prec == PREC_FP32 ? c->atol : tol[prec];
            double rtol = prec == PREC_FP32 ? c->rtol : tol[prec];
            run *r = g ? prepare_opts(c->name, g, &o, atol, rtol) : NULL;
            int held = 0;
            for (int d = 0; r && d < r->p->ndevices; d++)
                for (int v = 0; v < r->p->devices[d].nvalues; v++)
                    held += r->p->devices[d].values[v].nhwc;
            if (!held) {
                run_free(r);
                continue;
            }
            runs[nruns++] = r;
            nhwc_runs++;
            ir_for_each_node(r->g, n)
                nhwc_ops[n->op] = 1;
        }
    }
    {   /* the kernels that index channels, each run channels-last */
        static const ir_op want[] = {IR_OP_BATCHNORM_TRAIN, IR_OP_BATCHNORM_GRAD,
                                     IR_OP_BATCHNORM, IR_OP_BATCHNORM_APPLY, IR_OP_MAXPOOL2D,
                                     IR_OP_MAXPOOL2D_GRAD, IR_OP_AVGPOOL2D, IR_OP_AVGPOOL2D_GRAD,
                                     IR_OP_GLOBAL_AVGPOOL, IR_OP_SUM_TO, IR_OP_BROADCAST_TO,
                                     IR_OP_CONV2D, IR_OP_CONV2D_GRAD_INPUT,
                                     IR_OP_CONV2D_GRAD_WEIGHT};
        for (size_t i = 0; i < sizeof want / sizeof *want; i++)
            if (!nhwc_ops[want[i]])
                fail(ir_ops[want[i]].name, "no case runs it channels-last");
        if (nhwc_runs < 60)
            fail("channels-last", "only %d runs", nhwc_runs);
        printf("channels-last: %d runs\n", nhwc_runs);
    }
    {   /* where cuDNN's fused call takes the bias and ReLU, and where a kernel
           after the plain call does (check_conv_epilogue says how each looks;
           every convolution run checks it too) */
        static const struct {
            const char *name;
            ir_precision prec;
            cg_conv_impl conv;
            int fused, kernels;
        } epi[] = {
            {"fused conv2d+add+relu", PREC_FP32, CG_CONV_CUDNN, 1, 0},
            {"fused conv2d+add+relu", PREC_TF32, CG_CONV_CUDNN, 1, 0},
            {"fused conv2d+add+relu", PREC_FP16, CG_CONV_CUDNN, 1, 0},
            {"fused conv2d+add+relu", PREC_BF16, CG_CONV_CUDNN, 0, 1},
            {"fused conv2d+add+relu", PREC_FP32, CG_CONV_CUDNN_NHWC, 0, 1},
            {"fused conv2d+add+relu", PREC_FP16, CG_CONV_CUDNN_NHWC, 0, 1},
            {"fused conv2d+relu+global_avgpool", PREC_FP32, CG_CONV_CUDNN, 1, 0},
            {"fused conv2d+relu+global_avgpool", PREC_BF16, CG_CONV_CUDNN, 0, 1},
            {"conv2d stride pad", PREC_FP32, CG_CONV_CUDNN, 0, 1},
            {"conv2d stride pad", PREC_FP16, CG_CONV_CUDNN, 0, 1},
            {"conv2d groups dilation", PREC_BF16, CG_CONV_CUDNN, 0, 0},
            {"fused conv2d+add+relu", PREC_BF16, CG_CONV_IGEMM, 0, 0},
        };
        for (size_t e = 0; e < sizeof epi / sizeof *epi; e++) {
            const op_case *c = NULL;
            for (int i = 0; i < NCASES; i++)
                if (strcmp(cases[i].name, epi[e].name) == 0)
                    c = &cases[i];
            ir_graph *g = c ? parse_case(c, c->fuse, 0) : NULL;
            run *r = g ? prepare_conv(c->name, g, epi[e].prec, epi[e].conv, 0, 0) : NULL;
            int fused = 0, kernels = 0;
            if (r && check_conv_epilogue(r, &fused, &kernels)) {
                if (fused != epi[e].fused || kernels != epi[e].kernels)
                    fail(r->what, "%d fused cuDNN calls and %d bias or ReLU kernels, want %d "
                         "and %d", fused, kernels, epi[e].fused, epi[e].kernels);
                else
                    npassed++;
            }
            run_free(r);
        }
    }
    /* 2^31 elements: every kernel family indexes in i64 (generated, and
       compiled with the rest, never run); a grid CUDA cannot launch is
       refused */
    for (size_t i = 0; i < sizeof big_cases / sizeof *big_cases; i++) {
        const big_case *b = &big_cases[i];
        const op_case c = {b->name, b->ir, 0, 0, 0, 0};
        ir_graph *g = parse_case(&c, 0, 0);
        char what[128];
        snprintf(what, sizeof what, "%s 2^31 elements", b->name);
        run *r = g ? prepare_conv(what, g, b->prec, b->conv, 0, 0) : NULL;
        if (r) {
            check_index_width(r, 1);
            r->compile_only = 1;
            runs[nruns++] = r;
        }
    }
    {
        cg_options o = cg_options_default();
        refused("softmax of 2^35 rows",
                G("  input %x: f32[34359738368, 4]\n  %y: f32[34359738368, 4] = softmax(%x) "
                  "{axis = 1}\n  output y = %y\n"), &o,
                "%y, softmax %y: a grid of 4294967296 x 1 x 1");
        /* attention's tiles take feature sizes up to 256 (codegen/attention.c) */
        refused("attention of e 300",
                G("  input %q: f32[2, 5, 300]\n  input %k: f32[2, 7, 300]\n  input %v: f32[2, 7, 8]\n"
                  "  %o: f32[2, 5, 8], %lse: f32[2, 5] = attention(%q, %k, %v) {causal = 0, "
                  "scale = 0.05}\n  output o = %o\n"), &o,
                "attention of feature sizes e = 300 and ev = 8: the generated kernels take e and "
                "ev up to 256");
    }
    check_gemm_workspace();
    check_alignment(EL("relu", "[4, 64]"));
    {   /* 2^31 elements: the kernels index in int, so it stays a cuDNN call
           (generated only, never run) */
        static const op_case big = {"conv2d 2^31 elements",
            G("  input %x: f32[64, 512, 256, 256]\n  input %w: f32[8, 512, 1, 1]\n"
              "  %y: f32[64, 8, 256, 256] = conv2d(%x, %w) {stride = [1, 1], pad = [0, 0], "
              "dilation = [1, 1], groups = 1}\n  output y = %y\n"), 0, 0, 0, 0};
        run *r = prepare_conv(big.name, parse_case(&big, 0, 0), PREC_FP32, CG_CONV_IGEMM, 0, 0);
        int cudnn = 0;
        for (int k = 0; r && k < r->p->devices[0].nsteps; k++)
            cudnn += r->p->devices[0].steps[k].kind == CG_STEP_CONV;
        if (!r || cudnn != 1)
            fail(big.name, "not one cuDNN step with --conv igemm (%d)", cudnn);
        else
            npassed++;
        run_free(r);
    }
    {   /* 70000 images: more than a transpose's grid takes, so it stays an
           NCHW cuDNN call with --conv cudnn-nhwc (generated only, never run) */
        static const op_case many = {"conv2d 70000 images",
            G("  input %x: f32[70000, 2, 3, 3]\n  input %w: f32[4, 2, 3, 3]\n"
              "  %y: f32[70000, 4, 1, 1] = conv2d(%x, %w) {stride = [1, 1], pad = [0, 0], "
              "dilation = [1, 1], groups = 1}\n  output y = %y\n"), 0, 0, 0, 0};
        run *r = prepare_conv(many.name, parse_case(&many, 0, 0), PREC_FP32, CG_CONV_CUDNN_NHWC, 0, 0);
        int nchw = 0, steps = r ? r->p->devices[0].nsteps : 0;
        for (int k = 0; k < steps; k++)
            nchw += r->p->devices[0].steps[k].kind == CG_STEP_CONV &&
                    !r->p->devices[0].steps[k].u.conv.nhwc;
        if (!r || nchw != 1 || steps != 1)
            fail(many.name, "not one NCHW cuDNN step alone with --conv cudnn-nhwc (%d of %d)",
                 nchw, steps);
        else
            npassed++;
        run_free(r);
    }
    for (int op = 0; op < IR_NOPS; op++)
        if (!ops_seen[op] && !ir_op_communicates((ir_op)op))
            fail(ir_ops[op].name, "no case runs this op");
    /* 3: whole programs */
    static const char *const names[] = {"lenet", "mlp"};
    int first_model = nruns;
    for (int i = 0; i < 2; i++)
        for (int train = 0; train < 2; train++)
            for (int devices = 1; devices <= 2; devices++) {
                ir_graph *g = model(src, names[i], train, devices);
                char what[128];
                snprintf(what, sizeof what, "%s %s, %d device%s", names[i],
                         train ? "training step" : "inference", devices, devices > 1 ? "s" : "");
                run *r = g ? prepare(what, g, PREC_FP32, 2e-5, 2e-4) : NULL;
                if (r)
                    runs[nruns++] = r, r->model = 1;
            }
    {
        ir_graph *g = model(src, "lenet", 0, 1);
        run *r = g ? prepare("lenet inference", g, PREC_TF32, 2e-2, 2e-2) : NULL;
        if (r)
            runs[nruns++] = r, r->model = 1;
    }
    /* data parallel at bf16: cuDNN's 16-bit filter gradients held until one
       launch converts them all before the all-reduce that reads them
       (codegen.c cg_grad_stage), no cast after each call */
    {
        ir_graph *g = model(src, "lenet", 1, 2);
        run *r = g ? prepare_conv("lenet training step at bf16, 2 devices", g, PREC_BF16,
                                  CG_CONV_CUDNN, 5e-2, 5e-2) : NULL;
        if (r) {
            runs[nruns++] = r, r->model = 1;
            int batched = 0, single = 0;
            for (int d = 0; d < r->p->ndevices; d++)
                for (int i = 0; i < r->p->devices[d].nsteps; i++) {
                    const char *w = r->p->devices[d].steps[i].what;
                    batched += w && strstr(w, "gradients to float in one launch") != NULL;
                    single += w && strstr(w, ".weight.grad to f32") != NULL;
                }
            if (batched != 2 || single)
                fail(r->what, "%d launches of gradients to float, %d casts of one (want 2, 0)",
                     batched, single);
            else
                npassed++;
        }
    }
    /* lenet's training step with its convolutions as implicit GEMMs, and as
       cuDNN calls on channels-last copies (conv2's filter a shadow, made
       channels-last once a step and read by its forward and backward data).
       At bf16 the image is converted once a step, for conv1's forward and
       filter gradient both (a shadow of the input). */
    for (int impl = CG_CONV_IGEMM; impl < CG_CONV_NIMPLS; impl++) {
        const char *way = cg_conv_name((cg_conv_impl)impl);
        for (int devices = 1; devices <= 2; devices++) {
            ir_graph *g = model(src, "lenet", 1, devices);
            char what[96];
            snprintf(what, sizeof what, "lenet training step, %d device%s, %s", devices,
                     devices > 1 ? "s" : "", way);
            run *r = g ? prepare_conv(what, g, PREC_FP32, (cg_conv_impl)impl, 2e-5, 2e-4) : NULL;
            if (r)
                runs[nruns++] = r, r->model = 1;
        }
        ir_graph *g = model(src, "lenet", 1, 1);
        char what[96];
        snprintf(what, sizeof what, "lenet training step at bf16, %s", way);
        run *r = g ? prepare_conv(what, g, PREC_BF16, (cg_conv_impl)impl, 5e-2, 5e-2) : NULL;
        if (r)
            runs[nruns++] = r, r->model = 1;
        if (r) {
            /* each shadow made by one kernel a step (the image's among the
               run's 16-bit copies in one launch) and read by library calls */
            int nhwc = impl == CG_CONV_CUDNN_NHWC, filters = 0, images = 0, shadows = 0;
            const cg_device *d = &r->p->devices[0];
            cg_ref img = {CG_NREGIONS, -1}, flt = {CG_NREGIONS, -1};
            for (int i = 0; i < d->nvalues; i++) {
                const cg_value *x = &d->values[i];
                int is_flt = x->kind == CG_VALUE_SHADOW && !strcmp(x->name, "conv2.weight.bf16.krsc");
                int is_img = x->kind == CG_VALUE_SHADOW && !strcmp(x->name, "image.bf16");
                if (is_flt)
                    flt = x->at;
                if (is_img)
                    img = x->at;
                shadows += is_flt || is_img;
            }
            for (int k = 0; k < d->nsteps; k++)
                for (int a = 0; d->steps[k].kind == CG_STEP_KERNEL && a < d->steps[k].u.launch.nargs;
                     a++) {
                    cg_ref b = d->steps[k].u.launch.args[a].buf;
                    const char *kn = r->p->kernels[d->steps[k].u.launch.kernel].name;
                    if (d->steps[k].u.launch.args[a].kind != CG_ARG_BUFFER ||
                        (!strstr(kn, "cast") && !strstr(kn, "transpose")))
                        continue; /* made by a cast or transpose; read by the others */
                    filters += b.region == flt.region && b.offset == flt.offset;
                    images += b.region == img.region && b.offset == img.offset;
                }
            if (filters != nhwc || images != 1 || shadows != 1 + nhwc)
                fail(what, "conv2's filter made channels-last %d times, the image converted %d "
                     "times, %d such shadows: want %d, 1 and %d", filters, images, shadows, nhwc,
                     1 + nhwc);
            else
                npassed++;
        }
    }
    /* a small ResNet's training step channels-last: at fp32 (asked), and at
       bf16 and fp16 (the default there): no layout transpose of gnc's or
       cuDNN's (the image has 3 channels: its copies for the stem's two
       calls are the program's edge), against the CPU executor */
    for (int prec = PREC_FP32; prec <= PREC_FP16; prec += prec == PREC_FP32 ? 2 : 1) {
        ir_graph *g = resnet_mini_graph(1, PT_DATA);
        cg_options o = cg_options_default();
        o.precision = (ir_precision)prec;
        o.layout = prec == PREC_FP32 ? CG_LAYOUT_NHWC : CG_LAYOUT_AUTO;
        o.loss_scale = 64; /* fp16: 65536 overflows this step's gradients: a skipped step */
        /* 16 bits: the stem's weight gradient differs from the CPU's by up
           to 0.064 (the bf16 rounding of the activations it sums; 0.056 with
           the batchnorm kernels of before, whose sums were doubles) */
        double tol = prec == PREC_FP32 ? 2e-4 : 8e-2;
        run *r = g ? prepare_opts("resnet_mini training step", g, &o, tol, tol) : NULL;
        if (!r)
            continue;
        runs[nruns++] = r, r->model = 1;
        cg_run_stats st;
        cg_run_stats_of(r->p, 0, &st);
        int held = 0, calls = 0, nhwc_calls = 0;
        for (int v = 0; v < r->p->devices[0].nvalues; v++)
            held += r->p->devices[0].values[v].nhwc;
        for (int k = 0; k < r->p->devices[0].nsteps; k++) {
            const cg_step *s = &r->p->devices[0].steps[k];
            calls += s->kind == CG_STEP_CONV;
            nhwc_calls += s->kind == CG_STEP_CONV && s->u.conv.nhwc;
        }
        /* fp32: the filters' channels-last copies are transposes of their own
           (at 16 bits the launch of 16-bit copies permutes them) */
        int own = 2 + (prec == PREC_FP32 ? 5 : 0);
        if (st.layout_library || st.layout_own != own || !held || nhwc_calls != calls)
            fail(r->what, "%d of %d cuDNN calls channels-last, %d values held so, layout "
                 "transposes: %d own, %d cuDNN's (want all, some, %d and 0)", nhwc_calls, calls,
                 held, st.layout_own, st.layout_library, own);
        else
            npassed++;
    }
    /* and on two devices, at fp32 channels-last and at bf16, each way of
       splitting it: the batch
       (channels-last throughout, the gradients' all-reduces NCHW), pipeline
       stages (what crosses between them NCHW) and tensor parallelism (the
       split channels NCHW) */
    static const struct {
        pt_strategy s;
        const char *name;
    } ways[] = {{PT_DATA, "data"}, {PT_PIPELINE, "pipeline"}, {PT_TENSOR, "tensor"}};
    for (size_t w = 0; w < 2 * sizeof ways / sizeof *ways; w++) {
        int bf16 = w % 2;
        ir_graph *g = resnet_mini_graph(2, ways[w / 2].s);
        char what[96];
        snprintf(what, sizeof what, "resnet_mini training step, 2 devices, %s", ways[w / 2].name);
        cg_options o = cg_options_default();
        o.precision = bf16 ? PREC_BF16 : PREC_FP32;
        o.layout = bf16 ? CG_LAYOUT_AUTO : CG_LAYOUT_NHWC;
        run *r = g ? prepare_opts(what, g, &o, bf16 ? 8e-2 : 2e-4, bf16 ? 8e-2 : 2e-4) : NULL;
        if (!r)
            continue;
        runs[nruns++] = r, r->model = 1;
        int held = 0;
        for (int d = 0; d < r->p->ndevices; d++)
            for (int v = 0; v < r->p->devices[d].nvalues; v++)
                held += r->p->devices[d].values[v].nhwc;
        if (!held)
            fail(r->what, "no value channels-last");
        else
            npassed++;
    }
    /* the op table walked with integer operands (op_walk.h): wherever the shape
       rule accepts the node, codegen makes its kernel and the emulation
       computes the CPU executor's integers */
    int walked = 0;
    for (int op = 0; op < IR_NOPS; op++)
        for (int t = 0; t < OW_NDTYPES; t++) {
            ir_graph *g = ow_node_graph((ir_op)op, ow_dtypes[t]);
            char what[96];
            snprintf(what, sizeof what, "%s of %s operands", ir_ops[op].name,
                     ir_dtype_name(ow_dtypes[t]));
            run *r = g ? prepare(what, g, PREC_FP32, 0, 0) : NULL;
            if (r)
                runs[nruns++] = r, walked++;
        }
    printf("integer operands: %d nodes accepted by the shape rules, each emulated\n", walked);
    /* 4: the state */
    int first_state = nruns;
    const op_case *ce = NULL, *cep = NULL, *em = NULL;
    for (int i = 0; i < NCASES; i++) {
        if (strcmp(cases[i].name, "cross_entropy") == 0)
            ce = &cases[i];
        if (strcmp(cases[i].name, "cross_entropy many logits in parts") == 0)
            cep = &cases[i];
        if (strcmp(cases[i].name, "embedding") == 0)
            em = &cases[i];
    }
    run *rce = prepare("label out of range", parse_case(ce, 0, 0), PREC_FP32, 0, 0);
    run *rcep = prepare("label out of range, a term per row", parse_case(cep, 0, 0), PREC_FP32, 0, 0);
    run *rem = prepare("index out of range", parse_case(em, 0, 0), PREC_FP32, 0, 0);
    ir_graph *lg = model(src, "lenet", 1, 1);
    run *rls = lg ? prepare("lenet fp16 loss scaling", lg, PREC_FP16, 0, 0) : NULL;
    if (rce)
        runs[nruns++] = rce;
    if (rcep)
        runs[nruns++] = rcep;
    if (rem)
        runs[nruns++] = rem;
    if (rls)
        runs[nruns++] = rls;

    /* --only TEXT: the runs whose names hold it (the rest made, not run) */
    for (int i = 0; only && i < first_state; i++)
        runs[i]->compile_only |= !strstr(runs[i]->what, only);
    if (on_gpu) { /* the same runs on the GPU executor instead of the host */
        gpu_env env;
        char why[1024];
        int rc = gpu_env_init(&env, fake, workdir, why, sizeof why);
        if (rc) {
            printf("%s: %s\n", rc == 77 ? "skipped" : "FAIL", why);
            return rc == 77 ? 77 : 1;
        }
        for (int i = 0; i < first_state; i++)
            if (!runs[i]->compile_only)
                check_gpu(&env, runs[i]);
        gpu_env_free(&env);
        for (int i = 0; i < nruns; i++)
            run_free(runs[i]);
        printf("%d passed, %d failed (on the %s)\n", npassed, nfailed,
               fake ? "stand-ins" : "GPU");
        return nfailed ? 1 : 0;
    }
    cg_program *progs[1024];
    for (int i = 0; i < nruns; i++) {
        runs[i]->prog = i;
        progs[i] = runs[i]->p;
        int fused = 0, kernels = 0;
        check_conv_epilogue(runs[i], &fused, &kernels);
    }
    char err[4096];
    cg_host *h = cg_host_build(progs, nruns, workdir, err, sizeof err);
    if (!h) {
        fail("the host build of the kernels", "%s", err);
    } else {
        for (int i = 0; i < first_state; i++)
            if (!runs[i]->compile_only)
                check(h, runs[i]);
        (void)first_model;
        if (rce)
            status_case(h, rce, CG_STATUS_LABEL, 4, 12);
        if (rcep)
            status_case(h, rcep, CG_STATUS_LABEL, 700, 5000);
        if (rem)
            status_case(h, rem, CG_STATUS_EMBEDDING_INDEX, 5, -3);
        if (rls)
            loss_scale_case(h, rls);
        cg_host_free(h);
    }
    for (int i = 0; i < nruns; i++)
        run_free(runs[i]);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
