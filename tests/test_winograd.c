/* The CPU executor's Winograd F(2x2, 3x3) convolutions (runtime/cpu/winograd.c)
 * against a float64 direct convolution.
 *
 * Each case is a program of one 3x3 stride-1 convolution (or its input's
 * gradient, conv2d_grad_input: a transposed convolution) followed by a ReLU
 * (the fused epilogue that runs after the Winograd kernel), run on random
 * inputs and weights.  Checked:
 *   - the convolution ran as Winograd (or, for a shape it does not take, did not);
 *   - every output within WINO_TOL of the float64 reference, relative to the
 *     sum of the absolute terms of its window (the bound that the transforms'
 *     additions scale with), and the largest such error reported;
 *   - the same bits on 1, 2 and 3 threads;
 *   - after the weights change in place and rt_exec_weights_changed, the new
 *     weights' result (the kept transformed weights made again);
 *   - GNC_WINOGRAD=0 leaves every convolution to the other paths;
 *   - the weights' gradient (conv2d_grad_weight) likewise, run twice with
 *     another dy (the sums start afresh).
 * Shapes: odd sizes and partial tiles, padding 0, 1 and 2, with and without a
 * bias, channel counts that are not multiples of anything, and a batch large
 * enough to go through in two chunks.
 *
 *   test_winograd */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"

/* |y - ref| <= WINO_TOL * sum |w x| (+ |b|) over the window: float32's
 * epsilon is 6e-8; the direct convolution's own error is a few of them. */
#define WINO_TOL 1e-6

static int nfailed;

typedef struct {
    int n, c, h, w, o, pad, bias;
    int winograd;   /* expected to run as Winograd */
    int transposed; /* conv2d_grad_input (conv_transpose2d) of weights [c, o, 3, 3] */
} shape;

/* The result's height (width: of s->w) */
static int out_size(const shape *s, int h)
{
    return s->transposed ? h - 2 * s->pad + 2 : h + 2 * s->pad - 2;
}

/* splitmix64, to floats in [-1, 1) */
static float rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * 0x1p-52 - 1.0);
}

static ir_graph *build(const shape *s)
{
    int oh = out_size(s, s->h), ow = out_size(s, s->w);
    char bias[96] = "", conv[256], text[2048];
    if (s->bias)
        snprintf(bias, sizeof bias, "  param %%b: f32[%d] = uniform(-0.5, 0.5)\n", s->o);
    if (s->transposed)
        snprintf(conv, sizeof conv,
                 "conv2d_grad_input(%%x, %%w) {stride = [1, 1], pad = [%d, %d], "
                 "dilation = [1, 1], groups = 1, shape = [%d, %d, %d, %d]}",
                 s->pad, s->pad, s->n, s->o, oh, ow);
    else
        snprintf(conv, sizeof conv,
                 "conv2d(%%x, %%w%s) {stride = [1, 1], pad = [%d, %d], dilation = [1, 1], "
                 "groups = 1}", s->bias ? ", %b" : "", s->pad, s->pad);
    snprintf(text, sizeof text,
             "graph \"wino\" {\n"
             "  input %%x: f32[%d, %d, %d, %d]\n"
             "  param %%w: f32[%d, %d, 3, 3] = uniform(-0.1, 0.1)\n"
             "%s"
             "  %%y: f32[%d, %d, %d, %d] = %s\n"
             "  %%r: f32[%d, %d, %d, %d] = relu(%%y)\n"
             "  output r = %%r\n"
             "}\n",
             s->n, s->c, s->h, s->w, s->transposed ? s->c : s->o, s->transposed ? s->o : s->c,
             bias, s->n, s->o, oh, ow, conv, s->n, s->o, oh, ow);
    diag d;
    diag_init(&d);
    pm_options pm = {.out = stdout};
    ir_graph *g = ir_parse("wino.gir", text, strlen(text), &d);
    if (!g || pm_run(g, "schedule,fuse", &pm, &d) != 0) {
        diag_print(&d, stdout);
        if (g)
            ir_graph_free(g);
        g = NULL;
    }
    diag_free(&d);
    return g;
}

/* relu(conv(x, w) + b) in float64 (or of the transposed convolution), and
 * each output's sum of absolute terms. */
