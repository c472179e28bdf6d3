/* The special ops' kernels (kernels.c says what a kernel is): a template
 * each, a row, a channel, a plane per warp or block, reading its first
 * operand through the prologue and storing through the epilogue. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kb.h"

/* ---------------------------------------------------------------- special ops */

/* Blocks that fill the GPU: two per SM of an H100 (132 SMs).  A reduction
 * with fewer groups than this (batchnorm's channels, sum_to's outputs, mse's
 * one) splits each group's elements into parts, a block each, which write
 * their partial sums to the workspace (a first kernel); the second kernel
 * adds a group's parts in part order, the same bits on every run, and goes on
 * from there (PyTorch's and apex's batchnorm: a reduction, then the map). */
#define FILL_BLOCKS 264
#define PART_MIN 1024          /* the fewest elements a part sums */

/* The parts each of groups reductions of len elements splits into. */
static int64_t parts_of(int64_t groups, int64_t len)
{
    if (groups >= FILL_BLOCKS || len < 2 * PART_MIN)
        return 1;
    int64_t p = kb_div_up(FILL_BLOCKS, groups), most = len / PART_MIN;
    p = p < most ? p : most;
    return kb_div_up(len, kb_div_up(len, p)); /* no part empty */
}

/* Makes k (and pre, the kernel of the partial sums) reduce groups of len
 * elements in parts: returns the workspace of the partial sums, per doubles
 * per block. */
static cg_ref split(kb *k, kb *pre, int64_t groups, int64_t len, int64_t parts, int per)
{
    k->parts = pre->parts = parts;
    k->plen = pre->plen = kb_div_up(len, parts);
    pre->itype = k->itype;
    pre->grid = groups * parts;
    k->pbytes = pre->pbytes = groups * parts * per * (int64_t)sizeof(double);
    return cg_workspace(k->G, k->pbytes);
}

/* pd: the partial sums at ws, written by pre's kernel and read by the
 * other. */
static void partials(kb *k, cg_ref ws, int write)
{
    kparam *p = kb_param_at(k, NULL, "parts", ws, IR_F32, k->pbytes);
    if (write)
        p->write_other = 1;
    else
        p->read_other = 1;
    const char *c = write ? "" : "const ";
    kb_line(k, "%sdouble *pd = (%sdouble *)%s;", c, c, p->name);
}

static const char *shared_red(kb *k, int dbl)
{
    if (dbl && !k->red_d) {
        cg_sb_printf(&k->shared, "    __shared__ double redd[32];\n");
        k->red_d = 1;
    }
    if (!dbl && !k->red_f) {
        cg_sb_printf(&k->shared, "    __shared__ float red[32];\n");
        k->red_f = 1;
    }
    return dbl ? "redd" : "red";
}

/* the sum (or max) over the row's threads of expression x */
static const char *rsum(kb *k, const char *x, int dbl)
{
    if (k->warp_rows)
        return kb_kstr(k, "warp_sum(%s)", x);
    return kb_kstr(k, "block_sum<%d>(%s, %s)", k->nt, x, shared_red(k, dbl));
}

static const char *rmax(kb *k, const char *x)
{
    if (k->warp_rows)
        return kb_kstr(k, "warp_max(%s)", x);
    return kb_kstr(k, "block_max<%d>(%s, %s)", k->nt, x, shared_red(k, 0));
}

/* x_at(i): the special's first operand at element i, through the prologue. */
static void emit_loader(kb *k, const ir_node *sp)
{
    int saved = k->nregs, arr = k->array;
    const char *idx = k->idx;
    const ir_type *iter = k->iter;
    k->array = 0;
    k->unaligned = 1;
    k->idx = "i";
    kb_line(k, "auto x_at = [&](%s i) -> float {", k->itype);
    k->indent++;
    if (k->sp > 0) {
        k->iter = kb_type(k, k->m[0]->out[0]);
        for (int i = 0; i < k->sp; i++)
            kb_emit_map(k, k->m[i]);
        kb_line(k, "return %s;", kb_reg(k, sp->in[0]));
    } else {
        kb_line(k, "return %s;", kb_at_index(k, sp->in[0], "i"));
    }
    k->indent--;
    kb_line(k, "};");
    k->nregs = saved;
    k->array = arr;
    k->unaligned = 0;
    k->idx = idx;
    k->iter = iter;
}

/* y_put(i, v): the special's first result v at element i, through the
 * epilogue, stored where read after the kernel. */
static void emit_storer(kb *k, const ir_node *sp)
{
    int saved = k->nregs, arr = k->array;
    const char *idx = k->idx;
    const ir_type *iter = k->iter;
    k->array = 0;
    k->idx = "i";
    k->iter = kb_type(k, sp->out[0]);
    const char *rt = kb_rtype(cg_dtype_of(k->G, sp->out[0]));
    kb_line(k, "auto y_put = [&](%s i, %s v) {", k->itype, rt);
    k->indent++;
    kb_bind_reg(k, sp->out[0], "v");
    int stored = 0;
    for (int i = k->sp + 1; i < k->nm; i++)
        kb_emit_map(k, k->m[i]);
    for (int i = k->sp; i < k->nm; i++) {
        const ir_value *v = k->m[i]->out[0];
        if (kb_needs_store(k, v)) {
            kb_store(k, v, "i", kb_reg(k, v));
            stored = 1;
        }
    }
    if (!stored)
        kb_line(k, "(void)i, (void)v;");
    k->indent--;
    kb_line(k, "};");
    k->nregs = saved;
    k->array = arr;
    k->idx = idx;
    k->iter = iter;
}

/* Stores result r of the special (not its first) at index ix, where read. */
static void store_other(kb *k, const ir_value *r, const char *ix, const char *val)
{
    if (kb_needs_store(k, r))
        kb_line(k, "st(%s, %s, %s);", kb_writes(k, r, 0), ix, val);
}

/* The loop over a row's elements: "for (int t = lane; t < len; t += 32)". */
static const char *row_loop(kb *k, int64_t len)
{
    return kb_kstr(k, "for (%s t = %s; t < %lld; t += %lld)", k->itype, k->lane0, (long long)len,
                   (long long)k->lstep);
}

static int64_t row_start_strided(kb *k, int64_t rows, int64_t len, int64_t inner);

/* A row kernel's start: rows of len elements, a warp per row (8 rows a block)
 * where len <= 1024, else a block per row.  Returns the grid. */
static int64_t row_start(kb *k, int64_t rows, int64_t len)
{
    return row_start_strided(k, rows, len, 1);
}

/* The base of row `row` whose len elements are inner apart: rows of inner
 * consecutive rows interleaved (the class axis of [n, c, d...]). */
static const char *row_base(kb *k, int64_t len, int64_t inner)
{
    if (inner == 1)
        return kb_kstr(k, "row * %lld", (long long)len);
    return kb_kstr(k, "row / %lld * %lld + row %% %lld", (long long)inner,
                   (long long)(len * inner), (long long)inner);
}

/* Element i of the row at base, its elements inner apart. */
static const char *row_at(kb *k, const char *i, int64_t inner)
{
    if (inner == 1)
        return kb_kstr(k, "base + %s", i);
    return kb_kstr(k, "base + %s * %lld", i, (long long)inner);
}

/* row_start with each row's elements inner apart (row_base). */
static int64_t row_start_strided(kb *k, int64_t rows, int64_t len, int64_t inner)
{
    k->warp_rows = len <= 1024;
    if (k->warp_rows) {
        k->nt = 256;
        k->lane0 = "lane";
        k->lstep = 32;
        kb_line(k, "const int lane = threadIdx.x & 31;");
        kb_line(k, "const %s row = (%s)blockIdx.x * 8 + (threadIdx.x >> 5);", k->itype, k->itype);
        kb_line(k, "if (row >= %lld)", (long long)rows);
        kb_line(k, "    return; /* the whole warp */");
        kb_line(k, "const %s base = %s;", k->itype, row_base(k, len, inner));
        return kb_div_up(rows, 8);
    }
    k->nt = len >= 16384 ? 1024 : 512;
    k->lane0 = "threadIdx.x";
    k->lstep = k->nt;
    kb_line(k, "const %s row = blockIdx.x;", k->itype);
    kb_line(k, "const %s base = %s;", k->itype, row_base(k, len, inner));
    return rows;
}

/* A row kernel in parts (rows too few for the GPU, each long): block
 * (row, part), the part's elements [t0, t1). */
static void row_parts_start(kb *k, int64_t len)
{
    k->nt = k->plen >= 16384 ? 1024 : 512;
    k->warp_rows = 0;
    k->lane0 = "threadIdx.x";
    k->lstep = k->nt;
    kb_line(k, "const %s row = blockIdx.x / %lld, part = blockIdx.x %% %lld;", k->itype,
            (long long)k->parts, (long long)k->parts);
    kb_line(k,
            "const %s base = row * %lld, t0 = part * %lld, t1 = part == %lld ? %lld : t0 + %lld;",
            k->itype, (long long)len, (long long)k->plen, (long long)(k->parts - 1), (long long)len,
            (long long)k->plen);
}

/* softmax and log_softmax over long rows in parts: each part's max and sum
 * of exp(x - max); the row's from them in part order. */
static int64_t softmax_parts(kb *k, const ir_node *n, kb *pre, int64_t rows, int64_t len,
                             int64_t parts)
{
    cg_ref ws = split(k, pre, rows, len, parts, 2);
    emit_loader(pre, n);
    row_parts_start(pre, len);
    partials(pre, ws, 1);
    kb_line(pre, "float mx = NEG_INF;");
    kb_line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, pre->nt);
    kb_line(pre, "    const float x = x_at(base + t);");
    kb_line(pre, "    mx = x > mx ? x : mx;");
    kb_line(pre, "}");
    kb_line(pre, "mx = block_max<%d>(mx, %s);", pre->nt, shared_red(pre, 0));
    kb_line(pre, "double sum = 0.0;");
    kb_line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, pre->nt);
    kb_line(pre, "    sum += exp((double)(x_at(base + t) - mx));");
    kb_line(pre, "sum = block_sum<%d>(sum, %s);", pre->nt, shared_red(pre, 1));
    kb_line(pre, "if (threadIdx.x == 0) {");
    kb_line(pre, "    pd[2 * blockIdx.x] = mx;");
    kb_line(pre, "    pd[2 * blockIdx.x + 1] = sum;");
    kb_line(pre, "}");
    emit_loader(k, n);
    emit_storer(k, n);
    row_parts_start(k, len);
    partials(k, ws, 0);
    kb_line(k, "float mx = NEG_INF;");
    kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
    kb_line(k,
            "    mx = (float)pd[2 * (row * %lld + p)] > mx ? (float)pd[2 * (row * %lld + p)] : mx;",
            (long long)parts, (long long)parts);
    kb_line(k, "double sum = 0.0;");
    kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
    kb_line(k,
            "    sum += pd[2 * (row * %lld + p) + 1] * exp(pd[2 * (row * %lld + p)] - (double)mx);",
            (long long)parts, (long long)parts);
    kb_line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, k->nt);
    if (n->op == IR_OP_LOG_SOFTMAX)
        kb_line(k, "    y_put(base + t, x_at(base + t) - (mx + (float)log(sum)));"); /* x - lse */
    else
        kb_line(k, "    y_put(base + t, (float)(exp((double)(x_at(base + t) - mx)) / sum));");
    return rows * parts;
}

