/* The CUDA C of the kernels: one __global__ function per fused node (or per
 * part of one that a library call does not take) and per op that no library
 * serves, specialized to its shapes, its operands and results named after
 * their values, each op under a comment with its DSL line.
 *
 * A kernel computes members m[0 .. nm-1] of a fused node:
 *   - map ops only: a thread per 4 consecutive elements where the element
 *     count allows (float4 or 8-byte accesses to operands of the result's
 *     shape), else per element; each member in registers, only results read
 *     after the kernel stored;
 *   - map ops (the prologue), one special op, map ops on its first result (the
 *     epilogue): the special op's template (a row, a channel, a plane per warp
 *     or block, ...) reads its first operand through x_at(i), which computes
 *     the prologue at element i, and stores its result through y_put(i, v),
 *     which applies the epilogue.
 * Map ops compute element i of their result from i alone: elementwise ops,
 * broadcasting, pooling and its gradients as gathers, data movement, dropout,
 * the optimizers.
 *
 * Reductions sum in a fixed tree (warp shuffles, then one warp over the
 * warps' partial sums), so a kernel gives the same bits on every run; where
 * the CPU executor sums in double, so do these.  Scatters are gathers
 * (pooling gradients) or owned by one thread (embedding_grad): no atomics.
 *
 * Before a kernel is added, its memory accesses are checked: a kernel may
 * write an element it reads only from the thread that reads it (in place);
 * anything else that overlaps makes cg_emit_kernel return -1, and the caller
 * splits the fused node.
 *
 * This file has the map ops and map kernels; special.c the special ops'
 * templates and cg_emit_kernel; kb.c the builder they share (kb.h); glue.c
 * the kernels the program makes for itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kb.h"

/* ---------------------------------------------------------------- map ops */

int cg_is_map(const ir_node *n)
{
    return ir_op_is(n->op, IR_MAP);
}

/* outer x len x inner around axis */
void kb_around(const ir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dims[i];
    *len = t->dims[axis];
}

/* The channel of element idx of an [n, c, ...] tensor t as the kernel
 * stores it: dim 1, or the last of a channels-last [n, h, w, c]. */
static const char *channel(kb *k, const ir_type *t)
{
    int64_t inner = 1;
    for (int i = 2; i < t->rank; i++)
        inner *= t->dims[i];
    cg_sb b = {0};
    if (k->nhwc)
        kb_term(&b, k->idx, 1, t->dims[3], 1);
    else
        kb_term(&b, k->idx, inner, t->dims[1], 1);
    const char *c = kb_tmp(k, "chan");
    kb_line(k, "const %s %s = %s;", k->itype, c, b.s);
    cg_sb_free(&b);
    return c;
}

/* Pooling geometry: input plane h x w, output oh x ow. */
typedef struct {
    int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
} pool_geom;

static pool_geom pool_of(const ir_node *n, const ir_type *in, const ir_type *out)
{
    pool_geom g;
    const int64_t *kk = ir_attr_ints(n, "kernel", NULL), *st = ir_attr_ints(n, "stride", NULL),
                  *pd = ir_attr_ints(n, "pad", NULL);
    const ir_attr *dl = ir_get_attr(n, "dilation");
    g.h = in->dims[2], g.w = in->dims[3], g.oh = out->dims[2], g.ow = out->dims[3];
    g.kh = kk[0], g.kw = kk[1], g.sh = st[0], g.sw = st[1], g.ph = pd[0], g.pw = pd[1];
    g.dh = dl ? dl->ints[0] : 1, g.dw = dl ? dl->ints[1] : 1;
    return g;
}

/* Whether the windows tile the input, as rt_pool_tiles decides: none padded,
 * overlapping or past the input (ceil_mode's last). */
static int pool_tiles(const pool_geom *g)
{
    return g->kh == g->sh && g->kw == g->sw && g->ph == 0 && g->pw == 0 && g->oh * g->kh <= g->h &&
           g->ow * g->kw <= g->w;
}

/* Splits idx of an [planes, rows, cols] tensor into plane, row and col locals. */
static void plane_coords(kb *k, int64_t rows, int64_t cols, const char **pl, const char **r,
                         const char **c)
{
    *pl = kb_tmp(k, "plane"), *r = kb_tmp(k, "py"), *c = kb_tmp(k, "px");
    kb_line(k, "const %s %s = %s / %lld, %s = %s / %lld %% %lld, %s = %s %% %lld;", k->itype, *pl,
            k->idx, (long long)(rows * cols), *r, k->idx, (long long)cols, (long long)rows, *c,
            k->idx, (long long)cols);
}

/* A pooling kernel's plane (an image's channel) of element idx: pl of
 * [planes, rows, cols] NCHW tensors; image nb and channel ch of c of [n,
 * rows, cols, c] channels-last ones. */
typedef struct {
    const char *pl, *nb, *ch;
    int nhwc;
    int64_t c;
} plane_ix;

/* Splits the kernel's element idx of a [planes, rows, cols] tensor (as the
 * kernel stores it) into its plane, row and col. */
static plane_ix pool_coords(kb *k, int64_t rows, int64_t cols, const char **r, const char **c)
{
    plane_ix p = {0};
    if (!k->nhwc) {
        plane_coords(k, rows, cols, &p.pl, r, c);
        return p;
    }
    long long ch = (long long)k->iter->dims[3];
    p.nhwc = 1, p.c = ch;
    p.nb = kb_tmp(k, "img"), p.ch = kb_tmp(k, "ch"), *r = kb_tmp(k, "py"), *c = kb_tmp(k, "px");
    kb_line(k, "const %s %s = %s %% %lld, %s = %s / %lld %% %lld, %s = %s / %lld %% %lld, "
            "%s = %s / %lld;", k->itype, p.ch, k->idx, ch, *c, k->idx, ch, (long long)cols, *r,
            k->idx, ch * (long long)cols, (long long)rows, p.nb, k->idx,
            ch * (long long)cols * (long long)rows);
    return p;
}

/* The index of (y, x) in plane p of an h x w tensor. */
static const char *pix(kb *k, const plane_ix *p, int64_t h, int64_t w, const char *y,
                       const char *x)
{
    if (!p->nhwc)
        return kb_kstr(k, "(%s * %lld + %s) * %lld + %s", p->pl, (long long)h, y, (long long)w, x);
    return kb_kstr(k, "((%s * %lld + %s) * %lld + %s) * %lld + %s", p->nb, (long long)h, y,
                   (long long)w, x, (long long)p->c, p->ch);
}

/* The first maximum of maxpool's window (oy, ox) of plane pl, as grad.c finds
 * it: into arg (-1: none). */
