/* Partitioned programs under MPI, one device per process (rt_exec_new_rank,
 * runtime/cpu/comm_mpi.c), against the same compiled program run in one process
 * (rt_exec_new_planned, runtime/cpu/comm.c).  Run it under mpirun; what it checks
 * depends on the world's size:
 *
 *   2 ranks: lenet, mlp and resnet18 at a small batch, with data parallelism
 *     (and sync-bn where there is batchnorm), pipelines of 1 microbatch and of
 *     the default 4 (1F1B), and deterministic data parallelism; lenet and mlp
 *     also with GPipe, hybrid dp=2 x pp=1 and dp=1 x pp=2, and tensor
 *     parallelism:
 *       - inference: every output, on rank 0, bitwise the in-process run's;
 *       - training: the losses of 10 steps of SGD with momentum, and then every
 *         parameter, buffer and momentum (gathered to rank 0), bitwise the
 *         in-process run's;
 *     and rt_exec_new_rank refuses a program of another device count, and
 *     gives up on a rank that comes late, at its deadline.
 *   4 ranks: tests/mpi/collectives.gir (every collective over sub-groups and
 *     groups out of device order, along inner axes, and devices sending to
 *     each other before receiving), as loaded and planned: every rank's
 *     results bitwise; lenet with hybrid dp=2 x pp=2 (its gradients summed over
 *     the sub-groups {0, 2} and {1, 3}) and deterministic data parallelism
 *     bitwise; lenet with data parallelism within 1e-5 (see below).
 *
 * Why bitwise: the executor computes the same bits on any number of threads
 * and inside a parallel region (runtime/cpu/exec.h), so each device computes the
 * same bits in its own process as on its thread of the one-process run; and a
 * sum over two ranks is a + b in any order.  A sum over four ranks is
 * associated as MPI likes ((a0 + a1) + (a2 + a3) in Open MPI's recursive
 * doubling), comm.c's as ((a0 + a1) + a2) + a3, so lenet x4 data parallelism
 * is held to a tolerance (and the line says whether it came out bitwise all
 * the same); deterministic mode adds its terms itself, in a fixed order.
 *
 * Rank 0 prints a line per case and the counts; every rank exits with the
 * same status.  A failure that leaves ranks out of step aborts the job.
 *
 *   mpirun -np 2 test_mpi SOURCE_DIR [MODEL]     (only MODEL's cases)
 *   mpirun -np 4 test_mpi SOURCE_DIR */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define STEPS 10