static int64_t sp_softmax(kb *k, const ir_node *n, kb *pre)
{
    int64_t outer, len, inner;
    kb_around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int logsm = n->op == IR_OP_LOG_SOFTMAX;
    int64_t grid;
    const char *at;
    if (inner == 1 && len > 1024 && parts_of(outer, len) > 1)
        return softmax_parts(k, n, pre, outer, len, parts_of(outer, len));
    if (inner == 1) {
        grid = row_start(k, outer, len);
        at = "base + t";
    } else { /* a thread per column */
        k->nt = 256;
        k->lane0 = "0";
        k->lstep = 1;
        kb_line(k, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
        kb_line(k, "if (c >= %lld)", (long long)(outer * inner));
        kb_line(k, "    return;");
        kb_line(k, "const %s base = c / %lld * %lld + c %% %lld;", k->itype, (long long)inner,
                (long long)(len * inner), (long long)inner);
        at = kb_kstr(k, "base + t * %lld", (long long)inner);
        grid = kb_div_up(outer * inner, 256);
        k->warp_rows = 1; /* no reduction across threads */
    }
    int cross = inner == 1;
    emit_loader(k, n);
    emit_storer(k, n);
    kb_line(k, "float mx = NEG_INF;");
    kb_line(k, "%s {", row_loop(k, len));
    kb_line(k, "    const float x = x_at(%s);", at);
    kb_line(k, "    mx = x > mx ? x : mx;");
    kb_line(k, "}");
    if (cross)
        kb_line(k, "mx = %s;", rmax(k, "mx"));
    kb_line(k, "double sum = 0.0;");
    kb_line(k, "%s", row_loop(k, len));
    kb_line(k, "    sum += exp((double)(x_at(%s) - mx));", at);
    if (cross)
        kb_line(k, "sum = %s;", rsum(k, "sum", 1));
    if (logsm) {
        kb_line(k, "const float lse = mx + (float)log(sum);");
        kb_line(k, "%s", row_loop(k, len));
        kb_line(k, "    y_put(%s, x_at(%s) - lse);", at, at);
    } else {
        kb_line(k, "%s", row_loop(k, len));
        kb_line(k, "    y_put(%s, (float)(exp((double)(x_at(%s) - mx)) / sum));", at, at);
    }
    return grid;
}

static int64_t sp_softmax_grad(kb *k, const ir_node *n, kb *pre)
{
    int64_t outer, len, inner;
    kb_around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int logsm = n->op == IR_OP_LOG_SOFTMAX_GRAD;
    int64_t grid;
    const char *at;
    int cross = inner == 1;
    int64_t parts = cross && len > 1024 ? parts_of(outer, len) : 1;
    if (parts > 1) { /* long rows in parts: each part's sum, the row's in part order */
        cg_ref ws = split(k, pre, outer, len, parts, 1);
        emit_loader(pre, n);
        const char *y0 = kb_reads(pre, n->in[1], 0);
        row_parts_start(pre, len);
        partials(pre, ws, 1);
        kb_line(pre, "double s = 0.0;");
        kb_line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, pre->nt);
        if (logsm)
            kb_line(pre, "    s += x_at(base + t);");
        else
            kb_line(pre, "    s += (double)x_at(base + t) * ld(%s, base + t);", y0);
        kb_line(pre, "s = block_sum<%d>(s, %s);", pre->nt, shared_red(pre, 1));
        kb_line(pre, "if (threadIdx.x == 0)");
        kb_line(pre, "    pd[blockIdx.x] = s;");
        emit_loader(k, n);
        emit_storer(k, n);
        const char *y = kb_reads(k, n->in[1], 0);
        row_parts_start(k, len);
        partials(k, ws, 0);
        kb_line(k, "double s = 0.0;");
        kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        kb_line(k, "    s += pd[row * %lld + p];", (long long)parts);
        kb_line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, k->nt);
        kb_line(k, "    const %s q = base + t;", k->itype);
        if (logsm)
            kb_line(k, "    y_put(q, (float)(x_at(q) - exp((double)ld(%s, q)) * s));", y);
        else
            kb_line(k, "    y_put(q, (float)(ld(%s, q) * (x_at(q) - s)));", y);
        kb_line(k, "}");
        return outer * parts;
    }
    if (cross) {
        grid = row_start(k, outer, len);
        at = "base + t";
    } else {
        k->nt = 256;
        k->lane0 = "0";
        k->lstep = 1;
        k->warp_rows = 1;
        kb_line(k, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
        kb_line(k, "if (c >= %lld)", (long long)(outer * inner));
        kb_line(k, "    return;");
        kb_line(k, "const %s base = c / %lld * %lld + c %% %lld;", k->itype, (long long)inner,
                (long long)(len * inner), (long long)inner);
        at = kb_kstr(k, "base + t * %lld", (long long)inner);
        grid = kb_div_up(outer * inner, 256);
    }
    emit_loader(k, n);
    emit_storer(k, n);
    const char *y = kb_reads(k, n->in[1], 0);
    kb_line(k, "double s = 0.0;");
    kb_line(k, "%s", row_loop(k, len));
    if (logsm)
        kb_line(k, "    s += x_at(%s);", at);
    else
        kb_line(k, "    s += (double)x_at(%s) * ld(%s, %s);", at, y, at);
    if (cross)
        kb_line(k, "s = %s;", rsum(k, "s", 1));
    kb_line(k, "%s {", row_loop(k, len));
    kb_line(k, "    const %s q = %s;", k->itype, at);
    if (logsm)
        kb_line(k, "    y_put(q, (float)(x_at(q) - exp((double)ld(%s, q)) * s));", y);
    else
        kb_line(k, "    y_put(q, (float)(ld(%s, q) * (x_at(q) - s)));", y);
    kb_line(k, "}");
    return grid;
}

static int64_t sp_layernorm(kb *k, const ir_node *n)
{
    int64_t d = ir_type_numel(&n->in[1]->type), rows = ir_type_numel(&n->in[0]->type) / d;
    int64_t grid = row_start(k, rows, d);
    emit_loader(k, n);
    emit_storer(k, n);
    const char *w = kb_reads(k, n->in[1], 0), *b = kb_reads(k, n->in[2], 0);
    kb_line(k, "double mean = 0.0, var = 0.0;");
    kb_line(k, "%s", row_loop(k, d));
    kb_line(k, "    mean += x_at(base + t);");
    kb_line(k, "mean = %s / %lld.0;", rsum(k, "mean", 1), (long long)d);
    kb_line(k, "%s {", row_loop(k, d));
    kb_line(k, "    const double dv = x_at(base + t) - mean;");
    kb_line(k, "    var += dv * dv;");
    kb_line(k, "}");
    kb_line(k, "var = %s / %lld.0;", rsum(k, "var", 1), (long long)d);
    kb_line(k, "const float inv = (float)(1.0 / sqrt(var + %s)), m = (float)mean;",
            kb_dlit(k, ir_attr_float(n, "eps")));
    kb_line(k, "%s", row_loop(k, d));
    kb_line(k, "    y_put(base + t, (x_at(base + t) - m) * inv * ld(%s, t) + ld(%s, t));", w, b);
    return grid;
}

/* A scalar operand (a loss gradient, a literal) as an expression. */
static const char *scalar_of(kb *k, const ir_value *v)
{
    if (cg_const_inline(k->G, v))
        return kb_opnd(k, v);
    return kb_kstr(k, "ld(%s, 0)", kb_reads(k, v, 0));
}

/* cross_entropy's (nll_loss's) geometry: logits (log-probabilities)
 * [n, c, d...] as rows (positions) of c classes inner apart, inner the product
 * of d...; eps the label smoothing; nll for nll_loss. */
typedef struct {
    int64_t rows, c, inner, ignore;
    double eps;
    int nll;
} ce_geom;

static ce_geom ce_geometry(const ir_node *n, int li)
{
    const ir_type *t = &n->in[li]->type;
    ce_geom g = {ir_type_numel(&n->in[li + 1]->type), t->dims[1], 0,
                 ir_attr_int(n, "ignore_index"), 0,
                 n->op == IR_OP_NLL_LOSS || n->op == IR_OP_NLL_LOSS_GRAD};
    g.inner = g.rows / t->dims[0];
    g.eps = g.nll ? 0 : ir_attr_float(n, "label_smoothing");
    return g;
}

/* The labels' check: in [0, c), or ignore_index (not in a split batch, whose
 * replicas' means would not average to the batch's; reported as a label
 * error whose value is ignore_index, rt_cuda_status_message).  Emits the
 * statement that skips the row; ignored: the caller has dealt with an
 * ignored label. */
static void ce_check(kb *k, const ir_node *n, ce_geom g, const char *lane0, const char *skip,
                     int ignored)
{
    if (ir_attr_int(n, "split") > 1) {
        kb_line(k, "if (y == %lldLL || y < 0 || y >= %lld) {", (long long)g.ignore,
                (long long)g.c);
    } else {
        if (!ignored) {
            kb_line(k, "if (y == %lldLL)", (long long)g.ignore);
            kb_line(k, "    %s", skip);
        }
        kb_line(k, "if (y < 0 || y >= %lld) {", (long long)g.c);
    }
    kb_line(k, "    if (%s == 0)", lane0);
    kb_line(k, "        report(status, %d, (int)step, row, y);", CG_STATUS_LABEL);
    kb_line(k, "    %s", skip);
    kb_line(k, "}");
}

/* The count of labels not ignored, as an expression of k: every row where
 * ignore_index is no class (a label there fails the check anyway), else
 * pd[0] of a workspace that one block of pre counts into first. */
static const char *ce_count(kb *pre, kb *k, const ir_node *n, int li, ce_geom g)
{
    if (g.ignore < 0 || g.ignore >= g.c)
        return kb_kstr(k, "%lld.0", (long long)g.rows);
    k->parts = pre->parts = 1;
    k->pbytes = pre->pbytes = (int64_t)sizeof(double);
    cg_ref ws = cg_workspace(k->G, k->pbytes);
    pre->itype = k->itype;
    pre->nt = 256;
    pre->grid = 1;
    const char *lab = kb_reads(pre, n->in[li + 1], 0);
    partials(pre, ws, 1);
    kb_line(pre, "double count = 0.0;");
    kb_line(pre, "for (%s r = threadIdx.x; r < %lld; r += 256)", k->itype, (long long)g.rows);
    kb_line(pre, "    count += ld(%s, r) != %lldLL;", lab, (long long)g.ignore);
    kb_line(pre, "count = block_sum<256>(count, %s);", shared_red(pre, 1));
    kb_line(pre, "if (threadIdx.x == 0)");
    kb_line(pre, "    pd[0] = count;");
    partials(k, ws, 0);
    return "pd[0]";
}

/* A row's term: lse - (1 - eps) x[y] - eps / c sum x, from row_max_sum's mx
 * and sum (and, with smoothing, the row's sum of x, all). */
static const char *ce_term(kb *k, ce_geom g)
{
    const char *xy = kb_kstr(k, "x_at(%s)", row_at(k, "y", g.inner));
    if (g.nll)
        return kb_kstr(k, "-%s", xy);
    if (g.eps == 0)
        return kb_kstr(k, "mx + log(sum) - %s", xy);
    return kb_kstr(k, "mx + log(sum) - %.17g * %s - %.17g * all", 1 - g.eps, xy,
                   g.eps / (double)g.c);
}

/* dx = dloss / count (softmax - (1 - eps) onehot(y) - eps / c), 0 where the
 * label is ignored: a row per warp (block), the count from ce_count. */
static int64_t sp_cross_entropy_grad(kb *k, const ir_node *n, kb *pre)
{
    ce_geom g = ce_geometry(n, 1);
    const char *count = ce_count(pre, k, n, 1, g);
    int64_t grid = row_start_strided(k, g.rows, g.c, g.inner);
    k->status = 1;
    emit_storer(k, n);
    const char *x = kb_reads(k, n->in[1], 0), *lab = kb_reads(k, n->in[2], 0);
    const char *at = row_at(k, "t", g.inner);
    kb_line(k, "const i64 y = ld(%s, row);", lab);
    if (ir_attr_int(n, "split") <= 1) {
        kb_line(k, "if (y == %lldLL) {", (long long)g.ignore);
        kb_line(k, "    %s", row_loop(k, g.c));
        kb_line(k, "        y_put(%s, 0.0f);", at);
        kb_line(k, "    return;");
        kb_line(k, "}");
    }
    ce_check(k, n, g, k->lane0, "return;", 1);
    if (g.nll) {
        kb_line(k, "const float d = (float)(-(double)%s / %s);", scalar_of(k, n->in[0]), count);
        kb_line(k, "%s", row_loop(k, g.c));
        kb_line(k, "    y_put(%s, t == y ? d : 0.0f);", at);
        (void)x;
        return grid;
    }
    kb_line(k, "float mx = NEG_INF;");
    kb_line(k, "%s {", row_loop(k, g.c));
    kb_line(k, "    const float a = ld(%s, %s);", x, at);
    kb_line(k, "    mx = a > mx ? a : mx;");
    kb_line(k, "}");
    kb_line(k, "mx = %s;", rmax(k, "mx"));
    kb_line(k, "double sum = 0.0;");
    kb_line(k, "%s", row_loop(k, g.c));
    kb_line(k, "    sum += exp((double)(ld(%s, %s) - mx));", x, at);
    kb_line(k, "sum = %s;", rsum(k, "sum", 1));
    kb_line(k, "const double scale = (double)%s / %s;", scalar_of(k, n->in[0]), count);
    kb_line(k, "%s", row_loop(k, g.c));
    if (g.eps == 0)
        kb_line(k, "    y_put(%s, (float)((exp((double)(ld(%s, %s) - mx)) / sum - (t == y)) * "
                "scale));", at, x, at);
    else
        kb_line(k, "    y_put(%s, (float)((exp((double)(ld(%s, %s) - mx)) / sum - %.17g * (t == y) "
                "- %.17g) * scale));", at, x, at, 1 - g.eps, g.eps / (double)g.c);
    return grid;
}

/* The loss over rows: a warp per row, in turn, in one block; the rows' terms
 * summed per warp in row order, then over the warps. */
/* mx, the row's largest x_at(base + t), and sum, of exp(x - mx) in double,
 * over the row's threads; with smoothing (eps), all, the row's sum of x. */
