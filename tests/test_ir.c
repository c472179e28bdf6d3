/* Tests of the IR text form and the verifier (ir/print.c, ir/parse.c, ir/verify.c).
 *
 *   - round trips: graphs built with the API print, parse and print again to the
 *     same bytes; the samples (tests/ir, *.gir) and the example in docs/ir.md are
 *     in that canonical form already;
 *   - quoted names and file names, and floats that must come back bit for bit;
 *   - a table of malformed texts, each with its exact first diagnostic, and error
 *     recovery (several errors in one run, no cascades);
 *   - hand-corrupted graphs, each with its exact verifier message;
 *   - robustness: every truncation of valid texts and thousands of seeded random
 *     mutations go through parse, verify, print and diag_print without a crash
 *     (run it in the GNC_SANITIZE build too), and whatever parses prints to text
 *     that parses back to the same text.
 *
 * Usage: test_ir SOURCE_DIR */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "ir.h"
#include "filecheck.h"

static int passed, failed;

static void check(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
#define CHECK(cond, ...) check((cond) != 0, __FILE__, __LINE__, __VA_ARGS__)

/* ---- helpers ---- */



/* The first diagnostic as diag_print's first line, without the newline. */
static const char *first_diag(const diag *d, char *buf, size_t size)
{
    static const char *const level[] = {"error", "warning", "note"};
    if (d->n == 0)
        return "(no diagnostic)";
    const diag_entry *e = &d->entries[0];
    if (e->loc.file)
        snprintf(buf, size, "%s:%d:%d: %s: %s", e->loc.file, e->loc.line, e->loc.col,
                 level[e->level], e->msg);
    else
        snprintf(buf, size, "gnc: %s: %s", level[e->level], e->msg);
    return buf;
}

static ir_graph *parse_text(const char *text, size_t len, diag *d)
{
    return ir_parse("t.gir", text, len, d);
}

static ir_loc at(int line, int col) { return (ir_loc){"m.net", line, col}; }

/* A node with its type from ir_infer, appended. */
static ir_value *node(ir_graph *g, ir_op op, int nin, ir_value *const *in, const char *name,
                      ir_loc loc)
{
    ir_node *n = ir_node_new(g, op, nin, in, 1, name, loc);
    return n->out[0];
}

static ir_value *finish(ir_graph *g, ir_value *v)
{
    char err[256];
    ir_type t[IR_MAX_RESULTS];
    int ok = ir_infer(v->def, t, err, sizeof err);
    CHECK(ok, "building %s: %s", v->name, err);
    v->type = ok ? t[0] : (ir_type){IR_F32, 0, {0}};
    ir_append(g, v->def);
    return v;
}

static ir_type T(ir_dtype dt, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    return (ir_type){dt, rank, {d0, d1, d2, d3}};
}

/* A small CNN with a loss: every kind of statement and attribute. */
static ir_graph *build_cnn(void)
{
    ir_graph *g = ir_graph_new("tiny_cnn");
    ir_value *x = ir_add_input(g, "image", T(IR_F32, 4, 4, 1, 8, 8), at(2, 5));
    ir_value *label = ir_add_input(g, "label", T(IR_I32, 1, 4, 0, 0, 0), at(3, 5));
    ir_init u = {IR_INIT_UNIFORM, -1.0 / 3, 1.0 / 3, 0, NULL}, z = {IR_INIT_ZEROS, 0, 0, 0, NULL},
            one = {IR_INIT_ONES, 0, 0, 0, NULL}, nrm = {IR_INIT_NORMAL, 0, 0.02, 0, NULL};
    ir_value *w = ir_add_param(g, IR_VALUE_PARAM, "stem.weight", T(IR_F32, 4, 8, 1, 3, 3), u,
                               at(5, 9));
    ir_value *b = ir_add_param(g, IR_VALUE_PARAM, "stem.bias", T(IR_F32, 1, 8, 0, 0, 0), u,
                               at(5, 9));
    ir_value *bw = ir_add_param(g, IR_VALUE_PARAM, "bn.weight", T(IR_F32, 1, 8, 0, 0, 0), one,
                                at(6, 9));
    ir_value *bb = ir_add_param(g, IR_VALUE_PARAM, "bn.bias", T(IR_F32, 1, 8, 0, 0, 0), z,
                                at(6, 9));
    ir_value *rm = ir_add_param(g, IR_VALUE_BUFFER, "bn.running_mean", T(IR_F32, 1, 8, 0, 0, 0),
                                z, at(6, 9));
    ir_value *rv = ir_add_param(g, IR_VALUE_BUFFER, "bn.running_var", T(IR_F32, 1, 8, 0, 0, 0),
                                one, at(6, 9));
    ir_value *fw = ir_add_param(g, IR_VALUE_PARAM, "fc.weight", T(IR_F32, 2, 10, 8, 0, 0), nrm,
                                at(9, 9));
    ir_value *fb = ir_add_param(g, IR_VALUE_PARAM, "fc.bias", T(IR_F32, 1, 10, 0, 0, 0), z,
                                at(9, 9));

    ir_value *in3[5] = {x, w, b};
    ir_value *stem = node(g, IR_OP_CONV2D, 3, in3, "stem", at(5, 9));
    int64_t ones[2] = {1, 1}, zeros[2] = {0, 0}, twos[2] = {2, 2};
    ir_set_ints(g, stem->def, "stride", 2, ones);
    ir_set_ints(g, stem->def, "pad", 2, ones);
    ir_set_ints(g, stem->def, "dilation", 2, ones);
    ir_set_int(g, stem->def, "groups", 1);
    finish(g, stem);

    ir_value *in5[5] = {stem, bw, bb, rm, rv};
    ir_value *bn = node(g, IR_OP_BATCHNORM, 5, in5, "bn", at(6, 9));
    ir_set_float(g, bn->def, "eps", 1e-5);
    ir_set_float(g, bn->def, "momentum", 0.1);
    finish(g, bn);

    ir_value *relu = finish(g, node(g, IR_OP_RELU, 1, &bn, "relu", at(7, 9)));
    ir_value *pool = node(g, IR_OP_MAXPOOL2D, 1, &relu, "pool", at(7, 20));
    ir_set_ints(g, pool->def, "kernel", 2, twos);
    ir_set_ints(g, pool->def, "stride", 2, twos);
    ir_set_ints(g, pool->def, "pad", 2, zeros);
    ir_set_ints(g, pool->def, "dilation", 2, ones);
    ir_set_int(g, pool->def, "ceil_mode", 0);
    finish(g, pool);
    ir_value *gap = finish(g, node(g, IR_OP_GLOBAL_AVGPOOL, 1, &pool, "gap", at(8, 9)));
    ir_value *flat = node(g, IR_OP_RESHAPE, 1, &gap, "flat", at(8, 20));
    int64_t shape[2] = {4, 8};
    ir_set_ints(g, flat->def, "shape", 2, shape);
    finish(g, flat);
    ir_value *in2[3] = {flat, fw, fb};
    ir_value *fc = finish(g, node(g, IR_OP_DENSE, 3, in2, "fc", at(9, 9)));
    ir_value *sm = node(g, IR_OP_LOG_SOFTMAX, 1, &fc, "log_softmax", at(10, 9));
    ir_set_int(g, sm->def, "axis", 1);
    finish(g, sm);
    ir_value *ce_in[2] = {fc, label};
    ir_value *ce = node(g, IR_OP_CROSS_ENTROPY, 2, ce_in, "cross_entropy", at(11, 9));
    ir_set_float(g, ce->def, "label_smoothing", 0);
    ir_set_int(g, ce->def, "ignore_index", -100);
    ir_set_int(g, ce->def, "split", 1);
    finish(g, ce);
    ir_value *c = node(g, IR_OP_CONST, 0, NULL, "half", (ir_loc){0});
    ir_set_float(g, c->def, "value", 0.5);
    c->type = T(IR_F32, 0, 0, 0, 0, 0);
    finish(g, c);
    ir_value *mul_in[2] = {ce, c};
    ir_value *loss = finish(g, node(g, IR_OP_MUL, 2, mul_in, "scaled", at(11, 20)));
    ir_add_output(g, "logits", fc, at(12, 5));
    ir_add_output(g, "log probs", sm, at(13, 5));
    g->loss = loss;
    return g;
}

static ir_node *find_node(ir_graph *g, const char *name)
{
    ir_value *v = ir_find_value(g, name);
    return v ? v->def : NULL;
}

/* print, parse, print: the two texts must be equal; returns the parsed graph. */
static ir_graph *round_trip(const ir_graph *g, const char *what)
{
    char *a = graph_text(g);
    diag d;
    diag_init(&d);
    ir_graph *g2 = parse_text(a, strlen(a), &d);
    char buf[512];
    CHECK(g2, "%s: the printed text does not parse: %s", what, first_diag(&d, buf, sizeof buf));
    if (g2) {
        char *b = graph_text(g2);
        CHECK(strcmp(a, b) == 0, "%s: print(parse(print(g))) differs:\n%s---\n%s", what, a, b);
        free(b);
    }
    diag_free(&d);
    free(a);
    return g2;
}

/* ---- round trips ---- */

static void test_round_trip_cnn(void)
{
    ir_graph *g = build_cnn();
    diag d;
    diag_init(&d);
    char buf[512];
    CHECK(ir_verify(g, &d) == 0, "the CNN does not verify: %s", first_diag(&d, buf, sizeof buf));
    ir_graph *g2 = round_trip(g, "cnn");
    if (g2) {
        CHECK(ir_verify(g2, &d) == 0, "the parsed CNN does not verify: %s",
              first_diag(&d, buf, sizeof buf));
        CHECK(g2->nnodes == g->nnodes && g2->ninputs == 2 && g2->nparams == 8 &&
              g2->noutputs == 2, "the parsed CNN has other counts");
        CHECK(g2->loss && strcmp(g2->loss->name, "scaled") == 0, "the loss did not come back");
        ir_node *conv = find_node(g2, "stem");
        CHECK(conv && conv->nattrs == 4 && strcmp(conv->attrs[0].key, "stride") == 0 &&
              strcmp(conv->attrs[3].key, "groups") == 0 && conv->attrs[3].kind == IR_ATTR_INT,
              "conv2d attributes lost their order or kind");
        CHECK(conv && conv->loc.file && strcmp(conv->loc.file, "m.net") == 0 &&
              conv->loc.line == 5 && conv->loc.col == 9, "a node location did not come back");
        CHECK(conv && conv->out[0]->loc.line == 5, "a result did not get its node's location");
        ir_value *w = ir_find_value(g2, "stem.weight");
        CHECK(w && w->kind == IR_VALUE_PARAM && w->init.kind == IR_INIT_UNIFORM &&
              w->init.a == -1.0 / 3 && w->init.b == 1.0 / 3, "an initializer did not come back");
        ir_value *rm = ir_find_value(g2, "bn.running_mean");
        CHECK(rm && rm->kind == IR_VALUE_BUFFER, "a buffer came back as a param");
        ir_node *relu = find_node(g2, "relu"), *bn = find_node(g2, "bn");
        CHECK(relu && bn && relu->in[0] == bn->out[0], "an operand does not point at its value");
        /* locations of one file share one interned name */
        CHECK(conv && bn && conv->loc.file == bn->loc.file, "file names are not interned");
        ir_graph_free(g2);
    }
    char *text = graph_text(g);
    CHECK(strstr(text, "# gnc IR\ngraph tiny_cnn {\n  input %image: f32[4, 1, 8, 8] @m.net:2:5\n")
              == text, "the header or first input prints otherwise:\n%s", text);
    CHECK(strstr(text, "  %stem: f32[4, 8, 8, 8] = conv2d(%image, %stem.weight, %stem.bias) "
                       "{stride = [1, 1], pad = [1, 1], dilation = [1, 1], groups = 1} "
                       "@m.net:5:9\n"), "conv2d prints otherwise:\n%s", text);
    CHECK(strstr(text, "  param %stem.weight: f32[8, 1, 3, 3] = uniform(-0.33333333333333331, "
                       "0.33333333333333331) @m.net:5:9\n"), "a param prints otherwise");
    CHECK(strstr(text, "  buffer %bn.running_var: f32[8] = ones @m.net:6:9\n"),
          "a buffer prints otherwise");
    CHECK(strstr(text, "  %half: f32[] = const() {value = 0.5}\n"), "const prints otherwise");
    CHECK(strstr(text, "  %relu: f32[4, 8, 8, 8] = relu(%bn) @m.net:7:9\n"),
          "a node without attributes prints otherwise");
    CHECK(strstr(text, "  output logits = %fc @m.net:12:5\n  output \"log probs\" = "
                       "%log_softmax @m.net:13:5\n  loss %scaled\n}\n"),
          "outputs or loss print otherwise");
    free(text);
    diag_free(&d);
    ir_graph_free(g);
}

static void test_quoted(void)
{
    static const char *const names[] = {"a b", "x\"y\\z", "tab\there\nnl", "\x01\x7f\xc3\xa9",
                                        "9lives", "ok.name_1", "%", "#not a comment"};
    static const char *const files[] = {"my models/x.net", "a:b.net", "C:\\dir\\x.net",
                                        "plain/path-1+2.net", "\"q\".net"};
    int nn = (int)(sizeof names / sizeof *names), nf = (int)(sizeof files / sizeof *files);
    ir_graph *g = ir_graph_new("my-model");
    ir_value *prev = NULL;
    for (int i = 0; i < nn; i++) {
        ir_loc loc = {files[i % nf], i + 1, 2 * i + 1};
        if (!prev) {
            prev = ir_add_input(g, names[i], T(IR_F32, 1, 3, 0, 0, 0), loc);
            continue;
        }
        prev = finish(g, node(g, IR_OP_RELU, 1, &prev, names[i], loc));
    }
    ir_add_output(g, "out put", prev, (ir_loc){"o\n.net", 1, 1});
    ir_add_output(g, "plain", prev, (ir_loc){0});
    diag d;
    diag_init(&d);
    char buf[512];
    CHECK(ir_verify(g, &d) == 0, "the quoted graph does not verify: %s",
          first_diag(&d, buf, sizeof buf));
    char *text = graph_text(g);
    CHECK(strstr(text, "graph \"my-model\" {\n"), "the graph name is not quoted:\n%s", text);
    CHECK(strstr(text, "input %\"a b\": f32[3] @\"my models/x.net\":1:1\n"),
          "a quoted input prints otherwise:\n%s", text);
    CHECK(strstr(text, "%\"x\\\"y\\\\z\": f32[3] = relu(%\"a b\") @\"a:b.net\":2:3\n"),
          "quotes and backslashes print otherwise:\n%s", text);
    CHECK(strstr(text, "%\"tab\\there\\nnl\""), "tab and newline print otherwise");
    CHECK(strstr(text, "%\"\\x01\\x7f\\xc3\\xa9\""), "bytes print otherwise");
    CHECK(strstr(text, "%\"9lives\"") && strstr(text, "%ok.name_1:"),
          "bare and quoted names are told apart otherwise");
    CHECK(strstr(text, "@plain/path-1+2.net:4:7\n") && strstr(text, "@\"\\\"q\\\".net\":5:9\n"),
          "file names print otherwise:\n%s", text);
    CHECK(strstr(text, "  output \"out put\" = %\"#not a comment\" @\"o\\n.net\":1:1\n"),
          "a quoted output prints otherwise:\n%s", text);
    ir_graph *g2 = round_trip(g, "quoted");
    if (g2) {
        for (int i = 0; i < nn; i++)
            CHECK(ir_find_value(g2, names[i]), "name %d did not come back", i);
        CHECK(strcmp(g2->name, "my-model") == 0, "the graph name did not come back");
        ir_value *v = ir_find_value(g2, names[2]);
        CHECK(v && v->def && strcmp(v->def->loc.file, files[2]) == 0,
              "a quoted file name did not come back");
        CHECK(strcmp(g2->outputs[0].loc.file, "o\n.net") == 0, "an output location did not");
        CHECK(ir_verify(g2, &d) == 0, "the parsed quoted graph does not verify: %s",
              first_diag(&d, buf, sizeof buf));
        ir_graph_free(g2);
    }
    free(text);
    diag_free(&d);
    ir_graph_free(g);
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_floats(void)
{
    static const double xs[] = {0.1, 1e-5, 1e300, -0.0, 3, 0, 5e-324, DBL_MAX, -DBL_MIN,
                                1.0 / 3, 123456789012345678.0, -2.5e-310, 1e22, INFINITY,
                                -INFINITY};
    int n = (int)(sizeof xs / sizeof *xs);
    ir_graph *g = ir_graph_new("floats");
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        ir_value *c = node(g, IR_OP_CONST, 0, NULL, name, (ir_loc){0});
        ir_set_float(g, c->def, "value", xs[i]);
        c->type = T(IR_F32, 1, 2, 0, 0, 0);
        ir_append(g, c->def);
        snprintf(name, sizeof name, "p%d", i);
        ir_add_param(g, IR_VALUE_PARAM, name, T(IR_F32, 0, 0, 0, 0, 0),
                     (ir_init){IR_INIT_NORMAL, xs[i], xs[n - 1 - i], 0, NULL}, (ir_loc){0});
    }
    char *text = graph_text(g);
    CHECK(strstr(text, "{value = 0.10000000000000001}"), "0.1 prints otherwise:\n%s", text);
    CHECK(strstr(text, "{value = 3.0}") && strstr(text, "{value = -0.0}") &&
          strstr(text, "{value = 0.0}"), "integral floats print without '.0':\n%s", text);
    CHECK(strstr(text, "{value = 1.0000000000000001e+300}") &&
          strstr(text, "{value = 1.0000000000000001e-05}"), "exponents print otherwise");
    CHECK(strstr(text, "{value = inf}") && strstr(text, "{value = -inf}"),
          "infinities print otherwise:\n%s", text);
    ir_graph *g2 = round_trip(g, "floats");
    if (g2) {
        int i = 0;
        for (const ir_node *nd = g2->head; nd && i < n; nd = nd->next, i++) {
            const ir_attr *a = ir_get_attr(nd, "value");
            CHECK(a && a->kind == IR_ATTR_FLOAT && same_bits(a->f, xs[i]),
                  "float %.17g did not come back bit for bit", xs[i]);
        }
        CHECK(i == n, "the float graph lost nodes");
        for (i = 0; i < g2->nparams; i++)
            CHECK(same_bits(g2->params[i]->init.a, xs[i]) &&
                  same_bits(g2->params[i]->init.b, xs[n - 1 - i]),
                  "initializer arguments %.17g, %.17g did not come back", xs[i], xs[n - 1 - i]);
        ir_graph_free(g2);
    }
    free(text);
    ir_graph_free(g);

    /* NaN has no bits to keep but its sign; it still reads back as a float */
    const char *nan_text = "graph g {\n  %c: f32[] = const() {value = -nan}\n"
                           "  %d: f32[] = const() {value = nan}\n}\n";
    diag d;
    diag_init(&d);
    g = parse_text(nan_text, strlen(nan_text), &d);
    CHECK(g && isnan(ir_attr_float(g->head, "value")) && signbit(ir_attr_float(g->head, "value"))
          && g->head->attrs[0].kind == IR_ATTR_FLOAT, "-nan does not read back");
    if (g) {
        char *s = graph_text(g);
        CHECK(strstr(s, "{value = -nan}") && strstr(s, "{value = nan}"), "nan prints otherwise");
        free(s);
        ir_graph_free(g);
    }
    /* integers keep their kind, and the extremes of int64 fit */
    const char *ints = "graph g {\n  input %x: f32[6]\n  %r: f32[6] = reshape(%x) "
                       "{shape = [-9223372036854775808, 9223372036854775807], a = 7, b = 7.0, "
                       "c = +1e2, d = []}\n}\n";
    g = parse_text(ints, strlen(ints), &d);
    CHECK(g != NULL, "integer extremes do not parse");
    if (g) {
        const ir_node *r = g->head;
        CHECK(r->attrs[0].n == 2 && r->attrs[0].ints[0] == INT64_MIN &&
              r->attrs[0].ints[1] == INT64_MAX, "int64 extremes did not come back");
        CHECK(r->attrs[1].kind == IR_ATTR_INT && r->attrs[2].kind == IR_ATTR_FLOAT &&
              r->attrs[3].kind == IR_ATTR_FLOAT && r->attrs[3].f == 100.0 &&
              r->attrs[4].kind == IR_ATTR_INTS && r->attrs[4].n == 0,
              "attribute kinds are read otherwise");
        ir_graph_free(g);
    }
    diag_free(&d);
}

/* Several results print as "%a: T, %b: T = op(...)"; no op makes them yet. */
static void test_multi_result(void)
{
    ir_graph *g = ir_graph_new("multi");
    ir_value *x = ir_add_input(g, "x", T(IR_F32, 1, 4, 0, 0, 0), (ir_loc){0});
    ir_value *out[2] = {ir_value_new(g, "lo", (ir_loc){0}), ir_value_new(g, "hi", (ir_loc){0})};
    out[0]->type = out[1]->type = x->type;
    ir_node *n = ir_node_make(g, IR_OP_RELU, 1, &x, 2, out, (ir_loc){"m.net", 1, 1});
    ir_append(g, n);
    char *text = graph_text(g);
    CHECK(strstr(text, "  %lo: f32[4], %hi: f32[4] = relu(%x) @m.net:1:1\n"),
          "several results print otherwise:\n%s", text);
    ir_graph *g2 = round_trip(g, "multi");
    if (g2) {
        const ir_node *m = g2->head;
        CHECK(m && m->nout == 2 && m->out[1]->def == m && m->out[1]->def_index == 1 &&
              strcmp(m->out[1]->name, "hi") == 0, "the second result did not come back");
        diag d;
        diag_init(&d);
        char buf[512];
        ir_verify(g2, &d);
        CHECK(strcmp(first_diag(&d, buf, sizeof buf),
                     "m.net:1:1: error: node %lo (relu): relu has one result, got 2") == 0,
              "two results of relu: %s", buf);
        diag_free(&d);
        ir_graph_free(g2);
    }
    free(text);
    ir_graph_free(g);
}

/* ---- samples and the documentation's example: canonical texts ---- */

static void check_canonical(const char *what, const char *text, size_t len)
{
    diag d;
    diag_init(&d);
    char buf[512];
    ir_graph *g = ir_parse(what, text, len, &d);
    CHECK(g, "%s does not parse: %s", what, first_diag(&d, buf, sizeof buf));
    if (g) {
        CHECK(ir_verify(g, &d) == 0, "%s does not verify: %s", what,
              first_diag(&d, buf, sizeof buf));
        char *s = graph_text(g);
        CHECK(strlen(s) == len && memcmp(s, text, len) == 0,
              "%s is not in canonical form; it prints as:\n%s", what, s);
        /* a clone: the same text, ids, locations and names, nothing shared */
        ir_graph *c = ir_graph_clone(g);
        int same = c->nvalues == g->nvalues && c->nnodes == g->nnodes;
        for (ir_node *n = g->head, *m = c->head; same && n; n = n->next, m = m->next)
            same = m && n != m && n->op == m->op && n->out[0]->id == m->out[0]->id &&
                   n->out[0] != m->out[0] && n->loc.line == m->loc.line &&
                   n->loc.col == m->loc.col && ir_find_value(c, n->out[0]->name) == m->out[0];
        ir_graph_free(g);
        char *cs = graph_text(c);
        CHECK(same && strcmp(cs, s) == 0 && ir_verify(c, &d) == 0,
              "%s: its clone differs or does not verify:\n%s", what, cs);
        free(cs);
        free(s);
        ir_graph_free(c);
    }
    diag_free(&d);
}

static void test_samples(const char *src)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/ir", src);
    DIR *dir = opendir(path);
    CHECK(dir, "cannot open %s", path);
    int count = 0;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".gir") != 0)
            continue;
        snprintf(path, sizeof path, "%s/tests/ir/%s", src, e->d_name);
        size_t len;
        char *text = read_file(path, &len);
        CHECK(text, "cannot read %s", path);
        if (text)
            check_canonical(path, text, len);
        free(text);
        count++;
    }
    if (dir)
        closedir(dir);
    CHECK(count >= 2, "found %d samples in tests/ir", count);

    /* docs/ir.md: the block after "## Example" */
    snprintf(path, sizeof path, "%s/docs/ir.md", src);
    size_t len;
    char *doc = read_file(path, &len);
    CHECK(doc, "cannot read %s", path);
    const char *ex = doc ? strstr(doc, "## Example") : NULL;
    const char *start = ex ? strstr(ex, "```\n") : NULL;
    const char *end = start ? strstr(start + 4, "```\n") : NULL;
    CHECK(end, "docs/ir.md has no example block after '## Example'");
    if (end)
        check_canonical("docs/ir.md example", start + 4, (size_t)(end - start - 4));
    free(doc);
}

