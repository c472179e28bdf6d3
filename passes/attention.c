/* Attention: the unfused pattern of scaled dot-product attention becomes one
 * attention node (ir/ops.def), whose kernels never hold the [l, s] scores.
 *
 * Expects: a verified graph; the driver runs it on every model right after
 * the frontend (DSL or ONNX import), before autodiff, which then
 * differentiates the fused node.  Recognizes
 *
 *   y = matmul(softmax(S, the last axis), v)
 *   S = matmul(q, kT), then any of: times or divided by a positive constant
 *       number (the scale); at most once a causal mask, either
 *         where(M, S, fill) or where(M', fill, S)   M constant, nonzero exactly
 *                                                   where j <= i (M': j > i)
 *         S + A                                     A constant: 0 where j <= i
 *                                                   and masked above
 *       where masked means <= -1e9 (or -inf) once the scales after the mask
 *       are applied, so that softmax gives it exactly 0 weight, and a mask
 *       is [l, s] in its last two axes, broadcast (or equal) elsewhere;
 *   q, kT may carry scales of their own (q * c, kT * c, as PyTorch's ONNX
 *       export of scaled_dot_product_attention writes sqrt(scale) on both);
 *   kT is transpose(x, p) (then k = transpose(x, p composed with the swap of
 *       the last two axes), or x itself where that is the identity), or any
 *       value (then k = a transpose of it).
 *
 * Steps: count the uses of every value; for each softmax, match the pattern
 * backward from it, every intermediate (the scores, the scaled and masked
 * scores, the probabilities) read by nothing but the next step (no output,
 * loss or update); prove each mask and constant by evaluating its constant
 * subgraph (const, arange, reshape, transpose, slice, broadcast, cast,
 * comparisons, where, arithmetic; an imported model's initializers, which
 * no update writes) in the executor's arithmetic, at most 2^22 elements per
 * tensor; make attention(q, k, v) {causal, scale = the product of the
 * scales}, which takes over y's value (name and uses); then erase what the
 * rewrites left unread (the pattern, the masks' subgraphs) and the
 * parameters only they read.  The scale is written as a user would write
 * the float it rounds to (as_written: 1 / sqrt(e), the DSL's default, or the
 * shortest decimal), which is what the kernels compute with: the same bits.
 *
 * Refused (left as they are): a fill or mask value above -1e9 (-1e4 is not
 * -inf to a softmax), a mask that is not exactly the lower triangle (an upper
 * one, another diagonal), masks or scales that are not constant, a softmax
 * along another axis, a matmul that broadcasts its batch axes, an
 * intermediate read twice or a model output, fused (grouped) nodes, a
 * partitioned program (its model was fused at load).
 *
 * Guarantees: the graph verifies and computes the same outputs up to float
 * rounding (about 1e-6 relative; the masked scores' weights are 0 either
 * way).  Returns the number of attention nodes made. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "passes.h"

#define AT_EVAL_MAX ((int64_t)1 << 22)  /* elements of one evaluated constant */
#define AT_EVAL_DEPTH 64                /* nodes deep a constant subgraph may be */
#define AT_MASKED -1e9                  /* a masked score is at most this */

typedef struct {
    ir_graph *g;
    int *uses;          /* by value id: node operands, outputs (2), loss and updates (2) */
    unsigned char *konst; /* by value id: 0 not yet known, 1 constant, 2 not (is_const) */
    int nuses;
    int budget;         /* nodes one evaluation may still compute (a shared subgraph
                           is computed once per use: this bounds a DAG's blowup) */
} at_ctx;

static void count_uses(at_ctx *c)
{
    base_free(c->uses);
    base_free(c->konst);
    c->nuses = c->g->nvalues + 1;
    c->uses = base_xcalloc((size_t)c->nuses, sizeof *c->uses);
    c->konst = base_xcalloc((size_t)c->nuses, 1);
    ir_for_each_node(c->g, n)
        for (int i = 0; i < n->nin; i++)
            c->uses[n->in[i]->id]++;
    for (int i = 0; i < c->g->noutputs; i++)
        c->uses[c->g->outputs[i].value->id] += 2;
    if (c->g->loss)
        c->uses[c->g->loss->id] += 2;
    for (int i = 0; i < c->g->nupdates; i++)
        c->uses[c->g->updates[i].source->id] += 2;
}

