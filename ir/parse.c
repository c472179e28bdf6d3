/* The IR parser: reads IR text (docs/ir.md) back into a graph.
 *
 * IR text holds one statement per line, so the parser is a recursive descent over
 * the bytes of a line, with no token stream and no recursion deeper than one
 * statement.  Steps, for each line:
 *   1. skip blanks and comments;
 *   2. read the header (first line), the closing '}', or one statement, and make
 *      the values, node and attributes it declares;
 *   3. check that nothing but a comment follows on the line.
 * On an error it reports the error with its line and column, skips to the next
 * line and goes on, so one run reports every broken line.  A broken line still
 * defines the value names it got to declare, so their uses further down do not
 * each report an undefined value.  Any error makes ir_parse() return NULL.
 *
 * The input is untrusted: every read is bounded by the end of the text (which need
 * not end in NUL and may hold NULs), integers are range-checked, and names hold no
 * NUL.  Types and attributes are taken as written (an attribute that an op
 * gained after the text was written takes its default, ops.def);
 * ir_verify() judges them.
 *
 * ORDER: the lexical rules here, the quoting rules in print.c and the grammar in
 * docs/ir.md describe one format; keep them in step. */
#include "base.h"
#include "diag.h"
#include "ir.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RESULTS IR_MAX_RESULTS   /* results of one node, as ir_node_new allows */
#define MAX_FILES 64     /* distinct location files interned; more are copied */

typedef struct {
    diag *d;
    const char *file;            /* the text's name, as the diag keeps it */
    const char *p, *end;         /* cursor and end of the text */
    const char *line_start;
    int line;
    int failed;                  /* the current line has reported an error */
    int group;                   /* inside "fused {": its group id */
    ir_loc group_loc;            /* where it opened */
    ir_graph *g;
    char *buf;                   /* the last name or word read, NUL-terminated */
    size_t cap;
    int64_t *ints;               /* scratch for integer lists */
    int nints, cap_ints;
    ir_value **in;               /* scratch for operands */
    int cap_in;
    const char *files[MAX_FILES];
    int nfiles;
} parser;

/* ---- characters ---- */

