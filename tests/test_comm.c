/* Partitioned programs: devices, collectives, send and recv in the IR.
 *
 *   1. tests/comm/data_parallel.gir (two devices) runs, as loaded and through
 *      the default pipeline in its planned arena, with the same bits; its
 *      results agree with each other as the ops' definitions say (the
 *      all_reduce is the column sums of the gathered rows, and so on).
 *   2. A reduce_scatter of several operands (a ZeRO gradient bucket) along
 *      axis 0 and 1 gives each rank the rank-ordered sum of its slice of each;
 *      an all_gather of several (ZeRO's updated shards) every rank's of each.
 *   3. The verifier proves a program cannot hang: malformed programs (a device
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

/* A reduce_scatter (gather 0) or all_gather (1) of a bucket of tensors on
 * three virtual devices, group out of device order, along axis (0 or 1):
 * reduce_scatter gives rank r as its result j the sum over the ranks, in rank
 * order, of slice r of operand j, bit for bit; all_gather gives every rank as
 * result j every rank's operand j in rank order along axis.  Both the same
 * bits as one collective per tensor; as loaded and through the pipeline into
 * its planned arena. */
static void bucketed(int gather, int axis)
{
    const char *op = gather ? "all_gather" : "reduce_scatter";
    static const int64_t group[3] = {2, 0, 1};
    /* the whole of tensor j: axis 0 {[6, 4], [3]}, axis 1 {[2, 6], [4, 3, 2]};
       reduce_scatter's operand, all_gather's result */
    static const ir_type types[2][2] = {
        {{IR_F32, 2, {6, 4}}, {IR_F32, 1, {3}}},
        {{IR_F32, 2, {2, 6}}, {IR_F32, 3, {4, 3, 2}}},
    };
    const ir_type *tt = types[axis];
    char text[8192], ts[2][64], rs[2][64];
    for (int j = 0; j < 2; j++) {
        ir_type r = tt[j];
        r.dims[axis] /= 3;
        ir_type_str(gather ? &r : &tt[j], ts[j], sizeof ts[j]);
        ir_type_str(gather ? &tt[j] : &r, rs[j], sizeof rs[j]);
    }
    int at = snprintf(text, sizeof text, "graph rs {\n");
    for (int d = 0; d < 3; d++)
        at += snprintf(text + at, sizeof text - (size_t)at,
                       "  input %%a%d: %s\n  input %%b%d: %s\n", d, ts[0], d, ts[1]);
    for (int d = 0; d < 3; d++)
        at += snprintf(text + at, sizeof text - (size_t)at,
                       "  %%ra%d: %s, %%rb%d: %s = %s(%%a%d, %%b%d) {id = 1, "
                       "group = [2, 0, 1], axis = %d} on %d\n", d, rs[0], d, rs[1], op, d, d, axis,
                       d);
    for (int j = 0; j < 2; j++)
        for (int d = 0; d < 3; d++)
            at += snprintf(text + at, sizeof text - (size_t)at,
                           "  %%s%c%d: %s = %s(%%%c%d) {id = %d, group = [2, 0, 1], "
                           "axis = %d} on %d\n", "ab"[j], d, rs[j], op, "ab"[j], d, 2 + j, axis, d);
    for (int d = 0; d < 3; d++)
        at += snprintf(text + at, sizeof text - (size_t)at,
                       "  output ra%d = %%ra%d\n  output rb%d = %%rb%d\n"
                       "  output sa%d = %%sa%d\n  output sb%d = %%sb%d\n",
                       d, d, d, d, d, d, d, d);
    snprintf(text + at, sizeof text - (size_t)at, "}\n");

    char what[128];
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse("rs.gir", text, strlen(text), &d);
    ir_graph *h = ir_parse("rs.gir", text, strlen(text), &d);
    pm_options o = {1, 0, NULL, NULL, stderr, NULL};
    mp_plan *p = NULL;
    char err[256];
    if (!g || !h || ir_verify(g, &d) || pm_run(h, pm_default_pipeline(0, 0, 0), &o, &d) ||
        !(p = mp_plan_graph(h)) || mp_check(h, p, err, sizeof err)) {
        diag_print(&d, stderr);
        snprintf(what, sizeof what, "a bucketed %s along axis %d loads and plans", op, axis);
        check(0, what);
        goto done;
    }
    rt_exec *x = run(g, NULL), *y = run(h, p);
    snprintf(what, sizeof what, "a bucketed %s along axis %d runs", op, axis);
    check(x && y, what);
    if (x && y) {
        int sums = 1, single = 1, planned = 1, shown = 0;
        for (int j = 0; j < 2; j++) {
            int64_t outer = 1, len = tt[j].dims[axis], inner = 1;
            for (int i = 0; i < axis; i++)
                outer *= tt[j].dims[i];
            for (int i = axis + 1; i < tt[j].rank; i++)
                inner *= tt[j].dims[i];
            int64_t part = len / 3, numel = gather ? outer * len * inner : outer * part * inner;
            const float *in[3] = {0};
            for (int q = 0; q < 3; q++) {
                char name[8];
                snprintf(name, sizeof name, "%c%d", "ab"[j], (int)group[q]);
                for (int i = 0; i < g->ninputs; i++)
                    if (strcmp(g->inputs[i]->name, name) == 0)
                        in[q] = rt_exec_data(x, g->inputs[i]);
            }
            for (int r = 0; r < 3; r++) {
                char name[8], one[8];
                snprintf(name, sizeof name, "r%c%d", "ab"[j], (int)group[r]);
                snprintf(one, sizeof one, "s%c%d", "ab"[j], (int)group[r]);
                const float *got = out(x, g, name), *sep = out(x, g, one), *pl = out(y, h, name);
                for (int64_t u = 0; u < outer; u++)
                    for (int64_t i = 0; i < part * inner; i++) {
                        for (int q = 0; gather && q < 3; q++) { /* rank q's operand at slice q */
                            int64_t at = (u * len + q * part) * inner + i;
                            float v = got[at], want = in[q][u * part * inner + i];
                            if (v != want && shown++ < 3)
                                fprintf(stderr, "  axis %d: %s[%lld] = %.9g, want %.9g\n", axis,
                                        name, (long long)at, v, want);
                            sums &= v == want;
                        }
                        if (gather)
                            continue;
                        float want = 0;
                        for (int q = 0; q < 3; q++)
                            want += in[q][(u * len + r * part) * inner + i];
                        float v = got[u * part * inner + i];
                        if (v != want && shown++ < 3)
                            fprintf(stderr, "  axis %d: %s[%lld] = %.9g, want %.9g\n", axis, name,
                                    (long long)(u * part * inner + i), v, want);
                        sums &= v == want;
                    }
                single &= !memcmp(got, sep, (size_t)numel * sizeof *got);
                planned &= !memcmp(got, pl, (size_t)numel * sizeof *got);
            }
        }
        snprintf(what, sizeof what, gather ? "%s axis %d: every rank gets every rank's operands"
                 : "%s axis %d: rank r gets the rank-ordered sum of slice r of every operand", op,
                 axis);
        check(sums, what);
        snprintf(what, sizeof what, "%s axis %d: a bucket gives the bits of one collective per "
                 "tensor", op, axis);
        check(single, what);
        snprintf(what, sizeof what, "%s axis %d: the planned program computes the same bits", op,
                 axis);
        check(planned, what);
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
    /* a bucket of reduce_scatter: every operand is compared across the group,
       and every operand must split */
    {H "  input %z: f32[4]\n"
       "  %a: f32[1], %b: f32[1] = reduce_scatter(%x, %x) {id = 1, group = [0, 1], axis = 0}\n"
       "  %c: f32[1], %d: f32[2] = reduce_scatter(%x, %z) {id = 1, group = [0, 1], axis = 0} "
       "on 1\n}\n",
     "error: collective 1: node %c (reduce_scatter) does not match node %a"},
};

/* Shape inference of a bucket: the first diagnostic of each (the verifier
 * then says the broken collective lacks its device, as it should). */
static const struct {
    const char *text, *want;
} bad_bucket[] = {
    {H "  input %z: f32[3]\n"
       "  %a: f32[1], %b: f32[1] = reduce_scatter(%x, %z) {id = 1, group = [0, 1], axis = 0}\n}\n",
     "error: node %a (reduce_scatter): reduce_scatter: operand 1, f32[3], does not split in 2 "
     "along axis 0\n"},
    {H "  input %z: i32[2]\n"
       "  %a: f32[1], %b: i32[1] = reduce_scatter(%x, %z) {id = 1, group = [0, 1], axis = 0}\n}\n",
     "error: node %a (reduce_scatter): reduce_scatter of several operands takes f32 tensors, "
     "operand 1 is i32[2]\n"},
    {H "  input %z: f32[2, 4]\n"
       "  %a: f32[1], %b: f32[2, 2] = reduce_scatter(%x, %z) {id = 1, group = [0, 1], axis = 1}\n"
       "}\n",
     "error: node %a (reduce_scatter): reduce_scatter axis 1 is out of range for operand 0, "
     "f32[2]\n"},
};

/* What parsing and verifying IR text reports (malloc'd). */
static char *verify_text(const char *text)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse("t.gir", text, strlen(text), &d);
    if (g)
        ir_verify(g, &d);
    char *msg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&msg, &len);
    diag_print(&d, f);
    fclose(f);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    return msg;
}

static void bucket_cases(void)
{
    for (size_t i = 0; i < sizeof bad_bucket / sizeof *bad_bucket; i++) {
        char *msg = verify_text(bad_bucket[i].text), what[512];
        snprintf(what, sizeof what, "bad bucket %zu: want '%s', got:\n%s", i, bad_bucket[i].want,
                 msg);
        check(strncmp(msg, "gnc: ", 5) == 0 && strncmp(msg + 5, bad_bucket[i].want,
                                                       strlen(bad_bucket[i].want)) == 0, what);
        free(msg);
    }
}

static void verifier_cases(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *msg = verify_text(bad[i].text), what[256];
        snprintf(what, sizeof what, "bad program %zu: want '%s', got:\n%s", i, bad[i].want, msg);
        /* IR text without locations: the message names the node instead */
        check(strncmp(msg, "gnc: ", 5) == 0 && strstr(msg, bad[i].want) == msg + 5 &&
                  !strchr(strchr(msg, '\n') + 1, '\n'), what);
        free(msg);
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
    for (int gather = 0; gather < 2; gather++)
        for (int axis = 0; axis < 2; axis++)
            bucketed(gather, axis);
    verifier_cases();
    bucket_cases();
    deadline_cases();
    printf("test_comm: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
