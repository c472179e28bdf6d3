/* Autodiff: a model graph becomes one training-step graph.
 *
 * Expects: a verified model graph with a loss (an f32 scalar).
 *
 * Steps:
 *   1. Training mode: each batchnorm becomes batchnorm_train, which normalizes
 *      with batch statistics and also yields the statistics (kept for the
 *      backward pass) and the new running statistics (written back by updates);
 *      each dropout becomes dropout_train, which yields its mask.
 *   2. Which values need a gradient: trainable parameters, and results of
 *      differentiable ops with such an operand.  Inputs never do, so the first
 *      layer computes no gradient for the image; nor do comparisons' masks
 *      (IR_NO_GRAD), which are constant where they are differentiable.
 *   3. Reverse sweep from the loss (seeded with 1): each node whose result has a
 *      gradient emits the nodes of its op's rule below, for the operands that
 *      need one; a value used several times sums its gradients.
 *   4. The optimizer: one update node per trainable parameter (sgd or adam),
 *      with optimizer state (momentum_buffer, exp_avg, exp_avg_sq) as state
 *      values named after the parameter, and graph updates that write the new
 *      parameter and state back at the end of the step.
 *
 * Guarantees: the result is ordinary IR that verifies; the gradient of value v
 * is named "v.grad"; every emitted node carries the source location of the
 * forward node it differentiates. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"

typedef struct {
    ir_graph *g;
    diag *d;
    ir_value **grad;   /* by value id */
    char *needs;       /* by value id: needs a gradient */
    int cap;
    ir_loc loc;        /* of the forward node being differentiated */
} ad;

static void ensure(ad *a)
{
    if (a->g->nvalues <= a->cap)
        return;
    int cap = a->g->nvalues * 2 + 64;
    ir_value **grad = base_xrealloc(a->grad, (size_t)cap * sizeof *grad);
    char *needs = base_xrealloc(a->needs, (size_t)cap);
    memset(grad + a->cap, 0, (size_t)(cap - a->cap) * sizeof *grad);
    memset(needs + a->cap, 0, (size_t)(cap - a->cap));
    a->grad = grad;
    a->needs = needs;
    a->cap = cap;
}

static int needs(ad *a, const ir_value *v) { ensure(a); return a->needs[v->id]; }

static const char *grad_name(ad *a, const ir_value *v)
{
    size_t n = strlen(v->name) + 6;
    char *s = ir_alloc(a->g, n);
    snprintf(s, n, "%s.grad", v->name);
    return s;
}

/* Types a node built by the rules and appends it.  A rule that builds an
 * ill-typed node is a bug in this file, hence the assert. */
static ir_node *fin(ad *a, ir_node *n)
{
    char err[256];
    ir_type t[8];
    ir_set_attr_defaults(a->g, n);
    if (!ir_infer(n, t, err, sizeof err)) {
        fprintf(stderr, "gnc: autodiff built an ill-typed %s node: %s\n", ir_ops[n->op].name, err);
        IR_ASSERT(!"autodiff rule produced a well-typed node");
    }
    for (int i = 0; i < n->nout; i++)
        n->out[i]->type = t[i];
    ir_append(a->g, n);
    return n;
}

static ir_node *mk(ad *a, ir_op op, int nin, ir_value **in, int nout, const char *name)
{
    return ir_node_new(a->g, op, nin, in, nout, name, a->loc);
}

static ir_value *op1(ad *a, ir_op op, ir_value *x, const char *name)
{
    return fin(a, mk(a, op, 1, &x, 1, name))->out[0];
}

static ir_value *op2(ad *a, ir_op op, ir_value *x, ir_value *y, const char *name)
{
    ir_value *in[2] = {x, y};
    return fin(a, mk(a, op, 2, in, 1, name))->out[0];
}

static ir_value *where(ad *a, ir_value *cond, ir_value *x, ir_value *y, const char *name)
{
    ir_value *in[3] = {cond, x, y};
    return fin(a, mk(a, IR_OP_WHERE, 3, in, 1, name))->out[0];
}

