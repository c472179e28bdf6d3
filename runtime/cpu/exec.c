/* The CPU reference executor (see exec.h).
 *
 * One buffer per value, indexed by value id.  Each node runs through its op's
 * kernel in list order.  Kernels take the node and the executor, read their
 * operands' buffers and write their result's buffer; they are written for
 * clarity first, with the GEMM-shaped work in OpenBLAS and the loops over large
 * tensors split across threads with OpenMP. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int n);
char *openblas_get_config(void);
char *openblas_get_corename(void);

#define fail base_fail

float *rt_scratch(rt_exec *x, size_t nfloats)
{
    if (nfloats > x->scratch_cap) {
        base_free(x->scratch);
        x->scratch = base_malloc(nfloats * sizeof(float));
        x->scratch_cap = x->scratch ? nfloats : 0;
    }
    return x->scratch;
}

int rt_weight_static(const rt_exec *x, const ir_value *v)
{
    return x->g->nupdates == 0 && (v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER ||
                                   x->weight[v->id]);
}

/* Bytes of one element as the executor stores it: floats are widened to f32. */

static void *data(const rt_exec *x, const ir_value *v) { return x->buf[v->id]; }
static float *fdata(const rt_exec *x, const ir_value *v) { return x->buf[v->id]; }

/* ---------------------------------------------------------------- elementwise */

/* l op r for the binary ops (IR_BINARY) but add, sub, mul and div, which
 * k_binary and run_epilogue spell out */
static float binary_f(ir_op op, float l, float r)
{
    switch (op) {
    case IR_OP_MAXIMUM: return l > r || l != l ? l : r; /* NaN from either side */
    case IR_OP_MINIMUM: return l < r || l != l ? l : r;
    case IR_OP_GT: return l > r;
    case IR_OP_LT: return l < r;
    case IR_OP_GE: return l >= r;
    case IR_OP_LE: return l <= r;
    case IR_OP_EQ: return l == r;
    default: return l != r; /* ne */
    }
}

/* o[i] = op(a[i]) for i in [lo, hi): the unary ops (IR_UNARY), for whole
 * tensors and for fused epilogues alike, by ir/arith.h's functions (ops.def's
 * UNARY table); dropout, the identity at inference, by the default. */
static void unary_range(const ir_node *n, const float *a, float *o, int64_t lo, int64_t hi)
{
    float p, q;
    rt_unary_attrs(n, &p, &q);
    (void)p, (void)q;
    switch (n->op) {
#define EACH(expr) for (int64_t i = lo; i < hi; i++) { float v = a[i]; o[i] = (expr); } break;
#define UNARY(op, name, n, from) case IR_OP_##op: EACH(ar_##name(v AR_ATTRS##n))
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#include "ops.def"
#undef OP
#undef UNARY
    default: EACH(v)
#undef EACH
    }
}

static int k_unary(rt_exec *x, const ir_node *n)
{
    enum { CHUNK = 16384 };
    const float *a = IN(0);
    float *o = OUT;
    int64_t len = NUMEL(n->out[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t lo = 0; lo < len; lo += CHUNK)
        unary_range(n, a, o, lo, lo + CHUNK < len ? lo + CHUNK : len);
    return 0;
}

static int k_const(rt_exec *x, const ir_node *n)
{
    float *o = OUT, v = (float)ir_attr_float(n, "value");
    for (int64_t i = 0, len = NUMEL(n->out[0]); i < len; i++)
        o[i] = v;
    return 0;
}

/* Strides of t's elements as seen from an output of rank r that t broadcasts
 * to: 0 along the dimensions where t has size 1 or none. */
void rt_bcast_strides(const ir_type *t, int r, int64_t *st)
{
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        int k = i - (r - t->rank);
        int64_t d = k >= 0 ? t->dims[k] : 1;
        st[i] = d == 1 ? 0 : s;
        s *= d;
    }
}

static int k_binary(rt_exec *x, const ir_node *n)
{
    const float *a = IN(0), *b = IN(1);
    float *o = OUT;
    const ir_type *t = &n->out[0]->type;
    int r = t->rank;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    rt_bcast_strides(&n->in[0]->type, r, sa);
    rt_bcast_strides(&n->in[1]->type, r, sb);
    /* rows along the last dimension; each row has one base offset per operand */
    int64_t inner = r ? t->dims[r - 1] : 1, rows = NUMEL(n->out[0]) / (inner ? inner : 1);
    int64_t ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
    ir_op op = n->op;
#pragma omp parallel for if (rows * inner > PAR_MIN)
    for (int64_t row = 0; row < rows; row++) {
        int64_t oa = 0, ob = 0, rem = row;
        for (int d = r - 2; d >= 0; d--) {
            int64_t idx = rem % t->dims[d];
            rem /= t->dims[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        const float *pa = a + oa, *pb = b + ob;
        float *po = o + row * inner;
        switch (op) {
        case IR_OP_ADD: for (int64_t i = 0; i < inner; i++) po[i] = pa[i * ia] + pb[i * ib]; break;
        case IR_OP_SUB: for (int64_t i = 0; i < inner; i++) po[i] = pa[i * ia] - pb[i * ib]; break;
        case IR_OP_MUL: for (int64_t i = 0; i < inner; i++) po[i] = pa[i * ia] * pb[i * ib]; break;
        case IR_OP_DIV: for (int64_t i = 0; i < inner; i++) po[i] = pa[i * ia] / pb[i * ib]; break;
        default:
            for (int64_t i = 0; i < inner; i++)
                po[i] = binary_f(op, pa[i * ia], pb[i * ib]);
            break;
        }
    }
    return 0;
}

/* where(cond, a, b): each element's coordinates into the three operands,
 * with their broadcast strides */
static int k_where(rt_exec *x, const ir_node *n)
{
    const float *c = IN(0), *a = IN(1), *b = IN(2);
    float *o = OUT;
    const ir_type *t = &n->out[0]->type;
    int r = t->rank;
    int64_t sc[IR_MAX_RANK], sa[IR_MAX_RANK], sb[IR_MAX_RANK], len = NUMEL(n->out[0]);
    rt_bcast_strides(&n->in[0]->type, r, sc);
    rt_bcast_strides(&n->in[1]->type, r, sa);
    rt_bcast_strides(&n->in[2]->type, r, sb);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        int64_t rem = i, oc = 0, oa = 0, ob = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t idx = rem % t->dims[d];
            rem /= t->dims[d];
            oc += idx * sc[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        o[i] = c[oc] != 0 ? a[oa] : b[ob]; /* a NaN condition is true, as PyTorch's bool */
    }
    return 0;
}

/* The first largest (smallest) of a[0], a[step], ... a[(len - 1) step]: its
 * position; the first NaN's if there is one, as PyTorch's max(dim), argmax. */
int64_t rt_arg_extreme(const float *a, int64_t len, int64_t step, int want_min)
{
    int64_t arg = 0;
    float best = a[0];
    for (int64_t l = 1; l < len && best == best; l++) {
        float v = a[l * step];
        if ((want_min ? v < best : v > best) || v != v)
            best = v, arg = l;
    }
    return arg;
}

/* reduce_max, reduce_min, argmax: one scan along the axis per result element */
static int k_extreme(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t len = t->dims[axis], inner = 1, outer = NUMEL(n->out[0]);
    for (int d = axis + 1; d < t->rank; d++)
        inner *= t->dims[d];
    const float *a = IN(0);
    int want_min = n->op == IR_OP_REDUCE_MIN;
#pragma omp parallel for if (outer * len > PAR_MIN)
    for (int64_t i = 0; i < outer; i++) {
        const float *row = a + (i / inner * len) * inner + i % inner;
        int64_t arg = rt_arg_extreme(row, len, inner, want_min);
        if (n->op == IR_OP_ARGMAX)
            ((int32_t *)x->buf[n->out[0]->id])[i] = (int32_t)arg;
        else
            OUT[i] = row[arg * inner];
    }
    return 0;
}

/* ---------------------------------------------------------------- linear algebra */

/* Tiles of a GEMM's result: at least GEMM_TILE_WORK multiply-adds each, at
 * most GEMM_TILES of them, and sides of GEMM_TILE_SIDE or more where the result
 * allows.  Each tile packs its share of both operands again, which costs about
 * 1/rows + 1/cols of a float moved per multiply-add: at 256 x 256 a few percent
 * of the speed of one sgemm over the whole result (64 x 64 cost a fifth). */
#define GEMM_TILE_WORK ((int64_t)1 << 21)
#define GEMM_TILES 64
#define GEMM_TILE_SIDE 256
#define GEMM_TILE_ROWS 64

/* The tile grid of an [m, n] result of depth k, rows in blocks of *bm and columns
 * in blocks of *bn: halves of the longer side while they stay GEMM_TILE_SIDE
 * long.  It depends on the shapes alone. */
static void gemm_grid(int64_t m, int64_t n, int64_t k, int64_t *bm, int64_t *bn)
{
    int64_t want = m * n * k / GEMM_TILE_WORK, tm = 1, tn = 1;
    want = want < 1 ? 1 : want > GEMM_TILES ? GEMM_TILES : want;
    while (tm * tn < want) {
        int split_m = m / tm / 2 >= GEMM_TILE_SIDE, split_n = n / tn / 2 >= GEMM_TILE_SIDE;
        if (split_n && (!split_m || n / tn >= m / tm))
            tn *= 2;
        else if (split_m)
            tm *= 2;
        else
            break;
    }
    *bm = (m + tm - 1) / tm;
    *bn = ((n + tn - 1) / tn + 15) / 16 * 16; /* whole 16-float vectors */
}

int64_t rt_gemm_rows(int64_t m, int64_t n, int64_t k)
{
    int64_t tiles = m * n * k / GEMM_TILE_WORK;
    tiles = tiles > GEMM_TILES ? GEMM_TILES : tiles > m / GEMM_TILE_ROWS ? m / GEMM_TILE_ROWS
                                                                          : tiles;
    tiles = tiles < 1 ? 1 : tiles;
    return (m + tiles - 1) / tiles;
}

/* OpenBLAS, left to itself, splits a large GEMM across as many threads as
 * OpenMP offers, and its sums then depend on the split (0.3.21): with its AVX2
 * kernels an element's sum depends on where its thread's block of rows and
 * columns begins, so nearly every threaded call differs from the one-thread
 * result; with its AVX-512 kernels the threaded driver halves the last block of
 * the depth k differently, so every k past 320 differs unless k mod 32 is 0 or
 * 31.  Here each tile of the grid above is one single-threaded sgemm, on
 * whichever thread takes it: the same calls, so the same bits, on any number of
 * threads.  OpenBLAS (the OpenMP build) runs on one thread inside an active
 * parallel region, and where OpenMP offers one thread: the region below, even a
 * team of one, offers one to each tile.  Dense layers and matmuls go to
 * oneDNN's matmul first where its kernels are AVX-512's (rt_node_gemm). */
void rt_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
             const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m == 0 || n == 0)
        return;
    int64_t bm, bn;
    gemm_grid(m, n, k, &bm, &bn);
    int64_t tn = (n + bn - 1) / bn, tiles = (m + bm - 1) / bm * tn;
#pragma omp parallel if (tiles > 1)
    {
        omp_set_num_threads(1); /* this region's threads only */
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < tiles; t++) {
            int64_t i0 = t / tn * bm, j0 = t % tn * bn;
            int64_t mi = m - i0 < bm ? m - i0 : bm, nj = n - j0 < bn ? n - j0 : bn;
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, (int)mi, (int)nj, (int)k, 1.0f,
                        ta ? a + i0 : a + i0 * lda, (int)lda, tb ? b + j0 * ldb : b + j0,
                        (int)ldb, beta, c + i0 * ldc + j0, (int)ldc);
        }
    }
}

