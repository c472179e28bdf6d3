/* Dead-code elimination: erases the nodes none of whose results is read by a
 * node, an output, the loss or an update.
 *
 * Expects: a verified graph.  Guarantees: the graph verifies and computes the
 * same outputs, loss and updates, bit for bit.  Returns the nodes erased. */
#include <stdlib.h>

#include "base.h"
#include "passes.h"

/* How many times each value is used (by id), counting outputs, loss, updates. */
static int *use_counts(const ir_graph *g)
{
    int *uses = base_xcalloc((size_t)g->nvalues + 1, sizeof *uses);
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
        int live = ir_op_communicates(n->op); /* its peers wait for it */
        for (int i = 0; i < n->nout && !live; i++)
            live = uses[n->out[i]->id] > 0;
        if (live)
            continue;
        for (int i = 0; i < n->nin; i++)
            uses[n->in[i]->id]--;
        ir_erase(g, n);
        removed++;
    }
    base_free(uses);
    return removed;
}
