/* The cost model: how long one step of a program takes on a device.
 *
 * Expects: a verified graph (ir_verify), partitioned or not, fused or not.  It
 * changes nothing; it reads the devices (ir_node.device), the fusion groups
 * (ir_node.group) and the shapes.
 *
 * The equations, in seconds (dev a cost_device, b bytes, n devices in a group):
 *
 *   kernel          max(F_gemm / flops + F_other / flops_other, B / mem_bw) + launch
 *                   A kernel is one node, or a fused group: consecutive nodes of
 *                   one nonzero group on one device.  F: its members' FLOPs
 *                   (cost_node_flops), at the GEMM rate for dense, matmul, conv2d
 *                   and their gradients.  B: for one node, every operand read
 *                   once and every result written (cost_node_bytes); for a group,
 *                   what it reads from outside the group, and the results it
 *                   writes that are read outside it or are an output, the loss
 *                   or an update's source (the rest stays in registers).
 *   all_reduce      2 (n-1)/n b / link_bw + 2 (n-1) link_latency
 *   all_gather      (n-1)/n b_total / link_bw + (n-1) link_latency
 *   reduce_scatter  (n-1)/n b_total / link_bw + (n-1) link_latency
 *   broadcast       b / link_bw + ceil(log2 n) link_latency
 *   send / recv     b / link_bw + link_latency
 *   and 0 for n = 1.
 *
 * These are NCCL's ring algorithms (the bandwidth factors are those of
 * nccl-tests' doc/PERFORMANCE.md, "bus bandwidth"; the step counts those of
 * NCCL's own tuning model, src/graph/tuning.cc): all_reduce is a reduce-scatter
 * then an all-gather around the ring, each of n-1 steps moving b/n over every
 * link; all_gather and reduce_scatter are one half of that, over b_total,
 * the whole tensor of the group (all_gather's result, or reduce_scatter's
 * operand; each rank holds b_total/n of it before or after); a collective
 * of several operands (a bucket) is one call, priced on the sum of its
 * operands' bytes (an all_gather's: its results') with one latency;
 * broadcast pipelines the tensor down a tree of depth ceil(log2 n).  The sums
 * of all_reduce and reduce_scatter run at link speed, inside these times.
 *
 * FLOPs per node (e: elements of the result, unless said otherwise): matmul,
 * dense, conv2d and their gradients 2 per multiply-add, and e for a bias;
 * elementwise ops (activations and their gradients, add, sub, mul, div,
 * training dropout's multiply) e, transcendental ones included: at 8 bytes
 * an element they stay bound by memory unless they took more than 21 FLOPs an
 * element (cpu) to 96 (h100-nvlink), so more precise counts would change nothing;
 * batchnorm 2e (a scale and a shift per element), batchnorm_train 5e (mean,
 * variance, scale and shift), batchnorm_grad 9e, layernorm 7e, layernorm_grad
 * 16e, softmax and log_softmax 5e, their gradients 4e, cross_entropy 5 per
 * logit and cross_entropy_grad 7, mse 3 per element, pooling one per window
 * element (and one more per result for averages, per element of dy for the
 * gradients; adaptive_avgpool2d's per window element and result, its gradient
 * two per window element), upsample2d 9e bilinear, e nearest (its source index),
 * its gradient per element of dy 12 bilinear (3 per tap), 1 nearest, sum_to and global_avgpool
 * one per element summed, embedding_grad one per element of dy, optimizers per
 * parameter element (sgd 2, 2 more for each of weight decay, momentum,
 * nesterov; adam 12, and 2 for weight decay), bn_fold_scale 3 per channel.
 * Data movement (reshape, transpose, concat, slice, broadcast_to, embedding,
 * inference dropout, const) and communication: 0.
 *
 * The simulation (cost_simulate):
 *   1. Kernels.  Nodes whose results the executor computes once from the weights
 *      (ir_weight_only) cost nothing per step, and their results are ready at 0
 *      like the inputs and parameters.
 *   2. Communications.  Sorted, not scanned: a collective's nodes share their id,
 *      a send and its recv (id, sender, receiver).  One task per collective and
 *      per pair, whose cost is that of its node on the group's first device
 *      (group[0]), or of the send.
 *   3. Times.  Each device has a compute stream, which runs its kernels in list
 *      order, and a communication stream, which runs its communications in list
 *      order.  Each task starts at the latest end of its predecessors: the tasks
 *      that compute its operands, and the task before it on its stream, on
 *      every participating device for a communication; it ends at start + cost,
 *      and its results are ready then.  So a collective starts when every
 *      participant has reached it, a recv completes at max(the send's start, its
 *      device's communication stream free) + cost, and a kernel waits for a
 *      communication only when it reads its result.  The tasks are evaluated in
 *      topological order (Kahn's algorithm).  When streams wait on each other in
 *      a cycle (possible in a verified program when collectives pairwise share
 *      one device but come in a circle), the pending communication that comes
 *      first in the list starts anyway, as the executor runs it, ignoring the
 *      stream order, and cost_sim.forced counts it.
 *   4. The results: per device, when it finishes and its streams' busy times;
 *      per communication, its interval and the compute work left on its first
 *      device when it starts, measured on its device's kernels (sorted by start:
 *      a binary search each).
 *
 * Guarantees: the graph is unchanged; every time is finite and non-negative;
 * the simulation takes time linear in nodes and operands, but for sorting the
 * C communication nodes and a binary search per communication, O(C log C). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cost.h"

/* ---- devices ---- */

#define GiB ((int64_t)1 << 30)

/* Every number comes from a datasheet or a measurement, as each comment says.
 *
 * The Hopper GPUs' rates by kind of kernel (H200 and H100 share the SM, its
 * clocks and the libraries' kernels), fitted to the one GPU run so far: an
 * H200, 2026-11-26, resnet18 training at batch 256 (bench/results/2026-11-26-
 * h200/, docs/perf.md; docs/passes.md, "The cost model", says how, and
 * tests/test_calibration.c holds them to it).  The GEMM shares are of a
 * resnet18's cuDNN convolutions: exact fp32 0.3 (fitted to the fp32 step),
 * TF32 0.14 (the tf32 step; cuDNN's heuristic picks, untimed), 16-bit 0.33
 * (the convolution kernels of the bf16 step's ncu profile); codegen's
 * implicit GEMMs 0.032 of the 16-bit peak (the bf16 --conv igemm step).  The
 * memory shares, of the bf16 profile's kernels by class: elementwise kernels
 * 0.8 (add_relu_grad streams at 4.2 TB/s), normalization 0.36 (batchnorm's
 * partial sums reach 0.7 TB/s, its other passes about 2), the multi-tensor
 * update and casts 0.35, cuDNN's NCHW<->NHWC transposes 0.4.  A preset
 * computes at fp32 until cost_device_at says otherwise: flops is fp32's. */
#define HOPPER_PEAKS {66.9e12, 494.7e12, 989.4e12, 989.4e12} /* datasheet, dense: FP32,
                                         TF32, BF16 and FP16 tensor core (the sparse
                                         figures are twice these) */
