/* The fake NCCL (libnccl.so.2): communicators of one process whose ranks
 * are fake devices, collectives and point-to-point calls computed on host
 * memory when every rank's part has reached the head of its stream.
 *
 * Models: cliques made by ncclCommInitAll, by ncclCommInitRank for every rank
 * within one ncclGroupStart/End, or by ncclCommSplit (every rank, within a
 * group); a rank's device is the one current at its init; two ranks of one
 * clique on one device are refused ("Duplicate GPU detected", ncclInvalidUsage)
 * as NCCL refuses them.  A call is queued on its stream as a part (a group's
 * calls of one communicator and stream form one part); when the part reaches
 * the head of its stream it arrives: its collectives wait for the same call
 * (the n-th collective of each rank) of every rank, its sends and receives
 * pair by (sender, receiver) in order.  AllReduce and ReduceScatter with
 * ncclSum and ncclMax (floats summed in float, in rank order, rounded to the
 * type; integers exactly), AllGather, Broadcast, Send/Recv; ncclFloat32,
 * Float16, Bfloat16, Int32, Int64.  Calls of different ranks that do not
 * match (kind, count, type, op, root) fail the part.
 *
 * Single-thread strictness: one thread issuing calls for two ranks of one
 * communicator outside a group would hang real NCCL (a call blocks until its
 * peers join, NCCL's own rule for several devices per thread); the fake
 * refuses such a call with ncclInvalidUsage and a message instead.
 *
 * Not modelled: ranks in other processes (ncclCommInitRank for a clique not
 * completed in this process fails with ncclInternalError), threads, other
 * reductions and types, non-blocking communicators and ncclConfig_t, the
 * synchronization of several streams within one group (each (communicator,
 * stream) pair is its own part). */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define EXPORT __attribute__((visibility("default")))

enum { K_ALLREDUCE, K_ALLGATHER, K_REDUCESCATTER, K_BROADCAST, K_SEND, K_RECV };
static const char *const kind_name[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                        "ncclBroadcast", "ncclSend", "ncclRecv"};

typedef struct {
    int kind;
    const void *send;
    void *recv;
    size_t count;       /* per rank: sendcount (AllGather), recvcount (ReduceScatter) */
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;           /* Broadcast's root; Send/Recv's peer */
} call;

typedef struct clique clique;

struct ncclComm {
    clique *cl;
    int rank, dev;
    int live;
};

typedef struct {
    int64_t seq;
    const call **op;    /* by rank, NULL until that rank's part arrives */
    int arrived, done, refs;
    char err[256];
} slot;

typedef struct pending {
    struct pending *next;
    const call *c;
    int *done;
    char *err;
} pending;

struct clique {
    int nranks, ninit;
    struct ncclComm *rank;      /* by rank */
    int refs;                   /* live ranks and queued parts */
    ncclUniqueId id;
    int64_t *next_coll;         /* by rank: the sequence number of its next collective */
    slot **slots;
    int nslots;
    pending **sends, **recvs;   /* by sender * nranks + receiver, FIFO */
    int ungrouped_rank;         /* the last rank called outside a group, or -1 */
};

static struct {
    clique **cliques;
    int ncliques;
    int group_depth;
    struct grouped {
        ncclComm_t comm;
        cudaStream_t stream;
        call c;
    } *grouped;
    int ngrouped;
    struct pending_init {
        ncclComm_t comm;
    } *inits;
    int ninits;
    struct split {
        ncclComm_t comm, *out;
        int color, key;
    } *splits;
    int nsplits;
    unsigned id_counter;
    int unloaded;       /* at exit: the cliques are gone, queued parts let go */
} N;

static ncclResult_t complain(ncclResult_t r, const char *who, const char *fmt, const char *arg)
{
    fprintf(stderr, "fakecuda: %s: ", who);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return r;
}

EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unknown result code";
    }
}

/* ---------------------------------------------------------------- cliques */

