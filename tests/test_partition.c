/* Partitioned programs against the single-device one (passes/partition.c).
 *
 * For lenet, mlp, resnet18 and tests/partition/convs.net (conv_transpose2d and
 * conv1d) at a small batch, each strategy on 1, 2 and 4
 * virtual devices:
 *   - inference: every output equals the single-device run's, element by
 *     element within 1e-5 of (|value| + the output's rms);
 *   - training: the losses of 10 steps of SGD with momentum (so that parameters,
 *     optimizer state and running statistics all carry from step to step)
 *     equal the single-device run's within 1e-5 relative, and so do the
 *     parameters after them (within 1e-4 of (|value| + rms)); under tensor
 *     parallelism (gpt) the losses within 1e-6, each parameter within 1e-6 in
 *     norm (2e-6 elementwise), the optimizer's momentum within 1e-5.
 *
 *     resnet18 is held to its first step instead: the loss within 1e-6 and
 *     every gradient within 3e-2 of its rms (see compare_snaps).  A step of a
 *     batchnorm network at batch 8 turns the last-bit differences of summing in
 *     another order into a few ReLUs on the other side of their kink, each
 *     moving a weight gradient by about 1/sqrt(elements summed) of itself; then
 *     training at this batch is chaotic, and the single-device run itself
 *     drifts as far within 10 steps when OpenBLAS picks other kernels.  It runs
 *     3 steps (at a learning rate of 0.01), whose losses are only checked to
 *     stay within 5% of the reference;
 *   - deterministic mode: the losses and parameters of 1, 2 and 4 devices are
 *     bitwise identical;
 *   - data parallelism with batchnorm on local statistics (the default) differs
 *     from the single-device run on resnet18, as PyTorch DDP does;
 *   - every partitioned program verifies.
 * tests/partition/seg.net (a segmenter: cross_entropy over [n, c, h, w] logits,
 * smoothed) takes the same cases as the models.  Then requests that cannot be
 * met get their error, and so does a label ignored in a split batch.
 *
 *   test_partition SOURCE_DIR [MODEL]        (only MODEL's cases) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "harness.h"

#define STEPS 10

static const char *root;
static float learning_rate = 0.05f;
static int steps = STEPS;       /* of the model at hand */
#define check th_check
#define worst th_worst

typedef th_program program;
#define program_free th_program_free

/* MODEL at batch, as a training step when train, partitioned by o (NULL: one
 * device), with its executor; the problems on d. */
static int compile(const char *model, int batch, int train, const pt_options *o, diag *d,
                   program *p)
{
    return th_program_new(root, model, batch, train, NULL, o, d, p);
}

static void feed(program *p, int step) { th_feed(p->g, p->x, step, learning_rate); }

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

/* Every parameter's values, by the order of g->params. */
typedef struct {
    float **data;
    int n;
} snapshot;

static snapshot snap(program *p)
{
    snapshot s = {calloc((size_t)p->g->nparams, sizeof(float *)), p->g->nparams};
    for (int i = 0; i < s.n; i++) {
        const ir_value *v = p->g->params[i];
        size_t bytes = (size_t)ir_type_numel(&v->type) * sizeof(float);
        s.data[i] = malloc(bytes);
        memcpy(s.data[i], rt_exec_data(p->x, v), bytes);
    }
    return s;
}

static void snap_free(snapshot *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->data[i]);
    free(s->data);
}

/* Snapshot a (of graph ga) against snapshot b (of gb), by name: the worst
 * elementwise worst() over everything (elem) and over the parameters alone,
 * not the optimizer state (param); norm: the worst of the parameters'
 * rms(difference) / rms(reference); same: bitwise equal; and grad: over the optimizer state
 * after the first step (the momentum buffers hold the first gradients), the
 * worst rms(difference) / (rms(reference) + 1e-2 rms(all of them)), where the
 * floor keeps out the gradients that are zero but for rounding (a convolution's
 * bias before a batchnorm). */
