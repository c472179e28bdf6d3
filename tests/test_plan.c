/* Plan files (runtime/format/plan.c, docs/plan.md): written, read back, compared,
 * run; and every way a file can be wrong, rejected with its message.
 *
 *   1. Round trips: programs of one and two devices, inference and training,
 *      with shards and a weight computed once, are encoded and decoded: the
 *      IR text, every node result's offset, the arenas and the meta lines
 *      come back equal; the decoded program runs to the same bits as the
 *      original (outputs, loss, updated parameters); encoding is
 *      deterministic, and a decoded plan encodes to the same bytes.
 *   2. Every truncation of a plan, every single-bit flip of it (tens of
 *      thousands) and thousands of random multi-byte corruptions are rejected
 *      with a message.  Thousands more corruptions with their checksums
 *      recomputed reach the checks behind the checksums: each is rejected or
 *      loads as a plan that holds (never a crash: run this under ASan too).
 *   3. Each inconsistency docs/plan.md lists, made on purpose with a small
 *      writer of the format of its own (so the documented layout is checked
 *      too), gives its message: bad magic, version, flags, counts, sizes,
 *      places, padding, unknown and duplicate sections, IR text that does not
 *      parse or verify, device counts that disagree, offsets that are
 *      unaligned, outside their arena or overflowing, overlapping buffers,
 *      inflated arenas, bad meta lines.  Unknown optional sections and the
 *      CUDA backend's optional reserved kinds are skipped; required ones
 *      refused.
 *   4. The contract between the driver and a plan's loader: for models,
 *      strategies and precisions, the GPU program generated from the graph
 *      the driver compiled is the one generated from the plan as a loader
 *      decodes it (every step, argument, region and source), and every value
 *      has the same id in both.
 *
 *   test_plan SOURCE_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "codegen.h"
#include "diag.h"
#include "driver.h"
#include "exec.h"
#include "filecheck.h"
#include "harness.h"
#include "passes.h"
#include "plan.h"

#define check th_check

/* A small program: two inputs, a weight computed once from a parameter (neg),
 * an output and a loss. */
static const char tiny_gir[] =
    "graph tiny {\n"
    "  input %x: f32[2, 4]\n"
    "  input %y: i32[2]\n"
    "  param %w: f32[3, 4] = uniform(-0.5, 0.5)\n"
    "  param %b: f32[3] = zeros\n"
    "  %wn: f32[3, 4] = neg(%w)\n"
    "  %h: f32[2, 3] = dense(%x, %wn, %b)\n"
    "  %r: f32[2, 3] = relu(%h)\n"
    "  %l: f32[] = cross_entropy(%r, %y) {label_smoothing = 0.0, ignore_index = -100, split = 1}\n"
    "  output out = %r\n"
    "  loss %l\n"
    "}\n";

static ir_graph *parse(const char *name, const char *text, size_t len)
{
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse(name, text, len, &d);
    if (g && ir_verify(g, &d) > 0) {
        ir_graph_free(g);
        g = NULL;
    }
    if (!g)
        diag_print(&d, stderr);
    diag_free(&d);
    return g;
}

static ir_graph *load_gir(const char *src, const char *rel)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", src, rel);
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    ir_graph *g = parse(rel, text, len);
    free(text);
    return g;
}

static const rt_plan_kv meta[] = {{"writer", "test_plan"}, {"strategy", "as written"},
                                  {"flags", "--some 'flag value'"}};

/* ---- running a program: inputs by their place, labels in range ---- */

static rt_exec *run(const ir_graph *g, const mp_plan *mp, int steps)
{
    char err[256];
    rt_exec *x = rt_exec_new_planned(g, mp->offset_by_id, mp->device_bytes, err, sizeof err);
    if (!x) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    rt_exec_init_params(x, 5);
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        void *d = rt_exec_data(x, v);
        int64_t n = ir_type_numel(&v->type);
        for (int64_t k = 0; k < n; k++) {
            if (v->type.dtype == IR_I32)
                ((int32_t *)d)[k] = (int32_t)((k + i) % 2);
            else if (v->type.dtype == IR_I64)
                ((int64_t *)d)[k] = strcmp(v->name, AD_INPUT_STEP) == 0 ? 0 : 3;
            else
                ((float *)d)[k] = strcmp(v->name, AD_INPUT_LR) == 0 ? 0.1f
                                : (float)sin(1.0 + (double)k + 10.0 * i);
        }
    }
    for (int s = 0; s < steps; s++)
        if (rt_exec_run(x, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            rt_exec_free(x);
            return NULL;
        }
    return x;
}

static size_t data_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    return (size_t)ir_type_numel(&v->type) * (t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4);
}

/* The same bits from both: outputs, the loss, every parameter. */
static int same_run(const ir_graph *a, const mp_plan *ma, const ir_graph *b, const mp_plan *mb,
                    int steps)
{
    rt_exec *x = run(a, ma, steps), *y = run(b, mb, steps);
    int same = x && y && a->noutputs == b->noutputs && a->nparams == b->nparams;
    for (int i = 0; same && i < a->noutputs; i++)
        same = memcmp(rt_exec_data(x, a->outputs[i].value), rt_exec_data(y, b->outputs[i].value),
                      data_bytes(a->outputs[i].value)) == 0;
    if (same && a->loss)
        same = b->loss && memcmp(rt_exec_data(x, a->loss), rt_exec_data(y, b->loss), 4) == 0;
    for (int i = 0; same && i < a->nparams; i++) {
        const void *p = rt_exec_data(x, a->params[i]), *q = rt_exec_data(y, b->params[i]);
        same = (!p && !q) || (p && q && memcmp(p, q, data_bytes(a->params[i])) == 0);
    }
    rt_exec_free(x);
    rt_exec_free(y);
    return same;
}

/* ---- 1. round trips ---- */

static void round_trip(const char *what, ir_graph *g, int steps)
{
    mp_plan *mp = mp_plan_graph(g);
    char err[1024];
    unsigned char *data = NULL, *again = NULL, *third = NULL;
    size_t size, size2, size3;
    if (rt_plan_encode(g, mp, meta, 3, &data, &size, err, sizeof err) != 0) {
        check(0, "%s: encode: %s", what, err);
        mp_plan_free(mp);
        return;
    }
    check(rt_plan_encode(g, mp, meta, 3, &again, &size2, err, sizeof err) == 0 && size2 == size &&
          memcmp(data, again, size) == 0, "%s: encoding twice gives the same bytes", what);
    rt_plan *p = rt_plan_decode(data, size, what, err, sizeof err);
    check(p != NULL, "%s: decode: %s", what, p ? "" : err);
    if (p) {
        char *t1 = graph_text(g), *t2 = graph_text(p->g);
        check(strcmp(t1, t2) == 0, "%s: the program comes back as the same IR text", what);
        free(t1);
        free(t2);
        int same = p->ndevices == mp->ndevices && p->mp->ndevices == mp->ndevices;
        for (int d = 0; same && d < mp->ndevices; d++)
            same = p->mp->device_bytes[d] == mp->device_bytes[d];
        const ir_node *n = g->head, *m = p->g->head;
        for (; same && n && m; n = n->next, m = m->next)
            for (int i = 0; same && i < n->nout; i++)
                same = mp->offset_by_id[n->out[i]->id] == p->mp->offset_by_id[m->out[i]->id] &&
                       n->device == m->device;
        check(same && !n && !m, "%s: arenas and every offset come back", what);
        check(p->training == (g->nupdates > 0), "%s: the training flag", what);
        same = p->nmeta == 3;
        for (int i = 0; same && i < 3; i++)
            same = strcmp(p->meta[i].key, meta[i].key) == 0 &&
                   strcmp(p->meta[i].value, meta[i].value) == 0;
        check(same, "%s: the meta lines come back", what);
        check(rt_plan_meta(p, "strategy") && strcmp(rt_plan_meta(p, "strategy"), "as written") == 0,
              "%s: rt_plan_meta finds a key", what);
        check(same_run(g, mp, p->g, p->mp, steps), "%s: the plan's program runs to the same bits",
              what);
        /* a decoded plan is a fixed point */
        check(rt_plan_encode(p->g, p->mp, p->meta, p->nmeta, &third, &size3, err, sizeof err) == 0 &&
              size3 == size && memcmp(third, data, size) == 0,
              "%s: a decoded plan encodes to the same bytes", what);
    }
    rt_plan_free(p);
    free(data);
    free(again);
    free(third);
    mp_plan_free(mp);
}

