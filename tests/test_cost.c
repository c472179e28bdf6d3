/* The cost model (passes/cost.c).
 *
 *   1. Single nodes: tests/cost/nodes.gir and comm.gir give nodes' FLOPs, bytes
 *      and times, worked out by hand, in "# COST:" lines beside them; every op
 *      (in the IR samples, the models, their training steps and optimized
 *      programs) costs a finite, non-negative time, and arithmetic ops some
 *      FLOPs.
 *   2. The formulas at their edges: both arithmetic rates, n = 1, an all_reduce
 *      of several operands (a bucket).
 *   3. Simulations of hand-written programs, against their timelines worked out
 *      in the files' comments: overlap.gir (an all_reduce hidden behind the
 *      compute left), pipeline.gir (the bubble of two stages), fused.gir (a group
 *      is one kernel), weights.gir (weights computed once cost nothing),
 *      cycle.gir (streams that would wait on each other forever: the verifier
 *      refuses it, the cost model still ends), and
 *      tests/comm/data_parallel.gir (every kind of communication).
 *   4. Device specs: presets, overrides, and each error's message.
 *   5. Speed: resnet18's training step, and a generated 8-device program of
 *      44000 nodes.
 *   6. The example in passes/cost.h.
 *
 *   test_cost SOURCE_DIR */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cost.h"
#include "diag.h"
#include "filecheck.h"
#include "frontend.h"
#include "passes.h"

static int passed, failed;
static const char *src;

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
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Equal but for rounding: atol + rtol |want|. */
static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 + 1e-9 * fabs(want);
}

#define CHECK_NEAR(got, want, what) \
    check(close_to((got), (want)), "%s: got %.10g, want %.10g", (what), (double)(got), \
          (double)(want))

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A verified graph from text; NULL (a failure counted) when it does not load. */
static ir_graph *load_text(const char *name, const char *text, size_t len)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(name, text, len, &d);
    if (g && ir_verify(g, &d)) {
        ir_graph_free(g);
        g = NULL;
    }
    if (!g) {
        diag_print(&d, stderr);
        check(0, "%s loads and verifies", name);
    }
    diag_free(&d);
    return g;
}

/* The program at rel under the source tree, verified; its text in *text (to
 * free) when text is not NULL. */
static ir_graph *load(const char *rel, char **text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src, rel);
    size_t len;
    char *t = read_file(path, &len);
    if (!t) {
        check(0, "cannot read %s", path);
        return NULL;
    }
    ir_graph *g = load_text(path, t, len);
    if (text)
        *text = t;
    else
        free(t);
    return g;
}

static const ir_node *find(const ir_graph *g, const char *name)
{
    ir_for_each_node(g, n)
        if (strcmp(n->out[0]->name, name) == 0)
            return n;
    return NULL;
}

/* The device of the tests' timelines: 1 GFLOP/s at both rates, memory too fast
 * to matter, 40 MB/s links, no latency, no launch overhead. */
static cost_device slow_device(void)
{
    cost_device d;
    char err[256];
    int rc = cost_device_parse("cpu,flops=1e9,flops_other=1e9,mem_bw=1e15,link_bw=4e7,"
                               "link_latency=0,launch=0", &d, err, sizeof err);
    check(rc == 0, "the tests' device: %s", err);
    return d;
}

/* 1 GB/s memory, 1 us launches, arithmetic too fast to matter. */
static cost_device memory_device(void)
{
    cost_device d;
    char err[256];
    int rc = cost_device_parse("cpu,flops=1e15,flops_other=1e15,mem_bw=1e9,launch=1us", &d, err,
                               sizeof err);
    check(rc == 0, "the tests' memory-bound device: %s", err);
    return d;
}

/* ---- 1. single nodes ---- */

