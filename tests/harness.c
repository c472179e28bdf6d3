/* See harness.h. */
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend.h"

int th_passed, th_failed;

void th_check(int ok, const char *fmt, ...)
{
    if (ok) {
        th_passed++;
        return;
    }
    th_failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

ir_graph *th_compile(const char *root, const char *model, int batch, int train,
                     const ad_optimizer *opt, const pt_options *o, diag *d, mp_plan **plan)
{
    char path[4096], b[32];
    if (strchr(model, '/')) /* a test's own model, by its path from the root */
        snprintf(path, sizeof path, "%s/%s.net", root, model);
    else
        snprintf(path, sizeof path, "%s/models/%s.net", root, model);
    snprintf(b, sizeof b, "%d", batch);
    const char *names[1] = {"batch"}, *values[1] = {b};
    fe_options fo = {NULL, 1, names, values};
    *plan = NULL;
    ir_graph *g = fe_load_file(path, &fo, d);
    ad_optimizer sgd = ad_optimizer_default(AD_SGD);
    sgd.momentum = 0.9;
    int partitioned = o && (o->devices > 1 || o->deterministic);
    pm_options pm = {1, 0, NULL, NULL, stderr, partitioned ? o : NULL};
    int recompute = train && o && o->recompute; /* as the driver runs it (drv_optimize) */
    if (!g || (train && ad_training_graph(g, opt ? opt : &sgd, d) != 0) ||
        (recompute ? pm_run(g, "simplify,schedule", &pm, d) != 0 ||
                         pass_recompute(g, o->recompute, d) < 0 ||
                         pm_run(g, partitioned ? "partition,fuse" : "fuse", &pm, d) != 0
                   : pm_run(g, pm_default_pipeline(train, 0, partitioned), &pm, d) != 0) ||
        ir_verify(g, d) != 0) {
        if (g)
            ir_graph_free(g);
        return NULL;
    }
    *plan = mp_plan_graph(g);
    char err[512];
    if (mp_check(g, *plan, err, sizeof err) != 0) {
        diag_error(d, (ir_loc){0}, "%s: the memory plan does not hold: %s", model, err);
        mp_plan_free(*plan);
        *plan = NULL;
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

int th_program_new(const char *root, const char *model, int batch, int train,
                   const ad_optimizer *opt, const pt_options *o, diag *d, th_program *p)
{
    memset(p, 0, sizeof *p);
    if (!(p->g = th_compile(root, model, batch, train, opt, o, d, &p->plan)))
        return -1;
    char err[512];
    if (!(p->x = rt_exec_new_planned(p->g, p->plan->offset_by_id, p->plan->device_bytes, err,
                                     sizeof err))) {
        diag_error(d, (ir_loc){0}, "%s: %s", model, err);
        th_program_free(p);
        return -1;
    }
    rt_exec_init_params(p->x, 11);
    return 0;
}

void th_program_free(th_program *p)
{
    rt_exec_free(p->x);
    mp_plan_free(p->plan);
    if (p->g)
        ir_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

void th_feed(const ir_graph *g, rt_exec *x, int step, float lr)
{
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        void *data = rt_exec_data(x, v);
        int64_t n = ir_type_numel(&v->type);
        if (strcmp(v->name, AD_INPUT_LR) == 0)
            *(float *)data = lr;
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

double th_worst(const float *got, const float *ref, int64_t n)
{
    double ss = 0, w = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)ref[i] * ref[i];
    double rms = sqrt(ss / (double)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + rms + 1e-30);
        w = isnan(got[i]) || isnan(e) ? INFINITY : e > w ? e : w;
    }
    return w;
}
