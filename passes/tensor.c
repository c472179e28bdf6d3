/* Tensor parallelism (Megatron-LM): each device holds a share of the weights of
 * the layers that split, and the devices compute those layers together.
 *
 * Expects: a verified, scheduled, single-device graph (a model, or autodiff's
 * training step) without fused nodes, and o->devices = D > 1.
 *
 * Layouts.  Every value of the program is, across the devices,
 *   R    replicated: each device holds all of it;
 *   S(a) split along axis a: device d holds the d-th of D equal slices;
 *   P    partial: each device holds a term, and the value is their sum.
 * A P value is all-reduced to R as soon as it is made.  A value is converted
 * where a node needs another layout: S to R by all_gather, R to S by a slice
 * (no communication).
 *
 * The split rule (step 1) depends on the graph alone, not on D, so that a
 * model splits the same way on any number of devices; a count that a chosen
 * layer does not divide is an error naming the layer, not a quietly different
 * plan.  In forward order, each dense or conv2d layer L not yet chosen starts
 * a region (grow): the nodes its output channels reach through channelwise
 * ops, every value in it read in the forward pass only by nodes of the region
 * (none an output or the loss) and by one layer M, which reads them along its
 * own channel axis:
 *   - L is split by output channels ("column": w[out, in] along axis 0, its
 *     bias too), so each device computes its channels of the output;
 *   - the channelwise ops in the region run on each device's channels:
 *     elementwise ops, dropout (a device draws its slice of the whole
 *     tensor's mask: the `shard` of dropout_train), batchnorm over channels
 *     (statistics per channel are exact on a channel split; its weight, bias
 *     and running statistics split too), pooling, a reshape that keeps the
 *     channels a block of the new axis (flatten; [b, t, heads x d] to
 *     [b, t, heads, d], the channels becoming heads), a transpose, a slice
 *     along another axis, layernorm over the features, and attention with
 *     q, k and v split along one batch axis: by heads;
 *   - an elementwise op's other operand and attention's others must carry
 *     the same split: each comes from the region, or from another layer
 *     through ops of one operand that keep the channels (reshape, transpose,
 *     slice, unary), which joins the region as a column too (separate q, k
 *     and v projections; a gated MLP's gate and up-projection);
 *   - M is split by input channels ("row": w along axis 1), so each device
 *     reads its channels and makes a partial sum: one all_reduce (a
 *     reduce_scatter with sequence parallelism, below), then M's bias, added
 *     once.
 * So a transformer block's attention splits by heads when its projection
 * holds each head's q, k and v side by side (Megatron-LM's layout, which
 * models/gpt_tiny.net follows): the QKV layer by columns, attention on each
 * device's heads, the output projection by rows.  A region may instead end at
 * a cross_entropy reading its channels as the classes, where the layer is the
 * output layer tied to a token embedding (vocabulary): the table splits by
 * rows, each device's embedding looks up its rows (a partial sum), and the
 * loss is a parallel cross-entropy (vocab_stats).  Any other layer whose
 * output feeds a residual add or an op that mixes channels (softmax, a loss)
 * runs replicated, as does everything outside the regions.  A convolution with
 * groups > 1 in a pair, or a pair's channels (or heads) that D does not
 * divide, is an error; so is a model without a pair.
 *
 * Sequence parallelism (o->sequence_parallel, Megatron-LM's): the partial
 * sums of a row layer and of a column layer's input gradient, activations
 * [batch, seq, ...], are reduce-scattered along the sequence (axis 1) rather
 * than all-reduced, so the ops outside the pairs (the residual adds,
 * layernorms, dropout) run on each device's positions; a column layer
 * all-gathers its input (and gathers it again for its weight's gradient,
 * rather than keeping the whole input from the forward pass); a layernorm's
 * weight and bias gradients are partial sums over the positions, all-reduced.
 * The same communication volume as the all-reduces (a reduce_scatter and an
 * all_gather move what one all_reduce does), and no activation outside the
 * pairs whole on any device.

 * Layernorm between L and M: the row statistics need the whole row, which the
 * devices hold in slices, so a split layernorm all-reduces per-row sums: one
 * all_reduce of the sums for the mean, then one of the squared deviations from
 * it for the variance (two collectives of [rows, 1], not one of sums and sums
 * of squares, whose E[x^2] - E[x]^2 cancels when a row's mean is large against
 * its spread); its backward pass needs two per-row sums, one all_reduce of two
 * operands.  Ending the pair at layernorm instead would leave the MLP models
 * (dense -> layernorm -> gelu -> dense) without a single pair.
 *
 * What communicates, per step: in the forward pass one all_reduce per pair
 * (the row layer's partial sums, of its output's size) and two per split
 * layernorm ([rows, 1] each); in the backward pass one per column layer whose
 * input needs a gradient (a partial sum, of the input's size: the gradient of
 * a replicated value) and one of two [rows, 1] operands per split layernorm.
 * Nothing else, unless a weight split for one layer is read whole by another
 * (a tied weight: its output is gathered where it is needed whole).  Every
 * device sees the whole batch, so batchnorm's statistics are the whole
 * batch's (sync_bn changes nothing), and holds every weight that is not split.
 *
 * Steps:
 *   1. The plan: the column and row layers, and the ops between them.
 *   2. Parameter layouts: a column layer's weight and bias split along 0, a
 *      row layer's weight along 1, the parameters of batchnorm and layernorm
 *      between them along 0; these wishes flow back through the nodes that
 *      compute weights from parameters (an inference program's batchnorm
 *      folded into a convolution), down to the parameters.  A split parameter
 *      becomes D shards (ir_shard), "NAME.shardD"; optimizer state splits as
 *      its parameter does.
 *   3. Each source node in order, on every device, by its op's rule (run_node):
 *      the layouts of its results follow from its operands' (a weight split
 *      along 0 makes a dense a column layer, along 1 a row layer), operands
 *      converted where the rule needs it.  In the backward pass this gives:
 *      dense_grad_input of a column layer a partial sum (all-reduced: the
 *      gradient of its replicated input), of a row layer a split gradient;
 *      dense_grad_weight, conv2d_grad_weight and sum_to a split gradient of a
 *      split weight or bias; batchnorm_grad, activation gradients and the adds
 *      of gradient terms work on slices.  The optimizer of a split parameter
 *      updates its shard with the shard's state; a replicated one is updated
 *      on every device from the same gradient.
 *   4. The loss and the outputs, whole, on device 0; each update on every
 *      device, of its copy or shard of the target; the parameter list with the
 *      shards in place of the split parameters; the devices' sequences merged
 *      into one list (pt_merge).
 *
 * Guarantees: the graph verifies; the devices together compute the source's
 * outputs, loss and updates, up to the order of floating-point sums.  Device 0
 * runs each source node's copy under the source's names; device d > 0 under
 * "dD.NAME". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition.h"

enum { LAY_R, LAY_P, LAY_S };
typedef struct {
    signed char kind, axis;     /* axis: LAY_S */
} layout;

#define NSLOT (2 + IR_MAX_RANK) /* copies of a value by layout: R, P, S(0) ... S(7) */

static const layout R_ = {LAY_R, 0}, P_ = {LAY_P, 0};
static layout S_(int axis) { return (layout){LAY_S, (signed char)axis}; }
static int same(layout a, layout b)
{
    return a.kind == b.kind && (a.kind != LAY_S || a.axis == b.axis);
}
static int slot_of(layout l) { return l.kind == LAY_S ? 2 + l.axis : l.kind; }

enum { ROLE_NONE, ROLE_COLUMN, ROLE_ROW, ROLE_BETWEEN };

typedef struct {
    pt P;                       /* g, d, loc, seq, ndev, next_id: partition.c's makers */
    int D;
    int64_t *group;             /* [D]: 0 .. D-1 */
    int nval;                   /* the source's values: ids below nval */
    ir_node **src;
    int nsrc;
    ir_type *type;              /* by id: its whole type */
    char *batched;              /* by id: computed from inputs, not from weights alone */
    char *role;                 /* by source node */
    layout *want;               /* by id: step 2's wish for a weight (kind -1: none) */
    char *conflict;             /* by id: wished two ways */
    layout *home;               /* by id: the layout it is made in */
    char *made;
    ir_value ***slot;           /* [id * NSLOT + slot]: NULL, or [D] device copies */
    char *taken;                /* by id: the source value serves device 0's copy */
    ir_value ***ln;             /* [2 * id]: xhat, [2 * id + 1]: invstd of a split
                                   layernorm of x = id, [D] each */
    ir_value ***ce;             /* [4 * id + k]: vocab_stats of a cross_entropy's logits id
                                   split by classes, [D] each */
    int fresh;                  /* the operand copy_all gathers afresh (gathered), -1: none */
} tp;

/* ---------------------------------------------------------------- helpers */

static const ir_type *wt(const tp *T, const ir_value *v) { return &T->type[v->id]; }

/* Device copies [D] of source value v in layout l (NULLs until made). */
static ir_value **at(tp *T, const ir_value *v, layout l)
{
    IR_ASSERT(v->id < T->nval);
    ir_value ***x = &T->slot[(size_t)v->id * NSLOT + (size_t)slot_of(l)];
    if (!*x)
        *x = base_xcalloc((size_t)T->D, sizeof **x);
    return *x;
}

/* Whether whole type t splits in D along axis. */
static int divides(const tp *T, const ir_type *t, int axis)
{
    return axis >= 0 && axis < t->rank && t->dims[axis] % T->D == 0;
}

/* t as device d holds it in layout l. */
static ir_type local_type(const tp *T, const ir_type *t, layout l)
{
    ir_type u = *t;
    if (l.kind == LAY_S)
        u.dims[l.axis] /= T->D;
    return u;
}

