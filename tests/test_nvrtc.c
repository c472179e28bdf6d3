/* The generated kernels through NVRTC (needs the CUDA toolkit, no GPU):
 *
 *   a. every model of models/, inference and training step, on 1 and 2
 *      devices (data parallel), at every precision, compiles to a cubin for
 *      sm_80 and one for sm_90 and to PTX for compute_90; ptxas reports no
 *      register spills for the elementwise kernels; and the training steps of
 *      the models with convolutions again with them as implicit-GEMM kernels
 *      (--conv igemm), which must not spill either; tests/attention_tiny.net
 *      likewise, whose attention kernels (forward and gradient, the smallest
 *      and the largest tiles) must not spill;
 *   c. the cache: a second compile reads every image from it, the same bytes;
 *      an entry with a flipped byte and a truncated one are compiled again
 *      and rewritten (the third compile hits again);
 *   d. a compile error names the kernel, the line of the generated source
 *      and that line's text.
 * Exits 77 (skipped) when this build has no NVRTC.
 *
 *   test_nvrtc SOURCE_DIR WORK_DIR
 *   test_nvrtc SOURCE_DIR WORK_DIR --bench   resnet18's training step for 2 devices: the
 *                                            whole compile, cold and from the cache */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen.h"
#include "frontend.h"
#include "passes.h"

static int npassed, nfailed;

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", what);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    nfailed++;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

typedef struct {
    ir_graph *g;
    mp_plan *mp;
    cg_program *p;
} prog;

static void prog_free(prog *x)
{
    cg_program_free(x->p);
    mp_plan_free(x->mp);
    if (x->g)
        ir_graph_free(x->g);
    memset(x, 0, sizeof *x);
}

/* A model's program: the default pipeline (and the partition pass), planned,
 * generated.  0, or -1 reported. */
static int make(const char *src, const char *name, int train, int devices, ir_precision prec,
                cg_conv_impl conv, const char *batch, prog *x)
{
    char path[4096], what[256];
    if (strchr(name, '/')) /* a test model: tests/NAME.net */
        snprintf(path, sizeof path, "%s/%s.net", src, name);
    else
        snprintf(path, sizeof path, "%s/models/%s.net", src, name);
    snprintf(what, sizeof what, "%s %s %d device(s) %s", name, train ? "training" : "inference",
             devices, ir_precision_name(prec));
    const char *dn[] = {"batch"}, *dv[] = {batch};
    fe_options fo = {NULL, batch ? 1 : 0, dn, dv};
    diag d;
    diag_init(&d);
    memset(x, 0, sizeof *x);
    x->g = fe_load_file(path, &fo, &d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    pt_options po = {0};
    po.devices = devices;
    po.strategy = PT_DATA;
    pm_options pm = {0, 0, NULL, NULL, stdout, devices > 1 ? &po : NULL};
    if (!x->g || (train && ad_training_graph(x->g, &opt, &d) != 0) ||
        pm_run(x->g, pm_default_pipeline(train, 0, devices > 1), &pm, &d) != 0) {
        diag_print(&d, stdout);
        fail(what, "does not compile");
        diag_free(&d);
        prog_free(x);
        return -1;
    }
    x->mp = mp_plan_graph(x->g);
    cg_options o = cg_options_default();
    o.precision = prec;
    o.conv = conv;
    x->p = cg_generate(x->g, x->mp, &o, &d);
    if (!x->p) {
        diag_print(&d, stdout);
        fail(what, "cg_generate fails");
        diag_free(&d);
        prog_free(x);
        return -1;
    }
    diag_free(&d);
    return 0;
}

static int contains(const void *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp((const char *)hay + i, needle, k) == 0)
            return 1;
    return 0;
}

static void rm_tree(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (dp)
        closedir(dp);
    rmdir(dir);
}

/* ---------------------------------------------------------------- a */

static int check_images(const char *what, const cg_program *p)
{
    for (int m = 0; m < p->nmodules; m++) {
        const cg_module *mod = &p->modules[m];
        int cubin80 = 0, cubin90 = 0, ptx90 = 0;
        for (int i = 0; i < mod->nimages; i++) {
            const cg_image *im = &mod->images[i];
            int elf = im->size > 4 && memcmp(im->data, "\177ELF", 4) == 0;
            if (!im->ptx && elf && strcmp(im->arch, "sm_80") == 0)
                cubin80 = 1;
            if (!im->ptx && elf && strcmp(im->arch, "sm_90") == 0)
                cubin90 = 1;
            if (im->ptx && strcmp(im->arch, "compute_90") == 0 &&
                contains(im->data, im->size, ".target sm_90"))
                ptx90 = 1;
        }
        if (!cubin80 || !cubin90 || !ptx90) {
            fail(what, "module %d lacks %s", m, !cubin80 ? "the sm_80 cubin" :
                 !cubin90 ? "the sm_90 cubin" : "compute_90 PTX");
            return 0;
        }
    }
    return 1;
}

