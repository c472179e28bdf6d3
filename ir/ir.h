/* The graph IR: a static, typed dataflow graph.
 *
 * A graph holds values and the nodes that compute them.  A value is a tensor of a
 * fixed dtype and fully static shape; it is a model input, a parameter (trainable
 * weight or non-trainable buffer such as batchnorm's running statistics), or the
 * output of a node.  Nodes sit on one doubly-linked list in execution order, so a
 * pass can insert, replace and erase them in O(1) and print the graph at any time.
 *
 * Memory: everything a graph owns (nodes, values, attributes, names) lives in the
 * graph's arena and is freed by ir_graph_free() in one call.  Erased nodes are
 * unlinked, not freed.
 *
 * Names: every value has a name unique within its graph.  Parameters are named like
 * PyTorch state_dict keys ("layer2.block0.shortcut.weight"); node outputs are named
 * after the DSL scope and op that made them ("layer1.block0.relu0"). */
#ifndef GNC_IR_H
#define GNC_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IR_MAX_RANK 8
#define IR_MAX_RESULTS 64       /* results of one node (a bucket of all_reduce) */
#define IR_MAX_DEVICES 4096     /* devices of one partitioned program */
/* Elements of one tensor at most (1 TiB of i64), so that sizes computed from dims
 * never overflow.  The frontend and the IR parser refuse larger tensors. */
#define IR_MAX_NUMEL ((int64_t)1 << 37)

typedef enum {
    IR_F32, IR_F16, IR_BF16, IR_I32, IR_I64, IR_U8,
    IR_NDTYPES
} ir_dtype;

typedef struct {
    ir_dtype dtype;
    int rank;
    int64_t dims[IR_MAX_RANK];
} ir_type;

/* A place in a source file (DSL or IR text).  file is NULL when unknown. */
typedef struct {
    const char *file;
    int line, col;
} ir_loc;

typedef enum {
#define OP(e, name, nmin, nmax, nout, attrs, traits) IR_OP_##e,
#include "ops.def"
#undef OP
    IR_NOPS
} ir_op;

typedef enum { IR_ATTR_INT, IR_ATTR_FLOAT, IR_ATTR_INTS } ir_attr_kind;

typedef struct {
    const char *key;
    ir_attr_kind kind;
    int64_t i;        /* IR_ATTR_INT */
    double f;         /* IR_ATTR_FLOAT */
    int n;            /* IR_ATTR_INTS: count and elements */
    int64_t *ints;
} ir_attr;

/* Initializers, resolved to a distribution.  Fan-in based ones (PyTorch's layer
 * defaults, kaiming, xavier) are computed by the frontend into these. */
typedef enum {
    IR_INIT_NONE,     /* inputs: no initializer */
    IR_INIT_ZEROS,
    IR_INIT_ONES,
    IR_INIT_UNIFORM,  /* uniform in [a, b) */
    IR_INIT_NORMAL,   /* mean a, standard deviation b */
    IR_INIT_DATA      /* the values at data: an imported model's weights (text "data") */
} ir_init_kind;

typedef struct {
    ir_init_kind kind;
    double a, b;
    int64_t zero_row;   /* 0, or 1 + a row (index along dims[0]) filled with 0 after the
                           draw: nn.Embedding's padding_idx; text "normal(0, 1) zero_row(R)" */
    const float *data;  /* IR_INIT_DATA: the whole tensor's values (a shard's too), in
                           the graph's arena; NULL where IR text was parsed, which
                           holds none: a checkpoint or a plan's weights give them */
} ir_init;

typedef enum {
    IR_VALUE_INPUT,   /* fed by the caller */
    IR_VALUE_PARAM,   /* trainable weight */
    IR_VALUE_BUFFER,  /* non-trainable state saved with the weights (running stats) */
    IR_VALUE_STATE,   /* optimizer state (momentum, Adam's moments), saved in checkpoints */
    IR_VALUE_NODE     /* computed by def */
} ir_value_kind;

/* A parameter, buffer or state that holds a slice of a larger tensor: a
 * tensor-parallel program's share of a weight (passes/tensor.c).  The slice is
 * [start, start + dims[axis]) along axis of the whole tensor, which has its own
 * name and type but is no value of the graph.  Initializers and checkpoints
 * treat a shard as that part of the whole, so a partitioned run starts from,
 * saves and loads the same weights as a single-device one. */
