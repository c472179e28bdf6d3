/* The stand-ins of the CUDA libraries (tests/fakecuda/) through their APIs,
 * loaded with dlopen from their folder as runtime/cuda/cuda.c loads the real ones:
 *
 *   1. memory: ranges checked, unknown frees refused, free memory accounted;
 *   2. contexts: a stream of another device refused;
 *   3. ordering: work on two streams joined by an event;
 *   4. kernels: a registered host entry launched, names checked in the image;
 *   5. capture: a forked and joined capture replayed twice, an unjoined one
 *      refused, synchronizing while capturing refused;
 *   6. cuBLASLt against a naive product (transposes, batch, bias and relu, fp16);
 *   7. cuDNN forward, backward data and filter against direct loops (groups,
 *      stride, padding), inconsistent descriptors refused;
 *   8. workspaces: cuBLASLt's heuristic offers an algorithm needing 1 MiB
 *      (and one needing none) where the preference allows 8 MiB, none where
 *      it allows none; cublasLtMatmul refuses less workspace than its
 *      algorithm needs (INVALID_VALUE) or a workspace beyond its allocation.
 *      cuDNN's workspace sizes by algorithm (IMPLICIT_GEMM none, the others
 *      some, DIRECT and Winograd on stride 2 NOT_SUPPORTED), the _v7 lists
 *      (first needs workspace, one needs none, DEFAULT_MATH), cudnnFind
 *      without workspace (ALLOC_FAILED but IMPLICIT_GEMM); every call kind
 *      refuses less workspace than its algorithm needs (BAD_PARAM) and an
 *      algorithm that does not run its problem (NOT_SUPPORTED);
 *   9. math: FLOAT data under CUDNN_DEFAULT_MATH and TENSOR_OP_MATH rounded
 *      to TF32, exact under CUDNN_FMA_MATH;
 *  10. first calls: a new cuBLASLt handle's first matmul and a new cuDNN
 *      handle's first convolution of each kind inside a capture are refused
 *      (NOT_SUPPORTED) and invalidate it; after one eager call they are
 *      captured and replay;
 *  11. NCCL across 2 fake devices in a group (all_reduce, all_gather,
 *      broadcast, send/recv), a duplicate GPU and out-of-group calls refused,
 *      the hang that follows reported as a deadlock;
 *  12. NCCL communicators from ncclCommInitRank in a group and from
 *      ncclCommSplit; a reduce_scatter of both devices refused inside a
 *      capture (a communicator's first collective; then several GPUs in one
 *      capture), run eagerly; one device's all_reduce captured and replayed;
 *      a thread of its own for each rank (NCCL's multi-thread mode): an
 *      all_reduce outside a group, an exchange in a group of its own, each
 *      captured by its thread (thread-local) and replayed; NCCL's group per
 *      thread;
 *  13. a failing kernel's error, sticky;
 *  14. NCCL across processes, one rank each (forked before the parent touches
 *      the driver, so each starts from a fresh fake as a process of its own):
 *      init outside a group and in a group of its one call, all_reduce (sum,
 *      max; float, int32, uint8), all_gather, reduce_scatter, broadcast of
 *      int8, a split into a sub-group and into a pair; crossing sends each
 *      in one group with its receive; a captured graph of that and an
 *      all_reduce replayed 3 times; and what must fail: crossing sends each
 *      before its receive on one stream (a timeout, not a hang), two
 *      communicators' calls in flight on one device, one communicator's on
 *      two streams, two ranks on one GPU, a rank that never joins,
 *      collectives that do not match.  Each check also finds the id's directory removed.
 *      Also in a process of its own: a copy from pageable memory waits for
 *      its stream's earlier work (lazy schedule).
 * The fakes print their refusals to stderr: expected here. */
#include <cublasLt.h>
#include <cuda.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen.h"
#include "fake.h"

#define DRIVER(X) X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) \
    X(cuModuleLoadData) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuStreamCreate) \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent) X(cuEventCreate) \
    X(cuEventDestroy) X(cuEventRecord) X(cuStreamBeginCapture) X(cuStreamEndCapture) \
    X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy) \
    X(cuCtxSynchronize) X(cuModuleUnload)
#define BLAS(X) X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmul) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck)
#define DNN(X) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnCreateTensorDescriptor) \
    X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) X(cudnnCreateFilterDescriptor) \
    X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
    X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor) \
    X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount) \
    X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter) \
    X(cudnnCreateActivationDescriptor) X(cudnnSetActivationDescriptor) \
    X(cudnnDestroyActivationDescriptor) X(cudnnConvolutionBiasActivationForward) \
    X(cudnnSetConvolutionMathType) X(cudnnGetConvolutionForwardWorkspaceSize) \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnFindConvolutionForwardAlgorithmEx)
#define NCCL(X) X(ncclCommInitAll) X(ncclCommDestroy) X(ncclGroupStart) X(ncclGroupEnd) \
    X(ncclAllReduce) X(ncclAllGather) X(ncclBroadcast) X(ncclSend) X(ncclRecv) \
    X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommSplit) X(ncclCommCount) \
    X(ncclCommUserRank) X(ncclReduceScatter) X(ncclGetErrorString) X(ncclCommAbort)

#define STR_(x) #x
#define STR(x) STR_(x)
/* every entry point, named by the headers' macros (cuMemAlloc is cuMemAlloc_v2) */
static struct {
#define MEMBER(f) __typeof__(f) *f;
    DRIVER(MEMBER) BLAS(MEMBER) DNN(MEMBER) NCCL(MEMBER)
#undef MEMBER
    int (*fakecuda_register)(const char *, fk_kernel);
} L;

static int nfailed, npassed;

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (cond) {                                                                  \
            npassed++;                                                               \
        } else {                                                                     \
            nfailed++;                                                               \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                              \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
        }                                                                            \
    } while (0)

static void *load(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GNC_FAKECUDA_DIR, name);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        printf("FAIL cannot load %s: %s\n", path, dlerror());
        exit(1);
    }
    return so;
}

static void bind(void *so, void **slot, const char *sym)
{
    if (!(*slot = dlsym(so, sym))) {
        printf("FAIL no %s\n", sym);
        exit(1);
    }
}

