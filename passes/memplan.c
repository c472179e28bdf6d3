/* Static memory planning.
 *
 * Every node result lives in one arena, from the node that computes it to the
 * last node that reads it (to the end of the program for outputs, the loss and
 * the sources of updates).  Inputs, parameters, buffers and optimizer state
 * have their own region.
 *
 * mp_plan_graph: offsets for every node result, 256-byte aligned, by the
 *   "greedy by size" rule (largest first, each at the lowest offset that no
 *   buffer live at the same time uses).  It reports the planned peak beside two
 *   references: the lower bound (the most bytes live at one time, which no plan
 *   can beat) and the total without reuse.
 *
 *   A result computed by an elementwise kernel takes its operand's buffer in
 *   place when that operand is read last there (mp_inplace_operand); so does
 *   a reshape's, which is then a view of it.
 *
 * A partitioned program has one arena per device, planned the same way from
 * the nodes of that device (positions stay those of the whole list).  What a
 * send reads lives until the end of the run of sends and receives it starts
 * (one NCCL group on a GPU).
 *
 * mp_check: proves a plan: no two buffers of a device live at the same time
 *   overlap (but for a result and the operand it replaces in place), each fits
 *   its arena and is aligned, and each node result has one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "passes.h"

/* Bytes of v as the executor stores it (floats as float32), aligned. */
int64_t mp_value_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    int64_t es = t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
    int64_t b = ir_type_numel(&v->type) * es;
    return (b + MP_ALIGN - 1) / MP_ALIGN * MP_ALIGN;
}

/* The operand whose buffer n's result may take over (its last reader being n),
 * or -1: elementwise kernels that read element i of it before they write
 * element i of the result (runtime/cpu/exec.c, grad.c), and a reshape, whose
 * result is its operand's bytes (then no copy at all: a view). */
int mp_inplace_operand(const ir_node *n)
{
    const ir_type *t = &n->out[0]->type;
    switch (n->op) {
    case IR_OP_RESHAPE:
        return n->in[0]->type.dtype == t->dtype ? 0 : -1;
    default:
        if (!ir_op_is(n->op, IR_INPLACE))
            return -1;
        if (ir_type_eq(&n->in[0]->type, t))
            return 0;
        return ir_op_is(n->op, IR_BINARY) && ir_type_eq(&n->in[1]->type, t) ? 1 : -1;
    }
}

/* first[id], last[id]: the node index defining v and the last index reading it
 * (nnodes for what must survive the program); -1 for values not in the arena. */
/* Whether v lives in the arena: node results but the weights an inference
 * program computes once (ir_weight_only), which keep their own buffers. */
static int in_arena(const ir_value *v, const unsigned char *weight)
{
    return v->kind == IR_VALUE_NODE && !weight[v->id];
}

static int is_collective(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST;
}

/* A collective's nodes, by (op, id): end, the list index of its last node. */
typedef struct {
    int op;
    int64_t id;
    int idx, end;
} coll_node;

