/* ir_graph -> ONNX ModelProto (frontend/onnx.h; docs/onnx.md, "Export").
 *
 * Expects an inference graph of one device: no loss, no updates, no optimizer
 * state, no shards.  Steps:
 *   1. the graph's inputs become graph inputs, its parameters and buffers
 *      initializers (their values from the caller, raw little-endian);
 *   2. each node becomes the ONNX node(s) of the same meaning (emit_node), the
 *      last of them named after the IR value it computes and writing exactly
 *      that name, so that an importer gets the IR's names back.  A pattern's
 *      helper values and constant operands are named "<value>.<role>";
 *   3. every node result gets a value_info with its IR type, so that ONNX's
 *      shape inference (checker full_check) compares its types with gnc's;
 *   4. outputs become graph outputs; one named unlike its value reads it
 *      through an Identity node of the output's name;
 *   5. the packed model is written to a temporary file that is renamed over
 *      path: a failure leaves no file and no partial one.
 * Each IR op maps to the ONNX pattern whose natural import is that op again
 * (the table in docs/onnx.md, "Export", which the importer follows).  An op with
 * no exact ONNX form stops the export with the node named.
 *
 * Everything lives in one arena, freed at the end; an allocation that fails
 * jumps to the catch in fe_export_onnx. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "onnx.h"
#include "onnx.pb-c.h"

#define OPSET 17
#define IR_VERSION 8
#define PI 3.14159265358979323846

typedef struct {
    const ir_graph *g;
    fe_values_fn values;
    void *ctx;
    base_arena *arena;
    Onnx__NodeProto **nodes;
    size_t nnodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t ninits, cap_inits;
    Onnx__ValueInfoProto **infos;
    size_t ninfos, cap_infos;
    const char **names;         /* the names taken besides the IR's values: open addressing */
    size_t cap_names, nnames;
    const ir_node *node;        /* the node being exported, for messages */
    char *err;
    size_t errlen;
} ex;

static void *ex_alloc(ex *e, size_t n) { return base_arena_alloc(&e->arena, n); }

static char *ex_strdup(ex *e, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ex_alloc(e, n);
    memcpy(p, s, n);
    return p;
}

/* Appends p to the arena array *arr of *n elements and room for *cap. */
static void ex_push(ex *e, void ***arr, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void **grown = ex_alloc(e, c * sizeof *grown);
        if (*n)
            memcpy(grown, *arr, *n * sizeof *grown);
        *arr = grown, *cap = c;
    }
    (*arr)[(*n)++] = p;
}
#define EX_PUSH(e, arr, n, cap, p) ex_push(e, (void ***)&(arr), &(n), &(cap), p)

/* ---- names ---- */

static size_t name_hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int name_taken(const ex *e, const char *s)
{
    if (ir_find_value(e->g, s))
        return 1;
    if (!e->cap_names)
        return 0;
    for (size_t i = name_hash(s) & (e->cap_names - 1); e->names[i];
         i = (i + 1) & (e->cap_names - 1))
        if (strcmp(e->names[i], s) == 0)
            return 1;
    return 0;
}

static void name_put(ex *e, const char *s)
{
    if (2 * (e->nnames + 1) > e->cap_names) {
        size_t cap = e->cap_names ? 2 * e->cap_names : 256;
        const char **t = ex_alloc(e, cap * sizeof *t);
        for (size_t k = 0; k < e->cap_names; k++)
            if (e->names[k]) {
                size_t i = name_hash(e->names[k]) & (cap - 1);
                while (t[i])
                    i = (i + 1) & (cap - 1);
                t[i] = e->names[k];
            }
        e->names = t, e->cap_names = cap;
    }
    size_t i = name_hash(s) & (e->cap_names - 1);
    while (e->names[i])
        i = (i + 1) & (e->cap_names - 1);
    e->names[i] = s;
    e->nnames++;
}

/* A fresh name "<base>.<role>" (then ".<role>.1", ...) that no IR value and
 * nothing exported so far has. */
static const char *fresh(ex *e, const char *base, const char *role)
{
    size_t n = strlen(base) + strlen(role) + 24;
    char *s = ex_alloc(e, n);
    snprintf(s, n, "%s.%s", base, role);
    for (int k = 1; name_taken(e, s); k++)
        snprintf(s, n, "%s.%s.%d", base, role, k);
    name_put(e, s);
    return s;
}

/* ---- types and tensors ---- */