/* GEMM g of node n: on oneDNN's matmul where it takes it (rt_dnnl_gemm), else
 * rt_gemm's OpenBLAS. */
int rt_node_gemm(rt_exec *x, const ir_node *n, const rt_gemm_args *g, char *err, size_t errlen)
{
    int rc = rt_dnnl_gemm(x, n, g, err, errlen);
    if (rc)
        return rc < 0 ? -1 : 0;
    if (g->bias) /* the bias first, then c += the product */
        for (int64_t r = 0; r < g->m; r++)
            memcpy(g->c + r * g->ldc, g->bias, (size_t)g->n * sizeof *g->c);
    rt_gemm(g->ta, g->tb, g->m, g->n, g->k, g->a, g->lda, g->b, g->ldb, g->bias ? 1.0f : 0.0f,
            g->c, g->ldc);
    x->blas_gemms++;
    return 0;
}

static int k_matmul(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const ir_type *ta = &n->in[0]->type, *tb = &n->in[1]->type, *to = &n->out[0]->type;
    int64_t m = ta->dims[ta->rank - 2], k = ta->dims[ta->rank - 1], nn = tb->dims[tb->rank - 1];
    ir_type ba = *ta, bb = *tb, bo = *to;
    ba.rank -= 2, bb.rank -= 2, bo.rank -= 2;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    rt_bcast_strides(&ba, bo.rank, sa);
    rt_bcast_strides(&bb, bo.rank, sb);
    int64_t batches = ir_type_numel(&bo);
    const float *a = IN(0), *b = IN(1);
    float *o = OUT;
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t oa = 0, ob = 0, rem = bi;
        for (int d = bo.rank - 1; d >= 0; d--) {
            int64_t idx = rem % bo.dims[d];
            rem /= bo.dims[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        rt_gemm_args g = {0, 0, m, nn, k, a + oa * m * k, b + ob * k * nn, o + bi * m * nn,
                          k, nn, nn, NULL};
        if (rt_node_gemm(x, n, &g, err, errlen))
            return -1;
    }
    return 0;
}

static int k_dense(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const ir_type *tw = &n->in[1]->type;
    int64_t out = tw->dims[0], in = tw->dims[1], rows = NUMEL(n->in[0]) / in;
    rt_gemm_args g = {0, 1, rows, out, in, IN(0), IN(1), OUT, in, in, out,
                      n->nin == 3 ? IN(2) : NULL};
    return rt_node_gemm(x, n, &g, err, errlen);
}

/* x[n, c, h, w] conv w[o, c/groups, kh, kw] -> [n, o, oh, ow]: the types as
 * given, since the gradients see them from other operands. */
conv_geom rt_conv_geometry(const ir_node *n, const ir_type *a, const ir_type *w,
                           const ir_type *o)
{
    const int64_t *st = ir_attr_ints(n, "stride", NULL), *pd = ir_attr_ints(n, "pad", NULL),
                  *dl = ir_attr_ints(n, "dilation", NULL);
    return (conv_geom){a->dims[0], a->dims[1], a->dims[2], a->dims[3],
                       w->dims[0], w->dims[2], w->dims[3], o->dims[2], o->dims[3],
                       st[0], st[1], pd[0], pd[1], dl[0], dl[1], ir_attr_int(n, "groups")};
}

/* Columns of one image's channels [c0, c0 + cg) for a chunk of images: row
 * (ci, ky, kx), column (image, oy, ox), zero where the window hangs over the
 * padding.  col has ldc columns; this image's start at col0. */
void rt_im2col(const conv_geom *g, const float *img, int64_t c0, int64_t cg, float *col,
                   int64_t ldc, int64_t col0)
{
    int64_t plane = g->oh * g->ow;
#pragma omp parallel for collapse(2) if (cg * g->kh * g->kw * plane > PAR_MIN)
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const float *src = img + (c0 + ci) * g->h * g->w;
                float *dst = col + ((ci * g->kh + ky) * g->kw + kx) * ldc + col0;
                for (int64_t oy = 0; oy < g->oh; oy++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    float *d = dst + oy * g->ow;
                    if (iy < 0 || iy >= g->h) {
                        memset(d, 0, (size_t)g->ow * sizeof *d);
                        continue;
                    }
                    const float *s = src + iy * g->w;
                    int64_t ix0 = kx * g->dw - g->pw;
                    if (g->sw == 1 && ix0 >= 0 && ix0 + g->ow <= g->w) {
                        memcpy(d, s + ix0, (size_t)g->ow * sizeof *d);
                        continue;
                    }
                    for (int64_t ox = 0; ox < g->ow; ox++) {
                        int64_t ix = ox * g->sw + ix0;
                        d[ox] = ix >= 0 && ix < g->w ? s[ix] : 0.0f;
                    }
                }
            }
}

int rt_conv_per_image(const conv_geom *g)
{
    return g->oh * g->ow >= 64 && g->n >= CONV_PER_IMAGE_MIN;
}

/* ---------------------------------------------------------------- fused epilogues */

/* A fused node whose members after a convolution are all elementwise on its
 * result's shape runs them image by image, right after each image's GEMM,
 * while the image is in cache (rt_exec_run).  Each member reads its running
 * operand's slice and writes its own result's slice, with the same arithmetic
 * as its own kernel, so the bits do not change. */
typedef struct epilogue {
    const ir_node *m[32];       /* the members after the convolution */
    int k[32];                  /* which operand of each carries the running value */
    int n;
} epilogue;

/* Which operand of member m carries the running value (the previous member's
 * result), or -1 when m cannot run slice by slice. */
static int epilogue_operand(const ir_node *m, const ir_value *running)
{
    if (m->nout != 1 || !ir_type_eq(&m->out[0]->type, &running->type))
        return -1;
    if (ir_op_is(m->op, IR_UNARY) || m->op == IR_OP_BATCHNORM)
        return m->in[0] == running && m->out[0]->type.rank == 4 ? 0 : -1;
    if (ir_op_is(m->op, IR_BINARY)) {
        int k = m->in[0] == running ? 0 : m->in[1] == running ? 1 : -1;
        const ir_type *other = k >= 0 ? &m->in[1 - k]->type : NULL;
        return other && (ir_type_eq(other, &running->type) || other->rank == 0) ? k : -1;
    }
    return -1; /* the gradients' epilogues run whole (they follow no convolution) */
}

