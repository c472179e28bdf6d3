/* Partitioning: one program for several devices (docs/partition.md).
 *
 * Expects: a verified, scheduled, single-device graph (a model, or autodiff's
 * training step) without fused nodes.
 *
 * The model runs as R replicas, each on its slice of b = B / R rows of the
 * batch B (the first dimension of every input of rank 1 or more).  Replica
 * r = q * m + k is microbatch k of data-parallel group q, and its nodes run on
 * device q * pp + stage(node): data parallelism has one stage and one replica
 * per device (m local micro-shards in deterministic mode), a pipeline one group
 * and m microbatches flowing through pp stages (pipeline.c), hybrid both.
 *
 * Steps:
 *   1. The source: its nodes, each value's type and whether it depends on the
 *      batch.  Nodes that do are per replica; the optimizer's run once per
 *      device, after the gradients are reduced; the others (constants, what is
 *      computed from weights alone) once per device that needs them.
 *   2. Stages (pipeline.c; all 0 without a pipeline) and each stage's schedule:
 *      the order in which it runs (replica, node) tasks.
 *   3. Each device's node sequence, task by task, for every data-parallel group
 *      at once (so a collective is made once, with a node on each device of its
 *      group):
 *      - a per-replica node is a copy of the source node on the replica's slice,
 *        its shapes and shape attributes rescaled from B to b;
 *      - a batched input is read through a slice of it;
 *      - a value read on another stage is sent after it is computed and
 *        received before its first read there;
 *      - a gradient is summed over the device's replicas, then all-reduced
 *        between the groups, in buckets of about bucket_bytes issued as soon as
 *        their last gradient is ready, so that each can overlap the rest of the
 *        backward pass;
 *      - with sync_bn, batchnorm's statistics (and in the backward pass the sums
 *        its input gradient needs) are reduced over the whole batch;
 *      - the optimizer runs on the reduced gradients, once per device;
 *      - the loss (the mean of the replicas' losses) and the outputs (the
 *        replicas' slices in batch order) end on device 0.
 *      The loss gradient is seeded with 1/R instead of 1: the gradients are
 *      those of the mean loss over the whole batch.
 *   4. The sequences are merged into the node list: every node after what it
 *      reads, every recv after its send, every reader of a collective after all
 *      of the collective's nodes.
 *
 * Deterministic mode cuts the batch into the same M micro-shards (replicas)
 * whatever the device count, and every sum over replicas (gradients, loss,
 * batchnorm statistics) gathers the M terms onto each device and adds them in
 * replica order: the result does not depend on the device count, bit for bit.
 *
 * Guarantees: the graph verifies; its devices together compute the source's
 * outputs, loss and updates (up to the order of floating-point sums).  Each
 * device holds its own copy of the parameters it reads and updates it.  A copy
 * for replica r > 0 is named "rR." and the source name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition.h"

/* ---------------------------------------------------------------- helpers */

static void seq_push(pt_seq *s, ir_node *n)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->nodes = base_xrealloc(s->nodes, (size_t)s->cap * sizeof *s->nodes);
    }
    s->nodes[s->n++] = n;
}

/* Ids of collectives and send/recv pairs: one per key, handed out in order.
 * Keys name what is communicated, so that the two ends of a send and its recv,
 * made at different times, find the same id. */
int64_t pt_comm_id(pt *P, uint64_t key)
{
    if (2 * (P->nkeys + 1) > P->key_cap) {
        size_t cap = P->key_cap ? 2 * P->key_cap : 1024;
        uint64_t *keys = base_xcalloc(cap, sizeof *keys);
        int64_t *ids = base_xcalloc(cap, sizeof *ids);
        for (size_t i = 0; i < P->key_cap; i++)
            if (P->key_ids[i]) {
                size_t j = (P->keys[i] * 0x9e3779b97f4a7c15ull) & (cap - 1);
                while (ids[j])
                    j = (j + 1) & (cap - 1);
                keys[j] = P->keys[i], ids[j] = P->key_ids[i];
            }
        base_free(P->keys);
        base_free(P->key_ids);
        P->keys = keys, P->key_ids = ids, P->key_cap = cap;
    }
    size_t j = (key * 0x9e3779b97f4a7c15ull) & (P->key_cap - 1);
    while (P->key_ids[j] && P->keys[j] != key)
        j = (j + 1) & (P->key_cap - 1);
    if (!P->key_ids[j]) {
        P->keys[j] = key;
        P->key_ids[j] = ++P->next_id;
        P->nkeys++;
    }
    return P->key_ids[j];
}

/* A node on device dev, its results named base (or the op) and typed by ir_infer. */
ir_node *pt_node(pt *P, int dev, ir_op op, int nin, ir_value *const *in, int nout,
                 const char *base, ir_loc loc)
{
    ir_node *n = ir_node_new(P->g, op, nin, in, nout, base, loc);
    n->device = dev;
    return n;
}

/* Types n's results from its operands and appends it to dev's sequence. */
ir_value *pt_emit(pt *P, ir_node *n)
{
    char err[256];
    ir_type t[IR_MAX_RESULTS];
    ir_set_attr_defaults(P->g, n);
    if (n->op != IR_OP_CONST) {
        int ok = ir_infer(n, t, err, sizeof err);
        if (!ok) fprintf(stderr, "pt_emit: %s %s: %s\n", ir_ops[n->op].name, n->out[0]->name, err);
        IR_ASSERT(ok); /* the partitioner made a node that does not type: a bug */
        for (int i = 0; i < n->nout; i++)
            n->out[i]->type = t[i];
    }
    seq_push(&P->seq[n->device], n);
    return n->out[0];
}

ir_value *pt_op1(pt *P, int dev, ir_op op, ir_value *a, const char *name)
{
    return pt_emit(P, pt_node(P, dev, op, 1, &a, 1, name, P->loc));
}

ir_value *pt_op2(pt *P, int dev, ir_op op, ir_value *a, ir_value *b, const char *name)
{
    ir_value *in[2] = {a, b};
    return pt_emit(P, pt_node(P, dev, op, 2, in, 1, name, P->loc));
}

ir_value *pt_const(pt *P, int dev, double v, const ir_type *t, const char *name)
{
    ir_node *n = pt_node(P, dev, IR_OP_CONST, 0, NULL, 1, name, P->loc);
    ir_set_float(P->g, n, "value", v);
    n->out[0]->type = *t;
    return pt_emit(P, n);
}

ir_value *pt_reshape(pt *P, int dev, ir_value *a, const ir_type *t, const char *name)
{
    if (ir_type_eq(&a->type, t))
        return a;
    ir_node *n = pt_node(P, dev, IR_OP_RESHAPE, 1, &a, 1, name, P->loc);
    ir_set_ints(P->g, n, "shape", t->rank, t->dims);
    return pt_emit(P, n);
}

ir_value *pt_sum_to(pt *P, int dev, ir_value *a, const ir_type *t, const char *name)
{
    ir_node *n = pt_node(P, dev, IR_OP_SUM_TO, 1, &a, 1, name, P->loc);
    ir_set_ints(P->g, n, "shape", t->rank, t->dims);
    return pt_emit(P, n);
}

/* "rR.name" for replica r > 0, "dD.name" for device D > 0's copy of a value
 * computed once per device (r = -1 - D), else name (into buf). */
const char *pt_name(char *buf, size_t len, int r, const char *name)
{
    if (r == 0 || r == -1)
        return name;
    snprintf(buf, len, r > 0 ? "r%d.%s" : "d%d.%s", r > 0 ? r : -1 - r, name);
    return buf;
}

/* pt_name's name of replica r's copy with a suffix: "rR.name.suffix". */
static const char *suffixed(char *buf, size_t len, int r, const char *name, const char *suffix)
{
    if (r > 0 || r < -1)
        snprintf(buf, len, r > 0 ? "r%d.%s.%s" : "d%d.%s.%s", r > 0 ? r : -1 - r, name, suffix);
    else
        snprintf(buf, len, "%s.%s", name, suffix);
    return buf;
}

/* The devices of stage s's data-parallel group, in group order. */
static void stage_group(const pt *P, int s, int64_t *group)
{
    for (int q = 0; q < P->dp; q++)
        group[q] = (int64_t)q * P->pp + s;
}

/* ---------------------------------------------------------------- values */

static int is_optimizer(ir_op op) { return op == IR_OP_SGD || op == IR_OP_ADAM; }

/* Which source values depend on the batch: batched inputs and what is computed
 * from them.  Optimizer nodes do too (they read gradients). */
static int classify(pt *P)
{
    ir_graph *g = P->g;
    P->batched = base_xcalloc((size_t)P->nval, 1);
    P->B = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (v->type.rank == 0)
            continue;
        if (P->B && v->type.dims[0] != P->B) {
            diag_error(P->d, v->loc, "cannot split the batch: input '%s' has %lld rows, "
                       "another %lld (every input of rank 1 or more needs the batch first)",
                       v->name, (long long)v->type.dims[0], (long long)P->B);
            return -1;
        }
        P->B = v->type.dims[0];
        P->batched[v->id] = 1;
    }
    for (int i = 0; i < P->nsrc; i++) {
        const ir_node *n = P->src[i];
        int dep = 0;
        for (int k = 0; k < n->nin; k++)
            dep |= P->batched[n->in[k]->id];
        for (int k = 0; k < n->nout; k++)
            P->batched[n->out[k]->id] = (char)dep;
    }
    if (!P->B) {
        diag_error(P->d, (ir_loc){0}, "cannot partition '%s': it has no batched input to split",
                   g->name);
        return -1;
    }
    return 0;
}

/* Sets n's shape attributes for its operands' rescaled batch (n is a copy of
 * source node s whose operands now have their replica's types).  Returns 0, or
 * -1 when a shape attribute cannot follow. */
