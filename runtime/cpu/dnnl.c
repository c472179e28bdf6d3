/* Convolutions on oneDNN (libdnnl, built with GNC_HAVE_DNNL; see kernels.h).
 *
 * Each convolution node gets its primitive the first time it runs, kept on the
 * executor for every later run: creating one costs far more than running it.
 * The executor's values are plain NCHW; oneDNN picks the layouts it computes
 * fastest in (blocked channels with AVX2, plain channels-last NHWC with
 * AVX-512's brgconv), and the operands are reordered into them and the result
 * back out, each run.  In an inference program, a result that only
 * convolutions read stays channels-last where the primitives on both sides
 * compute in plain NHWC: written so straight into its buffer, marked in
 * x->nhwc, and read as it is by the next primitive, or turned back to NCHW
 * (rt_exec_nchw) by any other reader; a residual too (rt_dnnl_conv says when).
 * GNC_DNNL_NHWC=0 in the environment turns that off.  The weights of an
 * inference program are reordered once: at the first run, and again after
 * rt_exec_weights_changed.
 *
 * oneDNN runs on the executor's OpenMP threads (Debian's libdnnl is its OpenMP
 * build, the same libgomp).  A primitive is made for the number of threads it
 * will run on, so one made under another count, or outside a parallel region
 * and now inside one, is made again.
 *
 * The forward pass and the input's gradient split the work by output elements
 * and sum each one on one thread, so their bits do not depend on the number of
 * threads (tests/test_threads.c checks it).
 *
 * A convolution that leads a fused group takes the group's first members as
 * oneDNN post-ops where oneDNN computes them with the same arithmetic as the
 * executor's epilogue (exec.c run_epilogue), so the result is written once:
 * ReLU (eltwise relu), an inference batchnorm (binary mul by its per-channel
 * scale, then binary add of its shift: the epilogue's a * scale + shift, two
 * roundings), the residual add of a same-shaped value (a binary add of the
 * whole residual, reordered into the result's layout like an input; or
 * oneDNN's sum post-op, the residual reordered into the result before the
 * primitive runs: AVX-512's brgconv takes a ReLU after that one only, and
 * jit:avx2 rounds it otherwise than the epilogue), and an add or mul of a
 * scalar (binary).  The members after the first one it cannot express run
 * after it as before (rt_dnnl_conv's *absorbed).  A chain of post-ops is
 * taken only where a trial run at the primitive's making gives the same bits
 * as the primitive without them followed by the epilogue, else a shorter one
 * (take_posts, posts_agree), whichever kernels oneDNN picks on the CPU at
 * hand.  GNC_DNNL_POSTOPS=sum tries residuals as sum post-ops alone: the test
 * that the trial refuses jit:avx2's.
 * One difference: oneDNN's ReLU is max(v, 0), which makes a NaN 0 where the
 * epilogue keeps it NaN.  GNC_DNNL_POSTOPS=0 in the environment runs every
 * epilogue after the primitive, to compare the two in one build.
 *
 * A training program's convolutions of enough channels run here too
 * (train_fits): forward, the input's gradient, and the weight's gradient, the
 * last in chunks of images fixed by the shapes, each on one thread, added in
 * their order (conv_dw), since oneDNN's own threads would split the images by
 * their number.  GNC_DNNL=infer in the environment keeps a training program's
 * convolutions off oneDNN; GNC_DNNL=0 turns oneDNN off.
 *
 * Dense layers' and matmuls' GEMMs (rt_dnnl_gemm) run on oneDNN's matmul
 * where its kernels are AVX-512's brgemm: rt_gemm_rows's tiles of whole rows
 * (oneDNN 2.6's brgemm takes no leading dimension past a row, so neither
 * tiles of columns nor a transposed a: a dense layer's weight gradient stays
 * on OpenBLAS), each by a primitive made for one thread, so the bits do not
 * depend on the number of threads.  b goes into the primitives' own layout
 * once per run, not once per tile: into the workspace, or, for an inference
 * program's dense weights, into a copy of their own kept until the weights
 * change, as a convolution's are.  Their scratchpads lie in the workspace,
 * which the memory report counts.  On the development machine (docs/perf.md,
 * twelfth session) they ran LeNet's layers 1.2x faster than OpenBLAS's
 * SkylakeX kernels and a transformer's at their speed, 1.4x faster than its
 * Haswell kernels.
 *
 * What the heap grows by while a primitive is made, beyond its own copies, is
 * oneDNN's: its generated kernels and the primitive's state, about 1 MiB for
 * one of AVX-512's brgconv convolutions.  The memory report counts it
 * (rt_dnnl_bytes's kernels).  oneDNN's sgemm (rt_gemm1) packs into buffers it
 * allocates and frees at each call, as OpenBLAS does; those are not counted.
 *
 * rt_gemm1, the GEMMs that run on one thread (Winograd's products), goes to
 * oneDNN's sgemm where its kernels are AVX-512's: on the development machine
 * (docs/perf.md, eleventh session) it ran Winograd's 16 products of resnet18's
 * last layer 1.1x faster than OpenBLAS's SkylakeX kernels and 1.7x faster than
 * its Haswell ones, whichever OPENBLAS_CORETYPE says. */
#include "kernels.h"

#include <cblas.h>

#include <stdlib.h>

static void blas_gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                       float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

#ifndef GNC_HAVE_DNNL

int rt_dnnl_enabled(void) { return 0; }

void rt_gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
              int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    blas_gemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *rt_dnnl_isa(void) { return ""; }

const char *rt_dnnl_version(void) { return ""; }

int rt_dnnl_beats_wino(rt_exec *x, const conv_geom *g, int dweight)
{
    (void)x, (void)g, (void)dweight;
    return 0;
}

int rt_dnnl_conv(rt_exec *x, const ir_node *n, const ir_node *const *members, int nmembers,
                 int *absorbed, char *err, size_t errlen)
{
    (void)x, (void)n, (void)members, (void)nmembers, (void)err, (void)errlen;
    *absorbed = 0;
    return 0;
}

int rt_dnnl_gemm(rt_exec *x, const ir_node *n, const rt_gemm_args *g, char *err, size_t errlen)
{
    (void)x, (void)n, (void)g, (void)err, (void)errlen;
    return 0;
}

void rt_dnnl_free(struct rt_dnnl *d) { (void)d; }

void rt_dnnl_bytes(const struct rt_dnnl *d, rt_dnnl_mem *m)
{
    (void)d;
    *m = (rt_dnnl_mem){0};
}

#else

/* glibc's heap figures; not under AddressSanitizer or ThreadSanitizer, whose
   allocators glibc's mallinfo2 knows nothing of (it crashed walking them) */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GNC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GNC_SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(GNC_SANITIZED)
#define GNC_MALLINFO 1
#include <malloc.h>
#endif
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>

#define fail base_fail

/* One operand of a primitive: the executor's plain buffer (user), and where
 * the primitive wants another layout, its own copy (mem) with the reorder
 * between them (into the copy for an input, out of it for the result). */
typedef struct {
    dnnl_memory_t user, mem;
    dnnl_primitive_t reorder;
    int arg;
    size_t bytes;             /* mem's: the weights' own, the others' in the workspace */
    dnnl_memory_t pad;        /* the reorder's scratchpad, if it needs one */
    size_t pad_bytes;
} port;

/* P_RES: the residual that a post-op adds whole: a binary add's operand (an
 * input in the result's layout), or a sum's, copied into the primitive's
 * result before it runs (the port's copy is P_DST's, and no argument) */
enum { P_SRC, P_WEI, P_BIAS, P_DST, P_RES, NPORTS };

/* A fused member run as post-ops (see the top of the file). */
enum { PO_RELU, PO_BN, PO_RES, PO_ADD, PO_MUL };
#define MAX_POST 8

typedef struct {
    int kind;
    const ir_node *m;
    int other;                /* the operand that is not the running value (add, mul) */
    int at;                   /* its first post-op's index in the chain */
} post;

typedef struct {
    dnnl_primitive_t prim;    /* NULL: oneDNN declined; the node runs on OpenBLAS */
    dnnl_memory_t pad;        /* its scratchpad, if it needs one */
    size_t pad_bytes;
    port p[NPORTS];
    int nports;
    int nthr, nested;         /* the threads it was made for */
    int weights_kept;         /* p[P_WEI].mem holds this program's weights */
    int nmembers;             /* the fused members it was asked to take */
    post post[MAX_POST];      /* the members it runs as post-ops, in order */
    int npost;
    int res_sum;              /* the residual (PO_RES) is a sum post-op, not a binary add */
    dnnl_memory_t src1[2 * MAX_POST]; /* the binary post-ops' operands, by post-op */
    float *consts;            /* each batchnorm's scale, then shift, by channel */
    size_t consts_bytes;
    struct dw_prim *dw;       /* a weight gradient's (see conv_dw) */
    int nhwc[NPORTS];         /* the port's copy is plain channels-last: a buffer
                                 that x->nhwc marks so is passed as it is */
} conv_prim;

struct rt_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    /* every primitive's scratchpad is ours (in work): oneDNN's own is shared
       by all primitives, and a primitive may then run only on the thread that
       made it, which an executor driven from several threads cannot promise */
    dnnl_primitive_attr_t attr;
    conv_prim **by_value;     /* by the node's result id */
    struct gemm_prim **gemms; /* a dense layer's or matmul's, by the node's result id */
    int nvalues;
    /* the activations' copies in the primitives' layouts, for the
       convolution running now: one at a time, so shared by all */
    char *work;
    size_t work_bytes;
    int off;                  /* GNC_DNNL=0 in the environment: OpenBLAS throughout, to
                                 compare the two paths in one build */
    int infer_only;           /* GNC_DNNL=infer: a training program's convolutions stay
                                 off oneDNN, to compare the two in one build */
    int trains;               /* the program computes weight gradients */
    int no_post;              /* GNC_DNNL_POSTOPS=0: every epilogue after the primitive */
    int sum_only;             /* GNC_DNNL_POSTOPS=sum: residuals only as sum post-ops */
    long refused;             /* chains a trial refused (rt_exec's dnnl_refused) */
    unsigned char *resident;  /* by value id: a value that only convolutions read (as
                                 their input, or as a fused residual), so worth
                                 writing channels-last (see rt_dnnl_conv) */
    size_t trial_bytes;       /* the largest trial's operands and copies (rt_dnnl_bytes) */
    size_t trial_base;        /* the running trial's operands (posts_agree's buf) */
    size_t kernel_bytes;      /* what the heap grew by while the primitives were made,
                                 and still holds: oneDNN's kernels (rt_dnnl_bytes) */
};

