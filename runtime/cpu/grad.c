/* The CPU kernels of the ops that autodiff makes (ops.def, "Training"): the
 * training forms of batchnorm and dropout, gradient plumbing, the gradient of
 * each forward op, and the optimizers.  Same conventions as exec.c. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "base.h"
#include "kernels.h"

#define fail base_fail

/* ---------------------------------------------------------------- training forms */

static int k_batchnorm_train(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], batch = t->dims[0], inner = NUMEL(n->in[0]) / (batch * c);
    int64_t count = batch * inner;
    const float *a = IN(0), *w = IN(1), *b = IN(2), *rmean = IN(3), *rvar = IN(4);
    float *y = OUT, *mean = OUTK(1), *invstd = OUTK(2), *rmean2 = OUTK(3), *rvar2 = OUTK(4);
    double eps = ir_attr_float(n, "eps"), m = ir_attr_float(n, "momentum");
#pragma omp parallel for if (batch * c * inner > PAR_MIN)
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0, ss = 0;
        for (int64_t i = 0; i < batch; i++) {
            const float *p = a + (i * c + ch) * inner;
            for (int64_t k = 0; k < inner; k++)
                s += p[k];
        }
        double mu = s / (double)count;
        for (int64_t i = 0; i < batch; i++) {
            const float *p = a + (i * c + ch) * inner;
            for (int64_t k = 0; k < inner; k++)
                ss += (p[k] - mu) * (p[k] - mu);
        }
        double var = ss / (double)count, is = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < batch; i++)
            rt_bn_normalize(a + (i * c + ch) * inner, y + (i * c + ch) * inner, inner,
                            (float)mu, (float)is, w[ch], b[ch]);
        mean[ch] = (float)mu;
        invstd[ch] = (float)is;
        /* PyTorch: the running variance is the unbiased one */
        double unbiased = count > 1 ? var * (double)count / (double)(count - 1) : var;
        rmean2[ch] = (float)((1 - m) * rmean[ch] + m * mu);
        rvar2[ch] = (float)((1 - m) * rvar[ch] + m * unbiased);
    }
    return 0;
}

static int k_batchnorm_apply(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], batch = t->dims[0], inner = NUMEL(n->in[0]) / (batch * c);
    const float *a = IN(0), *w = IN(1), *b = IN(2), *mean = IN(3), *invstd = IN(4);
    float *y = OUT;
#pragma omp parallel for collapse(2) if (batch * c * inner > PAR_MIN)
    for (int64_t i = 0; i < batch; i++)
        for (int64_t ch = 0; ch < c; ch++)
            rt_bn_normalize(a + (i * c + ch) * inner, y + (i * c + ch) * inner, inner,
                            mean[ch], invstd[ch], w[ch], b[ch]);
    return 0;
}

/* Element i is kept when a uniform draw keyed by (seed, step, salt, i) is at
 * least p: masks differ per step and per dropout, and do not depend on the
 * number of threads or on anything run before.  i is the index in the whole
 * tensor when this one is a shard of it (ops.def). */
static int k_dropout_train(rt_exec *x, const ir_node *n)
{
    const float *a = IN(0);
    float *y = OUT, *mask = OUTK(1);
    int64_t step = *(const int64_t *)x->buf[n->in[1]->id];
    int64_t seed = *(const int64_t *)x->buf[n->in[2]->id];
    double p = ir_attr_float(n, "p");
    uint64_t key = base_splitmix64(base_splitmix64((uint64_t)seed) ^
                              base_splitmix64((uint64_t)step * 0x100000001b3ull +
                                         (uint64_t)ir_attr_int(n, "salt")));
    float keep = (float)(1.0 / (1.0 - p));
    int64_t len = NUMEL(n->in[0]);
    /* the shard as an outer x part x inner view of the whole [outer, full, inner] */
    int ns;
    const int64_t *sh = ir_attr_ints(n, "shard", &ns);
    int64_t part = len, full = len, start = 0, inner = 1;
    if (ns == 3) {
        const ir_type *t = &n->in[0]->type;
        part = t->dims[sh[0]], start = sh[1], full = sh[2];
        for (int d = (int)sh[0] + 1; d < t->rank; d++)
            inner *= t->dims[d];
    }
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        int64_t at = i / (part * inner) * full * inner + (start + i / inner % part) * inner + i % inner;
        double u = (double)(base_splitmix64(key ^ base_splitmix64((uint64_t)at)) >> 11) * 0x1.0p-53;
        mask[i] = u >= p ? keep : 0.0f;
        y[i] = a[i] * mask[i];
    }
    return 0;
}

/* ---------------------------------------------------------------- plumbing */

/* sum_to: out[j] sums the elements of a that broadcast from j.  Each output
 * element walks its reduced coordinates, in double. */
