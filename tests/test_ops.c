/* Every op of the CPU executor (runtime/cpu/exec.c) against the float64 reference
 * (tests/ref64.c), on seeded random inputs.
 *
 * Each case builds a one-node graph by hand: every operand is a graph input, the
 * node is typed by ir_infer, and the graph must verify.  The inputs are filled
 * with random float32 values (indices and labels with valid ones), the executor
 * runs the graph, ref64 computes the same op in float64 from the very same
 * float32 values, and every output element must satisfy
 *
 *   |got - ref| <= atol + rtol * |ref| + mtol * mag
 *
 * Tolerances, with u = 2^-24 the unit roundoff of float32:
 *   - data movement, neg, relu, dropout, maxpool, clamp, maximum, minimum, the
 *     comparisons, where, reduce_max, reduce_min, argmax: exact (0); the operands
 *     of the comparisons and extremes rounded to halves so that they tie, NaNs
 *     among them.
 *   - add, sub, mul, div: one rounding (two if a division is done as a * (1/b)):
 *     rtol 4u.
 *   - sigmoid, tanh, gelu, gelu_tanh, pow: libm's float functions are good to a few ulp, plus the
 *     roundings around them: rtol 1e-5 (~170u).  atol 1e-6 covers a float gelu's
 *     cancellation in 1 + erf(v / sqrt 2) for v down to -8 (error ~ |v| u).
 *   - sums of K terms (matmul, dense, conv2d, avgpool, global_avgpool): a float32
 *     sum in any order is off by at most ~ lambda sqrt(K) u sum|terms| but for a
 *     vanishing probability (Higham & Mary, "A new approach to probabilistic
 *     rounding error analysis", 2019); lambda = 8.  mag is sum|terms|, which for
 *     these linear ops is the reference applied to |inputs|.  rtol 4u covers the
 *     final rounding (and the division of the means).
 *   - batchnorm: a handful of roundings of terms of size mag = (|x| + |mean|) |w| /
 *     sqrt(var + eps) + |b|: mtol 16u.
 *   - layernorm: the same per-element size with the row's mean and deviation,
 *     plus the sums over D for mean and variance: mtol 16 sqrt(D + 1) u (room for a
 *     one-pass E[x^2] - mean^2 variance on the mildly offset data used here).
 *   - softmax: relative error of the sum of L positive terms (8 sqrt(L) u), plus
 *     exp's argument error u |x - max| <= u (|log ref| + log L): rtol from that;
 *     atol 1e-12 for the values below float32's range that flush to zero.
 *   - log_softmax and cross_entropy: absolute errors of u |x| and u |max| from
 *     subtracting the max, 8 sqrt(L) u from the log of the sum, u |ref| at the
 *     end: tolerance 1e-6 + 8 sqrt(L) u + 4u (|ref| + 2 max|x|); cross_entropy
 *     adds 8 sqrt(N) u |ref| for its mean over the batch of positive terms.
 *   - mse: a mean of K positive terms: rtol 8 (sqrt(K) + 1) u.
 * A slip in indexing or semantics is off by O(1), far outside all of these.
 *
 * Also: an embedding index and a cross_entropy label out of range must make
 * rt_exec_run return -1 with a message, without crashing.
 *
 * Every case runs twice, on all cores and on one thread (rt_set_threads).
 * Prints one line per failing case (op, operand types, attributes, thread count,
 * the worst element), then a summary; exits 1 on any failure.
 *
 *   test_ops [-v]      -v: also list the number of cases per op */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "exec.h"
#include "ir.h"
#include "op_walk.h"
#include "ref64.h"

#define U32 0x1p-24   /* unit roundoff of float32 */
#define MAX_IN 64

static int ncases, nfailed;
static int cases_per_op[IR_NOPS];
static uint64_t case_seed;
static int threads;   /* rt_set_threads of this round: 0 all cores */

/* ---- shapes and attributes ---- */

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

/* ---- random numbers: splitmix64 ---- */

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1p-53; }

/* ---- a case: one node over graph inputs ---- */

typedef struct {
    ir_graph *g;
    ir_op op;
    int nin;
    ir_value *in[MAX_IN];
    double lo[MAX_IN], hi[MAX_IN]; /* floats: uniform in [lo, hi); ints: in [lo, hi) */
    ir_node *node;
    ir_value *out;
    rt_exec *x;
    uint64_t rng;
    double *d[MAX_IN];             /* each input as the reference sees it */
    double *abs_d[MAX_IN];         /* |d|, for the magnitude of sums */
    int64_t *ix[MAX_IN];           /* integer inputs */
    const void *got;               /* the result: float, or int32/int64 data moved */
    char desc[512];
} tcase;

static void tc_begin(tcase *c, ir_op op)
{
    memset(c, 0, sizeof *c);
    c->g = ir_graph_new("t");
    c->op = op;
    c->rng = case_seed++;
    ncases++;
    cases_per_op[op]++;
}

static ir_value *tc_in(tcase *c, ir_type t, double lo, double hi)
{
    char name[16];
    snprintf(name, sizeof name, "in%d", c->nin);
    c->lo[c->nin] = lo;
    c->hi[c->nin] = hi;
    return c->in[c->nin++] = ir_add_input(c->g, name, t, (ir_loc){0});
}

/* The node over every input so far; set its attributes, then tc_prepare. */
static ir_node *tc_node(tcase *c)
{
    int nout = ir_ops[c->op].nout > 1 ? ir_ops[c->op].nout : 1; /* attention: out, lse */
    c->node = ir_node_new(c->g, c->op, c->nin, c->in, nout, "y", (ir_loc){0});
    c->out = c->node->out[0];
    return c->node;
}

static void describe(tcase *c)
{
    char tb[128];
    size_t n = 0, cap = sizeof c->desc;
    n += (size_t)snprintf(c->desc + n, cap - n, "%s(", ir_ops[c->op].name);
    for (int i = 0; i < c->nin && n < cap; i++) {
        if (i == 4) {
            n += (size_t)snprintf(c->desc + n, cap - n, ", ... %d operands", c->nin);
            break;
        }
        n += (size_t)snprintf(c->desc + n, cap - n, "%s%s", i ? ", " : "",
                              ir_type_str(&c->in[i]->type, tb, sizeof tb));
    }
    if (n < cap)
        n += (size_t)snprintf(c->desc + n, cap - n, ")");
    const ir_node *nd = c->node;
    for (int i = 0; i < nd->nattrs && n < cap; i++) {
        const ir_attr *a = &nd->attrs[i];
        n += (size_t)snprintf(c->desc + n, cap - n, " %s=", a->key);
        if (a->kind == IR_ATTR_INT)
            n += (size_t)snprintf(c->desc + n, cap - n, "%lld", (long long)a->i);
        else if (a->kind == IR_ATTR_FLOAT)
            n += (size_t)snprintf(c->desc + n, cap - n, "%g", a->f);
        else
            for (int k = 0; k < a->n && n < cap; k++)
                n += (size_t)snprintf(c->desc + n, cap - n, "%s%lld%s", k ? "," : "[",
                                      (long long)a->ints[k], k == a->n - 1 ? "]" : "");
    }
}

static void fail_case(tcase *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s [threads %s]: ", c->desc, threads ? "1" : "all");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    nfailed++;
}

/* Types, appends and verifies the node, makes the executor and fills the inputs.
 * Returns 0 (having reported the case failed) when any step goes wrong. */
static int tc_prepare(tcase *c)
{
    char err[256];
    ir_type t[IR_MAX_RESULTS];
    describe(c);
    ir_set_attr_defaults(c->g, c->node);
    if (!ir_infer(c->node, t, err, sizeof err)) {
        fail_case(c, "ir_infer: %s", err);
        return 0;
    }
    for (int k = 0; k < c->node->nout; k++) {
        char tb[128], name[16];
        size_t len = strlen(c->desc);
        c->node->out[k]->type = t[k];
        snprintf(c->desc + len, sizeof c->desc - len, "%s%s", k ? ", " : " -> ",
                 ir_type_str(&t[k], tb, sizeof tb));
        snprintf(name, sizeof name, k ? "y%d" : "y", k);
        ir_add_output(c->g, name, c->node->out[k], (ir_loc){0});
    }
    ir_append(c->g, c->node);
    diag d;
    diag_init(&d);
    if (ir_verify(c->g, &d) != 0) {
        fail_case(c, "the graph does not verify:");
        diag_print(&d, stdout);
        diag_free(&d);
        return 0;
    }
    diag_free(&d);
    c->x = rt_exec_new(c->g, err, sizeof err);
    if (!c->x) {
        fail_case(c, "rt_exec_new: %s", err);
        return 0;
    }
    for (int i = 0; i < c->nin; i++) {
        const ir_value *v = c->in[i];
        int64_t n = ir_type_numel(&v->type);
        void *buf = rt_exec_data(c->x, v);
        c->d[i] = calloc((size_t)n, sizeof(double));
        c->abs_d[i] = calloc((size_t)n, sizeof(double));
        int integer = !ir_is_float(v->type.dtype);
        if (integer)
            c->ix[i] = calloc((size_t)n, sizeof(int64_t));
        for (int64_t j = 0; j < n; j++) {
            double r = next_unit(&c->rng);
            if (integer) {
                int64_t k = (int64_t)c->lo[i] + (int64_t)(r * (c->hi[i] - c->lo[i]));
                c->ix[i][j] = k;
                if (v->type.dtype == IR_I32)
                    ((int32_t *)buf)[j] = (int32_t)k;
                else if (v->type.dtype == IR_U8)
                    ((uint8_t *)buf)[j] = (uint8_t)k;
                else
                    ((int64_t *)buf)[j] = k;
                c->d[i][j] = (double)k;
            } else {
                float f = (float)(c->lo[i] + r * (c->hi[i] - c->lo[i]));
                ((float *)buf)[j] = f;
                c->d[i][j] = f;
            }
            c->abs_d[i][j] = fabs(c->d[i][j]);
        }
    }
    return 1;
}

