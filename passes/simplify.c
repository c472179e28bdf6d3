/* Simplification: fold (fold.c), cse (cse.c) and dce (dce.c) in turn until
 * nothing changes (at most 16 rounds).
 *
 * Expects: a verified graph.  Guarantees: those of its passes: the graph
 * verifies and computes the same bits.  Returns the changes of all rounds. */
#include "passes.h"

int pass_simplify(ir_graph *g, diag *d)
{
    int total = 0;
    for (int round = 0; round < 16; round++) {
        int changed = pass_fold(g, d) + pass_cse(g, d) + pass_dce(g, d);
        total += changed;
        if (!changed)
            break;
    }
    return total;
}
