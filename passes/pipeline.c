/* Pipelines: each node's stage, and each stage's schedule (see partition.c).
 *
 * Stages: the forward nodes, in the source's order, are cut into pp runs of
 * consecutive nodes that minimize the slowest stage (an exact dynamic program
 * over the cut points).  A stage's time is its forward nodes' and the backward
 * and optimizer nodes' that go with them, each costed by the cost model on
 * o->cost as it will run: an elementwise epilogue, which fusion will put in its
 * producer's kernel, by its arithmetic alone.  A backward node goes with a forward node, its anchor:
 *   - one that computes a parameter's gradient, or an optimizer node: the
 *     first forward node reading the parameter, directly or through nodes of no
 *     batch (where the parameter lives);
 *   - otherwise the latest forward node whose result it reads, or that reads a
 *     parameter it reads (conv2d_grad_input reads the weight: the convolution),
 *     directly or through nodes of no batch (conv1d's weight is a reshape of its
 *     parameter);
 *   - a node reading only gradients: the earliest anchor of their nodes, since
 *     gradients flow towards the first stage: a residual stream's gradient,
 *     summed block by block (x + f(x)'s gradient: the stream's from above
 *     plus f's), is summed in each block's stage, not carried up to the stage
 *     where the chain of sums began and back (2026-12-03: gpt_tiny's last
 *     stage summed every block's and sent each back, a round trip per block).
 * Nodes that no gradient reaches but that the backward pass alone reads
 * (autodiff's transposes of saved activations) count as backward nodes
 * (partition.c), so they too run where their operands are.
 * So a layer's backward runs where its forward ran, and activations cross a
 * cut forward and their gradients backward (partition.c adds the send/recv).
 *
 * With memory caps, a stage must also fit its device (the smallest cap of the
 * devices it runs on), by an estimate: the parameters it holds with their
 * gradients and optimizer state, plus the activations its backward pass keeps,
 * times the microbatches it holds at once (1F1B: pp - s, GPipe: m).  The
 * memory planner's exact peak is checked afterwards (plan.c).
 *
 * Schedules, per stage s of pp, with m microbatches: GPipe runs every
 * microbatch's forward, then every backward; 1F1B (PipeDream-flush) runs
 * pp - 1 - s forwards to fill the pipeline, then one forward and one backward
 * in turn, then the remaining backwards, so a stage holds at most pp - s
 * microbatches' activations instead of m.  Backward passes run in microbatch
 * order in both, so the last microbatch's is the last (gradients are complete
 * then). */
#include <stdio.h>
#include <stdlib.h>

#include "partition.h"

static int is_optimizer(ir_op op) { return op == IR_OP_SGD || op == IR_OP_ADAM; }

/* Microbatches whose activations stage s holds at once. */
static int inflight(const pt *P, int s)
{
    if (P->o->schedule == PT_GPIPE || !P->g->nupdates)
        return P->o->schedule == PT_GPIPE && P->g->nupdates ? P->m : 1;
    return P->pp - s < P->m ? P->pp - s : P->m;
}

/* A node's time as it will run: fusion (after partitioning) makes an
 * elementwise epilogue part of its producer's kernel, costing only its
 * arithmetic. */
static double node_seconds(const cost_device *dev, const ir_node *n)
{
    if (ir_op_is(n->op, IR_EPILOGUE))
        return cost_node_flops(n) / dev->flops_other;
    return cost_node_seconds(dev, n);
}

/* Whether v is a parameter (buffer, state) or computed from some by forward nodes
 * of no batch (a weight reshaped, as conv1d's): those are claimed for forward
 * node at (index + 1) where not claimed yet, so that a parameter lives, and is
 * updated, on the stage of the first layer that reads it, however it reads it. */
static int claim_params(const pt *P, const ir_value *v, int at, int *param_at)
{
    if (v->kind == IR_VALUE_INPUT)
        return 0;
    if (v->kind != IR_VALUE_NODE) {
        if (!param_at[v->id])
            param_at[v->id] = at;
        return v->kind == IR_VALUE_PARAM;
    }
    int p = P->pos[v->id], found = 0;
    if (p < 0 || P->backward[p] || P->batched[v->id])
        return 0;
    for (int k = 0; k < v->def->nin; k++)
        found |= claim_params(P, v->def->in[k], at, param_at);
    return found;
}

/* Counts the forward nodes that read each parameter (readers), directly or
 * through forward nodes of no batch: reader is the node's source index, last
 * the reader counted last for each value. */
