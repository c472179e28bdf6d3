/* A session: one program run on one kind of device through one interface,
 * the CPU executor (exec.h) or the GPU executor (cuda.h), for libgnc
 * (runtime/api/api.c) and the gnc commands that run programs.
 *
 *   // given: const rt_plan *plan, const ir_value *v, const void *data, const ir_value *output
 *   char err[512];
 *   rt_session_options o = {.device = RT_DEVICE_CUDA, .seed = 1};
 *   rt_session *s = rt_session_open(plan, &o, err, sizeof err);   NULL: err says why
 *   rt_session_set_input(s, v, data, err, sizeof err);             each input
 *   rt_session_run(s, err, sizeof err);                            or set_train first
 *   float *y = rt_session_data(s, output);                         the host copy
 *   rt_session_save(s, "ckpt.safetensors", NULL, err, sizeof err);   checkpoints
 *   rt_session_free(s);
 *
 * A session always keeps a CPU executor of the program, the host copy: it
 * fills the parameters from their initializers, holds the inputs as set and
 * the outputs and loss of the last run, and is what checkpoints are written
 * from and read into.  On the cpu device it also runs the program.  On cuda
 * the session adds the plan's GPU program (rt_plan_program) and an rt_cuda:
 *   open      the driver is probed first (so a machine without one gets "no
 *             CUDA driver (libcuda.so.1): ..." whatever the program), then the
 *             parameters are filled by rt_cuda_init_params with the same seed
 *             (the values rt_exec_init_params gives the host copy), and the
 *             inputs (zeros) uploaded;
 *   inputs    written to the GPU when set;
 *   run       rt_cuda_run, then every output and the loss read back into the
 *             host copy; the parameters, buffers and optimizer state stay on
 *             the GPU, where the steps update them;
 *   save      every value a checkpoint holds (parameters, buffers, optimizer
 *             state) read back into the host copy first (rt_session_pull);
 *   load      into the host copy, then all of them written to the GPU
 *             (rt_session_push).
 * Across processes (o->ranks, under mpirun) the GPU executor runs device
 * o->rank of the program alone, and the host copy is the rank's CPU executor
 * (o->host, rt_exec_new_rank): the values read back and written are this
 * process's device's; rt_exec_gather_params on the host copy, after
 * rt_session_pull, brings rank 0 the rest.
 *
 * Errors are return values with messages; nothing is printed and nothing
 * exits.  A session is used by one thread at a time. */
#ifndef GNC_SESSION_H
#define GNC_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "cuda.h"
#include "device.h"
#include "exec.h"
#include "plan.h"

typedef struct rt_session rt_session;

typedef struct {
    rt_device_kind device;      /* from rt_device_pick */
    uint64_t seed;              /* the parameters' initializers */
    const char *libdir;         /* cuda: the folder of libcuda.so.1 and the libraries
                                   (rt_cuda_options.libdir); NULL: $GNC_CUDA_LIBDIR, else
                                   the dynamic loader's search path */
    int eager;                  /* cuda: launch step by step, no CUDA graph */
    const int *gpus;            /* cuda: program device d on GPU gpus[d] (rt_cuda_options) */
    int share_gpus;             /* cuda, gpus NULL: devices may share GPUs (rt_cuda_options) */
    int ranks, rank;            /* cuda across processes (rt_cuda_options): this process */
    const rt_cuda_id *id;       /* runs device rank of ranks, NCCL's id from rank 0 */
    const cg_program *program;  /* cuda: the plan's GPU program, generated and compiled
                                   already from its program as rt_plan_program would
                                   (the compile driver's, which outlives the session);
                                   NULL: rt_plan_program makes it */
    rt_exec *host;              /* the host copy made elsewhere (an MPI rank's executor,
                                   rt_exec_new_rank), which the session then owns; NULL:
                                   made of the plan */
} rt_session_options;

/* A session of plan p (which must outlive it) on o->device, its parameters
 * filled with o->seed and its inputs zero.  NULL with a message: the cuda
 * device without a driver or GPU (rt_cuda's own words), a plan without
 * kernels, a program the GPU executor cannot run yet, memory. */
