/* Layouts: which 4-d activations a program stores channels-last (NHWC).
 *
 * cuDNN's 16-bit tensor-core convolutions take NHWC tensors; given NCHW
 * ones, a call transposes its operands in and its result out inside the
 * library (31.5% of a resnet18 bf16 step on the H200, 2026-11-26).  So in a
 * bf16 or fp16 program whose convolutions are cuDNN calls, every activation
 * the program computes for itself is stored channels-last, and the kernels
 * that index channels (batchnorm, pooling, global average pooling, sum_to,
 * broadcasts) are written for it (kernels.c, special.c).  What the caller
 * sees stays NCHW: inputs, parameters, outputs, the loss and the updates; a
 * kernel reading or writing one of those across layouts indexes it as the
 * other layout (kb.c, kb_opnd: the conversion happens at the boundary, in a
 * kernel that runs anyway).
 *
 * Ops fall in three kinds:
 *   - free: elementwise ops, broadcasts, the optimizers, convolutions.  Each
 *     operand may be stored either way (an elementwise kernel indexes a
 *     mismatched operand across layouts; a convolution takes a mismatched
 *     operand through a transposed copy);
 *   - tied: batchnorm, pooling, global average pooling, sum_to, and a result
 *     computed in place over its operand: their 4-d tensors share a layout;
 *   - the rest (reshape of channels, concat, slice, softmax, matmul, the
 *     collectives, ...): NCHW for every 4-d tensor they touch.
 * A value is channels-last when the program's layout is, the program made it
 * (a node result in the arena, not a weight, not external), and nothing tied
 * to it must be NCHW.  A convolution's filter gradient that only optimizers
 * read is kept as the channels-last call writes it (KRSC); the optimizer
 * indexes it across layouts. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cg_nhwc_same(const ir_type *t)
{
    return t->dims[1] == 1 || t->dims[2] * t->dims[3] == 1;
}

int cg_layout_matters(const ir_value *v)
{
    return v->type.rank == 4 && !cg_nhwc_same(&v->type);
}

/* A convolution's channels-last copies fit CUDA's grid (library.c's
 * transposes: a block per 32 x 32 tile, at most 65535 tiles down a matrix
 * and 65535 matrices); and a call's channels-last tensors need the same. */
static int nhwc_fits(const ir_node *n)
{
    const ir_value *x = n->op == IR_OP_CONV2D_GRAD_INPUT ? n->out[0]
                        : n->op == IR_OP_CONV2D_GRAD_WEIGHT ? n->in[1] : n->in[0];
    const ir_value *w = n->op == IR_OP_CONV2D_GRAD_WEIGHT ? n->out[0] : n->in[1];
    const ir_value *y = n->op == IR_OP_CONV2D ? n->out[0] : n->in[0];
    const int64_t *xd = x->type.dims, *wd = w->type.dims, *yd = y->type.dims;
    const int64_t rows[] = {xd[1], wd[0], xd[2] * xd[3], yd[2] * yd[3], wd[2] * wd[3]};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if ((rows[i] + 31) / 32 > 65535)
            return 0;
    return xd[0] <= 65535 && wd[0] <= 65535;
}

/* Whether convolution n is a cuDNN call that may take channels-last tensors. */
static int conv_free(cg_gen *G, const ir_node *n)
{
    cg_conv_impl c = cg_conv_of(&G->o, n);
    return (c == CG_CONV_CUDNN || c == CG_CONV_CUDNN_NHWC) && nhwc_fits(n);
}

static int lowp(const cg_gen *G)
{
    return G->o.precision == PREC_BF16 || G->o.precision == PREC_FP16;
}

/* The program's layout: NHWC where asked, or by default in a 16-bit program
 * with a cuDNN convolution. */
static int channels_last(cg_gen *G)
{
    if (G->o.layout != CG_LAYOUT_AUTO)
        return G->o.layout == CG_LAYOUT_NHWC;
    if (!lowp(G) || G->o.conv != CG_CONV_CUDNN)
        return 0;
    ir_for_each_node(G->g, n)
        if (cg_is_conv(n) && cg_conv_of(&G->o, n) == CG_CONV_CUDNN)
            return 1;
    return 0;
}

