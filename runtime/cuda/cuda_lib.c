/* The GPU executor's library steps (cuda_internal.h): cuBLASLt matmuls, cuDNN
 * convolutions, NCCL communication.  Each library is opened with dlopen only
 * when the program has a step that needs it, and its entry points are
 * pointers of __typeof__ the toolkit header's prototypes, as for the driver.
 *
 * Everything about a step is decided at open: descriptors, the algorithm (the
 * libraries' heuristics within the step's workspace; never timed, so the same
 * plan makes the same choices on the same GPU and library), the handles and
 * the communicators.  Issuing a step is one library call.  What is decided
 * here and why: docs/runtime.md. */
#ifdef GNC_HAVE_CUDA_DRIVER

#include "cuda_internal.h"

#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XSTR(x) STR(x)
#define STR(x) #x

#define BLAS_FNS(X) X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusString) \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) \
    X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate) \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck) X(cublasLtMatmul)

#define DNN_FNS(X) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnGetErrorString) \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) \
    X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) \
    X(cudnnDestroyConvolutionDescriptor) X(cudnnCreateActivationDescriptor) \
    X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor) \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize) \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
    X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter) \
    X(cudnnConvolutionBiasActivationForward) X(cudnnFindConvolutionForwardAlgorithmEx) \
    X(cudnnFindConvolutionBackwardDataAlgorithmEx) X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
    X(cudnnGetVersion)

/* NCCL 2.7 has them all (ncclSend and ncclRecv are the newest); ncclCommSplit
 * (2.18) is looked up apart, needed only by a program that splits (the
 * collectives of a group of devices, messages across processes). */
#define NCCL_FNS(X) X(ncclGetErrorString) X(ncclGetVersion) X(ncclCommInitAll) \
    X(ncclCommInitRank) X(ncclCommDestroy) X(ncclGroupStart) X(ncclGroupEnd) X(ncclAllReduce) \
    X(ncclAllGather) X(ncclReduceScatter) X(ncclBroadcast) X(ncclSend) X(ncclRecv) \
    X(ncclCommGetAsyncError) X(ncclCommAbort)

#define MEMBER(f) __typeof__(f) *f;

/* A communicator of one group of program devices: comm[i] is group[i]'s. */
typedef struct {
    int n;
    int64_t *group;
    ncclComm_t *comm;
} nccl_group;

struct cuda_libs {
    void *blas_so, *dnn_so, *nccl_so;
    struct { BLAS_FNS(MEMBER) } b;
    struct { DNN_FNS(MEMBER) } n;
    struct { NCCL_FNS(MEMBER) } c;
    __typeof__(ncclCommSplit) *split;  /* NULL: an NCCL older than 2.18 */
    int nccl_version;                   /* ncclGetVersion's: 21805 for 2.18.5 */
    ncclComm_t *world;          /* [ndevices]: rank d is program device d */
    int ngroups;
    nccl_group *groups;         /* the collectives' other groups, split from world */
};

struct cuda_step_lib {
    /* cuBLASLt */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    /* cuDNN */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnActivationDescriptor_t act;
    int algorithm;              /* the cudnnConvolution*Algo_t chosen */
    int fused;                  /* cudnnConvolutionBiasActivationForward */
    int copy_z;                 /* forward with z != y, no fusion: y = z first */
};

/* ---------------------------------------------------------------- loading */

static int load(void **so, void **fns, const char *const *names, int n, const char *libdir,
                const char *soname, const char *what, char *err, size_t errlen)
{
    char path[4096];
    cuda_lib_path(libdir, soname, path, sizeof path);
    *so = cuda_dlopen(path);
    if (!*so)
        return base_fail(err, errlen, "the program needs %s (%s), which does not load: %s", what,
                         path, dlerror());
    for (int i = 0; i < n; i++)
        if (!(fns[i] = dlsym(*so, names[i])))
            return base_fail(err, errlen, "%s (%s) has no %s: older than the one gnc was built "
                             "with", what, path, names[i]);
    return 0;
}

#define NAME(f) XSTR(f),
#define LOAD(lib, FNS, soname, what)                                                     \
    do {                                                                                 \
        static const char *const names[] = {FNS(NAME)};                                  \
        int n_ = (int)(sizeof names / sizeof *names);                                    \
        if (sizeof(lib) != (size_t)n_ * sizeof(void *))                                  \
            return base_fail(err, errlen, "internal: %s table", what);                   \
        if (load(&so_, (void **)&(lib), names, n_, libdir, soname, what, err, errlen))   \
            return -1;                                                                   \
    } while (0)

/* ---------------------------------------------------------------- checks */

#define BLAS(call)                                                                       \
    do {                                                                                 \
        cublasStatus_t st_ = (B->b.call);                                                \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                \
            return base_fail(err, errlen, "%s: %s: %s", what, #call,                     \
                             B->b.cublasLtGetStatusString(st_));                         \
    } while (0)

#define DNN(call)                                                                        \
    do {                                                                                 \
        cudnnStatus_t st_ = (B->n.call);                                                 \
        if (st_ != CUDNN_STATUS_SUCCESS)                                                 \
            return base_fail(err, errlen, "%s: %s: %s", what, #call,                     \
                             B->n.cudnnGetErrorString(st_));                             \
    } while (0)

#define NCCL(call)                                                                       \
    do {                                                                                 \
        ncclResult_t st_ = (B->c.call);                                                  \
        if (st_ != ncclSuccess)                                                          \
            return base_fail(err, errlen, "%s: %s: %s", what, #call,                     \
                             B->c.ncclGetErrorString(st_));                              \
    } while (0)

