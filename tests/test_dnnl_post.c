/* oneDNN's post-ops (runtime/cpu/dnnl.c) against the executor's own epilogue.
 *
 * A convolution that leads a fused group runs the group's first members as
 * oneDNN post-ops (ReLU, inference batchnorm, the residual add, a scalar add
 * or mul); GNC_DNNL_POSTOPS=0 runs them after the primitive as the epilogue.
 * Both must give the same bits, whatever kernels oneDNN picks on the CPU at
 * hand (dnnl.c checks each chain by a trial run before it takes it).  Each
 * program runs with the post-ops on 1, 2, 3 and 4 threads and once with
 * GNC_DNNL_POSTOPS=0 on 1 thread; every output must equal the first run's bit
 * for bit, and the post-op runs must have run some members as post-ops (else
 * the test would compare the epilogue with itself): every program's where
 * oneDNN's kernels are AVX2's or AVX-512's (jit:avx2, brgconv:avx512_core:
 * where they are known to take them), at least one program's on other ISAs
 * (DNNL_MAX_CPU_ISA=SSE41: some shapes get no JIT kernel).
 *
 * `test_dnnl_post SOURCE_DIR sum` takes residuals only as oneDNN's sum
 * post-op (GNC_DNNL_POSTOPS=sum), which jit:avx2 rounds otherwise than the
 * epilogue: there the trials must refuse some chains (the check has teeth)
 * and the bits must still be the epilogue's.  Programs: resnet18 and lenet through the default inference
 * pipeline (batchnorms folded into the convolutions: post-ops ReLU and the
 * residual add), resnet18 without fold_bn (the batchnorms as post-ops too),
 * and a hand-written one whose residual is the convolution's own input (the
 * add's result may take that buffer in place) and whose chain has a scalar
 * mul and add, then a sigmoid that oneDNN does not take (the rest of the
 * chain runs after it).
 *
 * The post-op runs leave results that only convolutions read channels-last
 * where oneDNN computes in plain NHWC (dnnl.c, x->nhwc); one more run with
 * that off (GNC_DNNL_NHWC=0) must give the same bits too, and where oneDNN's
 * kernels are AVX-512's (brgconv: plain NHWC) some results must have stayed
 * channels-last.
 *
 * Without oneDNN built in (or with GNC_DNNL=0) there is nothing to compare:
 * the test says so and passes.
 *
 *   test_dnnl_post SOURCE_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "frontend.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"

static int nfailed;
static long total_taken, total_refused, total_nhwc;
static const char *post_mode = "1"; /* GNC_DNNL_POSTOPS of the post-op runs */
static int every_program;           /* every program must take post-ops here */

/* splitmix64 */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Runs g on threads threads, post-ops on or off; *out: a copy of each float
 * output, one after another.  Returns the members run as post-ops, or -1. */
static long run(ir_graph *g, int threads, int post, int nhwc, float **out, size_t *nout)
{
    char err[512];
    setenv("GNC_DNNL_POSTOPS", post ? post_mode : "0", 1); /* read at the executor's first conv */
    setenv("GNC_DNNL_NHWC", nhwc ? "1" : "0", 1);
    rt_set_threads(threads);
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    if (!x) {
        printf("FAIL: rt_exec_new: %s\n", err);
        return -1;
    }
    rt_exec_init_params(x, 7);
    for (int i = 0; i < g->ninputs; i++) { /* floats in [-1, 1), labels in [0, 10) */
        const ir_value *v = g->inputs[i];
        void *buf = rt_exec_data(x, v);
        for (int64_t j = 0, n = ir_type_numel(&v->type); j < n; j++) {
            double r = (double)(mix(((uint64_t)i << 40) ^ (uint64_t)j) >> 11) * 0x1p-53;
            if (v->type.dtype == IR_I32)
                ((int32_t *)buf)[j] = (int32_t)(r * 10);
            else if (v->type.dtype == IR_I64)
                ((int64_t *)buf)[j] = (int64_t)(r * 10);
            else
                ((float *)buf)[j] = (float)(2 * r - 1);
        }
    }
    long posts = -1;
    if (rt_exec_run(x, err, sizeof err) != 0) {
        printf("FAIL: run: %s\n", err);
        goto done;
    }
    size_t total = 0; /* the outputs are floats (logits, the loss) */
    for (int k = 0; k < g->noutputs; k++)
        total += (size_t)ir_type_numel(&g->outputs[k].value->type);
    *out = malloc(total * sizeof **out);
    *nout = total;
    total = 0;
    for (int k = 0; k < g->noutputs; k++) {
        size_t n = (size_t)ir_type_numel(&g->outputs[k].value->type);
        memcpy(*out + total, rt_exec_data(x, g->outputs[k].value), n * sizeof **out);
        total += n;
    }
    posts = x->dnnl_posts;
    total_refused += x->dnnl_refused;
    total_nhwc += x->dnnl_nhwc;
done:
    rt_exec_free(x);
    return posts;
}