static void compare_snaps(const ir_graph *ga, const snapshot *a, const ir_graph *gb,
                          const snapshot *b, double *elem, double *param, double *norm,
                          double *grad, int *same)
{
    *elem = *param = *norm = *grad = 0;
    *same = 1;
    double all = 0;
    int64_t count = 0;
    for (int i = 0; i < gb->nparams; i++)
        if (gb->params[i]->kind == IR_VALUE_STATE)
            for (int64_t k = 0, n = ir_type_numel(&gb->params[i]->type); k < n; k++, count++)
                all += (double)b->data[i][k] * b->data[i][k];
    double floor_ = 1e-2 * sqrt(all / (double)(count ? count : 1));
    for (int i = 0; i < gb->nparams; i++) {
        const ir_value *v = gb->params[i];
        int64_t n = ir_type_numel(&v->type);
        int j = 0;
        while (j < ga->nparams && strcmp(ga->params[j]->name, v->name))
            j++;
        /* tensor parallelism's shards of v, put together */
        float *whole = j == ga->nparams ? calloc((size_t)n, sizeof *whole) : NULL;
        int64_t covered = 0;
        for (int k = 0; whole && k < ga->nparams; k++) {
            const ir_value *p = ga->params[k];
            if (!p->shard.of || strcmp(p->shard.of, v->name))
                continue;
            for (int64_t e = 0, m = ir_type_numel(&p->type); e < m; e++, covered++)
                whole[ir_shard_index(p, e)] = a->data[k][e];
        }
        if (whole ? covered != n : !ir_type_eq(&ga->params[j]->type, &v->type)) {
            free(whole);
            *same = 0, *elem = *param = *norm = *grad = INFINITY;
            return;
        }
        const float *x = whole ? whole : a->data[j], *y = b->data[i];
        double e = worst(x, y, n), dd = 0, yy = 0;
        for (int64_t k = 0; k < n; k++)
            dd += ((double)x[k] - y[k]) * ((double)x[k] - y[k]), yy += (double)y[k] * y[k];
        double r = sqrt(dd / (double)n) / (sqrt(yy / (double)n) + floor_);
        *elem = e > *elem ? e : *elem;
        if (v->kind != IR_VALUE_STATE) {
            double rn = yy > 0 ? sqrt(dd / yy) : dd > 0 ? INFINITY : 0;
            *param = e > *param ? e : *param;
            *norm = rn > *norm || isnan(rn) ? (isnan(rn) ? INFINITY : rn) : *norm;
        }
        if (v->kind == IR_VALUE_STATE)
            *grad = r > *grad || isnan(r) ? (isnan(r) ? INFINITY : r) : *grad;
        *same &= memcmp(x, y, (size_t)n * sizeof *x) == 0;
        if (getenv("DEBUG_PARAMS") && v->kind == IR_VALUE_STATE && r > 1e-3)
            fprintf(stderr, "    %s: %.3g\n", v->name, r);
        free(whole);
    }
}

/* A training run: STEPS losses, the parameters after the first step and after
 * the last. */
typedef struct {
    float loss[STEPS];
    snapshot first, last;
} trained;

static int train(program *p, trained *t)
{
    if (run(p, 1, t->loss) != 0)
        return -1;
    t->first = snap(p);
    char err[512];
    for (int s = 1; s < steps; s++) {
        feed(p, s);
        if (rt_exec_run(p->x, err, sizeof err) != 0) {
            fprintf(stderr, "run: %s\n", err);
            return -1;
        }
        t->loss[s] = *(const float *)rt_exec_data(p->x, p->g->loss);
    }
    t->last = snap(p);
    return 0;
}

static void trained_free(trained *t)
{
    snap_free(&t->first);
    snap_free(&t->last);
}

typedef struct {
    const char *model;
    int batch;
    int chaotic;                /* batchnorm at a small batch: held to its first step */
    float lr;
    int steps;
    int tensor;                 /* also split by tensor parallelism, on 2 and 4 devices;
                                   2: by tensor parallelism alone */
} model_case;

static const char *strategy_name(const pt_options *o)
{
    static char buf[64];
    const char *s = o->strategy == PT_DATA ? "data" : o->strategy == PT_PIPELINE ? "pipeline"
                  : o->strategy == PT_TENSOR ? "tensor" : "hybrid";
    char mb[32] = "";
    if (o->strategy == PT_PIPELINE || o->strategy == PT_HYBRID)
        snprintf(mb, sizeof mb, "/mb%d%s", o->microbatches,
                 o->schedule == PT_GPIPE ? "/gpipe" : "");
    snprintf(buf, sizeof buf, "%s%s%s%s%s%s", o->devices == 1 ? "one" : s, mb,
             o->sync_bn ? "+sync-bn" : "", o->deterministic ? "+deterministic" : "",
             o->sequence_parallel ? "+seq" : "",
             o->recompute == PT_RECOMPUTE_FULL ? "+recompute-full"
             : o->recompute ? "+recompute-selective" : "");
    return buf;
}

