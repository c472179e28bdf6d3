/* Tests of the .net frontend (frontend/): every construct of the language and
 * the exact diagnostics of malformed programs.
 *
 *   - the files tests/dsl/valid/NAME.net elaborate without a diagnostic to a
 *     graph that verifies; their "# CHECK:" lines are matched in order against the graph's
 *     IR text (each a substring of a later line than the previous match;
 *     "# CHECK-NEXT:" on the very next line; "# CHECK-NOT:" on no line between the
 *     matches around it), as LLVM's FileCheck does;
 *   - the files tests/dsl/invalid/NAME.net fail, and diag_print renders exactly
 *     the sibling .err file: every line, with the quoted source, the caret and the notes;
 *   - both kinds may hold "# DEFINE: name=value" (a -D option) and
 *     "# MODEL: name" (--model) lines;
 *   - the models in models/: parameter counts and names, -D overrides;
 *   - hostile inputs built in memory: 10^5 nested parentheses, 300 nested calls,
 *     NUL bytes, 1 MB lines, an empty file, a file of comments, each with its
 *     exact diagnostic.
 *
 * Files are loaded from tests/dsl, so messages name them "valid/x.net" and
 * "invalid/x.net"; tests/dsl/lib holds files that the tests import.
 *
 * Usage: test_dsl SOURCE_DIR [FILE...]: with files (relative to tests/dsl), just
 * prints what each produces (diagnostics or IR text), to write expectations. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "filecheck.h"
#include "frontend.h"
#include "ir.h"

static int passed, failed;

static void fail(const char *what, const char *fmt, ...) DIAG_PRINTF(2, 3);
static void fail(const char *what, const char *fmt, ...)
{
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------- helpers */


/* Prints a line diff of want and got (LCS, small texts), "-" for lines only in
 * want, "+" for lines only in got. */
static void print_diff(const char *want, const char *got)
{
    char *a = strdup(want), *b = strdup(got), **la, **lb;
    int na = split_lines(a, &la), nb = split_lines(b, &lb);
    if ((long)na * nb > 4000000) {
        fprintf(stderr, "--- expected\n%s+++ got\n%s", want, got);
    } else {
        int *t = calloc((size_t)(na + 1) * (size_t)(nb + 1), sizeof *t);
#define T(i, j) t[(size_t)(i) * (size_t)(nb + 1) + (size_t)(j)]
        for (int i = na - 1; i >= 0; i--)
            for (int j = nb - 1; j >= 0; j--)
                T(i, j) = strcmp(la[i], lb[j]) == 0 ? T(i + 1, j + 1) + 1
                          : T(i + 1, j) > T(i, j + 1) ? T(i + 1, j) : T(i, j + 1);
        fprintf(stderr, "--- expected\n+++ got\n");
        int i = 0, j = 0;
        while (i < na || j < nb) {
            if (i < na && j < nb && strcmp(la[i], lb[j]) == 0) {
                fprintf(stderr, " %s\n", la[i++]);
                j++;
            } else if (j < nb && (i == na || T(i, j + 1) >= T(i + 1, j))) {
                fprintf(stderr, "+%s\n", lb[j++]);
            } else {
                fprintf(stderr, "-%s\n", la[i++]);
            }
        }
#undef T
        free(t);
    }
    free(la);
    free(lb);
    free(a);
    free(b);
}

/* The "# KEY: value" directives of a test file. */
typedef struct {
    int ndefines;
    const char *names[16], *values[16];
    const char *model;
    char *storage;
} directives;

static void read_directives(const char *text, directives *dv)
{
    memset(dv, 0, sizeof *dv);
    dv->storage = strdup(text);
    char **lines;
    int n = split_lines(dv->storage, &lines);
    for (int i = 0; i < n; i++) {
        char *l = lines[i] + strspn(lines[i], " \t");
        if (strncmp(l, "# DEFINE: ", 10) == 0 && dv->ndefines < 16) {
            char *eq = strchr(l + 10, '=');
            if (!eq)
                continue;
            *eq = '\0';
            dv->names[dv->ndefines] = l + 10;
            dv->values[dv->ndefines++] = eq + 1;
        } else if (strncmp(l, "# MODEL: ", 9) == 0) {
            dv->model = l + 9;
        }
    }
    free(lines);
}

