/* The program codegen makes and the runtime runs (docs/codegen.md, docs/design.md
 * "The contract between codegen and the runtime"): for each device an ordered
 * list of steps, each a launch of a generated kernel, a cuBLASLt matmul, a
 * cuDNN convolution, a collective or point-to-point transfer (NCCL), or a
 * copy, naming memory as (region, offset); the kernels' modules and their
 * compiled images; the options it was made with.  This header is the
 * program's format alone: the runtime includes it, not the generator's
 * interface (codegen.h: cg_generate, cg_compile). */
#ifndef GNC_PROGRAM_H
#define GNC_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* ---- options ---- */


/* How convolutions run: cuDNN calls, implicit-GEMM kernels codegen writes
 * (codegen/igemm.c), or cuDNN calls on channels-last copies of the operands
 * (NHWC tensors, KRSC filters, transposed by generated kernels around the
 * call).  docs/codegen.md says how to choose; gnc compile --conv auto
 * --autotune times all three for each convolution (cg_options.conv_choice). */
typedef enum { CG_CONV_CUDNN, CG_CONV_IGEMM, CG_CONV_CUDNN_NHWC, CG_CONV_NIMPLS } cg_conv_impl;

/* How 4-d activations are stored (codegen/layout.c).  Auto: channels-last
 * (NHWC) in bf16 and fp16 programs whose convolutions are cuDNN calls (its
 * 16-bit tensor-core kernels take NHWC, and transpose NCHW tensors inside
 * the call otherwise), NCHW elsewhere.  NHWC: channels-last at any precision
 * (the tests' way to check every kernel's channels-last form at fp32). */
typedef enum { CG_LAYOUT_AUTO, CG_LAYOUT_NCHW, CG_LAYOUT_NHWC } cg_layout;

#define CG_MAX_ARCHS 8

typedef struct {
    ir_precision precision;
    int narchs;                 /* target architectures; 0: sm_80 and sm_90 */
    const char *archs[CG_MAX_ARCHS];   /* "sm_80", "sm_90", ...: a cubin each, and PTX
                                          of the newest for the GPUs after it */
    int kernels_per_module;     /* kernels per translation unit at most; 0: 48 */
    double loss_scale;          /* fp16: the initial loss scale; 0: 65536 */
    int loss_scale_interval;    /* fp16: good steps before it doubles; 0: 2000 */
    int64_t gemm_workspace;     /* bytes of workspace per cuBLASLt call; 0: 32 MiB if an
                                   arch is sm_90 or later (NVIDIA's advice for Hopper),
                                   else 4 MiB */
    int64_t conv_workspace;     /* bytes a cuDNN algorithm may use at most; 0: 64 MiB */
    cg_conv_impl conv;          /* cuDNN (default), generated implicit GEMMs, or
                                   cuDNN on channels-last copies */
    cg_layout layout;           /* of activations: auto (default), NCHW or NHWC */
    int deterministic;          /* cuDNN's deterministic algorithms only (--deterministic:
                                   the same bits every run); else the fastest */
    const signed char *conv_choice;  /* NULL, or one convolution's own choice: indexed
                                   by the id of its node's first result (the
                                   graph's nvalues entries), a cg_conv_impl, or -1
                                   for conv's; cg_generate keeps a copy */
} cg_options;

cg_options cg_options_default(void);
const char *cg_conv_name(cg_conv_impl c);            /* "cudnn", "igemm", "cudnn-nhwc" */
int cg_conv_lookup(const char *name);                /* -1 if unknown */
const char *cg_layout_name(cg_layout l);             /* "auto", "nchw", "nhwc" */
int cg_layout_lookup(const char *name);              /* -1 if unknown */
/* Whether n is a convolution (forward, backward data or filter), and how o
 * runs it: its conv_choice, else conv. */
int cg_is_conv(const ir_node *n);
cg_conv_impl cg_conv_of(const cg_options *o, const ir_node *n);

/* ---- memory ---- */