/* Applies the members to elements [lo, hi) of image-shaped [n, c, h, w] values. */
static void run_epilogue(rt_exec *x, const epilogue *e, int64_t lo, int64_t hi)
{
    if (!e)
        return;
    for (int j = 0; j < e->n; j++) {
        const ir_node *n = e->m[j];
        int k = e->k[j];
        const float *a = x->buf[n->in[k]->id];
        float *o = OUT;
        if (ir_op_is(n->op, IR_UNARY)) {
            unary_range(n, a, o, lo, hi);
            continue;
        }
        switch (n->op) {
        case IR_OP_BATCHNORM: {
            const ir_type *t = &n->out[0]->type;
            int64_t c = t->dims[1], hw = t->dims[2] * t->dims[3];
            const float *w = IN(1), *b = IN(2), *mean = IN(3), *var = IN(4);
            double eps = ir_attr_float(n, "eps");
            for (int64_t p0 = lo / hw; p0 * hw < hi; p0++) {
                int64_t ch = p0 % c;
                float scale = (float)(w[ch] / sqrt((double)var[ch] + eps));
                float shift = b[ch] - mean[ch] * scale;
                for (int64_t i = p0 * hw; i < (p0 + 1) * hw; i++)
                    o[i] = a[i] * scale + shift;
            }
            break;
        }
        default: { /* the binary ops; the other operand same-shaped or a scalar */
            const float *bb = x->buf[n->in[1 - k]->id];
            int scalar = n->in[1 - k]->type.rank == 0;
            for (int64_t i = lo; i < hi; i++) {
                float u = a[i], v = scalar ? bb[0] : bb[i];
                float l = k == 0 ? u : v, r = k == 0 ? v : u;
                o[i] = n->op == IR_OP_ADD ? l + r : n->op == IR_OP_SUB ? l - r
                     : n->op == IR_OP_MUL ? l * r : n->op == IR_OP_DIV ? l / r
                     : binary_f(n->op, l, r);
            }
        }
        }
    }
}

/* The epilogue run after the whole convolution, image by image across the
 * threads (a convolution on oneDNN, or one that runs chunk by chunk). */
static void epilogue_images(rt_exec *x, const epilogue *e, int64_t n, int64_t size)
{
    if (!e)
        return;
#pragma omp parallel for if (n * size > PAR_MIN)
    for (int64_t b = 0; b < n; b++)
        run_epilogue(x, e, b * size, (b + 1) * size);
}

void rt_epilogue_range(rt_exec *x, const struct epilogue *e, int64_t lo, int64_t hi)
{
    run_epilogue(x, e, lo, hi);
}

int rt_exec_nchw(rt_exec *x, const ir_value *v)
{
    if (!x->nhwc || !x->nhwc[v->id])
        return 0;
    const int64_t *d = v->type.dims;
    int64_t n = d[0], c = d[1], hw = d[2] * d[3], total = NUMEL(v);
    float *tmp = rt_scratch(x, (size_t)total), *buf = x->buf[v->id];
    if (!tmp)
        return -1;
    memcpy(tmp, buf, (size_t)total * sizeof *buf);
#pragma omp parallel for collapse(2) if (total > PAR_MIN)
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < hw; i++)
                buf[(b * c + ch) * hw + i] = tmp[(b * hw + i) * c + ch];
    x->nhwc[v->id] = 0;
    return 0;
}

/* The operands of e's members back in NCHW, where the epilogue runs them
 * after the convolution (a residual left channels-last). */
int rt_epilogue_ready(rt_exec *x, const epilogue *e)
{
    for (int i = 0; e && i < e->n; i++)
        for (int k = 0; k < e->m[i]->nin; k++)
            if (rt_exec_nchw(x, e->m[i]->in[k]))
                return -1;
    return 0;
}

/* Convolution as GEMM: per group, weights [og, cg*kh*kw] times the columns of a
 * chunk of images [cg*kh*kw, chunk*oh*ow].  Chunks bound the column buffer; a
 * chunk of several images makes one large GEMM out of the deep layers' small
 * spatial sizes. */
static int k_conv2d(rt_exec *x, const ir_node *n, const epilogue *epi, char *err,
                    size_t errlen)
{
    conv_geom g = rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type, &n->out[0]->type);
    const float *in = IN(0), *w = IN(1), *bias = n->nin == 3 ? IN(2) : NULL;
    float *out = OUT;
    int64_t cg = g.c / g.groups, og = g.o / g.groups;
    int64_t kdim = cg * g.kh * g.kw, plane = g.oh * g.ow;
    int direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
                 g.groups == 1;
    int on_own = rt_wino_conv(x, n, err, errlen);
    if (on_own) {
        if (on_own > 0 && rt_epilogue_ready(x, epi))
            return fail(err, errlen, "conv2d: out of memory");
        if (on_own > 0)
            epilogue_images(x, epi, g.n, g.o * plane);
        return on_own < 0 ? -1 : 0;
    }
    on_own = rt_direct_conv(x, n, epi, err, errlen); /* the epilogue image by image */
    if (on_own)
        return on_own < 0 ? -1 : 0;
    /* on oneDNN, the members it runs as post-ops are done with the
       convolution; the others run after it, as they would after OpenBLAS */
    int absorbed = 0;
    int on_dnnl = rt_dnnl_conv(x, n, epi ? epi->m : NULL, epi ? epi->n : 0, &absorbed, err,
                               errlen);
    if (on_dnnl < 0)
        return -1;
    if (on_dnnl) {
        if (epi && absorbed < epi->n) {
            epilogue rest = {.n = epi->n - absorbed};
            for (int j = 0; j < rest.n; j++)
                rest.m[j] = epi->m[absorbed + j], rest.k[j] = epi->k[absorbed + j];
            if (rt_epilogue_ready(x, &rest))
                return fail(err, errlen, "conv2d: out of memory");
            epilogue_images(x, &rest, g.n, g.o * plane);
        }
        return 0;
    }
    if (rt_exec_nchw(x, n->in[0]) || rt_epilogue_ready(x, epi))
        return fail(err, errlen, "conv2d: out of memory");
    x->blas_convs++;
    if (rt_conv_per_image(&g) && !direct) {
        /* each thread takes whole images: its own columns, one GEMM per group
           written straight into the output, the bias added while it is hot */
        int nt = omp_get_max_threads();
        float *cols = rt_scratch(x, (size_t)(nt * kdim * plane));
        if (!cols)
            return fail(err, errlen, "conv2d: out of memory for %lld column floats",
                        (long long)(nt * kdim * plane));
#pragma omp parallel
        {
            float *col = cols + omp_get_thread_num() * kdim * plane;
            omp_set_num_threads(1); /* OpenBLAS on this thread alone (rt_gemm) */
#pragma omp for schedule(static)
            for (int64_t b = 0; b < g.n; b++) {
                float *o = out + b * g.o * plane;
                for (int64_t gi = 0; gi < g.groups; gi++) {
                    rt_im2col(&g, in + b * g.c * g.h * g.w, gi * cg, cg, col, plane, 0);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)og, (int)plane,
                                (int)kdim, 1.0f, w + gi * og * kdim, (int)kdim, col,
                                (int)plane, 0.0f, o + gi * og * plane, (int)plane);
                }
                for (int64_t oc = 0; bias && oc < g.o; oc++)
                    for (int64_t i = 0; i < plane; i++)
                        o[oc * plane + i] += bias[oc];
                if (epi)
                    run_epilogue(x, epi, b * g.o * plane, (b + 1) * g.o * plane);
            }
        }
        return 0;
    }
    if (direct) { /* 1x1, stride 1: the image is its own column matrix */
        for (int64_t b = 0; b < g.n; b++)
            rt_gemm(0, 0, g.o, plane, g.c, w, g.c, in + b * g.c * plane, plane, 0.0f,
                    out + b * g.o * plane, plane);
    } else {
        int64_t budget = (int64_t)1 << 22; /* floats of columns per chunk: 16 MiB */
        int64_t chunk = budget / (kdim * plane);
        chunk = chunk < 1 ? 1 : chunk > g.n ? g.n : chunk;
        float *col = rt_scratch(x, (size_t)(kdim * plane * chunk + og * plane * chunk));
        if (!col)
            return fail(err, errlen, "conv2d: out of memory for %lld column floats",
                        (long long)(kdim * plane * chunk));
        float *res = col + kdim * plane * chunk;
        for (int64_t b0 = 0; b0 < g.n; b0 += chunk) {
            int64_t nb = g.n - b0 < chunk ? g.n - b0 : chunk, ldc = nb * plane;
            for (int64_t gi = 0; gi < g.groups; gi++) {
                for (int64_t b = 0; b < nb; b++)
                    rt_im2col(&g, in + (b0 + b) * g.c * g.h * g.w, gi * cg, cg, col, ldc, b * plane);
                float *dst = nb == 1 ? out + b0 * g.o * plane + gi * og * plane : res;
                rt_gemm(0, 0, og, ldc, kdim, w + gi * og * kdim, kdim, col, ldc, 0.0f, dst, ldc);
                if (nb == 1)
                    continue;
#pragma omp parallel for collapse(2) if (og * ldc > PAR_MIN)
                for (int64_t b = 0; b < nb; b++)
                    for (int64_t oc = 0; oc < og; oc++)
                        memcpy(out + ((b0 + b) * g.o + gi * og + oc) * plane,
                               res + oc * ldc + b * plane, (size_t)plane * sizeof *out);
            }
        }
    }
    if (bias) {
#pragma omp parallel for collapse(2) if (g.n * g.o * plane > PAR_MIN)
        for (int64_t b = 0; b < g.n; b++)
            for (int64_t oc = 0; oc < g.o; oc++) {
                float *p = out + (b * g.o + oc) * plane, v = bias[oc];
                for (int64_t i = 0; i < plane; i++)
                    p[i] += v;
            }
    }
    epilogue_images(x, epi, g.n, g.o * plane);
    return 0;
}

/* ---------------------------------------------------------------- normalization */

static int k_batchnorm(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], inner = NUMEL(n->in[0]) / (t->dims[0] * c);
    const float *a = IN(0), *w = IN(1), *b = IN(2), *mean = IN(3), *var = IN(4);
    float *o = OUT;
    double eps = ir_attr_float(n, "eps");
