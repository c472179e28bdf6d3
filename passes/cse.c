/* Common-subexpression elimination: a node equal to an earlier one (op,
 * operands, attributes, result types) is replaced by it; the earlier one's
 * results take over every use of the later one's.
 *
 * Expects: a verified graph.  Guarantees: the graph verifies and computes the
 * same bits (equal nodes compute equal values; dropout_train nodes differ in
 * their salt, so masks are never shared).  Returns the nodes replaced. */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "passes.h"

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
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout || a->device != b->device ||
        ir_op_communicates(a->op))
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
    ir_node **table = base_xcalloc(cap, sizeof *table);
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
    base_free(table);
    return replaced;
}