/* Checks every "# COST: NAME key value ..." line of file against its node. */
static void cost_lines(const char *file)
{
    char *text = NULL;
    ir_graph *g = load(file, &text);
    if (!g) {
        free(text);
        return;
    }
    char **lines;
    int nl = split_lines(text, &lines), ncost = 0;
    const cost_device *dev = NULL;
    for (int i = 0; i < nl; i++) {
        char *l = lines[i];
        while (*l == ' ')
            l++;
        char name[128];
        if (sscanf(l, "# DEVICE: %127s", name) == 1)
            dev = cost_device_lookup(name);
        int at;
        if (sscanf(l, "# COST: %127s%n", name, &at) != 1)
            continue;
        ncost++;
        const ir_node *n = find(g, name);
        if (!n) {
            check(0, "%s: no node %%%s", file, name);
            continue;
        }
        char key[32];
        double want;
        int used;
        for (l += at; sscanf(l, " %31s %lf%n", key, &want, &used) == 2; l += used) {
            char what[256];
            snprintf(what, sizeof what, "%s: %%%s %s", file, name, key);
            int comm = ir_op_communicates(n->op);
            if (strcmp(key, "flops") == 0)
                CHECK_NEAR(cost_node_flops(n), want, what);
            else if (strcmp(key, "bytes") == 0)
                CHECK_NEAR(comm ? (double)cost_comm_bytes(n) : cost_node_bytes(n), want, what);
            else if (strcmp(key, "seconds") == 0 && dev)
                CHECK_NEAR(cost_node_seconds(dev, n), want, what);
            else
                check(0, "%s: unknown key '%s' (or no DEVICE line)", file, key);
        }
    }
    check(ncost >= 5, "%s has its COST lines (%d)", file, ncost);
    free(lines);
    free(text);
    ir_graph_free(g);
}

/* One node's cost: finite, non-negative; FLOPs for arithmetic. */
static void sane_node(const char *what, const ir_node *n, const cost_device *dev)
{
    double fl = cost_node_flops(n), b = cost_node_bytes(n), s = cost_node_seconds(dev, n);
    int moves = n->op == IR_OP_RESHAPE || n->op == IR_OP_TRANSPOSE || n->op == IR_OP_CONCAT ||
                n->op == IR_OP_EMBEDDING || n->op == IR_OP_SLICE || n->op == IR_OP_PAD ||
                n->op == IR_OP_ARANGE || n->op == IR_OP_CAST ||
                n->op == IR_OP_BROADCAST_TO ||
                n->op == IR_OP_DROPOUT || n->op == IR_OP_CONST || ir_op_communicates(n->op);
    int comm = ir_op_communicates(n->op);
    check(isfinite(fl) && fl >= 0 && (moves || fl > 0), "%s: %%%s (%s): %g FLOPs", what,
          n->out[0]->name, ir_ops[n->op].name, fl);
    check(isfinite(b) && b > 0, "%s: %%%s (%s): %g bytes", what, n->out[0]->name,
          ir_ops[n->op].name, b);
    check(isfinite(s) && (comm ? s > 0 : s >= dev->launch), "%s: %%%s (%s): %g s", what,
          n->out[0]->name, ir_ops[n->op].name, s);
}

/* Every op, as the samples (as written) and the models have them, and the
 * training steps of both (SGD with everything, Adam rematerialized) and the
 * models' optimized inference programs: each node's cost is sane, and each
 * program simulates. */
static void every_op(void)
{
    static const char *const files[] = {"tests/ir/lenet.gir", "tests/ir/tiny_lm.gir",
                                        "tests/cost/nodes.gir", "tests/cost/comm.gir"};
    const cost_device *dev = cost_device_lookup("h100-nvlink");
    int seen[IR_NOPS] = {0};
    for (size_t f = 0; f < sizeof files / sizeof *files + 3; f++)
        for (int train = 0; train < 3; train++) {
            ir_graph *g = NULL;
            diag d;
            diag_init(&d);
            char what[256];
            if (f < 4) {
                g = load(files[f], NULL);
                snprintf(what, sizeof what, "%s%s", files[f],
                         train == 1 ? " (SGD)" : train == 2 ? " (Adam, remat)" : "");
            } else {
                static const char *const models[] = {"lenet", "mlp", "resnet18"};
                char path[4096];
                snprintf(path, sizeof path, "%s/models/%s.net", src, models[f - 4]);
                snprintf(what, sizeof what, "%s%s", models[f - 4],
                         train == 1 ? " (SGD)" : train == 2 ? " (Adam, remat)" : "");
                const char *dn[] = {"batch"}, *dv[] = {"4"};
                g = fe_load_file(path, &(fe_options){NULL, 1, dn, dv}, &d);
            }
            if (g && train && g->loss) {
                ad_optimizer o = ad_optimizer_default(train == 1 ? AD_SGD : AD_ADAM);
                o.momentum = train == 1 ? 0.9 : o.momentum;
                o.nesterov = train == 1;
                o.weight_decay = 0.01;
                if (ad_training_graph(g, &o, &d)) {
                    ir_graph_free(g);
                    g = NULL;
                }
            } else if (g && train) {
                ir_graph_free(g);   /* nothing to train */
                diag_free(&d);
                continue;
            }
            pm_options po = {.verify_each = 1, .out = stderr};
            const char *passes = pm_default_pipeline(train > 0, train == 2, 0);
            if (g && (train || f >= 4) && pm_run(g, passes, &po, &d)) {
                ir_graph_free(g);
                g = NULL;
            }
            if (!g) {
                diag_print(&d, stderr);
                check(0, "%s loads", what);
                diag_free(&d);
                continue;
            }
            diag_free(&d);
            ir_for_each_node(g, n) {
                seen[n->op] = 1;
                sane_node(what, n, dev);
            }
            cost_sim *r = cost_simulate(g, dev);
            check(r->step_ms > 0 && isfinite(r->step_ms) && r->bubble >= 0 && r->bubble <= 1,
                  "%s simulates: %g ms", what, r->step_ms);
            cost_sim_free(r);
            ir_graph_free(g);
        }
    for (int op = 0; op < IR_NOPS; op++)
        check(seen[op], "op %s is among those costed", ir_ops[op].name);
}