enum { FREE, TIED, NCHW };

/* What kind n is, and for a tied op which operands and results share its
 * layout (bits: operands 0-7, results 8-15). */
static int kind_of(cg_gen *G, const ir_node *n, unsigned *tied)
{
    *tied = 0;
    if (cg_is_conv(n))
        return conv_free(G, n) ? FREE : NCHW;
    switch (n->op) {
    case IR_OP_BATCHNORM_TRAIN: case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D:
    case IR_OP_DROPOUT:       /* free: its result is its operand's bytes */
        *tied = 1u | 1u << 8;
        return TIED;
    case IR_OP_BATCHNORM_GRAD: case IR_OP_MAXPOOL2D_GRAD:
        *tied = 3u | 1u << 8;
        return TIED;
    case IR_OP_AVGPOOL2D_GRAD:
        *tied = 1u | 1u << 8;
        return TIED;
    case IR_OP_GLOBAL_AVGPOOL:
        *tied = 1u;
        return TIED;
    case IR_OP_SUM_TO:
        *tied = 1u;
        return cg_layout_matters(n->out[0]) ? NCHW : TIED;
    case IR_OP_RESHAPE:
        *tied = 1u | 1u << 8;
        return ir_type_eq(&n->in[0]->type, &n->out[0]->type) ? TIED : NCHW;
    case IR_OP_SGD: case IR_OP_ADAM: case IR_OP_BROADCAST_TO: case IR_OP_CONST:
    case IR_OP_BATCHNORM: case IR_OP_BATCHNORM_APPLY:
        return FREE;
    case IR_OP_ARANGE: case IR_OP_DROPOUT_TRAIN: /* computed from the element's index */
        return NCHW;
    default:
        return ir_op_is(n->op, IR_ELEMENTWISE) || n->op == IR_OP_WHERE || n->op == IR_OP_CAST ||
                       n->op == IR_OP_MAXIMUM || n->op == IR_OP_MINIMUM || n->op == IR_OP_POW ||
                       n->op == IR_OP_CLAMP
                   ? FREE
                   : NCHW;
    }
}

/* Whether the program may store v channels-last: it made v, in the arena. */
static int candidate(cg_gen *G, const ir_value *v)
{
    return cg_layout_matters(v) && v->kind == IR_VALUE_NODE && !G->weight[v->id] &&
           !G->external[v->id] && G->mp->offset_by_id[v->id] >= 0;
}

/* The channels-last type of t as a kernel running over channels-last
 * tensors sees it: t aligned to 4 dims (NumPy's broadcasting) and permuted
 * [n, c, h, w] -> [n, h, w, c].  A tensor of one channel or one pixel has
 * the same bytes either way; one stored channels-last is these bytes. */
static ir_type nhwc_type(const ir_type *t)
{
    ir_type p = *t;
    if (t->rank > 4)
        return p;
    int64_t d[4] = {1, 1, 1, 1};
    for (int i = 0; i < t->rank; i++)
        d[4 - t->rank + i] = t->dims[i];
    p.rank = 4;
    p.dims[0] = d[0], p.dims[1] = d[2], p.dims[2] = d[3], p.dims[3] = d[1];
    return p;
}

int cg_conv_nhwc(cg_gen *G, const ir_node *n, const ir_value *res, const ir_value *z)
{
    if (!conv_free(G, n))
        return 0;
    if (cg_conv_of(&G->o, n) == CG_CONV_CUDNN_NHWC)
        return 1;
    const ir_value *act[3] = {n->in[0], n->op == IR_OP_CONV2D_GRAD_WEIGHT ? n->in[1] : res, z};
    int nhwc = 0, nchw = 0;
    for (int i = 0; i < 3; i++)
        if (act[i] && cg_layout_matters(act[i]))
            nhwc += G->nhwc[act[i]->id], nchw += !G->nhwc[act[i]->id];
    return nhwc > 0 && nhwc >= nchw;
}