/* Puts k at element j of integer input i (for the out-of-range cases). */
static void tc_set_index(tcase *c, int i, int64_t j, int64_t k)
{
    void *buf = rt_exec_data(c->x, c->in[i]);
    if (c->in[i]->type.dtype == IR_I32)
        ((int32_t *)buf)[j] = (int32_t)k;
    else
        ((int64_t *)buf)[j] = k;
    c->ix[i][j] = k;
    c->d[i][j] = (double)k;
}

/* Runs the executor; 0 (the case failed) when it reports an error. */
static int tc_run(tcase *c)
{
    char err[256] = "";
    if (rt_exec_run(c->x, err, sizeof err) != 0) {
        fail_case(c, "rt_exec_run: %s", err);
        return 0;
    }
    c->got = rt_exec_data(c->x, c->out);
    return 1;
}

/* Result k of the node as the one tc_check checks. */
static void tc_result(tcase *c, int k)
{
    c->out = c->node->out[k];
    c->got = rt_exec_data(c->x, c->out);
}

static void tc_end(tcase *c)
{
    for (int i = 0; i < c->nin; i++) {
        free(c->d[i]);
        free(c->abs_d[i]);
        free(c->ix[i]);
    }
    if (c->x)
        rt_exec_free(c->x);
    ir_graph_free(c->g);
}

static double got_at(const tcase *c, int64_t i)
{
    switch (c->out->type.dtype) {
    case IR_I32: return ((const int32_t *)c->got)[i];
    case IR_I64: return (double)((const int64_t *)c->got)[i];
    case IR_U8:  return ((const uint8_t *)c->got)[i];
    default:     return ((const float *)c->got)[i];
    }
}

/* Compares the output with ref (of type rt, which must be the node's type):
 * element i must be within atol + rtol |ref[i]| + mtol mag[i] (mag may be NULL).
 * Takes ownership of ref and mag. */
static void tc_check(tcase *c, double *ref, const ir_type *rt, double *mag, double rtol,
                     double atol, double mtol)
{
    char tb[128], tb2[128];
    if (!ir_type_eq(rt, &c->out->type)) {
        fail_case(c, "result type %s, the reference's is %s",
                  ir_type_str(&c->out->type, tb, sizeof tb), ir_type_str(rt, tb2, sizeof tb2));
        free(ref);
        free(mag);
        return;
    }
    int64_t n = ir_type_numel(rt), nbad = 0, worst = -1;
    double worst_ratio = 0, worst_tol = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got_at(c, i), r = ref[i];
        double tol = atol + rtol * fabs(r) + (mag ? mtol * mag[i] : 0);
        double ratio;
        if (g == r || (isnan(g) && isnan(r)))
            continue;   /* infinities and NaNs included */
        if (isnan(g) || isnan(r) || isinf(g) || isinf(r))
            ratio = INFINITY;
        else if (fabs(g - r) <= tol)
            continue;
        else
            ratio = tol > 0 ? fabs(g - r) / tol : INFINITY;
        nbad++;
        if (worst < 0 || ratio > worst_ratio) {
            worst = i;
            worst_ratio = ratio;
            worst_tol = tol;
        }
    }
    if (nbad) {
        int64_t co[IR_MAX_RANK];
        char at[160];
        size_t m = 0;
        int64_t j = worst;
        for (int k = rt->rank - 1; k >= 0; k--) {
            co[k] = j % rt->dims[k];
            j /= rt->dims[k];
        }
        m += (size_t)snprintf(at + m, sizeof at - m, "[");
        for (int k = 0; k < rt->rank; k++)
            m += (size_t)snprintf(at + m, sizeof at - m, "%s%lld", k ? "," : "",
                                  (long long)co[k]);
        snprintf(at + m, sizeof at - m, "]");
        int prec = rt->dtype == IR_I32 || rt->dtype == IR_I64 ? 17 : 9;
        fail_case(c, "%lld of %lld elements of %s off; worst at %s: got %.*g, ref %.*g, "
                  "|diff| %.3g > tol %.3g", (long long)nbad, (long long)n,
                  ir_type_str(rt, tb, sizeof tb), at, prec, got_at(c, worst), prec, ref[worst],
                  fabs(got_at(c, worst) - ref[worst]), worst_tol);
    }
    free(ref);
    free(mag);
}

/* A one-element array holding v (for the scalar losses). */
static double *scalar(double v)
{
    double *p = malloc(sizeof *p);
    *p = v;
    return p;
}

static double red_tol(int64_t k) { return 8 * sqrt((double)k) * U32; }

/* ---- the cases ---- */

static void test_const(void)
{
    static const struct { int rank; int64_t dims[3]; double value; } cs[] = {
        {2, {3, 5}, 0.1}, {0, {0}, -2.5}, {3, {1, 7, 1}, 1e6 + 0.3}, {1, {40000}, 3.0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_CONST);
        ir_node *n = tc_node(&c);
        c.out->type = ty(IR_F32, cs[i].rank, cs[i].dims);
        ir_set_float(c.g, n, "value", cs[i].value);
        if (tc_prepare(&c) && tc_run(&c)) {
            /* the value is rounded to float32 once */
            tc_check(&c, ref_const(&c.out->type, cs[i].value), &c.out->type, NULL, U32, 0, 0);
        }
        tc_end(&c);
    }
}

static void test_unary(void)
{
    ir_op ops[IR_NOPS]; /* every unary op */
    int nops = 0;
    for (int op = 0; op < IR_NOPS; op++)
        if (ir_op_is((ir_op)op, IR_UNARY))
            ops[nops++] = (ir_op)op;
    ir_type shapes[] = {SCALAR, F32(7, 13), F32(3, 1, 5, 7), F32(257, 131)};
    /* per shape: pow's exponent (a square, a cube, a root: NaN below 0, as PyTorch's, a
       negative power), clamp's bounds (one, the other, both, crossed: max wins) */
    static const double expo[] = {2, 3, 0.5, -1.5};
    static const double lo[] = {-2, -INFINITY, -3, 1}, hi[] = {INFINITY, 2.5, 4, -1};
    for (int o = 0; o < nops; o++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tcase c;
            tc_begin(&c, ops[o]);
            tc_in(&c, shapes[s], -8, 8);
            ir_node *n = tc_node(&c);
            double p = ops[o] == IR_OP_LEAKY_RELU ? 0.2 : 0.7, q = 0; /* slope, alpha */
            if (ops[o] == IR_OP_DROPOUT)
                ir_set_float(c.g, n, "p", s % 2 ? 0.5 : 0.0);
            if (ops[o] == IR_OP_LEAKY_RELU || ops[o] == IR_OP_ELU)
                ir_set_float(c.g, n, ops[o] == IR_OP_ELU ? "alpha" : "slope", p);
            if (ops[o] == IR_OP_POW)
                ir_set_float(c.g, n, "p", p = expo[s]);
            if (ops[o] == IR_OP_CLAMP) {
                ir_set_float(c.g, n, "min", p = lo[s]);
                ir_set_float(c.g, n, "max", q = hi[s]);
            }
            int ready = tc_prepare(&c);
            /* every 7th element NaN: it stays NaN in every op, as in PyTorch; clamp's
               bounds themselves among the others */
            float *x = ready ? rt_exec_data(c.x, c.in[0]) : NULL;
            for (int64_t i = 0; x && i < ir_type_numel(&shapes[s]); i += 7)
                x[i] = NAN, c.d[0][i] = NAN;
            for (int64_t i = 3; x && ops[o] == IR_OP_CLAMP && i < ir_type_numel(&shapes[s]); i += 7)
                x[i] = (float)(i % 2 && isfinite(q) ? q : isfinite(p) ? p : q), c.d[0][i] = x[i];
            if (ready && tc_run(&c)) {
                int exact = ops[o] == IR_OP_NEG || ops[o] == IR_OP_RELU ||
                            ops[o] == IR_OP_ABS || ops[o] == IR_OP_DROPOUT ||
                            ops[o] == IR_OP_CLAMP;
                tc_check(&c, ref_unary(ops[o], c.d[0], &shapes[s], p, q), &shapes[s], NULL,
                         exact ? 0 : 1e-5, exact ? 0 : 1e-6, 0);
            }
            tc_end(&c);
        }
}

/* relu's gradient as PyTorch's threshold_backward: dy where y > 0 or y is NaN,
 * else 0 (a training op: its reference is this loop, not ref64's) */
static void test_relu_grad(void)
{
    ir_type t = F32(5, 29);
    tcase c;
    tc_begin(&c, IR_OP_RELU_GRAD);
    tc_in(&c, t, -4, 4);
    tc_in(&c, t, -4, 4);
    tc_node(&c);
    if (tc_prepare(&c)) {
        float *y = rt_exec_data(c.x, c.in[1]);
        for (int64_t i = 0; i < ir_type_numel(&t); i += 6)
            y[i] = NAN, c.d[1][i] = NAN;
        if (tc_run(&c)) {
            double *ref = calloc((size_t)ir_type_numel(&t), sizeof *ref);
            for (int64_t i = 0; i < ir_type_numel(&t); i++)
                ref[i] = c.d[1][i] <= 0 ? 0 : c.d[0][i];
            tc_check(&c, ref, &t, NULL, 0, 0, 0);
        }
    }
    tc_end(&c);
}

