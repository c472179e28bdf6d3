/* The passes and the memory planner.
 *
 *   1. IR text in, IR text out: each tests/passes/NAME.gir names its passes in a
 *      "# PASSES: a,b" line; the result (verified after every pass) must match
 *      its CHECK lines (filecheck.h).
 *   2. Every model in models/, inference and training step (and with --remat):
 *      the default pipeline's program, run in its planned arena, gives the
 *      outputs, loss and updated weights of the program as loaded, bit for bit
 *      (the passes neither reorder arithmetic nor round differently), except
 *      where batchnorm was folded into weights: there within 1e-5 relative.  The plan is
 *      proved by mp_check, and its peak is within 1.10x of the lower bound.
 *   3. Random graphs: seeded random programs of elementwise ops with
 *      broadcasting, constants, repeated and dead subexpressions, reshapes,
 *      transposes, softmax and dense, likewise.
 *   4. Attention (passes/attention.c): the DSL's unfused attention in its
 *      variants (scales, causal masks by where or addition, gpt_tiny's k^T)
 *      becomes attention nodes whose outputs are the unfused program's within
 *      1e-6 of (|x| + rms); what is not attention (a fill of -1e4, an upper or
 *      shifted triangle, scores or probabilities read twice, a mask or scale
 *      that is no constant) stays.
 *
 *   test_passes SOURCE_DIR */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "filecheck.h"
#include "frontend.h"
#include "passes.h"

static int passed, failed;

static void fail(const char *what, const char *msg)
{
    failed++;
    fprintf(stderr, "FAIL %s: %s\n", what, msg);
}


/* ---------------------------------------------------------------- 1. text */

static void pass_file(const char *path)
{
    size_t len;
    char *text = read_file(path, &len), pipeline[256] = "", msg[1024];
    const char *p = text ? strstr(text, "# PASSES: ") : NULL;
    if (!p || sscanf(p, "# PASSES: %255s", pipeline) != 1) {
        fail(path, "no '# PASSES:' line");
        free(text);
        return;
    }
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(path, text, len, &d);
    pm_options o = {1, 0, NULL, NULL, stderr, NULL};
    if (!g || ir_verify(g, &d) || pm_run(g, pipeline, &o, &d)) {
        diag_print(&d, stderr);
        fail(path, "does not load or the passes fail");
    } else {
        char *out = graph_text(g);
        if (file_check(text, out, msg, sizeof msg)) {
            passed++;
        } else {
            fail(path, msg);
            fprintf(stderr, "output:\n%s", out);
        }
        free(out);
    }
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    free(text);
}

static void pass_files(const char *src)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/passes", src);
    DIR *dp = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (dp && (e = readdir(dp))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".gir") == 0) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            pass_file(path);
            n++;
        }
    }
    if (dp)
        closedir(dp);
    if (n == 0)
        fail(dir, "no .gir files");
}

/* ---------------------------------------------------------------- 2, 3. equivalence */

static uint64_t rng;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static size_t value_size(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    size_t es = t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
    return (size_t)ir_type_numel(&v->type) * es;
}

/* Fills v (by its name, so both graphs get the same data): floats in [-1, 1),
 * variances (running_var, Adam's exp_avg_sq) in [0.5, 1.5): a negative one
 * is a NaN from batchnorm on, which relu no longer hides. */