#define HOPPER_RATES                                                                 \
    .gemm_eff = {GEFF_FP32, GEFF_TF32, GEFF_16, GEFF_16},                            \
    .igemm_eff = IGEMM_EFF, .mem_eff = MEM_EFF, .norm_eff = NORM_EFF,                \
    .multi_eff = MULTI_EFF,                                                          \
    .transpose_eff = TRANSPOSE_EFF
#define GEFF_FP32 0.3
#define GEFF_TF32 0.14
#define GEFF_16 0.33
#define IGEMM_EFF 0.032
#define MEM_EFF 0.8
#define NORM_EFF 0.36
#define MULTI_EFF 0.35
#define TRANSPOSE_EFF 0.4
/* The error the model claims for a step: the steps it was fitted to came
 * within 3%, the one it predicted without a fitted rate (bf16 --conv
 * cudnn-nhwc) within 12%; communication and several devices have never been
 * measured.  15%, for every preset. */
#define MODEL_ERROR 0.15

static const cost_device presets[] = {
    {
        .name = "h200",
        .flops = 66.9e12 * GEFF_FP32, /* fp32: peak[PREC_FP32] x gemm_eff */
        .flops_other = 66.9e12 * 0.6, /* datasheet: FP32 67 TFLOPS */
        .mem_bw = 4.8e12,             /* datasheet: HBM3e, 4.8 TB/s */
        .link_bw = 450e9,             /* NVLink 4, as h100-nvlink */
        .link_latency = 5e-6,         /* as h100-nvlink */
        .launch = 1e-6,               /* the gap between two kernels of a CUDA graph: the
                                         bf16 step's kernels (ncu) and its measured time
                                         leave about 1 us each */
        .mem_bytes = (int64_t)143771 << 20, /* nvidia-smi's memory.total (141 GB) */
        .sms = 132,
        .error = MODEL_ERROR,
        .peak = HOPPER_PEAKS,
        HOPPER_RATES,
    },
    {
        .name = "h100-nvlink",
        .flops = 66.9e12 * GEFF_FP32, /* fp32, as h200 */
        .flops_other = 66.9e12 * 0.6, /* datasheet: FP32 66.9 TFLOPS */
        .mem_bw = 3.35e12,            /* datasheet: HBM3, 3.35 TB/s */
        .link_bw = 450e9,             /* NVLink 4: 18 links x 25 GB/s per direction (the
                                         datasheet's 900 GB/s counts both directions) */
        .link_latency = 5e-6,         /* per ring step: NCCL's tuning model (tuning.cc,
                                         Ring/Simple) charges 3.4 us a step on NVLink and
                                         8.4 us once; 5 us folds the latter into a few steps */
        .launch = 3e-6,               /* an estimate: a CUDA kernel launch costs 2-4 us of
                                         CPU time, and a stream of small kernels runs at about
                                         that rate */
        .mem_bytes = 80 * GiB,        /* H100 SXM5 80 GB (HBM3 stacks count in GiB; CUDA
                                         leaves a little less usable) */
        .sms = 132,                   /* H100 SXM5: 132 SMs */
        .error = MODEL_ERROR,
        .peak = HOPPER_PEAKS,
        HOPPER_RATES,
    },
    {
        .name = "h100-pcie",
        .flops = 51.2e12 * GEFF_FP32, /* fp32, as h200 */
        .flops_other = 51.2e12 * 0.6, /* datasheet: FP32 51.2 TFLOPS */
        .mem_bw = 2.0e12,             /* datasheet: HBM2e, 2.0 TB/s */
        .link_bw = 55e9,              /* PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 = 63 GB/s
                                         per direction; ~55 GB/s after packet overheads */
        .link_latency = 10e-6,        /* NCCL's tuning model: 5.7 us a ring step on PCIe and
                                         8.4 us once; through the host bridge, ~10 us */
        .launch = 3e-6,               /* as h100-nvlink */
        .mem_bytes = 80 * GiB,        /* H100 PCIe 80 GB */
        .sms = 114,                   /* H100 PCIe: 114 SMs */
        .error = MODEL_ERROR,
        .peak = {51.2e12, 378e12, 756e12, 756e12}, /* datasheet, dense (TF32 756
                                         TFLOPS with sparsity, 378 dense) */
        HOPPER_RATES,
    },
    {
        /* A 2-core AVX-512 CPU: the AMD EPYC (Zen 4) VM the tests run on, measured
           once (2026-11-23) with a 60-line C program (gcc -O3 -march=native -fopenmp,
           OpenBLAS 0.3 built for OpenMP, 2 threads unless said, best of 5). */
        .name = "cpu",
        .flops = 190e9,               /* cblas_sgemm 2048 x 2048 x 2048: 192 GFLOP/s (1024:
                                         158-177, 4096: 199) */
        .flops_other = 96e9,          /* y = 0.999 y + x over 4096 floats in L1, each thread
                                         its own: 96 GFLOP/s, the vector units' rate
                                         outside GEMMs */
        .mem_bw = 36e9,               /* memcpy of 256 MiB, half per thread: 17.7-18.6 GB/s
                                         copied, 35-37 GB/s read and written */
        .link_bw = 11.9e9,            /* virtual devices exchange data by memcpy on one thread
                                         (runtime/cpu/comm.c): 256 MiB at 11.8-11.9 GB/s */
        .link_latency = 1e-6,         /* a hand-over between threads: one OpenMP barrier */
        .launch = 1e-6,               /* an empty OpenMP parallel region (the executor's
                                         per-kernel fork and join): 1.0-1.08 us */
        .mem_bytes = (int64_t)24684096 * 1024, /* /proc/meminfo MemTotal */
        .error = MODEL_ERROR,
    },
};

const cost_device *cost_device_list(int *count)
{
    *count = (int)(sizeof presets / sizeof *presets);
    return presets;
}

const cost_device *cost_device_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

typedef enum { KEY_RATE, KEY_TIME, KEY_BYTES, KEY_COUNT, KEY_SHARE } key_kind;

static const struct {
    const char *key;
    key_kind kind;
    size_t offset;
} keys[] = {
    {"flops", KEY_RATE, offsetof(cost_device, flops)},
    {"flops_other", KEY_RATE, offsetof(cost_device, flops_other)},
    {"mem_bw", KEY_RATE, offsetof(cost_device, mem_bw)},
    {"link_bw", KEY_RATE, offsetof(cost_device, link_bw)},
    {"link_latency", KEY_TIME, offsetof(cost_device, link_latency)},
    {"launch", KEY_TIME, offsetof(cost_device, launch)},
    {"mem", KEY_BYTES, offsetof(cost_device, mem_bytes)},
    {"sms", KEY_COUNT, offsetof(cost_device, sms)},
    {"error", KEY_SHARE, offsetof(cost_device, error)},
};

