/* Slicing and shaping: x[...], split, chunk, squeeze, unsqueeze, stack,
 * expand and pad, with PyTorch's semantics, made of slice, reshape, concat,
 * broadcast_to and pad nodes, whose gradients autodiff knows (a slice's is
 * its dy padded with zeros, a pad's the slice of its dy).  Each built-in checks its arguments first
 * and then makes its nodes twice: once only to count them, so that the last
 * can carry the call's name, as a layer's output does. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "elab.h"

/* ---------------------------------------------------------------- a chain of nodes */

typedef struct {
    elab *e;
    call *c;
    ir_value *x;        /* what each node stands for while counting */
    int counting;       /* 1: count the nodes in total, make none */
    int total, made;
} chain;

/* The next node: the last is named c->path, the others c->path.<op><k>. */
static ir_node *link(chain *ch, ir_op op, int nin, ir_value **in)
{
    if (ch->counting) {
        ch->total++;
        return NULL;
    }
    for (int i = 0; i < nin; i++)
        if (!in[i])
            return NULL;
    char name[512];
    call s = *ch->c;
    if (ch->made + 1 < ch->total) {
        snprintf(name, sizeof name, "%s.%s%d", ch->c->path, ir_ops[op].name, ch->made);
        s.path = name;
    }
    ch->made++;
    return node_begin(ch->e, &s, op, nin, in);
}

static ir_value *done(chain *ch, ir_node *n)
{
    if (ch->counting)
        return ch->x;
    if (!n)
        return NULL;
    val v = node_end(ch->e, ch->c, n);
    return v.k == V_TENSOR ? v.t : NULL;
}

/* x reshaped or broadcast (op) to t */
static ir_value *shaped(chain *ch, ir_op op, ir_value *x, const ir_type *t)
{
    ir_node *n = link(ch, op, 1, &x);
    if (n)
        ir_set_ints(el_graph(ch->e), n, "shape", t->rank, t->dims);
    return done(ch, n);
}

/* elements [start, start + size) of x along axis */
static ir_value *sliced(chain *ch, ir_value *x, int axis, int64_t start, int64_t size)
{
    ir_node *n = link(ch, IR_OP_SLICE, 1, &x);
    if (n) {
        ir_set_int(el_graph(ch->e), n, "axis", axis);
        ir_set_int(el_graph(ch->e), n, "start", start);
        ir_set_int(el_graph(ch->e), n, "size", size);
    }
    return done(ch, n);
}

/* x with lo[i] and hi[i] elements of value around dimension i */
static ir_value *padded(chain *ch, ir_value *x, int rank, const int64_t *lo, const int64_t *hi,
                        double value)
{
    ir_node *n = link(ch, IR_OP_PAD, 1, &x);
    if (n) {
        ir_set_ints(el_graph(ch->e), n, "before", rank, lo);
        ir_set_ints(el_graph(ch->e), n, "after", rank, hi);
        ir_set_float(el_graph(ch->e), n, "value", value);
    }
    return done(ch, n);
}

static ir_value *joined(chain *ch, ir_value **in, int n, int axis)
{
    if (n == 1)
        return in[0];
    ir_node *m = link(ch, IR_OP_CONCAT, n, in);
    if (m)
        ir_set_int(el_graph(ch->e), m, "axis", axis);
    return done(ch, m);
}

typedef ir_value *(*lowering)(chain *ch, ir_value *x, const void *plan);

/* Runs make twice, counting and then making; x itself when it makes no node. */
static val made(elab *e, call *c, ir_value *x, lowering make, const void *plan)
{
    chain ch = {e, c, x, 1, 0, 0};
    make(&ch, x, plan);
    if (ch.total == 0)
        return tensor_val(x);
    ch.counting = 0;
    ir_value *y = make(&ch, x, plan);
    return y ? tensor_val(y) : error_val();
}

