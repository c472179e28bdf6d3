/* Float64 reference implementations of the ops (see ref64.h).
 *
 * Written to be checked by reading: every output element is computed on its own
 * from its coordinates, straight from the op's definition.  Shapes are worked out
 * here again, independently of ir/ops.c. */
#include "ref64.h"

#define AR_DOUBLE
#include "arith.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double *alloc_out(const ir_type *t)
{
    int64_t n = ir_type_numel(t);
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    if (!p) {
        fputs("ref64: out of memory\n", stderr);
        abort();
    }
    return p;
}

/* Coordinates of flat index i in a row-major tensor of type t. */
static void unravel(const ir_type *t, int64_t i, int64_t *c)
{
    for (int k = t->rank - 1; k >= 0; k--) {
        c[k] = i % t->dims[k];
        i /= t->dims[k];
    }
}

/* Flat index of coordinates c in a row-major tensor of type t. */
static int64_t ravel(const ir_type *t, const int64_t *c)
{
    int64_t i = 0;
    for (int k = 0; k < t->rank; k++)
        i = i * t->dims[k] + c[k];
    return i;
}

/* Flat index in t of the element that NumPy broadcasting places at coordinates c
 * of a result of rank r: t is aligned to the right, and its size-1 dims repeat. */
static int64_t bcast_index(const ir_type *t, int r, const int64_t *c)
{
    int64_t tc[IR_MAX_RANK];
    for (int k = 0; k < t->rank; k++)
        tc[k] = t->dims[k] == 1 ? 0 : c[r - t->rank + k];
    return ravel(t, tc);
}

/* The NumPy broadcast shape of the first ra dims of a and rb dims of b. */
static void bcast_shape(const int64_t *a, int ra, const int64_t *b, int rb, ir_type *out)
{
    int r = ra > rb ? ra : rb;
    out->rank = r;
    for (int k = 0; k < r; k++) {
        int64_t da = k - (r - ra) >= 0 ? a[k - (r - ra)] : 1;
        int64_t db = k - (r - rb) >= 0 ? b[k - (r - rb)] : 1;
        out->dims[k] = da == 1 ? db : da;
    }
}

double *ref_const(const ir_type *t, double value)
{
    double *y = alloc_out(t);
    for (int64_t i = 0; i < ir_type_numel(t); i++)
        y[i] = value;
    return y;
}

/* the unary ops by ir/arith.h's functions in double (ops.def's UNARY table):
 * their formulas are the executors', so what this checks of them is the
 * executors' float arithmetic and the loops around it; the formulas
 * themselves are held against PyTorch (tests/grad, test_golden) and finite
 * differences (tests/grad/test_fd.c) */
double *ref_unary(ir_op op, const double *a, const ir_type *ta, double p, double q)
{
    (void)p, (void)q;
    double *y = alloc_out(ta);
    for (int64_t i = 0; i < ir_type_numel(ta); i++) {
        double v = a[i];
        switch (op) {
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#define UNARY(e, name, n, from) case IR_OP_##e: y[i] = ar_##name(v AR_ATTRS##n); break;
#include "ops.def"
#undef UNARY
#undef OP
        case IR_OP_DROPOUT: y[i] = v; break;
        default:
            fprintf(stderr, "ref_unary: %s is not unary\n", ir_ops[op].name);
            abort();
        }
    }
    return y;
}