/* ---- malformed texts ---- */

typedef struct {
    const char *text;
    size_t len;
    const char *expected;   /* the first diagnostic line */
} bad_case;

#define H "graph g {\n  input %x: f32[2, 3]\n"
#define BAD(text, expected) {text, sizeof(text) - 1, expected}

static const bad_case bad_cases[] = {
    BAD("", "t.gir:1:1: error: expected 'graph NAME {' before the end of the file"),
    BAD("# only a comment\n\n", "t.gir:3:1: error: expected 'graph NAME {' before the end of the file"),
    BAD("grph g {\n}\n", "t.gir:1:1: error: expected 'graph NAME {'"),
    BAD("graph {\n}\n", "t.gir:1:7: error: expected the graph's name after 'graph'"),
    BAD("graph g\n}\n", "t.gir:1:8: error: expected '{' after the graph's name"),
    BAD("graph g { x\n}\n", "t.gir:1:11: error: unexpected 'x' at end of line"),
    BAD(H, "t.gir:3:1: error: missing '}' at end of file"),
    BAD(H "}\nextra\n", "t.gir:4:1: error: unexpected text after the end of the graph"),
    BAD(H "  fused {\n    fused {\n  }\n}\n", "t.gir:4:5: error: fused nodes do not nest"),
    BAD(H "  fused {\n    output y = %x\n  }\n}\n",
        "t.gir:4:5: error: only nodes go inside a fused node; expected a node or '}'"),
    BAD(H "  fused {\n    %y: f32[2, 3] = relu(%x)\n",
        "t.gir:3:3: error: this fused node has no closing '}'"),
    BAD(H "  fused\n}\n", "t.gir:3:8: error: expected '{' after 'fused'"),
    BAD(H "  %y: f32[2, 3 = relu(%x)\n}\n", "t.gir:3:16: error: expected ']' after dimensions"),
    BAD(H "  %y: f32[2, 3] = rleu(%x)\n}\n",
        "t.gir:3:19: error: unknown op 'rleu'; did you mean 'relu'?"),
    BAD(H "  %y: f32[2, 3] = frobnicate(%x)\n}\n", "t.gir:3:19: error: unknown op 'frobnicate'"),
    BAD(H "  input %z: f33[2]\n}\n", "t.gir:3:13: error: unknown dtype 'f33'; did you mean 'f32'?"),
    BAD(H "  %y: f32[2, 3] = relu(%w)\n}\n", "t.gir:3:24: error: use of undefined value %w"),
    BAD(H "  %y: f32[2, 3] = dropout(%x) {p = 1.2.3}\n}\n",
        "t.gir:3:36: error: malformed number '1.2.3'"),
    BAD(H "  %y: f32[2, 3] = dropout(%x) {p = 0x10}\n}\n",
        "t.gir:3:36: error: malformed number '0x10'"),
    BAD(H "  input %\"abc: f32[2]\n}\n", "t.gir:3:10: error: unterminated string"),
    BAD(H "  input %z: f32[99999999999999999999]\n}\n",
        "t.gir:3:17: error: integer 99999999999999999999 does not fit in 64 bits"),
    BAD(H "  %y: f32[6] = reshape(%x) {shape = [-9223372036854775809]}\n}\n",
        "t.gir:3:38: error: integer -9223372036854775809 does not fit in 64 bits"),
    BAD(H "  input %z: f32[3, 0]\n}\n", "t.gir:3:20: error: dimensions must be positive, got 0"),
    BAD(H "  input %z: f32[-4]\n}\n", "t.gir:3:17: error: dimensions must be positive, got -4"),
    BAD(H "  input %z: f32[1, 1, 1, 1, 1, 1, 1, 1, 1]\n}\n",
        "t.gir:3:41: error: a type has at most 8 dimensions"),
    BAD(H "  input %z: f32[2.5]\n}\n", "t.gir:3:17: error: expected a dimension"),
    BAD(H "  input %x: f32[2]\n}\n", "t.gir:3:9: error: redefinition of %x"),
    BAD(H "  %y: f32[2], %y: f32[2] = relu(%x)\n}\n", "t.gir:3:15: error: redefinition of %y"),
    BAD(H "  %y: f32[2, 3] = relu(%x) junk\n}\n",
        "t.gir:3:28: error: unexpected 'junk' at end of line"),
    BAD(H "  inptu %z: f32[2]\n}\n",
        "t.gir:3:3: error: unknown statement 'inptu'; expected input, param, buffer, state, "
        "output, loss, update, fused or a node (%name: TYPE = op(...))"),
    BAD(H "\0\n}\n", "t.gir:3:1: error: expected a statement, found byte 0x00"),
    BAD(H "  input %z: f32[2]\0\n}\n", "t.gir:3:19: error: unexpected byte 0x00 at end of line"),
    BAD(H "  param %w: f32[2] = unifrom(0, 1)\n}\n",
        "t.gir:3:22: error: unknown initializer 'unifrom'; did you mean 'uniform'?"),
    BAD(H "  param %w: f32[2] = uniform 0, 1\n}\n", "t.gir:3:30: error: expected '(' after 'uniform'"),
    BAD(H "  param %w: f32[2] = normal(0 1)\n}\n",
        "t.gir:3:31: error: expected ',' between the initializer's arguments"),
    BAD(H "  param %w: f32[2] = uniform(1e999, 1)\n}\n",
        "t.gir:3:30: error: number 1e999 is out of range"),
    BAD(H "  param %w: f32[2]\n}\n",
        "t.gir:3:19: error: expected '=' and an initializer after the type"),
    BAD(H "  input %\"a\\qb\": f32[2]\n}\n", "t.gir:3:12: error: unknown escape '\\q' in a string"),
    BAD(H "  input %\"a\\x00\": f32[2]\n}\n", "t.gir:3:12: error: a string cannot hold a NUL byte"),
    BAD(H "  input %\"a\\xZ1\": f32[2]\n}\n", "t.gir:3:12: error: \\x needs two hex digits"),
    BAD(H "  input %\"a\0b\": f32[2]\n}\n", "t.gir:3:12: error: a string cannot hold a NUL byte"),
    BAD(H "  %y: f32[2, 3] = dropout(%x) {p = 0.5, p = 0.5}\n}\n",
        "t.gir:3:41: error: duplicate attribute p"),
    BAD(H "  %y: f32[2, 3] = dropout(%x) {p = 0.5\n}\n",
        "t.gir:3:39: error: expected '}' after the attributes"),
    BAD(H "  %y: f32[2, 3] = dropout(%x) {p 0.5}\n}\n",
        "t.gir:3:34: error: expected '=' after the attribute name"),
    BAD(H "  %y: f32[6] = reshape(%x) {shape = [6, 1.5]}\n}\n",
        "t.gir:3:41: error: expected an integer in the list"),
    BAD(H "  %y: f32[6] = reshape(%x) {shape = [6}\n}\n",
        "t.gir:3:39: error: expected ']' after the list"),
    BAD(H "  %y: f32[2, 3] = add(%x %x)\n}\n", "t.gir:3:26: error: expected ')' after the operands"),
    BAD(H "  %y: f32[2, 3] relu(%x)\n}\n", "t.gir:3:17: error: expected '=' after the result type"),
    BAD(H "  %y f32[2]\n}\n", "t.gir:3:6: error: expected ':' after the value name"),
    BAD(H "  % y: f32[2] = relu(%x)\n}\n", "t.gir:3:3: error: expected a name after '%'"),
    BAD(H "  %y: f32[2, 3] = (%x)\n}\n", "t.gir:3:19: error: expected an op name after '='"),
    BAD(H "  %y: f32[2, 3] = relu %x\n}\n", "t.gir:3:24: error: expected '(' after the op name"),
    BAD(H "  input %z: f32[2] @file.net:x:1\n}\n", "t.gir:3:30: error: expected a line number"),
    BAD(H "  input %z: f32[2] @:1:1\n}\n", "t.gir:3:21: error: expected a file name after '@'"),
    BAD(H "  input %z: f32[2] @f.net 1:1\n}\n",
        "t.gir:3:27: error: expected ':' and a line number after the file name"),
    BAD(H "  input %z: f32[2] @f.net:1:99999999999\n}\n", "t.gir:3:29: error: expected a column number"),
    BAD(H "  output o %x\n}\n", "t.gir:3:12: error: expected '=' after the output name"),
    BAD(H "  output o = %nope\n}\n", "t.gir:3:14: error: use of undefined value %nope"),
    BAD(H "  loss %x\n  loss %x\n}\n", "t.gir:4:3: error: a graph has at most one loss"),
    BAD(H "  input %z: [2]\n}\n", "t.gir:3:13: error: expected a type such as f32[2, 3]"),
    BAD(H "  input %z: f32(2)\n}\n", "t.gir:3:16: error: expected '[' after the dtype"),
    BAD(H "  [[[[[[[[[[[[\n}\n", "t.gir:3:3: error: expected a statement, found '['"),
    BAD(H "  param %w: f32[2] = zeros shard w: f32[4], axis = 0, start = 2)\n}\n",
        "t.gir:3:34: error: expected '(' after 'shard'"),
    BAD(H "  param %w: f32[2] = zeros shard(: f32[4], axis = 0, start = 2)\n}\n",
        "t.gir:3:34: error: expected the name of the whole tensor after 'shard('"),
    BAD(H "  param %w: f32[2] = zeros shard(v f32[4], axis = 0, start = 2)\n}\n",
        "t.gir:3:36: error: expected ':' and the whole tensor's type after its name"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], start = 2, axis = 0)\n}\n",
        "t.gir:3:43: error: expected ', axis = ' in the shard"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], axis = 0)\n}\n",
        "t.gir:3:53: error: expected ', start = ' in the shard"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], axis = 8, start = 2)\n}\n",
        "t.gir:3:52: error: shard axis 8 is out of range"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], axis = 0, start = -2)\n}\n",
        "t.gir:3:63: error: shard start -2 is out of range"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], axis = 0, start = 2.0)\n}\n",
        "t.gir:3:63: error: expected the shard's start"),
    BAD(H "  param %w: f32[2] = zeros shard(v: f32[4], axis = 0, start = 2\n}\n",
        "t.gir:3:64: error: expected ')' after the shard"),
    BAD(H "  param %w: f32[2] = zeros from w\n}\n",
        "t.gir:3:33: error: expected the quoted name after 'from'"),
    BAD(H "  param %w: f32[2] = zeros from \"w\n}\n", "t.gir:3:33: error: unterminated string"),
    BAD(H "  param %w: f32[2] = zeros from \"w\" from \"v\"\n}\n",
        "t.gir:3:37: error: unexpected 'from' at end of line"),
    BAD(H "  input %w: f32[2] shard(v: f32[4], axis = 0, start = 2)\n}\n",
        "t.gir:3:20: error: unexpected 'shard' at end of line"),
};