/* t with dimension axis set to n (inserted when insert) or removed (n < 0) */
static ir_type with_dim(const ir_type *t, int axis, int64_t n, int insert)
{
    ir_type u = *t;
    if (insert || n < 0) {
        int shift = insert ? 1 : -1;
        u.rank += shift;
        for (int i = axis + (insert ? 0 : 1); i < t->rank; i++)
            u.dims[i + shift] = t->dims[i];
    }
    if (n >= 0)
        u.dims[axis] = n;
    return u;
}

/* ---------------------------------------------------------------- x[...] */

int el_range(elab *e, const subscript *s, int64_t n, int empty, int64_t *start, int64_t *count,
             int64_t *step)
{
    int64_t b[2], st = s->range[2] == SUB_NONE ? 1 : s->range[2];
    if (st < 1) {
        el_error(e, s->loc, "a slice step must be positive, got %lld", (long long)st);
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        int64_t v = s->range[i];
        v = v == SUB_NONE ? (i ? n : 0) : v < 0 ? v + n : v;
        b[i] = v < 0 ? 0 : v > n ? n : v;
    }
    *start = b[0];
    *step = st;
    *count = b[1] > b[0] ? (b[1] - b[0] + st - 1) / st : 0;
    if (*count == 0 && !empty) {
        el_error(e, s->loc, "this slice of a dimension of %lld is empty; gnc has no empty "
                 "tensors", (long long)n);
        return 0;
    }
    return 1;
}

/* per axis of x: the elements taken (start, count, step), and whether an
 * index took one and drops the axis */
typedef struct {
    int rank;
    int64_t start[IR_MAX_RANK], count[IR_MAX_RANK], step[IR_MAX_RANK];
    int drop[IR_MAX_RANK];
} index_plan;

/* count elements of x from start, every step-th, along axis of t */
static ir_value *take(chain *ch, ir_value *x, const ir_type *t, int axis, int64_t start,
                      int64_t count, int64_t step)
{
    int64_t dim = t->dims[axis];
    if (count == 1)
        step = 1;
    if (step == 1)
        return start == 0 && count == dim ? x : sliced(ch, x, axis, start, count);
    /* the rows of step elements that fit, viewed as [rows, step], their first
       column; and the last element alone when its row does not fit */
    int64_t rows = dim - start >= count * step ? count : count - 1;
    ir_value *y = x;
    if (start != 0 || rows * step != dim)
        y = sliced(ch, x, axis, start, rows * step);
    ir_type grid = with_dim(t, axis, rows, 0);
    grid = with_dim(&grid, axis + 1, step, 1);
    y = sliced(ch, shaped(ch, IR_OP_RESHAPE, y, &grid), axis + 1, 0, 1);
    ir_type u = with_dim(t, axis, rows, 0);
    y = shaped(ch, IR_OP_RESHAPE, y, &u);
    if (rows == count)
        return y;
    ir_value *in[2] = {y, sliced(ch, x, axis, start + rows * step, 1)};
    return joined(ch, in, 2, axis);
}

static ir_value *make_index(chain *ch, ir_value *x, const void *plan)
{
    const index_plan *p = plan;
    ir_type t = ch->x->type, out = {t.dtype, 0, {0}};
    int drops = 0;
    for (int a = 0; a < p->rank; a++) {
        x = take(ch, x, &t, a, p->start[a], p->count[a], p->step[a]);
        t.dims[a] = p->count[a];
        if (p->drop[a])
            drops = 1;
        else
            out.dims[out.rank++] = t.dims[a];
    }
    return drops ? shaped(ch, IR_OP_RESHAPE, x, &out) : x;
}