static void test_round_trips(const char *src)
{
    ir_graph *g = parse("tiny.gir", tiny_gir, sizeof tiny_gir - 1);
    round_trip("tiny", g, 1);
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    opt.momentum = 0.9;
    check(g && ad_training_graph(g, &opt, &d) == 0 && ir_verify(g, &d) == 0,
          "tiny's training step");
    diag_free(&d);
    if (g) {
        round_trip("tiny training step", g, 3);
        ir_graph_free(g);
    }
    const char *files[] = {"tests/ir/lenet.gir", "tests/comm/data_parallel.gir",
                           "tests/tensor/mlp.gir", "tests/ir/tiny_lm.gir"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        g = load_gir(src, files[i]);
        check(g != NULL, "%s loads", files[i]);
        if (g)
            round_trip(files[i], g, 1);
        if (g)
            ir_graph_free(g);
    }
}

/* ---- 2. truncations, bit flips, corruptions ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int rejected(const unsigned char *data, size_t size, char *err, size_t errlen)
{
    rt_plan *p = rt_plan_decode(data, size, "bad.gnc", err, errlen);
    rt_plan_free(p);
    return p == NULL && err[0] != '\0';
}

static void test_corruptions(const char *what, const unsigned char *good, size_t size)
{
    char err[1024];
    unsigned char *buf = malloc(size);
    int bad = 0;
    for (size_t n = 0; n < size; n++) {
        memcpy(buf, good, n);
        err[0] = '\0';
        if (!rejected(buf, n, err, sizeof err) && bad++ < 3)
            fprintf(stderr, "  %s: truncated to %zu bytes: loads\n", what, n);
    }
    check(bad == 0, "%s: every truncation (%zu of them) is rejected", what, size);

    bad = 0;
    for (size_t bit = 0; bit < 8 * size; bit++) {
        memcpy(buf, good, size);
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        err[0] = '\0';
        if (!rejected(buf, size, err, sizeof err) && bad++ < 3)
            fprintf(stderr, "  %s: bit %zu flipped: loads\n", what, bit);
    }
    check(bad == 0, "%s: every single-bit flip (%zu of them) is rejected", what, 8 * size);

    bad = 0;
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, good, size);
        int changes = 2 + (int)(next() % 8);
        for (int c = 0; c < changes; c++)
            buf[next() % size] ^= (unsigned char)(1 + next() % 255);
        err[0] = '\0';
        if (!rejected(buf, size, err, sizeof err) && memcmp(buf, good, size) != 0 && bad++ < 3)
            fprintf(stderr, "  %s: corruption %d loads\n", what, k);
    }
    check(bad == 0, "%s: 3000 random corruptions of 2 to 9 bytes are rejected", what);

    /* behind the checksums: anything goes but a crash; what loads must hold */
    int loaded = 0, held = 1;
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, good, size);
        int changes = 1 + (int)(next() % 4);
        for (int c = 0; c < changes; c++) {
            size_t at = next() % size;
            buf[at] = next() % 3 == 0 ? (unsigned char)next() : buf[at] ^ (unsigned char)(1u << (next() % 8));
        }
        rt_plan_fix_checksums(buf, size);
        rt_plan *p = rt_plan_decode(buf, size, "fixed.gnc", err, sizeof err);
        if (p) {
            loaded++;
            char e2[256];
            held &= mp_check(p->g, p->mp, e2, sizeof e2) == 0;
        } else {
            held &= err[0] != '\0';
        }
        rt_plan_free(p);
    }
    check(held, "%s: corruptions with fixed checksums: every one rejected with a message or "
          "loaded as a plan that holds (%d loaded)", what, loaded);
    free(buf);
}

/* ---- 2b. plans with kernels ---- */

/* meta of a plan with kernels: what rt_plan_program regenerates them with */
static const rt_plan_kv kmeta[] = {{"writer", "test_plan"}, {"precision", "fp32"},
                                   {"archs", "sm_80,sm_90"}};

/* g's program generated from its plan as a loader decodes it, with made-up
 * images (a loader checks their form and their source, not their code, so no
 * NVRTC is needed): the bytes of the plan with kernels, or NULL. */
static unsigned char *kernel_plan(ir_graph *g, const rt_plan_kv *m, int nm, const cg_options *o,
                                  size_t *size, cg_program **out, rt_plan **base_out)
{
    mp_plan *mp = mp_plan_graph(g);
    char err[1024];
    unsigned char *data = NULL;
    size_t n;
    rt_plan *base = NULL;
    cg_program *cg = NULL;
    if (rt_plan_encode(g, mp, m, nm, &data, &n, err, sizeof err) == 0)
        base = rt_plan_decode(data, n, "base", err, sizeof err);
    free(data);
    data = NULL;
    if (base) {
        /* a conv_choice by g's value ids, made one by the decoded graph's */
        cg_options oo = o ? *o : cg_options_default();
        signed char *choice = NULL;
        if (oo.conv_choice) {
            choice = malloc((size_t)base->g->nvalues);
            memset(choice, -1, (size_t)base->g->nvalues);
            for (const ir_node *v = base->g->head; v; v = v->next)
                if (cg_is_conv(v))
                    choice[v->out[0]->id] =
                        oo.conv_choice[ir_find_value(g, v->out[0]->name)->id];
            oo.conv_choice = choice;
        }
        diag d;
        diag_init(&d);
        cg = cg_generate(base->g, base->mp, &oo, &d);
        diag_free(&d);
        free(choice);
    }
    check(cg != NULL, "kernels: the program generates (%s)", base ? "" : err);
    for (int i = 0; cg && i < cg->nmodules; i++) {
        cg_module *M = &cg->modules[i];
        M->images = calloc(3, sizeof *M->images);
        static const char *const arch[] = {"sm_80", "sm_90", "compute_90"};
        for (int k = 0; k < 3; k++, M->nimages++) {
            snprintf(M->images[k].arch, sizeof M->images[k].arch, "%s", arch[k]);
            M->images[k].ptx = k == 2;
            M->images[k].size = 40 + 8 * (size_t)k;
            M->images[k].data = malloc(M->images[k].size);
            memset(M->images[k].data, 'a' + i + k, M->images[k].size);
        }
    }
    if (cg && rt_plan_encode_program(g, mp, m, nm, cg, &data, size, err, sizeof err) != 0) {
        check(0, "kernels: encode: %s", err);
        data = NULL;
    }
    mp_plan_free(mp);
    *out = cg;
    *base_out = base;
    return data;
}