static const struct {
    const char *suffix;
    double scale;
} time_units[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}},
  byte_units[] = {{"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
                  {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                  {"TiB", 1099511627776.0}};

/* One key=value item, of length len, into d. */
static int parse_item(const char *item, int len, cost_device *d, char *err, size_t errlen)
{
    const char *eq = memchr(item, '=', (size_t)len);
    if (!eq) {
        snprintf(err, errlen, "expected key=value, got '%.*s'", len, item);
        return -1;
    }
    int klen = (int)(eq - item), vlen = len - klen - 1;
    const char *val = eq + 1;
    size_t k = 0, nkeys = sizeof keys / sizeof *keys;
    while (k < nkeys && !(strlen(keys[k].key) == (size_t)klen &&
                          memcmp(keys[k].key, item, (size_t)klen) == 0))
        k++;
    if (k == nkeys) {
        snprintf(err, errlen, "unknown key '%.*s'; keys: flops, flops_other, mem_bw, link_bw, "
                 "link_latency, launch, mem, sms, error", klen, item);
        return -1;
    }
    /* a number (strtod's syntax, no blanks), then an optional unit */
    char buf[64] = "";
    char *end = buf;
    double x = NAN;
    if (vlen > 0 && vlen < (int)sizeof buf && !isspace((unsigned char)val[0])) {
        memcpy(buf, val, (size_t)vlen);
        buf[vlen] = 0;
        errno = 0;
        x = strtod(buf, &end);
        if (errno == ERANGE)
            x = NAN;
    }
    double scale = *end ? 0 : 1;
    if (*end && keys[k].kind == KEY_TIME) {
        for (size_t u = 0; u < sizeof time_units / sizeof *time_units; u++)
            if (strcmp(end, time_units[u].suffix) == 0)
                scale = time_units[u].scale;
    } else if (*end && keys[k].kind == KEY_BYTES) {
        for (size_t u = 0; u < sizeof byte_units / sizeof *byte_units; u++)
            if (strcmp(end, byte_units[u].suffix) == 0)
                scale = byte_units[u].scale;
    }
    x *= scale;
    if (end == buf || scale == 0 || !isfinite(x) ||
        (keys[k].kind == KEY_COUNT && (x != floor(x) || x > 1e6)) ||
        (keys[k].kind == KEY_SHARE && x >= 1)) {
        static const char *const what[] = {
            [KEY_RATE] = "a number per second",
            [KEY_TIME] = "seconds, or a number with s, ms, us or ns",
            [KEY_BYTES] = "bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB",
            [KEY_COUNT] = "a whole number",
            [KEY_SHARE] = "a share from 0 to under 1",
        };
        snprintf(err, errlen, "bad number '%.*s' for %s: expected %s", vlen, val, keys[k].key,
                 what[keys[k].kind]);
        return -1;
    }
    int zero_ok = keys[k].kind == KEY_TIME || keys[k].kind == KEY_SHARE;
    if (x < 0 || (x == 0 && !zero_ok)) {
        snprintf(err, errlen, "%s must be %s, got %.*s", keys[k].key,
                 zero_ok ? "zero or more" : "positive", vlen, val);
        return -1;
    }
    if (keys[k].kind == KEY_BYTES) {
        if (x >= 0x1p62) {
            snprintf(err, errlen, "mem is too large: %.*s", vlen, val);
            return -1;
        }
        *(int64_t *)(void *)((char *)d + keys[k].offset) = (int64_t)llround(x);
    } else {
        *(double *)(void *)((char *)d + keys[k].offset) = x;
    }
    if (keys[k].offset == offsetof(cost_device, flops)) /* the GEMM rate at every precision */
        memset(d->peak, 0, sizeof d->peak);
    return 0;
}

int cost_device_parse(const char *spec, cost_device *out, char *err, size_t errlen)
{
    const char *comma = strchr(spec, ',');
    int nlen = comma ? (int)(comma - spec) : (int)strlen(spec);
    const cost_device *base = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
        if (strlen(presets[i].name) == (size_t)nlen &&
            memcmp(presets[i].name, spec, (size_t)nlen) == 0)
            base = &presets[i];
    if (!base) {
        snprintf(err, errlen, "unknown device '%.*s'; devices: h200, h100-nvlink, h100-pcie, cpu",
                 nlen, spec);
        return -1;
    }
    cost_device d = *base;
    while (comma) {
        const char *item = comma + 1;
        comma = strchr(item, ',');
        int len = comma ? (int)(comma - item) : (int)strlen(item);
        if (parse_item(item, len, &d, err, errlen))
            return -1;
    }
    *out = d;
    return 0;
}

void cost_device_at(cost_device *dev, ir_precision p)
{
    dev->precision = p;
    if (dev->peak[p] > 0)
        dev->flops = dev->peak[p] * dev->gemm_eff[p];
}

/* ---- nodes ---- */

static double numel(const ir_value *v)
{
    return (double)ir_type_numel(&v->type);
}

int cost_op_gemm(ir_op op)
{
    switch (op) {
    case IR_OP_MATMUL: case IR_OP_DENSE: case IR_OP_CONV2D:
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_DENSE_GRAD_WEIGHT:
    case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT:
    case IR_OP_ATTENTION: case IR_OP_ATTENTION_GRAD:
        return 1;
    default:
        return 0;
    }
}

/* The (query, key) pairs attention node n scores, over q's batch (its heads,
 * with grouped-query attention more than k's: each query head scores all its
 * keys): l s, or where causal the sum over the queries i of the keys j <= i. */
static double attention_pairs(const ir_node *n)
{
    const ir_type *q = &n->in[n->op == IR_OP_ATTENTION_GRAD]->type;
    double l = (double)q->dims[q->rank - 2], s = (double)n->in[2 - (n->op == IR_OP_ATTENTION)]
                                                      ->type.dims[q->rank - 2];
    double pairs = l * s;
    if (ir_attr_int(n, "causal")) /* rows i < s see i + 1 keys, the rest all s */
        pairs = l <= s ? l * (l + 1) / 2 : s * (s + 1) / 2 + (l - s) * s;
    return pairs * (double)ir_type_numel(q) / (l * (double)q->dims[q->rank - 1]);
}

/* Elements of a pooling window. */
static double window(const ir_node *n)
{
    const int64_t *k = ir_attr_ints(n, "kernel", NULL);
    return (double)(k[0] * k[1]);
}

/* Elements summed by adaptive_avgpool2d of in into out (the pairs of an input
 * element and a window holding it): per axis, the windows' lengths added up. */
static double adaptive_taps(const ir_type *in, const ir_type *out)
{
    double taps = (double)(in->dims[0] * in->dims[1]);
    for (int a = 2; a < 4; a++) {
        int64_t len = 0, i_n = in->dims[a], o_n = out->dims[a];
        for (int64_t i = 0; i < o_n; i++)
            len += ((i + 1) * i_n + o_n - 1) / o_n - i * i_n / o_n;
        taps *= (double)len;
    }
    return taps;
}

double cost_gemm_flops(const ir_node *n)
{
    const ir_type *out = &n->out[0]->type;
    double e = (double)ir_type_numel(out);
    switch (n->op) {
    /* two FLOPs per multiply-add */
    case IR_OP_CONV2D: {
        const ir_type *w = &n->in[1]->type;
        return 2.0 * e * (double)(w->dims[1] * w->dims[2] * w->dims[3]);
    }
    case IR_OP_DENSE:
        return 2.0 * e * (double)n->in[1]->type.dims[1];
    case IR_OP_MATMUL:
        return 2.0 * e * (double)n->in[0]->type.dims[n->in[0]->type.rank - 1];
    /* the gradients: as many multiply-adds as the forward op, over dy */
    case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT: {
        const int64_t *w = n->op == IR_OP_CONV2D_GRAD_WEIGHT ? out->dims : n->in[1]->type.dims;
        return 2.0 * numel(n->in[0]) * (double)(w[1] * w[2] * w[3]);
    }
    /* attention: q k^T and p v per pair (e and ev multiply-adds); its
       gradient recomputes q k^T and adds dy v^T, p^T dy, ds k and ds^T q
       (FlashAttention-2's five products); the softmax's exponentials are
       not counted, as PyTorch's and Megatron's FLOP counts do not */
    case IR_OP_ATTENTION: case IR_OP_ATTENTION_GRAD: {
        const ir_type *q = &n->in[n->op == IR_OP_ATTENTION_GRAD]->type;
        const ir_type *v = &n->in[n->op == IR_OP_ATTENTION_GRAD ? 3 : 2]->type;
        double fe = (double)q->dims[q->rank - 1], fev = (double)v->dims[v->rank - 1];
        return 2.0 * attention_pairs(n) *
               (n->op == IR_OP_ATTENTION ? fe + fev : 3 * fe + 2 * fev);
    }
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_DENSE_GRAD_WEIGHT: {
        int64_t in = n->op == IR_OP_DENSE_GRAD_WEIGHT ? out->dims[1] : n->in[1]->type.dims[1];
        return 2.0 * numel(n->in[0]) * (double)in;
    }
    default:
        return 0;
    }
}

double cost_node_flops(const ir_node *n)
{
    double e = (double)ir_type_numel(&n->out[0]->type);
    if (cost_op_gemm(n->op)) /* and a bias add per result */
        return cost_gemm_flops(n) +
               ((n->op == IR_OP_CONV2D || n->op == IR_OP_DENSE) && n->nin == 3 ? e : 0);
    switch (n->op) {
    /* elementwise: one per result element (dropout at inference is the
       identity, no arithmetic) */
    case IR_OP_DROPOUT:
        return 0;
    case IR_OP_DROPOUT_TRAIN:
        return e;

    /* normalization and reductions: a few per element */
    case IR_OP_BATCHNORM: case IR_OP_BATCHNORM_APPLY:
        return 2.0 * e;             /* x * scale + shift, per channel */
    case IR_OP_BATCHNORM_TRAIN:
        return 5.0 * e;             /* mean 1, variance 2, scale and shift 2 */
    case IR_OP_BATCHNORM_GRAD:
        return 9.0 * numel(n->in[0]); /* x-hat 2; sums of dy and dy x-hat 3; dx 4 */
    case IR_OP_LAYERNORM:
        return 7.0 * e;             /* mean 1, variance 2, normalize 2, affine 2 */
    case IR_OP_LAYERNORM_GRAD:
        return 16.0 * numel(n->in[0]); /* statistics 3, x-hat 2, dy w 1, two sums 3, dx 4,
                                          dw and db 3 */
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX:
        return 5.0 * e;             /* max, subtract, exp, sum, divide (or subtract the log) */
    case IR_OP_SOFTMAX_GRAD: case IR_OP_LOG_SOFTMAX_GRAD:
        return 4.0 * e;             /* a sum of products, then a multiply-subtract */
    case IR_OP_CROSS_ENTROPY:
        return 5.0 * numel(n->in[0]);   /* log_softmax of the logits; the mean is negligible */
    case IR_OP_CROSS_ENTROPY_GRAD:
        return 7.0 * numel(n->in[1]);   /* softmax 5, minus the one-hot, times dloss / n */
    case IR_OP_NLL_LOSS:            /* a load per position */
        return numel(n->in[1]);
    case IR_OP_NLL_LOSS_GRAD:       /* a store per element */
        return numel(n->in[1]);
    case IR_OP_MSE:
        return 3.0 * numel(n->in[0]);   /* subtract, square, sum */
    case IR_OP_SUM_TO: case IR_OP_GLOBAL_AVGPOOL:
        return numel(n->in[0]);
    case IR_OP_MAXPOOL2D:
        return e * window(n);
    case IR_OP_AVGPOOL2D:
        return e * (window(n) + 1);
    case IR_OP_MAXPOOL2D_GRAD:          /* the maximum found again, then added to */
    case IR_OP_AVGPOOL2D_GRAD:          /* divided, then added to each window element */
        return numel(n->in[0]) * (window(n) + 1);
    case IR_OP_ADAPTIVE_AVGPOOL2D:
        return adaptive_taps(&n->in[0]->type, &n->out[0]->type) + e;
    case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD: /* each window's share divided out, then gathered */
        return adaptive_taps(&n->out[0]->type, &n->in[0]->type) * 2;
    case IR_OP_UPSAMPLE2D:              /* bilinear: six products and three sums */
        return ir_attr_int(n, "mode") ? 9.0 * e : e;
    case IR_OP_UPSAMPLE2D_GRAD:         /* per element of dy and tap: weights, product, sum */
        return numel(n->in[0]) * (ir_attr_int(n, "mode") ? 12.0 : 1.0);
    case IR_OP_EMBEDDING_GRAD:
        return numel(n->in[0]);

    /* optimizers: per parameter element */
    case IR_OP_SGD: {
        double per = 2;             /* p - lr g */
        per += ir_attr_float(n, "weight_decay") != 0 ? 2 : 0;
        per += n->nin == 4 ? 2 : 0; /* buf = m buf + g */
        per += n->nin == 4 && ir_attr_int(n, "nesterov") ? 2 : 0;
        return per * numel(n->in[0]);
    }
    case IR_OP_ADAM: {              /* m 3, v 4, p - lr m / (sqrt(v) + eps) 5 */
        double per = 12 + (ir_attr_float(n, "weight_decay") != 0 ? 2 : 0);
        return per * numel(n->in[0]);
    }
    case IR_OP_BN_FOLD_SCALE:
        return 3.0 * e;             /* gamma / sqrt(var + eps) */
    case IR_OP_WHERE:
        return e;                   /* a test and a choice per result element */
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX:
        return numel(n->in[0]);     /* a comparison per element scanned */
    case IR_OP_REDUCE_MAX_GRAD: case IR_OP_REDUCE_MIN_GRAD:
        return numel(n->in[1]);     /* the scan again; the stores cost nothing */

    default:                        /* elementwise: one per result element; data
                                       movement, constants, communication: none */
        return ir_op_is(n->op, IR_ELEMENTWISE) ? e : 0;
    }
}

/* Bytes n reads of operand i: all of it but where it picks a part. */
static double read_bytes(const ir_node *n, int i)
{
    const ir_value *v = n->in[i];
    double es = (double)ir_dtype_size(v->type.dtype);
    if (n->op == IR_OP_EMBEDDING && i == 1)
        return numel(n->out[0]) * es;   /* the rows looked up */
    if (n->op == IR_OP_SLICE)
        return numel(n->out[0]) * es;
    return (double)ir_type_bytes(&v->type);
}

/* Whether operand i of n repeats an earlier one (read once). */
static int repeated(const ir_node *n, int i)
{
    for (int j = 0; j < i; j++)
        if (n->in[j] == n->in[i])
            return 1;
    return 0;
}

double cost_node_bytes(const ir_node *n)
{
    double b = 0;
    for (int i = 0; i < n->nin; i++)
        if (!repeated(n, i))
            b += read_bytes(n, i);
    for (int i = 0; i < n->nout; i++)
        b += (double)ir_type_bytes(&n->out[i]->type);
    return b;
}

/* The bytes a program at dev's precision moves for what IR types count as
 * bytes: half of them at bf16 and fp16, whose activations are 16-bit (the
 * integers among them are few). */
static double stored(const cost_device *dev, double bytes)
{
    return dev->precision >= PREC_BF16 ? bytes / 2 : bytes;
}

static int is_norm(ir_op op)
{
    return op == IR_OP_BATCHNORM || op == IR_OP_BATCHNORM_TRAIN || op == IR_OP_BATCHNORM_APPLY ||
           op == IR_OP_BATCHNORM_GRAD || op == IR_OP_LAYERNORM || op == IR_OP_LAYERNORM_GRAD;
}

/* dev as a kernel computing op sees it: on a GPU with measured rates, memory
 * at the share of mem_bw its kind reaches (driver/predict.c prices a
 * generated program the same way). */
static cost_device kernel_device(const cost_device *dev, int norm)
{
    cost_device k = *dev;
    double eff = norm ? dev->norm_eff : dev->mem_eff;
    if (dev->peak[dev->precision] > 0 && eff > 0)
        k.mem_bw *= eff;
    return k;
}

/* cuDNN's own layout transposes around a tensor-core convolution of NCHW
 * tensors (TF32 and 16-bit; not a forward one of one input channel, which it
 * runs on a generic kernel: codegen's cg_conv_layout_copies has the rule):
 * each tensor read and written once more, a launch each. */
static double transpose_seconds(const cost_device *dev, const ir_node *n)
{
    if (!(n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_GRAD_INPUT ||
          n->op == IR_OP_CONV2D_GRAD_WEIGHT) || dev->precision == PREC_FP32 ||
        dev->peak[dev->precision] <= 0 || dev->transpose_eff <= 0)
        return 0;
    if (n->op == IR_OP_CONV2D && n->in[0]->type.rank == 4 && n->in[0]->type.dims[1] == 1)
        return 0;
    return 2 * stored(dev, cost_node_bytes(n)) / (dev->mem_bw * dev->transpose_eff) +
           3 * dev->launch;
}

double cost_kernel_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                           double bytes)
{
    double compute = gemm_flops / dev->flops + other_flops / dev->flops_other;
    double memory = bytes / dev->mem_bw;
    return (compute > memory ? compute : memory) + dev->launch;
}

double cost_grid_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                         double bytes, int64_t blocks)
{
    double busy = 1;
    if (dev->sms > 0 && blocks > 0 && (double)blocks < 2 * dev->sms)
        busy = (double)blocks / (2 * dev->sms);
    double compute = gemm_flops / dev->flops + other_flops / dev->flops_other;
    double memory = bytes / dev->mem_bw;
    return (compute > memory ? compute : memory) / busy + dev->launch;
}

