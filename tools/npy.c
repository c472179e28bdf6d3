/* NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian, C order):
 * the interchange format of `gnc run --input/-o`, readable by numpy.load and
 * torch.
 *
 * A file, as numpy/lib/format.py specifies it: the magic "\x93NUMPY", the
 * major and minor version (1.0, 2.0 or 3.0), HEADER_LEN (2 bytes little-endian
 * in 1.0, 4 in 2.0 and 3.0), then HEADER_LEN bytes of header: a Python literal
 * dict, padded with spaces and ended by '\n' so that the data starts at an
 * aligned offset, then the data, element count times element size bytes.
 *
 * Reading trusts nothing, and reads what numpy's reader (ast.literal_eval) would,
 * refusing what it would refuse and more where the spec is stricter:
 *  1. the header is a dict literal whose keys are exactly 'descr',
 *     'fortran_order' and 'shape', each once (numpy keeps the last of a repeated
 *     key; a second one here is an error, as is any other key).  Tokens are read
 *     as Python reads them: a key is a string literal in key position, never text
 *     found inside another string; strings take either quote, escapes, adjacent
 *     literals joined, a u or r prefix; whitespace (space, tab, form feed, new
 *     lines, a backslash before a new line) goes wherever Python allows it; a
 *     trailing comma where Python allows one.  Comments, triple-quoted strings,
 *     bytes and f-strings are refused (numpy writes none);
 *  2. 'descr' is the dtype string numpy writes for the wanted dtype ('<f4',
 *     '<i4', '<i8', '|u1'); 'fortran_order' is False; 'shape' is a tuple of
 *     non-negative Python int literals ((3,) for one dimension, () for a
 *     scalar; Python 2's 3L in versions 1.0 and 2.0), at most IR_MAX_RANK of
 *     them, their product at most IR_MAX_NUMEL;
 *  3. after the dict's '}' come spaces alone and a final '\n', and the data
 *     starts at a multiple of 16 bytes: the spec asks 64, which numpy has
 *     written since 1.14; older numpy aligned to 16, and so do other writers;
 *  4. the data is exactly as long as the header says: nothing missing, nothing
 *     after it.
 * Every refusal names the file and what is wrong. */
#include "base.h"
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_MAX 10000   /* numpy.load's max_header_size */
#define STR_MAX 64         /* the longest string kept; longer ones match no name */

static const char *descr_of(ir_dtype t)
{
    switch (t) {
    case IR_I32: return "<i4";
    case IR_I64: return "<i8";
    case IR_U8: return "|u1";
    default: return "<f4";   /* every float dtype is stored as float32 */
    }
}

/* The header being read: the text p .. end, from start; the message for
 * the file at path. */
typedef struct {
    const char *p, *start, *end;
    int version;
    const char *path;
    char *err;
    size_t errlen;
} reader;

/* A decoded string literal: its first STR_MAX bytes and its whole length. */
typedef struct {
    char s[STR_MAX];
    size_t n;
} pystr;

