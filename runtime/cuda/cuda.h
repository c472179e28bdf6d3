/* The GPU executor: runs a compiled cg_program (codegen/codegen.h, after
 * cg_compile) on CUDA GPUs, with the step semantics that tests/cg_host.c
 * emulates on the host.
 *
 *   // given: const cg_program *p, const ir_value *in, const ir_value *y, char *err, size_t n
 *   float data[64], out[64];
 *   rt_cuda *x = rt_cuda_open(p, NULL, err, n);     NULL with a message
 *   rt_cuda_init_params(x, 1, err, n);              or rt_cuda_write each
 *   rt_cuda_write(x, -1, in, data, err, n);         floats as float
 *   rt_cuda_run(x, err, n);                         init steps when due, one run
 *   rt_cuda_read(x, 0, y, out, err, n);
 *   rt_cuda_close(x);
 *
 * Overlapping the next batch's copy with the current run:
 *
 *   // given: rt_cuda *x, const ir_value *in, const ir_value *loss, char *err, size_t n
 *   float next[64], l;
 *   rt_cuda_launch(x, err, n);                      the run starts, the call returns
 *   rt_cuda_prefetch(x, -1, in, next, err, n);      on the copy stream, into staging
 *   rt_cuda_wait(x, err, n);                        the run's end, its status
 *   rt_cuda_read(x, 0, loss, &l, err, n);           the next launch puts `next` in place
 *
 * Libraries are loaded with dlopen at run time (libcuda.so.1), so that a gnc
 * built with the CUDA toolkit still runs where there is no GPU: opening then
 * fails with "no CUDA driver (libcuda.so.1)".  Errors are return values with
 * messages; nothing is printed and nothing exits.
 *
 * Every kind of step runs: kernels, copies, cuBLASLt matmuls, cuDNN
 * convolutions, NCCL communication between the program's devices (one GPU
 * each; in one process, or one device per process, MPI's ranks, with
 * rt_cuda_options.ranks).  None of it has run on a real GPU yet; CI runs it on
 * stand-in libraries (tests/fakecuda/, docs/runtime.md). */
#ifndef GNC_CUDA_H
#define GNC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "program.h"
#include "exec.h"

typedef struct rt_cuda rt_cuda;

/* What ties the processes of one program together: NCCL's unique id, made by
 * rank 0 (rt_cuda_unique_id) and sent to the others (MPI_Bcast of its bytes). */
typedef struct {
    char bytes[128];
} rt_cuda_id;

typedef struct {
    const int *gpus;            /* program device d -> CUDA ordinal (several devices on
                                   one GPU: they share it); NULL: device d on GPU d, and
                                   fewer GPUs than this process drives devices is an
                                   error naming both counts unless share is set */
    int share;                  /* gpus NULL: device d on GPU d % count, devices sharing
                                   GPUs where they are fewer (docs/runtime.md) */
    int eager;                  /* launch step by step instead of replaying a CUDA graph;
                                   also where $GNC_CUDA_EAGER is 1.  Either way the first
                                   run is eager, and so is every run of a program that
                                   drives several GPUs through NCCL from this process
                                   (docs/runtime.md, CUDA graphs) */
    const char *libdir;         /* the folder of libcuda.so.1, libcublasLt.so.13,
                                   libcudnn.so.9 and libnccl.so.2; NULL: $GNC_CUDA_LIBDIR,
                                   else the dynamic loader's search path (tests name a
                                   folder of stand-ins, or one that does not exist) */
    int ranks;                  /* 0 or 1: every device of the program in this process; N:
                                   N processes (MPI ranks) run the program's N devices, */
    int rank;                   /* this one device `rank`, with NCCL communicators across */
    const rt_cuda_id *id;       /* the processes from rank 0's id (ranks > 1) */
} rt_cuda_options;

/* Rank 0's part of opening a program across processes: NCCL's unique id
 * (ncclGetUniqueId of libnccl.so.2 in libdir, as in rt_cuda_options).  0, or
 * -1 with a message. */
int rt_cuda_unique_id(const char *libdir, rt_cuda_id *id, char *err, size_t errlen);

