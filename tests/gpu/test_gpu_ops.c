/* The CUDA runtime against the CPU executor, op by op: on a GPU (label gpu;
 * exits 77, which CTest reports as skipped, where there is no driver, no GPU
 * or no NVRTC: never passed without having run), or on the stand-in
 * libraries of tests/fakecuda/ (label unit: what CI can run).
 *
 *   1. ops of generated kernels, of cuBLASLt matmuls (with their bias and
 *      ReLU epilogues) and of cuDNN convolutions (forward with bias, residual
 *      and ReLU fused; backward data and filter), eager, against rt_exec
 *      within atol + rtol |ref|;
 *   2. the same program replayed as a CUDA graph: bitwise equal to eager (fp32,
 *      the same kernels and library calls in the same order);
 *   3. the arena allocated is the memory plan's size, to the byte;
 *   4. the convolutions again as implicit-GEMM kernels (--conv igemm), fp32.
 * Training steps, several devices: tests/gpu/test_gpu_train.c.
 *
 *   test_gpu_ops WORK_DIR [--fake DIR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "cuda.h"
#include "exec.h"
#include "gpu_env.h"
#include "passes.h"

typedef struct {
    const char *name, *ir;
    double atol, rtol;
    int fuse;                   /* run the fuse pass first */
} op_case;

#define G(body) "graph t {\n" body "}\n"
#define EL(op, shape) G("  input %x: f32" shape "\n  %y: f32" shape " = " op "(%x)\n  output y = %y\n")

