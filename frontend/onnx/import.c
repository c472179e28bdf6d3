/* ONNX ModelProto -> ir_graph (frontend/onnx.h).
 *
 * Steps: read and unpack the file (protobuf-c); check the IR version and the
 * opsets (the default domain at 7..21, no other domain's ops); decode the
 * initializers into constants; add the graph inputs that are not initializers
 * with their static shapes (a symbolic dimension from -D NAME=VALUE); map the
 * nodes one by one, in the file's order, which ONNX requires to be
 * topological (an input not yet defined is an error, so a cycle is one too);
 * then the outputs.  ops.c holds the ops.
 *
 * Everything read from the file is checked before use: sizes come from the
 * file, so they are bounded (IR_MAX_NUMEL) and multiplied with overflow
 * checks, and tensor data must match its shape exactly. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "internal.h"
#include "onnx.h"
#include "onnx.pb-c.h"

int fe_onnx_available(void) { return 1; }

/* ---- types and constants ---- */

ir_dtype ox_dtype(int onnx_type, int *ok)
{
    *ok = 1;
    switch (onnx_type) {
    case OX_FLOAT: return IR_F32;
    case OX_INT32: return IR_I32;
    case OX_INT64: return IR_I64;
    case OX_BOOL: case OX_UINT8: return IR_U8;
    default: *ok = 0; return IR_F32;
    }
}

const char *ox_type_name(int onnx_type)
{
    static const char *const names[] = {
        "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
        "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16"};
    if (onnx_type >= 0 && onnx_type < (int)(sizeof names / sizeof *names))
        return names[onnx_type];
    return "unknown";
}

int64_t ox_numel(const ir_type *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

double ox_num(const ox_val *x, int64_t i)
{
    switch (x->t.dtype) {
    case IR_F32: return ((const float *)x->data)[i];
    case IR_I32: return ((const int32_t *)x->data)[i];
    case IR_I64: return (double)((const int64_t *)x->data)[i];
    case IR_U8: return ((const uint8_t *)x->data)[i];
    default: IR_ASSERT(0);
    }
    return 0;
}

void ox_put_num(ox_val *x, int64_t i, double v)
{
    switch (x->t.dtype) {
    case IR_F32: ((float *)x->data)[i] = (float)v; break;
    case IR_I32: ((int32_t *)x->data)[i] = (int32_t)(v != v ? 0 : v < INT32_MIN ? INT32_MIN
                                                     : v > INT32_MAX ? INT32_MAX : v);
        break;
    case IR_I64: ((int64_t *)x->data)[i] = (int64_t)(v != v ? 0 : v < -9.2e18 ? -9.2e18
                                                     : v > 9.2e18 ? 9.2e18 : v);
        break;
    case IR_U8: ((uint8_t *)x->data)[i] = (uint8_t)(x->onnx_type == OX_BOOL ? v != 0 : v);
        break;
    default: IR_ASSERT(0);
    }
}

/* ---- messages ---- */

/* s with every byte that is not printable ASCII as \xHH (names come from the
   file, and a message must not carry control characters to a terminal) */
static void printable(char *s, size_t size)
{
    char out[1200];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 5 < sizeof out; p++) {
        if (*p >= 0x20 && *p < 0x7f)
            out[k++] = (char)*p;
        else
            k += (size_t)snprintf(out + k, sizeof out - k, "\\x%02x", *p);
    }
    out[k] = 0;
    snprintf(s, size, "%s", out);
}

static int node_report(ox_ctx *cx, const char *what, const char *fmt, va_list ap)
{
    char msg[700];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const Onnx__NodeProto *n = cx->node;
    char full[1200];
    if (n && n->name && n->name[0])
        snprintf(full, sizeof full, "node '%.200s' (%.100s, opset %d): %s%s", n->name,
                 n->op_type ? n->op_type : "", cx->opset, what, msg);
    else if (n)   /* unnamed: its index in the graph's node list */
        snprintf(full, sizeof full, "node #%d (%.100s, opset %d): %s%s", cx->node_index,
                 n->op_type ? n->op_type : "", cx->opset, what, msg);
    else
        snprintf(full, sizeof full, "%s%s", what, msg);
    printable(full, sizeof full);
    diag_error(cx->d, cx->loc, "%s", full);
    return -1;
}

