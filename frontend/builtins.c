/* The built-in operations of the .net language.
 *
 * Each entry names its parameters in order, with defaults ("stride=1") or "=?"
 * for optional ones; arguments bind by position or keyword (elab.c).  A handler
 * checks its arguments, creates the layer's parameters (named after the call's
 * path, see docs/dsl.md "Naming") and emits IR nodes.  Layer defaults follow
 * PyTorch's: conv1d, conv2d, conv_transpose2d and dense weights and biases
 * U(+-1/sqrt(fan_in)), batchnorm and layernorm weight 1 and bias 0, embedding
 * N(0, 1).
 *
 * ORDER: docs/dsl.md lists these built-ins; keep it in step. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elab.h"

int arg_axes(elab *e, call *c, int i, int rank, int *marked)
{
    if (!arg_given(c, i)) {
        for (int a = 0; a < rank; a++)
            marked[a] = 1;
        return 1;
    }
    if (c->args[i].v.k == V_INT) {
        int64_t a = axis_of(e, c, i, rank);
        if (a >= 0)
            marked[a] = 1;
        return a >= 0;
    }
    int64_t axes[IR_MAX_RANK];
    int n;
    if (!arg_ints(e, c, i, axes, IR_MAX_RANK, &n))
        return 0;
    for (int k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (a < 0 || a >= rank || marked[a]) {
            el_error(e, c->args[i].loc, "axis %lld is %s for a tensor of rank %d",
                     (long long)axes[k], a >= 0 && a < rank ? "given twice" : "out of range", rank);
            return 0;
        }
        marked[a] = 1;
    }
    return 1;
}

int64_t axis_of(elab *e, call *c, int i, int rank)
{
    int64_t axis;
    if (!arg_int(e, c, i, &axis))
        return -1;
    if (axis < -rank || axis >= rank) {
        el_error(e, c->args[i].loc, "axis %lld is out of range for a tensor of rank %d",
                 (long long)axis, rank);
        return -1;
    }
    return axis < 0 ? axis + rank : axis;
}

static val unary(elab *e, call *c, ir_op op)
{
    ir_value *x = arg_tensor(e, c, 0);
    if (!x)
        return error_val();
    return node_end(e, c, node_begin(e, c, op, 1, &x));
}

static val b_relu(elab *e, call *c) { return unary(e, c, IR_OP_RELU); }
static val b_sigmoid(elab *e, call *c) { return unary(e, c, IR_OP_SIGMOID); }
static val b_tanh(elab *e, call *c) { return unary(e, c, IR_OP_TANH); }
/* gelu(x, approximate="none"): the exact (erf) form, or PyTorch's "tanh" one */
static val b_gelu(elab *e, call *c)
{
    const val *ap = &c->args[1].v;
    if (ap->k == V_NONE || (ap->k == V_STR && strcmp(ap->s, "none") == 0))
        return unary(e, c, IR_OP_GELU);
    if (ap->k == V_STR && strcmp(ap->s, "tanh") == 0)
        return unary(e, c, IR_OP_GELU_TANH);
    if (ap->k == V_STR)
        el_error(e, c->args[1].loc, "gelu's approximate is \"none\" or \"tanh\", got \"%s\"",
                 ap->s);
    else
        el_error(e, c->args[1].loc, "gelu's approximate is \"none\" or \"tanh\", got %s",
                 val_kind_name(ap));
    return error_val();
}
static val b_silu(elab *e, call *c) { return unary(e, c, IR_OP_SILU); }
static val b_exp(elab *e, call *c) { return unary(e, c, IR_OP_EXP); }
static val b_log(elab *e, call *c) { return unary(e, c, IR_OP_LOG); }
/* sqrt of a number is a compile-time float (hd ** -0.5 and sqrt(hd) alike) */
static val b_sqrt(elab *e, call *c)
{
    const val *v = &c->args[0].v;
    if (v->k != V_INT && v->k != V_FLOAT)
        return unary(e, c, IR_OP_SQRT);
    double x = v->k == V_INT ? (double)v->i : v->f;
    if (x < 0) {
        el_error(e, c->args[0].loc, "sqrt of %g, a negative number", x);
        return error_val();
    }
    return (val){.k = V_FLOAT, .f = sqrt(x)};
}
static val b_rsqrt(elab *e, call *c) { return unary(e, c, IR_OP_RSQRT); }
static val b_abs(elab *e, call *c) { return unary(e, c, IR_OP_ABS); }
static val b_softplus(elab *e, call *c) { return unary(e, c, IR_OP_SOFTPLUS); }
static val b_hardswish(elab *e, call *c) { return unary(e, c, IR_OP_HARDSWISH); }
static val b_softsign(elab *e, call *c) { return unary(e, c, IR_OP_SOFTSIGN); }

/* leaky_relu(x, slope=0.01) and elu(x, alpha=1.0): an op with its one float */
static val unary_with(elab *e, call *c, ir_op op, const char *key)
{
    ir_value *x = arg_tensor(e, c, 0);
    double v;
    if (!x || !arg_float(e, c, 1, &v))
        return error_val();
    ir_node *n = node_begin(e, c, op, 1, &x);
    ir_set_float(el_graph(e), n, key, v);
    return node_end(e, c, n);
}

static val b_leaky_relu(elab *e, call *c) { return unary_with(e, c, IR_OP_LEAKY_RELU, "slope"); }
static val b_elu(elab *e, call *c) { return unary_with(e, c, IR_OP_ELU, "alpha"); }
static val b_global_avgpool(elab *e, call *c) { return unary(e, c, IR_OP_GLOBAL_AVGPOOL); }

static val binary(elab *e, call *c, ir_op op);

/* pow(x, p): x to a number's power (also x ** p) */
static val b_pow(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double p;
    if (!x)
        return error_val();
    if (c->args[1].v.k == V_TENSOR) {
        el_error(e, c->args[1].loc, "pow takes a number exponent, got a tensor: for a tensor "
                 "exponent write exp(p * log(x))");
        return error_val();
    }
    if (!arg_float(e, c, 1, &p))
        return error_val();
    ir_node *n = node_begin(e, c, IR_OP_POW, 1, &x);
    ir_set_float(el_graph(e), n, "p", p);
    return node_end(e, c, n);
}

/* clamp(x, min=?, max=?): PyTorch's, number bounds, one of them or both */
static val b_clamp(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double bound[2] = {-INFINITY, INFINITY};
    if (!x)
        return error_val();
    if (!arg_given(c, 1) && !arg_given(c, 2)) {
        el_error(e, c->loc, "clamp needs min, max or both");
        return error_val();
    }
    for (int i = 0; i < 2; i++) {
        if (!arg_given(c, i + 1))
            continue;
        if (c->args[i + 1].v.k == V_TENSOR) {
            el_error(e, c->args[i + 1].loc, "clamp takes number bounds, got a tensor: for "
                     "tensor bounds write minimum(maximum(x, low), high)");
            return error_val();
        }
        if (!arg_float(e, c, i + 1, &bound[i]))
            return error_val();
        if (isnan(bound[i])) {
            el_error(e, c->args[i + 1].loc, "clamp's %s is NaN", i ? "max" : "min");
            return error_val();
        }
    }
    ir_node *n = node_begin(e, c, IR_OP_CLAMP, 1, &x);
    ir_set_float(el_graph(e), n, "min", bound[0]);
    ir_set_float(el_graph(e), n, "max", bound[1]);
    return node_end(e, c, n);
}

/* Argument i as a tensor; a number becomes a rank-0 const of dtype (that of
 * the call's tensors), as in x + 1.0. */
static ir_value *arg_tensor_or_num(elab *e, call *c, int i, ir_dtype dtype)
{
    const val *v = &c->args[i].v;
    if (v->k == V_INT || v->k == V_FLOAT)
        return el_scalar(e, v, dtype, c->args[i].loc);
    return arg_tensor(e, c, i);
}

/* The dtype of the first of args[from .. to) that is a tensor, or f32. */
static ir_dtype tensor_dtype(const call *c, int from, int to)
{
    for (int i = from; i < to; i++)
        if (c->args[i].v.k == V_TENSOR)
            return c->args[i].v.t->type.dtype;
    return IR_F32;
}

/* maximum, minimum and the comparisons: two tensors, or a tensor and a number,
 * broadcasting */
static val binary_num(elab *e, call *c, ir_op op)
{
    if (c->args[0].v.k != V_TENSOR && c->args[1].v.k != V_TENSOR)
        return binary(e, c, op); /* reports the first that is no tensor */
    ir_dtype dt = tensor_dtype(c, 0, 2);
    ir_value *in[2] = {arg_tensor_or_num(e, c, 0, dt), arg_tensor_or_num(e, c, 1, dt)};
    if (!in[0] || !in[1])
        return error_val();
    return node_end(e, c, node_begin(e, c, op, 2, in));
}

static val b_maximum(elab *e, call *c) { return binary_num(e, c, IR_OP_MAXIMUM); }
static val b_minimum(elab *e, call *c) { return binary_num(e, c, IR_OP_MINIMUM); }
static val b_gt(elab *e, call *c) { return binary_num(e, c, IR_OP_GT); }
static val b_lt(elab *e, call *c) { return binary_num(e, c, IR_OP_LT); }
static val b_ge(elab *e, call *c) { return binary_num(e, c, IR_OP_GE); }
static val b_le(elab *e, call *c) { return binary_num(e, c, IR_OP_LE); }
static val b_eq(elab *e, call *c) { return binary_num(e, c, IR_OP_EQ); }
static val b_ne(elab *e, call *c) { return binary_num(e, c, IR_OP_NE); }

/* where(cond, a, b): a where the mask cond is nonzero, else b; a or b may be a
 * number */
static val b_where(elab *e, call *c)
{
    ir_value *cond = arg_tensor(e, c, 0);
    if (!cond)
        return error_val();
    ir_dtype dt = c->args[1].v.k == V_TENSOR || c->args[2].v.k == V_TENSOR
                      ? tensor_dtype(c, 1, 3) : cond->type.dtype;
    ir_value *in[3] = {cond, arg_tensor_or_num(e, c, 1, dt), arg_tensor_or_num(e, c, 2, dt)};
    if (!in[1] || !in[2])
        return error_val();
    return node_end(e, c, node_begin(e, c, IR_OP_WHERE, 3, in));
}

static val binary(elab *e, call *c, ir_op op)
{
    ir_value *in[2] = {arg_tensor(e, c, 0), arg_tensor(e, c, 1)};
    if (!in[0] || !in[1])
        return error_val();
    return node_end(e, c, node_begin(e, c, op, 2, in));
}

