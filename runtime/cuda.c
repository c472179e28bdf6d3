/* The GPU executor (cuda.h).  What is decided here and why: docs/runtime.md.
 *
 * Open: load libcuda.so.1 with dlopen (the toolkit's cuda.h for the types and
 * prototypes: every entry point is a pointer of __typeof__ the prototype, its
 * symbol the versioned name the header's macros give), cuInit, per program
 * device its GPU's primary context, the free-memory check before anything is
 * allocated, one allocation per region, every module loaded (the cubin for
 * the device's sm_XY or an older minor of its major, else the PTX), kernel
 * functions looked up, three streams (compute, communication, copy), each
 * kernel step's argument block built once (the regions never move).
 *
 * Run: the init steps when due, then one run, eagerly or (by default) captured
 * once into a CUDA graph on device 0's compute stream and replayed; then each
 * device's status word is read back and reported.
 *
 * NOT IMPLEMENTED YET (refused at open, with the step named): cuBLASLt gemm
 * steps, cuDNN convolution steps, NCCL communication steps, and programs of
 * more than one device.  None of this file has run on a GPU: it was written
 * and compiled on a machine without one. */
#include "cuda.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int rt_cuda_check_memory(int d, const char *name, const int64_t region_bytes[CG_NREGIONS],
                         uint64_t free, char *err, size_t errlen)
{
    uint64_t need = 0;
    for (int r = 0; r < CG_NREGIONS; r++)
        need += (uint64_t)(region_bytes[r] > 0 ? region_bytes[r] : 0);
    if (need <= free)
        return 0;
    const double mib = 1024.0 * 1024.0;
    return fail(err, errlen, "device %d (%s): the plan needs %.1f MiB, %.1f MiB free", d, name,
                (double)need / mib, (double)free / mib);
}

void rt_cuda_status_message(const cg_status *st, const ir_node *node, char *err, size_t errlen)
{
    /* the member of the step's (fused) node that checks indices or labels */
    const ir_node *n = node;
    for (; n; n = n->next) {
        if (st->code == CG_STATUS_LABEL &&
            (n->op == IR_OP_CROSS_ENTROPY || n->op == IR_OP_CROSS_ENTROPY_GRAD))
            break;
        if (st->code == CG_STATUS_EMBEDDING_INDEX && n->op == IR_OP_EMBEDDING)
            break;
        if (!node->group || n->group != node->group)
            n = NULL;
        if (!n)
            break;
    }
    if (n && n->op == IR_OP_EMBEDDING) {
        fail(err, errlen, "embedding index %lld at position %lld of '%s' is out of range "
             "[0, %lld)", (long long)st->value, (long long)st->index, n->in[0]->name,
             (long long)n->in[1]->type.dims[0]);
    } else if (n) {
        int grad = n->op == IR_OP_CROSS_ENTROPY_GRAD;
        fail(err, errlen, "cross_entropy label %lld at position %lld of '%s' is out of range "
             "[0, %lld)", (long long)st->value, (long long)st->index, n->in[grad + 1]->name,
             (long long)n->in[grad]->type.dims[1]);
    } else {
        fail(err, errlen, "step %d reports status %d (position %lld, value %lld)", st->step,
             st->code, (long long)st->index, (long long)st->value);
    }
}

#ifndef GNC_HAVE_CUDA_DRIVER

/* A build without the CUDA toolkit's headers: everything is refused. */
#define NO_CUDA "this build of gnc has no CUDA runtime (built without the CUDA toolkit)"

int rt_cuda_probe(const char *libdir, char *err, size_t errlen)
{
    (void)libdir;
    return fail(err, errlen, NO_CUDA);
}

rt_cuda *rt_cuda_open(const cg_program *p, const int *gpus, char *err, size_t errlen)
{
    (void)p, (void)gpus;
    fail(err, errlen, NO_CUDA);
    return NULL;
}

rt_cuda *rt_cuda_open_ex(const cg_program *p, const rt_cuda_options *o, char *err, size_t errlen)
{
    (void)p, (void)o;
    fail(err, errlen, NO_CUDA);
    return NULL;
}

void rt_cuda_close(rt_cuda *x) { (void)x; }

int rt_cuda_write(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                  size_t errlen)
{
    (void)x, (void)device, (void)v, (void)data;
    return fail(err, errlen, NO_CUDA);
}