static void count_readers(const pt *P, const ir_value *v, int reader, int *last, int *readers)
{
    if (v->kind == IR_VALUE_PARAM) {
        if (last[v->id] != reader + 1)
            last[v->id] = reader + 1, readers[v->id]++;
        return;
    }
    int p = v->kind == IR_VALUE_NODE ? P->pos[v->id] : -1;
    if (p < 0 || P->backward[p] || P->batched[v->id])
        return;
    for (int k = 0; k < v->def->nin; k++)
        count_readers(P, v->def->in[k], reader, last, readers);
}

/* Whether v is, or is computed by forward nodes of no batch from, a parameter
 * that several forward nodes read (a tied weight: gpt_tiny's token embedding,
 * which its output layer reads too). */
static int shared_param(const pt *P, const ir_value *v, const int *readers)
{
    if (v->kind == IR_VALUE_PARAM)
        return readers[v->id] > 1;
    int p = v->kind == IR_VALUE_NODE ? P->pos[v->id] : -1;
    if (p < 0 || P->backward[p] || P->batched[v->id])
        return 0;
    for (int k = 0; k < v->def->nin; k++)
        if (shared_param(P, v->def->in[k], readers))
            return 1;
    return 0;
}

/* Where the parameters that v is computed from live (the latest forward node
 * they are claimed for), when v is one or is computed from them by forward
 * nodes of no batch; -1 otherwise. */
static int params_home(const pt *P, const ir_value *v, const int *param_at)
{
    if (v->kind == IR_VALUE_PARAM)
        return param_at[v->id] - 1;
    int p = v->kind == IR_VALUE_NODE ? P->pos[v->id] : -1, home = -1;
    if (p < 0 || P->backward[p] || P->batched[v->id])
        return -1;
    for (int k = 0; k < v->def->nin; k++) {
        int h = params_home(P, v->def->in[k], param_at);
        home = h > home ? h : home;
    }
    return home;
}

