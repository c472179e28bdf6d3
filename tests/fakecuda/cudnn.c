/* The fake cuDNN (libcudnn.so.9), its legacy convolution API: forward,
 * backward data, backward filter and the fused bias-activation forward, on
 * host memory, queued on the handle's stream like kernels (fake.h).
 *
 * Models: 4-d tensors (NCHW, NHWC, or any strides through
 * cudnnSetTensor4dDescriptorEx), NCHW (KCRS) and NHWC (KRSC) filters, 2-d
 * cross-correlation
 * with padding, strides, dilation and groups, compute type FLOAT, data FLOAT,
 * HALF or BFLOAT16 (all operands alike), y = alpha op + beta y with host
 * alpha and beta, sums in double rounded once to the data type;
 * CUDNN_TENSOR_OP_MATH on FLOAT data rounds operands to TF32 (as
 * tests/cg_host.c does).  Checked as cuDNN checks (CUDNN_STATUS_BAD_PARAM):
 * the filter's C times groups is x's C, K divides by groups, y's dims are the
 * convolution's output dims, types agree, bias is 1xKx1x1, z is shaped like
 * y.  cudnnConvolutionBiasActivationForward refuses (NOT_SUPPORTED, with a
 * line on stderr) what the real one is not documented to run: an activation
 * other than RELU and IDENTITY, IDENTITY with an algorithm other than
 * CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, BFLOAT16 data (its
 * configurations are FLOAT and HALF), channels-last tensors or KRSC filters
 * (NCHW only).  The handle belongs to the device current at cudnnCreate; its
 * stream must be of that device.
 *
 * A call on a KRSC filter costs GNC_FAKECUDA_NHWC_MS on the device's clock
 * (default: GNC_FAKECUDA_LIBRARY_MS, as the others), so a test can make
 * --conv auto choose the channels-last way.
 *
 * Not modelled: true convolution (flipped), 3-d, other compute types,
 * algorithm differences (every algorithm computes the same, needs no
 * workspace), TF32 under CUDNN_DEFAULT_MATH (the real library may use it). */
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define EXPORT __attribute__((visibility("default")))

struct cudnnContext {
    int dev;
    cudaStream_t stream;
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
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
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
    if (format == CUDNN_TENSOR_NHWC)
        return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, h * w * c, 1, w * c, c);
    if (format != CUDNN_TENSOR_NCHW)
        return CUDNN_STATUS_NOT_SUPPORTED; /* not modelled */
    return cudnnSetTensor4dDescriptorEx(t, dataType, n, c, h, w, c * h * w, h * w, w, 1);
}

EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t f, cudnnDataType_t dataType,
                                                cudnnTensorFormat_t format, int k, int c, int h, int w)
{
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
    if (!c || groupCount < 1)
        return CUDNN_STATUS_BAD_PARAM;
    c->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t c, cudnnMathType_t mathType)
{
    if (!c || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    c->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t a,
                                                  cudnnActivationMode_t mode,
                                                  cudnnNanPropagation_t reluNanOpt, double coef)
{
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
    if (!convDesc || !inputTensorDesc || !filterDesc || !n || !c || !h || !w)
        return CUDNN_STATUS_BAD_PARAM;
    problem pb = {.x = *inputTensorDesc, .w = *filterDesc, .cv = *convDesc};
    cudnnStatus_t st = check("cudnnGetConvolution2dForwardOutputDim", &pb, 0);
    if (st)
        return st;
    *n = pb.x.n, *c = pb.w.k, *h = pb.p, *w = pb.q;
    return CUDNN_STATUS_SUCCESS;
}

/* The algorithm lists: one entry, the algorithm gnc asks for first. */
#define PERF(fn, perf_t, algo_v, ...)                                                \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, const int requestedAlgoCount, \
                            int *returnedAlgoCount, perf_t *perfResults)             \
    {                                                                                \
        if (!handle || !returnedAlgoCount || !perfResults || requestedAlgoCount < 1) \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        if (st)                                                                      \
            return st;                                                               \
        memset(perfResults, 0, sizeof *perfResults);                                 \
        perfResults[0].algo = algo_v;                                                \
        perfResults[0].status = CUDNN_STATUS_SUCCESS;                                \
        perfResults[0].memory = 0;                                                   \
        perfResults[0].determinism = CUDNN_DETERMINISTIC;                            \
        perfResults[0].mathType = convDesc->math;                                    \
        *returnedAlgoCount = 1;                                                      \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
#define PROBLEM {.x = *srcDesc, .y = *destDesc, .w = *filterDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionForwardAlgorithm_v7, cudnnConvolutionFwdAlgoPerf_t,
     CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, const cudnnTensorDescriptor_t srcDesc,
     const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
     const cudnnTensorDescriptor_t destDesc)