#define OK(call) ((call) == dnnl_success)

static void port_free(port *p)
{
    if (p->reorder)
        dnnl_primitive_destroy(p->reorder);
    if (p->mem)
        dnnl_memory_destroy(p->mem);
    if (p->pad)
        dnnl_memory_destroy(p->pad);
    if (p->user)
        dnnl_memory_destroy(p->user);
    *p = (port){0};
}

/* A weight gradient's primitive for chunks of nb images (see conv_dw), made
 * for one thread, with the reorders of its operands: src (x), diff_dst (dy)
 * and diff_weights (dw), the last out of the primitive's layout. */
enum { DW_SRC, DW_DY, DW_DW, DW_NARGS };

typedef struct {
    int64_t nb;
    dnnl_primitive_t prim, reorder[DW_NARGS];
    dnnl_memory_desc_t user[DW_NARGS], md[DW_NARGS];
    dnnl_memory_desc_t pad_md[DW_NARGS + 1]; /* the primitive's scratchpad, then each reorder's */
    size_t bytes[DW_NARGS];                  /* the copies' (0: none) */
    size_t pad;                              /* the largest scratchpad */
} dw_size;

/* The chunks hold n / chunks images or one more: one primitive for each. */
struct dw_prim {
    dw_size s[2];
    int nsizes;
};

static void dw_free(struct dw_prim *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nsizes; i++) {
        if (w->s[i].prim)
            dnnl_primitive_destroy(w->s[i].prim);
        for (int a = 0; a < DW_NARGS; a++)
            if (w->s[i].reorder[a])
                dnnl_primitive_destroy(w->s[i].reorder[a]);
    }
    free(w);
}

/* A dense layer's or matmul's GEMM on oneDNN's matmul (rt_dnnl_gemm): the
 * arguments it was made for, and its tiles, blocks of bm whole rows, a
 * primitive made for one thread for the whole blocks and one for the last.
 * b is reordered once into the primitives' own layout (which their kernels
 * would otherwise copy it into on every tile), kept from run to run where it
 * is a dense layer's static weights. */
typedef struct gemm_prim {
    rt_gemm_args g;              /* its pointers unused, but whether there is a bias */
    int64_t bm;
    int taken;                   /* 0: oneDNN's matmul is not its brgemm kernels here */
    dnnl_primitive_t prim[2];
    dnnl_memory_desc_t md[2][4]; /* by tile: a, b (the user's), c, the bias */
    dnnl_memory_desc_t pad_md[2];
    size_t pad;                  /* the largest scratchpad: a thread's share of work */
    dnnl_memory_desc_t bmd;      /* b in the primitives' layout */
    size_t bbytes;
    dnnl_primitive_t breorder;   /* the user's b into it; NULL: the same layout */
    dnnl_memory_desc_t bpad_md;  /* the reorder's scratchpad */
    float *kept;                 /* a static b's copy, kept (rt_dnnl_bytes's weights) */
    int weights_kept;            /* kept holds this program's weights */
} gemm_prim;

static void gemm_free(gemm_prim *p)
{
    if (!p)
        return;
    for (int s = 0; s < 2; s++)
        if (p->prim[s])
            dnnl_primitive_destroy(p->prim[s]);
    if (p->breorder)
        dnnl_primitive_destroy(p->breorder);
    free(p->kept);
    free(p);
}

static void prim_free(conv_prim *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nports; i++)
        port_free(&c->p[i]);
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->pad)
        dnnl_memory_destroy(c->pad);
    for (int i = 0; i < 2 * MAX_POST; i++)
        if (c->src1[i])
            dnnl_memory_destroy(c->src1[i]);
    free(c->consts);
    dw_free(c->dw);
    free(c);
}

void rt_dnnl_free(struct rt_dnnl *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->nvalues; i++)
        prim_free(d->by_value[i]);
    free(d->by_value);
    if (d->gemms)
        for (int i = 0; i < d->nvalues; i++)
            gemm_free(d->gemms[i]);
    free(d->gemms);
    free(d->resident);
    free(d->work);
    if (d->attr)
        dnnl_primitive_attr_destroy(d->attr);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}

/* What c holds of its own: the weights' copy is the port's own (port_init's
 * own), the others' lie in the workspace; the post-ops' constants. */
static size_t prim_own_bytes(const conv_prim *c)
{
    return (c->p[P_WEI].mem ? c->p[P_WEI].bytes : 0) + c->consts_bytes;
}

void rt_dnnl_bytes(const struct rt_dnnl *d, rt_dnnl_mem *m)
{
    *m = (rt_dnnl_mem){0};
    if (!d)
        return;
    int64_t *weights = &m->weights;
    for (int i = 0; i < d->nvalues; i++) {
        const conv_prim *c = d->by_value[i];
        if (!c)
            continue;
        *weights += (int64_t)prim_own_bytes(c);
    }
    for (int i = 0; d->gemms && i < d->nvalues; i++)
        *weights += d->gemms[i] && d->gemms[i]->kept ? (int64_t)d->gemms[i]->bbytes : 0;
    m->work = (int64_t)d->work_bytes;
    m->trial = (int64_t)d->trial_bytes;
    m->kernels = (int64_t)d->kernel_bytes;
}

/* The bytes the heap holds now: where oneDNN keeps what it makes with a
 * primitive (its JIT-generated kernels, about 1 MiB for one of AVX-512's
 * brgconv convolutions); 0 where the C library cannot say, or under a
 * sanitizer.  The primitives are made one at a time across the
 * process (the devices' executors run on threads of their own), so that
 * one's growth is not counted as another's too. */
static pthread_mutex_t making = PTHREAD_MUTEX_INITIALIZER; /* held while one is made */

static size_t heap_bytes(void)
{
#ifdef GNC_MALLINFO
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#else
    return 0;
#endif
}

/* What the heap grew by since at (heap_bytes), less own (what the new
 * primitive holds that rt_dnnl_bytes counts already), into d->kernel_bytes. */
static void kernels_made(struct rt_dnnl *d, size_t at, size_t own)
{
    size_t now = heap_bytes();
    d->kernel_bytes += now > at + own ? now - at - own : 0;
}

/* The scratchpad that primitive pd asks for: *mem over none of its own
 * (placed in the workspace at each run), *bytes long; none where 0. */
static int scratch_init(struct rt_dnnl *d, const_dnnl_primitive_desc_t pd, dnnl_memory_t *mem,
                        size_t *bytes)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    return !*bytes || OK(dnnl_memory_create(mem, md, d->eng, DNNL_MEMORY_NONE)) ? 0 : -1;
}

/* Port arg of primitive pd whose plain layout is user_md: the primitive's own
 * layout is queried (q, index: the bias is the weights' second), with a
 * reorder where it differs.  out: the reorder runs from the primitive's copy to
 * the user's buffer.  own: the copy is the port's own (weights kept from run to
 * run), else it lies in the shared workspace. */
static int port_init(struct rt_dnnl *d, port *p, int arg, const dnnl_memory_desc_t *user_md,
                     const_dnnl_primitive_desc_t pd, dnnl_query_t q, int index, int out,
                     int own)
{
    p->arg = arg;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, index);
    if (!md || !OK(dnnl_memory_create(&p->user, user_md, d->eng, DNNL_MEMORY_NONE)))
        return -1;
    if (dnnl_memory_desc_equal(md, user_md))
        return 0;
    dnnl_primitive_desc_t rpd;
    p->bytes = dnnl_memory_desc_get_size(md);
    void *handle = own ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE;
    if (!OK(dnnl_memory_create(&p->mem, md, d->eng, handle)) ||
        !OK(dnnl_reorder_primitive_desc_create(&rpd, out ? md : user_md, d->eng,
                                               out ? user_md : md, d->eng, d->attr)))
        return -1;
    int rc = OK(dnnl_primitive_create(&p->reorder, rpd)) &&
             !scratch_init(d, rpd, &p->pad, &p->pad_bytes) ? 0 : -1;
    dnnl_primitive_desc_destroy(rpd);
    return rc;
}

static int reorder(struct rt_dnnl *d, const port *p, int out)
{
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, out ? p->mem : p->user},
                            {DNNL_ARG_TO, out ? p->user : p->mem},
                            {DNNL_ARG_SCRATCHPAD, p->pad}};
    return OK(dnnl_primitive_execute(p->reorder, d->stream, p->pad ? 3 : 2, a)) ? 0 : -1;
}

/* Reorder r from from (of descriptor fmd) to to (tmd) on d's stream, its
 * scratchpad (pmd, if it needs one) at pad: 0, or -1. */
static int reorder_once(struct rt_dnnl *d, dnnl_primitive_t r, const dnnl_memory_desc_t *fmd,
                        void *from, const dnnl_memory_desc_t *tmd, void *to,
                        const dnnl_memory_desc_t *pmd, void *pad)
{
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, NULL}, {DNNL_ARG_TO, NULL},
                            {DNNL_ARG_SCRATCHPAD, NULL}};
    int na = dnnl_memory_desc_get_size(pmd) ? 3 : 2;
    int ok = OK(dnnl_memory_create(&a[0].memory, fmd, d->eng, from)) &&
             OK(dnnl_memory_create(&a[1].memory, tmd, d->eng, to)) &&
             (na == 2 || OK(dnnl_memory_create(&a[2].memory, pmd, d->eng, pad)));
    ok = ok && OK(dnnl_primitive_execute(r, d->stream, na, a)) && OK(dnnl_stream_wait(d->stream));
    for (int k = 0; k < 3; k++)
        if (a[k].memory)
            dnnl_memory_destroy(a[k].memory);
    return ok ? 0 : -1;
}

int rt_dnnl_enabled(void)
{
    const char *env = getenv("GNC_DNNL");
    return !(env && strcmp(env, "0") == 0);
}

