/* The compile driver (driver.h): the stages in order, each the function of
 * the folder that holds it; here only their sequence, the strategy search
 * and the plan's meta.  Moved from tools/ (gnc.c, partition.c, plan.c),
 * where the command line keeps parsing and printing. */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "checkpoint.h"
#include "codegen.h"
#include "cuda.h"
#include "frontend.h"
#include "onnx.h"
#include "plan.h"

#define LOG(o) ((o)->log ? (o)->log : stdout)

static int compile_partitioned(const drv_config *o, const ir_graph *src, const pt_options *given,
                               int train, const cost_device *devp, drv_program *out, diag *d);

/* ---------------------------------------------------------------- 1, 2: load, verify */

/* Whether a parameter of g holds its values (an imported model's weights). */
static int has_data(const ir_graph *g)
{
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->init.kind == IR_INIT_DATA && g->params[i]->init.data)
            return 1;
    return 0;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

typedef enum { MODEL_NET, MODEL_IR, MODEL_ONNX } model_format;

/* The format of the model at path: by its name where that says (.onnx,
 * .gir, .net), else by its first bytes (a pipe, /dev/stdin, <(...), a file
 * named otherwise): an ONNX ModelProto starts with its ir_version field
 * (protobuf key 0x08), which no text starts with; IR text's first word,
 * after blank and comment lines, is "graph"; anything else is a .net model.
 * Only bytes read already (a preloaded pipe) or a regular file are looked
 * at: a stream is never read twice. */
static model_format format_of(const char *path)
{
    if (has_suffix(path, ".onnx"))
        return MODEL_ONNX;
    if (has_suffix(path, ".gir"))
        return MODEL_IR;
    if (has_suffix(path, ".net"))
        return MODEL_NET;
    char head[512];
    size_t len = 0;
    const char *kept = base_preloaded(path, &len);
    if (kept) {
        len = len < sizeof head ? len : sizeof head;
        memcpy(head, kept, len);
    } else {
        struct stat st;
        FILE *f = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "rb") : NULL;
        len = f ? fread(head, 1, sizeof head, f) : 0;
        if (f)
            fclose(f);
    }
    if (len > 0 && head[0] == 0x08)
        return MODEL_ONNX;
    size_t i = 0;
    while (i < len) {
        if (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n') {
            i++;
        } else if (head[i] == '#') {
            while (i < len && head[i] != '\n')
                i++;
        } else {
            break;
        }
    }
    return len - i >= 6 && memcmp(head + i, "graph", 5) == 0 &&
                   (head[i + 5] == ' ' || head[i + 5] == '"' || head[i + 5] == '\t')
               ? MODEL_IR
               : MODEL_NET;
}

