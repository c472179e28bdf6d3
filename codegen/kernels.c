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
 * splits the fused node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_PARAMS 480     /* a multi-tensor kernel's pointers: 3840 of CUDA's 4096 bytes */
#define MAX_REGS 512       /* registers in one kernel's scopes */

typedef struct {
    const ir_value *v;          /* the first value read or written here (its name) */
    cg_ref at;
    ir_dtype dt;
    int64_t bytes;
    int read_aligned, read_other, write_aligned, write_other;
    char name[96];
} kparam;

typedef struct {
    cg_gen *G;
    const ir_node *const *m;
    int nm, sp;
    const ir_type *iter;        /* the shape a map kernel (or an epilogue) runs over */
    cg_sb head;                 /* the comment over the kernel */
    cg_sb body;
    cg_sb pre;                  /* statements before a map kernel's loop */
    int indent;
    kparam par[MAX_PARAMS];
    int npar;
    int status, scaler, scaler_write;
    int vec;                    /* map kernels: elements per thread */
    int array;                  /* registers as arrays NAME_v[j] (vec 4) */
    const char *idx;            /* the element index in the current scope */
    const char *itype;          /* "int" or "i64" */
    /* registers: value id -> name, in the current scope */
    int nregs;
    int reg_id[MAX_REGS];
    char *reg_name[MAX_REGS];
    int reg_array[MAX_REGS];
    /* identifiers in use; those made from value names (a multi-tensor
       kernel has thousands: every one counts, or two would be declared alike) */
    int nnames, capnames;
    const char **names;
    int nvnames, capvnames;
    const char **vnames;
    /* strings the builder made */
    int nstrs, capstrs;
    char **strs;
    int overflow;
    int unaligned;              /* reads in this scope are at any element (x_at) */
    cg_sb shared;               /* __shared__ declarations */
    int red_f, red_d;           /* the reduction scratch declared */
    const char *lane0;          /* row kernels: the first index of a thread, its step */
    int64_t lstep;
    int warp_rows;              /* a warp per row (else a block) */
    int nt;                     /* threads per block */
    /* a split reduction (parts_of): each group's elements in parts of plen,
       a block each; grid: the blocks of a first kernel (the partial sums) */
    int64_t parts, plen, grid, pbytes;
} kb;

/* Names a kernel's own code uses: a parameter or register made from a value's
 * name never takes one of them. */
static const char *const reserved[] = {
    /* C++ */
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
    "unsigned", "void", "volatile", "while", "class", "new", "delete", "this", "template",
    "typename", "namespace", "using", "operator", "true", "false", "private", "public",
    "protected", "virtual", "friend", "throw", "try", "catch", "explicit", "mutable", "asm",
    "NULL", "main", "float4", "uint2", "make_float4",
    /* CUDA and the prelude */
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "i64", "u64", "bf16", "f16",
    "ld", "st", "ldv", "stv", "to_f32", "to_bf16", "to_f16", "relu_f", "sigmoid_f", "gelu_f",
    "gelu_grad_f", "silu_f", "silu_grad_f", "warp_sum", "warp_max", "block_sum", "block_max",
    "splitmix64",
    "dropout_key", "dropout_keep", "report", "gnc_status", "gnc_scaler", "NEG_INF", "POS_INF",
    "expf", "erff", "tanhf", "logf", "sqrtf", "exp", "log", "sqrt", "pow", "fabsf", "rintf",
    /* the templates' own */
    "status", "step", "scaler", "x_at", "y_put", "red", "redd", "i", "j", "e", "n", "t", "v",
    "lane", "warp", "row", "base", "c", "mx", "sum", "lse", "q", "s", "total", "y", "o", "b",
    "ch", "mu", "is", "var", "fm", "scale", "shift", "sdy", "sdyx", "k1", "k2", "k3", "xhat",
    "col", "r", "at", "pl", "d", "dv", "mean", "inv", "m", "g", "s1", "s2", "sw", "sb", "x",
    "a", "ky", "kx", "iy", "ix", "oy", "ox", "y0", "x0", "y1", "x1", "ya", "yb", "xa", "xb",
    "oy0", "oy1", "ox0", "ox1", "arg", "arg_found", "u", "w", "pos", "src", "dst", "vec",
    "part", "t0", "t1", "p", "pd", "np", "mp", "bb", "sdx", "sd",
    NULL};

static char *kstr(kb *k, const char *fmt, ...) DIAG_PRINTF(2, 3);
static char *kstr(kb *k, const char *fmt, ...)
{
    cg_sb b = {0};
    va_list ap;
    va_start(ap, fmt);
    cg_sb_vprintf(&b, fmt, ap);
    va_end(ap);
    if (k->nstrs == k->capstrs) {
        k->capstrs = k->capstrs ? 2 * k->capstrs : 256;
        k->strs = base_xrealloc(k->strs, (size_t)k->capstrs * sizeof *k->strs);
    }
    return k->strs[k->nstrs++] = b.s ? b.s : base_xstrdup("");
}

static void push_name(const char ***list, int *n, int *cap, const char *s)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *list = base_xrealloc(*list, (size_t)*cap * sizeof **list);
    }
    (*list)[(*n)++] = s;
}

static int name_taken(const kb *k, const char *s)
{
    for (int i = 0; reserved[i]; i++)
        if (strcmp(reserved[i], s) == 0)
            return 1;
    for (int i = 0; i < k->nnames; i++)
        if (strcmp(k->names[i], s) == 0)
            return 1;
    return 0;
}

/* A fresh identifier made from text (any bytes). */
static const char *fresh(kb *k, const char *text, const char *suffix)
{
    char base[96];
    size_t n = 0;
    if (!((text[0] >= 'a' && text[0] <= 'z') || (text[0] >= 'A' && text[0] <= 'Z')))
        base[n++] = 'v', base[n++] = '_';
    for (const char *s = text; *s && n < 60; s++) {
        char c = *s;
        base[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' ? c : '_';
    }
    base[n] = 0;
    char *try = kstr(k, "%s%s", base, suffix);
    for (int i = 2; name_taken(k, try); i++)
        try = kstr(k, "%s%s_%d", base, suffix, i);
    push_name(&k->names, &k->nnames, &k->capnames, try);
    return try;
}

static void line(kb *k, const char *fmt, ...) DIAG_PRINTF(2, 3);
static void line(kb *k, const char *fmt, ...)
{
    for (int i = 0; i < k->indent; i++)
        cg_sb_put(&k->body, "    ", 4);
    va_list ap;
    va_start(ap, fmt);
    cg_sb_vprintf(&k->body, fmt, ap);
    va_end(ap);
    cg_sb_put(&k->body, "\n", 1);
}

const char *cg_ctype(ir_dtype t)
{
    switch (t) {
    case IR_F16: return "f16";
    case IR_BF16: return "bf16";
    case IR_I32: return "int";
    case IR_I64: return "i64";
    case IR_U8: return "unsigned char";
    default: return "float";
    }
}

/* the type registers of storage dtype t have */
static const char *rtype(ir_dtype t) { return ir_is_float(t) ? "float" : cg_ctype(t); }

/* ---- parameters ---- */

static kparam *param_at(kb *k, const ir_value *v, const char *base, cg_ref at, ir_dtype dt,
                        int64_t bytes)
{
    for (int i = 0; i < k->npar; i++)
        if (k->par[i].at.region == at.region && k->par[i].at.offset == at.offset &&
            k->par[i].dt == dt && k->par[i].bytes == bytes)
            return &k->par[i];
    if (k->npar == MAX_PARAMS) {
        k->overflow = 1;
        return &k->par[0];
    }
    kparam *p = &k->par[k->npar++];
    memset(p, 0, sizeof *p);
    p->v = v;
    p->at = at;
    p->dt = dt;
    p->bytes = bytes;
    snprintf(p->name, sizeof p->name, "%s", fresh(k, base, ""));
    push_name(&k->vnames, &k->nvnames, &k->capvnames, p->name);
    return p;
}

static kparam *param(kb *k, const ir_value *v)
{
    ir_dtype dt = cg_dtype_of(k->G, v);
    return param_at(k, v, cg_name(v), cg_ref_of(k->G, v), dt,
                    ir_type_numel(&v->type) * (int64_t)cg_dtype_size(dt));
}

/* The parameter of v, read at elements aligned with the kernel's or not. */
static const char *reads(kb *k, const ir_value *v, int aligned)
{
    kparam *p = param(k, v);
    if (aligned && !k->unaligned)
        p->read_aligned = 1;
    else
        p->read_other = 1;
    return p->name;
}

static const char *writes(kb *k, const ir_value *v, int aligned)
{
    kparam *p = param(k, v);
    if (aligned)
        p->write_aligned = 1;
    else
        p->write_other = 1;
    return p->name;
}

/* ---- registers ---- */

static int reg_slot(const kb *k, const ir_value *v)
{
    for (int i = k->nregs - 1; i >= 0; i--)
        if (k->reg_id[i] == v->id)
            return i;
    return -1;
}

static const char *reg(kb *k, const ir_value *v)
{
    int s = reg_slot(k, v);
    if (s < 0)
        return NULL;
    return k->reg_array[s] ? kstr(k, "%s[j]", k->reg_name[s]) : k->reg_name[s];
}

static const char *new_reg(kb *k, const ir_value *v, int array)
{
    if (k->nregs == MAX_REGS) {
        k->overflow = 1;
        return "overflow";
    }
    int s = k->nregs++;
    k->reg_id[s] = v->id;
    k->reg_name[s] = (char *)fresh(k, cg_name(v), "_v");
    k->reg_array[s] = array;
    push_name(&k->vnames, &k->nvnames, &k->capvnames, k->reg_name[s]);
    return k->reg_name[s];
}

/* a register named name for v (a lambda's parameter) */
static void bind_reg(kb *k, const ir_value *v, const char *name)
{
    if (k->nregs == MAX_REGS) {
        k->overflow = 1;
        return;
    }
    int s = k->nregs++;
    k->reg_id[s] = v->id;
    k->reg_name[s] = (char *)name;
    k->reg_array[s] = 0;
}

/* Assigns expr to v's register (declaring it in scalar mode). */
static void set(kb *k, const ir_value *v, const char *expr)
{
    const char *rt = rtype(cg_dtype_of(k->G, v));
    if (k->array) {
        int s = reg_slot(k, v);
        const char *n = s >= 0 ? k->reg_name[s] : NULL;
        if (!n) {
            n = new_reg(k, v, 1);
            cg_sb_printf(&k->pre, "    %s %s[4];\n", rt, n);
        }
        line(k, "%s[j] = %s;", n, expr);
    } else {
        line(k, "const %s %s = %s;", rt, new_reg(k, v, 0), expr);
    }
}

/* ---- literals and indices ---- */

static const char *flit(kb *k, double x)
{
    float f = (float)x;
    if (isnan(f))
        return "__uint_as_float(0x7fc00000u)";
    if (isinf(f))
        return f > 0 ? "POS_INF" : "NEG_INF";
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", (double)f);
    if (!strpbrk(buf, ".e"))
        strcat(buf, ".0");
    return kstr(k, "%sf", buf);
}

static const char *dlit(kb *k, double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", x);
    if (!strpbrk(buf, ".en"))
        strcat(buf, ".0");
    return kstr(k, "%s", buf);
}

/* (idx / div) % mod * mul, leaving out what is 1 (mod <= 0: no modulo) */
static void term(cg_sb *b, const char *idx, int64_t div, int64_t mod, int64_t mul)
{
    int paren = div > 1 || mod > 0;
    if (b->len)
        cg_sb_put(b, " + ", 3);
    if (paren && mul != 1)
        cg_sb_put(b, "(", 1);
    if (div > 1 && mod > 0)
        cg_sb_printf(b, "%s / %lld %% %lld", idx, (long long)div, (long long)mod);
    else if (div > 1)
        cg_sb_printf(b, "%s / %lld", idx, (long long)div);
    else if (mod > 0)
        cg_sb_printf(b, "%s %% %lld", idx, (long long)mod);
    else
        cg_sb_printf(b, "%s", idx);
    if (paren && mul != 1)
        cg_sb_put(b, ")", 1);
    if (mul != 1)
        cg_sb_printf(b, " * %lld", (long long)mul);
}

/* The index into t (which broadcasts to out) of out's element idx. */
static const char *bcast_index(kb *k, const ir_type *t, const ir_type *out, const char *idx)
{
    int r = out->rank;
    int64_t st[IR_MAX_RANK], dims[IR_MAX_RANK], ost[IR_MAX_RANK];
    int n = 0;
    /* merged dims, outermost first: dims[i], operand stride st[i] */
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        int kk = i - (r - t->rank);
        int64_t d = kk >= 0 ? t->dims[kk] : 1;
        int64_t stride = d == 1 ? 0 : s;
        s *= d;
        int64_t od = out->dims[i];
        if (od == 1)
            continue;
        if (n && ((stride == 0 && st[n - 1] == 0) ||
                  (stride != 0 && st[n - 1] != 0 && st[n - 1] * dims[n - 1] == stride))) {
            /* the same kind as the inner neighbour: one dim */
            dims[n - 1] *= od;
            continue;
        }
        st[n] = stride;
        dims[n] = od;
        n++;
    }
    /* n dims, innermost first; strides of out's merged dims */
    int64_t o = 1;
    for (int i = 0; i < n; i++) {
        ost[i] = o;
        o *= dims[i];
    }
    cg_sb b = {0};
    for (int i = n - 1; i >= 0; i--) {
        if (st[i] == 0)
            continue;
        term(&b, idx, ost[i], i == n - 1 ? 0 : dims[i], st[i]);
    }
    const char *res = kstr(k, "%s", b.len ? b.s : "0");
    cg_sb_free(&b);
    return res;
}

/* ---- operands ---- */

static int in_segment(const kb *k, int position)
{
    for (int i = 0; i < k->nm; i++)
        if (k->G->pos[k->m[i]->out[0]->id] == position)
            return 1;
    return 0;
}

/* Whether v, made by a member, must be stored: read after the kernel. */
static int needs_store(kb *k, const ir_value *v)
{
    cg_gen *G = k->G;
    if (G->external[v->id])
        return 1;
    for (int r = G->rstart[v->id]; r < G->rstart[v->id + 1]; r++)
        if (!in_segment(k, G->readers[r]))
            return 1;
    /* read inside but not from a register (the others fail the check) */
    for (int r = G->rstart[v->id]; r < G->rstart[v->id + 1]; r++) {
        const ir_node *m = G->node_at[G->readers[r]];
        if (m->in[0] != v && !(m->nin > 1 && m->in[1] == v))
            return 1;
    }
    return 0;
}