/* Whether v is a node result that one node reads and nothing else does. */
static int single(const at_ctx *c, const ir_value *v)
{
    return v->kind == IR_VALUE_NODE && v->id < c->nuses && c->uses[v->id] == 1 &&
           v->def->group == 0;
}

/* ---- constant subgraphs, evaluated as the executor computes them ---- */

typedef struct {
    ir_type t;
    double *x;          /* numel(t) elements, each as the executor holds it */
} at_tensor;

/* v rounded to what dtype t holds (floats as float32, as the CPU executor
 * keeps every floating-point dtype); 0 where an integer is past 2^53. */
static int held(ir_dtype t, double v, double *out)
{
    if (ir_is_float(t)) {
        *out = (double)(float)v;
        return 1;
    }
    if (!(fabs(v) <= 0x1p53))
        return 0;
    int64_t i = (int64_t)v;
    *out = t == IR_I32 ? (double)(int32_t)(uint32_t)i : t == IR_U8 ? (double)(uint8_t)i
                                                                     : (double)i;
    return 1;
}

/* The index into x (broadcast to o) of o's element i. */
static int64_t bindex(const ir_type *x, const ir_type *o, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int d = o->rank - 1; d >= 0; d--) {
        int64_t k = i % o->dims[d];
        i /= o->dims[d];
        int xd = d - (o->rank - x->rank);
        if (xd >= 0) {
            if (x->dims[xd] != 1)
                idx += k * stride;
            stride *= x->dims[xd];
        }
    }
    return idx;
}

/* Whether a parameter's values are fixed for the program: an imported
 * model's data (ir_init.data), which no update writes. */
static int fixed_param(const ir_graph *g, const ir_value *v)
{
    if ((v->kind != IR_VALUE_PARAM && v->kind != IR_VALUE_BUFFER) ||
        v->init.kind != IR_INIT_DATA || !v->init.data || v->shard.of)
        return 0;
    for (int i = 0; i < g->nupdates; i++)
        if (g->updates[i].target == v)
            return 0;
    return 1;
}

/* Whether eval_node computes op. */
static int evaluated(ir_op op)
{
    switch (op) {
    case IR_OP_CONST: case IR_OP_ARANGE: case IR_OP_RESHAPE: case IR_OP_BROADCAST_TO:
    case IR_OP_TRANSPOSE: case IR_OP_SLICE: case IR_OP_CAST: case IR_OP_WHERE: case IR_OP_NEG:
    case IR_OP_SQRT: case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV:
    case IR_OP_MAXIMUM: case IR_OP_MINIMUM: case IR_OP_GT: case IR_OP_LT: case IR_OP_GE:
    case IR_OP_LE: case IR_OP_EQ: case IR_OP_NE:
        return 1;
    default:
        return 0;
    }
}

/* Whether a constant subgraph of ops that eval_node computes, at most
 * AT_EVAL_DEPTH deep, computes v (each value's answer kept). */
static int is_const(at_ctx *c, const ir_value *v, int depth)
{
    if (v->id < c->nuses && c->konst[v->id])
        return c->konst[v->id] == 1;
    int yes;
    if (v->kind != IR_VALUE_NODE) {
        yes = fixed_param(c->g, v);
    } else {
        const ir_node *n = v->def;
        yes = depth < AT_EVAL_DEPTH && n->nout == 1 && n->nin <= 3 && !n->group &&
              evaluated(n->op);
        for (int i = 0; i < n->nin && yes; i++)
            yes = is_const(c, n->in[i], depth + 1);
    }
    if (v->id < c->nuses)
        c->konst[v->id] = yes ? 1 : 2;
    return yes;
}

