/* Simplification: dead-code elimination, common-subexpression elimination,
 * constant folding and algebraic identities.
 *
 * Expects: a verified graph.  Guarantees: the graph still verifies and computes
 * the same outputs, loss and updates, bit for bit (no rewrite here reorders or
 * rounds anything differently: x * 1 and x + 0 are exact, a folded constant is
 * computed as the executor would, in float32).  Each pass returns how many
 * nodes it removed or replaced.
 *
 *   dce   erases nodes none of whose results is used (by a node, an output, the
 *         loss or an update);
 *   cse   replaces a node by an earlier one with the same op, operands and
 *         attributes;
 *   fold  evaluates elementwise ops of constants into one constant, and removes
 *         x * 1, x / 1, x - 0, x + -0, -(-x), reshapes to the same shape,
 *         reshapes of reshapes and identity transposes (not x + 0: -0 + 0 is
 *         +0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* How many times each value is used (by id), counting outputs, loss, updates. */
static int *use_counts(const ir_graph *g)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    IR_ASSERT(uses);
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++)
            uses[n->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i].value->id]++;
    if (g->loss)
        uses[g->loss->id]++;
    for (int i = 0; i < g->nupdates; i++)
        uses[g->updates[i].source->id]++;
    return uses;
}

int pass_dce(ir_graph *g, diag *d)
{
    (void)d;
    int *uses = use_counts(g), removed = 0;
    /* backwards, so that a chain of dead nodes goes in one sweep */
    for (ir_node *n = g->tail, *prev; n; n = prev) {
        prev = n->prev;
        int live = 0;
        for (int i = 0; i < n->nout && !live; i++)
            live = uses[n->out[i]->id] > 0;
        if (live)
            continue;
        for (int i = 0; i < n->nin; i++)
            uses[n->in[i]->id]--;
        ir_erase(g, n);
        removed++;
    }
    free(uses);
    return removed;
}

static int same_attrs(const ir_node *a, const ir_node *b)
{
    if (a->nattrs != b->nattrs)
        return 0;
    for (int i = 0; i < a->nattrs; i++) {
        const ir_attr *x = &a->attrs[i], *y = ir_get_attr(b, a->attrs[i].key);
        if (!y || x->kind != y->kind)
            return 0;
        if (x->kind == IR_ATTR_INT && x->i != y->i)
            return 0;
        /* floats by their bits: 0.0 and -0.0 differ, a NaN equals itself */
        if (x->kind == IR_ATTR_FLOAT && memcmp(&x->f, &y->f, sizeof x->f) != 0)
            return 0;
        if (x->kind == IR_ATTR_INTS &&
            (x->n != y->n || memcmp(x->ints, y->ints, (size_t)x->n * sizeof *x->ints) != 0))
            return 0;
    }
    return 1;
}

static int same_node(const ir_node *a, const ir_node *b)
{
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout)
        return 0;
    for (int i = 0; i < a->nin; i++)
        if (a->in[i] != b->in[i])
            return 0;
    for (int i = 0; i < a->nout; i++)
        if (!ir_type_eq(&a->out[i]->type, &b->out[i]->type))
            return 0;
    return same_attrs(a, b);
}

/* Ops whose results depend only on operands and attributes (everything but the
 * dropout masks, which depend on run-time step and seed operands and so would
 * be shared rightly, but two dropouts with the same salt cannot exist). */
