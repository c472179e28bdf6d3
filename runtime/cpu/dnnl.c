/* Convolutions on oneDNN (libdnnl, built with GNC_HAVE_DNNL; see kernels.h).
 *
 * Each convolution node gets its primitive the first time it runs, kept on the
 * executor for every later run: creating one costs far more than running it.
 * The executor's values stay plain NCHW; oneDNN picks the layouts it computes
 * fastest in (blocked channels on this CPU), and the operands are reordered
 * into them and the result back out, each run.  The weights of an inference
 * program are reordered once: at the first run, and again after
 * rt_exec_weights_changed.
 *
 * oneDNN runs on the executor's OpenMP threads (Debian's libdnnl is its OpenMP
 * build, the same libgomp).  A primitive is made for the number of threads it
 * will run on, so one made under another count, or outside a parallel region
 * and now inside one, is made again.
 *
 * The forward pass and the input's gradient split the work by output elements
 * and sum each one on one thread, so their bits do not depend on the number of
 * threads (tests/test_threads.c checks it).  The weight's gradient is left to
 * OpenBLAS (grad.c): oneDNN sums its images across threads.  A training
 * program's convolutions stay on OpenBLAS too unless GNC_DNNL=all is in the
 * environment (rt_dnnl_conv says why); GNC_DNNL=0 turns oneDNN off. */
#include "kernels.h"

#include <stdlib.h>

#ifndef GNC_HAVE_DNNL

int rt_dnnl_enabled(void) { return 0; }

int rt_dnnl_conv(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    (void)x, (void)n, (void)err, (void)errlen;
    return 0;
}

void rt_dnnl_free(struct rt_dnnl *d) { (void)d; }

#else

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#define fail base_fail

/* One operand of a primitive: the executor's plain buffer (user), and where
 * the primitive wants another layout, its own copy (mem) with the reorder
 * between them (into the copy for an input, out of it for the result). */
typedef struct {
    dnnl_memory_t user, mem;
    dnnl_primitive_t reorder;
    int arg;
    size_t bytes;             /* mem's: the weights' own, the others' in the workspace */
    dnnl_memory_t pad;        /* the reorder's scratchpad, if it needs one */
    size_t pad_bytes;
} port;

enum { P_SRC, P_WEI, P_BIAS, P_DST, NPORTS };

typedef struct {
    dnnl_primitive_t prim;    /* NULL: oneDNN declined; the node runs on OpenBLAS */
    dnnl_memory_t pad;        /* its scratchpad, if it needs one */
    size_t pad_bytes;
    port p[NPORTS];
    int nports;
    int nthr, nested;         /* the threads it was made for */
    int weights_kept;         /* p[P_WEI].mem holds this program's weights */
} conv_prim;

struct rt_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    /* every primitive's scratchpad is ours (in work): oneDNN's own is shared
       by all primitives, and a primitive may then run only on the thread that
       made it, which an executor driven from several threads cannot promise */
    dnnl_primitive_attr_t attr;
    conv_prim **by_value;     /* by the node's result id */
    int nvalues;
    /* the activations' copies in the primitives' layouts, for the
       convolution running now: one at a time, so shared by all */
    char *work;
    size_t work_bytes;
    int off;                  /* GNC_DNNL=0 in the environment: OpenBLAS throughout, to
                                 compare the two paths in one build */
    int train_all;            /* a training program's convolutions too (GNC_DNNL=all;
                                 see rt_dnnl_conv) */
    int trains;               /* the program computes weight gradients */
};

#define OK(call) ((call) == dnnl_success)

static void port_free(port *p)
{
    if (p->reorder)
        dnnl_primitive_destroy(p->reorder);
    if (p->mem)
        dnnl_memory_destroy(p->mem);
    if (p->pad)
        dnnl_memory_destroy(p->pad);
    if (p->user)
        dnnl_memory_destroy(p->user);
    *p = (port){0};
}

static void prim_free(conv_prim *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nports; i++)
        port_free(&c->p[i]);
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->pad)
        dnnl_memory_destroy(c->pad);
    free(c);
}

void rt_dnnl_free(struct rt_dnnl *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->nvalues; i++)
        prim_free(d->by_value[i]);
    free(d->by_value);
    free(d->work);
    if (d->attr)
        dnnl_primitive_attr_destroy(d->attr);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}

/* The scratchpad that primitive pd asks for: *mem over none of its own
 * (placed in the workspace at each run), *bytes long; none where 0. */
static int scratch_init(struct rt_dnnl *d, const_dnnl_primitive_desc_t pd, dnnl_memory_t *mem,
                        size_t *bytes)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    return !*bytes || OK(dnnl_memory_create(mem, md, d->eng, DNNL_MEMORY_NONE)) ? 0 : -1;
}