ir_graph *drv_load(const drv_config *o, long long batch, diag *d)
{
    ir_graph *g;
    model_format format = format_of(o->file);
    if (format == MODEL_IR) {
        if (o->ndefines || o->model) {
            diag_error(d, (ir_loc){o->file, 0, 0}, "-D and --model apply to .net models, "
                       "not to IR text");
            return NULL;
        }
        size_t len;
        const char *why = NULL;
        char *text = base_read_file(o->file, &len, &why);
        if (!text) {
            diag_error(d, (ir_loc){o->file, 0, 0}, "cannot read file: %s", why);
            return NULL;
        }
        g = ir_parse(o->file, text, len, d);
        base_free(text);
    } else {
        /* -D batch=B from --batch, unless -D batch is given too */
        const char *names[DRV_MAX_DEFINES + 1], *values[DRV_MAX_DEFINES + 1];
        char b[32];
        int n = 0;
        if (batch > 0) {
            snprintf(b, sizeof b, "%lld", batch);
            names[n] = "batch", values[n++] = b;
            for (int i = 0; i < o->ndefines; i++)
                if (strcmp(o->define_names[i], "batch") == 0)
                    n = 0;
        }
        for (int i = 0; i < o->ndefines; i++)
            names[n] = o->define_names[i], values[n++] = o->define_values[i];
        fe_options fo = {o->model, n, names, values};
        g = format == MODEL_ONNX ? fe_load_onnx(o->file, &fo, d) : fe_load_file(o->file, &fo, d);
    }
    if (g && o->loss && drv_add_loss(g, o->loss, o->file, d) != 0) {
        ir_graph_free(g);
        return NULL;
    }
    if (g && ir_verify(g, d) > 0) {
        ir_graph_free(g);
        return NULL;
    }
    /* a model's attention written out (softmax(q k^T scale) v, a causal mask)
       becomes one attention node before anything differentiates or exports it;
       IR text is taken as it is (--passes=attention asks for it there) */
    if (g && format != MODEL_IR && pass_attention(g, d) > 0 && o->verify_each &&
        ir_verify(g, d) > 0) {
        diag_error(d, (ir_loc){0}, "the IR does not verify after pass 'attention'");
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

int drv_set_strategy(drv_config *c, const char *val)
{
    unsigned long long dp, pp;
    char rest[64];
    c->strategy_auto = 0;
    c->part.zero = 0;
    if (strcmp(val, "data") == 0)
        c->part.strategy = PT_DATA;
    else if (strncmp(val, "zero", 4) == 0 && val[4] >= '1' && val[4] <= '3' && !val[5])
        c->part.strategy = PT_DATA, c->part.zero = val[4] - '0';
    else if (strcmp(val, "pipeline") == 0)
        c->part.strategy = PT_PIPELINE;
    else if (strcmp(val, "tensor") == 0)
        c->part.strategy = PT_TENSOR;
    else if (strcmp(val, "auto") == 0)
        c->strategy_auto = 1;
    else if (!strchr(val, '-') && /* %llu takes -1 as 2^64 - 1 */
             sscanf(val, "hybrid:dp=%llu,pp=%llu%63s", &dp, &pp, rest) == 2 && dp >= 1 &&
             pp >= 1 && dp <= IR_MAX_DEVICES && pp <= IR_MAX_DEVICES &&
             dp * pp <= IR_MAX_DEVICES) {
        c->part.strategy = PT_HYBRID;
        c->part.dp = (int)dp, c->part.pp = (int)pp;
    } else {
        return -1;
    }
    return 0;
}

int drv_add_loss(ir_graph *g, const char *spec, const char *file, diag *d)
{
    ir_loc at = {file, 0, 0};
    const char *colon = strchr(spec, ':');
    int ce = colon && (size_t)(colon - spec) == 13 && strncmp(spec, "cross_entropy", 13) == 0;
    int mse = colon && (size_t)(colon - spec) == 3 && strncmp(spec, "mse", 3) == 0;
    if (!ce && !mse) {
        diag_error(d, at, "--loss '%s': expected cross_entropy:OUTPUT or mse:OUTPUT", spec);
        return -1;
    }
    if (g->loss) {
        diag_error(d, at, "--loss: the model has a loss already ('%s')", g->loss->name);
        return -1;
    }
    ir_value *out = NULL;
    for (int i = 0; i < g->noutputs && !out; i++)
        if (strcmp(g->outputs[i].name, colon + 1) == 0)
            out = g->outputs[i].value;
    if (!out) {
        char name[96];
        diag_error(d, at, "--loss: the model has no output '%s'%s%s",
                   ir_escape_str(name, sizeof name, colon + 1), g->noutputs ? "; its first is " : "",
                   g->noutputs ? g->outputs[0].name : "");
        return -1;
    }
    char ts[128];
    ir_type t = out->type;
    if (!ir_is_float(t.dtype) || (ce && t.rank < 2)) {
        diag_error(d, at, "--loss: %s needs a floating-point output%s, '%s' is %s",
                   ce ? "cross_entropy" : "mse", ce ? " [n, classes, ...]" : "", colon + 1,
                   ir_type_str(&t, ts, sizeof ts));
        return -1;
    }
    if (ce) { /* the labels: the output's shape without the class axis */
        t.dtype = IR_I32;
        for (int k = 1; k + 1 < t.rank; k++)
            t.dims[k] = t.dims[k + 1];
        t.rank--;
    }
    ir_value *in[2] = {out, ir_add_input(g, ir_unique_name(g, ce ? "label" : "target"), t, at)};
    ir_node *n = ir_node_new(g, ce ? IR_OP_CROSS_ENTROPY : IR_OP_MSE, 2, in, 1, "loss", at);
    if (ce) { /* F.cross_entropy's defaults */
        ir_set_float(g, n, "label_smoothing", 0);
        ir_set_int(g, n, "ignore_index", -100);
        ir_set_int(g, n, "split", 1);
    }
    char why[256];
    if (!ir_infer(n, &n->out[0]->type, why, sizeof why)) {
        diag_error(d, at, "--loss: %s", why);
        return -1;
    }
    ir_append(g, n);
    g->loss = n->out[0];
    return 0;
}

mp_plan *drv_optimize(const drv_config *o, const pt_options *part, ir_graph *g, int training,
                      diag *d)
{
    int partitioned = pt_partitions(part);
    pm_options pm = {o->verify_each, o->time_passes, o->dump_ir, o->dump_dir, LOG(o),
                     partitioned ? part : NULL};
    const char *pipeline = o->passes ? o->passes
                                     : pm_default_pipeline(training, o->remat, partitioned);
    if (training && part->recompute && !o->passes) {
        /* after scheduling (simplify's CSE would merge the copies back), before
           partitioning */
        if (pm_run(g, o->remat ? "simplify,remat,schedule" : "simplify,schedule", &pm, d) != 0 ||
            pass_recompute(g, part->recompute, d) < 0 ||
            pm_run(g, partitioned ? "partition,fuse" : "fuse", &pm, d) != 0)
            return NULL;
    } else if (pm_run(g, pipeline, &pm, d) != 0) {
        return NULL;
    }
    ir_graph_renumber(g); /* as a plan's loader will number it */
    mp_plan *p = mp_plan_graph(g);
    char err[512];
    if (mp_check(g, p, err, sizeof err) != 0) { /* a bug in the planner, never the user's */
        diag_error(d, (ir_loc){0}, "internal error: the memory plan does not hold: %s", err);
        mp_plan_free(p);
        return NULL;
    }
    return p;
}


/* The cap of device d: --mem-cap, else the device model's memory. */
static int64_t cap_of(const drv_config *o, const cost_device *dev, int d)
{
    if (o->mem_cap && d < DRV_MAX_CAPS && o->mem_cap[d])
        return o->mem_cap[d];
    if (o->mem_cap_all)
        return o->mem_cap_all;
    for (int i = 0; o->mem_cap && i < DRV_MAX_CAPS; i++)
        if (o->mem_cap[i])
            return dev->mem_bytes; /* per-device caps given, not for this one */
    return dev->mem_bytes;
}

static void describe(const pt_options *p, char *buf, size_t len)
{
    char acc[80] = "";
    if (p->accumulate > 1)
        snprintf(acc, sizeof acc, ", accumulate %d", p->accumulate);
    if (p->recompute)
        snprintf(acc + strlen(acc), sizeof acc - strlen(acc), ", recompute %s",
                 p->recompute == PT_RECOMPUTE_FULL ? "full" : "selective");
    switch (p->strategy) {
    case PT_DATA:
        if (p->deterministic)
            snprintf(buf, len, "data, deterministic");
        else if (p->zero)
            snprintf(buf, len, "data, zero%d%s%s", p->zero, p->sync_bn ? ", sync-bn" : "", acc);
        else
            snprintf(buf, len, "data%s%s", p->sync_bn ? ", sync-bn" : "", acc);
        return;
    case PT_PIPELINE:
        snprintf(buf, len, "pipeline %s, %d microbatches%s", p->schedule == PT_GPIPE ? "gpipe" : "1f1b",
                 p->microbatches ? p->microbatches : 2 * p->devices, acc);
        return;
    case PT_HYBRID:
        snprintf(buf, len, "hybrid dp=%d x pp=%d, %d microbatches%s", p->dp, p->pp,
                 p->microbatches ? p->microbatches : 2 * p->pp, acc);
        return;
    case PT_TENSOR:
        snprintf(buf, len, "tensor%s%s", p->sequence_parallel ? ", sequence parallel" : "", acc);
        return;
    }
}

/* One candidate: the program compiled with part, planned and costed; caps
 * checked.  Returns 0, or -1 with the reason in err (and on d).  A pipeline cuts
 * its stages to fit the caps by an estimate; where the exact plan is still over
 * a device's cap, it is cut again with the cap its estimate must meet lowered
 * by the square of the excess ratio (a few times at most). */
static int build_once(const drv_config *o, const ir_graph *src, const pt_options *part,
                      int train, const cost_device *dev, drv_program *out, diag *d, char *err,
                      size_t errlen, int64_t *over);

static int build(const drv_config *o, const ir_graph *src, const pt_options *part, int train,
                 const cost_device *dev, drv_program *out, diag *d, char *err, size_t errlen,
                 int64_t *peak)
{
    if (peak)
        *peak = 0;
    int n = part->devices < DRV_MAX_CAPS ? part->devices : DRV_MAX_CAPS;
    int64_t *caps = base_xcalloc((size_t)n + 1, sizeof *caps);
    int64_t *over = base_xcalloc((size_t)n + 1, sizeof *over);
    for (int i = 0; i < n; i++)
        caps[i] = cap_of(o, dev, i);
    pt_options p = *part;
    p.mem_caps = caps;
    int rc = -1;
    for (int tries = 0; tries < 6; tries++) {
        diag scratch;
        diag_init(&scratch);
        int again = 0;
        memset(over, 0, (size_t)n * sizeof *over);
        int retry = tries < 5 && (part->strategy == PT_PIPELINE || part->strategy == PT_HYBRID);
        rc = build_once(o, src, &p, train, dev, out, retry ? &scratch : d, err, errlen, over);
        for (int i = 0; rc != 0 && peak && i < n; i++) /* over a cap: the largest device's need */
            if (over[i] > 0 && caps[i] + over[i] > *peak)
                *peak = caps[i] + over[i];
        for (int i = 0; rc != 0 && retry && i < n; i++)
            if (over[i] > 0) {
                int64_t real = cap_of(o, dev, i);
                double ratio = (double)real / (double)(real + over[i]);
                caps[i] = (int64_t)((double)caps[i] * ratio * ratio);
                again = 1;
            }
        if (rc != 0 && !again) /* not a cap the pipeline can dodge: report it */
            for (int i = 0; i < scratch.n; i++)
                diag_error(d, (ir_loc){0}, "%s", scratch.entries[i].msg);
        diag_free(&scratch);
        if (rc == 0 || !again)
            break;
    }
    base_free(caps);
    base_free(over);
    return rc;
}

static int build_once(const drv_config *o, const ir_graph *src, const pt_options *part,
                      int train, const cost_device *dev, drv_program *out, diag *d, char *err,
                      size_t errlen, int64_t *over)
{
    memset(out, 0, sizeof *out);
    int first = d->n;
    out->g = ir_graph_clone(src);
    if (!(out->mp = drv_optimize(o, part, out->g, train, d)))
        goto fail;
    describe(part, out->strategy, sizeof out->strategy);
    if (!pt_partitions(part))
        snprintf(out->strategy, sizeof out->strategy,
                 ir_graph_devices(out->g) > 1 ? "as partitioned in the IR" : "one device");
    out->plan = pt_plan_new(out->g, out->mp, dev, out->strategy);
    ir_for_each_node(src, n)
        out->plan->model_flops += cost_gemm_flops(n);
    int64_t caps[DRV_MAX_CAPS + 1] = {0};
    int ndev = out->plan->ndevices < DRV_MAX_CAPS ? out->plan->ndevices : DRV_MAX_CAPS;
    for (int i = 0; i < ndev; i++)
        caps[i] = cap_of(o, dev, i);
    if (pt_plan_check_caps(out->plan, out->mp, caps, d) != 0) {
        int first = -1;
        for (int i = 0; i < ndev; i++)
            if (out->plan->dev[i].peak_bytes > caps[i]) {
                over[i] = out->plan->dev[i].peak_bytes - caps[i];
                first = first < 0 ? i : first;
            }
        char need[32], cap[32];
        base_human_bytes((double)out->plan->dev[first].peak_bytes, need, sizeof need);
        base_human_bytes((double)caps[first], cap, sizeof cap);
        snprintf(err, errlen, "device %d needs %s, over its cap of %s", first, need, cap);
        goto fail_kept;
    }
    return 0;
fail:
    snprintf(err, errlen, "it does not compile");
    for (int i = d->n - 1; i >= first; i--) /* the first error */
        if (d->entries[i].level == DIAG_ERROR)
            snprintf(err, errlen, "%s", d->entries[i].msg);
fail_kept:
    drv_program_free(out);
    return -1;
}

void drv_program_free(drv_program *p)
{
    pt_plan_free(p->plan);
    cg_program_free(p->cuda);
    if (p->file) { /* a plan file's: it owns g and mp */
        rt_plan_free(p->file);
        mp_plan_free(p->compiled_mp);
        if (p->compiled_g)
            ir_graph_free(p->compiled_g);
    } else {
        mp_plan_free(p->mp);
        if (p->g)
            ir_graph_free(p->g);
    }
    memset(p, 0, sizeof *p);
}

const cost_device *drv_device_model(const drv_config *o, cost_device *buf, char *err, size_t errlen)
{
    const char *spec = o->device_model ? o->device_model : o->gpus ? COST_DEFAULT_PARTITION_GPU : "cpu";
    if (cost_device_parse(spec, buf, err, errlen) != 0)
        return NULL;
    cost_device_at(buf, o->precision);
    return buf;
}

int drv_compile(const drv_config *o, const pt_options *partition, long long batch, int train,
                drv_program *out, diag *d)
{
    char err[512];
    cost_device dev;
    memset(out, 0, sizeof *out);
    if (!drv_device_model(o, &dev, err, sizeof err)) {
        diag_error(d, (ir_loc){0}, "--device-model: %s", err);
        return -1;
    }
    /* 1-3 once; each candidate (and each retry of a pipeline's cut) from a
       clone of the result */
    ir_graph *src = drv_load(o, batch, d);
    if (src && train && (ad_training_graph(src, &o->opt, d) != 0 || ir_verify(src, d))) {
        ir_graph_free(src);
        src = NULL;
    }
    if (!src)
        return -1;
    pt_options part = partition ? *partition : o->part;
    part.cost = &dev;
    int rc = compile_partitioned(o, src, &part, train, &dev, out, d);
    ir_graph_free(src);
    return rc;
}

static int compile_partitioned(const drv_config *o, const ir_graph *src, const pt_options *given,
                               int train, const cost_device *devp, drv_program *out, diag *d)
{
    char err[512];
    pt_options part = *given;
    cost_device dev = *devp;
    if (!o->strategy_auto || part.devices <= 1) {
        if (build(o, src, &part, train, &dev, out, d, err, sizeof err, NULL) != 0)
            return -1;
        out->plan->cost = dev;
        return 0;
    }
    /* auto: every strategy that may fit, simplest first; the simplest whose
       predicted step is within the model's error of the fastest wins (a
       difference the model cannot tell from its error buys no complexity) */
    enum { MAX_CAND = 48 };
    pt_options cand[MAX_CAND];
    int n = 0, N = part.devices;
    cand[n] = part, cand[n].strategy = PT_DATA, n++;
    /* training: ZeRO's stages, each sharding more of the state, and
       accumulation, which keeps fewer activations */
    for (int z = 1; z <= 3 && train && !part.deterministic; z++)
        cand[n] = part, cand[n].strategy = PT_DATA, cand[n].zero = z, n++;
    if (train && !part.deterministic && part.accumulate <= 1)
        cand[n] = part, cand[n].strategy = PT_DATA, cand[n].accumulate = 4, n++;
    cand[n] = part, cand[n].strategy = PT_PIPELINE, n++;
    for (int dp = 2; dp < N && n < 14; dp++)
        if (N % dp == 0)
            cand[n] = part, cand[n].strategy = PT_HYBRID, cand[n].dp = dp, cand[n].pp = N / dp, n++;
    cand[n] = part, cand[n].strategy = PT_TENSOR, n++;
    if (!part.sequence_parallel)
        cand[n] = part, cand[n].strategy = PT_TENSOR, cand[n].sequence_parallel = 1, n++;
    pt_candidate *rank = base_xcalloc(MAX_CAND, sizeof *rank);
    drv_program *progs = base_xcalloc(MAX_CAND, sizeof *progs);
    int best = -1, fastest = -1;
    double margin = 1 + dev.error;
    for (int i = 0; i < n; i++) {
        drv_program prog;
        diag scratch;
        diag_init(&scratch);
        describe(&cand[i], rank[i].name, sizeof rank[i].name);
        if (build(o, src, &cand[i], train, &dev, &prog, &scratch, err, sizeof err,
                  &rank[i].peak_bytes) != 0) {
            rank[i].error = base_xstrdup(err);
            /* over a cap: the same strategy recomputing more, next */
            if (train && rank[i].peak_bytes > 0 && cand[i].recompute != PT_RECOMPUTE_FULL &&
                n < MAX_CAND) {
                cand[n] = cand[i];
                cand[n++].recompute = cand[i].recompute + 1;
            }
        } else {
            rank[i].step_ms = prog.plan->step_ms;
            for (int k = 0; k < prog.plan->ndevices; k++)
                if (prog.plan->dev[k].peak_bytes > rank[i].peak_bytes)
                    rank[i].peak_bytes = prog.plan->dev[k].peak_bytes;
            progs[i] = prog;
            if (fastest < 0 || rank[i].step_ms < rank[fastest].step_ms)
                fastest = i;
            /* keep only what may still be chosen: the bar only falls */
            for (int j = 0; j <= i; j++)
                if (progs[j].plan && rank[j].step_ms > rank[fastest].step_ms * margin)
                    drv_program_free(&progs[j]);
        }
        diag_free(&scratch);
    }
    for (int i = 0; i < n && fastest >= 0; i++)
        if (best < 0 && progs[i].plan)
            best = i;
        else if (progs[i].plan)
            drv_program_free(&progs[i]);
    if (best >= 0) {
        *out = progs[best];
        rank[fastest].fastest = 1;
    }
    base_free(progs);
    if (best < 0) {
        diag_error(d, (ir_loc){0}, "no strategy fits %d devices:", N);
        int least = -1;
        for (int i = 0; i < n; i++) {
            diag_note(d, (ir_loc){0}, "%s: %s", rank[i].name, rank[i].error);
            if (rank[i].peak_bytes > 0 &&
                (least < 0 || rank[i].peak_bytes < rank[least].peak_bytes))
                least = i;
        }
        if (least >= 0) {
            char need[32];
            base_human_bytes((double)rank[least].peak_bytes, need, sizeof need);
            diag_note(d, (ir_loc){0}, "the smallest peak found: %s per device (%s)", need,
                      rank[least].name);
        }
        for (int i = 0; i < n; i++)
            base_free((char *)rank[i].error);
        base_free(rank);
        return -1;
    }
    rank[best].chosen = 1;
    out->plan->candidates = rank;
    out->plan->ncandidates = n;
    return 0;
}

void drv_candidates_free(pt_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->ncandidates; i++)
        base_free((char *)p->candidates[i].error);
    base_free(p->candidates);
    p->candidates = NULL;
    p->ncandidates = 0;
}



/* --autotune: the program opened on this machine's GPU (NULL libdir: the
 * driver, or $GNC_CUDA_LIBDIR's), its library calls timed, the fastest
 * algorithms recorded in cg's steps; then, with conv_ms (--conv auto), its
 * convolutions timed into it (rt_cuda_time_convs). */
static int autotune(cg_program *cg, double *conv_ms, char *err, size_t errlen)
{
    char msg[768];
    rt_cuda_options o = {.share = 1}; /* timing: a plan of several devices on one GPU too */
    rt_cuda *x = rt_cuda_open_ex(cg, &o, msg, sizeof msg);
    if (!x) {
        snprintf(err, errlen, "--autotune times the library calls on a GPU, and this machine "
                 "has none to open: %s", msg);
        return -1;
    }
    int rc = rt_cuda_autotune(x, cg, msg, sizeof msg) != 0 ||
             (conv_ms && rt_cuda_time_convs(x, conv_ms, msg, sizeof msg) != 0);
    rt_cuda_close(x);
    if (rc)
        snprintf(err, errlen, "--autotune: %s", msg);
    return rc ? -1 : 0;
}

/* cg_compile through the kernel cache, with a warning where the cache would
 * not take the images (a warm compile would not be warm). */
/* NVRTC's progress on o->progress, once it has taken a second: "compiling
 * CUDA kernels: 12 of 40 images (3.2 s)", rewritten in place. */
typedef struct {
    FILE *f;
    struct timespec start;
    int shown;
} progress;

static void show_progress(void *ctx, int done, int total)
{
    progress *p = ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - p->start.tv_sec) + 1e-9 * (double)(t.tv_nsec - p->start.tv_nsec);
    if (s < 1 && !p->shown)
        return;
    fprintf(p->f, "\r  compiling CUDA kernels: %d of %d images (%.1f s)", done, total, s);
    fflush(p->f);
    p->shown = 1;
}