static int is_ident_start(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int is_ident_char(int c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

static int is_file_char(int c) { return is_ident_char(c) || c == '/' || c == '+' || c == '-'; }

static int at_eol(const parser *P) { return P->p >= P->end || *P->p == '\n'; }

static int peek(const parser *P) { return P->p < P->end ? (unsigned char)*P->p : -1; }

static void skip_space(parser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\r'))
        P->p++;
}

/* ---- messages ---- */

static ir_loc loc_at(const parser *P, const char *at)
{
    size_t col = (size_t)(at - P->line_start) + 1;
    return (ir_loc){P->file, P->line, col > INT_MAX ? INT_MAX : (int)col};
}

DIAG_PRINTF(3, 4)
static int error_at(parser *P, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(P->d, DIAG_ERROR, loc_at(P, at), fmt, ap);
    va_end(ap);
    P->failed = 1;
    return 0;
}

/* s[0..n) for a message, cut short: a word in the text can be any length. */
static const char *clip(char *buf, size_t size, const char *s, size_t n)
{
    if (n < size) {
        memcpy(buf, s, n);
        buf[n] = '\0';
    } else {
        snprintf(buf, size, "%.*s...", (int)(size - 4), s);
    }
    return buf;
}


/* What sits at `at`, for "unexpected ..." messages. */
static const char *describe(const parser *P, const char *at, char *buf, size_t size)
{
    if (at >= P->end || *at == '\n')
        return "end of line";
    unsigned char c = (unsigned char)*at;
    if (is_ident_char(c)) {
        const char *e = at;
        while (e < P->end && is_ident_char((unsigned char)*e))
            e++;
        char w[48];
        snprintf(buf, size, "'%s'", clip(w, sizeof w, at, (size_t)(e - at)));
    } else if (c >= 0x20 && c < 0x7f) {
        snprintf(buf, size, "'%c'", c);
    } else {
        snprintf(buf, size, "byte 0x%02x", c);
    }
    return buf;
}

/* ---- lexical pieces; each skips the blanks before it ---- */

static int accept(parser *P, char c)
{
    skip_space(P);
    if (peek(P) != (unsigned char)c)
        return 0;
    P->p++;
    return 1;
}

static int expect(parser *P, char c, const char *msg)
{
    return accept(P, c) || error_at(P, P->p, "%s", msg);
}

static char *scratch(parser *P, size_t n)
{
    if (n + 1 > P->cap) {
        P->cap = n + 64;
        P->buf = base_xrealloc(P->buf, P->cap);
    }
    return P->buf;
}

/* [A-Za-z_][A-Za-z0-9_.]* into P->buf; 0, with nothing reported, if none is here. */
static int word(parser *P)
{
    skip_space(P);
    const char *s = P->p;
    if (P->p >= P->end || !is_ident_start((unsigned char)*P->p))
        return 0;
    while (P->p < P->end && is_ident_char((unsigned char)*P->p))
        P->p++;
    size_t n = (size_t)(P->p - s);
    memcpy(scratch(P, n), s, n);
    P->buf[n] = '\0';
    return 1;
}

static int hex_digit(int c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal at the cursor, unescaped into P->buf.  Strings end on their
 * line; \\ \" \n \t \xHH are the escapes, and no NUL may come out of them. */
static int string(parser *P)
{
    const char *open = P->p, *q = open + 1;
    while (q < P->end && *q != '"' && *q != '\n')
        q += *q == '\\' && q + 1 < P->end && q[1] != '\n' ? 2 : 1;
    if (q >= P->end || *q != '"')
        return error_at(P, open, "unterminated string");
    char *out = scratch(P, (size_t)(q - open));
    size_t n = 0;
    for (const char *s = open + 1; s < q; s++) {
        int c = (unsigned char)*s;
        if (c == '\\') {
            const char *esc = s++;
            switch (*s) {
            case '\\': case '"': c = *s; break;
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'x': {
                int hi = s + 1 < q ? hex_digit((unsigned char)s[1]) : -1;
                int lo = s + 2 < q ? hex_digit((unsigned char)s[2]) : -1;
                if (hi < 0 || lo < 0)
                    return error_at(P, esc, "\\x needs two hex digits");
                c = hi * 16 + lo;
                s += 2;
                break;
            }
            default:
                if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f)
                    return error_at(P, esc, "unknown escape '\\%c' in a string", *s);
                return error_at(P, esc, "unknown escape in a string");
            }
            if (c == 0)
                return error_at(P, esc, "a string cannot hold a NUL byte");
        } else if (c == 0) {
            return error_at(P, s, "a string cannot hold a NUL byte");
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    P->p = q + 1;
    return 1;
}

/* A bare word or a string literal, into P->buf. */
static int name(parser *P, const char *expected)
{
    skip_space(P);
    if (peek(P) == '"')
        return string(P);
    return word(P) || error_at(P, P->p, "%s", expected);
}

/* %name or %"name", into P->buf; *at gets where it starts. */
static int value_name(parser *P, const char **at, const char *expected)
{
    skip_space(P);
    *at = P->p;
    if (peek(P) != '%')
        return error_at(P, P->p, "%s", expected);
    P->p++;
    if (peek(P) == '"')
        return string(P);
    if (!is_ident_start(peek(P)))
        return error_at(P, *at, "expected a name after '%%'");
    return word(P);
}

/* A use of a value defined on an earlier line. */
static ir_value *value_use(parser *P, const char *expected)
{
    const char *at;
    if (!value_name(P, &at, expected))
        return NULL;
    ir_value *v = ir_find_value(P->g, P->buf);
    if (!v) {
        char nb[96];
        error_at(P, at, "use of undefined value %%%s", ir_name_str(nb, sizeof nb, P->buf));
    }
    return v;
}

typedef struct {
    int is_float;
    int64_t i;
    double f;
} number;

/* A number: an integer (which must fit in 64 bits) when it has no '.', exponent,
 * inf or nan, else a float.  Only decimal forms: %.17g writes nothing else. */
static int parse_number(parser *P, number *num, const char *expected)
{
    skip_space(P);
    const char *s = P->p, *q = s;
    if (q < P->end && (*q == '-' || *q == '+'))
        q++;
    const char *body = q, *e = q;
    while (e < P->end && (is_ident_char((unsigned char)*e) ||
                          (e > body && (e[-1] == 'e' || e[-1] == 'E') &&
                           (*e == '+' || *e == '-'))))
        e++;
    if (e == body)
        return error_at(P, s, "%s", expected);
    size_t n = (size_t)(e - body);
    int neg = *s == '-';
    char shown[48];
    P->p = e;
    if ((n == 3 && memcmp(body, "inf", 3) == 0) || (n == 3 && memcmp(body, "nan", 3) == 0)) {
        *num = (number){1, 0, copysign(*body == 'i' ? INFINITY : NAN, neg ? -1.0 : 1.0)};
        return 1;
    }
    if (!is_digit((unsigned char)*body) && *body != '.')
        return error_at(P, s, "%s", expected); /* a word, not a number */
    /* digits [. digits] [e [+-] digits], at least one mantissa digit */
    const char *r = body;
    int digits = 0, is_float = 0;
    while (r < e && is_digit((unsigned char)*r))
        r++, digits++;
    if (r < e && *r == '.') {
        is_float = 1;
        for (r++; r < e && is_digit((unsigned char)*r); r++)
            digits++;
    }
    if (digits && r < e && (*r == 'e' || *r == 'E')) {
        is_float = 1;
        r++;
        if (r < e && (*r == '+' || *r == '-'))
            r++;
        const char *exp = r;
        while (r < e && is_digit((unsigned char)*r))
            r++;
        if (r == exp)
            digits = 0;
    }
    if (!digits || r != e)
        return error_at(P, s, "malformed number '%s'", clip(shown, sizeof shown, s, (size_t)(e - s)));
    if (!is_float) {
        uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (r = body; r < e; r++) {
            unsigned d = (unsigned)(*r - '0');
            if (v > (limit - d) / 10)
                return error_at(P, s, "integer %s does not fit in 64 bits",
                                clip(shown, sizeof shown, s, (size_t)(e - s)));
            v = v * 10 + d;
        }
        /* -2^63 has no positive counterpart: negate in unsigned arithmetic */
        *num = (number){0, neg ? (int64_t)(0 - v) : (int64_t)v, 0};
        return 1;
    }
    char *text = scratch(P, (size_t)(e - s));
    memcpy(text, s, (size_t)(e - s));
    text[e - s] = '\0';
    errno = 0;
    double f = strtod(text, NULL);
    if (errno == ERANGE && isinf(f))
        return error_at(P, s, "number %s is out of range",
                        clip(shown, sizeof shown, s, (size_t)(e - s)));
    *num = (number){1, 0, f};
    return 1;
}

static int parse_int(parser *P, int64_t *v, const char *expected)
{
    skip_space(P);
    const char *at = P->p;
    number num;
    if (!parse_number(P, &num, expected))
        return 0;
    if (num.is_float)
        return error_at(P, at, "%s", expected);
    *v = num.i;
    return 1;
}

static int parse_float(parser *P, double *v)
{
    number num;
    if (!parse_number(P, &num, "expected a number"))
        return 0;
    *v = num.is_float ? num.f : (double)num.i;
    return 1;
}

/* ---- grammar pieces ---- */

/* "unknown KIND 'word'", with a did-you-mean when one is close. */
static int unknown(parser *P, const char *at, const char *kind, const char *const *cands,
                   int n)
{
    char shown[48];
    const char *s = diag_suggest(P->buf, cands, n);
    clip(shown, sizeof shown, P->buf, strlen(P->buf));
    if (s)
        return error_at(P, at, "unknown %s '%s'; did you mean '%s'?", kind, shown, s);
    return error_at(P, at, "unknown %s '%s'", kind, shown);
}

/* dtype[d0, d1, ...] */
static int parse_type(parser *P, ir_type *t)
{
    skip_space(P);
    const char *at = P->p;
    if (!word(P))
        return error_at(P, at, "expected a type such as f32[2, 3]");
    int dt = ir_dtype_lookup(P->buf);
    if (dt < 0) {
        const char *names[IR_NDTYPES];
        for (int i = 0; i < IR_NDTYPES; i++)
            names[i] = ir_dtype_name((ir_dtype)i);
        return unknown(P, at, "dtype", names, IR_NDTYPES);
    }
    *t = (ir_type){(ir_dtype)dt, 0, {0}};
    if (!expect(P, '[', "expected '[' after the dtype"))
        return 0;
    if (accept(P, ']'))
        return 1;
    do {
        skip_space(P);
        at = P->p;
        int64_t d;
        if (!parse_int(P, &d, "expected a dimension"))
            return 0;
        if (d < 1)
            return error_at(P, at, "dimensions must be positive, got %lld", (long long)d);
        if (t->rank == IR_MAX_RANK)
            return error_at(P, at, "a type has at most %d dimensions", IR_MAX_RANK);
        t->dims[t->rank++] = d;
    } while (accept(P, ','));
    return expect(P, ']', "expected ']' after dimensions");
}

/* The same file name in one pointer, as the frontend gives them. */
static const char *intern_file(parser *P, const char *name)
{
    for (int i = 0; i < P->nfiles; i++)
        if (strcmp(P->files[i], name) == 0)
            return P->files[i];
    const char *s = ir_strdup(P->g, name);
    if (P->nfiles < MAX_FILES)
        P->files[P->nfiles++] = s;
    return s;
}

static int parse_loc_number(parser *P, int *v, const char *expected)
{
    skip_space(P);
    const char *at = P->p;
    int64_t x;
    if (!parse_int(P, &x, expected))
        return 0;
    if (x < 0 || x > INT_MAX)
        return error_at(P, at, "%s", expected);
    *v = (int)x;
    return 1;
}

/* An optional "on DEVICE" (a partitioned program's node or update); device
 * stays as it is without one. */
static int parse_on(parser *P, int *device)
{
    skip_space(P);
    if (!(P->end - P->p > 3 && strncmp(P->p, "on", 2) == 0 && (P->p[2] == ' ' || P->p[2] == '\t')))
        return 1;
    P->p += 2;
    int64_t dev;
    skip_space(P);
    const char *at = P->p;
    if (!parse_int(P, &dev, "expected a device number after 'on'"))
        return 0;
    if (dev < 0 || dev >= IR_MAX_DEVICES)
        return error_at(P, at, "device %lld is out of range [0, %d)", (long long)dev, IR_MAX_DEVICES);
    *device = (int)dev;
    return 1;
}

/* An optional @FILE:LINE:COL, FILE bare or quoted. */
static int parse_loc(parser *P, ir_loc *loc)
{
    *loc = (ir_loc){0};
    if (!accept(P, '@'))
        return 1;
    skip_space(P);
    if (peek(P) == '"') {
        if (!string(P))
            return 0;
    } else {
        const char *s = P->p;
        while (P->p < P->end && is_file_char((unsigned char)*P->p))
            P->p++;
        if (P->p == s)
            return error_at(P, s, "expected a file name after '@'");
        size_t n = (size_t)(P->p - s);
        memcpy(scratch(P, n), s, n);
        P->buf[n] = '\0';
    }
    const char *file = intern_file(P, P->buf);
    if (!expect(P, ':', "expected ':' and a line number after the file name") ||
        !parse_loc_number(P, &loc->line, "expected a line number") ||
        !expect(P, ':', "expected ':' and a column number after the line number") ||
        !parse_loc_number(P, &loc->col, "expected a column number"))
        return 0;
    loc->file = file;
    return 1;
}

/* zeros | ones | uniform(a, b) | normal(mean, std) | data | none */
static int parse_init(parser *P, ir_init *in)
{
    static const char *const names[] = {"zeros", "ones", "uniform", "normal", "data", "none"};
    static const ir_init_kind kinds[] = {IR_INIT_ZEROS, IR_INIT_ONES, IR_INIT_UNIFORM,
                                         IR_INIT_NORMAL, IR_INIT_DATA, IR_INIT_NONE};
    skip_space(P);
    const char *at = P->p;
    if (!word(P))
        return error_at(P, at, "expected an initializer: zeros, ones, uniform(a, b), "
                        "normal(mean, std) or data");
    int k = 0;
    while (k < 6 && strcmp(P->buf, names[k]) != 0)
        k++;
    if (k == 6)
        return unknown(P, at, "initializer", names, 5);
    *in = (ir_init){kinds[k], 0, 0, 0, NULL};
    char open[40];
    snprintf(open, sizeof open, "expected '(' after '%s'", names[k]);
    if ((kinds[k] == IR_INIT_UNIFORM || kinds[k] == IR_INIT_NORMAL) &&
        !(expect(P, '(', open) && parse_float(P, &in->a) &&
          expect(P, ',', "expected ',' between the initializer's arguments") &&
          parse_float(P, &in->b) &&
          expect(P, ')', "expected ')' after the initializer's arguments")))
        return 0;
    /* " zero_row(R)": row R left at 0 (the verifier checks R) */
    skip_space(P);
    if (!(P->end - P->p > 8 && strncmp(P->p, "zero_row", 8) == 0 && !is_ident_char(P->p[8])))
        return 1;
    P->p += 8;
    int64_t row;
    if (!expect(P, '(', "expected '(' after 'zero_row'"))
        return 0;
    skip_space(P);
    at = P->p;
    if (!parse_int(P, &row, "expected the zero row, an integer") ||
        !expect(P, ')', "expected ')' after the zero row"))
        return 0;
    if (row < 0 || row == INT64_MAX)
        return error_at(P, at, "zero_row needs a row from 0, got %lld", (long long)row);
    in->zero_row = row + 1;
    return 1;
}

/* An optional "shard(NAME: TYPE, axis = A, start = S)" after a parameter's
 * initializer; *of stays NULL without one. */
static int parse_shard(parser *P, ir_shard *sh)
{
    skip_space(P);
    if (!(P->end - P->p > 5 && strncmp(P->p, "shard", 5) == 0 && !is_ident_char(P->p[5])))
        return 1;
    P->p += 5;
    if (!expect(P, '(', "expected '(' after 'shard'") ||
        !name(P, "expected the name of the whole tensor after 'shard('"))
        return 0;
    sh->of = ir_strdup(P->g, P->buf);
    static const char *const keys[2] = {"axis", "start"};
    int64_t v[2];
    if (!expect(P, ':', "expected ':' and the whole tensor's type after its name") ||
        !parse_type(P, &sh->type))
        return 0;
    for (int k = 0; k < 2; k++) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected ', %s = ' in the shard", keys[k]);
        skip_space(P);
        const char *at = P->p;
        if (!accept(P, ',') || !word(P) || strcmp(P->buf, keys[k]) != 0 || !accept(P, '='))
            return error_at(P, at, "%s", msg);
        skip_space(P);
        at = P->p;
        if (!parse_int(P, &v[k], k ? "expected the shard's start" : "expected the shard's axis"))
            return 0;
        if (v[k] < 0 || (k == 0 && v[k] >= IR_MAX_RANK))
            return error_at(P, at, "shard %s %lld is out of range", keys[k], (long long)v[k]);
    }
    sh->axis = (int)v[0];
    sh->start = v[1];
    return expect(P, ')', "expected ')' after the shard");
}

/* An optional 'from "NAME"' after a parameter's shard: the name it had in the
 * model it came from (ir_value.source); *source stays NULL without one. */
static int parse_source(parser *P, const char **source)
{
    skip_space(P);
    if (!(P->end - P->p > 4 && strncmp(P->p, "from", 4) == 0 && !is_ident_char(P->p[4])))
        return 1;
    P->p += 4;
    skip_space(P);
    if (peek(P) != '"')
        return error_at(P, P->p, "expected the quoted name after 'from'");
    if (!string(P))
        return 0;
    *source = ir_strdup(P->g, P->buf);
    return 1;
}

/* A name read on a line that then failed still names a value, so that its uses
 * below do not each report it undefined (the graph is thrown away anyway). */
static void placeholder(parser *P, const char *name)
{
    if (!ir_find_value(P->g, name))
        ir_value_new(P->g, name, (ir_loc){0});
}

/* %x: TYPE as a new value's name and type; the name goes to the graph's arena. */
static int declare(parser *P, const char **name, ir_type *t)
{
    const char *at;
    *name = NULL;
    if (!value_name(P, &at, "expected a value name (%name)"))
        return 0;
    if (ir_find_value(P->g, P->buf)) {
        char nb[96];
        return error_at(P, at, "redefinition of %%%s", ir_name_str(nb, sizeof nb, P->buf));
    }
    *name = ir_strdup(P->g, P->buf);
    return expect(P, ':', "expected ':' after the value name") && parse_type(P, t);
}

/* input %x: TYPE @LOC  |  param %w: TYPE = INIT [shard(...)] [from "NAME"] @LOC  |
 * buffer ... */
static void parse_value_stmt(parser *P, ir_value_kind kind)
{
    const char *name, *source = NULL;
    ir_type t;
    ir_init in = {IR_INIT_NONE, 0, 0, 0, NULL};
    ir_shard sh = {0};
    ir_loc loc;
    int ok = declare(P, &name, &t);
    if (ok && kind != IR_VALUE_INPUT)
        ok = expect(P, '=', "expected '=' and an initializer after the type") &&
             parse_init(P, &in) && parse_shard(P, &sh) && parse_source(P, &source);
    if (ok && parse_loc(P, &loc)) {
        if (kind == IR_VALUE_INPUT) {
            ir_add_input(P->g, name, t, loc);
        } else {
            ir_value *v = ir_add_param(P->g, kind, name, t, in, loc);
            v->shard = sh;
            v->source = source;
        }
    } else if (name) {
        placeholder(P, name);
    }
}

/* One attribute: KEY = INT | FLOAT | [INT, ...] */
static int parse_attr(parser *P, ir_node *n)
{
    skip_space(P);
    const char *at = P->p;
    if (!name(P, "expected an attribute name"))
        return 0;
    if (ir_get_attr(n, P->buf)) {
        char nb[96];
        return error_at(P, at, "duplicate attribute %s", ir_name_str(nb, sizeof nb, P->buf));
    }
    const char *key = ir_strdup(P->g, P->buf);
    if (!expect(P, '=', "expected '=' after the attribute name"))
        return 0;
    if (accept(P, '[')) {
        P->nints = 0;
        if (!accept(P, ']')) {
            do {
                int64_t v;
                if (!parse_int(P, &v, "expected an integer in the list"))
                    return 0;
                if (P->nints == P->cap_ints) {
                    P->cap_ints = P->cap_ints ? 2 * P->cap_ints : 16;
                    P->ints = base_xrealloc(P->ints, (size_t)P->cap_ints * sizeof *P->ints);
                }
                P->ints[P->nints++] = v;
            } while (accept(P, ','));
            if (!expect(P, ']', "expected ']' after the list"))
                return 0;
        }
        ir_set_ints(P->g, n, key, P->nints, P->ints);
        return 1;
    }
    number num;
    if (!parse_number(P, &num, "expected an attribute value: a number or a list of integers"))
        return 0;
    if (num.is_float)
        ir_set_float(P->g, n, key, num.f);
    else
        ir_set_int(P->g, n, key, num.i);
    return 1;
}

/* %a: TYPE, ... = op(%x, ...) {key = value, ...} @LOC */
static void parse_node(parser *P)
{
    const char *names[MAX_RESULTS];
    ir_type types[MAX_RESULTS];
    int nout = 0, nin = 0;
    ir_node *n = NULL;
    for (;;) {
        skip_space(P);
        const char *at = P->p;
        if (nout == MAX_RESULTS) {
            error_at(P, at, "a node has at most %d results", MAX_RESULTS);
            goto fail;
        }
        int ok = declare(P, &names[nout], &types[nout]);
        for (int i = 0; i < nout && names[nout]; i++)
            if (strcmp(names[i], names[nout]) == 0) {
                char nb[96];
                error_at(P, at, "redefinition of %%%s", ir_name_str(nb, sizeof nb, names[i]));
                names[nout] = NULL;
                ok = 0;
            }
        if (names[nout])
            nout++;
        if (!ok)
            goto fail;
        if (!accept(P, ','))
            break;
    }
    if (!expect(P, '=', "expected '=' after the result type"))
        goto fail;
    skip_space(P);
    const char *at = P->p;
    if (!word(P)) {
        error_at(P, at, "expected an op name after '='");
        goto fail;
    }
    int op = ir_op_lookup(P->buf);
    if (op < 0) {
        const char *ops[IR_NOPS];
        for (int i = 0; i < IR_NOPS; i++)
            ops[i] = ir_ops[i].name;
        unknown(P, at, "op", ops, IR_NOPS);
        goto fail;
    }
    if (!expect(P, '(', "expected '(' after the op name"))
        goto fail;
    if (!accept(P, ')')) {
        do {
            ir_value *v = value_use(P, "expected an operand (%name)");
            if (!v)
                goto fail;
            if (nin == P->cap_in) {
                P->cap_in = P->cap_in ? 2 * P->cap_in : 16;
                P->in = base_xrealloc(P->in, (size_t)P->cap_in * sizeof *P->in);
            }
            P->in[nin++] = v;
        } while (accept(P, ','));
        if (!expect(P, ')', "expected ')' after the operands"))
            goto fail;
    }

    /* The node exists from here on (its attributes are set on it as they are
     * read), but joins the list only once the whole line has parsed. */
    ir_value *out[MAX_RESULTS];
    for (int i = 0; i < nout; i++) {
        out[i] = ir_value_new(P->g, names[i], (ir_loc){0});
        out[i]->type = types[i];
    }
    n = ir_node_make(P->g, (ir_op)op, nin, P->in, nout, out, (ir_loc){0});
    if (accept(P, '{') && !accept(P, '}')) {
        do
            if (!parse_attr(P, n))
                return;
        while (accept(P, ','));
        if (!expect(P, '}', "expected '}' after the attributes"))
            return;
    }
    ir_set_attr_defaults(P->g, n); /* those added to the op since the text was written */
    if (!parse_on(P, &n->device))
        return;
    ir_loc loc;
    if (!parse_loc(P, &loc))
        return;
    n->loc = loc;
    for (int i = 0; i < nout; i++)
        out[i]->loc = loc;
    n->group = P->group;
    ir_append(P->g, n);
    return;
fail:
    for (int i = 0; i < nout; i++)
        placeholder(P, names[i]);
}

/* output NAME = %v @LOC */
static void parse_output(parser *P)
{
    if (!name(P, "expected an output name after 'output'"))
        return;
    const char *oname = ir_strdup(P->g, P->buf);
    ir_value *v;
    ir_loc loc;
    if (expect(P, '=', "expected '=' after the output name") &&
        (v = value_use(P, "expected a value name (%name)")) && parse_loc(P, &loc))
        ir_add_output(P->g, oname, v, loc);
}

/* loss %v */
static void parse_loss(parser *P, const char *at)
{
    ir_value *v = value_use(P, "expected a value name (%name)");
    if (!v)
        return;
    if (P->g->loss)
        error_at(P, at, "a graph has at most one loss");
    P->g->loss = v;
}

/* fused {   (its member nodes follow, one per line, up to a line "}") */
static void parse_fused(parser *P, const char *at)
{
    if (P->group) {
        error_at(P, at, "fused nodes do not nest");
        return;
    }
    skip_space(P);
    if (!expect(P, '{', "expected '{' after 'fused'"))
        return;
    P->group = ++P->g->ngroups;
    P->group_loc = loc_at(P, at);
}

/* update %target = %source [on DEVICE] */
static void parse_update(parser *P)
{
    ir_value *t = value_use(P, "expected a value name (%name)"), *v;
    int device = 0;
    if (t && expect(P, '=', "expected '=' after the updated value") &&
        (v = value_use(P, "expected a value name (%name)")) && parse_on(P, &device))
        ir_add_update_on(P->g, t, v, device);
}

static void parse_statement(parser *P)
{
    const char *at = P->p;
    if (peek(P) == '%') {
        parse_node(P);
        return;
    }
    char what[64];
    if (!word(P)) {
        error_at(P, at, "expected a statement, found %s", describe(P, at, what, sizeof what));
        return;
    }
    if (P->group && strcmp(P->buf, "fused") != 0) {
        error_at(P, at, "only nodes go inside a fused node; expected a node or '}'");
        return;
    }
    if (strcmp(P->buf, "input") == 0)
        parse_value_stmt(P, IR_VALUE_INPUT);
    else if (strcmp(P->buf, "param") == 0)
        parse_value_stmt(P, IR_VALUE_PARAM);
    else if (strcmp(P->buf, "buffer") == 0)
        parse_value_stmt(P, IR_VALUE_BUFFER);
    else if (strcmp(P->buf, "state") == 0)
        parse_value_stmt(P, IR_VALUE_STATE);
    else if (strcmp(P->buf, "update") == 0)
        parse_update(P);
    else if (strcmp(P->buf, "fused") == 0)
        parse_fused(P, at);
    else if (strcmp(P->buf, "output") == 0)
        parse_output(P);
    else if (strcmp(P->buf, "loss") == 0)
        parse_loss(P, at);
    else
        error_at(P, at, "unknown statement %s; expected input, param, buffer, state, output, "
                 "loss, update, fused or a node (%%name: TYPE = op(...))", describe(P, at, what, sizeof what));
}

/* graph NAME { */
static void parse_header(parser *P)
{
    const char *at = P->p;
    if (!word(P) || strcmp(P->buf, "graph") != 0) {
        error_at(P, at, "expected 'graph NAME {'");
        return;
    }
    if (name(P, "expected the graph's name after 'graph'")) {
        P->g->name = ir_strdup(P->g, P->buf);
        expect(P, '{', "expected '{' after the graph's name");
    }
}

/* After a statement only blanks and a comment may follow on its line. */
static void end_of_line(parser *P)
{
    skip_space(P);
    if (!at_eol(P) && *P->p != '#') {
        char what[64];
        error_at(P, P->p, "unexpected %s at end of line", describe(P, P->p, what, sizeof what));
    }
}

ir_graph *ir_parse(const char *file, const char *text, size_t len, diag *d)
{
    if (!text) { /* memcpy and friends want a pointer even for no bytes */
        text = "";
        len = 0;
    }
    parser P = {.d = d, .line = 1};
    P.file = diag_add_source(d, file ? file : "<ir>", text, len);
    P.p = P.line_start = text;
    P.end = text + len;
    P.g = ir_graph_new("model");
    int errors0 = d->nerrors;
    enum { HEADER, BODY, AFTER } state = HEADER;

    while (P.p < P.end) {
        P.failed = 0;
        skip_space(&P);
        if (!at_eol(&P) && *P.p != '#') {
            if (state == AFTER) {
                error_at(&P, P.p, "unexpected text after the end of the graph");
                break;
            }
            if (state == HEADER) {
                parse_header(&P);
                state = BODY;
            } else if (*P.p == '}' && P.group) {
                P.p++;              /* the end of a fused node */
                P.group = 0;
            } else if (*P.p == '}') {
                P.p++;
                state = AFTER;
            } else {
                parse_statement(&P);
            }
            if (!P.failed)
                end_of_line(&P);
        }
        const char *nl = memchr(P.p, '\n', (size_t)(P.end - P.p));
        if (!nl)
            break;
        P.p = P.line_start = nl + 1;
        if (P.line < INT_MAX)
            P.line++;
    }
    if (P.group)
        diag_error(d, P.group_loc, "this fused node has no closing '}'");
    if (state == HEADER)
        error_at(&P, P.end, "expected 'graph NAME {' before the end of the file");
    else if (state == BODY)
        error_at(&P, P.end, "missing '}' at end of file");

    base_free(P.buf);
    base_free(P.ints);
    base_free(P.in);
    if (d->nerrors > errors0) {
        ir_graph_free(P.g);
        return NULL;
    }
    return P.g;
}