static cudaDataType_t blas_type(ir_dtype t)
{
    return t == IR_F16 ? CUDA_R_16F : t == IR_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static cudnnDataType_t dnn_type(ir_dtype t)
{
    return t == IR_F16 ? CUDNN_DATA_HALF : t == IR_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static int nccl_type(ir_dtype t, ncclDataType_t *out)
{
    switch (t) {
    case IR_F32: *out = ncclFloat32; return 0;
    case IR_F16: *out = ncclFloat16; return 0;
    case IR_BF16: *out = ncclBfloat16; return 0;
    case IR_I64: *out = ncclInt64; return 0;
    case IR_I32: *out = ncclInt32; return 0;
    default: return -1;
    }
}

/* ---------------------------------------------------------------- cuBLASLt */

static int layout(cuda_libs *B, cublasLtMatrixLayout_t *l, ir_dtype t, int64_t rows,
                  int64_t cols, int64_t ld, int64_t batch, int64_t stride, const char *what,
                  char *err, size_t errlen)
{
    BLAS(cublasLtMatrixLayoutCreate(l, blas_type(t), (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        BLAS(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof count));
        BLAS(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof stride));
    }
    return 0;
}

/* The largest power of two up to 256 that divides the address of every
 * batch entry of an operand at p (the batch advancing by stride elements of
 * t): what the algorithm may assume of its alignment. */
static uint32_t alignment(CUdeviceptr p, int64_t batch, int64_t stride, ir_dtype t)
{
    uint64_t bits = (uint64_t)p;
    if (batch > 1)
        bits |= (uint64_t)stride * (uint64_t)ir_dtype_size(t);
    uint32_t a = 256;
    while (a > 1 && bits % a)
        a /= 2;
    return a;
}

/* The heuristic's preferences for gemm step g of device G: its workspace,
 * and the operands' alignments (the header's default assumes 256 bytes,
 * which a batch entry at an offset of a broadcast matmul may not have). */
static int gemm_preference(cuda_libs *B, const cuda_gpu *G, const cg_gemm *g,
                           cublasLtMatmulPreference_t *pref, const char *what, char *err,
                           size_t errlen)
{
    uint64_t ws = (uint64_t)g->workspace_bytes;
    uint32_t align[4] = {
        alignment(cuda_ptr(G, g->a), g->batch, g->stride_a, g->type_a),
        alignment(cuda_ptr(G, g->b), g->batch, g->stride_b, g->type_b),
        alignment(cuda_ptr(G, g->c), g->batch, g->stride_c, g->type_d),
        alignment(cuda_ptr(G, g->d), g->batch, g->stride_c, g->type_d)};
    static const cublasLtMatmulPreferenceAttributes_t names[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    BLAS(cublasLtMatmulPreferenceCreate(pref));
    cublasStatus_t st = B->b.cublasLtMatmulPreferenceSetAttribute(
        *pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = B->b.cublasLtMatmulPreferenceSetAttribute(*pref, names[i], &align[i],
                                                       sizeof align[i]);
    if (st != CUBLAS_STATUS_SUCCESS) {
        B->b.cublasLtMatmulPreferenceDestroy(*pref);
        return base_fail(err, errlen, "%s: cublasLtMatmulPreferenceSetAttribute: %s", what,
                         B->b.cublasLtGetStatusString(st));
    }
    return 0;
}

static int prepare_gemm(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, char *err,
                        size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_gemm *g = &s->u.gemm;
    const cuda_gpu *G = &x->dev[d];
    const char *what = s->what ? s->what : "a matmul";
    cublasComputeType_t compute = g->compute == CG_COMPUTE_32F_FAST_TF32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    BLAS(cublasLtMatmulDescCreate(&P->op, compute, CUDA_R_32F));
    int32_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    BLAS(cublasLtMatmulDescSetAttribute(P->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    BLAS(cublasLtMatmulDescSetAttribute(P->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    static const cublasLtEpilogue_t epilogues[] = {
        [CG_EPI_DEFAULT] = CUBLASLT_EPILOGUE_DEFAULT, [CG_EPI_RELU] = CUBLASLT_EPILOGUE_RELU,
        [CG_EPI_BIAS] = CUBLASLT_EPILOGUE_BIAS, [CG_EPI_RELU_BIAS] = CUBLASLT_EPILOGUE_RELU_BIAS};
    cublasLtEpilogue_t epi = epilogues[g->epilogue];
    BLAS(cublasLtMatmulDescSetAttribute(P->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (g->epilogue == CG_EPI_BIAS || g->epilogue == CG_EPI_RELU_BIAS) {
        void *bias = (void *)(uintptr_t)cuda_ptr(G, g->bias);
        int32_t bt = blas_type(g->type_bias);
        BLAS(cublasLtMatmulDescSetAttribute(P->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias));
        BLAS(cublasLtMatmulDescSetAttribute(P->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                            sizeof bt));
    }
    if (layout(B, &P->la, g->type_a, g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k, g->lda,
               g->batch, g->stride_a, what, err, errlen) ||
        layout(B, &P->lb, g->type_b, g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n, g->ldb,
               g->batch, g->stride_b, what, err, errlen) ||
        layout(B, &P->lc, g->type_d, g->m, g->n, g->ldc, g->batch, g->stride_c, what, err, errlen))
        return -1;
    if (g->tuned) {
        /* the plan's: checked, as it may come from another GPU or library */
        cublasLtMatmulHeuristicResult_t r;
        memcpy(&P->algo, g->algo, sizeof P->algo);
        cublasStatus_t st = B->b.cublasLtMatmulAlgoCheck(G->blas, P->op, P->la, P->lb, P->lc,
                                                          P->lc, &P->algo, &r);
        if (st != CUBLAS_STATUS_SUCCESS || r.workspaceSize > (size_t)g->workspace_bytes)
            return base_fail(err, errlen, "%s: the plan's autotuned cuBLASLt algorithm does not "
                             "run here (%s): compile it again on this GPU, or without --autotune",
                             what, st != CUBLAS_STATUS_SUCCESS ? B->b.cublasLtGetStatusString(st)
                                                               : "too much workspace");
        return 0;
    }
    cublasLtMatmulPreference_t pref;
    if (gemm_preference(B, G, g, &pref, what, err, errlen))
        return -1;
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    cublasStatus_t st = B->b.cublasLtMatmulAlgoGetHeuristic(G->blas, P->op, P->la, P->lb, P->lc,
                                                            P->lc, pref, 1, &r, &found);
    B->b.cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1)
        return base_fail(err, errlen, "%s: cuBLASLt has no algorithm for it (m %lld n %lld k %lld, "
                         "%lld bytes of workspace)%s%s", what, (long long)g->m, (long long)g->n,
                         (long long)g->k, (long long)g->workspace_bytes,
                         st != CUBLAS_STATUS_SUCCESS ? ": " : "",
                         st != CUBLAS_STATUS_SUCCESS ? B->b.cublasLtGetStatusString(st) : "");
    P->algo = r.algo;
    return 0;
}

static int issue_gemm(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, CUstream st,
                      char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_gemm *g = &s->u.gemm;
    const cuda_gpu *G = &x->dev[d];
    const char *what = s->what ? s->what : "a matmul";
#define PTR(r) ((void *)(uintptr_t)cuda_ptr(G, r))
    BLAS(cublasLtMatmul(G->blas, P->op, &g->alpha, PTR(g->a), P->la, PTR(g->b), P->lb, &g->beta,
                        PTR(g->c), P->lc, PTR(g->d), P->lc, &P->algo, PTR(g->workspace),
                        (size_t)g->workspace_bytes, (cudaStream_t)st));
    return 0;
}

/* ---------------------------------------------------------------- cuDNN */

/* The first of a _v7 heuristic's (or a find's, fastest first) results that
 * works within the workspace, deterministic where the step asks for it
 * (--deterministic: the same bits every run, graph replay bitwise equal to
 * eager launches; PyTorch's cudnn.deterministic), and exact fp32 (no
 * tensor-op math) where the step asks for FMA math. */
#define PICK(perf, count, c, out)                                                        \
    do {                                                                                 \
        for (int i_ = 0; i_ < (count) && (out) < 0; i_++)                                \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS &&                             \
                (perf)[i_].memory <= (size_t)(c)->workspace_bytes &&                     \
                ((c)->math == CG_MATH_TENSOR_OP || (perf)[i_].mathType == CUDNN_FMA_MATH || \
                 (perf)[i_].mathType == CUDNN_DEFAULT_MATH) &&                           \
                (!(c)->deterministic || (perf)[i_].determinism == CUDNN_DETERMINISTIC)) { \
                (out) = (int)(perf)[i_].algo;                                            \
                math = (perf)[i_].mathType;                                              \
            }                                                                            \
    } while (0)

/* The math an algorithm runs with: exact fp32 (CUDNN_FMA_MATH) where the
 * step asks for it, whatever the algorithm's list said (CUDNN_DEFAULT_MATH
 * may use TF32 on Ampere and Hopper); else the list's. */
static cudnnMathType_t math_of(const cg_conv *c, cudnnMathType_t listed)
{
    return c->math == CG_MATH_FMA ? CUDNN_FMA_MATH : listed;
}

/* The workspace algorithm algo of step c needs, or -1 when cuDNN refuses it. */
static int64_t workspace_of(const cuda_libs *B, const cuda_gpu *G, const cg_conv *c,
                            const cuda_step_lib *P, int algo)
{
    size_t need = 0;
    cudnnStatus_t st =
        c->kind == CG_CONV_FORWARD
            ? B->n.cudnnGetConvolutionForwardWorkspaceSize(G->dnn, P->x, P->w, P->conv, P->y,
                                                           (cudnnConvolutionFwdAlgo_t)algo, &need)
        : c->kind == CG_CONV_BACKWARD_DATA
            ? B->n.cudnnGetConvolutionBackwardDataWorkspaceSize(
                  G->dnn, P->w, P->y, P->conv, P->x, (cudnnConvolutionBwdDataAlgo_t)algo, &need)
            : B->n.cudnnGetConvolutionBackwardFilterWorkspaceSize(
                  G->dnn, P->x, P->y, P->conv, P->w, (cudnnConvolutionBwdFilterAlgo_t)algo, &need);
    return st == CUDNN_STATUS_SUCCESS ? (int64_t)need : -1;
}

/* ---------------------------------------------------------------- cuDNN's timed choices */

/* A convolution the plan brings no algorithm for (--autotune's) is timed at
 * open, once per GPU, cuDNN version and problem, as PyTorch's
 * cudnn.benchmark does: cudnnFind*AlgorithmEx runs every algorithm on the
 * step's own buffers and workspace (which it may overwrite: nothing lives in
 * them before the first run), and the choice (PICK's, fastest first) is kept
 * under the cache folder (base_cache_dir) as cudnn/HASH.txt: the problem's
 * text, then "algo A math M ms T".  Later opens read it back; a file that
 * does not hold its problem's text, or an algorithm that no longer fits the
 * workspace, is timed again.  GNC_CUDNN_TIMING=0 leaves every choice to
 * cuDNN's heuristic, untimed. */
static int timing_on(void)
{
    const char *v = getenv("GNC_CUDNN_TIMING");
    return !v || strcmp(v, "0") != 0;
}

/* The key of step c's problem on device d: the GPU, the cuDNN version and
 * the problem (rt_cudnn_problem). */
static void problem_key(const rt_cuda *x, int d, const cg_conv *c, char *out, size_t len)
{
    char problem[900];
    rt_cudnn_problem(c, problem, sizeof problem);
    snprintf(out, len, "gpu %s, cudnn %zu, %s", x->dev[d].name, x->libs->n.cudnnGetVersion(),
             problem);
}

/* cuDNN's own timing of step s (cudnnFind*AlgorithmEx, on the step's buffers
 * and workspace), the result chosen from its list, fastest first, as PICK
 * chooses: *algo (-1 where none fits), *math (in: the step's), *ms its time.
 * -1 only for a cuDNN error. */
static int find_conv(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, int *algo,
                     cudnnMathType_t *mathp, double *ms, char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_conv *c = &s->u.conv;
    const cuda_gpu *G = &x->dev[d];
    const char *what = s->what ? s->what : "a convolution";
    enum { N = 16 };
    int count = 0;
    cudnnMathType_t math = *mathp;
    void *ws = PTR(c->workspace);
    size_t wsb = (size_t)c->workspace_bytes;
    *algo = -1, *ms = -1;
    DNN(cudnnSetStream(G->dnn, (cudaStream_t)G->stream[S_COMPUTE]));
#define TIME_OF(perf)                                                                    \
    for (int i = 0; i < count && *ms < 0; i++)                                           \
        if ((int)(perf)[i].algo == *algo)                                                \
            *ms = (perf)[i].time
    if (c->kind == CG_CONV_FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[N];
        DNN(cudnnFindConvolutionForwardAlgorithmEx(G->dnn, P->x, PTR(c->x), P->w, PTR(c->wt),
                                                   P->conv, P->y, PTR(c->y), N, &count, perf, ws,
                                                   wsb));
        PICK(perf, count, c, *algo);
        TIME_OF(perf);
    } else if (c->kind == CG_CONV_BACKWARD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[N];
        DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(G->dnn, P->w, PTR(c->wt), P->y, PTR(c->y),
                                                        P->conv, P->x, PTR(c->x), N, &count, perf,
                                                        ws, wsb));
        PICK(perf, count, c, *algo);
        TIME_OF(perf);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[N];
        DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(G->dnn, P->x, PTR(c->x), P->y, PTR(c->y),
                                                          P->conv, P->w, PTR(c->wt), N, &count,
                                                          perf, ws, wsb));
        PICK(perf, count, c, *algo);
        TIME_OF(perf);
    }
#undef TIME_OF
    *mathp = math;
    return 0;
}

/* Step s's algorithm from the cache, or timed and kept: P->algorithm and
 * *math set, or left (-1) where cuDNN times none that fits (the heuristic's
 * then).  -1 only for a cuDNN error. */
static int timed_choice(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P,
                        cudnnMathType_t *math, char *err, size_t errlen)
{
    const cg_conv *c = &s->u.conv;
    char key[1300];
    problem_key(x, d, c, key, sizeof key);
    int algo, m;
    double ms;
    if (rt_cudnn_choice_read(key, &algo, &m, &ms) == 0 && m >= CUDNN_DEFAULT_MATH &&
        m <= CUDNN_FMA_MATH) {
        int64_t need = workspace_of(x->libs, &x->dev[d], c, P, algo);
        if (need >= 0 && need <= c->workspace_bytes) {
            P->algorithm = algo;
            *math = (cudnnMathType_t)m;
            return 0;
        }
    }
    if (find_conv(x, d, s, P, &algo, math, &ms, err, errlen) != 0)
        return -1;
    if (algo >= 0) {
        P->algorithm = algo;
        rt_cudnn_choice_write(key, algo, (int)*math, ms);
    }
    return 0;
}

static int prepare_conv(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, char *err,
                        size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_conv *c = &s->u.conv;
    const cuda_gpu *G = &x->dev[d];
    const char *what = s->what ? s->what : "a convolution";
    cudnnDataType_t t = dnn_type(c->dtype);
    /* x, y (z shares its descriptor) and the filter: NCHW and KCRS, or
       NHWC and KRSC for --conv cudnn-nhwc; the bias is k elements either way */
    cudnnTensorFormat_t format = c->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    DNN(cudnnCreateTensorDescriptor(&P->x));
    DNN(cudnnSetTensor4dDescriptor(P->x, format, t, (int)c->n, (int)c->c, (int)c->h,
                                   (int)c->w));
    DNN(cudnnCreateTensorDescriptor(&P->y));
    DNN(cudnnSetTensor4dDescriptor(P->y, format, t, (int)c->n, (int)c->k, (int)c->p,
                                   (int)c->q));
    DNN(cudnnCreateFilterDescriptor(&P->w));
    DNN(cudnnSetFilter4dDescriptor(P->w, t, format, (int)c->k, (int)(c->c / c->groups),
                                   (int)c->r, (int)c->s));
    DNN(cudnnCreateConvolutionDescriptor(&P->conv));
    DNN(cudnnSetConvolution2dDescriptor(P->conv, c->pad[0], c->pad[1], c->stride[0],
                                        c->stride[1], c->dilation[0], c->dilation[1],
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionGroupCount(P->conv, c->groups));
    cudnnMathType_t math = c->math == CG_MATH_TENSOR_OP ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    DNN(cudnnSetConvolutionMathType(P->conv, math));
    P->algorithm = -1;
    enum { N = 16 };
    int count = 0;
    if (c->kind == CG_CONV_FORWARD && (c->relu || c->has_bias)) {
        /* cudnnConvolutionBiasActivationForward, which codegen asks for only
           where its documentation says it runs: a ReLU, fp32 or fp16, NCHW
           (codegen/library.c emit_conv); the rest it refuses here */
        if (!c->relu || c->nhwc || (c->dtype != IR_F32 && c->dtype != IR_F16))
            return base_fail(err, errlen, "%s: cuDNN's fused bias and activation call does not "
                             "run %s: the program asks for it where codegen should not", what,
                             !c->relu ? "without a ReLU" : c->nhwc ? "on NHWC tensors" : "on bf16");
        P->fused = 1;
        DNN(cudnnCreateActivationDescriptor(&P->act));
        DNN(cudnnSetActivationDescriptor(P->act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                         0.0));
        DNN(cudnnCreateTensorDescriptor(&P->bias));
        DNN(cudnnSetTensor4dDescriptor(P->bias, CUDNN_TENSOR_NCHW, t, 1, (int)c->k, 1, 1));
    }
    if (c->tuned && P->algorithm < 0) {
        /* the plan's: checked as the heuristic's are, as it may come from
           another GPU or library */
        int64_t need = workspace_of(B, G, c, P, c->algo);
        if (need < 0 || need > c->workspace_bytes)
            return base_fail(err, errlen, "%s: the plan's autotuned cuDNN algorithm %d does not "
                             "run here (%s): compile it again on this GPU, or without "
                             "--autotune", what, c->algo, need < 0 ? "cuDNN refuses it"
                             : "it needs more workspace than the program gives");
        P->algorithm = c->algo;
    } else if (timing_on() && timed_choice(x, d, s, P, &math, err, errlen) != 0) {
        return -1;
    }
    if (P->algorithm >= 0) {
        /* the plan's, or timed */
    } else if (c->kind == CG_CONV_FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[N];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(G->dnn, P->x, P->w, P->conv, P->y, N, &count, perf));
        PICK(perf, count, c, P->algorithm);
    } else if (c->kind == CG_CONV_BACKWARD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[N];
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(G->dnn, P->w, P->y, P->conv, P->x, N,
                                                        &count, perf));
        PICK(perf, count, c, P->algorithm);
    } else if (c->kind == CG_CONV_BACKWARD_FILTER) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[N];
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(G->dnn, P->x, P->y, P->conv, P->w, N,
                                                          &count, perf));
        PICK(perf, count, c, P->algorithm);
    }
    if (P->algorithm < 0)
        return base_fail(err, errlen, "%s: cuDNN offers no%s algorithm within %lld bytes of "
                         "workspace%s", what, c->deterministic ? " deterministic" : "",
                         (long long)c->workspace_bytes,
                         c->math == CG_MATH_FMA ? " in exact fp32 math" : "");
    DNN(cudnnSetConvolutionMathType(P->conv, math_of(c, math)));
    P->copy_z = c->kind == CG_CONV_FORWARD && !P->fused && c->has_z &&
                (c->z.region != c->y.region || c->z.offset != c->y.offset);
    return 0;
}

static int issue_conv(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, CUstream st,
                      char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_conv *c = &s->u.conv;
    const cuda_gpu *G = &x->dev[d];
    const char *what = s->what ? s->what : "a convolution";
    float alpha = c->alpha, beta = c->has_z ? c->beta : 0.0f, zero = 0.0f;
    void *ws = PTR(c->workspace);
    size_t wsb = (size_t)c->workspace_bytes;
    DNN(cudnnSetStream(G->dnn, (cudaStream_t)st));
    if (c->kind == CG_CONV_FORWARD && P->fused) {
        void *bias = c->has_bias ? PTR(c->bias) : (void *)(uintptr_t)G->zeros;
        void *z = c->has_z ? PTR(c->z) : PTR(c->y);
        DNN(cudnnConvolutionBiasActivationForward(
            G->dnn, &alpha, P->x, PTR(c->x), P->w, PTR(c->wt), P->conv,
            (cudnnConvolutionFwdAlgo_t)P->algorithm, ws, wsb, &beta, P->y, z, P->bias, bias,
            P->act, P->y, PTR(c->y)));
    } else if (c->kind == CG_CONV_FORWARD) {
        if (P->copy_z) {
            size_t bytes = (size_t)(c->n * c->k * c->p * c->q) * (c->dtype == IR_F32 ? 4 : 2);
            CU(cuMemcpyDtoDAsync(cuda_ptr(G, c->y), cuda_ptr(G, c->z), bytes, st));
        }
        DNN(cudnnConvolutionForward(G->dnn, &alpha, P->x, PTR(c->x), P->w, PTR(c->wt), P->conv,
                                    (cudnnConvolutionFwdAlgo_t)P->algorithm, ws, wsb, &beta,
                                    P->y, PTR(c->y)));
    } else if (c->kind == CG_CONV_BACKWARD_DATA) {
        DNN(cudnnConvolutionBackwardData(G->dnn, &alpha, P->w, PTR(c->wt), P->y, PTR(c->y),
                                         P->conv, (cudnnConvolutionBwdDataAlgo_t)P->algorithm,
                                         ws, wsb, &zero, P->x, PTR(c->x)));
    } else {
        DNN(cudnnConvolutionBackwardFilter(G->dnn, &alpha, P->x, PTR(c->x), P->y, PTR(c->y),
                                           P->conv, (cudnnConvolutionBwdFilterAlgo_t)P->algorithm,
                                           ws, wsb, &zero, P->w, PTR(c->wt)));
    }
    return 0;
}

/* ---------------------------------------------------------------- NCCL */

static int same_group(const nccl_group *g, const cg_comm *c)
{
    if (g->n != c->ngroup)
        return 0;
    for (int i = 0; i < g->n; i++)
        if (g->group[i] != c->group[i])
            return 0;
    return 1;
}

static int is_world(const rt_cuda *x, const cg_comm *c)
{
    if (c->ngroup != x->p->ndevices)
        return 0;
    for (int i = 0; i < c->ngroup; i++)
        if (c->group[i] != i)
            return 0;
    return 1;
}

/* The communicator of device d for communication step c. */
static ncclComm_t comm_of(const rt_cuda *x, int d, const cg_comm *c)
{
    const cuda_libs *B = x->libs;
    if (c->op == IR_OP_SEND || c->op == IR_OP_RECV || is_world(x, c))
        return B->world[d];
    for (int g = 0; g < B->ngroups; g++)
        if (same_group(&B->groups[g], c))
            for (int i = 0; i < c->ngroup; i++)
                if (B->groups[g].group[i] == d)
                    return B->groups[g].comm[i];
    return NULL;
}

/* Splits world into the communicator of devices group[0..n) (ranked in that
 * order): collective over world, every device of this process calls it, those
 * outside the group with no color, in one group call.  comm[i] becomes
 * group[i]'s (NULL for the devices of other processes). */
static int split(rt_cuda *x, const int64_t *group, int n, ncclComm_t *comm, char *err,
                 size_t errlen)
{
    cuda_libs *B = x->libs;
    int nd = x->p->ndevices;
    const char *what = "NCCL";
    ncclComm_t mine[64];
    ncclResult_t r = ncclSuccess;
    if (nd > 64)
        return base_fail(err, errlen, "more than 64 devices");
    if (!B->split) {
        /* NCCL_VERSION_CODE: X*10000 + Y*100 + Z from 2.9, X*1000 + Y*100 + Z before */
        int v = B->nccl_version, big = v >= 10000;
        return base_fail(err, errlen, "NCCL %d.%d.%d has no ncclCommSplit (2.18 and newer "
                         "have): the program needs a communicator of %d of its %d devices "
                         "(for the collectives of a group); "
                         "install NCCL 2.18 or newer", big ? v / 10000 : v / 1000,
                         big ? v / 100 % 100 : v / 100 % 10, v % 100, n, nd);
    }
    /* sharing the parent's resources (buffers, channels, proxy thread):
       the split's calls never run beside the world's (one stream) */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.splitShare = 1;
    NCCL(ncclGroupStart());
    for (int e = 0; e < nd; e++) {
        int rank = -1;
        for (int i = 0; i < n; i++)
            if (group[i] == e)
                rank = i;
        mine[e] = NULL;
        if (!cuda_mine(x, e))
            continue;
        r = B->split(B->world[e], rank < 0 ? NCCL_SPLIT_NOCOLOR : 0, rank < 0 ? 0 : rank,
                     &mine[e], &config);
        if (r != ncclSuccess)
            break;
    }
    ncclResult_t r2 = B->c.ncclGroupEnd();
    if (r != ncclSuccess || r2 != ncclSuccess)
        return base_fail(err, errlen, "NCCL: ncclCommSplit for a group of %d: %s", n,
                         B->c.ncclGetErrorString(r != ncclSuccess ? r : r2));
    for (int i = 0; i < n; i++)
        comm[i] = mine[group[i]];
    return 0;
}

/* The world communicator, rank d on program device d: in one process by
 * ncclCommInitAll over the devices' GPUs (one GPU each); across processes
 * this process's device's alone, by ncclCommInitRank from rank 0's id. */
static int open_world(rt_cuda *x, const rt_cuda_id *id, char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    int nd = x->p->ndevices;
    ncclResult_t r;
    if (!(B->world = base_calloc((size_t)nd, sizeof *B->world)))
        return base_fail(err, errlen, "out of memory");
    if (x->rank >= 0) {
        ncclUniqueId uid;
        memcpy(&uid, id->bytes, sizeof uid < sizeof id->bytes ? sizeof uid : sizeof id->bytes);
        CU(cuCtxSetCurrent(x->dev[x->rank].ctx));
        if ((r = B->c.ncclCommInitRank(&B->world[x->rank], nd, uid, x->rank)) == ncclSuccess)
            return 0;
        B->world[x->rank] = NULL;
        return base_fail(err, errlen, "NCCL: ncclCommInitRank as rank %d of %d: %s", x->rank, nd,
                         B->c.ncclGetErrorString(r));
    }
    int *ordinals = base_calloc((size_t)nd, sizeof *ordinals);
    if (!ordinals)
        return base_fail(err, errlen, "out of memory");
    for (int d = 0; d < nd; d++) {
        ordinals[d] = x->dev[d].ordinal;
        for (int e = 0; e < d; e++)
            if (ordinals[e] == ordinals[d]) {
                int gpu = ordinals[d];
                base_free(ordinals);
                return base_fail(err, errlen, "program devices %d and %d are both on GPU %d: "
                                 "NCCL needs a GPU of its own for each (the program has %d "
                                 "devices; give it that many GPUs)", e, d, gpu, nd);
            }
    }
    r = B->c.ncclCommInitAll(B->world, nd, ordinals);
    base_free(ordinals);
    if (r == ncclSuccess)
        return 0;
    memset(B->world, 0, (size_t)nd * sizeof *B->world);
    return base_fail(err, errlen, "NCCL: ncclCommInitAll over %d GPUs: %s", nd,
                     B->c.ncclGetErrorString(r));
}

/* The world communicator, then one per other group of a collective, split
 * from it: the fewest the program's groups need. */
static int open_comms(rt_cuda *x, const rt_cuda_id *id, char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const cg_program *p = x->p;
    int nd = p->ndevices;
    if (open_world(x, id, err, errlen))
        return -1;
    for (int d = 0; d < nd; d++)
        for (int s = 0; s < p->devices[d].nsteps; s++) {
            const cg_step *st = &p->devices[d].steps[s];
            if (st->kind != CG_STEP_COMM || st->u.comm.op == IR_OP_SEND ||
                st->u.comm.op == IR_OP_RECV || is_world(x, &st->u.comm))
                continue;
            int known = 0;
            for (int g = 0; g < B->ngroups && !known; g++)
                known = same_group(&B->groups[g], &st->u.comm);
            if (known)
                continue;
            nccl_group *ng = base_realloc(B->groups, (size_t)(B->ngroups + 1) * sizeof *ng);
            if (!ng)
                return base_fail(err, errlen, "out of memory");
            B->groups = ng;
            nccl_group *g = &B->groups[B->ngroups++];
            g->n = st->u.comm.ngroup;
            g->group = base_calloc((size_t)g->n, sizeof *g->group);
            g->comm = base_calloc((size_t)g->n, sizeof *g->comm);
            if (!g->group || !g->comm)
                return base_fail(err, errlen, "out of memory");
            memcpy(g->group, st->u.comm.group, (size_t)g->n * sizeof *g->group);
            if (split(x, g->group, g->n, g->comm, err, errlen))
                return -1;
        }
    return 0;
}

int cuda_comm_p2p(rt_cuda *x, int d, const cg_step *steps, int s, int e, CUstream st,
                  char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const char *what = "NCCL";
    ncclComm_t comm = B->world ? B->world[d] : NULL;
    if (!comm)
        return base_fail(err, errlen, "device %d: no communicator for its messages", d);
    NCCL(ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    int at = s;
    for (; at < e && r == ncclSuccess; at++) {
        const cg_comm *c = &steps[at].u.comm;
        size_t bytes = (size_t)(c->count[0] * (c->dtype == IR_F16 || c->dtype == IR_BF16 ? 2
                                               : c->dtype == IR_I64 ? 8 : c->dtype == IR_U8 ? 1 : 4));
        if (c->op == IR_OP_SEND)
            r = B->c.ncclSend((const void *)(uintptr_t)cuda_ptr(&x->dev[d], c->send[0]), bytes,
                              ncclUint8, c->peer, comm, (cudaStream_t)st);
        else
            r = B->c.ncclRecv((void *)(uintptr_t)cuda_ptr(&x->dev[d], c->recv[0]), bytes, ncclUint8,
                              c->peer, comm, (cudaStream_t)st);
    }
    ncclResult_t r2 = B->c.ncclGroupEnd();
    if (r != ncclSuccess || r2 != ncclSuccess)
        return base_fail(err, errlen, "NCCL: %s (message %lld): %s",
                         steps[at - 1].what ? steps[at - 1].what : "?",
                         (long long)steps[at - 1].u.comm.id,
                         B->c.ncclGetErrorString(r != ncclSuccess ? r : r2));
    return 0;
}

const char *rt_cuda_library(int i, const char **what)
{
    static const char *const libs[][2] = {
        {"libcuda.so.1", "the CUDA driver"},
        {"libcublasLt.so." XSTR(CUBLAS_VER_MAJOR), "cuBLASLt: matrix products"},
        {"libcudnn.so." XSTR(CUDNN_MAJOR), "cuDNN: convolutions (--conv cudnn)"},
        {"libnccl.so." XSTR(NCCL_MAJOR), "NCCL: communication between GPUs"},
    };
    if (i < 0 || i >= (int)(sizeof libs / sizeof *libs))
        return NULL;
    *what = libs[i][1];
    return libs[i][0];
}

int rt_cuda_library_loads(const char *libdir, const char *name, char *why, size_t len)
{
    char path[4096];
    cuda_lib_path(libdir, name, path, sizeof path);
    if (cuda_dlopen(path))
        return 1;   /* loaded for good, as gnc loads them (cuda_dlopen) */
    snprintf(why, len, "%s", dlerror());
    return 0;
}

int rt_cuda_unique_id(const char *libdir, rt_cuda_id *id, char *err, size_t errlen)
{
    char path[4096];
    cuda_lib_path(libdir, "libnccl.so." XSTR(NCCL_MAJOR), path, sizeof path);
    void *so = cuda_dlopen(path);
    if (!so)
        return base_fail(err, errlen, "NCCL (%s) does not load: %s", path, dlerror());
    __typeof__(ncclGetUniqueId) *get;
    __typeof__(ncclGetErrorString) *say;
    *(void **)&get = dlsym(so, "ncclGetUniqueId");
    *(void **)&say = dlsym(so, "ncclGetErrorString");
    ncclUniqueId uid;
    ncclResult_t r = get && say ? get(&uid) : ncclSystemError;
    int rc = 0;
    if (!get || !say)
        rc = base_fail(err, errlen, "NCCL (%s) has no ncclGetUniqueId", path);
    else if (r != ncclSuccess)
        rc = base_fail(err, errlen, "NCCL: ncclGetUniqueId: %s", say(r));
    memset(id, 0, sizeof *id);
    memcpy(id->bytes, &uid, sizeof uid < sizeof id->bytes ? sizeof uid : sizeof id->bytes);
    return rc; /* NCCL stays loaded: its bootstrap thread serves the id */
}

static int issue_one(rt_cuda *x, int d, const cg_comm *c, char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    const cuda_gpu *G = &x->dev[d];
    cudaStream_t st = (cudaStream_t)G->stream[S_COMM];
    const char *what = "NCCL";
    ncclDataType_t t;
    ncclComm_t comm = comm_of(x, d, c);
    if (nccl_type(c->dtype, &t) || !comm)
        return base_fail(err, errlen, "device %d: communication %lld has no %s", d,
                         (long long)c->id, comm ? "NCCL data type" : "communicator");
    switch (c->op) {
    case IR_OP_ALL_REDUCE:
        for (int i = 0; i < c->ntensors; i++)
            NCCL(ncclAllReduce(PTR(c->send[i]), PTR(c->recv[i]), (size_t)c->count[i], t,
                               c->reduce_max ? ncclMax : ncclSum, comm, st));
        return 0;
    case IR_OP_ALL_GATHER:
        NCCL(ncclAllGather(PTR(c->send[0]), PTR(c->recv[0]), (size_t)c->count[0], t, comm, st));
        return 0;
    case IR_OP_REDUCE_SCATTER:
        NCCL(ncclReduceScatter(PTR(c->send[0]), PTR(c->recv[0]), (size_t)c->count[0], t, ncclSum,
                               comm, st));
        return 0;
    case IR_OP_BROADCAST:
        NCCL(ncclBroadcast(PTR(c->send[0]), PTR(c->recv[0]), (size_t)c->count[0], t, c->root,
                           comm, st));
        return 0;
    case IR_OP_SEND:
        NCCL(ncclSend(PTR(c->send[0]), (size_t)c->count[0], t, c->peer, comm, st));
        return 0;
    case IR_OP_RECV:
        NCCL(ncclRecv(PTR(c->recv[0]), (size_t)c->count[0], t, c->peer, comm, st));
        return 0;
    default:
        return base_fail(err, errlen, "device %d: communication %lld: unknown operation", d,
                         (long long)c->id);
    }
}

int cuda_comm_issue(rt_cuda *x, int n, const int *devs, const cg_step *const *steps, char *err,
                    size_t errlen)
{
    cuda_libs *B = x->libs;
    const char *what = "NCCL";
    NCCL(ncclGroupStart());
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = issue_one(x, devs[i], &steps[i]->u.comm, err, errlen);
    ncclResult_t r = B->c.ncclGroupEnd();
    if (rc)
        return -1;
    if (r != ncclSuccess)
        return base_fail(err, errlen, "NCCL: %s (communication %lld): %s",
                         steps[0]->what ? steps[0]->what : "?", (long long)steps[0]->u.comm.id,
                         B->c.ncclGetErrorString(r));
    return 0;
}

/* ---------------------------------------------------------------- autotuning */

enum { TUNE_CANDIDATES = 8, TUNE_REPS = 10 };

/* The milliseconds of TUNE_REPS calls of gemm step s with algorithm a, after
 * one to warm up; -1 when it fails. */
static double time_gemm(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P,
                        const cublasLtMatmulAlgo_t *a, CUevent t0, CUevent t1)
{
    cuda_gpu *G = &x->dev[d];
    CUstream st = G->stream[S_COMPUTE];
    cublasLtMatmulAlgo_t keep = P->algo;
    char err[256];
    size_t errlen = sizeof err;
    float ms = -1;
    P->algo = *a;
    int rc = issue_gemm(x, d, s, P, st, err, errlen);
    rc = rc || x->L.cuEventRecord(t0, st) != CUDA_SUCCESS;
    for (int i = 0; i < TUNE_REPS && !rc; i++)
        rc = issue_gemm(x, d, s, P, st, err, errlen);
    rc = rc || x->L.cuEventRecord(t1, st) != CUDA_SUCCESS ||
         x->L.cuEventSynchronize(t1) != CUDA_SUCCESS ||
         x->L.cuEventElapsedTime(&ms, t0, t1) != CUDA_SUCCESS;
    P->algo = keep;
    return rc ? -1 : ms;
}

static int tune_gemm(rt_cuda *x, int d, cg_step *s, cuda_step_lib *P, CUevent t0, CUevent t1,
                     char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    cg_gemm *g = &s->u.gemm;
    const char *what = s->what ? s->what : "a matmul";
    cublasLtMatmulPreference_t pref;
    if (gemm_preference(B, &x->dev[d], g, &pref, what, err, errlen))
        return -1;
    cublasLtMatmulHeuristicResult_t r[TUNE_CANDIDATES];
    int found = 0;
    cublasStatus_t st = B->b.cublasLtMatmulAlgoGetHeuristic(x->dev[d].blas, P->op, P->la, P->lb,
                                                            P->lc, P->lc, pref, TUNE_CANDIDATES,
                                                            r, &found);
    B->b.cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS)
        return base_fail(err, errlen, "%s: cuBLASLt heuristic: %s", what,
                         B->b.cublasLtGetStatusString(st));
    double best = -1;
    for (int i = 0; i < found; i++) {
        if (r[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        double ms = time_gemm(x, d, s, P, &r[i].algo, t0, t1);
        if (ms >= 0 && (best < 0 || ms < best)) {
            best = ms;
            P->algo = r[i].algo;
        }
    }
    if (best < 0)
        return base_fail(err, errlen, "%s: no cuBLASLt algorithm ran", what);
    g->tuned = 1;
    memcpy(g->algo, &P->algo, sizeof g->algo);
    return 0;
}

/* --autotune: cuDNN's own timing (find_conv), into the plan. */
static int tune_conv(rt_cuda *x, int d, cg_step *s, cuda_step_lib *P, char *err, size_t errlen)
{
    cuda_libs *B = x->libs;
    cg_conv *c = &s->u.conv;
    const char *what = s->what ? s->what : "a convolution";
    int algo;
    double ms;
    cudnnMathType_t math = c->math == CG_MATH_TENSOR_OP ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    if (find_conv(x, d, s, P, &algo, &math, &ms, err, errlen) != 0)
        return -1;
    if (algo < 0)
        return base_fail(err, errlen, "%s: cuDNN timed no algorithm that fits", what);
    DNN(cudnnSetConvolutionMathType(P->conv, math_of(c, math)));
    P->algorithm = algo;
    c->tuned = 1;
    c->algo = algo;
    return 0;
}

static int tune_device(rt_cuda *x, int d, CUevent t0, CUevent t1, void *arg, char *err,
                       size_t errlen)
{
    cg_program *p = arg;
    cuda_gpu *G = &x->dev[d];
    for (int s = 0; s < p->devices[d].nsteps; s++) {
        cg_step *st = &p->devices[d].steps[s];
        if ((st->kind == CG_STEP_GEMM &&
             tune_gemm(x, d, st, G->lib[0][s], t0, t1, err, errlen) != 0) ||
            (st->kind == CG_STEP_CONV && tune_conv(x, d, st, G->lib[0][s], err, errlen) != 0))
            return -1;
    }
    CU(cuStreamSynchronize(G->stream[S_COMPUTE]));
    return 0;
}

int cuda_libs_autotune(rt_cuda *x, cg_program *p, char *err, size_t errlen)
{
    return cuda_each_timed(x, tune_device, p, err, errlen);
}

/* ---------------------------------------------------------------- open, close */

int cuda_lib_issue(rt_cuda *x, int d, const cg_step *s, cuda_step_lib *P, CUstream st, char *err,
                   size_t errlen)
{
    if (s->kind == CG_STEP_GEMM)
        return issue_gemm(x, d, s, P, st, err, errlen);
    return issue_conv(x, d, s, P, st, err, errlen);
}

static int prepare_steps(rt_cuda *x, int d, const cg_step *steps, int n, cuda_step_lib ***out,
                         char *err, size_t errlen)
{
    *out = base_calloc((size_t)n + 1, sizeof **out);
    if (!*out)
        return base_fail(err, errlen, "out of memory");
    for (int s = 0; s < n; s++) {
        if (steps[s].kind != CG_STEP_GEMM && steps[s].kind != CG_STEP_CONV)
            continue;
        cuda_step_lib *P = base_calloc(1, sizeof *P);
        if (!P)
            return base_fail(err, errlen, "out of memory");
        (*out)[s] = P;
        int rc = steps[s].kind == CG_STEP_GEMM ? prepare_gemm(x, d, &steps[s], P, err, errlen)
                                               : prepare_conv(x, d, &steps[s], P, err, errlen);
        if (rc) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", err);
            return base_fail(err, errlen, "device %d step %d: %s", d, s, msg);
        }
    }
    return 0;
}

int cuda_libs_open(rt_cuda *x, const char *libdir, const rt_cuda_id *id, char *err,
                   size_t errlen)
{
    const cg_program *p = x->p;
    int need[CG_STEP_COPY + 1] = {0};
    int64_t max_k = 0;
    for (int d = 0; d < p->ndevices; d++)
        for (int s = 0; s < p->devices[d].ninit + p->devices[d].nsteps; s++) {
            const cg_device *D = &p->devices[d];
            const cg_step *st = s < D->ninit ? &D->init[s] : &D->steps[s - D->ninit];
            /* across processes every process loads NCCL (its communicators
               are collective) */
            if (st->kind != CG_STEP_COMM || cuda_by_nccl(x, &st->u.comm))
                need[st->kind] = 1;
            if (st->kind == CG_STEP_CONV && st->u.conv.k > max_k)
                max_k = st->u.conv.k;
        }
    cuda_libs *B = x->libs = base_calloc(1, sizeof *B);
    if (!B)
        return base_fail(err, errlen, "out of memory");
    void *so_;
    if (need[CG_STEP_GEMM]) {
        LOAD(B->b, BLAS_FNS, "libcublasLt.so." XSTR(CUBLAS_VER_MAJOR), "cuBLASLt");
        B->blas_so = so_;
    }
    if (need[CG_STEP_CONV]) {
        LOAD(B->n, DNN_FNS, "libcudnn.so." XSTR(CUDNN_MAJOR), "cuDNN");
        B->dnn_so = so_;
    }
    if (need[CG_STEP_COMM]) {
        LOAD(B->c, NCCL_FNS, "libnccl.so." XSTR(NCCL_MAJOR), "NCCL");
        B->nccl_so = so_;
        if (B->c.ncclGetVersion(&B->nccl_version) != ncclSuccess)
            B->nccl_version = 0;
        if (B->nccl_version >= 21800)
            *(void **)&B->split = dlsym(so_, "ncclCommSplit");
    }
    for (int d = 0; d < p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        const char *what = G->name;
        if (!cuda_mine(x, d))
            continue;
        CU(cuCtxSetCurrent(G->ctx));
        if (B->blas_so)
            BLAS(cublasLtCreate((cublasLtHandle_t *)&G->blas));
        if (B->dnn_so) {
            DNN(cudnnCreate((cudnnHandle_t *)&G->dnn));
            /* the bias of a fused convolution that has none: zeros, of any type */
            CU(cuMemAlloc(&G->zeros, (size_t)max_k * sizeof(float)));
            G->zeros_bytes = max_k * (int64_t)sizeof(float);
            CU(cuMemsetD8Async(G->zeros, 0, (size_t)max_k * sizeof(float), G->stream[S_COPY]));
            CU(cuStreamSynchronize(G->stream[S_COPY]));
        }
        const cg_device *D = &p->devices[d];
        if (prepare_steps(x, d, D->steps, D->nsteps, &G->lib[0], err, errlen) ||
            prepare_steps(x, d, D->init, D->ninit, &G->lib[1], err, errlen))
            return -1;
    }
    if (B->nccl_so && open_comms(x, id, err, errlen))
        return -1;
    return 0;
}

int cuda_libs_nccl(const rt_cuda *x)
{
    return x->libs && x->libs->nccl_so;
}

/* fn on the slot of every communicator this process holds (the groups', the
 * world's), until one returns non-zero, which is returned. */
static int each_comm(rt_cuda *x, int (*fn)(cuda_libs *B, ncclComm_t *c, void *arg), void *arg)
{
    cuda_libs *B = x->libs;
    int nd = x->p->ndevices, rc = 0;
    for (int g = 0; g < B->ngroups && !rc; g++)
        for (int i = 0; i < B->groups[g].n && !rc; i++)
            if (B->groups[g].comm[i])
                rc = fn(B, &B->groups[g].comm[i], arg);
    for (int d = 0; B->world && d < nd && !rc; d++)
        if (B->world[d])
            rc = fn(B, &B->world[d], arg);
    return rc;
}

static int async_error(cuda_libs *B, ncclComm_t *c, void *arg)
{
    ncclResult_t e = ncclSuccess, r = B->c.ncclCommGetAsyncError(*c, &e);
    if (r != ncclSuccess)
        e = r;
    if (e == ncclSuccess || e == ncclInProgress)
        return 0;
    *(ncclResult_t *)arg = e;
    return 1;
}

int cuda_libs_async_error(rt_cuda *x, char *err, size_t errlen)
{
    ncclResult_t e = ncclSuccess;
    if (!cuda_libs_nccl(x) || !each_comm(x, async_error, &e))
        return 0;
    return base_fail(err, errlen, "NCCL reports an asynchronous error (ncclCommGetAsyncError): %s",
                     x->libs->c.ncclGetErrorString(e));
}

static int abort_comm(cuda_libs *B, ncclComm_t *c, void *arg)
{
    (void)arg;
    B->c.ncclCommAbort(*c);
    *c = NULL;  /* freed: never destroyed again */
    return 0;
}

void cuda_libs_abort(rt_cuda *x)
{
    if (cuda_libs_nccl(x))
        each_comm(x, abort_comm, NULL);
}

static void free_steps(cuda_libs *B, cuda_step_lib **lib, int n)
{
    for (int s = 0; lib && s < n; s++) {
        cuda_step_lib *P = lib[s];
        if (!P)
            continue;
        if (P->op)
            B->b.cublasLtMatmulDescDestroy(P->op);
        if (P->la)
            B->b.cublasLtMatrixLayoutDestroy(P->la);
        if (P->lb)
            B->b.cublasLtMatrixLayoutDestroy(P->lb);
        if (P->lc)
            B->b.cublasLtMatrixLayoutDestroy(P->lc);
        if (P->x)
            B->n.cudnnDestroyTensorDescriptor(P->x);
        if (P->y)
            B->n.cudnnDestroyTensorDescriptor(P->y);
        if (P->bias)
            B->n.cudnnDestroyTensorDescriptor(P->bias);
        if (P->w)
            B->n.cudnnDestroyFilterDescriptor(P->w);
        if (P->conv)
            B->n.cudnnDestroyConvolutionDescriptor(P->conv);
        if (P->act)
            B->n.cudnnDestroyActivationDescriptor(P->act);
        base_free(P);
    }
    base_free(lib);
}

void cuda_libs_close(rt_cuda *x)
{
    cuda_libs *B = x->libs;
    if (!B)
        return;
    for (int g = 0; g < B->ngroups; g++) {
        for (int i = 0; i < B->groups[g].n; i++)
            if (B->groups[g].comm[i])
                B->c.ncclCommDestroy(B->groups[g].comm[i]);
        base_free(B->groups[g].group);
        base_free(B->groups[g].comm);
    }
    base_free(B->groups);
    for (int d = 0; B->world && d < x->p->ndevices; d++)
        if (B->world[d])
            B->c.ncclCommDestroy(B->world[d]);
    base_free(B->world);
    for (int d = 0; x->dev && d < x->p->ndevices; d++) {
        cuda_gpu *G = &x->dev[d];
        if (G->ctx)
            x->L.cuCtxSetCurrent(G->ctx);
        free_steps(B, G->lib[0], x->p->devices[d].nsteps);
        free_steps(B, G->lib[1], x->p->devices[d].ninit);
        G->lib[0] = G->lib[1] = NULL;
        if (G->blas)
            B->b.cublasLtDestroy(G->blas);
        if (G->dnn)
            B->n.cudnnDestroy(G->dnn);
        if (G->zeros)
            x->L.cuMemFree(G->zeros);
        G->blas = G->dnn = NULL;
        G->zeros = 0;
    }
    base_free(B); /* the libraries stay loaded (cuda_dlopen) */
    x->libs = NULL;
}

#endif
