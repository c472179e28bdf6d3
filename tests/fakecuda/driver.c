/* The fake CUDA driver (libcuda.so.1) and the core the other fakes call
 * (fake.h).  Device memory is host memory; every stream is a FIFO queue of
 * tasks that run on the host.  What it models, strictly, so that an
 * executor's mistakes fail here as they would on a GPU:
 *
 *   - devices (GNC_FAKECUDA_GPUS, default 2; sm_90), primary contexts with a
 *     reference count, one current context per thread; a stream, module or
 *     allocation belongs to the device current at its creation and using it
 *     under another context fails;
 *   - allocations: a table per device; copies and memsets must lie inside one
 *     live allocation (checked when issued and again when run: a graph may
 *     replay after a free); cuMemGetInfo's free memory is GNC_FAKECUDA_FREE_MIB
 *     (default 80000) less what is allocated;
 *   - asynchrony: a task runs when it is at the head of its queue and its
 *     dependencies are met (events, NCCL rendezvous).  By default what can run
 *     runs after every call, streams visited in creation order;
 *     GNC_FAKECUDA_SCHEDULE=lazy runs work only in synchronizing calls and
 *     queries (cuStreamQuery, cuEventQuery) and visits streams in reverse,
 *     which exposes missing cross-stream waits.  A synchronizing call that
 *     cannot finish is a deadlock: the waits are printed and
 *     CUDA_ERROR_LAUNCH_FAILED returned (never a hang), unless a task waits
 *     on another process (ready() says FK_WAIT_REMOTE): then the call polls
 *     until that task runs or gives up on its own timeout.  A query answers
 *     CUDA_ERROR_NOT_READY while such a task waits, and reports a deadlock
 *     as a synchronizing call does (where a GPU would answer not ready for
 *     ever);
 *   - failures while running (a kernel's message, a range outside memory) are
 *     sticky: every later call on that device returns the error;
 *   - kernels: modules are images (ELF cubin or PTX text) that must contain
 *     the function's name; the function runs the host emulation the test
 *     registered under that name (fakecuda_register); a launch of one with
 *     none fails, unless GNC_FAKECUDA_UNEMULATED=skip (for timing a program
 *     whose results nobody reads: gnc compile --conv auto --autotune);
 *   - time: each device has a clock that a kernel advances by
 *     GNC_FAKECUDA_KERNEL_MS and a library call by GNC_FAKECUDA_LIBRARY_MS
 *     (default 0.001 each; other work takes no time) when it runs (an
 *     implicit-GEMM kernel, named *igemm*, by GNC_FAKECUDA_IGEMM_MS, a cuDNN
 *     call on channels-last copies by GNC_FAKECUDA_NHWC_MS: by default as
 *     the others), and
 *     cuEventElapsedTime is the clock's advance between the two events: a
 *     model that makes timing-based choices deterministic and steerable;
 *   - stream capture: work on a capturing stream is recorded with its
 *     dependencies; other streams join by waiting on an event recorded in the
 *     capture and must be joined back before cuStreamEndCapture
 *     (CUDA_ERROR_STREAM_CAPTURE_UNJOINED); synchronizing or host copies
 *     during capture invalidate it, and so do cuMemAlloc, cuMemFree and
 *     synchronizing any stream or event while a global or thread-local
 *     capture of this thread is in progress (CUDA's "potentially unsafe"
 *     calls).  A launched graph runs each node on a
 *     queue of its own captured stream, after the launch stream's earlier
 *     work and before its later work.  GNC_FAKECUDA_GRAPHS=invalidate makes
 *     every capture fail at its first node, =noinstantiate every
 *     cuGraphInstantiate: faults to test the way back to eager launches.
 *
 * Kernel arguments are copied at cuLaunchKernel, their sizes read from the
 * image (a cubin's EIATTR_KPARAM_INFO records, PTX's .entry); where the image
 * does not say, they are read when the kernel runs.
 *
 * Host copies: HtoD from pageable memory first waits for the stream's
 * earlier work, then reads the host buffer, before it returns (as the driver
 * documents); from page-locked memory (cuMemHostAlloc) it is queued and reads
 * the buffer when it runs; DtoH writes it when run.  Not modelled: no unified
 * addressing across devices (a pointer belongs to the device that allocated
 * it); threads are served one call at a time (fake.h); the legacy default stream (NULL) is a stream of its
 * own per device, without implicit synchronization with other streams. */
#pragma GCC visibility push(default)
#include "fake.h"
#pragma GCC visibility pop

#include <codegen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GPUS 16

/* ---------------------------------------------------------------- state */

typedef struct {
    uintptr_t base;
    size_t bytes;
} alloc;

struct CUctx_st {
    int dev;
    int refs;           /* primary context retains; 0: inactive */
};

typedef struct {
    struct CUctx_st ctx;
    alloc *allocs;
    int nallocs, cap;
    size_t allocated;
    CUresult sticky;    /* the first failure while running; CUDA_SUCCESS */
    CUstream null_stream;
    double clock;       /* milliseconds of the time model (above) */
    unsigned char peer[MAX_GPUS];   /* peer access enabled from this context to device i's */
} device;

struct fk_task {
    int refs;
    char what[96];
    fk_run_fn run;
    fk_ready_fn ready;
    void *ctx;
    void (*release)(void *);
    void (*free_state)(void *ctx, void *state);
    double ms;          /* what running it advances its device's clock by */
};

typedef struct entry {
    struct entry *next;
    fk_task *task;
    void *state;
} entry;

typedef struct capture capture;

struct CUstream_st {
    int dev;
    int id;             /* creation order */
    int live;           /* 0: destroyed, freed once its queue drains */
    int internal;       /* a graph exec's stream: no context check */
    entry *head, *tail;
    capture *cap;       /* the capture it takes part in, or NULL */
    int *frontier;      /* capture: the nodes the next node depends on */
    int nfrontier;
};

struct CUevent_st {
    int dev;
    int timing;         /* created without CU_EVENT_DISABLE_TIMING */
    int refs;           /* the user's (1 until destroyed) and pending tasks' */
    int64_t recorded, done; /* record points issued and reached */
    double at;          /* the device's clock when the last one was reached */
    capture *cap;       /* recorded in this capture, at cap_frontier */
    int *cap_frontier;
    int ncap_frontier;
};

typedef struct {
    fk_task *task;
    int slot;           /* index of its captured stream in the graph */
    int *deps;
    int ndeps;
} node;

struct capture {
    CUstream origin;
    node *nodes;
    int n, cap;
    CUstream *streams;  /* slot -> stream, the origin first */
    int nstreams;
    CUresult invalid;   /* why it was invalidated, or CUDA_SUCCESS */
    int strict;         /* not CU_STREAM_CAPTURE_MODE_RELAXED */
    const void *thread; /* the thread that began it (&thread_tag) */
    int nccl_dev;       /* the GPU of the NCCL calls it holds (fk_capture_nccl), or -1 */
};

struct CUgraph_st {
    node *nodes;
    int n;
    int *slot_dev;      /* by slot: the device of the captured stream */
    int nslots;
};

struct CUgraphExec_st {
    struct CUgraph_st g;
    CUstream *streams;  /* by slot: the graph's own queues */
};

struct CUmod_st {
    int dev;
    unsigned char *image;
    size_t bytes;
};

#define MAX_PARAMS 256

struct CUfunc_st {
    CUmodule mod;
    fk_kernel entry;
    char name[256];
    int nparams;        /* from the image; -1: unknown, arguments read when run */
    int size[MAX_PARAMS];
};

typedef struct {
    char *name;
    fk_kernel entry;
} kernel_reg;

static struct {
    int initialized;
    int ngpus;
    size_t free_bytes;
    int lazy;
    device gpu[MAX_GPUS];
    CUstream *streams;  /* every stream ever created and not yet freed, in creation order */
    int nstreams, cstreams, next_id;
    kernel_reg *kernels;
    int nkernels;
    CUmodule *modules;  /* live modules, to validate handles */
    int nmodules;
    CUfunction *functions;
    int nfunctions;
    capture **captures; /* those in progress */
    int ncaptures;
    int remote_waits;   /* heads that waited on another process since run_until looked */
    double cost[FK_NCOSTS];   /* ms of a task of each fk_cost */
    int skip_unemulated;
    long staged_peer_copies;    /* cuMemcpyPeerAsync between GPUs without peer access */
    alloc *pinned;              /* cuMemHostAlloc's */
    int npinned;
} F;

