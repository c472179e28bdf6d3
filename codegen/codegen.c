/* Code generation: an optimized graph and its memory plan in, a program of
 * steps per device and the CUDA C of its kernels out (codegen.h,
 * docs/codegen.md).
 *
 * Expects: a verified graph, fused or not (passes/fuse.c), its nodes on their
 * devices (the partition pass), and mp_plan_graph's plan of it.
 *
 *   1. Storage: every value's dtype as stored.  At fp32 and tf32 floats are
 *      float.  At bf16 and fp16 activations are 16-bit and the rest float:
 *      inputs, parameters and their state, weights computed once, scalars,
 *      outputs, the loss, update sources, statistics, parameter gradients and
 *      what flows into those through data movement, sums and communication.
 *      Values sharing a buffer in place, a reshape's two sides and the two
 *      ends of a transfer get one dtype.
 *   2. Per device, its regions: the arena at the plan's offsets; parameters
 *      (those it reads or updates, then the weights it computes once, its
 *      state, and the 16-bit copies of weights that library calls read);
 *      inputs (those it reads).
 *   3. Per device, the init steps: the nodes computing weights alone, in list
 *      order.  Then the steps: the other nodes in list order, a fused node's
 *      members as one unit.  A unit is a library call with the epilogue it
 *      takes (library.c), then kernels (kernels.c): each takes map ops, at most
 *      one other op (a reduction, a normalization, a loss...) and map ops on
 *      its result.  A kernel that would write bytes it reads at other elements
 *      -- the plan lets a result reuse the bytes of an operand dead before it,
 *      but a fused kernel reads its operands while it writes -- is split until
 *      none does: fusion never changes what the plan proved.  Collectives and
 *      transfers become NCCL calls; a reshape reads its operand's bytes where
 *      no other write lands on them while it is live, else a copy; a constant
 *      is a literal in the kernels that read it.
 *   4. The updates: in place where nothing reads the target after the node
 *      that computes its new value (that node then writes it there); else
 *      copies at the end of the steps; at fp16 copies unless a gradient
 *      overflowed, and the loss scale's update.
 *   5. Waits: for each step the latest step of the other stream (compute or
 *      communication) whose memory it touches.
 *   6. Modules: each device's kernels, in first use, in translation units of
 *      at most kernels_per_module; a kernel whose text another device has is
 *      shared (the replicas of data parallelism share every kernel).
 *
 * Guarantees: every step reads only what earlier steps (or the caller)
 * wrote; the arena holds node results at exactly the plan's offsets; the
 * kernels compute what runtime/cpu/exec.c and grad.c compute, in float. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ALIGN 256
#define KERNELS_PER_MODULE 48

static int64_t align_up(int64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

cg_options cg_options_default(void)
{
    cg_options o;
    memset(&o, 0, sizeof o);
    o.precision = PREC_FP32;
    return o;
}

static const char *const conv_names[CG_CONV_NIMPLS] = {"cudnn", "igemm", "cudnn-nhwc"};

const char *cg_conv_name(cg_conv_impl c)
{
    return c >= CG_CONV_CUDNN && c < CG_CONV_NIMPLS ? conv_names[c] : "?";
}

static const char *const layout_names[] = {"auto", "nchw", "nhwc"};

const char *cg_layout_name(cg_layout l)
{
    return (unsigned)l < 3 ? layout_names[l] : "?";
}

int cg_layout_lookup(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, layout_names[i]) == 0)
            return i;
    return -1;
}

int cg_conv_lookup(const char *name)
{
    for (int i = 0; name && i < CG_CONV_NIMPLS; i++)
        if (strcmp(name, conv_names[i]) == 0)
            return i;
    return -1;
}

int cg_is_conv(const ir_node *n)
{
    return n->op == IR_OP_CONV2D || n->op == IR_OP_CONV2D_GRAD_INPUT ||
           n->op == IR_OP_CONV2D_GRAD_WEIGHT;
}

cg_conv_impl cg_conv_of(const cg_options *o, const ir_node *n)
{
    if (o->conv_choice && cg_is_conv(n) && o->conv_choice[n->out[0]->id] >= 0)
        return (cg_conv_impl)o->conv_choice[n->out[0]->id];
    return o->conv;
}


const char *cg_name(const ir_value *v) { return pt_dsl_name(v->name); }

void cg_fail(cg_gen *G, const ir_node *n, const char *fmt, ...)
{
    cg_sb b = {0};
    va_list ap;
    va_start(ap, fmt);
    cg_sb_vprintf(&b, fmt, ap);
    va_end(ap);
    diag_error(G->d, n ? n->loc : (ir_loc){0}, "codegen: %s", b.s);
    cg_sb_free(&b);
    G->failed = 1;
}

/* ---------------------------------------------------------------- 1. storage */

int cg_find(int *parent, int x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

static void unite(int *parent, int a, int b)
{
    a = cg_find(parent, a), b = cg_find(parent, b);
    if (a != b)
        parent[a] = b;
}

/* Results that stay float at bf16 and fp16, whatever reads them. */
static int keeps_f32(const ir_node *n, int k)
{
    switch (n->op) {
    case IR_OP_BATCHNORM_TRAIN: case IR_OP_BATCHNORM_GRAD: case IR_OP_LAYERNORM_GRAD:
    case IR_OP_ATTENTION:
        return k > 0;              /* statistics (attention's lse), parameter gradients */
    case IR_OP_SGD: case IR_OP_ADAM: case IR_OP_DENSE_GRAD_WEIGHT: case IR_OP_CONV2D_GRAD_WEIGHT:
    case IR_OP_EMBEDDING_GRAD: case IR_OP_SUM_TO: case IR_OP_BN_FOLD_SCALE:
    case IR_OP_CROSS_ENTROPY: case IR_OP_MSE: case IR_OP_NLL_LOSS:
        return 1;
    default:
        return n->out[k]->type.rank == 0;
    }
}

/* Ops that pass their operands' values on: a float result makes them float. */
static int passes_through(ir_op op)
{
    switch (op) {
    case IR_OP_RESHAPE: case IR_OP_SLICE: case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_TRANSPOSE:
    case IR_OP_BROADCAST_TO: case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV:
    case IR_OP_NEG: case IR_OP_ALL_REDUCE: case IR_OP_ALL_GATHER: case IR_OP_REDUCE_SCATTER:
    case IR_OP_BROADCAST:
        return 1;
    default:
        return 0;
    }
}

/* Whether v is a convolution's filter gradient that only optimizer steps
 * read (no sum, no communication): kept as the 16-bit call writes it (exact:
 * float of it is the same value), so no cast follows the call and the step
 * reads it converting. */
static int lowp_filter_grad(const cg_gen *G, const ir_value *v)
{
    return v->kind == IR_VALUE_NODE && v->def->op == IR_OP_CONV2D_GRAD_WEIGHT &&
           !G->external[v->id] && cg_only_optimizers(G, v);
}

int cg_only_optimizers(const cg_gen *G, const ir_value *v)
{
    if (G->rstart[v->id] == G->rstart[v->id + 1])
        return 0;
    for (int r = G->rstart[v->id]; r < G->rstart[v->id + 1]; r++) {
        const ir_node *m = G->node_at[G->readers[r]];
        if ((m->op != IR_OP_SGD && m->op != IR_OP_ADAM) || m->in[1] != v || m->in[0] == v)
            return 0;
    }
    return 1;
}

static void classify(cg_gen *G)
{
    const ir_graph *g = G->g;
    int nv = G->nvalues;
    ir_dtype half = G->o.precision == PREC_BF16 ? IR_BF16 : IR_F16;
    int lowp = G->o.precision == PREC_BF16 || G->o.precision == PREC_FP16;
    unsigned char *keep = base_xcalloc((size_t)nv + 1, 1);
    int *parent = base_xmalloc(((size_t)nv + 1) * sizeof *parent);
    for (int i = 0; i < nv; i++)
        parent[i] = i;
    for (int i = 0; i < g->ninputs; i++)
        keep[g->inputs[i]->id] = 1;
    for (int i = 0; i < g->nparams; i++)
        keep[g->params[i]->id] = 1;
    for (int i = 0; i < nv; i++)
        keep[i] |= G->external[i] | G->weight[i];
    ir_for_each_node(g, n) {
        for (int k = 0; k < n->nout; k++)
            keep[n->out[k]->id] |= (unsigned char)(keeps_f32(n, k) &&
                                                   !lowp_filter_grad(G, n->out[k]));
        if (n->op == IR_OP_SGD || n->op == IR_OP_ADAM)
            for (int k = 0; k < n->nin; k++)
                keep[n->in[k]->id] |= (unsigned char)!(k == 1 && lowp_filter_grad(G, n->in[k]));
        /* one buffer in place: one dtype */
        int k = n->nout == 1 ? mp_inplace_operand(n) : -1;
        if (k >= 0 && n->in[k]->kind == IR_VALUE_NODE &&
            G->mp->offset_by_id[n->in[k]->id] >= 0 &&
            G->mp->offset_by_id[n->in[k]->id] == G->mp->offset_by_id[n->out[0]->id] &&
            n->in[k]->def->device == n->device)
            unite(parent, n->in[k]->id, n->out[0]->id);
        if (n->op == IR_OP_RESHAPE || n->op == IR_OP_DROPOUT)
            unite(parent, n->in[0]->id, n->out[0]->id);
        if (n->op == IR_OP_ALL_REDUCE || n->op == IR_OP_BROADCAST || n->op == IR_OP_ALL_GATHER ||
            n->op == IR_OP_REDUCE_SCATTER)
            for (int j = 0; j < n->nin; j++)
                unite(parent, n->in[j]->id, n->out[j]->id);
    }
    /* the ends of one collective or transfer, on every device */
    ir_for_each_node(g, n) {
        if (!ir_op_communicates(n->op))
            continue;
        int64_t id = ir_attr_int(n, "id");
        for (const ir_node *m = n->next; m; m = m->next)
            if (ir_op_communicates(m->op) && ir_attr_int(m, "id") == id) {
                if (m->op == n->op && m->op != IR_OP_SEND && m->op != IR_OP_RECV)
                    for (int j = 0; j < n->nout && j < m->nout; j++)
                        unite(parent, n->out[j]->id, m->out[j]->id);
                if (n->op == IR_OP_SEND && m->op == IR_OP_RECV)
                    unite(parent, n->in[0]->id, m->out[0]->id);
                if (n->op == IR_OP_RECV && m->op == IR_OP_SEND)
                    unite(parent, m->in[0]->id, n->out[0]->id);
            }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < nv; i++)
            if (keep[i] && !keep[cg_find(parent, i)])
                keep[cg_find(parent, i)] = 1, changed = 1;
        for (int i = 0; i < nv; i++)
            if (!keep[i] && keep[cg_find(parent, i)])
                keep[i] = 1, changed = 1;
        for (const ir_node *n = g->tail; n; n = n->prev) {
            if (!passes_through(n->op))
                continue;
            int any = 0;
            for (int k = 0; k < n->nout; k++)
                any |= keep[n->out[k]->id];
            for (int k = 0; any && k < n->nin; k++)
                if (!keep[n->in[k]->id])
                    keep[n->in[k]->id] = 1, changed = 1;
        }
    }
    ir_for_each_node(g, n)
        for (int k = 0; k < n->nout; k++) {
            const ir_value *v = n->out[k];
            ir_dtype t = v->type.dtype;
            G->dtype[v->id] = !ir_is_float(t) ? t : lowp && !keep[v->id] ? half : IR_F32;
        }
    for (int i = 0; i < g->ninputs; i++)
        G->dtype[g->inputs[i]->id] =
            ir_is_float(g->inputs[i]->type.dtype) ? IR_F32 : g->inputs[i]->type.dtype;
    for (int i = 0; i < g->nparams; i++)
        G->dtype[g->params[i]->id] =
            ir_is_float(g->params[i]->type.dtype) ? IR_F32 : g->params[i]->type.dtype;
    base_free(keep);
    base_free(parent);
}

