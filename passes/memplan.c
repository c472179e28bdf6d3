/* Scheduling and static memory planning.
 *
 * Every node result lives in one arena, from the node that computes it to the
 * last node that reads it (to the end of the program for outputs, the loss and
 * the sources of updates).  Inputs, parameters, buffers and optimizer state
 * have their own region.
 *
 * schedule (a pass): reorders the node list, a topological order, greedily:
 *   of the nodes whose operands are ready, the one that frees the most bytes
 *   minus what it allocates, ties broken by the old order.  The new order is
 *   kept only if it lowers the peak of live bytes.  Guarantees: the graph
 *   verifies and computes the same values (the order of independent nodes
 *   changes no result).
 *
 * mp_plan_graph: offsets for every node result, 256-byte aligned, by the
 *   "greedy by size" rule (largest first, each at the lowest offset that no
 *   buffer live at the same time uses).  It reports the planned peak beside two
 *   references: the lower bound (the most bytes live at one time, which no plan
 *   can beat) and the total without reuse.
 *
 * mp_check: proves a plan: no two buffers live at the same time overlap, each
 *   fits the arena and is aligned, and each node result has one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* Bytes of v as the executor stores it (floats as float32), aligned. */
static int64_t value_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    int64_t es = t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
    int64_t b = ir_type_numel(&v->type) * es;
    return (b + MP_ALIGN - 1) / MP_ALIGN * MP_ALIGN;
}

/* first[id], last[id]: the node index defining v and the last index reading it
 * (nnodes for what must survive the program); -1 for values not in the arena. */
static void liveness(const ir_graph *g, int *first, int *last)
{
    for (int i = 0; i < g->nvalues; i++)
        first[i] = last[i] = -1;
    int idx = 0;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nin; i++)
            if (n->in[i]->kind == IR_VALUE_NODE)
                last[n->in[i]->id] = idx;
        for (int i = 0; i < n->nout; i++)
            first[n->out[i]->id] = last[n->out[i]->id] = idx;
        idx++;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value->kind == IR_VALUE_NODE)
            last[g->outputs[i].value->id] = idx;
    if (g->loss && g->loss->kind == IR_VALUE_NODE)
        last[g->loss->id] = idx;
    for (int i = 0; i < g->nupdates; i++)
        if (g->updates[i].source->kind == IR_VALUE_NODE)
            last[g->updates[i].source->id] = idx;
}

/* The most bytes live at one time under g's current order. */
static int64_t peak_live(const ir_graph *g)
{
    int nv = g->nvalues, nn = g->nnodes;
    int *first = malloc((size_t)(nv + 1) * sizeof *first), *last = malloc((size_t)(nv + 1) * sizeof *last);
    int64_t *delta = calloc((size_t)nn + 2, sizeof *delta);
    IR_ASSERT(first && last && delta);
    liveness(g, first, last);
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            delta[first[v->id]] += value_bytes(v);
            delta[last[v->id] + 1] -= value_bytes(v);
        }
    int64_t live = 0, peak = 0;
    for (int t = 0; t <= nn; t++) {
        live += delta[t];
        peak = live > peak ? live : peak;
    }
    free(first);
    free(last);
    free(delta);
    return peak;
}