/* 0 when the driver (in libdir, as in rt_cuda_options) loads, initializes and
 * sees a GPU; else -1 with a message. */
int rt_cuda_probe(const char *libdir, char *err, size_t errlen);
/* The NVIDIA libraries gnc loads, for gnc --version: the i-th one's file
 * name (libcuda.so.1, libcublasLt.so.13, ...) and what it is for, or NULL past
 * the last (at once in a build without the CUDA runtime).  Whether it loads
 * now from libdir (as in rt_cuda_options): 1, or 0 with the loader's reason. */
const char *rt_cuda_library(int i, const char **what);
int rt_cuda_library_loads(const char *libdir, const char *name, char *why, size_t len);
/* The number of GPUs the driver sees, or -1 with a message (as rt_cuda_probe). */
int rt_cuda_gpu_count(const char *libdir, char *err, size_t errlen);

/* What the driver says of GPU ordinal: its name, compute capability,
 * multiprocessors, memory (free as its primary context sees it), and the
 * driver's CUDA version (13000 for 13.0).  0, or -1 with a message. */
typedef struct {
    char name[128];
    int major, minor, sms;
    uint64_t free_bytes, total_bytes;
    int driver_version;
} rt_cuda_gpu;
int rt_cuda_gpu_describe(const char *libdir, int ordinal, rt_cuda_gpu *out, char *err,
                         size_t errlen);

rt_cuda *rt_cuda_open(const cg_program *p, const int *gpus, char *err, size_t errlen);
rt_cuda *rt_cuda_open_ex(const cg_program *p, const rt_cuda_options *o, char *err,
                         size_t errlen);
void rt_cuda_close(rt_cuda *x);

/* What went wrong without failing, for the caller to tell the user: a run
 * that could not be captured into a CUDA graph (this run and the next ones
 * then launch step by step).  NULL when nothing did. */
const char *rt_cuda_warning(const rt_cuda *x);

/* How the runs launch now: 0 step by step, 1 by replaying one CUDA graph of
 * every device, or the number of graphs, one a device, each launched by its
 * device's host thread (one process driving several GPUs through NCCL). */
int rt_cuda_graphs(const rt_cuda *x);

/* Whether a device of this process holds v (all of them but one are in
 * other processes when the program runs across processes). */
int rt_cuda_holds(const rt_cuda *x, const ir_value *v);

/* Value v of program device d (-1: every device of this process that holds
 * it) from or to the host, in the CPU executor's layout (floats as float,
 * integers as themselves), converted to or from its storage dtype.  0, or -1
 * with a message when no such device holds v, d runs in another process, or
 * a copy fails. */
int rt_cuda_write(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                  size_t errlen);
/* Input v's value for the next launch, copied on the copy stream while a
 * launched run goes on; data may be reused when it returns. */
int rt_cuda_prefetch(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                     size_t errlen);
int rt_cuda_read(rt_cuda *x, int device, const ir_value *v, void *out, char *err, size_t errlen);

/* Every parameter, buffer and state value from its initializer, the values
 * rt_exec_init_params gives with the same seed (filled on the host by
 * ir_init_fill, then uploaded). */
int rt_cuda_init_params(rt_cuda *x, uint64_t seed, char *err, size_t errlen);

/* Runs the init steps when due (first run, after parameters were written),
 * then one run; then checks each device's status word and reports an index
 * or label out of range as the CPU executor does.  0, or -1 with a message.
 * rt_cuda_run is rt_cuda_launch (returns once the run is issued) and then
 * rt_cuda_wait (its end and status).  A write or read waits for the run in
 * flight first. */
int rt_cuda_run(rt_cuda *x, char *err, size_t errlen);
int rt_cuda_launch(rt_cuda *x, char *err, size_t errlen);
int rt_cuda_wait(rt_cuda *x, char *err, size_t errlen);

