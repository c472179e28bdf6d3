/* Training against PyTorch (tests/grad/gen_grad.py made the golden files):
 *
 *   - lenet and resnet18 at batch 8, one training step: the loss and every
 *     parameter gradient (sum, norm, 8 sampled elements) against PyTorch in
 *     float64.  An element may differ by 1e-4 of (its value plus the rms of its
 *     parameter's gradient), plus 1e-4 of the rms of all the model's gradients
 *     (conv biases before a batchnorm have a true gradient of 0 and a float32 one
 *     of rounding noise), plus NOISE_K times the parameter's float32 noise: the
 *     rms distance of PyTorch's own float32 gradients from its float64 ones, the
 *     largest of an NCHW and a channels-last run (gen_grad.py).  resnet18 at
 *     batch 8 is ill-conditioned: ReLU inputs within rounding of 0 flip with the
 *     order of a convolution's sums, and PyTorch's channels-last float32 step is
 *     0.2% of the rms away from float64 in stem and layer1, as are gnc's on
 *     OpenBLAS's SkylakeX kernels and on oneDNN (worst element 0.6%); lenet's
 *     noise is 1e-6 of its rms, so its bar stays 1e-4.
 *   - the models of tests/grad/ops.net, one per case: ops whose gradients the
 *     models above do not reach (pooling in ceil_mode, ...), with a parameter
 *     standing for the op's input, likewise.
 *   - tests/grad/losses.net (the losses with their options), layers.net
 *     (the normalization layers), attention.net (fused attention against
 *     the math of PyTorch's scaled_dot_product_attention) and
 *     attention_gqa.net (grouped-query attention, enable_gqa): the same,
 *     attention within 1e-5.
 *   - SGD (plain, momentum with weight decay, Nesterov), Adam and AdamW: five
 *     steps on one tensor, the values after each step within 1e-5 relative.
 *
 *   test_grad SOURCE_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "fill.h"
#include "frontend.h"
#include "passes.h"

static int failures, checks;

static void check(int ok, const char *c, const char *what, double got, double want)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL: %s: %s: got %.9g, want %.9g\n", c, what, got, want);
    }
}

/* The training graph of source's model (NULL: its last; at define, if any) for
 * opt, with its executor, every tensor filled with the test data and the learning
 * rate set. */
static ir_graph *load_step(const char *root, const char *source, const char *model,
                           const char *define, const ad_optimizer *opt, double lr, rt_exec **x)
{
    char path[4096], name[64] = "", value[64] = "";
    snprintf(path, sizeof path, "%s/%s", root, source);
    if (define && sscanf(define, "%63[^=]=%63s", name, value) != 2)
        define = NULL;
    const char *names[1] = {name}, *values[1] = {value};
    fe_options fo = {model, define ? 1 : 0, names, values};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &fo, &d);
    if (!g || ad_training_graph(g, opt, &d) != 0 || ir_verify(g, &d) != 0) {
        diag_print(&d, stderr);
        diag_free(&d);
        if (g)
            ir_graph_free(g);
        return NULL;
    }
    diag_free(&d);
    char err[256];
    if (!(*x = rt_exec_new(g, err, sizeof err))) {
        fprintf(stderr, "%s\n", err);
        ir_graph_free(g);
        return NULL;
    }
    for (int i = 0; i < g->ninputs; i++)
        if (strncmp(g->inputs[i]->name, "train.", 6) != 0)
            golden_fill(g->inputs[i], rt_exec_data(*x, g->inputs[i]));
    for (int i = 0; i < g->nparams; i++) {
        if (g->params[i]->kind == IR_VALUE_STATE)
            memset(rt_exec_data(*x, g->params[i]), 0,
                   (size_t)ir_type_numel(&g->params[i]->type) * sizeof(float));
        else
            golden_fill(g->params[i], rt_exec_data(*x, g->params[i]));
    }
    *(float *)rt_exec_data(*x, ir_find_value(g, AD_INPUT_LR)) = (float)lr;
    *(int64_t *)rt_exec_data(*x, ir_find_value(g, AD_INPUT_SEED)) = 0;
    return g;
}

/* The gradient the optimizer of parameter p receives. */
static const ir_value *grad_of(const ir_graph *g, const ir_value *p)
{
    ir_for_each_node(g, n)
        if ((n->op == IR_OP_SGD || n->op == IR_OP_ADAM) && n->in[0] == p)
            return n->in[1];
    return NULL;
}