val el_index(elab *e, ir_value *x, const subscript *s, int n, ir_loc loc)
{
    index_plan p = {x->type.rank, {0}, {0}, {0}, {0}};
    int rank = x->type.rank, given = 0, ellipsis = -1;
    for (int k = 0; k < n; k++) {
        if (s[k].kind != SUB_ELLIPSIS)
            given++;
        else if (ellipsis >= 0) {
            el_error(e, s[k].loc, "a subscript takes one '...' at most");
            return error_val();
        } else
            ellipsis = k;
    }
    if (given > rank) {
        el_error(e, loc, "%d indices for a tensor of rank %d", given, rank);
        return error_val();
    }
    for (int a = 0; a < rank; a++) {
        p.count[a] = x->type.dims[a];
        p.step[a] = 1;
    }
    for (int k = 0, a = 0; k < n; k++) {
        if (s[k].kind == SUB_ELLIPSIS) {
            a += rank - given;
            continue;
        }
        int64_t dim = x->type.dims[a];
        if (s[k].kind == SUB_INDEX) {
            int64_t i = s[k].index < 0 ? s[k].index + dim : s[k].index;
            if (i < 0 || i >= dim) {
                el_error(e, s[k].loc, "index %lld is out of range for dimension %d of %lld",
                         (long long)s[k].index, a, (long long)dim);
                return error_val();
            }
            p.start[a] = i;
            p.count[a] = 1;
            p.drop[a] = 1;
        } else if (!el_range(e, &s[k], dim, 0, &p.start[a], &p.count[a], &p.step[a])) {
            return error_val();
        } else if (p.step[a] > 1 && p.count[a] > 1 && rank == IR_MAX_RANK) {
            el_error(e, s[k].loc, "a slice with a step needs a tensor of rank below %d",
                     IR_MAX_RANK);
            return error_val();
        }
        a++;
    }
    const char *path = el_auto_name(e, "slice", loc);
    if (!path)
        return error_val();
    call c = {.fn = "slice", .loc = loc, .path = path};
    return made(e, &c, x, make_index, &p);
}

/* ---------------------------------------------------------------- split and chunk */

/* The pieces of x along axis, of the sizes given (which sum to the
 * dimension), named c->path.0, .1, ...: a list. */
static val pieces(elab *e, call *c, ir_value *x, int64_t axis, const int64_t *sizes, int n)
{
    val v = {.k = V_LIST, .n = n, .items = el_alloc(e, (size_t)n * sizeof(val))};
    if (n == 1) {
        v.items[0] = tensor_val(x);
        return v;
    }
    for (int k = 0, start = 0; k < n; start += (int)sizes[k], k++) {
        char name[512];
        call s = *c;
        snprintf(name, sizeof name, "%s.%d", c->path, k);
        s.path = name;
        ir_node *m = node_begin(e, &s, IR_OP_SLICE, 1, &x);
        ir_set_int(el_graph(e), m, "axis", axis);
        ir_set_int(el_graph(e), m, "start", start);
        ir_set_int(el_graph(e), m, "size", sizes[k]);
        v.items[k] = node_end(e, &s, m);
        if (v.items[k].k != V_TENSOR)
            return error_val();
    }
    return v;
}

/* Pieces of size each (the last smaller), torch.split's and chunk's */
static val split_even(elab *e, call *c, ir_value *x, int64_t axis, int64_t size)
{
    int64_t dim = x->type.dims[axis], n = (dim + size - 1) / size;
    if (n > 1024) {
        el_error(e, c->args[1].loc, "%s would make %lld pieces; the most is 1024", c->fn,
                 (long long)n);
        return error_val();
    }
    int64_t sizes[1024];
    for (int64_t k = 0; k < n; k++)
        sizes[k] = k < n - 1 ? size : dim - size * (n - 1);
    return pieces(e, c, x, axis, sizes, (int)n);
}

/* split(x, size, axis=0): torch.split, size an int (pieces of that size, the
 * last smaller) or a list of sizes that sum to the dimension */
