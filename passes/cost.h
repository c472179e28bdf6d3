/* The cost model (cost.c): how long one step of a program takes on a device,
 * node by node and for a partitioned program as a whole, with communication
 * overlapping computation.
 *
 *   // given: const ir_graph *g
 *   cost_device dev;
 *   char err[160];
 *   if (cost_device_parse("h100-nvlink,link_bw=100e9", &dev, err, sizeof err) != 0) {
 *       fprintf(stderr, "gnc: error: %s\n", err);   // "unknown key 'lnk_bw'; keys: ..."
 *       return -1;
 *   }
 *   cost_sim *s = cost_simulate(g, &dev);
 *   printf("step %.3f ms, bubble %.1f%%\n", s->step_ms, 100 * s->bubble);
 *   for (int i = 0; i < s->ncomms; i++)   // what each communication can hide behind
 *       printf("%s %.3f ms, %.3f ms of compute left\n", s->comms[i].node->out[0]->name,
 *              s->comms[i].end_ms - s->comms[i].start_ms, s->comms[i].compute_left_ms);
 *   cost_sim_free(s);
 *
 * (tests/test_cost.c runs this example.)  Times of nodes and kernels are in
 * seconds, those of a simulation in milliseconds. */
#ifndef GNC_COST_H
#define GNC_COST_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* ---- devices ---- */


typedef struct {
    const char *name;      /* "h100-nvlink" */
    double flops;          /* FLOP/s of GEMM-shaped work (dense, matmul, conv2d and
                              their gradients) at the device's precision: where the
                              device has peaks, peak[precision] x gemm_eff[precision]
                              (cost_device_at) */
    double flops_other;    /* FLOP/s of other arithmetic */
    double mem_bw;         /* device memory bytes/s, read and written together */
    double link_bw;        /* bytes/s per direction between two devices */
    double link_latency;   /* s per message */
    double launch;         /* s of fixed overhead per kernel */
    int64_t mem_bytes;     /* device memory */
    double sms;            /* streaming multiprocessors: a grid of fewer than two
                              blocks per SM leaves some idle (cost_grid_seconds);
                              0 where no grid applies (cpu) */
    double error;          /* the relative error the model claims for a step: --strategy
                              auto keeps the simplest strategy predicted within it of
                              the fastest */
    /* A GPU's rates by kind of kernel, measured (cost.c says where); 0 where
       the device has none (cpu): flops and mem_bw then price everything. */
    ir_precision precision;
    double peak[PREC_COUNT];     /* dense datasheet peak of GEMM-shaped work:
                                          fp32 on the CUDA cores, tf32, bf16, fp16 on
                                          the tensor cores */
    double gemm_eff[PREC_COUNT]; /* the share of it cuDNN's convolutions and
                                          cuBLASLt's GEMMs reach on a network */
    double igemm_eff;      /* the share codegen's implicit-GEMM convolutions reach */
    double mem_eff;        /* the share of mem_bw generated kernels reach */
    double norm_eff;       /* ... generated normalization kernels (batchnorm, layernorm) */
    double multi_eff;      /* ... generated kernels over many tensors at once (the
                              optimizers' updates, the weights' 16-bit copies) */
    double transpose_eff;  /* ... cuDNN's own NCHW<->NHWC transposes around 16-bit and
                              TF32 convolutions of NCHW tensors */
} cost_device;

/* The presets' names that gnc defaults to, each fact once: the GPU a program
 * partitioned over several GPUs is planned for (compile --gpus, the pipeline
 * pass), and the GPU a cuda run's predicted step is priced on (the one the
 * model was calibrated on; docs/cli.md, --device-model). */
#define COST_DEFAULT_PARTITION_GPU "h100-nvlink"
#define COST_CALIBRATED_GPU "h200"

/* The presets ("h200", "h100-nvlink", "h100-pcie", "cpu"); NULL if name is
 * unknown. */
const cost_device *cost_device_lookup(const char *name);
const cost_device *cost_device_list(int *count);

/* A preset and overrides: "h100-nvlink,link_bw=100e9,mem=40GiB".  Keys: flops,
 * flops_other, mem_bw, link_bw (plain numbers, per second), link_latency and
 * launch (seconds; or with s, ms, us, ns), mem (bytes; or with B, KB, MB, GB,
 * TB, KiB, MiB, GiB, TiB), sms (a whole number), error (a share, 0 to 1: 0.15).  Rates and mem must be positive, times not negative.
 * Returns 0, or -1 with a one-line message in err (out is then unchanged). */
