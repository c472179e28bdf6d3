/* Communication between the ranks of an MPI job that runs a partitioned program
 * one device per process (rt_exec_new_rank): the semantics of comm.c and of
 * ops.def, "Partitioned programs", through MPI.  Device d is rank d of
 * MPI_COMM_WORLD.
 *
 * Made once per executor (rt_mpi_new), collectively, in the same order on
 * every rank (every rank holds the same graph):
 *   1. the world checked against the program: its size is the device count;
 *   2. two duplicates of MPI_COMM_WORLD, one for send/recv (tag: the op's id)
 *      and one for rt_mpi_gather, so that gnc's messages never meet the
 *      caller's or each other; errors on them come back as codes;
 *   3. a communicator per distinct group of the program's collectives, in the
 *      order the groups first appear in the node list, by MPI_Comm_split over
 *      the world (ranks outside the group get MPI_COMM_NULL), ranked in the
 *      group's order;
 *   4. a staging buffer per send of this device, and one scratch buffer for
 *      the collectives that rearrange their data: an all_reduce of several
 *      operands packs them into one call, and so do an all_gather and a
 *      reduce_scatter of several (rank-major); an all_gather or reduce_scatter
 *      along an inner axis goes through rank-major blocks.
 *
 * Sends: an MPI_Isend from the send's staging copy.  The operand's buffer may
 * be reused by the memory plan as soon as the send node ran, and a blocking
 * send could deadlock two devices that send to each other before either
 * receives (pipeline schedules do).  A send's request completes before its
 * staging buffer is written again and at the end of every step
 * (rt_mpi_finish).  A recv waits for its message: its send comes before it
 * in the program's order, and every wait progresses this rank's own sends,
 * so the two ranks of a pair never wait on each other.
 *
 * Waits: no call blocks in MPI but those that set up the communicators
 * (MPI_Comm_dup and MPI_Comm_split, for which MPI has no polled form): every
 * rank first waits for all the others at an MPI_Ibarrier, polled as below, so
 * a rank that never comes is found there and the blocking calls follow on
 * ranks that are all present.  (A rank that stops in the microseconds between
 * the barrier and the splits is not found.)  Each operation is the non-blocking form
 * (MPI_Irecv, MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block,
 * MPI_Ibcast, MPI_Isend), completed by polling MPI_Test (which drives Open
 * MPI's progress, as a blocking call would) with the backoff of deadline.h:
 * a spin for its first 2 ms, then naps growing to 1 ms, so that a rank
 * waiting for a stopped peer takes a few percent of a core, not all of it.
 * Each wait has the executor's deadline (rt_exec_set_timeout).  Past it the
 * wait fails with "rank R: waited S s for OP ID (from rank P | to rank P |
 * with ranks ...): giving up" and the executor is spent: MPI cannot cancel a
 * collective or free its request (a receive is cancelled), so requests stay
 * in flight with the buffers they name, and every later run or gather on
 * this executor fails at once.  The caller ends
 * the job (MPI_Abort).  The non-blocking collectives are Open MPI's libnbc,
 * not the blocking ones' tuned algorithms: a sum over two ranks is a + b
 * either way; over more, the association is libnbc's (below).
 *
 * Sums: comm.c sums each element of a collective over the ranks in rank order.
 * MPI_Iallreduce and MPI_Ireduce_scatter_block sum in the library's order.
 * With two ranks both compute a + b, and float addition commutes: the results
 * are bitwise those of comm.c.  With more ranks the association differs (Open
 * MPI's libnbc sums an all-reduce in place along a binomial tree, ((a0 + a1)
 * + (a2 + a3)) for four), so results may differ from comm.c in the last bits;
 * Open MPI's algorithms still give every rank the same bits (which the MPI
 * standard recommends but does not require), so replicas stay in step.
 * Deterministic mode (passes/partition.c) never sums in a collective: it
 * all_gathers the replicas' terms and adds them in replica order itself, so
 * it stays bitwise at any rank count.  Sub-groups of two ranks (a hybrid
 * program's data-parallel pairs) are two-rank sums, bitwise too.
 *
 * Every MPI call goes through MPI_TRY, which returns its error with the call
 * and line.  A failure leaves the peers waiting: the caller ends the job. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadline.h"
#include "kernels.h"

typedef struct {
    const int64_t *devices;     /* the group attribute: its devices in rank order */
    int size;
    int rank;                   /* this device's rank in it; -1: not a member */
    MPI_Comm comm;              /* MPI_COMM_NULL when not a member */
} group;

