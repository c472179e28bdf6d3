/* The cost model: how long one step of a program takes on a device.
 *
 * Expects: a verified node: its shapes and attributes.
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
 * then an all-gather around the ring, each of n-1 steps moving b/n over every link; all_gather and reduce_scatter are one half of
 * that, over b_total, the whole tensor of the group (all_gather's result, or
 * reduce_scatter's operand; each rank holds b_total/n of it before or after);
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
 * gradients), sum_to and global_avgpool
 * one per element summed, embedding_grad one per element of dy, optimizers per
 * parameter element (sgd 2, 2 more for each of weight decay, momentum,
 * nesterov; adam 12, and 2 for weight decay), bn_fold_scale 3 per channel.
 * Data movement (reshape, transpose, concat, slice, broadcast_to, embedding,
 * inference dropout, const) and communication: 0.
 *
 * Guarantees: the graph is unchanged; every cost is finite and non-negative. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

/* ---- devices ---- */

#define GiB ((int64_t)1 << 30)

/* Every number comes from a datasheet or a measurement, as each comment says.
 * The H100 GEMM rates are the dense (no sparsity) TF32 tensor-core peaks times
 * 0.6, the fraction a network's GEMMs and convolutions reach: cuBLAS gets
 * 70-80% of peak on large square GEMMs, the smaller and oddly shaped ones of a
 * real network (and implicit-GEMM convolutions) less.  0.6 is our estimate; no
 * H100 was at hand to measure it.  Other arithmetic runs on the CUDA cores at
 * the FP32 peak, by the same fraction. */
static const cost_device presets[] = {
    {
        .name = "h100-nvlink",
        .flops = 494.7e12 * 0.6,      /* H100 SXM5 datasheet: TF32 tensor core 989.4 TFLOPS
                                         with sparsity, 494.7 dense */
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
    },
    {
        .name = "h100-pcie",
        .flops = 378e12 * 0.6,        /* H100 PCIe datasheet: TF32 756 TFLOPS with sparsity,
                                         378 dense */
        .flops_other = 51.2e12 * 0.6, /* datasheet: FP32 51.2 TFLOPS */
        .mem_bw = 2.0e12,             /* datasheet: HBM2e, 2.0 TB/s */
        .link_bw = 55e9,              /* PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 = 63 GB/s
                                         per direction; ~55 GB/s after packet overheads */
        .link_latency = 10e-6,        /* NCCL's tuning model: 5.7 us a ring step on PCIe and
                                         8.4 us once; through the host bridge, ~10 us */
        .launch = 3e-6,               /* as h100-nvlink */
        .mem_bytes = 80 * GiB,        /* H100 PCIe 80 GB */
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
                                         (runtime/comm.c): 256 MiB at 11.8-11.9 GB/s */
        .link_latency = 1e-6,         /* a hand-over between threads: one OpenMP barrier */
        .launch = 1e-6,               /* an empty OpenMP parallel region (the executor's
                                         per-kernel fork and join): 1.0-1.08 us */
        .mem_bytes = (int64_t)24684096 * 1024, /* /proc/meminfo MemTotal */
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

typedef enum { KEY_RATE, KEY_TIME, KEY_BYTES } key_kind;

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
                 "link_latency, launch, mem", klen, item);
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
    if (end == buf || scale == 0 || !isfinite(x)) {
        static const char *const what[] = {
            [KEY_RATE] = "a number per second",
            [KEY_TIME] = "seconds, or a number with s, ms, us or ns",
            [KEY_BYTES] = "bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB",
        };
        snprintf(err, errlen, "bad number '%.*s' for %s: expected %s", vlen, val, keys[k].key,
                 what[keys[k].kind]);
        return -1;
    }
    if (x < 0 || (x == 0 && keys[k].kind != KEY_TIME)) {
        snprintf(err, errlen, "%s must be %s, got %.*s", keys[k].key,
                 keys[k].kind == KEY_TIME ? "zero or more" : "positive", vlen, val);
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
        snprintf(err, errlen, "unknown device '%.*s'; devices: h100-nvlink, h100-pcie, cpu",
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
        return 1;
    default:
        return 0;
    }
}

/* Elements of a pooling window. */
static double window(const ir_node *n)
{
    const int64_t *k = ir_attr_ints(n, "kernel", NULL);
    return (double)(k[0] * k[1]);
}

double cost_node_flops(const ir_node *n)
{
    const ir_type *out = &n->out[0]->type;
    double e = (double)ir_type_numel(out);
    switch (n->op) {
    /* GEMM-shaped: two FLOPs per multiply-add, and a bias add per result */
    case IR_OP_CONV2D: {
        const ir_type *w = &n->in[1]->type;
        return 2.0 * e * (double)(w->dims[1] * w->dims[2] * w->dims[3]) + (n->nin == 3 ? e : 0);
    }
    case IR_OP_DENSE:
        return 2.0 * e * (double)n->in[1]->type.dims[1] + (n->nin == 3 ? e : 0);
    case IR_OP_MATMUL:
        return 2.0 * e * (double)n->in[0]->type.dims[n->in[0]->type.rank - 1];
    /* the gradients: as many multiply-adds as the forward op, over dy */
    case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT: {
        const int64_t *w = n->op == IR_OP_CONV2D_GRAD_WEIGHT ? out->dims : n->in[1]->type.dims;
        return 2.0 * numel(n->in[0]) * (double)(w[1] * w[2] * w[3]);
    }
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_DENSE_GRAD_WEIGHT: {
        int64_t in = n->op == IR_OP_DENSE_GRAD_WEIGHT ? out->dims[1] : n->in[1]->type.dims[1];
        return 2.0 * numel(n->in[0]) * (double)in;
    }

    /* elementwise: one per result element */
    case IR_OP_NEG: case IR_OP_RELU: case IR_OP_SIGMOID: case IR_OP_TANH: case IR_OP_GELU:
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV:
    case IR_OP_RELU_GRAD: case IR_OP_SIGMOID_GRAD: case IR_OP_TANH_GRAD: case IR_OP_GELU_GRAD:
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

    default:                        /* data movement, constants, communication */
        return 0;
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

double cost_kernel_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                           double bytes)
{
    double compute = gemm_flops / dev->flops + other_flops / dev->flops_other;
    double memory = bytes / dev->mem_bw;
    return (compute > memory ? compute : memory) + dev->launch;
}

int64_t cost_comm_bytes(const ir_node *n)
{
    int64_t b = 0;
    switch (n->op) {
    case IR_OP_ALL_REDUCE:          /* a bucket: every operand */
        for (int i = 0; i < n->nin; i++)
            b += (int64_t)ir_type_bytes(&n->in[i]->type);
        return b;
    case IR_OP_ALL_GATHER: case IR_OP_RECV:
        return (int64_t)ir_type_bytes(&n->out[0]->type);
    case IR_OP_REDUCE_SCATTER: case IR_OP_BROADCAST: case IR_OP_SEND:
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
    return cost_kernel_seconds(dev, gemm ? f : 0, gemm ? 0 : f, cost_node_bytes(n));
}
