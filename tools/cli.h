/* What the gnc subcommands share (tools/gnc.c parses, tools/train.c trains). */
#ifndef GNC_CLI_H
#define GNC_CLI_H

#include "diag.h"
#include "ir.h"
#include "passes.h"

#define GNC_VERSION "0.1.0"
#define MAX_DEFINES 64
#define MAX_INPUTS 64
#define MAX_CAPS 4096           /* devices a --mem-cap can name */

/* The MPI world gnc runs in (tools/mpi.c). */
typedef struct {
    int ranks;                  /* its size; 1: not under MPI */
    int rank;                   /* this process's: it runs device rank */
    int local_rank;             /* its rank among the ranks on its node: its GPU's */
    int local_ranks;            /* the ranks on its node, which share its cores */
    int together;               /* the failure being reported was found by every rank
                                   at once (a collective check): the job ends through
                                   MPI_Finalize with the status, not MPI_Abort */
} cli_world;

typedef struct {
    const char *cmd;
    const char *file;
    const char *model;
    const char *out;            /* -o */
    const char *define_names[MAX_DEFINES], *define_values[MAX_DEFINES];
    int ndefines;
    const char *input_names[MAX_INPUTS], *input_files[MAX_INPUTS];
    int ninputs;
    unsigned long long seed;
    int threads;
    int repeat;
    int train;                  /* --train: the training-step graph */
    const char *passes;         /* --passes=LIST; NULL: the default pipeline */
    const char *dump_ir;        /* --dump-ir=all|before:P|after:P */
    const char *dump_dir;       /* --dump-dir DIR */
    int verify_each, time_passes, dump_memory, stats, remat;
    int profile;                /* --profile: time per op */
    ad_optimizer opt;           /* --optimizer, --momentum, --nesterov, --weight-decay */
    /* partitioning: --gpus N or --devices cpu:N, --strategy, ... */
    pt_options part;
    int strategy_auto;          /* --strategy auto (the default with several devices) */
    int gpus;                   /* the devices are GPUs (--gpus): the cost model's default */
    int devices_given;          /* --gpus or --devices */
    const char *device_model;   /* --device-model SPEC (passes/cost.h) */
    int64_t mem_cap_all;        /* --mem-cap SIZE: every device */
    int64_t mem_cap[MAX_CAPS];  /* --mem-cap D=SIZE,...; 0: none */
    int dump_plan;              /* --dump-plan[=FILE.json] */
    const char *dump_plan_file;
    /* gnc train and gnc eval */
    const char *data;           /* --data DIR */
    const char *weights;        /* --weights FILE (eval) */
    const char *checkpoint;     /* --checkpoint FILE */
    const char *resume;         /* --resume FILE */
    const char *log;            /* --log FILE.csv */
    const char *schedule;       /* --schedule constant|step|cosine */
    long long epochs, steps, batch, warmup, step_size;
    double lr, gamma;
    const char *device;         /* --device cpu|cuda; NULL: the default */
    int cuda;                   /* the device picked (cli_device) is cuda */
    int eager;                  /* --eager: cuda launches step by step, no CUDA graph */
    /* the CUDA backend of gnc compile -o (docs/codegen.md) */
    int precision;              /* --precision: a cg_precision; default CG_FP32 */
    int conv;                   /* --conv: a cg_conv_impl; default CG_CONV_CUDNN */
    int conv_auto;              /* --conv auto: each convolution timed both ways */
    const char *archs;          /* --arch sm_80,sm_90: the cubins a plan holds */
    int no_kernels;             /* --no-kernels: no codegen, no kernel sections */
    int autotune;               /* --autotune: library algorithms timed on the GPU */
    const char *program_flag;   /* the first option given that shapes a program
                                   (cli_is_program_flag): a plan refuses it */
    char flags[1024];           /* the options given that shape a program, in order
                                   (cli_flag_record): a plan's meta records them */
    cli_world *world;           /* under mpirun: rank r runs device r of the program */
} options;

/* Loads a model (.net) or IR text (.gir) and verifies it; with define batch
 * (> 0), -D batch=BATCH comes first (the command line's -D still wins). */
ir_graph *cli_load(const options *o, long long batch, diag *d);
/* Runs o's pipeline on g (--passes, or the default one for training or
 * inference), then plans its memory and proves the plan.  Returns the plan, or
 * NULL with the problem on d. */
mp_plan *cli_optimize(const options *o, ir_graph *g, int training, diag *d);
double cli_now_ms(void);

/* A compiled program: graph, memory plan, partition plan; or a plan file's
 * program and memory plan (file), which it owns then.  A model compiled for
 * the cuda device is made a plan in memory (cli_plan_memory): g and mp are
 * then the plan's, and the compiled ones are kept in compiled_g and
 * compiled_mp until the program is freed. */
typedef struct {
    ir_graph *g;
    mp_plan *mp;
    pt_plan *plan;
    char strategy[96];
    struct rt_plan *file;
    ir_graph *compiled_g;
    mp_plan *compiled_mp;
} cli_program;