/* Operand v at element idx of the kernel's shape (k->iter), as an expression. */
static const char *opnd(kb *k, const ir_value *v)
{
    const char *r = reg(k, v);
    if (r)
        return r;
    if (cg_const_inline(k->G, v)) {
        const char *lit = flit(k, ir_attr_float(v->def, "value"));
        if (cg_const_scaled(k->G, v)) {
            k->scaler = 1;
            return kstr(k, "(%s * scaler->scale)", lit);
        }
        return lit;
    }
    if (ir_type_numel(&v->type) == 1 && ir_type_numel(k->iter) > 1)
        return kstr(k, "ld(%s, 0)", reads(k, v, 0));
    if (ir_type_eq(&v->type, k->iter)) {
        const char *p = reads(k, v, 1);
        if (k->array && ir_is_float(cg_dtype_of(k->G, v))) { /* a vector load before the loop */
            const char *n = new_reg(k, v, 1);
            cg_sb_printf(&k->pre, "    float %s[4];\n    ldv<4>(%s, e, %s);\n", n, p, n);
            return reg(k, v);
        }
        return kstr(k, "ld(%s, %s)", p, k->idx);
    }
    return kstr(k, "ld(%s, %s)", reads(k, v, 0), bcast_index(k, &v->type, k->iter, k->idx));
}

/* Operand v read at an index the op computes (never aligned). */
static const char *at_index(kb *k, const ir_value *v, const char *index)
{
    if (cg_const_inline(k->G, v))
        return opnd(k, v);
    return kstr(k, "ld(%s, %s)", reads(k, v, 0), index);
}

static const char *tmp(kb *k, const char *base) { return fresh(k, base, ""); }

/* ---- the comment over a kernel ---- */

static void put_safe(cg_sb *b, const char *s)
{
    for (; *s; s++) {
        if (s[0] == '*' && s[1] == '/')
            cg_sb_put(b, "* ", 2);
        else if ((unsigned char)*s < 32 || (unsigned char)*s > 126)
            cg_sb_printf(b, "\\x%02x", (unsigned char)*s);
        else
            cg_sb_put(b, s, 1);
    }
}

void cg_describe_node(cg_sb *b, const ir_node *n)
{
    char t[160];
    cg_sb_put(b, " *   ", 5);
    for (int i = 0; i < n->nout; i++) {
        cg_sb_put(b, i ? ", %" : "%", i ? 3 : 1);
        put_safe(b, cg_name(n->out[i]));
        cg_sb_printf(b, ": %s", ir_type_str(&n->out[i]->type, t, sizeof t));
    }
    cg_sb_printf(b, " = %s(", ir_ops[n->op].name);
    for (int i = 0; i < n->nin; i++) {
        cg_sb_put(b, i ? ", %" : "%", i ? 3 : 1);
        put_safe(b, cg_name(n->in[i]));
    }
    cg_sb_put(b, ")", 1);
    for (int i = 0; i < n->nattrs; i++) {
        const ir_attr *a = &n->attrs[i];
        cg_sb_printf(b, "%s%s = ", i ? ", " : " {", a->key);
        if (a->kind == IR_ATTR_INT)
            cg_sb_printf(b, "%lld", (long long)a->i);
        else if (a->kind == IR_ATTR_FLOAT)
            cg_sb_printf(b, "%g", a->f);
        else
            for (int j = 0; j < a->n; j++)
                cg_sb_printf(b, "%s%lld", j ? ", " : "[", (long long)a->ints[j]);
        if (a->kind == IR_ATTR_INTS)
            cg_sb_put(b, a->n ? "]" : "[]", a->n ? 1 : 2);
        if (i == n->nattrs - 1)
            cg_sb_put(b, "}", 1);
    }
    if (n->loc.file) {
        cg_sb_put(b, "  @", 3);
        put_safe(b, n->loc.file);
        cg_sb_printf(b, ":%d:%d", n->loc.line, n->loc.col);
    }
    cg_sb_put(b, "\n", 1);
}

static void kb_init(kb *k, cg_gen *G, const ir_node *const *m, int nm, int sp, const char *what)
{
    memset(k, 0, sizeof *k);
    k->G = G;
    k->m = m;
    k->nm = nm;
    k->sp = sp;
    k->indent = 1;
    k->idx = "i";
    k->itype = "int";
    cg_sb_printf(&k->head, "/* %s\n", what);
    for (int i = 0; i < nm; i++)
        cg_describe_node(&k->head, m[i]);
    cg_sb_put(&k->head, " */\n", 4);
}

static void kb_free(kb *k)
{
    cg_sb_free(&k->head);
    cg_sb_free(&k->body);
    cg_sb_free(&k->pre);
    cg_sb_free(&k->shared);
    for (int i = 0; i < k->nstrs; i++)
        base_free(k->strs[i]);
    base_free(k->strs);
    base_free(k->names);
    base_free(k->vnames);
}

/* Whether the accesses are safe: a buffer written is read or written
 * elsewhere only by the thread of the same element. */
static int accesses_safe(const kb *k)
{
    for (int i = 0; i < k->npar; i++) {
        const kparam *p = &k->par[i];
        int wr = p->write_aligned || p->write_other;
        if (wr && (p->read_other || (p->write_other && (p->read_aligned || p->write_aligned))))
            return 0;
        for (int j = i + 1; j < k->npar; j++) {
            const kparam *q = &k->par[j];
            int wq = q->write_aligned || q->write_other;
            if ((wr || wq) && p->at.region == q->at.region && p->at.offset < q->at.offset + q->bytes &&
                q->at.offset < p->at.offset + p->bytes)
                return 0;
        }
    }
    return 1;
}

static int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* int where every tensor the kernel touches has at most CG_INT_ELEMENTS, so
 * the common kernels keep 32-bit arithmetic (64-bit division is several
 * times slower on a GPU); else i64. */
static const char *index_type(int64_t most) { return most <= CG_INT_ELEMENTS ? "int" : "i64"; }

int cg_grid_fits(cg_gen *G, const ir_node *n, const char *what, int64_t x, int64_t y, int64_t z)
{
    if (x >= 1 && x <= INT32_MAX && y >= 1 && y <= 65535 && z >= 1 && z <= 65535)
        return 1;
    cg_fail(G, n, "%s%s%s%s: a grid of %lld x %lld x %lld blocks is over CUDA's limits "
            "(2^31 - 1 x 65535 x 65535): its tensors are too large for one launch",
            n ? "%" : "", n ? n->out[0]->name : "", n ? ", " : "", what, (long long)x,
            (long long)y, (long long)z);
    return 0;
}

/* Writes the kernel (signature from its parameters), adds it and its launch.
 * Returns -1 when its accesses are unsafe (nothing added). */
static int finish(kb *k, const char *base, int block, int64_t grid, int elementwise,
                  const ir_node *node, const char *what)
{
    cg_gen *G = k->G;
    if (k->overflow) {
        cg_fail(G, node, "a kernel for %%%s needs more parameters or names than codegen allows",
                node->out[0]->name);
        return 0;
    }
    if (!cg_grid_fits(G, node, what, grid, 1, 1))
        return 0;
    if (!accesses_safe(k))
        return -1;
    cg_sb t = {0};
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(%d) @K@(", block);
    int n = 0;
    for (int i = 0; i < k->npar; i++) {
        const kparam *p = &k->par[i];
        int w = p->write_aligned || p->write_other;
        cg_sb_printf(&t, "%s%s%s *__restrict__ %s", n++ ? ", " : "", w ? "" : "const ",
                     cg_ctype(p->dt), p->name);
    }
    if (k->status)
        cg_sb_printf(&t, "%sgnc_status *__restrict__ status, i64 step", n++ ? ", " : "");
    if (k->scaler)
        cg_sb_printf(&t, "%s%sgnc_scaler *__restrict__ scaler", n++ ? ", " : "",
                     k->scaler_write ? "" : "const ");
    cg_sb_put(&t, ")\n{\n", 4);
    cg_sb_put(&t, k->body.s ? k->body.s : "", k->body.len);
    cg_sb_put(&t, "}\n", 2);
    /* the identifiers made from value names: parameters and registers */
    int kernel = cg_add_kernel(G, k->head.s, t.s, k->vnames, k->nvnames, base, node, elementwise,
                               block);
    cg_sb_free(&t);

    cg_step s = {.kind = CG_STEP_KERNEL, .node = node, .what = what};
    cg_launch *l = &s.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)grid, l->grid[1] = l->grid[2] = 1;
    l->block[0] = (unsigned)block, l->block[1] = l->block[2] = 1;
    l->nargs = k->npar + 2 * k->status + k->scaler;
    l->args = cg_palloc(G->p, (size_t)(l->nargs ? l->nargs : 1) * sizeof *l->args);
    cg_access acc[2 * MAX_PARAMS + 2]; /* a parameter read and written is two */
    int na = 0;
    for (int i = 0; i < k->npar; i++) {
        const kparam *p = &k->par[i];
        l->args[i] = (cg_arg){CG_ARG_BUFFER, p->at, 0, 0};
        if (p->read_aligned || p->read_other)
            acc[na++] = (cg_access){p->at, p->bytes, 0, 0, p->dt};
        if (p->write_aligned || p->write_other)
            acc[na++] = (cg_access){p->at, p->bytes, 1, 0, p->dt};
    }
    int a = k->npar;
    if (k->status) {
        l->args[a++] = (cg_arg){CG_ARG_BUFFER, G->D->status, 0, 0};
        l->args[a++] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, G->nlist, 0};
        acc[na++] = (cg_access){G->D->status, (int64_t)sizeof(cg_status), 1, 0, IR_U8};
    }
    if (k->scaler) {
        l->args[a++] = (cg_arg){CG_ARG_BUFFER, G->D->loss_scale, 0, 0};
        acc[na++] = (cg_access){G->D->loss_scale, 16, k->scaler_write, 0, IR_U8};
    }
    cg_add_step(G, &s, acc, na);
    return 0;
}

/* ---------------------------------------------------------------- map ops */

int cg_is_map(const ir_node *n)
{
    return ir_op_is(n->op, IR_MAP);
}

/* outer x len x inner around axis */
static void around(const ir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++)
        *inner *= t->dims[i];
    *len = t->dims[axis];
}

