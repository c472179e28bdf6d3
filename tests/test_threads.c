/* Deterministic mode: every kernel of the CPU executor gives the same bits on
 * any number of OpenMP threads, and from inside a parallel region, where a
 * virtual device of a data-parallel program runs its own executor.
 *
 *   1. Every op the executor runs, one node over graph inputs as in
 *      tests/test_ops.c, on shapes large enough that its kernel goes
 *      multi-threaded: a tensor above PAR_MIN elements; convolutions on both their
 *      image-by-image and chunked paths (rt_conv_per_image); GEMMs deep enough
 *      that OpenBLAS's own threading would block them differently.
 *   2. One training step of models/lenet.net and models/resnet18.net at batch 8
 *      (autodiff's graph, then the same through the default training pipeline,
 *      whose fused convolutions run their epilogues image by image).
 *
 * Each program runs on 1 thread (the reference), then on 2, 3 and 4, and from
 * inside `omp parallel num_threads(2)` with an executor per thread: first with
 * the kernels' own regions inactive (one active level, OpenBLAS on one thread),
 * then active with two threads each.  Every node result, and every parameter
 * after the step's updates, must equal the reference's bit for bit; a mismatch
 * reports the first differing element of the first differing value.  Every op of
 * ops.def must be covered.
 *
 *   test_threads SOURCE_DIR */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "frontend.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"

#define MAX_IN 8

static int nfailed, nprograms;
static int covered[IR_NOPS];

/* ---- the ways to run a program ---- */

typedef struct {
    const char *name;
    int devices;   /* 0: the main thread runs the executor; 2: each thread of a region */
    int threads;   /* the kernels' OpenMP threads; 0 on a device: as inherited */
    int levels;    /* omp_set_max_active_levels while the devices run */
} scenario;

static const scenario scenarios[] = {
    {"1 thread", 0, 1, 1},
    {"2 threads", 0, 2, 1},
    {"3 threads", 0, 3, 1},
    {"4 threads", 0, 4, 1},
    {"2 devices, kernels' regions inactive", 2, 0, 1},
    {"2 devices of 2 threads each", 2, 2, 2},
};
#define NSCENARIOS (int)(sizeof scenarios / sizeof scenarios[0])

/* ---- a program: a graph, how to fill its inputs, what to compare ---- */

typedef struct {
    ir_graph *g;
    char desc[512];
    double lo[MAX_IN], hi[MAX_IN]; /* by input index: floats uniform in [lo, hi),
                                      integers in [lo, hi); further inputs [-1, 1) */
    int init_params;               /* fill parameters from their initializers */
    const ir_value **vals;         /* compared: node results in order, then parameters */
    int nvals;
} program;

/* splitmix64 */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t elem_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    return t == IR_F32 || t == IR_F16 || t == IR_BF16 ? sizeof(float) : ir_dtype_size(t);
}

static size_t value_bytes(const ir_value *v)
{
    return (size_t)ir_type_numel(&v->type) * elem_bytes(v);
}

/* Fills input i the same way on every run and every thread. */
static void fill_input(const program *p, rt_exec *x, int i)
{
    const ir_value *v = p->g->inputs[i];
    double lo = i < MAX_IN ? p->lo[i] : -1, hi = i < MAX_IN ? p->hi[i] : 1;
    void *buf = rt_exec_data(x, v);
    uint64_t key = mix((uint64_t)i + 1);
    for (int64_t j = 0, n = ir_type_numel(&v->type); j < n; j++) {
        double r = (double)(mix(key ^ (uint64_t)j) >> 11) * 0x1p-53;
        switch (v->type.dtype) {
        case IR_I32: ((int32_t *)buf)[j] = (int32_t)(lo + (int64_t)(r * (hi - lo))); break;
        case IR_I64: ((int64_t *)buf)[j] = (int64_t)lo + (int64_t)(r * (hi - lo)); break;
        default: ((float *)buf)[j] = (float)(lo + r * (hi - lo)); break;
        }
    }
}

/* Runs p once on a fresh executor; on success *keep holds a copy of every
 * compared value.  Returns 0, or -1 with err. */
static int run_once(const program *p, unsigned char **keep, char *err, size_t errlen)
{
    rt_exec *x = rt_exec_new(p->g, err, errlen);
    if (!x)
        return -1;
    if (p->init_params)
        rt_exec_init_params(x, 1);
    for (int i = 0; i < p->g->ninputs; i++)
        fill_input(p, x, i);
    int rc = rt_exec_run(x, err, errlen);
    for (int k = 0; rc == 0 && k < p->nvals; k++) {
        size_t bytes = value_bytes(p->vals[k]);
        keep[k] = malloc(bytes ? bytes : 1);
        memcpy(keep[k], rt_exec_data(x, p->vals[k]), bytes);
    }
    rt_exec_free(x);
    return rc;
}

static void free_kept(const program *p, unsigned char **keep)
{
    for (int k = 0; k < p->nvals; k++)
        free(keep[k]);
    memset(keep, 0, (size_t)p->nvals * sizeof *keep);
}

