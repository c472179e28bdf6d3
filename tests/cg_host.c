/* Generated programs on the host (cg_host.h). */
#include "cg_host.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GNC_HOST_CXX
#define GNC_HOST_CXX "c++"
#endif
#ifndef GNC_TESTS_DIR
#define GNC_TESTS_DIR "tests"
#endif

typedef const char *(*emu_entry)(const unsigned *grid, const unsigned *blk, void **args);

struct cg_host {
    void *so;
    const emu_entry *table;
    int nentries;
    int *base;          /* by program: its first entry */
    int nprogs;
    void (*release)(void);
};

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- building */

cg_host *cg_host_build(cg_program *const *progs, int n, const char *dir, char *err, size_t errlen)
{
    static int serial;
    char src[4096], lib[4096], log[4096];
    int id = __atomic_fetch_add(&serial, 1, __ATOMIC_SEQ_CST);
    snprintf(src, sizeof src, "%s/emu_%d_%d.cpp", dir, (int)getpid(), id);
    snprintf(lib, sizeof lib, "%s/emu_%d_%d.so", dir, (int)getpid(), id);
    snprintf(log, sizeof log, "%s/emu_%d_%d.log", dir, (int)getpid(), id);
    FILE *f = fopen(src, "w");
    if (!f) {
        fail(err, errlen, "cannot write %s", src);
        return NULL;
    }
    /* every module's prelude with the tensor cores' templates (cg_emu.h has wmma) */
    fprintf(f, "#include \"cg_emu.h\"\n#define GNC_WMMA 1\n");
    for (int i = 0; i < n; i++) {
        const cg_program *p = progs[i];
        fprintf(f, "namespace p%d {\n", i);
        if (p->nmodules)
            fwrite(p->modules[0].source, 1, p->modules[0].body_offset, f);
        for (int m = 0; m < p->nmodules; m++)
            fputs(p->modules[m].source + p->modules[m].body_offset, f);
        fprintf(f, "}\n");
    }
    fprintf(f, "static const emu::entry table[] = {\n");
    int total = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < progs[i]->nkernels; k++, total++)
            fprintf(f, "    EMU_ENTRY(p%d::%s),\n", i, progs[i]->kernels[k].name);
    fprintf(f, "    NULL};\nextern \"C\" const emu::entry *gnc_emu_table(int *n)\n{\n"
               "    *n = %d;\n    return table;\n}\n", total);
    fclose(f);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -fopenmp -fPIC -shared -w -I'%s' -o '%s' '%s' > '%s' 2>&1",
             GNC_HOST_CXX, GNC_TESTS_DIR, lib, src, log);
    if (system(cmd) != 0) {
        char text[1500] = "";
        FILE *l = fopen(log, "r");
        if (l) {
            size_t k = fread(text, 1, sizeof text - 1, l);
            text[k] = 0;
            fclose(l);
        }
        fail(err, errlen, "%s failed on %s:\n%s", GNC_HOST_CXX, src, text);
        return NULL;
    }
    cg_host *h = calloc(1, sizeof *h);
    h->so = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h->so) {
        fail(err, errlen, "dlopen %s: %s", lib, dlerror());
        free(h);
        return NULL;
    }
    const emu_entry *(*get)(int *) = (const emu_entry *(*)(int *))dlsym(h->so, "gnc_emu_table");
    h->release = (void (*)(void))dlsym(h->so, "gnc_emu_release");
    h->table = get(&h->nentries);
    h->nprogs = n;
    h->base = calloc((size_t)n + 1, sizeof *h->base);
    for (int i = 0, b = 0; i < n; i++) {
        h->base[i] = b;
        b += progs[i]->nkernels;
    }
    if (!getenv("GNC_EMU_KEEP")) /* GNC_EMU_KEEP=1: the emulated source stays, to read */
        unlink(src);
    unlink(lib);
    unlink(log);
    return h;
}

