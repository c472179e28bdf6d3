/* The CPU executor's own convolution kernels against a float64 direct
 * convolution: Winograd's F(2x2, 3x3) (runtime/cpu/winograd.c) and the direct
 * kernels of few output channels (runtime/cpu/direct.c).
 *
 * Each case is a program of one stride-1 convolution (or its input's
 * gradient, conv2d_grad_input: a transposed convolution) followed by a ReLU
 * (the fused epilogue that runs after the kernel), run on random inputs and
 * weights.  Checked:
 *   - the convolution ran on the path expected for its shape (Winograd,
 *     direct, or neither);
 *   - every output within CONV_TOL of the float64 reference, relative to the
 *     sum of the absolute terms of its window (the bound that Winograd's
 *     transforms' additions scale with), and the largest such error reported;
 *   - the same bits on 1, 2 and 3 threads;
 *   - after the weights change in place and rt_exec_weights_changed, the new
 *     weights' result (Winograd's kept transformed weights made again);
 *   - GNC_WINOGRAD=0 and GNC_DIRECT=0 leave the convolutions to the other paths;
 *   - where oneDNN's kernels are AVX-512's, it takes the 3x3 convolutions of
 *     large planes from Winograd, and Winograd keeps the small ones
 *     (rt_dnnl_beats_wino); elsewhere Winograd takes both.  Likewise the
 *     weights' gradients: oneDNN's on planes of 100 outputs and more,
 *     Winograd's below, where OpenBLAS's would run otherwise.  The cases before
 *     run with GNC_DNNL=0, so that Winograd's own shape rule decides;
 *   - the weights' gradient (conv2d_grad_weight) likewise, run twice with
 *     another dy (the sums start afresh).
 * Shapes: odd sizes and partial tiles, padding from 0 to the kernel's size
 * less one, with and without a bias, channel counts that are not multiples of
 * anything, 1x1 to 5x5 kernels, and batches large enough to go through in
 * several chunks.  On a CPU without AVX2 and FMA the direct kernels do not
 * run, and their cases expect the other paths.
 *
 *   test_cpu_conv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"

/* |y - ref| <= CONV_TOL * sum |w x| (+ |b|) over the window: float32's
 * epsilon is 6e-8; the direct convolution's own error is a few of them. */
#define CONV_TOL 1e-6

static int nfailed;

/* The paths a convolution may take, and their names */
enum { OTHER, WINOGRAD, DIRECT };
static const char *const path_name[] = {"neither Winograd nor direct", "Winograd", "direct"};
static int have_direct; /* the CPU runs direct.c's kernels */
static int have_avx512; /* ... and their AVX-512 variants (GNC_DIRECT=avx2: not) */

typedef struct {
    int n, c, h, w, o, k, pad, bias;
    int path;       /* the path expected (DIRECT: where the CPU has it) */
    int transposed; /* conv2d_grad_input (conv_transpose2d) of weights [c, o, k, k] */
} shape;

/* The result's height (width: of s->w) */
static int out_size(const shape *s, int h)
{
    return s->transposed ? h - 2 * s->pad + s->k - 1 : h + 2 * s->pad - s->k + 1;
}

static int expected(int path)
{
    return path == DIRECT && !have_direct ? OTHER : path;
}

/* The path an executor's convolutions took (the last one's, where several) */
static int taken(const rt_exec *e)
{
    return e->wino_convs ? WINOGRAD : e->direct_convs ? DIRECT : OTHER;
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
             "  param %%w: f32[%d, %d, %d, %d] = uniform(-0.1, 0.1)\n"
             "%s"
             "  %%y: f32[%d, %d, %d, %d] = %s\n"
             "  %%r: f32[%d, %d, %d, %d] = relu(%%y)\n"
             "  output r = %%r\n"
             "}\n",
             s->n, s->c, s->h, s->w, s->transposed ? s->c : s->o, s->transposed ? s->o : s->c,
             s->k, s->k, bias, s->n, s->o, oh, ow, conv, s->n, s->o, oh, ow);
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
                        for (int ky = 0; ky < s->k; ky++)
                            for (int kx = 0; kx < s->k; kx++) {
                                int iy = y + f * (ky - s->pad), ix = xx + f * (kx - s->pad);
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                                    continue;
                                int wk = s->transposed ? c * s->o + k : k * s->c + c;
                                double t = (double)w[(wk * s->k + ky) * s->k + kx] *
                                           x[((i * s->c + c) * s->h + iy) * s->w + ix];
                                sum += t, abs_sum += fabs(t);
                            }
                    size_t at = (((size_t)i * s->o + k) * oh + y) * ow + xx;
                    ref[at] = sum > 0 ? sum : 0;
                    mag[at] = abs_sum;
                }
}