static void fail_prog(const program *p, const char *sc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_prog(const program *p, const char *sc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s [%s]: ", p->desc, sc);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    nfailed++;
}

/* The coordinates of element j of v, as text. */
static void coords_str(const ir_value *v, int64_t j, char *buf, size_t len)
{
    int64_t co[IR_MAX_RANK];
    for (int k = v->type.rank - 1; k >= 0; k--) {
        co[k] = j % v->type.dims[k];
        j /= v->type.dims[k];
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < v->type.rank && n < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", k ? ", " : "", (long long)co[k]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

/* Element j of v in data, as text: a float with its bits, or an integer. */
static void elem_str(const ir_value *v, const unsigned char *data, int64_t j, char *buf,
                     size_t len)
{
    switch (v->type.dtype) {
    case IR_I32: snprintf(buf, len, "%d", ((const int32_t *)data)[j]); break;
    case IR_I64: snprintf(buf, len, "%lld", (long long)((const int64_t *)data)[j]); break;
    case IR_U8: snprintf(buf, len, "%u", data[j]); break;
    default: {
        float f;
        uint32_t bits;
        memcpy(&f, data + (size_t)j * sizeof f, sizeof f);
        memcpy(&bits, &f, sizeof bits);
        snprintf(buf, len, "%.9g (0x%08x)", f, bits);
    }
    }
}

/* Compares got with the reference; reports the first element that differs, in
 * the first value that does (in execution order: where the difference starts). */
static void compare(const program *p, const char *sc, unsigned char **ref, unsigned char **got)
{
    int first = -1, ndiff = 0;
    for (int k = 0; k < p->nvals; k++)
        if (memcmp(ref[k], got[k], value_bytes(p->vals[k])) != 0) {
            ndiff++;
            if (first < 0)
                first = k;
        }
    if (first < 0)
        return;
    const ir_value *v = p->vals[first];
    size_t es = elem_bytes(v);
    int64_t n = ir_type_numel(&v->type), j0 = -1, nbad = 0;
    for (int64_t j = 0; j < n; j++)
        if (memcmp(ref[first] + (size_t)j * es, got[first] + (size_t)j * es, es) != 0) {
            nbad++;
            if (j0 < 0)
                j0 = j;
        }
    char at[128], a[64], b[64], tb[128], nb[128];
    coords_str(v, j0, at, sizeof at);
    elem_str(v, got[first], j0, a, sizeof a);
    elem_str(v, ref[first], j0, b, sizeof b);
    fail_prog(p, sc, "%%%s: %s%s is %s, on 1 thread %s; %lld of %lld elements differ, in %d "
              "of %d values", ir_name_str(nb, sizeof nb, v->name),
              ir_type_str(&v->type, tb, sizeof tb), at, a, b, (long long)nbad, (long long)n,
              ndiff, p->nvals);
}

/* Runs p in every scenario against the reference (the first). */
static void run_program(program *p)
{
    nprograms++;
    int cap = 0;
    ir_for_each_node(p->g, n) {
        covered[n->op] = 1;
        cap += n->nout;
    }
    p->vals = calloc((size_t)(cap + p->g->nparams + 1), sizeof *p->vals);
    ir_for_each_node(p->g, n)
        for (int k = 0; k < n->nout; k++)
            p->vals[p->nvals++] = n->out[k];
    for (int i = 0; i < p->g->nparams; i++)
        p->vals[p->nvals++] = p->g->params[i];
    unsigned char **ref = calloc((size_t)p->nvals + 1, sizeof *ref);
    unsigned char **got[2] = {calloc((size_t)p->nvals + 1, sizeof **got),
                              calloc((size_t)p->nvals + 1, sizeof **got)};
    char err[2][256];
    int levels = omp_get_max_active_levels();
    for (int s = 0; s < NSCENARIOS; s++) {
        const scenario *sc = &scenarios[s];
        if (sc->devices && ir_graph_devices(p->g) > 1)
            continue; /* a partitioned program's devices are threads of its own */
        unsigned char **out = s == 0 ? ref : got[0];
        int rc[2] = {0, 0}, team = 0;
        if (sc->devices == 0) {
            rt_set_threads(sc->threads);
            rc[0] = run_once(p, out, err[0], sizeof err[0]);
        } else {
            rt_set_threads(2);
            omp_set_max_active_levels(sc->levels);
#pragma omp parallel num_threads(2)
            {
                int d = omp_get_thread_num();
#pragma omp single
                team = omp_get_num_threads();
                if (sc->threads)
                    omp_set_num_threads(sc->threads);
                rc[d] = run_once(p, got[d], err[d], sizeof err[d]);
            }
            omp_set_max_active_levels(levels);
        }
        if (sc->devices && team != 2)
            fail_prog(p, sc->name, "the region has %d threads, not 2", team);
        for (int d = 0; d < (sc->devices ? sc->devices : 1); d++)
            if (rc[d] != 0)
                fail_prog(p, sc->name, "rt_exec_run: %s", err[d]);
        if (rc[0] || rc[1] || (sc->devices && team != 2)) {
            for (int d = 0; d < 2; d++)
                free_kept(p, got[d]);
            if (s == 0)
                break;
            continue;
        }
        if (s > 0)
            for (int d = 0; d < (sc->devices ? sc->devices : 1); d++) {
                char name[96];
                snprintf(name, sizeof name, sc->devices ? "%s, device %d" : "%s", sc->name, d);
                compare(p, name, ref, got[d]);
                free_kept(p, got[d]);
            }
    }
    free_kept(p, ref);
    free(ref);
    free(got[0]);
    free(got[1]);
    free(p->vals);
}

/* ---- single-node cases ---- */

#define NARGS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define INTS(...) NARGS(__VA_ARGS__), (int64_t[]){__VA_ARGS__}
static ir_type ty(ir_dtype dt, int rank, const int64_t *dims)
{
    ir_type t = {dt, rank, {0}};
    for (int k = 0; k < rank; k++)
        t.dims[k] = dims[k];
    return t;
}
#define F32(...) ty(IR_F32, INTS(__VA_ARGS__))
#define I32(...) ty(IR_I32, INTS(__VA_ARGS__))
#define I64(...) ty(IR_I64, INTS(__VA_ARGS__))
#define SCALAR ty(IR_F32, 0, NULL)
#define SCALAR_I64 ty(IR_I64, 0, NULL)

typedef struct {
    program p;
    ir_op op;
    int nin;
    ir_value *in[MAX_IN];
    ir_node *node;
} tcase;

static void tc_begin(tcase *c, ir_op op)
{
    memset(c, 0, sizeof *c);
    c->p.g = ir_graph_new("t");
    c->op = op;
}

static ir_value *tc_in(tcase *c, ir_type t, double lo, double hi)
{
    char name[16];
    snprintf(name, sizeof name, "in%d", c->nin);
    c->p.lo[c->nin] = lo;
    c->p.hi[c->nin] = hi;
    return c->in[c->nin++] = ir_add_input(c->p.g, name, t, (ir_loc){0});
}

/* The node over every input so far, with nout results; set its attributes, then
 * tc_run. */
static ir_node *tc_node(tcase *c, int nout)
{
    return c->node = ir_node_new(c->p.g, c->op, c->nin, c->in, nout, "y", (ir_loc){0});
}

/* A cross_entropy or nll_loss (or its gradient) node with these attributes,
 * unsplit. */
static void ce_node(tcase *c, double eps, int64_t ignore)
{
    ir_node *n = tc_node(c, 1);
    if (c->op == IR_OP_CROSS_ENTROPY || c->op == IR_OP_CROSS_ENTROPY_GRAD)
        ir_set_float(c->p.g, n, "label_smoothing", eps);
    ir_set_int(c->p.g, n, "ignore_index", ignore);
    ir_set_int(c->p.g, n, "split", 1);
}

static void describe(tcase *c)
{
    char tb[128];
    size_t n = 0, cap = sizeof c->p.desc;
    char *s = c->p.desc;
    n += (size_t)snprintf(s + n, cap - n, "%s(", ir_ops[c->op].name);
    for (int i = 0; i < c->nin && n < cap; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s%s", i ? ", " : "",
                              ir_type_str(&c->in[i]->type, tb, sizeof tb));
    if (n < cap)
        n += (size_t)snprintf(s + n, cap - n, ")");
    for (int i = 0; i < c->node->nattrs && n < cap; i++) {
        const ir_attr *a = &c->node->attrs[i];
        n += (size_t)snprintf(s + n, cap - n, " %s=", a->key);
        if (a->kind == IR_ATTR_INT)
            n += (size_t)snprintf(s + n, cap - n, "%lld", (long long)a->i);
        else if (a->kind == IR_ATTR_FLOAT)
            n += (size_t)snprintf(s + n, cap - n, "%g", a->f);
        else
            for (int k = 0; k < a->n && n < cap; k++)
                n += (size_t)snprintf(s + n, cap - n, "%s%lld%s", k ? "," : "[",
                                      (long long)a->ints[k], k == a->n - 1 ? "]" : "");
    }
}

/* Types the node, checks that the case is large enough to go multi-threaded,
 * and runs it in every scenario. */
static void tc_run(tcase *c)
{
    char err[256];
    ir_type t[IR_MAX_RESULTS];
    describe(c);
    ir_set_attr_defaults(c->p.g, c->node);
    if (!ir_infer(c->node, t, err, sizeof err)) {
        fail_prog(&c->p, "build", "ir_infer: %s", err);
        goto done;
    }
    int64_t most = 0;
    for (int k = 0; k < c->node->nout; k++) {
        c->node->out[k]->type = t[k];
        char name[16];
        snprintf(name, sizeof name, "y%d", k);
        ir_add_output(c->p.g, name, c->node->out[k], (ir_loc){0});
        most = ir_type_numel(&t[k]) > most ? ir_type_numel(&t[k]) : most;
    }
    for (int i = 0; i < c->nin; i++)
        most = ir_type_numel(&c->in[i]->type) > most ? ir_type_numel(&c->in[i]->type) : most;
    ir_append(c->p.g, c->node);
    diag d;
    diag_init(&d);
    if (ir_verify(c->p.g, &d) != 0) {
        fail_prog(&c->p, "build", "the graph does not verify:");
        diag_print(&d, stdout);
    } else if (most <= PAR_MIN) {
        fail_prog(&c->p, "build", "no tensor above PAR_MIN (%d) elements: too small to go "
                  "multi-threaded", PAR_MIN);
    } else {
        run_program(&c->p);
    }
    diag_free(&d);
done:
    ir_graph_free(c->p.g);
}

static void unary_case(ir_op op, ir_type t, double lo, double hi)
{
    tcase c;
    tc_begin(&c, op);
    tc_in(&c, t, lo, hi);
    ir_node *n = tc_node(&c, 1);
    if (op == IR_OP_DROPOUT)
        ir_set_float(c.p.g, n, "p", 0.5);
    if (op == IR_OP_LEAKY_RELU || op == IR_OP_LEAKY_RELU_GRAD)
        ir_set_float(c.p.g, n, "slope", 0.2);
    if (op == IR_OP_ELU || op == IR_OP_ELU_GRAD)
        ir_set_float(c.p.g, n, "alpha", 0.7);
    if (op == IR_OP_POW || op == IR_OP_POW_GRAD)
        ir_set_float(c.p.g, n, "p", 3.0);
    if (op == IR_OP_CLAMP || op == IR_OP_CLAMP_GRAD) {
        ir_set_float(c.p.g, n, "min", -1.0);
        ir_set_float(c.p.g, n, "max", 2.0);
    }
    tc_run(&c);
}

static void binary_case(ir_op op, ir_type a, ir_type b)
{
    tcase c;
    tc_begin(&c, op);
    tc_in(&c, a, -2, 2);
    tc_in(&c, b, op == IR_OP_DIV ? 0.25 : -2, 2);
    tc_node(&c, 1);
    tc_run(&c);
}

static void set_conv_attrs(ir_graph *g, ir_node *n, int64_t stride, int64_t pad,
                           int64_t groups)
{
    ir_set_ints(g, n, "stride", 2, (int64_t[]){stride, stride});
    ir_set_ints(g, n, "pad", 2, (int64_t[]){pad, pad});
    ir_set_ints(g, n, "dilation", 2, (int64_t[]){1, 1});
    ir_set_int(g, n, "groups", groups);
}

/* conv2d and its gradients over x[n, c, h, w] and w[o, c / groups, k, k]:
 * per_image says which path rt_conv_per_image must pick. */
static void conv_cases(ir_type x, ir_type w, int64_t stride, int64_t pad, int64_t groups,
                       int per_image)
{
    int64_t oh = (x.dims[2] + 2 * pad - w.dims[2]) / stride + 1;
    int64_t ow = (x.dims[3] + 2 * pad - w.dims[3]) / stride + 1;
    ir_type y = F32(x.dims[0], w.dims[0], oh, ow);
    for (int op = 0; op < 3; op++) {
        tcase c;
        static const ir_op ops[] = {IR_OP_CONV2D, IR_OP_CONV2D_GRAD_INPUT,
                                    IR_OP_CONV2D_GRAD_WEIGHT};
        tc_begin(&c, ops[op]);
        if (op == 0) {
            tc_in(&c, x, -1, 1);
            tc_in(&c, w, -1, 1);
            tc_in(&c, F32(w.dims[0]), -1, 1);
        } else {
            tc_in(&c, y, -1, 1);
            tc_in(&c, op == 1 ? w : x, -1, 1);
        }
        ir_node *n = tc_node(&c, 1);
        set_conv_attrs(c.p.g, n, stride, pad, groups);
        if (op > 0) {
            const ir_type *s = op == 1 ? &x : &w;
            ir_set_ints(c.p.g, n, "shape", 4, s->dims);
        }
        conv_geom g = rt_conv_geometry(n, &x, &w, &y);
        if (rt_conv_per_image(&g) != per_image) {
            describe(&c);
            fail_prog(&c.p, "build", "expected the %s path", per_image ? "image-by-image"
                                                                        : "chunked");
        }
        tc_run(&c);
    }
}

/* A pooling op's case; ceil: PyTorch's ceil_mode (square windows). */
static void pool_case(ir_op op, ir_type x, int64_t k, int64_t s, int64_t pad, int cip, int ceil)
{
    tcase c;
    tc_begin(&c, op);
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = (x.dims[2 + i] + 2 * pad - k + (ceil ? s - 1 : 0)) / s + 1;
        if (ceil && (o[i] - 1) * s >= x.dims[2 + i] + pad)
            o[i]--;
    }
    int64_t oh = o[0], ow = o[1];
    if (op == IR_OP_MAXPOOL2D_GRAD || op == IR_OP_AVGPOOL2D_GRAD)
        tc_in(&c, F32(x.dims[0], x.dims[1], oh, ow), -1, 1);
    if (op != IR_OP_AVGPOOL2D_GRAD)
        tc_in(&c, x, -1, 1);
    ir_node *n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "kernel", 2, (int64_t[]){k, k});
    ir_set_ints(c.p.g, n, "stride", 2, (int64_t[]){s, s});
    ir_set_ints(c.p.g, n, "pad", 2, (int64_t[]){pad, pad});
    if (op == IR_OP_MAXPOOL2D || op == IR_OP_MAXPOOL2D_GRAD)
        ir_set_ints(c.p.g, n, "dilation", 2, (int64_t[]){1, 1});
    else
        ir_set_int(c.p.g, n, "count_include_pad", cip);
    ir_set_int(c.p.g, n, "ceil_mode", ceil);
    if (op == IR_OP_AVGPOOL2D_GRAD)
        ir_set_ints(c.p.g, n, "shape", 4, x.dims);
    tc_run(&c);
}

static void test_forward(void)
{
    tcase c;
    tc_begin(&c, IR_OP_CONST);
    ir_node *n = tc_node(&c, 1);
    n->out[0]->type = F32(64, 1100);
    ir_set_float(c.p.g, n, "value", 0.3);
    tc_run(&c);
    tc_begin(&c, IR_OP_ARANGE);
    n = tc_node(&c, 1);
    n->out[0]->type = F32(70400);
    ir_set_float(c.p.g, n, "start", -3.5);
    ir_set_float(c.p.g, n, "step", 0.125);
    tc_run(&c);
    tc_begin(&c, IR_OP_CAST);
    tc_in(&c, F32(64, 1100), -300, 300);
    n = tc_node(&c, 1);
    n->out[0]->type.dtype = IR_I32;
    tc_run(&c);

    for (int op = 0; op < IR_NOPS; op++) /* every unary op */
        if (ir_op_is((ir_op)op, IR_UNARY))
            unary_case((ir_op)op, F32(64, 1100), -8, 8);
    static const ir_op binary[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL,     IR_OP_DIV,
                                   IR_OP_MAXIMUM, IR_OP_MINIMUM, IR_OP_GT, IR_OP_LT,
                                   IR_OP_GE,  IR_OP_LE,  IR_OP_EQ,      IR_OP_NE};
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) {
        binary_case(binary[i], F32(64, 1100), F32(64, 1100));
        binary_case(binary[i], F32(8, 64, 130), F32(64, 1));
    }
    static const ir_op extreme[] = {IR_OP_REDUCE_MAX, IR_OP_REDUCE_MIN, IR_OP_ARGMAX};
    for (size_t i = 0; i < sizeof extreme / sizeof extreme[0]; i++)
        for (int axis = 0; axis < 2; axis++) {
            tc_begin(&c, extreme[i]);
            tc_in(&c, F32(64, 1100), -8, 8);
            ir_node *n = tc_node(&c, 1);
            ir_set_int(c.p.g, n, "axis", axis);
            if (extreme[i] != IR_OP_ARGMAX)
                ir_set_int(c.p.g, n, "ties", axis);
            tc_run(&c);
        }
    tc_begin(&c, IR_OP_WHERE);
    tc_in(&c, F32(8, 64, 1), -1, 1);
    tc_in(&c, F32(64, 130), -2, 2);
    tc_in(&c, F32(8, 1, 130), -2, 2);
    tc_node(&c, 1);
    tc_run(&c);

    /* GEMMs: depths around and past OpenBLAS's blocking of k (its kernels' Q), on
       one tile of rt_gemm's grid and on several */
    struct { ir_type a, b; } mm[] = {
        {F32(256, 1000), F32(1000, 160)},
        {F32(1024, 500), F32(500, 1024)},     /* 4 x 4 tiles */
        {F32(4, 96, 500), F32(500, 120)},     /* b broadcast over a's batch */
        {F32(2, 128, 333), F32(2, 333, 150)},
    };
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++) {
        tc_begin(&c, IR_OP_MATMUL);
        tc_in(&c, mm[i].a, -1, 1);
        tc_in(&c, mm[i].b, -1, 1);
        tc_node(&c, 1);
        tc_run(&c);
    }
    struct { ir_type x; int64_t out; int bias; } dn[] = {
        {F32(128, 500), 300, 1}, {F32(2, 64, 1000), 272, 0}, {F32(256, 700), 130, 1},
    };
    for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) {
        int64_t in = dn[i].x.dims[dn[i].x.rank - 1];
        tc_begin(&c, IR_OP_DENSE);
        tc_in(&c, dn[i].x, -1, 1);
        tc_in(&c, F32(dn[i].out, in), -1, 1);
        if (dn[i].bias)
            tc_in(&c, F32(dn[i].out), -1, 1);
        tc_node(&c, 1);
        tc_run(&c);
    }

    /* convolutions, and their gradients, on both paths */
    conv_cases(F32(8, 56, 12, 12), F32(64, 56, 3, 3), 1, 1, 1, 1);
    conv_cases(F32(8, 64, 10, 10), F32(128, 32, 3, 3), 1, 1, 2, 1);
    conv_cases(F32(8, 500, 8, 8), F32(72, 500, 1, 1), 1, 0, 1, 1);  /* 1x1: GEMM on x */
    conv_cases(F32(16, 60, 7, 7), F32(128, 60, 3, 3), 1, 1, 1, 0);
    conv_cases(F32(16, 64, 9, 9), F32(96, 16, 3, 3), 2, 1, 4, 0);
    conv_cases(F32(2, 40, 30, 30), F32(48, 40, 3, 3), 1, 1, 1, 0);   /* few large images */

    tc_begin(&c, IR_OP_BATCHNORM);
    tc_in(&c, F32(8, 64, 12, 12), -2, 2);
    tc_in(&c, F32(64), -2, 2);
    tc_in(&c, F32(64), -1, 1);
    tc_in(&c, F32(64), -0.5, 0.5);
    tc_in(&c, F32(64), 0.25, 2);
    n = tc_node(&c, 1);
    ir_set_float(c.p.g, n, "eps", 1e-5);
    ir_set_float(c.p.g, n, "momentum", 0.1);
    tc_run(&c);

    tc_begin(&c, IR_OP_LAYERNORM);
    tc_in(&c, F32(64, 768), -1, 1);
    tc_in(&c, F32(768), -2, 2);
    tc_in(&c, F32(768), -1, 1);
    n = tc_node(&c, 1);
    ir_set_float(c.p.g, n, "eps", 1e-5);
    tc_run(&c);

    for (int causal = 0; causal < 2; causal++) /* tiles of rows and keys, ragged; then */
        for (int hkv = 4; hkv >= 1; hkv -= 3) { /* grouped-query: 4 query heads over 1 */
            tc_begin(&c, IR_OP_ATTENTION);
            tc_in(&c, F32(2, 4, 200, 32), -1, 1);
            tc_in(&c, F32(2, hkv, 180, 32), -1, 1);
            tc_in(&c, F32(2, hkv, 180, 48), -1, 1);
            n = tc_node(&c, 2);
            ir_set_int(c.p.g, n, "causal", causal);
            ir_set_float(c.p.g, n, "scale", 0.25);
            tc_run(&c);
        }

    for (int lg = 0; lg < 2; lg++) {
        struct { ir_type x; int axis; } sm[] = {{F32(64, 1000), 1}, {F32(16, 100, 30), 1}};
        for (size_t i = 0; i < 2; i++) {
            tc_begin(&c, lg ? IR_OP_LOG_SOFTMAX : IR_OP_SOFTMAX);
            tc_in(&c, sm[i].x, -5, 5);
            n = tc_node(&c, 1);
            ir_set_int(c.p.g, n, "axis", sm[i].axis);
            tc_run(&c);
        }
    }

    pool_case(IR_OP_MAXPOOL2D, F32(8, 64, 16, 16), 3, 2, 1, 0, 0);
    pool_case(IR_OP_AVGPOOL2D, F32(8, 64, 16, 16), 2, 2, 0, 1, 0);
    pool_case(IR_OP_AVGPOOL2D, F32(8, 64, 16, 16), 3, 1, 1, 0, 0);
    pool_case(IR_OP_MAXPOOL2D, F32(8, 64, 16, 16), 3, 2, 1, 0, 1);
    pool_case(IR_OP_AVGPOOL2D, F32(8, 64, 17, 17), 2, 2, 0, 1, 1);
    pool_case(IR_OP_AVGPOOL2D, F32(8, 64, 16, 16), 3, 2, 1, 0, 1);
    tc_begin(&c, IR_OP_GLOBAL_AVGPOOL);
    tc_in(&c, F32(8, 512, 4, 4), -1, 1);
    tc_node(&c, 1);
    tc_run(&c);
    tc_begin(&c, IR_OP_ADAPTIVE_AVGPOOL2D);
    tc_in(&c, F32(8, 64, 17, 15), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "size", 2, (int64_t[]){5, 7});
    tc_run(&c);
    for (int bil = 0; bil < 2; bil++) { /* upsample2d, nearest and bilinear */
        tc_begin(&c, IR_OP_UPSAMPLE2D);
        tc_in(&c, F32(8, 64, 11, 13), -1, 1);
        n = tc_node(&c, 1);
        ir_set_ints(c.p.g, n, "size", 2, (int64_t[]){16, 19});
        ir_set_int(c.p.g, n, "mode", bil);
        ir_set_int(c.p.g, n, "align_corners", 0);
        ir_set_float(c.p.g, n, "scale_h", 1.5);
        ir_set_float(c.p.g, n, "scale_w", 0);
        tc_run(&c);
    }

    tc_begin(&c, IR_OP_RESHAPE);
    tc_in(&c, F32(64, 1100), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "shape", 2, (int64_t[]){1100, 64});
    tc_run(&c);
    tc_begin(&c, IR_OP_TRANSPOSE);
    tc_in(&c, F32(64, 32, 40), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "perm", 3, (int64_t[]){2, 0, 1});
    tc_run(&c);
    tc_begin(&c, IR_OP_CONCAT);
    tc_in(&c, F32(64, 300), -1, 1);
    tc_in(&c, F32(64, 400), -1, 1);
    n = tc_node(&c, 1);
    ir_set_int(c.p.g, n, "axis", 1);
    tc_run(&c);
    tc_begin(&c, IR_OP_PAD);
    tc_in(&c, F32(128, 300), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "before", 2, (int64_t[]){0, 7});
    ir_set_ints(c.p.g, n, "after", 2, (int64_t[]){0, 90});
    ir_set_float(c.p.g, n, "value", 0.5);
    tc_run(&c);
    tc_begin(&c, IR_OP_EMBEDDING);
    tc_in(&c, I64(64, 40), 0, 1000);
    tc_in(&c, F32(1000, 64), -1, 1);
    n = tc_node(&c, 1);
    ir_set_int(c.p.g, n, "padding_idx", -1);
    tc_run(&c);

    tc_begin(&c, IR_OP_CROSS_ENTROPY);
    tc_in(&c, F32(64, 1000), -5, 5);
    tc_in(&c, I32(64), 0, 1000);
    ce_node(&c, 0, -100);
    tc_run(&c);
    /* [n, c, h, w] logits, smoothed, a class ignored */
    tc_begin(&c, IR_OP_CROSS_ENTROPY);
    tc_in(&c, F32(8, 21, 16, 16), -5, 5);
    tc_in(&c, I64(8, 16, 16), 0, 21);
    ce_node(&c, 0.1, 4);
    tc_run(&c);
    tc_begin(&c, IR_OP_NLL_LOSS);
    tc_in(&c, F32(8, 21, 16, 16), -5, 5);
    tc_in(&c, I64(8, 16, 16), 0, 21);
    ce_node(&c, 0, 4);
    tc_run(&c);
    tc_begin(&c, IR_OP_MSE);
    tc_in(&c, F32(300, 200), -1, 1);
    tc_in(&c, F32(300, 200), -1, 1);
    tc_node(&c, 1);
    tc_run(&c);
}

