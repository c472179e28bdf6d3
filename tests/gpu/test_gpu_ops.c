/* The CUDA runtime on a GPU against the CPU executor (label gpu).  Exits 77,
 * which CTest reports as skipped, where there is no driver, no GPU or no
 * NVRTC: never passed without having run.
 *
 *   1. ops whose programs are kernels alone (the op list of
 *      tests/test_codegen.c; those with cuBLASLt, cuDNN or NCCL steps wait for
 *      the runtime to run such steps), eager, against rt_exec within
 *      atol + rtol |ref|;
 *   2. the same program replayed as a CUDA graph: bitwise equal to eager (fp32,
 *      the same kernels in the same order on one stream);
 *   3. the arena allocated is the memory plan's size, to the byte.
 * Not here yet: resnet18 training against the CPU losses (needs gemm and conv
 * steps).  This file compiles without a GPU; it has never run on one.
 *
 *   test_gpu_ops */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "cuda.h"
#include "exec.h"
#include "passes.h"

typedef struct {
    const char *name, *ir;
    double atol, rtol;
} op_case;

#define G(body) "graph t {\n" body "}\n"
#define EL(op, shape) G("  input %x: f32" shape "\n  %y: f32" shape " = " op "(%x)\n  output y = %y\n")

static const op_case cases[] = {
    {"neg", EL("neg", "[3, 37]"), 0, 0},
    {"relu", EL("relu", "[4, 64]"), 0, 0},
    {"sigmoid", EL("sigmoid", "[3, 37]"), 1e-6, 1e-5},
    {"tanh", EL("tanh", "[4, 64]"), 1e-6, 1e-5},
    {"gelu", EL("gelu", "[3, 37]"), 1e-6, 1e-5},
    {"add", G("  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n  %y: f32[3, 37] = add(%a, %b)\n"
              "  output y = %y\n"), 0, 1e-7},
    {"softmax rows", G("  input %x: f32[3, 5, 40]\n  %y: f32[3, 5, 40] = softmax(%x) {axis = 2}\n"
                       "  output y = %y\n"), 1e-7, 1e-5},
    {"layernorm", G("  input %x: f32[2, 1500]\n  input %w: f32[1500]\n  input %b: f32[1500]\n"
                    "  %y: f32[2, 1500] = layernorm(%x, %w, %b) {eps = 1e-05}\n  output y = %y\n"),
     1e-5, 1e-5},
    {"maxpool2d", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = maxpool2d(%x) {kernel = [3, 3], "
                    "stride = [2, 2], pad = [1, 1], dilation = [1, 1]}\n  output y = %y\n"), 0, 0},
    {"transpose", G("  input %x: f32[2, 3, 4]\n  %y: f32[4, 2, 3] = transpose(%x) {perm = [2, 0, 1]}\n"
                    "  output y = %y\n"), 0, 0},
    {"cross_entropy", G("  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                        "  %y: f32[] = cross_entropy(%x, %label)\n  output y = %y\n"), 1e-6, 1e-5},
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

static void one(const op_case *c)
{
    char err[1024];
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(c->name, c->ir, strlen(c->ir), &d);
    if (!g || ir_verify(g, &d)) {
        printf("FAIL %s: does not parse\n", c->name);
        nfailed++;
        diag_free(&d);
        return;
    }
    mp_plan *mp = mp_plan_graph(g);
    cg_options o = cg_options_default();
    cg_program *p = cg_generate(g, mp, &o, &d);
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    rt_cuda *eager = NULL, *graph = NULL;
    rt_cuda_options co = {0};
    co.eager = 1;
    if (!p || cg_compile(p, NULL, NULL, err, sizeof err) || !x ||
        !(eager = rt_cuda_open_ex(p, &co, err, sizeof err)) ||
        !(graph = rt_cuda_open(p, NULL, err, sizeof err))) {
        printf("FAIL %s: %s\n", c->name, err);
        nfailed++;
        goto done;
    }
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
    rt_cuda_close(eager);
    rt_cuda_close(graph);
    rt_exec_free(x);
    cg_program_free(p);
    mp_plan_free(mp);
    ir_graph_free(g);
    diag_free(&d);
}

int main(void)
{
    char err[512];
    if (!cg_have_nvrtc()) {
        printf("skipped: this build has no NVRTC\n");
        return 77;
    }
    if (rt_cuda_probe(NULL, err, sizeof err)) {
        printf("skipped: %s\n", err);
        return 77;
    }
    rt_set_threads(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        one(&cases[i]);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
