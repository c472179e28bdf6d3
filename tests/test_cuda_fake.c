/* The GPU executor (runtime/cuda.c) end to end on the stand-in CUDA libraries
 * (tests/fakecuda/), against the CPU executor: no GPU needed.
 *
 * Each case is IR text.  Its program is generated and compiled with NVRTC (so
 * the modules carry real images, which the fake driver checks for the kernels'
 * names); every kernel's host emulation (tests/cg_host.c, built once for all
 * cases) is registered with the fake driver under the kernel's name; then
 * the program runs eagerly and as a replayed CUDA graph (twice), and each
 * output is compared with rt_exec's within atol + rtol |ref|, graph replay
 * bitwise against eager.
 *
 * Adding a case: a line in cases[] below.  The executor refuses programs
 * with library steps or several devices for now; such cases are reported as
 * refused (not failed) until it runs them.
 *
 *   test_cuda_fake FAKE_DIR WORK_DIR */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_host.h"
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
    {"gelu", EL("gelu", "[3, 37]"), 1e-6, 1e-5},
    {"add", G("  input %a: f32[3, 37]\n  input %b: f32[3, 37]\n  %y: f32[3, 37] = add(%a, %b)\n"
              "  output y = %y\n"), 0, 1e-7},
    {"softmax rows", G("  input %x: f32[3, 5, 40]\n  %y: f32[3, 5, 40] = softmax(%x) {axis = 2}\n"
                       "  output y = %y\n"), 1e-7, 1e-5},
    {"layernorm", G("  input %x: f32[2, 300]\n  input %w: f32[300]\n  input %b: f32[300]\n"
                    "  %y: f32[2, 300] = layernorm(%x, %w, %b) {eps = 1e-05}\n  output y = %y\n"),
     1e-5, 1e-5},
    {"maxpool2d", G("  input %x: f32[2, 3, 9, 9]\n  %y: f32[2, 3, 5, 5] = maxpool2d(%x) {kernel = [3, 3], "
                    "stride = [2, 2], pad = [1, 1], dilation = [1, 1]}\n  output y = %y\n"), 0, 0},
    {"transpose", G("  input %x: f32[2, 3, 4]\n  %y: f32[4, 2, 3] = transpose(%x) {perm = [2, 0, 1]}\n"
                    "  output y = %y\n"), 0, 0},
    {"cross_entropy", G("  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                        "  %y: f32[] = cross_entropy(%x, %label)\n  output y = %y\n"), 1e-6, 1e-5},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

typedef struct {
    ir_graph *g;
    mp_plan *mp;
    cg_program *p;
    rt_exec *x;
} prepared;

static int nfailed, npassed, nrefused;
static int (*fake_register)(const char *, cg_host_kernel);

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

static int prepare(const op_case *c, prepared *pr, const char *cache, char *err, size_t errlen)
{
    diag d;
    diag_init(&d);
    pr->g = ir_parse(c->name, c->ir, strlen(c->ir), &d);
    if (!pr->g || ir_verify(pr->g, &d)) {
        snprintf(err, errlen, "does not parse");
        diag_free(&d);
        return -1;
    }
    pr->mp = mp_plan_graph(pr->g);
    cg_options o = cg_options_default();
    pr->p = cg_generate(pr->g, pr->mp, &o, &d);
    diag_free(&d);
    cg_compile_options co = {.cache_dir = cache};
    if (!pr->p) {
        snprintf(err, errlen, "no program");
        return -1;
    }
    if (cg_compile(pr->p, &co, NULL, err, errlen))
        return -1;
    return (pr->x = rt_exec_new(pr->g, err, errlen)) ? 0 : -1;
}

static void run_case(const op_case *c, prepared *pr, cg_host *h, int prog, const char *fake)
{
    char err[1024];
    for (int k = 0; k < pr->p->nkernels; k++)
        fake_register(pr->p->kernels[k].name, cg_host_entry(h, prog, k));
    rt_cuda_options eo = {.eager = 1, .libdir = fake}, go = {.libdir = fake};
    rt_cuda *eager = rt_cuda_open_ex(pr->p, &eo, err, sizeof err), *graph = NULL;
    if (!eager && strstr(err, "does not run yet")) {
        printf("refused %s: %s\n", c->name, err);
        nrefused++;
        return;
    }
    if (!eager || !(graph = rt_cuda_open_ex(pr->p, &go, err, sizeof err))) {
        printf("FAIL %s: %s\n", c->name, err);
        nfailed++;
        rt_cuda_close(eager);
        return;
    }
    const ir_graph *g = pr->g;
    for (int i = 0; i < g->ninputs; i++) {
        void *data = rt_exec_data(pr->x, g->inputs[i]);
        fill(g->inputs[i], data, 1);
        if (rt_cuda_write(eager, -1, g->inputs[i], data, err, sizeof err) ||
            rt_cuda_write(graph, -1, g->inputs[i], data, err, sizeof err)) {
            printf("FAIL %s: %s\n", c->name, err);
            nfailed++;
            goto done;
        }
    }
    if (rt_exec_run(pr->x, err, sizeof err) || rt_cuda_run(eager, err, sizeof err) ||
        rt_cuda_run(graph, err, sizeof err) || rt_cuda_run(graph, err, sizeof err)) {
        printf("FAIL %s: %s\n", c->name, err);
        nfailed++;
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ir_value *v = g->outputs[i].value;
        int64_t n = ir_type_numel(&v->type);
        float *a = calloc((size_t)n + 1, 4), *b = calloc((size_t)n + 1, 4);
        const float *ref = rt_exec_data(pr->x, v);
        int bad = rt_cuda_read(eager, 0, v, a, err, sizeof err) ||
                  rt_cuda_read(graph, 0, v, b, err, sizeof err);
        if (bad)
            printf("FAIL %s: %s\n", c->name, err);
        else if ((bad = memcmp(a, b, (size_t)n * 4) != 0))
            printf("FAIL %s: graph replay differs from eager launches\n", c->name);
        for (int64_t k = 0; k < n && !bad; k++)
            if (!(fabs((double)a[k] - ref[k]) <= c->atol + c->rtol * fabs(ref[k]))) {
                printf("FAIL %s: %s[%lld] got %.9g want %.9g\n", c->name, v->name, (long long)k,
                       a[k], ref[k]);
                bad = 1;
            }
        bad ? nfailed++ : npassed++;
        free(a);
        free(b);
    }
done:
    rt_cuda_close(eager);
    rt_cuda_close(graph);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_cuda_fake FAKE_DIR WORK_DIR\n");
        return 2;
    }
    const char *fake = argv[1], *work = argv[2];
    char err[1024], path[4096], cache[4096];
    void *so = NULL;
    if (!cg_have_nvrtc()) {
        printf("skipped: this build has no NVRTC\n");
        return 77;
    }
    /* the same handle the executor gets: registrations reach its driver.
     * Loaded before NVRTC runs, which then finds it (cuGetExportTable). */
    snprintf(path, sizeof path, "%s/libcuda.so.1", fake);
    so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!so || !(*(void **)&fake_register = dlsym(so, "fakecuda_register"))) {
        printf("FAIL cannot load the fake driver %s: %s\n", path, dlerror());
        return 1;
    }
    rt_set_threads(1);
    snprintf(cache, sizeof cache, "%s/cache", work);
    prepared pr[NCASES] = {{0}};
    cg_program *progs[NCASES];
    for (int i = 0; i < NCASES; i++) {
        if (prepare(&cases[i], &pr[i], cache, err, sizeof err)) {
            printf("FAIL %s: %s\n", cases[i].name, err);
            return 1;
        }
        progs[i] = pr[i].p;
    }
    cg_host *h = cg_host_build(progs, NCASES, work, err, sizeof err);
    if (!h) {
        printf("FAIL building the host emulation: %s\n", err);
        return 1;
    }
    for (int i = 0; i < NCASES; i++)
        run_case(&cases[i], &pr[i], h, i, fake);
    for (int i = 0; i < NCASES; i++) {
        rt_exec_free(pr[i].x);
        cg_program_free(pr[i].p);
        mp_plan_free(pr[i].mp);
        ir_graph_free(pr[i].g);
    }
    cg_host_free(h);
    dlclose(so);
    printf("%d passed, %d failed, %d refused by the executor\n", npassed, nfailed, nrefused);
    return nfailed ? 1 : 0;
}