struct rt_mpi {
    MPI_Comm p2p;               /* send/recv */
    MPI_Comm gather;            /* rt_mpi_gather */
    group *groups;
    int ngroups;
    int64_t nids;               /* ids below nids */
    int *group_of;              /* by id: the collective's group */
    MPI_Request *req;           /* by id: this device's send in flight, or MPI_REQUEST_NULL */
    float **stage;              /* by id: this device's send staging copies */
    int64_t *sends;             /* ids of this device's sends */
    int *peer;                  /* by id: the receiver of this device's send */
    int nsends;
    float *scratch;             /* rearranged collective data */
    int64_t *holder;            /* by value id: the first device holding a parameter, or -1 */
    int spent;                  /* a wait passed its deadline: requests were left in flight */
};

static int mpi_fail(char *err, size_t errlen, int rc, const char *call, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return base_fail(err, errlen, "comm_mpi.c:%d: %.60s failed: %s", line, call, msg);
}

#define MPI_TRY(call)                                                    \
    do {                                                                 \
        int rc_ = (call);                                                \
        if (rc_ != MPI_SUCCESS)                                          \
            return mpi_fail(err, errlen, rc_, #call, __LINE__);         \
    } while (0)

static int is_collective(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST;
}

/* outer x len x inner view of t around axis (as comm.c) */
static void around(const ir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dims[i];
    *len = t->dims[axis];
}

/* Floats of scratch that n needs on this device (0: none). */
static int64_t scratch_of(const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t outer = 1, len, inner;
    if (n->op == IR_OP_ALL_GATHER || n->op == IR_OP_REDUCE_SCATTER)
        around(t, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    switch (n->op) {
    case IR_OP_ALL_REDUCE: {
        int64_t total = 0;
        for (int j = 0; n->nin > 1 && j < n->nin; j++)
            total += ir_type_numel(&n->in[j]->type);
        return total;
    }
    case IR_OP_ALL_GATHER: {
        if (n->nin == 1)
            return outer > 1 ? ir_type_numel(&n->out[0]->type) : 0;
        /* a bucket: this rank's operands one after another, then every rank's */
        int64_t total = 0;
        for (int j = 0; j < n->nin; j++)
            total += ir_type_numel(&n->in[j]->type) + ir_type_numel(&n->out[j]->type);
        return total;
    }
    case IR_OP_REDUCE_SCATTER: {
        if (n->nin == 1)
            return ir_type_numel(t);    /* rank-major blocks, or a copy of an aliased operand */
        /* a bucket: every operand's rank-major blocks, then this rank's sums */
        int64_t total = 0;
        for (int j = 0; j < n->nin; j++)
            total += ir_type_numel(&n->in[j]->type);
        int size;
        ir_attr_ints(n, "group", &size);
        return total + total / size;
    }
    default:
        return 0;
    }
}

void rt_mpi_free(struct rt_mpi *m)
{
    if (!m)
        return;
    int fin = 1;
    MPI_Finalized(&fin);
    for (int i = 0; i < m->nsends; i++) {
        int64_t id = m->sends[i];
        if (!fin && m->req[id] != MPI_REQUEST_NULL) {
            /* a failed step left it in flight: MPI may still read the copy */
            MPI_Request_free(&m->req[id]);
            m->stage[id] = NULL;
        }
    }
    for (int64_t i = 0; m->stage && i < m->nids; i++)
        base_free(m->stage[i]);
    /* spent: a collective left in flight may still use its communicator and
       the scratch (MPI can neither cancel nor free its request), so both stay */
    for (int i = 0; i < m->ngroups; i++)
        if (!fin && !m->spent && m->groups[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&m->groups[i].comm);
    if (!fin && !m->spent && m->p2p != MPI_COMM_NULL)
        MPI_Comm_free(&m->p2p);
    if (!fin && !m->spent && m->gather != MPI_COMM_NULL)
        MPI_Comm_free(&m->gather);
    base_free(m->groups);
    base_free(m->group_of);
    base_free(m->req);
    base_free(m->stage);
    base_free(m->sends);
    base_free(m->peer);
    if (!m->spent)
        base_free(m->scratch);
    base_free(m->holder);
    base_free(m);
}

/* The index of n's group in m->groups, adding it (a collective MPI_Comm_split
 * on every rank) when it is new. */
static int group_index(struct rt_mpi *m, const ir_node *n, int device, char *err, size_t errlen)
{
    int size;
    const int64_t *devs = ir_attr_ints(n, "group", &size);
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].size == size &&
            memcmp(m->groups[i].devices, devs, (size_t)size * sizeof *devs) == 0)
            return i;
    group *k = &m->groups[m->ngroups];
    k->devices = devs, k->size = size, k->rank = -1, k->comm = MPI_COMM_NULL;
    for (int r = 0; r < size; r++)
        if (devs[r] == device)
            k->rank = r;
    MPI_TRY(MPI_Comm_split(m->p2p, k->rank >= 0 ? 0 : MPI_UNDEFINED, k->rank, &k->comm));
    return m->ngroups++;
}

static int wait_for(rt_exec *x, MPI_Request *req, int recv, const char *what, const char *whom,
                    char *err, size_t errlen);

static void holds(struct rt_mpi *m, const ir_value *v, int device)
{
    if (m->holder[v->id] < 0 || device < m->holder[v->id])
        m->holder[v->id] = device;
}

int rt_mpi_new(rt_exec *x, int ndev, char *err, size_t errlen)
{
    const ir_graph *g = x->g;
    int inited = 0, size, rank;
    MPI_Initialized(&inited);
    if (!inited)
        return base_fail(err, errlen, "MPI is not initialized (call MPI_Init first)");
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (size != ndev)
        return base_fail(err, errlen, "the program has %d device%s, but the MPI job has %d ranks: "
                       "one rank runs one device (mpirun -np %d)", ndev, ndev == 1 ? "" : "s",
                       size, ndev);
    if (rank != x->device)
        return base_fail(err, errlen, "rank %d was asked to run device %d: each rank runs its own",
                       rank, x->device);
    int64_t nids = 0, ncoll = 0;
    ir_for_each_node(g, n)
        if (ir_op_communicates(n->op)) {
            int64_t id = ir_attr_int(n, "id");
            if (id < 0 || id >= ((int64_t)1 << 31))
                return base_fail(err, errlen, "%s: id %lld is out of range", ir_ops[n->op].name,
                               (long long)id);
            nids = id + 1 > nids ? id + 1 : nids;
            ncoll += is_collective(n->op);
        }
    int *tag_ub = NULL, found = 0;
    MPI_TRY(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
    if (found && nids > 0 && nids - 1 > *tag_ub)
        return base_fail(err, errlen, "send/recv ids go up to %lld, over this MPI's largest tag "
                       "(%d)", (long long)(nids - 1), *tag_ub);

    struct rt_mpi *m = base_calloc(1, sizeof *m);
    if (!m)
        return base_fail(err, errlen, "out of memory");
    x->mpi = m;
    m->p2p = m->gather = MPI_COMM_NULL;
    m->nids = nids;
    m->groups = base_calloc((size_t)ncoll + 1, sizeof *m->groups);
    m->group_of = base_calloc((size_t)nids + 1, sizeof *m->group_of);
    m->req = base_malloc(((size_t)nids + 1) * sizeof *m->req);
    m->stage = base_calloc((size_t)nids + 1, sizeof *m->stage);
    m->sends = base_calloc((size_t)nids + 1, sizeof *m->sends);
    m->peer = base_calloc((size_t)nids + 1, sizeof *m->peer);
    m->holder = base_malloc(((size_t)g->nvalues + 1) * sizeof *m->holder);
    if (!m->groups || !m->group_of || !m->req || !m->stage || !m->sends || !m->peer || !m->holder)
        return base_fail(err, errlen, "out of memory");
    for (int64_t i = 0; i <= nids; i++)
        m->req[i] = MPI_REQUEST_NULL;
    MPI_Request here;
    char everyone[64];
    snprintf(everyone, sizeof everyone, "with ranks 0 to %d", size - 1);
    MPI_TRY(MPI_Ibarrier(MPI_COMM_WORLD, &here));
    if (wait_for(x, &here, 0, "the other ranks to make their executors", everyone, err, errlen))
        return -1;
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &m->p2p));
    MPI_TRY(MPI_Comm_set_errhandler(m->p2p, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &m->gather));
    MPI_TRY(MPI_Comm_set_errhandler(m->gather, MPI_ERRORS_RETURN));

    int64_t scratch = 0;
    ir_for_each_node(g, n) {
        if (!ir_op_communicates(n->op))
            continue;
        int64_t id = ir_attr_int(n, "id");
        for (int j = 0; j < n->nin + n->nout; j++)
            if (ir_type_numel(&(j < n->nin ? n->in[j] : n->out[j - n->nin])->type) > INT32_MAX)
                return base_fail(err, errlen, "%s %lld: a tensor of over 2^31 elements does not "
                               "fit one MPI message", ir_ops[n->op].name, (long long)id);
        if (is_collective(n->op)) {
            int k = group_index(m, n, x->device, err, errlen); /* on every rank, in order */
            if (k < 0)
                return -1;
            m->group_of[id] = k;
        }
        if (n->device != x->device)
            continue;
        if (n->op == IR_OP_SEND) {
            size_t bytes = (size_t)ir_type_numel(&n->in[0]->type) * sizeof(float);
            if (!(m->stage[id] = base_malloc(bytes ? bytes : 1)))
                return base_fail(err, errlen, "out of memory for send %lld", (long long)id);
            m->sends[m->nsends++] = id;
            m->peer[id] = (int)ir_attr_int(n, "peer");
        }
        int64_t s = is_collective(n->op) ? scratch_of(n) : 0;
        scratch = s > scratch ? s : scratch;
    }
    if (scratch > INT32_MAX)
        return base_fail(err, errlen, "a collective's bucket of over 2^31 elements does not "
                       "fit one MPI message");
    if (scratch && !(m->scratch = base_malloc((size_t)scratch * sizeof(float))))
        return base_fail(err, errlen, "out of memory for %lld floats of collective scratch",
                       (long long)scratch);

    /* parameters: the first device that reads or updates each, as
       place_values gives them copies */
    for (int i = 0; i < g->nvalues; i++)
        m->holder[i] = -1;
    ir_for_each_node(g, n)
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]->kind != IR_VALUE_NODE && n->in[j]->kind != IR_VALUE_INPUT)
                holds(m, n->in[j], n->device);
    for (int i = 0; i < g->nupdates; i++)
        holds(m, g->updates[i].target, g->updates[i].device);
    return 0;
}