static ir_value *scalar(ad *a, double v, ir_dtype dtype, const char *name)
{
    ir_node *n = mk(a, IR_OP_CONST, 0, NULL, 1, name);
    ir_set_float(a->g, n, "value", v);
    n->out[0]->type = (ir_type){dtype, 0, {0}};
    return fin(a, n)->out[0];
}

/* x reshaped, summed or broadcast to type t (op is RESHAPE, SUM_TO or BROADCAST_TO). */
static ir_value *to_shape(ad *a, ir_op op, ir_value *x, const ir_type *t, const char *name)
{
    if (ir_type_eq(&x->type, t))
        return x;
    ir_node *n = mk(a, op, 1, &x, 1, name);
    ir_set_ints(a->g, n, "shape", t->rank, t->dims);
    return fin(a, n)->out[0];
}

static void copy_attrs(ad *a, ir_node *dst, const ir_node *src)
{
    ir_copy_attrs(a->g, dst, src);
}

/* A convolution's stride, pad, dilation and groups, from src to dst. */
static void copy_window(ad *a, ir_node *dst, const ir_node *src)
{
    static const char *keys[3] = {"stride", "pad", "dilation"};
    for (int i = 0; i < 3; i++)
        ir_set_ints(a->g, dst, keys[i], 2, ir_attr_ints(src, keys[i], NULL));
    ir_set_int(a->g, dst, "groups", ir_attr_int(src, "groups"));
}

/* Adds dv to v's gradient. */
static void acc(ad *a, ir_value *v, ir_value *dv)
{
    ensure(a);
    if (!a->needs[v->id])
        return;
    ir_value *old = a->grad[v->id];
    a->grad[v->id] = old ? op2(a, IR_OP_ADD, old, dv, grad_name(a, v)) : dv;
}

/* Swaps the last two dimensions. */
static ir_value *swap_last2(ad *a, ir_value *x, const char *name)
{
    int64_t perm[IR_MAX_RANK];
    int r = x->type.rank;
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    ir_node *n = mk(a, IR_OP_TRANSPOSE, 1, &x, 1, name);
    ir_set_ints(a->g, n, "perm", r, perm);
    return fin(a, n)->out[0];
}

/* The gradient rule of n's op: dy is the gradient of n's (first) result. */
/* What a gradient rule reads of the node n it differentiates: dy, n's
 * operands x and b (its second, or NULL) and result y, and the names of
 * x's and b's gradients. */
typedef struct {
    ir_node *n;
    ir_value *dy, *x, *y, *b;
    const char *gx, *gb;
} grad_at;

/* The gradients of elementwise arithmetic: the binary ops, where, neg,
 * dropout: 1 where n is one of them. */