static int by_coll(const void *pa, const void *pb)
{
    const coll_node *a = pa, *b = pb;
    if (a->op != b->op)
        return a->op - b->op;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Every collective of g, sorted by (op, id), each with the index of its last
 * node: one sort, where a scan from each node to the end of the list made
 * planning a 6.7B model's 1000 collectives take seconds. */
static coll_node *collectives(const ir_graph *g, int *count)
{
    int n = 0, idx = 0;
    ir_for_each_node(g, m)
        n += is_collective(m->op);
    coll_node *c = base_xcalloc((size_t)n + 1, sizeof *c);
    n = 0;
    ir_for_each_node(g, m) {
        if (is_collective(m->op))
            c[n++] = (coll_node){m->op, ir_attr_int(m, "id"), idx, idx};
        idx++;
    }
    qsort(c, (size_t)n, sizeof *c, by_coll);
    for (int i = n - 2; i >= 0; i--) /* the group's largest index, to its first */
        if (!by_coll(&c[i], &c[i + 1]) && c[i + 1].end > c[i].end)
            c[i].end = c[i + 1].end;
    for (int i = 1; i < n; i++) /* and from there to the rest */
        if (!by_coll(&c[i], &c[i - 1]))
            c[i].end = c[i - 1].end;
    *count = n;
    return c;
}

static void liveness(const ir_graph *g, int *first, int *last)
{
    unsigned char *weight = base_xmalloc((size_t)g->nvalues + 1);
    ir_weight_only(g, weight);
    for (int i = 0; i < g->nvalues; i++)
        first[i] = last[i] = -1;
    int idx = 0;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nin; i++)
            if (in_arena(n->in[i], weight))
                last[n->in[i]->id] = idx;
        for (int i = 0; i < n->nout; i++)
            if (in_arena(n->out[i], weight))
                first[n->out[i]->id] = last[n->out[i]->id] = idx;
        /* a batchnorm gradient's dx summed per channel right after it (a
           bias gradient): the GPU kernel of the batchnorm_grad writes the sum
           too (codegen/kernels.c bias_grad_of), so it lives from there */
        if (n->op == IR_OP_SUM_TO && n->prev && n->prev->op == IR_OP_BATCHNORM_GRAD &&
            n->in[0] == n->prev->out[0] && in_arena(n->out[0], weight))
            first[n->out[0]->id] = idx - 1;
        /* a convolution's bias added by the batchnorm_train after it: the GPU
           adds it there (codegen/library.c bias_folds), so a bias computed
           in the program (ZeRO-3's gathered one) lives until then */
        if (n->op == IR_OP_BATCHNORM_TRAIN) {
            const ir_node *p = n->prev;
            while (p && p->device != n->device)
                p = p->prev;
            if (p && pass_goes_with(p, n) && in_arena(p->in[2], weight))
                last[p->in[2]->id] = idx;
        }
        idx++;
    }
    /* a collective runs at the last of its nodes (runtime/cpu/comm.c): its operands
       live until then, and its results from their nodes on (the run writes
       them all) */
    int ncoll = 0;
    coll_node *coll = collectives(g, &ncoll);
    idx = 0;
    ir_for_each_node(g, n) {
        if (is_collective(n->op)) {
            coll_node key = {n->op, ir_attr_int(n, "id"), 0, 0};
            const coll_node *c = bsearch(&key, coll, (size_t)ncoll, sizeof *coll, by_coll);
            int end = c->end;
            for (int i = 0; i < n->nin; i++)
                if (in_arena(n->in[i], weight) && last[n->in[i]->id] < end)
                    last[n->in[i]->id] = end;
            for (int i = 0; i < n->nout; i++)
                if (in_arena(n->out[i], weight) && last[n->out[i]->id] < end)
                    last[n->out[i]->id] = end;
        }
        /* what a send reads, until the last of the sends and receives right
           after it on its device: on a GPU they are one NCCL group, whose
           calls run in no order (codegen/p2p.c), so a receive there must not
           take its bytes; a group broken there lets crossing sends (1F1B's)
           wait for each other for ever */
        if (n->op == IR_OP_SEND && in_arena(n->in[0], weight)) {
            int end = idx, k = idx;
            for (const ir_node *m = n->next; m; m = m->next) {
                k++;
                if (m->device != n->device)
                    continue;
                if (m->op != IR_OP_SEND && m->op != IR_OP_RECV)
                    break;
                end = k;
            }
            if (last[n->in[0]->id] < end)
                last[n->in[0]->id] = end;
        }
        idx++;
    }
    base_free(coll);
    base_free(weight);
    for (int i = 0; i < g->noutputs; i++)
        if (first[g->outputs[i].value->id] >= 0)
            last[g->outputs[i].value->id] = idx;
    if (g->loss && first[g->loss->id] >= 0)
        last[g->loss->id] = idx;
    for (int i = 0; i < g->nupdates; i++)
        if (first[g->updates[i].source->id] >= 0)
            last[g->updates[i].source->id] = idx;
}