int ox_error(ox_ctx *cx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    node_report(cx, "", fmt, ap);
    va_end(ap);
    return -1;
}

int ox_unsupported(ox_ctx *cx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    node_report(cx, "unsupported: ", fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- names ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

ox_val *ox_lookup(ox_ctx *cx, const char *name)
{
    if (!cx->cap)
        return NULL;
    for (size_t i = hash_str(name) & (cx->cap - 1);; i = (i + 1) & (cx->cap - 1)) {
        if (!cx->table[i])
            return NULL;
        if (strcmp(cx->table[i]->name, name) == 0)
            return cx->table[i];
    }
}

ox_val *ox_define(ox_ctx *cx, const char *name)
{
    if (ox_lookup(cx, name)) {
        ox_error(cx, "the name '%s' is defined twice (ONNX names are single assignments)", name);
        return NULL;
    }
    if ((cx->used + 1) * 2 > cx->cap) {
        size_t cap = cx->cap ? cx->cap * 2 : 256;
        ox_val **t = base_arena_alloc(&cx->scratch, cap * sizeof *t);
        for (size_t k = 0; k < cx->cap; k++) {
            if (!cx->table[k])
                continue;
            size_t i = hash_str(cx->table[k]->name) & (cap - 1);
            while (t[i])
                i = (i + 1) & (cap - 1);
            t[i] = cx->table[k];
        }
        cx->table = t;
        cx->cap = cap;
    }
    ox_val *x = base_arena_alloc(&cx->scratch, sizeof *x);
    size_t len = strlen(name);
    char *s = base_arena_alloc(&cx->scratch, len + 1);
    memcpy(s, name, len);
    x->name = s;
    x->kind = IR_VALUE_PARAM;
    size_t i = hash_str(name) & (cx->cap - 1);
    while (cx->table[i])
        i = (i + 1) & (cx->cap - 1);
    cx->table[i] = x;
    cx->used++;
    return x;
}

void *ox_set_const(ox_ctx *cx, ox_val *out, ir_type t, int onnx_type)
{
    out->is_const = 1;
    out->t = t;
    out->onnx_type = onnx_type;
    size_t bytes = (size_t)ox_numel(&t) * ir_dtype_size(t.dtype);
    out->data = t.dtype == IR_F32 ? ir_alloc(cx->g, bytes ? bytes : 1)
                                  : base_arena_alloc(&cx->scratch, bytes ? bytes : 1);
    return out->data;
}

/* The name for a parameter made from constant x: its own where free. */
static const char *param_name(ox_ctx *cx, const ox_val *x)
{
    if (x->name[0] && ir_claim_name(cx->g, x->name))
        return x->name;
    return ir_unique_name(cx->g, x->name[0] ? x->name : "const");
}

ir_value *ox_tensor(ox_ctx *cx, ox_val *x)
{
    if (x->v)
        return x->v;
    if (x->erf_of)
        return ox_unsupported(cx, "'%s' is an Erf's result: gnc has no erf, and maps Erf "
                              "only within GELU, x (1 + erf(x / sqrt 2)) / 2", x->name),
               NULL;
    IR_ASSERT(x->is_const);
    int64_t n = ox_numel(&x->t);
    if (n == 0)
        return ox_unsupported(cx, "'%s' is an empty tensor, which gnc cannot hold", x->name),
               NULL;
    int uniform = !x->initializer;
    for (int64_t i = 1; uniform && i < n; i++)
        uniform = ox_num(x, i) == ox_num(x, 0);
    if (uniform && fabs(ox_num(x, 0)) <= 16777216.0) {   /* finite, not NaN */
        /* Constant's and folded values that are one number: a const, no weight */
        ir_node *c = ir_node_new(cx->g, IR_OP_CONST, 0, NULL, 1, x->name[0] ? x->name : "const",
                                 cx->loc);
        c->out[0]->type = x->t;
        c->out[0]->type.dtype = IR_F32;
        ir_set_float(cx->g, c, "value", ox_num(x, 0));
        ir_append(cx->g, c);
        ir_value *v = c->out[0];
        if (x->t.dtype != IR_F32) {
            ir_node *k = ir_node_new(cx->g, IR_OP_CAST, 1, &v, 1, v->name, cx->loc);
            k->out[0]->type = x->t;
            ir_append(cx->g, k);
            v = k->out[0];
        }
        return x->v = v;
    }
    const float *f = x->data;
    if (x->t.dtype != IR_F32) {
        /* an integer or bool constant used as a tensor: a float parameter cast to
           its dtype, exact where each element is a float exactly */
        float *c = ir_alloc(cx->g, (size_t)n * sizeof *c);
        for (int64_t i = 0; i < n; i++) {
            double v = ox_num(x, i);
            if (v > 16777216.0 || v < -16777216.0)
                return ox_unsupported(cx, "the %s constant '%s' is needed as a tensor, and "
                                      "gnc holds constants as float, which cannot hold %.0f "
                                      "exactly", ox_type_name(x->onnx_type), x->name, v),
                       NULL;
            c[i] = (float)v;
        }
        f = c;
    }
    ir_type ft = x->t;
    ft.dtype = IR_F32;
    ir_init init = {IR_INIT_DATA, 0, 0, 0, f};
    ir_value *p = ir_add_param(cx->g, x->kind, param_name(cx, x), ft, init, cx->loc);
    if (x->origin)
        p->source = ir_strdup(cx->g, x->origin);
    if (x->t.dtype != IR_F32) {
        ir_node *c = ir_node_new(cx->g, IR_OP_CAST, 1, &p, 1, p->name, cx->loc);
        c->out[0]->type = x->t;
        ir_append(cx->g, c);
        p = c->out[0];
    }
    x->v = p;
    return p;
}

void ox_set_tensor(ox_ctx *cx, ox_val *out, ir_value *v)
{
    /* the IR value takes the ONNX output's name when this node made it: the
       node is remade with a result so named (a value's name is fixed when made) */
    int input = 0;   /* a constant's tensor, made for this node: others may use it */
    for (int i = 0; i < cx->nin; i++)
        input |= cx->in[i] && cx->in[i]->v == v;
    if (v->kind == IR_VALUE_NODE && v->id >= cx->first_id && v->def->nout == 1 && !input &&
        out->name[0] && strcmp(v->name, out->name) != 0) {
        ir_node *n = v->def;
        ir_value *nv = ir_value_new(cx->g, out->name, n->loc);
        nv->type = v->type;
        ir_node *m = ir_node_make(cx->g, n->op, n->nin, n->in, 1, &nv, n->loc);
        m->nattrs = n->nattrs;
        m->attrs = n->attrs;
        ir_insert_before(cx->g, n, m);
        ir_erase(cx->g, n);
        for (ir_node *k = cx->before ? cx->before->next : cx->g->head; k; k = k->next)
            for (int i = 0; i < k->nin; i++)
                if (k->in[i] == v)
                    k->in[i] = nv;
        v = nv;
    }
    out->v = v;
    if (!out->onnx_type)
        out->onnx_type = v->type.dtype == IR_F32 ? OX_FLOAT : v->type.dtype == IR_I32 ? OX_INT32
                         : v->type.dtype == IR_I64 ? OX_INT64 : OX_UINT8;
}

/* ---- tensors ---- */

static size_t onnx_elem_size(int onnx_type)
{
    switch (onnx_type) {
    case OX_FLOAT: case OX_INT32: return 4;
    case OX_INT64: case OX_DOUBLE: return 8;
    case OX_BOOL: case OX_UINT8: case OX_INT8: return 1;
    default: return 0;
    }
}

/* The external data of tp: the file `location` inside dir, from offset, want
 * bytes into dst (NULL: only checks that they are there). */
static int read_external(const Onnx__TensorProto *tp, const char *dir, size_t want,
                         void *dst, char *err, size_t errlen)
{
    const char *loc = NULL;
    uint64_t offset = 0, length = UINT64_MAX;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value)
            continue;
        if (strcmp(e->key, "location") == 0)
            loc = e->value;
        else if (strcmp(e->key, "offset") == 0 && !base_parse_u64(e->value, &offset))
            return base_fail(err, errlen, "external data offset '%s' is no number", e->value);
        else if (strcmp(e->key, "length") == 0 && !base_parse_u64(e->value, &length))
            return base_fail(err, errlen, "external data length '%s' is no number", e->value);
    }
    if (!loc || !loc[0])
        return base_fail(err, errlen, "external data without a location");
    if (loc[0] == '/')
        return base_fail(err, errlen, "external data location '%s' is an absolute path; it "
                         "must lie in the model's folder", loc);
    for (const char *p = loc; *p;) {
        size_t k = strcspn(p, "/\\");
        if (k == 2 && p[0] == '.' && p[1] == '.')
            return base_fail(err, errlen, "external data location '%s' leaves the model's "
                             "folder ('..')", loc);
        p += k;
        if (*p)
            p++;
    }
    size_t len = strlen(dir) + strlen(loc) + 2;
    char *path = base_xmalloc(len);
    snprintf(path, len, "%s/%s", dir, loc);
    /* symbolic links may still lead out: compare the real paths */
    char *rdir = realpath(dir, NULL), *rpath = realpath(path, NULL);
    int inside = rdir && rpath && strncmp(rpath, rdir, strlen(rdir)) == 0 &&
                 (rpath[strlen(rdir)] == '/' || strcmp(rdir, "/") == 0);
    free(rdir);
    free(rpath);
    if (!inside) {
        base_free(path);
        return base_fail(err, errlen, "external data '%s' is missing or lies outside the "
                         "model's folder", loc);
    }
    /* only a regular file: a FIFO would block the open for ever, a device
       read without end (O_NONBLOCK opens a FIFO at once, then is cleared) */
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    base_free(path);
    if (fd < 0)
        return base_fail(err, errlen, "external data '%s': %s", loc, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return base_fail(err, errlen, "external data '%s' is not a regular file", loc);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return base_fail(err, errlen, "external data '%s': %s", loc, strerror(errno));
    }
    int rc = -1;
    if ((uint64_t)st.st_size < offset)
        base_fail(err, errlen, "external data '%s' is shorter than its offset %llu", loc,
                  (unsigned long long)offset);
    else if (length != UINT64_MAX && length != want)
        base_fail(err, errlen, "external data '%s' has length %llu, but the tensor's shape "
                  "needs %zu bytes", loc, (unsigned long long)length, want);
    else if (length == UINT64_MAX && (uint64_t)st.st_size - offset != want)
        base_fail(err, errlen, "external data '%s' holds %llu bytes after offset %llu, but "
                  "the tensor's shape needs %zu", loc,
                  (unsigned long long)((uint64_t)st.st_size - offset), (unsigned long long)offset,
                  want);
    else if ((uint64_t)st.st_size - offset < want)
        base_fail(err, errlen, "external data '%s' holds %llu bytes after offset %llu, but "
                  "the tensor needs %zu", loc, (unsigned long long)((uint64_t)st.st_size - offset),
                  (unsigned long long)offset, want);
    else if (dst && (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, want, f) != want))
        base_fail(err, errlen, "external data '%s': cannot read %zu bytes", loc, want);
    else
        rc = 0;
    fclose(f);
    return rc;
}