/* Completes *req (an operation of this rank's, a receive where recv is set:
 * `what`, with `whom`, as the message names them) by polling MPI_Test with
 * backoff, up to x's deadline.  0; -1 with a message when MPI fails or the
 * deadline passes (then a receive is cancelled, anything else left in
 * flight, and the executor spent). */
static int wait_for(rt_exec *x, MPI_Request *req, int recv, const char *what, const char *whom,
                    char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    double secs = x->timeout_s > 0 ? x->timeout_s : RT_TIMEOUT_DEFAULT;
    rt_wait w;
    rt_wait_start(&w, secs);
    for (;;) {
        int done = 0;
        MPI_TRY(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done)
            return 0;
        if (rt_wait_idle(&w))
            break;
    }
    m->spent = 1;
    if (recv && MPI_Cancel(req) == MPI_SUCCESS) {
        int done = 0;   /* a receive's cancel completes locally */
        for (int i = 0; i < 1000 && !done; i++)
            MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (!done)
            MPI_Request_free(req);
    }
    return base_fail(err, errlen, "rank %d: waited %g s for %s (%s): giving up", x->device, secs,
                     what, whom);
}

/* The message's words for n and the ranks of its group k. */
static void names(const ir_node *n, const group *k, char *what, size_t wl, char *whom, size_t hl)
{
    snprintf(what, wl, "%s %lld", ir_ops[n->op].name, (long long)ir_attr_int(n, "id"));
    int at = snprintf(whom, hl, "with ranks ");
    for (int q = 0; q < k->size && at > 0 && (size_t)at < hl; q++)
        at += snprintf(whom + at, hl - (size_t)at, "%s%lld", q ? ", " : "",
                       (long long)k->devices[q]);
}