static void test_bad_texts(void)
{
    int n = (int)(sizeof bad_cases / sizeof *bad_cases);
    CHECK(n >= 25, "only %d malformed texts", n);
    for (int i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        diag d;
        diag_init(&d);
        char buf[1024];
        ir_graph *g = parse_text(c->text, c->len, &d);
        CHECK(!g, "case %d parsed: %s", i, c->text);
        CHECK(strcmp(first_diag(&d, buf, sizeof buf), c->expected) == 0,
              "case %d gives\n    %s\n  instead of\n    %s", i, buf, c->expected);
        ir_graph_free(g);
        diag_free(&d);
    }
}

/* After an error the parser goes on at the next line; a broken definition still
 * defines its name, so its uses give no further errors. */
static void test_recovery(void)
{
    const char *text = "graph g {\n"
                       "  input %x: f32[2]\n"
                       "  %a: f32[2] = rleu(%x)\n"          /* 3: unknown op */
                       "  %b: f32[2] = relu(%a)\n"          /* fine: %a is known */
                       "  input %y: f33[2]\n"               /* 5: unknown dtype */
                       "  %c: f32[2] = add(%b, %y) {k = }\n" /* 6: bad attribute value */
                       "  output o = %c\n"
                       "  param %w: f32[2] = zeros @\"x.net:1:1\n" /* 8: unterminated */
                       "}\n";
    diag d;
    diag_init(&d);
    ir_graph *g = parse_text(text, strlen(text), &d);
    CHECK(!g, "a text with errors parsed");
    CHECK(d.nerrors == 4, "expected 4 errors, got %d", d.nerrors);
    int lines[] = {3, 5, 6, 8};
    for (int i = 0; i < 4 && i < d.n; i++)
        CHECK(d.entries[i].loc.line == lines[i], "error %d is on line %d, not %d", i,
              d.entries[i].loc.line, lines[i]);
    if (d.n >= 3)
        CHECK(strcmp(d.entries[2].msg, "expected an attribute value: a number or a list of "
                                       "integers") == 0, "the attribute error reads: %s",
              d.entries[2].msg);
    /* the source is registered: diag_print quotes the line with a caret */
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    diag_print(&d, f);
    fclose(f);
    CHECK(strstr(out, "t.gir:3:16: error: unknown op 'rleu'; did you mean 'relu'?\n"
                      "      %a: f32[2] = rleu(%x)\n"
                      "                   ^\n"), "the caret is missing or misplaced:\n%s", out);
    free(out);
    diag_free(&d);

    /* CRLF line ends, comments and blank lines are fine */
    const char *crlf = "# gnc IR\r\n\r\ngraph g { # the model\r\n  input %x: f32[2]\r\n"
                       "  # a comment line\r\n  %y: f32[2] = relu(%x) # trailing\r\n}\r\n";
    diag_init(&d);
    g = parse_text(crlf, strlen(crlf), &d);
    char buf[512];
    CHECK(g && ir_verify(g, &d) == 0, "CRLF text: %s", first_diag(&d, buf, sizeof buf));
    ir_graph_free(g);
    diag_free(&d);
}

