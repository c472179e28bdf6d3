/* gnc train and gnc eval: the training loop around the executor.
 *
 * A run holds two graphs of one model: the training step (autodiff's graph, at
 * the training batch) and the inference graph (at a batch that divides the test
 * set), whose weights are copied from the first before each evaluation.  All
 * randomness is counter-based: parameters from (seed, name), the order of epoch
 * e from (seed, e), dropout masks from (seed, step); so the step number and the
 * seed are the whole RNG state, and a resumed run repeats an uninterrupted one
 * bit for bit.
 *
 * Under mpirun (tools/mpi.c) every rank feeds the same batches to its device
 * of the training step; rank 0, which holds the loss and, after
 * rt_exec_gather_params, every parameter, alone prints, logs, evaluates (the
 * inference graph is its alone) and writes checkpoints.  On resume every rank
 * reads the checkpoint into its own copies.
 *
 * Each graph runs in a session (runtime/api/session.h) on --device: the CPU
 * executor, or the GPU with the parameters and optimizer state kept there;
 * these are read back into the host copy before an evaluation copies them
 * and before a checkpoint is written.  A model (not a plan) trained on the
 * GPU is compiled into a plan in memory first, as gnc compile -o would write
 * it (cli_plan_memory). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "checkpoint.h"
#include "cli.h"
#include "data.h"
#include "exec.h"
#include "plan.h"
#include "plot.h"
#include "session.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

/* A graph with its session and the values the loop feeds and reads.  image
 * is an IDX data set's alone; label and logits are a classifier's (its loss
 * cross_entropy(logits, label)), NULL otherwise: then the test reports the
 * loss alone. */
typedef struct {
    drv_program prog;
    ir_graph *g;
    rt_session *s;
    const ir_value *image, *label, *logits;
    int64_t batch;              /* every input's first dimension */
} model;

/* Whether --data names IDX files: a folder with neither .npy files nor a
 * train/ subfolder (the default folder too).  Else it holds named arrays
 * (cli_data_load). */
static int data_is_idx(const options *o)
{
    const char *path = o->data ? o->data : DEFAULT_DATA;
    struct stat st;
    char sub[4096];
    if (o->tokens)
        return 0;
    if (stat(path, &st) != 0) /* the message is the IDX loader's, but for a file's name */
        return !strstr(path, ".safetensors");
    if (!S_ISDIR(st.st_mode))
        return 0;
    snprintf(sub, sizeof sub, "%s/train", path);
    if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(path);
    struct dirent *e;
    int idx = 1;
    while (d && idx && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        idx = !(n > 4 && strcmp(e->d_name + n - 4, ".npy") == 0);
    }
    if (d)
        closedir(d);
    return idx;
}

static int is_data_input(const ir_value *v)
{
    return strncmp(v->name, "train.", 6) != 0;
}

/* A model fed by name (not IDX): every input other than train.* takes the
 * batch as its first dimension; a loss cross_entropy(logits [batch, classes],
 * label [batch]) on an input label makes it a classifier. */
static int find_roles(const options *o, model *m)
{
    const ir_graph *g = m->g;
    const ir_value *first = NULL;
    char t1[128], t2[128];
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (!is_data_input(v))
            continue;
        if (v->type.rank < 1 || (first && v->type.dims[0] != first->type.dims[0])) {
            fprintf(stderr, "gnc: error: %s: the input '%s' is %s", o->c.file, v->name,
                    ir_type_str(&v->type, t1, sizeof t1));
            if (first)
                fprintf(stderr, " but '%s' is %s", first->name,
                        ir_type_str(&first->type, t2, sizeof t2));
            fprintf(stderr, ": gnc train and gnc eval feed every input a batch of samples, its "
                    "first dimension\n");
            return -1;
        }
        if (!first)
            first = v;
    }
    if (!first) {
        fprintf(stderr, "gnc: error: %s: the model has no inputs to feed\n", o->c.file);
        return -1;
    }
    m->batch = first->type.dims[0];
    const ir_node *loss = g->loss ? g->loss->def : NULL;
    if (loss && loss->op == IR_OP_CROSS_ENTROPY && loss->in[0]->type.rank == 2 &&
        loss->in[1]->type.rank == 1) {
        for (int i = 0; i < g->ninputs; i++)
            if (g->inputs[i] == loss->in[1] && !ir_is_float(loss->in[1]->type.dtype))
                m->label = loss->in[1], m->logits = loss->in[0];
    }
    return 0;
}


static void model_free(model *m)
{
    rt_session_free(m->s);
    drv_candidates_free(m->prog.plan);
    drv_program_free(&m->prog);
}

/* Every input of m's program is one the loop fills (the image, the label,
 * the optimizer's train.*), and, where the program is on one device, its loss
 * is cross_entropy(logits, label): else the loop would feed zeros or train on
 * a loss it does not test, without a word.  Prints why not. */
static int check_inputs(const options *o, const model *m)
{
    const ir_graph *g = m->g;
    char t[128];
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (strncmp(v->name, "train.", 6) == 0 || v == m->image || v == m->label)
            continue;
        fprintf(stderr, "gnc: error: %s: the input '%s' (%s) is not one gnc train and gnc eval "
                "fill: they feed an IDX data set's images to '%s' and its labels to '%s', "
                "and nothing else\n", o->c.file, v->name, ir_type_str(&v->type, t, sizeof t),
                m->image->name, m->label->name);
        return -1;
    }
    int devices = 1;
    ir_for_each_node(g, n)
        devices = n->device + 1 > devices ? n->device + 1 : devices;
    const ir_node *loss = g->loss ? g->loss->def : NULL;
    if (devices == 1 && !pt_partitions(&o->c.part) && loss &&
        (loss->op != IR_OP_CROSS_ENTROPY || loss->in[0] != m->logits || loss->in[1] != m->label)) {
        fprintf(stderr, "gnc: error: %s: the loss '%s' is %s, not cross_entropy(logits, %s): "
                "gnc train and gnc eval train and test classifiers on their accuracy\n",
                o->c.file, g->loss->name, ir_ops[loss->op].name, m->label->name);
        return -1;
    }
    return 0;
}

/* Loads o's model at batch (as a training step when train), finds its image and
 * label inputs and its logits, and makes its executor: under MPI the training
 * step's device of this rank (collectively), the inference graph whole.  A
 * plan file is taken as compiled (batch, optimizer, devices); it must be a
 * training step to train and an inference program to evaluate. */