int rt_cuda_read(rt_cuda *x, int device, const ir_value *v, void *out, char *err, size_t errlen)
{
    (void)x, (void)device, (void)v, (void)out;
    return fail(err, errlen, NO_CUDA);
}

int rt_cuda_init_params(rt_cuda *x, uint64_t seed, char *err, size_t errlen)
{
    (void)x, (void)seed;
    return fail(err, errlen, NO_CUDA);
}

int rt_cuda_run(rt_cuda *x, char *err, size_t errlen)
{
    (void)x;
    return fail(err, errlen, NO_CUDA);
}

int64_t rt_cuda_region_bytes(const rt_cuda *x, int d, cg_region r)
{
    (void)x, (void)d, (void)r;
    return 0;
}

#else

#include <cuda.h>
#include <dlfcn.h>

/* ---------------------------------------------------------------- the driver */

/* Every entry point used, once.  The names are cuda.h's macros where it has
 * them (cuMemAlloc is cuMemAlloc_v2): the member and the symbol both expand. */
#define DRIVER_FNS(X) X(cuInit) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuStreamCreate) \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuLaunchKernel) X(cuStreamBeginCapture) \
    X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) \
    X(cuGraphExecDestroy)

#define XSTR(x) STR(x)
#define STR(x) #x

typedef struct {
    void *so;
#define MEMBER(f) __typeof__(f) *f;
    DRIVER_FNS(MEMBER)
#undef MEMBER
} driver;

/* Library soname from folder libdir (NULL: $GNC_CUDA_LIBDIR, else none: the
 * loader's search path) into path. */
static const char *lib_path(const char *libdir, const char *soname, char *path, size_t len)
{
    if (!libdir)
        libdir = getenv("GNC_CUDA_LIBDIR");
    if (libdir && *libdir)
        snprintf(path, len, "%s/%s", libdir, soname);
    else
        snprintf(path, len, "%s", soname);
    return path;
}

static int driver_load(driver *L, const char *libdir, char *err, size_t errlen)
{
    char path[4096];
    lib_path(libdir, "libcuda.so.1", path, sizeof path);
    memset(L, 0, sizeof *L);
    L->so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!L->so)
        return fail(err, errlen, "no CUDA driver (%s): %s", path, dlerror());
#define LOAD(f)                                                                      \
    if (!(*(void **)&L->f = dlsym(L->so, XSTR(f)))) {                                \
        dlclose(L->so);                                                              \
        return fail(err, errlen, "the CUDA driver %s has no %s: too old for the "    \
                    "CUDA %d toolkit gnc was built with", path, XSTR(f), CUDA_VERSION); \
    }
    DRIVER_FNS(LOAD)
#undef LOAD
    CUresult r = L->cuInit(0);
    int count = 0;
    if (r == CUDA_SUCCESS)
        r = L->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        const char *s = NULL;
        if (r != CUDA_SUCCESS)
            L->cuGetErrorString(r, &s);
        fail(err, errlen, "no GPU: the CUDA driver %s", r != CUDA_SUCCESS ? "fails to initialize: " : "sees none");
        if (s)
            snprintf(err + strlen(err), errlen - strlen(err), "%s", s);
        dlclose(L->so);
        return -1;
    }
    return 0;
}

/* The checking macro of every driver call: the call, its site, the driver's words. */
#define CU(call)                                                                     \
    do {                                                                             \
        CUresult cu_r_ = (x->L.call);                                                \
        if (cu_r_ != CUDA_SUCCESS) {                                                 \
            const char *cu_s_ = "?";                                                 \
            x->L.cuGetErrorString(cu_r_, &cu_s_);                                    \
            return fail(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cu_s_); \
        }                                                                            \
    } while (0)

int rt_cuda_probe(const char *libdir, char *err, size_t errlen)
{
    driver L;
    if (driver_load(&L, libdir, err, errlen))
        return -1;
    dlclose(L.so);
    return 0;
}

/* ---------------------------------------------------------------- the executor */

enum { S_COMPUTE, S_COMM, S_COPY, S_N };

typedef struct {
    int ordinal;
    char name[128];
    CUcontext ctx;
    CUstream stream[S_N];
    CUdeviceptr region[CG_NREGIONS];
    int64_t bytes[CG_NREGIONS];
    CUmodule *modules;
    CUfunction *functions;      /* by kernel index */
    void ***kargs;              /* per step: its kernelParams, or NULL */
    void ***iargs;              /* per init step */
} gpu;