/* A result value for device d's copy of source value v: v itself for device
 * 0's first copy, else "dD.NAME" (with suffix: "NAME.SUFFIX", "dD.NAME.SUFFIX"). */
static ir_value *result_value(tp *T, const ir_value *v, int d, const char *suffix)
{
    if (d == 0 && !suffix && !T->taken[v->id]) {
        T->taken[v->id] = 1;
        return (ir_value *)v;
    }
    char base[512], buf[560];
    snprintf(base, sizeof base, suffix ? "%s.%s" : "%s", v->name, suffix);
    return ir_value_new(T->P.g, pt_name(buf, sizeof buf, -1 - d, base), v->loc);
}

/* A node of op on device d with result out (NULL: a fresh one named base),
 * not yet typed or appended: set its attributes, then pt_emit. */
static ir_node *mk(tp *T, int d, ir_op op, int nin, ir_value *const *in, ir_value *out,
                   const char *base)
{
    char buf[560];
    ir_node *n = out ? ir_node_make(T->P.g, op, nin, in, 1, &out, T->P.loc)
                     : ir_node_new(T->P.g, op, nin, in, 1, pt_name(buf, sizeof buf, -1 - d, base),
                                   T->P.loc);
    n->device = d;
    return n;
}

static void copy_attrs(tp *T, ir_node *n, const ir_node *s)
{
    ir_copy_attrs(T->P.g, n, s);
}

static ir_value *op2(tp *T, int d, ir_op op, ir_value *a, ir_value *b, ir_value *out,
                     const char *base)
{
    ir_value *in[2] = {a, b};
    return pt_emit(&T->P, mk(T, d, op, 2, in, out, base));
}

static ir_value *shaped(tp *T, int d, ir_op op, ir_value *a, const ir_type *t, ir_value *out,
                        const char *base)
{
    ir_node *n = mk(T, d, op, 1, &a, out, base);
    ir_set_ints(T->P.g, n, "shape", t->rank, t->dims);
    return pt_emit(&T->P, n);
}

static ir_value *constant(tp *T, int d, double v, const ir_type *t, const char *base)
{
    char buf[560];
    return pt_const(&T->P, d, v, t, pt_name(buf, sizeof buf, -1 - d, base));
}

/* One all_reduce over every device of n operands: in[j * D + d] is device d's
 * term j; out[j * D + d] gets the sum (a preset value is used as the result,
 * else a fresh one named names[j]). */
static void all_reduce(tp *T, int n, ir_value **in, ir_value **out, const char *const *names)
{
    int64_t id = ++T->P.next_id;
    char buf[560];
    for (int d = 0; d < T->D; d++) {
        ir_value *ops[IR_MAX_RESULTS], *res[IR_MAX_RESULTS];
        for (int j = 0; j < n; j++) {
            ops[j] = in[j * T->D + d];
            res[j] = out[j * T->D + d] ? out[j * T->D + d]
                     : ir_value_new(T->P.g, pt_name(buf, sizeof buf, -1 - d, names[j]), T->P.loc);
        }
        ir_node *c = ir_node_make(T->P.g, IR_OP_ALL_REDUCE, n, ops, n, res, T->P.loc);
        c->device = d;
        ir_set_int(T->P.g, c, "id", id);
        ir_set_ints(T->P.g, c, "group", T->D, T->group);
        pt_emit(&T->P, c);
        for (int j = 0; j < n; j++)
            out[j * T->D + d] = c->out[j];
    }
}

/* One all_gather or reduce_scatter along axis over every device: device d's
 * operand in[d], its result out[d] (a preset value, else a fresh one named
 * base), into x[d]. */
static void along_axis(tp *T, ir_op op, ir_value **in, ir_value **out, const char *base,
                       int axis, ir_value **x)
{
    int64_t id = ++T->P.next_id;
    for (int d = 0; d < T->D; d++) {
        ir_node *c = mk(T, d, op, 1, &in[d], out ? out[d] : NULL, base);
        ir_set_int(T->P.g, c, "id", id);
        ir_set_ints(T->P.g, c, "group", T->D, T->group);
        ir_set_int(T->P.g, c, "axis", axis);
        x[d] = pt_emit(&T->P, c);
    }
}

/* Device copies of source value v in layout l, converted from the layout it
 * was made in: S to R by all_gather, P to R by all_reduce, any to S through R
 * by a slice.  Each conversion is made once. */
static ir_value **get(tp *T, const ir_value *v, layout l)
{
    ir_value **x = at(T, v, l);
    if (x[0])
        return x;
    IR_ASSERT(T->made[v->id]); /* a rule read a value before its node ran: a bug */
    layout h = T->home[v->id];
    ir_value **hx = at(T, v, h);
    if (l.kind == LAY_R && h.kind == LAY_P) {
        for (int d = 0; d < T->D; d++)
            x[d] = result_value(T, v, d, NULL);
        all_reduce(T, 1, hx, x, NULL);
    } else if (l.kind == LAY_R) {
        IR_ASSERT(h.kind == LAY_S);
        for (int d = 0; d < T->D; d++)
            x[d] = result_value(T, v, d, "whole");
        along_axis(T, IR_OP_ALL_GATHER, hx, x, NULL, h.axis, x);
    } else {
        IR_ASSERT(l.kind == LAY_S && divides(T, wt(T, v), l.axis));
        ir_value **r = get(T, v, R_);
        int64_t size = wt(T, v)->dims[l.axis] / T->D;
        for (int d = 0; d < T->D; d++) {
            ir_node *n = mk(T, d, IR_OP_SLICE, 1, &r[d], result_value(T, v, d, "slice"), NULL);
            ir_set_int(T->P.g, n, "axis", l.axis);
            ir_set_int(T->P.g, n, "start", d * size);
            ir_set_int(T->P.g, n, "size", size);
            x[d] = pt_emit(&T->P, n);
        }
    }
    return x;
}

/* Whether partial sum v is reduce-scattered along its sequence axis (axis 1 of
 * [batch, seq, ...]): with sequence parallelism, where the devices split it. */
static int sequence_split(const tp *T, const ir_value *v)
{
    const ir_type *t = wt(T, v);
    return T->P.o->sequence_parallel && T->batched[v->id] && t->rank >= 3 &&
           t->dims[1] % T->D == 0;
}

static layout home(const tp *T, const ir_value *v)
{
    IR_ASSERT(T->made[v->id]);
    return T->home[v->id];
}

/* Records device copies x[] of source value v, made in layout l; a partial
 * sum is all-reduced at once, and the value is R from then on. */
static void made(tp *T, const ir_value *v, layout l)
{
    T->home[v->id] = l;
    T->made[v->id] = 1;
    if (l.kind != LAY_P)
        return;
    if (sequence_split(T, v)) { /* each device its positions of the sum */
        ir_value **x = at(T, v, S_(1));
        for (int d = 0; d < T->D; d++)
            x[d] = result_value(T, v, d, NULL);
        along_axis(T, IR_OP_REDUCE_SCATTER, at(T, v, P_), x, NULL, 1, x);
        T->home[v->id] = S_(1);
        return;
    }
    get(T, v, R_);
    T->home[v->id] = R_;
}

/* x[D]: device copies of v whole, gathered afresh from its split home rather
 * than kept from an earlier gather: what sequence parallelism does for a
 * layer's weight gradient, so that the whole input does not live from the
 * forward pass to the backward pass. */
static void gathered(tp *T, const ir_value *v, ir_value **x)
{
    layout h = home(T, v);
    if (!T->P.o->sequence_parallel || h.kind != LAY_S || h.axis != 1) {
        memcpy(x, get(T, v, R_), (size_t)T->D * sizeof *x);
        return;
    }
    for (int d = 0; d < T->D; d++)
        x[d] = result_value(T, v, d, "again");
    along_axis(T, IR_OP_ALL_GATHER, at(T, v, h), x, NULL, 1, x);
}

/* The axis of out that a split along axis a of in becomes through a reshape
 * in -> out, or -1: the dimensions before it must keep their product, and the
 * new axis must split in D (the device's slice of each block of the rest is
 * then one contiguous run in both shapes). */
static int reshape_axis(const ir_type *in, const ir_type *out, int a, int D)
{
    int64_t pre = 1, p = 1;
    for (int k = 0; k < a; k++)
        pre *= in->dims[k];
    for (int k = 0; k < out->rank && p <= pre; k++) {
        if (p == pre && out->dims[k] > 1 && out->dims[k] % D == 0)
            return k;
        p *= out->dims[k];
    }
    return -1;
}

/* ---------------------------------------------------------------- step 1: the plan */

static int is_layer(ir_op op) { return op == IR_OP_DENSE || op == IR_OP_CONV2D; }
static int is_optimizer(ir_op op) { return op == IR_OP_SGD || op == IR_OP_ADAM; }

static int is_unary(ir_op op) { return ir_op_is(op, IR_UNARY); }
static int is_binary(ir_op op) { return ir_op_is(op, IR_BINARY); }

/* The channel axis of n's result when n reads v, whose channels are along axis
 * a, without mixing channels; -1 when n is not such an op.  The other operand
 * of an elementwise op, and attention's other two, must carry their channels
 * along the same axis: plan() sees to that (grow). */
