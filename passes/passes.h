/* Graph-to-graph transformations.  Each pass is one file with a comment saying
 * what it expects of the IR and what it guarantees afterwards. */
#ifndef GNC_PASSES_H
#define GNC_PASSES_H

#include <stdint.h>
#include <stdio.h>

#include "cost.h"
#include "diag.h"
#include "ir.h"

/* ---- partitioning across devices (partition.c, pipeline.c, tensor.c) ---- */

typedef enum {
    PT_DATA,        /* replicas of the whole model, the batch split between them */
    PT_PIPELINE,    /* stages of consecutive layers, microbatches flowing through them */
    PT_TENSOR,      /* each layer's weights split between the devices (Megatron-LM) */
    PT_HYBRID       /* dp replicas of a pp-stage pipeline */
} pt_strategy;

typedef enum { PT_1F1B, PT_GPIPE } pt_schedule;

/* What a training step computes again in its backward pass instead of keeping
 * from the forward pass (remat.c, pass_recompute). */
typedef enum {
    PT_RECOMPUTE_NONE,
    PT_RECOMPUTE_SELECTIVE,     /* all but the GEMMs' and attention's results */
    PT_RECOMPUTE_FULL           /* each layer's forward pass, from its input */
} pt_recompute;

#define PT_DEFAULT_BUCKET_BYTES ((int64_t)25 << 20)   /* as PyTorch DDP */

typedef struct {
    int devices;                /* 1: the pass does nothing */
    pt_strategy strategy;
    int dp, pp;                 /* PT_HYBRID: dp x pp == devices */
    int microbatches;           /* pipeline; 0: 2 per stage */
    pt_schedule schedule;       /* pipeline */
    int64_t bucket_bytes;       /* gradient all-reduce buckets; 0: the default */
    int sync_bn;                /* batchnorm statistics over the whole batch */
    int deterministic;          /* bitwise the same result for every device count */
    int micro_shards;           /* deterministic: fixed shards of the batch; 0: default */
    int accumulate;             /* gradient accumulation: microbatches per step, one after
                                   another (data: on each device; pipeline: times its
                                   microbatches); 0 or 1: none */
    int zero;                   /* data: ZeRO stage 1, 2 or 3 (optimizer state; and gradients;
                                   and parameters sharded over the devices); 0: replicated */
    pt_recompute recompute;     /* a training step's recomputation (the driver runs it) */
    int sequence_parallel;      /* tensor: a layer pair's partial sums reduce-scattered along
                                   the sequence (axis 1 of [batch, seq, ...]) rather than
                                   all-reduced, the ops outside the pairs run on each
                                   device's positions (Megatron-LM's sequence parallelism) */
    const cost_device *cost;    /* what balances pipeline stages; NULL: h100-nvlink */
    const int64_t *mem_caps;    /* [devices]: bytes each may use (0: no cap), which pipeline
                                   stages are cut to fit by an estimate; NULL: none */
} pt_options;

/* Rewrites g (scheduled, single-device) into one program for o->devices devices
 * (docs/partition.md).  Returns the nodes it made, or -1 after reporting why the
 * model cannot be partitioned so (a batch that does not split, too few layers). */
int pt_partition(ir_graph *g, const pt_options *o, diag *d);
/* Whether o makes the partition pass rewrite a program (several devices,
 * deterministic mode, gradient accumulation). */
static inline int pt_partitions(const pt_options *o)
{
    return o->devices > 1 || o->deterministic || o->accumulate > 1;
}

/* ---- the pass manager (pm.c) ---- */

typedef struct {
    int verify_each;            /* the verifier after every pass */
    int time_passes;            /* a line per pass: time and changes */
    const char *dump_ir;        /* "all", "before:PASS", "after:PASS" or NULL */
    const char *dump_dir;       /* dumps go to DIR/NN-when-pass.gir; NULL: to out */
    FILE *out;                  /* timings, and dumps without dump_dir */
    const pt_options *partition; /* the partition pass's; NULL: one device */
} pm_options;

/* A pass rewrites g in place and returns how many nodes it changed, or -1 after
 * reporting an error on d.  Passes that take options read them from o. */