struct rt_cuda {
    const cg_program *p;
    driver L;
    int eager;
    int init_due;               /* the init steps run before the next run */
    gpu *dev;
    CUgraphExec graph;          /* the captured run, once captured */
};

static CUdeviceptr ptr(const gpu *G, cg_ref r) { return G->region[r.region] + (CUdeviceptr)r.offset; }

/* One block: the pointers cuLaunchKernel reads, then the values they point at. */
static void **kernel_args(const gpu *G, const cg_launch *l)
{
    size_t n = (size_t)l->nargs;
    void **a = calloc(1, n * sizeof(void *) + n * 8 + 8);
    if (!a)
        return NULL;
    unsigned char *vals = (unsigned char *)(a + n);
    for (size_t i = 0; i < n; i++) {
        const cg_arg *g = &l->args[i];
        unsigned char *v = vals + 8 * i;
        if (g->kind == CG_ARG_BUFFER) {
            CUdeviceptr q = ptr(G, g->buf);
            memcpy(v, &q, sizeof q);
        } else if (g->kind == CG_ARG_I64) {
            memcpy(v, &g->i, 8);
        } else {
            memcpy(v, &g->f, 4);
        }
        a[i] = v;
    }
    return a;
}

static const char *refused(const cg_step *s)
{
    switch (s->kind) {
    case CG_STEP_GEMM: return "a cuBLASLt matmul";
    case CG_STEP_CONV: return "a cuDNN convolution";
    case CG_STEP_COMM: return "an NCCL communication step";
    default: return NULL;
    }
}

/* The image of module m for a GPU of compute capability major.minor: its
 * cubin, or one of an older minor of the same major, else the PTX when the
 * GPU is at least its architecture. */
static const cg_image *pick_image(const cg_module *m, int major, int minor)
{
    const cg_image *best = NULL;
    int best_minor = -1;
    for (int i = 0; i < m->nimages; i++) {
        const cg_image *im = &m->images[i];
        int v = atoi(im->arch + (im->ptx ? 8 : 3));
        if (!im->ptx && v / 10 == major && v % 10 <= minor && v % 10 > best_minor)
            best = im, best_minor = v % 10;
    }
    for (int i = 0; !best && i < m->nimages; i++) {
        const cg_image *im = &m->images[i];
        if (im->ptx && atoi(im->arch + 8) <= major * 10 + minor)
            best = im;
    }
    return best;
}

static int open_device(rt_cuda *x, int d, char *err, size_t errlen)
{
    const cg_program *p = x->p;
    const cg_device *D = &p->devices[d];
    gpu *G = &x->dev[d];
    CUdevice dev;
    CU(cuDeviceGet(&dev, G->ordinal));
    CU(cuDeviceGetName(G->name, (int)sizeof G->name, dev));
    CU(cuDevicePrimaryCtxRetain(&G->ctx, dev));
    CU(cuCtxSetCurrent(G->ctx));
    size_t freeb = 0, total = 0;
    CU(cuMemGetInfo(&freeb, &total));
    if (rt_cuda_check_memory(d, G->name, D->region_bytes, freeb, err, errlen))
        return -1;
    for (int r = 0; r < CG_NREGIONS; r++) {
        G->bytes[r] = D->region_bytes[r];
        if (G->bytes[r] > 0)
            CU(cuMemAlloc(&G->region[r], (size_t)G->bytes[r]));
    }
    for (int s = 0; s < S_N; s++)
        CU(cuStreamCreate(&G->stream[s], CU_STREAM_NON_BLOCKING));
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    G->modules = calloc((size_t)p->nmodules + 1, sizeof *G->modules);
    G->functions = calloc((size_t)p->nkernels + 1, sizeof *G->functions);
    if (!G->modules || !G->functions)
        return fail(err, errlen, "out of memory");
    for (int m = 0; m < p->nmodules; m++) {
        const cg_image *im = pick_image(&p->modules[m], major, minor);
        if (!im)
            return fail(err, errlen, "device %d (%s, sm_%d%d): module %d has no image for it "
                        "(compile the program for sm_%d%d)", d, G->name, major, minor, m, major,
                        minor);
        CU(cuModuleLoadData(&G->modules[m], im->data));
    }
    for (int k = 0; k < p->nkernels; k++)
        CU(cuModuleGetFunction(&G->functions[k], G->modules[p->kernels[k].module],
                               p->kernels[k].name));
    G->kargs = calloc((size_t)D->nsteps + 1, sizeof *G->kargs);
    G->iargs = calloc((size_t)D->ninit + 1, sizeof *G->iargs);
    if (!G->kargs || !G->iargs)
        return fail(err, errlen, "out of memory");
    for (int s = 0; s < D->nsteps; s++)
        if (D->steps[s].kind == CG_STEP_KERNEL &&
            !(G->kargs[s] = kernel_args(G, &D->steps[s].u.launch)))
            return fail(err, errlen, "out of memory");
    for (int s = 0; s < D->ninit; s++)
        if (D->init[s].kind == CG_STEP_KERNEL &&
            !(G->iargs[s] = kernel_args(G, &D->init[s].u.launch)))
            return fail(err, errlen, "out of memory");
    return 0;
}