/* Completes collective request *req of n over group k. */
static int wait_collective(rt_exec *x, const ir_node *n, const group *k, MPI_Request *req,
                           char *err, size_t errlen)
{
    char what[64], whom[256];
    names(n, k, what, sizeof what, whom, sizeof whom);
    return wait_for(x, req, 0, what, whom, err, errlen);
}

/* Whether byte ranges [a, a + n) and [b, b + n') overlap. */
static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const char *p = a, *q = b;
    return p < q + nb && q < p + na;
}

static int all_reduce(rt_exec *x, const ir_node *n, const group *k, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    MPI_Request req;
    if (n->nin == 1) {
        float *in = x->buf[n->in[0]->id], *out = x->buf[n->out[0]->id];
        int count = (int)ir_type_numel(&n->in[0]->type);
        if (in != out)
            memmove(out, in, (size_t)count * sizeof *in);
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, out, count, MPI_FLOAT, MPI_SUM, k->comm, &req));
        return wait_collective(x, n, k, &req, err, errlen);
    }
    /* a bucket: packed into one call; the sums are element by element, so the
       bits do not depend on the packing */
    int64_t at = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t len = ir_type_numel(&n->in[j]->type);
        memcpy(m->scratch + at, x->buf[n->in[j]->id], (size_t)len * sizeof(float));
        at += len;
    }
    MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, m->scratch, (int)at, MPI_FLOAT, MPI_SUM, k->comm, &req));
    if (wait_collective(x, n, k, &req, err, errlen))
        return -1;
    at = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t len = ir_type_numel(&n->in[j]->type);
        memcpy(x->buf[n->out[j]->id], m->scratch + at, (size_t)len * sizeof(float));
        at += len;
    }
    return 0;
}