typedef struct {
    const char *of;   /* the whole tensor's name; NULL: the value is no shard */
    ir_type type;     /* the whole tensor's type */
    int axis;
    int64_t start;
} ir_shard;

typedef struct ir_node ir_node;
typedef struct ir_value ir_value;

struct ir_value {
    ir_value_kind kind;
    const char *name;
    ir_type type;
    ir_node *def;     /* IR_VALUE_NODE: the node, and which of its outputs */
    int def_index;
    ir_init init;     /* IR_VALUE_PARAM, IR_VALUE_BUFFER, IR_VALUE_STATE */
    ir_shard shard;   /* IR_VALUE_PARAM, IR_VALUE_BUFFER, IR_VALUE_STATE: of NULL, or the
                         whole tensor it is a slice of */
    const char *source; /* IR_VALUE_PARAM, IR_VALUE_BUFFER: the name it had in the model
                         it came from (an ONNX initializer's, which torch.onnx.export
                         gives a PyTorch state_dict key), a shard its whole's; or NULL */
    ir_loc loc;
    int id;           /* dense index among the graph's values, for side tables */
};

struct ir_node {
    ir_op op;
    int nin, nout;
    ir_value **in;
    ir_value **out;
    int nattrs;
    ir_attr *attrs;
    ir_loc loc;       /* the DSL call that made it */
    int group;        /* fusion: nodes of one nonzero group, consecutive in the list,
                         are one fused node (one kernel); 0: a node of its own */
    int device;       /* the device that runs it, 0 .. IR_MAX_DEVICES - 1 */
    ir_node *prev, *next;
};

typedef struct {
    const char *name;
    ir_value *value;
    ir_loc loc;
} ir_output;

/* At the end of a step, target (a param, buffer or state) takes source's value:
 * how a training step writes back new weights and statistics.  In a partitioned
 * program each device holds its own copy of the parameters it uses, and updates
 * its copy: one update per target and device. */
typedef struct {
    ir_value *target, *source;
    int device;
} ir_update;

typedef struct {
    struct base_arena *arena;   /* where its nodes, values and strings live */
    const char *name;           /* the model's name */
    ir_node *head, *tail;       /* execution order */
    int nnodes;
    int nvalues;                /* ids handed out so far */
    ir_value **inputs;   int ninputs;
    ir_value **params;   int nparams;   /* params, buffers and state, in creation order */
    ir_output *outputs;  int noutputs;
    ir_value *loss;             /* NULL when the model has none */
    ir_update *updates;  int nupdates;
    int ngroups;                /* fusion group ids handed out so far */
    struct ir_names *names;     /* the set of value names in use */
    struct ir_names *bases;     /* ir_unique_name's bases: each one's next suffix */
    int cap_inputs, cap_params, cap_outputs, cap_updates;
} ir_graph;

/* ---- arena ---- */
void *ir_alloc(ir_graph *g, size_t size);             /* zeroed, 16-byte aligned */
const char *ir_strdup(ir_graph *g, const char *s);
const char *ir_strndup(ir_graph *g, const char *s, size_t n);

/* ---- graphs ---- */
ir_graph *ir_graph_new(const char *name);
void ir_graph_free(ir_graph *g);
/* The devices g's nodes run on: 1 + the largest node's device (1 for a
 * program of one device). */
int ir_graph_devices(const ir_graph *g);
/* A copy of g that prints, verifies and compiles as g does: every value with
 * its id, name, type, initializer, shard and location; the nodes in order
 * with their attributes, groups and devices; inputs, parameters, outputs, the
 * loss and the updates in order; the names g has taken.  Shares nothing with
 * g (what --strategy auto compiles each candidate from). */
ir_graph *ir_graph_clone(const ir_graph *g);
/* Gives g's values the ids ir_parse gives its text: the inputs, then the
 * parameters (buffers, state) in order, then the nodes' results in node
 * order, from 0, with nothing between (the passes leave gaps where they
 * erased nodes).  After it, g and ir_parse(ir_print(g)) number alike, so
 * that what is generated from the one is generated from the other. */
void ir_graph_renumber(ir_graph *g);

/* A name not yet used in g, made from base ("relu0", then "relu0.1", ...). */
const char *ir_unique_name(ir_graph *g, const char *base);
/* Claims name exactly; returns 0 if it is already taken. */
int ir_claim_name(ir_graph *g, const char *name);
ir_value *ir_find_value(const ir_graph *g, const char *name);
/* v named base, or base.K where base is taken (ir_unique_name); its old name
 * stays taken, by no value. */