static void test_kernels(void)
{
    ir_graph *g = parse("tiny.gir", tiny_gir, sizeof tiny_gir - 1);
    char err[1024];
    size_t size = 0, size2 = 0;
    cg_program *cg = NULL, *cg2 = NULL;
    rt_plan *base = NULL, *base2 = NULL;
    unsigned char *data = kernel_plan(g, kmeta, 3, NULL, &size, &cg, &base);
    unsigned char *again = kernel_plan(g, kmeta, 3, NULL, &size2, &cg2, &base2);
    check(data && again && size == size2 && memcmp(data, again, size) == 0,
          "kernels: encoding twice gives the same bytes");
    rt_plan *p = data ? rt_plan_decode(data, size, "k.gnc", err, sizeof err) : NULL;
    check(p && cg && p->nmodules == cg->nmodules && p->nmodules > 0, "kernels: decode: %s",
          p ? "modules" : err);
    cg_program *back = p ? rt_plan_program(p, err, sizeof err) : NULL;
    check(back != NULL, "kernels: rt_plan_program: %s", back ? "" : err);
    if (back && cg) {
        int same = back->nmodules == cg->nmodules && back->ndevices == cg->ndevices &&
                   back->nkernels == cg->nkernels;
        for (int m = 0; same && m < cg->nmodules; m++) {
            const cg_module *a = &cg->modules[m], *b = &back->modules[m];
            same = a->source_len == b->source_len && strcmp(a->source, b->source) == 0 &&
                   a->nimages == b->nimages;
            for (int i = 0; same && i < a->nimages; i++)
                same = a->images[i].size == b->images[i].size && a->images[i].ptx == b->images[i].ptx &&
                       strcmp(a->images[i].arch, b->images[i].arch) == 0 &&
                       memcmp(a->images[i].data, b->images[i].data, a->images[i].size) == 0;
        }
        for (int d = 0; same && d < cg->ndevices; d++)
            same = back->devices[d].nsteps == cg->devices[d].nsteps &&
                   memcmp(back->devices[d].region_bytes, cg->devices[d].region_bytes,
                          sizeof cg->devices[d].region_bytes) == 0;
        check(same, "kernels: the program comes back: sources, images, steps, regions");
        unsigned char *third = NULL;
        size_t size3 = 0;
        check(rt_plan_encode_program(p->g, p->mp, p->meta, p->nmeta, back, &third, &size3, err,
                                     sizeof err) == 0 && size3 == size &&
              memcmp(third, data, size) == 0, "kernels: a decoded plan encodes to the same bytes");
        free(third);
    }
    cg_program_free(back);
    rt_plan_free(p);

    /* another precision in the meta: the stored sources are not what the
       program generates, so the images cannot be trusted */
    if (g && cg) {
        mp_plan *mp = mp_plan_graph(g);
        rt_plan_kv bf[3] = {kmeta[0], {"precision", "bf16"}, kmeta[2]};
        unsigned char *b = NULL;
        size_t n;
        check(rt_plan_encode_program(g, mp, bf, 3, cg, &b, &n, err, sizeof err) == 0,
              "kernels: encode with another precision: %s", err);
        rt_plan *q = b ? rt_plan_decode(b, n, "bf.gnc", err, sizeof err) : NULL;
        cg_program *x = q ? rt_plan_program(q, err, sizeof err) : NULL;
        check(q && !x && strstr(err, "differs from the stored one"),
              "kernels: sources that the program does not generate are refused: '%s'", err);
        cg_program_free(x);
        rt_plan_free(q);
        free(b);
        /* a way of convolving that codegen does not know */
        rt_plan_kv cv[4] = {kmeta[0], kmeta[1], kmeta[2], {"conv", "winograd"}};
        b = NULL;      /* refused as the writer reads its plan back, or by the loader */
        q = rt_plan_encode_program(g, mp, cv, 4, cg, &b, &n, err, sizeof err) == 0
                ? rt_plan_decode(b, n, "cv.gnc", err, sizeof err) : NULL;
        check(!q && strstr(err, "the meta's conv (winograd) is not cudnn, igemm, cudnn-nhwc or auto"),
              "kernels: an unknown conv in the meta is refused: '%s'", err);
        rt_plan_free(q);
        free(b);
        /* no kernels at all */
        check(rt_plan_encode(g, mp, kmeta, 3, &b, &n, err, sizeof err) == 0, "kernels: plain");
        q = rt_plan_decode(b, n, "plain.gnc", err, sizeof err);
        x = q ? rt_plan_program(q, err, sizeof err) : NULL;
        check(q && !x && strstr(err, "holds no kernels"), "kernels: a plan without: '%s'", err);
        rt_plan_free(q);
        free(b);
        /* a module without its images cannot be written */
        cg->modules[0].nimages--;
        check(rt_plan_encode_program(g, mp, kmeta, 3, cg, &b, &n, err, sizeof err) != 0 &&
              strstr(err, "compile the program first"), "kernels: a missing image: '%s'", err);
        cg->modules[0].nimages++;
        mp_plan_free(mp);
    }
    if (data) {
        test_corruptions("tiny with kernels", data, size);
        /* behind the checksums, through rt_plan_program too: a program or a
           message, never a crash */
        unsigned char *buf = malloc(size);
        int loaded = 0, ok = 1;
        for (int k = 0; k < 2000; k++) {
            memcpy(buf, data, size);
            size_t at = next() % size;
            buf[at] ^= (unsigned char)(1u << (next() % 8));
            rt_plan_fix_checksums(buf, size);
            err[0] = 0;
            rt_plan *q = rt_plan_decode(buf, size, "fixed.gnc", err, sizeof err);
            if (q) {
                loaded++;
                err[0] = 0;
                cg_program *x = rt_plan_program(q, err, sizeof err);
                ok &= x != NULL || err[0] != 0;
                cg_program_free(x);
            } else {
                ok &= err[0] != 0;
            }
            rt_plan_free(q);
        }
        check(ok, "kernels: 2000 bit flips with fixed checksums: a program or a message "
              "(%d loaded)", loaded);
        free(buf);
    }
    cg_program_free(cg);
    cg_program_free(cg2);
    rt_plan_free(base);
    rt_plan_free(base2);
    free(data);
    free(again);
    if (g)
        ir_graph_free(g);
}

/* The tuning section (gnc compile --autotune): a tuned matmul's algorithm
 * comes back in the regenerated step, bit for bit; a line naming a step that
 * is not a matmul is refused with its line. */