static const op_case cases[] = {
    {"neg", EL("neg", "[3, 37]"), 0, 0, 0},
    {"relu", EL("relu", "[4, 64]"), 0, 0, 0},
    {"sigmoid", EL("sigmoid", "[3, 37]"), 1e-6, 1e-5, 0},
    {"tanh", EL("tanh", "[4, 64]"), 1e-6, 1e-5, 0},
    {"gelu", EL("gelu", "[3, 37]"), 1e-6, 1e-5, 0},
    {"silu", EL("silu", "[3, 37]"), 1e-6, 1e-5, 0},
    {"exp", EL("exp", "[3, 37]"), 1e-6, 1e-5, 0},
    {"abs", EL("abs", "[3, 37]"), 0, 0, 0},
    {"softplus", EL("softplus", "[3, 37]"), 1e-6, 1e-5, 0},
    {"hardswish", EL("hardswish", "[3, 37]"), 1e-6, 1e-5, 0},
    {"softsign", EL("softsign", "[3, 37]"), 1e-6, 1e-5, 0},
    {"leaky_relu", G("  input %x: f32[3, 37]\n  %y: f32[3, 37] = leaky_relu(%x) {slope = 0.2}\n"
                     "  output y = %y\n"), 1e-7, 1e-6, 0},
    {"gelu_tanh", EL("gelu_tanh", "[3, 37]"), 1e-6, 1e-5, 0},
    {"pow", G("  input %x: f32[3, 37]\n  %y: f32[3, 37] = pow(%x) {p = 3.0}\n"
              "  output y = %y\n"), 1e-6, 1e-5, 0},
    {"clamp", G("  input %x: f32[3, 37]\n  %y: f32[3, 37] = clamp(%x) {min = -0.5, max = 0.25}\n"
                "  output y = %y\n"), 0, 0, 0},
    {"add", G("  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n  %y: f32[3, 37] = add(%a, %b)\n"
              "  output y = %y\n"), 0, 1e-7, 0},
    {"maximum", G("  input %a: f32[3, 37]\n  input %b: f32[37]\n"
                  "  %y: f32[3, 37] = maximum(%a, %b)\n  output y = %y\n"), 0, 0, 0},
    {"reduce_max", G("  input %x: f32[3, 37]\n  %y: f32[3, 1] = reduce_max(%x) {axis = 1}\n"
                     "  output y = %y\n"), 0, 0, 0},
    {"argmax", G("  input %x: f32[5, 37]\n  %y: i32[1, 37] = argmax(%x) {axis = 0}\n"
                 "  output y = %y\n"), 0, 0, 0},
    {"gt where", G("  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n"
                   "  %m: f32[3, 37] = gt(%a, %b)\n  %y: f32[3, 37] = where(%m, %a, %b)\n"
                   "  output m = %m\n  output y = %y\n"), 0, 0, 0},
    {"softmax rows", G("  input %x: f32[3, 5, 40]\n  %y: f32[3, 5, 40] = softmax(%x) {axis = 2}\n"
                       "  output y = %y\n"), 1e-7, 1e-5, 0},
    /* FlashAttention's kernels (codegen/attention.c): several tiles of rows
       and keys, ragged, causal with more queries than keys; the gradient on
       the forward's own out and lse */
    {"attention", G("  input %q: f32[2, 3, 70, 16]\n  input %k: f32[2, 3, 45, 16]\n"
                    "  input %v: f32[2, 3, 45, 24]\n"
                    "  %y: f32[2, 3, 70, 24], %l: f32[2, 3, 70] = attention(%q, %k, %v) "
                    "{causal = 1, scale = 0.25}\n  output y = %y\n  output lse = %l\n"),
     1e-6, 1e-5, 0},
    {"attention_grad", G("  input %q: f32[2, 2, 40, 32]\n  input %k: f32[2, 2, 77, 32]\n"
                         "  input %v: f32[2, 2, 77, 8]\n  input %dy: f32[2, 2, 40, 8]\n"
                         "  %y: f32[2, 2, 40, 8], %l: f32[2, 2, 40] = attention(%q, %k, %v) "
                         "{causal = 0, scale = 0.5}\n"
                         "  %dq: f32[2, 2, 40, 32], %dk: f32[2, 2, 77, 32], %dv: f32[2, 2, 77, 8] = "
                         "attention_grad(%dy, %q, %k, %v, %y, %l) {causal = 0, scale = 0.5}\n"
                         "  output dq = %dq\n  output dk = %dk\n  output dv = %dv\n"),
     1e-6, 1e-5, 0},
    /* grouped-query attention: 6 query heads over 2 key/value heads, causal;
       dk and dv each the sum of their group's 3 heads */
    {"attention_grad gqa", G("  input %q: f32[2, 6, 70, 32]\n  input %k: f32[2, 2, 45, 32]\n"
                             "  input %v: f32[2, 2, 45, 16]\n  input %dy: f32[2, 6, 70, 16]\n"
                             "  %y: f32[2, 6, 70, 16], %l: f32[2, 6, 70] = attention(%q, %k, %v) "
                             "{causal = 1, scale = 0.3}\n"
                             "  %dq: f32[2, 6, 70, 32], %dk: f32[2, 2, 45, 32], %dv: f32[2, 2, 45, 16] = "
                             "attention_grad(%dy, %q, %k, %v, %y, %l) {causal = 1, scale = 0.3}\n"
                             "  output y = %y\n  output lse = %l\n"
                             "  output dq = %dq\n  output dk = %dk\n  output dv = %dv\n"),
     1e-6, 1e-5, 0},
    {"layernorm", G("  input %x: f32[2, 1500]\n  input %w: f32[1500]\n  input %b: f32[1500]\n"
                    "  %y: f32[2, 1500] = layernorm(%x, %w, %b) {eps = 1e-05}\n  output y = %y\n"),
     1e-5, 1e-5, 0},
    {"maxpool2d", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = maxpool2d(%x) "
                    "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], dilation = [1, 1], "
                    "ceil_mode = 0}\n  output y = %y\n"), 0, 0, 0},
    {"avgpool2d ceil", G("  input %x: f32[2, 3, 8, 8]\n  %y: f32[2, 3, 5, 5] = avgpool2d(%x) "
                         "{kernel = [3, 3], stride = [2, 2], pad = [1, 1], count_include_pad = 1, "
                         "ceil_mode = 1}\n  output y = %y\n"), 1e-7, 1e-6, 0},
    {"adaptive_avgpool2d", G("  input %x: f32[2, 3, 9, 7]\n  %y: f32[2, 3, 4, 5] = "
                             "adaptive_avgpool2d(%x) {size = [4, 5]}\n  output y = %y\n"),
     1e-7, 1e-6, 0},
    /* upsample2d: nearest by PyTorch's float index (exact), bilinear both ways */
    {"upsample2d nearest", G("  input %x: f32[2, 3, 5, 7]\n  %y: f32[2, 3, 7, 4] = upsample2d(%x) "
                             "{size = [7, 4], mode = 0, align_corners = 0, scale_h = 1.5, "
                             "scale_w = 0.6}\n  output y = %y\n"), 0, 0, 0},
    {"upsample2d bilinear", G("  input %x: f32[2, 3, 4, 5]\n  %y: f32[2, 3, 6, 7] = upsample2d(%x) "
                              "{size = [6, 7], mode = 1, align_corners = 0, scale_h = 1.5, "
                              "scale_w = 1.5}\n  output y = %y\n"), 1e-7, 1e-6, 0},
    {"upsample2d corners", G("  input %x: f32[2, 3, 9, 5]\n  %y: f32[2, 3, 4, 11] = upsample2d(%x) "
                             "{size = [4, 11], mode = 1, align_corners = 1, scale_h = 0.0, "
                             "scale_w = 0.0}\n  output y = %y\n"), 1e-7, 1e-6, 0},
    {"upsample2d_grad nearest", G("  input %dy: f32[2, 3, 7, 4]\n  %y: f32[2, 3, 5, 7] = "
                                  "upsample2d_grad(%dy) {shape = [2, 3, 5, 7], mode = 0, "
                                  "align_corners = 0, scale_h = 1.5, scale_w = 0.6}\n"
                                  "  output y = %y\n"), 0, 1e-7, 0},
    {"upsample2d_grad bilinear", G("  input %dy: f32[2, 3, 6, 7]\n  %y: f32[2, 3, 4, 5] = "
                                   "upsample2d_grad(%dy) {shape = [2, 3, 4, 5], mode = 1, "
                                   "align_corners = 0, scale_h = 1.5, scale_w = 1.5}\n"
                                   "  output y = %y\n"), 1e-6, 1e-5, 0},
    {"transpose", G("  input %x: f32[2, 3, 4]\n  %y: f32[4, 2, 3] = transpose(%x) {perm = [2, 0, 1]}\n"
                    "  output y = %y\n"), 0, 0, 0},
    {"arange", G("  %y: f32[300] = arange() {start = -2.5, step = 0.125}\n  output y = %y\n"),
     0, 0, 0},
    {"cast", G("  input %x: f32[6, 50]\n  %s: f32[] = const() {value = 1e9}\n"
               "  %m: f32[6, 50] = mul(%x, %s)\n  %i: i32[6, 50] = cast(%m)\n"
               "  %y: f32[6, 50] = cast(%i)\n  output y = %y\n"), 0, 0, 0},
    {"pad", G("  input %x: f32[4, 6, 3]\n  %y: f32[5, 6, 7] = pad(%x) {before = [1, 0, 3], "
              "after = [0, 0, 1], value = -0.5}\n  output y = %y\n"), 0, 0, 0},
    {"slice", G("  input %x: f32[4, 6, 3]\n  %y: f32[4, 3, 3] = slice(%x) {axis = 1, start = 2, "
                "size = 3}\n  output y = %y\n"), 0, 0, 0},
    {"cross_entropy", G("  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                        "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.0, ignore_index = -100, split = 1}\n  output y = %y\n"), 1e-6, 1e-5, 0},
    /* labels in [0, 10) (fill) */
    {"cross_entropy 4-d smoothed, ignoring", G("  input %x: f32[2, 10, 3, 4]\n  input %label: i32[2, 3, 4]\n"
                                               "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.1, ignore_index = 2, split = 1}\n"
                                               "  output y = %y\n"), 1e-6, 1e-5, 0},
    {"nll_loss 4-d, ignoring", G("  input %x: f32[2, 10, 3, 4]\n  input %label: i32[2, 3, 4]\n"
                                 "  %y: f32[] = nll_loss(%x, %label) {ignore_index = 1, split = 1}\n  output y = %y\n"),
     1e-6, 1e-5, 0},
    /* cuBLASLt */
    {"matmul", G("  input %a: f32[2, 3, 5]\n  input %b: f32[5, 4]\n"
                 "  %y: f32[2, 3, 4] = matmul(%a, %b)\n  output y = %y\n"), 1e-6, 1e-5, 0},
    {"matmul broadcast batch", G("  input %a: f32[2, 3, 4, 5]\n  input %b: f32[2, 1, 5, 6]\n"
                                 "  %y: f32[2, 3, 4, 6] = matmul(%a, %b)\n  output y = %y\n"), 1e-6, 1e-5, 0},
    {"dense", G("  input %x: f32[2, 3, 7]\n  input %w: f32[5, 7]\n  input %b: f32[5]\n"
                "  %y: f32[2, 3, 5] = dense(%x, %w, %b)\n  output y = %y\n"), 1e-6, 1e-5, 0},
    {"dense_grad_input", G("  input %dy: f32[2, 3, 5]\n  input %w: f32[5, 7]\n"
                           "  %y: f32[2, 3, 7] = dense_grad_input(%dy, %w)\n  output y = %y\n"), 1e-6, 1e-5, 0},
    {"dense_grad_weight", G("  input %dy: f32[2, 3, 5]\n  input %x: f32[2, 3, 7]\n"
                            "  %y: f32[5, 7] = dense_grad_weight(%dy, %x)\n  output y = %y\n"), 1e-6, 1e-5, 0},
    {"fused dense+relu", G("  input %x: f32[4, 7]\n  input %w: f32[5, 7]\n  input %b: f32[5]\n"
                           "  %d: f32[4, 5] = dense(%x, %w, %b)\n  %y: f32[4, 5] = relu(%d)\n"
                           "  output y = %y\n"), 1e-6, 1e-5, 1},
    /* cuDNN */
    {"conv2d stride pad", G("  input %x: f32[2, 4, 9, 9]\n  input %w: f32[6, 4, 3, 3]\n  input %b: f32[6]\n"
                            "  %y: f32[2, 6, 5, 5] = conv2d(%x, %w, %b) {stride = [2, 2], pad = [1, 1], "
                            "dilation = [1, 1], groups = 1}\n  output y = %y\n"), 1e-5, 1e-5, 0},
    {"conv2d groups dilation", G("  input %x: f32[2, 4, 8, 8]\n  input %w: f32[6, 2, 3, 3]\n"
                                 "  %y: f32[2, 6, 8, 8] = conv2d(%x, %w) {stride = [1, 1], pad = [2, 2], "
                                 "dilation = [2, 2], groups = 2}\n  output y = %y\n"), 1e-5, 1e-5, 0},
    {"conv2d_grad_input", G("  input %dy: f32[2, 6, 5, 5]\n  input %w: f32[6, 4, 3, 3]\n"
                            "  %y: f32[2, 4, 9, 9] = conv2d_grad_input(%dy, %w) {stride = [2, 2], pad = [1, 1], "
                            "dilation = [1, 1], groups = 1, shape = [2, 4, 9, 9]}\n  output y = %y\n"),
     1e-5, 1e-5, 0},
    /* conv_transpose2d: output_padding (one row past the window's reach), dilation,
       groups, and its bias added */
    {"conv_transpose2d", G("  input %x: f32[2, 4, 5, 4]\n  input %w: f32[4, 3, 3, 3]\n  input %b: f32[6, 1, 1]\n"
                           "  %c: f32[2, 6, 12, 8] = conv2d_grad_input(%x, %w) {stride = [2, 2], pad = [1, 1], "
                           "dilation = [2, 1], groups = 2, shape = [2, 6, 12, 8]}\n"
                           "  %y: f32[2, 6, 12, 8] = add(%c, %b)\n  output y = %y\n"),
     1e-5, 1e-5, 0},
    {"conv2d_grad_weight", G("  input %dy: f32[2, 6, 5, 5]\n  input %x: f32[2, 4, 9, 9]\n"
                             "  %y: f32[6, 4, 3, 3] = conv2d_grad_weight(%dy, %x) {stride = [2, 2], "
                             "pad = [1, 1], dilation = [1, 1], groups = 1, shape = [6, 4, 3, 3]}\n"
                             "  output y = %y\n"), 1e-5, 1e-5, 0},
    {"fused conv2d+add+relu", G("  input %x: f32[2, 3, 6, 6]\n  input %w: f32[4, 3, 3, 3]\n  input %b: f32[4]\n"
                                "  input %r: f32[2, 4, 6, 6]\n"
                                "  %c: f32[2, 4, 6, 6] = conv2d(%x, %w, %b) {stride = [1, 1], pad = [1, 1], "
                                "dilation = [1, 1], groups = 1}\n  %s: f32[2, 4, 6, 6] = add(%r, %c)\n"
                                "  %y: f32[2, 4, 6, 6] = relu(%s)\n  output y = %y\n"), 1e-5, 1e-5, 1},
};

