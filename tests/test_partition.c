/* Partitioned programs against the single-device one (passes/partition.c).
 *
 * For lenet, mlp and resnet18 at a small batch, each strategy on 1, 2 and 4
 * virtual devices:
 *   - inference: every output equals the single-device run's, element by
 *     element within 1e-5 of (|value| + the output's rms);
 *   - training: the losses of 10 steps of SGD with momentum (so that parameters,
 *     optimizer state and running statistics all carry from step to step)
 *     equal the single-device run's within 1e-5 relative, and so do the
 *     parameters after them;
 *   - deterministic mode: the losses and parameters of 1, 2 and 4 devices are
 *     bitwise identical;
 *   - data parallelism with batchnorm on local statistics (the default) differs
 *     from the single-device run on resnet18, as PyTorch DDP does;
 *   - every partitioned program verifies.
 * Then requests that cannot be met get their error.
 *
 *   test_partition SOURCE_DIR [MODEL]        (only MODEL's cases) */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "frontend.h"
#include "passes.h"

#define STEPS 10

static int passed, failed;
static const char *root;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A compiled program: its graph, plan and executor. */
typedef struct {
    ir_graph *g;
    mp_plan *plan;
    rt_exec *x;
} program;

static void program_free(program *p)
{
    rt_exec_free(p->x);
    mp_plan_free(p->plan);
    if (p->g)
        ir_graph_free(p->g);
}

/* Loads MODEL at batch, as a training step when train, through the default
 * pipeline with o's partitioning (NULL: one device).  On failure the
 * diagnostics go to d (which the caller prints or checks). */
static int compile(const char *model, int batch, int train, const pt_options *o, diag *d,
                   program *p)
{
    char path[4096], b[32];
    snprintf(path, sizeof path, "%s/models/%s.net", root, model);
    snprintf(b, sizeof b, "%d", batch);
    const char *names[1] = {"batch"}, *values[1] = {b};
    fe_options fo = {NULL, 1, names, values};
    memset(p, 0, sizeof *p);
    p->g = fe_load_file(path, &fo, d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    int partitioned = o && (o->devices > 1 || o->deterministic);
    pm_options pm = {1, 0, NULL, NULL, stderr, partitioned ? o : NULL};
    if (!p->g || (train && ad_training_graph(p->g, &opt, d) != 0) ||
        pm_run(p->g, pm_default_pipeline(train, 0, partitioned), &pm, d) != 0 ||
        ir_verify(p->g, d) != 0)
        return -1;
    p->plan = mp_plan_graph(p->g);
    char err[512];
    if (mp_check(p->g, p->plan, err, sizeof err) != 0) {
        fprintf(stderr, "%s: memory plan: %s\n", model, err);
        return -1;
    }
    if (!(p->x = rt_exec_new_planned(p->g, p->plan->offset_by_id, p->plan->arena_bytes, err,
                                     sizeof err))) {
        fprintf(stderr, "%s: %s\n", model, err);
        return -1;
    }
    rt_exec_init_params(p->x, 11);
    return 0;
}

/* The inputs of step: images from a formula of (step, index), labels too. */
static void feed(program *p, int step)
{
    const ir_graph *g = p->g;
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        void *data = rt_exec_data(p->x, v);
        int64_t n = ir_type_numel(&v->type);
        if (strcmp(v->name, AD_INPUT_LR) == 0)
            *(float *)data = 0.05f;
        else if (strcmp(v->name, AD_INPUT_STEP) == 0)
            *(int64_t *)data = step;
        else if (strcmp(v->name, AD_INPUT_SEED) == 0)
            *(int64_t *)data = 5;
        else if (v->type.dtype == IR_I32)
            for (int64_t k = 0; k < n; k++)
                ((int32_t *)data)[k] = (int32_t)((k * 7 + step * 3) % 10);
        else
            for (int64_t k = 0; k < n; k++)
                ((float *)data)[k] = (float)sin(0.1 * (double)k + 1.7 * step) * 0.5f + 0.5f;
    }
}