/* The fp16 loss scaler's state as a fresh one: scale, good steps, found_inf, 1/scale. */
static int reset_loss_scale(rt_cuda *x, int d, char *err, size_t errlen)
{
    const cg_program *p = x->p;
    if (!p->loss_scale.enabled)
        return 0;
    gpu *G = &x->dev[d];
    float st[4] = {p->loss_scale.init, 0, 0, 1 / p->loss_scale.init};
    memset(&st[1], 0, 8);
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuMemcpyHtoDAsync(ptr(G, p->devices[d].loss_scale), st, sizeof st, G->stream[S_COPY]));
    CU(cuStreamSynchronize(G->stream[S_COPY]));
    return 0;
}

rt_cuda *rt_cuda_open_ex(const cg_program *p, const rt_cuda_options *o, char *err, size_t errlen)
{
    rt_cuda_options dflt = {0};
    if (!o)
        o = &dflt;
    if (p->ndevices != 1) {
        fail(err, errlen, "the CUDA runtime runs programs of one device so far; this one has %d",
             p->ndevices);
        return NULL;
    }
    for (int d = 0; d < p->ndevices; d++)
        for (int s = 0; s < p->devices[d].nsteps + p->devices[d].ninit; s++) {
            const cg_device *D = &p->devices[d];
            const cg_step *st = s < D->ninit ? &D->init[s] : &D->steps[s - D->ninit];
            if (refused(st)) {
                fail(err, errlen, "device %d: step '%s' is %s, which the CUDA runtime does not "
                     "run yet", d, st->what ? st->what : "?", refused(st));
                return NULL;
            }
        }
    for (int m = 0; m < p->nmodules; m++)
        if (!p->modules[m].nimages) {
            fail(err, errlen, "the program is not compiled (cg_compile) for the GPU");
            return NULL;
        }
    rt_cuda *x = calloc(1, sizeof *x);
    if (!x) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    x->p = p;
    x->eager = o->eager;
    x->init_due = 1;
    if (driver_load(&x->L, o->libdir, err, errlen)) {
        free(x);
        return NULL;
    }
    int count = 0;
    x->L.cuDeviceGetCount(&count);
    x->dev = calloc((size_t)p->ndevices, sizeof *x->dev);
    if (!x->dev) {
        fail(err, errlen, "out of memory");
        rt_cuda_close(x);
        return NULL;
    }
    for (int d = 0; d < p->ndevices; d++) {
        x->dev[d].ordinal = o->gpus ? o->gpus[d] : d % count;
        if (x->dev[d].ordinal < 0 || x->dev[d].ordinal >= count) {
            fail(err, errlen, "device %d: GPU %d does not exist (%d present)", d,
                 x->dev[d].ordinal, count);
            rt_cuda_close(x);
            return NULL;
        }
    }
    for (int d = 0; d < p->ndevices; d++)
        if (open_device(x, d, err, errlen) || reset_loss_scale(x, d, err, errlen)) {
            rt_cuda_close(x);
            return NULL;
        }
    return x;
}

rt_cuda *rt_cuda_open(const cg_program *p, const int *gpus, char *err, size_t errlen)
{
    rt_cuda_options o = {0};
    o.gpus = gpus;
    return rt_cuda_open_ex(p, &o, err, errlen);
}