typedef enum {
    CG_ARENA,       /* node results, at the memory plan's offsets (mp_plan.offset_by_id) */
    CG_PARAMS,      /* parameters, buffers, optimizer state, weights computed once,
                       low-precision copies of weights, the program's state */
    CG_INPUTS,      /* the inputs the device reads, fed by the caller */
    CG_WORKSPACE,   /* scratch: library workspaces, staging, converted operands */
    CG_NREGIONS
} cg_region;

typedef struct {
    cg_region region;
    int64_t offset;             /* bytes from the region's start, 256-byte aligned */
} cg_ref;

typedef enum {
    CG_VALUE_INPUT,             /* an input: the caller writes it before a run */
    CG_VALUE_PARAM,             /* a parameter, buffer or optimizer state */
    CG_VALUE_WEIGHT,            /* computed from weights alone, by the init steps */
    CG_VALUE_NODE,              /* a node result in the arena */
    CG_VALUE_SHADOW,            /* a copy of a parameter or input: bf16, fp16, KRSC */
    CG_VALUE_STATE              /* the program's own: gnc.status, gnc.loss_scale */
} cg_value_kind;

/* Where one value lives on one device, and as what. */
typedef struct {
    cg_value_kind kind;
    const ir_value *value;      /* NULL for the program's state */
    const char *name;           /* the value's name; shadows "NAME.bf16", "NAME.fp16" */
    cg_ref at;
    ir_dtype dtype;             /* as stored: floats as f32, bf16 or f16 (precision) */
    int64_t numel, bytes;       /* bytes = numel x the dtype's size */
    int nhwc;                   /* a 4-d value stored channels-last: [n, h, w, c] (a
                                   filter gradient [k, r, s, c]); never an input, a
                                   parameter, an output, the loss or an update */
} cg_value;

/* The program's state word of a device (region CG_PARAMS): a kernel that finds
 * an index or label out of range sets it (the first one wins) and the step
 * named by step reports it as the CPU executor would. */
typedef struct {
    int32_t code;               /* 0: fine; CG_STATUS_* */
    int32_t step;               /* the step that failed */
    int64_t index, value;       /* the position and the bad index or label */
} cg_status;

enum { CG_STATUS_OK, CG_STATUS_EMBEDDING_INDEX, CG_STATUS_LABEL };

/* ---- steps ---- */

typedef enum { CG_ARG_BUFFER, CG_ARG_I64, CG_ARG_F32 } cg_arg_kind;

typedef struct {
    cg_arg_kind kind;
    cg_ref buf;                 /* CG_ARG_BUFFER: a device pointer */
    int64_t i;                  /* CG_ARG_I64 */
    float f;                    /* CG_ARG_F32 */
} cg_arg;

/* A kernel launch: kernel is an index into cg_program.kernels; its parameters
 * are args, in order (cuLaunchKernel's kernelParams). */
typedef struct {
    int kernel;
    unsigned grid[3], block[3];
    int shared_bytes;           /* dynamic shared memory (the kernels use static) */
    int nargs;
    cg_arg *args;
} cg_launch;

/* The data types of library calls (cudaDataType, cublasComputeType_t). */
typedef enum { CG_COMPUTE_32F, CG_COMPUTE_32F_FAST_TF32 } cg_compute;

/* cuBLASLt epilogues (cublasLtEpilogue_t) */
typedef enum {
    CG_EPI_DEFAULT,             /* CUBLASLT_EPILOGUE_DEFAULT */
    CG_EPI_RELU,                /* CUBLASLT_EPILOGUE_RELU */
    CG_EPI_BIAS,                /* CUBLASLT_EPILOGUE_BIAS: D += bias[m], each column */
    CG_EPI_RELU_BIAS            /* CUBLASLT_EPILOGUE_RELU_BIAS */
} cg_epilogue;

/* One cublasLtMatmul, column-major as cuBLAS sees memory:
 *   D[m, n] = epilogue(alpha op(A)[m, k] op(B)[k, n] + beta C[m, n])
 * batch times, each operand advancing by its stride (elements; 0 broadcasts it).
 * A row-major product Y = X W^T is Y^T = W X^T: codegen does the swapping. */