static int eval(at_ctx *c, const ir_value *v, at_tensor *out, int depth);

/* Elementwise ops of floats, in float32 as the executor computes them. */
static double elementwise(ir_op op, double a, double b)
{
    float x = (float)a, y = (float)b;
    switch (op) {
    case IR_OP_NEG: return -x;
    case IR_OP_SQRT: return sqrtf(x);
    case IR_OP_ADD: return x + y;
    case IR_OP_SUB: return x - y;
    case IR_OP_MUL: return x * y;
    case IR_OP_DIV: return x / y;
    case IR_OP_MAXIMUM: return x > y || x != x ? x : y;
    case IR_OP_MINIMUM: return x < y || x != x ? x : y;
    case IR_OP_GT: return x > y;
    case IR_OP_LT: return x < y;
    case IR_OP_GE: return x >= y;
    case IR_OP_LE: return x <= y;
    case IR_OP_EQ: return x == y;
    case IR_OP_NE: return x != y;
    default: IR_ASSERT(0);
    }
    return 0;
}

/* n's result from its evaluated operands a[0 .. nin - 1] into o (o->x of
 * numel(o->t)); 0 where n is not an op evaluated here. */
static int eval_node(const ir_node *n, const at_tensor *a, at_tensor *o)
{
    const ir_type *t = &o->t;
    int64_t len = ir_type_numel(t);
    int c;
    switch (n->op) {
    case IR_OP_CONST:
        for (int64_t i = 0; i < len; i++)
            if (!held(t->dtype, ir_attr_float(n, "value"), &o->x[i]))
                return 0;
        return 1;
    case IR_OP_ARANGE: {
        double start = ir_attr_float(n, "start"), step = ir_attr_float(n, "step");
        for (int64_t i = 0; i < len; i++) {
            double v = start + (double)i * step;
            if (!ir_is_float(t->dtype))
                v = trunc(v);
            if (!held(t->dtype, v, &o->x[i]))
                return 0;
        }
        return 1;
    }
    case IR_OP_RESHAPE:
        memcpy(o->x, a[0].x, (size_t)len * sizeof *o->x);
        return 1;
    case IR_OP_BROADCAST_TO:
        for (int64_t i = 0; i < len; i++)
            o->x[i] = a[0].x[bindex(&a[0].t, t, i)];
        return 1;
    case IR_OP_TRANSPOSE: {
        const int64_t *perm = ir_attr_ints(n, "perm", &c);
        int64_t st[IR_MAX_RANK], s = 1;
        for (int d = a[0].t.rank - 1; d >= 0; d--)
            st[d] = s, s *= a[0].t.dims[d];
        for (int64_t i = 0; i < len; i++) {
            int64_t rem = i, src = 0;
            for (int d = t->rank - 1; d >= 0; d--) {
                src += rem % t->dims[d] * st[perm[d]];
                rem /= t->dims[d];
            }
            o->x[i] = a[0].x[src];
        }
        return 1;
    }
    case IR_OP_SLICE: {
        int axis = (int)ir_attr_int(n, "axis");
        int64_t start = ir_attr_int(n, "start"), inner = 1;
        for (int d = axis + 1; d < t->rank; d++)
            inner *= t->dims[d];
        int64_t size = t->dims[axis], full = a[0].t.dims[axis];
        for (int64_t i = 0; i < len; i++) {
            int64_t outer = i / (inner * size), k = i / inner % size, in = i % inner;
            o->x[i] = a[0].x[(outer * full + start + k) * inner + in];
        }
        return 1;
    }
    case IR_OP_CAST:
        for (int64_t i = 0; i < len; i++) {
            double v = a[0].x[i];
            if (ir_is_float(a[0].t.dtype) && !ir_is_float(t->dtype)) {
                /* toward zero, saturated, NaN 0 (the executor's float_to_int) */
                double lo = t->dtype == IR_I32 ? -2147483648.0 : t->dtype == IR_U8 ? 0 : -0x1p63;
                double hi = t->dtype == IR_I32 ? 2147483647.0 : t->dtype == IR_U8 ? 255 : 0x1p63;
                v = v != v ? 0 : v < lo ? lo : v > hi ? hi : trunc(v);
            }
            if (!held(t->dtype, v, &o->x[i]))
                return 0;
        }
        return 1;
    case IR_OP_WHERE:
        if (!ir_is_float(t->dtype))
            return 0;
        for (int64_t i = 0; i < len; i++)
            o->x[i] = a[0].x[bindex(&a[0].t, t, i)] != 0 ? a[1].x[bindex(&a[1].t, t, i)]
                                                         : a[2].x[bindex(&a[2].t, t, i)];
        return 1;
    case IR_OP_NEG: case IR_OP_SQRT:
        if (!ir_is_float(t->dtype))
            return 0;
        for (int64_t i = 0; i < len; i++)
            o->x[i] = elementwise(n->op, a[0].x[i], 0);
        return 1;
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM: case IR_OP_GT: case IR_OP_LT: case IR_OP_GE: case IR_OP_LE:
    case IR_OP_EQ: case IR_OP_NE:
        if (!ir_is_float(a[0].t.dtype) || !ir_is_float(t->dtype))
            return 0;
        for (int64_t i = 0; i < len; i++)
            o->x[i] = elementwise(n->op, a[0].x[bindex(&a[0].t, t, i)],
                                  a[1].x[bindex(&a[1].t, t, i)]);
        return 1;
    default:
        return 0;
    }
}

