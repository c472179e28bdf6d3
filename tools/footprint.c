/* Predicted beside measured, for gnc run and gnc train (docs/cli.md,
 * "Predicted and measured"): the step the cost model predicts beside the one
 * timed, and the memory the run's buffers take beside what the process
 * measurably used.
 *
 * The planned memory is counted from the sizes of the allocations
 * themselves, never fitted to a measurement: on the CPU every buffer the
 * executor holds for a step (rt_exec_memory: the plan's arena, parameters,
 * optimizer state, inputs, workspaces, oneDNN's and Winograd's copies of the
 * weights), and what the command adds (gnc train's data set and batches,
 * cli_mem_add); on a GPU each device's allocations (rt_cuda_memory).
 *
 * The measured peak on the CPU is the resident set's high-water mark at the
 * end (VmHWM of /proc/self/status) above the resident set at the baseline
 * (VmRSS), taken by cli_mem_start just before the executor is made: after
 * the libraries are loaded and the program compiled, so that neither the
 * code mapped at start nor the compiler's graph and passes count; the
 * high-water mark is reset there (5 into /proc/self/clear_refs), so that the
 * compiler's own peak does not count either.  What the process adds besides
 * the counted buffers is what the measurement shows above the plan: the code
 * a run touches for the first time (OpenBLAS's and oneDNN's kernels, oneDNN's
 * JIT code), the threads' stacks, OpenBLAS's own buffers, malloc's overhead.
 * On a GPU it is the device's memory in use (cuMemGetInfo) above what was in
 * use before the device's first allocation, as it is at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "base.h"
#include "codegen.h"
#include "cost.h"
#include "cuda.h"
#include "exec.h"
#include "plan.h"
#include "session.h"
#include "cli.h"

/* /proc/self/status's field key ("VmRSS:") in bytes, or -1. */
static double status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            v = strtod(line + n, NULL) * 1024; /* "VmRSS:    1234 kB" */
            break;
        }
    if (f)
        fclose(f);
    return v;
}

void cli_mem_start(cli_mem *m)
{
    memset(m, 0, sizeof *m);
    /* the high-water mark from here on (Linux 4.0 and later); where it cannot
       be reset the peak so far counts, which only the compiler's could raise */
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        m->reset = fputs("5", f) >= 0;
        m->reset &= fclose(f) == 0;
    }
    m->start_rss = status_bytes("VmRSS:");
}

void cli_mem_add(cli_mem *m, const char *name, double bytes)
{
    if (bytes <= 0 || m->nitems >= CLI_MEM_ITEMS)
        return;
    m->item[m->nitems].name = name;
    m->item[m->nitems++].bytes = bytes;
    m->planned += bytes;
}

/* The executor's buffers as items, largest groups first. */
static void add_exec(cli_mem *m, const rt_exec *x, int train)
{
    rt_memory r;
    rt_exec_memory(x, &r);
    cli_mem_add(m, train ? "activations and gradients" : "activations", (double)r.arena);
    cli_mem_add(m, "parameters", (double)r.params);
    cli_mem_add(m, "optimizer state", (double)r.state);
    cli_mem_add(m, "values of their own", (double)r.values);
    cli_mem_add(m, "inputs", (double)r.inputs);
    cli_mem_add(m, "workspace", (double)r.workspace);
    cli_mem_add(m, "Winograd weights", (double)r.winograd);
    cli_mem_add(m, "oneDNN weights", (double)r.dnnl_weights);
    cli_mem_add(m, "oneDNN workspace", (double)r.dnnl_work);
    cli_mem_add(m, "oneDNN kernels", (double)r.dnnl_kernels);
    cli_mem_add(m, "send buffers", (double)r.comm);
    cli_mem_add(m, "tables", (double)r.tables);
    m->transient = (double)r.dnnl_trial;
}

/* Every device of this process on gpu, summed (rt_cuda_memory). */
typedef struct {
    double region[CG_NREGIONS], staging, other, reserve, used;
    int any;                    /* a device of this process */
} gpu_sum;

static void sum_gpu(rt_cuda *gpu, gpu_sum *t)
{
    memset(t, 0, sizeof *t);
    for (int d = 0;; d++) {
        rt_cuda_mem c;
        char err[256];
        int rc = rt_cuda_memory(gpu, d, &c, err, sizeof err);
        if (rc < 0)
            break; /* past the last device */
        if (rc > 0)
            continue; /* under MPI, another rank's */
        t->any = 1;
        for (int r = 0; r < CG_NREGIONS; r++)
            t->region[r] += (double)c.region[r];
        t->staging += (double)c.staging;
        t->other += (double)(c.mailbox + c.scratch + c.zeros);
        t->reserve += (double)c.reserve;
        t->used += (double)c.used;
    }
}