static int onnx_dtype(ir_dtype t)
{
    switch (t) {
    case IR_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case IR_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case IR_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case IR_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case IR_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case IR_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

static void put_le(unsigned char *p, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE half of f, rounded to nearest even (overflow to infinity). */
static uint16_t f16_bits(float f)
{
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u;
    uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffffu;
    if (e == 0xff) /* inf, NaN (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int ex16 = (int)e - 127 + 15;
    if (ex16 >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (ex16 <= 0) { /* subnormal or zero */
        if (ex16 < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        int shift = 14 - ex16;
        uint32_t half = m >> shift, rest = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)ex16 << 10) | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent: still right, up to infinity */
    return (uint16_t)h;
}

/* bfloat16 of f, rounded to nearest even. */
static uint16_t bf16_bits(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* v as an integer: truncated toward 0, saturated, NaN 0 (as gnc's cast), so
 * that no attribute value makes the conversion undefined. */
static int64_t to_int(double v, double lo, double hi)
{
    return v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)hi : (int64_t)v;
}

/* An element of dtype t with the value v, at p (little-endian). */
static void put_elem(unsigned char *p, ir_dtype t, double v)
{
    switch (t) {
    case IR_F32: put_le(p, f32_bits((float)v), 4); break;
    case IR_F16: put_le(p, f16_bits((float)v), 2); break;
    case IR_BF16: put_le(p, bf16_bits((float)v), 2); break;
    case IR_I32: put_le(p, (uint32_t)to_int(v, INT32_MIN, INT32_MAX), 4); break;
    case IR_I64: put_le(p, (uint64_t)to_int(v, -0x1p63, 0x1p63 - 1024), 8); break;
    case IR_U8: *p = (unsigned char)to_int(v, 0, 255); break;
    default: IR_ASSERT(0);
    }
}

/* A TensorProto named name of dtype t with rank dims (NULL: a scalar), its
 * raw_data of bytes bytes to be filled by the caller. */
static Onnx__TensorProto *tensor_new(ex *e, const char *name, int onnx_type, int rank,
                                     const int64_t *dims, size_t bytes)
{
    Onnx__TensorProto *t = ex_alloc(e, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = ex_strdup(e, name);
    t->has_data_type = 1;
    t->data_type = onnx_type;
    t->n_dims = (size_t)rank;
    t->dims = ex_alloc(e, ((size_t)rank + 1) * sizeof *t->dims);
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = ex_alloc(e, bytes ? bytes : 1);
    return t;
}

/* An initializer: the scalar v of dtype t. */
static const char *init_scalar(ex *e, const char *base, const char *role, ir_dtype t, double v)
{
    const char *name = fresh(e, base, role);
    Onnx__TensorProto *x = tensor_new(e, name, onnx_dtype(t), 0, NULL, ir_dtype_size(t));
    put_elem(x->raw_data.data, t, v);
    EX_PUSH(e, e->inits, e->ninits, e->cap_inits, x);
    return name;
}

/* An initializer: the float scalar v (Pow's exponent, Dropout's ratio), which
 * gnc's importer reads back as the shortest decimal that rounds to it (what
 * the user wrote), and any runtime reads (double needs a cast elsewhere). */
static const char *init_real(ex *e, const char *base, const char *role, double v)
{
    const char *name = fresh(e, base, role);
    Onnx__TensorProto *x = tensor_new(e, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, 4);
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    put_le(x->raw_data.data, u, 4);
    EX_PUSH(e, e->inits, e->ninits, e->cap_inits, x);
    return name;
}

/* An initializer: the int64 vector v[n]. */
static const char *init_ints(ex *e, const char *base, const char *role, int n, const int64_t *v)
{
    const char *name = fresh(e, base, role);
    int64_t dim = n;
    Onnx__TensorProto *x = tensor_new(e, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &dim,
                                      (size_t)n * 8);
    for (int i = 0; i < n; i++)
        put_le(x->raw_data.data + 8 * i, (uint64_t)v[i], 8);
    EX_PUSH(e, e->inits, e->ninits, e->cap_inits, x);
    return name;
}

static Onnx__TypeProto *type_proto(ex *e, const ir_type *t)
{
    Onnx__TypeProto *tp = ex_alloc(e, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = ex_alloc(e, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = onnx_dtype(t->dtype);
    Onnx__TensorShapeProto *sh = ex_alloc(e, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    sh->n_dim = (size_t)t->rank;
    sh->dim = ex_alloc(e, ((size_t)t->rank + 1) * sizeof *sh->dim);
    for (int i = 0; i < t->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = ex_alloc(e, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = t->dims[i];
        sh->dim[i] = d;
    }
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    return tp;
}

static Onnx__ValueInfoProto *value_info(ex *e, const char *name, const ir_type *t)
{
    Onnx__ValueInfoProto *vi = ex_alloc(e, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ex_strdup(e, name);
    vi->type = type_proto(e, t);
    return vi;
}

/* ---- nodes ---- */

/* A node op_type(in[0..nin-1]) -> out, named after its output; "" is an
 * absent optional input. */
static Onnx__NodeProto *node_add(ex *e, const char *op_type, const char *out, int nin,
                                 const char *const *in)
{
    Onnx__NodeProto *n = ex_alloc(e, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ex_strdup(e, op_type);
    n->name = ex_strdup(e, out);
    n->n_input = (size_t)nin;
    n->input = ex_alloc(e, ((size_t)nin + 1) * sizeof *n->input);
    for (int i = 0; i < nin; i++)
        n->input[i] = ex_strdup(e, in[i]);
    n->n_output = 1;
    n->output = ex_alloc(e, sizeof *n->output);
    n->output[0] = ex_strdup(e, out);
    EX_PUSH(e, e->nodes, e->nnodes, e->cap_nodes, n);
    return n;
}

static Onnx__NodeProto *node1(ex *e, const char *op_type, const char *out, const char *a)
{
    return node_add(e, op_type, out, 1, &a);
}

static Onnx__NodeProto *node2(ex *e, const char *op_type, const char *out, const char *a,
                              const char *b)
{
    const char *in[2] = {a, b};
    return node_add(e, op_type, out, 2, in);
}

static Onnx__AttributeProto *attr_new(ex *e, Onnx__NodeProto *n, const char *key, int type)
{
    Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ex_strdup(e, key);
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    Onnx__AttributeProto **grown = ex_alloc(e, (n->n_attribute + 1) * sizeof *grown);
    if (n->n_attribute)
        memcpy(grown, n->attribute, n->n_attribute * sizeof *grown);
    grown[n->n_attribute++] = a;
    n->attribute = grown;
    return a;
}

static void attr_int(ex *e, Onnx__NodeProto *n, const char *key, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(e, n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_float(ex *e, Onnx__NodeProto *n, const char *key, double v)
{
    Onnx__AttributeProto *a = attr_new(e, n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = (float)v;
}

static void attr_ints(ex *e, Onnx__NodeProto *n, const char *key, int count, const int64_t *v)
{
    Onnx__AttributeProto *a = attr_new(e, n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = ex_alloc(e, ((size_t)count + 1) * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)count * sizeof *v);
}

static void attr_string(ex *e, Onnx__NodeProto *n, const char *key, const char *s)
{
    Onnx__AttributeProto *a = attr_new(e, n, key, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(s);
    a->s.data = (uint8_t *)ex_strdup(e, s);
}

/* The node being exported has no exact ONNX form: why, naming it. */
static int refuse(ex *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int refuse(ex *e, const char *fmt, ...)
{
    char why[512], name[160], at[320] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const ir_node *n = e->node;
    if (n->loc.file)
        snprintf(at, sizeof at, "%s:%d:%d: ", n->loc.file, n->loc.line, n->loc.col);
    ir_name_str(name, sizeof name, n->nout ? n->out[0]->name : NULL);
    return base_fail(e->err, e->errlen, "%snode %%%s (%s) has no ONNX form: %s", at, name,
                     ir_ops[n->op].name, why);
}

/* Comparisons: the ONNX op giving the bool mask (ne: Equal, then Not). */
static const char *compare_op(ir_op op)
{
    switch (op) {
    case IR_OP_GT: return "Greater";
    case IR_OP_LT: return "Less";
    case IR_OP_GE: return "GreaterOrEqual";
    case IR_OP_LE: return "LessOrEqual";
    case IR_OP_EQ: case IR_OP_NE: return "Equal";
    default: return NULL;
    }
}

/* A pooling window's output size along one axis as ONNX computes it
 * (floor or ceil of the strided positions, plus one). */
static int64_t onnx_pool_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil)
{
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    return (ceil ? (span + s - 1) / s : span / s) + 1;
}

/* MaxPool or AveragePool with the IR node's window: refused where the IR's
 * output size (PyTorch's ceil mode drops a last window that starts in the
 * right padding) is not ONNX's. */
static int emit_pool(ex *e, const ir_node *n, const char *op_type, const char *out)
{
    int c;
    const int64_t *k = ir_attr_ints(n, "kernel", &c), *s = ir_attr_ints(n, "stride", &c);
    const int64_t *p = ir_attr_ints(n, "pad", &c);
    const int64_t *d = n->op == IR_OP_MAXPOOL2D ? ir_attr_ints(n, "dilation", &c) : NULL;
    int ceil = (int)ir_attr_int(n, "ceil_mode");
    const ir_type *x = &n->in[0]->type, *y = &n->out[0]->type;
    for (int i = 0; i < 2; i++) {
        int64_t want = onnx_pool_size(x->dims[2 + i], k[i], s[i], p[i], d ? d[i] : 1, ceil);
        if (want != y->dims[2 + i])
            return refuse(e, "ONNX's %s with ceil_mode gives %lld outputs along axis %d, gnc's "
                          "%lld (its last window would start in the padding)", op_type,
                          (long long)want, 2 + i, (long long)y->dims[2 + i]);
    }
    Onnx__NodeProto *o = node1(e, op_type, out, n->in[0]->name);
    int64_t pads[4] = {p[0], p[1], p[0], p[1]};
    attr_ints(e, o, "kernel_shape", 2, k);
    attr_ints(e, o, "strides", 2, s);
    attr_ints(e, o, "pads", 4, pads);
    if (d)
        attr_ints(e, o, "dilations", 2, d);
    else
        attr_int(e, o, "count_include_pad", ir_attr_int(n, "count_include_pad"));
    attr_int(e, o, "ceil_mode", ceil);
    return 0;
}

/* upsample2d -> Resize: nearest as PyTorch's legacy nearest (asymmetric,
 * floor), bilinear as linear with align_corners or pytorch_half_pixel; the
 * scale factors as Resize's scales where PyTorch was given them (its ratio is
 * then 1 / scale, as ONNX's), else the sizes. */
static int emit_upsample(ex *e, const ir_node *n, const char *out)
{
    int c;
    const int64_t *size = ir_attr_ints(n, "size", &c);
    int bilinear = (int)ir_attr_int(n, "mode"), align = (int)ir_attr_int(n, "align_corners");
    double sh = ir_attr_float(n, "scale_h"), sw = ir_attr_float(n, "scale_w");
    const ir_type *x = &n->in[0]->type;
    if (bilinear != 0 && bilinear != 1)
        return refuse(e, "mode %d", bilinear);
    int scaled = sh > 0 && sw > 0 && !(bilinear && align);
    if ((sh > 0) != (sw > 0) && !(bilinear && align))
        return refuse(e, "a scale factor along one axis alone");
    if (scaled && ((int64_t)floor(x->dims[2] * sh) != size[0] ||
                   (int64_t)floor(x->dims[3] * sw) != size[1]))
        return refuse(e, "Resize's size from the scales is not the output's");
    const char *in[4] = {n->in[0]->name, "", "", ""};
    if (scaled) {
        const char *name = fresh(e, out, "scales");
        int64_t four = 4;
        Onnx__TensorProto *t = tensor_new(e, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four,
                                          16);
        double v[4] = {1, 1, sh, sw};
        for (int i = 0; i < 4; i++)
            put_elem(t->raw_data.data + 4 * i, IR_F32, v[i]);
        EX_PUSH(e, e->inits, e->ninits, e->cap_inits, t);
        in[2] = name;
    } else {
        int64_t sizes[4] = {x->dims[0], x->dims[1], size[0], size[1]};
        in[3] = init_ints(e, out, "sizes", 4, sizes);
    }
    Onnx__NodeProto *o = node_add(e, "Resize", out, scaled ? 3 : 4, in);
    attr_string(e, o, "mode", bilinear ? "linear" : "nearest");
    attr_string(e, o, "coordinate_transformation_mode",
                !bilinear ? "asymmetric" : align ? "align_corners" : "pytorch_half_pixel");
    if (!bilinear)
        attr_string(e, o, "nearest_mode", "floor");
    return 0;
}

/* gelu, the exact one: 0.5 x (1 + erf(x / sqrt 2)), as PyTorch writes it
 * below opset 20. */
static void emit_gelu(ex *e, const char *x, ir_dtype t, const char *out)
{
    const char *div = fresh(e, out, "div"), *erf = fresh(e, out, "erf");
    const char *add = fresh(e, out, "add"), *mul = fresh(e, out, "mul");
    node2(e, "Div", div, x, init_scalar(e, out, "sqrt2", t, sqrt(2.0)));
    node1(e, "Erf", erf, div);
    node2(e, "Add", add, erf, init_scalar(e, out, "one", t, 1.0));
    node2(e, "Mul", mul, x, add);
    node2(e, "Mul", out, mul, init_scalar(e, out, "half", t, 0.5));
}

/* gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static void emit_gelu_tanh(ex *e, const char *x, ir_dtype t, const char *out)
{
    const char *cube = fresh(e, out, "cube"), *cubed = fresh(e, out, "cube_scaled");
    const char *inner = fresh(e, out, "inner"), *scaled = fresh(e, out, "scaled");
    const char *th = fresh(e, out, "tanh"), *add = fresh(e, out, "add");
    const char *mul = fresh(e, out, "mul");
    node2(e, "Pow", cube, x, init_scalar(e, out, "three", t, 3.0));
    node2(e, "Mul", cubed, cube, init_scalar(e, out, "coef", t, 0.044715));
    node2(e, "Add", inner, x, cubed);
    node2(e, "Mul", scaled, inner, init_scalar(e, out, "sqrt_2_over_pi", t, sqrt(2.0 / PI)));
    node1(e, "Tanh", th, scaled);
    node2(e, "Add", add, th, init_scalar(e, out, "one", t, 1.0));
    node2(e, "Mul", mul, x, add);
    node2(e, "Mul", out, mul, init_scalar(e, out, "half", t, 0.5));
}

/* Node n as ONNX nodes whose last writes n's result by its name. */
/* The ONNX nodes of constants, ranges and the elementwise ops that are not
 * one ONNX operator each: 0, -1 refused (refuse), 1 for another op. */
static int emit_elementwise(ex *e, const ir_node *n, const char **in)
{
    const char *out = n->out[0]->name;
    const char *x = n->nin ? n->in[0]->name : NULL;
    const ir_type *yt = &n->out[0]->type;
    ir_dtype xt = n->nin ? n->in[0]->type.dtype : n->out[0]->type.dtype;
    Onnx__NodeProto *o;
    switch (n->op) {
    case IR_OP_CONST: {
        if (yt->dtype == IR_BF16)
            return refuse(e, "ConstantOfShape has no bfloat16 before opset 20");
        o = node1(e, "ConstantOfShape", out, init_ints(e, out, "shape", yt->rank, yt->dims));
        Onnx__AttributeProto *a = attr_new(e, o, "value",
                                           ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
        int64_t one = 1;
        a->t = tensor_new(e, "value", onnx_dtype(yt->dtype), 1, &one, ir_dtype_size(yt->dtype));
        put_elem(a->t->raw_data.data, yt->dtype, ir_attr_float(n, "value"));
        return 0;
    }
    case IR_OP_ARANGE: {
        if (yt->dtype != IR_F32 && yt->dtype != IR_I32 && yt->dtype != IR_I64)
            return refuse(e, "Range takes f32, i32 or i64, not %s", ir_dtype_name(yt->dtype));
        double start = ir_attr_float(n, "start"), step = ir_attr_float(n, "step");
        double len = (double)yt->dims[0];
        /* Range counts ceil((limit - start) / delta): half a step short of
           the end gives the count whatever the rounding */
        double limit = yt->dtype == IR_F32 ? start + (len - 0.5) * step : start + len * step;
        const char *a3[3] = {init_scalar(e, out, "start", yt->dtype, start),
                             init_scalar(e, out, "limit", yt->dtype, limit),
                             init_scalar(e, out, "delta", yt->dtype, step)};
        node_add(e, "Range", out, 3, a3);
        return 0;
    }
    case IR_OP_GELU:
        emit_gelu(e, x, xt, out);
        return 0;
    case IR_OP_GELU_TANH:
        emit_gelu_tanh(e, x, xt, out);
        return 0;
    case IR_OP_SILU: {
        const char *s = fresh(e, out, "sigmoid");
        node1(e, "Sigmoid", s, x);
        node2(e, "Mul", out, x, s);
        return 0;
    }
    case IR_OP_RSQRT: {
        const char *s = fresh(e, out, "sqrt");
        node1(e, "Sqrt", s, x);
        node1(e, "Reciprocal", out, s);
        return 0;
    }
    case IR_OP_LEAKY_RELU:
        attr_float(e, node1(e, "LeakyRelu", out, x), "alpha", ir_attr_float(n, "slope"));
        return 0;
    case IR_OP_ELU:
        attr_float(e, node1(e, "Elu", out, x), "alpha", ir_attr_float(n, "alpha"));
        return 0;
    case IR_OP_POW:
        node2(e, "Pow", out, x, init_real(e, out, "exponent", ir_attr_float(n, "p")));
        return 0;
    case IR_OP_CLAMP: {
        const char *a3[3] = {x, init_scalar(e, out, "min", xt, ir_attr_float(n, "min")),
                             init_scalar(e, out, "max", xt, ir_attr_float(n, "max"))};
        node_add(e, "Clip", out, 3, a3);
        return 0;
    }
    case IR_OP_DROPOUT:
        /* identity at inference, as ONNX's Dropout without training_mode;
           its ratio keeps p for training the imported model */
        node2(e, "Dropout", out, x, init_real(e, out, "ratio", ir_attr_float(n, "p")));
        return 0;
    case IR_OP_WHERE: {
        const char *cond = fresh(e, out, "cond");
        attr_int(e, node1(e, "Cast", cond, in[0]), "to", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
        const char *a3[3] = {cond, in[1], in[2]};
        node_add(e, "Where", out, 3, a3);
        return 0;
    }
    default:
        return 1;
    }
}

/* The ONNX nodes of the layers: dense, convolutions, sum_to, normalizations,
 * softmax, reductions, pooling: 0, -1 refused (refuse), 1 for another op. */
static int emit_layers(ex *e, const ir_node *n, const char **in)
{
    const char *out = n->out[0]->name;
    const char *x = n->nin ? n->in[0]->name : NULL;
    const ir_type *yt = &n->out[0]->type;
    Onnx__NodeProto *o;
    int c;
    switch (n->op) {
    case IR_OP_DENSE: {
        if (n->in[0]->type.rank == 2) {
            attr_int(e, node_add(e, "Gemm", out, n->nin, in), "transB", 1);
            return 0;
        }
        const char *wt = fresh(e, out, "weight_t");
        int64_t perm[2] = {1, 0};
        attr_ints(e, node1(e, "Transpose", wt, in[1]), "perm", 2, perm);
        const char *mm = n->nin == 3 ? fresh(e, out, "matmul") : out;
        node2(e, "MatMul", mm, x, wt);
        if (n->nin == 3)
            node2(e, "Add", out, mm, in[2]);
        return 0;
    }
    case IR_OP_CONV2D: {
        o = node_add(e, "Conv", out, n->nin, in);
        const int64_t *p = ir_attr_ints(n, "pad", &c);
        int64_t pads[4] = {p[0], p[1], p[0], p[1]};
        attr_ints(e, o, "kernel_shape", 2, n->in[1]->type.dims + 2);
        attr_ints(e, o, "strides", 2, ir_attr_ints(n, "stride", &c));
        attr_ints(e, o, "pads", 4, pads);
        attr_ints(e, o, "dilations", 2, ir_attr_ints(n, "dilation", &c));
        attr_int(e, o, "group", ir_attr_int(n, "groups"));
        return 0;
    }
    case IR_OP_CONV2D_GRAD_INPUT: { /* conv_transpose2d's forward */
        const int64_t *s = ir_attr_ints(n, "stride", &c), *p = ir_attr_ints(n, "pad", &c);
        const int64_t *d = ir_attr_ints(n, "dilation", &c), *k = n->in[1]->type.dims + 2;
        int64_t pads[4] = {p[0], p[1], p[0], p[1]}, extra[2];
        for (int i = 0; i < 2; i++) {
            int64_t in_i = n->in[0]->type.dims[2 + i];
            extra[i] = yt->dims[2 + i] - ((in_i - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1);
            if (extra[i] < 0 || (extra[i] >= s[i] && extra[i] >= d[i]))
                return refuse(e, "an output_padding of %lld along axis %d", (long long)extra[i],
                              2 + i);
        }
        o = node_add(e, "ConvTranspose", out, 2, in);
        attr_ints(e, o, "kernel_shape", 2, k);
        attr_ints(e, o, "strides", 2, s);
        attr_ints(e, o, "pads", 4, pads);
        attr_ints(e, o, "dilations", 2, d);
        attr_int(e, o, "group", ir_attr_int(n, "groups"));
        attr_ints(e, o, "output_padding", 2, extra);
        return 0;
    }
    case IR_OP_SUM_TO: {
        /* the leading axes the shape lacks and those it has as 1 are summed,
           kept as 1; a Reshape drops the leading ones */
        const ir_type *t = &n->in[0]->type;
        int lead = t->rank - yt->rank, naxes = 0;
        int64_t axes[IR_MAX_RANK];
        for (int i = 0; i < t->rank; i++)
            if (i < lead || (yt->dims[i - lead] == 1 && t->dims[i] != 1))
                axes[naxes++] = i;
        const char *sum = lead ? fresh(e, out, "sum") : out;
        o = node2(e, "ReduceSum", sum, x, init_ints(e, out, "axes", naxes, axes));
        attr_int(e, o, "keepdims", 1);
        if (!naxes)
            attr_int(e, o, "noop_with_empty_axes", 1);
        if (lead)
            node2(e, "Reshape", out, sum, init_ints(e, out, "shape", yt->rank, yt->dims));
        return 0;
    }
    case IR_OP_BATCHNORM:
        o = node_add(e, "BatchNormalization", out, 5, in);
        attr_float(e, o, "epsilon", ir_attr_float(n, "eps"));
        /* ONNX's momentum weighs the old running statistics, PyTorch's the
           batch's */
        attr_float(e, o, "momentum", 1.0 - ir_attr_float(n, "momentum"));
        return 0;
    case IR_OP_LAYERNORM:
        o = node_add(e, "LayerNormalization", out, 3, in);
        attr_int(e, o, "axis", -n->in[1]->type.rank);
        attr_float(e, o, "epsilon", ir_attr_float(n, "eps"));
        return 0;
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX:
        attr_int(e, node1(e, n->op == IR_OP_SOFTMAX ? "Softmax" : "LogSoftmax", out, x), "axis",
                 ir_attr_int(n, "axis"));
        return 0;
    case IR_OP_REDUCE_MAX:
    case IR_OP_REDUCE_MIN: {
        int64_t axis = ir_attr_int(n, "axis");
        o = node1(e, n->op == IR_OP_REDUCE_MAX ? "ReduceMax" : "ReduceMin", out, x);
        attr_ints(e, o, "axes", 1, &axis);
        attr_int(e, o, "keepdims", 1);
        return 0;
    }
    case IR_OP_ARGMAX: {
        const char *idx = yt->dtype == IR_I64 ? out : fresh(e, out, "i64");
        o = node1(e, "ArgMax", idx, x);
        attr_int(e, o, "axis", ir_attr_int(n, "axis"));
        attr_int(e, o, "keepdims", 1);
        if (idx != out)
            attr_int(e, node1(e, "Cast", out, idx), "to", onnx_dtype(yt->dtype));
        return 0;
    }
    case IR_OP_MAXPOOL2D:
        return emit_pool(e, n, "MaxPool", out);
    case IR_OP_AVGPOOL2D:
        return emit_pool(e, n, "AveragePool", out);
    case IR_OP_ADAPTIVE_AVGPOOL2D: {
        const ir_type *t = &n->in[0]->type;
        int64_t h = t->dims[2], w = t->dims[3], oh = yt->dims[2], ow = yt->dims[3];
        if (oh == 1 && ow == 1) {
            node1(e, "GlobalAveragePool", out, x);
            return 0;
        }
        if (h % oh || w % ow)
            return refuse(e, "[%lld, %lld] -> [%lld, %lld]: windows of different sizes",
                          (long long)h, (long long)w, (long long)oh, (long long)ow);
        int64_t k[2] = {h / oh, w / ow}, pads[4] = {0, 0, 0, 0};
        o = node1(e, "AveragePool", out, x);
        attr_ints(e, o, "kernel_shape", 2, k);
        attr_ints(e, o, "strides", 2, k);
        attr_ints(e, o, "pads", 4, pads);
        return 0;
    }
    case IR_OP_UPSAMPLE2D:
        return emit_upsample(e, n, out);
    default:
        return 1;
    }
}

/* The ONNX nodes of the ops that move data: reshape, broadcast_to,
 * transpose, concat, cast, pad, embedding, slice: 0, -1 refused (refuse), 1
 * for another op. */
static int emit_shapes(ex *e, const ir_node *n, const char **in)
{
    const char *out = n->out[0]->name;
    const char *x = n->nin ? n->in[0]->name : NULL;
    const ir_type *yt = &n->out[0]->type;
    ir_dtype xt = n->nin ? n->in[0]->type.dtype : n->out[0]->type.dtype;
    Onnx__NodeProto *o;
    int c;
    switch (n->op) {
    case IR_OP_RESHAPE: {
        o = node2(e, "Reshape", out, x, init_ints(e, out, "shape", yt->rank, yt->dims));
        for (int i = 0; i < yt->rank; i++)
            if (yt->dims[i] == 0) { /* a 0 is a size, not "copy the input's" */
                attr_int(e, o, "allowzero", 1);
                break;
            }
        return 0;
    }
    case IR_OP_BROADCAST_TO:
        node2(e, "Expand", out, x, init_ints(e, out, "shape", yt->rank, yt->dims));
        return 0;
    case IR_OP_TRANSPOSE: {
        const int64_t *perm = ir_attr_ints(n, "perm", &c);
        attr_ints(e, node1(e, "Transpose", out, x), "perm", c, perm);
        return 0;
    }
    case IR_OP_CONCAT:
        attr_int(e, node_add(e, "Concat", out, n->nin, in), "axis", ir_attr_int(n, "axis"));
        return 0;
    case IR_OP_CAST:
        attr_int(e, node1(e, "Cast", out, x), "to", onnx_dtype(yt->dtype));
        return 0;
    case IR_OP_PAD: {
        int nb, na;
        const int64_t *before = ir_attr_ints(n, "before", &nb), *after = ir_attr_ints(n, "after", &na);
        int64_t pads[2 * IR_MAX_RANK];
        for (int i = 0; i < nb; i++)
            pads[i] = before[i], pads[nb + i] = after[i];
        const char *a3[3] = {x, init_ints(e, out, "pads", 2 * nb, pads),
                             init_scalar(e, out, "value", xt, ir_attr_float(n, "value"))};
        attr_string(e, node_add(e, "Pad", out, 3, a3), "mode", "constant");
        return 0;
    }
    case IR_OP_EMBEDDING:
        if (ir_attr_int(n, "shard_of"))
            return 1; /* a device's rows of a vocabulary: no ONNX op */
        attr_int(e, node2(e, "Gather", out, in[1], in[0]), "axis", 0);
        return 0;
    case IR_OP_SLICE: {
        int64_t axis = ir_attr_int(n, "axis"), start = ir_attr_int(n, "start");
        int64_t end = start + ir_attr_int(n, "size");
        const char *a4[4] = {x, init_ints(e, out, "starts", 1, &start),
                             init_ints(e, out, "ends", 1, &end), init_ints(e, out, "axes", 1, &axis)};
        node_add(e, "Slice", out, 4, a4);
        return 0;
    }
    default:
        return 1;
    }
}

/* attention as the pattern it fuses: Transpose(k) (the last two axes),
 * MatMul(q, that), Mul by the scale, for causal a Where of a constant
 * lower-triangular bool mask [l, s] (true where j <= i) and -inf,
 * Softmax(axis -1), MatMul with v (grouped-query attention over one key
 * head through MatMul's broadcasting; over more, refused).  Importing it, the attention pass
 * (passes/attention.c) makes it one attention node again.  lse, the row
 * statistics the gradient reads, has no ONNX form: refused where anything
 * reads it. */
static int emit_attention(ex *e, const ir_node *n)
{
    const ir_value *lse = n->out[1];
    for (const ir_node *m = e->g->head; m; m = m->next)
        for (int i = 0; i < m->nin; i++)
            if (m->in[i] == lse)
                return refuse(e, "its row log-sum-exp %s is read by %s, and ONNX's softmax "
                              "does not give it", lse->name, m->out[0]->name);
    for (int i = 0; i < e->g->noutputs; i++)
        if (e->g->outputs[i].value == lse)
            return refuse(e, "its row log-sum-exp %s is output %s, and ONNX's softmax does "
                          "not give it", lse->name, e->g->outputs[i].name);
    const char *out = n->out[0]->name;
    const ir_type *q = &n->in[0]->type, *k = &n->in[1]->type;
    int r = q->rank;
    if (r >= 3 && k->dims[r - 3] != q->dims[r - 3] && k->dims[r - 3] != 1)
        return refuse(e, "grouped-query attention (%lld query heads over %lld key heads): "
                      "ONNX's MatMul broadcasts a head count of 1 only",
                      (long long)q->dims[r - 3], (long long)k->dims[r - 3]);
    int64_t perm[IR_MAX_RANK], l = q->dims[r - 2], s = k->dims[r - 2];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    int causal = ir_attr_int(n, "causal") != 0;
    if (causal && l * s > ((int64_t)1 << 30))
        return refuse(e, "its causal mask would be a constant of %lld x %lld, over 1 GiB",
                      (long long)l, (long long)s);
    const char *kt = fresh(e, out, "k_t"), *scores = fresh(e, out, "scores");
    const char *scaled = fresh(e, out, "scaled"), *probs = fresh(e, out, "probs");
    attr_ints(e, node1(e, "Transpose", kt, n->in[1]->name), "perm", r, perm);
    node2(e, "MatMul", scores, n->in[0]->name, kt);
    node2(e, "Mul", scaled, scores,
          init_scalar(e, out, "scale", q->dtype, ir_attr_float(n, "scale")));
    const char *logits = scaled;
    if (causal) {
        const char *mask = fresh(e, out, "mask");
        int64_t dims[2] = {l, s};
        Onnx__TensorProto *t = tensor_new(e, mask, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 2, dims,
                                          (size_t)(l * s));
        for (int64_t i = 0; i < l; i++)
            for (int64_t j = 0; j < s; j++)
                t->raw_data.data[i * s + j] = j <= i;
        EX_PUSH(e, e->inits, e->ninits, e->cap_inits, t);
        logits = fresh(e, out, "masked");
        const char *a3[3] = {mask, scaled, init_scalar(e, out, "fill", q->dtype, -INFINITY)};
        node_add(e, "Where", logits, 3, a3);
    }
    attr_int(e, node1(e, "Softmax", probs, logits), "axis", -1);
    node2(e, "MatMul", out, probs, n->in[2]->name);
    return 0;
}

static int emit_node(ex *e, const ir_node *n)
{
    e->node = n;
    if (n->op == IR_OP_ATTENTION)
        return emit_attention(e, n);
    if (n->nout != 1)
        return refuse(e, "%d results (a training op)", n->nout);
    const char *out = n->out[0]->name;
    const ir_type *yt = &n->out[0]->type;
    const char *direct = ir_onnx_name(n->op), *cmp = compare_op(n->op);
    const char **in = ex_alloc(e, ((size_t)n->nin + 1) * sizeof *in);
    for (int i = 0; i < n->nin; i++)
        in[i] = n->in[i]->name;
    if (direct && ir_onnx_since(n->op) > OPSET)
        return refuse(e, "ONNX has %s from opset %d, and gnc writes opset %d", direct,
                      ir_onnx_since(n->op), OPSET);
    if (direct) {
        node_add(e, direct, out, n->nin, in);
        return 0;
    }
    if (cmp) {
        const char *mask = fresh(e, out, "bool");
        if (n->op == IR_OP_NE) {
            const char *eq = fresh(e, out, "eq");
            node2(e, "Equal", eq, in[0], in[1]);
            node1(e, "Not", mask, eq);
        } else {
            node2(e, cmp, mask, in[0], in[1]);
        }
        attr_int(e, node1(e, "Cast", out, mask), "to", onnx_dtype(yt->dtype));
        return 0;
    }
    int rc = emit_elementwise(e, n, in);
    rc = rc == 1 ? emit_layers(e, n, in) : rc;
    rc = rc == 1 ? emit_shapes(e, n, in) : rc;
    if (rc != 1)
        return rc;
    return refuse(e, "%s", ir_op_communicates(n->op) ? "communication between devices"
                           : "no ONNX operator computes it exactly (a training or "
                             "compiler-made op)");
}

/* The graph as a ModelProto in e; 0, or -1 with err set. */
static int build(ex *e, Onnx__ModelProto *m)
{
    const ir_graph *g = e->g;
    if (g->loss || g->nupdates)
        return base_fail(e->err, e->errlen, "%s is a training graph (it has %s): only an "
                         "inference graph exports", g->name, g->loss ? "a loss" : "updates");
    if (!g->noutputs)
        return base_fail(e->err, e->errlen, "%s has no outputs (besides a loss): nothing "
                         "to export", g->name);
    Onnx__GraphProto *gp = ex_alloc(e, sizeof *gp);
    onnx__graph_proto__init(gp);
    gp->name = ex_strdup(e, g->name ? g->name : "gnc");

    /* outputs named unlike their values take those names first */
    for (int i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        if (strcmp(o->name, o->value->name) == 0)
            continue;
        if (name_taken(e, o->name))
            return base_fail(e->err, e->errlen, "output %s has the name of a value of %s, "
                             "which ONNX cannot tell apart", o->name, g->name);
        name_put(e, o->name);
    }

    Onnx__ValueInfoProto **ins = ex_alloc(e, ((size_t)g->ninputs + 1) * sizeof *ins);
    for (int i = 0; i < g->ninputs; i++)
        ins[i] = value_info(e, g->inputs[i]->name, &g->inputs[i]->type);
    gp->n_input = (size_t)g->ninputs, gp->input = ins;

    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (v->kind == IR_VALUE_STATE)
            return base_fail(e->err, e->errlen, "%s holds optimizer state (%s): only an "
                             "inference graph exports", g->name, v->name);
        if (v->shard.of)
            return base_fail(e->err, e->errlen, "%s is a shard of %s: only a single-device "
                             "graph exports", v->name, v->shard.of);
        if (!ir_is_float(v->type.dtype))
            return base_fail(e->err, e->errlen, "parameter %s is %s: gnc's weights are "
                             "floating point", v->name, ir_dtype_name(v->type.dtype));
        const float *vals = e->values(e->ctx, v);
        if (!vals)
            return base_fail(e->err, e->errlen, "no values for parameter %s", v->name);
        int64_t numel = ir_type_numel(&v->type);
        size_t es = ir_dtype_size(v->type.dtype);
        Onnx__TensorProto *t = tensor_new(e, v->name, onnx_dtype(v->type.dtype), v->type.rank,
                                          v->type.dims, (size_t)numel * es);
        for (int64_t k = 0; k < numel; k++)
            put_elem(t->raw_data.data + (size_t)k * es, v->type.dtype, vals[k]);
        EX_PUSH(e, e->inits, e->ninits, e->cap_inits, t);
    }

    ir_for_each_node(g, n) {
        if (n->device != 0)
            return base_fail(e->err, e->errlen, "%s runs on device %d: only a single-device "
                             "graph exports", n->nout ? n->out[0]->name : "a node", n->device);
        if (emit_node(e, n) != 0)
            return -1;
        int is_output = 0;
        for (int i = 0; i < g->noutputs && !is_output; i++)
            is_output = g->outputs[i].value == n->out[0] &&
                        strcmp(g->outputs[i].name, n->out[0]->name) == 0;
        if (!is_output)
            EX_PUSH(e, e->infos, e->ninfos, e->cap_infos,
                    value_info(e, n->out[0]->name, &n->out[0]->type));
    }

    Onnx__ValueInfoProto **outs = ex_alloc(e, ((size_t)g->noutputs + 1) * sizeof *outs);
    for (int i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        if (strcmp(o->name, o->value->name) != 0)
            node1(e, "Identity", o->name, o->value->name);
        outs[i] = value_info(e, o->name, &o->value->type);
    }
    gp->n_output = (size_t)g->noutputs, gp->output = outs;
    gp->n_node = e->nnodes, gp->node = e->nodes;
    gp->n_initializer = e->ninits, gp->initializer = e->inits;
    gp->n_value_info = e->ninfos, gp->value_info = e->infos;

    Onnx__OperatorSetIdProto *opset = ex_alloc(e, sizeof *opset);
    onnx__operator_set_id_proto__init(opset);
    opset->domain = ex_strdup(e, "");
    opset->has_version = 1;
    opset->version = OPSET;
    m->has_ir_version = 1;
    m->ir_version = IR_VERSION;
    m->n_opset_import = 1;
    m->opset_import = ex_alloc(e, sizeof *m->opset_import);
    m->opset_import[0] = opset;
    m->producer_name = ex_strdup(e, "gnc");
    m->producer_version = ex_strdup(e, GNC_VERSION);
    m->graph = gp;
    return 0;
}

/* bytes to path, safely (base_out). */
static int write_atomic(const char *path, const uint8_t *bytes, size_t len, char *err,
                        size_t errlen)
{
    base_out o;
    if (base_out_open(&o, path, err, errlen) != 0)
        return -1;
    if (fwrite(bytes, 1, len, o.f) != len) {
        base_fail(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        base_out_abandon(&o);
        return -1;
    }
    return base_out_commit(&o, err, errlen);
}

int fe_export_onnx(const ir_graph *g, fe_values_fn values, void *ctx, const char *path,
                   char *err, size_t errlen)
{
    ex e = {.g = g, .values = values, .ctx = ctx, .err = err, .errlen = errlen};
    base_catch c;
    base_catch_push(&c);
    if (setjmp(c.jump))
        return base_fail(err, errlen, "%s: out of memory", path);
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    int rc = build(&e, &m);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (rc == 0) {
        len = onnx__model_proto__get_packed_size(&m);
        bytes = base_xmalloc(len ? len : 1);
        onnx__model_proto__pack(&m, bytes);
    }
    base_arena_free(&e.arena);
    base_catch_pop(&c);
    if (rc == 0)
        rc = write_atomic(path, bytes, len, err, errlen);
    base_free(bytes);
    return rc;
}
