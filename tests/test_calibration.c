/* The cost model against the one GPU run so far (an H200, 2026-11-26;
 * bench/results/2026-11-26-h200/, docs/perf.md): resnet18's training step at
 * batch 256, compiled as that run compiled it, predicted on the h200 model
 * (driver/predict.c) beside what was measured.
 *
 *   1. Each measured step within 20%: bf16, tf32 and fp32 with cuDNN, bf16 with
 *      cuDNN on NHWC copies (--conv cudnn-nhwc) and with codegen's implicit
 *      GEMMs (--conv igemm).  bf16, tf32, fp32 and igemm each fitted one rate
 *      (docs/passes.md): these hold the fit; cudnn-nhwc, which fitted none, is
 *      a prediction.
 *   2. The bf16 step's kernel classes within 25% each: the ncu profile of that
 *      run (ncu-resnet18-bf16-2steps.csv, its second step), each kernel put in
 *      a class by its name, not by the model, scaled to the measured step (ncu
 *      serializes kernels and flushes caches between them: its 7.0 ms are the
 *      5.62 ms step's kernels, slowed alike).
 *   3. Step by step (the bf16 program's steps matched to the profile's kernels
 *      in order): the share of steps within a factor of 2, as a floor, so that
 *      classes right on average over wrong steps fail.
 *
 *   test_calibration SOURCE_DIR [-v]      (-v: every step, predicted beside measured) */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "cost.h"
#include "driver.h"

static int passed, failed, verbose;
static const char *src;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ok)
        passed++;
    else
        failed++;
    if (!ok || verbose) {
        fprintf(ok ? stdout : stderr, ok ? "ok: " : "FAIL: ");
        vfprintf(ok ? stdout : stderr, fmt, ap);
        fputc('\n', ok ? stdout : stderr);
    }
    va_end(ap);
}

/* ---- the measurements ---- */

/* gnc train's images/s at batch 256 (docs/perf.md's table, 2026-11-26): the
 * step is 256 / images_per_s, CUDA graphs replaying it. */
static const struct {
    const char *what;
    ir_precision precision;
    cg_conv_impl conv;
    double images_per_s;
} runs[] = {
    {"bf16", PREC_BF16, CG_CONV_CUDNN, 45538},
    {"tf32", PREC_TF32, CG_CONV_CUDNN, 15275},
    {"fp32", PREC_FP32, CG_CONV_CUDNN, 6683},
    {"bf16 --conv cudnn-nhwc", PREC_BF16, CG_CONV_CUDNN_NHWC, 45930},
    {"bf16 --conv igemm", PREC_BF16, CG_CONV_IGEMM, 8157},
};

typedef struct {
    char name[128];
    double us;
} ncu_kernel;

/* Field i of a CSV line of quoted fields, into out. */
static int csv_field(const char *line, int i, char *out, size_t n)
{
    const char *p = line;
    for (int f = 0; f <= i; f++) {
        if (*p != '"')
            return -1;
        const char *q = strchr(p + 1, '"');
        if (!q)
            return -1;
        if (f == i) {
            size_t len = (size_t)(q - p - 1) < n - 1 ? (size_t)(q - p - 1) : n - 1;
            memcpy(out, p + 1, len);
            out[len] = 0;
            return 0;
        }
        p = q + 1;
        if (*p == ',')
            p++;
    }
    return -1;
}

/* The profile's kernels, in order: columns 4 (name) and 14 (ns, "46,368"). */
static ncu_kernel *read_ncu(int *count)
{
    char path[1024], line[8192], f[256];
    snprintf(path, sizeof path, "%s/bench/results/2026-11-26-h200/ncu-resnet18-bf16-2steps.csv",
             src);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        perror(path);
        exit(1);
    }
    ncu_kernel *k = NULL;
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        if (csv_field(line, 13, f, sizeof f) || strcmp(f, "ns") != 0)
            continue;
        k = realloc(k, (size_t)(n + 1) * sizeof *k);
        csv_field(line, 4, k[n].name, sizeof k[n].name);
        csv_field(line, 14, f, sizeof f);
        double ns = 0;
        for (const char *c = f; *c; c++)
            if (*c >= '0' && *c <= '9')
                ns = ns * 10 + (*c - '0');
        k[n++].us = ns / 1e3;
    }
    fclose(fp);
    *count = n;
    return k;
}

/* A kernel's class by its name: cuDNN's transposes and convolutions, cuBLASLt's
 * GEMMs (cutlass), and gnc's generated kernels by the op they are named for. */
