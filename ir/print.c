/* The IR printer: writes a graph as IR text (docs/ir.md).
 *
 * The text is canonical: one graph prints one way, and ir_parse() reads it back
 * into a graph that prints the same bytes.  That holds for every graph that passes
 * ir_verify() and for most that do not (wrong types, attributes or initializers),
 * so a broken graph can be dumped, read back and looked at.  Three choices make
 * it so: names that are not plain identifiers are quoted with escapes, floats
 * print with 17 significant digits (enough to give back the same double) and
 * always look like floats, and every attribute and location is printed, none
 * left to a default.
 *
 * ORDER: the quoting rules here, the lexical rules in parse.c and the grammar in
 * docs/ir.md describe one format; keep them in step. */
#include "ir.h"

#include <string.h>

static int is_ident_start(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_ident_char(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

/* [A-Za-z_][A-Za-z0-9_.]* */
static int is_ident(const char *s)
{
    if (!is_ident_start((unsigned char)*s))
        return 0;
    while (*++s)
        if (!is_ident_char((unsigned char)*s))
            return 0;
    return 1;
}

/* [A-Za-z0-9_./+-]+, what a path usually looks like */
static int is_bare_file(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!is_ident_char((unsigned char)*s) && !strchr("/+-", *s))
            return 0;
    return 1;
}

/* A C-style string literal; every byte outside printable ASCII becomes \xHH, so
 * IR text is plain ASCII whatever the names hold. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* *s into buf from n on (size bytes in all), escaped as put_quoted escapes
 * unless raw, as far as it fits with room for "..." and a quote: the new
 * length, *s where it stopped. */
static size_t put_escaped(char *buf, size_t size, size_t n, const char **s, int raw)
{
    for (; **s && n + 8 < size; (*s)++) {
        unsigned char c = (unsigned char)**s;
        if (raw || (c >= 0x20 && c < 0x7f && c != '"' && c != '\\'))
            buf[n++] = (char)c;
        else if (c == '"' || c == '\\')
            n += (size_t)snprintf(buf + n, size - n, "\\%c", c);
        else if (c == '\n' || c == '\t')
            n += (size_t)snprintf(buf + n, size - n, "\\%c", c == '\n' ? 'n' : 't');
        else
            n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
    }
    return n;
}

/* A name as the printer writes it, bare or quoted, cut short for a message. */
const char *ir_name_str(char *buf, size_t size, const char *s)
{
    if (!s)
        return "<unnamed>";
    int bare = is_ident_start((unsigned char)*s);
    for (const char *q = s; *q && bare; q++)
        bare = is_ident_char((unsigned char)*q);
    size_t n = 0;
    if (!bare)
        buf[n++] = '"';
    n = put_escaped(buf, size, n, &s, bare);
    if (*s)
        n += (size_t)snprintf(buf + n, size - n, "...");
    else if (!bare)
        buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

const char *ir_escape_str(char *buf, size_t size, const char *s)
{
    size_t n = put_escaped(buf, size, 0, &s, 0);
    if (*s)
        n += (size_t)snprintf(buf + n, size - n, "...");
    buf[n] = '\0';
    return buf;
}

static void put_name(FILE *f, const char *s)
{
    if (is_ident(s))
        fputs(s, f);
    else
        put_quoted(f, s);
}

static void put_value(FILE *f, const ir_value *v)
{
    fputc('%', f);
    put_name(f, v->name);
}

static void put_type(FILE *f, const ir_type *t)
{
    char buf[16 + IR_MAX_RANK * 22];
    ir_type t2 = *t;
    if (t2.rank < 0 || t2.rank > IR_MAX_RANK) /* only a broken graph; never read past dims */
        t2.rank = 0;
    fputs(ir_type_str(&t2, buf, sizeof buf), f);
}

/* "%.17g" gives back the same double; ".0" keeps an integral value a float. */
static void put_float(FILE *f, double x)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", x);
    fputs(buf, f);
    if (!strpbrk(buf, ".e") && !strstr(buf, "inf") && !strstr(buf, "nan"))
        fputs(".0", f);
}

static void put_loc(FILE *f, ir_loc loc)
{
    if (!loc.file)
        return;
    fputs(" @", f);
    if (is_bare_file(loc.file))
        fputs(loc.file, f);
    else
        put_quoted(f, loc.file);
    fprintf(f, ":%d:%d", loc.line, loc.col);
}

static void put_init(FILE *f, ir_init in)
{
    switch (in.kind) {
    case IR_INIT_ZEROS: fputs("zeros", f); break;
    case IR_INIT_ONES:  fputs("ones", f); break;
    case IR_INIT_UNIFORM: fputs("uniform(", f); break;
    case IR_INIT_NORMAL:  fputs("normal(", f); break;
    case IR_INIT_DATA:    fputs("data", f); break;
    default: fputs("none", f); return;  /* a parameter without one: the verifier says so */
    }
    if (in.kind == IR_INIT_UNIFORM || in.kind == IR_INIT_NORMAL) {
        put_float(f, in.a);
        fputs(", ", f);
        put_float(f, in.b);
        fputc(')', f);
    }
    if (in.zero_row > 0)
        fprintf(f, " zero_row(%lld)", (long long)(in.zero_row - 1));
}

/* " shard(NAME: TYPE, axis = A, start = S)" for a slice of a whole tensor */
static void put_shard(FILE *f, const ir_shard *s)
{
    if (!s->of)
        return;
    fputs(" shard(", f);
    put_name(f, s->of);
    fputs(": ", f);
    put_type(f, &s->type);
    fprintf(f, ", axis = %d, start = %lld)", s->axis, (long long)s->start);
}

static void put_attr(FILE *f, const ir_attr *a)
{
    put_name(f, a->key);
    fputs(" = ", f);
    switch (a->kind) {
    case IR_ATTR_INT:
        fprintf(f, "%lld", (long long)a->i);
        break;
    case IR_ATTR_FLOAT:
        put_float(f, a->f);
        break;
    case IR_ATTR_INTS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++)
            fprintf(f, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
        fputc(']', f);
        break;
    }
}

static void put_node(FILE *f, const ir_node *n)
{
    fputs(n->group ? "    " : "  ", f);
    for (int i = 0; i < n->nout; i++) {
        fputs(i ? ", " : "", f);
        put_value(f, n->out[i]);
        fputs(": ", f);
        put_type(f, &n->out[i]->type);
    }
    fprintf(f, " = %s(", (unsigned)n->op < IR_NOPS ? ir_ops[n->op].name : "?");
    for (int i = 0; i < n->nin; i++) {
        fputs(i ? ", " : "", f);
        put_value(f, n->in[i]);
    }
    fputc(')', f);
    if (n->nattrs) {
        fputs(" {", f);
        for (int i = 0; i < n->nattrs; i++) {
            fputs(i ? ", " : "", f);
            put_attr(f, &n->attrs[i]);
        }
        fputc('}', f);
    }
    if (n->device)
        fprintf(f, " on %d", n->device);
    put_loc(f, n->loc);
    fputc('\n', f);
}

void ir_print(const ir_graph *g, FILE *f)
{
    fputs("# gnc IR\ngraph ", f);
    put_name(f, g->name);
    fputs(" {\n", f);
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        fputs("  input ", f);
        put_value(f, v);
        fputs(": ", f);
        put_type(f, &v->type);
        put_loc(f, v->loc);
        fputc('\n', f);
    }
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        fputs(v->kind == IR_VALUE_BUFFER ? "  buffer " : v->kind == IR_VALUE_STATE ? "  state "
                                                                             : "  param ", f);
        put_value(f, v);
        fputs(": ", f);
        put_type(f, &v->type);
        fputs(" = ", f);
        put_init(f, v->init);
        put_shard(f, &v->shard);
        if (v->source) {
            fputs(" from ", f);
            put_quoted(f, v->source);
        }
        put_loc(f, v->loc);
        fputc('\n', f);
    }
    ir_for_each_node(g, n) {
        /* a fused node: its members inside "fused { ... }" */
        if (n->group && (!n->prev || n->prev->group != n->group))
            fputs("  fused {\n", f);
        put_node(f, n);
        if (n->group && (!n->next || n->next->group != n->group))
            fputs("  }\n", f);
    }
    for (int i = 0; i < g->noutputs; i++) {
        fputs("  output ", f);
        put_name(f, g->outputs[i].name);
        fputs(" = ", f);
        put_value(f, g->outputs[i].value);
        put_loc(f, g->outputs[i].loc);
        fputc('\n', f);
    }
    if (g->loss) {
        fputs("  loss ", f);
        put_value(f, g->loss);
        fputc('\n', f);
    }
    for (int i = 0; i < g->nupdates; i++) {
        fputs("  update ", f);
        put_value(f, g->updates[i].target);
        fputs(" = ", f);
        put_value(f, g->updates[i].source);
        if (g->updates[i].device)
            fprintf(f, " on %d", g->updates[i].device);
        fputc('\n', f);
    }
    fputs("}\n", f);
}