cg_host_kernel cg_host_entry(const cg_host *h, int prog, int k)
{
    return h->table[h->base[prog] + k];
}

void cg_host_free(cg_host *h)
{
    if (!h)
        return;
    if (h->release)
        h->release();
    dlclose(h->so);
    free(h->base);
    free(h);
}

/* ---------------------------------------------------------------- memory and values */

cg_host_mem *cg_host_mem_new(const cg_program *p)
{
    cg_host_mem *m = calloc((size_t)p->ndevices, sizeof *m);
    for (int d = 0; d < p->ndevices; d++)
        for (int r = 0; r < CG_NREGIONS; r++) {
            size_t n = (size_t)(p->devices[d].region_bytes[r] + 255) / 256 * 256;
            m[d].region[r] = aligned_alloc(256, n ? n : 256);
            memset(m[d].region[r], 0, n ? n : 256);
        }
    return m;
}

void cg_host_mem_free(const cg_program *p, cg_host_mem *m)
{
    if (!m)
        return;
    for (int d = 0; d < p->ndevices; d++)
        for (int r = 0; r < CG_NREGIONS; r++)
            free(m[d].region[r]);
    free(m);
}


static double get(const unsigned char *p, ir_dtype t, int64_t i)
{
    switch (t) {
    case IR_F32: return ((const float *)p)[i];
    case IR_BF16: case IR_F16: return cg_half_to_f32(((const unsigned short *)p)[i], t);
    case IR_I32: return ((const int32_t *)p)[i];
    case IR_I64: return (double)((const int64_t *)p)[i];
    default: return p[i];
    }
}

static void put(unsigned char *p, ir_dtype t, int64_t i, double v)
{
    switch (t) {
    case IR_F32: ((float *)p)[i] = (float)v; break;
    case IR_BF16: case IR_F16: ((unsigned short *)p)[i] = cg_f32_to_half((float)v, t); break;
    case IR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case IR_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: p[i] = (unsigned char)v;
    }
}

static unsigned char *at(cg_host_mem *m, int d, cg_ref r)
{
    return m[d].region[r.region] + r.offset;
}

int cg_host_write(const cg_program *p, cg_host_mem *m, int d, const ir_value *v, const void *data)
{
    const cg_value *x = cg_value_of(p, d, v);
    if (!x)
        return -1;
    unsigned char *dst = at(m, d, x->at);
    if (!ir_is_float(x->dtype)) {
        memcpy(dst, data, (size_t)x->bytes);
        return 0;
    }
    for (int64_t i = 0; i < x->numel; i++)
        put(dst, x->dtype, i, ((const float *)data)[i]);
    return 0;
}

int cg_host_read(const cg_program *p, cg_host_mem *m, int d, const ir_value *v, void *out)
{
    const cg_value *x = cg_value_of(p, d, v);
    if (!x)
        return -1;
    const unsigned char *src = at(m, d, x->at);
    if (!ir_is_float(x->dtype)) {
        memcpy(out, src, (size_t)x->bytes);
        return 0;
    }
    for (int64_t i = 0; i < x->numel; i++)
        ((float *)out)[i] = (float)get(src, x->dtype, i);
    return 0;
}

/* ---------------------------------------------------------------- the libraries */

/* The libraries' reference (fakecuda/ref.h), compiled into this object: the
 * programs that run cg_host are registered by three .cmake files, the
 * stand-ins link their own copy. */
#include "fakecuda/ref.c"

static double io_load(const void *base, int64_t i, int type)
{
    return get(base, (ir_dtype)type, i);
}

static void io_store(void *base, int64_t i, int type, double v)
{
    put(base, (ir_dtype)type, i, v);
}

static const fkref_io io = {io_load, io_store};