static int backward_arith(ad *a, const grad_at *at)
{
    ir_node *n = at->n;
    ir_value *dy = at->dy, *x = at->x, *y = at->y, *b = at->b;
    const char *gx = at->gx, *gb = at->gb;
    switch (n->op) {
    case IR_OP_ADD:
        acc(a, x, to_shape(a, IR_OP_SUM_TO, dy, &x->type, gx));
        acc(a, b, to_shape(a, IR_OP_SUM_TO, dy, &b->type, gb));
        return 1;
    case IR_OP_SUB:
        acc(a, x, to_shape(a, IR_OP_SUM_TO, dy, &x->type, gx));
        if (needs(a, b))
            acc(a, b, to_shape(a, IR_OP_SUM_TO, op1(a, IR_OP_NEG, dy, gb), &b->type, gb));
        return 1;
    case IR_OP_MUL:
        if (needs(a, x))
            acc(a, x, to_shape(a, IR_OP_SUM_TO, op2(a, IR_OP_MUL, dy, b, gx), &x->type, gx));
        if (needs(a, b))
            acc(a, b, to_shape(a, IR_OP_SUM_TO, op2(a, IR_OP_MUL, dy, x, gb), &b->type, gb));
        return 1;
    case IR_OP_DIV:   /* d(x/b)/db = -y/b */
        if (needs(a, x))
            acc(a, x, to_shape(a, IR_OP_SUM_TO, op2(a, IR_OP_DIV, dy, b, gx), &x->type, gx));
        if (needs(a, b)) {
            ir_value *t = op2(a, IR_OP_DIV, op2(a, IR_OP_MUL, dy, y, gb), b, gb);
            acc(a, b, to_shape(a, IR_OP_SUM_TO, op1(a, IR_OP_NEG, t, gb), &b->type, gb));
        }
        return 1;
    case IR_OP_MAXIMUM: case IR_OP_MINIMUM: { /* PyTorch's: dy to the larger (smaller), half
                                                 to each on a tie, all to both where one is NaN */
        int mx = n->op == IR_OP_MAXIMUM;
        ir_value *half = op2(a, IR_OP_MUL, dy, scalar(a, 0.5, dy->type.dtype, gx), gx);
        ir_value *t = where(a, op2(a, IR_OP_EQ, x, b, gx), half, dy, gx);
        ir_value *zero = scalar(a, 0.0, dy->type.dtype, gx);
        if (needs(a, x))
            acc(a, x, to_shape(a, IR_OP_SUM_TO,
                               where(a, op2(a, mx ? IR_OP_LT : IR_OP_GT, x, b, gx), zero, t, gx),
                               &x->type, gx));
        if (needs(a, b))
            acc(a, b, to_shape(a, IR_OP_SUM_TO,
                               where(a, op2(a, mx ? IR_OP_GT : IR_OP_LT, x, b, gb), zero, t, gb),
                               &b->type, gb));
        return 1;
    }
    case IR_OP_WHERE: /* dy to a where the condition holds, to b where not; none to it */
        for (int k = 1; k < 3; k++) {
            ir_value *v = n->in[k];
            if (!needs(a, v))
                continue;
            const char *gv = grad_name(a, v);
            ir_value *zero = scalar(a, 0.0, dy->type.dtype, gv);
            acc(a, v, to_shape(a, IR_OP_SUM_TO, where(a, x, k == 1 ? dy : zero,
                                                      k == 1 ? zero : dy, gv), &v->type, gv));
        }
        return 1;
    case IR_OP_NEG:
        acc(a, x, op1(a, IR_OP_NEG, dy, gx));
        return 1;
    case IR_OP_DROPOUT_TRAIN:
        acc(a, x, op2(a, IR_OP_MUL, dy, n->out[1], gx));
        return 1;
    default:
        return 0;
    }
}

/* The gradients of the layers: matmul, dense, convolutions, normalizations,
 * softmax, pooling: 1 where n is one of them. */