/* "PATH: malformed .npy header: WHAT (byte N of the header)"; returns -1. */
static int bad(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(reader *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return base_fail(r->err, r->errlen, "%s: malformed .npy header: %s (byte %ld of the header)",
                     r->path, what, (long)(r->p - r->start));
}

/* s as it may be printed: what is not printable ASCII as \xHH, "..." when cut */
static const char *printable(const pystr *s, char *buf, size_t len)
{
    size_t used = 0, keep = s->n < STR_MAX ? s->n : STR_MAX;
    for (size_t i = 0; i < keep && used + 5 < len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        used += (size_t)snprintf(buf + used, len - used, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x",
                                 c);
    }
    snprintf(buf + used, len - used, "%s", s->n > keep ? "..." : "");
    return buf;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           (unsigned char)c >= 0x80;
}

/* Skips what Python skips between tokens inside brackets. */
static void skip_space(reader *r)
{
    for (;;) {
        if (r->p < r->end && *r->p && strchr(" \t\f\r\n", *r->p))
            r->p++;
        else if (r->end - r->p >= 2 && r->p[0] == '\\' && r->p[1] == '\n')
            r->p += 2;
        else if (r->end - r->p >= 3 && r->p[0] == '\\' && r->p[1] == '\r' && r->p[2] == '\n')
            r->p += 3;
        else
            return;
    }
}

/* Is the next token c?  Reads it if so. */
static int take(reader *r, char c)
{
    skip_space(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 1;
    }
    return 0;
}

static void str_byte(pystr *s, unsigned char c)
{
    if (s->n < STR_MAX)
        s->s[s->n] = (char)c;
    s->n++;
}

/* Code point c, as UTF-8. */
static void str_put(pystr *s, unsigned long c)
{
    if (c < 0x80) {
        str_byte(s, (unsigned char)c);
        return;
    }
    int n = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    str_byte(s, (unsigned char)((0xf00u >> n) | c >> (6 * (n - 1))));
    for (int i = n - 2; i >= 0; i--)
        str_byte(s, (unsigned char)(0x80 | (c >> (6 * i) & 0x3f)));
}

static int digit_value(char c, int base)
{
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10
            : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
    return v < base ? v : -1;
}

/* The body of one string literal, r->p at its opening quote, appended to s. */
static int read_literal(reader *r, pystr *s, int raw)
{
    static const char simple[] = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
    char q = *r->p;
    if (r->end - r->p >= 3 && r->p[1] == q && r->p[2] == q)
        return bad(r, "a triple-quoted string");
    for (r->p++;; r->p++) {
        if (r->p == r->end || *r->p == '\n' || *r->p == '\r')
            return bad(r, "a string not closed on its line");
        char c = *r->p;
        if (c == q)
            break;
        if (c != '\\') {
            str_byte(s, (unsigned char)c);
            continue;
        }
        if (r->end - r->p < 2 || r->p[1] == '\r' || (raw && r->p[1] == '\n'))
            return bad(r, "a string not closed on its line");
        char e = *++r->p;
        const char *k = NULL;
        for (int i = 0; !raw && simple[i]; i += 2)
            if (simple[i] == e)
                k = simple + i + 1;
        if (k) {
            str_byte(s, (unsigned char)*k);
        } else if (!raw && e == '\n') {
            /* a backslash and a new line: nothing */
        } else if (!raw && digit_value(e, 8) >= 0) {
            unsigned long v = (unsigned long)digit_value(e, 8);
            for (int i = 1; i < 3 && r->end - r->p >= 2 && digit_value(r->p[1], 8) >= 0; i++)
                v = v * 8 + (unsigned long)digit_value(*++r->p, 8);
            str_put(s, v);
        } else if (!raw && (e == 'x' || e == 'u' || e == 'U')) {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned long v = 0;
            for (int i = 0; i < digits; i++) {
                if (r->end - r->p < 2 || digit_value(r->p[1], 16) < 0)
                    return bad(r, "a \\%c escape without %d hex digits", e, digits);
                v = v * 16 + (unsigned long)digit_value(*++r->p, 16);
            }
            if (v > 0x10ffff)
                return bad(r, "a \\U escape beyond Unicode");
            str_put(s, v);
        } else if (!raw && e == 'N') {
            return bad(r, "a \\N{...} escape");
        } else { /* an unknown escape, or any in a raw string, is kept as written */
            str_byte(s, '\\');
            str_byte(s, (unsigned char)e);
        }
    }
    r->p++;
    return 0;
}

/* A string: one literal, or several side by side, joined as Python joins them.
 * 1 when read into s, 0 when the next token is no string, -1 when malformed. */
static int read_string(reader *r, pystr *s)
{
    memset(s, 0, sizeof *s);
    for (int any = 0;; any = 1) {
        skip_space(r);
        const char *p = r->p;
        while (p < r->end && is_name_char(*p))
            p++;
        if (p == r->end || (*p != '\'' && *p != '"'))
            return any;
        size_t prefix = (size_t)(p - r->p);
        int raw = prefix == 1 && (*r->p == 'r' || *r->p == 'R');
        if (prefix > 1 || (prefix == 1 && !raw && *r->p != 'u' && *r->p != 'U'))
            return bad(r, "a string prefix other than u or r (bytes or an f-string)");
        r->p = p;
        if (read_literal(r, s, raw) != 0)
            return -1;
    }
}

/* A dimension: an int literal as Python writes one (decimal, 0x, 0o, 0b,
 * underscores between digits), with a sign. */
static int read_dim(reader *r, int64_t *out)
{
    int neg = 0;
    if (take(r, '-'))
        neg = 1;
    else
        take(r, '+');
    skip_space(r);
    const char *p = r->p, *e = r->end;
    if (p == e || digit_value(*p, 10) < 0)
        return bad(r, "the shape holds something other than integers");
    int base = 10, any = 0, leading_zero = *p == '0', over = 0;
    if (e - p >= 2 && *p == '0' && strchr("xXoObB", p[1]) && p[1]) {
        base = p[1] == 'x' || p[1] == 'X' ? 16 : p[1] == 'o' || p[1] == 'O' ? 8 : 2;
        p += 2;
        if (p < e && *p == '_')
            p++;
    }
    uint64_t v = 0;
    while (p < e && digit_value(*p, base) >= 0) {
        int d = digit_value(*p++, base);
        if (v > (uint64_t)(INT64_MAX - d) / (uint64_t)base)
            over = 1;
        else
            v = v * (uint64_t)base + (uint64_t)d;
        any = 1;
        if (e - p >= 2 && *p == '_' && digit_value(p[1], base) >= 0)
            p++;
    }
    if (r->version < 3 && p < e && *p == 'L' && (e - p == 1 || !is_name_char(p[1])))
        p++;   /* Python 2's long, which numpy's reader drops in versions 1.0 and 2.0 */
    if (!any || (p < e && (is_name_char(*p) || *p == '.')) ||
        (base == 10 && leading_zero && v != 0)) {
        r->p = p;
        return bad(r, "the shape holds something other than integers");
    }
    r->p = p;
    if (over)
        return bad(r, "a dimension larger than 2^63 - 1");
    if (neg && v)
        return bad(r, "a negative dimension");
    *out = (int64_t)v;
    return 0;
}

/* The shape tuple: "(" dims ")", where one dim needs its comma: (3) is 3. */
static int read_shape(reader *r, ir_type *shape)
{
    if (!take(r, '('))
        return bad(r, "the shape is not a tuple");
    shape->rank = 0;
    int commas = 0;
    while (!take(r, ')')) {
        if (shape->rank == IR_MAX_RANK)
            return bad(r, "a shape of more than %d dimensions", IR_MAX_RANK);
        if (read_dim(r, &shape->dims[shape->rank++]) != 0)
            return -1;
        if (take(r, ','))
            commas++;
        else if (!take(r, ')'))
            return bad(r, "expected ',' or ')' in the shape");
        else
            break;
    }
    if (shape->rank == 1 && commas == 0)
        return bad(r, "the shape (%lld) is not a tuple: a tuple of one is written (%lld,)",
                   (long long)shape->dims[0], (long long)shape->dims[0]);
    return 0;
}

/* The header's dict into descr, fortran and shape. */
static int read_dict(reader *r, pystr *descr, int *fortran, ir_type *shape)
{
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    int seen[3] = {0};
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t'))
        r->p++;   /* what ast.literal_eval strips */
    if (r->p == r->end || *r->p++ != '{')
        return bad(r, "not a dict: no '{' at the start");
    while (!take(r, '}')) {
        pystr key;
        int got = read_string(r, &key);
        if (got < 0)
            return -1;
        if (!got)
            return bad(r, "expected a quoted key or '}'");
        int k = 0;
        while (k < 3 && !(key.n == strlen(keys[k]) && memcmp(key.s, keys[k], key.n) == 0))
            k++;
        char buf[STR_MAX * 4 + 8];
        if (k == 3)
            return bad(r, "unknown key '%s' (the keys are 'descr', 'fortran_order' and 'shape')",
                       printable(&key, buf, sizeof buf));
        if (seen[k]++)
            return bad(r, "the key '%s' appears twice", keys[k]);
        if (!take(r, ':'))
            return bad(r, "expected ':' after the key '%s'", keys[k]);
        if (k == 0) {
            got = read_string(r, descr);
            if (got < 0)
                return -1;
            if (!got)
                return bad(r, "'descr' is not a string (a structured dtype?)");
        } else if (k == 1) {
            skip_space(r);
            const char *p = r->p;
            while (p < r->end && is_name_char(*p))
                p++;
            if (p - r->p == 4 && memcmp(r->p, "True", 4) == 0)
                *fortran = 1;
            else if (p - r->p == 5 && memcmp(r->p, "False", 5) == 0)
                *fortran = 0;
            else
                return bad(r, "'fortran_order' is neither True nor False");
            r->p = p;
        } else if (read_shape(r, shape) != 0) {
            return -1;
        }
        if (!take(r, ',')) {
            if (!take(r, '}'))
                return bad(r, "expected ',' or '}' after the value of '%s'", keys[k]);
            break;
        }
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return bad(r, "the key '%s' is missing", keys[k]);
    const char *pad = r->p;
    while (r->p < r->end && *r->p == ' ')
        r->p++;
    if (r->p + 1 != r->end || *r->p != '\n') {
        r->p = pad;
        return bad(r, "the padding after '}' is not spaces ending in the header's last byte, '\\n'");
    }
    return 0;
}

/* Reads path's header: the file is left open at the start of its data, its
 * dtype (any of descr_of's when want is NULL, else want's) and shape in *shape.
 * *fp is NULL on failure. */
static int read_head(const char *path, const ir_type *want, FILE **fp, const char **shown,
                     ir_type *shape, size_t *bytes, char *err, size_t errlen)
{
    struct stat st;
    const char *file = path;
    *fp = NULL;
    if (strcmp(path, "-") == 0) /* standard input, <stdin> in messages */
        file = "/dev/stdin", path = "<stdin>";
    *shown = path;
    if (stat(file, &st) == 0 && S_ISDIR(st.st_mode))
        return base_fail(err, errlen, "%s: is a directory, not a .npy file", path);
    FILE *f = fopen(file, "rb");
    if (!f)
        return base_fail(err, errlen, "%s: cannot read file: %s", path, strerror(errno));
    unsigned char pre[12];
    char header[HEADER_MAX];
    size_t hlen = 0, pre_len = 10, got = fread(pre, 1, 10, f);
    if (got < 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        base_fail(err, errlen, "%s: not a .npy file (bad magic)", path);
        goto fail;
    }
    if ((pre[6] != 1 && pre[6] != 2 && pre[6] != 3) || pre[7] != 0) {
        base_fail(err, errlen, "%s: unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are read)",
                  path, pre[6], pre[7]);
        goto fail;
    }
    if (pre[6] > 1) {
        got += fread(pre + 10, 1, 2, f);
        pre_len = 12;
    }
    if (got != pre_len) {
        base_fail(err, errlen, "%s: truncated .npy header", path);
        goto fail;
    }
    hlen = pre[8] | (size_t)pre[9] << 8;
    if (pre_len == 12)
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen > HEADER_MAX) {
        base_fail(err, errlen, "%s: a .npy header of %zu bytes, more than numpy reads (%d)", path,
                  hlen, HEADER_MAX);
        goto fail;
    }
    if (fread(header, 1, hlen, f) != hlen) {
        base_fail(err, errlen, "%s: truncated .npy header", path);
        goto fail;
    }
    if ((pre_len + hlen) % 16 != 0) {
        base_fail(err, errlen, "%s: the .npy header's length (%zu) does not pad the data to a "
                  "multiple of 16 bytes", path, hlen);
        goto fail;
    }
    if (memchr(header, '\0', hlen)) {
        base_fail(err, errlen, "%s: malformed .npy header: it holds a NUL byte", path);
        goto fail;
    }
    reader r = {header, header, header + hlen, pre[6], path, err, errlen};
    pystr descr;
    int fortran = 0;
    *shape = (ir_type){want ? want->dtype : IR_F32, 0, {0}};
    if (read_dict(&r, &descr, &fortran, shape) != 0)
        goto fail;
    static const ir_dtype any[] = {IR_F32, IR_I32, IR_I64, IR_U8};
    int known = 0;
    for (size_t i = 0; !want && i < sizeof any / sizeof *any; i++) {
        const char *d = descr_of(any[i]);
        if (descr.n == strlen(d) && memcmp(descr.s, d, descr.n) == 0)
            shape->dtype = any[i], known = 1;
    }
    const char *wd = descr_of(shape->dtype);
    char buf[STR_MAX * 4 + 8];
    if (!want && !known) {
        base_fail(err, errlen, "%s: dtype %s is not one gnc reads (numpy dtypes float32 '<f4', "
                  "int32 '<i4', int64 '<i8', uint8 '|u1')", path, printable(&descr, buf, sizeof buf));
        goto fail;
    }
    if (want && (descr.n != strlen(wd) || memcmp(descr.s, wd, descr.n) != 0)) {
        base_fail(err, errlen, "%s: dtype %s does not match the input's %s (want numpy dtype %s)",
                  path, printable(&descr, buf, sizeof buf), ir_dtype_name(want->dtype), wd);
        goto fail;
    }
    if (fortran) {
        base_fail(err, errlen, "%s: Fortran-order arrays are not supported", path);
        goto fail;
    }
    int64_t numel = 1;
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] == 0)
            numel = 0;
    for (int i = 0; numel && i < shape->rank; i++) {
        if (shape->dims[i] > IR_MAX_NUMEL / numel) {
            base_fail(err, errlen, "%s: the .npy shape holds more than 2^37 elements", path);
            goto fail;
        }
        numel *= shape->dims[i];
    }
    *bytes = (size_t)numel * ir_host_size(shape->dtype);
    *fp = f;
    return 0;