/* ---------------------------------------------------------------- 2. regions */

static int add_value(cg_gen *G, cg_value_kind kind, const ir_value *v, const char *name,
                     cg_region r, int64_t *top, ir_dtype dt, int64_t numel)
{
    cg_device *D = G->D;
    cg_value *x = &D->values[D->nvalues];
    x->kind = kind;
    x->value = v;
    x->name = name;
    x->dtype = dt;
    x->numel = numel;
    x->bytes = numel * (int64_t)ir_dtype_size(dt);
    x->at.region = r;
    if (top) {
        x->at.offset = *top;
        /* as mp_value_bytes: the plan's figures and these agree for float */
        *top += align_up(numel * (int64_t)(dt == IR_I64 ? 8 : dt == IR_U8 ? 1 : 4));
    }
    x->nhwc = kind == CG_VALUE_NODE && G->nhwc[v->id];
    if (v && kind != CG_VALUE_SHADOW)
        D->slot_by_id[v->id] = D->nvalues;
    return D->nvalues++;
}

static void layout(cg_gen *G)
{
    const ir_graph *g = G->g;
    cg_device *D = G->D;
    int d = G->dev, single = G->p->ndevices == 1;
    unsigned char *held = base_xcalloc((size_t)G->nvalues + 1, 1);
    ir_for_each_node(g, n)
        if (n->device == d)
            for (int i = 0; i < n->nin; i++)
                held[n->in[i]->id] = 1;
    for (int i = 0; i < g->nupdates; i++)
        if (g->updates[i].device == d)
            held[g->updates[i].target->id] = 1;
    /* room for every value three times (shadows) and the state */
    D->values = cg_palloc(G->p, (3 * (size_t)G->nvalues + 8) * sizeof *D->values);
    D->slot_by_id = cg_palloc(G->p, ((size_t)G->nvalues + 1) * sizeof *D->slot_by_id);
    for (int i = 0; i < G->nvalues; i++)
        D->slot_by_id[i] = -1;
    int64_t top = 0;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (single || held[v->id])
            add_value(G, CG_VALUE_PARAM, v, v->name, CG_PARAMS, &top, G->dtype[v->id],
                      ir_type_numel(&v->type));
    }
    ir_for_each_node(g, n)
        for (int k = 0; k < n->nout && n->device == d; k++)
            if (G->weight[n->out[k]->id])
                add_value(G, CG_VALUE_WEIGHT, n->out[k], n->out[k]->name, CG_PARAMS, &top,
                          G->dtype[n->out[k]->id], ir_type_numel(&n->out[k]->type));
    int s = add_value(G, CG_VALUE_STATE, NULL, "gnc.status", CG_PARAMS, &top, IR_U8,
                      (int64_t)sizeof(cg_status));
    D->status = D->values[s].at;
    D->loss_scale.region = CG_PARAMS;
    D->loss_scale.offset = -1;
    if (G->p->loss_scale.enabled) {
        s = add_value(G, CG_VALUE_STATE, NULL, "gnc.loss_scale", CG_PARAMS, &top, IR_U8, 16);
        D->loss_scale = D->values[s].at;
    }
    D->region_bytes[CG_PARAMS] = top;
    top = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (single || held[v->id])
            add_value(G, CG_VALUE_INPUT, v, v->name, CG_INPUTS, &top, G->dtype[v->id],
                      ir_type_numel(&v->type));
    }
    D->region_bytes[CG_INPUTS] = top;
    ir_for_each_node(g, n)
        for (int k = 0; k < n->nout && n->device == d; k++) {
            const ir_value *v = n->out[k];
            int64_t off = G->mp->offset_by_id[v->id];
            if (G->weight[v->id] || off < 0)
                continue;
            int i = add_value(G, CG_VALUE_NODE, v, v->name, CG_ARENA, NULL, G->dtype[v->id],
                              ir_type_numel(&v->type));
            D->values[i].at.offset = off;
        }
    D->region_bytes[CG_ARENA] = G->mp->device_bytes[d];
    base_free(held);
}

cg_ref cg_ref_of(cg_gen *G, const ir_value *v)
{
    if (G->aliased[v->id])
        return G->alias[v->id];
    int s = G->D->slot_by_id[v->id];
    if (s < 0) {
        cg_fail(G, v->def, "device %d holds no place for %%%s", G->dev, v->name);
        return (cg_ref){CG_WORKSPACE, 0};
    }
    return G->D->values[s].at;
}

ir_dtype cg_dtype_of(cg_gen *G, const ir_value *v) { return G->dtype[v->id]; }

/* A copy of parameter (or weight, or input) v for a library call, in the
 * params region and made once per list (every step: the weights and inputs
 * change): as dt (a 16-bit copy, "NAME.bf16"), or with krsc a filter
 * channels-last as dt ("NAME.krsc", "NAME.bf16.krsc": KCRS to KRSC and
 * converted, in one transpose).  The step that makes it belongs to node by:
 * a filter's to the first convolution that reads it, so that --conv auto
 * times it there. */
static cg_ref shadow(cg_gen *G, const ir_value *v, ir_dtype dt, int krsc, const ir_node *by)
{
    cg_device *D = G->D;
    const char *name = cg_pprintf(G->p, "%s%s%s", v->name,
                                  dt == IR_BF16 ? ".bf16" : dt == IR_F16 ? ".fp16" : "",
                                  krsc ? ".krsc" : "");
    int slot = -1;
    for (int i = 0; i < D->nvalues; i++)
        if (D->values[i].kind == CG_VALUE_SHADOW && D->values[i].value == v &&
            !strcmp(D->values[i].name, name))
            slot = i;
    if (slot < 0) {
        int64_t top = D->region_bytes[CG_PARAMS];
        slot = add_value(G, CG_VALUE_SHADOW, v, name, CG_PARAMS, NULL, dt,
                         ir_type_numel(&v->type));
        D->values[slot].at.offset = top;
        D->region_bytes[CG_PARAMS] = top + align_up(D->values[slot].bytes);
    }
    unsigned char made = (unsigned char)(krsc ? 2 : 1);
    if (!(G->shadow_fresh[v->id] & made)) {
        G->shadow_fresh[v->id] |= made;
        const char *what = cg_pprintf(G->p, "%%%s%s as %s", v->name, krsc ? " channels-last" : "",
                                      ir_dtype_name(dt));
        const int64_t *d = v->type.dims;
        if (krsc && (G->init || dt == G->dtype[v->id])) { /* a copy of its own: timed with
                                                              its first reader (--conv auto) */
            cg_emit_transpose(G, by, what, cg_ref_of(G, v), G->dtype[v->id], D->values[slot].at,
                              dt, d[0], d[1], d[2] * d[3]);
        } else if (G->init) {
            cg_emit_cast(G, by, what, cg_ref_of(G, v), G->dtype[v->id], D->values[slot].at, dt,
                         ir_type_numel(&v->type));
        } else { /* with the run's other shadows, in one launch before the first reader:
                    a filter permuted as it is converted to 16 bits, no pass of its own */
            if (!G->ncasts)
                G->casts_at = G->nlist;
            G->casts = base_xrealloc(G->casts, (size_t)(G->ncasts + 1) * sizeof *G->casts);
            G->casts[G->ncasts++] = (cg_cast){cg_ref_of(G, v), D->values[slot].at,
                                              G->dtype[v->id], dt, ir_type_numel(&v->type),
                                              krsc ? CG_PERM_KRSC : CG_PERM_NONE,
                                              krsc ? d[1] : 0, krsc ? d[2] * d[3] : 0};
        }
    }
    return D->values[slot].at;
}