static void window_argmax(kb *k, const pool_geom *g, const char *x, const plane_ix *pl,
                          const char *oy, const char *ox, const char *arg)
{
    const char *m = kb_tmp(k, "pool_max");
    kb_line(k, "float %s = NEG_INF;", m);
    kb_line(k, "for (int ky = 0; ky < %lld; ky++) {", (long long)g->kh);
    k->indent++;
    kb_line(k, "const %s iy = %s * %lld - %lld + ky * %lld;", k->itype, oy, (long long)g->sh,
            (long long)g->ph, (long long)g->dh);
    kb_line(k, "if (iy < 0 || iy >= %lld)", (long long)g->h);
    kb_line(k, "    continue;");
    kb_line(k, "for (int kx = 0; kx < %lld; kx++) {", (long long)g->kw);
    k->indent++;
    kb_line(k, "const %s ix = %s * %lld - %lld + kx * %lld;", k->itype, ox, (long long)g->sw,
            (long long)g->pw, (long long)g->dw);
    kb_line(k, "if (ix < 0 || ix >= %lld)", (long long)g->w);
    kb_line(k, "    continue;");
    kb_line(k, "const float v = ld(%s, %s);", x, pix(k, pl, g->h, g->w, "iy", "ix"));
    kb_line(k, "if (%s < 0 || v > %s || v != v) {", arg, m);
    kb_line(k, "    %s = v;", m);
    kb_line(k, "    %s = iy * %lld + ix;", arg, (long long)g->w);
    kb_line(k, "    if (v != v)");
    kb_line(k, "        goto %s_found;", arg);
    kb_line(k, "}");
    k->indent--;
    kb_line(k, "}");
    k->indent--;
    kb_line(k, "}");
    kb_line(k, "%s_found:;", arg);
}

/* The windows of a pooling over [h, w] whose output rows contain input row y:
 * oy in [lo, hi], stepping where (y + pad - oy stride) is a multiple of the
 * dilation below kernel x dilation. */
static void window_range(kb *k, const char *y, int64_t pad, int64_t stride, int64_t kern,
                         int64_t dil, int64_t out, const char *lo, const char *hi)
{
    /* oy stride <= y + pad, oy stride > y + pad - kern dil (first tap reaches y) */
    int64_t span = (kern - 1) * dil;
    kb_line(k, "const %s %s = %s + %lld < %lld ? 0 : (%s + %lld - %lld + %lld) / %lld;", k->itype,
            lo,
            y, (long long)pad, (long long)span, y, (long long)pad, (long long)span,
            (long long)(stride - 1), (long long)stride);
    kb_line(k, "const %s %s = (%s + %lld) / %lld < %lld ? (%s + %lld) / %lld : %lld;", k->itype, hi,
            y, (long long)pad, (long long)stride, (long long)(out - 1), y, (long long)pad,
            (long long)stride, (long long)(out - 1));
}

/* Element i of a pointwise op's result from its operands' element i: the
 * arithmetic, the activations and their gradients, batchnorm's applications,
 * dropout. */
static void emit_pointwise(kb *k, const ir_node *n)
{
    cg_gen *G = k->G;
    const ir_value *y = n->out[0];
    int nattrs = ir_arith_attrs(n->op);
    if (nattrs >= 0) { /* ops.def's UNARY table: ir/arith.h's ar_NAME(operands, attributes) */
        double at[2];
        ir_float_attrs(n, at, 2);
        const char *call = kb_kstr(k, "ar_%s(%s", ir_ops[n->op].name, kb_opnd(k, n->in[0]));
        if (n->nin == 2)
            call = kb_kstr(k, "%s, %s", call, kb_opnd(k, n->in[1]));
        for (int i = 0; i < nattrs; i++)
            call = kb_kstr(k, "%s, %s", call, kb_flit(k, at[i]));
        kb_set(k, y, kb_kstr(k, "%s)", call));
        return;
    }
#define a kb_opnd(k, n->in[0])
    switch (n->op) {
    case IR_OP_CONST: {
        const char *lit = kb_flit(k, ir_attr_float(n, "value"));
        if (!ir_is_float(y->type.dtype))
            lit = kb_kstr(k, "(%s)%lld", kb_rtype(cg_dtype_of(G, y)),
                          (long long)ir_attr_float(n, "value"));
        if (cg_const_scaled(G, y)) {
            k->scaler = 1;
            lit = kb_kstr(k, "%s * scaler->scale", lit);
        }
        kb_set(k, y, lit);
        return;
    }
    case IR_OP_ARANGE: { /* in double, then converted, as the CPU executor */
        double start = ir_attr_float(n, "start"), step = ir_attr_float(n, "step");
        if (ir_is_float(y->type.dtype))
            kb_set(k, y, kb_kstr(k, "(float)(%.17g + (double)%s * %.17g)", start, k->idx, step));
        else
            kb_set(k, y, kb_kstr(k, "(%s)((i64)%lld + (i64)%s * (i64)%lld)",
                                 kb_rtype(cg_dtype_of(G, y)), (long long)start, k->idx,
                                 (long long)step));
        return;
    }
    case IR_OP_CAST: {
        ir_dtype from = n->in[0]->type.dtype, to = y->type.dtype;
        if (ir_is_float(from) && !ir_is_float(to))
            kb_set(k, y, kb_kstr(k, "cast_%s_f(%s)", to == IR_I32 ? "i32" : to == IR_I64 ? "i64" : "u8",
                                 a));
        else if (!ir_is_float(from) && !ir_is_float(to) && to != IR_I64)
            kb_set(k, y, kb_kstr(k, "(%s)(unsigned%s)(%s)", kb_rtype(cg_dtype_of(G, y)),
                                 to == IR_I32 ? " int" : " char", a));
        else
            kb_set(k, y, kb_kstr(k, "(%s)(%s)", kb_rtype(cg_dtype_of(G, y)), a));
        return;
    }
    case IR_OP_DROPOUT: /* identity at inference */
    case IR_OP_RESHAPE:
        if (ir_type_eq(kb_type(k, n->in[0]), k->iter))
            kb_set(k, y, a);
        else /* a reshape heading a kernel: the same element index, so aligned
                (the result may be the operand's bytes: a view, memplan.c) */
            kb_set(k, y, cg_const_inline(k->G, n->in[0]) ? kb_opnd(k, n->in[0])
                         : kb_kstr(k, "ld(%s, %s)", kb_reads(k, n->in[0], 1), k->idx));
        return;
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: {
        static const char ops[] = "+-*/";
        kb_set(k, y,
               kb_kstr(k, "%s %c %s", kb_opnd(k, n->in[0]), ops[n->op - IR_OP_ADD],
                       kb_opnd(k, n->in[1])));
        return;
    }
    case IR_OP_MAXIMUM: case IR_OP_MINIMUM:
        kb_set(k, y, kb_kstr(k, "%s_f(%s, %s)", ir_ops[n->op].name, kb_opnd(k, n->in[0]),
                             kb_opnd(k, n->in[1])));
        return;
    case IR_OP_GT: case IR_OP_LT: case IR_OP_GE: case IR_OP_LE: case IR_OP_EQ: case IR_OP_NE: {
        static const char *const cmp[] = {">", "<", ">=", "<=", "==", "!="}; /* ORDER ops.def */
        kb_set(k, y, kb_kstr(k, "%s %s %s ? 1.0f : 0.0f", kb_opnd(k, n->in[0]),
                             cmp[n->op - IR_OP_GT], kb_opnd(k, n->in[1])));
        return;
    }
    case IR_OP_WHERE: /* a NaN condition is true, as on the CPU */
        kb_set(k, y, kb_kstr(k, "%s != 0.0f ? %s : %s", kb_opnd(k, n->in[0]),
                             kb_opnd(k, n->in[1]), kb_opnd(k, n->in[2])));
        return;
    case IR_OP_BATCHNORM: { /* scale = w / sqrt(var + eps), shift = b - mean scale */
        const char *c = channel(k, k->iter), *sc = kb_tmp(k, "bn_scale");
        kb_line(k, "const float %s = %s / sqrtf(%s + %s);", sc, kb_at_index(k, n->in[1], c),
                kb_at_index(k, n->in[4], c), kb_flit(k, ir_attr_float(n, "eps")));
        kb_set(k, y, kb_kstr(k, "%s * %s + (%s - %s * %s)", a, sc, kb_at_index(k, n->in[2], c),
                             kb_at_index(k, n->in[3], c), sc));
        return;
    }
    case IR_OP_BATCHNORM_APPLY: { /* as rt_bn_normalize */
        const char *c = channel(k, k->iter);
        kb_set(k, y, kb_kstr(k, "(%s - %s) * (%s * %s) + %s", a, kb_at_index(k, n->in[3], c),
                             kb_at_index(k, n->in[1], c), kb_at_index(k, n->in[4], c),
                          kb_at_index(k, n->in[2], c)));
        return;
    }
    case IR_OP_BN_FOLD_SCALE:
        kb_set(k, y, kb_kstr(k, "(float)((double)%s / sqrt((double)%s + %s))", kb_opnd(k, n->in[0]),
                             kb_opnd(k, n->in[1]), kb_dlit(k, ir_attr_float(n, "eps"))));
        return;
    case IR_OP_DROPOUT_TRAIN: {
        double p = ir_attr_float(n, "p");
        uint64_t thr = p <= 0 ? 0 : p >= 1 ? (uint64_t)1 << 53 : (uint64_t)ceil(ldexp(p, 53));
        const char *key = kb_tmp(k, "drop_key");
        cg_sb_printf(&k->pre, "    const u64 %s = dropout_key(%s, %s, %lld);\n", key,
                     kb_at_index(k, n->in[2], "0"), kb_at_index(k, n->in[1], "0"),
                     (long long)ir_attr_int(n, "salt"));
        int ns;
        const int64_t *sh = ir_attr_ints(n, "shard", &ns);
        const char *at = k->idx;
        if (ns == 3) { /* the element's index in the whole tensor, in i64: the whole may
                          have 2^31 elements where this device's part has fewer */
            const ir_type *t = &n->in[0]->type;
            int64_t part = t->dims[sh[0]], inner = 1;
            for (int d = (int)sh[0] + 1; d < t->rank; d++)
                inner *= t->dims[d];
            at = kb_tmp(k, "drop_at");
            kb_line(k, "const i64 %s = (i64)(%s / %lld) * %lld + (i64)(%lld + %s / %lld %% %lld) * "
                    "%lld + %s %% %lld;", at, k->idx, (long long)(part * inner),
                    (long long)(sh[2] * inner), (long long)sh[1], k->idx, (long long)inner,
                 (long long)part, (long long)inner, k->idx, (long long)inner);
        }
        const char *mask = kb_tmp(k, "drop_mask");
        kb_line(k, "const float %s = dropout_keep(%s, %s, %lluull) ? %s : 0.0f;", mask, key, at,
                (unsigned long long)thr, kb_flit(k, 1.0 / (1.0 - p)));
        kb_set(k, n->out[1], mask);
        kb_set(k, y, kb_kstr(k, "%s * %s", a, mask));
        return;
    }
    default:
        cg_fail(G, n, "no map kernel for %s", ir_ops[n->op].name);
        kb_set(k, y, "0.0f");
    }
#undef a
}