/* Port arg of primitive pd whose plain layout is user_md: the primitive's own
 * layout is queried (q, index: the bias is the weights' second), with a
 * reorder where it differs.  out: the reorder runs from the primitive's copy to
 * the user's buffer.  own: the copy is the port's own (weights kept from run to
 * run), else it lies in the shared workspace. */
static int port_init(struct rt_dnnl *d, port *p, int arg, const dnnl_memory_desc_t *user_md,
                     const_dnnl_primitive_desc_t pd, dnnl_query_t q, int index, int out,
                     int own)
{
    p->arg = arg;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, index);
    if (!md || !OK(dnnl_memory_create(&p->user, user_md, d->eng, DNNL_MEMORY_NONE)))
        return -1;
    if (dnnl_memory_desc_equal(md, user_md))
        return 0;
    dnnl_primitive_desc_t rpd;
    p->bytes = dnnl_memory_desc_get_size(md);
    void *handle = own ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE;
    if (!OK(dnnl_memory_create(&p->mem, md, d->eng, handle)) ||
        !OK(dnnl_reorder_primitive_desc_create(&rpd, out ? md : user_md, d->eng,
                                               out ? user_md : md, d->eng, d->attr)))
        return -1;
    int rc = OK(dnnl_primitive_create(&p->reorder, rpd)) &&
             !scratch_init(d, rpd, &p->pad, &p->pad_bytes) ? 0 : -1;
    dnnl_primitive_desc_destroy(rpd);
    return rc;
}

static int reorder(struct rt_dnnl *d, const port *p, int out)
{
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, out ? p->mem : p->user},
                            {DNNL_ARG_TO, out ? p->user : p->mem},
                            {DNNL_ARG_SCRATCHPAD, p->pad}};
    return OK(dnnl_primitive_execute(p->reorder, d->stream, p->pad ? 3 : 2, a)) ? 0 : -1;
}

int rt_dnnl_enabled(void)
{
    const char *env = getenv("GNC_DNNL");
    return !(env && strcmp(env, "0") == 0);
}

static struct rt_dnnl *state(rt_exec *x)
{
    if (x->dnnl)
        return x->dnnl;
    struct rt_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->off = !rt_dnnl_enabled();
    const char *env = getenv("GNC_DNNL");
    d->train_all = env && strcmp(env, "all") == 0;
    d->trains = x->g->nupdates > 0;
    for (const ir_node *n = x->g->head; n; n = n->next)
        d->trains |= n->op == IR_OP_CONV2D_GRAD_WEIGHT;
    d->nvalues = x->nvalues;
    d->by_value = calloc((size_t)x->nvalues, sizeof *d->by_value);
    if (!d->by_value || !OK(dnnl_engine_create(&d->eng, dnnl_cpu, 0)) ||
        !OK(dnnl_primitive_attr_create(&d->attr)) ||
        !OK(dnnl_primitive_attr_set_scratchpad_mode(d->attr, dnnl_scratchpad_mode_user)) ||
        !OK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags))) {
        rt_dnnl_free(d);
        return NULL;
    }
    return x->dnnl = d;
}

/* The plain descriptors of a convolution of geometry g: x (or dx) NCHW, w
 * OIHW (GOIHW with groups), y (or dy) NCHW, the bias a vector. */
