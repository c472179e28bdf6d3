/* Communication between the devices of a partitioned program, in one process:
 * the reference semantics of the ops in ops.def, "Partitioned programs".
 *
 * The devices' nodes sit in one list.  A collective runs when rt_exec_run
 * reaches the last of its nodes (the verifier guarantees that nothing reads its
 * results before), for all its devices at once, summing in rank order, so the
 * results do not depend on anything but the program.  A recv copies what its
 * send sent (the send comes first in the list). */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define MAX_GROUP 64

/* What each communication node needs at run time, by its result's value id. */
struct rt_comm {
    const ir_node ***peers;     /* collective: the nodes by rank, when it is the last
                                   of them in the list; else NULL */
    const ir_node **send;       /* recv: its send */
};

static int is_collective(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST;
}

int rt_comm_prepare(rt_exec *x, char *err, size_t errlen)
{
    const ir_graph *g = x->g;
    int any = 0;
    ir_for_each_node(g, n)
        any |= ir_op_communicates(n->op);
    if (!any)
        return 0;
    struct rt_comm *c = calloc(1, sizeof *c);
    if (!c || !(c->peers = calloc((size_t)g->nvalues + 1, sizeof *c->peers)) ||
        !(c->send = calloc((size_t)g->nvalues + 1, sizeof *c->send))) {
        if (c)
            free(c->peers);
        free(c);
        return rt_fail(err, errlen, "out of memory");
    }
    x->comm = c;
    ir_for_each_node(g, n) {
        if (n->op == IR_OP_RECV) {
            int64_t id = ir_attr_int(n, "id"), peer = ir_attr_int(n, "peer");
            ir_for_each_node(g, m)
                if (m->op == IR_OP_SEND && ir_attr_int(m, "id") == id && m->device == peer &&
                    ir_attr_int(m, "peer") == n->device)
                    c->send[n->out[0]->id] = m;
            if (!c->send[n->out[0]->id])
                return rt_fail(err, errlen, "recv %lld on device %d has no send",
                               (long long)id, n->device);
            continue;
        }
        if (!is_collective(n->op))
            continue;
        int64_t id = ir_attr_int(n, "id");
        int last = 1, size;
        const int64_t *group = ir_attr_ints(n, "group", &size);
        for (const ir_node *m = n->next; m && last; m = m->next)
            last = !(is_collective(m->op) && ir_attr_int(m, "id") == id);
        if (!last)
            continue; /* the last of them runs the collective */
        if (size > MAX_GROUP)
            return rt_fail(err, errlen, "%s: groups of more than %d devices are not supported",
                           ir_ops[n->op].name, MAX_GROUP);
        const ir_node **by_rank = calloc((size_t)size, sizeof *by_rank);
        if (!by_rank)
            return rt_fail(err, errlen, "out of memory");
        c->peers[n->out[0]->id] = by_rank;
        int found = 0;
        ir_for_each_node(g, m)
            if (is_collective(m->op) && ir_attr_int(m, "id") == id)
                for (int r = 0; r < size; r++)
                    if (group[r] == m->device && !by_rank[r]) {
                        by_rank[r] = m;
                        found++;
                    }
        if (found != size)
            return rt_fail(err, errlen, "%s %lld: not every device of its group takes part",
                           ir_ops[n->op].name, (long long)id);
    }
    return 0;
}

void rt_comm_free(rt_exec *x)
{
    if (!x->comm)
        return;
    for (int i = 0; i < x->nvalues; i++)
        free(x->comm->peers[i]);
    free(x->comm->peers);
    free(x->comm->send);
    free(x->comm);
}

/* outer x len x inner view of t around axis */
static void around(const ir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dims[i];
    *len = t->dims[axis];
}

int rt_comm_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    if (n->op == IR_OP_SEND) {
        *(int32_t *)x->buf[n->out[0]->id] = 0;
        return 0;
    }
    if (n->op == IR_OP_RECV) {
        const ir_node *snd = x->comm->send[n->out[0]->id];
        memcpy(OUT, x->buf[snd->in[0]->id], (size_t)NUMEL(n->out[0]) * sizeof(float));
        return 0;
    }
    const ir_node **p = x->comm->peers[n->out[0]->id];
    if (!p)
        return 0; /* not the last of its nodes: that one runs it */
    int size;
    ir_attr_ints(n, "group", &size);
    const ir_type *ti = &n->in[0]->type;
    int64_t len = ir_type_numel(ti);
#define IN_R(r) ((const float *)x->buf[p[r]->in[0]->id])
#define OUT_R(r) ((float *)x->buf[p[r]->out[0]->id])
    switch (n->op) {
    case IR_OP_ALL_REDUCE:
        for (int k = 0; k < n->nin; k++)
            for (int64_t i = 0, len_k = NUMEL(n->in[k]); i < len_k; i++) {
                float s = 0;
                for (int r = 0; r < size; r++)
                    s += ((const float *)x->buf[p[r]->in[k]->id])[i];
                for (int r = 0; r < size; r++)
                    ((float *)x->buf[p[r]->out[k]->id])[i] = s;
            }
        return 0;
    case IR_OP_BROADCAST: {
        int64_t root = ir_attr_int(n, "root");
        for (int r = 0; r < size; r++)
            if (r != root)
                memcpy(OUT_R(r), IN_R(root), (size_t)len * sizeof(float));
        memmove(OUT_R(root), IN_R(root), (size_t)len * sizeof(float));
        return 0;
    }
    case IR_OP_ALL_GATHER: {
        int64_t outer, l, inner;
        around(ti, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
        for (int r = 0; r < size; r++)         /* rank r's slice ... */
            for (int q = 0; q < size; q++)     /* ... into every rank q's result */
                for (int64_t u = 0; u < outer; u++)
                    memcpy(OUT_R(q) + (u * size * l + r * l) * inner, IN_R(r) + u * l * inner,
                           (size_t)(l * inner) * sizeof(float));
        return 0;
    }
    case IR_OP_REDUCE_SCATTER: {
        int64_t outer, l, inner;
        around(ti, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
        int64_t part = l / size;
        for (int q = 0; q < size; q++)
            for (int64_t u = 0; u < outer; u++)
                for (int64_t i = 0; i < part * inner; i++) {
                    int64_t at = (u * l + q * part) * inner + i;
                    float s = 0;
                    for (int r = 0; r < size; r++)
                        s += IN_R(r)[at];
                    OUT_R(q)[u * part * inner + i] = s;
                }
        return 0;
    }
    default:
        return rt_fail(err, errlen, "not a communication op");
    }
#undef IN_R
#undef OUT_R
}