/* One model, one partitioning, against the reference runs.  expect_equal 0:
 * the partitioned run computes something else (batchnorm on each device's
 * share of the batch), and must differ; 2: it computes the same bits. */
static void compare(const model_case *mc, const pt_options *o, program *ref_inf,
                    program *ref_train, const trained *ref, int expect_equal)
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
        check(ir_graph_devices(p.g) == o->devices, "%s %s x%d inference uses %d devices", mc->model,
              what, o->devices, ir_graph_devices(p.g));
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
    trained t = {0};
    if (compile(mc->model, mc->batch, 1, o, &d, &p) != 0 || train(&p, &t) != 0) {
        diag_print(&d, stderr);
        check(0, "%s %s x%d training compiles and runs", mc->model, what, o->devices);
    } else {
        double wl = 0, w1 = fabs((double)t.loss[0] - ref->loss[0]) / fabs(ref->loss[0]);
        for (int s = 0; s < steps; s++) {
            double e = fabs((double)t.loss[s] - ref->loss[s]) / fabs(ref->loss[s]);
            wl = e > wl || isnan(t.loss[s]) ? (isnan(t.loss[s]) ? INFINITY : e) : wl;
        }
        double e1, p1, n1, l1, e10, p10, n10, l10;
        int same_first, same_last;
        compare_snaps(p.g, &t.first, ref_train->g, &ref->first, &e1, &p1, &n1, &l1, &same_first);
        compare_snaps(p.g, &t.last, ref_train->g, &ref->last, &e10, &p10, &n10, &l10, &same_last);
        if (expect_equal == 2) {
            check(!memcmp(t.loss, ref->loss, (size_t)steps * sizeof *t.loss) && same_last,
                  "%s %s x%d: losses and parameters bitwise the single device's", mc->model,
                  what, o->devices);
        } else if (!expect_equal) {
            check(w1 > 1e-6, "%s %s x%d: the first loss should differ (batchnorm on part of "
                  "the batch), off by %.3g", mc->model, what, o->devices, w1);
        } else if (mc->chaotic) {
            check(w1 <= 1e-6, "%s %s x%d: first loss off by %.3g", mc->model, what, o->devices,
                  w1);
            check(l1 <= 3e-2, "%s %s x%d: first gradients off by %.3g (rms)", mc->model, what,
                  o->devices, l1);
            check(wl <= 0.05, "%s %s x%d: losses off by %.3g", mc->model, what, o->devices, wl);
        } else {
            /* tensor parallelism splits sums over channels, which rounds once
               more per split: its losses within 1e-6 and each parameter (the
               shards put together) within 1e-6 in norm after ten steps, every
               element within 2e-6 (data parallelism's order of a sum alone
               moves them 1.3e-6), and the optimizer's state (the momentum: a
               running sum of gradients, whose terms cancel) within 1e-5 */
            int tensor = o->strategy == PT_TENSOR;
            check(wl <= (tensor ? 1e-6 : 1e-5), "%s %s x%d: losses off by %.3g", mc->model, what,
                  o->devices, wl);
            check(tensor ? n10 <= 1e-6 && p10 <= 2e-6 && e10 <= 1e-5 : e10 <= 1e-4,
                  "%s %s x%d: parameters off by %.3g in norm, %.3g elementwise, optimizer state "
                  "by %.3g", mc->model, what, o->devices, n10, p10, e10);
        }
        printf("  %-9s %-27s x%d  loss 1: %.1e  all: %.1e  grads 1: %.1e  params 10: %.1e "
               "(norm %.1e)  with state: %.1e\n", mc->model, what, o->devices, w1, wl, l1, p10,
               n10, e10);
    }
    trained_free(&t);
    program_free(&p);
    diag_free(&d);
}

/* ZeRO and accumulation against replicated data parallelism on the same n
 * devices: every stage's losses and parameters (a sharded one read whole,
 * assembled from its shards) after the steps, within 1e-6 of it; and with
 * --accumulate 2 (no batchnorm: the same mean), its losses within 1e-5 and
 * its parameters within 1e-4 (as data parallelism against one device; under
 * Adam its losses alone: its step g / sqrt(v) magnifies the rounding of a
 * gradient that is all but 0 into any difference at all). */