cg_ref cg_grad_stage(cg_gen *G, const ir_value *v, ir_dtype dt, int krsc)
{
    cg_device *D = G->D;
    int64_t top = D->region_bytes[CG_PARAMS];
    int slot = add_value(G, CG_VALUE_SHADOW, v,
                         cg_pprintf(G->p, "%s.%s", v->name, dt == IR_BF16 ? "bf16" : "fp16"),
                         CG_PARAMS, NULL, dt, ir_type_numel(&v->type));
    D->values[slot].at.offset = top;
    D->region_bytes[CG_PARAMS] = top + align_up(D->values[slot].bytes);
    G->gcasts = base_xrealloc(G->gcasts, (size_t)(G->ngcasts + 1) * sizeof *G->gcasts);
    G->gcast_v = base_xrealloc(G->gcast_v, (size_t)(G->ngcasts + 1) * sizeof *G->gcast_v);
    const int64_t *d = v->type.dims;
    G->gcasts[G->ngcasts] = (cg_cast){D->values[slot].at, cg_ref_of(G, v), dt, G->dtype[v->id],
                                      ir_type_numel(&v->type), krsc ? CG_PERM_KCRS : CG_PERM_NONE,
                                      krsc ? d[1] : 0, krsc ? d[2] * d[3] : 0};
    G->gcast_v[G->ngcasts++] = v;
    return D->values[slot].at;
}

/* The gradients cg_grad_stage holds, converted in one launch (a few if very
 * many) where a node of m[0 .. nm-1] reads one (all: nm 0). */
static void flush_grads(cg_gen *G, const ir_node *const *m, int nm)
{
    enum { MOST = 120 }; /* tensors a launch: their pointers within CUDA's 4 KiB */
    int reads = nm == 0;
    for (int i = 0; i < nm && !reads; i++)
        for (int j = 0; j < m[i]->nin && !reads; j++)
            for (int k = 0; k < G->ngcasts && !reads; k++)
                reads = m[i]->in[j] == G->gcast_v[k];
    if (!reads || !G->ngcasts)
        return;
    for (int first = 0; first < G->ngcasts; first += MOST) {
        int n = G->ngcasts - first < MOST ? G->ngcasts - first : MOST;
        cg_emit_casts(G, nm ? m[0] : NULL,
                      cg_pprintf(G->p, "%d gradients to float in one launch", n),
                      G->gcasts + first, n);
    }
    G->ngcasts = 0;
}

/* Whether v lives in its own bytes in region r.  In the params region (a
 * parameter or weight) and the inputs region, those bytes are the same from a
 * list's start to its last reader (the optimizer's updates come after), so a
 * shadow made at the first reader serves them all. */
static int in_region(cg_gen *G, const ir_value *v, cg_region r)
{
    int s = G->D->slot_by_id[v->id];
    return s >= 0 && G->D->values[s].at.region == r && !G->aliased[v->id];
}

/* v as dt for a library call: its own bytes, a shadow of a parameter or an
 * input, or a converted copy in the workspace. */
cg_ref cg_operand_as(cg_gen *G, const ir_value *v, ir_dtype dt)
{
    if (G->dtype[v->id] == dt)
        return cg_ref_of(G, v);
    if (in_region(G, v, CG_PARAMS) || in_region(G, v, CG_INPUTS))
        return shadow(G, v, dt, 0, v->def);
    int64_t n = ir_type_numel(&v->type);
    cg_ref t = cg_workspace(G, n * (int64_t)ir_dtype_size(dt));
    cg_emit_cast(G, v->def, cg_pprintf(G->p, "%%%s as %s", v->name, ir_dtype_name(dt)),
                 cg_ref_of(G, v), G->dtype[v->id], t, dt, n);
    return t;
}

/* A transpose to channels-last is one of a batch of matrices: NCHW is
 * [n][c][h w] and NHWC [n][h w][c]; a filter's KCRS [k][c][r s] and KRSC
 * [k][r s][c].  With one channel or one pixel (a filter's one tap) the two
 * orders are the same bytes. */
cg_ref cg_operand_nhwc(cg_gen *G, const ir_node *n, const char *what, const ir_value *v,
                       ir_dtype dt, int *copied)
{
    const int64_t *d = v->type.dims;
    int64_t px = d[2] * d[3], numel = d[0] * d[1] * px;
    *copied = 0;
    if (cg_nhwc_same(&v->type) || G->nhwc[v->id])
        return cg_operand_as(G, v, dt);
    if (in_region(G, v, CG_PARAMS))
        return shadow(G, v, dt, 1, n);
    cg_ref t = cg_workspace(G, numel * (int64_t)ir_dtype_size(dt));
    cg_emit_transpose(G, n, what, cg_ref_of(G, v), G->dtype[v->id], t, dt, d[0], d[1], px);
    *copied = 1;
    return t;
}

cg_ref cg_workspace(cg_gen *G, int64_t bytes)
{
    cg_ref r = {CG_WORKSPACE, G->ws_top};
    G->ws_top += align_up(bytes);
    if (G->ws_top > G->ws_max)
        G->ws_max = G->ws_top;
    return r;
}

/* ---------------------------------------------------------------- steps and kernels */

int cg_add_step(cg_gen *G, const cg_step *s, const cg_access *acc, int nacc)
{
    if (G->nlist == G->caplist) {
        G->caplist = G->caplist ? 2 * G->caplist : 64;
        G->list = base_xrealloc(G->list, (size_t)G->caplist * sizeof *G->list);
    }
    cg_pending *p = &G->list[G->nlist];
    p->step = *s;
    p->step.wait = -1;
    p->naccess = nacc;
    p->access = cg_palloc(G->p, (size_t)(nacc ? nacc : 1) * sizeof *acc);
    if (nacc)
        memcpy(p->access, acc, (size_t)nacc * sizeof *acc);
    return G->nlist++;
}