/* The channel (dim 1) of element idx of an [n, c, ...] tensor. */
static const char *channel(kb *k, const ir_type *t)
{
    int64_t inner = 1;
    for (int i = 2; i < t->rank; i++)
        inner *= t->dims[i];
    cg_sb b = {0};
    term(&b, k->idx, inner, t->dims[1], 1);
    const char *c = tmp(k, "chan");
    line(k, "const %s %s = %s;", k->itype, c, b.s);
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

/* Splits idx of an [planes, rows, cols] tensor into plane, row and col locals. */
static void plane_coords(kb *k, int64_t rows, int64_t cols, const char **pl, const char **r,
                         const char **c)
{
    *pl = tmp(k, "plane"), *r = tmp(k, "py"), *c = tmp(k, "px");
    line(k, "const %s %s = %s / %lld, %s = %s / %lld %% %lld, %s = %s %% %lld;", k->itype, *pl,
         k->idx, (long long)(rows * cols), *r, k->idx, (long long)cols, (long long)rows, *c,
         k->idx, (long long)cols);
}

/* The first maximum of maxpool's window (oy, ox) of plane pl, as grad.c finds
 * it: into arg (-1: none). */
static void window_argmax(kb *k, const pool_geom *g, const char *x, const char *pl,
                          const char *oy, const char *ox, const char *arg)
{
    const char *m = tmp(k, "pool_max");
    line(k, "float %s = NEG_INF;", m);
    line(k, "for (int ky = 0; ky < %lld; ky++) {", (long long)g->kh);
    k->indent++;
    line(k, "const %s iy = %s * %lld - %lld + ky * %lld;", k->itype, oy, (long long)g->sh,
         (long long)g->ph, (long long)g->dh);
    line(k, "if (iy < 0 || iy >= %lld)", (long long)g->h);
    line(k, "    continue;");
    line(k, "for (int kx = 0; kx < %lld; kx++) {", (long long)g->kw);
    k->indent++;
    line(k, "const %s ix = %s * %lld - %lld + kx * %lld;", k->itype, ox, (long long)g->sw,
         (long long)g->pw, (long long)g->dw);
    line(k, "if (ix < 0 || ix >= %lld)", (long long)g->w);
    line(k, "    continue;");
    line(k, "const float v = ld(%s, (%s * %lld + iy) * %lld + ix);", x, pl, (long long)g->h,
         (long long)g->w);
    line(k, "if (%s < 0 || v > %s || v != v) {", arg, m);
    line(k, "    %s = v;", m);
    line(k, "    %s = iy * %lld + ix;", arg, (long long)g->w);
    line(k, "    if (v != v)");
    line(k, "        goto %s_found;", arg);
    line(k, "}");
    k->indent--;
    line(k, "}");
    k->indent--;
    line(k, "}");
    line(k, "%s_found:;", arg);
}

/* The windows of a pooling over [h, w] whose output rows contain input row y:
 * oy in [lo, hi], stepping where (y + pad - oy stride) is a multiple of the
 * dilation below kernel x dilation. */
static void window_range(kb *k, const char *y, int64_t pad, int64_t stride, int64_t kern,
                         int64_t dil, int64_t out, const char *lo, const char *hi)
{
    /* oy stride <= y + pad, oy stride > y + pad - kern dil (first tap reaches y) */
    int64_t span = (kern - 1) * dil;
    line(k, "const %s %s = %s + %lld < %lld ? 0 : (%s + %lld - %lld + %lld) / %lld;", k->itype, lo,
         y, (long long)pad, (long long)span, y, (long long)pad, (long long)span,
         (long long)(stride - 1), (long long)stride);
    line(k, "const %s %s = (%s + %lld) / %lld < %lld ? (%s + %lld) / %lld : %lld;", k->itype, hi,
         y, (long long)pad, (long long)stride, (long long)(out - 1), y, (long long)pad,
         (long long)stride, (long long)(out - 1));
}

/* Emits the statements computing n's results at element k->idx. */
static void emit_map(kb *k, const ir_node *n)
{
    cg_gen *G = k->G;
    const ir_value *y = n->out[0];
#define a opnd(k, n->in[0])
    switch (n->op) {
    case IR_OP_CONST: {
        const char *lit = flit(k, ir_attr_float(n, "value"));
        if (!ir_is_float(y->type.dtype))
            lit = kstr(k, "(%s)%lld", rtype(cg_dtype_of(G, y)), (long long)ir_attr_float(n, "value"));
        if (cg_const_scaled(G, y)) {
            k->scaler = 1;
            lit = kstr(k, "%s * scaler->scale", lit);
        }
        set(k, y, lit);
        return;
    }
    case IR_OP_NEG: set(k, y, kstr(k, "-(%s)", a)); return;
    case IR_OP_RELU: set(k, y, kstr(k, "relu_f(%s)", a)); return;
    case IR_OP_SIGMOID: set(k, y, kstr(k, "sigmoid_f(%s)", a)); return;
    case IR_OP_TANH: set(k, y, kstr(k, "tanhf(%s)", a)); return;
    case IR_OP_GELU: set(k, y, kstr(k, "gelu_f(%s)", a)); return;
    case IR_OP_SILU: set(k, y, kstr(k, "silu_f(%s)", a)); return;
    case IR_OP_DROPOUT: /* identity at inference */
    case IR_OP_RESHAPE:
        if (ir_type_eq(&n->in[0]->type, k->iter))
            set(k, y, a);
        else /* a reshape heading a kernel: the same element index, so aligned
                (the result may be the operand's bytes: a view, memplan.c) */
            set(k, y, cg_const_inline(k->G, n->in[0]) ? opnd(k, n->in[0])
                      : kstr(k, "ld(%s, %s)", reads(k, n->in[0], 1), k->idx));
        return;
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: {
        static const char ops[] = "+-*/";
        set(k, y, kstr(k, "%s %c %s", opnd(k, n->in[0]), ops[n->op - IR_OP_ADD], opnd(k, n->in[1])));
        return;
    }
    case IR_OP_RELU_GRAD:
        set(k, y, kstr(k, "%s > 0.0f ? %s : 0.0f", opnd(k, n->in[1]), opnd(k, n->in[0])));
        return;
    case IR_OP_SIGMOID_GRAD: {
        const char *yy = opnd(k, n->in[1]);
        set(k, y, kstr(k, "%s * %s * (1.0f - %s)", opnd(k, n->in[0]), yy, yy));
        return;
    }
    case IR_OP_TANH_GRAD: {
        const char *yy = opnd(k, n->in[1]);
        set(k, y, kstr(k, "%s * (1.0f - %s * %s)", opnd(k, n->in[0]), yy, yy));
        return;
    }
    case IR_OP_GELU_GRAD:
        set(k, y, kstr(k, "gelu_grad_f(%s, %s)", opnd(k, n->in[0]), opnd(k, n->in[1])));
        return;
    case IR_OP_SILU_GRAD:
        set(k, y, kstr(k, "silu_grad_f(%s, %s)", opnd(k, n->in[0]), opnd(k, n->in[1])));
        return;
    case IR_OP_BATCHNORM: { /* scale = w / sqrt(var + eps), shift = b - mean scale */
        const char *c = channel(k, k->iter), *sc = tmp(k, "bn_scale");
        line(k, "const float %s = %s / sqrtf(%s + %s);", sc, at_index(k, n->in[1], c),
             at_index(k, n->in[4], c), flit(k, ir_attr_float(n, "eps")));
        set(k, y, kstr(k, "%s * %s + (%s - %s * %s)", a, sc, at_index(k, n->in[2], c),
                       at_index(k, n->in[3], c), sc));
        return;
    }
    case IR_OP_BATCHNORM_APPLY: { /* as rt_bn_normalize */
        const char *c = channel(k, k->iter);
        set(k, y, kstr(k, "(%s - %s) * (%s * %s) + %s", a, at_index(k, n->in[3], c),
                       at_index(k, n->in[1], c), at_index(k, n->in[4], c),
                       at_index(k, n->in[2], c)));
        return;
    }
    case IR_OP_BN_FOLD_SCALE:
        set(k, y, kstr(k, "(float)((double)%s / sqrt((double)%s + %s))", opnd(k, n->in[0]),
                       opnd(k, n->in[1]), dlit(k, ir_attr_float(n, "eps"))));
        return;
    case IR_OP_DROPOUT_TRAIN: {
        double p = ir_attr_float(n, "p");
        uint64_t thr = p <= 0 ? 0 : p >= 1 ? (uint64_t)1 << 53 : (uint64_t)ceil(ldexp(p, 53));
        const char *key = tmp(k, "drop_key");
        cg_sb_printf(&k->pre, "    const u64 %s = dropout_key(%s, %s, %lld);\n", key,
                     at_index(k, n->in[2], "0"), at_index(k, n->in[1], "0"),
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
            at = tmp(k, "drop_at");
            line(k, "const i64 %s = (i64)(%s / %lld) * %lld + (i64)(%lld + %s / %lld %% %lld) * "
                 "%lld + %s %% %lld;", at, k->idx, (long long)(part * inner),
                 (long long)(sh[2] * inner), (long long)sh[1], k->idx, (long long)inner,
                 (long long)part, (long long)inner, k->idx, (long long)inner);
        }
        const char *mask = tmp(k, "drop_mask");
        line(k, "const float %s = dropout_keep(%s, %s, %lluull) ? %s : 0.0f;", mask, key, at,
             (unsigned long long)thr, flit(k, 1.0 / (1.0 - p)));
        set(k, n->out[1], mask);
        set(k, y, kstr(k, "%s * %s", a, mask));
        return;
    }
    case IR_OP_SGD: {
        float mom = (float)ir_attr_float(n, "momentum"), wd = (float)ir_attr_float(n, "weight_decay");
        const char *p = opnd(k, n->in[0]), *g = opnd(k, n->in[1]);
        const char *gg = tmp(k, "grad"), *d = tmp(k, "dir");
        line(k, "float %s = %s;", gg, g);
        if (G->p->loss_scale.enabled) {
            k->scaler = k->scaler_write = 1;
            line(k, "%s *= scaler->inv_scale;", gg);
            line(k, "if (!(fabsf(%s) <= 3.40282347e38f))", gg);
            line(k, "    scaler->found_inf = 1;");
        }
        line(k, "float %s = %s + %s * %s;", d, gg, flit(k, wd), p);
        if (n->nin == 4) {
            const char *b = tmp(k, "mom_buf");
            line(k, "const float %s = %s * %s + %s;", b, flit(k, mom), opnd(k, n->in[3]), d);
            set(k, n->out[1], b);
            if (ir_attr_int(n, "nesterov"))
                line(k, "%s = %s + %s * %s;", d, d, flit(k, mom), b);
            else
                line(k, "%s = %s;", d, b);
        }
        set(k, y, kstr(k, "%s - %s * %s", p, opnd(k, n->in[2]), d));
        return;
    }
    case IR_OP_ADAM: {
        double b1 = ir_attr_float(n, "beta1"), b2 = ir_attr_float(n, "beta2");
        const char *lr = tmp(k, "adam_lr"), *ss = tmp(k, "step_size"), *bc2 = tmp(k, "bc2");
        const char *t = tmp(k, "t");
        cg_sb_printf(&k->pre, "    const float %s = %s;\n", lr, at_index(k, n->in[4], "0"));
        cg_sb_printf(&k->pre, "    const double %s = (double)(%s + 1);\n", t,
                     at_index(k, n->in[5], "0"));
        cg_sb_printf(&k->pre, "    const float %s = (float)(%s / (1.0 - pow(%s, %s)));\n", ss, lr,
                     dlit(k, b1), t);
        cg_sb_printf(&k->pre, "    const float %s = (float)sqrt(1.0 - pow(%s, %s));\n", bc2,
                     dlit(k, b2), t);
        const char *q = tmp(k, "param"), *d = tmp(k, "dir"), *mm = tmp(k, "m2"), *vv = tmp(k, "v2");
        float wd = (float)ir_attr_float(n, "weight_decay");
        line(k, "float %s = %s, %s = %s;", q, opnd(k, n->in[0]), d, opnd(k, n->in[1]));
        if (G->p->loss_scale.enabled) {
            k->scaler = k->scaler_write = 1;
            line(k, "%s *= scaler->inv_scale;", d);
            line(k, "if (!(fabsf(%s) <= 3.40282347e38f))", d);
            line(k, "    scaler->found_inf = 1;");
        }
        if (ir_attr_int(n, "decoupled"))
            line(k, "%s *= 1.0f - %s * %s;", q, lr, flit(k, wd));
        else
            line(k, "%s += %s * %s;", d, flit(k, wd), q);
        line(k, "const float %s = %s * %s + (1.0f - %s) * %s;", mm, flit(k, b1), opnd(k, n->in[2]),
             flit(k, b1), d);
        line(k, "const float %s = %s * %s + (1.0f - %s) * %s * %s;", vv, flit(k, b2),
             opnd(k, n->in[3]), flit(k, b2), d, d);
        set(k, n->out[1], mm);
        set(k, n->out[2], vv);
        set(k, y, kstr(k, "%s - %s * %s / (sqrtf(%s) / %s + %s)", q, ss, mm, vv, bc2,
                       flit(k, ir_attr_float(n, "eps"))));
        return;
    }
    case IR_OP_BROADCAST_TO:
        set(k, y, at_index(k, n->in[0], bcast_index(k, &n->in[0]->type, k->iter, k->idx)));
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
                term(&b, k->idx, os, i == 0 ? 0 : to->dims[i], ist[perm[i]]);
            os *= to->dims[i];
        }
        set(k, y, at_index(k, n->in[0], b.len ? kstr(k, "%s", b.s) : "0"));
        cg_sb_free(&b);
        return;
    }
    case IR_OP_SLICE: {
        int64_t outer, len, inner;
        around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
        int64_t start = ir_attr_int(n, "start"), size = ir_attr_int(n, "size");
        const char *ix = kstr(k, "%s / %lld * %lld + (%lld + %s / %lld %% %lld) * %lld + %s %% %lld",
                              k->idx, (long long)(size * inner), (long long)(len * inner),
                              (long long)start, k->idx, (long long)inner, (long long)size,
                              (long long)inner, k->idx, (long long)inner);
        set(k, y, at_index(k, n->in[0], ix));
        return;
    }
    case IR_OP_CONCAT: {
        int64_t outer, len, inner;
        int axis = (int)ir_attr_int(n, "axis");
        around(&y->type, axis, &outer, &len, &inner);
        const char *pos = tmp(k, "cat_pos"), *u = tmp(k, "cat_outer"), *r = tmp(k, "cat_inner"), *v = tmp(k, "cat_v");
        line(k, "const %s %s = %s / %lld %% %lld, %s = %s / %lld, %s = %s %% %lld;", k->itype, pos,
             k->idx, (long long)inner, (long long)len, u, k->idx, (long long)(len * inner), r,
             k->idx, (long long)inner);
        line(k, "%s %s;", rtype(cg_dtype_of(G, y)), v);
        int64_t at = 0;
        for (int i = 0; i < n->nin; i++) {
            int64_t l = n->in[i]->type.dims[axis];
            const char *ix = kstr(k, "(%s * %lld + %s - %lld) * %lld + %s", u, (long long)l, pos,
                                  (long long)at, (long long)inner, r);
            if (i < n->nin - 1)
                line(k, "%sif (%s < %lld)", i ? "else " : "", pos, (long long)(at + l));
            else if (i)
                line(k, "else");
            line(k, "    %s = %s;", v, at_index(k, n->in[i], ix));
            at += l;
        }
        set(k, y, v);
        return;
    }
    case IR_OP_EMBEDDING: {
        const ir_type *tw = &n->in[1]->type;
        int64_t num = tw->dims[0], dim = tw->dims[1];
        const char *row = tmp(k, "emb_row");
        k->status = 1;
        line(k, "const i64 %s = %s;", row, at_index(k, n->in[0], kstr(k, "%s / %lld", k->idx,
                                                                      (long long)dim)));
        line(k, "if ((%s < 0 || %s >= %lld) && %s %% %lld == 0)", row, row, (long long)num, k->idx,
             (long long)dim);
        line(k, "    report(status, %d, (int)step, %s / %lld, %s);", CG_STATUS_EMBEDDING_INDEX,
             k->idx, (long long)dim, row);
        set(k, y, kstr(k, "%s >= 0 && %s < %lld ? %s : 0.0f", row, row, (long long)num,
                       at_index(k, n->in[1], kstr(k, "%s * %lld + %s %% %lld", row, (long long)dim,
                                                  k->idx, (long long)dim))));
        return;
    }
    case IR_OP_MAXPOOL2D: {
        pool_geom g = pool_of(n, &n->in[0]->type, &y->type);
        const char *pl, *oy, *ox, *m = tmp(k, "pool_max");
        plane_coords(k, g.oh, g.ow, &pl, &oy, &ox);
        const char *x = reads(k, n->in[0], 0);
        line(k, "float %s = NEG_INF; /* padding never wins */", m);
        line(k, "for (int ky = 0; ky < %lld; ky++) {", (long long)g.kh);
        k->indent++;
        line(k, "const %s iy = %s * %lld - %lld + ky * %lld;", k->itype, oy, (long long)g.sh,
             (long long)g.ph, (long long)g.dh);
        line(k, "if (iy < 0 || iy >= %lld)", (long long)g.h);
        line(k, "    continue;");
        line(k, "for (int kx = 0; kx < %lld; kx++) {", (long long)g.kw);
        k->indent++;
        line(k, "const %s ix = %s * %lld - %lld + kx * %lld;", k->itype, ox, (long long)g.sw,
             (long long)g.pw, (long long)g.dw);
        line(k, "const float v = ix >= 0 && ix < %lld ? ld(%s, (%s * %lld + iy) * %lld + ix) : "
             "NEG_INF;", (long long)g.w, x, pl, (long long)g.h, (long long)g.w);
        line(k, "%s = v > %s || v != v ? v : %s;", m, m, m);
        k->indent--;
        line(k, "}");
        k->indent--;
        line(k, "}");
        set(k, y, m);
        return;
    }
    case IR_OP_AVGPOOL2D: {
        pool_geom g = pool_of(n, &n->in[0]->type, &y->type);
        const char *pl, *oy, *ox, *s = tmp(k, "pool_sum");
        plane_coords(k, g.oh, g.ow, &pl, &oy, &ox);
        const char *x = reads(k, n->in[0], 0);
        line(k, "float %s = 0.0f;", s);
        if (g.kh == g.sh && g.kw == g.sw && g.ph == 0 && g.pw == 0) { /* windows tile */
            line(k, "for (int ky = 0; ky < %lld; ky++)", (long long)g.kh);
            line(k, "    for (int kx = 0; kx < %lld; kx++)", (long long)g.kw);
            line(k, "        %s += ld(%s, (%s * %lld + %s * %lld + ky) * %lld + %s * %lld + kx);", s,
                 x, pl, (long long)g.h, oy, (long long)g.kh, (long long)g.w, ox, (long long)g.kw);
            set(k, y, kstr(k, "%s * %s", s, flit(k, 1.0f / (float)(g.kh * g.kw))));
            return;
        }
        int incl = ir_attr_int(n, "count_include_pad") != 0;
        line(k, "const %s y0 = %s * %lld - %lld, x0 = %s * %lld - %lld;", k->itype, oy,
             (long long)g.sh, (long long)g.ph, ox, (long long)g.sw, (long long)g.pw);
        line(k, "const %s y1 = y0 + %lld < %lld ? y0 + %lld : %lld, x1 = x0 + %lld < %lld ? x0 + "
             "%lld : %lld;", k->itype, (long long)g.kh, (long long)(g.h + g.ph), (long long)g.kh,
             (long long)(g.h + g.ph), (long long)g.kw, (long long)(g.w + g.pw), (long long)g.kw,
             (long long)(g.w + g.pw));
        line(k, "const %s ya = y0 < 0 ? 0 : y0, yb = y1 > %lld ? %lld : y1;", k->itype,
             (long long)g.h, (long long)g.h);
        line(k, "const %s xa = x0 < 0 ? 0 : x0, xb = x1 > %lld ? %lld : x1;", k->itype,
             (long long)g.w, (long long)g.w);
        line(k, "for (%s iy = ya; iy < yb; iy++)", k->itype);
        line(k, "    for (%s ix = xa; ix < xb; ix++)", k->itype);
        line(k, "        %s += ld(%s, (%s * %lld + iy) * %lld + ix);", s, x, pl, (long long)g.h,
             (long long)g.w);
        set(k, y, kstr(k, "%s / (float)(%s)", s,
                       incl ? "(y1 - y0) * (x1 - x0)" : "(yb - ya) * (xb - xa)"));
        return;
    }
    case IR_OP_AVGPOOL2D_GRAD: { /* dx: the share of every window holding it, in window order */
        pool_geom g = pool_of(n, &y->type, &n->in[0]->type);
        const char *pl, *iy, *ix, *s = tmp(k, "pool_sum");
        plane_coords(k, g.h, g.w, &pl, &iy, &ix);
        const char *dy = reads(k, n->in[0], 0);
        if (g.kh == g.sh && g.kw == g.sw && g.ph == 0 && g.pw == 0) {
            set(k, y, kstr(k, "%s < %lld && %s < %lld ? ld(%s, (%s * %lld + %s / %lld) * %lld + %s / "
                           "%lld) * %s : 0.0f", iy, (long long)(g.oh * g.kh), ix,
                           (long long)(g.ow * g.kw), dy, pl, (long long)g.oh, iy, (long long)g.kh,
                           (long long)g.ow, ix, (long long)g.kw,
                           flit(k, 1.0f / (float)(g.kh * g.kw))));
            return;
        }
        int incl = ir_attr_int(n, "count_include_pad") != 0;
        line(k, "float %s = 0.0f;", s);
        window_range(k, iy, g.ph, g.sh, g.kh, 1, g.oh, "oy0", "oy1");
        window_range(k, ix, g.pw, g.sw, g.kw, 1, g.ow, "ox0", "ox1");
        line(k, "for (%s oy = oy0; oy <= oy1; oy++)", k->itype);
        line(k, "    for (%s ox = ox0; ox <= ox1; ox++) {", k->itype);
        k->indent += 2;
        line(k, "const %s y0 = oy * %lld - %lld, x0 = ox * %lld - %lld;", k->itype, (long long)g.sh,
             (long long)g.ph, (long long)g.sw, (long long)g.pw);
        line(k, "const %s y1 = y0 + %lld < %lld ? y0 + %lld : %lld, x1 = x0 + %lld < %lld ? x0 + "
             "%lld : %lld;", k->itype, (long long)g.kh, (long long)(g.h + g.ph), (long long)g.kh,
             (long long)(g.h + g.ph), (long long)g.kw, (long long)(g.w + g.pw), (long long)g.kw,
             (long long)(g.w + g.pw));
        line(k, "const %s ya = y0 < 0 ? 0 : y0, yb = y1 > %lld ? %lld : y1;", k->itype,
             (long long)g.h, (long long)g.h);
        line(k, "const %s xa = x0 < 0 ? 0 : x0, xb = x1 > %lld ? %lld : x1;", k->itype,
             (long long)g.w, (long long)g.w);
        line(k, "%s += ld(%s, (%s * %lld + oy) * %lld + ox) / (float)(%s);", s, dy, pl,
             (long long)g.oh, (long long)g.ow,
             incl ? "(y1 - y0) * (x1 - x0)" : "(yb - ya) * (xb - xa)");
        k->indent -= 2;
        line(k, "    }");
        set(k, y, s);
        return;
    }
    case IR_OP_MAXPOOL2D_GRAD: { /* dx: dy of every window whose first maximum it is */
        pool_geom g = pool_of(n, &n->in[1]->type, &n->in[0]->type);
        const char *pl, *iy, *ix, *s = tmp(k, "pool_sum");
        plane_coords(k, g.h, g.w, &pl, &iy, &ix);
        const char *dy = reads(k, n->in[0], 0), *x = reads(k, n->in[1], 0);
        line(k, "float %s = 0.0f;", s);
        window_range(k, iy, g.ph, g.sh, g.kh, g.dh, g.oh, "oy0", "oy1");
        window_range(k, ix, g.pw, g.sw, g.kw, g.dw, g.ow, "ox0", "ox1");
        line(k, "for (%s oy = oy0; oy <= oy1; oy++)", k->itype);
        line(k, "    for (%s ox = ox0; ox <= ox1; ox++) {", k->itype);
        k->indent += 2;
        line(k, "%s arg = -1;", k->itype);
        window_argmax(k, &g, x, pl, "oy", "ox", "arg");
        line(k, "if (arg == %s * %lld + %s)", iy, (long long)g.w, ix);
        line(k, "    %s += ld(%s, (%s * %lld + oy) * %lld + ox);", s, dy, pl, (long long)g.oh,
             (long long)g.ow);
        k->indent -= 2;
        line(k, "    }");
        set(k, y, s);
        return;
    }
    default:
        cg_fail(G, n, "no map kernel for %s", ir_ops[n->op].name);
        set(k, y, "0.0f");
    }
