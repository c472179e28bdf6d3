/* ONNX ops -> IR nodes, op by op (frontend/onnx/internal.h).
 *
 * Each handler checks the node's attributes (an attribute it does not know is
 * an error: nothing is silently ignored) and either builds IR nodes, typed by
 * ir_infer as the .net frontend's are, or, when every input is a constant and
 * the op is shape arithmetic (Shape, Gather, Concat, Unsqueeze, Add on int64
 * ...), computes its result at import.  What gnc cannot express exactly is
 * reported as unsupported, naming the node, op, opset and the reason.
 *
 * The ONNX patterns that gnc export writes for one IR op (export.c; its
 * helper values and constants named "<value>.<role>") import as that op
 * again, so that export then import gives a model's IR text back: the
 * pattern's last node makes the op from what the earlier ones made, which
 * the sweep at the end of the import then drops.  A pattern is taken by its
 * structure and constants and, where the ONNX nodes alone could mean
 * something else, by its names: a ConstantOfShape or Range whose constant
 * operands are named after its output is a const or arange node, not a
 * constant folded into data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(ox_ctx *cx, const char *name)
{
    for (size_t i = 0; i < cx->node->n_attribute; i++)
        if (cx->node->attribute[i]->name && strcmp(cx->node->attribute[i]->name, name) == 0)
            return cx->node->attribute[i];
    return NULL;
}

/* Every attribute of the node must be in known (comma-separated). */
static int known(ox_ctx *cx, const char *known)
{
    for (size_t i = 0; i < cx->node->n_attribute; i++) {
        const char *a = cx->node->attribute[i]->name ? cx->node->attribute[i]->name : "";
        size_t len = strlen(a);
        const char *p = known;
        int found = 0;
        while (*p && !found) {
            size_t k = strcspn(p, ",");
            found = k == len && strncmp(p, a, len) == 0;
            p += k + (p[k] == ',');
        }
        if (!found)
            return ox_unsupported(cx, "the attribute '%s'", a);
    }
    return 0;
}

static const char *type_name(int t)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR",
                                        "GRAPH", "FLOATS", "INTS", "STRINGS", "TENSORS",
                                        "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                                        "TYPE_PROTO", "TYPE_PROTOS"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "an unknown type";
}

/* Attribute name when of type t (an ONNX AttributeType), or NULL: absent,
 * or of another type, an error naming the node, the attribute, its type
 * and t (as ONNX's checker says; a value of another type read as this one
 * would be 0, 0.0 or "").  An attribute of no stated type (UNDEFINED, which
 * IR version 1 allowed) counts as t where t's field is set. */
static const Onnx__AttributeProto *typed(ox_ctx *cx, const char *name, int t)
{
    const Onnx__AttributeProto *a = attr(cx, name);
    if (!a || (int)a->type == t)
        return a;
    if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED &&
        ((t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->has_i) ||
         (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && a->has_f) ||
         (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING && a->has_s) ||
         (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints) ||
         (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS && a->n_floats) ||
         (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR && a->t)))
        return a;
    ox_error(cx, "attribute '%s' is of type %s, not the %s it must be", name,
             type_name((int)a->type), type_name(t));
    return NULL;
}

static int64_t attr_int(ox_ctx *cx, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = typed(cx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    return a ? a->i : def;
}

/* A 32-bit float (ONNX's float attributes, a float scalar's value) as the
 * shortest decimal that rounds to it: eps 1e-5 stays 1e-5, not 9.99999975e-06,
 * what the model's author wrote, as PyTorch's exporter and gnc export write it */
static double shortest(float f)
{
    char buf[32];
    for (int digits = 1; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        if ((float)strtod(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return f;
}

static double attr_float(ox_ctx *cx, const char *name, double def)
{
    const Onnx__AttributeProto *a = typed(cx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    return a ? shortest(a->f) : def;
}

/* The list attribute name into v (at most max): its count, or -1 when absent. */
static int attr_ints(ox_ctx *cx, const char *name, int64_t *v, int max)
{
    const Onnx__AttributeProto *a = attr(cx, name);
    if (a && !typed(cx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
        return -2;
    if (!a)
        return -1;
    if (a->n_ints > (size_t)max)
        return ox_error(cx, "attribute '%s' has %zu entries, more than %d", name, a->n_ints,
                        max), -2;
    for (size_t i = 0; i < a->n_ints; i++)
        v[i] = a->ints[i];
    return (int)a->n_ints;
}

/* Whether string attribute name is s (def when absent). */
static int attr_is(ox_ctx *cx, const char *name, const char *s, int def)
{
    const Onnx__AttributeProto *a = typed(cx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a)
        return def;
    return a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

static const char *attr_str(ox_ctx *cx, const char *name, char *buf, size_t len)
{
    const Onnx__AttributeProto *a = typed(cx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    snprintf(buf, len, "%.*s", a ? (int)(a->s.len < 64 ? a->s.len : 64) : 0,
             a ? (const char *)a->s.data : "");
    return buf;
}

/* ---- building IR nodes ---- */

static ir_node *mk(ox_ctx *cx, ir_op op, int nin, ir_value **in)
{
    char base[256];
    snprintf(base, sizeof base, "%s.%s", cx->base, ir_ops[op].name);
    return ir_node_new(cx->g, op, nin, in, 1, base, cx->loc);
}

/* Types n, appends it and gives its result; NULL (reported) where ir_infer refuses. */
static ir_value *fin(ox_ctx *cx, ir_node *n)
{
    ir_type t[IR_MAX_RESULTS];
    char err[512];
    ir_set_attr_defaults(cx->g, n);
    if (!ir_infer(n, t, err, sizeof err))
        return ox_error(cx, "%s", err), NULL;
    int64_t numel = 1;
    for (int i = 0; i < t[0].rank; i++)
        if (t[0].dims[i] > IR_MAX_NUMEL || __builtin_mul_overflow(numel, t[0].dims[i], &numel) ||
            numel > IR_MAX_NUMEL)
            return ox_error(cx, "the result would be too large"), NULL;
    for (int k = 0; k < n->nout; k++)
        n->out[k]->type = t[k];
    ir_append(cx->g, n);
    return n->out[0];
}

static ir_value *un(ox_ctx *cx, ir_op op, ir_value *x)
{
    return x ? fin(cx, mk(cx, op, 1, &x)) : NULL;
}

static ir_value *bin(ox_ctx *cx, ir_op op, ir_value *a, ir_value *b)
{
    ir_value *in[2] = {a, b};
    return a && b ? fin(cx, mk(cx, op, 2, in)) : NULL;
}

/* A float scalar constant (rank 0: it broadcasts). */
static ir_value *scalar(ox_ctx *cx, double v)
{
    ir_node *n = mk(cx, IR_OP_CONST, 0, NULL);
    n->out[0]->type = (ir_type){IR_F32, 0, {0}};
    ir_set_float(cx->g, n, "value", v);
    return fin(cx, n);
}

static ir_value *filled(ox_ctx *cx, ir_type t, double v)
{
    ir_node *n = mk(cx, IR_OP_CONST, 0, NULL);
    n->out[0]->type = t;
    ir_set_float(cx->g, n, "value", v);
    return fin(cx, n);
}

static ir_value *reshape(ox_ctx *cx, ir_value *x, int rank, const int64_t *dims)
{
    if (!x)
        return NULL;
    ir_type t = x->type;
    t.rank = rank;
    if (rank)
        memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    if (ir_type_eq(&t, &x->type))
        return x;
    ir_node *n = mk(cx, IR_OP_RESHAPE, 1, &x);
    ir_set_ints(cx->g, n, "shape", rank, dims);
    return fin(cx, n);
}

static ir_value *cast(ox_ctx *cx, ir_value *x, ir_dtype dt)
{
    if (!x || x->type.dtype == dt)
        return x;
    ir_node *n = mk(cx, IR_OP_CAST, 1, &x);
    n->out[0]->type = x->type;
    n->out[0]->type.dtype = dt;
    return fin(cx, n);
}

static ir_value *slice(ox_ctx *cx, ir_value *x, int axis, int64_t start, int64_t size)
{
    if (!x || (start == 0 && size == x->type.dims[axis]))
        return x;
    ir_node *n = mk(cx, IR_OP_SLICE, 1, &x);
    ir_set_int(cx->g, n, "axis", axis);
    ir_set_int(cx->g, n, "start", start);
    ir_set_int(cx->g, n, "size", size);
    return fin(cx, n);
}

static ir_value *transpose(ox_ctx *cx, ir_value *x, const int64_t *perm)
{
    if (!x)
        return NULL;
    ir_node *n = mk(cx, IR_OP_TRANSPOSE, 1, &x);
    ir_set_ints(cx->g, n, "perm", x->type.rank, perm);
    return fin(cx, n);
}

static ir_value *pad(ox_ctx *cx, ir_value *x, const int64_t *before, const int64_t *after,
                     double value)
{
    if (!x)
        return NULL;
    int none = 1;
    for (int i = 0; i < x->type.rank; i++)
        none &= before[i] == 0 && after[i] == 0;
    if (none)
        return x;
    ir_node *n = mk(cx, IR_OP_PAD, 1, &x);
    ir_set_ints(cx->g, n, "before", x->type.rank, before);
    ir_set_ints(cx->g, n, "after", x->type.rank, after);
    ir_set_float(cx->g, n, "value", value);
    return fin(cx, n);
}

/* Node n, made by an earlier ONNX node, made again for this one (its
   result named after this node's output; n is left for the sweep when
   nothing else reads it). */
static ir_value *again(ox_ctx *cx, const ir_node *n)
{
    ir_node *m = mk(cx, n->op, n->nin, n->in);
    m->nattrs = n->nattrs;
    m->attrs = n->attrs;
    return fin(cx, m);
}

/* ---- inputs ---- */

static ir_value *tensor(ox_ctx *cx, ox_val *x)
{
    return ox_tensor(cx, x);
}

/* x, a tensor gnc computes on: float. */
static ir_value *ftensor(ox_ctx *cx, ox_val *x)
{
    if (x->is_const ? x->t.dtype != IR_F32 : x->v->type.dtype != IR_F32)
        return ox_unsupported(cx, "'%s' is of type %s: gnc computes on float tensors only",
                              x->name, ox_type_name(x->onnx_type)), NULL;
    return ox_tensor(cx, x);
}

static int need(ox_ctx *cx, ox_val **in, int nin, int count)
{
    for (int i = 0; i < count; i++)
        if (i >= nin || !in[i])
            return ox_error(cx, "input %d is missing", i);
    return 0;
}

static const ir_type *type_of(const ox_val *x)
{
    return x->is_const ? &x->t : &x->v->type;
}

/* Constant integer list x into v (at most max): its count, or -1 reported. */
static int const_ints(ox_ctx *cx, ox_val *x, const char *what, int64_t *v, int max)
{
    if (!x->is_const)
        return ox_unsupported(cx, "%s ('%s') is computed at run time; gnc needs it constant",
                              what, x->name);
    int64_t n = ox_numel(&x->t);
    if (n > max)
        return ox_error(cx, "%s has %lld entries, more than %d", what, (long long)n, max);
    for (int64_t i = 0; i < n; i++) {
        double d = ox_num(x, i);
        if (x->t.dtype == IR_F32 && d != floor(d))
            return ox_error(cx, "%s must hold integers", what);
        v[i] = x->t.dtype == IR_I64 ? ((const int64_t *)x->data)[i] : (int64_t)d;
    }
    return (int)n;
}

static int const_scalar(ox_ctx *cx, ox_val *x, const char *what, double *v)
{
    if (!x->is_const)
        return ox_unsupported(cx, "%s ('%s') is computed at run time; gnc needs it constant",
                              what, x->name);
    if (ox_numel(&x->t) != 1)
        return ox_error(cx, "%s must hold one element", what);
    *v = ox_num(x, 0);
    if (x->onnx_type == OX_FLOAT)
        *v = shortest((float)*v);
    return 0;
}

static int norm_axis(ox_ctx *cx, int64_t a, int rank, int *out)
{
    if (a < -rank || a >= rank)
        return ox_error(cx, "axis %lld is out of range for rank %d", (long long)a, rank);
    *out = (int)(a < 0 ? a + rank : a);
    return 0;
}

/* ---- gnc export's patterns (docs/onnx.md, "For the importer") ---- */

/* Whether name is "<out>.<role>" or "<out>.<role>.<k>": a helper value or
   constant operand that gnc export made for the IR value out (its fresh()
   adds ".<k>" where the model already used the name). */
static int role_of(const char *name, const char *out, const char *role)
{
    size_t lo = strlen(out), lr = strlen(role);
    if (!name || strncmp(name, out, lo) != 0 || name[lo] != '.' ||
        strncmp(name + lo + 1, role, lr) != 0)
        return 0;
    const char *p = name + lo + 1 + lr;
    if (*p == 0)
        return 1;
    if (*p++ != '.' || !*p)
        return 0;
    return strspn(p, "0123456789") == strlen(p);
}

/* Whether x is the constant operand `role` of the node's export pattern: an
   initializer named after the node's output.  Such a node is an IR op that
   gnc exported, so it imports as that op even where its inputs are all
   constant (a const or arange feeding a causal mask), not as folded data. */
static int pattern_const(ox_ctx *cx, const ox_val *x, const char *role)
{
    return x && x->is_const && x->initializer && cx->node->n_output && cx->node->output[0] &&
           role_of(x->name, cx->node->output[0], role);
}

/* The IR node computing v when it is op (NULL otherwise). */
static const ir_node *def_of(const ir_value *v, ir_op op)
{
    return v && v->kind == IR_VALUE_NODE && v->def->op == op ? v->def : NULL;
}

/* Whether v is a one-element constant near want (within float rounding): a
   const node, or a parameter holding data (an initializer). */
static int scalar_near(const ir_value *v, double want)
{
    double c;
    if (!v || ir_type_numel(&v->type) != 1)
        return 0;
    if (def_of(v, IR_OP_CONST))
        c = ir_attr_float(v->def, "value");
    else if (v->kind == IR_VALUE_PARAM && v->init.kind == IR_INIT_DATA && v->init.data)
        c = v->init.data[0];
    else
        return 0;
    return fabs(c - want) <= 1e-6 * fabs(want);
}

/* n's operand other than v, where n is binary and reads v (NULL otherwise). */
static ir_value *other_operand(const ir_node *n, const ir_value *v)
{
    if (!n || n->nin != 2)
        return NULL;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : NULL;
}

/* n's operand besides a constant near want, where n is binary (NULL otherwise). */
static ir_value *beside_scalar(const ir_node *n, double want)
{
    if (!n || n->nin != 2)
        return NULL;
    return scalar_near(n->in[1], want) ? n->in[0] : scalar_near(n->in[0], want) ? n->in[1] : NULL;
}

/* x where v is x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as gnc export
   writes gelu_tanh up to the last halving; NULL otherwise. */
static ir_value *gelu_tanh_of(const ir_value *v)
{
    const ir_node *mul = def_of(v, IR_OP_MUL);
    for (int k = 0; mul && k < 2; k++) {
        ir_value *x = mul->in[k];
        const ir_node *th = def_of(beside_scalar(def_of(mul->in[1 - k], IR_OP_ADD), 1),
                                   IR_OP_TANH);
        const ir_node *inner = def_of(beside_scalar(def_of(th ? th->in[0] : NULL, IR_OP_MUL),
                                                    sqrt(2.0 / 3.14159265358979323846)),
                                      IR_OP_ADD);
        const ir_value *cubed = other_operand(inner, x);
        const ir_node *cube = def_of(beside_scalar(def_of(cubed, IR_OP_MUL), 0.044715),
                                     IR_OP_POW);
        if (cube && cube->in[0] == x && ir_attr_float(cube, "p") == 3)
            return x;
    }
    return NULL;
}

/* Whether MatMul(x, wt) -> out is gnc export's dense of a rank other than 2
   for some IR value v: wt named "v.weight_t", out "v" (no bias) or
   "v.matmul" (an Add of the bias follows). */
static int dense_matmul(const char *out, const char *wt)
{
    char v[512];
    size_t n = strlen(wt);
    for (size_t k = 0; k < n && k < sizeof v; k++) {
        if (wt[k] != '.')
            continue;
        memcpy(v, wt, k);
        v[k] = 0;
        if (role_of(wt, v, "weight_t"))
            return strcmp(out, v) == 0 || role_of(out, v, "matmul");
    }
    return 0;
}

/* The comparison (gt .. ne, a mask of 0 and 1) whose result an ONNX bool v
   holds, cast to u8 (op_binary's comparisons); NULL where v is another bool. */
static const ir_node *bool_of_compare(const ir_value *v)
{
    const ir_node *c = def_of(v, IR_OP_CAST);
    const ir_value *m = c && v->type.dtype == IR_U8 ? c->in[0] : NULL;
    if (!m || m->kind != IR_VALUE_NODE || m->def->op < IR_OP_GT || m->def->op > IR_OP_NE)
        return NULL;
    return m->def;
}

/* Whether a constant of type t may be computed at import: those that grow
   from small inputs (a broadcast, Expand, ConstantOfShape, Range, Gather) are
   capped at 2^26 elements, so that a hostile file cannot ask for terabytes. */
static int fold_fits(ox_ctx *cx, const ir_type *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0 || __builtin_mul_overflow(n, t->dims[i], &n) || n > (1 << 26))
            return ox_unsupported(cx, "a constant of more than 2^26 elements computed at "
                                  "import"), 0;
    return 1;
}

static int all_const(ox_val **in, int nin)
{
    for (int i = 0; i < nin; i++)
        if (in[i] && !in[i]->is_const)
            return 0;
    return 1;
}

/* ---- constants: shape arithmetic at import ---- */

/* NumPy's broadcast of a and b into o; 0 where they do not broadcast. */
static int broadcast(const ir_type *a, const ir_type *b, ir_type *o)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    o->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        o->dims[i] = da == 1 ? db : da;
    }
    return 1;
}

/* The index into x (broadcast to o) of o's element i. */
static int64_t bindex(const ir_type *x, const ir_type *o, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int d = o->rank - 1; d >= 0; d--) {
        int64_t c = i % o->dims[d];
        i /= o->dims[d];
        int k = d - (o->rank - x->rank);
        if (k >= 0) {
            if (x->dims[k] != 1)
                idx += c * stride;
            stride *= x->dims[k];
        }
    }
    return idx;
}

/* out = x with the shape t (same elements) */
static void const_reshape(ox_ctx *cx, ox_val *x, ox_val *out, int rank, const int64_t *dims)
{
    ir_type t = x->t;
    t.rank = rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    void *d = ox_set_const(cx, out, t, x->onnx_type);
    memcpy(d, x->data, (size_t)ox_numel(&t) * ir_dtype_size(t.dtype));
    out->initializer = x->initializer;   /* a weight reshaped stays a weight */
    out->origin = x->origin;
}

/* ---- elementwise ---- */

/* An ONNX operator that is an IR_UNARY op one to one (ops.def's ONNX table). */
static int onnx_unary(const char *op_type)
{
    int op = ir_op_of_onnx(op_type);
    return op >= 0 && ir_op_is((ir_op)op, IR_UNARY) ? op : -1;
}

static int op_unary(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    ir_op op = (ir_op)onnx_unary(cx->node->op_type);
    if (cx->opset < ir_onnx_since(op))
        return ox_unsupported(cx, "%s is in ONNX from opset %d, the model's opset is %d",
                              cx->node->op_type, ir_onnx_since(op), (int)cx->opset);
    if (known(cx, "") || need(cx, in, nin, 1))
        return -1;
    if (in[0]->is_const && (op == IR_OP_NEG || op == IR_OP_ABS)) {
        /* shape arithmetic on integers: folded */
        ox_set_const(cx, out[0], in[0]->t, in[0]->onnx_type);
        for (int64_t i = 0, n = ox_numel(&in[0]->t); i < n; i++) {
            double v = ox_num(in[0], i);
            ox_put_num(out[0], i, op == IR_OP_NEG ? -v : fabs(v));
        }
        return 0;
    }
    ir_value *x = ftensor(cx, in[0]), *y = un(cx, op, x);
    if (!y)
        return -1;
    ox_set_tensor(cx, out[0], y);
    return 0;
}

static int set(ox_ctx *cx, ox_val *out, ir_value *v)
{
    if (!v)
        return -1;
    if (out)
        ox_set_tensor(cx, out, v);
    return 0;
}

static int op_unary_with(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    const char *t = cx->node->op_type;
    if (need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    ir_node *n;
    if (strcmp(t, "LeakyRelu") == 0 || strcmp(t, "Elu") == 0) {
        int leaky = t[0] == 'L';
        if (known(cx, "alpha"))
            return -1;
        n = mk(cx, leaky ? IR_OP_LEAKY_RELU : IR_OP_ELU, 1, &x);
        ir_set_float(cx->g, n, leaky ? "slope" : "alpha",
                     attr_float(cx, "alpha", leaky ? 0.01 : 1));
        return set(cx, out[0], fin(cx, n));
    }
    if (strcmp(t, "Selu") == 0) {
        if (known(cx, "alpha,gamma"))
            return -1;
        n = mk(cx, IR_OP_ELU, 1, &x);
        ir_set_float(cx->g, n, "alpha", attr_float(cx, "alpha", 1.67326319217681884765625));
        return set(cx, out[0], bin(cx, IR_OP_MUL, fin(cx, n),
                                   scalar(cx, attr_float(cx, "gamma", 1.05070102214813232421875))));
    }
    if (strcmp(t, "HardSigmoid") == 0) {
        if (known(cx, "alpha,beta"))
            return -1;
        ir_value *ax = bin(cx, IR_OP_MUL, x, scalar(cx, attr_float(cx, "alpha", 0.2)));
        ir_value *y = bin(cx, IR_OP_ADD, ax, scalar(cx, attr_float(cx, "beta", 0.5)));
        if (!y)
            return -1;
        n = mk(cx, IR_OP_CLAMP, 1, &y);
        ir_set_float(cx->g, n, "min", 0);
        ir_set_float(cx->g, n, "max", 1);
        return set(cx, out[0], fin(cx, n));
    }
    if (strcmp(t, "Reciprocal") == 0) {
        if (known(cx, ""))
            return -1;
        const ir_node *sq = def_of(x, IR_OP_SQRT);
        if (sq && role_of(in[0]->name, cx->base, "sqrt"))   /* gnc export's rsqrt */
            return set(cx, out[0], un(cx, IR_OP_RSQRT, sq->in[0]));
        return set(cx, out[0], bin(cx, IR_OP_DIV, scalar(cx, 1), x));
    }
    if (strcmp(t, "ThresholdedRelu") == 0) {
        if (known(cx, "alpha"))
            return -1;
        ir_value *in3[3] = {bin(cx, IR_OP_GT, x, scalar(cx, attr_float(cx, "alpha", 1))), x,
                            scalar(cx, 0)};
        return in3[0] && in3[2] ? set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, in3))) : -1;
    }
    if (strcmp(t, "Gelu") == 0) {
        if (known(cx, "approximate"))
            return -1;
        int tanh_form = attr_is(cx, "approximate", "tanh", 0);
        if (!tanh_form && !attr_is(cx, "approximate", "none", 1))
            return ox_unsupported(cx, "approximate other than none or tanh");
        return set(cx, out[0], un(cx, tanh_form ? IR_OP_GELU_TANH : IR_OP_GELU, x));
    }
    /* PRelu: slope x where x < 0 */
    if (known(cx, "") || need(cx, in, nin, 2))
        return -1;
    ir_value *s = ftensor(cx, in[1]);
    ir_value *in3[3] = {bin(cx, IR_OP_LT, x, scalar(cx, 0)), bin(cx, IR_OP_MUL, x, s), x};
    return in3[0] && in3[1] ? set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, in3))) : -1;
}