/* The values of v where a constant subgraph computes it: 1 with out->x
 * allocated (the caller frees it), 0 where v is not constant, or too large
 * or deep to evaluate here. */
static int eval(at_ctx *c, const ir_value *v, at_tensor *out, int depth)
{
    int64_t len = ir_type_numel(&v->type);
    if (depth == 0)
        c->budget = 1024;
    if (len > AT_EVAL_MAX || !is_const(c, v, 0) || c->budget-- <= 0)
        return 0;
    out->t = v->type;
    if (v->kind != IR_VALUE_NODE) {
        if (!fixed_param(c->g, v))
            return 0;
        out->x = base_xmalloc((size_t)len * sizeof *out->x);
        for (int64_t i = 0; i < len; i++)
            held(v->type.dtype, v->init.data[i], &out->x[i]);
        return 1;
    }
    const ir_node *n = v->def;
    at_tensor a[3] = {{{0}, NULL}, {{0}, NULL}, {{0}, NULL}};
    int ok = 1;
    for (int i = 0; i < n->nin && ok; i++)
        ok = eval(c, n->in[i], &a[i], depth + 1);
    if (ok) {
        out->x = base_xmalloc((size_t)(len ? len : 1) * sizeof *out->x);
        ok = eval_node(n, a, out);
        if (!ok) {
            base_free(out->x);
            out->x = NULL;
        }
    }
    for (int i = 0; i < n->nin; i++)
        base_free(a[i].x);
    return ok;
}

/* The one number that every element of constant v is (at most 2^16 of
 * them): 1 and *x, else 0. */
static int const_number(at_ctx *c, const ir_value *v, double *x)
{
    at_tensor t;
    int64_t len = ir_type_numel(&v->type);
    if (len < 1 || len > ((int64_t)1 << 16) || !eval(c, v, &t, 0))
        return 0;
    int ok = 1;
    for (int64_t i = 1; i < len && ok; i++)
        ok = t.x[i] == t.x[0];
    *x = t.x[0];
    base_free(t.x);
    return ok;
}

/* ---- the pattern ---- */

/* Where n is x * c, c * x or x / c with c a positive finite number that
 * leaves x's type as it is: x, and c (1 / c for a division) into *scale. */
