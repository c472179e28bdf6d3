/* The fake cuDNN (libcudnn.so.9), its legacy convolution API: forward,
 * backward data, backward filter and the fused bias-activation forward, on
 * host memory, queued on the handle's stream like kernels (fake.h).
 *
 * Models: 4-d tensors (NCHW, NHWC, or any strides through
 * cudnnSetTensor4dDescriptorEx), NCHW (KCRS) and NHWC (KRSC) filters, 2-d
 * cross-correlation with padding, strides, dilation and groups, compute type
 * FLOAT, data FLOAT, HALF or BFLOAT16 (all operands alike), y = alpha op +
 * beta y with host alpha and beta; the results are the shared reference's
 * (ref.h, which tests/cg_host.c uses too): sums in double rounded once to
 * the data type.  Checked as cuDNN checks (CUDNN_STATUS_BAD_PARAM): the
 * filter's C times groups is x's C, K divides by groups, y's dims are the
 * convolution's output dims, types agree, bias is 1xKx1x1, z is shaped like
 * y.  cudnnConvolutionBiasActivationForward refuses (NOT_SUPPORTED, with a
 * line on stderr) what the real one is not documented to run: an activation
 * other than RELU and IDENTITY, IDENTITY with an algorithm other than
 * CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, BFLOAT16 data (its
 * configurations are FLOAT and HALF), channels-last tensors or KRSC filters
 * (NCHW only).  The handle belongs to the device current at cudnnCreate; its
 * stream must be of that device.
 *
 * Math: every math type but CUDNN_FMA_MATH rounds FLOAT operands to TF32,
 * CUDNN_DEFAULT_MATH included: on sm_80 and newer cuDNN may run FLOAT data
 * on TF32 tensor cores unless the math is FMA (cudnnMathType_t in the cuDNN
 * API reference: "CUDNN_FMA_MATH: Restricted to only kernels that use FMA
 * instructions", DEFAULT_MATH permitting TF32 on A100 and newer).
 *
 * Algorithms (algo_need below): each call's algorithms, which run which
 * problems as cuDNN documents (FFT and Winograd only NCHW, unit strides,
 * their filter sizes; the forward DIRECT and the filter gradient's WINOGRAD
 * not implemented), each needing the workspace of a formula of the problem
 * (none for IMPLICIT_GEMM and the backward ALGO_0s, which are
 * non-deterministic, some for the precomputed implicit GEMMs, the lowered
 * image for GEMM, transformed tensors for FFT and Winograd).
 * cudnnGet*WorkspaceSize say it (NOT_SUPPORTED for an algorithm that does
 * not run the problem); the _v7 heuristics list every algorithm with its
 * memory and status, one that needs workspace first and one that needs none
 * after it, and the math type CUDNN_DEFAULT_MATH (as cuDNN lists them);
 * cudnnFind*AlgorithmEx lists the same, those that need more than the
 * workspace given with CUDNN_STATUS_ALLOC_FAILED (the perf struct's
 * documentation).  Every convolution call refuses an algorithm that does not
 * run its problem (NOT_SUPPORTED), and a workspace smaller than its
 * algorithm needs (BAD_PARAM: cuDNN documents no status of its own for it),
 * with a line on stderr.
 *
 * First use: a handle's first convolution (forward, backward data, backward
 * filter, fused) sets cuDNN up (loads kernels, allocates), which a stream
 * capture cannot hold: issued while the handle's stream is capturing it is
 * refused (CUDNN_STATUS_NOT_SUPPORTED, a line on stderr) and invalidates the
 * capture (fake.h, fk_capture_refuse).  A call outside a capture, or
 * cudnnFind (which runs the algorithms), sets the handle up.
 *
 * Layouts: cuDNN's tensor-core kernels (HALF or BFLOAT16 data, or FLOAT data
 * under any math but FMA: TF32) take NHWC tensors and KRSC filters, so on
 * NCHW ones it copies them in and its result back, a transpose kernel each
 * (the H200 profile of 2026-11-26, bench/results/2026-11-26-h200/: 163
 * nchwToNhwc/nhwcToNchw kernels in a resnet18 bf16 step); a forward call on
 * one input channel runs on a generic kernel that needs none.  The fake
 * counts, as each call runs, the transposes the real one would make: every
 * tensor of x, w and y (dy, dx, dw) not already channels-last; with
 * GNC_FAKECUDA_STATS=FILE it appends "cudnn.convolutions N",
 * "cudnn.layout_transposes N" and "cudnn.finds N" (cudnnFind*AlgorithmEx
 * calls) to FILE when the library unloads.  cudnnGetVersion says 90000 (9.0.0)
 * unless GNC_FAKECUDA_CUDNN_VERSION says otherwise.
 *
 * A call on a KRSC filter costs GNC_FAKECUDA_NHWC_MS on the device's clock
 * (default: GNC_FAKECUDA_LIBRARY_MS, as the others), so a test can make
 * --conv auto choose the channels-last way.
 *
 * Not modelled: true convolution (flipped), 3-d, other compute types,
 * algorithms that differ in results (every one computes the same) or in
 * speed (cudnnFind's times are their list order), the real workspace sizes
 * (the formulas are the fake's), cudnnFind leaving arbitrary values in the
 * output buffer as the real one does. */
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "ref.h"

#define EXPORT __attribute__((visibility("default")))

/* The calls run and the layout transposes the real cuDNN would make in them
 * (above), and the cudnnFind calls, for GNC_FAKECUDA_STATS. */