/* cublasLtMatmul as cg_gemm describes it: D is C, beta reads it. */
static int ref_gemm(const cg_gemm *g, cg_host_mem *m, int d, char *err, size_t errlen)
{
    fkref_gemm r = {
        .m = g->m, .n = g->n, .k = g->k, .batch = g->batch,
        .trans_a = g->trans_a, .trans_b = g->trans_b,
        .tf32 = g->compute == CG_COMPUTE_32F_FAST_TF32,
        .alpha = g->alpha, .beta = g->beta,
        .a = at(m, d, g->a), .b = at(m, d, g->b), .c = at(m, d, g->d), .d = at(m, d, g->d),
        .bias = g->epilogue == CG_EPI_BIAS || g->epilogue == CG_EPI_RELU_BIAS ? at(m, d, g->bias) : NULL,
        .lda = g->lda, .ldb = g->ldb, .ldc = g->ldc, .ldd = g->ldc,
        .stride_a = g->stride_a, .stride_b = g->stride_b, .stride_c = g->stride_c,
        .stride_d = g->stride_c,
        .type_a = g->type_a, .type_b = g->type_b, .type_c = g->type_d, .type_d = g->type_d,
        .type_bias = g->type_bias,
        .relu = g->epilogue == CG_EPI_RELU || g->epilogue == CG_EPI_RELU_BIAS};
    return fkref_gemm_run(&r, &io) ? fail(err, errlen, "out of memory") : 0;
}

/* Element strides over (n, c, h, w) of a tensor of c channels, h x w pixels,
 * NCHW or channels-last. */
static void strides(int64_t c, int64_t h, int64_t w, int nhwc, int64_t *s)
{
    s[0] = c * h * w;
    s[1] = nhwc ? 1 : h * w;
    s[2] = nhwc ? w * c : w;
    s[3] = nhwc ? c : 1;
}

/* cuDNN's convolutions as cg_conv describes them: NCHW and KCRS, or NHWC and
 * KRSC; the backward ones overwrite their output (beta 0). */
static int ref_conv(const cg_conv *c, cg_host_mem *m, int d, char *err, size_t errlen)
{
    int fwd = c->kind == CG_CONV_FORWARD;
    unsigned char *X = at(m, d, c->x), *W = at(m, d, c->wt), *Y = at(m, d, c->y);
    fkref_conv r = {
        .kind = fwd ? FKREF_FORWARD : c->kind == CG_CONV_BACKWARD_DATA ? FKREF_BACKWARD_DATA
                                                                       : FKREF_BACKWARD_FILTER,
        .n = c->n, .c = c->c, .h = c->h, .w = c->w, .k = c->k, .r = c->r, .s = c->s,
        .p = c->p, .q = c->q, .groups = c->groups,
        .pad = {c->pad[0], c->pad[1]}, .stride = {c->stride[0], c->stride[1]},
        .dilation = {c->dilation[0], c->dilation[1]},
        .krsc = c->nhwc, .type = c->dtype,
        .tf32 = c->math == CG_MATH_TENSOR_OP && c->dtype == IR_F32,
        .x = X, .wt = W, .y = Y,
        .out = fwd ? Y : c->kind == CG_CONV_BACKWARD_DATA ? X : W,
        .alpha = c->alpha, .beta = c->beta,
        .z = fwd && c->has_z ? at(m, d, c->z) : NULL,
        .bias = fwd && c->has_bias ? at(m, d, c->bias) : NULL, .bias_stride = 1,
        .relu = fwd && c->relu};
    strides(c->c, c->h, c->w, c->nhwc, r.xs);
    strides(c->k, c->p, c->q, c->nhwc, r.ys);
    strides(c->k, c->p, c->q, c->nhwc, r.zs);
    return fkref_conv_run(&r, &io) ? fail(err, errlen, "out of memory") : 0;
}

/* ---------------------------------------------------------------- steps */