/* Operand i of a prepared case rounded to multiples of 0.5, so that operands tie,
 * with every 5th element NaN (maximum, minimum and the comparisons at their edges). */
static void tie_and_nan(tcase *c, int i)
{
    float *v = rt_exec_data(c->x, c->in[i]);
    for (int64_t j = 0; j < ir_type_numel(&c->in[i]->type); j++) {
        v[j] = j % 5 == 4 - i ? NAN : roundf(v[j] * 2) / 2;
        c->d[i][j] = v[j];
    }
}

static void test_binary(void)
{
    static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_MAXIMUM,
                                IR_OP_MINIMUM, IR_OP_GT, IR_OP_LT, IR_OP_GE, IR_OP_LE,
                                IR_OP_EQ, IR_OP_NE};
    struct { ir_type a, b; } pairs[] = {
        {F32(5, 7), F32(5, 7)},
        {F32(5, 7), F32(7)},                  /* b broadcasts */
        {F32(7), F32(5, 7)},                  /* a broadcasts */
        {F32(4, 1, 6), F32(1, 5, 1)},         /* both ways */
        {F32(2, 3, 1, 5), SCALAR},
        {SCALAR, F32(3, 4)},
        {F32(1), F32(1)},
        {F32(3, 1, 4, 1, 5), F32(2, 4, 6, 1)},
        {F32(200, 171), F32(200, 1)},         /* large enough to go parallel */
        {F32(3, 1, 11), F32(3, 50, 11)},
    };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            tcase c;
            tc_begin(&c, ops[o]);
            tc_in(&c, pairs[p].a, -2, 2);
            /* divisors kept away from 0 */
            if (ops[o] == IR_OP_DIV)
                tc_in(&c, pairs[p].b, 0.25, 2);
            else
                tc_in(&c, pairs[p].b, -2, 2);
            tc_node(&c);
            int ready = tc_prepare(&c), arith = ops[o] <= IR_OP_DIV; /* ops.def order */
            if (ready && !arith) {
                tie_and_nan(&c, 0);
                tie_and_nan(&c, 1);
            }
            if (ready && tc_run(&c)) {
                ir_type rt;
                double *ref = ref_binary(ops[o], c.d[0], &pairs[p].a, c.d[1], &pairs[p].b, &rt);
                tc_check(&c, ref, &rt, NULL, arith ? 4 * U32 : 0, 0, 0);
            }
            tc_end(&c);
        }
}

/* reduce_max, reduce_min, argmax along each axis; values rounded to halves, so
 * that lines hold ties (the first counts), and some NaNs (which win) */
static void test_extreme(void)
{
    static const ir_op ops[] = {IR_OP_REDUCE_MAX, IR_OP_REDUCE_MIN, IR_OP_ARGMAX};
    ir_type shapes[] = {F32(7), F32(5, 9), F32(3, 4, 6), F32(300, 257)};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int axis = 0; axis < shapes[s].rank; axis++) {
                tcase c;
                tc_begin(&c, ops[o]);
                tc_in(&c, shapes[s], -3, 3);
                ir_node *n = tc_node(&c);
                ir_set_int(c.g, n, "axis", axis);
                if (ops[o] != IR_OP_ARGMAX)
                    ir_set_int(c.g, n, "ties", 0);
                if (!tc_prepare(&c)) {
                    tc_end(&c);
                    continue;
                }
                float *v = rt_exec_data(c.x, c.in[0]);
                for (int64_t j = 0; j < ir_type_numel(&shapes[s]); j++) {
                    v[j] = j % 37 == 5 ? NAN : roundf(v[j] * 2) / 2;
                    c.d[0][j] = v[j];
                }
                if (tc_run(&c)) {
                    ir_type rt;
                    double *ref = ref_extreme(ops[o], c.d[0], &shapes[s], axis, &rt);
                    tc_check(&c, ref, &rt, NULL, 0, 0, 0);
                }
                tc_end(&c);
            }
}

/* where: the three operands broadcast every way; the condition a mask with
 * zeros, ones, other values and NaNs (true, as PyTorch's bool of NaN) */
static void test_where(void)
{
    struct { ir_type c, a, b; } ts[] = {
        {F32(5, 7), F32(5, 7), F32(5, 7)},
        {F32(5, 1), F32(7), F32(5, 7)},
        {F32(4, 1, 6), F32(1, 5, 1), SCALAR},
        {SCALAR, F32(3, 4), F32(3, 1)},
        {F32(2, 1, 1, 5), F32(3, 1, 1), F32(1, 4, 1)},
        {F32(200, 171), F32(200, 171), F32(171)},     /* large enough to go parallel */
    };
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        tcase c;
        tc_begin(&c, IR_OP_WHERE);
        tc_in(&c, ts[k].c, -1, 2);
        tc_in(&c, ts[k].a, -2, 2);
        tc_in(&c, ts[k].b, -2, 2);
        tc_node(&c);
        if (tc_prepare(&c)) {
            float *m = rt_exec_data(c.x, c.in[0]);
            for (int64_t j = 0; j < ir_type_numel(&ts[k].c); j++) {
                m[j] = j % 4 == 3 ? NAN : j % 4 == 2 ? 0.25f : (float)(j % 4);
                c.d[0][j] = m[j];
            }
            if (tc_run(&c)) {
                ir_type rt;
                tc_check(&c, ref_where(c.d[0], &ts[k].c, c.d[1], &ts[k].a, c.d[2], &ts[k].b, &rt),
                         &rt, NULL, 0, 0, 0);
            }
        }
        tc_end(&c);
    }
}

static void test_matmul(void)
{
    struct { ir_type a, b; } cs[] = {
        {F32(3, 5), F32(5, 4)},
        {F32(1, 1), F32(1, 1)},
        {F32(7, 13), F32(13, 9)},
        {F32(2, 3, 4, 5), F32(5, 6)},          /* b broadcast over a's batch */
        {F32(4, 5), F32(3, 5, 2)},             /* a broadcast over b's batch */
        {F32(2, 1, 3, 4), F32(5, 4, 6)},       /* batch [2, 1] with [5] */
        {F32(3, 1, 2, 7), F32(1, 4, 7, 3)},    /* batch [3, 1] with [1, 4] */
        {F32(6, 1, 8), F32(6, 8, 1)},
        {F32(64, 300), F32(300, 33)},
        {F32(2, 17, 65), F32(2, 65, 31)},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_MATMUL);
        tc_in(&c, cs[i].a, -1, 1);
        tc_in(&c, cs[i].b, -1, 1);
        tc_node(&c);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_matmul(c.d[0], &cs[i].a, c.d[1], &cs[i].b, &rt);
            double *mag = ref_matmul(c.abs_d[0], &cs[i].a, c.abs_d[1], &cs[i].b, &mt);
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(cs[i].a.dims[cs[i].a.rank - 1]));
        }
        tc_end(&c);
    }
}

static void test_dense(void)
{
    struct { ir_type x; int64_t out; int bias; } cs[] = {
        {F32(5), 3, 1},
        {F32(4, 7), 9, 0},
        {F32(2, 3, 10), 6, 1},
        {F32(1, 1), 1, 1},
        {F32(33, 300), 65, 1},
        {F32(2, 1, 3, 4), 1, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int64_t in = cs[i].x.dims[cs[i].x.rank - 1];
        ir_type tw = F32(cs[i].out, in), tb = F32(cs[i].out);
        tcase c;
        tc_begin(&c, IR_OP_DENSE);
        tc_in(&c, cs[i].x, -1, 1);
        tc_in(&c, tw, -1, 1);
        if (cs[i].bias)
            tc_in(&c, tb, -1, 1);
        tc_node(&c);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_dense(c.d[0], &cs[i].x, c.d[1], &tw, cs[i].bias ? c.d[2] : NULL,
                                    &rt);
            double *mag = ref_dense(c.abs_d[0], &cs[i].x, c.abs_d[1], &tw,
                                    cs[i].bias ? c.abs_d[2] : NULL, &mt);
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(in + 1));
        }
        tc_end(&c);
    }
}

static void test_conv2d(void)
{
    struct {
        ir_type x, w;
        int64_t stride[2], pad[2], dil[2], groups;
        int bias;
    } cs[] = {
        {F32(1, 1, 5, 5), F32(1, 1, 3, 3), {1, 1}, {0, 0}, {1, 1}, 1, 1},
        {F32(2, 3, 7, 9), F32(4, 3, 3, 3), {1, 1}, {1, 1}, {1, 1}, 1, 1},
        {F32(2, 3, 8, 7), F32(5, 3, 3, 2), {2, 2}, {1, 0}, {1, 1}, 1, 0},
        {F32(1, 4, 9, 9), F32(6, 2, 3, 3), {1, 1}, {2, 2}, {2, 2}, 2, 1},
        {F32(2, 6, 10, 11), F32(6, 1, 3, 3), {2, 1}, {1, 1}, {1, 1}, 6, 1},   /* depthwise */
        {F32(3, 8, 5, 5), F32(16, 8, 1, 1), {1, 1}, {0, 0}, {1, 1}, 1, 0},    /* pointwise */
        {F32(4, 16, 14, 14), F32(32, 16, 3, 3), {1, 1}, {1, 1}, {1, 1}, 1, 1}, /* GEMM-sized */
        {F32(2, 5, 13, 13), F32(7, 5, 5, 5), {3, 3}, {2, 2}, {1, 1}, 1, 1},
        {F32(1, 3, 6, 6), F32(2, 3, 6, 6), {1, 1}, {0, 0}, {1, 1}, 1, 1},     /* 1x1 out */
        {F32(2, 4, 12, 10), F32(8, 2, 3, 3), {2, 2}, {0, 3}, {1, 3}, 2, 0},
        {F32(1, 2, 3, 3), F32(2, 2, 3, 3), {1, 1}, {4, 4}, {1, 1}, 1, 1},     /* pad > kernel */
        {F32(2, 8, 9, 7), F32(12, 2, 2, 3), {1, 2}, {1, 1}, {2, 1}, 4, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ir_type tb = F32(cs[i].w.dims[0]);
        tcase c;
        tc_begin(&c, IR_OP_CONV2D);
        tc_in(&c, cs[i].x, -1, 1);
        tc_in(&c, cs[i].w, -1, 1);
        if (cs[i].bias)
            tc_in(&c, tb, -1, 1);
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "stride", 2, cs[i].stride);
        ir_set_ints(c.g, n, "pad", 2, cs[i].pad);
        ir_set_ints(c.g, n, "dilation", 2, cs[i].dil);
        ir_set_int(c.g, n, "groups", cs[i].groups);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_conv2d(c.d[0], &cs[i].x, c.d[1], &cs[i].w,
                                     cs[i].bias ? c.d[2] : NULL, cs[i].stride, cs[i].pad,
                                     cs[i].dil, cs[i].groups, &rt);
            double *mag = ref_conv2d(c.abs_d[0], &cs[i].x, c.abs_d[1], &cs[i].w,
                                     cs[i].bias ? c.abs_d[2] : NULL, cs[i].stride, cs[i].pad,
                                     cs[i].dil, cs[i].groups, &mt);
            int64_t k = cs[i].w.dims[1] * cs[i].w.dims[2] * cs[i].w.dims[3] + 1;
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(k));
        }
        tc_end(&c);
    }
}