static ir_value *piece(elab *e, call *c, const char *part, ir_op op, int nin, ir_value **in,
                       const ir_type *shape, double value);

/* matmul(a, b): torch.matmul; a 1-D operand is a row (a) or a column (b)
 * for the product, whose dimension then goes, so two vectors give their dot
 * product */
static val b_matmul(elab *e, call *c)
{
    ir_value *in[2] = {arg_tensor(e, c, 0), arg_tensor(e, c, 1)};
    if (!in[0] || !in[1])
        return error_val();
    const ir_type *a = &in[0]->type, *b = &in[1]->type;
    int vec[2] = {a->rank == 1, b->rank == 1};
    if (!vec[0] && !vec[1])
        return binary(e, c, IR_OP_MATMUL);
    if (a->rank < 1 || b->rank < 1 ||
        a->dims[a->rank - 1] != b->dims[vec[1] ? 0 : b->rank - 2]) {
        char ta[128], tb[128];
        el_error(e, c->loc, "matmul of %s and %s: %s", ir_type_str(a, ta, sizeof ta),
                 ir_type_str(b, tb, sizeof tb), a->rank < 1 || b->rank < 1 ?
                 "a scalar has no product" : "the inner dimensions differ");
        return error_val();
    }
    for (int i = 0; i < 2; i++) {
        if (!vec[i])
            continue;
        ir_type t = {in[i]->type.dtype, 2, {1, 1}};
        t.dims[1 - i] = in[i]->type.dims[0];
        in[i] = piece(e, c, i ? "col" : "row", IR_OP_RESHAPE, 1, &in[i], &t, 0);
        if (!in[i])
            return error_val();
    }
    ir_value *y = piece(e, c, "product", IR_OP_MATMUL, 2, in, NULL, 0);
    if (!y)
        return error_val();
    ir_type t = y->type;   /* [..., m, n] less the vectors' 1s */
    t.rank = 0;
    for (int i = 0; i < y->type.rank; i++)
        if (!(vec[0] && i == y->type.rank - 2) && !(vec[1] && i == y->type.rank - 1))
            t.dims[t.rank++] = y->type.dims[i];
    y = piece(e, c, NULL, IR_OP_RESHAPE, 1, &y, &t, 0);
    return y ? tensor_val(y) : error_val();
}
/* cross_entropy and nll_loss: logits (log-probabilities) and labels, then
 * ignore_index as argument ii, and for cross_entropy label_smoothing as
 * argument ii - 1 */
static val class_loss(elab *e, call *c, ir_op op, int ii)
{
    const char *name = ir_ops[op].name, *what = op == IR_OP_NLL_LOSS ? "input" : "logits";
    ir_value *in[2] = {arg_tensor(e, c, 0), arg_tensor(e, c, 1)};
    double eps = 0;
    int64_t ignore;
    if (!in[0] || !in[1] || (op == IR_OP_CROSS_ENTROPY && !arg_float(e, c, ii - 1, &eps)) ||
        !arg_int(e, c, ii, &ignore))
        return error_val();
    if (!(eps >= 0 && eps <= 1)) {
        el_error(e, c->args[ii - 1].loc, "%s's label_smoothing must be in [0, 1], got %g", name,
                 eps);
        return error_val();
    }
    const ir_type *a = &in[0]->type, *b = &in[1]->type;
    char ta[128], tl[128];
    if (a->rank < 2 || !ir_is_float(a->dtype)) {
        el_error(e, c->args[0].loc, "%s expects floating-point %s [n, classes, ...], got %s",
                 name, what, ir_type_str(a, ta, sizeof ta));
        return error_val();
    }
    int ok = b->rank == a->rank - 1 && (b->dtype == IR_I32 || b->dtype == IR_I64);
    for (int i = 0; ok && i < b->rank; i++)
        ok = b->dims[i] == a->dims[i ? i + 1 : 0];
    if (!ok) {
        el_error(e, c->args[1].loc, "%s expects i32 or i64 labels shaped as the %s %s without "
                 "their class axis 1, got %s", name, what, ir_type_str(a, ta, sizeof ta),
                 ir_type_str(b, tl, sizeof tl));
        return error_val();
    }
    ir_node *n = node_begin(e, c, op, 2, in);
    if (op == IR_OP_CROSS_ENTROPY)
        ir_set_float(el_graph(e), n, "label_smoothing", eps);
    ir_set_int(el_graph(e), n, "ignore_index", ignore);
    ir_set_int(el_graph(e), n, "split", 1);
    return node_end(e, c, n);
}

/* cross_entropy(logits, label, label_smoothing=0.0, ignore_index=-100):
 * F.cross_entropy(reduction="mean"), logits [n, c] or [n, c, d...] (classes on
 * axis 1), labels [n] or [n, d...]; the mean over the labels that are not
 * ignore_index (NaN when all are, as PyTorch's 0/0) */
static val b_cross_entropy(elab *e, call *c) { return class_loss(e, c, IR_OP_CROSS_ENTROPY, 3); }
/* nll_loss(input, label, ignore_index=-100): F.nll_loss(reduction="mean") on
 * log-probabilities shaped as cross_entropy's logits, -input[label] averaged
 * as cross_entropy's */
static val b_nll_loss(elab *e, call *c) { return class_loss(e, c, IR_OP_NLL_LOSS, 2); }
static val b_mse(elab *e, call *c) { return binary(e, c, IR_OP_MSE); }

/* ---- reductions, and the losses made of other ops ---- */

/* One node of a built-in made of several: op over in, named c->path + "." +
 * part, or c->path itself for the last (part NULL); a shape attribute when
 * shape is not NULL; for a const (nin 0), value of type *shape. */
static ir_value *piece(elab *e, call *c, const char *part, ir_op op, int nin, ir_value **in,
                       const ir_type *shape, double value)
{
    char name[512];
    call s = *c;
    if (part) {
        snprintf(name, sizeof name, "%s.%s", c->path, part);
        s.path = name;
    }
    ir_node *n = node_begin(e, &s, op, nin, in);
    if (op == IR_OP_CONST) {
        ir_set_float(el_graph(e), n, "value", value);
        n->out[0]->type = *shape;
    } else if (shape) {
        ir_set_ints(el_graph(e), n, "shape", shape->rank, shape->dims);
    }
    val v = node_end(e, &s, n);
    return v.k == V_TENSOR ? v.t : NULL;
}

/* x summed (or averaged) over the axes red[] marks: sum_to the shape with 1
 * there, times 1/count for a mean, and reshaped to drop those axes unless
 * keep.  The last node is named c->path. */
static ir_value *reduce_axes(elab *e, call *c, ir_value *x, const int *red, int keep, int mean)
{
    ir_type kept = x->type, dropped = {x->type.dtype, 0, {0}};
    int64_t count = 1;
    for (int i = 0; i < x->type.rank; i++) {
        if (red[i]) {
            count *= x->type.dims[i];
            kept.dims[i] = 1;
        } else {
            dropped.dims[dropped.rank++] = x->type.dims[i];
        }
    }
    int reshape = !keep && dropped.rank != kept.rank;
    ir_value *y = piece(e, c, mean || reshape ? "sum" : NULL, IR_OP_SUM_TO, 1, &x, &kept, 0);
    if (y && mean) {
        ir_type one = {x->type.dtype, 0, {0}};
        ir_value *in[2] = {y, piece(e, c, "count", IR_OP_CONST, 0, NULL, &one, 1.0 / count)};
        y = in[1] ? piece(e, c, reshape ? "mean" : NULL, IR_OP_MUL, 2, in, NULL, 0) : NULL;
    }
    if (y && reshape)
        y = piece(e, c, NULL, IR_OP_RESHAPE, 1, &y, &dropped, 0);
    return y;
}

/* sum(x, axis=?, keepdims=false) and mean(...): over every axis, or one (an
 * int) or several (a list), PyTorch's x.sum(dim, keepdim) */
static val reduction(elab *e, call *c, int mean)
{
    ir_value *x = arg_tensor(e, c, 0);
    int keep, red[IR_MAX_RANK] = {0}, rank;
    if (!x || !arg_bool(e, c, 2, &keep))
        return error_val();
    rank = x->type.rank;
    if (!arg_axes(e, c, 1, rank, red))
        return error_val();
    ir_value *y = reduce_axes(e, c, x, red, keep, mean);
    return y ? tensor_val(y) : error_val();
}

/* max(x, axis=?, keepdims=false), min and argmax: along one axis (torch.max(x,
 * dim, keepdim).values, argmax(x, dim, keepdim)), or over every element of x
 * flattened, as torch.max(x) and argmax(x), whose gradient is split evenly
 * between tied elements (reduce_max's ties); axis and keepdims are arguments
 * iaxis and iaxis + 1 */
static val extreme(elab *e, call *c, ir_op op, int iaxis)
{
    ir_value *x = c->args[0].v.t, *y = x;
    int keep, given = arg_given(c, iaxis);
    int64_t axis = 0;
    if (!arg_bool(e, c, iaxis + 1, &keep))
        return error_val();
    if (!ir_is_float(x->type.dtype)) { /* said of x, not of x flattened */
        char tb[128];
        el_error(e, c->args[0].loc, "%s takes a floating-point tensor, got %s", c->fn,
                 ir_type_str(&x->type, tb, sizeof tb));
        return error_val();
    }
    if (given && (axis = axis_of(e, c, iaxis, x->type.rank)) < 0)
        return error_val();
    ir_type flat = {x->type.dtype, 1, {ir_type_numel(&x->type)}}, out = x->type;
    if (!given && x->type.rank != 1)
        y = piece(e, c, "flat", IR_OP_RESHAPE, 1, &x, &flat, 0);
    if (!given) { /* every axis: all ones kept, or none */
        out.rank = keep ? x->type.rank : 0;
        for (int i = 0; i < out.rank; i++)
            out.dims[i] = 1;
    } else if (!keep) {
        out.rank--;
        for (int i = (int)axis; i < out.rank; i++)
            out.dims[i] = x->type.dims[i + 1];
    } else {
        out.dims[axis] = 1;
    }
    ir_type reduced = given ? x->type : flat;
    reduced.dims[axis] = 1;
    int reshape = out.rank != reduced.rank ||
                  memcmp(out.dims, reduced.dims, (size_t)out.rank * sizeof *out.dims) != 0;
    if (!y)
        return error_val();
    char name[512];
    call s = *c;
    if (reshape) {
        snprintf(name, sizeof name, "%s.%s", c->path, ir_ops[op].name);
        s.path = name;
    }
    ir_node *n = node_begin(e, &s, op, 1, &y);
    ir_set_int(el_graph(e), n, "axis", axis);
    if (op != IR_OP_ARGMAX) /* torch.max(x) splits its gradient between ties */
        ir_set_int(el_graph(e), n, "ties", !given);
    val r = node_end(e, &s, n);
    if (r.k != V_TENSOR || !reshape)
        return r;
    out.dtype = r.t->type.dtype;
    y = piece(e, c, NULL, IR_OP_RESHAPE, 1, &r.t, &out, 0);
    return y ? tensor_val(y) : error_val();
}

