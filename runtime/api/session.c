/* Sessions: see session.h.  The host copy (an rt_exec) is always there; on
 * cuda an rt_cuda runs the plan's GPU program beside it, and values cross
 * between the two only where session.h says. */
#include "session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cuda.h"

struct rt_session {
    const ir_graph *g;
    rt_device_kind device;
    rt_exec *host;
    cg_program *prog;           /* cuda: the plan's GPU program */
    int prog_owned;             /* made by rt_plan_program (else the caller's) */
    rt_cuda *gpu;               /* cuda: its executor */
    const ir_value *lr, *step, *seed;   /* a training step's scalar inputs, or NULL */
};

/* A scalar input of g named name and of dtype t, or NULL. */
static const ir_value *scalar_input(const ir_graph *g, const char *name, ir_dtype t)
{
    const ir_value *v = ir_find_value(g, name);
    return v && v->kind == IR_VALUE_INPUT && v->type.rank == 0 && v->type.dtype == t ? v : NULL;
}

static rt_session *made(const ir_graph *g, rt_exec *x)
{
    rt_session *s = base_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->g = g;
    s->host = x;
    s->lr = scalar_input(g, AD_INPUT_LR, IR_F32);
    s->step = scalar_input(g, AD_INPUT_STEP, IR_I64);
    s->seed = scalar_input(g, AD_INPUT_SEED, IR_I64);
    return s;
}

rt_session *rt_session_adopt(const ir_graph *g, rt_exec *x, uint64_t seed)
{
    rt_session *s = x ? made(g, x) : NULL;
    if (!s) {
        rt_exec_free(x);
        return NULL;
    }
    s->device = RT_DEVICE_CPU;
    rt_exec_init_params(x, seed);
    return s;
}

/* The values a checkpoint holds (runtime/format/checkpoint.c saves the same). */
static int saved(const ir_value *v)
{
    return v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER || v->kind == IR_VALUE_STATE;
}

/* Whether some device of the GPU program in this process holds v. */
static int on_gpu(const rt_session *s, const ir_value *v)
{
    return rt_cuda_holds(s->gpu, v);
}


/* The GPU half of a cuda session: probe, program, executor, parameters, inputs. */
static int open_gpu(rt_session *s, const rt_plan *p, const rt_session_options *o, char *err,
                    size_t errlen)
{
    /* the driver first: without one, nothing else about the plan matters */
    if (rt_cuda_probe(o->libdir, err, errlen) != 0)
        return -1;
    char why[512];
    s->prog = (cg_program *)o->program;
    s->prog_owned = !s->prog;
    if (!s->prog && !(s->prog = rt_plan_program(p, why, sizeof why)))
        return base_fail(err, errlen, "device cuda: %s", why);
    rt_cuda_options co = {0};
    co.libdir = o->libdir;
    co.eager = o->eager;
    co.gpus = o->gpus;
    co.share = o->share_gpus;
    co.ranks = o->ranks;
    co.rank = o->rank;
    co.id = o->id;
    if (!(s->gpu = rt_cuda_open_ex(s->prog, &co, err, errlen)) ||
        rt_cuda_init_params(s->gpu, o->seed, err, errlen) != 0)
        return -1;
    /* rt_cuda_init_params fills the floating-point values; the others (and
       the inputs, zero) as the host copy has them */
    for (int i = 0; i < s->g->nparams; i++) {
        const ir_value *v = s->g->params[i];
        void *h = rt_exec_data(s->host, v);
        if (!ir_is_float(v->type.dtype) && h && on_gpu(s, v) &&
            rt_cuda_write(s->gpu, -1, v, h, err, errlen) != 0)
            return -1;
    }
    for (int i = 0; i < s->g->ninputs; i++)
        if (rt_session_set_input(s, s->g->inputs[i], NULL, err, errlen) != 0)
            return -1;
    return 0;
}

rt_session *rt_session_open(const rt_plan *p, const rt_session_options *o, char *err,
                            size_t errlen)
{
    rt_session_options dflt = {0};
    if (!o)
        o = &dflt;
    rt_exec *x = o->host ? o->host
                         : rt_exec_new_planned(p->g, p->mp->offset_by_id, p->mp->device_bytes, err,
                                               errlen);
    if (!x)
        return NULL;
    rt_session *s = made(p->g, x);
    if (!s) {
        rt_exec_free(x);
        base_fail(err, errlen, "out of memory");
        return NULL;
    }
    s->device = o->device;
    rt_exec_init_params(x, o->seed);
    if (o->device == RT_DEVICE_CUDA && open_gpu(s, p, o, err, errlen) != 0) {
        rt_session_free(s);
        return NULL;
    }
    /* a plan with weights starts from them, not from the initializers */
    if (p->weights &&
        (rt_checkpoint_load_bytes(p->g, x, p->weights, p->weights_size, "the plan's weights",
                                  NULL, err, errlen) != 0 ||
         rt_session_push(s, err, errlen) != 0)) {
        rt_session_free(s);
        return NULL;
    }
    return s;
}

void rt_session_free(rt_session *s)
{
    if (!s)
        return;
    rt_cuda_close(s->gpu);
    if (s->prog_owned)
        cg_program_free(s->prog);
    rt_exec_free(s->host);
    base_free(s);
}

void rt_session_set_timeout(rt_session *s, double seconds)
{
    rt_exec_set_timeout(s->host, seconds);
    if (s->gpu)
        rt_cuda_set_timeout(s->gpu, seconds);
}

