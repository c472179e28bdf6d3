/* Elaboration internals shared by elab.c (statements, expressions, calls) and
 * builtins.c (the built-in operations).  Not part of the frontend's interface. */
#ifndef GNC_ELAB_H
#define GNC_ELAB_H

#include "ast.h"
#include "diag.h"
#include "frontend.h"
#include "ir.h"

/* A compile-time value.  Tensors are IR values; everything else is computed
 * while elaborating and never reaches the IR except as attributes and shapes. */
typedef enum {
    V_NONE,     /* no value: a def without return, an optional argument not given */
    V_ERROR,    /* an error was already reported; propagates silently */
    V_INT, V_FLOAT, V_BOOL, V_STR,
    V_LIST,     /* [a, b, c] */
    V_TUPLE,    /* the values of `return a, b` */
    V_TENSOR,
    V_INIT      /* an initializer: normal(0.01), zeros, kaiming, ... */
} val_kind;

typedef enum {
    INIT_ZEROS, INIT_ONES, INIT_NORMAL, INIT_UNIFORM,
    INIT_KAIMING, INIT_KAIMING_UNIFORM, INIT_XAVIER, INIT_XAVIER_NORMAL,
    INIT_TORCH_DEFAULT  /* PyTorch's layer default: U(+-1/sqrt(fan_in)) */
} init_kind;

typedef struct val val;
struct val {
    val_kind k;
    int64_t i;          /* V_INT, V_BOOL; V_INIT: init_kind */
    double f;           /* V_FLOAT; V_INIT: first argument */
    double f2;          /* V_INIT: second argument */
    const char *s;      /* V_STR */
    val *items;         /* V_LIST, V_TUPLE */
    int n;
    ir_value *t;        /* V_TENSOR */
};

typedef struct elab elab;

/* One argument of a call, after binding to the callee's parameters. */
typedef struct {
    val v;
    ir_loc loc;         /* of the argument's expression; the call's when defaulted */
} arg;

/* A call of a built-in, ready for its handler. */
typedef struct {
    const char *fn;     /* the built-in's name */
    ir_loc loc;         /* the call */
    const char *path;   /* the full name of this layer: "layer1.block0.conv2d0" */
    arg *args;          /* in the order of the built-in's parameter list */
    const char *share;  /* share = "...": the call whose parameters these are, or NULL */
    ir_loc share_loc;
    int shared;         /* make_param took parameters from share (-1: refused them) */
} call;

typedef val (*builtin_fn)(elab *e, call *c);

typedef struct {
    const char *name;
    const char *params;  /* "x, channels, kernel, stride=1, init=?" (? : optional) */
    builtin_fn fn;
    int layer;           /* 1: takes part in layer naming (name = "..." and auto names) */
} builtin;

extern const builtin fe_builtins[];
const builtin *fe_builtin_lookup(const char *name);

/* ---- services of elab.c for the built-ins ---- */
void el_error(elab *e, ir_loc loc, const char *fmt, ...) DIAG_PRINTF(3, 4);
ir_graph *el_graph(elab *e);
ir_loc el_loc(elab *e, ir_loc loc);          /* loc with its file owned by the graph */
/* Claims name in the current naming scope and returns its full path, or reports
 * (a duplicate, or no scope: outside a model or def) and returns NULL. */
const char *el_scope_name(elab *e, const char *name, ir_loc loc);
/* The next free name base0, base1, ... in the current scope, claimed (for a
 * built-in that is no layer but makes nodes: max and min of a tensor), or
 * NULL having reported that there is no scope. */
const char *el_auto_name(elab *e, const char *base, ir_loc loc);

/* Argument accessors: report a type error at the argument and return 0/NULL. */
ir_value *arg_tensor(elab *e, call *c, int i);
int arg_int(elab *e, call *c, int i, int64_t *out);
int arg_float(elab *e, call *c, int i, double *out);
int arg_bool(elab *e, call *c, int i, int *out);
int arg_pair(elab *e, call *c, int i, int64_t out[2]);           /* 3 or [3, 3] */
int arg_ints(elab *e, call *c, int i, int64_t *out, int max, int *n);
int arg_given(const call *c, int i);
/* Argument i as an axis of a tensor of rank, negative ones counted from the
 * end: 0 to rank - 1, or -1 having reported. */
int64_t axis_of(elab *e, call *c, int i, int rank);
/* Argument i as axes of a tensor of rank marked in marked[]: every one when
 * not given, an axis, or a list of axes each given once; 0 having reported. */
int arg_axes(elab *e, call *c, int i, int rank, int *marked);

/* Emitting IR: node_begin makes the node, the caller sets attributes, node_end
 * types it with ir_infer (a failure becomes a located error) and appends it. */
ir_node *node_begin(elab *e, call *c, ir_op op, int nin, ir_value **in);
val node_end(elab *e, call *c, ir_node *n);
/* A parameter or buffer named c->path + "." + suffix; init is the DSL value (or
 * V_NONE for dflt) resolved against the shape. */
ir_value *make_param(elab *e, call *c, const char *suffix, ir_value_kind kind, ir_type t,
                     val init, init_kind dflt);
/* Number v as a rank-0 const of dtype (tensor op number), or NULL having
 * reported an integer dtype. */
ir_value *el_scalar(elab *e, const val *v, ir_dtype dtype, ir_loc loc);
val tensor_val(ir_value *t);
void *el_alloc(elab *e, size_t n);          /* lives as long as the elaboration */
val error_val(void);

const char *val_kind_name(const val *v);

/* One item of a subscript x[...]: an index, a range start:stop:step whose
 * left-out bounds are SUB_NONE, or "...". */
#define SUB_NONE INT64_MIN
typedef struct {
    enum { SUB_INDEX, SUB_RANGE, SUB_ELLIPSIS } kind;
    int64_t index;
    int64_t range[3];   /* start, stop, step */
    ir_loc loc;
} subscript;

/* Range s over n elements, as Python's slice.indices with a positive step:
 * the first index, how many and the step; reports and returns 0 when the
 * step is not positive, or the range is empty and empty is 0. */
int el_range(elab *e, const subscript *s, int64_t n, int empty, int64_t *start, int64_t *count,
             int64_t *step);
/* x[s[0], ..., s[n-1]] (shaping.c) */
val el_index(elab *e, ir_value *x, const subscript *s, int n, ir_loc loc);

/* The built-ins of shaping.c */
val b_split(elab *e, call *c);
val b_chunk(elab *e, call *c);
val b_squeeze(elab *e, call *c);
val b_unsqueeze(elab *e, call *c);
val b_stack(elab *e, call *c);
val b_expand(elab *e, call *c);
val b_pad(elab *e, call *c);
val b_arange(elab *e, call *c);
val b_full(elab *e, call *c);
val b_tril(elab *e, call *c);
val b_triu(elab *e, call *c);
val b_cast(elab *e, call *c);

#endif
