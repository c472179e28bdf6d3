/* The libraries' results, one reference for every host computation of them:
 * the stand-ins of cuBLASLt and cuDNN (tests/fakecuda/cublaslt.c, cudnn.c)
 * and the host runs of generated programs (tests/cg_host.c), whose library
 * steps stand for the same calls.  One copy, so that they cannot drift apart:
 * the GPU tests compare results of the stand-ins bitwise (eager runs against
 * graph replays), and cg_host's against the CPU executor.
 *
 * Everything is computed in double from the operands' values (rounded to TF32
 * first where asked: fkref_tf32) and rounded once, when stored.  Each sum runs
 * in a fixed order, given below, from +0.  Elements are read and written
 * through the caller's accessor (fkref_io), so each caller keeps its own
 * storage types: cudaDataType in the stand-ins, ir_dtype in cg_host.
 *
 * Not modelled: the order and precision of a GPU's partial sums (tensor cores
 * add in a different order, some in lower precision); results differ from a
 * GPU's in the last bits.  cg_host.c includes ref.c into its own object (its
 * test targets are registered by three .cmake files); the stand-ins link it. */
#ifndef GNC_FAKECUDA_REF_H
#define GNC_FAKECUDA_REF_H

#include <stdint.h>

/* Element i of the array at base, whose elements are of the caller's type
 * code type (a cudaDataType, an ir_dtype), as a double; store rounds v to it. */
typedef struct {
    double (*load)(const void *base, int64_t i, int type);
    void (*store)(void *base, int64_t i, int type, double v);
} fkref_io;

/* v as a float rounded to TF32 (10 bits of mantissa), to nearest even, as
 * cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32 and cuDNN's tensor-op math treat
 * fp32 operands; infinities and NaNs unchanged. */
double fkref_tf32(double v);

/* cublasLtMatmul, column-major (element (r, c) of a matrix at r + c ld):
 *   D = epilogue(alpha op(A) op(B) + beta C)
 * op(A) m x k, op(B) k x n, C and D m x n; batch entries stride elements
 * apart.  Per element: s = the sum over l = 0 .. k-1 in order of
 * op(A)[i][l] op(B)[l][j]; v = alpha s; v += beta C[i][j] where beta != 0
 * (C is not read otherwise); v += bias[i] where bias is set; v = 0 where relu
 * is set and !(v > 0).  D may be C (with C's layout): each element's C is
 * read before its D is written. */
typedef struct {
    int64_t m, n, k, batch;
    int trans_a, trans_b;           /* op(X) = X^T where set */
    int tf32;                       /* A and B rounded to TF32 as read */
    double alpha, beta;
    const void *a, *b, *c;
    const void *bias;               /* m elements, or NULL */
    void *d;
    int64_t lda, ldb, ldc, ldd;
    int64_t stride_a, stride_b, stride_c, stride_d;
    int type_a, type_b, type_c, type_d, type_bias;
    int relu;
} fkref_gemm;

/* 0, or -1 when out of host memory (nothing written then). */
int fkref_gemm_run(const fkref_gemm *g, const fkref_io *io);

typedef enum { FKREF_FORWARD, FKREF_BACKWARD_DATA, FKREF_BACKWARD_FILTER } fkref_conv_kind;

/* cuDNN's 2-d convolutions, cross-correlation (CUDNN_CROSS_CORRELATION) with
 * groups, of x [n, c, h, w] and the filter w [k, c / groups, r, s] giving
 * y [n, k, p, q]:
 *   forward          out = y  = act(alpha conv(x, w) + beta z + bias)
 *   backward data    out = dx = alpha conv^T(dy, w) + beta z
 *   backward filter  out = dw = alpha corr(x, dy) + beta z
 * where z is an array laid out as the output (often the output itself: then
 * its old values), omitted when NULL.  Output pixel (p, q) of filter tap
 * (r, s) reads x at (p stride[0] - pad[0] + r dilation[0],
 * q stride[1] - pad[1] + s dilation[1]), nothing outside x.  Sums: the
 * forward's over (channel of the group, r, s) in order; the backward ones
 * accumulate in the order of (n, k, p, q, channel, r, s).  Then v = alpha
 * sum + beta z (+ 0 without z: a -0 becomes +0), + bias[k] (forward), v = 0
 * where relu (forward) and !(v > 0).  Every result is computed before any is
 * stored: the output may be z, or an input's memory. */
typedef struct {
    fkref_conv_kind kind;
    int64_t n, c, h, w, k, r, s, p, q, groups;
    int64_t pad[2], stride[2], dilation[2];
    int64_t xs[4], ys[4];           /* element strides of x (dx) and y (dy) over n, c, h, w */
    int krsc;                       /* the filter [k][r][s][c / groups], else [k][c / groups][r][s] */
    int type;                       /* of every operand */
    int tf32;                       /* x, w and dy rounded to TF32 as read */
    const void *x, *wt, *y;         /* the inputs (the output's slot is not read) */
    void *out;                      /* y, dx or dw by kind */
    double alpha, beta;
    const void *z;                  /* NULL: no beta term */
    int64_t zs[4];                  /* z's strides where the output is y or dx; as the filter for dw */
    const void *bias;               /* forward: k elements, bias_stride apart; or NULL */
    int64_t bias_stride;
    int relu;                       /* forward */
} fkref_conv;

/* 0, or -1 when out of host memory (nothing written then). */
int fkref_conv_run(const fkref_conv *c, const fkref_io *io);

#endif
