/* ONNX's backend conformance cases (Debian's libonnx-testdata) through gnc.
 *
 * For every case folder (model.onnx and test_data_set_N/{input,output}_N.pb)
 * under DATA/{node,pytorch-converted,pytorch-operator,simple}: import the
 * model (fe_load_onnx), compile it for inference through the default pass
 * pipeline, run it on the CPU executor with the model's initializers as its
 * weights, and compare every output with the expected one: shapes and
 * integers exactly, floats within |got - want| <= 1e-4 |want| + 1e-5.
 *
 * A case is unsupported when its model uses an op gnc does not claim
 * (fe_onnx_claims) or the importer reports something unsupported (an
 * attribute value, a dtype); every other case must pass unless
 * tests/onnx/known_failures.txt lists it with its reason.  Exit status: 1
 * when such a case fails or a listed one passes (the list must stay honest),
 * 77 (skipped) when the data folder is absent, else 0.
 *
 *   onnx_conformance [--data DIR] [--known FILE] [--case NAME] [-v]
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base.h"
#include "diag.h"
#include "exec.h"
#include "frontend.h"
#include "ir.h"
#include "onnx.h"
#include "onnx.pb-c.h"
#include "passes.h"

#define RTOL 1e-4
#define ATOL 1e-5

static const char *const folders[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

typedef struct {
    char **names, **reasons;
    int *used;
    int n;
} known_list;

static void known_load(known_list *k, const char *path)
{
    memset(k, 0, sizeof *k);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        size_t sp = strcspn(line, " \t");
        k->names = base_xrealloc(k->names, (size_t)(k->n + 1) * sizeof *k->names);
        k->reasons = base_xrealloc(k->reasons, (size_t)(k->n + 1) * sizeof *k->reasons);
        k->used = base_xrealloc(k->used, (size_t)(k->n + 1) * sizeof *k->used);
        k->names[k->n] = base_strndup(line, sp);
        k->reasons[k->n] = base_xstrdup(line + sp + strspn(line + sp, " \t"));
        k->used[k->n] = 0;
        k->n++;
    }
    fclose(f);
}

/* The entry for folder/name or name, or -1. */
static int known_find(const known_list *k, const char *folder, const char *name)
{
    char full[512];
    snprintf(full, sizeof full, "%s/%s", folder, name);
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->names[i], name) == 0 || strcmp(k->names[i], full) == 0)
            return i;
    return -1;
}

static void known_free(known_list *k)
{
    for (int i = 0; i < k->n; i++)
        base_free(k->names[i]), base_free(k->reasons[i]);
    base_free(k->names);
    base_free(k->reasons);
    base_free(k->used);
}

/* Whether every node of the model is of an op gnc claims; the first that is
 * not into why.  -1 when the model cannot be read. */
static int all_claimed(const char *path, char *why, size_t len)
{
    size_t n;
    const char *err;
    char *bytes = base_read_file(path, &n, &err);
    if (!bytes)
        return snprintf(why, len, "cannot read: %s", err), -1;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, (const uint8_t *)bytes);
    base_free(bytes);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return snprintf(why, len, "not a model"), -1;
    }
    int ok = 1;
    for (size_t i = 0; ok && i < m->graph->n_node; i++) {
        const Onnx__NodeProto *node = m->graph->node[i];
        int other = node->domain && node->domain[0] && strcmp(node->domain, "ai.onnx") != 0;
        if (other || !fe_onnx_claims(node->op_type)) {
            snprintf(why, len, "op %s%s%s", other ? node->domain : "", other ? "." : "",
                     node->op_type);
            ok = 0;
        }
    }
    onnx__model_proto__free_unpacked(m, NULL);
    return ok;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted entries of dir that start with prefix; count in *n. */
static char **list_dir(const char *dir, const char *prefix, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        v = base_xrealloc(v, (size_t)(*n + 1) * sizeof *v);
        v[(*n)++] = base_xstrdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        base_free(v[i]);
    base_free(v);
}

