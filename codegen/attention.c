/* The attention kernels (docs/codegen.md, "Attention"): attention and
 * attention_grad in FlashAttention-2's tiling, no [l, s] tensor anywhere.
 * The arithmetic is the prelude's attn_fwd and attn_bwd templates; this file
 * picks their tiles, instantiates them for the node's shapes and storage
 * types, and adds the launches.
 *
 *   attention       one kernel: a block per (batch element, tile of query
 *                   rows); out through the epilogue (y_put), lse stored.
 *   attention_grad  three kernels, in order:
 *                   1. D = dy . out per query row into the workspace (a warp
 *                      a row);
 *                   2. dk, dv: a block per (k's batch element, tile of keys),
 *                      walking the query tiles of each of its group's query
 *                      heads in order (grouped-query attention: k and v with
 *                      fewer heads than q, a group of q's per head);
 *                   3. dq: a block per (batch element, tile of query rows),
 *                      walking the key tiles; dq through the epilogue.
 *                   Each element of dq, dk and dv is summed by one thread in
 *                   one order: no atomics, the same bits on every run.
 *
 * Tiles follow the larger feature size d = max(e, ev), so that the static
 * shared memory stays under 48 KiB and a thread's accumulators under 64
 * floats; d over 256 is refused. */
#include "kb.h"

typedef struct {
    int nt, rows, cols;   /* threads; rows a block owns; rows of the tiles it walks */
} at_tiles;

/* forward: rows = query rows, cols = keys per tile */
static int fwd_tiles(int64_t d, at_tiles *t)
{
    static const at_tiles by[] = {{128, 64, 32}, {128, 32, 32}, {128, 16, 16}};
    int i = d <= 64 ? 0 : d <= 128 ? 1 : d <= 256 ? 2 : -1;
    if (i >= 0)
        *t = by[i];
    return i >= 0;
}

/* backward: rows owned (keys for dk and dv, queries for dq), rows walked */
static int bwd_tiles(int64_t d, at_tiles *t)
{
    static const at_tiles by[] = {{128, 64, 32}, {128, 32, 32}, {128, 16, 16}, {64, 8, 8}};
    int i = d <= 32 ? 0 : d <= 64 ? 1 : d <= 128 ? 2 : d <= 256 ? 3 : -1;
    if (i >= 0)
        *t = by[i];
    return i >= 0;
}

typedef struct {
    int64_t batch, group, l, s, e, ev; /* q's batch elements; of them, per k's */
    int causal;
    const char *scale;
} at_geom;

static at_geom geometry(kb *k, const ir_node *n)
{
    int grad = n->op == IR_OP_ATTENTION_GRAD;
    const ir_type *q = &n->in[grad]->type, *kt = &n->in[grad + 1]->type,
                  *v = &n->in[grad + 2]->type;
    int r = q->rank;
    at_geom g = {1, 1, q->dims[r - 2], v->dims[r - 2], q->dims[r - 1], v->dims[r - 1],
                 (int)ir_attr_int(n, "causal"), kb_flit(k, (float)ir_attr_float(n, "scale"))};
    for (int i = 0; i < r - 2; i++)
        g.batch *= q->dims[i];
    if (r >= 3 && kt->dims[r - 3] > 0)
        g.group = q->dims[r - 3] / kt->dims[r - 3];
    return g;
}

/* o: another kernel of k's op (D; dk and dv), indexing as k does. */
static kb *other_kernel(kb *o, kb *k, const char *what)
{
    kb_init(o, k->G, k->m + k->sp, 1, 0, what);
    o->itype = k->itype;
    return o;
}

/* The name of result r's pointer, or a null pointer where nothing reads r. */
static const char *result_or_null(kb *k, const ir_value *r)
{
    if (!kb_needs_store(k, r))
        return kb_kstr(k, "(%s *)0", cg_ctype(cg_dtype_of(k->G, r)));
    return kb_writes(k, r, 0);
}

/* A lambda storing into result r (or nothing where nothing reads r): its name. */
static const char *putter(kb *k, const ir_value *r)
{
    const char *name = kb_tmp(k, "put");
    if (kb_needs_store(k, r))
        kb_line(k, "auto %s = [&](%s i, float x) { st(%s, i, x); };", name, k->itype,
                kb_writes(k, r, 0));
    else
        kb_line(k, "auto %s = [&](%s i, float x) { (void)i, (void)x; };", name, k->itype);
    return name;
}

static int forward(kb *k, const ir_node *n, const at_geom *g, const at_tiles *t)
{
    const char *q = kb_reads(k, n->in[0], 0), *kk = kb_reads(k, n->in[1], 0),
               *v = kb_reads(k, n->in[2], 0), *lse = result_or_null(k, n->out[1]);
    kb_line(k, "attn_fwd<%d, %d, %d, %lld, %lld, %s, %lld, %s>(%s, %s, %s, %s, (%s)%lld, "
            "(%s)%lld, %s, y_put);", t->nt, t->rows, t->cols, (long long)g->e, (long long)g->ev,
            g->causal ? "true" : "false", (long long)g->group, k->itype, q, kk, v, lse,
            k->itype, (long long)g->l, k->itype, (long long)g->s, g->scale);
    if (!kb_accesses_safe(k))
        return -1;
    return kb_finish(k, kb_kernel_base(k, NULL), t->nt, g->batch * kb_div_up(g->l, t->rows), 0, n,
                     cg_pprintf(k->G->p, "%s: %d query rows a block, %d keys a tile",
                                kb_kernel_what(k), t->rows, t->cols));
}

