/* Training on the GPU executor against the CPU executor: the same program,
 * the same initial weights and batches, step after step.
 *
 *   test_gpu_train SOURCE_DIR WORK_DIR            on the GPU (label gpu)
 *   test_gpu_train SOURCE_DIR WORK_DIR --fake DIR on the stand-in libraries in
 *                                                 DIR (tests/fakecuda/), the
 *                                                 kernels emulated on the host
 *
 * On a GPU: resnet18 (batch 32, SGD with momentum) for 50 steps on one
 * device, eagerly and replayed as a CUDA graph; every step's loss within
 * 2e-3 + 2e-2 |loss| of the CPU executor's (the first within 1e-4 relative),
 * the graph's losses bitwise equal to the eager ones, and the loss falling
 * (the batches repeat, so the model learns them).  The same for lenet on two
 * devices sharing the GPU, and on two GPUs (NCCL) where two are present.  Exits 77
 * (skipped) without a driver or a GPU, or without NVRTC.
 *
 * On the stand-ins (label unit, CI): lenet and mlp for 4 steps on one and on
 * two devices (data parallel and pipeline; mlp also tensor parallel,
 * hybrid on four devices: NCCL's split communicators, send/recv, and
 * pipelines of 3 and 4 stages, 1F1B and GPipe), and again with devices
 * sharing GPUs (collectives without NCCL), within 1e-4 + 1e-4 |loss| per
 * step, the weights after the last step within 1e-4 + 1e-3 |w|, eager and graph bitwise equal, and the
 * next batch prefetched while a step runs; lenet data parallel also with its
 * convolutions as implicit-GEMM kernels (--conv igemm; on a GPU, resnet18),
 * and with cuDNN and igemm in turn (as --conv auto may choose), each
 * convolution first timed by rt_cuda_time_convs (on the stand-ins' clock,
 * exactly its steps' count times 0.001 ms).  With the stand-ins refusing
 * every capture (or instantiation), a graph executor warns once and runs
 * step by step, its losses still the eager ones (graph_faults).  Data
 * parallelism also with ZeRO stages 1 to 3, where stages 2 and 3 must
 * reduce-scatter a bucket of several gradients in one call, and stages 1 and
 * 2 all-gather a bucket of updated shards in one (one NCCL call over packed
 * staging, or copies and kernels where devices share a GPU).
 *
 *   mpirun -np N test_gpu_train SOURCE_DIR WORK_DIR [--fake DIR] --mpi
 *
 * runs N-device programs one device per process (rt_cuda_options.ranks:
 * NCCL communicators across the processes from rank 0's id, sends as NCCL
 * sends against receives posted up front): on two ranks lenet data parallel
 * and mlp pipeline (sends crossing both ways) and tensor parallel, on three
 * and four mlp pipelines of as many stages (1F1B and GPipe), on four mlp
 * hybrid and data parallel; every rank compares what its device holds with the CPU
 * executor running the whole program, the loss's rank the losses.  On GPUs
 * it needs one per rank. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen.h"
#include "cuda.h"
#include "exec.h"
#include "frontend.h"
#include "gpu_env.h"
#include "passes.h"

#ifdef GNC_HAVE_MPI
#include <mpi.h>
#endif

static int npassed, nfailed;
static int ranks = 1, rank;     /* under mpirun --mpi: the world; else one process */

/* ---------------------------------------------------------------- models */

static ir_graph *model(const char *src, const char *name, int batch, int devices,
                       pt_strategy strategy, pt_schedule schedule, int infer, int zero,
                       int accumulate)
{
    char path[4096], b[16];
    snprintf(path, sizeof path, "%s/models/%s.net", src, name);
    snprintf(b, sizeof b, "%d", batch);
    const char *dn[] = {"batch"}, *dv[] = {b};
    fe_options fo = {NULL, 1, dn, dv};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &fo, &d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    pt_options po = {0};
    po.devices = devices;
    po.strategy = strategy;
    po.schedule = schedule;
    po.zero = zero;
    po.accumulate = accumulate;
    if (strategy == PT_HYBRID)
        po.dp = 2, po.pp = devices / 2;
    int part = pt_partitions(&po);
    pm_options pm = {1, 0, NULL, NULL, stdout, part ? &po : NULL};
    if (!g || (!infer && ad_training_graph(g, &opt, &d) != 0) ||
        pm_run(g, pm_default_pipeline(!infer, 0, part), &pm, &d) != 0) {
        diag_print(&d, stdout);
        printf("FAIL %s: does not compile\n", name);
        nfailed++;
        if (g)
            ir_graph_free(g);
        g = NULL;
    }
    diag_free(&d);
    return g;
}

/* ---------------------------------------------------------------- data */

static uint64_t rng;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* Sample j's class in batch k (of four that repeat). */
static int class_of(int k, int64_t j)
{
    return (int)((j * 7 + k % 4 * 3) % 10);
}

/* Batch k of input v: labels < 10, and images in [0, 1) that show their
 * class (a bright tenth of the sample's values over noise), so that every
 * model can learn the batches. */
static void batch_of(const ir_value *v, int k, void *data)
{
    rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k % 4 + 1) + (uint64_t)strlen(v->name);
    int64_t n = ir_type_numel(&v->type), rows = v->type.rank ? v->type.dims[0] : 1;
    int64_t per = n / (rows ? rows : 1);
    for (int64_t i = 0; i < n; i++)
        if (v->type.dtype == IR_I32)
            ((int32_t *)data)[i] = class_of(k, i);
        else if (v->type.dtype == IR_I64)
            ((int64_t *)data)[i] = class_of(k, i);
        else
            ((float *)data)[i] = (float)(0.5 * uniform() +
                                         0.5 * (i % per * 10 / per == class_of(k, i / per)));
}