void rt_cuda_close(rt_cuda *x)
{
    if (!x)
        return;
    if (x->graph)
        x->L.cuGraphExecDestroy(x->graph);
    for (int d = 0; x->dev && d < x->p->ndevices; d++) {
        gpu *G = &x->dev[d];
        if (!G->ctx)
            continue;
        x->L.cuCtxSetCurrent(G->ctx);
        for (int s = 0; s < S_N; s++)
            if (G->stream[s])
                x->L.cuStreamDestroy(G->stream[s]);
        for (int m = 0; G->modules && m < x->p->nmodules; m++)
            if (G->modules[m])
                x->L.cuModuleUnload(G->modules[m]);
        for (int r = 0; r < CG_NREGIONS; r++)
            if (G->region[r])
                x->L.cuMemFree(G->region[r]);
        for (int s = 0; G->kargs && s < x->p->devices[d].nsteps; s++)
            free(G->kargs[s]);
        for (int s = 0; G->iargs && s < x->p->devices[d].ninit; s++)
            free(G->iargs[s]);
        free(G->kargs);
        free(G->iargs);
        free(G->modules);
        free(G->functions);
        CUdevice dev;
        if (x->L.cuDeviceGet(&dev, G->ordinal) == CUDA_SUCCESS)
            x->L.cuDevicePrimaryCtxRelease(dev);
    }
    free(x->dev);
    if (x->L.so)
        dlclose(x->L.so);
    free(x);
}

int64_t rt_cuda_region_bytes(const rt_cuda *x, int d, cg_region r)
{
    return x && d >= 0 && d < x->p->ndevices ? x->dev[d].bytes[r] : 0;
}

/* ---------------------------------------------------------------- values */

static int is_float(ir_dtype t) { return t == IR_F32 || t == IR_F16 || t == IR_BF16; }

static int transfer(rt_cuda *x, int device, const ir_value *v, void *host, int up, char *err,
                    size_t errlen)
{
    const cg_program *p = x->p;
    int done = 0;
    for (int d = device < 0 ? 0 : device; d < p->ndevices && (device < 0 || d == device); d++) {
        const cg_value *cv = cg_value_of(p, d, v);
        if (!cv)
            continue;
        gpu *G = &x->dev[d];
        unsigned char *stage = host;
        if (is_float(cv->dtype) && cv->dtype != IR_F32) {
            stage = malloc((size_t)cv->bytes + 1);
            if (!stage)
                return fail(err, errlen, "out of memory");
            for (int64_t i = 0; up && i < cv->numel; i++)
                ((unsigned short *)stage)[i] = cg_f32_to_half(((const float *)host)[i], cv->dtype);
        }
        CUresult r;
        x->L.cuCtxSetCurrent(G->ctx);
        if (up)
            r = x->L.cuMemcpyHtoDAsync(ptr(G, cv->at), stage, (size_t)cv->bytes, G->stream[S_COPY]);
        else
            r = x->L.cuMemcpyDtoHAsync(stage, ptr(G, cv->at), (size_t)cv->bytes, G->stream[S_COPY]);
        if (r == CUDA_SUCCESS)
            r = x->L.cuStreamSynchronize(G->stream[S_COPY]);
        for (int64_t i = 0; !up && r == CUDA_SUCCESS && stage != host && i < cv->numel; i++)
            ((float *)host)[i] = cg_half_to_f32(((const unsigned short *)stage)[i], cv->dtype);
        if (stage != host)
            free(stage);
        if (r != CUDA_SUCCESS) {
            const char *s = "?";
            x->L.cuGetErrorString(r, &s);
            return fail(err, errlen, "device %d: copying %s %s the GPU: %s", d, v->name,
                        up ? "to" : "from", s);
        }
        if (up && cv->kind == CG_VALUE_PARAM)
            x->init_due = 1; /* the weights computed from it are stale */
        done = 1;
        if (!up)
            break;
    }
    if (!done)
        return fail(err, errlen, "no device%s holds %s", device < 0 ? "" : " of that number",
                    v->name);
    return 0;
}

int rt_cuda_write(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                  size_t errlen)
{
    return transfer(x, device, v, (void *)data, 1, err, errlen);
}

int rt_cuda_read(rt_cuda *x, int device, const ir_value *v, void *out, char *err, size_t errlen)
{
    return transfer(x, device, v, out, 0, err, errlen);
}

