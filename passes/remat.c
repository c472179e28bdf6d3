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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------- recomputation */

/* Recomputation (--recompute, a dimension of --strategy auto's search): in a
 * training step, forward results that the backward pass reads are computed a
 * second time just before the backward pass needs them, instead of being kept
 * from the forward pass, trading FLOPs for memory (Megatron-LM's activation
 * recomputation, PyTorch's checkpointing):
 *   - PT_RECOMPUTE_SELECTIVE: every such result but those of the GEMM-shaped
 *     ops and attention (dense, matmul, conv2d, attention: expensive to
 *     compute again, and attention keeps only its output and row statistics
 *     anyway), from the nearest kept results: layernorms, activations,
 *     dropout masks (drawn again from the same key), reshapes and transposes;
 *   - PT_RECOMPUTE_FULL: every such result of a layer of the model (the nodes
 *     whose names share their first numbered component: `gpt.block3`,
 *     `layer2`) from what the layer reads from outside it, its input, as
 *     one unit before the layer's backward pass: the whole forward pass once
 *     more, one layer's activations live at a time.
 * The recomputed nodes are copies (".re" names) placed in forward order right
 * before the first backward node that reads one of their results; the
 * backward readers take the copies.  Guarantees: the graph verifies and
 * computes the same bits (the same kernels on the same operands).  Returns the
 * number of nodes copied. */

static int gemm_like(ir_op op)
{
    return op == IR_OP_DENSE || op == IR_OP_MATMUL || op == IR_OP_CONV2D ||
           op == IR_OP_CONV2D_GRAD_INPUT || op == IR_OP_ATTENTION || op == IR_OP_EMBEDDING;
}

/* Length of name's first numbered component's prefix ("gpt.block3.x" -> 10),
 * 0 where none. */
static size_t layer_prefix(const char *name)
{
    for (const char *p = name; *p;) {
        const char *end = strchr(p, '.');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && p[n - 1] >= '0' && p[n - 1] <= '9')
            return (size_t)(p - name) + n;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

static int same_layer(const ir_node *a, const ir_node *b)
{
    size_t la = layer_prefix(a->out[0]->name), lb = layer_prefix(b->out[0]->name);
    return la && la == lb && strncmp(a->out[0]->name, b->out[0]->name, la) == 0;
}

typedef struct {
    ir_graph *g;
    int mode, nv, loss_at;
    int *pos;            /* value id -> defining node's index, -1: none */
    ir_value **copy;     /* value id -> its recomputed copy (this unit's) */
    ir_node **order;     /* forward nodes by index */
    char *want;          /* forward node index: copied in this unit */
} rc;

/* Whether forward result v is computed again (rather than kept) for a unit
 * that starts at node `unit` (full: its layer). */
static int recomputed(const rc *R, const ir_value *v, const ir_node *unit)
{
    if (v->kind != IR_VALUE_NODE || v->id >= R->nv || R->pos[v->id] < 0 ||
        R->pos[v->id] > R->loss_at)
        return 0;
    const ir_node *n = v->def;
    if (n->op == IR_OP_CONST || n->op == IR_OP_ARANGE || n->nin == 0)
        return 0;
    if (R->mode == PT_RECOMPUTE_SELECTIVE)
        return !gemm_like(n->op);
    return same_layer(n, unit);
}

/* Marks v's node and, recursively, the nodes it needs again. */
static void need(rc *R, const ir_value *v, const ir_node *unit)
{
    if (!recomputed(R, v, unit) || R->want[R->pos[v->id]])
        return;
    R->want[R->pos[v->id]] = 1;
    for (int i = 0; i < v->def->nin; i++)
        need(R, v->def->in[i], unit);
}

int pass_recompute(ir_graph *g, int mode, diag *d)
{
    (void)d;
    if (mode == PT_RECOMPUTE_NONE || !g->loss || g->loss->kind != IR_VALUE_NODE || !g->nupdates)
        return 0;
    rc R = {g, mode, g->nvalues, -1, NULL, NULL, NULL, NULL};
    R.pos = base_xcalloc((size_t)R.nv + 1, sizeof *R.pos);
    R.copy = base_xcalloc((size_t)R.nv + 1, sizeof *R.copy);
    R.order = base_xcalloc((size_t)g->nnodes + 1, sizeof *R.order);
    R.want = base_xcalloc((size_t)g->nnodes + 1, 1);
    for (int i = 0; i < R.nv; i++)
        R.pos[i] = -1;
    int idx = 0, nfwd;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nout; i++)
            R.pos[n->out[i]->id] = idx;
        if (n->out[0] == g->loss)
            R.loss_at = idx;
        R.order[idx++] = n;
    }
    nfwd = R.loss_at + 1;
    /* the units: each forward result the backward pass reads and that is
       recomputed, with its layer (full) or alone (selective), in the order of
       their first backward readers */
    int count = 0;
    char *done = base_xcalloc((size_t)R.nv + 1, 1);
    for (ir_node *b = nfwd > 0 ? R.order[R.loss_at]->next : NULL; b; b = b->next) {
        for (int i = 0; i < b->nin; i++) {
            const ir_value *v = b->in[i];
            if (v->id >= R.nv || done[v->id] || !recomputed(&R, v, v->def))
                continue;
            /* a unit: v, and (full) every result of its layer a backward
               node reads */
            const ir_node *unit = v->def;
            memset(R.want, 0, (size_t)nfwd);
            need(&R, v, unit);
            done[v->id] = 1;
            for (ir_node *m = b; m && R.mode == PT_RECOMPUTE_FULL; m = m->next)
                for (int k = 0; k < m->nin; k++) {
                    const ir_value *u = m->in[k];
                    if (u->id < R.nv && !done[u->id] && recomputed(&R, u, unit)) {
                        need(&R, u, unit);
                        done[u->id] = 1;
                    }
                }
            /* the copies, in forward order, before b */
            for (int j = 0; j < nfwd; j++) {
                if (!R.want[j])
                    continue;
                const ir_node *n = R.order[j];
                ir_value *in[64], *out[IR_MAX_RESULTS];
                for (int k = 0; k < n->nin; k++)
                    in[k] = n->in[k]->id < R.nv && R.copy[n->in[k]->id] &&
                                    R.want[R.pos[n->in[k]->id]]
                                ? R.copy[n->in[k]->id] : n->in[k];
                for (int k = 0; k < n->nout; k++) {
                    char name[512];
                    snprintf(name, sizeof name, "%s.re", n->out[k]->name);
                    out[k] = ir_value_new(g, name, n->loc);
                    out[k]->type = n->out[k]->type;
                }
                ir_node *c = ir_node_make(g, n->op, n->nin, in, n->nout, out, n->loc);
                ir_copy_attrs(g, c, n);
                c->device = n->device;
                ir_insert_before(g, b, c);
                for (int k = 0; k < n->nout; k++)
                    R.copy[n->out[k]->id] = out[k];
                count++;
            }
            /* the backward readers from b on take the copies */
            for (ir_node *m = b; m; m = m->next)
                for (int k = 0; k < m->nin; k++) {
                    const ir_value *u = m->in[k];
                    if (u->id < R.nv && R.pos[u->id] >= 0 && R.pos[u->id] <= R.loss_at &&
                        R.want[R.pos[u->id]] && R.copy[u->id])
                        m->in[k] = R.copy[u->id];
                }
        }
    }
    base_free(done);
    base_free(R.pos);
    base_free(R.copy);
    base_free(R.order);
    base_free(R.want);
    return count;
}
