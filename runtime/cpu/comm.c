/* Communication between the device executors of a partitioned program in one
 * process: the reference semantics of the ops in ops.def, "Partitioned programs".
 *
 * Each device executor runs on its own thread.  A collective is a rendezvous:
 * every rank publishes its operand and result buffers, waits for the others,
 * computes its share, and waits again before it goes on (so no buffer is
 * reused while a peer still reads it).  An all_reduce's share is a range of
 * elements, which its rank sums over all ranks in rank order and writes to
 * every rank's result: the sums do not depend on the thread schedule, and a
 * result may share its operand's buffer.  A send copies its tensor into the
 * pair's mailbox, which its recv empties; a send waits only while the mailbox
 * still holds the last step's tensor, so pairs never deadlock on each other.
 *
 * When a device fails, rt_comm_abort wakes every waiting rank with an error.
 * No wait is for ever: each has the executor's deadline (rt_exec_set_timeout),
 * counted on CLOCK_MONOTONIC (the condition variable's clock, so that a change
 * of the wall clock moves no deadline).  A device whose wait passes it fails
 * the run, saying whom it waited for (the devices that have not come to the
 * barrier, a recv's sender, the receiver of a send whose last message is
 * still unread), and aborts the others, as a failing device does. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

typedef struct {
    int size;                   /* ranks */
    int nin;                    /* operands per rank */
    int arrived;                /* ranks at the barrier */
    unsigned gen;               /* barriers passed */
    unsigned char *here;        /* by rank: at the barrier now */
    void **in, **out;           /* [rank * nin + k]: published buffers */
} collective;

typedef struct {
    void *data;
    size_t bytes;
    int full;
} mailbox;

struct rt_comm {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* on CLOCK_MONOTONIC */
    int failed;
    int64_t nids;               /* ids below nids */
    collective *coll;           /* by id */
    mailbox *box;               /* by id (send/recv) */
    int stall_device;           /* rt_comm_test_stall's device, or -1 */
    int64_t stall_id;           /* and the op it stops at (-1: its first) */
};

static int is_collective(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST;
}

void rt_comm_free(struct rt_comm *c)
{
    if (!c)
        return;
    for (int64_t i = 0; i < c->nids; i++) {
        base_free(c->coll[i].in);
        base_free(c->coll[i].out);
        base_free(c->coll[i].here);
        base_free(c->box[i].data);
    }
    base_free(c->coll);
    base_free(c->box);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    base_free(c);
}

int64_t rt_comm_bytes(const struct rt_comm *c)
{
    int64_t n = 0;
    for (int64_t i = 0; c && i < c->nids; i++)
        n += c->box[i].data ? (int64_t)(c->box[i].bytes ? c->box[i].bytes : 1) : 0;
    return n;
}