static void row_max_sum(kb *k, int64_t len, ce_geom g)
{
    const char *at = row_at(k, "t", g.inner);
    kb_line(k, "float mx = NEG_INF;");
    kb_line(k, "%s {", row_loop(k, len));
    kb_line(k, "    const float a = x_at(%s);", at);
    kb_line(k, "    mx = a > mx ? a : mx;");
    kb_line(k, "}");
    kb_line(k, "mx = %s;", rmax(k, "mx"));
    kb_line(k, "double sum = 0.0;");
    if (g.eps != 0) {
        kb_line(k, "double all = 0.0;");
        kb_line(k, "%s {", row_loop(k, len));
        kb_line(k, "    sum += exp((double)(x_at(%s) - mx));", at);
        kb_line(k, "    all += x_at(%s);", at);
        kb_line(k, "}");
        kb_line(k, "all = %s;", rsum(k, "all", 1));
    } else {
        kb_line(k, "%s", row_loop(k, len));
        kb_line(k, "    sum += exp((double)(x_at(%s) - mx));", at);
    }
    kb_line(k, "sum = %s;", rsum(k, "sum", 1));
}

/* The loss over many logits: a warp per row (a block per long row), each
 * row's term into the workspace (0 for an ignored label), then one block adds
 * them (thread t rows t, t + 256, ..., then over the threads in a fixed tree)
 * and counts the labels not ignored. */
static int64_t cross_entropy_rows(kb *k, const ir_node *n, kb *pre, ce_geom g)
{
    k->parts = pre->parts = 1;
    k->pbytes = pre->pbytes = g.rows * (int64_t)sizeof(double);
    cg_ref ws = cg_workspace(k->G, k->pbytes);
    pre->itype = k->itype;
    pre->status = 1;
    emit_loader(pre, n);
    const char *lab = kb_reads(pre, n->in[1], 0);
    pre->grid = row_start_strided(pre, g.rows, g.c, g.inner);
    partials(pre, ws, 1);
    kb_line(pre, "const i64 y = ld(%s, row);", lab);
    kb_line(pre, "if (y == %lldLL && %s == 0)", (long long)g.ignore, pre->lane0);
    kb_line(pre, "    pd[row] = 0.0;");
    ce_check(pre, n, g, pre->lane0, "return;", 0);
    if (!g.nll)
        row_max_sum(pre, g.c, g);
    kb_line(pre, "if (%s == 0)", pre->lane0);
    kb_line(pre, "    pd[row] = %s;", ce_term(pre, g));
    k->nt = 256;
    emit_storer(k, n);
    const char *lab2 = kb_reads(k, n->in[1], 0);
    partials(k, ws, 0);
    kb_line(k, "double total = 0.0, count = 0.0;");
    kb_line(k, "for (%s r = threadIdx.x; r < %lld; r += 256) {", k->itype, (long long)g.rows);
    kb_line(k, "    total += pd[r];");
    kb_line(k, "    count += ld(%s, r) != %lldLL;", lab2, (long long)g.ignore);
    kb_line(k, "}");
    kb_line(k, "total = block_sum<256>(total, %s);", shared_red(k, 1));
    kb_line(k, "count = block_sum<256>(count, %s);", shared_red(k, 1));
    kb_line(k, "if (threadIdx.x == 0)");
    kb_line(k, "    y_put(0, (float)(total / count));");
    return 1;
}

