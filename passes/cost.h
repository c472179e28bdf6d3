/* The cost model (cost.c): how long one step of a program takes on a device,
 * node by node and for a partitioned program as a whole, with communication
 * overlapping computation: the devices so far. */
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

#endif
