/* The CPU reference executor: runs any IR graph on the CPU in float32.
 *
 * It allocates one buffer per value (inputs, parameters, node results; or node
 * results in one planned arena), fills
 * parameters from their initializers, and runs the nodes in list order.  GEMM-shaped
 * work (dense, matmul, conv2d through im2col) goes through OpenBLAS's cblas_sgemm;
 * the other kernels are parallelised with OpenMP.  Integer inputs (labels, embedding
 * indices) are kept in their own dtype; every floating-point value is float32.
 *
 * Inference semantics: batchnorm uses its running statistics, dropout is identity.
 *
 * A partitioned program (nodes on several devices) runs on virtual devices: one
 * executor per device, each with its own arena and its own copy of the
 * parameters it reads, all run at once on their own threads, talking through
 * shared memory (runtime/comm.c); the inputs are shared.
 *
 * Results are the same bits on any number of threads, and when the executor runs
 * inside a parallel region (one executor per thread, as the virtual devices of a
 * data-parallel program): every kernel splits its sums by the shapes alone,
 * GEMMs included (tests/test_threads.c).  This holds for one set of OpenBLAS
 * kernels (OpenBLAS picks them by CPU) in its OpenMP build, which runs a GEMM
 * on one thread where the executor asks it to.
 *
 * Errors come back as a return value with a message in err; nothing is printed. */
#ifndef GNC_EXEC_H
#define GNC_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

typedef struct rt_exec rt_exec;

/* Prepares g for execution (g must verify, and must outlive the executor).
 * Returns NULL with a message when a value's dtype or size is unsupported or
 * memory runs out. */
rt_exec *rt_exec_new(const ir_graph *g, char *err, size_t errlen);
/* The same with node results in one arena per device, of arena_bytes[d]
 * bytes: value v at offsets[v->id] (256-byte aligned) in its device's arena, or
 * a buffer of its own where that is -1.  The offsets must come from a proven
 * plan (passes/memplan.c, mp_check): buffers live at the same time must not
 * overlap. */
rt_exec *rt_exec_new_planned(const ir_graph *g, const int64_t *offsets,
                             const int64_t *arena_bytes, char *err, size_t errlen);
void rt_exec_free(rt_exec *x);

/* The buffer of value v: float32 for floating-point dtypes, int32_t/int64_t/uint8_t
 * for the integer ones, ir_type_numel(&v->type) elements, row-major.  In a
 * partitioned program: a node result on its device; a parameter's copy on the
 * first device that holds one (write the others with rt_exec_weights_changed). */
void *rt_exec_data(rt_exec *x, const ir_value *v);

/* Fills every parameter and buffer from its initializer (ir_init_fill). */
void rt_exec_init_params(rt_exec *x, uint64_t seed);

/* An inference program computes the values it derives from weights alone (a
 * batchnorm folded into a convolution's weights) once, at its first run.  After
 * writing parameters or buffers through rt_exec_data, call this so that the
 * next run computes them again (rt_exec_init_params and checkpoint loading do);
 * in a partitioned program it also copies them to every device's copy. */
void rt_exec_weights_changed(rt_exec *x);

/* Runs every node once.  Returns 0 on success, -1 with a message (for example an
 * embedding index or a label out of range). */
int rt_exec_run(rt_exec *x, char *err, size_t errlen);

/* With on, rt_exec_run times every node; rt_exec_print_profile writes the total
 * time and call count per op, largest first. */
void rt_exec_set_profile(rt_exec *x, int on);
void rt_exec_print_profile(const rt_exec *x, FILE *f);

/* Sets the number of threads (0: all cores). */
void rt_set_threads(int n);

#endif