/* The inputs of step k into the CPU executor's buffers: the batch, and the
 * training scalars. */
static void step_inputs(const ir_graph *g, rt_exec *x, int k, float lr)
{
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        void *dst = rt_exec_data(x, v);
        if (strcmp(v->name, AD_INPUT_LR) == 0)
            *(float *)dst = lr;
        else if (strcmp(v->name, AD_INPUT_STEP) == 0)
            *(int64_t *)dst = k + 1;
        else if (strcmp(v->name, AD_INPUT_SEED) == 0)
            *(int64_t *)dst = 7;
        else
            batch_of(v, k, dst);
    }
}

/* ---------------------------------------------------------------- the case */

typedef struct {
    const char *model;
    int batch, devices, steps;
    pt_strategy strategy;
    float lr;
    double atol, rtol, first_rtol;   /* per step's loss; the first step's */
    double watol, wrtol;             /* the weights after the last step; < 0: not compared */
    const int *gpus;                 /* device d on GPU gpus[d]; NULL: on GPU d */
    cg_conv_impl conv;               /* convolutions by cuDNN, implicit-GEMM kernels, or
                                        cuDNN on channels-last copies */
    int mixed;                       /* each convolution by its own: cuDNN, igemm and
                                        cudnn-nhwc in turn, as --conv auto records, and
                                        each timed (rt_cuda_time_convs) */
    pt_schedule schedule;            /* pipelines: 1F1B (0) or GPipe */
    int infer;                       /* the inference program (no backward, no update):
                                        its outputs compared too, within atol/rtol */
    int free;                        /* steps that run on from the GPU's own weights;
                                        after them each step starts from the CPU
                                        executor's (0: every step runs on) */
    int zero;                        /* data parallelism: ZeRO's stage (NCCL's
                                        reduce-scatter and all-gather), 0: none */
    ir_precision precision;          /* the GPU program's; the CPU executor's is fp32 */
    int accumulate;                  /* gradient accumulation: microbatches a step */
} train_case;