typedef struct {
    const char *name;
    const char *what;           /* one line, for --help */
    int (*run)(ir_graph *g, diag *d);
    int (*run_with)(ir_graph *g, const pm_options *o, diag *d);   /* instead of run */
} pass_info;

const pass_info *pass_lookup(const char *name, size_t len);

/* The default pipeline, as a --passes list; with remat, rematerialization too;
 * with partitioned, the partition pass between scheduling and fusion. */
const char *pm_default_pipeline(int training, int remat, int partitioned);

/* Runs the comma-separated passes of pipeline on g.  Returns 0, or -1 with the
 * problem on d (an unknown pass, a failing pass, IR that no longer verifies). */
int pm_run(ir_graph *g, const char *pipeline, const pm_options *o, diag *d);

/* The passes (simplify.c, memplan.c). */
int pass_simplify(ir_graph *g, diag *d);
int pass_fold(ir_graph *g, diag *d);
int pass_cse(ir_graph *g, diag *d);
int pass_dce(ir_graph *g, diag *d);
int pass_schedule(ir_graph *g, diag *d);   /* before fuse: it leaves fused graphs alone */
int pass_fuse(ir_graph *g, diag *d);
/* Whether a backend computes n with prev, the node before it on its device
 * (a convolution's bias in the batchnorm_train after it): schedule.c moves n
 * up to prev, and no pass may put a node between them. */
int pass_goes_with(const ir_node *prev, const ir_node *n);
int pass_remat(ir_graph *g, diag *d);     /* remat.c */
int pass_recompute(ir_graph *g, int mode, diag *d); /* remat.c: mode a pt_recompute */
int pass_fold_bn(ir_graph *g, diag *d);   /* fold_bn.c */
/* attention.c: softmax(q k^T scale (causal mask)) v, written out, becomes one
 * attention node.  The driver runs it on every model the frontend makes
 * (drv_load), before autodiff; returns the attention nodes made. */
int pass_attention(ir_graph *g, diag *d);

/* ---- static memory planning (memplan.c) ---- */

#define MP_ALIGN 256            /* bytes: every buffer's offset and size */

typedef struct {
    const ir_value *value;
    int64_t offset, size;       /* bytes in its device's arena; size aligned */
    int first, last;            /* node indices: defined, last read (nnodes: kept) */
    int members;                /* values sharing the buffer in place (value: the first) */
    int device;
} mp_buffer;

/* One device's share of a plan.  A partitioned program has an arena per device;
 * each device holds its own copy of the parameters and inputs it reads. */
typedef struct {
    int64_t arena_bytes;        /* the planned peak of its node results */
    int64_t lower_bound;        /* the most bytes live at one time: no plan is smaller */
    int64_t no_reuse_bytes;     /* every buffer a place of its own */
    int64_t param_bytes;        /* parameters, buffers, state and weights computed from
                                   them (ir_weight_only) that it reads: their own region */
    int64_t input_bytes;        /* the inputs it reads */
} mp_device;

typedef struct {
    mp_buffer *bufs;            /* every buffer: a node result, or several in place */
    int nbufs;
    int ndevices;
    mp_device *dev;             /* [ndevices] */
    int64_t *device_bytes;      /* [ndevices]: each arena_bytes, for rt_exec_new_planned */
    /* device 0's figures, or for a partitioned program the largest over devices */
    int64_t arena_bytes, lower_bound, no_reuse_bytes, param_bytes, input_bytes;
    int64_t *offset_by_id;      /* value id -> offset in its device's arena; -1 outside */
    int nvalues;
} mp_plan;

/* Bytes of v as the executor stores it (floats as float32), MP_ALIGN-aligned. */
int64_t mp_value_bytes(const ir_value *v);
/* The most bytes of node results live at one time in g's current order (on the
 * device that has the most). */
int64_t mp_peak_live(const ir_graph *g);
/* The operand whose buffer n's result may take in place, or -1. */
int mp_inplace_operand(const ir_node *n);
/* Plans g's node results in its current order. */
mp_plan *mp_plan_graph(const ir_graph *g);
/* Proves p for g: 0, or -1 with the first two buffers that collide. */
int mp_check(const ir_graph *g, const mp_plan *p, char *err, size_t errlen);
/* The arena, buffer by buffer: offset, bytes, live range, value. */
void mp_print(const ir_graph *g, const mp_plan *p, FILE *f);
void mp_plan_free(mp_plan *p);