int ox_decode_tensor(const Onnx__TensorProto *tp, const char *dir, base_arena **arena,
                     ir_type *t, int *onnx_type, void **data, char *err, size_t errlen)
{
    const char *name = tp->name ? tp->name : "";
    int ot = tp->data_type, ok;
    ir_dtype dt = ox_dtype(ot, &ok);
    if (!ok)
        return base_fail(err, errlen, "tensor '%s' is of type %s: unsupported (gnc reads "
                         "float, int32, int64, uint8 and bool tensors)", name, ox_type_name(ot));
    if (tp->n_dims > IR_MAX_RANK)
        return base_fail(err, errlen, "tensor '%s' has rank %zu; gnc's limit is %d", name,
                         tp->n_dims, IR_MAX_RANK);
    *t = (ir_type){dt, (int)tp->n_dims, {0}};
    int64_t n = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || tp->dims[i] > IR_MAX_NUMEL ||
            __builtin_mul_overflow(n, tp->dims[i], &n) || n > IR_MAX_NUMEL)
            return base_fail(err, errlen, "tensor '%s' has a bad or too large dimension %lld",
                             name, (long long)tp->dims[i]);
        t->dims[i] = tp->dims[i];
    }
    size_t esz = onnx_elem_size(ot), isz = ir_dtype_size(dt), bytes = (size_t)n * isz;
    int external = tp->has_data_location &&
                   tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* the data must match the shape before anything of the shape's size is allocated */
    const char *why = NULL;
    if (external) {
        if (!dir)
            why = "its data in an external file, but the model was not read from a file "
                  "(a pipe, or bytes in memory): no folder to read it from";
        else if (read_external(tp, dir, (size_t)n * esz, NULL, err, errlen) != 0)
            return -1;
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != (size_t)n * esz)
            why = "raw_data size differs from the shape's";
    } else if (ot == OX_FLOAT) {
        if (tp->n_float_data != (size_t)n)
            why = "float_data count differs from the shape's";
    } else if (ot == OX_INT64) {
        if (tp->n_int64_data != (size_t)n)
            why = "int64_data count differs from the shape's";
    } else if (tp->n_int32_data != (size_t)n) {
        why = "int32_data count differs from the shape's";
    }
    if (why)
        return base_fail(err, errlen, "tensor '%s': %s (%lld elements)", name, why, (long long)n);
    void *out = arena ? base_arena_alloc(arena, bytes ? bytes : 1) : base_malloc(bytes ? bytes : 1);
    if (!out)
        return base_fail(err, errlen, "tensor '%s': out of memory", name);
    if (bytes == 0) {
        /* an empty tensor: nothing to copy (its arrays may be NULL) */
    } else if (external) {
        if (read_external(tp, dir, (size_t)n * esz, out, err, errlen) != 0)
            goto fail;
    } else if (tp->has_raw_data) {
        /* little-endian, as ONNX stores it and as gnc's hosts are */
        memcpy(out, tp->raw_data.data, bytes);
    } else if (ot == OX_FLOAT) {
        memcpy(out, tp->float_data, bytes);
    } else if (ot == OX_INT64) {
        memcpy(out, tp->int64_data, bytes);
    } else if (dt == IR_I32) {
        memcpy(out, tp->int32_data, bytes);
    } else {
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)out)[i] = (uint8_t)(ot == OX_BOOL ? tp->int32_data[i] != 0
                                                          : tp->int32_data[i]);
    }
    if (ot == OX_BOOL)
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)out)[i] = ((uint8_t *)out)[i] != 0;
    *onnx_type = ot;
    *data = out;
    return 0;