double *ref_binary(ir_op op, const double *a, const ir_type *ta, const double *b,
                   const ir_type *tb, ir_type *out)
{
    out->dtype = ta->dtype;
    bcast_shape(ta->dims, ta->rank, tb->dims, tb->rank, out);
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        double u = a[bcast_index(ta, out->rank, c)], v = b[bcast_index(tb, out->rank, c)];
        switch (op) {
        case IR_OP_ADD: y[i] = u + v; break;
        case IR_OP_SUB: y[i] = u - v; break;
        case IR_OP_MUL: y[i] = u * v; break;
        case IR_OP_DIV: y[i] = u / v; break;
        case IR_OP_MAXIMUM: y[i] = isnan(u) || isnan(v) ? NAN : u > v ? u : v; break;
        case IR_OP_MINIMUM: y[i] = isnan(u) || isnan(v) ? NAN : u < v ? u : v; break;
        case IR_OP_GT: y[i] = u > v; break;
        case IR_OP_LT: y[i] = u < v; break;
        case IR_OP_GE: y[i] = u >= v; break;
        case IR_OP_LE: y[i] = u <= v; break;
        case IR_OP_EQ: y[i] = u == v; break;
        case IR_OP_NE: y[i] = !(u == v); break;
        default:
            fprintf(stderr, "ref_binary: %s is not binary\n", ir_ops[op].name);
            abort();
        }
    }
    return y;
}

double *ref_where(const double *c, const ir_type *tc, const double *a, const ir_type *ta,
                  const double *b, const ir_type *tb, ir_type *out)
{
    ir_type ab;
    bcast_shape(ta->dims, ta->rank, tb->dims, tb->rank, &ab);
    bcast_shape(tc->dims, tc->rank, ab.dims, ab.rank, out);
    out->dtype = ta->dtype;
    double *y = alloc_out(out);
    int64_t co[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, co);
        y[i] = c[bcast_index(tc, out->rank, co)] != 0 ? a[bcast_index(ta, out->rank, co)]
                                                      : b[bcast_index(tb, out->rank, co)];
    }
    return y;
}

double *ref_extreme(ir_op op, const double *a, const ir_type *ta, int axis, ir_type *out)
{
    *out = *ta;
    out->dims[axis] = 1;
    if (op == IR_OP_ARGMAX)
        out->dtype = IR_I32;
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        int64_t arg = -1;
        double best = 0;
        for (int64_t l = 0; l < ta->dims[axis]; l++) {
            c[axis] = l;
            double v = a[ravel(ta, c)];
            if (isnan(v)) {
                arg = l, best = v;
                break;
            }
            if (arg < 0 || (op == IR_OP_REDUCE_MIN ? v < best : v > best))
                arg = l, best = v;
        }
        y[i] = op == IR_OP_ARGMAX ? (double)arg : best;
    }
    return y;
}

double *ref_matmul(const double *a, const ir_type *ta, const double *b, const ir_type *tb,
                   ir_type *out)
{
    int64_t m = ta->dims[ta->rank - 2], k = ta->dims[ta->rank - 1], n = tb->dims[tb->rank - 1];
    /* batch types: the leading dims only */
    ir_type ba = *ta, bb = *tb;
    ba.rank -= 2;
    bb.rank -= 2;
    out->dtype = ta->dtype;
    bcast_shape(ba.dims, ba.rank, bb.dims, bb.rank, out);
    int br = out->rank;
    out->dims[br] = m;
    out->dims[br + 1] = n;
    out->rank = br + 2;
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        int64_t r = c[br], col = c[br + 1];
        const double *pa = a + bcast_index(&ba, br, c) * m * k;
        const double *pb = b + bcast_index(&bb, br, c) * k * n;
        double s = 0;
        for (int64_t j = 0; j < k; j++)
            s += pa[r * k + j] * pb[j * n + col];
        y[i] = s;
    }
    return y;
}

double *ref_dense(const double *x, const ir_type *tx, const double *w, const ir_type *tw,
                  const double *bias, ir_type *out)
{
    int64_t in = tw->dims[1], nout = tw->dims[0];
    *out = *tx;
    out->dims[out->rank - 1] = nout;
    double *y = alloc_out(out);
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        int64_t row = i / nout, o = i % nout;
        double s = bias ? bias[o] : 0;
        for (int64_t j = 0; j < in; j++)
            s += x[row * in + j] * w[o * in + j];
        y[i] = s;
    }
    return y;
}