int64_t cost_comm_bytes(const ir_node *n)
{
    int64_t b = 0;
    switch (n->op) {
    case IR_OP_ALL_REDUCE: case IR_OP_REDUCE_SCATTER: /* a bucket: every operand */
        for (int i = 0; i < n->nin; i++)
            b += (int64_t)ir_type_bytes(&n->in[i]->type);
        return b;
    case IR_OP_ALL_GATHER:          /* a bucket: every result */
        for (int i = 0; i < n->nout; i++)
            b += (int64_t)ir_type_bytes(&n->out[i]->type);
        return b;
    case IR_OP_RECV:
        return (int64_t)ir_type_bytes(&n->out[0]->type);
    case IR_OP_BROADCAST: case IR_OP_SEND:
        return (int64_t)ir_type_bytes(&n->in[0]->type);
    default:
        return 0;
    }
}

double cost_comm_seconds(const cost_device *dev, ir_op op, int ndevices, int64_t bytes)
{
    if (ndevices <= 1)
        return 0;
    double nd = ndevices, b = (double)bytes;
    switch (op) {
    case IR_OP_ALL_REDUCE:
        return 2 * (nd - 1) / nd * b / dev->link_bw + 2 * (nd - 1) * dev->link_latency;
    case IR_OP_ALL_GATHER: case IR_OP_REDUCE_SCATTER:
        return (nd - 1) / nd * b / dev->link_bw + (nd - 1) * dev->link_latency;
    case IR_OP_BROADCAST: {
        int depth = 0;              /* ceil(log2 n) */
        while (((int64_t)1 << depth) < ndevices)
            depth++;
        return b / dev->link_bw + depth * dev->link_latency;
    }
    case IR_OP_SEND: case IR_OP_RECV:
        return b / dev->link_bw + dev->link_latency;
    default:
        return 0;
    }
}