static int near(double got, double want, double atol, double rtol)
{
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* The CPU executor's weights, running statistics and optimizer state into
 * the GPU's: over many steps at a training learning rate two runs drift
 * apart as their roundings grow (by step 7 of resnet18's, 5% in the loss
 * between any two of cuDNN, igemm and the CPU), so a long run's later
 * steps each check one step's arithmetic from the same start. */
static int follow_cpu(const ir_graph *g, rt_exec *x, rt_cuda *gx, char *err, size_t errlen)
{
    for (int i = 0; i < g->nparams; i++)
        if (rt_cuda_holds(gx, g->params[i]) &&
            rt_cuda_write(gx, -1, g->params[i], rt_exec_data(x, g->params[i]), err, errlen))
            return -1;
    return 0;
}

/* rt_cuda_time_convs on x, the program p of graph g: every convolution
 * timed, on the stand-ins by their clock exactly (each kernel and library
 * call 0.001 ms: the node's steps); 0, or -1 after saying why. */
static int check_conv_times(const gpu_env *env, rt_cuda *x, const cg_program *p,
                            const ir_graph *g, const char *what)
{
    char err[1024];
    double *ms = calloc((size_t)g->nvalues, sizeof *ms);
    int bad = rt_cuda_time_convs(x, ms, err, sizeof err) != 0;
    if (bad)
        printf("FAIL %s: rt_cuda_time_convs: %s\n", what, err);
    for (const ir_node *n = g->head; n && !bad; n = n->next) {
        if (!cg_is_conv(n))
            continue;
        int steps = 0;
        for (int d = 0; d < p->ndevices; d++)
            for (int s = 0; s < p->devices[d].nsteps; s++)
                steps += p->devices[d].steps[s].node == n;
        double t = ms[n->out[0]->id], want = 0.001 * steps;
        if (steps == 0 || !(t > 0) || (env->fake && fabs(t - want) > 1e-6)) {
            printf("FAIL %s: %%%s timed %.6f ms for %d steps\n", what, n->out[0]->name, t, steps);
            bad = 1;
        }
    }
    free(ms);
    return bad ? -1 : 0;
}

/* Across processes: two NCCL ids (for the eager run and the graph's), made
 * on rank 0 and broadcast.  Collective. */
static int share_ids(const gpu_env *env, rt_cuda_id ids[2], char *err, size_t errlen)
{
#ifdef GNC_HAVE_MPI
    int rc = 0;
    if (rank == 0)
        rc = rt_cuda_unique_id(env->fake, &ids[0], err, errlen) ||
             rt_cuda_unique_id(env->fake, &ids[1], err, errlen);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(ids, (int)(2 * sizeof *ids), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc && rank != 0)
        snprintf(err, errlen, "rank 0 has no NCCL id");
    return rc;
#else
    (void)env, (void)ids;
    snprintf(err, errlen, "built without MPI");
    return -1;
#endif
}

/* Whether any rank failed (every rank gets the answer). */
static int any_rank(int failed)
{
#ifdef GNC_HAVE_MPI
    if (ranks > 1)
        MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    return failed;
}

/* The program's losses over c->steps steps on the GPU (eager and graph) and
 * on the CPU executor. */
static void one(const gpu_env *env, const char *src, const train_case *c)
{
    char err[1024], what[224], how[96] = "";
    static const char *const strategies[] = {"data", "pipeline", "tensor", "hybrid"};
    char who[32] = "";
    if (ranks > 1)
        snprintf(who, sizeof who, " (rank %d of %d)", rank, ranks);
    if (c->mixed)
        snprintf(how, sizeof how, ", convolutions by each way in turn");
    else if (c->conv != CG_CONV_CUDNN)
        snprintf(how, sizeof how, ", --conv %s", cg_conv_name(c->conv));
    else if (c->zero)
        snprintf(how, sizeof how, ", ZeRO stage %d", c->zero);
    if (c->precision != PREC_FP32)
        snprintf(how + strlen(how), sizeof how - strlen(how), ", %s",
                 ir_precision_name(c->precision));
    if (c->accumulate > 1)
        snprintf(how + strlen(how), sizeof how - strlen(how), ", --accumulate %d", c->accumulate);
    snprintf(what, sizeof what, "%s%s, batch %d, %d device%s%s%s, %d steps%s%s%s", c->model,
             c->infer ? " inference" : "", c->batch, c->devices, c->devices > 1 ? "s " : "",
             c->devices > 1 ? strategies[c->strategy] : "",
             c->strategy != PT_PIPELINE ? "" : c->schedule == PT_GPIPE ? " gpipe" : " 1f1b",
             c->steps, c->gpus ? ", devices sharing GPUs" : "", how, who);
    ir_graph *g = model(src, c->model, c->batch, c->devices, c->strategy, c->schedule, c->infer,
                        c->zero, c->accumulate);
    if (!g)
        return;
    if (c->zero) { /* the bucketed paths: several tensors in one collective */
        int rs = c->zero < 2, ag = c->zero > 2;  /* found, or not wanted */
        for (const ir_node *n = g->head; n; n = n->next) {
            rs |= n->op == IR_OP_REDUCE_SCATTER && n->nin > 1;
            ag |= n->op == IR_OP_ALL_GATHER && n->nin > 1;
        }
        if (rs && ag) {
            npassed++;
        } else {
            printf("FAIL %s: no %s of several tensors\n", what,
                   rs ? "all_gather" : "reduce_scatter");
            nfailed++;
        }
    }
    rt_cuda_options oe = {0}, og = {0};
    rt_cuda_id ids[2];
    oe.eager = 1;
    oe.gpus = og.gpus = c->gpus;
    if (ranks > 1) {
        oe.ranks = og.ranks = ranks;
        oe.rank = og.rank = rank;
        oe.id = &ids[0], og.id = &ids[1];
    }
    int failed = 0;
    diag d;
    diag_init(&d);
    mp_plan *mp = mp_plan_graph(g);
    cg_options o = cg_options_default();
    o.deterministic = 1; /* graph replay bitwise equal to eager */
    o.conv = c->conv;
    o.precision = c->precision;
    signed char *choice = c->mixed ? malloc((size_t)g->nvalues) : NULL;
    if (choice) {
        int k = 0;
        memset(choice, -1, (size_t)g->nvalues);
        for (const ir_node *n = g->head; n; n = n->next)
            if (cg_is_conv(n))
                choice[n->out[0]->id] = (signed char)(k++ % CG_CONV_NIMPLS);
    }
    o.conv_choice = choice;
    cg_program *p = cg_generate(g, mp, &o, &d);
    free(choice);
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    gpu_run *eager = NULL, *graph = NULL;
    double *cpu = calloc((size_t)c->steps, sizeof *cpu), *ge = calloc((size_t)c->steps, sizeof *ge),
           *gg = calloc((size_t)c->steps, sizeof *gg);
    int shared = ranks > 1 ? share_ids(env, ids, err, sizeof err) : 0;
    /* on the stand-ins: peer copies go GPU to GPU (peer access enabled) */
    long (*staged)(void) = NULL;
    if (env->fake)
        *(void **)&staged = dlsym(env->driver, "fakecuda_staged_peer_copies");
    long staged0 = staged ? staged() : 0;

    if (!p || !x || shared || cg_compile(p, NULL, NULL, err, sizeof err) ||
        !(eager = gpu_open_ex(env, p, &oe, err, sizeof err)) ||
        !(graph = gpu_open_ex(env, p, &og, err, sizeof err))) {
        if (!p)
            diag_print(&d, stdout);
        printf("FAIL %s: %s\n", what, p ? err : "cg_generate failed");
        failed = 1;
        goto done;
    }
    if (c->mixed && check_conv_times(env, eager->x, p, g, what)) {
        failed = 1;
        goto done;
    }
    rt_exec_init_params(x, 5);
    if (rt_cuda_init_params(eager->x, 5, err, sizeof err) ||
        rt_cuda_init_params(graph->x, 5, err, sizeof err)) {
        printf("FAIL %s: %s\n", what, err);
        failed = 1;
        goto done;
    }
    const ir_value *loss = g->loss;
    int ld = loss->def ? loss->def->device : 0;
    int has_loss = ranks == 1 || rank == ld; /* this process reads the loss */
    int ok = 1;
    /* the graph's next step launched while the eager one runs; not across
       processes, where the two runs' communicators would have calls in
       flight on one device at once (NCCL's rule, tests/fakecuda/nccl.c) */
    int ahead = ranks == 1;
    for (int k = 0; k < c->steps && ok; k++) {
        step_inputs(g, x, k, c->lr);
        /* eager: inputs written, then run; the graph: step 0's written (every
         * step's when not ahead), the next ones prefetched while the step
         * before runs */
        for (int i = 0; i < g->ninputs && ok; i++) {
            const ir_value *v = g->inputs[i];
            ok = !rt_cuda_write(eager->x, -1, v, rt_exec_data(x, v), err, sizeof err) &&
                 ((k > 0 && ahead) ||
                  !rt_cuda_write(graph->x, -1, v, rt_exec_data(x, v), err, sizeof err));
        }
        if (c->free && k >= c->free)
            ok = ok && !follow_cpu(g, x, eager->x, err, sizeof err);
        float l = 0;
        ok = ok && !rt_exec_run(x, err, sizeof err) && !rt_cuda_run(eager->x, err, sizeof err) &&
             (!has_loss || !rt_cuda_read(eager->x, ld, loss, &l, err, sizeof err));
        cpu[k] = *(const float *)rt_exec_data(x, loss);
        ge[k] = l;
        if (k == 0 || !ahead)
            ok = ok && !rt_cuda_launch(graph->x, err, sizeof err);
        if (ok && ahead && k + 1 < c->steps) {
            step_inputs(g, x, k + 1, c->lr); /* set again at the next step */
            for (int i = 0; i < g->ninputs && ok; i++)
                ok = !rt_cuda_prefetch(graph->x, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]),
                                       err, sizeof err);
        }
        ok = ok && !rt_cuda_wait(graph->x, err, sizeof err) &&
             (!has_loss || !rt_cuda_read(graph->x, ld, loss, &l, err, sizeof err));
        gg[k] = l;
        if (ok && c->free && k + 1 >= c->free && k + 1 < c->steps)
            ok = !follow_cpu(g, x, graph->x, err, sizeof err);
        if (ok && ahead && k + 1 < c->steps)
            ok = !rt_cuda_launch(graph->x, err, sizeof err);
        if (!ok)
            printf("FAIL %s: step %d: %s\n", what, k, err);
    }
    if (!ok) {
        failed = 1;
        goto done;
    }
    int bad = 0;
    double worst = 0; /* the largest relative difference in a step's loss */
    double wworst = 0; /* 16-bit: the largest of a weight's (2-norm) */
    for (int k = 0; k < c->steps && has_loss; k++) {
        worst = fmax(worst, fabs(ge[k] - cpu[k]) / fmax(fabs(cpu[k]), 1e-30));
        double tol_r = k == 0 ? c->first_rtol : c->rtol, tol_a = k == 0 ? 0 : c->atol;
        if (!near(ge[k], cpu[k], tol_a, tol_r) && bad++ < 3)
            printf("FAIL %s: step %d: loss %.7g on the GPU, %.7g on the CPU\n", what, k, ge[k],
                   cpu[k]);
        if (memcmp(&ge[k], &gg[k], sizeof ge[k]) != 0 && bad++ < 3)
            printf("FAIL %s: step %d: graph replay's loss %.9g, eager %.9g\n", what, k, gg[k],
                   ge[k]);
    }
    for (int i = 0; c->infer && i < g->noutputs; i++) {
        const ir_value *v = g->outputs[i].value;
        int64_t n = ir_type_numel(&v->type);
        if (v->type.dtype != IR_F32 || !rt_cuda_holds(eager->x, v))
            continue;
        float *a = malloc((size_t)n * sizeof *a + 4), *b = malloc((size_t)n * sizeof *b + 4);
        const float *ref = rt_exec_data(x, v);
        if (rt_cuda_read(eager->x, -1, v, a, err, sizeof err) ||
            rt_cuda_read(graph->x, -1, v, b, err, sizeof err)) {
            printf("FAIL %s: %s\n", what, err);
            bad++;
        } else if (memcmp(a, b, (size_t)n * sizeof *a) != 0 && bad++ < 4) {
            printf("FAIL %s: output %s: graph replay differs from eager\n", what, v->name);
        }
        for (int64_t j = 0; j < n; j++)
            if (!near(a[j], ref[j], c->atol, c->rtol)) {
                if (bad++ < 4)
                    printf("FAIL %s: output %s[%lld] %.7g on the GPU, %.7g on the CPU\n", what,
                           v->name, (long long)j, a[j], ref[j]);
                break;
            }
        free(a);
        free(b);
    }
    for (int d = 0; p->loss_scale.enabled && d < p->ndevices; d++) {
        /* the scaler's state after the last step: these short runs' gradients
           stay finite, so the first scale on every device, its good steps
           counted alike eager and replayed (the overflow flag is all-reduced:
           a device that skipped alone would differ from the CPU's weights) */
        float se = 0, sg = 0, want = p->loss_scale.init;
        int ne = 0, ng = 0;
        int re = rt_cuda_loss_scale(eager->x, d, &se, &ne, err, sizeof err);
        int rg = re ? re : rt_cuda_loss_scale(graph->x, d, &sg, &ng, err, sizeof err);
        if (re == 1 || rg == 1)
            continue; /* another process's device */
        if ((re || rg) && bad++ < 4)
            printf("FAIL %s: %s\n", what, err);
        else if ((se != want || sg != want || ne != c->steps || ng != c->steps) && bad++ < 4)
            printf("FAIL %s: device %d's loss scale %g (graph %g), %d good steps (graph %d); "
                   "want %g and %d\n", what, d, se, sg, ne, ng, want, c->steps);
    }
    if (rt_cuda_warning(graph->x) && bad++ < 4)
        printf("FAIL %s: the graph executor warns: %s\n", what, rt_cuda_warning(graph->x));
    /* its runs after the first replay graphs: one of every device, or one a
       device where a host thread drives each GPU through NCCL */
    int graphs = rt_cuda_graphs(graph->x), mine = ranks > 1 ? 1 : p->ndevices;
    if (c->steps > 1 && graphs != 1 && graphs != mine && bad++ < 4)
        printf("FAIL %s: the graph executor replays %d CUDA graphs, not 1 or %d\n", what, graphs,
               mine);
    if (staged && staged() != staged0 && bad++ < 4)
        printf("FAIL %s: %ld peer copies went through the host (no peer access)\n", what,
               staged() - staged0);
    if (env->fake) { /* split communicators share the world's resources */
        char path[4096];
        snprintf(path, sizeof path, "%s/libnccl.so.2", env->fake);
        void *nccl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        int (*unshared)(void) = NULL;
        if (nccl)
            *(void **)&unshared = dlsym(nccl, "fakecuda_nccl_unshared_splits");
        if (unshared && unshared() && bad++ < 4)
            printf("FAIL %s: %d split communicators without splitShare\n", what, unshared());
        if (nccl)
            dlclose(nccl);
    }
    if (has_loss && c->steps >= 10 && !(ge[c->steps - 1] < ge[0] - 0.05) && bad++ < 4)
        printf("FAIL %s: the loss does not fall: %.5g at the first step, %.5g at the last\n",
               what, ge[0], ge[c->steps - 1]);
    for (int i = 0; c->watol >= 0 && i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (v->type.dtype != IR_F32 || !rt_cuda_holds(eager->x, v))
            continue;
        int64_t n = ir_type_numel(&v->type);
        float *w = malloc((size_t)n * sizeof *w + 4);
        const float *ref = rt_exec_data(x, v);
        if (rt_cuda_read(eager->x, -1, v, w, err, sizeof err)) {
            printf("FAIL %s: %s\n", what, err);
            bad++;
        }
        if (c->precision == PREC_FP32) {
            for (int64_t j = 0; j < n; j++)
                if (!near(w[j], ref[j], c->watol, c->wrtol)) {
                    if (bad++ < 4)
                        printf("FAIL %s: weight %s[%lld] %.7g on the GPU, %.7g on the CPU\n",
                               what, v->name, (long long)j, w[j], ref[j]);
                    break;
                }
        } else { /* 16-bit: each tensor as a whole, |w - ref| / |ref| (2-norms) */
            double e = 0, r = 0;
            for (int64_t j = 0; j < n; j++)
                e += ((double)w[j] - ref[j]) * ((double)w[j] - ref[j]), r += (double)ref[j] * ref[j];
            double rel = sqrt(e) / fmax(sqrt(r), 1e-30);
            wworst = fmax(wworst, rel);
            if (!(sqrt(e) <= c->watol + c->wrtol * sqrt(r)) && bad++ < 4)
                printf("FAIL %s: %s on the GPU %.3g of its norm from the CPU's\n", what,
                       v->name, rel);
        }
        free(w);
    }
    failed = bad != 0;
    char wsay[64] = "";
    if (wworst > 0)
        snprintf(wsay, sizeof wsay, "; weights apart by %.1e of their norm", wworst);
    if (graphs > 1)
        snprintf(wsay + strlen(wsay), sizeof wsay - strlen(wsay), "; %d graphs", graphs);
    if (!failed && has_loss)
        printf("ok %s: loss %.5f -> %.5f (CPU %.5f -> %.5f; steps apart by %.1e at most%s)\n",
               what, ge[0], ge[c->steps - 1], cpu[0], cpu[c->steps - 1], worst, wsay);