fail:
    if (!arena)
        base_free(out);
    return -1;
}

/* protobuf-c allocates through base_malloc, so that a library caller's catch
   (base.h) frees what an out-of-memory jump leaves */
static void *pb_alloc(void *data, size_t size)
{
    (void)data;
    return base_malloc(size);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    base_free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

/* Messages nested deeper than this are refused before protobuf-c unpacks them:
 * it recurses once per level, and ONNX's types nest without end (a graph in an
 * attribute of a node of a graph, a sequence type of a sequence type), so a
 * hostile file of a few hundred kilobytes would overflow the stack.  As
 * protobuf's own C++ library's default. */
#define MAX_NESTING 100

/* A varint at *p (before end) into *v; 0 when it runs past end or 10 bytes. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; *p < end && shift < 70; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* The depth of the deepest message in the len bytes at p, read as a desc,
 * following only the fields that desc says are messages; MAX_NESTING + 1
 * once past it.  What is malformed is left for the unpacker to refuse. */
static int nesting(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *desc, int depth)
{
    const uint8_t *end = p + len;
    int deepest = depth;
    while (p < end && deepest <= MAX_NESTING) {
        uint64_t key, n;
        if (!varint(&p, end, &key))
            break;
        switch (key & 7) {
        case 0: /* varint */
            if (!varint(&p, end, &n))
                return deepest;
            break;
        case 1: p += 8; break;
        case 5: p += 4; break;
        case 2: { /* length-delimited: a message where the schema says so */
            if (!varint(&p, end, &n) || n > (uint64_t)(end - p))
                return deepest;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3))
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                int d = nesting(p, (size_t)n, f->descriptor, depth + 1);
                deepest = d > deepest ? d : deepest;
            }
            p += n;
            break;
        }
        default:
            return deepest;
        }
    }
    return deepest;
}