/* Output size of a sliding window: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1. */
static int64_t window(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

double *ref_conv2d(const double *x, const ir_type *tx, const double *w, const ir_type *tw,
                   const double *bias, const int64_t stride[2], const int64_t pad[2],
                   const int64_t dilation[2], int64_t groups, ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t O = tw->dims[0], CG = tw->dims[1], KH = tw->dims[2], KW = tw->dims[3];
    int64_t OH = window(H, KH, stride[0], pad[0], dilation[0]);
    int64_t OW = window(W, KW, stride[1], pad[1], dilation[1]);
    int64_t opg = O / groups;   /* output channels per group */
    *out = (ir_type){tx->dtype, 4, {N, O, OH, OW}};
    double *y = alloc_out(out);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t g = o / opg;
                    double s = bias ? bias[o] : 0;
                    for (int64_t ci = 0; ci < CG; ci++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * stride[0] - pad[0] + kh * dilation[0];
                                int64_t iw = ow * stride[1] - pad[1] + kw * dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;   /* zero padding */
                                int64_t c = g * CG + ci;
                                s += x[((n * C + c) * H + ih) * W + iw] *
                                     w[((o * CG + ci) * KH + kh) * KW + kw];
                            }
                    y[((n * O + o) * OH + oh) * OW + ow] = s;
                }
    return y;
}

double *ref_conv_transpose2d(const double *x, const ir_type *tx, const double *w,
                             const ir_type *tw, const int64_t stride[2], const int64_t pad[2],
                             const int64_t dilation[2], int64_t groups, const int64_t shape[4])
{
    int64_t N = tx->dims[0], O = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t CG = tw->dims[1], KH = tw->dims[2], KW = tw->dims[3], opg = O / groups;
    int64_t C = shape[1], OH = shape[2], OW = shape[3];
    ir_type out = {tx->dtype, 4, {N, C, OH, OW}};
    double *y = alloc_out(&out);
    for (int64_t i = 0; i < ir_type_numel(&out); i++)
        y[i] = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t v = 0; v < W; v++)
                    for (int64_t ci = 0; ci < CG; ci++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t oh = h * stride[0] - pad[0] + kh * dilation[0];
                                int64_t ow = v * stride[1] - pad[1] + kw * dilation[1];
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;   /* cropped by the padding */
                                int64_t c = o / opg * CG + ci;
                                y[((n * C + c) * OH + oh) * OW + ow] +=
                                    x[((n * O + o) * H + h) * W + v] *
                                    w[((o * CG + ci) * KH + kh) * KW + kw];
                            }
    return y;
}

double *ref_batchnorm(const double *x, const ir_type *tx, const double *weight,
                      const double *bias, const double *mean, const double *var, double eps)
{
    double *y = alloc_out(tx);
    int64_t C = tx->dims[1], spatial = 1;
    for (int k = 2; k < tx->rank; k++)
        spatial *= tx->dims[k];
    for (int64_t i = 0; i < ir_type_numel(tx); i++) {
        int64_t c = i / spatial % C;
        y[i] = (x[i] - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c];
    }
    return y;
}

double *ref_layernorm(const double *x, const ir_type *tx, const double *weight,
                      const double *bias, const ir_type *tw, double eps)
{
    double *y = alloc_out(tx);
    int64_t D = ir_type_numel(tw), rows = ir_type_numel(tx) / D;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < D; j++)
            mean += xr[j];
        mean /= D;
        for (int64_t j = 0; j < D; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= D;   /* biased, as PyTorch normalizes */
        for (int64_t j = 0; j < D; j++)
            y[r * D + j] = (xr[j] - mean) / sqrt(var + eps) * weight[j] + bias[j];
    }
    return y;
}

