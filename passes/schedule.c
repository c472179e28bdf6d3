/* Scheduling: reorders the node list, a topological order, greedily: of the
 * nodes whose operands are ready, the one that frees the most bytes minus what
 * it allocates (memplan.c's sizes), ties broken by the old order.  The new
 * order is kept only if it lowers the peak of live bytes (mp_peak_live).
 *
 * A node computing an update's new value (an optimizer step, a running
 * statistic) waits for every other reader of the value it replaces, so that
 * a backend may compute it in place (codegen.c alias_updates): the order
 * autodiff writes, the optimizer last, already does.  The optimizer's steps
 * are taken only when nothing else is ready, so they run together at the end
 * (one launch for all: codegen.c cg_emit_multi), the gradients kept until
 * then.  Last, a node a backend computes with the one before it (a
 * convolution's bias in the batchnorm after it, a bias gradient in the
 * batchnorm gradient before it) moves up to right after that one.
 *
 * Expects: a verified graph without fused nodes (run it before fuse; it leaves
 * a fused graph alone).  Guarantees: the graph verifies and computes the same
 * bits (the order of independent nodes changes no result).  Returns the nodes
 * that moved. */
#include <stdlib.h>

#include "base.h"
#include "passes.h"

/* Whether n is best computed right after prev, which a backend computes
 * with it: a convolution's bias added by the batchnorm_train that reads its
 * result, a batchnorm gradient's dx summed per channel (a bias gradient) by
 * the batchnorm_grad's kernel (codegen: library.c bias_folds, kernels.c
 * bias_grad_of). */
int pass_goes_with(const ir_node *prev, const ir_node *n)
{
    return (prev->op == IR_OP_CONV2D && prev->nin == 3 && n->op == IR_OP_BATCHNORM_TRAIN &&
            n->in[0] == prev->out[0]) ||
           (prev->op == IR_OP_BATCHNORM_GRAD && n->op == IR_OP_SUM_TO && n->in[0] == prev->out[0]);
}

/* Whether n may move up to right after prev: its operands are computed by
 * then, and no node between reads a value n's results replace (an update). */
static int may_follow(const ir_graph *g, const ir_node *prev, const ir_node *n)
{
    for (const ir_node *m = prev->next; m != n; m = m->next)
        for (int o = 0; o < m->nout; o++) {
            for (int j = 0; j < n->nin; j++)
                if (n->in[j] == m->out[o])
                    return 0;
            for (int u = 0; u < g->nupdates; u++)
                for (int j = 0; j < n->nout; j++)
                    if (g->updates[u].source == n->out[j])
                        for (int q = 0; q < m->nin; q++)
                            if (m->in[q] == g->updates[u].target)
                                return 0;
        }
    return 1;
}

/* Moves each node that goes with the one computing its operand right after
 * it.  Returns the nodes moved. */
static int pair_up(ir_graph *g)
{
    int moved = 0;
    for (ir_node *p = g->head; p; p = p->next)
        for (ir_node *n = p->next; n; n = n->next) {
            if (!pass_goes_with(p, n))
                continue;
            if (n != p->next && may_follow(g, p, n)) {
                n->prev->next = n->next;
                if (n->next)
                    n->next->prev = n->prev;
                else
                    g->tail = n->prev;
                n->prev = p;
                n->next = p->next;
                p->next->prev = n;
                p->next = n;
                moved++;
            }
            break;
        }
    return moved;
}

