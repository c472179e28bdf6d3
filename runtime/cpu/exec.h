/* The CPU reference executor: runs any IR graph on the CPU in float32.
 *
 * It allocates one buffer per value (inputs, parameters, node results; or node
 * results in one planned arena), fills
 * parameters from their initializers, and runs the nodes in list order.  GEMM-shaped
 * work (dense, matmul, conv2d through im2col) goes through OpenBLAS's cblas_sgemm,
 * or, in a build with oneDNN, an inference program's convolutions through its
 * primitives (runtime/cpu/dnnl.c); the other kernels are parallelised with OpenMP.  Integer inputs (labels, embedding
 * indices) are kept in their own dtype; every floating-point value is float32.
 *
 * Inference semantics: batchnorm uses its running statistics, dropout is identity.
 *
 * A partitioned program (nodes on several devices) runs on virtual devices: one
 * executor per device, each with its own arena and its own copy of the
 * parameters it reads, all run at once on their own threads, talking through
 * shared memory (runtime/cpu/comm.c); the inputs are shared.  Under MPI the same
 * program runs one device per process instead (rt_exec_new_rank), talking
 * through MPI (runtime/cpu/comm_mpi.c).
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

/* Device `rank` of a partitioned program, in an MPI job of one process per
 * device: its nodes, its arena (arena_bytes[rank]) and its copies of the
 * parameters, with its collectives and send/recv going through MPI
 * (MPI_COMM_WORLD; runtime/cpu/comm_mpi.c).  The caller has initialized MPI and
 * calls this on every rank with the same g and plan, rank being its own:
 * making the executor is collective (it makes a communicator per group of
 * devices that the program's collectives use), and so are rt_exec_run and
 * rt_exec_gather_params on it.  g's device count must equal the world's size.
 * timeout_s is the executor's deadline (rt_exec_set_timeout; 0: the default),
 * and the first wait has it: every rank waits for all the others to arrive
 * here (a barrier polled as the executor's waits are) before the blocking
 * calls that make the communicators, so a rank that never comes is found.
 * Returns NULL with a message on a mismatch, when memory runs out, when the
 * deadline passes, or in a build without MPI.  A failure on one rank leaves
 * the others waiting in their next collective: the caller ends the job
 * (MPI_Abort).
 *
 * On such an executor rt_exec_data gives this rank's buffers: every input in
 * full (feed each on every rank; each device reads its own share, as the
 * program's slices say), its own node results, its parameter copies, and NULL
 * for values held only on other ranks.  Rank 0 also holds a copy of every
 * parameter, buffer and state value, the model's whole state, which
 * rt_exec_gather_params brings up to date.  rt_exec_init_params and checkpoint
 * loading fill each rank's copies without communicating (the same values on
 * every rank).  Free it on every rank before MPI_Finalize. */
rt_exec *rt_exec_new_rank(const ir_graph *g, const int64_t *offsets, const int64_t *arena_bytes,
                          int rank, double timeout_s, char *err, size_t errlen);
/* On an MPI rank's executor, collectively: rank 0's copy of every parameter,
 * buffer and state value becomes that of the first device that holds one (the
 * copy rt_exec_data gives for a partitioned program in one process), for
 * checkpoints and evaluation.  Nothing moves for the values rank 0 itself
 * updates (all of them in data parallelism).  Elsewhere it does nothing.
 * Returns 0, or -1 with a message. */
int rt_exec_gather_params(rt_exec *x, char *err, size_t errlen);

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
 * embedding index or a label out of range).  On an MPI rank's executor it runs
 * the rank's device, and every rank must call it. */
int rt_exec_run(rt_exec *x, char *err, size_t errlen);