static int run_kernel(cg_host *h, int prog, const cg_program *p, cg_host_mem *m, int d,
                      const cg_step *s, int index, char *err, size_t errlen)
{
    const cg_launch *l = &s->u.launch;
    void *argv[256], *ptrs[256];
    int64_t ints[256];
    float floats[256];
    if (l->nargs > 256)
        return fail(err, errlen, "too many arguments");
    for (int a = 0; a < l->nargs; a++) {
        const cg_arg *x = &l->args[a];
        if (x->kind == CG_ARG_BUFFER) {
            ptrs[a] = at(m, d, x->buf);
            argv[a] = &ptrs[a];
        } else if (x->kind == CG_ARG_I64) {
            ints[a] = x->i;
            argv[a] = &ints[a];
        } else {
            floats[a] = x->f;
            argv[a] = &floats[a];
        }
    }
    const char *e = h->table[h->base[prog] + l->kernel](l->grid, l->block, argv);
    if (e)
        return fail(err, errlen, "device %d step %d, kernel %s: %s", d, index,
                    p->kernels[l->kernel].name, e);
    return 0;
}

static int run_step(cg_host *h, int prog, const cg_program *p, cg_host_mem *m, int d,
                    const cg_step *s, int index, char *err, size_t errlen)
{
    switch (s->kind) {
    case CG_STEP_KERNEL: return run_kernel(h, prog, p, m, d, s, index, err, errlen);
    case CG_STEP_GEMM: return ref_gemm(&s->u.gemm, m, d, err, errlen);
    case CG_STEP_CONV: return ref_conv(&s->u.conv, m, d, err, errlen);
    case CG_STEP_COPY:
        memmove(at(m, d, s->u.copy.dst), at(m, d, s->u.copy.src), (size_t)s->u.copy.bytes);
        return 0;
    default: return fail(err, errlen, "device %d step %d: a communication step alone", d, index);
    }
}

/* The communication step of every device in its group, all waiting at it. */
static int collective(const cg_program *p, cg_host_mem *m, const cg_step *const *at_step,
                      const cg_comm *c)
{
    int ng = c->ngroup;
    const cg_comm *r[64];
    for (int q = 0; q < ng; q++) {
        const cg_step *s = at_step[c->group[q]];
        r[q] = &s->u.comm;
    }
    size_t es = c->dtype == IR_F16 || c->dtype == IR_BF16 ? 2 : c->dtype == IR_I64 ? 8 : 4;
    if (c->op == IR_OP_ALL_REDUCE) {
        for (int t = 0; t < c->ntensors; t++) {
            int64_t n = c->count[t];
            double *sum = calloc((size_t)n, sizeof *sum);
            for (int q = 0; q < ng; q++) {
                const unsigned char *src = at(m, (int)c->group[q], r[q]->send[t]);
                for (int64_t i = 0; i < n; i++) {
                    double v = get(src, c->dtype, i);
                    sum[i] = c->reduce_max ? (q == 0 || v > sum[i] ? v : sum[i]) : (float)(sum[i] + v);
                }
            }
            for (int q = 0; q < ng; q++)
                for (int64_t i = 0; i < n; i++)
                    put(at(m, (int)c->group[q], r[q]->recv[t]), c->dtype, i, sum[i]);
            free(sum);
        }
    } else if (c->op == IR_OP_BROADCAST) {
        const unsigned char *src = at(m, (int)c->group[c->root], r[c->root]->send[0]);
        size_t bytes = (size_t)c->count[0] * es;
        unsigned char *tmp = malloc(bytes);
        memcpy(tmp, src, bytes);
        for (int q = 0; q < ng; q++)
            memcpy(at(m, (int)c->group[q], r[q]->recv[0]), tmp, bytes);
        free(tmp);
    } else if (c->op == IR_OP_ALL_GATHER) {
        size_t bytes = (size_t)c->count[0] * es;
        unsigned char *tmp = malloc(bytes * (size_t)ng);
        for (int q = 0; q < ng; q++)
            memcpy(tmp + bytes * (size_t)q, at(m, (int)c->group[q], r[q]->send[0]), bytes);
        for (int q = 0; q < ng; q++)
            memcpy(at(m, (int)c->group[q], r[q]->recv[0]), tmp, bytes * (size_t)ng);
        free(tmp);
    } else if (c->op == IR_OP_REDUCE_SCATTER) {
        int64_t n = c->count[0];
        double *sum = calloc((size_t)(n * ng), sizeof *sum);
        for (int q = 0; q < ng; q++)
            for (int64_t i = 0; i < n * ng; i++)
                sum[i] = (float)(sum[i] + get(at(m, (int)c->group[q], r[q]->send[0]), c->dtype, i));
        for (int q = 0; q < ng; q++)
            for (int64_t i = 0; i < n; i++)
                put(at(m, (int)c->group[q], r[q]->recv[0]), c->dtype, i, sum[q * n + i]);
        free(sum);
    }
    (void)p;
    return 0;
}