static int k_sum_to(rt_exec *x, const ir_node *n)
{
    const ir_type *ta = &n->in[0]->type, *to = &n->out[0]->type;
    int r = ta->rank;
    int64_t st[IR_MAX_RANK], ast[IR_MAX_RANK], red[IR_MAX_RANK], kept[IR_MAX_RANK];
    int nred = 0, nkept = 0;
    rt_bcast_strides(to, r, st);
    int64_t s = 1;
    for (int d = r - 1; d >= 0; d--) {
        ast[d] = s;
        s *= ta->dims[d];
    }
    for (int d = 0; d < r; d++) {
        if (st[d] == 0 && ta->dims[d] > 1)
            red[nred++] = d;
        else
            kept[nkept++] = d;
    }
    int64_t total_red = 1;
    for (int k = 0; k < nred; k++)
        total_red *= ta->dims[red[k]];
    /* the innermost run of reduced elements: the last dimensions where all of
       them are reduced (one contiguous stretch), else the last reduced one */
    int nouter = nred;
    int64_t inner = 1, istride = 1;
    while (nouter && red[nouter - 1] == r - 1 - (nred - nouter))
        inner *= ta->dims[red[--nouter]];
    if (nouter == nred && nred)
        inner = ta->dims[red[nred - 1]], istride = ast[red[nred - 1]], nouter--;
    const float *a = IN(0);
    float *o = OUT;
    int64_t len = NUMEL(n->out[0]);
#pragma omp parallel for if (len * total_red > PAR_MIN)
    for (int64_t j = 0; j < len; j++) {
        /* j enumerates the kept coordinates in order, as the output's do */
        int64_t base = 0, rem = j;
        for (int k = nkept - 1; k >= 0; k--) {
            int d = kept[k];
            base += (rem % ta->dims[d]) * ast[d];
            rem /= ta->dims[d];
        }
        double acc = 0;
        for (int64_t r0 = 0; r0 < total_red; r0 += inner) {
            int64_t off = base, q = r0 / inner;
            for (int k = nouter - 1; k >= 0; k--) {
                off += (q % ta->dims[red[k]]) * ast[red[k]];
                q /= ta->dims[red[k]];
            }
            /* four partial sums: four additions in flight, not one */
            double part[4] = {0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 4 <= inner; i += 4)
                for (int l = 0; l < 4; l++)
                    part[l] += a[off + (i + l) * istride];
            for (; i < inner; i++)
                part[0] += a[off + i * istride];
            acc += (part[0] + part[1]) + (part[2] + part[3]);
        }
        o[j] = (float)acc;
    }
    (void)to;
    return 0;
}

static int k_broadcast_to(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->out[0]->type;
    int r = t->rank;
    int64_t sa[IR_MAX_RANK];
    rt_bcast_strides(&n->in[0]->type, r, sa);
    int64_t inner = r ? t->dims[r - 1] : 1, rows = NUMEL(n->out[0]) / inner;
    int64_t ia = r ? sa[r - 1] : 0;
    const float *a = IN(0);
    float *o = OUT;
#pragma omp parallel for if (rows * inner > PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = 0, rem = row;
        for (int d = r - 2; d >= 0; d--) {
            off += (rem % t->dims[d]) * sa[d];
            rem /= t->dims[d];
        }
        for (int64_t i = 0; i < inner; i++)
            o[row * inner + i] = a[off + i * ia];
    }
    return 0;
}

static int k_slice(rt_exec *x, const ir_node *n)
{
    const ir_type *ta = &n->in[0]->type;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t start = ir_attr_int(n, "start"), size = ir_attr_int(n, "size"), inner = 1, outer = 1;
    for (int i = axis + 1; i < ta->rank; i++)
        inner *= ta->dims[i];
    for (int i = 0; i < axis; i++)
        outer *= ta->dims[i];
    size_t es = ta->dtype == IR_I64 ? 8 : ta->dtype == IR_U8 ? 1 : 4; /* floats as f32 */
    const char *a = x->buf[n->in[0]->id];
    char *o = x->buf[n->out[0]->id];
    for (int64_t u = 0; u < outer; u++)
        memcpy(o + (size_t)(u * size * inner) * es,
               a + (size_t)((u * ta->dims[axis] + start) * inner) * es, (size_t)(size * inner) * es);
    return 0;
}

/* ---------------------------------------------------------------- gradients */

/* dx = op(dy, v) by ir/arith.h's functions (ops.def's UNARY table) */
static int k_unary_grad(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const float *dy = IN(0), *v = IN(1); /* v: y or x, as ops.def says */
    float *dx = OUT;
    int64_t len = NUMEL(n->out[0]);
    float p, q;
    rt_unary_attrs(n, &p, &q);
    (void)p, (void)q;
    switch (n->op) {
#define EACH(expr)                                       \
    _Pragma("omp parallel for if (len > PAR_MIN)")       \
    for (int64_t i = 0; i < len; i++)                    \
        dx[i] = (expr);                                  \
    break;
#define GRAD_X(op, name, n) case IR_OP_##op##_GRAD: EACH(ar_##name##_grad(dy[i], v[i] AR_ATTRS##n))
#define GRAD_Y GRAD_X
#define GRAD_NONE(op, name, n)
#define UNARY(op, name, n, from) GRAD_##from(op, name, n)
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#include "ops.def"
#undef OP
#undef UNARY
#undef GRAD_X
#undef GRAD_Y
#undef GRAD_NONE
#undef EACH
    default: return fail(err, errlen, "%s has no arithmetic in ir/arith.h", ir_ops[n->op].name);
    }
    return 0;
}