int pass_schedule(ir_graph *g, diag *d)
{
    (void)d;
    int nn = g->nnodes, nv = g->nvalues;
    if (nn < 2)
        return 0;
    int64_t before = peak_live(g);
    ir_node **old = malloc((size_t)nn * sizeof *old), **order = malloc((size_t)nn * sizeof *order);
    int *pending = calloc((size_t)nn, sizeof *pending);   /* operands not yet computed */
    int *readers = calloc((size_t)nv + 1, sizeof *readers); /* unscheduled readers per value */
    int *pos = malloc((size_t)(nv + 1) * sizeof *pos);     /* value id -> defining node index */
    char *done = calloc((size_t)nn, 1);
    IR_ASSERT(old && order && pending && readers && pos && done);
    int k = 0;
    for (int i = 0; i < nv; i++)
        pos[i] = -1;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nout; i++)
            pos[n->out[i]->id] = k;
        old[k++] = n;
    }
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < old[i]->nin; j++) {
            const ir_value *v = old[i]->in[j];
            readers[v->id]++;
            pending[i] += v->kind == IR_VALUE_NODE;
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
        int best = -1;
        int64_t best_gain = 0;
        for (int i = 0; i < nn; i++) {
            if (done[i] || pending[i])
                continue;
            const ir_node *n = old[i];
            int64_t gain = 0;
            for (int j = 0; j < n->nout; j++)
                gain -= value_bytes(n->out[j]);
            for (int j = 0; j < n->nin; j++) {
                const ir_value *v = n->in[j];
                int last_reader = readers[v->id] == 1;
                for (int q = 0; q < j; q++) /* an operand read twice by n */
                    last_reader &= n->in[q] != v;
                if (v->kind == IR_VALUE_NODE && last_reader)
                    gain += value_bytes(v);
            }
            if (best < 0 || gain > best_gain) {
                best = i;
                best_gain = gain;
            }
        }
        IR_ASSERT(best >= 0);
        done[best] = 1;
        order[step] = old[best];
        const ir_node *n = old[best];
        for (int j = 0; j < n->nin; j++)
            readers[n->in[j]->id]--;
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
        if (use == old || peak_live(g) < before)
            break;
        use = old; /* no better: back to the old order */
        moved = 0;
    }
    free(old);
    free(order);
    free(pending);
    free(readers);
    free(pos);
    free(done);
    return moved;
}

static int by_size_desc(const void *a, const void *b)
{
    const mp_buffer *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b)
{
    const mp_buffer *const *x = a, *const *y = b;
    return ((*x)->offset > (*y)->offset) - ((*x)->offset < (*y)->offset);
}

mp_plan *mp_plan_graph(const ir_graph *g)
{
    mp_plan *p = calloc(1, sizeof *p);
    int nv = g->nvalues;
    int *first = malloc((size_t)(nv + 1) * sizeof *first), *last = malloc((size_t)(nv + 1) * sizeof *last);
    p->offset_by_id = malloc((size_t)(nv + 1) * sizeof *p->offset_by_id);
    p->bufs = malloc((size_t)(nv + 1) * sizeof *p->bufs);
    IR_ASSERT(p && first && last && p->offset_by_id && p->bufs);
    p->nvalues = nv;
    liveness(g, first, last);
    for (int i = 0; i < nv; i++)
        p->offset_by_id[i] = -1;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            p->bufs[p->nbufs++] = (mp_buffer){v, 0, value_bytes(v), first[v->id], last[v->id]};
            p->no_reuse_bytes += value_bytes(v);
        }
    for (int i = 0; i < g->ninputs; i++)
        p->input_bytes += value_bytes(g->inputs[i]);
    for (int i = 0; i < g->nparams; i++)
        p->param_bytes += value_bytes(g->params[i]);
    p->lower_bound = peak_live(g);

    /* greedy by size: largest first, each at the lowest free offset */
    qsort(p->bufs, (size_t)p->nbufs, sizeof *p->bufs, by_size_desc);
    mp_buffer **live = malloc((size_t)(p->nbufs + 1) * sizeof *live);
    IR_ASSERT(live);
    for (int i = 0; i < p->nbufs; i++) {
        mp_buffer *b = &p->bufs[i];
        int nlive = 0;
        for (int j = 0; j < i; j++)
            if (p->bufs[j].first <= b->last && b->first <= p->bufs[j].last)
                live[nlive++] = &p->bufs[j];
        qsort(live, (size_t)nlive, sizeof *live, by_offset);
        int64_t at = 0;
        for (int j = 0; j < nlive; j++) {
            if (live[j]->offset >= at + b->size)
                break; /* the gap before it fits */
            int64_t end = live[j]->offset + live[j]->size;
            at = end > at ? end : at;
        }
        b->offset = at;
        p->offset_by_id[b->value->id] = at;
        if (at + b->size > p->arena_bytes)
            p->arena_bytes = at + b->size;
    }
    free(live);
    free(first);
    free(last);
    return p;
}