static void test_training(void)
{
    tcase c;
    ir_type img = F32(8, 64, 12, 12), ch = F32(64);
    for (int apply = 0; apply < 2; apply++) {
        tc_begin(&c, apply ? IR_OP_BATCHNORM_APPLY : IR_OP_BATCHNORM_TRAIN);
        tc_in(&c, img, -2, 2);
        tc_in(&c, ch, -2, 2);
        tc_in(&c, ch, -1, 1);
        tc_in(&c, ch, -0.5, 0.5);    /* running mean, or the batch's */
        tc_in(&c, ch, 0.25, 2);      /* running variance, or invstd */
        ir_node *n = tc_node(&c, apply ? 1 : 5);
        ir_set_float(c.p.g, n, "eps", 1e-5);
        ir_set_float(c.p.g, n, "momentum", 0.1);
        tc_run(&c);
    }
    ir_node *n;
    for (int shard = 0; shard < 2; shard++) {  /* the whole tensor; rows 64.. of 256 */
        tc_begin(&c, IR_OP_DROPOUT_TRAIN);
        tc_in(&c, F32(64, 1100), -1, 1);
        tc_in(&c, SCALAR_I64, 3, 4);     /* step */
        tc_in(&c, SCALAR_I64, 7, 8);     /* seed */
        n = tc_node(&c, 2);
        ir_set_float(c.p.g, n, "p", 0.3);
        ir_set_int(c.p.g, n, "salt", 5);
        ir_set_ints(c.p.g, n, "shard", shard ? 3 : 0, (int64_t[]){0, 64, 256});
        tc_run(&c);
    }

    struct { ir_type a; int rank; int64_t shape[3]; } st[] = {
        {F32(64, 1100), 2, {1, 1100}}, {F32(64, 8, 130), 3, {1, 8, 1}}, {F32(64, 1100), 1, {1}},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        tc_begin(&c, IR_OP_SUM_TO);
        tc_in(&c, st[i].a, -1, 1);
        n = tc_node(&c, 1);
        ir_set_ints(c.p.g, n, "shape", st[i].rank, st[i].shape);
        tc_run(&c);
    }
    tc_begin(&c, IR_OP_BROADCAST_TO);
    tc_in(&c, F32(1, 1100), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "shape", 2, (int64_t[]){64, 1100});
    tc_run(&c);
    tc_begin(&c, IR_OP_SLICE);
    tc_in(&c, F32(64, 1100), -1, 1);
    n = tc_node(&c, 1);
    ir_set_int(c.p.g, n, "axis", 1);
    ir_set_int(c.p.g, n, "start", 100);
    ir_set_int(c.p.g, n, "size", 600);
    tc_run(&c);

    for (int op = 0; op < IR_NOPS; op++) { /* every unary op's gradient */
        if (!ir_op_is((ir_op)op, IR_UNARY_GRAD))
            continue;
        ir_op grad = (ir_op)op;
        tc_begin(&c, grad);
        tc_in(&c, F32(64, 1100), -1, 1);
        tc_in(&c, F32(64, 1100), -3, 3);
        n = tc_node(&c, 1);
        if (grad == IR_OP_LEAKY_RELU_GRAD || grad == IR_OP_ELU_GRAD)
            ir_set_float(c.p.g, n, grad == IR_OP_ELU_GRAD ? "alpha" : "slope", 0.3);
        if (grad == IR_OP_POW_GRAD)
            ir_set_float(c.p.g, n, "p", 2.5);
        if (grad == IR_OP_CLAMP_GRAD) {
            ir_set_float(c.p.g, n, "min", -1.0);
            ir_set_float(c.p.g, n, "max", 2.0);
        }
        tc_run(&c);
    }
    for (int i = 0; i < 4; i++) { /* max, min; the first extreme, the ties */
        tc_begin(&c, i % 2 ? IR_OP_REDUCE_MIN_GRAD : IR_OP_REDUCE_MAX_GRAD);
        tc_in(&c, i % 2 ? F32(64, 1) : F32(1, 1100), -1, 1);
        tc_in(&c, F32(64, 1100), -3, 3);
        n = tc_node(&c, 1);
        ir_set_int(c.p.g, n, "axis", i % 2);
        ir_set_int(c.p.g, n, "ties", i / 2);
        tc_run(&c);
    }
    struct { ir_type dy; int64_t in; } dg[] = {
        {F32(128, 300), 500}, {F32(2, 250, 130), 700}, {F32(1000, 64), 120},
        {F32(700, 520), 600},
    };
    for (size_t i = 0; i < sizeof dg / sizeof dg[0]; i++)
        for (int wgt = 0; wgt < 2; wgt++) {
            const ir_type *dy = &dg[i].dy;
            int64_t out = dy->dims[dy->rank - 1];
            ir_type x = *dy;
            x.dims[x.rank - 1] = dg[i].in;
            tc_begin(&c, wgt ? IR_OP_DENSE_GRAD_WEIGHT : IR_OP_DENSE_GRAD_INPUT);
            tc_in(&c, *dy, -1, 1);
            tc_in(&c, wgt ? x : F32(out, dg[i].in), -1, 1);
            tc_node(&c, 1);
            tc_run(&c);
        }

    tc_begin(&c, IR_OP_BATCHNORM_GRAD);
    tc_in(&c, img, -1, 1);
    tc_in(&c, img, -2, 2);
    tc_in(&c, ch, -2, 2);
    tc_in(&c, ch, -0.5, 0.5);
    tc_in(&c, ch, 0.25, 2);
    n = tc_node(&c, 3);
    ir_set_float(c.p.g, n, "eps", 1e-5);
    ir_set_float(c.p.g, n, "momentum", 0.1);
    tc_run(&c);
    tc_begin(&c, IR_OP_LAYERNORM_GRAD);
    tc_in(&c, F32(64, 768), -1, 1);
    tc_in(&c, F32(64, 768), -1, 1);
    tc_in(&c, F32(768), -2, 2);
    n = tc_node(&c, 3);
    ir_set_float(c.p.g, n, "eps", 1e-5);
    tc_run(&c);
    for (int causal = 0; causal < 2; causal++) /* dy, q, k, v, out, lse; then */
        for (int hkv = 4; hkv >= 1; hkv -= 3) { /* grouped-query: dk, dv sum 4 heads */
            tc_begin(&c, IR_OP_ATTENTION_GRAD);
            tc_in(&c, F32(2, 4, 200, 48), -1, 1);
            tc_in(&c, F32(2, 4, 200, 32), -1, 1);
            tc_in(&c, F32(2, hkv, 180, 32), -1, 1);
            tc_in(&c, F32(2, hkv, 180, 48), -1, 1);
            tc_in(&c, F32(2, 4, 200, 48), -1, 1);
            tc_in(&c, F32(2, 4, 200), 2, 4);
            n = tc_node(&c, 3);
            ir_set_int(c.p.g, n, "causal", causal);
            ir_set_float(c.p.g, n, "scale", 0.25);
            tc_run(&c);
        }
    for (int lg = 0; lg < 2; lg++) {
        tc_begin(&c, lg ? IR_OP_LOG_SOFTMAX_GRAD : IR_OP_SOFTMAX_GRAD);
        tc_in(&c, F32(64, 1000), -1, 1);
        tc_in(&c, F32(64, 1000), lg ? -8 : 0, lg ? 0 : 0.01);
        n = tc_node(&c, 1);
        ir_set_int(c.p.g, n, "axis", 1);
        tc_run(&c);
    }
    pool_case(IR_OP_MAXPOOL2D_GRAD, F32(8, 64, 16, 16), 3, 2, 1, 0, 0);
    pool_case(IR_OP_AVGPOOL2D_GRAD, F32(8, 64, 16, 16), 2, 2, 0, 1, 0);
    pool_case(IR_OP_AVGPOOL2D_GRAD, F32(8, 64, 16, 16), 3, 2, 1, 0, 0);
    pool_case(IR_OP_MAXPOOL2D_GRAD, F32(8, 64, 16, 16), 3, 2, 1, 0, 1);
    pool_case(IR_OP_AVGPOOL2D_GRAD, F32(8, 64, 17, 17), 2, 2, 0, 1, 1);
    pool_case(IR_OP_AVGPOOL2D_GRAD, F32(8, 64, 16, 16), 3, 2, 1, 1, 1);
    tc_begin(&c, IR_OP_ADAPTIVE_AVGPOOL2D_GRAD);
    tc_in(&c, F32(8, 64, 5, 7), -1, 1);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "shape", 4, (int64_t[]){8, 64, 17, 15});
    tc_run(&c);
    for (int bil = 0; bil < 2; bil++) {
        tc_begin(&c, IR_OP_UPSAMPLE2D_GRAD);
        tc_in(&c, F32(8, 64, 16, 19), -1, 1);
        n = tc_node(&c, 1);
        ir_set_ints(c.p.g, n, "shape", 4, (int64_t[]){8, 64, 11, 13});
        ir_set_int(c.p.g, n, "mode", bil);
        ir_set_int(c.p.g, n, "align_corners", bil);
        ir_set_float(c.p.g, n, "scale_h", 0);
        ir_set_float(c.p.g, n, "scale_w", 0);
        tc_run(&c);
    }
    tc_begin(&c, IR_OP_EMBEDDING_GRAD);
    tc_in(&c, F32(64, 40, 64), -1, 1);
    tc_in(&c, I64(64, 40), 0, 1000);
    n = tc_node(&c, 1);
    ir_set_ints(c.p.g, n, "shape", 2, (int64_t[]){1000, 64});
    ir_set_int(c.p.g, n, "padding_idx", 7);
    tc_run(&c);
    tc_begin(&c, IR_OP_CROSS_ENTROPY_GRAD);
    tc_in(&c, SCALAR, 0.5, 1.5);
    tc_in(&c, F32(64, 1000), -5, 5);
    tc_in(&c, I32(64), 0, 1000);
    ce_node(&c, 0, -100);
    tc_run(&c);
    tc_begin(&c, IR_OP_CROSS_ENTROPY_GRAD);
    tc_in(&c, SCALAR, 0.5, 1.5);
    tc_in(&c, F32(8, 21, 16, 16), -5, 5);
    tc_in(&c, I64(8, 16, 16), 0, 21);
    ce_node(&c, 0.1, 4);
    tc_run(&c);
    tc_begin(&c, IR_OP_NLL_LOSS_GRAD);
    tc_in(&c, SCALAR, 0.5, 1.5);
    tc_in(&c, F32(8, 21, 16, 16), -5, 5);
    tc_in(&c, I64(8, 16, 16), 0, 21);
    ce_node(&c, 0, 4);
    tc_run(&c);

    /* optimizers */
    ir_type pt = F32(300, 200);
    for (int mom = 0; mom < 2; mom++) {
        tc_begin(&c, IR_OP_SGD);
        tc_in(&c, pt, -1, 1);
        tc_in(&c, pt, -1, 1);
        tc_in(&c, SCALAR, 0.1, 0.1);
        if (mom)
            tc_in(&c, pt, -1, 1);
        n = tc_node(&c, mom ? 2 : 1);
        ir_set_float(c.p.g, n, "momentum", mom ? 0.9 : 0);
        ir_set_int(c.p.g, n, "nesterov", mom);
        ir_set_float(c.p.g, n, "weight_decay", 1e-4);
        tc_run(&c);
    }
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        tc_begin(&c, IR_OP_ADAM);
        tc_in(&c, pt, -1, 1);
        tc_in(&c, pt, -1, 1);
        tc_in(&c, pt, -0.1, 0.1);
        tc_in(&c, pt, 0, 0.01);
        tc_in(&c, SCALAR, 1e-3, 1e-3);
        tc_in(&c, SCALAR_I64, 4, 5);
        n = tc_node(&c, 3);
        ir_set_float(c.p.g, n, "beta1", 0.9);
        ir_set_float(c.p.g, n, "beta2", 0.999);
        ir_set_float(c.p.g, n, "eps", 1e-8);
        ir_set_float(c.p.g, n, "weight_decay", decoupled ? 0.01 : 1e-4);
        ir_set_int(c.p.g, n, "decoupled", decoupled);
        tc_run(&c);
    }
    tc_begin(&c, IR_OP_BN_FOLD_SCALE);
    tc_in(&c, F32(40000), -2, 2);
    tc_in(&c, F32(40000), 0.25, 2);
    n = tc_node(&c, 1);
    ir_set_float(c.p.g, n, "eps", 1e-5);
    tc_run(&c);
}