static int is_ident(int c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* base as a C identifier of at most 80 characters */
static void ident(char *out, size_t size, const char *base)
{
    size_t n = 0;
    if (!is_ident((unsigned char)base[0], 1))
        out[n++] = 'k', out[n++] = '_';
    for (const char *s = base; *s && n + 1 < size && n < 80; s++)
        out[n++] = is_ident((unsigned char)*s, 0) ? *s : '_';
    out[n] = 0;
}

/* body with the identifiers in idents numbered by first appearance ("$0") */
static char *canonical(const char *body, const char *const *idents, int nidents)
{
    cg_sb b = {0};
    int *order = base_xmalloc(((size_t)nidents + 1) * sizeof *order), norder = 0;
    for (const char *s = body; *s;) {
        if (!is_ident((unsigned char)*s, 1)) {
            const char *e = s;
            while (*e && !is_ident((unsigned char)*e, 1))
                e++;
            cg_sb_put(&b, s, (size_t)(e - s));
            s = e;
            continue;
        }
        const char *e = s;
        while (*e && is_ident((unsigned char)*e, 0))
            e++;
        int hit = -1;
        for (int i = 0; i < nidents && hit < 0; i++)
            if (strlen(idents[i]) == (size_t)(e - s) && strncmp(idents[i], s, (size_t)(e - s)) == 0)
                hit = i;
        if (hit < 0) {
            cg_sb_put(&b, s, (size_t)(e - s));
        } else {
            int n = -1;
            for (int i = 0; i < norder && n < 0; i++)
                if (order[i] == hit)
                    n = i;
            if (n < 0)
                order[n = norder++] = hit;
            cg_sb_printf(&b, "$%d", n);
        }
        s = e;
    }
    base_free(order);
    return b.s ? b.s : base_xstrdup("");
}

int cg_add_kernel(cg_gen *G, const char *head, const char *body, const char *const *idents,
                  int nidents, const char *base, const ir_node *node, int elementwise, int block)
{
    cg_program *p = G->p;
    char *key = canonical(body, idents, nidents);
    uint64_t h = cg_hash64(key, strlen(key));
    int k = -1;
    for (int i = 0; i < p->nkernels && k < 0; i++)
        if (G->khash[i] == h && strcmp(G->kkey[i], key) == 0)
            k = i;
    if (k >= 0) {
        base_free(key);
        /* another node computed by the same code: say so in its comment */
        if (node && G->kbody[k] && strcmp(G->kbody[k], body) != 0) {
            if (G->nalso[k] < 6) {
                cg_sb_printf(&G->kalso[k], " *   also %%%s", cg_name(node->out[0]));
                if (node->loc.file)
                    cg_sb_printf(&G->kalso[k], "  @%s:%d:%d", node->loc.file, node->loc.line,
                                 node->loc.col);
                cg_sb_printf(&G->kalso[k], "\n");
            }
            G->nalso[k]++;
        }
    } else {
        if (p->nkernels == G->capkernels) {
            G->capkernels = G->capkernels ? 2 * G->capkernels : 64;
            size_t c = (size_t)G->capkernels;
            p->kernels = base_xrealloc(p->kernels, c * sizeof *p->kernels);
            G->khead = base_xrealloc(G->khead, c * sizeof *G->khead);
            G->kbody = base_xrealloc(G->kbody, c * sizeof *G->kbody);
            G->kkey = base_xrealloc(G->kkey, c * sizeof *G->kkey);
            G->khash = base_xrealloc(G->khash, c * sizeof *G->khash);
            G->kalso = base_xrealloc(G->kalso, c * sizeof *G->kalso);
            G->nalso = base_xrealloc(G->nalso, c * sizeof *G->nalso);
        }
        char name[128], try[160];
        ident(name, sizeof name, base);
        snprintf(try, sizeof try, "%s", name);
        for (int n = 2, taken = 1; taken; n++) {
            taken = 0;
            for (int i = 0; i < p->nkernels && !taken; i++)
                taken = strcmp(p->kernels[i].name, try) == 0;
            if (taken)
                snprintf(try, sizeof try, "%s_%d", name, n);
        }
        k = p->nkernels++;
        cg_kernel *K = &p->kernels[k];
        memset(K, 0, sizeof *K);
        K->name = base_xstrdup(try);
        K->module = -1;
        K->node = node;
        K->elementwise = elementwise;
        K->block = block;
        G->khead[k] = base_xstrdup(head);
        G->kbody[k] = base_xstrdup(body);
        G->kkey[k] = key;
        G->khash[k] = h;
        memset(&G->kalso[k], 0, sizeof G->kalso[k]);
        G->nalso[k] = 0;
    }
    int seen = 0;
    for (int i = 0; i < G->ndev_kernels && !seen; i++)
        seen = G->dev_kernels[i] == k;
    if (!seen) {
        if (G->ndev_kernels == G->capdev_kernels) {
            G->capdev_kernels = G->capdev_kernels ? 2 * G->capdev_kernels : 64;
            G->dev_kernels = base_xrealloc(G->dev_kernels,
                                         (size_t)G->capdev_kernels * sizeof *G->dev_kernels);
        }
        G->dev_kernels[G->ndev_kernels++] = k;
    }
    return k;
}

/* ---------------------------------------------------------------- 3. units */

int cg_const_inline(cg_gen *G, const ir_value *v)
{
    if (!v->def || v->def->op != IR_OP_CONST || !ir_is_float(v->type.dtype) || G->external[v->id])
        return 0;
    for (int r = G->rstart[v->id]; r < G->rstart[v->id + 1]; r++) {
        ir_op op = G->node_at[G->readers[r]]->op;
        if (cg_is_library(op) || ir_op_communicates(op) || op == IR_OP_RESHAPE ||
            op == IR_OP_DROPOUT)
            return 0;
    }
    return 1;
}

int cg_const_scaled(cg_gen *G, const ir_value *v)
{
    /* the seed autodiff makes: 1, named after the loss ("loss.grad"), and the
       partition's copy on each device (1/R, "loss.grad", "d1.loss.grad"); not
       the other scalars of gradients (global_avgpool's 1 / hw is "x.grad") */
    if (!G->p->loss_scale.enabled || !G->g->loss || !v->def || v->def->op != IR_OP_CONST ||
        v->type.rank != 0)
        return 0;
    const char *name = cg_name(v), *loss = cg_name(G->g->loss);
    if ((name[0] == 'd' || name[0] == 'r') && isdigit((unsigned char)name[1])) {
        const char *p = name + 1;
        while (isdigit((unsigned char)*p))
            p++;
        if (*p == '.')
            name = p + 1;
    }
    size_t n = strlen(loss);
    return strncmp(name, loss, n) == 0 && strcmp(name + n, ".grad") == 0;
}

static int position(cg_gen *G, const ir_node *n) { return G->pos[n->out[0]->id]; }

/* Whether a reshape (or identity dropout) n may read its operand's bytes
 * instead of its own: no write on this device lands on them while its result
 * is read, which the plan says of the operand only up to n. */
static int may_alias(cg_gen *G, const ir_node *n, cg_ref at, int64_t bytes)
{
    const ir_value *o = n->out[0];
    if (G->external[o->id])
        return 0;
    if (at.region != CG_ARENA)
        return 1; /* inputs and parameters: nothing writes them during a run */
    int k = position(G, n), last = k;
    for (int r = G->rstart[o->id]; r < G->rstart[o->id + 1]; r++) {
        const ir_node *m = G->node_at[G->readers[r]];
        if (ir_op_communicates(m->op))
            return 0;
        last = G->readers[r] > last ? G->readers[r] : last;
    }
    const cg_device *D = G->D;
    for (int i = 0; i < D->nvalues; i++) {
        const cg_value *x = &D->values[i];
        if (x->kind != CG_VALUE_NODE)
            continue;
        int p = G->pos[x->value->def->out[0]->id];
        int64_t xb = mp_value_bytes(x->value);
        if (p > k && p <= last && x->at.offset < at.offset + bytes &&
            at.offset < x->at.offset + xb)
            return 0;
    }
    return 1;
}

static void gen_reshape(cg_gen *G, const ir_node *n)
{
    const ir_value *u = n->in[0], *o = n->out[0];
    cg_ref from = cg_ref_of(G, u), to = cg_ref_of(G, o);
    int64_t bytes = ir_type_numel(&o->type) * (int64_t)ir_dtype_size(G->dtype[o->id]);
    if (from.region == to.region && from.offset == to.offset)
        return;
    if (G->dtype[u->id] == G->dtype[o->id] && may_alias(G, n, from, bytes)) {
        G->alias[o->id] = from;
        G->aliased[o->id] = 1;
        return;
    }
    if (G->dtype[u->id] != G->dtype[o->id]) {
        cg_emit_cast(G, n, cg_pprintf(G->p, "%s %%%s", ir_ops[n->op].name, o->name), from,
                     G->dtype[u->id], to, G->dtype[o->id], ir_type_numel(&o->type));
        return;
    }
    cg_step s = {.kind = CG_STEP_COPY, .node = n};
    s.what = cg_pprintf(G->p, "%s %%%s", ir_ops[n->op].name, cg_name(o));
    s.u.copy = (cg_copy){from, to, bytes};
    cg_access acc[2] = {{from, bytes, 0, 0, G->dtype[u->id]}, {to, bytes, 1, 0, G->dtype[o->id]}};
    cg_add_step(G, &s, acc, 2);
}

static int64_t *ints_copy(cg_gen *G, const int64_t *v, int n)
{
    int64_t *r = cg_palloc(G->p, (size_t)(n ? n : 1) * sizeof *r);
    memcpy(r, v, (size_t)n * sizeof *r);
    return r;
}

/* The elements of a bucket's operands, which one call moves in one type
 * (-1 after reporting operands stored in different types). */
static int64_t bucket_numel(cg_gen *G, const ir_node *n, const cg_comm *c)
{
    int64_t total = 0;
    for (int j = 0; j < n->nin; j++) {
        if (G->dtype[n->in[j]->id] != c->dtype || G->dtype[n->out[j]->id] != c->dtype) {
            cg_fail(G, n, "%s %%%s: the operands of one bucket are stored in different types",
                    ir_ops[n->op].name, cg_name(n->out[0]));
            return -1;
        }
        total += ir_type_numel(&n->in[j]->type);
    }
    return total;
}

/* A reduce_scatter of several operands (a ZeRO gradient bucket) is one call
 * over staging: each operand packed into it rank-major, rank r's block holding
 * slice r of every operand in turn ([r][j][outer_j, part_j, inner_j]); the call
 * leaves this rank's block, its results one after another, in a second
 * staging buffer, copied from there into each result.  A bucket costs one
 * collective's latency, not one per tensor. */
static void gen_reduce_scatter_bucket(cg_gen *G, const ir_node *n, cg_step *s)
{
    cg_comm *c = &s->u.comm;
    int64_t es = (int64_t)ir_dtype_size(c->dtype), total = bucket_numel(G, n, c);
    if (total < 0)
        return;
    int64_t block = total / c->ngroup;  /* ir_infer: every operand splits in the group */
    cg_ref send = {CG_NREGIONS, G->staging_top};
    G->staging_top += align_up(total * es);
    cg_ref recv = {CG_NREGIONS, G->staging_top};
    G->staging_top += align_up(block * es);
    int64_t off = 0;
    for (int j = 0; j < n->nin; j++) {
        cg_emit_gather_unpack(G, n, j, send, block, off, 1);
        off += ir_type_numel(&n->out[j]->type);
    }
    c->send[0] = send, c->recv[0] = recv;
    c->count[0] = block;
    c->bytes = total * es;
    s->what = cg_pprintf(G->p, "reduce_scatter of %d tensors (%%%s, ...) (staged)", n->nin,
                         cg_name(n->out[0]));
    cg_access acc[2] = {{send, total * es, 0, 0, c->dtype}, {recv, block * es, 1, 0, c->dtype}};
    cg_add_step(G, s, acc, 2);
    off = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t bytes = ir_type_numel(&n->out[j]->type) * es;
        cg_step cp = {.kind = CG_STEP_COPY, .node = n};
        cp.what = cg_pprintf(G->p, "unpack %%%s", cg_name(n->out[j]));
        cg_ref from = {recv.region, recv.offset + off};
        cp.u.copy = (cg_copy){from, cg_ref_of(G, n->out[j]), bytes};
        cg_access ca[2] = {{from, bytes, 0, 0, c->dtype}, {cp.u.copy.dst, bytes, 1, 0, c->dtype}};
        cg_add_step(G, &cp, ca, 2);
        off += bytes;
    }
}

