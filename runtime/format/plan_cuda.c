/* The CUDA backend's part of a plan (docs/plan.md, "cuda_source" and
 * "kernel_image"): writing a generated, compiled program's modules beside the
 * program, and giving a runtime that program back with its images.
 *
 * The launch lists are not stored: rt_plan_program regenerates them with
 * cg_generate from the plan's own program, memory plan and meta (precision,
 * archs); generation is deterministic, and the regenerated sources must equal
 * the stored ones byte for byte, so the stored images are proven to be the
 * compiles of exactly the kernels the regenerated steps launch.  This is the
 * one place the runtime calls the code generator (codegen.h); everywhere
 * else it reads programs (program.h).  Storing the steps (the reserved
 * section kind 18) would let a plan load without it, at the price of a
 * second format for what the generator already rebuilds exactly. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "codegen.h"
#include "plan.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Appends a line to *t (of *n bytes, room for *cap); -1 when out of memory. */
static int add_line(char **t, size_t *n, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int add_line(char **t, size_t *n, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (!*t || *n + (size_t)len + 2 > *cap) {
        size_t c = (*n + (size_t)len + 2) * 2;
        char *u = base_realloc(*t, c);
        if (!u)
            return -1;
        *t = u, *cap = c;
    }
    va_start(ap, fmt);
    *n += (size_t)vsnprintf(*t + *n, *cap - *n, fmt, ap);
    va_end(ap);
    (*t)[(*n)++] = '\n';
    return 0;
}

/* The tuning section's text (docs/plan.md): a line per convolution whose
 * implementation was chosen, "convolution NAME cudnn|igemm|cudnn-nhwc",
 * then a line per tuned step of the run, "DEVICE STEP gemm HEX" (the 64 bytes of the
 * cublasLtMatmulAlgo_t) or "DEVICE STEP conv ALGO"; NULL when nothing was
 * tuned (or out of memory). */
static char *tuning_text(const cg_program *cg, size_t *len)
{
    size_t cap = 0, n = 0;
    char *t = NULL;
    int rc = 0;
    const signed char *choice = cg->opts.conv_choice;
    for (const ir_node *nd = cg->graph->head; choice && nd && !rc; nd = nd->next)
        if (cg_is_conv(nd) && choice[nd->out[0]->id] >= 0)
            rc = add_line(&t, &n, &cap, "convolution %s %s", nd->out[0]->name,
                          cg_conv_name((cg_conv_impl)choice[nd->out[0]->id]));
    for (int d = 0; d < cg->ndevices && !rc; d++)
        for (int s = 0; s < cg->devices[d].nsteps && !rc; s++) {
            const cg_step *st = &cg->devices[d].steps[s];
            if (st->kind == CG_STEP_GEMM && st->u.gemm.tuned) {
                char hex[129];
                for (int w = 0; w < 8; w++)
                    snprintf(hex + 16 * w, 17, "%016llx", (unsigned long long)st->u.gemm.algo[w]);
                rc = add_line(&t, &n, &cap, "%d %d gemm %s", d, s, hex);
            } else if (st->kind == CG_STEP_CONV && st->u.conv.tuned) {
                rc = add_line(&t, &n, &cap, "%d %d conv %d", d, s, st->u.conv.algo);
            }
        }
    if (rc) {
        base_free(t);
        return NULL;
    }
    *len = n;
    return t;
}

/* Whether the tuning line l (len bytes) is a convolution's choice. */
static int choice_line(const char *l, size_t len)
{
    return len > 12 && strncmp(l, "convolution ", 12) == 0;
}

/* The convolution lines of the tuning section as cg_options.conv_choice
 * (*choice: NULL without any, else the graph's nvalues entries); -1 with the
 * line that names no convolution. */
static int tuning_choices(const rt_plan *p, signed char **choice, char *err, size_t errlen)
{
    *choice = NULL;
    int line = 0;
    for (const char *l = p->tuning; l && *l; line++) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char name[200], impl[16];
        int used = 0;
        if (choice_line(l, len)) {
            char buf[256];
            const ir_value *v = NULL;
            int c = -1;
            if (len < sizeof buf) {
                memcpy(buf, l, len);
                buf[len] = '\0';
                if (sscanf(buf, "convolution %199s %15s%n", name, impl, &used) == 2 &&
                    !buf[used]) {
                    v = ir_find_value(p->g, name);
                    c = cg_conv_lookup(impl);
                }
            }
            if (!*choice && (*choice = base_malloc((size_t)p->g->nvalues + 1)))
                memset(*choice, -1, (size_t)p->g->nvalues + 1);
            if (!*choice) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            if (!v || c < 0 || !v->def || !cg_is_conv(v->def) || v->def->out[0] != v ||
                (*choice)[v->id] >= 0) {
                snprintf(err, errlen, "the plan's tuning, line %d ('%.*s'), names no convolution "
                         "of the program, or one twice: the plan is inconsistent", line + 1,
                         (int)(len < 80 ? len : 80), l);
                base_free(*choice);
                *choice = NULL;
                return -1;
            }
            (*choice)[v->id] = (signed char)c;
        }
        l += len + (end != NULL);
    }
    return 0;
}

