/* The op table and each op's shape and dtype rule.
 *
 * ir_infer() is the single source of truth for typing: the frontend calls it to
 * type the nodes it builds (and turns its message into a located diagnostic), the
 * verifier calls it to check every node, and passes call it for nodes they make. */
#include "base.h"
#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ir_op_info ir_ops[IR_NOPS] = {
#define OP(e, name, nmin, nmax, nout, attrs, traits) \
    [IR_OP_##e] = {name, nmin, nmax, nout, attrs, traits},
#include "ops.def"
#undef OP
};

/* ops.def's UNARY table: each op's gradient rule, and how many attributes
 * its arithmetic and its gradient's take (+1: 0 where ir/arith.h has none) */
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#define RULE_X(op) [IR_OP_##op] = {1, {IR_OP_##op##_GRAD, 0}},
#define RULE_Y(op) [IR_OP_##op] = {1, {IR_OP_##op##_GRAD, 1}},
#define RULE_NONE(op)
#define ARITY_X(op, n) [IR_OP_##op##_GRAD] = n + 1,
#define ARITY_Y ARITY_X
#define ARITY_NONE(op, n)
static const struct {
    int has;
    ir_grad_rule rule;
} grad_rules[IR_NOPS] = {
#define UNARY(op, name, n, from) RULE_##from(op)
#include "ops.def"
#undef UNARY
};

static const signed char arith_arity[IR_NOPS] = {
#define UNARY(op, name, n, from) [IR_OP_##op] = n + 1, ARITY_##from(op, n)
#include "ops.def"
#undef UNARY
};
#undef OP

const ir_grad_rule *ir_grad_rule_of(ir_op op)
{
    return grad_rules[op].has ? &grad_rules[op].rule : NULL;
}

int ir_arith_attrs(ir_op op)
{
    return (unsigned)op < IR_NOPS ? arith_arity[op] - 1 : -1;
}

int ir_float_attrs(const ir_node *n, double *v, int max)
{
    const char *s = ir_ops[n->op].attrs;
    int k = 0;
    for (; k < max && *s; k++) {
        size_t len = strcspn(s, ":");
        if (strncmp(s + len, ":float", 6) != 0)
            break;
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key ? len : sizeof key - 1), s);
        v[k] = ir_attr_float(n, key);
        s += strcspn(s, ",");
        s += *s == ',';
    }
    for (int i = k; i < max; i++)
        v[i] = 0;
    return k;
}

static const struct {
    const char *name;
    int since;
} onnx_ops[IR_NOPS] = {
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#define ONNX(op, name, since) [IR_OP_##op] = {name, since},
#include "ops.def"
#undef ONNX
#undef OP
};

const char *ir_onnx_name(ir_op op)
{
    return (unsigned)op < IR_NOPS ? onnx_ops[op].name : NULL;
}

int ir_onnx_since(ir_op op)
{
    return (unsigned)op < IR_NOPS && onnx_ops[op].name ? onnx_ops[op].since : -1;
}

int ir_op_of_onnx(const char *name)
{
    for (int i = 0; name && i < IR_NOPS; i++)
        if (onnx_ops[i].name && strcmp(onnx_ops[i].name, name) == 0)
            return i;
    return -1;
}

int ir_op_lookup(const char *name)
{
    for (int i = 0; i < IR_NOPS; i++)
        if (strcmp(ir_ops[i].name, name) == 0)
            return i;
    return -1;
}

/* Type strings for messages: up to four live at once, each in its own buffer. */
static const char *type_str(char (*bufs)[128], int *next, const ir_type *t)
{
    return ir_type_str(t, bufs[(*next)++ & 3], 128);
}
#define TS(t) type_str(tbuf, &tb, (t))
#define FAIL(...) return (base_fail(err, errlen, __VA_ARGS__), 0) /* the rules return 0: no type */

/* NumPy broadcasting of a and b into out; 0 if the shapes do not broadcast. */
static int broadcast(const ir_type *a, const ir_type *b, ir_type *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    out->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        out->dims[i] = da == 1 ? db : da;
    }
    return 1;
}

