/* Folding batchnorm into the layer before it (inference programs).
 *
 * A batchnorm (running statistics) whose input is a conv2d's or a 2-d dense's
 * result, read by nothing else, becomes part of that layer's weights:
 *
 *   s = gamma / sqrt(var + eps)              (bn_fold_scale)
 *   w' = w * s   per output channel          b' = (b - mean) * s + beta
 *
 * and the layer with w' and b' replaces both.  The new weights are computed from
 * parameters and buffers alone, so the executor computes them once, not on every
 * run (ir_weight_only).  Expects: a verified graph without updates (a training
 * step keeps its batchnorms).  Guarantees: the graph verifies; outputs equal the
 * unfolded program's up to rounding (1e-5 relative in the tests): the
 * normalization is now done in the layer's sums.  Returns the number of
 * batchnorms folded. */
#include <stdio.h>

#include "passes.h"

static ir_value *node1(ir_graph *g, ir_op op, ir_value *a, ir_value *b, const char *name,
                       ir_loc loc, ir_node *before)
{
    ir_value *in[2] = {a, b};
    ir_node *n = ir_node_new(g, op, b ? 2 : 1, in, 1, name, loc);
    ir_type t[IR_MAX_RESULTS];
    char err[256];
    IR_ASSERT(ir_infer(n, t, err, sizeof err));
    n->out[0]->type = t[0];
    ir_insert_before(g, before, n);
    return n->out[0];
}

static ir_value *reshaped(ir_graph *g, ir_value *v, int rank, int64_t first, const char *name,
                          ir_loc loc, ir_node *before)
{
    int64_t shape[4] = {first, 1, 1, 1};
    ir_node *n = ir_node_new(g, IR_OP_RESHAPE, 1, &v, 1, name, loc);
    ir_set_ints(g, n, "shape", rank, shape);
    n->out[0]->type = (ir_type){v->type.dtype, rank, {first, 1, 1, 1}};
    ir_insert_before(g, before, n);
    return n->out[0];
}

int pass_fold_bn(ir_graph *g, diag *d)
{
    (void)d;
    if (g->nupdates)
        return 0;
    int folded = 0;
    for (ir_node *bn = g->head, *next; bn; bn = next) {
        next = bn->next;
        if (bn->op != IR_OP_BATCHNORM || bn->in[0]->kind != IR_VALUE_NODE)
            continue;
        ir_node *layer = bn->in[0]->def;
        int conv = layer->op == IR_OP_CONV2D;
        if (!(conv || (layer->op == IR_OP_DENSE && layer->out[0]->type.rank == 2)))
            continue;
        int uses = 0; /* the layer's result: read by the batchnorm alone */
        ir_for_each_node(g, m)
            for (int i = 0; i < m->nin; i++)
                uses += m->in[i] == layer->out[0];
        for (int i = 0; i < g->noutputs; i++)
            uses += 2 * (g->outputs[i].value == layer->out[0]);
        if (uses != 1 || (g->loss && g->loss == layer->out[0]))
            continue;
        char name[512];
        const char *base = layer->out[0]->name;
        ir_loc loc = bn->loc;
        ir_value *w = layer->in[1], *gamma = bn->in[1], *beta = bn->in[2], *mean = bn->in[3],
                 *var = bn->in[4];
        snprintf(name, sizeof name, "%s.bn_scale", base);
        ir_value *in[2] = {gamma, var};
        ir_node *sn = ir_node_new(g, IR_OP_BN_FOLD_SCALE, 2, in, 1, name, loc);
        ir_set_float(g, sn, "eps", ir_attr_float(bn, "eps"));
        sn->out[0]->type = gamma->type;
        ir_insert_before(g, layer, sn);
        ir_value *s = sn->out[0];
        int64_t o = w->type.dims[0];
        snprintf(name, sizeof name, "%s.folded_weight", base);
        ir_value *ws = reshaped(g, s, w->type.rank, o, name, loc, layer);
        ir_value *w2 = node1(g, IR_OP_MUL, w, ws, name, loc, layer);
        snprintf(name, sizeof name, "%s.folded_bias", base);
        ir_value *t = layer->nin == 3 ? node1(g, IR_OP_SUB, layer->in[2], mean, name, loc, layer)
                                      : node1(g, IR_OP_NEG, mean, NULL, name, loc, layer);
        ir_value *b2 = node1(g, IR_OP_ADD, node1(g, IR_OP_MUL, t, s, name, loc, layer), beta,
                             name, loc, layer);
        /* the layer takes the folded weights and the batchnorm's result */
        ir_value *ops[3] = {layer->in[0], w2, b2};
        ir_node *nl = ir_node_make(g, layer->op, 3, ops, 1, bn->out, layer->loc);
        ir_copy_attrs(g, nl, layer);
        ir_insert_before(g, bn, nl);
        ir_erase(g, bn);
        ir_erase(g, layer);
        folded++;
    }
    return folded;
}
