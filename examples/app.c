/* app: runs a plan file with libgnc (include/gnc/gnc.h; docs/api.md).
 *
 *   cc app.c $(pkg-config --cflags --libs gnc) -o app
 *   gnc compile models/lenet.net -D batch=4 -o lenet.gnc
 *   ./app lenet.gnc                     random inputs, as gnc run makes them
 *   ./app lenet.gnc image=x.bin         an input from a file of its raw bytes
 *   ./app step.gnc --steps 3 --lr 0.05  a training plan: three steps
 *
 * Inputs not given are random for --seed (default 0): floating-point ones
 * uniform in [0, 1), integer ones in [0, 10), the same values gnc run feeds
 * the same plan, so the two print the same outputs.  An inference plan runs
 * once and its outputs (and loss) are printed as gnc run prints them; a
 * training plan takes --steps steps (default 1) at --lr (default 0.01) and
 * prints each step's loss. */
#include <gnc/gnc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gnc run's random inputs (tools/gnc.c): input `index` for seed. */
static void fill_random(const gnc_tensor_info *t, int index, uint64_t seed, void *data)
{
    int64_t n = 1;
    for (int k = 0; k < t->rank; k++)
        n *= t->dims[k];
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull + (uint64_t)index;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        switch (t->dtype) {
        case GNC_I32: ((int32_t *)data)[i] = (int32_t)(s % 10); break;
        case GNC_I64: ((int64_t *)data)[i] = (int64_t)(s % 10); break;
        case GNC_U8: ((uint8_t *)data)[i] = (uint8_t)(s % 10); break;
        default: ((float *)data)[i] = (float)((s >> 40) * 0x1.0p-24); break;
        }
    }
}

static int read_raw(const char *path, void *data, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "app: cannot read %s\n", path);
        return -1;
    }
    size_t got = fread(data, 1, bytes, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != bytes || extra) {
        fprintf(stderr, "app: %s does not hold exactly %zu bytes\n", path, bytes);
        return -1;
    }
    return 0;
}

/* As gnc run prints a tensor: its type, then up to 4 rows of up to 8 values. */
static void print_tensor(const gnc_tensor_info *t, const void *data)
{
    static const char *const dtypes[] = {"f32", "f16", "bf16", "i32", "i64", "u8"};
    int64_t n = 1;
    printf("%s: %s[", t->name, dtypes[t->dtype]);
    for (int k = 0; k < t->rank; k++) {
        printf("%s%lld", k ? ", " : "", (long long)t->dims[k]);
        n *= t->dims[k];
    }
    printf("]\n");
    int64_t row = t->rank ? t->dims[t->rank - 1] : 1, rows = n / row;
    for (int64_t r = 0; r < rows && r < 4; r++) {
        printf("  [");
        for (int64_t c = 0; c < row && c < 8; c++) {
            int64_t i = r * row + c;
            if (t->dtype == GNC_I32)
                printf("%s%d", c ? " " : "", ((const int32_t *)data)[i]);
            else if (t->dtype == GNC_I64)
                printf("%s%lld", c ? " " : "", (long long)((const int64_t *)data)[i]);
            else if (t->dtype == GNC_U8)
                printf("%s%u", c ? " " : "", ((const uint8_t *)data)[i]);
            else
                printf("%s%.6g", c ? " " : "", ((const float *)data)[i]);
        }
        printf("%s]\n", row > 8 ? " ..." : "");
    }
    if (rows > 4)
        printf("  ... (%lld rows)\n", (long long)rows);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *given[64];
    int ngiven = 0, steps = 1;
    double lr = 0.01;
    gnc_session_options opt = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            opt.seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            opt.device = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--lr") == 0 && i + 1 < argc)
            lr = atof(argv[++i]);
        else if (strchr(argv[i], '=') && argv[i][0] != '-' && ngiven < 64)
            given[ngiven++] = argv[i];
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            path = NULL;
            break;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: app PLAN.gnc [--seed N] [--device cpu|cuda] [--steps N] [--lr X] "
                        "[NAME=FILE.bin ...]\n");
        return 2;
    }

    gnc_error err;
    gnc_plan *plan = NULL;
    gnc_session *s = NULL;
    void *buf = NULL;
    int rc = 1;
    if (gnc_plan_load(&plan, path, &err) != GNC_OK ||
        gnc_session_init(&s, plan, &opt, &err) != GNC_OK)
        goto fail;
    for (int i = 0; i < gnc_plan_input_count(plan); i++) {
        gnc_tensor_info t;
        gnc_plan_input(plan, i, &t);
        if (!(buf = malloc(t.bytes ? t.bytes : 1)))
            goto oom;
        const char *file = NULL;
        for (int k = 0; k < ngiven; k++)
            if (strncmp(given[k], t.name, strlen(t.name)) == 0 && given[k][strlen(t.name)] == '=')
                file = given[k] + strlen(t.name) + 1;
        if (file && read_raw(file, buf, t.bytes) != 0)
            goto done;
        if (!file)
            fill_random(&t, i, opt.seed, buf);
        if (gnc_session_set_input(s, t.name, buf, t.bytes, &err) != GNC_OK)
            goto fail;
        free(buf);
        buf = NULL;
    }
    double loss;
    if (gnc_plan_is_training(plan)) {
        for (int k = 0; k < steps; k++) {
            if (gnc_session_train_step(s, lr, k, &err) != GNC_OK ||
                gnc_session_loss(s, &loss, &err) != GNC_OK)
                goto fail;
            printf("step %d: loss %.6g\n", k + 1, loss);
        }
        rc = 0;
        goto done;
    }
    if (gnc_session_run(s, &err) != GNC_OK)
        goto fail;
    for (int i = 0; i < gnc_plan_output_count(plan); i++) {
        gnc_tensor_info t;
        gnc_plan_output(plan, i, &t);
        if (!(buf = malloc(t.bytes ? t.bytes : 1)))
            goto oom;
        if (gnc_session_output(s, t.name, buf, t.bytes, &err) != GNC_OK)
            goto fail;
        print_tensor(&t, buf);
        free(buf);
        buf = NULL;
    }
    if (gnc_session_loss(s, &loss, NULL) == GNC_OK) {
        float l = (float)loss;
        gnc_tensor_info t = {.name = "loss", .dtype = GNC_F32};
        print_tensor(&t, &l);
    }
    rc = 0;
    goto done;
oom:
    snprintf(err.message, sizeof err.message, "out of memory");
fail:
    fprintf(stderr, "app: %s\n", err.message);
done:
    free(buf);
    gnc_session_free(s);
    gnc_plan_free(plan);
    return rc;
}
