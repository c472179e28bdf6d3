/* Constant folding and algebraic identities.
 *
 * Elementwise ops of constants become one constant, computed in float32 as the
 * executor would; x * 1, x / 1, x - 0, x + -0, -(-x), reshapes to the same
 * shape, reshapes of reshapes and identity transposes disappear.  x + 0 stays:
 * -0 + 0 is +0.
 *
 * Expects: a verified graph.  Guarantees: the graph verifies and computes the
 * same bits.  Returns the nodes removed or replaced. */
#include <math.h>

#include "arith.h"
#include "passes.h"

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
    case IR_OP_NEG: *out = ar_neg(a); return 1;
    case IR_OP_RELU: *out = ar_relu(a); return 1; /* NaN stays NaN */
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
        /* elementwise ops of constants: one constant */
        if (ir_is_float(t->dtype) && n->nin >= 1 && n->nin <= 2 && const_value(n->in[0], &a) &&
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