/* reduce_max_grad, reduce_min_grad: dy to the first extreme of each line along
 * the axis, as the forward pass found it; with ties, dy / count to each of the
 * count elements equal to it (NaNs where it is NaN), as PyTorch's
 * evenly_distribute_backward */
static int k_extreme_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[1]->type;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t len = t->dims[axis], inner = 1, outer = NUMEL(n->in[0]);
    for (int d = axis + 1; d < t->rank; d++)
        inner *= t->dims[d];
    const float *dy = IN(0), *a = IN(1);
    float *dx = OUT;
    memset(dx, 0, (size_t)NUMEL(n->out[0]) * sizeof *dx);
    int want_min = n->op == IR_OP_REDUCE_MIN_GRAD, ties = ir_attr_int(n, "ties") != 0;
#pragma omp parallel for if (outer * len > PAR_MIN)
    for (int64_t i = 0; i < outer; i++) {
        int64_t at = (i / inner * len) * inner + i % inner;
        int64_t arg = rt_arg_extreme(a + at, len, inner, want_min);
        if (!ties) {
            dx[at + arg * inner] = dy[i];
            continue;
        }
        float best = a[at + arg * inner];
        int64_t count = 0;
        for (int64_t l = 0; l < len; l++) {
            float v = a[at + l * inner];
            count += v == best || (v != v && best != best);
        }
        float share = dy[i] / (float)count;
        for (int64_t l = 0; l < len; l++) {
            float v = a[at + l * inner];
            if (v == best || (v != v && best != best))
                dx[at + l * inner] = share;
        }
    }
    return 0;
}

static int k_dense_grad(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const ir_type *tdy = &n->in[0]->type;
    int64_t out = tdy->dims[tdy->rank - 1], rows = NUMEL(n->in[0]) / out;
    if (n->op == IR_OP_DENSE_GRAD_INPUT) { /* dx[rows, in] = dy[rows, out] w[out, in] */
        int64_t in = n->in[1]->type.dims[1];
        rt_gemm_args g = {0, 0, rows, in, out, IN(0), IN(1), OUT, out, in, in, NULL};
        return rt_node_gemm(x, n, &g, err, errlen);
    }
    /* dw[out, in] = dy^T x */
    int64_t in = n->in[1]->type.dims[n->in[1]->type.rank - 1];
    rt_gemm_args g = {1, 0, out, in, rows, IN(0), IN(1), OUT, out, in, in, NULL};
    return rt_node_gemm(x, n, &g, err, errlen);
}

/* col2im: adds the columns of one image back onto its channels [c0, c0 + cg). */
static void col2im(const conv_geom *g, const float *col, int64_t ldc, int64_t col0, float *img,
                   int64_t c0, int64_t cg)
{
#pragma omp parallel for if (cg * g->kh * g->kw * g->oh * g->ow > PAR_MIN)
    for (int64_t ci = 0; ci < cg; ci++) {
        float *dst = img + (c0 + ci) * g->h * g->w;
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const float *src = col + ((ci * g->kh + ky) * g->kw + kx) * ldc + col0;
                for (int64_t oy = 0; oy < g->oh; oy++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    if (iy < 0 || iy >= g->h)
                        continue;
                    for (int64_t ox = 0; ox < g->ow; ox++) {
                        int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                        if (ix >= 0 && ix < g->w)
                            dst[iy * g->w + ix] += src[oy * g->ow + ox];
                    }
                }
            }
    }
}

/* At most this many chunks, and fewer where their partial sums would pass
 * CONV_DW_FLOATS floats. */
#define CONV_DW_CHUNKS 16
#define CONV_DW_FLOATS ((int64_t)1 << 23)

int64_t rt_conv_dw_chunks(int64_t n, int64_t wsize)
{
    int64_t chunks = n < CONV_DW_CHUNKS ? n : CONV_DW_CHUNKS;
    return chunks > 1 + CONV_DW_FLOATS / wsize ? 1 + CONV_DW_FLOATS / wsize : chunks;
}

void rt_conv_dw_add_chunks(float *dw, const float *part, int64_t chunks, int64_t wsize)
{
    if (chunks < 2) /* one chunk (or none, for the input's gradient): dw is whole */
        return;
#pragma omp parallel for if (chunks * wsize > PAR_MIN)
    for (int64_t i = 0; i < wsize; i++) {
        float s = dw[i];
        for (int64_t ch = 1; ch < chunks; ch++)
            s += part[(ch - 1) * wsize + i];
        dw[i] = s;
    }
}

/* The gradients image by image (see rt_conv_per_image), each thread with its own
 * columns and single-threaded GEMMs.  The input's: each image's columns folded
 * back onto it.  The weight's: each chunk of consecutive images summed into a
 * partial dw image by image, in order (chunk 0 into out, the others into
 * scratch), then the chunks added to out in chunk order, element by element:
 * the same sums in the same order on any number of threads. */