double *ref_attention(const double *q, const ir_type *tq, const double *k, const ir_type *tk,
                      const double *v, const ir_type *tv, int causal, double scale, double *lse)
{
    int r = tq->rank;
    int64_t l = tq->dims[r - 2], e = tq->dims[r - 1], s = tk->dims[r - 2], ev = tv->dims[r - 1];
    int64_t batch = ir_type_numel(tq) / (l * e), kbatch = ir_type_numel(tk) / (s * e);
    int64_t group = kbatch > 0 ? batch / kbatch : 1; /* query heads a key head (GQA) */
    double *y = calloc((size_t)(batch * l * ev) + 1, sizeof *y), *sc = malloc((size_t)s * sizeof *sc);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < l; i++) {
            int64_t seen = causal && i + 1 < s ? i + 1 : s, bk = b / group;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < seen; j++) {
                double d = 0;
                for (int64_t f = 0; f < e; f++)
                    d += q[(b * l + i) * e + f] * k[(bk * s + j) * e + f];
                sc[j] = d * scale;
                m = fmax(m, sc[j]);
            }
            for (int64_t j = 0; j < seen; j++)
                sum += exp(sc[j] - m);
            double *yi = y + (b * l + i) * ev;
            for (int64_t j = 0; j < seen; j++)
                for (int64_t f = 0; f < ev; f++)
                    yi[f] += exp(sc[j] - m) / sum * v[(bk * s + j) * ev + f];
            if (lse)
                lse[b * l + i] = m + log(sum);
        }
    free(sc);
    return y;
}

double *ref_softmax(const double *x, const ir_type *tx, int axis, int take_log)
{
    double *y = alloc_out(tx);
    int64_t L = tx->dims[axis], inner = 1;
    for (int k = axis + 1; k < tx->rank; k++)
        inner *= tx->dims[k];
    int64_t outer = ir_type_numel(tx) / (L * inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const double *p = x + o * L * inner + in;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < L; j++)
                m = fmax(m, p[j * inner]);
            for (int64_t j = 0; j < L; j++)
                s += exp(p[j * inner] - m);
            for (int64_t j = 0; j < L; j++) {
                double z = p[j * inner] - m;
                y[o * L * inner + j * inner + in] = take_log ? z - log(s) : exp(z) / s;
            }
        }
    return y;
}

/* The window of output (oh, ow) covers rows oh * stride - pad + kh * dil, kh < k. */
/* Pooling windows along one axis, counted one by one: in floor mode those that
 * fit the padded input; in ceil mode (PyTorch's ceil_mode) also one that runs
 * past it by less than a stride, if it starts in the input or the left padding. */
static int64_t pool_windows(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil,
                            int ceil_mode)
{
    int64_t n = 0, span = dil * (k - 1) + 1;
    for (;; n++) {
        int64_t start = n * stride - pad, end = start + span; /* [start, end) */
        int fits = end <= in + pad;
        if (!(fits || (ceil_mode && end - stride < in + pad && start < in)))
            return n;
    }
}

double *ref_maxpool2d(const double *x, const ir_type *tx, const int64_t kernel[2],
                      const int64_t stride[2], const int64_t pad[2], const int64_t dilation[2],
                      int ceil_mode, ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t OH = pool_windows(H, kernel[0], stride[0], pad[0], dilation[0], ceil_mode);
    int64_t OW = pool_windows(W, kernel[1], stride[1], pad[1], dilation[1], ceil_mode);
    *out = (ir_type){tx->dtype, 4, {N, C, OH, OW}};
    double *y = alloc_out(out);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double m = -INFINITY;   /* padding is -inf: it never wins */
                for (int64_t kh = 0; kh < kernel[0]; kh++)
                    for (int64_t kw = 0; kw < kernel[1]; kw++) {
                        int64_t ih = oh * stride[0] - pad[0] + kh * dilation[0];
                        int64_t iw = ow * stride[1] - pad[1] + kw * dilation[1];
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                            m = fmax(m, x[(nc * H + ih) * W + iw]);
                    }
                y[(nc * OH + oh) * OW + ow] = m;
            }
    return y;
}