/* The deadline of every wait for another device (RT_TIMEOUT_DEFAULT seconds
 * unless set): a collective, a recv, a send whose last message is still
 * unread, on threads (comm.c) or MPI ranks (comm_mpi.c), and rank 0's
 * gathering of the parameters.  A wait that passes it fails the run with a
 * message naming the device, the op and its id, and whom it waited for (the
 * devices that have not come to a collective, a recv's sender; under MPI the
 * group's ranks, as MPI cannot tell which have come): "device 0: waited 30 s
 * for all_reduce 12 (device 1 of 0, 1 has not come): giving up", "device 0:
 * rank 0: waited 30 s for all_reduce 12 (with ranks 0, 1): giving up".  On
 * threads the other devices are woken with an error.
 * Under MPI the ranks cannot be woken: the caller ends the job (MPI_Abort),
 * and the executor's MPI state is spent (a run or a gather on it fails at
 * once; freeing it leaves MPI's requests in flight).  A deadline counts from
 * the start of each wait, so it must exceed the longest time one device
 * works while another waits for it (a pipeline stage's part of a step;
 * under gnc train, rank 0's evaluation and checkpoint at an epoch's end).
 * seconds <= 0: the default. */
#define RT_TIMEOUT_DEFAULT 300
void rt_exec_set_timeout(rt_exec *x, double seconds);

/* With on, rt_exec_run times every node; rt_exec_print_profile writes the total
 * time and call count per op, largest first, then which library ran the
 * convolutions ("convolutions: oneDNN (20 calls)"). */
void rt_exec_set_profile(rt_exec *x, int on);
void rt_exec_print_profile(const rt_exec *x, FILE *f);

/* A kernel that ran while profiling was on: node first, or the members of a
 * fused group from first to last, on device (0 for a program of one), from
 * start_ms to end_ms of CLOCK_MONOTONIC. */
typedef struct {
    const ir_node *first, *last;
    int device;
    double start_ms, end_ms;
} rt_event;
#define RT_MAX_EVENTS (1 << 21)   /* kept at most, per device: the first ones */
/* Every kernel timed since profiling was turned on, every device's, device by
 * device in the order run; *n of them.  Owned by x (valid until its next run
 * or its end). */
const rt_event *rt_exec_events(rt_exec *x, int *n);

/* What the executor holds, in bytes, each item the sum of the sizes of the
 * allocations it stands for (not a model of them): what a run needs besides
 * the program and the libraries' code.  The workspaces, oneDNN's primitives
 * and Winograd's weights are made at a first run, so ask after one.  Every
 * device's on a partitioned program (in one process; an MPI rank's its own). */
typedef struct {
    int64_t arena;        /* the memory plan's arenas: activations, and a training
                             step's gradients */
    int64_t values;       /* node results in buffers of their own: those computed from
                             weights alone (a batchnorm folded into a convolution), and
                             every one without a plan */
    int64_t inputs;
    int64_t params;       /* parameters and buffers (running statistics), each copy */
    int64_t state;        /* optimizer state (momentum, Adam's moments) */
    int64_t workspace;    /* the scratch buffer (rt_scratch), at its largest: im2col
                             columns, Winograd's tiles, direct convolutions' per-thread
                             rows, gradient kernels' partial sums */
    int64_t winograd;     /* Winograd's transformed weights (and weight gradients) */
    int64_t dnnl_weights; /* oneDNN's copies of the weights in its layouts, and its
                             batchnorm post-ops' constants */
    int64_t dnnl_work;    /* oneDNN's activation copies and scratchpads (one
                             convolution's at a time, the largest) */
    int64_t dnnl_kernels; /* oneDNN's generated kernels and its primitives' state: what
                             the heap grew by while they were made (dnnl.c) */
    int64_t dnnl_trial;   /* the largest of oneDNN's post-op trials (dnnl.c
                             posts_agree): operands and copies held during one at a
                             primitive's making, freed after */
    int64_t comm;         /* virtual devices' send buffers (comm.c), MPI staging */
    int64_t tables;       /* the executor's per-value and per-node tables */
} rt_memory;
void rt_exec_memory(const rt_exec *x, rt_memory *m);

/* Sets the number of threads (0: all cores). */
void rt_set_threads(int n);
/* The CPU kernels' libraries, what each computes and the kernels each picked
 * for this CPU, into buf: "OpenBLAS 0.3.21 (its Cooperlake kernels): matrix
 * products, few channels' convolutions in training; oneDNN 2.6.3 (its
 * avx512_core_bf16 kernels): convolutions". */
const char *rt_cpu_kernels(char *buf, size_t len);

#endif