/* In-place reuse: root[id] is the value whose buffer v takes (itself when none).
 * A result takes its in-place operand's buffer when that operand is a node
 * result read last by this node and by no later output, loss or update. */
static void aliases(const ir_graph *g, const int *last, int *root)
{
    for (int i = 0; i < g->nvalues; i++)
        root[i] = i;
    int idx = 0;
    ir_for_each_node(g, n) {
        int k = n->nout == 1 ? mp_inplace_operand(n) : -1;
        if (k >= 0) {
            const ir_value *u = n->in[k];
            if (u->kind == IR_VALUE_NODE && last[u->id] == idx)
                root[n->out[0]->id] = root[u->id];
        }
        idx++;
    }
}

/* The most bytes live at one time under g's current order, per device. */
static void peak_live(const ir_graph *g, int ndev, int64_t *peak)
{
    int nv = g->nvalues, nn = g->nnodes;
    int *first = base_xmalloc((size_t)(nv + 1) * sizeof *first);
    int *last = base_xmalloc((size_t)(nv + 1) * sizeof *last);
    int *root = base_xmalloc((size_t)(nv + 1) * sizeof *root);
    int64_t *delta = base_xcalloc((size_t)ndev * (nn + 2), sizeof *delta);
    liveness(g, first, last);
    aliases(g, last, root);
    /* a buffer taken over in place counts from its first value to its last */
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            if (root[v->id] != v->id || first[v->id] < 0)
                continue;
            delta[(size_t)n->device * (nn + 2) + first[v->id]] += mp_value_bytes(v);
        }
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            int r = root[v->id];
            if (first[v->id] < 0)
                continue;
            /* the set ends where its last member ends: members end in order */
            if (last[v->id] >= last[r])
                last[r] = last[v->id];
        }
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            if (root[v->id] == v->id && first[v->id] >= 0)
                delta[(size_t)n->device * (nn + 2) + last[v->id] + 1] -= mp_value_bytes(v);
        }
    base_free(root);
    for (int d = 0; d < ndev; d++) {
        int64_t live = 0;
        peak[d] = 0;
        for (int t = 0; t <= nn; t++) {
            live += delta[(size_t)d * (nn + 2) + t];
            peak[d] = live > peak[d] ? live : peak[d];
        }
    }
    base_free(first);
    base_free(last);
    base_free(delta);
}

int64_t mp_peak_live(const ir_graph *g)
{
    int ndev = ir_graph_devices(g);
    int64_t *peak = base_xmalloc((size_t)ndev * sizeof *peak), most = 0;
    peak_live(g, ndev, peak);
    for (int d = 0; d < ndev; d++)
        most = peak[d] > most ? peak[d] : most;
    base_free(peak);
    return most;
}

