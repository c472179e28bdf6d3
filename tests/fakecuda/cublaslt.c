/* The fake cuBLASLt (libcublasLt.so.13): cublasLtMatmul on host memory,
 * queued on its stream like a kernel (tests/fakecuda/fake.h).
 *
 * Models: D = epilogue(alpha op(A) op(B) + beta C), column-major, batched with
 * strides; epilogues DEFAULT, RELU, BIAS (bias[m] added to every column),
 * RELU_BIAS; compute CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_FAST_TF32
 * (operands rounded to TF32), scale type CUDA_R_32F with alpha and beta on
 * the host; A, B, C, D and the bias in CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF
 * (A and B alike, C and D alike).  The product is the shared reference's
 * (ref.h, which tests/cg_host.c uses too): sums in double, rounded once to
 * D's type.  Checked as cuBLASLt checks: the shapes of op(A), op(B), C and D
 * agree, ld >= rows, batch counts agree, attribute sizes are right; every
 * operand's extent lies in one allocation of the stream's device; every
 * batch entry of every operand is aligned as the preferences the algorithm
 * was chosen with say (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, 256
 * bytes unless set, as the header says).
 *
 * Workspace: the heuristic's first algorithm needs as much workspace as the
 * preference allows up to 1 MiB (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
 * default 0: then only the second), its second none; the need is in the
 * algorithm's data (data[5]) and cublasLtMatmulAlgoCheck reports it.
 * cublasLtMatmul refuses a workspaceSizeInBytes below its algorithm's need
 * with CUBLAS_STATUS_INVALID_VALUE (cublasLt.h: "when workspaceSizeInBytes
 * is less than workspace required by configured algo"; no algo: the default
 * preference's, none), and a workspace outside one allocation.
 *
 * First use: a handle's first cublasLtMatmul sets the library up (loads its
 * kernels, allocates), which a stream capture cannot hold: issued while its
 * stream is capturing it is refused (CUBLAS_STATUS_NOT_SUPPORTED, a line on
 * stderr) and invalidates the capture (fake.h, fk_capture_refuse).  One
 * issued outside a capture sets the handle up.
 *
 * Not modelled: row-major or other orders, device pointer modes, other
 * epilogues (GELU, auxiliary outputs), other compute types, algorithms that
 * differ in anything but their workspace (every one computes the same), the
 * workspace's own alignment, C differing from D in layout when they alias. */
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "ref.h"

#define EXPORT __attribute__((visibility("default")))

#define MAGIC_HANDLE 0x6c74686eu
#define MAGIC_DESC 0x6c746465u
#define MAGIC_LAYOUT 0x6c746c61u
#define MAGIC_PREF 0x6c747072u

struct cublasLtContext {
    unsigned magic;
    int warm;           /* a matmul of it was issued outside a capture: set up */
};

typedef struct {
    unsigned magic;
    cublasComputeType_t compute;
    cudaDataType scale;
    int32_t trans_a, trans_b;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type;      /* -1: D's type */
    int32_t pointer_mode;
} desc;

typedef struct {
    unsigned magic;
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
    int32_t order;
} layout;

typedef struct {
    unsigned magic;
    uint64_t max_workspace;
    uint32_t align[4];      /* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES */
} pref;

/* An algorithm's data: data[0] the fake's mark, data[1..4] the alignments of
 * A, B, C and D (bytes) the heuristic chose it for, which the operands of
 * every call must have, data[5] the bytes of workspace it needs. */
#define ALGO_MARK 0x66616b65
#define ALGO_WORKSPACE 5

/* What the heuristic's first algorithm needs where the preference allows a
 * workspace: as much as allowed up to this (split-K and stream-K kernels
 * keep their partial sums there); its second needs none. */
#define ALGO_MAX_WORKSPACE ((uint64_t)1 << 20)

static void say(const char *what)
{
    fprintf(stderr, "fakecuda: cublasLtMatmul: %s\n", what);
}

EXPORT const char *cublasLtGetStatusString(cublasStatus_t status)
{
    FK_API;
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    FK_API;
    if (!lightHandle)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasLtContext *h = calloc(1, sizeof *h);
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = MAGIC_HANDLE;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    FK_API;
    if (!lightHandle || lightHandle->magic != MAGIC_HANDLE)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                               cublasComputeType_t computeType,
                                               cudaDataType_t scaleType)
{
    FK_API;
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32) ||
        scaleType != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* not modelled */
    desc *d = calloc(1, sizeof *d);
    if (!d)
        return CUBLAS_STATUS_ALLOC_FAILED;
    d->magic = MAGIC_DESC;
    d->compute = computeType;
    d->scale = scaleType;
    d->trans_a = d->trans_b = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = -1;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    *matmulDesc = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