static void zero_stages(const model_case *mc, int n, const ad_optimizer *opt, int has_bn)
{
    pt_options o = {.devices = n, .strategy = PT_DATA};
    program ref;
    trained tr = {0};
    diag d;
    diag_init(&d);
    if (th_program_new(root, mc->model, mc->batch, 1, opt, &o, &d, &ref) != 0 ||
        train(&ref, &tr) != 0) {
        diag_print(&d, stderr);
        check(0, "%s data x%d (reference) compiles and trains", mc->model, n);
        diag_free(&d);
        trained_free(&tr);
        program_free(&ref);
        return;
    }
    for (int z = 0; z <= 3; z++) {
        pt_options oz = o;
        oz.zero = z;
        oz.accumulate = z == 0 ? 2 : 1; /* z 0: accumulation instead */
        if (z == 0 && has_bn)
            continue; /* each microbatch's statistics: another step */
        program pz;
        trained t = {0};
        if (th_program_new(root, mc->model, mc->batch, 1, opt, &oz, &d, &pz) != 0) {
            diag_print(&d, stderr);
            check(0, "%s zero%d x%d compiles", mc->model, z, n);
            continue;
        }
        if (z >= 1 && n > 1) {
            /* a bucket of sharded gradients is one reduce_scatter (ZeRO-2, 3),
               a bucket of updated shards one all_gather (ZeRO-1, 2): device 0
               issues fewer of them than it has tensors to send */
            ir_op op = z >= 2 ? IR_OP_REDUCE_SCATTER : IR_OP_ALL_GATHER;
            for (int k = 0; k < (z == 2 ? 2 : 1); k++, op = IR_OP_ALL_GATHER) {
                int nodes = 0, tensors = 0;
                ir_for_each_node(pz.g, m)
                    if (m->op == op && m->device == 0)
                        nodes++, tensors += m->nin;
                check(nodes >= 1 && nodes < tensors, "%s zero%d x%d: %d %ss for %d sharded "
                      "tensors on device 0", mc->model, z, n, nodes, ir_ops[op].name, tensors);
            }
        }
        int ok = train(&pz, &t) == 0;
        double wl = 0, we = 0;
        int same = ok && !memcmp(t.loss, tr.loss, (size_t)steps * sizeof *t.loss);
        for (int s = 0; ok && s < steps; s++) {
            double e = fabs((double)t.loss[s] - tr.loss[s]) / fabs(tr.loss[s]);
            wl = e > wl || isnan(e) ? (isnan(e) ? INFINITY : e) : wl;
        }
        for (int i = 0; ok && i < ref.g->nparams; i++) {
            const ir_value *v = ref.g->params[i];
            int64_t k = ir_type_numel(&v->type);
            float *whole = malloc((size_t)k * sizeof *whole);
            char err[256];
            if (rt_exec_read_param(pz.g, pz.x, v->name, &v->type, whole, err, sizeof err) != 0) {
                check(0, "%s zero%d x%d: %s", mc->model, z, n, err);
                ok = 0;
            } else {
                double e = worst(whole, tr.last.data[i], k);
                we = e > we || isnan(e) ? (isnan(e) ? INFINITY : e) : we;
                same &= !memcmp(whole, tr.last.data[i], (size_t)k * sizeof *whole);
            }
            free(whole);
        }
        double tol = z ? 1e-6 : 1e-5, ptol = z ? 1e-6 : opt ? INFINITY : 1e-4;
        check(ok && wl <= tol && we <= ptol, "%s %s x%d: losses off by %.3g, parameters by %.3g "
              "from replicated data parallelism's", mc->model, z ? "zero" : "accumulate 2", n, wl,
              we);
        char name[32];
        snprintf(name, sizeof name, z ? "zero%d" : "data+accumulate 2", z);
        printf("  %-9s %-27s x%d  against data: losses %.1e, params %.1e%s\n", mc->model, name,
               n, wl, we, same ? " (bitwise)" : "");
        trained_free(&t);
        program_free(&pz);
    }
    diag_free(&d);
    trained_free(&tr);
    program_free(&ref);
}