#pragma omp parallel for collapse(2) if (t->dims[0] * c * inner > PAR_MIN)
    for (int64_t i = 0; i < t->dims[0]; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            float scale = (float)(w[ch] / sqrt((double)var[ch] + eps));
            float shift = b[ch] - mean[ch] * scale;
            const float *p = a + (i * c + ch) * inner;
            float *q = o + (i * c + ch) * inner;
            for (int64_t k = 0; k < inner; k++)
                q[k] = p[k] * scale + shift;
        }
    return 0;
}

static int k_layernorm(rt_exec *x, const ir_node *n)
{
    int64_t d = NUMEL(n->in[1]), rows = NUMEL(n->in[0]) / d;
    const float *a = IN(0), *w = IN(1), *b = IN(2);
    float *o = OUT;
    double eps = ir_attr_float(n, "eps");
#pragma omp parallel for if (rows * d > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *p = a + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += p[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (p[i] - mean) * (p[i] - mean);
        var /= (double)d;
        float inv = (float)(1.0 / sqrt(var + eps)), m = (float)mean;
        for (int64_t i = 0; i < d; i++)
            o[r * d + i] = (p[i] - m) * inv * w[i] + b[i];
    }
    return 0;
}

/* softmax and log_softmax along one axis: outer x len x inner */
static int k_softmax(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t len = t->dims[axis], inner = 1;
    for (int i = axis + 1; i < t->rank; i++)
        inner *= t->dims[i];
    int64_t outer = NUMEL(n->in[0]) / (len * inner);
    const float *a = IN(0);
    float *o = OUT;
    int logsm = n->op == IR_OP_LOG_SOFTMAX;
#pragma omp parallel for collapse(2) if (outer * len * inner > PAR_MIN)
    for (int64_t u = 0; u < outer; u++)
        for (int64_t v = 0; v < inner; v++) {
            const float *p = a + u * len * inner + v;
            float *q = o + u * len * inner + v;
            float mx = -INFINITY;
            for (int64_t i = 0; i < len; i++)
                mx = p[i * inner] > mx ? p[i * inner] : mx;
            double sum = 0;
            for (int64_t i = 0; i < len; i++)
                sum += exp((double)(p[i * inner] - mx));
            if (logsm) { /* (x - max) - log(sum): mx + log(sum) in float would lose
                            the digits of inputs near 1e4 (ONNX's
                            test_logsoftmax_large_number) */
                double ls = log(sum);
                for (int64_t i = 0; i < len; i++)
                    q[i * inner] = (float)((double)(p[i * inner] - mx) - ls);
            } else {
                for (int64_t i = 0; i < len; i++)
                    q[i * inner] = (float)(exp((double)(p[i * inner] - mx)) / sum);
            }
        }
    return 0;
}

/* ---------------------------------------------------------------- pooling */

static int k_maxpool(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    const int64_t *k = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                  *pd = ir_attr_ints(n, "pad", NULL), *dl = ir_attr_ints(n, "dilation", NULL);
    int64_t h = t->dims[2], w = t->dims[3], oh = to->dims[2], ow = to->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *a = IN(0);
    float *o = OUT;
#pragma omp parallel for if (planes * oh * ow * k[0] * k[1] > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                float m = -INFINITY; /* padding never wins, as in PyTorch */
                for (int64_t ky = 0; ky < k[0]; ky++) {
                    int64_t iy = oy * st[0] - pd[0] + ky * dl[0];
                    for (int64_t kx = 0; kx < k[1] && iy >= 0 && iy < h; kx++) {
                        int64_t ix = ox * st[1] - pd[1] + kx * dl[1];
                        float v = ix >= 0 && ix < w ? a[(p * h + iy) * w + ix] : -INFINITY;
                        m = v > m || isnan(v) ? v : m;
                    }
                }
                o[(p * oh + oy) * ow + ox] = m;
            }
    return 0;
}

static int k_avgpool(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    const int64_t *k = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                  *pd = ir_attr_ints(n, "pad", NULL);
    int incl = ir_attr_int(n, "count_include_pad") != 0;
    int64_t h = t->dims[2], w = t->dims[3], oh = to->dims[2], ow = to->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *a = IN(0);
    float *o = OUT;
    if (rt_pool_tiles(k, st, pd, h, w, oh, ow) && k[0] == 2 && k[1] == 2) {
        /* the common 2x2 windows, unrolled: the loop below's sums (from 0, in
           order), a few times faster than its loops over the window */
#pragma omp parallel for if (planes * h * w > PAR_MIN)
        for (int64_t p = 0; p < planes; p++)
            for (int64_t oy = 0; oy < oh; oy++) {
                const float *r0 = a + (p * h + 2 * oy) * w, *r1 = r0 + w;
                float *q = o + (p * oh + oy) * ow;
                for (int64_t ox = 0; ox < ow; ox++)
                    q[ox] = (0.0f + r0[2 * ox] + r0[2 * ox + 1] + r1[2 * ox] + r1[2 * ox + 1]) *
                            0.25f;
            }
        return 0;
    }
    if (rt_pool_tiles(k, st, pd, h, w, oh, ow)) { /* windows side by side: no clipping */
        float scale = 1.0f / (float)(k[0] * k[1]);
#pragma omp parallel for if (planes * h * w > PAR_MIN)
        for (int64_t p = 0; p < planes; p++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    const float *src = a + (p * h + oy * k[0]) * w + ox * k[1];
                    float s = 0;
                    for (int64_t ky = 0; ky < k[0]; ky++)
                        for (int64_t kx = 0; kx < k[1]; kx++)
                            s += src[ky * w + kx];
                    o[(p * oh + oy) * ow + ox] = s * scale;
                }
        return 0;
    }
#pragma omp parallel for if (planes * oh * ow * k[0] * k[1] > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t win[4];
                int64_t div = rt_avgpool_window(k, st, pd, h, w, oy, ox, incl, win);
                float s = 0;
                for (int64_t iy = win[0]; iy < win[1]; iy++)
                    for (int64_t ix = win[2]; ix < win[3]; ix++)
                        s += a[(p * h + iy) * w + ix];
                o[(p * oh + oy) * ow + ox] = s / (float)div;
            }
    return 0;
}

static int k_global_avgpool(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t planes = t->dims[0] * t->dims[1], hw = t->dims[2] * t->dims[3];
    const float *a = IN(0);
    float *o = OUT;
#pragma omp parallel for if (planes * hw > PAR_MIN)
    for (int64_t p = 0; p < planes; p++) {
        double s = 0;
        for (int64_t i = 0; i < hw; i++)
            s += a[p * hw + i];
        o[p] = (float)(s / (double)hw);
    }
    return 0;
}

static int k_adaptive_avgpool(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    int64_t h = t->dims[2], w = t->dims[3], oh = to->dims[2], ow = to->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    const float *a = IN(0);
    float *o = OUT;
#pragma omp parallel for if (planes * h * w > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0, y1;
            rt_adaptive_window(oy, h, oh, &y0, &y1);
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t x0, x1;
                rt_adaptive_window(ox, w, ow, &x0, &x1);
                float s = 0;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        s += a[(p * h + iy) * w + ix];
                o[(p * oh + oy) * ow + ox] = s / (float)((y1 - y0) * (x1 - x0));
            }
        }
    return 0;
}

/* PyTorch's arithmetic: the weighted taps in float, the row's pair of columns
 * first; nearest reads its one tap. */
static int k_upsample(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    int64_t h = t->dims[2], w = t->dims[3], oh = to->dims[2], ow = to->dims[3];
    int64_t planes = t->dims[0] * t->dims[1];
    int bil = (int)ir_attr_int(n, "mode"), al = (int)ir_attr_int(n, "align_corners");
    float rh = ir_upsample_ratio(h, oh, bil, al, ir_attr_float(n, "scale_h"));
    float rw = ir_upsample_ratio(w, ow, bil, al, ir_attr_float(n, "scale_w"));
    const float *a = IN(0);
    float *o = OUT;
#pragma omp parallel for if (planes * oh * ow > PAR_MIN)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0, y1;
            float ly0, ly1;
            ir_upsample_taps(oy, h, oh, bil, al, rh, &y0, &y1, &ly0, &ly1);
            const float *r0 = a + (p * h + y0) * w, *r1 = a + (p * h + y1) * w;
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t x0, x1;
                float lx0, lx1;
                ir_upsample_taps(ox, w, ow, bil, al, rw, &x0, &x1, &lx0, &lx1);
                o[(p * oh + oy) * ow + ox] =
                    bil ? ly0 * (lx0 * r0[x0] + lx1 * r0[x1]) + ly1 * (lx0 * r1[x0] + lx1 * r1[x1])
                        : r0[x0];
            }
        }
    return 0;
}

/* ---------------------------------------------------------------- data movement */

static int k_reshape(rt_exec *x, const ir_node *n)
{
    void *to = data(x, n->out[0]);
    const void *from = data(x, n->in[0]);
    if (to != from) /* the plan makes most a view: the same bytes */
        memcpy(to, from, (size_t)NUMEL(n->in[0]) * ir_host_size(n->in[0]->type.dtype));
    return 0;
}