/* ---- the verifier ---- */

static void expect_verify(ir_graph *g, int nerrors, const char *expected, const char *what)
{
    diag d;
    diag_init(&d);
    char buf[1024];
    int n = ir_verify(g, &d);
    CHECK(n == nerrors, "%s: %d problems instead of %d (first: %s)", what, n, nerrors,
          first_diag(&d, buf, sizeof buf));
    CHECK(n == d.nerrors, "%s: ir_verify returned %d but reported %d", what, n, d.nerrors);
    CHECK(strcmp(first_diag(&d, buf, sizeof buf), expected) == 0,
          "%s gives\n    %s\n  instead of\n    %s", what, buf, expected);
    diag_free(&d);
    ir_graph_free(g);
}

static void test_verify(void)
{
    ir_graph *g = build_cnn();
    ir_value *relu = ir_find_value(g, "relu");
    relu->type.dims[3] = 9;
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): declared type f32[4, 8, 8, 9] "
                  "but operands give f32[4, 8, 8, 8]", "wrong declared type");

    g = build_cnn();
    ir_node *n = find_node(g, "relu");
    ir_erase(g, n);
    ir_insert_before(g, g->head, n);
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): operand %bn is used before its "
                  "definition", "use before definition");

    g = build_cnn();
    ir_graph *other = ir_graph_new("other");
    ir_value *stranger = ir_add_input(other, "stranger", T(IR_F32, 1, 2, 0, 0, 0), (ir_loc){0});
    find_node(g, "relu")->in[0] = stranger;
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): operand %stranger is not defined "
                  "in the graph", "operand from another graph");
    ir_graph_free(other);

    g = build_cnn();
    ir_erase(g, find_node(g, "bn"));
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): operand %bn is not defined in "
                  "the graph", "operand of an erased node");

    g = build_cnn();
    n = find_node(g, "relu");
    n->in[0] = n->out[0];
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu) uses its own result %relu",
                  "a node using its own result");

    g = build_cnn();
    n = find_node(g, "stem");
    n->nattrs = 3; /* groups was last */
    expect_verify(g, 1, "m.net:5:9: error: node %stem (conv2d): conv2d is missing attribute "
                  "'groups'", "missing attribute");

    g = build_cnn();
    n = find_node(g, "stem");
    n->attrs[3].kind = IR_ATTR_FLOAT;
    n->attrs[3].f = 1;
    expect_verify(g, 1, "m.net:5:9: error: node %stem (conv2d): conv2d attribute 'groups' must "
                  "be an integer", "wrong attribute kind");

    g = build_cnn();
    ir_set_int(g, find_node(g, "stem"), "bogus", 1);
    expect_verify(g, 1, "m.net:5:9: error: node %stem (conv2d): conv2d has no attribute 'bogus'",
                  "unknown attribute");

    g = build_cnn();
    int64_t huge[2] = {INT64_MAX / 2 + 1, 1};
    ir_set_ints(g, find_node(g, "stem"), "dilation", 2, huge);
    expect_verify(g, 1, "m.net:5:9: error: node %stem (conv2d): conv2d kernel 3x3 does not fit input "
                  "f32[4, 1, 8, 8] with padding 1", "dilation that would overflow");

    g = build_cnn();
    int64_t wide[2] = {INT64_MAX, 2}, dil[2] = {2, 1};
    ir_set_ints(g, find_node(g, "pool"), "kernel", 2, wide);
    ir_set_ints(g, find_node(g, "pool"), "dilation", 2, dil);
    expect_verify(g, 1, "m.net:7:20: error: node %pool (maxpool2d): maxpool2d window "
                  "9223372036854775807x2 does not fit input f32[4, 8, 8, 8]",
                  "pooling window that would overflow");

    g = build_cnn();
    int64_t pads[2] = {INT64_MAX / 2 + 1, 0};
    ir_set_ints(g, find_node(g, "pool"), "pad", 2, pads);
    expect_verify(g, 1, "m.net:7:20: error: node %pool (maxpool2d): maxpool2d pad "
                  "(4611686018427387904) must be at most half the kernel (2)",
                  "pooling pad that would overflow");

    g = build_cnn();
    int64_t big[4] = {INT64_MAX / 2, 4, 4, 4};
    ir_set_ints(g, find_node(g, "flat"), "shape", 4, big);
    expect_verify(g, 1, "m.net:8:20: error: node %flat (reshape): reshape of f32[4, 8, 1, 1] to 4 "
                  "dimensions overflows", "reshape whose element count would overflow");

    g = build_cnn();
    g->loss = ir_find_value(g, "fc");
    expect_verify(g, 1, "m.net:9:9: error: the loss %fc must be an f32 scalar (f32[]), got "
                  "f32[4, 10]", "non-scalar loss");

    g = build_cnn();
    g->loss = ir_value_new(g, "nowhere", (ir_loc){0});
    expect_verify(g, 1, "gnc: error: the loss %nowhere is not defined in the graph",
                  "undefined loss");

    g = build_cnn();
    n = find_node(g, "relu");
    n->out[0]->def_index = 1;
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): result %relu records another node "
                  "or index (1) as its definition", "wrong def_index");

    g = build_cnn();
    n = find_node(g, "relu");
    n->next->prev = n->prev;
    expect_verify(g, 1, "m.net:7:20: error: node list is broken: node %pool (maxpool2d) does not "
                  "link back to node %relu (relu) before it", "broken prev link");

    g = build_cnn();
    g->nnodes++;
    expect_verify(g, 1, "gnc: error: the graph counts 12 nodes but its list holds 11",
                  "wrong node count");

    g = build_cnn();
    g->inputs[0]->init = (ir_init){IR_INIT_ONES, 0, 0, 0, NULL};
    expect_verify(g, 1, "m.net:2:5: error: input %image has an initializer",
                  "input with an initializer");

    g = build_cnn();
    g->params[0]->init = (ir_init){IR_INIT_NONE, 0, 0, 0, NULL};
    expect_verify(g, 1, "m.net:5:9: error: param %stem.weight has no initializer",
                  "param without an initializer");

    g = build_cnn();
    g->params[1]->init = (ir_init){IR_INIT_UNIFORM, 1, 1, 0, NULL};
    expect_verify(g, 1, "m.net:5:9: error: param %stem.bias: uniform(a, b) needs a < b, got "
                  "uniform(1, 1)", "empty uniform range");

    g = build_cnn();
    g->params[6]->init = (ir_init){IR_INIT_NORMAL, 0, -1, 0, NULL};
    expect_verify(g, 1, "m.net:9:9: error: param %fc.weight: normal(mean, std) needs std >= 0, "
                  "got normal(0, -1)", "negative std");

    g = build_cnn();
    g->params[4]->type.dtype = IR_I32;
    expect_verify(g, 2, "m.net:6:9: error: buffer %bn.running_mean must have a floating-point "
                  "type, got i32[8]", "integer buffer");

    g = build_cnn();
    ir_add_output(g, "logits", ir_find_value(g, "relu"), at(14, 5));
    expect_verify(g, 1, "m.net:14:5: error: output name logits is used twice",
                  "duplicate output name");

    g = build_cnn();
    ir_add_output(g, "ghost", ir_value_new(g, "ghost", (ir_loc){0}), at(14, 5));
    expect_verify(g, 1, "m.net:14:5: error: output ghost refers to %ghost, which is not defined "
                  "in the graph", "output of an undefined value");

    g = build_cnn();
    ir_find_value(g, "gap")->name = "pool";
    expect_verify(g, 1, "m.net:8:9: error: node %pool (global_avgpool): result %pool: another "
                  "value has the same name", "duplicate value name");

    g = build_cnn();
    ir_find_value(g, "label")->type.dims[0] = 0;
    expect_verify(g, 1, "m.net:3:5: error: input %label has type i32[0]: dimensions must be "
                  "positive", "zero dimension");

    g = build_cnn();
    ir_find_value(g, "relu")->id = 99999;
    expect_verify(g, 1, "m.net:7:9: error: node %relu (relu): result %relu has id 99999, outside "
                  "0..20", "id out of range");

    /* a cycle in the list ends the walk instead of hanging */
    g = build_cnn();
    g->tail->next = g->head;
    expect_verify(g, 1, "m.net:11:20: error: node list is broken: node %scaled (mul) links "
                  "back to the earlier node %stem (conv2d)", "cyclic list");

    /* several problems at once: each one reported, and the count returned */
    g = build_cnn();
    ir_find_value(g, "relu")->type.dims[3] = 9;
    g->loss = ir_find_value(g, "fc");
    find_node(g, "stem")->nattrs = 3;
    diag d;
    diag_init(&d);
    CHECK(ir_verify(g, &d) == 3, "three problems are not three");
    diag_free(&d);
    ir_graph_free(g);
}