/* ---- 2. the formulas at their edges ---- */

static void formulas(void)
{
    const cost_device *h = cost_device_lookup("h100-nvlink");
    /* arithmetic at each rate: 1e9 GEMM FLOPs at 20.07e12/s (fp32) and 1e9
       others at 40.14e12/s add up; against 1 MB at 3.35e12 B/s */
    CHECK_NEAR(cost_kernel_seconds(h, 1e9, 1e9, 1e6), 1e9 / 20.07e12 + 1e9 / 40.14e12 + 3e-6,
               "a kernel bound by arithmetic");
    CHECK_NEAR(cost_kernel_seconds(h, 1e6, 0, 1e9), 1e9 / 3.35e12 + 3e-6,
               "a kernel bound by memory");
    CHECK_NEAR(cost_kernel_seconds(h, 0, 0, 0), 3e-6, "an empty kernel: its launch");
    /* a known grid: under two blocks per SM (264 on 132 SMs) that share of
       the time; at or over it, none; the cpu has no SMs */
    CHECK_NEAR(cost_grid_seconds(h, 0, 0, 1e9, 264), 1e9 / 3.35e12 + 3e-6, "a full grid");
    CHECK_NEAR(cost_grid_seconds(h, 0, 0, 1e9, 66), 4 * 1e9 / 3.35e12 + 3e-6,
               "a grid of a quarter of the blocks");
    CHECK_NEAR(cost_grid_seconds(h, 1e9, 0, 0, 132), 2 * 1e9 / 20.07e12 + 3e-6,
               "arithmetic on half the SMs");
    CHECK_NEAR(cost_grid_seconds(cost_device_lookup("cpu"), 0, 0, 36e9, 1), 1 + 1e-6,
               "no grid on the cpu");
    static const ir_op ops[] = {IR_OP_ALL_REDUCE, IR_OP_ALL_GATHER, IR_OP_REDUCE_SCATTER,
                                IR_OP_BROADCAST, IR_OP_SEND, IR_OP_RECV};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        check(cost_comm_seconds(h, ops[i], 1, 1 << 20) == 0, "%s on one device costs 0",
              ir_ops[ops[i]].name);
        check(cost_comm_seconds(h, ops[i], 2, 1 << 20) > 0, "%s on two devices costs",
              ir_ops[ops[i]].name);
    }
    check(cost_comm_seconds(h, IR_OP_RELU, 8, 1 << 20) == 0, "relu does not communicate");
    /* broadcast's tree: ceil(log2 n) steps of latency */
    CHECK_NEAR(cost_comm_seconds(h, IR_OP_BROADCAST, 8, 0), 3 * 5e-6, "broadcast to 8");
    CHECK_NEAR(cost_comm_seconds(h, IR_OP_BROADCAST, 9, 0), 4 * 5e-6, "broadcast to 9");
    /* 8 devices, 1 GB: all_reduce twice all_gather's bandwidth term, 14 latencies */
    CHECK_NEAR(cost_comm_seconds(h, IR_OP_ALL_REDUCE, 8, 1000000000),
               2 * 7.0 / 8 * 1e9 / 450e9 + 14 * 5e-6, "all_reduce over 8");
}

/* An all_reduce of two operands (a bucket), made through the API: the verifier
 * of this tree takes one operand only. */
