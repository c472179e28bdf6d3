/* Every differentiable op's gradient against central finite differences in
 * float64.
 *
 * Each case is a small .net model whose operands are trainable tensors
 * (param(...)), ending in a scalar loss.  autodiff makes its training step; the
 * executor runs it in float32 (learning rate 0) and yields every parameter's
 * gradient.  The reference evaluates the same training-mode forward pass in
 * float64 with the op definitions of tests/ref64.c (batchnorm on batch
 * statistics; dropout with the mask the executor drew), and differentiates it
 * numerically: (L(p + h) - L(p - h)) / 2h with h = 1e-5 (1 + |p|), whose error
 * is near 1e-10 here.  The float32 gradient must agree within
 * 1e-3 (|fd| + rms(fd)) + 1e-6: float32 rounding is about 1e-6 relative, a wrong
 * rule is off by O(1).  Every differentiable op must be covered.
 *
 *   test_fd */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "frontend.h"
#include "passes.h"
#include "ref64.h"

static int failures, checks;
static int covered[IR_NOPS];

/* Runs x (g's executor), counting g's ops as covered; 0, or -1 after a
 * failure is reported. */
static int run_counted(const ir_graph *g, rt_exec *x, const char *name)
{
    char err[256];
    ir_for_each_node(g, n)
        covered[n->op]++;
    if (rt_exec_run(x, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "FAIL: %s: %s\n", name, err);
    failures++;
    return -1;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* The batch statistics of x[n, c, ...]: mean and biased variance per channel. */
static void batch_stats(const double *x, const ir_type *t, double *mean, double *var)
{
    int64_t c = t->dims[1], inner = ir_type_numel(t) / (t->dims[0] * c);
    for (int64_t ch = 0; ch < c; ch++) {
        double s = 0, ss = 0, n = (double)(t->dims[0] * inner);
        for (int64_t i = 0; i < t->dims[0]; i++)
            for (int64_t k = 0; k < inner; k++)
                s += x[(i * c + ch) * inner + k];
        mean[ch] = s / n;
        for (int64_t i = 0; i < t->dims[0]; i++)
            for (int64_t k = 0; k < inner; k++) {
                double d = x[(i * c + ch) * inner + k] - mean[ch];
                ss += d * d;
            }
        var[ch] = ss / n;
    }
}

static int64_t *as_int(const double *v, int64_t n)
{
    int64_t *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (int64_t)v[i];
    return p;
}

/* The loss of g's training-mode forward pass in float64.  vals holds the inputs,
 * parameters and dropout masks; node results are computed into it. */
static double forward64(const ir_graph *g, double **vals)
{
    for (const ir_node *n = g->head; n; n = n->next) {
        const ir_type *ta = n->nin ? &n->in[0]->type : NULL, *tb = n->nin > 1 ? &n->in[1]->type : NULL;
        double *a = n->nin ? vals[n->in[0]->id] : NULL, *b = n->nin > 1 ? vals[n->in[1]->id] : NULL;
        ir_type t;
        double *o = NULL;
        switch (n->op) {
        case IR_OP_CONST:
            o = ref_const(&n->out[0]->type, ir_attr_float(n, "value"));
            break;
        case IR_OP_SUM_TO: { /* each element into the one of its coordinates, 0 where
                                the result's dimension is 1, leading ones dropped */
            const ir_type *to = &n->out[0]->type;
            o = calloc((size_t)ir_type_numel(to) + 1, sizeof *o);
            for (int64_t i = 0; i < ir_type_numel(ta); i++) {
                int64_t co[IR_MAX_RANK], r = i, at = 0;
                for (int k = ta->rank - 1; k >= 0; k--)
                    co[k] = r % ta->dims[k], r /= ta->dims[k];
                for (int k = 0; k < to->rank; k++)
                    at = at * to->dims[k] + (to->dims[k] == 1 ? 0 : co[k + ta->rank - to->rank]);
                o[at] += a[i];
            }
            break;
        }
        case IR_OP_BROADCAST_TO: { /* each element from the one of its coordinates, 0
                                      where a's dimension is 1, a aligned at the right */
            const ir_type *to = &n->out[0]->type;
            o = malloc((size_t)ir_type_numel(to) * sizeof *o);
            for (int64_t i = 0; i < ir_type_numel(to); i++) {
                int64_t co[IR_MAX_RANK], r = i, at = 0;
                for (int k = to->rank - 1; k >= 0; k--)
                    co[k] = r % to->dims[k], r /= to->dims[k];
                for (int k = 0; k < ta->rank; k++)
                    at = at * ta->dims[k] + (ta->dims[k] == 1 ? 0 : co[k + to->rank - ta->rank]);
                o[i] = a[at];
            }
            break;
        }
        case IR_OP_DROPOUT_TRAIN: { /* y = x * mask, the executor's mask */
            const double *mask = vals[n->out[1]->id];
            o = malloc((size_t)ir_type_numel(ta) * sizeof *o);
            for (int64_t i = 0; i < ir_type_numel(ta); i++)
                o[i] = a[i] * mask[i];
            break;
        }
        case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_MAXIMUM:
        case IR_OP_MINIMUM: case IR_OP_GT: case IR_OP_LT: case IR_OP_GE: case IR_OP_LE:
        case IR_OP_EQ: case IR_OP_NE:
            o = ref_binary(n->op, a, ta, b, tb, &t);
            break;
        case IR_OP_WHERE:
            o = ref_where(a, ta, b, tb, vals[n->in[2]->id], &n->in[2]->type, &t);
            break;
        case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_ARGMAX:
            o = ref_extreme(n->op, a, ta, (int)ir_attr_int(n, "axis"), &t);
            break;
        case IR_OP_MATMUL:
            o = ref_matmul(a, ta, b, tb, &t);
            break;
        case IR_OP_DENSE:
            o = ref_dense(a, ta, b, tb, n->nin == 3 ? vals[n->in[2]->id] : NULL, &t);
            break;
        case IR_OP_CONV2D:
            o = ref_conv2d(a, ta, b, tb, n->nin == 3 ? vals[n->in[2]->id] : NULL,
                           ir_attr_ints(n, "stride", NULL), ir_attr_ints(n, "pad", NULL),
                           ir_attr_ints(n, "dilation", NULL), ir_attr_int(n, "groups"), &t);
            break;
        case IR_OP_CONV2D_GRAD_INPUT: /* conv_transpose2d */
            o = ref_conv_transpose2d(a, ta, b, tb, ir_attr_ints(n, "stride", NULL),
                                     ir_attr_ints(n, "pad", NULL), ir_attr_ints(n, "dilation", NULL),
                                     ir_attr_int(n, "groups"), ir_attr_ints(n, "shape", NULL));
            break;
        case IR_OP_BATCHNORM_TRAIN: {
            int64_t c = ta->dims[1];
            double *mean = malloc((size_t)c * sizeof *mean), *var = malloc((size_t)c * sizeof *var);
            batch_stats(a, ta, mean, var);
            o = ref_batchnorm(a, ta, b, vals[n->in[2]->id], mean, var, ir_attr_float(n, "eps"));
            free(mean);
            free(var);
            break;
        }
        case IR_OP_LAYERNORM:
            o = ref_layernorm(a, ta, b, vals[n->in[2]->id], tb, ir_attr_float(n, "eps"));
            break;
        case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX:
            o = ref_softmax(a, ta, (int)ir_attr_int(n, "axis"), n->op == IR_OP_LOG_SOFTMAX);
            break;
        case IR_OP_ATTENTION:
            o = ref_attention(a, ta, b, tb, vals[n->in[2]->id], &n->in[2]->type,
                              (int)ir_attr_int(n, "causal"), ir_attr_float(n, "scale"), NULL);
            break;
        case IR_OP_MAXPOOL2D:
            o = ref_maxpool2d(a, ta, ir_attr_ints(n, "kernel", NULL), ir_attr_ints(n, "stride", NULL),
                              ir_attr_ints(n, "pad", NULL), ir_attr_ints(n, "dilation", NULL),
                              (int)ir_attr_int(n, "ceil_mode"), &t);
            break;
        case IR_OP_AVGPOOL2D:
            o = ref_avgpool2d(a, ta, ir_attr_ints(n, "kernel", NULL), ir_attr_ints(n, "stride", NULL),
                              ir_attr_ints(n, "pad", NULL), (int)ir_attr_int(n, "count_include_pad"),
                              (int)ir_attr_int(n, "ceil_mode"), &t);
            break;
        case IR_OP_GLOBAL_AVGPOOL:
            o = ref_global_avgpool(a, ta, &t);
            break;
        case IR_OP_ADAPTIVE_AVGPOOL2D:
            o = ref_adaptive_avgpool2d(a, ta, ir_attr_ints(n, "size", NULL), &t);
            break;
        case IR_OP_UPSAMPLE2D: {
            double sc[2] = {ir_attr_float(n, "scale_h"), ir_attr_float(n, "scale_w")};
            o = ref_upsample2d(a, ta, ir_attr_ints(n, "size", NULL), (int)ir_attr_int(n, "mode"),
                               (int)ir_attr_int(n, "align_corners"), sc, &t);
            break;
        }
        case IR_OP_RESHAPE: {
            int count;
            const int64_t *shape = ir_attr_ints(n, "shape", &count);
            o = ref_reshape(a, ta, count, shape, &t);
            break;
        }
        case IR_OP_TRANSPOSE:
            o = ref_transpose(a, ta, ir_attr_ints(n, "perm", NULL), &t);
            break;
        case IR_OP_SLICE:
            o = ref_slice(a, ta, (int)ir_attr_int(n, "axis"), ir_attr_int(n, "start"),
                          ir_attr_int(n, "size"), &t);
            break;
        case IR_OP_CONCAT: {
            const double *xs[64];
            ir_type ts[64];
            for (int i = 0; i < n->nin; i++)
                xs[i] = vals[n->in[i]->id], ts[i] = n->in[i]->type;
            o = ref_concat(n->nin, xs, ts, (int)ir_attr_int(n, "axis"), &t);
            break;
        }
        case IR_OP_ARANGE:
            t = n->out[0]->type;
            o = malloc((size_t)ir_type_numel(&t) * sizeof *o);
            for (int64_t i = 0; i < ir_type_numel(&t); i++)
                o[i] = ir_attr_float(n, "start") + (double)i * ir_attr_float(n, "step");
            break;
        case IR_OP_CAST:
            t = n->out[0]->type;
            o = malloc((size_t)ir_type_numel(&t) * sizeof *o);
            for (int64_t i = 0; i < ir_type_numel(&t); i++)
                o[i] = ref_cast(a[i], ta->dtype, t.dtype);
            break;
        case IR_OP_PAD:
            o = ref_pad(a, ta, ir_attr_ints(n, "before", NULL), ir_attr_ints(n, "after", NULL),
                        ir_attr_float(n, "value"), &t);
            break;
        case IR_OP_EMBEDDING: {
            int64_t *idx = as_int(a, ir_type_numel(ta));
            o = ref_embedding(idx, ta, b, tb, &t);
            free(idx);
            break;
        }
        case IR_OP_CROSS_ENTROPY: {
            int64_t *lab = as_int(b, ir_type_numel(tb));
            o = malloc(sizeof *o);
            *o = ref_cross_entropy(a, ta, lab, ir_attr_float(n, "label_smoothing"),
                                   ir_attr_int(n, "ignore_index"));
            free(lab);
            break;
        }
        case IR_OP_NLL_LOSS: {
            int64_t *lab = as_int(b, ir_type_numel(tb));
            o = malloc(sizeof *o);
            *o = ref_nll_loss(a, ta, lab, ir_attr_int(n, "ignore_index"));
            free(lab);
            break;
        }
        case IR_OP_MSE:
            o = malloc(sizeof *o);
            *o = ref_mse(a, b, ir_type_numel(ta));
            break;
        default: {
            double at[2];
            if (ir_arith_attrs(n->op) < 0 || !ir_op_is(n->op, IR_UNARY)) {
                fprintf(stderr, "test_fd: no float64 forward for %s\n", ir_ops[n->op].name);
                exit(1);
            }
            ir_float_attrs(n, at, 2); /* a unary op of ops.def's UNARY table */
            o = ref_unary(n->op, a, ta, at[0], at[1]);
        }
        }
        free(vals[n->out[0]->id]);
        vals[n->out[0]->id] = o;
        if (n->out[0] == g->loss)
            return o[0];
    }
    return NAN;
}

static const ir_value *grad_of(const ir_graph *g, const ir_value *p)
{
    ir_for_each_node(g, n)
        if (n->op == IR_OP_SGD && n->in[0] == p)
            return n->in[1];
    return NULL;
}

static void run_case(const char *name, const char *src, int64_t bound)
{
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    ir_graph *g = fe_load_string(name, src, strlen(src), &(fe_options){0}, &d);
    if (!g || ad_training_graph(g, &opt, &d) != 0 || ir_verify(g, &d) != 0) {
        fprintf(stderr, "FAIL: %s does not load:\n", name);
        diag_print(&d, stderr);
        failures++;
        diag_free(&d);
        if (g)
            ir_graph_free(g);
        return;
    }
    diag_free(&d);
    char err[256];
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    double **vals = calloc((size_t)g->nvalues, sizeof *vals);
    /* random inputs and parameters, the same in both precisions */
    const ir_value *leaves[256];
    int nleaves = 0;
    for (int i = 0; i < g->ninputs; i++)
        leaves[nleaves++] = g->inputs[i];
    for (int i = 0; i < g->nparams; i++)
        leaves[nleaves++] = g->params[i];
    for (int i = 0; i < nleaves; i++) {
        const ir_value *v = leaves[i];
        int64_t n = ir_type_numel(&v->type);
        double *r = vals[v->id] = calloc((size_t)(n ? n : 1), sizeof *r);
        void *p = rt_exec_data(x, v);
        for (int64_t k = 0; k < n; k++) {
            if (v->type.dtype == IR_I32)
                r[k] = ((int32_t *)p)[k] = (int32_t)(uniform() * (double)bound);
            else if (v->type.dtype == IR_I64 && strcmp(v->name, AD_INPUT_SEED) == 0)
                r[k] = (double)(((int64_t *)p)[k] = 12345);
            else if (v->type.dtype == IR_I64)
                r[k] = (double)(((int64_t *)p)[k] = (int64_t)(uniform() * (double)bound));
            else if (strcmp(v->name, AD_INPUT_LR) == 0 || v->kind == IR_VALUE_STATE)
                r[k] = ((float *)p)[k] = 0;
            else
                r[k] = ((float *)p)[k] = (float)(2 * uniform() - 1);
        }
    }
    if (run_counted(g, x, name) != 0)
        goto done;
    /* the executor's dropout masks, for the reference */
    ir_for_each_node(g, n)
        if (n->op == IR_OP_DROPOUT_TRAIN) {
            int64_t len = ir_type_numel(&n->out[1]->type);
            const float *m = rt_exec_data(x, n->out[1]);
            vals[n->out[1]->id] = malloc((size_t)len * sizeof(double));
            for (int64_t i = 0; i < len; i++)
                vals[n->out[1]->id][i] = m[i];
        }
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *p = g->params[i], *dp = grad_of(g, p);
        if (p->kind != IR_VALUE_PARAM)
            continue;
        if (!dp) {
            fprintf(stderr, "FAIL: %s: %s has no gradient\n", name, p->name);
            failures++;
            continue;
        }
        const float *gr = rt_exec_data(x, dp);
        int64_t n = ir_type_numel(&p->type), samples = n < 12 ? n : 12;
        double *pv = vals[p->id], fd[12], rms = 0;
        int64_t at[12];
        for (int64_t s = 0; s < samples; s++) {
            at[s] = samples == n ? s : (int64_t)(uniform() * (double)n);
            double keep = pv[at[s]], h = 1e-5 * (1 + fabs(keep));
            pv[at[s]] = keep + h;
            double lp = forward64(g, vals);
            pv[at[s]] = keep - h;
            double lm = forward64(g, vals);
            pv[at[s]] = keep;
            fd[s] = (lp - lm) / (2 * h);
            rms += fd[s] * fd[s] / (double)samples;
        }
        rms = sqrt(rms);
        for (int64_t s = 0; s < samples; s++) {
            checks++;
            if (!(fabs(gr[at[s]] - fd[s]) <= 1e-3 * (fabs(fd[s]) + rms) + 1e-6)) {
                failures++;
                fprintf(stderr, "FAIL: %s: d loss / d %s[%lld]: got %.9g, finite differences "
                        "%.9g\n", name, p->name, (long long)at[s], gr[at[s]], fd[s]);
            }
        }
    }
done:
    for (int i = 0; i < g->nvalues; i++)
        free(vals[i]);
    free(vals);
    rt_exec_free(x);
    ir_graph_free(g);
}

/* The gradients where finite differences cannot go: at ties, bounds and NaNs.
 * Parameters a, b, c, d of 6 elements take the given values; every gradient
 * element must be exactly its expected value. */
static void exact_case(const char *name, const char *src, const float vals[4][6],
                       const float want[4][6])
{
    static const char *const names[4] = {"a", "b", "c", "d"};
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    ir_graph *g = fe_load_string(name, src, strlen(src), &(fe_options){0}, &d);
    char err[256];
    rt_exec *x = NULL;
    if (!g || ad_training_graph(g, &opt, &d) != 0 || ir_verify(g, &d) != 0 ||
        !(x = rt_exec_new(g, err, sizeof err))) {
        fprintf(stderr, "FAIL: %s does not load:\n", name);
        diag_print(&d, stderr);
        failures++;
        goto done;
    }
    for (int i = 0; i < g->nparams; i++) {
        for (int k = 0; k < 4; k++)
            if (strcmp(g->params[i]->name, names[k]) == 0)
                memcpy(rt_exec_data(x, g->params[i]), vals[k], sizeof vals[k]);
    }
    for (int i = 0; i < g->ninputs; i++)
        memset(rt_exec_data(x, g->inputs[i]), 0, ir_type_bytes(&g->inputs[i]->type));
    if (run_counted(g, x, name) != 0)
        goto done;
    for (int i = 0; i < g->nparams; i++)
        for (int k = 0; k < 4; k++) {
            const ir_value *p = g->params[i], *dp = grad_of(g, p);
            if (strcmp(p->name, names[k]) != 0)
                continue;
            const float *gr = dp ? rt_exec_data(x, dp) : NULL;
            for (int j = 0; j < 6; j++) {
                checks++;
                if (!gr || gr[j] != want[k][j]) {
                    failures++;
                    fprintf(stderr, "FAIL: %s: d loss / d %s[%d] at %g: got %.9g, expected %g\n",
                            name, p->name, j, vals[k][j], gr ? gr[j] : NAN, want[k][j]);
                }
            }
        }
done:
    diag_free(&d);
    rt_exec_free(x);
    if (g)
        ir_graph_free(g);
}

/* dropout2d in training: each (sample, channel) plane of y is all 0 or all
 * x / (1 - p), both kinds present (nn.Dropout2d's channel masks). */
static void dropout2d_planes(void)
{
    static const char src[] = "model t() {\n  input t: f32[4, 8, 3, 3]\n"
                              "  x = param(\"x\", [4, 8, 3, 3], init = uniform(1, 2))\n"
                              "  y = dropout2d(x, p = 0.5)\n  output y\n  loss mse(y, t)\n}\n";
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    ir_graph *g = fe_load_string("dropout2d", src, strlen(src), &(fe_options){0}, &d);
    char err[256];
    rt_exec *x = NULL;
    checks++;
    if (!g || ad_training_graph(g, &opt, &d) != 0 || !(x = rt_exec_new(g, err, sizeof err))) {
        fprintf(stderr, "FAIL: dropout2d planes: does not load\n");
        diag_print(&d, stderr);
        failures++;
        goto done;
    }
    rt_exec_init_params(x, 3);
    for (int i = 0; i < g->ninputs; i++)
        memset(rt_exec_data(x, g->inputs[i]), 0, ir_type_bytes(&g->inputs[i]->type));
    if (run_counted(g, x, "dropout2d planes") != 0)
        goto done;
    const float *xv = rt_exec_data(x, ir_find_value(g, "x"));
    const float *yv = rt_exec_data(x, g->outputs[0].value);
    int zero = 0, kept = 0, mixed = 0;
    for (int plane = 0; plane < 32; plane++) {
        int z = 0, k = 0;
        for (int i = plane * 9; i < plane * 9 + 9; i++) {
            z += yv[i] == 0;
            k += yv[i] == xv[i] * 2.0f;
        }
        zero += z == 9, kept += k == 9, mixed += z != 9 && k != 9;
    }
    if (mixed || !zero || !kept) {
        failures++;
        fprintf(stderr, "FAIL: dropout2d planes: %d zeroed, %d kept, %d neither\n", zero, kept,
                mixed);
    }
done:
    diag_free(&d);
    rt_exec_free(x);
    if (g)
        ir_graph_free(g);
}

#define M(body) "model t() {\n" body "\n}\n"
#define P(name, shape) name " = param(\"" name "\", " shape ")\n"

int main(void)
{
    run_case("unary", M("input t: f32[4, 6]\n" P("p", "[4, 6]")
                        "y = relu(p) + sigmoid(p) * tanh(p) - gelu(p) + silu(p) + -p\n"
                        "loss mse(y, t)"), 0);
    /* log, sqrt and rsqrt of p * p + 0.5 (positive); abs, hardswish and
       softsign away from their kinks as the random p lands */
    run_case("unary2", M("input t: f32[4, 6]\n" P("p", "[4, 6]")
                         "q = p * p + 0.5\n"
                         "y = exp(p) + log(q) - sqrt(q) * rsqrt(q + 1.0) + abs(p) + softplus(p)"
                         " + hardswish(p * 4.0) + leaky_relu(p, slope = 0.2)"
                         " + elu(p, alpha = 0.7) + softsign(p * 2.0)\n"
                         "loss mse(y, t)"), 0);
    /* one dense layer called twice (share): its gradient sums both uses */
    run_case("shared", M("input t: f32[4, 3]\n" P("a", "[4, 8]") P("b", "[4, 8]")
                         "ea = dense(a, 3, name = \"enc\")\n"
                         "eb = dense(tanh(b), 3, share = \"enc\")\n"
                         "loss mse(ea * eb, t)"), 0);
    /* sums and means over axes, and the losses made of them */
    run_case("reductions", M("input t: f32[3]\n" P("a", "[3, 4, 2]") P("b", "[3, 4, 2]")
                             "s = sum(a * a, axis = [1, 2]) +"
                             " sum(mean(b, axis = 1, keepdims = true), axis = [1, 2])\n"
                             "loss mse(s, t) + l1_loss(a, b) + bce_with_logits(a, sigmoid(b))"),
             0);
    run_case("dropout", M("input t: f32[8, 16]\n" P("p", "[8, 16]")
                          "loss mse(dropout(p, p = 0.3), t)"), 0);
    run_case("dropout2d", M("input t: f32[4, 6, 3, 2]\n" P("p", "[4, 6, 3, 2]")
                            "loss mse(dropout2d(p * 2.0, p = 0.4), t)"), 0);
    dropout2d_planes();
    run_case("binary", M("input t: f32[2, 3, 4]\n" P("a", "[2, 3, 4]") P("b", "[3, 1]")
                         P("c", "[4]")
                         "y = (a + b) * c - a / (b * b + 1.0) + c / 2.0 - 1.0\n"
                         "loss mse(y, t)"), 0);
    run_case("matmul", M("input t: f32[2, 3, 5]\n" P("a", "[2, 3, 4]") P("b", "[4, 5]")
                         P("c", "[2, 5, 5]")
                         "loss mse(matmul(matmul(a, b), c), t)"), 0);
    run_case("dense", M("input t: f32[2, 3, 5]\n" P("x", "[2, 3, 4]")
                        "loss mse(dense(dense(x, 6), 5, bias = false), t)"), 0);
    run_case("conv2d", M("input t: f32[2, 4, 4, 2]\n" P("x", "[2, 4, 7, 6]")
                         "y = conv2d(x, 6, kernel = 3, stride = [2, 1], pad = [1, 0], groups = 2)\n"
                         "loss mse(conv2d(y, 4, kernel = [1, 2], dilation = 2, bias = false), t)"), 0);
    run_case("conv2d-1x1", M("input t: f32[2, 3, 5, 5]\n" P("x", "[2, 4, 5, 5]")
                             "loss mse(conv2d(x, 3, kernel = 1), t)"), 0);
    /* conv_transpose2d (conv2d_grad_input and a bias) feeding another, with an
       output_padding, dilation and groups; conv1d (reshapes around conv2d) */
    run_case("conv_transpose2d", M("input t: f32[2, 3, 8, 8]\n" P("x", "[2, 4, 4, 3]")
                                   "y = conv_transpose2d(x, 6, kernel = 3, stride = 2, pad = 1, "
                                   "output_padding = [1, 0], dilation = [1, 2], groups = 2)\n"
                                   "loss mse(conv_transpose2d(y, 3, kernel = [1, 2], "
                                   "bias = false), t)"), 0);
    run_case("conv1d", M("input t: f32[2, 4, 3]\n" P("x", "[2, 4, 9]")
                         "y = conv1d(x, 6, kernel = 3, stride = 2, pad = 1, groups = 2)\n"
                         "loss mse(conv1d(y, 4, kernel = 2, dilation = 2, bias = false), t)"), 0);
    run_case("batchnorm", M("input t: f32[4, 3, 2, 5]\n" P("x", "[4, 3, 2, 5]")
                            "loss mse(batchnorm(x) * x, t)"), 0);
    run_case("batchnorm-2d", M("input t: f32[6, 4]\n" P("x", "[6, 4]")
                               "loss mse(batchnorm(x, eps = 0.01), t)"), 0);
    run_case("layernorm", M("input t: f32[3, 4, 5]\n" P("x", "[3, 4, 5]")
                            "loss mse(layernorm(x, dims = 2) + layernorm(x), t)"), 0);
    run_case("norms", M("input t: f32[2, 4, 3, 2]\n" P("x", "[2, 4, 3, 2]")
                        "y = groupnorm(x, 2) + instancenorm(x, affine = true)"
                        " * layernorm(x, dims = 3, affine = false)\n"
                        "loss mse(y + batchnorm(x * 2.0, affine = false), t)"), 0);
    run_case("softmax", M("input t: f32[3, 4, 5]\n" P("x", "[3, 4, 5]")
                          "loss mse(softmax(x, axis = 1) + log_softmax(x * 3.0), t)"), 0);
    /* attention: causal over one length; not causal with more keys than
       queries and values of another width, the scale given; causal with
       fewer keys than queries (the last rows see every key) */
    run_case("attention", M("input t: f32[2, 3, 5, 4]\n" P("q", "[2, 3, 5, 4]")
                            P("k", "[2, 3, 5, 4]") P("v", "[2, 3, 5, 4]")
                            "loss mse(scaled_dot_product_attention(q * 2.0, k, v, causal = true), t)"),
             0);
    run_case("attention-cross", M("input t: f32[2, 4, 3]\ninput u: f32[2, 4, 3]\n"
                                  P("q", "[2, 4, 6]") P("k", "[2, 7, 6]") P("v", "[2, 7, 3]")
                                  "loss mse(scaled_dot_product_attention(q, k, v, scale = 0.8), t)"
                                  " + mse(scaled_dot_product_attention(q, k[:, 0:3] * 1.5, v[:, 0:3],"
                                  " causal = true), u)"),
             0);
    /* grouped-query attention: 4 query heads over 2 key heads, causal, and 6
       over 1 at rank 3 (the batch the heads): dk and dv sum their groups */
    run_case("attention-gqa", M("input t: f32[2, 4, 5, 3]\ninput u: f32[6, 4, 3]\n"
                                P("q", "[2, 4, 5, 4]") P("k", "[2, 2, 6, 4]") P("v", "[2, 2, 6, 3]")
                                P("a", "[6, 4, 5]") P("b", "[1, 7, 5]") P("c", "[1, 7, 3]")
                                "loss mse(scaled_dot_product_attention(q * 2.0, k, v, causal = true,"
                                " enable_gqa = true), t)"
                                " + mse(scaled_dot_product_attention(a, b * 1.5, c,"
                                " enable_gqa = true), u)"),
             0);
    run_case("pooling", M("input t: f32[2, 3, 4, 4]\n" P("x", "[2, 3, 8, 7]")
                          "a = maxpool2d(x, 3, stride = 2, pad = 1)\n"
                          "b = avgpool2d(x, 3, stride = 2, pad = 1)\n"
                          "c = avgpool2d(x, 3, stride = 2, pad = 1, count_include_pad = false)\n"
                          "loss mse(a + b * c + global_avgpool(x), t)"), 0);
    run_case("pooling-ceil", M("input t: f32[2, 3, 5, 5]\n" P("x", "[2, 3, 8, 8]")
                               "a = maxpool2d(x, 3, stride = 2, pad = 1, ceil_mode = true)\n"
                               "b = avgpool2d(x, 3, stride = 2, pad = 1, ceil_mode = true)\n"
                               "c = avgpool2d(x, 3, stride = 2, pad = 1, count_include_pad = false,"
                               " ceil_mode = true)\n"
                               "loss mse(a + b * c, t)"), 0);
    run_case("pooling-ceil-past", M("input t: f32[1, 2, 3, 4]\n" P("x", "[1, 2, 8, 8]")
                                    "a = maxpool2d(x, 3, stride = [3, 2], ceil_mode = true)\n"
                                    "b = avgpool2d(x, 3, stride = [3, 2], ceil_mode = true)\n"
                                    "loss mse(a * b, t)"), 0);
    run_case("adaptive-avgpool", M("input t: f32[2, 3, 4, 5]\n" P("x", "[2, 3, 9, 7]")
                                   P("y", "[2, 3, 3, 2]")
                                   "a = adaptive_avgpool2d(x, [4, 5])\n"
                                   "b = adaptive_avgpool2d(y, size = [4, 5])\n"
                                   "loss mse(a * b + adaptive_avgpool2d(x, [1, 5]) "
                                   "* adaptive_avgpool2d(x, 1), t)"), 0);
    run_case("upsample", M("input t: f32[2, 3, 6, 10]\n" P("x", "[2, 3, 3, 5]")
                           "a = upsample(x, scale = 2)\n"
                           "b = upsample(x, size = [6, 10])\n"
                           "c = upsample(upsample(x, scale = [1, 2]), scale = [2.0, 1])\n"
                           "loss mse(a * a + b * 3.0 + c * c * c, t)"), 0);
    /* fractional nearest (several outputs read one input, some none) and bilinear
       both ways, up and down */
    run_case("upsample-fractional", M("input t: f32[2, 3, 7, 8]\n" P("x", "[2, 3, 5, 6]")
                                      "a = upsample(x, size = [7, 8])\n"
                                      "b = upsample(x, scale = [1.5, 1.4], mode = \"bilinear\")\n"
                                      "c = upsample(x, size = [7, 8], mode = \"bilinear\", "
                                      "align_corners = true)\n"
                                      "d = upsample(upsample(x, scale = 0.7), size = [7, 8], "
                                      "mode = \"bilinear\")\n"
                                      "loss mse(a * a + b * c + d * d * d, t)"), 0);
    run_case("maxpool-dilated", M("input t: f32[1, 2, 4, 3]\n" P("x", "[1, 2, 6, 5]")
                                  "loss mse(maxpool2d(x, 2, stride = 1, dilation = [2, 2]), t)"), 0);
    run_case("movement", M("input t: f32[5, 4, 8]\n" P("x", "[2, 3, 4, 5]") P("y", "[5, 4, 2]")
                           "z = transpose(reshape(x, [6, 4, 5]), [2, 1, 0])\n"
                           "loss mse(concat([z, y], axis = 2) * 1.5, t)"), 0);
    /* indexing, split, chunk, stack, squeeze, unsqueeze, expand, every pad mode
       and matmul with vectors: slices, reshapes, concats and broadcasts */
    run_case("shaping", M("input t: f32[4, 3]\n" P("x", "[4, 6, 5]") P("v", "[5]")
                          "a, b = split(x, [2, 4], axis = 1)\n"
                          "s = sum(x[:, 1:4, ::2], axis = 2) * sum(x[-1, 1::3, 2])\n"
                          "u = sum(stack([a[:, 0], a[:, 1]], axis = 1)"
                          " * squeeze(unsqueeze(b, 0), 0)[:, 1:3, :], axis = 2)\n"
                          "p = pad(x, [2, 1], mode = \"reflect\")"
                          " * pad(x, [1, 2, 1, 0], mode = \"replicate\")[:, 1:]"
                          " + pad(x, [1, 2], mode = \"circular\") * pad(x, [1, 2, -1, 1], value = 0.5)\n"
                          "q = sum(p, axis = 1)[:, 2:5] + expand(unsqueeze(matmul(x, v), 2), [4, 6, 3])[:, 0]"
                          " + sum(chunk(x, 2, axis = 2)[0], axis = 1) * matmul(v, v)\n"
                          "w = sum(tril(x[0], diagonal = 1) * cast(cast(x[1], \"bf16\"), \"f32\")"
                          " + triu(x[2] * x[3]))\n"
                          "loss mse(s + q + u[:, 0:1] * u[:, 1:2], t) + w"), 0);
    run_case("flatten", M("input t: f32[2, 12]\n" P("x", "[2, 3, 2, 2]")
                          "loss mse(flatten(x), t)"), 0);
    run_case("embedding", M("input i: i32[3, 4]\ninput t: f32[3, 4, 5]\n"
                            "loss mse(embedding(i, 7, 5), t)"), 7);
    run_case("cross-entropy", M("input label: i64[6]\n" P("z", "[6, 10]")
                                "loss cross_entropy(z * 2.0, label)"), 10);
    /* label smoothing, an ignored class id (labels drawn from [0, 5): a fifth
       of them ignored), and logits [n, c, h, w] with labels [n, h, w] */
    run_case("cross-entropy-smooth", M("input label: i64[8]\n" P("z", "[8, 5]")
                                       "loss cross_entropy(z, label, label_smoothing = 0.15,"
                                       " ignore_index = 3)"), 5);
    run_case("cross-entropy-2d", M("input label: i32[2, 3, 2]\n" P("z", "[2, 5, 3, 2]")
                                   "loss cross_entropy(z * 1.5, label, 0.1, 1)"), 5);
    run_case("nll-loss", M("input label: i64[2, 3, 2]\ninput l2: i32[8]\n"
                           P("z", "[2, 5, 3, 2]") P("w", "[8, 5]")
                           "loss nll_loss(log_softmax(z, axis = 1), label, ignore_index = 2)"
                           " + nll_loss(w * 2.0, l2)"), 5);
    /* smooth_l1_loss and huber_loss: where between their branches; beta 0 is l1 */
    run_case("robust-losses", M(P("a", "[3, 4]") P("b", "[3, 4]")
                                "loss smooth_l1_loss(a, b) + smooth_l1_loss(a * 3.0, b, beta = 0.5)"
                                " + huber_loss(a * 2.0, b, delta = 0.7) + huber_loss(a, b * 0.5)"
                                " + smooth_l1_loss(a, b, beta = 0.0)"), 0);
    run_case("mse", M(P("a", "[3, 4]") P("b", "[3, 4]") "loss mse(a, b)"), 0);
    /* maximum and minimum broadcasting, where with masks from comparisons (no
       gradient through them), the operators too */
    run_case("compare", M("input t: f32[3, 4]\n" P("a", "[3, 4]") P("b", "[4]") P("c", "[3, 1]")
                          "m = maximum(a, b) * minimum(a, c) + maximum(c, 0.1)\n"
                          "w = where(a > b, a * c, b) + where(le(a, 0.2), 1.0, c)"
                          " + where(ne(c, b) * (a >= c), b, 2.0)\n"
                          "loss mse(m + w * lt(a, c) + eq(a, b) + gt(b, c) + ge(a, 0.0), t)"), 0);
    /* pow of a positive base (and an odd power of any), clamp inside and outside
       its bounds, gelu's tanh form */
    run_case("pow-clamp", M("input t: f32[4, 6]\n" P("p", "[4, 6]")
                            "q = p * p + 0.5\n"
                            "y = pow(q, 2.5) + p ** 3 + q ** -0.5 + clamp(p * 2.0, min = -0.7, max = 0.6)"
                            " + clamp(p, min = 0.1) + clamp(p, max = -0.2)"
                            " + gelu(p * 3.0, approximate = \"tanh\")\n"
                            "loss mse(y, t)"), 0);
    /* PyTorch's choices at the edges: maximum and minimum give half to each on a
       tie and all to both where either is NaN; clamp passes dy on its bounds and
       none for NaN; pow with exponent 0 has gradient 0 */
    static const float tie_vals[4][6] = {
        {1, 2, 0.5f, -1, NAN, 0.25f}, {1, 1, 0.75f, -1, 0, NAN},
        {-0.5f, 0.5f, 0.6f, -0.7f, 0, NAN}, {0, 1, -2, 3, 0.5f, -1}};
    static const float tie_want[4][6] = {
        {2, 1, 3, 2, 4, 4}, {2, 3, 1, 2, 4, 4}, {5, 5, 0, 0, 5, 0}, {0, 2, -4, 6, 1, -2}};
    run_case("extremes", M("input t: f32[3, 4]\n" P("a", "[3, 4]") P("b", "[2, 3, 4]")
                           "y = max(a, axis = 1, keepdims = true) + min(a, axis = 0, keepdims = true)"
                           " * max(b) + min(b, axis = 0)\n"
                           "loss mse(y, t)"), 0);
    /* max and min over all of a and b (torch.max(x), torch.amax): dy split
       evenly between the tied extremes (a's three 3s, its two -2s), between
       the NaNs where there are some (b's two); along an axis (torch.max(x,
       dim)), c's: all of dy to the first extreme (its 3 at 1, -2 at 3) */
    static const float ext_vals[4][6] = {
        {1, 3, 3, -2, 3, -2}, {0, -1, 2, -1, NAN, NAN}, {1, 3, 3, -2, 3, -2}};
    static const float ext_want[4][6] = {{0, 1.0f / 3, 1.0f / 3, 1, 1.0f / 3, 1},
                                         {0, 0, 0, 0, 2, 2},
                                         {0, 5, 0, 1, 0, 0}};
    exact_case("extremes and ties", M(P("a", "[6]") P("b", "[6]") P("c", "[6]")
                                      "loss max(a) + min(a) * 2.0 + max(b) + min(b) * 3.0"
                                      " + max(c, axis = 0) * 5.0 + min(c, axis = 0)"),
               ext_vals, ext_want);
    /* smooth_l1_loss (beta 0.5) of a - b and huber_loss (delta 0.5) of c - d, b
       and d 0: inside, d / beta and d; on the bound |d| = beta and beyond,
       sign(d) and delta sign(d), as PyTorch's; 0 at d = 0 */
    static const float rb_vals[4][6] = {{0.5f, -0.5f, 0.25f, 2, 0, -3}, {0, 0, 0, 0, 0, 0},
                                        {0.5f, -0.5f, 0.25f, 2, 0, -3}, {0, 0, 0, 0, 0, 0}};
    static const float rb_want[4][6] = {{1, -1, 0.5f, 1, 0, -1}, {-1, 1, -0.5f, -1, 0, 1},
                                        {0.5f, -0.5f, 0.25f, 0.5f, 0, -0.5f},
                                        {-0.5f, 0.5f, -0.25f, -0.5f, 0, 0.5f}};
    exact_case("robust bounds", M(P("a", "[6]") P("b", "[6]") P("c", "[6]") P("d", "[6]")
                                  "loss smooth_l1_loss(a, b, beta = 0.5) * 6.0"
                                  " + huber_loss(c, d, delta = 0.5) * 6.0"), rb_vals, rb_want);
    exact_case("edges", M(P("a", "[6]") P("b", "[6]") P("c", "[6]") P("d", "[6]")
                          "loss sum(maximum(a, b)) + sum(minimum(a, b)) * 3.0"
                          " + sum(clamp(c, min = -0.5, max = 0.5)) * 5.0 + sum(d ** 0.0)"
                          " + sum(d ** 2)"), tie_vals, tie_want);

    /* every forward op that has a gradient rule was differentiated */
    static const ir_op differentiable[] = {
        IR_OP_NEG, IR_OP_RELU, IR_OP_SIGMOID, IR_OP_TANH, IR_OP_GELU, IR_OP_SILU, IR_OP_DROPOUT_TRAIN,
        IR_OP_EXP, IR_OP_LOG, IR_OP_SQRT, IR_OP_RSQRT, IR_OP_ABS, IR_OP_SOFTPLUS, IR_OP_HARDSWISH,
        IR_OP_LEAKY_RELU, IR_OP_ELU, IR_OP_GELU_TANH, IR_OP_POW, IR_OP_CLAMP, IR_OP_MAXIMUM,
        IR_OP_MINIMUM, IR_OP_WHERE, IR_OP_REDUCE_MAX, IR_OP_REDUCE_MIN,
        IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_MATMUL, IR_OP_DENSE, IR_OP_CONV2D,
        IR_OP_CONV2D_GRAD_INPUT,
        IR_OP_BATCHNORM_TRAIN, IR_OP_LAYERNORM, IR_OP_SOFTMAX, IR_OP_LOG_SOFTMAX, IR_OP_ATTENTION,
        IR_OP_MAXPOOL2D, IR_OP_AVGPOOL2D, IR_OP_GLOBAL_AVGPOOL, IR_OP_ADAPTIVE_AVGPOOL2D,
        IR_OP_UPSAMPLE2D, IR_OP_RESHAPE,
        IR_OP_TRANSPOSE, IR_OP_CONCAT, IR_OP_EMBEDDING, IR_OP_CROSS_ENTROPY, IR_OP_MSE,
        IR_OP_SUM_TO, IR_OP_BROADCAST_TO, IR_OP_NLL_LOSS,
    };
    for (size_t i = 0; i < sizeof differentiable / sizeof *differentiable; i++)
        if (!covered[differentiable[i]]) {
            failures++;
            fprintf(stderr, "FAIL: no case differentiates %s\n", ir_ops[differentiable[i]].name);
        }
    for (int op = 0; op < IR_NOPS; op++) /* and every op of ops.def's UNARY table */
        if (ir_grad_rule_of((ir_op)op) && !covered[op]) {
            failures++;
            fprintf(stderr, "FAIL: no case differentiates %s\n", ir_ops[op].name);
        }
    printf("fd: %d gradient elements checked, %d failed\n", checks, failures);
    return failures != 0;
}