static int conv2d_grad_per_image(rt_exec *x, const ir_node *n, const conv_geom *g, char *err,
                                 size_t errlen)
{
    int gi_input = n->op == IR_OP_CONV2D_GRAD_INPUT;
    const float *dy = IN(0), *other = IN(1);
    float *out = OUT;
    int64_t cg = g->c / g->groups, og = g->o / g->groups;
    int64_t kdim = cg * g->kh * g->kw, plane = g->oh * g->ow, wsize = g->o * kdim;
    int64_t chunks = gi_input ? 0 : rt_conv_dw_chunks(g->n, wsize);
    int nt = omp_get_max_threads();
    int64_t ncols = nt * kdim * plane;
    float *scratch = rt_scratch(x, (size_t)(ncols + (chunks ? chunks - 1 : 0) * wsize));
    if (!scratch)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
#pragma omp parallel
    {
        float *col = scratch + omp_get_thread_num() * kdim * plane;
        omp_set_num_threads(1); /* OpenBLAS on this thread alone (rt_gemm) */
        if (gi_input) {
#pragma omp for schedule(static)
            for (int64_t b = 0; b < g->n; b++) {
                const float *dyb = dy + b * g->o * plane;
                float *dx = out + b * g->c * g->h * g->w;
                memset(dx, 0, (size_t)(g->c * g->h * g->w) * sizeof *dx);
                for (int64_t gi = 0; gi < g->groups; gi++) {
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kdim, (int)plane,
                                (int)og, 1.0f, other + gi * og * kdim, (int)kdim,
                                dyb + gi * og * plane, (int)plane, 0.0f, col, (int)plane);
                    col2im(g, col, plane, 0, dx, gi * cg, cg);
                }
            }
        } else {
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < chunks; ch++) {
                float *dw = ch ? scratch + ncols + (ch - 1) * wsize : out;
                int64_t b0 = ch * g->n / chunks, b1 = (ch + 1) * g->n / chunks;
                for (int64_t b = b0; b < b1; b++)
                    for (int64_t gi = 0; gi < g->groups; gi++) {
                        const float *img = other + b * g->c * g->h * g->w;
                        rt_im2col(g, img, gi * cg, cg, col, plane, 0);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)og,
                                    (int)kdim, (int)plane, 1.0f,
                                    dy + (b * g->o + gi * og) * plane, (int)plane, col,
                                    (int)plane, b == b0 ? 0.0f : 1.0f, dw + gi * og * kdim,
                                    (int)kdim);
                    }
            }
        }
    }
    rt_conv_dw_add_chunks(out, scratch + ncols, chunks, wsize);
    return 0;
}

/* Both convolution gradients, through the columns of chunks of images as in the
 * forward pass: dw_g += dy_g cols^T, and cols = w_g^T dy_g folded back by col2im. */
static int k_conv2d_grad(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    int gi_input = n->op == IR_OP_CONV2D_GRAD_INPUT;
    const ir_type *tdy = &n->in[0]->type, *tout = &n->out[0]->type;
    conv_geom g = gi_input ? rt_conv_geometry(n, tout, &n->in[1]->type, tdy)
                           : rt_conv_geometry(n, &n->in[1]->type, tout, tdy);
    const float *dy = IN(0), *other = IN(1); /* w, or x */
    float *out = OUT;
    int64_t cg = g.c / g.groups, og = g.o / g.groups;
    int64_t kdim = cg * g.kh * g.kw, plane = g.oh * g.ow;
    int on_own = rt_wino_conv(x, n, err, errlen);
    if (!on_own)
        on_own = rt_direct_conv(x, n, NULL, err, errlen);
    if (on_own)
        return on_own < 0 ? -1 : 0;
    int absorbed;
    int on_dnnl = rt_dnnl_conv(x, n, NULL, 0, &absorbed, err, errlen);
    if (on_dnnl)
        return on_dnnl < 0 ? -1 : 0;
    x->blas_convs++;
    if (rt_conv_per_image(&g))
        return conv2d_grad_per_image(x, n, &g, err, errlen);
    int64_t chunk = ((int64_t)1 << 22) / (kdim * plane);
    chunk = chunk < 1 ? 1 : chunk > g.n ? g.n : chunk;
    float *col = rt_scratch(x, (size_t)((kdim + og) * plane * chunk));
    if (!col)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    float *dyg = col + kdim * plane * chunk;
    memset(out, 0, (size_t)NUMEL(n->out[0]) * sizeof *out);
    for (int64_t b0 = 0; b0 < g.n; b0 += chunk) {
        int64_t nb = g.n - b0 < chunk ? g.n - b0 : chunk, ldc = nb * plane;
        for (int64_t gi = 0; gi < g.groups; gi++) {
            /* this group's dy for the chunk, as [og, nb * plane] */
#pragma omp parallel for collapse(2) if (og * ldc > PAR_MIN)
            for (int64_t b = 0; b < nb; b++)
                for (int64_t oc = 0; oc < og; oc++)
                    memcpy(dyg + oc * ldc + b * plane,
                           dy + ((b0 + b) * g.o + gi * og + oc) * plane,
                           (size_t)plane * sizeof *dyg);
            if (gi_input) {
                rt_gemm(1, 0, kdim, ldc, og, other + gi * og * kdim, kdim, dyg, ldc, 0.0f, col,
                        ldc);
                for (int64_t b = 0; b < nb; b++)
                    col2im(&g, col, ldc, b * plane, out + (b0 + b) * g.c * g.h * g.w, gi * cg,
                           cg);
            } else {
                for (int64_t b = 0; b < nb; b++)
                    rt_im2col(&g, other + (b0 + b) * g.c * g.h * g.w, gi * cg, cg, col, ldc,
                              b * plane);
                rt_gemm(0, 1, og, kdim, ldc, dyg, ldc, col, ldc, 1.0f, out + gi * og * kdim,
                        kdim);
            }
        }
    }
    return 0;
}

