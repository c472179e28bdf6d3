/* What the ONNX importer's two halves share: import.c reads the model (the
 * file, its tensors, inputs, initializers, outputs) and walks its nodes;
 * ops.c maps each node's op to IR nodes.
 *
 * Every ONNX name maps to an ox_val: a tensor computed at run time (an IR
 * value) or a constant known at import (an initializer, a Constant node, or
 * shape arithmetic folded here).  Constants become IR parameters only where
 * an op needs them as tensors (ox_tensor), so that an int64 shape or axes
 * list never reaches the IR: it is folded into the attributes of the node
 * that reads it. */
#ifndef GNC_ONNX_INTERNAL_H
#define GNC_ONNX_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>

#include "base.h"
#include "diag.h"
#include "frontend.h"
#include "ir.h"
#include "onnx.pb-c.h"

/* ONNX's TensorProto.DataType numbers that gnc reads */
enum {
    OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_INT32 = 6, OX_INT64 = 7, OX_BOOL = 9,
    OX_DOUBLE = 11
};

typedef struct ox_val {
    const char *name;
    int onnx_type;     /* the ONNX element type (bool is u8 in the IR) */
    ir_value *v;       /* the tensor at run time, or NULL for a constant not yet needed as one */
    int is_const;
    int initializer;   /* a constant from the graph's initializers: a weight */
    const char *origin; /* the initializer's name, for one and its reshapes, or an
                           Identity's result's of one (the parameter's ir_value.source) */
    ir_type t;         /* a constant's type (its dims may be 0: an empty list) */
    void *data;        /* a constant's elements in t.dtype (f32 in the graph's arena) */
    ir_value_kind kind; /* IR_VALUE_PARAM, or IR_VALUE_BUFFER (batchnorm statistics) */
    /* gnc has no erf: Erf's result is erf(erf_of / sqrt 2), never computed, which
       only PyTorch's GELU pattern x (1 + erf(x / sqrt 2)) may use (ops.c op_erf);
       erf_plus1: 1 + that */
    ir_value *erf_of;
    int erf_plus1;
    /* x (1 + erf(x / sqrt 2)), computed as 2 gelu(x): gelu is gelu(x), which
       the pattern's last step (times 0.5, or / 2) takes as its result;
       gelu_named: a step has taken it (and named it), so later ones share it */
    ir_value *gelu;
    int gelu_named;
} ox_val;

typedef struct {
    ir_graph *g;
    diag *d;
    const char *path;            /* the model file */
    const fe_options *opt;
    int opset;                   /* of the default domain */
    base_arena *scratch;         /* constants' data and the name table, freed at the end */
    ox_val **table;              /* names -> values, open addressing */
    size_t cap, used;
    /* the node being imported */
    const Onnx__NodeProto *node;
    int node_index;
    ir_loc loc;
    int first_id;                /* the first IR value id made for it */
    ir_node *before;             /* the IR node list's tail before it */
    const char *base;            /* names of its intermediate IR values */
    ox_val **in;                 /* its inputs */
    int nin;
} ox_ctx;

/* ---- import.c ---- */
ox_val *ox_lookup(ox_ctx *cx, const char *name);
ox_val *ox_define(ox_ctx *cx, const char *name);       /* NULL (reported) if taken */
/* Makes out a constant of type t; returns its elements, zeroed. */
void *ox_set_const(ox_ctx *cx, ox_val *out, ir_type t, int onnx_type);
/* Element i of constant x as a double; ox_put_num the other way (rounds to x's dtype). */
double ox_num(const ox_val *x, int64_t i);
void ox_put_num(ox_val *x, int64_t i, double v);
/* x as a tensor of the graph: an initializer becomes a parameter with its ONNX
 * name, another constant a const node where all its elements are equal, else a
 * parameter too (an integer one a float parameter cast to its dtype, where
 * every element is a float exactly).  NULL, reported, where it cannot. */
ir_value *ox_tensor(ox_ctx *cx, ox_val *x);
int64_t ox_numel(const ir_type *t);
/* A decoded TensorProto: its IR type, ONNX type, and elements (allocated in
 * *arena when given, else with base_malloc).  dir is the model's folder for
 * external data.  0, or -1 with the reason in err. */
int ox_decode_tensor(const Onnx__TensorProto *tp, const char *dir, base_arena **arena,
                     ir_type *t, int *onnx_type, void **data, char *err, size_t errlen);
ir_dtype ox_dtype(int onnx_type, int *ok);
const char *ox_type_name(int onnx_type);

/* Errors about the node being imported: "node 'NAME' (OpType, opset N): ...";
 * ox_unsupported's say "unsupported", which is what the conformance runner
 * counts as a case gnc does not claim.  Both return NULL or -1 for the caller. */
int ox_error(ox_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ox_unsupported(ox_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- ops.c ---- */
/* The node's outputs from its inputs (in[i] NULL where an optional input is
 * absent); out[k] for each output k that has a name.  0, or -1 reported. */
typedef int (*ox_op_fn)(ox_ctx *cx, ox_val **in, int nin, ox_val **out, int nout);
ox_op_fn ox_find_op(const char *op_type);

/* The IR value that output k of the node should be (ops.c's results go
 * through here): names it after the ONNX output, by remaking the node that
 * computes v, so that v itself is gone: use out->v afterwards. */
void ox_set_tensor(ox_ctx *cx, ox_val *out, ir_value *v);

#endif