/* An optimizer's step at element i of its parameter (and its state). */
static void emit_optimizer(kb *k, const ir_node *n)
{
    cg_gen *G = k->G;
    const ir_value *y = n->out[0];
#define a kb_opnd(k, n->in[0])
    switch (n->op) {
    case IR_OP_SGD: {
        float mom = (float)ir_attr_float(n, "momentum");
        float wd = (float)ir_attr_float(n, "weight_decay");
        const char *p = kb_opnd(k, n->in[0]), *g = kb_opnd(k, n->in[1]);
        const char *gg = kb_tmp(k, "grad"), *d = kb_tmp(k, "dir");
        kb_line(k, "float %s = %s;", gg, g);
        if (G->p->loss_scale.enabled) {
            k->scaler = k->scaler_write = 1;
            kb_line(k, "%s *= scaler->inv_scale;", gg);
            kb_line(k, "if (!(fabsf(%s) <= 3.40282347e38f))", gg);
            kb_line(k, "    scaler->found_inf = 1;");
        }
        kb_line(k, "float %s = %s + %s * %s;", d, gg, kb_flit(k, wd), p);
        if (n->nin == 4) {
            const char *b = kb_tmp(k, "mom_buf");
            kb_line(k, "const float %s = %s * %s + %s;", b, kb_flit(k, mom), kb_opnd(k, n->in[3]),
                    d);
            kb_set(k, n->out[1], b);
            if (ir_attr_int(n, "nesterov"))
                kb_line(k, "%s = %s + %s * %s;", d, d, kb_flit(k, mom), b);
            else
                kb_line(k, "%s = %s;", d, b);
        }
        kb_set(k, y, kb_kstr(k, "%s - %s * %s", p, kb_opnd(k, n->in[2]), d));
        return;
    }
    case IR_OP_ADAM: {
        double b1 = ir_attr_float(n, "beta1"), b2 = ir_attr_float(n, "beta2");
        const char *lr = kb_tmp(k, "adam_lr"), *ss = kb_tmp(k, "step_size");
        const char *bc2 = kb_tmp(k, "bc2");
        const char *t = kb_tmp(k, "t");
        cg_sb_printf(&k->pre, "    const float %s = %s;\n", lr, kb_at_index(k, n->in[4], "0"));
        cg_sb_printf(&k->pre, "    const double %s = (double)(%s + 1);\n", t,
                     kb_at_index(k, n->in[5], "0"));
        cg_sb_printf(&k->pre, "    const float %s = (float)(%s / (1.0 - pow(%s, %s)));\n", ss, lr,
                     kb_dlit(k, b1), t);
        cg_sb_printf(&k->pre, "    const float %s = (float)sqrt(1.0 - pow(%s, %s));\n", bc2,
                     kb_dlit(k, b2), t);
        const char *q = kb_tmp(k, "param"), *d = kb_tmp(k, "dir");
        const char *mm = kb_tmp(k, "m2"), *vv = kb_tmp(k, "v2");
        float wd = (float)ir_attr_float(n, "weight_decay");
        kb_line(k, "float %s = %s, %s = %s;", q, kb_opnd(k, n->in[0]), d, kb_opnd(k, n->in[1]));
        if (G->p->loss_scale.enabled) {
            k->scaler = k->scaler_write = 1;
            kb_line(k, "%s *= scaler->inv_scale;", d);
            kb_line(k, "if (!(fabsf(%s) <= 3.40282347e38f))", d);
            kb_line(k, "    scaler->found_inf = 1;");
        }
        if (ir_attr_int(n, "decoupled"))
            kb_line(k, "%s *= 1.0f - %s * %s;", q, lr, kb_flit(k, wd));
        else
            kb_line(k, "%s += %s * %s;", d, kb_flit(k, wd), q);
        kb_line(k, "const float %s = %s * %s + (1.0f - %s) * %s;", mm, kb_flit(k, b1),
                kb_opnd(k, n->in[2]),
                kb_flit(k, b1), d);
        kb_line(k, "const float %s = %s * %s + (1.0f - %s) * %s * %s;", vv, kb_flit(k, b2),
                kb_opnd(k, n->in[3]), kb_flit(k, b2), d, d);
        kb_set(k, n->out[1], mm);
        kb_set(k, n->out[2], vv);
        kb_set(k, y, kb_kstr(k, "%s - %s * %s / (sqrtf(%s) / %s + %s)", q, ss, mm, vv, bc2,
                             kb_flit(k, ir_attr_float(n, "eps"))));
        return;
    }
    default:
        cg_fail(G, n, "no map kernel for %s", ir_ops[n->op].name);
        kb_set(k, y, "0.0f");
    }
#undef a
}