/* conv2d_grad_input as conv_transpose2d's forward: x[n, o, h, w] and w[o, c/groups,
 * kh, kw] spread onto [shape], including the extra row or column of an
 * output_padding (shape one more than the window reaches) */
static void test_conv_transpose2d(void)
{
    struct {
        ir_type x, w;
        int64_t stride[2], pad[2], dil[2], groups, shape[4];
    } cs[] = {
        {F32(1, 1, 3, 3), F32(1, 1, 3, 3), {1, 1}, {0, 0}, {1, 1}, 1, {1, 1, 5, 5}},
        {F32(2, 4, 5, 4), F32(4, 3, 3, 3), {2, 2}, {1, 1}, {1, 1}, 1, {2, 3, 10, 8}},
        {F32(2, 4, 5, 4), F32(4, 3, 3, 3), {2, 2}, {1, 1}, {2, 1}, 2, {2, 6, 12, 8}},
        {F32(2, 6, 4, 7), F32(6, 1, 2, 3), {3, 1}, {0, 1}, {1, 2}, 6, {2, 6, 12, 9}},
        {F32(3, 8, 6, 6), F32(8, 16, 4, 4), {2, 2}, {1, 1}, {1, 1}, 1, {3, 16, 12, 12}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_CONV2D_GRAD_INPUT);
        tc_in(&c, cs[i].x, -1, 1);
        tc_in(&c, cs[i].w, -1, 1);
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "stride", 2, cs[i].stride);
        ir_set_ints(c.g, n, "pad", 2, cs[i].pad);
        ir_set_ints(c.g, n, "dilation", 2, cs[i].dil);
        ir_set_int(c.g, n, "groups", cs[i].groups);
        ir_set_ints(c.g, n, "shape", 4, cs[i].shape);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt = {IR_F32, 4, {0}};
            memcpy(rt.dims, cs[i].shape, sizeof cs[i].shape);
            double *ref = ref_conv_transpose2d(c.d[0], &cs[i].x, c.d[1], &cs[i].w, cs[i].stride,
                                               cs[i].pad, cs[i].dil, cs[i].groups, cs[i].shape);
            double *mag = ref_conv_transpose2d(c.abs_d[0], &cs[i].x, c.abs_d[1], &cs[i].w,
                                               cs[i].stride, cs[i].pad, cs[i].dil, cs[i].groups,
                                               cs[i].shape);
            int64_t k = cs[i].x.dims[1] / cs[i].groups * cs[i].w.dims[2] * cs[i].w.dims[3];
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(k));
        }
        tc_end(&c);
    }
}

static void test_batchnorm(void)
{
    struct { ir_type x; double eps; } cs[] = {
        {F32(2, 3, 4, 5), 1e-5}, {F32(5, 4), 1e-3}, {F32(1, 1, 1, 1), 1e-5},
        {F32(3, 7, 2, 3, 2), 0.1}, {F32(8, 16, 16, 16), 1e-5},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int64_t C = cs[i].x.dims[1], spatial = ir_type_numel(&cs[i].x) / cs[i].x.dims[0] / C;
        ir_type tc = F32(C);
        tcase c;
        tc_begin(&c, IR_OP_BATCHNORM);
        tc_in(&c, cs[i].x, -2, 2);
        tc_in(&c, tc, -2, 2);        /* weight */
        tc_in(&c, tc, -1, 1);        /* bias */
        tc_in(&c, tc, -0.5, 0.5);    /* running mean */
        tc_in(&c, tc, 0.25, 2);      /* running var */
        ir_node *n = tc_node(&c);
        ir_set_float(c.g, n, "eps", cs[i].eps);
        ir_set_float(c.g, n, "momentum", 0.1);
        if (tc_prepare(&c) && tc_run(&c)) {
            double *ref = ref_batchnorm(c.d[0], &cs[i].x, c.d[1], c.d[2], c.d[3], c.d[4],
                                        cs[i].eps);
            int64_t total = ir_type_numel(&cs[i].x);
            double *mag = malloc((size_t)total * sizeof *mag);
            for (int64_t j = 0; j < total; j++) {
                int64_t ch = j / spatial % C;
                mag[j] = (c.abs_d[0][j] + c.abs_d[3][ch]) * c.abs_d[1][ch] /
                         sqrt(c.d[4][ch] + cs[i].eps) + c.abs_d[2][ch];
            }
            tc_check(&c, ref, &cs[i].x, mag, 0, 0, 16 * U32);
        }
        tc_end(&c);
    }
}

static void test_layernorm(void)
{
    struct { ir_type x, w; double eps, lo, hi; } cs[] = {
        {F32(4, 10), F32(10), 1e-5, -1, 1},
        {F32(2, 3, 4, 5), F32(4, 5), 1e-5, -1, 1},   /* two trailing dims */
        {F32(3, 7), F32(3, 7), 1e-3, -1, 1},         /* every dim */
        {F32(5, 1), F32(1), 1e-5, -1, 1},            /* D = 1: out = bias */
        {F32(64, 768), F32(768), 1e-5, -1, 1},
        {F32(6, 33), F32(33), 1e-6, 0.5, 2.5},       /* offset data */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_LAYERNORM);
        tc_in(&c, cs[i].x, cs[i].lo, cs[i].hi);
        tc_in(&c, cs[i].w, -2, 2);
        tc_in(&c, cs[i].w, -1, 1);
        ir_node *n = tc_node(&c);
        ir_set_float(c.g, n, "eps", cs[i].eps);
        if (tc_prepare(&c) && tc_run(&c)) {
            double *ref = ref_layernorm(c.d[0], &cs[i].x, c.d[1], c.d[2], &cs[i].w, cs[i].eps);
            int64_t D = ir_type_numel(&cs[i].w), rows = ir_type_numel(&cs[i].x) / D;
            double *mag = malloc((size_t)(rows * D) * sizeof *mag);
            for (int64_t r = 0; r < rows; r++) {
                const double *xr = c.d[0] + r * D;
                double mean = 0, var = 0;
                for (int64_t j = 0; j < D; j++)
                    mean += xr[j] / D;
                for (int64_t j = 0; j < D; j++)
                    var += (xr[j] - mean) * (xr[j] - mean) / D;
                for (int64_t j = 0; j < D; j++)
                    mag[r * D + j] = c.abs_d[1][j] * (fabs(xr[j]) + fabs(mean)) /
                                     sqrt(var + cs[i].eps) + c.abs_d[2][j];
            }
            tc_check(&c, ref, &cs[i].x, mag, 0, 1e-7, 16 * sqrt((double)D + 1) * U32);
        }
        tc_end(&c);
    }
}

static double max_abs(const double *d, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(d[i]));
    return m;
}

static void test_softmax(void)
{
    struct { ir_type x; int axis; double lo, hi; } cs[] = {
        {F32(4, 10), 1, -3, 3},
        {F32(4, 10), 0, -3, 3},
        {F32(2, 3, 5), 1, -3, 3},      /* middle axis */
        {F32(2, 3, 4, 5), 3, -3, 3},
        {F32(7), 0, -3, 3},
        {F32(3, 1), 1, -3, 3},         /* one class: softmax 1, log_softmax 0 */
        {F32(16, 1000), 1, -20, 20},
        {F32(5, 9), 1, -1000, 1000},   /* large magnitudes: needs the max subtracted */
        {F32(4, 6), 1, 500, 1000},     /* every exp overflows float32 unshifted */
        {F32(3, 2, 40), 1, -100, 100},
    };
    for (int take_log = 0; take_log < 2; take_log++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            tcase c;
            tc_begin(&c, take_log ? IR_OP_LOG_SOFTMAX : IR_OP_SOFTMAX);
            tc_in(&c, cs[i].x, cs[i].lo, cs[i].hi);
            ir_node *n = tc_node(&c);
            ir_set_int(c.g, n, "axis", cs[i].axis);
            if (!tc_prepare(&c) || !tc_run(&c)) {
                tc_end(&c);
                continue;
            }
            int64_t total = ir_type_numel(&cs[i].x), L = cs[i].x.dims[cs[i].axis];
            double *ref = ref_softmax(c.d[0], &cs[i].x, cs[i].axis, take_log);
            double *tol = malloc((size_t)total * sizeof *tol);
            double xmax = max_abs(c.d[0], total);
            for (int64_t j = 0; j < total; j++) {
                if (take_log)
                    tol[j] = 1e-6 + red_tol(L) + 4 * U32 * (fabs(ref[j]) + 2 * xmax);
                else if (ref[j] > 1e-30)
                    tol[j] = ref[j] * (red_tol(L) + 32 * U32 +
                                       U32 * (fabs(log(ref[j])) + log((double)L)));
                else
                    tol[j] = 0;
            }
            tc_check(&c, ref, &cs[i].x, tol, 0, take_log ? 0 : 1e-12, 1);
            tc_end(&c);
        }
}