static val b_argmax(elab *e, call *c)
{
    return arg_tensor(e, c, 0) ? extreme(e, c, IR_OP_ARGMAX, 1) : error_val();
}

static val b_sum(elab *e, call *c) { return reduction(e, c, 0); }
static val b_mean(elab *e, call *c) { return reduction(e, c, 1); }

/* The mean of a loss's elements, a scalar (PyTorch's reduction="mean") */
static val mean_all(elab *e, call *c, ir_value *x)
{
    int red[IR_MAX_RANK];
    for (int i = 0; i < IR_MAX_RANK; i++)
        red[i] = 1;
    ir_value *y = x ? reduce_axes(e, c, x, red, 0, 1) : NULL;
    return y ? tensor_val(y) : error_val();
}

/* The two operands of a loss comparing them elementwise, in in[]: tensors of
 * one type.  0 after an error. */
static int loss_pair(elab *e, call *c, ir_value **in)
{
    in[0] = arg_tensor(e, c, 0), in[1] = arg_tensor(e, c, 1);
    if (!in[0] || !in[1])
        return 0;
    if (!ir_type_eq(&in[0]->type, &in[1]->type)) {
        char a[128], b[128];
        el_error(e, c->loc, "%s takes two tensors of one type, got %s and %s", c->fn,
                 ir_type_str(&in[0]->type, a, sizeof a), ir_type_str(&in[1]->type, b, sizeof b));
        return 0;
    }
    return 1;
}

/* l1_loss(a, b): F.l1_loss, mean |a - b| */
static val b_l1_loss(elab *e, call *c)
{
    ir_value *in[2];
    if (!loss_pair(e, c, in))
        return error_val();
    ir_value *d = piece(e, c, "diff", IR_OP_SUB, 2, in, NULL, 0);
    return mean_all(e, c, d ? piece(e, c, "abs", IR_OP_ABS, 1, &d, NULL, 0) : NULL);
}

/* smooth_l1_loss(a, b, beta=1.0): F.smooth_l1_loss, and huber_loss(a, b,
 * delta=1.0): F.huber_loss, means of PyTorch's formulas over z = |a - b|:
 * z < beta ? 0.5 z^2 / beta : z - 0.5 beta, and z < delta ? 0.5 z^2 :
 * delta (z - 0.5 delta), as a where between the two (its gradient is the
 * chosen branch's, as PyTorch's: at z = beta the linear one, which equals
 * the other there).  smooth_l1_loss with beta 0 is l1_loss, as PyTorch's
 * (0.5 / beta would make the unchosen branch's gradient NaN). */
static val robust_loss(elab *e, call *c, int huber)
{
    const char *what = huber ? "delta" : "beta";
    ir_value *in[2];
    double k;
    if (!loss_pair(e, c, in) || !arg_float(e, c, 2, &k))
        return error_val();
    if (huber ? !(k > 0) : !(k >= 0)) {
        el_error(e, c->args[2].loc, "%s's %s must be %s, got %g", c->fn, what,
                 huber ? "positive" : "0 or more", k);
        return error_val();
    }
    ir_value *d = piece(e, c, "diff", IR_OP_SUB, 2, in, NULL, 0);
    ir_value *z = d ? piece(e, c, "abs", IR_OP_ABS, 1, &d, NULL, 0) : NULL;
    if (!z || k == 0)
        return mean_all(e, c, z);
    ir_type one = {d->type.dtype, 0, {0}};
    ir_value *dd[2] = {d, d};
    ir_value *q[2] = {piece(e, c, "square", IR_OP_MUL, 2, dd, NULL, 0),
                      piece(e, c, "half", IR_OP_CONST, 0, NULL, &one, huber ? 0.5 : 0.5 / k)};
    ir_value *l[2] = {z, piece(e, c, "offset", IR_OP_CONST, 0, NULL, &one, 0.5 * k)};
    ir_value *w[3] = {NULL, q[0] && q[1] ? piece(e, c, "quadratic", IR_OP_MUL, 2, q, NULL, 0)
                                         : NULL,
                      l[1] ? piece(e, c, "linear", IR_OP_SUB, 2, l, NULL, 0) : NULL};
    ir_value *bound = piece(e, c, what, IR_OP_CONST, 0, NULL, &one, k);
    if (!w[1] || !w[2] || !bound)
        return error_val();
    if (huber) {
        ir_value *m[2] = {w[2], bound};
        if (!(w[2] = piece(e, c, "scaled", IR_OP_MUL, 2, m, NULL, 0)))
            return error_val();
    }
    ir_value *lt[2] = {z, bound};
    if (!(w[0] = piece(e, c, "inside", IR_OP_LT, 2, lt, NULL, 0)))
        return error_val();
    return mean_all(e, c, piece(e, c, "each", IR_OP_WHERE, 3, w, NULL, 0));
}

static val b_smooth_l1_loss(elab *e, call *c) { return robust_loss(e, c, 0); }
static val b_huber_loss(elab *e, call *c) { return robust_loss(e, c, 1); }

/* bce_with_logits(logits, target): F.binary_cross_entropy_with_logits, the
 * mean of softplus(x) - x t, which is log(1 + e^x) - x t without overflow */
static val b_bce_with_logits(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0), *t = arg_tensor(e, c, 1);
    if (!x || !t)
        return error_val();
    if (!ir_type_eq(&x->type, &t->type)) {
        char a[128], b[128];
        el_error(e, c->loc, "bce_with_logits takes logits and targets of one type, got %s "
                 "and %s", ir_type_str(&x->type, a, sizeof a), ir_type_str(&t->type, b, sizeof b));
        return error_val();
    }
    ir_value *in[2] = {x, t};
    ir_value *sp = piece(e, c, "softplus", IR_OP_SOFTPLUS, 1, &x, NULL, 0);
    ir_value *xt = sp ? piece(e, c, "xt", IR_OP_MUL, 2, in, NULL, 0) : NULL;
    ir_value *d[2] = {sp, xt};
    return mean_all(e, c, xt ? piece(e, c, "each", IR_OP_SUB, 2, d, NULL, 0) : NULL);
}

static val b_dropout(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double p;
    if (!x || !arg_float(e, c, 1, &p))
        return error_val();
    ir_node *n = node_begin(e, c, IR_OP_DROPOUT, 1, &x);
    ir_set_float(el_graph(e), n, "p", p);
    return node_end(e, c, n);
}

/* dropout2d(x, p=0.5): nn.Dropout2d on x [n, c, h, w]: in training each
 * (sample, channel) zeroed with probability p, the others scaled by 1/(1-p);
 * the identity at inference.  x times dropout of ones [n, c, 1, 1], the ones
 * made from x's corner (so that the batch splits with x) by comparisons,
 * which pass no gradient: eq(s, s) + ne(s, s) is 1 for NaN too */
static val b_dropout2d(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double p;
    if (!x || !arg_float(e, c, 1, &p))
        return error_val();
    if (x->type.rank != 4 || !ir_is_float(x->type.dtype)) {
        char buf[128];
        el_error(e, c->args[0].loc, "dropout2d expects a floating-point tensor [n, c, h, w], "
                 "got %s", ir_type_str(&x->type, buf, sizeof buf));
        return error_val();
    }
    if (!(p >= 0 && p < 1)) {
        el_error(e, c->args[1].loc, "dropout2d's p must be in [0, 1), got %g", p);
        return error_val();
    }
    ir_value *s = x;
    for (int axis = 2; axis < 4 && s; axis++) { /* x[:, :, :1, :1] */
        char name[512];
        call sc = *c;
        snprintf(name, sizeof name, "%s.%s", c->path, axis == 2 ? "row" : "corner");
        sc.path = name;
        ir_node *n = node_begin(e, &sc, IR_OP_SLICE, 1, &s);
        ir_set_int(el_graph(e), n, "axis", axis);
        ir_set_int(el_graph(e), n, "start", 0);
        ir_set_int(el_graph(e), n, "size", 1);
        val v = node_end(e, &sc, n);
        s = v.k == V_TENSOR ? v.t : NULL;
    }
    ir_value *ss[2] = {s, s};
    ir_value *one[2] = {s ? piece(e, c, "same", IR_OP_EQ, 2, ss, NULL, 0) : NULL,
                        s ? piece(e, c, "differ", IR_OP_NE, 2, ss, NULL, 0) : NULL};
    ir_value *ones = one[0] && one[1] ? piece(e, c, "ones", IR_OP_ADD, 2, one, NULL, 0) : NULL;
    if (!ones)
        return error_val();
    call dc = *c;
    char name[512];
    snprintf(name, sizeof name, "%s.mask", c->path);
    dc.path = name;
    ir_node *d = node_begin(e, &dc, IR_OP_DROPOUT, 1, &ones);
    ir_set_float(el_graph(e), d, "p", p);
    val m = node_end(e, &dc, d);
    if (m.k != V_TENSOR)
        return error_val();
    ir_value *xm[2] = {x, m.t};
    ir_value *y = piece(e, c, NULL, IR_OP_MUL, 2, xm, NULL, 0);
    return y ? tensor_val(y) : error_val();
}

static val b_softmax_like(elab *e, call *c, ir_op op)
{
    ir_value *x = arg_tensor(e, c, 0);
    if (!x)
        return error_val();
    int64_t axis = axis_of(e, c, 1, x->type.rank);
    if (axis < 0)
        return error_val();
    ir_node *n = node_begin(e, c, op, 1, &x);
    ir_set_int(el_graph(e), n, "axis", axis);
    return node_end(e, c, n);
}

static val b_softmax(elab *e, call *c) { return b_softmax_like(e, c, IR_OP_SOFTMAX); }
static val b_log_softmax(elab *e, call *c) { return b_softmax_like(e, c, IR_OP_LOG_SOFTMAX); }

/* Whether attention's q, k and v (in) have head counts (dim -3) that it takes:
 * equal, or with gqa (enable_gqa) k's and v's one count dividing q's; else an
 * error at the operand that does not fit.  Operands of other ranks are left to
 * the shape rule. */
