/* The GPU executor (cuda.h).  What is decided here and why: docs/runtime.md.
 *
 * Open: load libcuda.so.1 with dlopen (the toolkit's cuda.h for the types and
 * prototypes: every entry point is a pointer of __typeof__ the prototype, its
 * symbol the versioned name the header's macros give), cuInit, per program
 * device its GPU's primary context, the free-memory check before anything is
 * allocated, one allocation per region (and a staging buffer for the next
 * run's inputs), every module loaded (the cubin for the device's sm_XY or an
 * older minor of its major, else the PTX), kernel functions looked up, three
 * streams (compute, communication, copy), each kernel step's argument block
 * built once (the regions never move); then the libraries' state
 * (cuda_lib.c: cuBLASLt, cuDNN, NCCL).
 *
 * Run: the init steps when due, the prefetched inputs put in place, then one
 * run of every device: eagerly, or (by default) captured once into one CUDA
 * graph on device 0's compute stream (forked to every other stream and
 * joined back) and replayed.  Communication steps run on the communication
 * streams, ordered against the compute streams by events where a step's
 * `wait` says.  Waiting for a run reads back each device's status word.
 *
 * Written on machines without a GPU and tested there against stand-in
 * libraries (tests/fakecuda/).  It ran once on a real GPU, one H200
 * (2026-11-26, bench/results/2026-11-26-h200/): one device and two program
 * devices sharing it, eagerly and as CUDA graphs, correct against the CPU
 * executor.  NCCL, peer copies and every program of several GPUs have not
 * run on a GPU (README.md, "Status"). */
#include "cuda.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

int rt_cuda_check_memory(int d, const char *name, const int64_t region_bytes[CG_NREGIONS],
                         uint64_t reserve, uint64_t free, char *err, size_t errlen)
{
    uint64_t need = 0;
    for (int r = 0; r < CG_NREGIONS; r++)
        need += (uint64_t)(region_bytes[r] > 0 ? region_bytes[r] : 0);
    if (need + reserve <= free)
        return 0;
    const double mib = 1024.0 * 1024.0;
    return base_fail(err, errlen, "device %d (%s): the plan needs %.1f MiB and the CUDA libraries "
                "about %.1f MiB more (GNC_CUDA_RESERVE_MIB), %.1f MiB free", d, name,
                (double)need / mib, (double)reserve / mib, (double)free / mib);
}

/* The environment's integer name, at least least; -1 where unset or not one. */
static long long env_number(const char *name, long long least)
{
    const char *env = getenv(name);
    char *end = NULL;
    long long v = env && *env ? strtoll(env, &end, 10) : -1;
    return env && *env && end && !*end && v >= least ? v : -1;
}

uint64_t rt_cuda_nccl_reserve(const rt_cuda_nccl_use *u)
{
    const uint64_t mib = 1 << 20, ll = 512 * 1024, ll128 = 4915200;
    if (!u->world)
        return 0;
    /* a connection's buffers, one per protocol: NCCL_BUFFSIZE for Simple
       (NCCL's documented 4 MiB default), LL's 512 KiB and LL128's 4.6875 MiB */
    long long b = env_number("NCCL_BUFFSIZE", 1), c = env_number("NCCL_MAX_NCHANNELS", 1);
    long long q = env_number("NCCL_MAX_P2P_NCHANNELS", 1);
    uint64_t simple = b > 0 ? (uint64_t)b : 4 * mib;
    uint64_t channels = c > 0 ? (uint64_t)c : RT_CUDA_NCCL_CHANNELS;
    uint64_t p2p = q > 0 ? (uint64_t)q : 2;
    if (p2p > channels)
        p2p = channels;
    /* the world: a receiving connection per channel for its ring and one for
       its tree; each peer of a send or receive: Simple and LL buffers on its
       own channels; every communicator its fixed structures; a split with
       splitShare uses the world's buffers */
    return channels * 2 * (simple + ll + ll128) + (uint64_t)u->peers * p2p * (simple + ll) +
           (uint64_t)(1 + u->splits) * RT_CUDA_NCCL_FIXED_MIB * mib;
}

uint64_t rt_cuda_reserve(const cg_program *p, int d, const rt_cuda_nccl_use *u)
{
    const uint64_t mib = 1 << 20;
    long long v = env_number("GNC_CUDA_RESERVE_MIB", 0);
    if (v >= 0)
        return (uint64_t)v * mib;
    int libs = 0;
    const cg_device *D = &p->devices[d];
    for (int s = 0; s < D->nsteps + D->ninit; s++) {
        const cg_step *st = s < D->nsteps ? &D->steps[s] : &D->init[s - D->nsteps];
        libs |= st->kind == CG_STEP_GEMM || st->kind == CG_STEP_CONV;
    }
    return (libs ? 256 * mib : 0) + (u ? rt_cuda_nccl_reserve(u) : 0);
}

void rt_cuda_status_message(const cg_status *st, const ir_node *node, char *err, size_t errlen)
{
    /* the member of the step's (fused) node that checks indices or labels */
    const ir_node *n = node;
    for (; n; n = n->next) {
        if (st->code == CG_STATUS_LABEL &&
            (n->op == IR_OP_CROSS_ENTROPY || n->op == IR_OP_CROSS_ENTROPY_GRAD ||
             n->op == IR_OP_NLL_LOSS || n->op == IR_OP_NLL_LOSS_GRAD))
            break;
        if (st->code == CG_STATUS_EMBEDDING_INDEX && n->op == IR_OP_EMBEDDING)
            break;
        if (!node->group || n->group != node->group)
            n = NULL;
        if (!n)
            break;
    }
    const char *op = n && (n->op == IR_OP_NLL_LOSS || n->op == IR_OP_NLL_LOSS_GRAD)
                         ? "nll_loss" : "cross_entropy";
    if (n && n->op == IR_OP_EMBEDDING) {
        base_fail(err, errlen, "embedding index %lld at position %lld of '%s' is out of range "
             "[0, %lld)", (long long)st->value, (long long)st->index, n->in[0]->name,
             (long long)(ir_attr_int(n, "shard_of") ? ir_attr_int(n, "shard_of")
                                                     : n->in[1]->type.dims[0]));
    } else if (n && st->value == ir_attr_int(n, "ignore_index")) { /* only when split */
        int grad = n->op == IR_OP_CROSS_ENTROPY_GRAD || n->op == IR_OP_NLL_LOSS_GRAD;
        base_fail(err, errlen, "%s label %lld at position %lld of '%s' is "
             "ignore_index, in a batch split between %lld replicas: their losses are averaged, "
             "which is not the mean over the batch's other labels; train on one device",
             op, (long long)st->value, (long long)st->index, n->in[grad + 1]->name,
             (long long)ir_attr_int(n, "split"));
    } else if (n) {
        int grad = n->op == IR_OP_CROSS_ENTROPY_GRAD || n->op == IR_OP_NLL_LOSS_GRAD;
        base_fail(err, errlen, "%s label %lld at position %lld of '%s' is out of range "
             "[0, %lld)", op, (long long)st->value, (long long)st->index,
             n->in[grad + 1]->name, (long long)n->in[grad]->type.dims[1]);
    } else {
        base_fail(err, errlen, "step %d reports status %d (position %lld, value %lld)", st->step,
             st->code, (long long)st->index, (long long)st->value);
    }
}

#ifndef GNC_HAVE_CUDA_DRIVER

/* A build without the CUDA toolkit's headers: everything is refused. */
#define NO_CUDA "this build of gnc has no CUDA runtime (built without the CUDA toolkit)"

int rt_cuda_probe(const char *libdir, char *err, size_t errlen)
{
    (void)libdir;
    return base_fail(err, errlen, NO_CUDA);
}

const char *rt_cuda_library(int i, const char **what)
{
    (void)i, (void)what;
    return NULL;
}

int rt_cuda_library_loads(const char *libdir, const char *name, char *why, size_t len)
{
    (void)libdir, (void)name;
    snprintf(why, len, NO_CUDA);
    return 0;
}

int rt_cuda_gpu_count(const char *libdir, char *err, size_t errlen)
{
    return rt_cuda_probe(libdir, err, errlen);
}

int rt_cuda_gpu_describe(const char *libdir, int ordinal, rt_cuda_gpu *out, char *err,
                         size_t errlen)
{
    (void)ordinal, (void)out;
    return rt_cuda_probe(libdir, err, errlen);
}

rt_cuda *rt_cuda_open(const cg_program *p, const int *gpus, char *err, size_t errlen)
{
    (void)p, (void)gpus;
    base_fail(err, errlen, NO_CUDA);
    return NULL;
}

rt_cuda *rt_cuda_open_ex(const cg_program *p, const rt_cuda_options *o, char *err, size_t errlen)
{
    (void)p, (void)o;
    base_fail(err, errlen, NO_CUDA);
    return NULL;
}

void rt_cuda_close(rt_cuda *x) { (void)x; }

int rt_cuda_graphs(const rt_cuda *x)
{
    (void)x;
    return 0;
}

const char *rt_cuda_warning(const rt_cuda *x)
{
    (void)x;
    return NULL;
}

void rt_cuda_set_profile(rt_cuda *x, int on) { (void)x, (void)on; }

const rt_event *rt_cuda_events(const rt_cuda *x, int *n)
{
    (void)x;
    *n = 0;
    return NULL;
}