/* attention against the float64 reference: out and lse.  A score q . k scale
 * is off by ds <= red_tol(e) scale sum |q_f k_f| (its sum of e products) plus
 * u |s| (the scaling); a probability by about 2 ds relative (its own score's
 * and its row's through the sum), and then the output, a sum of s terms p v,
 * by (2 ds + red_tol(s) + 8u) sum p |v|: that sum is mag, the row's largest ds
 * rtol-like per row, so each element gets its own tolerance.  lse = m + log l
 * is off by ds + red_tol(s) + u |lse|. */
static void test_attention(void)
{
    /* hkv: k's and v's heads (their last batch dimension), 0 as q's; fewer is
       grouped-query attention */
    struct {
        int64_t batch[2]; int nb; int64_t l, s, e, ev; int causal; double scale, lo, hi;
        int64_t hkv;
    } cs[] = {
        {{2, 3}, 2, 16, 16, 8, 8, 1, 0.35, -1, 1, 0},
        {{2, 3}, 2, 16, 16, 8, 8, 0, 0.35, -1, 1, 0},
        {{3}, 1, 70, 70, 16, 16, 1, 0.25, -2, 2, 0},     /* several tiles of rows and keys */
        {{2}, 1, 33, 150, 12, 5, 0, 0.29, -2, 2, 0},     /* more keys than queries, e != ev */
        {{2}, 1, 150, 40, 4, 9, 1, 0.5, -2, 2, 0},       /* fewer keys: the last rows see all */
        {{1}, 1, 1, 1, 3, 2, 1, 1.0, -1, 1, 0},          /* one query, one key: out = v */
        {{2, 2}, 2, 9, 65, 64, 64, 0, 0.125, -3, 3, 0},  /* a ragged block of keys */
        {{1}, 1, 40, 40, 8, 8, 0, 30.0, -3, 3, 0},       /* large scores: needs the running max */
        /* grouped-query attention: 4 query heads over 2 key heads, 6 over 1 (at
           rank 3 too, where the batch is the heads), 6 over 3; causal and not,
           ragged tiles */
        {{2, 4}, 2, 16, 16, 8, 8, 1, 0.35, -1, 1, 2},
        {{2, 4}, 2, 37, 70, 8, 8, 0, 0.35, -2, 2, 2},
        {{1, 6}, 2, 70, 70, 16, 16, 1, 0.25, -2, 2, 1},
        {{6}, 1, 33, 90, 12, 5, 0, 0.29, -2, 2, 1},
        {{2, 6}, 2, 100, 45, 8, 12, 1, 0.5, -2, 2, 3},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int nb = cs[i].nb;
        int64_t dq[4] = {cs[i].batch[0], cs[i].batch[1]}, dk[4], dv[4];
        memcpy(dk, dq, sizeof dq), memcpy(dv, dq, sizeof dq);
        if (cs[i].hkv)
            dk[nb - 1] = dv[nb - 1] = cs[i].hkv;
        dq[nb] = cs[i].l, dq[nb + 1] = cs[i].e;
        dk[nb] = cs[i].s, dk[nb + 1] = cs[i].e;
        dv[nb] = cs[i].s, dv[nb + 1] = cs[i].ev;
        ir_type tq = ty(IR_F32, nb + 2, dq), tk = ty(IR_F32, nb + 2, dk), tv = ty(IR_F32, nb + 2, dv);
        tcase c;
        tc_begin(&c, IR_OP_ATTENTION);
        tc_in(&c, tq, cs[i].lo, cs[i].hi);
        tc_in(&c, tk, cs[i].lo, cs[i].hi);
        tc_in(&c, tv, cs[i].lo, cs[i].hi);
        ir_node *n = tc_node(&c);
        ir_set_int(c.g, n, "causal", cs[i].causal);
        ir_set_float(c.g, n, "scale", cs[i].scale);
        if (!tc_prepare(&c) || !tc_run(&c)) {
            tc_end(&c);
            continue;
        }
        int64_t rows = ir_type_numel(&tq) / cs[i].e, l = cs[i].l, s = cs[i].s;
        int64_t group = cs[i].hkv ? cs[i].batch[nb - 1] / cs[i].hkv : 1;
        double *lse = malloc((size_t)rows * sizeof *lse);
        double *ref = ref_attention(c.d[0], &tq, c.d[1], &tk, c.d[2], &tv, cs[i].causal,
                                    cs[i].scale, lse);
        double *tol = malloc((size_t)(rows * cs[i].ev) * sizeof *tol),
               *ltol = malloc((size_t)rows * sizeof *ltol);
        for (int64_t r = 0; r < rows; r++) {
            int64_t b = r / l / group, row = r % l, seen = cs[i].causal && row + 1 < s ? row + 1 : s;
            double ds = 0, den = 0;
            for (int64_t j = 0; j < seen; j++) {
                double sum = 0, abs_sum = 0;
                for (int64_t f = 0; f < cs[i].e; f++) {
                    sum += c.d[0][r * cs[i].e + f] * c.d[1][(b * s + j) * cs[i].e + f];
                    abs_sum += c.abs_d[0][r * cs[i].e + f] * c.abs_d[1][(b * s + j) * cs[i].e + f];
                }
                ds = fmax(ds, red_tol(cs[i].e) * cs[i].scale * abs_sum + U32 * fabs(sum * cs[i].scale));
                den += exp(sum * cs[i].scale - lse[r]);
            }
            for (int64_t f = 0; f < cs[i].ev; f++) {
                double mag = 0;
                for (int64_t j = 0; j < seen; j++) {
                    double sc = 0;
                    for (int64_t g = 0; g < cs[i].e; g++)
                        sc += c.d[0][r * cs[i].e + g] * c.d[1][(b * s + j) * cs[i].e + g];
                    mag += exp(sc * cs[i].scale - lse[r]) / den * c.abs_d[2][(b * s + j) * cs[i].ev + f];
                }
                tol[r * cs[i].ev + f] = mag * (2 * ds + red_tol(seen) + 8 * U32);
            }
            ltol[r] = ds + red_tol(seen) + 4 * U32 * fabs(lse[r]);
        }
        ir_type to = tq;
        to.dims[nb + 1] = cs[i].ev;
        tc_check(&c, ref, &to, tol, 0, 1e-7, 1);
        ir_type tl = {IR_F32, nb + 1, {0}};
        memcpy(tl.dims, tq.dims, (size_t)(nb + 1) * sizeof *tl.dims);
        tc_result(&c, 1);
        tc_check(&c, lse, &tl, ltol, 0, 1e-7, 1);
        tc_end(&c);
    }
}

static void test_maxpool(void)
{
    struct { ir_type x; int64_t k[2], s[2], p[2], d[2]; double lo, hi; int ceil; } cs[] = {
        {F32(1, 1, 4, 4), {2, 2}, {2, 2}, {0, 0}, {1, 1}, -1, 1, 0},
        {F32(2, 3, 7, 9), {3, 3}, {2, 2}, {1, 1}, {1, 1}, -1, 1, 0},
        {F32(2, 2, 9, 8), {3, 2}, {1, 2}, {1, 0}, {2, 1}, -1, 1, 0},
        {F32(1, 3, 5, 5), {3, 3}, {1, 1}, {1, 1}, {1, 1}, -3, -1, 0},  /* padding is not 0 */
        {F32(2, 4, 10, 10), {2, 2}, {1, 1}, {1, 1}, {3, 3}, -1, 1, 0},
        {F32(1, 2, 2, 2), {2, 2}, {1, 1}, {1, 1}, {3, 3}, -1, 1, 0},   /* window all padding */
        {F32(4, 8, 32, 32), {3, 3}, {2, 2}, {1, 1}, {1, 1}, -1, 1, 0},
        {F32(1, 1, 1, 1), {1, 1}, {1, 1}, {0, 0}, {1, 1}, -1, 1, 0},
        /* ceil_mode: a last window past the input, one dropped for starting in the
           right padding, a window larger than the input */
        {F32(2, 3, 8, 8), {3, 3}, {2, 2}, {1, 1}, {1, 1}, -1, 1, 1},
        {F32(1, 2, 5, 7), {2, 2}, {2, 2}, {0, 0}, {1, 1}, -1, 1, 1},
        {F32(1, 2, 5, 5), {2, 2}, {2, 2}, {1, 1}, {1, 1}, -1, 1, 1},
        {F32(2, 2, 9, 8), {3, 2}, {2, 3}, {1, 1}, {2, 1}, -1, 1, 1},
        {F32(1, 1, 2, 2), {3, 3}, {3, 3}, {0, 0}, {1, 1}, -1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_MAXPOOL2D);
        tc_in(&c, cs[i].x, cs[i].lo, cs[i].hi);
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "kernel", 2, cs[i].k);
        ir_set_ints(c.g, n, "stride", 2, cs[i].s);
        ir_set_ints(c.g, n, "pad", 2, cs[i].p);
        ir_set_ints(c.g, n, "dilation", 2, cs[i].d);
        ir_set_int(c.g, n, "ceil_mode", cs[i].ceil);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt;
            double *ref = ref_maxpool2d(c.d[0], &cs[i].x, cs[i].k, cs[i].s, cs[i].p, cs[i].d,
                                        cs[i].ceil, &rt);
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
}

