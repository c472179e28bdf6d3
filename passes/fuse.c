/* Fusion: a producer and the chain of elementwise ops that consume its result
 * become one fused node (ir.h, "group"), which codegen emits as one kernel and
 * which the memory planner runs in place.
 *
 * Expects: a verified graph.  Each chain starts at any op (from its first
 * result: batchnorm_train's normalized output) and grows while the running
 * result has exactly one use (no output, loss or update
 * reads it) and that use is an epilogue: an elementwise op whose result has the
 * running result's type (activation, inference dropout, add/sub/mul/div with a
 * same-shaped or broadcast operand, the residual add included), an inference
 * batchnorm (a per-channel scale and shift), the gradient of an activation
 * with the running result as its incoming gradient, or a reduction that reads
 * it first (softmax, log_softmax, layernorm, batchnorm_train, batchnorm_grad,
 * global_avgpool, cross_entropy, mse), which takes the chain as its prologue; after a reduction
 * the chain goes on only where its result keeps the running result's shape.  The epilogue moves up to
 * right after the chain, which is legal when its other operands are computed
 * before the chain ends; the communication it passes that does not wait on the
 * chain moves up before the chain.
 *
 * Guarantees: the graph verifies; no node changes its operands, so the fused
 * program computes the same bits; members of a group are consecutive. */
#include <stdlib.h>

#include "base.h"
#include "passes.h"

static int is_epilogue_op(ir_op op)
{
    return ir_op_is(op, IR_EPILOGUE);
}

/* Reductions that take the chain so far as their prologue: the chain goes on
 * from their first result only where it has the running result's type. */
static int is_reduction(ir_op op)
{
    switch (op) {
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: case IR_OP_LAYERNORM: case IR_OP_BATCHNORM_TRAIN:
    case IR_OP_BATCHNORM_GRAD: case IR_OP_GLOBAL_AVGPOOL: case IR_OP_CROSS_ENTROPY: case IR_OP_MSE:
    case IR_OP_NLL_LOSS:
        return 1;
    default:
        return 0;
    }
}

/* Whether c can extend a chain whose running result is v. */
static int extends(const ir_node *c, const ir_value *v)
{
    if (!c->group && is_reduction(c->op))
        return c->in[0] == v;
    if (c->group || c->nout != 1 || !is_epilogue_op(c->op) ||
        !ir_type_eq(&c->out[0]->type, &v->type))
        return 0;
    switch (c->op) {
    case IR_OP_ADD: case IR_OP_MUL: /* commutative: v on either side */
        return c->in[0] == v || c->in[1] == v;
    default: /* v is the first operand: the value, or the incoming gradient */
        for (int i = 1; i < c->nin; i++)
            if (c->in[i] == v)
                return 0;
        return c->in[0] == v;
    }
}

/* Whether m reads a result of a node from `from` up to m. */
static int reads_from(const ir_node *from, const ir_node *m)
{
    for (const ir_node *p = from; p != m; p = p->next)
        for (int o = 0; o < p->nout; o++)
            for (int i = 0; i < m->nin; i++)
                if (m->in[i] == p->out[o])
                    return 1;
    return 0;
}

/* Whether communication of m's device lies between from and m. */
static int communication_before(const ir_node *from, const ir_node *m)
{
    for (const ir_node *p = from; p != m; p = p->next)
        if (p->device == m->device && ir_op_communicates(p->op))
            return 1;
    return 0;
}

/* Before epilogue c moves up to right after last, the end of a chain that
 * starts at head: the collectives between the two that read nothing computed
 * from head on move up before head instead, so that they start before the
 * fused kernel rather than after it (ZeRO-3's gathers, prefetched a layer
 * ahead by the partition pass), and so that c does not pass a participant of
 * a collective whose result it reads; before the node head goes with, if any
 * (schedule.c), not between them.  Each device's communication keeps its
 * order: one that cannot move keeps the rest of its device's after it; sends
 * and recvs stay (a recv after its send in the node list, ir_verify). */
static void hoist_collectives(ir_graph *g, ir_node *head, ir_node *last, const ir_node *c)
{
    ir_node *at = head; /* before the node head goes with, if any */
    for (ir_node *p = head->prev; p; p = p->prev)
        if (p->device == head->device) {
            at = pass_goes_with(p, head) ? p : head;
            break;
        }
    for (ir_node *m = last->next, *next; m && m != c; m = next) {
        next = m->next;
        if (!ir_op_communicates(m->op) || m->op == IR_OP_SEND || m->op == IR_OP_RECV ||
            communication_before(last->next, m) || reads_from(at, m))
            continue;
        ir_erase(g, m);
        ir_insert_before(g, at, m);
    }
}

/* Whether c reads the result of a collective that a node between last and c
 * takes part in: c may not move up past it (ir_verify: nothing reads a
 * collective's result before all its devices have issued it). */
static int waits_on_collective(const ir_node *last, const ir_node *c)
{
    for (const ir_node *m = last->next; m && m != c; m = m->next) {
        if (!ir_op_communicates(m->op) || m->op == IR_OP_SEND || m->op == IR_OP_RECV)
            continue;
        int64_t id = ir_attr_int(m, "id");
        for (int i = 0; i < c->nin; i++) {
            const ir_node *p = c->in[i]->kind == IR_VALUE_NODE ? c->in[i]->def : NULL;
            if (p && p->op == m->op && ir_attr_int(p, "id") == id)
                return 1;
        }
    }
    return 0;
}

int pass_fuse(ir_graph *g, diag *d)
{
    (void)d;
    int *uses = base_xcalloc((size_t)g->nvalues + 1, sizeof *uses);
    ir_node **user = base_xcalloc((size_t)g->nvalues + 1, sizeof *user); /* the last reader */
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++) {
            uses[n->in[i]->id] += !(i && n->in[i] == n->in[i - 1]);
            user[n->in[i]->id] = n;
        }
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i].value->id] += 2;
    if (g->loss)
        uses[g->loss->id] += 2;
    for (int i = 0; i < g->nupdates; i++)
        uses[g->updates[i].source->id] += 2;

    int fused = 0;
    for (ir_node *n = g->head; n; n = n->next) {
        if (n->group || n->op == IR_OP_CONST || ir_op_communicates(n->op))
            continue; /* communication runs when all its devices are there */ /* a producer with several results (batchnorm_train) chains from
                         its first */
        ir_node *last = n;
        int members = 1, group = g->ngroups + 1;
        for (;;) {
            const ir_value *v = last->out[0];
            ir_node *c = user[v->id];
            if (uses[v->id] != 1 || !c || !extends(c, v))
                break;
            /* c's other operands must be ready right after last */
            int ready = 1;
            for (ir_node *m = last->next; m && m != c && ready; m = m->next)
                for (int i = 0; i < c->nin; i++)
                    for (int o = 0; o < m->nout; o++)
                        ready &= c->in[i] != m->out[o];
            if (!ready)
                break;
            if (last->next != c) {
                hoist_collectives(g, n, last, c);
                if (waits_on_collective(last, c))
                    break;
                ir_erase(g, c);
                ir_insert_before(g, last->next, c);
            }
            n->group = c->group = group;
            last = c;
            members++;
            if (is_reduction(c->op) && !ir_type_eq(&c->out[0]->type, &v->type))
                break; /* a result of another shape: the chain ends there */
        }
        if (members > 1) {
            g->ngroups = group;
            fused += members;
            n = last;
        }
    }
    base_free(uses);
    base_free(user);
    return fused;
}