static int model_load(const options *o, long long batch, int train, model *m, int idx)
{
    memset(m, 0, sizeof *m);
    if (cli_is_plan(o->c.file)) {
        if (cli_plan_open(o, &m->prog) != 0)
            return -1;
        m->g = m->prog.g;
        if (m->prog.file->training != train) {
            if (o->world->rank == 0)
                fprintf(stderr, train ? "gnc: error: %s is an inference program, no training step: "
                                    "compile one with 'gnc compile MODEL.net --train -o FILE.gnc'\n"
                                  : "gnc: error: %s is a training step; evaluate with an inference "
                                    "plan (gnc compile MODEL.net -o FILE.gnc) or the model\n",
                    o->c.file);
            o->world->together = 1; /* every rank read the same file */
            return -1;
        }
    } else {
        diag d;
        diag_init(&d);
        /* the optimized, partitioned, memory-planned program (the pipeline keeps
           every value the loop reads: inputs, outputs, the loss); evaluation runs
           on one device */
        pt_options one = {.devices = 1, .strategy = PT_DATA};
        if (drv_compile(&o->c, train ? NULL : &one, batch, train, &m->prog, &d) != 0)
            drv_program_free(&m->prog);
        m->g = m->prog.g;
        int bad = train ? cli_mpi_agree(o, &m->prog, &d) != 0 : (diag_print(&d, stderr), !m->g);
        diag_free(&d);
        if (bad || (o->cuda && cli_plan_memory(o, &m->prog, train) != 0))
            return -1;
        m->g = m->prog.g; /* the plan's, for the GPU */
    }
    char err[512];
    if (!idx) {
        if (find_roles(o, m) != 0)
            return -1;
        goto session;
    }
    ir_graph *g = m->g;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (strncmp(v->name, "train.", 6) == 0)
            continue;
        if (ir_is_float(v->type.dtype) && !m->image)
            m->image = v;
        else if ((v->type.dtype == IR_I32 || v->type.dtype == IR_I64) && !m->label)
            m->label = v;
    }
    if (g->loss && g->loss->def && g->loss->def->op == IR_OP_CROSS_ENTROPY)
        m->logits = g->loss->def->in[0];
    /* a partitioned program's loss is a mean over replicas; its logits the
       output of them all, gathered */
    for (int i = 0; !m->logits && m->image && g->loss && i < g->noutputs; i++) {
        const ir_type *t = &g->outputs[i].value->type;
        if (t->rank == 2 && t->dims[0] == m->image->type.dims[0] && ir_is_float(t->dtype))
            m->logits = g->outputs[i].value;
    }
    if (!m->image || !m->label || !m->logits || m->image->type.rank != 4 ||
        m->label->type.rank != 1 || m->logits->type.rank != 2) {
        fprintf(stderr, "gnc: error: %s: to train or evaluate, the model needs an image input "
                "[batch, channels, h, w], an integer label input [batch] and the loss "
                "cross_entropy(logits, label)\n", o->c.file);
        return -1;
    }
    if (check_inputs(o, m) != 0)
        return -1;
    /* the loop fills and reads whole batches: one batch for all three */
    int64_t b = m->image->type.dims[0];
    if (m->label->type.dims[0] != b || m->logits->type.dims[0] != b) {
        char ti[128], tl[128], to[128];
        fprintf(stderr, "gnc: error: %s: the image input '%s' is %s, the label input '%s' %s and "
                "the logits '%s' %s: to train or evaluate, all three take the batch as their "
                "first dimension\n", o->c.file, m->image->name,
                ir_type_str(&m->image->type, ti, sizeof ti), m->label->name,
                ir_type_str(&m->label->type, tl, sizeof tl), m->logits->name,
                ir_type_str(&m->logits->type, to, sizeof to));
        return -1;
    }
    m->batch = b;
session:
    if (!(m->s = cli_session_new(o, &m->prog, train, o->seed, err, sizeof err))) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    rt_session_set_timeout(m->s, o->timeout);
    return 0;
}

/* Whether the data set fits the model's inputs. */
static int check_data(const model *m, const cli_dataset *ds, const char *what)
{
    const ir_type *t = &m->image->type;
    int classes = cli_dataset_classes(ds);
    char tb[128];
    if (t->dims[1] != 1 || t->dims[2] != ds->h || t->dims[3] != ds->w) {
        fprintf(stderr, "gnc: error: the %s images are 1x%lldx%lld, but the model's input '%s' "
                "is %s\n", what, (long long)ds->h, (long long)ds->w, m->image->name,
                ir_type_str(t, tb, sizeof tb));
        return -1;
    }
    if (classes > m->logits->type.dims[1]) {
        fprintf(stderr, "gnc: error: the %s labels go up to %d, but the model has %lld classes\n",
                what, classes - 1, (long long)m->logits->type.dims[1]);
        return -1;
    }
    return 0;
}

/* Whether every data input of m gets an array of d that fits it: its
 * samples of the input's shape after the batch, of a dtype that converts
 * losslessly (float32 into any float input; u8 into a float one as its
 * value; u8, i32 and i64 into i32 or i64 where every value fits; u8 into u8
 * alone), and at least a batch of them.  Prints why not. */
static int check_arrays(const options *o, const model *m, const cli_data *d)
{
    char t1[128], t2[128], t3[128];
    const char *src = o->tokens ? o->tokens : o->data ? o->data : DEFAULT_DATA;
    for (int i = 0; i < m->g->ninputs; i++) {
        const ir_value *v = m->g->inputs[i];
        if (!is_data_input(v))
            continue;
        const cli_array *a = cli_data_find(d, v->name);
        ir_type want = v->type;
        want.rank--;
        memmove(want.dims, want.dims + 1, (size_t)want.rank * sizeof *want.dims);
        want.dtype = a ? a->sample.dtype : want.dtype;
        if (!a) {
            char have[512] = "";
            for (int k = 0; k < d->narrays; k++)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", k ? ", " : "",
                         d->a[k].name);
            fprintf(stderr, "gnc: error: %s: no %s array '%s' for the model's input '%s' %s "
                    "(the arrays: %s)\n", src, d->what, v->name, v->name,
                    ir_type_str(&v->type, t1, sizeof t1), have);
            return -1;
        }
        if (!ir_type_eq(&a->sample, &want)) {
            fprintf(stderr, "gnc: error: %s: the %s array '%s' has samples of shape %s, but the "
                    "model's input '%s' is %s: each sample must be %s\n", src, d->what, a->name,
                    ir_type_str(&a->sample, t1, sizeof t1), v->name,
                    ir_type_str(&v->type, t2, sizeof t2), ir_type_str(&want, t3, sizeof t3));
            return -1;
        }
        ir_dtype from = a->sample.dtype, to = v->type.dtype;
        int fits = ir_is_float(to) ? from == IR_F32 || from == IR_U8
                 : to == IR_U8 ? from == IR_U8 : !ir_is_float(from);
        int64_t bad = 0, numel = ir_type_numel(&a->sample);
        int wide = 0; /* an i64 value that i32 does not hold */
        for (int64_t k = 0; fits && to == IR_I32 && from == IR_I64 && !wide && k < d->n; k++) {
            const int64_t *p = (const int64_t *)a->data + a->offset + k * a->stride;
            for (int64_t e = 0; e < numel && !wide; e++)
                if (p[e] != (int32_t)p[e])
                    bad = p[e], wide = 1;
        }
        if (!fits || wide) {
            fprintf(stderr, "gnc: error: %s: the %s array '%s' is %s, which does not convert "
                    "losslessly to the model's input '%s' (%s)", src, d->what, a->name,
                    ir_dtype_name(from), v->name, ir_dtype_name(to));
            if (wide)
                fprintf(stderr, ": it holds %lld", (long long)bad);
            fputc('\n', stderr);
            return -1;
        }
    }
    if (d->n < m->batch) {
        fprintf(stderr, "gnc: error: %s: the %s data holds %lld samples, too few for one batch "
                "of %lld\n", src, d->what, (long long)d->n, (long long)m->batch);
        return -1;
    }
    return 0;
}

