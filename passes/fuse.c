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
#include <stdint.h>
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

/* Each node's place in the list, as a number that grows along it: a node
 * moved up takes a number between its new neighbours' (numbered afresh when
 * they leave no room).  So whether an operand is computed after a node is
 * one comparison, not a walk along the list: a pipeline's gradient sums over
 * microbatches made the walks quadratic (a 6.7B model's 1F1B program took 6 s
 * to fuse). */
typedef struct {
    const ir_node **key;
    double *pos;
    size_t cap;           /* a power of two, at least twice the nodes */
} places;

static size_t slot_of(const places *P, const ir_node *n)
{
    size_t h = ((uintptr_t)n >> 4) * 0x9e3779b97f4a7c15ull & (P->cap - 1);
    while (P->key[h] && P->key[h] != n)
        h = (h + 1) & (P->cap - 1);
    return h;
}

static void places_number(places *P, const ir_graph *g)
{
    double k = 0;
    ir_for_each_node(g, n) {
        size_t h = slot_of(P, n);
        P->key[h] = n;
        P->pos[h] = k++;
    }
}

static void places_init(places *P, const ir_graph *g)
{
    P->cap = 16;
    while (P->cap < 2 * (size_t)g->nnodes + 2)
        P->cap *= 2;
    P->key = base_xcalloc(P->cap, sizeof *P->key);
    P->pos = base_xcalloc(P->cap, sizeof *P->pos);
    places_number(P, g);
}

static double place(const places *P, const ir_node *n) { return P->pos[slot_of(P, n)]; }

/* n, just moved, between its neighbours. */
static void places_moved(places *P, const ir_graph *g, const ir_node *n)
{
    double lo = n->prev ? place(P, n->prev) : place(P, n->next) - 2,
           hi = n->next ? place(P, n->next) : lo + 2, mid = lo + (hi - lo) / 2;
    if (mid > lo && mid < hi)
        P->pos[slot_of(P, n)] = mid;
    else
        places_number(P, g);
}

/* The communication nodes: every one (comms), and the collectives among them
 * (colls, no sends or receives). */
typedef struct {
    const ir_node **comms, **colls;
    int ncomms, ncolls;
} comm_nodes;

/* The collectives between last and c in list order, into out; how many. */
static int collectives_between(const places *P, const comm_nodes *C, const ir_node *last,
                               const ir_node *c, const ir_node **out)
{
    double lo = place(P, last), hi = place(P, c);
    int n = 0;
    for (int i = 0; i < C->ncolls; i++) {
        double at = place(P, C->colls[i]);
        if (at > lo && at < hi) {
            int k = n++;
            while (k > 0 && place(P, out[k - 1]) > at)
                out[k] = out[k - 1], k--;
            out[k] = C->colls[i];
        }
    }
    return n;
}

/* Whether m reads a result of a node from `from` up to m. */
static int reads_from(const places *P, const ir_node *from, const ir_node *m)
{
    double lo = place(P, from), hi = place(P, m);
    for (int i = 0; i < m->nin; i++) {
        const ir_node *p = m->in[i]->kind == IR_VALUE_NODE ? m->in[i]->def : NULL;
        if (p && place(P, p) >= lo && place(P, p) < hi)
            return 1;
    }
    return 0;
}

/* Whether communication of m's device lies between from and m. */
static int communication_before(const places *P, const comm_nodes *C, const ir_node *from,
                                const ir_node *m)
{
    double lo = place(P, from), hi = place(P, m);
    for (int i = 0; i < C->ncomms; i++) {
        const ir_node *p = C->comms[i];
        if (p->device == m->device && place(P, p) >= lo && place(P, p) < hi)
            return 1;
    }
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
 * and recvs stay (a recv after its send in the node list, ir_verify).  The
 * walks along the list are comparisons of places (places, comm_nodes). */
static void hoist_collectives(ir_graph *g, places *P, const comm_nodes *C, const ir_node **buf,
                              ir_node *head, ir_node *last, const ir_node *c)
{
    ir_node *at = head; /* before the node head goes with, if any */
    for (ir_node *p = head->prev; p; p = p->prev)
        if (p->device == head->device) {
            at = pass_goes_with(p, head) ? p : head;
            break;
        }
    int n = collectives_between(P, C, last, c, buf);
    for (int i = 0; i < n; i++) {
        ir_node *m = (ir_node *)buf[i];
        if (communication_before(P, C, last->next, m) || reads_from(P, at, m))
            continue;
        ir_erase(g, m);
        ir_insert_before(g, at, m);
        places_moved(P, g, m);
    }
}

/* Whether c reads the result of a collective that a node between last and c
 * takes part in: c may not move up past it (ir_verify: nothing reads a
 * collective's result before all its devices have issued it). */
static int waits_on_collective(const places *P, const comm_nodes *C, const ir_node **buf,
                               const ir_node *last, const ir_node *c)
{
    int n = collectives_between(P, C, last, c, buf);
    for (int k = 0; k < n; k++) {
        const ir_node *m = buf[k];
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

    places P;
    places_init(&P, g);
    comm_nodes C = {0};
    ir_for_each_node(g, n)
        C.ncomms += ir_op_communicates(n->op);
    C.comms = base_xcalloc((size_t)C.ncomms + 1, sizeof *C.comms);
    C.colls = base_xcalloc((size_t)C.ncomms + 1, sizeof *C.colls);
    const ir_node **buf = base_xcalloc((size_t)C.ncomms + 1, sizeof *buf);
    C.ncomms = 0;
    ir_for_each_node(g, n)
        if (ir_op_communicates(n->op)) {
            C.comms[C.ncomms++] = n;
            if (n->op != IR_OP_SEND && n->op != IR_OP_RECV)
                C.colls[C.ncolls++] = n;
        }
    int fused = 0;
    for (ir_node *n = g->head; n; n = n->next) {
        /* communication runs when all its devices are there; attention's
           kernels store their tiles themselves, through no epilogue; a
           producer with several results (batchnorm_train) chains from its
           first */
        if (n->group || n->op == IR_OP_CONST || ir_op_communicates(n->op) ||
            n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_GRAD)
            continue;
        ir_node *last = n;
        int members = 1, group = g->ngroups + 1;
        for (;;) {
            const ir_value *v = last->out[0];
            ir_node *c = user[v->id];
            if (uses[v->id] != 1 || !c || !extends(c, v))
                break;
            /* c's other operands must be ready right after last */
            int ready = 1;
            double at = place(&P, last);
            for (int i = 0; i < c->nin; i++)
                ready &= c->in[i]->kind != IR_VALUE_NODE || place(&P, c->in[i]->def) <= at;
            if (!ready)
                break;
            if (last->next != c) {
                hoist_collectives(g, &P, &C, buf, n, last, c);
                if (waits_on_collective(&P, &C, buf, last, c))
                    break;
                ir_erase(g, c);
                ir_insert_before(g, last->next, c);
                places_moved(&P, g, c);
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
    base_free(P.key);
    base_free(P.pos);
    base_free(C.comms);
    base_free(C.colls);
    base_free(buf);
    return fused;
}