/* Text that parses but does not verify: the verifier speaks of the source the
 * text records, or of no place when it records none. */
static void test_verify_text(void)
{
    static const struct {
        const char *text, *expected;
    } cases[] = {
        {"graph g {\n  input %x: f32[2]\n  %y: f32[3] = relu(%x) @m.net:4:2\n}\n",
         "m.net:4:2: error: node %y (relu): declared type f32[3] but operands give f32[2]"},
        {"graph g {\n  input %x: f32[9223372036854775807, 2]\n  %y: f32[2] = relu(%x)\n}\n",
         "gnc: error: input %x has type f32[9223372036854775807, 2], more than 2^37 elements"},
        {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = relu(%x, %x)\n}\n",
         "gnc: error: node %y (relu): relu takes 1 to 1 operands, got 2"},
        {"graph g {\n  input %x: f32[2]\n  %y: f32[2] = dropout(%x) {p = 0.5, q = 1}\n}\n",
         "gnc: error: node %y (dropout): dropout has no attribute 'q'"},
        {"graph g {\n  input %x: f32[2]\n  param %w: i32[2] = zeros @\"w s.net\":1:1\n}\n",
         "w s.net:1:1: error: param %w must have a floating-point type, got i32[2]"},
        {"graph g {\n  input %x: f32[2]\n  output o = %x\n  output o = %x @a.net:9:9\n}\n",
         "a.net:9:9: error: output name o is used twice"},
        {"graph g {\n  input %x: f32[2]\n  param %w: f32[2] = none\n  loss %x\n}\n",
         "gnc: error: param %w has no initializer"},
        {"graph g {\n  input %i: i32[2]\n  input %w: f32[4, 3]\n  %y: f32[2, 3] = embedding(%i, %w) "
         "{padding_idx = -1, shard_start = 7, shard_of = 10}\n}\n",
         "gnc: error: node %y (embedding): embedding shard_start 7 and shard_of 10 do not place a "
         "table of 4 rows in the whole (shard_of 0: the table is whole, and shard_start 0)"},
        {"graph g {\n  input %i: i32[2]\n  input %w: f32[4, 3]\n  %y: f32[2, 3] = embedding(%i, %w) "
         "{padding_idx = 9, shard_start = 4, shard_of = 8}\n}\n",
         "gnc: error: node %y (embedding): embedding padding_idx 9 is neither -1 nor a row of the 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        diag d;
        diag_init(&d);
        char buf[512];
        ir_graph *g = parse_text(cases[i].text, strlen(cases[i].text), &d);
        CHECK(g, "verify case %zu does not parse: %s", i, first_diag(&d, buf, sizeof buf));
        if (g) {
            CHECK(ir_verify(g, &d) > 0, "verify case %zu verifies", i);
            CHECK(strcmp(first_diag(&d, buf, sizeof buf), cases[i].expected) == 0,
                  "verify case %zu gives\n    %s\n  instead of\n    %s", i, buf,
                  cases[i].expected);
            ir_graph_free(g);
        }
        diag_free(&d);
    }
}