int cg_host_run(cg_host *h, int prog, const cg_program *p, cg_host_mem *m, int init, char *err,
                size_t errlen)
{
    int nd = p->ndevices, pos[64] = {0};
    if (nd > 64)
        return fail(err, errlen, "too many devices");
    /* send/recv: one mailbox per id */
    typedef struct { int64_t id; unsigned char *data; size_t bytes; } box;
    box boxes[256];
    int nboxes = 0;
    for (;;) {
        int progress = 0, left = 0;
        const cg_step *waiting[64];
        for (int d = 0; d < nd; d++) {
            const cg_device *D = &p->devices[d];
            int n = init ? D->ninit : D->nsteps;
            const cg_step *steps = init ? D->init : D->steps;
            while (pos[d] < n && steps[pos[d]].kind != CG_STEP_COMM) {
                if (run_step(h, prog, p, m, d, &steps[pos[d]], pos[d], err, errlen))
                    return -1;
                pos[d]++;
                progress = 1;
            }
            waiting[d] = pos[d] < n ? &steps[pos[d]] : NULL;
            left += waiting[d] != NULL;
        }
        if (!left)
            return 0;
        for (int d = 0; d < nd; d++) {
            const cg_step *s = waiting[d];
            if (!s)
                continue;
            const cg_comm *c = &s->u.comm;
            if (c->op == IR_OP_SEND) {
                if (nboxes == 256)
                    return fail(err, errlen, "too many messages");
                size_t bytes = (size_t)c->count[0] * (c->dtype == IR_I64 ? 8 : c->dtype == IR_F16 ||
                                                      c->dtype == IR_BF16 ? 2 : 4);
                boxes[nboxes].id = c->id;
                boxes[nboxes].data = malloc(bytes);
                boxes[nboxes].bytes = bytes;
                memcpy(boxes[nboxes++].data, at(m, d, c->send[0]), bytes);
                pos[d]++;
                progress = 1;
                continue;
            }
            if (c->op == IR_OP_RECV) {
                for (int b = 0; b < nboxes; b++)
                    if (boxes[b].id == c->id) {
                        memcpy(at(m, d, c->recv[0]), boxes[b].data, boxes[b].bytes);
                        free(boxes[b].data);
                        boxes[b] = boxes[--nboxes];
                        pos[d]++;
                        progress = 1;
                        break;
                    }
                continue;
            }
            /* a collective: every device of its group at it */
            int ready = 1;
            for (int q = 0; q < c->ngroup && ready; q++) {
                const cg_step *o = waiting[c->group[q]];
                ready = o && o->u.comm.op == c->op && o->u.comm.id == c->id;
            }
            if (!ready)
                continue;
            collective(p, m, waiting, c);
            for (int q = 0; q < c->ngroup; q++) {
                pos[c->group[q]]++;
                waiting[c->group[q]] = NULL;
            }
            progress = 1;
        }
        if (!progress) {
            for (int b = 0; b < nboxes; b++)
                free(boxes[b].data);
            return fail(err, errlen, "the devices wait for each other forever");
        }
    }
}