static FK_TLS CUcontext current;
static FK_TLS char thread_tag; /* its address tells the threads apart */

/* fake.h's lock, taken again by a thread that holds it (entry points call
 * each other: the fakes of the libraries call the driver's) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FK_TLS int held; /* this thread's entries into the lock */

void fk_enter(void)
{
    if (held++ == 0)
        pthread_mutex_lock(&lock);
}

void fk_leave(int *scope)
{
    (void)scope;
    if (--held == 0)
        pthread_mutex_unlock(&lock);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fakecuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        say("out of host memory");
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        say("out of host memory");
        abort();
    }
    return p;
}

static int *int_dup(const int *a, int n)
{
    int *b = xcalloc((size_t)n + 1, sizeof *b);
    if (n)
        memcpy(b, a, (size_t)n * sizeof *b);
    return b;
}

/* The device of the current context, or -1. */
static int cur_dev(void)
{
    if (!current || current->refs <= 0)
        return -1;
    return current->dev;
}

/* ---------------------------------------------------------------- tasks */

fk_task *fk_task_new(const char *what, fk_run_fn run, fk_ready_fn ready, void *ctx,
                     void (*release)(void *ctx), void (*free_state)(void *ctx, void *state))
{
    fk_task *t = xcalloc(1, sizeof *t);
    t->refs = 1;
    snprintf(t->what, sizeof t->what, "%s", what);
    t->run = run, t->ready = ready, t->ctx = ctx, t->release = release;
    t->free_state = free_state;
    return t;
}

void fk_task_cost(fk_task *t, fk_cost c)
{
    t->ms = F.cost[c];
}

void fk_task_unref(fk_task *t)
{
    if (t && --t->refs == 0) {
        if (t->release)
            t->release(t->ctx);
        free(t);
    }
}

static void entry_free(entry *e)
{
    if (e->state && e->task->free_state)
        e->task->free_state(e->task->ctx, e->state);
    fk_task_unref(e->task);
    free(e);
}

/* ---------------------------------------------------------------- memory */

int fk_check_range(int dev, const void *p, size_t bytes, const char *who, const char *what)
{
    if (dev < 0 || dev >= F.ngpus) {
        say("%s: %s: no such device %d", who, what, dev);
        return -1;
    }
    uintptr_t a = (uintptr_t)p;
    const device *D = &F.gpu[dev];
    for (int i = 0; i < D->nallocs; i++) {
        const alloc *m = &D->allocs[i];
        if (a >= m->base && a <= m->base + m->bytes) {
            if (bytes <= m->base + m->bytes - a)
                return 0;
            say("%s: %s: %zu bytes at 0x%llx run %zu bytes past the end of device %d's "
                "allocation of %zu bytes at 0x%llx", who, what, bytes, (unsigned long long)a,
                (size_t)(a + bytes - m->base - m->bytes), dev, m->bytes,
                (unsigned long long)m->base);
            return -1;
        }
    }
    for (int d = 0; d < F.ngpus; d++)
        for (int i = 0; d != dev && i < F.gpu[d].nallocs; i++)
            if (a >= F.gpu[d].allocs[i].base && a < F.gpu[d].allocs[i].base + F.gpu[d].allocs[i].bytes) {
                say("%s: %s: 0x%llx is memory of device %d, used on device %d", who, what,
                    (unsigned long long)a, d, dev);
                return -1;
            }
    say("%s: %s: 0x%llx (%zu bytes) is not in any live allocation of device %d", who, what,
        (unsigned long long)a, bytes, dev);
    return -1;
}

static void free_allocs(int dev)
{
    device *D = &F.gpu[dev];
    for (int i = 0; i < D->nallocs; i++)
        free((void *)D->allocs[i].base);
    free(D->allocs);
    D->allocs = NULL;
    D->nallocs = D->cap = 0;
    D->allocated = 0;
}

double fk_load(const void *base, int64_t i, cudaDataType t)
{
    switch (t) {
    case CUDA_R_32F: return ((const float *)base)[i];
    case CUDA_R_16F: return cg_half_to_f32(((const unsigned short *)base)[i], IR_F16);
    case CUDA_R_16BF: return cg_half_to_f32(((const unsigned short *)base)[i], IR_BF16);
    case CUDA_R_32I: return ((const int32_t *)base)[i];
    case CUDA_R_64I: return (double)((const int64_t *)base)[i];
    default: return 0;
    }
}

void fk_store(void *base, int64_t i, cudaDataType t, double v)
{
    switch (t) {
    case CUDA_R_32F: ((float *)base)[i] = (float)v; break;
    case CUDA_R_16F: ((unsigned short *)base)[i] = cg_f32_to_half((float)v, IR_F16); break;
    case CUDA_R_16BF: ((unsigned short *)base)[i] = cg_f32_to_half((float)v, IR_BF16); break;
    case CUDA_R_32I: ((int32_t *)base)[i] = (int32_t)v; break;
    case CUDA_R_64I: ((int64_t *)base)[i] = (int64_t)v; break;
    default: break;
    }
}