val b_split(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t axis = x ? axis_of(e, c, 2, x->type.rank) : -1, sizes[64], size, sum = 0;
    int n;
    if (axis < 0)
        return error_val();
    if (c->args[1].v.k == V_INT) {
        if (!arg_int(e, c, 1, &size))
            return error_val();
        if (size < 1) {
            el_error(e, c->args[1].loc, "split size must be positive, got %lld",
                     (long long)size);
            return error_val();
        }
        return split_even(e, c, x, axis, size);
    }
    if (!arg_ints(e, c, 1, sizes, 64, &n))
        return error_val();
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 1) {
            el_error(e, c->args[1].loc, "split sizes must be positive, got %lld",
                     (long long)sizes[k]);
            return error_val();
        }
        sum += sizes[k];
    }
    if (n == 0 || sum != x->type.dims[axis]) {
        el_error(e, c->args[1].loc, "split sizes sum to %lld, but dimension %lld is %lld",
                 (long long)sum, (long long)axis, (long long)x->type.dims[axis]);
        return error_val();
    }
    return pieces(e, c, x, axis, sizes, n);
}

/* chunk(x, chunks, axis=0): torch.chunk, pieces of ceil(dim / chunks), so
 * fewer than chunks when they do not divide */
val b_chunk(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t axis = x ? axis_of(e, c, 2, x->type.rank) : -1, chunks;
    if (axis < 0 || !arg_int(e, c, 1, &chunks))
        return error_val();
    if (chunks < 1) {
        el_error(e, c->args[1].loc, "chunk count must be positive, got %lld", (long long)chunks);
        return error_val();
    }
    int64_t dim = x->type.dims[axis];
    return split_even(e, c, x, axis, (dim + chunks - 1) / chunks);
}

/* ---------------------------------------------------------------- squeeze, unsqueeze, stack */

static val reshaped(elab *e, call *c, ir_value *x, const ir_type *t)
{
    if (ir_type_eq(&x->type, t))
        return tensor_val(x);
    ir_node *n = node_begin(e, c, IR_OP_RESHAPE, 1, &x);
    ir_set_ints(el_graph(e), n, "shape", t->rank, t->dims);
    return node_end(e, c, n);
}

/* squeeze(x, axis=?): torch.squeeze, every dimension of 1, or those of the
 * axes given (an int or a list) that are 1; others stay, as in PyTorch */
val b_squeeze(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int drop[IR_MAX_RANK] = {0};
    if (!x)
        return error_val();
    int rank = x->type.rank;
    if (!arg_axes(e, c, 1, rank, drop))
        return error_val();
    ir_type t = {x->type.dtype, 0, {0}};
    for (int a = 0; a < rank; a++)
        if (!drop[a] || x->type.dims[a] != 1)
            t.dims[t.rank++] = x->type.dims[a];
    return reshaped(e, c, x, &t);
}

/* The axis where unsqueeze and stack insert a dimension: -rank - 1 to rank */
static int64_t new_axis(elab *e, call *c, int i, int rank)
{
    int64_t a;
    if (!arg_int(e, c, i, &a))
        return -1;
    if (a < -rank - 1 || a > rank) {
        el_error(e, c->args[i].loc, "axis %lld is out of range for a new dimension of a tensor "
                 "of rank %d (%d to %d)", (long long)a, rank, -rank - 1, rank);
        return -1;
    }
    if (rank == IR_MAX_RANK) {
        el_error(e, c->loc, "%s would make a tensor of rank %d; the most is %d", c->fn, rank + 1,
                 IR_MAX_RANK);
        return -1;
    }
    return a < 0 ? a + rank + 1 : a;
}

/* unsqueeze(x, axis): torch.unsqueeze */
val b_unsqueeze(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t a = x ? new_axis(e, c, 1, x->type.rank) : -1;
    if (a < 0)
        return error_val();
    ir_type t = with_dim(&x->type, (int)a, 1, 1);
    return reshaped(e, c, x, &t);
}