/* 1 when got is within atol + rtol |want| everywhere; prints the first miss */
static int close_to(const char *what, const float *got, const double *want, int n, double atol,
                    double rtol)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]))) {
            printf("FAIL %s: [%d] got %.9g want %.9g\n", what, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* element i of an fp32, fp16 or bf16 array (the fakes' own are not linked here) */
static double tload(const void *p, int64_t i, cudaDataType t)
{
    if (t == CUDA_R_32F)
        return ((const float *)p)[i];
    return cg_half_to_f32(((const unsigned short *)p)[i], t == CUDA_R_16F ? IR_F16 : IR_BF16);
}

static void tstore(void *p, int64_t i, cudaDataType t, double v)
{
    if (t == CUDA_R_32F)
        ((float *)p)[i] = (float)v;
    else
        ((unsigned short *)p)[i] = cg_f32_to_half((float)v, t == CUDA_R_16F ? IR_F16 : IR_BF16);
}

static CUcontext ctx[2];

static CUdeviceptr upload(const void *host, size_t bytes, CUstream s)
{
    CUdeviceptr p = 0;
    CHECK(L.cuMemAlloc(&p, bytes) == CUDA_SUCCESS, "alloc %zu", bytes);
    CHECK(L.cuMemcpyHtoDAsync(p, host, bytes, s) == CUDA_SUCCESS, "upload");
    return p;
}

static void download(void *host, CUdeviceptr p, size_t bytes, CUstream s)
{
    CHECK(L.cuMemcpyDtoHAsync(host, p, bytes, s) == CUDA_SUCCESS, "download");
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS, "sync after download");
}

/* ---------------------------------------------------------------- driver */

/* the test's kernel: x[i] += 1 for i < n; args (float *x, long n) */
static const char *add_one(const unsigned *grid, const unsigned *block, void **args)
{
    float *x = *(float **)args[0];
    long n = *(long *)args[1];
    long threads = (long)grid[0] * block[0];
    if (threads < n)
        return "too few threads";
    for (long i = 0; i < n; i++)
        x[i] += 1;
    return NULL;
}

static const char *always_fails(const unsigned *grid, const unsigned *block, void **args)
{
    (void)grid, (void)block, (void)args;
    return "trap: the kernel's status says so";
}

static const char ptx[] = "//\n// Generated for the fake\n.version 8.0\n.target sm_90\n"
                          ".visible .entry add_one(.param .u64 x, .param .u64 n)\n{ ret; }\n"
                          ".visible .entry always_fails()\n{ ret; }\n";

static void test_memory(CUstream s)
{
    size_t free0, free1, total;
    CHECK(L.cuMemGetInfo(&free0, &total) == CUDA_SUCCESS && total == 80000ull << 20, "meminfo");
    CUdeviceptr p;
    CHECK(L.cuMemAlloc(&p, 1000) == CUDA_SUCCESS && p % 256 == 0, "alloc aligned");
    L.cuMemGetInfo(&free1, &total);
    CHECK(free0 - free1 == 1024, "free memory fell by %zu, want 1024", free0 - free1);
    char buf[1000] = {0};
    CHECK(L.cuMemcpyHtoDAsync(p, buf, 1000, s) == CUDA_SUCCESS, "copy in range");
    CHECK(L.cuMemcpyHtoDAsync(p + 8, buf, 1000, s) == CUDA_ERROR_INVALID_VALUE, "copy past the end");
    CHECK(L.cuMemsetD8Async(p + 2000, 0, 1, s) == CUDA_ERROR_INVALID_VALUE, "memset outside");
    CHECK(L.cuMemFree(p + 16) == CUDA_ERROR_INVALID_VALUE, "free of an inner pointer");
    CHECK(L.cuMemFree(p) == CUDA_SUCCESS, "free");
    CHECK(L.cuMemFree(p) == CUDA_ERROR_INVALID_VALUE, "double free");
    L.cuMemGetInfo(&free1, &total);
    CHECK(free1 == free0, "free memory back");
}

static void test_contexts(void)
{
    CUstream s1;
    L.cuCtxSetCurrent(ctx[1]);
    L.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
    L.cuCtxSetCurrent(ctx[0]);
    CUdeviceptr p;
    L.cuMemAlloc(&p, 64);
    CHECK(L.cuMemsetD8Async(p, 0, 64, s1) == CUDA_ERROR_INVALID_HANDLE,
          "a stream of device 1 under device 0's context");
    CHECK(L.cuStreamSynchronize(s1) == CUDA_ERROR_INVALID_HANDLE, "sync of another device's stream");
    L.cuCtxSetCurrent(ctx[1]);
    CHECK(L.cuMemsetD8Async(p, 0, 64, s1) == CUDA_ERROR_INVALID_VALUE, "device 0's memory on device 1");
    L.cuStreamDestroy(s1);
    L.cuCtxSetCurrent(ctx[0]);
    L.cuMemFree(p);
}

static void test_order_and_kernels(CUstream a, CUstream b)
{
    CUmodule mod;
    CHECK(L.cuModuleLoadData(&mod, "not an image") == CUDA_ERROR_INVALID_IMAGE, "junk image");
    CHECK(L.cuModuleLoadData(&mod, ptx) == CUDA_SUCCESS, "PTX image");
    CUfunction f, g;
    CHECK(L.cuModuleGetFunction(&f, mod, "absent") == CUDA_ERROR_NOT_FOUND, "unknown kernel");
    CHECK(L.cuModuleGetFunction(&f, mod, "add_one") == CUDA_SUCCESS, "registered kernel");
    CHECK(L.cuModuleGetFunction(&g, mod, "always_fails") == CUDA_SUCCESS, "registered kernel");
    float x[100];
    for (int i = 0; i < 100; i++)
        x[i] = (float)i;
    CUdeviceptr d = upload(x, sizeof x, a), e2;
    CHECK(L.cuMemAlloc(&e2, sizeof x) == CUDA_SUCCESS, "alloc");
    long n = 100;
    void *args[] = {&d, &n};
    CUevent ev;
    L.cuEventCreate(&ev, 0);
    /* a: x += 1 twice, record; b: waits, copies x to e2 */
    CHECK(L.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, a, args, NULL) == CUDA_SUCCESS, "launch");
    CHECK(L.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, a, args, NULL) == CUDA_SUCCESS, "launch");
    CHECK(L.cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, a, args, NULL) == CUDA_ERROR_INVALID_VALUE,
          "a block of 2048 threads");
    L.cuEventRecord(ev, a);
    L.cuStreamWaitEvent(b, ev, 0);
    L.cuMemcpyDtoDAsync(e2, d, sizeof x, b);
    float y[100];
    download(y, e2, sizeof y, b);
    int ok = 1;
    for (int i = 0; i < 100; i++)
        ok &= y[i] == (float)i + 2;
    CHECK(ok, "the event orders b's copy after a's kernels");

    /* capture: a forks into b, b joins back */
    CUevent fork, join;
    L.cuEventCreate(&fork, 0);
    L.cuEventCreate(&join, 0);
    CUgraph graph;
    CHECK(L.cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    L.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, a, args, NULL);
    L.cuEventRecord(fork, a);
    L.cuStreamWaitEvent(b, fork, 0);
    L.cuMemcpyDtoDAsync(e2, d, sizeof x, b);
    L.cuEventRecord(join, b);
    L.cuStreamWaitEvent(a, join, 0);
    CHECK(L.cuStreamEndCapture(a, &graph) == CUDA_SUCCESS, "end of a joined capture");
    n = 1; /* the capture holds the arguments' values: replays still see 100 */
    download(y, d, sizeof y, a);
    CHECK(y[0] == 2, "captured work did not run: x[0] = %g", y[0]);
    CUgraphExec exec;
    CHECK(L.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS, "instantiate");
    L.cuGraphDestroy(graph);
    CHECK(L.cuGraphLaunch(exec, a) == CUDA_SUCCESS && L.cuGraphLaunch(exec, a) == CUDA_SUCCESS, "launch");
    download(y, e2, sizeof y, a);
    CHECK(y[0] == 4 && y[99] == 103, "two replays: e2[0] = %g e2[99] = %g, want 4 and 103", y[0], y[99]);
    n = 100;
    L.cuGraphExecDestroy(exec);

    CHECK(L.cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    L.cuEventRecord(fork, a);
    L.cuStreamWaitEvent(b, fork, 0);
    L.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, b, args, NULL);
    CHECK(L.cuStreamEndCapture(a, &graph) == CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "unjoined capture");

    CHECK(L.cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    CHECK(L.cuStreamSynchronize(a) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "sync while capturing");
    CHECK(L.cuMemcpyDtoHAsync(y, d, 4, a) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "host copy in capture");
    CHECK(L.cuStreamEndCapture(a, &graph) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "invalidated capture");
    CUdeviceptr q;
    CHECK(L.cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    CHECK(L.cuMemAlloc(&q, 64) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuMemAlloc in a capture");
    CHECK(L.cuStreamEndCapture(a, &graph) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "invalidated capture");
    download(y, d, sizeof y, a);
    CHECK(y[0] == 4, "nothing of the failed captures ran: x[0] = %g", y[0]);

    L.cuEventDestroy(ev);
    L.cuEventDestroy(fork);
    L.cuEventDestroy(join);
    L.cuMemFree(d);
    L.cuMemFree(e2);
    L.cuModuleUnload(mod);
}

/* A failing kernel: its error comes at the next synchronization, then every call has it. */
static void test_sticky(void)
{
    L.cuCtxSetCurrent(ctx[1]);
    CUmodule mod;
    CUfunction g;
    CUstream s;
    L.cuStreamCreate(&s, 0);
    L.cuModuleLoadData(&mod, ptx);
    L.cuModuleGetFunction(&g, mod, "always_fails");
    CHECK(L.cuLaunchKernel(g, 1, 1, 1, 1, 1, 1, 0, s, (void *[]){NULL}, NULL) == CUDA_SUCCESS,
          "launch is asynchronous");
    CHECK(L.cuStreamSynchronize(s) == CUDA_ERROR_LAUNCH_FAILED, "the failure at sync");
    CUdeviceptr p;
    CHECK(L.cuMemAlloc(&p, 16) == CUDA_ERROR_LAUNCH_FAILED, "sticky");
    L.cuCtxSetCurrent(ctx[0]);
}

/* ---------------------------------------------------------------- cuBLASLt */

static void test_matmul(CUstream s, cudaDataType t, int ta, int tb, int batch, cublasLtEpilogue_t epi)
{
    const int m = 5, n = 4, k = 3;
    int lda = ta ? k + 1 : m + 2, ldb = tb ? n : k, ldc = m + 1;
    int acols = ta ? m : k, bcols = tb ? k : n;
    int64_t sa = (int64_t)lda * acols, sb = (int64_t)ldb * bcols, sc = (int64_t)ldc * n;
    size_t es = t == CUDA_R_32F ? 4 : 2;
    unsigned seed = 7;
    size_t na = (size_t)(sa * batch), nb = (size_t)(sb * batch), nc = (size_t)(sc * batch);
    void *A = calloc(na, es), *B = calloc(nb, es), *C = calloc(nc, es), *bias = calloc((size_t)m, es);
    for (size_t i = 0; i < na; i++)
        tstore(A, (int64_t)i, t, frand(&seed));
    for (size_t i = 0; i < nb; i++)
        tstore(B, (int64_t)i, t, frand(&seed));
    for (size_t i = 0; i < nc; i++)
        tstore(C, (int64_t)i, t, frand(&seed));
    for (int i = 0; i < m; i++)
        tstore(bias, i, t, frand(&seed));
    float alpha = 1.5f, beta = 0.5f;
    double *want = calloc(nc, sizeof *want);
    for (int bt = 0; bt < batch; bt++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int l = 0; l < k; l++)
                    acc += tload(A, bt * sa + (ta ? l + i * lda : i + l * lda), t) *
                           tload(B, bt * sb + (tb ? j + l * ldb : l + j * ldb), t);
                double v = alpha * acc + beta * tload(C, bt * sc + i + j * ldc, t);
                if (epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_RELU_BIAS)
                    v += tload(bias, i, t);
                if ((epi == CUBLASLT_EPILOGUE_RELU || epi == CUBLASLT_EPILOGUE_RELU_BIAS) && v < 0)
                    v = 0;
                want[bt * sc + i + j * ldc] = v;
            }
    CUdeviceptr dA = upload(A, na * es, s), dB = upload(B, nb * es, s), dC = upload(C, nc * es, s);
    CUdeviceptr dbias = upload(bias, (size_t)m * es, s);
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    L.cublasLtCreate(&h);
    L.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t tra = ta ? CUBLAS_OP_T : CUBLAS_OP_N, trb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    L.cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tra, sizeof tra);
    L.cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &trb, sizeof trb);
    uint32_t e = epi;
    L.cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    void *bp = (void *)(uintptr_t)dbias;
    L.cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
    L.cublasLtMatrixLayoutCreate(&la, t, (uint64_t)(ta ? k : m), (uint64_t)acols, lda);
    L.cublasLtMatrixLayoutCreate(&lb, t, (uint64_t)(tb ? n : k), (uint64_t)bcols, ldb);
    L.cublasLtMatrixLayoutCreate(&lc, t, (uint64_t)m, (uint64_t)n, ldc);
    int32_t bc = batch;
    cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
    int64_t strides[3] = {sa, sb, sc};
    for (int i = 0; i < 3; i++) {
        L.cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        L.cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &strides[i], sizeof strides[i]);
    }
    void *pA = (void *)(uintptr_t)dA, *pB = (void *)(uintptr_t)dB, *pC = (void *)(uintptr_t)dC;
    cublasStatus_t st = L.cublasLtMatmul(h, op, &alpha, pA, la, pB, lb, &beta, pC, lc, pC, lc,
                                         NULL, NULL, 0, (cudaStream_t)s);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul: status %d", (int)st);
    /* B's layout as C's: the shapes disagree */
    CHECK(L.cublasLtMatmul(h, op, &alpha, pA, la, pC, lc, &beta, pC, lc, pC, lc, NULL, NULL, 0,
                           (cudaStream_t)s) == CUBLAS_STATUS_INVALID_VALUE,
          "shapes that disagree");
    download(C, dC, nc * es, s);
    float *got = calloc(nc, sizeof *got);
    double *wantc = calloc(nc, sizeof *wantc);
    int cnt = 0;
    for (int bt = 0; bt < batch; bt++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++, cnt++) {
                got[cnt] = (float)tload(C, bt * sc + i + j * ldc, t);
                wantc[cnt] = want[bt * sc + i + j * ldc];
            }
    char what[128];
    snprintf(what, sizeof what, "matmul type %d ta %d tb %d batch %d epilogue %d", (int)t, ta, tb,
             batch, (int)epi);
    CHECK(close_to(what, got, wantc, cnt, t == CUDA_R_32F ? 1e-6 : 1e-2, t == CUDA_R_32F ? 1e-6 : 1e-2),
          "%s", what);
    L.cublasLtMatrixLayoutDestroy(la);
    L.cublasLtMatrixLayoutDestroy(lb);
    L.cublasLtMatrixLayoutDestroy(lc);
    L.cublasLtMatmulDescDestroy(op);
    L.cublasLtDestroy(h);
    L.cuMemFree(dA);
    L.cuMemFree(dB);
    L.cuMemFree(dC);
    L.cuMemFree(dbias);
    free(A), free(B), free(C), free(bias), free(want), free(got), free(wantc);
}

/* ---------------------------------------------------------------- cuDNN */

static void test_conv(CUstream s)
{
    enum { N = 2, C = 4, H = 7, W = 6, K = 6, G = 2, R = 3, S = 3, PAD = 1, STR = 2 };
    const int P = (H + 2 * PAD - R) / STR + 1, Q = (W + 2 * PAD - S) / STR + 1;
    const int nx = N * C * H * W, nw = K * (C / G) * R * S, ny = N * K * P * Q;
    float *x = calloc(nx, 4), *w = calloc(nw, 4), *y = calloc(ny, 4), *got = calloc(nx + nw + ny, 4);
    double *rx = calloc(nx, 8), *rw = calloc(nw, 8), *ry = calloc(ny, 8);
    unsigned seed = 3;
    for (int i = 0; i < nx; i++)
        x[i] = frand(&seed);
    for (int i = 0; i < nw; i++)
        w[i] = frand(&seed);
    for (int i = 0; i < ny; i++)
        y[i] = frand(&seed); /* the output's old value (beta) and dy */
    /* direct loops: ry = conv(x, w) + 0.5 y; rx = convT(y, w); rw = corr(y, x) */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    int iy = ((n * K + k) * P + p) * Q + q, g = k / (K / G);
                    double acc = 0;
                    for (int c = 0; c < C / G; c++)
                        for (int r = 0; r < R; r++)
                            for (int t = 0; t < S; t++) {
                                int hh = p * STR - PAD + r, ww = q * STR - PAD + t;
                                if (hh < 0 || hh >= H || ww < 0 || ww >= W)
                                    continue;
                                int ix = ((n * C + g * (C / G) + c) * H + hh) * W + ww;
                                int iw = ((k * (C / G) + c) * R + r) * S + t;
                                acc += (double)x[ix] * w[iw];
                                rx[ix] += (double)y[iy] * w[iw];
                                rw[iw] += (double)y[iy] * x[ix];
                            }
                    ry[iy] = acc + 0.5 * y[iy];
                }
    CUdeviceptr dx = upload(x, nx * 4, s), dw = upload(w, nw * 4, s), dy = upload(y, ny * 4, s);
    cudnnHandle_t h;
    cudnnTensorDescriptor_t tx, ty, tbad;
    cudnnFilterDescriptor_t fw;
    cudnnConvolutionDescriptor_t cv;
    CHECK(L.cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
    L.cudnnSetStream(h, (cudaStream_t)s);
    L.cudnnCreateTensorDescriptor(&tx);
    L.cudnnCreateTensorDescriptor(&ty);
    L.cudnnCreateTensorDescriptor(&tbad);
    L.cudnnCreateFilterDescriptor(&fw);
    L.cudnnCreateConvolutionDescriptor(&cv);
    L.cudnnSetTensor4dDescriptor(tx, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W);
    L.cudnnSetTensor4dDescriptor(ty, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, P, Q);
    L.cudnnSetTensor4dDescriptor(tbad, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, P + 1, Q);
    L.cudnnSetFilter4dDescriptor(fw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C / G, R, S);
    L.cudnnSetConvolution2dDescriptor(cv, PAD, PAD, STR, STR, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    L.cudnnSetConvolutionGroupCount(cv, G);
    /* exact fp32 (DEFAULT_MATH may run TF32: test_conv_math) */
    CHECK(L.cudnnSetConvolutionMathType(cv, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS, "FMA math");
    float one = 1, half = 0.5f, zero = 0;
    void *px = (void *)(uintptr_t)dx, *pw = (void *)(uintptr_t)dw, *py = (void *)(uintptr_t)dy;
    /* each call with the workspace its algorithm needs, as cuDNN says */
    size_t need[3] = {0, 0, 0};
    CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(h, tx, fw, cv, ty, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                    &need[0]) == CUDNN_STATUS_SUCCESS &&
          L.cudnnGetConvolutionBackwardDataWorkspaceSize(h, fw, ty, cv, tx, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                                         &need[1]) == CUDNN_STATUS_SUCCESS &&
          L.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, tx, ty, cv, fw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                           &need[2]) == CUDNN_STATUS_SUCCESS,
          "workspace sizes");
    CUdeviceptr dws;
    L.cuMemAlloc(&dws, need[0] + need[1] + need[2]);
    void *ws = (void *)(uintptr_t)dws;
    CHECK(L.cudnnConvolutionForward(h, &one, tx, px, fw, pw, cv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                    ws, need[0], &half, tbad, py) == CUDNN_STATUS_BAD_PARAM, "y of wrong dims");
    /* backward first: they read y as dy before the forward overwrites it */
    CUdeviceptr dx2, dw2;
    L.cuMemAlloc(&dx2, nx * 4);
    L.cuMemAlloc(&dw2, nw * 4);
    void *px2 = (void *)(uintptr_t)dx2, *pw2 = (void *)(uintptr_t)dw2;
    CHECK(L.cudnnConvolutionBackwardData(h, &one, fw, pw, ty, py, cv, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                         ws, need[1], &zero, tx, px2) == CUDNN_STATUS_SUCCESS, "bwd data");
    CHECK(L.cudnnConvolutionBackwardFilter(h, &one, tx, px, ty, py, cv, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                           ws, need[2], &zero, fw, pw2) == CUDNN_STATUS_SUCCESS, "bwd filter");
    CHECK(L.cudnnConvolutionForward(h, &one, tx, px, fw, pw, cv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                    ws, need[0], &half, ty, py) == CUDNN_STATUS_SUCCESS, "forward");
    download(got, dy, ny * 4, s);
    CHECK(close_to("conv forward", got, ry, ny, 1e-5, 1e-5), "conv forward");
    download(got, dx2, nx * 4, s);
    CHECK(close_to("conv backward data", got, rx, nx, 1e-5, 1e-5), "conv backward data");
    download(got, dw2, nw * 4, s);
    CHECK(close_to("conv backward filter", got, rw, nw, 1e-5, 1e-5), "conv backward filter");
    /* the fused forward takes IDENTITY only with IMPLICIT_PRECOMP_GEMM */
    cudnnActivationDescriptor_t act;
    cudnnTensorDescriptor_t tb;
    L.cudnnCreateActivationDescriptor(&act);
    L.cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_IDENTITY, CUDNN_PROPAGATE_NAN, 0);
    L.cudnnCreateTensorDescriptor(&tb);
    L.cudnnSetTensor4dDescriptor(tb, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1);
    CHECK(L.cudnnConvolutionBiasActivationForward(h, &one, tx, px, fw, pw, cv,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need[0], &zero, ty,
                                                  py, tb, pw, act, ty, py) == CUDNN_STATUS_NOT_SUPPORTED,
          "identity activation with another algorithm");
    CHECK(L.cudnnConvolutionBiasActivationForward(h, &one, tx, px, fw, pw, cv,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need[0],
                                                  &zero, ty, py, tb, pw, act, ty, py) == CUDNN_STATUS_SUCCESS,
          "fused forward");
    download(got, dy, ny * 4, s);
    for (int i = 0; i < ny; i++)
        ry[i] = ry[i] - 0.5 * y[i] + w[i / (P * Q) % K];
    CHECK(close_to("fused forward", got, ry, ny, 1e-5, 1e-5), "fused forward");
    L.cudnnDestroyActivationDescriptor(act);
    L.cudnnDestroyTensorDescriptor(tb);
    L.cudnnDestroyTensorDescriptor(tx);
    L.cudnnDestroyTensorDescriptor(ty);
    L.cudnnDestroyTensorDescriptor(tbad);
    L.cudnnDestroyFilterDescriptor(fw);
    L.cudnnDestroyConvolutionDescriptor(cv);
    L.cudnnDestroy(h);
    L.cuMemFree(dx), L.cuMemFree(dw), L.cuMemFree(dy), L.cuMemFree(dx2), L.cuMemFree(dw2);
    L.cuMemFree(dws);
    free(x), free(w), free(y), free(got), free(rx), free(rw), free(ry);
}