void ir_rename(ir_graph *g, ir_value *v, const char *base);

ir_value *ir_add_input(ir_graph *g, const char *name, ir_type t, ir_loc loc);
ir_value *ir_add_param(ir_graph *g, ir_value_kind kind, const char *name, ir_type t,
                       ir_init init, ir_loc loc);
void ir_add_output(ir_graph *g, const char *name, ir_value *v, ir_loc loc);
/* Makes parameter v the slice of the whole tensor `of` (type *whole) that starts
 * at start along axis; v's own type gives the slice's extent there. */
void ir_set_shard(ir_graph *g, ir_value *v, const char *of, const ir_type *whole, int axis,
                  int64_t start);
/* The index in v's whole tensor of v's element i (i itself when v is no shard). */
int64_t ir_shard_index(const ir_value *v, int64_t i);
void ir_add_update(ir_graph *g, ir_value *target, ir_value *source);   /* on device 0 */
void ir_add_update_on(ir_graph *g, ir_value *target, ir_value *source, int device);

/* A node with fresh output values named from base (made unique); outputs' types
 * are left for the caller (ir_infer fills them).  Not yet linked into the list. */
ir_node *ir_node_new(ir_graph *g, ir_op op, int nin, ir_value *const *in, int nout,
                     const char *base, ir_loc loc);
/* The same with the caller's result values, which become the node's (a pass can
 * so move a value, name and uses included, to a new node). */
ir_node *ir_node_make(ir_graph *g, ir_op op, int nin, ir_value *const *in, int nout,
                      ir_value *const *out, ir_loc loc);
/* A fresh node-result value named from base (made unique), not yet computed by
 * any node: give it to ir_node_make. */
ir_value *ir_value_new(ir_graph *g, const char *base, ir_loc loc);
void ir_append(ir_graph *g, ir_node *n);
void ir_insert_before(ir_graph *g, ir_node *pos, ir_node *n);
void ir_erase(ir_graph *g, ir_node *n);
/* Every use of old (node operands, outputs, loss, update sources) becomes a use
 * of new. */
void ir_replace_uses(ir_graph *g, ir_value *old, ir_value *new_);
/* Erases the nodes none of whose results a node, an output, the loss or an
 * update reads (but communication, which its peers wait for), last first so
 * that a dead chain goes at once.  Returns how many. */
int ir_erase_dead(ir_graph *g);

#define ir_for_each_node(g, n) for (ir_node *n = (g)->head; n; n = n->next)

/* Whether op communicates between devices (collectives, send, recv): such a
 * node runs for its peers too, so passes never erase, merge or move it alone. */
int ir_op_communicates(ir_op op);

/* Marks (by value id, in flags of g->nvalues bytes) the node results computed
 * from parameters, buffers and constants alone: an inference program's weights,
 * which the executor computes once.  Marks nothing in a training step (one with
 * updates), whose weights change every run. */
void ir_weight_only(const ir_graph *g, unsigned char *flags);

/* ---- attributes ---- */
void ir_set_int(ir_graph *g, ir_node *n, const char *key, int64_t v);
void ir_set_float(ir_graph *g, ir_node *n, const char *key, double v);
void ir_set_ints(ir_graph *g, ir_node *n, const char *key, int count, const int64_t *v);
/* Every attribute of src set on dst, in src's order (a copy of a node). */
void ir_copy_attrs(ir_graph *g, ir_node *dst, const ir_node *src);
const ir_attr *ir_get_attr(const ir_node *n, const char *key);
int64_t ir_attr_int(const ir_node *n, const char *key);      /* asserts presence */
double ir_attr_float(const ir_node *n, const char *key);
const int64_t *ir_attr_ints(const ir_node *n, const char *key, int *count);

/* ---- ops ---- */

/* What kind of op it is, for the passes and executors that treat ops by kind
 * (ops.def's last column).  A list that differs from these on purpose keeps
 * its own case, with a comment saying why. */