static int compile(const drv_config *o, cg_program *cg, char *err, size_t errlen)
{
    cg_compile_stats st;
    cg_compile_options co = {NULL, 0, 1, NULL, NULL};
    progress pr = {o->progress, {0, 0}, 0};
    if (o->progress) {
        clock_gettime(CLOCK_MONOTONIC, &pr.start);
        co.progress = show_progress, co.ctx = &pr;
    }
    int rc = cg_compile(cg, &co, &st, err, errlen);
    if (pr.shown)
        fputc('\n', o->progress);
    if (rc != 0)
        return -1;
    if (st.cache_unwritten && o->warnings)
        fprintf(o->warnings, "gnc: warning: %d compiled kernel image%s could not be written to the "
                "kernel cache ($GNC_CACHE_DIR, else ~/.cache/gnc): the next compile compiles "
                "%s again\n", st.cache_unwritten, st.cache_unwritten == 1 ? "" : "s",
                st.cache_unwritten == 1 ? "it" : "them");
    return 0;
}

/* One implementation's times of every convolution of p's program (ms, by
 * the id of the node's first result): generated with co's options and conv
 * impl, compiled, opened on the GPU, cuDNN's algorithms tuned first. */
static int time_convs(const drv_config *o, const drv_program *p, const cg_options *co,
                      cg_conv_impl impl, double *ms, char *err, size_t errlen)
{
    cg_options oi = *co;
    oi.conv = impl;
    diag d;
    diag_init(&d);
    cg_program *cg = cg_generate(p->g, p->mp, &oi, &d);
    diag_free(&d);
    if (!cg) {
        snprintf(err, errlen, "--conv auto: the program does not generate with --conv %s",
                 cg_conv_name(impl));
        return -1;
    }
    int rc = compile(o, cg, err, errlen) != 0 || autotune(cg, ms, err, errlen) != 0 ? -1 : 0;
    cg_program_free(cg);
    return rc;
}