rt_session *rt_session_open(const rt_plan *p, const rt_session_options *o, char *err,
                            size_t errlen);
/* A cpu session of an executor made elsewhere (an MPI rank's, or one of a
 * program compiled in this process), of program g; the session owns x from
 * here on and fills its parameters with seed. */
rt_session *rt_session_adopt(const ir_graph *g, rt_exec *x, uint64_t seed);
void rt_session_free(rt_session *s);

/* The deadline of every wait for another device, in seconds (0 or less: the
 * default, RT_TIMEOUT_DEFAULT): the host copy's (rt_exec_set_timeout: virtual
 * devices, MPI ranks, the gather to rank 0) and on cuda the GPU's NCCL waits
 * (rt_cuda_set_timeout). */
void rt_session_set_timeout(rt_session *s, double seconds);

rt_device_kind rt_session_device(const rt_session *s);
/* "cpu" or "cuda" */
const char *rt_session_device_name(const rt_session *s);
/* cuda: what went wrong without failing (rt_cuda_warning: a run that could
 * not be captured into a CUDA graph, the session eager since); else NULL. */
const char *rt_session_warning(const rt_session *s);
/* How a CUDA session's runs launch (rt_cuda_graphs): 0 step by step (and
 * on the CPU), 1 one CUDA graph, N a graph per GPU, each by its thread. */
int rt_session_graphs(const rt_session *s);
/* The host copy: for what only the CPU executor has (profiles, MPI's
 * rt_exec_gather_params).  Values on the GPU are not in it unless read back. */
rt_exec *rt_session_host(rt_session *s);
/* cuda: the GPU executor (for what only it has: rt_cuda_set_profile and
 * rt_cuda_events); cpu: NULL. */
rt_cuda *rt_session_gpu(rt_session *s);
/* The host copy of v (rt_exec_data): an input as last set, an output or the
 * loss as the last run left it. */
void *rt_session_data(rt_session *s, const ir_value *v);

/* Input v from data (in rt_exec_data's layout), or, with data NULL, from its
 * host copy as the caller filled it (rt_session_data).  0, or -1 with a message. */
int rt_session_set_input(rt_session *s, const ir_value *v, const void *data, char *err,
                         size_t errlen);
/* A training step's scalar inputs (AD_INPUT_LR, AD_INPUT_STEP, AD_INPUT_SEED),
 * those the program has. */
int rt_session_set_train(rt_session *s, double lr, int64_t step, uint64_t seed, char *err,
                         size_t errlen);
/* One run; on cuda the outputs and the loss come back to the host copy.  0, or
 * -1 with a message (an index or label out of range, a driver error). */
int rt_session_run(rt_session *s, char *err, size_t errlen);
/* rt_session_run in two halves, so that the next batch is copied while a run
 * goes on: launch (on cuda it returns once the run is issued; on the CPU it
 * runs it), then wait (its end; outputs and loss to the host copy).  Between
 * them rt_session_prefetch sets an input for the next launch: into its host
 * copy, and on cuda onto the GPU on the copy stream. */
int rt_session_launch(rt_session *s, char *err, size_t errlen);
int rt_session_wait(rt_session *s, char *err, size_t errlen);
int rt_session_prefetch(rt_session *s, const ir_value *v, const void *data, char *err,
                        size_t errlen);

/* Every parameter, buffer and optimizer state value from the GPU into the
 * host copy (pull), or from the host copy to the GPU (push: after writing
 * them through rt_session_data; it also marks the host's weights changed,
 * rt_exec_weights_changed).  On cpu, pull does nothing and push only marks. */
int rt_session_pull(rt_session *s, char *err, size_t errlen);
int rt_session_push(rt_session *s, char *err, size_t errlen);

/* rt_checkpoint_save, rt_checkpoint_load and rt_checkpoint_load_weights on
 * the session's program, with the GPU's values read back first, or written
 * after. */
int rt_session_save(rt_session *s, const char *path, const rt_ckpt_meta *meta, char *err,
                    size_t errlen);
int rt_session_load(rt_session *s, const char *path, rt_ckpt_meta *meta, char *err,
                    size_t errlen);
int rt_session_load_weights(rt_session *s, const char *path, char *err, size_t errlen);

#endif