#undef a
}

/* ---------------------------------------------------------------- map kernels */

static int64_t max_numel(const kb *k)
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
static const char *kernel_base(kb *k, const char *prefix)
{
    cg_sb b = {0};
    if (prefix)
        cg_sb_printf(&b, "%s_", prefix);
    for (int i = 0; i < k->nm && b.len < 40; i++)
        cg_sb_printf(&b, "%s%s", i ? "_" : "", ir_ops[k->m[i]->op].name);
    cg_sb_printf(&b, "__%s", cg_name(k->m[k->nm - 1]->out[0]));
    const char *r = kstr(k, "%s", b.s);
    cg_sb_free(&b);
    return r;
}

static const char *kernel_what(kb *k)
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
static void body_prepend(kb *k, const cg_sb *text)
{
    cg_sb b = {0};
    if (text->len)
        cg_sb_put(&b, text->s, text->len);
    if (k->body.len)
        cg_sb_put(&b, k->body.s, k->body.len);
    cg_sb_free(&k->body);
    k->body = b;
}

static int map_kernel(kb *k)
{
    const ir_node *h = k->m[0];
    k->iter = &h->out[0]->type;
    int64_t n = ir_type_numel(k->iter);
    int vec = n % 4 == 0;
    for (int i = 0; i < k->nm; i++)
        for (int j = 0; j < k->m[i]->nout; j++)
            vec &= ir_is_float(cg_dtype_of(k->G, k->m[i]->out[j]));
    k->vec = vec ? 4 : 1;
    k->array = vec;
    k->itype = index_type(max_numel(k));
    if (vec) {
        line(k, "#pragma unroll");
        line(k, "for (int j = 0; j < 4; j++) {");
        k->indent++;
        line(k, "const %s i = e + j;", k->itype);
    }
    for (int i = 0; i < k->nm; i++)
        emit_map(k, k->m[i]);
    if (vec) {
        k->indent--;
        line(k, "}");
    }
    /* store what is read after the kernel */
    for (int i = 0; i < k->nm; i++)
        for (int j = 0; j < k->m[i]->nout; j++) {
            const ir_value *v = k->m[i]->out[j];
            if (!needs_store(k, v))
                continue;
            const char *p = writes(k, v, 1);
            int s = reg_slot(k, v);
            if (vec)
                line(k, "stv<4>(%s, e, %s);", p, k->reg_name[s]);
            else
                line(k, "st(%s, i, %s);", p, k->reg_name[s]);
        }
    cg_sb top = {0};
    if (!strcmp(k->itype, "int"))
        cg_sb_printf(&top, "    const int %s = (blockIdx.x * 256 + threadIdx.x)%s;\n", vec ? "e" : "i",
                     vec ? " * 4" : "");
    else
        cg_sb_printf(&top, "    const i64 %s = ((i64)blockIdx.x * 256 + threadIdx.x)%s;\n",
                     vec ? "e" : "i", vec ? " * 4" : "");
    cg_sb_printf(&top, "    if (%s >= %lld)\n        return;\n", vec ? "e" : "i", (long long)n);
    if (k->pre.len)
        cg_sb_put(&top, k->pre.s, k->pre.len);
    body_prepend(k, &top);
    cg_sb_free(&top);
    int elementwise = 1;
    for (int i = 0; i < k->nm; i++)
        switch (k->m[i]->op) {
        case IR_OP_MAXPOOL2D: case IR_OP_AVGPOOL2D: case IR_OP_MAXPOOL2D_GRAD:
        case IR_OP_AVGPOOL2D_GRAD: case IR_OP_CONCAT: case IR_OP_EMBEDDING:
            elementwise = 0;
            break;
        default:
            break;
        }
    return finish(k, kernel_base(k, NULL), 256, div_up(n / k->vec, 256), elementwise, h,
                  kernel_what(k));
}

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
    int64_t p = div_up(FILL_BLOCKS, groups), most = len / PART_MIN;
    p = p < most ? p : most;
    return div_up(len, div_up(len, p)); /* no part empty */
}

/* Makes k (and pre, the kernel of the partial sums) reduce groups of len
 * elements in parts: returns the workspace of the partial sums, per doubles
 * per block. */
static cg_ref split(kb *k, kb *pre, int64_t groups, int64_t len, int64_t parts, int per)
{
    k->parts = pre->parts = parts;
    k->plen = pre->plen = div_up(len, parts);
    pre->itype = k->itype;
    pre->grid = groups * parts;
    k->pbytes = pre->pbytes = groups * parts * per * (int64_t)sizeof(double);
    return cg_workspace(k->G, k->pbytes);
}

/* pd: the partial sums at ws, written by pre's kernel and read by the
 * other. */
static void partials(kb *k, cg_ref ws, int write)
{
    kparam *p = param_at(k, NULL, "parts", ws, IR_F32, k->pbytes);
    if (write)
        p->write_other = 1;
    else
        p->read_other = 1;
    const char *c = write ? "" : "const ";
    line(k, "%sdouble *pd = (%sdouble *)%s;", c, c, p->name);
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
        return kstr(k, "warp_sum(%s)", x);
    return kstr(k, "block_sum<%d>(%s, %s)", k->nt, x, shared_red(k, dbl));
}

static const char *rmax(kb *k, const char *x)
{
    if (k->warp_rows)
        return kstr(k, "warp_max(%s)", x);
    return kstr(k, "block_max<%d>(%s, %s)", k->nt, x, shared_red(k, 0));
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
    line(k, "auto x_at = [&](%s i) -> float {", k->itype);
    k->indent++;
    if (k->sp > 0) {
        k->iter = &k->m[0]->out[0]->type;
        for (int i = 0; i < k->sp; i++)
            emit_map(k, k->m[i]);
        line(k, "return %s;", reg(k, sp->in[0]));
    } else {
        line(k, "return %s;", at_index(k, sp->in[0], "i"));
    }
    k->indent--;
    line(k, "};");
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
    k->iter = &sp->out[0]->type;
    const char *rt = rtype(cg_dtype_of(k->G, sp->out[0]));
    line(k, "auto y_put = [&](%s i, %s v) {", k->itype, rt);
    k->indent++;
    bind_reg(k, sp->out[0], "v");
    int stored = 0;
    for (int i = k->sp + 1; i < k->nm; i++)
        emit_map(k, k->m[i]);
    for (int i = k->sp; i < k->nm; i++) {
        const ir_value *v = k->m[i]->out[0];
        if (needs_store(k, v)) {
            line(k, "st(%s, i, %s);", writes(k, v, 1), reg(k, v));
            stored = 1;
        }
    }
    if (!stored)
        line(k, "(void)i, (void)v;");
    k->indent--;
    line(k, "};");
    k->nregs = saved;
    k->array = arr;
    k->idx = idx;
    k->iter = iter;
}

/* Stores result r of the special (not its first) at index ix, where read. */
static void store_other(kb *k, const ir_value *r, const char *ix, const char *val)
{
    if (needs_store(k, r))
        line(k, "st(%s, %s, %s);", writes(k, r, 0), ix, val);
}

/* The loop over a row's elements: "for (int t = lane; t < len; t += 32)". */
static const char *row_loop(kb *k, int64_t len)
{
    return kstr(k, "for (%s t = %s; t < %lld; t += %lld)", k->itype, k->lane0, (long long)len,
                (long long)k->lstep);
}

/* A row kernel's start: rows of len elements, a warp per row (8 rows a block)
 * where len <= 1024, else a block per row.  Returns the grid. */
static int64_t row_start(kb *k, int64_t rows, int64_t len)
{
    k->warp_rows = len <= 1024;
    if (k->warp_rows) {
        k->nt = 256;
        k->lane0 = "lane";
        k->lstep = 32;
        line(k, "const int lane = threadIdx.x & 31;");
        line(k, "const %s row = (%s)blockIdx.x * 8 + (threadIdx.x >> 5);", k->itype, k->itype);
        line(k, "if (row >= %lld)", (long long)rows);
        line(k, "    return; /* the whole warp */");
        line(k, "const %s base = row * %lld;", k->itype, (long long)len);
        return div_up(rows, 8);
    }
    k->nt = len >= 16384 ? 1024 : 512;
    k->lane0 = "threadIdx.x";
    k->lstep = k->nt;
    line(k, "const %s row = blockIdx.x;", k->itype);
    line(k, "const %s base = row * %lld;", k->itype, (long long)len);
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
    line(k, "const %s row = blockIdx.x / %lld, part = blockIdx.x %% %lld;", k->itype,
         (long long)k->parts, (long long)k->parts);
    line(k, "const %s base = row * %lld, t0 = part * %lld, t1 = part == %lld ? %lld : t0 + %lld;",
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
    line(pre, "float mx = NEG_INF;");
    line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, pre->nt);
    line(pre, "    const float x = x_at(base + t);");
    line(pre, "    mx = x > mx ? x : mx;");
    line(pre, "}");
    line(pre, "mx = block_max<%d>(mx, %s);", pre->nt, shared_red(pre, 0));
    line(pre, "double sum = 0.0;");
    line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, pre->nt);
    line(pre, "    sum += exp((double)(x_at(base + t) - mx));");
    line(pre, "sum = block_sum<%d>(sum, %s);", pre->nt, shared_red(pre, 1));
    line(pre, "if (threadIdx.x == 0) {");
    line(pre, "    pd[2 * blockIdx.x] = mx;");
    line(pre, "    pd[2 * blockIdx.x + 1] = sum;");
    line(pre, "}");
    emit_loader(k, n);
    emit_storer(k, n);
    row_parts_start(k, len);
    partials(k, ws, 0);
    line(k, "float mx = NEG_INF;");
    line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
    line(k, "    mx = (float)pd[2 * (row * %lld + p)] > mx ? (float)pd[2 * (row * %lld + p)] : mx;",
         (long long)parts, (long long)parts);
    line(k, "double sum = 0.0;");
    line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
    line(k, "    sum += pd[2 * (row * %lld + p) + 1] * exp(pd[2 * (row * %lld + p)] - (double)mx);",
         (long long)parts, (long long)parts);
    line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, k->nt);
    if (n->op == IR_OP_LOG_SOFTMAX)
        line(k, "    y_put(base + t, x_at(base + t) - (mx + (float)log(sum)));"); /* x - lse */
    else
        line(k, "    y_put(base + t, (float)(exp((double)(x_at(base + t) - mx)) / sum));");
    return rows * parts;
}