static void test_tuning(void)
{
    ir_graph *g = parse("tiny.gir", tiny_gir, sizeof tiny_gir - 1);
    char err[1024];
    size_t size = 0;
    cg_program *cg = NULL;
    rt_plan *base = NULL;
    unsigned char *plain = kernel_plan(g, kmeta, 3, NULL, &size, &cg, &base), *data = NULL;
    int gs = -1;
    for (int s = 0; cg && s < cg->devices[0].nsteps && gs < 0; s++)
        if (cg->devices[0].steps[s].kind == CG_STEP_GEMM)
            gs = s;
    check(gs >= 0, "tuning: tiny has a matmul step");
    if (gs >= 0 && g) {
        cg_gemm *m = &cg->devices[0].steps[gs].u.gemm;
        m->tuned = 1;
        for (int w = 0; w < 8; w++)
            m->algo[w] = 0x0123456789abcdefull * (uint64_t)(w + 1);
        mp_plan *mp = mp_plan_graph(g);
        check(rt_plan_encode_program(g, mp, kmeta, 3, cg, &data, &size, err, sizeof err) == 0,
              "tuning: encode: %s", err);
        mp_plan_free(mp);
    }
    rt_plan *p = data ? rt_plan_decode(data, size, "t.gnc", err, sizeof err) : NULL;
    check(p && p->tuning, "tuning: the section is read back: %s", p ? "none" : err);
    cg_program *back = p ? rt_plan_program(p, err, sizeof err) : NULL;
    check(back && back->devices[0].steps[gs].u.gemm.tuned &&
          memcmp(back->devices[0].steps[gs].u.gemm.algo, cg->devices[0].steps[gs].u.gemm.algo,
                 64) == 0, "tuning: the algorithm comes back: %s", back ? "differs" : err);
    cg_program_free(back);
    rt_plan_free(p);
    /* the line's step made another: refused behind the checksums */
    char *line = NULL;
    for (size_t i = 0; data && i + 5 < size && !line; i++)
        if (memcmp(data + i, " gemm ", 6) == 0)
            line = (char *)data + i;
    if (line) {
        line[-1] = line[-1] == '0' ? '1' : '0';   /* the step number's last digit */
        rt_plan_fix_checksums(data, size);
        p = rt_plan_decode(data, size, "t.gnc", err, sizeof err);
        back = p ? rt_plan_program(p, err, sizeof err) : NULL;
        check(p && !back && strstr(err, "tuning, line 1"), "tuning: a line naming no matmul "
              "is refused: '%s'", err);
        cg_program_free(back);
        rt_plan_free(p);
    }
    check(line != NULL, "tuning: the line is in the file");
    cg_program_free(cg);
    rt_plan_free(base);
    free(plain);
    free(data);
    if (g)
        ir_graph_free(g);
}

/* The plan of g whose convolutions are chosen one by one by choice (nm meta
 * entries of m), edit_from made edit_to in its bytes, decoded (*plan, which
 * the program borrows) and regenerated; NULL where it does not load, with
 * the message in err. */
static cg_program *chosen(ir_graph *g, const rt_plan_kv *m, int nm, const signed char *choice,
                          const char *edit_from, const char *edit_to, rt_plan **plan, char *err,
                          size_t errlen)
{
    cg_options o = cg_options_default();
    o.conv_choice = choice;
    size_t size = 0;
    cg_program *cg = NULL;
    rt_plan *base = NULL;
    unsigned char *data = kernel_plan(g, m, nm, &o, &size, &cg, &base);
    cg_program_free(cg);
    rt_plan_free(base);
    /* a line made another (same length), behind the checksums */
    size_t at = 0, len = edit_from ? strlen(edit_from) : 0;
    while (data && len && at + len <= size && memcmp(data + at, edit_from, len) != 0)
        at++;
    if (data && len && at + len <= size) {
        memcpy(data + at, edit_to, len);
        rt_plan_fix_checksums(data, size);
    }
    check(!len || (data && at + len <= size), "conv choice: '%s' is in the plan", edit_from);
    rt_plan *p = *plan = data ? rt_plan_decode(data, size, "c.gnc", err, errlen) : NULL;
    free(data);
    return p ? rt_plan_program(p, err, errlen) : NULL;
}

/* --conv auto's choices, the tuning section's convolution lines: each
 * convolution comes back as chosen, a cuDNN call, implicit-GEMM kernels, or a
 * channels-last cuDNN call between transposes;
 * lines naming no convolution or no way, choices without conv auto in the
 * meta and conv auto without choices are refused. */