static int k_batchnorm_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], batch = t->dims[0], inner = NUMEL(n->in[0]) / (batch * c);
    double count = (double)(batch * inner);
    const float *dy = IN(0), *a = IN(1), *w = IN(2), *mean = IN(3), *invstd = IN(4);
    float *dx = OUT, *dw = OUTK(1), *db = OUTK(2);
#pragma omp parallel for if (batch * c * inner > PAR_MIN)
    for (int64_t ch = 0; ch < c; ch++) {
        double sdy = 0, sdyx = 0, mu = mean[ch], is = invstd[ch];
        for (int64_t i = 0; i < batch; i++) {
            const float *p = a + (i * c + ch) * inner, *q = dy + (i * c + ch) * inner;
            for (int64_t k = 0; k < inner; k++) {
                sdy += q[k];
                sdyx += q[k] * (p[k] - mu) * is;
            }
        }
        db[ch] = (float)sdy;
        dw[ch] = (float)sdyx;
        /* dx = w is / N (N dy - sum dy - xhat sum(dy xhat)) */
        float k1 = (float)(w[ch] * is), k2 = (float)(sdy / count),
              k3 = (float)(sdyx / count);
        for (int64_t i = 0; i < batch; i++) {
            const float *p = a + (i * c + ch) * inner, *q = dy + (i * c + ch) * inner;
            float *r = dx + (i * c + ch) * inner;
            for (int64_t k = 0; k < inner; k++) {
                float xhat = (float)((p[k] - mu) * is);
                r[k] = k1 * (q[k] - k2 - xhat * k3);
            }
        }
    }
    return 0;
}

static int k_layernorm_grad(rt_exec *x, const ir_node *n)
{
    int64_t d = NUMEL(n->in[2]), rows = NUMEL(n->in[1]) / d;
    const float *dy = IN(0), *a = IN(1), *w = IN(2);
    float *dx = OUT, *dw = OUTK(1), *db = OUTK(2);
    double eps = ir_attr_float(n, "eps");
    float *stats = rt_scratch(x, (size_t)(2 * rows)); /* mean, invstd per row */
    if (!stats)
        return -1;
#pragma omp parallel for if (rows * d > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *p = a + r * d, *q = dy + r * d;
        double mu = 0, var = 0, s1 = 0, s2 = 0;
        for (int64_t i = 0; i < d; i++)
            mu += p[i];
        mu /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (p[i] - mu) * (p[i] - mu);
        double is = 1.0 / sqrt(var / (double)d + eps);
        stats[2 * r] = (float)mu, stats[2 * r + 1] = (float)is;
        for (int64_t i = 0; i < d; i++) {
            double g = (double)q[i] * w[i];
            s1 += g;
            s2 += g * (p[i] - mu) * is;
        }
        for (int64_t i = 0; i < d; i++) {
            double xhat = (p[i] - mu) * is, g = (double)q[i] * w[i];
            dx[r * d + i] = (float)(is * (g - s1 / (double)d - xhat * s2 / (double)d));
        }
    }
#pragma omp parallel for if (rows * d > PAR_MIN)
    for (int64_t i = 0; i < d; i++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            double xhat = (a[r * d + i] - stats[2 * r]) * (double)stats[2 * r + 1];
            sw += dy[r * d + i] * xhat;
            sb += dy[r * d + i];
        }
        dw[i] = (float)sw, db[i] = (float)sb;
    }
    return 0;
}

static int k_softmax_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t len = t->dims[axis], inner = 1;
    for (int i = axis + 1; i < t->rank; i++)
        inner *= t->dims[i];
    int64_t outer = NUMEL(n->in[0]) / (len * inner);
    const float *dy = IN(0), *y = IN(1);
    float *dx = OUT;
    int logsm = n->op == IR_OP_LOG_SOFTMAX_GRAD;
