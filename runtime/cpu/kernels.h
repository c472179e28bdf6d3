/* Inside the CPU executor: its state and what the forward kernels (exec.c) share
 * with the training kernels (grad.c).  Not a public header. */
#ifndef GNC_KERNELS_H
#define GNC_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arith.h"
#include "base.h"
#include "exec.h"

struct rt_exec {
    const ir_graph *g;
    int nvalues;
    void **buf;           /* by value id; NULL: not held here */
    char *arena;          /* node results, when planned (rt_exec_new_planned) */
    size_t arena_bytes;   /* as allocated (rt_exec_memory) */
    char *borrowed;       /* by value id: buf points into the arena or into another
                             executor's memory (a device's view of the inputs) */
    unsigned char *weight; /* by value id: computed from weights alone (ir_weight_only) */
    int weights_ready;    /* those are up to date: skipped by rt_exec_run */
    float *scratch;       /* im2col columns */
    size_t scratch_cap;   /* floats */
    int profile;          /* time each op (rt_exec_set_profile) */
    double op_ms[IR_NOPS];
    long op_calls[IR_NOPS];
    rt_event *events;     /* each kernel timed, in the order run (rt_exec_events) */
    int nevents, cap_events;

    /* A partitioned program: the executor the caller holds owns the inputs and
       one device executor per device, each running its own nodes with its own
       arena and parameter copies. */
    int device;           /* a device executor's device; -1: every node (one device) */
    const ir_node **nodes; /* a device executor's nodes, in list order */
    int nnodes;
    rt_exec **devs;       /* the caller's executor: by device */
    int ndev;
    struct rt_comm *comm; /* shared by the device executors (comm.c) */
    double timeout_s;     /* rt_exec_set_timeout; 0: RT_TIMEOUT_DEFAULT */

    /* An MPI rank's executor (rt_exec_new_rank): device `device` of the program
       in a process of its own, talking to the other ranks through MPI. */
    struct rt_mpi *mpi;   /* comm_mpi.c; NULL otherwise */

    /* Convolutions on oneDNN (dnnl.c): their primitives, made at a node's
       first run and kept; NULL until the first convolution */
    struct rt_dnnl *dnnl;
    long dnnl_convs, blas_convs; /* convolutions run on each path, for the profile */
    long dnnl_posts;             /* fused ops that oneDNN ran as its post-ops */
    long dnnl_gemms, blas_gemms; /* dense layers' and matmuls' GEMMs on each path */
    long dnnl_refused;           /* chains of post-ops whose trial run's bits were not the
                                    epilogue's (dnnl.c posts_agree), so not taken */
    /* By value id: the buffer holds the value channels-last (NHWC), as a
       oneDNN convolution wrote it for the next one to read as it is (dnnl.c,
       inference programs); cleared at each run's start.  NULL: never. */
    unsigned char *nhwc;
    long dnnl_nhwc;              /* results oneDNN wrote channels-last so */

    /* 3x3 convolutions as Winograd's F(2x2, 3x3) (winograd.c): their
       transformed weights, kept; NULL until the first convolution */
    struct rt_wino *wino;
    long wino_convs;
    long direct_convs; /* convolutions of few channels run directly (direct.c) */
};

/* Loops over fewer elements than this stay on one thread. */
#define PAR_MIN 32768

#define IN(k) ((float *)x->buf[n->in[k]->id])
#define OUT ((float *)x->buf[n->out[0]->id])
#define OUTK(k) ((float *)x->buf[n->out[k]->id])
#define NUMEL(v) ir_type_numel(&(v)->type)

/* A buffer of at least nfloats floats, reused from call to call. */
float *rt_scratch(rt_exec *x, size_t nfloats);
/* Value v (4-d) back in its plain NCHW order where a oneDNN convolution left
 * it channels-last (x->nhwc), in its own buffer: what every kernel but
 * oneDNN's convolutions reads.  -1 when out of memory for the copy. */
int rt_exec_nchw(rt_exec *x, const ir_value *v);
/* Whether value v stays the same from run to run until the weights change
 * (rt_exec_weights_changed): a parameter (or a value computed from parameters
 * alone) of a program that writes no parameters back.  What oneDNN's and
 * Winograd's convolutions make of the weights is kept while it holds. */
