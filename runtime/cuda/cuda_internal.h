/* What runtime/cuda/cuda.c (the driver, memory, scheduling, graphs) and
 * runtime/cuda/cuda_lib.c (cuBLASLt, cuDNN, NCCL) share.  Only compiled with the
 * toolkit's headers (GNC_HAVE_CUDA_DRIVER).  docs/runtime.md explains it. */
#ifndef GNC_CUDA_INTERNAL_H
#define GNC_CUDA_INTERNAL_H

#include <cuda.h>
#include <pthread.h>

#include "base.h"
#include "cuda.h"


/* dlopen of an NVIDIA library, for good: never dlclose'd (cuda.c says why). */
void *cuda_dlopen(const char *path);

/* libdir/soname, or soname alone (the loader's search path) when libdir is
 * NULL and $GNC_CUDA_LIBDIR is unset, into path. */
const char *cuda_lib_path(const char *libdir, const char *soname, char *path, size_t len);

/* ---- the driver: every entry point used, once.  The names are cuda.h's
 * macros where it has them (cuMemAlloc is cuMemAlloc_v2): the member and the
 * symbol both expand. */
#define DRIVER_FNS(X) X(cuInit) X(cuGetErrorString) X(cuDriverGetVersion) X(cuDeviceGetCount) \
    X(cuDeviceGet) X(cuDeviceTotalMem) \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuCtxSetCurrent) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync) \
    X(cuMemsetD8Async) \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuStreamCreate) \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent) X(cuEventCreate) \
    X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) X(cuLaunchKernel) X(cuStreamBeginCapture) \
    X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) \
    X(cuGraphExecDestroy)

typedef struct {
    void *so;
#define CUDA_MEMBER(f) __typeof__(f) *f;
    DRIVER_FNS(CUDA_MEMBER)
#undef CUDA_MEMBER
} cuda_driver;

/* The checking macro of every driver call, in a function with x, err and
 * errlen in scope: the call, its site, the driver's words. */
#define CU(call)                                                                     \
    do {                                                                             \
        CUresult cu_r_ = (x->L.call);                                                \
        if (cu_r_ != CUDA_SUCCESS) {                                                 \
            const char *cu_s_ = "?";                                                 \
            x->L.cuGetErrorString(cu_r_, &cu_s_);                                    \
            return base_fail(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cu_s_); \
        }                                                                            \
    } while (0)

/* ---- the executor's state */

/* Streams per device: compute, communication (every NCCL call, in program
 * order), copies from the host. */
enum { S_COMPUTE, S_COMM, S_COPY, S_N };

typedef struct cuda_libs cuda_libs;     /* cuda_lib.c: the libraries' entry points */
typedef struct cuda_step_lib cuda_step_lib;   /* cuda_lib.c: a library step, prepared */

/* A point-to-point message between devices of one process, its place on the
 * receiver: the sender copies into it when it reaches its send, the receiver
 * out of it at its recv (across processes messages are NCCL calls straight
 * into the receiver's buffer: no mailbox). */
typedef struct {
    int init;                   /* of the init steps */
    int64_t id;                 /* the send/recv pair's id */
    int64_t offset, bytes;      /* in the receiver's mailbox */
    int sender;                 /* the device that sends it */
    CUevent sent;               /* recorded after the copy into the mailbox */
    int issued;                 /* the send was issued in this run */
} cuda_message;

typedef struct {
    int ordinal;
    char name[128];
    CUcontext ctx;
    CUstream stream[S_N];
    CUdeviceptr region[CG_NREGIONS];
    int64_t bytes[CG_NREGIONS];
    CUdeviceptr staging;        /* the next run's inputs, prefetched (region CG_INPUTS' size) */
    unsigned char *pinned;      /* page-locked host memory of staging's size, which the
                                   prefetches copy from, or NULL */
    int pinned_busy;            /* a copy out of pinned may not have read it yet */
    CUmodule *modules;
    CUfunction *functions;      /* by kernel index */
    void ***args[2];            /* [init][step]: a kernel step's kernelParams, or NULL */
    CUevent *done[2];           /* [init][step]: recorded after a step another waits for */
    CUevent fork, join[S_N], prefetched, staged;
    cuda_step_lib **lib[2];     /* [init][step]: a library step's state, or NULL */
    void *blas, *dnn;           /* this device's cuBLASLt and cuDNN handles */
    CUdeviceptr zeros;          /* float zeros for a fused convolution without bias */
    int64_t zeros_bytes;
    CUevent tail, coll;         /* local collectives: this device's communication stream
                                   so far; the end of one it led */
    CUdeviceptr scratch;        /* local collectives it leads: operands from the others */
    int64_t scratch_bytes;
    CUdeviceptr mailbox;        /* the messages this device receives */
    int64_t mailbox_bytes;
    uint64_t free_at_open;      /* cuMemGetInfo's free bytes before anything was allocated
                                   (rt_cuda_memory) */
    int nmessages;
    cuda_message *messages;
    CUgraphExec graph;          /* threads: this device's captured run, once captured */
    CUevent *marks;             /* profiling, with timing: [0] a run's start, [1 + 2s] and
                                   [2 + 2s] run step s's begin and end; NULL until then */
    double marked_until;        /* the end of its last timed step in rt_cuda_events */
} cuda_gpu;

/* One process driving several GPUs through NCCL (cuda.c, "A thread per
 * device"): a host thread per device, each doing the pool's job for its
 * device when generation moves on, the last to finish signalling done. */