/* cudnnConvolutionBiasActivationForward refuses what the real one is not
 * documented to run (codegen asks for none of it): BFLOAT16, NHWC tensors, a
 * KRSC filter, an activation other than RELU and IDENTITY; the same call in
 * fp32, NCHW, with RELU runs. */
static void test_conv_fused_refusals(CUstream s)
{
    enum { N = 2, C = 3, H = 5, K = 4 };
    cudnnHandle_t h;
    cudnnTensorDescriptor_t tx, ty, tb, nx, ny, bx, by, bb;
    cudnnFilterDescriptor_t fw, krsc, bw;
    cudnnConvolutionDescriptor_t cv;
    cudnnActivationDescriptor_t relu, sigmoid;
    CHECK(L.cudnnCreate(&h) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
    L.cudnnSetStream(h, (cudaStream_t)s);
    cudnnTensorDescriptor_t *ts[] = {&tx, &ty, &tb, &nx, &ny, &bx, &by, &bb};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        L.cudnnCreateTensorDescriptor(ts[i]);
    L.cudnnCreateFilterDescriptor(&fw);
    L.cudnnCreateFilterDescriptor(&krsc);
    L.cudnnCreateFilterDescriptor(&bw);
    L.cudnnCreateConvolutionDescriptor(&cv);
    L.cudnnCreateActivationDescriptor(&relu);
    L.cudnnCreateActivationDescriptor(&sigmoid);
    L.cudnnSetTensor4dDescriptor(tx, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, H);
    L.cudnnSetTensor4dDescriptor(ty, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, H);
    L.cudnnSetTensor4dDescriptor(tb, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1);
    L.cudnnSetTensor4dDescriptor(nx, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, C, H, H);
    L.cudnnSetTensor4dDescriptor(ny, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, K, H, H);
    L.cudnnSetTensor4dDescriptor(bx, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, N, C, H, H);
    L.cudnnSetTensor4dDescriptor(by, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, N, K, H, H);
    L.cudnnSetTensor4dDescriptor(bb, CUDNN_TENSOR_NCHW, CUDNN_DATA_BFLOAT16, 1, K, 1, 1);
    L.cudnnSetFilter4dDescriptor(fw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, 3, 3);
    L.cudnnSetFilter4dDescriptor(krsc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, K, C, 3, 3);
    L.cudnnSetFilter4dDescriptor(bw, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NCHW, K, C, 3, 3);
    L.cudnnSetConvolution2dDescriptor(cv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT);
    L.cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0);
    CHECK(L.cudnnSetActivationDescriptor(sigmoid, CUDNN_ACTIVATION_SIGMOID, CUDNN_NOT_PROPAGATE_NAN,
                                         0) == CUDNN_STATUS_SUCCESS, "a sigmoid descriptor");
    CUdeviceptr dx, dw, dy, db;
    L.cuMemAlloc(&dx, N * C * H * H * 4);
    L.cuMemAlloc(&dw, K * C * 3 * 3 * 4);
    L.cuMemAlloc(&dy, N * K * H * H * 4);
    L.cuMemAlloc(&db, K * 4);
    void *px = (void *)(uintptr_t)dx, *pw = (void *)(uintptr_t)dw, *py = (void *)(uintptr_t)dy,
         *pb = (void *)(uintptr_t)db;
    float one = 1, zero = 0;
    const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    size_t wsb = 0;
    CUdeviceptr dws;
    L.cudnnGetConvolutionForwardWorkspaceSize(h, tx, fw, cv, ty, algo, &wsb);
    L.cuMemAlloc(&dws, wsb);
    void *ws = (void *)(uintptr_t)dws;
#define FUSED(x, w, y, b, act)                                                                   \
    L.cudnnConvolutionBiasActivationForward(h, &one, x, px, w, pw, cv, algo, ws, wsb, &zero, y,  \
                                            py, b, pb, act, y, py)
    CHECK(FUSED(bx, bw, by, bb, relu) == CUDNN_STATUS_NOT_SUPPORTED, "bf16");
    CHECK(FUSED(tx, fw, ty, bb, relu) == CUDNN_STATUS_NOT_SUPPORTED, "a bf16 bias");
    CHECK(FUSED(nx, fw, ny, tb, relu) == CUDNN_STATUS_NOT_SUPPORTED, "NHWC tensors");
    CHECK(FUSED(tx, krsc, ty, tb, relu) == CUDNN_STATUS_NOT_SUPPORTED, "a KRSC filter");
    CHECK(FUSED(tx, fw, ty, tb, sigmoid) == CUDNN_STATUS_NOT_SUPPORTED, "a sigmoid");
    CHECK(FUSED(tx, fw, ty, tb, relu) == CUDNN_STATUS_SUCCESS, "fp32, NCHW, RELU");
#undef FUSED
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS, "the fused call runs");
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        L.cudnnDestroyTensorDescriptor(*ts[i]);
    L.cudnnDestroyFilterDescriptor(fw);
    L.cudnnDestroyFilterDescriptor(krsc);
    L.cudnnDestroyFilterDescriptor(bw);
    L.cudnnDestroyConvolutionDescriptor(cv);
    L.cudnnDestroyActivationDescriptor(relu);
    L.cudnnDestroyActivationDescriptor(sigmoid);
    L.cudnnDestroy(h);
    L.cuMemFree(dx), L.cuMemFree(dw), L.cuMemFree(dy), L.cuMemFree(db), L.cuMemFree(dws);
}

/* ---------------------------------------------------------------- workspaces, math, first calls */

/* D = A B of 8 x 8 fp32 matrices, A all 1 and B all 2, for the tests below. */
typedef struct {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    CUdeviceptr a, b, d;
} small_mm;

enum { MM = 8 };

static void small_mm_open(small_mm *g, CUstream s)
{
    float a[MM * MM], b[MM * MM];
    for (int i = 0; i < MM * MM; i++)
        a[i] = 1, b[i] = 2;
    g->a = upload(a, sizeof a, s);
    g->b = upload(b, sizeof b, s);
    L.cuMemAlloc(&g->d, sizeof a);
    CHECK(L.cublasLtCreate(&g->h) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
    L.cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    L.cublasLtMatrixLayoutCreate(&g->l, CUDA_R_32F, MM, MM, MM);
}

static cublasStatus_t small_mm_run(small_mm *g, const cublasLtMatmulAlgo_t *algo, CUdeviceptr ws,
                                   size_t wsb, CUstream s)
{
    float one = 1, zero = 0;
    return L.cublasLtMatmul(g->h, g->op, &one, (void *)(uintptr_t)g->a, g->l, (void *)(uintptr_t)g->b,
                            g->l, &zero, (void *)(uintptr_t)g->d, g->l, (void *)(uintptr_t)g->d, g->l,
                            algo, (void *)(uintptr_t)ws, wsb, (cudaStream_t)s);
}

/* 1 when D holds A B */
static int small_mm_ok(small_mm *g, CUstream s)
{
    float d[MM * MM];
    download(d, g->d, sizeof d, s);
    for (int i = 0; i < MM * MM; i++)
        if (d[i] != 2 * MM)
            return 0;
    return 1;
}

static void small_mm_close(small_mm *g)
{
    L.cublasLtMatrixLayoutDestroy(g->l);
    L.cublasLtMatmulDescDestroy(g->op);
    L.cublasLtDestroy(g->h);
    L.cuMemFree(g->a), L.cuMemFree(g->b), L.cuMemFree(g->d);
}

/* cuBLASLt's heuristic offers an algorithm that needs workspace where the
 * preference allows some (then one that needs none); cublasLtMatmul refuses
 * a call that gives less than its algorithm needs (INVALID_VALUE, as
 * cublasLt.h says), or a workspace beyond its allocation. */
static void test_matmul_workspace(CUstream s)
{
    small_mm g;
    small_mm_open(&g, s);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t r[4], chk;
    int found = 0;
    L.cublasLtMatmulPreferenceCreate(&pref);
    CHECK(L.cublasLtMatmulAlgoGetHeuristic(g.h, g.op, g.l, g.l, g.l, g.l, pref, 4, r, &found) ==
          CUBLAS_STATUS_SUCCESS && found == 1 && r[0].workspaceSize == 0,
          "no workspace allowed (the preference's default): one algorithm, needing none (%d found)", found);
    uint64_t max = 8u << 20;
    L.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max, sizeof max);
    CHECK(L.cublasLtMatmulAlgoGetHeuristic(g.h, g.op, g.l, g.l, g.l, g.l, pref, 4, r, &found) ==
          CUBLAS_STATUS_SUCCESS && found == 2 && r[0].workspaceSize == 1u << 20 && r[1].workspaceSize == 0,
          "8 MiB allowed: the first needs 1 MiB, the second none (%d found, %zu and %zu bytes)", found,
          r[0].workspaceSize, r[1].workspaceSize);
    CHECK(L.cublasLtMatmulAlgoGetHeuristic(g.h, g.op, g.l, g.l, g.l, g.l, pref, 1, r, &found) ==
          CUBLAS_STATUS_SUCCESS && found == 1 && r[0].workspaceSize == 1u << 20, "one requested: the first");
    CHECK(L.cublasLtMatmulAlgoCheck(g.h, g.op, g.l, g.l, g.l, g.l, &r[0].algo, &chk) == CUBLAS_STATUS_SUCCESS &&
          chk.workspaceSize == 1u << 20, "cublasLtMatmulAlgoCheck reports the algorithm's workspace");
    L.cublasLtMatmulAlgoGetHeuristic(g.h, g.op, g.l, g.l, g.l, g.l, pref, 4, r, &found);
    CUdeviceptr ws, small;
    L.cuMemAlloc(&ws, 1u << 20);
    L.cuMemAlloc(&small, 4096);
    CHECK(small_mm_run(&g, &r[0].algo, 0, 0, s) == CUBLAS_STATUS_INVALID_VALUE,
          "the first algorithm without workspace");
    CHECK(small_mm_run(&g, &r[0].algo, ws, (1u << 20) - 256, s) == CUBLAS_STATUS_INVALID_VALUE,
          "the first algorithm with less workspace than it needs");
    CHECK(small_mm_run(&g, &r[0].algo, small, 1u << 20, s) == CUBLAS_STATUS_INVALID_VALUE,
          "a workspace beyond its allocation");
    CHECK(small_mm_run(&g, &r[0].algo, ws, 1u << 20, s) == CUBLAS_STATUS_SUCCESS && small_mm_ok(&g, s),
          "the first algorithm with its workspace");
    L.cuMemsetD8Async(g.d, 0, MM * MM * 4, s);
    CHECK(small_mm_run(&g, &r[1].algo, 0, 0, s) == CUBLAS_STATUS_SUCCESS && small_mm_ok(&g, s),
          "the second algorithm needs none");
    CHECK(small_mm_run(&g, NULL, 0, 0, s) == CUBLAS_STATUS_SUCCESS, "no algo: the default preference's");
    L.cublasLtMatmulPreferenceDestroy(pref);
    L.cuMemFree(ws), L.cuMemFree(small);
    small_mm_close(&g);
}