/* by device, then largest first, then by first use */
static int by_size_desc(const void *a, const void *b)
{
    const mp_buffer *x = a, *y = b;
    if (x->device != y->device)
        return x->device - y->device;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

/* Bytes of parameters, buffers, state and inputs each device reads (or updates). */
static void holdings(const ir_graph *g, mp_plan *p)
{
    int nv = g->nvalues;
    /* 1 + the last device that counted it */
    int *seen = base_xmalloc((size_t)(nv + 1) * sizeof *seen);
    for (int d = 0; d < p->ndevices; d++) {
        for (int i = 0; i < nv; i++)
            seen[i] = 0;
        ir_for_each_node(g, n) {
            if (n->device != d)
                continue;
            for (int i = 0; i < n->nin; i++) {
                const ir_value *v = n->in[i];
                if (v->kind == IR_VALUE_NODE || seen[v->id])
                    continue;
                seen[v->id] = 1;
                if (v->kind == IR_VALUE_INPUT)
                    p->dev[d].input_bytes += mp_value_bytes(v);
                else
                    p->dev[d].param_bytes += mp_value_bytes(v);
            }
        }
        for (int i = 0; i < g->nupdates; i++) {
            const ir_value *t = g->updates[i].target;
            if (g->updates[i].device == d && !seen[t->id]) {
                seen[t->id] = 1;
                p->dev[d].param_bytes += mp_value_bytes(t);
            }
        }
    }
    base_free(seen);
}

mp_plan *mp_plan_graph(const ir_graph *g)
{
    mp_plan *p = base_xcalloc(1, sizeof *p);
    int nv = g->nvalues;
    int *first = base_xmalloc((size_t)(nv + 1) * sizeof *first);
    int *last = base_xmalloc((size_t)(nv + 1) * sizeof *last);
    int *root = base_xmalloc((size_t)(nv + 1) * sizeof *root);
    p->ndevices = ir_graph_devices(g);
    p->dev = base_xcalloc((size_t)p->ndevices, sizeof *p->dev);
    p->device_bytes = base_xcalloc((size_t)p->ndevices, sizeof *p->device_bytes);
    p->offset_by_id = base_xmalloc((size_t)(nv + 1) * sizeof *p->offset_by_id);
    p->bufs = base_xmalloc((size_t)(nv + 1) * sizeof *p->bufs);
    p->nvalues = nv;
    liveness(g, first, last);
    aliases(g, last, root);
    for (int i = 0; i < nv; i++)
        p->offset_by_id[i] = -1;
    /* one buffer per set of values sharing it in place, live from its first
       value to its last (members follow each other in the node order) */
    int *set = base_xmalloc((size_t)(nv + 1) * sizeof *set); /* root id -> buffer index */
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            mp_device *dev = &p->dev[n->device];
            if (first[v->id] < 0) { /* weights computed once: with the parameters */
                dev->param_bytes += mp_value_bytes(v);
                continue;
            }
            dev->no_reuse_bytes += mp_value_bytes(v);
            if (root[v->id] == v->id) {
                set[v->id] = p->nbufs;
                p->bufs[p->nbufs++] = (mp_buffer){v, 0, mp_value_bytes(v), first[v->id],
                                                  last[v->id], 1, n->device};
            } else {
                mp_buffer *b = &p->bufs[set[root[v->id]]];
                b->last = last[v->id] > b->last ? last[v->id] : b->last;
                b->members++;
            }
        }
    holdings(g, p);
    if (p->ndevices == 1) { /* everything the program has, used or not */
        p->dev[0].input_bytes = 0;
        for (int i = 0; i < g->ninputs; i++)
            p->dev[0].input_bytes += mp_value_bytes(g->inputs[i]);
        int64_t weights = 0;
        ir_for_each_node(g, n)
            for (int i = 0; i < n->nout; i++)
                weights += first[n->out[i]->id] < 0 ? mp_value_bytes(n->out[i]) : 0;
        p->dev[0].param_bytes = weights;
        for (int i = 0; i < g->nparams; i++)
            p->dev[0].param_bytes += mp_value_bytes(g->params[i]);
    }
    int64_t *peak = base_xmalloc((size_t)p->ndevices * sizeof *peak);
    peak_live(g, p->ndevices, peak);
    for (int d = 0; d < p->ndevices; d++)
        p->dev[d].lower_bound = peak[d];
    base_free(peak);

    /* greedy by size: largest first, each at the lowest free offset among
       the buffers placed before it that are live with it, which `placed`
       keeps in the order of their offsets (one insertion per buffer, not a
       sort per buffer) */
    qsort(p->bufs, (size_t)p->nbufs, sizeof *p->bufs, by_size_desc);
    mp_buffer **placed = base_xmalloc((size_t)(p->nbufs + 1) * sizeof *placed);
    for (int i = 0, nplaced = 0; i < p->nbufs; i++) {
        mp_buffer *b = &p->bufs[i];
        if (i && b->device != p->bufs[i - 1].device)
            nplaced = 0; /* the first buffer of this device */
        int64_t at = 0;
        for (int j = 0; j < nplaced; j++) {
            const mp_buffer *l = placed[j];
            if (l->first > b->last || b->first > l->last)
                continue; /* not live with b */
            if (l->offset >= at + b->size)
                break; /* the gap before it fits */
            int64_t end = l->offset + l->size;
            at = end > at ? end : at;
        }
        b->offset = at;
        int k = nplaced++;
        while (k > 0 && placed[k - 1]->offset > at)
            k--;
        memmove(placed + k + 1, placed + k, (size_t)(nplaced - 1 - k) * sizeof *placed);
        placed[k] = b;
        p->offset_by_id[b->value->id] = at;
        if (at + b->size > p->dev[b->device].arena_bytes)
            p->dev[b->device].arena_bytes = at + b->size;
    }
    for (int d = 0; d < p->ndevices; d++) {
        const mp_device *x = &p->dev[d];
        p->device_bytes[d] = x->arena_bytes;
        if (d == 0 || x->arena_bytes > p->arena_bytes) {
            p->arena_bytes = x->arena_bytes, p->lower_bound = x->lower_bound;
            p->no_reuse_bytes = x->no_reuse_bytes;
        }
        p->param_bytes = x->param_bytes > p->param_bytes ? x->param_bytes : p->param_bytes;
        p->input_bytes = x->input_bytes > p->input_bytes ? x->input_bytes : p->input_bytes;
    }
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++)
            if (first[n->out[i]->id] >= 0)
                p->offset_by_id[n->out[i]->id] = p->offset_by_id[root[n->out[i]->id]];
    base_free(placed);
    base_free(set);
    base_free(root);
    base_free(first);
    base_free(last);
    return p;
}