enum {
    IR_UNARY = 1 << 0,      /* elementwise on one floating-point tensor, the result of its
                               type (runtime/cpu/exec.c k_unary) */
    IR_BINARY = 1 << 1,     /* elementwise on two of one dtype, NumPy broadcasting (k_binary) */
    IR_UNARY_GRAD = 1 << 2, /* a unary op's gradient: dy and a forward value of dy's type ->
                               dx of that type (runtime/cpu/grad.c k_unary_grad) */
    IR_EPILOGUE = 1 << 3,   /* fuses into its producer's kernel as an epilogue (passes/fuse.c),
                               costing its arithmetic alone (passes/pipeline.c) */
    IR_INPLACE = 1 << 4,    /* reads element i of its first operand (a binary op: of either)
                               before it writes element i of the result, which may then take
                               that operand's buffer (passes/memplan.c) */
    IR_MAP = 1 << 5,        /* runs as one generated map kernel on the GPU (codegen/kernels.c) */
    IR_NO_GRAD = 1 << 6,    /* its result is constant to autodiff (comparisons' masks, argmax):
                               no gradient flows through it to its operands (passes/autodiff.c) */
};
#define IR_ELEMENTWISE (IR_UNARY | IR_BINARY | IR_UNARY_GRAD)

typedef struct {
    const char *name;
    int nin_min, nin_max;
    int nout;                   /* results (sgd: 1 without momentum, 2 with) */
    const char *attrs;          /* the schema, see ops.def */
    unsigned traits;            /* IR_UNARY, ...: what kind of op */
} ir_op_info;

extern const ir_op_info ir_ops[IR_NOPS];

/* The gradient rule of an elementwise unary op (ops.def's UNARY table):
 * dx = grad(dy, from_result ? y : x), with the op's attributes; NULL for an
 * op without one there. */
typedef struct {
    ir_op grad;
    int from_result;
} ir_grad_rule;
const ir_grad_rule *ir_grad_rule_of(ir_op op);

/* How many attributes the function of ir/arith.h that computes op takes after
 * its operands (ops.def's UNARY table: ar_NAME for op NAME), or -1 where
 * arith.h has none; and a node's float attributes in its schema's order, up
 * to max into v (0 past them), counting those it has. */
int ir_arith_attrs(ir_op op);
int ir_float_attrs(const ir_node *n, double *v, int max);

/* The ONNX operator an op is one to one (ops.def's ONNX table), or NULL;
 * and the op of such an ONNX operator, or -1. */
const char *ir_onnx_name(ir_op op);
int ir_op_of_onnx(const char *name);
/* The first opset whose operator ir_onnx_name(op) is op one to one, or -1. */
int ir_onnx_since(ir_op op);

/* Whether op has any of traits. */
static inline int ir_op_is(ir_op op, unsigned traits)
{
    return (ir_ops[op].traits & traits) != 0;
}

/* Whether values of t are floating point (f32, f16, bf16). */
static inline int ir_is_float(ir_dtype t)
{
    return t == IR_F32 || t == IR_F16 || t == IR_BF16;
}
int ir_op_lookup(const char *name);                     /* -1 if unknown */

/* upsample2d's arithmetic along one axis of in -> out, PyTorch's
 * (aten/src/ATen/native/UpSample.h) to the bit: the ratio of its mode
 * (compute_scales_value, or area_pixel_compute_scale's for bilinear) in float from
 * the user's scale factor, 0 for none; output dst reads *l0 x[*i0] + *l1 x[*i1]
 * (nearest: x[*i0], *l0 1, *l1 0).  codegen/prelude.cuh's upsample_taps is this
 * function again: keep the two in step. */
float ir_upsample_ratio(int64_t in, int64_t out, int bilinear, int align, double scale);
void ir_upsample_taps(int64_t dst, int64_t in, int64_t out, int bilinear, int align, float ratio,
                      int64_t *i0, int64_t *i1, float *l0, float *l1);
/* The outputs reading input j along that axis, [*first, *end), ascending; for
 * each, its weight on j is (i0 == j) l0 + (i1 == j) l1. */
void ir_upsample_readers(int64_t j, int64_t in, int64_t out, int bilinear, int align,
                         float ratio, int64_t *first, int64_t *end);

/* Shape and dtype rule of n's op: computes the type of each output from the
 * operands and attributes, into out[0 .. n->nout - 1] (room for IR_MAX_RESULTS
 * is always enough).  Returns 0 and writes a one-line message such as
 * "conv2d expects 4-d input, got f32[32, 784]" when the operands do not fit. */
