/* The CPU executor against outputs made by PyTorch (tests/golden/gen_golden.py).
 *
 * Each tests/golden/CASE.txt names a model (source, model and define lines), lists
 * every tensor PyTorch was fed by its gnc name and shape (tensor lines), and holds
 * PyTorch's outputs (output lines) and some elements of values inside the graph
 * (sample lines).  Inputs and parameters are not stored: both sides fill every
 * tensor with golden_fill() (fill.c), a formula of its name.  The format is described at the
 * top of gen_golden.py.
 *
 * The tensor lines must be exactly the graph's inputs, parameters and buffers with
 * the same shapes: that checks the gnc -> PyTorch name mapping of resnet18 and
 * lenet (gen_golden.py's table) besides the executor.
 *
 * Agreement, elementwise, with rms the root mean square of the expected tensor
 * (or of the sampled elements), so that elements near zero get an absolute margin
 * of the tensor's scale:
 *
 *   |got - want| <= rtol * (|want| + rms(want))
 *
 *   rtol = 1e-5 for single ops.  Both sides compute in float32 (unit roundoff 6e-8)
 *          but sum in different orders (im2col + sgemm against PyTorch's kernels)
 *          and use different exp/log; over the at most 27-term sums here that is a
 *          few 1e-7 of the scale (observed: below 2e-7).  1e-5 is 80 float32 ulps,
 *          while a wrong window, stride, padding, group or eps moves elements by
 *          1e-3 of the scale or far more.
 *   rtol = 1e-4 for resnet18 and lenet.  Rounding differences compound through 20
 *          layers of up to 4608-term sums and activations reaching ~30 (observed:
 *          about 1e-6); any error in a layer or in the name mapping moves the
 *          outputs by O(1).
 *
 *   test_golden SOURCE_DIR */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "kernels.h"
#include "fill.h"
#include "frontend.h"

#define REPORT_MAX 5        /* failing elements printed per tensor */
#define DEFINES_MAX 8

static int checks, failures;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    long n;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (s = malloc((size_t)n + 1)) != NULL) {
        if (fread(s, 1, (size_t)n, f) == (size_t)n) {
            s[n] = 0;
        } else {
            free(s);
            s = NULL;
        }
    }
    fclose(f);
    return s;
}

static void fail(const char *c, const char *what)
{
    fprintf(stderr, "FAIL: %s: %s\n", c, what);
    failures++;
}

/* The next line of *p, NUL-terminated in place; NULL at the end. */
static char *next_line(char **p)
{
    if (!**p)
        return NULL;
    char *line = *p, *nl = strchr(line, '\n');
    if (nl) {
        *nl = 0;
        *p = nl + 1;
    } else {
        *p = line + strlen(line);
    }
    return line;
}

/* Compares n elements of got (at idx[i], or i when idx is NULL) with want. */
static void compare(const char *c, const char *what, const float *got, const int64_t *idx,
                    const double *want, int64_t n, double rtol)
{
    double rms = 0, worst = 0, worst_abs = 0;
    for (int64_t i = 0; i < n; i++)
        rms += want[i] * want[i] / (double)n;
    rms = sqrt(rms);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = idx ? idx[i] : i;
        double e = fabs((double)got[k] - want[i]), allowed = rtol * (fabs(want[i]) + rms);
        if (!(e <= allowed)) {   /* NaN fails too */
            if (bad < REPORT_MAX)
                fprintf(stderr, "FAIL: %s: %s[%lld]: got %.9g, want %.9g (error %.3g, allowed %.3g)\n",
                        c, what, (long long)k, got[k], want[i], e, allowed);
            bad++;
            continue;
        }
        worst = fmax(worst, e / (fabs(want[i]) + rms));
        worst_abs = fmax(worst_abs, e);
    }
    if (bad) {
        fprintf(stderr, "FAIL: %s: %s: %lld of %lld elements differ from PyTorch\n", c, what,
                (long long)bad, (long long)n);
        failures++;
        return;
    }
    checks++;
    printf("  %-20s %-20s %6lld values  rms %-9.3g max error %.2g abs, %.2g relative\n", c,
           what, (long long)n, rms, worst_abs, worst);
}

