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
 * Each graph runs in a session (runtime/session.h) on --device: the CPU
 * executor, or the GPU with the parameters and optimizer state kept there;
 * these are read back into the host copy before an evaluation copies them
 * and before a checkpoint is written.  A model (not a plan) trained on the
 * GPU is compiled into a plan in memory first, as gnc compile -o would write
 * it (cli_plan_memory). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli.h"
#include "data.h"
#include "exec.h"
#include "plan.h"
#include "session.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

/* A graph with its session and the values the loop feeds and reads. */
typedef struct {
    drv_program prog;
    ir_graph *g;
    rt_session *s;
    const ir_value *image, *label, *logits;
} model;


static void model_free(model *m)
{
    rt_session_free(m->s);
    drv_candidates_free(m->prog.plan);
    drv_program_free(&m->prog);
}

/* Loads o's model at batch (as a training step when train), finds its image and
 * label inputs and its logits, and makes its executor: under MPI the training
 * step's device of this rank (collectively), the inference graph whole.  A
 * plan file is taken as compiled (batch, optimizer, devices); it must be a
 * training step to train and an inference program to evaluate. */
static int model_load(const options *o, long long batch, int train, model *m)
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
        m->label->type.rank != 1) {
        fprintf(stderr, "gnc: error: %s: to train or evaluate, the model needs an image input "
                "[batch, channels, h, w], an integer label input [batch] and the loss "
                "cross_entropy(logits, label)\n", o->c.file);
        return -1;
    }
    char err[512];
    if (!(m->s = cli_session_new(o, &m->prog, train, o->seed, err, sizeof err))) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    return 0;
}

/* Whether the data set fits the model's inputs. */
static int check_data(const model *m, const rt_dataset *ds, const char *what)
{
    const ir_type *t = &m->image->type;
    int classes = rt_dataset_classes(ds);
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

/* Copies a batch of examples into the model's inputs, for the next run, or
 * (next) for the run after the one launched, prefetched while it goes on.  0,
 * or -1 with a message. */
static int feed_batch(model *m, const rt_dataset *ds, const int64_t *order, int64_t first,
                      int next, char *err, size_t errlen)
{
    int64_t n = m->image->type.dims[0];
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    if (!labels)
        return snprintf(err, errlen, "out of memory"), -1;
    rt_dataset_batch(ds, order, first, n, rt_session_data(m->s, m->image), labels);
    void *dst = rt_session_data(m->s, m->label);
    for (int64_t i = 0; i < n; i++) {
        if (m->label->type.dtype == IR_I64)
            ((int64_t *)dst)[i] = labels[i];
        else
            ((int32_t *)dst)[i] = labels[i];
    }
    free(labels);
    int (*set)(rt_session *, const ir_value *, const void *, char *, size_t) =
        next ? rt_session_prefetch : rt_session_set_input;
    if (set(m->s, m->image, NULL, err, errlen) != 0 || set(m->s, m->label, NULL, err, errlen) != 0)
        return -1;
    return 0;
}

static int feed(model *m, const rt_dataset *ds, const int64_t *order, int64_t first, char *err,
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

/* Test accuracy and mean loss over the whole test set. */
static int evaluate(model *m, const rt_dataset *test, double *acc, double *loss)
{
    int64_t batch = m->image->type.dims[0], classes = m->logits->type.dims[1];
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
        const float *z = rt_session_data(m->s, m->logits);
        for (int64_t i = 0; i < batch; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < classes; k++)
                if (z[i * classes + k] > z[i * classes + best])
                    best = k;
            correct += best == test->labels[first + i];
        }
        total += *(const float *)rt_session_data(m->s, m->g->loss) * (double)batch;
        seen += batch;
    }
    *acc = (double)correct / (double)seen;
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

static uint64_t model_hash(const ir_graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    uint64_t h = 1469598103934665603ull;
    if (!f)
        return 0;
    ir_print(g, f);
    fclose(f);
    /* locations left out: editing a comment does not change the model */
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

static int save(const options *o, model *m, long long step, long long epoch, uint64_t hash)
{
    if (!o->checkpoint)
        return 0;
    rt_ckpt_meta meta = {0};
    char buf[64], err[512];
    snprintf(buf, sizeof buf, "%lld", step);
    rt_ckpt_meta_set(&meta, "step", buf);
    snprintf(buf, sizeof buf, "%lld", epoch);
    rt_ckpt_meta_set(&meta, "epoch", buf);
    snprintf(buf, sizeof buf, "%llu", o->seed);
    rt_ckpt_meta_set(&meta, "seed", buf);
    rt_ckpt_meta_set(&meta, "rng", "counter-based: (seed, step) is the whole state");
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)hash);
    if (hash) /* 0: a plan's run, which has no model to hash */
        rt_ckpt_meta_set(&meta, "model_hash", buf);
    snprintf(buf, sizeof buf, "%lld", (long long)m->image->type.dims[0]);
    rt_ckpt_meta_set(&meta, "batch", buf);
    rt_ckpt_meta_set(&meta, "optimizer", o->c.opt.kind == AD_SGD ? "sgd" : o->c.opt.kind == AD_ADAM
                                         ? "adam" : "adamw");
    int rc = rt_session_save(m->s, o->checkpoint, &meta, err, sizeof err);
    rt_ckpt_meta_free(&meta);
    if (rc)
        fprintf(stderr, "gnc: error: %s\n", err);
    return rc;
}