/* The communication ops: two devices in one program (IR text, docs/ir.md). */
static void test_comm(void)
{
    static const char text[] =
        "graph comm {\n"
        "  input %x0: f32[64, 600]\n"
        "  input %x1: f32[64, 600]\n"
        "  %a0: f32[64, 600] = all_reduce(%x0) {id = 1, group = [0, 1]}\n"
        "  %a1: f32[64, 600] = all_reduce(%x1) {id = 1, group = [0, 1]} on 1\n"
        "  %g0: f32[128, 600] = all_gather(%x0) {id = 2, group = [0, 1], axis = 0}\n"
        "  %g1: f32[128, 600] = all_gather(%x1) {id = 2, group = [0, 1], axis = 0} on 1\n"
        "  %r0: f32[64, 300] = reduce_scatter(%x0) {id = 3, group = [0, 1], axis = 1}\n"
        "  %r1: f32[64, 300] = reduce_scatter(%x1) {id = 3, group = [0, 1], axis = 1} on 1\n"
        "  %b0: f32[64, 600] = broadcast(%x0) {id = 4, group = [0, 1], root = 1}\n"
        "  %b1: f32[64, 600] = broadcast(%x1) {id = 4, group = [0, 1], root = 1} on 1\n"
        "  %k: i32[] = send(%x1) {id = 5, peer = 0} on 1\n"
        "  %v: f32[64, 600] = recv() {id = 5, peer = 1, shape = [64, 600]}\n"
        "  output a0 = %a0\n"
        "  output g1 = %g1\n"
        "  output r0 = %r0\n"
        "  output b0 = %b0\n"
        "  output v = %v\n"
        "}\n";
    program p = {0};
    snprintf(p.desc, sizeof p.desc, "communication between two devices");
    diag d;
    diag_init(&d);
    p.g = ir_parse("comm.gir", text, sizeof text - 1, &d);
    if (!p.g || ir_verify(p.g, &d) != 0) {
        fail_prog(&p, "build", "the program does not parse or verify:");
        diag_print(&d, stdout);
    } else {
        run_program(&p);
    }
    diag_free(&d);
    if (p.g)
        ir_graph_free(p.g);
}