/* Whether b's defining node computes it in place of a (a legal overlap). */
static int in_place_pair(const ir_value *a, const ir_value *b, const int *last, const int *pos)
{
    const ir_node *n = b->def;
    int k = n && n->nout == 1 ? mp_inplace_operand(n) : -1;
    return k >= 0 && n->in[k] == a && last[a->id] == pos[b->id];
}

int mp_check(const ir_graph *g, const mp_plan *p, char *err, size_t errlen)
{
    int nv = g->nvalues;
    int *first = base_xmalloc((size_t)(nv + 1) * sizeof *first);
    int *last = base_xmalloc((size_t)(nv + 1) * sizeof *last);
    liveness(g, first, last); /* derived again, not taken from the plan */
    int rc = 0;
    int count = 0;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++) {
            const ir_value *v = n->out[i];
            int64_t off = v->id < p->nvalues ? p->offset_by_id[v->id] : -1;
            if (first[v->id] < 0) { /* weights computed once: never in the arena */
                if (off >= 0) {
                    snprintf(err, errlen, "%%%s is computed once but placed in the arena",
                             v->name);
                    rc = -1;
                    goto done;
                }
                continue;
            }
            count++;
            int64_t arena = n->device < p->ndevices ? p->device_bytes[n->device] : -1;
            if (off < 0 || off % MP_ALIGN || off + mp_value_bytes(v) > arena) {
                snprintf(err, errlen, "%%%s has no aligned place in the %lld-byte arena of "
                         "device %d (offset %lld)", v->name, (long long)arena, n->device,
                         (long long)off);
                rc = -1;
                goto done;
            }
        }
    /* every pair live at one time on one device: disjoint bytes, unless the
       later is computed in place of the earlier by an elementwise kernel that
       reads it last.  Values in the list's order (by first use) per device:
       the pairs of a value are those after it that start before it ends. */
    const ir_value **vals = base_xmalloc((size_t)(count + 1) * sizeof *vals);
    int64_t *bytes = base_xmalloc((size_t)(nv + 1) * sizeof *bytes);
    int k = 0, ndev = ir_graph_devices(g);
    for (int d = 0; d < ndev; d++)
        ir_for_each_node(g, n)
            for (int i = 0; i < n->nout; i++)
                if (n->device == d && first[n->out[i]->id] >= 0) {
                    vals[k++] = n->out[i];
                    bytes[n->out[i]->id] = mp_value_bytes(n->out[i]);
                }
    for (int i = 0; i < count && !rc; i++)
        for (int j = i + 1; j < count && !rc; j++) {
            const ir_value *a = vals[i], *b = vals[j];
            if (b->def->device != a->def->device || first[b->id] > last[a->id])
                break; /* b and every later value start after a ends */
            int64_t ao = p->offset_by_id[a->id], bo = p->offset_by_id[b->id];
            int time = first[a->id] <= last[b->id];
            int space = ao < bo + bytes[b->id] && bo < ao + bytes[a->id];
            if (time && space && !(ao == bo && in_place_pair(a, b, last, first))) {
                snprintf(err, errlen, "%%%s [%lld, +%lld) and %%%s [%lld, +%lld) overlap while "
                         "both are live", a->name, (long long)ao, (long long)bytes[a->id],
                         b->name, (long long)bo, (long long)bytes[b->id]);
                rc = -1;
            }
        }
    base_free(vals);
    base_free(bytes);
