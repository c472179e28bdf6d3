/* gnc: run compiled neural-network plans from C (libgnc; docs/api.md).
 *
 * A plan (gnc compile MODEL.net -o model.gnc; docs/plan.md) is a compiled
 * program in one file.  Load it, open a session on a device, set its inputs,
 * run it, read its outputs.  This example is compiled and run as a test
 * (tests/api.cmake), so it is the API as it is:
 *
 *     #include <stdio.h>
 *     #include <stdlib.h>
 *     #include <gnc/gnc.h>
 *
 *     // Runs the plan in argv[1] once on inputs of zeros; prints its first output.
 *     int main(int argc, char **argv)
 *     {
 *         gnc_error err = {.message = "usage: example PLAN.gnc"};
 *         gnc_session_options cpu = {.device = "cpu", .seed = 1};
 *         gnc_plan *plan = NULL;
 *         gnc_session *s = NULL;
 *         gnc_tensor_info t;
 *         float *y = NULL;
 *         if (argc != 2 || gnc_plan_load(&plan, argv[1], &err) != GNC_OK ||
 *             gnc_session_init(&s, plan, &cpu, &err) != GNC_OK)
 *             goto fail;
 *         for (int i = 0; i < gnc_plan_input_count(plan); i++) {
 *             gnc_plan_input(plan, i, &t);
 *             void *zeros = calloc(1, t.bytes);
 *             gnc_status st = gnc_session_set_input(s, t.name, zeros, t.bytes, &err);
 *             free(zeros);
 *             if (st != GNC_OK)
 *                 goto fail;
 *         }
 *         gnc_plan_output(plan, 0, &t);
 *         if (!(y = malloc(t.bytes)) || gnc_session_run(s, &err) != GNC_OK ||
 *             gnc_session_output(s, t.name, y, t.bytes, &err) != GNC_OK)
 *             goto fail;
 *         printf("%s: %lld values, the first %g\n", t.name, (long long)(t.bytes / 4), y[0]);
 *         free(y);
 *         gnc_session_free(s);
 *         gnc_plan_free(plan);
 *         return 0;
 *     fail:
 *         fprintf(stderr, "example: %s\n", err.message);
 *         free(y);
 *         gnc_session_free(s);
 *         gnc_plan_free(plan);
 *         return 1;
 *     }
 *
 * (end of the example)
 *
 * A training plan (gnc compile MODEL.net --train -o step.gnc) runs one step of
 * training per gnc_session_train_step: set the batch's inputs, take a step at a
 * learning rate, read the loss; save and load checkpoints (safetensors, the
 * same files gnc train writes) to stop and go on.
 *
 * Errors are values: every call that can fail returns a gnc_status and, when
 * err is not NULL, fills it with the status and a one-line message.  The
 * library never prints, never exits and keeps no global state; a plan may be
 * shared by several sessions (it must outlive them), a session is used by one
 * thread at a time.
 *
 * Data: a tensor's bytes are row-major in the host's byte order; float (32
 * bits) for every floating-point dtype, f16 and bf16 included (the CPU device
 * computes in float32); int32_t, int64_t or uint8_t for the integer ones.
 * gnc_tensor_info.bytes is the size a session expects and gives back. */
#ifndef GNC_GNC_H
#define GNC_GNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GNC_API __attribute__((visibility("default")))
#else
#define GNC_API
#endif

#define GNC_MAX_RANK 8

typedef enum {
    GNC_OK = 0,
    GNC_ERROR_IO,           /* a file cannot be read or written */
    GNC_ERROR_FORMAT,       /* a plan or checkpoint is malformed, corrupt or does not fit */
    GNC_ERROR_ARGUMENT,     /* a bad argument: an unknown name, a wrong size, a NULL */
    GNC_ERROR_UNSUPPORTED,  /* valid, but not here (the cuda device without a driver) */
    GNC_ERROR_RUN,          /* running failed (an embedding index or label out of range) */
    GNC_ERROR_MEMORY        /* out of memory */
} gnc_status;

typedef struct {
    gnc_status status;
    char message[512];      /* one line, no newline */
} gnc_error;

/* ORDER: ir_dtype (ir/ir.h) */
typedef enum { GNC_F32, GNC_F16, GNC_BF16, GNC_I32, GNC_I64, GNC_U8 } gnc_dtype;

typedef struct {
    const char *name;       /* valid as long as the plan */
    gnc_dtype dtype;
    int rank;
    int64_t dims[GNC_MAX_RANK];
    size_t bytes;           /* of its data as sessions take and give it (see Data) */
} gnc_tensor_info;