static ir_value *scaled(at_ctx *c, const ir_node *n, double *scale)
{
    if (n->op != IR_OP_MUL && n->op != IR_OP_DIV)
        return NULL;
    for (int k = 1; k >= (n->op == IR_OP_MUL ? 0 : 1); k--) {
        ir_value *x = n->in[1 - k];
        double f;
        if (!ir_type_eq(&x->type, &n->out[0]->type) || !const_number(c, n->in[k], &f) ||
            !(f > 0) || !isfinite(f))
            continue;
        *scale = n->op == IR_OP_MUL ? f : 1 / f;
        return x;
    }
    return NULL;
}

/* v without the scales applied to it (scaled), their product into *scale. */
static ir_value *unscaled(at_ctx *c, ir_value *v, double *scale)
{
    for (int steps = 0; v->kind == IR_VALUE_NODE && steps < 16; steps++) {
        double f;
        ir_value *x = scaled(c, v->def, &f);
        if (!x)
            break;
        *scale *= f;
        v = x;
    }
    return v;
}

/* Whether constant m (broadcast to the scores' type st, [l, s] in its last
 * two axes) is, in every [l, s] slice, what want says of each (i, j): 1
 * where it must be nonzero (where's condition) or 0 (where it must not be);
 * for an additive mask, 0 where j <= i and masked (times after, the scales
 * applied after the mask) above. */
typedef enum { AT_LOWER, AT_UPPER, AT_ADDITIVE } at_mask;

static int mask_is(at_ctx *c, const ir_value *m, const ir_type *st, at_mask kind,
                   double after)
{
    const ir_type *t = &m->type;
    int r = st->rank;
    if (t->rank < 2 || t->rank > r)
        return 0;
    for (int i = 0; i < t->rank; i++) {
        int64_t want = st->dims[r - t->rank + i];
        if (t->dims[i] != want && (t->dims[i] != 1 || i >= t->rank - 2))
            return 0;
    }
    at_tensor v;
    if (!eval(c, m, &v, 0))
        return 0;
    int64_t l = st->dims[r - 2], s = st->dims[r - 1], len = ir_type_numel(t);
    int ok = 1;
    for (int64_t k = 0; k < len && ok; k++) {
        int64_t i = k / s % l, j = k % s;
        double x = v.x[k];
        switch (kind) {
        case AT_LOWER: ok = (x != 0) == (j <= i); break;   /* NaN is true, as where's */
        case AT_UPPER: ok = (x != 0) == (j > i); break;
        case AT_ADDITIVE: ok = j <= i ? x == 0 : x * after <= AT_MASKED; break;
        }
    }
    base_free(v.x);
    return ok;
}

/* Whether every element of constant v, times after, is masked. */
static int all_masked(at_ctx *c, const ir_value *v, double after)
{
    at_tensor t;
    if (!eval(c, v, &t, 0))
        return 0;
    int ok = 1;
    for (int64_t i = 0, len = ir_type_numel(&t.t); i < len && ok; i++)
        ok = t.x[i] * after <= AT_MASKED;
    base_free(t.x);
    return ok;
}

/* Where n applies a causal mask to scores x (its result x's type): x. */
static ir_value *masked(at_ctx *c, const ir_node *n, double after)
{
    const ir_type *t = &n->out[0]->type;
    if (n->op == IR_OP_WHERE) {
        for (int k = 1; k <= 2; k++) {
            ir_value *x = n->in[k], *fill = n->in[3 - k];
            if (ir_type_eq(&x->type, t) && all_masked(c, fill, after) &&
                mask_is(c, n->in[0], t, k == 1 ? AT_LOWER : AT_UPPER, after))
                return x;
        }
    } else if (n->op == IR_OP_ADD) {
        for (int k = 0; k < 2; k++) {
            ir_value *x = n->in[k];
            if (ir_type_eq(&x->type, t) && mask_is(c, n->in[1 - k], t, AT_ADDITIVE, after))
                return x;
        }
    }
    return NULL;
}

/* Whether q, k, v fit attention: one floating-point dtype and rank (2 or
 * more), one batch shape, q [..., l, e], k [..., s, e], v [..., s, ev]. */