/* Deterministic mode: 1, 2 and 4 devices give the same bits. */
static void deterministic(const model_case *mc, int shards)
{
    program p[3];
    trained t[3] = {0};
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        pt_options o = {.devices = 1 << k, .strategy = PT_DATA, .deterministic = 1,
                        .sync_bn = 1, .micro_shards = shards};
        diag d;
        diag_init(&d);
        if (compile(mc->model, mc->batch, 1, &o, &d, &p[k]) != 0 || train(&p[k], &t[k]) != 0) {
            diag_print(&d, stderr);
            ok = 0;
        }
        diag_free(&d);
    }
    check(ok, "%s deterministic x1, x2, x4 compile and run", mc->model);
    for (int k = 1; k < 3 && ok; k++) {
        double e, pe, ne, l;
        int same;
        compare_snaps(p[k].g, &t[k].last, p[0].g, &t[0].last, &e, &pe, &ne, &l, &same);
        check(!memcmp(t[k].loss, t[0].loss, (size_t)steps * sizeof *t[0].loss) && same,
              "%s deterministic x%d: losses and parameters bitwise those of x1", mc->model,
              1 << k);
    }
    printf("  %-9s deterministic (%d micro-shards) x1, x2, x4: %s\n", mc->model, shards,
           ok ? "run" : "failed");
    for (int k = 0; k < 3; k++) {
        trained_free(&t[k]);
        program_free(&p[k]);
    }
}

static void model(const model_case *mc)
{
    program inf, train_prog;
    trained ref = {0};
    diag d;
    diag_init(&d);
    int ok = compile(mc->model, mc->batch, 0, NULL, &d, &inf) == 0 && run(&inf, 1, NULL) == 0 &&
             compile(mc->model, mc->batch, 1, NULL, &d, &train_prog) == 0 &&
             train(&train_prog, &ref) == 0;
    diag_print(&d, stderr);
    diag_free(&d);
    check(ok, "%s: the single-device reference compiles and runs", mc->model);
    if (!ok)
        return;
    int has_bn = 0, others = mc->tensor != 2;
    ir_for_each_node(train_prog.g, n)
        has_bn |= n->op == IR_OP_BATCHNORM_TRAIN;
    for (int n = getenv("ONLY_N") ? atoi(getenv("ONLY_N")) : 1; n <= 4 && others; n *= 2) {
        pt_options o = {.devices = n, .strategy = PT_DATA};
        compare(mc, &o, &inf, &train_prog, &ref, !has_bn || n == 1);
        if (has_bn) {
            o.sync_bn = 1;
            compare(mc, &o, &inf, &train_prog, &ref, 1);
        }
    }
    pt_options o = {.devices = 2, .strategy = PT_DATA, .deterministic = 1, .sync_bn = 1,
                    .micro_shards = 4};
    if (others)
        compare(mc, &o, &inf, &train_prog, &ref, 1);
    /* pipelines: one microbatch computes exactly what one device does; more
       take each microbatch's batchnorm statistics, as GPipe does */
    for (int n = 2; n <= 4 && others; n *= 2) {
        o = (pt_options){.devices = n, .strategy = PT_PIPELINE, .microbatches = 1};
        compare(mc, &o, &inf, &train_prog, &ref, 2);
        o.microbatches = 0;
        compare(mc, &o, &inf, &train_prog, &ref, !has_bn);
        o.schedule = PT_GPIPE;
        compare(mc, &o, &inf, &train_prog, &ref, !has_bn);
    }
    o = (pt_options){.devices = 4, .strategy = PT_HYBRID, .dp = 2, .pp = 2, .microbatches = 2};
    if (others)
        compare(mc, &o, &inf, &train_prog, &ref, !has_bn);
    for (int n = 2; n <= 4 && mc->tensor; n *= 2)
        for (int sp = 0; sp < 2; sp++) {
            o = (pt_options){.devices = n, .strategy = PT_TENSOR, .sequence_parallel = sp};
            compare(mc, &o, &inf, &train_prog, &ref, 1);
        }
    /* recomputation: the same kernels on the same operands, so one device's
       bits; under tensor parallelism with sequence parallelism too */
    for (int r = PT_RECOMPUTE_SELECTIVE; r <= PT_RECOMPUTE_FULL && mc->tensor && others; r++) {
        o = (pt_options){.devices = 1, .recompute = r};
        compare(mc, &o, &inf, &train_prog, &ref, 2);
        for (int n = 2; n <= 4; n *= 2) {
            o = (pt_options){.devices = n, .strategy = PT_TENSOR, .sequence_parallel = 1,
                             .recompute = r};
            compare(mc, &o, &inf, &train_prog, &ref, 1);
        }
    }
    if (!others)
        goto done;
    deterministic(mc, 4);
    /* ZeRO: lenet and mlp on 2 and 4 devices, SGD and Adam; the test models
       (a conv1d's weight reshaped, a segmentation net, a transformer) on 2 */
    ad_optimizer adam = ad_optimizer_default(AD_ADAM);
    for (int n = 2; n <= 4 && !mc->chaotic; n *= 2) {
        int small = !strchr(mc->model, '/');
        if (small || n == 2)
            zero_stages(mc, n, NULL, has_bn);
        if (small)
            zero_stages(mc, n, &adam, has_bn);
    }
done:
    trained_free(&ref);
    program_free(&inf);
    program_free(&train_prog);
}