static FILE *open_golden(const char *root, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/grad/%s", root, file);
    FILE *f = fopen(path, "r");
    if (!f) {
        failures++;
        fprintf(stderr, "FAIL: cannot read %s\n", path);
    }
    return f;
}

typedef struct {
    char name[256];
    long long n;
    double sum, sq, s[8];
    double noise; /* the "noise" line's rms; 0 without one */
} golden_grad;

/* How many times a parameter's float32 noise an element may be off beyond
 * the relative bar: a flipped ReLU moves some elements by several times the
 * rms of the noise (measured, worst sampled elements: resnet18 3.1 times on
 * OpenBLAS's SkylakeX kernels, 2.3 on oneDNN; lenet 3.7). */
#define NOISE_K 10

static void grad_case(const char *root, const char *c, double tol)
{
    char file[64], line[8192], source[512] = "", model[64] = "", define[128] = "";
    snprintf(file, sizeof file, "%s.txt", c);
    FILE *f = open_golden(root, file);
    if (!f)
        return;
    while (fgets(line, sizeof line, f) && strncmp(line, "loss ", 5) != 0) {
        sscanf(line, "source %511s", source);
        sscanf(line, "model %63s", model);
        sscanf(line, "define %127s", define);
    }
    double want_loss = atof(line + 5);
    golden_grad *gg = NULL;
    int ngg = 0;
    double all_sq = 0, all_n = 0;
    while (fgets(line, sizeof line, f)) {
        golden_grad e = {.noise = 0};
        int used;
        char nname[256];
        double nrms;
        if (sscanf(line, "noise %255s %lf", nname, &nrms) == 2) {
            for (int k = 0; k < ngg; k++)
                if (strcmp(gg[k].name, nname) == 0)
                    gg[k].noise = nrms;
            continue;
        }
        if (sscanf(line, "grad %255s %lld %lf %lf%n", e.name, &e.n, &e.sum, &e.sq, &used) != 4)
            continue;
        char *p = line + used;
        for (int i = 0; i < 8; i++)
            e.s[i] = strtod(p, &p);
        gg = realloc(gg, (size_t)(ngg + 1) * sizeof *gg);
        gg[ngg++] = e;
        all_sq += e.sq, all_n += (double)e.n;
    }
    double floor_ = 1e-4 * sqrt(all_sq / all_n), worst = 0, worst_noise = 0;
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    rt_exec *x = NULL;
    ir_graph *g = load_step(root, source, *model ? model : NULL, *define ? define : NULL, &opt,
                            0.0, &x);
    char err[256];
    if (!g || rt_exec_run(x, err, sizeof err) != 0) {
        failures++;
        fprintf(stderr, "FAIL: %s: does not run: %s\n", c, g ? err : "load");
        goto done;
    }
    double loss = *(const float *)rt_exec_data(x, g->loss);
    check(fabs(loss - want_loss) <= 1e-5 * fabs(want_loss), c, "loss", loss, want_loss);
    for (int k = 0; k < ngg; k++) {
        const golden_grad *e = &gg[k];
        const ir_value *v = ir_find_value(g, e->name), *dv = v ? grad_of(g, v) : NULL;
        if (!dv || ir_type_numel(&v->type) != e->n) {
            failures++;
            fprintf(stderr, "FAIL: %s: no gradient for %s\n", c, e->name);
            continue;
        }
        const float *gr = rt_exec_data(x, dv);
        double gsum = 0, gsq = 0;
        for (long long i = 0; i < e->n; i++)
            gsum += gr[i], gsq += (double)gr[i] * gr[i];
        double rms = sqrt(e->sq / (double)e->n), norm = sqrt(e->sq);
        char what[300];
        snprintf(what, sizeof what, "%s.grad sum", e->name);
        /* a sum of n elements each off by up to tol of the rms: tol sqrt(n) norm */
        double noise = NOISE_K * e->noise, rootn = sqrt((double)e->n);
        check(fabs(gsum - e->sum) <= (tol * norm + floor_ + noise) * rootn, c, what, gsum,
              e->sum);
        snprintf(what, sizeof what, "%s.grad norm", e->name);
        check(fabs(sqrt(gsq) - norm) <= tol * norm + (floor_ + noise) * rootn, c, what,
              sqrt(gsq), norm);
        for (int i = 0; i < 8; i++) {
            long long j = (i * 7919LL) % e->n;
            double d = fabs(gr[j] - e->s[i]), scale = fabs(e->s[i]) + rms;
            snprintf(what, sizeof what, "%s.grad[%lld]", e->name, j);
            check(d <= tol * scale + floor_ + noise, c, what, gr[j], e->s[i]);
            if (rms > 10 * floor_) /* not a gradient that is 0 up to rounding */
                worst = fmax(worst, d / scale);
            if (e->noise > 0)
                worst_noise = fmax(worst_noise, d / e->noise);
        }
    }
    int trainable = 0;
    for (int i = 0; i < g->nparams; i++)
        trainable += g->params[i]->kind == IR_VALUE_PARAM;
    check(ngg == trainable, c, "parameters with a PyTorch gradient", ngg, trainable);
    printf("  %-10s loss %.7g, %d parameter gradients; worst element off by %.2g of "
           "(|value| + rms) (tolerance %g), by %.2g times its float32 noise (tolerance "
           "%d)\n", c, loss, ngg, worst, tol, worst_noise, NOISE_K);
done:
    free(gg);
    rt_exec_free(x);
    if (g)
        ir_graph_free(g);
    fclose(f);
}

