/* The kernel builder (kb.h): a kernel's parameters, registers and names,
 * literals and operands, the comment over it, and the kernel finished into
 * the program with its launch and its accesses checked. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kb.h"

/* Names a kernel's own code uses: a parameter or register made from a value's
 * name never takes one of them.  The prelude's own names (its functions,
 * types and macros: to_bf16, ar_relu, m_exp, ...) are read from the
 * prelude itself (prelude_names), so that an op's helper there needs no line
 * here. */
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
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "expm1f", "powf",
    "expf", "erff", "tanhf", "logf", "sqrtf", "exp", "log", "sqrt", "pow", "fabsf", "rintf",
    "log1pf", "fminf", "fmaxf", "floorf",
    /* the templates' own */
    "status", "step", "scaler", "x_at", "y_put", "red", "redd", "i", "j", "e", "n", "t", "v",
    "lane", "warp", "row", "base", "c", "mx", "sum", "lse", "q", "s", "total", "y", "o", "b",
    "ch", "mu", "is", "var", "fm", "scale", "shift", "sdy", "sdyx", "k1", "k2", "k3", "xhat",
    "col", "r", "at", "pl", "d", "dv", "mean", "inv", "m", "g", "s1", "s2", "sw", "sb", "x",
    "a", "ky", "kx", "iy", "ix", "oy", "ox", "y0", "x0", "y1", "x1", "ya", "yb", "xa", "xb",
    "oy0", "oy1", "ox0", "ox1", "arg", "arg_found", "u", "w", "pos", "src", "dst", "vec",
    "part", "t0", "t1", "p", "pd", "np", "mp", "bb", "sdx", "sd", "ny", "nx",
    "ly0", "ly1", "lx0", "lx1", "wy", "tx", "ty", "r0", "r1", "tile_red", "last_part",
    "x_atv", "y_putv", "sh", "ss", "nt", "mt", "tm", "tq", "tn", "me", "na", "nb", "f", "h",
    "mred", "sum8", "half_of", "pair_of", "round_to", "uint4", "first", "m2", "fdy", "fdyx",
    "fdx",
    NULL};

char *kb_kstr(kb *k, const char *fmt, ...)
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

/* The names the prelude declares at file scope: each identifier outside
 * braces, parentheses and template parameter lists (functions, their return
 * types, structs, typedefs), and each macro #defined; comments and other
 * directives skipped.  Read once, for every thread (kernels may be generated
 * on several at once). */
static const char **prelude_names;
static int nprelude_names;
static pthread_once_t prelude_once = PTHREAD_ONCE_INIT;

static int ident_char(char c) { return c == '_' || isalnum((unsigned char)c); }

static const char *name_dup(const char *a, const char *b)
{
    char *s = base_xmalloc((size_t)(b - a) + 1);
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = '\0';
    return s;
}