int rt_comm_new(rt_exec *parent, char *err, size_t errlen)
{
    const ir_graph *g = parent->g;
    int64_t nids = 0;
    ir_for_each_node(g, n)
        if (ir_op_communicates(n->op)) {
            int64_t id = ir_attr_int(n, "id");
            if (id < 0 || id >= ((int64_t)1 << 31))
                return base_fail(err, errlen, "%s: id %lld is out of range", ir_ops[n->op].name,
                               (long long)id);
            nids = id + 1 > nids ? id + 1 : nids;
        }
    struct rt_comm *c = base_calloc(1, sizeof *c);
    if (!c)
        return base_fail(err, errlen, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->stall_device = -1;
    parent->comm = c;
    c->nids = nids;
    c->coll = base_calloc((size_t)nids + 1, sizeof *c->coll);
    c->box = base_calloc((size_t)nids + 1, sizeof *c->box);
    if (!c->coll || !c->box)
        return base_fail(err, errlen, "out of memory");
    ir_for_each_node(g, n) {
        int64_t id = ir_ops[n->op].name && ir_op_communicates(n->op) ? ir_attr_int(n, "id") : -1;
        if (id < 0)
            continue;
        if (n->op == IR_OP_SEND) {
            mailbox *b = &c->box[id];
            b->bytes = (size_t)ir_type_numel(&n->in[0]->type) * sizeof(float);
            if (!b->data && !(b->data = base_malloc(b->bytes ? b->bytes : 1)))
                return base_fail(err, errlen, "out of memory for send %lld", (long long)id);
        } else if (is_collective(n->op) && !c->coll[id].in) {
            collective *k = &c->coll[id];
            ir_attr_ints(n, "group", &k->size);
            k->nin = n->nin;
            k->in = base_calloc((size_t)k->size * k->nin, sizeof *k->in);
            k->out = base_calloc((size_t)k->size * k->nin, sizeof *k->out);
            k->here = base_calloc((size_t)k->size, 1);
            if (!k->in || !k->out || !k->here)
                return base_fail(err, errlen, "out of memory");
        }
    }
    return 0;
}

void rt_comm_abort(struct rt_comm *c)
{
    pthread_mutex_lock(&c->mu);
    c->failed = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void rt_comm_reset(struct rt_comm *c)
{
    c->failed = 0;
    for (int64_t i = 0; i < c->nids; i++) {
        c->coll[i].arrived = 0;
        if (c->coll[i].here)
            memset(c->coll[i].here, 0, (size_t)c->coll[i].size);
        c->box[i].full = 0;
    }
}

void rt_comm_test_stall(rt_exec *parent, int device, int64_t id)
{
    struct rt_comm *c = parent->comm;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stall_device = device;
    c->stall_id = id;
    pthread_mutex_unlock(&c->mu);
}

/* A wait's deadline: x's timeout from now, on the condition variable's clock. */
static struct timespec deadline_of(const rt_exec *x, double *seconds)
{
    *seconds = x->timeout_s > 0 ? x->timeout_s : RT_TIMEOUT_DEFAULT;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double whole = (double)(time_t)*seconds;
    t.tv_sec += (time_t)whole;
    t.tv_nsec += (long)((*seconds - whole) * 1e9);
    if (t.tv_nsec >= 1000000000L)
        t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

/* Waits on c->cv (c->mu held) until woken or past deadline: 1 when past it. */
static int wait_until(struct rt_comm *c, const struct timespec *deadline)
{
    return pthread_cond_timedwait(&c->cv, &c->mu, deadline) == ETIMEDOUT;
}

/* The run fails (c->mu held): every waiting device is woken with an error. */
static void fail_all(struct rt_comm *c)
{
    c->failed = 1;
    pthread_cond_broadcast(&c->cv);
}

/* Waits until all ranks of k are here, as rank r.  0; -1 when a device
 * failed; -2 when the deadline passed first, with the devices that had not
 * come in err (and the run failed). */
static int barrier(rt_exec *x, const ir_node *n, collective *k, int r, char *err, size_t errlen)
{
    struct rt_comm *c = x->comm;
    double secs;
    struct timespec deadline = deadline_of(x, &secs);
    int late = 0;
    pthread_mutex_lock(&c->mu);
    unsigned gen = k->gen;
    k->here[r] = 1;
    if (++k->arrived == k->size) {
        k->arrived = 0;
        memset(k->here, 0, (size_t)k->size);
        k->gen++;
        pthread_cond_broadcast(&c->cv);
    } else {
        while (k->gen == gen && !c->failed && !late)
            late = wait_until(c, &deadline) && k->gen == gen && !c->failed;
    }
    if (late) {
        int size, missing = 0;
        const int64_t *group = ir_attr_ints(n, "group", &size);
        char who[256] = "", all[256] = "";
        for (int q = 0; q < size; q++) {
            size_t u = strlen(who), a = strlen(all);
            snprintf(all + a, sizeof all - a, "%s%lld", q ? ", " : "", (long long)group[q]);
            if (!k->here[q])
                snprintf(who + u, sizeof who - u, "%s%lld", missing++ ? ", " : "",
                         (long long)group[q]);
        }
        base_fail(err, errlen, "waited %g s for %s %lld (device%s %s of %s %s not come): giving up",
                  secs, ir_ops[n->op].name, (long long)ir_attr_int(n, "id"), missing > 1 ? "s" : "",
                  who, all, missing > 1 ? "have" : "has");
        fail_all(c);
    }
    int failed = c->failed;
    pthread_mutex_unlock(&c->mu);
    return late ? -2 : failed ? -1 : 0;
}

/* rt_comm_test_stall's fault: device x stops here, until the run fails (-1).
 * 0 where there is none. */
static int stalled(rt_exec *x, const ir_node *n, int64_t id, char *err, size_t errlen)
{
    struct rt_comm *c = x->comm;
    pthread_mutex_lock(&c->mu);
    int stop = c->stall_device == x->device && (c->stall_id < 0 || c->stall_id == id);
    while (stop && !c->failed)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return stop ? base_fail(err, errlen, "%s %lld: stalled for a test until another device "
                            "failed", ir_ops[n->op].name, (long long)id)
                : 0;
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

/* Rank r's share of collective n over size ranks, buffers in k. */
static void share(const ir_node *n, const collective *k, int r)
{
    int size = k->size;
    const ir_type *ti = &n->in[0]->type;
#define IN_R(q, j) ((const float *)k->in[(q) * k->nin + (j)])
#define OUT_R(q, j) ((float *)k->out[(q) * k->nin + (j)])
    switch (n->op) {
    case IR_OP_ALL_REDUCE: /* elements [lo, hi) of each operand */
        for (int j = 0; j < k->nin; j++) {
            int64_t len = ir_type_numel(&n->in[j]->type);
            int64_t lo = len * r / size, hi = len * (r + 1) / size;
            for (int64_t i = lo; i < hi; i++) {
                float s = 0;
                for (int q = 0; q < size; q++)
                    s += IN_R(q, j)[i];
                for (int q = 0; q < size; q++)
                    OUT_R(q, j)[i] = s;
            }
        }
        return;
    case IR_OP_BROADCAST: { /* the root's tensor into rank r's result */
        int64_t root = ir_attr_int(n, "root");
        memmove(OUT_R(r, 0), IN_R(root, 0), (size_t)ir_type_numel(ti) * sizeof(float));
        return;
    }
    case IR_OP_ALL_GATHER: /* rank r's slice of each operand into every rank's result */
        for (int j = 0; j < k->nin; j++) {
            int64_t outer, l, inner;
            around(&n->in[j]->type, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
            for (int q = 0; q < size; q++)
                for (int64_t u = 0; u < outer; u++)
                    memcpy(OUT_R(q, j) + (u * size * l + r * l) * inner,
                           IN_R(r, j) + u * l * inner, (size_t)(l * inner) * sizeof(float));
        }
        return;
    case IR_OP_REDUCE_SCATTER: /* the sum of slice r of each operand into rank r's result */
        for (int j = 0; j < k->nin; j++) {
            int64_t outer, l, inner;
            around(&n->in[j]->type, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
            int64_t part = l / size;
            for (int64_t u = 0; u < outer; u++)
                for (int64_t i = 0; i < part * inner; i++) {
                    int64_t at = (u * l + r * part) * inner + i;
                    float s = 0;
                    for (int q = 0; q < size; q++)
                        s += IN_R(q, j)[at];
                    OUT_R(r, j)[u * part * inner + i] = s;
                }
        }
        return;
    default:
        return;
    }
#undef IN_R
#undef OUT_R
}

int rt_comm_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    struct rt_comm *c = x->comm;
    int64_t id = ir_attr_int(n, "id");
    if (stalled(x, n, id, err, errlen))
        return -1;
    if (n->op == IR_OP_SEND || n->op == IR_OP_RECV) {
        mailbox *b = &c->box[id];
        int send = n->op == IR_OP_SEND, late = 0;
        double secs;
        struct timespec deadline = deadline_of(x, &secs);
        pthread_mutex_lock(&c->mu);
        while (b->full == send && !c->failed && !late)
            late = wait_until(c, &deadline) && b->full == send && !c->failed;
        if (late) {
            long long peer = (long long)ir_attr_int(n, "peer");
            if (send)
                base_fail(err, errlen, "waited %g s for send %lld (to device %lld, which has "
                          "not received the last one): giving up", secs, (long long)id, peer);
            else
                base_fail(err, errlen, "waited %g s for recv %lld (from device %lld): giving up",
                          secs, (long long)id, peer);
            fail_all(c);
        } else if (!c->failed) {
            if (send)
                memcpy(b->data, x->buf[n->in[0]->id], b->bytes);
            else
                memcpy(x->buf[n->out[0]->id], b->data, b->bytes);
            b->full = send;
            pthread_cond_broadcast(&c->cv);
        }
        int failed = c->failed;
        pthread_mutex_unlock(&c->mu);
        if (late)
            return -1;
        if (send && !failed)
            *(int32_t *)x->buf[n->out[0]->id] = 0;
        return failed ? base_fail(err, errlen, "%s %lld: another device failed", ir_ops[n->op].name,
                                (long long)id)
                      : 0;
    }
    collective *k = &c->coll[id];
    int size;
    const int64_t *group = ir_attr_ints(n, "group", &size);
    int r = 0;
    while (r < size && group[r] != x->device)
        r++;
    for (int j = 0; j < k->nin; j++) {
        k->in[r * k->nin + j] = x->buf[n->in[j]->id];
        k->out[r * k->nin + j] = x->buf[n->out[j]->id];
    }
    for (int pass = 0; pass < 2; pass++) { /* publish, share, and leave together */
        int rc = barrier(x, n, k, r, err, errlen);
        if (rc == -2)
            return -1;
        if (rc != 0)
            return base_fail(err, errlen, "%s %lld: another device failed", ir_ops[n->op].name,
                             (long long)id);
        if (pass == 0)
            share(n, k, r);
    }
    return 0;
}