/* stack(xs, axis=0): torch.stack, tensors of one type joined along a new axis */
val b_stack(elab *e, call *c)
{
    const val *xs = &c->args[0].v;
    ir_value *in[64];
    if (xs->k != V_LIST || xs->n < 1 || xs->n > 64) {
        if (xs->k != V_ERROR)
            el_error(e, c->args[0].loc, "stack expects a list of 1 to 64 tensors");
        return error_val();
    }
    for (int i = 0; i < xs->n; i++) {
        char a[128], b[128];
        if (xs->items[i].k != V_TENSOR) {
            el_error(e, c->args[0].loc, "stack expects a list of tensors; element %d is %s", i,
                     val_kind_name(&xs->items[i]));
            return error_val();
        }
        in[i] = xs->items[i].t;
        if (!ir_type_eq(&in[i]->type, &in[0]->type)) {
            el_error(e, c->args[0].loc, "stack takes tensors of one type; element %d is %s, "
                     "element 0 %s", i, ir_type_str(&in[i]->type, a, sizeof a),
                     ir_type_str(&in[0]->type, b, sizeof b));
            return error_val();
        }
    }
    int64_t axis = new_axis(e, c, 1, in[0]->type.rank);
    if (axis < 0)
        return error_val();
    ir_type t = with_dim(&in[0]->type, (int)axis, 1, 1);
    if (xs->n == 1)
        return reshaped(e, c, in[0], &t);
    for (int i = 0; i < xs->n; i++) {
        char name[512];
        call s = *c;
        snprintf(name, sizeof name, "%s.%d", c->path, i);
        s.path = name;
        val v = reshaped(e, &s, in[i], &t);
        if (v.k != V_TENSOR)
            return error_val();
        in[i] = v.t;
    }
    ir_node *n = node_begin(e, c, IR_OP_CONCAT, xs->n, in);
    ir_set_int(el_graph(e), n, "axis", axis);
    return node_end(e, c, n);
}

/* expand(x, shape): torch.Tensor.expand, dimensions of 1 repeated and new
 * leading ones added; -1 keeps a dimension */
val b_expand(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t dims[IR_MAX_RANK];
    int n;
    if (!x || !arg_ints(e, c, 1, dims, IR_MAX_RANK, &n))
        return error_val();
    int lead = n - x->type.rank;
    if (lead < 0) {
        el_error(e, c->args[1].loc, "expand to %d dimensions, fewer than the tensor's %d", n,
                 x->type.rank);
        return error_val();
    }
    ir_type t = {x->type.dtype, n, {0}};
    for (int i = 0; i < n; i++) {
        int64_t have = i < lead ? 0 : x->type.dims[i - lead];
        if (dims[i] == -1 && i >= lead)
            dims[i] = have;
        if (dims[i] < 1 || (i >= lead && have != 1 && dims[i] != have)) {
            el_error(e, c->args[1].loc, "cannot expand dimension %d%s to %lld%s", i,
                     i < lead ? " (a new one)" : "", (long long)dims[i],
                     i >= lead && have != 1 ? ": only dimensions of 1 expand" : "");
            return error_val();
        }
        t.dims[i] = dims[i];
    }
    if (ir_type_eq(&t, &x->type))
        return tensor_val(x);
    ir_node *m = node_begin(e, c, IR_OP_BROADCAST_TO, 1, &x);
    ir_set_ints(el_graph(e), m, "shape", t.rank, t.dims);
    return node_end(e, c, m);
}

/* ---------------------------------------------------------------- pad */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };

typedef struct {
    int mode;
    double value;
    int64_t before[IR_MAX_RANK], after[IR_MAX_RANK];
} pad_plan;

/* The pieces that pad one side of x along axis (of t) by width > 0, put in
 * out; returns how many. */
static int border(chain *ch, ir_value *x, const ir_type *t, int axis, int64_t width, int after,
                  const pad_plan *p, ir_value **out)
{
    int64_t dim = t->dims[axis];
    ir_type u = with_dim(t, axis, width, 0);
    switch (p->mode) {
    case PAD_REPLICATE: { /* the edge element, repeated */
        ir_value *edge = sliced(ch, x, axis, after ? dim - 1 : 0, 1);
        out[0] = width == 1 ? edge : shaped(ch, IR_OP_BROADCAST_TO, edge, &u);
        return 1;
    }
    case PAD_CIRCULAR: /* the other end */
        out[0] = sliced(ch, x, axis, after ? 0 : dim - width, width);
        return 1;
    default: /* reflect: the elements next to the edge, mirrored, one by one */
        for (int64_t k = 0; k < width; k++)
            out[k] = sliced(ch, x, axis, after ? dim - 2 - k : width - k, 1);
        return (int)width;
    }
}