/* A convolution's descriptors and memory: x [2, 4, 6, 6] and a 3x3 filter
 * of 4, padding 1, stride str, fp32 NCHW; a bias of K and a ReLU for the
 * fused call. */
typedef struct {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t cv;
    cudnnActivationDescriptor_t relu;
    CUdeviceptr dx, dw, dy, db;
} small_conv;

enum { CN = 2, CC = 4, CH = 6, CK = 4 };

static void small_conv_open(small_conv *c, int str, CUstream s)
{
    int p = (CH + 2 - 3) / str + 1;
    CHECK(L.cudnnCreate(&c->h) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
    L.cudnnSetStream(c->h, (cudaStream_t)s);
    L.cudnnCreateTensorDescriptor(&c->x);
    L.cudnnCreateTensorDescriptor(&c->y);
    L.cudnnCreateTensorDescriptor(&c->b);
    L.cudnnCreateFilterDescriptor(&c->w);
    L.cudnnCreateConvolutionDescriptor(&c->cv);
    L.cudnnCreateActivationDescriptor(&c->relu);
    L.cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, CN, CC, CH, CH);
    L.cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, CN, CK, p, p);
    L.cudnnSetTensor4dDescriptor(c->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CK, 1, 1);
    L.cudnnSetFilter4dDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CK, CC, 3, 3);
    L.cudnnSetConvolution2dDescriptor(c->cv, 1, 1, str, str, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    L.cudnnSetActivationDescriptor(c->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0);
    L.cuMemAlloc(&c->dx, CN * CC * CH * CH * 4);
    L.cuMemAlloc(&c->dw, CK * CC * 9 * 4);
    L.cuMemAlloc(&c->dy, CN * CK * p * p * 4);
    L.cuMemAlloc(&c->db, CK * 4);
    L.cuMemsetD8Async(c->dx, 0, CN * CC * CH * CH * 4, s);
    L.cuMemsetD8Async(c->dw, 0, CK * CC * 9 * 4, s);
    L.cuMemsetD8Async(c->dy, 0, CN * CK * p * p * 4, s);
    L.cuMemsetD8Async(c->db, 0, CK * 4, s);
}

/* kind 0 forward, 1 backward data, 2 backward filter, 3 fused forward */
static cudnnStatus_t small_conv_run(small_conv *c, int kind, int algo, CUdeviceptr ws, size_t wsb)
{
    float one = 1, zero = 0;
    void *x = (void *)(uintptr_t)c->dx, *w = (void *)(uintptr_t)c->dw, *y = (void *)(uintptr_t)c->dy;
    void *b = (void *)(uintptr_t)c->db, *p = (void *)(uintptr_t)ws;
    switch (kind) {
    case 0:
        return L.cudnnConvolutionForward(c->h, &one, c->x, x, c->w, w, c->cv, (cudnnConvolutionFwdAlgo_t)algo,
                                         p, wsb, &zero, c->y, y);
    case 1:
        return L.cudnnConvolutionBackwardData(c->h, &one, c->w, w, c->y, y, c->cv,
                                              (cudnnConvolutionBwdDataAlgo_t)algo, p, wsb, &zero, c->x, x);
    case 2:
        return L.cudnnConvolutionBackwardFilter(c->h, &one, c->x, x, c->y, y, c->cv,
                                                (cudnnConvolutionBwdFilterAlgo_t)algo, p, wsb, &zero, c->w, w);
    default:
        return L.cudnnConvolutionBiasActivationForward(c->h, &one, c->x, x, c->w, w, c->cv,
                                                       (cudnnConvolutionFwdAlgo_t)algo, p, wsb, &zero, c->y, y,
                                                       c->b, b, c->relu, c->y, y);
    }
}

static void small_conv_close(small_conv *c)
{
    L.cudnnDestroyTensorDescriptor(c->x);
    L.cudnnDestroyTensorDescriptor(c->y);
    L.cudnnDestroyTensorDescriptor(c->b);
    L.cudnnDestroyFilterDescriptor(c->w);
    L.cudnnDestroyConvolutionDescriptor(c->cv);
    L.cudnnDestroyActivationDescriptor(c->relu);
    L.cudnnDestroy(c->h);
    L.cuMemFree(c->dx), L.cuMemFree(c->dw), L.cuMemFree(c->dy), L.cuMemFree(c->db);
}

/* cuDNN's algorithms need workspace by the problem: the sizes, the _v7
 * lists (the first needs workspace, one needs none, the math listed is
 * DEFAULT_MATH) and cudnnFind's (too little workspace: ALLOC_FAILED); a call
 * with less workspace than its algorithm needs is BAD_PARAM, an algorithm
 * that does not run the problem NOT_SUPPORTED. */