/* "run NAME lr=0.1 momentum=0.9 ..." -> the optimizer and its learning rate */
static ad_optimizer parse_run(const char *line, char *name, double *lr)
{
    ad_optimizer o = ad_optimizer_default(AD_SGD);
    sscanf(line, "run %63s", name);
    if (strncmp(name, "adamw", 5) == 0)
        o = ad_optimizer_default(AD_ADAMW);
    else if (strncmp(name, "adam", 4) == 0)
        o = ad_optimizer_default(AD_ADAM);
    for (const char *p = strchr(line + 4, ' '); p && *p; p = strchr(p + 1, ' ')) {
        char key[32], val[32];
        if (sscanf(p + 1, "%31[^=]=%31s", key, val) != 2)
            continue;
        double v = strcmp(val, "True") == 0 ? 1 : atof(val);
        if (strcmp(key, "lr") == 0)
            *lr = v;
        else if (strcmp(key, "momentum") == 0)
            o.momentum = v;
        else if (strcmp(key, "weight_decay") == 0)
            o.weight_decay = v;
        else if (strcmp(key, "nesterov") == 0)
            o.nesterov = (int)v;
    }
    return o;
}

static void optim_cases(const char *root)
{
    FILE *f = open_golden(root, "optim.txt");
    char line[8192], source[512] = "", name[64] = "";
    ir_graph *g = NULL;
    rt_exec *x = NULL;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "source %511s", source);
        if (strncmp(line, "run ", 4) == 0) {
            rt_exec_free(x);
            if (g)
                ir_graph_free(g);
            double lr = 0;
            ad_optimizer o = parse_run(line, name, &lr);
            g = load_step(root, source, NULL, NULL, &o, lr, &x);
            if (!g) {
                failures++;
                fprintf(stderr, "FAIL: optimizer %s does not load\n", name);
            }
            continue;
        }
        int step, used;
        if (!g || sscanf(line, "step %d%n", &step, &used) != 1)
            continue;
        char err[256];
        *(int64_t *)rt_exec_data(x, ir_find_value(g, AD_INPUT_STEP)) = step - 1;
        if (rt_exec_run(x, err, sizeof err) != 0) {
            failures++;
            fprintf(stderr, "FAIL: %s: %s\n", name, err);
            continue;
        }
        const float *p = rt_exec_data(x, ir_find_value(g, "p"));
        char *q = line + used, what[96];
        for (int i = 0; i < 15; i++) {
            double want = strtod(q, &q);
            snprintf(what, sizeof what, "step %d p[%d]", step, i);
            check(fabs(p[i] - want) <= 1e-5 * (fabs(want) + 0.1), name, what, p[i], want);
        }
        if (step == 5)
            printf("  %-12s 5 steps match\n", name);
    }
    rt_exec_free(x);
    if (g)
        ir_graph_free(g);
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_grad SOURCE_DIR\n");
        return 2;
    }
    grad_case(argv[1], "lenet", 1e-4);
    grad_case(argv[1], "resnet18", 1e-4);
    grad_case(argv[1], "convs", 1e-4);
    grad_case(argv[1], "pooling", 1e-4);
    grad_case(argv[1], "adaptive_avgpool", 1e-4);
    grad_case(argv[1], "upsample", 1e-4);
    grad_case(argv[1], "losses", 1e-4);
    grad_case(argv[1], "layers", 1e-4);
    grad_case(argv[1], "attention", 1e-5);
    grad_case(argv[1], "attention_gqa", 1e-5);
    optim_cases(argv[1]);
    printf("grad: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
