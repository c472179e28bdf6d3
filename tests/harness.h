/* What the tests of partitioned programs share (test_partition, test_tensor,
 * test_mpi): pass/fail counts, compiling a model through the default pipeline,
 * the inputs of a step, and the error measure between two tensors. */
#ifndef GNC_TEST_HARNESS_H
#define GNC_TEST_HARNESS_H

#include <stdint.h>

#include "diag.h"
#include "exec.h"
#include "passes.h"

extern int th_passed, th_failed;

/* Counts a check; a failing one prints "FAIL: " and the message. */
void th_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* SOURCE_DIR/models/MODEL.net (SOURCE_DIR/MODEL.net where MODEL has a '/', a
 * test's own model) at batch, as a training step of SGD with momentum 0.9 (or
 * opt) when train, through the default pipeline partitioned by o (NULL: one
 * device), verified and memory-planned; the problems on d.
 * Returns the graph (NULL on failure) and its plan in *plan. */
ir_graph *th_compile(const char *root, const char *model, int batch, int train,
                     const ad_optimizer *opt, const pt_options *o, diag *d, mp_plan **plan);

/* A compiled program with its executor, parameters from their initializers
 * (seed 11). */
typedef struct {
    ir_graph *g;
    mp_plan *plan;
    rt_exec *x;
} th_program;

/* th_compile, then the executor.  Returns 0, or -1 (p is then freed). */
int th_program_new(const char *root, const char *model, int batch, int train,
                   const ad_optimizer *opt, const pt_options *o, diag *d, th_program *p);
void th_program_free(th_program *p);

/* The inputs of step: the learning rate lr, the step, seed 5, labels
 * (k * 7 + step * 3) mod 10 and images sin(0.1 k + 1.7 step) / 2 + 1/2 by their
 * index k; written through x (every device reads them). */
void th_feed(const ir_graph *g, rt_exec *x, int step, float lr);

/* The largest difference between two float tensors, as a fraction of
 * (|ref| + rms(ref)); a NaN counts as infinite. */
double th_worst(const float *got, const float *ref, int64_t n);

#endif