static void test_conv_algorithms(CUstream s)
{
    small_conv c, c2;
    small_conv_open(&c, 1, s);
    small_conv_open(&c2, 2, s);
    size_t sz = 1;
    CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.x, c.w, c.cv, c.y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                    &sz) == CUDNN_STATUS_SUCCESS && sz == 0,
          "IMPLICIT_GEMM needs no workspace: %zu", sz);
    const cudnnConvolutionFwdAlgo_t some[] = {
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED};
    for (size_t i = 0; i < sizeof some / sizeof *some; i++) {
        sz = 0;
        CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.x, c.w, c.cv, c.y, some[i], &sz) ==
              CUDNN_STATUS_SUCCESS && sz > 0, "forward algorithm %d needs workspace: %zu", (int)some[i], sz);
    }
    CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.x, c.w, c.cv, c.y, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
                                                    &sz) == CUDNN_STATUS_NOT_SUPPORTED, "DIRECT is not implemented");
    CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(c2.h, c2.x, c2.w, c2.cv, c2.y,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &sz) ==
          CUDNN_STATUS_NOT_SUPPORTED, "WINOGRAD with stride 2");
    CHECK(L.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.x, c.w, c.cv, c.y, (cudnnConvolutionFwdAlgo_t)42, &sz) ==
          CUDNN_STATUS_BAD_PARAM, "no such algorithm");
    CHECK(L.cudnnGetConvolutionBackwardDataWorkspaceSize(c.h, c.w, c.y, c.cv, c.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                         &sz) == CUDNN_STATUS_SUCCESS && sz == 0 &&
          L.cudnnGetConvolutionBackwardFilterWorkspaceSize(c.h, c.x, c.y, c.cv, c.w,
                                                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, &sz) ==
          CUDNN_STATUS_SUCCESS && sz > 0, "backward workspaces: ALGO_0 none, the filter's ALGO_3 some");

    /* the lists: every algorithm, the first with workspace, one without */
    cudnnConvolutionFwdAlgoPerf_t f[8];
    cudnnConvolutionBwdDataAlgoPerf_t bd[8];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[8];
    int nf = 0, nbd = 0, nbf = 0;
    CHECK(L.cudnnGetConvolutionForwardAlgorithm_v7(c.h, c.x, c.w, c.cv, c.y, 8, &nf, f) == CUDNN_STATUS_SUCCESS &&
          L.cudnnGetConvolutionBackwardDataAlgorithm_v7(c.h, c.w, c.y, c.cv, c.x, 8, &nbd, bd) ==
          CUDNN_STATUS_SUCCESS &&
          L.cudnnGetConvolutionBackwardFilterAlgorithm_v7(c.h, c.x, c.y, c.cv, c.w, 8, &nbf, bf) ==
          CUDNN_STATUS_SUCCESS && nf == 8 && nbd == 6 && nbf == 7,
          "the _v7 lists: %d, %d and %d algorithms", nf, nbd, nbf);
    int zero_f = 0, zero_bd = 0, zero_bf = 0, sizes = 1, math = 1;
    for (int i = 0; i < nf; i++) {
        zero_f += f[i].status == CUDNN_STATUS_SUCCESS && f[i].memory == 0;
        math &= f[i].mathType == CUDNN_DEFAULT_MATH;
        if (f[i].status == CUDNN_STATUS_SUCCESS) {
            L.cudnnGetConvolutionForwardWorkspaceSize(c.h, c.x, c.w, c.cv, c.y, f[i].algo, &sz);
            sizes &= sz == f[i].memory;
        }
    }
    for (int i = 0; i < nbd; i++)
        zero_bd += bd[i].status == CUDNN_STATUS_SUCCESS && bd[i].memory == 0, math &= bd[i].mathType == CUDNN_DEFAULT_MATH;
    for (int i = 0; i < nbf; i++)
        zero_bf += bf[i].status == CUDNN_STATUS_SUCCESS && bf[i].memory == 0, math &= bf[i].mathType == CUDNN_DEFAULT_MATH;
    CHECK(f[0].status == CUDNN_STATUS_SUCCESS && f[0].memory > 0 && bd[0].status == CUDNN_STATUS_SUCCESS &&
          bd[0].memory > 0 && bf[0].status == CUDNN_STATUS_SUCCESS && bf[0].memory > 0,
          "each list's first needs workspace: %zu, %zu, %zu", f[0].memory, bd[0].memory, bf[0].memory);
    CHECK(zero_f && zero_bd && zero_bf, "each list has an algorithm that needs no workspace");
    CHECK(math, "the lists' math is CUDNN_DEFAULT_MATH");
    CHECK(sizes, "the forward list's memory is what cudnnGetConvolutionForwardWorkspaceSize says");
    CHECK(f[nf - 1].algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT && f[nf - 1].status == CUDNN_STATUS_NOT_SUPPORTED,
          "DIRECT listed last, NOT_SUPPORTED");
    L.cudnnGetConvolutionForwardAlgorithm_v7(c2.h, c2.x, c2.w, c2.cv, c2.y, 8, &nf, f);
    CHECK(nf == 8 && f[0].memory > 0 && f[2].status == CUDNN_STATUS_SUCCESS &&
          f[3].status == CUDNN_STATUS_NOT_SUPPORTED,
          "stride 2: the four FFT and Winograd algorithms and DIRECT listed NOT_SUPPORTED, last");

    /* calls: the list's first without its workspace is refused */
    L.cudnnGetConvolutionForwardAlgorithm_v7(c.h, c.x, c.w, c.cv, c.y, 8, &nf, f);
    CUdeviceptr ws, small;
    L.cuMemAlloc(&ws, f[0].memory);
    L.cuMemAlloc(&small, 256);
    CHECK(small_conv_run(&c, 0, f[0].algo, 0, 0) == CUDNN_STATUS_BAD_PARAM,
          "the list's first without workspace");
    CHECK(small_conv_run(&c, 0, f[0].algo, ws, f[0].memory - 1) == CUDNN_STATUS_BAD_PARAM,
          "one byte less than it needs");
    CHECK(small_conv_run(&c, 3, f[0].algo, 0, 0) == CUDNN_STATUS_BAD_PARAM, "the fused call without it");
    CHECK(small_conv_run(&c, 1, bd[0].algo, 0, 0) == CUDNN_STATUS_BAD_PARAM &&
          small_conv_run(&c, 2, bf[0].algo, 0, 0) == CUDNN_STATUS_BAD_PARAM, "the backward calls without it");
    CHECK(small_conv_run(&c, 0, f[0].algo, small + 200, f[0].memory) == CUDNN_STATUS_BAD_PARAM,
          "a workspace beyond its allocation");
    CHECK(small_conv_run(&c, 0, f[0].algo, ws, f[0].memory) == CUDNN_STATUS_SUCCESS, "with its workspace");
    CHECK(small_conv_run(&c, 0, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0, 0) == CUDNN_STATUS_SUCCESS,
          "IMPLICIT_GEMM without workspace");
    CHECK(small_conv_run(&c2, 0, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, ws, f[0].memory) ==
          CUDNN_STATUS_NOT_SUPPORTED, "WINOGRAD run with stride 2");
    CHECK(small_conv_run(&c, 0, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, ws, f[0].memory) == CUDNN_STATUS_NOT_SUPPORTED,
          "DIRECT run");

    /* cudnnFind: what needs more than the workspace given fails to allocate */
    void *x = (void *)(uintptr_t)c.dx, *w = (void *)(uintptr_t)c.dw, *y = (void *)(uintptr_t)c.dy;
    CHECK(L.cudnnFindConvolutionForwardAlgorithmEx(c.h, c.x, x, c.w, w, c.cv, c.y, y, 8, &nf, f, NULL, 0) ==
          CUDNN_STATUS_SUCCESS && nf == 8, "cudnnFind without workspace");
    int ok = 1;
    for (int i = 0; i < nf; i++)
        ok &= f[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT ? f[i].status == CUDNN_STATUS_NOT_SUPPORTED
              : f[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ? f[i].status == CUDNN_STATUS_SUCCESS
                                                                      : f[i].status == CUDNN_STATUS_ALLOC_FAILED;
    CHECK(ok && f[0].memory > 0, "cudnnFind without workspace: only IMPLICIT_GEMM ran");
    CHECK(L.cudnnFindConvolutionForwardAlgorithmEx(c.h, c.x, x, c.w, w, c.cv, c.y, y, 8, &nf, f,
                                                   (void *)(uintptr_t)small, 1u << 20) == CUDNN_STATUS_BAD_PARAM,
          "cudnnFind with a workspace beyond its allocation");
    L.cuMemFree(ws), L.cuMemFree(small);
    small_conv_close(&c);
    small_conv_close(&c2);
}

/* On sm_80 and newer cuDNN may run FLOAT data on TF32 tensor cores unless the
 * math is CUDNN_FMA_MATH: each x = 1 + 2^-12 (which TF32 rounds to 1) times
 * w = 1 over 4 channels is 4 + 2^-10 exactly in fp32, 4 in TF32. */
static void test_conv_math(CUstream s)
{
    cudnnHandle_t h;
    cudnnTensorDescriptor_t tx, ty;
    cudnnFilterDescriptor_t fw;
    cudnnConvolutionDescriptor_t cv;
    L.cudnnCreate(&h);
    L.cudnnSetStream(h, (cudaStream_t)s);
    L.cudnnCreateTensorDescriptor(&tx);
    L.cudnnCreateTensorDescriptor(&ty);
    L.cudnnCreateFilterDescriptor(&fw);
    L.cudnnCreateConvolutionDescriptor(&cv);
    L.cudnnSetTensor4dDescriptor(tx, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 1, 1);
    L.cudnnSetTensor4dDescriptor(ty, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1);
    L.cudnnSetFilter4dDescriptor(fw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 4, 1, 1);
    L.cudnnSetConvolution2dDescriptor(cv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    float x[4], w[4] = {1, 1, 1, 1}, one = 1, zero = 0;
    for (int i = 0; i < 4; i++)
        x[i] = 1 + 0x1p-12f;
    CUdeviceptr dx = upload(x, sizeof x, s), dw = upload(w, sizeof w, s), dy;
    L.cuMemAlloc(&dy, 4);
    const cudnnMathType_t maths[] = {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH};
    const float want[] = {4 + 0x1p-10f, 4, 4};
    for (int i = 0; i < 3; i++) {
        float got = -1;
        L.cudnnSetConvolutionMathType(cv, maths[i]);
        CHECK(L.cudnnConvolutionForward(h, &one, tx, (void *)(uintptr_t)dx, fw, (void *)(uintptr_t)dw, cv,
                                        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, ty,
                                        (void *)(uintptr_t)dy) == CUDNN_STATUS_SUCCESS, "forward");
        download(&got, dy, 4, s);
        CHECK(got == want[i], "math type %d: got %.9g, want %.9g (%s)", (int)maths[i], got, want[i],
              i ? "TF32" : "exact fp32");
    }
    L.cudnnDestroyTensorDescriptor(tx);
    L.cudnnDestroyTensorDescriptor(ty);
    L.cudnnDestroyFilterDescriptor(fw);
    L.cudnnDestroyConvolutionDescriptor(cv);
    L.cudnnDestroy(h);
    L.cuMemFree(dx), L.cuMemFree(dw), L.cuMemFree(dy);
}

/* A library handle's first call sets the library up, which a capture cannot
 * hold: a new cuBLASLt handle's first matmul and a new cuDNN handle's first
 * convolution (each kind) inside a capture are refused (NOT_SUPPORTED) and
 * invalidate it; after one eager call the same handle's call is captured and
 * replays. */
static void test_first_call_in_capture(CUstream s)
{
    CUgraph graph;
    CUgraphExec exec;
    small_mm g;
    small_mm_open(&g, s);
    CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    CHECK(small_mm_run(&g, NULL, 0, 0, s) == CUBLAS_STATUS_NOT_SUPPORTED,
          "a cuBLASLt handle's first matmul inside a capture");
    CHECK(L.cuStreamEndCapture(s, &graph) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
          "the capture is invalidated");
    CHECK(small_mm_run(&g, NULL, 0, 0, s) == CUBLAS_STATUS_SUCCESS && small_mm_ok(&g, s), "eagerly");
    L.cuMemsetD8Async(g.d, 0, MM * MM * 4, s);
    CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS &&
          small_mm_run(&g, NULL, 0, 0, s) == CUBLAS_STATUS_SUCCESS &&
          L.cuStreamEndCapture(s, &graph) == CUDA_SUCCESS, "then captured");
    CHECK(L.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS && L.cuGraphLaunch(exec, s) == CUDA_SUCCESS &&
          small_mm_ok(&g, s), "and replayed");
    L.cuGraphExecDestroy(exec);
    L.cuGraphDestroy(graph);
    small_mm_close(&g);

    static const char *const kinds[] = {"forward", "backward data", "backward filter", "fused forward"};
    const int algos[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
    for (int k = 0; k < 4; k++) {
        small_conv c;
        small_conv_open(&c, 1, s);
        CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
        CHECK(small_conv_run(&c, k, algos[k], 0, 0) == CUDNN_STATUS_NOT_SUPPORTED,
              "a cuDNN handle's first call (%s) inside a capture", kinds[k]);
        CHECK(L.cuStreamEndCapture(s, &graph) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              "the capture is invalidated (%s)", kinds[k]);
        CHECK(small_conv_run(&c, k, algos[k], 0, 0) == CUDNN_STATUS_SUCCESS &&
              L.cuStreamSynchronize(s) == CUDA_SUCCESS, "eagerly (%s)", kinds[k]);
        CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS &&
              small_conv_run(&c, k, algos[k], 0, 0) == CUDNN_STATUS_SUCCESS &&
              L.cuStreamEndCapture(s, &graph) == CUDA_SUCCESS, "then captured (%s)", kinds[k]);
        CHECK(L.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS && L.cuGraphLaunch(exec, s) == CUDA_SUCCESS &&
              L.cuStreamSynchronize(s) == CUDA_SUCCESS, "and replayed (%s)", kinds[k]);
        L.cuGraphExecDestroy(exec);
        L.cuGraphDestroy(graph);
        small_conv_close(&c);
    }
}

/* ---------------------------------------------------------------- NCCL */

static void test_nccl(CUstream s[2])
{
    ncclComm_t comm[2], dup[2];
    CHECK(L.ncclCommInitAll(dup, 2, (int[]){0, 0}) == ncclInvalidUsage, "Duplicate GPU detected");
    CHECK(L.ncclCommInitAll(comm, 2, NULL) == ncclSuccess, "init all");
    enum { n = 6 };
    CUdeviceptr buf[2], gath[2];
    float v[2][n];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < n; i++)
            v[r][i] = (float)(r * 10 + i);
        L.cuCtxSetCurrent(ctx[r]);
        buf[r] = upload(v[r], sizeof v[r], s[r]);
        L.cuMemAlloc(&gath[r], 2 * sizeof v[r]);
    }
    L.ncclGroupStart();
    for (int r = 0; r < 2; r++) {
        void *b = (void *)(uintptr_t)buf[r], *g = (void *)(uintptr_t)gath[r];
        CHECK(L.ncclAllGather(b, g, n, ncclFloat32, comm[r], (cudaStream_t)s[r]) == ncclSuccess, "all_gather");
        CHECK(L.ncclAllReduce(b, b, n, ncclFloat32, ncclSum, comm[r], (cudaStream_t)s[r]) == ncclSuccess,
              "all_reduce");
    }
    CHECK(L.ncclGroupEnd() == ncclSuccess, "group end");
    float got[2][2 * n];
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        download(got[r], buf[r], sizeof v[r], s[r]);
        int ok = 1;
        for (int i = 0; i < n; i++)
            ok &= got[r][i] == v[0][i] + v[1][i];
        CHECK(ok, "all_reduce on rank %d", r);
        download(got[r], gath[r], 2 * sizeof v[r], s[r]);
        ok = 1;
        for (int i = 0; i < 2 * n; i++)
            ok &= got[r][i] == v[i / n][i % n];
        CHECK(ok, "all_gather on rank %d", r);
    }
    /* broadcast from rank 1, then rank 0 sends its buffer to rank 1's gather buffer */
    L.ncclGroupStart();
    for (int r = 0; r < 2; r++)
        L.ncclBroadcast((void *)(uintptr_t)gath[r], (void *)(uintptr_t)buf[r], n, ncclFloat32, 1,
                        comm[r], (cudaStream_t)s[r]);
    L.ncclSend((void *)(uintptr_t)gath[0], n, ncclFloat32, 1, comm[0], (cudaStream_t)s[0]);
    L.ncclRecv((void *)(uintptr_t)buf[1], n, ncclFloat32, 0, comm[1], (cudaStream_t)s[1]);
    CHECK(L.ncclGroupEnd() == ncclSuccess, "group end");
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        download(got[r], buf[r], sizeof v[r], s[r]);
    }
    CHECK(got[0][0] == 0 && got[0][5] == 5 && got[1][0] == 0 && got[1][5] == 5,
          "broadcast then send/recv: %g %g %g %g", got[0][0], got[0][5], got[1][0], got[1][5]);

    /* one thread, two ranks, no group: real NCCL hangs; the fake says why */
    void *b0 = (void *)(uintptr_t)buf[0], *b1 = (void *)(uintptr_t)buf[1];
    CHECK(L.ncclAllReduce(b0, b0, n, ncclFloat32, ncclSum, comm[0], (cudaStream_t)s[0]) == ncclSuccess,
          "rank 0 alone is queued");
    CHECK(L.ncclAllReduce(b1, b1, n, ncclFloat32, ncclSum, comm[1], (cudaStream_t)s[1]) == ncclInvalidUsage,
          "rank 1 outside a group after rank 0");
    L.cuCtxSetCurrent(ctx[0]);
    CHECK(L.cuStreamSynchronize(s[0]) == CUDA_ERROR_LAUNCH_FAILED, "rank 0 waits forever: a deadlock");
    L.ncclGroupStart();
    L.ncclAllReduce(b1, b1, n, ncclFloat32, ncclSum, comm[1], (cudaStream_t)s[1]);
    L.ncclGroupEnd();
    download(got[0], buf[0], sizeof v[0], s[0]);
    CHECK(got[0][1] == 2, "rank 1's part completes the collective: %g", got[0][1]);
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        L.cuStreamSynchronize(s[r]);
        L.cuMemFree(buf[r]);
        L.cuMemFree(gath[r]);
        L.ncclCommDestroy(comm[r]);
    }
    L.cuCtxSetCurrent(ctx[0]);
}