/* ---- whole training steps ---- */

static void test_model(const char *root, const char *file, int optimized)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s", root, file);
    const char *names[] = {"batch"}, *values[] = {"8"};
    fe_options fo = {NULL, 1, names, values};
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    opt.weight_decay = 5e-4;
    pm_options pm = {.verify_each = 1, .out = stdout};
    program p = {0};
    snprintf(p.desc, sizeof p.desc, "a training step of %s at batch 8%s", file,
             optimized ? ", optimized" : "");
    diag d;
    diag_init(&d);
    p.g = fe_load_file(path, &fo, &d);
    if (!p.g || ad_training_graph(p.g, &opt, &d) != 0 || ir_verify(p.g, &d) != 0 ||
        (optimized && pm_run(p.g, pm_default_pipeline(1, 0, 0), &pm, &d) != 0)) {
        fail_prog(&p, "build", "the training step does not build:");
        diag_print(&d, stdout);
        goto done;
    }
    p.init_params = 1;
    for (int i = 0; i < p.g->ninputs && i < MAX_IN; i++) {
        const char *nm = p.g->inputs[i]->name;
        double lo = -1, hi = 1;
        if (strcmp(nm, AD_INPUT_LR) == 0)
            lo = hi = 0.05;
        else if (strcmp(nm, AD_INPUT_STEP) == 0)
            lo = 3, hi = 4;
        else if (strcmp(nm, AD_INPUT_SEED) == 0)
            lo = 11, hi = 12;
        else if (p.g->inputs[i]->type.dtype != IR_F32)
            lo = 0, hi = 10;             /* class labels */
        p.lo[i] = lo, p.hi[i] = hi;
    }
    run_program(&p);
done:
    diag_free(&d);
    if (p.g)
        ir_graph_free(p.g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_threads SOURCE_DIR\n");
        return 2;
    }
    test_forward();
    test_training();
    test_comm();
    int missing = 0;
    for (int op = 0; op < IR_NOPS; op++)
        if (!covered[op]) {
            printf("FAIL: no case for op %s\n", ir_ops[op].name);
            missing++;
        }
    for (int optimized = 0; optimized < 2; optimized++) {
        test_model(argv[1], "lenet.net", optimized);
        test_model(argv[1], "resnet18.net", optimized);
    }
    printf("threads: %d programs, each on 1, 2, 3 and 4 threads and on 2 devices two ways; "
           "%d failed%s\n", nprograms, nfailed + missing,
           nfailed + missing ? "" : ": the same bits everywhere");
    return nfailed + missing ? 1 : 0;
}