/* Every elementwise kernel without spills on every arch; returns how many. */
static int check_spills(const char *what, const cg_program *p, int *ok)
{
    int n = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cg_kernel *K = &p->kernels[k];
        for (int a = 0; a < p->narchs; a++) {
            if (K->regs[a] == 0 && K->block > 0) {
                fail(what, "ptxas said nothing of kernel %s for %s", K->name, p->archs[a]);
                *ok = 0;
            }
            int igemm = strstr(K->name, "igemm") != NULL;
            int attention = strncmp(K->name, "attention", 9) == 0;
            if ((K->elementwise || igemm || attention) && (K->spill_stores[a] || K->spill_loads[a])) {
                fail(what, "%s kernel %s spills on %s: %d bytes stored, %d loaded",
                     igemm ? "implicit-GEMM" : attention ? "attention" : "elementwise", K->name,
                     p->archs[a], K->spill_stores[a], K->spill_loads[a]);
                *ok = 0;
            }

        }
        n += K->elementwise;
    }
    return n;
}

/* The attention kernels' registers and shared memory, the most of each. */
static void attention_summary(const char *what, const cg_program *p)
{
    int n = 0, regs = 0, shared = 0;
    for (int k = 0; k < p->nkernels; k++) {
        const cg_kernel *K = &p->kernels[k];
        if (strncmp(K->name, "attention", 9) != 0)
            continue;
        n++;
        for (int a = 0; a < p->narchs; a++) {
            regs = K->regs[a] > regs ? K->regs[a] : regs;
            shared = K->shared_bytes[a] > shared ? K->shared_bytes[a] : shared;
        }
    }
    if (n)
        printf("%s: %d attention kernels, at most %d registers and %d bytes of shared memory\n",
               what, n, regs, shared);
}

static void every_model(const char *src, const char *cache)
{
    static const char *const models[] = {"lenet", "mlp", "resnet18", "tests/attention_tiny"};
    int programs = 0, kernels = 0, elementwise = 0, images = 0;
    double t0 = now_ms();
    int igemm_kernels = 0;
    for (int i = 0; i < 4; i++)
        for (int conv = CG_CONV_CUDNN; conv < CG_CONV_NIMPLS; conv++)
            for (int train = conv != CG_CONV_CUDNN; train < 2; train++)
                for (int devices = 1; devices <= 2; devices++)
                    for (int prec = PREC_FP32; prec <= PREC_FP16; prec++) {
                        /* the other ways: their convolutions' kernels, training
                           (cudnn-nhwc's transposes on one device) */
                        if (conv != CG_CONV_CUDNN && (strcmp(models[i], "mlp") == 0 ||
                                                      strchr(models[i], '/')))
                            continue; /* no convolutions */
                        if (conv == CG_CONV_CUDNN_NHWC && devices > 1)
                            continue;
                        char what[256], err[4096];
                        snprintf(what, sizeof what, "%s %s on %d device%s at %s%s%s", models[i],
                                 train ? "training" : "inference", devices, devices > 1 ? "s" : "",
                                 ir_precision_name((ir_precision)prec),
                                 conv != CG_CONV_CUDNN ? ", --conv " : "",
                                 conv != CG_CONV_CUDNN ? cg_conv_name((cg_conv_impl)conv) : "");
                        prog x;
                        if (make(src, models[i], train, devices, (ir_precision)prec,
                                 (cg_conv_impl)conv, NULL, &x))
                            continue;
                        for (int k = 0; k < x.p->nkernels; k++)
                            igemm_kernels += strstr(x.p->kernels[k].name, "igemm") != NULL;
                        cg_compile_options co = {.cache_dir = cache, .ptxas_info = 1};
                        cg_compile_stats st;
                        int ok = 1;
                        if (cg_compile(x.p, &co, &st, err, sizeof err) != 0) {
                            fail(what, "%s", err);
                            ok = 0;
                        } else {
                            ok &= check_images(what, x.p);
                            elementwise += check_spills(what, x.p, &ok);
                            attention_summary(what, x.p);
                        }
                        programs++;
                        kernels += x.p->nkernels;
                        for (int m = 0; m < x.p->nmodules; m++)
                            images += x.p->modules[m].nimages;
                        npassed += ok;
                        prog_free(&x);
                    }
    if (igemm_kernels < 2 * 2 * 4 * 3)
        fail("--conv igemm", "only %d implicit-GEMM kernels in the models' training steps",
             igemm_kernels);
    printf("%d programs, %d kernels (%d elementwise, %d implicit-GEMM, no spills), %d images in "
           "%.1f s\n", programs, kernels, elementwise, igemm_kernels, images, (now_ms() - t0) / 1e3);
}