static int attention_heads(elab *e, call *c, ir_value *const in[3], int gqa)
{
    const ir_type *q = &in[0]->type, *k = &in[1]->type, *v = &in[2]->type;
    int r = q->rank;
    if (r < 3 || k->rank != r || v->rank != r)
        return 1;
    int64_t hq = q->dims[r - 3], hk = k->dims[r - 3], hv = v->dims[r - 3];
    char ta[128], tb[128];
    if (!gqa && (hk != hq || hv != hq)) {
        int i = hk != hq ? 1 : 2;
        el_error(e, c->args[i].loc, "%s: %s's %lld heads (dim -3 of %s) differ from q's %lld "
                 "(%s): different head counts need enable_gqa = true (grouped-query "
                 "attention)", c->fn, i == 1 ? "k" : "v", (long long)in[i]->type.dims[r - 3],
                 ir_type_str(&in[i]->type, ta, sizeof ta), (long long)hq,
                 ir_type_str(q, tb, sizeof tb));
        return 0;
    }
    if (hv != hk) {
        el_error(e, c->args[2].loc, "%s: v's %lld heads (dim -3 of %s) differ from k's %lld "
                 "(%s): grouped-query attention needs one head count for k and v", c->fn,
                 (long long)hv, ir_type_str(v, ta, sizeof ta), (long long)hk,
                 ir_type_str(k, tb, sizeof tb));
        return 0;
    }
    if (hk != hq && (hk < 1 || hq % hk != 0)) {
        el_error(e, c->args[1].loc, "%s: k's %lld heads (dim -3 of %s) do not divide q's %lld "
                 "(%s): grouped-query attention needs q's head count a multiple of k's and "
                 "v's", c->fn, (long long)hk, ir_type_str(k, ta, sizeof ta), (long long)hq,
                 ir_type_str(q, tb, sizeof tb));
        return 0;
    }
    return 1;
}

/* F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
 * enable_gqa=enable_gqa): one fused attention node, its scale 1 / sqrt(e)
 * unless given; with enable_gqa, k and v may have fewer heads than q (the
 * node's shapes say it: ir/ops.def). */
static val b_attention(elab *e, call *c)
{
    ir_value *in[3];
    for (int i = 0; i < 3; i++)
        if (!(in[i] = arg_tensor(e, c, i)))
            return error_val();
    int causal, gqa;
    double scale = 0;
    if (!arg_bool(e, c, 3, &causal) || (arg_given(c, 4) && !arg_float(e, c, 4, &scale)) ||
        !arg_bool(e, c, 5, &gqa) || !attention_heads(e, c, in, gqa))
        return error_val();
    if (!arg_given(c, 4) && in[0]->type.rank >= 1)
        scale = 1 / sqrt((double)in[0]->type.dims[in[0]->type.rank - 1]);
    ir_node *n = node_begin(e, c, IR_OP_ATTENTION, 3, in);
    ir_set_int(el_graph(e), n, "causal", causal);
    ir_set_float(el_graph(e), n, "scale", scale);
    return node_end(e, c, n);
}

/* A positive count argument (channels, units, ...). */
static int count_arg(elab *e, call *c, int i, int64_t *out)
{
    if (!arg_int(e, c, i, out))
        return 0;
    if (*out < 1) {
        el_error(e, c->args[i].loc, "%s needs a positive count, got %lld", c->fn,
                 (long long)*out);
        return 0;
    }
    return 1;
}

/* The window arguments of a convolution: kernel, stride and pad at args[first ..
 * first + 2] and dilation at args[dil], each an int (one == 1) or a pair (one ==
 * 0), kernel and stride and dilation positive, pad not negative, each below
 * 2^31 so that the output sizes computed from them cannot overflow. */
static int conv_window(elab *e, call *c, int first, int dil, int one, int64_t k[2],
                       int64_t st[2], int64_t pd[2], int64_t dl[2])
{
    int64_t *v[4] = {k, st, pd, dl};
    static const char *what[4] = {"kernel", "stride", "pad", "dilation"};
    for (int i = 0; i < 4; i++) {
        int a = i < 3 ? first + i : dil;
        if (one ? !arg_int(e, c, a, v[i]) : !arg_pair(e, c, a, v[i]))
            return 0;
        if (one)
            v[i][1] = v[i][0], v[i][0] = i == 2 ? 0 : 1; /* the height of [n, c, 1, l] */
        if (v[i][0] < (i == 2 ? 0 : 1) || v[i][1] < (i == 2 ? 0 : 1)) {
            el_error(e, c->args[a].loc, "%s %s must be %s", c->fn, what[i],
                     i == 2 ? "0 or more" : "positive");
            return 0;
        }
        if (v[i][0] > INT32_MAX || v[i][1] > INT32_MAX) {
            el_error(e, c->args[a].loc, "%s %s is too large", c->fn, what[i]);
            return 0;
        }
    }
    return 1;
}

/* A convolution's parameters: weight of type wt with the initializer at
 * args[init], and unless !bias a bias [out_c] with the one at args[init + 1],
 * which PyTorch bounds by the weight's fan-in (torch.nn.init's: wt.dims[1] times
 * the kernel's size, for a transposed convolution too).  w[1] is NULL without a
 * bias; 0 when a parameter could not be made. */
static int conv_params(elab *e, call *c, ir_type wt, int64_t out_c, int bias, int init,
                       ir_value *w[2])
{
    w[0] = make_param(e, c, "weight", IR_VALUE_PARAM, wt, c->args[init].v, INIT_TORCH_DEFAULT);
    w[1] = NULL;
    if (!w[0] || !bias)
        return w[0] != NULL;
    val binit = c->args[init + 1].v;
    if (binit.k != V_INIT) {
        double fan_in = (double)wt.dims[1];
        for (int i = 2; i < wt.rank; i++)
            fan_in *= (double)wt.dims[i];
        binit = (val){.k = V_INIT, .i = INIT_TORCH_DEFAULT, .f = fan_in};
    }
    w[1] = make_param(e, c, "bias", IR_VALUE_PARAM, (ir_type){wt.dtype, 1, {out_c}}, binit,
                      INIT_TORCH_DEFAULT);
    return w[1] != NULL;
}

/* Whether groups divides both channel counts; reports at args[i] if not. */
static int conv_groups(elab *e, call *c, int i, int64_t groups, int64_t in_c, int64_t out_c)
{
    if (groups >= 1 && in_c % groups == 0 && out_c % groups == 0)
        return 1;
    el_error(e, c->args[i].loc, "%s groups (%lld) must divide both the input channels (%lld) "
             "and the output channels (%lld)", c->fn, (long long)groups, (long long)in_c,
             (long long)out_c);
    return 0;
}

/* A conv2d or conv2d_grad_input node over in, named as piece() names them, with
 * the window attributes and, for conv2d_grad_input, the shape of its result. */
static ir_value *conv_piece(elab *e, call *c, const char *part, ir_op op, int nin,
                            ir_value **in, const int64_t st[2], const int64_t pd[2],
                            const int64_t dl[2], int64_t groups, const ir_type *shape)
{
    char name[512];
    call s = *c;
    if (part) {
        snprintf(name, sizeof name, "%s.%s", c->path, part);
        s.path = name;
    }
    ir_node *n = node_begin(e, &s, op, nin, in);
    ir_graph *g = el_graph(e);
    ir_set_ints(g, n, "stride", 2, st);
    ir_set_ints(g, n, "pad", 2, pd);
    ir_set_ints(g, n, "dilation", 2, dl);
    ir_set_int(g, n, "groups", groups);
    if (shape)
        ir_set_ints(g, n, "shape", shape->rank, shape->dims);
    val v = node_end(e, &s, n);
    return v.k == V_TENSOR ? v.t : NULL;
}

/* Whether x is a floating-point tensor of the rank a convolution expects;
 * reports at the call if not. */
static int conv_rank(elab *e, call *c, const ir_value *x, int rank)
{
    if (x->type.rank == rank && ir_is_float(x->type.dtype))
        return 1;
    char buf[128];
    el_error(e, c->loc, "%s expects %d-d %sinput, got %s", c->fn, rank,
             x->type.rank == rank ? "floating-point " : "",
             ir_type_str(&x->type, buf, sizeof buf));
    return 0;
}

/* conv2d(x, channels, kernel, stride=1, pad=0, dilation=1, groups=1, bias=true,
 *        init=?, bias_init=?): nn.Conv2d */
static val b_conv2d(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t out_c, k[2], st[2], pd[2], dl[2], groups;
    int bias;
    if (!x || !count_arg(e, c, 1, &out_c) || !conv_window(e, c, 2, 5, 0, k, st, pd, dl) ||
        !arg_int(e, c, 6, &groups) || !arg_bool(e, c, 7, &bias) || !conv_rank(e, c, x, 4))
        return error_val();
    int64_t in_c = x->type.dims[1];
    ir_value *in[3] = {x};
    if (!conv_groups(e, c, 6, groups, in_c, out_c) ||
        !conv_params(e, c, (ir_type){x->type.dtype, 4, {out_c, in_c / groups, k[0], k[1]}},
                     out_c, bias, 8, in + 1))
        return error_val();
    ir_value *y = conv_piece(e, c, NULL, IR_OP_CONV2D, bias ? 3 : 2, in, st, pd, dl, groups, NULL);
    return y ? tensor_val(y) : error_val();
}

/* conv1d(x, channels, kernel, stride=1, pad=0, dilation=1, groups=1, bias=true,
 *        init=?, bias_init=?): nn.Conv1d on x [n, c, l], its weight [channels,
 * c/groups, kernel] as PyTorch's.  A conv2d on x viewed as [n, c, 1, l] with the
 * weight viewed as [channels, c/groups, 1, kernel]: reshapes, so the gradients are
 * conv2d's. */