static void test_avgpool(void)
{
    struct { ir_type x; int64_t k[2], s[2], p[2]; int cip, ceil; } cs[] = {
        {F32(1, 1, 4, 4), {2, 2}, {2, 2}, {0, 0}, 1, 0},
        {F32(2, 3, 7, 9), {3, 3}, {2, 2}, {1, 1}, 1, 0},
        {F32(2, 3, 7, 9), {3, 3}, {2, 2}, {1, 1}, 0, 0},
        {F32(2, 2, 9, 8), {3, 2}, {1, 2}, {1, 1}, 0, 0},
        {F32(2, 2, 9, 8), {3, 2}, {1, 2}, {1, 1}, 1, 0},
        {F32(1, 2, 5, 6), {5, 1}, {1, 1}, {2, 0}, 0, 0},
        {F32(4, 8, 32, 32), {3, 3}, {1, 1}, {1, 1}, 0, 0},
        {F32(1, 1, 1, 1), {1, 1}, {1, 1}, {0, 0}, 1, 0},
        /* ceil_mode: windows past the padded input divide by what is left of them
           with count_include_pad, by their elements in the input without */
        {F32(2, 3, 8, 8), {3, 3}, {2, 2}, {1, 1}, 1, 1},
        {F32(2, 3, 8, 8), {3, 3}, {2, 2}, {1, 1}, 0, 1},
        {F32(1, 2, 5, 7), {2, 2}, {2, 2}, {0, 0}, 1, 1},
        {F32(1, 2, 5, 5), {2, 2}, {2, 2}, {1, 1}, 1, 1},
        {F32(2, 2, 9, 8), {3, 2}, {2, 3}, {1, 1}, 1, 1},
        {F32(2, 2, 9, 8), {3, 2}, {2, 3}, {1, 1}, 0, 1},
        {F32(1, 1, 2, 2), {3, 3}, {3, 3}, {0, 0}, 1, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_AVGPOOL2D);
        tc_in(&c, cs[i].x, -1, 1);
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "kernel", 2, cs[i].k);
        ir_set_ints(c.g, n, "stride", 2, cs[i].s);
        ir_set_ints(c.g, n, "pad", 2, cs[i].p);
        ir_set_int(c.g, n, "count_include_pad", cs[i].cip);
        ir_set_int(c.g, n, "ceil_mode", cs[i].ceil);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_avgpool2d(c.d[0], &cs[i].x, cs[i].k, cs[i].s, cs[i].p, cs[i].cip,
                                        cs[i].ceil, &rt);
            double *mag = ref_avgpool2d(c.abs_d[0], &cs[i].x, cs[i].k, cs[i].s, cs[i].p,
                                        cs[i].cip, cs[i].ceil, &mt);
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(cs[i].k[0] * cs[i].k[1]));
        }
        tc_end(&c);
    }
}

static void test_global_avgpool(void)
{
    ir_type cs[] = {F32(1, 1, 1, 1), F32(2, 3, 5, 7), F32(4, 64, 7, 7), F32(2, 3, 33, 17)};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_GLOBAL_AVGPOOL);
        tc_in(&c, cs[i], -1, 1);
        tc_node(&c);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_global_avgpool(c.d[0], &cs[i], &rt);
            double *mag = ref_global_avgpool(c.abs_d[0], &cs[i], &mt);
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(cs[i].dims[2] * cs[i].dims[3]));
        }
        tc_end(&c);
    }
}

static void test_adaptive_avgpool(void)
{
    struct { ir_type x; int64_t size[2]; } cs[] = {
        {F32(2, 3, 9, 8), {4, 5}},   /* windows of 3 and 4 rows, 2 and 3 columns, overlapping */
        {F32(1, 2, 5, 7), {3, 3}},
        {F32(2, 2, 3, 4), {5, 7}},   /* more outputs than inputs: windows of one, repeated */
        {F32(1, 1, 7, 1), {3, 1}},
        {F32(2, 3, 6, 6), {6, 6}},   /* the identity */
        {F32(4, 8, 33, 31), {7, 5}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_ADAPTIVE_AVGPOOL2D);
        tc_in(&c, cs[i].x, -1, 1);
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "size", 2, cs[i].size);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt, mt;
            double *ref = ref_adaptive_avgpool2d(c.d[0], &cs[i].x, cs[i].size, &rt);
            double *mag = ref_adaptive_avgpool2d(c.abs_d[0], &cs[i].x, cs[i].size, &mt);
            int64_t most = (cs[i].x.dims[2] / cs[i].size[0] + 2) *
                           (cs[i].x.dims[3] / cs[i].size[1] + 2); /* elements in a window */
            tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(most));
        }
        tc_end(&c);
    }
}

/* upsample2d and its gradient against the reference, which computes PyTorch's
 * taps on its own: nearest by fractional factors (given as a scale or a size), by
 * 2 (PyTorch's shift), the identity; bilinear up, down and copying one axis, with
 * and without align_corners, to one row. */