static int nfailed, npassed;

static void fill(const ir_value *v, void *data, uint64_t seed)
{
    int64_t n = ir_type_numel(&v->type);
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + (uint64_t)v->id + 1;
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        if (v->type.dtype == IR_F32)
            ((float *)data)[i] = (float)((double)(r >> 11) * 0x1.0p-53 * 2 - 1);
        else if (v->type.dtype == IR_I32)
            ((int32_t *)data)[i] = (int32_t)(r % 10);
    }
}

static void one(const gpu_env *env, const op_case *c, cg_conv_impl conv)
{
    char err[1024];
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(c->name, c->ir, strlen(c->ir), &d);
    if (!g || ir_verify(g, &d) || (c->fuse && pass_fuse(g, &d) < 0)) {
        printf("FAIL %s: does not parse\n", c->name);
        nfailed++;
        diag_free(&d);
        return;
    }
    mp_plan *mp = mp_plan_graph(g);
    cg_options o = cg_options_default();
    o.deterministic = 1; /* graph replay bitwise equal to eager */
    o.conv = conv;
    cg_program *p = cg_generate(g, mp, &o, &d);
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    gpu_run *ge = NULL, *gg = NULL;
    rt_cuda *eager = NULL, *graph = NULL;
    if (!p || cg_compile(p, NULL, NULL, err, sizeof err) || !x ||
        !(ge = gpu_open(env, p, NULL, 1, err, sizeof err)) ||
        !(gg = gpu_open(env, p, NULL, 0, err, sizeof err))) {
        printf("FAIL %s: %s\n", c->name, err);
        nfailed++;
        goto done;
    }
    eager = ge->x, graph = gg->x;
    if (rt_cuda_region_bytes(eager, 0, CG_ARENA) != p->devices[0].region_bytes[CG_ARENA] ||
        p->devices[0].region_bytes[CG_ARENA] != mp->device_bytes[0]) {
        printf("FAIL %s: arena of %lld bytes, the plan's %lld\n", c->name,
               (long long)rt_cuda_region_bytes(eager, 0, CG_ARENA), (long long)mp->device_bytes[0]);
        nfailed++;
    }
    for (int i = 0; i < g->ninputs; i++) {
        fill(g->inputs[i], rt_exec_data(x, g->inputs[i]), 1);
        if (rt_cuda_write(eager, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]), err, sizeof err) ||
            rt_cuda_write(graph, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]), err, sizeof err)) {
            printf("FAIL %s: %s\n", c->name, err);
            nfailed++;
            goto done;
        }
    }
    if (rt_exec_run(x, err, sizeof err) || rt_cuda_run(eager, err, sizeof err) ||
        rt_cuda_run(graph, err, sizeof err) || rt_cuda_run(graph, err, sizeof err)) {
        printf("FAIL %s: %s\n", c->name, err);
        nfailed++;
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ir_value *v = g->outputs[i].value;
        int64_t n = ir_type_numel(&v->type);
        float *a = calloc((size_t)n + 1, 4), *b = calloc((size_t)n + 1, 4);
        const float *ref = rt_exec_data(x, v);
        rt_cuda_read(eager, 0, v, a, err, sizeof err);
        rt_cuda_read(graph, 0, v, b, err, sizeof err);
        int bad = memcmp(a, b, (size_t)n * 4) != 0;
        if (bad)
            printf("FAIL %s: graph replay differs from eager launches\n", c->name);
        for (int64_t k = 0; k < n && !bad; k++)
            if (!(fabs((double)a[k] - ref[k]) <= c->atol + c->rtol * fabs(ref[k]))) {
                printf("FAIL %s: [%lld] got %.9g want %.9g\n", c->name, (long long)k, a[k], ref[k]);
                bad = 1;
            }
        bad ? nfailed++ : npassed++;
        free(a);
        free(b);
    }
done:
    gpu_close(ge);
    gpu_close(gg);
    rt_exec_free(x);
    cg_program_free(p);
    mp_plan_free(mp);
    ir_graph_free(g);
    diag_free(&d);
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_ops WORK_DIR [--fake DIR]\n");
        return 2;
    }
    gpu_env env;
    int rc = gpu_env_init(&env, argc >= 4 && strcmp(argv[2], "--fake") == 0 ? argv[3] : NULL,
                          argv[1], err, sizeof err);
    if (rc) {
        printf("%s: %s\n", rc == 77 ? "skipped" : "FAIL", err);
        return rc == 77 ? 77 : 1;
    }
    rt_set_threads(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        one(&env, &cases[i], CG_CONV_CUDNN);
    for (int impl = CG_CONV_IGEMM; impl < CG_CONV_NIMPLS; impl++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (strstr(cases[i].name, "conv2d")) {
                op_case c = cases[i];
                char name[128];
                snprintf(name, sizeof name, "%s (%s)", c.name, cg_conv_name((cg_conv_impl)impl));
                c.name = name;
                one(&env, &c, (cg_conv_impl)impl);
            }
    gpu_env_free(&env);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