static val b_conv1d(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t out_c, k[2], st[2], pd[2], dl[2], groups;
    int bias;
    if (!x || !count_arg(e, c, 1, &out_c) || !conv_window(e, c, 2, 5, 1, k, st, pd, dl) ||
        !arg_int(e, c, 6, &groups) || !arg_bool(e, c, 7, &bias) || !conv_rank(e, c, x, 3))
        return error_val();
    int64_t in_c = x->type.dims[1], len = x->type.dims[2];
    if (len + 2 * pd[1] < dl[1] * (k[1] - 1) + 1) {
        el_error(e, c->args[2].loc, "conv1d kernel %lld (dilation %lld) does not fit input "
                 "length %lld with padding %lld", (long long)k[1], (long long)dl[1],
                 (long long)len, (long long)pd[1]);
        return error_val();
    }
    ir_type wt = {x->type.dtype, 3, {out_c, in_c / groups, k[1]}};
    ir_value *in[3], *p[2];
    if (!conv_groups(e, c, 6, groups, in_c, out_c) || !conv_params(e, c, wt, out_c, bias, 8, p))
        return error_val();
    ir_type x4 = {x->type.dtype, 4, {x->type.dims[0], in_c, 1, x->type.dims[2]}};
    ir_type w4 = {wt.dtype, 4, {out_c, in_c / groups, 1, k[1]}};
    in[0] = piece(e, c, "x", IR_OP_RESHAPE, 1, &x, &x4, 0);
    in[1] = in[0] ? piece(e, c, "w", IR_OP_RESHAPE, 1, &p[0], &w4, 0) : NULL;
    in[2] = p[1];
    ir_value *y = in[1] ? conv_piece(e, c, "conv", IR_OP_CONV2D, bias ? 3 : 2, in, st, pd, dl,
                                     groups, NULL) : NULL;
    if (!y)
        return error_val();
    ir_type y3 = {y->type.dtype, 3, {y->type.dims[0], y->type.dims[1], y->type.dims[3]}};
    y = piece(e, c, NULL, IR_OP_RESHAPE, 1, &y, &y3, 0);
    return y ? tensor_val(y) : error_val();
}

/* conv_transpose2d(x, channels, kernel, stride=1, pad=0, output_padding=0,
 *                  dilation=1, groups=1, bias=true, init=?, bias_init=?):
 * nn.ConvTranspose2d, its weight [c, channels/groups, kh, kw] as PyTorch's.  A
 * transposed convolution is the gradient of conv2d with respect to its input, so
 * it is the op conv2d_grad_input of x and the weight (a conv2d from [n, channels,
 * H, W] to x's shape has exactly this weight), with H = (h - 1) stride - 2 pad +
 * dilation (kh - 1) + output_padding + 1; the bias is added, broadcast over h and w.
 * output_padding must be below stride (PyTorch also takes one below dilation). */
static val b_conv_transpose2d(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t out_c, k[2], st[2], pd[2], op[2], dl[2], groups;
    int bias;
    if (!x || !count_arg(e, c, 1, &out_c) || !conv_window(e, c, 2, 6, 0, k, st, pd, dl) ||
        !arg_pair(e, c, 5, op) || !arg_int(e, c, 7, &groups) || !arg_bool(e, c, 8, &bias) ||
        !conv_rank(e, c, x, 4))
        return error_val();
    for (int i = 0; i < 2; i++)
        if (op[i] < 0 || op[i] >= st[i]) {
            el_error(e, c->args[5].loc, "conv_transpose2d output_padding (%lld) must be 0 or "
                     "more and smaller than the stride (%lld)", (long long)op[i],
                     (long long)st[i]);
            return error_val();
        }
    int64_t in_c = x->type.dims[1];
    ir_type yt = {x->type.dtype, 4, {x->type.dims[0], out_c, 0, 0}};
    for (int i = 0; i < 2; i++) {
        yt.dims[2 + i] = (x->type.dims[2 + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (k[i] - 1) +
                         op[i] + 1;
        if (yt.dims[2 + i] < 1) {
            char buf[128];
            el_error(e, c->args[4].loc, "conv_transpose2d pad %lld leaves no output for input "
                     "%s", (long long)pd[i], ir_type_str(&x->type, buf, sizeof buf));
            return error_val();
        }
    }
    ir_value *p[2];
    if (!conv_groups(e, c, 7, groups, in_c, out_c) ||
        !conv_params(e, c, (ir_type){x->type.dtype, 4, {in_c, out_c / groups, k[0], k[1]}},
                     out_c, bias, 9, p))
        return error_val();
    ir_value *in[2] = {x, p[0]};
    ir_value *y = conv_piece(e, c, bias ? "conv" : NULL, IR_OP_CONV2D_GRAD_INPUT, 2, in, st, pd,
                             dl, groups, &yt);
    if (y && bias) {
        ir_type bt = {x->type.dtype, 3, {out_c, 1, 1}};
        ir_value *sum[2] = {y, piece(e, c, "b", IR_OP_RESHAPE, 1, &p[1], &bt, 0)};
        y = sum[1] ? piece(e, c, NULL, IR_OP_ADD, 2, sum, NULL, 0) : NULL;
    }
    return y ? tensor_val(y) : error_val();
}

/* dense(x, units, bias=true, init=?, bias_init=?) */
static val b_dense(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t units;
    int bias;
    if (!x || !count_arg(e, c, 1, &units) || !arg_bool(e, c, 2, &bias))
        return error_val();
    if (x->type.rank < 1) {
        el_error(e, c->loc, "dense expects a tensor of rank 1 or more, got a scalar");
        return error_val();
    }
    int64_t in_f = x->type.dims[x->type.rank - 1];
    ir_value *in[3] = {x, make_param(e, c, "weight", IR_VALUE_PARAM,
                                     (ir_type){x->type.dtype, 2, {units, in_f}}, c->args[3].v,
                                     INIT_TORCH_DEFAULT)};
    if (!in[1])
        return error_val();
    if (bias) {
        val binit = c->args[4].v;
        if (binit.k != V_INIT)
            binit = (val){.k = V_INIT, .i = INIT_TORCH_DEFAULT, .f = (double)in_f};
        in[2] = make_param(e, c, "bias", IR_VALUE_PARAM, (ir_type){x->type.dtype, 1, {units}},
                           binit, INIT_TORCH_DEFAULT);
        if (!in[2])
            return error_val();
    }
    return node_end(e, c, node_begin(e, c, IR_OP_DENSE, bias ? 3 : 2, in));
}

/* A normalization's scale and shift of type t: the parameters weight (ones)
 * and bias (zeros) when affine, else constants 1 and 0 named c->path + ".one"
 * and ".zero" (nn.LayerNorm(elementwise_affine=False), nn.BatchNorm2d(
 * affine=False): no parameters; autodiff gives constants no gradient). */
static int norm_affine(elab *e, call *c, int affine, ir_type t, ir_value **w)
{
    val none = {.k = V_NONE};
    if (affine) {
        w[0] = make_param(e, c, "weight", IR_VALUE_PARAM, t, none, INIT_ONES);
        w[1] = make_param(e, c, "bias", IR_VALUE_PARAM, t, none, INIT_ZEROS);
    } else {
        w[0] = piece(e, c, "one", IR_OP_CONST, 0, NULL, &t, 1);
        w[1] = piece(e, c, "zero", IR_OP_CONST, 0, NULL, &t, 0);
    }
    return w[0] && w[1];
}

/* batchnorm(x, eps=1e-5, momentum=0.1, affine=true): nn.BatchNorm2d (1d, 3d):
 * weight, bias (unless affine is false), running_mean, running_var */
static val b_batchnorm(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double eps, momentum;
    int affine;
    if (!x || !arg_float(e, c, 1, &eps) || !arg_float(e, c, 2, &momentum) ||
        !arg_bool(e, c, 3, &affine))
        return error_val();
    if (x->type.rank < 2) {
        char buf[128];
        el_error(e, c->loc, "batchnorm expects a tensor [n, c, ...], got %s",
                 ir_type_str(&x->type, buf, sizeof buf));
        return error_val();
    }
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        el_error(e, c->loc, "batchnorm needs eps > 0 and momentum in [0, 1]");
        return error_val();
    }
    ir_type t = {x->type.dtype, 1, {x->type.dims[1]}};
    val none = {.k = V_NONE};
    ir_value *in[5] = {x};
    if (!norm_affine(e, c, affine, t, in + 1))
        return error_val();
    in[3] = make_param(e, c, "running_mean", IR_VALUE_BUFFER, t, none, INIT_ZEROS);
    in[4] = make_param(e, c, "running_var", IR_VALUE_BUFFER, t, none, INIT_ONES);
    if (!in[3] || !in[4])
        return error_val();
    ir_node *n = node_begin(e, c, IR_OP_BATCHNORM, 5, in);
    ir_set_float(el_graph(e), n, "eps", eps);
    ir_set_float(el_graph(e), n, "momentum", momentum);
    return node_end(e, c, n);
}

/* A layernorm of x over its last dims dimensions, without parameters
 * (weight 1, bias 0), named part. */
static ir_value *normalized(elab *e, call *c, const char *part, ir_value *x, int dims, double eps)
{
    ir_type t = {x->type.dtype, dims, {0}};
    for (int i = 0; i < dims; i++)
        t.dims[i] = x->type.dims[x->type.rank - dims + i];
    ir_value *in[3] = {x};
    if (!norm_affine(e, c, 0, t, in + 1))
        return NULL;
    call s = *c;
    char name[512];
    if (part) {
        snprintf(name, sizeof name, "%s.%s", c->path, part);
        s.path = name;
    }
    ir_node *n = node_begin(e, &s, IR_OP_LAYERNORM, 3, in);
    ir_set_float(el_graph(e), n, "eps", eps);
    val v = node_end(e, &s, n);
    return v.k == V_TENSOR ? v.t : NULL;
}

/* y [n, c, ...] times weight [c] plus bias [c], per channel (parameters
 * shaped as PyTorch's), the last node named c->path. */
static val channel_affine(elab *e, call *c, ir_value *y)
{
    ir_type t = {y->type.dtype, 1, {y->type.dims[1]}}, col = {y->type.dtype, y->type.rank - 1,
                                                              {y->type.dims[1]}};
    for (int i = 1; i < col.rank; i++)
        col.dims[i] = 1;
    ir_value *w[2];
    if (!norm_affine(e, c, 1, t, w))
        return error_val();
    ir_value *ws = piece(e, c, "weight_col", IR_OP_RESHAPE, 1, &w[0], &col, 0);
    ir_value *bs = piece(e, c, "bias_col", IR_OP_RESHAPE, 1, &w[1], &col, 0);
    ir_value *m[2] = {y, ws};
    ir_value *a[2] = {ws && bs ? piece(e, c, "scaled", IR_OP_MUL, 2, m, NULL, 0) : NULL, bs};
    if (!a[0])
        return error_val();
    ir_value *out = piece(e, c, NULL, IR_OP_ADD, 2, a, NULL, 0);
    return out ? tensor_val(out) : error_val();
}

/* A normalization's input: floating-point, of rank min_rank or more (shape
 * names the dimensions in the message); 0 having reported. */
static int norm_input(elab *e, call *c, const ir_value *x, int min_rank, const char *shape)
{
    char buf[128];
    if (x->type.rank >= min_rank && ir_is_float(x->type.dtype))
        return 1;
    el_error(e, c->args[0].loc, "%s expects a floating-point tensor %s, got %s", c->fn, shape,
             ir_type_str(&x->type, buf, sizeof buf));
    return 0;
}

/* eps, argument i, above 0; 0 having reported */
static int eps_positive(elab *e, call *c, int i, double eps)
{
    if (eps > 0)
        return 1;
    el_error(e, c->args[i].loc, "%s needs eps > 0", c->fn);
    return 0;
}

/* groupnorm(x, groups, eps=1e-5, affine=true): nn.GroupNorm(groups, c, eps,
 * affine) on x [n, c, ...]: each sample's groups of c / groups channels
 * normalized together (a layernorm of x reshaped to [n, groups, rest]), then
 * weight [c] (ones) and bias [c] (zeros) per channel */
static val b_groupnorm(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t groups;
    double eps;
    int affine;
    if (!x || !arg_int(e, c, 1, &groups) || !arg_float(e, c, 2, &eps) ||
        !arg_bool(e, c, 3, &affine))
        return error_val();
    if (!norm_input(e, c, x, 2, "[n, c, ...]"))
        return error_val();
    if (groups < 1 || x->type.dims[1] % groups) {
        el_error(e, c->args[1].loc, "groupnorm's groups (%lld) must divide the channels (%lld)",
                 (long long)groups, (long long)x->type.dims[1]);
        return error_val();
    }
    if (!eps_positive(e, c, 2, eps))
        return error_val();
    int64_t n = x->type.dims[0];
    ir_type grouped = {x->type.dtype, 3, {n, groups, n ? ir_type_numel(&x->type) / n / groups : 0}};
    ir_value *r = piece(e, c, "grouped", IR_OP_RESHAPE, 1, &x, &grouped, 0);
    ir_value *y = r ? normalized(e, c, "normalized", r, 1, eps) : NULL;
    if (y)
        y = piece(e, c, affine ? "ungrouped" : NULL, IR_OP_RESHAPE, 1, &y, &x->type, 0);
    if (!y)
        return error_val();
    return affine ? channel_affine(e, c, y) : tensor_val(y);
}

/* instancenorm(x, eps=1e-5, affine=false): nn.InstanceNorm1d/2d/3d on
 * x [n, c, ...] (no running statistics, as their default): each sample's
 * channel normalized over the rest (a layernorm over x's trailing rank - 2
 * dimensions); with affine, weight [c] and bias [c] per channel */
static val b_instancenorm(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    double eps;
    int affine;
    if (!x || !arg_float(e, c, 1, &eps) || !arg_bool(e, c, 2, &affine))
        return error_val();
    if (!norm_input(e, c, x, 3, "[n, c, d, ...]") || !eps_positive(e, c, 1, eps))
        return error_val();
    ir_value *y = normalized(e, c, affine ? "normalized" : NULL, x, x->type.rank - 2, eps);
    if (!y)
        return error_val();
    return affine ? channel_affine(e, c, y) : tensor_val(y);
}

/* layernorm(x, dims=1, eps=1e-5, affine=true): normalizes over the last dims
 * dimensions; nn.LayerNorm(elementwise_affine=affine) */
static val b_layernorm(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t dims;
    double eps;
    int affine;
    if (!x || !arg_int(e, c, 1, &dims) || !arg_float(e, c, 2, &eps) ||
        !arg_bool(e, c, 3, &affine))
        return error_val();
    if (dims < 1 || dims > x->type.rank) {
        el_error(e, c->args[1].loc, "layernorm dims must be between 1 and the rank (%d), "
                 "got %lld", x->type.rank, (long long)dims);
        return error_val();
    }
    if (!eps_positive(e, c, 2, eps))
        return error_val();
    ir_type t = {x->type.dtype, (int)dims, {0}};
    for (int i = 0; i < dims; i++)
        t.dims[i] = x->type.dims[x->type.rank - dims + i];
    ir_value *in[3] = {x};
    if (!norm_affine(e, c, affine, t, in + 1))
        return error_val();
    ir_node *n = node_begin(e, c, IR_OP_LAYERNORM, 3, in);
    ir_set_float(el_graph(e), n, "eps", eps);
    return node_end(e, c, n);
}

/* maxpool2d(x, kernel, stride=?, pad=0, dilation=1, ceil_mode=false) and
 * avgpool2d(x, kernel, stride=?, pad=0, count_include_pad=true, ceil_mode=false):
 * PyTorch's F.max_pool2d and F.avg_pool2d; stride defaults to the kernel, as there */
static val pool(elab *e, call *c, ir_op op)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t k[2], st[2], pd[2], last[2] = {1, 1};
    int include_pad = 1, ceil = 0;
    if (!x || !arg_pair(e, c, 1, k) || !arg_pair(e, c, 3, pd) || !arg_bool(e, c, 5, &ceil))
        return error_val();
    if (arg_given(c, 2)) {
        if (!arg_pair(e, c, 2, st))
            return error_val();
    } else {
        st[0] = k[0];
        st[1] = k[1];
    }
    if (op == IR_OP_MAXPOOL2D ? !arg_pair(e, c, 4, last) : !arg_bool(e, c, 4, &include_pad))
        return error_val();
    ir_node *n = node_begin(e, c, op, 1, &x);
    ir_graph *g = el_graph(e);
    ir_set_ints(g, n, "kernel", 2, k);
    ir_set_ints(g, n, "stride", 2, st);
    ir_set_ints(g, n, "pad", 2, pd);
    if (op == IR_OP_MAXPOOL2D)
        ir_set_ints(g, n, "dilation", 2, last);
    else
        ir_set_int(g, n, "count_include_pad", include_pad);
    ir_set_int(g, n, "ceil_mode", ceil);
    return node_end(e, c, n);
}