/* Compares one output: 0, or -1 with the first mismatch in why. */
static int compare(const ir_value *v, const void *got, const ir_type *wt, const void *want,
                   const char *oname, char *why, size_t len)
{
    char a[128], b[128];
    if (v->type.rank != wt->rank || memcmp(v->type.dims, wt->dims, (size_t)wt->rank * 8) != 0 ||
        v->type.dtype != wt->dtype) {
        snprintf(why, len, "output '%s' is %s, expected %s", oname,
                 ir_type_str(&v->type, a, sizeof a), ir_type_str(wt, b, sizeof b));
        return -1;
    }
    int64_t n = ir_type_numel(wt);
    for (int64_t i = 0; i < n; i++) {
        double g, w;
        int bad;
        switch (wt->dtype) {
        case IR_F32:
            g = ((const float *)got)[i], w = ((const float *)want)[i];
            bad = isnan(w) ? !isnan(g) : !(fabs(g - w) <= RTOL * fabs(w) + ATOL) &&
                                              !(isinf(w) && g == w);
            break;
        case IR_I64:
            g = (double)((const int64_t *)got)[i], w = (double)((const int64_t *)want)[i];
            bad = ((const int64_t *)got)[i] != ((const int64_t *)want)[i];
            break;
        case IR_I32:
            g = ((const int32_t *)got)[i], w = ((const int32_t *)want)[i];
            bad = g != w;
            break;
        default:
            g = ((const uint8_t *)got)[i], w = ((const uint8_t *)want)[i];
            bad = g != w;
            break;
        }
        if (bad) {
            snprintf(why, len, "output '%s' element %lld is %.9g, expected %.9g", oname,
                     (long long)i, g, w);
            return -1;
        }
    }
    return 0;
}

enum { PASS, FAIL, UNSUPPORTED };

/* One data set of a compiled case. */
static int run_set(ir_graph *g, rt_exec *x, const char *set, char *why, size_t len)
{
    char path[4096], err[512], name[256];
    for (int i = 0; i < g->ninputs; i++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", set, i);
        ir_type t;
        void *data;
        if (fe_onnx_read_tensor(path, &t, &data, name, sizeof name, err, sizeof err) != 0) {
            snprintf(why, len, "%s", err);
            return FAIL;
        }
        const ir_value *v = g->inputs[i];
        for (int k = 0; name[0] && k < g->ninputs; k++)
            if (strcmp(g->inputs[k]->name, name) == 0)
                v = g->inputs[k];
        if (!ir_type_eq(&t, &v->type)) {
            char a[128], b[128];
            snprintf(why, len, "input '%s' is %s, the data %s", v->name,
                     ir_type_str(&v->type, a, sizeof a), ir_type_str(&t, b, sizeof b));
            base_free(data);
            return FAIL;
        }
        memcpy(rt_exec_data(x, v), data, ir_type_bytes(&t));
        base_free(data);
    }
    if (rt_exec_run(x, err, sizeof err) != 0) {
        snprintf(why, len, "run: %s", err);
        return FAIL;
    }
    for (int i = 0; i < g->noutputs; i++) {
        snprintf(path, sizeof path, "%s/output_%d.pb", set, i);
        ir_type t;
        void *data;
        if (fe_onnx_read_tensor(path, &t, &data, name, sizeof name, err, sizeof err) != 0) {
            snprintf(why, len, "%s", err);
            return FAIL;
        }
        const ir_output *o = &g->outputs[i];
        for (int k = 0; name[0] && k < g->noutputs; k++)
            if (strcmp(g->outputs[k].name, name) == 0)
                o = &g->outputs[k];
        int rc = compare(o->value, rt_exec_data(x, o->value), &t, data, o->name, why, len);
        base_free(data);
        if (rc != 0)
            return FAIL;
    }
    return PASS;
}