const char *rt_dnnl_isa(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "another";
    }
}

void rt_gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
              int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (rt_dnnl_enabled() && strncmp(rt_dnnl_isa(), "avx512", 6) == 0 &&
        OK(dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc)))
        return;
    blas_gemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *rt_dnnl_version(void)
{
    static char v[32];
    const dnnl_version_t *d = dnnl_version();
    snprintf(v, sizeof v, "%d.%d.%d", d->major, d->minor, d->patch);
    return v;
}

/* Whether n is a member of a fused group that a convolution leads. */
static int in_conv_group(const ir_node *n)
{
    const ir_node *lead = n;
    while (lead->group && lead->prev && lead->prev->group == lead->group)
        lead = lead->prev;
    return n->group && lead != n && lead->op == IR_OP_CONV2D;
}

/* By value id: 1 where every reader of the value is a convolution taking it
 * as its input or an add fused after a convolution (a residual), and it is no
 * output of the program (g's nodes on every device, to be safe). */
static unsigned char *resident_values(const ir_graph *g, int nvalues)
{
    unsigned char *ok = malloc((size_t)nvalues);
    if (!ok)
        return NULL;
    memset(ok, 1, (size_t)nvalues);
    for (const ir_node *n = g->head; n; n = n->next)
        for (int k = 0; k < n->nin; k++)
            if (!(n->op == IR_OP_CONV2D && k == 0) && !(n->op == IR_OP_ADD && in_conv_group(n)))
                ok[n->in[k]->id] = 0;
    for (int i = 0; i < g->noutputs; i++)
        ok[g->outputs[i].value->id] = 0;
    return ok;
}

static struct rt_dnnl *state(rt_exec *x)
{
    if (x->dnnl)
        return x->dnnl;
    struct rt_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->off = !rt_dnnl_enabled();
    const char *env = getenv("GNC_DNNL");
    d->infer_only = env && strcmp(env, "infer") == 0;
    const char *post_env = getenv("GNC_DNNL_POSTOPS");
    d->no_post = post_env && strcmp(post_env, "0") == 0;
    d->sum_only = post_env && strcmp(post_env, "sum") == 0;
    d->trains = x->g->nupdates > 0;
    for (const ir_node *n = x->g->head; n; n = n->next)
        d->trains |= n->op == IR_OP_CONV2D_GRAD_WEIGHT;
    d->nvalues = x->nvalues;
    d->by_value = calloc((size_t)x->nvalues, sizeof *d->by_value);
    const char *nhwc_env = getenv("GNC_DNNL_NHWC");
    if (d->by_value && !d->off && !d->trains && !(nhwc_env && strcmp(nhwc_env, "0") == 0) &&
        (!(d->resident = resident_values(x->g, x->nvalues)) ||
         !(x->nhwc = calloc((size_t)x->nvalues, 1)))) {
        rt_dnnl_free(d);
        return NULL;
    }
    if (!d->by_value || !OK(dnnl_engine_create(&d->eng, dnnl_cpu, 0)) ||
        !OK(dnnl_primitive_attr_create(&d->attr)) ||
        !OK(dnnl_primitive_attr_set_scratchpad_mode(d->attr, dnnl_scratchpad_mode_user)) ||
        !OK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags))) {
        rt_dnnl_free(d);
        return NULL;
    }
    return x->dnnl = d;
}

static size_t align64(size_t b) { return (b + 63) / 64 * 64; }

/* The shared workspace (d->work) at least need bytes long; -1 with err. */
static int work_reserve(struct rt_dnnl *d, const ir_node *n, size_t need, char *err,
                        size_t errlen)
{
    if (need <= d->work_bytes)
        return 0;
    free(d->work);
    d->work = aligned_alloc(64, need);
    d->work_bytes = d->work ? need : 0;
    return d->work ? 0
                   : fail(err, errlen, "%s: out of memory for %zu bytes of oneDNN's copies",
                          ir_ops[n->op].name, need);
}

/* The plain descriptors of a convolution of geometry g: x (or dx) NCHW, w
 * OIHW (GOIHW with groups), y (or dy) NCHW, the bias a vector. */
static void conv_mds(const conv_geom *g, dnnl_memory_desc_t *src, dnnl_memory_desc_t *wei,
                     dnnl_memory_desc_t *bias, dnnl_memory_desc_t *dst, int any)
{
    dnnl_dims_t s = {g->n, g->c, g->h, g->w}, y = {g->n, g->o, g->oh, g->ow}, b = {g->o};
    dnnl_format_tag_t act = any ? dnnl_format_tag_any : dnnl_nchw;
    dnnl_memory_desc_init_by_tag(src, 4, s, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(dst, 4, y, dnnl_f32, act);
    if (g->groups == 1) {
        dnnl_dims_t w = {g->o, g->c, g->kh, g->kw};
        dnnl_memory_desc_init_by_tag(wei, 4, w, dnnl_f32, any ? dnnl_format_tag_any : dnnl_oihw);
    } else {
        dnnl_dims_t w = {g->groups, g->o / g->groups, g->c / g->groups, g->kh, g->kw};
        dnnl_memory_desc_init_by_tag(wei, 5, w, dnnl_f32, any ? dnnl_format_tag_any : dnnl_goihw);
    }
    if (bias)
        dnnl_memory_desc_init_by_tag(bias, 1, b, dnnl_f32, dnnl_x);
}

static int conv_desc(const conv_geom *g, dnnl_convolution_desc_t *cd, dnnl_prop_kind_t prop,
                     int with_bias)
{
    dnnl_memory_desc_t src, wei, bias, dst;
    conv_mds(g, &src, &wei, &bias, &dst, 1);
    dnnl_dims_t st = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw},
                pr = {g->ph, g->pw};
    /* the right padding that gives the output size exactly: negative where
       the IR's output drops input rows that no window reaches (a 1x1
       convolution with stride 2 over an even size) */
    pr[0] = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1 - g->h - g->ph;
    pr[1] = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1 - g->w - g->pw;
    if (prop == dnnl_backward_data)
        return OK(dnnl_dilated_convolution_backward_data_desc_init(
                   cd, dnnl_convolution_direct, &src, &wei, &dst, st, dil, pl, pr)) ? 0 : -1;
    if (prop == dnnl_backward_weights)
        return OK(dnnl_dilated_convolution_backward_weights_desc_init(
                   cd, dnnl_convolution_direct, &src, &wei, NULL, &dst, st, dil, pl, pr)) ? 0 : -1;
    return OK(dnnl_dilated_convolution_forward_desc_init(cd, prop, dnnl_convolution_direct, &src,
                                                         &wei, with_bias ? &bias : NULL, &dst,
                                                         st, dil, pl, pr)) ? 0 : -1;
}

/* The first of members (the fused group after convolution n) that oneDNN
 * can run as post-ops with the epilogue's arithmetic, into p; returns how many.
 * Each takes the previous one's result (the running value) as exec.c's
 * epilogue_operand found it. */
static int plan_posts(const ir_node *n, const ir_node *const *members, int nmembers, post *p)
{
    const ir_value *run = n->out[0];
    int np = 0, at = 0, residuals = 0;
    for (int i = 0; i < nmembers && np < MAX_POST; i++) {
        const ir_node *m = members[i];
        post q = {.m = m, .at = at, .other = -1};
        if (m->nout != 1 || !ir_type_eq(&m->out[0]->type, &run->type) ||
            m->out[0]->type.dtype != IR_F32)
            break;
        if (m->op == IR_OP_RELU && m->in[0] == run) {
            q.kind = PO_RELU;
        } else if (m->op == IR_OP_BATCHNORM && m->in[0] == run && m->nin == 5) {
            q.kind = PO_BN;
        } else if ((m->op == IR_OP_ADD || m->op == IR_OP_MUL) && m->nin == 2 &&
                   (m->in[0] == run) != (m->in[1] == run)) {
            /* commutative: the binary post-ops give the same bits with the
               running value on either side */
            q.other = m->in[0] == run ? 1 : 0;
            const ir_value *o = m->in[q.other];
            if (o->type.dtype != IR_F32)
                break;
            if (o->type.rank == 0)
                q.kind = m->op == IR_OP_ADD ? PO_ADD : PO_MUL;
            else if (m->op == IR_OP_ADD && ir_type_eq(&o->type, &run->type) && !residuals++)
                q.kind = PO_RES; /* one residual per primitive (one P_RES) */
            else
                break;
        } else {
            break;
        }
        at += q.kind == PO_BN ? 2 : 1;
        p[np++] = q;
        run = m->out[0];
    }
    return np;
}

/* d's attributes with post-ops p[0 .. np) over channels, the residual's
 * operand laid out as dst (the primitive's result), or the residual as a sum
 * post-op (res_sum): NULL on failure. */
static dnnl_primitive_attr_t post_attr(struct rt_dnnl *d, const post *p, int np, int64_t channels,
                                       const dnnl_memory_desc_t *dst, int res_sum)
{
    dnnl_post_ops_t po;
    dnnl_primitive_attr_t attr = NULL;
    if (!OK(dnnl_post_ops_create(&po)))
        return NULL;
    dnnl_memory_desc_t per_channel, scalar;
    dnnl_dims_t cd = {1, channels, 1, 1}, sd = {1, 1, 1, 1};
    int ok = OK(dnnl_memory_desc_init_by_tag(&per_channel, 4, cd, dnnl_f32, dnnl_nchw)) &&
             OK(dnnl_memory_desc_init_by_tag(&scalar, 4, sd, dnnl_f32, dnnl_nchw));
    for (int i = 0; i < np && ok; i++) {
        switch (p[i].kind) {
        case PO_RELU:
            ok = OK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
            break;
        case PO_BN: /* a * scale, then + shift */
            ok = OK(dnnl_post_ops_append_binary(po, dnnl_binary_mul, &per_channel)) &&
                 OK(dnnl_post_ops_append_binary(po, dnnl_binary_add, &per_channel));
            break;
        case PO_RES: /* the whole residual: dst += residual, or a binary add of it */
            ok = res_sum ? OK(dnnl_post_ops_append_sum(po, 1.0f))
                         : OK(dnnl_post_ops_append_binary(po, dnnl_binary_add, dst));
            break;
        default:
            ok = OK(dnnl_post_ops_append_binary(
                po, p[i].kind == PO_ADD ? dnnl_binary_add : dnnl_binary_mul, &scalar));
        }
    }
    if (ok && (!OK(dnnl_primitive_attr_clone(&attr, d->attr)) ||
               !OK(dnnl_primitive_attr_set_post_ops(attr, po)))) {
        if (attr)
            dnnl_primitive_attr_destroy(attr);
        attr = NULL;
    }
    dnnl_post_ops_destroy(po);
    return ok ? attr : NULL;
}