/* Data movement: element i of the result gathered from wherever it comes
 * from in the operands. */
static void emit_movement(kb *k, const ir_node *n)
{
    cg_gen *G = k->G;
    const ir_value *y = n->out[0];
#define a kb_opnd(k, n->in[0])
    switch (n->op) {
    case IR_OP_BROADCAST_TO:
        kb_set(k, y, kb_at_index(k, n->in[0],
                                 kb_crossed(k, n->in[0])
                                     ? kb_cross_index(k, n->in[0], k->idx)
                                     : kb_bcast_index(k, kb_type(k, n->in[0]), k->iter, k->idx)));
        return;
    case IR_OP_TRANSPOSE: {
        const ir_type *t = &n->in[0]->type, *to = &y->type;
        const int64_t *perm = ir_attr_ints(n, "perm", NULL);
        int64_t ist[IR_MAX_RANK], s = 1, os = 1;
        for (int i = t->rank - 1; i >= 0; i--)
            ist[i] = s, s *= t->dims[i];
        cg_sb b = {0};
        for (int i = to->rank - 1; i >= 0; i--) {
            if (to->dims[i] > 1)
                kb_term(&b, k->idx, os, i == 0 ? 0 : to->dims[i], ist[perm[i]]);
            os *= to->dims[i];
        }
        kb_set(k, y, kb_at_index(k, n->in[0], b.len ? kb_kstr(k, "%s", b.s) : "0"));
        cg_sb_free(&b);
        return;
    }
    case IR_OP_SLICE: {
        int64_t outer, len, inner;
        kb_around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
        int64_t start = ir_attr_int(n, "start"), size = ir_attr_int(n, "size");
        const char *ix = kb_kstr(k,
                                 "%s / %lld * %lld + (%lld + %s / %lld %% %lld) * %lld + %s %% %lld",
                                 k->idx, (long long)(size * inner), (long long)(len * inner),
                                 (long long)start, k->idx, (long long)inner, (long long)size,
                              (long long)inner, k->idx, (long long)inner);
        kb_set(k, y, kb_at_index(k, n->in[0], ix));
        return;
    }
    case IR_OP_PAD: { /* the operand's element where the coordinates fall inside it */
        const ir_type *t = &n->in[0]->type, *to = &y->type;
        const int64_t *before = ir_attr_ints(n, "before", NULL);
        double value = ir_attr_float(n, "value");
        const char *in = kb_tmp(k, "pad_in"), *src = kb_tmp(k, "pad_src");
        const char *rem = kb_tmp(k, "pad_rem"), *c = kb_tmp(k, "pad_c");
        kb_line(k, "%s %s = 1, %s = 0, %s = %s, %s;", k->itype, in, src, rem, k->idx, c);
        int64_t st = 1;
        for (int d = to->rank - 1; d >= 0; d--) {
            kb_line(k, "%s = %s %% %lld - %lld;", c, rem, (long long)to->dims[d],
                    (long long)before[d]);
            if (d > 0)
                kb_line(k, "%s /= %lld;", rem, (long long)to->dims[d]);
            kb_line(k, "%s &= %s >= 0 && %s < %lld;", in, c, c, (long long)t->dims[d]);
            kb_line(k, "%s += %s * %lld;", src, c, (long long)st);
            st *= t->dims[d];
        }
        const char *lit = ir_is_float(y->type.dtype)
                              ? kb_flit(k, value)
                              : kb_kstr(k, "(%s)%lld", kb_rtype(cg_dtype_of(G, y)), (long long)value);
        kb_set(k, y, kb_kstr(k, "%s ? %s : %s", in, kb_at_index(k, n->in[0], src), lit));
        return;
    }
    case IR_OP_CONCAT: {
        int64_t outer, len, inner;
        int axis = (int)ir_attr_int(n, "axis");
        kb_around(&y->type, axis, &outer, &len, &inner);
        const char *pos = kb_tmp(k, "cat_pos"), *u = kb_tmp(k, "cat_outer");
        const char *r = kb_tmp(k, "cat_inner"), *v = kb_tmp(k, "cat_v");
        kb_line(k, "const %s %s = %s / %lld %% %lld, %s = %s / %lld, %s = %s %% %lld;", k->itype,
                pos,
                k->idx, (long long)inner, (long long)len, u, k->idx, (long long)(len * inner), r,
                k->idx, (long long)inner);
        kb_line(k, "%s %s;", kb_rtype(cg_dtype_of(G, y)), v);
        int64_t at = 0;
        for (int i = 0; i < n->nin; i++) {
            int64_t l = n->in[i]->type.dims[axis];
            const char *ix = kb_kstr(k, "(%s * %lld + %s - %lld) * %lld + %s", u, (long long)l, pos,
                                     (long long)at, (long long)inner, r);
            if (i < n->nin - 1)
                kb_line(k, "%sif (%s < %lld)", i ? "else " : "", pos, (long long)(at + l));
            else if (i)
                kb_line(k, "else");
            kb_line(k, "    %s = %s;", v, kb_at_index(k, n->in[i], ix));
            at += l;
        }
        kb_set(k, y, v);
        return;
    }
    case IR_OP_EMBEDDING: { /* the id's row, 0 for another shard's (ops.def) */
        const ir_type *tw = &n->in[1]->type;
        int64_t num = tw->dims[0], dim = tw->dims[1], of = ir_attr_int(n, "shard_of");
        int64_t rows = of ? of : num, start = ir_attr_int(n, "shard_start");
        const char *id = kb_tmp(k, "emb_id"), *row = kb_tmp(k, "emb_row");
        k->status = 1;
        kb_line(k, "const i64 %s = %s;", id,
                kb_at_index(k, n->in[0],
                            kb_kstr(k, "%s / %lld", k->idx, (long long)dim)));
        kb_line(k, "if ((%s < 0 || %s >= %lld) && %s %% %lld == 0)", id, id, (long long)rows,
                k->idx, (long long)dim);
        kb_line(k, "    report(status, %d, (int)step, %s / %lld, %s);", CG_STATUS_EMBEDDING_INDEX,
                k->idx, (long long)dim, id);
        kb_line(k, "const i64 %s = %s - %lld;", row, id, (long long)start);
        kb_set(k, y, kb_kstr(k, "%s >= 0 && %s < %lld ? %s : 0.0f", row, row, (long long)num,
                             kb_at_index(k, n->in[1],
                                         kb_kstr(k, "%s * %lld + %s %% %lld", row, (long long)dim,
                                                           k->idx, (long long)dim))));
        return;
    }
    default:
        cg_fail(G, n, "no map kernel for %s", ir_ops[n->op].name);
        kb_set(k, y, "0.0f");
    }
#undef a
}

/* upsample2d as ir_upsample_taps computes it (the prelude's upsample_taps), the
 * ratios as their float bits; its gradient gathers, for each input element, the
 * outputs that read it (ir_upsample_readers' ranges) in output order. */