static void bucket(void)
{
    ir_graph *g = ir_graph_new("bucket");
    ir_loc loc = {0};
    ir_type t1 = {IR_F32, 1, {1000}}, t2 = {IR_F32, 1, {3000}};
    ir_value *in[2] = {ir_add_input(g, "a", t1, loc), ir_add_input(g, "b", t2, loc)};
    ir_node *ar[2];
    for (int d = 0; d < 2; d++) {
        ir_node *n = ar[d] = ir_node_new(g, IR_OP_ALL_REDUCE, 2, in, 2, "ar", loc);
        n->out[0]->type = t1;
        n->out[1]->type = t2;
        ir_set_int(g, n, "id", 1);
        ir_set_ints(g, n, "group", 2, (const int64_t[]){0, 1});
        n->device = d;
        ir_append(g, n);
    }
    for (int d = 0; d < 2; d++) { /* reads the second result */
        ir_node *n = ir_node_new(g, IR_OP_RELU, 1, &ar[d]->out[1], 1, "r", loc);
        n->out[0]->type = t2;
        n->device = d;
        ir_append(g, n);
        ir_add_output(g, d ? "r1" : "r0", n->out[0], loc);
    }
    check(cost_comm_bytes(ar[0]) == 16000, "a bucket's bytes are its operands': %lld",
          (long long)cost_comm_bytes(ar[0]));
    cost_device dev = slow_device();
    cost_sim *r = cost_simulate(g, &dev);
    /* 2 (1/2) 16000 / 4e7 = 400 us, then relu: 3000 FLOPs, 3 us */
    check(r->ncomms == 1 && r->comms[0].bytes == 16000, "one collective of 16000 bytes");
    CHECK_NEAR(r->comms[0].end_ms, 0.4, "the bucket's end");
    CHECK_NEAR(r->step_ms, 0.403, "relu waits for the bucket's second result");
    cost_sim_free(r);
    ir_graph_free(g);
}

/* ---- 3. simulations ---- */

static void overlap(void)
{
    ir_graph *g = load("tests/cost/overlap.gir", NULL);
    if (!g)
        return;
    cost_device dev = slow_device();
    cost_sim *r = cost_simulate(g, &dev);
    check(r->ndevices == 2 && r->ncomms == 2, "overlap: 2 devices, 2 all_reduces (%d, %d)",
          r->ndevices, r->ncomms);
    if (r->ncomms == 2) {
        const cost_comm *a = &r->comms[0], *b = &r->comms[1];
        check(a->node == find(g, "ar2_0") && b->node == find(g, "ar1_0"),
              "overlap: the all_reduces in start order, by their device-0 nodes");
        check(a->bytes == 4000 && b->bytes == 40000, "overlap: bytes %lld, %lld",
              (long long)a->bytes, (long long)b->bytes);
        CHECK_NEAR(a->start_ms, 0.096, "overlap: all_reduce 1 starts after gw2");
        CHECK_NEAR(a->end_ms, 0.196, "overlap: all_reduce 1 ends");
        CHECK_NEAR(a->compute_left_ms, 0.098, "overlap: all_reduce 1 hides behind dh, gw1, u");
        CHECK_NEAR(b->start_ms, 0.196, "overlap: all_reduce 2 waits for the stream");
        CHECK_NEAR(b->end_ms, 1.196, "overlap: all_reduce 2 ends");
        CHECK_NEAR(b->compute_left_ms, 0.010, "overlap: only u is left after all_reduce 2");
    }
    CHECK_NEAR(r->compute_ms[0], 0.194, "overlap: device 0 computes");
    CHECK_NEAR(r->compute_ms[1], 0.184, "overlap: device 1 computes");
    CHECK_NEAR(r->comm_ms[0], 1.1, "overlap: device 0 communicates");
    CHECK_NEAR(r->device_ms[0], 1.206, "overlap: u waits for the all_reduce it reads");
    CHECK_NEAR(r->device_ms[1], 1.196, "overlap: device 1 ends with its all_reduce");
    CHECK_NEAR(r->step_ms, 1.206, "overlap: step");
    check(r->step_ms < r->compute_ms[0] + r->comm_ms[0] - 0.05,
          "overlap: the step (%g ms) is shorter than compute then communication (%g ms)",
          r->step_ms, r->compute_ms[0] + r->comm_ms[0]);
    CHECK_NEAR(r->flops, 2 * 184000.0 + 10000, "overlap: FLOPs");
    CHECK_NEAR(r->bubble, 1 - (0.194 + 0.184) / (2 * 1.206), "overlap: idle fraction");
    check(r->forced == 0, "overlap: the streams run in order");
    cost_sim_free(r);
    ir_graph_free(g);
}

