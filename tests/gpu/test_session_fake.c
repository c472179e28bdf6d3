/* The session layer (runtime/api/session.h) on the cuda device against the cpu
 * device, on the stand-in CUDA libraries (tests/fakecuda/), whose driver runs
 * each kernel as its host emulation (tests/cg_host.h):
 *
 *   test_session_fake SOURCE_DIR WORK_DIR FAKE_DIR
 *
 * Each case builds a plan with kernels in memory (the program compiled with
 * NVRTC and stored as gnc compile stores it), registers the host emulations
 * of rt_plan_program's kernels (the names the session's executor looks up),
 * and opens sessions of it with the same seed: cpu, cuda (a CUDA graph) and
 * cuda eager:
 *
 *   training   4 steps with the same batches (random images and labels, lr
 *              0.02), each next batch prefetched while a step runs (the
 *              graph session launched, then waited for, as gnc train runs
 *              on a GPU): each step's loss and outputs within 1e-4 + 1e-4 |ref|;
 *              then the cpu and cuda sessions saved, each checkpoint loaded
 *              into a fresh cpu session, every tensor within 1e-4 of the
 *              other's; the cpu session's checkpoint loaded into a fresh cuda
 *              session (of another seed) and one more step on it and on the
 *              cpu session: loss and outputs agree; and both cuda sessions,
 *              which ran, rewound to the cpu's checkpoint after step 1: step 2
 *              run again gives step 2's loss;
 *   inference  the inputs set, one run: the outputs and loss agree; then the
 *              model's training checkpoint loaded into both, another batch.
 *
 * The cases: lenet (SGD with momentum) and a small net with batch
 * normalization (Adam) trained on 1 device, each followed by its inference;
 * lenet and mlp data parallel on 2 devices; then lenet on 1 device and mlp
 * on 2 profiled (rt_cuda_set_profile: the events of every step, checked
 * against the program's steps, profiled()).  Before them: a process that
 * makes an NCCL id (rt_cuda_unique_id) survives NCCL's bootstrap thread.
 * Exits 77 (skipped) without NVRTC.
 *
 *   mpirun -np 2 test_session_fake SOURCE_DIR WORK_DIR FAKE_DIR --mpi
 *
 * runs sessions as gnc train does under mpirun: each rank a cuda session of
 * its device alone (NCCL across the ranks, its host copy the rank's CPU
 * executor, rt_exec_new_rank) beside a cpu session of the whole program in
 * the process: lenet data parallel and mlp pipeline, 4 steps with the next
 * batch prefetched; rank 0's loss and outputs against the whole program's at
 * every step; then every rank's parameters read back and gathered to rank 0
 * (rt_session_pull, rt_exec_gather_params), all of them against the whole
 * program's within 1e-4. */
#include <dlfcn.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cg_host.h"
#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "plan.h"
#include "session.h"

#ifdef GNC_HAVE_MPI
#include <mpi.h>
#endif

static int npassed, nfailed;
static const char *srcdir, *workdir, *fakedir;
static void *driver;            /* the stand-in driver: the handle the executor gets too */

#define ATOL 1e-4
#define RTOL 1e-4