/* The implementation oneDNN picked for pd ("jit:avx2", ...). */
static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *s = NULL;
    return OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s)) && s ? s : "";
}

/* The residual's port of forward primitive pd, whose chain has the residual
 * at post-op index at: a binary add's operand, laid out as pd asks, or a
 * sum's, laid out as pd's result (its copy is the result's: res_bind). */
static int res_port_init(struct rt_dnnl *d, port *q, const_dnnl_primitive_desc_t pd, int at,
                         int res_sum, const dnnl_memory_desc_t *plain, int own)
{
    if (res_sum)
        return port_init(d, q, 0, plain, pd, dnnl_query_dst_md, 0, 0, 0);
    int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(at) | DNNL_ARG_SRC_1;
    return port_init(d, q, arg, plain, pd, dnnl_query_exec_arg_md, arg, 0, own);
}

/* A sum's residual port q is copied into the result's copy, dst's. */
static int res_bind(port *q, const port *dst)
{
    void *h = NULL;
    return q->mem && dst->mem && OK(dnnl_memory_get_data_handle(dst->mem, &h)) &&
                   OK(dnnl_memory_set_data_handle(q->mem, h))
               ? 0
               : -1;
}

/* splitmix64: the trial's operands */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n values in [-1, 1), from seed */
static void fill(float *v, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((double)(mix(seed ^ ((uint64_t)i << 8)) >> 11) * 0x1p-52 - 1);
}

/* The operands of a trial run (posts_agree), plain: x NCHW, w OIHW, the bias,
 * the residual (shaped as y), the batchnorms' scales and shifts by channel
 * (2 per batchnorm), the scalars (1 per add or mul), and the result y. */
typedef struct {
    float *x, *w, *bias, *res, *consts, *scalars, *y;
} trial_data;

/* Runs forward primitive pd once, with post-ops p[0 .. np) (those it was made
 * with), on t's operands, into t->y: each operand reordered into the layout pd
 * wants and the result out of it, as rt_dnnl_conv does.  0, or -1. */
static int trial(struct rt_dnnl *d, const_dnnl_primitive_desc_t pd, const post *p, int np,
                 int res_sum, const conv_geom *g, int with_bias, const trial_data *t)
{
    port ports[NPORTS] = {{0}};
    dnnl_memory_desc_t src, wei, bias, dst, per_channel, scalar;
    dnnl_dims_t cd = {1, g->o, 1, 1}, sd = {1, 1, 1, 1};
    conv_mds(g, &src, &wei, &bias, &dst, 0);
    dnnl_memory_desc_init_by_tag(&per_channel, 4, cd, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&scalar, 4, sd, dnnl_f32, dnnl_nchw);
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t pad = NULL, src1[2 * MAX_POST] = {0};
    size_t pad_bytes = 0;
    void *scratch = NULL;
    int ok = !port_init(d, &ports[P_SRC], DNNL_ARG_SRC, &src, pd, dnnl_query_src_md, 0, 0, 1) &&
             !port_init(d, &ports[P_WEI], DNNL_ARG_WEIGHTS, &wei, pd, dnnl_query_weights_md,
                        0, 0, 1) &&
             (!with_bias || !port_init(d, &ports[P_BIAS], DNNL_ARG_BIAS, &bias, pd,
                                       dnnl_query_weights_md, 1, 0, 1)) &&
             !port_init(d, &ports[P_DST], DNNL_ARG_DST, &dst, pd, dnnl_query_dst_md, 0, 1, 1) &&
             OK(dnnl_primitive_create(&prim, pd)) && !scratch_init(d, pd, &pad, &pad_bytes);
    void *user[NPORTS] = {t->x, t->w, t->bias, t->y, t->res};
    dnnl_exec_arg_t args[NPORTS + 1 + 2 * MAX_POST];
    int na = 0;
    const float *consts = t->consts, *scalars = t->scalars;
    for (int i = 0; i < np && ok; i++) {
        int at = p[i].at;
        if (p[i].kind == PO_RES) {
            ok = !res_port_init(d, &ports[P_RES], pd, at, res_sum, &dst, 1);
        } else if (p[i].kind == PO_BN) {
            ok = OK(dnnl_memory_create(&src1[at], &per_channel, d->eng, (void *)consts)) &&
                 OK(dnnl_memory_create(&src1[at + 1], &per_channel, d->eng,
                                       (void *)(consts + g->o)));
            consts += 2 * g->o;
        } else if (p[i].kind != PO_RELU) {
            ok = OK(dnnl_memory_create(&src1[at], &scalar, d->eng, (void *)scalars++));
        }
    }
    size_t most = pad_bytes;
    for (int i = 0; i < NPORTS; i++)
        most = ports[i].pad_bytes > most ? ports[i].pad_bytes : most;
    ok = ok && (!most || (scratch = aligned_alloc(64, (most + 63) / 64 * 64)));
    size_t held = d->trial_base + (most + 63) / 64 * 64; /* the operands, copies, scratch */
    for (int i = 0; i < NPORTS; i++)
        held += ports[i].mem ? ports[i].bytes : 0;
    d->trial_bytes = held > d->trial_bytes ? held : d->trial_bytes;
    if (ok && pad) {
        ok = OK(dnnl_memory_set_data_handle(pad, scratch));
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, pad};
    }
    for (int i = 0; i < NPORTS && ok; i++) {
        port *q = &ports[i];
        if (!q->user)
            continue;
        ok = OK(dnnl_memory_set_data_handle(q->user, user[i])) &&
             (!q->pad || OK(dnnl_memory_set_data_handle(q->pad, scratch))) &&
             (i != P_RES || !res_sum || !res_bind(q, &ports[P_DST])) &&
             (!q->reorder || i == P_DST || !reorder(d, q, 0));
        if (q->arg)
            args[na++] = (dnnl_exec_arg_t){q->arg, q->mem ? q->mem : q->user};
    }
    for (int k = 0; k < 2 * MAX_POST && ok; k++)
        if (src1[k])
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(k) | DNNL_ARG_SRC_1,
                                           src1[k]};
    ok = ok && OK(dnnl_primitive_execute(prim, d->stream, na, args)) &&
         (!ports[P_DST].reorder || !reorder(d, &ports[P_DST], 1)) &&
         OK(dnnl_stream_wait(d->stream));
    for (int i = 0; i < NPORTS; i++)
        port_free(&ports[i]);
    for (int k = 0; k < 2 * MAX_POST; k++)
        if (src1[k])
            dnnl_memory_destroy(src1[k]);
    if (pad)
        dnnl_memory_destroy(pad);
    if (prim)
        dnnl_primitive_destroy(prim);
    free(scratch);
    return ok ? 0 : -1;
}

/* Whether primitive with (post-ops p[0 .. np)) gives the same bits as
 * primitive plain followed by the epilogue: both run once on the same
 * operands (values in [-1, 1), the convolution's shape), and the epilogue's
 * arithmetic is applied to plain's result in C.  This is what makes a chain
 * of post-ops safe to take on whatever implementation oneDNN picks on the CPU
 * at hand: one that sums in another order with the post-ops attached, or
 * applies them with other roundings (a fused multiply-add for the batchnorm,
 * the residual added before the last partial sums), differs in nearly every
 * element, and its chain is refused.  The arithmetic is exec.c
 * run_epilogue's and unary_range's for ReLU: keep the two in step. */
static int posts_agree(struct rt_dnnl *d, const post *p, int np, int res_sum, const conv_geom *g,
                       int with_bias, const_dnnl_primitive_desc_t plain,
                       const_dnnl_primitive_desc_t with)
{
    int64_t nx = g->n * g->c * g->h * g->w, nw = g->o * (g->c / g->groups) * g->kh * g->kw;
    int64_t ny = g->n * g->o * g->oh * g->ow, plane = g->oh * g->ow;
    d->trial_base = (size_t)(nx + nw + g->o + 3 * ny + 2 * MAX_POST * g->o + MAX_POST) *
                    sizeof(float);
    float *buf = malloc(d->trial_base);
    if (!buf)
        return 0;
    trial_data t = {.x = buf};
    t.w = t.x + nx, t.bias = t.w + nw, t.res = t.bias + g->o, t.y = t.res + ny;
    float *y0 = t.y + ny;
    t.consts = y0 + ny, t.scalars = t.consts + 2 * MAX_POST * g->o;
    fill(t.x, t.scalars + MAX_POST - t.x, (uint64_t)ny);
    int agree = 0;
    trial_data t0 = t;
    t0.y = y0;
    if (trial(d, plain, p, 0, 0, g, with_bias, &t0) == 0 &&
        trial(d, with, p, np, res_sum, g, with_bias, &t) == 0) {
        const float *consts = t.consts, *scalars = t.scalars;
        for (int i = 0; i < np; i++) {
            for (int64_t j = 0; j < ny; j++) {
                float v = y0[j];
                switch (p[i].kind) {
                case PO_RELU: v = v > 0 || v != v ? v : 0; break;
                case PO_BN: {
                    int64_t ch = j / plane % g->o;
                    v = v * consts[ch] + consts[g->o + ch];
                    break;
                }
                case PO_RES: v = v + t.res[j]; break;
                case PO_ADD: v = v + *scalars; break;
                default: v = v * *scalars; break;
                }
                y0[j] = v;
            }
            consts += p[i].kind == PO_BN ? 2 * g->o : 0;
            scalars += p[i].kind == PO_ADD || p[i].kind == PO_MUL;
        }
        agree = memcmp(y0, t.y, (size_t)ny * sizeof *y0) == 0;
    }
    free(buf);
    return agree;
}