/* The tensor lines against the graph: same names, kinds and shapes, none missing. */
static int check_tensors(const char *c, const ir_graph *g, char **lines, int n)
{
    int ok = 1;
    char *fed = calloc((size_t)g->nvalues, 1);   /* by value id */
    if (!fed) {
        fail(c, "out of memory");
        return 0;
    }
    for (int i = 0; i < n; i++) {
        char name[256];
        int used;
        if (sscanf(lines[i], "tensor %255s%n", name, &used) != 1) {
            fail(c, "malformed tensor line");
            ok = 0;
            continue;
        }
        const ir_value *v = ir_find_value(g, name);
        if (!v || v->kind == IR_VALUE_NODE) {
            fprintf(stderr, "FAIL: %s: PyTorch tensor %s is no gnc input or parameter\n", c, name);
            failures++;
            ok = 0;
            continue;
        }
        fed[v->id] = 1;
        ir_type t = {v->type.dtype, 0, {0}};
        char *p = lines[i] + used, *end;
        for (;;) {
            errno = 0;
            long long d = strtoll(p, &end, 10);
            if (end == p || errno || t.rank == IR_MAX_RANK)
                break;
            t.dims[t.rank++] = d;
            p = end;
        }
        if (!ir_type_eq(&t, &v->type)) {
            char a[128], b[128];
            fprintf(stderr, "FAIL: %s: %s is %s in gnc, %s in PyTorch\n", c, name,
                    ir_type_str(&v->type, a, sizeof a), ir_type_str(&t, b, sizeof b));
            failures++;
            ok = 0;
        }
    }
    for (int i = 0; i < g->ninputs + g->nparams; i++) {
        const ir_value *v = i < g->ninputs ? g->inputs[i] : g->params[i - g->ninputs];
        if (!fed[v->id]) {
            fprintf(stderr, "FAIL: %s: gnc tensor %s has no PyTorch counterpart\n", c, v->name);
            failures++;
            ok = 0;
        }
    }
    free(fed);
    if (ok) {
        checks++;
        printf("  %-20s %-20s %6d tensors: gnc's inputs and parameters, same shapes\n", c,
               "(mapping)", n);
    }
    return ok;
}

/* Reads count numbers (pairs "index value" when idx is not NULL) from the lines at
 * *p.  Returns 0 when the text is short or malformed. */
static int read_values(char **p, int64_t count, int64_t *idx, double *want, int64_t numel)
{
    char *s = *p, *end;
    for (int64_t i = 0; i < count; i++) {
        if (idx) {
            errno = 0;
            idx[i] = strtoll(s, &end, 10);
            if (end == s || errno || idx[i] < 0 || idx[i] >= numel)
                return 0;
            s = end;
        }
        want[i] = strtod(s, &end);
        if (end == s)
            return 0;
        s = end;
    }
    while (*s == ' ')
        s++;
    if (*s == '\n')
        s++;
    else if (*s)
        return 0;
    *p = s;
    return 1;
}