int fe_onnx_read_tensor(const char *path, ir_type *t, void **data, char *name, size_t namelen,
                        char *err, size_t errlen)
{
    size_t len;
    const char *why;
    char *text = base_read_file(path, &len, &why);
    if (!text)
        return base_fail(err, errlen, "%s: %s", path, why);
    if (nesting((const uint8_t *)text, len, &onnx__tensor_proto__descriptor, 0) > MAX_NESTING) {
        base_free(text);
        return base_fail(err, errlen, "%s: messages nested more than %d deep", path, MAX_NESTING);
    }
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&pb_allocator, len, (const uint8_t *)text);
    base_free(text);
    if (!tp)
        return base_fail(err, errlen, "%s: not a valid TensorProto (truncated or corrupt)",
                         path);
    int ot = 0;
    char e[512];
    int rc = ox_decode_tensor(tp, NULL, NULL, t, &ot, data, e, sizeof e);
    if (rc != 0)
        base_fail(err, errlen, "%s: %s", path, e);
    else if (name && namelen)
        snprintf(name, namelen, "%s", tp->name ? tp->name : "");
    onnx__tensor_proto__free_unpacked(tp, &pb_allocator);
    return rc;
}

/* ---- the graph ---- */

/* The static type of a graph input, its symbolic dimensions from the defines. */
static int input_type(ox_ctx *cx, const Onnx__ValueInfoProto *vi, ir_type *t, int *onnx_type)
{
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ox_unsupported(cx, "graph input '%s' is not a tensor", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int ok;
    t->dtype = ox_dtype(tt->elem_type, &ok);
    *onnx_type = tt->elem_type;
    if (!ok)
        return ox_unsupported(cx, "graph input '%s' is of type %s (gnc reads float, int32, "
                              "int64, uint8 and bool)", name, ox_type_name(tt->elem_type));
    if (!tt->shape)
        return ox_error(cx, "graph input '%s' has no shape; gnc needs static shapes", name);
    if (tt->shape->n_dim > IR_MAX_RANK)
        return ox_error(cx, "graph input '%s' has rank %zu; gnc's limit is %d", name,
                        tt->shape->n_dim, IR_MAX_RANK);
    t->rank = (int)tt->shape->n_dim;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        int64_t v = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            v = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dim->dim_param && dim->dim_param[0]) {
            const fe_options *o = cx->opt;
            int found = 0;
            for (int k = 0; o && k < o->ndefines; k++)
                if (strcmp(o->define_names[k], dim->dim_param) == 0) {
                    found = 1;
                    if (!base_parse_i64(o->define_values[k], 1, IR_MAX_NUMEL, &v))
                        return ox_error(cx, "graph input '%s': -D %s=%s is no positive size",
                                        name, dim->dim_param, o->define_values[k]);
                }
            if (!found)
                return ox_error(cx, "graph input '%s': dimension %d is the symbol '%s'; gnc's "
                                "shapes are static: give it a value with -D %s=N", name, i,
                                dim->dim_param, dim->dim_param);
        } else {
            return ox_error(cx, "graph input '%s': dimension %d has neither a size nor a "
                            "name; gnc's shapes are static", name, i);
        }
        if (v == 0)
            return ox_unsupported(cx, "graph input '%s': dimension %d is 0, and gnc holds no "
                                  "empty tensors", name, i);
        if (v < 0 || v > IR_MAX_NUMEL || __builtin_mul_overflow(n, v, &n) || n > IR_MAX_NUMEL)
            return ox_error(cx, "graph input '%s': dimension %d is %lld, %s", name, i,
                            (long long)v, v < 0 ? "and sizes are 0 or more"
                                                 : "which makes the tensor too large");
        t->dims[i] = v;
    }
    return 0;
}

