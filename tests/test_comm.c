/* Partitioned programs: devices, collectives, send and recv in the IR.
 *
 *   1. tests/comm/data_parallel.gir (two devices) runs, as loaded and through
 *      the default pipeline in its planned arena, with the same bits; its
 *      results agree with each other as the ops' definitions say (the
 *      all_reduce is the column sums of the gathered rows, and so on).
 *   2. The verifier proves a program cannot hang: malformed programs (a device
 *      missing from a collective, mismatched types, two collectives in opposite
 *      orders, a send without its recv, a read across devices, a collective's
 *      result read too early) get their exact diagnostic, and only it.
 *
 *   test_comm SOURCE_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "filecheck.h"
#include "passes.h"

static int passed, failed;

static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL: %s\n", what);
    }
}


static const float *out(rt_exec *x, const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return rt_exec_data(x, g->outputs[i].value);
    return NULL;
}

static rt_exec *run(ir_graph *g, mp_plan *p)
{
    char err[256];
    rt_exec *x = p ? rt_exec_new_planned(g, p->offset_by_id, p->device_bytes, err, sizeof err)
                   : rt_exec_new(g, err, sizeof err);
    if (!x) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    rt_exec_init_params(x, 7);
    for (int i = 0; i < g->ninputs; i++) {
        float *d = rt_exec_data(x, g->inputs[i]);
        for (int64_t k = 0; k < ir_type_numel(&g->inputs[i]->type); k++)
            d[k] = (float)sin(1.0 + (double)k + 10.0 * i);
    }
    if (rt_exec_run(x, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        rt_exec_free(x);
        return NULL;
    }
    return x;
}

static void data_parallel(const char *src)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/comm/data_parallel.gir", src);
    size_t len;
    char *text = read_file(path, &len);
    diag d;
    diag_init(&d);
    ir_graph *g = text ? ir_parse(path, text, len, &d) : NULL;
    ir_graph *h = text ? ir_parse(path, text, len, &d) : NULL;
    pm_options o = {1, 0, NULL, NULL, stderr, NULL};
    mp_plan *p = NULL;
    char err[256];
    if (!g || !h || ir_verify(g, &d) || pm_run(h, pm_default_pipeline(0, 0, 0), &o, &d) ||
        !(p = mp_plan_graph(h)) || mp_check(h, p, err, sizeof err)) {
        diag_print(&d, stderr);
        check(0, "data_parallel.gir loads, optimizes and plans");
        goto done;
    }
    rt_exec *x = run(g, NULL), *y = run(h, p);
    check(x && y, "data_parallel.gir runs");
    if (x && y) {
        const float *t0 = out(x, g, "total0"), *t1 = out(x, g, "total1"),
                    *g0 = out(x, g, "gathered0"), *g1 = out(x, g, "gathered1"),
                    *r0 = out(x, g, "scattered0"), *r1 = out(x, g, "scattered1"),
                    *b0 = out(x, g, "bcast0"), *rv = out(x, g, "received");
        int ok = 1;
        for (int c = 0; c < 2; c++) { /* the all_reduce: column sums of all 4 rows */
            float s = 0;
            for (int r = 0; r < 4; r++)
                s += g0[r * 2 + c];
            ok &= fabsf(t0[c] - s) <= 1e-5f * (1 + fabsf(s)) && t0[c] == t1[c];
        }
        check(ok, "all_reduce gives every device the sum");
        check(!memcmp(g0, g1, 8 * sizeof *g0), "all_gather gives every device every row");
        check(r0[0] == t0[0] + t1[0] && r1[0] == t0[1] + t1[1],
              "reduce_scatter gives rank r the sum of slice r");
        check(!memcmp(b0, g0 + 4, 4 * sizeof *b0), "broadcast gives the root's tensor");
        check(!memcmp(rv, g0 + 4, 4 * sizeof *rv), "recv gets what send sent");
        int same = 1;
        for (int i = 0; i < g->noutputs; i++)
            same &= !memcmp(rt_exec_data(x, g->outputs[i].value),
                            rt_exec_data(y, h->outputs[i].value),
                            ir_type_bytes(&g->outputs[i].value->type));
        check(same, "the optimized, planned program computes the same bits");
    }
    rt_exec_free(x);
    rt_exec_free(y);
done:
    mp_plan_free(p);
    if (g)
        ir_graph_free(g);
    if (h)
        ir_graph_free(h);
    diag_free(&d);
    free(text);
}