int pt_pipeline_stages(pt *P)
{
    const cost_device *dev = P->o->cost ? P->o->cost : cost_device_lookup(COST_DEFAULT_PARTITION_GPU);
    int nsrc = P->nsrc, pp = P->pp;
    int *anchor = base_xcalloc((size_t)nsrc, sizeof *anchor);   /* source index, or -1 */
    int *param_at = base_xcalloc((size_t)P->nval, sizeof *param_at); /* first forward reader + 1 */
    char *grad_of = base_xcalloc((size_t)P->nval, 1);  /* a value an optimizer reads as gradient */
    int *param_of_grad = base_xcalloc((size_t)P->nval, sizeof *param_of_grad);
    int *readers = base_xcalloc((size_t)P->nval, sizeof *readers); /* forward readers of a param */
    int *last_reader = base_xcalloc((size_t)P->nval, sizeof *last_reader);
    for (int i = 0; i < nsrc; i++) {
        const ir_node *n = P->src[i];
        if (is_optimizer(n->op)) {
            grad_of[n->in[1]->id] = 1;
            param_of_grad[n->in[1]->id] = n->in[0]->id;
        } else if (!P->backward[i] && P->batched[n->out[0]->id]) {
            for (int k = 0; k < n->nin; k++) {
                claim_params(P, n->in[k], i + 1, param_at);
                count_readers(P, n->in[k], i, last_reader, readers);
            }
        }
    }
    base_free(last_reader);
    /* the forward nodes that stages cut, and each node's anchor among them */
    int *fwd = base_xcalloc((size_t)nsrc, sizeof *fwd), nf = 0, layers = 0;
    for (int i = 0; i < nsrc; i++) {
        const ir_node *n = P->src[i];
        anchor[i] = -1;
        if (!P->batched[n->out[0]->id])
            continue; /* computed once per device where it is needed */
        if (is_optimizer(n->op)) {
            anchor[i] = param_at[n->in[0]->id] - 1;
            continue;
        }
        if (!P->backward[i]) {
            anchor[i] = i;
            fwd[nf++] = i;
            int reads_param = 0;
            for (int k = 0; k < n->nin; k++)
                reads_param |= claim_params(P, n->in[k], i + 1, param_at);
            layers += reads_param;
            continue;
        }
        int a = -1, from_grads = -1;
        for (int k = 0; k < n->nout; k++)
            if (grad_of[n->out[k]->id])
                a = param_at[param_of_grad[n->out[k]->id]] - 1;
        int c = -1, reads_grad = 0;
        for (int k = 0; k < n->nin; k++) {
            const ir_value *v = n->in[k];
            int p = v->kind == IR_VALUE_NODE ? P->pos[v->id] : -1;
            reads_grad |= p >= 0 && P->backward[p];
        }
        for (int k = 0; k < n->nin; k++) {
            const ir_value *v = n->in[k];
            int p = v->kind == IR_VALUE_NODE ? P->pos[v->id] : -1;
            /* a tied weight's home is its first reader's: the gradient says
               which of its readers this node differentiates */
            int here = p >= 0 && !P->backward[p] && P->batched[v->id] ? p
                     : reads_grad && shared_param(P, v, readers) ? -1
                     : params_home(P, v, param_at);
            c = here > c ? here : c;
            if (p >= 0 && P->backward[p] && anchor[p] >= 0 &&
                (from_grads < 0 || anchor[p] < from_grads))
                from_grads = anchor[p];
        }
        anchor[i] = a >= 0 ? a : c >= 0 ? c : from_grads;
    }
    /* memory estimates per forward node: what its stage holds for it */
    double *keep = base_xcalloc((size_t)nsrc, sizeof *keep); /* saved activations, per microbatch */
    double *held = base_xcalloc((size_t)nsrc, sizeof *held);  /* parameters, gradients, state */
    char *read_back = base_xcalloc((size_t)P->nval, 1);
    for (int i = 0; i < nsrc; i++)
        for (int k = 0; P->backward[i] && k < P->src[i]->nin; k++)
            read_back[P->src[i]->in[k]->id] = 1;
    for (int i = 0; i < nsrc; i++) {
        const ir_node *n = P->src[i];
        if (anchor[i] == i)
            for (int k = 0; k < n->nout; k++)
                if (read_back[n->out[k]->id])
                    keep[i] += (double)ir_type_bytes(&P->type[n->out[k]->id]) / P->m;
        if (is_optimizer(n->op) && anchor[i] >= 0) /* the parameter, its gradient, its state */
            held[anchor[i]] += (double)ir_type_bytes(&n->in[0]->type) * (n->nin - 1);
    }
    for (int i = 0; i < nsrc; i++) /* parameters without an optimizer (inference) */
        for (int k = 0; anchor[i] == i && k < P->src[i]->nin; k++) {
            const ir_value *v = P->src[i]->in[k];
            if ((v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER) &&
                param_at[v->id] - 1 == i && !P->g->nupdates)
                held[i] += (double)ir_type_bytes(&v->type);
        }
    base_free(read_back);
    if (pp > layers) {
        diag_error(P->d, (ir_loc){0}, "a pipeline of %d stages needs at least %d layers, and "
                   "'%s' has %d (nodes that read parameters)", pp, pp, P->g->name, layers);
        base_free(anchor), base_free(param_at), base_free(grad_of), base_free(param_of_grad),
        base_free(fwd), base_free(readers);
        base_free(keep), base_free(held);
        return -1;
    }
    /* each forward node's weight: its own time and its backward nodes' */
    int *rank = base_xcalloc((size_t)nsrc, sizeof *rank); /* source index -> forward order */
    for (int j = 0; j < nf; j++)
        rank[fwd[j]] = j;
    double *w = base_xcalloc((size_t)nf + 1, sizeof *w);
    double *pre = base_xcalloc((size_t)nf + 1, sizeof *pre);
    double *kpre = base_xcalloc((size_t)nf + 1, sizeof *kpre);
    double *hpre = base_xcalloc((size_t)nf + 1, sizeof *hpre);
    for (int i = 0; i < nsrc; i++)
        if (anchor[i] >= 0 && rank[anchor[i]] < nf && fwd[rank[anchor[i]]] == anchor[i])
            w[rank[anchor[i]]] += node_seconds(dev, P->src[i]);
    for (int j = 0; j < nf; j++) {
        pre[j + 1] = pre[j] + w[j];
        kpre[j + 1] = kpre[j] + keep[fwd[j]];
        hpre[j + 1] = hpre[j] + held[fwd[j]];
    }
    /* the cap of stage s: the smallest of its devices' */
    double *cap = base_xcalloc((size_t)pp, sizeof *cap);
    for (int s = 0; s < pp; s++)
        for (int q = 0; q < P->dp && P->o->mem_caps; q++) {
            double c = (double)P->o->mem_caps[q * pp + s];
            if (c > 0 && (cap[s] == 0 || c < cap[s]))
                cap[s] = c;
        }
    /* best[k][j]: the slowest of k stages over the first j forward nodes */
    double *best = base_xcalloc((size_t)(pp + 1) * (nf + 1), sizeof *best);
    int *cut = base_xcalloc((size_t)(pp + 1) * (nf + 1), sizeof *cut);
#define BEST(k, j) best[(size_t)(k) * (nf + 1) + (j)]
#define CUT(k, j) cut[(size_t)(k) * (nf + 1) + (j)]
    /* whether forward nodes [c, j) fit stage s's cap */
#define FITS(s, c, j) (!cap[s] || hpre[j] - hpre[c] + (kpre[j] - kpre[c]) * inflight(P, s) <= cap[s])
    for (int j = 0; j <= nf; j++)
        BEST(1, j) = FITS(0, 0, j) ? pre[j] : -1;
    for (int k = 2; k <= pp; k++)
        for (int j = k; j <= nf; j++) {
            BEST(k, j) = -1;
            for (int c = k - 1; c < j; c++) {
                if (BEST(k - 1, c) < 0 || !FITS(k - 1, c, j))
                    continue;
                double t = BEST(k - 1, c) > pre[j] - pre[c] ? BEST(k - 1, c) : pre[j] - pre[c];
                if (BEST(k, j) < 0 || t < BEST(k, j))
                    BEST(k, j) = t, CUT(k, j) = c;
            }
        }
#undef FITS
    if (BEST(pp, nf) < 0) {
        diag_error(P->d, (ir_loc){0}, "no cut of '%s' into %d pipeline stages fits the memory "
                   "caps (by the estimate of pipeline.c: %.1f MiB of parameters and state, "
                   "%.1f MiB of activations per microbatch in all)", P->g->name, pp,
                   hpre[nf] / 1048576.0, kpre[nf] / 1048576.0);
        base_free(best), base_free(cut), base_free(w), base_free(pre), base_free(kpre),
        base_free(hpre), base_free(cap), base_free(rank);
        base_free(anchor), base_free(param_at), base_free(grad_of), base_free(param_of_grad),
        base_free(fwd), base_free(readers);
        base_free(keep), base_free(held);
        return -1;
    }
    int *stage_of_fwd = base_xcalloc((size_t)nf + 1, sizeof *stage_of_fwd);
    for (int k = pp, j = nf; k >= 1; k--) {
        int c = k > 1 ? CUT(k, j) : 0;
        for (int x = c; x < j; x++)
            stage_of_fwd[x] = k - 1;
        j = c;
    }
#undef BEST
#undef CUT
    for (int i = 0; i < nsrc; i++)
        P->stage[i] = anchor[i] >= 0 ? stage_of_fwd[rank[anchor[i]]] : 0;
    base_free(best), base_free(cut), base_free(stage_of_fwd), base_free(w), base_free(pre),
    base_free(kpre), base_free(hpre);
    base_free(cap), base_free(rank), base_free(anchor), base_free(param_at), base_free(grad_of),
    base_free(param_of_grad), base_free(readers);
    base_free(fwd), base_free(keep), base_free(held);
    return 0;
}