/* An all_gather of several operands (ZeRO's updated shards) is one call over
 * staging, the other way round: this rank's operands copied one after
 * another into its block, every rank's block gathered rank-major into a
 * second staging buffer, and each result unpacked from there. */
static void gen_all_gather_bucket(cg_gen *G, const ir_node *n, cg_step *s)
{
    cg_comm *c = &s->u.comm;
    int64_t es = (int64_t)ir_dtype_size(c->dtype), block = bucket_numel(G, n, c);
    if (block < 0)
        return;
    cg_ref send = {CG_NREGIONS, G->staging_top};
    G->staging_top += align_up(block * es);
    cg_ref recv = {CG_NREGIONS, G->staging_top};
    G->staging_top += align_up(block * c->ngroup * es);
    int64_t off = 0;
    for (int j = 0; j < n->nin; j++) {
        int64_t bytes = ir_type_numel(&n->in[j]->type) * es;
        cg_step cp = {.kind = CG_STEP_COPY, .node = n};
        cp.what = cg_pprintf(G->p, "pack %%%s", cg_name(n->in[j]));
        cg_ref to = {send.region, send.offset + off};
        cp.u.copy = (cg_copy){cg_ref_of(G, n->in[j]), to, bytes};
        cg_access ca[2] = {{cp.u.copy.src, bytes, 0, 0, c->dtype}, {to, bytes, 1, 0, c->dtype}};
        cg_add_step(G, &cp, ca, 2);
        off += bytes;
    }
    c->send[0] = send, c->recv[0] = recv;
    c->count[0] = block;
    c->bytes = block * es;
    s->what = cg_pprintf(G->p, "all_gather of %d tensors (%%%s, ...) (staged)", n->nin,
                         cg_name(n->out[0]));
    cg_access acc[2] = {{send, block * es, 0, 0, c->dtype},
                        {recv, block * c->ngroup * es, 1, 0, c->dtype}};
    cg_add_step(G, s, acc, 2);
    off = 0;
    for (int j = 0; j < n->nin; j++) {
        cg_emit_gather_unpack(G, n, j, recv, block, off, 0);
        off += ir_type_numel(&n->in[j]->type);
    }
}

static void gen_comm(cg_gen *G, const ir_node *n)
{
    cg_step s = {.kind = CG_STEP_COMM, .node = n};
    cg_comm *c = &s.u.comm;
    c->op = n->op;
    c->id = ir_attr_int(n, "id");
    c->local_kernel = -1;
    c->dtype = G->dtype[n->out[0]->id];
    if (n->op == IR_OP_SEND)
        c->dtype = G->dtype[n->in[0]->id];
    size_t es = ir_dtype_size(c->dtype);
    int nt = n->op == IR_OP_ALL_REDUCE ? n->nin : 1;
    c->ntensors = nt;
    c->send = cg_palloc(G->p, (size_t)nt * sizeof *c->send);
    c->recv = cg_palloc(G->p, (size_t)nt * sizeof *c->recv);
    c->count = cg_palloc(G->p, (size_t)nt * sizeof *c->count);
    cg_access acc[2 * IR_MAX_RESULTS + 2];
    int na = 0;
    if (n->op == IR_OP_SEND || n->op == IR_OP_RECV) {
        int64_t peer = ir_attr_int(n, "peer");
        int64_t pair[2] = {G->dev < peer ? G->dev : peer, G->dev < peer ? peer : G->dev};
        c->group = ints_copy(G, pair, 2);
        c->ngroup = 2;
        c->rank = G->dev == pair[0] ? 0 : 1;
        c->peer = (int)peer;
        const ir_value *v = n->op == IR_OP_SEND ? n->in[0] : n->out[0];
        c->count[0] = ir_type_numel(&v->type);
        c->send[0] = c->recv[0] = cg_ref_of(G, v);
        c->bytes = n->op == IR_OP_SEND ? c->count[0] * (int64_t)es : 0;
        acc[na++] = (cg_access){c->send[0], c->count[0] * (int64_t)es, n->op == IR_OP_RECV, 0,
                                c->dtype};
        s.what = cg_pprintf(G->p, "%s %%%s %s device %lld", ir_ops[n->op].name, cg_name(v),
                            n->op == IR_OP_SEND ? "to" : "from", (long long)peer);
        cg_add_step(G, &s, acc, na);
        return;
    }
    int ng;
    const int64_t *group = ir_attr_ints(n, "group", &ng);
    c->group = ints_copy(G, group, ng);
    c->ngroup = ng;
    for (int r = 0; r < ng; r++)
        if (group[r] == G->dev)
            c->rank = r;
    if (n->op == IR_OP_BROADCAST)
        c->root = (int)ir_attr_int(n, "root");
    if (n->op == IR_OP_ALL_REDUCE || n->op == IR_OP_REDUCE_SCATTER)
        c->local_kernel = cg_local_reduce_kernel(G, c->dtype, 0);
    if (n->op == IR_OP_ALL_REDUCE || n->op == IR_OP_BROADCAST) {
        for (int t = 0; t < nt; t++) {
            c->send[t] = cg_ref_of(G, n->in[t]);
            c->recv[t] = cg_ref_of(G, n->out[t]);
            c->count[t] = ir_type_numel(&n->in[t]->type);
            c->bytes += c->count[t] * (int64_t)es;
            acc[na++] = (cg_access){c->send[t], c->count[t] * (int64_t)es, 0, 0, c->dtype};
            acc[na++] = (cg_access){c->recv[t], c->count[t] * (int64_t)es, 1, 0, c->dtype};
        }
        s.what = cg_pprintf(G->p, "%s of %d tensor%s (%%%s%s)", ir_ops[n->op].name, nt,
                            nt == 1 ? "" : "s", cg_name(n->out[0]), nt > 1 ? ", ..." : "");
        cg_add_step(G, &s, acc, na);
        return;
    }
    if (n->op == IR_OP_REDUCE_SCATTER && n->nin > 1) {
        gen_reduce_scatter_bucket(G, n, &s);
        return;
    }
    if (n->op == IR_OP_ALL_GATHER && n->nin > 1) {
        gen_all_gather_bucket(G, n, &s);
        return;
    }
    /* all_gather, reduce_scatter: along the outermost axis, or through staging */
    int axis = (int)ir_attr_int(n, "axis");
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= n->in[0]->type.dims[i];
    int64_t in_n = ir_type_numel(&n->in[0]->type), out_n = ir_type_numel(&n->out[0]->type);
    cg_ref in = cg_ref_of(G, n->in[0]), out = cg_ref_of(G, n->out[0]);
    int gather = n->op == IR_OP_ALL_GATHER;
    c->count[0] = gather ? in_n : out_n;
    c->bytes = in_n * (int64_t)es;
    s.what = cg_pprintf(G->p, "%s %%%s%s", ir_ops[n->op].name, cg_name(n->out[0]),
                        outer > 1 ? " (staged)" : "");
    if (outer == 1) {
        c->send[0] = in, c->recv[0] = out;
        acc[na++] = (cg_access){in, in_n * (int64_t)es, 0, 0, c->dtype};
        acc[na++] = (cg_access){out, out_n * (int64_t)es, 1, 0, c->dtype};
        cg_add_step(G, &s, acc, na);
        return;
    }
    /* staging above the compute workspace (fixed up at the end of the device) */
    cg_ref stage = {CG_NREGIONS, G->staging_top};
    int64_t sb = (gather ? out_n : in_n) * (int64_t)es;
    G->staging_top += align_up(sb);
    if (gather) {
        c->send[0] = in, c->recv[0] = stage;
        acc[na++] = (cg_access){in, in_n * (int64_t)es, 0, 0, c->dtype};
        acc[na++] = (cg_access){stage, sb, 1, 0, c->dtype};
        cg_add_step(G, &s, acc, na);
        cg_emit_gather_unpack(G, n, 0, stage, out_n / ng, 0, 0);
    } else {
        cg_emit_gather_unpack(G, n, 0, stage, in_n / ng, 0, 1);
        c->send[0] = stage, c->recv[0] = out;
        acc[na++] = (cg_access){stage, sb, 0, 0, c->dtype};
        acc[na++] = (cg_access){out, out_n * (int64_t)es, 1, 0, c->dtype};
        cg_add_step(G, &s, acc, na);
    }
}

/* Kernels for m[0 .. nm-1] (map ops, at most one special at sp), split until
 * none writes what it reads elsewhere. */
