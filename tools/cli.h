/* What the gnc subcommands share (tools/gnc.c parses, tools/train.c trains). */
#ifndef GNC_CLI_H
#define GNC_CLI_H

#include "diag.h"
#include "ir.h"
#include "passes.h"

#define MAX_DEFINES 64
#define MAX_INPUTS 64
#define MAX_CAPS 4096           /* devices a --mem-cap can name */

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
} options;

/* Loads a model (.net) or IR text (.gir) and verifies it; with define batch
 * (> 0), -D batch=BATCH comes first (the command line's -D still wins). */
ir_graph *cli_load(const options *o, long long batch, diag *d);
/* Runs o's pipeline on g (--passes, or the default one for training or
 * inference), then plans its memory and proves the plan.  Returns the plan, or
 * NULL with the problem on d. */
mp_plan *cli_optimize(const options *o, ir_graph *g, int training, diag *d);
double cli_now_ms(void);

/* A compiled program: graph, memory plan, partition plan. */
typedef struct {
    ir_graph *g;
    mp_plan *mp;
    pt_plan *plan;
    char strategy[96];
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

int cmd_train(const options *o);
int cmd_eval(const options *o);

#endif