/* Tensor parallelism splits attention by heads: each device's attention nodes
 * (forward and gradient) see 1/D of the heads, and nothing gathers their
 * operands; with sequence parallelism no activation [batch, seq, width] is
 * all-reduced (its partial sums are reduce-scattered, the layers' inputs
 * all-gathered), and the residual adds run on 1/D of the positions.  The
 * vocabulary splits (the embedding tied to the output layer): every embedding
 * and its gradient looks up 1/D of the rows, the loss is a parallel
 * cross-entropy (no cross_entropy node is left), and no node holds logits or
 * their gradient of the whole vocabulary but the gather of the output. */
static void tensor_attention(const char *model, int devices, int sp)
{
    pt_options o = {.devices = devices, .strategy = PT_TENSOR, .sequence_parallel = sp};
    diag d;
    diag_init(&d);
    mp_plan *p1 = NULL, *p2 = NULL;
    ir_graph *one = th_compile(root, model, 8, 1, NULL, NULL, &d, &p1);
    ir_graph *g = one ? th_compile(root, model, 8, 1, NULL, &o, &d, &p2) : NULL;
    mp_plan_free(p1);
    mp_plan_free(p2);
    diag_print(&d, stderr);
    diag_free(&d);
    check(g != NULL, "%s tensor x%d%s compiles", model, devices, sp ? "+seq" : "");
    if (!g) {
        if (one)
            ir_graph_free(one);
        return;
    }
    int64_t heads = 0;
    ir_for_each_node(one, n)
        if (n->op == IR_OP_ATTENTION)
            heads = n->in[0]->type.dims[1];
    int att = 0, split = 0, gathered = 0, reduced3 = 0, scattered = 0, adds = 0, adds_split = 0;
    int lookups = 0, lookups_split = 0, losses = 0, whole = 0;
    ir_for_each_node(g, n) {
        if (n->op == IR_OP_EMBEDDING || n->op == IR_OP_EMBEDDING_GRAD) {
            const ir_type *t = &n->in[1]->type;
            if (n->op == IR_OP_EMBEDDING_GRAD)
                t = &n->out[0]->type;
            lookups++;
            lookups_split += ir_attr_int(n, "shard_of") == 256 && t->dims[0] * devices == 256;
        }
        losses += n->op == IR_OP_CROSS_ENTROPY || n->op == IR_OP_CROSS_ENTROPY_GRAD;
        for (int k = 0; k < n->nout; k++) /* logits [8, 16, vocab] or [8, vocab, 16] */
            whole += n->out[k]->type.rank == 3 && (n->out[k]->type.dims[1] == 256 ||
                                                    n->out[k]->type.dims[2] == 256) &&
                     !(n->op == IR_OP_ALL_GATHER && strstr(n->out[k]->name, "gpt.head.whole"));
        if (n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_GRAD) {
            int q = n->op == IR_OP_ATTENTION_GRAD;
            att++;
            split += n->in[q]->type.dims[1] * devices == heads;
            for (int k = 0; k < n->nin; k++)
                gathered += n->in[k]->kind == IR_VALUE_NODE &&
                            n->in[k]->def->op == IR_OP_ALL_GATHER;
        }
        if (n->op == IR_OP_ALL_REDUCE) /* not a statistic of each position, [8, 1, 16] */
            for (int k = 0; k < n->nin; k++)
                reduced3 += n->in[k]->type.rank == 3 && n->in[k]->type.dims[1] > 1 &&
                            n->in[k]->type.dims[2] > 1;
        scattered += n->op == IR_OP_REDUCE_SCATTER;
        if (n->op == IR_OP_ADD && strstr(n->out[0]->name, ".block") &&
            strstr(n->out[0]->name, ".add") && !strstr(n->out[0]->name, "grad")) {
            adds++; /* the blocks' residual adds, of [8, 16, 32] in all */
            adds_split += n->out[0]->type.dims[1] * devices == 16;
        }
    }
    check(heads > 0 && att > 0 && split == att && gathered == 0,
          "%s tensor x%d%s: %d attention nodes, %d of them on 1/%d of the %lld heads, %d operands "
          "gathered", model, devices, sp ? "+seq" : "", att, split, devices, (long long)heads,
          gathered);
    check(lookups >= 2 * devices && lookups_split == lookups && losses == 0 && whole == 0,
          "%s tensor x%d%s: %d of %d embedding lookups and gradients on 1/%d of the vocabulary, "
          "%d cross_entropy nodes left, %d nodes with logits of the whole vocabulary", model,
          devices, sp ? "+seq" : "", lookups_split, lookups, devices, losses, whole);
    if (sp)
        check(reduced3 == 0 && scattered > 0 && adds > 0 && adds_split == adds,
              "%s tensor x%d+seq: %d activations all-reduced, %d reduce-scatters, %d of %d "
              "residual adds on a share of the positions", model, devices, reduced3, scattered,
              adds_split, adds);
    ir_graph_free(g);
    ir_graph_free(one);
}