/* Runs g on threads threads, the weights w (and bias b) given; copies the
 * output to out.  Returns the path the convolution took, or -1. */
static int run(ir_graph *g, int threads, const float *x, const float *w, const float *b,
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
    int path = -1;
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
    path = taken(e);
done:
    rt_exec_free(e);
    return path;
}

/* The largest error of got against ref relative to mag; counts those over
 * CONV_TOL into *bad. */
static double worst(const float *got, const double *ref, const double *mag, size_t n,
                    size_t *bad)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(got[i] - ref[i]) / (mag[i] > 1e-30 ? mag[i] : 1e-30);
        if (!(r <= CONV_TOL))
            ++*bad;
        m = r > m || r != r ? r : m;
    }
    return m;
}

static void check(const shape *s)
{
    char desc[160];
    snprintf(desc, sizeof desc, "%s x[%d, %d, %d, %d] w[%d, %d, %d, %d] pad %d%s",
             s->transposed ? "conv2d_grad_input" : "conv2d", s->n, s->c, s->h, s->w,
             s->transposed ? s->c : s->o, s->transposed ? s->o : s->c, s->k, s->k, s->pad,
             s->bias ? " bias" : "");
    ir_graph *g = build(s);
    if (!g) {
        printf("FAIL %s: does not build\n", desc);
        nfailed++;
        return;
    }
    int oh = out_size(s, s->h), ow = out_size(s, s->w);
    size_t nx = (size_t)s->n * s->c * s->h * s->w, nw = (size_t)s->o * s->c * s->k * s->k,
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
    int failed = nfailed, want = expected(s->path);
    for (int t = 0; t < 3; t++) {
        y[t] = malloc(ny * sizeof *y[t]);
        int path = run(g, t + 1, x, w, s->bias ? b : NULL, t == 0 ? w2 : NULL, y[t], y2);
        if (path < 0)
            nfailed++;
        else if (path != want)
            printf("FAIL %s, %d threads: ran %s, expected %s\n", desc, t + 1, path_name[path],
                   path_name[want]), nfailed++;
    }
    /* on AVX-512, the AVX2 kernels give the same bits (each output one sum of
       its taps in order, fused multiply-adds from zero, either way) */
    size_t isa_differ = 0;
    if (want == DIRECT && have_avx512) {
        float *y8 = malloc(ny * sizeof *y8);
        setenv("GNC_DIRECT", "avx2", 1);
        if (run(g, 1, x, w, s->bias ? b : NULL, NULL, y8, NULL) != DIRECT)
            printf("FAIL %s: GNC_DIRECT=avx2 did not run the direct kernels\n", desc), nfailed++;
        unsetenv("GNC_DIRECT");
        isa_differ = memcmp(y[0], y8, ny * sizeof *y8) != 0;
        free(y8);
    }
    if (isa_differ) {
        printf("FAIL %s: the AVX-512 kernels' bits differ from the AVX2 kernels'\n", desc);
        nfailed++;
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
               desc, bad, bad2, ny, CONV_TOL, err, err2);
        nfailed++;
    }
    if (differ) {
        printf("FAIL %s: the result depends on the number of threads\n", desc);
        nfailed++;
    }
    if (nfailed == failed)
        printf("ok %s: %s, worst error %.3g (%.3g after new weights) of the terms' magnitude, "
               "the same bits on 1-3 threads%s\n",
               desc, path_name[want], err, err2,
               want == DIRECT && have_avx512 ? " and in AVX2 as in AVX-512" : "");
    for (int t = 0; t < 3; t++)
        free(y[t]);
    free(x), free(w), free(w2), free(b), free(y2), free(ref), free(mag);
    ir_graph_free(g);
}

/* The weights' gradient, conv2d_grad_weight(dy, x) of the stride-1
 * convolution s (its bias and transposed unused): against float64, on 1-3
 * threads, and run twice on one executor with another dy the second time
 * (nothing of the first run may stay in the sums). */