static void emit_upsample(kb *k, const ir_node *n)
{
    const ir_value *y = n->out[0];
    int fwd = n->op == IR_OP_UPSAMPLE2D;
    const ir_type *t = fwd ? &n->in[0]->type : &y->type, *to = fwd ? &y->type : &n->in[0]->type;
    long long h = t->dims[2], w = t->dims[3], oh = to->dims[2], ow = to->dims[3];
    int bil = (int)ir_attr_int(n, "mode"), al = (int)ir_attr_int(n, "align_corners");
    float rh = ir_upsample_ratio(h, oh, bil, al, ir_attr_float(n, "scale_h"));
    float rw = ir_upsample_ratio(w, ow, bil, al, ir_attr_float(n, "scale_w"));
    uint32_t bh, bw;
    memcpy(&bh, &rh, sizeof bh);
    memcpy(&bw, &rw, sizeof bw);
    /* the arguments after the index of upsample_taps, upsample_first, upsample_weight */
    const char *ah = kb_kstr(k, "%lld, %lld, %d, %d, __uint_as_float(0x%08xu)", h, oh, bil, al,
                             (unsigned)bh);
    const char *aw = kb_kstr(k, "%lld, %lld, %d, %d, __uint_as_float(0x%08xu)", w, ow, bil, al,
                             (unsigned)bw);
    const char *pl, *r, *c, *in = kb_reads(k, n->in[0], 0);
    if (fwd) {
        plane_coords(k, oh, ow, &pl, &r, &c);
        kb_line(k, "i64 y0, y1, x0, x1;");
        kb_line(k, "float ly0, ly1, lx0, lx1;");
        kb_line(k, "upsample_taps(%s, %s, &y0, &y1, &ly0, &ly1);", r, ah);
        kb_line(k, "upsample_taps(%s, %s, &x0, &x1, &lx0, &lx1);", c, aw);
        const char *at[2][2];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                at[i][j] = kb_kstr(k, "ld(%s, (%s * %lld + y%d) * %lld + x%d)", in, pl, h, i, w, j);
        if (bil) /* ly0 (lx0 x00 + lx1 x01) + ly1 (lx0 x10 + lx1 x11), as the CPU's */
            kb_set(k, y, kb_kstr(k, "ly0 * (lx0 * %s + lx1 * %s) + ly1 * (lx0 * %s + lx1 * %s)",
                                 at[0][0], at[0][1], at[1][0], at[1][1]));
        else
            kb_set(k, y, at[0][0]);
        return;
    }
    const char *s = kb_tmp(k, "up_sum");
    plane_coords(k, h, w, &pl, &r, &c);
    kb_line(k, "const i64 oy0 = upsample_first((i64)%s - %d, %s);", r, bil, ah);
    kb_line(k, "const i64 oy1 = upsample_first((i64)%s + 1, %s);", r, ah);
    kb_line(k, "const i64 ox0 = upsample_first((i64)%s - %d, %s);", c, bil, aw);
    kb_line(k, "const i64 ox1 = upsample_first((i64)%s + 1, %s);", c, aw);
    kb_line(k, "float %s = 0.0f;", s);
    kb_line(k, "for (i64 oy = oy0; oy < oy1; oy++) {");
    k->indent++;
    kb_line(k, "const float wy = upsample_weight(oy, %s, %s);", r, ah);
    kb_line(k, "for (i64 ox = ox0; ox < ox1; ox++)");
    kb_line(k, "    %s += wy * upsample_weight(ox, %s, %s) * ld(%s, (%s * %lld + oy) * %lld + ox);",
            s, c, aw, in, pl, oh, ow);
    k->indent--;
    kb_line(k, "}");
    kb_set(k, y, s);
}