/* Recomputation trades FLOPs for memory: the planned activations of a
 * training step fall from none to selective to full, and full computes the
 * GEMMs of the forward pass once more. */
static void recompute_saves(const char *model)
{
    int64_t bytes[3] = {0};
    int gemms[3] = {0};
    for (int r = 0; r < 3; r++) {
        pt_options o = {.devices = 1, .recompute = r};
        diag d;
        diag_init(&d);
        mp_plan *plan = NULL;
        ir_graph *g = th_compile(root, model, 8, 1, NULL, &o, &d, &plan);
        diag_print(&d, stderr);
        diag_free(&d);
        if (!g)
            continue;
        bytes[r] = plan->arena_bytes;
        ir_for_each_node(g, n)
            gemms[r] += n->op == IR_OP_DENSE || n->op == IR_OP_ATTENTION;
        mp_plan_free(plan);
        ir_graph_free(g);
    }
    check(bytes[0] > bytes[1] && bytes[1] > bytes[2] && bytes[2] > 0 && gemms[1] == gemms[0] &&
              gemms[2] > gemms[0],
          "%s: activations none %lld > selective %lld > full %lld bytes; dense and attention "
          "nodes %d, %d, %d", model, (long long)bytes[0], (long long)bytes[1],
          (long long)bytes[2], gemms[0], gemms[1], gemms[2]);
}

/* ZeRO-3 prefetches a layer ahead: each gather of a parameter, but for the
 * first layer's, is issued before the layer ahead of its own computes, in the
 * forward pass and in the backward pass, and every gather is read. */