typedef struct cuda_pool cuda_pool;
typedef struct {
    cuda_pool *pool;
    rt_cuda *x;
    int d, rc;                  /* the device, its last job's result */
    pthread_t thread;
    char err[512];              /* why its last job failed */
} cuda_worker;

struct cuda_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned generation;        /* moves on with each job */
    int job, pending, quit;     /* the job; workers still at it; stop */
    cuda_worker *workers;
    int nworkers;               /* started */
};
/* Ends the pool's threads (none running a job) and frees it. */
void cuda_pool_stop(rt_cuda *x);

/* A prefetched range of the inputs region: staging -> inputs at the next launch. */
typedef struct {
    int device;
    int64_t offset, bytes;
} cuda_pending;

struct rt_cuda {
    const cg_program *p;
    cuda_driver L;
    cuda_libs *libs;
    int eager;                  /* no CUDA graph: asked for, or since a capture failed */
    int warm;                   /* a run was issued: the next may be captured */
    char warning[512];          /* rt_cuda_warning's, or "" */
    int rank;                   /* the one program device this process runs (the others
                                   are other processes'), or -1: all of them */
    int local_comm;             /* two program devices share a GPU: collectives are
                                   copies and reduction kernels, not NCCL */
    cuda_pool *pool;            /* threads: the devices' threads, from the first run */
    int threads;                /* one process drives several GPUs through NCCL: each
                                   device's steps are issued, captured and launched by
                                   a host thread of its own (cuda.c, "A thread per
                                   device"), its messages NCCL's too */
    int init_due;               /* the init steps run before the next run */
    int in_flight;              /* launched, not waited for */
    double timeout_s;           /* rt_cuda_set_timeout: the deadline of an NCCL wait; 0: the
                                   default */
    int aborted;                /* a wait passed it: NCCL's communicators were aborted */
    cuda_gpu *dev;
    CUgraphExec graph;          /* the captured run, once captured */
    int npending;
    cuda_pending *pending;      /* [number of inputs x devices] at most */
    int profile;                /* rt_cuda_set_profile: runs are eager and timed */
    int timed;                  /* the run in flight records the marks */
    double launched_ms;         /* its launch, CLOCK_MONOTONIC */
    rt_event *events;           /* rt_cuda_events */
    int nevents, cap_events;
};

/* Whether program device d runs in this process. */
static inline int cuda_mine(const rt_cuda *x, int d)
{
    return x->rank < 0 || x->rank == d;
}

static inline CUdeviceptr cuda_ptr(const cuda_gpu *G, cg_ref r)
{
    return G->region[r.region] + (CUdeviceptr)r.offset;
}

/* ---- cuda_lib.c */

/* Loads the libraries program p needs (cuBLASLt for gemm steps, cuDNN for
 * convolutions, NCCL for communication) from libdir, creates per-device
 * handles and communicators (across processes from id), and prepares every library step: descriptors
 * and algorithms chosen once, by heuristics (never timed).  0, or -1 with a
 * message naming the step. */
int cuda_libs_open(rt_cuda *x, const char *libdir, const rt_cuda_id *id, char *err,
                   size_t errlen);
/* Whether x drives devices through NCCL (loaded by cuda_libs_open). */
int cuda_libs_nccl(const rt_cuda *x);
/* -1 with NCCL's words when a communicator of this process has an
 * asynchronous error (ncclCommGetAsyncError: a peer gone, a network
 * failure); else 0.  cuda_libs_abort: every communicator of this process
 * aborted (ncclCommAbort: its operations still running on the GPUs end,
 * their results undefined) and forgotten, so that later NCCL calls fail and
 * none is destroyed again. */
int cuda_libs_async_error(rt_cuda *x, char *err, size_t errlen);
void cuda_libs_abort(rt_cuda *x);
void cuda_libs_close(rt_cuda *x);

/* fn(x, d, t0, t1, arg, ...) for each device d of this process, in its
 * context, with two timing events of its own; the first failure's -1. */
typedef int (*cuda_timed_fn)(rt_cuda *x, int d, CUevent t0, CUevent t1, void *arg, char *err,
                             size_t errlen);
int cuda_each_timed(rt_cuda *x, cuda_timed_fn fn, void *arg, char *err, size_t errlen);

/* Times each library step of the run (rt_cuda_autotune) and records the
 * fastest algorithm in the step (p is x's program). */
int cuda_libs_autotune(rt_cuda *x, cg_program *p, char *err, size_t errlen);

/* Issues library step s of device d (a gemm or a convolution) on stream st. */
int cuda_lib_issue(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *prepared, CUstream st,
                   char *err, size_t errlen);

/* Whether communication step c goes through NCCL: across processes, or
 * where one process's threads drive the GPUs (cuda.c), every one; else the
 * collectives, unless devices share a GPU (then copies and reduction
 * kernels), and no message (a peer copy). */
int cuda_by_nccl(const rt_cuda *x, const cg_comm *c);

/* Issues one communication call: steps[i] of devices devs[i], i < n, the
 * members of one collective (or a send and its recv), in one NCCL group,
 * each on its device's communication stream. */
int cuda_comm_issue(rt_cuda *x, int n, const int *devs, const cg_step *const *steps,
                    char *err, size_t errlen);

/* Across processes: device d's (this process's) sends and receives steps[s]
 * .. steps[e - 1], to and from other processes' devices, straight between
 * their buffers, on stream st and the world communicator, in one NCCL group
 * (cg_p2p_batch_end's batch). */
int cuda_comm_p2p(rt_cuda *x, int d, const cg_step *steps, int s, int e, CUstream st,
                  char *err, size_t errlen);

#endif