static int op_clip(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    double lo = -INFINITY, hi = INFINITY;
    if (need(cx, in, nin, 1))
        return -1;
    if (cx->opset < 11) {
        if (known(cx, "min,max"))
            return -1;
        lo = attr_float(cx, "min", -INFINITY);
        hi = attr_float(cx, "max", INFINITY);
    } else {
        if (known(cx, ""))
            return -1;
        if ((nin > 1 && in[1] && !in[1]->is_const) || (nin > 2 && in[2] && !in[2]->is_const)) {
            /* bounds at run time: max(x, min), then min(that, max), which is clamp's
               result, NaN and min > max included */
            ir_value *y = ftensor(cx, in[0]);
            if (y && nin > 1 && in[1])
                y = bin(cx, IR_OP_MAXIMUM, y, ftensor(cx, in[1]));
            if (y && nin > 2 && in[2])
                y = bin(cx, IR_OP_MINIMUM, y, ftensor(cx, in[2]));
            return set(cx, out[0], y);
        }
        if ((nin > 1 && in[1] && const_scalar(cx, in[1], "min", &lo)) ||
            (nin > 2 && in[2] && const_scalar(cx, in[2], "max", &hi)))
            return -1;
    }
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    ir_node *n = mk(cx, IR_OP_CLAMP, 1, &x);
    ir_set_float(cx->g, n, "min", lo);
    ir_set_float(cx->g, n, "max", hi);
    return set(cx, out[0], fin(cx, n));
}

static int op_pow(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    double p;
    if (known(cx, "") || need(cx, in, nin, 2) || const_scalar(cx, in[1], "the exponent", &p))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    ir_node *n = mk(cx, IR_OP_POW, 1, &x);
    ir_set_float(cx->g, n, "p", p);
    return set(cx, out[0], fin(cx, n));
}

static int op_identity(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    if (need(cx, in, nin, 1))
        return -1;
    if (strcmp(cx->node->op_type, "Dropout") == 0) {
        if (known(cx, "ratio,seed"))
            return -1;
        if (nin > 2 && in[2]) {
            double train;
            if (const_scalar(cx, in[2], "training_mode", &train))
                return -1;
            if (train != 0)
                return ox_unsupported(cx, "training_mode (gnc imports inference graphs)");
        }
        if (nout > 1 && out[1]) {
            /* at inference every element is kept: a mask of true */
            ir_type t = *type_of(in[0]);
            t.dtype = IR_F32;
            out[1]->onnx_type = OX_BOOL;
            if (set(cx, out[1], cast(cx, filled(cx, t, 1), IR_U8)))
                return -1;
        }
        /* a float tensor kept as gnc's dropout, the identity at inference that
           remembers p (its ratio: the attribute before opset 12, then input 1)
           for training the imported model */
        double p = attr_float(cx, "ratio", 0.5);
        int known_p = !(nin > 1 && in[1]) || (in[1]->is_const && ox_numel(&in[1]->t) == 1 &&
                                              const_scalar(cx, in[1], "the ratio", &p) == 0);
        /* a ratio given at run time does not matter at inference: no dropout
           node then, the identity */
        if (known_p && p >= 0 && p < 1 && !in[0]->is_const &&
            ir_is_float(type_of(in[0])->dtype)) {
            ir_value *x = in[0]->v;
            ir_node *n = mk(cx, IR_OP_DROPOUT, 1, &x);
            ir_set_float(cx->g, n, "p", p);
            return set(cx, out[0], fin(cx, n));
        }
    } else if (known(cx, "")) {
        return -1;
    }
    if (in[0]->is_const) {
        *out[0] = (ox_val){.name = out[0]->name, .onnx_type = in[0]->onnx_type, .is_const = 1,
                           /* named anew: torch.onnx.export gives a parameter that
                              equals another's the name of an Identity of it */
                           .initializer = in[0]->initializer,
                           .origin = in[0]->origin ? out[0]->name : NULL, .t = in[0]->t,
                           .data = in[0]->data, .kind = in[0]->kind};
        return 0;
    }
    out[0]->onnx_type = in[0]->onnx_type;
    out[0]->v = in[0]->v;
    return 0;
}

/* Add .. Div, Max, Min, comparisons: c the fold's operator */
static double binary_num(char c, double a, double b, int integer)
{
    switch (c) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    case '/': return integer ? (b == 0 ? 0 : trunc(a / b)) : a / b;
    case 'M': return a != a || b != b ? NAN : a > b ? a : b;
    case 'm': return a != a || b != b ? NAN : a < b ? a : b;
    case '=': return a == b;
    case '>': return a > b;
    case '<': return a < b;
    case 'g': return a >= b;
    default: return a <= b;
    }
}

static const struct {
    const char *name;
    char c;
    ir_op op;
} binary_ops[] = {
    {"Add", '+', IR_OP_ADD}, {"Sub", '-', IR_OP_SUB}, {"Mul", '*', IR_OP_MUL},
    {"Div", '/', IR_OP_DIV}, {"Max", 'M', IR_OP_MAXIMUM}, {"Min", 'm', IR_OP_MINIMUM},
    {"Sum", '+', IR_OP_ADD}, {"Mean", '+', IR_OP_ADD},
    {"Equal", '=', IR_OP_EQ}, {"Greater", '>', IR_OP_GT}, {"Less", '<', IR_OP_LT},
    {"GreaterOrEqual", 'g', IR_OP_GE}, {"LessOrEqual", 'l', IR_OP_LE},
};

static int fold_binary(ox_ctx *cx, char c, ox_val *a, ox_val *b, ox_val *out, int cmp)
{
    ir_type o;
    if (!broadcast(&a->t, &b->t, &o))
        return ox_error(cx, "the operands do not broadcast");
    o.dtype = cmp ? IR_U8 : a->t.dtype;
    if (!fold_fits(cx, &o))
        return -1;
    ox_val r = {.name = out->name, .t = o, .kind = IR_VALUE_PARAM};
    ox_set_const(cx, &r, o, cmp ? OX_BOOL : a->onnx_type);
    int integer = a->t.dtype != IR_F32;
    for (int64_t i = 0, n = ox_numel(&o); i < n; i++)
        ox_put_num(&r, i, binary_num(c, ox_num(a, bindex(&a->t, &o, i)),
                                     ox_num(b, bindex(&b->t, &o, i)), integer));
    *out = r;
    return 0;
}

/* Erf: gnc has no erf op, but its gelu is x (1 + erf(x / sqrt 2)) / 2, which
   is how PyTorch exports GELU before opset 20: Div(x, sqrt 2) -> Erf -> Add 1
   -> Mul x (-> Mul 0.5).  Erf of x / sqrt 2 is kept as a mark (ox_val.erf_of),
   the Add and the Mul of the pattern turn it into 2 gelu(x), and any other use
   of it is unsupported. */
static int op_erf(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 1))
        return -1;
    const ir_node *d = def_of(in[0]->v, IR_OP_DIV);
    if (!d || !scalar_near(d->in[1], sqrt(2.0)))
        return ox_unsupported(cx, "gnc has no erf; it maps Erf only within GELU, "
                              "x (1 + erf(x / sqrt 2)) / 2");
    out[0]->erf_of = d->in[0];
    out[0]->t = d->in[0]->type;
    return 0;
}

/* The steps of GELU after Erf (op_erf): 1 + erf(x / sqrt 2), then times x */
static int gelu_step(ox_ctx *cx, int add, ox_val **in, ox_val **out)
{
    int k = in[0]->erf_of ? 0 : 1;
    ox_val *p = in[k], *o = in[1 - k];
    double one;
    if (add && !p->erf_plus1 && o->is_const && ox_numel(&o->t) == 1 &&
        const_scalar(cx, o, "1", &one) == 0 && one == 1) {
        out[0]->erf_of = p->erf_of;
        out[0]->erf_plus1 = 1;
        out[0]->t = p->t;
        return 0;
    }
    if (!add && p->erf_plus1 && o->v == p->erf_of && !o->erf_of) {
        /* x (1 + erf(x / sqrt 2)) is 2 gelu(x); the halving that ends the
           pattern takes gelu(x) itself (op_binary), and the doubling is then
           left unused (swept at the end of the import) */
        ir_value *g = un(cx, IR_OP_GELU, o->v);
        if (set(cx, out[0], bin(cx, IR_OP_MUL, g, scalar(cx, 2))))
            return -1;
        out[0]->gelu = g;
        return 0;
    }
    return ox_unsupported(cx, "'%s' is an Erf's result: gnc has no erf, and maps Erf only "
                          "within GELU, x (1 + erf(x / sqrt 2)) / 2", p->name);
}

/* GELU's last step, the halving of two = 2 gelu(x) (gelu_step), as the
 * ONNX value out: the first halving names gelu(x), made by an earlier node,
 * after out (its node made again with a result so named, its uses moved to
 * it); a later halving of the same value takes that named gelu(x) as it is. */
static int halve_gelu(ox_ctx *cx, ox_val *two, ox_val *out)
{
    if (!two->gelu_named) {
        ir_value *g = two->gelu;
        ir_node *n = g->def;
        ir_value *v = ir_value_new(cx->g, out->name, n->loc);
        v->type = g->type;
        ir_node *m = ir_node_make(cx->g, n->op, n->nin, n->in, 1, &v, n->loc);
        ir_insert_before(cx->g, n, m);
        ir_replace_uses(cx->g, g, v);
        ir_erase(cx->g, n);
        two->gelu = v;
        two->gelu_named = 1;
    }
    return set(cx, out, two->gelu);
}