static int channelwise(const tp *T, const ir_node *n, const ir_value *v, int a)
{
    const ir_type *t = wt(T, v), *to = wt(T, n->out[0]);
    int last = t->rank - 1;
    if (is_binary(n->op)) { /* NumPy broadcasting: the axis counted from the end */
        int b = a + to->rank - t->rank;
        return b >= 0 && to->dims[b] == t->dims[a] ? b : -1;
    }
    if (n->op == IR_OP_ATTENTION) /* heads: q, k and v split along one batch axis */
        return a < t->rank - 2 ? a : -1;
    if (n->in[0] != v)
        return -1;
    switch (n->op) {
    case IR_OP_DROPOUT_TRAIN: {
        int ns;
        ir_attr_ints(n, "shard", &ns);
        return ns == 0 ? a : -1;
    }
    case IR_OP_BATCHNORM: case IR_OP_BATCHNORM_TRAIN:
    case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D: case IR_OP_GLOBAL_AVGPOOL:
    case IR_OP_ADAPTIVE_AVGPOOL2D: case IR_OP_UPSAMPLE2D:
        return a == 1 ? a : -1;
    case IR_OP_LAYERNORM:
        return a == last && wt(T, n->in[1])->rank == 1 ? a : -1;
    case IR_OP_RESHAPE:
        return reshape_axis(t, to, a, 1);
    case IR_OP_SLICE: /* along another axis */
        return ir_attr_int(n, "axis") != a ? a : -1;
    case IR_OP_TRANSPOSE: {
        const int64_t *perm = ir_attr_ints(n, "perm", NULL);
        for (int k = 0; k < to->rank; k++)
            if (perm[k] == a)
                return k;
        return -1;
    }
    default:
        return is_unary(n->op) ? a : -1;
    }
}

static const char *layer_str(char *buf, size_t len, const ir_node *n)
{
    char nb[200];
    snprintf(buf, len, "%s %%%s", ir_ops[n->op].name, ir_name_str(nb, sizeof nb, n->out[0]->name));
    return buf;
}

/* Whether a pair's layer n can split its channels (c of them) between the
 * devices; reports why not. */
static int check_layer(tp *T, const ir_node *n, int64_t c, const char *what)
{
    char lb[256];
    if (n->op == IR_OP_CONV2D && ir_attr_int(n, "groups") != 1) {
        diag_error(T->P.d, n->loc, "cannot split %s between %d devices: it has groups = %lld, "
                   "and tensor parallelism splits only convolutions with groups = 1",
                   layer_str(lb, sizeof lb, n), T->D, (long long)ir_attr_int(n, "groups"));
        return 0;
    }
    if (c < T->D) {
        diag_error(T->P.d, n->loc, "cannot split %s between %d devices: it has only %lld %s "
                   "channels", layer_str(lb, sizeof lb, n), T->D, (long long)c, what);
        return 0;
    }
    if (c % T->D) {
        diag_error(T->P.d, n->loc, "cannot split %s between %d devices: its %lld %s channels "
                   "do not divide evenly (%lld per device, %lld left over)",
                   layer_str(lb, sizeof lb, n), T->D, (long long)c, what,
                   (long long)(c / T->D), (long long)(c % T->D));
        return 0;
    }
    return 1;
}

/* The axis of a layer's channels in its output (and input): the features of a
 * dense layer, the channels of a convolution. */
static int feature_axis(const tp *T, const ir_node *n)
{
    return n->op == IR_OP_DENSE ? wt(T, n->out[0])->rank - 1 : 1;
}

/* A region of step 1: the column layers whose channels it carries, the nodes
 * between them and the row layer, and each value's channel axis. */
typedef struct {
    int *axis;                 /* by value id: its channels' axis, -1: not in the region */
    int *out_axis;             /* by source node: of its result, -1: not in the region */
    const ir_value **work;     /* values whose readers are still to see */
    int nwork;
    int *nodes, nnodes;        /* the nodes between, in the order reached */
    int *cols, ncols;
    int row;
    int loss;                  /* the cross_entropy reading the channels as its classes, or -1 */
    int pinned;                /* an output or the loss among its values */
} region;

/* The forward pass's readers of each value, each once:
 * list[start[id] .. start[id + 1]). */
typedef struct {
    int *start, *list;
    int *def;                  /* by value id: the source node making it, -1: none */
    const char *pinned;        /* by value id: an output or the loss */
} readers;

static int take(region *R, const ir_value *v, int a)
{
    if (R->axis[v->id] >= 0)
        return R->axis[v->id] == a;
    R->axis[v->id] = a;
    R->work[R->nwork++] = v;
    return 1;
}

static int is_column(const region *R, int i)
{
    for (int k = 0; k < R->ncols; k++)
        if (R->cols[k] == i)
            return 1;
    return 0;
}

/* Whether source node i is a layer free to split, of weights alone. */
static int free_layer(const tp *T, int i)
{
    const ir_node *n = T->src[i];
    return is_layer(n->op) && !T->role[i] && !T->batched[n->in[1]->id];
}

/* The layer whose result reaches v through ops of one activation operand that
 * keep the channels (reshape, transpose, slice, unary), or -1. */
static int layer_behind(const tp *T, const readers *F, const ir_value *v)
{
    for (int i = F->def[v->id]; i >= 0; i = F->def[v->id]) {
        const ir_node *n = T->src[i];
        if (free_layer(T, i))
            return i;
        int batched = 0;
        for (int k = 0; k < n->nin; k++)
            batched += T->batched[n->in[k]->id];
        if (n->nin < 1 || batched != 1 || !T->batched[n->in[0]->id] ||
            !(n->op == IR_OP_RESHAPE || n->op == IR_OP_TRANSPOSE || n->op == IR_OP_SLICE ||
              is_unary(n->op)))
            return -1;
        v = n->in[0];
    }
    return -1;
}

/* Grows region R from its column layers: every forward reader of a value in it
 * keeps the channels (channelwise) or is the one row layer, which reads them
 * along its own channel axis; an activation that a node in it reads from
 * outside must come from another layer (layer_behind), which joins as a
 * column: q, k and v's layers meeting at attention, a gate and its
 * up-projection meeting at a product.  1 when the region closes on a row
 * layer, 0 when it cannot. */
static int grow(const tp *T, const readers *F, region *R)
{
    for (int joined = 1; joined;) {
        while (R->nwork) {
            const ir_value *v = R->work[--R->nwork];
            int a = R->axis[v->id];
            R->pinned |= F->pinned[v->id];
            for (int k = F->start[v->id]; k < F->start[v->id + 1]; k++) {
                int u = F->list[k];
                const ir_node *U = T->src[u];
                if (U->op == IR_OP_CROSS_ENTROPY && U->in[0] == v && a == 1 &&
                    R->axis[U->in[1]->id] < 0 && ir_attr_int(U, "split") == 1) {
                    if (R->loss >= 0 && R->loss != u)
                        return 0;
                    R->loss = u; /* the classes split: a parallel cross-entropy */
                    continue;
                }
                if (free_layer(T, u) && U->in[0] == v && a == feature_axis(T, U) &&
                    !is_column(R, u)) {
                    if (R->row >= 0 && R->row != u)
                        return 0;
                    R->row = u;
                    continue;
                }
                int next = channelwise(T, U, v, a);
                if (next < 0 || T->role[u] || is_column(R, u) ||
                    (R->out_axis[u] >= 0 && R->out_axis[u] != next))
                    return 0;
                if (R->out_axis[u] < 0) {
                    R->out_axis[u] = next;
                    R->nodes[R->nnodes++] = u;
                    if (!take(R, U->out[0], next))
                        return 0;
                }
            }
        }
        joined = 0;
        for (int n = 0; n < R->nnodes; n++) {
            const ir_node *U = T->src[R->nodes[n]];
            if (!is_binary(U->op) && U->op != IR_OP_ATTENTION)
                continue; /* the others' channels come through their first operand */
            for (int k = 0; k < U->nin; k++) {
                const ir_value *w = U->in[k];
                if (R->axis[w->id] >= 0 || !T->batched[w->id])
                    continue;
                int c = layer_behind(T, F, w);
                if (c < 0 || is_column(R, c) || c == R->row)
                    return 0;
                R->cols[R->ncols++] = c;
                if (!take(R, T->src[c]->out[0], feature_axis(T, T->src[c])))
                    return 0;
                joined = 1;
            }
        }
    }
    /* a pair ends at a row layer, with no output between (it would be
       gathered), or a vocabulary at its loss */
    return R->row >= 0 ? R->loss < 0 && !R->pinned : R->loss >= 0;
}

/* Whether region R, which ends at a cross_entropy over its channels, splits a
 * vocabulary: one dense layer whose weight is a parameter that an embedding
 * reads as its table (the output layer tied to the token embedding, GPT-2's
 * and Megatron-LM's), f32 logits, and rows that D divides.  A vocabulary that
 * D does not divide stays whole on every device (Megatron-LM pads it to a
 * multiple; gnc does not), as does an output layer of its own weight (a
 * classifier's few classes). */
static int vocabulary(const tp *T, const region *R)
{
    const ir_node *L = T->src[R->cols[0]];
    const ir_value *w = L->in[1];
    if (R->ncols != 1 || L->op != IR_OP_DENSE || w->kind != IR_VALUE_PARAM ||
        wt(T, L->out[0])->dtype != IR_F32 || wt(T, w)->dims[0] % T->D)
        return 0;
    for (int i = 0; i < T->nsrc; i++)
        if (T->src[i]->op == IR_OP_EMBEDDING && T->src[i]->in[1] == w)
            return 1;
    return 0;
}

/* Step 1: the column and row layers, and the nodes between them.  Each dense
 * or conv2d layer not yet chosen starts a region (grow); one that closes
 * becomes a pair.  Returns the number of pairs, or -1 after reporting why the
 * plan cannot be met. */