static void conv_mds(const conv_geom *g, dnnl_memory_desc_t *src, dnnl_memory_desc_t *wei,
                     dnnl_memory_desc_t *bias, dnnl_memory_desc_t *dst, int any)
{
    dnnl_dims_t s = {g->n, g->c, g->h, g->w}, y = {g->n, g->o, g->oh, g->ow}, b = {g->o};
    dnnl_format_tag_t act = any ? dnnl_format_tag_any : dnnl_nchw;
    dnnl_memory_desc_init_by_tag(src, 4, s, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(dst, 4, y, dnnl_f32, act);
    if (g->groups == 1) {
        dnnl_dims_t w = {g->o, g->c, g->kh, g->kw};
        dnnl_memory_desc_init_by_tag(wei, 4, w, dnnl_f32, any ? dnnl_format_tag_any : dnnl_oihw);
    } else {
        dnnl_dims_t w = {g->groups, g->o / g->groups, g->c / g->groups, g->kh, g->kw};
        dnnl_memory_desc_init_by_tag(wei, 5, w, dnnl_f32, any ? dnnl_format_tag_any : dnnl_goihw);
    }
    if (bias)
        dnnl_memory_desc_init_by_tag(bias, 1, b, dnnl_f32, dnnl_x);
}

static int conv_desc(const conv_geom *g, dnnl_convolution_desc_t *cd, dnnl_prop_kind_t prop,
                     int with_bias)
{
    dnnl_memory_desc_t src, wei, bias, dst;
    conv_mds(g, &src, &wei, &bias, &dst, 1);
    dnnl_dims_t st = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pl = {g->ph, g->pw},
                pr = {g->ph, g->pw};
    /* the right padding that gives the output size exactly: negative where
       the IR's output drops input rows that no window reaches (a 1x1
       convolution with stride 2 over an even size) */
    pr[0] = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1 - g->h - g->ph;
    pr[1] = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1 - g->w - g->pw;
    if (prop == dnnl_backward_data)
        return OK(dnnl_dilated_convolution_backward_data_desc_init(
                   cd, dnnl_convolution_direct, &src, &wei, &dst, st, dil, pl, pr)) ? 0 : -1;
    return OK(dnnl_dilated_convolution_forward_desc_init(cd, prop, dnnl_convolution_direct, &src,
                                                         &wei, with_bias ? &bias : NULL, &dst,
                                                         st, dil, pl, pr)) ? 0 : -1;
}

/* Makes node n's primitive (forward, or the input's gradient): NULL prim
 * where oneDNN declines the shape. */
static conv_prim *conv_make(struct rt_dnnl *d, const ir_node *n, const conv_geom *g)
{
    conv_prim *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nthr = omp_get_max_threads();
    c->nested = omp_in_parallel();
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT, with_bias = !bwd && n->nin == 3;
    dnnl_convolution_desc_t cd, fd;
    dnnl_primitive_desc_t pd = NULL, hint = NULL;
    if (conv_desc(g, &cd, bwd ? dnnl_backward_data : dnnl_forward_inference, with_bias))
        return c;
    if (bwd) { /* the backward primitive is chosen to match a forward one */
        if (conv_desc(g, &fd, dnnl_forward_training, 0) ||
            !OK(dnnl_primitive_desc_create(&hint, &fd, NULL, d->eng, NULL)))
            return c;
    }
    int ok = OK(dnnl_primitive_desc_create(&pd, &cd, d->attr, d->eng, hint));
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    if (!ok)
        return c;
    dnnl_memory_desc_t src, wei, bias, dst;
    conv_mds(g, &src, &wei, &bias, &dst, 0);
    c->nports = NPORTS;
    if (bwd) { /* dy in, w in, dx out */
        ok = !port_init(d, &c->p[P_SRC], DNNL_ARG_DIFF_DST, &dst, pd, dnnl_query_diff_dst_md,
                        0, 0, 0) &&
             !port_init(d, &c->p[P_WEI], DNNL_ARG_WEIGHTS, &wei, pd, dnnl_query_weights_md,
                        0, 0, 1) &&
             !port_init(d, &c->p[P_DST], DNNL_ARG_DIFF_SRC, &src, pd, dnnl_query_diff_src_md,
                        0, 1, 0);
    } else {
        ok = !port_init(d, &c->p[P_SRC], DNNL_ARG_SRC, &src, pd, dnnl_query_src_md, 0, 0, 0) &&
             !port_init(d, &c->p[P_WEI], DNNL_ARG_WEIGHTS, &wei, pd, dnnl_query_weights_md,
                        0, 0, 1) &&
             (!with_bias || !port_init(d, &c->p[P_BIAS], DNNL_ARG_BIAS, &bias, pd,
                                       dnnl_query_weights_md, 1, 0, 0)) &&
             !port_init(d, &c->p[P_DST], DNNL_ARG_DST, &dst, pd, dnnl_query_dst_md, 0, 1, 0);
    }
    if (ok)
        ok = OK(dnnl_primitive_create(&c->prim, pd)) &&
             !scratch_init(d, pd, &c->pad, &c->pad_bytes);
    dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        for (int i = 0; i < c->nports; i++)
            port_free(&c->p[i]);
        c->nports = 0;
        if (c->prim)
            dnnl_primitive_destroy(c->prim);
        c->prim = NULL;
    }
    return c;
}

/* Whether value v stays the same from run to run until the weights change:
 * a parameter (or a value computed from parameters alone) of a program that
 * writes no parameters back. */
static int static_weight(const rt_exec *x, const ir_value *v)
{
    return x->g->nupdates == 0 && (v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER ||
                                   x->weight[v->id]);
}

