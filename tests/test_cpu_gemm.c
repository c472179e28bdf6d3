/* The CPU executor's GEMMs of dense layers and matmuls (runtime/cpu/exec.c
 * rt_node_gemm): on oneDNN's matmul where its kernels are AVX-512's brgemm
 * (dnnl.c rt_dnnl_gemm), on OpenBLAS elsewhere.  Each case, in an inference
 * program whose weights are parameters (oneDNN keeps its reordered copy) and
 * in one whose weights are inputs (reordered at each run):
 *   - the path: oneDNN's where oneDNN is on and its ISA is AVX-512 and the
 *     product is large enough, OpenBLAS's otherwise, and always with
 *     GNC_DNNL=0;
 *   - against a float64 reference, each output within GEMM_TOL of the sum of
 *     its terms' magnitudes;
 *   - the same bits on 1, 2 and 3 threads;
 *   - after the weights change in place and rt_exec_weights_changed, the new
 *     weights' result (the kept copy made again);
 *   - the memory report counts oneDNN's copy of kept weights, and a
 *     workspace, where oneDNN ran.
 *
 *   test_cpu_gemm */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "ir.h"
#include "kernels.h"

/* float32's epsilon is 6e-8; a sum of k terms in any order is off by a few
 * of them per term at worst, far less in practice */
#define GEMM_TOL 1e-6

static int nfailed;
static int dnnl_here; /* oneDNN on, with AVX-512's kernels */

typedef struct {
    const char *what;
    int matmul;      /* else dense */
    int batch;       /* matmul: a's batch (b broadcast), 0: none */
    int m, k, n;     /* dense: rows, in, out */
    int bias;
    int weights_in;  /* the weights (b) an input, not a parameter */
} gcase;

/* splitmix64, to floats in [-1, 1) */
static float rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * 0x1p-52 - 1.0);
}

static ir_graph *build(const gcase *c)
{
    char a[64], wdecl[96], bias[96] = "", node[160], out[64], text[1024];
    int bat = c->batch > 0;
    if (bat)
        snprintf(a, sizeof a, "f32[%d, %d, %d]", c->batch, c->m, c->k);
    else
        snprintf(a, sizeof a, "f32[%d, %d]", c->m, c->k);
    /* dense's weights are [out, in]; matmul's b [k, n] */
    int w0 = c->matmul ? c->k : c->n, w1 = c->matmul ? c->n : c->k;
    snprintf(wdecl, sizeof wdecl,
             c->weights_in ? "  input %%w: f32[%d, %d]\n"
                           : "  param %%w: f32[%d, %d] = uniform(-0.1, 0.1)\n",
             w0, w1);
    if (c->bias)
        snprintf(bias, sizeof bias, "  param %%b: f32[%d] = uniform(-0.5, 0.5)\n", c->n);
    if (bat)
        snprintf(out, sizeof out, "f32[%d, %d, %d]", c->batch, c->m, c->n);
    else
        snprintf(out, sizeof out, "f32[%d, %d]", c->m, c->n);
    snprintf(node, sizeof node, c->matmul ? "matmul(%%a, %%w)" : "dense(%%a, %%w%s)",
             c->bias ? ", %b" : "");
    snprintf(text, sizeof text,
             "graph \"gemm\" {\n"
             "  input %%a: %s\n"
             "%s%s"
             "  %%y: %s = %s\n"
             "  output y = %%y\n"
             "}\n",
             a, wdecl, bias, out, node);
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse("gemm.gir", text, strlen(text), &d);
    if (!g)
        diag_print(&d, stdout);
    diag_free(&d);
    return g;
}

/* The named parameter or input of g */
static const ir_value *value(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->nparams; i++)
        if (strcmp(g->params[i]->name, name) == 0)
            return g->params[i];
    for (int i = 0; i < g->ninputs; i++)
        if (strcmp(g->inputs[i]->name, name) == 0)
            return g->inputs[i];
    return NULL;
}

static size_t numel(const ir_value *v) { return (size_t)ir_type_numel(&v->type); }

/* y (batch x m x n) in float64 and each output's sum of absolute terms */
static void reference(const gcase *c, const float *a, const float *w, const float *b,
                      double *ref, double *mag)
{
    int batches = c->batch > 0 ? c->batch : 1;
    for (int bi = 0; bi < batches; bi++)
        for (int i = 0; i < c->m; i++)
            for (int j = 0; j < c->n; j++) {
                double s = b ? b[j] : 0, ms = b ? fabs(b[j]) : 0;
                const float *ar = a + ((size_t)bi * c->m + i) * c->k;
                for (int l = 0; l < c->k; l++) {
                    double wv = c->matmul ? w[(size_t)l * c->n + j] : w[(size_t)j * c->k + l];
                    s += ar[l] * wv;
                    ms += fabs(ar[l] * wv);
                }
                size_t at = ((size_t)bi * c->m + i) * c->n + j;
                ref[at] = s, mag[at] = ms;
            }
}

