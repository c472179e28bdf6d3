/* Pipelines: stages and schedules (see partition.c).  Not written yet. */
#include "partition.h"

int pt_pipeline_stages(pt *P)
{
    diag_error(P->d, (ir_loc){0}, "pipeline partitioning is not available yet");
    return -1;
}

void pt_pipeline_schedule(pt *P)
{
    (void)P;
}