static void read_prelude_names(void)
{
    const char *p = cg_prelude, *end = cg_prelude + cg_prelude_len;
    int braces = 0, parens = 0, cap = 0, line_start = 1;
    int params = 0; /* 1: after "template", 2: inside its <...> */
    while (p < end) {
        if (end - p > 1 && p[0] == '/' && p[1] == '*') {
            const char *q = strstr(p + 2, "*/");
            p = q ? q + 2 : end;
            continue;
        }
        if (end - p > 1 && p[0] == '/' && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        if (line_start && *p == '#') { /* a directive: a #define's name */
            const char *q = p + 1;
            while (q < end && (*q == ' ' || *q == '\t'))
                q++;
            if (end - q > 7 && strncmp(q, "define", 6) == 0 && (q[6] == ' ' || q[6] == '\t')) {
                for (q += 7; q < end && (*q == ' ' || *q == '\t'); q++)
                    ;
                const char *a = q;
                while (q < end && ident_char(*q))
                    q++;
                if (q > a)
                    push_name(&prelude_names, &nprelude_names, &cap, name_dup(a, q));
            }
            while (p < end && (*p != '\n' || p[-1] == '\\'))
                p++;
            continue;
        }
        if (isalpha((unsigned char)*p) || *p == '_') {
            const char *a = p;
            while (p < end && ident_char(*p))
                p++;
            if (p - a == 8 && strncmp(a, "template", 8) == 0)
                params = 1;
            else if (!braces && !parens && params != 2)
                push_name(&prelude_names, &nprelude_names, &cap, name_dup(a, p));
            line_start = 0;
            continue;
        }
        braces += (*p == '{') - (*p == '}');
        parens += (*p == '(') - (*p == ')');
        if (params == 1 && *p == '<')
            params = 2;
        else if (params == 2 && *p == '>')
            params = 0;
        line_start = *p == '\n' || (line_start && (*p == ' ' || *p == '\t'));
        p++;
    }
}

static int name_taken(const kb *k, const char *s)
{
    for (int i = 0; reserved[i]; i++)
        if (strcmp(reserved[i], s) == 0)
            return 1;
    pthread_once(&prelude_once, read_prelude_names);
    for (int i = 0; i < nprelude_names; i++)
        if (strcmp(prelude_names[i], s) == 0)
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
    char *try = kb_kstr(k, "%s%s", base, suffix);
    for (int i = 2; name_taken(k, try); i++)
        try = kb_kstr(k, "%s%s_%d", base, suffix, i);
    push_name(&k->names, &k->nnames, &k->capnames, try);
    return try;
}

void kb_line(kb *k, const char *fmt, ...)
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

/* ---- parameters ---- */

kparam *kb_param_at(kb *k, const ir_value *v, const char *base, cg_ref at, ir_dtype dt,
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

kparam *kb_param(kb *k, const ir_value *v)
{
    ir_dtype dt = cg_dtype_of(k->G, v);
    return kb_param_at(k, v, cg_name(v), cg_ref_of(k->G, v), dt,
                       ir_type_numel(&v->type) * (int64_t)ir_dtype_size(dt));
}

/* The parameter of v, read at elements aligned with the kernel's or not. */
const char *kb_reads(kb *k, const ir_value *v, int aligned)
{
    kparam *p = kb_param(k, v);
    if (aligned && !k->unaligned)
        p->read_aligned = 1;
    else
        p->read_other = 1;
    return p->name;
}

const char *kb_writes(kb *k, const ir_value *v, int aligned)
{
    kparam *p = kb_param(k, v);
    if (aligned)
        p->write_aligned = 1;
    else
        p->write_other = 1;
    return p->name;
}

/* ---- registers ---- */

int kb_reg_slot(const kb *k, const ir_value *v)
{
    for (int i = k->nregs - 1; i >= 0; i--)
        if (k->reg_id[i] == v->id)
            return i;
    return -1;
}

const char *kb_reg(kb *k, const ir_value *v)
{
    int s = kb_reg_slot(k, v);
    if (s < 0)
        return NULL;
    return k->reg_array[s] ? kb_kstr(k, "%s[j]", k->reg_name[s]) : k->reg_name[s];
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
void kb_bind_reg(kb *k, const ir_value *v, const char *name)
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
void kb_set(kb *k, const ir_value *v, const char *expr)
{
    const char *rt = kb_rtype(cg_dtype_of(k->G, v));
    if (k->array) {
        int s = kb_reg_slot(k, v);
        const char *n = s >= 0 ? k->reg_name[s] : NULL;
        if (!n) {
            n = new_reg(k, v, 1);
            cg_sb_printf(&k->pre, "    %s %s[4];\n", rt, n);
        }
        kb_line(k, "%s[j] = %s;", n, expr);
    } else {
        kb_line(k, "const %s %s = %s;", rt, new_reg(k, v, 0), expr);
    }
}

/* ---- literals and indices ---- */

const char *kb_flit(kb *k, double x)
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
    return kb_kstr(k, "%sf", buf);
}

const char *kb_dlit(kb *k, double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", x);
    if (!strpbrk(buf, ".en"))
        strcat(buf, ".0");
    return kb_kstr(k, "%s", buf);
}

/* (idx / div) % mod * mul, leaving out what is 1 (mod <= 0: no modulo) */
void kb_term(cg_sb *b, const char *idx, int64_t div, int64_t mod, int64_t mul)
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
const char *kb_bcast_index(kb *k, const ir_type *t, const ir_type *out, const char *idx)
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
        kb_term(&b, idx, ost[i], i == n - 1 ? 0 : dims[i], st[i]);
    }
    const char *res = kb_kstr(k, "%s", b.len ? b.s : "0");
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
int kb_needs_store(kb *k, const ir_value *v)
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

const ir_type *kb_type(kb *k, const ir_value *v)
{
    return k->nhwc ? &k->G->ptype[v->id] : &v->type;
}

/* v's dims aligned to 4 ([n, c, h, w]); 0 when it has more. */
static int dims4(const ir_value *v, int64_t d[4])
{
    const ir_type *t = &v->type;
    if (t->rank > 4)
        return 0;
    for (int i = 0; i < 4; i++)
        d[i] = i < 4 - t->rank ? 1 : t->dims[i - (4 - t->rank)];
    return 1;
}

int kb_crossed(kb *k, const ir_value *v)
{
    int64_t d[4];
    if (k->iter->rank != 4 || !dims4(v, d) || d[1] == 1 || d[2] * d[3] == 1)
        return 0;
    return k->G->nhwc[v->id] != k->nhwc;
}

const char *kb_cross_index(kb *k, const ir_value *v, const char *idx)
{
    const int64_t *it = k->iter->dims;
    int64_t L[4], div[4], o[4], st[4];
    dims4(v, o);
    if (k->nhwc) { /* the kernel's element idx: [n, h, w, c] */
        L[0] = it[0], L[1] = it[3], L[2] = it[1], L[3] = it[2];
        div[1] = 1, div[3] = L[1], div[2] = L[1] * L[3], div[0] = div[2] * L[2];
    } else {
        L[0] = it[0], L[1] = it[1], L[2] = it[2], L[3] = it[3];
        div[3] = 1, div[2] = L[3], div[1] = L[3] * L[2], div[0] = div[1] * L[1];
    }
    if (k->G->nhwc[v->id]) /* v stored [n, h, w, c] */
        st[1] = 1, st[3] = o[1], st[2] = o[1] * o[3], st[0] = st[2] * o[2];
    else
        st[3] = 1, st[2] = o[3], st[1] = o[3] * o[2], st[0] = st[1] * o[1];
    cg_sb b = {0};
    for (int d = 0; d < 4; d++)
        if (o[d] > 1)
            kb_term(&b, idx, div[d], d == 0 ? 0 : L[d], st[d]);
    const char *res = kb_kstr(k, "%s", b.len ? b.s : "0");
    cg_sb_free(&b);
    return res;
}

void kb_store(kb *k, const ir_value *v, const char *idx, const char *val)
{
    if (kb_crossed(k, v))
        kb_line(k, "st(%s, %s, %s);", kb_writes(k, v, 0), kb_cross_index(k, v, idx), val);
    else
        kb_line(k, "st(%s, %s, %s);", kb_writes(k, v, 1), idx, val);
}

/* Operand v at element idx of the kernel's shape (k->iter), as an expression. */
const char *kb_opnd(kb *k, const ir_value *v)
{
    const char *r = kb_reg(k, v);
    if (r)
        return r;
    if (cg_const_inline(k->G, v)) {
        const char *lit = kb_flit(k, ir_attr_float(v->def, "value"));
        if (cg_const_scaled(k->G, v)) {
            k->scaler = 1;
            return kb_kstr(k, "(%s * scaler->scale)", lit);
        }
        return lit;
    }
    if (ir_type_numel(&v->type) == 1 && ir_type_numel(k->iter) > 1)
        return kb_kstr(k, "ld(%s, 0)", kb_reads(k, v, 0));
    if (kb_crossed(k, v))
        return kb_kstr(k, "ld(%s, %s)", kb_reads(k, v, 0), kb_cross_index(k, v, k->idx));
    const ir_type *t = kb_type(k, v);
    if (ir_type_eq(t, k->iter)) {
        const char *p = kb_reads(k, v, 1);
        if (k->array && ir_is_float(cg_dtype_of(k->G, v))) { /* a vector load before the loop */
            const char *n = new_reg(k, v, 1);
            cg_sb_printf(&k->pre, "    float %s[4];\n    ldv<4>(%s, e, %s);\n", n, p, n);
            return kb_reg(k, v);
        }
        return kb_kstr(k, "ld(%s, %s)", p, k->idx);
    }
    return kb_kstr(k, "ld(%s, %s)", kb_reads(k, v, 0), kb_bcast_index(k, t, k->iter, k->idx));
}

/* Operand v read at an index the op computes (never aligned). */
const char *kb_at_index(kb *k, const ir_value *v, const char *index)
{
    if (cg_const_inline(k->G, v))
        return kb_opnd(k, v);
    return kb_kstr(k, "ld(%s, %s)", kb_reads(k, v, 0), index);
}

const char *kb_tmp(kb *k, const char *base) { return fresh(k, base, ""); }

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

void kb_init(kb *k, cg_gen *G, const ir_node *const *m, int nm, int sp, const char *what)
{
    memset(k, 0, sizeof *k);
    k->G = G;
    k->m = m;
    k->nm = nm;
    k->sp = sp;
    k->indent = 1;
    k->idx = "i";
    k->itype = "int";
    /* channels-last where its first value whose layout matters is: the
       special's operand, else a member's result (layout.c ties the rest) */
    const ir_value *first = NULL;
    if (sp >= 0 && cg_layout_matters(m[sp]->in[0]))
        first = m[sp]->in[0];
    for (int i = 0; i < nm && !first; i++)
        for (int j = 0; j < m[i]->nout && !first; j++)
            if (cg_layout_matters(m[i]->out[j]))
                first = m[i]->out[j];
    k->nhwc = first && G->nhwc[first->id];
    cg_sb_printf(&k->head, "/* %s%s\n", what, k->nhwc ? " (channels-last)" : "");
    for (int i = 0; i < nm; i++)
        cg_describe_node(&k->head, m[i]);
    cg_sb_put(&k->head, " */\n", 4);
}

void kb_free(kb *k)
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
int kb_accesses_safe(const kb *k)
{
    for (int i = 0; i < k->npar; i++) {
        const kparam *p = &k->par[i];
        int wr = p->write_aligned || p->write_other;
        if (wr && (p->read_other || (p->write_other && (p->read_aligned || p->write_aligned))))
            return 0;
        for (int j = i + 1; j < k->npar; j++) {
            const kparam *q = &k->par[j];
            int wq = q->write_aligned || q->write_other;
            if ((wr || wq) && p->at.region == q->at.region &&
                p->at.offset < q->at.offset + q->bytes &&
                q->at.offset < p->at.offset + p->bytes)
                return 0;
        }
    }
    return 1;
}

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
int kb_finish(kb *k, const char *base, int block, int64_t grid, int elementwise,
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
    if (!kb_accesses_safe(k))
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