/* ---------------------------------------------------------------- c */

/* cg_compile_options.progress: each call one more done, of the same total */
typedef struct {
    int calls, last, total, bad;
} progress_seen;

static void count_progress(void *ctx, int done, int total)
{
    progress_seen *p = ctx;
    p->bad |= done != p->last + 1 || (p->total && total != p->total);
    p->calls++, p->last = done, p->total = total;
}

static void cache_test(const char *src, const char *work)
{
    char cache[4096], err[4096];
    snprintf(cache, sizeof cache, "%s/cache-%d", work, (int)getpid());
    rm_tree(cache);
    prog x;
    if (make(src, "lenet", 1, 1, PREC_FP32, CG_CONV_CUDNN, "8", &x))
        return;
    progress_seen seen = {0};
    cg_compile_options co = {.cache_dir = cache, .ptxas_info = 1, .progress = count_progress,
                             .ctx = &seen};
    cg_compile_stats s1, s2, s3, s4;
    if (cg_compile(x.p, &co, &s1, err, sizeof err)) {
        fail("cache: cold", "%s", err);
        goto done;
    }
    int jobs = x.p->nmodules * x.p->narchs;
    if (seen.bad || seen.calls != jobs || seen.last != jobs || seen.total != jobs)
        fail("cache: progress", "%d calls up to %d of %d%s, want %d", seen.calls, seen.last,
             seen.total, seen.bad ? ", out of order" : "", jobs);
    co.progress = NULL;
    int nimages = 0;
    for (int m = 0; m < x.p->nmodules; m++)
        nimages += x.p->modules[m].nimages;
    /* keep the cold images to compare */
    size_t total = 0;
    for (int m = 0; m < x.p->nmodules; m++)
        for (int i = 0; i < x.p->modules[m].nimages; i++)
            total += x.p->modules[m].images[i].size;
    unsigned char *cold = malloc(total), *q = cold;
    for (int m = 0; m < x.p->nmodules; m++)
        for (int i = 0; i < x.p->modules[m].nimages; i++) {
            memcpy(q, x.p->modules[m].images[i].data, x.p->modules[m].images[i].size);
            q += x.p->modules[m].images[i].size;
        }
    if (s1.compiles != x.p->nmodules * x.p->narchs || s1.cache_hits != 0 || s1.cache_unwritten)
        fail("cache: cold", "%d compiles, %d hits and %d unwritten, want %d, 0 and 0",
             s1.compiles, s1.cache_hits, s1.cache_unwritten, x.p->nmodules * x.p->narchs);
    if (cg_compile(x.p, &co, &s2, err, sizeof err)) {
        fail("cache: warm", "%s", err);
        free(cold);
        goto done;
    }
    q = cold;
    int same = 1;
    for (int m = 0; m < x.p->nmodules; m++)
        for (int i = 0; i < x.p->modules[m].nimages; i++) {
            const cg_image *im = &x.p->modules[m].images[i];
            same &= im->from_cache && memcmp(q, im->data, im->size) == 0;
            q += im->size;
        }
    free(cold);
    if (s2.compiles != 0 || s2.cache_hits != nimages || !same)
        fail("cache: warm", "%d compiles, %d hits of %d images, %s", s2.compiles, s2.cache_hits,
             nimages, same ? "the same bytes" : "other bytes");
    else
        npassed++;
    /* damage two entries: a flipped byte in one, a cut in another */
    DIR *dp = opendir(cache);
    struct dirent *e;
    int damaged = 0;
    while (dp && (e = readdir(dp)) && damaged < 2) {
        if (!strstr(e->d_name, ".cubin"))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
        struct stat sb;
        if (stat(path, &sb) || sb.st_size < 200)
            continue;
        if (damaged == 0) {
            FILE *f = fopen(path, "r+b");
            fseek(f, sb.st_size / 2, SEEK_SET);
            int c = fgetc(f);
            fseek(f, sb.st_size / 2, SEEK_SET);
            fputc(c ^ 0x40, f);
            fclose(f);
        } else {
            if (truncate(path, sb.st_size - 100) != 0)
                continue;
        }
        damaged++;
    }
    if (dp)
        closedir(dp);
    if (cg_compile(x.p, &co, &s3, err, sizeof err)) {
        fail("cache: damaged", "%s", err);
        goto done;
    }
    if (damaged != 2 || s3.cache_corrupt != 2 || s3.compiles < 1 || s3.compiles > 2)
        fail("cache: damaged", "%d entries damaged: %d found corrupt, %d compiles", damaged,
             s3.cache_corrupt, s3.compiles);
    else
        npassed++;
    if (cg_compile(x.p, &co, &s4, err, sizeof err) || s4.compiles != 0 || s4.cache_corrupt != 0 ||
        s4.cache_hits != nimages)
        fail("cache: rewritten", "%d compiles, %d corrupt, %d hits of %d", s4.compiles,
             s4.cache_corrupt, s4.cache_hits, nimages);
    else
        npassed++;
    /* a cache whose folder cannot be made: compiled, each image counted unwritten */
    cg_compile_options nowhere = {.cache_dir = "/dev/null/gnc-cache", .ptxas_info = 1};
    if (cg_compile(x.p, &nowhere, &s4, err, sizeof err) || s4.cache_hits != 0 ||
        s4.cache_unwritten != nimages)
        fail("cache: unwritable", "%d hits, %d of %d images unwritten", s4.cache_hits,
             s4.cache_unwritten, nimages);
    else
        npassed++;
done:
    prog_free(&x);
    rm_tree(cache);
}