/* IR text written before an op gained an attribute (ops.def's defaults):
 * cross_entropy without label_smoothing, ignore_index and split, embedding
 * without padding_idx and its shard, maxpool2d without ceil_mode, reduce_max without ties
 * read, verify and print with the defaults; an attribute without a default
 * is still required. */
static void test_attr_defaults(void)
{
    static const char old[] =
        "graph g {\n"
        "  input %x: f32[4, 1, 4, 4]\n"
        "  input %idx: i32[4]\n"
        "  input %label: i32[4]\n"
        "  param %t: f32[7, 16] = zeros\n"
        "  %p: f32[4, 1, 2, 2] = maxpool2d(%x) {kernel = [2, 2], stride = [2, 2], "
        "pad = [0, 0], dilation = [1, 1]}\n"
        "  %f: f32[4, 4] = reshape(%p) {shape = [4, 4]}\n"
        "  %m: f32[4, 1] = reduce_max(%f) {axis = 1}\n"
        "  %e: f32[4, 16] = embedding(%idx, %t)\n"
        "  %ce: f32[] = cross_entropy(%e, %label)\n"
        "  loss %ce\n"
        "}\n";
    diag d;
    diag_init(&d);
    char buf[512];
    ir_graph *g = parse_text(old, sizeof old - 1, &d);
    CHECK(g && ir_verify(g, &d) == 0, "IR text without the later attributes: %s",
          first_diag(&d, buf, sizeof buf));
    if (g) {
        char *text = graph_text(g);
        CHECK(strstr(text, "{label_smoothing = 0.0, ignore_index = -100, split = 1}") &&
                  strstr(text, "{padding_idx = -1, shard_start = 0, shard_of = 0}") && strstr(text, "ceil_mode = 0}") &&
                  strstr(text, "{axis = 1, ties = 0}"),
              "the defaults print otherwise:\n%s", text);
        free(text);
        ir_graph_free(g);
    }
    diag_free(&d);
    static const char no_default[] =
        "graph g {\n  input %x: f32[4, 4]\n  %m: f32[4, 1] = reduce_max(%x) {ties = 1}\n}\n";
    diag_init(&d);
    g = parse_text(no_default, sizeof no_default - 1, &d);
    CHECK(g && ir_verify(g, &d) > 0 &&
              strstr(first_diag(&d, buf, sizeof buf), "reduce_max is missing attribute 'axis'"),
          "an attribute without a default: %s", buf);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
}

/* ---- shards: slices of a whole tensor (tensor-parallel programs) ---- */

#define SHARDS \
    "# gnc IR\ngraph tp {\n" \
    "  input %x: f32[2, 4]\n" \
    "  param %w.shard0: f32[3, 4] = uniform(-0.5, 0.5) shard(w: f32[6, 4], axis = 0, start = 0) " \
    "@m.net:2:3\n" \
    "  param %w.shard1: f32[3, 4] = uniform(-0.5, 0.5) shard(w: f32[6, 4], axis = 0, start = 3) " \
    "from \"layers.0.q\\\"w\"\n" \
    "  state %\"v m\": f32[6, 2] = normal(0.0, 2.0) shard(\"v\\tw\": f32[6, 4], axis = 1, " \
    "start = 2)\n" \
    "  %y: f32[2, 3] = dense(%x, %w.shard0)\n" \
    "  %z: f32[2, 3] = dense(%x, %w.shard1) on 1\n" \
    "}\n"

/* The text form of shards round-trips and verifies; broken slices get the
 * verifier's message; a shard's initial values are its slice of the whole's. */