static fe_options options(const directives *dv)
{
    return (fe_options){dv->model, dv->ndefines, dv->names, dv->values};
}

/* file_check (filecheck.c), failures counted and shown with the output. */
static int check_lines(const char *what, const char *text, const char *out)
{
    char msg[1024];
    if (file_check(text, out, msg, sizeof msg))
        return 1;
    fail(what, "%s", msg);
    fprintf(stderr, "output:\n%s", out);
    return 0;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .net files of dir, sorted; returns the count. */
static int list_tests(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *names = NULL;
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!has_suffix(de->d_name, ".net"))
            continue;
        if (n == cap)
            *names = realloc(*names, (size_t)(cap = 2 * cap + 16) * sizeof **names);
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        (*names)[n] = malloc(len);
        snprintf((*names)[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    qsort(*names, (size_t)n, sizeof **names, cmp_str);
    return n;
}

/* ---------------------------------------------------------------- file tests */

static void valid_file(const char *path)
{
    char *text = read_file(path, NULL);
    if (!text) {
        fail(path, "cannot read");
        return;
    }
    directives dv;
    read_directives(text, &dv);
    fe_options opt = options(&dv);
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &opt, &d);
    char *msgs = diag_text(&d);
    if (!g || d.n) {
        fail(path, "expected a graph and no diagnostic, got %s:\n%s", g ? "a graph" : "none",
             msgs);
    } else {
        diag vd;
        diag_init(&vd);
        int problems = ir_verify(g, &vd);
        char *out = graph_text(g);
        if (problems) {
            char *vmsgs = diag_text(&vd);
            fail(path, "the graph does not verify:\n%s", vmsgs);
            free(vmsgs);
        } else if (check_lines(path, text, out)) {
            passed++;
        }
        free(out);
        diag_free(&vd);
    }
    ir_graph_free(g);
    free(msgs);
    diag_free(&d);
    free(dv.storage);
    free(text);
}

static void invalid_file(const char *path)
{
    char *text = read_file(path, NULL);
    char err_path[1024];
    snprintf(err_path, sizeof err_path, "%.*s.err", (int)(strlen(path) - 4), path);
    char *want = read_file(err_path, NULL);
    if (!text || !want) {
        fail(path, "cannot read it or %s", err_path);
        free(text);
        free(want);
        return;
    }
    directives dv;
    read_directives(text, &dv);
    fe_options opt = options(&dv);
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &opt, &d);
    char *got = diag_text(&d);
    if (g) {
        fail(path, "expected errors, got a graph");
    } else if (d.nerrors == 0) {
        fail(path, "no graph, but no error reported either");
    } else if (strcmp(want, got) != 0) {
        fail(path, "diagnostics differ from %s", err_path);
        print_diff(want, got);
    } else {
        passed++;
    }
    ir_graph_free(g);
    free(got);
    diag_free(&d);
    free(dv.storage);
    free(text);
    free(want);
}

/* Prints what a file produces: its graph or its diagnostics. */
static void show(const char *path)
{
    char *text = read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return;
    }
    directives dv;
    read_directives(text, &dv);
    fe_options opt = options(&dv);
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &opt, &d);
    diag_print(&d, stdout);
    if (g) {
        ir_verify(g, &d);
        ir_print(g, stdout);
    }
    ir_graph_free(g);
    diag_free(&d);
    free(dv.storage);
    free(text);
}

/* ---------------------------------------------------------------- models */

static int64_t numel_params(const ir_graph *g, ir_value_kind kind)
{
    int64_t n = 0;
    for (int i = 0; i < g->nparams; i++)
        if (g->params[i]->kind == kind)
            n += ir_type_numel(&g->params[i]->type);
    return n;
}

static int count_kind(const ir_graph *g, ir_value_kind kind)
{
    int n = 0;
    for (int i = 0; i < g->nparams; i++)
        n += g->params[i]->kind == kind;
    return n;
}