int cost_device_parse(const char *spec, cost_device *out, char *err, size_t errlen);
/* dev computing at precision p: flops becomes peak[p] x gemm_eff[p] where dev
 * has that peak (else it stays as it is), and the simulation prices float
 * values at 2 bytes for bf16 and fp16 (their activations are stored so). */
void cost_device_at(cost_device *dev, ir_precision p);

/* ---- nodes ---- */

/* Arithmetic of n: multiply-adds times two for the GEMM-shaped ops (and their
 * bias), a few FLOPs per element for the others (cost.c lists them); 0 for
 * data movement and communication. */
double cost_node_flops(const ir_node *n);
/* The multiply-adds times two alone of the GEMM-shaped ops (cost_op_gemm), the
 * usual FLOP count of a model (gnc compile's summary); 0 for the others. */
double cost_gemm_flops(const ir_node *n);
/* Whether op's FLOPs run at cost_device.flops (else at flops_other). */
int cost_op_gemm(ir_op op);
/* Bytes n reads (each operand once, only the rows or slice it touches) and
 * writes (every result), at each value's dtype size. */
double cost_node_bytes(const ir_node *n);

/* A kernel: max(gemm_flops / flops + other_flops / flops_other, bytes / mem_bw)
 * + launch, in seconds. */
double cost_kernel_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                           double bytes);
/* The same for a kernel of a known grid, blocks thread blocks (a generated
 * program's launch): a grid of fewer than two blocks per SM keeps only that
 * share of the SMs busy, so its compute and memory time grow by 2 sms /
 * blocks (where dev has sms). */
double cost_grid_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                         double bytes, int64_t blocks);

/* The bytes the ring algorithms' formulas take for communication node n: the
 * tensor (all_reduce: every operand, summed; broadcast; send; recv), or b_total,
 * the whole tensor of the group (all_gather: the gathered result; reduce_scatter:
 * the operand, before it is scattered).  0 for other ops. */
int64_t cost_comm_bytes(const ir_node *n);
/* Seconds of op over a group of ndevices (NCCL's ring algorithms, cost.c):
 * 0 when ndevices <= 1 or op does not communicate. */
double cost_comm_seconds(const cost_device *dev, ir_op op, int ndevices, int64_t bytes);

/* Seconds of n alone: its communication, or a kernel of its own. */
double cost_node_seconds(const cost_device *dev, const ir_node *n);

/* ---- one step of a program ---- */

typedef struct {
    const ir_node *node;     /* the node on device 0 of the group (group[0]) for
                                collectives; the send for send/recv */
    int64_t bytes;           /* cost_comm_bytes(node) */
    double start_ms, end_ms;
    double compute_left_ms;  /* the compute work still left on its (first) device when the
                                communication becomes ready (starts): what it can overlap */
} cost_comm;

/* A kernel of the step: a node, or the members of a fused group. */
typedef struct {
    const ir_node *first, *last;    /* its members, consecutive in the list */
    int device;
    double start_ms, end_ms;
    double flops;
} cost_kernel;

typedef struct {
    int ndevices;
    double step_ms;                 /* the last device to finish */
    double *device_ms;              /* [ndevices]: when each device finishes */
    double *compute_ms;             /* [ndevices]: busy time of its compute stream */
    double *comm_ms;                /* [ndevices]: busy time of its communication stream */
    double flops;                   /* total per step */
    cost_comm *comms; int ncomms;   /* one per collective (not per participating node) and per
                                       send/recv pair, in start order */
    cost_kernel *kernels; int nkernels;  /* in list order (gnc compile --trace) */
    double bubble;                  /* 1 - sum(compute_ms) / (ndevices * step_ms): idle
                                       fraction (the pipeline bubble) */
    int forced;                     /* communications started out of their devices' stream order,
                                       because in order the streams would wait on each other
                                       forever: 0 for a program that real streams can run */
} cost_sim;

/* Simulates one step of verified program g on devices all like dev (cost.c:
 * the streams and when each kernel and communication runs).  A program without
 * devices is the one-device case.  Linear in the nodes, but for sorting the
 * communication nodes. */
cost_sim *cost_simulate(const ir_graph *g, const cost_device *dev);
void cost_sim_free(cost_sim *s);

#endif