/* Compiles o's model (at batch, as cli_load; as a training step when train)
 * for o->part.devices
 * devices with o's strategy, or with --strategy auto the candidate with the
 * shortest predicted step that compiles and fits every device's memory cap
 * (its plan lists them all).  Returns 0, or -1 with the problems on d. */
int cli_compile_partitioned(const options *o, long long batch, int train, cli_program *out,
                            diag *d);
void cli_program_free(cli_program *p);
void cli_candidates_free(pt_plan *p);
/* --dump-plan: the text on standard output, or the JSON written to path. */
int cli_write_plan(const cli_program *p, const char *path);
int cli_parse_mem_cap(const char *spec, options *o, char *err, size_t errlen);
/* The cost model's device: --device-model, or h100-nvlink for --gpus, cpu. */
const cost_device *cli_device_model(const options *o, cost_device *buf, char *err, size_t errlen);

/* gnc under mpirun (tools/mpi.c; docs/partition.md, "Running under MPI").
 * cli_mpi_init, first thing in main: under a launcher that says there are
 * several ranks (OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1), initializes MPI
 * and fills w; otherwise w->ranks = 1.  Returns -1 after saying why when gnc
 * has no MPI backend.  cli_mpi_options, after the flags: the device count is
 * the world's size (--devices must agree), each rank's threads its share of
 * the cores, and ranks other than 0 print no pass timings or dumps; returns 0,
 * or 2 after a usage error.  cli_mpi_end, last: finalizes MPI and returns rc,
 * but for an error that not every rank found at once (!w->together), which
 * ends the whole job with MPI_Abort: the other ranks may be waiting for this
 * one in a collective. */
int cli_mpi_init(int *argc, char ***argv, cli_world *w);
int cli_mpi_options(options *o, const char *cmd);
int cli_mpi_end(const cli_world *w, int rc);
/* Under MPI, collectively: whether every rank has a GPU of its own (its local
 * rank below its node's GPU count); and NCCL's id, made by rank 0 and sent to
 * every rank (0, or -1 on every rank with rank 0's reason in err). */
int cli_mpi_gpus(const cli_world *w);
int cli_mpi_cuda_id(const cli_world *w, void *id, size_t bytes, char *err, size_t errlen);
/* Under MPI, collectively after every rank compiled: reports d (rank 0 its
 * own problems; another rank only those that rank 0 does not have) and checks
 * that every rank compiled the same program and plan (g NULL: this rank
 * failed).  Returns 0 when all did, else -1 on every rank.  Without MPI: prints
 * d and returns whether g compiled. */
int cli_mpi_agree(const options *o, const cli_program *p, diag *d);
/* The executor of a compiled program: device o->world->rank of it under MPI (when
 * per_rank), else all of it in this process. */
struct rt_exec *cli_exec_new(const options *o, const cli_program *p, int per_rank, char *err,
                             size_t errlen);

/* Devices (tools/plan.c; runtime/session.h).  cli_device: --device of run,
 * train and eval (or the default: cpu until RT_GPU_VALIDATED, then cuda where a GPU is present; under mpirun
 * where every rank has one of its own) into o->cuda; with cuda, the driver is
 * probed at once, so that a machine without one fails before anything is
 * compiled, read or written.
 * Returns 0, or 1 after saying why (an unknown name is a usage error of
 * parse_args already).  cli_session_new: the session that runs p on o's
 * device with its parameters from seed: on cpu around cli_exec_new's
 * executor, on cuda from p's plan (a plan file, or cli_plan_memory's).
 * cli_plan_memory: for the cuda device, p (a model compiled in this process)
 * becomes the plan gnc compile -o would write of it, kernels included,
 * decoded from memory; train: a training step.  Returns 0, or -1 after saying
 * why. */
int cli_device(options *o);
struct rt_session *cli_session_new(const options *o, const cli_program *p, int per_rank,
                                   uint64_t seed, char *err, size_t errlen);
/* Prints the session's warning (rt_session_warning), once per process. */
void cli_session_warn(const struct rt_session *s);
int cli_plan_memory(const options *o, cli_program *p, int train);

/* Plan files (tools/plan.c; docs/plan.md).  cli_is_plan: FILE ends in .gnc or
 * starts with the plan magic.  cli_is_program_flag: an option a plan refuses
 * (it shapes a program, or prints while compiling one); cli_flag_record
 * notes a shaping one in o->flags.  cli_plan_write: gnc compile -o, the program
 * with its meta (flags, strategy, ...).  cli_plan_open: the plan of o->file,
 * checked against --devices and the MPI world; -1 after saying why.
 * cmd_inspect: gnc inspect. */
int cli_is_plan(const char *path);
int cli_is_program_flag(const char *flag);
void cli_flag_record(options *o, const char *flag, const char *value);
int cli_plan_write(const options *o, const cli_program *p, const char *path);
int cli_plan_open(const options *o, cli_program *out);
int cmd_inspect(const options *o);

int cmd_train(const options *o);
int cmd_eval(const options *o);

#endif