/* Devices taking part in communication node n. */
static int comm_group_size(const ir_node *n)
{
    if (n->op == IR_OP_SEND || n->op == IR_OP_RECV)
        return ir_attr_int(n, "peer") == n->device ? 1 : 2;
    int size = 0;
    ir_attr_ints(n, "group", &size);
    return size;
}

double cost_node_seconds(const cost_device *dev, const ir_node *n)
{
    if (ir_op_communicates(n->op))
        return cost_comm_seconds(dev, n->op, comm_group_size(n), cost_comm_bytes(n));
    double f = cost_node_flops(n);
    int gemm = cost_op_gemm(n->op);
    cost_device k = kernel_device(dev, is_norm(n->op));
    return cost_kernel_seconds(&k, gemm ? f : 0, gemm ? 0 : f, stored(dev, cost_node_bytes(n))) +
           transpose_seconds(dev, n);
}

/* ---- one step of a program ---- */

/* What the streams run: a kernel, or a communication. */
typedef struct {
    double dur;          /* seconds */
    double start;        /* the latest end of its finished predecessors; then its start */
    int device;          /* a kernel's device; a communication's first device */
    int pos;             /* list index of its last node: the order the executor runs them */
    int comm;            /* -1: a kernel; else its index in the communications */
    int group;           /* a kernel's fusion group (0: one node) */
    int npred;           /* predecessors not yet finished */
    int done;
} sim_task;