int rt_cuda_unique_id(const char *libdir, rt_cuda_id *id, char *err, size_t errlen)
{
    (void)libdir, (void)id;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_holds(const rt_cuda *x, const ir_value *v)
{
    (void)x, (void)v;
    return 0;
}

int rt_cuda_write(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                  size_t errlen)
{
    (void)x, (void)device, (void)v, (void)data;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_prefetch(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                     size_t errlen)
{
    (void)x, (void)device, (void)v, (void)data;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_read(rt_cuda *x, int device, const ir_value *v, void *out, char *err, size_t errlen)
{
    (void)x, (void)device, (void)v, (void)out;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_init_params(rt_cuda *x, uint64_t seed, char *err, size_t errlen)
{
    (void)x, (void)seed;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_launch(rt_cuda *x, char *err, size_t errlen)
{
    (void)x;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_autotune(rt_cuda *x, cg_program *p, char *err, size_t errlen)
{
    (void)x, (void)p;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_time_convs(rt_cuda *x, double *ms, char *err, size_t errlen)
{
    (void)x, (void)ms;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_wait(rt_cuda *x, char *err, size_t errlen)
{
    (void)x;
    return base_fail(err, errlen, NO_CUDA);
}

void rt_cuda_set_timeout(rt_cuda *x, double seconds) { (void)x, (void)seconds; }

int rt_cuda_run(rt_cuda *x, char *err, size_t errlen)
{
    (void)x;
    return base_fail(err, errlen, NO_CUDA);
}

int64_t rt_cuda_region_bytes(const rt_cuda *x, int d, cg_region r)
{
    (void)x, (void)d, (void)r;
    return 0;
}

int rt_cuda_loss_scale(rt_cuda *x, int d, float *scale, int *good, char *err, size_t errlen)
{
    (void)x, (void)d, (void)scale, (void)good;
    return base_fail(err, errlen, NO_CUDA);
}

int rt_cuda_memory(rt_cuda *x, int d, rt_cuda_mem *m, char *err, size_t errlen)
{
    (void)x, (void)d;
    memset(m, 0, sizeof *m);
    return base_fail(err, errlen, "this build of gnc has no CUDA runtime");
}

#else

#include <dlfcn.h>
#include <pthread.h>

#include "cuda_internal.h"
#include "deadline.h"

const char *cuda_lib_path(const char *libdir, const char *soname, char *path, size_t len)
{
    if (!libdir)
        libdir = getenv("GNC_CUDA_LIBDIR");
    if (libdir && *libdir)
        snprintf(path, len, "%s/%s", libdir, soname);
    else
        snprintf(path, len, "%s", soname);
    return path;
}

/* Every NVIDIA library is loaded once and never unloaded (RTLD_NODELETE, and
 * no dlclose): they start threads of their own that outlive the calls that
 * started them (NCCL's bootstrap thread from ncclGetUniqueId; the driver's),
 * and a library unmapped under a running thread crashes the process. */
void *cuda_dlopen(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

/* ---------------------------------------------------------------- the driver */

#define XSTR(x) STR(x)
#define STR(x) #x

static int driver_load(cuda_driver *L, const char *libdir, char *err, size_t errlen)
{
    char path[4096];
    cuda_lib_path(libdir, "libcuda.so.1", path, sizeof path);
    memset(L, 0, sizeof *L);
    L->so = cuda_dlopen(path);
    if (!L->so)
        return base_fail(err, errlen, "no CUDA driver (%s): %s", path, dlerror());
#define LOAD(f)                                                                      \
    if (!(*(void **)&L->f = dlsym(L->so, XSTR(f)))) {                                \
        L->so = NULL;                                                                \
        return base_fail(err, errlen, "the CUDA driver %s has no %s: too old for the "    \
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
        base_fail(err, errlen, "no GPU: the CUDA driver %s%s",
             r != CUDA_SUCCESS ? "fails to initialize: " : "sees none", s ? s : "");
        L->so = NULL;
        return -1;
    }
    return 0;
}

int rt_cuda_gpu_count(const char *libdir, char *err, size_t errlen)
{
    cuda_driver L;
    int count = 0;
    if (driver_load(&L, libdir, err, errlen))
        return -1;
    L.cuDeviceGetCount(&count);
    return count;
}

int rt_cuda_probe(const char *libdir, char *err, size_t errlen)
{
    return rt_cuda_gpu_count(libdir, err, errlen) < 0 ? -1 : 0;
}

int rt_cuda_gpu_describe(const char *libdir, int ordinal, rt_cuda_gpu *out, char *err,
                         size_t errlen)
{
    cuda_driver L;
    rt_cuda holder = {0}; /* what CU() needs in scope: x->L */
    rt_cuda *x = &holder;
    CUdevice dev;
    CUcontext ctx;
    size_t freeb = 0, total = 0;
    memset(out, 0, sizeof *out);
    if (driver_load(&L, libdir, err, errlen))
        return -1;
    x->L = L;
    CU(cuDriverGetVersion(&out->driver_version));
    CU(cuDeviceGet(&dev, ordinal));
    CU(cuDeviceGetName(out->name, (int)sizeof out->name, dev));
    CU(cuDeviceGetAttribute(&out->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&out->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CU(cuDeviceGetAttribute(&out->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CU(cuDeviceTotalMem(&total, dev));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CUresult r = x->L.cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS)
        r = x->L.cuMemGetInfo(&freeb, &total);
    x->L.cuDevicePrimaryCtxRelease(dev);
    if (r != CUDA_SUCCESS) {
        const char *s = "?";
        x->L.cuGetErrorString(r, &s);
        return base_fail(err, errlen, "GPU %d: cuMemGetInfo: %s", ordinal, s);
    }
    out->free_bytes = freeb, out->total_bytes = total;
    return 0;
}

/* ---------------------------------------------------------------- opening */

static const cg_step *steps_of(const rt_cuda *x, int d, int init, int *n)
{
    const cg_device *D = &x->p->devices[d];
    *n = init ? D->ninit : D->nsteps;
    return init ? D->init : D->steps;
}

/* One block: the pointers cuLaunchKernel reads, then the values they point at. */
static void **kernel_args(const cuda_gpu *G, const cg_launch *l)
{
    size_t n = (size_t)l->nargs;
    void **a = base_calloc(1, n * sizeof(void *) + n * 8 + 8);
    if (!a)
        return NULL;
    unsigned char *vals = (unsigned char *)(a + n);
    for (size_t i = 0; i < n; i++) {
        const cg_arg *g = &l->args[i];
        unsigned char *v = vals + 8 * i;
        if (g->kind == CG_ARG_BUFFER) {
            CUdeviceptr q = cuda_ptr(G, g->buf);
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

/* Per step (of the run or the init steps): its argument block if it is a
 * kernel, an event if a step of the other stream waits for it. */
static int prepare_steps(rt_cuda *x, int d, int init, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    int n;
    const cg_step *steps = steps_of(x, d, init, &n);
    G->args[init] = base_calloc((size_t)n + 1, sizeof *G->args[init]);
    G->done[init] = base_calloc((size_t)n + 1, sizeof *G->done[init]);
    if (!G->args[init] || !G->done[init])
        return base_fail(err, errlen, "out of memory");
    for (int s = 0; s < n; s++) {
        if (steps[s].kind == CG_STEP_KERNEL &&
            !(G->args[init][s] = kernel_args(G, &steps[s].u.launch)))
            return base_fail(err, errlen, "out of memory");
        int w = steps[s].wait;
        if (w >= 0 && w < s && !G->done[init][w])
            CU(cuEventCreate(&G->done[init][w], CU_EVENT_DISABLE_TIMING));
    }
    return 0;
}

/* Device d's messages (one per recv step), 256-byte aligned in its mailbox;
 * the mailbox's bytes, or -1 out of memory.  None across processes. */
static int64_t plan_mailbox(rt_cuda *x, int d)
{
    cuda_gpu *G = &x->dev[d];
    int64_t at = 0;
    for (int init = 0; init < 2 && x->rank < 0 && !x->threads; init++) {
        int n;
        const cg_step *steps = steps_of(x, d, init, &n);
        for (int s = 0; s < n; s++) {
            if (steps[s].kind != CG_STEP_COMM || steps[s].u.comm.op != IR_OP_RECV)
                continue;
            const cg_comm *c = &steps[s].u.comm;
            cuda_message *m = base_realloc(G->messages, (size_t)(G->nmessages + 1) * sizeof *m);
            if (!m)
                return -1;
            G->messages = m;
            m = &G->messages[G->nmessages++];
            memset(m, 0, sizeof *m);
            m->init = init;
            m->id = c->id;
            m->offset = at;
            m->sender = c->peer;
            m->bytes = c->count[0] * (int64_t)ir_dtype_size(c->dtype);
            at += (m->bytes + 255) / 256 * 256;
        }
    }
    return at;
}

/* The scratch device d needs to lead local collectives (it is rank 0 of
 * their groups): an all_reduce's largest tensor from another device; a
 * reduce_scatter's whole input twice (a sum and an operand). */
static int64_t scratch_bytes(rt_cuda *x, int d)
{
    int64_t need = 0;
    for (int init = 0; init < 2; init++) {
        int n;
        const cg_step *steps = steps_of(x, d, init, &n);
        for (int s = 0; s < n; s++) {
            const cg_comm *c = &steps[s].u.comm;
            if (steps[s].kind != CG_STEP_COMM || c->group[0] != d)
                continue;
            int64_t es = (int64_t)ir_dtype_size(c->dtype), b = 0;
            for (int t = 0; c->op == IR_OP_ALL_REDUCE && t < c->ntensors; t++)
                b = c->count[t] * es > b ? c->count[t] * es : b;
            if (c->op == IR_OP_REDUCE_SCATTER)
                b = 2 * ((c->count[0] * c->ngroup * es + 255) / 256 * 256);
            need = b > need ? b : need;
        }
    }
    return need;
}

static cuda_message *message(cuda_gpu *G, int init, int64_t id)
{
    for (int i = 0; i < G->nmessages; i++)
        if (G->messages[i].init == init && G->messages[i].id == id)
            return &G->messages[i];
    return NULL;
}

int cuda_by_nccl(const rt_cuda *x, const cg_comm *c)
{
    int p2p = c->op == IR_OP_SEND || c->op == IR_OP_RECV;
    return x->rank >= 0 || x->threads || (!p2p && !x->local_comm);
}

/* Whether some device of the program takes part in a collective. */
static int has_collective(const cg_program *p)
{
    for (int d = 0; d < p->ndevices; d++)
        for (int s = 0; s < p->devices[d].ninit + p->devices[d].nsteps; s++) {
            const cg_device *D = &p->devices[d];
            const cg_step *st = s < D->ninit ? &D->init[s] : &D->steps[s - D->ninit];
            if (st->kind == CG_STEP_COMM && st->u.comm.op != IR_OP_SEND &&
                st->u.comm.op != IR_OP_RECV)
                return 1;
        }
    return 0;
}

/* The NCCL communicators device d will be in (cuda_lib.c's open_comms):
 * the world of every device where any step needs NCCL, which carries the
 * sends and receives too; a split of it for each other group of d's
 * collectives; and the peers d sends to or receives from. */
static rt_cuda_nccl_use nccl_use(const rt_cuda *x, int d)
{
    const cg_program *p = x->p;
    const cg_comm *met[128];
    int n = 0;
    rt_cuda_nccl_use u = {0, 0, 0};
    char peer[128] = {0};
    for (int e = 0; e < p->ndevices; e++)
        for (int init = 0; init < 2; init++) {
            int count;
            const cg_step *steps = steps_of(x, e, init, &count);
            for (int s = 0; s < count; s++) {
                const cg_comm *c = &steps[s].u.comm;
                if (steps[s].kind != CG_STEP_COMM || !cuda_by_nccl(x, c))
                    continue;
                u.world = 1;
                if (e != d)
                    continue;
                if (c->op == IR_OP_SEND || c->op == IR_OP_RECV) {
                    if (c->peer >= 0 && c->peer < 128 && !peer[c->peer]++)
                        u.peers++;
                    continue;
                }
                if (c->ngroup == p->ndevices)
                    continue; /* the world */
                int k = 0;
                for (; k < n; k++)
                    if (met[k]->ngroup == c->ngroup &&
                        !memcmp(met[k]->group, c->group, (size_t)c->ngroup * sizeof *c->group))
                        break;
                if (k == n && n < 128)
                    met[n++] = c;
            }
        }
    u.splits = n;
    return u;
}

static int open_device(rt_cuda *x, int d, char *err, size_t errlen)
{
    const cg_program *p = x->p;
    const cg_device *D = &p->devices[d];
    cuda_gpu *G = &x->dev[d];
    CUdevice dev;
    CU(cuDeviceGet(&dev, G->ordinal));
    CU(cuDeviceGetName(G->name, (int)sizeof G->name, dev));
    CU(cuDevicePrimaryCtxRetain(&G->ctx, dev));
    CU(cuCtxSetCurrent(G->ctx));
    size_t freeb = 0, total = 0;
    CU(cuMemGetInfo(&freeb, &total));
    G->free_at_open = freeb;
    /* the inputs twice: the region and the next run's, prefetched; and the
     * mailbox of the messages it receives */
    int64_t mailbox = plan_mailbox(x, d);
    if (mailbox < 0)
        return base_fail(err, errlen, "out of memory");
    G->scratch_bytes = x->local_comm ? scratch_bytes(x, d) : 0;
    int64_t need[CG_NREGIONS];
    memcpy(need, D->region_bytes, sizeof need);
    need[CG_INPUTS] *= 2;
    need[CG_WORKSPACE] += mailbox + G->scratch_bytes;
    rt_cuda_nccl_use u = nccl_use(x, d);
    if (rt_cuda_check_memory(d, G->name, need, rt_cuda_reserve(p, d, &u), freeb,
                             err, errlen))
        return -1;
    for (int r = 0; r < CG_NREGIONS; r++) {
        G->bytes[r] = D->region_bytes[r];
        if (G->bytes[r] > 0)
            CU(cuMemAlloc(&G->region[r], (size_t)G->bytes[r]));
    }
    if (G->bytes[CG_INPUTS] > 0) {
        CU(cuMemAlloc(&G->staging, (size_t)G->bytes[CG_INPUTS]));
        /* page-locked, or (where the system refuses) prefetches copy from
           pageable memory, synchronously */
        if (x->L.cuMemHostAlloc((void **)&G->pinned, (size_t)G->bytes[CG_INPUTS], 0) !=
            CUDA_SUCCESS)
            G->pinned = NULL;
    }
    G->mailbox_bytes = mailbox;
    if (G->nmessages)
        CU(cuMemAlloc(&G->mailbox, (size_t)mailbox));
    if (G->scratch_bytes)
        CU(cuMemAlloc(&G->scratch, (size_t)G->scratch_bytes));
    CU(cuEventCreate(&G->tail, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&G->coll, CU_EVENT_DISABLE_TIMING));
    for (int s = 0; s < S_N; s++) {
        CU(cuStreamCreate(&G->stream[s], CU_STREAM_NON_BLOCKING));
        CU(cuEventCreate(&G->join[s], CU_EVENT_DISABLE_TIMING));
    }
    CU(cuEventCreate(&G->fork, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&G->prefetched, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&G->staged, CU_EVENT_DISABLE_TIMING));
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    G->modules = base_calloc((size_t)p->nmodules + 1, sizeof *G->modules);
    G->functions = base_calloc((size_t)p->nkernels + 1, sizeof *G->functions);
    if (!G->modules || !G->functions)
        return base_fail(err, errlen, "out of memory");
    for (int m = 0; m < p->nmodules; m++) {
        const cg_image *im = pick_image(&p->modules[m], major, minor);
        if (!im)
            return base_fail(err, errlen, "device %d (%s, sm_%d%d): module %d has no image for it "
                        "(compile the program for sm_%d%d)", d, G->name, major, minor, m, major,
                        minor);
        CU(cuModuleLoadData(&G->modules[m], im->data));
    }
    for (int k = 0; k < p->nkernels; k++)
        CU(cuModuleGetFunction(&G->functions[k], G->modules[p->kernels[k].module],
                               p->kernels[k].name));
    return prepare_steps(x, d, 0, err, errlen) || prepare_steps(x, d, 1, err, errlen) ? -1 : 0;
}

/* Each message's event, on its sender's device. */
static int open_messages(rt_cuda *x, int d, char *err, size_t errlen)
{
    for (int i = 0; i < x->dev[d].nmessages; i++) {
        cuda_message *m = &x->dev[d].messages[i];
        if (m->sender < 0 || m->sender >= x->p->ndevices || m->sender == d)
            return base_fail(err, errlen, "device %d: message %lld comes from device %d, which the "
                        "program does not have", d, (long long)m->id, m->sender);
        CU(cuCtxSetCurrent(x->dev[m->sender].ctx));
        CU(cuEventCreate(&m->sent, CU_EVENT_DISABLE_TIMING));
    }
    return 0;
}

/* Peer access between the GPUs of this process's devices, both ways, where
 * the GPUs can: peer copies (messages, collectives without NCCL) then go
 * GPU to GPU instead of through the host.  The primary contexts are shared,
 * so another executor may have enabled it already.  Where the GPUs cannot
 * (no link, or more peers than the GPU takes: CUDA_ERROR_TOO_MANY_PEERS) the
 * copies go through the host, slower but right, and rt_cuda_warning says
 * so, naming the first such pair. */
static int enable_peers(rt_cuda *x, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++)
        for (int e = 0; e < x->p->ndevices; e++) {
            cuda_gpu *G = &x->dev[d], *H = &x->dev[e];
            CUdevice a, b;
            int can = 0;
            if (!cuda_mine(x, d) || !cuda_mine(x, e) || G->ctx == H->ctx)
                continue;
            CU(cuDeviceGet(&a, G->ordinal));
            CU(cuDeviceGet(&b, H->ordinal));
            CU(cuDeviceCanAccessPeer(&can, a, b));
            CUresult r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
            if (can) {
                CU(cuCtxSetCurrent(G->ctx));
                r = x->L.cuCtxEnablePeerAccess(H->ctx, 0);
            }
            if (r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED || r == CUDA_ERROR_TOO_MANY_PEERS) {
                if (!x->warning[0])
                    snprintf(x->warning, sizeof x->warning, "GPU %d cannot reach GPU %d directly "
                             "(%s): gnc's copies between their devices go through the host",
                             G->ordinal, H->ordinal,
                             r == CUDA_ERROR_TOO_MANY_PEERS ? "it has more peers than it takes"
                                                            : "no peer access");
                continue;
            }
            if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
                const char *s = "?";
                x->L.cuGetErrorString(r, &s);
                return base_fail(err, errlen, "device %d (GPU %d): peer access to GPU %d: %s", d,
                            G->ordinal, H->ordinal, s);
            }
        }
    return 0;
}

/* The fp16 loss scaler's state as a fresh one: scale, good steps, found_inf, 1/scale. */
static int reset_loss_scale(rt_cuda *x, int d, char *err, size_t errlen)
{
    const cg_program *p = x->p;
    if (!p->loss_scale.enabled || !cuda_mine(x, d))
        return 0;
    cuda_gpu *G = &x->dev[d];
    float st[4] = {p->loss_scale.init, 0, 0, 1 / p->loss_scale.init};
    memset(&st[1], 0, 8);
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuMemcpyHtoDAsync(cuda_ptr(G, p->devices[d].loss_scale), st, sizeof st, G->stream[S_COPY]));
    CU(cuStreamSynchronize(G->stream[S_COPY]));
    return 0;
}

rt_cuda *rt_cuda_open_ex(const cg_program *p, const rt_cuda_options *o, char *err, size_t errlen)
{
    rt_cuda_options dflt = {0};
    if (!o)
        o = &dflt;
    for (int m = 0; m < p->nmodules; m++)
        if (!p->modules[m].nimages) {
            base_fail(err, errlen, "the program is not compiled (cg_compile) for the GPU");
            return NULL;
        }
    rt_cuda *x = base_calloc(1, sizeof *x);
    int ninputs = 0;
    for (int d = 0; d < p->ndevices; d++)
        ninputs += p->devices[d].nvalues;
    if (x)
        x->pending = base_calloc((size_t)ninputs + 1, sizeof *x->pending);
    if (!x || !x->pending) {
        base_free(x);
        base_fail(err, errlen, "out of memory");
        return NULL;
    }
    x->p = p;
    const char *env = getenv("GNC_CUDA_EAGER");
    if (env && *env && strcmp(env, "0") && strcmp(env, "1")) {
        base_fail(err, errlen, "GNC_CUDA_EAGER must be 0 or 1, not '%s'", env);
        rt_cuda_close(x);
        return NULL;
    }
    x->eager = o->eager || (env && !strcmp(env, "1"));
    x->init_due = 1;
    x->rank = -1;
    if (o->ranks > 1) {
        if (o->ranks != p->ndevices || o->rank < 0 || o->rank >= o->ranks || !o->id) {
            base_fail(err, errlen, "a program of %d device%s across %d processes: %s", p->ndevices,
                 p->ndevices == 1 ? "" : "s", o->ranks,
                 o->ranks != p->ndevices ? "each process runs one device"
                 : !o->id ? "no NCCL id (rt_cuda_unique_id on rank 0)" : "rank out of range");
            rt_cuda_close(x);
            return NULL;
        }
        x->rank = o->rank;
        /* the init steps run again in the process whose parameters were
           written (init_due), which the other processes cannot know */
        for (int d = 0; d < p->ndevices; d++)
            for (int i = 0; i < p->devices[d].ninit; i++)
                if (p->devices[d].init[i].kind == CG_STEP_COMM) {
                    base_fail(err, errlen, "device %d derives weights through communication "
                         "(init step %d), which gnc does not run across processes yet: run "
                         "the program in one process", d, i);
                    rt_cuda_close(x);
                    return NULL;
                }
        /* NCCL's sends wait for their receives: refused before any process
           waits for ever (codegen/p2p.c) */
        if (cg_p2p_order_check(p, 0, err, errlen)) {
            rt_cuda_close(x);
            return NULL;
        }
    }
    if (driver_load(&x->L, o->libdir, err, errlen)) {
        rt_cuda_close(x);
        return NULL;
    }
    int count = 0;
    x->L.cuDeviceGetCount(&count);
    x->dev = base_calloc((size_t)p->ndevices, sizeof *x->dev);
    if (!x->dev) {
        base_fail(err, errlen, "out of memory");
        rt_cuda_close(x);
        return NULL;
    }
    int mine = 0;
    for (int d = 0; d < p->ndevices; d++)
        mine += cuda_mine(x, d);
    if (!o->gpus && !o->share && count > 0 && count < mine) {
        base_fail(err, errlen, "the program has %d devices and this machine %d GPU%s: compile "
                  "it for %d, or let its devices share GPUs (gnc --share-gpus, "
                  "gnc_session_options.share_gpus; docs/runtime.md)", mine, count,
                  count == 1 ? "" : "s", count);
        rt_cuda_close(x);
        return NULL;
    }
    for (int d = 0; d < p->ndevices; d++) {
        if (!cuda_mine(x, d))
            continue;
        x->dev[d].ordinal = o->gpus ? o->gpus[d] : d % count;
        if (x->dev[d].ordinal < 0 || x->dev[d].ordinal >= count) {
            base_fail(err, errlen, "device %d: GPU %d does not exist (%d present)", d,
                 x->dev[d].ordinal, count);
            rt_cuda_close(x);
            return NULL;
        }
    }
    for (int d = 0; x->rank < 0 && d < p->ndevices; d++)
        for (int e = 0; e < d; e++)
            x->local_comm |= x->dev[d].ordinal == x->dev[e].ordinal;
    /* NCCL in one process: a thread per GPU, whose messages are NCCL's too,
       as across processes, where NCCL's sends, which wait for their
       receives, cannot deadlock (else one thread, below) */
    char why[512];
    x->threads = x->rank < 0 && !x->local_comm && has_collective(p) &&
                 !cg_p2p_order_check(p, 0, why, sizeof why) &&
                 !cg_p2p_order_check(p, 1, why, sizeof why);
    int rc = 0;
    for (int d = 0; d < p->ndevices && !rc; d++)
        rc = cuda_mine(x, d) ? open_device(x, d, err, errlen) : 0;
    for (int d = 0; d < p->ndevices && !rc; d++)
        rc = cuda_mine(x, d) ? open_messages(x, d, err, errlen) : 0;
    if (!rc)
        rc = enable_peers(x, err, errlen);
    if (!rc)
        rc = cuda_libs_open(x, o->libdir, o->id, err, errlen);
    for (int d = 0; d < p->ndevices && !rc; d++)
        rc = reset_loss_scale(x, d, err, errlen);
    /* one thread driving several GPUs through NCCL: step by step, as NCCL
       warns that "using multiple GPUs per process with CUDA graph capture may
       result in deadlocks ... likely with single-threaded applications" */
    if (!rc && x->rank < 0 && !x->threads && cuda_libs_nccl(x))
        x->eager = 1;
    if (rc) {
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
    if (x->L.so && x->in_flight) {
        for (int d = 0; d < x->p->ndevices; d++) {
            if (!x->dev[d].ctx)
                continue;
            x->L.cuCtxSetCurrent(x->dev[d].ctx);
            x->L.cuStreamSynchronize(x->dev[d].stream[S_COMPUTE]);
        }
    }
    cuda_pool_stop(x);
    /* the graph first: its nodes hold the libraries' work (NCCL's, cuDNN's) */
    if (x->graph)
        x->L.cuGraphExecDestroy(x->graph);
    for (int d = 0; x->dev && d < x->p->ndevices; d++)
        if (x->dev[d].graph)
            x->L.cuGraphExecDestroy(x->dev[d].graph);
    if (x->L.so)
        cuda_libs_close(x);
    for (int d = 0; x->dev && d < x->p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        if (!G->ctx)
            continue;
        x->L.cuCtxSetCurrent(G->ctx);
        for (int s = 0; s < S_N; s++) {
            if (G->stream[s])
                x->L.cuStreamDestroy(G->stream[s]);
            if (G->join[s])
                x->L.cuEventDestroy(G->join[s]);
        }
        CUevent ev[3] = {G->fork, G->prefetched, G->staged};
        for (int e = 0; e < 3; e++)
            if (ev[e])
                x->L.cuEventDestroy(ev[e]);
        for (int m = 0; G->modules && m < x->p->nmodules; m++)
            if (G->modules[m])
                x->L.cuModuleUnload(G->modules[m]);
        for (int r = 0; r < CG_NREGIONS; r++)
            if (G->region[r])
                x->L.cuMemFree(G->region[r]);
        if (G->staging)
            x->L.cuMemFree(G->staging);
        if (G->pinned)
            x->L.cuMemFreeHost(G->pinned);
        if (G->mailbox)
            x->L.cuMemFree(G->mailbox);
        if (G->scratch)
            x->L.cuMemFree(G->scratch);
        if (G->tail)
            x->L.cuEventDestroy(G->tail);
        if (G->coll)
            x->L.cuEventDestroy(G->coll);
        for (int i = 0; i < G->nmessages; i++)
            if (G->messages[i].sent) {
                x->L.cuCtxSetCurrent(x->dev[G->messages[i].sender].ctx);
                x->L.cuEventDestroy(G->messages[i].sent);
                x->L.cuCtxSetCurrent(G->ctx);
            }
        base_free(G->messages);
        for (int init = 0; init < 2; init++) {
            int n;
            steps_of(x, d, init, &n);
            for (int s = 0; s < n; s++) {
                if (G->args[init])
                    base_free(G->args[init][s]);
                if (G->done[init] && G->done[init][s])
                    x->L.cuEventDestroy(G->done[init][s]);
            }
            base_free(G->args[init]);
            base_free(G->done[init]);
        }
        for (int k = 0; G->marks && k < 1 + 2 * x->p->devices[d].nsteps; k++)
            if (G->marks[k])
                x->L.cuEventDestroy(G->marks[k]);
        base_free(G->marks);
        base_free(G->modules);
        base_free(G->functions);
        CUdevice dev;
        if (x->L.cuDeviceGet(&dev, G->ordinal) == CUDA_SUCCESS)
            x->L.cuDevicePrimaryCtxRelease(dev);
    }
    base_free(x->dev);
    base_free(x->pending);
    base_free(x->events);
    base_free(x);
}

const char *rt_cuda_warning(const rt_cuda *x)
{
    return x && x->warning[0] ? x->warning : NULL;
}

int rt_cuda_graphs(const rt_cuda *x)
{
    if (!x || x->eager || x->profile)
        return 0;
    if (!x->threads)
        return x->graph != NULL;
    int n = 0;
    for (int d = 0; d < x->p->ndevices; d++)
        n += x->dev[d].graph != NULL;
    return n;
}

int64_t rt_cuda_region_bytes(const rt_cuda *x, int d, cg_region r)
{
    return x && d >= 0 && d < x->p->ndevices ? x->dev[d].bytes[r] : 0;
}

int rt_cuda_memory(rt_cuda *x, int d, rt_cuda_mem *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!x || d < 0 || d >= x->p->ndevices)
        return base_fail(err, errlen, "the program has no device %d", d);
    if (x->rank >= 0 && d != x->rank)
        return 1;
    cuda_gpu *G = &x->dev[d];
    memcpy(m->region, G->bytes, sizeof m->region);
    m->staging = G->staging ? G->bytes[CG_INPUTS] : 0;
    m->mailbox = G->mailbox ? G->mailbox_bytes : 0;
    m->scratch = G->scratch ? G->scratch_bytes : 0;
    m->zeros = G->zeros ? G->zeros_bytes : 0;
    rt_cuda_nccl_use u = nccl_use(x, d);
    m->reserve = (int64_t)rt_cuda_reserve(x->p, d, &u);
    size_t freeb = 0, total = 0;
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuMemGetInfo(&freeb, &total));
    m->used = (int64_t)G->free_at_open - (int64_t)freeb;
    return 0;
}

int rt_cuda_loss_scale(rt_cuda *x, int d, float *scale, int *good, char *err, size_t errlen)
{
    if (!x || d < 0 || d >= x->p->ndevices)
        return base_fail(err, errlen, "the program has no device %d", d);
    if (!cuda_mine(x, d))
        return 1;
    float st[4] = {0, 0, 0, 0};
    if (x->p->loss_scale.enabled) {
        cuda_gpu *G = &x->dev[d];
        CU(cuCtxSetCurrent(G->ctx));
        CU(cuMemcpyDtoHAsync(st, cuda_ptr(G, x->p->devices[d].loss_scale), sizeof st,
                             G->stream[S_COPY]));
        CU(cuStreamSynchronize(G->stream[S_COPY]));
    }
    int32_t n;
    memcpy(&n, &st[1], sizeof n);
    *scale = st[0];
    if (good)
        *good = n;
    return 0;
}

/* ---------------------------------------------------------------- values */


/* Copies value v of device d between the host (floats as float) and where it
 * lives (to the inputs' staging buffer for a prefetch); synchronous for the
 * caller's buffer, and for the whole copy unless prefetching. */
static int copy_value(rt_cuda *x, int d, const cg_value *cv, void *host, int up, int prefetch,
                      char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    unsigned char *stage = host;
    CUresult r = x->L.cuCtxSetCurrent(G->ctx);
    int half = ir_is_float(cv->dtype) && cv->dtype != IR_F32;
    if (prefetch && G->pinned) {
        /* through the page-locked copy of staging, so that the copy is
           asynchronous; the last copy out of it must have read it */
        if (r == CUDA_SUCCESS && G->pinned_busy)
            r = x->L.cuEventSynchronize(G->prefetched);
        G->pinned_busy = 0;
        stage = G->pinned + cv->at.offset;
        if (!half)
            memcpy(stage, host, (size_t)cv->bytes);
    } else if (half) {
        stage = base_malloc((size_t)cv->bytes + 1);
        if (!stage)
            return base_fail(err, errlen, "out of memory");
    }
    for (int64_t i = 0; up && half && i < cv->numel; i++)
        ((unsigned short *)stage)[i] = cg_f32_to_half(((const float *)host)[i], cv->dtype);
    CUstream st = G->stream[S_COPY];
    if (r == CUDA_SUCCESS && prefetch) {
        /* the last launch's copy out of staging must have read it */
        r = x->L.cuStreamWaitEvent(st, G->staged, 0);
        if (r == CUDA_SUCCESS)
            r = x->L.cuMemcpyHtoDAsync(G->staging + (CUdeviceptr)cv->at.offset, stage,
                                       (size_t)cv->bytes, st);
        if (r == CUDA_SUCCESS)
            r = x->L.cuEventRecord(G->prefetched, st);
        G->pinned_busy = G->pinned != NULL;
    } else if (r == CUDA_SUCCESS) {
        if (up)
            r = x->L.cuMemcpyHtoDAsync(cuda_ptr(G, cv->at), stage, (size_t)cv->bytes, st);
        else
            r = x->L.cuMemcpyDtoHAsync(stage, cuda_ptr(G, cv->at), (size_t)cv->bytes, st);
        if (r == CUDA_SUCCESS)
            r = x->L.cuStreamSynchronize(st);
    }
    for (int64_t i = 0; !up && r == CUDA_SUCCESS && stage != host && i < cv->numel; i++)
        ((float *)host)[i] = cg_half_to_f32(((const unsigned short *)stage)[i], cv->dtype);
    if (stage != host && !(prefetch && G->pinned))
        base_free(stage);
    if (r != CUDA_SUCCESS) {
        const char *s = "?";
        x->L.cuGetErrorString(r, &s);
        return base_fail(err, errlen, "device %d: copying %s %s the GPU: %s", d, cv->name,
                    up ? "to" : "from", s);
    }
    return 0;
}

static int transfer(rt_cuda *x, int device, const ir_value *v, void *host, int up, int prefetch,
                    char *err, size_t errlen)
{
    const cg_program *p = x->p;
    /* a write or a read waits for the run in flight (a prefetch does not) */
    if (!prefetch && x->in_flight && rt_cuda_wait(x, err, errlen))
        return -1;
    if (device >= 0 && device < p->ndevices && !cuda_mine(x, device))
        return base_fail(err, errlen, "device %d runs in another process (rank %d)", device, device);
    int done = 0;
    for (int d = device < 0 ? 0 : device; d < p->ndevices && (device < 0 || d == device); d++) {
        const cg_value *cv = cuda_mine(x, d) ? cg_value_of(p, d, v) : NULL;
        if (!cv)
            continue;
        if (prefetch && cv->kind != CG_VALUE_INPUT)
            return base_fail(err, errlen, "%s is not an input: only inputs are prefetched", v->name);
        if (copy_value(x, d, cv, host, up, prefetch, err, errlen))
            return -1;
        /* an input written now is not overwritten by an earlier prefetch
           (pending copies are offsets into the inputs' region alone) */
        for (int i = 0; up && !prefetch && cv->kind == CG_VALUE_INPUT && i < x->npending; i++)
            if (x->pending[i].device == d && x->pending[i].offset == cv->at.offset)
                x->pending[i--] = x->pending[--x->npending];
        if (prefetch) {
            int i = 0;
            while (i < x->npending && !(x->pending[i].device == d &&
                                        x->pending[i].offset == cv->at.offset))
                i++;
            x->pending[i] = (cuda_pending){d, cv->at.offset, cv->bytes};
            x->npending += i == x->npending;
        }
        if (up && cv->kind == CG_VALUE_PARAM)
            x->init_due = 1; /* the weights computed from it are stale */
        done = 1;
        if (!up)
            break;
    }
    /* an input the program does not read (an optimizer's unused step), or
       that only other processes' devices read */
    if (!done && up && device < 0 && v->kind == IR_VALUE_INPUT)
        return 0;
    if (!done)
        return base_fail(err, errlen, "no device%s holds %s", device < 0 ? " of this process"
                    : " of that number", v->name);
    return 0;
}

int rt_cuda_holds(const rt_cuda *x, const ir_value *v)
{
    for (int d = 0; d < x->p->ndevices; d++)
        if (cuda_mine(x, d) && cg_value_of(x->p, d, v))
            return 1;
    return 0;
}

int rt_cuda_write(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                  size_t errlen)
{
    return transfer(x, device, v, (void *)data, 1, 0, err, errlen);
}

int rt_cuda_prefetch(rt_cuda *x, int device, const ir_value *v, const void *data, char *err,
                     size_t errlen)
{
    return transfer(x, device, v, (void *)data, 1, 1, err, errlen);
}

int rt_cuda_read(rt_cuda *x, int device, const ir_value *v, void *out, char *err, size_t errlen)
{
    return transfer(x, device, v, out, 0, 0, err, errlen);
}

int rt_cuda_init_params(rt_cuda *x, uint64_t seed, char *err, size_t errlen)
{
    const ir_graph *g = x->p->graph;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        int64_t n = ir_type_numel(&v->type);
        if (!ir_is_float(v->type.dtype))
            continue;
        float *buf = base_malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
        if (!buf)
            return base_fail(err, errlen, "out of memory");
        ir_init_fill(v, seed, buf);
        int rc = 0;
        for (int d = 0; d < x->p->ndevices && !rc; d++)
            if (cuda_mine(x, d) && cg_value_of(x->p, d, v))
                rc = rt_cuda_write(x, d, v, buf, err, errlen);
        base_free(buf);
        if (rc)
            return -1;
    }
    for (int d = 0; d < x->p->ndevices; d++)
        if (reset_loss_scale(x, d, err, errlen))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- issuing */

/* Profiling: device d's mark k (cuda_gpu.marks) recorded on stream st (of
 * the current context), in a timed run (not the init steps). */
static int mark(rt_cuda *x, int d, int init, int k, CUstream st, char *err, size_t errlen)
{
    if (!init && x->timed)
        CU(cuEventRecord(x->dev[d].marks[k], st));
    return 0;
}

/* Step s of device d, not a communication step, on its compute stream: after
 * the communication step it waits for, and recording its event if one waits
 * for it. */
static int issue_step(rt_cuda *x, int d, int init, int s, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    int n;
    const cg_step *st = &steps_of(x, d, init, &n)[s];
    CUstream cs = G->stream[S_COMPUTE];
    CU(cuCtxSetCurrent(G->ctx));
    if (st->wait >= 0)
        CU(cuStreamWaitEvent(cs, G->done[init][st->wait], 0));
    if (mark(x, d, init, 1 + 2 * s, cs, err, errlen))
        return -1;
    if (st->kind == CG_STEP_KERNEL) {
        const cg_launch *l = &st->u.launch;
        CU(cuLaunchKernel(G->functions[l->kernel], l->grid[0], l->grid[1], l->grid[2],
                          l->block[0], l->block[1], l->block[2], (unsigned)l->shared_bytes, cs,
                          G->args[init][s], NULL));
    } else if (st->kind == CG_STEP_COPY) {
        CU(cuMemcpyDtoDAsync(cuda_ptr(G, st->u.copy.dst), cuda_ptr(G, st->u.copy.src),
                             (size_t)st->u.copy.bytes, cs));
    } else if (cuda_lib_issue(x, d, st, G->lib[init][s], cs, err, errlen)) {
        return -1;
    }
    if (mark(x, d, init, 2 + 2 * s, cs, err, errlen))
        return -1;
    if (G->done[init][s])
        CU(cuEventRecord(G->done[init][s], cs));
    return 0;
}

/* bytes from device s's src to device d's dst on stream st (of the current context) */
static int copy_between(rt_cuda *x, int d, CUdeviceptr dst, int s, CUdeviceptr src, int64_t bytes,
                        CUstream st, char *err, size_t errlen)
{
    if (x->dev[d].ctx == x->dev[s].ctx)
        CU(cuMemcpyDtoDAsync(dst, src, (size_t)bytes, st));
    else
        CU(cuMemcpyPeerAsync(dst, x->dev[d].ctx, src, x->dev[s].ctx, (size_t)bytes, st));
    return 0;
}

/* acc += x (or max), n elements, with the step's reduction kernel on the
 * leader's stream. */
static int reduce_into(rt_cuda *x, int lead, const cg_comm *c, CUdeviceptr acc, CUdeviceptr from,
                       int64_t n, CUstream st, char *err, size_t errlen)
{
    if (c->local_kernel < 0 || c->local_kernel >= x->p->nkernels)
        return base_fail(err, errlen, "communication %lld has no reduction kernel for devices that "
                    "share a GPU", (long long)c->id);
    void *args[3] = {&acc, &from, &n};
    CU(cuLaunchKernel(x->dev[lead].functions[c->local_kernel], (unsigned)((n + 255) / 256), 1, 1,
                      256, 1, 1, 0, st, args, NULL));
    return 0;
}

/* One collective between devices of which some share a GPU, without NCCL:
 * its members' communication streams so far joined into the leader's (rank
 * 0's); there the data moves (device-to-device and peer copies) and the
 * reductions run (the step's reduction kernel); then each member's stream
 * waits for the leader's. */
static int issue_local(rt_cuda *x, int init, int n, const int *devs, const cg_step *const *steps,
                       char *err, size_t errlen)
{
    int lead = devs[0];
    cuda_gpu *L = &x->dev[lead];
    CUstream ls = L->stream[S_COMM];
    const cg_comm *c0 = &steps[0]->u.comm;
    int64_t es = (int64_t)ir_dtype_size(c0->dtype);
    for (int i = 0; i < n; i++) {
        cuda_gpu *G = &x->dev[devs[i]];
        CU(cuCtxSetCurrent(G->ctx));
        if (steps[i]->wait >= 0)
            CU(cuStreamWaitEvent(G->stream[S_COMM], G->done[init][steps[i]->wait], 0));
        if (i == 0)
            continue;
        CU(cuEventRecord(G->tail, G->stream[S_COMM]));
        CU(cuCtxSetCurrent(L->ctx));
        CU(cuStreamWaitEvent(ls, G->tail, 0));
    }
    CU(cuCtxSetCurrent(L->ctx));
#define SEND(i, t) cuda_ptr(&x->dev[devs[i]], steps[i]->u.comm.send[t])
#define RECV(i, t) cuda_ptr(&x->dev[devs[i]], steps[i]->u.comm.recv[t])
    switch (c0->op) {
    case IR_OP_ALL_REDUCE:
        for (int t = 0; t < c0->ntensors; t++) {
            int64_t bytes = c0->count[t] * es;
            if (SEND(0, t) != RECV(0, t))
                CU(cuMemcpyDtoDAsync(RECV(0, t), SEND(0, t), (size_t)bytes, ls));
            for (int i = 1; i < n; i++)
                if (copy_between(x, lead, L->scratch, devs[i], SEND(i, t), bytes, ls, err, errlen) ||
                    reduce_into(x, lead, c0, RECV(0, t), L->scratch, c0->count[t], ls, err, errlen))
                    return -1;
            for (int i = 1; i < n; i++)
                if (copy_between(x, devs[i], RECV(i, t), lead, RECV(0, t), bytes, ls, err, errlen))
                    return -1;
        }
        break;
    case IR_OP_BROADCAST:
        for (int i = 0; i < n; i++)
            if (copy_between(x, devs[i], RECV(i, 0), devs[c0->root], SEND(c0->root, 0),
                             c0->count[0] * es, ls, err, errlen))
                return -1;
        break;
    case IR_OP_ALL_GATHER: {
        int64_t part = c0->count[0] * es;
        for (int i = 0; i < n; i++)
            if (copy_between(x, lead, RECV(0, 0) + (CUdeviceptr)(i * part), devs[i], SEND(i, 0),
                             part, ls, err, errlen))
                return -1;
        for (int i = 1; i < n; i++)
            if (copy_between(x, devs[i], RECV(i, 0), lead, RECV(0, 0), part * n, ls, err, errlen))
                return -1;
        break;
    }
    case IR_OP_REDUCE_SCATTER: {
        int64_t all = c0->count[0] * n, part = c0->count[0] * es;
        CUdeviceptr sum = L->scratch, operand = L->scratch + (CUdeviceptr)(L->scratch_bytes / 2);
        CU(cuMemcpyDtoDAsync(sum, SEND(0, 0), (size_t)(all * es), ls));
        for (int i = 1; i < n; i++)
            if (copy_between(x, lead, operand, devs[i], SEND(i, 0), all * es, ls, err, errlen) ||
                reduce_into(x, lead, c0, sum, operand, all, ls, err, errlen))
                return -1;
        for (int i = 0; i < n; i++)
            if (copy_between(x, devs[i], RECV(i, 0), lead, sum + (CUdeviceptr)(i * part), part, ls,
                             err, errlen))
                return -1;
        break;
    }
    default:
        return base_fail(err, errlen, "communication %lld: not a collective", (long long)c0->id);
    }
#undef SEND
#undef RECV
    CU(cuEventRecord(L->coll, ls));
    for (int i = 1; i < n; i++) {
        cuda_gpu *G = &x->dev[devs[i]];
        CU(cuCtxSetCurrent(G->ctx));
        CU(cuStreamWaitEvent(G->stream[S_COMM], L->coll, 0));
    }
    return 0;
}

/* One communication call: devs[i]'s step idx[i], i < n, on the
 * communication streams, each after the compute step it waits for. */
static int issue_comm(rt_cuda *x, int init, int n, const int *devs, const int *idx, char *err,
                      size_t errlen)
{
    const cg_step *steps[64];
    for (int i = 0; i < n; i++) {
        int count;
        steps[i] = &steps_of(x, devs[i], init, &count)[idx[i]];
    }
    /* timed: each member's begin after what it waits for (waited for again
       below, which orders nothing new) */
    for (int i = 0; !init && x->timed && i < n; i++) {
        cuda_gpu *G = &x->dev[devs[i]];
        CU(cuCtxSetCurrent(G->ctx));
        if (steps[i]->wait >= 0)
            CU(cuStreamWaitEvent(G->stream[S_COMM], G->done[init][steps[i]->wait], 0));
        if (mark(x, devs[i], init, 1 + 2 * idx[i], G->stream[S_COMM], err, errlen))
            return -1;
    }
    if (x->local_comm) {
        if (issue_local(x, init, n, devs, steps, err, errlen))
            return -1;
    } else {
        for (int i = 0; i < n; i++) {
            cuda_gpu *G = &x->dev[devs[i]];
            CU(cuCtxSetCurrent(G->ctx));
            if (steps[i]->wait >= 0)
                CU(cuStreamWaitEvent(G->stream[S_COMM], G->done[init][steps[i]->wait], 0));
        }
        if (cuda_comm_issue(x, n, devs, steps, err, errlen))
            return -1;
    }
    for (int i = 0; i < n; i++) {
        cuda_gpu *G = &x->dev[devs[i]];
        CU(cuCtxSetCurrent(G->ctx));
        if (mark(x, devs[i], init, 2 + 2 * idx[i], G->stream[S_COMM], err, errlen))
            return -1;
        if (G->done[init][idx[i]])
            CU(cuEventRecord(G->done[init][idx[i]], G->stream[S_COMM]));
    }
    return 0;
}

/* A point-to-point step of device d, in one process: a send copies into the
 * receiver's mailbox at once (peer to peer) and records the message's event;
 * a recv, issued after its send, waits for that event and copies out of the
 * mailbox.  Both on the communication stream, after what the step waits for.
 * So a send never waits for its receiver, as in the CPU executor. */
static int issue_p2p(rt_cuda *x, int d, int init, int s, cuda_message *m, char *err,
                     size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    int n;
    const cg_step *st = &steps_of(x, d, init, &n)[s];
    const cg_comm *c = &st->u.comm;
    CUstream cs = G->stream[S_COMM];
    CU(cuCtxSetCurrent(G->ctx));
    if (st->wait >= 0)
        CU(cuStreamWaitEvent(cs, G->done[init][st->wait], 0));
    if (mark(x, d, init, 1 + 2 * s, cs, err, errlen))
        return -1;
    if (c->op == IR_OP_SEND) {
        cuda_gpu *R = &x->dev[c->peer];
        CUdeviceptr to = R->mailbox + (CUdeviceptr)m->offset;
        if (R->ctx == G->ctx)
            CU(cuMemcpyDtoDAsync(to, cuda_ptr(G, c->send[0]), (size_t)m->bytes, cs));
        else
            CU(cuMemcpyPeerAsync(to, R->ctx, cuda_ptr(G, c->send[0]), G->ctx, (size_t)m->bytes, cs));
        CU(cuEventRecord(m->sent, cs));
        m->issued = 1;
    } else {
        CU(cuStreamWaitEvent(cs, m->sent, 0));
        CU(cuMemcpyDtoDAsync(cuda_ptr(G, c->recv[0]), G->mailbox + (CUdeviceptr)m->offset,
                             (size_t)m->bytes, cs));
    }
    if (mark(x, d, init, 2 + 2 * s, cs, err, errlen))
        return -1;
    if (G->done[init][s])
        CU(cuEventRecord(G->done[init][s], cs));
    return 0;
}

/* Across processes: device d's batch of point-to-point steps s .. e - 1
 * (cg_p2p_batch_end's) as one NCCL group on the communication stream, after
 * what each step waits for, in program order with its collectives: NCCL's
 * rule of one ordered stream per communicator, whose sends may wait for
 * their receives, and which open checked cannot wait for ever
 * (cg_p2p_order_check). */
static int issue_p2p_batch(rt_cuda *x, int d, int init, int s, int e, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    int n;
    const cg_step *steps = steps_of(x, d, init, &n);
    CUstream cs = G->stream[S_COMM];
    CU(cuCtxSetCurrent(G->ctx));
    for (int t = s; t < e; t++) {
        if (steps[t].wait >= 0)
            CU(cuStreamWaitEvent(cs, G->done[init][steps[t].wait], 0));
        if (mark(x, d, init, 1 + 2 * t, cs, err, errlen))
            return -1;
    }
    if (cuda_comm_p2p(x, d, steps, s, e, cs, err, errlen))
        return -1;
    for (int t = s; t < e; t++) {
        if (mark(x, d, init, 2 + 2 * t, cs, err, errlen))
            return -1;
        if (G->done[init][t])
            CU(cuEventRecord(G->done[init][t], cs));
    }
    return 0;
}

/* Issues the steps of one run (or the init steps) of device d, in order, as
 * the one device of its process or its thread: each collective its own NCCL
 * call (the group's other members make theirs in their processes or
 * threads). */
static int issue_device(rt_cuda *x, int d, int init, char *err, size_t errlen)
{
    int n;
    const cg_step *steps = steps_of(x, d, init, &n);
    for (int s = 0; s < n; s++) {
        const cg_comm *c = &steps[s].u.comm;
        int rc;
        if (steps[s].kind != CG_STEP_COMM) {
            rc = issue_step(x, d, init, s, err, errlen);
        } else if (c->op == IR_OP_SEND || c->op == IR_OP_RECV) {
            int e = cg_p2p_batch_end(steps, n, s);
            rc = issue_p2p_batch(x, d, init, s, e, err, errlen);
            s = e - 1;
        } else {
            rc = issue_comm(x, init, 1, &d, &s, err, errlen);
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* Issues the steps of one run (or the init steps) of every device, in
 * lockstep as tests/cg_host.c runs them: each device up to its next
 * communication step; then every collective whose whole group is there as
 * one NCCL group call (one thread drives every GPU, which NCCL requires to
 * be grouped), every send, and every recv whose send was issued. */
static int issue_all(rt_cuda *x, int init, char *err, size_t errlen)
{
    int nd = x->p->ndevices, pos[64] = {0};
    if (x->rank >= 0)
        return issue_device(x, x->rank, init, err, errlen);
    if (nd > 64)
        return base_fail(err, errlen, "more than 64 devices in one process");
    for (int d = 0; d < nd; d++)
        for (int i = 0; i < x->dev[d].nmessages; i++)
            x->dev[d].messages[i].issued = 0;
    for (;;) {
        int progress = 0, left = 0;
        const cg_comm *at[64];
        for (int d = 0; d < nd; d++) {
            int n;
            const cg_step *steps = steps_of(x, d, init, &n);
            for (; pos[d] < n && steps[pos[d]].kind != CG_STEP_COMM; pos[d]++, progress = 1)
                if (issue_step(x, d, init, pos[d], err, errlen))
                    return -1;
            at[d] = pos[d] < n ? &steps[pos[d]].u.comm : NULL;
            left += at[d] != NULL;
        }
        if (!left)
            return 0;
        for (int d = 0; d < nd; d++) {
            const cg_comm *c = at[d];
            int devs[64], idx[64], n = 0;
            if (!c)
                continue;
            if (c->op == IR_OP_SEND || c->op == IR_OP_RECV) {
                int e = c->op == IR_OP_SEND ? c->peer : d;
                cuda_message *m = e >= 0 && e < nd ? message(&x->dev[e], init, c->id) : NULL;
                if (!m)
                    return base_fail(err, errlen, "device %d: message %lld has no receiver", d,
                                (long long)c->id);
                if (c->op == IR_OP_RECV && !m->issued)
                    continue;
                if (issue_p2p(x, d, init, pos[d], m, err, errlen))
                    return -1;
                pos[d]++, at[d] = NULL;
                progress = 1;
                continue;
            } else {
                for (int q = 0; q < c->ngroup; q++) {
                    int e = (int)c->group[q];
                    if (e < 0 || e >= nd || !at[e] || at[e]->op != c->op || at[e]->id != c->id)
                        break;
                    devs[n++] = e;
                }
                if (n != c->ngroup)
                    continue;
            }
            for (int i = 0; i < n; i++)
                idx[i] = pos[devs[i]];
            if (issue_comm(x, init, n, devs, idx, err, errlen))
                return -1;
            for (int i = 0; i < n; i++)
                pos[devs[i]]++, at[devs[i]] = NULL;
            progress = 1;
        }
        if (!progress)
            return base_fail(err, errlen, "the program's devices wait for each other forever "
                        "(a collective without its whole group, or a recv without its send)");
    }
}

/* A thread per device (below): what each does, and job on every device, each
 * on a thread of its own (the first failure's message, as "device d: ..."). */
enum { JOB_RUN, JOB_INIT, JOB_CAPTURE, JOB_REPLAY };
static int each_device(rt_cuda *x, int job, char *err, size_t errlen);

/* The first device of this process: its compute stream is where runs start
 * and end. */
static cuda_gpu *origin(rt_cuda *x)
{
    return &x->dev[x->rank < 0 ? 0 : x->rank];
}

/* The streams of device d that a run uses, and the events that join them
 * back: compute and communication.  1 for stream[i], -1 past them. */
static int run_stream(const rt_cuda *x, int d, int i, CUstream *st, CUevent *join)
{
    const cuda_gpu *G = &x->dev[d];
    if (i > S_COMM)
        return -1;
    *st = G->stream[i], *join = G->join[i];
    return 1;
}

/* One run (or the init steps) between a fork from the origin's compute stream
 * and a join back into it (run_stream's streams), so that a CUDA graph
 * captured on that stream holds all of it, and an eager run is ordered after
 * the last. */
static int issue_run(rt_cuda *x, int init, char *err, size_t errlen)
{
    const cg_program *p = x->p;
    if (x->threads)
        return each_device(x, init ? JOB_INIT : JOB_RUN, err, errlen);
    cuda_gpu *G0 = origin(x);
    CUstream st;
    CUevent join;
    CU(cuCtxSetCurrent(G0->ctx));
    CU(cuEventRecord(G0->fork, G0->stream[S_COMPUTE]));
    for (int d = 0; d < p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(G->ctx));
        for (int i = G == G0 ? S_COMM : S_COMPUTE, on; (on = run_stream(x, d, i, &st, &join)) >= 0; i++)
            if (on)
                CU(cuStreamWaitEvent(st, G0->fork, 0));
        if (mark(x, d, init, 0, G->stream[S_COMPUTE], err, errlen))
            return -1;
        if (!init)
            CU(cuMemsetD8Async(cuda_ptr(G, p->devices[d].status), 0, sizeof(cg_status),
                               G->stream[S_COMPUTE]));
    }
    if (issue_all(x, init, err, errlen))
        return -1;
    for (int d = 0; d < p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        if (!cuda_mine(x, d))
            continue;
        for (int i = G == G0 ? S_COMM : S_COMPUTE, on; (on = run_stream(x, d, i, &st, &join)) >= 0; i++) {
            if (!on)
                continue;
            CU(cuCtxSetCurrent(G->ctx));
            CU(cuEventRecord(join, st));
            CU(cuCtxSetCurrent(G0->ctx));
            CU(cuStreamWaitEvent(G0->stream[S_COMPUTE], join, 0));
        }
    }
    return 0;
}

/* ---- A thread per device ----
 *
 * One process driving several GPUs through NCCL does so in NCCL's
 * multi-thread mode: each device's host thread issues its steps as a rank
 * does across processes (issue_device: collectives and messages through
 * NCCL, every call on the device's one communication stream, in program
 * order), captures them into a graph of its own in thread-local mode and
 * launches that graph.  NCCL's user guide ("Using NCCL with CUDA Graphs")
 * warns that several GPUs per process under capture may deadlock, likely
 * with one thread (cudaGraphLaunch may block, preventing the launch across
 * all GPUs), and asks for thread-local capture where each thread drives a
 * GPU.  The threads start at the first run and live as long as the
 * executor, each waiting for the next job (cuda_pool, cuda_internal.h); of
 * the executor they write only their own device's state. */


/* Device d's run (or init steps) on its own streams: forked from its compute
 * stream and joined back into it, so that a capture there holds all of it. */
static int issue_device_run(rt_cuda *x, int d, int init, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    CUstream cs = G->stream[S_COMPUTE], ms = G->stream[S_COMM];
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuEventRecord(G->fork, cs));
    CU(cuStreamWaitEvent(ms, G->fork, 0));
    if (mark(x, d, init, 0, cs, err, errlen))
        return -1;
    if (!init)
        CU(cuMemsetD8Async(cuda_ptr(G, x->p->devices[d].status), 0, sizeof(cg_status), cs));
    if (issue_device(x, d, init, err, errlen))
        return -1;
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuEventRecord(G->join[S_COMM], ms));
    CU(cuStreamWaitEvent(cs, G->join[S_COMM], 0));
    return 0;
}

/* A run captured on G's compute stream into *out: every device's (d < 0,
 * issue_run's) or device d's alone (issue_device_run's). */
static int capture_on(rt_cuda *x, cuda_gpu *G, int d, CUgraphExec *out, char *err, size_t errlen)
{
    CUstream st = G->stream[S_COMPUTE];
    CUgraph graph = NULL;
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    int rc = d < 0 ? issue_run(x, 0, err, errlen) : issue_device_run(x, d, 0, err, errlen);
    x->L.cuCtxSetCurrent(G->ctx);
    CUresult r = x->L.cuStreamEndCapture(st, &graph);
    if (rc) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        if (graph)
            x->L.cuGraphDestroy(graph);
        return base_fail(err, errlen, "capturing the run into a CUDA graph failed: %s", why);
    }
    const char *s = "?";
    if (r == CUDA_SUCCESS) {
        r = x->L.cuGraphInstantiate(out, graph, 0);
        x->L.cuGraphDestroy(graph);
        if (r != CUDA_SUCCESS) {
            *out = NULL;
            x->L.cuGetErrorString(r, &s);
            return base_fail(err, errlen, "instantiating the run's CUDA graph failed: %s", s);
        }
        return 0;
    }
    x->L.cuGetErrorString(r, &s);
    return base_fail(err, errlen, "capturing the run into a CUDA graph failed: %s", s);
}

static int replay_device(rt_cuda *x, int d, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    CU(cuCtxSetCurrent(G->ctx));
    CU(cuGraphLaunch(G->graph, G->stream[S_COMPUTE]));
    return 0;
}

static int device_job(rt_cuda *x, int d, int job, char *err, size_t errlen)
{
    cuda_gpu *G = &x->dev[d];
    if (job == JOB_RUN || job == JOB_INIT)
        return issue_device_run(x, d, job == JOB_INIT, err, errlen);
    if (job == JOB_CAPTURE)
        return capture_on(x, G, d, &G->graph, err, errlen);
    return replay_device(x, d, err, errlen);
}

/* A device's thread: each job of the pool in turn, until told to quit. */
static void *device_thread(void *arg)
{
    cuda_worker *w = arg;
    cuda_pool *P = w->pool;
    unsigned seen = 0;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (P->generation == seen && !P->quit)
            pthread_cond_wait(&P->go, &P->mu);
        if (P->quit)
            break;
        seen = P->generation;
        int job = P->job;
        pthread_mutex_unlock(&P->mu);
        w->rc = device_job(w->x, w->d, job, w->err, sizeof w->err);
        pthread_mutex_lock(&P->mu);
        if (--P->pending == 0)
            pthread_cond_signal(&P->done);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* The pool's threads, one a device, started at the first job. */
static int pool_start(rt_cuda *x, char *err, size_t errlen)
{
    int nd = x->p->ndevices;
    cuda_pool *P = base_calloc(1, sizeof *P);
    cuda_worker *w = base_calloc((size_t)nd, sizeof *w);
    if (!P || !w) {
        base_free(P);
        base_free(w);
        return base_fail(err, errlen, "out of memory");
    }
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->go, NULL);
    pthread_cond_init(&P->done, NULL);
    P->workers = w;
    x->pool = P;
    for (; P->nworkers < nd; P->nworkers++) {
        w[P->nworkers] = (cuda_worker){.pool = P, .x = x, .d = P->nworkers};
        if (pthread_create(&w[P->nworkers].thread, NULL, device_thread, &w[P->nworkers]))
            return base_fail(err, errlen, "device %d: no host thread to drive it",
                             P->nworkers);
    }
    return 0;
}

void cuda_pool_stop(rt_cuda *x)
{
    cuda_pool *P = x->pool;
    if (!P)
        return;
    pthread_mutex_lock(&P->mu);
    P->quit = 1;
    pthread_cond_broadcast(&P->go);
    pthread_mutex_unlock(&P->mu);
    for (int d = 0; d < P->nworkers; d++)
        pthread_join(P->workers[d].thread, NULL);
    pthread_mutex_destroy(&P->mu);
    pthread_cond_destroy(&P->go);
    pthread_cond_destroy(&P->done);
    base_free(P->workers);
    base_free(P);
    x->pool = NULL;
}

static int each_device(rt_cuda *x, int job, char *err, size_t errlen)
{
    if (!x->pool && pool_start(x, err, errlen))
        return -1; /* the threads started wait for a job: cuda_pool_stop ends them */
    cuda_pool *P = x->pool;
    if (P->nworkers < x->p->ndevices)
        return base_fail(err, errlen, "device %d: no host thread to drive it", P->nworkers);
    pthread_mutex_lock(&P->mu);
    P->job = job;
    P->pending = P->nworkers;
    P->generation++;
    pthread_cond_broadcast(&P->go);
    while (P->pending > 0)
        pthread_cond_wait(&P->done, &P->mu);
    pthread_mutex_unlock(&P->mu);
    for (int d = 0; d < P->nworkers; d++)
        if (P->workers[d].rc)
            return base_fail(err, errlen, "device %d: %s", d, P->workers[d].err);
    return 0;
}

/* The run captured: one graph of every device, or one a device (threads),
 * all or none. */
static int capture(rt_cuda *x, char *err, size_t errlen)
{
    if (!x->threads)
        return capture_on(x, origin(x), -1, &x->graph, err, errlen);
    if (!each_device(x, JOB_CAPTURE, err, errlen))
        return 0;
    for (int d = 0; d < x->p->ndevices; d++)
        if (x->dev[d].graph) {
            x->L.cuGraphExecDestroy(x->dev[d].graph);
            x->dev[d].graph = NULL;
        }
    return -1;
}

static int captured(const rt_cuda *x)
{
    return x->threads ? x->dev[0].graph != NULL : x->graph != NULL;
}

void rt_cuda_set_timeout(rt_cuda *x, double seconds) { x->timeout_s = seconds; }

/* What device d of this process waits for in the run (or the init steps)
 * that NCCL does not finish: its first communication step whose event (where
 * one is recorded after it) is not reached, as "all_reduce 5 (with devices 0,
 * 1)"; else its streams, which the GPU does not say more of (a run replayed
 * from a CUDA graph records no events). */
static void pending_comm(rt_cuda *x, int d, int init, char *out, size_t len)
{
    cuda_gpu *G = &x->dev[d];
    int n;
    const cg_step *steps = steps_of(x, d, init, &n);
    snprintf(out, len, "its run's NCCL calls");
    for (int s = 0; s < n; s++) {
        const cg_comm *c = &steps[s].u.comm;
        if (steps[s].kind != CG_STEP_COMM || !G->done[init] || !G->done[init][s] ||
            x->L.cuEventQuery(G->done[init][s]) != CUDA_ERROR_NOT_READY)
            continue;
        int at = snprintf(out, len, "%s %lld (", ir_ops[c->op].name, (long long)c->id);
        if (c->op == IR_OP_SEND || c->op == IR_OP_RECV)
            at += snprintf(out + at, len - (size_t)at, "%s device %d)",
                           c->op == IR_OP_SEND ? "to" : "from", c->peer);
        else
            for (int q = 0; q < c->ngroup && at > 0 && (size_t)at < len; q++)
                at += snprintf(out + at, len - (size_t)at, "%s%lld%s", q ? ", " : "with devices ",
                               (long long)c->group[q], q + 1 == c->ngroup ? ")" : "");
        return;
    }
}

/* Waits for every run stream of this process's devices (rt_cuda_set_timeout
 * says how, with NCCL); init: the init steps were run. */
static int sync_all(rt_cuda *x, int init, char *err, size_t errlen)
{
    int nccl = cuda_libs_nccl(x);
    double secs = x->timeout_s > 0 ? x->timeout_s : 300;
    rt_wait w;
    rt_wait_start(&w, secs);
    for (int d = 0; d < x->p->ndevices; d++) {
        if (!cuda_mine(x, d))
            continue;
        CUstream st;
        CUevent join;
        CU(cuCtxSetCurrent(x->dev[d].ctx));
        for (int i = S_COMPUTE, on; (on = run_stream(x, d, i, &st, &join)) >= 0; i++) {
            if (!on)
                continue;
            if (!nccl) {
                CU(cuStreamSynchronize(st));
                continue;
            }
            CUresult r;
            char why[512] = "";
            while ((r = x->L.cuStreamQuery(st)) == CUDA_ERROR_NOT_READY) {
                if (cuda_libs_async_error(x, why, sizeof why))
                    break;
                if (rt_wait_idle(&w)) {
                    char what[256];
                    pending_comm(x, d, init, what, sizeof what);
                    snprintf(why, sizeof why, "waited %g s for %s: giving up", secs, what);
                    break;
                }
            }
            if (why[0]) {
                cuda_libs_abort(x);
                x->aborted = 1;
                if (x->rank >= 0)
                    return base_fail(err, errlen, "device %d (rank %d): %s; NCCL's communicators "
                                     "aborted", d, x->rank, why);
                return base_fail(err, errlen, "device %d: %s; NCCL's communicators aborted", d,
                                 why);
            }
            if (r != CUDA_SUCCESS) {
                const char *s = "?";
                x->L.cuGetErrorString(r, &s);
                return base_fail(err, errlen, "%s:%d: cuStreamQuery: %s", __FILE__, __LINE__, s);
            }
        }
    }
    return 0;
}

/* The prefetched inputs into place, on each device's compute stream, the
 * origin's compute stream (where the run starts) after all of them. */
static int place_prefetched(rt_cuda *x, char *err, size_t errlen)
{
    if (!x->npending)
        return 0;
    cuda_gpu *G0 = origin(x);
    for (int d = 0; d < x->p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        CUstream cs = G->stream[S_COMPUTE];
        int any = 0;
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(G->ctx));
        for (int i = 0; i < x->npending; i++) {
            const cuda_pending *q = &x->pending[i];
            if (q->device != d)
                continue;
            if (!any)
                CU(cuStreamWaitEvent(cs, G->prefetched, 0));
            any = 1;
            CU(cuMemcpyDtoDAsync(G->region[CG_INPUTS] + (CUdeviceptr)q->offset,
                                 G->staging + (CUdeviceptr)q->offset, (size_t)q->bytes, cs));
        }
        if (!any)
            continue;
        CU(cuEventRecord(G->staged, cs));
        CU(cuCtxSetCurrent(G0->ctx));
        CU(cuStreamWaitEvent(G0->stream[S_COMPUTE], G->staged, 0));
    }
    x->npending = 0;
    return 0;
}

void rt_cuda_set_profile(rt_cuda *x, int on) { x->profile = on; }

const rt_event *rt_cuda_events(const rt_cuda *x, int *n)
{
    *n = x->nevents;
    return x->events;
}

/* Profiling: the marks of this process's devices (made at the first timed
 * run, with timing), the run about to be issued timed from now. */
static int start_timing(rt_cuda *x, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        int n = 1 + 2 * x->p->devices[d].nsteps;
        if (!cuda_mine(x, d) || G->marks)
            continue;
        if (!(G->marks = base_calloc((size_t)n, sizeof *G->marks)))
            return base_fail(err, errlen, "out of memory");
        CU(cuCtxSetCurrent(G->ctx));
        for (int k = 0; k < n; k++)
            CU(cuEventCreate(&G->marks[k], CU_EVENT_DEFAULT));
    }
    x->timed = 1;
    x->launched_ms = rt_wait_now() * 1e3;
    return 0;
}

/* The timed run's steps that have an IR node, read from their marks into
 * x->events (the first RT_MAX_EVENTS kept); a fused node's step stands for
 * all of its members.  A device's run starts at the launch, or where its
 * previous run ended if later: the GPU's clock and the host's drift apart
 * (the stand-ins' is a model, not time at all), and runs never overlap. */
static int read_timing(rt_cuda *x, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++) {
        const cg_device *D = &x->p->devices[d];
        cuda_gpu *G = &x->dev[d];
        double base = x->launched_ms > G->marked_until ? x->launched_ms : G->marked_until;
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(G->ctx));
        for (int s = 0; s < D->nsteps; s++) {
            const ir_node *first = D->steps[s].node, *last = first;
            float t0, t1;
            if (!first)
                continue;
            while (last->group && last->next && last->next->group == last->group)
                last = last->next;
            CU(cuEventElapsedTime(&t0, G->marks[0], G->marks[1 + 2 * s]));
            CU(cuEventElapsedTime(&t1, G->marks[0], G->marks[2 + 2 * s]));
            if (x->nevents == x->cap_events) {
                int cap = x->cap_events ? 2 * x->cap_events : 256;
                rt_event *e = cap <= RT_MAX_EVENTS
                                  ? base_realloc(x->events, (size_t)cap * sizeof *e) : NULL;
                if (!e)
                    return 0; /* the first ones kept */
                x->events = e, x->cap_events = cap;
            }
            x->events[x->nevents++] = (rt_event){first, last, d, base + t0, base + t1};
            G->marked_until = base + t1 > G->marked_until ? base + t1 : G->marked_until;
        }
    }
    return 0;
}

int rt_cuda_launch(rt_cuda *x, char *err, size_t errlen)
{
    if (x->in_flight)
        return base_fail(err, errlen, "a run is in flight: wait for it (rt_cuda_wait) first");
    if (x->aborted)
        return base_fail(err, errlen, "an earlier wait for NCCL passed its deadline and its "
                         "communicators were aborted: this executor runs nothing more");
    if (x->init_due) {
        if (issue_run(x, 1, err, errlen) || sync_all(x, 1, err, errlen))
            return -1;
        x->init_due = 0;
    }
    if (place_prefetched(x, err, errlen))
        return -1;
    if (!x->eager && !x->profile && x->warm && !captured(x) && capture(x, err, errlen)) {
        /* across processes every rank must launch its NCCL calls the same
           way, captured or not, and this one cannot tell the others */
        if (x->rank >= 0) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            return base_fail(err, errlen, "%s: run every rank step by step (gnc --eager, "
                        "GNC_CUDA_EAGER=1, rt_cuda_options.eager)", why);
        }
        snprintf(x->warning, sizeof x->warning, "%.400s; running step by step from now on "
                 "(--eager or GNC_CUDA_EAGER=1 skips the attempt)", err);
        x->eager = 1;
    }
    if (x->eager || x->profile || !x->warm) {
        /* the first run eagerly, also where graphs follow: what the libraries
           set up at their first use (NCCL's connections, cuDNN's plans,
           lazily loaded modules) is then done before a capture */
        if (x->profile && start_timing(x, err, errlen))
            return -1;
        if (issue_run(x, 0, err, errlen)) {
            x->timed = 0;
            return -1;
        }
        x->warm = 1;
    } else if (x->threads) {
        if (each_device(x, JOB_REPLAY, err, errlen))
            return -1;
    } else {
        CU(cuCtxSetCurrent(origin(x)->ctx));
        CU(cuGraphLaunch(x->graph, origin(x)->stream[S_COMPUTE]));
    }
    x->in_flight = 1;
    return 0;
}

int rt_cuda_wait(rt_cuda *x, char *err, size_t errlen)
{
    if (!x->in_flight)
        return 0;
    int timed = x->timed;
    x->in_flight = 0, x->timed = 0;
    if (sync_all(x, 0, err, errlen) || (timed && read_timing(x, err, errlen)))
        return -1;
    for (int d = 0; d < x->p->ndevices; d++) {
        const cg_device *D = &x->p->devices[d];
        cuda_gpu *G = &x->dev[d];
        cg_status st;
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(G->ctx));
        CU(cuMemcpyDtoHAsync(&st, cuda_ptr(G, D->status), sizeof st, G->stream[S_COPY]));
        CU(cuStreamSynchronize(G->stream[S_COPY]));
        if (st.code != CG_STATUS_OK) {
            const ir_node *n = st.step >= 0 && st.step < D->nsteps ? D->steps[st.step].node : NULL;
            rt_cuda_status_message(&st, n, err, errlen);
            return -1;
        }
    }
    return 0;
}

int rt_cuda_run(rt_cuda *x, char *err, size_t errlen)
{
    return rt_cuda_launch(x, err, errlen) || rt_cuda_wait(x, err, errlen) ? -1 : 0;
}

int rt_cuda_autotune(rt_cuda *x, cg_program *p, char *err, size_t errlen)
{
    if (p != x->p)
        return base_fail(err, errlen, "rt_cuda_autotune: not the program this executor runs");
    if (x->in_flight && rt_cuda_wait(x, err, errlen))
        return -1;
    if (x->graph) {
        /* captured with the algorithms before */
        x->L.cuGraphExecDestroy(x->graph);
        x->graph = NULL;
    }
    return x->libs ? cuda_libs_autotune(x, p, err, errlen) : 0;
}

/* Device d's steps of the convolution node of step first, in order, REPS
 * times between events t0 and t1 after a first run that warms the caches:
 * the mean milliseconds of one run; -1 after saying why. */
static double time_node(rt_cuda *x, int d, const cg_step *first, CUevent t0, CUevent t1,
                        char *err, size_t errlen)
{
    enum { REPS = 10 };
    const cg_device *D = &x->p->devices[d];
    CUstream cs = x->dev[d].stream[S_COMPUTE];
    float elapsed = 0;
    for (int r = -1; r < REPS; r++) {
        if (r == 0 && x->L.cuEventRecord(t0, cs) != CUDA_SUCCESS)
            return base_fail(err, errlen, "cuEventRecord failed");
        for (int s = 0; s < D->nsteps; s++)
            if (D->steps[s].node == first->node && issue_step(x, d, 0, s, err, errlen))
                return -1;
    }
    if (x->L.cuEventRecord(t1, cs) != CUDA_SUCCESS || x->L.cuEventSynchronize(t1) != CUDA_SUCCESS ||
        x->L.cuEventElapsedTime(&elapsed, t0, t1) != CUDA_SUCCESS)
        return base_fail(err, errlen, "%s: timing with events failed", first->what);
    return elapsed / REPS;
}

int cuda_each_timed(rt_cuda *x, cuda_timed_fn fn, void *arg, char *err, size_t errlen)
{
    for (int d = 0; d < x->p->ndevices; d++) {
        CUevent t0, t1;
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(x->dev[d].ctx));
        CU(cuEventCreate(&t0, CU_EVENT_DEFAULT));
        CU(cuEventCreate(&t1, CU_EVENT_DEFAULT));
        int rc = fn(x, d, t0, t1, arg, err, errlen);
        x->L.cuEventDestroy(t0);
        x->L.cuEventDestroy(t1);
        if (rc)
            return -1;
    }
    return 0;
}

/* Each convolution node of device d's run, timed once (at its first step). */
static int time_device(rt_cuda *x, int d, CUevent t0, CUevent t1, void *arg, char *err,
                       size_t errlen)
{
    double *ms = arg;
    const cg_device *D = &x->p->devices[d];
    for (int s = 0; s < D->nsteps; s++) {
        const ir_node *n = D->steps[s].node;
        int first = 1;
        for (int e = 0; e < s && first; e++)
            first = D->steps[e].node != n;
        if (!n || !first || !cg_is_conv(n))
            continue;
        double t = time_node(x, d, &D->steps[s], t0, t1, err, errlen);
        if (t < 0)
            return -1;
        ms[n->out[0]->id] += t;
    }
    return 0;
}

int rt_cuda_time_convs(rt_cuda *x, double *ms, char *err, size_t errlen)
{
    if (x->in_flight && rt_cuda_wait(x, err, errlen))
        return -1;
    return cuda_each_timed(x, time_device, ms, err, errlen);
}

#endif
