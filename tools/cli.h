/* What the gnc subcommands share (tools/gnc.c parses, tools/train.c trains). */
#ifndef GNC_CLI_H
#define GNC_CLI_H

#include "diag.h"
#include "driver.h"
#include "ir.h"
#include "passes.h"

#define MAX_DEFINES DRV_MAX_DEFINES
#define MAX_INPUTS 64
#define MAX_CAPS DRV_MAX_CAPS   /* devices a --mem-cap can name */

/* The MPI world gnc runs in (tools/mpi.c). */
typedef struct {
    int ranks;                  /* its size; 1: not under MPI */
    int rank;                   /* this process's: it runs device rank */
    int local_rank;             /* its rank among the ranks on its node: its GPU's */
    int local_ranks;            /* the ranks on its node, which share its cores */
    int together;               /* the failure being reported was found by every rank
                                   at once (a collective check): the job ends through
                                   MPI_Finalize with the status, not MPI_Abort */
    double timeout;             /* --timeout: how long gnc's own collectives wait */
    int solo;                   /* rank 0 runs the command alone (eval, dump): the others
                                   wait for it at the end without a deadline */
} cli_world;

/* The command line: the compile configuration (driver/driver.h), then what
 * the commands do besides compiling. */
typedef struct {
    drv_config c;               /* what shapes the program; c.mem_cap and c.flags point
                                   into mem_cap and flags below */
    const char *cmd;
    const char *out;            /* -o */
    const char *input_names[MAX_INPUTS], *input_files[MAX_INPUTS];
    int ninputs;
    unsigned long long seed;
    int seed_given;             /* --seed was on the command line */
    int threads;
    int repeat;
    int dump_memory, stats;
    const char *dump_memory_file; /* --dump-memory=FILE.json|FILE.svg */
    int json;                   /* --json: one JSON object alone on standard output
                                   (compile, run, eval, inspect) */
    int profile;                /* --profile: time per op */
    const char *profile_file;   /* --profile=FILE.json: the measured kernels as a Chrome trace */
    const char *trace_file;     /* compile --trace FILE.json: the predicted step, likewise */
    int dot;                    /* dump --format dot */
    int devices_given;          /* --gpus or --devices */
    int64_t mem_cap[MAX_CAPS];  /* --mem-cap D=SIZE,...; 0: none */
    int dump_plan;              /* --dump-plan[=FILE.json] */
    const char *dump_plan_file;
    /* gnc train and gnc eval */
    const char *data;           /* --data DIR (IDX files or NAME.npy) or FILE.safetensors */
    const char *tokens;         /* --tokens FILE: a token stream (text or .npy) */
    double test_fraction;       /* --test-fraction X: the test split where the data has none */
    const char *weights;        /* --weights FILE (eval) */
    const char *checkpoint;     /* --checkpoint FILE */
    const char *resume;         /* --resume FILE */
    const char *log;            /* --log FILE.csv or FILE.jsonl */
    const char *plot;           /* --plot FILE.svg */
    long long log_every;        /* --log-every N: a row every N steps too */
    const char *schedule;       /* --schedule constant|step|cosine */
    long long epochs, steps, batch, warmup, step_size;
    double lr, gamma;
    const char *device;         /* --device cpu|cuda; NULL: the default */
    int cuda;                   /* the device picked (cli_device) is cuda */
    int eager;                  /* --eager: cuda launches step by step, no CUDA graph */
    int share_gpus;             /* --share-gpus: more program devices than GPUs */
    double timeout;             /* --timeout: seconds a device waits for another; 0: the
                                   runtime's default (RT_TIMEOUT_DEFAULT) */
    const char *program_flag;   /* the first option given that shapes a program
                                   (cli_is_program_flag): a plan refuses it */
    char flags[1024];           /* the options given that shape a program, in order
                                   (cli_flag_record): a plan's meta records them */
    cli_world *world;           /* under mpirun: rank r runs device r of the program */
    int argc;                   /* the command line, for the command that resumes */
    char **argv;
} options;

/* Makes folder dir and those above it that do not exist (mkdir -p); 0, or -1
 * after a message naming flag, the option that gave it. */
int cli_make_dirs(const char *dir, const char *flag);
/* Whether standard output is a pipe whose reader has gone (gnc ... | head). */
int cli_stdout_gone(void);
/* Runs argv[0] (found on PATH) with file descriptor out as its standard
 * output, writing its standard input through write(f, ctx): a picture drawn
 * by Graphviz's dot or librsvg's rsvg-convert.  0; 1 where argv[0] is not
 * installed; -1 with err where a pipe cannot be made or the program fails. */
int cli_pipe_to(char *const argv[], int out, void (*write)(FILE *f, const void *ctx),
                const void *ctx, char *err, size_t errlen);
/* --json (tools/gnc.c): cli_json_number adds v to obj as key, null where it
 * is not finite (JSON has no NaN or infinity); cli_json_print prints root on
 * standard output and frees it: 0, or 1 after saying why. */
struct cJSON;
struct cJSON *cli_json_number(struct cJSON *obj, const char *key, double v);
int cli_json_print(struct cJSON *root);



/* --dump-plan: the text on standard output, or the JSON written to path. */
int cli_write_plan(const drv_program *p, const char *path);
int cli_parse_mem_cap(const char *spec, options *o, char *err, size_t errlen);

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
/* The MPI library gnc was built with ("Open MPI v4.1.4"), or NULL: none. */
const char *cli_mpi_library(void);
int cli_mpi_options(options *o, const char *cmd);
int cli_mpi_end(const cli_world *w, int rc);
/* Under MPI, collectively: whether every rank has a GPU of its own (its local
 * rank below its node's GPU count); and NCCL's id, made by rank 0 and sent to
 * every rank (0, or -1 on every rank with rank 0's reason in err). */
