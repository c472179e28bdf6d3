/* The op table walked with integer operands, for the executors' tests: each
 * op (those that talk between devices aside), its least number of operands
 * all of one integer dtype [2, 3], its attributes from its schema with small
 * values (ints 1, floats 0.5, lists of ones), typed by the shape rule.  Both
 * executors must run every node the shape rules accept (integer arithmetic
 * was once accepted and then had no kernel). */
#ifndef GNC_TEST_OP_WALK_H
#define GNC_TEST_OP_WALK_H

#include "ir.h"

/* The integer dtypes the walk tries */
#define OW_NDTYPES 3
extern const ir_dtype ow_dtypes[OW_NDTYPES];

/* A graph of one node of op on operands of dtype dt, its first result an
 * output; NULL when the op communicates or the shape rule refuses the node. */
ir_graph *ow_node_graph(ir_op op, ir_dtype dt);

#endif
