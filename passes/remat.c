/* Rematerialization (gnc compile --remat): in a training step, a ReLU of a
 * batchnorm_train's output is computed a second time in the backward pass,
 * instead of keeping its forward result alive until then.  The recomputation,
 * batchnorm_apply then relu, reads the batchnorm's input and statistics, which
 * its gradient keeps anyway, so one activation per batchnorm-ReLU pair is freed
 * right after its forward uses, for 4 FLOPs per element.
 *
 * Expects: a verified training step (autodiff's: the forward pass up to the
 * loss, then the backward pass).  Guarantees: the graph verifies and computes
 * the same bits (batchnorm_apply reproduces batchnorm_train's normalization
 * exactly, runtime/cpu/kernels.h); the recomputation is placed right before the
 * first backward node that reads it.  Returns the number of ReLUs recomputed. */
#include <stdlib.h>

#include "base.h"
#include "passes.h"

int pass_remat(ir_graph *g, diag *d)
{
    (void)d;
    if (!g->loss || g->loss->kind != IR_VALUE_NODE || !g->nupdates)
        return 0; /* not a training step */
    int nv = g->nvalues; /* values made below have larger ids and are left alone */
    int *pos = base_xcalloc((size_t)nv + 1, sizeof *pos); /* value id -> defining index */
    int idx = 0, loss_at = -1;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nout; i++)
            pos[n->out[i]->id] = idx;
        if (n->out[0] == g->loss)
            loss_at = idx;
        idx++;
    }
    int count = 0;
    for (ir_node *r = g->head; r; r = r->next) {
        const ir_value *u = r->nin ? r->in[0] : NULL;
        if (r->op != IR_OP_RELU || r->out[0]->id >= nv || pos[r->out[0]->id] > loss_at ||
            u->kind != IR_VALUE_NODE ||
            u->def->op != IR_OP_BATCHNORM_TRAIN || u->def_index != 0)
            continue;
        ir_value *y = r->out[0];
        /* the first backward reader; outputs and updates never read a ReLU */
        ir_node *first = NULL;
        int at = pos[y->id] + 1;
        for (ir_node *m = r->next; m; m = m->next, at++)
            for (int i = 0; i < m->nin && !first; i++)
                if (m->in[i] == y && at > loss_at)
                    first = m;
        if (!first)
            continue;
        const ir_node *bn = u->def;
        ir_value *in[5] = {bn->in[0], bn->in[1], bn->in[2], bn->out[1], bn->out[2]};
        char name[512];
        snprintf(name, sizeof name, "%s.remat", u->name);
        ir_node *apply = ir_node_new(g, IR_OP_BATCHNORM_APPLY, 5, in, 1, name, r->loc);
        ir_set_float(g, apply, "eps", ir_attr_float(bn, "eps"));
        ir_set_float(g, apply, "momentum", ir_attr_float(bn, "momentum"));
        apply->out[0]->type = u->type;
        snprintf(name, sizeof name, "%s.remat", y->name);
        ir_node *relu = ir_node_new(g, IR_OP_RELU, 1, &apply->out[0], 1, name, r->loc);
        relu->out[0]->type = y->type;
        ir_insert_before(g, first, apply);
        ir_insert_before(g, first, relu);
        /* the backward readers take the recomputed value */
        for (ir_node *m = first; m; m = m->next)
            for (int i = 0; i < m->nin; i++)
                if (m->in[i] == y && m != relu)
                    m->in[i] = relu->out[0];
        count++;
    }
    base_free(pos);
    return count;
}