/* Pooling and its gradients, as gathers over the windows holding element i. */
static void emit_pooling(kb *k, const ir_node *n)
{
    cg_gen *G = k->G;
    const ir_value *y = n->out[0];
#define a kb_opnd(k, n->in[0])
    switch (n->op) {
    case IR_OP_MAXPOOL2D: {
        pool_geom g = pool_of(n, &n->in[0]->type, &y->type);
        const char *oy, *ox, *m = kb_tmp(k, "pool_max");
        plane_ix pl = pool_coords(k, g.oh, g.ow, &oy, &ox);
        const char *x = kb_reads(k, n->in[0], 0);
        kb_line(k, "float %s = NEG_INF; /* padding never wins */", m);
        kb_line(k, "for (int ky = 0; ky < %lld; ky++) {", (long long)g.kh);
        k->indent++;
        kb_line(k, "const %s iy = %s * %lld - %lld + ky * %lld;", k->itype, oy, (long long)g.sh,
                (long long)g.ph, (long long)g.dh);
        kb_line(k, "if (iy < 0 || iy >= %lld)", (long long)g.h);
        kb_line(k, "    continue;");
        kb_line(k, "for (int kx = 0; kx < %lld; kx++) {", (long long)g.kw);
        k->indent++;
        kb_line(k, "const %s ix = %s * %lld - %lld + kx * %lld;", k->itype, ox, (long long)g.sw,
                (long long)g.pw, (long long)g.dw);
        kb_line(k, "const float v = ix >= 0 && ix < %lld ? ld(%s, %s) : NEG_INF;", (long long)g.w,
                x, pix(k, &pl, g.h, g.w, "iy", "ix"));
        kb_line(k, "%s = v > %s || v != v ? v : %s;", m, m, m);
        k->indent--;
        kb_line(k, "}");
        k->indent--;
        kb_line(k, "}");
        kb_set(k, y, m);
        return;
    }
    case IR_OP_AVGPOOL2D: {
        pool_geom g = pool_of(n, &n->in[0]->type, &y->type);
        const char *oy, *ox, *s = kb_tmp(k, "pool_sum");
        plane_ix pl = pool_coords(k, g.oh, g.ow, &oy, &ox);
        const char *x = kb_reads(k, n->in[0], 0);
        kb_line(k, "float %s = 0.0f;", s);
        if (pool_tiles(&g)) { /* windows tile */
            kb_line(k, "for (int ky = 0; ky < %lld; ky++)", (long long)g.kh);
            kb_line(k, "    for (int kx = 0; kx < %lld; kx++)", (long long)g.kw);
            kb_line(k, "        %s += ld(%s, %s);", s, x,
                    pix(k, &pl, g.h, g.w, kb_kstr(k, "%s * %lld + ky", oy, (long long)g.kh),
                        kb_kstr(k, "%s * %lld + kx", ox, (long long)g.kw)));
            kb_set(k, y, kb_kstr(k, "%s * %s", s, kb_flit(k, 1.0f / (float)(g.kh * g.kw))));
            return;
        }
        int incl = ir_attr_int(n, "count_include_pad") != 0;
        kb_line(k, "const %s y0 = %s * %lld - %lld, x0 = %s * %lld - %lld;", k->itype, oy,
                (long long)g.sh, (long long)g.ph, ox, (long long)g.sw, (long long)g.pw);
        kb_line(k,
                "const %s y1 = y0 + %lld < %lld ? y0 + %lld : %lld, x1 = x0 + %lld < %lld ? x0 + "
                "%lld : %lld;", k->itype, (long long)g.kh, (long long)(g.h + g.ph), (long long)g.kh,
                (long long)(g.h + g.ph), (long long)g.kw, (long long)(g.w + g.pw), (long long)g.kw,
             (long long)(g.w + g.pw));
        kb_line(k, "const %s ya = y0 < 0 ? 0 : y0, yb = y1 > %lld ? %lld : y1;", k->itype,
                (long long)g.h, (long long)g.h);
        kb_line(k, "const %s xa = x0 < 0 ? 0 : x0, xb = x1 > %lld ? %lld : x1;", k->itype,
                (long long)g.w, (long long)g.w);
        kb_line(k, "for (%s iy = ya; iy < yb; iy++)", k->itype);
        kb_line(k, "    for (%s ix = xa; ix < xb; ix++)", k->itype);
        kb_line(k, "        %s += ld(%s, %s);", s, x, pix(k, &pl, g.h, g.w, "iy", "ix"));
        kb_set(k, y, kb_kstr(k, "%s / (float)(%s)", s,
                             incl ? "(y1 - y0) * (x1 - x0)" : "(yb - ya) * (xb - xa)"));
        return;
    }
    case IR_OP_AVGPOOL2D_GRAD: { /* dx: the share of every window holding it, in window order */
        pool_geom g = pool_of(n, &y->type, &n->in[0]->type);
        const char *iy, *ix, *s = kb_tmp(k, "pool_sum");
        plane_ix pl = pool_coords(k, g.h, g.w, &iy, &ix);
        const char *dy = kb_reads(k, n->in[0], 0);
        if (pool_tiles(&g)) {
            kb_set(k, y,
                   kb_kstr(k, "%s < %lld && %s < %lld ? ld(%s, %s) * %s : 0.0f", iy,
                           (long long)(g.oh * g.kh), ix, (long long)(g.ow * g.kw), dy,
                           pix(k, &pl, g.oh, g.ow, kb_kstr(k, "%s / %lld", iy, (long long)g.kh),
                               kb_kstr(k, "%s / %lld", ix, (long long)g.kw)),
                           kb_flit(k, 1.0f / (float)(g.kh * g.kw))));
            return;
        }
        int incl = ir_attr_int(n, "count_include_pad") != 0;
        kb_line(k, "float %s = 0.0f;", s);
        window_range(k, iy, g.ph, g.sh, g.kh, 1, g.oh, "oy0", "oy1");
        window_range(k, ix, g.pw, g.sw, g.kw, 1, g.ow, "ox0", "ox1");
        kb_line(k, "for (%s oy = oy0; oy <= oy1; oy++)", k->itype);
        kb_line(k, "    for (%s ox = ox0; ox <= ox1; ox++) {", k->itype);
        k->indent += 2;
        kb_line(k, "const %s y0 = oy * %lld - %lld, x0 = ox * %lld - %lld;", k->itype,
                (long long)g.sh,
                (long long)g.ph, (long long)g.sw, (long long)g.pw);
        kb_line(k,
                "const %s y1 = y0 + %lld < %lld ? y0 + %lld : %lld, x1 = x0 + %lld < %lld ? x0 + "
                "%lld : %lld;", k->itype, (long long)g.kh, (long long)(g.h + g.ph), (long long)g.kh,
                (long long)(g.h + g.ph), (long long)g.kw, (long long)(g.w + g.pw), (long long)g.kw,
             (long long)(g.w + g.pw));
        kb_line(k, "const %s ya = y0 < 0 ? 0 : y0, yb = y1 > %lld ? %lld : y1;", k->itype,
                (long long)g.h, (long long)g.h);
        kb_line(k, "const %s xa = x0 < 0 ? 0 : x0, xb = x1 > %lld ? %lld : x1;", k->itype,
                (long long)g.w, (long long)g.w);
        kb_line(k, "%s += ld(%s, %s) / (float)(%s);", s, dy, pix(k, &pl, g.oh, g.ow, "oy", "ox"),
                incl ? "(y1 - y0) * (x1 - x0)" : "(yb - ya) * (xb - xa)");
        k->indent -= 2;
        kb_line(k, "    }");
        kb_set(k, y, s);
        return;
    }
    case IR_OP_MAXPOOL2D_GRAD: { /* dx: dy of every window whose first maximum it is */
        pool_geom g = pool_of(n, &n->in[1]->type, &n->in[0]->type);
        const char *iy, *ix, *s = kb_tmp(k, "pool_sum");
        plane_ix pl = pool_coords(k, g.h, g.w, &iy, &ix);
        const char *dy = kb_reads(k, n->in[0], 0), *x = kb_reads(k, n->in[1], 0);
        kb_line(k, "float %s = 0.0f;", s);
        window_range(k, iy, g.ph, g.sh, g.kh, g.dh, g.oh, "oy0", "oy1");
        window_range(k, ix, g.pw, g.sw, g.kw, g.dw, g.ow, "ox0", "ox1");
        kb_line(k, "for (%s oy = oy0; oy <= oy1; oy++)", k->itype);
        kb_line(k, "    for (%s ox = ox0; ox <= ox1; ox++) {", k->itype);
        k->indent += 2;
        kb_line(k, "%s arg = -1;", k->itype);
        window_argmax(k, &g, x, &pl, "oy", "ox", "arg");
        kb_line(k, "if (arg == %s * %lld + %s)", iy, (long long)g.w, ix);
        kb_line(k, "    %s += ld(%s, %s);", s, dy, pix(k, &pl, g.oh, g.ow, "oy", "ox"));
        k->indent -= 2;
        kb_line(k, "    }");
        kb_set(k, y, s);
        return;
    }
    case IR_OP_ADAPTIVE_AVGPOOL2D: { /* rt_adaptive_window's window */
        const ir_type *t = &n->in[0]->type;
        long long h = t->dims[2], w = t->dims[3], oh = y->type.dims[2], ow = y->type.dims[3];
        const char *pl, *oy, *ox, *s = kb_tmp(k, "pool_sum");
        plane_coords(k, oh, ow, &pl, &oy, &ox);
        const char *x = kb_reads(k, n->in[0], 0);
        /* in 64 bits: the products reach out x in, which the index type need not hold */
        kb_line(k, "const i64 y0 = (i64)%s * %lld / %lld, y1 = ((i64)%s * %lld + %lld) / %lld;", oy,
                h, oh, oy, h, h + oh - 1, oh);
        kb_line(k, "const i64 x0 = (i64)%s * %lld / %lld, x1 = ((i64)%s * %lld + %lld) / %lld;", ox,
                w, ow, ox, w, w + ow - 1, ow);
        kb_line(k, "float %s = 0.0f;", s);
        kb_line(k, "for (%s iy = (%s)y0; iy < (%s)y1; iy++)", k->itype, k->itype, k->itype);
        kb_line(k, "    for (%s ix = (%s)x0; ix < (%s)x1; ix++)", k->itype, k->itype, k->itype);
        kb_line(k, "        %s += ld(%s, (%s * %lld + iy) * %lld + ix);", s, x, pl, h, w);
        kb_set(k, y, kb_kstr(k, "%s / (float)((y1 - y0) * (x1 - x0))", s));
        return;
    }
    case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD: { /* rt_adaptive_holders' windows, in window order */
        const ir_type *t = &n->in[0]->type;
        long long h = y->type.dims[2], w = y->type.dims[3], oh = t->dims[2], ow = t->dims[3];
        const char *pl, *iy, *ix, *s = kb_tmp(k, "pool_sum");
        plane_coords(k, h, w, &pl, &iy, &ix);
        const char *dy = kb_reads(k, n->in[0], 0);
        kb_line(k, "const i64 oy0 = (i64)%s * %lld / %lld, oy1 = ((i64)%s * %lld + %lld) / %lld;",
                iy, oh, h, iy, oh, oh - 1, h);
        kb_line(k, "const i64 ox0 = (i64)%s * %lld / %lld, ox1 = ((i64)%s * %lld + %lld) / %lld;",
                ix, ow, w, ix, ow, ow - 1, w);
        kb_line(k, "float %s = 0.0f;", s);
        kb_line(k, "for (i64 oy = oy0; oy <= oy1; oy++) {");
        k->indent++;
        kb_line(k, "const i64 ny = (oy * %lld + %lld) / %lld - oy * %lld / %lld;", h, h + oh - 1,
                oh, h, oh);
        kb_line(k, "for (i64 ox = ox0; ox <= ox1; ox++) {");
        k->indent++;
        kb_line(k, "const i64 nx = (ox * %lld + %lld) / %lld - ox * %lld / %lld;", w, w + ow - 1,
                ow, w, ow);
        kb_line(k, "%s += ld(%s, (%s * %lld + oy) * %lld + ox) / (float)(ny * nx);", s, dy, pl,
                oh, ow);
        k->indent--;
        kb_line(k, "}");
        k->indent--;
        kb_line(k, "}");
        kb_set(k, y, s);
        return;
    }
    default:
        cg_fail(G, n, "no map kernel for %s", ir_ops[n->op].name);
        kb_set(k, y, "0.0f");
    }
#undef a
}