static int op_binary(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    const char *t = cx->node->op_type;
    int k = 0;
    while (strcmp(binary_ops[k].name, t) != 0)
        k++;
    char c = binary_ops[k].c;
    int variadic = c == 'M' || c == 'm' || strcmp(t, "Sum") == 0 || strcmp(t, "Mean") == 0;
    int cmp = binary_ops[k].op >= IR_OP_GT && binary_ops[k].op <= IR_OP_NE;
    if (known(cx, "") || need(cx, in, nin, variadic ? 1 : 2))
        return -1;
    for (int i = 0; i < nin; i++)
        if (!in[i])
            return ox_error(cx, "input %d is missing", i);
    if (nin == 2 && (in[0]->erf_of || in[1]->erf_of))
        return gelu_step(cx, c == '+', in, out);
    double half;
    if (nin == 2 && in[0]->gelu && (c == '*' || c == '/') && in[1]->is_const &&
        ox_numel(&in[1]->t) == 1 && const_scalar(cx, in[1], "a factor", &half) == 0 &&
        half == (c == '*' ? 0.5 : 2)) /* GELU's last step: 2 gelu(x) halved */
        return halve_gelu(cx, in[0], out[0]);
    if (nin == 2 && in[1]->gelu && c == '*' && in[0]->is_const && ox_numel(&in[0]->t) == 1 &&
        const_scalar(cx, in[0], "a factor", &half) == 0 && half == 0.5)
        return halve_gelu(cx, in[1], out[0]);
    for (int i = 0; nin == 2 && c == '*' && i < 2; i++) {
        /* gnc export's gelu_tanh: its last step, x (1 + tanh(...)) times 0.5 */
        ox_val *h = in[1 - i], *m = in[i];
        ir_value *x = !m->is_const && role_of(m->name, cx->base, "mul") && h->is_const &&
                              ox_numel(&h->t) == 1 && ox_num(h, 0) == 0.5
                          ? gelu_tanh_of(m->v) : NULL;
        if (x)
            return set(cx, out[0], un(cx, IR_OP_GELU_TANH, x));
        /* gnc export's silu: x times sigmoid(x) */
        const ir_node *sg = m->is_const ? NULL : def_of(m->v, IR_OP_SIGMOID);
        if (sg && !h->is_const && h->v == sg->in[0] && role_of(m->name, cx->base, "sigmoid"))
            return set(cx, out[0], un(cx, IR_OP_SILU, h->v));
    }
    for (int i = 0; nin == 2 && c == '+' && i < 2; i++) {
        /* gnc export's dense of a rank other than 2: the bias added to
           MatMul(x, Transpose(w)) -> v.matmul, which op_matmul made a dense */
        const ir_node *d = in[i]->is_const ? NULL : def_of(in[i]->v, IR_OP_DENSE);
        const ir_type *bt = type_of(in[1 - i]);
        if (d && d->nin == 2 && role_of(in[i]->name, cx->base, "matmul") && bt->rank == 1 &&
            bt->dtype == IR_F32 && bt->dims[0] == d->in[1]->type.dims[0]) {
            ir_value *dx[3] = {d->in[0], d->in[1], ftensor(cx, in[1 - i])};
            return dx[2] ? set(cx, out[0], fin(cx, mk(cx, IR_OP_DENSE, 3, dx))) : -1;
        }
    }
    if (!variadic && nin != 2)
        return ox_error(cx, "%s takes 2 inputs, got %d", t, nin);
    for (int i = 1; i < nin; i++)
        if (type_of(in[i])->dtype != type_of(in[0])->dtype)
            return ox_error(cx, "the inputs' types differ");
    if (all_const(in, nin) && strcmp(t, "Mean") != 0) {
        ox_val acc = *in[0];
        for (int i = 1; i < nin; i++) {
            ox_val r = {.name = out[0]->name, .kind = IR_VALUE_PARAM};
            if (fold_binary(cx, c, &acc, in[i], &r, cmp))
                return -1;
            acc = r;
        }
        *out[0] = acc;
        out[0]->name = cx->node->output[0];
        out[0]->v = NULL;
        return 0;
    }
    ir_value *acc = ftensor(cx, in[0]);
    for (int i = 1; i < nin && acc; i++)
        acc = bin(cx, binary_ops[k].op, acc, ftensor(cx, in[i]));
    if (acc && strcmp(t, "Mean") == 0 && nin > 1)
        acc = bin(cx, IR_OP_DIV, acc, scalar(cx, nin));
    if (acc && cmp) {
        acc = cast(cx, acc, IR_U8);
        out[0]->onnx_type = OX_BOOL;
    }
    return set(cx, out[0], acc);
}

static int op_where(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 3))
        return -1;
    if (all_const(in, nin)) {
        ir_type o, ab;
        if (!broadcast(&in[1]->t, &in[2]->t, &ab) || !broadcast(&in[0]->t, &ab, &o))
            return ox_error(cx, "the operands do not broadcast");
        o.dtype = in[1]->t.dtype;
        if (!fold_fits(cx, &o))
            return -1;
        ox_set_const(cx, out[0], o, in[1]->onnx_type);
        for (int64_t i = 0, n = ox_numel(&o); i < n; i++)
            ox_put_num(out[0], i, ox_num(in[0], bindex(&in[0]->t, &o, i)) != 0
                                      ? ox_num(in[1], bindex(&in[1]->t, &o, i))
                                      : ox_num(in[2], bindex(&in[2]->t, &o, i)));
        return 0;
    }
    ir_value *x[3] = {NULL, NULL, NULL};
    const ir_node *c = in[0]->is_const || in[0]->onnx_type != OX_BOOL
                           ? NULL : def_of(in[0]->v, IR_OP_CAST);
    const ir_node *ne = c ? def_of(c->in[0], IR_OP_NE) : NULL;
    if (ne && ne->in[0]->type.dtype == IR_F32 && scalar_near(ne->in[1], 0))
        /* Cast(x, to = BOOL) is x != 0, which is how where reads a float
           mask (gnc export's where): x itself */
        x[0] = ne->in[0];
    else if (c && bool_of_compare(in[0]->v))
        x[0] = c->in[0];   /* a comparison's mask of 0 and 1, as a float */
    else
        x[0] = cast(cx, tensor(cx, in[0]), IR_F32);
    if (!x[0] || !(x[1] = ftensor(cx, in[1])) || !(x[2] = ftensor(cx, in[2])))
        return -1;
    return set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, x)));
}

/* Trilu (opset 14): the lower (upper = 0) or upper triangle of the last two
   axes from diagonal k, the rest 0.  Of a constant (torch.tril of ones, a
   causal mask), folded; else where(mask, x, 0) with the mask from two
   aranges, as the DSL's tril and triu, which the attention pass evaluates
   (passes/attention.c) */
static int op_trilu(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "upper") || need(cx, in, nin, 1))
        return -1;
    if (cx->opset < 14)
        return ox_unsupported(cx, "Trilu is in ONNX from opset 14, the model's opset is %d",
                              (int)cx->opset);
    int64_t k = 0;
    if (nin > 1 && in[1]) {
        int c = const_ints(cx, in[1], "k", &k, 1);
        if (c < 0)
            return -1;
        if (c != 1)
            return ox_error(cx, "k must hold one element");
    }
    int upper = attr_int(cx, "upper", 1) != 0;
    const ir_type *t = type_of(in[0]);
    if (t->rank < 2)
        return ox_error(cx, "Trilu takes a tensor of rank 2 or more, got rank %d", t->rank);
    int64_t rows = t->dims[t->rank - 2], cols = t->dims[t->rank - 1];
    /* j - i lies in [-(rows - 1), cols - 1]: a k past that keeps all or none */
    k = k < -rows ? -rows : k > cols ? cols : k;
    if (in[0]->is_const) {
        ox_val *x = in[0];
        ox_set_const(cx, out[0], x->t, x->onnx_type);
        for (int64_t i = 0, n = ox_numel(&x->t); i < n; i++) {
            int64_t d = i % cols - i / cols % rows;
            ox_put_num(out[0], i, (upper ? d >= k : d <= k) ? ox_num(x, i) : 0);
        }
        return 0;
    }
    if (rows > (1 << 24) || cols > (1 << 24))
        return ox_unsupported(cx, "a triangle of %lld x %lld, whose indices float cannot hold",
                              (long long)rows, (long long)cols);
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    ir_value *ar[2];
    for (int i = 0; i < 2; i++) { /* row i + k, column j */
        ir_node *a = mk(cx, IR_OP_ARANGE, 0, NULL);
        a->out[0]->type = (ir_type){IR_F32, 1, {i ? cols : rows}};
        ir_set_float(cx->g, a, "start", i ? 0 : (double)k);
        ir_set_float(cx->g, a, "step", 1);
        ar[i] = fin(cx, a);
    }
    ir_value *row = reshape(cx, ar[0], 2, (int64_t[]){rows, 1});
    ir_value *col = reshape(cx, ar[1], 2, (int64_t[]){1, cols});
    ir_value *w[3] = {bin(cx, upper ? IR_OP_GE : IR_OP_LE, col, row), x, scalar(cx, 0)};
    if (!w[0] || !w[2])
        return -1;
    return set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, w)));
}

/* ---- linear algebra ---- */

static int op_matmul(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 2))
        return -1;
    ir_value *a = ftensor(cx, in[0]), *b = a ? ftensor(cx, in[1]) : NULL;
    if (!a || !b)
        return -1;
    int ra = a->type.rank, rb = b->type.rank;
    if (ra == 0 || rb == 0)
        return ox_error(cx, "MatMul of a scalar");
    const ir_node *t = def_of(b, IR_OP_TRANSPOSE);
    int c;
    if (t && rb == 2 && ir_attr_ints(t, "perm", &c)[0] == 1 &&
        t->in[0]->kind == IR_VALUE_PARAM && dense_matmul(cx->base, b->name)) {
        /* gnc export's dense of a rank other than 2: MatMul(x, Transpose(w)).
           The bias, if any, joins at the Add that follows (op_binary). */
        ir_value *d[2] = {a, t->in[0]};
        return set(cx, out[0], fin(cx, mk(cx, IR_OP_DENSE, 2, d)));
    }
    /* NumPy's rule: a vector is a matrix of one row (a) or one column (b),
       whose dimension leaves the result */
    if (ra == 1)
        a = reshape(cx, a, 2, (int64_t[]){1, a->type.dims[0]});
    if (rb == 1)
        b = reshape(cx, b, 2, (int64_t[]){b->type.dims[0], 1});
    ir_value *y = bin(cx, IR_OP_MATMUL, a, b);
    if (y && (ra == 1 || rb == 1)) {
        ir_type t = y->type;
        int64_t dims[IR_MAX_RANK];
        int r = 0;
        for (int i = 0; i < t.rank; i++)
            if (!((ra == 1 && i == t.rank - 2) || (rb == 1 && i == t.rank - 1)))
                dims[r++] = t.dims[i];
        y = reshape(cx, y, r, dims);
    }
    return set(cx, out[0], y);
}

static int op_gemm(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "alpha,beta,transA,transB") || need(cx, in, nin, 2))
        return -1;
    double alpha = attr_float(cx, "alpha", 1), beta = attr_float(cx, "beta", 1);
    int ta = attr_int(cx, "transA", 0) != 0, tb = attr_int(cx, "transB", 0) != 0;
    ir_value *a = ftensor(cx, in[0]), *b = a ? ftensor(cx, in[1]) : NULL;
    ir_value *c = b && nin > 2 && in[2] ? ftensor(cx, in[2]) : NULL;
    if (!a || !b || (nin > 2 && in[2] && !c))
        return -1;
    if (a->type.rank != 2 || b->type.rank != 2)
        return ox_error(cx, "Gemm takes matrices");
    static const int64_t swap[2] = {1, 0};
    if (ta)
        a = transpose(cx, a, swap);
    ir_value *y;
    if (tb && alpha == 1 && (!c || (beta == 1 && c->type.rank == 1 &&
                                    c->type.dims[0] == b->type.dims[0]))) {
        /* x wᵀ + bias: a dense layer as PyTorch exports it */
        ir_value *d[3] = {a, b, c};
        return a ? set(cx, out[0], fin(cx, mk(cx, IR_OP_DENSE, c ? 3 : 2, d))) : -1;
    }
    if (tb)
        b = transpose(cx, b, swap);
    y = bin(cx, IR_OP_MATMUL, a, b);
    if (y && alpha != 1)
        y = bin(cx, IR_OP_MUL, y, scalar(cx, alpha));
    if (y && c && beta != 0)
        y = bin(cx, IR_OP_ADD, y, beta == 1 ? c : bin(cx, IR_OP_MUL, c, scalar(cx, beta)));
    return set(cx, out[0], y);
}

/* ---- windows: convolution and pooling ---- */

typedef struct {
    int ns;                     /* spatial dims: 1 or 2 */
    int64_t k[2], s[2], d[2], pb[2], pe[2];
} window;

/* The window of a node over spatial dims in[] (kernel k given), from
 * strides, dilations, pads and auto_pad. */
static int get_window(ox_ctx *cx, window *w, const int64_t *in, int dilations)
{
    int64_t v[8];
    int n;
    for (int i = 0; i < w->ns; i++)
        w->s[i] = w->d[i] = 1, w->pb[i] = w->pe[i] = 0;
    if ((n = attr_ints(cx, "strides", v, 8)) >= 0) {
        if (n != w->ns)
            return ox_error(cx, "strides has %d entries for %d spatial dimensions", n, w->ns);
        memcpy(w->s, v, (size_t)n * sizeof *v);
    }
    if (dilations && (n = attr_ints(cx, "dilations", v, 8)) >= 0) {
        if (n != w->ns)
            return ox_error(cx, "dilations has %d entries for %d spatial dimensions", n, w->ns);
        memcpy(w->d, v, (size_t)n * sizeof *v);
    }
    if (n == -2)
        return -1;
    for (int i = 0; i < w->ns; i++) {
        if (w->s[i] < 1 || w->d[i] < 1 || w->k[i] < 1)
            return ox_error(cx, "kernel, strides and dilations must be 1 or more");
        /* sizes from the file: bounded, so that the window arithmetic cannot overflow */
        if (w->s[i] > IR_MAX_NUMEL || w->d[i] > IR_MAX_NUMEL || w->k[i] > IR_MAX_NUMEL ||
            w->k[i] - 1 > IR_MAX_NUMEL / w->d[i])
            return ox_error(cx, "kernel, strides or dilations too large");
    }
    char ap[80];
    attr_str(cx, "auto_pad", ap, sizeof ap);
    if (!ap[0] || strcmp(ap, "NOTSET") == 0) {
        if ((n = attr_ints(cx, "pads", v, 8)) >= 0) {
            if (n != 2 * w->ns)
                return ox_error(cx, "pads has %d entries for %d spatial dimensions", n, w->ns);
            for (int i = 0; i < w->ns; i++) {
                w->pb[i] = v[i];
                w->pe[i] = v[i + w->ns];
                if (w->pb[i] < 0 || w->pe[i] < 0)
                    return ox_unsupported(cx, "negative pads");
                if (w->pb[i] > IR_MAX_NUMEL || w->pe[i] > IR_MAX_NUMEL)
                    return ox_error(cx, "pads too large");
            }
        } else if (n == -2) {
            return -1;
        }
    } else if (strcmp(ap, "VALID") == 0) {
        /* no padding */
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        for (int i = 0; i < w->ns; i++) {
            int64_t o = (in[i] + w->s[i] - 1) / w->s[i];
            int64_t total = (o - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in[i];
            if (total < 0)
                total = 0;
            int64_t small = total / 2;
            w->pb[i] = ap[5] == 'U' ? small : total - small;
            w->pe[i] = total - w->pb[i];
        }
    } else {
        return ox_unsupported(cx, "auto_pad '%s'", ap);
    }
    return 0;
}

/* x [n, c, spatial...] as 4-d (a 1-d one with height 1) */
static ir_value *as4(ox_ctx *cx, ir_value *x)
{
    if (!x || x->type.rank == 4)
        return x;
    const int64_t *d = x->type.dims;
    return reshape(cx, x, 4, (int64_t[]){d[0], d[1], 1, d[2]});
}

static void window4(const window *w, int64_t *k, int64_t *s, int64_t *d, int64_t *pb,
                    int64_t *pe)
{
    int o = w->ns == 1;
    k[0] = s[0] = d[0] = 1, pb[0] = pe[0] = 0;
    for (int i = 0; i < w->ns; i++)
        k[i + o] = w->k[i], s[i + o] = w->s[i], d[i + o] = w->d[i], pb[i + o] = w->pb[i],
        pe[i + o] = w->pe[i];
}

/* y 4-d back to x's rank (1-d: drop the height) */
static ir_value *back(ox_ctx *cx, ir_value *y, int rank)
{
    if (!y || rank == 4)
        return y;
    const int64_t *d = y->type.dims;
    return reshape(cx, y, 3, (int64_t[]){d[0], d[1], d[3]});
}

static int spatial(ox_ctx *cx, ir_value *x, const char *what)
{
    if (x->type.rank == 3 || x->type.rank == 4)
        return 0;
    return ox_unsupported(cx, "%s of rank %d (gnc has 1-d and 2-d %s)", what, x->type.rank, what);
}

static int op_conv(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "auto_pad,dilations,group,kernel_shape,pads,strides") || need(cx, in, nin, 2))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *w = x ? ftensor(cx, in[1]) : NULL;
    ir_value *b = w && nin > 2 && in[2] ? ftensor(cx, in[2]) : NULL;
    if (!x || !w || (nin > 2 && in[2] && !b) || spatial(cx, x, "convolution"))
        return -1;
    int rank = x->type.rank;
    if (w->type.rank != rank)
        return ox_error(cx, "the weight's rank differs from the input's");
    window win = {rank - 2, {0}, {0}, {0}, {0}, {0}};
    for (int i = 0; i < win.ns; i++)
        win.k[i] = w->type.dims[2 + i];
    int64_t ks[8];
    int n = attr_ints(cx, "kernel_shape", ks, 8);
    if (n == -2)
        return -1;
    if (n >= 0 && (n != win.ns || memcmp(ks, win.k, (size_t)n * sizeof *ks) != 0))
        return ox_error(cx, "kernel_shape differs from the weight's shape");
    if (get_window(cx, &win, x->type.dims + 2, 1))
        return -1;
    int64_t k[2], s[2], d[2], pb[2], pe[2];
    window4(&win, k, s, d, pb, pe);
    x = as4(cx, x);
    w = as4(cx, w);
    if (pb[0] != pe[0] || pb[1] != pe[1]) {
        /* uneven padding: zeros around the input, then none */
        x = pad(cx, x, (int64_t[]){0, 0, pb[0], pb[1]}, (int64_t[]){0, 0, pe[0], pe[1]}, 0);
        pb[0] = pb[1] = 0;
    }
    ir_value *ins[3] = {x, w, b};
    if (!x || !w)
        return -1;
    ir_node *c = mk(cx, IR_OP_CONV2D, b ? 3 : 2, ins);
    ir_set_ints(cx->g, c, "stride", 2, s);
    ir_set_ints(cx->g, c, "pad", 2, pb);
    ir_set_ints(cx->g, c, "dilation", 2, d);
    ir_set_int(cx->g, c, "groups", attr_int(cx, "group", 1));
    return set(cx, out[0], back(cx, fin(cx, c), rank));
}