typedef struct gnc_plan gnc_plan;
typedef struct gnc_session gnc_session;

/* gnc's version, "0.2.0": CMakeLists.txt's project(VERSION) */
GNC_API const char *gnc_version(void);

/* ---- plans ---- */

/* Reads and checks a plan file (every size, offset and checksum, the program,
 * the memory plan); *plan is NULL after an error. */
GNC_API gnc_status gnc_plan_load(gnc_plan **plan, const char *path, gnc_error *err);
/* The same from size bytes at data (copied: data may go after the call). */
GNC_API gnc_status gnc_plan_load_memory(gnc_plan **plan, const void *data, size_t size,
                                        gnc_error *err);
GNC_API void gnc_plan_free(gnc_plan *plan);

/* The integer getters return -1 for a NULL plan. */
GNC_API int gnc_plan_devices(const gnc_plan *plan);
/* 1 for a training step (gnc compile --train), 0 for inference. */
GNC_API int gnc_plan_is_training(const gnc_plan *plan);
/* Inputs, in the program's order; a training step's include train.lr,
 * train.step and train.seed, which gnc_session_train_step sets. */
GNC_API int gnc_plan_input_count(const gnc_plan *plan);
GNC_API gnc_status gnc_plan_input(const gnc_plan *plan, int i, gnc_tensor_info *info);
GNC_API int gnc_plan_output_count(const gnc_plan *plan);
GNC_API gnc_status gnc_plan_output(const gnc_plan *plan, int i, gnc_tensor_info *info);
/* The plan's weights: its parameters and buffers (batchnorm's running
 * statistics), the whole tensor for a partitioned plan's shards, in the
 * program's order; no optimizer state.  *source (if not NULL) gets the name
 * the tensor had in the model it came from, or NULL: an ONNX initializer's,
 * which is the PyTorch state_dict key for a model torch.onnx.export wrote
 * (docs/api.md, "From PyTorch"), valid as long as the plan. */
GNC_API int gnc_plan_param_count(const gnc_plan *plan);
GNC_API gnc_status gnc_plan_param(const gnc_plan *plan, int i, gnc_tensor_info *info,
                                  const char **source);

/* ---- compiling ---- */

typedef struct {
    const char *const *defines; /* "NAME=VALUE" model parameters (gnc compile -D), ndefines */
    int ndefines;
    int train;              /* the training step (SGD), else inference */
    double momentum;        /* SGD's momentum (0: none) */
    int devices;            /* data parallel over this many devices; 0 or 1: one */
    const char *precision;  /* the CUDA program's: "fp32" (NULL), "tf32", "bf16", "fp16" */
    int no_kernels;         /* leave the CUDA kernels out (else compiled by NVRTC where this
                               libgnc has it) */
    const char *loss;       /* "cross_entropy:OUTPUT" or "mse:OUTPUT": a loss on that output,
                               its target a new input (gnc compile --loss): an imported model
                               has none; NULL: the model's own */
    const char *strategy;   /* how devices > 1 share the work, as gnc compile --strategy:
                               "data" (NULL), "zero1".."zero3", "pipeline", "tensor",
                               "hybrid:dp=A,pp=B", or "auto" (the fastest that fits) */
} gnc_compile_options;

/* Compiles a model (.net, or IR text .gir) into a plan, as `gnc compile
 * MODEL -o FILE.gnc` writes one with the same options (docs/design.md: every
 * stage from loading to the plan); options NULL: inference on one device at
 * fp32, kernels where NVRTC is at hand.  A model with errors gives
 * GNC_ERROR_FORMAT and the first diagnostic, "file:line:col: error: ...". */
GNC_API gnc_status gnc_compile(gnc_plan **plan, const char *path,
                               const gnc_compile_options *options, gnc_error *err);
/* The same from size bytes at data (read during the call only): an ONNX
 * model (the bytes torch.onnx.export writes into an io.BytesIO), a .net model
 * or IR text, told apart by name's suffix (.onnx, .net, .gir) or else by the
 * bytes themselves, as gnc compile tells files apart.  name (NULL: "<memory>")
 * names the model in messages.  An ONNX model whose weights lie in external
 * data files is GNC_ERROR_FORMAT: in memory it has no folder to read them
 * from. */
GNC_API gnc_status gnc_compile_memory(gnc_plan **plan, const void *data, size_t size,
                                      const char *name, const gnc_compile_options *options,
                                      gnc_error *err);

/* ---- sessions ---- */