static void test_shards(void)
{
    diag d;
    diag_init(&d);
    char buf[512];
    ir_graph *g = parse_text(SHARDS, strlen(SHARDS), &d);
    CHECK(g, "the shard sample does not parse: %s", first_diag(&d, buf, sizeof buf));
    if (!g) {
        diag_free(&d);
        return;
    }
    CHECK(ir_verify(g, &d) == 0, "the shard sample does not verify: %s",
          first_diag(&d, buf, sizeof buf));
    check_canonical("the shard sample", SHARDS, strlen(SHARDS));
    ir_value *w1 = ir_find_value(g, "w.shard1"), *m = ir_find_value(g, "v m");
    CHECK(w1 && w1->shard.of && strcmp(w1->shard.of, "w") == 0 && w1->shard.axis == 0 &&
          w1->shard.start == 3 && ir_type_eq(&w1->shard.type, &(ir_type){IR_F32, 2, {6, 4}}),
          "a shard did not come back");
    CHECK(m && m->kind == IR_VALUE_STATE && m->shard.of && strcmp(m->shard.of, "v\tw") == 0 &&
          m->shard.axis == 1 && m->shard.start == 2, "a quoted state shard did not come back");
    CHECK(!ir_find_value(g, "x")->shard.of && !ir_find_value(g, "y")->shard.of,
          "a value that is no shard has one");
    CHECK(w1 && w1->source && strcmp(w1->source, "layers.0.q\"w") == 0 &&
          !ir_find_value(g, "w.shard0")->source, "a parameter's source did not come back");
    ir_graph *g2 = round_trip(g, "shards");
    ir_graph_free(g2);

    /* every element of a shard is its element of the whole, for both kinds of
       random initializers and a shard along an inner axis */
    static const ir_init inits[2] = {{IR_INIT_UNIFORM, -0.5, 0.5, 0, NULL},
                                     {IR_INIT_NORMAL, 0.0, 2.0, 0, NULL}};
    ir_graph *whole = ir_graph_new("whole");
    for (int k = 0; k < 2; k++) {
        ir_value *v = k == 0 ? ir_find_value(g, "w.shard0") : w1;
        ir_value *s = k == 0 ? v : m;
        const char *of = s->shard.of;
        ir_value *wv = ir_find_value(whole, of);
        if (!wv)
            wv = ir_add_param(whole, IR_VALUE_PARAM, of, s->shard.type, inits[k], (ir_loc){0});
        float all[24], part[12];
        ir_init_fill(wv, 7, all);
        for (int j = 0; j < 2; j++) {
            const ir_value *sh = j == 0 ? s : w1;
            if (j == 1 && k == 1)
                break;
            ir_init_fill(sh, 7, part);
            int same = 1;
            for (int64_t i = 0; i < ir_type_numel(&sh->type); i++)
                same &= part[i] == all[ir_shard_index(sh, i)];
            CHECK(same, "shard %s does not start as its slice of %s", sh->name, of);
        }
        if (k == 1) { /* [6, 2] at 2 along axis 1: rows of the whole's columns 2 and 3 */
            CHECK(ir_shard_index(m, 0) == 2 && ir_shard_index(m, 1) == 3 &&
                  ir_shard_index(m, 2) == 6 && ir_shard_index(m, 11) == 23,
                  "shard indices along an inner axis are wrong");
            ir_init_fill(m, 8, part);
            CHECK(part[0] != all[2], "a shard's values do not depend on the seed");
        }
    }
    ir_graph_free(whole);
    ir_graph_free(g);

    /* zero_row (nn.Embedding's padding_idx): that row 0 after the draw, the
       others as without it, in a shard too; printed and parsed back; a row
       outside the tensor refused */
    static const char ZERO_ROW[] =
        "# gnc IR\ngraph z {\n  param %e: f32[4, 3] = normal(0.0, 1.0) zero_row(2)\n  output y = %e\n}\n";
    static const char ZERO_ROW_SHARD[] =
        "# gnc IR\n"
        "graph z {\n"
        "  param %e.shard1: f32[2, 3] = normal(0.0, 1.0) zero_row(2) shard(e: f32[4, 3], "
        "axis = 0, start = 2)\n"
        "  output y = %e.shard1\n"
        "}\n";
    g = parse_text(ZERO_ROW, strlen(ZERO_ROW), &d);
    ir_graph *gs = parse_text(ZERO_ROW_SHARD, strlen(ZERO_ROW_SHARD), &d);
    CHECK(g && gs && ir_verify(g, &d) == 0 && ir_verify(gs, &d) == 0,
          "the zero_row samples do not verify: %s", first_diag(&d, buf, sizeof buf));
    if (g && gs) {
        check_canonical("the zero_row sample", ZERO_ROW, strlen(ZERO_ROW));
        check_canonical("the zero_row shard sample", ZERO_ROW_SHARD, strlen(ZERO_ROW_SHARD));
        ir_value *e = ir_find_value(g, "e");
        float with[12], part[6], without[12];
        ir_init_fill(e, 5, with);
        ir_init_fill(ir_find_value(gs, "e.shard1"), 5, part);
        e->init.zero_row = 0;
        ir_init_fill(e, 5, without);
        int ok = 1;
        for (int i = 0; i < 12; i++)
            ok &= with[i] == (i / 3 == 2 ? 0.0f : without[i]) && without[i] != 0.0f;
        for (int i = 0; i < 6; i++)
            ok &= part[i] == with[6 + i];
        CHECK(ok, "zero_row(2) does not zero row 2 alone, in the whole and its shard");
    }
    if (g)
        ir_graph_free(g);
    if (gs)
        ir_graph_free(gs);
    static const char BAD_ROW[] = "graph z {\n  param %e: f32[4, 3] = zeros zero_row(4)\n"
                                  "  output y = %e\n}\n";
    diag_free(&d);
    diag_init(&d);
    g = parse_text(BAD_ROW, strlen(BAD_ROW), &d);
    CHECK(g && ir_verify(g, &d) != 0 &&
              strstr(first_diag(&d, buf, sizeof buf), "zero_row(4) is not a row of it"),
          "zero_row(4) of f32[4, 3] was not refused: %s", buf);
    if (g)
        ir_graph_free(g);

    /* slices that do not fit */
    static const struct {
        const char *param, *expected;
    } bad[] = {
        {"param %v: f32[3, 4] = zeros shard(u: f32[6, 4], axis = 0, start = 4)",
         "gnc: error: param %v: f32[3, 4] is no slice of u: f32[6, 4] at 4 along axis 0"},
        {"param %v: f32[3, 4] = zeros shard(u: f32[6, 5], axis = 0, start = 0)",
         "gnc: error: param %v: f32[3, 4] is no slice of u: f32[6, 5] at 0 along axis 0"},
        {"param %v: f32[3, 4] = zeros shard(u: f32[6, 4], axis = 2, start = 0)",
         "gnc: error: param %v: f32[3, 4] is no slice of u: f32[6, 4] at 0 along axis 2"},
        {"buffer %v: f32[3, 4] = zeros shard(u: f32[6], axis = 0, start = 0)",
         "gnc: error: buffer %v: f32[3, 4] is no slice of u: f32[6] at 0 along axis 0"},
        {"param %v: f32[3, 4] = zeros shard(u: f32[9223372036854775807, 4], axis = 0, "
         "start = 0)", "gnc: error: param %v has type f32[9223372036854775807, 4], more than "
         "2^37 elements"},
        {"param %v: f32[3, 4] = zeros shard(w: f32[3, 8], axis = 1, start = 0)",
         "gnc: error: shards %w.shard0 and %v of w disagree on its type or their axis"},
        {"param %w: f32[6, 4] = zeros",
         "gnc: error: %w has the name of the whole tensor that %w.shard0 is a shard of"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[1024];
        snprintf(text, sizeof text, "graph tp {\n  param %%w.shard0: f32[3, 4] = zeros shard(w: "
                 "f32[6, 4], axis = 0, start = 0)\n  %s\n}\n", bad[i].param);
        ir_graph *b = parse_text(text, strlen(text), &d);
        CHECK(b, "bad shard %zu does not parse: %s", i, first_diag(&d, buf, sizeof buf));
        if (b)
            expect_verify(b, 1, bad[i].expected, "a shard that does not fit");
    }
    diag_free(&d);
}

/* Verifier messages must outlive the graph: gnc frees a graph that fails before
 * it prints the diagnostics. */
static void test_verify_after_free(void)
{
    ir_graph *g = build_cnn();
    ir_find_value(g, "relu")->type.dims[3] = 9;
    diag d;
    diag_init(&d);
    ir_verify(g, &d);
    ir_graph_free(g);
    char buf[512];
    CHECK(strncmp(first_diag(&d, buf, sizeof buf), "m.net:7:9: error:", 17) == 0,
          "the message lost its file: %s", buf);
    diag_free(&d);
}

/* Any stage's message outlives the string its location names the file by, and
 * a source registered after the message still gives it its quoted line. */
static void test_diag_owns_file(void)
{
    char *file = strdup("owned.net");
    diag d;
    diag_init(&d);
    diag_error(&d, (ir_loc){file, 2, 3}, "something is wrong");
    free(file);
    diag_add_source(&d, "owned.net", "line one\nab cd\n", 15);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    diag_print(&d, f);
    fclose(f);
    CHECK(strcmp(buf, "owned.net:2:3: error: something is wrong\n    ab cd\n      ^\n") == 0,
          "the message prints otherwise:\n%s", buf);
    free(buf);
    diag_free(&d);
}

/* ---- robustness ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

typedef struct {
    FILE *devnull;
    int parsed, unstable;
} fuzz_stats;

/* One input through everything a user of the text form would do with it; a
 * graph that parses must print to a text that parses and prints the same. */
static void feed(fuzz_stats *st, const char *text, size_t len)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse("fuzz.gir", text, len, &d);
    if (g) {
        st->parsed++;
        ir_verify(g, &d);
        char *a = graph_text(g);
        ir_graph *g2 = ir_parse("again.gir", a, strlen(a), &d);
        char *b = g2 ? graph_text(g2) : NULL;
        if (!b || strcmp(a, b) != 0) {
            if (st->unstable++ < 3)
                fprintf(stderr, "unstable round trip of\n%.*s\n--- printed as\n%s", (int)len,
                        text, a);
        }
        free(a);
        free(b);
        ir_graph_free(g2);
        ir_graph_free(g);
    }
    diag_print(&d, st->devnull);
    diag_free(&d);
}