static void test_conv_choice(const char *src)
{
    ir_graph *g = load_gir(src, "tests/ir/lenet.gir");
    diag d;
    diag_init(&d);
    ad_optimizer opt = ad_optimizer_default(AD_SGD);
    check(g && ad_training_graph(g, &opt, &d) == 0 && ir_verify(g, &d) == 0,
          "conv choice: lenet's training step");
    diag_free(&d);
    if (!g)
        return;
    signed char *choice = malloc((size_t)g->nvalues);
    memset(choice, -1, (size_t)g->nvalues);
    int k = 0;
    for (const ir_node *n = g->head; n; n = n->next)
        if (cg_is_conv(n))
            choice[n->out[0]->id] = (signed char)(k++ % CG_CONV_NIMPLS);
    check(k >= 4, "conv choice: lenet's step has forward and backward convolutions (%d)", k);
    rt_plan_kv am[4] = {kmeta[0], kmeta[1], kmeta[2], {"conv", "auto"}};
    char err[1024] = "";
    rt_plan *p = NULL;
    cg_program *back = chosen(g, am, 4, choice, NULL, NULL, &p, err, sizeof err);
    check(back != NULL, "conv choice: the plan loads: %s", err);
    int same = 0, total = 0;
    for (const ir_node *n = g->head; back && n; n = n->next) {
        if (!cg_is_conv(n))
            continue;
        total++;
        /* the regenerated program's node of the same name, and how it runs */
        const ir_value *v = ir_find_value(back->graph, n->out[0]->name);
        int library = 0, kernels = 0, nhwc = 0;
        for (int s = 0; v && s < back->devices[0].nsteps; s++) {
            const cg_step *st = &back->devices[0].steps[s];
            library += st->node == v->def && st->kind == CG_STEP_CONV;
            nhwc += st->node == v->def && st->kind == CG_STEP_CONV && st->u.conv.nhwc;
            kernels += st->node == v->def && st->kind == CG_STEP_KERNEL;
        }
        int want = choice[n->out[0]->id];
        same += v && (int)cg_conv_of(&back->opts, v->def) == want &&
                (want == CG_CONV_IGEMM ? kernels >= 1 && !library
                 : want == CG_CONV_CUDNN_NHWC ? library == 1 && nhwc == 1 && kernels >= 1
                                               : library == 1 && !nhwc);
    }
    check(back && same == total, "conv choice: %d of %d convolutions come back as chosen", same,
          total);
    cg_program_free(back);
    rt_plan_free(p);

    static const struct {
        const char *from, *to, *msg;
    } edits[] = {
        {" igemm\n", " igemx\n", "names no convolution of the program"},
        {" cudnn-nhwc\n", " cudnn-nchw\n", "names no convolution of the program"},
        {"convolution conv1 ", "convolution relu0 ", "names no convolution of the program"},
        {"convolution conv1 ", "convolution cXnv1 ", "names no convolution of the program"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        back = chosen(g, am, 4, choice, edits[i].from, edits[i].to, &p, err, sizeof err);
        check(!back && strstr(err, edits[i].msg) && strstr(err, "tuning, line"),
              "conv choice: '%s' for '%s' is refused: '%s'", edits[i].to, edits[i].from, err);
        cg_program_free(back);
        rt_plan_free(p);
    }
    back = chosen(g, kmeta, 3, choice, NULL, NULL, &p, err, sizeof err);
    check(!back && strstr(err, "but its conv is not auto"),
          "conv choice: choices without conv auto are refused: '%s'", err);
    cg_program_free(back);
    rt_plan_free(p);
    back = chosen(g, am, 4, NULL, NULL, NULL, &p, err, sizeof err);
    check(!back && strstr(err, "chooses none"), "conv choice: conv auto without choices is "
          "refused: '%s'", err);
    cg_program_free(back);
    rt_plan_free(p);
    free(choice);
    ir_graph_free(g);
}

/* ---- 3. inconsistencies, made on purpose ---- */

/* The format again, written here from docs/plan.md: a header, a table, each
 * section at the next multiple of 8, zero padding, CRC-32s. */
typedef struct {
    uint32_t kind, flags, device;
    const void *data;
    size_t size;
} sec;

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint64_t al8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static unsigned char *build(uint32_t version, uint32_t flags, uint32_t devices, const sec *s,
                            int n, size_t *size)
{
    uint64_t at = al8(40 + 32 * (uint64_t)n), total = at;
    for (int i = 0; i < n; i++)
        total = al8(total + s[i].size);
    unsigned char *b = calloc(1, total);
    memcpy(b, "\x89GNC\r\n\x1a\n", 8);
    put32(b + 8, version);
    put32(b + 12, flags);
    put32(b + 16, devices);
    put32(b + 20, (uint32_t)n);
    put64(b + 24, total);
    for (int i = 0; i < n; i++) {
        unsigned char *e = b + 40 + 32 * i;
        put32(e, s[i].kind);
        put32(e + 4, s[i].flags);
        put32(e + 8, s[i].device);
        put32(e + 12, (uint32_t)crc32(crc32(0, Z_NULL, 0), s[i].data, (uInt)s[i].size));
        put64(e + 16, at);
        put64(e + 24, s[i].size);
        memcpy(b + at, s[i].data, s[i].size);
        at = al8(at + s[i].size);
    }
    uLong c = crc32(crc32(0, Z_NULL, 0), b, 36);
    put32(b + 36, (uint32_t)crc32(c, b + 40, (uInt)(32 * n)));
    *size = (size_t)total;
    return b;
}

/* The plan's sections as the encoder wrote them, to build variants from. */
typedef struct {
    unsigned char *file;
    size_t size;
    const unsigned char *program, *memory, *meta;
    size_t program_len, memory_len, meta_len;
    int devices;
} parts;

static int parts_of(ir_graph *g, parts *P)
{
    mp_plan *mp = mp_plan_graph(g);
    char err[512];
    memset(P, 0, sizeof *P);
    int rc = rt_plan_encode(g, mp, meta, 3, &P->file, &P->size, err, sizeof err);
    P->devices = mp->ndevices;
    mp_plan_free(mp);
    if (rc != 0)
        return -1;
    const unsigned char *t = P->file + 40;
    P->program = P->file + get64(t + 16), P->program_len = get64(t + 24);
    P->memory = P->file + get64(t + 48), P->memory_len = get64(t + 56);
    P->meta = P->file + get64(t + 80), P->meta_len = get64(t + 88);
    return 0;
}

/* Builds the plan from P with the program, memory and meta given (NULL: P's),
 * and checks that the loader says want. */
static void expect_case(const char *what, const parts *P, uint32_t version, uint32_t flags,
                        uint32_t devices, const sec *extra, int nextra, const sec *replace,
                        const char *want)
{
    sec s[8] = {
        {1, 1, 0xffffffffu, P->program, P->program_len},
        {2, 1, 0xffffffffu, P->memory, P->memory_len},
        {3, 0, 0xffffffffu, P->meta, P->meta_len},
    };
    int n = 3;
    for (int i = 0; replace && i < 3; i++)
        if (replace[i].data || replace[i].kind)
            s[i] = replace[i];
    for (int i = 0; i < nextra; i++)
        s[n++] = extra[i];
    size_t size;
    unsigned char *b = build(version, flags, devices, s, n, &size);
    char err[1024] = "";
    rt_plan *p = rt_plan_decode(b, size, "case.gnc", err, sizeof err);
    if (!want)
        check(p != NULL, "%s: loads (%s)", what, p ? "" : err);
    else
        check(!p && strstr(err, want), "%s: wants '%s', got '%s'", what, want,
              p ? "(it loads)" : err);
    rt_plan_free(p);
    free(b);
}

static void test_header_cases(const parts *P)
{
    char err[1024];
    expect_case("the format writer here agrees with the encoder", P, RT_PLAN_VERSION, 0, 1, NULL, 0, NULL, NULL);
    size_t size;
    unsigned char *b = build(RT_PLAN_VERSION, 0, 1, (sec[]){{1, 1, 0xffffffffu, P->program, P->program_len},
                                              {2, 1, 0xffffffffu, P->memory, P->memory_len},
                                              {3, 0, 0xffffffffu, P->meta, P->meta_len}},
                             3, &size);
    check(size == P->size && memcmp(b, P->file, size) == 0,
          "docs/plan.md's layout is the encoder's, byte for byte");

    unsigned char *c = malloc(size + 8);
    struct { const char *what; size_t at; unsigned char value; const char *want; } pokes[] = {
        {"bad magic", 1, 'X', "not a gnc plan file"},
        {"version 1", 8, 1, "plan format version 1, written by test_plan; this gnc ("
                              GNC_VERSION ") reads version 2: compile the model again"},
        {"version 3", 8, 3, "reads version 2: it needs a newer gnc"},
    };
    for (size_t i = 0; i < sizeof pokes / sizeof *pokes; i++) {
        memcpy(c, b, size);
        c[pokes[i].at] = pokes[i].value;
        check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, pokes[i].want),
              "%s: wants '%s', got '%s'", pokes[i].what, pokes[i].want, err);
    }
    memcpy(c, b, size);
    memset(c + size, 0, 8);
    check(!rt_plan_decode(c, size + 8, "x.gnc", err, sizeof err) &&
          strstr(err, "bytes after the end"), "8 bytes appended: '%s'", err);
    check(!rt_plan_decode(c, 20, "x.gnc", err, sizeof err) &&
          strstr(err, "shorter than the 40-byte header"), "20 bytes: '%s'", err);
    check(!rt_plan_decode(c, size - 8, "x.gnc", err, sizeof err) && strstr(err, "truncated"),
          "8 bytes short: '%s'", err);
    /* a size the header claims that no file has: refused before anything is read */
    memcpy(c, b, size);
    put64(c + 24, UINT64_MAX);
    rt_plan_fix_checksums(c, size);
    check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "truncated"),
          "file size 2^64 - 1: '%s'", err);
    /* the file ends 1 byte into the next-to-last section, which is cut to that
       byte (the fuzzer's find): the last section's padding lies past the end,
       and is not read (a buffer of exactly that size, for ASan) */
    {
        uint32_t nsec = (uint32_t)(get64(b + 16) >> 32); /* after the device count */
        unsigned char *e = b + RT_PLAN_HEADER_BYTES + (size_t)(nsec - 2) * RT_PLAN_ENTRY_BYTES;
        size_t end = (size_t)get64(e + 16) + 1;
        unsigned char *cut = malloc(end);
        memcpy(cut, b, end);
        put64(cut + (e - b) + 24, 1);
        put64(cut + 24, end);
        rt_plan_fix_checksums(cut, end);
        check(nsec >= 2 && !rt_plan_decode(cut, end, "x.gnc", err, sizeof err) &&
                  strstr(err, "after the file's end"),
              "a section ending unaligned at the file's end, one more after it: '%s'", err);
        free(cut);
    }
    /* the last section's size near 2^64: no overflow */
    memcpy(c, b, size);
    put64(c + 40 + 64 + 24, UINT64_MAX - 4);
    rt_plan_fix_checksums(c, size);
    check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "runs past the end"),
          "a section of 2^64 - 5 bytes: '%s'", err);
    memcpy(c, b, size);
    put64(c + 40 + 32 + 16, get64(c + 40 + 32 + 16) + 8);
    rt_plan_fix_checksums(c, size);
    check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "where it belongs"),
          "a section out of its place: '%s'", err);
    memcpy(c, b, size);
    put32(c + 20, 70000);
    rt_plan_fix_checksums(c, size);
    check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "70000 sections"),
          "70000 sections: '%s'", err);
    memcpy(c, b, size);
    put32(c + 20, 1000);
    check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "after the file's end"),
          "a table past the end: '%s'", err);
    /* padding: the program's text length is not a multiple of 8 in these plans */
    uint64_t pad = get64(b + 40 + 16) + get64(b + 40 + 24);
    memcpy(c, b, size);
    if (pad % 8) {
        c[pad] = 1;
        check(!rt_plan_decode(c, size, "x.gnc", err, sizeof err) && strstr(err, "is not 0"),
              "a padding byte set: '%s'", err);
    }
    free(c);
    free(b);

    expect_case("unknown header flag", P, RT_PLAN_VERSION, 4, 1, NULL, 0, NULL, "unknown header flags 0x4");
    expect_case("0 devices", P, RT_PLAN_VERSION, 0, 0, NULL, 0, NULL, "0 devices");
    expect_case("5000 devices", P, RT_PLAN_VERSION, 0, 5000, NULL, 0, NULL, "5000 devices");
    expect_case("header says training", P, RT_PLAN_VERSION, 1, 1, NULL, 0, NULL,
                "the header says a training step, but the program has no updates");
    expect_case("header says 2 devices", P, RT_PLAN_VERSION, 0, 2, NULL, 0, NULL,
                "the header says 2 devices, but the program runs on 1");
}