typedef struct {
    int trans_a, trans_b;       /* CUBLAS_OP_T where set */
    int64_t m, n, k;
    int64_t lda, ldb, ldc;      /* ldd = ldc */
    int64_t batch;
    int64_t stride_a, stride_b, stride_c;
    float alpha, beta;
    cg_ref a, b, c, d;          /* c: read when beta != 0; d: written (c == d here) */
    cg_ref bias;                /* CG_EPI_BIAS, CG_EPI_RELU_BIAS: m elements */
    ir_dtype type_a, type_b, type_d, type_bias;   /* type_c = type_d */
    cg_compute compute;
    cg_epilogue epilogue;
    cg_ref workspace;           /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES of it */
    int64_t workspace_bytes;
    int tuned;                  /* algo holds the cublasLtMatmulAlgo_t --autotune timed
                                   fastest; else the runtime asks the heuristic */
    uint64_t algo[8];
} cg_gemm;

typedef enum { CG_CONV_FORWARD, CG_CONV_BACKWARD_DATA, CG_CONV_BACKWARD_FILTER } cg_conv_kind;

typedef enum {
    CG_MATH_FMA,                /* CUDNN_FMA_MATH: exact fp32 */
    CG_MATH_TENSOR_OP,          /* CUDNN_TENSOR_OP_MATH: TF32 for fp32 data, and half data */
} cg_math;

/* One cuDNN convolution, NCHW (CUDNN_TENSOR_NCHW, KCRS filters; with nhwc
 * set CUDNN_TENSOR_NHWC, KRSC filters), cross-correlation
 * (CUDNN_CROSS_CORRELATION), as cudnnConvolutionForward / BackwardData /
 * BackwardFilter, the algorithm the runtime's choice within workspace bytes:
 *   forward:         y = act(alpha conv(x, w) + beta z + bias)
 *                    (cudnnConvolutionBiasActivationForward where relu is
 *                    set, z may be y; else cudnnConvolutionForward with
 *                    beta onto y holding z.  Codegen sets relu, and bias with
 *                    it, only where the fused call is documented to run:
 *                    fp32 or fp16, NCHW; elsewhere a kernel after the call
 *                    takes them, library.c says why)
 *   backward data:   dx = alpha conv_transpose(dy, w)           (y holds dy, x dx)
 *   backward filter: dw = alpha conv^T(x, dy)                   (y holds dy, w dw) */
typedef struct {
    cg_conv_kind kind;
    int64_t n, c, h, w;         /* x: [n, c, h, w] */
    int64_t k, r, s;            /* w: [k, c / groups, r, s] */
    int64_t p, q;               /* y: [n, k, p, q] */
    int pad[2], stride[2], dilation[2], groups;
    cg_ref x, wt, y;            /* forward reads x, wt, writes y; ... */
    int has_bias, has_z, relu;  /* forward only */
    cg_ref bias, z;             /* bias: k elements; z: like y */
    int nhwc;                   /* x, y, z channels-last, w KRSC (bias: k elements) */
    ir_dtype dtype;             /* of x, w, y, z, bias; computed in float */
    cg_math math;
    float alpha, beta;          /* beta: z's factor (1 with z, else 0) */
    cg_ref workspace;           /* what the algorithm may use: workspace_bytes at most */
    int64_t workspace_bytes;
    int tuned;                  /* algo is the cudnnConvolution*Algo_t --autotune timed
                                   fastest; else the runtime times them (or asks the _v7
                                   heuristics) */
    int algo;
    int deterministic;          /* only algorithms cuDNN lists as deterministic; else the
                                   fastest, deterministic or not (cg_options) */
} cg_conv;

/* One NCCL call (ncclGroupStart/End around several tensors of one all_reduce):
 *   all_reduce      recv[t] = the sum over the group of send[t]        count[t] elements
 *   all_gather      recv = every rank's send, in rank order            count: per rank
 *   reduce_scatter  recv = the sum of every rank's send, rank's part   count: per rank
 *   broadcast       recv = root's send                                 count elements
 *   send / recv     to / from device peer                              count elements
 * An IR all_gather or reduce_scatter along an axis other than the outermost is
 * one along the outermost of a staging buffer, which a generated kernel packs
 * or unpacks (the step before or after). */