/* Runs g every way and compares (see the top of the file). */
static void check(const char *desc, ir_graph *g)
{
    float *ref = NULL;
    size_t nref = 0;
    if (run(g, 1, 0, 1, &ref, &nref) < 0) {
        printf("FAIL %s: the epilogue run failed\n", desc);
        nfailed++;
        return;
    }
    long taken = 0;
    int failed = nfailed;
    for (int threads = 1; threads <= 5; threads++) {
        float *got = NULL;
        size_t ngot = 0;
        int nhwc = threads <= 4; /* the fifth run: 2 threads, all NCHW */
        long posts = run(g, nhwc ? threads : 2, 1, nhwc, &got, &ngot);
        if (posts < 0) {
            printf("FAIL %s: the post-op run on %d threads failed\n", desc, threads);
            nfailed++;
            continue;
        }
        taken = posts;
        size_t bad = 0, first = 0;
        for (size_t j = 0; j < nref && ngot == nref; j++)
            if (memcmp(&ref[j], &got[j], sizeof ref[j]) != 0 && !bad++)
                first = j;
        if (ngot != nref || bad) {
            printf("FAIL %s, %d threads%s: %zu of %zu output elements differ from the "
                   "epilogue's (first at %zu: %.9g, epilogue %.9g)\n",
                   desc, nhwc ? threads : 2, nhwc ? "" : ", GNC_DNNL_NHWC=0", bad, nref, first,
                   ngot == nref ? got[first] : 0.0, (double)ref[first]);
            nfailed++;
        }
        free(got);
    }
    total_taken += taken;
    if (taken <= 0 && every_program) {
        printf("FAIL %s: no fused op ran as a oneDNN post-op\n", desc);
        nfailed++;
    } else if (nfailed == failed) {
        printf("ok %s: %ld fused ops as post-ops, the same bits as the epilogue on 1-4 "
               "threads and all NCHW\n", desc, taken);
    }
    free(ref);
}

static void check_model(const char *root, const char *file, const char *batch,
                        const char *pipeline)
{
    char path[4096], desc[256];
    snprintf(path, sizeof path, "%s/models/%s", root, file);
    snprintf(desc, sizeof desc, "%s at batch %s, passes %s", file, batch, pipeline);
    const char *names[] = {"batch"}, *values[] = {batch};
    fe_options fo = {NULL, 1, names, values};
    pm_options pm = {.out = stdout};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &fo, &d);
    if (!g || pm_run(g, pipeline, &pm, &d) != 0) {
        printf("FAIL %s: does not build\n", desc);
        diag_print(&d, stdout);
        nfailed++;
    } else {
        check(desc, g);
    }
    diag_free(&d);
    if (g)
        ir_graph_free(g);
}

/* %res adds the convolution's own input %r0, read last there, and %a2 the
 * depthwise convolution's %y: the memory planner may give the result that
 * input's buffer.  Under DNNL_MAX_CPU_ISA=SSE41 the depthwise one runs on
 * oneDNN's GEMM-based convolution, which takes no post-ops (dnnl.c
 * take_posts). */