static drv_class class_of(const char *name, int generated)
{
    if (generated)
        return strncmp(name, "multi_", 6) == 0 || strstr(name, "sgd") ? DRV_CLASS_OPTIMIZER
             : strstr(name, "batchnorm")                              ? DRV_CLASS_NORM
                                                                      : DRV_CLASS_ELEMENTWISE;
    if (strstr(name, "nchwToNhwc") || strstr(name, "nhwcToNchw"))
        return DRV_CLASS_TRANSPOSE;
    if (strstr(name, "conv") || strstr(name, "xmma") || strstr(name, "cudnn") ||
        strstr(name, "precompute"))
        return DRV_CLASS_CONV;
    return DRV_CLASS_GEMM;
}

/* ---- the programs ---- */

/* Whether name is one of p's generated kernels (else a library's). */
static int generated(const cg_program *p, const char *name)
{
    for (int i = 0; i < p->nkernels; i++)
        if (strcmp(p->kernels[i].name, name) == 0)
            return 1;
    return 0;
}

static cg_program *program(ir_precision precision, cg_conv_impl conv, cg_layout layout,
                           drv_program *prog)
{
    drv_config c;
    memset(&c, 0, sizeof c);
    char file[1024];
    snprintf(file, sizeof file, "%s/models/resnet18.net", src);
    c.file = file;
    c.train = 1;
    c.opt = ad_optimizer_default(AD_SGD);
    c.part.devices = 1;
    c.gpus = 1;
    c.precision = precision;
    c.conv = conv;
    diag d;
    diag_init(&d);
    if (drv_compile(&c, NULL, 256, 1, prog, &d) != 0) {
        fprintf(stderr, "FAIL: resnet18 does not compile\n");
        exit(1);
    }
    cg_options co = cg_options_default();
    co.precision = precision;
    co.conv = conv;
    co.layout = layout;
    cg_program *p = cg_generate(prog->g, prog->mp, &co, &d);
    diag_free(&d);
    if (!p) {
        fprintf(stderr, "FAIL: resnet18's program does not generate\n");
        exit(1);
    }
    return p;
}

static cost_device h200(ir_precision precision)
{
    cost_device dev = *cost_device_lookup("h200");
    cost_device_at(&dev, (ir_precision)precision);
    return dev;
}

/* 1: each run's step. */
static void steps(void)
{
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        drv_program prog;
        /* the run of 2026-11-26 stored activations NCHW */
        cg_program *p = program(runs[i].precision, runs[i].conv, CG_LAYOUT_NCHW, &prog);
        cost_device dev = h200(runs[i].precision);
        drv_prediction r;
        drv_predict(p, 0, &dev, &r, NULL);
        double measured = 256 / runs[i].images_per_s * 1e3, predicted = r.seconds * 1e3;
        check(fabs(predicted / measured - 1) <= 0.20,
              "resnet18 training step, batch 256, %s: predicted %.2f ms, measured %.2f ms (%+.0f%%)",
              runs[i].what, predicted, measured, 100 * (predicted / measured - 1));
        for (int c = 0; verbose && c < DRV_NCLASSES; c++)
            printf("    %-14s %8.3f ms in %d kernels\n", drv_class_names[c], r.by_class[c] * 1e3,
                   r.kernels[c]);
        cg_program_free(p);
        drv_program_free(&prog);
    }
}