#define H "graph g {\n  input %x: f32[2]\n"
static const struct {
    const char *text, *want;
} bad[] = {
    {H "  %a: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]}\n  output y = %a\n}\n",
     "error: collective 1: 1 of the 2 devices of its group take part"},
    {H "  %a: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]}\n"
       "  %b: f32[2] = all_reduce(%x) {id = 1, group = [0, 2]} on 1\n}\n",
     "error: collective 1: node %b (all_reduce) does not match node %a"},
    {H "  %a: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]}\n"
       "  %b: f32[2] = all_reduce(%x) {id = 2, group = [0, 1]}\n"
       "  %c: f32[2] = all_reduce(%x) {id = 2, group = [0, 1]} on 1\n"
       "  %d: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]} on 1\n}\n",
     "error: collectives 1 and 2 come in one order on device 0 and in the other"},
    {H "  %k: i32[] = send(%x) {id = 3, peer = 1}\n}\n",
     "error: send 3 on device 0 has 0 matching recvs on device 1"},
    {H "  %a: f32[2] = relu(%x)\n  %b: f32[2] = neg(%a) on 1\n}\n",
     "error: node %b (neg) on device 1 reads a of device 0"},
    {H "  %a: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]}\n"
       "  %e: f32[2] = relu(%a)\n"
       "  %b: f32[2] = all_reduce(%x) {id = 1, group = [0, 1]} on 1\n}\n",
     "error: node %e (relu) reads the result of collective 1 before all its devices"},
    {H "  %k: i32[] = send(%x) {id = 3, peer = 1}\n"
       "  %v: f32[3] = recv() {id = 3, peer = 0, shape = [3]} on 1\n}\n",
     "error: recv 3: its type differs from what its send sends"},
};

static void verifier_cases(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        diag d;
        diag_init(&d);
        ir_graph *g = ir_parse("t.gir", bad[i].text, strlen(bad[i].text), &d);
        if (g)
            ir_verify(g, &d);
        char *msg = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&msg, &len);
        diag_print(&d, f);
        fclose(f);
        char what[256];
        snprintf(what, sizeof what, "bad program %zu: want '%s', got:\n%s", i, bad[i].want, msg);
        /* IR text without locations: the message names the node instead */
        check(strncmp(msg, "gnc: ", 5) == 0 && strstr(msg, bad[i].want) == msg + 5 &&
                  !strchr(strchr(msg, '\n') + 1, '\n'), what);
        free(msg);
        if (g)
            ir_graph_free(g);
        diag_free(&d);
    }
}

/* Every wait between virtual devices has a deadline (rt_exec_set_timeout):
 * with one device stopped by the executor's test hook (rt_comm_test_stall,
 * as a hung device), the run fails within the deadline and not before it,
 * with one message that names the op, its id and whom it waited for (the
 * devices that have not come to a collective, a recv's sender), and the
 * other devices are woken.  The same executor then runs the program to the
 * end once the fault is gone. */
#include <time.h>

#include "kernels.h"

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void deadline_cases(void)
{
    static const struct {
        const char *text, *want;
        int stall;
    } cases[] = {
        {"graph g {\n  input %x: f32[4]\n"
         "  %a: f32[4] = all_reduce(%x) {id = 1, group = [0, 1, 2]}\n"
         "  %b: f32[4] = all_reduce(%x) {id = 1, group = [0, 1, 2]} on 1\n"
         "  %c: f32[4] = all_reduce(%x) {id = 1, group = [0, 1, 2]} on 2\n"
         "  output y = %a\n}\n",
         ": waited 1.5 s for all_reduce 1 (device 2 of 0, 1, 2 has not come): giving up", 2},
        {"graph g {\n  input %x: f32[4]\n"
         "  %k: i32[] = send(%x) {id = 3, peer = 1}\n"
         "  %v: f32[4] = recv() {id = 3, peer = 0, shape = [4]} on 1\n"
         "  output y = %v\n}\n",
         "device 1: waited 1.5 s for recv 3 (from device 0): giving up", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char what[512], err[512] = "";
        diag d;
        diag_init(&d);
        ir_graph *g = ir_parse("t.gir", cases[i].text, strlen(cases[i].text), &d);
        rt_exec *x = g && !ir_verify(g, &d) ? rt_exec_new(g, err, sizeof err) : NULL;
        snprintf(what, sizeof what, "deadline case %zu loads and verifies", i);
        check(x != NULL, what);
        if (!x) {
            diag_print(&d, stderr);
            fprintf(stderr, "%s\n", err);
        } else {
            rt_exec_set_timeout(x, 1.5);
            rt_comm_test_stall(x, cases[i].stall, -1);
            double t0 = seconds_now();
            int rc = rt_exec_run(x, err, sizeof err);
            double took = seconds_now() - t0;
            snprintf(what, sizeof what, "deadline case %zu: want '...%s' in 1.5 to 3 s, got "
                     "'%s' after %.2f s", i, cases[i].want, rc ? err : "success", took);
            const char *at = rc ? strstr(err, cases[i].want) : NULL;
            check(at && !at[strlen(cases[i].want)] && took >= 1.5 && took < 3, what);
            rt_comm_test_stall(x, -1, -1);
            rc = rt_exec_run(x, err, sizeof err);
            snprintf(what, sizeof what, "deadline case %zu runs once the device is back: %s", i,
                     rc ? err : "it did");
            check(rc == 0, what);
        }
        rt_exec_free(x);
        if (g)
            ir_graph_free(g);
        diag_free(&d);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_comm SOURCE_DIR\n");
        return 2;
    }
    data_parallel(argv[1]);
    verifier_cases();
    deadline_cases();
    printf("test_comm: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