static void emit_segment(cg_gen *G, const ir_node *const *m, int nm, int sp)
{
    if (nm == 0 || cg_emit_kernel(G, m, nm, sp) == 0)
        return;
    if (sp > 0) {                        /* the prologue on its own */
        emit_segment(G, m, sp, -1);
        emit_segment(G, m + sp, nm - sp, 0);
    } else if (nm > 1) {                 /* then member by member */
        for (int k = 0; k < nm; k++)
            emit_segment(G, m + k, 1, k == sp ? 0 : -1);
    } else {
        cg_fail(G, m[0], "%%%s (%s): no kernel reads its operands without overwriting them "
                "(the memory plan and the storage dtypes disagree)", m[0]->out[0]->name,
                ir_ops[m[0]->op].name);
    }
}

static void gen_unit(cg_gen *G, const ir_node *const *m, int nm)
{
    G->ws_top = 0;
    if (G->bias_pending && !(m[0]->op == IR_OP_BATCHNORM_TRAIN && m[0]->in[0] == G->bias_pending)) {
        cg_fail(G, m[0], "internal: the bias of %%%s was left to a batchnorm that does not follow",
                G->bias_pending->name);
        return;
    }
    for (int i = 0; i < nm && !G->failed;) {
        const ir_node *n = m[i];
        /* a gradient a library call of this unit left in 16 bits, read by
           a later member (a pipeline's accumulation fused after the call) */
        if (i > 0)
            flush_grads(G, m + i, nm - i);
        if (ir_op_communicates(n->op)) {
            gen_comm(G, n);
            i++;
        } else if (cg_is_library(n->op)) {
            i += cg_emit_library(G, m + i, nm - i);
        } else if (nm == 1 && (n->op == IR_OP_RESHAPE || n->op == IR_OP_DROPOUT)) {
            gen_reshape(G, n);
            i++;
        } else if (nm == 1 && n->op == IR_OP_CONST && cg_const_inline(G, n->out[0]) &&
                   !G->init) {
            i++; /* a literal in every kernel that reads it */
        } else {
            int j = i, sp = -1;
            for (; j < nm; j++) {
                if (ir_op_communicates(m[j]->op) || cg_is_library(m[j]->op))
                    break;
                if (!cg_is_map(m[j])) {
                    if (sp >= 0)
                        break;
                    sp = j;
                }
            }
            emit_segment(G, m + i, j - i, sp >= 0 ? sp - i : -1);
            i = j;
        }
    }
}

/* Whether the init steps compute n: a weight, or a constant a weight's
 * library call or copy reads from memory. */
static int in_init(cg_gen *G, const ir_node *n)
{
    if (G->weight[n->out[0]->id])
        return 1;
    if (n->op != IR_OP_CONST || cg_const_inline(G, n->out[0]))
        return 0;
    const ir_value *v = n->out[0];
    for (int r = G->rstart[v->id]; r < G->rstart[v->id + 1]; r++)
        if (G->weight[G->node_at[G->readers[r]]->out[0]->id])
            return 1;
    return 0;
}

/* Whether n is an optimizer's step standing alone, which one launch may make
 * with the steps after it (cg_emit_multi). */
static int multi_step(cg_gen *G, const ir_node *n)
{
    return !G->init && !n->group && (n->op == IR_OP_SGD || n->op == IR_OP_ADAM) &&
           n->device == G->dev;
}

/* The optimizer's steps from n on that run back to back on this device (the
 * scheduler leaves them so: passes/schedule.c), into m: the last of them. */
static const ir_node *optimizer_run(cg_gen *G, const ir_node *n, const ir_node **m, int *nm)
{
    enum { MOST = 120 }; /* tensors a launch at most (cg_emit_multi takes fewer where
                            their pointers would pass CUDA's 4 KiB of parameters) */
    const ir_node *last = n;
    *nm = 0;
    for (const ir_node *x = n; x && *nm < MOST; x = x->next) {
        if (x->device != G->dev)
            continue;
        if (!multi_step(G, x) || x->op != n->op)
            break;
        m[(*nm)++] = last = x;
    }
    return last;
}

/* The run's shadows, made in one launch (a few if there are very many)
 * where the first was asked for: steps after it move one down, and the step
 * numbers their kernels report in the status word with them.  Safe so early:
 * a shadow's source, a parameter or an input, does not change before the
 * optimizer's steps at the run's end, and its bytes are its own. */
static void flush_casts(cg_gen *G)
{
    enum { MOST = 120 }; /* tensors a launch: their pointers within CUDA's 4 KiB */
    for (int first = 0; first < G->ncasts; first += MOST) {
        int n = G->ncasts - first < MOST ? G->ncasts - first : MOST, at = G->casts_at + first / MOST;
        int before = G->nlist;
        cg_emit_casts(G, NULL, cg_pprintf(G->p, "%d shadows (16-bit copies) in one launch",
                                                   n), G->casts + first, n);
        if (G->nlist == before)
            break; /* refused, said why */
        cg_pending moved = G->list[G->nlist - 1];
        memmove(&G->list[at + 1], &G->list[at], (size_t)(G->nlist - 1 - at) * sizeof *G->list);
        G->list[at] = moved;
        for (int s = at + 1; s < G->nlist; s++) {
            cg_step *st = &G->list[s].step;
            for (int a = 0; st->kind == CG_STEP_KERNEL && a + 1 < st->u.launch.nargs; a++) {
                cg_arg *g = st->u.launch.args;
                if (g[a].kind == CG_ARG_BUFFER && g[a].buf.region == G->D->status.region &&
                    g[a].buf.offset == G->D->status.offset && g[a + 1].kind == CG_ARG_I64)
                    g[a + 1].i++;
            }
        }
    }
    base_free(G->casts);
    G->casts = NULL;
    G->ncasts = 0;
}

static void gen_list(cg_gen *G, int init)
{
    const ir_graph *g = G->g;
    const ir_node **m = base_xmalloc(((size_t)G->nnodes + 1) * sizeof *m);
    G->init = init;
    memset(G->shadow_fresh, 0, (size_t)G->nvalues + 1);
    for (const ir_node *n = g->head; n && !G->failed;) {
        int take = n->device == G->dev &&
                   (init ? in_init(G, n) : !G->weight[n->out[0]->id]);
        if (!take) {
            n = n->next;
            continue;
        }
        int nm = 0, w = G->weight[n->out[0]->id];
        m[nm++] = n;
        const ir_node *last = n;
        while (last->group && last->next && last->next->group == last->group &&
               last->next->device == G->dev && G->weight[last->next->out[0]->id] == w)
            m[nm++] = last = last->next;
        int took = 0;
        if (multi_step(G, n) && optimizer_run(G, n, m, &nm) && nm > 1 &&
            (flush_grads(G, m, nm), (took = cg_emit_multi(G, m, nm)) > 1)) {
            n = m[took - 1]->next;
            continue;
        }
        last = n;
        nm = 1;
        while (last->group && last->next && last->next->group == last->group &&
               last->next->device == G->dev && G->weight[last->next->out[0]->id] == w)
            m[nm++] = last = last->next;
        if (n == G->sum_done && nm == 1) { /* computed by the batchnorm_grad before it */
            G->sum_done = NULL;
            n = n->next;
            continue;
        }
        flush_grads(G, m, nm);
        gen_unit(G, m, nm);
        n = last->next;
    }
    base_free(m);
    if (G->bias_pending && !G->failed)
        cg_fail(G, G->bias_pending->def, "internal: the bias of %%%s was never added",
                G->bias_pending->name);
    if (!G->failed)
        flush_grads(G, NULL, 0);
    if (!init && !G->failed)
        flush_casts(G);
}

/* ---------------------------------------------------------------- 4. updates */

/* Whether update u's source may be computed in place, straight into its
 * target: the source is a result of this device stored as the target is, no
 * node of this device reads the target after the one computing the source
 * (which may read it, element for element: an optimizer's step, a running
 * statistic), and no loss scaler must first see whether the step counts. */
static int update_in_place(cg_gen *G, const ir_update *u)
{
    const ir_value *s = u->source, *t = u->target;
    if (u->device != G->dev || s->kind != IR_VALUE_NODE || s->def->device != G->dev ||
        G->dtype[s->id] != G->dtype[t->id] || G->p->loss_scale.enabled ||
        G->D->slot_by_id[t->id] < 0 || G->D->slot_by_id[s->id] < 0)
        return 0;
    int k = position(G, s->def);
    for (int r = G->rstart[t->id]; r < G->rstart[t->id + 1]; r++)
        if (G->readers[r] > k && G->node_at[G->readers[r]]->device == G->dev)
            return 0;
    return 1;
}

/* The updates computed in place: their sources live at their targets (the
 * kernels write there, and the value table says so), so no copy follows. */
static void alias_updates(cg_gen *G)
{
    const ir_graph *g = G->g;
    for (int i = 0; i < g->nupdates; i++) {
        const ir_update *u = &g->updates[i];
        if (!update_in_place(G, u))
            continue;
        G->alias[u->source->id] = cg_ref_of(G, u->target);
        G->aliased[u->source->id] = 1;
        G->D->values[G->D->slot_by_id[u->source->id]].at = G->alias[u->source->id];
    }
}