int ir_infer(const ir_node *n, ir_type *out, char *err, size_t errlen);
/* The attribute half of that check (ir_infer runs it first). */
int ir_check_attrs(const ir_node *n, char *err, size_t errlen);

/* The values that integer value v of g may hold for the ops that read it as
 * indices: [0, bound), where bound is the class count of a cross_entropy or
 * nll_loss that reads v as labels, the rows of an embedding's table, the
 * least of them where several read it (through reshape, transpose, slice,
 * concat and broadcast_to); 0 where nothing bounds it.  What gnc run fills a
 * random integer input with. */
int64_t ir_index_bound(const ir_graph *g, const ir_value *v);

/* One attribute of an op's schema (ops.def): its key, its kind (int, float,
 * ints, intsN) and its default, "" where it has none. */
typedef struct {
    char key[32], kind[16], def[24];
} ir_schema_attr;
/* Reads the attribute at *s (an op's schema, or where the last call left it)
 * into a and moves *s past it; 0 at the schema's end. */
int ir_schema_next(const char **s, ir_schema_attr *a);
/* Sets every attribute of n's schema that n lacks and that has a default:
 * IR text written before the attribute existed reads as it did then. */
void ir_set_attr_defaults(ir_graph *g, ir_node *n);

/* ---- types ---- */
const char *ir_dtype_name(ir_dtype t);
int ir_dtype_lookup(const char *name);                  /* -1 if unknown */
size_t ir_dtype_size(ir_dtype t);

/* What a program computes at (gnc --precision), one enum for the code
 * generator, the cost model and the plan's meta: GEMMs and convolutions in
 * exact fp32 on the CUDA cores (float everywhere), on TF32 tensor cores
 * (float storage), or on 16-bit tensor cores with activations stored in
 * bfloat16 or float16 (fp32 master weights and accumulation; float16 with
 * dynamic loss scaling). */
typedef enum { PREC_FP32, PREC_TF32, PREC_BF16, PREC_FP16, PREC_COUNT } ir_precision;
const char *ir_precision_name(ir_precision p);   /* "fp32", "tf32", "bf16", "fp16" */
int ir_precision_lookup(const char *name);       /* -1 if unknown (NULL too) */
/* Bytes of an element as the CPU executor and gnc's files hold it: every
 * floating-point dtype as float32 (4), the integers as themselves. */
size_t ir_host_size(ir_dtype t);
int ir_type_eq(const ir_type *a, const ir_type *b);
int64_t ir_type_numel(const ir_type *t);
size_t ir_type_bytes(const ir_type *t);
/* "f32[256, 1, 28, 28]"; writes at most len bytes, returns buf. */
char *ir_type_str(const ir_type *t, char *buf, size_t len);

/* ---- initializers ---- */
/* Fills out (numel floats) with v's initializer drawn for seed.  Values depend
 * only on (seed, v->name, index): reordering or adding parameters never changes
 * another parameter's values.  A shard gets exactly its slice of the values its
 * whole tensor would get: (seed, whole name, index in the whole). */
void ir_init_fill(const ir_value *v, uint64_t seed, float *out);

/* ---- text form (docs/ir.md) ---- */
struct diag;
void ir_print(const ir_graph *g, FILE *f);
/* name as the printer writes it, bare or quoted, cut short to fit size: for
 * messages.  Returns buf ("<unnamed>" for NULL). */
const char *ir_name_str(char *buf, size_t size, const char *name);
/* s in printable ASCII, escaped as quoted names are (\\, \", \n, \t, \xHH;
 * without the quotes), cut with "..." to fit size.  Returns buf. */
const char *ir_escape_str(char *buf, size_t size, const char *s);
/* Parses IR text (file names the text in messages).  Returns NULL, with every
 * problem reported on d as file:line:col, when the text is malformed.  The graph
 * is not verified: call ir_verify. */
ir_graph *ir_parse(const char *file, const char *text, size_t len, struct diag *d);

/* ---- checks ---- */
/* Checks every invariant; reports each broken one on d, naming the node.
 * Returns the number of problems found. */
int ir_verify(const ir_graph *g, struct diag *d);

/* Internal invariant checks: stay on in release builds. */
#define IR_ASSERT(c) \
    ((c) ? (void)0 : ir_assert_fail(#c, __FILE__, __LINE__))
_Noreturn void ir_assert_fail(const char *what, const char *file, int line);

#endif