static int k_transpose(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    const int64_t *perm = ir_attr_ints(n, "perm", NULL);
    int r = t->rank;
    int64_t in_st[IR_MAX_RANK], st[IR_MAX_RANK]; /* st[i]: input stride of output dim i */
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        in_st[i] = s;
        s *= t->dims[i];
    }
    for (int i = 0; i < r; i++)
        st[i] = in_st[perm[i]];
    size_t es = ir_host_size(t->dtype);
    const char *a = data(x, n->in[0]);
    char *o = data(x, n->out[0]);
    int64_t len = NUMEL(n->out[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        int64_t off = 0, rem = i;
        for (int d = r - 1; d >= 0; d--) {
            off += (rem % to->dims[d]) * st[d];
            rem /= to->dims[d];
        }
        memcpy(o + (size_t)i * es, a + (size_t)off * es, es);
    }
    return 0;
}

/* Element i of an integer tensor p of dtype t */
static int64_t int_at(const void *p, ir_dtype t, int64_t i)
{
    switch (t) {
    case IR_I32: return ((const int32_t *)p)[i];
    case IR_U8: return ((const uint8_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

/* Stores integer v as element i of p (dtype t), wrapping as C's casts to
 * unsigned do; a float dtype takes it rounded. */
static void int_set(void *p, ir_dtype t, int64_t i, int64_t v)
{
    switch (t) {
    case IR_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; break;
    case IR_I64: ((int64_t *)p)[i] = v; break;
    case IR_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((float *)p)[i] = (float)v; break;
    }
}

/* Float v as an integer of dtype t: toward zero, saturated, NaN 0 (what
 * CUDA's conversions do) */
static int64_t float_to_int(double v, ir_dtype t)
{
    double lo = t == IR_I32 ? -2147483648.0 : t == IR_U8 ? 0 : -9223372036854775808.0;
    double hi = t == IR_I32 ? 2147483647.0 : t == IR_U8 ? 255 : 9223372036854775807.0;
    if (v != v)
        return 0;
    if (v <= lo)
        return t == IR_I64 ? INT64_MIN : (int64_t)lo;
    if (v >= hi)
        return t == IR_I64 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

/* arange: start + i step, in any dtype (whole numbers for integers, checked) */
static int k_arange(rt_exec *x, const ir_node *n)
{
    const ir_value *y = n->out[0];
    double start = ir_attr_float(n, "start"), step = ir_attr_float(n, "step");
    void *o = data(x, y);
    int64_t len = NUMEL(y);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        double v = start + (double)i * step;
        if (ir_is_float(y->type.dtype))
            ((float *)o)[i] = (float)v;
        else
            int_set(o, y->type.dtype, i, (int64_t)v);
    }
    return 0;
}

/* cast: each element converted as ops.def says */
static int k_cast(rt_exec *x, const ir_node *n)
{
    ir_dtype from = n->in[0]->type.dtype, to = n->out[0]->type.dtype;
    const void *a = data(x, n->in[0]);
    void *o = data(x, n->out[0]);
    int64_t len = NUMEL(n->out[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        if (!ir_is_float(from))
            int_set(o, to, i, int_at(a, from, i));
        else if (ir_is_float(to))
            ((float *)o)[i] = ((const float *)a)[i];
        else
            int_set(o, to, i, float_to_int(((const float *)a)[i], to));
    }
    return 0;
}

/* pad: each element from its place in the operand, or the value around it */
static int k_pad(rt_exec *x, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type, *to = &n->out[0]->type;
    const int64_t *before = ir_attr_ints(n, "before", NULL);
    double v = ir_attr_float(n, "value");
    size_t es = ir_host_size(to->dtype);
    union { float f; int32_t i32; int64_t i64; uint8_t u8; } fill;
    switch (to->dtype) {
    case IR_I32: fill.i32 = (int32_t)v; break;
    case IR_I64: fill.i64 = (int64_t)v; break;
    case IR_U8: fill.u8 = (uint8_t)v; break;
    default: fill.f = (float)v; break;
    }
    const char *a = data(x, n->in[0]);
    char *o = data(x, n->out[0]);
    int64_t len = NUMEL(n->out[0]);
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        int64_t off = 0, rem = i, st = 1;
        int inside = 1;
        for (int d = to->rank - 1; d >= 0; d--) {
            int64_t c = rem % to->dims[d] - before[d];
            rem /= to->dims[d];
            inside &= c >= 0 && c < t->dims[d];
            off += c * st;
            st *= t->dims[d];
        }
        memcpy(o + (size_t)i * es, inside ? a + (size_t)off * es : (const char *)&fill, es);
    }
    return 0;
}

static int k_concat(rt_exec *x, const ir_node *n)
{
    const ir_type *to = &n->out[0]->type;
    int axis = (int)ir_attr_int(n, "axis");
    size_t es = ir_host_size(to->dtype);
    int64_t inner = 1, outer = 1;
    for (int i = axis + 1; i < to->rank; i++)
        inner *= to->dims[i];
    for (int i = 0; i < axis; i++)
        outer *= to->dims[i];
    char *o = data(x, n->out[0]);
    int64_t at = 0; /* position along axis */
    for (int k = 0; k < n->nin; k++) {
        int64_t len = n->in[k]->type.dims[axis];
        const char *a = data(x, n->in[k]);
        for (int64_t u = 0; u < outer; u++)
            memcpy(o + ((u * to->dims[axis] + at) * inner) * es, a + u * len * inner * es,
                   (size_t)(len * inner) * es);
        at += len;
    }
    return 0;
}

/* Integer index i of an i32 or i64 tensor. */
int64_t rt_index_at(const void *p, ir_dtype t, int64_t i)
{
    return t == IR_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* A table's rows of a vocabulary split between devices (ops.def: shard_start,
 * shard_of): id k is row k - start of the table when in [0, num), else in
 * another device's rows. */
int rt_embedding_row(const ir_node *n, const ir_value *idx, int64_t num, int64_t i, int64_t k,
                     int64_t *row, char *err, size_t errlen)
{
    int64_t of = ir_attr_int(n, "shard_of"), rows = of ? of : num;
    if (k < 0 || k >= rows)
        return fail(err, errlen, "embedding index %lld at position %lld of '%s' is out "
                    "of range [0, %lld)", (long long)k, (long long)i, idx->name, (long long)rows);
    *row = k - ir_attr_int(n, "shard_start");
    return 0;
}

static int k_embedding(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    const ir_type *tw = &n->in[1]->type;
    int64_t num = tw->dims[0], dim = tw->dims[1], len = NUMEL(n->in[0]);
    const void *idx = data(x, n->in[0]);
    const float *w = IN(1);
    float *o = OUT;
    for (int64_t i = 0, r = 0; i < len; i++) {
        if (rt_embedding_row(n, n->in[0], num, i, rt_index_at(idx, n->in[0]->type.dtype, i), &r,
                             err, errlen) != 0)
            return -1;
        if (r >= 0 && r < num)
            memcpy(o + i * dim, w + r * dim, (size_t)dim * sizeof *o);
        else /* another device's row: its share of the sum is 0 */
            memset(o + i * dim, 0, (size_t)dim * sizeof *o);
    }
    return 0;
}

/* ---------------------------------------------------------------- losses */

int rt_ce_begin(rt_exec *x, const ir_node *n, int li, rt_ce *ce, char *err, size_t errlen)
{
    const ir_type *t = &n->in[li]->type;
    const ir_value *l = n->in[li + 1];
    ce->c = t->dims[1];
    ce->npos = ir_type_numel(&l->type);
    ce->inner = ce->npos / t->dims[0];
    ce->nll = n->op == IR_OP_NLL_LOSS || n->op == IR_OP_NLL_LOSS_GRAD;
    ce->eps = ce->nll ? 0 : ir_attr_float(n, "label_smoothing");
    ce->ignore = ir_attr_int(n, "ignore_index");
    ce->lab = x->buf[l->id];
    ce->ldt = l->type.dtype;
    ce->count = 0;
    int64_t split = ir_attr_int(n, "split");
    const char *op = ce->nll ? "nll_loss" : "cross_entropy"; /* a gradient's too */
    for (int64_t p = 0; p < ce->npos; p++) {
        int64_t y = rt_index_at(ce->lab, ce->ldt, p);
        if (y == ce->ignore && split > 1)
            return fail(err, errlen, "%s label %lld at position %lld of '%s' is "
                        "ignore_index, in a batch split between %lld replicas: their losses "
                        "are averaged, which is not the mean over the batch's other labels; "
                        "train on one device", op, (long long)y, (long long)p, l->name,
                        (long long)split);
        if (y == ce->ignore)
            continue;
        if (y < 0 || y >= ce->c)
            return fail(err, errlen, "%s label %lld at position %lld of '%s' is "
                        "out of range [0, %lld)", op, (long long)y, (long long)p, l->name,
                        (long long)ce->c);
        ce->count++;
    }
    return 0;
}

/* Each position's lse - (1 - eps) x[y] - eps / c sum x (nll_loss: -x[y]),
 * summed in position order, over the positions not ignored (their count: NaN
 * for none, as PyTorch's 0/0). */
static int k_cross_entropy(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    rt_ce ce;
    if (rt_ce_begin(x, n, 0, &ce, err, errlen) != 0)
        return -1;
    double total = 0;
    for (int64_t r = 0; r < ce.npos; r++) {
        int64_t y = rt_index_at(ce.lab, ce.ldt, r), s = ce.inner;
        if (y == ce.ignore)
            continue;
        const float *p = rt_ce_row(&ce, IN(0), r);
        if (ce.nll) {
            total -= p[y * s];
            continue;
        }
        float mx = -INFINITY;
        for (int64_t i = 0; i < ce.c; i++)
            mx = p[i * s] > mx ? p[i * s] : mx;
        double sum = 0, all = 0;
        for (int64_t i = 0; i < ce.c; i++) {
            sum += exp((double)(p[i * s] - mx));
            all += p[i * s];
        }
        total += mx + log(sum) - (1 - ce.eps) * p[y * s] - ce.eps / (double)ce.c * all;
    }
    *OUT = (float)(total / (double)ce.count);
    return 0;
}

/* Partial sums of a reduction: at most this many, of PAR_MIN / 4 elements or
 * more, fixed by the length alone (an OpenMP reduction would sum one part per
 * thread, in whatever order the threads finish). */
#define REDUCE_PARTS 64

static int k_mse(rt_exec *x, const ir_node *n)
{
    const float *a = IN(0), *b = IN(1);
    int64_t len = NUMEL(n->in[0]);
    int64_t parts = len / (PAR_MIN / 4);
    parts = parts < 1 ? 1 : parts > REDUCE_PARTS ? REDUCE_PARTS : parts;
    double part[REDUCE_PARTS], s = 0;
#pragma omp parallel for if (len > PAR_MIN)
    for (int64_t p = 0; p < parts; p++) {
        double t = 0;
        for (int64_t i = p * len / parts; i < (p + 1) * len / parts; i++)
            t += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        part[p] = t;
    }
    for (int64_t p = 0; p < parts; p++)
        s += part[p];
    *OUT = (float)(s / (double)len);
    return 0;
}

/* ---------------------------------------------------------------- driver */

static int run_node(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    if (ir_op_is(n->op, IR_UNARY))
        return k_unary(x, n);
    if (ir_op_is(n->op, IR_BINARY))
        return k_binary(x, n);
    switch (n->op) {
    case IR_OP_CONST: return k_const(x, n);
    case IR_OP_ARANGE: return k_arange(x, n);
    case IR_OP_CAST: return k_cast(x, n);
    case IR_OP_WHERE: return k_where(x, n);
    case IR_OP_MATMUL: return k_matmul(x, n, err, errlen);
    case IR_OP_DENSE: return k_dense(x, n, err, errlen);
    case IR_OP_CONV2D: return k_conv2d(x, n, NULL, err, errlen);
    case IR_OP_BATCHNORM: return k_batchnorm(x, n);
    case IR_OP_LAYERNORM: return k_layernorm(x, n);
    case IR_OP_ATTENTION: return rt_attention(x, n);
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: return k_softmax(x, n);
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX: return k_extreme(x, n);
    case IR_OP_MAXPOOL2D: return k_maxpool(x, n);
    case IR_OP_AVGPOOL2D: return k_avgpool(x, n);
    case IR_OP_GLOBAL_AVGPOOL: return k_global_avgpool(x, n);
    case IR_OP_ADAPTIVE_AVGPOOL2D: return k_adaptive_avgpool(x, n);
    case IR_OP_UPSAMPLE2D: return k_upsample(x, n);
    case IR_OP_RESHAPE: return k_reshape(x, n);
    case IR_OP_TRANSPOSE: return k_transpose(x, n);
    case IR_OP_CONCAT: return k_concat(x, n);
    case IR_OP_PAD: return k_pad(x, n);
    case IR_OP_EMBEDDING: return k_embedding(x, n, err, errlen);
    case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS: return k_cross_entropy(x, n, err, errlen);
    case IR_OP_MSE: return k_mse(x, n);
    case IR_OP_ALL_REDUCE: case IR_OP_ALL_GATHER: case IR_OP_REDUCE_SCATTER: case IR_OP_BROADCAST:
    case IR_OP_SEND: case IR_OP_RECV:
#ifdef GNC_HAVE_MPI
        if (x->mpi)
            return rt_mpi_kernel(x, n, err, errlen);
#endif
        return rt_comm_kernel(x, n, err, errlen);
    default: return rt_train_kernel(x, n, err, errlen);
    }
}

/* Whether the executor runs n: arithmetic is on floats; integers only move. */
static int supported(const ir_node *n)
{
    switch (n->op) {
    case IR_OP_RESHAPE: case IR_OP_TRANSPOSE: case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_EMBEDDING:
    case IR_OP_ARANGE: case IR_OP_CAST: case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS:
    case IR_OP_SEND: case IR_OP_SLICE: case IR_OP_ARGMAX:
        return 1;
    default:
        return ir_is_float(n->out[0]->type.dtype);
    }
}

/* The bytes of v's buffer of its own (alloc_value). */
static int64_t value_bytes(const ir_value *v)
{
    int64_t bytes = ir_type_numel(&v->type) * (int64_t)ir_host_size(v->type.dtype);
    return bytes ? bytes : 1;
}

static int alloc_value(rt_exec *x, const ir_value *v, char *err, size_t errlen)
{
    size_t bytes = (size_t)ir_type_numel(&v->type) * ir_host_size(v->type.dtype);
    x->buf[v->id] = base_calloc(1, bytes ? bytes : 1);
    if (!x->buf[v->id])
        return fail(err, errlen, "out of memory for '%s' (%zu bytes)", v->name, bytes);
    return 0;
}

/* An executor with its value table; parent: the one a device executor belongs
 * to (it borrows parent's inputs), or NULL. */
static rt_exec *exec_alloc(const ir_graph *g, int device, char *err, size_t errlen)
{
    rt_exec *x = base_calloc(1, sizeof *x);
    if (!x || !(x->buf = base_calloc((size_t)g->nvalues + 1, sizeof *x->buf)) ||
        !(x->borrowed = base_calloc((size_t)g->nvalues + 1, 1)) ||
        !(x->weight = base_calloc((size_t)g->nvalues + 1, 1))) {
        if (x) {
            base_free(x->buf);
            base_free(x->borrowed);
        }
        base_free(x);
        fail(err, errlen, "out of memory");
        return NULL;
    }
    x->g = g;
    x->nvalues = g->nvalues;
    x->device = device;
    ir_weight_only(g, x->weight);
    return x;
}

/* Node results of device (every node when device < 0) in one arena (at
 * offsets) or buffers of their own; parameters it reads or updates; the list
 * of its nodes. */
static int place_values(rt_exec *x, const int64_t *offsets, int64_t arena_bytes, char *err,
                        size_t errlen)
{
    const ir_graph *g = x->g;
    ir_for_each_node(g, n)
        x->nnodes += x->device < 0 || n->device == x->device;
    if (!(x->nodes = base_calloc((size_t)x->nnodes + 1, sizeof *x->nodes)))
        return fail(err, errlen, "out of memory");
    int k = 0;
    ir_for_each_node(g, n)
        if (x->device < 0 || n->device == x->device)
            x->nodes[k++] = n;
    /* 256-byte aligned, as the plan's offsets are */
    x->arena_bytes = (size_t)(arena_bytes + 255) / 256 * 256;
    if (offsets && arena_bytes > 0 && !(x->arena = aligned_alloc(256, x->arena_bytes)))
        return fail(err, errlen, "out of memory for the %lld-byte arena%s", (long long)arena_bytes,
                    x->device >= 0 ? " of a device" : "");
    ir_for_each_node(g, n) {
        if (x->device >= 0 && n->device != x->device)
            continue;
        if (!supported(n)) {
            char t[128];
            return fail(err, errlen, "the CPU executor has no %s kernel for %s ('%s')",
                        ir_ops[n->op].name, ir_type_str(&n->out[0]->type, t, sizeof t),
                        n->out[0]->name);
        }
        for (int k = 0; k < n->nin; k++) {
            const ir_value *v = n->in[k];
            if (v->kind != IR_VALUE_NODE && v->kind != IR_VALUE_INPUT && !x->buf[v->id] &&
                alloc_value(x, v, err, errlen))
                return -1;
        }
        for (int k = 0; k < n->nout; k++) {
            const ir_value *v = n->out[k];
            if (offsets && offsets[v->id] >= 0 && !x->weight[v->id]) {
                x->buf[v->id] = x->arena + offsets[v->id];
                x->borrowed[v->id] = 1;
            } else if (alloc_value(x, v, err, errlen)) {
                return -1;
            }
        }
    }
    for (int i = 0; i < g->nparams; i++) /* one device: every parameter, read or not */
        if (x->device < 0 && !x->buf[g->params[i]->id] && alloc_value(x, g->params[i], err, errlen))
            return -1;
    for (int i = 0; i < g->nupdates; i++) {
        const ir_update *u = &g->updates[i];
        if ((x->device < 0 || u->device == x->device) && !x->buf[u->target->id] &&
            alloc_value(x, u->target, err, errlen))
            return -1;
    }
    return 0;
}

rt_exec *rt_exec_new(const ir_graph *g, char *err, size_t errlen)
{
    return rt_exec_new_planned(g, NULL, NULL, err, errlen);
}

rt_exec *rt_exec_new_planned(const ir_graph *g, const int64_t *offsets,
                             const int64_t *arena_bytes, char *err, size_t errlen)
{
    int ndev = ir_graph_devices(g);
    rt_exec *x = exec_alloc(g, -1, err, errlen);
    if (!x)
        return NULL;
    for (int i = 0; i < g->ninputs; i++)
        if (alloc_value(x, g->inputs[i], err, errlen))
            goto fail;
    if (ndev == 1) {
        if (place_values(x, offsets, arena_bytes ? arena_bytes[0] : 0, err, errlen))
            goto fail;
        return x;
    }
    /* a partitioned program: a device executor per device, on the caller's inputs */
    x->ndev = ndev;
    if (!(x->devs = base_calloc((size_t)ndev, sizeof *x->devs)))
        goto oom;
    for (int d = 0; d < ndev; d++) {
        rt_exec *dx = x->devs[d] = exec_alloc(g, d, err, errlen);
        if (!dx)
            goto fail;
        for (int i = 0; i < g->ninputs; i++) {
            dx->buf[g->inputs[i]->id] = x->buf[g->inputs[i]->id];
            dx->borrowed[g->inputs[i]->id] = 1;
        }
        if (place_values(dx, offsets, arena_bytes ? arena_bytes[d] : 0, err, errlen))
            goto fail;
    }
    if (rt_comm_new(x, err, errlen))
        goto fail;
    for (int d = 0; d < ndev; d++)
        x->devs[d]->comm = x->comm;
    return x;
oom:
    fail(err, errlen, "out of memory");
fail:
    rt_exec_free(x);
    return NULL;
}

rt_exec *rt_exec_new_rank(const ir_graph *g, const int64_t *offsets, const int64_t *arena_bytes,
                          int rank, double timeout_s, char *err, size_t errlen)
{
#ifndef GNC_HAVE_MPI
    (void)g, (void)offsets, (void)arena_bytes, (void)rank, (void)timeout_s;
    fail(err, errlen, "this build has no MPI backend (install libopenmpi-dev and build again)");
    return NULL;
#else
    int ndev = ir_graph_devices(g);
    if (rank < 0 || rank >= ndev) {
        fail(err, errlen, "rank %d is not a device of the program (it has %d)", rank, ndev);
        return NULL;
    }
    rt_exec *x = exec_alloc(g, rank, err, errlen);
    if (!x)
        return NULL;
    rt_exec_set_timeout(x, timeout_s);
    /* the world first: every rank makes the same checks and communicators */
    if (rt_mpi_new(x, ndev, err, errlen))
        goto fail;
    for (int i = 0; i < g->ninputs; i++)
        if (alloc_value(x, g->inputs[i], err, errlen))
            goto fail;
    if (place_values(x, offsets, arena_bytes ? arena_bytes[rank] : 0, err, errlen))
        goto fail;
    /* rank 0 holds the model's whole state (rt_exec_gather_params) */
    for (int i = 0; rank == 0 && i < g->nparams; i++)
        if (!x->buf[g->params[i]->id] && alloc_value(x, g->params[i], err, errlen))
            goto fail;
    return x;
fail:
    rt_exec_free(x);
    return NULL;
#endif
}

int rt_exec_gather_params(rt_exec *x, char *err, size_t errlen)
{
#ifdef GNC_HAVE_MPI
    if (x->mpi)
        return rt_mpi_gather(x, err, errlen);
#endif
    (void)x, (void)err, (void)errlen;
    return 0;
}

void rt_exec_free(rt_exec *x)
{
    if (!x)
        return;
#ifdef GNC_HAVE_MPI
    rt_mpi_free(x->mpi);
#endif
    for (int d = 0; d < x->ndev; d++)
        if (x->devs[d]) {
            x->devs[d]->comm = NULL;
            rt_exec_free(x->devs[d]);
        }
    base_free(x->devs);
    for (int i = 0; i < x->nvalues; i++)
        if (!x->borrowed[i])
            base_free(x->buf[i]);
    base_free(x->buf);
    rt_comm_free(x->comm);
    base_free(x->nodes);
    base_free(x->borrowed);
    base_free(x->weight);
    free(x->nhwc);
    base_free(x->arena);
    base_free(x->scratch);
    base_free(x->events);
    rt_dnnl_free(x->dnnl);
    rt_wino_free(x->wino);
    base_free(x);
}

/* x's own share of rt_exec_memory, added to m: each buffer's size as
 * alloc_value and place_values asked for it, by the kind of its value. */
static void memory_of(const rt_exec *x, rt_memory *m)
{
    const ir_graph *g = x->g;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        m->inputs += x->buf[v->id] && !x->borrowed[v->id] ? value_bytes(v) : 0;
    }
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!x->buf[v->id] || x->borrowed[v->id])
            continue;
        if (v->kind == IR_VALUE_STATE)
            m->state += value_bytes(v);
        else
            m->params += value_bytes(v);
    }
    ir_for_each_node(g, n)
        for (int k = 0; k < n->nout; k++) {
            const ir_value *v = n->out[k];
            m->values += x->buf[v->id] && !x->borrowed[v->id] ? value_bytes(v) : 0;
        }
    m->arena += x->arena ? (int64_t)x->arena_bytes : 0;
    m->workspace += (int64_t)(x->scratch_cap * sizeof(float));
    m->winograd += rt_wino_bytes(x->wino);
    rt_dnnl_mem dm;
    rt_dnnl_bytes(x->dnnl, &dm);
    m->dnnl_weights += dm.weights;
    m->dnnl_work += dm.work;
    m->dnnl_kernels += dm.kernels;
    m->dnnl_trial = dm.trial > m->dnnl_trial ? dm.trial : m->dnnl_trial;
    m->tables += (int64_t)(x->nvalues + 1) * (int64_t)(sizeof *x->buf + 2) +
                 (int64_t)(x->nnodes + 1) * (int64_t)sizeof *x->nodes +
                 (int64_t)x->cap_events * (int64_t)sizeof *x->events;
}

void rt_exec_memory(const rt_exec *x, rt_memory *m)
{
    memset(m, 0, sizeof *m);
    memory_of(x, m);
    for (int d = 0; d < x->ndev; d++)
        memory_of(x->devs[d], m);
    m->comm = rt_comm_bytes(x->comm);
}

/* The executor holding v: a device's for its node results, else the first
 * device with a copy (parameters), else x (inputs, one device). */
static rt_exec *holder(rt_exec *x, const ir_value *v)
{
    if (!x->ndev || v->kind == IR_VALUE_INPUT)
        return x;
    if (v->kind == IR_VALUE_NODE && v->def)
        return x->devs[v->def->device];
    for (int d = 0; d < x->ndev; d++)
        if (x->devs[d]->buf[v->id])
            return x->devs[d];
    return x;
}

void *rt_exec_data(rt_exec *x, const ir_value *v)
{
    if (v->id >= x->nvalues)
        return NULL;
    return holder(x, v)->buf[v->id];
}

void rt_exec_weights_changed(rt_exec *x)
{
    x->weights_ready = 0;
    for (int i = 0; x->ndev && i < x->g->nparams; i++) {
        const ir_value *v = x->g->params[i];
        rt_exec *h = holder(x, v);
        for (int d = 0; d < x->ndev; d++)
            if (x->devs[d] != h && x->devs[d]->buf[v->id])
                memcpy(x->devs[d]->buf[v->id], h->buf[v->id],
                       (size_t)NUMEL(v) * ir_host_size(v->type.dtype));
    }
    for (int d = 0; d < x->ndev; d++)
        x->devs[d]->weights_ready = 0;
}

void rt_exec_init_params(rt_exec *x, uint64_t seed)
{
    for (int d = 0; d < x->ndev; d++)
        rt_exec_init_params(x->devs[d], seed);
    x->weights_ready = 0;
    for (int i = 0; i < x->g->nparams; i++)
        if (x->buf[x->g->params[i]->id])
            ir_init_fill(x->g->params[i], seed, fdata(x, x->g->params[i]));
}

/* A fused node that starts at n: a convolution running image by image (any
 * convolution, where oneDNN may run it) whose other members can run slice by
 * slice.  Returns its member count after n (0: run the nodes one by one). */
static int fused_conv(const ir_node *n, epilogue *e)
{
    e->n = 0;
    if (!n->group || n->op != IR_OP_CONV2D || (n->prev && n->prev->group == n->group))
        return 0;
    conv_geom g = rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type, &n->out[0]->type);
    int direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
                 g.groups == 1;
    if ((!rt_conv_per_image(&g) || direct) && !rt_dnnl_enabled())
        return 0; /* on oneDNN any convolution may lead a fused group */
    const ir_value *running = n->out[0];
    for (const ir_node *m = n->next; m && m->group == n->group; m = m->next) {
        int k = epilogue_operand(m, running);
        if (e->n == 32 || k < 0)
            return e->n = 0;
        e->m[e->n] = m;
        e->k[e->n++] = k;
        running = m->out[0];
    }
    return e->n;
}