static void pipeline(void)
{
    ir_graph *g = load("tests/cost/pipeline.gir", NULL);
    if (!g)
        return;
    cost_device dev = slow_device();
    cost_sim *r = cost_simulate(g, &dev);
    CHECK_NEAR(r->step_ms, 0.28, "pipeline: step");
    CHECK_NEAR(r->bubble, 3.0 / 7, "pipeline: bubble");
    CHECK_NEAR(r->device_ms[0], 0.2, "pipeline: device 0 ends with its last send");
    CHECK_NEAR(r->device_ms[1], 0.28, "pipeline: device 1 ends");
    CHECK_NEAR(r->compute_ms[0], 0.16, "pipeline: device 0 computes");
    CHECK_NEAR(r->compute_ms[1], 0.16, "pipeline: device 1 computes");
    CHECK_NEAR(r->comm_ms[1], 0.08, "pipeline: device 1 receives");
    check(r->ncomms == 2, "pipeline: one communication per send/recv pair (%d)", r->ncomms);
    if (r->ncomms == 2) {
        check(r->comms[0].node == find(g, "ka") && r->comms[1].node == find(g, "kb"),
              "pipeline: the pairs by their sends, in start order");
        CHECK_NEAR(r->comms[0].start_ms, 0.08, "pipeline: send a starts after f0a");
        CHECK_NEAR(r->comms[0].end_ms, 0.12, "pipeline: recv a completes");
        CHECK_NEAR(r->comms[0].compute_left_ms, 0.08, "pipeline: f0b is left on device 0");
        CHECK_NEAR(r->comms[1].start_ms, 0.16, "pipeline: send b starts after f0b");
        CHECK_NEAR(r->comms[1].compute_left_ms, 0, "pipeline: nothing left on device 0");
        check(r->comms[0].bytes == 1600, "pipeline: 1600 bytes a pair");
    }
    cost_sim_free(r);
    ir_graph_free(g);
}

static void fused(void)
{
    ir_graph *g = load("tests/cost/fused.gir", NULL);
    if (!g)
        return;
    cost_device dev = memory_device();
    cost_sim *r = cost_simulate(g, &dev);
    CHECK_NEAR(r->step_ms, 0.022, "fused: two kernels, (12000 B + 1 us) + (8000 B + 1 us)");
    CHECK_NEAR(r->flops, 5000, "fused: the members' FLOPs add up");
    cost_sim_free(r);
    ir_for_each_node(g, n)
        n->group = 0;
    r = cost_simulate(g, &dev);
    CHECK_NEAR(r->step_ms, 0.049, "unfused: five kernels, 44000 B + 5 us");
    CHECK_NEAR(r->flops, 5000, "unfused: the same FLOPs");
    cost_sim_free(r);
    ir_graph_free(g);
}

static void weights(void)
{
    char *text = NULL;
    ir_graph *g = load("tests/cost/weights.gir", &text);
    if (!g) {
        free(text);
        return;
    }
    cost_device dev = memory_device();
    cost_sim *r = cost_simulate(g, &dev);
    CHECK_NEAR(r->step_ms, 0.013, "weights: only y costs, 12000 B + 1 us");
    CHECK_NEAR(r->flops, 1000, "weights: only y's FLOPs");
    cost_sim_free(r);
    ir_graph_free(g);
    /* with an update (a training step), weights change every step: all three cost */
    size_t len = strlen(text);
    char *train = malloc(len + 64);
    char *end = strrchr(text, '}');
    snprintf(train, len + 64, "%.*s  update %%v = %%s\n}\n", (int)(end - text), text);
    g = load_text("weights.gir + update", train, strlen(train));
    if (g) {
        r = cost_simulate(g, &dev);
        CHECK_NEAR(r->step_ms, 0.039, "weights, trained: three kernels of 12000 B + 1 us");
        CHECK_NEAR(r->flops, 5000, "weights, trained: the FLOPs of all three");
        cost_sim_free(r);
        ir_graph_free(g);
    }
    free(train);
    free(text);
}

/* A program the verifier refuses (its devices would wait on each other in a
 * ring: ir/verify.c's check_progress), given to the cost model anyway: it
 * still ends, starting one collective out of its stream's order. */
static void cycle(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/cost/cycle.gir", src);
    size_t len;
    char *text = read_file(path, &len);
    diag d;
    diag_init(&d);
    ir_graph *g = text ? ir_parse(path, text, len, &d) : NULL;
    check(g && ir_verify(g, &d) == 1 && d.n == 1 &&
              strstr(d.entries[0].msg, "the program would hang: device 0 waits for device 1"),
          "cycle.gir: the verifier refuses it as hanging");
    diag_free(&d);
    free(text);
    if (!g)
        return;
    const cost_device *dev = cost_device_lookup("h100-nvlink");
    cost_sim *r = cost_simulate(g, dev);
    double c = 1024 / 450e9 + 2 * 5e-6; /* 2 (1/2) 1024 B / link_bw + 2 latencies */
    check(r->forced == 1, "cycle: one collective started out of its stream's order (%d)",
          r->forced);
    check(r->ncomms == 3, "cycle: three collectives (%d)", r->ncomms);
    if (r->ncomms == 3)
        check(ir_attr_int(r->comms[0].node, "id") == 2 &&
                  ir_attr_int(r->comms[1].node, "id") == 3 &&
                  ir_attr_int(r->comms[2].node, "id") == 1,
              "cycle: collectives 2, 3, 1 in turn");
    CHECK_NEAR(r->step_ms, 3 * c * 1e3, "cycle: three collectives one after the other");
    cost_sim_free(r);
    ir_graph_free(g);
}