static int plan(tp *T, const char *backward)
{
    const ir_graph *g = T->P.g;
    readers F = {base_xcalloc((size_t)T->nval + 1, sizeof *F.start), NULL,
                 base_xcalloc((size_t)T->nval, sizeof *F.def), NULL};
    char *pinned = base_xcalloc((size_t)T->nval, 1);
    for (int i = 0; i < T->nval; i++)
        F.def[i] = -1;
    for (int pass = 0; pass < 2; pass++) {
        int *fill = pass ? base_xcalloc((size_t)T->nval, sizeof *fill) : NULL;
        for (int i = 0; i < T->nsrc; i++) {
            const ir_node *n = T->src[i];
            for (int k = 0; k < n->nout && !pass; k++)
                F.def[n->out[k]->id] = backward[i] ? -1 : i;
            for (int k = 0; k < n->nin && !backward[i]; k++) {
                int id = n->in[k]->id, again = 0;
                for (int j = 0; j < k; j++)
                    again |= n->in[j] == n->in[k];
                if (again)
                    continue;
                if (pass)
                    F.list[F.start[id] + fill[id]++] = i;
                else
                    F.start[id + 1]++;
            }
        }
        if (!pass) {
            for (int id = 0; id < T->nval; id++)
                F.start[id + 1] += F.start[id];
            F.list = base_xcalloc((size_t)F.start[T->nval] + 1, sizeof *F.list);
        }
        base_free(fill);
    }
    for (int i = 0; i < g->noutputs; i++)
        pinned[g->outputs[i].value->id] = 1;
    if (g->loss)
        pinned[g->loss->id] = 1;
    F.pinned = pinned;
    region R = {base_xcalloc((size_t)T->nval, sizeof *R.axis),
                base_xcalloc((size_t)T->nsrc, sizeof *R.out_axis),
                base_xcalloc((size_t)T->nval, sizeof *R.work), 0,
                base_xcalloc((size_t)T->nsrc, sizeof *R.nodes), 0,
                base_xcalloc((size_t)T->nsrc, sizeof *R.cols), 0, -1, -1, 0};
    int pairs = 0, ok = 1;
    for (int i = 0; i < T->nsrc && ok; i++) {
        if (backward[i] || !free_layer(T, i))
            continue;
        for (int k = 0; k < T->nval; k++)
            R.axis[k] = -1;
        for (int k = 0; k < T->nsrc; k++)
            R.out_axis[k] = -1;
        R.nwork = R.nnodes = 0, R.ncols = 1, R.row = R.loss = -1, R.pinned = 0;
        R.cols[0] = i;
        take(&R, T->src[i]->out[0], feature_axis(T, T->src[i]));
        if (!grow(T, &F, &R) || (R.loss >= 0 && !vocabulary(T, &R)))
            continue;
        for (int k = 0; k < R.ncols && ok; k++)
            ok = check_layer(T, T->src[R.cols[k]], wt(T, T->src[R.cols[k]]->in[1])->dims[0],
                             "output");
        if (R.row >= 0)
            ok = ok && check_layer(T, T->src[R.row], wt(T, T->src[R.row]->in[1])->dims[1],
                                   "input");
        for (int k = 0; k < R.nnodes && ok; k++) {
            const ir_node *n = T->src[R.nodes[k]];
            int64_t size = wt(T, n->out[0])->dims[R.out_axis[R.nodes[k]]];
            char lb[256], nb2[200];
            if (n->op == IR_OP_RESHAPE && size % T->D) {
                diag_error(T->P.d, n->loc, "cannot split %s between %d devices: the channels of "
                           "%%%s reach its axis %d of %lld, which does not divide evenly",
                           layer_str(lb, sizeof lb, n), T->D,
                           ir_name_str(nb2, sizeof nb2, T->src[i]->out[0]->name),
                           R.out_axis[R.nodes[k]], (long long)size);
                ok = 0;
            }
        }
        for (int k = 0; k < R.nnodes; k++)
            T->role[R.nodes[k]] = ROLE_BETWEEN;
        for (int k = 0; k < R.ncols; k++)
            T->role[R.cols[k]] = ROLE_COLUMN;
        if (R.row >= 0)
            T->role[R.row] = ROLE_ROW;
        pairs++;
    }
    base_free(R.axis);
    base_free(R.out_axis);
    base_free(R.work);
    base_free(R.nodes);
    base_free(R.cols);
    base_free(F.start);
    base_free(F.list);
    base_free(F.def);
    base_free(pinned);
    if (!ok)
        return -1;
    if (!pairs) {
        diag_error(T->P.d, (ir_loc){0}, "cannot split '%s' by tensor parallelism: no dense or "
                   "conv2d layer feeds another through channelwise ops alone, so there is no "
                   "pair of layers to split", g->name);
        return -1;
    }
    return pairs;
}

/* ---------------------------------------------------------------- step 2: parameter layouts */

static void wish(tp *T, const ir_value *v, layout l)
{
    if (v->kind == IR_VALUE_INPUT || T->batched[v->id])
        return;
    if (T->want[v->id].kind < 0)
        T->want[v->id] = l;
    else if (!same(T->want[v->id], l))
        T->conflict[v->id] = 1;
}

/* Each parameter's layout: the wishes of the pairs, carried back through the
 * nodes that compute weights from parameters (elementwise ops, reshapes). */
static void param_layouts(tp *T)
{
    const ir_graph *g = T->P.g;
    for (int i = 0; i < T->nval; i++)
        T->want[i].kind = -1;
    for (int i = 0; i < T->nsrc; i++) {
        const ir_node *n = T->src[i];
        if (T->role[i] == ROLE_COLUMN) {
            wish(T, n->in[1], S_(0));
            if (n->nin > 2)
                wish(T, n->in[2], S_(0));
        } else if (T->role[i] == ROLE_ROW) {
            wish(T, n->in[1], S_(1));
        } else if (T->role[i] == ROLE_BETWEEN &&
                   (n->op == IR_OP_BATCHNORM || n->op == IR_OP_BATCHNORM_TRAIN ||
                    n->op == IR_OP_LAYERNORM)) {
            for (int k = 1; k < n->nin; k++)
                wish(T, n->in[k], S_(0));
        }
    }
    for (int i = T->nsrc - 1; i >= 0; i--) {
        const ir_node *n = T->src[i];
        const ir_value *y = n->out[0];
        layout w = T->want[y->id];
        if (T->batched[y->id] || w.kind != LAY_S || T->conflict[y->id])
            continue;
        const ir_type *ty = wt(T, y);
        if (is_binary(n->op) || is_unary(n->op) || n->op == IR_OP_BN_FOLD_SCALE) {
            for (int k = 0; k < n->nin; k++) {
                const ir_type *t = wt(T, n->in[k]);
                int a = w.axis - (ty->rank - t->rank);
                if (a >= 0 && t->dims[a] == ty->dims[w.axis])
                    wish(T, n->in[k], S_(a));
            }
        } else if (n->op == IR_OP_RESHAPE) {
            int a = reshape_axis(ty, wt(T, n->in[0]), w.axis, T->D);
            if (a >= 0)
                wish(T, n->in[0], S_(a));
        }
    }
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *p = g->params[i];
        layout w = T->want[p->id];
        T->home[p->id] = w.kind == LAY_S && !T->conflict[p->id] && divides(T, wt(T, p), w.axis)
                             ? w : R_;
        T->made[p->id] = 1;
    }
    /* optimizer state splits as its parameter does */
    for (int i = 0; i < T->nsrc; i++) {
        const ir_node *n = T->src[i];
        if (!is_optimizer(n->op))
            continue;
        for (int k = 2; k < n->nin; k++)
            if (n->in[k]->kind == IR_VALUE_STATE)
                T->home[n->in[k]->id] = T->home[n->in[0]->id];
    }
}

/* Device copies of the parameters and inputs: the value itself (each device
 * holds its own copy) or, split, a shard per device. */
static void place_params(tp *T)
{
    ir_graph *g = T->P.g;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        for (int d = 0; d < T->D; d++)
            at(T, v, R_)[d] = (ir_value *)v;
        T->home[v->id] = R_;
        T->made[v->id] = 1;
    }
    int nparams = g->nparams;
    for (int i = 0; i < nparams; i++) {
        ir_value *v = g->params[i];
        layout l = T->home[v->id];
        ir_value **x = at(T, v, l);
        if (l.kind == LAY_R) {
            for (int d = 0; d < T->D; d++)
                x[d] = v;
            continue;
        }
        ir_type t = local_type(T, &v->type, l);
        for (int d = 0; d < T->D; d++) {
            char buf[560];
            snprintf(buf, sizeof buf, "%s.shard%d", v->name, d);
            const char *name = ir_unique_name(g, buf);
            x[d] = ir_add_param(g, v->kind, name, t, v->init, v->loc);
            ir_set_shard(g, x[d], v->name, &v->type, l.axis, d * t.dims[l.axis]);
            x[d]->source = v->source;
        }
    }
}

/* ---------------------------------------------------------------- step 3: the nodes */

/* Copies source node s onto every device with its operands in layouts lin,
 * its results made in layouts lout: shape attributes and dropout's shard
 * follow the first result's layout. */