done:
    base_free(first);
    base_free(last);
    return rc;
}

void mp_print(const ir_graph *g, const mp_plan *p, FILE *f)
{
    (void)g;
    for (int d = 0; d < p->ndevices; d++) {
        const mp_device *x = &p->dev[d];
        fprintf(f, "# memory plan%s%.0d: arena %lld bytes (lower bound %lld, %.3fx; without "
                "reuse %lld)\n", p->ndevices > 1 ? " of device " : "", p->ndevices > 1 ? d : 0,
                (long long)x->arena_bytes, (long long)x->lower_bound,
                x->lower_bound ? (double)x->arena_bytes / (double)x->lower_bound : 1.0,
                (long long)x->no_reuse_bytes);
        fprintf(f, "# parameters, buffers and state: %lld bytes; inputs: %lld bytes\n",
                (long long)x->param_bytes, (long long)x->input_bytes);
    }
    fprintf(f, "%-14s %-12s %-9s %s\n", "offset", "bytes", "live", "value");
    mp_buffer *sorted = base_xmalloc((size_t)(p->nbufs + 1) * sizeof *sorted);
    memcpy(sorted, p->bufs, (size_t)p->nbufs * sizeof *sorted);
    for (int i = 1; i < p->nbufs; i++) /* by device, offset, then first use */
        for (int j = i; j > 0 && (sorted[j - 1].device > sorted[j].device ||
                                  (sorted[j - 1].device == sorted[j].device &&
                                   (sorted[j - 1].offset > sorted[j].offset ||
                                    (sorted[j - 1].offset == sorted[j].offset &&
                                     sorted[j - 1].first > sorted[j].first)))); j--) {
            mp_buffer t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (int i = 0; i < p->nbufs; i++) {
        char live[32];
        snprintf(live, sizeof live, "%d-%d", sorted[i].first, sorted[i].last);
        fprintf(f, "%-14lld %-12lld %-9s %%%s", (long long)sorted[i].offset,
                (long long)sorted[i].size, live, sorted[i].value->name);
        if (sorted[i].device)
            fprintf(f, " on %d", sorted[i].device);
        if (sorted[i].members > 1)
            fprintf(f, " (and %d more in place)", sorted[i].members - 1);
        fputc('\n', f);
    }
    base_free(sorted);
}

void mp_plan_free(mp_plan *p)
{
    if (!p)
        return;
    base_free(p->bufs);
    base_free(p->offset_by_id);
    base_free(p->dev);
    base_free(p->device_bytes);
    base_free(p);
}
