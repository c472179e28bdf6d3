/* fe_export_onnx as a library call (frontend/onnx.h):
 *
 *   test_onnx_export WORK_DIR
 *
 * - out of memory is an error, never an abort: the n-th allocation fails, for
 *   every n, and each call returns -1 with "out of memory", leaves no file
 *   (nor a temporary one) and nothing it allocated (LeakSanitizer sees that
 *   in the sanitizer build); the call that runs out of failures writes the
 *   bytes an undisturbed call writes;
 * - refusals name the node (a training op) or say why (a loss, a shard), and
 *   leave no file;
 * - the values callback's floats are the initializers' bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "diag.h"
#include "frontend.h"
#include "onnx.h"

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static const char model[] =
    "model small(batch = 2) {\n"
    "    input x: f32[batch, 3, 8, 8]\n"
    "    y = relu(batchnorm(conv2d(x, 4, kernel = 3, pad = 1, name = \"c\"), name = \"bn\"))\n"
    "    y = maxpool2d(y, 2)\n"
    "    z = dense(flatten(y), 5, name = \"fc\")\n"
    "    output logits = z\n"
    "    output probs = softmax(gelu(z), axis = -1)\n"
    "}\n";

/* Every value of v is its index in the graph plus 1 / (1 + element), a
 * pattern the test can recompute; one buffer serves all. */
static float *vals;
static const float *values(void *ctx, const ir_value *v)
{
    (void)ctx;
    int64_t n = ir_type_numel(&v->type);
    for (int64_t i = 0; i < n; i++)
        vals[i] = (float)v->id + 1.0f / (float)(1 + i);
    return vals;
}

static ir_graph *load(const char *text)
{
    diag d;
    diag_init(&d);
    fe_options opt = {0};
    ir_graph *g = fe_load_string("small.net", text, strlen(text), &opt, &d);
    if (!g)
        diag_print(&d, stderr);
    diag_free(&d);
    return g;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* Whether the folder holds a file whose name starts with prefix. */
static int leftover(const char *dir, const char *prefix)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '^%s'", dir, prefix);
    return system(cmd) == 0;
}

static char *slurp(const char *path, size_t *len)
{
    const char *why;
    return base_read_file(path, len, &why);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_onnx_export WORK_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[900], ref[900], err[512];
    snprintf(path, sizeof path, "%s/oom.onnx", dir);
    snprintf(ref, sizeof ref, "%s/ref.onnx", dir);
    remove(path), remove(ref);
    vals = calloc(1 << 20, sizeof *vals);
    ir_graph *g = load(model);
    ir_graph *l = load("model lossy() {\n    input x: f32[4, 3]\n    input label: i32[4]\n"
                       "    output y = dense(x, 3)\n    loss cross_entropy(y, label)\n}\n");
    if (!g || !l || !vals)
        return 1;

    /* a loss: refused, nothing written (gnc export drops it first) */
    CHECK(fe_export_onnx(l, values, NULL, ref, err, sizeof err) == -1, "a loss was exported");
    CHECK(strstr(err, "lossy is a training graph (it has a loss)"), "%s", err);
    CHECK(!exists(ref), "a file after a refusal");
    ir_graph_free(l);

    /* the reference: the same call without failures */
    CHECK(fe_export_onnx(g, values, NULL, ref, err, sizeof err) == 0, "%s", err);
    size_t ref_len = 0, len = 0;
    char *want = slurp(ref, &ref_len);
    CHECK(want && ref_len > 0, "no reference file");

    /* the first 6 weights of c.weight (values 1 / (1 + i) above its id) are
       in the file as little-endian floats, byte for byte */
    const ir_value *w = ir_find_value(g, "c.weight");
    unsigned char le[24];
    for (int i = 0; i < 6; i++) {
        float f = (float)w->id + 1.0f / (float)(1 + i);
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int k = 0; k < 4; k++)
            le[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    int found = 0;
    for (size_t i = 0; want && i + sizeof le <= ref_len && !found; i++)
        found = memcmp(want + i, le, sizeof le) == 0;
    CHECK(found, "c.weight's values are not in the file");

    /* the n-th allocation fails, for every n */
    int n, done = 0;
    for (n = 1; n < 100000 && !done; n++) {
        base_alloc_fail_at(n);
        int rc = fe_export_onnx(g, values, NULL, path, err, sizeof err);
        int failed = base_alloc_failed();
        base_alloc_fail_at(0);
        if (!failed) {
            CHECK(rc == 0, "allocation %d: %s", n, err);
            done = 1;
            break;
        }
        if (rc == 0) { /* an allocation failed and was survived: the same bytes */
            char *got = slurp(path, &len);
            CHECK(got && len == ref_len && memcmp(got, want, len) == 0,
                  "allocation %d failed, and the file differs", n);
            base_free(got);
            remove(path);
            continue;
        }
        CHECK(strstr(err, "out of memory"), "allocation %d: %s", n, err);
        CHECK(!exists(path), "allocation %d: a file after a failure", n);
        CHECK(!leftover(dir, "oom.onnx.tmp"), "allocation %d: a temporary file left", n);
    }
    CHECK(done, "still failing after %d allocations", n);
    char *got = slurp(path, &len);
    CHECK(got && len == ref_len && memcmp(got, want, len) == 0,
          "the export after the failures differs from the reference");
    base_free(got);
    base_free(want);
    printf("%d allocations failed in turn\n", n - 1);

    /* an op without an exact ONNX form: refused, naming the node */
    ir_graph *t = load("model t() {\n    input x: f32[2, 3, 9, 8]\n"
                       "    output y = maxpool2d(x, 2, stride = 2, pad = 1, ceil_mode = true)\n}\n");
    if (t) {
        remove(path);
        CHECK(fe_export_onnx(t, values, NULL, path, err, sizeof err) == -1, "exported");
        CHECK(strstr(err, "small.net:3:16: node %maxpool2d0 (maxpool2d) has no ONNX form: "
                          "ONNX's MaxPool with ceil_mode gives 6 outputs along axis 2"), "%s", err);
        CHECK(!exists(path), "a file after a refusal");
        ir_graph_free(t);
    } else {
        failures++;
    }

    /* grouped-query attention over 2 key heads: refused (MatMul broadcasts 1 only) */
    t = load("model t() {\n    input q: f32[1, 4, 5, 8]\n    input k: f32[1, 2, 5, 8]\n"
             "    output y = scaled_dot_product_attention(q, k, k, enable_gqa = true)\n}\n");
    if (t) {
        remove(path);
        CHECK(fe_export_onnx(t, values, NULL, path, err, sizeof err) == -1, "exported");
        CHECK(strstr(err, "grouped-query attention (4 query heads over 2 key heads): ONNX's "
                          "MatMul broadcasts a head count of 1 only"), "%s", err);
        CHECK(!exists(path), "a file after a refusal");
        ir_graph_free(t);
    } else {
        failures++;
    }

    /* a shard: refused */
    ir_value *p = g->params[0];
    ir_type whole = p->type;
    whole.dims[0] *= 2;
    ir_set_shard(g, p, "whole", &whole, 0, 0);
    CHECK(fe_export_onnx(g, values, NULL, path, err, sizeof err) == -1, "a shard exported");
    CHECK(strstr(err, "is a shard of whole: only a single-device graph exports"), "%s", err);
    CHECK(!exists(path), "a file after a refusal");

    ir_graph_free(g);
    free(vals);
    remove(ref);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures != 0;
}