/* ConvTranspose: conv2d_grad_input (which is the transposed convolution) to
   the whole output, (in - 1) s + (k - 1) d + 1 + output_padding, then the
   pads cut off its edges */
static int op_conv_transpose(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,"
                  "strides") ||
        need(cx, in, nin, 2))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *w = x ? ftensor(cx, in[1]) : NULL;
    ir_value *b = w && nin > 2 && in[2] ? ftensor(cx, in[2]) : NULL;
    if (!x || !w || (nin > 2 && in[2] && !b) || spatial(cx, x, "convolution"))
        return -1;
    int rank = x->type.rank, ns = rank - 2;
    int64_t groups = attr_int(cx, "group", 1);
    if (w->type.rank != rank || groups < 1 || w->type.dims[0] != x->type.dims[1] ||
        x->type.dims[1] % groups)
        return ox_error(cx, "the weight %s does not fit the input's channels",
                        "[C_in, C_out/group, k...]");
    window win = {ns, {0}, {0}, {0}, {0}, {0}};
    for (int i = 0; i < ns; i++)
        win.k[i] = w->type.dims[2 + i];
    int64_t ks[8], op[8] = {0}, os[8];
    int n = attr_ints(cx, "kernel_shape", ks, 8);
    if (n == -2)
        return -1;
    if (n >= 0 && (n != ns || memcmp(ks, win.k, (size_t)n * sizeof *ks) != 0))
        return ox_error(cx, "kernel_shape differs from the weight's shape");
    char ap[80];
    attr_str(cx, "auto_pad", ap, sizeof ap);
    /* ConvTranspose's SAME pads differ from Conv's (get_window) */
    int same = ap[0] && strncmp(ap, "SAME", 4) == 0;
    if (ap[0] && strcmp(ap, "NOTSET") != 0 && !same && strcmp(ap, "VALID") != 0)
        return ox_unsupported(cx, "auto_pad '%s'", ap);
    int64_t pads[8];
    int np = attr_ints(cx, "pads", pads, 8);
    int64_t st[8];
    int nst = attr_ints(cx, "strides", st, 8), nd = attr_ints(cx, "dilations", ks, 8);
    int nop = attr_ints(cx, "output_padding", op, 8), nos = attr_ints(cx, "output_shape", os, 8);
    if (np == -2 || nst == -2 || nd == -2 || nop == -2 || nos == -2)
        return -1;
    if ((np >= 0 && np != 2 * ns) || (nst >= 0 && nst != ns) || (nd >= 0 && nd != ns) ||
        (nop >= 0 && nop != ns) || (nos >= 0 && nos != ns && nos != rank))
        return ox_error(cx, "pads, strides, dilations, output_padding or output_shape has the "
                        "wrong length");
    if (nos == rank)
        memmove(os, os + 2, (size_t)ns * sizeof *os);
    int64_t full[2], pb[2], pe[2];
    for (int i = 0; i < ns; i++) {
        win.s[i] = nst >= 0 ? st[i] : 1;
        win.d[i] = nd >= 0 ? ks[i] : 1;
        if (nop < 0)
            op[i] = 0;
        if (win.s[i] < 1 || win.d[i] < 1 || op[i] < 0 || op[i] >= win.s[i])
            return ox_error(cx, "strides and dilations must be 1 or more, output_padding "
                            "below the stride");
        if (win.s[i] > IR_MAX_NUMEL || win.d[i] > IR_MAX_NUMEL ||
            win.k[i] - 1 > IR_MAX_NUMEL / win.d[i] ||
            x->type.dims[2 + i] - 1 > IR_MAX_NUMEL / win.s[i])
            return ox_error(cx, "strides or dilations too large");
        int64_t in_d = x->type.dims[2 + i];
        full[i] = (in_d - 1) * win.s[i] + (win.k[i] - 1) * win.d[i] + 1 + op[i];
        pb[i] = np >= 0 && !same && nos < 0 ? pads[i] : 0;
        pe[i] = np >= 0 && !same && nos < 0 ? pads[i + ns] : 0;
        if (nos >= 0 || same) {
            int64_t want = nos >= 0 ? os[i] : in_d * win.s[i], total = full[i] - want;
            if (want < 1 || want > IR_MAX_NUMEL)
                return ox_error(cx, "output_shape %lld", (long long)want);
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);   /* floored */
            pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? half : total - half;
            pe[i] = total - pb[i];
        }
        /* pads from the file bounded before they are added (as the strides are) */
        if (pb[i] > IR_MAX_NUMEL || pe[i] > IR_MAX_NUMEL || pb[i] < -IR_MAX_NUMEL ||
            pe[i] < -IR_MAX_NUMEL)
            return ox_error(cx, "pads too large");
        if (((pb[i] < 0 || pe[i] < 0) && nos < 0 && !same) || pb[i] + pe[i] >= full[i])
            return ox_unsupported(cx, "negative pads, or pads that leave nothing");
    }
    int64_t k4[2], s4[2], d4[2], b4[2], e4[2];
    window4(&win, k4, s4, d4, b4, e4);
    x = as4(cx, x);
    w = as4(cx, w);
    if (!x || !w)
        return -1;
    /* pads equal at both ends are conv_transpose2d's own pad (PyTorch's
       padding, gnc export's form), which crops as many from each end of the
       full output; others crop by slices (and pad where negative) below */
    int even = 1;
    for (int i = 0; i < ns; i++)
        even &= pb[i] == pe[i] && pb[i] >= 0;
    int64_t shape[4] = {x->type.dims[0], w->type.dims[1] * groups, 1, 1}, p4[2] = {0, 0};
    for (int i = 0; i < ns; i++) {
        p4[i + (ns == 1)] = even ? pb[i] : 0;
        shape[2 + i + (ns == 1)] = even ? full[i] - 2 * pb[i] : full[i];
    }
    ir_value *ins[2] = {x, w};
    ir_node *c = mk(cx, IR_OP_CONV2D_GRAD_INPUT, 2, ins);
    ir_set_ints(cx->g, c, "stride", 2, s4);
    ir_set_ints(cx->g, c, "pad", 2, p4);
    ir_set_ints(cx->g, c, "dilation", 2, d4);
    ir_set_int(cx->g, c, "groups", groups);
    ir_set_ints(cx->g, c, "shape", 4, shape);
    ir_value *y = fin(cx, c);
    for (int i = 0; i < ns && y && !even; i++) {
        /* a negative pad (an output_shape past the full output) adds zeros */
        int axis = 2 + i + (ns == 1);
        int64_t cb = pb[i] > 0 ? pb[i] : 0, ce = pe[i] > 0 ? pe[i] : 0;
        y = slice(cx, y, axis, cb, full[i] - cb - ce);
        if (y && (pb[i] < 0 || pe[i] < 0)) {
            int64_t before[4] = {0}, after[4] = {0};
            before[axis] = pb[i] < 0 ? -pb[i] : 0;
            after[axis] = pe[i] < 0 ? -pe[i] : 0;
            y = pad(cx, y, before, after, 0);
        }
    }
    if (y && b) {
        if (b->type.rank != 1 || b->type.dims[0] != shape[1])
            return ox_error(cx, "the bias must be [C_out]");
        y = bin(cx, IR_OP_ADD, y, reshape(cx, b, 3, (int64_t[]){shape[1], 1, 1}));
    }
    return set(cx, out[0], back(cx, y, rank));
}

static ir_value *pool_node(ox_ctx *cx, ir_value *x, int is_max, const int64_t *k,
                           const int64_t *s, const int64_t *pb, const int64_t *d, int cip,
                           int ceil_mode)
{
    if (!x)
        return NULL;
    ir_node *p = mk(cx, is_max ? IR_OP_MAXPOOL2D : IR_OP_AVGPOOL2D, 1, &x);
    ir_set_ints(cx->g, p, "kernel", 2, k);
    ir_set_ints(cx->g, p, "stride", 2, s);
    ir_set_ints(cx->g, p, "pad", 2, pb);
    if (is_max)
        ir_set_ints(cx->g, p, "dilation", 2, d);
    else
        ir_set_int(cx->g, p, "count_include_pad", cip);
    ir_set_int(cx->g, p, "ceil_mode", ceil_mode);
    return fin(cx, p);
}

static int op_pool(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    int is_max = cx->node->op_type[0] == 'M';
    if (known(cx, is_max ? "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"
                         : "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,"
                           "strides") ||
        need(cx, in, nin, 1))
        return -1;
    if (nout > 1 && out[1])
        return ox_unsupported(cx, "the Indices output");
    ir_value *x = ftensor(cx, in[0]);
    if (!x || spatial(cx, x, "pooling"))
        return -1;
    int rank = x->type.rank;
    window win = {rank - 2, {0}, {0}, {0}, {0}, {0}};
    int64_t ks[8];
    int n = attr_ints(cx, "kernel_shape", ks, 8);
    if (n != win.ns)
        return n == -2 ? -1 : ox_error(cx, "kernel_shape must have %d entries", win.ns);
    memcpy(win.k, ks, (size_t)n * sizeof *ks);
    if (get_window(cx, &win, x->type.dims + 2, 1))
        return -1;
    int64_t k[2], s[2], d[2], pb[2], pe[2];
    window4(&win, k, s, d, pb, pe);
    int ceil_mode = attr_int(cx, "ceil_mode", 0) != 0;
    int cip = attr_int(cx, "count_include_pad", 0) != 0;
    if (!is_max && (d[0] != 1 || d[1] != 1))
        return ox_unsupported(cx, "dilations in AveragePool");
    x = as4(cx, x);
    ir_value *count = NULL;
    if (pb[0] != pe[0] || pb[1] != pe[1] || pb[0] > k[0] / 2 || pb[1] > k[1] / 2) {
        /* padding gnc's pools do not take: around the input, as the pool would see it */
        if (!is_max && cip && ceil_mode)
            return ox_unsupported(cx, "uneven or wide pads in AveragePool with "
                                  "count_include_pad and ceil_mode");
        const int64_t before[4] = {0, 0, pb[0], pb[1]}, after[4] = {0, 0, pe[0], pe[1]};
        if (!is_max && !cip && x) {
            /* the mean over the window's elements inside the input: the window's
               mean over the padded input divided by that of the input's mask */
            ir_type t = x->type;
            count = pool_node(cx, pad(cx, filled(cx, t, 1), before, after, 0), 0, k, s,
                              (int64_t[]){0, 0}, d, 1, ceil_mode);
            if (!count)
                return -1;
        }
        x = pad(cx, x, before, after, is_max ? -INFINITY : 0);
        pb[0] = pb[1] = 0;
        cip = 1;
    }
    ir_value *y = pool_node(cx, x, is_max, k, s, pb, d, cip, ceil_mode);
    if (count)
        y = bin(cx, IR_OP_DIV, y, count);
    return set(cx, out[0], back(cx, y, rank));
}

/* Resize of [n, c, h, w] along h and w, in the forms of PyTorch's
   F.interpolate that gnc's upsample2d computes (and gnc export writes):
   nearest as its legacy one (asymmetric, floor), bilinear with
   align_corners or pytorch_half_pixel; the others are unsupported. */
static int op_resize(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,"
                  "exclude_outside,extrapolation_value") ||
        need(cx, in, nin, 1))
        return -1;
    if (cx->opset < 11)
        return ox_unsupported(cx, "Resize before opset 11 (scales as its second input)");
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    if (x->type.rank != 4)
        return ox_unsupported(cx, "a Resize of rank %d (gnc resizes [n, c, h, w])",
                              x->type.rank);
    char mode[80], ctm[80], nm[80];
    attr_str(cx, "mode", mode, sizeof mode);
    attr_str(cx, "coordinate_transformation_mode", ctm, sizeof ctm);
    attr_str(cx, "nearest_mode", nm, sizeof nm);
    int nearest = strcmp(mode, "nearest") == 0 || !mode[0];
    int align = strcmp(ctm, "align_corners") == 0;
    if (nearest ? strcmp(ctm, "asymmetric") != 0 || strcmp(nm, "floor") != 0
                : strcmp(mode, "linear") != 0 || (!align && strcmp(ctm, "pytorch_half_pixel")))
        return ox_unsupported(cx, "mode '%s' with coordinate_transformation_mode '%s' (gnc "
                              "resizes as PyTorch: nearest with asymmetric and floor, linear "
                              "with align_corners or pytorch_half_pixel)",
                              mode[0] ? mode : "nearest", ctm[0] ? ctm : "half_pixel");
    if (attr_int(cx, "exclude_outside", 0))
        return ox_unsupported(cx, "exclude_outside");
    /* scales or sizes, one of them (an empty tensor is none) */
    ox_val *sc = nin > 2 ? in[2] : NULL, *sz = nin > 3 ? in[3] : NULL;
    if (sc && sc->is_const && ox_numel(&sc->t) == 0)
        sc = NULL;
    if (sz && sz->is_const && ox_numel(&sz->t) == 0)
        sz = NULL;
    if (!sc == !sz)
        return ox_error(cx, "Resize takes scales or sizes, one of them");
    const int64_t *d = x->type.dims;
    int64_t size[2];
    double scale[2] = {0, 0};
    if (sz) {
        int64_t s[4];
        int n = const_ints(cx, sz, "sizes", s, 4);
        if (n < 0)
            return -1;
        if (n != 4)
            return ox_error(cx, "sizes has %d entries for rank 4", n);
        if (s[0] != d[0] || s[1] != d[1])
            return ox_unsupported(cx, "a resize of the batch or channel axis");
        size[0] = s[2], size[1] = s[3];
    } else {
        if (!sc->is_const || sc->t.dtype != IR_F32 || ox_numel(&sc->t) != 4)
            return ox_unsupported(cx, "scales other than 4 constant floats");
        if (ox_num(sc, 0) != 1 || ox_num(sc, 1) != 1)
            return ox_unsupported(cx, "a resize of the batch or channel axis");
        for (int i = 0; i < 2; i++) {
            scale[i] = shortest((float)ox_num(sc, 2 + i));
            if (!(scale[i] > 0) || scale[i] * (double)d[2 + i] > (double)IR_MAX_NUMEL)
                return ox_error(cx, "scale %g", scale[i]);
            size[i] = (int64_t)floor((double)d[2 + i] * (float)scale[i]);
        }
        if (align)   /* align_corners maps the corners, whatever the scale */
            scale[0] = scale[1] = 0;
    }
    for (int i = 0; i < 2; i++) {
        if (size[i] < 1 || size[i] > IR_MAX_NUMEL)
            return ox_unsupported(cx, "an output size of %lld", (long long)size[i]);
        if (!nearest && !align && size[i] == 1 && d[2 + i] != 1)
            return ox_unsupported(cx, "pytorch_half_pixel to a size of 1, which samples at 0, "
                                  "PyTorch at the middle");
    }
    ir_node *n = mk(cx, IR_OP_UPSAMPLE2D, 1, &x);
    ir_set_ints(cx->g, n, "size", 2, size);
    ir_set_int(cx->g, n, "mode", !nearest);
    ir_set_int(cx->g, n, "align_corners", align);
    ir_set_float(cx->g, n, "scale_h", scale[0]);
    ir_set_float(cx->g, n, "scale_w", scale[1]);
    return set(cx, out[0], fin(cx, n));
}