static void copy_all(tp *T, const ir_node *s, const layout *lin, const layout *lout)
{
    ir_value **ins[64], *again[IR_MAX_DEVICES];
    for (int k = 0; k < s->nin; k++) {
        if (T->fresh == k && lin[k].kind == LAY_R) {
            gathered(T, s->in[k], again);
            ins[k] = again;
        } else {
            ins[k] = get(T, s->in[k], lin[k]);
        }
    }
    T->fresh = -1;
    T->P.loc = s->loc;
    for (int d = 0; d < T->D; d++) {
        ir_value *in[64], *out[IR_MAX_RESULTS];
        for (int k = 0; k < s->nin; k++)
            in[k] = ins[k][d];
        for (int k = 0; k < s->nout; k++)
            out[k] = result_value(T, s->out[k], d, lout[k].kind == LAY_P ? "partial" : NULL);
        ir_node *n = ir_node_make(T->P.g, s->op, s->nin, in, s->nout, out, s->loc);
        n->device = d;
        copy_attrs(T, n, s);
        ir_type t0 = local_type(T, wt(T, s->out[0]), lout[0]);
        const ir_attr *shape = ir_get_attr(n, "shape");
        if (shape && s->op != IR_OP_CONST && shape->n == t0.rank)
            memcpy(shape->ints, t0.dims, (size_t)t0.rank * sizeof *t0.dims);
        if (s->op == IR_OP_DROPOUT_TRAIN && lout[0].kind == LAY_S) {
            int64_t sh[3] = {lout[0].axis, d * t0.dims[lout[0].axis],
                             wt(T, s->out[0])->dims[lout[0].axis]};
            ir_set_ints(T->P.g, n, "shard", 3, sh);
        }
        if ((s->op == IR_OP_EMBEDDING && lin[1].kind == LAY_S) ||
            (s->op == IR_OP_EMBEDDING_GRAD && lout[0].kind == LAY_S)) { /* device d's rows */
            int64_t rows = wt(T, s->op == IR_OP_EMBEDDING ? s->in[1] : s->out[0])->dims[0];
            ir_set_int(T->P.g, n, "shard_start", d * (rows / T->D));
            ir_set_int(T->P.g, n, "shard_of", rows);
        }
        if (s->op == IR_OP_CONST || s->op == IR_OP_ARANGE || s->op == IR_OP_CAST)
            n->out[0]->type = t0; /* typed as declared (ops.def) */
        pt_emit(&T->P, n);
        for (int k = 0; k < s->nout; k++) {
            ir_type want = local_type(T, wt(T, s->out[k]), lout[k]);
            IR_ASSERT(ir_type_eq(&n->out[k]->type, &want)); /* a rule's layouts: a bug */
            at(T, s->out[k], lout[k])[d] = n->out[k];
        }
    }
    for (int k = 0; k < s->nout; k++)
        made(T, s->out[k], lout[k]);
}

/* The layouts of an elementwise node's operands and result (NumPy
 * broadcasting): split as its first split operand, along the result's axis
 * that operand's split reaches; operands that broadcast along it replicated. */
static void elementwise(tp *T, const ir_node *s, layout *lin, layout *lout)
{
    const ir_type *to = wt(T, s->out[0]);
    layout target = R_;
    for (int k = 0; k < s->nin && target.kind == LAY_R; k++) {
        layout l = home(T, s->in[k]);
        int a = l.axis + to->rank - wt(T, s->in[k])->rank;
        if (l.kind == LAY_S && divides(T, to, a))
            target = S_(a);
    }
    for (int k = 0; k < s->nin; k++) {
        const ir_type *t = wt(T, s->in[k]);
        int a = target.axis - (to->rank - t->rank);
        lin[k] = target.kind == LAY_S && a >= 0 && t->dims[a] == to->dims[target.axis] ? S_(a)
                                                                                         : R_;
    }
    for (int k = 0; k < s->nout; k++)
        lout[k] = target;
}

/* A row layer: each device's partial sum over its input channels, one
 * all_reduce, then the bias once. */
static void row_layer(tp *T, const ir_node *s, layout lx)
{
    const ir_value *y = s->out[0];
    ir_value **x = get(T, s->in[0], lx), **w = get(T, s->in[1], S_(1));
    ir_value **b = s->nin > 2 ? get(T, s->in[2], R_) : NULL;
    ir_value **part = base_xcalloc((size_t)T->D, sizeof *part);
    ir_value **sum = base_xcalloc((size_t)T->D, sizeof *sum);
    T->P.loc = s->loc;
    for (int d = 0; d < T->D; d++) {
        ir_value *in[2] = {x[d], w[d]};
        ir_node *n = mk(T, d, s->op, 2, in, result_value(T, y, d, "partial"), NULL);
        copy_attrs(T, n, s);
        part[d] = pt_emit(&T->P, n);
        sum[d] = b ? NULL : result_value(T, y, d, NULL);
    }
    char name[512];
    snprintf(name, sizeof name, "%s.sum", y->name);
    const char *names[1] = {name};
    layout ly = R_;
    if (sequence_split(T, y) && s->op == IR_OP_DENSE) { /* each device its positions */
        ly = S_(1);
        along_axis(T, IR_OP_REDUCE_SCATTER, part, sum, name, 1, sum);
    } else {
        all_reduce(T, 1, part, sum, names);
    }
    ir_value **out = at(T, y, ly);
    for (int d = 0; d < T->D; d++) {
        out[d] = sum[d];
        if (!b)
            continue;
        ir_value *bias = b[d];
        if (s->op == IR_OP_CONV2D) {
            ir_type t = {bias->type.dtype, 3, {bias->type.dims[0], 1, 1}};
            bias = shaped(T, d, IR_OP_RESHAPE, bias, &t, NULL, name);
        }
        out[d] = op2(T, d, IR_OP_ADD, sum[d], bias, result_value(T, y, d, NULL), NULL);
    }
    made(T, y, ly);
    base_free(part);
    base_free(sum);
}

/* A split layernorm's statistics for x (split along its last axis): per row,
 * the mean from an all_reduce of the sums, then the inverse standard
 * deviation from an all_reduce of the squared deviations; xhat = (x - mean) *
 * invstd.  Made once per x, for its forward and its backward pass. */
static void ln_stats(tp *T, const ir_value *xv, double eps)
{
    int D = T->D;
    if (T->ln[2 * (size_t)xv->id])
        return;
    ir_value **xhat = T->ln[2 * (size_t)xv->id] = base_xcalloc((size_t)D, sizeof *xhat);
    ir_value **invstd = T->ln[2 * (size_t)xv->id + 1] = base_xcalloc((size_t)D, sizeof *invstd);
    const ir_type *tx = wt(T, xv);
    int last = tx->rank - 1;
    ir_value **x = get(T, xv, S_(last));
    ir_type stat = *tx, flat = {tx->dtype, 1, {ir_type_numel(tx) / tx->dims[last]}},
            scalar = {tx->dtype, 0, {0}};
    stat.dims[last] = 1;
    double F = (double)tx->dims[last];
    ir_value **t = base_xcalloc((size_t)D, sizeof *t), **sum = base_xcalloc((size_t)D, sizeof *sum);
    ir_value **xc = base_xcalloc((size_t)D, sizeof *xc);
    char n[9][600];
    static const char *const suffix[9] = {"rowsum", "sum", "mean", "centered", "sqdev",
                                          "sqdev_sum", "var", "invstd", "sqdev_rowsum"};
    for (int k = 0; k < 9; k++)
        snprintf(n[k], sizeof n[k], "%s.ln.%s", xv->name, suffix[k]);
    const char *sums[1] = {n[1]}, *sqdevs[1] = {n[5]};
    for (int d = 0; d < D; d++)
        t[d] = shaped(T, d, IR_OP_SUM_TO, x[d], &stat, NULL, n[0]);
    all_reduce(T, 1, t, sum, sums);
    for (int d = 0; d < D; d++) {
        ir_value *mean = op2(T, d, IR_OP_DIV, sum[d], constant(T, d, F, &scalar, "features"),
                             NULL, n[2]);
        xc[d] = op2(T, d, IR_OP_SUB, x[d], mean, NULL, n[3]);
        t[d] = shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, xc[d], xc[d], NULL, n[4]), &stat,
                      NULL, n[8]);
        sum[d] = NULL;
    }
    all_reduce(T, 1, t, sum, sqdevs);
    for (int d = 0; d < D; d++) {
        ir_value *var = op2(T, d, IR_OP_DIV, sum[d], constant(T, d, F, &scalar, "features"),
                            NULL, n[6]);
        /* 1 / sqrt(var + eps) as batchnorm folding computes it, on [rows] vectors */
        ir_value *in[2] = {constant(T, d, 1.0, &flat, "ones"),
                           shaped(T, d, IR_OP_RESHAPE, var, &flat, NULL, n[6])};
        ir_node *inv = mk(T, d, IR_OP_BN_FOLD_SCALE, 2, in, NULL, n[7]);
        ir_set_float(T->P.g, inv, "eps", eps);
        invstd[d] = shaped(T, d, IR_OP_RESHAPE, pt_emit(&T->P, inv), &stat, NULL, n[7]);
        snprintf(n[0], sizeof n[0], "%s.ln.xhat", xv->name);
        xhat[d] = op2(T, d, IR_OP_MUL, xc[d], invstd[d], NULL, n[0]);
    }
    base_free(t);
    base_free(sum);
    base_free(xc);
}

/* layernorm over the last axis of x split along it: y = xhat * w + b, with w
 * and b split alike. */
static void split_layernorm(tp *T, const ir_node *s)
{
    int last = wt(T, s->in[0])->rank - 1;
    T->P.loc = s->loc;
    ln_stats(T, s->in[0], ir_attr_float(s, "eps"));
    ir_value **w = get(T, s->in[1], S_(0)), **b = get(T, s->in[2], S_(0));
    ir_value **y = at(T, s->out[0], S_(last));
    for (int d = 0; d < T->D; d++) {
        ir_value *xhat = T->ln[2 * (size_t)s->in[0]->id][d];
        char name[512];
        snprintf(name, sizeof name, "%s.scaled", s->out[0]->name);
        y[d] = op2(T, d, IR_OP_ADD, op2(T, d, IR_OP_MUL, xhat, w[d], NULL, name), b[d],
                   result_value(T, s->out[0], d, NULL), NULL);
    }
    made(T, s->out[0], S_(last));
}

/* layernorm_grad(dy, x, w) of a split layernorm:
 *   g = dy w,  dx = invstd (g - mean(g) - xhat mean(g xhat)),
 *   dw = sum over rows of dy xhat,  db = sum over rows of dy,
 * the two row means from one all_reduce of two operands. */