/* A communication node, for pairing: sorted by (p2p, id, from, to, idx). */
typedef struct {
    int p2p;             /* send or recv */
    int64_t id;
    int from, to;        /* p2p: the sender's and the receiver's devices */
    int idx;             /* list index */
} comm_key;

static int by_comm_key(const void *a, const void *b)
{
    const comm_key *x = a, *y = b;
    if (x->p2p != y->p2p)
        return x->p2p - y->p2p;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->from != y->from)
        return x->from - y->from;
    if (x->to != y->to)
        return x->to - y->to;
    return x->idx - y->idx;
}

static int same_comm(const comm_key *x, const comm_key *y)
{
    return x->p2p == y->p2p && x->id == y->id && x->from == y->from && x->to == y->to;
}

typedef struct {
    double start;
    int pos, task;
} comm_order;

static int by_start(const void *a, const void *b)
{
    const comm_order *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->pos - y->pos;
}

/* The scratch state of one simulation. */
typedef struct {
    const cost_device *dev;
    const ir_node **node;       /* [nnodes]: list order */
    int *task_of;               /* [nnodes]: its task; -1: none (computed once) */
    int *producer;              /* [nvalues]: the task computing it; -1: ready at 0 */
    sim_task *t;
    int nt;
    int *part, *part_off;       /* communication c's nodes: part[part_off[c] .. part_off[c+1]) */
    int ncomms;
    const ir_node **comm_node;  /* [ncomms]: the node whose cost it has */
} sim;

/* A communication task costed as its node rep. */
static int new_comm(sim *s, const ir_node *rep)
{
    int k = s->nt++;
    s->t[k] = (sim_task){.dur = cost_node_seconds(s->dev, rep), .device = rep->device,
                         .comm = s->ncomms, .pos = -1};
    s->comm_node[s->ncomms++] = rep;
    return k;
}

/* Adds node idx to communication task k. */
static void add_part(sim *s, int k, int idx, int *npart)
{
    s->part[(*npart)++] = idx;
    s->task_of[idx] = k;
    if (idx > s->t[k].pos)
        s->t[k].pos = idx;
}

/* Step 2: one task per collective and per send/recv pair. */
static void pair_comms(sim *s, int nn, const unsigned char *weight)
{
    int nc = 0;
    for (int i = 0; i < nn; i++)
        nc += ir_op_communicates(s->node[i]->op);
    comm_key *k = base_xmalloc((size_t)(nc + 1) * sizeof *k);
    nc = 0;
    for (int i = 0; i < nn; i++) {
        const ir_node *n = s->node[i];
        if (!ir_op_communicates(n->op))
            continue;
        comm_key key = {.p2p = n->op == IR_OP_SEND || n->op == IR_OP_RECV,
                        .id = ir_attr_int(n, "id"), .idx = i};
        if (n->op == IR_OP_SEND) {
            key.from = n->device;
            key.to = (int)ir_attr_int(n, "peer");
        } else if (n->op == IR_OP_RECV) {
            key.from = (int)ir_attr_int(n, "peer");
            key.to = n->device;
        }
        k[nc++] = key;
    }
    qsort(k, (size_t)nc, sizeof *k, by_comm_key);
    int npart = 0;
    for (int a = 0, b; a < nc; a = b) {
        for (b = a + 1; b < nc && same_comm(&k[a], &k[b]); b++)
            ;
        if (!k[a].p2p) {
            /* a collective: costed at its node on the group's first device */
            int all_weight = 1;
            const ir_node *rep = s->node[k[a].idx];
            int size;
            const int64_t *group = ir_attr_ints(rep, "group", &size);
            for (int j = a; j < b; j++) {
                const ir_node *n = s->node[k[j].idx];
                all_weight &= weight[n->out[0]->id];
                if (size > 0 && n->device == group[0])
                    rep = n;
            }
            if (all_weight)
                continue;   /* computed once, from the weights */
            int t = new_comm(s, rep);
            s->part_off[s->t[t].comm] = npart;
            for (int j = a; j < b; j++)
                add_part(s, t, k[j].idx, &npart);
            continue;
        }
        /* sends and recvs of one (id, sender, receiver), paired in list order */
        int js = a, jr = a;
        for (;;) {
            while (js < b && s->node[k[js].idx]->op != IR_OP_SEND)
                js++;
            while (jr < b && s->node[k[jr].idx]->op != IR_OP_RECV)
                jr++;
            if (js == b && jr == b)
                break;
            const ir_node *rep = s->node[k[js < b ? js : jr].idx];
            int t = new_comm(s, rep);
            s->part_off[s->t[t].comm] = npart;
            if (js < b)
                add_part(s, t, k[js++].idx, &npart);
            if (jr < b)
                add_part(s, t, k[jr++].idx, &npart);
        }
    }
    s->part_off[s->ncomms] = npart;
    base_free(k);
}

/* Step 1, the costs: FLOPs and bytes of each kernel. */
static void kernel_costs(sim *s, const ir_graph *g, double *gemm, double *other)
{
    int nn = g->nnodes, nv = g->nvalues;
    unsigned char *escapes = base_xcalloc((size_t)nv + 1, 1);
    int *members = base_xcalloc((size_t)s->nt + 1, sizeof *members);
    int *seen = base_xmalloc((size_t)(nv + 1) * sizeof *seen);
    double *bytes = base_xcalloc((size_t)s->nt + 1, sizeof *bytes);
    double *extra = base_xcalloc((size_t)s->nt + 1, sizeof *extra); /* transposes' seconds */
    unsigned char *norm = base_xcalloc((size_t)s->nt + 1, 1);         /* a normalization in it */
    for (int i = 0; i < nv; i++)
        seen[i] = -1;
    /* results read outside their kernel, or kept after the step */
    for (int i = 0; i < nn; i++) {
        const ir_node *n = s->node[i];
        for (int j = 0; j < n->nin; j++) {
            int p = s->producer[n->in[j]->id];
            if (p >= 0 && p != s->task_of[i])
                escapes[n->in[j]->id] = 1;
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        escapes[g->outputs[i].value->id] = 1;
    if (g->loss)
        escapes[g->loss->id] = 1;
    for (int i = 0; i < g->nupdates; i++)
        escapes[g->updates[i].source->id] = 1;
    for (int i = 0; i < nn; i++) {
        int k = s->task_of[i];
        if (k < 0 || s->t[k].comm >= 0)
            continue;
        const ir_node *n = s->node[i];
        double f = cost_node_flops(n);
        *(cost_op_gemm(n->op) ? &gemm[k] : &other[k]) += f;
        members[k]++;
        norm[k] |= is_norm(n->op);
        extra[k] += transpose_seconds(s->dev, n);
    }
    for (int i = 0; i < nn; i++) {
        int k = s->task_of[i];
        if (k < 0 || s->t[k].comm >= 0)
            continue;
        const ir_node *n = s->node[i];
        if (members[k] == 1) {
            bytes[k] = cost_node_bytes(n);
            continue;
        }
        for (int j = 0; j < n->nin; j++) {
            const ir_value *v = n->in[j];
            if (s->producer[v->id] == k || seen[v->id] == k)
                continue;   /* made inside the group, or counted */
            seen[v->id] = k;
            bytes[k] += read_bytes(n, j);
        }
        for (int j = 0; j < n->nout; j++)
            if (escapes[n->out[j]->id])
                bytes[k] += (double)ir_type_bytes(&n->out[j]->type);
    }
    for (int k = 0; k < s->nt; k++)
        if (s->t[k].comm < 0) {
            cost_device kd = kernel_device(s->dev, norm[k]);
            s->t[k].dur = cost_kernel_seconds(&kd, gemm[k], other[k], stored(s->dev, bytes[k])) +
                          extra[k];
        }
    base_free(escapes);
    base_free(members);
    base_free(extra);
    base_free(norm);
    base_free(seen);
    base_free(bytes);
}

/* An edge list that grows. */
typedef struct {
    int *from, *to;
    int64_t n, cap;
} edge_list;

static void add_edge(edge_list *e, int from, int to)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 1024;
        e->from = base_xrealloc(e->from, (size_t)e->cap * sizeof *e->from);
        e->to = base_xrealloc(e->to, (size_t)e->cap * sizeof *e->to);
    }
    e->from[e->n] = from;
    e->to[e->n++] = to;
}

