/* Communication between the devices of a partitioned program, in one process:
 * the reference semantics of the ops in ops.def, "Partitioned programs".
 *
 * The devices' nodes sit in one list.  A collective runs when rt_exec_run
 * reaches the last of its nodes (the verifier guarantees that nothing reads its
 * results before), for all its devices at once, summing in rank order, so the
 * results do not depend on anything but the program.  A recv copies what its
 * send sent (the send comes first in the list). */
#include <string.h>

#include "kernels.h"

static int is_collective(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST;
}

/* The nodes of n's collective by rank, when n is the last of them in the list;
 * else 0. */
static int participants(const rt_exec *x, const ir_node *n, const ir_node **by_rank)
{
    int size;
    const int64_t *group = ir_attr_ints(n, "group", &size);
    int64_t id = ir_attr_int(n, "id");
    for (const ir_node *m = n->next; m; m = m->next)
        if (is_collective(m->op) && ir_attr_int(m, "id") == id)
            return 0; /* not the last: the last runs it */
    int found = 0;
    ir_for_each_node(x->g, m)
        if (is_collective(m->op) && ir_attr_int(m, "id") == id)
            for (int r = 0; r < size; r++)
                if (group[r] == m->device) {
                    by_rank[r] = m;
                    found++;
                }
    return found == size ? size : -1;
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
        int64_t id = ir_attr_int(n, "id"), peer = ir_attr_int(n, "peer");
        ir_for_each_node(x->g, m)
            if (m->op == IR_OP_SEND && ir_attr_int(m, "id") == id && m->device == peer &&
                ir_attr_int(m, "peer") == n->device) {
                memcpy(OUT, x->buf[m->in[0]->id], (size_t)NUMEL(n->out[0]) * sizeof(float));
                return 0;
            }
        return rt_fail(err, errlen, "recv %lld on device %d has no send", (long long)id,
                       n->device);
    }
    const ir_node *p[IR_MAX_DEVICES > 64 ? 64 : IR_MAX_DEVICES];
    int size;
    ir_attr_ints(n, "group", &size);
    if (size > 64)
        return rt_fail(err, errlen, "%s: groups of more than 64 devices are not supported",
                       ir_ops[n->op].name);
    int k = participants(x, n, p);
    if (k == 0)
        return 0;
    if (k < 0)
        return rt_fail(err, errlen, "%s %lld: not every device of its group takes part",
                       ir_ops[n->op].name, (long long)ir_attr_int(n, "id"));
    const ir_type *ti = &n->in[0]->type;
    int64_t len = ir_type_numel(ti);
#define IN_R(r) ((const float *)x->buf[p[r]->in[0]->id])
#define OUT_R(r) ((float *)x->buf[p[r]->out[0]->id])
    switch (n->op) {
    case IR_OP_ALL_REDUCE:
        for (int64_t i = 0; i < len; i++) {
            float s = 0;
            for (int r = 0; r < size; r++)
                s += IN_R(r)[i];
            for (int r = 0; r < size; r++)
                OUT_R(r)[i] = s;
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
