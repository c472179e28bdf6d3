/* Inside the partitioner: the state partition.c, pipeline.c and tensor.c share.
 * Not a public header (passes.h has the pass). */
#ifndef GNC_PARTITION_H
#define GNC_PARTITION_H

#include "base.h"
#include "passes.h"

#define PT_MAX_STAGES 64        /* a pipeline's stages at most (a bit mask of them) */

typedef struct {
    ir_node **nodes;
    int n, cap;
} pt_seq;

/* A task of a stage's schedule: source node `node` for replica `k` of each
 * data-parallel group (k < 0: for all of the device's replicas at once). */
typedef struct {
    int node;
    int k;
} pt_task;

typedef struct pt {
    ir_graph *g;
    const pt_options *o;
    diag *d;
    ir_loc loc;                 /* of the nodes the partitioner adds */

    /* the source */
    ir_node **src;              /* its nodes in order */
    int nsrc;
    int nval;                   /* its values: ids below nval */
    ir_type *type;              /* by id: the source's types */
    char *batched;              /* by id: depends on the batch */
    int *pos;                   /* by id: index of the source node computing it, or -1 */
    const ir_value *seed;       /* the loss gradient's seed (a const 1), or NULL */

    /* the layout */
    int64_t B, b;               /* the batch, and each replica's slice of it */
    int R, dp, pp, m;           /* replicas R = dp x m */
    int ndev;                   /* dp x pp */
    int *stage;                 /* by source node index */
    int *backward;              /* by source node index: depends on the loss gradient */
    pt_task **sched;            /* [pp]: each stage's tasks in order */
    int *nsched;

    /* the result */
    pt_seq *seq;                /* [ndev]: each device's nodes in order */
    ir_value **map;             /* [R x nval]: replica r's copy of a per-replica value */
    ir_value **per_dev;         /* [ndev x nval]: a device's copy of a once-per-device value */
    char *taken;                /* by id: the source value already serves a copy */
    ir_value **reduced;         /* [ndev x nval]: a gradient reduced over every replica */
    int64_t next_id;            /* collective and send/recv ids */
    uint64_t *keys;             /* their keys (pt_comm_id) */
    int64_t *key_ids;
    size_t key_cap, nkeys;
    ir_value **recv_by_id;      /* recvs made, by id */
    int64_t recv_cap;
    uint64_t *sends;            /* by source value id: the other stages that read it */
    /* ZeRO (o->zero, data parallelism): what is sharded over the devices */
    char *zsharded;             /* by id: a parameter or optimizer state kept as shards */
    ir_value **zshard;          /* [ndev x nval]: a device's shard of one */
    ir_value **gathered;        /* [2 ndev x nval]: stage 3's parameter gathered on a device,
                                   for the forward pass, then again for the backward pass */
    int backward_task;          /* the task being copied is of the backward pass */
    int failed;                 /* an error was reported */
} pt;

int64_t pt_comm_id(pt *P, uint64_t key);
const char *pt_name(char *buf, size_t len, int r, const char *name);

/* Node makers: a node on device dev, typed by ir_infer, appended to dev's
 * sequence; each returns the (first) result. */
ir_node *pt_node(pt *P, int dev, ir_op op, int nin, ir_value *const *in, int nout,
                 const char *base, ir_loc loc);
ir_value *pt_emit(pt *P, ir_node *n);
ir_value *pt_op1(pt *P, int dev, ir_op op, ir_value *a, const char *name);
ir_value *pt_op2(pt *P, int dev, ir_op op, ir_value *a, ir_value *b, const char *name);
ir_value *pt_const(pt *P, int dev, double v, const ir_type *t, const char *name);
ir_value *pt_reshape(pt *P, int dev, ir_value *a, const ir_type *t, const char *name);
ir_value *pt_sum_to(pt *P, int dev, ir_value *a, const ir_type *t, const char *name);

/* Merges the devices' sequences (P->seq) into g's node list, each node after
 * what it reads: its operands, every node of a collective it reads, the send of
 * its recv.  Needs g, seq, ndev and next_id (every collective id is below it). */
void pt_merge(pt *P);

/* Pipelines (pipeline.c): each source node's stage, and each stage's schedule
 * of tasks.  Returns 0, or -1 after reporting why (more stages than layers). */
int pt_pipeline_stages(pt *P);
void pt_pipeline_schedule(pt *P);

/* Tensor parallelism (tensor.c): the whole pass for PT_TENSOR. */
int pt_tensor(ir_graph *g, const pt_options *o, diag *d);

#endif