/* Applies the tuning section's lines to the regenerated program; -1 with the
 * line that does not fit it. */
static int apply_tuning(cg_program *cg, const char *text, char *err, size_t errlen)
{
    int line = 0;
    for (const char *l = text; *l; line++) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char buf[256], kind[8], hex[129] = "";
        int d, s, algo = -1, used = 0;
        if (choice_line(l, len)) {
            l += len + (end != NULL);       /* tuning_choices' */
            continue;
        }
        if (len >= sizeof buf)
            goto bad;
        memcpy(buf, l, len);
        buf[len] = '\0';
        if (sscanf(buf, "%d %d %7s %n", &d, &s, kind, &used) != 3 || d < 0 ||
            d >= cg->ndevices || s < 0 || s >= cg->devices[d].nsteps)
            goto bad;
        cg_step *st = &cg->devices[d].steps[s];
        if (strcmp(kind, "gemm") == 0 && st->kind == CG_STEP_GEMM) {
            if (strlen(buf + used) != 128 || strspn(buf + used, "0123456789abcdef") != 128)
                goto bad;
            memcpy(hex, buf + used, 128);
            for (int w = 0; w < 8; w++) {
                char word[17];
                memcpy(word, hex + 16 * w, 16);
                word[16] = '\0';
                st->u.gemm.algo[w] = strtoull(word, NULL, 16);
            }
            st->u.gemm.tuned = 1;
        } else if (strcmp(kind, "conv") == 0 && st->kind == CG_STEP_CONV) {
            char *e;
            long v = strtol(buf + used, &e, 10);
            if (e == buf + used || *e || v < 0 || v > 64)
                goto bad;
            algo = (int)v;
            st->u.conv.algo = algo;
            st->u.conv.tuned = 1;
        } else {
            goto bad;
        }
        l += len + (end != NULL);
        continue;
    bad:
        snprintf(err, errlen, "the plan's tuning, line %d ('%.*s'), names no such library step "
                 "of the program: the plan is inconsistent", line + 1, (int)(len < 80 ? len : 80), l);
        return -1;
    }
    return 0;
}

int rt_plan_encode_program(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta,
                           int nmeta, const cg_program *cg, unsigned char **data, size_t *size,
                           char *err, size_t errlen)
{
    return rt_plan_encode_program_with(g, mp, meta, nmeta, cg, NULL, 0, data, size, err, errlen);
}

int rt_plan_encode_program_with(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta,
                                int nmeta, const cg_program *cg, const rt_plan_blob *extra,
                                int nextra, unsigned char **data, size_t *size, char *err,
                                size_t errlen)
{
    if (!cg)
        return rt_plan_encode_with(g, mp, meta, nmeta, extra, nextra, data, size, err, errlen);
    int nblobs = 0;
    for (int m = 0; m < cg->nmodules; m++) {
        if (cg->modules[m].nimages != cg->narchs + 1) {
            snprintf(err, errlen, "module %d has %d images, not a cubin per arch and PTX: "
                     "compile the program first", m, cg->modules[m].nimages);
            return -1;
        }
        nblobs += 1 + cg->modules[m].nimages;
    }
    size_t tuning_len = 0;
    char *tuning = tuning_text(cg, &tuning_len);
    rt_plan_blob *blobs = base_calloc((size_t)nblobs + 2 + (size_t)nextra, sizeof *blobs);
    unsigned char **heads = base_calloc((size_t)nblobs + 1, sizeof *heads);
    int rc = -1, n = 0;
    if (!blobs || !heads) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    /* the sources first, then the images: the order the loader demands */
    for (int pass = 0; pass < 2; pass++)
        for (int m = 0; m < cg->nmodules; m++) {
            const cg_module *M = &cg->modules[m];
            unsigned char sha[32];
            cg_sha256_of(M->source, M->source_len, sha);
            for (int i = pass ? 0 : -1; i < (pass ? M->nimages : 0); i++) {
                const void *body = i < 0 ? (const void *)M->source : M->images[i].data;
                size_t len = i < 0 ? M->source_len : M->images[i].size;
                size_t head = i < 0 ? 40 : 56;
                unsigned char *b = heads[n] = base_calloc(1, head + len);
                if (!b) {
                    snprintf(err, errlen, "out of memory");
                    goto done;
                }
                put32(b, (uint32_t)m);
                if (i < 0) {
                    memcpy(b + 8, sha, 32);
                } else {
                    put32(b + 4, (uint32_t)(M->images[i].ptx != 0));
                    memcpy(b + 8, M->images[i].arch, strnlen(M->images[i].arch, 15));
                    memcpy(b + 24, sha, 32);
                }
                memcpy(b + head, body, len);
                blobs[n++] = (rt_plan_blob){i < 0 ? RT_SECTION_CUDA_SOURCE
                                                  : RT_SECTION_KERNEL_IMAGE,
                                            0, RT_PLAN_ALL_DEVICES, b, head + len};
            }
        }
    int nb = n;
    if (tuning)
        blobs[nb++] = (rt_plan_blob){RT_SECTION_TUNING, 0, RT_PLAN_ALL_DEVICES, tuning,
                                     tuning_len};
    for (int i = 0; i < nextra; i++)
        blobs[nb++] = extra[i];
    rc = rt_plan_encode_with(g, mp, meta, nmeta, blobs, nb, data, size, err, errlen);
done:
    base_free(tuning);
    for (int i = 0; heads && i < n; i++)
        base_free(heads[i]);
    base_free(heads);
    base_free(blobs);
    return rc;
}