static int64_t sp_softmax(kb *k, const ir_node *n, kb *pre)
{
    int64_t outer, len, inner;
    around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
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
        line(k, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
        line(k, "if (c >= %lld)", (long long)(outer * inner));
        line(k, "    return;");
        line(k, "const %s base = c / %lld * %lld + c %% %lld;", k->itype, (long long)inner,
             (long long)(len * inner), (long long)inner);
        at = kstr(k, "base + t * %lld", (long long)inner);
        grid = div_up(outer * inner, 256);
        k->warp_rows = 1; /* no reduction across threads */
    }
    int cross = inner == 1;
    emit_loader(k, n);
    emit_storer(k, n);
    line(k, "float mx = NEG_INF;");
    line(k, "%s {", row_loop(k, len));
    line(k, "    const float x = x_at(%s);", at);
    line(k, "    mx = x > mx ? x : mx;");
    line(k, "}");
    if (cross)
        line(k, "mx = %s;", rmax(k, "mx"));
    line(k, "double sum = 0.0;");
    line(k, "%s", row_loop(k, len));
    line(k, "    sum += exp((double)(x_at(%s) - mx));", at);
    if (cross)
        line(k, "sum = %s;", rsum(k, "sum", 1));
    if (logsm) {
        line(k, "const float lse = mx + (float)log(sum);");
        line(k, "%s", row_loop(k, len));
        line(k, "    y_put(%s, x_at(%s) - lse);", at, at);
    } else {
        line(k, "%s", row_loop(k, len));
        line(k, "    y_put(%s, (float)(exp((double)(x_at(%s) - mx)) / sum));", at, at);
    }
    return grid;
}

static int64_t sp_softmax_grad(kb *k, const ir_node *n, kb *pre)
{
    int64_t outer, len, inner;
    around(&n->in[0]->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int logsm = n->op == IR_OP_LOG_SOFTMAX_GRAD;
    int64_t grid;
    const char *at;
    int cross = inner == 1;
    int64_t parts = cross && len > 1024 ? parts_of(outer, len) : 1;
    if (parts > 1) { /* long rows in parts: each part's sum, the row's in part order */
        cg_ref ws = split(k, pre, outer, len, parts, 1);
        emit_loader(pre, n);
        const char *y0 = reads(pre, n->in[1], 0);
        row_parts_start(pre, len);
        partials(pre, ws, 1);
        line(pre, "double s = 0.0;");
        line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += %d)", k->itype, pre->nt);
        if (logsm)
            line(pre, "    s += x_at(base + t);");
        else
            line(pre, "    s += (double)x_at(base + t) * ld(%s, base + t);", y0);
        line(pre, "s = block_sum<%d>(s, %s);", pre->nt, shared_red(pre, 1));
        line(pre, "if (threadIdx.x == 0)");
        line(pre, "    pd[blockIdx.x] = s;");
        emit_loader(k, n);
        emit_storer(k, n);
        const char *y = reads(k, n->in[1], 0);
        row_parts_start(k, len);
        partials(k, ws, 0);
        line(k, "double s = 0.0;");
        line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        line(k, "    s += pd[row * %lld + p];", (long long)parts);
        line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, k->nt);
        line(k, "    const %s q = base + t;", k->itype);
        if (logsm)
            line(k, "    y_put(q, (float)(x_at(q) - exp((double)ld(%s, q)) * s));", y);
        else
            line(k, "    y_put(q, (float)(ld(%s, q) * (x_at(q) - s)));", y);
        line(k, "}");
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
        line(k, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
        line(k, "if (c >= %lld)", (long long)(outer * inner));
        line(k, "    return;");
        line(k, "const %s base = c / %lld * %lld + c %% %lld;", k->itype, (long long)inner,
             (long long)(len * inner), (long long)inner);
        at = kstr(k, "base + t * %lld", (long long)inner);
        grid = div_up(outer * inner, 256);
    }
    emit_loader(k, n);
    emit_storer(k, n);
    const char *y = reads(k, n->in[1], 0);
    line(k, "double s = 0.0;");
    line(k, "%s", row_loop(k, len));
    if (logsm)
        line(k, "    s += x_at(%s);", at);
    else
        line(k, "    s += (double)x_at(%s) * ld(%s, %s);", at, y, at);
    if (cross)
        line(k, "s = %s;", rsum(k, "s", 1));
    line(k, "%s {", row_loop(k, len));
    line(k, "    const %s q = %s;", k->itype, at);
    if (logsm)
        line(k, "    y_put(q, (float)(x_at(q) - exp((double)ld(%s, q)) * s));", y);
    else
        line(k, "    y_put(q, (float)(ld(%s, q) * (x_at(q) - s)));", y);
    line(k, "}");
    return grid;
}

static int64_t sp_layernorm(kb *k, const ir_node *n)
{
    int64_t d = ir_type_numel(&n->in[1]->type), rows = ir_type_numel(&n->in[0]->type) / d;
    int64_t grid = row_start(k, rows, d);
    emit_loader(k, n);
    emit_storer(k, n);
    const char *w = reads(k, n->in[1], 0), *b = reads(k, n->in[2], 0);
    line(k, "double mean = 0.0, var = 0.0;");
    line(k, "%s", row_loop(k, d));
    line(k, "    mean += x_at(base + t);");
    line(k, "mean = %s / %lld.0;", rsum(k, "mean", 1), (long long)d);
    line(k, "%s {", row_loop(k, d));
    line(k, "    const double dv = x_at(base + t) - mean;");
    line(k, "    var += dv * dv;");
    line(k, "}");
    line(k, "var = %s / %lld.0;", rsum(k, "var", 1), (long long)d);
    line(k, "const float inv = (float)(1.0 / sqrt(var + %s)), m = (float)mean;",
         dlit(k, ir_attr_float(n, "eps")));
    line(k, "%s", row_loop(k, d));
    line(k, "    y_put(base + t, (x_at(base + t) - m) * inv * ld(%s, t) + ld(%s, t));", w, b);
    return grid;
}

/* A scalar operand (a loss gradient, a literal) as an expression. */
static const char *scalar_of(kb *k, const ir_value *v)
{
    if (cg_const_inline(k->G, v))
        return opnd(k, v);
    return kstr(k, "ld(%s, 0)", reads(k, v, 0));
}

static int64_t sp_cross_entropy_grad(kb *k, const ir_node *n)
{
    const ir_type *t = &n->in[1]->type;
    int64_t rows = t->dims[0], c = t->dims[1];
    int64_t grid = row_start(k, rows, c);
    k->status = 1;
    emit_storer(k, n);
    const char *x = reads(k, n->in[1], 0), *lab = reads(k, n->in[2], 0);
    line(k, "const i64 y = ld(%s, row);", lab);
    line(k, "if (y < 0 || y >= %lld) {", (long long)c);
    line(k, "    if (%s == 0)", k->lane0);
    line(k, "        report(status, %d, (int)step, row, y);", CG_STATUS_LABEL);
    line(k, "    return;");
    line(k, "}");
    line(k, "float mx = NEG_INF;");
    line(k, "%s {", row_loop(k, c));
    line(k, "    const float a = ld(%s, base + t);", x);
    line(k, "    mx = a > mx ? a : mx;");
    line(k, "}");
    line(k, "mx = %s;", rmax(k, "mx"));
    line(k, "double sum = 0.0;");
    line(k, "%s", row_loop(k, c));
    line(k, "    sum += exp((double)(ld(%s, base + t) - mx));", x);
    line(k, "sum = %s;", rsum(k, "sum", 1));
    line(k, "const double scale = (double)%s / %lld.0;", scalar_of(k, n->in[0]), (long long)rows);
    line(k, "%s", row_loop(k, c));
    line(k, "    y_put(base + t, (float)((exp((double)(ld(%s, base + t) - mx)) / sum - (t == y)) * "
         "scale));", x);
    return grid;
}

/* The loss over rows: a warp per row, in turn, in one block; the rows' terms
 * summed per warp in row order, then over the warps. */
/* mx, the row's largest x_at(base + t), and sum, of exp(x - mx) in double,
 * over the row's threads. */
static void row_max_sum(kb *k, int64_t len)
{
    line(k, "float mx = NEG_INF;");
    line(k, "%s {", row_loop(k, len));
    line(k, "    const float a = x_at(base + t);");
    line(k, "    mx = a > mx ? a : mx;");
    line(k, "}");
    line(k, "mx = %s;", rmax(k, "mx"));
    line(k, "double sum = 0.0;");
    line(k, "%s", row_loop(k, len));
    line(k, "    sum += exp((double)(x_at(base + t) - mx));");
    line(k, "sum = %s;", rsum(k, "sum", 1));
}

/* The loss over many logits: a warp per row (a block per long row), each
 * row's term into the workspace, then one block adds them (thread t rows t,
 * t + 256, ..., then over the threads in a fixed tree). */
static int64_t cross_entropy_rows(kb *k, const ir_node *n, kb *pre, int64_t rows, int64_t c)
{
    k->parts = pre->parts = 1;
    k->pbytes = pre->pbytes = rows * (int64_t)sizeof(double);
    cg_ref ws = cg_workspace(k->G, k->pbytes);
    pre->itype = k->itype;
    pre->status = 1;
    emit_loader(pre, n);
    const char *lab = reads(pre, n->in[1], 0);
    pre->grid = row_start(pre, rows, c);
    partials(pre, ws, 1);
    line(pre, "const i64 y = ld(%s, row);", lab);
    row_max_sum(pre, c);
    line(pre, "if (%s == 0) {", pre->lane0);
    line(pre, "    if (y < 0 || y >= %lld) {", (long long)c);
    line(pre, "        report(status, %d, (int)step, row, y);", CG_STATUS_LABEL);
    line(pre, "        pd[row] = 0.0;");
    line(pre, "    } else {");
    line(pre, "        pd[row] = mx + log(sum) - x_at(base + y);");
    line(pre, "    }");
    line(pre, "}");
    k->nt = 256;
    emit_storer(k, n);
    partials(k, ws, 0);
    line(k, "double total = 0.0;");
    line(k, "for (%s r = threadIdx.x; r < %lld; r += 256)", k->itype, (long long)rows);
    line(k, "    total += pd[r];");
    line(k, "total = block_sum<256>(total, %s);", shared_red(k, 1));
    line(k, "if (threadIdx.x == 0)");
    line(k, "    y_put(0, (float)(total / %lld.0));", (long long)rows);
    return 1;
}