static void fill(const ir_value *v, void *data, uint64_t seed)
{
    int pos = strstr(v->name, "running_var") || strstr(v->name, "exp_avg_sq");
    uint64_t h = seed;
    for (const char *s = v->name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    rng = h | 1;
    int64_t n = ir_type_numel(&v->type);
    for (int64_t i = 0; i < n; i++)
        switch (v->type.dtype) {
        case IR_I32: ((int32_t *)data)[i] = (int32_t)(uniform() * 10); break;
        case IR_I64: ((int64_t *)data)[i] = strcmp(v->name, "train.seed") == 0 ? 7 : (int64_t)(uniform() * 10); break;
        case IR_U8: ((uint8_t *)data)[i] = (uint8_t)(uniform() * 256); break;
        default:
            ((float *)data)[i] = strcmp(v->name, "train.lr") == 0 ? 0.01f
                                 : pos ? (float)(0.5 + uniform())
                                       : (float)(2 * uniform() - 1);
        }
}

static rt_exec *prepare(const ir_graph *g, const mp_plan *p, char *err, size_t errlen)
{
    rt_exec *x = p ? rt_exec_new_planned(g, p->offset_by_id, p->device_bytes, err, errlen)
                   : rt_exec_new(g, err, errlen);
    if (!x)
        return NULL;
    for (int i = 0; i < g->ninputs; i++)
        fill(g->inputs[i], rt_exec_data(x, g->inputs[i]), 1);
    for (int i = 0; i < g->nparams; i++)
        fill(g->params[i], rt_exec_data(x, g->params[i]), 2);
    return x;
}

/* Bit for bit, or with tol > 0 within tol (|b| + rms(b)) elementwise (floats). */
static int same(rt_exec *xa, const ir_value *a, rt_exec *xb, const ir_value *b, double tol)
{
    if (!ir_type_eq(&a->type, &b->type))
        return 0;
    if (tol == 0 || a->type.dtype != IR_F32)
        return memcmp(rt_exec_data(xa, a), rt_exec_data(xb, b), value_size(a)) == 0;
    const float *p = rt_exec_data(xa, a), *q = rt_exec_data(xb, b);
    int64_t n = ir_type_numel(&a->type);
    double rms = 0;
    for (int64_t i = 0; i < n; i++)
        rms += (double)p[i] * p[i] / (double)n;
    rms = sqrt(rms);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(p[i] - q[i]) <= tol * (fabs(p[i]) + rms)))
            return 0;
    return 1;
}

/* Runs raw (as loaded) and opt (optimized, planned) twice each, the second run
 * reading the weights the first updated, and compares all they give. */
static void equivalent(const char *what, ir_graph *raw, ir_graph *opt, double max_ratio, int remat)
{
    diag d;
    diag_init(&d);
    pm_options o = {1, 0, NULL, NULL, stderr, NULL};
    mp_plan *p = NULL;
    rt_exec *xa = NULL, *xb = NULL;
    char err[512], msg[1024];
    if (pm_run(opt, pm_default_pipeline(raw->nupdates > 0, remat, 0), &o, &d) != 0) {
        diag_print(&d, stderr);
        fail(what, "the pipeline fails");
        goto done;
    }
    p = mp_plan_graph(opt);
    if (mp_check(opt, p, err, sizeof err) != 0) {
        fail(what, err);
        goto done;
    }
    if (p->lower_bound && (double)p->arena_bytes > max_ratio * (double)p->lower_bound) {
        snprintf(msg, sizeof msg, "planned %lld bytes, %.3fx the lower bound %lld",
                 (long long)p->arena_bytes, (double)p->arena_bytes / (double)p->lower_bound,
                 (long long)p->lower_bound);
        fail(what, msg);
    }
    if (!(xa = prepare(raw, NULL, err, sizeof err)) || !(xb = prepare(opt, p, err, sizeof err))) {
        fail(what, err);
        goto done;
    }
    /* folding batchnorm into weights rounds differently: 1e-5 then, else bits */
    double tol = 0;
    ir_for_each_node(opt, n)
        if (n->op == IR_OP_BN_FOLD_SCALE)
            tol = 1e-5;
    for (int run = 0; run < 2; run++) {
        if (rt_exec_run(xa, err, sizeof err) || rt_exec_run(xb, err, sizeof err)) {
            fail(what, err);
            goto done;
        }
        int ok = 1;
        for (int i = 0; i < raw->noutputs; i++)
            ok &= same(xa, raw->outputs[i].value, xb, opt->outputs[i].value, tol);
        if (raw->loss)
            ok &= same(xa, raw->loss, xb, opt->loss, tol);
        for (int i = 0; i < raw->nparams; i++)
            ok &= same(xa, raw->params[i], xb, ir_find_value(opt, raw->params[i]->name), 0);
        if (!ok) {
            snprintf(msg, sizeof msg, "the optimized program differs (run %d)", run + 1);
            fail(what, msg);
            goto done;
        }
    }
    passed++;
done:
    rt_exec_free(xa);
    rt_exec_free(xb);
    mp_plan_free(p);
    diag_free(&d);
}