static void reference(const shape *s, const float *x, const float *w, const float *b,
                      double *ref, double *mag)
{
    int oh = out_size(s, s->h), ow = out_size(s, s->w), f = s->transposed ? -1 : 1;
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->o; k++)
            for (int y = 0; y < oh; y++)
                for (int xx = 0; xx < ow; xx++) {
                    double sum = b ? b[k] : 0, abs_sum = b ? fabs(b[k]) : 0;
                    for (int c = 0; c < s->c; c++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                int iy = y + f * (ky - s->pad), ix = xx + f * (kx - s->pad);
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                                    continue;
                                int wk = s->transposed ? c * s->o + k : k * s->c + c;
                                double t = (double)w[(wk * 3 + ky) * 3 + kx] *
                                           x[((i * s->c + c) * s->h + iy) * s->w + ix];
                                sum += t, abs_sum += fabs(t);
                            }
                    size_t at = (((size_t)i * s->o + k) * oh + y) * ow + xx;
                    ref[at] = sum > 0 ? sum : 0;
                    mag[at] = abs_sum;
                }
}

/* Runs g on threads threads, the weights w (and bias b) given; copies the
 * output to out.  Returns the Winograd convolutions run, or -1. */
static long run(ir_graph *g, int threads, const float *x, const float *w, const float *b,
                const float *w2, float *out, float *out2)
{
    char err[512];
    rt_set_threads(threads);
    rt_exec *e = rt_exec_new(g, err, sizeof err);
    if (!e) {
        printf("FAIL: rt_exec_new: %s\n", err);
        return -1;
    }
    const ir_value *vx = g->inputs[0], *vw = NULL, *vb = NULL, *vr = g->outputs[0].value;
    for (int i = 0; i < g->nparams; i++) {
        if (strcmp(g->params[i]->name, "w") == 0)
            vw = g->params[i];
        else
            vb = g->params[i];
    }
    long wino = -1;
    memcpy(rt_exec_data(e, vx), x, (size_t)ir_type_numel(&vx->type) * sizeof *x);
    memcpy(rt_exec_data(e, vw), w, (size_t)ir_type_numel(&vw->type) * sizeof *w);
    if (vb)
        memcpy(rt_exec_data(e, vb), b, (size_t)ir_type_numel(&vb->type) * sizeof *b);
    size_t nr = (size_t)ir_type_numel(&vr->type);
    if (rt_exec_run(e, err, sizeof err) != 0) {
        printf("FAIL: run: %s\n", err);
        goto done;
    }
    memcpy(out, rt_exec_data(e, vr), nr * sizeof *out);
    if (w2) { /* new weights in place: the kept transform must be made again */
        memcpy(rt_exec_data(e, vw), w2, (size_t)ir_type_numel(&vw->type) * sizeof *w);
        rt_exec_weights_changed(e);
        if (rt_exec_run(e, err, sizeof err) != 0) {
            printf("FAIL: second run: %s\n", err);
            goto done;
        }
        memcpy(out2, rt_exec_data(e, vr), nr * sizeof *out2);
    }
    wino = e->wino_convs;
done:
    rt_exec_free(e);
    return wino;
}

/* The largest error of got against ref relative to mag; counts those over
 * WINO_TOL into *bad. */
static double worst(const float *got, const double *ref, const double *mag, size_t n,
                    size_t *bad)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(got[i] - ref[i]) / (mag[i] > 1e-30 ? mag[i] : 1e-30);
        if (!(r <= WINO_TOL))
            ++*bad;
        m = r > m || r != r ? r : m;
    }
    return m;
}