size_t fk_type_size(cudaDataType t)
{
    switch (t) {
    case CUDA_R_32F: case CUDA_R_32I: return 4;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_64I: return 8;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- scheduling */

static int stream_index(CUstream s)
{
    for (int i = 0; i < F.nstreams; i++)
        if (F.streams[i] == s)
            return i;
    return -1;
}

static void stream_unlink(CUstream s)
{
    int i = stream_index(s);
    if (i < 0)
        return;
    memmove(&F.streams[i], &F.streams[i + 1], (size_t)(F.nstreams - i - 1) * sizeof *F.streams);
    F.nstreams--;
    free(s->frontier);
    free(s);
}

/* Runs the head of s when it can; 1 when something was done. */
static int step(CUstream s)
{
    entry *e = s->head;
    if (!e)
        return 0;
    device *D = &F.gpu[s->dev];
    if (D->sticky == CUDA_SUCCESS) {
        int ready = e->task->ready ? e->task->ready(e->task->ctx, &e->state) : 1;
        F.remote_waits += ready == FK_WAIT_REMOTE;
        if (!ready || ready == FK_WAIT_REMOTE)
            return 0;
        char why[512] = "";
        int r = e->task->run ? e->task->run(e->task->ctx, &e->state, why, sizeof why) : 0;
        D->clock += e->task->ms;
        if (r) {
            say("device %d: %s failed: %s", s->dev, e->task->what, why);
            D->sticky = (CUresult)r;
        }
    }
    /* after a failure the device runs nothing more: its queued work is dropped */
    s->head = e->next;
    if (!s->head)
        s->tail = NULL;
    entry_free(e);
    return 1;
}

/* Runs until nothing more can run; 1 when something ran. */
static int drain(void)
{
    int any = 0;
    for (int progress = 1; progress; any |= progress) {
        progress = 0;
        for (int k = 0; k < F.nstreams; k++) {
            CUstream s = F.streams[F.lazy ? F.nstreams - 1 - k : k];
            while (step(s))
                progress = 1;
            if (!s->live && !s->head) {
                stream_unlink(s);
                progress = 1;
                break; /* the list changed */
            }
        }
    }
    return any;
}

void fk_progress(void)
{
    if (!F.lazy)
        drain();
}

static void report_deadlock(const char *in)
{
    say("deadlock in %s: work remains that can never run:", in);
    for (int i = 0; i < F.nstreams; i++) {
        CUstream s = F.streams[i];
        if (!s->head)
            continue;
        int n = 0;
        for (entry *e = s->head; e; e = e->next)
            n++;
        fprintf(stderr, "fakecuda:   stream %d (device %d%s): %d queued, waiting at '%s'\n", s->id,
                s->dev, s->internal ? ", a graph's" : "", n, s->head->task->what);
    }
}

/* Runs until done(arg) or nothing can run: CUDA_SUCCESS, the sticky error of
 * device dev (-1: any), or CUDA_ERROR_LAUNCH_FAILED on a deadlock.  While a
 * head waits on another process it polls, sleeping between visits (50 us
 * after progress, doubling to 2 ms without); such a task gives up on its own
 * timeout, so this ends. */
static CUresult run_until(int (*done)(void *), void *arg, int dev, const char *in)
{
    for (long nap = 50000;; nap = nap < 2000000 ? 2 * nap : nap) {
        F.remote_waits = 0;
        if (drain())
            nap = 50000;
        for (int d = 0; d < F.ngpus; d++)
            if ((dev < 0 || d == dev) && F.gpu[d].sticky)
                return F.gpu[d].sticky;
        if (done(arg))
            return CUDA_SUCCESS;
        if (!F.remote_waits)
            break;
        nanosleep(&(struct timespec){0, nap}, NULL);
    }
    report_deadlock(in);
    return CUDA_ERROR_LAUNCH_FAILED;
}

/* The non-blocking form, for cuStreamQuery and cuEventQuery: runs what can
 * run (whatever the schedule: a host that polls is where queued work
 * progresses here), then CUDA_SUCCESS when done(arg), the sticky error of
 * device dev, CUDA_ERROR_NOT_READY while a head waits on another process (or
 * on a stalled NCCL call, GNC_FAKECUDA_NCCL_STALL), or a deadlock
 * (CUDA_ERROR_LAUNCH_FAILED, reported as run_until reports one) when nothing
 * more can ever run: on a GPU the query would answer not ready for ever. */
static CUresult query(int (*done)(void *), void *arg, int dev, const char *in)
{
    F.remote_waits = 0;
    drain();
    if (F.gpu[dev].sticky)
        return F.gpu[dev].sticky;
    if (done(arg))
        return CUDA_SUCCESS;
    if (F.remote_waits)
        return CUDA_ERROR_NOT_READY;
    report_deadlock(in);
    return CUDA_ERROR_LAUNCH_FAILED;
}

static int stream_idle(void *s) { return ((CUstream)s)->head == NULL; }

static int device_idle(void *d)
{
    int dev = *(int *)d;
    for (int i = 0; i < F.nstreams; i++)
        if (F.streams[i]->dev == dev && F.streams[i]->head)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- capture */

static void capture_invalidate(capture *c, CUresult why)
{
    if (c && c->invalid == CUDA_SUCCESS)
        c->invalid = why;
}

static int capture_slot(capture *c, CUstream s)
{
    for (int i = 0; i < c->nstreams; i++)
        if (c->streams[i] == s)
            return i;
    c->streams = xrealloc(c->streams, (size_t)(c->nstreams + 1) * sizeof *c->streams);
    c->streams[c->nstreams] = s;
    return c->nstreams++;
}

static void set_frontier(CUstream s, const int *f, int n)
{
    free(s->frontier);
    s->frontier = int_dup(f, n);
    s->nfrontier = n;
}

static void capture_add(CUstream s, fk_task *t)
{
    capture *c = s->cap;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->nodes = xrealloc(c->nodes, (size_t)c->cap * sizeof *c->nodes);
    }
    node *n = &c->nodes[c->n];
    n->task = t;
    n->slot = capture_slot(c, s);
    n->deps = int_dup(s->frontier, s->nfrontier);
    n->ndeps = s->nfrontier;
    set_frontier(s, &c->n, 1);
    c->n++;
}

static void nodes_free(node *n, int count)
{
    for (int i = 0; i < count; i++) {
        fk_task_unref(n[i].task);
        free(n[i].deps);
    }
    free(n);
}

static void capture_free(capture *c)
{
    for (int i = 0; i < F.ncaptures; i++)
        if (F.captures[i] == c)
            F.captures[i] = F.captures[--F.ncaptures];
    nodes_free(c->nodes, c->n);
    free(c->streams);
    free(c);
}

/* The capture event e was last recorded in, if that capture is still in
 * progress; an event recorded in a finished capture marks nothing. */
static capture *event_capture(CUevent e)
{
    for (int i = 0; e->cap && i < F.ncaptures; i++)
        if (F.captures[i] == e->cap)
            return e->cap;
    return NULL;
}

/* A potentially unsafe call (one that may synchronize or allocate) while a
 * capture in global or thread-local mode is in progress on this thread (in
 * global mode: on any thread): CUDA refuses it and invalidates the capture.
 * Returns CUDA_SUCCESS when the call may go on. */
static CUresult capture_forbids(const char *who)
{
    for (int i = 0; i < F.ncaptures; i++) {
        capture *c = F.captures[i];
        if (c->strict && (c->strict == 2 || c->thread == &thread_tag)) {
            say("%s while stream %d is capturing (not in relaxed mode)", who, c->origin->id);
            capture_invalidate(c, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return CUDA_SUCCESS;
}

/* Ends stream s's part in its capture (s is the origin: the whole capture). */
static void capture_leave(CUstream s)
{
    s->cap = NULL;
    set_frontier(s, NULL, 0);
}

CUresult fk_stream_check(CUstream s)
{
    int d = cur_dev();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!s)
        return F.gpu[d].sticky;
    if (stream_index(s) < 0 || !s->live || s->internal)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->dev != d) {
        say("stream %d belongs to device %d, the current context is device %d's", s->id, s->dev, d);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return F.gpu[d].sticky;
}

/* The stream itself, or the current device's legacy stream for NULL. */
static CUstream resolve(CUstream s);
static CUstream stream_new(int dev, int internal);

static void queue_push(CUstream s, fk_task *t)
{
    entry *e = xcalloc(1, sizeof *e);
    e->task = t;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
}

/* Puts t on s, the stream resolved (live, not internal), or records it. */
/* GNC_FAKECUDA_GRAPHS=invalidate or noinstantiate: a fault of the graph
 * path injected (as a driver refuses a node it cannot capture, or a graph it
 * cannot instantiate), read at each call so that a test can set it late. */
static int graphs_fault(const char *which)
{
    const char *v = getenv("GNC_FAKECUDA_GRAPHS");
    return v && !strcmp(v, which);
}

static CUresult push_or_capture(CUstream s, fk_task *t)
{
    if (s->cap) {
        if (s->cap->invalid) {
            fk_task_unref(t);
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        if (graphs_fault("invalidate")) {
            say("capture: GNC_FAKECUDA_GRAPHS=invalidate: the capture's first node is refused");
            capture_invalidate(s->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            fk_task_unref(t);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        capture_add(s, t);
        return CUDA_SUCCESS;
    }
    queue_push(s, t);
    fk_progress();
    return CUDA_SUCCESS;
}

CUresult fk_enqueue(CUstream s, fk_task *t)
{
    CUresult r = fk_stream_check(s);
    if (r) {
        fk_task_unref(t);
        return r;
    }
    return push_or_capture(resolve(s), t);
}

uintptr_t fk_stream_capture(CUstream s)
{
    if (!s || stream_index(s) < 0 || !s->live || !s->cap)
        return 0;
    return (uintptr_t)s->cap;
}

int fk_capture_nccl(CUstream s, int dev)
{
    capture *c = s && stream_index(s) >= 0 && s->live ? s->cap : NULL;
    if (c && c->nccl_dev < 0)
        c->nccl_dev = dev;
    return c ? c->nccl_dev : dev;
}

void fk_capture_refuse(CUstream s)
{
    if (s && stream_index(s) >= 0 && s->live && s->cap)
        capture_invalidate(s->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

CUresult fk_enqueue_dev(int dev, CUstream s, fk_task *t)
{
    CUresult r = CUDA_SUCCESS;
    if (!F.initialized)
        r = CUDA_ERROR_NOT_INITIALIZED;
    else if (dev < 0 || dev >= F.ngpus || F.gpu[dev].ctx.refs <= 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (s && (stream_index(s) < 0 || !s->live || s->internal || s->dev != dev))
        r = CUDA_ERROR_INVALID_HANDLE;
    else
        r = F.gpu[dev].sticky;
    if (r) {
        fk_task_unref(t);
        return r;
    }
    if (!s) {
        if (!F.gpu[dev].null_stream)
            F.gpu[dev].null_stream = stream_new(dev, 0);
        s = F.gpu[dev].null_stream;
    }
    return push_or_capture(s, t);
}

int fk_stream_device(CUstream s)
{
    if (!s)
        return cur_dev();
    return stream_index(s) >= 0 && s->live ? s->dev : -1;
}

int fk_context_device(CUcontext c)
{
    return c && c->refs > 0 ? c->dev : -1;
}

/* ---------------------------------------------------------------- driver: init, devices */

#define INIT_CHECK() do { if (!F.initialized) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

CUresult cuInit(unsigned int flags)
{
    FK_API;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (F.initialized)
        return CUDA_SUCCESS;
    F.ngpus = env_int("GNC_FAKECUDA_GPUS", 2);
    if (F.ngpus < 0 || F.ngpus > MAX_GPUS)
        F.ngpus = 2;
    F.free_bytes = (size_t)env_int("GNC_FAKECUDA_FREE_MIB", 80000) << 20;
    const char *sched = getenv("GNC_FAKECUDA_SCHEDULE");
    F.lazy = sched && !strcmp(sched, "lazy");
    const char *kms = getenv("GNC_FAKECUDA_KERNEL_MS"), *lms = getenv("GNC_FAKECUDA_LIBRARY_MS"),
               *ims = getenv("GNC_FAKECUDA_IGEMM_MS"), *nms = getenv("GNC_FAKECUDA_NHWC_MS"),
               *skip = getenv("GNC_FAKECUDA_UNEMULATED");
    F.cost[FK_COST_KERNEL] = kms && *kms ? atof(kms) : 0.001;
    F.cost[FK_COST_IGEMM] = ims && *ims ? atof(ims) : F.cost[FK_COST_KERNEL];
    F.cost[FK_COST_LIBRARY] = lms && *lms ? atof(lms) : 0.001;
    F.cost[FK_COST_LIBRARY_NHWC] = nms && *nms ? atof(nms) : F.cost[FK_COST_LIBRARY];
    F.skip_unemulated = skip && !strcmp(skip, "skip");
    for (int d = 0; d < F.ngpus; d++)
        F.gpu[d].ctx.dev = d;
    F.initialized = 1;
    return CUDA_SUCCESS;
}

static const struct {
    CUresult r;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not initiated in this stream"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
};

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FK_API;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FK_API;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == error) {
            *pStr = errors[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *count)
{
    FK_API;
    INIT_CHECK();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = F.ngpus;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FK_API;
    INIT_CHECK();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    FK_API;
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    FK_API;
    INIT_CHECK();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = F.free_bytes;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FK_API;
    INIT_CHECK();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "gnc fake GPU %d (host memory)", dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FK_API;
    INIT_CHECK();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 << 10; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- contexts */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FK_API;
    INIT_CHECK();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    F.gpu[dev].ctx.refs++;
    *pctx = &F.gpu[dev].ctx;
    return CUDA_SUCCESS;
}

static void stream_destroy(CUstream s);

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    FK_API;
    INIT_CHECK();
    if (dev < 0 || dev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    device *D = &F.gpu[dev];
    if (D->ctx.refs <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (--D->ctx.refs > 0)
        return CUDA_SUCCESS;
    /* the context is destroyed: its work finishes, its resources go */
    run_until(device_idle, &dev, dev, "cuDevicePrimaryCtxRelease");
    for (int i = F.nstreams - 1; i >= 0; i--)
        if (F.streams[i]->dev == dev && !F.streams[i]->internal) {
            CUstream s = F.streams[i];
            while (s->head) {
                entry *e = s->head;
                s->head = e->next;
                entry_free(e);
            }
            s->tail = NULL;
            s->live = 0;
            stream_unlink(s);
        }
    D->null_stream = NULL;
    free_allocs(dev);
    D->sticky = CUDA_SUCCESS;
    /* peer access goes with the context, both ways */
    memset(D->peer, 0, sizeof D->peer);
    for (int e = 0; e < F.ngpus; e++)
        F.gpu[e].peer[dev] = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FK_API;
    INIT_CHECK();
    if (ctx && ctx->refs <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FK_API;
    INIT_CHECK();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = cur_dev() >= 0 ? current : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    FK_API;
    INIT_CHECK();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    int d = cur_dev();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = d;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    FK_API;
    INIT_CHECK();
    int d = cur_dev();
    if (d < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < F.nstreams; i++)
        if (F.streams[i]->dev == d && F.streams[i]->cap) {
            capture_invalidate(F.streams[i]->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    if (capture_forbids("cuCtxSynchronize"))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return run_until(device_idle, &d, d, "cuCtxSynchronize");
}

/* ---------------------------------------------------------------- memory */

#define CTX_CHECK(d)                                                                 \
    int d = cur_dev();                                                               \
    do {                                                                             \
        INIT_CHECK();                                                                \
        if (d < 0)                                                                   \
            return CUDA_ERROR_INVALID_CONTEXT;                                       \
        if (F.gpu[d].sticky)                                                         \
            return F.gpu[d].sticky;                                                  \
    } while (0)

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    FK_API;
    INIT_CHECK();
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= F.ngpus || peerDev < 0 || peerDev >= F.ngpus)
        return CUDA_ERROR_INVALID_DEVICE;
    /* GNC_FAKECUDA_NO_PEER_ACCESS=1: GPUs without a link between them */
    const char *none = getenv("GNC_FAKECUDA_NO_PEER_ACCESS");
    *canAccessPeer = dev != peerDev && !(none && strcmp(none, "1") == 0);
    return CUDA_SUCCESS;
}

/* Access from the current context to peerContext's memory; enabled twice is
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, as with the real driver. */
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    FK_API;
    CTX_CHECK(d);
    int e = fk_context_device(peerContext);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (e < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (e == d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (F.gpu[d].peer[e])
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    int peers = 0; /* a GPU takes 8 peers at most (the driver API's cuCtxEnablePeerAccess) */
    for (int g = 0; g < F.ngpus; g++)
        peers += F.gpu[d].peer[g] != 0;
    if (peers >= 8)
        return CUDA_ERROR_TOO_MANY_PEERS;
    F.gpu[d].peer[e] = 1;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    FK_API;
    CTX_CHECK(d);
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    *total = F.free_bytes;
    *free_bytes = F.free_bytes - F.gpu[d].allocated;
    return CUDA_SUCCESS;
}

/* Page-locked host memory: a copy from it reads it when the copy runs (as
 * the GPU's DMA does), not when it is issued as from pageable memory, so a
 * caller that overwrites it too early is caught. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (!pp || bytesize == 0 || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE |
                                                   CU_MEMHOSTALLOC_DEVICEMAP |
                                                   CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    if (capture_forbids("cuMemHostAlloc"))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    void *p = malloc(bytesize);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    F.pinned = xrealloc(F.pinned, (size_t)(F.npinned + 1) * sizeof *F.pinned);
    F.pinned[F.npinned++] = (alloc){(uintptr_t)p, bytesize};
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    FK_API;
    INIT_CHECK();
    for (int i = 0; i < F.npinned; i++)
        if (F.pinned[i].base == (uintptr_t)p) {
            F.pinned[i] = F.pinned[--F.npinned];
            free(p);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

static int pinned(const void *p, size_t bytes)
{
    for (int i = 0; i < F.npinned; i++)
        if ((uintptr_t)p >= F.pinned[i].base &&
            (uintptr_t)p + bytes <= F.pinned[i].base + F.pinned[i].bytes)
            return 1;
    return 0;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    FK_API;
    CTX_CHECK(d);
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (capture_forbids("cuMemAlloc"))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    device *D = &F.gpu[d];
    size_t rounded = (bytesize + 255) / 256 * 256;
    if (rounded < bytesize || rounded > F.free_bytes - D->allocated)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = aligned_alloc(256, rounded);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* fresh device memory is not zero: a reader of uninitialized memory sees garbage */
    memset(p, 0xa5, rounded);
    if (D->nallocs == D->cap) {
        D->cap = D->cap ? 2 * D->cap : 16;
        D->allocs = xrealloc(D->allocs, (size_t)D->cap * sizeof *D->allocs);
    }
    D->allocs[D->nallocs++] = (alloc){(uintptr_t)p, bytesize};
    D->allocated += rounded;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr dptr)
{
    FK_API;
    CTX_CHECK(d);
    if (capture_forbids("cuMemFree"))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    device *D = &F.gpu[d];
    for (int i = 0; i < D->nallocs; i++)
        if (D->allocs[i].base == (uintptr_t)dptr) {
            /* like the real one, it waits for the device's work first */
            CUresult r = run_until(device_idle, &d, d, "cuMemFree");
            if (r)
                return r;
            free((void *)D->allocs[i].base);
            D->allocated -= (D->allocs[i].bytes + 255) / 256 * 256;
            D->allocs[i] = D->allocs[--D->nallocs];
            return CUDA_SUCCESS;
        }
    say("cuMemFree: 0x%llx is not the start of a live allocation of device %d",
        (unsigned long long)dptr, d);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- copies */

typedef struct {
    int dst_dev, src_dev;   /* -1: host */
    unsigned char *dst;
    const unsigned char *src;
    unsigned char *staged;  /* HtoD: the host bytes, read when issued */
    size_t bytes;
    int set, value;         /* a memset */
} copy;

static void copy_release(void *c)
{
    free(((copy *)c)->staged);
    free(c);
}

static int copy_run(void *ctx, void **state, char *why, size_t whylen)
{
    (void)state;
    copy *c = ctx;
    if ((c->dst_dev >= 0 && fk_check_range(c->dst_dev, c->dst, c->bytes, "running a copy", "destination")) ||
        (c->src_dev >= 0 && !c->set && fk_check_range(c->src_dev, c->src, c->bytes, "running a copy", "source"))) {
        snprintf(why, whylen, "memory freed before the copy ran");
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    if (c->set)
        memset(c->dst, c->value, c->bytes);
    else
        memmove(c->dst, c->staged ? c->staged : c->src, c->bytes);
    return 0;
}

static CUresult issue_copy(const char *what, CUstream s, int dst_dev, void *dst, int src_dev,
                           const void *src, size_t bytes, int set, int value)
{
    CUresult r = fk_stream_check(s);
    if (r)
        return r;
    CUstream rs = resolve(s);
    if ((dst_dev < 0 || src_dev < 0) && !set && rs->cap) {
        say("%s: a copy between host and device memory while stream %d is capturing", what, rs->id);
        capture_invalidate(rs->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((dst_dev >= 0 && fk_check_range(dst_dev, dst, bytes, what, "destination")) ||
        (src_dev >= 0 && !set && fk_check_range(src_dev, src, bytes, what, "source")))
        return CUDA_ERROR_INVALID_VALUE;
    if ((dst_dev < 0 && !dst) || (src_dev < 0 && !set && !src))
        return CUDA_ERROR_INVALID_VALUE;
    int pageable = src_dev < 0 && !set && !pinned(src, bytes);
    if (pageable) {
        /* from pageable memory "a stream sync is performed before the copy is
           initiated" (the driver API's API synchronization behavior): the
           call returns once the stream's earlier work is done and the host
           buffer is staged */
        r = run_until(stream_idle, rs, rs->dev, what);
        if (r)
            return r;
    }
    copy *c = xcalloc(1, sizeof *c);
    *c = (copy){dst_dev, src_dev, dst, src, NULL, bytes, set, value};
    if (pageable) {
        c->staged = xcalloc(bytes, 1);
        memcpy(c->staged, src, bytes);
    }
    return fk_enqueue(s, fk_task_new(what, copy_run, NULL, c, copy_release, NULL));
}

#define PTR(x) ((void *)(uintptr_t)(x))

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    return issue_copy("cuMemcpyHtoDAsync", hStream, fk_stream_device(hStream), PTR(dstDevice), -1,
                      srcHost, ByteCount, 0, 0);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    return issue_copy("cuMemcpyDtoHAsync", hStream, -1, dstHost, fk_stream_device(hStream),
                      PTR(srcDevice), ByteCount, 0, 0);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    int sd = fk_stream_device(hStream);
    return issue_copy("cuMemcpyDtoDAsync", hStream, sd, PTR(dstDevice), sd, PTR(srcDevice),
                      ByteCount, 0, 0);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    int dd = fk_context_device(dstContext), sd = fk_context_device(srcContext);
    if (dd < 0 || sd < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* without peer access the driver stages the copy through the host */
    if (dd != sd && !F.gpu[sd].peer[dd] && !F.gpu[dd].peer[sd])
        F.staged_peer_copies++;
    return issue_copy("cuMemcpyPeerAsync", hStream, dd, PTR(dstDevice), sd, PTR(srcDevice),
                      ByteCount, 0, 0);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    return issue_copy("cuMemsetD8Async", hStream, fk_stream_device(hStream), PTR(dstDevice), -1,
                      NULL, N, 1, uc);
}

/* ---------------------------------------------------------------- streams */

static CUstream stream_new(int dev, int internal)
{
    CUstream s = xcalloc(1, sizeof *s);
    s->dev = dev;
    s->id = F.next_id++;
    s->live = 1;
    s->internal = internal;
    if (F.nstreams == F.cstreams) {
        F.cstreams = F.cstreams ? 2 * F.cstreams : 16;
        F.streams = xrealloc(F.streams, (size_t)F.cstreams * sizeof *F.streams);
    }
    F.streams[F.nstreams++] = s;
    return s;
}

static CUstream resolve(CUstream s)
{
    int d = cur_dev();
    if (s || d < 0) /* callers have checked the context */
        return s;
    if (!F.gpu[d].null_stream)
        F.gpu[d].null_stream = stream_new(d, 0);
    return F.gpu[d].null_stream;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FK_API;
    CTX_CHECK(d);
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    *phStream = stream_new(d, 0);
    return CUDA_SUCCESS;
}

static void stream_destroy(CUstream s)
{
    s->live = 0;
    if (!s->head)
        stream_unlink(s);
}

CUresult cuStreamDestroy(CUstream hStream)
{
    FK_API;
    INIT_CHECK();
    if (!hStream || stream_index(hStream) < 0 || !hStream->live || hStream->internal)
        return CUDA_ERROR_INVALID_HANDLE;
    if (hStream->cap) {
        say("cuStreamDestroy: stream %d is capturing", hStream->id);
        capture_invalidate(hStream->cap, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    /* pending work still completes, as on a GPU */
    stream_destroy(hStream);
    return CUDA_SUCCESS;
}

/* The checks of who (cuStreamSynchronize, cuStreamQuery): a valid stream, and
 * no capture that waiting on it would break (a capturing stream's capture is
 * invalidated).  The stream in *out. */
static CUresult stream_waitable(CUstream hStream, const char *who, CUstream *out)
{
    CTX_CHECK(d);
    (void)d;
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    CUstream s = resolve(hStream);
    if (!s->cap && capture_forbids(who))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->cap) {
        say("%s: stream %d is capturing", who, s->id);
        capture_invalidate(s->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    *out = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    FK_API;
    CUstream s;
    CUresult r = stream_waitable(hStream, "cuStreamSynchronize", &s);
    return r ? r : run_until(stream_idle, s, s->dev, "cuStreamSynchronize");
}

/* cuStreamSynchronize's checks, then query(): CUDA_SUCCESS when every
 * operation on the stream is done, CUDA_ERROR_NOT_READY when not. */
CUresult cuStreamQuery(CUstream hStream)
{
    FK_API;
    CUstream s;
    CUresult r = stream_waitable(hStream, "cuStreamQuery", &s);
    return r ? r : query(stream_idle, s, s->dev, "cuStreamQuery");
}

/* ---------------------------------------------------------------- events */

static void event_unref(CUevent e)
{
    if (--e->refs == 0) {
        free(e->cap_frontier);
        free(e);
    }
}

typedef struct {
    CUevent e;
    int64_t point;      /* the record point: reached by a record, awaited by a wait */
} event_point;

static void event_point_release(void *p)
{
    event_unref(((event_point *)p)->e);
    free(p);
}

static int record_run(void *ctx, void **state, char *why, size_t whylen)
{
    (void)state, (void)why, (void)whylen;
    event_point *p = ctx;
    if (p->e->done < p->point) {
        p->e->done = p->point;
        p->e->at = F.gpu[p->e->dev].clock;
    }
    return 0;
}

static int wait_ready(void *ctx, void **state)
{
    (void)state;
    event_point *p = ctx;
    return p->e->done >= p->point;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FK_API;
    CTX_CHECK(d);
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    CUevent e = xcalloc(1, sizeof *e);
    e->dev = d;
    e->timing = !(Flags & CU_EVENT_DISABLE_TIMING);
    e->refs = 1;
    *phEvent = e;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent)
{
    FK_API;
    INIT_CHECK();
    if (!hEvent || hEvent->refs <= 0)
        return CUDA_ERROR_INVALID_HANDLE;
    event_unref(hEvent);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    if (!hEvent)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    CUstream s = resolve(hStream);
    if (hEvent->dev != d || s->dev != d) {
        say("cuEventRecord: the event (device %d) and stream %d (device %d) must be of the "
            "current context's device %d", hEvent->dev, s->id, s->dev, d);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (s->cap) {
        /* in a capture the event marks a point of the graph, nothing runs */
        if (s->cap->invalid)
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        hEvent->cap = s->cap;
        free(hEvent->cap_frontier);
        hEvent->cap_frontier = int_dup(s->frontier, s->nfrontier);
        hEvent->ncap_frontier = s->nfrontier;
        return CUDA_SUCCESS;
    }
    hEvent->cap = NULL;
    event_point *p = xcalloc(1, sizeof *p);
    p->e = hEvent;
    p->point = ++hEvent->recorded;
    hEvent->refs++;
    return fk_enqueue(s, fk_task_new("event record", record_run, NULL, p, event_point_release, NULL));
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (!hEvent || Flags != 0)
        return !hEvent ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    CUstream s = resolve(hStream);
    if (hEvent->cap && !event_capture(hEvent)) {
        say("cuStreamWaitEvent: the event was last recorded in a capture that has ended");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (hEvent->cap) {
        capture *c = hEvent->cap;
        if (c->invalid)
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (s->cap && s->cap != c) {
            say("cuStreamWaitEvent: stream %d in one capture waits on an event of another", s->id);
            capture_invalidate(c, CUDA_ERROR_STREAM_CAPTURE_MERGE);
            return CUDA_ERROR_STREAM_CAPTURE_MERGE;
        }
        if (!s->cap) {
            /* a fork: s joins the capture, its work from here on is recorded */
            s->cap = c;
            capture_slot(c, s);
            set_frontier(s, hEvent->cap_frontier, hEvent->ncap_frontier);
            return CUDA_SUCCESS;
        }
        int *f = xcalloc((size_t)(s->nfrontier + hEvent->ncap_frontier) + 1, sizeof *f);
        int n = 0;
        for (int i = 0; i < s->nfrontier; i++)
            f[n++] = s->frontier[i];
        for (int i = 0; i < hEvent->ncap_frontier; i++) {
            int dup = 0;
            for (int j = 0; j < n; j++)
                dup |= f[j] == hEvent->cap_frontier[i];
            if (!dup)
                f[n++] = hEvent->cap_frontier[i];
        }
        free(s->frontier);
        s->frontier = f;
        s->nfrontier = n;
        return CUDA_SUCCESS;
    }
    if (s->cap) {
        say("cuStreamWaitEvent: capturing stream %d waits on an event recorded outside the capture",
            s->id);
        capture_invalidate(s->cap, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    if (hEvent->recorded == 0)
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    event_point *p = xcalloc(1, sizeof *p);
    p->e = hEvent;
    p->point = hEvent->recorded;
    hEvent->refs++;
    char what[64];
    snprintf(what, sizeof what, "wait for an event of device %d", hEvent->dev);
    return fk_enqueue(s, fk_task_new(what, NULL, wait_ready, p, event_point_release, NULL));
}

static int event_reached(void *e) { return ((CUevent)e)->done >= ((CUevent)e)->recorded; }

/* The checks of who (cuEventSynchronize, cuEventQuery): a live event, and no
 * capture that waiting on it would break (an event of a capture invalidates
 * it). */
static CUresult event_waitable(CUevent hEvent, const char *who)
{
    INIT_CHECK();
    if (!hEvent || hEvent->refs <= 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (event_capture(hEvent)) {
        capture_invalidate(hEvent->cap, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (capture_forbids(who))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    FK_API;
    CUresult r = event_waitable(hEvent, "cuEventSynchronize");
    return r ? r : run_until(event_reached, hEvent, hEvent->dev, "cuEventSynchronize");
}

/* cuEventSynchronize's checks, then query(): CUDA_SUCCESS when the work
 * before the event's last record is done (or it was never recorded),
 * CUDA_ERROR_NOT_READY when not. */
CUresult cuEventQuery(CUevent hEvent)
{
    FK_API;
    CUresult r = event_waitable(hEvent, "cuEventQuery");
    return r ? r : query(event_reached, hEvent, hEvent->dev, "cuEventQuery");
}

/* Both events recorded (outside captures), reached, with timing: the time
 * model's clock between them (at the top). */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FK_API;
    INIT_CHECK();
    if (!pMilliseconds || !hStart || !hEnd || hStart->refs <= 0 || hEnd->refs <= 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!hStart->timing || !hEnd->timing) {
        say("cuEventElapsedTime: an event created with CU_EVENT_DISABLE_TIMING");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (hStart->cap || hEnd->cap || !hStart->recorded || !hEnd->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (hStart->done < hStart->recorded || hEnd->done < hEnd->recorded)
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)(hEnd->at - hStart->at);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- capture API */

CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hStream)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    if (hStream->cap)
        return CUDA_ERROR_ILLEGAL_STATE;
    capture *c = xcalloc(1, sizeof *c);
    F.captures = xrealloc(F.captures, (size_t)(F.ncaptures + 1) * sizeof *F.captures);
    F.captures[F.ncaptures++] = c;
    c->origin = hStream;
    c->strict = mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? 2 : mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    c->thread = &thread_tag;
    c->nccl_dev = -1;
    hStream->cap = c;
    capture_slot(c, hStream);
    set_frontier(hStream, NULL, 0);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    CUstream s = resolve(hStream);
    *captureStatus = !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE
                     : s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

/* 1 when every node is an ancestor of (or in) the origin's frontier. */
static int capture_joined(const capture *c)
{
    char *seen = xcalloc((size_t)c->n + 1, 1);
    int *stack = xcalloc((size_t)c->n + 1, sizeof *stack), top = 0;
    for (int i = 0; i < c->origin->nfrontier; i++)
        if (!seen[c->origin->frontier[i]])
            seen[c->origin->frontier[i]] = 1, stack[top++] = c->origin->frontier[i];
    while (top) {
        const node *n = &c->nodes[stack[--top]];
        for (int i = 0; i < n->ndeps; i++)
            if (!seen[n->deps[i]])
                seen[n->deps[i]] = 1, stack[top++] = n->deps[i];
    }
    int ok = 1;
    for (int i = 0; i < c->n && ok; i++)
        if (!seen[i]) {
            say("cuStreamEndCapture: '%s' captured on stream %d is not joined back into the "
                "origin stream %d", c->nodes[i].task->what, c->streams[c->nodes[i].slot]->id,
                c->origin->id);
            ok = 0;
        }
    free(seen);
    free(stack);
    return ok;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fk_stream_check(hStream);
    if (r && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        return r;
    if (!hStream || !hStream->cap)
        return CUDA_ERROR_ILLEGAL_STATE;
    capture *c = hStream->cap;
    if (c->origin != hStream) {
        say("cuStreamEndCapture: stream %d is not where the capture began", hStream->id);
        capture_invalidate(c, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    *phGraph = NULL;
    CUresult why = c->invalid;
    if (!why && !capture_joined(c))
        why = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    for (int i = 0; i < c->nstreams; i++)
        capture_leave(c->streams[i]);
    if (why) {
        capture_free(c);
        return why == CUDA_ERROR_STREAM_CAPTURE_UNJOINED ? why : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    CUgraph g = xcalloc(1, sizeof *g);
    g->nodes = c->nodes;
    g->n = c->n;
    g->nslots = c->nstreams;
    g->slot_dev = xcalloc((size_t)c->nstreams, sizeof *g->slot_dev);
    for (int i = 0; i < c->nstreams; i++)
        g->slot_dev[i] = c->streams[i]->dev;
    c->nodes = NULL;
    c->n = 0;
    capture_free(c);
    *phGraph = g;
    return CUDA_SUCCESS;
}

static node *nodes_copy(const node *src, int n)
{
    node *d = xcalloc((size_t)n + 1, sizeof *d);
    for (int i = 0; i < n; i++) {
        d[i] = src[i];
        d[i].deps = int_dup(src[i].deps, src[i].ndeps);
        d[i].task->refs++;
    }
    return d;
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    FK_API;
    INIT_CHECK();
    if (!phGraphExec || !hGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (graphs_fault("noinstantiate")) {
        say("cuGraphInstantiate: GNC_FAKECUDA_GRAPHS=noinstantiate");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUgraphExec e = xcalloc(1, sizeof *e);
    e->g.n = hGraph->n;
    e->g.nodes = nodes_copy(hGraph->nodes, hGraph->n);
    e->g.nslots = hGraph->nslots;
    e->g.slot_dev = int_dup(hGraph->slot_dev, hGraph->nslots);
    e->streams = xcalloc((size_t)e->g.nslots + 1, sizeof *e->streams);
    for (int i = 0; i < e->g.nslots; i++)
        e->streams[i] = stream_new(e->g.slot_dev[i], 1);
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    FK_API;
    INIT_CHECK();
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    nodes_free(hGraph->nodes, hGraph->n);
    free(hGraph->slot_dev);
    free(hGraph);
    return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FK_API;
    INIT_CHECK();
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < hGraphExec->g.nslots; i++)
        stream_destroy(hGraphExec->streams[i]); /* launched work still completes */
    nodes_free(hGraphExec->g.nodes, hGraphExec->g.n);
    free(hGraphExec->g.slot_dev);
    free(hGraphExec->streams);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* One launch of a graph: its nodes' completion, shared by the launch's tasks. */
typedef struct {
    int refs;
    int started, n;
    char *done;
} launch;

typedef struct {
    launch *l;
    node self;          /* this node, with its own reference on the task */
    int index;          /* -1: the launch's begin marker, -2: its end */
} launch_part;

static void launch_part_release(void *p)
{
    launch_part *q = p;
    if (--q->l->refs == 0) {
        free(q->l->done);
        free(q->l);
    }
    if (q->self.task)
        fk_task_unref(q->self.task);
    free(q->self.deps);
    free(q);
}

static int launch_ready(void *ctx, void **state)
{
    launch_part *q = ctx;
    if (q->index == -1)
        return 1;
    if (q->index == -2) {
        for (int i = 0; i < q->l->n; i++)
            if (!q->l->done[i])
                return 0;
        return 1;
    }
    if (!q->l->started)
        return 0;
    for (int i = 0; i < q->self.ndeps; i++)
        if (!q->l->done[q->self.deps[i]])
            return 0;
    return q->self.task->ready ? q->self.task->ready(q->self.task->ctx, state) : 1;
}

static int launch_run(void *ctx, void **state, char *why, size_t whylen)
{
    launch_part *q = ctx;
    if (q->index == -1) {
        q->l->started = 1;
        return 0;
    }
    if (q->index == -2)
        return 0;
    int r = q->self.task->run ? q->self.task->run(q->self.task->ctx, state, why, whylen) : 0;
    q->l->done[q->index] = 1;
    return r;
}

/* A node's queue entry state is its own task's. */
static void launch_state_free(void *ctx, void *state)
{
    launch_part *q = ctx;
    if (q->self.task->free_state)
        q->self.task->free_state(q->self.task->ctx, state);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    FK_API;
    CTX_CHECK(d);
    (void)d;
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fk_stream_check(hStream);
    if (r)
        return r;
    if (resolve(hStream)->cap)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    const struct CUgraph_st *g = &hGraphExec->g;
    for (int i = 0; i < g->nslots; i++)
        if (F.gpu[g->slot_dev[i]].sticky)
            return F.gpu[g->slot_dev[i]].sticky;
    launch *l = xcalloc(1, sizeof *l);
    l->n = g->n;
    l->done = xcalloc((size_t)g->n + 1, 1);
    l->refs = g->n + 2;
    for (int i = -1; i <= g->n; i++) {
        launch_part *q = xcalloc(1, sizeof *q);
        q->l = l;
        q->index = i < g->n ? i : -2;
        char what[128];
        if (i >= 0 && i < g->n) {
            q->self = g->nodes[i];
            q->self.deps = int_dup(g->nodes[i].deps, g->nodes[i].ndeps);
            q->self.task->refs++;
            snprintf(what, sizeof what, "graph node %d: %s", i, q->self.task->what);
        } else {
            snprintf(what, sizeof what, "graph launch %s", i < 0 ? "begin" : "end");
        }
        fk_task *t = fk_task_new(what, launch_run, launch_ready, q, launch_part_release,
                                 i >= 0 && i < g->n ? launch_state_free : NULL);
        t->ms = i >= 0 && i < g->n ? q->self.task->ms : 0;
        if (i >= 0 && i < g->n)
            queue_push(hGraphExec->streams[g->nodes[i].slot], t);
        else
            queue_push(resolve(hStream), t);
    }
    fk_progress();
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- modules and kernels */

long fakecuda_staged_peer_copies(void)
{
    return F.staged_peer_copies;
}

int fakecuda_register(const char *name, fk_kernel entry)
{
    if (!name || !entry)
        return -1;
    for (int i = 0; i < F.nkernels; i++)
        if (!strcmp(F.kernels[i].name, name)) {
            F.kernels[i].entry = entry;
            return 0;
        }
    F.kernels = xrealloc(F.kernels, (size_t)(F.nkernels + 1) * sizeof *F.kernels);
    F.kernels[F.nkernels].name = strdup(name);
    F.kernels[F.nkernels].entry = entry;
    F.nkernels++;
    return 0;
}

/* The bytes of a module image: an ELF64 file's extent, or PTX text's length; 0 when neither. */
static size_t image_bytes(const unsigned char *im)
{
    if (!memcmp(im, "\x7f" "ELF", 4)) {
        if (im[4] != 2)
            return 0; /* CUDA cubins are ELF64 */
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, im + 0x28, 8);
        memcpy(&shentsize, im + 0x3a, 2);
        memcpy(&shnum, im + 0x3c, 2);
        return (size_t)(shoff + (uint64_t)shentsize * shnum);
    }
    const char *t = (const char *)im;
    while (*t == ' ' || *t == '\n' || *t == '\t' || *t == '\r')
        t++;
    if (!strncmp(t, "//", 2) || !strncmp(t, ".version", 8))
        return strlen((const char *)im);
    return 0;
}

static int module_index(CUmodule m)
{
    for (int i = 0; i < F.nmodules; i++)
        if (F.modules[i] == m)
            return i;
    return -1;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FK_API;
    CTX_CHECK(d);
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = image_bytes(image);
    if (!n) {
        say("cuModuleLoadData: the image is neither an ELF64 cubin nor PTX text");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmodule m = xcalloc(1, sizeof *m);
    m->dev = d;
    m->bytes = n;
    m->image = xcalloc(n + 1, 1); /* PTX stays a string */
    memcpy(m->image, image, n);
    F.modules = xrealloc(F.modules, (size_t)(F.nmodules + 1) * sizeof *F.modules);
    F.modules[F.nmodules++] = m;
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    FK_API;
    INIT_CHECK();
    int i = module_index(hmod);
    if (i < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    F.modules[i] = F.modules[--F.nmodules];
    for (int k = F.nfunctions - 1; k >= 0; k--)
        if (F.functions[k]->mod == hmod) {
            free(F.functions[k]);
            F.functions[k] = F.functions[--F.nfunctions];
        }
    free(hmod->image);
    free(hmod);
    return CUDA_SUCCESS;
}

static int image_has(const CUmodule m, const char *name)
{
    size_t k = strlen(name);
    for (size_t i = 0; k && i + k <= m->bytes; i++)
        if (m->image[i] == (unsigned char)name[0] && !memcmp(m->image + i, name, k))
            return 1;
    return 0;
}

/* The sizes of kernel name's parameters, as the driver learns them from the
 * image: a cubin's .nv.info.<name> section (EIATTR_KPARAM_INFO records), or
 * PTX's .entry declaration.  The count, or -1 when the image does not say. */
static int cubin_params(const CUmodule m, const char *name, int *size)
{
    const unsigned char *b = m->image;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, b + 0x28, 8);
    memcpy(&shentsize, b + 0x3a, 2);
    memcpy(&shnum, b + 0x3c, 2);
    memcpy(&shstrndx, b + 0x3e, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff + (uint64_t)shnum * shentsize > m->bytes)
        return -1;
    uint64_t stroff, strsize;
    memcpy(&stroff, b + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    memcpy(&strsize, b + shoff + (uint64_t)shstrndx * shentsize + 0x20, 8);
    if (stroff + strsize > m->bytes)
        return -1;
    char want[300];
    snprintf(want, sizeof want, ".nv.info.%s", name);
    for (int i = 0; i < shnum; i++) {
        const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
        uint32_t nm;
        uint64_t off, len;
        memcpy(&nm, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&len, sh + 0x20, 8);
        if (nm >= strsize || off + len > m->bytes ||
            strncmp((const char *)b + stroff + nm, want, strsize - nm))
            continue;
        int n = 0;
        for (uint64_t k = 0; k + 2 <= len;) { /* records: format, attribute, value */
            unsigned fmt = b[off + k], attr = b[off + k + 1];
            uint16_t vlen = 2;
            if (fmt == 4) { /* EIFMT_SVAL: a 16-bit length, then the value */
                if (k + 4 > len)
                    break;
                memcpy(&vlen, b + off + k + 2, 2);
                k += 4;
            } else {
                vlen = fmt == 1 ? 0 : 2, k += 2;
            }
            if (k + vlen > len)
                break;
            if (fmt == 4 && attr == 0x17 && vlen >= 12) { /* EIATTR_KPARAM_INFO */
                uint16_t ordinal;
                uint32_t w;
                memcpy(&ordinal, b + off + k + 4, 2);
                memcpy(&w, b + off + k + 8, 4);
                if (ordinal >= MAX_PARAMS)
                    return -1;
                size[ordinal] = (int)((w >> 18) & 0x3fff);
                n = ordinal + 1 > n ? ordinal + 1 : n;
            }
            k += vlen;
        }
        return n;
    }
    return -1;
}

static int ptx_params(const CUmodule m, const char *name, int *size)
{
    const char *t = (const char *)m->image;
    size_t k = strlen(name);
    for (const char *e = strstr(t, ".entry "); e; e = strstr(e + 1, ".entry ")) {
        const char *p = e + 7;
        while (*p == ' ')
            p++;
        if (strncmp(p, name, k) || (p[k] != '(' && p[k] != ' ' && p[k] != '\n'))
            continue;
        const char *end = strchr(p, ')');
        int n = 0;
        for (const char *q = strstr(p, ".param"); q && end && q < end && n < MAX_PARAMS;
             q = strstr(q + 6, ".param")) {
            const char *ty = strstr(q + 6, " .");
            int bytes = 8;
            if (ty && ty < end) {
                if (!strncmp(ty + 2, "align", 5))
                    ty = strstr(ty + 7, " .");
                if (ty && ty < end)
                    bytes = strtol(ty + 3, NULL, 10) / 8; /* .u64, .f32, .b8 ... */
                const char *br = strchr(ty ? ty : q, '[');
                const char *next = strstr(q + 6, ".param");
                if (br && br < end && (!next || br < next))
                    bytes *= (int)strtol(br + 1, NULL, 10);
            }
            size[n++] = bytes;
        }
        return n;
    }
    return -1;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    FK_API;
    CTX_CHECK(d);
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (module_index(hmod) < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (hmod->dev != d)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!image_has(hmod, name)) {
        say("cuModuleGetFunction: the module's image has no '%s'", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    fk_kernel entry = NULL;
    for (int i = 0; i < F.nkernels; i++)
        if (!strcmp(F.kernels[i].name, name))
            entry = F.kernels[i].entry;
    /* without a registered emulation the function exists (as on a GPU, where
     * loading needs no emulation: gnc compile --autotune only loads) and
     * launching it fails */
    CUfunction f = xcalloc(1, sizeof *f);
    f->mod = hmod;
    f->entry = entry;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->nparams = hmod->image[0] == 0x7f ? cubin_params(hmod, name, f->size) : ptx_params(hmod, name, f->size);
    F.functions = xrealloc(F.functions, (size_t)(F.nfunctions + 1) * sizeof *F.functions);
    F.functions[F.nfunctions++] = f;
    *hfunc = f;
    return CUDA_SUCCESS;
}

typedef struct {
    fk_kernel entry;
    unsigned grid[3], block[3];
    void **args;        /* into values, or the caller's when the sizes are unknown */
    unsigned char *values;
} kernel_call;

static void kernel_call_release(void *p)
{
    kernel_call *k = p;
    if (k->values)
        free(k->args);
    free(k->values);
    free(k);
}

static int kernel_run(void *ctx, void **state, char *why, size_t whylen)
{
    (void)state;
    kernel_call *k = ctx;
    const char *msg = k->entry ? k->entry(k->grid, k->block, k->args) : NULL;
    if (msg) {
        snprintf(why, whylen, "%s", msg);
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return 0;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    FK_API;
    CTX_CHECK(d);
    int found = 0;
    for (int i = 0; i < F.nfunctions; i++)
        found |= F.functions[i] == f;
    if (!found)
        return CUDA_ERROR_INVALID_HANDLE;
    if (f->mod->dev != d) {
        say("cuLaunchKernel: '%s' was loaded on device %d, the current context is device %d's",
            f->name, f->mod->dev, d);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (extra) {
        say("cuLaunchKernel: 'extra' is not modelled; pass kernelParams");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!f->entry && !F.skip_unemulated) {
        say("cuLaunchKernel: no host emulation of '%s' is registered (fakecuda_register)", f->name);
        return CUDA_ERROR_NOT_FOUND;
    }
    uint64_t threads = (uint64_t)blockDimX * blockDimY * blockDimZ;
    if (!gridDimX || !gridDimY || !gridDimZ || !threads || threads > 1024 || blockDimZ > 64 ||
        gridDimY > 65535 || gridDimZ > 65535 || sharedMemBytes > (227u << 10)) {
        say("cuLaunchKernel: '%s': grid (%u, %u, %u), block (%u, %u, %u), %u shared bytes are "
            "out of the device's limits", f->name, gridDimX, gridDimY, gridDimZ, blockDimX,
            blockDimY, blockDimZ, sharedMemBytes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    kernel_call *k = xcalloc(1, sizeof *k);
    k->entry = f->entry;
    k->grid[0] = gridDimX, k->grid[1] = gridDimY, k->grid[2] = gridDimZ;
    k->block[0] = blockDimX, k->block[1] = blockDimY, k->block[2] = blockDimZ;
    k->args = kernelParams;
    if (f->nparams > 0) {
        /* the arguments' values are copied now, as the driver does */
        if (!kernelParams) {
            free(k);
            return CUDA_ERROR_INVALID_VALUE;
        }
        size_t total = 0;
        for (int i = 0; i < f->nparams; i++)
            total += (size_t)(f->size[i] + 7) / 8 * 8;
        k->values = xcalloc(total + 8, 1);
        k->args = xcalloc((size_t)f->nparams, sizeof *k->args);
        for (int i = 0, at = 0; i < f->nparams; i++) {
            memcpy(k->values + at, kernelParams[i], (size_t)f->size[i]);
            k->args[i] = k->values + at;
            at += (f->size[i] + 7) / 8 * 8;
        }
    }
    char what[300];
    snprintf(what, sizeof what, "kernel %s", f->name);
    fk_task *t = fk_task_new(what, kernel_run, NULL, k, kernel_call_release, NULL);
    fk_task_cost(t, strstr(f->name, "igemm") ? FK_COST_IGEMM : FK_COST_KERNEL);
    return fk_enqueue(hStream, t);
}

/* ---------------------------------------------------------------- NVRTC's probe */

/* NVRTC dlopens libcuda.so.1 and asks it for an internal export table: with
 * this fake loaded under that name, NVRTC finds it.  No tables: NVRTC then
 * compiles without the driver, as on a machine without a GPU. */
CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    FK_API;
    (void)pExportTableId;
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------- unloading */

/* The library unloaded (the last dlclose): everything it holds goes, as a
 * process's device state goes at exit.  Graphs and events the caller still
 * holds are the caller's leak. */
__attribute__((destructor)) static void fk_unload(void)
{
    while (F.nstreams) {
        CUstream s = F.streams[F.nstreams - 1];
        while (s->head) {
            entry *e = s->head;
            s->head = e->next;
            entry_free(e);
        }
        s->live = 0;
        stream_unlink(s);
    }
    free(F.streams);
    for (int i = 0; i < F.npinned; i++)
        free((void *)F.pinned[i].base);
    free(F.pinned);
    while (F.ncaptures)
        capture_free(F.captures[0]);
    free(F.captures);
    for (int i = 0; i < F.nfunctions; i++)
        free(F.functions[i]);
    free(F.functions);
    for (int i = 0; i < F.nmodules; i++) {
        free(F.modules[i]->image);
        free(F.modules[i]);
    }
    free(F.modules);
    for (int i = 0; i < F.nkernels; i++)
        free(F.kernels[i].name);
    free(F.kernels);
    for (int d = 0; d < F.ngpus; d++)
        free_allocs(d);
    memset(&F, 0, sizeof F);
}
