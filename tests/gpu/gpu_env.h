/* Where the GPU tests run: on the GPUs (the driver found by the loader), or
 * on the stand-in CUDA libraries of tests/fakecuda/ (CI has no GPU), whose
 * driver runs each kernel as its host emulation (tests/cg_host.h), registered
 * by name before the program is opened. */
#ifndef GNC_GPU_ENV_H
#define GNC_GPU_ENV_H

#include <stddef.h>

#include "cg_host.h"
#include "cuda.h"

typedef struct {
    const char *fake;           /* the stand-ins' folder, or NULL: the GPUs */
    const char *workdir;        /* where host emulations are built */
    int gpus;                   /* how many the driver sees */
    void *driver;               /* the stand-in driver, held open to register kernels */
} gpu_env;

/* 0; 77 with the reason where there is no GPU (or no NVRTC) to run on; -1
 * with a message when the stand-ins do not load. */
int gpu_env_init(gpu_env *e, const char *fake, const char *workdir, char *err, size_t errlen);
void gpu_env_free(gpu_env *e);

typedef struct gpu_host gpu_host;

typedef struct {
    rt_cuda *x;
    gpu_host *host;             /* the stand-ins' kernels, or NULL */
} gpu_run;

/* Program p (compiled) opened on GPUs gpus[d] (NULL: d % count), eagerly or
 * as a CUDA graph.  On the stand-ins its kernels are built for the host and
 * registered first (once for runs of the same program open at once). */
gpu_run *gpu_open(const gpu_env *e, cg_program *p, const int *gpus, int eager, char *err,
                  size_t errlen);
/* The same with every option of rt_cuda_open_ex (its libdir set here), for
 * a program run across processes (o->ranks). */
gpu_run *gpu_open_ex(const gpu_env *e, cg_program *p, const rt_cuda_options *o, char *err,
                     size_t errlen);
void gpu_close(gpu_run *r);

#endif