static ir_value *make_pad(chain *ch, ir_value *x, const void *plan)
{
    const pad_plan *p = plan;
    ir_type t = ch->x->type;
    int64_t lo[IR_MAX_RANK], hi[IR_MAX_RANK];
    int grows = 0;
    for (int a = 0; a < t.rank; a++) {
        lo[a] = p->before[a] > 0 ? p->before[a] : 0;
        hi[a] = p->after[a] > 0 ? p->after[a] : 0;
        grows |= lo[a] || hi[a];
        int64_t cut_lo = lo[a] - p->before[a], cut_hi = hi[a] - p->after[a];
        if (cut_lo || cut_hi) { /* a negative width crops, as in PyTorch */
            t.dims[a] -= cut_lo + cut_hi;
            x = sliced(ch, x, a, cut_lo, t.dims[a]);
        }
    }
    if (p->mode == PAD_CONSTANT)
        return grows ? padded(ch, x, t.rank, lo, hi, p->value) : x;
    for (int a = 0; a < t.rank; a++) {
        if (lo[a] == 0 && hi[a] == 0)
            continue;
        ir_value *in[64];
        int k = lo[a] > 0 ? border(ch, x, &t, a, lo[a], 0, p, in) : 0;
        in[k++] = x;
        k += hi[a] > 0 ? border(ch, x, &t, a, hi[a], 1, p, in + k) : 0;
        x = joined(ch, in, k, a);
        t.dims[a] += lo[a] + hi[a];
    }
    return x;
}

/* pad(x, pad, mode="constant", value=0): F.pad, pad a list of (before,
 * after) pairs from the last dimension backwards; modes constant (negative
 * widths crop), reflect, replicate and circular, on any dimension */
val b_pad(elab *e, call *c)
{
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    ir_value *x = arg_tensor(e, c, 0);
    int64_t w[2 * IR_MAX_RANK];
    int n;
    pad_plan p = {PAD_CONSTANT, 0, {0}, {0}};
    if (!x || !arg_ints(e, c, 1, w, 2 * IR_MAX_RANK, &n) || !arg_float(e, c, 3, &p.value))
        return error_val();
    const val *m = &c->args[2].v;
    for (p.mode = 0; m->k == V_STR && p.mode < 4; p.mode++)
        if (strcmp(m->s, modes[p.mode]) == 0)
            break;
    if (m->k == V_NONE)
        p.mode = PAD_CONSTANT;
    else if (m->k != V_STR || p.mode == 4) {
        el_error(e, c->args[2].loc, "pad's mode is \"constant\", \"reflect\", \"replicate\" or "
                 "\"circular\"");
        return error_val();
    }
    int rank = x->type.rank;
    if (n % 2 || n / 2 > rank) {
        el_error(e, c->args[1].loc, "pad takes pairs (before, after) for at most the %d "
                 "dimensions of the tensor, from the last; got %d numbers", rank, n);
        return error_val();
    }
    for (int k = 0; k < n / 2; k++) {
        int a = rank - 1 - k;
        int64_t lo = w[2 * k], hi = w[2 * k + 1], dim = x->type.dims[a];
        const char *why = NULL;
        if (p.mode != PAD_CONSTANT && (lo < 0 || hi < 0))
            why = "negative widths crop only in constant mode";
        else if (p.mode == PAD_CONSTANT && (lo < 0 ? -lo : 0) + (hi < 0 ? -hi : 0) >= dim)
            why = "it crops the whole dimension";
        else if (p.mode == PAD_REFLECT && (lo >= dim || hi >= dim))
            why = "reflect pads less than the dimension";
        else if (p.mode == PAD_CIRCULAR && (lo > dim || hi > dim))
            why = "circular pads at most the dimension";
        else if (p.mode == PAD_REFLECT && lo + hi > 62)
            why = "reflect pads at most 62 in all along one dimension";
        if (why) {
            el_error(e, c->args[1].loc, "cannot pad dimension %d of %lld by (%lld, %lld): %s", a,
                     (long long)dim, (long long)lo, (long long)hi, why);
            return error_val();
        }
        if (p.mode == PAD_CONSTANT && (lo > 0 || hi > 0) && !ir_is_float(x->type.dtype)) {
            el_error(e, c->args[0].loc, "constant padding takes a floating-point tensor, got "
                     "an %s one (the other modes take any)", ir_dtype_name(x->type.dtype));
            return error_val();
        }
        p.before[a] = lo;
        p.after[a] = hi;
    }
    return made(e, c, x, make_pad, &p);
}