/* ---- partition plans (plan.c) ---- */

typedef struct {
    int nops;                   /* compute nodes */
    int64_t param_bytes;        /* parameters, buffers, state and weights it holds */
    int64_t input_bytes;
    int64_t arena_bytes;        /* activations, gradients, temporaries: the planned peak */
    int64_t lower_bound;        /* the most bytes of those live at once */
    int64_t comm_bytes;         /* staging buffers of what it sends */
    int64_t peak_bytes;         /* all of them: what the device needs */
    double predicted_ms, compute_ms, comm_ms;
} pt_device_plan;

/* A strategy auto considered. */
typedef struct {
    char name[64];
    double step_ms;
    int64_t peak_bytes;         /* the largest device's */
    const char *error;          /* why it was rejected, or NULL */
    int chosen;                 /* the simplest predicted within the model's error
                                   (cost_device.error) of the fastest */
    int fastest;                /* the fastest predicted */
} pt_candidate;

typedef struct {
    char strategy[96];          /* as the user reads it: "data", "pipeline 1f1b, 8 microbatches" */
    cost_device cost;
    int ndevices;
    pt_device_plan *dev;
    double step_ms, bubble;
    double model_flops;         /* GEMM-shaped FLOPs of the single-device program (each
                                   replicated layer once, nothing recomputed): model
                                   FLOPs utilisation's numerator; 0: count g's */
    cost_sim *sim;
    pt_candidate *candidates;   /* auto: every strategy it tried (the caller's) */
    int ncandidates;
} pt_plan;

/* The plan of partitioned program g with memory plan mp, costed on cost. */
pt_plan *pt_plan_new(const ir_graph *g, const mp_plan *mp, const cost_device *cost,
                     const char *strategy);
void pt_plan_free(pt_plan *p);
/* The text of gnc compile --dump-plan, and its JSON (docs/partition.md). */
void pt_plan_print(const pt_plan *p, const ir_graph *g, FILE *f);
int pt_plan_write_json(const pt_plan *p, const ir_graph *g, FILE *f);
/* -1 after reporting every device whose peak is over caps[device] (0: no cap),
 * with what is live at its peak. */
int pt_plan_check_caps(const pt_plan *p, const mp_plan *mp, const int64_t *caps, diag *d);
/* A node or value name without the partitioner's replica or device prefix. */
const char *pt_dsl_name(const char *name);

typedef enum { AD_SGD, AD_ADAM, AD_ADAMW } ad_optimizer_kind;

/* The optimizer the training step applies; defaults as PyTorch's. */
typedef struct {
    ad_optimizer_kind kind;
    double momentum;        /* SGD */
    int nesterov;           /* SGD */
    double weight_decay;    /* all: L2 added to the gradient; AdamW: decoupled */
    double beta1, beta2, eps;  /* Adam, AdamW */
} ad_optimizer;

/* PyTorch's defaults for kind: momentum 0, betas (0.9, 0.999), eps 1e-8, and
 * weight decay 0 (0.01 for AdamW). */
ad_optimizer ad_optimizer_default(ad_optimizer_kind kind);

/* Names of the run-time scalars a training-step graph reads, as graph inputs. */
#define AD_INPUT_LR   "train.lr"     /* f32[]: the learning rate of this step */
#define AD_INPUT_STEP "train.step"   /* i64[]: steps taken before this one */
#define AD_INPUT_SEED "train.seed"   /* i64[]: the run's seed (dropout masks) */

/* Turns a model graph into one training step: the forward pass in training mode
 * (batchnorm on batch statistics, updating its running statistics; dropout
 * masks), the backward pass from the loss, and the optimizer's update of every
 * trainable parameter.  Reports on d and returns -1 when the graph has no loss
 * or an op on the path to it cannot be differentiated. */
int ad_training_graph(ir_graph *g, const ad_optimizer *opt, diag *d);

#endif