static val b_maxpool2d(elab *e, call *c) { return pool(e, c, IR_OP_MAXPOOL2D); }
static val b_avgpool2d(elab *e, call *c) { return pool(e, c, IR_OP_AVGPOOL2D); }

/* adaptive_avgpool2d(x, size): PyTorch's F.adaptive_avg_pool2d, size an int or
 * [oh, ow]; output (i, j) averages rows [floor(i h / oh), ceil((i + 1) h / oh))
 * and the columns likewise.  Size 1 is global_avgpool, and windows that tile the
 * input (h and w multiples of the size) are avgpool2d's: the same windows and
 * divisors, with those ops' kernels; any other size is an op of its own. */
static val b_adaptive_avgpool2d(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t size[2];
    if (!x || !arg_pair(e, c, 1, size))
        return error_val();
    if (x->type.rank != 4 || !ir_is_float(x->type.dtype)) {
        char tb[128];
        el_error(e, c->args[0].loc, "adaptive_avgpool2d takes a floating-point [n, c, h, w] "
                 "tensor, got %s", ir_type_str(&x->type, tb, sizeof tb));
        return error_val();
    }
    if (size[0] < 1 || size[1] < 1) {
        el_error(e, c->args[1].loc, "adaptive_avgpool2d needs a positive size, got [%lld, %lld]",
                 (long long)size[0], (long long)size[1]);
        return error_val();
    }
    int64_t h = x->type.dims[2], w = x->type.dims[3];
    if (size[0] == 1 && size[1] == 1)
        return node_end(e, c, node_begin(e, c, IR_OP_GLOBAL_AVGPOOL, 1, &x));
    ir_graph *g = el_graph(e);
    if (h % size[0] == 0 && w % size[1] == 0) {
        int64_t k[2] = {h / size[0], w / size[1]}, zeros[2] = {0, 0};
        ir_node *n = node_begin(e, c, IR_OP_AVGPOOL2D, 1, &x);
        ir_set_ints(g, n, "kernel", 2, k);
        ir_set_ints(g, n, "stride", 2, k);
        ir_set_ints(g, n, "pad", 2, zeros);
        ir_set_int(g, n, "count_include_pad", 1);
        ir_set_int(g, n, "ceil_mode", 0);
        return node_end(e, c, n);
    }
    ir_node *n = node_begin(e, c, IR_OP_ADAPTIVE_AVGPOOL2D, 1, &x);
    ir_set_ints(g, n, "size", 2, size);
    return node_end(e, c, n);
}

/* upsample(x, scale=?, size=?, mode="nearest", align_corners=false): PyTorch's
 * F.interpolate(x, size, scale_factor, mode, align_corners) on [n, c, h, w], the
 * output floor(h scale) x floor(w scale), or size, the scale passed on as
 * PyTorch passes scale_factor (recompute_scale_factor unset).  Nearest by an
 * integer factor k (scale k, or a size k times the input's) repeats each element
 * k x k: reshape to [n, c, h, 1, w, 1], broadcast_to [n, c, h, kh, w, kw],
 * reshape back, cheaper than upsample2d and its gradient (broadcast_to's sums
 * each block); taken only where PyTorch's float source index is dst / k for every
 * output row and column.  Any other factor, and bilinear, is upsample2d. */