static int op_global_pool(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x || spatial(cx, x, "pooling"))
        return -1;
    int rank = x->type.rank;
    if (cx->node->op_type[6] == 'A')
        return set(cx, out[0], back(cx, un(cx, IR_OP_GLOBAL_AVGPOOL, as4(cx, x)), rank));
    for (int a = 2; a < rank && x; a++) {
        ir_node *r = mk(cx, IR_OP_REDUCE_MAX, 1, &x);
        ir_set_int(cx->g, r, "axis", a);
        ir_set_int(cx->g, r, "ties", 0); /* max pooling's: to the first */
        x = fin(cx, r);
    }
    return set(cx, out[0], x);
}

/* ---- normalization ---- */

static int op_batchnorm(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    if (known(cx, "epsilon,momentum,spatial,training_mode") || need(cx, in, nin, 5))
        return -1;
    if (attr_int(cx, "training_mode", 0) != 0)
        return ox_unsupported(cx, "training_mode (gnc imports inference graphs)");
    if (attr_int(cx, "spatial", 1) != 1)
        return ox_unsupported(cx, "spatial = 0");
    for (int k = 1; k < nout; k++)
        if (out[k])
            return ox_unsupported(cx, "the training outputs (mean, var)");
    in[3]->kind = in[4]->kind = IR_VALUE_BUFFER;
    ir_value *x[5];
    for (int i = 0; i < 5; i++)
        if (!(x[i] = ftensor(cx, in[i])))
            return -1;
    ir_node *n = mk(cx, IR_OP_BATCHNORM, 5, x);
    ir_set_float(cx->g, n, "eps", attr_float(cx, "epsilon", 1e-5));
    ir_set_float(cx->g, n, "momentum", 0.1);
    return set(cx, out[0], fin(cx, n));
}

static int op_layernorm(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    if (known(cx, "axis,epsilon,stash_type") || need(cx, in, nin, 2))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *w = x ? ftensor(cx, in[1]) : NULL;
    ir_value *b = w && nin > 2 && in[2] ? ftensor(cx, in[2]) : NULL;
    if (!x || !w || (nin > 2 && in[2] && !b))
        return -1;
    int axis = 0;
    if (norm_axis(cx, attr_int(cx, "axis", -1), x->type.rank, &axis))
        return -1;
    ir_type t = x->type;
    t.rank = x->type.rank - axis;
    memmove(t.dims, x->type.dims + axis, (size_t)t.rank * sizeof *t.dims);
    if (!ir_type_eq(&w->type, &t) || (b && !ir_type_eq(&b->type, &t)))
        return ox_unsupported(cx, "Scale or B not of the normalized shape (broadcast)");
    if (!b)
        b = filled(cx, t, 0);
    ir_value *ins[3] = {x, w, b};
    if (!b)
        return -1;
    double eps = attr_float(cx, "epsilon", 1e-5);
    ir_node *n = mk(cx, IR_OP_LAYERNORM, 3, ins);
    ir_set_float(cx->g, n, "eps", eps);
    if (set(cx, out[0], fin(cx, n)))
        return -1;
    if ((nout > 1 && out[1]) || (nout > 2 && out[2])) {
        /* the statistics, as ONNX gives them: over the normalized dims, which stay
           with size 1; the variance biased */
        ir_type kept = x->type;
        int64_t count = 1;
        for (int i = axis; i < kept.rank; i++)
            count *= kept.dims[i], kept.dims[i] = 1;
        ir_node *s = mk(cx, IR_OP_SUM_TO, 1, &x);
        ir_set_ints(cx->g, s, "shape", kept.rank, kept.dims);
        ir_value *mean = bin(cx, IR_OP_DIV, fin(cx, s), scalar(cx, (double)count));
        ir_value *dev = bin(cx, IR_OP_SUB, x, mean);
        ir_value *sq = bin(cx, IR_OP_MUL, dev, dev);
        if (!sq)
            return -1;
        s = mk(cx, IR_OP_SUM_TO, 1, &sq);
        ir_set_ints(cx->g, s, "shape", kept.rank, kept.dims);
        ir_value *var = bin(cx, IR_OP_DIV, fin(cx, s), scalar(cx, (double)count));
        ir_value *inv = un(cx, IR_OP_RSQRT, bin(cx, IR_OP_ADD, var, scalar(cx, eps)));
        if (!inv || (nout > 1 && out[1] && set(cx, out[1], mean)) ||
            (nout > 2 && out[2] && set(cx, out[2], inv)))
            return -1;
    }
    return 0;
}

static int op_softmax(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    ir_op op = cx->node->op_type[0] == 'L' ? IR_OP_LOG_SOFTMAX : IR_OP_SOFTMAX;
    int rank = x->type.rank, axis = 0;
    if (rank == 0)
        return ox_error(cx, "softmax of a scalar");
    if (norm_axis(cx, attr_int(cx, "axis", cx->opset < 13 ? 1 : -1), rank, &axis))
        return -1;
    ir_value *y = x;
    if (cx->opset < 13 && axis != rank - 1) {
        /* before opset 13: over the input coerced to 2-d at axis */
        int64_t rows = 1, cols = 1;
        for (int i = 0; i < rank; i++)
            *(i < axis ? &rows : &cols) *= x->type.dims[i];
        y = reshape(cx, x, 2, (int64_t[]){rows, cols});
        axis = 1;
    }
    if (!y)
        return -1;
    ir_node *n = mk(cx, op, 1, &y);
    ir_set_int(cx->g, n, "axis", axis);
    y = fin(cx, n);
    return set(cx, out[0], y ? reshape(cx, y, rank, x->type.dims) : NULL);
}

/* ---- shapes ---- */

/* x reshaped to (rank, dims): a constant stays one */
static int reshaped(ox_ctx *cx, ox_val *x, ox_val *out, int rank, const int64_t *dims)
{
    if (x->is_const) {
        const_reshape(cx, x, out, rank, dims);
        return 0;
    }
    out->onnx_type = x->onnx_type;
    return set(cx, out, reshape(cx, x->v, rank, dims));
}

static int op_flatten(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    int64_t a = attr_int(cx, "axis", 1);
    if (a < -t->rank || a > t->rank)
        return ox_error(cx, "axis %lld is out of range", (long long)a);
    if (a < 0)
        a += t->rank;
    int64_t d[2] = {1, 1};
    for (int i = 0; i < t->rank; i++)
        d[i >= a] *= t->dims[i];
    return reshaped(cx, in[0], out[0], 2, d);
}

static int op_reshape(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "allowzero") || need(cx, in, nin, 2))
        return -1;
    const ir_type *t = type_of(in[0]);
    int64_t s[IR_MAX_RANK];
    int n = const_ints(cx, in[1], "the shape", s, IR_MAX_RANK);
    if (n < 0)
        return -1;
    int allowzero = attr_int(cx, "allowzero", 0) != 0, infer = -1;
    int64_t known_n = 1, total = ox_numel(t);
    for (int i = 0; i < n; i++) {
        if (s[i] == 0 && !allowzero) {
            if (i >= t->rank)
                return ox_error(cx, "shape entry %d copies a dimension the input lacks", i);
            s[i] = t->dims[i];
        }
        if (s[i] == -1) {
            if (infer >= 0)
                return ox_error(cx, "the shape has two -1 entries");
            infer = i;
        } else if (s[i] < 0 || s[i] > IR_MAX_NUMEL) {
            return ox_error(cx, "shape entry %lld", (long long)s[i]);
        } else if (__builtin_mul_overflow(known_n, s[i], &known_n)) {
            return ox_error(cx, "the shape is too large");
        }
    }
    if (infer >= 0) {
        if (known_n == 0 || total % known_n)
            return ox_error(cx, "the shape does not fit %lld elements", (long long)total);
        s[infer] = total / known_n;
    }
    int64_t m = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(m, s[i], &m))
            return ox_error(cx, "the shape is too large");
    if (m != total)
        return ox_error(cx, "reshape of %lld elements to %lld", (long long)total, (long long)m);
    const ir_node *st = in[0]->is_const ? NULL : def_of(in[0]->v, IR_OP_SUM_TO);
    const ir_type *sum = st ? &st->out[0]->type : NULL;
    int lead = sum ? sum->rank - n : 0;
    int drops = st && lead > 0 && role_of(in[0]->name, cx->base, "sum");
    for (int i = 0; drops && i < sum->rank; i++)
        drops = i < lead ? sum->dims[i] == 1 : sum->dims[i] == s[i - lead];
    if (drops) {
        /* gnc export's sum_to with leading axes: ReduceSum keeping them as
           1, then this Reshape dropping them */
        ir_node *m = mk(cx, IR_OP_SUM_TO, 1, st->in);
        ir_set_ints(cx->g, m, "shape", n, s);
        return set(cx, out[0], fin(cx, m));
    }
    if (in[0]->initializer && pattern_const(cx, in[1], "shape")) {
        /* gnc export's reshape of a parameter (conv1d's weight): the
           parameter stays under its name, reshaped by an IR node */
        out[0]->onnx_type = in[0]->onnx_type;
        return set(cx, out[0], reshape(cx, ox_tensor(cx, in[0]), n, s));
    }
    return reshaped(cx, in[0], out[0], n, s);
}

static int op_squeeze(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int un = cx->node->op_type[0] == 'U';
    if (known(cx, cx->opset >= 13 ? "" : "axes") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    int64_t axes[IR_MAX_RANK];
    int n = -1;   /* no axes: Squeeze drops every dimension of size 1 */
    if (cx->opset >= 13 && nin > 1 && in[1]) {
        if ((n = const_ints(cx, in[1], "axes", axes, IR_MAX_RANK)) < 0)
            return -1;
    } else if (cx->opset < 13 && (n = attr_ints(cx, "axes", axes, IR_MAX_RANK)) == -2) {
        return -1;
    }
    if (n < 0 && un)
        return ox_error(cx, "Unsqueeze needs axes");
    int orank = un ? t->rank + n : t->rank;
    if (orank > IR_MAX_RANK)
        return ox_unsupported(cx, "rank %d", orank);
    int mark[IR_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (norm_axis(cx, axes[i], orank, &a))
            return -1;
        if (mark[a]++)
            return ox_error(cx, "axis %d repeats", a);
        if (!un && t->dims[a] != 1)
            return ox_error(cx, "axis %d has size %lld, not 1", a, (long long)t->dims[a]);
    }
    int64_t d[IR_MAX_RANK];
    int r = 0;
    for (int i = 0, j = 0; i < orank; i++) {
        if (un)
            d[r++] = mark[i] ? 1 : t->dims[j++];
        else if (n >= 0 ? !mark[i] : t->dims[i] != 1)
            d[r++] = t->dims[i];
    }
    return reshaped(cx, in[0], out[0], r, d);
}

static int op_transpose(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "perm") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    int64_t perm[IR_MAX_RANK];
    int n = attr_ints(cx, "perm", perm, IR_MAX_RANK);
    if (n == -2)
        return -1;
    if (n < 0) {
        n = t->rank;
        for (int i = 0; i < n; i++)
            perm[i] = n - 1 - i;
    }
    if (n != t->rank)
        return ox_error(cx, "perm has %d entries for rank %d", n, t->rank);
    return set(cx, out[0], transpose(cx, tensor(cx, in[0]), perm));
}

static int op_shape(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int size = cx->node->op_type[1] == 'i';
    if (known(cx, size ? "" : "start,end") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    if (size) {
        int64_t *d = ox_set_const(cx, out[0], (ir_type){IR_I64, 0, {0}}, OX_INT64);
        d[0] = ox_numel(t);
        return 0;
    }
    int64_t s = attr_int(cx, "start", 0), e = attr_int(cx, "end", t->rank);
    s = s < 0 ? s + t->rank : s;
    e = e < 0 ? e + t->rank : e;
    s = s < 0 ? 0 : s > t->rank ? t->rank : s;
    e = e < s ? s : e > t->rank ? t->rank : e;
    int64_t *d = ox_set_const(cx, out[0], (ir_type){IR_I64, 1, {e - s}}, OX_INT64);
    for (int64_t i = s; i < e; i++)
        d[i - s] = t->dims[i];
    return 0;
}

static int op_concat(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t0 = type_of(in[0]);
    int axis = 0;
    for (int i = 0; i < nin; i++)
        if (!in[i])
            return ox_error(cx, "input %d is missing", i);
    if (norm_axis(cx, attr_int(cx, "axis", 0), t0->rank, &axis))
        return -1;
    ir_type o = *t0;
    o.dims[axis] = 0;
    for (int i = 0; i < nin; i++) {
        const ir_type *t = type_of(in[i]);
        int ok = t->rank == t0->rank && t->dtype == t0->dtype;
        for (int k = 0; ok && k < t->rank; k++)
            ok = k == axis || t->dims[k] == t0->dims[k];
        if (!ok)
            return ox_error(cx, "input %d does not fit the others along axis %d", i, axis);
        o.dims[axis] += t->dims[axis];
    }
    if (all_const(in, nin)) {
        char *d = ox_set_const(cx, out[0], o, in[0]->onnx_type);
        size_t es = ir_dtype_size(o.dtype);
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < axis; k++)
            outer *= o.dims[k];
        for (int k = axis + 1; k < o.rank; k++)
            inner *= o.dims[k];
        for (int64_t r = 0; r < outer; r++)
            for (int i = 0; i < nin; i++) {
                size_t len = (size_t)(in[i]->t.dims[axis] * inner) * es;
                memcpy(d, (const char *)in[i]->data + (size_t)r * len, len);
                d += len;
            }
        return 0;
    }
    ir_value *x[64];
    int m = 0;
    for (int i = 0; i < nin; i++) {
        if (type_of(in[i])->dims[axis] == 0)
            continue;   /* an empty piece adds nothing */
        if (!(x[m++] = tensor(cx, in[i])))
            return -1;
    }
    if (m == 1)
        return set(cx, out[0], x[0]);
    ir_node *n = mk(cx, IR_OP_CONCAT, m, x);
    ir_set_int(cx->g, n, "axis", axis);
    return set(cx, out[0], fin(cx, n));
}

/* out = x[start : start + size] along axis (constant or tensor) */
static int sliced(ox_ctx *cx, ox_val *x, ox_val *out, int axis, int64_t start, int64_t size)
{
    if (x->is_const) {
        ir_type o = x->t;
        o.dims[axis] = size;
        char *d = ox_set_const(cx, out, o, x->onnx_type);
        size_t es = ir_dtype_size(o.dtype);
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < axis; k++)
            outer *= o.dims[k];
        for (int k = axis + 1; k < o.rank; k++)
            inner *= o.dims[k];
        for (int64_t r = 0; r < outer; r++)
            memcpy(d + (size_t)(r * size * inner) * es,
                   (const char *)x->data + (size_t)((r * x->t.dims[axis] + start) * inner) * es,
                   (size_t)(size * inner) * es);
        return 0;
    }
    if (size == 0)
        return ox_unsupported(cx, "an empty result");
    out->onnx_type = x->onnx_type;
    return set(cx, out, slice(cx, x->v, axis, start, size));
}

static int op_split(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    if (known(cx, "axis,split,num_outputs") || need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    int axis = 0;
    if (norm_axis(cx, attr_int(cx, "axis", 0), t->rank, &axis))
        return -1;
    int64_t sizes[64];
    int n = cx->opset >= 13 ? (nin > 1 && in[1] ? const_ints(cx, in[1], "split", sizes, 64) : -1)
                            : attr_ints(cx, "split", sizes, 64);
    if (n == -2 || (n == -1 && cx->opset >= 13 && nin > 1 && in[1]))
        return -1;
    int64_t d = t->dims[axis];
    if (n < 0) {
        /* equal parts, the last smaller (opset 18's num_outputs) */
        int64_t part = (d + nout - 1) / nout;
        n = nout;
        for (int i = 0; i < n; i++)
            sizes[i] = d - part * i < part ? d - part * i : part;
    }
    if (n != nout)
        return ox_error(cx, "split has %d entries for %d outputs", n, nout);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > d - at)
            return ox_error(cx, "the split sizes do not add up to %lld", (long long)d);
        if (out[i] && sliced(cx, in[0], out[i], axis, at, sizes[i]))
            return -1;
        at += sizes[i];
    }
    if (at != d)
        return ox_error(cx, "the split sizes do not add up to %lld", (long long)d);
    return 0;
}