/* Keeps the kernel of nodes first .. last, run from t0 to t1, for rt_exec_events. */
static void record(rt_exec *x, const ir_node *first, const ir_node *last, double t0, double t1)
{
    if (x->nevents == x->cap_events) {
        int cap = x->cap_events ? 2 * x->cap_events : 256;
        rt_event *e = cap <= RT_MAX_EVENTS ? base_realloc(x->events, (size_t)cap * sizeof *e)
                                           : NULL;
        if (!e)
            return; /* the profile's table still counts it */
        x->events = e, x->cap_events = cap;
    }
    x->events[x->nevents++] = (rt_event){first, last, x->device > 0 ? x->device : 0, t0, t1};
}

const rt_event *rt_exec_events(rt_exec *x, int *n)
{
    if (!x->ndev) {
        *n = x->nevents;
        return x->events;
    }
    /* a partitioned program: the devices' lists one after another, in x's own */
    int total = 0;
    for (int d = 0; d < x->ndev; d++)
        total += x->devs[d]->nevents;
    rt_event *all = base_realloc(x->events, (size_t)(total ? total : 1) * sizeof *all);
    *n = 0;
    if (!all)
        return NULL;
    x->events = all, x->cap_events = total ? total : 1;
    for (int d = 0; d < x->ndev; d++) {
        memcpy(all + *n, x->devs[d]->events, (size_t)x->devs[d]->nevents * sizeof *all);
        *n += x->devs[d]->nevents;
    }
    x->nevents = 0; /* the devices keep theirs: merged again at the next call */
    return all;
}

