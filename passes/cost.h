/* The cost model (cost.c): how long one step of a program takes on a device,
 * node by node and for a partitioned program as a whole, with communication
 * overlapping computation: the devices, and what single nodes cost.  Times are
 * in seconds. */
#ifndef GNC_COST_H
#define GNC_COST_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* ---- devices ---- */

typedef struct {
    const char *name;      /* "h100-nvlink" */
    double flops;          /* FLOP/s of GEMM-shaped work (dense, matmul, conv2d and their gradients) */
    double flops_other;    /* FLOP/s of other arithmetic */
    double mem_bw;         /* device memory bytes/s, read and written together */
    double link_bw;        /* bytes/s per direction between two devices */
    double link_latency;   /* s per message */
    double launch;         /* s of fixed overhead per kernel */
    int64_t mem_bytes;     /* device memory */
} cost_device;

/* The presets ("h100-nvlink", "h100-pcie", "cpu"); NULL if name is unknown. */
const cost_device *cost_device_lookup(const char *name);
const cost_device *cost_device_list(int *count);

/* A preset and overrides: "h100-nvlink,link_bw=100e9,mem=40GiB".  Keys: flops,
 * flops_other, mem_bw, link_bw (plain numbers, per second), link_latency and
 * launch (seconds; or with s, ms, us, ns), mem (bytes; or with B, KB, MB, GB,
 * TB, KiB, MiB, GiB, TiB).  Rates and mem must be positive, times not negative.
 * Returns 0, or -1 with a one-line message in err (out is then unchanged). */
int cost_device_parse(const char *spec, cost_device *out, char *err, size_t errlen);

/* ---- nodes ---- */

/* Arithmetic of n: multiply-adds times two for the GEMM-shaped ops (and their
 * bias), a few FLOPs per element for the others (cost.c lists them); 0 for
 * data movement and communication. */
double cost_node_flops(const ir_node *n);
/* Whether op's FLOPs run at cost_device.flops (else at flops_other). */
int cost_op_gemm(ir_op op);
/* Bytes n reads (each operand once, only the rows or slice it touches) and
 * writes (every result), at each value's dtype size. */
double cost_node_bytes(const ir_node *n);

/* A kernel: max(gemm_flops / flops + other_flops / flops_other, bytes / mem_bw)
 * + launch, in seconds. */
double cost_kernel_seconds(const cost_device *dev, double gemm_flops, double other_flops,
                           double bytes);

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

#endif