/* ---------------------------------------------------------------- making tensors, cast */

/* Argument i as a dtype name ("f32", "i64", ...), or dflt when not given;
 * -1 having reported. */
static int dtype_arg(elab *e, call *c, int i, ir_dtype dflt)
{
    const val *v = &c->args[i].v;
    if (v->k == V_NONE)
        return (int)dflt;
    int dt = v->k == V_STR ? ir_dtype_lookup(v->s) : -1;
    if (dt < 0 && v->k != V_ERROR)
        el_error(e, c->args[i].loc, "%s's dtype is a name: \"f32\", \"f16\", \"bf16\", \"i32\", "
                 "\"i64\" or \"u8\"", c->fn);
    return dt;
}

/* A node with no operands and its declared type */
static val leaf(elab *e, call *c, ir_op op, const ir_type *t, const char *key, double v,
                const char *key2, double v2)
{
    ir_node *n = node_begin(e, c, op, 0, NULL);
    ir_set_float(el_graph(e), n, key, v);
    if (key2)
        ir_set_float(el_graph(e), n, key2, v2);
    n->out[0]->type = *t;
    return node_end(e, c, n);
}

/* arange(start, end=?, step=1, dtype=?): torch.arange, [start, end) by step, or
 * [0, start) when end is not given; i64 when every bound is an int, else f32,
 * unless dtype says */
val b_arange(elab *e, call *c)
{
    double b[3];
    int ints = 1;
    for (int i = 0; i < 3; i++) {
        if (i == 1 && !arg_given(c, 1))
            continue;
        if (!arg_float(e, c, i, &b[i]))
            return error_val();
        ints &= c->args[i].v.k == V_INT;
    }
    if (!arg_given(c, 1))
        b[1] = b[0], b[0] = 0;
    int dt = dtype_arg(e, c, 3, ints ? IR_I64 : IR_F32);
    if (dt < 0)
        return error_val();
    double count = b[2] != 0 ? ceil((b[1] - b[0]) / b[2]) : 0;
    if (b[2] == 0 || !(count >= 1) || count > (double)IR_MAX_NUMEL) {
        el_error(e, c->loc, "arange(%g, %g, %g) %s", b[0], b[1], b[2],
                 b[2] == 0 ? "has a step of 0" : count >= 1 ? "is too long" : "is empty");
        return error_val();
    }
    ir_type t = {(ir_dtype)dt, 1, {(int64_t)count}};
    return leaf(e, c, IR_OP_ARANGE, &t, "start", b[0], "step", b[2]);
}

/* full(shape, value, dtype="f32"): torch.full, a floating-point tensor of one value */
val b_full(elab *e, call *c)
{
    int64_t dims[IR_MAX_RANK];
    int n;
    double v;
    if (!arg_ints(e, c, 0, dims, IR_MAX_RANK, &n) || !arg_float(e, c, 1, &v))
        return error_val();
    int dt = dtype_arg(e, c, 2, IR_F32);
    if (dt < 0)
        return error_val();
    ir_type t = {(ir_dtype)dt, n, {0}};
    for (int i = 0; i < n; i++) {
        if (dims[i] < 1) {
            el_error(e, c->args[0].loc, "full's dimensions must be positive, got %lld",
                     (long long)dims[i]);
            return error_val();
        }
        t.dims[i] = dims[i];
    }
    return leaf(e, c, IR_OP_CONST, &t, "value", v, NULL, 0);
}