/* Runs x's nodes (all of them, or its device's), then its updates. */
static int run_nodes(rt_exec *x, char *err, size_t errlen)
{
    if (x->nhwc)
        memset(x->nhwc, 0, (size_t)x->nvalues);
    for (int k = 0; k < x->nnodes; k++) {
        const ir_node *n = x->nodes[k];
        if (x->weights_ready && x->weight[n->out[0]->id])
            continue; /* computed from the weights at an earlier run */
        double t0 = x->profile ? base_now_ms() : 0;
        epilogue e;
        int nm = fused_conv(n, &e);
        /* a convolution reads a channels-last input where oneDNN runs it
           (k_conv2d turns it back otherwise); every other kernel, NCHW */
        for (int i = 0; x->nhwc && n->op != IR_OP_CONV2D && i < n->nin; i++)
            if (rt_exec_nchw(x, n->in[i]))
                return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
        if (nm ? k_conv2d(x, n, &e, err, errlen) : run_node(x, n, err, errlen))
            return -1;
        if (x->profile) {
            double t1 = base_now_ms();
            record(x, n, nm ? e.m[nm - 1] : n, t0, t1);
            x->op_ms[n->op] += t1 - t0;
            x->op_calls[n->op]++;
            for (int i = 0; i < nm; i++)
                x->op_calls[e.m[i]->op]++;
        }
        k += nm; /* the members ran with it (consecutive in the list, so in x's nodes) */
    }
    x->weights_ready = 1;
    /* a training step writes its new weights, statistics and state back */
    for (int i = 0; i < x->g->nupdates; i++) {
        const ir_update *u = &x->g->updates[i];
        if (x->device >= 0 && u->device != x->device)
            continue;
        memcpy(data(x, u->target), data(x, u->source),
               (size_t)NUMEL(u->target) * ir_host_size(u->target->type.dtype));
    }
    return 0;
}