static int64_t sp_cross_entropy(kb *k, const ir_node *n, kb *pre)
{
    ce_geom g = ce_geometry(n, 0);
    if (g.rows * g.c >= (1 << 20))
        return cross_entropy_rows(k, n, pre, g);
    k->nt = 256;
    k->warp_rows = 1;
    k->lane0 = "lane";
    k->lstep = 32;
    k->status = 1;
    emit_loader(k, n);
    emit_storer(k, n);
    const char *lab = kb_reads(k, n->in[1], 0);
    kb_line(k, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    kb_line(k, "double total = 0.0, count = 0.0;");
    kb_line(k, "for (%s row = warp; row < %lld; row += 8) { /* the same rows in all lanes */",
            k->itype, (long long)g.rows);
    k->indent++;
    kb_line(k, "const %s base = %s;", k->itype, row_base(k, g.c, g.inner));
    kb_line(k, "const i64 y = ld(%s, row);", lab);
    ce_check(k, n, g, "lane", "continue;", 0);
    if (!g.nll)
        row_max_sum(k, g.c, g);
    kb_line(k, "total += %s;", ce_term(k, g));
    kb_line(k, "count += 1.0;");
    k->indent--;
    kb_line(k, "}");
    kb_line(k, "total = block_sum<256>(lane == 0 ? total : 0.0, %s);", shared_red(k, 1));
    kb_line(k, "count = block_sum<256>(lane == 0 ? count : 0.0, %s);", shared_red(k, 1));
    kb_line(k, "if (threadIdx.x == 0)");
    kb_line(k, "    y_put(0, (float)(total / count));");
    return 1;
}

static int64_t sp_mse(kb *k, const ir_node *n, kb *pre)
{
    int64_t len = ir_type_numel(&n->in[0]->type), parts = parts_of(1, len);
    if (parts > 1) { /* the parts' sums of squares, then their sum in order */
        cg_ref ws = split(k, pre, 1, len, parts, 1);
        pre->nt = 256;
        emit_loader(pre, n);
        const char *b = kb_reads(pre, n->in[1], 0);
        partials(pre, ws, 1);
        kb_line(pre,
                "const %s t0 = (%s)blockIdx.x * %lld, t1 = blockIdx.x == %lld ? %lld : t0 + %lld;",
                k->itype, k->itype, (long long)pre->plen, (long long)(parts - 1), (long long)len,
                (long long)pre->plen);
        kb_line(pre, "double s = 0.0;");
        kb_line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += 256) {", k->itype);
        kb_line(pre, "    const double d = (double)x_at(t) - ld(%s, t);", b);
        kb_line(pre, "    s += d * d;");
        kb_line(pre, "}");
        kb_line(pre, "s = block_sum<256>(s, %s);", shared_red(pre, 1));
        kb_line(pre, "if (threadIdx.x == 0)");
        kb_line(pre, "    pd[blockIdx.x] = s;");
        k->nt = 32;
        emit_storer(k, n);
        partials(k, ws, 0);
        kb_line(k, "if (threadIdx.x != 0)");
        kb_line(k, "    return;");
        kb_line(k, "double s = 0.0;");
        kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        kb_line(k, "    s += pd[p];");
        kb_line(k, "y_put(0, (float)(s / %lld.0));", (long long)len);
        return 1;
    }
    k->nt = 1024;
    emit_loader(k, n);
    emit_storer(k, n);
    const char *b = kb_reads(k, n->in[1], 0);
    kb_line(k, "double s = 0.0;");
    kb_line(k, "for (%s t = threadIdx.x; t < %lld; t += 1024) {", k->itype, (long long)len);
    kb_line(k, "    const double d = (double)x_at(t) - ld(%s, t);", b);
    kb_line(k, "    s += d * d;");
    kb_line(k, "}");
    kb_line(k, "s = block_sum<1024>(s, %s);", shared_red(k, 1));
    kb_line(k, "if (threadIdx.x == 0)");
    kb_line(k, "    y_put(0, (float)(s / %lld.0));", (long long)len);
    return 1;
}

static int64_t sp_global_avgpool(kb *k, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t planes = t->dims[0] * t->dims[1], hw = t->dims[2] * t->dims[3];
    emit_loader(k, n);
    emit_storer(k, n);
    if (k->nhwc) { /* a thread per (image, channel): a warp reads 32 channels of a pixel */
        long long c = (long long)t->dims[1];
        k->nt = kb_div_up(planes, 256) >= FILL_BLOCKS ? 256 : 64;
        kb_line(k, "const %s pl = (%s)blockIdx.x * %d + threadIdx.x;", k->itype, k->itype, k->nt);
        kb_line(k, "if (pl >= %lld)", (long long)planes);
        kb_line(k, "    return;");
        kb_line(k, "const %s base = pl / %lld * %lld + pl %% %lld;", k->itype, c,
                c * (long long)hw, c);
        kb_line(k, "double s = 0.0;");
        kb_line(k, "for (%s t = 0; t < %lld; t++)", k->itype, (long long)hw);
        kb_line(k, "    s += x_at(base + t * %lld);", c);
        kb_line(k, "y_put(pl, (float)(s / %lld.0));", (long long)hw);
        return kb_div_up(planes, k->nt);
    }
    if (hw < 32) { /* a thread per plane, blocks of 64 where 256 leave the GPU idle */
        k->nt = kb_div_up(planes, 256) >= FILL_BLOCKS ? 256 : 64;
        kb_line(k, "const %s pl = (%s)blockIdx.x * %d + threadIdx.x;", k->itype, k->itype, k->nt);
        kb_line(k, "if (pl >= %lld)", (long long)planes);
        kb_line(k, "    return;");
        kb_line(k, "double s = 0.0;");
        kb_line(k, "for (%s t = 0; t < %lld; t++)", k->itype, (long long)hw);
        kb_line(k, "    s += x_at(pl * %lld + t);", (long long)hw);
        kb_line(k, "y_put(pl, (float)(s / %lld.0));", (long long)hw);
        return kb_div_up(planes, k->nt);
    }
    k->nt = 256; /* a warp per plane */
    kb_line(k, "const int lane = threadIdx.x & 31;");
    kb_line(k, "const %s pl = (%s)blockIdx.x * 8 + (threadIdx.x >> 5);", k->itype, k->itype);
    kb_line(k, "if (pl >= %lld)", (long long)planes);
    kb_line(k, "    return; /* the whole warp */");
    kb_line(k, "double s = 0.0;");
    kb_line(k, "for (%s t = lane; t < %lld; t += 32)", k->itype, (long long)hw);
    kb_line(k, "    s += x_at(pl * %lld + t);", (long long)hw);
    kb_line(k, "s = warp_sum(s);");
    kb_line(k, "if (lane == 0)");
    kb_line(k, "    y_put(pl, (float)(s / %lld.0));", (long long)hw);
    return kb_div_up(planes, 8);
}

/* A block per channel of [n, c, inner] (per part of a channel: ch, part; the
 * part's elements [t0, t1)). */
static void channel_start(kb *k, int64_t count)
{
    if (k->parts <= 1) {
        kb_line(k, "const int ch = blockIdx.x;");
        return;
    }
    kb_line(k, "const int ch = blockIdx.x / %lld, part = blockIdx.x %% %lld;", (long long)k->parts,
            (long long)k->parts);
    kb_line(k, "const %s t0 = (%s)part * %lld, t1 = part == %lld ? %lld : t0 + %lld;", k->itype,
            k->itype, (long long)k->plen, (long long)(k->parts - 1), (long long)count,
            (long long)k->plen);
}

static int channel_threads(int64_t count)
{
    return count >= 65536 ? 1024 : count >= 4096 ? 512 : count >= 256 ? 256 : 64;
}

/* Element ix of r set to val by one thread, val reading element ix of old
 * and nothing else of it, nor any other thread ix of either: a running
 * statistic's update, which may then be computed in place (old and r one
 * buffer: codegen.c alias_updates) as an elementwise kernel's. */
static void store_own(kb *k, const ir_value *r, const ir_value *old, const char *ix,
                      const char *fmt, double a, double b, const char *x)
{
    if (!kb_needs_store(k, r))
        return;
    int unaligned = k->unaligned;
    k->unaligned = 0;
    const char *o = kb_reads(k, old, 1), *w = kb_writes(k, r, 1);
    k->unaligned = unaligned;
    kb_line(k, fmt, w, ix, kb_dlit(k, a), o, ix, kb_dlit(k, b), x);
}

/* From double mu and var (of count elements a channel): 1 / std, then the
 * mean, 1 / std and the running statistics (PyTorch's: the variance
 * unbiased) stored by the threads where cond holds. */
static void bn_store_stats(kb *k, const ir_node *n, int64_t count, const char *cond)
{
    double m = ir_attr_float(n, "momentum");
    double unbias = count > 1 ? (double)count / (double)(count - 1) : 1.0;
    kb_line(k, "const double is = 1.0 / sqrt(var + %s);", kb_dlit(k, ir_attr_float(n, "eps")));
    kb_line(k, "if (%s) {", cond);
    k->indent++;
    store_other(k, n->out[1], "ch", "(float)mu");
    store_other(k, n->out[2], "ch", "(float)is");
    store_own(k, n->out[3], n->in[3], "ch", "st(%s, %s, (float)(%s * ld(%s, %s) + %s * %s));",
              1 - m, m, "mu");
    store_own(k, n->out[4], n->in[4], "ch", "st(%s, %s, (float)(%s * ld(%s, %s) + %s * %s));",
              1 - m, m * unbias, "var");
    k->indent--;
    kb_line(k, "}");
}

/* Channels-last reductions over the rows of [rows, c] (batchnorm's
 * statistics, sum_to's columns): tiles of 32 channels by 8 rows, a block of
 * 256 each, a warp reading 32 neighbouring channels of a row; the rows in
 * k->parts parts of k->plen, blockIdx.x = tile x parts + part. */
static void tile_start(kb *k, int64_t rows)
{
    long long P = (long long)k->parts;
    kb_line(k, "const %s tx = threadIdx.x & 31, ty = threadIdx.x >> 5;", k->itype);
    kb_line(k, "const %s ch = (%s)(blockIdx.x / %lld) * 32 + tx, part = blockIdx.x %% %lld;",
            k->itype, k->itype, P, P);
    kb_line(k, "const %s r0 = part * %lld, r1 = part == %lld ? %lld : r0 + %lld;", k->itype,
            (long long)k->plen, P - 1, (long long)rows, (long long)k->plen);
}

/* The parts the rows of tiles tiles split into: four blocks per SM of an H100
 * or H200 (a memory-bound kernel wants the warps to hide its latency), each
 * part at least 64 rows (8 per thread). */
static int64_t tile_parts(int64_t tiles, int64_t rows)
{
    int64_t p = kb_div_up(2 * FILL_BLOCKS, tiles), most = kb_div_up(rows, 64);
    p = p < most ? p : most;
    return kb_div_up(rows, kb_div_up(rows, p)); /* no part empty */
}

/* body for element i = r c + ch of each of the thread's rows of its part */
static void tile_loop(kb *k, int64_t c, const char *body)
{
    kb_line(k, "if (ch < %lld)", (long long)c);
    kb_line(k, "    for (%s r = r0 + ty; r < r1; r += 8) {", k->itype);
    kb_line(k, "        const %s i = r * %lld + ch;", k->itype, (long long)c);
    kb_line(k, "        %s", body);
    kb_line(k, "    }");
}

/* The double v of each of a tile's 8 rows added, in row order, into row 0's. */
static void tile_sum(kb *k, const char *v)
{
    if (!strstr(k->shared.s ? k->shared.s : "", "tile_red"))
        cg_sb_printf(&k->shared, "    __shared__ double tile_red[8][32];\n");
    kb_line(k, "__syncthreads();");
    kb_line(k, "tile_red[ty][tx] = %s;", v);
    kb_line(k, "__syncthreads();");
    kb_line(k, "if (ty == 0)");
    kb_line(k, "    for (int j = 1; j < 8; j++)");
    kb_line(k, "        %s += tile_red[j][tx];", v);
}

/* ---- channels-last batchnorm ----
 *
 * Over x as [rows, c] (NHWC: a row is a pixel), three kernels: each part of
 * the rows' sums (pre), each channel's parts merged once (mid, which also
 * writes the op's per-channel results), and the elementwise pass (k).  A
 * thread takes v neighbouring channels, read and written 16 bytes at a time
 * where c allows (ldv/stv), tx threads across a tile's channels and
 * ty = 256 / tx across its rows, so that a warp reads whole rows of the tile,
 * consecutive in memory.  A thread's sums are floats (the statistics about
 * its first element, which keeps them small), merged in a fixed order: a
 * tree over the tile's rows (Chan et al.'s formula for the statistics), then
 * the parts in a fixed order, in double, by mid.  The partial sums are
 * pd[2 (channel parts + part)], so that mid's block reads its own
 * channel's. */
typedef struct {
    int v, tx, ty;
    int64_t c, rows, tiles, parts;
} bn_tile;

static bn_tile bn_tile_of(kb *k, const ir_value *x)
{
    bn_tile T;
    T.c = x->type.dims[1];
    T.rows = ir_type_numel(&x->type) / T.c;
    T.v = 16 / (int)ir_dtype_size(cg_dtype_of(k->G, x));
    if (T.c % T.v)
        T.v = 1;
    T.tx = 32;
    while (T.tx > 1 && (int64_t)(T.tx / 2) * T.v >= T.c)
        T.tx /= 2;
    T.ty = 256 / T.tx;
    T.tiles = kb_div_up(T.c, (int64_t)T.tx * T.v);
    /* four blocks per SM of an H100 or H200, each thread 4 rows or more */
    int64_t p = kb_div_up(2 * FILL_BLOCKS, T.tiles), most = kb_div_up(T.rows, 4 * (int64_t)T.ty);
    p = p < most ? p : most;
    T.parts = kb_div_up(T.rows, kb_div_up(T.rows, p)); /* no part empty */
    return T;
}

static void bn_tile_start(kb *k, const bn_tile *T)
{
    long long P = (long long)T->parts;
    kb_line(k, "const %s tx = threadIdx.x %% %d, ty = threadIdx.x / %d;", k->itype, T->tx, T->tx);
    kb_line(k, "const %s ch = (%s)(blockIdx.x / %lld) * %d + tx * %d, part = blockIdx.x %% %lld;",
            k->itype, k->itype, P, T->tx * T->v, T->v, P);
    kb_line(k, "const %s r0 = part * %lld, r1 = part == %lld ? %lld : r0 + %lld;", k->itype,
            (long long)k->plen, P - 1, (long long)T->rows, (long long)k->plen);
}

/* The loop over the thread's rows, elements i .. i + v - 1 of each: the
 * body's lines go between bn_rows and bn_rows_end. */
static void bn_rows(kb *k, const bn_tile *T)
{
    kb_line(k, "if (ch < %lld)", (long long)T->c);
    kb_line(k, "    for (%s r = r0 + ty; r < r1; r += %d) {", k->itype, T->ty);
    k->indent += 2;
    kb_line(k, "const %s i = r * %lld + ch;", k->itype, (long long)T->c);
}

static void bn_rows_end(kb *k)
{
    k->indent -= 2;
    kb_line(k, "    }");
}

/* float name[v] = v's elements ch .. ch + v - 1 (0 past the channels) */
static void bn_per_channel(kb *k, const bn_tile *T, const char *name, const char *expr_of_c)
{
    kb_line(k, "float %s[%d];", name, T->v);
    kb_line(k, "for (int j = 0; j < %d; j++)", T->v);
    kb_line(k, "    %s[j] = ch < %lld ? %s : 0.0f;", name, (long long)T->c, expr_of_c);
}

/* float a[v] = v at elements i .. i + v - 1: one vector access where v is
 * stored as the kernel indexes it */
static void bn_vread(kb *k, int V, const ir_value *v, const char *a)
{
    kb_line(k, "float %s[%d];", a, V);
    if (!kb_crossed(k, v) && ir_is_float(cg_dtype_of(k->G, v))) {
        kb_line(k, "ldv<%d>(%s, i, %s);", V, kb_reads(k, v, 1), a);
        return;
    }
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    %s[j] = ld(%s, %s);", a, kb_reads(k, v, 0), kb_cross_index(k, v, "(i + j)"));
}

/* x_atv(e, a): the special's first operand at elements e .. e + v - 1,
 * through the prologue; one vector access where it is x as stored. */
static void emit_vloader(kb *k, const ir_node *sp, int V)
{
    const ir_value *x = sp->in[0];
    if (k->sp == 0 && !kb_crossed(k, x) && !cg_const_inline(k->G, x) &&
        ir_is_float(cg_dtype_of(k->G, x))) {
        kb_line(k, "auto x_atv = [&](%s e, float *a) { ldv<%d>(%s, e, a); };", k->itype, V,
                kb_reads(k, x, 1));
        return;
    }
    emit_loader(k, sp);
    kb_line(k, "auto x_atv = [&](%s e, float *a) {", k->itype);
    kb_line(k, "    for (int j = 0; j < %d; j++)", V);
    kb_line(k, "        a[j] = x_at(e + j);");
    kb_line(k, "};");
}

/* y_putv(e, a): the special's first result a at elements e .. e + v - 1,
 * through the epilogue, each value stored where read after the kernel: with
 * one vector access where it is a float stored as the kernel indexes it. */
static void emit_vstorer(kb *k, const ir_node *sp, int V)
{
    int saved = k->nregs, arr = k->array;
    const char *idx = k->idx;
    const ir_type *iter = k->iter;
    k->array = 0;
    k->idx = "i";
    k->iter = kb_type(k, sp->out[0]);
    kb_line(k, "auto y_putv = [&](%s e, const float *a) {", k->itype);
    k->indent++;
    const char *vec[MAX_REGS] = {0}; /* by member: its array of values to store */
    if (k->nm > MAX_REGS)
        k->overflow = 1; /* more members than registers: kb_finish refuses the kernel */
    for (int m = k->sp; m < k->nm && m < MAX_REGS; m++) {
        const ir_value *v = k->m[m]->out[0];
        if (kb_needs_store(k, v) && !kb_crossed(k, v) && ir_is_float(cg_dtype_of(k->G, v))) {
            vec[m] = kb_tmp(k, "o");
            kb_line(k, "float %s[%d];", vec[m], V);
        }
    }
    kb_line(k, "#pragma unroll");
    kb_line(k, "for (int j = 0; j < %d; j++) {", V);
    k->indent++;
    kb_line(k, "const %s i = e + j;", k->itype);
    kb_line(k, "const float v = a[j];");
    kb_line(k, "(void)i, (void)v;");
    kb_bind_reg(k, sp->out[0], "v");
    for (int m = k->sp + 1; m < k->nm; m++)
        kb_emit_map(k, k->m[m]);
    for (int m = k->sp; m < k->nm && m < MAX_REGS; m++) {
        const ir_value *v = k->m[m]->out[0];
        if (vec[m])
            kb_line(k, "%s[j] = %s;", vec[m], kb_reg(k, v));
        else if (kb_needs_store(k, v))
            kb_store(k, v, "i", kb_reg(k, v));
    }
    k->indent--;
    kb_line(k, "}");
    for (int m = k->sp; m < k->nm && m < MAX_REGS; m++)
        if (vec[m])
            kb_line(k, "stv<%d>(%s, e, %s);", V, kb_writes(k, k->m[m]->out[0], 1), vec[m]);
    k->indent--;
    kb_line(k, "};");
    k->nregs = saved;
    k->array = arr;
    k->idx = idx;
    k->iter = iter;
}

/* The thread's float a[v] (and b[v]) added over the tile's rows, in a tree
 * of fixed shape, into those of the threads of row ty = 0.  With chan, a and
 * b are a mean and a sum of squared deviations of nt elements, merged by
 * Chan et al.'s formula. */
static void bn_tile_tree(kb *k, const bn_tile *T, const char *a, const char *b, int chan)
{
    if (!strstr(k->shared.s ? k->shared.s : "", "tm["))
        cg_sb_printf(&k->shared, "    __shared__ float tm[%d], tq[%d];\n", 256 * T->v, 256 * T->v);
    if (chan)
        cg_sb_printf(&k->shared, "    __shared__ float tn[256];\n");
    int V = T->v;
    kb_line(k, "__syncthreads();");
    kb_line(k, "for (int j = 0; j < %d; j++) {", V);
    kb_line(k, "    tm[threadIdx.x * %d + j] = %s[j];", V, a);
    if (b)
        kb_line(k, "    tq[threadIdx.x * %d + j] = %s[j];", V, b);
    kb_line(k, "}");
    if (chan)
        kb_line(k, "tn[threadIdx.x] = nt;");
    kb_line(k, "__syncthreads();");
    kb_line(k, "for (int h = %d; h > 0; h /= 2) {", T->ty / 2);
    kb_line(k, "    if (ty < h) {");
    kb_line(k, "        const int o = threadIdx.x + h * %d, me = threadIdx.x;", T->tx);
    if (chan) {
        kb_line(k, "        const float na = tn[me], nb = tn[o], f = nb > 0.0f ? nb / (na + nb) : "
                "0.0f;");
        kb_line(k, "        for (int j = 0; j < %d; j++) {", V);
        kb_line(k, "            const float d = tm[o * %d + j] - tm[me * %d + j];", V, V);
        kb_line(k, "            tm[me * %d + j] += d * f;", V);
        kb_line(k, "            tq[me * %d + j] += tq[o * %d + j] + d * d * na * f;", V, V);
        kb_line(k, "        }");
        kb_line(k, "        tn[me] = na + nb;");
    } else {
        kb_line(k, "        for (int j = 0; j < %d; j++) {", V);
        kb_line(k, "            tm[me * %d + j] += tm[o * %d + j];", V, V);
        if (b)
            kb_line(k, "            tq[me * %d + j] += tq[o * %d + j];", V, V);
        kb_line(k, "        }");
    }
    kb_line(k, "    }");
    kb_line(k, "    __syncthreads();");
    kb_line(k, "}");
    kb_line(k, "for (int j = 0; j < %d; j++) {", V);
    kb_line(k, "    %s[j] = tm[threadIdx.x * %d + j];", a, V);
    if (b)
        kb_line(k, "    %s[j] = tq[threadIdx.x * %d + j];", b, V);
    kb_line(k, "}");
}

/* The tile's row-0 threads' a[v] and b[v] as the part's partial sums. */
static void bn_put_part(kb *k, const bn_tile *T, const char *a, const char *b)
{
    kb_line(k, "if (ty == 0 && ch < %lld)", (long long)T->c);
    kb_line(k, "    for (int j = 0; j < %d; j++) {", T->v);
    kb_line(k, "        pd[2 * ((ch + j) * %lld + part)] = %s[j];", (long long)T->parts, a);
    kb_line(k, "        pd[2 * ((ch + j) * %lld + part) + 1] = %s[j];", (long long)T->parts, b);
    kb_line(k, "    }");
}

/* mid: a block a channel, its threads taking every nt-th part; the parts
 * added in a fixed order (block_sum's) into double s and q, the same in all
 * of the block's threads.  With chan, the parts' means and squared
 * deviations merged (Chan et al.) into the channel's mean mu and variance
 * var; else the two sums. */
static void bn_merge_parts(kb *mid, const bn_tile *T, cg_ref ws, const kb *k, int chan)
{
    long long P = (long long)T->parts, L = (long long)k->plen;
    mid->nt = T->parts >= 256 ? 256 : 64;
    mid->grid = T->c;
    mid->parts = T->parts, mid->plen = k->plen, mid->pbytes = k->pbytes;
    mid->itype = k->itype;
    const char *red = shared_red(mid, 1);
    kb_line(mid, "const %s ch = blockIdx.x;", mid->itype);
    partials(mid, ws, 0);
    kb_line(mid, "double s = 0.0, q = 0.0;");
    const char *loop = kb_kstr(mid, "for (%s p = threadIdx.x; p < %lld; p += %d)", mid->itype, P,
                               mid->nt);
    if (!chan) {
        kb_line(mid, "%s {", loop);
        kb_line(mid, "    s += pd[2 * (ch * %lld + p)];", P);
        kb_line(mid, "    q += pd[2 * (ch * %lld + p) + 1];", P);
        kb_line(mid, "}");
        kb_line(mid, "s = block_sum<%d>(s, %s);", mid->nt, red);
        kb_line(mid, "q = block_sum<%d>(q, %s);", mid->nt, red);
        return;
    }
    const char *np = kb_kstr(mid, "(p == %lld ? %lld.0 : %lld.0)", P - 1,
                             (long long)T->rows - (P - 1) * L, L);
    kb_line(mid, "%s", loop);
    kb_line(mid, "    s += %s * pd[2 * (ch * %lld + p)];", np, P);
    kb_line(mid, "const double mu = block_sum<%d>(s, %s) / %lld.0;", mid->nt, red,
            (long long)T->rows);
    kb_line(mid, "%s {", loop);
    kb_line(mid, "    const double d = pd[2 * (ch * %lld + p)] - mu;", P);
    kb_line(mid, "    q += pd[2 * (ch * %lld + p) + 1] + %s * d * d;", P, np);
    kb_line(mid, "}");
    kb_line(mid, "const double var = block_sum<%d>(q, %s) / %lld.0;", mid->nt, red,
            (long long)T->rows);
}

/* The per-channel floats mid leaves to k: n of them a channel. */
static kparam *bn_channels(kb *k, cg_ref at, const bn_tile *T, int n, int write)
{
    kparam *p = kb_param_at(k, NULL, "chan", at, IR_F32, n * T->c * (int64_t)sizeof(float));
    if (write)
        p->write_other = 1;
    else
        p->read_other = 1;
    return p;
}

/* batchnorm_train over channels-last x: pre's statistics of each part (and
 * where a convolution left its bias here, x + bias stored back), mid's
 * merge, then y = (x - mean) scale + shift. */
static int64_t bn_train_nhwc(kb *k, const ir_node *n, kb *pre, kb *mid)
{
    bn_tile T = bn_tile_of(k, n->in[0]);
    long long C = (long long)T.c;
    int V = T.v;
    cg_ref ws = split(k, pre, T.tiles, T.rows, T.parts, 2 * T.tx * V);
    cg_ref chan = cg_workspace(k->G, 3 * T.c * (int64_t)sizeof(float));
    pre->nt = k->nt = 256;

    const ir_value *bias = k->G->bias_pending == n->in[0] && k->sp == 0 ? k->G->bias_of : NULL;
    emit_vloader(pre, n, V);
    bn_tile_start(pre, &T);
    partials(pre, ws, 1);
    const char *xw = NULL;
    if (bias) {
        bn_per_channel(pre, &T, "bb", kb_kstr(pre, "(float)%s",
                                              kb_at_index(pre, bias, "(ch + j)")));
        xw = kb_writes(pre, n->in[0], 1);
        kb_line(pre, "/* bb: the bias of %%%s, added to x here */", cg_name(bias));
    }
    kb_line(pre, "float sh[%d], s[%d], ss[%d];", V, V, V);
    kb_line(pre, "for (int j = 0; j < %d; j++)", V);
    kb_line(pre, "    sh[j] = s[j] = ss[j] = 0.0f;");
    kb_line(pre, "if (ch < %lld && r0 + ty < r1) { /* the thread's first elements: its shift */", C);
    kb_line(pre, "    x_atv((r0 + ty) * %lld + ch, sh);", C);
    if (bias)
        kb_line(pre, "    for (int j = 0; j < %d; j++) sh[j] += bb[j];", V);
    kb_line(pre, "}");
    bn_rows(pre, &T);
    kb_line(pre, "float a[%d];", V);
    kb_line(pre, "x_atv(i, a);");
    if (bias) {
        kb_line(pre, "for (int j = 0; j < %d; j++)", V);
        kb_line(pre, "    a[j] += bb[j];");
        kb_line(pre, "stv<%d>(%s, i, a);", V, xw);
    }
    kb_line(pre, "for (int j = 0; j < %d; j++) {", V);
    kb_line(pre, "    const float d = a[j] - sh[j];");
    kb_line(pre, "    s[j] += d;");
    kb_line(pre, "    ss[j] += d * d;");
    kb_line(pre, "}");
    bn_rows_end(pre);
    kb_line(pre, "const float nt = r0 + ty < r1 ? (float)((r1 - r0 - ty + %d) / %d) : 0.0f;",
            T.ty - 1, T.ty);
    kb_line(pre, "for (int j = 0; j < %d; j++) { /* the mean and squared deviations */", V);
    kb_line(pre, "    const float mt = nt > 0.0f ? s[j] / nt : 0.0f;");
    kb_line(pre, "    ss[j] = fmaxf(ss[j] - s[j] * mt, 0.0f);");
    kb_line(pre, "    s[j] = nt > 0.0f ? sh[j] + mt : 0.0f;");
    kb_line(pre, "}");
    bn_tile_tree(pre, &T, "s", "ss", 1);
    bn_put_part(pre, &T, "s", "ss");

    bn_merge_parts(mid, &T, ws, k, 1);
    bn_store_stats(mid, n, T.rows, "threadIdx.x == 0");
    kparam *cw = bn_channels(mid, chan, &T, 3, 1);
    kb_line(mid, "if (threadIdx.x == 0) {");
    kb_line(mid, "    %s[ch] = (float)mu;", cw->name);
    kb_line(mid, "    %s[%lld + ch] = (float)%s * (float)is;", cw->name, C,
            kb_at_index(mid, n->in[1], "ch"));
    kb_line(mid, "    %s[%lld + ch] = (float)%s;", cw->name, 2 * C, kb_at_index(mid, n->in[2], "ch"));
    kb_line(mid, "}");

    emit_vloader(k, n, V);
    emit_vstorer(k, n, V);
    bn_tile_start(k, &T);
    const char *cr = bn_channels(k, chan, &T, 3, 0)->name;
    bn_per_channel(k, &T, "fm", kb_kstr(k, "%s[ch + j]", cr));
    bn_per_channel(k, &T, "scale", kb_kstr(k, "%s[%lld + ch + j]", cr, C));
    bn_per_channel(k, &T, "shift", kb_kstr(k, "%s[%lld + ch + j]", cr, 2 * C));
    bn_rows(k, &T);
    kb_line(k, "float a[%d];", V);
    kb_line(k, "x_atv(i, a);");
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    a[j] = (a[j] - fm[j]) * scale[j] + shift[j];");
    kb_line(k, "y_putv(i, a);");
    bn_rows_end(k);
    return T.tiles * T.parts;
}

static const ir_node *bias_grad_of(kb *k, const ir_node *n);

/* acc += batchnorm_grad n's dx as stored, at elements i .. i + v - 1 (a
 * convolution's bias gradient, summed by the kernel that writes dx) */
static void bn_add_dx(kb *k, int V, const ir_node *n, const char *acc)
{
    int unaligned = k->unaligned;
    k->unaligned = 0;
    bn_vread(k, V, n->out[0], "c");
    k->unaligned = unaligned;
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    %s += c[j];", acc);
}

/* bn_rows over batchnorm_grad n's operands: q, dy through the prologue, and
 * b, x, at the row's elements */
static void bn_grad_rows(kb *k, const bn_tile *T, const ir_node *n)
{
    bn_rows(k, T);
    kb_line(k, "float q[%d];", T->v);
    kb_line(k, "x_atv(i, q);");
    bn_vread(k, T->v, n->in[1], "b");
}

/* batchnorm_grad over channels-last dy and x, as bn_train_nhwc: pre's sums
 * of dy and dy xhat of each part, mid's merge (and the gradients of the
 * scale and shift), then dx; and where a convolution's bias gradient sums dx
 * per channel next (bias_grad_of), each part's sum of dx as stored, the
 * tile's last part to finish adding its channels' parts in order. */
static int64_t bn_grad_nhwc(kb *k, const ir_node *n, kb *pre, kb *mid)
{
    bn_tile T = bn_tile_of(k, n->in[0]);
    long long C = (long long)T.c, P = (long long)T.parts;
    int V = T.v;
    const ir_node *bg = bias_grad_of(k, n);
    cg_ref ws = split(k, pre, T.tiles, T.rows, T.parts, 2 * T.tx * V), sums_dx = {0}, counts = {0};
    cg_ref chan = cg_workspace(k->G, 5 * T.c * (int64_t)sizeof(float));
    int64_t sd_bytes = T.parts * T.c * (int64_t)sizeof(double);
    if (bg) {
        sums_dx = cg_workspace(k->G, sd_bytes);
        counts = cg_workspace(k->G, T.tiles * (int64_t)sizeof(int));
    }
    pre->nt = k->nt = 256;

    emit_vloader(pre, n, V);
    bn_tile_start(pre, &T);
    partials(pre, ws, 1);
    bn_per_channel(pre, &T, "mu", kb_at_index(pre, n->in[3], "(ch + j)"));
    bn_per_channel(pre, &T, "is", kb_at_index(pre, n->in[4], "(ch + j)"));
    kb_line(pre, "float sdy[%d], sdyx[%d];", V, V);
    kb_line(pre, "for (int j = 0; j < %d; j++)", V);
    kb_line(pre, "    sdy[j] = sdyx[j] = 0.0f;");
    bn_grad_rows(pre, &T, n);
    kb_line(pre, "for (int j = 0; j < %d; j++) {", V);
    kb_line(pre, "    sdy[j] += q[j];");
    kb_line(pre, "    sdyx[j] += q[j] * (b[j] - mu[j]) * is[j];");
    kb_line(pre, "}");
    bn_rows_end(pre);
    bn_tile_tree(pre, &T, "sdy", "sdyx", 0);
    bn_put_part(pre, &T, "sdy", "sdyx");
    if (bg) { /* the tiles' counts of finished parts, from 0 */
        kparam *cn = kb_param_at(pre, NULL, "counts", counts, IR_I32,
                                 T.tiles * (int64_t)sizeof(int));
        cn->write_other = 1;
        kb_line(pre, "if (threadIdx.x == 0 && part == 0)");
        kb_line(pre, "    %s[blockIdx.x / %lld] = 0;", cn->name, P);
    }

    bn_merge_parts(mid, &T, ws, k, 0);
    kb_line(mid, "if (threadIdx.x == 0) {");
    mid->indent++;
    store_other(mid, n->out[2], "ch", "(float)s");
    store_other(mid, n->out[1], "ch", "(float)q");
    kparam *cw = bn_channels(mid, chan, &T, 5, 1);
    kb_line(mid, "const float is = %s;", kb_at_index(mid, n->in[4], "ch"));
    kb_line(mid, "%s[ch] = %s;", cw->name, kb_at_index(mid, n->in[3], "ch"));
    kb_line(mid, "%s[%lld + ch] = is;", cw->name, C);
    kb_line(mid, "%s[%lld + ch] = (float)((double)%s * is);", cw->name, 2 * C,
            kb_at_index(mid, n->in[2], "ch"));
    kb_line(mid, "%s[%lld + ch] = (float)(s / %lld.0);", cw->name, 3 * C, (long long)T.rows);
    kb_line(mid, "%s[%lld + ch] = (float)(q / %lld.0);", cw->name, 4 * C, (long long)T.rows);
    mid->indent--;
    kb_line(mid, "}");

    emit_vloader(k, n, V);
    emit_vstorer(k, n, V);
    bn_tile_start(k, &T);
    const char *cr = bn_channels(k, chan, &T, 5, 0)->name;
    static const char *const coef[5] = {"mu", "is", "k1", "k2", "k3"};
    for (int c = 0; c < 5; c++)
        bn_per_channel(k, &T, coef[c], kb_kstr(k, "%s[%lld + ch + j]", cr, c * C));
    if (bg)
        kb_line(k, "float sdx[%d] = {0.0f};", V);
    bn_grad_rows(k, &T, n);
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    q[j] = k1[j] * (q[j] - k2[j] - (b[j] - mu[j]) * is[j] * k3[j]);");
    kb_line(k, "y_putv(i, q);");
    if (bg)
        bn_add_dx(k, V, n, "sdx[j]");
    bn_rows_end(k);
    if (!bg)
        return T.tiles * T.parts;
    bn_tile_tree(k, &T, "sdx", NULL, 0);
    /* written here, read by the tile's last block: ordered by the fences and
       the count, which the check of accesses does not model */
    const char *db = kb_writes(k, bg->out[0], 0);
    kparam *sp = kb_param_at(k, NULL, "sums_dx", sums_dx, IR_F32, sd_bytes);
    kparam *cn = kb_param_at(k, NULL, "counts", counts, IR_I32, T.tiles * (int64_t)sizeof(int));
    sp->write_other = cn->write_other = 1;
    cg_sb_printf(&k->shared, "    __shared__ int last_part;\n");
    kb_line(k, "volatile double *sd = (volatile double *)%s;", sp->name);
    kb_line(k, "if (ty == 0 && ch < %lld)", C);
    kb_line(k, "    for (int j = 0; j < %d; j++)", V);
    kb_line(k, "        sd[part * %lld + ch + j] = sdx[j];", C);
    kb_line(k, "__threadfence();");
    kb_line(k, "__syncthreads();");
    kb_line(k, "if (threadIdx.x == 0)");
    kb_line(k, "    last_part = atomicAdd(&%s[blockIdx.x / %lld], 1) == %lld;", cn->name, P, P - 1);
    kb_line(k, "__syncthreads();");
    kb_line(k, "if (last_part && ty == 0 && ch < %lld) {", C);
    kb_line(k, "    __threadfence();");
    kb_line(k, "    for (int j = 0; j < %d; j++) {", V);
    kb_line(k, "        double b = 0.0;");
    kb_line(k, "        for (%s p = 0; p < %lld; p++)", k->itype, P);
    kb_line(k, "            b += sd[p * %lld + ch + j];", C);
    kb_line(k, "        st(%s, ch + j, (float)b); /* %%%s */", db, cg_name(bg->out[0]));
    kb_line(k, "    }");
    kb_line(k, "}");
    k->G->sum_done = bg;
    return T.tiles * T.parts;
}

/* ---- channel-major batchnorm ----
 *
 * Over x as [n, c, inner] (NCHW): a block per channel, or per part of a
 * channel's elements where the channels are too few to fill the GPU
 * (split's parts; blockIdx.x = channel x parts + part), the parts' sums
 * merged in part order by the kernel that normalizes.  A thread takes v
 * neighbouring elements of a plane, read and written 16 bytes at a time
 * where the planes' size allows (ldv/stv); t counts a channel's vectors.  A
 * thread's sums are floats (of x less its first element, which keeps them
 * small), merged over the block in double by block_sum's fixed order: the
 * statistics by Chan et al.'s formula, from each thread's mean and squared
 * deviations. */
typedef struct {
    int v;
    int64_t c, inner, count, vecs; /* a channel's count elements, vecs vectors */
} bn_plane;

static bn_plane bn_plane_of(kb *k, const ir_value *x)
{
    const ir_type *t = &x->type;
    bn_plane P;
    P.c = t->dims[1];
    P.inner = ir_type_numel(t) / (t->dims[0] * P.c);
    P.count = t->dims[0] * P.inner;
    P.v = 16 / (int)ir_dtype_size(cg_dtype_of(k->G, x));
    if (P.inner % P.v)
        P.v = 1;
    P.vecs = P.count / P.v;
    return P;
}

/* The parts each channel's vectors split into: k and pre made to reduce in
 * them where more than one. */
static int64_t bn_plane_split(kb *k, kb *pre, const bn_plane *P, cg_ref *ws)
{
    int64_t parts = parts_of(P->c, P->count);
    parts = kb_div_up(P->vecs, kb_div_up(P->vecs, parts)); /* no part empty */
    if (parts > 1)
        *ws = split(k, pre, P->c, P->vecs, parts, 2);
    return parts;
}

/* The first of vector t's elements of a channel. */
static const char *bn_plane_first(kb *k, const char *t, int v)
{
    return v == 1 ? t : kb_kstr(k, "%s * %d", t, v);
}

/* The element of the channel's e-th. */
static const char *bn_plane_index(kb *k, const bn_plane *P, const char *e)
{
    long long in = (long long)P->inner;
    return kb_kstr(k, "(%s) / %lld * %lld + (%s) %% %lld + ch * %lld", e, in,
                   (long long)P->c * in, e, in, in);
}

/* A kernel's threads and its ch (and part, t0, t1), over P's channels. */
static void bn_plane_start(kb *k, const bn_plane *P)
{
    k->nt = channel_threads(k->parts > 1 ? k->plen : P->vecs);
    channel_start(k, P->vecs);
}

/* The loop over the thread's vectors of its channel (or part), elements
 * i .. i + v - 1 of each: the body's lines go before bn_plane_end. */
static void bn_plane_loop(kb *k, const bn_plane *P)
{
    if (k->parts > 1)
        kb_line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, k->nt);
    else
        kb_line(k, "for (%s t = threadIdx.x; t < %lld; t += %d) {", k->itype,
                (long long)P->vecs, k->nt);
    k->indent++;
    kb_line(k, "const %s i = %s;", k->itype, bn_plane_index(k, P, bn_plane_first(k, "t", P->v)));
}