static const char residual_gir[] =
    "graph \"post\" {\n"
    "  input %x: f32[4, 8, 12, 12]\n"
    "  input %z: f32[4, 3, 9, 9]\n"
    "  param %w1: f32[8, 8, 3, 3] = uniform(-0.3, 0.3)\n"
    "  param %b1: f32[8] = uniform(-0.1, 0.1)\n"
    "  param %bn.weight: f32[8] = uniform(0.5, 1.5)\n"
    "  param %bn.bias: f32[8] = uniform(-0.5, 0.5)\n"
    "  buffer %bn.running_mean: f32[8] = uniform(-0.2, 0.2)\n"
    "  buffer %bn.running_var: f32[8] = uniform(0.5, 2.0)\n"
    "  param %w2: f32[3, 3, 3, 3] = uniform(-0.3, 0.3)\n"
    "  param %wd: f32[8, 1, 3, 3] = uniform(-0.3, 0.3)\n"
    "  %half: f32[] = const() {value = 0.5}\n"
    "  %r0: f32[4, 8, 12, 12] = relu(%x)\n"
    "  %c1: f32[4, 8, 12, 12] = conv2d(%r0, %w1, %b1) {stride = [1, 1], pad = [1, 1], "
    "dilation = [1, 1], groups = 1}\n"
    "  %bn1: f32[4, 8, 12, 12] = batchnorm(%c1, %bn.weight, %bn.bias, %bn.running_mean, "
    "%bn.running_var) {eps = 1e-05, momentum = 0.1}\n"
    "  %m: f32[4, 8, 12, 12] = mul(%bn1, %half)\n"
    "  %a: f32[4, 8, 12, 12] = add(%half, %m)\n"
    "  %res: f32[4, 8, 12, 12] = add(%a, %r0)\n"
    "  %sg: f32[4, 8, 12, 12] = sigmoid(%res)\n"
    "  %y: f32[4, 8, 12, 12] = relu(%sg)\n"
    "  %c2: f32[4, 3, 9, 9] = conv2d(%z, %w2) {stride = [1, 1], pad = [1, 1], "
    "dilation = [1, 1], groups = 1}\n"
    "  %r2: f32[4, 3, 9, 9] = relu(%c2)\n"
    "  %dw: f32[4, 8, 12, 12] = conv2d(%y, %wd) {stride = [1, 1], pad = [1, 1], "
    "dilation = [1, 1], groups = 8}\n"
    "  %a2: f32[4, 8, 12, 12] = add(%y, %dw)\n"
    "  %y2: f32[4, 8, 12, 12] = relu(%a2)\n"
    "  output y2 = %y2\n"
    "  output r2 = %r2\n"
    "}\n";

static void check_residual(void)
{
    diag d;
    diag_init(&d);
    pm_options pm = {.out = stdout};
    ir_graph *g = ir_parse("post.gir", residual_gir, sizeof residual_gir - 1, &d);
    if (!g || pm_run(g, "schedule,fuse", &pm, &d) != 0) {
        printf("FAIL post.gir: does not build\n");
        diag_print(&d, stdout);
        nfailed++;
    } else {
        check("post.gir (residuals in place of the input, scalar ops, a sigmoid after, depthwise)",
              g);
    }
    diag_free(&d);
    if (g)
        ir_graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 3 && strcmp(argv[2], "sum") == 0)) {
        fprintf(stderr, "usage: test_dnnl_post SOURCE_DIR [sum]\n");
        return 2;
    }
    /* every convolution on oneDNN: the 3x3 ones not on winograd.c, LeNet's
       not on direct.c */
    setenv("GNC_WINOGRAD", "0", 1);
    setenv("GNC_DIRECT", "0", 1);
    if (!rt_dnnl_enabled()) {
        printf("dnnl_post: oneDNN is not built in (or GNC_DNNL=0): nothing to compare\n");
        return 0;
    }
    const char *isa = rt_dnnl_isa();
    int sum = argc == 3 && strcmp(argv[2], "sum") == 0;
    post_mode = sum ? "sum" : "1";
    every_program = !sum && (strcmp(isa, "avx2") == 0 || strncmp(isa, "avx512_core", 11) == 0);
    printf("oneDNN's kernels here: %s (every program must take post-ops: %s)%s\n", isa,
           every_program ? "yes" : "no, one of them", sum ? "; residuals as sum post-ops" : "");
    check_residual();
    check_model(argv[1], "lenet.net", "16", pm_default_pipeline(0, 0, 0));
    check_model(argv[1], "resnet18.net", "4", pm_default_pipeline(0, 0, 0));
    check_model(argv[1], "resnet18.net", "4", "simplify,schedule,fuse");
    if (total_taken <= 0) {
        printf("FAIL: no program ran a fused op as a oneDNN post-op\n");
        nfailed++;
    }
    printf("%ld chains of post-ops refused by their trial runs\n", total_refused);
    printf("%ld results left channels-last in all\n", total_nhwc);
    if (strncmp(isa, "avx512", 6) == 0 && !sum && total_nhwc <= 0) {
        printf("FAIL: oneDNN's AVX-512 kernels compute in NHWC, yet no result stayed "
               "channels-last\n");
        nfailed++;
    }
    if (sum && strcmp(isa, "avx2") == 0 && total_refused <= 0) {
        printf("FAIL: jit:avx2's sum post-op was never refused: the trial would not catch "
               "other bits\n");
        nfailed++;
    }
    printf("dnnl_post: %d failed\n", nfailed);
    return nfailed ? 1 : 0;
}