/* A bucket of several operands in one MPI_Iallgather: this rank's operands
 * packed one after another (its block), every rank's block gathered rank-major
 * after it, and each result unpacked from the blocks. */
static int all_gather_bucket(rt_exec *x, const ir_node *n, const group *k, char *err,
                             size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t block = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t len = ir_type_numel(&n->in[j]->type);
        memcpy(m->scratch + block, x->buf[n->in[j]->id], (size_t)len * sizeof(float));
        block += len;
    }
    float *all = m->scratch + block;
    MPI_Request req;
    MPI_TRY(MPI_Iallgather(m->scratch, (int)block, MPI_FLOAT, all, (int)block, MPI_FLOAT, k->comm,
                           &req));
    if (wait_collective(x, n, k, &req, err, errlen))
        return -1;
    int64_t off = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t outer, l, inner;
        around(&n->in[j]->type, axis, &outer, &l, &inner);
        float *out = x->buf[n->out[j]->id];
        for (int q = 0; q < k->size; q++)
            for (int64_t u = 0; u < outer; u++)
                memcpy(out + (u * k->size * l + q * l) * inner,
                       all + q * block + off + u * l * inner, (size_t)(l * inner) * sizeof *out);
        off += outer * l * inner;
    }
    return 0;
}

/* Rank r's tensor, [outer, len, inner] along axis, at [outer, r * len + ...,
 * inner] of the [outer, size * len, inner] result on every rank. */
static int all_gather(rt_exec *x, const ir_node *n, const group *k, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    if (n->nin > 1)
        return all_gather_bucket(x, n, k, err, errlen);
    int64_t outer, l, inner;
    around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
    int count = (int)(outer * l * inner);
    float *in = x->buf[n->in[0]->id], *out = x->buf[n->out[0]->id];
    MPI_Request req;
    if (outer == 1) { /* rank-major already: in place, the operand at its slot */
        memmove(out + (int64_t)k->rank * count, in, (size_t)count * sizeof *in);
        MPI_TRY(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, count, MPI_FLOAT,
                               k->comm, &req));
        return wait_collective(x, n, k, &req, err, errlen);
    }
    MPI_TRY(MPI_Iallgather(in, count, MPI_FLOAT, m->scratch, count, MPI_FLOAT, k->comm, &req));
    if (wait_collective(x, n, k, &req, err, errlen))
        return -1;
    for (int q = 0; q < k->size; q++)
        for (int64_t u = 0; u < outer; u++)
            memcpy(out + (u * k->size * l + q * l) * inner, m->scratch + q * count + u * l * inner,
                   (size_t)(l * inner) * sizeof *out);
    return 0;
}