int rt_exec_run(rt_exec *x, char *err, size_t errlen)
{
#ifdef GNC_HAVE_MPI
    if (x->mpi) { /* one device of an MPI job: its sends complete within the step */
        char e[512];
        if (run_nodes(x, e, sizeof e) != 0 || rt_mpi_finish(x, e, sizeof e) != 0)
            return fail(err, errlen, "device %d: %s", x->device, e);
        return 0;
    }
#endif
    if (!x->ndev)
        return run_nodes(x, err, errlen);
    /* one thread per device; a device's kernels run on its thread alone (the
       inner parallel regions are nested, so inactive) */
    rt_comm_reset(x->comm);
    int rc = 0, team = 0;
    char *errs = base_calloc((size_t)x->ndev, 512);
    if (!errs)
        return fail(err, errlen, "out of memory");
#pragma omp parallel num_threads(x->ndev) reduction(+ : rc)
    {
#pragma omp single
        team = omp_get_num_threads();
        if (team == x->ndev) {
            int d = omp_get_thread_num();
            if (run_nodes(x->devs[d], errs + 512 * d, 512) != 0) {
                rc++;
                rt_comm_abort(x->comm);
            }
        }
    }
    if (team != x->ndev) {
        base_free(errs);
        return fail(err, errlen, "could not start a thread for each of the %d devices (got %d)",
                    x->ndev, team);
    }
    for (int d = 0; d < x->ndev && rc; d++) /* the first failure that is not a peer's */
        if (errs[512 * d] && !strstr(errs + 512 * d, "another device failed")) {
            fail(err, errlen, "device %d: %s", d, errs + 512 * d);
            break;
        }
    base_free(errs);
    return rc ? -1 : 0;
}

void rt_exec_set_profile(rt_exec *x, int on)
{
    x->profile = on;
    for (int d = 0; d < x->ndev; d++)
        x->devs[d]->profile = on;
}

void rt_exec_set_timeout(rt_exec *x, double seconds)
{
    x->timeout_s = seconds;
    for (int d = 0; d < x->ndev; d++)
        x->devs[d]->timeout_s = seconds;
}

void rt_exec_print_profile(const rt_exec *x, FILE *f)
{
    /* a partitioned program: its devices' times added up */
    double total = 0, ms[IR_NOPS];
    long calls[IR_NOPS];
    int order[IR_NOPS], n = 0;
    for (int op = 0; op < IR_NOPS; op++) {
        ms[op] = x->op_ms[op], calls[op] = x->op_calls[op];
        for (int d = 0; d < x->ndev; d++)
            ms[op] += x->devs[d]->op_ms[op], calls[op] += x->devs[d]->op_calls[op];
    }
    for (int op = 0; op < IR_NOPS; op++)
        if (calls[op]) {
            total += ms[op];
            int k = n++;
            for (; k > 0 && ms[order[k - 1]] < ms[op]; k--)
                order[k] = order[k - 1];
            order[k] = op;
        }
    fprintf(f, "%-20s %10s %8s %6s\n", "op", "ms", "calls", "share");
    for (int i = 0; i < n; i++)
        fprintf(f, "%-20s %10.1f %8ld %5.1f%%\n", ir_ops[order[i]].name, ms[order[i]],
                calls[order[i]], total > 0 ? 100 * ms[order[i]] / total : 0);
    fprintf(f, "%-20s %10.1f%s\n", "total", total, x->ndev ? " (all devices)" : "");
    /* which path the convolutions took (conv2d, and in training
       conv2d_grad_input and conv2d_grad_weight) */
    long wino = x->wino_convs, direct = x->direct_convs, dnnl = x->dnnl_convs;
    long blas = x->blas_convs, posts = x->dnnl_posts, refused = x->dnnl_refused;
    long nhwc = x->dnnl_nhwc, dnnl_gemms = x->dnnl_gemms, blas_gemms = x->blas_gemms;
    for (int d = 0; d < x->ndev; d++) {
        wino += x->devs[d]->wino_convs, direct += x->devs[d]->direct_convs;
        dnnl += x->devs[d]->dnnl_convs, blas += x->devs[d]->blas_convs;
        posts += x->devs[d]->dnnl_posts, refused += x->devs[d]->dnnl_refused;
        nhwc += x->devs[d]->dnnl_nhwc;
        dnnl_gemms += x->devs[d]->dnnl_gemms, blas_gemms += x->devs[d]->blas_gemms;
    }
    /* which path dense layers' and matmuls' GEMMs took */
    if (dnnl_gemms || blas_gemms) {
        fputs("GEMMs: ", f);
        if (dnnl_gemms)
            fprintf(f, "oneDNN (%ld calls)%s", dnnl_gemms, blas_gemms ? ", " : "");
        if (blas_gemms)
            fprintf(f, "OpenBLAS (%ld calls)", blas_gemms);
        fputc('\n', f);
    }
    if (!wino && !direct && !dnnl && !blas)
        return;
    const char *sep = "convolutions: ";
    if (wino)
        fprintf(f, "%sWinograd (%ld calls)", sep, wino), sep = ", ";
    if (direct)
        fprintf(f, "%sdirect (%ld calls)", sep, direct), sep = ", ";
    if (dnnl) { /* with the fused ops that ran inside oneDNN's calls */
        fprintf(f, "%soneDNN (%ld calls", sep, dnnl), sep = ", ";
        if (posts)
            fprintf(f, ", %ld fused ops as post-ops", posts);
        if (refused) /* chains whose trial run's bits differed from the epilogue's */
            fprintf(f, ", %ld chains of post-ops refused", refused);
        if (nhwc) /* results the next convolution read as they were */
            fprintf(f, ", %ld results left channels-last", nhwc);
        fputc(')', f);
    }
    if (blas)
        fprintf(f, "%sOpenBLAS (%ld calls)", sep, blas);
    fputc('\n', f);
}

void rt_set_threads(int n)
{
    if (n <= 0)
        n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

const char *rt_cpu_kernels(char *buf, size_t len)
{
    /* openblas_get_config: "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...",
       whose second word is the version */
    const char *config = openblas_get_config(), *core = openblas_get_corename();
    const char *version = strchr(config, ' ') ? strchr(config, ' ') + 1 : "";
    const char *isa = rt_dnnl_isa();
    int gemms = rt_dnnl_enabled() && strncmp(isa, "avx512", 6) == 0; /* rt_dnnl_gemm's */
    int at = snprintf(buf, len, "OpenBLAS %.*s (its %s kernels%s): matrix products%s%s",
                      (int)strcspn(version, " "), version, core ? core : "?",
                      getenv("OPENBLAS_CORETYPE") ? ", as OPENBLAS_CORETYPE sets" : "",
                      gemms ? " oneDNN leaves (weight gradients, small ones)" : "",
                      *isa ? ", few channels' convolutions in training" : ", convolutions");
    if (*isa && at >= 0 && (size_t)at < len)
        snprintf(buf + at, len - (size_t)at, "; oneDNN %s (its %s kernels): convolutions%s",
                 rt_dnnl_version(), isa,
                 !rt_dnnl_enabled() ? ", turned off by GNC_DNNL=0"
                 : gemms            ? ", dense layers' and matmuls' products"
                                    : "");
    return buf;
}