static int check_opsets(ox_ctx *cx, const Onnx__ModelProto *m)
{
    if (!m->has_ir_version || m->ir_version < 3 || m->ir_version > 10)
        return ox_error(cx, "ONNX IR version %lld: unsupported (gnc reads 3 to 10)",
                        (long long)m->ir_version);
    cx->opset = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->domain || !o->domain[0] || strcmp(o->domain, "ai.onnx") == 0)
            cx->opset = (int)(o->version < 0 || o->version > 1000 ? 0 : o->version);
    }
    if (cx->opset < 7 || cx->opset > 21)
        return ox_unsupported(cx, "the model's default-domain opset is %d; gnc reads opsets "
                              "7 to 21", cx->opset);
    return 0;
}

static int import_nodes(ox_ctx *cx, const Onnx__GraphProto *gp)
{
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *n = gp->node[k];
        cx->node = n;
        cx->node_index = (int)k;
        cx->loc = (ir_loc){cx->path, 0, 0};
        if (!n->op_type)
            return ox_error(cx, "a node without an op type");
        if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
            return ox_unsupported(cx, "the domain '%s' (gnc maps the default domain's ops)",
                                  n->domain);
        ox_op_fn fn = ox_find_op(n->op_type);
        if (!fn)
            return ox_unsupported(cx, "the op %s has no mapping to gnc's IR", n->op_type);
        if (n->n_input > 64 || n->n_output > 64)
            return ox_unsupported(cx, "more than 64 inputs or outputs");
        ox_val *in[64] = {0}, *out[64] = {0};
        int gelu_step = strcmp(n->op_type, "Add") == 0 || strcmp(n->op_type, "Mul") == 0;
        for (size_t i = 0; i < n->n_input; i++) {
            if (!n->input[i] || !n->input[i][0])
                continue;   /* an optional input left out */
            if (!(in[i] = ox_lookup(cx, n->input[i])))
                return ox_error(cx, "input '%s' is not defined before this node (ONNX "
                                "requires nodes in topological order, without cycles)",
                                n->input[i]);
            if (in[i]->erf_of && !gelu_step)
                return ox_unsupported(cx, "'%s' is an Erf's result: gnc has no erf, and maps "
                                      "Erf only within GELU, x (1 + erf(x / sqrt 2)) / 2",
                                      in[i]->name);
        }
        if (n->n_output == 0)
            return ox_error(cx, "a node without outputs");
        for (size_t i = 0; i < n->n_output; i++)
            if (n->output[i] && n->output[i][0] && !(out[i] = ox_define(cx, n->output[i])))
                return -1;
        if (!out[0]) {
            /* the first output unnamed: computed, and used by nothing */
            out[0] = base_arena_alloc(&cx->scratch, sizeof *out[0]);
            out[0]->name = "";
            out[0]->kind = IR_VALUE_PARAM;
        }
        cx->first_id = cx->g->nvalues;
        cx->before = cx->g->tail;
        const char *o0 = n->n_output && n->output[0] && n->output[0][0] ? n->output[0] : n->op_type;
        cx->base = o0;
        cx->in = in;
        cx->nin = (int)n->n_input;
        if (fn(cx, in, (int)n->n_input, out, (int)n->n_output) != 0)
            return -1;
        for (size_t i = 0; i < n->n_output; i++)
            if (out[i] && !out[i]->v && !out[i]->is_const && !out[i]->erf_of)
                return ox_unsupported(cx, "its output %zu ('%s')", i, out[i]->name);
    }
    cx->node = NULL;
    return 0;
}