/* A bucket of several operands in one MPI_Ireduce_scatter_block: the scratch
 * holds, rank-major, rank q's block of every operand in turn ([q][j][u][part_j
 * x inner_j]), so the block rank r receives is its results one after another,
 * each in its own layout.  The sums are element by element, so the bits do not
 * depend on the packing. */
static int reduce_scatter_bucket(rt_exec *x, const ir_node *n, const group *k, char *err,
                                 size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    int axis = (int)ir_attr_int(n, "axis");
    int64_t total = 0;
    for (int j = 0; j < n->nin; j++)
        total += ir_type_numel(&n->in[j]->type);
    int64_t block = total / k->size;    /* every operand splits in size */
    float *sums = m->scratch + total;
    for (int q = 0; q < k->size; q++) {
        float *to = m->scratch + q * block;
        for (int j = 0; j < n->nin; j++) {
            int64_t outer, l, inner;
            around(&n->in[j]->type, axis, &outer, &l, &inner);
            int64_t part = l / k->size;
            const float *in = x->buf[n->in[j]->id];
            for (int64_t u = 0; u < outer; u++, to += part * inner)
                memcpy(to, in + (u * l + q * part) * inner, (size_t)(part * inner) * sizeof *in);
        }
    }
    MPI_Request req;
    MPI_TRY(MPI_Ireduce_scatter_block(m->scratch, sums, (int)block, MPI_FLOAT, MPI_SUM, k->comm,
                                      &req));
    if (wait_collective(x, n, k, &req, err, errlen))
        return -1;
    for (int j = 0; j < n->nin; j++) {
        int64_t len = ir_type_numel(&n->out[j]->type);
        memcpy(x->buf[n->out[j]->id], sums, (size_t)len * sizeof *sums);
        sums += len;
    }
    return 0;
}

/* The sum over the group of slice r (along axis) of each rank's tensor, into
 * rank r's result. */
static int reduce_scatter(rt_exec *x, const ir_node *n, const group *k, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    if (n->nin > 1)
        return reduce_scatter_bucket(x, n, k, err, errlen);
    int64_t outer, l, inner;
    const ir_type *t = &n->in[0]->type;
    around(t, (int)ir_attr_int(n, "axis"), &outer, &l, &inner);
    int64_t part = l / k->size;
    float *in = x->buf[n->in[0]->id], *out = x->buf[n->out[0]->id];
    const float *send = in;
    size_t in_bytes = (size_t)ir_type_numel(t) * sizeof *in;
    size_t out_bytes = (size_t)ir_type_numel(&n->out[0]->type) * sizeof *out;
    if (outer > 1) { /* rank-major blocks: [q][u][part x inner] */
        for (int q = 0; q < k->size; q++)
            for (int64_t u = 0; u < outer; u++)
                memcpy(m->scratch + (q * outer + u) * part * inner,
                       in + (u * l + q * part) * inner, (size_t)(part * inner) * sizeof *in);
        send = m->scratch;
    } else if (overlap(in, in_bytes, out, out_bytes)) {
        memcpy(m->scratch, in, in_bytes);
        send = m->scratch;
    }
    MPI_Request req;
    MPI_TRY(MPI_Ireduce_scatter_block(send, out, (int)(outer * part * inner), MPI_FLOAT, MPI_SUM,
                                      k->comm, &req));
    return wait_collective(x, n, k, &req, err, errlen);
}

/* A spent executor (a wait passed its deadline) runs nothing more. */
static int spent(const struct rt_mpi *m, char *err, size_t errlen)
{
    return m->spent ? base_fail(err, errlen, "an earlier wait of this rank passed its deadline: "
                                "its MPI operations are in flight, and the job must end")
                    : 0;
}

/* Completes the send in flight of id (this rank's), if any. */
static int wait_send(rt_exec *x, int64_t id, int peer, char *err, size_t errlen)
{
    char what[64], whom[64];
    snprintf(what, sizeof what, "send %lld", (long long)id);
    snprintf(whom, sizeof whom, "to rank %d", peer);
    return wait_for(x, &x->mpi->req[id], 0, what, whom, err, errlen);
}

