/* The frontend: .net model files in, graph IR out.
 *
 * Lexing (flex) and parsing (bison) build a syntax tree; elaboration then runs
 * the model's compile-time program (consts, defs, loops, conditions) and emits
 * one IR node per tensor operation, typed by ir_infer.  Every problem is reported
 * on the diag context with its source location; elaboration continues past an
 * error where it can, so one run shows several.  See docs/dsl.md. */
#ifndef GNC_FRONTEND_H
#define GNC_FRONTEND_H

#include "diag.h"
#include "ir.h"

typedef struct {
    const char *model;        /* the model to elaborate; NULL: the last one in the file */
    int ndefines;             /* -D NAME=VALUE overrides of model parameters */
    const char *const *define_names;
    const char *const *define_values;   /* DSL literals: 32, 0.5, true, "text" */
} fe_options;

/* Reads, parses and elaborates the file at path.  Returns NULL when anything was
 * reported as an error on d. */
ir_graph *fe_load_file(const char *path, const fe_options *opt, diag *d);

/* The same for text in memory; name stands for the file in messages, and imports
 * are resolved relative to it. */
ir_graph *fe_load_string(const char *name, const char *text, size_t len,
                         const fe_options *opt, diag *d);

#endif
