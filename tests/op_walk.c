/* The op table walked with integer operands (op_walk.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_walk.h"

const ir_dtype ow_dtypes[OW_NDTYPES] = {IR_I32, IR_I64, IR_U8};

/* Every attribute of n's schema, with a small value: ints 1, floats 0.5, lists
 * of ones (intsN: N of them; ints: two). */
static void schema_attrs(ir_graph *g, ir_node *n)
{
    const char *s = ir_ops[n->op].attrs;
    ir_schema_attr a;
    while (ir_schema_next(&s, &a)) {
        static const int64_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        if (strcmp(a.kind, "int") == 0)
            ir_set_int(g, n, a.key, 1);
        else if (strcmp(a.kind, "float") == 0)
            ir_set_float(g, n, a.key, 0.5);
        else
            ir_set_ints(g, n, a.key, a.kind[4] ? atoi(a.kind + 4) : 2, ones);
    }
}

ir_graph *ow_node_graph(ir_op op, ir_dtype dt)
{
    if (ir_op_communicates(op))
        return NULL;
    ir_graph *g = ir_graph_new("t");
    ir_value *in[8];
    int nin = ir_ops[op].nin_min;
    ir_type t = {dt, 2, {2, 3}};
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        in[i] = ir_add_input(g, name, t, (ir_loc){0});
    }
    ir_node *n = ir_node_new(g, op, nin, in, ir_ops[op].nout, "y", (ir_loc){0});
    schema_attrs(g, n);
    for (int k = 0; k < n->nout; k++)
        n->out[k]->type = t;
    ir_type o[IR_MAX_RESULTS];
    char err[256];
    if (!ir_infer(n, o, err, sizeof err)) {
        ir_graph_free(g);
        return NULL;
    }
    for (int k = 0; k < n->nout; k++)
        n->out[k]->type = o[k];
    ir_append(g, n);
    ir_add_output(g, "y", n->out[0], (ir_loc){0});
    return g;
}