static uint64_t node_hash(const ir_node *n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n->op;
    for (int i = 0; i < n->nin; i++)
        h = (h ^ (uint64_t)n->in[i]->id) * 1099511628211ull;
    if (n->op == IR_OP_CONST) {
        double v = ir_attr_float(n, "value");
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

int pass_cse(ir_graph *g, diag *d)
{
    (void)d;
    size_t cap = 64;
    while (cap < 2 * (size_t)g->nnodes + 2)
        cap *= 2;
    ir_node **table = calloc(cap, sizeof *table);
    IR_ASSERT(table);
    int replaced = 0;
    for (ir_node *n = g->head, *next; n; n = next) {
        next = n->next;
        size_t i = node_hash(n) & (cap - 1);
        for (; table[i]; i = (i + 1) & (cap - 1))
            if (same_node(table[i], n))
                break;
        if (!table[i]) {
            table[i] = n;
            continue;
        }
        for (int k = 0; k < n->nout; k++)
            ir_replace_uses(g, n->out[k], table[i]->out[k]);
        ir_erase(g, n);
        replaced++;
    }
    free(table);
    return replaced;
}

/* The value of n's result when it is a constant node. */
static int const_value(const ir_value *v, double *out)
{
    if (v->kind != IR_VALUE_NODE || !v->def || v->def->op != IR_OP_CONST)
        return 0;
    *out = ir_attr_float(v->def, "value");
    return 1;
}

/* A float32 result as the executor would compute it. */
static int eval_const(ir_op op, float a, float b, float *out)
{
    switch (op) {
    case IR_OP_NEG: *out = -a; return 1;
    case IR_OP_RELU: *out = a > 0 ? a : 0; return 1;
    case IR_OP_ADD: *out = a + b; return 1;
    case IR_OP_SUB: *out = a - b; return 1;
    case IR_OP_MUL: *out = a * b; return 1;
    case IR_OP_DIV: *out = a / b; return 1;
    default: return 0;
    }
}

/* Replaces every use of n's result by v and erases n. */
static void forward_to(ir_graph *g, ir_node *n, ir_value *v)
{
    ir_replace_uses(g, n->out[0], v);
    ir_erase(g, n);
}

/* Whether v is a constant equal to want, sign of zero included. */
static int is_const_of(const ir_value *v, double want)
{
    double c;
    return const_value(v, &c) && c == want && signbit(c) == signbit(want);
}

int pass_fold(ir_graph *g, diag *d)
{
    (void)d;
    int changed = 0;
    for (ir_node *n = g->head, *next; n; n = next) {
        next = n->next;
        const ir_type *t = &n->out[0]->type;
        double a, b;
        int is_float = t->dtype == IR_F32 || t->dtype == IR_F16 || t->dtype == IR_BF16;
        /* elementwise ops of constants: one constant */
        if (is_float && n->nin >= 1 && n->nin <= 2 && const_value(n->in[0], &a) &&
            (n->nin == 1 || const_value(n->in[1], &b))) {
            float r;
            if (eval_const(n->op, (float)a, n->nin == 2 ? (float)b : 0, &r)) {
                /* the constant takes over n's result, name and uses included */
                ir_node *c = ir_node_make(g, IR_OP_CONST, 0, NULL, 1, n->out, n->loc);
                ir_set_float(g, c, "value", r);
                ir_insert_before(g, n, c);
                ir_erase(g, n);
                changed++;
                continue;
            }
        }
        ir_value *x = n->nin ? n->in[0] : NULL;
        ir_value *keep = NULL; /* n computes exactly this value */
        switch (n->op) {
        case IR_OP_MUL:
        case IR_OP_DIV:
            if (is_const_of(n->in[1], 1.0) && ir_type_eq(&x->type, t))
                keep = x;
            else if (n->op == IR_OP_MUL && is_const_of(x, 1.0) && ir_type_eq(&n->in[1]->type, t))
                keep = n->in[1];
            break;
        case IR_OP_ADD:
        case IR_OP_SUB:
            /* x - 0 and x + -0 are x for every x; x + 0 is not (-0 + 0 is +0) */
            if (is_const_of(n->in[1], n->op == IR_OP_SUB ? 0.0 : -0.0) &&
                ir_type_eq(&x->type, t))
                keep = x;
            else if (n->op == IR_OP_ADD && is_const_of(x, -0.0) &&
                     ir_type_eq(&n->in[1]->type, t))
                keep = n->in[1];
            break;
        case IR_OP_NEG:
            if (x->kind == IR_VALUE_NODE && x->def->op == IR_OP_NEG)
                keep = x->def->in[0];
            break;
        case IR_OP_RESHAPE:
            if (ir_type_eq(&x->type, t)) {
                keep = x;
            } else if (x->kind == IR_VALUE_NODE && x->def->op == IR_OP_RESHAPE) {
                n->in[0] = x->def->in[0]; /* reshape of a reshape: one reshape */
                changed++;
            }
            break;
        case IR_OP_TRANSPOSE: {
            int count, identity = 1;
            const int64_t *perm = ir_attr_ints(n, "perm", &count);
            for (int i = 0; i < count; i++)
                identity &= perm[i] == i;
            if (identity)
                keep = x;
            break;
        }
        default:
            break;
        }
        if (keep) {
            forward_to(g, n, keep);
            changed++;
        }
    }
    return changed;
}

int pass_simplify(ir_graph *g, diag *d)
{
    int total = 0;
    for (int round = 0; round < 16; round++) {
        int changed = pass_fold(g, d) + pass_cse(g, d) + pass_dce(g, d);
        total += changed;
        if (!changed)
            break;
    }
    return total;
}