/* 2 and 3: the bf16 step against the profile. */
static void profile(void)
{
    int nk;
    ncu_kernel *k = read_ncu(&nk);
    drv_program prog;
    cg_program *p = program(PREC_BF16, CG_CONV_CUDNN, CG_LAYOUT_NCHW, &prog);
    const cg_device *D = &p->devices[0];
    check(nk % 2 == 0 && nk / 2 > D->nsteps, "the profile holds two steps: %d kernels, %d steps "
          "in the program", nk, D->nsteps);
    ncu_kernel *s2 = k + nk / 2; /* the second step: the first has one-time work */
    int n2 = nk / 2;
    cost_device dev = h200(PREC_BF16);
    drv_prediction r;
    double *step_s = calloc((size_t)D->nsteps, sizeof *step_s);
    drv_predict(p, 0, &dev, &r, step_s);

    /* the profile's kernels, each to the program's step it belongs to: a
       generated kernel is its step's launch; library kernels run in the
       library step before the next generated kernel */
    double measured[DRV_NCLASSES] = {0}, total = 0;
    int within2 = 0, matched = 0, j = 0;
    for (int i = 0; i < D->nsteps; i++) {
        const cg_step *st = &D->steps[i];
        double us = 0;
        char what[160] = "";
        if (st->kind == CG_STEP_KERNEL) {
            const char *name = p->kernels[st->u.launch.kernel].name;
            if (j < n2 && strcmp(s2[j].name, name) == 0) {
                us = s2[j].us;
                measured[class_of(name, 1)] += us;
                j++;
            }
            snprintf(what, sizeof what, "%s", name);
        } else {
            /* a call: transposes in and set-up, its kernels, transposes out */
            for (int phase = 0; j < n2 && !generated(p, s2[j].name); j++) {
                const char *name = s2[j].name;
                int kind = strstr(name, "nchwToNhwc") || strstr(name, "init_device_workspace") ||
                           strstr(name, "precompute_indices") ? 0
                         : strstr(name, "nhwcToNchw") ? 2 : 1;
                if ((kind == 0 && phase >= 1) || (kind == 1 && phase == 2))
                    break; /* the next call's */
                phase = kind > phase ? kind : phase;
                us += s2[j].us;
                measured[class_of(name, 0)] += s2[j].us;
            }
            snprintf(what, sizeof what, "%s", st->what ? st->what : "library call");
        }
        if (us > 0) {
            matched++;
            within2 += step_s[i] * 1e6 <= 2 * us && us <= 2 * step_s[i] * 1e6;
        }
        if (verbose)
            printf("%3d %-60.60s predicted %7.1f us, measured %7.1f us, %.1f MB\n", i, what,
                   step_s[i] * 1e6, us, (double)(st->read_bytes + st->written_bytes) / 1e6);
    }
    for (; j < n2; j++) /* what the program does not name: counted, so the sum is ncu's */
        measured[class_of(s2[j].name, 0)] += s2[j].us;
    for (int c = 0; c < DRV_NCLASSES; c++)
        total += measured[c];
    check(matched >= D->nsteps * 9 / 10, "the profile's kernels match the program's steps: "
          "%d of %d", matched, D->nsteps);
    check(within2 >= matched * 3 / 4, "steps predicted within a factor of 2: %d of %d", within2,
          matched);
    double step_ms = 256 / runs[0].images_per_s * 1e3;
    for (int c = 0; c < DRV_NCLASSES; c++) {
        if (measured[c] < 0.01 * total)
            continue; /* gemm: 3 kernels, 0.4%; none of optimizer's and communication's */
        double want = measured[c] / total * step_ms, got = r.by_class[c] * 1e3;
        check(fabs(got / want - 1) <= 0.25, "bf16 step, %s: predicted %.3f ms, measured %.3f ms "
              "(%.1f%% of ncu's %.2f ms; %+.0f%%)", drv_class_names[c], got, want,
              100 * measured[c] / total, total / 1e3, 100 * (got / want - 1));
    }
    free(step_s);
    free(k);
    cg_program_free(p);
    drv_program_free(&prog);
}

/* 4: what the next GPU run should measure: today's programs (default
 * layout: channels-last at bf16) predicted by the calibrated model, and the
 * bf16 step's layout transposes, none. */
static void next_run(void)
{
    static const ir_precision precs[] = {PREC_BF16, PREC_TF32, PREC_FP32};
    for (size_t i = 0; i < sizeof precs / sizeof *precs; i++) {
        drv_program prog;
        cg_program *p = program(precs[i], CG_CONV_CUDNN, CG_LAYOUT_AUTO, &prog);
        cost_device dev = h200(precs[i]);
        drv_prediction r;
        drv_predict(p, 0, &dev, &r, NULL);
        cg_run_stats st;
        cg_run_stats_of(p, 0, &st);
        printf("predicted for the next run: resnet18 training step, batch 256, %s: %.2f ms "
               "(%.0f images/s), %d layout transposes (%d cuDNN's)\n", ir_precision_name(precs[i]),
               r.seconds * 1e3, 256 / r.seconds, st.layout_own + st.layout_library,
               st.layout_library);
        if (precs[i] == PREC_BF16)
            check(st.layout_own == 0 && st.layout_library == 0,
                  "bf16 calls cuDNN channels-last throughout: %d transposes of gnc's, %d of "
                  "cuDNN's", st.layout_own, st.layout_library);
        cg_program_free(p);
        drv_program_free(&prog);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_calibration SOURCE_DIR [-v]\n");
        return 2;
    }
    src = argv[1];
    verbose = argc > 2 && strcmp(argv[2], "-v") == 0;
    steps();
    profile();
    next_run();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