fail:
    fclose(f);
    return -1;
}

/* Reads the data, bytes of it, into out, and checks the file ends there. */
static int read_data(FILE *f, const char *path, void *out, size_t bytes, char *err, size_t errlen)
{
    size_t n = fread(out, 1, bytes, f);
    if (n != bytes)
        return base_fail(err, errlen, "%s: truncated .npy data: %zu bytes where the header "
                         "promises %zu", path, n, bytes);
    if (fgetc(f) != EOF)
        return base_fail(err, errlen, "%s: has trailing bytes after the data its header "
                         "describes", path);
    if (ferror(f))
        return base_fail(err, errlen, "%s: cannot read file: %s", path, strerror(errno));
    return 0;
}

int npy_read(const char *path, const ir_type *want, void *out, char *err, size_t errlen)
{
    FILE *f;
    ir_type shape;
    size_t bytes;
    if (read_head(path, want, &f, &path, &shape, &bytes, err, errlen) != 0)
        return -1;
    int rc = -1;
    if (!ir_type_eq(&shape, want)) {
        char a[128], b[128];
        base_fail(err, errlen, "%s: shape %s does not match the input's %s", path,
                  ir_type_str(&shape, a, sizeof a), ir_type_str(want, b, sizeof b));
    } else {
        rc = read_data(f, path, out, bytes, err, errlen);
    }
    fclose(f);
    return rc;
}