static int rebatch_attrs(pt *P, ir_node *n, const ir_node *s, int r)
{
    const ir_attr *a = ir_get_attr(n, "shape");
    const ir_type *in0 = n->nin ? &n->in[0]->type : NULL;
    const ir_type *old0 = n->nin ? &P->type[s->in[0]->id] : NULL;
    if (n->op == IR_OP_DROPOUT_TRAIN && P->batched[s->in[0]->id] && P->R > 1) {
        int64_t sh[3] = {0, (int64_t)r * P->b, P->B};
        ir_set_ints(P->g, n, "shard", 3, sh);
        return 0;
    }
    if (n->op == IR_OP_SLICE && P->batched[s->in[0]->id] && ir_attr_int(n, "axis") == 0 &&
        P->R > 1)
        return -1;
    if (n->op == IR_OP_PAD && P->batched[s->in[0]->id] && P->R > 1 &&
        (ir_attr_ints(n, "before", NULL)[0] || ir_attr_ints(n, "after", NULL)[0]))
        return -1;
    if (!a || !in0 || in0->rank == 0 || in0->dims[0] == old0->dims[0])
        return 0;
    int64_t *shape = a->ints; /* the node's own copy (ir_set_ints by the cloner) */
    switch (n->op) {
    case IR_OP_RESHAPE: case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_AVGPOOL2D_GRAD:
    case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD: case IR_OP_UPSAMPLE2D_GRAD:
        if (a->n == 0 || shape[0] != old0->dims[0])
            return -1;
        shape[0] = in0->dims[0];
        return 0;
    case IR_OP_SUM_TO: case IR_OP_BROADCAST_TO: /* aligned at the right */
        for (int k = 0; k < a->n; k++) {
            int j = k - (a->n - in0->rank);
            if (j >= 0 && in0->dims[j] != old0->dims[j] && shape[k] == old0->dims[j])
                shape[k] = in0->dims[j];
        }
        return 0;
    default:
        return 0;
    }
}

/* Copies source node s onto dev with operands in, for replica r (r = -1 - dev:
 * a device's copy of a node computed once per device); the first copy of a
 * source value takes the value itself, name and all. */
static ir_node *copy_node(pt *P, const ir_node *s, int r, int dev, ir_value **in)
{
    ir_value *out[IR_MAX_RESULTS];
    char buf[512];
    for (int k = 0; k < s->nout; k++) {
        ir_value *v = s->out[k];
        out[k] = P->taken[v->id] ? ir_value_new(P->g, pt_name(buf, sizeof buf, r, v->name), s->loc)
                                 : v;
        P->taken[v->id] = 1;
    }
    ir_node *n = ir_node_make(P->g, s->op, s->nin, in, s->nout, out, s->loc);
    n->device = dev;
    ir_copy_attrs(P->g, n, s);
    /* a loss's mean over what it does not ignore is averaged over the
       replicas only while every replica counts all of its share */
    if (r >= 0 && P->R > 1 && ir_get_attr(s, "split"))
        ir_set_int(P->g, n, "split", P->R);
    for (int k = 0; k < s->nout; k++)
        out[k]->type = P->type[s->out[k]->id];
    return n;
}

/* ---------------------------------------------------------------- values */

static ir_value **map_at(pt *P, int r, const ir_value *v) { return &P->map[(size_t)r * P->nval + v->id]; }
static ir_value **dev_at(pt *P, int dev, const ir_value *v) { return &P->per_dev[(size_t)dev * P->nval + v->id]; }

static void emit_once(pt *P, const ir_node *s, int dev);

/* The recv on dev of replica r's copy x of source value v; its send was made
 * with x (send_after), under the same key. */