static void gen_updates(cg_gen *G)
{
    const ir_graph *g = G->g;
    int ls = G->p->loss_scale.enabled;
    if (ls && G->p->ndevices > 1) { /* every device skips, or none */
        cg_step s = {.kind = CG_STEP_COMM};
        cg_comm *c = &s.u.comm;
        int64_t id = 0, *group = cg_palloc(G->p, (size_t)G->p->ndevices * sizeof *group);
        ir_for_each_node(g, n)
            if (ir_op_communicates(n->op) && ir_attr_int(n, "id") >= id)
                id = ir_attr_int(n, "id") + 1;
        for (int d = 0; d < G->p->ndevices; d++)
            group[d] = d;
        c->op = IR_OP_ALL_REDUCE;
        c->id = id;
        c->group = group;
        c->ngroup = G->p->ndevices;
        c->rank = G->dev;
        c->ntensors = 1;
        c->send = cg_palloc(G->p, sizeof *c->send);
        c->recv = cg_palloc(G->p, sizeof *c->recv);
        c->count = cg_palloc(G->p, sizeof *c->count);
        c->send[0] = c->recv[0] = (cg_ref){CG_PARAMS, G->D->loss_scale.offset + 8};
        c->count[0] = 1;
        c->dtype = IR_I32;
        c->reduce_max = 1;
        c->local_kernel = cg_local_reduce_kernel(G, IR_I32, 1);
        c->bytes = 4;
        s.what = "all_reduce (max) of the loss scaler's overflow flag";
        cg_access acc = {c->send[0], 4, 1, 0, IR_I32};
        cg_add_step(G, &s, &acc, 1);
    }
    for (int i = 0; i < g->nupdates && !G->failed; i++) {
        const ir_update *u = &g->updates[i];
        if (u->device != G->dev)
            continue;
        const ir_node *src = u->source->kind == IR_VALUE_NODE ? u->source->def : NULL;
        if (G->aliased[u->source->id])
            continue; /* computed in place (alias_updates) */
        if (ls && src && (src->op == IR_OP_SGD || src->op == IR_OP_ADAM)) {
            cg_emit_masked_copy(G, u->target, u->source);
            continue;
        }
        cg_ref from = cg_ref_of(G, u->source), to = cg_ref_of(G, u->target);
        int64_t n = ir_type_numel(&u->target->type);
        if (G->dtype[u->source->id] != G->dtype[u->target->id]) {
            cg_emit_cast(G, src, cg_pprintf(G->p, "update %%%s", u->target->name), from,
                         G->dtype[u->source->id], to, G->dtype[u->target->id], n);
            continue;
        }
        int64_t bytes = n * (int64_t)ir_dtype_size(G->dtype[u->target->id]);
        cg_step s = {.kind = CG_STEP_COPY, .node = src};
        s.what = cg_pprintf(G->p, "update %%%s = %%%s", cg_name(u->target), cg_name(u->source));
        s.u.copy = (cg_copy){from, to, bytes};
        cg_access acc[2] = {{from, bytes, 0, 0, IR_U8}, {to, bytes, 1, 0, IR_U8}};
        cg_add_step(G, &s, acc, 2);
    }
    if (ls)
        cg_emit_scaler_update(G);
}

/* ---------------------------------------------------------------- 5. waits */

static int overlap(const cg_access *a, const cg_access *b)
{
    return a->at.region == b->at.region && a->at.offset < b->at.offset + b->bytes &&
           b->at.offset < a->at.offset + a->bytes && (a->write || b->write);
}

static int conflict(const cg_pending *a, const cg_pending *b)
{
    for (int i = 0; i < a->naccess; i++)
        for (int j = 0; j < b->naccess; j++)
            if (overlap(&a->access[i], &b->access[j]))
                return 1;
    return 0;
}

static void set_waits(cg_gen *G)
{
    for (int s = 0; s < G->nlist; s++) {
        int comm = G->list[s].step.kind == CG_STEP_COMM;
        for (int t = s - 1; t >= 0; t--)
            if ((G->list[t].step.kind == CG_STEP_COMM) != comm &&
                conflict(&G->list[s], &G->list[t])) {
                G->list[s].step.wait = t;
                break;
            }
    }
}

static void staging_to_workspace(const cg_gen *G, cg_ref *r)
{
    if (r->region == CG_NREGIONS) {
        r->region = CG_WORKSPACE;
        r->offset += G->ws_max;
    }
}

/* The list made, into the device: staging moved above the workspace. */
static cg_step *finish_list(cg_gen *G, int *count)
{
    for (int s = 0; s < G->nlist; s++) {
        cg_pending *p = &G->list[s];
        for (int i = 0; i < p->naccess; i++)
            staging_to_workspace(G, &p->access[i].at);
        cg_step *st = &p->step;
        if (st->kind == CG_STEP_COMM)
            for (int t = 0; t < st->u.comm.ntensors; t++) {
                staging_to_workspace(G, &st->u.comm.send[t]);
                staging_to_workspace(G, &st->u.comm.recv[t]);
            }
        if (st->kind == CG_STEP_COPY) { /* a staged reduce_scatter's results */
            staging_to_workspace(G, &st->u.copy.src);
            staging_to_workspace(G, &st->u.copy.dst);
        }
        if (st->kind == CG_STEP_KERNEL) /* every argument: a multi-tensor launch has hundreds */
            for (int a = 0; a < st->u.launch.nargs; a++)
                staging_to_workspace(G, &st->u.launch.args[a].buf);
    }
    set_waits(G);
    for (int s = 0; s < G->nlist; s++) {
        cg_pending *p = &G->list[s];
        for (int i = 0; i < p->naccess; i++) {
            const cg_access *a = &p->access[i];
            int64_t es = (int64_t)ir_dtype_size(a->dtype);
            *(a->write ? &p->step.written_bytes : &p->step.read_bytes) += a->bytes;
            if (a->bytes / (es ? es : 1) > p->step.elements)
                p->step.elements = a->bytes / (es ? es : 1);
        }
    }
    cg_step *steps = cg_palloc(G->p, (size_t)(G->nlist ? G->nlist : 1) * sizeof *steps);
    for (int s = 0; s < G->nlist; s++)
        steps[s] = G->list[s].step;
    *count = G->nlist;
    G->nlist = 0;
    return steps;
}

/* ---------------------------------------------------------------- 6. modules */

static void add_module_kernel(cg_program *p, cg_module *m, int k)
{
    m->kernels = base_xrealloc(m->kernels, (size_t)(m->nkernels + 1) * sizeof *m->kernels);
    m->kernels[m->nkernels++] = k;
    p->kernels[k].module = (int)(m - p->modules);
}

static void make_modules(cg_gen *G, int d, const int *list, int n)
{
    cg_program *p = G->p;
    int per = G->o.kernels_per_module > 0 ? G->o.kernels_per_module : KERNELS_PER_MODULE;
    cg_module *m = NULL;
    (void)d;
    for (int i = 0; i < n; i++) {
        int k = list[i];
        if (p->kernels[k].module >= 0)
            continue;
        if (!m || m->nkernels == per) {
            p->modules = base_xrealloc(p->modules, (size_t)(p->nmodules + 1) * sizeof *p->modules);
            m = &p->modules[p->nmodules++];
            memset(m, 0, sizeof *m);
        }
        add_module_kernel(p, m, k);
    }
}

static void write_sources(cg_gen *G)
{
    cg_program *p = G->p;
    for (int i = 0; i < p->nmodules; i++) {
        cg_module *m = &p->modules[i];
        cg_sb b = {0};
        cg_sb_printf(&b, "/* gnc: %s, module %d of %d: %d kernel%s, %s */\n", p->graph->name, i + 1,
                     p->nmodules, m->nkernels, m->nkernels == 1 ? "" : "s",
                     ir_precision_name(p->opts.precision));
        int wmma = 0;
        for (int j = 0; j < m->nkernels; j++)
            wmma |= p->kernels[m->kernels[j]].wmma;
        if (wmma)                      /* the prelude includes <mma.h> */
            cg_sb_printf(&b, "#define GNC_WMMA 1\n");
        cg_sb_put(&b, cg_prelude, cg_prelude_len);
        m->body_offset = b.len;
        m->kernel_line = base_xmalloc((size_t)(m->nkernels ? m->nkernels : 1) * sizeof(int));
        int line = 1;
        for (size_t c = 0; c < b.len; c++)
            line += b.s[c] == '\n';
        for (int j = 0; j < m->nkernels; j++) {
            int k = m->kernels[j];
            cg_sb t = {0};
            const char *h = G->khead[k], *end = strstr(h, " */\n");
            cg_sb_put(&t, h, end ? (size_t)(end - h) : strlen(h));
            if (G->kalso[k].len)
                cg_sb_put(&t, G->kalso[k].s, G->kalso[k].len);
            if (G->nalso[k] > 6)
                cg_sb_printf(&t, " *   and %d more\n", G->nalso[k] - 6);
            cg_sb_printf(&t, "%s", end ? end : "");
            const char *body = G->kbody[k], *at;
            while ((at = strstr(body, "@K@"))) {
                cg_sb_put(&t, body, (size_t)(at - body));
                cg_sb_printf(&t, "%s", p->kernels[k].name);
                body = at + 3;
            }
            cg_sb_printf(&t, "%s", body);
            cg_sb_put(&b, "\n", 1);
            line++;
            m->kernel_line[j] = line;
            cg_sb_put(&b, t.s, t.len);
            for (size_t c = 0; c < t.len; c++)
                line += t.s[c] == '\n';
            cg_sb_free(&t);
        }
        m->source = b.s;
        m->source_len = b.len;
    }
}