static desc *desc_of(cublasLtMatmulDesc_t m)
{
    desc *d = (desc *)m;
    return d && d->magic == MAGIC_DESC ? d : NULL;
}

EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    FK_API;
    desc *d = desc_of(matmulDesc);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    d->magic = 0;
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

/* Copies an attribute of exactly size bytes, as cuBLASLt insists. */
#define SET(field, type)                                                             \
    do {                                                                             \
        if (sizeInBytes != sizeof(type))                                             \
            return CUBLAS_STATUS_INVALID_VALUE;                                      \
        type v_;                                                                     \
        memcpy(&v_, buf, sizeof v_);                                                 \
        field = v_;                                                                  \
    } while (0)

EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                     cublasLtMatmulDescAttributes_t attr,
                                                     const void *buf, size_t sizeInBytes)
{
    FK_API;
    desc *d = desc_of(matmulDesc);
    if (!d || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: SET(d->trans_a, int32_t); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: SET(d->trans_b, int32_t); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: SET(d->epilogue, uint32_t); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: SET(d->bias, const void *); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: SET(d->bias_type, int32_t); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: SET(d->pointer_mode, int32_t); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED; /* not modelled */
    }
    if ((d->trans_a != CUBLAS_OP_N && d->trans_a != CUBLAS_OP_T) ||
        (d->trans_b != CUBLAS_OP_N && d->trans_b != CUBLAS_OP_T) ||
        d->pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_RELU &&
        d->epilogue != CUBLASLT_EPILOGUE_BIAS && d->epilogue != CUBLASLT_EPILOGUE_RELU_BIAS)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld)
{
    FK_API;
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    layout *l = calloc(1, sizeof *l);
    if (!l)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *l = (layout){MAGIC_LAYOUT, type, rows, cols, ld, 1, 0, CUBLASLT_ORDER_COL};
    *matLayout = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

static layout *layout_of(cublasLtMatrixLayout_t m)
{
    layout *l = (layout *)m;
    return l && l->magic == MAGIC_LAYOUT ? l : NULL;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    FK_API;
    layout *l = layout_of(matLayout);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    l->magic = 0;
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                       cublasLtMatrixLayoutAttribute_t attr,
                                                       const void *buf, size_t sizeInBytes)
{
    FK_API;
    layout *l = layout_of(matLayout);
    if (!l || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: SET(l->batch, int32_t); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: SET(l->stride, int64_t); break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: SET(l->order, int32_t); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (l->order != CUBLASLT_ORDER_COL)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* not modelled */
    return l->batch >= 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    FK_API;
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    pref *q = calloc(1, sizeof *q);
    if (!q)
        return CUBLAS_STATUS_ALLOC_FAILED;
    q->magic = MAGIC_PREF;
    for (int i = 0; i < 4; i++)
        q->align[i] = 256; /* the header's default */
    *p = (cublasLtMatmulPreference_t)q;
    return CUBLAS_STATUS_SUCCESS;
}

static pref *pref_of(cublasLtMatmulPreference_t p)
{
    pref *q = (pref *)p;
    return q && q->magic == MAGIC_PREF ? q : NULL;
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    FK_API;
    pref *q = pref_of(p);
    if (!q)
        return CUBLAS_STATUS_INVALID_VALUE;
    q->magic = 0;
    free(q);
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t attr,
                                                           const void *buf, size_t sizeInBytes)
{
    FK_API;
    pref *q = pref_of(p);
    if (!q || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: SET(q->max_workspace, uint64_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: SET(q->align[0], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: SET(q->align[1], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: SET(q->align[2], uint32_t); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: SET(q->align[3], uint32_t); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- the product */

typedef struct {
    desc d;
    layout a, b, c, dd;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
    int dev;
} matmul;

static int float_type(cudaDataType t)
{
    return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

/* The problem's consistency as cuBLASLt checks it; m, n, k out. */
static cublasStatus_t check_shapes(const matmul *g, int64_t *m, int64_t *n, int64_t *k)
{
    const layout *a = &g->a, *b = &g->b, *c = &g->c, *d = &g->dd;
    uint64_t am = g->d.trans_a == CUBLAS_OP_N ? a->rows : a->cols;
    uint64_t ak = g->d.trans_a == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t bk = g->d.trans_b == CUBLAS_OP_N ? b->rows : b->cols;
    uint64_t bn = g->d.trans_b == CUBLAS_OP_N ? b->cols : b->rows;
    char msg[256];
    if (am != d->rows || bn != d->cols || ak != bk || c->rows != d->rows || c->cols != d->cols) {
        snprintf(msg, sizeof msg, "shapes disagree: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu, "
                 "D %llux%llu", (unsigned long long)am, (unsigned long long)ak,
                 (unsigned long long)bk, (unsigned long long)bn, (unsigned long long)c->rows,
                 (unsigned long long)c->cols, (unsigned long long)d->rows, (unsigned long long)d->cols);
        say(msg);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const layout *all[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (all[i]->ld < (int64_t)all[i]->rows || all[i]->ld < 1 || all[i]->batch != d->batch) {
            snprintf(msg, sizeof msg, "matrix %c: ld %lld < rows %llu, or batch %d differs from D's %d",
                     "ABCD"[i], (long long)all[i]->ld, (unsigned long long)all[i]->rows,
                     all[i]->batch, d->batch);
            say(msg);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    if (!float_type(a->type) || a->type != b->type || !float_type(c->type) || c->type != d->type ||
        (a->type == CUDA_R_32F && d->type != CUDA_R_32F) ||
        (g->d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a->type != CUDA_R_32F)) {
        say("this combination of types is not supported");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int epi_bias = g->d.epilogue == CUBLASLT_EPILOGUE_BIAS || g->d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    cudaDataType bt = g->d.bias_type < 0 ? d->type : (cudaDataType)g->d.bias_type;
    if (epi_bias && (!g->d.bias || !float_type(bt))) {
        say("a bias epilogue without a bias pointer, or with a bias type not supported");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *m = (int64_t)d->rows, *n = (int64_t)d->cols, *k = (int64_t)ak;
    return CUBLAS_STATUS_SUCCESS;
}

/* Elements a layout spans: (batch - 1) stride + (cols - 1) ld + rows. */
static size_t extent(const layout *l)
{
    if (!l->rows || !l->cols)
        return 0;
    return (size_t)((int64_t)(l->batch - 1) * l->stride + (int64_t)(l->cols - 1) * l->ld +
                    (int64_t)l->rows);
}

/* Whether every batch entry of every operand has the alignment the
 * algorithm was chosen for (the real library's kernels assume it: a
 * misaligned operand is CUBLAS_STATUS_NOT_SUPPORTED, or worse). */
static int aligned_ok(const matmul *g, const cublasLtMatmulAlgo_t *algo)
{
    const layout *ls[4] = {&g->a, &g->b, &g->c, &g->dd};
    const void *ps[4] = {g->A, g->B, g->C, g->D};
    for (int i = 0; i < 4; i++) {
        uint64_t a = algo->data[1 + i] ? algo->data[1 + i] : 256;
        uint64_t bits = (uint64_t)(uintptr_t)ps[i];
        if (ls[i]->batch > 1)
            bits |= (uint64_t)ls[i]->stride * fk_type_size(ls[i]->type);
        if (bits % a) {
            fprintf(stderr, "fakecuda: cublasLtMatmul: %c (%p, batch stride %lld elements) is not "
                    "aligned to the %llu bytes its algorithm was chosen for "
                    "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES)\n", "ABCD"[i], ps[i],
                    (long long)ls[i]->stride, (unsigned long long)a, "ABCD"[i]);
            return 0;
        }
    }
    return 1;
}

static int operands_ok(const matmul *g, const char *who)
{
    const layout *ls[4] = {&g->a, &g->b, &g->c, &g->dd};
    const void *ps[4] = {g->A, g->B, g->C, g->D};
    for (int i = 0; i < 4; i++) {
        if (i == 2 && g->beta == 0)
            continue; /* C is not read */
        char what[8] = {"ABCD"[i], 0};
        if (fk_check_range(g->dev, ps[i], extent(ls[i]) * fk_type_size(ls[i]->type), who, what))
            return 0;
    }
    int epi_bias = g->d.epilogue == CUBLASLT_EPILOGUE_BIAS || g->d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    cudaDataType bt = g->d.bias_type < 0 ? g->dd.type : (cudaDataType)g->d.bias_type;
    return !epi_bias || !fk_check_range(g->dev, g->d.bias, g->dd.rows * fk_type_size(bt), who, "bias");
}

static double io_load(const void *base, int64_t i, int type)
{
    return fk_load(base, i, (cudaDataType)type);
}

static void io_store(void *base, int64_t i, int type, double v)
{
    fk_store(base, i, (cudaDataType)type, v);
}

static int matmul_run(void *ctx, void **state, char *why, size_t whylen)
{
    (void)state;
    const matmul *g = ctx;
    int64_t m, n, k;
    check_shapes(g, &m, &n, &k);
    if (!operands_ok(g, "running cublasLtMatmul")) {
        snprintf(why, whylen, "an operand's memory was freed before the matmul ran");
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    int bias = g->d.epilogue == CUBLASLT_EPILOGUE_BIAS || g->d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    fkref_gemm r = {
        .m = m, .n = n, .k = k, .batch = g->dd.batch,
        .trans_a = g->d.trans_a == CUBLAS_OP_T, .trans_b = g->d.trans_b == CUBLAS_OP_T,
        .tf32 = g->d.compute == CUBLAS_COMPUTE_32F_FAST_TF32,
        .alpha = g->alpha, .beta = g->beta,
        .a = g->A, .b = g->B, .c = g->C, .bias = bias ? g->d.bias : NULL, .d = g->D,
        .lda = g->a.ld, .ldb = g->b.ld, .ldc = g->c.ld, .ldd = g->dd.ld,
        .stride_a = g->a.stride, .stride_b = g->b.stride, .stride_c = g->c.stride,
        .stride_d = g->dd.stride,
        .type_a = g->a.type, .type_b = g->b.type, .type_c = g->c.type, .type_d = g->dd.type,
        .type_bias = g->d.bias_type < 0 ? (int)g->dd.type : g->d.bias_type,
        .relu = g->d.epilogue == CUBLASLT_EPILOGUE_RELU || g->d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS};
    if (fkref_gemm_run(&r, &(fkref_io){io_load, io_store})) {
        snprintf(why, whylen, "out of host memory");
        return CUDA_ERROR_LAUNCH_FAILED;
    }
    return 0;
}

EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                     cublasLtMatmulDesc_t operationDesc,
                                                     cublasLtMatrixLayout_t Adesc,
                                                     cublasLtMatrixLayout_t Bdesc,
                                                     cublasLtMatrixLayout_t Cdesc,
                                                     cublasLtMatrixLayout_t Ddesc,
                                                     cublasLtMatmulPreference_t preference,
                                                     int requestedAlgoCount,
                                                     cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                     int *returnAlgoCount)
{
    FK_API;
    if (!lightHandle || lightHandle->magic != MAGIC_HANDLE)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc_of(operationDesc) || !layout_of(Adesc) || !layout_of(Bdesc) || !layout_of(Cdesc) ||
        !layout_of(Ddesc) || !pref_of(preference) || requestedAlgoCount < 1 ||
        !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    matmul g = {*desc_of(operationDesc), *layout_of(Adesc), *layout_of(Bdesc), *layout_of(Cdesc),
                *layout_of(Ddesc), 1, 0, NULL, NULL, NULL, NULL, 0};
    int64_t m, n, k;
    cublasStatus_t st = check_shapes(&g, &m, &n, &k);
    if (st)
        return st;
    /* the fastest first: one that needs workspace where the preference
       allows some (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, default 0), then
       one that needs none */
    const pref *q = pref_of(preference);
    uint64_t ws[2] = {q->max_workspace < ALGO_MAX_WORKSPACE ? q->max_workspace : ALGO_MAX_WORKSPACE, 0};
    int count = 0;
    for (int a = ws[0] ? 0 : 1; a < 2 && count < requestedAlgoCount; a++, count++) {
        cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[count];
        memset(r, 0, sizeof *r);
        r->algo.data[0] = ALGO_MARK; /* what cublasLtMatmul expects back */
        for (int i = 0; i < 4; i++)
            r->algo.data[1 + i] = q->align[i];
        r->algo.data[ALGO_WORKSPACE] = ws[a];
        r->workspaceSize = (size_t)ws[a];
        r->state = CUBLAS_STATUS_SUCCESS;
        r->wavesCount = 1;
    }
    *returnAlgoCount = count;
    return CUBLAS_STATUS_SUCCESS;
}

/* An algorithm a plan recorded: valid when it is the one the heuristic gives. */
EXPORT cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              const cublasLtMatmulAlgo_t *algo,
                                              cublasLtMatmulHeuristicResult_t *result)
{
    FK_API;
    if (!lightHandle || lightHandle->magic != MAGIC_HANDLE)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc_of(operationDesc) || !layout_of(Adesc) || !layout_of(Bdesc) || !layout_of(Cdesc) ||
        !layout_of(Ddesc) || !algo || !result)
        return CUBLAS_STATUS_INVALID_VALUE;
    matmul g = {*desc_of(operationDesc), *layout_of(Adesc), *layout_of(Bdesc), *layout_of(Cdesc),
                *layout_of(Ddesc), 1, 0, NULL, NULL, NULL, NULL, 0};
    int64_t m, n, k;
    cublasStatus_t st = check_shapes(&g, &m, &n, &k);
    if (st)
        return st;
    if (algo->data[0] != ALGO_MARK) {
        say("cublasLtMatmulAlgoCheck: not an algorithm cublasLtMatmulAlgoGetHeuristic returns");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    memset(result, 0, sizeof *result);
    result->algo = *algo;
    result->workspaceSize = (size_t)algo->data[ALGO_WORKSPACE];
    result->state = CUBLAS_STATUS_SUCCESS;
    result->wavesCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                     const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                                     const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                                     const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                     cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    FK_API;
    if (!lightHandle || lightHandle->magic != MAGIC_HANDLE)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc_of(computeDesc) || !layout_of(Adesc) || !layout_of(Bdesc) || !layout_of(Cdesc) ||
        !layout_of(Ddesc) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (algo && algo->data[0] != ALGO_MARK) {
        say("the algo is not one cublasLtMatmulAlgoGetHeuristic returned");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    matmul *g = calloc(1, sizeof *g);
    if (!g)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *g = (matmul){*desc_of(computeDesc), *layout_of(Adesc), *layout_of(Bdesc), *layout_of(Cdesc),
                  *layout_of(Ddesc), 0, 0, A, B, C, D, fk_stream_device((CUstream)stream)};
    memcpy(&g->alpha, alpha, 4);
    memcpy(&g->beta, beta, 4);
    int64_t m, n, k;
    cublasStatus_t st = check_shapes(g, &m, &n, &k);
    if (!st && fk_stream_check((CUstream)stream) != CUDA_SUCCESS) {
        say("the stream is not a live stream of the current context, or its device failed");
        st = CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (!st && !operands_ok(g, "cublasLtMatmul"))
        st = CUBLAS_STATUS_INVALID_VALUE;
    if (!st && algo && !aligned_ok(g, algo))
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    /* "CUBLAS_STATUS_INVALID_VALUE ... when workspaceSizeInBytes is less than
       workspace required by configured algo" (cublasLt.h, cublasLtMatmul);
       without an algo the implicit heuristic uses the default preference,
       which allows no workspace */
    uint64_t need = algo ? algo->data[ALGO_WORKSPACE] : 0;
    if (!st && workspaceSizeInBytes < need) {
        fprintf(stderr, "fakecuda: cublasLtMatmul: %zu bytes of workspace, the algorithm needs %llu "
                "(its cublasLtMatmulHeuristicResult_t.workspaceSize)\n", workspaceSizeInBytes,
                (unsigned long long)need);
        st = CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!st && workspaceSizeInBytes &&
        fk_check_range(g->dev, workspace, workspaceSizeInBytes, "cublasLtMatmul", "workspace"))
        st = CUBLAS_STATUS_INVALID_VALUE;
    /* the handle's first matmul sets cuBLASLt up (loads its kernels,
       allocates), which a stream capture cannot hold: refused, and the
       capture invalidated, as the setup's synchronizing calls would */
    if (!st && !lightHandle->warm && fk_stream_capture((CUstream)stream)) {
        say("the handle's first matmul is inside a stream capture, where cuBLASLt's setup (loading "
            "kernels, allocating) cannot run; issue one outside the capture first");
        fk_capture_refuse((CUstream)stream);
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (st) {
        free(g);
        return st;
    }
    char what[96];
    snprintf(what, sizeof what, "cublasLtMatmul %lldx%lldx%lld (batch %d)", (long long)m,
             (long long)n, (long long)k, g->dd.batch);
    int capturing = fk_stream_capture((CUstream)stream) != 0;
    fk_task *t = fk_task_new(what, matmul_run, NULL, g, free, NULL);
    fk_task_cost(t, FK_COST_LIBRARY);
    if (fk_enqueue((CUstream)stream, t))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    lightHandle->warm |= !capturing;
    return CUBLAS_STATUS_SUCCESS;
}