done:
    if (any_rank(failed))
        nfailed++;
    else
        npassed++;
    free(cpu);
    free(ge);
    free(gg);
    gpu_close(eager);
    gpu_close(graph);
    rt_exec_free(x);
    cg_program_free(p);
    mp_plan_free(mp);
    ir_graph_free(g);
    diag_free(&d);
}

/* The way back to eager launches, on the stand-ins with every capture
 * refused or every graph's instantiation (GNC_FAKECUDA_GRAPHS): a graph
 * executor's first run is eager (no capture tried, no warning), its second
 * tries, warns and runs step by step, and every loss equals an eager
 * executor's bitwise.  mlp on two GPUs, data parallel, drives them through
 * NCCL from a thread each: a capture on every GPU, all dropped where one
 * fails, so that every rank launches alike. */
static void graph_faults(const gpu_env *env, const char *src)
{
    static const char *const faults[] = {"invalidate", "noinstantiate"};
    for (int f = 0; f < 2; f++)
        for (int devices = 1; devices <= 2; devices++) {
            char err[1024], what[128];
            snprintf(what, sizeof what, "GNC_FAKECUDA_GRAPHS=%s, mlp on %d GPU%s", faults[f],
                     devices, devices > 1 ? "s" : "");
            ir_graph *g = model(src, "mlp", 4, devices, PT_DATA, PT_1F1B, 0, 0, 0);
            if (!g)
                continue;
            diag d;
            diag_init(&d);
            mp_plan *mp = mp_plan_graph(g);
            cg_options o = cg_options_default();
            o.deterministic = 1; /* graph replay bitwise equal to eager */
            cg_program *p = cg_generate(g, mp, &o, &d);
            rt_exec *x = rt_exec_new(g, err, sizeof err);
            rt_cuda_options oe = {0}, og = {0};
            oe.eager = 1;
            gpu_run *eager = NULL, *graph = NULL;
            int bad = !p || !x || cg_compile(p, NULL, NULL, err, sizeof err) ||
                      !(eager = gpu_open_ex(env, p, &oe, err, sizeof err)) ||
                      !(graph = gpu_open_ex(env, p, &og, err, sizeof err)) ||
                      rt_cuda_init_params(eager->x, 5, err, sizeof err) ||
                      rt_cuda_init_params(graph->x, 5, err, sizeof err);
            if (bad)
                printf("FAIL %s: %s\n", what, p ? err : "cg_generate failed");
            setenv("GNC_FAKECUDA_GRAPHS", faults[f], 1);
            for (int k = 0; k < 3 && !bad; k++) {
                float le = 0, lg = 0;
                step_inputs(g, x, k, 0.02f);
                for (int i = 0; i < g->ninputs && !bad; i++)
                    bad = rt_cuda_write(eager->x, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]),
                                        err, sizeof err) ||
                          rt_cuda_write(graph->x, -1, g->inputs[i], rt_exec_data(x, g->inputs[i]),
                                        err, sizeof err);
                bad = bad || rt_cuda_run(eager->x, err, sizeof err) ||
                      rt_cuda_run(graph->x, err, sizeof err) ||
                      rt_cuda_read(eager->x, -1, g->loss, &le, err, sizeof err) ||
                      rt_cuda_read(graph->x, -1, g->loss, &lg, err, sizeof err);
                if (bad) {
                    printf("FAIL %s: step %d: %s\n", what, k, err);
                    break;
                }
                const char *w = rt_cuda_warning(graph->x);
                int want = k > 0;
                if (memcmp(&le, &lg, sizeof le) != 0 || !w != !want ||
                    (w && !strstr(w, "running step by step from now on"))) {
                    printf("FAIL %s: step %d: loss %.9g eager, %.9g; warning %s\n", what, k, le,
                           lg, w ? w : "none");
                    bad = 1;
                }
            }
            unsetenv("GNC_FAKECUDA_GRAPHS");
            if (!bad && rt_cuda_graphs(graph->x)) {
                printf("FAIL %s: graphs replayed after the fault\n", what);
                bad = 1;
            }
            if (!bad)
                printf("ok %s: the first run eager, then one warning and eager runs\n", what);
            bad ? nfailed++ : npassed++;
            gpu_close(eager);
            gpu_close(graph);
            rt_exec_free(x);
            cg_program_free(p);
            mp_plan_free(mp);
            ir_graph_free(g);
            diag_free(&d);
        }
}