static void check(const shape *s)
{
    char desc[160];
    snprintf(desc, sizeof desc, "%s x[%d, %d, %d, %d] w[%d, %d, 3, 3] pad %d%s",
             s->transposed ? "conv2d_grad_input" : "conv2d", s->n, s->c, s->h, s->w,
             s->transposed ? s->c : s->o, s->transposed ? s->o : s->c, s->pad,
             s->bias ? " bias" : "");
    ir_graph *g = build(s);
    if (!g) {
        printf("FAIL %s: does not build\n", desc);
        nfailed++;
        return;
    }
    int oh = out_size(s, s->h), ow = out_size(s, s->w);
    size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->o * s->c * 9,
           ny = (size_t)s->n * s->o * oh * ow;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *w2 = malloc(nw * sizeof *w),
          *b = malloc((size_t)s->o * sizeof *b), *y[3], *y2 = malloc(ny * sizeof *y2);
    double *ref = malloc(ny * sizeof *ref), *mag = malloc(ny * sizeof *mag);
    uint64_t seed = (uint64_t)(s->n * 131 + s->c * 7 + s->h + s->pad);
    for (size_t i = 0; i < nx; i++)
        x[i] = rnd(&seed);
    for (size_t i = 0; i < nw; i++)
        w[i] = 0.1f * rnd(&seed), w2[i] = 0.05f * rnd(&seed);
    for (int i = 0; i < s->o; i++)
        b[i] = 0.5f * rnd(&seed);
    int failed = nfailed;
    long wino[3];
    for (int t = 0; t < 3; t++) {
        y[t] = malloc(ny * sizeof *y[t]);
        wino[t] = run(g, t + 1, x, w, s->bias ? b : NULL, t == 0 ? w2 : NULL, y[t], y2);
        if (wino[t] < 0)
            nfailed++;
        else if ((wino[t] > 0) != s->winograd)
            printf("FAIL %s, %d threads: %ld Winograd convolutions, expected %s\n", desc, t + 1,
                   wino[t], s->winograd ? "some" : "none"), nfailed++;
    }
    reference(s, x, w, s->bias ? b : NULL, ref, mag);
    size_t bad = 0, bad2 = 0, differ = 0;
    double err = worst(y[0], ref, mag, ny, &bad);
    reference(s, x, w2, s->bias ? b : NULL, ref, mag);
    double err2 = worst(y2, ref, mag, ny, &bad2);
    for (int t = 1; t < 3; t++)
        differ += memcmp(y[0], y[t], ny * sizeof *y[0]) != 0;
    if (bad || bad2) {
        printf("FAIL %s: %zu (after the weights changed: %zu) of %zu outputs off the float64 "
               "reference by more than %g of their terms' magnitude (worst %.3g, %.3g)\n",
               desc, bad, bad2, ny, WINO_TOL, err, err2);
        nfailed++;
    }
    if (differ) {
        printf("FAIL %s: the result depends on the number of threads\n", desc);
        nfailed++;
    }
    if (nfailed == failed)
        printf("ok %s: %s, worst error %.3g (%.3g after new weights) of the terms' magnitude, "
               "the same bits on 1-3 threads\n",
               desc, s->winograd ? "Winograd" : "not Winograd", err, err2);
    for (int t = 0; t < 3; t++)
        free(y[t]);
    free(x), free(w), free(w2), free(b), free(y2), free(ref), free(mag);
    ir_graph_free(g);
}

/* The weights' gradient, conv2d_grad_weight(dy, x) of a 3x3 stride-1
 * convolution with padding pad: against float64, on 1-3 threads, and run twice
 * on one executor with another dy the second time (nothing of the first run
 * may stay in the sums). */