/* Runs STEPS steps (one for inference), keeping the losses. */
static int run(program *p, int steps, float *loss)
{
    char err[512];
    for (int s = 0; s < steps; s++) {
        feed(p, s);
        if (rt_exec_run(p->x, err, sizeof err) != 0) {
            fprintf(stderr, "run: %s\n", err);
            return -1;
        }
        if (loss && p->g->loss)
            loss[s] = *(const float *)rt_exec_data(p->x, p->g->loss);
    }
    return 0;
}

/* The largest difference between two float tensors, as a fraction of
 * (|ref| + rms(ref)). */
static double worst(const float *got, const float *ref, int64_t n)
{
    double ss = 0, w = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)ref[i] * ref[i];
    double rms = sqrt(ss / (double)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + rms + 1e-30);
        w = e > w || isnan(got[i]) ? (isnan(got[i]) ? INFINITY : e) : w;
    }
    return w;
}

/* Parameters of a against those of b by name: the worst worst(), and
 * whether they are bitwise the same. */
static double compare_params(program *a, program *b, int *same)
{
    double w = 0;
    *same = 1;
    for (int i = 0; i < b->g->nparams; i++) {
        const ir_value *v = b->g->params[i], *u = ir_find_value(a->g, v->name);
        if (!u || !ir_type_eq(&u->type, &v->type)) {
            *same = 0;
            return INFINITY;
        }
        const float *x = rt_exec_data(a->x, u), *y = rt_exec_data(b->x, v);
        int64_t n = ir_type_numel(&v->type);
        double e = worst(x, y, n);
        w = e > w ? e : w;
        *same &= memcmp(x, y, (size_t)n * sizeof *x) == 0;
    }
    return w;
}

typedef struct {
    const char *model;
    int batch;
} model_case;

static const char *strategy_name(const pt_options *o)
{
    static char buf[64];
    const char *s = o->strategy == PT_DATA ? "data" : o->strategy == PT_PIPELINE ? "pipeline"
                  : o->strategy == PT_TENSOR ? "tensor" : "hybrid";
    snprintf(buf, sizeof buf, "%s%s%s", s, o->sync_bn ? "+sync-bn" : "",
             o->deterministic ? "+deterministic" : "");
    return buf;
}

/* One model, one partitioning, against the reference runs. */
static void compare(const model_case *mc, const pt_options *o, program *ref_inf,
                    program *ref_train, const float *ref_loss, int expect_equal)
{
    const char *what = strategy_name(o);
    program p;
    diag d;
    diag_init(&d);
    /* inference */
    if (compile(mc->model, mc->batch, 0, o, &d, &p) != 0 || run(&p, 1, NULL) != 0) {
        diag_print(&d, stderr);
        check(0, "%s %s x%d inference compiles and runs", mc->model, what, o->devices);
    } else {
        check(pt_devices(p.g) == o->devices, "%s %s x%d inference uses %d devices", mc->model,
              what, o->devices, pt_devices(p.g));
        for (int i = 0; i < ref_inf->g->noutputs; i++) {
            const ir_value *v = ref_inf->g->outputs[i].value, *u = p.g->outputs[i].value;
            double w = ir_type_eq(&u->type, &v->type)
                           ? worst(rt_exec_data(p.x, u), rt_exec_data(ref_inf->x, v),
                                   ir_type_numel(&v->type))
                           : INFINITY;
            check(w <= 1e-5, "%s %s x%d: output %s off by %.3g", mc->model, what, o->devices,
                  ref_inf->g->outputs[i].name, w);
        }
    }
    program_free(&p);
    diag_free(&d);
    diag_init(&d);
    /* training */
    float loss[STEPS];
    if (compile(mc->model, mc->batch, 1, o, &d, &p) != 0 || run(&p, STEPS, loss) != 0) {
        diag_print(&d, stderr);
        check(0, "%s %s x%d training compiles and runs", mc->model, what, o->devices);
    } else {
        double wl = 0;
        for (int s = 0; s < STEPS; s++) {
            double e = fabs((double)loss[s] - ref_loss[s]) / fabs(ref_loss[s]);
            wl = e > wl || isnan(loss[s]) ? (isnan(loss[s]) ? INFINITY : e) : wl;
        }
        int same;
        double wp = compare_params(&p, ref_train, &same);
        if (expect_equal) {
            check(wl <= 1e-5, "%s %s x%d: losses off by %.3g", mc->model, what, o->devices, wl);
            check(wp <= 1e-4, "%s %s x%d: parameters off by %.3g", mc->model, what, o->devices,
                  wp);
        } else {
            check(wl > 1e-4, "%s %s x%d: losses should differ (local batchnorm), off by %.3g",
                  mc->model, what, o->devices, wl);
        }
        printf("  %-9s %-24s x%d  losses %.2e  params %.2e  step 1 loss %.6f\n", mc->model, what,
               o->devices, wl, wp, loss[0]);
    }
    program_free(&p);
    diag_free(&d);
}