cg_program *rt_plan_program(const rt_plan *p, char *err, size_t errlen)
{
    if (p->nmodules == 0) {
        snprintf(err, errlen, "the plan holds no kernels: it was compiled with --no-kernels or "
                 "by a gnc without NVRTC (gnc compile -o again with one)");
        return NULL;
    }
    /* the loader checked both keys where there are modules */
    char archs[CG_MAX_ARCHS][16];
    cg_options o = cg_options_default();
    o.precision = (ir_precision)ir_precision_lookup(rt_plan_meta(p, "precision"));
    /* conv: cudnn (or absent), igemm, cudnn-nhwc, or auto: each convolution as the
     * tuning section says (gnc compile --conv auto --autotune) */
    const char *conv = rt_plan_meta(p, "conv");
    int automatic = conv && strcmp(conv, "auto") == 0;
    signed char *choice = NULL;
    if (conv && !automatic)
        o.conv = (cg_conv_impl)cg_conv_lookup(conv);
    const char *layout = rt_plan_meta(p, "layout"); /* absent: auto */
    if (layout)
        o.layout = (cg_layout)cg_layout_lookup(layout);
    const char *det = rt_plan_meta(p, "deterministic"); /* absent: the fastest algorithms */
    o.deterministic = det && strcmp(det, "1") == 0;
    if (tuning_choices(p, &choice, err, errlen) != 0)
        return NULL;
    if (automatic != (choice != NULL)) {
        snprintf(err, errlen, automatic ? "the plan's convolutions are chosen one by one (conv "
                 "auto), but its tuning section chooses none: the plan is inconsistent"
                 : "the plan's tuning section chooses convolutions one by one, but its conv is "
                 "not auto: the plan is inconsistent");
        base_free(choice);
        return NULL;
    }
    o.conv_choice = choice;
    o.narchs = rt_plan_archs(rt_plan_meta(p, "archs"), archs);
    for (int a = 0; a < o.narchs; a++)
        o.archs[a] = archs[a];
    diag d;
    diag_init(&d);
    cg_program *cg = cg_generate(p->g, p->mp, &o, &d);
    base_free(choice);
    if (!cg) {
        const char *msg = "(no message)";
        for (int i = 0; i < d.n; i++)
            if (d.entries[i].level == DIAG_ERROR) {
                msg = d.entries[i].msg;
                break;
            }
        snprintf(err, errlen, "the plan's program does not generate: %s", msg);
        diag_free(&d);
        return NULL;
    }
    diag_free(&d);
    if (cg->nmodules != p->nmodules) {
        snprintf(err, errlen, "the program generates %d modules, but the plan holds %d: it was "
                 "written by another gnc, or is inconsistent", cg->nmodules, p->nmodules);
        cg_program_free(cg);
        return NULL;
    }
    for (int m = 0; m < cg->nmodules; m++) {
        cg_module *M = &cg->modules[m];
        const rt_plan_module *S = &p->modules[m];
        if (M->source_len != S->source_len || memcmp(M->source, S->source, S->source_len) != 0) {
            snprintf(err, errlen, "module %d: the source generated from the plan's program "
                     "differs from the stored one, which its images were compiled from: it was "
                     "written by another gnc, or is inconsistent", m);
            cg_program_free(cg);
            return NULL;
        }
        M->images = base_calloc((size_t)S->nimages, sizeof *M->images);
        if (!M->images) {
            snprintf(err, errlen, "out of memory");
            cg_program_free(cg);
            return NULL;
        }
        for (int i = 0; i < S->nimages; i++) {
            cg_image *I = &M->images[i];
            *I = S->images[i];
            I->from_cache = 0;
            I->data = base_malloc(I->size);
            if (!I->data) {
                snprintf(err, errlen, "out of memory");
                cg_program_free(cg);
                return NULL;
            }
            memcpy(I->data, S->images[i].data, I->size);
            M->nimages++;
        }
    }
    if (p->tuning && apply_tuning(cg, p->tuning, err, errlen) != 0) {
        cg_program_free(cg);
        return NULL;
    }
    return cg;
}