typedef struct {
    ir_op op;                   /* IR_OP_ALL_REDUCE ... IR_OP_RECV */
    int64_t id;                 /* the IR's: the calls of one collective share it */
    int ngroup;
    const int64_t *group;       /* devices in rank order (for send/recv: the pair) */
    int rank;                   /* this device's rank in group */
    int peer, root;             /* send/recv: the other device; broadcast: the root rank */
    int ntensors;
    cg_ref *send, *recv;        /* [ntensors] */
    int64_t *count;             /* [ntensors] elements */
    ir_dtype dtype;
    int reduce_max;             /* ncclMax instead of ncclSum (fp16's overflow flag) */
    int64_t bytes;              /* what this device sends */
    int local_kernel;           /* all_reduce, reduce_scatter: the kernel that reduces
                                   without NCCL, for devices that share a GPU:
                                   acc[i] = acc[i] + x[i] (max with reduce_max), args
                                   (acc, x, n), blocks of 256; -1 for the others */
} cg_comm;

typedef struct {
    cg_ref src, dst;
    int64_t bytes;
} cg_copy;

typedef enum {
    CG_STEP_KERNEL, CG_STEP_GEMM, CG_STEP_CONV, CG_STEP_COMM, CG_STEP_COPY
} cg_step_kind;

typedef struct {
    cg_step_kind kind;
    const ir_node *node;        /* the IR node it comes from (a fused node's first
                                   member); NULL for the program's own steps */
    const char *what;           /* a short description: "fused dense+relu %fc1" */
    /* Steps run in order on the device's compute stream, but communication
     * steps, which may run on a stream of their own: wait is then the latest
     * earlier step of the other stream whose memory this one reads or writes
     * (-1: none), what a runtime must wait for to overlap them safely. */
    int wait;
    int64_t read_bytes, written_bytes;  /* what it touches (its accesses), and the */
    int64_t elements;                   /* elements of its largest operand */
    union {
        cg_launch launch;
        cg_gemm gemm;
        cg_conv conv;
        cg_comm comm;
        cg_copy copy;
    } u;
} cg_step;

/* ---- the program ---- */

typedef struct {
    char *name;                 /* the extern "C" name */
    int module;                 /* the translation unit it is in */
    const ir_node *node;        /* the first IR node it computes */
    int elementwise;            /* an elementwise chain: must not spill registers */
    int block;                  /* threads per block it is written for */
    int wmma;                   /* uses the tensor cores through wmma (<mma.h>) */
    int layout;                 /* copies a tensor between NCHW and NHWC (a transpose) */
    /* after cg_compile, from ptxas, per arch (index into cg_program.archs) */
    int regs[CG_MAX_ARCHS], spill_stores[CG_MAX_ARCHS], spill_loads[CG_MAX_ARCHS];
    int shared_bytes[CG_MAX_ARCHS];
} cg_kernel;

/* A compiled image of a module for one target. */
typedef struct {
    char arch[16];              /* "sm_80", or "compute_90" for PTX */
    int ptx;
    void *data;
    size_t size;
    int from_cache;
} cg_image;

typedef struct {
    char *source;               /* the translation unit: the prelude, then kernels */
    size_t source_len;
    size_t body_offset;         /* where the kernels start (after the prelude) */
    int nkernels;
    int *kernels;               /* its kernels, in source order */
    int *kernel_line;           /* [nkernels]: the first line of each in source */
    int nimages;                /* after cg_compile: a cubin per arch, then PTX */
    cg_image *images;
    char *log;                  /* ptxas -v output of the last compile (NULL from cache) */
} cg_module;