typedef struct {
    long dnnl, blas;         /* GEMMs on each path */
    int64_t kept, work;      /* the memory report's oneDNN weights and workspace */
} ran;

/* Runs g on threads threads with a, w (and b), then, where w2, again with w2
 * in place of w after rt_exec_weights_changed; the outputs into y, y2. */
static int run(ir_graph *g, int threads, const float *a, const float *w, const float *b,
               const float *w2, float *y, float *y2, ran *r)
{
    char err[512];
    rt_set_threads(threads);
    rt_exec *e = rt_exec_new(g, err, sizeof err);
    if (!e) {
        printf("FAIL: rt_exec_new: %s\n", err);
        return -1;
    }
    const ir_value *va = value(g, "a"), *vw = value(g, "w"), *vb = value(g, "b");
    const ir_value *vy = g->outputs[0].value;
    memcpy(rt_exec_data(e, va), a, numel(va) * sizeof *a);
    memcpy(rt_exec_data(e, vw), w, numel(vw) * sizeof *w);
    if (vb)
        memcpy(rt_exec_data(e, vb), b, numel(vb) * sizeof *b);
    int rc = -1;
    if (rt_exec_run(e, err, sizeof err) != 0) {
        printf("FAIL: run: %s\n", err);
        goto done;
    }
    memcpy(y, rt_exec_data(e, vy), numel(vy) * sizeof *y);
    if (w2) {
        memcpy(rt_exec_data(e, vw), w2, numel(vw) * sizeof *w2);
        rt_exec_weights_changed(e);
        if (rt_exec_run(e, err, sizeof err) != 0) {
            printf("FAIL: second run: %s\n", err);
            goto done;
        }
        memcpy(y2, rt_exec_data(e, vy), numel(vy) * sizeof *y2);
    }
    rt_memory m;
    rt_exec_memory(e, &m);
    *r = (ran){e->dnnl_gemms, e->blas_gemms, m.dnnl_weights, m.dnnl_work};
    rc = 0;
done:
    rt_exec_free(e);
    return rc;
}

/* The largest error of got against ref relative to mag; counts those over
 * GEMM_TOL into *bad. */
static double worst(const float *got, const double *ref, const double *mag, size_t n,
                    size_t *bad)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(got[i] - ref[i]) / (mag[i] > 1e-30 ? mag[i] : 1e-30);
        if (!(r <= GEMM_TOL))
            ++*bad;
        m = r > m || r != r ? r : m;
    }
    return m;
}