/* ---------------------------------------------------------------- the driver */

static void index_graph(cg_gen *G)
{
    const ir_graph *g = G->g;
    int nv = G->nvalues = g->nvalues;
    G->pos = base_xmalloc(((size_t)nv + 1) * sizeof *G->pos);
    G->dtype = base_xcalloc((size_t)nv + 1, sizeof *G->dtype);
    G->weight = base_xcalloc((size_t)nv + 1, 1);
    G->external = base_xcalloc((size_t)nv + 1, 1);
    G->rstart = base_xcalloc((size_t)nv + 2, sizeof *G->rstart);
    G->alias = base_xcalloc((size_t)nv + 1, sizeof *G->alias);
    G->aliased = base_xcalloc((size_t)nv + 1, 1);
    G->shadow_fresh = base_xcalloc((size_t)nv + 1, 1);
    G->nnodes = 0;
    ir_for_each_node(g, n)
        G->nnodes++;
    G->node_at = base_xmalloc(((size_t)G->nnodes + 1) * sizeof *G->node_at);
    int k = 0, total = 0;
    ir_for_each_node(g, n) {
        G->node_at[k] = n;
        G->pos[n->out[0]->id] = k++;
        for (int i = 0; i < n->nin; i++)
            if (!(i && n->in[i] == n->in[i - 1]))
                G->rstart[n->in[i]->id + 1]++, total++;
    }
    for (int i = 0; i < nv; i++)
        G->rstart[i + 1] += G->rstart[i];
    G->readers = base_xmalloc(((size_t)total + 1) * sizeof *G->readers);
    int *fill = base_xcalloc((size_t)nv + 1, sizeof *fill);
    k = 0;
    ir_for_each_node(g, n) {
        for (int i = 0; i < n->nin; i++)
            if (!(i && n->in[i] == n->in[i - 1]))
                G->readers[G->rstart[n->in[i]->id] + fill[n->in[i]->id]++] = k;
        k++;
    }
    base_free(fill);
    ir_weight_only(g, G->weight);
    for (int i = 0; i < g->noutputs; i++)
        G->external[g->outputs[i].value->id] = 1;
    if (g->loss)
        G->external[g->loss->id] = 1;
    for (int i = 0; i < g->nupdates; i++)
        G->external[g->updates[i].source->id] = 1;
}

static void gen_free(cg_gen *G)
{
    base_free(G->pos);
    base_free(G->dtype);
    base_free(G->nhwc);
    base_free(G->ptype);
    base_free(G->weight);
    base_free(G->external);
    base_free(G->rstart);
    base_free(G->readers);
    base_free(G->node_at);
    base_free(G->alias);
    base_free(G->aliased);
    base_free(G->shadow_fresh);
    base_free(G->gcasts);
    base_free(G->gcast_v);
    base_free(G->list);
    base_free(G->dev_kernels);
    for (int i = 0; G->khead && i < G->p->nkernels; i++) {
        base_free(G->khead[i]);
        base_free(G->kbody[i]);
        base_free(G->kkey[i]);
        cg_sb_free(&G->kalso[i]);
    }
    base_free(G->khead);
    base_free(G->kbody);
    base_free(G->kkey);
    base_free(G->khash);
    base_free(G->kalso);
    base_free(G->nalso);
}

cg_program *cg_generate(const ir_graph *g, const mp_plan *mp, const cg_options *o, diag *d)
{
    cg_gen G;
    memset(&G, 0, sizeof G);
    G.g = g;
    G.mp = mp;
    G.o = o ? *o : cg_options_default();
    G.d = d;
    if (G.o.narchs <= 0) {
        G.o.narchs = 2;
        G.o.archs[0] = "sm_80";
        G.o.archs[1] = "sm_90";
    }
    cg_program *p = G.p = base_xcalloc(1, sizeof *p);
    if (G.o.conv_choice) {
        signed char *c = cg_palloc(p, (size_t)g->nvalues + 1);
        memcpy(c, G.o.conv_choice, (size_t)g->nvalues);
        G.o.conv_choice = c;
    }
    p->opts = G.o;
    p->graph = g;
    p->narchs = G.o.narchs > CG_MAX_ARCHS ? CG_MAX_ARCHS : G.o.narchs;
    for (int i = 0; i < p->narchs; i++) {
        const char *a = G.o.archs[i];
        int ok = a && strncmp(a, "sm_", 3) == 0 && strlen(a) < 10 && a[3] >= '1' && a[3] <= '9';
        for (const char *c = a ? a + 3 : ""; ok && *c; c++)
            ok = (*c >= '0' && *c <= '9') || (*c == 'a' && !c[1]);
        if (!ok) {
            diag_error(d, (ir_loc){0}, "codegen: unknown architecture '%s' (sm_80, sm_90, ...)",
                       a ? a : "(null)");
            base_free(p);
            return NULL;
        }
        snprintf(p->archs[i], sizeof p->archs[i], "%s", a);
        p->opts.archs[i] = p->archs[i];
    }
    if (G.o.precision == PREC_FP16 && g->nupdates) {
        p->loss_scale.enabled = 1;
        p->loss_scale.init = (float)(G.o.loss_scale > 0 ? G.o.loss_scale : 65536.0);
        p->loss_scale.growth = 2.0f;
        p->loss_scale.backoff = 0.5f;
        p->loss_scale.interval = G.o.loss_scale_interval > 0 ? G.o.loss_scale_interval : 2000;
    }
    p->ndevices = mp->ndevices;
    p->devices = cg_palloc(p, (size_t)p->ndevices * sizeof *p->devices);
    index_graph(&G);
    classify(&G);
    cg_choose_layouts(&G);
    for (int dev = 0; dev < p->ndevices && !G.failed; dev++) {
        G.dev = dev;
        G.D = &p->devices[dev];
        G.ndev_kernels = 0;
        G.ws_max = G.staging_top = 0;
        memset(G.aliased, 0, (size_t)G.nvalues + 1);
        layout(&G);
        gen_list(&G, 1);
        G.D->init = finish_list(&G, &G.D->ninit);
        alias_updates(&G);
        gen_list(&G, 0);
        if (!G.failed)
            gen_updates(&G);
        G.D->steps = finish_list(&G, &G.D->nsteps);
        G.D->region_bytes[CG_WORKSPACE] = G.ws_max + G.staging_top;
        make_modules(&G, dev, G.dev_kernels, G.ndev_kernels);
    }
    if (!G.failed)
        write_sources(&G);
    gen_free(&G);
    if (G.failed) {
        cg_program_free(p);
        return NULL;
    }
    return p;
}

void cg_run_stats_of(const cg_program *p, int d, cg_run_stats *s)
{
    memset(s, 0, sizeof *s);
    const cg_device *D = &p->devices[d];
    s->steps = D->nsteps;
    for (int i = 0; i < D->nsteps; i++) {
        const cg_step *st = &D->steps[i];
        switch (st->kind) {
        case CG_STEP_KERNEL: {
            const cg_launch *l = &st->u.launch;
            int64_t blocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
            s->kernels++;
            s->layout_own += p->kernels[l->kernel].layout;
            s->kernel_read_bytes += st->read_bytes;
            s->kernel_written_bytes += st->written_bytes;
            if (st->elements > 1000000 && (!s->big_min_step || blocks < s->big_min_blocks))
                s->big_min_blocks = blocks, s->big_min_step = st;
            break;
        }
        case CG_STEP_CONV: s->layout_library += cg_conv_layout_copies(&st->u.conv); /* fall through */
        case CG_STEP_GEMM: s->library++; break;
        case CG_STEP_COMM: s->comms++; break;
        case CG_STEP_COPY: s->copies++, s->copy_bytes += st->u.copy.bytes; break;
        }
    }
}

const cg_value *cg_value_of(const cg_program *p, int d, const ir_value *v)
{
    if (d < 0 || d >= p->ndevices || v->id >= p->graph->nvalues)
        return NULL;
    int s = p->devices[d].slot_by_id[v->id];
    return s >= 0 ? &p->devices[d].values[s] : NULL;
}

void cg_program_free(cg_program *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nkernels; i++)
        base_free(p->kernels[i].name);
    base_free(p->kernels);
    for (int i = 0; i < p->nmodules; i++) {
        cg_module *m = &p->modules[i];
        base_free(m->source);
        base_free(m->kernels);
        base_free(m->kernel_line);
        for (int j = 0; j < m->nimages; j++)
            base_free(m->images[j].data);
        base_free(m->images);
        base_free(m->log);
    }
    base_free(p->modules);
    cg_pool_free(p);
    base_free(p);
}

#ifndef GNC_HAVE_NVRTC
int cg_have_nvrtc(void) { return 0; }
const char *cg_nvrtc_version(void) { return NULL; }

int cg_compile(cg_program *p, const cg_compile_options *o, cg_compile_stats *stats, char *err,
               size_t errlen)
{
    (void)p, (void)o;
    if (stats)
        memset(stats, 0, sizeof *stats);
    snprintf(err, errlen, "this gnc was built without the CUDA toolkit: no NVRTC to compile with");
    return -1;
}
#endif