/* Convolution cd's primitive with post-ops p[0 .. np) (the residual as a sum
 * where sum), where oneDNN makes it in the implementation of base (made
 * without them) with base's layout of the result; NULL otherwise (a chain
 * that makes oneDNN fall back to another implementation, its GEMM-based
 * "gemm:jit" say, could cost more than it saves). */
static dnnl_primitive_desc_t with_posts(struct rt_dnnl *d, const post *p, int np, int sum,
                                        const dnnl_convolution_desc_t *cd,
                                        const_dnnl_primitive_desc_t base, int64_t channels)
{
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(base, dnnl_query_dst_md, 0);
    dnnl_primitive_attr_t attr = dst ? post_attr(d, p, np, channels, dst, sum) : NULL;
    dnnl_primitive_desc_t with = NULL;
    int ok = attr && OK(dnnl_primitive_desc_create(&with, cd, attr, d->eng, NULL));
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    const dnnl_memory_desc_t *out = ok ? dnnl_primitive_desc_query_md(with, dnnl_query_dst_md, 0)
                                       : NULL;
    char impl[128];
    snprintf(impl, sizeof impl, "%s", impl_of(base));
    if (out && dnnl_memory_desc_equal(out, dst) && strcmp(impl_of(with), impl) == 0)
        return with;
    if (with)
        dnnl_primitive_desc_destroy(with);
    return NULL;
}

/* The batch of a trial run (posts_agree): the batch is the outermost loop of
 * oneDNN's convolution kernels, so a few images run the same kernel, and the
 * trial costs little beside the primitive's making. */
#define TRIAL_BATCH 2

/* Replaces *pd (made without post-ops) by convolution cd's primitive with the
 * longest chain of c's planned post-ops whose bits are the epilogue's; c->npost:
 * its length (0: none), c->res_sum: how it adds a residual.
 *
 * Each chain, longest first, is tried where oneDNN makes the primitive with
 * it in the implementation it picks without (with_posts), a residual as a
 * binary add and then as a sum post-op (AVX-512's "brgconv" takes a ReLU after
 * a sum, not after a binary add).  posts_agree runs it against the primitive
 * without post-ops and the epilogue, on the convolution's shape with the batch
 * cut to TRIAL_BATCH (both primitives made again for it, in the same
 * implementations), and it is taken only where every bit agrees: whichever
 * kernels oneDNN picks on the CPU at hand ("jit:avx2", "brgconv:avx512_core",
 * "jit:sse41", ...) are held to that, not trusted by their name;
 * tests/test_dnnl_post.c checks the bits of whole programs.  The reference
 * kernels are too slow to matter and are never given post-ops.  Nor is a
 * primitive that writes the executor's buffer itself (its result in plain
 * NCHW, no copy in its own layout): the group's result may take the buffer of
 * the residual, or of the convolution's own input (y = conv(x) + x, x read
 * last there), in place, and oneDNN reads no operand its result overlaps. */
static void take_posts(struct rt_dnnl *d, conv_prim *c, const dnnl_convolution_desc_t *cd,
                       dnnl_primitive_desc_t *pd, const conv_geom *g, int with_bias,
                       const dnnl_memory_desc_t *plain)
{
    char impl[128];
    snprintf(impl, sizeof impl, "%s", impl_of(*pd));
    const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(*pd, dnnl_query_dst_md, 0);
    int np = q && !dnnl_memory_desc_equal(q, plain) && strncmp(impl, "ref", 3) != 0 ? c->npost
                                                                                    : 0;
    /* the trial's primitive without post-ops: *pd where the batch is small */
    conv_geom gt = *g;
    gt.n = g->n < TRIAL_BATCH ? g->n : TRIAL_BATCH;
    dnnl_convolution_desc_t cdt = *cd;
    dnnl_primitive_desc_t base = NULL;
    if (np && gt.n < g->n &&
        (conv_desc(&gt, &cdt, dnnl_forward_inference, with_bias) ||
         !OK(dnnl_primitive_desc_create(&base, &cdt, d->attr, d->eng, NULL)) ||
         strcmp(impl_of(base), impl) != 0))
        np = 0;
    for (c->npost = 0; np > 0 && !c->npost; np--) {
        int res = 0;
        for (int i = 0; i < np; i++)
            res |= c->post[i].kind == PO_RES;
        for (int sum = d->sum_only ? res : 0; sum <= res && !c->npost; sum++) {
            dnnl_primitive_desc_t with = with_posts(d, c->post, np, sum, cd, *pd, g->o);
            dnnl_primitive_desc_t trial_with =
                with && base ? with_posts(d, c->post, np, sum, &cdt, base, g->o) : with;
            int agree = trial_with && posts_agree(d, c->post, np, sum, &gt, with_bias,
                                                  base ? base : *pd, trial_with);
            d->refused += trial_with && !agree;
            if (trial_with && trial_with != with)
                dnnl_primitive_desc_destroy(trial_with);
            if (agree) {
                dnnl_primitive_desc_destroy(*pd);
                *pd = with;
                c->npost = np, c->res_sum = sum;
            } else if (with) {
                dnnl_primitive_desc_destroy(with);
            }
        }
    }
    if (base)
        dnnl_primitive_desc_destroy(base);
}

/* The binary post-ops' operands of c's chain (over no data of their own, set
 * at each run) and the batchnorms' constants; -1 on failure. */
static int post_operands(struct rt_dnnl *d, conv_prim *c, int64_t channels)
{
    dnnl_memory_desc_t per_channel, scalar;
    dnnl_dims_t cd = {1, channels, 1, 1}, sd = {1, 1, 1, 1};
    dnnl_memory_desc_init_by_tag(&per_channel, 4, cd, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&scalar, 4, sd, dnnl_f32, dnnl_nchw);
    int nbn = 0;
    for (int i = 0; i < c->npost; i++) {
        const post *p = &c->post[i];
        if (p->kind == PO_BN) {
            nbn++;
            if (!OK(dnnl_memory_create(&c->src1[p->at], &per_channel, d->eng,
                                       DNNL_MEMORY_NONE)) ||
                !OK(dnnl_memory_create(&c->src1[p->at + 1], &per_channel, d->eng,
                                       DNNL_MEMORY_NONE)))
                return -1;
        } else if ((p->kind == PO_ADD || p->kind == PO_MUL) &&
                   !OK(dnnl_memory_create(&c->src1[p->at], &scalar, d->eng, DNNL_MEMORY_NONE))) {
            return -1;
        }
    }
    c->consts_bytes = (size_t)(2 * nbn * channels) * sizeof *c->consts;
    if (nbn && !(c->consts = malloc(c->consts_bytes)))
        return -1;
    return 0;
}

/* Whether memory m (NULL: none) is laid out plain channels-last over dims. */
static int plain_nhwc(const_dnnl_memory_t m, const dnnl_dims_t dims)
{
    const dnnl_memory_desc_t *md = NULL;
    dnnl_memory_desc_t want;
    return m && OK(dnnl_memory_get_memory_desc(m, &md)) &&
           OK(dnnl_memory_desc_init_by_tag(&want, 4, dims, dnnl_f32, dnnl_nhwc)) &&
           dnnl_memory_desc_equal(md, &want);
}

/* Makes node n's primitive (forward, or the input's gradient): NULL prim
 * where oneDNN declines the shape.  A forward one takes as many of members
 * (the rest of its fused group) as post-ops as it can (c->npost). */
static conv_prim *conv_make(struct rt_dnnl *d, const ir_node *n, const conv_geom *g,
                            const ir_node *const *members, int nmembers)
{
    conv_prim *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nthr = omp_get_max_threads();
    c->nested = omp_in_parallel();
    c->nmembers = nmembers;
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT, with_bias = !bwd && n->nin == 3;
    dnnl_convolution_desc_t cd, fd;
    dnnl_primitive_desc_t pd = NULL, hint = NULL;
    if (conv_desc(g, &cd, bwd ? dnnl_backward_data : dnnl_forward_inference, with_bias))
        return c;
    if (bwd) { /* the backward primitive is chosen to match a forward one */
        if (conv_desc(g, &fd, dnnl_forward_training, 0) ||
            !OK(dnnl_primitive_desc_create(&hint, &fd, NULL, d->eng, NULL)))
            return c;
    }
    int ok = OK(dnnl_primitive_desc_create(&pd, &cd, d->attr, d->eng, hint));
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    if (!ok)
        return c;
    dnnl_memory_desc_t src, wei, bias, dst;
    conv_mds(g, &src, &wei, &bias, &dst, 0);
    if (!bwd && !d->no_post) {
        c->npost = plan_posts(n, members, nmembers, c->post);
        take_posts(d, c, &cd, &pd, g, with_bias, &dst);
    }
    c->nports = NPORTS;
    if (bwd) { /* dy in, w in, dx out */
        ok = !port_init(d, &c->p[P_SRC], DNNL_ARG_DIFF_DST, &dst, pd, dnnl_query_diff_dst_md,
                        0, 0, 0) &&
             !port_init(d, &c->p[P_WEI], DNNL_ARG_WEIGHTS, &wei, pd, dnnl_query_weights_md,
                        0, 0, 1) &&
             !port_init(d, &c->p[P_DST], DNNL_ARG_DIFF_SRC, &src, pd, dnnl_query_diff_src_md,
                        0, 1, 0);
    } else {
        ok = !port_init(d, &c->p[P_SRC], DNNL_ARG_SRC, &src, pd, dnnl_query_src_md, 0, 0, 0) &&
             !port_init(d, &c->p[P_WEI], DNNL_ARG_WEIGHTS, &wei, pd, dnnl_query_weights_md,
                        0, 0, 1) &&
             (!with_bias || !port_init(d, &c->p[P_BIAS], DNNL_ARG_BIAS, &bias, pd,
                                       dnnl_query_weights_md, 1, 0, 0)) &&
             !port_init(d, &c->p[P_DST], DNNL_ARG_DST, &dst, pd, dnnl_query_dst_md, 0, 1, 0);
        for (int i = 0; i < c->npost && ok; i++)
            if (c->post[i].kind == PO_RES) /* the residual, in the result's layout */
                ok = !res_port_init(d, &c->p[P_RES], pd, c->post[i].at, c->res_sum, &dst, 0);
        ok = ok && !post_operands(d, c, g->o);
        dnnl_dims_t xs = {g->n, g->c, g->h, g->w}, ys = {g->n, g->o, g->oh, g->ow};
        c->nhwc[P_SRC] = ok && plain_nhwc(c->p[P_SRC].mem, xs);
        c->nhwc[P_DST] = ok && plain_nhwc(c->p[P_DST].mem, ys);
        c->nhwc[P_RES] = ok && plain_nhwc(c->p[P_RES].mem, ys);
    }
    if (ok)
        ok = OK(dnnl_primitive_create(&c->prim, pd)) &&
             !scratch_init(d, pd, &c->pad, &c->pad_bytes);
    dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        for (int i = 0; i < c->nports; i++)
            port_free(&c->p[i]);
        c->nports = 0;
        if (c->prim)
            dnnl_primitive_destroy(c->prim);
        c->prim = NULL;
        c->npost = 0;
    }
    return c;
}