static int64_t sp_cross_entropy(kb *k, const ir_node *n, kb *pre)
{
    const ir_type *t = &n->in[0]->type;
    int64_t rows = t->dims[0], c = t->dims[1];
    if (rows * c >= (1 << 20))
        return cross_entropy_rows(k, n, pre, rows, c);
    k->nt = 256;
    k->warp_rows = 1;
    k->lane0 = "lane";
    k->lstep = 32;
    k->status = 1;
    emit_loader(k, n);
    emit_storer(k, n);
    const char *lab = reads(k, n->in[1], 0);
    line(k, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    line(k, "double total = 0.0;");
    line(k, "for (%s row = warp; row < %lld; row += 8) { /* the same rows in all lanes */", k->itype,
         (long long)rows);
    k->indent++;
    line(k, "const %s base = row * %lld;", k->itype, (long long)c);
    line(k, "const i64 y = ld(%s, row);", lab);
    row_max_sum(k, c);
    line(k, "if (y < 0 || y >= %lld) {", (long long)c);
    line(k, "    if (lane == 0)");
    line(k, "        report(status, %d, (int)step, row, y);", CG_STATUS_LABEL);
    line(k, "    continue;");
    line(k, "}");
    line(k, "total += mx + log(sum) - x_at(base + y);");
    k->indent--;
    line(k, "}");
    line(k, "total = block_sum<256>(lane == 0 ? total : 0.0, %s);", shared_red(k, 1));
    line(k, "if (threadIdx.x == 0)");
    line(k, "    y_put(0, (float)(total / %lld.0));", (long long)rows);
    return 1;
}

static int64_t sp_mse(kb *k, const ir_node *n, kb *pre)
{
    int64_t len = ir_type_numel(&n->in[0]->type), parts = parts_of(1, len);
    if (parts > 1) { /* the parts' sums of squares, then their sum in order */
        cg_ref ws = split(k, pre, 1, len, parts, 1);
        pre->nt = 256;
        emit_loader(pre, n);
        const char *b = reads(pre, n->in[1], 0);
        partials(pre, ws, 1);
        line(pre, "const %s t0 = (%s)blockIdx.x * %lld, t1 = blockIdx.x == %lld ? %lld : t0 + %lld;",
             k->itype, k->itype, (long long)pre->plen, (long long)(parts - 1), (long long)len,
             (long long)pre->plen);
        line(pre, "double s = 0.0;");
        line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += 256) {", k->itype);
        line(pre, "    const double d = (double)x_at(t) - ld(%s, t);", b);
        line(pre, "    s += d * d;");
        line(pre, "}");
        line(pre, "s = block_sum<256>(s, %s);", shared_red(pre, 1));
        line(pre, "if (threadIdx.x == 0)");
        line(pre, "    pd[blockIdx.x] = s;");
        k->nt = 32;
        emit_storer(k, n);
        partials(k, ws, 0);
        line(k, "if (threadIdx.x != 0)");
        line(k, "    return;");
        line(k, "double s = 0.0;");
        line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        line(k, "    s += pd[p];");
        line(k, "y_put(0, (float)(s / %lld.0));", (long long)len);
        return 1;
    }
    k->nt = 1024;
    emit_loader(k, n);
    emit_storer(k, n);
    const char *b = reads(k, n->in[1], 0);
    line(k, "double s = 0.0;");
    line(k, "for (%s t = threadIdx.x; t < %lld; t += 1024) {", k->itype, (long long)len);
    line(k, "    const double d = (double)x_at(t) - ld(%s, t);", b);
    line(k, "    s += d * d;");
    line(k, "}");
    line(k, "s = block_sum<1024>(s, %s);", shared_red(k, 1));
    line(k, "if (threadIdx.x == 0)");
    line(k, "    y_put(0, (float)(s / %lld.0));", (long long)len);
    return 1;
}

static int64_t sp_global_avgpool(kb *k, const ir_node *n)
{
    const ir_type *t = &n->in[0]->type;
    int64_t planes = t->dims[0] * t->dims[1], hw = t->dims[2] * t->dims[3];
    emit_loader(k, n);
    emit_storer(k, n);
    if (hw < 32) { /* a thread per plane, blocks of 64 where 256 leave the GPU idle */
        k->nt = div_up(planes, 256) >= FILL_BLOCKS ? 256 : 64;
        line(k, "const %s pl = (%s)blockIdx.x * %d + threadIdx.x;", k->itype, k->itype, k->nt);
        line(k, "if (pl >= %lld)", (long long)planes);
        line(k, "    return;");
        line(k, "double s = 0.0;");
        line(k, "for (%s t = 0; t < %lld; t++)", k->itype, (long long)hw);
        line(k, "    s += x_at(pl * %lld + t);", (long long)hw);
        line(k, "y_put(pl, (float)(s / %lld.0));", (long long)hw);
        return div_up(planes, k->nt);
    }
    k->nt = 256; /* a warp per plane */
    line(k, "const int lane = threadIdx.x & 31;");
    line(k, "const %s pl = (%s)blockIdx.x * 8 + (threadIdx.x >> 5);", k->itype, k->itype);
    line(k, "if (pl >= %lld)", (long long)planes);
    line(k, "    return; /* the whole warp */");
    line(k, "double s = 0.0;");
    line(k, "for (%s t = lane; t < %lld; t += 32)", k->itype, (long long)hw);
    line(k, "    s += x_at(pl * %lld + t);", (long long)hw);
    line(k, "s = warp_sum(s);");
    line(k, "if (lane == 0)");
    line(k, "    y_put(pl, (float)(s / %lld.0));", (long long)hw);
    return div_up(planes, 8);
}

/* A block per channel of [n, c, inner] (per part of a channel: ch, part; the
 * part's elements [t0, t1)). */
static void channel_start(kb *k, int64_t count)
{
    if (k->parts <= 1) {
        line(k, "const int ch = blockIdx.x;");
        return;
    }
    line(k, "const int ch = blockIdx.x / %lld, part = blockIdx.x %% %lld;", (long long)k->parts,
         (long long)k->parts);
    line(k, "const %s t0 = (%s)part * %lld, t1 = part == %lld ? %lld : t0 + %lld;", k->itype,
         k->itype, (long long)k->plen, (long long)(k->parts - 1), (long long)count,
         (long long)k->plen);
}

/* t runs over the channel's (image, position) pairs, or the part's. */
static void channel_loop(kb *k, int64_t c, int64_t count, int64_t inner, const char *body)
{
    if (k->parts > 1)
        line(k, "for (%s t = t0 + threadIdx.x; t < t1; t += %d) {", k->itype, k->nt);
    else
        line(k, "for (%s t = threadIdx.x; t < %lld; t += %d) {", k->itype, (long long)count, k->nt);
    line(k, "    const %s i = (t / %lld * %lld + ch) * %lld + t %% %lld;", k->itype,
         (long long)inner, (long long)c, (long long)inner, (long long)inner);
    line(k, "    %s", body);
    line(k, "}");
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
    if (!needs_store(k, r))
        return;
    int unaligned = k->unaligned;
    k->unaligned = 0;
    const char *o = reads(k, old, 1), *w = writes(k, r, 1);
    k->unaligned = unaligned;
    line(k, fmt, w, ix, dlit(k, a), o, ix, dlit(k, b), x);
}

/* x_at for batchnorm_train's operand x, and where a convolution left its
 * bias to this kernel (codegen.c bias_pending), x's parameter to write:
 * the first pass over x adds the bias in place, each element by the thread
 * that reads it, and later passes read x as stored. */
static const char *bn_loader(kb *k, const ir_node *n)
{
    const ir_value *x = n->in[0];
    if (k->G->bias_pending != x || k->sp != 0) {
        emit_loader(k, n);
        return NULL;
    }
    int unaligned = k->unaligned;
    k->unaligned = 0;
    const char *r = reads(k, x, 1), *w = writes(k, x, 1);
    k->unaligned = unaligned;
    line(k, "auto x_at = [&](%s i) -> float { return ld(%s, i); };", k->itype, r);
    return w;
}

/* The first pass's body: s sums x (after adding the pending bias, at x). */
static const char *bn_first_pass(kb *k, const char *x)
{
    if (!x)
        return "s += x_at(i);";
    line(k, "const float bb = %s; /* the bias of %%%s, added here */",
         at_index(k, k->G->bias_of, "ch"), cg_name(k->G->bias_of));
    return kstr(k, "{ st(%s, i, x_at(i) + bb); s += x_at(i); }", x);
}

/* Batchnorm's statistics in parts: each part's sum and the sum of squares
 * about its own mean, merged in part order (Chan et al.) into the channel's
 * mean and variance. */
static void bn_stats_parts(kb *pre, const ir_node *n, cg_ref ws, int64_t c, int64_t count,
                           int64_t inner)
{
    pre->nt = channel_threads(pre->plen);
    const char *x = bn_loader(pre, n);
    channel_start(pre, count);
    partials(pre, ws, 1);
    line(pre, "double s = 0.0, ss = 0.0;");
    channel_loop(pre, c, count, inner, bn_first_pass(pre, x));
    line(pre, "s = block_sum<%d>(s, %s);", pre->nt, shared_red(pre, 1));
    line(pre, "const double mp = s / (double)(t1 - t0);");
    channel_loop(pre, c, count, inner, "{ const double dv = x_at(i) - mp; ss += dv * dv; }");
    line(pre, "ss = block_sum<%d>(ss, %s);", pre->nt, shared_red(pre, 1));
    line(pre, "if (threadIdx.x == 0) {");
    line(pre, "    pd[2 * blockIdx.x] = s;");
    line(pre, "    pd[2 * blockIdx.x + 1] = ss;");
    line(pre, "}");
}

static int64_t sp_batchnorm_train(kb *k, const ir_node *n, kb *pre)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], batch = t->dims[0], inner = ir_type_numel(t) / (batch * c);
    int64_t count = batch * inner, parts = parts_of(c, count);
    double m = ir_attr_float(n, "momentum");
    cg_ref ws = {0};
    if (parts > 1) {
        ws = split(k, pre, c, count, parts, 2);
        bn_stats_parts(pre, n, ws, c, count, inner);
    }
    k->nt = channel_threads(parts > 1 ? k->plen : count);
    const char *x = parts > 1 ? (emit_loader(k, n), NULL) : bn_loader(k, n);
    emit_storer(k, n);
    channel_start(k, count);
    if (parts > 1) {
        int64_t P = parts, L = k->plen;
        partials(k, ws, 0);
        line(k, "double s = 0.0, ss = 0.0;");
        line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)P);
        line(k, "    s += pd[2 * (ch * %lld + p)];", (long long)P);
        line(k, "const double mu = s / %lld.0;", (long long)count);
        line(k, "for (%s p = 0; p < %lld; p++) {", k->itype, (long long)P);
        line(k, "    const double np = p == %lld ? %lld.0 : %lld.0, dv = pd[2 * (ch * %lld + p)] / np "
             "- mu;", (long long)(P - 1), (long long)(count - (P - 1) * L), (long long)L,
             (long long)P);
        line(k, "    ss += pd[2 * (ch * %lld + p) + 1] + np * dv * dv;", (long long)P);
        line(k, "}");
        line(k, "const double var = ss / %lld.0;", (long long)count);
    } else {
        line(k, "double s = 0.0, ss = 0.0;");
        channel_loop(k, c, count, inner, bn_first_pass(k, x));
        line(k, "const double mu = block_sum<%d>(s, %s) / %lld.0;", k->nt, shared_red(k, 1),
             (long long)count);
        channel_loop(k, c, count, inner, "{ const double dv = x_at(i) - mu; ss += dv * dv; }");
        line(k, "const double var = block_sum<%d>(ss, %s) / %lld.0;", k->nt, shared_red(k, 1),
             (long long)count);
    }
    line(k, "const double is = 1.0 / sqrt(var + %s);", dlit(k, ir_attr_float(n, "eps")));
    line(k, "if (threadIdx.x == 0%s) {", parts > 1 ? " && part == 0" : "");
    k->indent++;
    store_other(k, n->out[1], "ch", "(float)mu");
    store_other(k, n->out[2], "ch", "(float)is");
    /* PyTorch: the running variance is the unbiased one */
    double unbias = count > 1 ? (double)count / (double)(count - 1) : 1.0;
    store_own(k, n->out[3], n->in[3], "ch", "st(%s, %s, (float)(%s * ld(%s, %s) + %s * %s));",
              1 - m, m, "mu");
    store_own(k, n->out[4], n->in[4], "ch", "st(%s, %s, (float)(%s * ld(%s, %s) + %s * %s));",
              1 - m, m * unbias, "var");
    k->indent--;
    line(k, "}");
    line(k, "const float fm = (float)mu, scale = %s * (float)is, shift = %s;",
         at_index(k, n->in[1], "ch"), at_index(k, n->in[2], "ch"));
    channel_loop(k, c, count, inner, "y_put(i, (x_at(i) - fm) * scale + shift);");
    return c * parts;
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
        s->in[0] != n->out[0] || s->group || !needs_store(k, n->out[0]) || t->rank < 2 ||
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