double *ref_avgpool2d(const double *x, const ir_type *tx, const int64_t kernel[2],
                      const int64_t stride[2], const int64_t pad[2], int count_include_pad,
                      int ceil_mode, ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t OH = pool_windows(H, kernel[0], stride[0], pad[0], 1, ceil_mode);
    int64_t OW = pool_windows(W, kernel[1], stride[1], pad[1], 1, ceil_mode);
    *out = (ir_type){tx->dtype, 4, {N, C, OH, OW}};
    double *y = alloc_out(out);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double s = 0;
                int64_t inside = 0, padded = 0; /* taps in the input, in the padded input */
                for (int64_t kh = 0; kh < kernel[0]; kh++)
                    for (int64_t kw = 0; kw < kernel[1]; kw++) {
                        int64_t ih = oh * stride[0] - pad[0] + kh;
                        int64_t iw = ow * stride[1] - pad[1] + kw;
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                            s += x[(nc * H + ih) * W + iw];
                            inside++;
                        }
                        padded += ih < H + pad[0] && iw < W + pad[1];
                    }
                y[(nc * OH + oh) * OW + ow] = s / (double)(count_include_pad ? padded : inside);
            }
    return y;
}

/* Output (i, j) averages the input rows r with i h <= r oh < (i + 1) h, widened to
 * whole rows (floor and ceil), and the columns likewise: PyTorch's windows. */
double *ref_adaptive_avgpool2d(const double *x, const ir_type *tx, const int64_t size[2],
                               ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t OH = size[0], OW = size[1];
    *out = (ir_type){tx->dtype, 4, {N, C, OH, OW}};
    double *y = alloc_out(out);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double s = 0;
                int64_t cnt = 0;
                for (int64_t ih = 0; ih < H; ih++) /* row ih spans [ih, ih + 1) */
                    for (int64_t iw = 0; iw < W; iw++)
                        if ((ih + 1) * OH > oh * H && ih * OH < (oh + 1) * H &&
                            (iw + 1) * OW > ow * W && iw * OW < (ow + 1) * W) {
                            s += x[(nc * H + ih) * W + iw];
                            cnt++;
                        }
                y[(nc * OH + oh) * OW + ow] = s / (double)cnt;
            }
    return y;
}

/* F.interpolate's taps along one axis, written from PyTorch's UpSample.h
 * (compute_scales_value, area_pixel_compute_scale, nearest_idx,
 * area_pixel_compute_source_index, guard_index_and_lambda): the index arithmetic in
 * float as there, since it picks elements; the weights returned in double. */
static void ref_upsample_taps(int64_t dst, int64_t in, int64_t out, int bilinear, int align,
                              double scale, int64_t idx[2], double lam[2])
{
    float sv = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out; /* compute_scales_value */
    idx[0] = idx[1] = dst;
    lam[0] = 1;
    lam[1] = 0;
    if (in == out)
        return;
    if (!bilinear) {
        idx[0] = idx[1] = out == 2 * in ? dst / 2 : (int64_t)floorf((float)dst * sv);
        if (idx[0] > in - 1)
            idx[0] = idx[1] = in - 1;
        return;
    }
    float ratio = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f) : sv;
    float real = align ? ratio * (float)dst : fmaxf(ratio * ((float)dst + 0.5f) - 0.5f, 0.0f);
    int64_t i0 = (int64_t)floorf(real);
    if (i0 > in - 1)
        i0 = in - 1;
    float l1 = fminf(fmaxf(real - (float)i0, 0.0f), 1.0f);
    idx[0] = i0;
    idx[1] = i0 < in - 1 ? i0 + 1 : i0;
    lam[1] = l1;
    lam[0] = 1.0f - l1;
}