static int fits(const ir_type *q, const ir_type *k, const ir_type *v)
{
    int r = q->rank;
    if (r < 2 || k->rank != r || v->rank != r || !ir_is_float(q->dtype) ||
        k->dtype != q->dtype || v->dtype != q->dtype)
        return 0;
    for (int i = 0; i < r - 2; i++)
        if (k->dims[i] != q->dims[i] || v->dims[i] != q->dims[i])
            return 0;
    return k->dims[r - 1] == q->dims[r - 1] && v->dims[r - 2] == k->dims[r - 2];
}

/* The scale as a user would write it, of the float the kernels compute with:
 * dflt (1 / sqrt(e), the DSL's default) where that is the same float, else
 * the shortest decimal that is (0.6, not 0.60000002384185791, which an
 * imported float32 constant holds). */
static double as_written(double scale, double dflt)
{
    float f = (float)scale;
    if ((float)dflt == f)
        return dflt;
    for (int digits = 1; digits <= 17; digits++) {
        char buf[40];
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f)
            return d;
    }
    return scale;
}

/* A new node transpose(x) {perm} before pos, named after pos's result
 * ("<y>.k"), its type inferred. */
static ir_value *transposed(ir_graph *g, ir_value *x, const int64_t *perm, ir_node *pos)
{
    size_t len = strlen(pos->out[0]->name) + 3;
    char *name = base_xmalloc(len);
    snprintf(name, len, "%s.k", pos->out[0]->name);
    ir_node *n = ir_node_new(g, IR_OP_TRANSPOSE, 1, &x, 1, name, pos->loc);
    base_free(name);
    ir_set_ints(g, n, "perm", x->type.rank, perm);
    n->device = pos->device;
    char err[256];
    IR_ASSERT(ir_infer(n, &n->out[0]->type, err, sizeof err));
    ir_insert_before(g, pos, n);
    return n->out[0];
}

/* Rewrites the pattern ending at y = matmul(P, v) (y_node), P a softmax's
 * result, into attention: 1, or 0 where it does not match. */
static int rewrite(at_ctx *c, ir_node *y_node)
{
    ir_graph *g = c->g;
    ir_value *p = y_node->in[0], *v = y_node->in[1];
    if (y_node->group || !single(c, p) || p->def->op != IR_OP_SOFTMAX ||
        ir_attr_int(p->def, "axis") != p->type.rank - 1)
        return 0;
    int device = y_node->device;
    /* backward from the softmax: scales and at most one mask, down to a matmul */
    ir_value *s = p->def->in[0];
    double scale = 1, after = 1;
    int causal = 0, steps = 0;
    for (;; steps++) {
        if (!single(c, s) || s->def->device != device || steps > 16)
            return 0;
        if (s->def->op == IR_OP_MATMUL)
            break;
        double f;
        ir_value *x = scaled(c, s->def, &f);
        if (x) {
            scale *= f;
            after *= causal ? 1 : f;
        } else if (!causal && (x = masked(c, s->def, after))) {
            causal = 1;
        } else {
            return 0;
        }
        s = x;
    }
    ir_node *mm = s->def;
    ir_value *q = unscaled(c, mm->in[0], &scale), *kt = unscaled(c, mm->in[1], &scale);
    const ir_type *qt = &q->type, *ktt = &kt->type;
    int r = qt->rank;
    if (r < 2 || ktt->rank != r)
        return 0;
    ir_type kty = *ktt;
    kty.dims[r - 2] = ktt->dims[r - 1], kty.dims[r - 1] = ktt->dims[r - 2];
    if (!fits(qt, &kty, &v->type) || !(scale > 0) || !isfinite(scale))
        return 0;
    /* k: kT's source x through one permutation (x itself for the identity),
       or kT transposed; the scale all known before anything is made */
    int64_t perm[IR_MAX_RANK], composed[IR_MAX_RANK];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    ir_value *x = kt;
    int identity = 0;
    memcpy(composed, perm, sizeof composed);
    if (kt->kind == IR_VALUE_NODE && kt->def->op == IR_OP_TRANSPOSE && !kt->def->group) {
        x = unscaled(c, kt->def->in[0], &scale);
        const int64_t *p0 = ir_attr_ints(kt->def, "perm", NULL);
        identity = 1;
        for (int i = 0; i < r; i++) {
            composed[i] = p0[perm[i]];
            identity &= composed[i] == i;
        }
    }
    scale = as_written(scale, 1 / sqrt((double)qt->dims[r - 1]));
    if (!(scale > 0) || !isfinite(scale) || !((float)scale > 0) || isinf((float)scale))
        return 0; /* not a scale the kernels' float holds */
    ir_value *k = identity ? x : transposed(g, x, composed, y_node);
    ir_value *out[2] = {y_node->out[0], ir_value_new(g, y_node->out[0]->name, y_node->loc)};
    ir_value *in[3] = {q, k, v};
    ir_node *a = ir_node_make(g, IR_OP_ATTENTION, 3, in, 2, out, y_node->loc);
    ir_set_int(g, a, "causal", causal);
    ir_set_float(g, a, "scale", scale);
    a->device = device;
    ir_type types[IR_MAX_RESULTS];
    char err[256];
    IR_ASSERT(ir_infer(a, types, err, sizeof err));
    IR_ASSERT(ir_type_eq(&types[0], &out[0]->type));
    out[1]->type = types[1];
    ir_insert_before(g, y_node, a);
    ir_erase(g, y_node);
    return 1;
}