static void zero3_prefetch(const char *model)
{
    pt_options o = {.devices = 2, .strategy = PT_DATA, .zero = 3};
    diag d;
    diag_init(&d);
    mp_plan *plan = NULL;
    ir_graph *g = th_compile(root, model, 8, 1, NULL, &o, &d, &plan);
    diag_print(&d, stderr);
    diag_free(&d);
    check(g != NULL, "%s zero3 x2 compiles", model);
    if (!g)
        return;
    /* device 0's gathers of a shard: where each is issued and first read */
    enum { MAX = 1024 };
    struct { const ir_value *v; int at, read; } gs[MAX];
    int n = 0, pos = 0;
    ir_for_each_node(g, x) {
        if (x->device != 0)
            continue;
        pos++;
        for (int k = 0; k < x->nin; k++)
            for (int j = 0; j < n; j++)
                if (gs[j].v == x->in[k] && !gs[j].read)
                    gs[j].read = pos;
        if (x->op == IR_OP_ALL_GATHER && x->in[0]->kind == IR_VALUE_PARAM && n < MAX)
            gs[n].v = x->out[0], gs[n].at = pos, gs[n++].read = 0;
    }
    int ahead = 0, late = 0, unread = 0;
    for (int j = 0; j < n; j++) {
        int before = 0; /* the reader of the layer before */
        for (int k = 0; k < n; k++)
            if (gs[k].read < gs[j].read && gs[k].read > before)
                before = gs[k].read;
        unread += !gs[j].read;
        if (before && gs[j].at < before)
            ahead++;
        else if (before)
            late++, fprintf(stderr, "  %s: gathered at %d, after %d\n", gs[j].v->name, gs[j].at,
                            before);
    }
    check(n > 0 && ahead > 0 && !late && !unread, "%s zero3: of %d gathers, %d issued a layer "
          "ahead, %d late, %d never read", model, n, ahead, late, unread);
    printf("  %-9s zero3 x2: %d gathers, %d a layer ahead\n", model, n, ahead);
    mp_plan_free(plan);
    ir_graph_free(g);
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

/* A label equal to ignore_index (-100, no class) is ignored on one device, and
 * an error where the batch is split: the replicas' means would be over
 * different counts. */
static void ignored_label(const char *model)
{
    for (int devices = 1; devices <= 2; devices++) {
        program p;
        diag d;
        diag_init(&d);
        pt_options o = {.devices = devices, .strategy = PT_DATA};
        if (compile(model, 8, 1, devices > 1 ? &o : NULL, &d, &p) != 0) {
            diag_print(&d, stderr);
            check(0, "%s x%d compiles", model, devices);
            diag_free(&d);
            continue;
        }
        diag_free(&d);
        feed(&p, 0);
        const ir_value *label = NULL;
        for (int i = 0; i < p.g->ninputs; i++)
            if (strcmp(p.g->inputs[i]->name, "label") == 0)
                label = p.g->inputs[i];
        char err[512] = "";
        int rc = -2;
        if (label) {
            ((int32_t *)rt_exec_data(p.x, label))[5] = -100;
            rc = rt_exec_run(p.x, err, sizeof err);
        }
        if (devices == 1)
            check(rc == 0, "%s: an ignored label on one device: rc %d, %s", model, rc, err);
        else
            check(rc != 0 && strstr(err, "cross_entropy label -100 at position 5 of 'label.part' is "
                                         "ignore_index, in a batch split between 2 replicas"),
                  "%s x2: an ignored label in a split batch: rc %d, '%s'", model, rc, err);
        program_free(&p);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_partition SOURCE_DIR [MODEL]\n");
        return 2;
    }
    root = argv[1];
    rt_set_threads(2);
    static const model_case models[] = {{"lenet", 8, 0, 0.05f, STEPS, 0},
                                        {"mlp", 8, 0, 0.05f, STEPS, 0},
                                        {"resnet18", 8, 1, 0.01f, 3, 0},
                                        {"tests/partition/convs", 8, 0, 0.05f, STEPS, 0},
                                        {"tests/partition/seg", 8, 0, 0.05f, STEPS, 0},
                                        {"tests/partition/gpt", 8, 0, 0.05f, STEPS, 1},
                                        {"tests/partition/gpt_smooth", 8, 0, 0.05f, STEPS, 2}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (argc < 3 || strcmp(argv[2], models[i].model) == 0) {
            learning_rate = models[i].lr;
            steps = models[i].steps;
            model(&models[i]);
        }

    error_case("lenet", 6, &(pt_options){.devices = 4, .strategy = PT_DATA},
               "the batch of 6 does not split into 4 equal parts");
    error_case("lenet", 8, &(pt_options){.devices = 3, .strategy = PT_DATA, .deterministic = 1},
               "which 3 devices do not share evenly");
    error_case("tests/partition/seg_ignore", 8,
               &(pt_options){.devices = 2, .strategy = PT_DATA},
               "the loss 'cross_entropy0' ignores class 3: splitting the batch between devices");
    ignored_label("tests/partition/seg");
    zero3_prefetch("lenet");
    zero3_prefetch("tests/partition/gpt");
    for (int n = 2; n <= 4; n *= 2)
        for (int sp = 0; sp < 2; sp++)
            tensor_attention("tests/partition/gpt", n, sp);
    recompute_saves("tests/partition/gpt");
    printf("partition: %d checks, %d failed\n", th_passed + th_failed, th_failed);
    return th_failed ? 1 : 0;
}