static void bn_plane_end(kb *k)
{
    k->indent--;
    kb_line(k, "}");
}

/* The statistics of the block's elements of x (its channel's or part's):
 * double np of them, their sum and m2, the sum of their squared deviations
 * about their mean.  Where a convolution left its bias to this kernel, x +
 * bias stored back, each element by the thread that reads it. */
static void bn_plane_stats(kb *k, const ir_node *n, const bn_plane *P)
{
    const ir_value *x = n->in[0];
    const ir_value *bias = k->G->bias_pending == x && k->sp == 0 ? k->G->bias_of : NULL;
    int V = P->v;
    const char *xw = NULL;
    kb_line(k, "{");
    k->indent++;
    if (k->parts <= 1)
        kb_line(k, "const %s t0 = 0, t1 = %lld;", k->itype, (long long)P->vecs);
    kb_line(k, "float sh = 0.0f, s = 0.0f, ss = 0.0f; /* sh: the thread's first element */");
    kb_line(k, "const %s first = t0 + threadIdx.x;", k->itype);
    if (bias) {
        xw = kb_writes(k, x, 1);
        kb_line(k, "const float bb = %s; /* the bias of %%%s, added to x here */",
                kb_at_index(k, bias, "ch"), cg_name(bias));
    }
    kb_line(k, "if (first < t1) {");
    kb_line(k, "    float a[%d];", V);
    kb_line(k, "    x_atv(%s, a);", bn_plane_index(k, P, bn_plane_first(k, "first", V)));
    kb_line(k, "    sh = a[0]%s;", bias ? " + bb" : "");
    kb_line(k, "}");
    bn_plane_loop(k, P);
    kb_line(k, "float a[%d];", V);
    kb_line(k, "x_atv(i, a);");
    if (bias) {
        kb_line(k, "for (int j = 0; j < %d; j++)", V);
        kb_line(k, "    a[j] += bb;");
        kb_line(k, "stv<%d>(%s, i, a);", V, xw);
    }
    kb_line(k, "for (int j = 0; j < %d; j++) {", V);
    kb_line(k, "    const float d = a[j] - sh;");
    kb_line(k, "    s += d;");
    kb_line(k, "    ss += d * d;");
    kb_line(k, "}");
    bn_plane_end(k);
    const char *red = shared_red(k, 1);
    kb_line(k, "const double tn = first < t1 ? (double)((t1 - first + %d) / %d * %d) : 0.0;",
            k->nt - 1, k->nt, V);
    kb_line(k, "const double tm = tn > 0.0 ? sh + s / tn : 0.0;");
    kb_line(k, "const double tq = tn > 0.0 ? fmax((double)ss - (double)s * s / tn, 0.0) : 0.0;");
    kb_line(k, "np = (double)(t1 - t0) * %d.0;", V);
    kb_line(k, "sum = block_sum<%d>(tn * tm, %s);", k->nt, red);
    kb_line(k, "const double d = tm - sum / np;");
    kb_line(k, "m2 = block_sum<%d>(tq + tn * d * d, %s);", k->nt, red);
    k->indent--;
    kb_line(k, "}");
}