static void test_section_cases(const parts *P)
{
    static const char junk[] = "some bytes of a future section";
    sec unknown_opt = {99, 0, 0xffffffffu, junk, sizeof junk};
    sec unknown_req = {99, 1, 0xffffffffu, junk, sizeof junk};
    sec cuda = {17, 0, 0, "sm_90\0cubin...", 15};
    sec cuda_req = {18, 1, 0, "steps", 5};
    expect_case("an unknown optional section is skipped", P, RT_PLAN_VERSION, 0, 1, &unknown_opt, 1, NULL, NULL);
    sec steps = {18, 0, 0, "steps", 5};
    expect_case("the CUDA backend's kinds not read yet are skipped when optional", P, RT_PLAN_VERSION, 0, 1,
                &steps, 1, NULL, NULL);
    expect_case("... and refused when required", P, RT_PLAN_VERSION, 0, 1, (sec[]){steps, cuda_req}, 2, NULL,
                "(steps) is required, and this gnc does not read its kind");
    expect_case("a kernel image without its source", P, RT_PLAN_VERSION, 0, 1, &cuda, 1, NULL,
                "kernel images, but no cuda_source section");
    expect_case("an unknown required section", P, RT_PLAN_VERSION, 0, 1, &unknown_req, 1, NULL,
                "has kind 99, unknown to this gnc (plan format 2), and is required");
    sec dev5 = {99, 0, 5, junk, sizeof junk};
    expect_case("a section for device 5 of 1", P, RT_PLAN_VERSION, 0, 1, &dev5, 1, NULL,
                "is for device 5, but the plan has 1");
    sec flag2 = {99, 2, 0xffffffffu, junk, sizeof junk};
    expect_case("unknown section flags", P, RT_PLAN_VERSION, 0, 1, &flag2, 1, NULL, "unknown flags 0x2");
    sec second = {1, 1, 0xffffffffu, P->program, P->program_len};
    expect_case("two programs", P, RT_PLAN_VERSION, 0, 1, &second, 1, NULL, "a second program section");
    sec per_dev = {3, 0, 0, P->meta, P->meta_len};
    expect_case("meta for one device", P, RT_PLAN_VERSION, 0, 1, NULL, 0, (sec[]){{0}, {0}, per_dev},
                "names device 0; it is the whole program's");
    sec none = {99, 0, 0xffffffffu, "", 0};
    expect_case("no memory section", P, RT_PLAN_VERSION, 0, 1, NULL, 0, (sec[]){{0}, none, {0}},
                "no memory section");

    /* the program */
    const char *bad_ir = "graph g {\n  input %x: f33[2]\n}\n";
    expect_case("IR that does not parse", P, RT_PLAN_VERSION, 0, 1, NULL, 0,
                (sec[]){{1, 1, 0xffffffffu, bad_ir, strlen(bad_ir)}, {0}, {0}},
                "the IR text does not parse: program:2:13: unknown dtype 'f33'");
    const char *unverified = "graph g {\n  input %x: f32[2]\n  %y: f32[3] = relu(%x)\n"
                             "  output y = %y\n}\n";
    expect_case("IR that does not verify", P, RT_PLAN_VERSION, 0, 1, NULL, 0,
                (sec[]){{1, 1, 0xffffffffu, unverified, strlen(unverified)}, {0}, {0}},
                "the program does not verify");
    expect_case("an empty program", P, RT_PLAN_VERSION, 0, 1, NULL, 0,
                (sec[]){{1, 1, 0xffffffffu, "", 0}, {0}, {0}}, "does not parse");

    /* meta lines */
    const char *metas[][2] = {
        {"writer=x\nno equals sign\n", "line 2 is not key=value"},
        {"Writer=x\n", "line 1 is not key=value"},
        {"a=1\na=2\n", "key a on line 2 is there before"},
        {"a=1", "does not end in a newline"},
        {"devices=2\n", "devices=2, but the header says 1"},
        {"a=tab\there\n", "line 1 is not key=value"},
    };
    for (size_t i = 0; i < sizeof metas / sizeof *metas; i++)
        expect_case(metas[i][0], P, RT_PLAN_VERSION, 0, 1, NULL, 0,
                    (sec[]){{0}, {0}, {3, 0, 0xffffffffu, metas[i][0], strlen(metas[i][0])}},
                    metas[i][1]);
    expect_case("empty meta", P, RT_PLAN_VERSION, 0, 1, NULL, 0, (sec[]){{0}, {0}, {3, 0, 0xffffffffu, "", 0}},
                NULL);
}

/* The end of the last buffer of a memory section of one device whose buffers
 * are all 256 bytes (tiny's). */
static uint64_t ends(const unsigned char *m, int nres)
{
    uint64_t end = 0;
    for (int i = 0; i < nres; i++) {
        uint64_t o = get64(m + 24 + 8 * (size_t)i);
        if (o != UINT64_MAX && o + 256 > end)
            end = o + 256;
    }
    return end;
}