int cli_mem_end(cli_mem *m, rt_session *s, int train)
{
    rt_cuda *gpu = rt_session_gpu(s);
    if (!gpu) {
        add_exec(m, rt_session_host(s), train);
        double hwm = status_bytes("VmHWM:");
        m->measured = m->start_rss >= 0 && hwm >= 0 ? hwm - m->start_rss : NAN;
        return 0;
    }
    static const char *const regions[CG_NREGIONS] = {
        [CG_ARENA] = "activations", [CG_PARAMS] = "parameters", [CG_INPUTS] = "inputs",
        [CG_WORKSPACE] = "library workspaces and staging"};
    gpu_sum t;
    sum_gpu(gpu, &t);
    m->gpu = 1;
    for (int r = 0; r < CG_NREGIONS; r++)
        cli_mem_add(m, regions[r] ? regions[r] : "other regions", t.region[r]);
    cli_mem_add(m, "prefetch staging", t.staging);
    cli_mem_add(m, "messages and zeros", t.other);
    m->reserve = t.reserve;
    m->measured = t.any ? t.used : NAN;
    return 0;
}

double cli_mem_session_bytes(rt_session *s, int ran)
{
    rt_cuda *gpu = rt_session_gpu(s);
    if (gpu) {
        gpu_sum t;
        sum_gpu(gpu, &t);
        double sum = t.staging + t.other;
        for (int r = 0; r < CG_NREGIONS; r++)
            sum += t.region[r];
        return sum;
    }
    /* made and not run: its parameters alone were written (their
       initializers); the rest was allocated and never touched */
    if (!ran) {
        rt_memory r;
        rt_exec_memory(rt_session_host(s), &r);
        return (double)(r.params + r.state);
    }
    cli_mem m;
    memset(&m, 0, sizeof m);
    add_exec(&m, rt_session_host(s), 1);
    return m.planned;
}

void cli_mem_print(const cli_mem *m, FILE *f)
{
    char b[32];
    base_human_bytes(m->planned, b, sizeof b);
    fprintf(f, "memory: planned %s (", b);
    for (int i = 0; i < m->nitems; i++) {
        base_human_bytes(m->item[i].bytes, b, sizeof b);
        fprintf(f, "%s%s %s", i ? ", " : "", m->item[i].name, b);
    }
    fprintf(f, ")");
    if (isfinite(m->measured)) {
        base_human_bytes(m->measured, b, sizeof b);
        fprintf(f, ", measured %s %s (%+.1f%%)", m->gpu ? "in use on the GPU" : "peak", b,
                m->planned > 0 ? 100 * (m->measured - m->planned) / m->planned : 0.0);
        if (!m->gpu)
            fprintf(f, " above start");
    } else {
        fprintf(f, ", measured: not available here");
    }
    fputc('\n', f);
}

void cli_mem_json(const cli_mem *m, cJSON *root)
{
    cJSON *x = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(x, "planned_bytes", m->planned);
    cJSON *items = cJSON_AddObjectToObject(x, "planned");
    for (int i = 0; i < m->nitems; i++)
        cJSON_AddNumberToObject(items, m->item[i].name, m->item[i].bytes);
    cli_json_number(x, "measured_bytes", m->measured);
    cJSON_AddStringToObject(x, "measured_as", m->gpu ? "gpu_in_use" : "rss_peak_above_start");
    if (m->gpu)
        cJSON_AddNumberToObject(x, "library_reserve_bytes", m->reserve);
    else
        cli_json_number(x, "start_rss_bytes", m->start_rss);
    cJSON_AddNumberToObject(x, "transient_bytes", m->transient);
}

/* The one place that asks the cost model for a run's step: on the CPU the
 * simulation of the program (cost_simulate, on --device-model, default cpu),
 * on cuda the GPU program's run on each device at its precision
 * (drv_run_seconds, default h200, the GPU the model was calibrated on), the
 * slowest device's, as the devices run at once. */
double predicted_step_ms(const options *o, const drv_program *p, const char **model_name)
{
    char err[160];
    cost_device model;
    const char *spec = o->c.device_model ? o->c.device_model : o->cuda ? COST_CALIBRATED_GPU : "cpu";
    if (cost_device_parse(spec, &model, err, sizeof err) != 0)
        return NAN; /* parse_args checked it */
    if (model_name)
        *model_name = model.name;
    if (!o->cuda) {
        cost_sim *s = cost_simulate(p->g, &model);
        double ms = s ? s->step_ms : NAN;
        cost_sim_free(s);
        return ms;
    }
    cg_program *own = NULL;
    const cg_program *cp = p->cuda;
    if (!cp && p->file)
        cp = own = rt_plan_program(p->file, err, sizeof err);
    if (!cp)
        return NAN;
    cost_device_at(&model, cp->opts.precision);
    double most = 0;
    for (int d = 0; d < cp->ndevices; d++) {
        double s = drv_run_seconds(cp, d, &model, NULL);
        most = s > most ? s : most;
    }
    cg_program_free(own);
    return most * 1e3;
}