static clique *clique_new(int nranks, const ncclUniqueId *id)
{
    clique *cl = calloc(1, sizeof *cl);
    cl->nranks = nranks;
    cl->rank = calloc((size_t)nranks, sizeof *cl->rank);
    cl->next_coll = calloc((size_t)nranks, sizeof *cl->next_coll);
    cl->sends = calloc((size_t)nranks * nranks, sizeof *cl->sends);
    cl->recvs = calloc((size_t)nranks * nranks, sizeof *cl->recvs);
    cl->ungrouped_rank = -1;
    if (id)
        cl->id = *id;
    for (int r = 0; r < nranks; r++)
        cl->rank[r].cl = cl, cl->rank[r].rank = r, cl->rank[r].dev = -1;
    N.cliques = realloc(N.cliques, (size_t)(N.ncliques + 1) * sizeof *N.cliques);
    N.cliques[N.ncliques++] = cl;
    return cl;
}

static void free_pending(pending *q)
{
    while (q) {
        pending *x = q;
        q = q->next;
        free(x);
    }
}

static void clique_free(clique *cl)
{
    for (int i = 0; i < N.ncliques; i++)
        if (N.cliques[i] == cl)
            N.cliques[i] = N.cliques[--N.ncliques];
    for (int k = 0; k < cl->nranks * cl->nranks; k++) {
        free_pending(cl->sends[k]);
        free_pending(cl->recvs[k]);
    }
    for (int i = 0; i < cl->nslots; i++) {
        free(cl->slots[i]->op);
        free(cl->slots[i]);
    }
    free(cl->slots);
    free(cl->sends);
    free(cl->recvs);
    free(cl->next_coll);
    free(cl->rank);
    free(cl);
}

static void clique_unref(clique *cl)
{
    if (!N.unloaded && --cl->refs == 0)
        clique_free(cl);
}