/* Variants of the memory section of a one-device plan: m[] is 8 bytes of
 * counts, the arena, the result count, then an offset per node result. */
static void test_memory_cases(const parts *P, const ir_graph *g)
{
    size_t n = P->memory_len;
    unsigned char *m = malloc(n + 64);
    sec rep[3] = {{0}, {2, 1, 0xffffffffu, m, n}, {0}};
    int nres = 0, h = -1, r = -1, wn = -1, x = -1;
    ir_for_each_node(g, node) {
        const char *name = node->out[0]->name;
        if (strcmp(name, "h") == 0) h = nres;
        if (strcmp(name, "r") == 0) r = nres;
        if (strcmp(name, "wn") == 0) wn = nres;
        if (strcmp(name, "l") == 0) x = nres;
        nres += node->nout;
    }
    check(h >= 0 && r >= 0 && wn >= 0 && x >= 0, "tiny's results are where they should be");
    unsigned char *off = m + 24;
    int64_t arena = (int64_t)get64(P->memory + 8);

#define CASE(what, edit, want)                                  \
    do {                                                        \
        memcpy(m, P->memory, n);                                \
        rep[1].size = n;                                        \
        edit;                                                   \
        expect_case(what, P, RT_PLAN_VERSION, 0, 1, NULL, 0, rep, want);      \
    } while (0)

    CASE("the memory section as written", (void)0, NULL);
    CASE("2 devices in memory", put32(m, 2), "section memory: 2 devices, but the header says 1");
    CASE("memory reserved field", put32(m + 4, 7), "reserved field is 7");
    CASE("memory of 6 bytes", rep[1].size = 6, "too short for its counts");
    CASE("memory without its arenas", rep[1].size = 12, "too short for 1 arenas");
    CASE("one result fewer", put64(m + 16, (uint64_t)nres - 1),
         "but 3 node results take 8 bytes each");
    CASE("2^61 results", put64(m + 16, (uint64_t)1 << 61), "node results take 8 bytes each");
    CASE("an offset missing", (put64(m + 16, (uint64_t)nres - 1), rep[1].size = n - 8),
         "offsets of 3 node results, but the program has 4");
    CASE("an unaligned offset", put64(off + 8 * (size_t)r, 8), "at offset 8 does not fit");
    CASE("an offset past the arena", put64(off + 8 * (size_t)r, (uint64_t)arena),
         "does not fit, aligned to 256, in device 0's arena");
    CASE("an offset of 2^63 - 256", put64(off + 8 * (size_t)r, ((uint64_t)1 << 63) - 256),
         "does not fit");
    CASE("an offset of -512", put64(off + 8 * (size_t)r, (uint64_t)-512), "does not fit");
    CASE("an arena of 2^62", put64(m + 8, (uint64_t)1 << 62), "beyond any memory");
    CASE("an arena larger than its buffers", put64(m + 8, (uint64_t)arena + 256),
         "but its buffers end at");
    CASE("an arena value without a place", put64(off + 8 * (size_t)h, UINT64_MAX),
         "the memory plan does not hold: %h has no aligned place");
    CASE("a weight computed once in the arena", put64(off + 8 * (size_t)wn, 0),
         "the memory plan does not hold: %wn is computed once but placed in the arena");
    /* h and the loss are not in place of each other and both live at the
       cross_entropy: the same offset collides (r takes h's place in place) */
    CASE("two live buffers overlapping",
         (put64(off + 8 * (size_t)x, get64(off + 8 * (size_t)r)), put64(m + 8, ends(m, nres))),
         "overlap while both are live");
#undef CASE
    free(m);
}

/* ---- 4. the contract between the driver and a plan's loader ---- */

static void put_ref(FILE *f, cg_ref r)
{
    fprintf(f, " %d+%lld", (int)r.region, (long long)r.offset);
}

/* cg as text: every device's regions, values and steps with every field a
 * runtime reads, the kernels' names and the modules' sources. */
static char *program_text(const cg_program *cg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int d = 0; d < cg->ndevices; d++) {
        const cg_device *D = &cg->devices[d];
        fprintf(f, "device %d regions %lld %lld %lld %lld\n", d, (long long)D->region_bytes[0],
                (long long)D->region_bytes[1], (long long)D->region_bytes[2],
                (long long)D->region_bytes[3]);
        for (int i = 0; i < D->nvalues; i++) {
            const cg_value *v = &D->values[i];
            fprintf(f, "value %d %s %d %lld %lld", (int)v->kind, v->name, (int)v->dtype,
                    (long long)v->numel, (long long)v->bytes);
            put_ref(f, v->at);
            fputc('\n', f);
        }
        for (int list = 0; list < 2; list++)
            for (int i = 0; i < (list ? D->nsteps : D->ninit); i++) {
                const cg_step *s = list ? &D->steps[i] : &D->init[i];
                fprintf(f, "%s %d: %d %s %s wait %d %lld %lld %lld:", list ? "step" : "init", i,
                        (int)s->kind, s->node ? s->node->out[0]->name : "-",
                        s->what ? s->what : "-", s->wait, (long long)s->read_bytes,
                        (long long)s->written_bytes, (long long)s->elements);
                if (s->kind == CG_STEP_KERNEL) {
                    const cg_launch *l = &s->u.launch;
                    fprintf(f, " %s %u %u %u %u %u %u %d", cg->kernels[l->kernel].name,
                            l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                            l->block[2], l->shared_bytes);
                    for (int a = 0; a < l->nargs; a++) {
                        fprintf(f, " %d:%lld:%a", (int)l->args[a].kind, (long long)l->args[a].i,
                                (double)l->args[a].f);
                        put_ref(f, l->args[a].buf);
                    }
                } else if (s->kind == CG_STEP_GEMM) {
                    const cg_gemm *m = &s->u.gemm;
                    fprintf(f, " %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %a %a %d "
                            "%d %d %d %d %d %lld %d", m->trans_a, m->trans_b, (long long)m->m,
                            (long long)m->n, (long long)m->k, (long long)m->lda,
                            (long long)m->ldb, (long long)m->ldc, (long long)m->batch,
                            (long long)m->stride_a, (long long)m->stride_b,
                            (long long)m->stride_c, (double)m->alpha, (double)m->beta,
                            (int)m->type_a, (int)m->type_b, (int)m->type_d, (int)m->type_bias,
                            (int)m->compute, (int)m->epilogue, (long long)m->workspace_bytes,
                            m->tuned);
                    put_ref(f, m->a), put_ref(f, m->b), put_ref(f, m->c), put_ref(f, m->d);
                    put_ref(f, m->bias), put_ref(f, m->workspace);
                } else if (s->kind == CG_STEP_CONV) {
                    const cg_conv *c = &s->u.conv;
                    fprintf(f, " %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %d %d %d %d %d "
                            "%d %d %d %d %d %d %d %d %a %a %lld %d", (int)c->kind,
                            (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w,
                            (long long)c->k, (long long)c->r, (long long)c->s, (long long)c->p,
                            (long long)c->q, c->pad[0], c->pad[1], c->stride[0], c->stride[1],
                            c->dilation[0], c->dilation[1], c->groups, c->has_bias, c->has_z,
                            c->relu, c->nhwc, (int)c->dtype, (int)c->math, (double)c->alpha,
                            (double)c->beta, (long long)c->workspace_bytes, c->tuned);
                    put_ref(f, c->x), put_ref(f, c->wt), put_ref(f, c->y), put_ref(f, c->bias);
                    put_ref(f, c->z), put_ref(f, c->workspace);
                } else if (s->kind == CG_STEP_COMM) {
                    const cg_comm *c = &s->u.comm;
                    fprintf(f, " %d %lld %d %d %d %d %d %d %d %lld %d", (int)c->op,
                            (long long)c->id, c->ngroup, c->rank, c->peer, c->root, c->ntensors,
                            (int)c->dtype, c->reduce_max, (long long)c->bytes, c->local_kernel);
                    for (int k = 0; k < c->ngroup; k++)
                        fprintf(f, " g%lld", (long long)c->group[k]);
                    for (int k = 0; k < c->ntensors; k++) {
                        fprintf(f, " %lld", (long long)c->count[k]);
                        put_ref(f, c->send[k]), put_ref(f, c->recv[k]);
                    }
                } else {
                    fprintf(f, " %lld", (long long)s->u.copy.bytes);
                    put_ref(f, s->u.copy.src), put_ref(f, s->u.copy.dst);
                }
                fputc('\n', f);
            }
    }
    for (int m = 0; m < cg->nmodules; m++)
        fprintf(f, "module %d\n%s\n", m, cg->modules[m].source);
    fclose(f);
    return text;
}