static void data_parallel(void)
{
    ir_graph *g = load("tests/comm/data_parallel.gir", NULL);
    if (!g)
        return;
    cost_sim *r = cost_simulate(g, cost_device_lookup("h100-pcie"));
    check(r->ndevices == 2 && r->ncomms == 5, "data_parallel: 4 collectives and a pair (%d)",
          r->ncomms);
    int sorted = 1, devices = 1;
    for (int i = 0; i < r->ncomms; i++) {
        sorted &= i == 0 || r->comms[i - 1].start_ms <= r->comms[i].start_ms;
        devices &= r->comms[i].node->device == (r->comms[i].node->op == IR_OP_SEND ? 1 : 0);
        check(r->comms[i].end_ms > r->comms[i].start_ms, "data_parallel: %s takes time",
              r->comms[i].node->out[0]->name);
    }
    check(sorted, "data_parallel: communications in start order");
    check(devices, "data_parallel: each named by its device-0 node, or its send");
    check(r->step_ms >= r->device_ms[0] && r->step_ms >= r->device_ms[1] &&
              (r->step_ms == r->device_ms[0] || r->step_ms == r->device_ms[1]),
          "data_parallel: the step is the last device's end");
    cost_sim_free(r);
    ir_graph_free(g);
}

/* ---- 4. device specs ---- */