/* --conv auto: each convolution of p's program timed as cuDNN calls, as
 * implicit-GEMM kernels and as cuDNN calls on channels-last copies (their
 * transposes included), *choice (the graph's nvalues entries) the fastest,
 * the earlier way on a tie (cuDNN first); each printed with its times. */
static int choose_convs(const drv_config *o, const drv_program *p, const cg_options *co,
                        signed char **choice, char *err, size_t errlen)
{
    size_t nv = (size_t)p->g->nvalues + 1;
    double *ms[CG_CONV_NIMPLS];
    int rc = -1, ok = 1;
    for (int i = 0; i < CG_CONV_NIMPLS; i++)
        ok &= (ms[i] = base_calloc(nv, sizeof(double))) != NULL;
    *choice = base_malloc(nv);
    if (!ok || !*choice) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    memset(*choice, -1, nv);
    for (int i = 0; i < CG_CONV_NIMPLS; i++)
        if (time_convs(o, p, co, (cg_conv_impl)i, ms[i], err, errlen) != 0)
            goto done;
    int count[CG_CONV_NIMPLS] = {0};
    for (const ir_node *n = p->g->head; n; n = n->next) {
        if (!cg_is_conv(n))
            continue;
        int id = n->out[0]->id, c = 0;
        for (int i = 1; i < CG_CONV_NIMPLS; i++)
            if (ms[i][id] < ms[c][id])
                c = i;
        (*choice)[id] = (signed char)c;
        count[c]++;
        fprintf(LOG(o), "  %-18s %%%-24s", ir_ops[n->op].name, n->out[0]->name);
        for (int i = 0; i < CG_CONV_NIMPLS; i++)
            fprintf(LOG(o), " %s %8.4f ", cg_conv_name((cg_conv_impl)i), ms[i][id]);
        fprintf(LOG(o), "ms  -> %s\n", cg_conv_name((cg_conv_impl)c));
    }
    fprintf(LOG(o), "convolutions (--conv auto, timed on this GPU): %d by cuDNN, %d by igemm, "
           "%d by cuDNN on channels-last copies\n",
           count[CG_CONV_CUDNN], count[CG_CONV_IGEMM], count[CG_CONV_CUDNN_NHWC]);
    rc = 0;
done:
    for (int i = 0; i < CG_CONV_NIMPLS; i++)
        base_free(ms[i]);
    if (rc) {
        base_free(*choice);
        *choice = NULL;
    }
    return rc;
}

