/* ONNX models in and out (frontend/onnx/; docs/onnx.md).
 *
 * fe_load_onnx reads an ONNX ModelProto into the same graph IR as the .net
 * frontend: graph inputs become inputs, initializers parameters with their ONNX
 * names and values (ir_init IR_INIT_DATA), nodes IR nodes op by op, outputs
 * outputs.  Shapes are static: a symbolic dimension takes its value from
 * opt's defines (-D batch=32), and one without a value is an error that names
 * the input and the dimension.  An op or attribute gnc cannot express is an
 * error naming the node, its op type, the opset and what is unsupported;
 * nothing is approximated.  A malformed file is an error and nothing else.
 *
 * Built without protobuf-c (frontend/onnx/none.c), every function here fails
 * saying that this gnc has no ONNX support. */
#ifndef GNC_ONNX_H
#define GNC_ONNX_H

#include <stddef.h>

#include "diag.h"
#include "frontend.h"
#include "ir.h"

/* Whether this gnc was built with ONNX import and export. */
int fe_onnx_available(void);

/* The model at path (.onnx); external data files are read from its folder.
 * opt's model is ignored; its defines fix symbolic dimensions by name.  NULL
 * when anything was reported as an error on d. */
ir_graph *fe_load_onnx(const char *path, const fe_options *opt, diag *d);

/* Whether the importer maps op_type of the default domain (""/"ai.onnx") at
 * some opset: the ops it claims, whose conformance cases must all pass. */
int fe_onnx_claims(const char *op_type);

/* A serialized TensorProto file (the conformance suite's input_0.pb): its
 * type into *t and its elements, row-major, in a new buffer of
 * ir_type_bytes(t) (*data; base_free it), and its name (may be empty) into
 * name.  0, or -1 with the reason in err. */
int fe_onnx_read_tensor(const char *path, ir_type *t, void **data, char *name, size_t namelen,
                        char *err, size_t errlen);

/* The values of a parameter, buffer or state v (f32, numel of v->type), for
 * fe_export_onnx: a trained model's weights, or its initializers' draw. */
typedef const float *(*fe_values_fn)(void *ctx, const ir_value *v);

/* Writes g (an inference graph: no loss, no updates) as an ONNX model at path,
 * its parameters as initializers with values(ctx, v).  Every node must have an
 * ONNX form: otherwise nothing is written and err names the first that has
 * none.  0, or -1 with the reason in err. */
int fe_export_onnx(const ir_graph *g, fe_values_fn values, void *ctx, const char *path,
                   char *err, size_t errlen);

#endif