/* The batchnorm post-op p's scale and shift into s[0 .. c) and s[c .. 2c),
 * with exec.c run_epilogue's arithmetic. */
static void bn_consts(rt_exec *x, const post *p, int64_t c, float *s)
{
    const ir_node *n = p->m;
    const float *w = IN(1), *b = IN(2), *mean = IN(3), *var = IN(4);
    double eps = ir_attr_float(n, "eps");
    for (int64_t ch = 0; ch < c; ch++) {
        float scale = (float)(w[ch] / sqrt((double)var[ch] + eps));
        s[ch] = scale;
        s[c + ch] = b[ch] - mean[ch] * scale;
    }
}

/* Whether a training program's convolution of geometry g (a weight gradient
 * where dweight) runs on oneDNN: where its groups have TRAIN_MIN_CHANNELS in
 * and out channels or more, and for a weight gradient an output plane of
 * DW_MIN_PLANE positions or more.  The few-channel ones (LeNet's, the stem's
 * single input channel) stay on direct.c's loops and OpenBLAS, faster there
 * and with the bits that tests/train/lenet_accuracy.sh's seed was pinned
 * with.  oneDNN's weight gradient (jit:avx512_core in oneDNN 2.6) runs at
 * about half its speed on small planes, a chunk of images at a time:
 * resnet18's at 4x4 took 1.2-1.4x OpenBLAS's time, at 7x7 the same, at 14x14
 * and 28x28 0.45-0.67x (docs/perf.md, 2026-12-03, tenth session). */
#define TRAIN_MIN_CHANNELS 16
#define DW_MIN_PLANE 100
static int train_fits(const conv_geom *g, int dweight)
{
    return g->c / g->groups >= TRAIN_MIN_CHANNELS && g->o / g->groups >= TRAIN_MIN_CHANNELS &&
           (!dweight || g->oh * g->ow >= DW_MIN_PLANE);
}

int rt_dnnl_beats_wino(rt_exec *x, const conv_geom *g, int dweight)
{
    struct rt_dnnl *d = state(x);
    if (!d || d->off || (d->trains && d->infer_only) || strncmp(rt_dnnl_isa(), "avx512", 6) != 0)
        return 0;
    if (dweight) /* where oneDNN does not take it, OpenBLAS would */
        return train_fits(g, 1);
    return d->trains || g->oh * g->ow > WINO_MAX_PLANE_AVX512;
}

/* The weight gradient's primitive of geometry g over chunks of s->nb images,
 * made for one thread (see conv_dw), into s: 0, or -1 where oneDNN declines
 * it or offers only its reference kernels. */
static int dw_make(struct rt_dnnl *d, const conv_geom *g0, dw_size *s)
{
    conv_geom g = *g0;
    g.n = s->nb;
    dnnl_convolution_desc_t fd, bd;
    dnnl_memory_desc_t src, wei, dst;
    conv_mds(&g, &src, &wei, NULL, &dst, 0);
    s->user[DW_SRC] = src, s->user[DW_DY] = dst, s->user[DW_DW] = wei;
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    int ok = !conv_desc(&g, &fd, dnnl_forward_training, 0) &&
             !conv_desc(&g, &bd, dnnl_backward_weights, 0) &&
             OK(dnnl_primitive_desc_create(&hint, &fd, NULL, d->eng, NULL)) &&
             OK(dnnl_primitive_desc_create(&pd, &bd, d->attr, d->eng, hint)) &&
             strncmp(impl_of(pd), "ref", 3) != 0;
    const dnnl_query_t q[DW_NARGS] = {dnnl_query_src_md, dnnl_query_diff_dst_md,
                                      dnnl_query_diff_weights_md};
    for (int a = 0; a < DW_NARGS && ok; a++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q[a], 0);
        ok = md != NULL;
        if (!ok || dnnl_memory_desc_equal(md, &s->user[a]))
            continue;
        s->md[a] = *md;
        s->bytes[a] = dnnl_memory_desc_get_size(md);
        dnnl_primitive_desc_t rpd = NULL;
        int out = a == DW_DW; /* the gradient comes out of the primitive's layout */
        ok = OK(dnnl_reorder_primitive_desc_create(&rpd, out ? md : &s->user[a], d->eng,
                                                   out ? &s->user[a] : md, d->eng, d->attr)) &&
             OK(dnnl_primitive_create(&s->reorder[a], rpd));
        const dnnl_memory_desc_t *pad =
            ok ? dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0) : NULL;
        if (pad)
            s->pad_md[a + 1] = *pad;
        if (rpd)
            dnnl_primitive_desc_destroy(rpd);
    }
    const dnnl_memory_desc_t *pad = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)
                                       : NULL;
    if (pad)
        s->pad_md[0] = *pad;
    ok = ok && OK(dnnl_primitive_create(&s->prim, pd));
    omp_set_num_threads(saved);
    for (int k = 0; k <= DW_NARGS; k++) {
        size_t b = dnnl_memory_desc_get_size(&s->pad_md[k]);
        s->pad = b > s->pad ? b : s->pad;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return ok ? 0 : -1;
}

/* The primitives of a weight gradient of geometry g over its chunks
 * (rt_conv_dw_chunks for wsize floats of weights): NULL where oneDNN declines. */
static struct dw_prim *dw_prims(struct rt_dnnl *d, const conv_geom *g, int64_t wsize)
{
    int64_t chunks = rt_conv_dw_chunks(g->n, wsize), lo = g->n / chunks;
    struct dw_prim *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->s[w->nsizes++].nb = lo;
    if (g->n % chunks)
        w->s[w->nsizes++].nb = lo + 1;
    int ok = 1;
    for (int i = 0; i < w->nsizes && ok; i++)
        ok = !dw_make(d, g, &w->s[i]);
    /* the chunks' gradients are summed in the primitives' layout: one for all */
    if (!ok || (w->nsizes == 2 && !dnnl_memory_desc_equal(&w->s[0].md[DW_DW],
                                                          &w->s[1].md[DW_DW]))) {
        dw_free(w);
        return NULL;
    }
    return w;
}


/* A thread's workspace for size s: the inputs' copies, then one scratchpad. */
static size_t dw_bytes(const dw_size *s)
{
    return align64(s->bytes[DW_SRC]) + align64(s->bytes[DW_DY]) + align64(s->pad);
}

/* One chunk on this thread: x's and dy's images into s's layouts in work,
 * the primitive, its gradient into dw in the primitive's layout. */
static int dw_run(struct rt_dnnl *d, dnnl_stream_t st, const dw_size *s, const float *x,
                  const float *dy, float *dw, char *work)
{
    void *user[DW_NARGS] = {(void *)x, (void *)dy, dw};
    dnnl_memory_t um[DW_NARGS] = {0}, cm[DW_NARGS] = {0}, pads[DW_NARGS] = {0};
    int ok = 1;
    size_t at = 0;
    for (int a = 0; a < DW_NARGS && ok; a++) {
        if (a == DW_DW && s->reorder[a]) {
            ok = OK(dnnl_memory_create(&cm[a], &s->md[a], d->eng, dw));
            continue;
        }
        ok = OK(dnnl_memory_create(&um[a], &s->user[a], d->eng, user[a]));
        if (ok && s->reorder[a]) {
            ok = OK(dnnl_memory_create(&cm[a], &s->md[a], d->eng, work + at));
            at += align64(s->bytes[a]);
        }
    }
    for (int k = 0; k < DW_NARGS && ok; k++) /* (the last, DW_DW's reorder's: conv_dw's) */
        if (dnnl_memory_desc_get_size(&s->pad_md[k]))
            ok = OK(dnnl_memory_create(&pads[k], &s->pad_md[k], d->eng, work + at));
    for (int a = 0; a < DW_NARGS && ok; a++) {
        if (!s->reorder[a] || a == DW_DW)
            continue;
        dnnl_exec_arg_t r[3] = {{DNNL_ARG_FROM, um[a]}, {DNNL_ARG_TO, cm[a]},
                                {DNNL_ARG_SCRATCHPAD, pads[a + 1]}};
        ok = OK(dnnl_primitive_execute(s->reorder[a], st, pads[a + 1] ? 3 : 2, r));
    }
    dnnl_memory_t m[DW_NARGS];
    for (int a = 0; a < DW_NARGS; a++)
        m[a] = cm[a] ? cm[a] : um[a];
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[DW_SRC]}, {DNNL_ARG_DIFF_DST, m[DW_DY]},
                               {DNNL_ARG_DIFF_WEIGHTS, m[DW_DW]}, {DNNL_ARG_SCRATCHPAD, pads[0]}};
    ok = ok && OK(dnnl_primitive_execute(s->prim, st, pads[0] ? 4 : 3, args)) &&
         OK(dnnl_stream_wait(st));
    for (int a = 0; a < DW_NARGS; a++) {
        if (um[a])
            dnnl_memory_destroy(um[a]);
        if (cm[a])
            dnnl_memory_destroy(cm[a]);
    }
    for (int k = 0; k < DW_NARGS; k++)
        if (pads[k])
            dnnl_memory_destroy(pads[k]);
    return ok ? 0 : -1;
}