/* --tokens: the model's inputs tokens and next, integer [batch, seq], get
 * windows of the stream; an embedding of tokens must have a row for every
 * id.  Prints why not. */
static int load_tokens(const options *o, const model *m, cli_data *train, cli_data *test)
{
    const ir_value *tok = NULL, *next = NULL;
    char t1[128], t2[128], err[1024];
    for (int i = 0; i < m->g->ninputs; i++) {
        const ir_value *v = m->g->inputs[i];
        if (strcmp(v->name, "tokens") == 0)
            tok = v;
        else if (strcmp(v->name, "next") == 0)
            next = v;
    }
    if (!tok || !next || tok->type.rank != 2 || !ir_type_eq(&tok->type, &next->type) ||
        ir_is_float(tok->type.dtype) || tok->type.dtype == IR_U8) {
        fprintf(stderr, "gnc: error: %s: --tokens needs the inputs 'tokens' and 'next', both "
                "i32 or i64 [batch, seq]; the model has %s%s and %s%s\n", o->c.file,
                tok ? "tokens: " : "no 'tokens'", tok ? ir_type_str(&tok->type, t1, sizeof t1) : "",
                next ? "next: " : "no 'next'",
                next ? ir_type_str(&next->type, t2, sizeof t2) : "");
        return -1;
    }
    int64_t max_id;
    if (cli_data_tokens(o->tokens, o->test_fraction, tok->type.dims[1], train, test, &max_id, err,
                        sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    ir_for_each_node(m->g, n) {
        if (n->op == IR_OP_EMBEDDING && n->in[0] == tok && max_id >= n->in[1]->type.dims[0]) {
            fprintf(stderr, "gnc: error: %s: token ids go up to %lld, but the embedding '%s' "
                    "has %lld rows\n", o->tokens, (long long)max_id, n->in[1]->name,
                    (long long)n->in[1]->type.dims[0]);
            return -1;
        }
    }
    return 0;
}

/* Copies a batch of examples into the model's inputs, for the next run, or
 * (next) for the run after the one launched, prefetched while it goes on.  0,
 * or -1 with a message. */
static int feed_batch(model *m, const cli_data *ds, const int64_t *order, int64_t first,
                      int next, char *err, size_t errlen)
{
    int (*set)(rt_session *, const ir_value *, const void *, char *, size_t) =
        next ? rt_session_prefetch : rt_session_set_input;
    for (int i = 0; i < m->g->ninputs; i++) {
        const ir_value *v = m->g->inputs[i];
        const cli_array *a = is_data_input(v) ? cli_data_find(ds, v->name) : NULL;
        if (!a)
            continue; /* check_arrays found every one */
        cli_array_gather(a, order, first, m->batch, v->type.dtype, rt_session_data(m->s, v));
        if (set(m->s, v, NULL, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static int feed(model *m, const cli_data *ds, const int64_t *order, int64_t first, char *err,
                size_t errlen)
{
    return feed_batch(m, ds, order, first, 0, err, errlen);
}

/* Copies every param and buffer of dst's graph from src's by name (a
 * tensor-parallel program's shards assembled into the whole), through the
 * host copies: src's read back from its device first (rt_session_pull, done
 * by the caller), dst's written to its device after. */
static int copy_weights(model *dst, const model *src)
{
    char err[512];
    for (int i = 0; i < dst->g->nparams; i++) {
        const ir_value *v = dst->g->params[i];
        if (v->kind == IR_VALUE_STATE)
            continue;
        if (rt_exec_read_param(src->g, rt_session_host(src->s), v->name, &v->type,
                               rt_session_data(dst->s, v), err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: evaluation: %s\n", err);
            return -1;
        }
    }
    if (rt_session_push(dst->s, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: evaluation: %s\n", err);
        return -1;
    }
    return 0;
}

/* Test accuracy (a classifier's; else NaN) and mean loss over the whole
 * test set. */
static int evaluate(model *m, const cli_data *test, double *acc, double *loss)
{
    int64_t batch = m->batch, classes = m->logits ? m->logits->type.dims[1] : 0;
    int64_t correct = 0, seen = 0;
    double total = 0;
    char err[512];
    for (int64_t first = 0; first + batch <= test->n; first += batch) {
        if (feed(m, test, NULL, first, err, sizeof err) != 0 ||
            rt_session_run(m->s, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            return -1;
        }
        cli_session_warn(m->s);
        const float *z = m->label ? rt_session_data(m->s, m->logits) : NULL;
        const void *labels = m->label ? rt_session_data(m->s, m->label) : NULL;
        for (int64_t i = 0; z && i < batch; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < classes; k++)
                if (z[i * classes + k] > z[i * classes + best])
                    best = k;
            correct += best == (m->label->type.dtype == IR_I64 ? ((const int64_t *)labels)[i]
                                                               : ((const int32_t *)labels)[i]);
        }
        total += *(const float *)rt_session_data(m->s, m->g->loss) * (double)batch;
        seen += batch;
    }
    *acc = m->label ? (double)correct / (double)seen : NAN;
    *loss = total / (double)seen;
    return 0;
}

/* The largest divisor of n that is at most cap. */
static long long divisor_upto(int64_t n, long long cap)
{
    for (long long b = cap < n ? cap : n; b > 1; b--)
        if (n % b == 0)
            return b;
    return 1;
}

/* What a checkpoint calls the model: its graph as the frontend makes it at
 * batch 1, locations left out (editing a comment does not change the model;
 * the batch, which follows the test set's size, is not the model either).
 * 0 when it does not load so. */
static uint64_t model_hash(const options *o)
{
    diag d;
    diag_init(&d);
    ir_graph *g = drv_load(&o->c, 1, &d);
    diag_free(&d);
    char *text = NULL;
    size_t len = 0;
    FILE *f = g ? open_memstream(&text, &len) : NULL;
    uint64_t h = 1469598103934665603ull;
    if (!f) {
        if (g)
            ir_graph_free(g);
        return 0;
    }
    ir_print(g, f);
    fclose(f);
    ir_graph_free(g);
    for (const char *p = text; p && *p; p++) {
        if (*p == '@')
            while (*p && *p != '\n' && *p != ' ')
                p++;
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
        if (!*p)
            break;
    }
    free(text);
    return h;
}

/* The learning rate of step (0-based) of total, in epoch. */
static double lr_at(const options *o, long long step, long long epoch, long long total)
{
    double lr = o->lr;
    if (o->schedule && strcmp(o->schedule, "step") == 0)
        lr *= pow(o->gamma, (double)(epoch / (o->step_size ? o->step_size : 1)));
    else if (o->schedule && strcmp(o->schedule, "cosine") == 0)
        lr *= 0.5 * (1 + cos(M_PI * (double)step / (double)total));
    if (o->warmup && step < o->warmup)
        lr *= (double)(step + 1) / (double)o->warmup;
    return lr;
}

static void fmt_time(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);
    snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* A checkpoint of m at step (epoch: the epochs done) of a run with seed;
 * mid-epoch (loss_steps > 0), the sum of the epoch's losses so far over its
 * loss_steps steps, so that a resumed run's epoch row covers the whole
 * epoch. */
static int save(const options *o, model *m, long long step, long long epoch, uint64_t seed,
                uint64_t hash, double loss_sum, long long loss_steps)
{
    if (!o->checkpoint)
        return 0;
    rt_ckpt_meta meta = {0};
    char buf[64], err[512];
    snprintf(buf, sizeof buf, "%lld", step);
    rt_ckpt_meta_set(&meta, "step", buf);
    snprintf(buf, sizeof buf, "%lld", epoch);
    rt_ckpt_meta_set(&meta, "epoch", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed); /* the run's: a resumed
                                                                     run's is its checkpoint's */
    rt_ckpt_meta_set(&meta, "seed", buf);
    rt_ckpt_meta_set(&meta, "rng", "counter-based: (seed, step) is the whole state");
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)hash);
    if (hash) /* 0: a plan's run, which has no model to hash */
        rt_ckpt_meta_set(&meta, "model_hash", buf);
    snprintf(buf, sizeof buf, "%lld", (long long)m->batch);
    rt_ckpt_meta_set(&meta, "batch", buf);
    rt_ckpt_meta_set(&meta, "optimizer", o->c.opt.kind == AD_SGD ? "sgd" : o->c.opt.kind == AD_ADAM
                                         ? "adam" : "adamw");
    if (loss_steps > 0) {
        snprintf(buf, sizeof buf, "%.17g", loss_sum);
        rt_ckpt_meta_set(&meta, "epoch_loss_sum", buf);
        snprintf(buf, sizeof buf, "%lld", loss_steps);
        rt_ckpt_meta_set(&meta, "epoch_loss_steps", buf);
    }
    int rc = rt_session_save(m->s, o->checkpoint, &meta, err, sizeof err);
    rt_ckpt_meta_free(&meta);
    if (rc)
        fprintf(stderr, "gnc: error: %s\n", err);
    return rc;
}

/* A training run: what cmd_train's parts share. */
typedef struct {
    const options *o;
    int root;                   /* the rank that reports (the only one without MPI) */
    int plan;                   /* o's file is a plan: no inference program to test with */
    int idx;                    /* --data is IDX files (data_is_idx) */
    const char *unit;           /* what a sample is called: images (IDX), samples */
    cli_dataset idx_train, idx_test; /* an IDX data set's; train and test view them */
    cli_data train, test;
    model tm, em;               /* the training step; the inference program (root's) */
    FILE *log;                  /* --log, open from its first row on */
    plot_run plot;              /* --plot: the rows so far */
    int plot_drawn;             /* the rows in the picture on disk */
    double plot_ms;             /* when it was drawn */
    int jsonl;                  /* --log FILE.jsonl: JSON lines, not CSV */
    long long batch, per_epoch, total, step, first_step;
    uint64_t seed, hash;
    int64_t *order;             /* this epoch's order of the training set */
    int pipelined, ahead;       /* a GPU: the next batch copied while a step runs */
    /* the epoch so far, and the clock */
    double epoch_loss, t_epoch, t_start, t_timed;
    long long epoch_steps, done_steps, timed;
    /* the steps since the last --log-every row */
    double window_loss, t_window;
    long long window_steps;
    int tty;
    /* predicted beside measured (cli_mem, predicted_step_ms) */
    cli_mem mem;                /* its baseline before the data set is read */
    double step_ms;             /* the steps' time after the run's first, summed */
    double first_ms;            /* the first's */
    long long steps_timed;
    int evaluated;              /* em ran (its buffers were used) */
} run;

/* Makes the folders of path that do not exist (as mkdir -p) and checks that
 * the last takes files, so that a file can be written at path later.  Prints
 * why not.  (The write itself may still fail, a full disk.) */
static int writable_later(const char *path, const char *flag)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (cli_make_dirs(dir, flag) != 0)
        return 0;
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "gnc: error: %s %s: cannot write in '%s': %s\n", flag, path, dir,
                strerror(errno));
        return 0;
    }
    return 1;
}

static int run_open(run *r)
{
    const options *o = r->o;
    char err[1024];
    const char *dir = o->data ? o->data : DEFAULT_DATA;
    int testing = r->root && !r->plan;
    /* before any work: a checkpoint that cannot be written is found now, not
       after an epoch */
    if (r->root && ((o->checkpoint && !writable_later(o->checkpoint, "--checkpoint")) ||
                    (o->log && !writable_later(o->log, "--log")) ||
                    (o->plot && !writable_later(o->plot, "--plot"))))
        return -1;
    if (r->idx) {
        if (cli_dataset_load(&r->idx_train, dir, "train", err, sizeof err) ||
            (testing && cli_dataset_load(&r->idx_test, dir, "t10k", err, sizeof err))) {
            fprintf(stderr, "gnc: error: %s\n", err);
            return -1;
        }
        if (model_load(o, o->batch, 1, &r->tm, 1) != 0)
            return -1;
        r->batch = r->tm.batch;
        if (check_data(&r->tm, &r->idx_train, "training") != 0 ||
            (testing && (model_load(o, divisor_upto(r->idx_test.n, r->batch), 0, &r->em, 1) != 0 ||
                         check_data(&r->em, &r->idx_test, "test") != 0)))
            return -1;
        cli_data_from_idx(&r->train, &r->idx_train, r->tm.image->name, r->tm.label->name);
        cli_data_from_idx(&r->test, &r->idx_test, r->tm.image->name, r->tm.label->name);
    } else {
        if (!o->tokens &&
            cli_data_load(dir, o->test_fraction, &r->train, &r->test, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            return -1;
        }
        if (model_load(o, o->batch, 1, &r->tm, 0) != 0 ||
            (o->tokens && load_tokens(o, &r->tm, &r->train, &r->test) != 0) ||
            check_arrays(o, &r->tm, &r->train) != 0)
            return -1;
        r->batch = r->tm.batch;
        if (testing && r->test.n < 1) {
            fprintf(stderr, "gnc: error: %s: the test data holds no samples (--test-fraction "
                    "%g)\n", o->tokens ? o->tokens : dir, o->test_fraction);
            return -1;
        }
        if (testing && (model_load(o, divisor_upto(r->test.n, r->batch), 0, &r->em, 0) != 0 ||
                        check_arrays(o, &r->em, &r->test) != 0))
            return -1;
    }
    r->per_epoch = r->train.n / r->batch;
    if (r->per_epoch < 1) {
        fprintf(stderr, "gnc: error: the batch (%lld) is larger than the training set (%lld)\n",
                r->batch, (long long)r->train.n);
        return -1;
    }
    /* --steps alone: that many steps, over as many epochs as they take
       (PyTorch Lightning's max_steps); with --epochs, whichever ends first */
    long long epochs = o->epochs ? o->epochs : 1;
    r->total = epochs * r->per_epoch;
    if (o->steps && (!o->epochs || o->steps < r->total))
        r->total = o->steps;
    r->hash = testing ? model_hash(o) : 0;
    r->seed = o->seed;
    r->order = malloc((size_t)r->train.n * sizeof *r->order);
    if (!r->order) {
        fprintf(stderr, "gnc: error: out of memory\n");
        return -1;
    }
    /* the parameters are filled from o->seed (cli_session_new) */
    rt_exec_set_profile(rt_session_host(r->tm.s), o->profile);
    if (rt_session_gpu(r->tm.s))
        rt_cuda_set_profile(rt_session_gpu(r->tm.s), o->profile_file != NULL);
    return 0;
}

/* --weights: the parameters and buffers of a checkpoint of gnc's or a
 * safetensors file of PyTorch's state_dict (its names gnc's: docs/train.md),
 * at step 0 with a fresh optimizer state, as fine-tuning starts. */
static int run_weights(run *r)
{
    char err[1024];
    if (rt_session_load_weights(r->tm.s, r->o->weights, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    if (r->root)
        printf("starting from the weights of %s\n", r->o->weights);
    return 0;
}

/* --resume: the checkpoint's weights, state, step and seed. */
static int run_resume(run *r)
{
    const options *o = r->o;
    char err[1024], hb[32];
    rt_ckpt_meta meta;
    if (rt_session_load(r->tm.s, o->resume, &meta, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    const char *s = rt_ckpt_meta_get(&meta, "step"), *sd = rt_ckpt_meta_get(&meta, "seed");
    const char *h = rt_ckpt_meta_get(&meta, "model_hash");
    snprintf(hb, sizeof hb, "%016llx", (unsigned long long)r->hash);
    if (!s || !sd) {
        fprintf(stderr, "gnc: error: %s: not a gnc training checkpoint (no step or seed)\n",
                o->resume);
        rt_ckpt_meta_free(&meta);
        return -1;
    }
    int64_t step;
    int bad_step = !base_parse_i64(s, 0, INT64_MAX, &step);
    if (bad_step || !base_parse_u64(sd, &r->seed)) {
        fprintf(stderr, "gnc: error: %s: the metadata's %s is '%.40s', not %s\n", o->resume,
                bad_step ? "step" : "seed", bad_step ? s : sd,
                bad_step ? "a count of steps (0 or more)" : "a seed (digits)");
        rt_ckpt_meta_free(&meta);
        return -1;
    }
    if (o->seed_given && o->seed != r->seed) {
        fprintf(stderr, "gnc: error: --seed %llu contradicts %s, whose run used seed %llu "
                "(the seed is part of the state a resumed run repeats): drop --seed, or "
                "give %llu\n", o->seed, o->resume, (unsigned long long)r->seed,
                (unsigned long long)r->seed);
        rt_ckpt_meta_free(&meta);
        return -1;
    }
    if (step > r->total) {
        fprintf(stderr, "gnc: error: %s is at step %lld, past the %lld steps this run asks "
                "for (--epochs, --steps): nothing to train\n", o->resume, (long long)step,
                r->total);
        rt_ckpt_meta_free(&meta);
        return -1;
    }
    r->step = step;
    /* stopped mid-epoch: the epoch's losses so far, which its row averages */
    const char *ls = rt_ckpt_meta_get(&meta, "epoch_loss_sum");
    const char *ln = rt_ckpt_meta_get(&meta, "epoch_loss_steps");
    int64_t steps = 0;
    char *end = NULL;
    double sum = ls ? strtod(ls, &end) : 0;
    if ((ls || ln) && (!ls || !ln || !end || *end || end == ls || !isfinite(sum) ||
                       !base_parse_i64(ln, 1, INT64_MAX, &steps) ||
                       steps != step % r->per_epoch)) {
        fprintf(stderr, "gnc: error: %s: the metadata's epoch_loss_sum '%.40s' and "
                "epoch_loss_steps '%.40s' are not a finite sum and the %lld steps taken of "
                "its epoch\n", o->resume, ls ? ls : "(none)", ln ? ln : "(none)",
                (long long)(step % r->per_epoch));
        rt_ckpt_meta_free(&meta);
        return -1;
    }
    r->epoch_loss = sum, r->epoch_steps = steps;
    if (r->root && r->hash && h && strcmp(h, hb) != 0)
        fprintf(stderr, "gnc: warning: %s was written for another version of the model\n",
                o->resume);
    rt_ckpt_meta_free(&meta);
    if (r->root)
        printf("resuming %s at step %lld (epoch %lld), seed %llu\n", o->resume, r->step,
               r->step / r->per_epoch + 1, (unsigned long long)r->seed);
    return 0;
}

/* --log: a row per epoch (and every --log-every steps), CSV or JSON lines,
 * appended to on resume.  A new log is made with its first row (log_row),
 * so that a run that fails before one leaves no file of a header alone. */
static int run_open_log(run *r)
{
    const options *o = r->o;
    size_t n = strlen(o->log);
    r->jsonl = n >= 6 && strcmp(o->log + n - 6, ".jsonl") == 0;
    int fresh = !o->resume || access(o->log, F_OK) != 0;
    if (!fresh && !(r->log = fopen(o->log, "a"))) {
        fprintf(stderr, "gnc: error: cannot write '%s': %s\n", o->log, strerror(errno));
        return -1;
    }
    if (!fresh && o->plot) { /* the picture starts with the resumed run's rows */
        diag d;
        diag_init(&d);
        int rc = plot_read_log(o->log, (double)r->per_epoch, &r->plot, &d);
        if (rc)
            diag_print(&d, stderr);
        diag_free(&d);
        return rc;
    }
    return 0;
}

/* A number of a log row: NaN (not measured) is nan in CSV, null in JSON. */
static void log_number(const run *r, const char *key, double v)
{
    if (r->jsonl && isfinite(v))
        fprintf(r->log, ", \"%s\": %.9g", key, v);
    else if (r->jsonl)
        fprintf(r->log, ", \"%s\": null", key);
    else
        fprintf(r->log, isfinite(v) ? ",%.9g" : ",nan", v);
}

/* --plot: the picture of every row so far, written whole. */
static int run_draw(run *r)
{
    char err[1024];
    if (plot_write(r->o->plot, &r->plot, 1, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: --plot: %s\n", err);
        return -1;
    }
    r->plot_drawn = r->plot.n;
    r->plot_ms = base_now_ms();
    return 0;
}

/* A row of the log: the epoch (from 1) and the steps done at its end; the
 * mean training loss over the steps it covers (an epoch, or those since the
 * last row); the test accuracy and loss (NaN where not measured); images/s
 * and seconds over the steps it covers. */
static int log_row(run *r, long long epoch, double train_loss, double acc,
                   double test_loss, double ips, double secs)
{
    if (r->root && r->o->plot) {
        double x = (double)(r->step + 1) / (double)r->per_epoch;
        plot_run_add(&r->plot, (plot_point){x, train_loss, test_loss, acc});
        /* drawn again at each epoch's end, else at most once a second (a
           picture of n rows redrawn at every one of many rows would cost n^2) */
        int end = isfinite(acc) || isfinite(test_loss) || r->step + 1 == r->total;
        if ((end || base_now_ms() - r->plot_ms >= 1000) && run_draw(r) != 0)
            return -1;
    }
    if (!r->root || !r->o->log)
        return 0;
    if (!r->log) {
        if (!(r->log = fopen(r->o->log, "w"))) {
            fprintf(stderr, "gnc: error: cannot write '%s': %s\n", r->o->log, strerror(errno));
            return -1;
        }
        if (!r->jsonl)
            fprintf(r->log, "epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds\n");
    }
    if (r->jsonl)
        fprintf(r->log, "{\"epoch\": %lld, \"steps\": %lld", epoch, r->step + 1);
    else
        fprintf(r->log, "%lld,%lld", epoch, r->step + 1);
    log_number(r, "train_loss", train_loss);
    log_number(r, "test_acc", acc);
    log_number(r, "test_loss", test_loss);
    log_number(r, "images_per_s", ips);
    log_number(r, "seconds", secs);
    fputs(r->jsonl ? "}\n" : "\n", r->log);
    fflush(r->log);
    return 0;
}

static void run_announce(const run *r)
{
    const options *o = r->o;
    const model *tm = &r->tm;
    char nb[160];
    printf("training %s: %lld steps of %lld %s per epoch, %lld steps to go\n",
           ir_name_str(nb, sizeof nb, tm->g->name),
           r->per_epoch, r->batch, r->unit, r->total - r->step);
    if (tm->prog.plan && tm->prog.plan->ndevices > 1)
        printf("on %d %s: %s, predicted step %.3f ms on %s\n", tm->prog.plan->ndevices,
               o->world->ranks > 1 ? "MPI ranks, one device each" : "virtual devices",
               tm->prog.plan->strategy, tm->prog.plan->step_ms, tm->prog.plan->cost.name);
    if (r->plan && tm->prog.file->ndevices > 1)
        printf("on %d %s: %s (as compiled into %s)\n", tm->prog.file->ndevices,
               o->world->ranks > 1 ? "MPI ranks, one device each" : "virtual devices",
               tm->prog.strategy, o->c.file);
}

/* The first parameter, buffer or optimizer state value of the training step
 * (those this process holds) with a NaN or an infinity in its host copy, or
 * NULL.  A gradient that is not finite leaves its parameter or the
 * parameter's optimizer state so once the update has run. */
static const ir_value *first_nonfinite(const model *m)
{
    for (int i = 0; i < m->g->nparams; i++) {
        const ir_value *v = m->g->params[i];
        const float *p = ir_is_float(v->type.dtype) ? rt_session_data(m->s, v) : NULL;
        int64_t len = p ? ir_type_numel(&v->type) : 0;
        int finite = 1;
        for (int64_t j = 0; j < len; j++) /* a - a is 0 but for an infinity or a NaN: */
            finite &= p[j] - p[j] == 0.0f; /* a loop without branches, that vectorizes */
        if (!finite)
            return v;
    }
    return NULL;
}

/* Stops the run (-1) when the update left a parameter not finite: on the
 * CPU after every step, on a GPU where its values come back to the host (the
 * end of an epoch, a checkpoint). */
static int check_finite(const run *r)
{
    const ir_value *v = first_nonfinite(&r->tm);
    if (!v)
        return 0;
    fprintf(stderr, "\ngnc: error: step %lld: %s is not finite after the update (a gradient or "
            "an optimizer state that is not); lower the learning rate\n", r->step, v->name);
    return -1;
}

/* One training step at learning rate lr: its batch fed (unless it went ahead
 * during the last step), launched, the next batch sent ahead on a GPU, waited
 * for; *loss its loss.  Prints why on failure. */
static int run_step(run *r, double lr, float *loss)
{
    char err[1024];
    model *tm = &r->tm;
    long long pos = r->step % r->per_epoch;
    int rc = (!r->ahead &&
              feed(tm, &r->train, r->order, pos * r->batch, err, sizeof err) != 0) ||
             rt_session_set_train(tm->s, lr, r->step, r->seed, err, sizeof err) != 0 ||
             rt_session_launch(tm->s, err, sizeof err) != 0;
    r->ahead = 0;
    if (!rc && r->pipelined && r->step + 1 < r->total) {
        long long next = (r->step + 1) % r->per_epoch;
        if (next == 0)
            cli_dataset_order(r->order, r->train.n, r->seed,
                              (uint64_t)((r->step + 1) / r->per_epoch));
        rc = feed_batch(tm, &r->train, r->order, next * r->batch, 1, err, sizeof err) != 0;
        r->ahead = 1;
    }
    if (rc || rt_session_wait(tm->s, err, sizeof err) != 0) {
        fprintf(stderr, "\ngnc: error: step %lld: %s\n", r->step, err);
        return -1;
    }
    cli_session_warn(tm->s);
    /* the loss is on device 0 (the partitioner ends it there) */
    const float *lp = rt_session_data(tm->s, tm->g->loss);
    *loss = lp ? *lp : 0;
    if (r->root && !lp) {
        fprintf(stderr, "\ngnc: error: the loss is computed on device %d, not on rank 0\n",
                tm->g->loss->def ? tm->g->loss->def->device : 0);
        return -1;
    }
    if (!isfinite(*loss)) {
        fprintf(stderr, "\ngnc: error: step %lld: the loss is %g; lower the learning rate\n",
                r->step, *loss);
        return -1;
    }
    return rt_session_device(tm->s) == RT_DEVICE_CPU ? check_finite(r) : 0;
}

/* The end of an epoch, or of the run: every rank brings rank 0 the
 * parameters it holds first, then rank 0 evaluates, reports, logs and
 * saves. */
static int run_epoch_end(run *r, double now, double ips)
{
    const options *o = r->o;
    char err[1024];
    long long epoch = r->step / r->per_epoch, pos = r->step % r->per_epoch;
    double secs = (now - r->t_epoch) / 1e3, acc = NAN, test_loss = NAN;
    double train_loss = r->epoch_loss / (double)r->epoch_steps;
    if (r->tty)
        fputc('\n', stderr);
    if ((pos + 1 == r->per_epoch || o->checkpoint) &&
        (rt_session_pull(r->tm.s, err, sizeof err) != 0 ||
         rt_exec_gather_params(rt_session_host(r->tm.s), err, sizeof err) != 0)) {
        fprintf(stderr, "gnc: error: step %lld: %s\n", r->step, err);
        return -1;
    }
    if (rt_session_device(r->tm.s) != RT_DEVICE_CPU && check_finite(r) != 0)
        return -1;
    if (r->root && pos + 1 == r->per_epoch && r->plan) {
        printf("epoch %lld: train loss %.4f, %.0f %s/s, %.1f s (no test: a plan holds the "
               "training step alone)\n", epoch + 1, train_loss, ips, r->unit, secs);
    } else if (r->root && pos + 1 == r->per_epoch) {
        r->evaluated = 1;
        if (copy_weights(&r->em, &r->tm) != 0 || evaluate(&r->em, &r->test, &acc, &test_loss) != 0)
            return -1;
        if (r->em.label)
            printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.4f, %.0f "
                   "%s/s, %.1f s\n", epoch + 1, train_loss, test_loss, acc, ips, r->unit, secs);
        else
            printf("epoch %lld: train loss %.4f, test loss %.4f, %.0f %s/s, %.1f s\n", epoch + 1,
                   train_loss, test_loss, ips, r->unit, secs);
    } else if (r->root) {
        printf("stopped after step %lld in epoch %lld: train loss %.4f over its last %lld "
               "steps, %.0f %s/s\n", r->step + 1, epoch + 1, train_loss, r->epoch_steps, ips,
               r->unit);
    }
    if (log_row(r, epoch + 1, train_loss, acc, test_loss, ips, secs) != 0)
        return -1;
    int mid = (r->step + 1) % r->per_epoch != 0;
    if (r->root && save(o, &r->tm, r->step + 1, (r->step + 1) / r->per_epoch, r->seed, r->hash,
                        mid ? r->epoch_loss : 0, mid ? r->epoch_steps : 0) != 0)
        return -1;
    r->epoch_loss = 0, r->epoch_steps = 0, r->timed = 0;
    r->window_loss = 0, r->window_steps = 0;
    r->t_epoch = r->t_timed = r->t_window = base_now_ms();
    return 0;
}

/* Ctrl-C (SIGINT) and SIGTERM during training (docs/cli.md, "Stopping a
 * run"): the first asks the loop to stop after the step it is in; a second
 * ends the process at once, removing a checkpoint half written (the last
 * whole one stays: checkpoints are written to a temporary and renamed,
 * base_out). */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    if (!stop_signal) {
        stop_signal = sig;
        return;
    }
    base_out_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_stops(void)
{
    base_out_track_pending();
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* An argument as the shell takes it back: in single quotes unless it is
 * plain. */
static void print_quoted(FILE *f, const char *a)
{
    if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "_-+=./,:@%") == strlen(a)) {
        fputs(a, f);
        return;
    }
    fputc('\'', f);
    for (; *a; a++)
        fputs(*a == '\'' ? "'\\''" : (char[2]){*a, 0}, f);
    fputc('\'', f);
}

/* The run stopped early at a signal (or with its standard output gone): what
 * was saved, and the command line that goes on from there, this one with
 * --resume CHECKPOINT in place of any --resume. */
static void say_stopped(const run *r, const char *why)
{
    const options *o = r->o;
    fprintf(stderr, "gnc: stopped by %s after step %lld of %lld", why, r->step, r->total);
    if (!o->checkpoint) {
        fprintf(stderr, "; nothing was saved (no --checkpoint)\n");
        return;
    }
    fprintf(stderr, "; checkpoint %s written\nresume with:", o->checkpoint);
    for (int i = 0; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--resume") == 0) {
            i++;
            continue;
        }
        if (strncmp(o->argv[i], "--resume=", 9) == 0)
            continue;
        fputc(' ', stderr);
        print_quoted(stderr, o->argv[i]);
    }
    fputs(" --resume ", stderr);
    print_quoted(stderr, o->checkpoint);
    fputc('\n', stderr);
}

/* The steps from r->step to r->total, a progress line as they go, a --log
 * row every --log-every steps.  0, -1 on a failure, or 130 when a signal
 * (or the end of its standard output) stopped the run early. */
static int run_loop(run *r)
{
    const options *o = r->o;
    r->t_epoch = r->t_start = r->t_timed = r->t_window = base_now_ms();
    /* images/s leaves out the run's first step, which first touches every
       buffer (as PyTorch's benchmark leaves out its warm-up steps) */
    r->timed = -1;
    r->first_step = r->step;
    for (; r->step < r->total; r->step++) {
        long long epoch = r->step / r->per_epoch, pos = r->step % r->per_epoch;
        if (!r->ahead && (pos == 0 || r->step == r->first_step))
            cli_dataset_order(r->order, r->train.n, r->seed, (uint64_t)epoch);
        double lr = lr_at(o, r->step, epoch, r->total);
        float loss;
        double t0 = base_now_ms();
        if (run_step(r, lr, &loss) != 0)
            return -1;
        /* the step time beside the predicted one leaves out the first step,
           as images/s does; a run of one step has that one */
        if (r->step > r->first_step)
            r->step_ms += base_now_ms() - t0, r->steps_timed++;
        else
            r->first_ms = base_now_ms() - t0;
        r->epoch_loss += loss, r->epoch_steps++, r->done_steps++;
        r->window_loss += loss, r->window_steps++;
        double now = base_now_ms();
        if (r->timed++ < 0)
            r->t_timed = now;
        double ips = r->timed > 0 ? (double)(r->timed * r->batch) / ((now - r->t_timed) / 1e3)
                                  : (double)r->batch / ((now - r->t_epoch) / 1e3);
        char eta[32];
        fmt_time((double)(r->total - r->step - 1) * (now - r->t_start) / 1e3 /
                 (double)r->done_steps, eta, sizeof eta);
        /* plain lines: ten per epoch, or every step of a short run */
        long long every = r->total - r->first_step <= 50 ? 1
                        : r->per_epoch / 10 ? r->per_epoch / 10 : 1;
        if (r->root && r->tty)
            fprintf(stderr, "\r  epoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f %s/s  "
                    "ETA %s ", epoch + 1, pos + 1, r->per_epoch, loss, lr, ips, r->unit, eta);
        else if (r->root && ((pos + 1) % every == 0 || r->step + 1 == r->total))
            printf("  epoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f %s/s  ETA %s\n",
                   epoch + 1, pos + 1, r->per_epoch, loss, lr, ips, r->unit, eta);
        int gone = r->root && cli_stdout_gone();
        int ends = pos + 1 == r->per_epoch || r->step + 1 == r->total;
        int stop = (stop_signal || gone) && !ends;
        if ((ends || stop) && run_epoch_end(r, now, ips) != 0)
            return -1;
        if (!ends && !stop && o->log_every && (r->step + 1) % o->log_every == 0) {
            double secs = (now - r->t_window) / 1e3;
            if (log_row(r, epoch + 1, r->window_loss / (double)r->window_steps, NAN, NAN,
                        (double)(r->window_steps * r->batch) / secs, secs) != 0)
                return -1;
            r->window_loss = 0, r->window_steps = 0, r->t_window = now;
        }
        if ((stop_signal || gone) && r->step + 1 < r->total) {
            r->step++;
            if (r->root)
                say_stopped(r, stop_signal == SIGTERM ? "SIGTERM" : stop_signal ? "SIGINT"
                                                                               : "a closed "
                                                                                 "output");
            return 130;
        }
    }
    return 0;
}

/* The bytes of data set d's arrays (n samples of each). */
static double data_bytes(const cli_data *d)
{
    double b = 0;
    for (int i = 0; i < d->narrays; i++)
        b += (double)d->n * (double)ir_type_bytes(&d->a[i].sample);
    return b;
}

/* The end of a run: the step time beside the predicted one, the planned
 * memory beside the measured peak.  The plan counts the training session's
 * buffers, the evaluation program's (whole where an evaluation ran, else its
 * parameters, the rest never touched), the data set as read (the test split
 * where it has arrays of its own) and the shuffled order. */
static void report_end(run *r)
{
    const char *model = "";
    double predicted = predicted_step_ms(r->o, &r->tm.prog, &model);
    double measured = r->steps_timed ? r->step_ms / (double)r->steps_timed : r->first_ms;
    int graphs = rt_session_graphs(r->tm.s);
    char how[96] = "";
    if (rt_session_device(r->tm.s) == RT_DEVICE_CUDA && graphs > 1)
        snprintf(how, sizeof how, "; %d CUDA graphs, a host thread each", graphs);
    else if (rt_session_device(r->tm.s) == RT_DEVICE_CUDA)
        snprintf(how, sizeof how, "; %s", graphs ? "a CUDA graph" : "step by step");
    if (r->steps_timed)
        printf("step: %.2f ms (mean of %lld after the first%s), predicted %.2f ms on %s\n",
               measured, r->steps_timed, how, predicted, model);
    else
        printf("step: %.2f ms (the first, the only one%s), predicted %.2f ms on %s\n", measured,
               how, predicted, model);
    cli_mem_add(&r->mem, "data set", data_bytes(&r->train) +
                (r->idx || r->test.nowned ? data_bytes(&r->test) : 0));
    cli_mem_add(&r->mem, "shuffle order", (double)r->train.n * (double)sizeof *r->order);
    if (r->em.s)
        cli_mem_add(&r->mem, r->evaluated ? "evaluation program" : "evaluation parameters",
                    cli_mem_session_bytes(r->em.s, r->evaluated));
    cli_mem_end(&r->mem, r->tm.s, 1);
    cli_mem_print(&r->mem, stdout);
}

int cmd_train(const options *o)
{
    run r = {.o = o, .root = o->world->rank == 0, .plan = cli_is_plan(o->c.file),
             .idx = data_is_idx(o)};
    r.unit = r.idx ? "images" : "samples";
    if (o->threads)
        rt_set_threads(o->threads);
    /* the baseline of the measured peak: the data set, both programs and
       their sessions come after it, and are counted (report_end) */
    cli_mem_start(&r.mem);
    int rc = 1;
    if (o->weights && o->resume) {
        fprintf(stderr, "gnc: error: --weights starts a run from given weights, --resume "
                "continues one from its checkpoint: give one of them\n");
        return 2;
    }
    if (run_open(&r) != 0 || (o->resume && run_resume(&r) != 0) ||
        (o->weights && run_weights(&r) != 0) ||
        (r.root && o->log && run_open_log(&r) != 0))
        goto done;
    r.tty = r.root && isatty(2);
    r.pipelined = rt_session_device(r.tm.s) == RT_DEVICE_CUDA;
    if (r.root)
        run_announce(&r);
    if (o->world->ranks <= 1)
        catch_stops();  /* under mpirun, mpirun's signals end the job */
    if ((rc = run_loop(&r)) < 0) {
        rc = 1;
        goto done;
    }
    if (rc == 0 && r.root)
        report_end(&r);
    if (rc == 0 && r.root && o->profile && !rt_session_gpu(r.tm.s))
        rt_exec_print_profile(rt_session_host(r.tm.s), stdout);
    if (rc == 0 && r.root && o->profile_file)
        rc = cli_write_measured_trace(r.tm.s, "measured: gnc train",
                                      o->profile_file);
done:
    if (r.root && o->plot && r.plot.n > r.plot_drawn && run_draw(&r) != 0)
        rc = 1; /* the rows a second had not drawn yet (a stop mid-epoch) */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (r.log && fclose(r.log) != 0) {
        fprintf(stderr, "gnc: error: cannot write '%s'\n", o->log);
        rc = 1;
    }
    free(r.order);
    plot_run_free(&r.plot);
    model_free(&r.tm);
    model_free(&r.em);
    cli_data_free(&r.train);
    cli_data_free(&r.test);
    cli_dataset_free(&r.idx_train);
    cli_dataset_free(&r.idx_test);
    return rc;
}

int cmd_eval(const options *o)
{
    char err[1024];
    cli_dataset idx_test = {0};
    cli_data train = {0}, test = {0};
    model m = {0};
    int rc = 1, idx = data_is_idx(o);
    const char *dir = o->data ? o->data : DEFAULT_DATA;
    if (!o->weights) {
        fprintf(stderr, "gnc: error: eval needs --weights FILE (see 'gnc eval --help')\n");
        return 2;
    }
    if (o->threads)
        rt_set_threads(o->threads);
    if (idx) {
        if (cli_dataset_load(&idx_test, dir, "t10k", err, sizeof err)) {
            fprintf(stderr, "gnc: error: %s\n", err);
            goto done;
        }
        long long batch = o->batch ? o->batch : divisor_upto(idx_test.n, 256);
        if (model_load(o, batch, 0, &m, 1) != 0 || check_data(&m, &idx_test, "test") != 0)
            goto done;
        if (m.batch > idx_test.n) {
            fprintf(stderr, "gnc: error: the batch (%lld) is larger than the test set (%lld)\n",
                    (long long)m.batch, (long long)idx_test.n);
            goto done;
        }
        cli_data_from_idx(&test, &idx_test, m.image->name, m.label->name);
    } else {
        if (!o->tokens &&
            cli_data_load(dir, o->test_fraction, &train, &test, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            goto done;
        }
        /* a token stream's windows follow the model's seq: the model first,
           then (without --batch) again at a batch that divides the test set */
        if (o->tokens && (model_load(o, o->batch, 0, &m, 0) != 0 ||
                          load_tokens(o, &m, &train, &test) != 0))
            goto done;
        if (o->tokens && !o->batch)
            model_free(&m);
        if ((!o->tokens || !o->batch) &&
            model_load(o, o->batch ? o->batch : divisor_upto(test.n, 256), 0, &m, 0) != 0)
            goto done;
        if (check_arrays(o, &m, &test) != 0)
            goto done;
    }
    if (rt_session_load(m.s, o->weights, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    double acc, loss;
    if (evaluate(&m, &test, &acc, &loss) != 0)
        goto done;
    const char *unit = idx ? "images" : "samples";
    int64_t used = test.n / m.batch * m.batch;
    if (o->json) { /* the line's numbers, and what they are of; the keys are IDX's */
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", m.g->name);
        cJSON_AddStringToObject(j, "file", o->c.file);
        cJSON_AddStringToObject(j, "weights", o->weights);
        cJSON_AddStringToObject(j, "data", o->tokens ? o->tokens : dir);
        cJSON_AddStringToObject(j, "device", o->cuda ? "cuda" : "cpu");
        cJSON_AddNumberToObject(j, "batch", (double)m.batch);
        cli_json_number(j, "accuracy", acc);
        cli_json_number(j, "loss", loss);
        cJSON_AddNumberToObject(j, "images", (double)used); /* samples: the key stays */
        cJSON_AddNumberToObject(j, "of", (double)test.n);
        rc = cli_json_print(j);
        goto done;
    }
    if (m.label)
        printf("test accuracy %.4f, loss %.4f, on %lld of %lld %s\n", acc, loss, (long long)used,
               (long long)test.n, unit);
    else
        printf("test loss %.4f, on %lld of %lld %s\n", loss, (long long)used, (long long)test.n,
               unit);
    rc = 0;
done:
    model_free(&m);
    cli_data_free(&train);
    cli_data_free(&test);
    cli_dataset_free(&idx_test);
    return rc;
}