static int run_case(const char *dir, int verbose, char *why, size_t len)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    int claimed = all_claimed(model, why, len);
    if (claimed <= 0)
        return claimed < 0 ? FAIL : UNSUPPORTED;
    diag d;
    diag_init(&d);
    fe_options fo = {0};
    ir_graph *g = fe_load_onnx(model, &fo, &d);
    pm_options pm = {0, 0, NULL, NULL, stderr, NULL};
    mp_plan *plan = NULL;
    rt_exec *x = NULL;
    int result = FAIL;
    char err[512];
    if (!g || ir_verify(g, &d) != 0 || pm_run(g, pm_default_pipeline(0, 0, 0), &pm, &d) != 0 ||
        ir_verify(g, &d) != 0) {
        const char *msg = d.n ? d.entries[0].msg : "failed without a message";
        snprintf(why, len, "%s", msg);
        if (verbose)
            diag_print(&d, stderr);
        result = strstr(msg, "unsupported") ? UNSUPPORTED : FAIL;
        goto done;
    }
    if (verbose)
        ir_print(g, stderr);
    plan = mp_plan_graph(g);
    if (mp_check(g, plan, err, sizeof err) != 0) {
        snprintf(why, len, "the memory plan does not hold: %s", err);
        goto done;
    }
    if (!(x = rt_exec_new_planned(g, plan->offset_by_id, plan->device_bytes, err, sizeof err))) {
        snprintf(why, len, "executor: %s", err);
        goto done;
    }
    rt_exec_init_params(x, 0);
    int nsets;
    char **sets = list_dir(dir, "test_data_set_", &nsets);
    result = nsets ? PASS : FAIL;
    if (!nsets)
        snprintf(why, len, "no test_data_set_*");
    for (int s = 0; s < nsets && result == PASS; s++) {
        char set[3072];
        snprintf(set, sizeof set, "%s/%s", dir, sets[s]);
        result = run_set(g, x, set, why, len);
    }
    free_list(sets, nsets);
done:
    rt_exec_free(x);
    if (plan)
        mp_plan_free(plan);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    return result;
}

int main(int argc, char **argv)
{
    const char *data = "/usr/share/libonnx-testdata/data", *known_path = NULL, *only = NULL;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
            data = argv[++i];
        else if (strcmp(argv[i], "--known") == 0 && i + 1 < argc)
            known_path = argv[++i];
        else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--data DIR] [--known FILE] [--case NAME] [-v]\n", argv[0]);
            return 2;
        }
    }
    if (!is_dir(data)) {
        printf("SKIP: %s is absent (Debian's libonnx-testdata)\n", data);
        return 77;
    }
    known_list known;
    known_load(&known, known_path ? known_path : "");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int bad = 0;
    for (size_t f = 0; f < sizeof folders / sizeof *folders; f++) {
        char fdir[1024];
        snprintf(fdir, sizeof fdir, "%s/%s", data, folders[f]);
        int ncases, count[3] = {0}, known_fail = 0;
        char **cases = list_dir(fdir, "", &ncases);
        for (int c = 0; c < ncases; c++) {
            if (only && strcmp(only, cases[c]) != 0)
                continue;
            char dir[2048], why[1024] = "";
            snprintf(dir, sizeof dir, "%s/%s", fdir, cases[c]);
            int r = run_case(dir, verbose, why, sizeof why);
            int k = known_find(&known, folders[f], cases[c]);
            if (k >= 0)
                known.used[k] = 1;
            count[r]++;
            if (r == FAIL && k >= 0) {
                known_fail++;
                if (verbose || only)
                    printf("  known failure %s/%s: %s (listed: %s)\n", folders[f], cases[c],
                           why, known.reasons[k]);
            } else if (r == FAIL) {
                printf("  FAIL %s/%s: %s\n", folders[f], cases[c], why);
                bad = 1;
            } else if (r == PASS && k >= 0) {
                printf("  PASSES but listed as a known failure: %s/%s (remove it from the "
                       "list)\n", folders[f], cases[c]);
                bad = 1;
            } else if (only || verbose) {
                printf("  %s %s/%s%s%s\n", r == PASS ? "pass" : "unsupported", folders[f],
                       cases[c], why[0] ? ": " : "", why);
            }
        }
        free_list(cases, ncases);
        printf("%-18s pass %4d  fail %4d (known %d)  unsupported %4d\n", folders[f], count[PASS],
               count[FAIL], known_fail, count[UNSUPPORTED]);
    }
    if (!only)
        for (int i = 0; i < known.n; i++)
            if (!known.used[i]) {
                printf("  known_failures.txt lists %s, which is no case here\n", known.names[i]);
                bad = 1;
            }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("time %.1f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    known_free(&known);
    return bad;
}