/* Communicators by ncclCommInitRank and ncclCommSplit; a two-device capture. */
static void test_nccl_init_and_capture(CUstream s[2])
{
    ncclUniqueId id;
    ncclComm_t c[2], solo[2];
    L.ncclGetUniqueId(&id);
    L.ncclGroupStart();
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[0]);
        CHECK(L.ncclCommInitRank(&c[r], 2, id, r) == ncclSuccess, "init rank %d", r);
    }
    CHECK(L.ncclGroupEnd() == ncclInvalidUsage, "two ranks on device 0: Duplicate GPU detected");
    L.ncclGetUniqueId(&id);
    L.ncclGroupStart();
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        L.ncclCommInitRank(&c[r], 2, id, r);
    }
    CHECK(L.ncclGroupEnd() == ncclSuccess, "init ranks in a group");
    int n = 0, rank = -1;
    CHECK(L.ncclCommCount(c[1], &n) == ncclSuccess && n == 2 &&
          L.ncclCommUserRank(c[1], &rank) == ncclSuccess && rank == 1, "count and rank");
    CHECK(L.ncclCommSplit(c[0], 0, 0, &solo[0], NULL) == ncclInvalidUsage, "split outside a group");
    ncclConfig_t unmade = {0};
    CHECK(L.ncclCommSplit(c[0], 0, 0, &solo[0], &unmade) == ncclInvalidArgument,
          "a config not made by NCCL_CONFIG_INITIALIZER");
    L.ncclGroupStart();
    for (int r = 0; r < 2; r++)
        L.ncclCommSplit(c[r], r, 0, &solo[r], NULL); /* each rank alone */
    CHECK(L.ncclGroupEnd() == ncclSuccess, "split");
    CHECK(L.ncclCommCount(solo[1], &n) == ncclSuccess && n == 1, "a split of one rank: %d", n);

    /* reduce_scatter on both devices: refused as a communicator's first
       collective inside a capture (its connections would be set up there);
       then run eagerly; then refused again in a capture that holds both
       devices' calls (NCCL: several GPUs per process may deadlock); a
       capture of one device's (a communicator of one rank) replays */
    enum { m = 4 };
    float v[2][2 * m], got[m];
    CUdeviceptr in[2], out[2];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 2 * m; i++)
            v[r][i] = (float)(r + 1) * (float)i;
        L.cuCtxSetCurrent(ctx[r]);
        in[r] = upload(v[r], sizeof v[r], s[r]);
        L.cuMemAlloc(&out[r], m * 4);
        L.cuMemsetD8Async(out[r], 0, m * 4, s[r]);
        L.cuStreamSynchronize(s[r]);
    }
    CUevent fork, join;
    CUgraph graph;
    CUgraphExec exec;
    L.cuCtxSetCurrent(ctx[0]);
    L.cuEventCreate(&fork, 0);
    L.cuCtxSetCurrent(ctx[1]);
    L.cuEventCreate(&join, 0);
    for (int pass = 0; pass < 2; pass++) {
        L.cuCtxSetCurrent(ctx[0]);
        CHECK(L.cuStreamBeginCapture(s[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS,
              "begin");
        L.cuEventRecord(fork, s[0]);
        L.cuCtxSetCurrent(ctx[1]);
        CHECK(L.cuStreamWaitEvent(s[1], fork, 0) == CUDA_SUCCESS, "device 1 joins the capture");
        L.ncclGroupStart();
        for (int r = 0; r < 2; r++)
            L.ncclReduceScatter((void *)(uintptr_t)in[r], (void *)(uintptr_t)out[r], m, ncclFloat32,
                                ncclSum, c[r], (cudaStream_t)s[r]);
        CHECK(L.ncclGroupEnd() == ncclInvalidUsage, "%s", pass == 0
              ? "a communicator's first collective inside a capture refused"
              : "one capture of two GPUs' NCCL calls refused");
        L.cuEventRecord(join, s[1]);
        L.cuCtxSetCurrent(ctx[0]);
        L.cuStreamWaitEvent(s[0], join, 0);
        graph = NULL;
        CHECK(L.cuStreamEndCapture(s[0], &graph) != CUDA_SUCCESS, "the capture is invalidated");
        if (graph)
            L.cuGraphDestroy(graph);
        if (pass == 1)
            break;
        L.ncclGroupStart();
        for (int r = 0; r < 2; r++)
            L.ncclReduceScatter((void *)(uintptr_t)in[r], (void *)(uintptr_t)out[r], m, ncclFloat32,
                                ncclSum, c[r], (cudaStream_t)s[r]);
        CHECK(L.ncclGroupEnd() == ncclSuccess, "an eager reduce_scatter");
        for (int r = 1; r >= 0; r--) {
            L.cuCtxSetCurrent(ctx[r]);
            download(got, out[r], sizeof got, s[r]);
            CHECK(r ? got[0] == 3 * 4 && got[3] == 3 * 7 : got[0] == 0 && got[3] == 3 * 3,
                  "rank %d's share: %g %g", r, got[0], got[3]);
        }
    }
    /* one device, its communicator used once before: captured and replayed */
    L.cuCtxSetCurrent(ctx[0]);
    CHECK(L.ncclAllReduce((void *)(uintptr_t)in[0], (void *)(uintptr_t)out[0], m, ncclFloat32,
                          ncclSum, solo[0], (cudaStream_t)s[0]) == ncclSuccess, "eager all_reduce");
    L.cuStreamSynchronize(s[0]);
    L.cuMemsetD8Async(out[0], 0, m * 4, s[0]);
    CHECK(L.cuStreamBeginCapture(s[0], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS, "begin");
    CHECK(L.ncclAllReduce((void *)(uintptr_t)in[0], (void *)(uintptr_t)out[0], m, ncclFloat32,
                          ncclSum, solo[0], (cudaStream_t)s[0]) == ncclSuccess, "captured all_reduce");
    CHECK(L.cuStreamEndCapture(s[0], &graph) == CUDA_SUCCESS, "end of a one-device capture");
    CHECK(L.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS, "instantiate");
    L.cuGraphDestroy(graph);
    download(got, out[0], sizeof got, s[0]);
    CHECK(got[1] == 0, "nothing ran at capture: %g", got[1]);
    CHECK(L.cuGraphLaunch(exec, s[0]) == CUDA_SUCCESS && L.cuGraphLaunch(exec, s[0]) == CUDA_SUCCESS,
          "two launches");
    download(got, out[0], sizeof got, s[0]);
    CHECK(got[1] == 1 && got[3] == 3, "a one-rank all_reduce replayed: %g %g", got[1], got[3]);
    L.cuGraphExecDestroy(exec);
    L.cuEventDestroy(fork);
    L.cuEventDestroy(join);
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        L.cuMemFree(in[r]);
        L.cuMemFree(out[r]);
        L.ncclCommDestroy(c[r]);
        L.ncclCommDestroy(solo[r]);
    }
    L.cuCtxSetCurrent(ctx[0]);
}

#define DP(x) ((void *)(uintptr_t)(x))

/* NCCL's multi-thread mode: a thread of its own for each rank, which issues
 * (never waits: the main thread synchronizes after joining them, as the
 * executor does) an all_reduce outside any group, then a crossing exchange
 * in a group of its own; then each captures that into a graph of its own in
 * thread-local mode (a capture holds one GPU's calls) and launches it
 * twice.  NCCL's group is per thread: a group end on one thread while
 * another is inside a group is refused. */
typedef struct {
    int rank, job;
    ncclComm_t comm;
    CUstream s;
    CUdeviceptr in, out, recv;
    CUgraphExec exec;
    int bad;
} nccl_thread;

enum { m_threads = 4 };

static int issue_threaded(nccl_thread *t)
{
    int peer = 1 - t->rank;
    return L.ncclAllReduce(DP(t->in), DP(t->out), m_threads, ncclFloat32, ncclSum, t->comm,
                           (cudaStream_t)t->s) != ncclSuccess ||
           L.ncclGroupStart() != ncclSuccess ||
           L.ncclSend(DP(t->in), m_threads, ncclFloat32, peer, t->comm, (cudaStream_t)t->s) ||
           L.ncclRecv(DP(t->recv), m_threads, ncclFloat32, peer, t->comm, (cudaStream_t)t->s) ||
           L.ncclGroupEnd() != ncclSuccess;
}

static void *nccl_thread_main(void *arg)
{
    nccl_thread *t = arg;
    CUgraph graph = NULL;
    L.cuCtxSetCurrent(ctx[t->rank]);
    if (t->job == 0) {
        t->bad = issue_threaded(t);
    } else if (t->job == 1) {
        t->bad = L.cuStreamBeginCapture(t->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS;
        t->bad |= issue_threaded(t);
        t->bad |= L.cuStreamEndCapture(t->s, &graph) != CUDA_SUCCESS ||
                  L.cuGraphInstantiate(&t->exec, graph, 0) != CUDA_SUCCESS;
        if (graph)
            L.cuGraphDestroy(graph);
    } else if (t->job == 2) {
        t->bad = L.cuGraphLaunch(t->exec, t->s) != CUDA_SUCCESS;
    } else {
        t->bad = L.ncclGroupEnd() != ncclInvalidUsage; /* none started on this thread */
    }
    return NULL;
}

static void run_threads(nccl_thread t[2], int job, const char *what)
{
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        t[r].job = job;
        pthread_create(&th[r], NULL, nccl_thread_main, &t[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        CHECK(!t[r].bad && L.cuStreamSynchronize(t[r].s) == CUDA_SUCCESS, "%s, rank %d's thread",
              what, r);
    }
}

static void test_nccl_threads(CUstream s[2])
{
    ncclComm_t c[2];
    int devs[2] = {0, 1};
    CHECK(L.ncclCommInitAll(c, 2, devs) == ncclSuccess, "init all");
    nccl_thread t[2];
    float v[m_threads], got[m_threads];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < m_threads; i++)
            v[i] = (float)(10 * r + i);
        t[r] = (nccl_thread){.rank = r, .comm = c[r], .s = s[r]};
        L.cuCtxSetCurrent(ctx[r]);
        t[r].in = upload(v, sizeof v, s[r]);
        L.cuMemAlloc(&t[r].out, sizeof v);
        L.cuMemAlloc(&t[r].recv, sizeof v);
    }
    run_threads(t, 0, "an all_reduce outside a group and an exchange in one");
    for (int pass = 0; pass < 3; pass++) {
        for (int r = 0; r < 2; r++) {
            L.cuCtxSetCurrent(ctx[r]);
            download(got, t[r].out, sizeof got, s[r]);
            CHECK(got[0] == 10 && got[3] == 16, "pass %d: rank %d's all_reduce: %g %g", pass, r,
                  got[0], got[3]);
            download(got, t[r].recv, sizeof got, s[r]);
            CHECK(got[1] == (float)(10 * (1 - r) + 1), "pass %d: rank %d received %g", pass, r,
                  got[1]);
            L.cuMemsetD8Async(t[r].out, 0, sizeof v, s[r]);
            L.cuMemsetD8Async(t[r].recv, 0, sizeof v, s[r]);
            L.cuStreamSynchronize(s[r]);
        }
        if (pass == 0) {
            run_threads(t, 1, "a capture of each GPU's calls on its own thread");
            download(got, t[1].out, sizeof got, s[1]);
            CHECK(got[3] == 0, "nothing ran at capture: %g", got[3]);
        }
        run_threads(t, 2, "each graph launched by its thread");
    }
    /* a group end on a thread with no group, while this one holds a group */
    L.cuCtxSetCurrent(ctx[0]);
    L.ncclGroupStart();
    pthread_t th;
    t[0].job = 3;
    pthread_create(&th, NULL, nccl_thread_main, &t[0]);
    pthread_join(th, NULL);
    CHECK(!t[0].bad, "NCCL's group is per thread: ncclGroupEnd on another thread refused");
    CHECK(L.ncclGroupEnd() == ncclSuccess, "this thread's empty group ends");
    for (int r = 0; r < 2; r++) {
        L.cuCtxSetCurrent(ctx[r]);
        L.cuGraphExecDestroy(t[r].exec);
        L.cuMemFree(t[r].in);
        L.cuMemFree(t[r].out);
        L.cuMemFree(t[r].recv);
        L.ncclCommDestroy(c[r]);
    }
    L.cuCtxSetCurrent(ctx[0]);
}

/* ---------------------------------------------------------------- NCCL across processes */


typedef void (*rank_fn)(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs);

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Calls grouped one by one, as the executor issues them. */
static ncclResult_t send1(CUdeviceptr p, size_t n, ncclDataType_t t, int peer, ncclComm_t c, CUstream s)
{
    L.ncclGroupStart();
    ncclResult_t r = L.ncclSend(DP(p), n, t, peer, c, (cudaStream_t)s);
    ncclResult_t e = L.ncclGroupEnd();
    return r ? r : e;
}

static ncclResult_t recv1(CUdeviceptr p, size_t n, ncclDataType_t t, int peer, ncclComm_t c, CUstream s)
{
    L.ncclGroupStart();
    ncclResult_t r = L.ncclRecv(DP(p), n, t, peer, c, (cudaStream_t)s);
    ncclResult_t e = L.ncclGroupEnd();
    return r ? r : e;
}

/* 3 ranks: collectives on the world, a sub-group {2, 0} and a pair 2 -> 0. */
static void rank_collectives(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    ncclComm_t world = NULL, sub = NULL, pair = NULL;
    cudaStream_t cs = (cudaStream_t)s;
    CHECK(L.ncclCommInitRank(&world, nranks, *id, rank) == ncclSuccess, "rank %d: init outside a group",
          rank);
    int n = 0, me = -1;
    CHECK(L.ncclCommCount(world, &n) == ncclSuccess && n == nranks &&
          L.ncclCommUserRank(world, &me) == ncclSuccess && me == rank,
          "rank %d: count %d, rank %d", rank, n, me);
    enum { m = 6 };
    float x[m], xs[3 * m], got[3 * m];
    int32_t k[m];
    int8_t b[m];
    uint8_t u[m];
    int64_t l = rank + 1;
    for (int i = 0; i < m; i++) {
        x[i] = (float)((rank + 1) * i) + 0.25f;
        k[i] = rank * 10 - i;
        b[i] = rank == 2 ? (int8_t)(i - 3) : 0;
        u[i] = (uint8_t)(100 + rank);
    }
    for (int i = 0; i < 3 * m; i++)
        xs[i] = (float)(rank + i);
    CUdeviceptr dx = upload(x, sizeof x, s), dk = upload(k, sizeof k, s), db = upload(b, sizeof b, s);
    CUdeviceptr du = upload(u, sizeof u, s), dxs = upload(xs, sizeof xs, s), dl = upload(&l, sizeof l, s);
    CUdeviceptr dg, dsum;
    L.cuMemAlloc(&dg, sizeof xs);
    L.cuMemAlloc(&dsum, sizeof x);
    CHECK(L.ncclAllReduce(DP(dx), DP(dsum), m, ncclFloat32, ncclSum, world, cs) == ncclSuccess &&
          L.ncclAllGather(DP(dx), DP(dg), m, ncclFloat32, world, cs) == ncclSuccess, "rank %d: issue", rank);
    L.ncclGroupStart();
    L.ncclAllReduce(DP(dk), DP(dk), m, ncclInt32, ncclMax, world, cs);
    L.ncclAllReduce(DP(du), DP(du), m, ncclUint8, ncclSum, world, cs);
    CHECK(L.ncclGroupEnd() == ncclSuccess, "rank %d: a group of two collectives", rank);
    download(got, dsum, sizeof x, s);
    int ok = 1;
    for (int i = 0; i < m; i++)
        ok &= got[i] == (float)(6 * i) + 0.75f;
    CHECK(ok, "rank %d: all_reduce sum: [1] %g", rank, got[1]);
    download(got, dg, sizeof xs, s);
    ok = 1;
    for (int i = 0; i < 3 * m; i++)
        ok &= got[i] == (float)((i / m + 1) * (i % m)) + 0.25f;
    CHECK(ok, "rank %d: all_gather: [7] %g", rank, got[7]);
    download(k, dk, sizeof k, s);
    download(u, du, sizeof u, s);
    ok = 1;
    for (int i = 0; i < m; i++)
        ok &= k[i] == 20 - i && u[i] == (uint8_t)(303 % 256);
    CHECK(ok, "rank %d: all_reduce max int32 %d, sum uint8 %d (wrapped)", rank, k[0], u[0]);
    CHECK(L.ncclReduceScatter(DP(dxs), DP(dsum), m, ncclFloat32, ncclSum, world, cs) == ncclSuccess &&
          L.ncclBroadcast(DP(db), DP(db), m, ncclInt8, 2, world, cs) == ncclSuccess, "rank %d: issue", rank);
    download(got, dsum, sizeof x, s);
    download(b, db, sizeof b, s);
    ok = 1;
    for (int i = 0; i < m; i++)
        ok &= got[i] == (float)(3 * (rank * m + i) + 3) && b[i] == i - 3;
    CHECK(ok, "rank %d: reduce_scatter [0] %g, broadcast of int8 [0] %d", rank, got[0], b[0]);

    /* the sub-group {2, 0}, ordered by key; rank 1 outside it */
    L.ncclGroupStart();
    L.ncclCommSplit(world, rank == 1 ? NCCL_SPLIT_NOCOLOR : 0, 2 - rank, &sub, NULL);
    CHECK(L.ncclGroupEnd() == ncclSuccess, "rank %d: split", rank);
    if (rank == 1) {
        CHECK(sub == NULL, "rank 1 has no color: no communicator");
    } else {
        CHECK(sub && L.ncclCommCount(sub, &n) == ncclSuccess && n == 2 &&
              L.ncclCommUserRank(sub, &me) == ncclSuccess && me == (rank == 2 ? 0 : 1),
              "rank %d: in the sub-group %d of %d", rank, me, n);
        CHECK(L.ncclAllReduce(DP(dl), DP(dl), 1, ncclInt64, ncclSum, sub, cs) == ncclSuccess, "rank %d", rank);
        download(&l, dl, sizeof l, s);
        CHECK(l == 4, "rank %d: all_reduce of the sub-group (ranks 0 and 2): %lld", rank, (long long)l);
    }
    /* the pair 2 -> 0 (split outside a group): 2 sends on s, 0 receives on rs */
    CHECK(L.ncclCommSplit(world, rank == 1 ? NCCL_SPLIT_NOCOLOR : 0, rank == 2 ? 0 : 1, &pair, NULL) ==
          ncclSuccess && (rank == 1) == (pair == NULL), "rank %d: pair", rank);
    if (rank == 2)
        CHECK(send1(dx, m, ncclFloat32, 1, pair, s) == ncclSuccess, "send");
    if (rank == 0) {
        CHECK(recv1(dsum, m, ncclFloat32, 0, pair, rs) == ncclSuccess, "recv");
        download(got, dsum, sizeof x, rs);
        CHECK(got[1] == 3.25f && got[5] == 15.25f, "rank 0 received rank 2's x: %g %g", got[1], got[5]);
    }
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS, "rank %d: sync", rank);
    if (sub)
        L.ncclCommDestroy(sub);
    CHECK(L.ncclCommDestroy(world) == ncclSuccess, "rank %d: destroy", rank);
    if (pair)
        L.ncclCommDestroy(pair);
    L.cuMemFree(dx), L.cuMemFree(dk), L.cuMemFree(db), L.cuMemFree(du), L.cuMemFree(dxs);
    L.cuMemFree(dl), L.cuMemFree(dg), L.cuMemFree(dsum);
}