static int op_slice(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
    int n, ne, na = -1, ns = -1;
    if (need(cx, in, nin, 1))
        return -1;
    const ir_type *t = type_of(in[0]);
    if (cx->opset < 10) {
        if (known(cx, "starts,ends,axes"))
            return -1;
        n = attr_ints(cx, "starts", st, IR_MAX_RANK);
        ne = attr_ints(cx, "ends", en, IR_MAX_RANK);
        na = attr_ints(cx, "axes", ax, IR_MAX_RANK);
    } else {
        if (known(cx, "") || need(cx, in, nin, 3))
            return -1;
        n = const_ints(cx, in[1], "starts", st, IR_MAX_RANK);
        ne = n < 0 ? -1 : const_ints(cx, in[2], "ends", en, IR_MAX_RANK);
        if (ne >= 0 && nin > 3 && in[3] &&
            (na = const_ints(cx, in[3], "axes", ax, IR_MAX_RANK)) < 0)
            return -1;
        if (ne >= 0 && nin > 4 && in[4] &&
            (ns = const_ints(cx, in[4], "steps", sp, IR_MAX_RANK)) < 0)
            return -1;
    }
    if (n < 0 || ne < 0)
        return n == -1 && cx->opset < 10 ? ox_error(cx, "starts and ends are required") : -1;
    if (ne != n || (na >= 0 && na != n) || (ns >= 0 && ns != n))
        return ox_error(cx, "starts, ends, axes and steps differ in length");
    ox_val cur = *in[0], *src = &cur;
    int seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (norm_axis(cx, na >= 0 ? ax[i] : i, t->rank, &a))
            return -1;
        if (seen[a]++)
            return ox_error(cx, "axis %d repeats", a);
        if (ns >= 0 && sp[i] != 1)
            return ox_unsupported(cx, "steps other than 1");
        int64_t d = t->dims[a], s = st[i], e = en[i];
        s = s < 0 ? s + d : s;
        e = e < 0 ? e + d : e;
        s = s < 0 ? 0 : s > d ? d : s;
        e = e < s ? s : e > d ? d : e;
        ox_val next = {.name = out[0]->name, .kind = IR_VALUE_PARAM};
        if (sliced(cx, src, &next, a, s, e - s))
            return -1;
        cur = next;
    }
    if (cur.is_const) {
        *out[0] = cur;
        out[0]->name = cx->node->output[0];
        return 0;
    }
    out[0]->onnx_type = in[0]->onnx_type;
    return set(cx, out[0], cur.v);
}

/* Gather with indices at run time, as the sum over k of where(idx == k,
   data[..., k, ...], 0) along axis: one term, exactly.  Ranks: data's dims
   before axis, then idx's, then axis itself (k), then data's after it. */
static ir_value *gather_mask(ox_ctx *cx, ir_value *data, ir_value *idx, int axis,
                             const ir_type *o)
{
    const ir_type *t = &data->type, *it = &idx->type;
    int pre = axis, ir = it->rank, post = t->rank - axis - 1, r = pre + ir + 1 + post;
    int64_t d = t->dims[axis];
    if (r > IR_MAX_RANK || d > 16777216)
        return ox_unsupported(cx, "indices computed at run time into a tensor of this rank "
                              "or size"), NULL;
    int64_t dd[IR_MAX_RANK], id[IR_MAX_RANK], kd[IR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int at = i - pre - ir;   /* 0: the axis, k */
        dd[i] = i < pre ? t->dims[i] : at < 0 ? 1 : t->dims[axis + at];
        id[i] = i < pre || at >= 0 ? 1 : it->dims[i - pre];
        kd[i] = at == 0 ? d : 1;
    }
    ir_value *f = cast(cx, idx, IR_F32);   /* negative indices count from the end */
    ir_value *neg[3] = {bin(cx, IR_OP_LT, f, scalar(cx, 0)),
                        bin(cx, IR_OP_ADD, f, scalar(cx, (double)d)), f};
    if (!neg[0] || !neg[1])
        return NULL;
    f = fin(cx, mk(cx, IR_OP_WHERE, 3, neg));
    ir_node *ar = mk(cx, IR_OP_ARANGE, 0, NULL);
    ar->out[0]->type = (ir_type){IR_F32, 1, {d}};
    ir_set_float(cx->g, ar, "start", 0);
    ir_set_float(cx->g, ar, "step", 1);
    ir_value *pick[3] = {bin(cx, IR_OP_EQ, reshape(cx, f, r, id), reshape(cx, fin(cx, ar), r, kd)),
                         reshape(cx, data, r, dd), scalar(cx, 0)};
    if (!pick[0] || !pick[1] || !pick[2])
        return NULL;
    ir_value *y = fin(cx, mk(cx, IR_OP_WHERE, 3, pick));
    if (!y)
        return NULL;
    ir_type kept = y->type;
    kept.dims[pre + ir] = 1;
    if (d > 1) {
        ir_node *s = mk(cx, IR_OP_SUM_TO, 1, &y);
        ir_set_ints(cx->g, s, "shape", kept.rank, kept.dims);
        y = fin(cx, s);
    }
    return y ? reshape(cx, y, o->rank, o->dims) : NULL;
}

static int op_gather(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis") || need(cx, in, nin, 2))
        return -1;
    const ir_type *t = type_of(in[0]), *it = type_of(in[1]);
    int axis = 0;
    if (t->rank == 0 || norm_axis(cx, attr_int(cx, "axis", 0), t->rank, &axis))
        return t->rank == 0 ? ox_error(cx, "Gather from a scalar") : -1;
    ir_type o = *t;
    o.rank = t->rank - 1 + it->rank;
    if (o.rank > IR_MAX_RANK)
        return ox_unsupported(cx, "rank %d", o.rank);
    for (int i = 0; i < it->rank; i++)
        o.dims[axis + i] = it->dims[i];
    for (int i = axis + 1; i < t->rank; i++)
        o.dims[i - 1 + it->rank] = t->dims[i];
    if (!in[1]->is_const) {
        ir_value *x[2] = {tensor(cx, in[1]), ftensor(cx, in[0])};
        if (!x[0] || !x[1])
            return -1;
        if (axis == 0 && t->rank == 2) {
            /* indices at run time into a 2-d table: its rows, an embedding */
            ir_node *e = mk(cx, IR_OP_EMBEDDING, 2, x);
            ir_set_int(cx->g, e, "padding_idx", -1);
            return set(cx, out[0], fin(cx, e));
        }
        return set(cx, out[0], gather_mask(cx, x[1], x[0], axis, &o));
    }
    int64_t m = ox_numel(it), d = t->dims[axis];
    int64_t *idx = base_arena_alloc(&cx->scratch, (size_t)(m ? m : 1) * sizeof *idx);
    for (int64_t i = 0; i < m; i++) {
        double v = ox_num(in[1], i);
        idx[i] = (int64_t)(v < 0 ? v + (double)d : v);
        if (idx[i] < 0 || idx[i] >= d)
            return ox_error(cx, "index %.0f is out of range for size %lld", v, (long long)d);
    }
    if (in[0]->is_const) {
        if (!fold_fits(cx, &o))
            return -1;
        char *dst = ox_set_const(cx, out[0], o, in[0]->onnx_type);
        size_t es = ir_dtype_size(o.dtype);
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < axis; k++)
            outer *= t->dims[k];
        for (int k = axis + 1; k < t->rank; k++)
            inner *= t->dims[k];
        for (int64_t r = 0; r < outer; r++)
            for (int64_t i = 0; i < m; i++) {
                memcpy(dst, (const char *)in[0]->data + (size_t)((r * d + idx[i]) * inner) * es,
                       (size_t)inner * es);
                dst += (size_t)inner * es;
            }
        return 0;
    }
    if (m == 0)
        return ox_unsupported(cx, "an empty result");
    /* constant indices: runs of consecutive ones are slices, joined along axis */
    ir_value *pieces[64];
    int np = 0;
    for (int64_t i = 0; i < m;) {
        int64_t j = i + 1;
        while (j < m && idx[j] == idx[j - 1] + 1)
            j++;
        if (np == 64)
            return ox_unsupported(cx, "indices that make more than 64 runs");
        if (!(pieces[np++] = slice(cx, in[0]->v, axis, idx[i], j - i)))
            return -1;
        i = j;
    }
    ir_value *y = pieces[0];
    if (np > 1) {
        ir_node *c = mk(cx, IR_OP_CONCAT, np, pieces);
        ir_set_int(cx->g, c, "axis", axis);
        y = fin(cx, c);
    }
    out[0]->onnx_type = in[0]->onnx_type;
    return set(cx, out[0], y ? reshape(cx, y, o.rank, o.dims) : NULL);
}

static int op_cast(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int like = strcmp(cx->node->op_type, "CastLike") == 0;
    if (known(cx, like ? "saturate" : "to,saturate") || need(cx, in, nin, like ? 2 : 1))
        return -1;
    int to = like ? in[1]->onnx_type : (int)attr_int(cx, "to", 0), ok;
    ir_dtype dt = ox_dtype(to, &ok);
    if (!ok)
        return ox_unsupported(cx, "a cast to %s", ox_type_name(to));
    if (in[0]->is_const) {
        ir_type t = in[0]->t;
        t.dtype = dt;
        ox_val r = {.name = out[0]->name, .t = t, .kind = IR_VALUE_PARAM};
        ox_set_const(cx, &r, t, to);
        for (int64_t i = 0, n = ox_numel(&t); i < n; i++) {
            double v = ox_num(in[0], i);
            ox_put_num(&r, i, dt == IR_F32 || to == OX_BOOL ? v : trunc(v));
        }
        *out[0] = r;
        return 0;
    }
    ir_value *x = in[0]->v;
    out[0]->onnx_type = to;
    const ir_node *cmp = in[0]->onnx_type == OX_BOOL ? bool_of_compare(x) : NULL;
    if (cmp && cmp->out[0]->type.dtype == dt)
        /* a comparison's bool back to its operands' dtype (gnc export's
           gt, le, ...): the comparison itself, whose mask is 0 and 1 */
        return set(cx, out[0], again(cx, cmp));
    const ir_node *wide = def_of(x, IR_OP_CAST);
    const ir_node *am = wide ? def_of(wide->in[0], IR_OP_ARGMAX) : NULL;
    if (am && x->type.dtype == IR_I64 && dt == am->out[0]->type.dtype)
        /* argmax's indices, widened to int64 (ArgMax's type) and back:
           argmax itself (gnc export's argmax of i32) */
        return set(cx, out[0], again(cx, am));
    if (to == OX_BOOL && in[0]->onnx_type != OX_BOOL) {
        /* nonzero is true; a plain cast to u8 would truncate 0.5 to 0 */
        if (x->type.dtype != IR_F32)
            return ox_unsupported(cx, "a cast of %s to bool", ox_type_name(in[0]->onnx_type));
        return set(cx, out[0], cast(cx, bin(cx, IR_OP_NE, x, scalar(cx, 0)), IR_U8));
    }
    if (x->type.dtype == dt) {
        out[0]->v = x;
        return 0;
    }
    return set(cx, out[0], cast(cx, x, dt));
}

static int op_pad(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, cx->opset < 11 ? "mode,pads,value" : "mode") || need(cx, in, nin, 1))
        return -1;
    if (!attr_is(cx, "mode", "constant", 1))
        return ox_unsupported(cx, "modes other than constant");
    const ir_type *t = type_of(in[0]);
    int64_t p[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    int n, na = -1;
    double value = 0;
    if (cx->opset < 11) {
        n = attr_ints(cx, "pads", p, 2 * IR_MAX_RANK);
        value = attr_float(cx, "value", 0);
    } else {
        if (need(cx, in, nin, 2))
            return -1;
        n = const_ints(cx, in[1], "pads", p, 2 * IR_MAX_RANK);
        if (n >= 0 && nin > 2 && in[2] && const_scalar(cx, in[2], "constant_value", &value))
            return -1;
        if (n >= 0 && nin > 3 && in[3] &&
            (na = const_ints(cx, in[3], "axes", axes, IR_MAX_RANK)) < 0)
            return -1;
    }
    if (n < 0)
        return n == -1 ? ox_error(cx, "pads is required") : -1;
    int count = na >= 0 ? na : t->rank;
    if (n != 2 * count)
        return ox_error(cx, "pads has %d entries for %d axes", n, count);
    int64_t before[IR_MAX_RANK] = {0}, after[IR_MAX_RANK] = {0};
    for (int i = 0; i < count; i++) {
        int a = i;
        if (na >= 0 && norm_axis(cx, axes[i], t->rank, &a))
            return -1;
        before[a] = p[i];
        after[a] = p[i + count];
        if (p[i] < 0 || p[i + count] < 0)
            return ox_unsupported(cx, "negative pads");
    }
    out[0]->onnx_type = in[0]->onnx_type;
    return set(cx, out[0], pad(cx, tensor(cx, in[0]), before, after, value));
}

static int op_expand(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 2))
        return -1;
    int64_t s[IR_MAX_RANK];
    int n = const_ints(cx, in[1], "the shape", s, IR_MAX_RANK);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s[i] < 0 || s[i] > IR_MAX_NUMEL)
            return ox_error(cx, "shape entry %lld", (long long)s[i]);
    const ir_type *t = type_of(in[0]);
    ir_type want = {t->dtype, n, {0}}, o;
    memcpy(want.dims, s, (size_t)n * sizeof *s);
    if (!broadcast(t, &want, &o))
        return ox_error(cx, "the input does not broadcast to the shape");
    o.dtype = t->dtype;
    if (in[0]->is_const) {
        if (!fold_fits(cx, &o))
            return -1;
        ox_set_const(cx, out[0], o, in[0]->onnx_type);
        for (int64_t i = 0, m = ox_numel(&o); i < m; i++)
            ox_put_num(out[0], i, ox_num(in[0], bindex(t, &o, i)));
        return 0;
    }
    ir_value *x = in[0]->v;
    out[0]->onnx_type = in[0]->onnx_type;
    if (ir_type_eq(&o, &x->type))
        return set(cx, out[0], x);
    ir_node *b = mk(cx, IR_OP_BROADCAST_TO, 1, &x);
    ir_set_ints(cx->g, b, "shape", o.rank, o.dims);
    return set(cx, out[0], fin(cx, b));
}

static int op_constant(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)in, (void)nin, (void)nout;
    if (known(cx, "value,value_float,value_floats,value_int,value_ints,sparse_value,"
                  "value_string,value_strings"))
        return -1;
    const Onnx__AttributeProto *a;
    if ((a = attr(cx, "value"))) {
        if (!a->t)
            return ox_error(cx, "value holds no tensor");
        ir_type t;
        int ot;
        void *data;
        char err[512];
        if (ox_decode_tensor(a->t, NULL, NULL, &t, &ot, &data, err, sizeof err) != 0)
            return strstr(err, "unsupported") ? ox_unsupported(cx, "%s", err)
                                              : ox_error(cx, "%s", err);
        void *d = ox_set_const(cx, out[0], t, ot);
        memcpy(d, data, (size_t)ox_numel(&t) * ir_dtype_size(t.dtype));
        base_free(data);
        return 0;
    }
    if ((a = attr(cx, "value_float")) || (a = attr(cx, "value_int"))) {
        int f = a->name[6] == 'f';
        ox_set_const(cx, out[0], (ir_type){f ? IR_F32 : IR_I64, 0, {0}}, f ? OX_FLOAT : OX_INT64);
        ox_put_num(out[0], 0, f ? a->f : (double)a->i);
        if (!f)
            ((int64_t *)out[0]->data)[0] = a->i;
        return 0;
    }
    if ((a = attr(cx, "value_floats")) || (a = attr(cx, "value_ints"))) {
        int f = a->name[6] == 'f';
        int64_t n = (int64_t)(f ? a->n_floats : a->n_ints);
        void *d = ox_set_const(cx, out[0], (ir_type){f ? IR_F32 : IR_I64, 1, {n}},
                               f ? OX_FLOAT : OX_INT64);
        if (n)
            memcpy(d, f ? (void *)a->floats : (void *)a->ints, (size_t)n * (f ? 4 : 8));
        return 0;
    }
    return ox_unsupported(cx, "a sparse or string constant");
}