int rt_weight_static(const rt_exec *x, const ir_value *v);
/* The position of the first largest (want_min: smallest) of len floats step
 * apart, the first NaN's if any (reduce_max, argmax and their gradients). */
int64_t rt_arg_extreme(const float *a, int64_t len, int64_t step, int want_min);

/* c[m, n] = op(a) op(b) + beta c, row-major, op transposing where ta or tb is
 * set: cblas_sgemm with alpha 1, split into tiles fixed by the shapes alone, so
 * its bits do not depend on the number of threads (exec.c). */
void rt_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
             const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* The rows of each tile of whole rows of an [m, n] result of depth k (the
 * last tile's: what is left), fixed by the shapes alone: rt_gemm's number of
 * tiles, tiles of at least 64 rows. */
int64_t rt_gemm_rows(int64_t m, int64_t n, int64_t k);

/* One GEMM of a node: c[m, n] = op(a) op(b) (+ bias[n] on each row where
 * bias is set), row-major, op transposing where ta or tb is set. */
typedef struct {
    int ta, tb;
    int64_t m, n, k;
    const float *a, *b;
    float *c;
    int64_t lda, ldb, ldc;
    const float *bias;
} rt_gemm_args;

/* GEMM g of node n: on oneDNN's matmul where rt_dnnl_gemm takes it, else
 * rt_gemm (exec.c).  -1 with err on a failure. */
int rt_node_gemm(rt_exec *x, const ir_node *n, const rt_gemm_args *g, char *err, size_t errlen);

/* Strides of t's elements as seen from an output of rank r that t broadcasts
 * to: 0 along the dimensions where t has size 1 or none. */
void rt_bcast_strides(const ir_type *t, int r, int64_t *st);

/* Integer i of an i32 or i64 tensor. */
int64_t rt_index_at(const void *p, ir_dtype t, int64_t i);
/* Row *row of embedding n's table (num rows) for id k at position i of idx, or
 * outside [0, num) for an id of another device's rows; -1 (err set) for an id
 * outside the whole table. */
int rt_embedding_row(const ir_node *n, const ir_value *idx, int64_t num, int64_t i, int64_t k,
                     int64_t *row, char *err, size_t errlen);

/* cross_entropy's, nll_loss's and their gradients' geometry: logits
 * (log-probabilities) [n, c, d...] as positions p of n x inner, where inner is
 * the product of d..., each with its c classes inner apart from
 * x[p / inner * c * inner + p % inner]; eps the label smoothing, nll whether
 * the input is log-probabilities (nll_loss).  rt_ce_begin fills it from node n,
 * whose logits and labels are inputs li and li + 1, checks every label (in
 * [0, c) or ignore_index; none ignored in a split batch) and counts those not
 * ignored. */
typedef struct {
    int64_t npos, c, inner, count, ignore;
    double eps;
    int nll;
    const void *lab;
    ir_dtype ldt;
} rt_ce;
int rt_ce_begin(rt_exec *x, const ir_node *n, int li, rt_ce *ce, char *err, size_t errlen);
static inline const float *rt_ce_row(const rt_ce *ce, const float *logits, int64_t p)
{
    return logits + p / ce->inner * ce->c * ce->inner + p % ce->inner;
}

/* attention and attention_grad node n, tile by tile (attention.c); -1 when out
 * of memory for the scratch. */
int rt_attention(rt_exec *x, const ir_node *n);
int rt_attention_grad(rt_exec *x, const ir_node *n);

typedef struct {
    int64_t n, c, h, w;           /* input */
    int64_t o, kh, kw, oh, ow;    /* output channels, kernel, output size */
    int64_t sh, sw, ph, pw, dh, dw, groups;
} conv_geom;

conv_geom rt_conv_geometry(const ir_node *n, const ir_type *x, const ir_type *w,
                           const ir_type *y);
/* Columns of channels [c0, c0 + cg) of one image: row (ci, ky, kx), column
 * (oy, ox) at col0 + ..., in a matrix of ldc columns; zero over the padding. */
void rt_im2col(const conv_geom *g, const float *img, int64_t c0, int64_t cg, float *col,
               int64_t ldc, int64_t col0);

/* Whether a convolution runs image by image, each thread with its own columns
 * and single-threaded GEMMs (large images, at least CONV_PER_IMAGE_MIN of them:
 * no copies, no synchronization), or chunk by chunk, one GEMM over several
 * images' columns split into tiles across the threads (small images, whose
 * per-image GEMMs would be too small, and batches too small to keep the threads
 * busy image by image).  The choice depends on the shapes alone: the two paths
 * round differently, and the result must not depend on the number of threads. */
#define CONV_PER_IMAGE_MIN 8
int rt_conv_per_image(const conv_geom *g);

/* A weight's gradient image by image (grad.c, direct.c) sums its n images in
 * rt_conv_dw_chunks chunks of consecutive images, each on one thread, the
 * first chunk's sums into dw and the others' into part [chunks - 1][wsize]:
 * a number fixed by the shapes, never by the number of threads.  Then
 * rt_conv_dw_add_chunks adds the chunks to dw in their order, element by
 * element: the same bits on any number of threads. */
int64_t rt_conv_dw_chunks(int64_t n, int64_t wsize);
void rt_conv_dw_add_chunks(float *dw, const float *part, int64_t chunks, int64_t wsize);

/* Convolution node n (conv2d, conv2d_grad_input or conv2d_grad_weight) on
 * oneDNN (dnnl.c).  members[0 .. nmembers): the rest of the fused group a
 * conv2d leads (exec.c's epilogue: elementwise, each on the previous one's
 * result), none for a gradient.  oneDNN runs the first *absorbed of them as its
 * post-ops and writes the last of those's result (n's own where 0); the caller
 * runs the others.  Returns 1 when it ran, 0 when oneDNN is not built in, is
 * turned off (GNC_DNNL=0 in the environment; GNC_DNNL=infer for a training
 * program), a training program's convolution has few channels, or oneDNN
 * declines the shape: the caller runs it on OpenBLAS.  -1 with err on a
 * failure. */
int rt_dnnl_conv(rt_exec *x, const ir_node *n, const ir_node *const *members, int nmembers,
                 int *absorbed, char *err, size_t errlen);
/* Whether oneDNN runs convolution g, which Winograd could take (rt_wino_fits),
 * faster than winograd.c does on this CPU: where oneDNN's kernels are its
 * AVX-512 ones, a training program's forward convolutions and input
 * gradients, and an inference program's whose output plane is larger than
 * WINO_MAX_PLANE_AVX512 (docs/perf.md, 2026-12-03, tenth session: resnet18's
 * 7x7 and larger planes ran 1.5x faster on oneDNN, its 4x4 ones 1.4x faster as
 * Winograd); a weight gradient (dweight) where oneDNN takes it (planes of
 * DW_MIN_PLANE and more, dnnl.c), Winograd being faster than the im2col and
 * OpenBLAS that would run below (eleventh session: resnet18's 3x3 planes at
 * batch 32 13.4 -> 7.5 ms, 6x6 11 -> 9.8 ms).  0 without oneDNN, with it
 * turned off, or on AVX2, where Winograd was measured faster. */
#define WINO_MAX_PLANE_AVX512 16
int rt_dnnl_beats_wino(rt_exec *x, const conv_geom *g, int dweight);
/* C = alpha op(A) op(B) + beta C, row-major (op: transposed where ta, tb),
 * on the calling thread alone (its OpenMP threads set to 1): oneDNN's sgemm
 * where oneDNN is on and its kernels are AVX-512's, OpenBLAS's elsewhere
 * (dnnl.c).  One thread, one order of the sums: its bits do not depend on the
 * number of threads of the caller. */
void rt_gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
              int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* GEMM g of node n (a dense layer, its gradients, a matmul) on oneDNN's
 * matmul (dnnl.c): rt_gemm's tiles, each a primitive made for one thread, so
 * the bits do not depend on the number of threads; its scratchpads in the
 * shared workspace, which the memory report counts.  Taken where oneDNN runs
 * its brgemm kernels (AVX-512) and the product has GEMM_DNNL_MIN
 * multiply-adds or more: 1 when it ran, 0 when not taken (the caller runs
 * rt_gemm), -1 with err on a failure. */
#define GEMM_DNNL_MIN (1 << 15)
int rt_dnnl_gemm(rt_exec *x, const ir_node *n, const rt_gemm_args *g, char *err, size_t errlen);
/* Whether convolutions go to oneDNN at all: built in, not turned off. */
int rt_dnnl_enabled(void);
/* The instruction set oneDNN's kernels use on this CPU (after any
 * DNNL_MAX_CPU_ISA): "sse41", "avx", "avx2", "avx2_vnni", "avx512_core",
 * "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx"; "" without oneDNN. */
const char *rt_dnnl_isa(void);
/* oneDNN's version ("2.6.3"); "" without oneDNN. */
const char *rt_dnnl_version(void);
void rt_dnnl_free(struct rt_dnnl *d);
/* What d holds (rt_exec_memory); 0 for each without oneDNN. */
typedef struct {
    int64_t weights; /* the weights' copies in oneDNN's layouts, post-ops' constants */
    int64_t work;    /* the shared workspace at its largest */
    int64_t trial;   /* the largest post-op trial's operands (freed after it) */
    int64_t kernels; /* what the heap grew by while the primitives were made: oneDNN's
                        generated kernels and its primitives' own state */
} rt_dnnl_mem;
void rt_dnnl_bytes(const struct rt_dnnl *d, rt_dnnl_mem *m);

/* Convolution node n (conv2d, conv2d_grad_input or conv2d_grad_weight) as
 * Winograd's F(2x2, 3x3) (winograd.c): 1 when it ran (bias included; the
 * caller runs the fused epilogue), 0 when it does not apply (not a 3x3 stride-1 convolution of
 * enough channels, or GNC_WINOGRAD=0), -1 with err on a failure. */
int rt_wino_conv(rt_exec *x, const ir_node *n, char *err, size_t errlen);
/* Whether a convolution of geometry g has the shape Winograd takes. */
int rt_wino_fits(const conv_geom *g);
void rt_wino_free(struct rt_wino *w);
/* The bytes of Winograd's transformed weights and its tables (rt_exec_memory). */
int64_t rt_wino_bytes(const struct rt_wino *w);

/* The members that follow a convolution in its fused group, run on its
 * result image by image (exec.c's epilogue); NULL for none. */
struct epilogue;
/* Makes the epilogue's operands NCHW (a residual left channels-last by
 * oneDNN): 0, or -1 out of memory. */
int rt_epilogue_ready(rt_exec *x, const struct epilogue *e);
/* Runs epilogue e on the flat elements [lo, hi) of the convolution's result
 * (whole images): the same arithmetic as the members' own kernels. */
void rt_epilogue_range(rt_exec *x, const struct epilogue *e, int64_t lo, int64_t hi);

/* Convolution node n (conv2d, conv2d_grad_input or conv2d_grad_weight) as a
 * direct convolution in AVX2 or AVX-512 (direct.c): 1 when it ran, bias and
 * epilogue e (NULL for none) included, each image's right after it while it
 * is in cache; 0 when it does not apply (not stride 1, too many output
 * channels, no AVX2 and FMA on this CPU, or GNC_DIRECT=0), -1 with err on a
 * failure. */
int rt_direct_conv(rt_exec *x, const ir_node *n, const struct epilogue *e, char *err,
                   size_t errlen);

/* The number attributes of a unary op or of its gradient, in their schema's
 * order (ops.def: leaky_relu's slope, elu's alpha, pow's p, clamp's min and
 * max), into *p and *q; 0 for those it lacks. */
static inline void rt_unary_attrs(const ir_node *n, float *p, float *q)
{
    double v[2];
    ir_float_attrs(n, v, 2);
    *p = (float)v[0];
    *q = (float)v[1];
}
/* Whether pooling windows of an h x w input into oh x ow tile it: stride equal
 * to the kernel, no padding, and no last window past the input (ceil_mode's), so
 * each input element is in at most one window and none is clipped. */
static inline int rt_pool_tiles(const int64_t *k, const int64_t *st, const int64_t *pd, int64_t h,
                                int64_t w, int64_t oh, int64_t ow)
{
    return k[0] == st[0] && k[1] == st[1] && pd[0] == 0 && pd[1] == 0 && oh * k[0] <= h &&
           ow * k[1] <= w;
}

/* The window of avgpool2d's output (oy, ox) clipped to the input,
 * [win[0], win[1]) x [win[2], win[3]), and PyTorch's divisor: the window clipped
 * to the padded input with count_include_pad, to the input without. */
static inline int64_t rt_avgpool_window(const int64_t *k, const int64_t *st, const int64_t *pd,
                                        int64_t h, int64_t w, int64_t oy, int64_t ox, int incl,
                                        int64_t win[4])
{
    int64_t y0 = oy * st[0] - pd[0], x0 = ox * st[1] - pd[1];
    int64_t y1 = y0 + k[0] < h + pd[0] ? y0 + k[0] : h + pd[0];
    int64_t x1 = x0 + k[1] < w + pd[1] ? x0 + k[1] : w + pd[1];
    int64_t padded = (y1 - y0) * (x1 - x0);
    win[0] = y0 < 0 ? 0 : y0, win[2] = x0 < 0 ? 0 : x0;
    win[1] = y1 > h ? h : y1, win[3] = x1 > w ? w : x1;
    return incl ? padded : (win[1] - win[0]) * (win[3] - win[2]);
}

/* The window of adaptive_avgpool2d's output i of out along an axis of in:
 * [floor(i in / out), ceil((i + 1) in / out)), as PyTorch's. */
static inline void rt_adaptive_window(int64_t i, int64_t in, int64_t out, int64_t *start,
                                      int64_t *end)
{
    *start = i * in / out;
    *end = ((i + 1) * in + out - 1) / out;
}

/* The outputs of adaptive_avgpool2d whose windows hold input j of an axis:
 * [*first, *last], the inverse of rt_adaptive_window. */
static inline void rt_adaptive_holders(int64_t j, int64_t in, int64_t out, int64_t *first,
                                       int64_t *last)
{
    *first = j * out / in;
    *last = ((j + 1) * out - 1) / in;
}

/* batchnorm_train's normalization from its statistics as stored (float mean
 * and invstd), so that batchnorm_apply recomputes the same bits: the mean is
 * subtracted first, which keeps the precision where the mean is large. */
static inline void rt_bn_normalize(const float *x, float *y, int64_t n, float mean, float invstd,
                                   float w, float b)
{
    float scale = w * invstd;
    for (int64_t k = 0; k < n; k++)
        y[k] = (x[k] - mean) * scale + b;
}

/* Collectives, send and recv between the device executors of one process, each
 * on its own thread (comm.c).  rt_comm_new sets up parent->comm for parent's
 * device executors; rt_comm_kernel runs a communication node on device
 * executor x, waiting for its peers; rt_comm_abort makes every waiting and
 * later rt_comm_kernel fail (a device failed: the others must not hang);
 * rt_comm_reset readies the state for the next run. */
int rt_comm_new(rt_exec *parent, char *err, size_t errlen);
void rt_comm_free(struct rt_comm *c);
/* The send buffers' bytes (rt_exec_memory). */
int64_t rt_comm_bytes(const struct rt_comm *c);
int rt_comm_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen);
void rt_comm_abort(struct rt_comm *c);
void rt_comm_reset(struct rt_comm *c);
/* A test's fault: from now on device `device` of parent's program (a
 * partitioned program on threads) stops at its communication op `id` (-1:
 * its first) as a hung device would, neither arriving nor leaving until
 * another device fails the run (its deadline: rt_exec_set_timeout), then
 * fails with "another device failed".  device -1 ends the fault. */
void rt_comm_test_stall(rt_exec *parent, int device, int64_t id);

/* The same through MPI, for an executor that runs one device of the program
 * per process (comm_mpi.c, built with GNC_HAVE_MPI).  rt_mpi_new checks the
 * world against the program and sets up x->mpi, collectively on every rank;
 * rt_mpi_kernel runs a communication node of x's device; rt_mpi_finish ends a
 * step (completes its sends); rt_mpi_gather brings every parameter, buffer and
 * state value to rank 0's copy from the first device that holds one. */
int rt_mpi_new(rt_exec *x, int ndev, char *err, size_t errlen);
void rt_mpi_free(struct rt_mpi *m);
int rt_mpi_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen);
int rt_mpi_finish(rt_exec *x, char *err, size_t errlen);
int rt_mpi_gather(rt_exec *x, char *err, size_t errlen);

/* The kernels of the ops autodiff makes (grad.c).  Returns 0 or -1 with err. */
int rt_train_kernel(rt_exec *x, const ir_node *n, char *err, size_t errlen);

#endif