int cmd_train(const options *o)
{
    char err[1024];
    const char *dir = o->data ? o->data : DEFAULT_DATA;
    rt_dataset train = {0}, test = {0};
    model tm = {0}, em = {0};
    FILE *log = NULL;
    int rc = 1, root = o->world->rank == 0; /* the rank that reports (the only one without MPI) */
    /* a plan is the training step alone: no inference program to test with */
    int plan = cli_is_plan(o->c.file), testing = root && !plan;
    if (o->threads)
        rt_set_threads(o->threads);
    if (rt_dataset_load(&train, dir, "train", err, sizeof err) ||
        (testing && rt_dataset_load(&test, dir, "t10k", err, sizeof err))) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    if (model_load(o, o->batch, 1, &tm) != 0)
        goto done;
    long long batch = tm.image->type.dims[0];
    if (check_data(&tm, &train, "training") != 0 ||
        (testing && (model_load(o, divisor_upto(test.n, batch), 0, &em) != 0 ||
                     check_data(&em, &test, "test") != 0)))
        goto done;
    long long per_epoch = train.n / batch;
    if (per_epoch < 1) {
        fprintf(stderr, "gnc: error: the batch (%lld) is larger than the training set (%lld)\n",
                batch, (long long)train.n);
        goto done;
    }
    long long epochs = o->epochs ? o->epochs : 1, total = epochs * per_epoch;
    if (o->steps && o->steps < total)
        total = o->steps;
    uint64_t hash = testing ? model_hash(em.g) : 0, seed = o->seed;
    long long step = 0;

    /* the parameters are filled from o->seed (cli_session_new) */
    rt_exec_set_profile(rt_session_host(tm.s), o->profile);
    if (o->resume) {
        rt_ckpt_meta meta;
        if (rt_session_load(tm.s, o->resume, &meta, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            goto done;
        }
        const char *s = rt_ckpt_meta_get(&meta, "step"), *sd = rt_ckpt_meta_get(&meta, "seed");
        const char *h = rt_ckpt_meta_get(&meta, "model_hash");
        char hb[32];
        snprintf(hb, sizeof hb, "%016llx", (unsigned long long)hash);
        if (!s || !sd) {
            fprintf(stderr, "gnc: error: %s: not a gnc training checkpoint (no step or seed)\n",
                    o->resume);
            rt_ckpt_meta_free(&meta);
            goto done;
        }
        step = atoll(s);
        seed = strtoull(sd, NULL, 10);
        if (root && hash && h && strcmp(h, hb) != 0)
            fprintf(stderr, "gnc: warning: %s was written for another version of the model\n",
                    o->resume);
        rt_ckpt_meta_free(&meta);
        if (root)
            printf("resuming %s at step %lld (epoch %lld), seed %llu\n", o->resume, step,
                   step / per_epoch + 1, (unsigned long long)seed);
    }
    if (root && o->log) {
        int fresh = !o->resume || access(o->log, F_OK) != 0;
        log = fopen(o->log, fresh ? "w" : "a");
        if (!log) {
            fprintf(stderr, "gnc: error: cannot write '%s': %s\n", o->log, strerror(errno));
            goto done;
        }
        if (fresh)
            fprintf(log, "epoch,steps,train_loss,test_acc,images_per_s,seconds\n");
    }

    int tty = root && isatty(2);
    int64_t *order = malloc((size_t)train.n * sizeof *order);
    double epoch_loss = 0, t_epoch = cli_now_ms(), t_start = t_epoch;
    long long epoch_steps = 0, done_steps = 0;
    /* images/s leaves out the run's first step, which first touches every buffer
       (as PyTorch's benchmark leaves out its warm-up steps) */
    double t_timed = t_epoch;
    long long timed = -1;
    if (root)
        printf("training %s: %lld steps of %lld images per epoch, %lld steps to go\n",
               tm.g->name, per_epoch, batch, total - step);
    if (root && tm.prog.plan && tm.prog.plan->ndevices > 1)
        printf("on %d %s: %s, predicted step %.3f ms on %s\n", tm.prog.plan->ndevices,
               o->world->ranks > 1 ? "MPI ranks, one device each" : "virtual devices",
               tm.prog.plan->strategy, tm.prog.plan->step_ms, tm.prog.plan->cost.name);
    if (root && plan && tm.prog.file->ndevices > 1)
        printf("on %d %s: %s (as compiled into %s)\n", tm.prog.file->ndevices,
               o->world->ranks > 1 ? "MPI ranks, one device each" : "virtual devices",
               tm.prog.strategy, o->c.file);
    long long first_step = step;
    /* on a GPU the next batch is copied while the step runs (ahead: this
       step's batch was); the CPU executor takes each batch as it comes */
    int pipelined = rt_session_device(tm.s) == RT_DEVICE_CUDA, ahead = 0;
    for (; step < total; step++) {
        long long epoch = step / per_epoch, pos = step % per_epoch;
        if (!ahead && (pos == 0 || epoch_steps == 0))
            rt_dataset_order(order, train.n, seed, (uint64_t)epoch);
        double lr = lr_at(o, step, epoch, total);
        int rc = (!ahead && feed(&tm, &train, order, pos * batch, err, sizeof err) != 0) ||
                 rt_session_set_train(tm.s, lr, step, seed, err, sizeof err) != 0 ||
                 rt_session_launch(tm.s, err, sizeof err) != 0;
        ahead = 0;
        if (!rc && pipelined && step + 1 < total) {
            long long next = (step + 1) % per_epoch;
            if (next == 0)
                rt_dataset_order(order, train.n, seed, (uint64_t)((step + 1) / per_epoch));
            rc = feed_batch(&tm, &train, order, next * batch, 1, err, sizeof err) != 0;
            ahead = 1;
        }
        if (rc || rt_session_wait(tm.s, err, sizeof err) != 0) {
            fprintf(stderr, "\ngnc: error: step %lld: %s\n", step, err);
            goto done;
        }
        cli_session_warn(tm.s);
        /* the loss is on device 0 (the partitioner ends it there) */
        const float *lp = rt_session_data(tm.s, tm.g->loss);
        float loss = lp ? *lp : 0;
        if (root && !lp) {
            fprintf(stderr, "\ngnc: error: the loss is computed on device %d, not on rank 0\n",
                    tm.g->loss->def ? tm.g->loss->def->device : 0);
            goto done;
        }
        if (!isfinite(loss)) {
            fprintf(stderr, "\ngnc: error: step %lld: the loss is %g; lower the learning rate\n",
                    step, loss);
            goto done;
        }
        epoch_loss += loss, epoch_steps++, done_steps++;
        double now = cli_now_ms();
        if (timed++ < 0)
            t_timed = now;
        double ips = timed > 0 ? (double)(timed * batch) / ((now - t_timed) / 1e3)
                               : (double)batch / ((now - t_epoch) / 1e3);
        char eta[32];
        fmt_time((double)(total - step - 1) * (now - t_start) / 1e3 / (double)done_steps, eta,
                 sizeof eta);
        /* plain lines: ten per epoch, or every step of a short run */
        long long every = total - first_step <= 50 ? 1 : per_epoch / 10 ? per_epoch / 10 : 1;
        if (root && tty)
            fprintf(stderr, "\r  epoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f images/s  "
                    "ETA %s ", epoch + 1, pos + 1, per_epoch, loss, lr, ips, eta);
        else if (root && ((pos + 1) % every == 0 || step + 1 == total))
            printf("  epoch %lld  step %lld/%lld  loss %.4f  lr %.4g  %.0f images/s  ETA %s\n",
                   epoch + 1, pos + 1, per_epoch, loss, lr, ips, eta);
        if (pos + 1 < per_epoch && step + 1 < total)
            continue;

        /* the end of an epoch, or of the run: every rank brings rank 0 the
           parameters it holds first, then rank 0 reports and saves */
        double secs = (now - t_epoch) / 1e3, acc = NAN, test_loss = NAN;
        if (tty)
            fputc('\n', stderr);
        if ((pos + 1 == per_epoch || o->checkpoint) &&
            (rt_session_pull(tm.s, err, sizeof err) != 0 ||
             rt_exec_gather_params(rt_session_host(tm.s), err, sizeof err) != 0)) {
            fprintf(stderr, "gnc: error: step %lld: %s\n", step, err);
            goto done;
        }
        if (root && pos + 1 == per_epoch && plan) {
            printf("epoch %lld: train loss %.4f, %.0f images/s, %.1f s (no test: a plan holds the "
                   "training step alone)\n", epoch + 1, epoch_loss / (double)epoch_steps, ips,
                   secs);
            if (log) {
                fprintf(log, "%lld,%lld,%.9g,nan,%.9g,%.9g\n", epoch + 1, step + 1,
                        epoch_loss / (double)epoch_steps, ips, secs);
                fflush(log);
            }
        } else if (root && pos + 1 == per_epoch) {
            if (copy_weights(&em, &tm) != 0 || evaluate(&em, &test, &acc, &test_loss) != 0)
                goto done;
            printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.4f, %.0f "
                   "images/s, %.1f s\n", epoch + 1, epoch_loss / (double)epoch_steps, test_loss,
                   acc, ips, secs);
            if (log) {
                fprintf(log, "%lld,%lld,%.9g,%.9g,%.9g,%.9g\n", epoch + 1, step + 1,
                        epoch_loss / (double)epoch_steps, acc, ips, secs);
                fflush(log);
            }
        } else if (root) {
            printf("stopped after step %lld in epoch %lld: train loss %.4f over its last %lld "
                   "steps, %.0f images/s\n", step + 1, epoch + 1,
                   epoch_loss / (double)epoch_steps, epoch_steps, ips);
        }
        if (root && save(o, &tm, step + 1, (step + 1) / per_epoch, hash) != 0)
            goto done;
        epoch_loss = 0, epoch_steps = 0, t_epoch = t_timed = cli_now_ms(), timed = 0;
    }
    free(order);
    if (root && o->profile)
        rt_exec_print_profile(rt_session_host(tm.s), stdout);
    rc = 0;
done:
    if (log && fclose(log) != 0) {
        fprintf(stderr, "gnc: error: cannot write '%s'\n", o->log);
        rc = 1;
    }
    model_free(&tm);
    model_free(&em);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    return rc;
}

int cmd_eval(const options *o)
{
    char err[1024];
    rt_dataset test = {0};
    model m = {0};
    int rc = 1;
    if (!o->weights) {
        fprintf(stderr, "gnc: error: eval needs --weights FILE (see 'gnc eval --help')\n");
        return 2;
    }
    if (o->threads)
        rt_set_threads(o->threads);
    if (rt_dataset_load(&test, o->data ? o->data : DEFAULT_DATA, "t10k", err, sizeof err)) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    long long batch = o->batch ? o->batch : divisor_upto(test.n, 256);
    if (model_load(o, batch, 0, &m) != 0 || check_data(&m, &test, "test") != 0)
        goto done;
    if (rt_session_load(m.s, o->weights, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    double acc, loss;
    if (evaluate(&m, &test, &acc, &loss) != 0)
        goto done;
    int64_t used = test.n / m.image->type.dims[0] * m.image->type.dims[0];
    printf("test accuracy %.4f, loss %.4f, on %lld of %lld images\n", acc, loss,
           (long long)used, (long long)test.n);
    rc = 0;
done:
    model_free(&m);
    rt_dataset_free(&test);
    return rc;
}
