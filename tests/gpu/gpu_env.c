/* The GPU tests' environment (gpu_env.h). */
#include "gpu_env.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef const char *(*emu_entry)(const unsigned *grid, const unsigned *block, void **args);
typedef int (*register_fn)(const char *name, emu_entry entry);

/* A program's host emulation, shared by the runs of it that are open. */
struct gpu_host {
    const cg_program *p;
    cg_host *h;
    int refs;
};

static gpu_host *shared;        /* the last one built, while it is open */

int gpu_env_init(gpu_env *e, const char *fake, const char *workdir, char *err, size_t errlen)
{
    e->fake = fake;
    e->workdir = workdir;
    e->driver = NULL;
    if (!cg_have_nvrtc()) {
        snprintf(err, errlen, "this build has no NVRTC");
        return 77;
    }
    e->gpus = rt_cuda_gpu_count(fake, err, errlen);
    if (e->gpus < 0)
        return fake ? -1 : 77;
    if (fake) {
        char path[4096];
        snprintf(path, sizeof path, "%s/libcuda.so.1", fake);
        e->driver = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!e->driver || !dlsym(e->driver, "fakecuda_register")) {
            snprintf(err, errlen, "%s is not the stand-in driver: %s", path,
                     e->driver ? "no fakecuda_register" : dlerror());
            return -1;
        }
    }
    return 0;
}

void gpu_env_free(gpu_env *e)
{
    if (e->driver)
        dlclose(e->driver);
    e->driver = NULL;
}

gpu_run *gpu_open(const gpu_env *e, cg_program *p, const int *gpus, int eager, char *err,
                  size_t errlen)
{
    rt_cuda_options o = {0};
    o.eager = eager;
    o.gpus = gpus;
    o.share = 1; /* the tests run programs of more devices than GPUs, sharing them */
    return gpu_open_ex(e, p, &o, err, errlen);
}

gpu_run *gpu_open_ex(const gpu_env *e, cg_program *p, const rt_cuda_options *options, char *err,
                     size_t errlen)
{
    gpu_run *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (e->fake && shared && shared->p == p) {
        r->host = shared;
        shared->refs++;
    } else if (e->fake) {
        register_fn reg;
        *(void **)&reg = dlsym(e->driver, "fakecuda_register");
        r->host = calloc(1, sizeof *r->host);
        if (!r->host || !(r->host->h = cg_host_build(&p, 1, e->workdir, err, errlen))) {
            free(r->host);
            free(r);
            return NULL;
        }
        r->host->p = p;
        r->host->refs = 1;
        shared = r->host;
        for (int k = 0; k < p->nkernels; k++)
            if (reg(p->kernels[k].name, (emu_entry)cg_host_entry(r->host->h, 0, k))) {
                snprintf(err, errlen, "the stand-in driver refuses kernel %s", p->kernels[k].name);
                gpu_close(r);
                return NULL;
            }
    }
    rt_cuda_options o = *options;
    o.libdir = e->fake;
    if (!(r->x = rt_cuda_open_ex(p, &o, err, errlen))) {
        gpu_close(r);
        return NULL;
    }
    return r;
}

void gpu_close(gpu_run *r)
{
    if (!r)
        return;
    rt_cuda_close(r->x);
    if (r->host && --r->host->refs == 0) {
        if (shared == r->host)
            shared = NULL;
        cg_host_free(r->host->h);
        free(r->host);
    }
    free(r);
}