/* The deadline of a wait for a run that makes NCCL calls, in seconds (0 or
 * less: 300, the CPU executor's RT_TIMEOUT_DEFAULT).  Such a wait polls its
 * streams (cuStreamQuery) with backoff and asks NCCL for asynchronous errors
 * (ncclCommGetAsyncError) between polls, instead of synchronizing, which
 * would last for ever when a peer never comes (another process stopped, a
 * GPU hung).  At an asynchronous error or past the deadline every NCCL
 * communicator of this process is aborted (ncclCommAbort) and the wait fails
 * with "device D (rank R): waited S s for all_reduce 5 (with devices 0, 1):
 * giving up; NCCL's communicators aborted", naming the first communication
 * step of the run not done where the GPU tells; every later run fails at
 * once.  A run without NCCL synchronizes as before. */
void rt_cuda_set_timeout(rt_cuda *x, double seconds);

/* Profiling (gnc run/train --profile=FILE on cuda): with on, every later
 * run is launched step by step (a CUDA graph's nodes cannot be timed one by
 * one), each step of this process's devices between two timing events on
 * its stream (compute, or communication), and waiting for the run reads
 * them.  rt_cuda_events: every step with an IR node timed since profiling
 * was turned on, device by device in each run, as the CPU executor's
 * rt_exec_events: start_ms and end_ms are milliseconds since the run's
 * first event on that device (its compute stream, once the run may start)
 * added to the run's launch on CLOCK_MONOTONIC (or to the end of the
 * device's previous run, where later), so that the runs follow each other
 * in one timeline; a device's clock is its own, the devices' tracks are
 * aligned at the launch.  RT_MAX_EVENTS at most; owned by x. */
void rt_cuda_set_profile(rt_cuda *x, int on);
const rt_event *rt_cuda_events(const rt_cuda *x, int *n);

/* gnc compile --autotune: runs each library step of p (the program x was
 * opened on, compiled for this GPU) with every candidate algorithm, times
 * them (cuBLASLt: the heuristic's first 8, 10 calls each; cuDNN: its
 * cudnnFind*AlgorithmEx), and records the fastest in p's steps, where a plan
 * file keeps them.  It overwrites the activations; call it before running.
 * 0, or -1 with a message. */
int rt_cuda_autotune(rt_cuda *x, cg_program *p, char *err, size_t errlen);

/* gnc compile --conv auto --autotune: the mean milliseconds of each
 * convolution of the program x runs (every step of its node, alone on the
 * compute stream: a cuDNN call, or its implicit-GEMM launches, with a
 * conversion of the result after), over 10 runs after a warm-up, added to
 * ms[id of the node's first result] (ms: the graph's nvalues entries).  The
 * runs overwrite activations, like rt_cuda_autotune's.  0, or -1 with a
 * message. */
int rt_cuda_time_convs(rt_cuda *x, double *ms, char *err, size_t errlen);

/* The bytes of device d's allocation of region r (what was allocated). */
int64_t rt_cuda_region_bytes(const rt_cuda *x, int d, cg_region r);

/* Device d's memory (gnc run and train print it beside the plan): what gnc
 * allocated on it, region by region (cuMemAlloc's sizes: the plan's arena,
 * parameters, inputs, and the workspace, which holds cuBLASLt's and cuDNN's
 * workspaces and converted operands), the prefetch staging, the mailbox of
 * the messages it receives, the local collectives' scratch and the zeros of
 * fused convolutions; the libraries' reserve as estimated before they load
 * (rt_cuda_reserve: an estimate, not an allocation gnc knows the size of);
 * and, measured, how much less the driver reports free now than before the
 * device's first allocation (cuMemGetInfo): all of the above as they are
 * now, the libraries' own (handles, loaded kernels, NCCL's buffers) and the
 * context's growth, another process's allocations on the GPU too.  0; 1
 * for a device another process runs (nothing filled); -1 with a message
 * when the program has no device d or the driver fails. */
typedef struct {
    int64_t region[CG_NREGIONS];
    int64_t staging, mailbox, scratch, zeros;
    int64_t reserve;
    int64_t used;
} rt_cuda_mem;
int rt_cuda_memory(rt_cuda *x, int d, rt_cuda_mem *m, char *err, size_t errlen);

/* The fp16 loss scaler's state on device d after the last run waited for
 * (GradScaler's get_scale): its scale and the good steps since it last
 * changed; scale 0 where the program has no scaler (not fp16).  0; 1 for a
 * device another process runs; -1 with a message. */