int rt_mpi_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    int64_t id = ir_attr_int(n, "id");
    if (spent(m, err, errlen))
        return -1;
    if (n->op == IR_OP_SEND || n->op == IR_OP_RECV) {
        int peer = (int)ir_attr_int(n, "peer");
        if (n->op == IR_OP_SEND) {
            int count = (int)ir_type_numel(&n->in[0]->type);
            if (wait_send(x, id, peer, err, errlen)) /* done at the last step's end */
                return -1;
            memcpy(m->stage[id], x->buf[n->in[0]->id], (size_t)count * sizeof(float));
            MPI_TRY(MPI_Isend(m->stage[id], count, MPI_FLOAT, peer, (int)id, m->p2p, &m->req[id]));
            *(int32_t *)x->buf[n->out[0]->id] = 0;
            return 0;
        }
        MPI_Request req;
        char what[64], whom[64];
        snprintf(what, sizeof what, "recv %lld", (long long)id);
        snprintf(whom, sizeof whom, "from rank %d", peer);
        MPI_TRY(MPI_Irecv(x->buf[n->out[0]->id], (int)ir_type_numel(&n->out[0]->type), MPI_FLOAT,
                          peer, (int)id, m->p2p, &req));
        return wait_for(x, &req, 1, what, whom, err, errlen);
    }
    const group *k = &m->groups[m->group_of[id]];
    IR_ASSERT(k->rank >= 0);    /* the verifier put n on a device of its group */
    switch (n->op) {
    case IR_OP_ALL_REDUCE:
        return all_reduce(x, n, k, err, errlen);
    case IR_OP_ALL_GATHER:
        return all_gather(x, n, k, err, errlen);
    case IR_OP_REDUCE_SCATTER:
        return reduce_scatter(x, n, k, err, errlen);
    default: { /* broadcast: the root's operand into every rank's result */
        int root = (int)ir_attr_int(n, "root");
        float *out = x->buf[n->out[0]->id];
        int count = (int)ir_type_numel(&n->out[0]->type);
        MPI_Request req;
        if (k->rank == root)
            memmove(out, x->buf[n->in[0]->id], (size_t)count * sizeof *out);
        MPI_TRY(MPI_Ibcast(out, count, MPI_FLOAT, root, k->comm, &req));
        return wait_collective(x, n, k, &req, err, errlen);
    }
    }
}

int rt_mpi_finish(rt_exec *x, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    if (spent(m, err, errlen))
        return -1;
    for (int i = 0; i < m->nsends; i++) {
        int64_t id = m->sends[i];
        if (m->req[id] != MPI_REQUEST_NULL && wait_send(x, id, m->peer[id], err, errlen))
            return -1;
    }
    return 0;
}

int rt_mpi_gather(rt_exec *x, char *err, size_t errlen)
{
    struct rt_mpi *m = x->mpi;
    const ir_graph *g = x->g;
    if (spent(m, err, errlen))
        return -1;
    /* one message per value that another device holds first, in the order of
       g->params on every rank: a pair's messages do not overtake each other,
       so each lands in its own buffer */
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        int64_t from = m->holder[v->id];
        if (from <= 0 || (x->device != 0 && x->device != from))
            continue;
        ir_dtype t = v->type.dtype;   /* floats are held widened to float32 */
        int64_t elem = t == IR_F32 || t == IR_F16 || t == IR_BF16 ? 4 : (int64_t)ir_dtype_size(t);
        int64_t bytes = ir_type_numel(&v->type) * elem;
        if (bytes > INT32_MAX)
            return base_fail(err, errlen, "%s: over 2 GiB do not fit one MPI message", v->name);
        MPI_Request req;
        char what[160], whom[64];
        snprintf(what, sizeof what, "the gather of %.100s", v->name);
        snprintf(whom, sizeof whom, "%s rank %lld", x->device == from ? "to" : "from",
                 (long long)(x->device == from ? 0 : from));
        if (x->device == from)
            MPI_TRY(MPI_Isend(x->buf[v->id], (int)bytes, MPI_BYTE, 0, 0, m->gather, &req));
        else
            MPI_TRY(MPI_Irecv(x->buf[v->id], (int)bytes, MPI_BYTE, (int)from, 0, m->gather, &req));
        if (wait_for(x, &req, x->device != from, what, whom, err, errlen))
            return -1;
    }
    return 0;
}