static void test_upsample(void)
{
    struct { ir_type x; int64_t size[2]; int bil, align; double scale[2]; } cs[] = {
        {F32(2, 3, 4, 5), {6, 7}, 0, 0, {1.5, 1.5}},
        {F32(1, 2, 5, 7), {3, 4}, 0, 0, {0.7, 0.6}},
        {F32(2, 2, 3, 4), {7, 9}, 0, 0, {0, 0}},
        {F32(1, 3, 4, 5), {8, 5}, 0, 0, {2, 1}},
        {F32(2, 3, 4, 5), {6, 7}, 1, 0, {1.5, 1.5}},
        {F32(2, 2, 9, 8), {4, 5}, 1, 0, {0, 0}},
        {F32(1, 2, 4, 5), {4, 12}, 1, 0, {1, 2.5}},
        {F32(2, 3, 4, 5), {7, 9}, 1, 1, {0, 0}},
        {F32(1, 2, 4, 5), {1, 8}, 1, 1, {0, 0}},
        {F32(4, 8, 17, 13), {40, 29}, 1, 0, {0, 0}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int grad = 0; grad < 2; grad++) {
            ir_type dy = cs[i].x;
            dy.dims[2] = cs[i].size[0];
            dy.dims[3] = cs[i].size[1];
            tcase c;
            tc_begin(&c, grad ? IR_OP_UPSAMPLE2D_GRAD : IR_OP_UPSAMPLE2D);
            tc_in(&c, grad ? dy : cs[i].x, -1, 1);
            ir_node *n = tc_node(&c);
            if (grad)
                ir_set_ints(c.g, n, "shape", 4, cs[i].x.dims);
            else
                ir_set_ints(c.g, n, "size", 2, cs[i].size);
            ir_set_int(c.g, n, "mode", cs[i].bil);
            ir_set_int(c.g, n, "align_corners", cs[i].align);
            ir_set_float(c.g, n, "scale_h", cs[i].scale[0]);
            ir_set_float(c.g, n, "scale_w", cs[i].scale[1]);
            if (tc_prepare(&c) && tc_run(&c)) {
                ir_type rt, mt;
                double *ref, *mag;
                if (grad) {
                    ref = ref_upsample2d_grad(c.d[0], &dy, cs[i].x.dims, cs[i].bil, cs[i].align,
                                              cs[i].scale, &rt);
                    mag = ref_upsample2d_grad(c.abs_d[0], &dy, cs[i].x.dims, cs[i].bil,
                                              cs[i].align, cs[i].scale, &mt);
                } else {
                    ref = ref_upsample2d(c.d[0], &cs[i].x, cs[i].size, cs[i].bil, cs[i].align,
                                         cs[i].scale, &rt);
                    mag = ref_upsample2d(c.abs_d[0], &cs[i].x, cs[i].size, cs[i].bil,
                                         cs[i].align, cs[i].scale, &mt);
                }
                int64_t most = 4 * (cs[i].size[0] / cs[i].x.dims[2] + 2) *
                               (cs[i].size[1] / cs[i].x.dims[3] + 2); /* terms of a dx */
                tc_check(&c, ref, &rt, mag, 4 * U32, 0, red_tol(grad ? most : 4));
            }
            tc_end(&c);
        }
}

/* Data for the ops that only move elements is drawn from [lo, -lo): integers as wide
 * as their dtype allows (past 32 bits for i64, to catch narrowing), floats in
 * [-1, 1). */
static double moved_lo(const ir_type *t)
{
    return t->dtype == IR_I64 ? -0x1p40 : t->dtype == IR_I32 ? -0x1p31 : -1;
}

static void test_reshape(void)
{
    struct { ir_type x; int rank; int64_t shape[4]; } cs[] = {
        {F32(2, 3, 4), 2, {6, 4}},
        {F32(24), 3, {2, 3, 4}},
        {F32(5, 1, 3), 1, {15}},
        {SCALAR, 2, {1, 1}},
        {F32(1), 0, {0}},
        {I64(3, 4), 3, {2, 1, 6}},      /* integers only move */
        {I32(2, 5), 1, {10}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_RESHAPE);
        tc_in(&c, cs[i].x, moved_lo(&cs[i].x), -moved_lo(&cs[i].x));
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "shape", cs[i].rank, cs[i].shape);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt;
            double *ref = ref_reshape(c.d[0], &cs[i].x, cs[i].rank, cs[i].shape, &rt);
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
}

static void test_transpose(void)
{
    struct { ir_type x; int64_t perm[5]; } cs[] = {
        {F32(2, 3), {1, 0}},
        {F32(2, 3, 4), {2, 0, 1}},
        {F32(2, 3, 4, 5), {0, 2, 1, 3}},
        {F32(3, 1, 4, 1, 5), {4, 3, 2, 1, 0}},
        {F32(7), {0}},
        {F32(64, 600), {1, 0}},
        {F32(2, 3, 5, 7), {0, 2, 3, 1}},   /* NCHW -> NHWC */
        {I64(3, 4, 5), {1, 2, 0}},
        {I32(4, 1, 3), {2, 0, 1}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_TRANSPOSE);
        tc_in(&c, cs[i].x, moved_lo(&cs[i].x), -moved_lo(&cs[i].x));
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "perm", cs[i].x.rank, cs[i].perm);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt;
            double *ref = ref_transpose(c.d[0], &cs[i].x, cs[i].perm, &rt);
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
}

static void concat_case(int n, const ir_type *ts, int axis)
{
    tcase c;
    tc_begin(&c, IR_OP_CONCAT);
    for (int i = 0; i < n; i++)
        tc_in(&c, ts[i], moved_lo(&ts[i]), -moved_lo(&ts[i]));
    ir_node *nd = tc_node(&c);
    ir_set_int(c.g, nd, "axis", axis);
    if (tc_prepare(&c) && tc_run(&c)) {
        ir_type rt;
        double *ref = ref_concat(n, (const double *const *)c.d, ts, axis, &rt);
        tc_check(&c, ref, &rt, NULL, 0, 0, 0);
    }
    tc_end(&c);
}

static void test_concat(void)
{
    concat_case(2, (ir_type[]){F32(2, 3), F32(4, 3)}, 0);
    concat_case(3, (ir_type[]){F32(2, 1, 4), F32(2, 3, 4), F32(2, 2, 4)}, 1);
    concat_case(1, (ir_type[]){F32(3, 5)}, 1);
    concat_case(2, (ir_type[]){F32(2, 3, 4, 1), F32(2, 3, 4, 5)}, 3);
    concat_case(2, (ir_type[]){F32(5), F32(1)}, 0);
    concat_case(3, (ir_type[]){I64(2, 3), I64(2, 1), I64(2, 4)}, 1);
    concat_case(2, (ir_type[]){I32(1, 5), I32(3, 5)}, 0);
    ir_type many[MAX_IN];
    for (int i = 0; i < MAX_IN; i++)
        many[i] = F32(2, 1 + i % 3, 3);
    concat_case(MAX_IN, many, 1);
    for (int i = 0; i < MAX_IN; i++)
        many[i] = F32(1 + i % 2, 2, 5);
    concat_case(MAX_IN, many, 0);
}

/* pad around every dimension or some, a value of any dtype */
static void test_pad(void)
{
    struct { ir_type x; int64_t before[4], after[4]; double value; } cs[] = {
        {F32(2, 3), {0, 1}, {0, 2}, 0},
        {F32(2, 3, 4), {1, 0, 2}, {2, 1, 0}, -1.5},
        {F32(5), {3}, {0}, 0.25},
        {F32(2, 1, 3, 4), {0, 0, 1, 1}, {0, 0, 1, 1}, 0},
        {F32(64, 600), {0, 10}, {0, 0}, 0},
        {I64(3, 4), {1, 0}, {0, 2}, 7},
        {I32(2, 5), {0, 3}, {1, 0}, -2},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_PAD);
        tc_in(&c, cs[i].x, moved_lo(&cs[i].x), -moved_lo(&cs[i].x));
        ir_node *n = tc_node(&c);
        ir_set_ints(c.g, n, "before", cs[i].x.rank, cs[i].before);
        ir_set_ints(c.g, n, "after", cs[i].x.rank, cs[i].after);
        ir_set_float(c.g, n, "value", cs[i].value);
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt;
            double *ref = ref_pad(c.d[0], &cs[i].x, cs[i].before, cs[i].after, cs[i].value, &rt);
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
}

/* arange in each dtype; cast between each pair of dtypes, floats beyond the
 * integer ranges, NaNs and negative numbers among them */
static void test_arange_cast(void)
{
    static const ir_dtype dts[] = {IR_F32, IR_F16, IR_I32, IR_I64, IR_U8};
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        tcase c;
        int whole = !ir_is_float(dts[t]);
        double start = whole ? -3 : -1.5, step = whole ? 2 : 0.375;
        tc_begin(&c, IR_OP_ARANGE);
        ir_node *n = tc_node(&c);
        n->out[0]->type = ty(dts[t], INTS(37));
        ir_set_float(c.g, n, "start", start);
        ir_set_float(c.g, n, "step", step);
        if (tc_prepare(&c) && tc_run(&c)) {
            double *ref = malloc(37 * sizeof *ref);
            for (int i = 0; i < 37; i++)
                ref[i] = ref_cast(start + i * step, IR_I64, dts[t]);
            ir_type rt = ty(dts[t], INTS(37));
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
    for (size_t f = 0; f < sizeof dts / sizeof *dts; f++)
        for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
            if (f == t)
                continue;
            tcase c;
            ir_type tx = ty(dts[f], INTS(6, 50));
            int wide = ir_is_float(dts[f]);
            tc_begin(&c, IR_OP_CAST);
            tc_in(&c, tx, wide ? -400 : dts[f] == IR_U8 ? 0 : -300, wide ? 400 : dts[f] == IR_U8 ? 256 : 300);
            ir_node *n = tc_node(&c);
            n->out[0]->type.dtype = dts[t];
            if (!tc_prepare(&c)) {
                tc_end(&c);
                continue;
            }
            if (wide) { /* NaN, infinities and beyond every integer range too */
                static const float edge[] = {NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 1e19f,
                                             -1e19f, 255.5f, 256, -0.75f, 2147483520.0f};
                float *x = rt_exec_data(c.x, c.in[0]);
                for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
                    x[i * 13] = edge[i], c.d[0][i * 13] = edge[i];
            }
            if (tc_run(&c)) {
                int64_t len = ir_type_numel(&tx);
                double *ref = malloc((size_t)len * sizeof *ref);
                for (int64_t i = 0; i < len; i++)
                    ref[i] = ref_cast(c.d[0][i], dts[f], dts[t]);
                ir_type rt = ty(dts[t], INTS(6, 50));
                tc_check(&c, ref, &rt, NULL, 0, 0, 0);
            }
            tc_end(&c);
        }
}

static void test_embedding(void)
{
    struct { ir_type idx; int64_t num, dim; } cs[] = {
        {I32(5), 10, 4}, {I64(2, 3), 7, 5}, {I32(1), 1, 1}, {I64(4, 3, 2), 50, 16},
        {I32(32, 40), 100, 64},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ir_type tw = F32(cs[i].num, cs[i].dim);
        tcase c;
        tc_begin(&c, IR_OP_EMBEDDING);
        tc_in(&c, cs[i].idx, 0, (double)cs[i].num);
        tc_in(&c, tw, -1, 1);
        tc_node(&c);
        ir_set_int(c.g, c.node, "padding_idx", i % 2 ? cs[i].num - 1 : -1); /* forward: none */
        if (tc_prepare(&c) && tc_run(&c)) {
            ir_type rt;
            double *ref = ref_embedding(c.ix[0], &cs[i].idx, c.d[1], &tw, &rt);
            tc_check(&c, ref, &rt, NULL, 0, 0, 0);
        }
        tc_end(&c);
    }
}

/* cross_entropy's (nll_loss's) attributes, as the frontend sets them */
static void ce_attrs(tcase *c, double eps, int64_t ignore, int64_t split)
{
    if (c->op == IR_OP_CROSS_ENTROPY)
        ir_set_float(c->g, c->node, "label_smoothing", eps);
    ir_set_int(c->g, c->node, "ignore_index", ignore);
    ir_set_int(c->g, c->node, "split", split);
}

/* cross_entropy over [n, c] and [n, c, d...] logits, with label smoothing and
 * ignored labels: every third position's label set to ignore_index (a class
 * id or -100), or all of them (NaN, as PyTorch's 0/0); nll_loss on the same
 * (no smoothing). */
static void test_cross_entropy(void)
{
    struct { ir_type t; ir_dtype label; double lo, hi, eps; int64_t ignore; int every; } cs[] = {
        {F32(4, 10), IR_I64, -3, 3, 0, -100, 0},    {F32(1, 1), IR_I32, -3, 3, 0, -100, 0},
        {F32(7, 3), IR_I32, -3, 3, 0, -100, 0},     {F32(16, 1000), IR_I64, -5, 5, 0, -100, 0},
        {F32(5, 9), IR_I32, -500, 500, 0, -100, 0}, {F32(6, 5), IR_I32, -3, 3, 0.1, -100, 0},
        {F32(6, 5), IR_I64, -3, 3, 0.25, 2, 3},     {F32(6, 5), IR_I32, -3, 3, 0, -100, 3},
        {F32(3, 4, 5, 2), IR_I64, -3, 3, 0.2, -100, 3},
        {F32(2, 7, 9), IR_I32, -4, 4, 0, 3, 0},     {F32(2, 3, 4), IR_I32, -3, 3, 1, -100, 1},
        {F32(4, 6), IR_I32, -3, 3, 0.5, -100, 1},
    };
    for (int k = 0; k < 2 * (int)(sizeof cs / sizeof cs[0]); k++) {
        int nll = k % 2, i = k / 2;
        ir_type tl = cs[i].t, ty_lab = tl;
        ty_lab.rank--;
        for (int d = 1; d < ty_lab.rank; d++)
            ty_lab.dims[d] = tl.dims[d + 1];
        ty_lab.dtype = cs[i].label;
        int64_t classes = tl.dims[1], npos = ir_type_numel(&ty_lab);
        tcase c;
        tc_begin(&c, nll ? IR_OP_NLL_LOSS : IR_OP_CROSS_ENTROPY);
        tc_in(&c, tl, cs[i].lo, cs[i].hi);
        tc_in(&c, ty_lab, 0, (double)classes);
        tc_node(&c);
        ce_attrs(&c, cs[i].eps, cs[i].ignore, 1);
        if (!tc_prepare(&c)) {
            tc_end(&c);
            continue;
        }
        for (int64_t p = 0; cs[i].every && p < npos; p += cs[i].every)
            tc_set_index(&c, 1, p, cs[i].ignore);
        if (tc_run(&c)) {
            double ref = nll ? ref_nll_loss(c.d[0], &tl, c.ix[1], cs[i].ignore)
                             : ref_cross_entropy(c.d[0], &tl, c.ix[1], cs[i].eps, cs[i].ignore);
            double xmax = max_abs(c.d[0], ir_type_numel(&tl));
            double tol = 1e-6 + red_tol(classes) + 4 * U32 * (fabs(ref) + 2 * xmax) +
                         red_tol(npos) * fabs(ref);
            ir_type rt = SCALAR;
            if (cs[i].every == 1) { /* all ignored */
                float got = *(float *)rt_exec_data(c.x, c.out);
                if (!isnan(ref) || !isnan(got))
                    fail_case(&c, "all labels ignored: %g, reference %g, expected NaN", got,
                              ref);
            } else {
                tc_check(&c, scalar(ref), &rt, NULL, 0, tol, 0);
            }
        }
        tc_end(&c);
    }
}

static void test_mse(void)
{
    ir_type cs[] = {F32(5), F32(3, 4, 5), F32(1), F32(300, 200), SCALAR};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        tcase c;
        tc_begin(&c, IR_OP_MSE);
        tc_in(&c, cs[i], -1, 1);
        tc_in(&c, cs[i], -1, 1);
        tc_node(&c);
        if (tc_prepare(&c) && tc_run(&c)) {
            int64_t k = ir_type_numel(&cs[i]);
            ir_type rt = SCALAR;
            tc_check(&c, scalar(ref_mse(c.d[0], c.d[1], k)), &rt, NULL,
                     8 * (sqrt((double)k) + 1) * U32, 0, 0);
        }
        tc_end(&c);
    }
}