double *ref_upsample2d(const double *x, const ir_type *tx, const int64_t size[2], int bilinear,
                       int align, const double scale[2], ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], H = tx->dims[2], W = tx->dims[3];
    int64_t OH = size[0], OW = size[1];
    *out = (ir_type){tx->dtype, 4, {N, C, OH, OW}};
    double *y = alloc_out(out);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t ih[2], iw[2];
                double lh[2], lw[2], s = 0;
                ref_upsample_taps(oh, H, OH, bilinear, align, scale[0], ih, lh);
                ref_upsample_taps(ow, W, OW, bilinear, align, scale[1], iw, lw);
                for (int a = 0; a < 1 + bilinear; a++)
                    for (int b = 0; b < 1 + bilinear; b++)
                        s += lh[a] * lw[b] * x[(nc * H + ih[a]) * W + iw[b]];
                y[(nc * OH + oh) * OW + ow] = s;
            }
    return y;
}

/* The gradient as a scatter: each element of dy added to its taps. */
double *ref_upsample2d_grad(const double *dy, const ir_type *tdy, const int64_t shape[4],
                            int bilinear, int align, const double scale[2], ir_type *out)
{
    int64_t H = shape[2], W = shape[3], OH = tdy->dims[2], OW = tdy->dims[3];
    *out = (ir_type){tdy->dtype, 4, {shape[0], shape[1], H, W}};
    double *dx = alloc_out(out);
    for (int64_t nc = 0; nc < shape[0] * shape[1]; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t ih[2], iw[2];
                double lh[2], lw[2];
                ref_upsample_taps(oh, H, OH, bilinear, align, scale[0], ih, lh);
                ref_upsample_taps(ow, W, OW, bilinear, align, scale[1], iw, lw);
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++)
                        dx[(nc * H + ih[a]) * W + iw[b]] +=
                            lh[a] * lw[b] * dy[(nc * OH + oh) * OW + ow];
            }
    return dx;
}

double *ref_global_avgpool(const double *x, const ir_type *tx, ir_type *out)
{
    int64_t N = tx->dims[0], C = tx->dims[1], HW = tx->dims[2] * tx->dims[3];
    *out = (ir_type){tx->dtype, 4, {N, C, 1, 1}};
    double *y = alloc_out(out);
    for (int64_t nc = 0; nc < N * C; nc++) {
        double s = 0;
        for (int64_t j = 0; j < HW; j++)
            s += x[nc * HW + j];
        y[nc] = s / (double)HW;
    }
    return y;
}

double *ref_reshape(const double *x, const ir_type *tx, int rank, const int64_t *shape,
                    ir_type *out)
{
    out->dtype = tx->dtype;
    out->rank = rank;
    for (int k = 0; k < rank; k++)
        out->dims[k] = shape[k];
    double *y = alloc_out(out);
    for (int64_t i = 0; i < ir_type_numel(out); i++)
        y[i] = x[i];
    return y;
}

double *ref_transpose(const double *x, const ir_type *tx, const int64_t *perm, ir_type *out)
{
    *out = *tx;
    for (int k = 0; k < tx->rank; k++)
        out->dims[k] = tx->dims[perm[k]];
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK], xc[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        for (int k = 0; k < tx->rank; k++)
            xc[perm[k]] = c[k];
        y[i] = x[ravel(tx, xc)];
    }
    return y;
}

double *ref_concat(int n, const double *const *xs, const ir_type *ts, int axis, ir_type *out)
{
    *out = ts[0];
    for (int j = 1; j < n; j++)
        out->dims[axis] += ts[j].dims[axis];
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        int j = 0;   /* the operand holding coordinate c[axis] */
        while (c[axis] >= ts[j].dims[axis])
            c[axis] -= ts[j++].dims[axis];
        y[i] = xs[j][ravel(&ts[j], c)];
    }
    return y;
}

double *ref_slice(const double *x, const ir_type *tx, int axis, int64_t start, int64_t size,
                  ir_type *out)
{
    *out = *tx;
    out->dims[axis] = size;
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        c[axis] += start;
        y[i] = x[ravel(tx, c)];
    }
    return y;
}