typedef struct {
    const char *name;
    const char *type; /* "f32[64, 1, 3, 3]" */
} named_type;

static void check_model(const char *path, const char *define, int nparams, int64_t params,
                        int nbuffers, int64_t buffers, const named_type *names)
{
    char what[256];
    snprintf(what, sizeof what, "%s%s%s", path, define ? " -D " : "", define ? define : "");
    char dname[64] = "", *dvalue = NULL;
    if (define) {
        snprintf(dname, sizeof dname, "%s", define);
        dvalue = strchr(dname, '=');
        *dvalue++ = '\0';
    }
    const char *names_[1] = {dname}, *values_[1] = {dvalue};
    fe_options opt = {NULL, define ? 1 : 0, names_, values_};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_file(path, &opt, &d);
    if (!g) {
        char *msgs = diag_text(&d);
        fail(what, "does not load:\n%s", msgs);
        free(msgs);
        diag_free(&d);
        return;
    }
    int ok = 1;
    if (ir_verify(g, &d)) {
        fail(what, "does not verify");
        ok = 0;
    }
    if (count_kind(g, IR_VALUE_PARAM) != nparams || numel_params(g, IR_VALUE_PARAM) != params) {
        fail(what, "%d parameters of %lld elements, expected %d of %lld",
             count_kind(g, IR_VALUE_PARAM), (long long)numel_params(g, IR_VALUE_PARAM), nparams,
             (long long)params);
        ok = 0;
    }
    if (count_kind(g, IR_VALUE_BUFFER) != nbuffers ||
        numel_params(g, IR_VALUE_BUFFER) != buffers) {
        fail(what, "%d buffers of %lld elements, expected %d of %lld",
             count_kind(g, IR_VALUE_BUFFER), (long long)numel_params(g, IR_VALUE_BUFFER),
             nbuffers, (long long)buffers);
        ok = 0;
    }
    for (const named_type *n = names; n->name; n++) {
        ir_value *v = ir_find_value(g, n->name);
        char buf[128];
        if (!v) {
            fail(what, "no value named '%s'", n->name);
            ok = 0;
        } else if (strcmp(ir_type_str(&v->type, buf, sizeof buf), n->type) != 0) {
            fail(what, "'%s' is %s, expected %s", n->name, buf, n->type);
            ok = 0;
        }
    }
    passed += ok;
    ir_graph_free(g);
    diag_free(&d);
}

/* Expected counts worked out by hand from the layer shapes (they match
 * sum(p.numel() for p in model.parameters()) of the PyTorch originals). */
