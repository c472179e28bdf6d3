/* The cost model: how long one step of a program takes on a device.
 *
 * The devices: three presets (H100 with NVLink, H100 on PCIe, this 2-core
 * CPU), every number with its source beside it, and specs that name a preset
 * and override some of its numbers (cost_device_parse). */
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