typedef struct {
    int64_t region_bytes[CG_NREGIONS];
    int nvalues;
    cg_value *values;           /* everything the device holds */
    int *slot_by_id;            /* ir value id -> index into values, or -1 */
    int ninit;
    cg_step *init;              /* the weights computed once: before the first run,
                                   and after the caller writes parameters */
    int nsteps;
    cg_step *steps;             /* one run: ends with the updates' copies */
    cg_ref status;              /* a cg_status */
    cg_ref loss_scale;          /* fp16: the scaler's state (below) */
} cg_device;

/* fp16 dynamic loss scaling, as torch.cuda.amp.GradScaler: the loss gradient
 * is seeded with scale instead of 1; before the optimizers a kernel checks
 * every gradient they read (and an all_reduce with max shares the result
 * between devices); the optimizers unscale, and skip the step when a gradient
 * is not finite; a last kernel halves the scale after such a step, and
 * doubles it after interval good steps in a row.  State, 16 bytes per device:
 * float scale, int32 good steps, int32 found_inf, float 1/scale. */
typedef struct {
    int enabled;
    float init, growth, backoff;
    int interval;
} cg_loss_scale;

typedef struct cg_program {
    cg_options opts;
    int narchs;
    char archs[CG_MAX_ARCHS][16];
    int nkernels;
    cg_kernel *kernels;
    int nmodules;
    cg_module *modules;
    int ndevices;
    cg_device *devices;
    cg_loss_scale loss_scale;
    const ir_graph *graph;
    struct base_arena *pool;    /* internal: what the program allocated */
} cg_program;

/* Frees p (cg_generate's, or a plan's: rt_plan_program). */
void cg_program_free(cg_program *p);

/* A bfloat16 or float16 (t: IR_BF16, IR_F16) to float and back, rounding to
 * nearest even as the kernels' conversions do: how the host reads and writes
 * values stored in half precision. */
float cg_half_to_f32(unsigned short h, ir_dtype t);
unsigned short cg_f32_to_half(float f, ir_dtype t);

/* The tensors cuDNN copies between NCHW and NHWC inside call c, by its rule:
 * its tensor-core kernels (16-bit data, or TF32 math on floats) take NHWC,
 * so a call on NCHW tensors copies its three (x, w and y; or dy, w and dx;
 * or x, dy and dw) to NHWC and its result back: 3.  0 for exact fp32, for
 * NHWC tensors, and for a forward call on one input channel, which cuDNN
 * runs on a generic kernel (the H200 profile of 2026-11-26: resnet18's stem,
 * bench/results/2026-11-26-h200/). */
int cg_conv_layout_copies(const cg_conv *c);

/* Device d's place for v, or NULL when d holds no v. */
const cg_value *cg_value_of(const cg_program *p, int d, const ir_value *v);

/* What one run of device d asks of its GPU, counted from its steps (gnc
 * inspect, gnc compile --stats, docs/perf.md): launches of generated kernels,
 * library calls (cuBLASLt, cuDNN), communication calls, copies and their
 * bytes, the bytes kernels read and write, the smallest grid among kernels
 * over a million elements (0 when there is none) with its step, and the
 * layout transposes: its own kernels' and those cuDNN makes inside its calls
 * (cg_conv_layout_copies). */
typedef struct {
    int steps, kernels, library, comms, copies;
    int layout_own, layout_library;
    int64_t copy_bytes, kernel_read_bytes, kernel_written_bytes;
    int64_t big_min_blocks;
    const cg_step *big_min_step;
} cg_run_stats;
void cg_run_stats_of(const cg_program *p, int d, cg_run_stats *s);

/* Point-to-point calls across processes (codegen/p2p.c): the end of the
 * batch of consecutive sends and receives from step s, issued as one NCCL
 * group; and whether every device's calls of the run (init: of the init
 * steps) finish when each waits for its partner as NCCL's may (0), or
 * would deadlock (-1, the waiting calls in err). */
int cg_p2p_batch_end(const cg_step *steps, int n, int s);
int cg_p2p_order_check(const cg_program *p, int init, char *err, size_t errlen);

/* The SHA-256 of n bytes at data, into out: what a plan file binds a module's
 * source and its images with (runtime/format/plan.c). */
void cg_sha256_of(const void *data, size_t n, unsigned char out[32]);

#endif