rt_device_kind rt_session_device(const rt_session *s) { return s->device; }

const char *rt_session_warning(const rt_session *s)
{
    return s->gpu ? rt_cuda_warning(s->gpu) : NULL;
}

int rt_session_graphs(const rt_session *s)
{
    return s->gpu ? rt_cuda_graphs(s->gpu) : 0;
}

const char *rt_session_device_name(const rt_session *s)
{
    return s->device == RT_DEVICE_CUDA ? "cuda" : "cpu";
}

rt_exec *rt_session_host(rt_session *s) { return s->host; }

rt_cuda *rt_session_gpu(rt_session *s) { return s->gpu; }

void *rt_session_data(rt_session *s, const ir_value *v) { return rt_exec_data(s->host, v); }

/* Bytes of v's host copy: floats as float. */
static size_t host_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    return (size_t)ir_type_numel(&v->type) * (t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4);
}

/* Input v into its host copy, and onto the GPU now or (prefetch) for the
 * next launch. */
static int put_input(rt_session *s, const ir_value *v, const void *data, int prefetch, char *err,
                     size_t errlen)
{
    void *h = rt_exec_data(s->host, v);
    if (!h)
        return base_fail(err, errlen, "this process holds no input %s", v->name);
    if (data && data != h)
        memcpy(h, data, host_bytes(v));
    if (!s->gpu || !on_gpu(s, v))
        return 0;
    return prefetch ? rt_cuda_prefetch(s->gpu, -1, v, h, err, errlen)
                    : rt_cuda_write(s->gpu, -1, v, h, err, errlen);
}

int rt_session_set_input(rt_session *s, const ir_value *v, const void *data, char *err,
                         size_t errlen)
{
    return put_input(s, v, data, 0, err, errlen);
}

int rt_session_set_train(rt_session *s, double lr, int64_t step, uint64_t seed, char *err,
                         size_t errlen)
{
    float f = (float)lr;
    int64_t st = step, sd = (int64_t)seed;
    if ((s->lr && rt_session_set_input(s, s->lr, &f, err, errlen) != 0) ||
        (s->step && rt_session_set_input(s, s->step, &st, err, errlen) != 0) ||
        (s->seed && rt_session_set_input(s, s->seed, &sd, err, errlen) != 0))
        return -1;
    return 0;
}

/* v from the GPU into its host copy, where both have it. */
static int read_back(rt_session *s, const ir_value *v, char *err, size_t errlen)
{
    void *h = rt_exec_data(s->host, v);
    if (!h || !on_gpu(s, v))
        return 0;
    return rt_cuda_read(s->gpu, -1, v, h, err, errlen);
}

int rt_session_run(rt_session *s, char *err, size_t errlen)
{
    return rt_session_launch(s, err, errlen) || rt_session_wait(s, err, errlen) ? -1 : 0;
}

int rt_session_launch(rt_session *s, char *err, size_t errlen)
{
    return s->gpu ? rt_cuda_launch(s->gpu, err, errlen) : rt_exec_run(s->host, err, errlen);
}

int rt_session_prefetch(rt_session *s, const ir_value *v, const void *data, char *err,
                        size_t errlen)
{
    return put_input(s, v, data, 1, err, errlen);
}

int rt_session_wait(rt_session *s, char *err, size_t errlen)
{
    if (!s->gpu)
        return 0;
    if (rt_cuda_wait(s->gpu, err, errlen) != 0)
        return -1;
    for (int i = 0; i < s->g->noutputs; i++)
        if (read_back(s, s->g->outputs[i].value, err, errlen) != 0)
            return -1;
    return s->g->loss ? read_back(s, s->g->loss, err, errlen) : 0;
}

int rt_session_pull(rt_session *s, char *err, size_t errlen)
{
    for (int i = 0; s->gpu && i < s->g->nparams; i++)
        if (saved(s->g->params[i]) && read_back(s, s->g->params[i], err, errlen) != 0)
            return -1;
    return 0;
}

int rt_session_push(rt_session *s, char *err, size_t errlen)
{
    rt_exec_weights_changed(s->host);
    for (int i = 0; s->gpu && i < s->g->nparams; i++) {
        const ir_value *v = s->g->params[i];
        void *h = rt_exec_data(s->host, v);
        if (saved(v) && h && on_gpu(s, v) && rt_cuda_write(s->gpu, -1, v, h, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int rt_session_save(rt_session *s, const char *path, const rt_ckpt_meta *meta, char *err,
                    size_t errlen)
{
    if (rt_session_pull(s, err, errlen) != 0)
        return -1;
    return rt_checkpoint_save(s->g, s->host, path, meta, err, errlen);
}

int rt_session_load_weights(rt_session *s, const char *path, char *err, size_t errlen)
{
    return rt_checkpoint_load_weights(s->g, s->host, path, err, errlen) != 0 ||
                   rt_session_push(s, err, errlen) != 0
               ? -1
               : 0;
}

int rt_session_load(rt_session *s, const char *path, rt_ckpt_meta *meta, char *err,
                    size_t errlen)
{
    if (rt_checkpoint_load(s->g, s->host, path, meta, err, errlen) != 0)
        return -1;
    if (rt_session_push(s, err, errlen) != 0) {
        if (meta)
            rt_ckpt_meta_free(meta);
        return -1;
    }
    return 0;
}