/* tril(x, diagonal=0) and triu: torch.tril and torch.triu over the last two
 * dimensions, the rest zero: where(a mask from two aranges, x, 0) */
static val triangle(elab *e, call *c, int lower)
{
    ir_value *x = arg_tensor(e, c, 0);
    int64_t diag;
    if (!x || !arg_int(e, c, 1, &diag))
        return error_val();
    int r = x->type.rank;
    if (r < 2 || !ir_is_float(x->type.dtype)) {
        char tb[128];
        el_error(e, c->args[0].loc, "%s takes a floating-point tensor of rank 2 or more, got %s",
                 c->fn, ir_type_str(&x->type, tb, sizeof tb));
        return error_val();
    }
    /* row i + diagonal against column j: tril keeps j <= i + diagonal */
    int64_t rows = x->type.dims[r - 2], cols = x->type.dims[r - 1];
    ir_type tr = {x->type.dtype, 1, {rows}}, tc = {x->type.dtype, 1, {cols}};
    ir_type r2 = {x->type.dtype, 2, {rows, 1}}, c2 = {x->type.dtype, 2, {1, cols}};
    char name[4][512];
    call s[5];
    static const char *const parts[] = {"row", "col", "rows", "cols", "mask"};
    for (int i = 0; i < 5; i++) {
        s[i] = *c;
        if (i < 4) {
            snprintf(name[i], sizeof name[i], "%s.%s", c->path, parts[i]);
            s[i].path = name[i];
        }
    }
    char mask_name[512];
    snprintf(mask_name, sizeof mask_name, "%s.mask", c->path);
    s[4].path = mask_name;
    val row = leaf(e, &s[0], IR_OP_ARANGE, &tr, "start", (double)diag, "step", 1);
    val col = leaf(e, &s[1], IR_OP_ARANGE, &tc, "start", 0, "step", 1);
    if (row.k != V_TENSOR || col.k != V_TENSOR)
        return error_val();
    val rr = reshaped(e, &s[2], row.t, &r2), cc = reshaped(e, &s[3], col.t, &c2);
    if (rr.k != V_TENSOR || cc.k != V_TENSOR)
        return error_val();
    ir_value *in[3] = {cc.t, rr.t};
    val m = node_end(e, &s[4], node_begin(e, &s[4], lower ? IR_OP_LE : IR_OP_GE, 2, in));
    if (m.k != V_TENSOR)
        return error_val();
    val zero = {.k = V_FLOAT, .f = 0};
    in[0] = m.t;
    in[1] = x;
    in[2] = el_scalar(e, &zero, x->type.dtype, c->loc);
    if (!in[2])
        return error_val();
    return node_end(e, c, node_begin(e, c, IR_OP_WHERE, 3, in));
}

val b_tril(elab *e, call *c) { return triangle(e, c, 1); }
val b_triu(elab *e, call *c) { return triangle(e, c, 0); }

/* cast(x, dtype): x.to(dtype): floats to integers toward zero (saturated,
 * NaN to 0, where PyTorch leaves it undefined), integers wrap; gradients flow
 * between floating-point dtypes only */
val b_cast(elab *e, call *c)
{
    ir_value *x = arg_tensor(e, c, 0);
    if (!x)
        return error_val();
    if (!arg_given(c, 1)) {
        el_error(e, c->loc, "cast needs a dtype");
        return error_val();
    }
    int dt = dtype_arg(e, c, 1, IR_F32);
    if (dt < 0)
        return error_val();
    if ((ir_dtype)dt == x->type.dtype)
        return tensor_val(x);
    ir_node *n = node_begin(e, c, IR_OP_CAST, 1, &x);
    n->out[0]->type.dtype = (ir_dtype)dt;
    return node_end(e, c, n);
}