/* The parts' np, sum and m2 (at pd) merged, in part order, into the
 * channel's mean mu and variance var. */
static void bn_plane_merge(kb *k, const bn_plane *P)
{
    long long L = (long long)k->plen * P->v, NP = (long long)k->parts;
    kb_line(k, "double s = 0.0, ss = 0.0;");
    kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, NP);
    kb_line(k, "    s += pd[2 * (ch * %lld + p)];", NP);
    kb_line(k, "const double mu = s / %lld.0;", (long long)P->count);
    kb_line(k, "for (%s p = 0; p < %lld; p++) {", k->itype, NP);
    kb_line(k, "    const double np = p == %lld ? %lld.0 : %lld.0, dv = pd[2 * (ch * %lld + p)] / np "
            "- mu;", NP - 1, (long long)P->count - (NP - 1) * L, L, NP);
    kb_line(k, "    ss += pd[2 * (ch * %lld + p) + 1] + np * dv * dv;", NP);
    kb_line(k, "}");
    kb_line(k, "const double var = ss / %lld.0;", (long long)P->count);
}

/* batchnorm_train over channel-major x: where in parts, pre's statistics of
 * each part; then, merged or computed here, y = (x - mean) scale + shift. */
static int64_t bn_train_nchw(kb *k, const ir_node *n, kb *pre)
{
    bn_plane P = bn_plane_of(k, n->in[0]);
    cg_ref ws = {0};
    int64_t parts = bn_plane_split(k, pre, &P, &ws);
    int V = P.v;
    if (parts > 1) {
        emit_vloader(pre, n, V);
        bn_plane_start(pre, &P);
        partials(pre, ws, 1);
        kb_line(pre, "double np, sum, m2;");
        bn_plane_stats(pre, n, &P);
        kb_line(pre, "if (threadIdx.x == 0) {");
        kb_line(pre, "    pd[2 * blockIdx.x] = sum;");
        kb_line(pre, "    pd[2 * blockIdx.x + 1] = m2;");
        kb_line(pre, "}");
    }
    emit_vloader(k, n, V);
    emit_vstorer(k, n, V);
    bn_plane_start(k, &P);
    if (parts > 1) {
        partials(k, ws, 0);
        bn_plane_merge(k, &P);
    } else {
        kb_line(k, "double np, sum, m2;");
        bn_plane_stats(k, n, &P);
        kb_line(k, "const double mu = sum / np, var = m2 / np;");
    }
    bn_store_stats(k, n, P.count, parts > 1 ? "threadIdx.x == 0 && part == 0" : "threadIdx.x == 0");
    kb_line(k, "const float fm = (float)mu, scale = %s * (float)is, shift = %s;",
            kb_at_index(k, n->in[1], "ch"), kb_at_index(k, n->in[2], "ch"));
    bn_plane_loop(k, &P);
    kb_line(k, "float a[%d];", V);
    kb_line(k, "x_atv(i, a);");
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    a[j] = (a[j] - fm) * scale + shift;");
    kb_line(k, "y_putv(i, a);");
    bn_plane_end(k);
    return P.c * parts;
}

/* batchnorm_grad's sums over the block's elements, sdy of dy and sdyx of
 * dy xhat: floats a thread, added over the block in double. */
static void bn_plane_grad_sums(kb *k, const ir_node *n, const bn_plane *P)
{
    kb_line(k, "float fdy = 0.0f, fdyx = 0.0f;");
    bn_plane_loop(k, P);
    kb_line(k, "float q[%d];", P->v);
    kb_line(k, "x_atv(i, q);");
    bn_vread(k, P->v, n->in[1], "b");
    kb_line(k, "for (int j = 0; j < %d; j++) {", P->v);
    kb_line(k, "    fdy += q[j];");
    kb_line(k, "    fdyx += q[j] * (b[j] - mu) * is;");
    kb_line(k, "}");
    bn_plane_end(k);
    const char *red = shared_red(k, 1);
    kb_line(k, "sdy = block_sum<%d>((double)fdy, %s);", k->nt, red);
    kb_line(k, "sdyx = block_sum<%d>((double)fdyx, %s);", k->nt, red);
}

/* batchnorm_grad over channel-major dy and x, as bn_train_nchw; and where a
 * convolution's bias gradient sums dx per channel next (bias_grad_of), the
 * block's sum of dx as stored, or its part's, the channel's last part to
 * finish adding the parts in order (CUDA's threadFenceReduction). */