static val b_upsample(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    if (!x)
        return error_val();
    const val *mv = &c->args[3].v;
    int bilinear = mv->k == V_STR && strcmp(mv->s, "bilinear") == 0;
    if (mv->k != V_NONE && !(mv->k == V_STR && strcmp(mv->s, "nearest") == 0) && !bilinear) {
        el_error(e, c->args[3].loc, "upsample's mode is \"nearest\" or \"bilinear\", got %s%s%s",
                 mv->k == V_STR ? "\"" : "", mv->k == V_STR ? mv->s : val_kind_name(mv),
                 mv->k == V_STR ? "\"" : "");
        return error_val();
    }
    int align = 0; /* mode and align_corners: "nearest" and false when not given */
    if (arg_given(c, 4) && !arg_bool(e, c, 4, &align))
        return error_val();
    if (!bilinear && arg_given(c, 4)) { /* PyTorch refuses it too, even false */
        el_error(e, c->args[4].loc, "upsample takes align_corners only with mode \"bilinear\"");
        return error_val();
    }
    if (x->type.rank != 4 || !ir_is_float(x->type.dtype)) {
        char tb[128];
        el_error(e, c->args[0].loc, "upsample takes a floating-point [n, c, h, w] tensor, got %s",
                 ir_type_str(&x->type, tb, sizeof tb));
        return error_val();
    }
    if (arg_given(c, 1) == arg_given(c, 2)) {
        el_error(e, arg_given(c, 2) ? c->args[2].loc : c->loc, "upsample takes %s",
                 arg_given(c, 2) ? "scale or size, not both" : "a scale or a size");
        return error_val();
    }
    const int64_t *in = x->type.dims + 2;
    int64_t out[2];
    double scale[2] = {0, 0};
    if (arg_given(c, 2)) {
        if (!arg_pair(e, c, 2, out))
            return error_val();
        if (out[0] < 1 || out[1] < 1) {
            el_error(e, c->args[2].loc, "upsample needs a positive size, got [%lld, %lld]",
                     (long long)out[0], (long long)out[1]);
            return error_val();
        }
    } else {
        const val *v = &c->args[1].v;
        int n = v->k == V_LIST ? v->n : 1;
        for (int i = 0; i < 2 && (n == 1 || n == 2); i++) {
            const val *s = v->k == V_LIST ? &v->items[n == 2 ? i : 0] : v;
            n = s->k == V_INT || s->k == V_FLOAT ? n : 0;
            scale[i] = s->k == V_INT ? (double)s->i : s->f;
        }
        if (n != 1 && n != 2) {
            el_error(e, c->args[1].loc, "upsample's scale must be a number or a list of two, "
                     "got %s", val_kind_name(v));
            return error_val();
        }
        for (int i = 0; i < 2; i++) {
            double o = floor((double)in[i] * scale[i]);
            if (!(scale[i] > 0) || !(o >= 1) || o > 0x1p53) {
                el_error(e, c->args[1].loc, "upsample's scale %g turns %lld rows or columns "
                         "into %g; it must leave at least one", scale[i], (long long)in[i], o);
                return error_val();
            }
            out[i] = (int64_t)o;
        }
    }
    const int64_t *d = x->type.dims;
    int64_t k[2];
    int whole = !bilinear;
    for (int i = 0; i < 2 && whole; i++) {
        k[i] = out[i] / in[i];
        whole = out[i] % in[i] == 0 && out[i] <= (int64_t)1 << 24; /* a short check below */
        float r = ir_upsample_ratio(in[i], out[i], 0, 0, scale[i]);
        for (int64_t dst = 0; dst < out[i] && whole; dst++) {
            int64_t i0, i1;
            float l0, l1;
            ir_upsample_taps(dst, in[i], out[i], 0, 0, r, &i0, &i1, &l0, &l1);
            whole = i0 == dst / k[i];
        }
    }
    if (!whole) {
        ir_node *n = node_begin(e, c, IR_OP_UPSAMPLE2D, 1, &x);
        ir_graph *g = el_graph(e);
        ir_set_ints(g, n, "size", 2, out);
        ir_set_int(g, n, "mode", bilinear);
        ir_set_int(g, n, "align_corners", align);
        ir_set_float(g, n, "scale_h", scale[0]);
        ir_set_float(g, n, "scale_w", scale[1]);
        return node_end(e, c, n);
    }
    ir_type t6 = {x->type.dtype, 6, {d[0], d[1], d[2], 1, d[3], 1}};
    ir_type b6 = {x->type.dtype, 6, {d[0], d[1], d[2], k[0], d[3], k[1]}};
    ir_type t4 = {x->type.dtype, 4, {d[0], d[1], out[0], out[1]}};
    ir_value *v = piece(e, c, "rows", IR_OP_RESHAPE, 1, &x, &t6, 0);
    if (v)
        v = piece(e, c, "repeat", IR_OP_BROADCAST_TO, 1, &v, &b6, 0);
    if (v)
        v = piece(e, c, NULL, IR_OP_RESHAPE, 1, &v, &t4, 0);
    return v ? tensor_val(v) : error_val();
}

static val reshape_to(elab *e, call *c, ir_value *x, int rank, const int64_t *dims)
{
    ir_node *n = node_begin(e, c, IR_OP_RESHAPE, 1, &x);
    ir_set_ints(el_graph(e), n, "shape", rank, dims);
    return node_end(e, c, n);
}

/* flatten(x, start=1, end=-1): dims start..end become one, as nn.Flatten */
static val b_flatten(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    if (!x)
        return error_val();
    int rank = x->type.rank;
    int64_t start = axis_of(e, c, 1, rank), end = start < 0 ? -1 : axis_of(e, c, 2, rank);
    if (start < 0 || end < 0)
        return error_val();
    if (start > end) {
        el_error(e, c->loc, "flatten start (%lld) comes after end (%lld)", (long long)start,
                 (long long)end);
        return error_val();
    }
    int64_t dims[IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (i <= start || i > end)
            dims[r++] = x->type.dims[i];
        else
            dims[r - 1] *= x->type.dims[i];
    }
    return reshape_to(e, c, x, r, dims);
}

/* reshape(x, shape): one entry may be -1, inferred from the element count */
static val b_reshape(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t dims[IR_MAX_RANK];
    int n, infer = -1;
    if (!x || !arg_ints(e, c, 1, dims, IR_MAX_RANK, &n))
        return error_val();
    int64_t known = 1, total = ir_type_numel(&x->type);
    for (int i = 0; i < n; i++) {
        if (dims[i] == -1 && infer < 0) {
            infer = i;
        } else if (dims[i] < 1) {
            el_error(e, c->args[1].loc, "reshape dimensions must be positive, with at most "
                     "one -1");
            return error_val();
        } else if (__builtin_mul_overflow(known, dims[i], &known)) {
            el_error(e, c->args[1].loc, "reshape dimensions overflow");
            return error_val();
        }
    }
    if (infer >= 0) {
        if (total % known) {
            char buf[128];
            el_error(e, c->args[1].loc, "cannot infer the -1 of reshape: %lld elements of %s "
                     "are not divisible by %lld", (long long)total,
                     ir_type_str(&x->type, buf, sizeof buf), (long long)known);
            return error_val();
        }
        dims[infer] = total / known;
    }
    return reshape_to(e, c, x, n, dims);
}

/* transpose(x, perm=?): reverses the dimensions when perm is not given */
static val b_transpose(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t perm[IR_MAX_RANK];
    int n = x ? x->type.rank : 0;
    if (!x)
        return error_val();
    if (arg_given(c, 1)) {
        if (!arg_ints(e, c, 1, perm, IR_MAX_RANK, &n))
            return error_val();
        for (int i = 0; i < n; i++)
            if (perm[i] < 0)
                perm[i] += x->type.rank;
    } else {
        for (int i = 0; i < n; i++)
            perm[i] = n - 1 - i;
    }
    ir_node *node = node_begin(e, c, IR_OP_TRANSPOSE, 1, &x);
    ir_set_ints(el_graph(e), node, "perm", n, perm);
    return node_end(e, c, node);
}

/* concat(xs, axis=0): xs is a list of tensors */
static val b_concat(elab *e, call *c)
{
    const val *xs = &c->args[0].v;
    ir_value *in[64];
    if (xs->k != V_LIST || xs->n < 1 || xs->n > 64) {
        if (xs->k != V_ERROR)
            el_error(e, c->args[0].loc, "concat expects a list of 1 to 64 tensors");
        return error_val();
    }
    for (int i = 0; i < xs->n; i++) {
        if (xs->items[i].k != V_TENSOR) {
            el_error(e, c->args[0].loc, "concat expects a list of tensors; element %d is %s", i,
                     val_kind_name(&xs->items[i]));
            return error_val();
        }
        in[i] = xs->items[i].t;
    }
    int64_t axis = axis_of(e, c, 1, in[0]->type.rank);
    if (axis < 0)
        return error_val();
    ir_node *n = node_begin(e, c, IR_OP_CONCAT, xs->n, in);
    ir_set_int(el_graph(e), n, "axis", axis);
    return node_end(e, c, n);
}

/* embedding(idx, num, dim, init=?, padding_idx=?): nn.Embedding(num, dim,
 * padding_idx): a table of num rows, N(0, 1) by default; row padding_idx
 * (negative: counted from num) starts at 0 (unless the table is another
 * call's, share =) and gets no gradient */
static val b_embedding(elab *e, call *c)
{
    ir_value *idx = arg_tensor(e, c, 0);
    int64_t num, dim, pad = -1;
    if (!idx || !count_arg(e, c, 1, &num) || !count_arg(e, c, 2, &dim) ||
        (arg_given(c, 4) && !arg_int(e, c, 4, &pad)))
        return error_val();
    if (arg_given(c, 4) && (pad < -num || pad >= num)) {
        el_error(e, c->args[4].loc, "embedding padding_idx %lld is not one of the %lld rows "
                 "(-%lld to %lld)", (long long)pad, (long long)num, (long long)num,
                 (long long)(num - 1));
        return error_val();
    }
    if (pad < 0 && arg_given(c, 4))
        pad += num; /* counted from the end, as PyTorch's */
    val init = c->args[3].v;
    if (init.k != V_INIT)
        init = (val){.k = V_INIT, .i = INIT_NORMAL, .f = 1.0, .f2 = 0.0};
    ir_value *in[2] = {idx, make_param(e, c, "weight", IR_VALUE_PARAM,
                                       (ir_type){IR_F32, 2, {num, dim}}, init, INIT_NORMAL)};
    if (!in[1])
        return error_val();
    if (pad >= 0 && !c->shared) /* made here: the padding row starts at 0 */
        in[1]->init.zero_row = pad + 1;
    ir_node *n = node_begin(e, c, IR_OP_EMBEDDING, 2, in);
    ir_set_int(el_graph(e), n, "padding_idx", pad);
    return node_end(e, c, n);
}

/* param(name, shape, init=zeros, trainable=true): a raw tensor of weights */
static val b_param(elab *e, call *c)
{
    const val *name = &c->args[0].v;
    int64_t dims[IR_MAX_RANK];
    int rank, trainable;
    if (name->k != V_STR) {
        if (name->k != V_ERROR)
            el_error(e, c->args[0].loc, "param name must be a string");
        return error_val();
    }
    if (!arg_ints(e, c, 1, dims, IR_MAX_RANK, &rank) || !arg_bool(e, c, 3, &trainable))
        return error_val();
    /* (non-empty and without '.': elab.c checked it as it expanded its {key}s) */
    ir_type t = {IR_F32, rank, {0}};
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1) {
            el_error(e, c->args[1].loc, "param dimensions must be positive");
            return error_val();
        }
        t.dims[i] = dims[i];
    }
    if (arg_given(c, 2) && c->args[2].v.k != V_INIT) {
        el_error(e, c->args[2].loc, "init must be an initializer such as normal(0.02), got %s",
                 val_kind_name(&c->args[2].v));
        return error_val();
    }
    /* a param is named by its first argument, in the enclosing scope */
    call pc = *c;
    pc.path = el_scope_name(e, name->s, c->args[0].loc);
    if (!pc.path)
        return error_val();
    ir_value *v = make_param(e, &pc, NULL, trainable ? IR_VALUE_PARAM : IR_VALUE_BUFFER, t,
                             c->args[2].v, INIT_ZEROS);
    return v ? tensor_val(v) : error_val();
}