/* Drops the nodes whose results nothing uses (what an op's mapping left
 * behind, such as GELU's division by sqrt 2) and the parameters no node uses
 * (initializers folded into attributes). */
static void prune(ir_graph *g)
{
    unsigned char *used = base_xcalloc((size_t)g->nvalues + 1, 1);
    for (int i = 0; i < g->noutputs; i++)
        used[g->outputs[i].value->id] = 1;
    for (ir_node *n = g->tail, *prev; n; n = prev) {
        prev = n->prev;
        int live = 0;
        for (int k = 0; k < n->nout; k++)
            live |= used[n->out[k]->id];
        if (!live) {
            ir_erase(g, n);
            continue;
        }
        for (int k = 0; k < n->nin; k++)
            used[n->in[k]->id] = 1;
    }
    int m = 0;
    for (int i = 0; i < g->nparams; i++)
        if (used[g->params[i]->id])
            g->params[m++] = g->params[i];
    g->nparams = m;
    base_free(used);
}

static int import_graph(ox_ctx *cx, const Onnx__ModelProto *m, const char *dir)
{
    const Onnx__GraphProto *gp = m->graph;
    if (!gp)
        return ox_error(cx, "the model has no graph");
    char err[512];
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        ox_val *x;
        if (!tp->name || !(x = ox_define(cx, tp->name)))
            return tp->name ? -1 : ox_error(cx, "an initializer without a name");
        ir_type t;
        int ot = 0;
        void *data;
        /* f32 data lands in the graph's arena, where IR_INIT_DATA points */
        base_arena **a = tp->data_type == OX_FLOAT ? (base_arena **)&cx->g->arena : &cx->scratch;
        if (ox_decode_tensor(tp, dir, a, &t, &ot, &data, err, sizeof err) != 0)
            return strstr(err, "unsupported") ? ox_unsupported(cx, "%s", err)
                                              : ox_error(cx, "%s", err);
        x->is_const = 1;
        x->initializer = 1;
        x->origin = x->name;
        x->t = t;
        x->onnx_type = ot;
        x->data = data;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !vi->name[0])
            return ox_error(cx, "a graph input without a name");
        ox_val *x = ox_lookup(cx, vi->name);
        if (x && x->is_const)
            continue;   /* an initializer listed as an input too (IR version < 4) */
        ir_type t;
        int ot = 0;
        if (input_type(cx, vi, &t, &ot) != 0 || !(x = ox_define(cx, vi->name)))
            return -1;
        if (ir_find_value(cx->g, vi->name) || !ir_claim_name(cx->g, vi->name))
            return ox_error(cx, "the graph input name '%s' is taken", vi->name);
        x->v = ir_add_input(cx->g, vi->name, t, cx->loc);
        x->onnx_type = ot;
    }
    if (import_nodes(cx, gp) != 0)
        return -1;
    if (gp->n_output == 0)
        return ox_error(cx, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        ox_val *x = name ? ox_lookup(cx, name) : NULL;
        if (!x)
            return ox_error(cx, "graph output '%s' is computed by no node", name ? name : "");
        ir_value *v = ox_tensor(cx, x);
        if (!v)
            return -1;
        ir_add_output(cx->g, name, v, cx->loc);
    }
    prune(cx->g);
    return 0;
}