typedef struct {
    const char *device;     /* "cpu" or "cuda"; NULL: cpu (cuda where a GPU is present once
                               the GPU path has passed its check on one: docs/api.md).
                               cuda without a driver or GPU (libcuda.so.1, from $GNC_CUDA_LIBDIR
                               if set), or in a build without the CUDA toolkit:
                               GNC_ERROR_UNSUPPORTED with the reason (docs/api.md, Devices) */
    uint64_t seed;          /* the parameters' initializers and dropout masks */
    int eager;              /* cuda: launch step by step instead of replaying a CUDA graph
                               (also where the environment has GNC_CUDA_EAGER=1) */
    double timeout_s;       /* a partitioned plan: the seconds one device waits for another
                               (a collective, a recv; on cuda an NCCL call) before the run
                               fails with GNC_ERROR_RUN naming the op and whom it waited
                               for; 0: 300.  Negative or not finite: GNC_ERROR_ARGUMENT */
    int share_gpus;         /* cuda: a plan of more devices than the machine has GPUs runs
                               with devices sharing GPUs (device d on GPU d mod count,
                               their collectives as copies on the GPU, not NCCL); 0: such a
                               plan is GNC_ERROR_UNSUPPORTED, naming both counts */
} gnc_session_options;

/* A session runs plan on a device (a partitioned plan on as many virtual
 * devices on the CPU), its parameters filled from their initializers with
 * options->seed; options NULL: all defaults.  Inputs start at zero. */
GNC_API gnc_status gnc_session_init(gnc_session **s, const gnc_plan *plan,
                                    const gnc_session_options *options, gnc_error *err);
GNC_API void gnc_session_free(gnc_session *s);
/* "cpu" or "cuda" */
GNC_API const char *gnc_session_device(const gnc_session *s);
/* What went wrong without failing, for the application to tell its user, or
 * NULL: on cuda, a run that could not be captured into a CUDA graph (the
 * session runs step by step since; docs/runtime.md).  Valid until the next
 * call on s. */
GNC_API const char *gnc_session_warning(const gnc_session *s);

/* Copies bytes of data (exactly the input's gnc_tensor_info.bytes) into input
 * name; it stays set for later runs. */
GNC_API gnc_status gnc_session_set_input(gnc_session *s, const char *name, const void *data,
                                         size_t bytes, gnc_error *err);
/* One inference (an inference plan). */
GNC_API gnc_status gnc_session_run(gnc_session *s, gnc_error *err);
/* One training step (a training plan) at learning rate lr, step being the
 * steps taken before it (Adam's bias correction, dropout masks).  The new
 * parameters are the session's for the next step. */
GNC_API gnc_status gnc_session_train_step(gnc_session *s, double lr, int64_t step,
                                          gnc_error *err);
/* Copies output name of the last run into data (bytes: its size);
 * GNC_ERROR_ARGUMENT before a run has finished, or after one failed. */
GNC_API gnc_status gnc_session_output(const gnc_session *s, const char *name, void *data,
                                      size_t bytes, gnc_error *err);
/* The loss of the last run or step (a plan whose model has one); as outputs,
 * none before a run has finished. */
GNC_API gnc_status gnc_session_loss(const gnc_session *s, double *loss, gnc_error *err);

/* Weights one at a time, as gnc_plan_param lists them (bytes: their size as
 * gnc_tensor_info.bytes says): read the session's current values, or write
 * new ones, which the next run, step or checkpoint uses.  A cuda session
 * reads the GPU's values back once after each run or step, and writes them
 * all to it before the next. */
GNC_API gnc_status gnc_session_read_param(gnc_session *s, const char *name, void *data,
                                          size_t bytes, gnc_error *err);
GNC_API gnc_status gnc_session_write_param(gnc_session *s, const char *name, const void *data,
                                           size_t bytes, gnc_error *err);

/* Checkpoints (safetensors; docs/train.md): every parameter, buffer and
 * optimizer state, with step (steps taken) and the seed, written atomically.
 * Loading needs every parameter and buffer of the plan in the file; *step (if
 * not NULL) receives the file's step, or 0; a step that is not a count (0 or
 * more) is refused, when saving and when loading. */
GNC_API gnc_status gnc_session_save_checkpoint(gnc_session *s, const char *path, int64_t step,
                                               gnc_error *err);
GNC_API gnc_status gnc_session_load_checkpoint(gnc_session *s, const char *path, int64_t *step,
                                               gnc_error *err);

#ifdef __cplusplus
}
#endif

#endif