/* A send and a receive, to and from peer, in one group (how the executor
 * issues a batch of consecutive sends and receives). */
static ncclResult_t exchange(CUdeviceptr out, CUdeviceptr in, size_t n, ncclDataType_t t, int peer,
                             ncclComm_t c, CUstream s)
{
    L.ncclGroupStart();
    ncclResult_t r = L.ncclSend(DP(out), n, t, peer, c, (cudaStream_t)s);
    ncclResult_t q = L.ncclRecv(DP(in), n, t, peer, c, (cudaStream_t)s);
    ncclResult_t e = L.ncclGroupEnd();
    return r ? r : q ? q : e;
}

/* 2 ranks: crossing sends, each with its receive in one group on the world
 * communicator's one stream; then the same captured with an all_reduce and
 * replayed. */
static void rank_p2p(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)rs;
    ncclComm_t world = NULL;
    L.ncclGroupStart();
    ncclResult_t r = L.ncclCommInitRank(&world, nranks, *id, rank);
    CHECK(L.ncclGroupEnd() == ncclSuccess && r == ncclSuccess, "rank %d: init in a group", rank);
    int peer = 1 - rank;
    enum { m = 8 };
    float v[m], a[m], got[m];
    uint8_t raw[m], rgot[m];
    for (int i = 0; i < m; i++)
        v[i] = (float)(rank * 100 + i), raw[i] = (uint8_t)(rank * 16 + i);
    CUdeviceptr dv = upload(v, sizeof v, s), draw = upload(raw, sizeof raw, s), dr, drr, acc, sum;
    L.cuMemAlloc(&dr, sizeof v);
    L.cuMemAlloc(&drr, sizeof raw);
    L.cuMemAlloc(&acc, sizeof a);
    L.cuMemAlloc(&sum, sizeof a);
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
    /* the first receive from a peer inside a capture: refused (NCCL would
       set up the connection there), the capture invalidated */
    CUgraph g = NULL;
    CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS &&
          recv1(dr, m, ncclFloat32, peer, world, s) == ncclInvalidUsage &&
          L.cuStreamEndCapture(s, &g) != CUDA_SUCCESS, "rank %d: a first receive captured", rank);
    if (g)
        L.cuGraphDestroy(g);
    CHECK(exchange(dv, dr, m, ncclFloat32, peer, world, s) == ncclSuccess &&
          exchange(draw, drr, m, ncclUint8, peer, world, s) == ncclSuccess, "rank %d: issue", rank);
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS,
          "rank %d: crossing sends, each in one group with its receive", rank);
    download(got, dr, sizeof got, s);
    download(rgot, drr, sizeof rgot, s);
    int ok = 1;
    for (int i = 0; i < m; i++)
        ok &= got[i] == (float)(peer * 100 + i) && rgot[i] == peer * 16 + i;
    CHECK(ok, "rank %d received %g and %d, in order", rank, got[1], rgot[1]);

    /* the world's first collective outside the capture (its set-up must be) */
    CHECK(L.ncclAllReduce(DP(acc), DP(sum), m, ncclFloat32, ncclSum, world, (cudaStream_t)s) ==
              ncclSuccess && L.cuStreamSynchronize(s) == CUDA_SUCCESS, "rank %d: all_reduce", rank);
    CUgraphExec exec = NULL;
    CHECK(L.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin");
    CHECK(exchange(dv, dr, m, ncclFloat32, peer, world, s) == ncclSuccess &&
          L.ncclAllReduce(DP(acc), DP(sum), m, ncclFloat32, ncclSum, world, (cudaStream_t)s) == ncclSuccess,
          "rank %d: captured calls", rank);
    CHECK(L.cuStreamEndCapture(s, &g) == CUDA_SUCCESS && L.cuGraphInstantiate(&exec, g, 0) == CUDA_SUCCESS,
          "rank %d: capture", rank);
    L.cuGraphDestroy(g);
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < m; i++)
            v[i] = (float)(rank * 100 + it * 10 + i), a[i] = (float)((rank + 1) * (it + 1) + i);
        L.cuMemcpyHtoDAsync(dv, v, sizeof v, s);
        L.cuMemcpyHtoDAsync(acc, a, sizeof a, s);
        CHECK(L.cuGraphLaunch(exec, s) == CUDA_SUCCESS, "launch");
        download(got, dr, sizeof got, s);
        ok = 1;
        for (int i = 0; i < m; i++)
            ok &= got[i] == (float)(peer * 100 + it * 10 + i);
        CHECK(ok, "rank %d, replay %d: received %g", rank, it, got[1]);
        download(got, sum, sizeof got, s);
        ok = 1;
        for (int i = 0; i < m; i++)
            ok &= got[i] == (float)(3 * (it + 1) + 2 * i);
        CHECK(ok, "rank %d, replay %d: all_reduce %g", rank, it, got[1]);
    }
    L.cuGraphExecDestroy(exec);
    L.ncclCommDestroy(world);
    L.cuMemFree(dv), L.cuMemFree(draw), L.cuMemFree(dr), L.cuMemFree(drr), L.cuMemFree(acc), L.cuMemFree(sum);
}

/* 2 ranks, each sending before receiving on one stream, each call its own
 * group: each send waits for a receive that never reaches the head of its
 * stream. */
static void rank_crossing_deadlock(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)rs;
    ncclComm_t world = NULL;
    CHECK(L.ncclCommInitRank(&world, nranks, *id, rank) == ncclSuccess, "rank %d: init", rank);
    CUdeviceptr dv, dr;
    L.cuMemAlloc(&dv, 64);
    L.cuMemAlloc(&dr, 64);
    CHECK(send1(dv, 16, ncclFloat32, 1 - rank, world, s) == ncclSuccess &&
          recv1(dr, 16, ncclFloat32, 1 - rank, world, s) == ncclSuccess, "rank %d: issue", rank);
    double t0 = wall();
    CHECK(L.cuStreamSynchronize(s) == CUDA_ERROR_LAUNCH_FAILED, "rank %d: crossing sends fail", rank);
    double dt = wall() - t0;
    CHECK(dt > 0.8 && dt < 10, "rank %d failed after %.2f s, not after waiting for the other process "
          "until the timeout (1 s)", rank, dt);
    L.ncclCommAbort(world);
}

/* 2 ranks: rank 0's receive on the world in flight (waiting for rank 1's
 * send), then a call of another communicator on another stream of the same
 * device (two), or of the world on another stream (!two): refused.  Rank 1
 * sends once rank 0 says the refusal came (the file at flag). */
static void rank_in_flight(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs,
                           int two, const char *flag)
{
    ncclComm_t world = NULL, other = NULL;
    CHECK(L.ncclCommInitRank(&world, nranks, *id, rank) == ncclSuccess, "rank %d: init", rank);
    L.ncclGroupStart();
    ncclResult_t r = L.ncclCommSplit(world, 0, rank, &other, NULL);
    CHECK(L.ncclGroupEnd() == ncclSuccess && r == ncclSuccess && other, "rank %d: split", rank);
    CUdeviceptr dv, dr;
    L.cuMemAlloc(&dv, 64);
    L.cuMemAlloc(&dr, 64);
    if (rank == 1) {
        for (int i = 0; i < 500 && access(flag, F_OK) != 0; i++)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        CHECK(access(flag, F_OK) == 0, "rank 1: rank 0 never said");
        CHECK(send1(dv, 16, ncclFloat32, 0, world, s) == ncclSuccess &&
              L.cuStreamSynchronize(s) == CUDA_SUCCESS, "rank 1: the send");
    } else {
        CHECK(recv1(dr, 16, ncclFloat32, 1, world, s) == ncclSuccess &&
              L.cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "rank 0: the receive waits");
        CHECK(recv1(dr, 16, ncclFloat32, 1, two ? other : world, rs) == ncclSuccess &&
              L.cuStreamSynchronize(rs) == CUDA_ERROR_LAUNCH_FAILED, "rank 0: %s refused",
              two ? "a second communicator in flight" : "a second stream of the world in flight");
        FILE *f = fopen(flag, "w");
        if (f)
            fclose(f);
    }
    L.ncclCommAbort(other);
    L.ncclCommAbort(world);
}