static void test_models(const char *src)
{
    char path[1024];

    /* lenet: conv1 6*1*5*5+6 = 156, conv2 16*6*5*5+16 = 2416, fc1 120*400+120 = 48120,
       fc2 84*120+84 = 10164, fc3 10*84+10 = 850: 61706 in 10 tensors */
    static const named_type lenet[] = {
        {"image", "f32[256, 1, 28, 28]"}, {"label", "i32[256]"},
        {"conv1.weight", "f32[6, 1, 5, 5]"}, {"conv2.bias", "f32[16]"},
        {"fc1.weight", "f32[120, 400]"}, {"fc3.weight", "f32[10, 84]"},
        {"fc3", "f32[256, 10]"}, {NULL, NULL}};
    snprintf(path, sizeof path, "%s/models/lenet.net", src);
    check_model(path, NULL, 10, 61706, 0, 0, lenet);
    static const named_type lenet32[] = {
        {"image", "f32[32, 1, 28, 28]"}, {"fc3", "f32[32, 10]"}, {NULL, NULL}};
    check_model(path, "batch=32", 10, 61706, 0, 0, lenet32);

    /* mlp: fc0 256*784+256 = 200960, fc1 256*256+256 = 65792, two layernorms
       2*2*256 = 1024, head 10*256+10 = 2570: 270346 in 10 tensors;
       with 100 classes the head is 25700 */
    static const named_type mlp[] = {
        {"fc0.weight", "f32[256, 784]"}, {"fc1.bias", "f32[256]"},
        {"layernorm0.weight", "f32[256]"}, {"layernorm1.bias", "f32[256]"},
        {"head.weight", "f32[10, 256]"}, {"softmax0", "f32[128, 10]"}, {NULL, NULL}};
    snprintf(path, sizeof path, "%s/models/mlp.net", src);
    check_model(path, NULL, 10, 270346, 0, 0, mlp);
    static const named_type mlp100[] = {
        {"head.weight", "f32[100, 256]"}, {"head", "f32[128, 100]"}, {NULL, NULL}};
    check_model(path, "classes=100", 10, 293476, 0, 0, mlp100);

    /* resnet18 (1 input channel, 10 classes; convolutions with bias, as d2l's):
       stem 64*1*9+64 = 640 and its batchnorm 2*64; a residual(in, c) has two 3x3
       convolutions c*in*9+c and c*c*9+c, two batchnorms 2*c each, and where the
       stride is 2 (block0 of layer2..4) a 1x1 shortcut c*in+c; fc 512*10+10 = 5130.
       76 tensors of 11175818 elements; 17 batchnorms hold 34 buffers of 7808. */
    static const named_type resnet[] = {
        {"stem.weight", "f32[64, 1, 3, 3]"}, {"stem.bias", "f32[64]"},
        {"batchnorm0.running_mean", "f32[64]"},
        {"layer1.block0.conv2d0.weight", "f32[64, 64, 3, 3]"},
        {"layer1.block0.batchnorm1.running_var", "f32[64]"},
        {"layer2.block0.shortcut.weight", "f32[128, 64, 1, 1]"},
        {"layer2.block1.conv2d1.bias", "f32[128]"},
        {"layer4.block1.batchnorm1.weight", "f32[512]"},
        {"fc.weight", "f32[10, 512]"}, {"fc.bias", "f32[10]"},
        {"relu0", "f32[256, 64, 28, 28]"}, {"layer1.block0.add0", "f32[256, 64, 28, 28]"},
        {"layer1.block0.relu1", "f32[256, 64, 28, 28]"},
        {"layer4.block1.relu1", "f32[256, 512, 4, 4]"}, {"fc", "f32[256, 10]"},
        {NULL, NULL}};
    snprintf(path, sizeof path, "%s/models/resnet18.net", src);
    check_model(path, NULL, 76, 11175818, 34, 7808, resnet);
}

/* ---------------------------------------------------------------- in memory */

/* Loads text under the name "mem.net" and compares the diagnostics with want. */
static void memory_case(const char *what, const char *text, size_t len, const char *want)
{
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_string("mem.net", text, len, NULL, &d);
    char *got = diag_text(&d);
    if (g)
        fail(what, "expected errors, got a graph");
    else if (strcmp(want, got) != 0) {
        fail(what, "diagnostics differ");
        print_diff(want, got);
    } else
        passed++;
    ir_graph_free(g);
    free(got);
    diag_free(&d);
}

static char *repeat(const char *head, const char *s, size_t times, const char *tail,
                    size_t *len)
{
    size_t k = strlen(s), n = strlen(head) + k * times + strlen(tail);
    char *out = malloc(n + 1), *p = out;
    p += sprintf(p, "%s", head);
    for (size_t i = 0; i < times; i++, p += k)
        memcpy(p, s, k);
    strcpy(p, tail);
    *len = n;
    return out;
}

/* One error as diag_print renders it, for lines too long to write out. */
static char *rendered(int line, size_t col, const char *msg, const char *src, size_t srclen)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        abort();
    fprintf(f, "mem.net:%d:%zu: error: %s\n    ", line, col, msg);
    fwrite(src, 1, srclen, f);
    fputs("\n    ", f);
    for (size_t i = 1; i < col; i++)
        fputc(' ', f);
    fputs("^\n", f);
    fclose(f);
    return s;
}

