/* The cost model (passes/cost.c).
 *
 *   1. Single nodes: tests/cost/nodes.gir and comm.gir give nodes' FLOPs, bytes
 *      and times, worked out by hand, in "# COST:" lines beside them; every op
 *      (in the IR samples, the models, their training steps and optimized
 *      programs) costs a finite, non-negative time, and arithmetic ops some
 *      FLOPs.
 *   2. The formulas at their edges: both arithmetic rates, n = 1.
 *   4. Device specs: presets, overrides, and each error's message.
 *
 *   test_cost SOURCE_DIR */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    check(close_to((got), (want)), "%s: got %.10g, want %.10g", (what), (double)(got), (double)(want))

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
                n->op == IR_OP_EMBEDDING || n->op == IR_OP_SLICE || n->op == IR_OP_BROADCAST_TO ||
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
 * models' optimized inference programs: each node's cost is sane. */
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
            pm_options po = {1, 0, NULL, NULL, stderr};
            if (g && (train || f >= 4) && pm_run(g, pm_default_pipeline(train > 0, train == 2), &po, &d)) {
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
            ir_graph_free(g);
        }
    for (int op = 0; op < IR_NOPS; op++)
        check(seen[op], "op %s is among those costed", ir_ops[op].name);
}

/* ---- 2. the formulas at their edges ---- */

static void formulas(void)
{
    const cost_device *h = cost_device_lookup("h100-nvlink");
    /* arithmetic at each rate: 1e9 GEMM FLOPs at 296.82e12/s and 1e9 others at
       40.14e12/s add up; against 1 MB at 3.35e12 B/s */
    CHECK_NEAR(cost_kernel_seconds(h, 1e9, 1e9, 1e6), 1e9 / 296.82e12 + 1e9 / 40.14e12 + 3e-6,
               "a kernel bound by arithmetic");
    CHECK_NEAR(cost_kernel_seconds(h, 1e6, 0, 1e9), 1e9 / 3.35e12 + 3e-6,
               "a kernel bound by memory");
    CHECK_NEAR(cost_kernel_seconds(h, 0, 0, 0), 3e-6, "an empty kernel: its launch");
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

/* ---- 4. device specs ---- */

static void specs(void)
{
    int count;
    const cost_device *list = cost_device_list(&count);
    check(count == 3, "three presets");
    for (int i = 0; i < count; i++)
        check(cost_device_lookup(list[i].name) == &list[i] && list[i].flops > 0 &&
                  list[i].flops_other > 0 && list[i].mem_bw > 0 && list[i].link_bw > 0 &&
                  list[i].link_latency >= 0 && list[i].launch >= 0 && list[i].mem_bytes > 0,
              "preset %s is sound", list[i].name);
    check(!cost_device_lookup("h200"), "no h200 preset");
    const cost_device *nv = cost_device_lookup("h100-nvlink");
    CHECK_NEAR(nv->flops, 494.7e12 * 0.6, "h100-nvlink: TF32 times 0.6");
    check(nv->mem_bytes == (int64_t)80 << 30, "h100-nvlink: 80 GiB");

    cost_device d;
    char err[256] = "";
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

    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"h200", "unknown device 'h200'; devices: h100-nvlink, h100-pcie, cpu"},
        {"", "unknown device ''; devices: h100-nvlink, h100-pcie, cpu"},
        {"H100-nvlink", "unknown device 'H100-nvlink'; devices: h100-nvlink, h100-pcie, cpu"},
        {"cpu,lnk_bw=1e9", "unknown key 'lnk_bw'; keys: flops, flops_other, mem_bw, link_bw, "
                           "link_latency, launch, mem"},
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
    specs();
    printf("test_cost: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
