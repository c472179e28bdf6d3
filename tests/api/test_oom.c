/* Out of memory is an error, never an abort: the n-th allocation fails, for
 * every n, in a plan load and in a compile (Lua's ltests.c habit), and each
 * call returns GNC_ERROR_MEMORY, "out of memory", with nothing it allocated
 * left behind; the call that runs out of failures succeeds and gives the
 * plan an undisturbed call gives.
 *
 *   test_oom PLAN_DIR SOURCE_DIR
 *
 * Linked with libgnc's code itself (not the shared library, which hides
 * ir/base.h's test hook).  What a failed call leaves behind is found by
 * LeakSanitizer in the sanitizer build (tools/test.sh --asan), or by
 * valgrind --leak-check=full. */
#include <gnc/gnc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

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

typedef gnc_status (*call_fn)(gnc_plan **plan, const void *arg, gnc_error *err);

typedef struct {
    const void *data;
    size_t size;
} bytes;

static gnc_status load_file(gnc_plan **plan, const void *arg, gnc_error *err)
{
    return gnc_plan_load(plan, arg, err);
}

static gnc_status load_memory(gnc_plan **plan, const void *arg, gnc_error *err)
{
    const bytes *b = arg;
    return gnc_plan_load_memory(plan, b->data, b->size, err);
}

typedef struct {
    const char *path;
    gnc_compile_options o;
} compile_args;

static gnc_status compile(gnc_plan **plan, const void *arg, gnc_error *err)
{
    const compile_args *a = arg;
    return gnc_compile(plan, a->path, &a->o, err);
}

/* What a plan shows through the API: compared between a plan made with
 * failures survived and one made without. */
static void describe(const gnc_plan *p, char *buf, size_t len)
{
    int n = snprintf(buf, len, "devices %d training %d in", gnc_plan_devices(p),
                     gnc_plan_is_training(p));
    for (int io = 0; io < 2; io++) {
        int count = io ? gnc_plan_output_count(p) : gnc_plan_input_count(p);
        for (int i = 0; i < count && n < (int)len; i++) {
            gnc_tensor_info t;
            if ((io ? gnc_plan_output(p, i, &t) : gnc_plan_input(p, i, &t)) != GNC_OK)
                continue;
            n += snprintf(buf + n, len - (size_t)n, " %s:%d:%d", t.name, (int)t.dtype, t.rank);
            for (int d = 0; d < t.rank && n < (int)len; d++)
                n += snprintf(buf + n, len - (size_t)n, "x%lld", (long long)t.dims[d]);
        }
        if (!io && n < (int)len)
            n += snprintf(buf + n, len - (size_t)n, " out");
    }
}

/* Fails the n-th allocation of call for n = 1, 2, ... until a call makes no
 * allocation fail; returns how many allocations that call made. */
static long every_failure(const char *what, call_fn call, const void *arg)
{
    char want[4096], got[4096];
    gnc_plan *plan = NULL;
    gnc_error err;
    gnc_status st = call(&plan, arg, &err);
    CHECK(st == GNC_OK, "%s: %s", what, err.message);
    if (st != GNC_OK)
        return 0;
    describe(plan, want, sizeof want);
    gnc_plan_free(plan);
    for (long n = 1;; n++) {
        plan = NULL;
        base_alloc_fail_at(n);
        st = call(&plan, arg, &err);
        int failed = base_alloc_failed();
        base_alloc_fail_at(0);
        if (!failed) {
            CHECK(st == GNC_OK, "%s with no failure left (n = %ld): %s", what, n, err.message);
            if (st == GNC_OK) {
                describe(plan, got, sizeof got);
                CHECK(strcmp(got, want) == 0, "%s: the plan differs:\n  %s\n  %s", what, got,
                      want);
            }
            gnc_plan_free(plan);
            return n - 1;
        }
        /* a failure some code survives (a cache it goes without) may still
           give the plan; anything else is out of memory and no plan */
        if (st == GNC_OK) {
            describe(plan, got, sizeof got);
            CHECK(strcmp(got, want) == 0, "%s, allocation %ld failed: the plan differs", what, n);
            gnc_plan_free(plan);
        } else {
            CHECK(st == GNC_ERROR_MEMORY && strstr(err.message, "out of memory"),
                  "%s, allocation %ld failed: status %d, '%s'", what, n, (int)st, err.message);
            CHECK(plan == NULL, "%s, allocation %ld failed: a plan despite the error", what, n);
        }
        if (failures > 20)
            return n;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_oom PLAN_DIR SOURCE_DIR\n");
        return 2;
    }
    char plan_path[4096], mlp[4096], lenet[4096];
    snprintf(plan_path, sizeof plan_path, "%s/lenet-train2.gnc", argv[1]);
    snprintf(mlp, sizeof mlp, "%s/models/mlp.net", argv[2]);
    snprintf(lenet, sizeof lenet, "%s/models/lenet.net", argv[2]);
    bytes b;
    const char *why = "";
    char *data = base_read_file(plan_path, &b.size, &why);
    b.data = data;
    CHECK(data != NULL, "%s: %s", plan_path, why);
    if (!data)
        return 1;
    const char *defines[] = {"batch=4"};
    compile_args mlp2 = {mlp, {.defines = defines, .ndefines = 1, .train = 1, .momentum = 0.9,
                               .devices = 2, .no_kernels = 1}};
    compile_args lenet1 = {lenet, {.defines = defines, .ndefines = 1, .train = 1,
                                   .precision = "bf16", .no_kernels = 1}};

    long loads = every_failure("gnc_plan_load_memory", load_memory, &b);
    long files = every_failure("gnc_plan_load", load_file, plan_path);
    long compiles = every_failure("gnc_compile", compile, &mlp2);
    long lenets = every_failure("gnc_compile", compile, &lenet1);
    printf("gnc_plan_load_memory: %ld allocations, each failed once\n", loads);
    printf("gnc_plan_load: %ld allocations, each failed once\n", files);
    printf("gnc_compile (mlp, training, 2 devices): %ld allocations, each failed once\n",
           compiles);
    printf("gnc_compile (lenet, training, bf16): %ld allocations, each failed once\n", lenets);
    CHECK(loads > 100 && files > loads && compiles > loads && lenets > loads,
          "too few allocations seen (%ld, %ld, %ld, %ld): is the hook connected?", loads, files,
          compiles, lenets);
    base_free(data);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures != 0;
}