static int op_constant_of_shape(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "value") || need(cx, in, nin, 1))
        return -1;
    int64_t s[IR_MAX_RANK];
    int n = const_ints(cx, in[0], "the shape", s, IR_MAX_RANK);
    if (n < 0)
        return -1;
    ir_type t = {IR_F32, n, {0}}, vt;
    int ot = OX_FLOAT;
    double v = 0;
    const Onnx__AttributeProto *a = attr(cx, "value");
    if (a && a->t) {
        void *data;
        char err[512];
        if (ox_decode_tensor(a->t, NULL, NULL, &vt, &ot, &data, err, sizeof err) != 0)
            return strstr(err, "unsupported") ? ox_unsupported(cx, "%s", err)
                                              : ox_error(cx, "%s", err);
        ox_val tmp = {.name = "", .onnx_type = ot, .is_const = 1, .t = vt, .data = data};
        if (ox_numel(&vt) != 1) {
            base_free(data);
            return ox_error(cx, "value must hold one element");
        }
        v = ox_num(&tmp, 0);
        t.dtype = vt.dtype;
        base_free(data);
    }
    int64_t m = 1;
    for (int i = 0; i < n; i++) {
        if (s[i] < 0)
            return ox_error(cx, "shape entry %lld", (long long)s[i]);
        if (__builtin_mul_overflow(m, s[i], &m) || m > IR_MAX_NUMEL)
            return ox_error(cx, "the shape is too large");
        t.dims[i] = s[i];
    }
    if (pattern_const(cx, in[0], "shape") && m > 0 && t.dtype == IR_F32) {
        /* gnc export's const (of a float: the IR's are): the IR node again,
           not data */
        out[0]->onnx_type = ot;
        return set(cx, out[0], filled(cx, t, shortest((float)v)));
    }
    if (!fold_fits(cx, &t))
        return -1;
    ox_set_const(cx, out[0], t, ot);
    for (int64_t i = 0; i < m; i++)
        ox_put_num(out[0], i, v);
    return 0;
}

static int op_range(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    double s, l, d;
    if (known(cx, "") || need(cx, in, nin, 3) || const_scalar(cx, in[0], "start", &s) ||
        const_scalar(cx, in[1], "limit", &l) || const_scalar(cx, in[2], "delta", &d))
        return -1;
    if (d == 0)
        return ox_error(cx, "delta is 0");
    double c = ceil((l - s) / d);
    int64_t n = c > 0 ? (int64_t)c : 0;
    if (c > (double)IR_MAX_NUMEL)
        return ox_error(cx, "the range is too large");
    ir_type t = {in[0]->t.dtype, 1, {n}};
    if (pattern_const(cx, in[0], "start") && pattern_const(cx, in[1], "limit") &&
        pattern_const(cx, in[2], "delta") && n > 0) {
        /* gnc export's arange: the IR node again, not data */
        ir_node *a = mk(cx, IR_OP_ARANGE, 0, NULL);
        a->out[0]->type = t;
        ir_set_float(cx->g, a, "start", s);
        ir_set_float(cx->g, a, "step", d);
        out[0]->onnx_type = in[0]->onnx_type;
        return set(cx, out[0], fin(cx, a));
    }
    if (!fold_fits(cx, &t))
        return -1;
    ox_set_const(cx, out[0], t, in[0]->onnx_type);
    for (int64_t i = 0; i < n; i++)
        ox_put_num(out[0], i, s + (double)i * d);
    return 0;
}

/* ---- reductions ---- */

/* Reduce*: the sums through sum_to (the reduced dims kept with size 1), the
   extremes through reduce_max/reduce_min axis by axis; then keepdims. */
static int op_reduce(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    const char *t = cx->node->op_type + 6;   /* after "Reduce" */
    int extreme = strcmp(t, "Max") == 0 || strcmp(t, "Min") == 0;
    int as_input = cx->opset >= (strcmp(t, "Sum") == 0 ? 13 : 18);
    if (known(cx, as_input ? "keepdims,noop_with_empty_axes" : "axes,keepdims") ||
        need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    int rank = x->type.rank, keep = attr_int(cx, "keepdims", 1) != 0;
    int64_t axes[IR_MAX_RANK];
    int n = as_input ? (nin > 1 && in[1] ? const_ints(cx, in[1], "axes", axes, IR_MAX_RANK) : -1)
                     : attr_ints(cx, "axes", axes, IR_MAX_RANK);
    if (n == -2 || (as_input && n == -1 && nin > 1 && in[1]))
        return -1;
    if (n <= 0 && as_input && attr_int(cx, "noop_with_empty_axes", 0)) {
        if (!pattern_const(cx, in[1], "axes"))
            return set(cx, out[0], x);
        /* gnc export's sum_to that sums nothing: kept, as the IR has it */
        ir_node *m = mk(cx, IR_OP_SUM_TO, 1, &x);
        ir_set_ints(cx->g, m, "shape", rank, x->type.dims);
        return set(cx, out[0], fin(cx, m));
    }
    int mark[IR_MAX_RANK] = {0};
    if (n <= 0)
        for (int i = 0; i < rank; i++)
            mark[i] = 1;
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (norm_axis(cx, axes[i], rank, &a))
            return -1;
        mark[a] = 1;
    }
    ir_type kept = x->type;
    int64_t count = 1, dims[IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (mark[i])
            count *= kept.dims[i], kept.dims[i] = 1;
        if (!mark[i] || keep)
            dims[r++] = kept.dims[i];
    }
    ir_value *y = x;
    if (extreme) {
        for (int i = 0; i < rank && y; i++) {
            if (!mark[i] || x->type.dims[i] == 1)
                continue;
            ir_node *m = mk(cx, t[1] == 'a' ? IR_OP_REDUCE_MAX : IR_OP_REDUCE_MIN, 1, &y);
            ir_set_int(cx->g, m, "axis", i);
            /* a reduction, torch.amax's (what torch.max(x) exports as): its
               gradient split between ties */
            ir_set_int(cx->g, m, "ties", 1);
            y = fin(cx, m);
        }
        return set(cx, out[0], y ? reshape(cx, y, r, dims) : NULL);
    }
    /* the sums: what is summed, and what is made of the sum */
    if (strcmp(t, "L1") == 0)
        y = un(cx, IR_OP_ABS, x);
    else if (strcmp(t, "L2") == 0 || strcmp(t, "SumSquare") == 0)
        y = bin(cx, IR_OP_MUL, x, x);
    else if (strcmp(t, "LogSumExp") == 0)
        y = un(cx, IR_OP_EXP, x);
    if (y && !ir_type_eq(&kept, &y->type)) {
        ir_node *s = mk(cx, IR_OP_SUM_TO, 1, &y);
        ir_set_ints(cx->g, s, "shape", kept.rank, kept.dims);
        y = fin(cx, s);
    }
    if (y && strcmp(t, "Mean") == 0 && count != 1)
        y = bin(cx, IR_OP_DIV, y, scalar(cx, (double)count));
    else if (strcmp(t, "L2") == 0)
        y = un(cx, IR_OP_SQRT, y);
    else if (strcmp(t, "LogSum") == 0 || strcmp(t, "LogSumExp") == 0)
        y = un(cx, IR_OP_LOG, y);
    return set(cx, out[0], y ? reshape(cx, y, r, dims) : NULL);
}

/* And, Or, Xor, Not on bools (u8 0 or 1): as floats, exactly */
static int op_logic(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    const char *t = cx->node->op_type;
    int not = strcmp(t, "Not") == 0;
    if (known(cx, "") || need(cx, in, nin, not ? 1 : 2))
        return -1;
    for (int i = 0; i < (not ? 1 : 2); i++)
        if (in[i]->onnx_type != OX_BOOL)
            return ox_error(cx, "%s takes bools, got %s", t, ox_type_name(in[i]->onnx_type));
    const ir_node *cmp = not && !in[0]->is_const ? bool_of_compare(in[0]->v) : NULL;
    if (cmp && (cmp->op == IR_OP_EQ || cmp->op == IR_OP_NE)) {
        /* not (a == b) is a != b, NaN included (gnc export's ne) */
        out[0]->onnx_type = OX_BOOL;
        return set(cx, out[0], cast(cx, bin(cx, cmp->op == IR_OP_EQ ? IR_OP_NE : IR_OP_EQ,
                                            cmp->in[0], cmp->in[1]), IR_U8));
    }
    ir_value *a = cast(cx, tensor(cx, in[0]), IR_F32), *y;
    if (not) {
        y = bin(cx, IR_OP_EQ, a, scalar(cx, 0));
    } else {
        ir_value *b = a ? cast(cx, tensor(cx, in[1]), IR_F32) : NULL;
        y = bin(cx, t[0] == 'A' ? IR_OP_MINIMUM : t[0] == 'O' ? IR_OP_MAXIMUM : IR_OP_NE, a, b);
    }
    out[0]->onnx_type = OX_BOOL;
    return set(cx, out[0], cast(cx, y, IR_U8));
}

/* IsNaN, IsInf (detect_negative, detect_positive) */
static int op_isclass(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int nan = cx->node->op_type[2] == 'N';
    if (known(cx, nan ? "" : "detect_negative,detect_positive") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *y;
    if (nan) {
        y = bin(cx, IR_OP_NE, x, x);
    } else {
        int neg = attr_int(cx, "detect_negative", 1) != 0;
        int pos = attr_int(cx, "detect_positive", 1) != 0;
        if (neg && pos)
            y = bin(cx, IR_OP_EQ, un(cx, IR_OP_ABS, x), scalar(cx, INFINITY));
        else if (neg || pos)
            y = bin(cx, IR_OP_EQ, x, scalar(cx, neg ? -INFINITY : INFINITY));
        else
            y = x ? filled(cx, x->type, 0) : NULL;   /* nothing detected */
    }
    out[0]->onnx_type = OX_BOOL;
    return set(cx, out[0], cast(cx, y, IR_U8));
}

static int op_argmax(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis,keepdims,select_last_index") || need(cx, in, nin, 1))
        return -1;
    int last = attr_int(cx, "select_last_index", 0) != 0;
    ir_value *x = ftensor(cx, in[0]);
    int axis = 0;
    if (!x || norm_axis(cx, attr_int(cx, "axis", 0), x->type.rank, &axis))
        return -1;
    if (cx->node->op_type[3] == 'M' && cx->node->op_type[4] == 'i')
        x = un(cx, IR_OP_NEG, x);   /* the first smallest is the first largest of -x */
    int64_t len = x ? x->type.dims[axis] : 0;
    if (last && len > 1) {
        /* the last largest is the first largest of x reversed along axis, counted
           from the end: x reversed as its slices joined in the other order */
        if (len > 64)
            return ox_unsupported(cx, "select_last_index along more than 64 elements");
        ir_value *rev[64];
        for (int64_t i = 0; i < len; i++)
            if (!(rev[i] = slice(cx, x, axis, len - 1 - i, 1)))
                return -1;
        ir_node *c = mk(cx, IR_OP_CONCAT, (int)len, rev);
        ir_set_int(cx->g, c, "axis", axis);
        x = fin(cx, c);
    }
    if (!x)
        return -1;
    ir_node *a = mk(cx, IR_OP_ARGMAX, 1, &x);
    ir_set_int(cx->g, a, "axis", axis);
    ir_value *y = fin(cx, a);
    if (y && last && len > 1)   /* len - 1 - i, exact in float below 2^24 */
        y = bin(cx, IR_OP_SUB, scalar(cx, (double)(len - 1)), cast(cx, y, IR_F32));
    y = cast(cx, y, IR_I64);
    if (y && !attr_int(cx, "keepdims", 1)) {
        int64_t d[IR_MAX_RANK];
        int r = 0;
        for (int i = 0; i < y->type.rank; i++)
            if (i != axis)
                d[r++] = y->type.dims[i];
        y = reshape(cx, y, r, d);
    }
    out[0]->onnx_type = OX_INT64;
    return set(cx, out[0], y);
}

/* DepthToSpace, SpaceToDepth: a reshape to 6-d, a transpose, a reshape back */
static int op_depth_space(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    int d2s = cx->node->op_type[0] == 'D';
    if (known(cx, d2s ? "blocksize,mode" : "blocksize") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = tensor(cx, in[0]);
    if (!x)
        return -1;
    int64_t b = attr_int(cx, "blocksize", 0);
    if (x->type.rank != 4 || b < 1 || b > 1 << 20)
        return ox_error(cx, "%s takes a 4-d input and a blocksize of 1 or more", cx->node->op_type);
    const int64_t *d = x->type.dims;
    int64_t n = d[0], c = d[1], h = d[2], w = d[3];
    ir_value *y;
    if (d2s) {
        int crd = attr_is(cx, "mode", "CRD", 0);
        if (!crd && !attr_is(cx, "mode", "DCR", 1))
            return ox_unsupported(cx, "mode other than DCR or CRD");
        if (c % (b * b))
            return ox_error(cx, "the channels are no multiple of blocksize^2");
        int64_t cb = c / (b * b);
        if (crd)
            y = transpose(cx, reshape(cx, x, 6, (int64_t[]){n, cb, b, b, h, w}),
                          (int64_t[]){0, 1, 4, 2, 5, 3});
        else
            y = transpose(cx, reshape(cx, x, 6, (int64_t[]){n, b, b, cb, h, w}),
                          (int64_t[]){0, 3, 4, 1, 5, 2});
        y = reshape(cx, y, 4, (int64_t[]){n, cb, h * b, w * b});
    } else {
        if (h % b || w % b)
            return ox_error(cx, "the height and width are no multiples of blocksize");
        y = transpose(cx, reshape(cx, x, 6, (int64_t[]){n, c, h / b, b, w / b, b}),
                      (int64_t[]){0, 3, 5, 1, 2, 4});
        y = reshape(cx, y, 4, (int64_t[]){n, c * b * b, h / b, w / b});
    }
    out[0]->onnx_type = in[0]->onnx_type;
    return set(cx, out[0], y);
}

/* InstanceNormalization: each (n, c) plane normalized by its own mean and
   biased variance, then scale and bias per channel */
static int op_instancenorm(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "epsilon") || need(cx, in, nin, 3))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *s = x ? ftensor(cx, in[1]) : NULL;
    ir_value *b = s ? ftensor(cx, in[2]) : NULL;
    if (!b)
        return -1;
    int r = x->type.rank;
    if (r < 3 || s->type.rank != 1 || b->type.rank != 1 || s->type.dims[0] != x->type.dims[1] ||
        b->type.dims[0] != x->type.dims[1])
        return ox_error(cx, "InstanceNormalization takes [N, C, ...] with scale and bias [C]");
    ir_type kept = x->type;
    int64_t count = 1, cshape[IR_MAX_RANK];
    for (int i = 2; i < r; i++)
        count *= kept.dims[i], kept.dims[i] = 1;
    cshape[0] = x->type.dims[1];
    for (int i = 1; i < r - 1; i++)
        cshape[i] = 1;
    ir_node *n = mk(cx, IR_OP_SUM_TO, 1, &x);
    ir_set_ints(cx->g, n, "shape", kept.rank, kept.dims);
    ir_value *mean = bin(cx, IR_OP_DIV, fin(cx, n), scalar(cx, (double)count));
    ir_value *dev = bin(cx, IR_OP_SUB, x, mean), *sq = bin(cx, IR_OP_MUL, dev, dev);
    if (!sq)
        return -1;
    n = mk(cx, IR_OP_SUM_TO, 1, &sq);
    ir_set_ints(cx->g, n, "shape", kept.rank, kept.dims);
    ir_value *var = bin(cx, IR_OP_DIV, fin(cx, n), scalar(cx, (double)count));
    ir_value *eps = scalar(cx, attr_float(cx, "epsilon", 1e-5));
    ir_value *inv = un(cx, IR_OP_RSQRT, bin(cx, IR_OP_ADD, var, eps));
    ir_value *y = bin(cx, IR_OP_MUL, dev, inv);
    y = bin(cx, IR_OP_MUL, y, reshape(cx, s, r - 1, cshape));
    y = bin(cx, IR_OP_ADD, y, reshape(cx, b, r - 1, cshape));
    return set(cx, out[0], y);
}

/* Shrink: x + bias below -lambd, x - bias above lambd, else 0 */
static int op_shrink(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "bias,lambd") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    double bias = attr_float(cx, "bias", 0), lambd = attr_float(cx, "lambd", 0.5);
    ir_value *hi[3] = {bin(cx, IR_OP_GT, x, scalar(cx, lambd)),
                       bin(cx, IR_OP_SUB, x, scalar(cx, bias)), scalar(cx, 0)};
    if (!hi[0] || !hi[1] || !hi[2])
        return -1;
    ir_value *lo[3] = {bin(cx, IR_OP_LT, x, scalar(cx, -lambd)),
                       bin(cx, IR_OP_ADD, x, scalar(cx, bias)),
                       fin(cx, mk(cx, IR_OP_WHERE, 3, hi))};
    if (!lo[0] || !lo[1] || !lo[2])
        return -1;
    return set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, lo)));
}