/* Two ranks of cl on one device: NCCL's "Duplicate GPU detected". */
static ncclResult_t check_duplicates(const clique *cl, const char *who)
{
    for (int a = 0; a < cl->nranks; a++)
        for (int b = a + 1; b < cl->nranks; b++)
            if (cl->rank[a].dev == cl->rank[b].dev) {
                fprintf(stderr, "fakecuda: %s: Duplicate GPU detected: rank %d and rank %d both on "
                        "CUDA device %d\n", who, a, b, cl->rank[a].dev);
                return ncclInvalidUsage;
            }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return ncclInvalidArgument;
    memset(uniqueId, 0, sizeof *uniqueId);
    snprintf(uniqueId->internal, sizeof uniqueId->internal, "gnc-fakecuda-%u", ++N.id_counter);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    int count = 0;
    if (!comm || ndev < 1)
        return ncclInvalidArgument;
    if (cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return ncclUnhandledCudaError;
    clique *cl = clique_new(ndev, NULL);
    for (int r = 0; r < ndev; r++) {
        cl->rank[r].dev = devlist ? devlist[r] : r;
        if (cl->rank[r].dev < 0 || cl->rank[r].dev >= count) {
            cl->refs = 1;
            clique_unref(cl);
            return ncclInvalidArgument;
        }
    }
    if (check_duplicates(cl, "ncclCommInitAll")) {
        cl->refs = 1;
        clique_unref(cl);
        return ncclInvalidUsage;
    }
    for (int r = 0; r < ndev; r++) {
        cl->rank[r].live = 1;
        comm[r] = &cl->rank[r];
    }
    cl->ninit = cl->refs = ndev;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    CUdevice dev;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return ncclUnhandledCudaError;
    clique *cl = NULL;
    for (int i = 0; i < N.ncliques; i++)
        if (!memcmp(&N.cliques[i]->id, &commId, sizeof commId) && N.cliques[i]->ninit < N.cliques[i]->nranks)
            cl = N.cliques[i];
    if (cl && cl->nranks != nranks)
        return complain(ncclInvalidArgument, "ncclCommInitRank", "%s", "nranks differs between ranks");
    if (!cl) {
        if (nranks > 1 && !N.group_depth)
            return complain(ncclInternalError, "ncclCommInitRank", "%s",
                            "a clique of several ranks initialized outside a group: its other "
                            "ranks would be in other processes or threads, which the fake does "
                            "not model (init every rank within ncclGroupStart/End)");
        cl = clique_new(nranks, &commId);
    }
    if (cl->rank[rank].dev >= 0)
        return complain(ncclInvalidUsage, "ncclCommInitRank", "%s", "a rank initialized twice");
    cl->rank[rank].dev = dev;
    cl->rank[rank].live = 1;
    cl->ninit++;
    cl->refs++;
    *comm = &cl->rank[rank];
    if (N.group_depth) {
        N.inits = realloc(N.inits, (size_t)(N.ninits + 1) * sizeof *N.inits);
        N.inits[N.ninits++].comm = *comm;
    }
    return ncclSuccess;
}

static int comm_ok(ncclComm_t c)
{
    for (int i = 0; c && i < N.ncliques; i++)
        if (c >= N.cliques[i]->rank && c < N.cliques[i]->rank + N.cliques[i]->nranks)
            return c->live;
    return 0;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    comm->live = 0;
    clique_unref(comm->cl);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm_ok(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->cl->nranks;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm_ok(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

static ncclResult_t do_splits(struct split *sp, int n);

EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config)
{
    (void)config;
    if (!comm_ok(comm) || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
        return ncclInvalidArgument;
    struct split s = {comm, newcomm, color, key};
    if (!N.group_depth) {
        if (comm->cl->nranks > 1)
            return complain(ncclInvalidUsage, "ncclCommSplit", "%s",
                            "splitting a communicator of several ranks outside a group: the call "
                            "waits for every rank, which one thread cannot give (real NCCL hangs)");
        return do_splits(&s, 1);
    }
    N.splits = realloc(N.splits, (size_t)(N.nsplits + 1) * sizeof *N.splits);
    N.splits[N.nsplits++] = s;
    return ncclSuccess;
}

/* The splits of one group: each parent's ranks all split, grouped by color,
 * ordered by key then old rank. */
static ncclResult_t do_splits(struct split *sp, int n)
{
    for (int i = 0; i < n; i++) {
        if (!sp[i].comm)
            continue;
        clique *parent = sp[i].comm->cl;
        struct split **mine = calloc((size_t)parent->nranks, sizeof *mine);
        for (int j = i; j < n; j++)
            if (sp[j].comm && sp[j].comm->cl == parent)
                mine[sp[j].comm->rank] = &sp[j];
        for (int r = 0; r < parent->nranks; r++)
            if (!mine[r]) {
                free(mine);
                return complain(ncclInvalidUsage, "ncclCommSplit", "%s",
                                "not every rank of the communicator split in this group (real NCCL hangs)");
            }
        for (int r = 0; r < parent->nranks; r++) {
            if (!mine[r]->comm)
                continue;
            int color = mine[r]->color;
            if (color == NCCL_SPLIT_NOCOLOR) {
                *mine[r]->out = NULL;
                mine[r]->comm = NULL;
                continue;
            }
            int members[256], nm = 0;
            for (int q = 0; q < parent->nranks && nm < 256; q++)
                if (mine[q]->comm && mine[q]->color == color)
                    members[nm++] = q;
            for (int a = 1; a < nm; a++) /* by key, then old rank */
                for (int b = a; b > 0 && mine[members[b]]->key < mine[members[b - 1]]->key; b--) {
                    int t = members[b];
                    members[b] = members[b - 1], members[b - 1] = t;
                }
            clique *cl = clique_new(nm, NULL);
            for (int a = 0; a < nm; a++) {
                cl->rank[a].dev = parent->rank[members[a]].dev;
                cl->rank[a].live = 1;
                *mine[members[a]]->out = &cl->rank[a];
                mine[members[a]]->comm = NULL;
            }
            cl->ninit = cl->refs = nm;
        }
        free(mine);
    }
    return ncclSuccess;
}

/* ---------------------------------------------------------------- values */

static cudaDataType cuda_type(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: return CUDA_R_32F;
    case ncclFloat16: return CUDA_R_16F;
    case ncclBfloat16: return CUDA_R_16BF;
    case ncclInt32: return CUDA_R_32I;
    case ncclInt64: return CUDA_R_64I;
    default: return (cudaDataType)-1;
    }
}

static size_t type_size(ncclDataType_t t) { return fk_type_size(cuda_type(t)); }

static int is_int(ncclDataType_t t) { return t == ncclInt32 || t == ncclInt64; }

static int64_t load_int(const void *p, size_t i, ncclDataType_t t)
{
    return t == ncclInt64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

static void store_int(void *p, size_t i, ncclDataType_t t, int64_t v)
{
    if (t == ncclInt64)
        ((int64_t *)p)[i] = v;
    else
        ((int32_t *)p)[i] = (int32_t)v;
}

/* The bytes each rank's send and receive buffers span. */
static void extents(const call *c, int nranks, size_t *send, size_t *recv)
{
    size_t e = c->count * type_size(c->type);
    *send = *recv = e;
    if (c->kind == K_ALLGATHER)
        *recv = e * (size_t)nranks;
    if (c->kind == K_REDUCESCATTER)
        *send = e * (size_t)nranks;
    if (c->kind == K_SEND)
        *recv = 0;
    if (c->kind == K_RECV)
        *send = 0;
}

static int buffers_ok(const call *c, const struct ncclComm *m, const char *who)
{
    size_t s, r;
    extents(c, m->cl->nranks, &s, &r);
    int need_send = s && (c->kind != K_BROADCAST || m->rank == c->root);
    return (!need_send || !fk_check_range(m->dev, c->send, s, who, "send buffer")) &&
           (!r || !fk_check_range(m->dev, c->recv, r, who, "receive buffer"));
}

/* Runs collective s, every rank arrived: 0, or a message in s->err. */
static void collective(clique *cl, slot *s)
{
    const call *c0 = s->op[0];
    for (int r = 1; r < cl->nranks; r++) {
        const call *c = s->op[r];
        if (c->kind != c0->kind || c->count != c0->count || c->type != c0->type ||
            c->op != c0->op || c->root != c0->root) {
            snprintf(s->err, sizeof s->err, "collective %lld: rank 0 calls %s (count %zu), rank %d "
                     "%s (count %zu) with other arguments", (long long)s->seq, kind_name[c0->kind],
                     c0->count, r, kind_name[c->kind], c->count);
            return;
        }
    }
    for (int r = 0; r < cl->nranks; r++)
        if (!buffers_ok(s->op[r], &cl->rank[r], "running an NCCL collective")) {
            snprintf(s->err, sizeof s->err, "rank %d's buffers were freed before the collective ran", r);
            return;
        }
    size_t n = c0->count, esz = type_size(c0->type);
    int R = cl->nranks;
    ncclDataType_t t = c0->type;
    cudaDataType ct = cuda_type(t);
    size_t total = c0->kind == K_ALLREDUCE || c0->kind == K_BROADCAST ? n : n * (size_t)R;
    unsigned char *tmp = calloc(total + 1, esz); /* results, before any buffer is written */
    if (c0->kind == K_ALLGATHER) {
        for (int r = 0; r < R; r++)
            memcpy(tmp + (size_t)r * n * esz, s->op[r]->send, n * esz);
    } else if (c0->kind == K_BROADCAST) {
        memcpy(tmp, s->op[c0->root]->send, n * esz);
    } else {
        for (size_t i = 0; i < total; i++) {
            if (is_int(t)) {
                int64_t a = load_int(s->op[0]->send, i, t);
                for (int r = 1; r < R; r++) {
                    int64_t b = load_int(s->op[r]->send, i, t);
                    a = c0->op == ncclSum ? a + b : a > b ? a : b;
                }
                store_int(tmp, i, t, a);
            } else {
                float a = (float)fk_load(s->op[0]->send, (int64_t)i, ct);
                for (int r = 1; r < R; r++) {
                    float b = (float)fk_load(s->op[r]->send, (int64_t)i, ct);
                    a = c0->op == ncclSum ? a + b : a > b ? a : b;
                }
                fk_store(tmp, (int64_t)i, ct, a);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        if (c0->kind == K_REDUCESCATTER)
            memcpy(s->op[r]->recv, tmp + (size_t)r * n * esz, n * esz);
        else
            memcpy(s->op[r]->recv, tmp, total * esz);
    }
    free(tmp);
}

/* ---------------------------------------------------------------- parts */

typedef struct {
    struct ncclComm *m;
    call *calls;
    int ncalls;
} part;

/* A part's arrival, per queue entry. */
typedef struct {
    slot **slots;       /* by call: its collective's slot, or NULL */
    int *done;          /* by call (point-to-point) */
    char err[256];
} arrival;

static void part_release(void *ctx)
{
    part *p = ctx;
    clique_unref(p->m->cl); /* after unloading: nothing */
    free(p->calls);
    free(p);
}

static void slot_unref(clique *cl, slot *s)
{
    if (--s->refs > 0)
        return;
    for (int i = 0; i < cl->nslots; i++)
        if (cl->slots[i] == s)
            cl->slots[i] = cl->slots[--cl->nslots];
    free(s->op);
    free(s);
}

static void unlink_pending(pending **q, const int *done)
{
    for (pending **pp = q; *pp;)
        if ((*pp)->done == done) {
            pending *x = *pp;
            *pp = x->next;
            free(x);
        } else {
            pp = &(*pp)->next;
        }
}

static void arrival_free(void *ctx, void *state)
{
    part *p = ctx;
    arrival *a = state;
    clique *cl = p->m->cl;
    for (int i = 0; i < p->ncalls && !N.unloaded; i++) {
        if (a->slots[i]) {
            if (!a->slots[i]->done)
                a->slots[i]->op[p->m->rank] = NULL, a->slots[i]->arrived--;
            slot_unref(cl, a->slots[i]);
        } else if (!a->done[i]) { /* dropped before it paired */
            for (int k = 0; k < cl->nranks * cl->nranks; k++) {
                unlink_pending(&cl->sends[k], &a->done[i]);
                unlink_pending(&cl->recvs[k], &a->done[i]);
            }
        }
    }
    free(a->slots);
    free(a->done);
    free(a);
}

static void push_pending(pending **q, const call *c, int *done, char *err)
{
    pending *x = calloc(1, sizeof *x);
    x->c = c, x->done = done, x->err = err;
    while (*q)
        q = &(*q)->next;
    *q = x;
}

/* Pairs the waiting sends and receives between sender a and receiver b. */
static void pair(clique *cl, int a, int b)
{
    pending **S = &cl->sends[a * cl->nranks + b], **R = &cl->recvs[a * cl->nranks + b];
    while (*S && *R) {
        pending *s = *S, *r = *R;
        size_t bytes = s->c->count * type_size(s->c->type);
        if (s->c->count != r->c->count || s->c->type != r->c->type) {
            snprintf(s->err, 256, "rank %d sends %zu elements of type %d to rank %d, which receives "
                     "%zu of type %d", a, s->c->count, (int)s->c->type, b, r->c->count, (int)r->c->type);
            snprintf(r->err, 256, "%s", s->err);
        } else if (!fk_check_range(cl->rank[a].dev, s->c->send, bytes, "running ncclSend", "send buffer") &&
                   !fk_check_range(cl->rank[b].dev, r->c->recv, bytes, "running ncclRecv", "receive buffer")) {
            memmove(r->c->recv, s->c->send, bytes);
        } else {
            snprintf(s->err, 256, "a point-to-point buffer was freed before it ran");
        }
        *s->done = *r->done = 1;
        *S = s->next, *R = r->next;
        free(s);
        free(r);
    }
}

static int part_ready(void *ctx, void **state)
{
    part *p = ctx;
    clique *cl = p->m->cl;
    int me = p->m->rank;
    arrival *a = *state;
    if (!a) { /* arrives: joins its collectives, offers its sends and receives */
        a = *state = calloc(1, sizeof *a);
        a->slots = calloc((size_t)p->ncalls + 1, sizeof *a->slots);
        a->done = calloc((size_t)p->ncalls + 1, sizeof *a->done);
        for (int i = 0; i < p->ncalls; i++) {
            const call *c = &p->calls[i];
            if (c->kind == K_SEND || c->kind == K_RECV) {
                int peer = c->root;
                if (c->kind == K_SEND)
                    push_pending(&cl->sends[me * cl->nranks + peer], c, &a->done[i], a->err);
                else
                    push_pending(&cl->recvs[peer * cl->nranks + me], c, &a->done[i], a->err);
                pair(cl, c->kind == K_SEND ? me : peer, c->kind == K_SEND ? peer : me);
                continue;
            }
            int64_t seq = cl->next_coll[me]++;
            slot *s = NULL;
            for (int k = 0; k < cl->nslots && !s; k++)
                if (cl->slots[k]->seq == seq)
                    s = cl->slots[k];
            if (!s) {
                s = calloc(1, sizeof *s);
                s->seq = seq;
                s->op = calloc((size_t)cl->nranks, sizeof *s->op);
                s->refs = cl->nranks;
                cl->slots = realloc(cl->slots, (size_t)(cl->nslots + 1) * sizeof *cl->slots);
                cl->slots[cl->nslots++] = s;
            }
            s->op[me] = c;
            a->slots[i] = s;
            if (++s->arrived == cl->nranks) {
                collective(cl, s);
                s->done = 1;
            }
        }
    }
    for (int i = 0; i < p->ncalls; i++)
        if (a->slots[i] ? !a->slots[i]->done : !a->done[i])
            return 0;
    return 1;
}

static int part_run(void *ctx, void **state, char *why, size_t whylen)
{
    part *p = ctx;
    arrival *a = *state;
    const char *err = a->err[0] ? a->err : NULL;
    for (int i = 0; i < p->ncalls && !err; i++)
        if (a->slots[i] && a->slots[i]->err[0])
            err = a->slots[i]->err;
    if (err) {
        snprintf(why, whylen, "%s", err);
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return 0;
}

static ncclResult_t enqueue(struct ncclComm *m, cudaStream_t stream, const call *calls, int n)
{
    part *p = calloc(1, sizeof *p);
    p->m = m;
    p->calls = calloc((size_t)n, sizeof *p->calls);
    memcpy(p->calls, calls, (size_t)n * sizeof *calls);
    p->ncalls = n;
    m->cl->refs++;
    char what[128];
    snprintf(what, sizeof what, "NCCL %s%s, rank %d of %d", kind_name[calls[0].kind],
             n > 1 ? " and more (a group)" : "", m->rank, m->cl->nranks);
    fk_task *t = fk_task_new(what, part_run, part_ready, p, part_release, arrival_free);
    CUresult r = fk_enqueue_dev(m->dev, (CUstream)stream, t);
    if (r) {
        fprintf(stderr, "fakecuda: %s: the stream is not a live stream of the communicator's "
                "device %d, or that device failed (%d)\n", kind_name[calls[0].kind], m->dev, (int)r);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* A call: checked, then queued (outside a group) or kept for ncclGroupEnd. */
static ncclResult_t issue(ncclComm_t comm, cudaStream_t stream, call c)
{
    const char *who = kind_name[c.kind];
    if (!comm_ok(comm))
        return complain(ncclInvalidArgument, who, "%s", "not a live communicator");
    if (cuda_type(c.type) == (cudaDataType)-1 || (c.op != ncclSum && c.op != ncclMax))
        return complain(ncclInvalidArgument, who, "%s", "a type or reduction not modelled");
    if ((c.kind == K_BROADCAST || c.kind == K_SEND || c.kind == K_RECV) &&
        (c.root < 0 || c.root >= comm->cl->nranks))
        return complain(ncclInvalidArgument, who, "%s", "root or peer out of range");
    if (fk_stream_device((CUstream)stream) != comm->dev && stream)
        return complain(ncclInvalidUsage, who, "%s", "the stream is not of the communicator's device");
    if (!buffers_ok(&c, comm, who))
        return ncclInvalidArgument;
    if (N.group_depth) {
        N.grouped = realloc(N.grouped, (size_t)(N.ngrouped + 1) * sizeof *N.grouped);
        N.grouped[N.ngrouped++] = (struct grouped){comm, stream, c};
        return ncclSuccess;
    }
    clique *cl = comm->cl;
    if (cl->nranks > 1 && cl->ungrouped_rank >= 0 && cl->ungrouped_rank != comm->rank) {
        fprintf(stderr, "fakecuda: %s: called for rank %d of a communicator after rank %d, both "
                "outside ncclGroupStart/ncclGroupEnd: with one thread driving several ranks "
                "real NCCL hangs here (each call waits for its peers); put the calls of all "
                "ranks in one group\n", who, comm->rank, cl->ungrouped_rank);
        return ncclInvalidUsage;
    }
    cl->ungrouped_rank = comm->rank;
    return enqueue(comm, stream, &c, 1);
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return issue(comm, stream, (call){K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0});
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return issue(comm, stream, (call){K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0});
}

EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    return issue(comm, stream, (call){K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0});
}

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return issue(comm, stream, (call){K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root});
}

EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    return issue(comm, stream, (call){K_SEND, sendbuff, NULL, count, datatype, ncclSum, peer});
}

EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    return issue(comm, stream, (call){K_RECV, NULL, recvbuff, count, datatype, ncclSum, peer});
}

EXPORT ncclResult_t ncclGroupStart(void)
{
    N.group_depth++;
    return ncclSuccess;
}

/* The inits of the group: every clique they touch complete and without duplicates. */
static ncclResult_t finish_inits(void)
{
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < N.ninits && !r; i++) {
        clique *cl = N.inits[i].comm->cl;
        if (cl->ninit < cl->nranks)
            r = complain(ncclInternalError, "ncclGroupEnd", "%s",
                         "ncclCommInitRank: not every rank of the clique was initialized in this "
                         "group; ranks in other processes are not modelled");
        else
            r = check_duplicates(cl, "ncclCommInitRank");
    }
    free(N.inits);
    N.inits = NULL;
    N.ninits = 0;
    return r;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
    if (N.group_depth <= 0)
        return complain(ncclInvalidUsage, "ncclGroupEnd", "%s", "without ncclGroupStart");
    if (--N.group_depth > 0)
        return ncclSuccess;
    ncclResult_t r = finish_inits();
    if (!r && N.nsplits)
        r = do_splits(N.splits, N.nsplits);
    free(N.splits);
    N.splits = NULL;
    N.nsplits = 0;
    /* one part per (communicator, stream), its calls in issue order */
    char *taken = calloc((size_t)N.ngrouped + 1, 1);
    call *calls = calloc((size_t)N.ngrouped + 1, sizeof *calls);
    for (int i = 0; i < N.ngrouped && !r; i++) {
        if (taken[i])
            continue;
        int n = 0;
        for (int j = i; j < N.ngrouped; j++)
            if (!taken[j] && N.grouped[j].comm == N.grouped[i].comm &&
                N.grouped[j].stream == N.grouped[i].stream) {
                calls[n++] = N.grouped[j].c;
                taken[j] = 1;
            }
        if (!comm_ok(N.grouped[i].comm))
            r = ncclInvalidArgument;
        else
            r = enqueue(N.grouped[i].comm, N.grouped[i].stream, calls, n);
    }
    free(taken);
    free(calls);
    free(N.grouped);
    N.grouped = NULL;
    N.ngrouped = 0;
    fk_progress();
    return r;
}

/* The library unloaded (at exit: it is never unloaded before): what it
 * still holds goes.  The driver's own destructor runs later and releases
 * parts still queued; they must not touch the cliques then. */
__attribute__((destructor)) static void fake_nccl_unload(void)
{
    while (N.ncliques)
        clique_free(N.cliques[0]);
    free(N.cliques);
    free(N.grouped);
    free(N.inits);
    free(N.splits);
    memset(&N, 0, sizeof N);
    N.unloaded = 1;
}