#pragma omp parallel for collapse(2) if (outer * len * inner > PAR_MIN)
    for (int64_t u = 0; u < outer; u++)
        for (int64_t v = 0; v < inner; v++) {
            int64_t base = u * len * inner + v;
            double s = 0;
            for (int64_t i = 0; i < len; i++)
                s += logsm ? dy[base + i * inner]
                           : (double)dy[base + i * inner] * y[base + i * inner];
            for (int64_t i = 0; i < len; i++) {
                int64_t k = base + i * inner;
                dx[k] = logsm ? (float)(dy[k] - exp((double)y[k]) * s)
                              : (float)(y[k] * (dy[k] - s));
            }
        }
    return 0;
}

static int k_maxpool_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[1]->type, *tdy = &n->in[0]->type;
    const int64_t *k = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                  *pd = ir_attr_ints(n, "pad", NULL), *dl = ir_attr_ints(n, "dilation", NULL);
    int64_t h = t->dims[2], w = t->dims[3], oh = tdy->dims[2], ow = tdy->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *dy = IN(0), *a = IN(1);
    float *dx = OUT;
    memset(dx, 0, (size_t)NUMEL(n->out[0]) * sizeof *dx);
#pragma omp parallel for if (planes * oh * ow * k[0] * k[1] > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                float m = -INFINITY;
                int64_t arg = -1; /* the first maximum, as the forward pass picks it */
                for (int64_t ky = 0; ky < k[0]; ky++) {
                    int64_t iy = oy * st[0] - pd[0] + ky * dl[0];
                    for (int64_t kx = 0; kx < k[1] && iy >= 0 && iy < h; kx++) {
                        int64_t ix = ox * st[1] - pd[1] + kx * dl[1];
                        if (ix < 0 || ix >= w)
                            continue;
                        float v = a[(p * h + iy) * w + ix];
                        if (arg < 0 || v > m || isnan(v)) {
                            m = v;
                            arg = iy * w + ix;
                            if (isnan(v))
                                goto found;
                        }
                    }
                }
found:
                if (arg >= 0)
                    dx[p * h * w + arg] += dy[(p * oh + oy) * ow + ox];
            }
    return 0;
}

static int k_avgpool_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->out[0]->type, *tdy = &n->in[0]->type;
    const int64_t *k = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                  *pd = ir_attr_ints(n, "pad", NULL);
    int incl = ir_attr_int(n, "count_include_pad") != 0;
    int64_t h = t->dims[2], w = t->dims[3], oh = tdy->dims[2], ow = tdy->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *dy = IN(0);
    float *dx = OUT;
    if (rt_pool_tiles(k, st, pd, h, w, oh, ow)) { /* each element gets its one window's share */
        float scale = 1.0f / (float)(k[0] * k[1]);
#pragma omp parallel for if (planes * h * w > PAR_MIN)
        for (int64_t p = 0; p < planes; p++)
            for (int64_t iy = 0; iy < h; iy++) {
                float *d = dx + (p * h + iy) * w;
                const float *g = dy + (p * oh + iy / k[0]) * ow;
                int64_t inside = iy < oh * k[0] ? ow * k[1] : 0;
                if (inside && k[1] == 2) /* the common 2x2, unrolled */
                    for (int64_t ox = 0; ox < ow; ox++)
                        d[2 * ox] = d[2 * ox + 1] = g[ox] * scale;
                else
                    for (int64_t ox = 0; inside && ox < ow; ox++)
                        for (int64_t kx = 0; kx < k[1]; kx++)
                            d[ox * k[1] + kx] = g[ox] * scale;
                for (int64_t ix = inside; ix < w; ix++)
                    d[ix] = 0;
            }
        return 0;
    }
    memset(dx, 0, (size_t)NUMEL(n->out[0]) * sizeof *dx);
#pragma omp parallel for if (planes * oh * ow * k[0] * k[1] > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t win[4];
                float g = dy[(p * oh + oy) * ow + ox] /
                          (float)rt_avgpool_window(k, st, pd, h, w, oy, ox, incl, win);
                for (int64_t iy = win[0]; iy < win[1]; iy++)
                    for (int64_t ix = win[2]; ix < win[3]; ix++)
                        dx[(p * h + iy) * w + ix] += g;
            }
    return 0;
}

/* dx gathers the share of every window holding it, in window order, as the
 * GPU's kernel does: no two threads write one element. */
static int k_adaptive_avgpool_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->out[0]->type, *tdy = &n->in[0]->type;
    int64_t h = t->dims[2], w = t->dims[3], oh = tdy->dims[2], ow = tdy->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *dy = IN(0);
    float *dx = OUT;
#pragma omp parallel for if (planes * h * w > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t iy = 0; iy < h; iy++) {
            int64_t oy0, oy1;
            rt_adaptive_holders(iy, h, oh, &oy0, &oy1);
            for (int64_t ix = 0; ix < w; ix++) {
                int64_t ox0, ox1;
                rt_adaptive_holders(ix, w, ow, &ox0, &ox1);
                float s = 0;
                for (int64_t oy = oy0; oy <= oy1; oy++) {
                    int64_t y0, y1;
                    rt_adaptive_window(oy, h, oh, &y0, &y1);
                    for (int64_t ox = ox0; ox <= ox1; ox++) {
                        int64_t x0, x1;
                        rt_adaptive_window(ox, w, ow, &x0, &x1);
                        s += dy[(p * oh + oy) * ow + ox] / (float)((y1 - y0) * (x1 - x0));
                    }
                }
                dx[(p * h + iy) * w + ix] = s;
            }
        }
    return 0;
}