int npy_load(const char *path, ir_type *t, void **data, char *err, size_t errlen)
{
    FILE *f;
    size_t bytes;
    struct stat st;
    *data = NULL;
    if (read_head(path, NULL, &f, &path, t, &bytes, err, errlen) != 0)
        return -1;
    int rc = -1;
    /* a header that promises more than the file holds costs nothing */
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size < bytes)
        base_fail(err, errlen, "%s: truncated .npy data: the header promises %zu bytes, the "
                  "file is %lld bytes long", path, bytes, (long long)st.st_size);
    else if (!(*data = base_malloc(bytes ? bytes : 1)))
        base_fail(err, errlen, "%s: out of memory", path);
    else
        rc = read_data(f, path, *data, bytes, err, errlen);
    fclose(f);
    if (rc) {
        base_free(*data);
        *data = NULL;
    }
    return rc;
}

int npy_write(const char *path, const ir_type *t, const void *data, char *err, size_t errlen)
{
    char header[512], shape[256] = "";
    size_t used = 0;
    for (int i = 0; i < t->rank; i++)
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%lld%s",
                                 (long long)t->dims[i], t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr_of(t->dtype), shape);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    base_out o;
    if (base_out_open(&o, path, err, errlen) != 0)
        return -1;
    FILE *f = o.f;
    size_t hlen = (size_t)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    size_t bytes = (size_t)ir_type_numel(t) * (t->dtype == IR_I64 ? 8 : t->dtype == IR_U8 ? 1 : 4);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, bytes, f) == bytes;
    if (!ok) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        base_out_abandon(&o);
        return -1;
    }
    return base_out_commit(&o, err, errlen);
}