static void run_case(const char *root, const char *c, double rtol)
{
    char path[4096], line_name[256];
    snprintf(path, sizeof path, "%s/tests/golden/%s.txt", root, c);
    char *text = read_text(path);
    if (!text) {
        fail(c, "cannot read the golden file");
        return;
    }
    const char *def_names[DEFINES_MAX], *def_values[DEFINES_MAX];
    char *source = NULL, *model = NULL, *p = text, *line;
    char **tensors = NULL;
    int ndef = 0, ntensors = 0;
    ir_graph *g = NULL;
    rt_exec *x = NULL;
    diag d;
    diag_init(&d);
    /* the header, up to the first output or sample */
    while (*p && strncmp(p, "output ", 7) != 0 && strncmp(p, "sample ", 7) != 0) {
        line = next_line(&p);
        if (line[0] == '#')
            continue;
        if (strncmp(line, "source ", 7) == 0) {
            source = line + 7;
        } else if (strncmp(line, "model ", 6) == 0) {
            model = line + 6;
        } else if (strncmp(line, "define ", 7) == 0 && ndef < DEFINES_MAX && strchr(line, '=')) {
            char *eq = strchr(line, '=');
            *eq = 0;
            def_names[ndef] = line + 7;
            def_values[ndef++] = eq + 1;
        } else if (strncmp(line, "tensor ", 7) == 0) {
            char **grown = realloc(tensors, (size_t)(ntensors + 1) * sizeof *tensors);
            if (!grown) {
                fail(c, "out of memory");
                goto done;
            }
            tensors = grown;
            tensors[ntensors++] = line;
        } else {
            fail(c, "unknown line in the golden file header");
            goto done;
        }
    }
    if (!source || !*p) {
        fail(c, "the golden file has no source or no outputs");
        goto done;
    }
    char model_path[4096];
    if (snprintf(model_path, sizeof model_path, "%s/%s", root, source) >= (int)sizeof model_path) {
        fail(c, "path too long");
        goto done;
    }
    fe_options fo = {model, ndef, def_names, def_values};
    g = fe_load_file(model_path, &fo, &d);
    if (!g || ir_verify(g, &d)) {
        diag_print(&d, stderr);
        fail(c, "the model does not load");
        goto done;
    }
    check_tensors(c, g, tensors, ntensors);
    char err[256];
    if (!(x = rt_exec_new(g, err, sizeof err))) {
        fail(c, err);
        goto done;
    }
    for (int i = 0; i < g->ninputs; i++)
        golden_fill(g->inputs[i], rt_exec_data(x, g->inputs[i]));
    for (int i = 0; i < g->nparams; i++)
        golden_fill(g->params[i], rt_exec_data(x, g->params[i]));
    if (rt_exec_run(x, err, sizeof err) != 0) {
        fail(c, err);
        goto done;
    }
    while ((line = next_line(&p)) != NULL) {
        long long count;
        int sample = strncmp(line, "sample ", 7) == 0;
        if ((!sample && strncmp(line, "output ", 7) != 0) ||
            sscanf(line + 7, "%255s %lld", line_name, &count) != 2 || count <= 0 ||
            count > (1 << 20)) {
            fail(c, "malformed output or sample line");
            goto done;
        }
        const ir_value *v = NULL;
        if (sample)
            v = ir_find_value(g, line_name);
        else if (strcmp(line_name, "loss") == 0)
            v = g->loss;
        for (int i = 0; i < g->noutputs && !v && !sample; i++)
            if (strcmp(g->outputs[i].name, line_name) == 0)
                v = g->outputs[i].value;
        int64_t numel = v ? ir_type_numel(&v->type) : 0;
        int index = v && (v->type.dtype == IR_I32 || v->type.dtype == IR_I64); /* argmax */
        if (!v || (v->type.dtype != IR_F32 && !index) || (!sample && numel != count)) {
            fprintf(stderr, "FAIL: %s: %s: no such f32, i32 or i64 value of %lld elements in "
                    "gnc\n", c, line_name, count);
            failures++;
            goto done;
        }
        double *want = malloc((size_t)count * sizeof *want);
        int64_t *idx = sample ? malloc((size_t)count * sizeof *idx) : NULL;
        int ok = want && (idx || !sample) && read_values(&p, count, idx, want, numel);
        float *got = rt_exec_data(x, v), *indices = NULL;
        if (ok && index) { /* exact as floats: PyTorch's are below 2^24 */
            indices = malloc((size_t)numel * sizeof *indices);
            for (int64_t i = 0; indices && i < numel; i++)
                indices[i] = (float)rt_index_at(got, v->type.dtype, i);
            got = indices;
            ok = indices != NULL;
        }
        if (ok)
            compare(c, line_name, got, idx, want, count, rtol);
        free(indices);
        free(want);
        free(idx);
        if (!ok) {
            fail(c, "malformed values in the golden file");
            goto done;
        }
    }
done:
    rt_exec_free(x);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    free(tensors);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_golden SOURCE_DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);   /* failures (stderr) land among the passes */
    /* the files gen_golden.py writes, with their tolerances (see the top) */
    static const struct {
        const char *name;
        double rtol;
    } cases[] = {
        {"conv_basic", 1e-5}, {"conv_stride_pad", 1e-5}, {"conv_dilation_groups", 1e-5},
        {"conv_depthwise_1x1", 1e-5}, {"batchnorm", 1e-5}, {"pooling", 1e-5}, {"upsample", 1e-6},
        {"dense", 1e-5},
        {"softmax", 1e-5}, {"unary", 1e-5}, {"compare", 1e-5}, {"reduce", 1e-5},
        {"shaping", 1e-5}, {"convs", 1e-5},
        {"cross_entropy", 1e-5}, {"cross_entropy_large", 1e-5},
        {"lenet", 1e-4}, {"resnet18", 1e-4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(argv[1], cases[i].name, cases[i].rtol);
    printf("golden: %d checks passed, %d failed\n", checks, failures);
    return failures != 0;
}