/* upsample2d's weight on input j of output dst along an axis (taps as
 * ir_upsample_taps gives them). */
static float upsample_weight(int64_t j, int64_t i0, int64_t i1, float l0, float l1)
{
    return (i0 == j ? l0 : 0.0f) + (i1 == j ? l1 : 0.0f);
}

/* dx gathers, in output order, every output that read it times its weight, as
 * the GPU's kernel does: no two threads write one element. */
static int k_upsample_grad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->out[0]->type, *tdy = &n->in[0]->type;
    int64_t h = t->dims[2], w = t->dims[3], oh = tdy->dims[2], ow = tdy->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    int bil = (int)ir_attr_int(n, "mode"), al = (int)ir_attr_int(n, "align_corners");
    float rh = ir_upsample_ratio(h, oh, bil, al, ir_attr_float(n, "scale_h"));
    float rw = ir_upsample_ratio(w, ow, bil, al, ir_attr_float(n, "scale_w"));
    const float *dy = IN(0);
    float *dx = OUT;
#pragma omp parallel for if (planes * h * w > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t iy = 0; iy < h; iy++) {
            int64_t oy0, oy1;
            ir_upsample_readers(iy, h, oh, bil, al, rh, &oy0, &oy1);
            for (int64_t ix = 0; ix < w; ix++) {
                int64_t ox0, ox1;
                ir_upsample_readers(ix, w, ow, bil, al, rw, &ox0, &ox1);
                float s = 0;
                for (int64_t oy = oy0; oy < oy1; oy++) {
                    int64_t y0, y1, x0, x1;
                    float l0, l1;
                    ir_upsample_taps(oy, h, oh, bil, al, rh, &y0, &y1, &l0, &l1);
                    float wy = upsample_weight(iy, y0, y1, l0, l1);
                    for (int64_t ox = ox0; ox < ox1; ox++) {
                        ir_upsample_taps(ox, w, ow, bil, al, rw, &x0, &x1, &l0, &l1);
                        s += wy * upsample_weight(ix, x0, x1, l0, l1) * dy[(p * oh + oy) * ow + ox];
                    }
                }
                dx[(p * h + iy) * w + ix] = s;
            }
        }
    return 0;
}

static int k_embedding_grad(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const ir_type *tw = &n->out[0]->type;
    int64_t num = tw->dims[0], dim = tw->dims[1], len = NUMEL(n->in[1]);
    const float *dy = IN(0);
    const void *idx = x->buf[n->in[1]->id];
    float *dw = OUT;
    int64_t pad = ir_attr_int(n, "padding_idx");
    memset(dw, 0, (size_t)NUMEL(n->out[0]) * sizeof *dw);
    for (int64_t i = 0, r = 0; i < len; i++) {
        int64_t k = rt_index_at(idx, n->in[1]->type.dtype, i);
        if (rt_embedding_row(n, n->in[1], num, i, k, &r, err, errlen) != 0)
            return -1;
        if (k == pad || r < 0 || r >= num) /* padding_idx (nn.Embedding's), another shard */
            continue;
        for (int64_t j = 0; j < dim; j++)
            dw[r * dim + j] += dy[i * dim + j];
    }
    return 0;
}

/* dx = dloss / count (softmax - (1 - eps) onehot(y) - eps / c) at the
 * positions not ignored (nll_loss: -dloss / count onehot(y)), 0 at the others. */
static int k_cross_entropy_grad(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    rt_ce ce;
    if (rt_ce_begin(x, n, 1, &ce, err, errlen) != 0)
        return -1;
    double scale = *IN(0) / (double)ce.count, off = ce.eps / (double)ce.c;
    const float *a = IN(1);
    float *dx = OUT;
    for (int64_t r = 0; r < ce.npos; r++) {
        int64_t y = rt_index_at(ce.lab, ce.ldt, r), s = ce.inner;
        const float *p = rt_ce_row(&ce, a, r);
        float *d = dx + (p - a);
        if (y == ce.ignore || ce.nll) {
            for (int64_t i = 0; i < ce.c; i++)
                d[i * s] = ce.nll && i == y && y != ce.ignore ? (float)-scale : 0.0f;
            continue;
        }
        float mx = -INFINITY;
        for (int64_t i = 0; i < ce.c; i++)
            mx = p[i * s] > mx ? p[i * s] : mx;
        double sum = 0;
        for (int64_t i = 0; i < ce.c; i++)
            sum += exp((double)(p[i * s] - mx));
        for (int64_t i = 0; i < ce.c; i++)
            d[i * s] = (float)((exp((double)(p[i * s] - mx)) / sum - (1 - ce.eps) * (i == y) -
                                off) * scale);
    }
    return 0;
}

/* ---------------------------------------------------------------- optimizers */