/* tools/gpu_check.sh's steps, each alone (--case NAME):
 *   convs   resnet18 (lenet on the stand-ins) with its convolutions by each
 *           way, cuDNN, cuDNN on channels-last copies and implicit-GEMM
 *           kernels: the inference program's outputs and loss, and two
 *           training steps, against the CPU executor, graph against eager;
 *   shared  every strategy on program devices sharing one GPU (collectives
 *           without NCCL) against the CPU executor: lenet data parallel, mlp
 *           pipelines of 3 and 4 stages, tensor, hybrid, ZeRO 1 to 3,
 *           --accumulate, and bf16 and fp16 programs (their weights too). */
/* A 16-bit program's losses against the CPU executor's fp32 ones: bf16
 * keeps 8 bits of mantissa (3 decimal digits), fp16 11. */
#define BF16_ATOL 2e-2
#define BF16_RTOL 3e-2
#define FP16_ATOL 5e-3
#define FP16_RTOL 5e-3
#define BF16_WATOL 1e-6
#define BF16_WRTOL 0.2          /* of a tensor's 2-norm (measured on the stand-ins: 0.09) */
#define FP16_WATOL 1e-6
#define FP16_WRTOL 0.1          /* (0.04); gradients unscaled twice are 1.0 apart */

static int run_case(const gpu_env *env, const char *src, const char *name)
{
    static const int one_gpu[] = {0, 0};
    const char *m = env->fake ? "lenet" : "resnet18";
    int b = env->fake ? 4 : 8;
    if (strcmp(name, "convs") == 0) {
        static const cg_conv_impl ways[] = {CG_CONV_CUDNN, CG_CONV_CUDNN_NHWC, CG_CONV_IGEMM};
        for (int w = 0; w < 3; w++)
            for (int infer = 1; infer >= 0; infer--) {
                train_case c = {m, b, 1, infer ? 1 : 2, PT_DATA, 0.02f, 2e-3, 2e-2, 1e-3, -1, -1,
                                NULL, ways[w], 0, PT_1F1B, infer, 0, 0, PREC_FP32, 0};
                one(env, src, &c);
            }
        return 0;
    }
    if (strcmp(name, "shared") == 0) {
        /* every strategy on program devices that share one GPU (their
           collectives copies and reduction kernels, their messages mailbox
           copies): what one GPU can prove of the multi-GPU programs */
        static const int one4[] = {0, 0, 0, 0};
        int st = env->fake ? 4 : 20;
        int f16 = env->fake ? 0 : 3; /* on a GPU, 16-bit steps from the CPU's weights after
                                        the third: each checks one step, not 20 steps' drift */
        const train_case cases[] = {
            {"lenet", env->fake ? 4 : 32, 2, env->fake ? 4 : 50, PT_DATA, 0.05f, 2e-3, 2e-2, 1e-4,
             -1, -1, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, env->fake ? 0 : 3, 0, PREC_FP32, 0},
            {"mlp", 24, 3, st, PT_PIPELINE, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN,
             0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 24, 4, st, PT_PIPELINE, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN,
             0, PT_GPIPE, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 8, 2, st, PT_TENSOR, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 8, 4, st, PT_HYBRID, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"lenet", 8, 2, st, PT_DATA, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 1, PREC_FP32, 0},
            {"mlp", 8, 2, st, PT_DATA, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 2, PREC_FP32, 0},
            {"mlp", 8, 4, st, PT_DATA, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 3, PREC_FP32, 0},
            /* gradient accumulation: data parallel, and a pipeline's microbatches twice */
            {"lenet", 8, 2, st, PT_DATA, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN, 0,
             PT_1F1B, 0, 0, 0, PREC_FP32, 2},
            {"mlp", 24, 3, st, PT_PIPELINE, 0.02f, 2e-3, 2e-2, 1e-4, -1, -1, one4, CG_CONV_CUDNN,
             0, PT_1F1B, 0, 0, 0, PREC_FP32, 2},
            /* 16-bit programs against the CPU executor's fp32, the weights
               too (a loss alone hid fp16's gradients unscaled twice on several
               devices): bf16's rounding, and fp16's loss scaling */
            {"lenet", 8, 2, st, PT_DATA, 0.02f, BF16_ATOL, BF16_RTOL, BF16_RTOL, BF16_WATOL,
             BF16_WRTOL, one4, CG_CONV_CUDNN, 0, PT_1F1B, 0, f16, 0, PREC_BF16, 0},
            {"mlp", 8, 2, st, PT_TENSOR, 0.02f, BF16_ATOL, BF16_RTOL, BF16_RTOL, BF16_WATOL,
             BF16_WRTOL, one4, CG_CONV_CUDNN, 0, PT_1F1B, 0, f16, 0, PREC_BF16, 0},
            {"mlp", 24, 3, st, PT_PIPELINE, 0.02f, FP16_ATOL, FP16_RTOL, FP16_RTOL, FP16_WATOL,
             FP16_WRTOL, one4, CG_CONV_CUDNN, 0, PT_1F1B, 0, f16, 0, PREC_FP16, 0},
            {"lenet", 8, 2, st, PT_DATA, 0.02f, FP16_ATOL, FP16_RTOL, FP16_RTOL, FP16_WATOL,
             FP16_WRTOL, one4, CG_CONV_CUDNN, 0, PT_1F1B, 0, f16, 1, PREC_FP16, 2},
            {"mlp", 8, 2, st, PT_DATA, 0.02f, FP16_ATOL, FP16_RTOL, FP16_RTOL, FP16_WATOL,
             FP16_WRTOL, one4, CG_CONV_CUDNN, 0, PT_1F1B, 0, f16, 0, PREC_FP16, 0},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            one(env, src, &cases[i]);
        return 0;
    }
    printf("FAIL: no case '%s' (convs, shared)\n", name);
    return -1;
}

static int in_one_process(const char *src, const char *work, const char *fake, const char *only)
{
    char err[512];
    gpu_env env;
    int rc = gpu_env_init(&env, fake, work, err, sizeof err);
    if (rc) {
        printf("%s: %s\n", rc == 77 ? "skipped" : "FAIL", err);
        return rc == 77 ? 77 : 1;
    }
    rt_set_threads(fake ? 2 : 16);
    if (only) {
        if (run_case(&env, src, only))
            nfailed++;
    } else if (fake) {        static const int one_gpu[] = {0, 0, 0, 0}, two_gpus[] = {0, 0, 1, 1};
        static const train_case cases[] = {
            {"lenet", 4, 1, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 1, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"lenet", 4, 2, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_TENSOR, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 8, 4, 4, PT_HYBRID, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* 1F1B's sends cross (each stage sends before it receives): one NCCL
               group each with the receive after it, a graph a GPU */
            {"lenet", 8, 4, 4, PT_HYBRID, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* 3 and 4 stages: the middle ones receive from both sides */
            {"mlp", 24, 3, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 24, 3, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_GPIPE, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 24, 4, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 24, 4, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_GPIPE, 0, 0, 0, PREC_FP32, 0},
            /* devices that share a GPU: collectives as copies and reduction kernels */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_TENSOR, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            {"mlp", 8, 4, 4, PT_HYBRID, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, two_gpus, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* the convolutions as implicit-GEMM kernels (split k in the gradients) */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_IGEMM, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* cuDNN on channels-last copies */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN_NHWC, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* each convolution its own way (--conv auto), each timed */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 1, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
            /* from the third step on, each step from the CPU executor's weights
               (replicated, and split across the devices) */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 2, 0, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_TENSOR, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 2, 0, PREC_FP32, 0},
            /* ZeRO: state, gradients, parameters sharded (reduce-scatter, all-gather) */
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 1, PREC_FP32, 0},
            {"mlp", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 2, PREC_FP32, 0},
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 3, PREC_FP32, 0},
            {"mlp", 8, 4, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 3, PREC_FP32, 0},
            {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 2, PREC_FP32, 0},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            one(&env, src, &cases[i]);
        graph_faults(&env, src);
    } else {
        static const int one_gpu[] = {0, 0};
        static const train_case resnet = {"resnet18", 32, 1, 50, PT_DATA, 0.05f, 2e-3, 2e-2, 1e-4,
                                          -1, -1, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        static const train_case lenet2 = {"lenet", 32, 2, 50, PT_DATA, 0.05f, 2e-3, 2e-2, 1e-4, -1,
                                          -1, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        static const train_case shared = {"lenet", 32, 2, 50, PT_DATA, 0.05f, 2e-3, 2e-2, 1e-4, -1,
                                          -1, one_gpu, CG_CONV_CUDNN, 0, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        static const train_case resnet_igemm = {"resnet18", 32, 1, 50, PT_DATA, 0.05f, 2e-3, 2e-2,
                                                1e-4, -1, -1, NULL, CG_CONV_IGEMM, 0, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        static const train_case resnet_nhwc = {"resnet18", 32, 1, 50, PT_DATA, 0.05f, 2e-3, 2e-2,
                                               1e-4, -1, -1, NULL, CG_CONV_CUDNN_NHWC, 0, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        static const train_case resnet_mixed = {"resnet18", 32, 1, 50, PT_DATA, 0.05f, 2e-3, 2e-2,
                                                1e-4, -1, -1, NULL, CG_CONV_CUDNN, 1, PT_1F1B, 0, 3, 0, PREC_FP32, 0};
        one(&env, src, &resnet);
        one(&env, src, &shared);
        one(&env, src, &resnet_igemm);
        one(&env, src, &resnet_nhwc);
        one(&env, src, &resnet_mixed);
        if (env.gpus >= 2)
            one(&env, src, &lenet2);
        else
            printf("not run: lenet on 2 devices on 2 GPUs (one GPU here)\n");
    }
    gpu_env_free(&env);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}

/* Under mpirun: the programs of as many devices as there are ranks, one
 * device per process.  Every rank returns the same code. */
static int across_processes(int argc, char **argv, const char *src, const char *work,
                            const char *fake)
{
#ifdef GNC_HAVE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char err[512], dir[4096];
    /* each rank builds its own host emulations */
    snprintf(dir, sizeof dir, "%s/rank%d", work, rank);
    mkdir(dir, 0777);
    gpu_env env;
    int rc = gpu_env_init(&env, fake, dir, err, sizeof err);
    if (!rc && env.gpus < ranks) {
        snprintf(err, sizeof err, "%d GPU%s for %d ranks", env.gpus, env.gpus == 1 ? "" : "s",
                 ranks);
        rc = 77;
    }
    if (any_rank(rc != 0)) {
        if (rank == 0)
            printf("%s: %s\n", rc == 77 ? "skipped" : "FAIL", rc ? err : "another rank failed");
        gpu_env_free(&env);
        MPI_Finalize();
        return rc == 77 ? 77 : 1;
    }
    rt_set_threads(1);
    static const train_case two[] = {
        {"lenet", 4, 2, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 4, 2, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"lenet", 4, 2, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 4, 2, 4, PT_TENSOR, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
    };
    /* 3 and 4 stages: a middle stage's receives from both sides, which
       deadlocked on one receiving stream under 1F1B */
    static const train_case three[] = {
        {"mlp", 24, 3, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 24, 3, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_GPIPE, 0, 0, 0, PREC_FP32, 0},
    };
    static const train_case four[] = {
        {"mlp", 8, 4, 4, PT_HYBRID, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 8, 4, 4, PT_DATA, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 24, 4, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_1F1B, 0, 0, 0, PREC_FP32, 0},
        {"mlp", 24, 4, 4, PT_PIPELINE, 0.02f, 1e-4, 1e-4, 1e-4, 1e-4, 1e-3, NULL, CG_CONV_CUDNN, 0, PT_GPIPE, 0, 0, 0, PREC_FP32, 0},
    };
    const train_case *cases = ranks == 2 ? two : ranks == 3 ? three : ranks == 4 ? four : NULL;
    size_t n = ranks == 2 ? sizeof two / sizeof *two : ranks == 3 ? sizeof three / sizeof *three
               : ranks == 4 ? sizeof four / sizeof *four : 0;
    if (!n && rank == 0)
        printf("FAIL: run on 2, 3 or 4 ranks, not %d\n", ranks);
    for (size_t i = 0; i < n; i++)
        one(&env, src, &cases[i]);
    gpu_env_free(&env);
    if (rank == 0)
        printf("%d passed, %d failed (on %d ranks)\n", npassed, nfailed, ranks);
    MPI_Finalize();
    return nfailed || !n ? 1 : 0;
#else
    (void)argc, (void)argv, (void)src, (void)work, (void)fake;
    printf("skipped: built without MPI\n");
    return 77;
#endif
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_gpu_train SOURCE_DIR WORK_DIR [--fake DIR] [--mpi | --case "
                "convs|shared]\n");
        return 2;
    }
    const char *fake = argc >= 5 && strcmp(argv[3], "--fake") == 0 ? argv[4] : NULL;
    const char *only = argc >= 5 && strcmp(argv[argc - 2], "--case") == 0 ? argv[argc - 1] : NULL;
    int mpi = strcmp(argv[argc - 1], "--mpi") == 0;
    return mpi ? across_processes(argc, argv, argv[1], argv[2], fake)
               : in_one_process(argv[1], argv[2], fake, only);
}