static void test_hostile(void)
{
    size_t len;
    memory_case("empty file", "", 0, "gnc: error: no model in the file\n");
    memory_case("only comments", "# nothing\n   # here\n#", 21,
                "gnc: error: no model in the file\n");
    memory_case("only blank lines and ;", "\n\n;;\n  \t\n", 8,
                "gnc: error: no model in the file\n");
    memory_case("only a NUL byte", "\0", 1,
                "mem.net:1:1: error: invalid byte 0x00\n"
                "    ?\n"
                "    ^\n");

    /* 10^5 nested parentheses: bison's stack of 10000 fills, and the parser
       reports it once and stops (the line is quoted whole) */
    char *head = repeat("model m() {\n    input x: f32[2]\n    y = ", "(", 100000, "", &len);
    char *deep = repeat(head, ")", 100000, "\n    output y\n}\n", &len);
    const char *line3 = strstr(deep, "    y = ");
    char *want = rendered(3, 9995, "nesting too deep for the parser (its stack holds 10000 "
                          "levels)", line3, (size_t)(strchr(line3, '\n') - line3));
    memory_case("10^5 parentheses", deep, len, want);
    free(want);
    free(deep);
    free(head);

    /* 300 nested calls parse, and elaboration stops at its depth limit of 256 */
    head = repeat("model m() {\n    input x: f32[2]\n    y = ", "relu(", 300, "x", &len);
    deep = repeat(head, ")", 300, "\n    output y\n}\n", &len);
    line3 = strstr(deep, "    y = ");
    want = rendered(3, 9 + 256 * 5, "expressions and calls nest more than 256 deep", line3,
                    (size_t)(strchr(line3, '\n') - line3));
    memory_case("300 nested calls", deep, len, want);
    free(want);
    free(deep);
    free(head);

    /* NUL bytes are invalid characters, quoted as '?' (as every control byte
       is: diag.c put_clean); parsing goes on */
    static const char nul[] = "model m() {\n    input x: f32[2]\n    y = relu(x)\0\n"
                              "    output\0 y\n}\n";
    memory_case("NUL bytes", nul, sizeof nul - 1,
                "mem.net:3:16: error: invalid byte 0x00\n"
                "        y = relu(x)?\n"
                "                   ^\n"
                "mem.net:4:11: error: invalid byte 0x00\n"
                "        output? y\n"
                "              ^\n");

    /* a 1 MB line: as a comment it is fine; with an error at its end, the error
       has the right column */
    char *text = repeat("model m() {\n    input x: f32[2]\n    # ", "x", 1 << 20,
                        "\n    output x\n}\n", &len);
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_string("mem.net", text, len, NULL, &d);
    if (!g || d.n)
        fail("1 MB comment line", "expected a graph and no diagnostic");
    else
        passed++;
    ir_graph_free(g);
    diag_free(&d);
    free(text);
    text = repeat("model m() {\n    input x: f32[2]\n", " ", 1 << 20, "y = relu(q)\n"
                  "    output x\n}\n", &len);
    line3 = strstr(text, "]\n") + 2;
    want = rendered(3, (1 << 20) + 10, "unknown name 'q'; did you mean 'x'?", line3,
                    (size_t)(strchr(line3, '\n') - line3));
    memory_case("1 MB line", text, len, want);
    free(want);
    free(text);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_dsl SOURCE_DIR [FILE...]\n");
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/dsl", argv[1]);
    const char *src = realpath(argv[1], NULL);
    if (!src || chdir(dir) != 0) {
        fprintf(stderr, "test_dsl: cannot enter %s\n", dir);
        return 2;
    }
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            show(argv[i]);
        return 0;
    }

    char **names;
    int n = list_tests("valid", &names), nvalid = n, ninvalid;
    for (int i = 0; i < n; i++) {
        valid_file(names[i]);
        free(names[i]);
    }
    free(names);
    n = ninvalid = list_tests("invalid", &names);
    for (int i = 0; i < n; i++) {
        invalid_file(names[i]);
        free(names[i]);
    }
    free(names);
    test_models(src);
    test_hostile();
    free((char *)src);

    printf("test_dsl: %d valid and %d invalid programs; %d passed / %d failed\n", nvalid,
           ninvalid, passed, failed);
    return failed ? 1 : 0;
}