static void split_layernorm_grad(tp *T, const ir_node *s)
{
    int D = T->D, last = wt(T, s->in[1])->rank - 1;
    const ir_type *tx = wt(T, s->in[1]);
    T->P.loc = s->loc;
    ln_stats(T, s->in[1], ir_attr_float(s, "eps"));
    ir_value **dy = get(T, s->in[0], S_(last)), **w = get(T, s->in[2], S_(0));
    ir_type stat = *tx, vec = local_type(T, wt(T, s->in[2]), S_(0)), scalar = {tx->dtype, 0, {0}};
    stat.dims[last] = 1;
    double F = (double)tx->dims[last];
    ir_value **t = base_xcalloc((size_t)(2 * D), sizeof *t);
    ir_value **sum = base_xcalloc((size_t)(2 * D), sizeof *sum);
    ir_value **gw = base_xcalloc((size_t)D, sizeof *gw);
    const char *name = s->out[0]->name;
    char b1[512], b2[512];
    snprintf(b1, sizeof b1, "%s.sum", name);
    snprintf(b2, sizeof b2, "%s.sum_xhat", name);
    const char *names[2] = {b1, b2};
    for (int d = 0; d < D; d++) {
        ir_value *xhat = T->ln[2 * (size_t)s->in[1]->id][d];
        gw[d] = op2(T, d, IR_OP_MUL, dy[d], w[d], NULL, name);
        t[d] = shaped(T, d, IR_OP_SUM_TO, gw[d], &stat, NULL, b1);
        t[D + d] = shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, gw[d], xhat, NULL, b2), &stat,
                          NULL, b2);
    }
    all_reduce(T, 2, t, sum, names);
    for (int d = 0; d < D; d++) {
        ir_value *xhat = T->ln[2 * (size_t)s->in[1]->id][d];
        ir_value *inv = T->ln[2 * (size_t)s->in[1]->id + 1][d];
        ir_value *f = constant(T, d, F, &scalar, "features");
        ir_value *m1 = op2(T, d, IR_OP_DIV, sum[d], f, NULL, name);
        ir_value *m2 = op2(T, d, IR_OP_DIV, sum[D + d], f, NULL, name);
        ir_value *c = op2(T, d, IR_OP_SUB, op2(T, d, IR_OP_SUB, gw[d], m1, NULL, name),
                          op2(T, d, IR_OP_MUL, xhat, m2, NULL, name), NULL, name);
        at(T, s->out[0], S_(last))[d] =
            op2(T, d, IR_OP_MUL, c, inv, result_value(T, s->out[0], d, NULL), NULL);
        at(T, s->out[1], S_(0))[d] =
            shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, dy[d], xhat, NULL, s->out[1]->name),
                   &vec, result_value(T, s->out[1], d, NULL), NULL);
        at(T, s->out[2], S_(0))[d] =
            shaped(T, d, IR_OP_SUM_TO, dy[d], &vec, result_value(T, s->out[2], d, NULL), NULL);
    }
    made(T, s->out[0], S_(last));
    made(T, s->out[1], S_(0));
    made(T, s->out[2], S_(0));
    base_free(t);
    base_free(sum);
    base_free(gw);
}

static int is_s(layout l, int axis) { return l.kind == LAY_S && l.axis == axis; }

/* ---------------------------------------------------------------- the vocabulary */

/* Whether embedding_grad s is the gradient of a table split by rows: an
 * embedding of the same indices reads a table of its type, split along 0. */
static int split_table(const tp *T, const ir_node *s)
{
    for (int i = 0; i < T->nsrc; i++) {
        const ir_node *n = T->src[i];
        if (n->op == IR_OP_EMBEDDING && n->in[0] == s->in[1] && T->made[n->in[1]->id] &&
            same(T->home[n->in[1]->id], S_(0)) && ir_type_eq(wt(T, n->in[1]), wt(T, s->out[0])))
            return 1;
    }
    return 0;
}

static ir_value *op1(tp *T, int d, ir_op op, ir_value *a, const char *base)
{
    return pt_emit(&T->P, mk(T, d, op, 1, &a, NULL, base));
}

/* Device d's largest x along axis 1, into stat (x's type with 1 there). */
static ir_value *row_max(tp *T, int d, ir_value *x, const char *base)
{
    ir_node *n = mk(T, d, IR_OP_REDUCE_MAX, 1, &x, NULL, base);
    ir_set_int(T->P.g, n, "axis", 1);
    return pt_emit(&T->P, n);
}

/* Megatron-LM's parallel cross-entropy, for cross_entropy (or its gradient) s
 * of logits x [n, c, ...] split along the classes, labels y [n, ...]: per
 * position, the largest logit m and the sum of exp(x - m) over all classes,
 * from each device's over its own (two all_gathers of [n, D, ...]: D values a
 * position): m = max m_d, sum = sum over d of sum_d exp(m_d - m); the one-hot
 * of each label among the device's classes (c / D from d c / D); and each
 * position's weight, 1 / the count of labels not ignored, 0 where ignored.
 * The softmax is exp(x - m) / sum as one device's loss computes it (not
 * exp(x - lse), whose lse rounds every probability of a row alike).  Made
 * once per x, for the loss and its gradient; no device holds more than its
 * classes of the logits.  c[0]: m, c[1]: sum, c[2]: one-hot, c[3]: weight. */
static ir_value ***vocab_stats(tp *T, const ir_node *s, const ir_value *xv, const ir_value *yv)
{
    ir_value ***c = &T->ce[4 * (size_t)xv->id];
    if (c[0])
        return c;
    int D = T->D;
    for (int k = 0; k < 4; k++)
        c[k] = base_xcalloc((size_t)D, sizeof **c);
    const ir_type *tx = wt(T, xv);
    int64_t cl = tx->dims[1] / D;
    ir_type stat = *tx, cls = {tx->dtype, 1, {cl}}, row = *tx, scalar = {tx->dtype, 0, {0}};
    stat.dims[1] = 1;
    for (int k = 0; k < row.rank; k++)
        row.dims[k] = k == 1 ? cl : 1;
    ir_type yi = stat;
    yi.dtype = wt(T, yv)->dtype;
    ir_value **x = get(T, xv, S_(1)), **y = get(T, yv, R_);
    ir_value **m = base_xcalloc((size_t)(4 * D), sizeof *m), **sum = m + D, **ms = m + 2 * D,
             **sums = m + 3 * D;
    char n[8][600];
    static const char *const suffix[8] = {"max_local", "sum_local", "maxes", "sums", "max",
                                          "sum", "label", "onehot"};
    for (int k = 0; k < 8; k++)
        snprintf(n[k], sizeof n[k], "%s.%s", xv->name, suffix[k]);
    for (int d = 0; d < D; d++) {
        m[d] = row_max(T, d, x[d], n[0]);
        ir_value *e = op1(T, d, IR_OP_EXP, op2(T, d, IR_OP_SUB, x[d], m[d], NULL, n[1]), n[1]);
        sum[d] = shaped(T, d, IR_OP_SUM_TO, e, &stat, NULL, n[1]);
    }
    along_axis(T, IR_OP_ALL_GATHER, m, NULL, n[2], 1, ms);
    along_axis(T, IR_OP_ALL_GATHER, sum, NULL, n[3], 1, sums);
    for (int d = 0; d < D; d++) {
        c[0][d] = row_max(T, d, ms[d], n[4]);
        ir_value *scale = op1(T, d, IR_OP_EXP, op2(T, d, IR_OP_SUB, ms[d], c[0][d], NULL, n[5]),
                              n[5]);
        c[1][d] = shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, sums[d], scale, NULL, n[5]),
                         &stat, NULL, n[5]);
        ir_node *cast = mk(T, d, IR_OP_CAST, 1,
                           (ir_value *[]){shaped(T, d, IR_OP_RESHAPE, y[d], &yi, NULL, n[6])},
                           NULL, n[6]);
        cast->out[0]->type = stat; /* the labels as x's dtype: exact below 2^24 classes */
        ir_value *label = pt_emit(&T->P, cast);
        ir_node *ar = mk(T, d, IR_OP_ARANGE, 0, NULL, NULL, n[7]);
        ir_set_float(T->P.g, ar, "start", (double)(d * cl));
        ir_set_float(T->P.g, ar, "step", 1.0);
        ar->out[0]->type = cls;
        ir_value *classes = shaped(T, d, IR_OP_RESHAPE, pt_emit(&T->P, ar), &row, NULL, n[7]);
        c[2][d] = op2(T, d, IR_OP_EQ, label, classes, NULL, n[7]);
        char w[600];
        snprintf(w, sizeof w, "%s.weight", xv->name);
        ir_value *valid = op2(T, d, IR_OP_NE, label,
                              constant(T, d, (double)ir_attr_int(s, "ignore_index"), &scalar,
                                       "ignore_index"),
                              NULL, w);
        c[3][d] = op2(T, d, IR_OP_DIV, valid, shaped(T, d, IR_OP_SUM_TO, valid, &scalar, NULL, w),
                      NULL, w);
    }
    base_free(m);
    return c;
}

/* cross_entropy(x, y) of logits split by classes: each device's share of
 * (1 - eps) x[y] + eps / c sum(x) (its classes' part of the label's logit and
 * of the sum), one all_reduce of [n, 1, ...], then the weighted sum over the
 * positions of m + log(sum) less it, on every device. */