/* A device's communication stream: the batch being made and the one before,
 * a member waiting for every member of the batch before it.  On a GPU
 * consecutive sends and receives run as one NCCL group, whose calls progress
 * together (codegen/p2p.c); modelled so, the predicted steps of gpt_tiny's
 * pipelines did not change, and the profile's communication track
 * (--profile, predicted) would hold overlapping calls, so each call is a
 * batch of its own. */
#define BATCH_MAX 64
typedef struct {
    int prev[BATCH_MAX], nprev;
    int cur[BATCH_MAX], ncur;
} comm_stream;

static void close_batch(comm_stream *c)
{
    if (!c->ncur)
        return;
    memcpy(c->prev, c->cur, (size_t)c->ncur * sizeof *c->cur);
    c->nprev = c->ncur;
    c->ncur = 0;
}

/* Step 3: the edges between tasks, as successor lists (CSR); counts each
 * task's predecessors. */
static void edges(sim *s, int nn, int ndev, int **succ_off, int **succ)
{
    edge_list e = {0};
    int *last_kernel = base_xmalloc((size_t)ndev * sizeof *last_kernel);
    comm_stream *cs = base_xcalloc((size_t)ndev, sizeof *cs);
    for (int d = 0; d < ndev; d++)
        last_kernel[d] = -1;
    for (int i = 0; i < nn; i++) {
        const ir_node *n = s->node[i];
        int k = s->task_of[i];
        if (k < 0)
            continue;
        for (int j = 0; j < n->nin; j++) {      /* its operands */
            int p = s->producer[n->in[j]->id];
            if (p >= 0 && p != k)
                add_edge(&e, p, k);
        }
        int d = n->device;
        comm_stream *c = &cs[d];
        if (s->t[k].comm < 0) {                 /* the kernel before it on its stream */
            close_batch(c);
            if (last_kernel[d] != k) {
                if (last_kernel[d] >= 0)
                    add_edge(&e, last_kernel[d], k);
                last_kernel[d] = k;
            }
            continue;
        }
        close_batch(c); /* one call after another (see comm_stream) */
        for (int j = 0; j < c->nprev; j++)      /* after the batch before it */
            if (c->prev[j] != k)
                add_edge(&e, c->prev[j], k);
        c->cur[c->ncur++] = k;
    }
    int *off = base_xcalloc((size_t)s->nt + 2, sizeof *off);
    int *out = base_xmalloc((size_t)(e.n + 1) * sizeof *out);
    for (int64_t j = 0; j < e.n; j++) {
        off[e.from[j] + 2]++;
        s->t[e.to[j]].npred++;
    }
    for (int k = 0; k < s->nt; k++)
        off[k + 2] += off[k + 1];
    for (int64_t j = 0; j < e.n; j++)
        out[off[e.from[j] + 1]++] = e.to[j];
    base_free(e.from);
    base_free(e.to);
    base_free(last_kernel);
    base_free(cs);
    *succ_off = off;    /* task k's successors: out[off[k] .. off[k+1]) */
    *succ = out;
}

/* Step 3: the start of every task, in topological order; returns how many
 * communications started out of their stream order. */
static int run_tasks(sim *s, int nn, const int *succ_off, const int *succ)
{
    int *queue = base_xmalloc((size_t)(s->nt + 1) * sizeof *queue);
    int *at = base_xmalloc((size_t)(nn + 1) * sizeof *at); /* list index -> task ending there */
    for (int i = 0; i < nn; i++)
        at[i] = -1;
    int head = 0, tail = 0, cursor = 0, forced = 0;
    for (int k = 0; k < s->nt; k++) {
        at[s->t[k].pos] = k;
        if (!s->t[k].npred)
            queue[tail++] = k;
    }
    for (int finished = 0; finished < s->nt; finished++) {
        if (head == tail) {
            /* the streams wait on each other in a cycle: the pending task that
               comes first in the list (a communication, whose data is ready) */
            while (cursor < nn && (at[cursor] < 0 || s->t[at[cursor]].done))
                cursor++;
            IR_ASSERT(cursor < nn);
            queue[tail++] = at[cursor];
            forced++;
        }
        int k = queue[head++];
        s->t[k].done = 1;
        double end = s->t[k].start + s->t[k].dur;
        for (int e = succ_off[k]; e < succ_off[k + 1]; e++) {
            sim_task *u = &s->t[succ[e]];
            if (u->done)
                continue;
            if (end > u->start)
                u->start = end;
            if (--u->npred == 0)
                queue[tail++] = succ[e];
        }
    }
    base_free(queue);
    base_free(at);
    return forced;
}