/* ---------------------------------------------------------------- d */

static void error_test(const char *src)
{
    prog x;
    char err[4096];
    if (make(src, "mlp", 0, 1, PREC_FP32, CG_CONV_CUDNN, "8", &x))
        return;
    /* break the second line of the body of module 0's last kernel */
    cg_module *m = &x.p->modules[0];
    int j = m->nkernels - 1, line = m->kernel_line[j];
    const cg_kernel *K = &x.p->kernels[m->kernels[j]];
    char *s = m->source;
    int l = 1;
    for (; *s && l < line; s++)
        l += *s == '\n';
    /* line: the comment opens the kernel; find the line after "{" */
    while (*s && strncmp(s, "{\n", 2) != 0) {
        if (*s == '\n')
            l++;
        s++;
    }
    s += 2, l++;
    const char *bad = "    undefined_identifier_x = 1;";
    size_t n = strcspn(s, "\n"), bn = strlen(bad);
    if (n < bn) {
        fail("compile error", "no room for the broken line");
        prog_free(&x);
        return;
    }
    memcpy(s, bad, bn);
    memset(s + bn, ' ', n - bn);
    cg_compile_options co = {.cache_dir = ""};
    int rc = cg_compile(x.p, &co, NULL, err, sizeof err);
    char want_line[64];
    snprintf(want_line, sizeof want_line, "line %d of the generated source", l);
    if (rc == 0 || !strstr(err, K->name) || !strstr(err, want_line) ||
        !strstr(err, "undefined_identifier_x") || !strstr(err, "error"))
        fail("compile error", "rc %d, message:\n%s\nwant kernel %s, \"%s\" and the line", rc, err,
             K->name, want_line);
    else
        npassed++;
    printf("a compile error reads:\n%s\n", err);
    prog_free(&x);
}

/* ---------------------------------------------------------------- the bar */

static void bench(const char *src, const char *work)
{
    char cache[4096], err[4096];
    snprintf(cache, sizeof cache, "%s/bench-cache-%d", work, (int)getpid());
    rm_tree(cache);
    for (int run = 0; run < 3; run++) {
        double t0 = now_ms();
        prog x;
        if (make(src, "resnet18", 1, 2, PREC_FP32, CG_CONV_CUDNN, NULL, &x))
            return;
        double t1 = now_ms();
        cg_compile_options co = {.cache_dir = cache, .ptxas_info = 1};
        cg_compile_stats st;
        if (cg_compile(x.p, &co, &st, err, sizeof err)) {
            fail("bench", "%s", err);
            prog_free(&x);
            return;
        }
        double t2 = now_ms();
        printf("resnet18 training step, 2 devices, %s cache: %.0f ms (frontend, passes, plan, "
               "codegen %.0f ms; NVRTC %.0f ms: %d compiles, %d images from the cache; %d kernels "
               "in %d modules)\n", run ? "warm" : "cold", t2 - t0, t1 - t0, t2 - t1, st.compiles,
               st.cache_hits, x.p->nkernels, x.p->nmodules);
        prog_free(&x);
    }
    rm_tree(cache);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_nvrtc SOURCE_DIR WORK_DIR [--bench]\n");
        return 2;
    }
    if (!cg_have_nvrtc()) {
        printf("skipped: built without the CUDA toolkit (no NVRTC)\n");
        return 77;
    }
    printf("NVRTC %s\n", cg_nvrtc_version());
    if (argc > 3 && strcmp(argv[3], "--bench") == 0) {
        bench(argv[1], argv[2]);
        return nfailed ? 1 : 0;
    }
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/models-cache-%d", argv[2], (int)getpid());
    rm_tree(cache);
    every_model(argv[1], cache);
    rm_tree(cache);
    cache_test(argv[1], argv[2]);
    error_test(argv[1]);
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