static void vocab_cross_entropy(tp *T, const ir_node *s)
{
    int D = T->D;
    T->P.loc = s->loc;
    ir_value ***c = vocab_stats(T, s, s->in[0], s->in[1]);
    const ir_type *tx = wt(T, s->in[0]);
    ir_type stat = *tx, scalar = {tx->dtype, 0, {0}};
    stat.dims[1] = 1;
    double eps = ir_attr_float(s, "label_smoothing");
    ir_value **x = get(T, s->in[0], S_(1));
    ir_value **part = base_xcalloc((size_t)D, sizeof *part);
    ir_value **sum = base_xcalloc((size_t)D, sizeof *sum);
    char name[600];
    snprintf(name, sizeof name, "%s.picked", s->in[0]->name);
    const char *names[1] = {name};
    for (int d = 0; d < D; d++) {
        part[d] = shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, c[2][d], x[d], NULL, name),
                         &stat, NULL, name);
        if (eps != 0) /* label smoothing: (1 - eps) x[y] + eps / c sum(x) */
            part[d] = op2(T, d, IR_OP_ADD,
                          op2(T, d, IR_OP_MUL, part[d],
                              constant(T, d, 1 - eps, &scalar, "smoothing"), NULL, name),
                          op2(T, d, IR_OP_MUL, shaped(T, d, IR_OP_SUM_TO, x[d], &stat, NULL, name),
                              constant(T, d, eps / (double)tx->dims[1], &scalar, "smoothing"),
                              NULL, name),
                          NULL, name);
    }
    all_reduce(T, 1, part, sum, names);
    ir_value **loss = at(T, s->out[0], R_);
    for (int d = 0; d < D; d++) {
        ir_value *lse = op2(T, d, IR_OP_ADD, c[0][d], op1(T, d, IR_OP_LOG, c[1][d], name), NULL,
                            name);
        ir_value *term = op2(T, d, IR_OP_SUB, lse, sum[d], NULL, name);
        loss[d] = shaped(T, d, IR_OP_SUM_TO, op2(T, d, IR_OP_MUL, term, c[3][d], NULL, name),
                         &scalar, result_value(T, s->out[0], d, NULL), NULL);
    }
    made(T, s->out[0], R_);
    base_free(part);
    base_free(sum);
}

/* cross_entropy_grad(dloss, x, y) of logits split by classes, on each
 * device's: dloss weight (exp(x - m) / sum - (1 - eps) onehot - eps / c). */
static void vocab_cross_entropy_grad(tp *T, const ir_node *s)
{
    T->P.loc = s->loc;
    ir_value ***c = vocab_stats(T, s, s->in[1], s->in[2]);
    const ir_type *tx = wt(T, s->in[1]);
    ir_type scalar = {tx->dtype, 0, {0}};
    double eps = ir_attr_float(s, "label_smoothing");
    ir_value **dloss = get(T, s->in[0], R_), **x = get(T, s->in[1], S_(1));
    ir_value **dx = at(T, s->out[0], S_(1));
    const char *name = s->out[0]->name;
    for (int d = 0; d < T->D; d++) {
        ir_value *p = op2(T, d, IR_OP_DIV,
                          op1(T, d, IR_OP_EXP, op2(T, d, IR_OP_SUB, x[d], c[0][d], NULL, name),
                              name),
                          c[1][d], NULL, name);
        ir_value *hot = eps == 0 ? c[2][d]
                                 : op2(T, d, IR_OP_MUL, c[2][d],
                                       constant(T, d, 1 - eps, &scalar, "smoothing"), NULL, name);
        ir_value *g = op2(T, d, IR_OP_SUB, p, hot, NULL, name);
        if (eps != 0)
            g = op2(T, d, IR_OP_SUB, g,
                    constant(T, d, eps / (double)tx->dims[1], &scalar, "smoothing"), NULL, name);
        ir_value *scale = op2(T, d, IR_OP_MUL, c[3][d], dloss[d], NULL, name);
        dx[d] = op2(T, d, IR_OP_MUL, g, scale, result_value(T, s->out[0], d, NULL), NULL);
    }
    made(T, s->out[0], S_(1));
}

/* Source node s on every device, by its op's rule. */
static void run_node(tp *T, const ir_node *s)
{
    layout lin[64], lout[IR_MAX_RESULTS];
    for (int k = 0; k < s->nin; k++)
        lin[k] = R_;
    for (int k = 0; k < s->nout; k++)
        lout[k] = R_;
    const ir_type *ty = wt(T, s->out[0]);
    int last = ty->rank - 1;
    layout l0 = s->nin ? home(T, s->in[0]) : R_, l1 = s->nin > 1 ? home(T, s->in[1]) : R_;
    int grouped = s->op == IR_OP_CONV2D || s->op == IR_OP_CONV2D_GRAD_INPUT ||
                  s->op == IR_OP_CONV2D_GRAD_WEIGHT ? ir_attr_int(s, "groups") != 1 : 0;
    switch (s->op) {
    case IR_OP_BN_FOLD_SCALE: /* gamma / sqrt(var + eps), channel by channel */
        elementwise(T, s, lin, lout);
        break;
    case IR_OP_DROPOUT_TRAIN: {
        int ns;
        ir_attr_ints(s, "shard", &ns);
        if (l0.kind == LAY_S && ns == 0)
            lin[0] = lout[0] = lout[1] = l0;
        break;
    }
    case IR_OP_DENSE: case IR_OP_CONV2D: {
        int xa = s->op == IR_OP_DENSE ? last : 1;
        if (s->op == IR_OP_DENSE && l1.kind == LAY_R && l0.kind == LAY_S && l0.axis < last) {
            lin[0] = lout[0] = l0; /* a replicated layer on each device's rows */
            break;
        }
        if (grouped || l1.kind != LAY_S)
            break;
        if (l1.axis == 1) {
            row_layer(T, s, S_(xa));
            return;
        }
        lin[1] = lin[2] = S_(0);
        lout[0] = S_(xa);
        break;
    }
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_CONV2D_GRAD_INPUT: {
        int ya = s->op == IR_OP_DENSE_GRAD_INPUT ? last : 1;
        if (s->op == IR_OP_DENSE_GRAD_INPUT && l1.kind == LAY_R && l0.kind == LAY_S &&
            l0.axis < last) {
            lin[0] = lout[0] = l0;
            break;
        }
        if (grouped || l1.kind != LAY_S)
            break;
        lin[1] = l1;
        if (l1.axis == 0)
            lin[0] = S_(ya), lout[0] = P_;
        else
            lout[0] = S_(ya);
        break;
    }
    case IR_OP_DENSE_GRAD_WEIGHT: case IR_OP_CONV2D_GRAD_WEIGHT: {
        int ya = s->op == IR_OP_DENSE_GRAD_WEIGHT ? wt(T, s->in[0])->rank - 1 : 1;
        if (grouped)
            break;
        if (s->op == IR_OP_DENSE_GRAD_WEIGHT && l0.kind == LAY_S && l0.axis < ya &&
            same(l0, l1)) {
            lin[0] = lin[1] = l0, lout[0] = P_; /* sums over each device's rows */
            break;
        }
        if (is_s(l0, ya)) {
            lin[0] = l0, lout[0] = S_(0);
            if (s->op == IR_OP_DENSE_GRAD_WEIGHT && T->P.o->sequence_parallel) {
                T->fresh = 1; /* x gathered again, not kept from the forward pass */
            }
        } else if (is_s(l1, ya)) {
            lin[1] = l1, lout[0] = S_(1);
        }
        break;
    }
    case IR_OP_BATCHNORM: case IR_OP_BATCHNORM_TRAIN: case IR_OP_BATCHNORM_APPLY:
        if (is_s(l0, 1)) {
            lin[0] = lout[0] = S_(1);
            for (int k = 1; k < s->nin; k++)
                lin[k] = S_(0);
            for (int k = 1; k < s->nout; k++)
                lout[k] = S_(0);
        }
        break;
    case IR_OP_BATCHNORM_GRAD:
        if (is_s(l0, 1) || is_s(l1, 1)) {
            lin[0] = lin[1] = lout[0] = S_(1);
            lin[2] = lin[3] = lin[4] = lout[1] = lout[2] = S_(0);
        }
        break;
    case IR_OP_LAYERNORM:
        if (is_s(l0, last) && wt(T, s->in[1])->rank == 1) {
            split_layernorm(T, s);
            return;
        }
        if (l0.kind == LAY_S && l0.axis < ty->rank - wt(T, s->in[1])->rank)
            lin[0] = lout[0] = l0; /* whole rows on each device: sequence parallel */
        break;
    case IR_OP_LAYERNORM_GRAD: {
        int rows = ty->rank - wt(T, s->in[2])->rank;
        if (is_s(l1, last) && wt(T, s->in[2])->rank == 1) {
            split_layernorm_grad(T, s);
            return;
        }
        if ((l0.kind == LAY_S && l0.axis < rows) || (l1.kind == LAY_S && l1.axis < rows)) {
            lin[0] = lin[1] = lout[0] = l0.kind == LAY_S && l0.axis < rows ? l0 : l1;
            lout[1] = lout[2] = P_; /* the weight's and bias's sums over the rows */
        }
        break;
    }
    case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D: case IR_OP_GLOBAL_AVGPOOL:
    case IR_OP_AVGPOOL2D_GRAD: case IR_OP_ADAPTIVE_AVGPOOL2D: case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD:
    case IR_OP_UPSAMPLE2D: case IR_OP_UPSAMPLE2D_GRAD:
        if (is_s(l0, 1))
            lin[0] = lout[0] = S_(1);
        break;
    case IR_OP_MAXPOOL2D_GRAD:
        if (is_s(l0, 1) || is_s(l1, 1))
            lin[0] = lin[1] = lout[0] = S_(1);
        break;
    case IR_OP_RESHAPE:
        if (l0.kind == LAY_S) {
            int a = reshape_axis(wt(T, s->in[0]), ty, l0.axis, T->D);
            if (a >= 0)
                lin[0] = l0, lout[0] = S_(a);
        }
        break;
    case IR_OP_SLICE: /* along another axis than the split one */
        if (l0.kind == LAY_S && ir_attr_int(s, "axis") != l0.axis)
            lin[0] = lout[0] = l0;
        break;
    case IR_OP_PAD: { /* a slice's gradient: padded along other axes only */
        const int64_t *before = ir_attr_ints(s, "before", NULL), *after = ir_attr_ints(s, "after",
                                                                                      NULL);
        if (l0.kind == LAY_S && before[l0.axis] == 0 && after[l0.axis] == 0)
            lin[0] = lout[0] = l0;
        break;
    }
    case IR_OP_TRANSPOSE:
        if (l0.kind == LAY_S) {
            const int64_t *perm = ir_attr_ints(s, "perm", NULL);
            for (int k = 0; k < ty->rank; k++)
                if (perm[k] == l0.axis)
                    lin[0] = l0, lout[0] = S_(k);
        }
        break;
    case IR_OP_ATTENTION: case IR_OP_ATTENTION_GRAD: {
        /* split by heads (a batch axis): each device its heads' attention; the
           first operand split so sets the axis for all, the rest sliced */
        int batch = wt(T, s->in[s->op == IR_OP_ATTENTION_GRAD])->rank - 2;
        for (int k = 0; k < s->nin && lout[0].kind == LAY_R; k++) {
            layout l = home(T, s->in[k]);
            int all = l.kind == LAY_S && l.axis < batch; /* grouped heads: k's and v's too */
            for (int j = 0; j < s->nin && all; j++)
                all = divides(T, wt(T, s->in[j]), l.axis);
            if (all)
                for (int j = 0; j < IR_MAX_RESULTS; j++)
                    lin[j] = lout[j] = l;
        }
        break;
    }
    case IR_OP_EMBEDDING: /* a vocabulary's rows: zeros for the others' ids, summed */
        if (is_s(l1, 0))
            lin[1] = l1, lout[0] = P_;
        break;
    case IR_OP_EMBEDDING_GRAD:
        if (split_table(T, s))
            lout[0] = S_(0);
        break;
    case IR_OP_CROSS_ENTROPY:
        if (is_s(l0, 1) && ir_attr_int(s, "split") == 1) {
            vocab_cross_entropy(T, s);
            return;
        }
        break;
    case IR_OP_CROSS_ENTROPY_GRAD:
        if (is_s(l1, 1) && ir_attr_int(s, "split") == 1) {
            vocab_cross_entropy_grad(T, s);
            return;
        }
        break;
    case IR_OP_SUM_TO: case IR_OP_BROADCAST_TO:
        if (l0.kind == LAY_S) {
            const ir_type *tx = wt(T, s->in[0]);
            int a = l0.axis + ty->rank - tx->rank;
            lin[0] = l0;
            lout[0] = a >= 0 && ty->dims[a] == tx->dims[l0.axis] ? S_(a) : P_;
        }
        break;
    case IR_OP_SGD: case IR_OP_ADAM: {
        layout lp = home(T, s->in[0]);
        for (int k = 0; k < s->nin; k++)
            lin[k] = ir_type_eq(wt(T, s->in[k]), wt(T, s->in[0])) ? lp : R_;
        for (int k = 0; k < s->nout; k++)
            lout[k] = lp;
        break;
    }
    default:
        if (ir_op_is(s->op, IR_ELEMENTWISE))
            elementwise(T, s, lin, lout);
        break;
    }
    copy_all(T, s, lin, lout);
}