double ref_cast(double v, ir_dtype from, ir_dtype to)
{
    static const double lo[] = {[IR_I32] = -2147483648.0, [IR_I64] = -9223372036854775808.0,
                                [IR_U8] = 0};
    static const double hi[] = {[IR_I32] = 2147483647.0, [IR_I64] = 9223372036854775807.0,
                                [IR_U8] = 255};
    if (ir_is_float(to))
        return ir_is_float(from) ? v : (double)(float)v;
    if (!ir_is_float(from)) { /* v is whole: wrap */
        int64_t k = (int64_t)v;
        return to == IR_I32 ? (double)(int32_t)(uint32_t)k : to == IR_U8 ? (double)(uint8_t)k
                                                                       : (double)k;
    }
    if (isnan(v))
        return 0;
    v = trunc(v);
    return v < lo[to] ? lo[to] : v > hi[to] ? hi[to] : v;
}

double *ref_pad(const double *x, const ir_type *tx, const int64_t *before, const int64_t *after,
                double value, ir_type *out)
{
    *out = *tx;
    for (int k = 0; k < tx->rank; k++)
        out->dims[k] += before[k] + after[k];
    double *y = alloc_out(out);
    int64_t c[IR_MAX_RANK];
    for (int64_t i = 0; i < ir_type_numel(out); i++) {
        unravel(out, i, c);
        int inside = 1;
        for (int k = 0; k < tx->rank; k++) {
            c[k] -= before[k];
            inside &= c[k] >= 0 && c[k] < tx->dims[k];
        }
        y[i] = inside ? x[ravel(tx, c)] : value;
    }
    return y;
}

double *ref_embedding(const int64_t *idx, const ir_type *ti, const double *w,
                      const ir_type *tw, ir_type *out)
{
    int64_t num = tw->dims[0], dim = tw->dims[1];
    *out = *ti;
    out->dtype = tw->dtype;
    out->dims[out->rank++] = dim;
    for (int64_t i = 0; i < ir_type_numel(ti); i++)
        if (idx[i] < 0 || idx[i] >= num)
            return NULL;
    double *y = alloc_out(out);
    for (int64_t i = 0; i < ir_type_numel(ti); i++)
        for (int64_t j = 0; j < dim; j++)
            y[i * dim + j] = w[idx[i] * dim + j];
    return y;
}

double ref_cross_entropy(const double *logits, const ir_type *tl, const int64_t *label,
                         double eps, int64_t ignore)
{
    int64_t N = tl->dims[0], C = tl->dims[1], S = ir_type_numel(tl) / (N * C), count = 0;
    double total = 0;
    for (int64_t p = 0; p < N * S; p++) {
        const double *z = logits + p / S * C * S + p % S; /* class j at z[j * S] */
        if (label[p] == ignore)
            continue;
        if (label[p] < 0 || label[p] >= C)
            return NAN;
        double m = -INFINITY, s = 0, all = 0;
        for (int64_t j = 0; j < C; j++)
            m = fmax(m, z[j * S]);
        for (int64_t j = 0; j < C; j++)
            s += exp(z[j * S] - m);
        double lse = m + log(s);
        for (int64_t j = 0; j < C; j++)
            all += lse - z[j * S];
        total += (1 - eps) * (lse - z[label[p] * S]) + eps / (double)C * all;
        count++;
    }
    return total / (double)count;
}

double ref_nll_loss(const double *x, const ir_type *tx, const int64_t *label, int64_t ignore)
{
    int64_t N = tx->dims[0], C = tx->dims[1], S = ir_type_numel(tx) / (N * C), count = 0;
    double total = 0;
    for (int64_t p = 0; p < N * S; p++) {
        if (label[p] == ignore)
            continue;
        if (label[p] < 0 || label[p] >= C)
            return NAN;
        total -= x[p / S * C * S + label[p] * S + p % S];
        count++;
    }
    return total / (double)count;
}

double ref_mse(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return s / (double)n;
}