static int near(double got, double want, double atol, double rtol)
{
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ---------------------------------------------------------------- plans */

/* A small convolutional net with batch normalization: running statistics
 * (buffers) that training updates and inference reads. */
static const char bnnet[] =
    "model bnnet(batch = 4, classes = 10) {\n"
    "    input image: f32[batch, 1, 28, 28]\n"
    "    input label: i32[batch]\n"
    "    x = avgpool2d(relu(batchnorm(conv2d(image, 4, kernel = 5, pad = 2, bias = false, name = \"conv\"))), 4)\n"
    "    logits = dense(flatten(x), classes, name = \"fc\")\n"
    "    output logits\n"
    "    loss cross_entropy(logits, label)\n"
    "}\n";

/* The plan of model name (batch, on devices devices, partitioned by
 * strategy; a training step with SGD and momentum where train), with its
 * kernels for sm_90 (the stand-ins' GPUs), or NULL with a message. */
static rt_plan *plan_of(const char *name, int batch, int devices, pt_strategy strategy, int train,
                        char *err, size_t errlen)
{
    char path[4096], b[16];
    snprintf(path, sizeof path, "%.3900s/models/%s.net", srcdir, name);
    snprintf(b, sizeof b, "%d", batch);
    const char *dn[] = {"batch"}, *dv[] = {b};
    fe_options fo = {NULL, 1, dn, dv};
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(train == 2 ? AD_ADAM : AD_SGD);
    if (train == 1)
        opt.momentum = 0.9;
    pt_options po = {0};
    po.devices = devices;
    po.strategy = strategy;
    pm_options pm = {1, 0, NULL, NULL, stdout, devices > 1 ? &po : NULL};
    ir_graph *g = strcmp(name, "bnnet") == 0
                      ? fe_load_string("bnnet.net", bnnet, strlen(bnnet), &fo, &d)
                      : fe_load_file(path, &fo, &d);
    mp_plan *mp = NULL;
    rt_plan *base = NULL, *p = NULL;
    cg_program *cg = NULL;
    unsigned char *bytes = NULL;
    size_t size;
    if (!g || (train && ad_training_graph(g, &opt, &d) != 0) ||
        pm_run(g, pm_default_pipeline(train, 0, devices > 1), &pm, &d) != 0) {
        diag_print(&d, stdout);
        snprintf(err, errlen, "does not compile");
        goto done;
    }
    /* as gnc compile writes it (tools/plan.c): the kernels generated from the
       program and memory plan as a loader decodes them, then compiled */
    static const rt_plan_kv meta[] = {{"writer", "test_session_fake"}, {"precision", "fp32"},
                                      {"archs", "sm_90"}};
    mp = mp_plan_graph(g);
    if (rt_plan_encode(g, mp, meta, 3, &bytes, &size, err, errlen) != 0 ||
        !(base = rt_plan_decode(bytes, size, name, err, errlen)))
        goto done;
    free(bytes);
    bytes = NULL;
    cg_options co = cg_options_default();
    co.narchs = 1;
    co.archs[0] = "sm_90";
    if (!(cg = cg_generate(base->g, base->mp, &co, &d))) {
        diag_print(&d, stdout);
        snprintf(err, errlen, "cg_generate failed");
        goto done;
    }
    if (cg_compile(cg, NULL, NULL, err, errlen) != 0 ||
        rt_plan_encode_program(g, mp, meta, 3, cg, &bytes, &size, err, errlen) != 0)
        goto done;
    p = rt_plan_decode(bytes, size, name, err, errlen);
done:
    free(bytes);
    cg_program_free(cg);
    rt_plan_free(base);
    mp_plan_free(mp);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    return p;
}

/* The host emulations of p's GPU program registered with the stand-in
 * driver; what must live while a session of p runs (free: kernels_free). */
typedef struct {
    cg_program *prog;
    cg_host *host;
} kernels;

static int kernels_register(const rt_plan *p, kernels *k, char *err, size_t errlen)
{
    typedef int (*register_fn)(const char *name, cg_host_kernel entry);
    register_fn reg;
    *(void **)&reg = dlsym(driver, "fakecuda_register");
    k->host = NULL;
    if (!(k->prog = rt_plan_program(p, err, errlen)) ||
        !(k->host = cg_host_build(&k->prog, 1, workdir, err, errlen)))
        return -1;
    for (int i = 0; i < k->prog->nkernels; i++)
        if (reg(k->prog->kernels[i].name, cg_host_entry(k->host, 0, i)) != 0) {
            snprintf(err, errlen, "the stand-in driver refuses kernel %s",
                     k->prog->kernels[i].name);
            return -1;
        }
    return 0;
}

static void kernels_free(kernels *k)
{
    cg_host_free(k->host);
    cg_program_free(k->prog);
}

/* ---------------------------------------------------------------- data */

static uint64_t rng;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static int is_train_scalar(const ir_value *v)
{
    return !strcmp(v->name, AD_INPUT_LR) || !strcmp(v->name, AD_INPUT_STEP) ||
           !strcmp(v->name, AD_INPUT_SEED);
}

/* Batch k of every input but the training scalars into both sessions:
 * images in [0, 1), labels < 10; set, or prefetched for the next launch. */
static int set_batch_as(const ir_graph *g, rt_session *const *s, int n, int k, int prefetch,
                        char *err, size_t errlen)
{
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (is_train_scalar(v))
            continue;
        rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) + (uint64_t)strlen(v->name);
        int64_t m = ir_type_numel(&v->type);
        void *data = malloc((size_t)m * 8 + 8);
        if (!data)
            return snprintf(err, errlen, "out of memory"), -1;
        for (int64_t j = 0; j < m; j++)
            if (v->type.dtype == IR_I32)
                ((int32_t *)data)[j] = (int32_t)(uniform() * 10);
            else if (v->type.dtype == IR_I64)
                ((int64_t *)data)[j] = (int64_t)(uniform() * 10);
            else
                ((float *)data)[j] = (float)uniform();
        int rc = 0;
        for (int j = 0; j < n && rc == 0; j++)
            rc = prefetch ? rt_session_prefetch(s[j], v, data, err, errlen)
                          : rt_session_set_input(s[j], v, data, err, errlen);
        free(data);
        if (rc)
            return -1;
    }
    return 0;
}