/* The tasks of stage s: microbatch k's forward or backward nodes of s. */
static void phase(pt *P, int s, int k, int backward)
{
    for (int i = 0; i < P->nsrc; i++)
        if (P->stage[i] == s && P->batched[P->src[i]->out[0]->id] &&
            !is_optimizer(P->src[i]->op) && P->backward[i] == backward)
            P->sched[s][P->nsched[s]++] = (pt_task){i, k};
}

void pt_pipeline_schedule(pt *P)
{
    int m = P->m, pp = P->pp;
    for (int s = 0; s < pp; s++) {
        P->sched[s] = base_xcalloc((size_t)P->nsrc * m + 1, sizeof **P->sched);
        if (P->o->schedule == PT_GPIPE) {
            for (int k = 0; k < m; k++)
                phase(P, s, k, 0);
            for (int k = 0; k < m; k++)
                phase(P, s, k, 1);
            continue;
        }
        int warm = pp - 1 - s < m ? pp - 1 - s : m;
        for (int k = 0; k < warm; k++)
            phase(P, s, k, 0);
        for (int k = 0; k + warm < m; k++) {
            phase(P, s, k + warm, 0);
            phase(P, s, k, 1);
        }
        for (int k = m - warm; k < m; k++)
            phase(P, s, k, 1);
    }
}