static void check_weight_grad(const shape *s)
{
    int n = s->n, c = s->c, h = s->h, w = s->w, o = s->o, k = s->k, pad = s->pad;
    int oh = out_size(s, h), ow = out_size(s, w), want = expected(s->path);
    char text[1024], desc[128];
    snprintf(desc, sizeof desc, "conv2d_grad_weight x[%d, %d, %d, %d] dy[%d, %d, %d, %d] %dx%d pad %d",
             n, c, h, w, n, o, oh, ow, k, k, pad);
    snprintf(text, sizeof text,
             "graph \"dw\" {\n  input %%dy: f32[%d, %d, %d, %d]\n  input %%x: f32[%d, %d, %d, %d]\n"
             "  %%dw: f32[%d, %d, %d, %d] = conv2d_grad_weight(%%dy, %%x) {stride = [1, 1], "
             "pad = [%d, %d], dilation = [1, 1], groups = 1, shape = [%d, %d, %d, %d]}\n"
             "  output dw = %%dw\n}\n",
             n, o, oh, ow, n, c, h, w, o, c, k, k, pad, pad, o, c, k, k);
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
    size_t ndy = (size_t)n * o * oh * ow, nx = (size_t)n * c * h * w, nw = (size_t)o * c * k * k;
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
        long runs = want == WINOGRAD ? e->wino_convs : want == DIRECT ? e->direct_convs : 2;
        if (taken(e) != want || runs != 2)
            printf("FAIL %s: ran %s (%ld times in two runs), expected %s\n", desc,
                   path_name[taken(e)], runs, path_name[want]), nfailed++;
        rt_exec_free(e);
        if (threads == 1)
            memcpy(first, got[0], nw * sizeof *first);
        else if (memcmp(first, got[0], nw * sizeof *first) != 0)
            printf("FAIL %s: the result depends on the number of threads\n", desc), nfailed++;
        if (threads > 1)
            continue;
        for (int r = 0; r < 2; r++) {
            for (int oc = 0; oc < o; oc++)
                for (int ci = 0; ci < c; ci++)
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            double sum = 0, abs_sum = 0;
                            for (int i = 0; i < n; i++)
                                for (int y = 0; y < oh; y++)
                                    for (int xx = 0; xx < ow; xx++) {
                                        int iy = y + ky - pad, ix = xx + kx - pad;
                                        if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                                            continue;
                                        double t = (double)dy[r][((i * o + oc) * oh + y) * ow + xx] *
                                                   x[((i * c + ci) * h + iy) * w + ix];
                                        sum += t, abs_sum += fabs(t);
                                    }
                            size_t at = ((size_t)(oc * c + ci) * k + ky) * k + kx;
                            ref[at] = sum, mag[at] = abs_sum;
                        }
            size_t bad = 0;
            err[r] = worst(got[r], ref, mag, nw, &bad);
            if (bad)
                printf("FAIL %s, run %d: %zu of %zu elements off the float64 reference by more "
                       "than %g of their terms' magnitude (worst %.3g)\n",
                       desc, r + 1, bad, nw, CONV_TOL, err[r]), nfailed++;
        }
    }
    if (nfailed == failed)
        printf("ok %s: %s, worst error %.3g (%.3g for the second dy) of the terms' "
               "magnitude, the same bits on 1-3 threads\n", desc, path_name[want], err[0], err[1]);
    free(dy[0]), free(dy[1]), free(x), free(got[0]), free(got[1]), free(ref), free(mag);
    free(first);
    ir_graph_free(g);
}