ir_graph *fe_load_onnx(const char *path, const fe_options *opt, diag *d)
{
    ox_ctx cx = {0};
    cx.d = d;
    cx.path = path;
    cx.opt = opt;
    cx.loc = (ir_loc){path, 0, 0};
    size_t len;
    const char *why;
    char *bytes = base_read_file(path, &len, &why);
    if (!bytes) {
        diag_error(d, cx.loc, "cannot read the model: %s", why);
        return NULL;
    }
    if (nesting((const uint8_t *)bytes, len, &onnx__model_proto__descriptor, 0) > MAX_NESTING) {
        base_free(bytes);
        diag_error(d, cx.loc, "not a model gnc reads: its messages are nested more than %d deep",
                   MAX_NESTING);
        return NULL;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(&pb_allocator, len, (const uint8_t *)bytes);
    base_free(bytes);
    if (!m) {
        diag_error(d, cx.loc, "not a valid ONNX model (the protobuf is truncated or corrupt)");
        return NULL;
    }
    /* the model's folder, where external data lies */
    char *dir = base_xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = 0;   /* the root */
    else
        *slash = 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char gname[256];
    snprintf(gname, sizeof gname, "%.*s", (int)strcspn(base, "."), base);
    cx.g = ir_graph_new(m->graph && m->graph->name && m->graph->name[0] ? m->graph->name
                                                                         : gname);
    /* bytes that stand for the file (a pipe, gnc_compile_memory) have no folder */
    size_t kept;
    int rc = check_opsets(&cx, m) == 0 ? import_graph(&cx, m, base_preloaded(path, &kept) ? NULL : dir)
                                       : -1;
    if (rc == 0) /* what a pattern left behind (GELU's doubling, ops.c gelu_step),
                    and the model's own dead nodes */
        ir_erase_dead(cx.g);
    base_free(dir);
    base_arena_free(&cx.scratch);
    onnx__model_proto__free_unpacked(m, &pb_allocator);
    if (rc != 0 || d->nerrors) {
        ir_graph_free(cx.g);
        return NULL;
    }
    return cx.g;
}