/* Tile with constant repeats: copies joined along each axis */
static int op_tile(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "") || need(cx, in, nin, 2))
        return -1;
    ir_value *x = tensor(cx, in[0]);
    int64_t rep[IR_MAX_RANK];
    int n = x ? const_ints(cx, in[1], "repeats", rep, IR_MAX_RANK) : -1;
    if (n < 0)
        return -1;
    if (n != x->type.rank)
        return ox_error(cx, "repeats has %d entries for rank %d", n, x->type.rank);
    for (int a = 0; a < n && x; a++) {
        if (rep[a] < 1 || rep[a] > 64)
            return rep[a] == 0 ? ox_unsupported(cx, "an empty result")
                               : rep[a] < 0 ? ox_error(cx, "negative repeats")
                                            : ox_unsupported(cx, "more than 64 repeats");
        if (rep[a] == 1)
            continue;
        ir_value *copies[64];
        for (int k = 0; k < rep[a]; k++)
            copies[k] = x;
        ir_node *c = mk(cx, IR_OP_CONCAT, (int)rep[a], copies);
        ir_set_int(cx->g, c, "axis", a);
        x = fin(cx, c);
    }
    out[0]->onnx_type = in[0]->onnx_type;
    return set(cx, out[0], x);
}

/* Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)), which is alpha elu(x / alpha) */
static int op_celu(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "alpha") || need(cx, in, nin, 1))
        return -1;
    double alpha = attr_float(cx, "alpha", 1);
    if (alpha == 0)
        return ox_error(cx, "alpha is 0");
    ir_value *x = ftensor(cx, in[0]);
    if (!x)
        return -1;
    x = alpha == 1 ? x : bin(cx, IR_OP_DIV, x, scalar(cx, alpha));
    if (!x)
        return -1;
    ir_node *e = mk(cx, IR_OP_ELU, 1, &x);
    ir_set_float(cx->g, e, "alpha", 1);
    ir_value *y = fin(cx, e);
    return set(cx, out[0], alpha == 1 ? y : bin(cx, IR_OP_MUL, y, scalar(cx, alpha)));
}

/* The sum of y over all its elements, as a scalar. */
static ir_value *sum_all(ox_ctx *cx, ir_value *y)
{
    if (!y)
        return NULL;
    ir_type one = y->type;
    for (int i = 0; i < one.rank; i++)
        one.dims[i] = 1;
    if (!ir_type_eq(&one, &y->type)) {
        ir_node *s = mk(cx, IR_OP_SUM_TO, 1, &y);
        ir_set_ints(cx->g, s, "shape", one.rank, one.dims);
        y = fin(cx, s);
    }
    return reshape(cx, y, 0, (int64_t[1]){0});   /* rank 0 */
}

/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.  The mean without class
   weights is gnc's nll_loss and cross_entropy; the others pick each position's
   log-probability with a mask of its class (where(class == label, x, 0),
   summed over the classes: the one term, exactly), weight it, and reduce. */
static int op_loss(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    int sce = cx->node->op_type[0] == 'S';
    if (known(cx, "ignore_index,reduction") || need(cx, in, nin, 2))
        return -1;
    int mean = attr_is(cx, "reduction", "mean", 1), sum = attr_is(cx, "reduction", "sum", 0);
    if (!mean && !sum && !attr_is(cx, "reduction", "none", 0))
        return ox_unsupported(cx, "reduction other than none, sum or mean");
    ir_value *x = ftensor(cx, in[0]), *label = x ? tensor(cx, in[1]) : NULL;
    ir_value *w = label && nin > 2 && in[2] ? ftensor(cx, in[2]) : NULL;
    if (!label || (nin > 2 && in[2] && !w))
        return -1;
    const Onnx__AttributeProto *ii = typed(cx, "ignore_index",
                                           ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    const ir_type *xt = &x->type, *lt = &label->type;
    int ok = xt->rank >= 2 && lt->rank == xt->rank - 1 && lt->dims[0] == xt->dims[0] &&
             (lt->dtype == IR_I32 || lt->dtype == IR_I64) &&
             (!w || (w->type.rank == 1 && w->type.dims[0] == xt->dims[1]));
    for (int i = 1; ok && i < lt->rank; i++)
        ok = lt->dims[i] == xt->dims[i + 1];
    if (!ok)
        return ox_error(cx, "the scores, labels and weights do not fit: [N, C, d...], "
                        "[N, d...] integers, [C]");
    ir_value *logp = x;
    if (sce) {
        ir_node *l = mk(cx, IR_OP_LOG_SOFTMAX, 1, &x);
        ir_set_int(cx->g, l, "axis", 1);
        if (!(logp = fin(cx, l)) || (nout > 1 && out[1] && set(cx, out[1], logp)))
            return -1;
        if (nout > 1 && out[1])
            logp = out[1]->v;   /* the same, renamed after the output */
    }
    if (mean && !w) {
        ir_value *ins[2] = {x, label};
        ir_node *n = mk(cx, sce ? IR_OP_CROSS_ENTROPY : IR_OP_NLL_LOSS, 2, ins);
        /* without ignore_index no label is ignored: -100 is no class */
        ir_set_int(cx->g, n, "ignore_index", ii ? ii->i : -100);
        if (sce)
            ir_set_float(cx->g, n, "label_smoothing", 0);
        ir_set_int(cx->g, n, "split", 1);
        return set(cx, out[0], fin(cx, n));
    }
    if (xt->dims[1] > 16777216)
        return ox_unsupported(cx, "more than 2^24 classes");
    int r = xt->rank;
    int64_t ud[IR_MAX_RANK], cd[IR_MAX_RANK];   /* the labels [N, 1, d...], classes [1, C, 1...] */
    for (int i = 0; i < r; i++) {
        ud[i] = i == 0 ? lt->dims[0] : i == 1 ? 1 : lt->dims[i - 1];
        cd[i] = i == 1 ? xt->dims[1] : 1;
    }
    ir_value *lf = cast(cx, label, IR_F32);
    ir_node *ar = mk(cx, IR_OP_ARANGE, 0, NULL);
    ar->out[0]->type = (ir_type){IR_F32, 1, {xt->dims[1]}};
    ir_set_float(cx->g, ar, "start", 0);
    ir_set_float(cx->g, ar, "step", 1);
    ir_value *mask = bin(cx, IR_OP_EQ, reshape(cx, lf, r, ud), reshape(cx, fin(cx, ar), r, cd));
    ir_value *zero = scalar(cx, 0);
    ir_value *pick[3] = {mask, logp, zero};
    if (!mask || !zero)
        return -1;
    ir_type kept = *xt;
    kept.dims[1] = 1;
    ir_node *s = mk(cx, IR_OP_SUM_TO, 1, (ir_value *[]){fin(cx, mk(cx, IR_OP_WHERE, 3, pick))});
    if (!s->in[0])
        return -1;
    ir_set_ints(cx->g, s, "shape", r, kept.dims);
    ir_value *loss = un(cx, IR_OP_NEG, reshape(cx, fin(cx, s), lt->rank, lt->dims));
    ir_value *weight = NULL;   /* each position's: w[label], 0 where ignored; NULL: all 1 */
    if (w) {
        ir_value *wp[3] = {mask, reshape(cx, w, r, cd), zero};
        if (!wp[1])
            return -1;
        s = mk(cx, IR_OP_SUM_TO, 1, (ir_value *[]){fin(cx, mk(cx, IR_OP_WHERE, 3, wp))});
        if (!s->in[0])
            return -1;
        ir_set_ints(cx->g, s, "shape", r, kept.dims);
        weight = reshape(cx, fin(cx, s), lt->rank, lt->dims);
    }
    if (ii) {
        ir_value *keep = bin(cx, IR_OP_NE, lf, scalar(cx, (double)ii->i));
        weight = weight ? bin(cx, IR_OP_MUL, weight, keep) : keep;
        ir_value *z[3] = {keep, loss, zero};   /* ignored: 0, even where x is -inf */
        if (!keep || !loss)
            return -1;
        loss = fin(cx, mk(cx, IR_OP_WHERE, 3, z));
    }
    if (w)
        loss = bin(cx, IR_OP_MUL, loss, weight);
    if (sum)
        loss = sum_all(cx, loss);
    else if (mean)
        loss = bin(cx, IR_OP_DIV, sum_all(cx, loss), sum_all(cx, weight));
    return set(cx, out[0], loss);
}

/* Sign, Floor, Ceil from comparisons and casts, exactly (NaN stays NaN):
   sign x = (x > 0) - (x < 0); floor and ceil from t, x truncated toward 0
   through an integer, which every float of magnitude 2^23 or more already is */
static int op_rounding(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    const char *t = cx->node->op_type;
    if (known(cx, "") || need(cx, in, nin, 1))
        return -1;
    ir_value *x = ftensor(cx, in[0]), *y;
    if (!x)
        return -1;
    if (t[0] == 'S') {
        y = bin(cx, IR_OP_SUB, bin(cx, IR_OP_GT, x, scalar(cx, 0)),
                bin(cx, IR_OP_LT, x, scalar(cx, 0)));
    } else {
        ir_value *tr = cast(cx, cast(cx, x, IR_I64), IR_F32);
        ir_op cmp = t[0] == 'F' ? IR_OP_LT : IR_OP_GT;
        y = bin(cx, t[0] == 'F' ? IR_OP_SUB : IR_OP_ADD, tr, bin(cx, cmp, x, tr));
    }
    /* x itself where it is NaN, and for floor and ceil where |x| is 2^23 or more */
    ir_value *w[3] = {t[0] == 'S' ? bin(cx, IR_OP_EQ, x, x)
                                  : bin(cx, IR_OP_LT, un(cx, IR_OP_ABS, x), scalar(cx, 8388608.0)),
                      y, x};
    if (!w[0] || !w[1])
        return -1;
    return set(cx, out[0], fin(cx, mk(cx, IR_OP_WHERE, 3, w)));
}

/* GatherElements: out[..., m, ...] = data[..., idx[..., m, ...], ...] along
   axis, as the sum over k of where(idx == k, data[..., k, ...], 0): one term,
   exactly.  idx gets a new axis after axis, data one before it, and the
   classes k run along the new one. */
static int op_gather_elements(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout)
{
    (void)nout;
    if (known(cx, "axis") || need(cx, in, nin, 2))
        return -1;
    ir_value *data = ftensor(cx, in[0]), *idx = data ? tensor(cx, in[1]) : NULL;
    int axis = 0;
    if (!idx || norm_axis(cx, attr_int(cx, "axis", 0), data->type.rank, &axis))
        return -1;
    const ir_type *dt = &data->type, *it = &idx->type;
    int r = dt->rank, ok = it->rank == r && r < IR_MAX_RANK &&
                           (it->dtype == IR_I32 || it->dtype == IR_I64);
    for (int i = 0; ok && i < r; i++)
        ok = i == axis || it->dims[i] == dt->dims[i];
    if (!ok)
        return ox_unsupported(cx, "indices whose shape differs from the data's off the axis");
    int64_t d = dt->dims[axis];
    if (d > 16777216)
        return ox_unsupported(cx, "an axis of more than 2^24 elements");
    int64_t id[IR_MAX_RANK], dd[IR_MAX_RANK], kd[IR_MAX_RANK];
    for (int i = 0; i <= r; i++) {
        id[i] = i <= axis ? it->dims[i] : i == axis + 1 ? 1 : it->dims[i - 1];
        dd[i] = i < axis ? dt->dims[i] : i == axis ? 1 : dt->dims[i - 1];
        kd[i] = i == axis + 1 ? d : 1;
    }
    /* indices: negative ones count from the end */
    ir_value *f = cast(cx, idx, IR_F32);
    ir_value *neg[3] = {bin(cx, IR_OP_LT, f, scalar(cx, 0)),
                        bin(cx, IR_OP_ADD, f, scalar(cx, (double)d)), f};
    if (!neg[0] || !neg[1])
        return -1;
    f = fin(cx, mk(cx, IR_OP_WHERE, 3, neg));
    ir_node *ar = mk(cx, IR_OP_ARANGE, 0, NULL);
    ar->out[0]->type = (ir_type){IR_F32, 1, {d}};
    ir_set_float(cx->g, ar, "start", 0);
    ir_set_float(cx->g, ar, "step", 1);
    ir_value *pick[3] = {bin(cx, IR_OP_EQ, reshape(cx, f, r + 1, id),
                             reshape(cx, fin(cx, ar), r + 1, kd)),
                         reshape(cx, data, r + 1, dd), scalar(cx, 0)};
    if (!pick[0] || !pick[1] || !pick[2])
        return -1;
    ir_value *y = fin(cx, mk(cx, IR_OP_WHERE, 3, pick));
    if (!y)
        return -1;
    ir_type kept = y->type;
    kept.dims[axis + 1] = 1;
    ir_node *s = mk(cx, IR_OP_SUM_TO, 1, &y);
    ir_set_ints(cx->g, s, "shape", kept.rank, kept.dims);
    y = d == 1 ? y : fin(cx, s);
    return set(cx, out[0], y ? reshape(cx, y, r, it->dims) : NULL);
}

/* ---- the table ---- */

/* Each ONNX operator's import, by name; those that are an IR_UNARY op one to
   one come from ops.def's ONNX table instead (ox_find_op: op_unary). */

static const struct {
    const char *name;
    ox_op_fn fn;
} ops[] = {
    {"Add", op_binary}, {"And", op_logic}, {"ArgMax", op_argmax},
    {"ArgMin", op_argmax}, {"AveragePool", op_pool}, {"BatchNormalization", op_batchnorm},
    {"Cast", op_cast}, {"Ceil", op_rounding}, {"CastLike", op_cast}, {"Celu", op_celu}, {"Clip", op_clip},
    {"Concat", op_concat}, {"Constant", op_constant}, {"ConstantOfShape", op_constant_of_shape},
    {"Conv", op_conv}, {"ConvTranspose", op_conv_transpose}, {"DepthToSpace", op_depth_space},
    {"Div", op_binary}, {"Dropout", op_identity}, {"Elu", op_unary_with}, {"Equal", op_binary},
    {"Erf", op_erf}, {"Expand", op_expand}, {"Flatten", op_flatten}, {"Floor", op_rounding},
    {"Gather", op_gather}, {"GatherElements", op_gather_elements}, {"Gelu", op_unary_with}, {"Gemm", op_gemm},
    {"GlobalAveragePool", op_global_pool}, {"GlobalMaxPool", op_global_pool},
    {"Greater", op_binary}, {"GreaterOrEqual", op_binary}, {"HardSigmoid", op_unary_with},
    {"Identity", op_identity}, {"InstanceNormalization", op_instancenorm},
    {"IsInf", op_isclass}, {"IsNaN", op_isclass}, {"LayerNormalization", op_layernorm},
    {"LeakyRelu", op_unary_with}, {"Less", op_binary}, {"LessOrEqual", op_binary},
    {"LogSoftmax", op_softmax}, {"MatMul", op_matmul}, {"Max", op_binary},
    {"MaxPool", op_pool}, {"Mean", op_binary}, {"Min", op_binary}, {"Mul", op_binary},
    {"NegativeLogLikelihoodLoss", op_loss}, {"Not", op_logic}, {"Or", op_logic},
    {"PRelu", op_unary_with}, {"Pad", op_pad}, {"Pow", op_pow}, {"Range", op_range},
    {"Reciprocal", op_unary_with}, {"ReduceL1", op_reduce}, {"ReduceL2", op_reduce},
    {"ReduceLogSum", op_reduce}, {"ReduceLogSumExp", op_reduce}, {"ReduceMax", op_reduce},
    {"ReduceMean", op_reduce}, {"ReduceMin", op_reduce}, {"ReduceSum", op_reduce},
    {"ReduceSumSquare", op_reduce}, {"Reshape", op_reshape},
    {"Resize", op_resize},
    {"Selu", op_unary_with}, {"Shape", op_shape}, {"Shrink", op_shrink},
    {"Sign", op_rounding}, {"Size", op_shape}, {"Slice", op_slice}, {"Softmax", op_softmax},
    {"SoftmaxCrossEntropyLoss", op_loss},
    {"SpaceToDepth", op_depth_space}, {"Split", op_split},
    {"Squeeze", op_squeeze}, {"Sub", op_binary}, {"Sum", op_binary},
    {"ThresholdedRelu", op_unary_with}, {"Tile", op_tile}, {"Transpose", op_transpose},
    {"Trilu", op_trilu},
    {"Unsqueeze", op_squeeze}, {"Where", op_where}, {"Xor", op_logic},
};

ox_op_fn ox_find_op(const char *op_type)
{
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (strcmp(ops[i].name, op_type) == 0)
            return ops[i].fn;
    return onnx_unary(op_type) >= 0 ? op_unary : NULL;
}

int fe_onnx_claims(const char *op_type)
{
    /* Erf is mapped only within GELU (op_erf): not an op of its own */
    return op_type && strcmp(op_type, "Erf") != 0 && ox_find_op(op_type) != NULL;
}