int rt_cuda_loss_scale(rt_cuda *x, int d, float *scale, int *good, char *err, size_t errlen);

/* The check made before allocating: device d (named name) needs the sum of
 * region_bytes and reserve (what the libraries allocate for themselves,
 * rt_cuda_reserve), free bytes are free.  0 when it fits, else -1 with the
 * numbers in MiB.  Pure, for tests. */
int rt_cuda_check_memory(int d, const char *name, const int64_t region_bytes[CG_NREGIONS],
                         uint64_t reserve, uint64_t free, char *err, size_t errlen);

/* The NCCL communicators a device is in: the world (0: no NCCL step at
 * all), the splits of it for its collectives' other groups (made with
 * splitShare), and the peers of its sends and receives (on the world). */
typedef struct {
    int world, splits, peers;
} rt_cuda_nccl_use;

#define RT_CUDA_NCCL_CHANNELS 16     /* channels where NCCL_MAX_NCHANNELS is unset */
#define RT_CUDA_NCCL_FIXED_MIB 16    /* a communicator's structures beside its buffers */

/* NCCL's own memory on a device that uses u, from its buffers: per channel
 * (NCCL_MAX_NCHANNELS, else RT_CUDA_NCCL_CHANNELS) two receiving
 * connections (ring and tree), each with a buffer per protocol (Simple's
 * NCCL_BUFFSIZE, 4 MiB unset; LL's 512 KiB; LL128's 4.6875 MiB); per peer
 * of a send or receive, Simple's and LL's on NCCL_MAX_P2P_NCHANNELS
 * channels (2 unset); RT_CUDA_NCCL_FIXED_MIB per communicator.  An
 * estimate (docs/runtime.md, "Memory"), measured on no GPU yet. */
uint64_t rt_cuda_nccl_reserve(const rt_cuda_nccl_use *u);

/* The memory the CUDA libraries take on device d beside the plan's regions,
 * as estimated before they load: 256 MiB when the device has cuBLASLt or
 * cuDNN steps (handles, the kernels they load), and NCCL's
 * (rt_cuda_nccl_reserve of u; NULL: none); or $GNC_CUDA_RESERVE_MIB, where
 * set.  docs/runtime.md says where the numbers come from.  Pure, for tests. */
uint64_t rt_cuda_reserve(const cg_program *p, int d, const rt_cuda_nccl_use *u);

/* The message of a status word as the CPU executor words it; node is the
 * step's IR node (a fused node's first member). */
void rt_cuda_status_message(const cg_status *st, const ir_node *node, char *err, size_t errlen);

/* ---- cuDNN's timed choices, kept on disk (choices.c) ----
 * At open the runtime times each convolution's algorithms (cudnnFind) and
 * keeps the choice per GPU, cuDNN version and problem under the cache folder
 * (base_cache_dir: cudnn/HASH.txt, the key's text, then "algo A math M ms T").
 * These need no GPU. */

/* The text of convolution c's problem: what decides cuDNN's choice but the
 * GPU and the library (the call, shapes, pads, strides, dilation, groups,
 * type, math, layout, workspace, determinism). */
void rt_cudnn_problem(const cg_conv *c, char *out, size_t len);
/* The choice kept under key ("gpu NAME, cudnn VERSION, PROBLEM"): 0 with
 * *algo, *math, *ms; -1 where none holds (none, damaged, another key). */
int rt_cudnn_choice_read(const char *key, int *algo, int *math, double *ms);
/* Keeps a choice under key, whole or not at all (silent where the folder
 * cannot be written: it is only timed again). */
void rt_cudnn_choice_write(const char *key, int algo, int math, double ms);
/* Calls fn for each choice kept for c's problem, on any GPU and cuDNN
 * version (where: "NAME, cudnn VERSION").  Returns how many. */
typedef void (*rt_cudnn_kept_fn)(void *ctx, const char *where, int algo, double ms);
int rt_cudnn_kept(const cg_conv *c, rt_cudnn_kept_fn fn, void *ctx);

#endif