#undef PROBLEM
#define PROBLEM {.x = *gradDesc, .y = *diffDesc, .w = *filterDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnConvolutionBwdDataAlgoPerf_t,
     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, const cudnnFilterDescriptor_t filterDesc,
     const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
     const cudnnTensorDescriptor_t gradDesc)
#undef PROBLEM
#define PROBLEM {.x = *srcDesc, .y = *diffDesc, .w = *gradDesc, .cv = *convDesc}
PERF(cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnConvolutionBwdFilterAlgoPerf_t,
     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, const cudnnTensorDescriptor_t srcDesc,
     const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
     const cudnnFilterDescriptor_t gradDesc)
#undef PROBLEM

/* cudnnFind*AlgorithmEx: cuDNN's own timing, which runs each algorithm on the
 * caller's buffers; here the checks and the same one-entry list, "timed" at
 * 0.1 ms (no timing means anything on the host). */
#define FIND(fn, perf_t, algo_v, ...)                                                \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, const int requestedAlgoCount, \
                            int *returnedAlgoCount, perf_t *perfResults, void *workSpace, \
                            size_t workSpaceSizeInBytes)                             \
    {                                                                                \
        (void)workSpace, (void)workSpaceSizeInBytes;                                 \
        if (!handle || !returnedAlgoCount || !perfResults || requestedAlgoCount < 1) \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        if (st)                                                                      \
            return st;                                                               \
        memset(perfResults, 0, sizeof *perfResults);                                 \
        perfResults[0].algo = algo_v;                                                \
        perfResults[0].status = CUDNN_STATUS_SUCCESS;                                \
        perfResults[0].time = 0.1f;                                                  \
        perfResults[0].determinism = CUDNN_DETERMINISTIC;                            \
        perfResults[0].mathType = convDesc->math;                                    \
        *returnedAlgoCount = 1;                                                      \
        return CUDNN_STATUS_SUCCESS;                                                 \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter" /* the buffers: nothing runs */
#define PROBLEM {.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionForwardAlgorithmEx, cudnnConvolutionFwdAlgoPerf_t,
     CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, const cudnnTensorDescriptor_t xDesc,
     const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, void *y)
#undef PROBLEM
#define PROBLEM {.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionBackwardDataAlgorithmEx, cudnnConvolutionBwdDataAlgoPerf_t,
     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, const cudnnFilterDescriptor_t wDesc, const void *w,
     const cudnnTensorDescriptor_t dyDesc, const void *dy,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void *dx)
#undef PROBLEM
#define PROBLEM {.x = *xDesc, .y = *dyDesc, .w = *dwDesc, .cv = *convDesc}
FIND(cudnnFindConvolutionBackwardFilterAlgorithmEx, cudnnConvolutionBwdFilterAlgoPerf_t,
     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, const cudnnTensorDescriptor_t xDesc, const void *x,
     const cudnnTensorDescriptor_t dyDesc, const void *y,
     const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void *dw)