/* The driver generates a plan's kernels from the graph it compiled, not from
 * the plan as a loader decodes it: the two must be one program.  The passes
 * end with ir_graph_renumber, so the compiled graph numbers its values as
 * ir_parse numbers the plan's text; here each configuration's program, from
 * the compiled graph and from the decoded plan, is the same text (steps,
 * arguments, regions, sources). */
static void test_contract(const char *src)
{
    static const struct {
        const char *model, *define;
        int train, devices, strategy, precision, adam;
    } cases[] = {
        {"models/mlp.net", "batch=4", 0, 1, PT_DATA, PREC_FP32, 0},
        {"models/mlp.net", "batch=4", 1, 2, PT_TENSOR, PREC_FP32, 1},
        {"models/lenet.net", "batch=8", 1, 2, PT_DATA, PREC_BF16, 0},
        {"models/lenet.net", "batch=8", 1, 2, PT_PIPELINE, PREC_FP16, 0},
        {"models/resnet18.net", "batch=4", 1, 1, PT_DATA, PREC_BF16, 1},
        {"models/resnet18.net", "batch=4", 1, 2, PT_DATA, PREC_FP32, 0},
    };
    FILE *quiet = fopen("/dev/null", "w");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[4096], name[16], what[256];
        snprintf(path, sizeof path, "%s/%s", src, cases[i].model);
        const char *eq = strchr(cases[i].define, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - cases[i].define), cases[i].define);
        snprintf(what, sizeof what, "contract: %s %s%s on %d (strategy %d, %s)",
                 cases[i].model, cases[i].train ? "training" : "inference",
                 cases[i].adam ? " with adam" : "", cases[i].devices, cases[i].strategy,
                 ir_precision_name((ir_precision)cases[i].precision));
        drv_config c = {.file = path, .train = cases[i].train,
                        .opt = ad_optimizer_default(cases[i].adam ? AD_ADAM : AD_SGD),
                        .part = {.devices = cases[i].devices,
                                 .strategy = (pt_strategy)cases[i].strategy},
                        .precision = cases[i].precision, .flags = "", .log = quiet,
                        .ndefines = 1};
        c.define_names[0] = name;
        c.define_values[0] = eq + 1;
        diag d;
        diag_init(&d);
        drv_program p;
        if (drv_compile(&c, NULL, 0, c.train, &p, &d) != 0) {
            check(0, "%s: compiles (%s)", what, d.n ? d.entries[0].msg : "");
            diag_free(&d);
            continue;
        }
        cg_options co = cg_options_default();
        co.precision = (ir_precision)cases[i].precision;
        cg_program *mine = cg_generate(p.g, p.mp, &co, &d);
        char err[1024];
        unsigned char *bytes = NULL;
        size_t size = 0;
        rt_plan *base = NULL;
        if (rt_plan_encode(p.g, p.mp, NULL, 0, &bytes, &size, err, sizeof err) == 0)
            base = rt_plan_decode(bytes, size, "contract", err, sizeof err);
        cg_program *theirs = base ? cg_generate(base->g, base->mp, &co, &d) : NULL;
        check(mine && theirs, "%s: both generate (%s)", what, base ? "" : err);
        /* a session runs the plan's graph with the compiled graph's program,
           which finds a value's place by its id */
        int ids = base && base->g->nvalues == p.g->nvalues, nodes = 0;
        for (const ir_node *n = p.g->head; base && n; n = n->next, nodes++)
            for (int k = 0; k < n->nout; k++) {
                const ir_value *w = ir_find_value(base->g, n->out[k]->name);
                ids &= w && w->id == n->out[k]->id;
            }
        for (int k = 0; base && k < p.g->nparams; k++)
            ids &= ir_find_value(base->g, p.g->params[k]->name)->id == p.g->params[k]->id;
        for (int k = 0; base && k < p.g->ninputs; k++)
            ids &= ir_find_value(base->g, p.g->inputs[k]->name)->id == p.g->inputs[k]->id;
        check(ids, "%s: every value of the compiled graph (%d nodes) has the id the plan's "
              "loader gives it", what, nodes);
        if (mine && theirs) {
            char *a = program_text(mine), *b = program_text(theirs);
            size_t at = 0;
            while (a[at] && a[at] == b[at])
                at++;
            check(strcmp(a, b) == 0, "%s: the compiled graph's program is the decoded plan's "
                  "(%zu bytes alike, then '%.60s' against '%.60s')", what, at, a + at, b + at);
            free(a);
            free(b);
        }
        cg_program_free(mine);
        cg_program_free(theirs);
        rt_plan_free(base);
        free(bytes);
        drv_candidates_free(p.plan);
        drv_program_free(&p);
        diag_free(&d);
    }
    fclose(quiet);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_plan SOURCE_DIR\n");
        return 2;
    }
    rt_set_threads(1);
    test_round_trips(argv[1]);
    test_kernels();
    test_tuning();
    test_conv_choice(argv[1]);
    test_contract(argv[1]);

    ir_graph *g = parse("tiny.gir", tiny_gir, sizeof tiny_gir - 1);
    parts P;
    if (!g || parts_of(g, &P) != 0) {
        fprintf(stderr, "FAIL: tiny does not encode\n");
        return 1;
    }
    test_corruptions("tiny", P.file, P.size);
    ir_graph *dp = load_gir(argv[1], "tests/comm/data_parallel.gir");
    parts Q;
    if (dp && parts_of(dp, &Q) == 0) {
        test_corruptions("data_parallel", Q.file, Q.size);
        free(Q.file);
    } else {
        check(0, "data_parallel encodes");
    }
    if (dp)
        ir_graph_free(dp);
    test_header_cases(&P);
    test_section_cases(&P);
    test_memory_cases(&P, g);
    free(P.file);
    ir_graph_free(g);
    printf("test_plan: %d passed, %d failed\n", th_passed, th_failed);
    return th_failed ? 1 : 0;
}