static void check_weight_grad(int n, int c, int h, int w, int o, int pad)
{
    int oh = h + 2 * pad - 2, ow = w + 2 * pad - 2;
    char text[1024], desc[128];
    snprintf(desc, sizeof desc, "conv2d_grad_weight x[%d, %d, %d, %d] dy[%d, %d, %d, %d] pad %d",
             n, c, h, w, n, o, oh, ow, pad);
    snprintf(text, sizeof text,
             "graph \"dw\" {\n  input %%dy: f32[%d, %d, %d, %d]\n  input %%x: f32[%d, %d, %d, %d]\n"
             "  %%dw: f32[%d, %d, 3, 3] = conv2d_grad_weight(%%dy, %%x) {stride = [1, 1], "
             "pad = [%d, %d], dilation = [1, 1], groups = 1, shape = [%d, %d, 3, 3]}\n"
             "  output dw = %%dw\n}\n",
             n, o, oh, ow, n, c, h, w, o, c, pad, pad, o, c);
    diag d;
    diag_init(&d);
    pm_options pm = {.out = stdout};
    ir_graph *g = ir_parse("dw.gir", text, strlen(text), &d);
    if (!g || pm_run(g, "schedule", &pm, &d) != 0) {
        printf("FAIL %s: does not build\n", desc);
        diag_print(&d, stdout);
        diag_free(&d);
        nfailed++;
        return;
    }
    diag_free(&d);
    size_t ndy = (size_t)n * o * oh * ow, nx = (size_t)n * c * h * w, nw = (size_t)o * c * 9;
    float *dy[2] = {malloc(ndy * sizeof(float)), malloc(ndy * sizeof(float))};
    float *x = malloc(nx * sizeof *x), *got[2] = {malloc(nw * sizeof(float)),
                                                   malloc(nw * sizeof(float))};
    double *ref = malloc(nw * sizeof *ref), *mag = malloc(nw * sizeof *mag);
    uint64_t seed = (uint64_t)(n * 977 + c + o + h + pad);
    for (size_t i = 0; i < nx; i++)
        x[i] = rnd(&seed);
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < ndy; i++)
            dy[r][i] = rnd(&seed);
    int failed = nfailed;
    float *first = malloc(nw * sizeof *first);
    double err[2] = {0, 0};
    for (int threads = 1; threads <= 3; threads++) {
        char msg[512];
        rt_set_threads(threads);
        rt_exec *e = rt_exec_new(g, msg, sizeof msg);
        if (!e) {
            printf("FAIL %s: %s\n", desc, msg);
            nfailed++;
            break;
        }
        const ir_value *vdy = g->inputs[0], *vx = g->inputs[1], *vdw = g->outputs[0].value;
        memcpy(rt_exec_data(e, vx), x, nx * sizeof *x);
        for (int r = 0; r < 2; r++) {
            memcpy(rt_exec_data(e, vdy), dy[r], ndy * sizeof *dy[r]);
            if (rt_exec_run(e, msg, sizeof msg) != 0) {
                printf("FAIL %s: %s\n", desc, msg);
                nfailed++;
                break;
            }
            memcpy(got[r], rt_exec_data(e, vdw), nw * sizeof *got[r]);
        }
        if (e->wino_convs != 2)
            printf("FAIL %s: %ld Winograd convolutions in two runs\n", desc, e->wino_convs),
                nfailed++;
        rt_exec_free(e);
        if (threads == 1)
            memcpy(first, got[0], nw * sizeof *first);
        else if (memcmp(first, got[0], nw * sizeof *first) != 0)
            printf("FAIL %s: the result depends on the number of threads\n", desc), nfailed++;
        if (threads > 1)
            continue;
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < o; k++)
                for (int ci = 0; ci < c; ci++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            double sum = 0, abs_sum = 0;
                            for (int i = 0; i < n; i++)
                                for (int y = 0; y < oh; y++)
                                    for (int xx = 0; xx < ow; xx++) {
                                        int iy = y + ky - pad, ix = xx + kx - pad;
                                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                                            continue;
                                        double t = (double)dy[r][((i * o + k) * oh + y) * ow + xx] *
                                                   x[((i * c + ci) * h + iy) * w + ix];
                                        sum += t, abs_sum += fabs(t);
                                    }
                            size_t at = ((size_t)(k * c + ci) * 3 + ky) * 3 + kx;
                            ref[at] = sum, mag[at] = abs_sum;
                        }
            size_t bad = 0;
            err[r] = worst(got[r], ref, mag, nw, &bad);
            if (bad)
                printf("FAIL %s, run %d: %zu of %zu elements off the float64 reference by more "
                       "than %g of their terms' magnitude (worst %.3g)\n",
                       desc, r + 1, bad, nw, WINO_TOL, err[r]), nfailed++;
        }
    }
    if (nfailed == failed)
        printf("ok %s: Winograd, worst error %.3g (%.3g for the second dy) of the terms' "
               "magnitude, the same bits on 1-3 threads\n", desc, err[0], err[1]);
    free(dy[0]), free(dy[1]), free(x), free(got[0]), free(got[1]), free(ref), free(mag);
    free(first);
    ir_graph_free(g);
}

int main(void)
{
    static const shape shapes[] = {
        {2, 128, 7, 9, 130, 1, 1, 1, 0}, /* odd sizes: partial tiles on both edges */
        {3, 128, 6, 5, 128, 0, 0, 1, 0}, /* no padding, no bias */
        {1, 131, 5, 5, 128, 2, 1, 1, 0}, /* padding 2: a 7x7 result from 5x5 */
        {16, 128, 24, 24, 128, 1, 1, 1, 0}, /* two chunks of images */
        {2, 64, 8, 8, 64, 1, 1, 0, 0}, /* too few channels: not taken */
        /* the input's gradient: the kernels turned, the channels swapped */
        {2, 128, 7, 9, 136, 1, 0, 1, 1},
        {2, 130, 6, 5, 128, 0, 0, 1, 1},  /* padding 0: a 8x7 result, padding 2 inside */
        {1, 128, 9, 7, 128, 2, 0, 1, 1},  /* padding 2: padding 0 inside */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        check(&shapes[i]);
    check_weight_grad(3, 128, 7, 9, 130, 1);   /* partial tiles */
    check_weight_grad(2, 129, 6, 6, 128, 0);   /* no padding */
    check_weight_grad(16, 128, 24, 24, 128, 1); /* two chunks of images */

    setenv("GNC_WINOGRAD", "0", 1); /* read at the executor's first convolution */
    shape off = shapes[0];
    off.winograd = 0;
    check(&off);
    printf("winograd: %d failed\n", nfailed);
    return nfailed ? 1 : 0;
}