int main(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    have_direct = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have_avx512 = have_direct && __builtin_cpu_supports("avx512f");
#endif
    if (!have_direct)
        printf("this CPU has no AVX2 and FMA: the direct kernels' cases expect the other paths\n");
    int avx512 = rt_dnnl_enabled() && strncmp(rt_dnnl_isa(), "avx512", 6) == 0;
    setenv("GNC_DNNL", "0", 1); /* Winograd's and direct.c's own rules (see the top) */
    /* n, c, h, w, o, k, pad, bias, path, transposed */
    static const shape shapes[] = {
        {2, 128, 7, 9, 130, 3, 1, 1, WINOGRAD, 0}, /* odd sizes: partial tiles on both edges */
        {3, 128, 6, 5, 128, 3, 0, 0, WINOGRAD, 0}, /* no padding, no bias */
        {1, 131, 5, 5, 128, 3, 2, 1, WINOGRAD, 0}, /* padding 2: a 7x7 result from 5x5 */
        {16, 128, 24, 24, 128, 3, 1, 1, WINOGRAD, 0}, /* two chunks of images */
        {2, 64, 8, 8, 64, 3, 1, 1, OTHER, 0},      /* too few channels for Winograd, too
                                                      many for direct */
        /* the input's gradient: the kernels turned, the channels swapped */
        {2, 128, 7, 9, 136, 3, 1, 0, WINOGRAD, 1},
        {2, 130, 6, 5, 128, 3, 0, 0, WINOGRAD, 1}, /* padding 0: a 8x7 result, padding 2 inside */
        {1, 128, 9, 7, 128, 3, 2, 0, WINOGRAD, 1}, /* padding 2: padding 0 inside */
        /* few output channels: direct */
        {8, 1, 28, 28, 6, 5, 2, 1, DIRECT, 0},   /* LeNet's first layer, images across threads */
        {3, 6, 14, 14, 16, 5, 0, 1, DIRECT, 0},  /* its second: 6 + 6 + 4 channels */
        {2, 3, 7, 9, 5, 3, 1, 0, DIRECT, 0},     /* odd sizes, 5 channels */
        {2, 20, 5, 6, 7, 1, 0, 1, DIRECT, 0},    /* 1x1 */
        {2, 3, 9, 19, 16, 5, 2, 1, DIRECT, 0},   /* AVX-512: channels in the lanes, rows
                                                    of 14 + 5 */
        {2, 4, 5, 5, 9, 3, 0, 0, DIRECT, 0},     /* ... 9 of 16 lanes */
        {1, 2, 4, 4, 3, 5, 4, 0, DIRECT, 0},     /* padding 4: an 8x8 result from 4x4 */
        {2, 4, 6, 6, 17, 3, 1, 1, OTHER, 0},     /* 17 channels: too many */
        {3, 16, 10, 10, 6, 5, 0, 0, DIRECT, 1},  /* LeNet's second layer's input gradient */
        {2, 5, 7, 6, 3, 5, 2, 0, DIRECT, 1},     /* padding 2 inside */
        {1, 4, 9, 9, 2, 5, 4, 0, DIRECT, 1},     /* padding 4: padding 0 inside */
        {2, 16, 4, 4, 12, 3, 0, 0, DIRECT, 1},   /* AVX-512: channels in the lanes */
        {2, 4, 6, 6, 20, 3, 1, 0, OTHER, 1},     /* a result of 20 channels */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        check(&shapes[i]);
    /* the weights' gradients (bias and transposed unused) */
    static const shape grads[] = {
        {3, 128, 7, 9, 130, 3, 1, 0, WINOGRAD, 0},   /* partial tiles */
        {2, 129, 6, 6, 128, 3, 0, 0, WINOGRAD, 0},   /* no padding */
        {16, 128, 24, 24, 128, 3, 1, 0, WINOGRAD, 0}, /* two chunks of images */
        {40, 1, 28, 28, 6, 5, 2, 0, DIRECT, 0},      /* 16 chunks of 2 or 3 images */
        {3, 6, 14, 14, 16, 5, 0, 0, DIRECT, 0},      /* 4 channels by 3 taps, 4 times */
        {2, 3, 7, 9, 5, 3, 1, 0, DIRECT, 0},         /* the blocks' remainders */
        {2, 4, 6, 6, 17, 3, 1, 0, OTHER, 0},
        {2, 200, 4, 4, 16, 3, 1, 0, OTHER, 0},       /* 28800 weights: too many sums */
    };
    for (size_t i = 0; i < sizeof grads / sizeof *grads; i++)
        check_weight_grad(&grads[i]);

    /* each path off (each executor made after reads the variables) */
    setenv("GNC_WINOGRAD", "0", 1);
    shape off = shapes[0];
    off.path = OTHER;
    check(&off);
    setenv("GNC_DIRECT", "0", 1);
    off = shapes[8];
    off.path = OTHER;
    check(&off);
    off = grads[3];
    off.path = OTHER;
    check_weight_grad(&off);

    /* oneDNN against Winograd, on whichever kernels oneDNN has here */
    unsetenv("GNC_WINOGRAD");
    unsetenv("GNC_DIRECT");
    unsetenv("GNC_DNNL");
    printf("oneDNN's kernels: %s: it %s\n", rt_dnnl_isa(),
           avx512 ? "takes the large planes from Winograd" : "leaves Winograd its shapes");
    shape large = {2, 128, 12, 12, 128, 3, 1, 1, avx512 ? OTHER : WINOGRAD, 0};
    shape small = {2, 128, 4, 4, 128, 3, 1, 1, WINOGRAD, 0};
    check(&large);
    check(&small);
    /* the weights' gradient: oneDNN's where it takes it (planes of 100 and
       more, train_fits), Winograd's where OpenBLAS's would run instead */
    shape dw_large = {2, 128, 12, 12, 128, 3, 1, 0, avx512 ? OTHER : WINOGRAD, 0};
    shape dw_small = {2, 128, 6, 6, 128, 3, 1, 0, WINOGRAD, 0};
    check_weight_grad(&dw_large);
    check_weight_grad(&dw_small);
    printf("cpu_conv: %d failed\n", nfailed);
    return nfailed ? 1 : 0;
}