/* ---------------------------------------------------------------- step 4: the end of the step */

/* The loss and the outputs, whole, on device 0; every update on every device,
 * of its copy or shard of the target, by its copy of the source. */
static void finish(tp *T, const ir_update *updates, int nupdates)
{
    ir_graph *g = T->P.g;
    for (int i = 0; i < g->noutputs; i++) {
        T->P.loc = g->outputs[i].loc;
        g->outputs[i].value = get(T, g->outputs[i].value, R_)[0];
    }
    if (g->loss) {
        T->P.loc = g->loss->loc;
        g->loss = get(T, g->loss, R_)[0];
    }
    g->nupdates = 0;
    for (int i = 0; i < nupdates; i++) {
        const ir_value *t = updates[i].target;
        layout l = T->home[t->id];
        ir_value **src = get(T, updates[i].source, l), **dst = at(T, t, l);
        for (int d = 0; d < T->D; d++)
            ir_add_update_on(g, dst[d], src[d], d);
    }
    /* the parameter list: each split parameter's shards in its place */
    int n = 0;
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->id < T->nval)
            n += T->home[g->params[i]->id].kind == LAY_S ? T->D : 1;
    ir_value **params = ir_alloc(g, (size_t)(n ? n : 1) * sizeof *params);
    n = 0;
    for (int i = 0; i < g->nparams; i++) {
        ir_value *v = g->params[i];
        if (v->id >= T->nval)
            continue; /* a shard, placed with its whole below */
        layout l = T->home[v->id];
        if (l.kind == LAY_R) {
            params[n++] = v;
            continue;
        }
        for (int d = 0; d < T->D; d++)
            params[n++] = at(T, v, l)[d];
    }
    g->params = params;
    g->nparams = g->cap_params = n;
}

static void tp_free(tp *T)
{
    for (int d = 0; d < T->D && T->P.seq; d++)
        base_free(T->P.seq[d].nodes);
    base_free(T->P.seq);
    base_free(T->group);
    base_free(T->src);
    base_free(T->type);
    base_free(T->batched);
    base_free(T->role);
    base_free(T->want);
    base_free(T->conflict);
    base_free(T->home);
    base_free(T->made);
    for (size_t i = 0; T->slot && i < (size_t)T->nval * NSLOT; i++)
        base_free(T->slot[i]);
    for (size_t i = 0; T->ln && i < 2 * (size_t)T->nval; i++)
        base_free(T->ln[i]);
    for (size_t i = 0; T->ce && i < 4 * (size_t)T->nval; i++)
        base_free(T->ce[i]);
    base_free(T->ce);
    base_free(T->slot);
    base_free(T->taken);
    base_free(T->ln);
}

int pt_tensor(ir_graph *g, const pt_options *o, diag *d)
{
    if (o->deterministic) {
        diag_error(d, (ir_loc){0}, "deterministic mode applies to --strategy data only");
        return -1;
    }
    if (o->devices > IR_MAX_DEVICES) {
        diag_error(d, (ir_loc){0}, "at most %d devices, not %d", IR_MAX_DEVICES, o->devices);
        return -1;
    }
    tp T = {.P = {.g = g, .o = o, .d = d, .ndev = o->devices}, .D = o->devices, .fresh = -1};
    int rc = -1;
    T.nval = g->nvalues;
    T.nsrc = g->nnodes;
    T.src = base_xcalloc((size_t)T.nsrc, sizeof *T.src);
    T.type = base_xcalloc((size_t)T.nval, sizeof *T.type);
    T.batched = base_xcalloc((size_t)T.nval, 1);
    T.role = base_xcalloc((size_t)T.nsrc, 1);
    T.want = base_xcalloc((size_t)T.nval, sizeof *T.want);
    T.conflict = base_xcalloc((size_t)T.nval, 1);
    T.home = base_xcalloc((size_t)T.nval, sizeof *T.home);
    T.made = base_xcalloc((size_t)T.nval, 1);
    T.taken = base_xcalloc((size_t)T.nval, 1);
    T.slot = base_xcalloc((size_t)T.nval * NSLOT, sizeof *T.slot);
    T.ln = base_xcalloc(2 * (size_t)T.nval, sizeof *T.ln);
    T.ce = base_xcalloc(4 * (size_t)T.nval, sizeof *T.ce);
    T.group = base_xcalloc((size_t)T.D, sizeof *T.group);
    for (int k = 0; k < T.D; k++)
        T.group[k] = k;
    int k = 0;
    ir_for_each_node(g, n)
        T.src[k++] = n;
    for (int i = 0; i < g->ninputs; i++) {
        T.type[g->inputs[i]->id] = g->inputs[i]->type;
        T.batched[g->inputs[i]->id] = 1;
    }
    for (int i = 0; i < g->nparams; i++)
        T.type[g->params[i]->id] = g->params[i]->type;
    /* what depends on the inputs (activations), and on the loss gradient's
       seed (the backward pass, with the optimizer) */
    char *backward = base_xcalloc((size_t)T.nsrc, 1), *dep = base_xcalloc((size_t)T.nval, 1);
    const ir_value *seed = NULL;
    if (g->loss) {
        char name[512];
        snprintf(name, sizeof name, "%s.grad", g->loss->name);
        seed = ir_find_value(g, name);
    }
    for (int i = 0; i < T.nsrc; i++) {
        const ir_node *n = T.src[i];
        int b = (seed && n->out[0] == seed) || is_optimizer(n->op), x = 0;
        for (int j = 0; j < n->nin; j++)
            b |= dep[n->in[j]->id], x |= T.batched[n->in[j]->id];
        backward[i] = (char)b;
        for (int j = 0; j < n->nout; j++) {
            T.type[n->out[j]->id] = n->out[j]->type;
            dep[n->out[j]->id] = (char)b;
            T.batched[n->out[j]->id] = (char)x;
        }
    }
    base_free(dep);
    int pairs = plan(&T, backward);
    base_free(backward);
    if (pairs < 0)
        goto done;
    param_layouts(&T);
    place_params(&T);
    T.P.seq = base_xcalloc((size_t)T.D, sizeof *T.P.seq);
    for (int i = 0; i < T.nsrc; i++)
        run_node(&T, T.src[i]);
    int nupd = g->nupdates;
    ir_update *updates = base_xcalloc((size_t)nupd, sizeof *updates);
    if (nupd) /* an inference graph has no update list to copy from */
        memcpy(updates, g->updates, (size_t)nupd * sizeof *updates);
    finish(&T, updates, nupd);
    base_free(updates);
    pt_merge(&T.P);
    rc = g->nnodes;
done:
    tp_free(&T);
    return rc;
}