/* The first extreme along the axis of the line of x that starts at base, as
 * rt_arg_extreme finds it: into locals best and arg. */
static void line_extreme(kb *k, const char *x, const char *base, int64_t len, int64_t inner,
                         int want_min, const char **best, const char **arg)
{
    const char *l = kb_tmp(k, "ext_l"), *v = kb_tmp(k, "ext_v");
    *best = kb_tmp(k, "ext_best"), *arg = kb_tmp(k, "ext_arg");
    kb_line(k, "%s %s = 0;", k->itype, *arg);
    kb_line(k, "float %s = ld(%s, %s);", *best, x, base);
    kb_line(k, "for (%s %s = 1; %s < %lld && %s == %s; %s++) {", k->itype, l, l, (long long)len,
            *best, *best, l);
    kb_line(k, "    const float %s = ld(%s, %s + %s * %lld);", v, x, base, l, (long long)inner);
    kb_line(k, "    if (%s %c %s || %s != %s) {", v, want_min ? '<' : '>', *best, v, v);
    kb_line(k, "        %s = %s;", *best, v);
    kb_line(k, "        %s = %s;", *arg, l);
    kb_line(k, "    }");
    kb_line(k, "}");
}

/* reduce_max, reduce_min, argmax and the gradients: a scan along the axis per
 * element */