/* Weight gradient n of geometry g with w's primitives, as grad.c's
 * conv2d_grad_per_image sums it: the images in rt_conv_dw_chunks chunks, a
 * number fixed by the shapes, each chunk's gradient by a primitive made for
 * one thread (oneDNN's own threads would split the images by their number),
 * the chunks across the threads, then added in their order, element by
 * element, in the primitives' layout (where it is not the plain one, one
 * reorder out of it after the sum, not one per chunk).  The same bits on any
 * number of threads. */
static int conv_dw(rt_exec *x, struct rt_dnnl *d, const struct dw_prim *w, const ir_node *n,
                   const conv_geom *g, char *err, size_t errlen)
{
    const float *dy = IN(0), *in = IN(1);
    float *out = OUT;
    const dw_size *s0 = &w->s[0];
    int blocked = s0->reorder[DW_DW] != NULL;
    int64_t wsize = NUMEL(n->out[0]), chunks = rt_conv_dw_chunks(g->n, wsize);
    int64_t psize = blocked ? (int64_t)(s0->bytes[DW_DW] / sizeof(float)) : wsize;
    int64_t img = g->c * g->h * g->w, dimg = g->o * g->oh * g->ow;
    size_t per = 0;
    for (int i = 0; i < w->nsizes; i++)
        per = dw_bytes(&w->s[i]) > per ? dw_bytes(&w->s[i]) : per;
    if (work_reserve(d, n, (size_t)omp_get_max_threads() * per, err, errlen))
        return -1;
    /* the chunks' gradients: in plain layout the first into out, the others
       into part; in the primitives' layout all into part */
    int64_t nparts = blocked ? chunks : chunks - 1;
    float *part = nparts ? rt_scratch(x, (size_t)(nparts * psize)) : NULL;
    if (nparts && !part)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    int failed = 0;
#pragma omp parallel
    {
        char *work = d->work + (size_t)omp_get_thread_num() * per;
        dnnl_stream_t st = NULL;
        int ok = OK(dnnl_stream_create(&st, d->eng, dnnl_stream_default_flags));
#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < chunks; ch++) {
            int64_t b0 = ch * g->n / chunks, b1 = (ch + 1) * g->n / chunks;
            const dw_size *s = &w->s[b1 - b0 == s0->nb ? 0 : 1];
            float *dw = blocked ? part + ch * psize : ch ? part + (ch - 1) * psize : out;
            ok = ok && !dw_run(d, st, s, in + b0 * img, dy + b0 * dimg, dw, work);
        }
        if (st)
            dnnl_stream_destroy(st);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
    }
    if (failed)
        return fail(err, errlen, "%s: oneDNN's convolution failed", ir_ops[n->op].name);
    if (blocked)
        rt_conv_dw_add_chunks(part, part + psize, chunks, psize);
    else
        rt_conv_dw_add_chunks(out, part, chunks, wsize);
    if (blocked) { /* the sum out of the primitives' layout, its scratchpad in work */
        if (reorder_once(d, s0->reorder[DW_DW], &s0->md[DW_DW], part, &s0->user[DW_DW], out,
                         &s0->pad_md[DW_NARGS], d->work))
            return fail(err, errlen, "%s: oneDNN's reorder failed", ir_ops[n->op].name);
    }
    x->dnnl_convs++;
    return 1;
}

int rt_dnnl_conv(rt_exec *x, const ir_node *n, const ir_node *const *members, int nmembers,
                 int *absorbed, char *err, size_t errlen)
{
    *absorbed = 0;
    struct rt_dnnl *d = state(x);
    if (!d)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT, dweight = n->op == IR_OP_CONV2D_GRAD_WEIGHT;
    conv_geom g = bwd ? rt_conv_geometry(n, &n->out[0]->type, &n->in[1]->type, &n->in[0]->type)
                  : dweight
                      ? rt_conv_geometry(n, &n->in[1]->type, &n->out[0]->type, &n->in[0]->type)
                      : rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type, &n->out[0]->type);
    if (d->off || (d->trains && (d->infer_only || !train_fits(&g, dweight))))
        return 0;
    int id = n->out[0]->id;
    conv_prim *c = d->by_value[id];
    if (c && (c->nthr != omp_get_max_threads() || c->nested != omp_in_parallel() ||
              c->nmembers != nmembers)) {
        prim_free(c); /* made for another number of threads (or other members) */
        c = d->by_value[id] = NULL;
    }
    if (!c) {
        pthread_mutex_lock(&making);
        size_t heap = heap_bytes();
        if (dweight && (c = calloc(1, sizeof *c))) {
            c->nthr = omp_get_max_threads(), c->nested = omp_in_parallel();
            c->dw = dw_prims(d, &g, NUMEL(n->out[0]));
        } else if (!dweight) {
            c = conv_make(d, n, &g, members, nmembers);
        }
        kernels_made(d, heap, c ? prim_own_bytes(c) : 0);
        pthread_mutex_unlock(&making);
        if (!(d->by_value[id] = c))
            return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    }
    if (dweight)
        return c->dw ? conv_dw(x, d, c->dw, n, &g, err, errlen) : 0;
    if (!c->prim)
        return 0;
    /* the result: the last post-op member's, where the primitive runs some */
    const ir_value *result = c->npost ? c->post[c->npost - 1].m->out[0] : n->out[0];
    const post *res = NULL;
    for (int i = 0; i < c->npost; i++)
        res = c->post[i].kind == PO_RES ? &c->post[i] : res;
    const float *residual = res ? x->buf[res->m->in[res->other]->id] : NULL;
    /* the executor's buffers: inputs 0 (x or dy), 1 (w), 2 (bias) and the result */
    void *ptr[NPORTS] = {x->buf[n->in[0]->id], x->buf[n->in[1]->id],
                         !bwd && n->nin == 3 ? x->buf[n->in[2]->id] : NULL,
                         x->buf[result->id], (void *)residual};
    int res_sum = c->res_sum && c->p[P_RES].mem; /* its copy is P_DST's */
    /* Channels-last values (inference programs: x->nhwc).  An input that a
       convolution before wrote channels-last is passed as it is where this
       primitive computes in plain NHWC (its input, or a residual), else turned
       back to NCHW first.  The result is written so, straight into its buffer,
       where only convolutions read it (d->resident), oneDNN runs the whole
       group, and the buffer is not an operand that the primitive reads as it
       is (its input, a binary residual) or a plain residual that would have
       to turn in place. */
    const ir_value *res_v = res ? res->m->in[res->other] : NULL;
    int src_in = 0, res_in = 0, dst_in = 0;
    if (x->nhwc && !bwd) {
        src_in = x->nhwc[n->in[0]->id] && c->nhwc[P_SRC];
        res_in = res_v && x->nhwc[res_v->id] && c->nhwc[res_sum ? P_DST : P_RES];
        if ((!src_in && rt_exec_nchw(x, n->in[0])) ||
            (res_v && !res_in && rt_exec_nchw(x, res_v)))
            return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
        dst_in = d->resident && d->resident[result->id] && !x->weight[result->id] &&
                 c->nhwc[P_DST] && c->npost == nmembers &&
                 !(src_in && ptr[P_DST] == ptr[P_SRC]) &&
                 !(res_v && (res_sum ? !res_in : res_in) && ptr[P_DST] == ptr[P_RES]);
    }
    /* the workspace: the activations' copies, then one scratchpad for the
       primitive and its reorders, which run one after another */
    size_t need = 0, pad = c->pad_bytes;
    for (int i = 0; i < NPORTS; i++) {
        need += i != P_WEI && !(i == P_RES && res_sum) && c->p[i].mem
                    ? align64(c->p[i].bytes)
                    : 0;
        pad = c->p[i].pad_bytes > pad ? c->p[i].pad_bytes : pad;
    }
    size_t pad_at = need;
    need += align64(pad); /* aligned_alloc's size: a multiple of 64 */
    if (work_reserve(d, n, need, err, errlen))
        return -1;
    dnnl_exec_arg_t args[NPORTS + 1 + 2 * MAX_POST];
    int na = 0;
    size_t at = 0;
    if (c->pad) {
        if (!OK(dnnl_memory_set_data_handle(c->pad, d->work + pad_at)))
            return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->pad};
    }
    for (int i = 0; i < NPORTS; i++) {
        port *p = &c->p[i];
        if (!p->user)
            continue;
        int ok = OK(dnnl_memory_set_data_handle(p->user, ptr[i]));
        if (i == P_RES && res_sum) {
            ok &= !res_bind(p, &c->p[P_DST]);
        } else if (p->mem && i != P_WEI) {
            int as_is = (i == P_SRC && src_in) || (i == P_DST && dst_in) ||
                        (i == P_RES && res_in);
            ok &= OK(dnnl_memory_set_data_handle(p->mem, as_is ? ptr[i] : d->work + at));
            at += align64(p->bytes);
        }
        if (p->pad)
            ok &= OK(dnnl_memory_set_data_handle(p->pad, d->work + pad_at));
        if (!ok)
            return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
        if (p->arg)
            args[na++] = (dnnl_exec_arg_t){p->arg, p->mem ? p->mem : p->user};
    }
    /* the binary post-ops' operands: the batchnorms' constants, the scalars */
    float *consts = c->consts;
    int64_t channels = result->type.dims[1];
    for (int i = 0; i < c->npost; i++) {
        const post *p = &c->post[i];
        int ok = 1;
        if (p->kind == PO_BN) {
            bn_consts(x, p, channels, consts);
            ok = OK(dnnl_memory_set_data_handle(c->src1[p->at], consts)) &&
                 OK(dnnl_memory_set_data_handle(c->src1[p->at + 1], consts + channels));
            consts += 2 * channels;
        } else if (p->kind == PO_ADD || p->kind == PO_MUL) {
            ok = OK(dnnl_memory_set_data_handle(c->src1[p->at], x->buf[p->m->in[p->other]->id]));
        }
        if (!ok)
            return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
        int nsrc1 = p->kind == PO_BN ? 2 : p->kind == PO_ADD || p->kind == PO_MUL ? 1 : 0;
        for (int k = p->at; k < p->at + nsrc1; k++) /* (the residual is P_RES's) */
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(k) | DNNL_ARG_SRC_1,
                                           c->src1[k]};
    }
    /* the operands into the primitive's layouts; weights that have not changed
       since they were last reordered stay */
    int keep = rt_weight_static(x, n->in[1]);
    for (int i = 0; i < NPORTS; i++) {
        port *p = &c->p[i];
        if (!p->reorder || i == P_DST)
            continue;
        if (i == P_WEI && keep && x->weights_ready && c->weights_kept)
            continue;
        if ((i == P_SRC && src_in) || (i == P_RES && !res_sum && res_in))
            continue;
        if (i == P_RES && res_in) { /* a sum's residual, channels-last: copied as it is */
            void *h = NULL;
            if (!OK(dnnl_memory_get_data_handle(c->p[P_DST].mem, &h)))
                return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
            if (h != ptr[P_RES])
                memcpy(h, ptr[P_RES], c->p[P_DST].bytes);
            continue;
        }
        if (reorder(d, p, 0))
            return fail(err, errlen, "%s: oneDNN's reorder failed", ir_ops[n->op].name);
    }
    c->weights_kept = keep;
    if (!OK(dnnl_primitive_execute(c->prim, d->stream, na, args)) ||
        (c->p[P_DST].reorder && !dst_in && reorder(d, &c->p[P_DST], 1)) ||
        !OK(dnnl_stream_wait(d->stream)))
        return fail(err, errlen, "%s: oneDNN's convolution failed", ir_ops[n->op].name);
    if (x->nhwc && !bwd)
        x->nhwc[result->id] = (unsigned char)dst_in;
    x->dnnl_nhwc += dst_in;
    x->dnnl_convs++;
    x->dnnl_posts += c->npost;
    x->dnnl_refused = d->refused;
    *absorbed = c->npost;
    return 1;
}

