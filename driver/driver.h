/* The compile driver: a model to a program, the stages in order
 * (docs/design.md):
 *
 *   drv_compile       1. load       the .net model through the frontend, or IR text (.gir)
 *                     2. verify
 *                     3. autodiff   the training step (cfg.train)
 *                     4. passes     cfg.passes, or the default pipeline; partitioning
 *                                   is one of them (cfg.part)
 *                     5. memory     the memory plan, and its proof (mp_check)
 *                     6. partition plan: the predicted step and each device's
 *                                   peak against its cap; --strategy auto compiles
 *                                   every candidate from a clone of the graph of 3
 *                                   and keeps the fastest that fits
 *   drv_plan          7. codegen    each device's steps and kernels (cfg.precision,
 *                                   cfg.conv; --conv auto times every way first)
 *                     8. NVRTC      the kernels compiled through the cache; autotuned
 *                                   on a GPU with cfg.autotune
 *                     9. plan       the plan file's bytes: written, or decoded in memory
 *
 * Each stage reports on a diag, or in err; nothing here exits.  The gnc
 * command (tools/) parses arguments into a drv_config and prints; libgnc's
 * gnc_compile (include/gnc/gnc.h) calls the same two functions. */
#ifndef GNC_DRIVER_H
#define GNC_DRIVER_H

#include <stdio.h>

#include "diag.h"
#include "ir.h"
#include "passes.h"

struct rt_plan;

#define DRV_MAX_DEFINES 64
#define DRV_MAX_CAPS 4096       /* devices a memory cap can name */

/* What to compile and how: everything that shapes the program, nothing of the
 * command line's own (printing, running, training). */
typedef struct {
    /* 1-3: the model */
    const char *file;           /* .net or .gir */
    const char *model;          /* the model when the file holds several; NULL: the last */
    const char *loss;           /* "cross_entropy:OUTPUT" or "mse:OUTPUT": a loss added on
                                   that output, its target a new input (drv_add_loss) */
    const char *define_names[DRV_MAX_DEFINES], *define_values[DRV_MAX_DEFINES];
    int ndefines;               /* -D NAME=VALUE */
    int train;                  /* the training step */
    ad_optimizer opt;
    /* 4-5: the passes */
    const char *passes;         /* NULL: pm_default_pipeline */
    int remat;                  /* the default training pipeline recomputes (remat) */
    int verify_each, time_passes;
    const char *dump_ir, *dump_dir;
    FILE *log;                  /* pass timings, dumps, --conv auto's table; NULL: stdout */
    FILE *warnings;             /* codegen's diagnostics, the kernel cache's warning;
                                   NULL: none */
    /* 6: partitioning */
    pt_options part;
    int strategy_auto;          /* every strategy tried, the fastest that fits kept */
    int gpus;                   /* the devices are GPUs: the cost model's default */
    const char *device_model;   /* a cost_device spec; NULL: h100-nvlink for GPUs, else cpu */
    int64_t mem_cap_all;        /* every device's cap; 0: the device model's memory */
    const int64_t *mem_cap;     /* [DRV_MAX_CAPS], device d's cap; NULL or 0: as mem_cap_all */
    /* 7-9: the CUDA program and the plan */
    ir_precision precision;
    int conv;                   /* a cg_conv_impl */
    int conv_auto;              /* each convolution timed every way (needs autotune) */
    int layout;                 /* a cg_layout: activations' layout (auto: channels-last
                                   in 16-bit programs of cuDNN convolutions) */
    const char *archs;          /* "sm_80,sm_90" (NULL: those) */
    int no_kernels;             /* a plan without CUDA kernels */
    int autotune;               /* the library calls timed on this machine's GPU */
    const char *flags;          /* the shaping flags as given, for the plan's meta */
    const char *weights;        /* a checkpoint whose values the plan carries (its weights
                                   section), for sessions to start from; NULL: none */
    FILE *progress;             /* where a step that takes over a second (NVRTC) shows
                                   how far it is, on one line; NULL: nowhere */
} drv_config;

/* A compiled program: graph, memory plan, partition plan; or a plan file's
 * program and memory plan (file), which it owns then.  A program made a plan
 * in memory (drv_plan_memory) keeps its compiled graph and memory plan in
 * compiled_g and compiled_mp until freed. */
typedef struct {
    ir_graph *g;
    mp_plan *mp;
    pt_plan *plan;
    char strategy[96];          /* as the user reads it: "data", "pipeline 1f1b, 8 microbatches" */
    struct rt_plan *file;
    ir_graph *compiled_g;
    mp_plan *compiled_mp;
    struct cg_program *cuda;    /* drv_plan_memory's GPU program, compiled: what a
                                   session runs without generating it again (of
                                   compiled_g, which numbers its values as g does) */
} drv_program;