int cli_mpi_gpus(const cli_world *w);
int cli_mpi_cuda_id(const cli_world *w, void *id, size_t bytes, char *err, size_t errlen);
/* Watches the blocking call that follows, a wait for the other ranks with no
 * polled form (NCCL's set-up), for `what`: past --timeout this rank says what
 * it waited for and exits, which ends the job.  NULL: the call returned. */
void cli_mpi_watch(const cli_world *w, const char *what);
/* Under MPI, collectively after every rank compiled: reports d (rank 0 its
 * own problems; another rank only those that rank 0 does not have) and checks
 * that every rank compiled the same program and plan (g NULL: this rank
 * failed).  Returns 0 when all did, else -1 on every rank.  Without MPI: prints
 * d and returns whether g compiled. */
int cli_mpi_agree(const options *o, const drv_program *p, diag *d);
/* The executor of a compiled program: device o->world->rank of it under MPI (when
 * per_rank), else all of it in this process. */
struct rt_exec *cli_exec_new(const options *o, const drv_program *p, int per_rank, char *err,
                             size_t errlen);

/* Devices (tools/plan.c; runtime/api/session.h).  cli_device: --device of run,
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
struct rt_session *cli_session_new(const options *o, const drv_program *p, int per_rank,
                                   uint64_t seed, char *err, size_t errlen);
/* Prints the session's warning (rt_session_warning), once per process. */
void cli_session_warn(const struct rt_session *s);
/* drv_plan_memory, saying why it failed. */
int cli_plan_memory(const options *o, drv_program *p, int train);

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
int cli_plan_write(const options *o, const drv_program *p, const char *path);
int cli_plan_open(const options *o, drv_program *out);
int cmd_inspect(const options *o);

/* Chrome traces (tools/trace.c): the predicted step of p (gnc compile
 * --trace), the kernels session s ran while profiling (--profile=FILE; what:
 * "measured: gnc run"): the CPU executor's (rt_exec_events), or on cuda the
 * GPU's steps (rt_cuda_events).  0, or 1 after saying why. */
struct rt_session;
int cli_write_predicted_trace(const pt_plan *p, const char *path);
int cli_write_measured_trace(struct rt_session *s, const char *what, const char *path);

/* The pictures' helpers (tools/trace.c): whether s ends in suffix; s as XML
 * text, its specials escaped and anything outside printable ASCII as '?'. */
int cli_has_suffix(const char *s, const char *suffix);
void cli_put_xml(FILE *f, const char *s);
/* root as one line of JSON on f: 0, or -1 when it cannot be written. */
struct cJSON;
int cli_put_json(FILE *f, const struct cJSON *root);
/* path written by fill(f, ctx) (0, or -1 on its failure) through a temporary
 * file renamed into place, so that a failure leaves neither: 0, or 1 after
 * "gnc: error: FLAG: cannot write 'PATH': ...". */
int cli_write_atomic(const char *path, const char *flag, int (*fill)(FILE *f, void *ctx),
                     void *ctx);

/* compile --dump-memory=FILE: p as JSON or SVG, by FILE's suffix (tools/memory.c).
 * 0, or 1 after saying why. */
int cli_write_memory(const ir_graph *g, const mp_plan *p, const char *path);

/* gnc dump --format dot: g as a Graphviz digraph (tools/dot.c). */
void cli_print_dot(const ir_graph *g, FILE *f);

/* Predicted beside measured (tools/footprint.c), for gnc run and gnc train.
 * cli_mem_start, just before the session is made: the baseline of the
 * measured peak.  cli_mem_add: a planned item the command holds besides the
 * session's (gnc train's data set), its bytes counted from its allocation.
 * cli_mem_end, after the last run: the session's buffers as planned items and
 * the measured peak (on the CPU the resident set's high-water mark above the
 * baseline; on cuda the GPU memory in use above what was before).
 * predicted_step_ms: the cost model's step of p on o's device (its model's
 * name in *model_name), NaN where it has none. */
#define CLI_MEM_ITEMS 24
typedef struct {
    struct { const char *name; double bytes; } item[CLI_MEM_ITEMS];
    int nitems;
    double planned;             /* the items' sum */
    double transient;           /* freed before the end, not in planned: oneDNN's trials */
    double start_rss;           /* the baseline, bytes (-1: unknown) */
    int reset;                  /* the high-water mark was reset at the baseline */
    double measured;            /* bytes; NaN: not measurable here */
    int gpu;                    /* measured on the GPU */
    double reserve;             /* cuda: the libraries' estimated reserve (not in planned) */
} cli_mem;
void cli_mem_start(cli_mem *m);
void cli_mem_add(cli_mem *m, const char *name, double bytes);
struct rt_session;
int cli_mem_end(cli_mem *m, struct rt_session *s, int train);
/* A second session's buffers in one sum (gnc train's evaluation program):
 * every one where it ran (ran), else those its making filled (the
 * parameters); on cuda its allocations on every device. */
double cli_mem_session_bytes(struct rt_session *s, int ran);
void cli_mem_print(const cli_mem *m, FILE *f);
void cli_mem_json(const cli_mem *m, struct cJSON *root);
double predicted_step_ms(const options *o, const drv_program *p, const char **model_name);

int cmd_train(const options *o);
int cmd_eval(const options *o);
/* gnc export (tools/export.c): o's model as an ONNX file at o->out. */
int cmd_export(const options *o);

#endif