static void test_robustness(void)
{
    static const char *const tokens[] = {
        "%", "\"", "\\", "[", "]", "{", "}", "(", ")", ",", ":", "=", "@", "#", "\n", " ",
        "99999999999999999999", "-9223372036854775808", "1e999", "nan", "-0.0", "%\"", "\\x",
        "[[[[[[[[[[", "f32[", "relu(", "graph g {\n", "}\n", "input %q: f32[1]\n", "\xff\xfe",
        "0", "-1", "1.5", "@a.net:1:1", "output o = %x\n", "loss %x\n", ", %z: f32[2]",
        " shard(", "shard(w: f32[4], axis = 0, start = 2)", ", axis = ", ", start = ",
    };
    fuzz_stats st = {fopen("/dev/null", "w"), 0, 0};
    if (!st.devnull)
        abort();
    ir_graph *g = build_cnn();
    char *cnn = graph_text(g);
    ir_graph_free(g);
    const char *hand = "# gnc IR\ngraph \"q\\tg\" {\n  input %x: f32[2, 3] @\"a b.net\":1:2\n"
                       "  param %w: f32[3] = normal(0.0, 1e-2) shard(\"w\\x01\": f32[4, 3], "
                       "axis = 0, start = 1)\n"
                       "  %y: f32[2, 3], %\"z\\x01\": f32[] = mul(%x, %w) {k = [1, -2], f = 0.5}\n"
                       "  output \"o\" = %y\n  loss %\"z\\x01\"\n}\n";
    const char *bases[] = {cnn, hand};

    /* every truncation */
    for (int b = 0; b < 2; b++) {
        size_t len = strlen(bases[b]);
        for (size_t i = 0; i <= len; i++) {
            char *copy = malloc(i ? i : 1); /* exactly i bytes: ASan sees any overread */
            memcpy(copy, bases[b], i);
            feed(&st, copy, i);
            free(copy);
        }
    }
    CHECK(st.parsed == 4, "%d truncations parsed; only the two whole texts should, with or "
          "without their last newline", st.parsed);

    /* seeded random mutations */
    rng_state = 0x9e3779b97f4a7c15ull;
    int runs = 5000;
    for (int r = 0; r < runs; r++) {
        const char *base = bases[rnd() % 2];
        size_t len = strlen(base), cap = len + 512;
        char *s = malloc(cap);
        memcpy(s, base, len);
        int nmut = 1 + (int)(rnd() % 4);
        for (int m = 0; m < nmut; m++) {
            size_t pos = len ? rnd() % (len + 1) : 0;
            switch (rnd() % 5) {
            case 0: /* overwrite a byte */
                if (pos < len)
                    s[pos] = (char)rnd();
                break;
            case 1: /* insert a byte */
                if (len + 1 < cap) {
                    memmove(s + pos + 1, s + pos, len - pos);
                    s[pos] = (char)rnd();
                    len++;
                }
                break;
            case 2: { /* delete a few bytes */
                size_t k = 1 + rnd() % 8;
                if (pos + k <= len) {
                    memmove(s + pos, s + pos + k, len - pos - k);
                    len -= k;
                }
                break;
            }
            case 3: { /* insert a token */
                const char *t = tokens[rnd() % (sizeof tokens / sizeof *tokens)];
                size_t k = strlen(t);
                if (len + k < cap) {
                    memmove(s + pos + k, s + pos, len - pos);
                    memcpy(s + pos, t, k);
                    len += k;
                }
                break;
            }
            default: { /* replace a digit by another, to make types and attributes lie */
                for (size_t i = pos; i < len; i++)
                    if (s[i] >= '0' && s[i] <= '9') {
                        s[i] = (char)('0' + rnd() % 10);
                        break;
                    }
            }
            }
        }
        char *exact = malloc(len ? len : 1);
        memcpy(exact, s, len);
        feed(&st, exact, len);
        free(exact);
        free(s);
    }
    CHECK(st.unstable == 0, "%d parsed inputs did not print back stably", st.unstable);
    CHECK(st.parsed > 10, "only %d mutants parsed: the mutations are too harsh to test "
          "the verifier", st.parsed);

    /* long lines, deep nesting, long names, many errors */
    size_t big = 20000;
    char *s = malloc(big + 64);
    memset(s, '[', big);
    feed(&st, s, big);
    int k = snprintf(s, 64, "graph g {\n  input %%x: f32[");
    for (size_t i = (size_t)k; i < big; i++)
        s[i] = "1, "[(i - (size_t)k) % 3];
    feed(&st, s, big);
    memcpy(s, "graph g {\n  input %", 19);
    memset(s + 19, 'n', big - 19);
    memcpy(s + big - 19, ": f32[1]\n}\n", 11);
    diag d;
    diag_init(&d);
    g = ir_parse("long.gir", s, big - 8, &d);
    CHECK(g && g->ninputs == 1 && strlen(g->inputs[0]->name) == big - 38,
          "a 20000-byte name does not parse");
    if (g) {
        ir_graph *g2 = round_trip(g, "long name");
        ir_graph_free(g2);
    }
    ir_graph_free(g);
    diag_free(&d);
    for (size_t i = 0; i < big; i++)
        s[i] = (char)(i % 7 == 6 ? '\n' : '?');
    diag_init(&d);
    g = ir_parse("junk.gir", s, big, &d);
    CHECK(!g && d.nerrors > 50 && d.n == 50, "junk reports %d errors, keeps %d", d.nerrors, d.n);
    diag_print(&d, st.devnull);
    diag_free(&d);
    ir_graph_free(g);
    free(s);
    free(cnn);
    fclose(st.devnull);
}

/* ops.def's UNARY table against the op table: each line names a unary op by
 * its name, with as many attributes as its schema has (all floats); X or Y
 * names its gradient op, NAME_grad, of the same attributes; every unary op
 * but dropout has a line and every gradient op of the unary kind is some
 * line's.  ir_grad_rule_of and ir_arith_attrs say the same. */
static void test_unary_table(void)
{
    int lines[IR_NOPS] = {0};
    static const struct {
        ir_op op;
        const char *name;
        int nattrs;
        char from;
    } table[] = {
#define OP(e, name, nmin, nmax, nout, attrs, traits)
#define UNARY(e, name, n, from) {IR_OP_##e, #name, n, #from[0]},
#include "ops.def"
#undef UNARY
#undef OP
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        ir_op op = table[i].op;
        const ir_op_info *info = &ir_ops[op];
        int nattrs = 0, floats = 1;
        for (const char *s = info->attrs; *s; s += *s == ',') {
            nattrs++;
            size_t k = strcspn(s, ":");
            floats &= strncmp(s + k, ":float", 6) == 0;
            s += strcspn(s, ",");
        }
        CHECK(strcmp(info->name, table[i].name) == 0 && ir_op_is(op, IR_UNARY),
              "UNARY line %s: the op is %s, %sunary", table[i].name, info->name,
              ir_op_is(op, IR_UNARY) ? "" : "not ");
        CHECK(nattrs == table[i].nattrs && floats && ir_arith_attrs(op) == nattrs,
              "UNARY line %s says %d attributes, the schema '%s' has %d%s", table[i].name,
              table[i].nattrs, info->attrs, nattrs, floats ? "" : " (not all floats)");
        lines[op]++;
        const ir_grad_rule *rule = ir_grad_rule_of(op);
        if (table[i].from == 'N') {
            CHECK(!rule, "UNARY line %s: NONE, but a gradient rule", table[i].name);
            continue;
        }
        char grad[64];
        snprintf(grad, sizeof grad, "%s_grad", info->name);
        int g = ir_op_lookup(grad);
        CHECK(g >= 0 && rule && (int)rule->grad == g && rule->from_result == (table[i].from == 'Y'),
              "UNARY line %s: its gradient %s and the rule disagree", table[i].name, grad);
        if (g < 0)
            continue;
        CHECK(ir_op_is((ir_op)g, IR_UNARY_GRAD) && strcmp(ir_ops[g].attrs, info->attrs) == 0 &&
                  ir_arith_attrs((ir_op)g) == nattrs,
              "%s: not a unary gradient of %s's attributes", grad, info->name);
        lines[g]++;
    }
    for (int op = 0; op < IR_NOPS; op++)
        if ((ir_op_is((ir_op)op, IR_UNARY) && op != IR_OP_DROPOUT) || ir_op_is((ir_op)op, IR_UNARY_GRAD))
            CHECK(lines[op] == 1, "%s: %d UNARY lines (one wanted)", ir_ops[op].name, lines[op]);
        else
            CHECK(lines[op] == 0 && ir_arith_attrs((ir_op)op) == -1,
                  "%s: not unary, yet in the UNARY table", ir_ops[op].name);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_ir SOURCE_DIR\n");
        return 2;
    }
    test_round_trip_cnn();
    test_quoted();
    test_floats();
    test_multi_result();
    test_shards();
    test_samples(argv[1]);
    test_bad_texts();
    test_recovery();
    test_verify();
    test_verify_text();
    test_attr_defaults();
    test_verify_after_free();
    test_diag_owns_file();
    test_robustness();
    test_unary_table();
    printf("test_ir: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