static void specs(void)
{
    int count;
    const cost_device *list = cost_device_list(&count);
    check(count == 4, "four presets");
    for (int i = 0; i < count; i++)
        check(cost_device_lookup(list[i].name) == &list[i] && list[i].flops > 0 &&
                  list[i].flops_other > 0 && list[i].mem_bw > 0 && list[i].link_bw > 0 &&
                  list[i].link_latency >= 0 && list[i].launch >= 0 && list[i].mem_bytes > 0,
              "preset %s is sound", list[i].name);
    const cost_device *nv = cost_device_lookup("h100-nvlink");
    CHECK_NEAR(nv->flops, 66.9e12 * 0.3, "h100-nvlink: exact fp32 at 0.3 of its peak");
    check(nv->mem_bytes == (int64_t)80 << 30, "h100-nvlink: 80 GiB");
    /* the precisions: each its peak's share; bf16 stores activations in 2 bytes */
    const cost_device *h2 = cost_device_lookup("h200");
    check(h2 && h2->mem_bw == 4.8e12 && h2->sms == 132, "h200: 4.8 TB/s, 132 SMs");
    cost_device at = *h2;
    cost_device_at(&at, PREC_BF16);
    CHECK_NEAR(at.flops, 989.4e12 * 0.33, "h200 at bf16: the 16-bit peak x 0.33");
    cost_device_at(&at, PREC_TF32);
    CHECK_NEAR(at.flops, 494.7e12 * 0.14, "h200 at tf32: the TF32 peak x 0.14");
    cost_device_at(&at, PREC_FP32);
    CHECK_NEAR(at.flops, h2->flops, "h200 at fp32: as the preset");

    cost_device d;
    char err[256] = "";
    /* flops= is the GEMM rate at every precision: the peaks no longer apply */
    check(cost_device_parse("h200,flops=1e12", &d, err, sizeof err) == 0, "flops=: %s", err);
    cost_device_at(&d, PREC_BF16);
    check(d.flops == 1e12, "flops= holds at bf16: %g", d.flops);
    check(cost_device_parse("h100-nvlink,link_bw=100e9,mem=40GiB", &d, err, sizeof err) == 0 &&
              d.link_bw == 100e9 && d.mem_bytes == (int64_t)40 << 30 && d.flops == nv->flops &&
              strcmp(d.name, "h100-nvlink") == 0,
          "overrides: %s", err);
    check(cost_device_parse("cpu,launch=5us,link_latency=2ms,mem=1.5KB,flops=2e12", &d, err,
                            sizeof err) == 0 &&
              close_to(d.launch, 5e-6) && close_to(d.link_latency, 2e-3) && d.mem_bytes == 1500 &&
              d.flops == 2e12,
          "units: %s", err);
    check(cost_device_parse("h100-pcie,launch=0", &d, err, sizeof err) == 0 && d.launch == 0,
          "a zero time: %s", err);
    check(cost_device_parse("h100-pcie,sms=100", &d, err, sizeof err) == 0 && d.sms == 100,
          "a count: %s", err);

    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"h300", "unknown device 'h300'; devices: h200, h100-nvlink, h100-pcie, cpu"},
        {"", "unknown device ''; devices: h200, h100-nvlink, h100-pcie, cpu"},
        {"H100-nvlink", "unknown device 'H100-nvlink'; devices: h200, h100-nvlink, h100-pcie, cpu"},
        {"cpu,lnk_bw=1e9", "unknown key 'lnk_bw'; keys: flops, flops_other, mem_bw, link_bw, "
                           "link_latency, launch, mem, sms, error"},
        {"h200,error=1", "bad number '1' for error: expected a share from 0 to under 1"},
        {"h200,error=-0.1", "error must be zero or more, got -0.1"},
        {"h100-nvlink,sms=1.5", "bad number '1.5' for sms: expected a whole number"},
        {"h100-nvlink,sms=0", "sms must be positive, got 0"},
        {"cpu,link_bw", "expected key=value, got 'link_bw'"},
        {"cpu,", "expected key=value, got ''"},
        {"cpu,link_bw=1e9,", "expected key=value, got ''"},
        {"cpu,link_bw=fast", "bad number 'fast' for link_bw: expected a number per second"},
        {"cpu,link_bw=", "bad number '' for link_bw: expected a number per second"},
        {"cpu,link_bw= 1", "bad number ' 1' for link_bw: expected a number per second"},
        {"cpu,link_bw=5GB", "bad number '5GB' for link_bw: expected a number per second"},
        {"cpu,flops=nan", "bad number 'nan' for flops: expected a number per second"},
        {"cpu,flops=inf", "bad number 'inf' for flops: expected a number per second"},
        {"cpu,flops=1e999", "bad number '1e999' for flops: expected a number per second"},
        {"cpu,launch=3 us", "bad number '3 us' for launch: expected seconds, or a number with "
                            "s, ms, us or ns"},
        {"cpu,mem=40XB", "bad number '40XB' for mem: expected bytes, or a number with B, KB, "
                         "MB, GB, TB, KiB, MiB, GiB or TiB"},
        {"cpu,link_bw=-1", "link_bw must be positive, got -1"},
        {"cpu,flops=0", "flops must be positive, got 0"},
        {"cpu,mem=0GiB", "mem must be positive, got 0GiB"},
        {"cpu,launch=-1us", "launch must be zero or more, got -1us"},
        {"cpu,mem=1e30", "mem is too large: 1e30"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cost_device out = {.name = "untouched"};
        snprintf(err, sizeof err, "(no message)");
        int rc = cost_device_parse(bad[i].spec, &out, err, sizeof err);
        check(rc == -1 && strcmp(err, bad[i].want) == 0 && strcmp(out.name, "untouched") == 0,
              "spec '%s': want -1 and '%s', got %d and '%s'", bad[i].spec, bad[i].want, rc, err);
    }
    /* a message cut to fit */
    char tiny[8];
    check(cost_device_parse("nope", &d, tiny, sizeof tiny) == -1 && strlen(tiny) == 7,
          "a short buffer takes the message's start");
}

/* ---- 5. speed ---- */

static void resnet18(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/models/resnet18.net", src);
    const char *dn[] = {"batch"}, *dv[] = {"256"};
    fe_options fo = {NULL, 1, dn, dv};
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    pm_options po = {.out = stderr};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &fo, &d);
    if (!g || ad_training_graph(g, &opt, &d) || pm_run(g, pm_default_pipeline(1, 0, 0), &po, &d)) {
        diag_print(&d, stderr);
        check(0, "resnet18's training step loads");
        if (g)
            ir_graph_free(g);
        diag_free(&d);
        return;
    }
    diag_free(&d);
    const cost_device *dev = cost_device_lookup("h100-nvlink");
    double best = 1e9, flops = 0;
    cost_sim *r = NULL;
    for (int i = 0; i < 5; i++) {
        cost_sim_free(r);
        double t = now_ms();
        r = cost_simulate(g, dev);
        t = now_ms() - t;
        best = t < best ? t : best;
    }
    ir_for_each_node(g, n)
        flops += cost_node_flops(n);
    printf("resnet18 training step (%d nodes): %.3f ms on h100-nvlink, %.1f GFLOP; "
           "simulated in %.2f ms\n", g->nnodes, r->step_ms, r->flops / 1e9, best);
    check(r->ndevices == 1 && r->ncomms == 0 && r->bubble < 1e-9 &&
              close_to(r->step_ms, r->compute_ms[0]),
          "resnet18: one device, busy all the step");
    CHECK_NEAR(r->flops, flops, "resnet18: every node's FLOPs, nothing computed once");
    check(best < 50, "resnet18: simulated in %.2f ms (< 50)", best);
    cost_sim_free(r);
    ir_graph_free(g);
}