static char in_flight_flag[256];

static void rank_two_comms(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    rank_in_flight(rank, nranks, id, s, rs, 1, in_flight_flag);
}

static void rank_two_streams(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    rank_in_flight(rank, nranks, id, s, rs, 0, in_flight_flag);
}

static void rank_duplicate(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)s, (void)rs;
    ncclComm_t world = NULL;
    ncclResult_t r = L.ncclCommInitRank(&world, nranks, *id, rank);
    CHECK(r == ncclInvalidUsage, "rank %d: two processes on one GPU: %s", rank, L.ncclGetErrorString(r));
}

static void rank_missing(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)s, (void)rs;
    ncclComm_t world = NULL;
    ncclResult_t r = L.ncclCommInitRank(&world, nranks, *id, rank);
    CHECK(r == ncclRemoteError, "rank %d: init without rank 2: %s", rank, L.ncclGetErrorString(r));
}

static void rank_mismatch(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)rs;
    ncclComm_t world = NULL;
    CHECK(L.ncclCommInitRank(&world, nranks, *id, rank) == ncclSuccess, "rank %d: init", rank);
    CUdeviceptr d;
    L.cuMemAlloc(&d, 64);
    CHECK(L.ncclAllReduce(DP(d), DP(d), 4 + (size_t)rank, ncclFloat32, ncclSum, world, (cudaStream_t)s) ==
          ncclSuccess, "issue");
    CHECK(L.cuStreamSynchronize(s) == CUDA_ERROR_LAUNCH_FAILED, "rank %d: counts 4 and 5 fail", rank);
    L.ncclCommDestroy(world);
}

static int expect_rank0; /* only rank 0's stderr must hold the expected message */

/* Reads or writes the n bytes at p whole: 0, or -1 at an error or the end. */
static int whole(int fd, void *p, size_t n, int writing)
{
    for (char *c = p; n > 0;) {
        ssize_t k = writing ? write(fd, c, n) : read(fd, c, n);
        if (k <= 0 && !(k < 0 && errno == EINTR))
            return -1;
        if (k > 0)
            c += k, n -= (size_t)k;
    }
    return 0;
}

/* Rank rank's process: a fresh fake of 3 GPUs, fn on GPU gpu; its stderr
 * must hold expect (when not NULL; expect_rank0: rank 0's alone).  Rank 0
 * makes the id and writes it `copies` times to the pipe `ids` (to the other
 * ranks and the parent, as an MPI program broadcasts it); the others read it
 * there.  The parent never calls NCCL: ncclGetUniqueId starts a thread, and
 * a process forked while a thread holds an allocator's lock (AddressSanitizer's
 * has no fork handler) hangs at its first malloc.  Exits 0 when its checks pass. */
static void rank_process(int rank, int nranks, int gpu, const int ids[2], int copies, rank_fn fn,
                         const char *expect)
{
    alarm(60); /* never a hang, even of a broken fake */
    setenv("GNC_FAKECUDA_GPUS", "3", 1);
    nfailed = npassed = 0;
    ncclUniqueId made, *id = &made;
    if (rank == 0) {
        close(ids[0]);
        CHECK(L.ncclGetUniqueId(id) == ncclSuccess, "ncclGetUniqueId");
        for (int i = 0; i < copies; i++)
            CHECK(whole(ids[1], id, sizeof *id, 1) == 0, "rank 0: the id to its peers: %s", strerror(errno));
        close(ids[1]);
    } else {
        close(ids[1]);
        if (whole(ids[0], id, sizeof *id, 0) != 0) {
            printf("FAIL rank %d: no id from rank 0\n", rank);
            fflush(stdout);
            _exit(1);
        }
        close(ids[0]);
    }
    if (rank > 0 && expect_rank0)
        expect = NULL;
    FILE *log = expect ? tmpfile() : NULL;
    int err = dup(2);
    if (log)
        dup2(fileno(log), 2);
    CUdevice dev = 0;
    CUcontext c;
    CUstream s = NULL, rs = NULL;
    CHECK(L.cuInit(0) == CUDA_SUCCESS && L.cuDeviceGet(&dev, gpu) == CUDA_SUCCESS &&
          L.cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS && L.cuCtxSetCurrent(c) == CUDA_SUCCESS,
          "rank %d: GPU %d", rank, gpu);
    L.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    L.cuStreamCreate(&rs, CU_STREAM_NON_BLOCKING);
    fn(rank, nranks, id, s, rs);
    L.cuStreamDestroy(s);
    L.cuStreamDestroy(rs);
    L.cuDevicePrimaryCtxRelease(dev);
    if (log) {
        char text[8192];
        fflush(stderr);
        dup2(err, 2);
        rewind(log);
        size_t n = fread(text, 1, sizeof text - 1, log);
        text[n] = 0;
        fputs(text, stderr);
        CHECK(strstr(text, expect) != NULL, "rank %d: no '%s' among its messages", rank, expect);
        fclose(log);
    }
    close(err);
    fflush(stdout);
    fflush(stderr);
    /* _exit: no exit handlers in the child, LeakSanitizer's among them, which
       can wait forever on an allocator lock a thread of the fake's held */
    _exit(nfailed ? 1 : 0);
}

/* Runs fn in processes of ranks 0..started-1 of nranks, rank r on GPU gpu[r],
 * with FAKECUDA_NCCL_TIMEOUT timeout, their id made by rank 0; each must pass
 * and the id's directory be gone after them. */
static void run_ranks(const char *what, int nranks, int started, const int *gpu, rank_fn fn,
                      const char *timeout, const char *expect)
{
    int ids[2];
    CHECK(pipe(ids) == 0, "%s: a pipe: %s", what, strerror(errno));
    setenv("FAKECUDA_NCCL_TIMEOUT", timeout, 1);
    fflush(stdout);
    fflush(stderr);
    pid_t pid[4];
    for (int r = 0; r < started; r++)
        if ((pid[r] = fork()) == 0)
            rank_process(r, nranks, gpu[r], ids, started, fn, expect);
    close(ids[1]);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    CHECK(whole(ids[0], &id, sizeof id, 0) == 0, "%s: no id from rank 0", what);
    close(ids[0]);
    for (int r = 0; r < started; r++) {
        int st = 0;
        CHECK(pid[r] > 0 && waitpid(pid[r], &st, 0) == pid[r] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "%s: rank %d's process failed (status 0x%x)", what, r, st);
    }
    unsetenv("FAKECUDA_NCCL_TIMEOUT");
    const char *dir = strchr(id.internal, '/');
    CHECK(dir && access(dir, F_OK) != 0, "%s: %s left behind", what, dir ? dir : "(no directory in the id)");
}

/* A copy from pageable host memory synchronizes its stream before it starts
 * (the driver API's "API synchronization behavior"): under the lazy schedule
 * (work runs only when synchronized) the stream's earlier copy to the host
 * has run once the call returns. */
static void rank_pageable(int rank, int nranks, const ncclUniqueId *id, CUstream s, CUstream rs)
{
    (void)nranks, (void)id, (void)rs;
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, h[4] = {0};
    CUdeviceptr d = upload(a, sizeof a, s), e = upload(b, sizeof b, s);
    CHECK(L.cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
    L.cuMemcpyDtoHAsync(h, d, sizeof h, s);
    CHECK(h[0] == 0, "rank %d: the lazy schedule ran a copy before a synchronization", rank);
    L.cuMemcpyHtoDAsync(e, b, sizeof b, s);
    CHECK(h[0] == 1 && h[3] == 4, "rank %d: a copy from pageable memory did not wait for the "
          "stream's earlier work: %g %g", rank, h[0], h[3]);
    L.cuMemFree(d), L.cuMemFree(e);
}

static void test_nccl_processes(void)
{
    double t0 = wall();
    /* 20 s where nothing should wait: a broken fake fails before the alarm */
    run_ranks("collectives and splits of 3 processes", 3, 3, (int[]){0, 1, 2}, rank_collectives, "20", NULL);
    run_ranks("sends across processes, captured", 2, 2, (int[]){0, 1}, rank_p2p, "20", NULL);
    run_ranks("crossing sends before their receives", 2, 2, (int[]){0, 1}, rank_crossing_deadlock, "1",
              "waits for that rank's ncclRecv to reach the head of its stream");
    run_ranks("two processes on one GPU", 2, 2, (int[]){1, 1}, rank_duplicate, "20", "Duplicate GPU detected");
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(in_flight_flag, sizeof in_flight_flag, "%s/gnc-fakecuda-flag.%d.a", tmp, (int)getpid());
    unlink(in_flight_flag);
    expect_rank0 = 1;
    run_ranks("two communicators in flight on one device", 2, 2, (int[]){0, 1}, rank_two_comms, "20",
              "a call of a second communicator");
    unlink(in_flight_flag);
    snprintf(in_flight_flag, sizeof in_flight_flag, "%s/gnc-fakecuda-flag.%d.b", tmp, (int)getpid());
    run_ranks("a communicator on two streams at once", 2, 2, (int[]){0, 1}, rank_two_streams, "20",
              "called on two streams at once");
    unlink(in_flight_flag);
    expect_rank0 = 0;
    run_ranks("a rank that never joins", 3, 2, (int[]){0, 1}, rank_missing, "1", "waits for rank 2");
    run_ranks("collectives that do not match", 2, 2, (int[]){0, 1}, rank_mismatch, "20", "with other arguments");
    setenv("GNC_FAKECUDA_SCHEDULE", "lazy", 1); /* read by the child's cuInit */
    run_ranks("a copy from pageable memory", 1, 1, (int[]){0}, rank_pageable, "20", NULL);
    unsetenv("GNC_FAKECUDA_SCHEDULE");
    printf("NCCL across processes: %.1f s\n", wall() - t0);
}

int main(void)
{
    void *cu = load("libcuda.so.1"), *lt = load("libcublasLt.so.13"), *dnn = load("libcudnn.so.9");
    void *nc = load("libnccl.so.2");
#define B(so, f) bind(so, (void **)&L.f, STR(f));
#define BCU(f) B(cu, f)
#define BLT(f) B(lt, f)
#define BDNN(f) B(dnn, f)
#define BNC(f) B(nc, f)
    DRIVER(BCU) BLAS(BLT) DNN(BDNN) NCCL(BNC)
    bind(cu, (void **)&L.fakecuda_register, "fakecuda_register");
    L.fakecuda_register("add_one", add_one);
    L.fakecuda_register("always_fails", always_fails);
    test_nccl_processes(); /* first: the children start from a fake the parent never touched */

    int count = 0;
    CHECK(L.cuInit(0) == CUDA_SUCCESS && L.cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 2,
          "two fake GPUs, %d", count);
    for (int d = 0; d < 2; d++) {
        CUdevice dev;
        L.cuDeviceGet(&dev, d);
        L.cuDevicePrimaryCtxRetain(&ctx[d], dev);
    }
    CUstream s[2], b;
    for (int d = 1; d >= 0; d--) {
        L.cuCtxSetCurrent(ctx[d]);
        L.cuStreamCreate(&s[d], CU_STREAM_NON_BLOCKING);
    }
    L.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
    test_memory(s[0]);
    test_contexts();
    test_order_and_kernels(s[0], b);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            test_matmul(s[0], CUDA_R_32F, ta, tb, 1 + ta, ta ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS);
    test_matmul(s[0], CUDA_R_16F, 1, 0, 2, CUBLASLT_EPILOGUE_RELU);
    test_matmul(s[0], CUDA_R_16BF, 0, 1, 1, CUBLASLT_EPILOGUE_DEFAULT);
    test_conv(s[0]);
    test_conv_fused_refusals(s[0]);
    test_matmul_workspace(s[0]);
    test_conv_algorithms(s[0]);
    test_conv_math(s[0]);
    test_first_call_in_capture(s[0]);
    test_nccl(s);
    test_nccl_init_and_capture(s);
    test_nccl_threads(s);
    test_sticky();
    L.cuStreamDestroy(b);
    L.cuStreamDestroy(s[0]);
    for (int d = 0; d < 2; d++) {
        CUdevice dev;
        L.cuDeviceGet(&dev, d);
        L.cuDevicePrimaryCtxRelease(dev);
    }
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