#undef PROBLEM
#pragma GCC diagnostic pop

/* Workspace sizes: none needed, after the same checks. */
#define WS(fn, algo_t, ...)                                                          \
    EXPORT cudnnStatus_t fn(cudnnHandle_t handle, __VA_ARGS__, algo_t algo, size_t *sizeInBytes) \
    {                                                                                \
        (void)algo;                                                                  \
        if (!handle || !sizeInBytes)                                                 \
            return CUDNN_STATUS_BAD_PARAM;                                           \
        problem pb = PROBLEM;                                                        \
        cudnnStatus_t st = check(#fn, &pb, 1);                                       \
        *sizeInBytes = 0;                                                            \
        return st;                                                                   \
    }
#define PROBLEM {.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc}
WS(cudnnGetConvolutionForwardWorkspaceSize, cudnnConvolutionFwdAlgo_t,
   const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc)
#undef PROBLEM
#define PROBLEM {.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc}
WS(cudnnGetConvolutionBackwardDataWorkspaceSize, cudnnConvolutionBwdDataAlgo_t,
   const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc)
#undef PROBLEM
#define PROBLEM {.x = *xDesc, .y = *dyDesc, .w = *gradDesc, .cv = *convDesc}
WS(cudnnGetConvolutionBackwardFilterWorkspaceSize, cudnnConvolutionBwdFilterAlgo_t,
   const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
   const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc)
#undef PROBLEM

/* ---------------------------------------------------------------- running */

enum { FWD, BWD_DATA, BWD_FILTER };

typedef struct {
    problem pb;
    int kind;
    int dev;
    float alpha, beta;      /* the fused forward: alpha1, alpha2 */
    const void *x, *w, *y;  /* inputs: x, w, dy (or z) */
    void *out;              /* y, dx or dw */
    int fused, relu;
    struct cudnnTensorStruct z, bias;
    const void *zp, *biasp;
} conv;

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

static int64_t at(const struct cudnnTensorStruct *t, int64_t n, int64_t c, int64_t h, int64_t w)
{
    return n * t->ns + c * t->cs + h * t->hs + w * t->ws;
}

/* Where the filter's element i in KCRS order lies. */
static int64_t w_at(const struct cudnnFilterStruct *f, int64_t i)
{
    if (!f->krsc)
        return i;
    int64_t rs = (int64_t)f->r * f->s, k = i / (f->c * rs), c = i / rs % f->c;
    return (k * rs + i % rs) * f->c + c;
}

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

static double tf32(double v)
{
    float f = (float)v;
    unsigned u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
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
    const struct cudnnTensorStruct *X = &pb->x, *Y = &pb->y;
    const struct cudnnFilterStruct *W = &pb->w;
    const struct cudnnConvolutionStruct *C = &pb->cv;
    cudaDataType t = cuda_type(X->type);
    int t32 = C->math == CUDNN_TENSOR_OP_MATH && t == CUDA_R_32F;
    const int64_t cg = W->c, kg = W->k / C->groups;
    const void *xp = cv->kind == BWD_DATA ? cv->out : cv->x;
    const void *wp = cv->kind == BWD_FILTER ? cv->out : cv->w;
    const void *yp = cv->kind == FWD ? cv->out : cv->y;
    int64_t nx = (int64_t)X->n * X->c * X->h * X->w, ny = (int64_t)Y->n * Y->c * Y->h * Y->w;
    int64_t nw = (int64_t)W->k * W->c * W->r * W->s;
    int64_t nacc = cv->kind == FWD ? ny : cv->kind == BWD_DATA ? nx : nw;
    double *acc = calloc((size_t)nacc + 1, sizeof *acc);
    if (!acc) {
        snprintf(why, whylen, "out of host memory");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    /* the inputs as contiguous doubles (x and dy in NCHW order, whatever their
     * strides), rounded to TF32 where asked: the loops then run over plain arrays */
    double *dx_ = cv->kind == BWD_DATA ? NULL : malloc((size_t)nx * sizeof(double));
    double *dw_ = cv->kind == BWD_FILTER ? NULL : malloc((size_t)nw * sizeof(double));
    double *dy_ = cv->kind == FWD ? NULL : malloc((size_t)ny * sizeof(double));
    if ((cv->kind != BWD_DATA && !dx_) || (cv->kind != BWD_FILTER && !dw_) || (cv->kind != FWD && !dy_)) {
        free(acc), free(dx_), free(dw_), free(dy_);
        snprintf(why, whylen, "out of host memory");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
#define RD(P, i) (t32 ? tf32(fk_load(P, i, t)) : fk_load(P, i, t))
    for (int64_t i = 0; dx_ && i < nx; i++)
        dx_[i] = RD(xp, at(X, i / X->w / X->h / X->c, i / X->w / X->h % X->c, i / X->w % X->h, i % X->w));
    for (int64_t i = 0; dw_ && i < nw; i++)
        dw_[i] = RD(wp, w_at(W, i));
    for (int64_t i = 0; dy_ && i < ny; i++)
        dy_[i] = RD(yp, at(Y, i / Y->w / Y->h / Y->c, i / Y->w / Y->h % Y->c, i / Y->w % Y->h, i % Y->w));
#undef RD
    for (int64_t n = 0; n < X->n; n++)
        for (int64_t k = 0; k < W->k; k++)
            for (int64_t p = 0; p < pb->p; p++)
                for (int64_t q = 0; q < pb->q; q++) {
                    int64_t g = k / kg, iy = (((n * W->k) + k) * pb->p + p) * pb->q + q;
                    double dy = cv->kind == FWD ? 0 : dy_[iy], s = 0;
                    for (int64_t ch = 0; ch < cg; ch++)
                        for (int64_t r = 0; r < W->r; r++) {
                            int64_t yy = p * C->stride[0] - C->pad[0] + r * C->dilation[0];
                            if (yy < 0 || yy >= X->h)
                                continue;
                            int64_t xrow = ((n * X->c + g * cg + ch) * X->h + yy) * X->w;
                            int64_t wrow = ((k * cg + ch) * W->r + r) * W->s;
                            for (int64_t sx = 0; sx < W->s; sx++) {
                                int64_t xx = q * C->stride[1] - C->pad[1] + sx * C->dilation[1];
                                if (xx < 0 || xx >= X->w)
                                    continue;
                                if (cv->kind == FWD)
                                    s += dx_[xrow + xx] * dw_[wrow + sx];
                                else if (cv->kind == BWD_DATA)
                                    acc[xrow + xx] += dy * dw_[wrow + sx];
                                else
                                    acc[wrow + sx] += dy * dx_[xrow + xx];
                            }
                        }
                    if (cv->kind == FWD)
                        acc[iy] = s;
                }
    free(dx_), free(dw_), free(dy_);
    /* out = alpha acc + beta out, or the fused forward's act(alpha1 acc + alpha2 z + bias);
     * every value is read before any is written (z may be y) */
    double *res = calloc((size_t)nacc + 1, sizeof *res);
    if (!res) {
        free(acc);
        snprintf(why, whylen, "out of host memory");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    for (int64_t i = 0; i < nacc; i++) {
        int64_t o = w_at(W, i);
        if (cv->kind != BWD_FILTER) {
            const struct cudnnTensorStruct *T = cv->kind == FWD ? Y : X;
            int64_t w_ = i % T->w, h_ = i / T->w % T->h, c_ = i / T->w / T->h % T->c;
            int64_t n_ = i / T->w / T->h / T->c;
            o = at(T, n_, c_, h_, w_);
            if (cv->fused) {
                double v = cv->alpha * acc[i] + cv->beta * fk_load(cv->zp, at(&cv->z, n_, c_, h_, w_), t) +
                           fk_load(cv->biasp, at(&cv->bias, 0, c_, 0, 0), t);
                res[i] = cv->relu && !(v > 0) ? 0 : v;
                continue;
            }
        }
        res[i] = cv->alpha * acc[i] + (cv->beta != 0 ? cv->beta * fk_load(cv->out, o, t) : 0);
    }
    for (int64_t i = 0; i < nacc; i++) {
        int64_t o = w_at(W, i);
        if (cv->kind != BWD_FILTER) {
            const struct cudnnTensorStruct *T = cv->kind == FWD ? Y : X;
            o = at(T, i / T->w / T->h / T->c, i / T->w / T->h % T->c, i / T->w % T->h, i % T->w);
        }
        fk_store(cv->out, o, t, res[i]);
    }
    free(acc);
    free(res);
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
    if (!operands_ok(cv, who) || (wsbytes && fk_check_range(cv->dev, ws, wsbytes, who, "workspace"))) {
        free(cv);
        return CUDNN_STATUS_BAD_PARAM;
    }
    fk_task *t = fk_task_new(who, conv_run, NULL, cv, free, NULL);
    fk_task_cost(t, cv->pb.w.krsc ? FK_COST_LIBRARY_NHWC : FK_COST_LIBRARY);
    return fk_enqueue((CUstream)handle->stream, t) ? CUDNN_STATUS_EXECUTION_FAILED : CUDNN_STATUS_SUCCESS;
}

static conv *conv_new(int kind, const void *alpha, const void *beta)
{
    conv *cv = calloc(1, sizeof *cv);
    if (!cv)
        return NULL;
    cv->kind = kind;
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
    (void)algo;
    if (!handle || !alpha || !beta || !xDesc || !wDesc || !convDesc || !yDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(FWD, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *xDesc, .y = *yDesc, .w = *wDesc, .cv = *convDesc};
    cv->x = x, cv->w = w, cv->out = y;
    return issue(handle, cv, "cudnnConvolutionForward", workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                  const cudnnFilterDescriptor_t wDesc, const void *w,
                                                  const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                  const cudnnConvolutionDescriptor_t convDesc,
                                                  cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                  size_t workSpaceSizeInBytes, const void *beta,
                                                  const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    (void)algo;
    if (!handle || !alpha || !beta || !dxDesc || !wDesc || !convDesc || !dyDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(BWD_DATA, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *dxDesc, .y = *dyDesc, .w = *wDesc, .cv = *convDesc};
    cv->w = w, cv->y = dy, cv->out = dx;
    return issue(handle, cv, "cudnnConvolutionBackwardData", workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                    const cudnnTensorDescriptor_t xDesc, const void *x,
                                                    const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                    const cudnnConvolutionDescriptor_t convDesc,
                                                    cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                    size_t workSpaceSizeInBytes, const void *beta,
                                                    const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    (void)algo;
    if (!handle || !alpha || !beta || !xDesc || !dwDesc || !convDesc || !dyDesc)
        return CUDNN_STATUS_BAD_PARAM;
    conv *cv = conv_new(BWD_FILTER, alpha, beta);
    if (!cv)
        return CUDNN_STATUS_ALLOC_FAILED;
    cv->pb = (problem){.x = *xDesc, .y = *dyDesc, .w = *dwDesc, .cv = *convDesc};
    cv->x = x, cv->y = dy, cv->out = dw;
    return issue(handle, cv, "cudnnConvolutionBackwardFilter", workSpace, workSpaceSizeInBytes);
}

EXPORT cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes, const void *alpha2,
    const cudnnTensorDescriptor_t zDesc, const void *z, const cudnnTensorDescriptor_t biasDesc,
    const void *bias, const cudnnActivationDescriptor_t activationDesc,
    const cudnnTensorDescriptor_t yDesc, void *y)
{
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
    conv *cv = conv_new(FWD, alpha1, alpha2);
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