static int64_t sp_batchnorm_grad(kb *k, const ir_node *n, kb *pre)
{
    const ir_type *t = &n->in[0]->type;
    int64_t c = t->dims[1], batch = t->dims[0], inner = ir_type_numel(t) / (batch * c);
    int64_t count = batch * inner, parts = parts_of(c, count);
    const char *sums = "{ const float q = x_at(i); sdy += q; sdyx += q * (ld(%s, i) - mu) * is; }";
    cg_ref ws = {0};
    const ir_node *bg = bias_grad_of(k, n);
    cg_ref sums_dx = {0}, counts = {0};
    if (parts > 1) { /* the parts' sums of dy and dy xhat */
        ws = split(k, pre, c, count, parts, 2);
        if (bg) { /* and of dx, added by the channel's last part: counts from 0 */
            sums_dx = cg_workspace(k->G, c * parts * (int64_t)sizeof(double));
            counts = cg_workspace(k->G, c * (int64_t)sizeof(int));
        }
        pre->nt = channel_threads(pre->plen);
        emit_loader(pre, n);
        const char *x = reads(pre, n->in[1], 0);
        channel_start(pre, count);
        partials(pre, ws, 1);
        line(pre, "const double mu = %s, is = %s;", at_index(pre, n->in[3], "ch"),
             at_index(pre, n->in[4], "ch"));
        line(pre, "double sdy = 0.0, sdyx = 0.0;");
        channel_loop(pre, c, count, inner, kstr(pre, sums, x));
        line(pre, "sdy = block_sum<%d>(sdy, %s);", pre->nt, shared_red(pre, 1));
        line(pre, "sdyx = block_sum<%d>(sdyx, %s);", pre->nt, shared_red(pre, 1));
        line(pre, "if (threadIdx.x == 0) {");
        line(pre, "    pd[2 * blockIdx.x] = sdy;");
        line(pre, "    pd[2 * blockIdx.x + 1] = sdyx;");
        if (bg) {
            kparam *cn = param_at(pre, NULL, "counts", counts, IR_I32, c * (int64_t)sizeof(int));
            cn->write_other = 1;
            line(pre, "    if (part == 0)");
            line(pre, "        %s[ch] = 0;", cn->name);
        }
        line(pre, "}");
    }
    k->nt = channel_threads(parts > 1 ? k->plen : count);
    emit_loader(k, n);
    emit_storer(k, n);
    const char *x = reads(k, n->in[1], 0);
    channel_start(k, count);
    line(k, "const double mu = %s, is = %s;", at_index(k, n->in[3], "ch"),
         at_index(k, n->in[4], "ch"));
    line(k, "double sdy = 0.0, sdyx = 0.0;");
    if (parts > 1) {
        partials(k, ws, 0);
        line(k, "for (%s p = 0; p < %lld; p++) {", k->itype, (long long)parts);
        line(k, "    sdy += pd[2 * (ch * %lld + p)];", (long long)parts);
        line(k, "    sdyx += pd[2 * (ch * %lld + p) + 1];", (long long)parts);
        line(k, "}");
    } else {
        channel_loop(k, c, count, inner, kstr(k, sums, x));
        line(k, "sdy = block_sum<%d>(sdy, %s);", k->nt, shared_red(k, 1));
        line(k, "sdyx = block_sum<%d>(sdyx, %s);", k->nt, shared_red(k, 1));
    }
    line(k, "if (threadIdx.x == 0%s) {", parts > 1 ? " && part == 0" : "");
    k->indent++;
    store_other(k, n->out[2], "ch", "(float)sdy");
    store_other(k, n->out[1], "ch", "(float)sdyx");
    k->indent--;
    line(k, "}");
    /* dx = w is / N (N dy - sum dy - xhat sum(dy xhat)) */
    line(k, "const float k1 = (float)(%s * is), k2 = (float)(sdy / %lld.0), k3 = (float)(sdyx / "
         "%lld.0);", at_index(k, n->in[2], "ch"), (long long)count, (long long)count);
    if (!bg) {
        channel_loop(k, c, count, inner,
                     kstr(k, "{ const float xhat = (float)((ld(%s, i) - mu) * is); "
                          "y_put(i, k1 * (x_at(i) - k2 - xhat * k3)); }", x));
        return c * parts;
    }
    /* and the sum of dx as stored, the bias gradient (bg): the block's sum,
       or its part's, the last part of the channel adding the parts in order
       (CUDA's threadFenceReduction) */
    int unaligned = k->unaligned;
    k->unaligned = 0;
    const char *dx = reads(k, n->out[0], 1);
    k->unaligned = unaligned;
    line(k, "double sdx = 0.0;");
    channel_loop(k, c, count, inner,
                 kstr(k, "{ const float xhat = (float)((ld(%s, i) - mu) * is); "
                      "y_put(i, k1 * (x_at(i) - k2 - xhat * k3)); sdx += ld(%s, i); }", x, dx));
    line(k, "sdx = block_sum<%d>(sdx, %s);", k->nt, shared_red(k, 1));
    const char *db = writes(k, bg->out[0], 0);
    if (parts == 1) {
        line(k, "if (threadIdx.x == 0)");
        line(k, "    st(%s, ch, (float)sdx); /* %%%s */", db, cg_name(bg->out[0]));
    } else {
        /* written here, read by the last part's block: the accesses the
           fence and the count order, which the check of accesses does not
           model (each param written by other threads, read by none) */
        kparam *sp = param_at(k, NULL, "sums_dx", sums_dx, IR_F32, c * parts * 8);
        kparam *cn = param_at(k, NULL, "counts", counts, IR_I32, c * (int64_t)sizeof(int));
        sp->write_other = cn->write_other = 1;
        line(k, "if (threadIdx.x == 0) {");
        line(k, "    volatile double *sd = (volatile double *)%s;", sp->name);
        line(k, "    sd[blockIdx.x] = sdx;");
        line(k, "    __threadfence();");
        line(k, "    if (atomicAdd(&%s[ch], 1) == %lld) {", cn->name, (long long)(parts - 1));
        line(k, "        __threadfence();");
        line(k, "        double b = 0.0;");
        line(k, "        for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        line(k, "            b += sd[ch * %lld + p];", (long long)parts);
        line(k, "        st(%s, ch, (float)b); /* %%%s */", db, cg_name(bg->out[0]));
        line(k, "    }");
        line(k, "}");
    }
    k->G->sum_done = bg;
    return c * parts;
}

/* sum_to: output element o sums the input over the dims it broadcasts along. */
static int64_t sp_sum_to(kb *k, const ir_node *n, kb *pre)
{
    const ir_type *ta = &n->in[0]->type, *to = &n->out[0]->type;
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
                term(&base, "o", kept_inner, ta->dims[d], ast[d]);
            kept_inner *= ta->dims[d];
        }
    int64_t red_inner = 1;
    for (int d = r - 1; d >= 0; d--)
        if (ost[d] == 0 && ta->dims[d] > 1) {
            term(&off, "t", red_inner, ta->dims[d], ast[d]);
            red_inner *= ta->dims[d];
        }
    red = red_inner;
    const char *bx = kstr(k, "%s", base.len ? base.s : "0"), *ox = kstr(k, "%s", off.len ? off.s : "0");
    cg_sb_free(&base);
    cg_sb_free(&off);
    /* a block per output element where each sums many, or where a thread
       each would leave the GPU idle; in parts where the outputs are few */
    int64_t parts = parts_of(out, red);
    if (out <= 65536 && (red >= 2048 || (out * red > 1000000 && div_up(out, 256) < FILL_BLOCKS))
        && parts > 1) {
        cg_ref ws = split(k, pre, out, red, parts, 1);
        pre->nt = 256;
        emit_loader(pre, n);
        partials(pre, ws, 1);
        line(pre, "const %s o = blockIdx.x / %lld, part = blockIdx.x %% %lld, b = %s;", k->itype,
             (long long)parts, (long long)parts, bx);
        line(pre, "const %s t0 = part * %lld, t1 = part == %lld ? %lld : t0 + %lld;", k->itype,
             (long long)pre->plen, (long long)(parts - 1), (long long)red, (long long)pre->plen);
        line(pre, "double s = 0.0;");
        line(pre, "for (%s t = t0 + threadIdx.x; t < t1; t += 256)", k->itype);
        line(pre, "    s += x_at(b + %s);", ox);
        line(pre, "s = block_sum<256>(s, %s);", shared_red(pre, 1));
        line(pre, "if (threadIdx.x == 0)");
        line(pre, "    pd[blockIdx.x] = s;");
        k->nt = 256; /* the parts of a thread's output, in order */
        emit_storer(k, n);
        partials(k, ws, 0);
        line(k, "const %s o = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
        line(k, "if (o >= %lld)", (long long)out);
        line(k, "    return;");
        line(k, "double s = 0.0;");
        line(k, "for (%s p = 0; p < %lld; p++)", k->itype, (long long)parts);
        line(k, "    s += pd[o * %lld + p];", (long long)parts);
        line(k, "y_put(o, (float)s);");
        return div_up(out, 256);
    }
    emit_loader(k, n);
    emit_storer(k, n);
    if (out <= 65536 && (red >= 2048 || (out * red > 1000000 && div_up(out, 256) < FILL_BLOCKS))) {
        k->nt = 256;
        line(k, "const %s o = blockIdx.x, b = %s;", k->itype, bx);
        line(k, "double s = 0.0;");
        line(k, "for (%s t = threadIdx.x; t < %lld; t += 256)", k->itype, (long long)red);
        line(k, "    s += x_at(b + %s);", ox);
        line(k, "s = block_sum<256>(s, %s);", shared_red(k, 1));
        line(k, "if (threadIdx.x == 0)");
        line(k, "    y_put(o, (float)s);");
        return out;
    }
    k->nt = 256;
    line(k, "const %s o = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    line(k, "if (o >= %lld)", (long long)out);
    line(k, "    return;");
    line(k, "const %s b = %s;", k->itype, bx);
    line(k, "double s = 0.0;");
    line(k, "for (%s t = 0; t < %lld; t++)", k->itype, (long long)red);
    line(k, "    s += x_at(b + %s);", ox);
    line(k, "y_put(o, (float)s);");
    return div_up(out, 256);
}

/* embedding_grad: thread col owns column col of dw, zeroes it, then adds the
 * rows of dy in order (grad.c's order: the same bits, no atomics). */
static int64_t sp_embedding_grad(kb *k, const ir_node *n)
{
    const ir_type *tw = &n->out[0]->type;
    int64_t num = tw->dims[0], dim = tw->dims[1], len = ir_type_numel(&n->in[1]->type);
    k->nt = 256;
    k->status = 1;
    emit_loader(k, n);
    const char *idx = reads(k, n->in[1], 0), *dw = writes(k, n->out[0], 0);
    line(k, "const %s col = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    line(k, "if (col >= %lld)", (long long)dim);
    line(k, "    return;");
    line(k, "for (%s r = 0; r < %lld; r++)", k->itype, (long long)num);
    line(k, "    st(%s, r * %lld + col, 0.0f);", dw, (long long)dim);
    line(k, "for (%s t = 0; t < %lld; t++) {", k->itype, (long long)len);
    line(k, "    const i64 row = ld(%s, t);", idx);
    line(k, "    if (row < 0 || row >= %lld) {", (long long)num);
    line(k, "        if (col == 0)");
    line(k, "            report(status, %d, (int)step, t, row);", CG_STATUS_EMBEDDING_INDEX);
    line(k, "        continue;");
    line(k, "    }");
    line(k, "    const %s at = row * %lld + col;", k->itype, (long long)dim);
    line(k, "    st(%s, at, ld(%s, at) + x_at(t * %lld + col));", dw, dw, (long long)dim);
    line(k, "}");
    /* dw is read back by the thread that writes it */
    param(k, n->out[0])->write_other = 0;
    param(k, n->out[0])->write_aligned = 1;
    return div_up(dim, 256);
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
    const char *x = reads(k, n->in[1], 0), *w = reads(k, n->in[2], 0);
    const char *st = param_at(k, NULL, "stats", stats, IR_F32, rows * 2 * 4)->name;
    k->par[k->npar - 1].write_other = 1;
    line(k, "double mu = 0.0, var = 0.0, s1 = 0.0, s2 = 0.0;");
    line(k, "%s", row_loop(k, d));
    line(k, "    mu += ld(%s, base + t);", x);
    line(k, "mu = %s / %lld.0;", rsum(k, "mu", 1), (long long)d);
    line(k, "%s {", row_loop(k, d));
    line(k, "    const double dv = ld(%s, base + t) - mu;", x);
    line(k, "    var += dv * dv;");
    line(k, "}");
    line(k, "var = %s;", rsum(k, "var", 1));
    line(k, "const double is = 1.0 / sqrt(var / %lld.0 + %s);", (long long)d, dlit(k, eps));
    line(k, "if (%s == 0) {", k->lane0);
    line(k, "    st(%s, 2 * row, (float)mu);", st);
    line(k, "    st(%s, 2 * row + 1, (float)is);", st);
    line(k, "}");
    line(k, "%s {", row_loop(k, d));
    line(k, "    const double g = (double)x_at(base + t) * ld(%s, t);", w);
    line(k, "    s1 += g;");
    line(k, "    s2 += g * (ld(%s, base + t) - mu) * is;", x);
    line(k, "}");
    line(k, "s1 = %s;", rsum(k, "s1", 1));
    line(k, "s2 = %s;", rsum(k, "s2", 1));
    line(k, "%s {", row_loop(k, d));
    line(k, "    const double xhat = (ld(%s, base + t) - mu) * is, g = (double)x_at(base + t) * "
         "ld(%s, t);", x, w);
    line(k, "    y_put(base + t, (float)(is * (g - s1 / %lld.0 - xhat * s2 / %lld.0)));",
         (long long)d, (long long)d);
    line(k, "}");

    /* the columns: dw[i] = sum_r dy xhat, db[i] = sum_r dy */
    k2->nt = 256;
    k2->itype = k->itype;
    const char *dy2 = reads(k2, n->in[0], 0), *x2 = reads(k2, n->in[1], 0);
    const char *st2 = param_at(k2, NULL, "stats", stats, IR_F32, rows * 2 * 4)->name;
    k2->par[k2->npar - 1].read_other = 1;
    line(k2, "const %s c = (%s)blockIdx.x * 256 + threadIdx.x;", k->itype, k->itype);
    line(k2, "if (c >= %lld)", (long long)d);
    line(k2, "    return;");
    line(k2, "double sw = 0.0, sb = 0.0;");
    line(k2, "for (%s r = 0; r < %lld; r++) {", k->itype, (long long)rows);
    line(k2, "    const double xhat = (ld(%s, r * %lld + c) - ld(%s, 2 * r)) * (double)ld(%s, 2 * r + 1);",
         x2, (long long)d, st2, st2);
    line(k2, "    sw += ld(%s, r * %lld + c) * xhat;", dy2, (long long)d);
    line(k2, "    sb += ld(%s, r * %lld + c);", dy2, (long long)d);
    line(k2, "}");
    store_other(k2, n->out[1], "c", "(float)sw");
    store_other(k2, n->out[2], "c", "(float)sb");
    (void)grid;
    return 0;
}

static int special_kernel(kb *k)
{
    const ir_node *n = k->m[k->sp];
    k->itype = index_type(max_numel(k));
    k->iter = &n->out[0]->type;
    int64_t grid;
    int64_t d = 0, rows = 0;
    kb pre; /* a split reduction's first kernel: the partial sums */
    kb_init(&pre, k->G, k->m, k->nm, k->sp, "the partial sums of a reduction in parts, for");
    switch (n->op) {
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: grid = sp_softmax(k, n, &pre); break;
    case IR_OP_SOFTMAX_GRAD: case IR_OP_LOG_SOFTMAX_GRAD:
        grid = sp_softmax_grad(k, n, &pre);
        break;
    case IR_OP_LAYERNORM: grid = sp_layernorm(k, n); break;
    case IR_OP_CROSS_ENTROPY: grid = sp_cross_entropy(k, n, &pre); break;
    case IR_OP_CROSS_ENTROPY_GRAD: grid = sp_cross_entropy_grad(k, n); break;
    case IR_OP_MSE: grid = sp_mse(k, n, &pre); break;
    case IR_OP_GLOBAL_AVGPOOL: grid = sp_global_avgpool(k, n); break;
    case IR_OP_BATCHNORM_TRAIN: grid = sp_batchnorm_train(k, n, &pre); break;
    case IR_OP_BATCHNORM_GRAD: grid = sp_batchnorm_grad(k, n, &pre); break;
    case IR_OP_SUM_TO: grid = sp_sum_to(k, n, &pre); break;
    case IR_OP_EMBEDDING_GRAD: grid = sp_embedding_grad(k, n); break;
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
            body_prepend(k, &k->shared);
        int rc = -1;
        if (accesses_safe(k) && accesses_safe(&k2)) {
            int64_t g1 = d <= 1024 ? div_up(rows, 8) : rows;
            finish(k, kernel_base(k, NULL), k->nt, g1, 0, n, kernel_what(k));
            finish(&k2, kstr(k, "layernorm_grad_columns__%s", cg_name(n->out[1])), 256,
                   div_up(d, 256), 0, n, cg_pprintf(k->G->p, "layernorm_grad columns %%%s",
                                                    cg_name(n->out[1])));
            rc = 0;
        }
        kb_free(&k2);
        kb_free(&pre);
        return rc;
    }
    default:
        cg_fail(k->G, n, "no kernel for %s", ir_ops[n->op].name);
        kb_free(&pre);
        return 0;
    }
    if (k->shared.len)
        body_prepend(k, &k->shared);
    int rc = 0;
    if (pre.grid) {
        if (pre.shared.len)
            body_prepend(&pre, &pre.shared);
        rc = accesses_safe(&pre) && accesses_safe(k) ? 0 : -1;
        if (rc == 0)
            finish(&pre, kernel_base(&pre, "parts"), pre.nt, pre.grid, 0, n,
                   pre.parts > 1 ? cg_pprintf(k->G->p, "%s: partial sums, %lld parts per "
                                              "reduction", kernel_what(k), (long long)pre.parts)
                                 : cg_pprintf(k->G->p, "%s: partial sums, a term per row",
                                              kernel_what(k)));
    }
    if (rc == 0)
        rc = finish(k, kernel_base(k, NULL), k->nt, grid, 0, n, kernel_what(k));
    if (rc == 0 && k->G->bias_pending == n->in[0] && n->op == IR_OP_BATCHNORM_TRAIN)
        k->G->bias_pending = NULL; /* added */
    kb_free(&pre);
    return rc;
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
    k->itype = index_type(most);
    k->vec = 1;
    k->array = 0;
    for (int t = 0; t < nm; t++) {
        k->m = m + t, k->nm = 1;
        k->iter = &m[t]->out[0]->type;
        int64_t n = ir_type_numel(k->iter), blocks = div_up(n, 256);
        line(k, "if (blockIdx.x < %lld) { /* %%%s */", (long long)(start + blocks),
             cg_name(m[t]->out[0]));
        k->indent++;
        line(k, "const %s i = (%s)(blockIdx.x - %lld) * 256 + threadIdx.x;", k->itype, k->itype,
             (long long)start);
        line(k, "if (i >= %lld)", (long long)n);
        line(k, "    return;");
        emit_map(k, m[t]);
        for (int j = 0; j < m[t]->nout; j++) {
            const ir_value *v = m[t]->out[j];
            if (needs_store(k, v))
                line(k, "st(%s, i, %s);", writes(k, v, 1), k->reg_name[reg_slot(k, v)]);
        }
        line(k, "return;");
        k->indent--;
        line(k, "}");
        start += blocks;
    }
    if (k->overflow)
        return -2;
    if (k->pre.len)
        body_prepend(k, &k->pre);
    k->m = m, k->nm = nm;
    const char *what = cg_pprintf(k->G->p, "%s of %d tensors (one launch)", ir_ops[m[0]->op].name,
                                  nm);
    return finish(k, kstr(k, "multi_%s", ir_ops[m[0]->op].name), 256, start, 1, m[0], what);
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

int cg_emit_kernel(cg_gen *G, const ir_node *const *m, int nm, int sp)
{
    kb k;
    kb_init(&k, G, m, nm, sp, nm > 1 ? "a fused node:" : ir_ops[m[0]->op].name);
    int rc = sp < 0 ? map_kernel(&k) : special_kernel(&k);
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

/* ---------------------------------------------------------------- the program's own */

void cg_emit_casts(cg_gen *G, const ir_node *by, const char *what, const cg_cast *c, int n)
{
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %d tensors to other types, blocks of 256 elements per tensor */\n"
                 "GNC_KERNEL void __launch_bounds__(256) @K@(", n);
    for (int i = 0; i < n; i++)
        cg_sb_printf(&t, "%sconst %s *__restrict__ s%d, %s *__restrict__ d%d", i ? ", " : "",
                     cg_ctype(c[i].sdt), i, cg_ctype(c[i].ddt), i);
    cg_sb_printf(&t, ")\n{\n");
    int64_t blocks = 0;
    for (int i = 0; i < n; i++) {
        int64_t b = div_up(c[i].n, 256);
        cg_sb_printf(&t, "    if (blockIdx.x < %lld) {\n"
                     "        const i64 i = ((i64)blockIdx.x - %lld) * 256 + threadIdx.x;\n"
                     "        if (i < %lld)\n            st(d%d, i, ld(s%d, i));\n"
                     "        return;\n    }\n", (long long)(blocks + b), (long long)blocks,
                     (long long)c[i].n, i, i);
        blocks += b;
    }
    cg_sb_printf(&t, "}\n");
    if (!cg_grid_fits(G, by, what, blocks, 1, 1)) {
        cg_sb_free(&t);
        return;
    }
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, "multi_cast", by, 1, 256);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = by, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)blocks, l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 2 * n;
    l->args = cg_palloc(G->p, (size_t)(2 * n) * sizeof *l->args);
    cg_access *acc = base_xmalloc((size_t)(2 * n) * sizeof *acc);
    for (int i = 0; i < n; i++) {
        l->args[2 * i] = (cg_arg){CG_ARG_BUFFER, c[i].src, 0, 0};
        l->args[2 * i + 1] = (cg_arg){CG_ARG_BUFFER, c[i].dst, 0, 0};
        acc[2 * i] = (cg_access){c[i].src, c[i].n * (int64_t)cg_dtype_size(c[i].sdt), 0, 1,
                                 c[i].sdt};
        acc[2 * i + 1] = (cg_access){c[i].dst, c[i].n * (int64_t)cg_dtype_size(c[i].ddt), 1, 1,
                                     c[i].ddt};
    }
    cg_add_step(G, &st, acc, 2 * n);
    base_free(acc);
}

/* n elements of one type into another: one kernel per pair of types, n an argument. */
void cg_emit_cast(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                  cg_ref dst, ir_dtype ddt, int64_t numel)
{
    int64_t vec = numel % 4 == 0 ? 4 : 1;
    if (!cg_grid_fits(G, n, what, div_up(numel / vec, 256), 1, 1))
        return;
    const char *s = cg_ctype(sdt), *d = cg_ctype(ddt);
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %s elements to %s, 4 a thread (n a multiple of 4) or 1 */\n", s, d);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, "
                 "%s *__restrict__ dst, i64 n, i64 vec)\n{\n", s, d);
    cg_sb_printf(&t, "    const i64 e = ((i64)blockIdx.x * 256 + threadIdx.x) * vec;\n"
                     "    if (e >= n)\n        return;\n"
                     "    if (vec == 4) {\n"
                     "        float v[4];\n        ldv<4>(src, e, v);\n        stv<4>(dst, e, v);\n"
                     "    } else {\n        st(dst, e, ld(src, e));\n    }\n}\n");
    char base[64];
    snprintf(base, sizeof base, "cast_%s_to_%s", ir_dtype_name(sdt), ir_dtype_name(ddt));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 1, 256);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)div_up(numel / vec, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 4;
    l->args = cg_palloc(G->p, 4 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    l->args[2] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, numel, 0};
    l->args[3] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, vec, 0};
    cg_access acc[2] = {{src, numel * (int64_t)cg_dtype_size(sdt), 0, 1, sdt},
                        {dst, numel * (int64_t)cg_dtype_size(ddt), 1, 1, ddt}};
    cg_add_step(G, &st, acc, 2);
}

