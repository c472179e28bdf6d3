/* The libraries' results on the host (ref.h). */
#include "ref.h"

#include <stdlib.h>
#include <string.h>

double fkref_tf32(double v)
{
    float f = (float)v;
    unsigned u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

int fkref_gemm_run(const fkref_gemm *g, const fkref_io *io)
{
    const int64_t m = g->m, n = g->n, k = g->k;
    /* op(A) (m x k, row i contiguous) and op(B) (n x k, column j contiguous)
       of one batch entry as doubles, rounded to TF32 where asked: the sums
       then run over plain arrays */
    double *a = malloc((size_t)(m * k + 1) * sizeof *a), *b = malloc((size_t)(n * k + 1) * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    for (int64_t bt = 0; bt < g->batch; bt++) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t l = 0; l < k; l++) {
                double x = io->load(g->a, bt * g->stride_a + (g->trans_a ? l + i * g->lda : i + l * g->lda),
                                    g->type_a);
                a[i * k + l] = g->tf32 ? fkref_tf32(x) : x;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t l = 0; l < k; l++) {
                double y = io->load(g->b, bt * g->stride_b + (g->trans_b ? j + l * g->ldb : l + j * g->ldb),
                                    g->type_b);
                b[j * k + l] = g->tf32 ? fkref_tf32(y) : y;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                double s = 0;
                const double *ai = a + i * k, *bj = b + j * k;
                for (int64_t l = 0; l < k; l++)
                    s += ai[l] * bj[l];
                double v = g->alpha * s;
                if (g->beta != 0)
                    v += g->beta * io->load(g->c, bt * g->stride_c + i + j * g->ldc, g->type_c);
                if (g->bias)
                    v += io->load(g->bias, i, g->type_bias);
                if (g->relu && !(v > 0))
                    v = 0;
                io->store(g->d, bt * g->stride_d + i + j * g->ldd, g->type_d, v);
            }
    }
    free(a);
    free(b);
    return 0;
}

/* Where element (n, c, h, w) of a tensor with strides st lies. */
static int64_t tensor_at(const int64_t *st, int64_t n, int64_t c, int64_t h, int64_t w)
{
    return n * st[0] + c * st[1] + h * st[2] + w * st[3];
}

/* Where the filter's element i in KCRS order lies. */
static int64_t filter_at(const fkref_conv *cv, int64_t i)
{
    if (!cv->krsc)
        return i;
    int64_t cg = cv->c / cv->groups, rs = cv->r * cv->s, k = i / (cg * rs), c = i / rs % cg;
    return (k * rs + i % rs) * cg + c;
}

/* Element i, in NCHW order, of a tensor of dims d[4] with strides st. */
static int64_t nchw_at(const int64_t *st, const int64_t *d, int64_t i)
{
    return tensor_at(st, i / d[3] / d[2] / d[1], i / d[3] / d[2] % d[1], i / d[3] % d[2], i % d[3]);
}