/* The descriptors of an mi-row tile of g's operands a, b and c, and of the
 * bias (a row). */
static void gemm_tile_mds(const rt_gemm_args *g, int64_t mi, dnnl_memory_desc_t *md)
{
    dnnl_dims_t ad = {mi, g->k}, bd = {g->k, g->n}, cd = {mi, g->n}, biasd = {1, g->n};
    dnnl_dims_t bs = {g->tb ? 1 : g->n, g->tb ? g->k : 1};
    dnnl_memory_desc_init_by_tag(&md[0], 2, ad, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_strides(&md[1], 2, bd, dnnl_f32, bs);
    dnnl_memory_desc_init_by_tag(&md[2], 2, cd, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&md[3], 2, biasd, dnnl_f32, dnnl_ab);
}

/* g's primitives, made for one thread on this one (the caller's region of
 * one): not taken where oneDNN's matmul would not run its brgemm kernels
 * (gemm:jit packs into buffers of its own, as its sgemm does).  The bias is
 * added to the finished product, one rounding, as rt_gemm's beta of 1 adds
 * the product to it. */
static void gemm_prims(struct rt_dnnl *d, gemm_prim *p)
{
    const rt_gemm_args *g = &p->g;
    int64_t rows[2] = {p->bm, g->m - (g->m - 1) / p->bm * p->bm};
    int ok = 1;
    for (int s = 0; s < 2 && ok; s++) {
        gemm_tile_mds(g, rows[s], p->md[s]);
        dnnl_memory_desc_t any;
        dnnl_memory_desc_init_by_tag(&any, 2, p->md[s][1].dims, dnnl_f32, dnnl_format_tag_any);
        dnnl_matmul_desc_t md;
        dnnl_primitive_desc_t pd = NULL;
        const char *impl = "";
        ok = OK(dnnl_matmul_desc_init(&md, &p->md[s][0], &any, g->bias ? &p->md[s][3] : NULL,
                                      &p->md[s][2])) &&
             OK(dnnl_primitive_desc_create(&pd, &md, d->attr, d->eng, NULL)) &&
             OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl)) &&
             strncmp(impl, "brg", 3) == 0;
        if (ok) { /* both tiles' b in one layout */
            const dnnl_memory_desc_t *bmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
            if (s == 0)
                p->bmd = *bmd;
            ok = dnnl_memory_desc_equal(bmd, &p->bmd) && OK(dnnl_primitive_create(&p->prim[s], pd));
        }
        if (ok) {
            p->pad_md[s] = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
            size_t pad = dnnl_memory_desc_get_size(&p->pad_md[s]);
            p->pad = pad > p->pad ? pad : p->pad;
        }
        if (pd)
            dnnl_primitive_desc_destroy(pd);
    }
    p->bbytes = dnnl_memory_desc_get_size(&p->bmd);
    if (ok && !dnnl_memory_desc_equal(&p->bmd, &p->md[0][1])) {
        dnnl_primitive_desc_t rpd = NULL;
        ok = OK(dnnl_reorder_primitive_desc_create(&rpd, &p->md[0][1], d->eng, &p->bmd, d->eng,
                                                   d->attr)) &&
             OK(dnnl_primitive_create(&p->breorder, rpd));
        if (ok)
            p->bpad_md = *dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
        if (rpd)
            dnnl_primitive_desc_destroy(rpd);
    }
    p->taken = ok;
}

static int gemm_same(const rt_gemm_args *a, const rt_gemm_args *b)
{
    return a->ta == b->ta && a->tb == b->tb && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && !a->bias == !b->bias;
}

/* Rows [i0, i0 + the tile's) of g on this thread with primitive s: the
 * operands over the caller's buffers, the scratchpad at pad. */
static int gemm_tile(struct rt_dnnl *d, dnnl_stream_t st, const gemm_prim *p, int s,
                     const rt_gemm_args *g, const void *b, int64_t i0, char *pad)
{
    enum { A, B, C, BIAS, PAD, NARGS };
    static const int arg[NARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS,
                                   DNNL_ARG_SCRATCHPAD};
    void *ptr[NARGS] = {(void *)(g->a + i0 * g->k), (void *)b, g->c + i0 * g->n,
                        (void *)g->bias, p->pad ? pad : NULL};
    const dnnl_memory_desc_t *md[NARGS] = {&p->md[s][A], &p->bmd, &p->md[s][C], &p->md[s][BIAS],
                                           &p->pad_md[s]};
    dnnl_exec_arg_t args[NARGS];
    int na = 0, ok = 1;
    for (int i = 0; i < NARGS && ok; i++) {
        if (!ptr[i])
            continue;
        args[na].arg = arg[i];
        ok = OK(dnnl_memory_create(&args[na].memory, md[i], d->eng, ptr[i]));
        na += ok;
    }
    ok = ok && OK(dnnl_primitive_execute(p->prim[s], st, na, args)) && OK(dnnl_stream_wait(st));
    for (int i = 0; i < na; i++)
        dnnl_memory_destroy(args[i].memory);
    return ok ? 0 : -1;
}

int rt_dnnl_gemm(rt_exec *x, const ir_node *n, const rt_gemm_args *g, char *err, size_t errlen)
{
    /* dense operands only: oneDNN 2.6's brgemm takes no leading dimension
       past the row (a transposed a, or a tile of columns, go to gemm:jit) */
    if (g->ta || g->lda != g->k || g->ldb != (g->tb ? g->k : g->n) || g->ldc != g->n ||
        g->m * g->n * g->k < GEMM_DNNL_MIN || strncmp(rt_dnnl_isa(), "avx512", 6) != 0)
        return 0;
    struct rt_dnnl *d = state(x);
    if (!d)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    if (d->off)
        return 0;
    if (!d->gemms && !(d->gemms = calloc((size_t)d->nvalues, sizeof *d->gemms)))
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    gemm_prim **slot = &d->gemms[n->out[0]->id], *p = *slot;
    if (p && !gemm_same(&p->g, g)) {
        gemm_free(p);
        p = *slot = NULL;
    }
    if (!p) {
        if (!(p = *slot = calloc(1, sizeof *p)))
            return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
        p->g = *g;
        p->bm = rt_gemm_rows(g->m, g->n, g->k);
        pthread_mutex_lock(&making);
        size_t heap = heap_bytes();
#pragma omp parallel num_threads(1)
        {
            omp_set_num_threads(1); /* oneDNN splits no tile: its sums in one order */
            gemm_prims(d, p);
        }
        kernels_made(d, heap, 0);
        pthread_mutex_unlock(&making);
    }
    if (!p->taken)
        return 0;
    /* the workspace: b's copy (unless kept), then each thread's scratchpad
       (the first one the reorder's before) */
    int keep = n->op == IR_OP_DENSE && rt_weight_static(x, n->in[1]);
    size_t per = align64(p->pad), at = keep ? 0 : align64(p->bbytes);
    size_t rpad = align64(dnnl_memory_desc_get_size(&p->bpad_md)), pads = omp_get_max_threads() * per;
    if (work_reserve(d, n, at + (rpad > pads ? rpad : pads), err, errlen))
        return -1;
    const void *b = g->b;
    if (p->breorder) {
        if (keep && !p->kept && !(p->kept = aligned_alloc(64, align64(p->bbytes))))
            return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
        void *to = keep ? (void *)p->kept : d->work;
        if (!(keep && x->weights_ready && p->weights_kept) &&
            reorder_once(d, p->breorder, &p->md[0][1], (void *)g->b, &p->bmd, to, &p->bpad_md,
                         d->work + at))
            return fail(err, errlen, "%s: oneDNN's reorder failed", ir_ops[n->op].name);
        p->weights_kept = keep;
        b = to;
    }
    int64_t tiles = (g->m + p->bm - 1) / p->bm;
    int failed = 0;
#pragma omp parallel if (tiles > 1)
    {
        omp_set_num_threads(1);
        char *pad = d->work + at + (size_t)omp_get_thread_num() * per;
        dnnl_stream_t st = NULL;
        int ok = OK(dnnl_stream_create(&st, d->eng, dnnl_stream_default_flags));
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < tiles; t++) {
            ok = ok && !gemm_tile(d, st, p, t == tiles - 1, g, b, t * p->bm, pad);
        }
        if (st)
            dnnl_stream_destroy(st);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
    }
    if (failed)
        return fail(err, errlen, "%s: oneDNN's matmul failed", ir_ops[n->op].name);
    x->dnnl_gemms++;
    return 1;
}

#endif