int mp_check(const ir_graph *g, const mp_plan *p, char *err, size_t errlen)
{
    int nv = g->nvalues;
    int *first = malloc((size_t)(nv + 1) * sizeof *first), *last = malloc((size_t)(nv + 1) * sizeof *last);
    IR_ASSERT(first && last);
    liveness(g, first, last); /* derived again, not taken from the plan */
    int rc = 0;
    int count = 0;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            int64_t off = v->id < p->nvalues ? p->offset_by_id[v->id] : -1;
            count++;
            if (off < 0 || off % MP_ALIGN || off + value_bytes(v) > p->arena_bytes) {
                snprintf(err, errlen, "%%%s has no aligned place in the %lld-byte arena (offset %lld)",
                         v->name, (long long)p->arena_bytes, (long long)off);
                rc = -1;
                goto done;
            }
        }
    /* every pair live at one time: disjoint bytes (sorted by offset, each buffer
       is compared with those that start before it ends) */
    const ir_value **vals = malloc((size_t)(count + 1) * sizeof *vals);
    IR_ASSERT(vals);
    int k = 0;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++)
            vals[k++] = n->out[i];
    for (int i = 0; i < count && !rc; i++)
        for (int j = i + 1; j < count && !rc; j++) {
            const ir_value *a = vals[i], *b = vals[j];
            int64_t ao = p->offset_by_id[a->id], bo = p->offset_by_id[b->id];
            int time = first[a->id] <= last[b->id] && first[b->id] <= last[a->id];
            int space = ao < bo + value_bytes(b) && bo < ao + value_bytes(a);
            if (time && space) {
                snprintf(err, errlen, "%%%s [%lld, +%lld) and %%%s [%lld, +%lld) overlap while "
                         "both are live", a->name, (long long)ao, (long long)value_bytes(a),
                         b->name, (long long)bo, (long long)value_bytes(b));
                rc = -1;
            }
        }
    free(vals);
done:
    free(first);
    free(last);
    return rc;
}

void mp_print(const ir_graph *g, const mp_plan *p, FILE *f)
{
    (void)g;
    fprintf(f, "# memory plan: arena %lld bytes (lower bound %lld, %.3fx; without reuse %lld)\n",
            (long long)p->arena_bytes, (long long)p->lower_bound,
            p->lower_bound ? (double)p->arena_bytes / (double)p->lower_bound : 1.0,
            (long long)p->no_reuse_bytes);
    fprintf(f, "# parameters, buffers and state: %lld bytes; inputs: %lld bytes\n",
            (long long)p->param_bytes, (long long)p->input_bytes);
    fprintf(f, "%-14s %-12s %-9s %s\n", "offset", "bytes", "live", "value");
    mp_buffer *sorted = malloc((size_t)(p->nbufs + 1) * sizeof *sorted);
    IR_ASSERT(sorted);
    memcpy(sorted, p->bufs, (size_t)p->nbufs * sizeof *sorted);
    for (int i = 1; i < p->nbufs; i++) /* by offset, then by first use */
        for (int j = i; j > 0 && (sorted[j - 1].offset > sorted[j].offset ||
                                  (sorted[j - 1].offset == sorted[j].offset &&
                                   sorted[j - 1].first > sorted[j].first)); j--) {
            mp_buffer t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (int i = 0; i < p->nbufs; i++) {
        char live[32];
        snprintf(live, sizeof live, "%d-%d", sorted[i].first, sorted[i].last);
        fprintf(f, "%-14lld %-12lld %-9s %%%s\n", (long long)sorted[i].offset,
                (long long)sorted[i].size, live, sorted[i].value->name);
    }
    free(sorted);
}

void mp_plan_free(mp_plan *p)
{
    if (!p)
        return;
    free(p->bufs);
    free(p->offset_by_id);
    free(p);
}