static ir_value *recv_of(pt *P, const ir_value *v, int r, ir_value *x, int dev)
{
    int64_t id = pt_comm_id(P, ((uint64_t)1 << 62) | ((uint64_t)v->id << 30) |
                                   ((uint64_t)r << 15) | (uint64_t)dev);
    if (id < P->recv_cap && P->recv_by_id[id])
        return P->recv_by_id[id];
    char buf[512];
    int src = x->def->device;
    snprintf(buf, sizeof buf, "%s.from%d", x->name, src);
    ir_node *n = pt_node(P, dev, IR_OP_RECV, 0, NULL, 1, buf, x->def->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", src);
    ir_set_ints(P->g, n, "shape", x->type.rank, x->type.dims);
    ir_value *y = pt_emit(P, n);
    if (id >= P->recv_cap) {
        int64_t cap = 2 * id + 64;
        P->recv_by_id = base_xrealloc(P->recv_by_id, (size_t)cap * sizeof *P->recv_by_id);
        memset(P->recv_by_id + P->recv_cap, 0,
               (size_t)(cap - P->recv_cap) * sizeof *P->recv_by_id);
        P->recv_cap = cap;
    }
    P->recv_by_id[id] = y;
    return y;
}

static void send(pt *P, const ir_value *v, int r, ir_value *x, int dev)
{
    int64_t id = pt_comm_id(P, ((uint64_t)1 << 62) | ((uint64_t)v->id << 30) |
                                   ((uint64_t)r << 15) | (uint64_t)dev);
    ir_node *n = pt_node(P, x->def->device, IR_OP_SEND, 1, &x, 1, "send", x->def->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", dev);
    pt_emit(P, n);
}

/* Right after replica r's copy x of v is computed: its sends to the other
 * stages that read it. */
static void send_after(pt *P, const ir_value *v, int r, ir_value *x)
{
    if (!P->sends[v->id])
        return;
    int q = x->def->device / P->pp, here = x->def->device % P->pp;
    for (int s = 0; s < P->pp; s++)
        if (s != here && (P->sends[v->id] >> s & 1))
            send(P, v, r, x, q * P->pp + s);
}

/* Replica r's copy of source value v on device dev (r < 0: the device's): a
 * parameter itself, a slice of a batched input, the device's copy of a value
 * computed once per device, the replica's copy of a per-replica value, or the
 * recv of it from the device that computed it. */
static ir_value *zero_gather(pt *P, const ir_value *v, int dev);

static ir_value *value_of(pt *P, const ir_value *v, int r, int dev)
{
    char buf[512];
    if (v->kind == IR_VALUE_PARAM && P->zsharded && P->zsharded[v->id])
        return zero_gather(P, v, dev); /* ZeRO-3: the whole, gathered from the shards */
    if (v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER || v->kind == IR_VALUE_STATE ||
        (v->kind == IR_VALUE_INPUT && (!P->batched[v->id] || P->R == 1)))
        return (ir_value *)v;
    if (v->kind == IR_VALUE_INPUT) {
        ir_value **slot = map_at(P, r, v);
        if (*slot && (*slot)->def->device == dev)
            return *slot;
        ir_node *n = pt_node(P, dev, IR_OP_SLICE, 1, (ir_value *const *)&v, 1,
                             suffixed(buf, sizeof buf, r, v->name, "part"), v->loc);
        ir_set_int(P->g, n, "axis", 0);
        ir_set_int(P->g, n, "start", (int64_t)r * P->b);
        ir_set_int(P->g, n, "size", P->b);
        ir_value *x = pt_emit(P, n);
        if (!*slot)
            *slot = x;
        return x;
    }
    if (!P->batched[v->id] || r < 0) {
        if (!*dev_at(P, dev, v))
            emit_once(P, P->src[P->pos[v->id]], dev); /* the source node: v->def may be a copy now */
        return *dev_at(P, dev, v);
    }
    ir_value *x = *map_at(P, r, v);
    IR_ASSERT(x); /* a schedule runs a node after what it reads */
    return x->def->device == dev ? x : recv_of(P, v, r, x, dev);
}

/* A node computed once per device (a constant, weights): copied onto dev at
 * its first use there.  The loss gradient's seed becomes 1/R. */
static void emit_once(pt *P, const ir_node *s, int dev)
{
    ir_value *in[64];
    for (int k = 0; k < s->nin; k++)
        in[k] = value_of(P, s->in[k], -1, dev);
    ir_node *n = copy_node(P, s, -1 - dev, dev, in);
    if (P->seed && s->out[0] == P->seed)
        ir_set_float(P->g, n, "value", 1.0 / P->R);
    pt_emit(P, n);
    for (int k = 0; k < s->nout; k++)
        *dev_at(P, dev, s->out[k]) = n->out[k];
}

/* ---------------------------------------------------------------- ZeRO */

/* The comm id of ZeRO's collective `kind` on value v (0: stage 3's gather for
 * the forward pass, 1: for the backward pass, 2: the updated parameter's
 * gather, 3: the gradient's reduce-scatter): the same on every device. */
static int64_t zero_id(pt *P, const ir_value *v, int kind)
{
    return pt_comm_id(P, ((uint64_t)2 << 62) | ((uint64_t)1 << 61) | ((uint64_t)v->id << 2) |
                             (uint64_t)kind);
}

/* Marks what ZeRO shards (o->zero; data parallelism over several devices):
 * each trainable parameter's optimizer state (stage 1), its gradient (2) and
 * the parameter itself (3), where the devices divide its first axis; a
 * parameter they do not divide stays replicated, as do buffers. */
static void zero_mark(pt *P)
{
    if (!P->o->zero || P->dp < 2)
        return;
    for (int i = 0; i < P->nsrc; i++) {
        const ir_node *s = P->src[i];
        if (!is_optimizer(s->op))
            continue;
        const ir_type *t = &P->type[s->in[0]->id];
        if (t->rank < 1 || t->dims[0] % P->dp)
            continue;
        for (int a = 2; a < s->nin; a++)
            if (s->in[a]->kind == IR_VALUE_STATE)
                P->zsharded[s->in[a]->id] = 1;
        if (P->o->zero >= 2)
            P->zsharded[s->in[1]->id] = 1;
        if (P->o->zero >= 3)
            P->zsharded[s->in[0]->id] = 1;
    }
}

/* Device dev's shard of parameter or state v: rows [dev n/D, (dev + 1) n/D)
 * of its first axis, a parameter of its own (a shard, ir_shard: checkpoints
 * hold the whole). */
static ir_value *zero_shard(pt *P, const ir_value *v, int dev)
{
    ir_value **slot = &P->zshard[(size_t)dev * P->nval + v->id];
    if (!*slot) {
        ir_type t = v->type;
        t.dims[0] /= P->dp;
        char buf[560];
        snprintf(buf, sizeof buf, "%s.shard%d", v->name, dev);
        *slot = ir_add_param(P->g, v->kind, ir_unique_name(P->g, buf), t, v->init, v->loc);
        ir_set_shard(P->g, *slot, v->name, &v->type, 0, (int64_t)dev * t.dims[0]);
        (*slot)->source = v->source;
    }
    return *slot;
}

/* x, device dev's shard of v, gathered whole on every device (kind as zero_id). */
static ir_value *zero_all_gather(pt *P, const ir_value *v, ir_value *x, int dev, int kind,
                                 const char *suffix)
{
    int64_t group[IR_MAX_DEVICES];
    char buf[560];
    stage_group(P, 0, group);
    snprintf(buf, sizeof buf, "%s.%s", pt_dsl_name(v->name), suffix);
    ir_node *n = pt_node(P, dev, IR_OP_ALL_GATHER, 1, &x, 1, buf, P->loc);
    ir_set_int(P->g, n, "id", zero_id(P, v, kind));
    ir_set_ints(P->g, n, "group", P->dp, group);
    ir_set_int(P->g, n, "axis", 0);
    return pt_emit(P, n);
}

/* ZeRO's bucket collective op on dev: operand j's result is res[j] (a fresh
 * value), over the data-parallel group, along axis 0. */
static ir_node *zero_bucket(pt *P, ir_op op, int dev, int n, ir_value **in, ir_value **res,
                            int64_t id, const int64_t *group)
{
    ir_node *c = ir_node_make(P->g, op, n, in, n, res, P->loc);
    c->device = dev;
    ir_set_int(P->g, c, "id", id);
    ir_set_ints(P->g, c, "group", P->dp, group);
    ir_set_int(P->g, c, "axis", 0);
    pt_emit(P, c);
    return c;
}

/* ZeRO-3's parameter v whole on dev for the forward (b 0) or backward pass:
 * gathered once for each, so that between the two (and after) only the shard
 * stays.  Sets *made when it emits the gather. */
static ir_value *zero_gather_for(pt *P, const ir_value *v, int dev, int b, int *made)
{
    ir_value **slot = &P->gathered[((size_t)2 * dev + b) * P->nval + v->id];
    if (!*slot) {
        *slot = zero_all_gather(P, v, zero_shard(P, v, dev), dev, b,
                                b ? "gathered_bwd" : "gathered");
        *made = 1;
    }
    return *slot;
}

/* The gathered v for the task being copied (zero_prefetch has gathered it
 * already but for the first layer's). */
static ir_value *zero_gather(pt *P, const ir_value *v, int dev)
{
    int made = 0;
    return zero_gather_for(P, v, dev, P->backward_task, &made);
}

/* Gathers on stage s's devices the sharded parameters that v reads, itself
 * or through nodes computed once per device that are not there yet (a
 * weight's transpose); returns whether it emitted any. */
static int zero_gather_reads(pt *P, const ir_value *v, int s, int b)
{
    int made = 0;
    if (v->kind == IR_VALUE_PARAM && P->zsharded[v->id]) {
        for (int q = 0; q < P->dp; q++)
            zero_gather_for(P, v, q * P->pp + s, b, &made);
        return made;
    }
    if (v->kind != IR_VALUE_NODE || P->batched[v->id] || P->pos[v->id] < 0 ||
        *dev_at(P, s, v))
        return 0;
    const ir_node *n = P->src[P->pos[v->id]];
    for (int k = 0; k < n->nin; k++)
        made |= zero_gather_reads(P, n->in[k], s, b);
    return made;
}

/* Gathers the sharded parameters that task t of stage s reads, where not yet
 * gathered for its pass; returns whether it emitted any. */
static int zero_gather_task(pt *P, int s, int t)
{
    int i = P->sched[s][t].node, made = 0;
    for (int k = 0; k < P->src[i]->nin; k++)
        made |= zero_gather_reads(P, P->src[i]->in[k], s, P->backward[i]);
    return made;
}

/* ZeRO-3 before task `at` of stage s: its own gathers, and, once it reaches
 * the task *ahead that the last prefetch was for, the gathers of the next
 * task that needs any (the next layer), so that they run on the
 * communication stream while this layer computes, as FSDP's forward and
 * backward prefetch do.  One layer's parameters more stay whole. */
static void zero_prefetch(pt *P, int s, int at, int *ahead)
{
    zero_gather_task(P, s, at);
    if (at < *ahead)
        return;
    for (*ahead = at + 1; *ahead < P->nsched[s] && !zero_gather_task(P, s, *ahead); ++*ahead)
        ;
}

/* ZeRO-2 and 3: the n gradients v[] of a bucket, each summed over each
 * device's microbatches, summed between the devices and scattered: each gets
 * the rows of its shard.  One reduce_scatter per device for the whole bucket
 * (operand j's result is that device's rows of v[j]), so a bucket costs one
 * collective's latency, as plain data parallelism's all_reduce does; comm.c
 * still sums each element over the devices in rank order. */
static void zero_reduce_scatter(pt *P, const ir_value *const *v, int n)
{
    int64_t group[IR_MAX_DEVICES];
    char buf[560];
    stage_group(P, 0, group);
    int64_t id = zero_id(P, v[0], 3); /* a gradient is in one bucket only */
    for (int q = 0; q < P->dp; q++) {
        int dev = (int)group[q];
        ir_value *acc[64], *res[64];
        for (int j = 0; j < n; j++) {
            acc[j] = *map_at(P, q * P->m, v[j]);
            for (int k = 1; k < P->m; k++)
                acc[j] = pt_op2(P, dev, IR_OP_ADD, acc[j], *map_at(P, q * P->m + k, v[j]),
                                suffixed(buf, sizeof buf, 0, v[j]->name, "acc"));
            snprintf(buf, sizeof buf, "%s.shard%d", v[j]->name, dev);
            res[j] = ir_value_new(P->g, buf, P->loc);
        }
        ir_node *c = zero_bucket(P, IR_OP_REDUCE_SCATTER, dev, n, acc, res, id, group);
        for (int j = 0; j < n; j++)
            P->reduced[(size_t)dev * P->nval + v[j]->id] = c->out[j];
    }
}

/* Rows of device q's shard of x (a whole on dev), for ZeRO-1's optimizer. */
static ir_value *zero_rows(pt *P, ir_value *x, int q, int dev, const char *name)
{
    int64_t rows = x->type.dims[0] / P->dp;
    char buf[560];
    snprintf(buf, sizeof buf, "%s.rows%d", name, q);
    ir_node *n = pt_node(P, dev, IR_OP_SLICE, 1, &x, 1, buf, P->loc);
    ir_set_int(P->g, n, "axis", 0);
    ir_set_int(P->g, n, "start", (int64_t)q * rows);
    ir_set_int(P->g, n, "size", rows);
    return pt_emit(P, n);
}

/* Optimizer s on device q of a ZeRO program, for a parameter whose state is
 * sharded: on its shard of the gradient (ZeRO-2, 3: the reduce-scatter's;
 * ZeRO-1: its rows of the all-reduced one), of the parameter (ZeRO-3: its own;
 * else its rows) and of the state.  The updated shard: in ZeRO-3 all a device
 * keeps; else returned, for run_optimizers to gather it whole on every device
 * with its bucket. */
static ir_value *zero_optimizer(pt *P, const ir_node *s, int q)
{
    int dev = q; /* one stage */
    const ir_value *w = s->in[0];
    ir_value *in[8];
    ir_value *g = P->reduced[(size_t)dev * P->nval + s->in[1]->id];
    IR_ASSERT(g);
    in[0] = P->o->zero >= 3 ? zero_shard(P, w, dev) : zero_rows(P, (ir_value *)w, q, dev, w->name);
    in[1] = P->o->zero >= 2 ? g : zero_rows(P, g, q, dev, g->name);
    for (int a = 2; a < s->nin; a++)
        in[a] = P->zsharded[s->in[a]->id] ? zero_shard(P, s->in[a], dev)
                                          : value_of(P, s->in[a], -1, dev);
    ir_node *n = copy_node(P, s, -1 - dev, dev, in);
    pt_emit(P, n);
    for (int a = 1; a < s->nout; a++)
        *dev_at(P, dev, s->out[a]) = n->out[a];
    if (P->o->zero >= 3)
        *dev_at(P, dev, s->out[0]) = n->out[0];
    return n->out[0];
}

/* Whether ZeRO shards anything optimizer s reads. */
static int zero_managed(const pt *P, const ir_node *s)
{
    for (int a = 0; P->zsharded && a < s->nin; a++)
        if (P->zsharded[s->in[a]->id])
            return 1;
    return 0;
}

/* The target of an update on dev: the device's shard of what ZeRO shards. */
static ir_value *zero_target(pt *P, ir_value *t, int dev)
{
    return P->zsharded && t->id < P->nval && P->zsharded[t->id] ? zero_shard(P, t, dev) : t;
}

/* The parameter list with each sharded value's shards in its place. */
static void zero_params(pt *P)
{
    ir_graph *g = P->g;
    int n = 0, total = g->nparams;
    ir_value **params = ir_alloc(g, (size_t)(total ? total : 1) * sizeof *params);
    for (int i = 0; i < total; i++) {
        ir_value *v = g->params[i];
        if (v->id >= P->nval)
            continue; /* a shard, placed with its whole below */
        if (!P->zsharded[v->id]) {
            params[n++] = v;
            continue;
        }
        for (int d = 0; d < P->ndev; d++)
            if (P->zshard[(size_t)d * P->nval + v->id])
                params[n++] = P->zshard[(size_t)d * P->nval + v->id];
    }
    g->params = params;
    g->nparams = g->cap_params = n;
}

/* ---------------------------------------------------------------- reductions */

/* Sums per-replica values over every replica, onto each device of stage s.
 * in[j * R + r] is term j of replica r (on its device); out[j * dp + q] gets
 * sum j on group q's device.  Terms are added over a device's replicas in
 * replica order, then all-reduced between the groups: one collective for all
 * nterms (a bucket).  Deterministic mode gathers every replica's term onto each
 * device and adds them in replica order, term by term. */
static void reduce_sum(pt *P, int s, int nterms, ir_value **in, ir_value **out, const char *what)
{
    char buf[512];
    int64_t *group = base_xcalloc((size_t)P->dp, sizeof *group);
    stage_group(P, s, group);
    if (P->o->deterministic) {
        for (int j = 0; j < nterms; j++) {
            const ir_type *t = &in[j * P->R]->type;
            ir_type one = {t->dtype, t->rank + 1, {1}};
            memcpy(one.dims + 1, t->dims, (size_t)t->rank * sizeof *t->dims);
            int64_t id = P->dp > 1 ? ++P->next_id : 0;
            for (int q = 0; q < P->dp; q++) {
                int dev = (int)group[q];
                ir_value *parts[64] = {0};
                for (int k = 0; k < P->m; k++)
                    parts[k] = pt_reshape(P, dev, in[j * P->R + q * P->m + k], &one,
                                          pt_name(buf, sizeof buf, q * P->m + k, what));
                ir_value *stack = parts[0];
                if (P->m > 1) {
                    ir_node *c = pt_node(P, dev, IR_OP_CONCAT, P->m, parts, 1, what, P->loc);
                    ir_set_int(P->g, c, "axis", 0);
                    stack = pt_emit(P, c);
                }
                if (P->dp > 1) {
                    ir_node *c = pt_node(P, dev, IR_OP_ALL_GATHER, 1, &stack, 1, what, P->loc);
                    ir_set_int(P->g, c, "id", id);
                    ir_set_ints(P->g, c, "group", P->dp, group);
                    ir_set_int(P->g, c, "axis", 0);
                    stack = pt_emit(P, c);
                }
                out[j * P->dp + q] = pt_reshape(P, dev, pt_sum_to(P, dev, stack, &one, what), t,
                                                what);
            }
        }
        base_free(group);
        return;
    }
    int64_t id = P->dp > 1 ? ++P->next_id : 0;
    for (int q = 0; q < P->dp; q++) {
        int dev = (int)group[q];
        ir_value *acc[64];
        for (int j = 0; j < nterms; j++) {
            acc[j] = in[j * P->R + q * P->m];
            for (int k = 1; k < P->m; k++)
                acc[j] = pt_op2(P, dev, IR_OP_ADD, acc[j], in[j * P->R + q * P->m + k],
                                suffixed(buf, sizeof buf, 0, in[j * P->R]->name, "acc"));
        }
        if (P->dp > 1) {
            ir_value *res[64];
            for (int j = 0; j < nterms; j++)
                res[j] = ir_value_new(P->g, suffixed(buf, sizeof buf, dev ? -1 - dev : 0,
                                                     nterms > 1 ? in[j * P->R]->name : what,
                                                     "sum"), P->loc);
            ir_node *c = ir_node_make(P->g, IR_OP_ALL_REDUCE, nterms, acc, nterms, res, P->loc);
            c->device = dev;
            ir_set_int(P->g, c, "id", id);
            ir_set_ints(P->g, c, "group", P->dp, group);
            pt_emit(P, c);
            for (int j = 0; j < nterms; j++)
                acc[j] = c->out[j];
        }
        for (int j = 0; j < nterms; j++)
            out[j * P->dp + q] = acc[j];
    }
    base_free(group);
}

/* ---------------------------------------------------------------- batchnorm over the batch */

/* [1, c, 1, ...] for x of type t: a per-channel statistic that broadcasts. */
static ir_type stat_type(const ir_type *t)
{
    ir_type s = *t;
    for (int i = 0; i < s.rank; i++)
        s.dims[i] = i == 1 ? t->dims[1] : 1;
    return s;
}

/* batchnorm_train with statistics over the whole batch (sync_bn), for the
 * replicas of each group on stage s (tasks for all of a device's replicas):
 * the mean from per-replica channel sums, the variance from per-replica sums
 * of squared deviations from it, each reduced over all replicas; then each
 * replica normalizes with them (batchnorm_apply, the kernel of
 * batchnorm_train's normalization).  The running statistics follow PyTorch's
 * rule, with the unbiased variance. */
static void sync_batchnorm(pt *P, const ir_node *s, int st)
{
    char buf[512];
    const ir_type *tx = &P->type[s->in[0]->id];
    int64_t c = tx->dims[1], count = P->B * (ir_type_numel(tx) / (tx->dims[0] * c));
    ir_type stat = stat_type(tx), vec = {IR_F32, 1, {c}}, scalar = {IR_F32, 0, {0}};
    double eps = ir_attr_float(s, "eps"), mom = ir_attr_float(s, "momentum");
    ir_value **x = base_xcalloc((size_t)P->R, sizeof *x);
    ir_value **sums = base_xcalloc((size_t)P->R, sizeof *sums);
    ir_value **tot = base_xcalloc((size_t)P->dp, sizeof *tot);
    ir_value **mean = base_xcalloc((size_t)P->dp, sizeof *mean);
    const char *name = s->out[0]->name;
    P->loc = s->loc;
    for (int r = 0; r < P->R; r++) {
        int dev = (r / P->m) * P->pp + st;
        x[r] = value_of(P, s->in[0], r, dev);
        sums[r] = pt_sum_to(P, dev, x[r], &stat, suffixed(buf, sizeof buf, r, name, "sum"));
    }
    snprintf(buf, sizeof buf, "%s.sum", name);
    reduce_sum(P, st, 1, sums, tot, buf);
    for (int q = 0; q < P->dp; q++) {
        int dev = q * P->pp + st;
        snprintf(buf, sizeof buf, "%s.count", name);
        mean[q] = pt_op2(P, dev, IR_OP_DIV, tot[q], pt_const(P, dev, (double)count, &scalar, buf),
                         name);
    }
    for (int r = 0; r < P->R; r++) {
        int dev = (r / P->m) * P->pp + st;
        ir_value *dev_x = pt_op2(P, dev, IR_OP_SUB, x[r], mean[r / P->m], name);
        suffixed(buf, sizeof buf, r, name, "sqdev");
        sums[r] = pt_sum_to(P, dev, pt_op2(P, dev, IR_OP_MUL, dev_x, dev_x, buf), &stat, buf);
    }
    snprintf(buf, sizeof buf, "%s.sqdev", name);
    reduce_sum(P, st, 1, sums, tot, buf);
    for (int q = 0; q < P->dp; q++) {
        int dev = q * P->pp + st;
        ir_value *cnt = pt_const(P, dev, (double)count, &scalar, "count");
        ir_value *var = pt_reshape(P, dev, pt_op2(P, dev, IR_OP_DIV, tot[q], cnt, name), &vec, name);
        ir_value *mu = pt_reshape(P, dev, mean[q], &vec, name);
        snprintf(buf, sizeof buf, "%s.invstd", name);
        ir_value *fold[2] = {pt_const(P, dev, 1.0, &vec, "ones"), var};
        ir_node *inv = pt_node(P, dev, IR_OP_BN_FOLD_SCALE, 2, fold, 1, buf, s->loc);
        ir_set_float(P->g, inv, "eps", eps);
        ir_value *invstd = pt_emit(P, inv);
        /* running statistics: (1 - m) old + m new */
        ir_value *keep = pt_const(P, dev, 1 - mom, &scalar, "momentum");
        ir_value *rmean = pt_op2(P, dev, IR_OP_ADD,
                                 pt_op2(P, dev, IR_OP_MUL, value_of(P, s->in[3], -1, dev), keep, name),
                                 pt_op2(P, dev, IR_OP_MUL, mu, pt_const(P, dev, mom, &scalar, "momentum"),
                                        name), name);
        double unbiased = count > 1 ? (double)count / (double)(count - 1) : 1.0;
        ir_value *rvar = pt_op2(P, dev, IR_OP_ADD,
                                pt_op2(P, dev, IR_OP_MUL, value_of(P, s->in[4], -1, dev), keep, name),
                                pt_op2(P, dev, IR_OP_MUL, var,
                                       pt_const(P, dev, mom * unbiased, &scalar, "momentum"), name),
                                name);
        ir_value *res[5] = {NULL, mu, invstd, rmean, rvar};
        for (int k = 0; k < P->m; k++) {
            int r = q * P->m + k;
            ir_value *in[5] = {x[r], value_of(P, s->in[1], -1, dev), value_of(P, s->in[2], -1, dev),
                               mu, invstd};
            ir_node *apply = pt_node(P, dev, IR_OP_BATCHNORM_APPLY, 5, in, 1,
                                     pt_name(buf, sizeof buf, r, name), s->loc);
            ir_set_float(P->g, apply, "eps", eps);
            ir_set_float(P->g, apply, "momentum", mom);
            res[0] = pt_emit(P, apply);
            for (int j = 0; j < 5; j++)
                *map_at(P, r, s->out[j]) = res[j];
        }
    }
    base_free(x);
    base_free(sums);
    base_free(tot);
    base_free(mean);
}

/* batchnorm_grad with statistics over the whole batch: dx needs the sums of dy
 * and of dy * xhat over all replicas, which are also the weight's and bias's
 * gradients (already reduced: recorded in P->reduced). */
static void sync_batchnorm_grad(pt *P, const ir_node *s, int st)
{
    char buf[512];
    const ir_type *tx = &P->type[s->in[1]->id];
    int64_t c = tx->dims[1], count = P->B * (ir_type_numel(tx) / (tx->dims[0] * c));
    ir_type stat = stat_type(tx), vec = {IR_F32, 1, {c}}, scalar = {IR_F32, 0, {0}};
    ir_value **xhat = base_xcalloc((size_t)P->R, sizeof *xhat);
    ir_value **terms = base_xcalloc((size_t)2 * P->R, sizeof *terms);
    ir_value **tot = base_xcalloc((size_t)2 * P->dp, sizeof *tot);
    const char *name = s->out[0]->name;
    P->loc = s->loc;
    for (int r = 0; r < P->R; r++) {
        int dev = (r / P->m) * P->pp + st;
        ir_value *dy = value_of(P, s->in[0], r, dev), *x = value_of(P, s->in[1], r, dev);
        ir_value *mu = pt_reshape(P, dev, value_of(P, s->in[3], r, dev), &stat, name);
        ir_value *inv = pt_reshape(P, dev, value_of(P, s->in[4], r, dev), &stat, name);
        suffixed(buf, sizeof buf, r, name, "xhat");
        xhat[r] = pt_op2(P, dev, IR_OP_MUL, pt_op2(P, dev, IR_OP_SUB, x, mu, buf), inv, buf);
        suffixed(buf, sizeof buf, r, name, "dw");
        terms[r] = pt_sum_to(P, dev, pt_op2(P, dev, IR_OP_MUL, dy, xhat[r], buf), &stat, buf);
        terms[P->R + r] = pt_sum_to(P, dev, dy, &stat, suffixed(buf, sizeof buf, r, name, "db"));
    }
    snprintf(buf, sizeof buf, "%s.sums", name);
    reduce_sum(P, st, 2, terms, tot, buf);
    for (int q = 0; q < P->dp; q++) {
        int dev = q * P->pp + st;
        ir_value *dw = tot[q], *db = tot[P->dp + q];
        ir_value *cnt = pt_const(P, dev, (double)count, &scalar, "count");
        ir_value *w = pt_reshape(P, dev, value_of(P, s->in[2], -1, dev), &stat, name);
        ir_value *inv = pt_reshape(P, dev, value_of(P, s->in[4], q * P->m, dev), &stat, name);
        ir_value *scale = pt_op2(P, dev, IR_OP_MUL, w, inv, name);
        ir_value *mdw = pt_op2(P, dev, IR_OP_DIV, dw, cnt, name), *mdb = pt_op2(P, dev, IR_OP_DIV, db, cnt, name);
        for (int k = 0; k < P->m; k++) {
            int r = q * P->m + k;
            ir_value *dy = value_of(P, s->in[0], r, dev);
            const char *rn = pt_name(buf, sizeof buf, r, name);
            ir_value *t = pt_op2(P, dev, IR_OP_SUB, pt_op2(P, dev, IR_OP_SUB, dy, mdb, rn),
                                 pt_op2(P, dev, IR_OP_MUL, xhat[r], mdw, rn), rn);
            *map_at(P, r, s->out[0]) = pt_op2(P, dev, IR_OP_MUL, scale, t, rn);
        }
        P->reduced[(size_t)dev * P->nval + s->out[1]->id] = pt_reshape(P, dev, dw, &vec, s->out[1]->name);
        P->reduced[(size_t)dev * P->nval + s->out[2]->id] = pt_reshape(P, dev, db, &vec, s->out[2]->name);
    }
    base_free(xhat);
    base_free(terms);
    base_free(tot);
}

/* ---------------------------------------------------------------- gradients */

/* The gradient buckets of one stage: gradients waiting for their all-reduce. */
typedef struct {
    const ir_value **grads;     /* source values */
    int n;
    int64_t bytes;
} bucket;

static int64_t value_bytes(const pt *P, const ir_value *v)
{
    return ir_type_numel(&P->type[v->id]) * (int64_t)sizeof(float);
}

/* All-reduces the bucket's gradients (each summed over the replicas of its
 * device first) between the data-parallel groups of stage s. */
static void flush(pt *P, int s, bucket *bk)
{
    if (P->zsharded) { /* ZeRO-2, 3: the sharded gradients reduce-scattered together */
        const ir_value *sharded[64];
        int kept = 0, nsharded = 0;
        for (int j = 0; j < bk->n; j++)
            if (P->zsharded[bk->grads[j]->id])
                sharded[nsharded++] = bk->grads[j];
            else
                bk->grads[kept++] = bk->grads[j];
        bk->n = kept;
        if (nsharded)
            zero_reduce_scatter(P, sharded, nsharded);
    }
    if (!bk->n) {
        bk->bytes = 0;
        return;
    }
    ir_value **in = base_xcalloc((size_t)bk->n * P->R, sizeof *in);
    ir_value **out = base_xcalloc((size_t)bk->n * P->dp, sizeof *out);
    for (int j = 0; j < bk->n; j++)
        for (int r = 0; r < P->R; r++)
            in[j * P->R + r] = *map_at(P, r, bk->grads[j]);
    P->loc = bk->grads[bk->n - 1]->loc;
    reduce_sum(P, s, bk->n, in, out, "grads");
    for (int j = 0; j < bk->n; j++)
        for (int q = 0; q < P->dp; q++)
            P->reduced[(size_t)(q * P->pp + s) * P->nval + bk->grads[j]->id] = out[j * P->dp + q];
    base_free(in);
    base_free(out);
    bk->n = 0;
    bk->bytes = 0;
}

/* After source node i has run for every replica of its stage's devices: its
 * results that an optimizer reads join their stage's bucket, which is
 * all-reduced when full (deterministic mode reduces each at once). */
static void gradients_ready(pt *P, int i, bucket *bk, const char *is_grad)
{
    const ir_node *n = P->src[i];
    int s = P->stage[i];
    int64_t cap = P->o->bucket_bytes > 0 ? P->o->bucket_bytes : PT_DEFAULT_BUCKET_BYTES;
    for (int k = 0; k < n->nout; k++) {
        const ir_value *v = n->out[k];
        if (!is_grad[v->id] || P->reduced[(size_t)s * P->nval + v->id])
            continue; /* (sync batchnorm's reduced it already, on every device: see group 0's) */
        bk[s].grads[bk[s].n++] = v;
        bk[s].bytes += value_bytes(P, v);
        if (bk[s].bytes >= cap || bk[s].n == 64 || P->o->deterministic || P->dp == 1)
            flush(P, s, &bk[s]);
    }
}

/* ---------------------------------------------------------------- tasks */

/* Source node i for replica k of each group (k < 0: every replica) on stage s. */
static void run_task(pt *P, int i, int k, int chain)
{
    const ir_node *s = P->src[i];
    int st = P->stage[i];
    char buf[512];
    P->backward_task = P->backward[i];
    if (P->o->sync_bn && s->op == IR_OP_BATCHNORM_TRAIN) {
        sync_batchnorm(P, s, st);
        return;
    }
    if (P->o->sync_bn && s->op == IR_OP_BATCHNORM_GRAD) {
        sync_batchnorm_grad(P, s, st);
        return;
    }
    for (int q = 0; q < P->dp; q++)
        for (int j = k < 0 ? 0 : k; j < (k < 0 ? P->m : k + 1); j++) {
            int r = q * P->m + j, dev = q * P->pp + st;
            ir_value *in[64];
            for (int a = 0; a < s->nin; a++)
                in[a] = value_of(P, s->in[a], r, dev);
            /* microbatches run one after another: each batchnorm reads the
               running statistics the one before it left */
            if (chain && s->op == IR_OP_BATCHNORM_TRAIN && j > 0)
                in[3] = *map_at(P, r - 1, s->out[3]), in[4] = *map_at(P, r - 1, s->out[4]);
            ir_node *n = copy_node(P, s, r, dev, in);
            if (rebatch_attrs(P, n, s, r) != 0) {
                diag_error(P->d, s->loc, "cannot split the batch of %s (%s): a shape attribute "
                           "does not follow the batch", ir_ops[s->op].name,
                           ir_name_str(buf, sizeof buf, s->out[0]->name));
                P->failed = 1;
                return;
            }
            ir_type t[IR_MAX_RESULTS];
            char err[256];
            if (!ir_infer(n, t, err, sizeof err)) {
                diag_error(P->d, s->loc, "cannot split the batch of %s (%s): %s",
                           ir_ops[s->op].name, ir_name_str(buf, sizeof buf, s->out[0]->name), err);
                P->failed = 1;
                return;
            }
            for (int a = 0; a < n->nout; a++) {
                n->out[a]->type = t[a];
                *map_at(P, r, s->out[a]) = n->out[a];
            }
            seq_push(&P->seq[dev], n);
            for (int a = 0; a < n->nout; a++)
                send_after(P, s->out[a], r, n->out[a]);
        }
}

/* Whether what the task reads from other stages has been computed. */
static int task_ready(pt *P, pt_task t)
{
    const ir_node *s = P->src[t.node];
    for (int k = 0; k < s->nin; k++) {
        const ir_value *v = s->in[k];
        if (v->kind == IR_VALUE_NODE && P->batched[v->id] && !*map_at(P, t.k < 0 ? 0 : t.k, v))
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- the end of the step */

/* The stages other than its own whose nodes read the parameter an optimizer
 * updates (a tied embedding: the first stage looks it up, the last one
 * multiplies by it). */
static uint64_t other_readers(const pt *P, int opt)
{
    const ir_value *w = P->src[opt]->in[0];
    uint64_t stages = 0;
    for (int i = 0; i < P->nsrc; i++)
        for (int a = 0; a < P->src[i]->nin && !is_optimizer(P->src[i]->op); a++)
            if (P->src[i]->in[a] == w && P->stage[i] != P->stage[opt])
                stages |= (uint64_t)1 << P->stage[i];
    return stages;
}

/* Gradient g of v on its device sent to dev, for the optimizer there. */
static ir_value *gradient_to(pt *P, const ir_value *v, ir_value *g, int dev)
{
    int64_t id = pt_comm_id(P, ((uint64_t)3 << 62) | ((uint64_t)v->id << 16) | (uint64_t)dev);
    char buf[512];
    ir_node *n = pt_node(P, g->def->device, IR_OP_SEND, 1, &g, 1, "send", P->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", dev);
    pt_emit(P, n);
    snprintf(buf, sizeof buf, "%s.to%d", g->name, dev);
    n = pt_node(P, dev, IR_OP_RECV, 0, NULL, 1, buf, P->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", g->def->device);
    ir_set_ints(P->g, n, "shape", g->type.rank, g->type.dims);
    return pt_emit(P, n);
}

/* ZeRO-1 and 2's updated shards waiting to be gathered whole: a bucket, as
 * the gradients', so that a bucket of parameters costs one all_gather's
 * latency. */
typedef struct {
    const ir_node *opt[64];     /* the optimizers */
    ir_value **shard;           /* [j * dp + q]: optimizer j's updated shard on device q */
    int n;
    int64_t bytes;
} zero_updated;

/* One all_gather per device for the bucket's shards; each result becomes its
 * optimizer's updated parameter on that device. */
static void zero_gather_updated(pt *P, zero_updated *u)
{
    if (!u->n)
        return;
    int64_t group[IR_MAX_DEVICES];
    char buf[560];
    stage_group(P, 0, group);
    int64_t id = zero_id(P, u->opt[0]->in[0], 2); /* a parameter is in one bucket only */
    for (int q = 0; q < P->dp; q++) {
        int dev = (int)group[q];
        ir_value *in[64], *res[64];
        for (int j = 0; j < u->n; j++) {
            in[j] = u->shard[j * P->dp + q];
            snprintf(buf, sizeof buf, "%s.updated", pt_dsl_name(u->opt[j]->in[0]->name));
            res[j] = ir_value_new(P->g, buf, P->loc);
        }
        ir_node *c = zero_bucket(P, IR_OP_ALL_GATHER, dev, u->n, in, res, id, group);
        for (int j = 0; j < u->n; j++)
            *dev_at(P, dev, u->opt[j]->out[0]) = c->out[j];
    }
    u->n = 0;
    u->bytes = 0;
}

/* The optimizer of each parameter once per device that holds it, on the
 * reduced gradient: on its own stage's devices, and on those of every other
 * stage that reads the parameter, which get the gradient and update their
 * copy alike, so that the copies stay the same bits.  ZeRO's optimizers run on
 * shards; stages 1 and 2 then gather the updated shards a bucket at a time. */
static void run_optimizers(pt *P)
{
    int64_t cap = P->o->bucket_bytes > 0 ? P->o->bucket_bytes : PT_DEFAULT_BUCKET_BYTES;
    zero_updated u = {.shard = base_xcalloc((size_t)64 * P->dp, sizeof *u.shard)};
    for (int i = 0; i < P->nsrc; i++) {
        const ir_node *s = P->src[i];
        if (!is_optimizer(s->op))
            continue;
        P->loc = s->loc;
        if (zero_managed(P, s)) {
            for (int q = 0; q < P->dp; q++)
                u.shard[u.n * P->dp + q] = zero_optimizer(P, s, q);
            if (P->o->zero >= 3)
                continue;
            u.opt[u.n++] = s;
            u.bytes += value_bytes(P, s->in[0]);
            if (u.bytes >= cap || u.n == 64)
                zero_gather_updated(P, &u);
            continue;
        }
        uint64_t others = other_readers(P, i);
        for (int q = 0; q < P->dp; q++) {
            int home = q * P->pp + P->stage[i];
            ir_value *g = P->reduced[(size_t)home * P->nval + s->in[1]->id];
            IR_ASSERT(g);
            for (int st = -1; st < P->pp; st++) {
                if (st >= 0 && !(others >> st & 1))
                    continue;
                int dev = st < 0 ? home : q * P->pp + st;
                ir_value *in[8];
                for (int a = 0; a < s->nin; a++)
                    in[a] = a == 1 ? (dev == home ? g : gradient_to(P, s->in[1], g, dev))
                                   : value_of(P, s->in[a], -1, dev);
                ir_node *n = copy_node(P, s, -1 - dev, dev, in);
                pt_emit(P, n);
                for (int a = 0; a < s->nout; a++)
                    *dev_at(P, dev, s->out[a]) = n->out[a];
            }
        }
    }
    zero_gather_updated(P, &u);
    base_free(u.shard);
}

/* Value x (on its device) brought to device 0. */
static ir_value *to_device0(pt *P, const ir_value *v, ir_value *x)
{
    if (x->def->device == 0)
        return x;
    int64_t id = pt_comm_id(P, ((uint64_t)2 << 62) | (uint64_t)v->id);
    char buf[512];
    ir_node *n = pt_node(P, x->def->device, IR_OP_SEND, 1, &x, 1, "send", P->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", 0);
    pt_emit(P, n);
    snprintf(buf, sizeof buf, "%s.from%d", v->name, x->def->device);
    n = pt_node(P, 0, IR_OP_RECV, 0, NULL, 1, buf, P->loc);
    ir_set_int(P->g, n, "id", id);
    ir_set_int(P->g, n, "peer", x->def->device);
    ir_set_ints(P->g, n, "shape", x->type.rank, x->type.dims);
    return pt_emit(P, n);
}

/* The loss: the mean of the replicas' losses, on device 0. */
static void gather_loss(pt *P)
{
    const ir_value *L = P->g->loss;
    if (!L)
        return;
    P->loc = L->loc;
    int st = P->pos[L->id] >= 0 ? P->stage[P->pos[L->id]] : 0;
    ir_value **in = base_xcalloc((size_t)P->R, sizeof *in);
    ir_value **out = base_xcalloc((size_t)P->dp, sizeof *out);
    for (int r = 0; r < P->R; r++)
        in[r] = value_of(P, L, r, (r / P->m) * P->pp + st);
    reduce_sum(P, st, 1, in, out, L->name);
    ir_type scalar = {IR_F32, 0, {0}};
    ir_value *mean = out[0];
    if (P->R > 1)
        mean = pt_op2(P, st, IR_OP_DIV, out[0], pt_const(P, st, (double)P->R, &scalar, "replicas"),
                      "loss");
    P->g->loss = to_device0(P, L, mean);
    base_free(in);
    base_free(out);
    /* each device's copy of the seed named after the loss it is the gradient
       of now ("loss.grad", "d1.loss.grad"), as autodiff names a seed: what
       fp16's loss scaling multiplies (cg_const_scaled) */
    char base[512], buf[600];
    snprintf(base, sizeof base, "%s.grad", P->g->loss->name);
    for (int dev = 0; P->seed && dev < P->ndev; dev++) {
        ir_value *c = *dev_at(P, dev, P->seed);
        if (c)
            ir_rename(P->g, c, pt_name(buf, sizeof buf, -1 - dev, base));
    }
}

/* Each output on device 0: the replicas' slices of a batched output in batch
 * order (concatenated on a device, gathered between the groups), replica 0's
 * copy of any other. */
static void gather_outputs(pt *P)
{
    char buf[512];
    for (int i = 0; i < P->g->noutputs; i++) {
        ir_output *o = &P->g->outputs[i];
        const ir_value *v = o->value;
        P->loc = o->loc;
        int st = P->pos[v->id] >= 0 ? P->stage[P->pos[v->id]] : 0;
        const ir_type *t = &P->type[v->id];
        if (!P->batched[v->id] || t->rank == 0 || t->dims[0] != P->B || P->R == 1) {
            o->value = to_device0(P, v, value_of(P, v, 0, st));
            continue;
        }
        int64_t *group = base_xcalloc((size_t)P->dp, sizeof *group);
        stage_group(P, st, group);
        int64_t id = P->dp > 1 ? ++P->next_id : 0;
        ir_value *res = NULL;
        for (int q = 0; q < P->dp; q++) {
            int dev = (int)group[q];
            ir_value *parts[64];
            for (int k = 0; k < P->m; k++)
                parts[k] = value_of(P, v, q * P->m + k, dev);
            ir_value *x = parts[0];
            snprintf(buf, sizeof buf, "%s.all", v->name);
            if (P->m > 1) {
                ir_node *c = pt_node(P, dev, IR_OP_CONCAT, P->m, parts, 1, buf, P->loc);
                ir_set_int(P->g, c, "axis", 0);
                x = pt_emit(P, c);
            }
            if (P->dp > 1) {
                ir_node *c = pt_node(P, dev, IR_OP_ALL_GATHER, 1, &x, 1, buf, P->loc);
                ir_set_int(P->g, c, "id", id);
                ir_set_ints(P->g, c, "group", P->dp, group);
                ir_set_int(P->g, c, "axis", 0);
                x = pt_emit(P, c);
            }
            if (q == 0)
                res = x;
        }
        o->value = to_device0(P, v, res);
        base_free(group);
    }
}

/* Every update on every device that holds its target: an optimizer's result
 * there (on each stage that runs it, run_optimizers), or (batchnorm's running
 * statistics) the last replica's copy. */
static void place_updates(pt *P, const ir_update *src, int nsrc_updates)
{
    P->g->nupdates = 0;
    for (int i = 0; i < nsrc_updates; i++) {
        const ir_value *u = src[i].source;
        int pos = u->kind == IR_VALUE_NODE ? P->pos[u->id] : -1;
        int opt = pos >= 0 && is_optimizer(P->src[pos]->op);
        uint64_t stages = (uint64_t)1 << (pos >= 0 ? P->stage[pos] : 0);
        if (opt)
            stages |= other_readers(P, pos);
        for (int q = 0; q < P->dp; q++)
            for (int st = 0; st < P->pp; st++) {
                if (!(stages >> st & 1))
                    continue;
                int dev = q * P->pp + st;
                ir_value *x = pos >= 0 && P->batched[u->id] && !opt
                                  ? *map_at(P, q * P->m + P->m - 1, u)
                                  : value_of(P, u, -1, dev);
                ir_add_update_on(P->g, zero_target(P, src[i].target, dev), x, dev);
            }
    }
}

/* ---------------------------------------------------------------- the list */

/* Merges the devices' sequences into g's node list: repeatedly each device
 * runs ahead as far as it can, a node waiting for what it reads (its
 * operands' nodes, every node of a collective whose result it reads, the send
 * of its recv). */
void pt_merge(pt *P)
{
    ir_graph *g = P->g;
    int nv = g->nvalues;
    char *done = base_xcalloc((size_t)nv + 1, 1);         /* by the first result's id */
    int64_t nid = P->next_id + 1;
    int *coll_total = base_xcalloc((size_t)nid, sizeof *coll_total);
    int *coll_done = base_xcalloc((size_t)nid, sizeof *coll_done);
    char *sent = base_xcalloc((size_t)nid, 1);
    int total = 0;
    for (int d = 0; d < P->ndev; d++)
        for (int i = 0; i < P->seq[d].n; i++) {
            const ir_node *n = P->seq[d].nodes[i];
            if (ir_op_communicates(n->op) && n->op != IR_OP_SEND && n->op != IR_OP_RECV)
                coll_total[ir_attr_int(n, "id")]++;
            total++;
        }
    g->head = g->tail = NULL;
    g->nnodes = 0;
    int *at = base_xcalloc((size_t)P->ndev, sizeof *at);
    for (int progress = 1; progress;) {
        progress = 0;
        for (int d = 0; d < P->ndev; d++)
            for (; at[d] < P->seq[d].n; at[d]++) {
                ir_node *n = P->seq[d].nodes[at[d]];
                int ready = n->op != IR_OP_RECV || sent[ir_attr_int(n, "id")];
                for (int k = 0; k < n->nin && ready; k++) {
                    const ir_node *p = n->in[k]->def;
                    if (n->in[k]->kind != IR_VALUE_NODE)
                        continue;
                    ready = done[p->out[0]->id];
                    if (ready && ir_op_communicates(p->op) && p->op != IR_OP_SEND &&
                        p->op != IR_OP_RECV) {
                        int64_t id = ir_attr_int(p, "id");
                        ready = coll_done[id] == coll_total[id];
                    }
                }
                if (!ready)
                    break;
                ir_append(g, n);
                done[n->out[0]->id] = 1;
                if (n->op == IR_OP_SEND)
                    sent[ir_attr_int(n, "id")] = 1;
                else if (ir_op_communicates(n->op) && n->op != IR_OP_RECV)
                    coll_done[ir_attr_int(n, "id")]++;
                progress = 1;
            }
    }
    IR_ASSERT(g->nnodes == total); /* else the sequences wait on each other: a bug */
    base_free(at);
    base_free(done);
    base_free(coll_total);
    base_free(coll_done);
    base_free(sent);
}

/* Each device's receives that follow a send of its own moved up to right
 * after that send (a recv reads nothing).  On a GPU consecutive sends and
 * receives are one NCCL group (codegen/p2p.c), so a 1F1B stage posts the
 * receive of its next activation with the send of a gradient, as
 * Megatron-LM pairs them, and the crossing sends of neighbouring stages
 * cannot wait for each other for ever.  The order of every device's
 * communication is unchanged; such a receive's buffer lives a few nodes
 * longer.  Receives after a receive or a collective stay (an inference
 * pipeline's last stage would hold every microbatch's at once). */
static void post_receives_early(pt *P)
{
    for (int d = 0; d < P->ndev; d++) {
        ir_node **s = P->seq[d].nodes;
        for (int i = 0; i < P->seq[d].n; i++) {
            int j = i;
            if (s[i]->op != IR_OP_RECV)
                continue;
            while (j > 0 && !ir_op_communicates(s[j - 1]->op))
                j--;
            if (j == 0 || j == i || s[j - 1]->op != IR_OP_SEND)
                continue;
            ir_node *r = s[i];
            memmove(&s[j + 1], &s[j], (size_t)(i - j) * sizeof *s);
            s[j] = r;
        }
    }
}

/* ---------------------------------------------------------------- the pass */

/* The data-parallel schedule: every per-replica node in source order, for all
 * of a device's replicas at once. */
static void data_schedule(pt *P)
{
    P->sched[0] = base_xcalloc((size_t)P->nsrc, sizeof **P->sched);
    for (int i = 0; i < P->nsrc; i++)
        if (P->batched[P->src[i]->out[0]->id] && !is_optimizer(P->src[i]->op))
            P->sched[0][P->nsched[0]++] = (pt_task){i, -1};
}

/* The layout of o's strategy: groups, stages, replicas.  Returns 0, or -1
 * after reporting a request that cannot be met. */
static int layout(pt *P)
{
    const pt_options *o = P->o;
    int n = o->devices, acc = o->accumulate > 1 ? o->accumulate : 1;
    if (acc > 1 && o->deterministic) {
        diag_error(P->d, (ir_loc){0}, "--accumulate does not combine with deterministic mode, "
                   "whose micro-shards are accumulated already (--micro-shards sets them)");
        return -1;
    }
    if (o->zero && (o->strategy != PT_DATA || o->deterministic)) {
        diag_error(P->d, (ir_loc){0}, "ZeRO (--strategy zero%d) shards data parallelism, not %s",
                   o->zero, o->deterministic ? "its deterministic mode" : "this strategy");
        return -1;
    }
    switch (o->strategy) {
    case PT_DATA:
        P->dp = n, P->pp = 1, P->m = acc;
        if (o->deterministic) {
            int M = o->micro_shards ? o->micro_shards : 8;
            while (!o->micro_shards && M > 1 && P->B % M)
                M /= 2;
            if (M % n) {
                diag_error(P->d, (ir_loc){0}, "deterministic mode cuts the batch into %d "
                           "micro-shards, which %d devices do not share evenly "
                           "(--micro-shards sets their number)", M, n);
                return -1;
            }
            P->m = M / n;
        }
        break;
    case PT_PIPELINE: case PT_HYBRID:
        P->dp = o->strategy == PT_HYBRID ? o->dp : 1;
        P->pp = o->strategy == PT_HYBRID ? o->pp : n;
        P->m = (o->microbatches ? o->microbatches : 2 * P->pp) * acc;
        if (P->dp * P->pp != n) {
            diag_error(P->d, (ir_loc){0}, "hybrid: dp=%d x pp=%d is %d devices, not %d", P->dp,
                       P->pp, P->dp * P->pp, n);
            return -1;
        }
        if (P->pp > PT_MAX_STAGES) {
            diag_error(P->d, (ir_loc){0}, "a pipeline has at most %d stages, not %d",
                       PT_MAX_STAGES, P->pp);
            return -1;
        }
        if (o->deterministic || o->sync_bn) {
            diag_error(P->d, (ir_loc){0}, "%s applies to --strategy data only",
                       o->deterministic ? "deterministic mode" : "--sync-bn");
            return -1;
        }
        break;
    default:
        diag_error(P->d, (ir_loc){0}, "internal error: strategy %d is not a replica layout",
                   (int)o->strategy);
        return -1;
    }
    P->R = P->dp * P->m;
    P->ndev = n;
    if (P->m > 64) {
        diag_error(P->d, (ir_loc){0}, "at most 64 microbatches or micro-shards per device, not %d%s",
                   P->m, acc > 1 ? " (--accumulate multiplies the microbatches)" : "");
        return -1;
    }
    if (P->B % P->R) {
        diag_error(P->d, (ir_loc){0}, "the batch of %lld does not split into %d equal parts "
                   "(%d device%s x %d %s): choose a batch that %d divides", (long long)P->B, P->R,
                   P->dp, P->dp == 1 ? "" : "s", P->m,
                   o->strategy == PT_DATA && acc == 1 ? "micro-shards" : "microbatches", P->R);
        return -1;
    }
    P->b = P->B / P->R;
    return 0;
}

static void pt_free(pt *P)
{
    for (int d = 0; d < P->ndev; d++)
        base_free(P->seq ? P->seq[d].nodes : NULL);
    for (int s = 0; s < P->pp && P->sched; s++)
        base_free(P->sched[s]);
    base_free(P->sched);
    base_free(P->nsched);
    base_free(P->seq);
    base_free(P->src);
    base_free(P->type);
    base_free(P->batched);
    base_free(P->pos);
    base_free(P->stage);
    base_free(P->backward);
    base_free(P->map);
    base_free(P->per_dev);
    base_free(P->taken);
    base_free(P->reduced);
    base_free(P->keys);
    base_free(P->key_ids);
    base_free(P->recv_by_id);
    base_free(P->sends);
    base_free(P->zsharded);
    base_free(P->zshard);
    base_free(P->gathered);
}

int pt_partition(ir_graph *g, const pt_options *o, diag *d)
{
    if (!pt_partitions(o))
        return 0;
    ir_for_each_node(g, n)
        if (n->device || n->group) {
            diag_error(d, n->loc, "the partition pass takes a single-device program before "
                       "fusion");
            return -1;
        }
    if (o->strategy == PT_TENSOR && (o->accumulate > 1 || o->zero)) {
        diag_error(d, (ir_loc){0}, "%s does not apply to --strategy tensor",
                   o->zero ? "ZeRO" : "--accumulate");
        return -1;
    }
    if (o->strategy == PT_TENSOR)
        return pt_tensor(g, o, d);
    /* the replicas' losses are averaged: right for a mean over the batch of
       each example's loss, which cross_entropy, nll_loss and mse are; a loss
       made of other ops (a sum over the batch, mean(logits)) has no such rule
       here */
    const ir_node *L = g->loss ? g->loss->def : NULL;
    if (L && L->op != IR_OP_CROSS_ENTROPY && L->op != IR_OP_NLL_LOSS && L->op != IR_OP_MSE) {
        diag_error(d, g->loss->loc, "the loss '%s' is %s, not cross_entropy, nll_loss or mse: "
                   "splitting the batch between devices (data parallelism, a pipeline's "
                   "microbatches) averages their losses, which is right for those alone; use "
                   "one device or --strategy tensor", g->loss->name, ir_ops[L->op].name);
        return -1;
    }
    /* nor is it with labels ignored, each replica's mean being over its own
       count: a class id as ignore_index is refused here, any other value that
       a label takes is refused when it does (split, exec.c's rt_ce_begin) */
    if (L && (L->op == IR_OP_CROSS_ENTROPY || L->op == IR_OP_NLL_LOSS) &&
        ir_attr_int(L, "ignore_index") >= 0 &&
        ir_attr_int(L, "ignore_index") < L->in[0]->type.dims[1]) {
        diag_error(d, g->loss->loc, "the loss '%s' ignores class %lld: splitting the batch "
                   "between devices (data parallelism, a pipeline's microbatches) averages "
                   "the parts' means, each over its own count of labels not ignored, which is "
                   "not the batch's mean; use one device or --strategy tensor", g->loss->name,
                   (long long)ir_attr_int(L, "ignore_index"));
        return -1;
    }
    pt P = {.g = g, .o = o, .d = d};
    int rc = -1;
    P.nval = g->nvalues;
    P.nsrc = g->nnodes;
    P.src = base_xcalloc((size_t)P.nsrc, sizeof *P.src);
    P.type = base_xcalloc((size_t)P.nval, sizeof *P.type);
    P.pos = base_xcalloc((size_t)P.nval, sizeof *P.pos);
    int k = 0;
    for (int i = 0; i < P.nval; i++)
        P.pos[i] = -1;
    ir_for_each_node(g, n) {
        for (int j = 0; j < n->nout; j++)
            P.pos[n->out[j]->id] = k;
        P.src[k++] = n;
    }
    for (int i = 0; i < g->ninputs; i++)
        P.type[g->inputs[i]->id] = g->inputs[i]->type;
    for (int i = 0; i < g->nparams; i++)
        P.type[g->params[i]->id] = g->params[i]->type;
    for (int i = 0; i < P.nsrc; i++)
        for (int j = 0; j < P.src[i]->nout; j++)
            P.type[P.src[i]->out[j]->id] = P.src[i]->out[j]->type;
    if (classify(&P) != 0 || layout(&P) != 0)
        goto done;

    /* the loss gradient's seed, and what depends on it: the backward pass */
    if (g->loss) {
        char name[512];
        snprintf(name, sizeof name, "%s.grad", g->loss->name);
        const ir_value *s = ir_find_value(g, name);
        P.seed = s && s->kind == IR_VALUE_NODE && s->def && s->def->op == IR_OP_CONST ? s : NULL;
    }
    P.backward = base_xcalloc((size_t)P.nsrc, sizeof *P.backward);
    char *dep = base_xcalloc((size_t)P.nval, 1);
    for (int i = 0; i < P.nsrc; i++) {
        const ir_node *n = P.src[i];
        int b = P.seed && n->out[0] == P.seed;
        for (int j = 0; j < n->nin; j++)
            b |= dep[n->in[j]->id];
        P.backward[i] = b;
        for (int j = 0; j < n->nout; j++)
            dep[n->out[j]->id] = (char)b;
    }
    /* a node that no gradient reaches but that the backward pass alone reads
       (autodiff's transpose of a saved softmax, for its matmul's gradient) is
       part of it too: it runs with its layer's backward, where its operands
       are, and not after the loss on the last stage, which would have every
       stage send it its activations (dep: read by the forward pass, or an
       output, 2: by the backward pass alone) */
    memset(dep, 0, (size_t)P.nval);
    for (int i = 0; i < g->noutputs; i++)
        dep[g->outputs[i].value->id] = 1;
    if (g->loss)
        dep[g->loss->id] = 1;
    for (int i = 0; i < g->nupdates; i++)
        dep[g->updates[i].source->id] = 1;
    for (int i = P.nsrc - 1; i >= 0; i--) {
        const ir_node *n = P.src[i];
        int fwd_read = 0, bwd_read = 0;
        for (int j = 0; j < n->nout; j++)
            fwd_read |= dep[n->out[j]->id] == 1, bwd_read |= dep[n->out[j]->id] == 2;
        if (!P.backward[i] && !fwd_read && bwd_read)
            P.backward[i] = 1;
        for (int j = 0; j < n->nin; j++)
            if (dep[n->in[j]->id] != 1)
                dep[n->in[j]->id] = P.backward[i] ? 2 : 1;
    }
    base_free(dep);

    P.stage = base_xcalloc((size_t)P.nsrc, sizeof *P.stage);
    P.sched = base_xcalloc((size_t)P.pp, sizeof *P.sched);
    P.nsched = base_xcalloc((size_t)P.pp, sizeof *P.nsched);
    if (P.pp > 1 || o->strategy != PT_DATA || o->accumulate > 1) {
        /* accumulation is a pipeline of one stage: forward and backward of each
           microbatch in turn, so that only one microbatch's activations live */
        if (pt_pipeline_stages(&P) != 0)
            goto done;
        pt_pipeline_schedule(&P);
    } else {
        data_schedule(&P);
    }
    /* values read on another stage than their own: sent as they are made */
    P.sends = base_xcalloc((size_t)P.nval, sizeof *P.sends);
    for (int i = 0; i < P.nsrc; i++)
        for (int j = 0; j < P.src[i]->nin; j++) {
            const ir_value *v = P.src[i]->in[j];
            int p = P.pos[v->id];
            if (p >= 0 && P.batched[v->id] && P.stage[p] != P.stage[i])
                P.sends[v->id] |= (uint64_t)1 << P.stage[i];
        }

    P.seq = base_xcalloc((size_t)P.ndev, sizeof *P.seq);
    P.map = base_xcalloc((size_t)P.R * P.nval, sizeof *P.map);
    P.per_dev = base_xcalloc((size_t)P.ndev * P.nval, sizeof *P.per_dev);
    P.reduced = base_xcalloc((size_t)P.ndev * P.nval, sizeof *P.reduced);
    P.taken = base_xcalloc((size_t)P.nval, 1);
    if (o->zero && P.dp > 1) {
        P.zsharded = base_xcalloc((size_t)P.nval, 1);
        P.zshard = base_xcalloc((size_t)P.ndev * P.nval, sizeof *P.zshard);
        P.gathered = base_xcalloc((size_t)2 * P.ndev * P.nval, sizeof *P.gathered);
        zero_mark(&P);
    }
    char *is_grad = base_xcalloc((size_t)P.nval, 1);
    for (int i = 0; i < P.nsrc; i++)
        if (is_optimizer(P.src[i]->op))
            is_grad[P.src[i]->in[1]->id] = 1;
    bucket *bk = base_xcalloc((size_t)P.pp, sizeof *bk);
    for (int s = 0; s < P.pp; s++)
        bk[s].grads = base_xcalloc((size_t)P.nval, sizeof *bk[s].grads);
    /* the stages' tasks, each as soon as what it reads from other stages is there */
    int chain = o->strategy != PT_DATA || o->accumulate > 1; /* microbatches in turn */
    int *at = base_xcalloc((size_t)P.pp, sizeof *at);
    int *ahead = base_xcalloc((size_t)P.pp, sizeof *ahead);
    for (int progress = 1; progress && !P.failed;) {
        progress = 0;
        for (int s = 0; s < P.pp && !P.failed; s++) {
            for (; at[s] < P.nsched[s] && task_ready(&P, P.sched[s][at[s]]) && !P.failed; at[s]++) {
                pt_task task = P.sched[s][at[s]];
                if (P.zsharded && o->zero >= 3)
                    zero_prefetch(&P, s, at[s], &ahead[s]);
                run_task(&P, task.node, task.k, chain);
                if (task.k < 0 || task.k == P.m - 1)
                    gradients_ready(&P, task.node, bk, is_grad);
                progress = 1;
            }
            if (at[s] == P.nsched[s] && progress)
                flush(&P, s, &bk[s]);
        }
    }
    for (int s = 0; s < P.pp && !P.failed; s++)
        IR_ASSERT(at[s] == P.nsched[s]); /* else the schedules wait on each other: a bug */
    base_free(at);
    base_free(ahead);
    for (int s = 0; s < P.pp; s++)
        base_free(bk[s].grads);
    base_free(bk);
    base_free(is_grad);
    if (P.failed)
        goto done;
    int nupd = g->nupdates;
    ir_update *updates = base_xcalloc((size_t)nupd, sizeof *updates);
    if (nupd) /* an inference graph has no update list to copy from */
        memcpy(updates, g->updates, (size_t)nupd * sizeof *updates);
    run_optimizers(&P);
    gather_loss(&P);
    gather_outputs(&P);
    place_updates(&P, updates, nupd);
    base_free(updates);
    if (P.zsharded)
        zero_params(&P);
    post_receives_early(&P);
    pt_merge(&P);
    rc = g->nnodes;
done:
    pt_free(&P);
    return rc;
}
