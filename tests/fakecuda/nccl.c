/* The fake NCCL (libnccl.so.2): communicators whose ranks are fake devices,
 * of this process or of other processes of the host, collectives and
 * point-to-point calls computed on host memory when every rank's part has
 * reached the head of its stream.
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
 * type; integers exactly, wrapping), AllGather, Broadcast, Send/Recv;
 * ncclFloat32, Float16, Bfloat16, Int8, Uint8, Int32, Int64.  Calls of
 * different ranks that do not match (kind, count, type, op, root) fail the part.
 *
 * Calls in flight on a device (inflight): a part of a second communicator,
 * or of the same one on a second stream, reaching the head of its stream
 * while another is in flight there is refused (the part fails, naming
 * both), NCCL's "Using multiple NCCL communicators concurrently".
 *
 * Threads: NCCL's group (ncclGroupStart/End and what it holds) is per
 * thread, as in NCCL; every call holds the fakes' lock (fake.h).  One thread
 * issuing calls for two ranks of one communicator outside a group would hang
 * real NCCL (a call blocks until its peers join, NCCL's own rule for several
 * devices per thread); the fake refuses such a call with ncclInvalidUsage and
 * a message instead.  A thread of its own for each rank (NCCL's multi-thread
 * mode) needs no group.
 *
 * Ranks in other processes (one per process; each process's fake driver has
 * the same devices: ordinal d is the same GPU everywhere).  ncclGetUniqueId
 * names a directory, $TMPDIR (or /tmp)/gnc-fakecuda-nccl.<pid>.<n>.<nonce>,
 * in the id ("gnc-fakecuda-nccl:" and the path), and starts a thread that
 * lives until every rank has joined (NCCL's bootstrap root, whose code must
 * stay mapped: unloading the library under it crashes, as with the real
 * one); the ranks make the directory and
 * exchange files there, each written under a temporary name and renamed, so
 * that a file present is complete, and poll for them.
 *   - ncclCommInitRank of a rank whose clique this process does not complete
 *     (called outside a group, or in a group holding no other rank of it)
 *     writes init.<rank> (nranks, device) and waits for every rank's: nranks
 *     that differ, a rank taken twice and two ranks on one device fail on
 *     every rank.
 *   - ncclCommSplit: each rank writes split<n>.<rank> (color, key, device) in
 *     the parent's directory, n counting the parent's splits (the same on
 *     every rank when all split in one order), and waits for all; a color of
 *     several ranks gets the subdirectory s<n>.c<color>; one alone is a
 *     communicator of this process.
 *   - the n-th collective: at arrival the rank writes c<n>.<rank> (the call,
 *     its send buffer); when every rank's is there each computes the result
 *     alone, as above, and writes r<n>.<rank> (read); who finds every rank's
 *     read marker removes the collective's files.
 *   - the k-th message from rank a to rank b: b's receive, on arriving (at
 *     the head of its stream), writes p<a>.<b>.<k> (count, type) and waits
 *     for m<a>.<b>.<k>; a's send is not ready until that posted marker is
 *     there (the rendezvous: a send completes only after its receive reached
 *     the head of its stream), then writes m<a>.<b>.<k> (the data), removes
 *     the marker and completes; the receive copies the data and removes it.
 *     Two ranks each sending before receiving on one stream wait for ever,
 *     as on GPUs.
 * A part waiting on another process tells the driver (FK_WAIT_REMOTE), whose
 * synchronizing calls then poll instead of reporting a deadlock.  No wait is
 * for ever: after FAKECUDA_NCCL_TIMEOUT seconds (default 60) from the part's
 * arrival, or from the start of an init or split, it fails with a message
 * naming the communicator (its directory), the call and the rank waited for:
 * the part's device fails (sticky), the init or split returns ncclRemoteError.
 * When the last communicator of a world (its splits included) of a process
 * is freed (destroyed, its queued work done or dropped; at the latest at exit)
 * the process writes done.<rank>; who finds every rank's there removes the
 * directory.  A rank whose init times out removes it at once.  A process
 * killed before exit leaves it behind.
 *
 * A process's streams progress only within its driver and library calls: a
 * process blocked elsewhere (MPI_Barrier) while another waits on its queued
 * NCCL work stalls that one until its timeout; synchronize first.
 *
 * Errors and aborts, as NCCL documents them: a part that fails (a timeout
 * waiting on another process, calls that do not match) also sets its
 * communicator's asynchronous error, which ncclCommGetAsyncError reports
 * (ncclRemoteError for a timeout, ncclInvalidUsage for a mismatch;
 * ncclSuccess until then).  ncclCommAbort frees the communicator as
 * ncclCommDestroy does, without waiting, and aborts its calls still queued:
 * each ends at once, without an error and without touching its buffers (on a
 * GPU their results are undefined), so that the streams drain.  The handle is
 * gone after either: any later call with it is ncclInvalidArgument.
 *
 * Faults for tests: GNC_FAKECUDA_NCCL_STALL_INIT=DEV makes device DEV's
 * ncclCommInitRank across processes hang (it never joins; its peers wait for
 * it) until FAKECUDA_NCCL_TIMEOUT passes, when it fails with ncclRemoteError.
 * GNC_FAKECUDA_NCCL_STALL=DEV makes every NCCL call of
 * device DEV hang as on a GPU that stopped: its parts never arrive (their
 * peers wait for them; synchronizing calls poll, cuStreamQuery answers not
 * ready), until the communicator is aborted or FAKECUDA_NCCL_TIMEOUT
 * passes, when the part fails ("stalled by GNC_FAKECUDA_NCCL_STALL").
 *
 * Not modelled: a process holding several but not all ranks of one
 * communicator (refused), other reductions and types, non-blocking
 * communicators and ncclConfig_t, the synchronization of several streams
 * within one group (each (communicator, stream) pair is its own part). */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <nccl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* A world across processes: its directory (its splits' are inside) and this
 * process's rank in it. */
typedef struct {
    char *dir;
    int rank, nranks;
    int cliques;        /* its cliques alive in this process */
    int pid;            /* the process that joined (a child forked later is not it) */
} world;

struct ncclComm {
    clique *cl;
    int rank, dev;
    int live;
    int aborted;                /* ncclCommAbort: its queued parts end at once */
    ncclResult_t async;         /* ncclCommGetAsyncError's: a part of it failed */
    int coll_used;              /* a collective was queued: its connections are set up */
    unsigned char *p2p_used;    /* by peer: a send or receive was queued */
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
    unsigned long *caller;      /* by rank: the thread that last called for it outside a
                                   group (its this_thread()), or 0 */
    /* across processes (dir not NULL): rank me is this process's, the others
       are elsewhere; sends and receives pair through files in dir */
    char *dir;
    world *w;
    int me;
    int nsplits;                /* splits of it so far */
    int64_t *sent, *received;   /* by peer: messages to it, from it, that arrived */
};

/* This thread's number, from 1, never reused (a thread's storage may be) */
static unsigned long this_thread(void)
{
    static unsigned long threads;
    static FK_TLS unsigned long me;
    if (!me)
        me = ++threads; /* under the lock */
    return me;
}

/* NCCL's group, which is per thread: the calls, inits and splits kept for
 * ncclGroupEnd */
static FK_TLS struct {
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
} T;

static struct {
    clique **cliques;
    int ncliques;
    unsigned id_counter, tmp_counter;
    int unloaded;       /* at exit: the cliques are gone, queued parts let go */
    struct flying {             /* by device: the parts arrived, not run (inflight) */
        const void *part;
        const clique *cl;
        CUstream stream;
        int rank, nranks;
    } inflight[64][8];
} N;

static ncclResult_t complain(ncclResult_t r, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ncclResult_t complain(ncclResult_t r, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fakecuda: %s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return r;
}

EXPORT const char *ncclGetErrorString(ncclResult_t result)
{
    FK_API;
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "unknown result code";
    }
}

/* The version of nccl.h gnc was built with, or GNC_FAKECUDA_NCCL_VERSION's
 * (NCCL_VERSION_CODE's form: 21403 for 2.14.3): an older NCCL, for the
 * runtime's fallbacks. */
EXPORT ncclResult_t ncclGetVersion(int *version)
{
    FK_API;
    const char *v = getenv("GNC_FAKECUDA_NCCL_VERSION");
    if (!version)
        return ncclInvalidArgument;
    *version = v && *v ? atoi(v) : NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* ---------------------------------------------------------------- files */

enum { PATHLEN = 4096 };
#define ID_MAGIC "gnc-fakecuda-nccl:"

/* What a rank writes: a call (or an init's or a split's facts), then bytes of data. */
typedef struct {
    int32_t kind, type, op, root;
    int32_t dev, color, key, nranks;
    uint64_t count, bytes;
} wire;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* FAKECUDA_NCCL_TIMEOUT: how long a rank waits for another process. */
static double timeout_s(void)
{
    const char *v = getenv("FAKECUDA_NCCL_TIMEOUT");
    char *end = NULL;
    double t = v ? strtod(v, &end) : 0;
    return v && end != v && t > 0 ? t : 60;
}

static void nap(void) { nanosleep(&(struct timespec){0, 1000000}, NULL); }

static int present(const char *path) { return access(path, F_OK) == 0; }

/* dir/name (name a format) into path[PATHLEN]. */
static void path_of(char *path, const char *dir, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void path_of(char *path, const char *dir, const char *fmt, ...)
{
    int n = snprintf(path, PATHLEN, "%s/", dir);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < PATHLEN)
        vsnprintf(path + n, (size_t)(PATHLEN - n), fmt, ap);
    va_end(ap);
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k, n -= (size_t)k;
    }
    return 0;
}

/* Writes w and then data (w->bytes of it) to path all at once: under a
 * temporary name, then renamed; excl: linked instead, failing with EEXIST
 * when path is taken.  0, or -1 with errno. */
static int put_file(const char *path, const wire *w, const void *data, int excl)
{
    char tmp[PATHLEN];
    const char *slash = strrchr(path, '/');
    int len = slash ? (int)(slash - path) : 1;
    snprintf(tmp, sizeof tmp, "%.*s/.tmp.%d.%u", len, slash ? path : ".", (int)getpid(),
             ++N.tmp_counter);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return -1;
    int r = write_all(fd, w, sizeof *w);
    if (!r && w->bytes)
        r = write_all(fd, data, (size_t)w->bytes);
    int e = errno;
    if (close(fd) && !r)
        r = -1, e = errno;
    if (!r) {
        r = excl ? link(tmp, path) : rename(tmp, path);
        e = errno;
    }
    if (excl || r)
        unlink(tmp);
    errno = e;
    return r;
}

/* The file at path: its header in *w, its data (w->bytes, malloc'd, NULL when
 * none) in *data.  0, or -1 when it is absent or malformed. */
static int get_file(const char *path, wire *w, unsigned char **data)
{
    *data = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    struct stat st;
    int ok = !fstat(fd, &st) && (uint64_t)st.st_size >= sizeof *w;
    size_t got = 0, want = ok ? (size_t)st.st_size : 0;
    unsigned char *b = ok ? malloc(want) : NULL;
    while (b && got < want) {
        ssize_t k = read(fd, b + got, want - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (!b || got != want) {
        free(b);
        return -1;
    }
    memcpy(w, b, sizeof *w);
    if (w->bytes != want - sizeof *w) {
        free(b);
        return -1;
    }
    if (w->bytes) {
        *data = malloc((size_t)w->bytes);
        if (*data)
            memcpy(*data, b + sizeof *w, (size_t)w->bytes);
    }
    free(b);
    return w->bytes && !*data ? -1 : 0;
}

/* Removes dir and what it holds; other processes may be doing the same. */
static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[PATHLEN];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            path_of(path, dir, "%s", e->d_name);
            struct stat st;
            if (!lstat(path, &st) && S_ISDIR(st.st_mode))
                rm_tree(path);
            else
                unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The first k < n without dir/<prefix>.<k> (skipping those seen[k], then
 * set), or -1 when all are there. */
static int missing_seen(const char *dir, const char *prefix, int n, char *seen)
{
    char path[PATHLEN];
    int first = -1;
    for (int k = 0; k < n; k++) {
        if (seen && seen[k])
            continue;
        path_of(path, dir, "%s.%d", prefix, k);
        if (present(path)) {
            if (seen)
                seen[k] = 1;
        } else if (first < 0) {
            first = k;
            if (!seen)
                break;
        }
    }
    return first;
}

static int missing(const char *dir, const char *prefix, int n)
{
    return missing_seen(dir, prefix, n, NULL);
}

/* Waits up to the timeout for dir/<prefix>.<k>, every k < n: -1, or the
 * first rank never seen (a rank that timed out first may have removed the
 * others' files since). */
static int await_all(const char *dir, const char *prefix, int n)
{
    double t0 = now(), limit = timeout_s();
    char *seen = calloc((size_t)n + 1, 1);
    int k;
    while ((k = missing_seen(dir, prefix, n, seen)) >= 0 && now() - t0 <= limit)
        nap();
    free(seen);
    return k;
}

/* This process, rank rank of the world in dir, is done with it: the last
 * rank done removes the directory. */
static void world_done(const char *dir, int rank, int nranks)
{
    char path[PATHLEN];
    path_of(path, dir, "done.%d", rank);
    wire w = {0};
    put_file(path, &w, NULL, 0);
    if (missing(dir, "done", nranks) < 0)
        rm_tree(dir);
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
    cl->caller = calloc((size_t)nranks, sizeof *cl->caller);
    if (id)
        cl->id = *id;
    for (int r = 0; r < nranks; r++)
        cl->rank[r].cl = cl, cl->rank[r].rank = r, cl->rank[r].dev = -1,
        cl->rank[r].p2p_used = calloc((size_t)nranks, 1);
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
    if (cl->w && --cl->w->cliques == 0) {
        if (cl->w->pid == (int)getpid())
            world_done(cl->w->dir, cl->w->rank, cl->w->nranks);
        free(cl->w->dir);
        free(cl->w);
    }
    free(cl->dir);
    free(cl->sent);
    free(cl->received);
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
    free(cl->caller);
    for (int r = 0; r < cl->nranks; r++)
        free(cl->rank[r].p2p_used);
    free(cl->rank);
    for (int d = 0; d < 64; d++) /* a clique freed with parts in flight (a failure) */
        for (int i = 0; i < 8; i++)
            if (N.inflight[d][i].cl == cl)
                N.inflight[d][i] = (struct flying){0};
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

/* A clique's ranks and devices fixed; rank me is this process's, the others
 * in other processes, exchanging files in dir of world w. */
static void clique_make_remote(clique *cl, int me, const char *dir, world *w)
{
    cl->dir = strdup(dir);
    cl->w = w;
    w->cliques++;
    cl->me = me;
    cl->sent = calloc((size_t)cl->nranks, sizeof *cl->sent);
    cl->received = calloc((size_t)cl->nranks, sizeof *cl->received);
    cl->ninit = cl->nranks;
}

/* Its ranks that live go; the clique with them (nothing of it was queued). */
static void clique_drop(clique *cl)
{
    for (int r = 0, n = cl->nranks; r < n; r++)
        if (cl->rank[r].live) {
            cl->rank[r].live = 0;
            if (--cl->refs == 0) {
                clique_free(cl);
                return;
            }
        }
}

/* NCCL's bootstrap root: ncclGetUniqueId starts a thread that serves the id
 * until every rank has met through it, or until the timeout.  Here it waits
 * until the id's directory holds every rank's init file (or has come and
 * gone), waking every 10 ms.  Its code is this library's, so a process that
 * unloads the library while it runs crashes, as it does with the real one. */
static void *bootstrap_root(void *arg)
{
    char *dir = arg, path[PATHLEN];
    double t0 = now(), limit = timeout_s();
    int seen = 0;
    while (now() - t0 <= limit) {
        struct stat st;
        int here = stat(dir, &st) == 0;
        if (seen && !here)
            break;
        seen |= here;
        wire w;
        unsigned char *data;
        path_of(path, dir, "init.0");
        if (here && get_file(path, &w, &data) == 0) {
            free(data);
            if (w.nranks > 0 && missing(dir, "init", w.nranks) < 0)
                break;
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    free(dir);
    return NULL;
}

/* The id names a directory (ncclCommInitRank across processes makes it). */
EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    FK_API;
    if (!uniqueId)
        return ncclInvalidArgument;
    const char *tmp = getenv("TMPDIR");
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long nonce = ((unsigned long long)t.tv_sec << 30) ^ (unsigned long long)t.tv_nsec ^
                               ((unsigned long long)(uintptr_t)&t << 7);
    for (int i = 0; i < 2; i++, tmp = "/tmp") {
        memset(uniqueId, 0, sizeof *uniqueId);
        int n = snprintf(uniqueId->internal, sizeof uniqueId->internal,
                         ID_MAGIC "%s/gnc-fakecuda-nccl.%d.%u.%llx", tmp && *tmp ? tmp : "/tmp",
                         (int)getpid(), N.id_counter + 1, nonce);
        if (n > 0 && n < (int)sizeof uniqueId->internal)
            break;
    }
    N.id_counter++;
    pthread_t root;
    char *dir = strdup(uniqueId->internal + strlen(ID_MAGIC));
    if (!dir || pthread_create(&root, NULL, bootstrap_root, dir)) {
        free(dir);
        return ncclSystemError;
    }
    pthread_detach(root);
    return ncclSuccess;
}

/* The device that environment variable `name` names, or -1. */
static int device_of_env(const char *name)
{
    const char *v = getenv(name);
    char *end = NULL;
    long d = v ? strtol(v, &end, 10) : -1;
    return v && *v && end && !*end && d >= 0 ? (int)d : -1;
}

/* Rank me of cl, whose other ranks are in other processes, meets them in the
 * id's directory (init.<rank>): ncclSuccess, cl across processes then; or a
 * failure, after a message. */
static ncclResult_t join(clique *cl, int me, const ncclUniqueId *id)
{
    const char *who = "ncclCommInitRank";
    if (cl->rank[me].dev == device_of_env("GNC_FAKECUDA_NCCL_STALL_INIT")) {
        double t0 = now();     /* it never joins: its peers wait for it */
        while (now() - t0 <= timeout_s())
            nap();
        return complain(ncclRemoteError, who, "rank %d stalled by GNC_FAKECUDA_NCCL_STALL_INIT=%d "
                        "for %g s (FAKECUDA_NCCL_TIMEOUT)", me, cl->rank[me].dev, timeout_s());
    }
    if (strncmp(id->internal, ID_MAGIC, strlen(ID_MAGIC)) ||
        !memchr(id->internal, 0, sizeof id->internal))
        return complain(ncclInvalidArgument, who, "the id is not one from ncclGetUniqueId");
    const char *dir = id->internal + strlen(ID_MAGIC);
    struct stat st;
    if (mkdir(dir, 0700) && (errno != EEXIST || stat(dir, &st) || !S_ISDIR(st.st_mode)))
        return complain(ncclSystemError, who, "cannot make %s: %s", dir, strerror(errno));
    char path[PATHLEN];
    path_of(path, dir, "init.%d", me);
    wire w = {.kind = -1, .dev = cl->rank[me].dev, .nranks = cl->nranks};
    if (put_file(path, &w, NULL, 1))
        return complain(errno == EEXIST ? ncclInvalidUsage : ncclSystemError, who,
                        "rank %d of %s: %s", me, dir,
                        errno == EEXIST ? "initialized twice (another process has it)" : strerror(errno));
    int late = await_all(dir, "init", cl->nranks);
    if (late >= 0) {
        complain(ncclRemoteError, who, "timed out after %g s in %s (FAKECUDA_NCCL_TIMEOUT): rank %d "
                 "of %d waits for rank %d, which never called ncclCommInitRank with this id",
                 timeout_s(), dir, me, cl->nranks, late);
        rm_tree(dir);
        return ncclRemoteError;
    }
    ncclResult_t r = ncclSuccess;
    for (int k = 0; k < cl->nranks && !r; k++) {
        unsigned char *data;
        path_of(path, dir, "init.%d", k);
        if (get_file(path, &w, &data))
            r = complain(ncclSystemError, who, "cannot read %s", path);
        else if (w.nranks != cl->nranks)
            r = complain(ncclInvalidArgument, who, "nranks differs between ranks: %d for rank %d, "
                         "%d for rank %d (in %s)", cl->nranks, me, w.nranks, k, dir);
        else
            cl->rank[k].dev = w.dev;
        free(data);
    }
    if (!r)
        r = check_duplicates(cl, who);
    if (r) {
        world_done(dir, me, cl->nranks);
        return r;
    }
    world *wd = calloc(1, sizeof *wd);
    wd->dir = strdup(dir);
    wd->rank = me;
    wd->nranks = cl->nranks;
    wd->pid = (int)getpid();
    clique_make_remote(cl, me, dir, wd);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    FK_API;
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
    FK_API;
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
    if (!cl)
        cl = clique_new(nranks, &commId);
    if (cl->rank[rank].dev >= 0)
        return complain(ncclInvalidUsage, "ncclCommInitRank", "%s", "a rank initialized twice");
    cl->rank[rank].dev = dev;
    cl->rank[rank].live = 1;
    cl->ninit++;
    cl->refs++;
    *comm = &cl->rank[rank];
    if (T.group_depth) {
        T.inits = realloc(T.inits, (size_t)(T.ninits + 1) * sizeof *T.inits);
        T.inits[T.ninits++].comm = *comm;
        return ncclSuccess;
    }
    if (nranks == 1)
        return ncclSuccess;
    /* outside a group: the other ranks are in other processes */
    ncclResult_t r = join(cl, rank, &commId);
    if (r) {
        clique_drop(cl);
        *comm = NULL;
    }
    return r;
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
    FK_API;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    comm->live = 0;
    clique_unref(comm->cl);
    return ncclSuccess;
}

/* The clique stays while parts of it are queued (they hold references), and
 * they see the rank's flag. */
EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    FK_API;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    comm->aborted = 1;
    comm->live = 0;
    clique_unref(comm->cl);
    fk_progress();
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    FK_API;
    if (!comm_ok(comm) || !asyncError)
        return ncclInvalidArgument;
    *asyncError = comm->async;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    FK_API;
    if (!comm_ok(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->cl->nranks;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    FK_API;
    if (!comm_ok(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

static ncclResult_t do_splits(struct split *sp, int n);

/* ncclCommSplit's config: NULL, or one NCCL_CONFIG_INITIALIZER made (NCCL
 * refuses another: "Config initializer must be assigned"); the splits made
 * without splitShare = 1, which keep resources of their own beside the
 * parent's (fakecuda_nccl_unshared_splits). */
static int unshared_splits;

EXPORT int fakecuda_nccl_unshared_splits(void) { return unshared_splits; }

EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config)
{
    FK_API;
    size_t share_end = offsetof(ncclConfig_t, splitShare) + sizeof(int);
    if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, version)))
        return complain(ncclInvalidArgument, "ncclCommSplit", "%s",
                        "a config not made by NCCL_CONFIG_INITIALIZER");
    if (!comm_ok(comm) || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
        return ncclInvalidArgument;
    unshared_splits += !config || config->size < share_end || config->splitShare != 1;
    struct split s = {comm, newcomm, color, key};
    if (!T.group_depth) {
        if (comm->cl->nranks > 1 && !comm->cl->dir)
            return complain(ncclInvalidUsage, "ncclCommSplit", "%s",
                            "splitting a communicator of several ranks outside a group: the call "
                            "waits for every rank, which one thread cannot give (real NCCL hangs)");
        return do_splits(&s, 1);
    }
    T.splits = realloc(T.splits, (size_t)(T.nsplits + 1) * sizeof *T.splits);
    T.splits[T.nsplits++] = s;
    return ncclSuccess;
}

/* Orders members[0..n) by key[], then by old rank. */
static void sort_members(int *members, int n, const int *key)
{
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && key[members[b]] < key[members[b - 1]]; b--) {
            int t = members[b];
            members[b] = members[b - 1], members[b - 1] = t;
        }
}

/* A split of a communicator across processes: this process's rank meets the
 * others in the parent's directory (split<n>.<rank>). */
static ncclResult_t split_remote(const struct split *s)
{
    const char *who = "ncclCommSplit";
    clique *pa = s->comm->cl;
    int me = pa->me, n = pa->nsplits++, R = pa->nranks;
    char path[PATHLEN];
    path_of(path, pa->dir, "split%d.%d", n, me);
    wire w = {.kind = -1, .dev = pa->rank[me].dev, .color = s->color, .key = s->key};
    if (put_file(path, &w, NULL, 0))
        return complain(ncclSystemError, who, "cannot write %s: %s", path, strerror(errno));
    char prefix[32];
    snprintf(prefix, sizeof prefix, "split%d", n);
    int late = await_all(pa->dir, prefix, R);
    if (late >= 0)
        return complain(ncclRemoteError, who, "timed out after %g s on communicator %s "
                        "(FAKECUDA_NCCL_TIMEOUT): rank %d's split %d waits for rank %d's",
                        timeout_s(), pa->dir, me, n, late);
    int *color = calloc((size_t)R, sizeof *color), *key = calloc((size_t)R, sizeof *key);
    int *dev = calloc((size_t)R, sizeof *dev), *members = calloc((size_t)R, sizeof *members);
    ncclResult_t r = ncclSuccess;
    for (int k = 0; k < R && !r; k++) {
        unsigned char *data;
        path_of(path, pa->dir, "split%d.%d", n, k);
        if (get_file(path, &w, &data))
            r = complain(ncclSystemError, who, "cannot read %s", path);
        color[k] = w.color, key[k] = w.key, dev[k] = w.dev;
        free(data);
    }
    int nm = 0, mine = -1;
    for (int k = 0; k < R && !r && s->color != NCCL_SPLIT_NOCOLOR; k++)
        if (color[k] == s->color)
            members[nm++] = k;
    sort_members(members, nm, key);
    *s->out = NULL;
    for (int a = 0; a < nm; a++)
        mine = members[a] == me ? a : mine;
    if (nm) {
        clique *cl = clique_new(nm, NULL);
        for (int a = 0; a < nm; a++)
            cl->rank[a].dev = dev[members[a]];
        cl->rank[mine].live = 1;
        cl->ninit = nm;
        cl->refs = 1;
        if (nm > 1) {
            path_of(path, pa->dir, "s%d.c%d", n, s->color);
            if (mkdir(path, 0700) && errno != EEXIST) {
                r = complain(ncclSystemError, who, "cannot make %s: %s", path, strerror(errno));
                clique_drop(cl);
                cl = NULL;
            } else {
                clique_make_remote(cl, mine, path, pa->w);
            }
        }
        if (cl)
            *s->out = &cl->rank[mine];
    }
    free(color), free(key), free(dev), free(members);
    return r;
}

/* The splits of one group: each parent's ranks all split, grouped by color,
 * ordered by key then old rank. */
static ncclResult_t do_splits(struct split *sp, int n)
{
    for (int i = 0; i < n; i++) {
        if (sp[i].comm && sp[i].comm->cl->dir) {
            ncclResult_t r = split_remote(&sp[i]);
            sp[i].comm = NULL;
            if (r)
                return r;
        }
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
            int members[256], keys[256], nm = 0;
            for (int q = 0; q < parent->nranks && q < 256; q++)
                if (mine[q]->comm && mine[q]->color == color)
                    keys[q] = mine[q]->key, members[nm++] = q;
            sort_members(members, nm, keys);
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

/* The floating types' (-1 for the others). */
static cudaDataType cuda_type(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: return CUDA_R_32F;
    case ncclFloat16: return CUDA_R_16F;
    case ncclBfloat16: return CUDA_R_16BF;
    default: return (cudaDataType)-1;
    }
}

/* 0 for the types not modelled. */
static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclInt32: return 4;
    case ncclInt64: return 8;
    default: return fk_type_size(cuda_type(t));
    }
}

static int is_int(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclInt64;
}

static int64_t load_int(const void *p, size_t i, ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

/* v wrapped to the type, as the GPU's integer arithmetic wraps. */
static void store_int(void *p, size_t i, ncclDataType_t t, int64_t v)
{
    if (t == ncclInt64)
        ((int64_t *)p)[i] = v;
    else if (t == ncclInt32)
        ((uint32_t *)p)[i] = (uint32_t)v;
    else
        ((uint8_t *)p)[i] = (uint8_t)v;
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

/* 0 when the calls op[0..R) of collective seq match; else -1 and why in err. */
static int mismatch(const call *const *op, int R, int64_t seq, char *err, size_t errlen)
{
    const call *c0 = op[0];
    for (int r = 1; r < R; r++) {
        const call *c = op[r];
        if (c->kind != c0->kind || c->count != c0->count || c->type != c0->type ||
            c->op != c0->op || c->root != c0->root) {
            snprintf(err, errlen, "collective %lld: rank 0 calls %s (count %zu), rank %d "
                     "%s (count %zu) with other arguments", (long long)seq, kind_name[c0->kind],
                     c0->count, r, kind_name[c->kind], c->count);
            return -1;
        }
    }
    return 0;
}

/* The result of matching calls op[0..R) (op[r]->send: rank r's data), the
 * same on every rank: a new array of *total elements. */
static unsigned char *reduce(const call *const *op, int R, size_t *total)
{
    const call *c0 = op[0];
    size_t n = c0->count, esz = type_size(c0->type);
    ncclDataType_t t = c0->type;
    cudaDataType ct = cuda_type(t);
    *total = c0->kind == K_ALLREDUCE || c0->kind == K_BROADCAST ? n : n * (size_t)R;
    unsigned char *tmp = calloc(*total + 1, esz);
    if (c0->kind == K_ALLGATHER) {
        for (int r = 0; r < R; r++)
            memcpy(tmp + (size_t)r * n * esz, op[r]->send, n * esz);
    } else if (c0->kind == K_BROADCAST) {
        memcpy(tmp, op[c0->root]->send, n * esz);
    } else {
        for (size_t i = 0; i < *total; i++) {
            if (is_int(t)) {
                int64_t a = load_int(op[0]->send, i, t);
                for (int r = 1; r < R; r++) {
                    int64_t b = load_int(op[r]->send, i, t);
                    a = c0->op == ncclSum ? (int64_t)((uint64_t)a + (uint64_t)b) : a > b ? a : b;
                }
                store_int(tmp, i, t, a);
            } else {
                float a = (float)fk_load(op[0]->send, (int64_t)i, ct);
                for (int r = 1; r < R; r++) {
                    float b = (float)fk_load(op[r]->send, (int64_t)i, ct);
                    a = c0->op == ncclSum ? a + b : a > b ? a : b;
                }
                fk_store(tmp, (int64_t)i, ct, a);
            }
        }
    }
    return tmp;
}

/* Rank r's share of result tmp into its receive buffer. */
static void deliver(const call *c, int r, const unsigned char *tmp, size_t total)
{
    size_t esz = type_size(c->type);
    if (c->kind == K_REDUCESCATTER)
        memcpy(c->recv, tmp + (size_t)r * c->count * esz, c->count * esz);
    else
        memcpy(c->recv, tmp, total * esz);
}

/* Runs collective s, every rank arrived: 0, or a message in s->err. */
static void collective(clique *cl, slot *s)
{
    const call *const *op = (const call *const *)s->op;
    if (mismatch(op, cl->nranks, s->seq, s->err, sizeof s->err))
        return;
    for (int r = 0; r < cl->nranks; r++)
        if (!buffers_ok(op[r], &cl->rank[r], "running an NCCL collective")) {
            snprintf(s->err, sizeof s->err, "rank %d's buffers were freed before the collective ran", r);
            return;
        }
    size_t total;
    unsigned char *tmp = reduce(op, cl->nranks, &total); /* before any buffer is written */
    for (int r = 0; r < cl->nranks; r++)
        deliver(op[r], r, tmp, total);
    free(tmp);
}

/* ---------------------------------------------------------------- parts */

typedef struct {
    struct ncclComm *m;
    CUstream stream;
    call *calls;
    int ncalls;
} part;

/* NCCL's rules for the calls in flight on one device (arrived at the head
 * of their stream, not finished), each broken call's part refused
 * (ncclInvalidUsage, the device failed) as a hang on a GPU would fail it:
 *   - one communicator at a time: "Using multiple NCCL communicators
 *     concurrently" (the user guide) says that calls of several on one
 *     device may deadlock where their kernels cannot all be resident, and
 *     to order them (one stream, or events between);
 *   - one stream per communicator at a time: a communicator's calls are
 *     ordered (every rank issues them in one order), which two streams
 *     of one rank do not keep.
 * 0, or -1 with why in err. */
static int inflight(const part *p, int arrive, char *err, size_t errlen)
{
    int d = p->m->dev & 63;
    struct flying *slots = N.inflight[d];
    for (int i = 0; i < 8; i++) {
        if (!arrive && slots[i].part == p) {
            slots[i] = (struct flying){0};
            return 0;
        }
        if (!arrive || !slots[i].part)
            continue;
        if (slots[i].cl != p->m->cl) {
            snprintf(err, errlen, "device %d: a call of a second communicator (rank %d of %d) "
                     "reached the head of its stream while a call of another (rank %d of %d) "
                     "is in flight on the same device; NCCL's kernels of two communicators "
                     "running at once may deadlock (the user guide's \"Using multiple NCCL "
                     "communicators concurrently\"): order them on one stream", d, p->m->rank,
                     p->m->cl->nranks, slots[i].rank, slots[i].nranks);
            return -1;
        }
        if (slots[i].stream != p->stream) {
            snprintf(err, errlen, "device %d: rank %d of a communicator of %d called on two "
                     "streams at once: its calls are no longer in one order on every rank; "
                     "issue a communicator's calls on one stream", d, p->m->rank,
                     p->m->cl->nranks);
            return -1;
        }
    }
    for (int i = 0; arrive && i < 8; i++)
        if (!slots[i].part) {
            slots[i] = (struct flying){p, p->m->cl, p->stream, p->m->rank, p->m->cl->nranks};
            return 0;
        }
    return 0;
}

/* A part's arrival, per queue entry. */
typedef struct {
    slot **slots;       /* by call: its collective's slot, or NULL */
    int *done;          /* by call (point-to-point; across processes every call) */
    int64_t *seq;       /* across processes, by call: its number on the communicator
                           (collectives) or between its two ranks (the others) */
    double since;       /* across processes, or stalled: when it arrived */
    int joined;         /* it arrived: counted in flight (inflight) */
    int stalled;        /* GNC_FAKECUDA_NCCL_STALL: it never arrives */
    ncclResult_t code;  /* the communicator's asynchronous error when it fails */
    char err[512];
} arrival;

static void part_release(void *ctx)
{
    part *p = ctx;
    if (!N.unloaded) /* after unloading the cliques are gone */
        clique_unref(p->m->cl);
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
    clique *cl = N.unloaded ? NULL : p->m->cl;
    for (int i = 0; cl && !cl->dir && i < p->ncalls; i++) {
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
    free(a->seq);
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

/* ---------------------------------------------------------------- parts across processes */

/* Call c of rank me arrives as number seq: a collective's contribution, a
 * receive's posted marker written.  0, or -1 with why in err. */
static int remote_arrive(const part *p, const call *c, int64_t seq, char *err, size_t errlen)
{
    clique *cl = p->m->cl;
    int me = cl->me;
    char path[PATHLEN];
    wire w = {.kind = c->kind, .type = c->type, .op = c->op, .root = c->root, .count = c->count};
    const void *data = NULL;
    if (c->kind == K_SEND)
        return 0;
    if (c->kind == K_RECV) {
        path_of(path, cl->dir, "p%d.%d.%lld", c->root, me, (long long)seq);
    } else {
        size_t sb, rb;
        extents(c, cl->nranks, &sb, &rb);
        if (c->kind != K_BROADCAST || me == c->root) {
            if (fk_check_range(p->m->dev, c->send, sb, "running an NCCL collective", "send buffer")) {
                snprintf(err, errlen, "rank %d's send buffer was freed before the collective ran", me);
                return -1;
            }
            w.bytes = sb, data = c->send;
        }
        path_of(path, cl->dir, "c%lld.%d", (long long)seq, me);
    }
    if (put_file(path, &w, data, 0)) {
        snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Collective c, number seq: 1 when done (or failed, why in err), 0 while rank
 * *late's contribution is not there. */
static int remote_collective(const part *p, const call *c, int64_t seq, int *late, char *err,
                             size_t errlen)
{
    clique *cl = p->m->cl;
    int R = cl->nranks, me = cl->me;
    char path[PATHLEN], prefix[64];
    snprintf(prefix, sizeof prefix, "c%lld", (long long)seq);
    if ((*late = missing(cl->dir, prefix, R)) >= 0)
        return 0;
    size_t nr = R > 0 ? (size_t)R : 1;
    call *ops = calloc(nr, sizeof *ops);
    const call **op = calloc(nr, sizeof *op);
    unsigned char **data = calloc(nr, sizeof *data);
    uint64_t *bytes = calloc(nr, sizeof *bytes);
    for (int k = 0; k < R && !err[0]; k++) {
        wire w = {0};
        path_of(path, cl->dir, "c%lld.%d", (long long)seq, k);
        if (get_file(path, &w, &data[k]) || w.kind < K_ALLREDUCE || w.kind > K_BROADCAST)
            snprintf(err, errlen, "cannot read %.300s", path);
        ops[k] = (call){w.kind, data[k], NULL, (size_t)w.count, w.type, w.op, w.root};
        op[k] = &ops[k];
        bytes[k] = w.bytes;
    }
    ops[me].recv = c->recv;
    size_t sb, rb;
    extents(c, R, &sb, &rb);
    if (!err[0] && !mismatch(op, R, seq, err, errlen)) {
        for (int k = 0; k < R && !err[0]; k++)
            if (bytes[k] != (c->kind != K_BROADCAST || k == c->root ? sb : 0))
                snprintf(err, errlen, "collective %lld: rank %d's contribution in %.300s has %llu bytes",
                         (long long)seq, k, cl->dir, (unsigned long long)bytes[k]);
        if (!err[0] && fk_check_range(p->m->dev, c->recv, rb, "running an NCCL collective", "receive buffer"))
            snprintf(err, errlen, "rank %d's receive buffer was freed before the collective ran", me);
        if (!err[0]) {
            size_t total;
            unsigned char *tmp = reduce(op, R, &total);
            deliver(&ops[me], me, tmp, total);
            free(tmp);
        }
    } else if (err[0] && strlen(err) + 2 < errlen) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (communicator %s)", cl->dir);
    }
    for (int k = 0; k < R; k++)
        free(data[k]);
    free(data), free(ops), free(op), free(bytes);
    /* read: the last rank to say so removes the collective's files */
    wire w = {0};
    path_of(path, cl->dir, "r%lld.%d", (long long)seq, me);
    put_file(path, &w, NULL, 0);
    snprintf(prefix, sizeof prefix, "r%lld", (long long)seq);
    if (missing(cl->dir, prefix, R) < 0)
        for (int k = 0; k < R; k++) {
            path_of(path, cl->dir, "c%lld.%d", (long long)seq, k);
            unlink(path);
            path_of(path, cl->dir, "r%lld.%d", (long long)seq, k);
            unlink(path);
        }
    return 1;
}

/* Send c, number seq to its peer: 0 until the peer's receive is posted, then
 * 1 with the message written (or why in err). */
static int remote_send(const part *p, const call *c, int64_t seq, char *err, size_t errlen)
{
    clique *cl = p->m->cl;
    int me = cl->me, peer = c->root;
    char posted[PATHLEN], path[PATHLEN];
    path_of(posted, cl->dir, "p%d.%d.%lld", me, peer, (long long)seq);
    if (!present(posted))
        return 0;
    wire w = {0};
    unsigned char *none = NULL;
    size_t bytes = c->count * type_size(c->type);
    wire m = {.kind = K_SEND, .type = c->type, .root = me, .count = c->count, .bytes = bytes};
    path_of(path, cl->dir, "m%d.%d.%lld", me, peer, (long long)seq);
    if (get_file(posted, &w, &none))
        snprintf(err, errlen, "cannot read %.300s", posted);
    else if (fk_check_range(p->m->dev, c->send, bytes, "running ncclSend", "send buffer"))
        snprintf(err, errlen, "rank %d's send buffer was freed before ncclSend ran", me);
    else if (put_file(path, &m, c->send, 0))
        snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno));
    else if (w.count != c->count || w.type != (int32_t)c->type) /* sent: the receiver fails too */
        snprintf(err, errlen, "rank %d sends %zu elements of type %d to rank %d, which receives "
                 "%llu of type %d (communicator %s)", me, c->count, (int)c->type, peer,
                 (unsigned long long)w.count, (int)w.type, cl->dir);
    free(none);
    unlink(posted);
    return 1;
}

/* Receive c, number seq from its peer: 0 until the message is there, then 1
 * with the data copied (or why in err). */
static int remote_recv(const part *p, const call *c, int64_t seq, char *err, size_t errlen)
{
    clique *cl = p->m->cl;
    int me = cl->me, peer = c->root;
    char path[PATHLEN];
    path_of(path, cl->dir, "m%d.%d.%lld", peer, me, (long long)seq);
    if (!present(path))
        return 0;
    wire w = {0};
    unsigned char *data = NULL;
    size_t bytes = c->count * type_size(c->type);
    if (get_file(path, &w, &data))
        snprintf(err, errlen, "cannot read %.300s", path);
    else if (w.count != c->count || w.type != (int32_t)c->type || w.bytes != bytes)
        snprintf(err, errlen, "rank %d sends %llu elements of type %d to rank %d, which receives "
                 "%zu of type %d (communicator %s)", peer, (unsigned long long)w.count, (int)w.type,
                 me, c->count, (int)c->type, cl->dir);
    else if (fk_check_range(p->m->dev, c->recv, bytes, "running ncclRecv", "receive buffer"))
        snprintf(err, errlen, "rank %d's receive buffer was freed before ncclRecv ran", me);
    else if (bytes)
        memcpy(c->recv, data, bytes);
    free(data);
    unlink(path);
    return 1;
}

/* A part of a communicator across processes: arrives once, then polls;
 * FK_WAIT_REMOTE while a call waits on another process, until the timeout. */
static int remote_ready(part *p, arrival *a)
{
    clique *cl = p->m->cl;
    if (!a->seq) {
        a->seq = calloc((size_t)p->ncalls + 1, sizeof *a->seq);
        a->since = now();
        for (int i = 0; i < p->ncalls && !a->err[0]; i++) {
            const call *c = &p->calls[i];
            a->seq[i] = c->kind == K_SEND   ? cl->sent[c->root]++
                        : c->kind == K_RECV ? cl->received[c->root]++
                                            : cl->next_coll[cl->me]++;
            remote_arrive(p, c, a->seq[i], a->err, sizeof a->err);
        }
    }
    int wait = -1, late = -1;
    for (int i = 0; i < p->ncalls && !a->err[0]; i++) {
        const call *c = &p->calls[i];
        int k = c->root;
        if (a->done[i])
            continue;
        if (c->kind == K_SEND)
            a->done[i] = remote_send(p, c, a->seq[i], a->err, sizeof a->err);
        else if (c->kind == K_RECV)
            a->done[i] = remote_recv(p, c, a->seq[i], a->err, sizeof a->err);
        else
            a->done[i] = remote_collective(p, c, a->seq[i], &k, a->err, sizeof a->err);
        if (!a->done[i] && wait < 0)
            wait = i, late = k;
    }
    if (a->err[0] || wait < 0)
        return 1;
    double limit = timeout_s();
    if (now() - a->since <= limit)
        return FK_WAIT_REMOTE;
    const call *c = &p->calls[wait];
    const char *what = c->kind == K_SEND   ? "message %lld to rank %d) waits for that rank's "
                                             "ncclRecv to reach the head of its stream"
                       : c->kind == K_RECV ? "message %lld from rank %d) waits for that rank's ncclSend"
                                           : "collective %lld) waits for rank %d's";
    a->code = ncclRemoteError;
    int n = snprintf(a->err, sizeof a->err, "timed out after %g s (FAKECUDA_NCCL_TIMEOUT) on "
                     "communicator %s: rank %d's %s (", limit, cl->dir, cl->me, kind_name[c->kind]);
    if (n > 0 && n < (int)sizeof a->err)
        snprintf(a->err + n, sizeof a->err - (size_t)n, what, (long long)a->seq[wait], late);
    return 1;
}

/* ---------------------------------------------------------------- parts, continued */

/* GNC_FAKECUDA_NCCL_STALL: the device whose NCCL calls hang, or -1. */
static int stalled_device(void) { return device_of_env("GNC_FAKECUDA_NCCL_STALL"); }

static int part_ready(void *ctx, void **state)
{
    part *p = ctx;
    clique *cl = p->m->cl;
    int me = p->m->rank;
    arrival *a = *state;
    if (p->m->aborted)
        return 1;
    if (!a) {
        a = *state = calloc(1, sizeof *a);
        a->slots = calloc((size_t)p->ncalls + 1, sizeof *a->slots);
        a->done = calloc((size_t)p->ncalls + 1, sizeof *a->done);
        a->stalled = p->m->dev == stalled_device();
        a->since = now();
    }
    if (a->stalled) {
        if (a->err[0] || now() - a->since <= timeout_s())
            return a->err[0] ? 1 : FK_WAIT_REMOTE;
        a->code = ncclRemoteError;
        snprintf(a->err, sizeof a->err, "stalled by GNC_FAKECUDA_NCCL_STALL=%d for %g s "
                 "(FAKECUDA_NCCL_TIMEOUT)", p->m->dev, timeout_s());
        return 1;
    }
    if (!a->joined) { /* arrives: joins its collectives, offers its sends and receives */
        if (inflight(p, 1, a->err, sizeof a->err)) {
            a->code = ncclInvalidUsage;
            return 1;
        }
        a->joined = 1;
        for (int i = 0; i < p->ncalls && !cl->dir; i++) {
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
    if (cl->dir)
        return remote_ready(p, a);
    for (int i = 0; i < p->ncalls; i++)
        if (a->slots[i] ? !a->slots[i]->done : !a->done[i])
            return 0;
    return 1;
}

static int part_run(void *ctx, void **state, char *why, size_t whylen)
{
    part *p = ctx;
    arrival *a = *state;
    if (a && a->joined)
        inflight(p, 0, NULL, 0);
    if (p->m->aborted)
        return 0;
    const char *err = a->err[0] ? a->err : NULL;
    for (int i = 0; i < p->ncalls && !err; i++)
        if (a->slots[i] && a->slots[i]->err[0])
            err = a->slots[i]->err;
    if (err) {
        if (!p->m->async)
            p->m->async = a->code ? a->code : ncclInvalidUsage;
        snprintf(why, whylen, "%s", err);
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return 0;
}

/* The rules of NCCL under CUDA graph capture (the user guide's "Using NCCL
 * with CUDA Graphs"), where the stream is capturing:
 *   - a communicator's first collective, or first send or receive with a
 *     peer, sets up connections (NCCL_RUNTIME_CONNECT, the default since
 *     2.22: buffers allocated, peers met), which a global or thread-local
 *     capture forbids; refused, the capture invalidated.  Run one call
 *     outside the capture first.
 *   - "using multiple GPUs per process with CUDA graph capture may result in
 *     deadlocks ... likely with single-threaded applications": a capture that
 *     would hold NCCL calls of two GPUs is refused.
 * 0, or the refusal after its message. */
static ncclResult_t capture_rules(struct ncclComm *m, cudaStream_t stream, const call *calls,
                                  int n)
{
    const char *who = kind_name[calls[0].kind];
    uintptr_t cap = fk_stream_capture((CUstream)stream);
    if (!cap)
        return ncclSuccess;
    for (int i = 0; i < n; i++) {
        int p2p = calls[i].kind == K_SEND || calls[i].kind == K_RECV;
        if (p2p ? !m->p2p_used[calls[i].root] : !m->coll_used) {
            fk_capture_refuse((CUstream)stream);
            char what[64];
            if (p2p)
                snprintf(what, sizeof what, "send or receive with rank %d", calls[i].root);
            else
                snprintf(what, sizeof what, "collective");
            return complain(ncclInvalidUsage, who, "the communicator's first %s on rank %d is "
                            "inside a stream capture: its connections would be set up there "
                            "(NCCL_RUNTIME_CONNECT); run one outside the capture first",
                            what, m->rank);
        }
    }
    int first = fk_capture_nccl((CUstream)stream, m->dev);
    if (first != m->dev) {
        fk_capture_refuse((CUstream)stream);
        return complain(ncclInvalidUsage, who, "one capture would hold NCCL calls of GPUs %d "
                        "and %d: NCCL warns that several GPUs per process under graph capture "
                        "may deadlock (a thread of its own for each GPU, capturing in "
                        "thread-local mode, or one GPU per process, or no capture)", first,
                        m->dev);
    }
    return ncclSuccess;
}

static ncclResult_t enqueue(struct ncclComm *m, cudaStream_t stream, const call *calls, int n)
{
    ncclResult_t rr = capture_rules(m, stream, calls, n);
    if (rr)
        return rr;
    for (int i = 0; i < n; i++) {
        if (calls[i].kind == K_SEND || calls[i].kind == K_RECV)
            m->p2p_used[calls[i].root] = 1;
        else
            m->coll_used = 1;
    }
    part *p = calloc(1, sizeof *p);
    p->m = m;
    p->stream = (CUstream)stream;
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
    if (!type_size(c.type) || (c.op != ncclSum && c.op != ncclMax))
        return complain(ncclInvalidArgument, who, "%s", "a type or reduction not modelled");
    if ((c.kind == K_BROADCAST || c.kind == K_SEND || c.kind == K_RECV) &&
        (c.root < 0 || c.root >= comm->cl->nranks))
        return complain(ncclInvalidArgument, who, "%s", "root or peer out of range");
    if (fk_stream_device((CUstream)stream) != comm->dev && stream)
        return complain(ncclInvalidUsage, who, "%s", "the stream is not of the communicator's device");
    if (!buffers_ok(&c, comm, who))
        return ncclInvalidArgument;
    if (T.group_depth) {
        T.grouped = realloc(T.grouped, (size_t)(T.ngrouped + 1) * sizeof *T.grouped);
        T.grouped[T.ngrouped++] = (struct grouped){comm, stream, c};
        return ncclSuccess;
    }
    clique *cl = comm->cl;
    for (int q = 0; q < cl->nranks; q++)
        if (q != comm->rank && cl->caller[q] == this_thread()) {
            fprintf(stderr, "fakecuda: %s: called for rank %d of a communicator after rank %d, "
                    "by one thread, both outside ncclGroupStart/ncclGroupEnd: with one thread "
                    "driving several ranks real NCCL hangs here (each call waits for its "
                    "peers); put the calls of all ranks in one group, or drive each rank from "
                    "a thread of its own\n", who, comm->rank, q);
            return ncclInvalidUsage;
        }
    cl->caller[comm->rank] = this_thread();
    return enqueue(comm, stream, &c, 1);
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0});
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0});
}

EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0});
}

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root});
}

EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_SEND, sendbuff, NULL, count, datatype, ncclSum, peer});
}

EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    FK_API;
    return issue(comm, stream, (call){K_RECV, NULL, recvbuff, count, datatype, ncclSum, peer});
}

EXPORT ncclResult_t ncclGroupStart(void)
{
    FK_API;
    T.group_depth++;
    return ncclSuccess;
}

/* The inits of the group: each clique they touch complete and without
 * duplicates, or with one rank here and the others in other processes.  A
 * clique that fails goes. */
static ncclResult_t finish_inits(void)
{
    ncclResult_t r = ncclSuccess;
    clique **cls = calloc((size_t)T.ninits + 1, sizeof *cls);
    int *first = calloc((size_t)T.ninits + 1, sizeof *first), n = 0;
    for (int i = 0; i < T.ninits; i++) { /* the cliques, before any goes */
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= cls[j] == T.inits[i].comm->cl;
        if (!seen)
            first[n] = T.inits[i].comm->rank, cls[n++] = T.inits[i].comm->cl;
    }
    for (int i = 0; i < n; i++) {
        clique *cl = cls[i];
        ncclResult_t q;
        if (cl->ninit == cl->nranks)
            q = check_duplicates(cl, "ncclCommInitRank");
        else if (cl->ninit == 1)
            q = join(cl, first[i], &cl->id);
        else
            q = complain(ncclInvalidUsage, "ncclGroupEnd", "ncclCommInitRank: %d of the %d ranks of "
                         "a communicator initialized in this process, the others elsewhere: a "
                         "process holding several but not all ranks is not modelled",
                         cl->ninit, cl->nranks);
        if (q) {
            clique_drop(cl);
            r = r ? r : q;
        }
    }
    free(cls);
    free(first);
    free(T.inits);
    T.inits = NULL;
    T.ninits = 0;
    return r;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
    FK_API;
    if (T.group_depth <= 0)
        return complain(ncclInvalidUsage, "ncclGroupEnd", "%s", "without ncclGroupStart");
    if (--T.group_depth > 0)
        return ncclSuccess;
    ncclResult_t r = finish_inits();
    if (!r && T.nsplits)
        r = do_splits(T.splits, T.nsplits);
    free(T.splits);
    T.splits = NULL;
    T.nsplits = 0;
    /* one part per (communicator, stream), its calls in issue order */
    char *taken = calloc((size_t)T.ngrouped + 1, 1);
    call *calls = calloc((size_t)T.ngrouped + 1, sizeof *calls);
    for (int i = 0; i < T.ngrouped && !r; i++) {
        if (taken[i])
            continue;
        int n = 0;
        for (int j = i; j < T.ngrouped; j++)
            if (!taken[j] && T.grouped[j].comm == T.grouped[i].comm &&
                T.grouped[j].stream == T.grouped[i].stream) {
                calls[n++] = T.grouped[j].c;
                taken[j] = 1;
            }
        if (!comm_ok(T.grouped[i].comm))
            r = ncclInvalidArgument;
        else
            r = enqueue(T.grouped[i].comm, T.grouped[i].stream, calls, n);
    }
    free(taken);
    free(calls);
    free(T.grouped);
    T.grouped = NULL;
    T.ngrouped = 0;
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
    free(T.grouped);
    free(T.inits);
    free(T.splits);
    memset(&N, 0, sizeof N);
    N.unloaded = 1;
}