/* torch.optim.SGD: d = g + wd p; buf = momentum buf + d (buf = d at the first
 * step, which is the same from a zero buffer); d = nesterov ? d + momentum buf
 * : buf; p -= lr d. */
static int k_sgd(rt_exec *x, const ir_node *n)
{
    const float *p = IN(0), *g = IN(1), *buf = n->nin == 4 ? IN(3) : NULL;
    float lr = *IN(2), *p2 = OUT, *buf2 = buf ? OUTK(1) : NULL;
    float mom = (float)ir_attr_float(n, "momentum"), wd = (float)ir_attr_float(n, "weight_decay");
    int nesterov = ir_attr_int(n, "nesterov") != 0;
    int64_t len = NUMEL(n->in[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        float d = g[i] + wd * p[i];
        if (buf) {
            float b = mom * buf[i] + d;
            buf2[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        p2[i] = p[i] - lr * d;
    }
    return 0;
}

/* torch.optim.Adam / AdamW (decoupled weight decay), step t = steps before + 1. */
static int k_adam(rt_exec *x, const ir_node *n)
{
    const float *p = IN(0), *g = IN(1), *m = IN(2), *v = IN(3);
    float lr = *IN(4);
    int64_t t = *(const int64_t *)x->buf[n->in[5]->id] + 1;
    float *p2 = OUT, *m2 = OUTK(1), *v2 = OUTK(2);
    double b1 = ir_attr_float(n, "beta1"), b2 = ir_attr_float(n, "beta2");
    float eps = (float)ir_attr_float(n, "eps"), wd = (float)ir_attr_float(n, "weight_decay");
    int decoupled = ir_attr_int(n, "decoupled") != 0;
    float step_size = (float)(lr / (1 - pow(b1, (double)t)));
    float bc2 = (float)sqrt(1 - pow(b2, (double)t));
    float fb1 = (float)b1, fb2 = (float)b2;
    int64_t len = NUMEL(n->in[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        float q = p[i], d = g[i];
        if (decoupled)
            q *= 1 - lr * wd;
        else
            d += wd * q;
        float mm = fb1 * m[i] + (1 - fb1) * d, vv = fb2 * v[i] + (1 - fb2) * d * d;
        m2[i] = mm, v2[i] = vv;
        p2[i] = q - step_size * mm / (sqrtf(vv) / bc2 + eps);
    }
    return 0;
}

int rt_train_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    if (ir_op_is(n->op, IR_UNARY_GRAD))
        return k_unary_grad(x, n, err, errlen);
    switch (n->op) {
    case IR_OP_BATCHNORM_TRAIN: return k_batchnorm_train(x, n);
    case IR_OP_BATCHNORM_APPLY: return k_batchnorm_apply(x, n);
    case IR_OP_DROPOUT_TRAIN: return k_dropout_train(x, n);
    case IR_OP_SUM_TO: return k_sum_to(x, n);
    case IR_OP_BROADCAST_TO: return k_broadcast_to(x, n);
    case IR_OP_SLICE: return k_slice(x, n);
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_DENSE_GRAD_WEIGHT: return k_dense_grad(x, n, err, errlen);
    case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT:
        return k_conv2d_grad(x, n, err, errlen);
    case IR_OP_BATCHNORM_GRAD: return k_batchnorm_grad(x, n);
    case IR_OP_LAYERNORM_GRAD: return k_layernorm_grad(x, n);
    case IR_OP_ATTENTION_GRAD: return rt_attention_grad(x, n);
    case IR_OP_SOFTMAX_GRAD: case IR_OP_LOG_SOFTMAX_GRAD: return k_softmax_grad(x, n);
    case IR_OP_MAXPOOL2D_GRAD: return k_maxpool_grad(x, n);
    case IR_OP_REDUCE_MAX_GRAD: case IR_OP_REDUCE_MIN_GRAD: return k_extreme_grad(x, n);
    case IR_OP_AVGPOOL2D_GRAD: return k_avgpool_grad(x, n);
    case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD: return k_adaptive_avgpool_grad(x, n);
    case IR_OP_UPSAMPLE2D_GRAD: return k_upsample_grad(x, n);
    case IR_OP_EMBEDDING_GRAD: return k_embedding_grad(x, n, err, errlen);
    case IR_OP_CROSS_ENTROPY_GRAD: case IR_OP_NLL_LOSS_GRAD:
        return k_cross_entropy_grad(x, n, err, errlen);
    case IR_OP_SGD: return k_sgd(x, n);
    case IR_OP_BN_FOLD_SCALE: { /* gamma / sqrt(var + eps), as k_batchnorm's scale */
        const float *g = IN(0), *v = IN(1);
        float *o = OUT;
        double eps = ir_attr_float(n, "eps");
        for (int64_t i = 0; i < NUMEL(n->out[0]); i++)
            o[i] = (float)(g[i] / sqrt((double)v[i] + eps));
        return 0;
    }
    case IR_OP_ADAM: return k_adam(x, n);
    default: return fail(err, errlen, "the CPU executor has no kernel for op %d", (int)n->op);
    }
}
