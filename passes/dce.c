/* Dead-code elimination: erases the nodes none of whose results is read by a
 * node, an output, the loss or an update.
 *
 * Expects: a verified graph.  Guarantees: the graph verifies and computes the
 * same outputs, loss and updates, bit for bit.  Returns the nodes erased. */
#include "passes.h"

int pass_dce(ir_graph *g, diag *d)
{
    (void)d;
    return ir_erase_dead(g);
}