/* Stages 1 and 2: the model of c (with batch > 0, -D batch=BATCH first: the
 * defines still win), verified.  NULL with the problems on d. */
ir_graph *drv_load(const drv_config *c, long long batch, diag *d);
/* Gives g (a model without a loss) the loss spec names: "cross_entropy:OUTPUT"
 * (the target a new input "label", integer classes shaped as OUTPUT without its
 * class axis 1) or "mse:OUTPUT" (a new input "target" of OUTPUT's type).  0,
 * or -1 with the problem on d. */
int drv_add_loss(ir_graph *g, const char *spec, const char *file, diag *d);
/* Sets c's strategy from spec as --strategy takes it: data, zero1, zero2,
 * zero3, pipeline, tensor, hybrid:dp=A,pp=B or auto.  0, or -1 for anything
 * else. */
int drv_set_strategy(drv_config *c, const char *spec);
/* Stages 4 and 5 on g: c's pipeline (partitioned by part when it names
 * several devices), then the memory plan and its proof.  NULL with the
 * problem on d. */
mp_plan *drv_optimize(const drv_config *c, const pt_options *part, ir_graph *g, int training,
                      diag *d);
/* Stages 1 to 6: c's model (at batch; a training step when train) for the
 * devices of part (NULL: c->part) with c's strategy, or with strategy_auto
 * the candidate with the shortest predicted step that compiles and fits
 * every cap (its plan lists them all).  0, or -1 with the problems on d. */
int drv_compile(const drv_config *c, const pt_options *part, long long batch, int train,
                drv_program *out, diag *d);
void drv_program_free(drv_program *p);
void drv_candidates_free(pt_plan *p);

/* Stages 7 to 9: the plan file of p (compiled from c) with its meta, written
 * to path; or, with mem, decoded from memory into *mem (path names it).  0,
 * or -1 with the reason in err. */
int drv_plan(const drv_config *c, const drv_program *p, const char *path, struct rt_plan **mem,
             char *err, size_t errlen);
/* drv_plan, keeping the GPU program it generated and compiled from p's
 * graph (NULL when the plan has none; the caller frees it, before p). */
int drv_plan_keep(const drv_config *c, const drv_program *p, const char *path,
                  struct rt_plan **mem, struct cg_program **cuda, char *err, size_t errlen);
/* p as the plan drv_plan makes of it (a training step when train), decoded
 * in memory: p's graph and memory plan become the plan's (what the GPU runs),
 * the compiled ones kept.  0, or -1 with the reason in err. */
int drv_plan_memory(const drv_config *c, drv_program *p, int train, char *err, size_t errlen);

/* What one run of device d of GPU program p takes on dev (predict.c): each
 * step priced by its kind of kernel at dev's rates, the steps one after
 * another (communication not overlapped: an upper bound), in seconds, and by
 * class of kernel, as docs/passes.md's "The cost model" says. */
typedef enum {
    DRV_CLASS_CONV, DRV_CLASS_TRANSPOSE, DRV_CLASS_NORM, DRV_CLASS_ELEMENTWISE,
    DRV_CLASS_GEMM, DRV_CLASS_OPTIMIZER, DRV_CLASS_COMM, DRV_NCLASSES
} drv_class;
extern const char *const drv_class_names[DRV_NCLASSES]; /* "convolution", "transpose", ... */

typedef struct {
    double seconds;                 /* the run */
    double launch_s;                /* of which the launches' gaps */
    double by_class[DRV_NCLASSES];  /* seconds by class (they add up to seconds) */
    int kernels[DRV_NCLASSES];      /* GPU kernels by class (cuDNN's transposes besides
                                       its convolutions) */
    double bytes[DRV_NCLASSES];     /* bytes they read and write, by class (the memory
                                       plan's accesses; cuDNN's transposes' copies) */
} drv_prediction;

/* step_s: NULL, or [nsteps] each step's seconds (a convolution's transposes
 * included). */
void drv_predict(const struct cg_program *p, int d, const cost_device *dev, drv_prediction *out,
                 double *step_s);
/* drv_predict's seconds, and *launch_s (if not NULL) its launches' share. */
double drv_run_seconds(const struct cg_program *p, int d, const cost_device *dev,
                       double *launch_s);

/* The cost model's device: c->device_model, or h100-nvlink for GPUs, cpu. */
const cost_device *drv_device_model(const drv_config *c, cost_device *buf, char *err,
                                    size_t errlen);

#endif