static void check(const gcase *c)
{
    ir_graph *g = build(c);
    if (!g) {
        printf("FAIL %s: does not build\n", c->what);
        nfailed++;
        return;
    }
    int batches = c->batch > 0 ? c->batch : 1;
    size_t na = (size_t)batches * c->m * c->k, nw = (size_t)c->k * c->n,
           ny = (size_t)batches * c->m * c->n;
    float *a = malloc(na * sizeof *a), *w = malloc(nw * sizeof *w), *w2 = malloc(nw * sizeof *w2),
          *b = malloc((size_t)c->n * sizeof *b), *y[3], *y2 = malloc(ny * sizeof *y2),
          *yb = malloc(ny * sizeof *yb);
    double *ref = malloc(ny * sizeof *ref), *mag = malloc(ny * sizeof *mag);
    uint64_t seed = (uint64_t)(c->m * 131 + c->k * 7 + c->n);
    for (size_t i = 0; i < na; i++)
        a[i] = rnd(&seed);
    for (size_t i = 0; i < nw; i++)
        w[i] = 0.1f * rnd(&seed), w2[i] = 0.05f * rnd(&seed);
    for (int i = 0; i < c->n; i++)
        b[i] = 0.5f * rnd(&seed);
    const float *bias = c->bias ? b : NULL;
    int failed = nfailed;
    int on_dnnl = dnnl_here && (int64_t)c->m * c->n * c->k >= GEMM_DNNL_MIN;
    ran r[3], rb;
    for (int t = 0; t < 3; t++) {
        y[t] = malloc(ny * sizeof *y[t]);
        if (run(g, t + 1, a, w, bias, t == 0 ? w2 : NULL, y[t], y2, &r[t]))
            nfailed++;
        else if (on_dnnl ? !r[t].dnnl || r[t].blas : r[t].dnnl || !r[t].blas)
            printf("FAIL %s, %d threads: %ld GEMMs on oneDNN, %ld on OpenBLAS; expected %s\n",
                   c->what, t + 1, r[t].dnnl, r[t].blas, on_dnnl ? "oneDNN" : "OpenBLAS"),
                nfailed++;
    }
    /* oneDNN's copy of kept weights (two runs: the second made it again),
       and its workspace, counted */
    if (nfailed == failed && on_dnnl && (!r[0].work || (!c->weights_in && !c->matmul &&
                                                        r[0].kept < (int64_t)(nw * 4)))) {
        printf("FAIL %s: the memory report counts %lld bytes of oneDNN weights, %lld of its "
               "workspace\n", c->what, (long long)r[0].kept, (long long)r[0].work);
        nfailed++;
    }
    setenv("GNC_DNNL", "0", 1);
    if (run(g, 2, a, w, bias, NULL, yb, NULL, &rb) == 0 && (rb.dnnl || !rb.blas)) {
        printf("FAIL %s: GNC_DNNL=0 ran %ld GEMMs on oneDNN\n", c->what, rb.dnnl);
        nfailed++;
    }
    unsetenv("GNC_DNNL");
    reference(c, a, w, bias, ref, mag);
    size_t bad = 0, bad2 = 0, badb = 0, differ = 0;
    double err = worst(y[0], ref, mag, ny, &bad), errb = worst(yb, ref, mag, ny, &badb);
    reference(c, a, w2, bias, ref, mag);
    double err2 = worst(y2, ref, mag, ny, &bad2);
    for (int t = 1; t < 3; t++)
        differ += memcmp(y[0], y[t], ny * sizeof *y[0]) != 0;
    if (bad || bad2 || badb) {
        printf("FAIL %s: %zu (after the weights changed: %zu; on OpenBLAS: %zu) of %zu outputs "
               "off the float64 reference by more than %g of their terms' magnitude (worst "
               "%.3g, %.3g, %.3g)\n",
               c->what, bad, bad2, badb, ny, GEMM_TOL, err, err2, errb);
        nfailed++;
    }
    if (differ) {
        printf("FAIL %s: the result depends on the number of threads\n", c->what);
        nfailed++;
    }
    if (nfailed == failed)
        printf("ok %s: %s, worst error %.3g (%.3g after new weights, %.3g on OpenBLAS) of the "
               "terms' magnitude, the same bits on 1-3 threads\n",
               c->what, on_dnnl ? "oneDNN" : "OpenBLAS", err, err2, errb);
    for (int t = 0; t < 3; t++)
        free(y[t]);
    free(a), free(w), free(w2), free(b), free(y2), free(yb), free(ref), free(mag);
    ir_graph_free(g);
}

int main(void)
{
    dnnl_here = rt_dnnl_enabled() && strncmp(rt_dnnl_isa(), "avx512", 6) == 0;
    printf("oneDNN %s, ISA %s: dense and matmul GEMMs expected on %s\n",
           rt_dnnl_enabled() ? rt_dnnl_version() : "off",
           rt_dnnl_isa()[0] ? rt_dnnl_isa() : "none", dnnl_here ? "oneDNN" : "OpenBLAS");
    static const gcase cases[] = {
        /* LeNet's layers at batch 256, one tile and several */
        {"dense 256x400 -> 120, bias", 0, 0, 256, 400, 120, 1, 0},
        {"dense 256x84 -> 10, bias", 0, 0, 256, 84, 10, 1, 0},
        /* rows that leave a ragged last tile (15 tiles of 67, then 62) */
        {"dense 1000x300 -> 200", 0, 0, 1000, 300, 200, 0, 0},
        {"dense 1000x300 -> 200, bias, weights an input", 0, 0, 1000, 300, 200, 1, 1},
        /* below GEMM_DNNL_MIN: OpenBLAS */
        {"dense 4x512 -> 10, bias", 0, 0, 4, 512, 10, 1, 0},
        {"matmul 300x257 by 257x190", 1, 0, 300, 257, 190, 0, 0},
        {"matmul [3, 200, 150] by [150, 170] (b broadcast)", 1, 3, 200, 150, 170, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check(&cases[i]);
    printf("cpu_gemm: %zu cases, %d failed\n", sizeof cases / sizeof cases[0], nfailed);
    return nfailed ? 1 : 0;
}