/* Step 4: the compute work on each comm's first device after it starts. */
static void compute_left(const sim *s, int ndev, cost_sim *r, const comm_order *order)
{
    int *off = base_xcalloc((size_t)ndev + 2, sizeof *off);
    int *ks = base_xmalloc((size_t)(s->nt + 1) * sizeof *ks);
    double *suffix = base_xmalloc((size_t)(s->nt + 1) * sizeof *suffix);
    for (int k = 0; k < s->nt; k++)
        if (s->t[k].comm < 0)
            off[s->t[k].device + 2]++;
    for (int d = 0; d < ndev; d++)
        off[d + 2] += off[d + 1];
    for (int k = 0; k < s->nt; k++)     /* each device's kernels in stream order */
        if (s->t[k].comm < 0)
            ks[off[s->t[k].device + 1]++] = k;
    for (int d = 0; d < ndev; d++) {    /* the work from each kernel on */
        double sum = 0;
        for (int j = off[d + 1] - 1; j >= off[d]; j--)
            suffix[j] = sum += s->t[ks[j]].dur;
    }
    for (int c = 0; c < r->ncomms; c++) {
        const sim_task *t = &s->t[order[c].task];
        int d = t->device, lo = off[d], hi = off[d + 1];
        while (lo < hi) {               /* the first kernel ending after it starts */
            int mid = lo + (hi - lo) / 2;
            const sim_task *m = &s->t[ks[mid]];
            if (m->start + m->dur > t->start)
                hi = mid;
            else
                lo = mid + 1;
        }
        double left = 0;
        if (lo < off[d + 1]) {
            const sim_task *m = &s->t[ks[lo]];
            left = suffix[lo] - (t->start > m->start ? t->start - m->start : 0);
        }
        r->comms[c].compute_left_ms = left * 1e3;
    }
    base_free(off);
    base_free(ks);
    base_free(suffix);
}

cost_sim *cost_simulate(const ir_graph *g, const cost_device *dev)
{
    int nn = g->nnodes, nv = g->nvalues;
    sim s = {.dev = dev};
    s.node = base_xmalloc((size_t)(nn + 1) * sizeof *s.node);
    s.task_of = base_xmalloc((size_t)(nn + 1) * sizeof *s.task_of);
    s.producer = base_xmalloc((size_t)(nv + 1) * sizeof *s.producer);
    s.t = base_xcalloc((size_t)nn + 1, sizeof *s.t);
    s.part = base_xmalloc((size_t)(nn + 1) * sizeof *s.part);
    s.part_off = base_xmalloc((size_t)(nn + 2) * sizeof *s.part_off);
    s.comm_node = base_xmalloc((size_t)(nn + 1) * sizeof *s.comm_node);
    unsigned char *weight = base_xmalloc((size_t)nv + 1);
    ir_weight_only(g, weight);
    int ndev = ir_graph_devices(g), i = 0;
    ir_for_each_node(g, n)
        s.node[i++] = n;

    /* 1. kernels: a node, or consecutive members of a fused group */
    int open = -1;  /* the kernel the next member of its group joins */
    for (i = 0; i < nn; i++) {
        const ir_node *n = s.node[i];
        s.task_of[i] = -1;
        if (ir_op_communicates(n->op)) {
            open = -1;
            continue;
        }
        if (weight[n->out[0]->id])
            continue;   /* computed once, from the weights */
        if (!(n->group && open >= 0 && s.t[open].group == n->group &&
              s.t[open].device == n->device)) {
            open = s.nt++;
            s.t[open] = (sim_task){.device = n->device, .comm = -1, .group = n->group};
        }
        s.t[open].pos = i;
        s.task_of[i] = open;
    }
    /* 2. communications */
    pair_comms(&s, nn, weight);
    base_free(weight);
    for (i = 0; i < nv; i++)
        s.producer[i] = -1;
    for (i = 0; i < nn; i++)
        if (s.task_of[i] >= 0)
            for (int j = 0; j < s.node[i]->nout; j++)
                s.producer[s.node[i]->out[j]->id] = s.task_of[i];
    double *gemm = base_xcalloc((size_t)s.nt + 1, sizeof *gemm);
    double *other = base_xcalloc((size_t)s.nt + 1, sizeof *other);
    kernel_costs(&s, g, gemm, other);

    /* 3. when each task runs */
    int *succ_off, *succ;
    edges(&s, nn, ndev, &succ_off, &succ);
    int forced = run_tasks(&s, nn, succ_off, succ);
    base_free(succ_off);
    base_free(succ);

    /* 4. the results */
    cost_sim *r = base_xcalloc(1, sizeof *r);
    r->ndevices = ndev;
    r->forced = forced;
    r->device_ms = base_xcalloc((size_t)ndev, sizeof *r->device_ms);
    r->compute_ms = base_xcalloc((size_t)ndev, sizeof *r->compute_ms);
    r->comm_ms = base_xcalloc((size_t)ndev, sizeof *r->comm_ms);
    r->comms = base_xcalloc((size_t)s.ncomms + 1, sizeof *r->comms);
    r->kernels = base_xcalloc((size_t)s.nt + 1, sizeof *r->kernels);
    comm_order *order = base_xmalloc((size_t)(s.ncomms + 1) * sizeof *order);
    r->ncomms = s.ncomms;
    for (int k = 0; k < s.nt; k++) {
        const sim_task *t = &s.t[k];
        double end_ms = (t->start + t->dur) * 1e3;
        if (t->comm < 0) {
            const ir_node *first = s.node[t->pos];
            while (first->group && first->prev && first->prev->group == first->group &&
                   first->prev->device == first->device)
                first = first->prev;
            r->kernels[r->nkernels++] = (cost_kernel){first, s.node[t->pos], t->device,
                                                      t->start * 1e3, end_ms,
                                                      gemm[k] + other[k]};
            r->compute_ms[t->device] += t->dur * 1e3;
            r->flops += gemm[k] + other[k];
            if (end_ms > r->device_ms[t->device])
                r->device_ms[t->device] = end_ms;
            continue;
        }
        order[t->comm] = (comm_order){t->start, t->pos, k};
        for (int p = s.part_off[t->comm]; p < s.part_off[t->comm + 1]; p++) {
            int d = s.node[s.part[p]]->device;
            r->comm_ms[d] += t->dur * 1e3;
            if (end_ms > r->device_ms[d])
                r->device_ms[d] = end_ms;
        }
    }
    qsort(order, (size_t)s.ncomms, sizeof *order, by_start);
    for (int c = 0; c < s.ncomms; c++) {
        const sim_task *t = &s.t[order[c].task];
        const ir_node *rep = s.comm_node[t->comm];
        r->comms[c] = (cost_comm){rep, cost_comm_bytes(rep), t->start * 1e3,
                                  (t->start + t->dur) * 1e3, 0};
    }
    compute_left(&s, ndev, r, order);
    double busy = 0;
    for (int d = 0; d < ndev; d++) {
        busy += r->compute_ms[d];
        if (r->device_ms[d] > r->step_ms)
            r->step_ms = r->device_ms[d];
    }
    r->bubble = r->step_ms > 0 ? 1 - busy / (ndev * r->step_ms) : 0;
    if (r->bubble < 0)
        r->bubble = 0;  /* one busy device: the sum of its kernels rounds above their end */
    base_free(order);
    base_free(gemm);
    base_free(other);
    base_free(s.node);
    base_free(s.task_of);
    base_free(s.producer);
    base_free(s.t);
    base_free(s.part);
    base_free(s.part_off);
    base_free(s.comm_node);
    return r;
}

void cost_sim_free(cost_sim *s)
{
    if (!s)
        return;
    base_free(s->device_ms);
    base_free(s->compute_ms);
    base_free(s->comm_ms);
    base_free(s->comms);
    base_free(s->kernels);
    base_free(s);
}