int fkref_conv_run(const fkref_conv *cv, const fkref_io *io)
{
    const int kind = cv->kind, t = cv->type;
    const int64_t cg = cv->c / cv->groups, kg = cv->k / cv->groups;
    const int64_t xd[4] = {cv->n, cv->c, cv->h, cv->w}, yd[4] = {cv->n, cv->k, cv->p, cv->q};
    const int64_t nx = cv->n * cv->c * cv->h * cv->w, ny = cv->n * cv->k * cv->p * cv->q;
    const int64_t nw = cv->k * cg * cv->r * cv->s;
    const int64_t nacc = kind == FKREF_FORWARD ? ny : kind == FKREF_BACKWARD_DATA ? nx : nw;
    /* the inputs as contiguous doubles (x and dy in NCHW order, the filter in
       KCRS, whatever their layouts), rounded to TF32 where asked: the loops
       then run over plain arrays */
    double *acc = calloc((size_t)nacc + 1, sizeof *acc);
    double *x = kind == FKREF_BACKWARD_DATA ? NULL : malloc((size_t)(nx + 1) * sizeof *x);
    double *w = kind == FKREF_BACKWARD_FILTER ? NULL : malloc((size_t)(nw + 1) * sizeof *w);
    double *dy = kind == FKREF_FORWARD ? NULL : malloc((size_t)(ny + 1) * sizeof *dy);
    if (!acc || (kind != FKREF_BACKWARD_DATA && !x) || (kind != FKREF_BACKWARD_FILTER && !w) ||
        (kind != FKREF_FORWARD && !dy)) {
        free(acc), free(x), free(w), free(dy);
        return -1;
    }
#define RD(P, i) (cv->tf32 ? fkref_tf32(io->load(P, i, t)) : io->load(P, i, t))
    for (int64_t i = 0; x && i < nx; i++)
        x[i] = RD(cv->x, nchw_at(cv->xs, xd, i));
    for (int64_t i = 0; w && i < nw; i++)
        w[i] = RD(cv->wt, filter_at(cv, i));
    for (int64_t i = 0; dy && i < ny; i++)
        dy[i] = RD(cv->y, nchw_at(cv->ys, yd, i));
#undef RD
    for (int64_t n = 0; n < cv->n; n++)
        for (int64_t k = 0; k < cv->k; k++)
            for (int64_t p = 0; p < cv->p; p++)
                for (int64_t q = 0; q < cv->q; q++) {
                    int64_t g = k / kg, iy = ((n * cv->k + k) * cv->p + p) * cv->q + q;
                    double d = kind == FKREF_FORWARD ? 0 : dy[iy], s = 0;
                    for (int64_t ch = 0; ch < cg; ch++)
                        for (int64_t r = 0; r < cv->r; r++) {
                            int64_t yy = p * cv->stride[0] - cv->pad[0] + r * cv->dilation[0];
                            if (yy < 0 || yy >= cv->h)
                                continue;
                            int64_t xrow = ((n * cv->c + g * cg + ch) * cv->h + yy) * cv->w;
                            int64_t wrow = ((k * cg + ch) * cv->r + r) * cv->s;
                            for (int64_t sx = 0; sx < cv->s; sx++) {
                                int64_t xx = q * cv->stride[1] - cv->pad[1] + sx * cv->dilation[1];
                                if (xx < 0 || xx >= cv->w)
                                    continue;
                                if (kind == FKREF_FORWARD)
                                    s += x[xrow + xx] * w[wrow + sx];
                                else if (kind == FKREF_BACKWARD_DATA)
                                    acc[xrow + xx] += d * w[wrow + sx];
                                else
                                    acc[wrow + sx] += d * x[xrow + xx];
                            }
                        }
                    if (kind == FKREF_FORWARD)
                        acc[iy] = s;
                }
    free(x), free(w), free(dy);
    /* the epilogue into acc, in place; then the stores, every value computed
       before any is written (z may be the output, the output an input's memory) */
    const int64_t *od = kind == FKREF_FORWARD ? yd : xd;
    const int64_t *os = kind == FKREF_FORWARD ? cv->ys : cv->xs;
    for (int64_t i = 0; i < nacc; i++) {
        int64_t ch = kind == FKREF_FORWARD ? i / od[3] / od[2] % od[1] : 0;
        double v = cv->alpha * acc[i] +
                   (cv->z ? cv->beta * io->load(cv->z, kind == FKREF_BACKWARD_FILTER
                                                           ? filter_at(cv, i) : nchw_at(cv->zs, od, i), t)
                          : 0);
        if (kind == FKREF_FORWARD && cv->bias)
            v += io->load(cv->bias, ch * cv->bias_stride, t);
        if (kind == FKREF_FORWARD && cv->relu && !(v > 0))
            v = 0;
        acc[i] = v;
    }
    for (int64_t i = 0; i < nacc; i++)
        io->store(cv->out, kind == FKREF_BACKWARD_FILTER ? filter_at(cv, i) : nchw_at(os, od, i), t, acc[i]);
    free(acc);
    return 0;
}
