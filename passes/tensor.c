/* Tensor parallelism.  Not written yet. */
#include "partition.h"

int pt_tensor(ir_graph *g, const pt_options *o, diag *d)
{
    (void)g;
    (void)o;
    diag_error(d, (ir_loc){0}, "tensor partitioning is not available yet");
    return -1;
}