static int64_t bn_grad_nchw(kb *k, const ir_node *n, kb *pre)
{
    bn_plane P = bn_plane_of(k, n->in[0]);
    cg_ref ws = {0}, sums_dx = {0}, counts = {0};
    int64_t parts = bn_plane_split(k, pre, &P, &ws), c = P.c;
    int V = P.v;
    const ir_node *bg = bias_grad_of(k, n);
    const char *stats = "const float mu = %s, is = %s;";
    if (parts > 1) { /* the parts' sums of dy and dy xhat */
        if (bg) { /* and of dx, added by the channel's last part: counts from 0 */
            sums_dx = cg_workspace(k->G, c * parts * (int64_t)sizeof(double));
            counts = cg_workspace(k->G, c * (int64_t)sizeof(int));
        }
        emit_vloader(pre, n, V);
        bn_plane_start(pre, &P);
        partials(pre, ws, 1);
        kb_line(pre, stats, kb_at_index(pre, n->in[3], "ch"), kb_at_index(pre, n->in[4], "ch"));
        kb_line(pre, "double sdy, sdyx;");
        bn_plane_grad_sums(pre, n, &P);
        kb_line(pre, "if (threadIdx.x == 0) {");
        kb_line(pre, "    pd[2 * blockIdx.x] = sdy;");
        kb_line(pre, "    pd[2 * blockIdx.x + 1] = sdyx;");
        if (bg) {
            kparam *cn = kb_param_at(pre, NULL, "counts", counts, IR_I32, c * (int64_t)sizeof(int));
            cn->write_other = 1;
            kb_line(pre, "    if (part == 0)");
            kb_line(pre, "        %s[ch] = 0;", cn->name);
        }
        kb_line(pre, "}");
    }
    emit_vloader(k, n, V);
    emit_vstorer(k, n, V);
    bn_plane_start(k, &P);
    kb_line(k, stats, kb_at_index(k, n->in[3], "ch"), kb_at_index(k, n->in[4], "ch"));
    kb_line(k, "double sdy = 0.0, sdyx = 0.0;");
    if (parts > 1) {
        partials(k, ws, 0);
        kb_line(k, "for (%s p = 0; p < %lld; p++) {", k->itype, (long long)parts);
        kb_line(k, "    sdy += pd[2 * (ch * %lld + p)];", (long long)parts);
        kb_line(k, "    sdyx += pd[2 * (ch * %lld + p) + 1];", (long long)parts);
        kb_line(k, "}");
    } else {
        bn_plane_grad_sums(k, n, &P);
    }
    kb_line(k, "if (threadIdx.x == 0%s) {", parts > 1 ? " && part == 0" : "");
    k->indent++;
    store_other(k, n->out[2], "ch", "(float)sdy");
    store_other(k, n->out[1], "ch", "(float)sdyx");
    k->indent--;
    kb_line(k, "}");
    /* dx = w is / N (N dy - sum dy - xhat sum(dy xhat)) */
    kb_line(k, "const float k1 = %s * is, k2 = (float)(sdy / %lld.0), k3 = (float)(sdyx / %lld.0);",
            kb_at_index(k, n->in[2], "ch"), (long long)P.count, (long long)P.count);
    if (bg)
        kb_line(k, "float fdx = 0.0f;");
    bn_plane_loop(k, &P);
    kb_line(k, "float q[%d];", V);
    kb_line(k, "x_atv(i, q);");
    bn_vread(k, V, n->in[1], "b");
    kb_line(k, "for (int j = 0; j < %d; j++)", V);
    kb_line(k, "    q[j] = k1 * (q[j] - k2 - (b[j] - mu) * is * k3);");
    kb_line(k, "y_putv(i, q);");
    if (bg)
        bn_add_dx(k, V, n, "fdx");
    bn_plane_end(k);
    if (!bg)
        return c * parts;
    kb_line(k, "const double sdx = block_sum<%d>((double)fdx, %s);", k->nt, shared_red(k, 1));
    const char *db = kb_writes(k, bg->out[0], 0);
    if (parts == 1) {
        kb_line(k, "if (threadIdx.x == 0)");
        kb_line(k, "    st(%s, ch, (float)sdx); /* %%%s */", db, cg_name(bg->out[0]));
    } else {
        /* written here, read by the last part's block: the accesses the
           fence and the count order, which the check of accesses does not
           model (each param written by other threads, read by none) */
        kparam *sp = kb_param_at(k, NULL, "sums_dx", sums_dx, IR_F32, c * parts * 8);
        kparam *cn = kb_param_at(k, NULL, "counts", counts, IR_I32, c * (int64_t)sizeof(int));
        sp->write_other = cn->write_other = 1;
        kb_line(k, "if (threadIdx.x == 0) {");
        kb_line(k, "    volatile double *sd = (volatile double *)%s;", sp->name);
        kb_line(k, "    sd[blockIdx.x] = sdx;");
        kb_line(k, "    __threadfence();");
        kb_line(k, "    if (atomicAdd(&%s[ch], 1) == %lld) {", cn->name, (long long)(parts - 1));
        kb_line(k, "        __threadfence();");
        kb_line(k, "        double b = 0.0;");
        kb_line(k, "        for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        kb_line(k, "            b += sd[ch * %lld + p];", (long long)parts);
        kb_line(k, "        st(%s, ch, (float)b); /* %%%s */", db, cg_name(bg->out[0]));
        kb_line(k, "    }");
        kb_line(k, "}");
    }
    k->G->sum_done = bg;
    return c * parts;
}

static int64_t sp_batchnorm_train(kb *k, const ir_node *n, kb *pre, kb *mid)
{
    return k->nhwc ? bn_train_nhwc(k, n, pre, mid) : bn_train_nchw(k, n, pre);
}

/* The sum_to after batchnorm_grad n that sums its dx per channel (a
 * convolution's bias gradient) where n's kernel may compute it too: the next
 * node, alone, on this device, reading dx as stored (n has no epilogue). */
static const ir_node *bias_grad_of(kb *k, const ir_node *n)
{
    const ir_node *s = n->next; /* the memory plan's rule too (memplan.c liveness) */
    const ir_type *t = &n->out[0]->type;
    if (k->G->no_sum_fold || k->G->init || k->sp != k->nm - 1 || !s || s->op != IR_OP_SUM_TO ||
        s->device != n->device ||
        s->in[0] != n->out[0] || s->group || !kb_needs_store(k, n->out[0]) || t->rank < 2 ||
        cg_dtype_of(k->G, s->out[0]) != IR_F32)
        return NULL;
    const ir_type *o = &s->out[0]->type;
    if (o->rank != t->rank || o->dims[1] != t->dims[1] || o->dims[0] != 1)
        return NULL;
    for (int d = 2; d < o->rank; d++)
        if (o->dims[d] != 1)
            return NULL;
    return s;
}

static int64_t sp_batchnorm_grad(kb *k, const ir_node *n, kb *pre, kb *mid)
{
    return k->nhwc ? bn_grad_nhwc(k, n, pre, mid) : bn_grad_nchw(k, n, pre);
}

/* sum_to's second kernel: a thread per output, adding its parts' sums (at
 * ws, parts per output) in order.  Returns its grid. */
static int64_t sum_parts(kb *k, const ir_node *n, cg_ref ws, int64_t out, int64_t parts)
{
    k->nt = 256;
    emit_storer(k, n);
    partials(k, ws, 0);
    kb_line(k, "const %s o = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    kb_line(k, "if (o >= %lld)", (long long)out);
    kb_line(k, "    return;");
    kb_line(k, "double s = 0.0;");
    kb_line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
    kb_line(k, "    s += pd[o * %lld + p];", (long long)parts);
    kb_line(k, "y_put(o, (float)s);");
    return kb_div_up(out, 256);
}

/* sum_to of [rows, cols] to [cols] (the output's dims the input's innermost:
 * a bias's gradient, channels-last per channel): tile_start's tiles, the
 * rows in parts where the tiles are too few for the GPU, the parts added in
 * order by a second kernel. */
static int64_t sum_columns(kb *k, const ir_node *n, kb *pre, int64_t rows, int64_t cols)
{
    int64_t tiles = kb_div_up(cols, 32), parts = tile_parts(tiles, rows);
    k->nt = 256;
    if (parts == 1) {
        k->parts = 1, k->plen = rows;
        emit_loader(k, n);
        emit_storer(k, n);
        tile_start(k, rows);
        kb_line(k, "double s = 0.0;");
        tile_loop(k, cols, "s += x_at(i);");
        tile_sum(k, "s");
        kb_line(k, "if (ty == 0 && ch < %lld)", (long long)cols);
        kb_line(k, "    y_put(ch, (float)s);");
        return tiles;
    }
    cg_ref ws = split(k, pre, tiles, rows, parts, 32);
    pre->nt = 256;
    emit_loader(pre, n);
    tile_start(pre, rows);
    partials(pre, ws, 1);
    kb_line(pre, "double s = 0.0;");
    tile_loop(pre, cols, "s += x_at(i);");
    tile_sum(pre, "s");
    kb_line(pre, "if (ty == 0 && ch < %lld)", (long long)cols);
    kb_line(pre, "    pd[ch * %lld + part] = s;", (long long)parts);
    return sum_parts(k, n, ws, cols, parts);
}

/* sum_to: output element o sums the input over the dims it broadcasts along. */
static int64_t sp_sum_to(kb *k, const ir_node *n, kb *pre)
{
    const ir_type *ta = kb_type(k, n->in[0]), *to = kb_type(k, n->out[0]);
    int r = ta->rank;
    int64_t ost[IR_MAX_RANK], ast[IR_MAX_RANK], s = 1;
    for (int d = r - 1; d >= 0; d--) {
        ast[d] = s;
        s *= ta->dims[d];
    }
    /* the output's strides as seen from the input's rank */
    s = 1;
    for (int d = r - 1; d >= 0; d--) {
        int kk = d - (r - to->rank);
        int64_t dim = kk >= 0 ? to->dims[kk] : 1;
        ost[d] = dim == 1 ? 0 : s;
        s *= dim;
    }
    int64_t red = 1, out = ir_type_numel(to);
    cg_sb base = {0}, off = {0};
    /* kept dims: the output index o enumerates them in order */
    int64_t kept_inner = 1;
    for (int d = r - 1; d >= 0; d--)
        if (!(ost[d] == 0 && ta->dims[d] > 1)) {
            if (ta->dims[d] > 1)
                kb_term(&base, "o", kept_inner, ta->dims[d], ast[d]);
            kept_inner *= ta->dims[d];
        }
    int64_t red_inner = 1;
    for (int d = r - 1; d >= 0; d--)
        if (ost[d] == 0 && ta->dims[d] > 1) {
            kb_term(&off, "t", red_inner, ta->dims[d], ast[d]);
            red_inner *= ta->dims[d];
        }
    red = red_inner;
    /* the kept dims the innermost: columns, when many rows make each */
    int64_t inner = 1;
    for (int d = r - 1; d >= 0 && !(ost[d] == 0 && ta->dims[d] > 1); d--)
        inner *= ta->dims[d];
    if (inner == out && out > 1 && red >= 2048 && out * red == ir_type_numel(ta)) {
        cg_sb_free(&base);
        cg_sb_free(&off);
        return sum_columns(k, n, pre, red, out);
    }
    const char *bx = kb_kstr(k, "%s", base.len ? base.s : "0");
    const char *ox = kb_kstr(k, "%s", off.len ? off.s : "0");
    cg_sb_free(&base);
    cg_sb_free(&off);
    /* a block per output element where each sums many, or where a thread
       each would leave the GPU idle; in parts where the outputs are few */
    int64_t parts = parts_of(out, red);
    if (out <= 65536 && (red >= 2048 || (out * red > 1000000 && kb_div_up(out, 256) < FILL_BLOCKS))
        && parts > 1) {
        cg_ref ws = split(k, pre, out, red, parts, 1);
        pre->nt = 256;
        emit_loader(pre, n);
        partials(pre, ws, 1);
        kb_line(pre, "const %s o = blockIdx.x / %lld, part = blockIdx.x %% %lld, b = %s;", k->itype,
                (long long)parts, (long long)parts, bx);
        kb_line(pre, "const %s t0 = part * %lld, t1 = part == %lld ? %lld : t0 + %lld;", k->itype,
                (long long)pre->plen, (long long)(parts - 1), (long long)red, (long long)pre->plen);
        kb_line(pre, "double s = 0.0;");
        kb_line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += 256)", k->itype);
        kb_line(pre, "    s += x_at(b + %s);", ox);
        kb_line(pre, "s = block_sum<256>(s, %s);", shared_red(pre, 1));
        kb_line(pre, "if (threadIdx.x == 0)");
        kb_line(pre, "    pd[blockIdx.x] = s;");
        return sum_parts(k, n, ws, out, parts);
    }
    emit_loader(k, n);
    emit_storer(k, n);
    if (out <= 65536 &&
        (red >= 2048 || (out * red > 1000000 && kb_div_up(out, 256) < FILL_BLOCKS))) {
        k->nt = 256;
        kb_line(k, "const %s o = blockIdx.x, b = %s;", k->itype, bx);
        kb_line(k, "double s = 0.0;");
        kb_line(k, "for (%s t = threadIdx.x; t < %lld; t += 256)", k->itype, (long long)red);
        kb_line(k, "    s += x_at(b + %s);", ox);
        kb_line(k, "s = block_sum<256>(s, %s);", shared_red(k, 1));
        kb_line(k, "if (threadIdx.x == 0)");
        kb_line(k, "    y_put(o, (float)s);");
        return out;
    }
    k->nt = 256;
    kb_line(k, "const %s o = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    kb_line(k, "if (o >= %lld)", (long long)out);
    kb_line(k, "    return;");
    kb_line(k, "const %s b = %s;", k->itype, bx);
    kb_line(k, "double s = 0.0;");
    kb_line(k, "for (%s t = 0; t < %lld; t++)", k->itype, (long long)red);
    kb_line(k, "    s += x_at(b + %s);", ox);
    kb_line(k, "y_put(o, (float)s);");
    return kb_div_up(out, 256);
}

/* embedding_grad: thread col owns column col of dw, zeroes it, then adds the
 * rows of dy in order (grad.c's order: the same bits, no atomics). */
static int64_t sp_embedding_grad(kb *k, const ir_node *n)
{
    const ir_type *tw = &n->out[0]->type;
    int64_t num = tw->dims[0], dim = tw->dims[1], len = ir_type_numel(&n->in[1]->type);
    int64_t of = ir_attr_int(n, "shard_of"), rows = of ? of : num;
    k->nt = 256;
    k->status = 1;
    emit_loader(k, n);
    const char *idx = kb_reads(k, n->in[1], 0), *dw = kb_writes(k, n->out[0], 0);
    kb_line(k, "const %s col = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    kb_line(k, "if (col >= %lld)", (long long)dim);
    kb_line(k, "    return;");
    kb_line(k, "for (%s r = 0; r < %lld; r++)", k->itype, (long long)num);
    kb_line(k, "    st(%s, r * %lld + col, 0.0f);", dw, (long long)dim);
    kb_line(k, "for (%s t = 0; t < %lld; t++) {", k->itype, (long long)len);
    kb_line(k, "    const i64 id = ld(%s, t), row = id - %lld;", idx,
            (long long)ir_attr_int(n, "shard_start"));
    kb_line(k, "    if (id < 0 || id >= %lld) {", (long long)rows);
    kb_line(k, "        if (col == 0)");
    kb_line(k, "            report(status, %d, (int)step, t, id);", CG_STATUS_EMBEDDING_INDEX);
    kb_line(k, "        continue;");
    kb_line(k, "    }");
    if (of) { /* another device's rows of the vocabulary */
        kb_line(k, "    if (row < 0 || row >= %lld)", (long long)num);
        kb_line(k, "        continue;");
    }
    if (ir_attr_int(n, "padding_idx") >= 0) { /* nn.Embedding's padding_idx: no gradient */
        kb_line(k, "    if (id == %lld)", (long long)ir_attr_int(n, "padding_idx"));
        kb_line(k, "        continue;");
    }
    kb_line(k, "    const %s at = row * %lld + col;", k->itype, (long long)dim);
    kb_line(k, "    st(%s, at, ld(%s, at) + x_at(t * %lld + col));", dw, dw, (long long)dim);
    kb_line(k, "}");
    /* dw is read back by the thread that writes it */
    kb_param(k, n->out[0])->write_other = 0;
    kb_param(k, n->out[0])->write_aligned = 1;
    return kb_div_up(dim, 256);
}

/* layernorm_grad: a kernel of rows (dx, and each row's mean and 1/std into the
 * workspace), then one of columns (dw, db). */
static int sp_layernorm_grad(kb *k, const ir_node *n, kb *k2)
{
    int64_t d = ir_type_numel(&n->in[2]->type), rows = ir_type_numel(&n->in[1]->type) / d;
    double eps = ir_attr_float(n, "eps");
    cg_ref stats = cg_workspace(k->G, rows * 2 * (int64_t)sizeof(float));
    int64_t grid = row_start(k, rows, d);
    emit_loader(k, n);
    emit_storer(k, n);
    const char *x = kb_reads(k, n->in[1], 0), *w = kb_reads(k, n->in[2], 0);
    const char *st = kb_param_at(k, NULL, "stats", stats, IR_F32, rows * 2 * 4)->name;
    k->par[k->npar - 1].write_other = 1;
    kb_line(k, "double mu = 0.0, var = 0.0, s1 = 0.0, s2 = 0.0;");
    kb_line(k, "%s", row_loop(k, d));
    kb_line(k, "    mu += ld(%s, base + t);", x);
    kb_line(k, "mu = %s / %lld.0;", rsum(k, "mu", 1), (long long)d);
    kb_line(k, "%s {", row_loop(k, d));
    kb_line(k, "    const double dv = ld(%s, base + t) - mu;", x);
    kb_line(k, "    var += dv * dv;");
    kb_line(k, "}");
    kb_line(k, "var = %s;", rsum(k, "var", 1));
    kb_line(k, "const double is = 1.0 / sqrt(var / %lld.0 + %s);", (long long)d, kb_dlit(k, eps));
    kb_line(k, "if (%s == 0) {", k->lane0);
    kb_line(k, "    st(%s, 2 * row, (float)mu);", st);
    kb_line(k, "    st(%s, 2 * row + 1, (float)is);", st);
    kb_line(k, "}");
    kb_line(k, "%s {", row_loop(k, d));
    kb_line(k, "    const double g = (double)x_at(base + t) * ld(%s, t);", w);
    kb_line(k, "    s1 += g;");
    kb_line(k, "    s2 += g * (ld(%s, base + t) - mu) * is;", x);
    kb_line(k, "}");
    kb_line(k, "s1 = %s;", rsum(k, "s1", 1));
    kb_line(k, "s2 = %s;", rsum(k, "s2", 1));
    kb_line(k, "%s {", row_loop(k, d));
    kb_line(k, "    const double xhat = (ld(%s, base + t) - mu) * is, g = (double)x_at(base + t) * "
            "ld(%s, t);", x, w);
    kb_line(k, "    y_put(base + t, (float)(is * (g - s1 / %lld.0 - xhat * s2 / %lld.0)));",
            (long long)d, (long long)d);
    kb_line(k, "}");

    /* the columns: dw[i] = sum_r dy xhat, db[i] = sum_r dy */
    k2->nt = 256;
    k2->itype = k->itype;
    const char *dy2 = kb_reads(k2, n->in[0], 0), *x2 = kb_reads(k2, n->in[1], 0);
    const char *st2 = kb_param_at(k2, NULL, "stats", stats, IR_F32, rows * 2 * 4)->name;
    k2->par[k2->npar - 1].read_other = 1;
    kb_line(k2, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    kb_line(k2, "if (c >= %lld)", (long long)d);
    kb_line(k2, "    return;");
    kb_line(k2, "double sw = 0.0, sb = 0.0;");
    kb_line(k2, "for (%s r = 0; r < %lld; r++) {", k->itype, (long long)rows);
    kb_line(k2,
            "    const double xhat = (ld(%s, r * %lld + c) - ld(%s, 2 * r)) * (double)ld(%s, 2 * r + 1);",
            x2, (long long)d, st2, st2);
    kb_line(k2, "    sw += ld(%s, r * %lld + c) * xhat;", dy2, (long long)d);
    kb_line(k2, "    sb += ld(%s, r * %lld + c);", dy2, (long long)d);
    kb_line(k2, "}");
    store_other(k2, n->out[1], "c", "(float)sw");
    store_other(k2, n->out[2], "c", "(float)sb");
    (void)grid;
    return 0;
}

static int special_kernel(kb *k)
{
    const ir_node *n = k->m[k->sp];
    k->itype = kb_index_type(kb_max_numel(k));
    k->iter = kb_type(k, n->out[0]);
    int64_t grid;
    int64_t d = 0, rows = 0;
    kb pre; /* a split reduction's first kernel: the partial sums */
    kb_init(&pre, k->G, k->m, k->nm, k->sp, "the partial sums of a reduction in parts, for");
    kb mid; /* where there is one, the second: the partial sums merged */
    kb_init(&mid, k->G, k->m, k->nm, k->sp, "the partial sums merged, per channel, for");
    pre.iter = mid.iter = k->iter;
    switch (n->op) {
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: grid = sp_softmax(k, n, &pre); break;
    case IR_OP_SOFTMAX_GRAD: case IR_OP_LOG_SOFTMAX_GRAD:
        grid = sp_softmax_grad(k, n, &pre);
        break;
    case IR_OP_LAYERNORM: grid = sp_layernorm(k, n); break;
    case IR_OP_CROSS_ENTROPY: case IR_OP_NLL_LOSS: grid = sp_cross_entropy(k, n, &pre); break;
    case IR_OP_CROSS_ENTROPY_GRAD: case IR_OP_NLL_LOSS_GRAD:
        grid = sp_cross_entropy_grad(k, n, &pre);
        break;
    case IR_OP_MSE: grid = sp_mse(k, n, &pre); break;
    case IR_OP_GLOBAL_AVGPOOL: grid = sp_global_avgpool(k, n); break;
    case IR_OP_BATCHNORM_TRAIN: grid = sp_batchnorm_train(k, n, &pre, &mid); break;
    case IR_OP_BATCHNORM_GRAD: grid = sp_batchnorm_grad(k, n, &pre, &mid); break;
    case IR_OP_SUM_TO: grid = sp_sum_to(k, n, &pre); break;
    case IR_OP_EMBEDDING_GRAD: grid = sp_embedding_grad(k, n); break;
    case IR_OP_ATTENTION: case IR_OP_ATTENTION_GRAD: { /* attention.c: one or three kernels */
        emit_storer(k, n);
        int rc = kb_attention(k);
        kb_free(&pre);
        kb_free(&mid);
        return rc;
    }
    case IR_OP_LAYERNORM_GRAD: {
        kb k2;
        memset(&k2, 0, sizeof k2);
        k2.G = k->G;
        k2.m = k->m + k->sp;
        k2.nm = 1;
        k2.sp = 0;
        k2.indent = 1;
        k2.idx = "i";
        cg_sb_printf(&k2.head, "/* the weight's and bias's gradients of\n");
        cg_describe_node(&k2.head, n);
        cg_sb_put(&k2.head, " */\n", 4);
        sp_layernorm_grad(k, n, &k2);
        d = ir_type_numel(&n->in[2]->type);
        rows = ir_type_numel(&n->in[1]->type) / d;
        if (k->shared.len)
            kb_body_prepend(k, &k->shared);
        int rc = -1;
        if (kb_accesses_safe(k) && kb_accesses_safe(&k2)) {
            int64_t g1 = d <= 1024 ? kb_div_up(rows, 8) : rows;
            kb_finish(k, kb_kernel_base(k, NULL), k->nt, g1, 0, n, kb_kernel_what(k));
            kb_finish(&k2, kb_kstr(k, "layernorm_grad_columns__%s", cg_name(n->out[1])), 256,
                      kb_div_up(d, 256), 0, n, cg_pprintf(k->G->p, "layernorm_grad columns %%%s",
                                                             cg_name(n->out[1])));
            rc = 0;
        }
        kb_free(&k2);
        kb_free(&pre);
        kb_free(&mid);
        return rc;
    }
    default:
        cg_fail(k->G, n, "no kernel for %s", ir_ops[n->op].name);
        kb_free(&pre);
        kb_free(&mid);
        return 0;
    }
    if (k->shared.len)
        kb_body_prepend(k, &k->shared);
    int rc = 0;
    if (pre.grid) {
        if (pre.shared.len)
            kb_body_prepend(&pre, &pre.shared);
        if (mid.shared.len)
            kb_body_prepend(&mid, &mid.shared);
        rc = kb_accesses_safe(&pre) && (!mid.grid || kb_accesses_safe(&mid)) &&
             kb_accesses_safe(k) ? 0 : -1;
        if (rc == 0)
            kb_finish(&pre, kb_kernel_base(&pre, "parts"), pre.nt, pre.grid, 0, n,
                      pre.parts > 1 ? cg_pprintf(k->G->p, "%s: partial sums, %lld parts per "
                                                    "reduction", kb_kernel_what(k), (long long)pre.parts)
                                    : cg_pprintf(k->G->p, "%s: partial sums, a term per row",
                                                    kb_kernel_what(k)));
        if (rc == 0 && mid.grid)
            kb_finish(&mid, kb_kernel_base(&mid, "merge"), mid.nt, mid.grid, 0, n,
                      cg_pprintf(k->G->p, "%s: the %lld parts merged per channel",
                                 kb_kernel_what(k), (long long)mid.parts));
    }
    if (rc == 0)
        rc = kb_finish(k, kb_kernel_base(k, NULL), k->nt, grid, 0, n, kb_kernel_what(k));
    if (rc == 0 && k->G->bias_pending == n->in[0] && n->op == IR_OP_BATCHNORM_TRAIN)
        k->G->bias_pending = NULL; /* added */
    kb_free(&pre);
    kb_free(&mid);
    return rc;
}

int cg_emit_kernel(cg_gen *G, const ir_node *const *m, int nm, int sp)
{
    kb k;
    kb_init(&k, G, m, nm, sp, nm > 1 ? "a fused node:" : ir_ops[m[0]->op].name);
    int rc = sp < 0 ? kb_map_kernel(&k) : special_kernel(&k);
    kb_free(&k);
    if (rc != 0 && G->sum_done) { /* with the bias gradient it overlaps: without */
        G->sum_done = NULL;
        G->no_sum_fold = 1;
        kb_init(&k, G, m, nm, sp, nm > 1 ? "a fused node:" : ir_ops[m[0]->op].name);
        rc = special_kernel(&k);
        kb_free(&k);
        G->no_sum_fold = 0;
    }
    return rc;
}