static int backward_layers(ad *a, const grad_at *at)
{
    ir_node *n = at->n;
    ir_value *dy = at->dy, *x = at->x, *y = at->y, *b = at->b;
    const char *gx = at->gx, *gb = at->gb;
    switch (n->op) {
    case IR_OP_MATMUL:
        if (needs(a, x)) {
            ir_value *t = op2(a, IR_OP_MATMUL, dy, swap_last2(a, b, gx), gx);
            acc(a, x, to_shape(a, IR_OP_SUM_TO, t, &x->type, gx));
        }
        if (needs(a, b)) {
            ir_value *t = op2(a, IR_OP_MATMUL, swap_last2(a, x, gb), dy, gb);
            acc(a, b, to_shape(a, IR_OP_SUM_TO, t, &b->type, gb));
        }
        return 1;
    case IR_OP_DENSE:
        if (needs(a, x))
            acc(a, x, op2(a, IR_OP_DENSE_GRAD_INPUT, dy, b, gx));
        if (needs(a, b))
            acc(a, b, op2(a, IR_OP_DENSE_GRAD_WEIGHT, dy, x, gb));
        if (n->nin == 3 && needs(a, n->in[2]))
            acc(a, n->in[2], to_shape(a, IR_OP_SUM_TO, dy, &n->in[2]->type, grad_name(a, n->in[2])));
        return 1;
    case IR_OP_CONV2D: {
        if (needs(a, x)) {
            ir_value *in[2] = {dy, b};
            ir_node *m = mk(a, IR_OP_CONV2D_GRAD_INPUT, 2, in, 1, gx);
            copy_attrs(a, m, n);
            ir_set_ints(a->g, m, "shape", 4, x->type.dims);
            acc(a, x, fin(a, m)->out[0]);
        }
        if (needs(a, b)) {
            ir_value *in[2] = {dy, x};
            ir_node *m = mk(a, IR_OP_CONV2D_GRAD_WEIGHT, 2, in, 1, gb);
            copy_attrs(a, m, n);
            ir_set_ints(a->g, m, "shape", 4, b->type.dims);
            acc(a, b, fin(a, m)->out[0]);
        }
        if (n->nin == 3 && needs(a, n->in[2])) {  /* sum over n, h, w */
            ir_value *bias = n->in[2];
            const char *gc = grad_name(a, bias);
            ir_type t = {dy->type.dtype, 4, {1, bias->type.dims[0], 1, 1}};
            acc(a, bias, to_shape(a, IR_OP_RESHAPE, to_shape(a, IR_OP_SUM_TO, dy, &t, gc),
                                  &bias->type, gc));
        }
        return 1;
    }
    case IR_OP_CONV2D_GRAD_INPUT: { /* a transposed convolution (conv_transpose2d) */
        if (needs(a, x)) { /* the conv2d it is the adjoint of */
            ir_value *in[2] = {dy, b};
            ir_node *m = mk(a, IR_OP_CONV2D, 2, in, 1, gx);
            copy_window(a, m, n);
            acc(a, x, fin(a, m)->out[0]);
        }
        if (needs(a, b)) { /* conv2d's weight gradient, x in dy's place and dy in x's */
            ir_value *in[2] = {x, dy};
            ir_node *m = mk(a, IR_OP_CONV2D_GRAD_WEIGHT, 2, in, 1, gb);
            copy_window(a, m, n);
            ir_set_ints(a->g, m, "shape", 4, b->type.dims);
            acc(a, b, fin(a, m)->out[0]);
        }
        return 1;
    }
    case IR_OP_BATCHNORM_TRAIN: {
        ir_value *in[5] = {dy, x, b, n->out[1], n->out[2]};
        ir_node *m = mk(a, IR_OP_BATCHNORM_GRAD, 5, in, 3, gx);
        copy_attrs(a, m, n);
        fin(a, m);
        acc(a, x, m->out[0]);
        acc(a, b, m->out[1]);
        acc(a, n->in[2], m->out[2]);
        return 1;
    }
    case IR_OP_LAYERNORM: {
        ir_value *in[3] = {dy, x, b};
        ir_node *m = mk(a, IR_OP_LAYERNORM_GRAD, 3, in, 3, gx);
        copy_attrs(a, m, n);
        fin(a, m);
        acc(a, x, m->out[0]);
        acc(a, b, m->out[1]);
        acc(a, n->in[2], m->out[2]);
        return 1;
    }
    case IR_OP_ATTENTION: { /* from the forward's result and row statistics (lse) */
        ir_value *in[6] = {dy, n->in[0], n->in[1], n->in[2], n->out[0], n->out[1]};
        ir_value *out[3];
        for (int k = 0; k < 3; k++)
            out[k] = ir_value_new(a->g, grad_name(a, n->in[k]), a->loc);
        ir_node *m = ir_node_make(a->g, IR_OP_ATTENTION_GRAD, 6, in, 3, out, a->loc);
        copy_attrs(a, m, n);
        fin(a, m);
        for (int k = 0; k < 3; k++)
            if (needs(a, n->in[k]))
                acc(a, n->in[k], m->out[k]);
        return 1;
    }
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX: {
        ir_value *in[2] = {dy, y};
        ir_node *m = mk(a, n->op == IR_OP_SOFTMAX ? IR_OP_SOFTMAX_GRAD : IR_OP_LOG_SOFTMAX_GRAD,
                        2, in, 1, gx);
        copy_attrs(a, m, n);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_MAXPOOL2D: {
        ir_value *in[2] = {dy, x};
        ir_node *m = mk(a, IR_OP_MAXPOOL2D_GRAD, 2, in, 1, gx);
        copy_attrs(a, m, n);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: { /* dy to the first extreme, or the ties */
        ir_value *in[2] = {dy, x};
        ir_node *m = mk(a, n->op == IR_OP_REDUCE_MAX ? IR_OP_REDUCE_MAX_GRAD
                                                     : IR_OP_REDUCE_MIN_GRAD, 2, in, 1, gx);
        copy_attrs(a, m, n);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_AVGPOOL2D: {
        ir_node *m = mk(a, IR_OP_AVGPOOL2D_GRAD, 1, &dy, 1, gx);
        copy_attrs(a, m, n);
        ir_set_ints(a->g, m, "shape", 4, x->type.dims);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_ADAPTIVE_AVGPOOL2D: {
        ir_node *m = mk(a, IR_OP_ADAPTIVE_AVGPOOL2D_GRAD, 1, &dy, 1, gx);
        ir_set_ints(a->g, m, "shape", 4, x->type.dims);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_UPSAMPLE2D: {
        ir_node *m = mk(a, IR_OP_UPSAMPLE2D_GRAD, 1, &dy, 1, gx);
        ir_set_ints(a->g, m, "shape", 4, x->type.dims);
        ir_set_int(a->g, m, "mode", ir_attr_int(n, "mode"));
        ir_set_int(a->g, m, "align_corners", ir_attr_int(n, "align_corners"));
        ir_set_float(a->g, m, "scale_h", ir_attr_float(n, "scale_h"));
        ir_set_float(a->g, m, "scale_w", ir_attr_float(n, "scale_w"));
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_GLOBAL_AVGPOOL: {
        double hw = (double)(x->type.dims[2] * x->type.dims[3]);
        ir_value *t = op2(a, IR_OP_MUL, dy, scalar(a, 1.0 / hw, dy->type.dtype, gx), gx);
        acc(a, x, to_shape(a, IR_OP_BROADCAST_TO, t, &x->type, gx));
        return 1;
    }
    default:
        return 0;
    }
}

/* The gradients of shapes and copies: reshape, sum_to, broadcast_to,
 * transpose, concat, cast, slice, pad, embedding: 1 where n is one of them. */
static int backward_shapes(ad *a, const grad_at *at)
{
    ir_node *n = at->n;
    ir_value *dy = at->dy, *x = at->x, *b = at->b;
    const char *gx = at->gx, *gb = at->gb;
    switch (n->op) {
    case IR_OP_RESHAPE:
        acc(a, x, to_shape(a, IR_OP_RESHAPE, dy, &x->type, gx));
        return 1;
    case IR_OP_SUM_TO: /* sum and mean: every summed element gets dy */
        acc(a, x, to_shape(a, IR_OP_BROADCAST_TO, dy, &x->type, gx));
        return 1;
    case IR_OP_BROADCAST_TO: /* expand, upsample's repeats: each copy's dy, summed */
        acc(a, x, to_shape(a, IR_OP_SUM_TO, dy, &x->type, gx));
        return 1;
    case IR_OP_TRANSPOSE: {
        int count;
        const int64_t *perm = ir_attr_ints(n, "perm", &count);
        int64_t inv[IR_MAX_RANK];
        for (int i = 0; i < count; i++)
            inv[perm[i]] = i;
        ir_node *m = mk(a, IR_OP_TRANSPOSE, 1, &dy, 1, gx);
        ir_set_ints(a->g, m, "perm", count, inv);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_CONCAT: {
        int64_t axis = ir_attr_int(n, "axis"), start = 0;
        for (int i = 0; i < n->nin; i++) {
            ir_value *xi = n->in[i];
            int64_t size = xi->type.dims[axis];
            if (needs(a, xi)) {
                ir_node *m = mk(a, IR_OP_SLICE, 1, &dy, 1, grad_name(a, xi));
                ir_set_int(a->g, m, "axis", axis);
                ir_set_int(a->g, m, "start", start);
                ir_set_int(a->g, m, "size", size);
                acc(a, xi, fin(a, m)->out[0]);
            }
            start += size;
        }
        return 1;
    }
    case IR_OP_CAST: { /* between floating-point dtypes: dy cast back */
        if (!ir_is_float(x->type.dtype))
            return 1;
        ir_node *m = mk(a, IR_OP_CAST, 1, &dy, 1, gx);
        m->out[0]->type.dtype = x->type.dtype;
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_SLICE: { /* dy put back in place, between zeros */
        int64_t before[IR_MAX_RANK] = {0}, after[IR_MAX_RANK] = {0};
        int axis = (int)ir_attr_int(n, "axis");
        before[axis] = ir_attr_int(n, "start");
        after[axis] = x->type.dims[axis] - before[axis] - ir_attr_int(n, "size");
        ir_node *m = mk(a, IR_OP_PAD, 1, &dy, 1, gx);
        ir_set_ints(a->g, m, "before", x->type.rank, before);
        ir_set_ints(a->g, m, "after", x->type.rank, after);
        ir_set_float(a->g, m, "value", 0);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_PAD: { /* the middle of dy, one sliced dimension after another */
        const int64_t *before = ir_attr_ints(n, "before", NULL);
        ir_value *g = dy;
        for (int d = 0; d < x->type.rank; d++) {
            if (x->type.dims[d] == g->type.dims[d])
                continue;
            ir_node *m = mk(a, IR_OP_SLICE, 1, &g, 1, gx);
            ir_set_int(a->g, m, "axis", d);
            ir_set_int(a->g, m, "start", before[d]);
            ir_set_int(a->g, m, "size", x->type.dims[d]);
            g = fin(a, m)->out[0];
        }
        acc(a, x, g);
        return 1;
    }
    case IR_OP_EMBEDDING: {
        ir_value *in[2] = {dy, x};
        ir_node *m = mk(a, IR_OP_EMBEDDING_GRAD, 2, in, 1, gb);
        ir_set_ints(a->g, m, "shape", 2, b->type.dims);
        copy_attrs(a, m, n);
        acc(a, b, fin(a, m)->out[0]);
        return 1;
    }
    default:
        return 0;
    }
}

/* The gradients of the losses: 1 where n is one of them. */
static int backward_losses(ad *a, const grad_at *at)
{
    ir_node *n = at->n;
    ir_value *dy = at->dy, *x = at->x, *b = at->b;
    const char *gx = at->gx, *gb = at->gb;
    switch (n->op) {
    case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS: {
        ir_value *in[3] = {dy, x, b};
        ir_node *m = mk(a, n->op == IR_OP_NLL_LOSS ? IR_OP_NLL_LOSS_GRAD : IR_OP_CROSS_ENTROPY_GRAD,
                        3, in, 1, gx);
        copy_attrs(a, m, n);
        acc(a, x, fin(a, m)->out[0]);
        return 1;
    }
    case IR_OP_MSE: {   /* d/da mean((a-b)^2) = 2 (a - b) / numel */
        double k = 2.0 / (double)ir_type_numel(&x->type);
        ir_value *scale = op2(a, IR_OP_MUL, dy, scalar(a, k, dy->type.dtype, gx), gx);
        ir_value *d = op2(a, IR_OP_MUL, op2(a, IR_OP_SUB, x, b, gx), scale, gx);
        acc(a, x, d);
        if (needs(a, b))
            acc(a, b, op1(a, IR_OP_NEG, d, gb));
        return 1;
    }
    default:
        return 0;
    }
}

static void backward(ad *a, ir_node *n, ir_value *dy)
{
    ir_value *x = n->in[0], *y = n->out[0];
    ir_value *b = n->nin > 1 ? n->in[1] : NULL;
    const char *gx = grad_name(a, x), *gb = b ? grad_name(a, b) : NULL;
    grad_at at = {n, dy, x, y, b, gx, gb};
    a->loc = n->loc;
    const ir_grad_rule *rule = ir_grad_rule_of(n->op);
    if (rule) { /* an elementwise unary op: its gradient op, from ops.def's table */
        ir_value *in[2] = {dy, rule->from_result ? y : x};
        ir_node *g = mk(a, rule->grad, 2, in, 1, gx);
        copy_attrs(a, g, n);
        acc(a, x, fin(a, g)->out[0]);
        return;
    }
    if (backward_arith(a, &at) || backward_layers(a, &at) || backward_shapes(a, &at) ||
        backward_losses(a, &at))
        return;
    diag_error(a->d, n->loc, "%s is not differentiable, but the loss depends on it "
               "through %%%s", ir_ops[n->op].name, y->name);
}

/* Step 1: training forms of batchnorm and dropout. */
static void training_mode(ad *a, ir_value *step, ir_value *seed)
{
    int salt = 0;
    for (ir_node *n = a->g->head, *next; n; n = next) {
        next = n->next;
        ir_value *y = n->out[0];
        ir_node *m;
        if (n->op == IR_OP_BATCHNORM) {
            ir_value *out[5] = {y};
            char buf[256];
            static const char *const suffix[] = {NULL, "mean", "invstd", "running_mean",
                                                 "running_var"};
            for (int i = 1; i < 5; i++) {   /* readable names: batchnorm0.mean, ... */
                snprintf(buf, sizeof buf, "%s.%s.next", y->name, suffix[i]);
                if (i < 3)
                    snprintf(buf, sizeof buf, "%s.%s", y->name, suffix[i]);
                out[i] = ir_value_new(a->g, buf, n->loc);
            }
            m = ir_node_make(a->g, IR_OP_BATCHNORM_TRAIN, 5, n->in, 5, out, n->loc);
            copy_attrs(a, m, n);
        } else if (n->op == IR_OP_DROPOUT) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s.mask", y->name);
            ir_value *in[3] = {n->in[0], step, seed};
            ir_value *out[2] = {y, ir_value_new(a->g, buf, n->loc)};
            m = ir_node_make(a->g, IR_OP_DROPOUT_TRAIN, 3, in, 2, out, n->loc);
            copy_attrs(a, m, n);
            ir_set_int(a->g, m, "salt", salt++);
            ir_set_ints(a->g, m, "shard", 0, NULL);
        } else {
            continue;
        }
        char err[256];
        ir_type t[8];
        IR_ASSERT(ir_infer(m, t, err, sizeof err));
        for (int i = 0; i < m->nout; i++)
            m->out[i]->type = t[i];
        ir_insert_before(a->g, n, m);
        ir_erase(a->g, n);
        if (m->op == IR_OP_BATCHNORM_TRAIN) {
            ir_add_update(a->g, m->in[3], m->out[3]);
            ir_add_update(a->g, m->in[4], m->out[4]);
        }
    }
}

static ir_value *state(ad *a, const ir_value *p, const char *suffix)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s.%s", p->name, suffix);
    IR_ASSERT(ir_claim_name(a->g, buf));
    return ir_add_param(a->g, IR_VALUE_STATE, buf, p->type, (ir_init){IR_INIT_ZEROS, 0, 0, 0, NULL},
                        p->loc);
}

/* Step 4: the optimizer's update of parameter p with gradient dp. */
static void optimize(ad *a, ir_value *p, ir_value *dp, const ad_optimizer *opt, ir_value *lr,
                     ir_value *step)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s.next", p->name);
    a->loc = p->loc;
    ir_node *n;
    if (opt->kind == AD_SGD) {
        ir_value *in[4] = {p, dp, lr, NULL};
        int nin = 3;
        if (opt->momentum != 0)
            in[nin++] = state(a, p, "momentum_buffer");
        n = mk(a, IR_OP_SGD, nin, in, nin - 2, buf);
        ir_set_float(a->g, n, "momentum", opt->momentum);
        ir_set_int(a->g, n, "nesterov", opt->nesterov);
        ir_set_float(a->g, n, "weight_decay", opt->weight_decay);
    } else {
        ir_value *in[6] = {p, dp, state(a, p, "exp_avg"), state(a, p, "exp_avg_sq"), lr, step};
        n = mk(a, IR_OP_ADAM, 6, in, 3, buf);
        ir_set_float(a->g, n, "beta1", opt->beta1);
        ir_set_float(a->g, n, "beta2", opt->beta2);
        ir_set_float(a->g, n, "eps", opt->eps);
        ir_set_float(a->g, n, "weight_decay", opt->weight_decay);
        ir_set_int(a->g, n, "decoupled", opt->kind == AD_ADAMW);
    }
    fin(a, n);
    ir_add_update(a->g, p, n->out[0]);
    if (opt->kind == AD_SGD && n->nout == 2) {
        ir_add_update(a->g, n->in[3], n->out[1]);       /* momentum_buffer */
    } else if (opt->kind != AD_SGD) {
        ir_add_update(a->g, n->in[2], n->out[1]);       /* exp_avg */
        ir_add_update(a->g, n->in[3], n->out[2]);       /* exp_avg_sq */
    }
}

ad_optimizer ad_optimizer_default(ad_optimizer_kind kind)
{
    return (ad_optimizer){kind, 0.0, 0, kind == AD_ADAMW ? 0.01 : 0.0, 0.9, 0.999, 1e-8};
}

int ad_training_graph(ir_graph *g, const ad_optimizer *opt, diag *d)
{
    if (!g->loss) {
        diag_error(d, (ir_loc){0}, "model '%s' has no loss to train on (a model without one, "
                   "an imported ONNX model say, gets one with --loss cross_entropy:OUTPUT)",
                   g->name);
        return -1;
    }
    ad a = {g, d, NULL, NULL, 0, {0}};
    int errors = d->nerrors;
    static const ir_type scalar_f32 = {IR_F32, 0, {0}}, scalar_i64 = {IR_I64, 0, {0}};
    const char *names[3] = {AD_INPUT_LR, AD_INPUT_STEP, AD_INPUT_SEED};
    for (int i = 0; i < 3; i++)
        if (!ir_claim_name(g, names[i])) {
            diag_error(d, (ir_loc){0}, "the name '%s' is reserved for training", names[i]);
            return -1;
        }
    ir_value *lr = ir_add_input(g, AD_INPUT_LR, scalar_f32, (ir_loc){0});
    ir_value *step = ir_add_input(g, AD_INPUT_STEP, scalar_i64, (ir_loc){0});
    ir_value *seed = ir_add_input(g, AD_INPUT_SEED, scalar_i64, (ir_loc){0});

    training_mode(&a, step, seed);

    /* Step 2: forward propagation of "needs a gradient". */
    ir_node *last_forward = g->tail;
    ensure(&a);
    for (int i = 0; i < g->nparams; i++)
        a.needs[g->params[i]->id] = g->params[i]->kind == IR_VALUE_PARAM;
    ir_for_each_node(g, n) {
        int any = 0;
        for (int i = 0; i < n->nin; i++)
            any |= a.needs[n->in[i]->id];
        if (any && n->op != IR_OP_CONST && !ir_op_is(n->op, IR_NO_GRAD) &&
            ir_is_float(n->out[0]->type.dtype)) /* integers carry no gradient */
            a.needs[n->out[0]->id] = 1;
    }

    /* Step 3: the reverse sweep. */
    a.loc = g->loss->loc;
    ensure(&a);
    a.grad[g->loss->id] = scalar(&a, 1.0, IR_F32, grad_name(&a, g->loss));
    for (ir_node *n = last_forward; n; n = n->prev) {
        ensure(&a);
        ir_value *dy = a.grad[n->out[0]->id];
        if (dy)
            backward(&a, n, dy);
    }

    /* Step 4: the optimizer, in parameter order. */
    int nparams = g->nparams;   /* state values are appended to the list below */
    for (int i = 0; i < nparams; i++) {
        ir_value *p = g->params[i];
        ensure(&a);
        if (p->kind == IR_VALUE_PARAM && a.grad[p->id])
            optimize(&a, p, a.grad[p->id], opt, lr, step);
    }
    base_free(a.grad);
    base_free(a.needs);
    return d->nerrors > errors ? -1 : 0;
}