static void emit_extreme(kb *k, const ir_node *n)
{
    int grad = n->op == IR_OP_REDUCE_MAX_GRAD || n->op == IR_OP_REDUCE_MIN_GRAD;
    const ir_value *xv = n->in[grad ? 1 : 0];
    int64_t outer, len, inner;
    kb_around(&xv->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int want_min = n->op == IR_OP_REDUCE_MIN || n->op == IR_OP_REDUCE_MIN_GRAD;
    const char *x = kb_reads(k, xv, 0), *base = kb_tmp(k, "ext_base"), *best, *arg;
    /* the line's start: result element idx is (o, in) forward, (o, l, in) backward */
    kb_line(k, "const %s %s = %s / %lld * %lld + %s %% %lld;", k->itype, base, k->idx,
            (long long)(grad ? len * inner : inner), (long long)(len * inner), k->idx,
            (long long)inner);
    line_extreme(k, x, base, len, inner, want_min, &best, &arg);
    if (!grad) {
        kb_set(k, n->out[0], n->op == IR_OP_ARGMAX ? kb_kstr(k, "(int)%s", arg) : best);
        return;
    }
    const char *dy = kb_at_index(k, n->in[0], kb_kstr(k, "%s / %lld * %lld + %s %% %lld", k->idx,
                                                      (long long)(len * inner), (long long)inner,
                                                      k->idx, (long long)inner));
    if (ir_attr_int(n, "ties")) { /* dy / count to each of the count tied extremes */
        const char *l = kb_tmp(k, "tie_l"), *v = kb_tmp(k, "tie_v"), *cnt = kb_tmp(k, "tie_n");
        const char *mine = kb_tmp(k, "tie_x");
        kb_line(k, "int %s = 0;", cnt);
        kb_line(k, "for (%s %s = 0; %s < %lld; %s++) {", k->itype, l, l, (long long)len, l);
        kb_line(k, "    const float %s = ld(%s, %s + %s * %lld);", v, x, base, l, (long long)inner);
        kb_line(k, "    %s += %s == %s || (%s != %s && %s != %s);", cnt, v, best, v, v, best, best);
        kb_line(k, "}");
        kb_line(k, "const float %s = ld(%s, %s);", mine, x, k->idx);
        kb_set(k, n->out[0],
               kb_kstr(k, "%s == %s || (%s != %s && %s != %s) ? %s / (float)%s : 0.0f", mine, best,
                       mine, mine, best, best, dy, cnt));
        return;
    }
    kb_set(k, n->out[0], kb_kstr(k, "%s == %s / %lld %% %lld ? %s : 0.0f", arg, k->idx,
                                 (long long)inner, (long long)len, dy));
}

/* Emits the statements computing n's results at element k->idx. */
void kb_emit_map(kb *k, const ir_node *n)
{
    switch (n->op) {
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX: case IR_OP_REDUCE_MAX_GRAD:
    case IR_OP_REDUCE_MIN_GRAD:
        emit_extreme(k, n);
        return;
    case IR_OP_SGD: case IR_OP_ADAM:
        emit_optimizer(k, n);
        return;
    case IR_OP_BROADCAST_TO: case IR_OP_TRANSPOSE: case IR_OP_SLICE: case IR_OP_CONCAT:
    case IR_OP_PAD: case IR_OP_EMBEDDING:
        emit_movement(k, n);
        return;
    case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D: case IR_OP_AVGPOOL2D_GRAD:
    case IR_OP_MAXPOOL2D_GRAD: case IR_OP_ADAPTIVE_AVGPOOL2D: case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD:
        emit_pooling(k, n);
        return;
    case IR_OP_UPSAMPLE2D: case IR_OP_UPSAMPLE2D_GRAD:
        emit_upsample(k, n);
        return;
    default:
        emit_pointwise(k, n);
    }
}

/* ---------------------------------------------------------------- map kernels */

int64_t kb_max_numel(const kb *k)
{
    int64_t most = 1;
    for (int i = 0; i < k->nm; i++) {
        const ir_node *n = k->m[i];
        for (int j = 0; j < n->nin; j++)
            most = ir_type_numel(&n->in[j]->type) > most ? ir_type_numel(&n->in[j]->type) : most;
        for (int j = 0; j < n->nout; j++)
            most = ir_type_numel(&n->out[j]->type) > most ? ir_type_numel(&n->out[j]->type) : most;
    }
    return most;
}

/* "dense_relu__fc1": the members' ops, then the last result's name */
const char *kb_kernel_base(kb *k, const char *prefix)
{
    cg_sb b = {0};
    if (prefix)
        cg_sb_printf(&b, "%s_", prefix);
    for (int i = 0; i < k->nm && b.len < 40; i++)
        cg_sb_printf(&b, "%s%s", i ? "_" : "", ir_ops[k->m[i]->op].name);
    cg_sb_printf(&b, "__%s", cg_name(k->m[k->nm - 1]->out[0]));
    const char *r = kb_kstr(k, "%s", b.s);
    cg_sb_free(&b);
    return r;
}

const char *kb_kernel_what(kb *k)
{
    cg_sb b = {0};
    cg_sb_printf(&b, "%s", k->nm > 1 ? "fused " : "");
    for (int i = 0; i < k->nm; i++)
        cg_sb_printf(&b, "%s%s", i ? "+" : "", ir_ops[k->m[i]->op].name);
    cg_sb_printf(&b, " %%%s", cg_name(k->m[k->nm - 1]->out[0]));
    const char *r = cg_pstrdup(k->G->p, b.s);
    cg_sb_free(&b);
    return r;
}

/* Replaces the body with text, then the body built so far. */
void kb_body_prepend(kb *k, const cg_sb *text)
{
    cg_sb b = {0};
    if (text->len)
        cg_sb_put(&b, text->s, text->len);
    if (k->body.len)
        cg_sb_put(&b, k->body.s, k->body.len);
    cg_sb_free(&k->body);
    k->body = b;
}

int kb_map_kernel(kb *k)
{
    const ir_node *h = k->m[0];
    k->iter = kb_type(k, h->out[0]);
    int64_t n = ir_type_numel(k->iter);
    int vec = n % 4 == 0;
    for (int i = 0; i < k->nm; i++)
        for (int j = 0; j < k->m[i]->nout; j++)
            vec &= ir_is_float(cg_dtype_of(k->G, k->m[i]->out[j]));
    k->vec = vec ? 4 : 1;
    k->array = vec;
    k->itype = kb_index_type(kb_max_numel(k));
    if (vec) {
        kb_line(k, "#pragma unroll");
        kb_line(k, "for (int j = 0; j < 4; j++) {");
        k->indent++;
        kb_line(k, "const %s i = e + j;", k->itype);
    }
    for (int i = 0; i < k->nm; i++)
        kb_emit_map(k, k->m[i]);
    if (vec) {
        k->indent--;
        kb_line(k, "}");
    }
    /* store what is read after the kernel */
    for (int i = 0; i < k->nm; i++)
        for (int j = 0; j < k->m[i]->nout; j++) {
            const ir_value *v = k->m[i]->out[j];
            if (!kb_needs_store(k, v))
                continue;
            int s = kb_reg_slot(k, v);
            if (kb_crossed(k, v) && vec) { /* across layouts: element by element */
                kb_line(k, "#pragma unroll");
                kb_line(k, "for (int j = 0; j < 4; j++)");
                k->indent++;
                kb_store(k, v, "(e + j)", kb_kstr(k, "%s[j]", k->reg_name[s]));
                k->indent--;
            } else if (vec) {
                kb_line(k, "stv<4>(%s, e, %s);", kb_writes(k, v, 1), k->reg_name[s]);
            } else {
                kb_store(k, v, "i", k->reg_name[s]);
            }
        }
    cg_sb top = {0};
    if (!strcmp(k->itype, "int"))
        cg_sb_printf(&top, "    const int %s = (blockIdx.x * 256 + threadIdx.x)%s;\n",
                     vec ? "e" : "i",
                     vec ? " * 4" : "");
    else
        cg_sb_printf(&top, "    const i64 %s = ((i64)blockIdx.x * 256 + threadIdx.x)%s;\n",
                     vec ? "e" : "i", vec ? " * 4" : "");
    cg_sb_printf(&top, "    if (%s >= %lld)\n        return;\n", vec ? "e" : "i", (long long)n);
    if (k->pre.len)
        cg_sb_put(&top, k->pre.s, k->pre.len);
    kb_body_prepend(k, &top);
    cg_sb_free(&top);
    int elementwise = 1;
    for (int i = 0; i < k->nm; i++)
        switch (k->m[i]->op) {
        case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D: case IR_OP_MAXPOOL2D_GRAD:
        case IR_OP_AVGPOOL2D_GRAD: case IR_OP_CONCAT: case IR_OP_PAD: case IR_OP_EMBEDDING:
        case IR_OP_ADAPTIVE_AVGPOOL2D: case IR_OP_ADAPTIVE_AVGPOOL2D_GRAD:
        case IR_OP_UPSAMPLE2D: case IR_OP_UPSAMPLE2D_GRAD:
        case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX:
        case IR_OP_REDUCE_MAX_GRAD: case IR_OP_REDUCE_MIN_GRAD:
            elementwise = 0;
            break;
        default:
            break;
        }
    return kb_finish(k, kb_kernel_base(k, NULL), 256, kb_div_up(n / k->vec, 256), elementwise, h,
                     kb_kernel_what(k));
}

/* One launch for nodes m[0 .. nm-1], each a map op on its own (an optimizer
 * step of each parameter): blocks [start[t], start[t + 1]) run node t, 256
 * elements a block, with the code the node alone would have (apex's
 * multi_tensor_apply, llm.c's fused update).  Returns -1 when its accesses
 * are unsafe, -2 when its pointers or registers are more than a kernel
 * takes (nothing added either way). */
static int multi_map_kernel(kb *k, const ir_node *const *m, int nm)
{
    int64_t start = 0, most = 0;
    for (int t = 0; t < nm; t++)
        most = ir_type_numel(&m[t]->out[0]->type) > most ? ir_type_numel(&m[t]->out[0]->type) : most;
    k->itype = kb_index_type(most);
    k->vec = 1;
    k->array = 0;
    for (int t = 0; t < nm; t++) {
        k->m = m + t, k->nm = 1;
        k->iter = kb_type(k, m[t]->out[0]);
        int64_t n = ir_type_numel(k->iter), blocks = kb_div_up(n, 256);
        kb_line(k, "if (blockIdx.x < %lld) { /* %%%s */", (long long)(start + blocks),
                cg_name(m[t]->out[0]));
        k->indent++;
        kb_line(k, "const %s i = (%s)(blockIdx.x - %lld) * 256 + threadIdx.x;", k->itype, k->itype,
                (long long)start);
        kb_line(k, "if (i >= %lld)", (long long)n);
        kb_line(k, "    return;");
        kb_emit_map(k, m[t]);
        for (int j = 0; j < m[t]->nout; j++) {
            const ir_value *v = m[t]->out[j];
            if (kb_needs_store(k, v))
                kb_store(k, v, "i", k->reg_name[kb_reg_slot(k, v)]);
        }
        kb_line(k, "return;");
        k->indent--;
        kb_line(k, "}");
        start += blocks;
    }
    if (k->overflow)
        return -2;
    if (k->pre.len)
        kb_body_prepend(k, &k->pre);
    k->m = m, k->nm = nm;
    const char *what = cg_pprintf(k->G->p, "%s of %d tensors (one launch)", ir_ops[m[0]->op].name,
                                  nm);
    return kb_finish(k, kb_kstr(k, "multi_%s", ir_ops[m[0]->op].name), 256, start, 1, m[0], what);
}

int cg_emit_multi(cg_gen *G, const ir_node *const *m, int nm)
{
    for (int n = nm; n > 1; n = n * 3 / 4) { /* fewer tensors until they fit */
        kb k;
        kb_init(&k, G, m, n, -1, "one launch for several tensors:");
        int rc = multi_map_kernel(&k, m, n);
        kb_free(&k);
        if (rc != -2)
            return rc == 0 ? n : 0;
    }
    return 0;
}