static int passed, failed, rank, size;
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
    fprintf(stderr, "FAIL (rank %d): ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A failure that the other ranks cannot know of: the job ends. */
static _Noreturn void die(const char *what, const char *err)
{
    fprintf(stderr, "test_mpi: rank %d: %s: %s\n", rank, what, err);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

typedef struct {
    ir_graph *g;
    mp_plan *plan;
} program;

static void program_free(program *p)
{
    mp_plan_free(p->plan);
    if (p->g)
        ir_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

/* MODEL at batch through the default pipeline, partitioned by o, planned: the
 * same on every rank. */
static void compile(const char *model, int batch, int train, const pt_options *o, program *p)
{
    diag d;
    diag_init(&d);
    memset(p, 0, sizeof *p);
    if (!(p->g = th_compile(root, model, batch, train, NULL, o, &d, &p->plan))) {
        diag_print(&d, stderr);
        die(model, "does not compile");
    }
    diag_free(&d);
}

static rt_exec *rank_exec(const program *p)
{
    char err[512];
    rt_exec *x = rt_exec_new_rank(p->g, p->plan->offset_by_id, p->plan->device_bytes, rank, 0, err,
                                  sizeof err);
    if (!x)
        die("rt_exec_new_rank", err);
    return x;
}

static rt_exec *local_exec(const program *p)
{
    char err[512];
    rt_exec *x = rt_exec_new_planned(p->g, p->plan->offset_by_id, p->plan->device_bytes, err,
                                     sizeof err);
    if (!x)
        die("rt_exec_new_planned", err);
    return x;
}

/* The inputs of step (as the other tests feed them), on every rank. */
static void feed(const ir_graph *g, rt_exec *x, int step, float lr) { th_feed(g, x, step, lr); }

static void run(rt_exec *x, const char *what)
{
    char err[512];
    if (rt_exec_run(x, err, sizeof err) != 0)
        die(what, err);
}

#define worst th_worst

/* What a run leaves on rank 0: the outputs or the losses, and every
 * parameter, buffer and state value. */
typedef struct {
    float loss[STEPS];
    float **values;             /* outputs (inference) or params (training) */
    int n;
} result;

static void result_free(result *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->values[i]);
    free(r->values);
}

static float *copy_of(rt_exec *x, const ir_value *v)
{
    size_t bytes = (size_t)ir_type_numel(&v->type) * sizeof(float);
    const void *src = rt_exec_data(x, v);
    float *c = malloc(bytes ? bytes : 1);
    if (!c || !src)
        die(v->name, src ? "out of memory" : "not held on rank 0");
    memcpy(c, src, bytes);
    return c;
}

/* Runs p (steps > 0: that many training steps) on x; on rank 0 keeps what
 * it left.  gather: bring the parameters to rank 0 first (an MPI run). */
static void run_program(const program *p, rt_exec *x, int steps, float lr, int gather,
                        result *r)
{
    const ir_graph *g = p->g;
    memset(r, 0, sizeof *r);
    rt_exec_init_params(x, 11);
    for (int s = 0; s < (steps ? steps : 1); s++) {
        feed(g, x, s, lr);
        run(x, g->name);
        const float *loss = steps && rank == 0 ? rt_exec_data(x, g->loss) : NULL;
        if (steps && rank == 0 && !loss)
            die(g->loss->name, "the loss is not on rank 0");
        if (loss)
            r->loss[s] = *loss;
    }
    char err[512];
    if (gather && rt_exec_gather_params(x, err, sizeof err) != 0)
        die("rt_exec_gather_params", err);
    if (rank != 0)
        return;
    r->n = steps ? g->nparams : g->noutputs;
    r->values = calloc((size_t)r->n, sizeof *r->values);
    for (int i = 0; i < r->n; i++)
        r->values[i] = copy_of(x, steps ? g->params[i] : g->outputs[i].value);
}

/* Rank 0: the MPI run's result a against the in-process run's b: all bitwise
 * equal (*same), the worst relative difference otherwise. */
static double compare(const program *p, const result *a, const result *b, int steps, int *same)
{
    double w = 0;
    *same = 1;
    for (int s = 0; s < steps; s++) {
        *same &= memcmp(&a->loss[s], &b->loss[s], sizeof(float)) == 0;
        double e = worst(&a->loss[s], &b->loss[s], 1);
        w = e > w ? e : w;
    }
    for (int i = 0; i < a->n; i++) {
        const ir_value *v = steps ? p->g->params[i] : p->g->outputs[i].value;
        int64_t n = ir_type_numel(&v->type);
        *same &= memcmp(a->values[i], b->values[i], (size_t)n * sizeof(float)) == 0;
        double e = worst(a->values[i], b->values[i], n);
        w = e > w ? e : w;
    }
    return w;
}

static const char *describe(const pt_options *o)
{
    static char buf[64];
    switch (o->strategy) {
    case PT_DATA:
        snprintf(buf, sizeof buf, "data%s%s", o->sync_bn ? "+sync-bn" : "",
                 o->deterministic ? "+deterministic" : "");
        break;
    case PT_PIPELINE:
        snprintf(buf, sizeof buf, "pipeline/mb%d%s", o->microbatches,
                 o->schedule == PT_GPIPE ? "/gpipe" : "");
        break;
    case PT_TENSOR:
        snprintf(buf, sizeof buf, "tensor");
        break;
    default:
        snprintf(buf, sizeof buf, "hybrid/dp%d/pp%d/mb%d", o->dp, o->pp, o->microbatches);
        break;
    }
    return buf;
}

/* One model and partitioning, inference and training, MPI against one
 * process.  exact: the results must be bitwise equal; otherwise within tol. */
static void model_case(const char *model, int batch, float lr, const pt_options *o, int exact,
                       double tol)
{
    const char *what = describe(o);
    double w[2];
    int same[2];
    for (int train = 0; train < 2; train++) {
        int steps = train ? STEPS : 0;
        program p;
        compile(model, batch, train, o, &p);
        check(ir_graph_devices(p.g) == size, "%s %s: %d devices for %d ranks", model, what,
              ir_graph_devices(p.g), size);
        result a, b;
        rt_exec *x = rank_exec(&p);
        run_program(&p, x, steps, lr, 1, &a);
        rt_exec_free(x); /* on every rank, before rank 0 runs the reference */
        if (rank == 0) {
            x = local_exec(&p);
            run_program(&p, x, steps, lr, 0, &b);
            rt_exec_free(x);
            w[train] = compare(&p, &a, &b, steps, &same[train]);
            check(exact ? same[train] : w[train] <= tol, "%s %s %s: %s (worst %.3g)", model,
                  what, train ? "training" : "inference",
                  exact ? "not bitwise the in-process run's" : "off", w[train]);
            result_free(&b);
        }
        result_free(&a);
        program_free(&p);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("  %-9s %-28s x%d  inference: %-9s training (losses, params): %s\n", model, what,
               size, same[0] ? "bitwise" : "differs", same[1] ? "bitwise" : "differs");
    if (rank == 0 && !exact)
        printf("  %-9s %-28s x%d  worst relative difference %.2g (a %d-rank sum in MPI's "
               "order)\n", model, what, size, w[0] > w[1] ? w[0] : w[1], size);
}

/* The world must have as many ranks as the program has devices. */
static void mismatch(void)
{
    program p;
    pt_options o = {.devices = 2 * size, .strategy = PT_DATA};
    compile("lenet", 8, 1, &o, &p);
    char err[512] = "", want[128];
    rt_exec *x = rt_exec_new_rank(p.g, p.plan->offset_by_id, p.plan->device_bytes, rank, 0, err,
                                  sizeof err);
    snprintf(want, sizeof want, "the program has %d devices, but the MPI job has %d ranks",
             2 * size, size);
    check(!x && strstr(err, want), "a %d-device program on %d ranks: got '%s'", 2 * size, size,
          err);
    rt_exec_free(x);
    program_free(&p);
    if (rank == 0)
        printf("  a %d-device program on %d ranks: %s\n", 2 * size, size, err);
}

/* A rank that does not come to make its executor is found by the others
 * within the deadline: rank 1 arrives 3 s late (only at a barrier that stands
 * for its part of rank 0's wait, so that the two stay in step after it); rank
 * 0, with a deadline of 1 s, gives up, naming what it waited for. */
static void late(void)
{
    program p;
    pt_options o = {.devices = size, .strategy = PT_DATA};
    compile("lenet", 8, 1, &o, &p);
    if (rank == 0) {
        char err[512] = "", want[128];
        double t0 = MPI_Wtime();
        rt_exec *x = rt_exec_new_rank(p.g, p.plan->offset_by_id, p.plan->device_bytes, 0, 1, err,
                                      sizeof err);
        double took = MPI_Wtime() - t0;
        snprintf(want, sizeof want, "rank 0: waited 1 s for the other ranks to make their "
                 "executors (with ranks 0 to %d): giving up", size - 1);
        check(!x && strstr(err, want), "a rank late to make its executor: got '%s'", err);
        check(took >= 1 && took < 2.5, "a rank late to make its executor: found after %.2f s, "
              "want 1 to 2.5", took);
        printf("  a rank 3 s late to make its executor: found after %.2f s (deadline 1 s)\n",
               took);
        rt_exec_free(x);
    } else {
        sleep(3);
    }
    MPI_Barrier(MPI_COMM_WORLD);    /* rank 0's: its abandoned MPI_Ibarrier */
    MPI_Barrier(MPI_COMM_WORLD);
    program_free(&p);
}

/* tests/mpi/collectives.gir: each rank's results, as loaded and planned,
 * bitwise those of the in-process run (small integers: every sum exact). */
static void collectives(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/mpi/collectives.gir", root);
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, "cannot read");
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(path, text, len, &d);
    if (!g || ir_verify(g, &d)) {
        diag_print(&d, stderr);
        die(path, "does not verify");
    }
    diag_free(&d);
    check(ir_graph_devices(g) == size, "collectives.gir: %d devices for %d ranks", ir_graph_devices(g), size);
    for (int planned = 0; planned < 2; planned++) {
        mp_plan *plan = planned ? mp_plan_graph(g) : NULL;
        const int64_t *off = plan ? plan->offset_by_id : NULL, *bytes = plan ? plan->device_bytes
                                                                         : NULL;
        char err[512];
        rt_exec *x = rt_exec_new_rank(g, off, bytes, rank, 0, err, sizeof err);
        rt_exec *ref = rt_exec_new_planned(g, off, bytes, err, sizeof err);
        if (!x || !ref)
            die("collectives.gir", err);
        for (int i = 0; i < g->ninputs; i++)
            for (rt_exec *e = x; e; e = e == x ? ref : NULL) {
                float *v = rt_exec_data(e, g->inputs[i]);
                for (int64_t k = 0; k < ir_type_numel(&g->inputs[i]->type); k++)
                    v[k] = (float)((k * 7 + 3 * i) % 9 - 4);
            }
        run(x, "collectives.gir");
        run(ref, "collectives.gir (in one process)");
        int held = 0, same = 0;
        for (int i = 0; i < g->noutputs; i++) {
            const ir_value *v = g->outputs[i].value;
            if (v->def->device != rank)
                continue;
            held++;
            const float *got = rt_exec_data(x, v), *want = rt_exec_data(ref, v);
            int ok = got && !memcmp(got, want, (size_t)ir_type_numel(&v->type) * sizeof(float));
            same += ok;
            check(ok, "collectives.gir%s: %s differs on device %d", planned ? " (planned)" : "",
                  g->outputs[i].name, rank);
        }
        int sums[2] = {held, same}, all[2];
        MPI_Reduce(sums, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("  collectives.gir%-10s x%d  %d of %d results bitwise\n",
                   planned ? " (planned)" : "", size, all[1], all[0]);
        rt_exec_free(x);
        rt_exec_free(ref);
        mp_plan_free(plan);
    }
    ir_graph_free(g);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2|4 test_mpi SOURCE_DIR [MODEL]\n");
        MPI_Finalize();
        return 2;
    }
    root = argv[1];
    const char *only = argc > 2 ? argv[2] : NULL;
    rt_set_threads(1); /* a rank per core; the bits do not depend on it */
#define WANT(m) (!only || strcmp(only, m) == 0)
    if (size == 2) {
        static const struct { const char *model; int batch; float lr; int bn; } models[] = {
            {"lenet", 8, 0.05f, 0}, {"mlp", 8, 0.05f, 0}, {"resnet18", 4, 0.01f, 1}};
        for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
            if (!WANT(models[i].model))
                continue;
            const char *m = models[i].model;
            int b = models[i].batch, bn = models[i].bn;
            float lr = models[i].lr;
            model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_DATA, .sync_bn = bn},
                       1, 0);
            model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_PIPELINE,
                                               .microbatches = 1}, 1, 0);
            model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_PIPELINE}, 1, 0);
            /* resnet18 takes about 10 s a case: it leaves out what the others
               cover (its communication is the same, on larger tensors) */
            if (!bn) {
                model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_PIPELINE,
                                                   .schedule = PT_GPIPE}, 1, 0);
                model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_HYBRID, .dp = 2,
                                                   .pp = 1}, 1, 0);
                model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_HYBRID, .dp = 1,
                                                   .pp = 2, .microbatches = 2}, 1, 0);
                model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_TENSOR}, 1, 0);
            }
            model_case(m, b, lr, &(pt_options){.devices = 2, .strategy = PT_DATA,
                                               .deterministic = 1, .sync_bn = 1,
                                               .micro_shards = 4}, 1, 0);
        }
        if (!only) {
            mismatch();
            late();
        }
    } else if (size == 4) {
        collectives();
        model_case("lenet", 8, 0.05f, &(pt_options){.devices = 4, .strategy = PT_HYBRID, .dp = 2,
                                                    .pp = 2, .microbatches = 2}, 1, 0);
        model_case("lenet", 8, 0.05f, &(pt_options){.devices = 4, .strategy = PT_DATA,
                                                    .deterministic = 1, .sync_bn = 1,
                                                    .micro_shards = 4}, 1, 0);
        model_case("lenet", 8, 0.05f, &(pt_options){.devices = 4, .strategy = PT_DATA}, 0, 1e-5);
    } else if (rank == 0) {
        fprintf(stderr, "test_mpi: run it on 2 or 4 ranks, not %d\n", size);
        failed++;
    }
    int counts[2] = {passed, failed}, all[2];
    MPI_Allreduce(counts, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi x%d: %d passed, %d failed\n", size, all[0], all[1]);
    MPI_Finalize();
    return all[1] ? 1 : 0;
}