int drv_plan(const drv_config *o, const drv_program *p, const char *path, rt_plan **mem,
             char *err, size_t errlen)
{
    return drv_plan_keep(o, p, path, mem, NULL, err, errlen);
}

int drv_plan_keep(const drv_config *o, const drv_program *p, const char *path, rt_plan **mem,
                  cg_program **keep_cg, char *err, size_t errlen)
{
    char devices[16], step[64], opt[160], source[256], flags[256], model[256];
    int partitioned = pt_partitions(&o->part);
    rt_plan_blob weights = {RT_SECTION_WEIGHTS, RT_SECTION_REQUIRED, RT_PLAN_ALL_DEVICES, NULL, 0};
    snprintf(devices, sizeof devices, "%d", p->mp->ndevices);
    rt_plan_kv meta[20];
    int n = 0;
    meta[n++] = (rt_plan_kv){"writer", "gnc " GNC_VERSION};
    /* meta values are printable ASCII: a name, path or flag of other bytes
       escaped, a long one cut (the program's text holds the name whole) */
    meta[n++] = (rt_plan_kv){"model", ir_escape_str(model, sizeof model, p->g->name)};
    meta[n++] = (rt_plan_kv){"source", ir_escape_str(source, sizeof source, o->file)};
    meta[n++] = (rt_plan_kv){"flags", ir_escape_str(flags, sizeof flags, o->flags)};
    meta[n++] = (rt_plan_kv){"devices", devices};
    meta[n++] = (rt_plan_kv){"strategy", p->strategy};
    meta[n++] = (rt_plan_kv){"passes", o->passes ? o->passes
                                                 : pm_default_pipeline(o->train, o->remat,
                                                                       partitioned)};
    if (o->train) {
        const ad_optimizer *a = &o->opt;
        if (a->kind == AD_SGD)
            snprintf(opt, sizeof opt, "sgd momentum=%g nesterov=%d weight_decay=%g", a->momentum,
                     a->nesterov, a->weight_decay);
        else
            snprintf(opt, sizeof opt, "%s betas=%g,%g eps=%g weight_decay=%g",
                     a->kind == AD_ADAM ? "adam" : "adamw", a->beta1, a->beta2, a->eps,
                     a->weight_decay);
        meta[n++] = (rt_plan_kv){"optimizer", opt};
    }
    if (p->plan) {
        meta[n++] = (rt_plan_kv){"cost_model", p->plan->cost.name};
        snprintf(step, sizeof step, "%.6g", p->plan->step_ms);
        meta[n++] = (rt_plan_kv){"predicted_step_ms", step};
    }
    /* the kernels: generated from the program and memory plan, compiled,
       and stored beside them; without NVRTC, none.  The passes numbered the
       program as a loader numbers the plan's text (ir_graph_renumber), so
       what rt_plan_program regenerates from the file is this program: the
       writer reads the file back and compares the sources (test_plan's
       contract test compares every step) */
    int kernels = !o->no_kernels && cg_have_nvrtc();
    if (o->autotune && !kernels) {
        snprintf(err, errlen, "--autotune tunes the plan's CUDA kernels' library calls, and the "
                 "plan has none (%s)", o->no_kernels ? "--no-kernels" : "no NVRTC");
        return -1;
    }
    const char *archs = o->archs ? o->archs : "sm_80,sm_90";
    meta[n++] = (rt_plan_kv){"precision", ir_precision_name(o->precision)};
    if (o->conv != CG_CONV_CUDNN || o->conv_auto)  /* absent: cuDNN, as before --conv */
        meta[n++] = (rt_plan_kv){"conv", o->conv_auto ? "auto"
                                                      : cg_conv_name((cg_conv_impl)o->conv)};
    if (o->layout != CG_LAYOUT_AUTO)                /* absent: auto, as before --layout */
        meta[n++] = (rt_plan_kv){"layout", cg_layout_name((cg_layout)o->layout)};
    if (o->part.deterministic)                      /* absent: the fastest algorithms */
        meta[n++] = (rt_plan_kv){"deterministic", "1"};
    if (kernels) {
        meta[n++] = (rt_plan_kv){"archs", archs};
        meta[n++] = (rt_plan_kv){"nvrtc", cg_nvrtc_version()};
    }
    int rc = -1;
    cg_program *cg = NULL;
    if (kernels) {
        char list[CG_MAX_ARCHS][16];
        cg_options co = cg_options_default();
        co.precision = o->precision;
        co.conv = (cg_conv_impl)o->conv;
        co.layout = (cg_layout)o->layout;
        co.deterministic = o->part.deterministic;
        co.narchs = rt_plan_archs(archs, list);
        for (int a = 0; a < co.narchs; a++)
            co.archs[a] = list[a];
        signed char *choice = NULL;
        if (o->conv_auto && choose_convs(o, p, &co, &choice, err, errlen) != 0)
            goto done;
        co.conv_choice = choice;
        diag d;
        diag_init(&d);
        cg = cg_generate(p->g, p->mp, &co, &d);
        base_free(choice);              /* cg keeps its own */
        if (o->warnings)
            diag_print(&d, o->warnings);
        diag_free(&d);
        if (!cg) {
            snprintf(err, errlen, "%s: no CUDA kernels for this program (--no-kernels "
                     "writes the plan without them)", path);
            goto done;
        }
        if (compile(o, cg, err, errlen) != 0 ||
            (o->autotune && autotune(cg, NULL, err, errlen) != 0))
            goto done;
    }
    /* --weights: the checkpoint's bytes as the weights section (its loader
       checks them against the program) */
    const char *why = NULL;
    if (o->weights && !(weights.data = base_read_file(o->weights, &weights.size, &why))) {
        snprintf(err, errlen, "%s: cannot read: %s", o->weights, why);
        goto done;
    }
    if (o->weights && rt_checkpoint_load_bytes(p->g, NULL, weights.data, weights.size,
                                               o->weights, NULL, err, errlen) != 0)
        goto done;
    /* an imported model's weights are its initializers' data: the plan carries
       them, since its IR text cannot (anything else drawn for seed 0) */
    int with_weights = o->weights != NULL;
    if (!with_weights && has_data(p->g)) {
        void *data;
        if (rt_checkpoint_encode_init(p->g, 0, &data, &weights.size, err, errlen) != 0)
            goto done;
        weights.data = data;
        with_weights = 1;
    }
    for (int i = 0; !with_weights && i < p->g->nparams; i++)
        if (p->g->params[i]->init.kind == IR_INIT_DATA) {
            char name[96];
            snprintf(err, errlen, "%s: the values of '%s' (init data) are not in IR text: "
                     "compile the model it was imported from, or give --weights FILE", path,
                     ir_name_str(name, sizeof name, p->g->params[i]->name));
            goto done;
        }
    if (!mem) {
        rc = rt_plan_write_program(path, p->g, p->mp, meta, n, cg, &weights, with_weights,
                                   err, errlen);
    } else {
        unsigned char *bytes;
        size_t size;
        if (rt_plan_encode_program_with(p->g, p->mp, meta, n, cg, &weights, with_weights,
                                        &bytes, &size, err, errlen) == 0) {
            *mem = rt_plan_decode(bytes, size, path, err, errlen);
            base_free(bytes);
            rc = *mem ? 0 : -1;
        }
    }
done:
    base_free((void *)weights.data);
    if (rc == 0 && keep_cg) { /* the caller's now */
        *keep_cg = cg;
        cg = NULL;
    }
    cg_program_free(cg);
    return rc;
}

int drv_plan_memory(const drv_config *o, drv_program *p, int train, char *err, size_t errlen)
{
    drv_config as = *o;
    as.train = train;
    rt_plan *file = NULL;
    if (drv_plan_keep(&as, p, o->file, &file, &p->cuda, err, errlen) != 0)
        return -1;
    p->compiled_g = p->g;
    p->compiled_mp = p->mp;
    p->file = file;
    p->g = file->g;
    p->mp = file->mp;
    return 0;
}