int rt_cuda_init_params(rt_cuda *x, uint64_t seed, char *err, size_t errlen)
{
    const ir_graph *g = x->p->graph;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        int64_t n = ir_type_numel(&v->type);
        if (!is_float(v->type.dtype))
            continue;
        float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
        if (!buf)
            return fail(err, errlen, "out of memory");
        ir_init_fill(v, seed, buf);
        int rc = 0;
        for (int d = 0; d < x->p->ndevices && !rc; d++)
            if (cg_value_of(x->p, d, v))
                rc = rt_cuda_write(x, d, v, buf, err, errlen);
        free(buf);
        if (rc)
            return -1;
    }
    for (int d = 0; d < x->p->ndevices; d++)
        if (reset_loss_scale(x, d, err, errlen))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- running */

static int launch(rt_cuda *x, gpu *G, const cg_step *s, void **args, char *err, size_t errlen)
{
    CUstream st = G->stream[S_COMPUTE];
    if (s->kind == CG_STEP_KERNEL) {
        const cg_launch *l = &s->u.launch;
        CU(cuLaunchKernel(G->functions[l->kernel], l->grid[0], l->grid[1], l->grid[2],
                          l->block[0], l->block[1], l->block[2], (unsigned)l->shared_bytes, st,
                          args, NULL));
    } else if (s->kind == CG_STEP_COPY) {
        CU(cuMemcpyDtoDAsync(ptr(G, s->u.copy.dst), ptr(G, s->u.copy.src),
                             (size_t)s->u.copy.bytes, st));
    } else {
        return fail(err, errlen, "step '%s' cannot run yet", s->what ? s->what : "?");
    }
    return 0;
}

/* Issues the steps of one run (or the init steps) of every device; the
 * status word is cleared first, so that each run reports its own. */
static int issue(rt_cuda *x, int init, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++) {
        const cg_device *D = &x->p->devices[d];
        gpu *G = &x->dev[d];
        if (!init)
            CU(cuMemsetD8Async(ptr(G, D->status), 0, sizeof(cg_status), G->stream[S_COMPUTE]));
        int n = init ? D->ninit : D->nsteps;
        for (int s = 0; s < n; s++)
            if (launch(x, G, init ? &D->init[s] : &D->steps[s], init ? G->iargs[s] : G->kargs[s],
                       err, errlen))
                return -1;
    }
    return 0;
}

static int sync_all(rt_cuda *x, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++) {
        CU(cuCtxSetCurrent(x->dev[d].ctx));
        CU(cuStreamSynchronize(x->dev[d].stream[S_COMPUTE]));
    }
    return 0;
}

int rt_cuda_run(rt_cuda *x, char *err, size_t errlen)
{
    CU(cuCtxSetCurrent(x->dev[0].ctx));
    if (x->init_due) {
        if (issue(x, 1, err, errlen) || sync_all(x, err, errlen))
            return -1;
        x->init_due = 0;
    }
    if (x->eager) {
        if (issue(x, 0, err, errlen))
            return -1;
    } else {
        if (!x->graph) {
            /* captured once: the regions never move and every argument is fixed */
            CUgraph graph;
            CU(cuStreamBeginCapture(x->dev[0].stream[S_COMPUTE], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
            int rc = issue(x, 0, err, errlen);
            CUresult r = x->L.cuStreamEndCapture(x->dev[0].stream[S_COMPUTE], &graph);
            if (rc)
                return -1;
            if (r != CUDA_SUCCESS)
                return fail(err, errlen, "capturing the run into a CUDA graph failed (%d)", (int)r);
            r = x->L.cuGraphInstantiate(&x->graph, graph, 0);
            x->L.cuGraphDestroy(graph);
            if (r != CUDA_SUCCESS) {
                x->graph = NULL;
                return fail(err, errlen, "instantiating the run's CUDA graph failed (%d)", (int)r);
            }
        }
        CU(cuGraphLaunch(x->graph, x->dev[0].stream[S_COMPUTE]));
    }
    if (sync_all(x, err, errlen))
        return -1;
    for (int d = 0; d < x->p->ndevices; d++) {
        const cg_device *D = &x->p->devices[d];
        gpu *G = &x->dev[d];
        cg_status st;
        CU(cuMemcpyDtoHAsync(&st, ptr(G, D->status), sizeof st, G->stream[S_COPY]));
        CU(cuStreamSynchronize(G->stream[S_COPY]));
        if (st.code != CG_STATUS_OK) {
            const ir_node *n = st.step >= 0 && st.step < D->nsteps ? D->steps[st.step].node : NULL;
            rt_cuda_status_message(&st, n, err, errlen);
            return -1;
        }
    }
    return 0;
}

#endif