/* ---- dtypes: what the shape rules accept runs ---- */

/* The op table walked with integer operands (op_walk.h): wherever the shape
 * rule accepts the node, the CPU executor must have its kernel and run it. */
static void test_dtypes(void)
{
    int accepted = 0, refused = 0;
    for (int op = 0; op < IR_NOPS; op++)
        for (int t = 0; t < OW_NDTYPES; t++) {
            ir_graph *g = ow_node_graph((ir_op)op, ow_dtypes[t]);
            char err[256], tb[64];
            if (!g) {
                refused += !ir_op_communicates((ir_op)op);
                continue;
            }
            accepted++;
            rt_exec *x = rt_exec_new(g, err, sizeof err);
            if (!x || rt_exec_run(x, err, sizeof err) != 0) {
                printf("FAIL %s of %s: the shape rule accepts it, and the CPU executor: %s\n",
                       ir_ops[op].name, ir_type_str(&g->inputs[0]->type, tb, sizeof tb), err);
                nfailed++;
            }
            rt_exec_free(x);
            ir_graph_free(g);
        }
    printf("ops: integer operands: %d nodes accepted by the shape rules, each run; %d refused\n",
           accepted, refused);
}

/* ---- errors: bad indices and labels ---- */

/* Runs prepared case c with element j of integer input i set to bad: rt_exec_run
 * must fail with a message (and the reference must agree that the op is
 * undefined there), then succeed once the index is valid again. */
static void expect_run_error(tcase *c, int i, int64_t j, int64_t bad, int undefined)
{
    tc_set_index(c, i, j, bad);
    char err[256] = "";
    int rc = rt_exec_run(c->x, err, sizeof err);
    if (!undefined)
        fail_case(c, "the reference does not find index %lld out of range", (long long)bad);
    else if (rc != -1)
        fail_case(c, "index %lld at element %lld: rt_exec_run returned %d, expected -1",
                  (long long)bad, (long long)j, rc);
    else if (!err[0])
        fail_case(c, "index %lld: rt_exec_run failed without a message", (long long)bad);
    /* the executor stays usable: with the index fixed the same run succeeds */
    tc_set_index(c, i, j, 0);
    tc_run(c);
}

static void test_errors(void)
{
    /* (dtype, bad value): past the end, negative, and one that wraps to a valid
       index if cut to 32 bits */
    struct { ir_dtype dt; int64_t bad; } bads[] = {
        {IR_I32, 10}, {IR_I32, -1}, {IR_I64, 10}, {IR_I64, -7}, {IR_I64, ((int64_t)1 << 32) + 1},
    };
    for (size_t b = 0; b < sizeof bads / sizeof bads[0]; b++) {
        ir_type tw = F32(10, 3), ti = ty(bads[b].dt, INTS(2, 3));
        tcase c;
        tc_begin(&c, IR_OP_EMBEDDING);
        tc_in(&c, ti, 0, 10);
        tc_in(&c, tw, -1, 1);
        tc_node(&c);
        ir_set_int(c.g, c.node, "padding_idx", -1);
        if (tc_prepare(&c)) {
            c.ix[0][4] = bads[b].bad;
            ir_type rt;
            double *ref = ref_embedding(c.ix[0], &ti, c.d[1], &tw, &rt);
            expect_run_error(&c, 0, 4, bads[b].bad, ref == NULL);
            free(ref);
        }
        tc_end(&c);

        ir_type tl = F32(4, 10), tlab = ty(bads[b].dt, INTS(4));
        tc_begin(&c, IR_OP_CROSS_ENTROPY);
        tc_in(&c, tl, -1, 1);
        tc_in(&c, tlab, 0, 10);
        tc_node(&c);
        ce_attrs(&c, 0, -100, 1);
        if (tc_prepare(&c)) {
            c.ix[1][2] = bads[b].bad;
            double ref = ref_cross_entropy(c.d[0], &tl, c.ix[1], 0, -100);
            expect_run_error(&c, 1, 2, bads[b].bad, isnan(ref));
        }
        tc_end(&c);
    }
    /* an ignored label in a batch split between replicas (passes/partition.c),
       whose means over different counts would be averaged: refused, with the
       label and the replica count named; ignored on a whole batch */
    for (int split = 1; split <= 2; split++) {
        tcase c;
        tc_begin(&c, IR_OP_CROSS_ENTROPY);
        tc_in(&c, F32(4, 3, 2), -1, 1);
        tc_in(&c, ty(IR_I64, INTS(4, 2)), 0, 3);
        tc_node(&c);
        ce_attrs(&c, 0.1, -100, split);
        if (tc_prepare(&c)) {
            tc_set_index(&c, 1, 5, -100);
            char err[256] = "";
            int rc = rt_exec_run(c.x, err, sizeof err);
            if (split == 1 && rc != 0)
                fail_case(&c, "an ignored label on a whole batch: %s", err);
            if (split == 2 && (rc != -1 || !strstr(err, "label -100 at position 5 of 'in1' is "
                                                        "ignore_index, in a batch split between 2")))
                fail_case(&c, "an ignored label in a split batch: rc %d, '%s'", rc, err);
        }
        tc_end(&c);
    }
}

static void run_all(void)
{
    test_const();
    test_unary();
    test_relu_grad();
    test_dtypes();
    test_binary();
    test_where();
    test_matmul();
    test_dense();
    test_conv2d();
    test_conv_transpose2d();
    test_batchnorm();
    test_layernorm();
    test_softmax();
    test_attention();
    test_extreme();
    test_maxpool();
    test_avgpool();
    test_global_avgpool();
    test_adaptive_avgpool();
    test_upsample();
    test_reshape();
    test_transpose();
    test_concat();
    test_pad();
    test_arange_cast();
    test_embedding();
    test_cross_entropy();
    test_mse();
    test_errors();
}

/* test_ops [-v]: -v lists the number of cases per op. */
int main(int argc, char **argv)
{
    /* every case on all cores, then on one thread: the kernels split large loops
       across OpenMP threads and small ones not, and both must agree */
    static const int thread_counts[] = {0, 1};
    for (size_t t = 0; t < sizeof thread_counts / sizeof thread_counts[0]; t++) {
        threads = thread_counts[t];
        rt_set_threads(threads);
        case_seed = 12345;
        run_all();
    }

    /* the forward ops; the training ops that autodiff makes (ops.def, from
       batchnorm_train on) are checked by tests/grad/ */
    int missing = 0;
    for (int op = 0; op < IR_OP_BATCHNORM_TRAIN; op++)
        if (!cases_per_op[op]) {
            printf("FAIL: no case for op %s\n", ir_ops[op].name);
            missing++;
        }
    if (argc > 1 && strcmp(argv[1], "-v") == 0)
        for (int op = 0; op < IR_OP_BATCHNORM_TRAIN; op++)
            printf("  %-15s %d cases\n", ir_ops[op].name, cases_per_op[op] / 2);
    printf("ops: %d cases over %d ops, on all threads and on one; %d failed%s\n", ncases / 2,
           (int)IR_OP_BATCHNORM_TRAIN, nfailed + missing, nfailed + missing ? "" : ", all within tolerance");
    return nfailed + missing ? 1 : 0;
}