/* Erases the nodes that the rewrites left unread, from the softmaxes whose
 * results nothing reads any more back through what only they read, and the
 * parameters that only those nodes read. */
static void sweep(at_ctx *c, ir_value **dead, int ndead)
{
    count_uses(c);
    unsigned char *suspect = base_xcalloc((size_t)c->nuses, 1);
    for (int i = 0; i < ndead; i++)
        suspect[dead[i]->id] = 1;
    for (ir_node *n = c->g->tail, *prev; n; n = prev) {
        prev = n->prev;
        int erase = !ir_op_communicates(n->op), any = 0;
        for (int i = 0; i < n->nout && erase; i++) {
            erase = c->uses[n->out[i]->id] == 0;
            any |= suspect[n->out[i]->id];
        }
        if (!erase || !any)
            continue;
        for (int i = 0; i < n->nin; i++) {
            c->uses[n->in[i]->id]--;
            suspect[n->in[i]->id] = 1;
        }
        ir_erase(c->g, n);
    }
    int m = 0;
    for (int i = 0; i < c->g->nparams; i++) {
        ir_value *p = c->g->params[i];
        int updated = 0;
        for (int u = 0; u < c->g->nupdates; u++)
            updated |= c->g->updates[u].target == p;
        if (!suspect[p->id] || c->uses[p->id] > 0 || updated)
            c->g->params[m++] = p;
    }
    c->g->nparams = m;
    base_free(suspect);
}

int pass_attention(ir_graph *g, diag *d)
{
    (void)d;
    if (ir_graph_devices(g) > 1)
        return 0; /* a partitioned program: its attention is the model's, fused at load */
    at_ctx c = {g, NULL, NULL, 0, 0};
    count_uses(&c);
    ir_value **dead = NULL;
    int made = 0;
    for (ir_node *n = g->head, *next; n; n = next) {
        next = n->next;
        if (n->op != IR_OP_MATMUL || n->nin != 2 || n->in[0]->kind != IR_VALUE_NODE)
            continue;
        ir_value *p = n->in[0];
        if (!rewrite(&c, n))
            continue;
        dead = base_xrealloc(dead, (size_t)(made + 1) * sizeof *dead);
        dead[made++] = p;
        count_uses(&c);
    }
    if (made)
        sweep(&c, dead, made);
    base_free(dead);
    base_free(c.uses);
    base_free(c.konst);
    return made;
}