int rt_dnnl_conv(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    struct rt_dnnl *d = state(x);
    if (!d)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT;
    /* A training program's convolutions stay on OpenBLAS unless asked for
       (GNC_DNNL=all), for two tests that pin OpenBLAS's rounding:
       tests/grad/test_grad.c holds resnet18's gradients to 1e-4 of PyTorch's
       in float64, and a ReLU whose input is within rounding of 0 flips with
       the convolution's last bits, moving a batchnorm's weight gradient by
       0.2-0.6% (oneDNN's forward fails it; so do 4 of 8 random perturbations
       of OpenBLAS's result by 3 ulp); tests/train/lenet_accuracy.sh pins a
       seed that reaches 0.8557 against a bar of 0.85, and oneDNN's input
       gradients alone make it 0.8476. */
    if (d->off || (d->trains && !d->train_all))
        return 0;
    int id = n->out[0]->id;
    conv_prim *c = d->by_value[id];
    if (c && (c->nthr != omp_get_max_threads() || c->nested != omp_in_parallel())) {
        prim_free(c); /* made for another number of threads */
        c = d->by_value[id] = NULL;
    }
    if (!c) {
        conv_geom g = bwd ? rt_conv_geometry(n, &n->out[0]->type, &n->in[1]->type,
                                             &n->in[0]->type)
                          : rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type,
                                             &n->out[0]->type);
        c = d->by_value[id] = conv_make(d, n, &g);
        if (!c)
            return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    }
    if (!c->prim)
        return 0;
    /* the executor's buffers: inputs 0 (x or dy), 1 (w), 2 (bias) and the result */
    void *ptr[NPORTS] = {x->buf[n->in[0]->id], x->buf[n->in[1]->id],
                         !bwd && n->nin == 3 ? x->buf[n->in[2]->id] : NULL,
                         x->buf[n->out[0]->id]};
    /* the workspace: the activations' copies, then one scratchpad for the
       primitive and its reorders, which run one after another */
    size_t need = 0, pad = c->pad_bytes;
    for (int i = 0; i < NPORTS; i++) {
        need += i != P_WEI && c->p[i].mem ? (c->p[i].bytes + 63) / 64 * 64 : 0;
        pad = c->p[i].pad_bytes > pad ? c->p[i].pad_bytes : pad;
    }
    size_t pad_at = need;
    need += (pad + 63) / 64 * 64; /* aligned_alloc's size: a multiple of 64 */
    if (need > d->work_bytes) {
        free(d->work);
        d->work = aligned_alloc(64, need);
        d->work_bytes = d->work ? need : 0;
        if (!d->work)
            return fail(err, errlen, "%s: out of memory for %zu bytes of oneDNN's copies",
                        ir_ops[n->op].name, need);
    }
    dnnl_exec_arg_t args[NPORTS + 1];
    int na = 0;
    size_t at = 0;
    if (c->pad) {
        if (!OK(dnnl_memory_set_data_handle(c->pad, d->work + pad_at)))
            return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->pad};
    }
    for (int i = 0; i < NPORTS; i++) {
        port *p = &c->p[i];
        if (!p->user)
            continue;
        int ok = OK(dnnl_memory_set_data_handle(p->user, ptr[i]));
        if (p->mem && i != P_WEI) {
            ok &= OK(dnnl_memory_set_data_handle(p->mem, d->work + at));
            at += (p->bytes + 63) / 64 * 64;
        }
        if (p->pad)
            ok &= OK(dnnl_memory_set_data_handle(p->pad, d->work + pad_at));
        if (!ok)
            return fail(err, errlen, "%s: oneDNN refused a buffer", ir_ops[n->op].name);
        args[na++] = (dnnl_exec_arg_t){p->arg, p->mem ? p->mem : p->user};
    }
    /* the operands into the primitive's layouts; weights that have not changed
       since they were last reordered stay */
    int keep = static_weight(x, n->in[1]);
    for (int i = 0; i < NPORTS; i++) {
        port *p = &c->p[i];
        if (!p->reorder || i == P_DST)
            continue;
        if (i == P_WEI && keep && x->weights_ready && c->weights_kept)
            continue;
        if (reorder(d, p, 0))
            return fail(err, errlen, "%s: oneDNN's reorder failed", ir_ops[n->op].name);
    }
    c->weights_kept = keep;
    if (!OK(dnnl_primitive_execute(c->prim, d->stream, na, args)) ||
        (c->p[P_DST].reorder && reorder(d, &c->p[P_DST], 1)) ||
        !OK(dnnl_stream_wait(d->stream)))
        return fail(err, errlen, "%s: oneDNN's convolution failed", ir_ops[n->op].name);
    x->dnnl_convs++;
    return 1;
}

#endif