/* 8 devices, each a chain of 5000 elementwise nodes, with an all_reduce over
 * all of them every 10 nodes whose result the chain reads: 44000 nodes. */
static void large(void)
{
    enum { DEVS = 8, ROUNDS = 500, CHAIN = 10 };
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fprintf(f, "graph large {\n");
    for (int d = 0; d < DEVS; d++)
        fprintf(f, "  input %%x%d: f32[4096]\n", d);
    for (int r = 0; r < ROUNDS; r++) {
        for (int d = 0; d < DEVS; d++)
            for (int k = 0; k < CHAIN; k++) {
                fprintf(f, "  %%v%d_%d_%d: f32[4096] = %s(", d, r, k, k % 2 ? "neg" : "relu");
                if (k)
                    fprintf(f, "%%v%d_%d_%d", d, r, k - 1);
                else if (r)
                    fprintf(f, "%%a%d_%d", d, r - 1);
                else
                    fprintf(f, "%%x%d", d);
                fprintf(f, ") on %d\n", d);
            }
        for (int d = 0; d < DEVS; d++)
            fprintf(f, "  %%a%d_%d: f32[4096] = all_reduce(%%v%d_%d_%d) "
                    "{id = %d, group = [0, 1, 2, 3, 4, 5, 6, 7]} on %d\n",
                    d, r, d, r, CHAIN - 1, r + 1, d);
    }
    for (int d = 0; d < DEVS; d++)
        fprintf(f, "  output y%d = %%a%d_%d\n", d, d, ROUNDS - 1);
    fprintf(f, "}\n");
    fclose(f);
    ir_graph *g = load_text("large.gir", text, len);
    free(text);
    if (!g)
        return;
    const cost_device *dev = cost_device_lookup("h100-nvlink");
    double t = now_ms();
    cost_sim *r = cost_simulate(g, dev);
    t = now_ms() - t;
    printf("large (%d nodes, %d devices): simulated in %.2f ms\n", g->nnodes, r->ndevices, t);
    /* every round: 10 kernels of 32 KiB each, then an all_reduce of 16 KiB */
    double kernel = 32768 / (3.35e12 * 0.8) + 3e-6; /* generated kernels' share */
    double ar = 2 * 7.0 / 8 * 16384 / 450e9 + 14 * 5e-6;
    check(r->ndevices == DEVS && r->ncomms == ROUNDS, "large: %d collectives", r->ncomms);
    CHECK_NEAR(r->step_ms, ROUNDS * (CHAIN * kernel + ar) * 1e3, "large: step");
    check(t < 500, "large: simulated in %.2f ms (< 500)", t);
    cost_sim_free(r);
    ir_graph_free(g);
}

/* ---- 6. the example in cost.h, as written there ---- */

static int header_example(const ir_graph *g)
{
    cost_device dev;
    char err[160];
    if (cost_device_parse("h100-nvlink,link_bw=100e9", &dev, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);   // "unknown key 'lnk_bw'; keys: ..."
        return -1;
    }
    cost_sim *s = cost_simulate(g, &dev);
    printf("step %.3f ms, bubble %.1f%%\n", s->step_ms, 100 * s->bubble);
    for (int i = 0; i < s->ncomms; i++)   // what each communication can hide behind
        printf("%s %.3f ms, %.3f ms of compute left\n", s->comms[i].node->out[0]->name,
               s->comms[i].end_ms - s->comms[i].start_ms, s->comms[i].compute_left_ms);
    cost_sim_free(s);
    return 0;
}

static void example(void)
{
    ir_graph *g = load("tests/cost/overlap.gir", NULL);
    if (g)
        check(header_example(g) == 0, "the example in cost.h runs");
    if (g)
        ir_graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cost SOURCE_DIR\n");
        return 2;
    }
    src = argv[1];
    cost_lines("tests/cost/nodes.gir");
    cost_lines("tests/cost/comm.gir");
    every_op();
    formulas();
    bucket();
    overlap();
    pipeline();
    fused();
    weights();
    cycle();
    data_parallel();
    specs();
    resnet18();
    large();
    example();
    printf("test_cost: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