void cg_choose_layouts(cg_gen *G)
{
    const ir_graph *g = G->g;
    int nv = G->nvalues;
    G->nhwc = base_xcalloc((size_t)nv + 1, 1);
    G->ptype = base_xcalloc((size_t)nv + 1, sizeof *G->ptype);
    const ir_value **val = base_xcalloc((size_t)nv + 1, sizeof *val);
    for (int i = 0; i < g->ninputs; i++)
        val[g->inputs[i]->id] = g->inputs[i];
    for (int i = 0; i < g->nparams; i++)
        val[g->params[i]->id] = g->params[i];
    ir_for_each_node(g, n)
        for (int k = 0; k < n->nout; k++)
            val[n->out[k]->id] = n->out[k];
    for (int i = 0; i < nv; i++)
        if (val[i])
            G->ptype[i] = nhwc_type(&val[i]->type);
    if (!channels_last(G)) {
        base_free(val);
        return;
    }
    int *parent = base_xmalloc(((size_t)nv + 1) * sizeof *parent);
    unsigned char *nchw = base_xcalloc((size_t)nv + 1, 1);
    for (int i = 0; i < nv; i++)
        parent[i] = i;
    ir_for_each_node(g, n) {
        unsigned tied = 0;
        int kind = ir_op_communicates(n->op) ? NCHW : kind_of(G, n, &tied);
        const ir_value *first = NULL;
        for (int j = 0; j < n->nin + n->nout; j++) {
            const ir_value *v = j < n->nin ? n->in[j] : n->out[j - n->nin];
            int slot = j < n->nin ? j : 8 + j - n->nin; /* tied's bit; past 15: none */
            unsigned bit = slot < 16 && (j < n->nin ? j < 8 : j - n->nin < 8) ? 1u << slot : 0;
            if (!cg_layout_matters(v))
                continue;
            if (kind == NCHW)
                nchw[v->id] = 1;
            if (kind == TIED && (tied & bit)) {
                if (first)
                    parent[cg_find(parent, v->id)] = cg_find(parent, first->id);
                first = first ? first : v;
            }
        }
        /* a result in place over an operand: one buffer, one layout */
        int k = n->nout == 1 ? mp_inplace_operand(n) : -1;
        if (k >= 0 && cg_layout_matters(n->out[0]) && n->in[k]->kind == IR_VALUE_NODE &&
            G->mp->offset_by_id[n->in[k]->id] >= 0 &&
            G->mp->offset_by_id[n->in[k]->id] == G->mp->offset_by_id[n->out[0]->id])
            parent[cg_find(parent, n->in[k]->id)] = cg_find(parent, n->out[0]->id);
    }
    /* a filter's gradient and what is computed from it (accumulated over
       microbatches, summed, all-reduced) are the parameters' KCRS, not
       activations; the rule below keeps some KRSC */
    unsigned char *wgrad = base_xcalloc((size_t)nv + 1, 1);
    ir_for_each_node(g, n) {
        int from = n->op == IR_OP_CONV2D_GRAD_WEIGHT;
        for (int j = 0; j < n->nin && !from; j++)
            from = wgrad[n->in[j]->id];
        for (int k = 0; k < n->nout && from; k++)
            wgrad[n->out[k]->id] = 1;
    }
    for (int i = 0; i < nv; i++)
        if (val[i] && cg_layout_matters(val[i]) && (!candidate(G, val[i]) || wgrad[i]))
            nchw[i] = 1;
    for (int i = 0; i < nv; i++)
        if (nchw[i])
            nchw[cg_find(parent, i)] = 1;
    for (int i = 0; i < nv; i++)
        G->nhwc[i] = val[i] && candidate(G, val[i]) && !nchw[cg_find(parent, i)];
    /* filter gradients only optimizers read: as a channels-last call writes
       them (the optimizer reads them across layouts) */
    ir_for_each_node(g, n)
        if (n->op == IR_OP_CONV2D_GRAD_WEIGHT && candidate(G, n->out[0]) &&
            cg_only_optimizers(G, n->out[0]) && cg_conv_nhwc(G, n, NULL, NULL))
            G->nhwc[n->out[0]->id] = 1;
    base_free(wgrad);
    base_free(parent);
    base_free(nchw);
    base_free(val);
}