static void models(const char *src)
{
    static const char *const names[] = {"lenet", "mlp", "resnet18"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (int train = 0; train < 2; train++) {
            char path[4096], what[128];
            snprintf(path, sizeof path, "%s/models/%s.net", src, names[i]);
            snprintf(what, sizeof what, "%s (%s)", names[i], train ? "training" : "inference");
            const char *dn[] = {"batch"}, *dv[] = {"4"};
            fe_options fo = {NULL, 1, dn, dv};
            ad_optimizer opt = ad_optimizer_default(AD_ADAM);
            ir_graph *g[2];
            diag d;
            diag_init(&d);
            for (int k = 0; k < 2; k++) {
                g[k] = fe_load_file(path, &fo, &d);
                if (g[k] && train)
                    ad_training_graph(g[k], &opt, &d);
            }
            if (!g[0] || !g[1] || d.nerrors) {
                diag_print(&d, stderr);
                fail(what, "does not load");
            } else {
                equivalent(what, g[0], g[1], 1.10, 0);
            }
            for (int k = 0; k < 2; k++)
                if (g[k])
                    ir_graph_free(g[k]);
            if (train) { /* and rematerialized: still the same bits */
                snprintf(what, sizeof what, "%s (training, --remat)", names[i]);
                for (int k = 0; k < 2; k++) {
                    g[k] = fe_load_file(path, &fo, &d);
                    if (g[k])
                        ad_training_graph(g[k], &opt, &d);
                }
                if (g[0] && g[1] && !d.nerrors)
                    equivalent(what, g[0], g[1], 1.10, 1);
                else
                    fail(what, "does not load");
                for (int k = 0; k < 2; k++)
                    if (g[k])
                        ir_graph_free(g[k]);
            }
            diag_free(&d);
        }
}

/* A random program: values v0.. of random shapes built by random ops. */
static char *random_program(uint64_t seed)
{
    rng = seed * 0x9e3779b97f4a7c15ull | 1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int64_t d0 = 1 + (int64_t)(uniform() * 4), d1 = 1 + (int64_t)(uniform() * 5),
            d2 = 2 + (int64_t)(uniform() * 6);
    fprintf(f, "model r() {\n    input x: f32[%lld, %lld, %lld]\n    input y: f32[%lld]\n",
            (long long)d0, (long long)d1, (long long)d2, (long long)d2);
    fprintf(f, "    v0 = x\n");
    int n = 1;
    static const char *const unary[] = {"relu", "sigmoid", "tanh",     "gelu",      "silu",
                                        "exp",  "abs",     "softplus", "hardswish", "elu",
                                        "leaky_relu", "-"};
    static const char *const binary[] = {"+", "-", "*", "maximum", "minimum", ">", "<="};
    for (int k = 0; k < 14; k++, n++) {
        int a = (int)(uniform() * n), b = (int)(uniform() * n);
        switch ((int)(uniform() * 9)) {
        case 0: case 1: {
            const char *u = unary[(int)(uniform() * (sizeof unary / sizeof *unary))];
            fprintf(f, "    v%d = %s(v%d)\n", n, u, a);
            if (u[0] == '-')
                fprintf(f, "    v%d = -v%d\n", n, a); /* redefined: the first is dead */
            break;
        }
        case 2: case 3: { /* all v have x's shape; y broadcasts along the last dim */
            const char *o = binary[(int)(uniform() * (sizeof binary / sizeof *binary))];
            if (o[0] >= 'a' && o[0] <= 'z')
                fprintf(f, "    v%d = %s(v%d, v%d)\n", n, o, a, b);
            else
                fprintf(f, "    v%d = v%d %s v%d\n", n, a, o, b);
            break;
        }
        case 4:
            if (uniform() < 0.5)
                fprintf(f, "    v%d = v%d * y + y\n", n, a);
            else /* a choice by a mask, and the unary ops with attributes */
                fprintf(f, "    v%d = where(v%d > y, clamp(v%d, min = -0.5, max = 1.5), "
                        "v%d ** 2) + gelu(v%d, approximate = \"tanh\")\n", n, a, a, b, b);
            break;
        case 5: /* identities and constants that fold */
            fprintf(f, "    v%d = (v%d * 1.0 + 0.0) * (2.0 * 0.5) - (1.0 - 1.0)\n", n, a);
            break;
        case 6: /* a reshape round trip and a double transpose */
            fprintf(f, "    v%d = transpose(transpose(reshape(reshape(v%d, [%lld, -1]), "
                    "v0.shape), [2, 0, 1]), [1, 2, 0])\n", n, a, (long long)d0);
            break;
        case 7: /* the same subexpression twice */
            fprintf(f, "    v%d = softmax(v%d, axis = %d) + softmax(v%d, axis = %d)\n", n, a,
                    (int)(uniform() * 3), a, (int)(uniform() * 3));
            break;
        default:
            fprintf(f, "    v%d = dense(v%d, %lld)\n", n, a, (long long)d2);
        }
    }
    fprintf(f, "    output out = v%d\n    output side = v%d\n}\n", n - 1, n / 2);
    fclose(f);
    return text;
}

static void random_graphs(int count)
{
    for (int s = 1; s <= count; s++) {
        char *src = random_program((uint64_t)s), what[64];
        snprintf(what, sizeof what, "random graph %d", s);
        diag d;
        diag_init(&d);
        ir_graph *a = fe_load_string(what, src, strlen(src), &(fe_options){0}, &d);
        ir_graph *b = fe_load_string(what, src, strlen(src), &(fe_options){0}, &d);
        if (!a || !b || d.nerrors) {
            diag_print(&d, stderr);
            fprintf(stderr, "%s", src);
            fail(what, "the generator made an invalid program");
        } else {
            equivalent(what, a, b, 1e9, 0);
        }
        if (a)
            ir_graph_free(a);
        if (b)
            ir_graph_free(b);
        diag_free(&d);
        free(src);
    }
}

/* ---------------------------------------------------------------- 4. attention */

static int count_op(const ir_graph *g, ir_op op, int *causal)
{
    int count = 0;
    ir_for_each_node(g, n)
        if (n->op == op) {
            count++;
            if (causal)
                *causal = (int)ir_attr_int(n, "causal");
        }
    return count;
}

/* The model `body` (its inputs declared in it), loaded twice: pass_attention
 * on one makes `want` attention nodes (causal as given), leaves no softmax
 * where it made any, and the graph verifies; both programs' outputs agree
 * within 1e-6 (|b| + rms(b)), the worst printed. */
static void attention_case(const char *what, const char *body, int want, int causal)
{
    char src[4096], msg[256], err[512];
    snprintf(src, sizeof src, "model m() {\n%s}\n", body);
    diag d;
    diag_init(&d);
    ir_graph *a = fe_load_string(what, src, strlen(src), &(fe_options){0}, &d);
    ir_graph *b = fe_load_string(what, src, strlen(src), &(fe_options){0}, &d);
    rt_exec *xa = NULL, *xb = NULL;
    int got = -1, is_causal = -1;
    if (!a || !b || d.nerrors) {
        diag_print(&d, stderr);
        fail(what, "does not load");
        goto done;
    }
    int made = pass_attention(b, &d);
    got = count_op(b, IR_OP_ATTENTION, &is_causal);
    if (made != want || got != want || (want && is_causal != causal)) {
        snprintf(msg, sizeof msg, "%d attention nodes (pass: %d, causal %d), want %d (causal %d)",
                 got, made, is_causal, want, causal);
        fail(what, msg);
        char *text = graph_text(b);
        fprintf(stderr, "%s", text);
        free(text);
        goto done;
    }
    if (ir_verify(b, &d) || (want && count_op(b, IR_OP_SOFTMAX, NULL))) {
        diag_print(&d, stderr);
        fail(what, "the rewritten graph does not verify, or keeps a softmax");
        goto done;
    }
    if (!(xa = prepare(a, NULL, err, sizeof err)) || !(xb = prepare(b, NULL, err, sizeof err)) ||
        rt_exec_run(xa, err, sizeof err) || rt_exec_run(xb, err, sizeof err)) {
        fail(what, err);
        goto done;
    }
    double worst = 0;
    for (int i = 0; i < a->noutputs; i++) {
        const ir_value *va = a->outputs[i].value, *vb = b->outputs[i].value;
        const float *p = rt_exec_data(xa, va), *q = rt_exec_data(xb, vb);
        int64_t n = ir_type_numel(&va->type);
        double rms = 0;
        for (int64_t k = 0; k < n; k++)
            rms += (double)p[k] * p[k] / (double)n;
        rms = sqrt(rms);
        for (int64_t k = 0; k < n; k++) {
            double e = fabs((double)p[k] - q[k]) / (fabs(p[k]) + rms);
            worst = e > worst || e != e ? e : worst;
        }
    }
    if (!(worst <= 1e-6)) {
        snprintf(msg, sizeof msg, "outputs differ by %.3g of (|x| + rms)", worst);
        fail(what, msg);
        goto done;
    }
    printf("attention %-24s %d fused, outputs within %.2g (|x| + rms)\n", what, got, worst);
    passed++;
done:
    rt_exec_free(xa);
    rt_exec_free(xb);
    if (a)
        ir_graph_free(a);
    if (b)
        ir_graph_free(b);
    diag_free(&d);
}

/* The unfused attention of the DSL in its variants, fused; what is not
 * attention (a fill of -1e4, another triangle, scores read twice, a mask or
 * scale that is not constant, ...) left alone. */
static void attention_cases(void)
{
#define QKV "    input q: f32[2, 3, 6, 8]\n    input k: f32[2, 3, 6, 8]\n" \
            "    input v: f32[2, 3, 6, 8]\n    kt = transpose(k, [0, 1, 3, 2])\n"
#define TRIL "tril(full([6, 6], 1.0))"
    attention_case("plain", QKV "output y = matmul(softmax(matmul(q, kt) * 8 ** -0.5), v)\n",
                   1, 0);
    attention_case("causal", QKV "s = where(" TRIL ", matmul(q, kt) * 8 ** -0.5, -1e9)\n"
                   "output y = matmul(softmax(s), v)\n", 1, 1);
    attention_case("causal-divided", QKV "s = where(" TRIL ", matmul(q, kt) / sqrt(8.0), -1e30)\n"
                   "output y = matmul(softmax(s), v)\n", 1, 1);
    attention_case("causal-additive", QKV "m = triu(full([6, 6], -1e9), 1)\n"
                   "output y = matmul(softmax(matmul(q, kt) * 0.3 + m), v)\n", 1, 1);
    attention_case("causal-additive-first", QKV "m = triu(full([6, 6], -1e12), 1)\n"
                   "output y = matmul(softmax(m + matmul(q, kt)), v)\n", 1, 1);
    attention_case("causal-inverted", QKV "s = where(triu(full([6, 6], 1.0), 1), -1e10, "
                   "matmul(q, kt))\noutput y = matmul(softmax(s * 0.25), v)\n", 1, 1);
    attention_case("scale-after-mask", QKV "s = where(" TRIL ", matmul(q, kt), -1e10) * 0.125\n"
                   "output y = matmul(softmax(s), v)\n", 1, 1);
    attention_case("scaled-q", QKV "output y = matmul(softmax(matmul(q * 0.35, kt)), v)\n", 1, 0);
    attention_case("scaled-both", QKV "c = 8 ** -0.25\n"
                   "output y = matmul(softmax(matmul(q * c, kt * c)), v)\n", 1, 0);
    attention_case("gpt", "    input x: f32[2, 6, 24]\n"
                   "    q = transpose(reshape(x, [2, 6, 3, 8]), [0, 2, 1, 3])\n"
                   "    k = transpose(reshape(x * 0.5, [2, 6, 3, 8]), [0, 2, 3, 1])\n"
                   "    v = transpose(reshape(x - 0.5, [2, 6, 3, 8]), [0, 2, 1, 3])\n"
                   "    s = where(" TRIL ", matmul(q, k) * 8 ** -0.5, -1e9)\n"
                   "    y = transpose(matmul(softmax(s), v), [0, 2, 1, 3])\n"
                   "    output y = reshape(y, [2, 6, 24])\n", 1, 1);
    attention_case("kt-input", "    input q: f32[2, 5, 4]\n    input kt: f32[2, 4, 7]\n"
                   "    input v: f32[2, 7, 3]\n"
                   "    s = where(tril(full([5, 7], 1.0)), matmul(q, kt), -1e9)\n"
                   "    output y = matmul(softmax(s), v)\n", 1, 1);
    attention_case("rank2", "    input q: f32[5, 4]\n    input k: f32[9, 4]\n"
                   "    input v: f32[9, 2]\n"
                   "    output y = matmul(softmax(matmul(q, transpose(k, [1, 0])) * 0.5), v)\n", 1, 0);
    attention_case("two-layers", QKV "a = matmul(softmax(matmul(q, kt) * 0.3), v)\n"
                   "s = where(" TRIL ", matmul(a, transpose(a, [0, 1, 3, 2])), -1e9)\n"
                   "output y = matmul(softmax(s), v)\n", 2, 1);
    attention_case("fill-1e4", QKV "s = where(" TRIL ", matmul(q, kt), -1e4)\n"
                   "output y = matmul(softmax(s), v)\n", 0, 0);
    attention_case("upper-mask", QKV "s = where(triu(full([6, 6], 1.0)), matmul(q, kt), -1e9)\n"
                   "output y = matmul(softmax(s), v)\n", 0, 0);
    attention_case("diagonal-1", QKV "s = where(tril(full([6, 6], 1.0), 1), matmul(q, kt), -1e9)\n"
                   "output y = matmul(softmax(s), v)\n", 0, 0);
    attention_case("additive-1e4", QKV "m = triu(full([6, 6], -1e4), 1)\n"
                   "output y = matmul(softmax(matmul(q, kt) + m), v)\n", 0, 0);
    attention_case("scores-twice", QKV "s = matmul(q, kt) * 0.3\n"
                   "output y = matmul(softmax(s), v)\n    output z = relu(s)\n", 0, 0);
    attention_case("scores-output", QKV "s = matmul(q, kt)\n"
                   "output y = matmul(softmax(s), v)\n    output s\n", 0, 0);
    attention_case("probs-twice", QKV "p = softmax(matmul(q, kt))\n"
                   "output y = matmul(p, v) + matmul(p, v * 2.0)\n", 0, 0);
    attention_case("other-axis", QKV "output y = matmul(softmax(matmul(q, kt), axis = 2), v)\n",
                   0, 0);
    attention_case("input-mask", QKV "    input m: f32[6, 6]\n"
                   "output y = matmul(softmax(where(m, matmul(q, kt), -1e9)), v)\n", 0, 0);
    attention_case("input-scale", QKV "    input c: f32[]\n"
                   "output y = matmul(softmax(matmul(q, kt) * c), v)\n", 0, 0);
    attention_case("negative-scale", QKV "output y = matmul(softmax(matmul(q, kt) * -0.5), v)\n",
                   0, 0);
    attention_case("mask-fill-1e9-scaled", QKV "s = where(" TRIL ", matmul(q, kt), -1e9) * 0.5\n"
                   "output y = matmul(softmax(s), v)\n", 0, 0);
    attention_case("shared-keys", "    input q: f32[2, 3, 6, 8]\n    input kt: f32[8, 6]\n"
                   "    input v: f32[2, 3, 6, 8]\n"
                   "    output y = matmul(softmax(matmul(q, kt)), v)\n", 0, 0);
#undef QKV
#undef TRIL
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_passes SOURCE_DIR\n");
        return 2;
    }
    pass_files(argv[1]);
    models(argv[1]);
    random_graphs(200);
    attention_cases();
    printf("test_passes: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