/* One side of the gradient (attn_bwd): keys (dk, dv into their own
 * lambdas) or queries (dq through the epilogue). */
static void backward_side(kb *k, const ir_node *n, const at_geom *g, const at_tiles *t,
                          cg_ref dd, int keys)
{
    const char *dy = kb_reads(k, n->in[0], 0), *q = kb_reads(k, n->in[1], 0),
               *kk = kb_reads(k, n->in[2], 0), *v = kb_reads(k, n->in[3], 0),
               *lse = kb_reads(k, n->in[5], 0);
    kparam *pd = kb_param_at(k, NULL, "dd", dd, IR_F32, g->batch * g->l * 4);
    pd->read_other = 1;
    const char *pa = "y_put", *pb = "y_put";
    if (keys)
        pa = putter(k, n->out[1]), pb = putter(k, n->out[2]);
    kb_line(k, "attn_bwd<%d, %d, %d, %lld, %lld, %s, %s, %lld, %s>(%s, %s, %s, %s, %s, %s, "
            "(%s)%lld, (%s)%lld, %s, %s, %s);", t->nt, t->rows, t->cols, (long long)g->e,
            (long long)g->ev, g->causal ? "true" : "false", keys ? "true" : "false",
            (long long)g->group, k->itype, dy, q, kk, v, lse, pd->name, k->itype,
            (long long)g->l, k->itype, (long long)g->s, g->scale, pa, pb);
}

static int backward(kb *k, const ir_node *n, const at_geom *g, const at_tiles *t)
{
    cg_gen *G = k->G;
    int64_t rows = g->batch * g->l;
    cg_ref dd = cg_workspace(G, rows * 4);
    kb kd, kk;
    /* 1. D = dy . out, a warp a row */
    other_kernel(&kd, k, "the rows' dy . out of");
    {
        const char *dy = kb_reads(&kd, n->in[0], 0), *out = kb_reads(&kd, n->in[4], 0);
        kparam *pd = kb_param_at(&kd, NULL, "dd", dd, IR_F32, rows * 4);
        pd->write_other = 1;
        kb_line(&kd, "const int lane = threadIdx.x & 31;");
        kb_line(&kd, "const %s row = (%s)blockIdx.x * 8 + (threadIdx.x >> 5);", kd.itype,
                kd.itype);
        kb_line(&kd, "if (row >= %lld)", (long long)rows);
        kb_line(&kd, "    return; /* the whole warp */");
        kb_line(&kd, "float d = 0.0f;");
        kb_line(&kd, "for (%s t = lane; t < %lld; t += 32)", kd.itype, (long long)g->ev);
        kb_line(&kd, "    d += ld(%s, row * %lld + t) * ld(%s, row * %lld + t);", dy,
                (long long)g->ev, out, (long long)g->ev);
        kb_line(&kd, "d = warp_sum(d);");
        kb_line(&kd, "if (lane == 0)");
        kb_line(&kd, "    %s[row] = d;", pd->name);
    }
    /* 2. dk and dv over the query tiles; 3. dq over the key tiles */
    other_kernel(&kk, k, "dk and dv (attn_bwd over the query tiles) of");
    backward_side(&kk, n, g, t, dd, 1);
    backward_side(k, n, g, t, dd, 0);
    int rc = -1;
    if (kb_accesses_safe(&kd) && kb_accesses_safe(&kk) && kb_accesses_safe(k)) {
        const char *name = cg_name(n->out[0]);
        kb_finish(&kd, kb_kstr(k, "attention_grad_rows__%s", name), 256, kb_div_up(rows, 8), 0,
                  n, cg_pprintf(G->p, "attention_grad dy . out %%%s", name));
        kb_finish(&kk, kb_kstr(k, "attention_grad_keys__%s", name), t->nt,
                  g->batch / g->group * kb_div_up(g->s, t->rows), 0, n,
                  cg_pprintf(G->p, "attention_grad dk, dv %%%s: %d keys a block, %d query "
                             "rows a tile%s", name, t->rows, t->cols,
                             g->group > 1 ? cg_pprintf(G->p, ", %lld query heads a key head",
                                                       (long long)g->group) : ""));
        rc = kb_finish(k, kb_kernel_base(k, NULL), t->nt, g->batch * kb_div_up(g->l, t->rows), 0,
                       n, cg_pprintf(G->p, "%s: dq, %d query rows a block, %d keys a tile",
                                     kb_kernel_what(k), t->rows, t->cols));
    }
    kb_free(&kd);
    kb_free(&kk);
    return rc;
}

int kb_attention(kb *k)
{
    const ir_node *n = k->m[k->sp];
    if (k->sp != 0) {
        cg_fail(k->G, n, "internal: %s has a prologue", ir_ops[n->op].name);
        return 0;
    }
    at_geom g = geometry(k, n);
    int64_t d = g.e > g.ev ? g.e : g.ev;
    at_tiles t;
    if (!(n->op == IR_OP_ATTENTION ? fwd_tiles(d, &t) : bwd_tiles(d, &t))) {
        cg_fail(k->G, n, "%s of feature sizes e = %lld and ev = %lld: the generated kernels "
                "take e and ev up to 256", ir_ops[n->op].name, (long long)g.e, (long long)g.ev);
        return 0;
    }
    return n->op == IR_OP_ATTENTION ? forward(k, n, &g, &t) : backward(k, n, &g, &t);
}