/* ---- initializers: values for init = ... ---- */

static val init_val(init_kind k, double a, double b)
{
    return (val){.k = V_INIT, .i = k, .f = a, .f2 = b};
}

static val b_normal(elab *e, call *c)
{
    double std, mean;
    if (!arg_float(e, c, 0, &std) || !arg_float(e, c, 1, &mean))
        return error_val();
    if (!(std >= 0)) {
        el_error(e, c->args[0].loc, "normal needs std >= 0, got %g", std);
        return error_val();
    }
    return init_val(INIT_NORMAL, std, mean);
}

static val b_uniform(elab *e, call *c)
{
    double lo, hi;
    if (!arg_float(e, c, 0, &lo) || !arg_float(e, c, 1, &hi))
        return error_val();
    if (!(lo < hi)) {
        el_error(e, c->loc, "uniform needs low < high, got %g and %g", lo, hi);
        return error_val();
    }
    return init_val(INIT_UNIFORM, lo, hi);
}

#define INIT_FN(fn, kind) \
    static val fn(elab *e, call *c) { (void)e; (void)c; return init_val(kind, 0, 0); }
INIT_FN(b_zeros, INIT_ZEROS)
INIT_FN(b_ones, INIT_ONES)
INIT_FN(b_kaiming, INIT_KAIMING)
INIT_FN(b_kaiming_uniform, INIT_KAIMING_UNIFORM)
INIT_FN(b_xavier, INIT_XAVIER)
INIT_FN(b_xavier_normal, INIT_XAVIER_NORMAL)

/* ---- compile-time helpers ---- */

/* min(a, b) and max of numbers: a compile-time number; of a tensor and a tensor
 * or number: minimum, maximum; of a tensor alone: its smallest (largest)
 * along axis or over all, as torch.min and torch.max */
static val minmax(elab *e, call *c, int want_max)
{
    const val *a = &c->args[0].v, *b = &c->args[1].v;
    if (a->k == V_TENSOR || b->k == V_TENSOR) {
        if (!(c->path = el_auto_name(e, c->fn, c->loc)))
            return error_val();
        if (arg_given(c, 1) && (arg_given(c, 2) || c->args[3].v.i)) {
            el_error(e, c->args[2].loc, "%s of two operands is elementwise (%s): it takes no "
                     "axis or keepdims", c->fn, want_max ? "maximum" : "minimum");
            return error_val();
        }
        if (arg_given(c, 1))
            return binary_num(e, c, want_max ? IR_OP_MAXIMUM : IR_OP_MINIMUM);
        return extreme(e, c, want_max ? IR_OP_REDUCE_MAX : IR_OP_REDUCE_MIN, 2);
    }
    if (!arg_given(c, 1)) {
        el_error(e, c->loc, "%s of a number needs a second one", c->fn);
        return error_val();
    }
    if (arg_given(c, 2)) {
        el_error(e, c->args[2].loc, "%s of numbers takes no axis", c->fn);
        return error_val();
    }
    if (a->k == V_INT && b->k == V_INT)
        return (val){.k = V_INT, .i = (a->i > b->i) == want_max ? a->i : b->i};
    double x, y;
    if (!arg_float(e, c, 0, &x) || !arg_float(e, c, 1, &y))
        return error_val();
    return (val){.k = V_FLOAT, .f = (x > y) == want_max ? x : y};
}

static val b_min(elab *e, call *c) { return minmax(e, c, 0); }
static val b_max(elab *e, call *c) { return minmax(e, c, 1); }

static val b_len(elab *e, call *c)
{
    const val *a = &c->args[0].v;
    if (a->k == V_LIST)
        return (val){.k = V_INT, .i = a->n};
    if (a->k == V_STR)
        return (val){.k = V_INT, .i = (int64_t)strlen(a->s)};
    if (a->k != V_ERROR)
        el_error(e, c->args[0].loc, "len expects a list or a string, got %s", val_kind_name(a));
    return error_val();
}

const builtin fe_builtins[] = {
    {"conv2d", "x, channels, kernel, stride=1, pad=0, dilation=1, groups=1, bias=true, "
               "init=?, bias_init=?", b_conv2d, 1},
    {"conv1d", "x, channels, kernel, stride=1, pad=0, dilation=1, groups=1, bias=true, "
               "init=?, bias_init=?", b_conv1d, 1},
    {"conv_transpose2d", "x, channels, kernel, stride=1, pad=0, output_padding=0, "
                         "dilation=1, groups=1, bias=true, init=?, bias_init=?",
     b_conv_transpose2d, 1},
    {"dense", "x, units, bias=true, init=?, bias_init=?", b_dense, 1},
    {"matmul", "a, b", b_matmul, 1},
    {"batchnorm", "x, eps=1e-5, momentum=0.1, affine=true", b_batchnorm, 1},
    {"layernorm", "x, dims=1, eps=1e-5, affine=true", b_layernorm, 1},
    {"groupnorm", "x, groups, eps=1e-5, affine=true", b_groupnorm, 1},
    {"instancenorm", "x, eps=1e-5, affine=false", b_instancenorm, 1},
    {"relu", "x", b_relu, 1},
    {"sigmoid", "x", b_sigmoid, 1},
    {"tanh", "x", b_tanh, 1},
    {"gelu", "x, approximate=?", b_gelu, 1},
    {"silu", "x", b_silu, 1},
    {"exp", "x", b_exp, 1},
    {"log", "x", b_log, 1},
    {"sqrt", "x", b_sqrt, 1},
    {"rsqrt", "x", b_rsqrt, 1},
    {"abs", "x", b_abs, 1},
    {"softplus", "x", b_softplus, 1},
    {"hardswish", "x", b_hardswish, 1},
    {"softsign", "x", b_softsign, 1},
    {"leaky_relu", "x, slope=0.01", b_leaky_relu, 1},
    {"elu", "x, alpha=1.0", b_elu, 1},
    {"pow", "x, p", b_pow, 1},
    {"clamp", "x, min=?, max=?", b_clamp, 1},
    {"maximum", "a, b", b_maximum, 1},
    {"minimum", "a, b", b_minimum, 1},
    {"gt", "a, b", b_gt, 1},
    {"lt", "a, b", b_lt, 1},
    {"ge", "a, b", b_ge, 1},
    {"le", "a, b", b_le, 1},
    {"eq", "a, b", b_eq, 1},
    {"ne", "a, b", b_ne, 1},
    {"where", "cond, a, b", b_where, 1},
    {"scaled_dot_product_attention", "q, k, v, causal=false, scale=?, enable_gqa=false",
     b_attention, 1},
    {"softmax", "x, axis=-1", b_softmax, 1},
    {"log_softmax", "x, axis=-1", b_log_softmax, 1},
    {"maxpool2d", "x, kernel, stride=?, pad=0, dilation=1, ceil_mode=false", b_maxpool2d, 1},
    {"avgpool2d", "x, kernel, stride=?, pad=0, count_include_pad=true, ceil_mode=false",
     b_avgpool2d, 1},
    {"global_avgpool", "x", b_global_avgpool, 1},
    {"adaptive_avgpool2d", "x, size", b_adaptive_avgpool2d, 1},
    {"upsample", "x, scale=?, size=?, mode=?, align_corners=?", b_upsample, 1},
    {"flatten", "x, start=1, end=-1", b_flatten, 1},
    {"reshape", "x, shape", b_reshape, 1},
    {"transpose", "x, perm=?", b_transpose, 1},
    {"concat", "xs, axis=0", b_concat, 1},
    {"stack", "xs, axis=0", b_stack, 1},
    {"split", "x, size, axis=0", b_split, 1},
    {"chunk", "x, chunks, axis=0", b_chunk, 1},
    {"squeeze", "x, axis=?", b_squeeze, 1},
    {"unsqueeze", "x, axis", b_unsqueeze, 1},
    {"expand", "x, shape", b_expand, 1},
    {"pad", "x, pad, mode=?, value=0.0", b_pad, 1},
    {"arange", "start, end=?, step=1, dtype=?", b_arange, 1},
    {"full", "shape, value, dtype=?", b_full, 1},
    {"tril", "x, diagonal=0", b_tril, 1},
    {"triu", "x, diagonal=0", b_triu, 1},
    {"cast", "x, dtype=?", b_cast, 1},
    {"dropout", "x, p=0.5", b_dropout, 1},
    {"dropout2d", "x, p=0.5", b_dropout2d, 1},
    {"embedding", "idx, num, dim, init=?, padding_idx=?", b_embedding, 1},
    {"cross_entropy", "logits, label, label_smoothing=0.0, ignore_index=-100", b_cross_entropy, 1},
    {"nll_loss", "input, label, ignore_index=-100", b_nll_loss, 1},
    {"mse", "a, b", b_mse, 1},
    {"l1_loss", "a, b", b_l1_loss, 1},
    {"smooth_l1_loss", "a, b, beta=1.0", b_smooth_l1_loss, 1},
    {"huber_loss", "a, b, delta=1.0", b_huber_loss, 1},
    {"bce_with_logits", "logits, target", b_bce_with_logits, 1},
    {"argmax", "x, axis=?, keepdims=false", b_argmax, 1},
    {"sum", "x, axis=?, keepdims=false", b_sum, 1},
    {"mean", "x, axis=?, keepdims=false", b_mean, 1},
    {"param", "name, shape, init=?, trainable=true", b_param, 0},
    {"normal", "std=1.0, mean=0.0", b_normal, 0},
    {"uniform", "low, high", b_uniform, 0},
    {"zeros", "", b_zeros, 0},
    {"ones", "", b_ones, 0},
    {"kaiming", "", b_kaiming, 0},
    {"kaiming_uniform", "", b_kaiming_uniform, 0},
    {"xavier", "", b_xavier, 0},
    {"xavier_normal", "", b_xavier_normal, 0},
    {"min", "a, b=?, axis=?, keepdims=false", b_min, 0},
    {"max", "a, b=?, axis=?, keepdims=false", b_max, 0},
    {"len", "x", b_len, 0},
    {NULL, NULL, NULL, 0},
};

const builtin *fe_builtin_lookup(const char *name)
{
    for (const builtin *b = fe_builtins; b->name; b++)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}