int pass_schedule(ir_graph *g, diag *d)
{
    (void)d;
    int nn = g->nnodes, nv = g->nvalues;
    ir_for_each_node(g, n)
        if (n->group || n->device)
            return 0; /* fused nodes move as a whole, and devices keep the order of their
                         communication: not written yet */
    if (nn < 2)
        return 0;
    int64_t before = mp_peak_live(g);
    ir_node **old = base_xmalloc((size_t)nn * sizeof *old);
    ir_node **order = base_xmalloc((size_t)nn * sizeof *order);
    int *pending = base_xcalloc((size_t)nn, sizeof *pending);   /* operands not yet computed */
    int *readers = base_xcalloc((size_t)nv + 1, sizeof *readers); /* unscheduled, per value */
    char *done = base_xcalloc((size_t)nn, 1);
    int k = 0;
    ir_for_each_node(g, n)
        old[k++] = n;
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < old[i]->nin; j++) {
            const ir_value *v = old[i]->in[j];
            readers[v->id]++;
            pending[i] += v->kind == IR_VALUE_NODE;
        }
    /* an update's new value after every other reader of its target: edges
       from each such reader to the node computing the new value */
    int nedges = 0, *edge = NULL;
    for (int u = 0; u < g->nupdates; u++) {
        const ir_value *s = g->updates[u].source, *t = g->updates[u].target;
        int to = -1;
        for (int i = 0; i < nn && s->kind == IR_VALUE_NODE; i++)
            if (old[i] == s->def)
                to = i;
        for (int i = 0; i < nn && to >= 0; i++) {
            int reads = 0;
            for (int j = 0; j < old[i]->nin; j++)
                reads |= old[i]->in[j] == t;
            if (!reads || i == to)
                continue;
            edge = base_xrealloc(edge, (size_t)(nedges + 1) * 2 * sizeof *edge);
            edge[2 * nedges] = i, edge[2 * nedges + 1] = to;
            nedges++;
            pending[to]++;
        }
    }
    /* values that must survive the program are never freed */
    for (int i = 0; i < g->noutputs; i++)
        readers[g->outputs[i].value->id] += nn;
    if (g->loss)
        readers[g->loss->id] += nn;
    for (int i = 0; i < g->nupdates; i++)
        readers[g->updates[i].source->id] += nn;
    /* greedy, O(n^2): fine for graphs of thousands of nodes */
    for (int step = 0; step < nn; step++) {
        int best = -1, best_later = 0;
        int64_t best_gain = 0;
        for (int i = 0; i < nn; i++) {
            if (done[i] || pending[i])
                continue;
            const ir_node *n = old[i];
            /* the optimizer's steps last, together: one launch can make them
               all (codegen.c cg_emit_multi), for their gradients' bytes */
            int later = n->op == IR_OP_SGD || n->op == IR_OP_ADAM;
            if (best >= 0 && later && !best_later)
                continue;
            int64_t gain = 0;
            for (int j = 0; j < n->nout; j++)
                gain -= mp_value_bytes(n->out[j]);
            for (int j = 0; j < n->nin; j++) {
                const ir_value *v = n->in[j];
                int last_reader = readers[v->id] == 1;
                for (int q = 0; q < j; q++) /* an operand read twice by n */
                    last_reader &= n->in[q] != v;
                if (v->kind == IR_VALUE_NODE && last_reader)
                    gain += mp_value_bytes(v);
            }
            if (best < 0 || (best_later && !later) || gain > best_gain) {
                best = i;
                best_gain = gain;
                best_later = later;
            }
        }
        IR_ASSERT(best >= 0);
        done[best] = 1;
        order[step] = old[best];
        const ir_node *n = old[best];
        for (int j = 0; j < n->nin; j++)
            readers[n->in[j]->id]--;
        for (int e = 0; e < nedges; e++)
            pending[edge[2 * e + 1]] -= edge[2 * e] == best;
        for (int i = 0; i < nn; i++)
            if (!done[i])
                for (int j = 0; j < old[i]->nin; j++)
                    for (int o = 0; o < n->nout; o++)
                        pending[i] -= old[i]->in[j] == n->out[o];
    }
    /* relink in the new order, then keep it only if it is better */
    int moved = 0;
    for (int i = 0; i < nn; i++)
        moved += order[i] != old[i];
    ir_node **use = order;
    for (int pass = 0; pass < 2; pass++) {
        g->head = use[0];
        g->tail = use[nn - 1];
        for (int i = 0; i < nn; i++) {
            use[i]->prev = i ? use[i - 1] : NULL;
            use[i]->next = i + 1 < nn ? use[i + 1] : NULL;
        }
        if (use == old || mp_peak_live(g) < before)
            break;
        use = old; /* no better: back to the old order */
        moved = 0;
    }
    moved += pair_up(g);
    base_free(old);
    base_free(order);
    base_free(pending);
    base_free(readers);
    base_free(done);
    base_free(edge);
    return moved;
}
