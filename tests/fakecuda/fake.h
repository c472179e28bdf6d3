/* The core of the host-memory stand-ins for the CUDA libraries
 * (docs/runtime.md, "Testing without a GPU").  libcuda.so.1 (driver.c) holds
 * the one copy of the state: devices, contexts, allocations, streams and their
 * queues, events, captures.  The fakes of cuBLASLt, cuDNN and NCCL link it and
 * put their work on streams through this interface, so that library calls are
 * ordered, captured and replayed like kernels.
 *
 * A task is a unit of work on a stream's queue.  It runs when it is at the
 * head of its queue and ready() says so (NULL: always); run() does the work
 * on host memory.  Tasks are shared (a captured graph replays the same task
 * many times), so whatever changes per execution lives in the queue entry's
 * state, which ready() and run() receive and which starts NULL.
 *
 * Threads: every entry point of the fakes (FK_API) holds one recursive lock
 * of the process for its whole call, so threads may drive them at once, as
 * the real libraries allow, each call atomic; the work a call finds ready
 * runs under it too.  What CUDA and NCCL keep per thread is kept per thread
 * (FK_TLS): the current context, captures' threads, NCCL's group.  The
 * helpers below are called by entry points, under the lock. */
#ifndef GNC_FAKECUDA_H
#define GNC_FAKECUDA_H

#include <cuda.h>
#include <library_types.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fk_task fk_task;

/* Thread-local storage of the fakes: static (initial-exec), none of the
 * dynamic TLS of a dlopened library that LeakSanitizer walks at exit (its
 * tracer has crashed there). */
#define FK_TLS __thread __attribute__((tls_model("initial-exec")))

/* The process's lock, taken by FK_API for the rest of the enclosing
 * function: the first statement of every entry point. */
void fk_enter(void);
void fk_leave(int *scope);
#define FK_API int fk_scope_ __attribute__((cleanup(fk_leave), unused)) = (fk_enter(), 0)

/* 0, or a CUresult with the reason in why (printed, made sticky). */
typedef int (*fk_run_fn)(void *ctx, void **state, char *why, size_t whylen);
/* What ready() returns: 0 while the task waits on work of this process (when
 * nothing else can run, a synchronizing call reports a deadlock), 1 when it
 * may run, FK_WAIT_REMOTE while it waits on another process (NCCL ranks
 * there): synchronizing calls then poll, sleeping briefly between visits,
 * instead of reporting a deadlock.  Such a task must become ready in bounded
 * time, failing in run() when it gives up (its own timeout). */
typedef int (*fk_ready_fn)(void *ctx, void **state);
#define FK_WAIT_REMOTE 2

/* A new task (one reference, owned by the caller until fk_enqueue). what
 * names it in messages; release frees ctx with the last reference; free_state
 * frees a queue entry's state (may be NULL). */
fk_task *fk_task_new(const char *what, fk_run_fn run, fk_ready_fn ready, void *ctx,
                     void (*release)(void *ctx),
                     void (*free_state)(void *ctx, void *state));
void fk_task_unref(fk_task *t);

/* What running t costs on its device's clock, which cuEventElapsedTime
 * reads (driver.c, "time"): a kernel's GNC_FAKECUDA_KERNEL_MS (an
 * implicit-GEMM kernel's GNC_FAKECUDA_IGEMM_MS), a library call's
 * GNC_FAKECUDA_LIBRARY_MS (a cuDNN call on a KRSC filter's
 * GNC_FAKECUDA_NHWC_MS); tasks cost nothing unless told. */
typedef enum {
    FK_COST_NONE, FK_COST_KERNEL, FK_COST_IGEMM, FK_COST_LIBRARY, FK_COST_LIBRARY_NHWC,
    FK_NCOSTS
} fk_cost;
void fk_task_cost(fk_task *t, fk_cost c);

/* Puts t on stream s (recorded instead when s is capturing) and takes the
 * reference.  Fails when s is not a live stream of the current context or
 * the device has a sticky error; t is released then too. */
CUresult fk_enqueue(CUstream s, fk_task *t);

/* The same for a library that works on device dev whatever the current
 * context (NCCL): s must be a live stream of dev (NULL: dev's legacy
 * stream), dev's primary context active. */
CUresult fk_enqueue_dev(int dev, CUstream s, fk_task *t);

/* Whether stream s is capturing: 0, or its capture's id (the same for every
 * stream of one capture).  The legacy stream (NULL) never captures. */
uintptr_t fk_stream_capture(CUstream s);
/* The GPU whose NCCL calls s's capture holds: dev, which it becomes, where
 * it holds none yet (or s does not capture). */
int fk_capture_nccl(CUstream s, int dev);
/* A library refused a call on s while it captures: the capture is
 * invalidated (cuStreamEndCapture fails), as after a refused driver call. */
void fk_capture_refuse(CUstream s);

/* The device ordinal of stream s, -1 when s is not a live stream. */
int fk_stream_device(CUstream s);
/* CUDA_SUCCESS when s may be used now: live, of the current context. */
CUresult fk_stream_check(CUstream s);
/* The device of context c (-1 when not an active context). */
int fk_context_device(CUcontext c);

/* 0 when [p, p + bytes) lies in one live allocation of device dev; else -1
 * after printing "fakecuda: who: what ..." to stderr. */
int fk_check_range(int dev, const void *p, size_t bytes, const char *who, const char *what);

/* Runs what can run, as after every driver call (eager schedule); the
 * libraries call it after queueing. */
void fk_progress(void);

/* Element i of an array of CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF values. */
double fk_load(const void *base, int64_t i, cudaDataType t);
void fk_store(void *base, int64_t i, cudaDataType t, double v);
/* Bytes of one element of such a type; 0 for other types. */
size_t fk_type_size(cudaDataType t);

/* The test's registration of a kernel's host emulation (by its name):
 * args[i] points at the i-th argument as for cuLaunchKernel; a non-NULL
 * return is the failure's message.  Registrations live as long as the library
 * stays loaded: a test keeps its own dlopen handle, so that an executor's
 * dlclose does not unload the fake (and forget them) between runs. */
typedef const char *(*fk_kernel)(const unsigned *grid, const unsigned *block, void **args);
int fakecuda_register(const char *name, fk_kernel entry);

/* Peer copies between two GPUs neither of which has peer access to the
 * other (the driver stages them through the host), since the library
 * loaded: a test that they are direct. */
long fakecuda_staged_peer_copies(void);

#endif