/* Output size of a sliding window, or -1 when the window does not fit (or its
 * arithmetic would overflow: attributes come from the user).  With ceil, the
 * size rounds up as PyTorch's ceil_mode does, less a last window that would
 * start in the right padding (then it need not fit whole). */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil)
{
    int64_t span, padded, room;
    if (s < 1 || __builtin_mul_overflow(d, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(p, 2, &padded) || __builtin_add_overflow(padded, in, &padded) ||
        __builtin_add_overflow(padded - span, ceil ? s - 1 : 0, &room) || room < 0)
        return -1;
    int64_t out = room / s + 1;
    if (ceil && (out - 1) * s >= in + p)
        out--;
    return out;
}

/* conv2d's rule, shared with its gradients: x conv w (+ bias) -> o. */
static int conv_rule(const ir_node *n, const ir_type *a, const ir_type *b, const ir_type *c,
                     ir_type *o, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    if (a->rank != 4 || !ir_is_float(a->dtype))
        FAIL("conv2d expects 4-d input, got %s", TS(a));
    const int64_t *st = ir_attr_ints(n, "stride", NULL), *pd = ir_attr_ints(n, "pad", NULL),
                  *dl = ir_attr_ints(n, "dilation", NULL);
    int64_t groups = ir_attr_int(n, "groups");
    if (groups < 1 || a->dims[1] % groups)
        FAIL("conv2d groups (%lld) must divide the input channels of %s",
             (long long)groups, TS(a));
    if (b->rank != 4 || b->dtype != a->dtype || b->dims[1] != a->dims[1] / groups ||
        b->dims[0] % groups)
        FAIL("conv2d weight must be %s[out, %lld, kh, kw] with out divisible by %lld, "
             "got %s", ir_dtype_name(a->dtype), (long long)(a->dims[1] / groups),
             (long long)groups, TS(b));
    if (c && (c->rank != 1 || c->dims[0] != b->dims[0] || c->dtype != a->dtype))
        FAIL("conv2d bias must be %s[%lld], got %s", ir_dtype_name(a->dtype),
             (long long)b->dims[0], TS(c));
    for (int i = 0; i < 2; i++)
        if (st[i] < 1 || pd[i] < 0 || dl[i] < 1)
            FAIL("conv2d needs stride >= 1, pad >= 0, dilation >= 1");
    int64_t oh = window_out(a->dims[2], b->dims[2], st[0], pd[0], dl[0], 0);
    int64_t ow = window_out(a->dims[3], b->dims[3], st[1], pd[1], dl[1], 0);
    if (oh < 1 || ow < 1)
        FAIL("conv2d kernel %lldx%lld does not fit input %s with padding %lld",
             (long long)b->dims[2], (long long)b->dims[3], TS(a), (long long)pd[0]);
    *o = (ir_type){a->dtype, 4, {a->dims[0], b->dims[0], oh, ow}};
    return 1;
}

/* The pooling rule, shared with the gradients: a pooled -> o. */
/* Whether embedding (or embedding_grad) n's table of num rows fits its whole
 * (shard_start, shard_of: ops.def) and padding_idx a row of the whole. */
static int embedding_rows(const ir_node *n, int64_t num, char *err, size_t errlen)
{
    const char *op = ir_ops[n->op].name;
    int64_t start = ir_attr_int(n, "shard_start"), of = ir_attr_int(n, "shard_of");
    int64_t rows = of ? of : num, pad = ir_attr_int(n, "padding_idx");
    if (of < 0 || (of ? start < 0 || start > of - num : start != 0))
        FAIL("%s shard_start %lld and shard_of %lld do not place a table of %lld rows in the "
             "whole (shard_of 0: the table is whole, and shard_start 0)", op, (long long)start,
             (long long)of, (long long)num);
    if (pad < -1 || pad >= rows)
        FAIL("%s padding_idx %lld is neither -1 nor a row of the %lld", op, (long long)pad,
             (long long)rows);
    return 1;
}

/* attention's (q, k, v -> out, lse) and attention_grad's (dy, q, k, v, out,
 * lse -> dq, dk, dv) types: q[..., hq, l, e], k[..., hkv, s, e], v[..., hkv,
 * s, ev] of one floating-point dtype and one batch shape but for the heads
 * (dim -3), of which k's and v's are one count dividing q's (grouped-query
 * attention). */
static int attention_rule(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    int grad = n->op == IR_OP_ATTENTION_GRAD;
    const ir_type *q = &n->in[grad]->type, *k = &n->in[grad + 1]->type,
                  *v = &n->in[grad + 2]->type;
    int r = q->rank, ok = r >= 2 && k->rank == r && v->rank == r && ir_is_float(q->dtype) &&
                          k->dtype == q->dtype && v->dtype == q->dtype;
    for (int i = 0; ok && i < r - 3; i++)
        ok = k->dims[i] == q->dims[i] && v->dims[i] == q->dims[i];
    if (ok && r >= 3 && (k->dims[r - 3] != v->dims[r - 3] ||
                         (k->dims[r - 3] != q->dims[r - 3] &&
                          (k->dims[r - 3] < 1 || q->dims[r - 3] % k->dims[r - 3] != 0))))
        FAIL("%s: q %s, k %s and v %s do not fit: k and v need one head count (dim -3) "
             "dividing q's (grouped-query attention)", op, TS(q), TS(k), TS(v));
    if (!ok)
        FAIL("%s expects floating-point q[..., l, e], k[..., s, e] and v[..., s, ev] of one "
             "dtype and batch shape (k's and v's heads, dim -3, may divide q's), got %s, %s "
             "and %s", op, TS(q), TS(k), TS(v));
    if (k->dims[r - 1] != q->dims[r - 1] || v->dims[r - 2] != k->dims[r - 2])
        FAIL("%s: q %s, k %s and v %s do not fit: q and k need one feature size, k and v one "
             "length", op, TS(q), TS(k), TS(v));
    if (!(ir_attr_float(n, "scale") > 0) || !isfinite(ir_attr_float(n, "scale")))
        FAIL("%s scale must be positive and finite, got %g", op, ir_attr_float(n, "scale"));
    int64_t causal = ir_attr_int(n, "causal");
    if (causal != 0 && causal != 1)
        FAIL("%s causal must be 0 or 1, got %lld", op, (long long)causal);
    ir_type o = *q, lse = {IR_F32, r - 1, {0}};
    o.dims[r - 1] = v->dims[r - 1];
    memcpy(lse.dims, q->dims, (size_t)(r - 1) * sizeof *lse.dims);
    if (!grad) {
        out[0] = o, out[1] = lse;
        return 1;
    }
    if (!ir_type_eq(&n->in[0]->type, &o) || !ir_type_eq(&n->in[4]->type, &o))
        FAIL("%s: dy %s and out %s must be attention's result %s", op, TS(&n->in[0]->type),
             TS(&n->in[4]->type), TS(&o));
    if (!ir_type_eq(&n->in[5]->type, &lse))
        FAIL("%s: lse %s must be %s", op, TS(&n->in[5]->type), TS(&lse));
    out[0] = *q, out[1] = *k, out[2] = *v;
    return 1;
}

static int pool_rule(const ir_node *n, const ir_type *a, ir_type *o, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    int is_max = n->op == IR_OP_MAXPOOL2D || n->op == IR_OP_MAXPOOL2D_GRAD;
    const char *op = is_max ? "maxpool2d" : "avgpool2d";
        if (a->rank != 4 || !ir_is_float(a->dtype))
            FAIL("%s expects 4-d input, got %s", op, TS(a));
        const int64_t *k = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                      *pd = ir_attr_ints(n, "pad", NULL);
        const int64_t one[2] = {1, 1};
        const int64_t *dl = is_max ? ir_attr_ints(n, "dilation", NULL) : one;
        for (int i = 0; i < 2; i++) {
            if (k[i] < 1 || st[i] < 1 || dl[i] < 1 || pd[i] < 0)
                FAIL("%s needs kernel, stride, dilation >= 1 and pad >= 0", op);
            if (pd[i] > k[i] / 2)
                FAIL("%s pad (%lld) must be at most half the kernel (%lld)", op,
                     (long long)pd[i], (long long)k[i]);
        }
        int64_t ceil = ir_attr_int(n, "ceil_mode");
        if (ceil != 0 && ceil != 1)
            FAIL("%s ceil_mode must be 0 or 1, got %lld", op, (long long)ceil);
        int64_t oh = window_out(a->dims[2], k[0], st[0], pd[0], dl[0], (int)ceil);
        int64_t ow = window_out(a->dims[3], k[1], st[1], pd[1], dl[1], (int)ceil);
        if (oh < 1 || ow < 1)
            FAIL("%s window %lldx%lld does not fit input %s", op, (long long)k[0],
                 (long long)k[1], TS(a));
        *o = (ir_type){a->dtype, 4, {a->dims[0], a->dims[1], oh, ow}};
        return 1;
}

/* adaptive_avgpool2d's rule, shared with its gradient: a pooled to size -> o. */
static int adaptive_rule(const ir_type *a, const int64_t size[2], ir_type *o, char *err,
                         size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    if (a->rank != 4 || !ir_is_float(a->dtype))
        FAIL("adaptive_avgpool2d expects 4-d input, got %s", TS(a));
    for (int i = 0; i < 2; i++) {
        int64_t span;
        if (size[i] < 1 || __builtin_mul_overflow(size[i], a->dims[2 + i] + 1, &span))
            FAIL("adaptive_avgpool2d size must be positive and fit the index range, got "
                 "[%lld, %lld]", (long long)size[0], (long long)size[1]);
    }
    *o = (ir_type){a->dtype, 4, {a->dims[0], a->dims[1], size[0], size[1]}};
    return 1;
}

float ir_upsample_ratio(int64_t in, int64_t out, int bilinear, int align, double scale)
{
    if (bilinear && align)
        return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    return scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
}

void ir_upsample_taps(int64_t dst, int64_t in, int64_t out, int bilinear, int align, float ratio,
                      int64_t *i0, int64_t *i1, float *l0, float *l1)
{
    *l0 = 1.0f;
    *l1 = 0.0f;
    if (out == in) { /* both modes copy, whatever the scale */
        *i0 = *i1 = dst;
        return;
    }
    if (!bilinear) { /* nearest_idx */
        int64_t src = out == 2 * in ? dst >> 1 : (int64_t)floorf((float)dst * ratio);
        *i0 = *i1 = src < in - 1 ? src : in - 1;
        return;
    }
    float real = align ? ratio * (float)dst : ratio * ((float)dst + 0.5f) - 0.5f;
    if (real < 0.0f)
        real = 0.0f;
    int64_t src = (int64_t)floorf(real);
    *i0 = src < in - 1 ? src : in - 1;
    float lam = real - (float)*i0;
    *l1 = lam < 0.0f ? 0.0f : lam > 1.0f ? 1.0f : lam;
    *i1 = *i0 + (*i0 < in - 1);
    *l0 = 1.0f - *l1;
}

/* The first output whose i0 is at least j: i0 never decreases along the axis. */
static int64_t upsample_first(int64_t j, int64_t in, int64_t out, int bilinear, int align,
                              float ratio)
{
    int64_t lo = 0, hi = out;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, i0, i1;
        float l0, l1;
        ir_upsample_taps(mid, in, out, bilinear, align, ratio, &i0, &i1, &l0, &l1);
        if (i0 < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ir_upsample_readers(int64_t j, int64_t in, int64_t out, int bilinear, int align,
                         float ratio, int64_t *first, int64_t *end)
{
    /* i1 is i0 or i0 + 1: the readers of j have i0 j - 1 (bilinear) or j */
    *first = upsample_first(j - (bilinear != 0), in, out, bilinear, align, ratio);
    *end = upsample_first(j + 1, in, out, bilinear, align, ratio);
}

/* upsample2d's rule, shared with its gradient: a resized to size -> o. */
static int upsample_rule(const ir_node *n, const ir_type *a, const int64_t size[2], ir_type *o,
                         char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    if (a->rank != 4 || !ir_is_float(a->dtype))
        FAIL("upsample2d expects 4-d input, got %s", TS(a));
    int64_t mode = ir_attr_int(n, "mode"), align = ir_attr_int(n, "align_corners");
    if (mode != 0 && mode != 1)
        FAIL("upsample2d mode must be 0 (nearest) or 1 (bilinear), got %lld", (long long)mode);
    if (align != 0 && align != mode)
        FAIL("upsample2d align_corners must be 0, or 1 with bilinear, got %lld", (long long)align);
    double sc[2] = {ir_attr_float(n, "scale_h"), ir_attr_float(n, "scale_w")};
    for (int i = 0; i < 2; i++) {
        int64_t span;
        if (!(sc[i] >= 0) || !isfinite(sc[i]))
            FAIL("upsample2d scales must be finite and at least 0, got %g and %g", sc[0], sc[1]);
        if (size[i] < 1 || __builtin_mul_overflow(size[i], 2, &span) || size[i] > 1LL << 53 ||
            a->dims[2 + i] > 1LL << 53)
            FAIL("upsample2d size must be positive and fit the index range, got [%lld, %lld]",
                 (long long)size[0], (long long)size[1]);
    }
    *o = (ir_type){a->dtype, 4, {a->dims[0], a->dims[1], size[0], size[1]}};
    return 1;
}

/* reduce_max, reduce_min and argmax (and their gradients' x): a floating-point
 * a reduced along axis to size 1 -> o (argmax: i32). */
static int extreme_rule(const ir_node *n, const ir_type *a, ir_type *o, char *err,
                        size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    int64_t axis = ir_attr_int(n, "axis");
    if (!ir_is_float(a->dtype) || a->rank < 1)
        FAIL("%s expects a floating-point tensor of rank 1 or more, got %s", op, TS(a));
    if (axis < 0 || axis >= a->rank)
        FAIL("%s axis %lld is out of range for %s", op, (long long)axis, TS(a));
    *o = *a;
    o->dims[axis] = 1;
    if (n->op == IR_OP_ARGMAX)
        o->dtype = IR_I32;
    return 1;
}

/* The type named by a node's shape attribute, of the given dtype. */
static int shape_attr(const ir_node *n, ir_dtype dtype, ir_type *t, char *err, size_t errlen)
{
    int count;
    const int64_t *shape = ir_attr_ints(n, "shape", &count);
    if (count > IR_MAX_RANK)
        FAIL("%s shape has rank %d, above the maximum %d", ir_ops[n->op].name, count,
             IR_MAX_RANK);
    *t = (ir_type){dtype, count, {0}};
    int64_t numel = 1;
    for (int i = 0; i < count; i++) {
        if (shape[i] < 1 || __builtin_mul_overflow(numel, shape[i], &numel) ||
            numel > IR_MAX_NUMEL)
            FAIL("%s shape entries must be positive and their product at most %lld",
                 ir_ops[n->op].name, (long long)IR_MAX_NUMEL);
        t->dims[i] = shape[i];
    }
    return 1;
}

/* Whether b broadcasts to a (NumPy rules, b being the smaller). */
static int broadcasts_to(const ir_type *b, const ir_type *a)
{
    ir_type o;
    if (b->rank > a->rank || !broadcast(a, b, &o))
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (o.dims[i] != a->dims[i])
            return 0;
    return 1;
}

int64_t ir_index_bound(const ir_graph *g, const ir_value *v)
{
    int64_t bound = 0;
    ir_for_each_node(g, n) {
        for (int k = 0; k < n->nin; k++) {
            if (n->in[k] != v)
                continue;
            int64_t b = 0;
            switch (n->op) {
            case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS: /* logits, label */
                b = k == 1 && n->in[0]->type.rank >= 2 ? n->in[0]->type.dims[1] : 0;
                break;
            case IR_OP_CROSS_ENTROPY_GRAD: case IR_OP_NLL_LOSS_GRAD: /* dloss, logits, label */
                b = k == 2 && n->in[1]->type.rank >= 2 ? n->in[1]->type.dims[1] : 0;
                break;
            case IR_OP_EMBEDDING: /* idx, table (or its rows of the whole) */
                b = k == 0 && n->in[1]->type.rank >= 1
                        ? ir_attr_int(n, "shard_of") ? ir_attr_int(n, "shard_of")
                                                     : n->in[1]->type.dims[0]
                        : 0;
                break;
            case IR_OP_EMBEDDING_GRAD: { /* dy, idx -> dw[shape] */
                const ir_attr *a = ir_get_attr(n, "shape");
                b = k == 1 && a && a->kind == IR_ATTR_INTS && a->n >= 1
                        ? ir_attr_int(n, "shard_of") ? ir_attr_int(n, "shard_of") : a->ints[0]
                        : 0;
                break;
            }
            case IR_OP_RESHAPE: case IR_OP_TRANSPOSE: case IR_OP_SLICE: case IR_OP_CONCAT:
            case IR_OP_BROADCAST_TO: /* the same values, moved */
                b = n->nout == 1 ? ir_index_bound(g, n->out[0]) : 0;
                break;
            default:
                break;
            }
            if (b > 0 && (bound == 0 || b < bound))
                bound = b;
        }
    }
    return bound;
}

int ir_schema_next(const char **s, ir_schema_attr *a)
{
    const char *p = *s;
    if (!*p)
        return 0;
    const char *colon = strchr(p, ':'), *end = strchr(p, ',');
    if (!end)
        end = p + strlen(p);
    const char *eq = memchr(colon, '=', (size_t)(end - colon));
    const char *kind_end = eq ? eq : end;
    snprintf(a->key, sizeof a->key, "%.*s", (int)(colon - p), p);
    snprintf(a->kind, sizeof a->kind, "%.*s", (int)(kind_end - colon - 1), colon + 1);
    snprintf(a->def, sizeof a->def, "%.*s", eq ? (int)(end - eq - 1) : 0, eq ? eq + 1 : "");
    *s = *end ? end + 1 : end;
    return 1;
}

void ir_set_attr_defaults(ir_graph *g, ir_node *n)
{
    const char *s = ir_ops[n->op].attrs;
    ir_schema_attr a;
    while (ir_schema_next(&s, &a)) {
        if (!a.def[0] || ir_get_attr(n, a.key))
            continue;
        if (strcmp(a.kind, "int") == 0)
            ir_set_int(g, n, a.key, strtoll(a.def, NULL, 10));
        else
            ir_set_float(g, n, a.key, strtod(a.def, NULL));
    }
}

/* Checks n's attributes against its op's schema (ops.def): each one present,
 * of its kind and length, and none unknown. */
int ir_check_attrs(const ir_node *n, char *err, size_t errlen)
{
    const char *op = ir_ops[n->op].name;
    const char *s = ir_ops[n->op].attrs;
    ir_schema_attr sa;
    int nschema = 0;
    while (ir_schema_next(&s, &sa)) {
        const char *key = sa.key, *kind = sa.kind;
        nschema++;
        const ir_attr *a = ir_get_attr(n, key);
        if (!a)
            FAIL("%s is missing attribute '%s'", op, key);
        if (strncmp(kind, "ints", 4) == 0) {
            if (a->kind != IR_ATTR_INTS)
                FAIL("%s attribute '%s' must be a list of integers", op, key);
            if (kind[4] && a->n != kind[4] - '0')
                FAIL("%s attribute '%s' must have %c entries, got %d", op, key, kind[4], a->n);
        } else if (strcmp(kind, "int") == 0 && a->kind != IR_ATTR_INT) {
            FAIL("%s attribute '%s' must be an integer", op, key);
        } else if (strcmp(kind, "float") == 0 && a->kind == IR_ATTR_INTS) {
            FAIL("%s attribute '%s' must be a number", op, key);
        }
    }
    for (int i = 0; n->nattrs != nschema && i < n->nattrs; i++) {
        int known = 0;
        s = ir_ops[n->op].attrs;
        while (!known && ir_schema_next(&s, &sa))
            known = strcmp(sa.key, n->attrs[i].key) == 0;
        if (!known)
            FAIL("%s has no attribute '%s'", op, n->attrs[i].key);
    }
    return 1;
}

static int ce_nll(ir_op op) { return op == IR_OP_NLL_LOSS || op == IR_OP_NLL_LOSS_GRAD; }

/* cross_entropy's (nll_loss's) operands, logits (log-probabilities)
 * [n, c, d...] and labels [n, d...], and its attributes. */
static int ce_types(const ir_node *n, const ir_type *a, const ir_type *b, char *err,
                    size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    double eps = ir_get_attr(n, "label_smoothing") ? ir_attr_float(n, "label_smoothing") : 0;
    if (!(eps >= 0 && eps <= 1))
        FAIL("%s label_smoothing %g is not in [0, 1]", ir_ops[n->op].name, eps);
    if (ir_attr_int(n, "split") < 1)
        FAIL("%s split %lld is not 1 or more", ir_ops[n->op].name,
             (long long)ir_attr_int(n, "split"));
    if (a->rank < 2 || !ir_is_float(a->dtype))
        FAIL("%s expects %s [n, classes, ...], got %s", ir_ops[n->op].name,
             ce_nll(n->op) ? "log-probabilities" : "logits", TS(a));
    int ok = b->rank == a->rank - 1 && b->dims[0] == a->dims[0] &&
             (b->dtype == IR_I32 || b->dtype == IR_I64);
    for (int i = 1; ok && i < b->rank; i++)
        ok = b->dims[i] == a->dims[i + 1];
    if (!ok)
        FAIL("%s expects i32 or i64 labels shaped as the %s %s without their class axis 1, "
             "got %s", ir_ops[n->op].name, ce_nll(n->op) ? "input" : "logits", TS(a), TS(b));
    return 1;
}

/* The rules of the layers' gradients (a unary op's as softmax_grad's, dense,
 * convolution, batchnorm): 1 typed, 0 with the reason in err, -1 for another
 * op. */
static int infer_grads(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;
    ir_type t, y;
    switch (ir_op_is(n->op, IR_UNARY_GRAD) ? IR_OP_SOFTMAX_GRAD : n->op) {
    case IR_OP_SOFTMAX_GRAD: case IR_OP_LOG_SOFTMAX_GRAD:
        if (!ir_type_eq(a, b))
            FAIL("%s operands differ: %s and %s", op, TS(a), TS(b));
        if (ir_get_attr(n, "axis") &&
            (ir_attr_int(n, "axis") < 0 || ir_attr_int(n, "axis") >= a->rank))
            FAIL("%s axis %lld is out of range for %s", op, (long long)ir_attr_int(n, "axis"),
                 TS(a));
        out[0] = *a;
        return 1;

    case IR_OP_DENSE_GRAD_INPUT:
        if (b->rank != 2 || b->dtype != a->dtype || a->rank < 1 ||
            a->dims[a->rank - 1] != b->dims[0])
            FAIL("%s: dy %s does not fit weight %s", op, TS(a), TS(b));
        out[0] = *a;
        out[0].dims[a->rank - 1] = b->dims[1];
        return 1;

    case IR_OP_DENSE_GRAD_WEIGHT: {
        int ok = b->rank == a->rank && b->dtype == a->dtype && a->rank >= 1;
        for (int i = 0; ok && i < a->rank - 1; i++)
            ok = a->dims[i] == b->dims[i];
        if (!ok)
            FAIL("%s: dy %s does not fit input %s", op, TS(a), TS(b));
        out[0] = (ir_type){a->dtype, 2, {a->dims[a->rank - 1], b->dims[b->rank - 1]}};
        return 1;
    }

    case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT: {
        if (!shape_attr(n, a->dtype, &t, err, errlen))
            return 0;
        int gi = n->op == IR_OP_CONV2D_GRAD_INPUT;
        if (!conv_rule(n, gi ? &t : b, gi ? b : &t, NULL, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but the convolution gives %s", op, TS(a), TS(&y));
        out[0] = t;
        return 1;
    }

    case IR_OP_BATCHNORM_APPLY: case IR_OP_BATCHNORM_GRAD: {
        int apply = n->op == IR_OP_BATCHNORM_APPLY;
        if ((!apply && !ir_type_eq(a, b)) || a->rank < 2)
            FAIL("%s: dy %s and x %s differ", op, TS(a), TS(b));
        ir_type c = {a->dtype, 1, {a->dims[1]}};
        for (int i = apply ? 1 : 2; i < 5; i++)
            if (!ir_type_eq(&n->in[i]->type, &c))
                FAIL("%s operand %d must be %s, got %s", op, i, TS(&c), TS(&n->in[i]->type));
        out[0] = *a;
        if (!apply)
            out[1] = out[2] = c;
        return 1;
    }

    default:
        return -1;
    }
}

/* The rules of collectives and sends: 1 typed, 0 with the reason in err, -1
 * for another op. */
static int infer_comm(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    switch (ir_op_is(n->op, IR_UNARY_GRAD) ? IR_OP_SOFTMAX_GRAD : n->op) {
    case IR_OP_ALL_REDUCE: case IR_OP_ALL_GATHER: case IR_OP_REDUCE_SCATTER:
    case IR_OP_BROADCAST: {
        int size;
        const int64_t *group = ir_attr_ints(n, "group", &size);
        if (size < 1 || size > IR_MAX_DEVICES)
            FAIL("%s group must list 1 to %d devices", op, IR_MAX_DEVICES);
        for (int i = 0; i < size; i++)
            if (group[i] < 0 || group[i] >= IR_MAX_DEVICES)
                FAIL("%s group entry %lld is not a device", op, (long long)group[i]);
        for (int i = 0; i < n->nin; i++)
            out[i] = n->in[i]->type;
        if (n->op == IR_OP_BROADCAST) {
            int64_t root = ir_attr_int(n, "root");
            if (root < 0 || root >= size)
                FAIL("broadcast root %lld is not a rank of its group of %d", (long long)root,
                     size);
        } else if (n->op != IR_OP_ALL_REDUCE) {
            int64_t axis = ir_attr_int(n, "axis");
            /* a bucket of several operands: every one is cut along axis, and
               the runtimes pack them into one float buffer */
            for (int i = 0; i < n->nin; i++) {
                const ir_type *t = &n->in[i]->type;
                if (axis < 0 || axis >= t->rank)
                    FAIL("%s axis %lld is out of range for operand %d, %s", op, (long long)axis,
                         i, TS(t));
                if (n->nin > 1 && t->dtype != IR_F32)
                    FAIL("%s of several operands takes f32 tensors, operand %d is %s", op, i,
                         TS(t));
                if (n->op == IR_OP_REDUCE_SCATTER && t->dims[axis] % size)
                    FAIL("reduce_scatter: operand %d, %s, does not split in %d along axis %lld",
                         i, TS(t), size, (long long)axis);
                if (n->op == IR_OP_REDUCE_SCATTER)
                    out[i].dims[axis] /= size;
                else if (__builtin_mul_overflow(out[i].dims[axis], (int64_t)size,
                                                &out[i].dims[axis]))
                    FAIL("all_gather result is too large");
            }
        }
        return 1;
    }

    case IR_OP_SEND: case IR_OP_RECV: {
        int64_t peer = ir_attr_int(n, "peer");
        if (peer < 0 || peer >= IR_MAX_DEVICES)
            FAIL("%s peer %lld is not a device", op, (long long)peer);
        if (n->op == IR_OP_SEND) {
            out[0] = (ir_type){IR_I32, 0, {0}};
            return 1;
        }
        return shape_attr(n, IR_F32, &out[0], err, errlen);
    }

    default:
        return -1;
    }
}

/* The rules of the other gradients (layernorm, pooling, embedding, the
 * losses): 1 typed, 0 with the reason in err, -1 for another op. */
static int infer_more_grads(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;
    static const ir_type f32 = {IR_F32, 0, {0}};
    ir_type t, y;
    switch (ir_op_is(n->op, IR_UNARY_GRAD) ? IR_OP_SOFTMAX_GRAD : n->op) {
    case IR_OP_LAYERNORM_GRAD: {
        const ir_type *w = &n->in[2]->type;
        int ok = ir_type_eq(a, b) && w->rank >= 1 && w->rank <= a->rank && w->dtype == a->dtype;
        for (int k = 0; ok && k < w->rank; k++)
            ok = w->dims[k] == a->dims[a->rank - w->rank + k];
        if (!ok)
            FAIL("%s: dy %s, x %s and weight %s do not fit", op, TS(a), TS(b), TS(w));
        out[0] = *a;
        out[1] = out[2] = *w;
        return 1;
    }

    case IR_OP_REDUCE_MAX_GRAD: case IR_OP_REDUCE_MIN_GRAD:
        if (!extreme_rule(n, b, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but reducing %s gives %s", op, TS(a), TS(b), TS(&y));
        out[0] = *b;
        return 1;

    case IR_OP_MAXPOOL2D_GRAD:
        if (!pool_rule(n, b, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but pooling %s gives %s", op, TS(a), TS(b), TS(&y));
        out[0] = *b;
        return 1;

    case IR_OP_AVGPOOL2D_GRAD:
        if (!shape_attr(n, a->dtype, &t, err, errlen) || !pool_rule(n, &t, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but pooling %s gives %s", op, TS(a), TS(&t), TS(&y));
        out[0] = t;
        return 1;

    case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD:
        if (!shape_attr(n, a->dtype, &t, err, errlen))
            return 0;
        if (a->rank != 4)
            FAIL("%s: dy must be 4-d, got %s", op, TS(a));
        if (!adaptive_rule(&t, a->dims + 2, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but pooling %s gives %s", op, TS(a), TS(&t), TS(&y));
        out[0] = t;
        return 1;

    case IR_OP_UPSAMPLE2D_GRAD:
        if (!shape_attr(n, a->dtype, &t, err, errlen))
            return 0;
        if (a->rank != 4)
            FAIL("%s: dy must be 4-d, got %s", op, TS(a));
        if (!upsample_rule(n, &t, a->dims + 2, &y, err, errlen))
            return 0;
        if (!ir_type_eq(&y, a))
            FAIL("%s: dy is %s, but resizing %s gives %s", op, TS(a), TS(&t), TS(&y));
        out[0] = t;
        return 1;

    case IR_OP_EMBEDDING_GRAD: {
        if (!shape_attr(n, a->dtype, &t, err, errlen))
            return 0;
        int ok = (b->dtype == IR_I32 || b->dtype == IR_I64) && a->rank == b->rank + 1 &&
                 a->dims[a->rank - 1] == t.dims[1];
        for (int i = 0; ok && i < b->rank; i++)
            ok = a->dims[i] == b->dims[i];
        if (!ok)
            FAIL("%s: dy %s does not fit indices %s and table %s", op, TS(a), TS(b), TS(&t));
        if (!embedding_rows(n, t.dims[0], err, errlen))
            return 0;
        out[0] = t;
        return 1;
    }

    case IR_OP_CROSS_ENTROPY_GRAD: case IR_OP_NLL_LOSS_GRAD:
        if (!ir_type_eq(a, &f32))
            FAIL("%s expects an f32[] dloss, got %s", op, TS(a));
        if (!ce_types(n, b, &n->in[2]->type, err, errlen))
            return 0;
        out[0] = *b;
        return 1;

    default:
        return -1;
    }
}

/* The rules of the ops autodiff makes (ops.def, "Training"), the others'
 * by kind above. */
static int infer_training(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;
    static const ir_type f32 = {IR_F32, 0, {0}}, i64 = {IR_I64, 0, {0}};
    ir_type t;
    if (a && !ir_is_float(a->dtype) && n->op != IR_OP_CROSS_ENTROPY_GRAD &&
        n->op != IR_OP_NLL_LOSS_GRAD && n->op != IR_OP_SLICE)
        FAIL("%s expects a floating-point first operand, got %s", op, TS(a));

    /* a unary op's gradient (IR_UNARY_GRAD) has softmax_grad's rule, no axis */
    switch (ir_op_is(n->op, IR_UNARY_GRAD) ? IR_OP_SOFTMAX_GRAD : n->op) {
    case IR_OP_BATCHNORM_TRAIN:
        if (a->rank < 2)
            FAIL("%s expects a tensor [n, c, ...], got %s", op, TS(a));
        for (int i = 1; i < 5; i++)
            if (!ir_type_eq(&n->in[i]->type, &(ir_type){a->dtype, 1, {a->dims[1]}}))
                FAIL("%s operand %d must be %s[%lld], got %s", op, i, ir_dtype_name(a->dtype),
                     (long long)a->dims[1], TS(&n->in[i]->type));
        out[0] = *a;
        for (int i = 1; i < 5; i++)
            out[i] = n->in[1]->type;
        return 1;

    case IR_OP_DROPOUT_TRAIN: {
        double p = ir_attr_float(n, "p");
        if (!(p >= 0 && p < 1))
            FAIL("dropout probability must be in [0, 1), got %g", p);
        if (!ir_type_eq(b, &i64) || !ir_type_eq(&n->in[2]->type, &i64))
            FAIL("%s expects i64[] step and seed, got %s and %s", op, TS(b),
                 TS(&n->in[2]->type));
        int ns;
        const int64_t *sh = ir_attr_ints(n, "shard", &ns);
        if (ns != 0 && (ns != 3 || sh[0] < 0 || sh[0] >= a->rank || sh[1] < 0 ||
                        sh[2] > IR_MAX_NUMEL || sh[1] > sh[2] - a->dims[sh[0]]))
            FAIL("%s shard must be [] or [axis, start, full] with the slice [start, start + "
                 "%s along axis) inside [0, full)", op, TS(a));
        out[0] = out[1] = *a;
        return 1;
    }

    case IR_OP_SUM_TO: case IR_OP_BROADCAST_TO:
        if (!shape_attr(n, a->dtype, &t, err, errlen))
            return 0;
        if (n->op == IR_OP_SUM_TO ? !broadcasts_to(&t, a) : !broadcasts_to(a, &t))
            FAIL("%s: %s does not broadcast to %s", op, TS(n->op == IR_OP_SUM_TO ? &t : a),
                 TS(n->op == IR_OP_SUM_TO ? a : &t));
        out[0] = t;
        return 1;

    case IR_OP_SLICE: {
        int64_t axis = ir_attr_int(n, "axis"), start = ir_attr_int(n, "start"),
                size = ir_attr_int(n, "size");
        if (axis < 0 || axis >= a->rank)
            FAIL("slice axis %lld is out of range for %s", (long long)axis, TS(a));
        if (start < 0 || size < 1 || start > a->dims[axis] || size > a->dims[axis] - start)
            FAIL("slice [%lld, +%lld) does not fit %s along axis %lld", (long long)start,
                 (long long)size, TS(a), (long long)axis);
        out[0] = *a;
        out[0].dims[axis] = size;
        return 1;
    }

    case IR_OP_BN_FOLD_SCALE:
        if (a->rank != 1 || !ir_type_eq(a, b))
            FAIL("%s expects two [c] vectors, got %s and %s", op, TS(a), TS(b));
        out[0] = *a;
        return 1;

    case IR_OP_SGD: case IR_OP_ADAM: {
        int adam = n->op == IR_OP_ADAM;
        const ir_type *lr = &n->in[adam ? 4 : 2]->type;
        if (!ir_type_eq(lr, &f32))
            FAIL("%s learning rate must be f32[], got %s", op, TS(lr));
        if (adam && !ir_type_eq(&n->in[5]->type, &i64))
            FAIL("adam step must be i64[], got %s", TS(&n->in[5]->type));
        int same[3] = {1, adam ? 2 : n->nin == 4 ? 3 : 1, adam ? 3 : 1};
        for (int i = 0; i < 3; i++)
            if (!ir_type_eq(&n->in[same[i]]->type, a))
                FAIL("%s operand %d must be %s like the parameter, got %s", op, same[i], TS(a),
                     TS(&n->in[same[i]]->type));
        for (int i = 0; i < n->nout; i++)
            out[i] = *a;
        return 1;
    }

    default:
    {
        int r = infer_grads(n, out, err, errlen);
        r = r < 0 ? infer_comm(n, out, err, errlen) : r;
        r = r < 0 ? infer_more_grads(n, out, err, errlen) : r;
        if (r >= 0)
            return r;
        break;
    }
    }
    FAIL("unknown op");
}

/* The rules of the layers (matmul, dense, convolution, normalizations,
 * softmax, pooling): 1 typed, 0 with the reason in err, -1 for another op. */
static int infer_layers(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    ir_type *o = &out[0];
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;
    switch (n->op) {
    case IR_OP_MATMUL: {
        if (a->dtype != b->dtype || !ir_is_float(a->dtype))
            FAIL("matmul expects two floating-point tensors of one dtype, got %s and %s",
                 TS(a), TS(b));
        if (a->rank < 2 || b->rank < 2)
            FAIL("matmul expects tensors of rank 2 or more, got %s and %s", TS(a), TS(b));
        if (a->dims[a->rank - 1] != b->dims[b->rank - 2])
            FAIL("matmul inner dimensions differ: %s and %s", TS(a), TS(b));
        ir_type ba = *a, bb = *b;
        ba.rank -= 2;
        bb.rank -= 2;
        if (!broadcast(&ba, &bb, o))
            FAIL("matmul batch dimensions do not broadcast: %s and %s", TS(a), TS(b));
        o->dtype = a->dtype;
        o->dims[o->rank] = a->dims[a->rank - 2];
        o->dims[o->rank + 1] = b->dims[b->rank - 1];
        o->rank += 2;
        return 1;
    }

    case IR_OP_DENSE:
        if (!ir_is_float(a->dtype) || a->rank < 1)
            FAIL("dense expects a floating-point tensor of rank 1 or more, got %s", TS(a));
        if (b->rank != 2 || b->dtype != a->dtype)
            FAIL("dense weight must be %s[out, in], got %s", ir_dtype_name(a->dtype), TS(b));
        if (b->dims[1] != a->dims[a->rank - 1])
            FAIL("dense weight %s does not fit input %s: %lld input features",
                 TS(b), TS(a), (long long)a->dims[a->rank - 1]);
        if (n->nin == 3) {
            const ir_type *c = &n->in[2]->type;
            if (c->rank != 1 || c->dims[0] != b->dims[0] || c->dtype != a->dtype)
                FAIL("dense bias must be %s[%lld], got %s", ir_dtype_name(a->dtype),
                     (long long)b->dims[0], TS(c));
        }
        *o = *a;
        o->dims[o->rank - 1] = b->dims[0];
        return 1;

    case IR_OP_CONV2D:
        return conv_rule(n, a, b, n->nin == 3 ? &n->in[2]->type : NULL, o, err, errlen);

    case IR_OP_BATCHNORM:
        if (a->rank < 2 || !ir_is_float(a->dtype))
            FAIL("batchnorm expects a floating-point tensor [n, c, ...], got %s", TS(a));
        for (int i = 1; i < 5; i++) {
            const ir_type *t = &n->in[i]->type;
            if (t->rank != 1 || t->dims[0] != a->dims[1] || t->dtype != a->dtype)
                FAIL("batchnorm operand %d must be %s[%lld], got %s", i,
                     ir_dtype_name(a->dtype), (long long)a->dims[1], TS(t));
        }
        *o = *a;
        return 1;

    case IR_OP_ATTENTION: case IR_OP_ATTENTION_GRAD:
        return attention_rule(n, out, err, errlen);

    case IR_OP_LAYERNORM: {
        if (!ir_is_float(a->dtype))
            FAIL("layernorm expects a floating-point tensor, got %s", TS(a));
        for (int i = 1; i < 3; i++) {
            const ir_type *t = &n->in[i]->type;
            int ok = t->rank >= 1 && t->rank <= a->rank && t->dtype == a->dtype;
            for (int k = 0; ok && k < t->rank; k++)
                ok = t->dims[k] == a->dims[a->rank - t->rank + k];
            if (!ok)
                FAIL("layernorm weight and bias must match the trailing dimensions of %s, "
                     "got %s", TS(a), TS(t));
        }
        if (!ir_type_eq(&n->in[1]->type, &n->in[2]->type))
            FAIL("layernorm weight and bias differ: %s and %s", TS(&n->in[1]->type),
                 TS(&n->in[2]->type));
        *o = *a;
        return 1;
    }

    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: {
        int64_t axis = ir_attr_int(n, "axis");
        if (!ir_is_float(a->dtype) || a->rank < 1)
            FAIL("%s expects a floating-point tensor, got %s", op, TS(a));
        if (axis < 0 || axis >= a->rank)
            FAIL("%s axis %lld is out of range for %s", op, (long long)axis, TS(a));
        *o = *a;
        return 1;
    }

    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX:
        return extreme_rule(n, a, o, err, errlen);

    case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D:
        return pool_rule(n, a, o, err, errlen);

    case IR_OP_ADAPTIVE_AVGPOOL2D:
        return adaptive_rule(a, ir_attr_ints(n, "size", NULL), o, err, errlen);

    case IR_OP_UPSAMPLE2D:
        return upsample_rule(n, a, ir_attr_ints(n, "size", NULL), o, err, errlen);

    case IR_OP_GLOBAL_AVGPOOL:
        if (a->rank != 4 || !ir_is_float(a->dtype))
            FAIL("global_avgpool expects 4-d input, got %s", TS(a));
        *o = (ir_type){a->dtype, 4, {a->dims[0], a->dims[1], 1, 1}};
        return 1;

    default:
        return -1;
    }
}

/* The rules of the ops that move data (reshape, transpose, concat, pad,
 * embedding): 1 typed, 0 with the reason in err, -1 for another op. */
static int infer_shapes(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    ir_type *o = &out[0];
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;
    switch (n->op) {
    case IR_OP_RESHAPE: {
        int count;
        const int64_t *shape = ir_attr_ints(n, "shape", &count);
        if (count > IR_MAX_RANK)
            FAIL("reshape to rank %d exceeds the maximum rank %d", count, IR_MAX_RANK);
        ir_type t = {a->dtype, count, {0}};
        for (int i = 0; i < count; i++) {
            if (shape[i] < 1)
                FAIL("reshape dimensions must be positive, got %lld", (long long)shape[i]);
            t.dims[i] = shape[i];
        }
        int64_t numel = 1;
        for (int i = 0; i < count; i++)
            if (__builtin_mul_overflow(numel, shape[i], &numel))
                FAIL("reshape of %s to %d dimensions overflows", TS(a), count);
        if (numel != ir_type_numel(a))
            FAIL("reshape of %s to %s changes the element count", TS(a), TS(&t));
        *o = t;
        return 1;
    }

    case IR_OP_TRANSPOSE: {
        int count;
        const int64_t *perm = ir_attr_ints(n, "perm", &count);
        int seen[IR_MAX_RANK] = {0};
        if (count != a->rank)
            FAIL("transpose permutation has %d entries for %s", count, TS(a));
        *o = *a;
        for (int i = 0; i < count; i++) {
            if (perm[i] < 0 || perm[i] >= count || seen[perm[i]]++)
                FAIL("transpose needs a permutation of 0..%d", count - 1);
            o->dims[i] = a->dims[perm[i]];
        }
        return 1;
    }

    case IR_OP_CONCAT: {
        int64_t axis = ir_attr_int(n, "axis");
        if (axis < 0 || axis >= a->rank)
            FAIL("concat axis %lld is out of range for %s", (long long)axis, TS(a));
        *o = *a;
        for (int i = 1; i < n->nin; i++) {
            const ir_type *t = &n->in[i]->type;
            int ok = t->rank == a->rank && t->dtype == a->dtype;
            for (int k = 0; ok && k < a->rank; k++)
                ok = k == axis || t->dims[k] == a->dims[k];
            if (!ok)
                FAIL("concat operand %d is %s, which does not fit %s along axis %lld", i,
                     TS(t), TS(a), (long long)axis);
            o->dims[axis] += t->dims[axis];
        }
        return 1;
    }

    case IR_OP_PAD: {
        int nb, na;
        const int64_t *before = ir_attr_ints(n, "before", &nb), *after = ir_attr_ints(n, "after", &na);
        if (nb != a->rank || na != a->rank)
            FAIL("pad needs before and after widths for each of the %d dimensions of %s, got "
                 "%d and %d", a->rank, TS(a), nb, na);
        *o = *a;
        for (int i = 0; i < a->rank; i++) {
            if (before[i] < 0 || after[i] < 0 || before[i] > IR_MAX_NUMEL ||
                after[i] > IR_MAX_NUMEL)
                FAIL("pad widths must be 0 or more (a slice crops), got %lld and %lld at "
                     "dimension %d", (long long)before[i], (long long)after[i], i);
            o->dims[i] += before[i] + after[i];
        }
        double v = ir_attr_float(n, "value");
        if (!ir_is_float(a->dtype) && (v != floor(v) || fabs(v) > 9007199254740992.0))
            FAIL("pad of %s needs a whole value, got %g", TS(a), v);
        return 1;
    }

    case IR_OP_EMBEDDING:
        if (a->dtype != IR_I32 && a->dtype != IR_I64)
            FAIL("embedding indices must be i32 or i64, got %s", TS(a));
        if (b->rank != 2 || !ir_is_float(b->dtype))
            FAIL("embedding table must be a floating-point [num, dim], got %s", TS(b));
        if (a->rank + 1 > IR_MAX_RANK)
            FAIL("embedding output would exceed the maximum rank");
        if (!embedding_rows(n, b->dims[0], err, errlen))
            return 0;
        *o = *a;
        o->dtype = b->dtype;
        o->dims[o->rank++] = b->dims[1];
        return 1;

    default:
        return -1;
    }
}

int ir_infer(const ir_node *n, ir_type *out, char *err, size_t errlen)
{
    char tbuf[4][128];
    int tb = 0;
    const char *op = ir_ops[n->op].name;
    ir_type *o = &out[0];
    const ir_type *a = n->nin > 0 ? &n->in[0]->type : NULL;
    const ir_type *b = n->nin > 1 ? &n->in[1]->type : NULL;

    if (n->nin < ir_ops[n->op].nin_min || n->nin > ir_ops[n->op].nin_max)
        FAIL("%s takes %d to %d operands, got %d", op, ir_ops[n->op].nin_min,
             ir_ops[n->op].nin_max, n->nin);
    int nout = n->op == IR_OP_SGD ? n->nin - 2
             : n->op == IR_OP_ALL_REDUCE || n->op == IR_OP_REDUCE_SCATTER ||
               n->op == IR_OP_ALL_GATHER ? n->nin
             : ir_ops[n->op].nout;
    if (n->nout != nout)
    {
        if (nout == 1)
            FAIL("%s has one result, got %d", op, n->nout);
        FAIL("%s has %d results, got %d", op, nout, n->nout);
    }
    if (!ir_check_attrs(n, err, errlen))
        return 0;

    if (ir_op_is(n->op, IR_UNARY)) {
        if (!ir_is_float(a->dtype))
            FAIL("%s expects a floating-point tensor, got %s", op, TS(a));
        *o = *a;
        if (n->op == IR_OP_DROPOUT) {
            double p = ir_attr_float(n, "p");
            if (!(p >= 0 && p < 1))
                FAIL("dropout probability must be in [0, 1), got %g", p);
        }
        return 1;
    }
    if (ir_op_is(n->op, IR_BINARY)) {
        /* no executor has integer arithmetic: refused here, where the node
           has its place in the source */
        if (!ir_is_float(a->dtype))
            FAIL("%s takes floating-point tensors, got %s: gnc has no integer arithmetic",
                 op, TS(a));
        if (a->dtype != b->dtype)
            FAIL("%s operands differ in dtype: %s and %s", op, TS(a), TS(b));
        if (!broadcast(a, b, o))
            FAIL("%s operands do not broadcast: %s and %s", op, TS(a), TS(b));
        o->dtype = a->dtype;
        return 1;
    }

    switch (n->op) {
    case IR_OP_CONST:
        /* the declared type stands: a const is typed by whoever makes it */
        if (!ir_is_float(n->out[0]->type.dtype))
            FAIL("const takes a floating-point type, got %s: gnc has no integer arithmetic",
                 TS(&n->out[0]->type));
        *o = n->out[0]->type;
        return 1;

    case IR_OP_ARANGE: {
        /* the declared type stands, as a const's */
        const ir_type *t = &n->out[0]->type;
        double start = ir_attr_float(n, "start"), step = ir_attr_float(n, "step");
        if (t->rank != 1)
            FAIL("arange makes a tensor of rank 1, not %s", TS(t));
        if (!ir_is_float(t->dtype) && (start != floor(start) || step != floor(step) ||
                                      fabs(start) > 9007199254740992.0 ||
                                      fabs(step) > 9007199254740992.0))
            FAIL("arange of %s needs a whole start and step, got %g and %g", TS(t), start, step);
        *o = *t;
        return 1;
    }

    case IR_OP_CAST: /* the declared dtype, a's shape */
        *o = *a;
        o->dtype = n->out[0]->type.dtype;
        return 1;

    case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS:
        if (!ce_types(n, a, b, err, errlen))
            return 0;
        *o = (ir_type){IR_F32, 0, {0}};
        return 1;

    case IR_OP_WHERE: { /* cond, then the two to choose from: the three broadcast */
        const ir_type *c = &n->in[2]->type;
        ir_type bc = *b;
        if (!ir_is_float(a->dtype))
            FAIL("where takes a floating-point mask as its condition, got %s: gnc has no bool "
                 "(comparisons give 0 and 1)", TS(a));
        if (!ir_is_float(b->dtype) || b->dtype != c->dtype)
            FAIL("where chooses between two floating-point tensors of one dtype, got %s and %s",
                 TS(b), TS(c));
        if (!broadcast(b, c, &bc) || !broadcast(a, &bc, o))
            FAIL("where operands do not broadcast: %s, %s and %s", TS(a), TS(b), TS(c));
        o->dtype = b->dtype;
        return 1;
    }

    case IR_OP_MSE:
        if (!ir_is_float(a->dtype) || !ir_type_eq(a, b))
            FAIL("mse expects two floating-point tensors of one type, got %s and %s",
                 TS(a), TS(b));
        *o = (ir_type){IR_F32, 0, {0}};
        return 1;

    default: { /* the rest, by kind */
        int r = infer_layers(n, out, err, errlen);
        r = r < 0 ? infer_shapes(n, out, err, errlen) : r;
        return r < 0 ? infer_training(n, out, err, errlen) : r;
    }
    }
}