/* A convolution's bias and ReLU as a kernel of their own, where library.c
 * leaves them out of the cuDNN call: y[i] = relu(y[i] + bias[channel of i]) in
 * place, 4 elements a thread where the count allows, the channel by
 * constants of the shape in NCHW or NHWC. */
void cg_emit_bias_relu(cg_gen *G, const ir_node *n, const char *what, cg_ref y, ir_dtype ydt,
                       const cg_ref *bias, ir_dtype bdt, int64_t images, int64_t k, int64_t px,
                       int nhwc, int relu)
{
    int64_t numel = images * k * px, vec = numel % 4 == 0 ? 4 : 1;
    if (!cg_grid_fits(G, n, what, div_up(numel / vec, 256), 1, 1))
        return;
    const char *it = index_type(numel), *yt = cg_ctype(ydt);
    cg_sb v = {0}, t = {0}, head = {0};
    if (bias && nhwc)
        cg_sb_printf(&v, "a + ld(bias, i %% %lld)", (long long)k);
    else if (bias)
        cg_sb_printf(&v, "a + ld(bias, i / %lld %% %lld)", (long long)px, (long long)k);
    else
        cg_sb_printf(&v, "a");
    cg_sb_printf(&head, "/* %s%s%s of a cuDNN convolution, in place on its %s result (%lld "
                 "images, %lld channels, %lld pixels): library.c says why not in the call\n",
                 bias ? "the bias" : "", bias && relu ? " and " : "", relu ? "the ReLU" : "",
                 nhwc ? "NHWC" : "NCHW", (long long)images, (long long)k, (long long)px);
    cg_describe_node(&head, n);
    cg_sb_put(&head, " */\n", 4);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(%s *__restrict__ y", yt);
    if (bias)
        cg_sb_printf(&t, ", const %s *__restrict__ bias", cg_ctype(bdt));
    cg_sb_printf(&t, ")\n{\n    const %s e = ((%s)blockIdx.x * 256 + threadIdx.x) * %lld;\n"
                 "    if (e >= %lld)\n        return;\n", it, it, (long long)vec,
                 (long long)numel);
    cg_sb_printf(&t, "    auto out = [&](%s i, float a) -> float { return %s%s%s; };\n", it,
                 relu ? "relu_f(" : "", v.s, relu ? ")" : "");
    if (vec == 4)
        cg_sb_printf(&t, "    float v[4];\n    ldv<4>(y, e, v);\n#pragma unroll\n"
                     "    for (int j = 0; j < 4; j++)\n        v[j] = out(e + j, v[j]);\n"
                     "    stv<4>(y, e, v);\n}\n");
    else
        cg_sb_printf(&t, "    st(y, e, out(e, ld(y, e)));\n}\n");
    char base[64];
    snprintf(base, sizeof base, "conv_%s%s%s_%s", bias ? "bias" : "", bias && relu ? "_" : "",
             relu ? "relu" : "", nhwc ? "nhwc" : "nchw");
    int kernel = cg_add_kernel(G, head.s, t.s, NULL, 0, base, n, 1, 256);
    cg_sb_free(&v);
    cg_sb_free(&t);
    cg_sb_free(&head);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)div_up(numel / vec, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = bias ? 2 : 1;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, y, 0, 0};
    int64_t ybytes = numel * (int64_t)cg_dtype_size(ydt);
    cg_access acc[3] = {{y, ybytes, 0, 1, ydt}, {y, ybytes, 1, 1, ydt}};
    if (bias) {
        l->args[1] = (cg_arg){CG_ARG_BUFFER, *bias, 0, 0};
        acc[2] = (cg_access){*bias, k * (int64_t)cg_dtype_size(bdt), 0, 0, bdt};
    }
    cg_add_step(G, &st, acc, bias ? 3 : 2);
}

/* batch matrices of rows x cols elements from src (sdt) transposed into dst
 * (ddt): prelude.cuh's transpose_tiles, one kernel per shape and types. */
void cg_emit_transpose(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                       cg_ref dst, ir_dtype ddt, int64_t batch, int64_t rows, int64_t cols)
{
    /* a matrix's rows and columns are int template arguments; each matrix
       starts at an i64 offset */
    if (!cg_grid_fits(G, n, what, div_up(cols, 32), div_up(rows, 32), batch))
        return;
    if (rows > CG_INT_ELEMENTS || cols > CG_INT_ELEMENTS) {
        cg_fail(G, n, "%%%s, %s: %lld x %lld matrices are over the int indices of a transpose",
                n->out[0]->name, what, (long long)rows, (long long)cols);
        return;
    }
    const char *s = cg_ctype(sdt), *d = cg_ctype(ddt);
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %lld matrices of %lld x %lld %s elements transposed to %s */\n",
                 (long long)batch, (long long)rows, (long long)cols, s, d);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, "
                 "%s *__restrict__ dst)\n{\n    transpose_tiles<%lld, %lld>(src, dst);\n}\n",
                 s, d, (long long)rows, (long long)cols);
    char base[64];
    snprintf(base, sizeof base, "transpose_%s_to_%s", ir_dtype_name(sdt), ir_dtype_name(ddt));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 0, 256);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)div_up(cols, 32), l->grid[1] = (unsigned)div_up(rows, 32);
    l->grid[2] = (unsigned)batch;
    l->block[0] = 32, l->block[1] = 8, l->block[2] = 1;
    l->nargs = 2;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    int64_t numel = batch * rows * cols;
    cg_access acc[2] = {{src, numel * (int64_t)cg_dtype_size(sdt), 0, 0, sdt},
                        {dst, numel * (int64_t)cg_dtype_size(ddt), 1, 0, ddt}};
    cg_add_step(G, &st, acc, 2);
}

void cg_emit_masked_copy(cg_gen *G, const ir_value *target, const ir_value *source)
{
    const char *t =
        "/* an update of an fp16 step: the optimizer's result, unless a gradient overflowed */\n"
        "GNC_KERNEL void __launch_bounds__(256) @K@(const float *__restrict__ src, "
        "float *__restrict__ dst, const gnc_scaler *__restrict__ scaler, i64 n)\n{\n"
        "    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x;\n"
        "    if (i < n && !scaler->found_inf)\n        dst[i] = src[i];\n}\n";
    int64_t numel = ir_type_numel(&target->type);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = source->def};
    st.what = cg_pprintf(G->p, "update %%%s = %%%s unless a gradient overflowed", cg_name(target),
                         cg_name(source));
    if (!cg_grid_fits(G, source->def, st.what, div_up(numel, 256), 1, 1))
        return;
    int kernel = cg_add_kernel(G, "", t, NULL, 0, "update_unless_overflow", source->def, 1, 256);
    cg_ref src = cg_ref_of(G, source), dst = cg_ref_of(G, target);
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)div_up(numel, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 4;
    l->args = cg_palloc(G->p, 4 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    l->args[2] = (cg_arg){CG_ARG_BUFFER, G->D->loss_scale, 0, 0};
    l->args[3] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, numel, 0};
    cg_access acc[3] = {{src, numel * 4, 0, 1, IR_F32}, {dst, numel * 4, 1, 1, IR_F32},
                        {G->D->loss_scale, 16, 0, 0, IR_U8}};
    cg_add_step(G, &st, acc, 3);
}

int cg_local_reduce_kernel(cg_gen *G, ir_dtype t, int max)
{
    cg_sb b = {0};
    const char *ct = cg_ctype(t);
    cg_sb_printf(&b, "/* a collective between devices that share a GPU, reduced without NCCL: "
                 "acc %s= x */\n"
                 "GNC_KERNEL void __launch_bounds__(256) @K@(%s *__restrict__ acc, "
                 "const %s *__restrict__ x, i64 n)\n{\n"
                 "    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x;\n"
                 "    if (i < n) {\n"
                 "        const auto a = ld(acc, i), v = ld(x, i);\n"
                 "        st(acc, i, %s);\n    }\n}\n",
                 max ? "max" : "+", ct, ct, max ? "a > v ? a : v" : "a + v");
    char base[64];
    snprintf(base, sizeof base, "local_%s_%s", max ? "max" : "sum", ir_dtype_name(t));
    int k = cg_add_kernel(G, "", b.s, NULL, 0, base, NULL, 1, 256);
    cg_sb_free(&b);
    return k;
}

void cg_emit_scaler_update(cg_gen *G)
{
    const cg_loss_scale *ls = &G->p->loss_scale;
    kb k;
    memset(&k, 0, sizeof k);
    cg_sb t = {0};
    cg_sb_printf(&t, "/* the loss scale after a step: x%g after an overflow, x%g after %d good steps */\n"
                 "GNC_KERNEL void __launch_bounds__(32) @K@(gnc_scaler *__restrict__ scaler)\n{\n"
                 "    if (threadIdx.x != 0)\n        return;\n"
                 "    if (scaler->found_inf) {\n"
                 "        scaler->scale *= %s;\n        scaler->good_steps = 0;\n"
                 "    } else if (++scaler->good_steps == %d) {\n"
                 "        scaler->scale *= %s;\n        scaler->good_steps = 0;\n    }\n"
                 "    scaler->inv_scale = 1.0f / scaler->scale;\n"
                 "    scaler->found_inf = 0;\n}\n",
                 ls->backoff, ls->growth, ls->interval, flit(&k, ls->backoff), ls->interval,
                 flit(&k, ls->growth));
    kb_free(&k);
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, "loss_scale_update", NULL, 0, 32);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .what = "the loss scale's update"};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = l->grid[1] = l->grid[2] = 1;
    l->block[0] = 32, l->block[1] = l->block[2] = 1;
    l->nargs = 1;
    l->args = cg_palloc(G->p, sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, G->D->loss_scale, 0, 0};
    cg_access acc = {G->D->loss_scale, 16, 1, 0, IR_U8};
    cg_add_step(G, &st, &acc, 1);
}

/* An all_gather along axis > 0 gathers rank-major into staging: unpack it
 * into the result.  A reduce_scatter along axis > 0 packs its operand
 * rank-major into staging first (pack). */
void cg_emit_gather_unpack(cg_gen *G, const ir_node *n, cg_ref staging, int pack)
{
    const ir_value *whole = pack ? n->in[0] : n->out[0];
    int ng;
    ir_attr_ints(n, "group", &ng);
    int64_t outer, len, inner;
    around(&whole->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int64_t part = len / ng, numel = ir_type_numel(&whole->type);
    ir_dtype dt = cg_dtype_of(G, whole);
    const char *ct = cg_ctype(dt), *it = index_type(numel);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n};
    st.what = cg_pprintf(G->p, "%s %%%s", pack ? "pack for" : "unpack", cg_name(n->out[0]));
    if (!cg_grid_fits(G, n, st.what, div_up(numel, 256), 1, 1))
        return;
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %s along axis %lld through rank-major staging: [%lld][%lld, %lld, %lld] %s "
                 "[%lld, %lld x %lld, %lld] */\n", ir_ops[n->op].name,
                 (long long)ir_attr_int(n, "axis"), (long long)ng, (long long)outer,
                 (long long)part, (long long)inner, pack ? "from" : "into", (long long)outer,
                 (long long)ng, (long long)part, (long long)inner);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, %s "
                 "*__restrict__ dst)\n{\n", ct, ct);
    cg_sb_printf(&t, "    const %s i = (%s)blockIdx.x * 256 + threadIdx.x; /* in the whole */\n"
                 "    if (i >= %lld)\n        return;\n", it, it, (long long)numel);
    cg_sb_printf(&t, "    const %s u = i / %lld, pos = i / %lld %% %lld, r = pos / %lld, "
                 "q = pos %% %lld, w = i %% %lld;\n", it, (long long)(len * inner),
                 (long long)inner, (long long)len, (long long)part, (long long)part,
                 (long long)inner);
    cg_sb_printf(&t, "    const %s s = ((r * %lld + u) * %lld + q) * %lld + w; /* in staging */\n",
                 it, (long long)outer, (long long)part, (long long)inner);
    cg_sb_printf(&t, pack ? "    dst[s] = src[i];\n}\n" : "    dst[i] = src[s];\n}\n");
    const char *base = cg_pprintf(G->p, "%s__%s", pack ? "pack" : "unpack", cg_name(n->out[0]));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 0, 256);
    cg_sb_free(&t);
    cg_ref w = cg_ref_of(G, whole);
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)div_up(numel, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 2;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, pack ? w : staging, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, pack ? staging : w, 0, 0};
    int64_t bytes = numel * (int64_t)cg_dtype_size(dt);
    cg_access acc[2] = {{l->args[0].buf, bytes, 0, 0, dt}, {l->args[1].buf, bytes, 1, 0, dt}};
    cg_add_step(G, &st, acc, 2);
}