static int set_batch(const ir_graph *g, rt_session *const *s, int n, int k, char *err,
                     size_t errlen)
{
    return set_batch_as(g, s, n, k, 0, err, errlen);
}

/* ---------------------------------------------------------------- comparing */

/* Value v of session got against want's: floats within atol + rtol |want|,
 * others equal.  1, or 0 after printing the first mismatch. */
static int same_value(const char *what, const ir_value *v, rt_session *got, rt_session *want,
                      double atol, double rtol)
{
    const void *a = rt_session_data(got, v), *b = rt_session_data(want, v);
    if (!a || !b) {
        printf("FAIL %s: %s: no host copy (%s)\n", what, v->name, a ? "reference" : "cuda");
        return 0;
    }
    int64_t n = ir_type_numel(&v->type);
    ir_dtype t = v->type.dtype;
    for (int64_t i = 0; i < n; i++) {
        double x, y;
        if (t == IR_F32 || t == IR_F16 || t == IR_BF16)
            x = ((const float *)a)[i], y = ((const float *)b)[i];
        else if (t == IR_I64)
            x = (double)((const int64_t *)a)[i], y = (double)((const int64_t *)b)[i];
        else if (t == IR_U8)
            x = ((const uint8_t *)a)[i], y = ((const uint8_t *)b)[i];
        else
            x = ((const int32_t *)a)[i], y = ((const int32_t *)b)[i];
        int ok = t == IR_F32 || t == IR_F16 || t == IR_BF16 ? near(x, y, atol, rtol) : x == y;
        if (!ok) {
            printf("FAIL %s: %s[%lld] %.7g, want %.7g\n", what, v->name, (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

/* The loss and every output of got against want's. */
static int same_results(const char *what, const ir_graph *g, rt_session *got, rt_session *want)
{
    int ok = 1;
    if (g->loss)
        ok = same_value(what, g->loss, got, want, ATOL, RTOL);
    for (int i = 0; i < g->noutputs; i++)
        ok = same_value(what, g->outputs[i].value, got, want, ATOL, RTOL) && ok;
    return ok;
}

static int saved(const ir_value *v)
{
    return v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER || v->kind == IR_VALUE_STATE;
}

/* ---------------------------------------------------------------- the cases */

static rt_session *open_session(const rt_plan *p, rt_device_kind dev, int eager, uint64_t seed,
                                char *err, size_t errlen)
{
    rt_session_options o = {0};
    o.device = dev;
    o.seed = seed;
    o.libdir = dev == RT_DEVICE_CUDA ? fakedir : NULL;
    o.eager = eager;
    return rt_session_open(p, &o, err, errlen);
}

/* One step (k, from 0) on every session of s: the batch, the training
 * scalars, a run. */
static int step(const ir_graph *g, rt_session *const *s, int n, int k, char *err, size_t errlen)
{
    if (set_batch(g, s, n, k, err, errlen) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (rt_session_set_train(s[i], 0.02, k + 1, 7, err, errlen) != 0 ||
            rt_session_run(s[i], err, errlen) != 0)
            return -1;
    return 0;
}

/* Step k of steps on the n sessions of s as gnc train runs on a GPU: s[1]
 * launched, batch k + 1 prefetched while it runs, then waited for; the
 * others run.  Batch 0 is set at step 0. */
static int step_prefetched(const ir_graph *g, rt_session *const *s, int n, int k, int steps,
                           char *err, size_t errlen)
{
    int rc = k == 0 && set_batch(g, s, n, 0, err, errlen) != 0;
    for (int j = 0; j < n && !rc; j++)
        rc = rt_session_set_train(s[j], 0.02, k + 1, 7, err, errlen) != 0 ||
             (j == 1 ? rt_session_launch(s[j], err, errlen) : rt_session_run(s[j], err, errlen)) !=
                 0;
    if (!rc && k + 1 < steps)
        rc = set_batch_as(g, s, n, k + 1, 1, err, errlen) != 0;
    return rc || rt_session_wait(s[1], err, errlen) != 0 ? -1 : 0;
}

static const char *const session_names[] = {"cpu", "cuda", "cuda eager"};

/* The checkpoint of the last training on one device, for the inference case
 * of that model that follows it ("" when it failed). */
static char trained[4096];

static void training(const char *model, int batch, int devices, int optimizer)
{
    char what[128], err[2048], at[256], path[3][4096];
    snprintf(what, sizeof what, "%s training (%s), %d device%s", model,
             optimizer == 2 ? "adam" : "sgd", devices, devices > 1 ? "s, data parallel" : "");
    trained[0] = 0;
    kernels k = {0};
    /* cpu, cuda (a CUDA graph), cuda launched step by step */
    rt_session *s[3] = {NULL, NULL, NULL}, *check[2] = {NULL, NULL}, *again = NULL;
    rt_plan *p = plan_of(model, batch, devices, PT_DATA, optimizer, err, sizeof err);
    if (!p || kernels_register(p, &k, err, sizeof err) != 0 ||
        !(s[0] = open_session(p, RT_DEVICE_CPU, 0, 5, err, sizeof err)) ||
        !(s[1] = open_session(p, RT_DEVICE_CUDA, 0, 5, err, sizeof err)) ||
        !(s[2] = open_session(p, RT_DEVICE_CUDA, 1, 5, err, sizeof err))) {
        printf("FAIL %s: %s\n", what, err);
        nfailed++;
        goto done;
    }
    const ir_graph *g = p->g;
    for (int i = 0; i < 3; i++)
        snprintf(path[i], sizeof path[i], "%.3900s/session_%s_%d_%s.safetensors", workdir, model,
                 devices, i == 0 ? "cpu" : i == 1 ? "cuda" : "cpu-step2");
    int ok = 1;
    double loss[4] = {0};
    for (int i = 0; i < 4 && ok; i++) {
        if (step_prefetched(g, s, 3, i, 4, err, sizeof err) != 0) {
            printf("FAIL %s: step %d: %s\n", what, i, err);
            ok = 0;
            break;
        }
        loss[i] = *(const float *)rt_session_data(s[0], g->loss);
        for (int j = 1; j < 3; j++) {
            snprintf(at, sizeof at, "%s: step %d, %s session", what, i, session_names[j]);
            ok = same_results(at, g, s[j], s[0]) && ok;
        }
        /* after two steps, a checkpoint to rewind to */
        if (ok && i == 1 && rt_session_save(s[0], path[2], NULL, err, sizeof err) != 0) {
            printf("FAIL %s: saving after step 1: %s\n", what, err);
            ok = 0;
        }
    }
    /* checkpoints: both saved, each read back by a fresh cpu session of
       another seed */
    for (int i = 0; i < 2 && ok; i++) {
        rt_ckpt_meta meta = {0};
        rt_ckpt_meta_set(&meta, "step", "4");
        ok = rt_session_save(s[i], path[i], &meta, err, sizeof err) == 0 &&
             (check[i] = open_session(p, RT_DEVICE_CPU, 0, 99, err, sizeof err)) &&
             rt_session_load(check[i], path[i], NULL, err, sizeof err) == 0;
        rt_ckpt_meta_free(&meta);
        if (!ok)
            printf("FAIL %s: the %s session's checkpoint: %s\n", what, session_names[i], err);
    }
    snprintf(at, sizeof at, "%s: the checkpoints", what);
    for (int i = 0; ok && i < g->nparams; i++)
        if (saved(g->params[i]))
            ok = same_value(at, g->params[i], check[1], check[0], ATOL, 0) && ok;
    /* the cpu session's checkpoint into a fresh cuda session, one more step */
    if (ok) {
        rt_session *pair[2] = {s[0], NULL};
        if (!(again = open_session(p, RT_DEVICE_CUDA, 0, 1234, err, sizeof err)) ||
            rt_session_load(again, path[0], NULL, err, sizeof err) != 0 ||
            (pair[1] = again, step(g, pair, 2, 4, err, sizeof err)) != 0) {
            printf("FAIL %s: loaded into a fresh cuda session: %s\n", what, err);
            ok = 0;
        } else {
            snprintf(at, sizeof at, "%s: step 4, a fresh cuda session loaded", what);
            ok = same_results(at, g, again, s[0]);
        }
    }
    /* the cuda sessions that ran rewound to the checkpoint after step 1: step 2
       again gives step 2's loss (the graph's parameters written under it) */
    for (int j = 1; j < 3 && ok; j++) {
        if (rt_session_load(s[j], path[2], NULL, err, sizeof err) != 0 ||
            step(g, &s[j], 1, 2, err, sizeof err) != 0) {
            printf("FAIL %s: the %s session rewound: %s\n", what, session_names[j], err);
            ok = 0;
            break;
        }
        double l = *(const float *)rt_session_data(s[j], g->loss);
        if (!near(l, loss[2], ATOL, RTOL)) {
            printf("FAIL %s: the %s session rewound to step 2: loss %.7g, step 2's %.7g\n", what,
                   session_names[j], l, loss[2]);
            ok = 0;
        }
    }
    if (ok && devices == 1)
        snprintf(trained, sizeof trained, "%s", path[0]);
    if (ok) {
        npassed++;
        printf("ok %s: loss %.5f -> %.5f, checkpoints agree, loaded %.5f\n", what, loss[0],
               loss[3], *(const float *)rt_session_data(again, g->loss));
    } else {
        nfailed++;
    }
done:
    for (int i = 0; i < 3; i++)
        rt_session_free(s[i]);
    for (int i = 0; i < 2; i++)
        rt_session_free(check[i]);
    rt_session_free(again);
    kernels_free(&k);
    rt_plan_free(p);
}

static void inference(const char *model, int batch, int devices)
{
    char what[128], err[2048];
    snprintf(what, sizeof what, "%s inference, %d device%s", model, devices,
             devices > 1 ? "s, data parallel" : "");
    kernels k = {0};
    rt_session *s[2] = {NULL, NULL};
    rt_plan *p = plan_of(model, batch, devices, PT_DATA, 0, err, sizeof err);
    if (!p || kernels_register(p, &k, err, sizeof err) != 0 ||
        !(s[0] = open_session(p, RT_DEVICE_CPU, 0, 3, err, sizeof err)) ||
        !(s[1] = open_session(p, RT_DEVICE_CUDA, 0, 3, err, sizeof err)) ||
        set_batch(p->g, s, 2, 0, err, sizeof err) != 0 ||
        rt_session_run(s[0], err, sizeof err) != 0 || rt_session_run(s[1], err, sizeof err) != 0) {
        printf("FAIL %s: %s\n", what, err);
        nfailed++;
        goto done;
    }
    int ok = same_results(what, p->g, s[1], s[0]);
    /* the weights (and running statistics) of the training's checkpoint
       before (its optimizer state ignored), another batch */
    if (ok && trained[0]) {
        char at[160];
        snprintf(at, sizeof at, "%s, trained weights", what);
        for (int i = 0; i < 2 && ok; i++)
            ok = rt_session_load(s[i], trained, NULL, err, sizeof err) == 0;
        ok = ok && set_batch(p->g, s, 2, 1, err, sizeof err) == 0 &&
             rt_session_run(s[0], err, sizeof err) == 0 && rt_session_run(s[1], err, sizeof err) == 0;
        if (!ok)
            printf("FAIL %s: %s\n", at, err);
        ok = ok && same_results(at, p->g, s[1], s[0]);
    }
    if (ok) {
        npassed++;
        printf("ok %s%s\n", what, trained[0] ? ", initial and trained weights" : "");
    } else {
        nfailed++;
    }
done:
    rt_session_free(s[0]);
    rt_session_free(s[1]);
    kernels_free(&k);
    rt_plan_free(p);
}

/* Whether n is one of g's nodes. */
static int node_of(const ir_graph *g, const ir_node *n)
{
    for (const ir_node *m = g->head; m; m = m->next)
        if (m == n)
            return 1;
    return 0;
}

/* The GPU profile (rt_cuda_set_profile, as gnc run and train --profile=FILE
 * turn it on) of a cuda session that would otherwise replay a CUDA graph,
 * beside a cpu session: RUNS training steps agree, then the events are one
 * per step of the program with an IR node, run by run, device by device, in
 * step order: each of its step's node (of the plan's program) through the
 * last member of its fused group, start <= end, none starting before the
 * previous one on its stream (compute or communication) ended, every device
 * present, some of them taking time (the stand-in's clock); once profiling
 * is off, another run adds none. */
static void profiled(const char *model, int batch, int devices)
{
    enum { RUNS = 3 };
    char what[128], err[2048], at[192];
    snprintf(what, sizeof what, "%s profiled on the GPU, %d device%s", model, devices,
             devices > 1 ? "s, data parallel" : "");
    kernels k = {0};
    rt_session *s[2] = {NULL, NULL};
    rt_plan *p = plan_of(model, batch, devices, PT_DATA, 1, err, sizeof err);
    if (!p || kernels_register(p, &k, err, sizeof err) != 0 ||
        !(s[0] = open_session(p, RT_DEVICE_CPU, 0, 5, err, sizeof err)) ||
        !(s[1] = open_session(p, RT_DEVICE_CUDA, 0, 5, err, sizeof err))) {
        printf("FAIL %s: %s\n", what, err);
        nfailed++;
        goto done;
    }
    rt_cuda *gpu = rt_session_gpu(s[1]);
    rt_cuda_set_profile(gpu, 1);
    int ok = 1;
    for (int r = 0; r < RUNS && ok; r++) {
        if (step(p->g, s, 2, r, err, sizeof err) != 0) {
            printf("FAIL %s: step %d: %s\n", what, r, err);
            ok = 0;
            break;
        }
        snprintf(at, sizeof at, "%s: step %d", what, r);
        ok = same_results(at, p->g, s[1], s[0]);
    }
    int n = 0, i = 0, per_device[64] = {0}, timed = 0;
    const rt_event *ev = rt_cuda_events(gpu, &n);
    for (int r = 0; r < RUNS && ok; r++)
        for (int d = 0; d < k.prog->ndevices && d < 64 && ok; d++) {
            const cg_device *D = &k.prog->devices[d];
            double ended[2] = {-1e300, -1e300};   /* per stream: compute, communication */
            for (int j = 0; j < D->nsteps && ok; j++) {
                const cg_step *c = &D->steps[j];
                if (!c->node)
                    continue;
                if (i == n) {
                    printf("FAIL %s: %d events, too few for run %d of device %d\n", what, n, r, d);
                    ok = 0;
                    break;
                }
                const rt_event *e = &ev[i++];
                const ir_node *last = e->first;
                while (last && last->group && last->next && last->next->group == last->group)
                    last = last->next;
                int comm = c->kind == CG_STEP_COMM;
                if (e->device != d || e->first != c->node || !node_of(p->g, e->first) ||
                    e->last != last) {
                    printf("FAIL %s: event %d (device %d, %s) is not run %d's step %d of device "
                           "%d (%s)\n", what, i - 1, e->device,
                           e->first && e->first->nout ? e->first->out[0]->name : "no node", r,
                           j, d, c->what);
                    ok = 0;
                } else if (!(e->start_ms <= e->end_ms) || e->start_ms < ended[comm]) {
                    printf("FAIL %s: device %d, %s: %.6f .. %.6f ms, after the %s stream's "
                           "previous end %.6f\n", what, d, c->what, e->start_ms, e->end_ms,
                           comm ? "communication" : "compute", ended[comm]);
                    ok = 0;
                }
                ended[comm] = e->end_ms;
                per_device[d]++;
                timed += e->end_ms > e->start_ms;
            }
        }
    if (ok && i != n) {
        printf("FAIL %s: %d events, %d steps with a node in %d runs\n", what, n, i, RUNS);
        ok = 0;
    }
    for (int d = 0; d < k.prog->ndevices && d < 64 && ok; d++)
        if (!per_device[d]) {
            printf("FAIL %s: no events of device %d\n", what, d);
            ok = 0;
        }
    if (ok && !timed) {
        printf("FAIL %s: no step took time\n", what);
        ok = 0;
    }
    /* off: the next run (a CUDA graph's) records nothing */
    if (ok) {
        rt_cuda_set_profile(gpu, 0);
        int after;
        if (step(p->g, s, 2, RUNS, err, sizeof err) != 0) {
            printf("FAIL %s: a run after profiling: %s\n", what, err);
            ok = 0;
        } else if (rt_cuda_events(gpu, &after), after != n) {
            printf("FAIL %s: profiling off, a run added %d events\n", what, after - n);
            ok = 0;
        }
    }
    if (ok) {
        npassed++;
        printf("ok %s: %d events in %d runs, %d of them taking time\n", what, n, RUNS, timed);
    } else {
        nfailed++;
    }
done:
    rt_session_free(s[0]);
    rt_session_free(s[1]);
    kernels_free(&k);
    rt_plan_free(p);
}

/* ---------------------------------------------------------------- under MPI */

#ifdef GNC_HAVE_MPI
static int rank, ranks;

/* A cuda session of device `rank` of p across the ranks (collective). */
static rt_session *rank_session(const rt_plan *p, char *err, size_t errlen)
{
    rt_cuda_id id;
    int rc = rank == 0 ? rt_cuda_unique_id(fakedir, &id, err, errlen) : 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc) {
        snprintf(err, errlen, "rank 0 has no NCCL id");
        return NULL;
    }
    rt_session_options o = {0};
    o.device = RT_DEVICE_CUDA;
    o.seed = 5;
    o.libdir = fakedir;
    o.ranks = ranks, o.rank = rank, o.id = &id;
    o.host = rt_exec_new_rank(p->g, p->mp->offset_by_id, p->mp->device_bytes, rank, 0, err, errlen);
    return o.host ? rt_session_open(p, &o, err, errlen) : NULL;
}

static void across(const char *model, pt_strategy strategy)
{
    char what[128], err[2048], at[256];
    snprintf(what, sizeof what, "%s %s on %d ranks (rank %d)", model,
             strategy == PT_PIPELINE ? "pipeline" : "data parallel", ranks, rank);
    kernels k = {0};
    rt_session *s[2] = {NULL, NULL};   /* the whole program on cpu; this rank's on cuda */
    rt_plan *p = plan_of(model, 4, ranks, strategy, 1, err, sizeof err);
    int ok = p && kernels_register(p, &k, err, sizeof err) == 0 &&
             (s[0] = open_session(p, RT_DEVICE_CPU, 0, 5, err, sizeof err));
    /* every rank makes its session, even after a failure of its own: it is collective */
    s[1] = p ? rank_session(p, err, sizeof err) : NULL;
    ok = ok && s[1];
    if (!ok)
        printf("FAIL %s: %s\n", what, err);
    const ir_graph *g = p ? p->g : NULL;
    double first = 0, last = 0;
    for (int i = 0; i < 4 && ok; i++) {
        if (step_prefetched(g, s, 2, i, 4, err, sizeof err) != 0) {
            printf("FAIL %s: step %d: %s\n", what, i, err);
            ok = 0;
            break;
        }
        snprintf(at, sizeof at, "%s: step %d", what, i);
        if (rank == 0) {
            ok = same_results(at, g, s[1], s[0]);
            last = *(const float *)rt_session_data(s[1], g->loss);
            first = i == 0 ? last : first;
        }
    }
    /* the model's state on rank 0, as gnc train brings it there for a
       checkpoint; collective, so every rank takes part */
    int pulled = s[1] && rt_session_pull(s[1], err, sizeof err) == 0;
    if (s[1] && rt_exec_gather_params(rt_session_host(s[1]), err, sizeof err) != 0)
        pulled = 0;
    if (ok && !pulled) {
        printf("FAIL %s: gathering the parameters: %s\n", what, err);
        ok = 0;
    }
    snprintf(at, sizeof at, "%s: the parameters gathered on rank 0", what);
    for (int i = 0; ok && rank == 0 && i < g->nparams; i++)
        if (saved(g->params[i]))
            ok = same_value(at, g->params[i], s[1], s[0], ATOL, RTOL) && ok;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok) {
        npassed++;
        if (rank == 0)
            printf("ok %s: loss %.5f -> %.5f, the gathered parameters agree\n", what, first,
                   last);
    } else {
        nfailed++;
    }
    rt_session_free(s[0]);
    rt_session_free(s[1]);
    kernels_free(&k);
    rt_plan_free(p);
}

static int mpi_main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static char dir[4096];
    snprintf(dir, sizeof dir, "%.4000s/rank%d", workdir, rank);
    mkdir(dir, 0777);
    workdir = dir;
    rt_set_threads(1);
    if (ranks != 2) {
        if (rank == 0)
            printf("FAIL: run on 2 ranks, not %d\n", ranks);
        nfailed++;
    } else {
        across("lenet", PT_DATA);
        across("mlp", PT_PIPELINE);
    }
    if (rank == 0)
        printf("%d passed, %d failed (on %d ranks)\n", npassed, nfailed, ranks);
    dlclose(driver);
    MPI_Finalize();
    return nfailed ? 1 : 0;
}
#endif

/* rt_cuda_unique_id starts NCCL's bootstrap thread (the stand-in's too),
 * which runs the library's code after the call: the library must stay
 * loaded.  A child makes an id and lives on 100 ms (the thread wakes every
 * 10 ms); unloaded under the thread, it dies of SIGSEGV. */
static void unique_id_keeps_nccl(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char err[512];
        rt_cuda_id id;
        int rc = rt_cuda_unique_id(fakedir, &id, err, sizeof err);
        if (rc)
            printf("rt_cuda_unique_id: %s\n", err);
        nanosleep(&(struct timespec){0, 100000000}, NULL);
        fflush(stdout);
        _exit(rc ? 2 : 0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        printf("FAIL rt_cuda_unique_id: the process %s after making an id\n",
               pid > 0 && WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "failed");
        nfailed++;
    } else {
        printf("ok rt_cuda_unique_id: NCCL stays loaded under its bootstrap thread\n");
        npassed++;
    }
}

int main(int argc, char **argv)
{
    int mpi = argc == 5 && strcmp(argv[4], "--mpi") == 0;
    if (argc != 4 && !mpi) {
        fprintf(stderr, "usage: test_session_fake SOURCE_DIR WORK_DIR FAKE_DIR [--mpi]\n");
        return 2;
    }
    srcdir = argv[1], workdir = argv[2], fakedir = argv[3];
    if (!cg_have_nvrtc()) {
        printf("skipped: this build has no NVRTC\n");
        return 77;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/libcuda.so.1", fakedir);
    if (!(driver = dlopen(path, RTLD_NOW | RTLD_LOCAL)) || !dlsym(driver, "fakecuda_register")) {
        printf("FAIL %s is not the stand-in driver: %s\n", path,
               driver ? "no fakecuda_register" : dlerror());
        return 1;
    }
    if (mpi) {
#ifdef GNC_HAVE_MPI
        return mpi_main(argc, argv);
#else
        printf("skipped: built without MPI\n");
        return 77;
#endif
    }
    rt_set_threads(2);
    unique_id_keeps_nccl();
    training("lenet", 4, 1, 1);
    inference("lenet", 4, 1);
    training("bnnet", 4, 1, 2);
    inference("bnnet", 4, 1);
    training("lenet", 4, 2, 1);
    training("mlp", 4, 2, 1);
    profiled("lenet", 4, 1);
    profiled("mlp", 4, 2);
    dlclose(driver);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