static long ran_convs, ran_transposes, ran_finds;

EXPORT size_t cudnnGetVersion(void)
{
    FK_API;
    const char *v = getenv("GNC_FAKECUDA_CUDNN_VERSION");
    return v && *v ? (size_t)strtoul(v, NULL, 10) : 90000;
}

struct cudnnContext {
    int dev;
    cudaStream_t stream;
    int warm;           /* a convolution ran on it outside a capture: set up */
};

struct cudnnTensorStruct {
    int set;
    cudnnDataType_t type;
    int n, c, h, w;
    int ns, cs, hs, ws;    /* strides in elements */
};

struct cudnnFilterStruct {
    int set;
    cudnnDataType_t type;
    int k, c, r, s;
    int krsc;              /* CUDNN_TENSOR_NHWC: [k][r][s][c] */
};

struct cudnnConvolutionStruct {
    int set;
    int pad[2], stride[2], dilation[2];
    int groups;
    cudnnMathType_t math;
};

struct cudnnActivationStruct {
    int set;
    cudnnActivationMode_t mode;
};

static cudnnStatus_t bad(const char *who, const char *why)
{
    fprintf(stderr, "fakecuda: %s: %s\n", who, why);
    return CUDNN_STATUS_BAD_PARAM;
}

static cudnnStatus_t not_supported(const char *who, const char *why)
{
    fprintf(stderr, "fakecuda: %s: not supported: %s\n", who, why);
    return CUDNN_STATUS_NOT_SUPPORTED;
}

EXPORT const char *cudnnGetErrorString(cudnnStatus_t status)
{
    FK_API;
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

EXPORT cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    FK_API;
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    int dev = fk_stream_device(NULL);
    if (dev < 0)
        return CUDNN_STATUS_NOT_INITIALIZED; /* no current context */
    struct cudnnContext *h = calloc(1, sizeof *h);
    if (!h)
        return CUDNN_STATUS_ALLOC_FAILED;
    h->dev = dev;
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    FK_API;
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    FK_API;
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    int d = fk_stream_device((CUstream)streamId);
    if (d < 0)
        return bad("cudnnSetStream", "not a live stream");
    if (d != handle->dev) {
        fprintf(stderr, "fakecuda: cudnnSetStream: a stream of device %d for a handle of device %d\n",
                d, handle->dev);
        return CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH;
    }
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- descriptors */

#define CREATE(fn, type)                                                             \
    EXPORT cudnnStatus_t fn(type *d)                                                 \
    {                                                                                \
        if (!d)                                                                      \
            return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;                              \
        *d = calloc(1, sizeof **d);                                                  \
        return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;                \
    }
#define DESTROY(fn, type)                                                            \
    EXPORT cudnnStatus_t fn(type d)                                                  \
    {                                                                                \
        free(d);                                                                     \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
CREATE(cudnnCreateTensorDescriptor, cudnnTensorDescriptor_t)
CREATE(cudnnCreateFilterDescriptor, cudnnFilterDescriptor_t)
CREATE(cudnnCreateConvolutionDescriptor, cudnnConvolutionDescriptor_t)
CREATE(cudnnCreateActivationDescriptor, cudnnActivationDescriptor_t)
DESTROY(cudnnDestroyTensorDescriptor, cudnnTensorDescriptor_t)
DESTROY(cudnnDestroyFilterDescriptor, cudnnFilterDescriptor_t)
DESTROY(cudnnDestroyConvolutionDescriptor, cudnnConvolutionDescriptor_t)
DESTROY(cudnnDestroyActivationDescriptor, cudnnActivationDescriptor_t)

static int data_type_ok(cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

static cudaDataType cuda_type(cudnnDataType_t t)
{
    return t == CUDNN_DATA_HALF ? CUDA_R_16F : t == CUDNN_DATA_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

EXPORT cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t t, cudnnDataType_t dataType,
                                                  int n, int c, int h, int w, int nStride,
                                                  int cStride, int hStride, int wStride)
{
    FK_API;
    if (!t)
        return CUDNN_STATUS_BAD_PARAM;
    if (!data_type_ok(dataType))
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || nStride <= 0 || cStride <= 0 || hStride <= 0 ||
        wStride <= 0)
        return bad("cudnnSetTensor4dDescriptor", "dims and strides must be positive");
    *t = (struct cudnnTensorStruct){1, dataType, n, c, h, w, nStride, cStride, hStride, wStride};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t t, cudnnTensorFormat_t format,
                                                cudnnDataType_t dataType, int n, int c, int h, int w)
{
    FK_API;
    if (format == CUDNN_TENSOR_NHWC)
        return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, h * w * c, 1, w * c, c);
    if (format != CUDNN_TENSOR_NCHW)
        return CUDNN_STATUS_NOT_SUPPORTED; /* not modelled */
    return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, c * h * w, h * w, w, 1);
}

EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t f, cudnnDataType_t dataType,
                                                cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    FK_API;
    if (!f)
        return CUDNN_STATUS_BAD_PARAM;
    if ((format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) || !data_type_ok(dataType))
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
        return bad("cudnnSetFilter4dDescriptor", "dims must be positive");
    *f = (struct cudnnFilterStruct){1, dataType, k, c, h, w, format == CUDNN_TENSOR_NHWC};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t c, int pad_h,
                                                     int pad_w, int u, int v, int dilation_h,
                                                     int dilation_w, cudnnConvolutionMode_t mode,
                                                     cudnnDataType_t computeType)
{
    FK_API;
    if (!c)
        return CUDNN_STATUS_BAD_PARAM;
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
        return bad("cudnnSetConvolution2dDescriptor", "negative padding or non-positive stride or dilation");
    if (mode != CUDNN_CROSS_CORRELATION || computeType != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_NOT_SUPPORTED; /* not modelled */
    int groups = c->set ? c->groups : 1;
    cudnnMathType_t math = c->set ? c->math : CUDNN_DEFAULT_MATH;
    *c = (struct cudnnConvolutionStruct){1, {pad_h, pad_w}, {u, v}, {dilation_h, dilation_w}, groups, math};
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t c, int groupCount)
{
    FK_API;
    if (!c || groupCount < 1)
        return CUDNN_STATUS_BAD_PARAM;
    c->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t c, cudnnMathType_t mathType)
{
    FK_API;
    if (!c || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    c->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t a,
                                                  cudnnActivationMode_t mode,
                                                  cudnnNanPropagation_t reluNanOpt, double coef)
{
    FK_API;
    (void)reluNanOpt, (void)coef;
    if (!a || (unsigned)mode > CUDNN_ACTIVATION_SWISH)
        return CUDNN_STATUS_BAD_PARAM;
    a->set = 1;
    a->mode = mode;
    return CUDNN_STATUS_SUCCESS;
}

/* Whether t's channels vary faster than its pixels (NHWC), where both count. */
static int channels_last(const struct cudnnTensorStruct *t)
{
    return t->c > 1 && t->h * t->w > 1 && t->cs < t->ws;
}

/* ---------------------------------------------------------------- the problem */

typedef struct {
    struct cudnnTensorStruct x, y;
    struct cudnnFilterStruct w;
    struct cudnnConvolutionStruct cv;
    int p, q;           /* output height and width */
} problem;

/* The output dims of the convolution, and the checks cuDNN makes. */
static cudnnStatus_t check(const char *who, problem *pb, int check_y)
{
    const struct cudnnTensorStruct *x = &pb->x, *y = &pb->y;
    const struct cudnnFilterStruct *w = &pb->w;
    const struct cudnnConvolutionStruct *c = &pb->cv;
    if (!x->set || !w->set || !c->set || (check_y && !y->set))
        return bad(who, "a descriptor was never set");
    if (w->c * c->groups != x->c || w->k % c->groups)
        return bad(who, "the filter's C times the group count is not x's C, or K does not divide by groups");
    int eh = (w->r - 1) * c->dilation[0] + 1, ew = (w->s - 1) * c->dilation[1] + 1;
    pb->p = (x->h + 2 * c->pad[0] - eh) / c->stride[0] + 1;
    pb->q = (x->w + 2 * c->pad[1] - ew) / c->stride[1] + 1;
    if (x->h + 2 * c->pad[0] < eh || x->w + 2 * c->pad[1] < ew)
        return bad(who, "the filter is larger than the padded input");
    if (!check_y)
        return CUDNN_STATUS_SUCCESS;
    if (y->n != x->n || y->c != w->k || y->h != pb->p || y->w != pb->q) {
        char msg[200];
        snprintf(msg, sizeof msg, "y is %dx%dx%dx%d, the convolution gives %dx%dx%dx%d", y->n, y->c,
                 y->h, y->w, x->n, w->k, pb->p, pb->q);
        return bad(who, msg);
    }
    if (x->type != w->type || x->type != y->type)
        return bad(who, "x, w and y differ in data type");
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t inputTensorDesc,
                                                           const cudnnFilterDescriptor_t filterDesc,
                                                           int *n, int *c, int *h, int *w)
{
    FK_API;
    if (!convDesc || !inputTensorDesc || !filterDesc || !n || !c || !h || !w)
        return CUDNN_STATUS_BAD_PARAM;
    problem pb = {.x = *inputTensorDesc, .w = *filterDesc, .cv = *convDesc};
    cudnnStatus_t st = check("cudnnGetConvolution2dForwardOutputDim", &pb, 0);
    if (st)
        return st;
    *n = pb.x.n, *c = pb.w.k, *h = pb.p, *w = pb.q;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- algorithms */

enum { FWD, BWD_DATA, BWD_FILTER };

static const char *const kind_name[] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                        "cudnnConvolutionBackwardFilter"};

/* Each call's algorithms in the order the lists give them (fastest first, as
 * the fake's heuristic ranks them): one that needs workspace first for every
 * problem, so that a caller who takes the first without its memory is
 * caught; the one that needs none last but the refused ones.  Every algorithm
 * computes the same (ref.h); they differ in what they run, need and promise. */
static const int fwd_order[] = {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT};
static const int bwd_data_order[] = {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
static const int bwd_filter_order[] = {
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD};
#define NALGOS 8 /* the most of any call (CUDNN_CONVOLUTION_FWD_ALGO_COUNT) */

static int order_of(int kind, const int **order)
{
    *order = kind == FWD ? fwd_order : kind == BWD_DATA ? bwd_data_order : bwd_filter_order;
    return kind == FWD ? (int)(sizeof fwd_order / sizeof *fwd_order)
         : kind == BWD_DATA ? (int)(sizeof bwd_data_order / sizeof *bwd_data_order)
                            : (int)(sizeof bwd_filter_order / sizeof *bwd_filter_order);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* What algorithm algo of call kind needs for problem pb (checked): SUCCESS
 * with its workspace in *bytes and whether it is deterministic, NOT_SUPPORTED
 * (why says why) where it does not run pb, BAD_PARAM where algo is none of
 * kind's.  Which run what follows the configurations cuDNN documents for
 * each (cudnnConvolutionForward, BackwardData, BackwardFilter: FFT and
 * Winograd only on NCHW tensors, of FLOAT or HALF data, unit strides and
 * dilation; FFT on at most 256 x 256 padded images, FFT_TILING on filters of
 * at most 32 x 32, both on filters larger than the padding; WINOGRAD on 3x3
 * filters, WINOGRAD_NONFUSED on 3x3 and 5x5; the forward DIRECT and the
 * backward filter's WINOGRAD not implemented, cudnn_ops.h).  The sizes are
 * the fake's own formulas, of the right kind: none for the implicit GEMMs
 * that keep nothing (IMPLICIT_GEMM, the backward ALGO_0s), an index table
 * for the precomputed ones, the lowered images for GEMM, the transformed
 * tensors for FFT and Winograd, partial sums for the filter gradient's. */
static cudnnStatus_t algo_need(int kind, int algo, const problem *pb, size_t *bytes, int *det,
                               const char **why)
{
    const struct cudnnTensorStruct *x = &pb->x, *y = &pb->y;
    const struct cudnnFilterStruct *w = &pb->w;
    const struct cudnnConvolutionStruct *c = &pb->cv;
    int64_t es = (int64_t)fk_type_size(x->type == CUDNN_DATA_FLOAT ? CUDA_R_32F : CUDA_R_16F);
    int64_t n = x->n, cc = x->c, k = w->k, cg = w->c, r = w->r, s = w->s, p = pb->p, q = pb->q;
    int64_t fh = x->h + 2 * c->pad[0], fw = x->w + 2 * c->pad[1];
    int64_t tiles32 = ceil_div(fh, 32) * ceil_div(fw, 32), tiles4 = ceil_div(p, 4) * ceil_div(q, 4);
    int transform = 0;  /* an FFT or Winograd algorithm: its conditions below */
    int64_t need = 0;
    *det = 1;
    *why = NULL;
    if (algo < 0 || algo >= 16) {
        *why = "not an algorithm of this call";
        return CUDNN_STATUS_BAD_PARAM;
    }
    switch (kind * 16 + algo) {
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        need = 4 * cg * r * s;
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        need = es * cc * r * s * p * q;
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        *why = "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT is not implemented";
        return CUDNN_STATUS_NOT_SUPPORTED;
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
        *why = "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD is not implemented";
        return CUDNN_STATUS_NOT_SUPPORTED;
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
        *det = 0; /* atomic adds */
        break;
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
        need = 4 * k * cg * r * s;
        break;
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
        need = 4 * k * cg * r * s;
        *det = 0;
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_FFT:
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
        transform = 1;
        if (fh > 256 || fw > 256)
            *why = "FFT needs the padded image within 256 x 256";
        need = 8 * (n * cc + k * cg + n * k) * fh * (fw / 2 + 1);
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
        transform = 1;
        if (r > 32 || s > 32)
            *why = "FFT_TILING needs a filter within 32 x 32";
        need = 8 * (n * cc * tiles32 + k * cg + n * k * tiles32) * 32 * 17;
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
        transform = 2;
        if (r != 3 || s != 3)
            *why = "WINOGRAD needs a 3x3 filter";
        need = es * k * cg * 16;
        break;
    case FWD * 16 + CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
    case BWD_DATA * 16 + CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
    case BWD_FILTER * 16 + CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
        transform = 2;
        if ((r != 3 || s != 3) && (r != 5 || s != 5))
            *why = "WINOGRAD_NONFUSED needs a 3x3 or 5x5 filter";
        need = es * 36 * (n * cc * tiles4 + k * cg + n * k * tiles4);
        break;
    default:
        *why = "not an algorithm of this call";
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (transform && !*why) {
        if (channels_last(x) || channels_last(y) || w->krsc)
            *why = "FFT and Winograd algorithms need NCHW tensors and a KCRS filter";
        else if (x->type == CUDNN_DATA_BFLOAT16)
            *why = "FFT and Winograd algorithms take FLOAT and HALF data";
        else if (c->stride[0] != 1 || c->stride[1] != 1 || c->dilation[0] != 1 || c->dilation[1] != 1)
            *why = "FFT and Winograd algorithms need unit strides and dilation";
        else if (transform == 1 && (r <= c->pad[0] || s <= c->pad[1]))
            *why = "FFT algorithms need a filter larger than the padding";
    }
    if (*why)
        return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = (size_t)need;
    return CUDNN_STATUS_SUCCESS;
}

/* One entry of a list, whatever the call's perf type. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    int det;
} listed;

/* Every algorithm of call kind for pb, those that run it first in the order
 * above, those that do not last (CUDNN_STATUS_NOT_SUPPORTED). */
static int list_algos(int kind, const problem *pb, listed *out)
{
    const int *order;
    int n = order_of(kind, &order), count = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            listed e = {order[i], CUDNN_STATUS_SUCCESS, 0, 1};
            const char *why;
            e.status = algo_need(kind, order[i], pb, &e.memory, &e.det, &why);
            if ((e.status == CUDNN_STATUS_SUCCESS) == (pass == 0)) {
                if (e.status)
                    e.memory = 0;
                out[count++] = e;
            }
        }
    return count;
}

/* The _v7 heuristics: every algorithm with the workspace it needs, in the
 * order above.  The math type is CUDNN_DEFAULT_MATH whatever the
 * descriptor's, as cuDNN lists its algorithms (which may then run TF32 on
 * FLOAT data: the caller sets the math it wants before running one). */
#define PERF(fn, perf_t, kind, ...)                                                  \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, const int requestedAlgoCount, \
                            int *returnedAlgoCount, perf_t *perfResults)             \
    {                                                                                \
        if (!handle || !returnedAlgoCount || !perfResults || requestedAlgoCount < 1) \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        if (st)                                                                      \
            return st;                                                               \
        listed l[NALGOS];                                                            \
        int n = list_algos(kind, &pb, l);                                            \
        if (n > requestedAlgoCount)                                                  \
            n = requestedAlgoCount;                                                  \
        for (int i = 0; i < n; i++) {                                                \
            memset(&perfResults[i], 0, sizeof perfResults[i]);                       \
            perfResults[i].algo = l[i].algo;                                         \
            perfResults[i].status = l[i].status;                                     \
            perfResults[i].time = -1;                                                \
            perfResults[i].memory = l[i].memory;                                     \
            perfResults[i].determinism = l[i].det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC; \
            perfResults[i].mathType = CUDNN_DEFAULT_MATH;                            \
        }                                                                            \
        *returnedAlgoCount = n;                                                      \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
#define PROBLEM {.x = *srcDesc, .y = *destDesc, .w = *filterDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionForwardAlgorithm_v7, cudnnConvolutionFwdAlgoPerf_t, FWD,
     const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc)
#undef PROBLEM
#define PROBLEM {.x = *gradDesc, .y = *diffDesc, .w = *filterDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnConvolutionBwdDataAlgoPerf_t, BWD_DATA,
     const cudnnFilterDescriptor_t filterDesc, const cudnnTensorDescriptor_t diffDesc,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t gradDesc)
#undef PROBLEM
#define PROBLEM {.x = *srcDesc, .y = *diffDesc, .w = *gradDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnConvolutionBwdFilterAlgoPerf_t, BWD_FILTER,
     const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc)
#undef PROBLEM

static size_t tensor_bytes(const struct cudnnTensorStruct *t)
{
    size_t last = (size_t)(t->n - 1) * t->ns + (size_t)(t->c - 1) * t->cs +
                  (size_t)(t->h - 1) * t->hs + (size_t)(t->w - 1) * t->ws + 1;
    return last * fk_type_size(cuda_type(t->type));
}

static size_t filter_bytes(const struct cudnnFilterStruct *f)
{
    return (size_t)f->k * f->c * f->r * f->s * fk_type_size(cuda_type(f->type));
}

/* GNC_FAKECUDA_NONDET_FASTEST=1: the non-deterministic algorithms time
 * fastest (a find lists them first, as cuDNN sorts its results by time), so
 * that a caller who must keep to deterministic ones (--deterministic) is seen
 * to skip them. */
static void nondet_first(listed *l, int n)
{
    const char *v = getenv("GNC_FAKECUDA_NONDET_FASTEST");
    if (!v || strcmp(v, "1") != 0)
        return;
    listed t[NALGOS];
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if ((pass == 0) == (l[i].det == 0 && l[i].status == CUDNN_STATUS_SUCCESS))
                t[k++] = l[i];
    memcpy(l, t, (size_t)n * sizeof *l);
}

/* cudnnFind*AlgorithmEx: cuDNN's own timing, which runs each algorithm on the
 * caller's buffers and workspace (so they must lie in the handle's device's
 * memory); here the checks and the same list as the heuristic's, "timed" at
 * 0.1 ms, 0.2 ms, ... in its order (no timing means anything on the host).
 * An algorithm that needs more workspace than the call gives is listed with
 * CUDNN_STATUS_ALLOC_FAILED, as the perf struct's documentation says ("if
 * ... the provided workspace is insufficient"), and no time.  Running the
 * algorithms sets the handle up: a capture may follow.  Not modelled: the
 * real function leaves arbitrary values in the output buffer. */
#define FIND(fn, perf_t, kind, xp, wp, yp, ...)                                      \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, const int requestedAlgoCount, \
                            int *returnedAlgoCount, perf_t *perfResults, void *workSpace, \
                            size_t workSpaceSizeInBytes)                             \
    {                                                                                \
        if (!handle || !returnedAlgoCount || !perfResults || requestedAlgoCount < 1) \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        if (st)                                                                      \
            return st;                                                               \
        if (fk_check_range(handle->dev, xp, tensor_bytes(&pb.x), #fn, "x") ||        \
            fk_check_range(handle->dev, wp, filter_bytes(&pb.w), #fn, "w") ||        \
            fk_check_range(handle->dev, yp, tensor_bytes(&pb.y), #fn, "y") ||        \
            (workSpaceSizeInBytes &&                                                 \
             fk_check_range(handle->dev, workSpace, workSpaceSizeInBytes, #fn, "workspace"))) \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        listed l[NALGOS];                                                            \
        int n = list_algos(kind, &pb, l);                                            \
        nondet_first(l, n);                                                          \
        if (n > requestedAlgoCount)                                                  \
            n = requestedAlgoCount;                                                  \
        for (int i = 0; i < n; i++) {                                                \
            if (l[i].status == CUDNN_STATUS_SUCCESS && l[i].memory > workSpaceSizeInBytes) \
                l[i].status = CUDNN_STATUS_ALLOC_FAILED;                             \
            memset(&perfResults[i], 0, sizeof perfResults[i]);                       \
            perfResults[i].algo = l[i].algo;                                         \
            perfResults[i].status = l[i].status;                                     \
            perfResults[i].time = l[i].status ? -1.0f : 0.1f * (float)(i + 1);       \
            perfResults[i].memory = l[i].memory;                                     \
            perfResults[i].determinism = l[i].det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC; \
            perfResults[i].mathType = CUDNN_DEFAULT_MATH;                            \
        }                                                                            \
        *returnedAlgoCount = n;                                                      \
        __atomic_fetch_add(&ran_finds, 1, __ATOMIC_RELAXED);                         \
        handle->warm |= !fk_stream_capture((CUstream)handle->stream);                \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
#define PROBLEM {.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionForwardAlgorithmEx, cudnnConvolutionFwdAlgoPerf_t, FWD, x, w, y,
     const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnFilterDescriptor_t wDesc,
     const void *w, const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
     void *y)
#undef PROBLEM
#define PROBLEM {.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionBackwardDataAlgorithmEx, cudnnConvolutionBwdDataAlgoPerf_t, BWD_DATA, dx,
     w, dy, const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnTensorDescriptor_t dyDesc,
     const void *dy, const cudnnConvolutionDescriptor_t convDesc,
     const cudnnTensorDescriptor_t dxDesc, void *dx)
#undef PROBLEM
#define PROBLEM {.x = *xDesc, .y = *dyDesc, .w = *dwDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionBackwardFilterAlgorithmEx, cudnnConvolutionBwdFilterAlgoPerf_t, BWD_FILTER,
     x, dw, y, const cudnnTensorDescriptor_t xDesc, const void *x,
     const cudnnTensorDescriptor_t dyDesc, const void *y,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void *dw)
#undef PROBLEM

/* Workspace sizes: what algo needs (algo_need), after the same checks;
 * CUDNN_STATUS_NOT_SUPPORTED for an algorithm that does not run the problem. */
#define WS(fn, algo_t, kind, ...)                                                    \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, algo_t algo, size_t *sizeInBytes) \
    {                                                                                \
        if (!handle || !sizeInBytes)                                                 \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        if (st)                                                                      \
            return st;                                                               \
        int det;                                                                     \
        const char *why;                                                             \
        size_t need = 0;                                                             \
        st = algo_need(kind, (int)algo, &pb, &need, &det, &why);                     \
        if (st == CUDNN_STATUS_NOT_SUPPORTED)                                        \
            return not_supported(#fn, why);                                          \
        if (st)                                                                      \
            return bad(#fn, why);                                                    \
        *sizeInBytes = need;                                                         \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
#define PROBLEM {.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc}
WS(cudnnGetConvolutionForwardWorkspaceSize, cudnnConvolutionFwdAlgo_t, FWD,
   const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc)
#undef PROBLEM
#define PROBLEM {.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc}
WS(cudnnGetConvolutionBackwardDataWorkspaceSize, cudnnConvolutionBwdDataAlgo_t, BWD_DATA,
   const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc)
#undef PROBLEM
#define PROBLEM {.x = *xDesc, .y = *dyDesc, .w = *gradDesc, .cv = *convDesc}
WS(cudnnGetConvolutionBackwardFilterWorkspaceSize, cudnnConvolutionBwdFilterAlgo_t, BWD_FILTER,
   const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc)
#undef PROBLEM

/* ---------------------------------------------------------------- running */

typedef struct {
    problem pb;
    int kind;
    int algo;
    int dev;
    float alpha, beta;      /* the fused forward: alpha1, alpha2 */
    const void *x, *w, *y;  /* inputs: x, w, dy (or z) */
    void *out;              /* y, dx or dw */
    int fused, relu;
    struct cudnnTensorStruct z, bias;
    const void *zp, *biasp;
} conv;

static int operands_ok(const conv *cv, const char *who)
{
    const problem *pb = &cv->pb;
    const void *xp = cv->kind == BWD_DATA ? cv->out : cv->x;
    const void *wp = cv->kind == BWD_FILTER ? cv->out : cv->w;
    const void *yp = cv->kind == FWD ? cv->out : cv->y;
    if (fk_check_range(cv->dev, xp, tensor_bytes(&pb->x), who, cv->kind == BWD_DATA ? "dx" : "x") ||
        fk_check_range(cv->dev, wp, filter_bytes(&pb->w), who, cv->kind == BWD_FILTER ? "dw" : "w") ||
        fk_check_range(cv->dev, yp, tensor_bytes(&pb->y), who, cv->kind == FWD ? "y" : "dy"))
        return 0;
    if (cv->fused && (fk_check_range(cv->dev, cv->zp, tensor_bytes(&cv->z), who, "z") ||
                      fk_check_range(cv->dev, cv->biasp, tensor_bytes(&cv->bias), who, "bias")))
        return 0;
    return 1;
}

static double io_load(const void *base, int64_t i, int type)
{
    return fk_load(base, i, (cudaDataType)type);
}

static void io_store(void *base, int64_t i, int type, double v)
{
    fk_store(base, i, (cudaDataType)type, v);
}

static void strides(const struct cudnnTensorStruct *t, int64_t *s)
{
    s[0] = t->ns, s[1] = t->cs, s[2] = t->hs, s[3] = t->ws;
}

static int layout_transposes(const conv *cv)
{
    const problem *pb = &cv->pb;
    int tensor_cores = pb->x.type != CUDNN_DATA_FLOAT || pb->cv.math != CUDNN_FMA_MATH;
    if (!tensor_cores || (cv->kind == FWD && pb->x.c == 1))
        return 0;
    return !channels_last(&pb->x) + !pb->w.krsc + !channels_last(&pb->y);
}

__attribute__((destructor)) static void fake_cudnn_unload(void)
{
    const char *path = getenv("GNC_FAKECUDA_STATS");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "cudnn.convolutions %ld\ncudnn.layout_transposes %ld\ncudnn.finds %ld\n",
            __atomic_load_n(&ran_convs, __ATOMIC_RELAXED),
            __atomic_load_n(&ran_transposes, __ATOMIC_RELAXED),
            __atomic_load_n(&ran_finds, __ATOMIC_RELAXED));
    fclose(f);
}

static int conv_run(void *ctx, void **state, char *why, size_t whylen)
{
    (void)state;
    const conv *cv = ctx;
    const problem *pb = &cv->pb;
    if (!operands_ok(cv, "running a cuDNN convolution")) {
        snprintf(why, whylen, "an operand's memory was freed before the convolution ran");
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    __atomic_fetch_add(&ran_convs, 1, __ATOMIC_RELAXED); /* devices' streams may run at once */
    __atomic_fetch_add(&ran_transposes, layout_transposes(cv), __ATOMIC_RELAXED);
    const struct cudnnTensorStruct *X = &pb->x, *Y = &pb->y;
    const struct cudnnFilterStruct *W = &pb->w;
    const struct cudnnConvolutionStruct *C = &pb->cv;
    cudaDataType t = cuda_type(X->type);
    fkref_conv r = {
        .kind = cv->kind == FWD ? FKREF_FORWARD : cv->kind == BWD_DATA ? FKREF_BACKWARD_DATA
                                                                       : FKREF_BACKWARD_FILTER,
        .n = X->n, .c = X->c, .h = X->h, .w = X->w, .k = W->k, .r = W->r, .s = W->s,
        .p = pb->p, .q = pb->q, .groups = C->groups,
        .pad = {C->pad[0], C->pad[1]}, .stride = {C->stride[0], C->stride[1]},
        .dilation = {C->dilation[0], C->dilation[1]},
        .krsc = W->krsc, .type = t,
        /* every math but CUDNN_FMA_MATH may run FLOAT data on TF32 tensor
           cores (sm_80 and newer), DEFAULT_MATH included */
        .tf32 = C->math != CUDNN_FMA_MATH && t == CUDA_R_32F,
        .x = cv->x, .wt = cv->w, .y = cv->kind == FWD ? NULL : cv->y, .out = cv->out,
        .alpha = cv->alpha, .beta = cv->beta};
    strides(X, r.xs);
    strides(Y, r.ys);
    if (cv->fused) {
        /* act(alpha1 conv + alpha2 z + bias) */
        r.z = cv->zp;
        strides(&cv->z, r.zs);
        r.bias = cv->biasp;
        r.bias_stride = cv->bias.cs;
        r.relu = cv->relu;
    } else if (cv->beta != 0) {
        /* alpha conv + beta out: the output's old values */
        r.z = cv->out;
        if (cv->kind == BWD_DATA)
            strides(X, r.zs);
        else
            strides(Y, r.zs);
    }
    if (fkref_conv_run(&r, &(fkref_io){io_load, io_store})) {
        snprintf(why, whylen, "out of host memory");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return 0;
}

static cudnnStatus_t issue(cudnnHandle_t handle, conv *cv, const char *who, void *ws, size_t wsbytes)
{
    cudnnStatus_t st = check(who, &cv->pb, 1);
    if (st) {
        free(cv);
        return st;
    }
    cv->dev = handle->dev;
    if (fk_stream_check((CUstream)handle->stream) != CUDA_SUCCESS ||
        fk_stream_device((CUstream)handle->stream) != handle->dev) {
        fprintf(stderr, "fakecuda: %s: the handle's stream is not a live stream of the current "
                "context (device %d), or the device failed\n", who, handle->dev);
        free(cv);
        return CUDNN_STATUS_EXECUTION_FAILED;
    }
    /* the algorithm must run the problem (what cudnnGet*WorkspaceSize says of
       it), within the workspace given: cuDNN documents no status for a
       workspace too small, BAD_PARAM is the one for arguments that do not fit */
    size_t need = 0;
    int det;
    const char *why;
    st = algo_need(cv->kind, cv->algo, &cv->pb, &need, &det, &why);
    if (st) {
        char msg[200];
        snprintf(msg, sizeof msg, "algorithm %d: %s", cv->algo, why);
        free(cv);
        return st == CUDNN_STATUS_NOT_SUPPORTED ? not_supported(who, msg) : bad(who, msg);
    }
    if (wsbytes < need) {
        fprintf(stderr, "fakecuda: %s: %zu bytes of workspace, algorithm %d needs %zu (%s)\n", who,
                wsbytes, cv->algo, need,
                cv->kind == FWD ? "cudnnGetConvolutionForwardWorkspaceSize"
                : cv->kind == BWD_DATA ? "cudnnGetConvolutionBackwardDataWorkspaceSize"
                                       : "cudnnGetConvolutionBackwardFilterWorkspaceSize");
        free(cv);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!operands_ok(cv, who) || (wsbytes && fk_check_range(cv->dev, ws, wsbytes, who, "workspace"))) {
        free(cv);
        return CUDNN_STATUS_BAD_PARAM;
    }
    /* the handle's first convolution sets cuDNN up (loads its engines'
       kernels, allocates), which a stream capture cannot hold: refused, and
       the capture invalidated, as the setup's synchronizing calls would */
    int capturing = fk_stream_capture((CUstream)handle->stream) != 0;
    if (!handle->warm && capturing) {
        fprintf(stderr, "fakecuda: %s: not supported: the handle's first convolution is inside a "
                "stream capture, where cuDNN's setup (loading kernels, allocating) cannot run; "
                "issue one outside the capture first\n", who);
        fk_capture_refuse((CUstream)handle->stream);
        free(cv);
        return CUDNN_STATUS_NOT_SUPPORTED;
    }
    fk_task *t = fk_task_new(who, conv_run, NULL, cv, free, NULL);
    fk_task_cost(t, cv->pb.w.krsc ? FK_COST_LIBRARY_NHWC : FK_COST_LIBRARY);
    if (fk_enqueue((CUstream)handle->stream, t))
        return CUDNN_STATUS_EXECUTION_FAILED;
    handle->warm |= !capturing;
    return CUDNN_STATUS_SUCCESS;
}

static conv *conv_new(int kind, int algo, const void *alpha, const void *beta)
{
    conv *cv = calloc(1, sizeof *cv);
    if (!cv)
        return NULL;
    cv->kind = kind;
    cv->algo = algo;
    memcpy(&cv->alpha, alpha, 4);
    memcpy(&cv->beta, beta, 4);
    return cv;
}

EXPORT cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnFilterDescriptor_t wDesc, const void *w,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnTensorDescriptor_t yDesc, void *y)
{
    FK_API;
    if (!handle || !alpha || !beta || !xDesc || !wDesc || !convDesc || !yDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(FWD, (int)algo, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc};
    cv->x = x, cv->w = w, cv->out = y;
    return issue(handle, cv, kind_name[FWD], workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                  const cudnnFilterDescriptor_t wDesc, const void *w,
                                                  const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                  const cudnnConvolutionDescriptor_t convDesc,
                                                  cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                  size_t workSpaceSizeInBytes, const void *beta,
                                                  const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    FK_API;
    if (!handle || !alpha || !beta || !dxDesc || !wDesc || !convDesc || !dyDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(BWD_DATA, (int)algo, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc};
    cv->w = w, cv->y = dy, cv->out = dx;
    return issue(handle, cv, kind_name[BWD_DATA], workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                    const cudnnTensorDescriptor_t xDesc, const void *x,
                                                    const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                    const cudnnConvolutionDescriptor_t convDesc,
                                                    cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                    size_t workSpaceSizeInBytes, const void *beta,
                                                    const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    FK_API;
    if (!handle || !alpha || !beta || !xDesc || !dwDesc || !convDesc || !dyDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(BWD_FILTER, (int)algo, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *xDesc, .y = *dyDesc, .w = *dwDesc, .cv = *convDesc};
    cv->x = x, cv->y = dy, cv->out = dw;
    return issue(handle, cv, kind_name[BWD_FILTER], workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc,
    const void *bias, const cudnnActivationDescriptor_t activationDesc,
    const cudnnTensorDescriptor_t yDesc, void *y)
{
    FK_API;
    const char *who = "cudnnConvolutionBiasActivationForward";
    if (!handle || !alpha1 || !alpha2 || !xDesc || !wDesc || !convDesc || !zDesc || !biasDesc ||
        !activationDesc || !yDesc || !activationDesc->set || !zDesc->set || !biasDesc->set)
        return CUDNN_STATUS_BAD_PARAM;
    if (activationDesc->mode != CUDNN_ACTIVATION_RELU &&
        activationDesc->mode != CUDNN_ACTIVATION_IDENTITY)
        return not_supported(who, "an activation other than RELU and IDENTITY");
    if (activationDesc->mode == CUDNN_ACTIVATION_IDENTITY &&
        algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        return not_supported(who, "IDENTITY activation needs "
                             "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM");
    if (xDesc->type == CUDNN_DATA_BFLOAT16 || wDesc->type == CUDNN_DATA_BFLOAT16 ||
        yDesc->type == CUDNN_DATA_BFLOAT16 || zDesc->type == CUDNN_DATA_BFLOAT16 ||
        biasDesc->type == CUDNN_DATA_BFLOAT16)
        return not_supported(who, "BFLOAT16 data (its configurations are FLOAT and HALF)");
    if (channels_last(xDesc) || channels_last(yDesc) || channels_last(zDesc) || wDesc->krsc)
        return not_supported(who, "an NHWC tensor or KRSC filter (NCHW only)");
    if (zDesc->n != yDesc->n || zDesc->c != yDesc->c || zDesc->h != yDesc->h ||
        zDesc->w != yDesc->w || zDesc->type != yDesc->type)
        return bad(who, "z is not shaped like y");
    if (biasDesc->n != 1 || biasDesc->c != yDesc->c || biasDesc->h != 1 || biasDesc->w != 1 ||
        biasDesc->type != yDesc->type)
        return bad(who, "bias is not 1xKx1x1 of y's type");
    conv *cv = conv_new(FWD, (int)algo, alpha1, alpha2);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc};
    cv->x = x, cv->w = w, cv->out = y;
    cv->fused = 1;
    cv->relu = activationDesc->mode == CUDNN_ACTIVATION_RELU;
    cv->z = *zDesc, cv->bias = *biasDesc;
    cv->zp = z, cv->biasp = bias;
    return issue(handle, cv, who, workSpace, workSpaceSizeInBytes);
}