/* Deterministic mode: 1, 2 and 4 devices give the same bits. */
static void deterministic(const model_case *mc)
{
    program p[3];
    float loss[3][STEPS];
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        pt_options o = {.devices = 1 << k, .strategy = PT_DATA, .deterministic = 1, .sync_bn = 1};
        diag d;
        diag_init(&d);
        if (compile(mc->model, mc->batch, 1, &o, &d, &p[k]) != 0 || run(&p[k], STEPS, loss[k])) {
            diag_print(&d, stderr);
            ok = 0;
        }
        diag_free(&d);
    }
    check(ok, "%s deterministic x1, x2, x4 compile and run", mc->model);
    if (ok)
        for (int k = 1; k < 3; k++) {
            int same;
            compare_params(&p[k], &p[0], &same);
            check(!memcmp(loss[k], loss[0], sizeof loss[0]) && same,
                  "%s deterministic x%d: losses and parameters bitwise those of x1", mc->model,
                  1 << k);
        }
    for (int k = 0; k < 3; k++)
        program_free(&p[k]);
}

static void model(const model_case *mc)
{
    program inf, train;
    float ref_loss[STEPS];
    diag d;
    diag_init(&d);
    int ok = compile(mc->model, mc->batch, 0, NULL, &d, &inf) == 0 && run(&inf, 1, NULL) == 0 &&
             compile(mc->model, mc->batch, 1, NULL, &d, &train) == 0 &&
             run(&train, STEPS, ref_loss) == 0;
    diag_print(&d, stderr);
    diag_free(&d);
    check(ok, "%s: the single-device reference compiles and runs", mc->model);
    if (!ok)
        return;
    int has_bn = 0;
    ir_for_each_node(train.g, n)
        has_bn |= n->op == IR_OP_BATCHNORM_TRAIN;
    for (int n = 1; n <= 4; n *= 2) {
        pt_options o = {.devices = n, .strategy = PT_DATA};
        compare(mc, &o, &inf, &train, ref_loss, !has_bn || n == 1);
        if (has_bn) {
            o.sync_bn = 1;
            compare(mc, &o, &inf, &train, ref_loss, 1);
        }
        o = (pt_options){.devices = n, .strategy = PT_DATA, .deterministic = 1, .sync_bn = 1};
        compare(mc, &o, &inf, &train, ref_loss, 1);
    }
    deterministic(mc);
    program_free(&inf);
    program_free(&train);
}

/* A request that cannot be met gets an error naming why. */
static void error_case(const char *model, int batch, const pt_options *o, const char *want)
{
    program p;
    diag d;
    diag_init(&d);
    int rc = compile(model, batch, 1, o, &d, &p);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    diag_print(&d, f);
    fclose(f);
    check(rc != 0 && strstr(text, want), "%s: wanted an error with '%s', got:\n%s", model, want,
          text);
    free(text);
    program_free(&p);
    diag_free(&d);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_partition SOURCE_DIR [MODEL]\n");
        return 2;
    }
    root = argv[1];
    rt_set_threads(2);
    static const model_case models[] = {{"lenet", 8}, {"mlp", 8}, {"resnet18", 8}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (argc < 3 || strcmp(argv[2], models[i].model) == 0)
            model(&models[i]);

    error_case("lenet", 6, &(pt_options){.devices = 4, .strategy = PT_DATA},
               "the batch of 6 does not split into 4 equal parts");
    error_case("lenet", 8, &(pt_options){.devices = 3, .strategy = PT_DATA, .deterministic = 1},
               "which 3 devices do not share evenly");
    printf("partition: %d checks, %d failed\n", passed + failed, failed);
    return failed ? 1 : 0;
}
