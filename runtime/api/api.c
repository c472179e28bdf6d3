/* libgnc: the embedding API of include/gnc/gnc.h over the runtime.
 *
 * A gnc_plan is an rt_plan (plan.c: the program, proven memory plan, meta); a
 * gnc_session an rt_session of it (session.c: the CPU executor, virtual
 * devices for a partitioned plan, or the GPU executor beside a host copy).
 * Messages come from the runtime's err strings; the status says what kind of
 * failure it was. */
#include <gnc/gnc.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "checkpoint.h"
#include "device.h"
#include "libgnc.h"
#include "plan.h"
#include "session.h"

/* gnc.h's dtypes are the IR's, in the same order (gnc_tensor_info casts). */
_Static_assert(GNC_F32 == (int)IR_F32 && GNC_F16 == (int)IR_F16 && GNC_BF16 == (int)IR_BF16 &&
                   GNC_I32 == (int)IR_I32 && GNC_I64 == (int)IR_I64 && GNC_U8 == (int)IR_U8,
               "gnc_dtype and ir_dtype must list the same types in the same order");
_Static_assert(GNC_MAX_RANK == IR_MAX_RANK, "gnc.h's GNC_MAX_RANK is the IR's IR_MAX_RANK");

/* A weight as gnc_plan_param lists it: a parameter or buffer, or the whole
 * tensor of shards (a tensor-parallel program's), at its first shard. */
typedef struct {
    const char *name;           /* the whole's */
    ir_type type;
    const ir_value *v;          /* the value, or the whole's first shard */
} weight;

struct gnc_plan {
    rt_plan *p;
    weight *weights;            /* in the order of the program's parameters */
    int nweights;
};

struct gnc_session {
    const gnc_plan *plan;
    rt_session *s;
    uint64_t seed;
    int ran;                    /* a run or step has finished: outputs to read */
    int pulled;                 /* cuda: the host copy holds the GPU's weights since the last
                                   run or step (gnc_session_read_param) */
    int pushed;                 /* 0: weights written to the host copy wait for the GPU */
};

/* The plan's weights (gnc_plan_param): -1 when memory runs out. */
static int list_weights(gnc_plan *plan)
{
    const ir_graph *g = plan->p->g;
    plan->weights = base_malloc((size_t)(g->nparams ? g->nparams : 1) * sizeof *plan->weights);
    if (!plan->weights)
        return -1;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (v->kind == IR_VALUE_STATE)
            continue;
        int seen = 0;
        for (int j = i - 1; v->shard.of && j >= 0 && !seen; j--)
            seen = g->params[j]->shard.of && strcmp(g->params[j]->shard.of, v->shard.of) == 0;
        if (!seen)
            plan->weights[plan->nweights++] = v->shard.of ? (weight){v->shard.of, v->shard.type, v}
                                                          : (weight){v->name, v->type, v};
    }
    return 0;
}

static const weight *weight_named(const gnc_plan *plan, const char *name)
{
    for (int i = 0; i < plan->nweights; i++)
        if (strcmp(plan->weights[i].name, name) == 0)
            return &plan->weights[i];
    return NULL;
}

gnc_status rt_api_error(gnc_error *err, gnc_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

static gnc_status ok(gnc_error *err)
{
    if (err) {
        err->status = GNC_OK;
        err->message[0] = '\0';
    }
    return GNC_OK;
}

/* The status of a runtime message: files that cannot be read or written, memory,
 * or else fallback. */
gnc_status rt_api_kind_of(const char *msg, gnc_status fallback)
{
    if (strstr(msg, "out of memory"))
        return GNC_ERROR_MEMORY;
    if (strstr(msg, "cannot read") || strstr(msg, "cannot write") || strstr(msg, "cannot seek"))
        return GNC_ERROR_IO;
    return fallback;
}

const char *gnc_version(void) { return GNC_VERSION; }

/* ---- plans ---- */

gnc_status rt_api_plan_made(gnc_plan **out, rt_plan *p, const char *msg, gnc_error *err)
{
    if (!p)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_FORMAT), "%s", msg);
    gnc_plan *plan = base_calloc(1, sizeof *plan);
    if (plan)
        plan->p = p;
    if (!plan || list_weights(plan) != 0) {
        base_free(plan);
        rt_plan_free(p);
        return rt_api_error(err, GNC_ERROR_MEMORY, "out of memory");
    }
    *out = plan;
    return ok(err);
}

/* Out of memory inside a call that catches it (ir/base.h: what the call had
 * allocated is freed by then). */
gnc_status rt_api_out_of_memory(gnc_error *err)
{
    return rt_api_error(err, GNC_ERROR_MEMORY, "out of memory");
}

gnc_status gnc_plan_load(gnc_plan **out, const char *path, gnc_error *err)
{
    char msg[512];
    if (!out || !path)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_plan_load: NULL argument");
    *out = NULL;
    base_catch c;
    base_catch_push(&c);
    if (setjmp(c.jump))
        return rt_api_out_of_memory(err);
    gnc_status st = rt_api_plan_made(out, rt_plan_load(path, msg, sizeof msg), msg, err);
    base_catch_pop(&c);
    return st;
}

gnc_status gnc_plan_load_memory(gnc_plan **out, const void *data, size_t size, gnc_error *err)
{
    char msg[512];
    if (!out || (!data && size))
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_plan_load_memory: NULL argument");
    *out = NULL;
    base_catch c;
    base_catch_push(&c);
    if (setjmp(c.jump))
        return rt_api_out_of_memory(err);
    rt_plan *p = rt_plan_decode(data ? data : "", size, "plan", msg, sizeof msg);
    gnc_status st = rt_api_plan_made(out, p, msg, err);
    base_catch_pop(&c);
    return st;
}

void gnc_plan_free(gnc_plan *plan)
{
    if (!plan)
        return;
    rt_plan_free(plan->p);
    base_free(plan->weights);
    base_free(plan);
}

int gnc_plan_devices(const gnc_plan *plan) { return plan ? plan->p->ndevices : -1; }
int gnc_plan_is_training(const gnc_plan *plan) { return plan ? plan->p->training : -1; }
int gnc_plan_input_count(const gnc_plan *plan) { return plan ? plan->p->g->ninputs : -1; }
int gnc_plan_output_count(const gnc_plan *plan) { return plan ? plan->p->g->noutputs : -1; }

/* Bytes of v's data as sessions exchange it: floats as float32. */
static size_t data_bytes(const ir_value *v)
{
    ir_dtype t = v->type.dtype;
    size_t es = t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
    return (size_t)ir_type_numel(&v->type) * es;
}

static void info_of(const char *name, const ir_value *v, gnc_tensor_info *info)
{
    memset(info, 0, sizeof *info);
    info->name = name;
    info->dtype = (gnc_dtype)v->type.dtype;
    info->rank = v->type.rank;
    for (int k = 0; k < v->type.rank; k++)
        info->dims[k] = v->type.dims[k];
    info->bytes = data_bytes(v);
}

gnc_status gnc_plan_input(const gnc_plan *plan, int i, gnc_tensor_info *info)
{
    if (!plan)
        return GNC_ERROR_ARGUMENT;
    const ir_graph *g = plan->p->g;
    if (i < 0 || i >= g->ninputs || !info)
        return GNC_ERROR_ARGUMENT;
    info_of(g->inputs[i]->name, g->inputs[i], info);
    return GNC_OK;
}

gnc_status gnc_plan_output(const gnc_plan *plan, int i, gnc_tensor_info *info)
{
    if (!plan)
        return GNC_ERROR_ARGUMENT;
    const ir_graph *g = plan->p->g;
    if (i < 0 || i >= g->noutputs || !info)
        return GNC_ERROR_ARGUMENT;
    info_of(g->outputs[i].name, g->outputs[i].value, info);
    return GNC_OK;
}

int gnc_plan_param_count(const gnc_plan *plan) { return plan ? plan->nweights : -1; }

gnc_status gnc_plan_param(const gnc_plan *plan, int i, gnc_tensor_info *info,
                          const char **source)
{
    if (!plan || i < 0 || i >= plan->nweights || !info)
        return GNC_ERROR_ARGUMENT;
    const weight *w = &plan->weights[i];
    ir_value whole = *w->v;
    whole.type = w->type;
    info_of(w->name, &whole, info);
    if (source)
        *source = w->v->source;
    return GNC_OK;
}

/* ---- sessions ---- */

gnc_status gnc_session_init(gnc_session **out, const gnc_plan *plan,
                            const gnc_session_options *options, gnc_error *err)
{
    char msg[512];
    gnc_session_options o = options ? *options : (gnc_session_options){0};
    if (!out || !plan)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_init: NULL argument");
    *out = NULL;
    if (!(o.timeout_s >= 0) || !isfinite(o.timeout_s))
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_init: timeout_s must be 0 (the "
                            "default, 300 s) or a finite number of seconds, got %g", o.timeout_s);
    rt_device_kind kind;
    int rc = rt_device_pick(o.device, &kind, msg, sizeof msg);
    if (rc != 0)
        return rt_api_error(err, rc == -2 ? GNC_ERROR_UNSUPPORTED : GNC_ERROR_ARGUMENT, "%s", msg);
    gnc_session *s = base_calloc(1, sizeof *s);
    if (!s)
        return rt_api_error(err, GNC_ERROR_MEMORY, "out of memory");
    s->plan = plan;
    s->seed = o.seed;
    s->pushed = 1;
    /* libdir NULL: $GNC_CUDA_LIBDIR, else the loader's search path */
    rt_session_options so = {.device = kind, .seed = o.seed, .eager = o.eager,
                             .share_gpus = o.share_gpus};
    if (!(s->s = rt_session_open(plan->p, &so, msg, sizeof msg))) {
        base_free(s);
        /* cuda: no driver, no GPU, a program it cannot run yet */
        return rt_api_error(err, rt_api_kind_of(msg, kind == RT_DEVICE_CUDA
                                                          ? GNC_ERROR_UNSUPPORTED
                                                          : GNC_ERROR_FORMAT), "%s", msg);
    }
    rt_session_set_timeout(s->s, o.timeout_s);
    *out = s;
    return ok(err);
}

void gnc_session_free(gnc_session *s)
{
    if (!s)
        return;
    rt_session_free(s->s);
    base_free(s);
}

const char *gnc_session_device(const gnc_session *s)
{
    return s ? rt_session_device_name(s->s) : NULL;
}

const char *gnc_session_warning(const gnc_session *s)
{
    return s ? rt_session_warning(s->s) : NULL;
}

static const ir_value *input_named(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->ninputs; i++)
        if (strcmp(g->inputs[i]->name, name) == 0)
            return g->inputs[i];
    return NULL;
}

static const ir_value *output_named(const ir_graph *g, const char *name)
{
    for (int i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return g->outputs[i].value;
    return NULL;
}

gnc_status gnc_session_set_input(gnc_session *s, const char *name, const void *data,
                                 size_t bytes, gnc_error *err)
{
    if (!s || !name || !data)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_set_input: NULL argument");
    const ir_value *v = input_named(s->plan->p->g, name);
    if (!v)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "the plan has no input '%s'", name);
    if (bytes != data_bytes(v)) {
        char t[128];
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "input %s is %s: %zu bytes, not %zu", name,
                            ir_type_str(&v->type, t, sizeof t), data_bytes(v), bytes);
    }
    char msg[512];
    if (rt_session_set_input(s->s, v, data, msg, sizeof msg) != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_RUN), "%s", msg);
    return ok(err);
}

/* Weights written to the host copy (gnc_session_write_param) go to the
 * device, and the executor's copies made of them (oneDNN's and Winograd's
 * weights, an inference program's folded batchnorms) are made again. */
static gnc_status push(gnc_session *s, gnc_error *err)
{
    char msg[512];
    if (s->pushed)
        return ok(err);
    if (rt_session_push(s->s, msg, sizeof msg) != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_RUN), "%s", msg);
    s->pushed = 1;
    return ok(err);
}

static gnc_status run(gnc_session *s, gnc_error *err)
{
    char msg[512];
    gnc_status st = push(s, err);
    if (st != GNC_OK)
        return st;
    s->ran = 0;
    s->pulled = 0;
    if (rt_session_run(s->s, msg, sizeof msg) != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_RUN), "%s", msg);
    s->ran = 1;
    return ok(err);
}

/* What reading results before a run, or after a failed one, says. */
static gnc_status not_run(gnc_error *err, const char *fn)
{
    return rt_api_error(err, GNC_ERROR_ARGUMENT, "%s: no results yet: the session has not "
                        "finished a run or training step since it was made or since one failed",
                        fn);
}

gnc_status gnc_session_run(gnc_session *s, gnc_error *err)
{
    if (!s)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_run: NULL session");
    if (s->plan->p->training)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "the plan is a training step: run it with "
                            "gnc_session_train_step");
    return run(s, err);
}

gnc_status gnc_session_train_step(gnc_session *s, double lr, int64_t step, gnc_error *err)
{
    if (!s)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_train_step: NULL session");
    if (!s->plan->p->training)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "the plan is an inference program, no "
                            "training step: compile one with gnc compile MODEL.net --train -o "
                            "FILE.gnc");
    if (!(lr >= 0) || !isfinite(lr) || step < 0)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "a training step needs a finite learning rate "
                            ">= 0 and a step >= 0, got %g and %lld", lr, (long long)step);
    char msg[512];
    if (rt_session_set_train(s->s, lr, step, s->seed, msg, sizeof msg) != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_RUN), "%s", msg);
    return run(s, err);
}

gnc_status gnc_session_output(const gnc_session *s, const char *name, void *data, size_t bytes,
                              gnc_error *err)
{
    if (!s || !name || !data)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_output: NULL argument");
    const ir_value *v = output_named(s->plan->p->g, name);
    if (!v)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "the plan has no output '%s'", name);
    if (!s->ran)
        return not_run(err, "gnc_session_output");
    if (bytes != data_bytes(v)) {
        char t[128];
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "output %s is %s: %zu bytes, not %zu", name,
                            ir_type_str(&v->type, t, sizeof t), data_bytes(v), bytes);
    }
    memcpy(data, rt_session_data(s->s, v), bytes);
    return ok(err);
}

gnc_status gnc_session_loss(const gnc_session *s, double *loss, gnc_error *err)
{
    if (!s || !loss)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_loss: NULL argument");
    const ir_value *v = s->plan->p->g->loss;
    if (!v)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "the plan's model has no loss");
    if (!s->ran)
        return not_run(err, "gnc_session_loss");
    *loss = *(const float *)rt_session_data(s->s, v);
    return ok(err);
}

/* The weight named name, and that bytes is its size; else an error in err. */
static const weight *weight_arg(const gnc_session *s, const char *name, size_t bytes,
                                const char *fn, gnc_error *err)
{
    const weight *w = weight_named(s->plan, name);
    if (!w) {
        rt_api_error(err, GNC_ERROR_ARGUMENT, "%s: the plan has no parameter or buffer '%s'",
                     fn, name);
        return NULL;
    }
    ir_value whole = *w->v;
    whole.type = w->type;
    if (bytes != data_bytes(&whole)) {
        char t[128];
        rt_api_error(err, GNC_ERROR_ARGUMENT, "%s: %s is %s: %zu bytes, not %zu", fn, name,
                     ir_type_str(&w->type, t, sizeof t), data_bytes(&whole), bytes);
        return NULL;
    }
    return w;
}

/* The host copy current: on cuda the GPU's weights read back, once after
 * each run or step. */
static gnc_status pull(gnc_session *s, gnc_error *err)
{
    char msg[512];
    if (s->pulled || !s->pushed) /* host writes pending: the host copy is the newer */
        return ok(err);
    if (rt_session_pull(s->s, msg, sizeof msg) != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_RUN), "%s", msg);
    s->pulled = 1;
    return ok(err);
}

gnc_status gnc_session_read_param(gnc_session *s, const char *name, void *data, size_t bytes,
                                  gnc_error *err)
{
    if (!s || !name || !data)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_read_param: NULL argument");
    const weight *w = weight_arg(s, name, bytes, "gnc_session_read_param", err);
    if (!w)
        return err ? err->status : GNC_ERROR_ARGUMENT;
    gnc_status st = pull(s, err);
    if (st != GNC_OK)
        return st;
    char msg[512];
    if (rt_exec_read_param(s->plan->p->g, rt_session_host(s->s), name, &w->type, data, msg,
                           sizeof msg) != 0)
        return rt_api_error(err, GNC_ERROR_RUN, "%s", msg);
    return ok(err);
}

gnc_status gnc_session_write_param(gnc_session *s, const char *name, const void *data,
                                   size_t bytes, gnc_error *err)
{
    if (!s || !name || !data)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_write_param: NULL argument");
    const weight *w = weight_arg(s, name, bytes, "gnc_session_write_param", err);
    if (!w)
        return err ? err->status : GNC_ERROR_ARGUMENT;
    gnc_status st = pull(s, err); /* the others' current values go back with it */
    if (st != GNC_OK)
        return st;
    char msg[512];
    if (rt_exec_write_param(s->plan->p->g, rt_session_host(s->s), name, &w->type, data, msg,
                            sizeof msg) != 0)
        return rt_api_error(err, GNC_ERROR_RUN, "%s", msg);
    s->pushed = 0;
    return ok(err);
}

gnc_status gnc_session_save_checkpoint(gnc_session *s, const char *path, int64_t step,
                                       gnc_error *err)
{
    char msg[1024], buf[32];
    if (!s || !path)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_save_checkpoint: NULL argument");
    if (step < 0)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_save_checkpoint: step %lld; a "
                            "checkpoint's step is the steps taken, 0 or more", (long long)step);
    rt_ckpt_meta meta = {0};
    snprintf(buf, sizeof buf, "%lld", (long long)step);
    rt_ckpt_meta_set(&meta, "step", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)s->seed);
    rt_ckpt_meta_set(&meta, "seed", buf);
    gnc_status st = push(s, err);
    if (st != GNC_OK) {
        rt_ckpt_meta_free(&meta);
        return st;
    }
    int rc = rt_session_save(s->s, path, &meta, msg, sizeof msg);
    rt_ckpt_meta_free(&meta);
    if (rc != 0)
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_IO), "%s", msg);
    return ok(err);
}

gnc_status gnc_session_load_checkpoint(gnc_session *s, const char *path, int64_t *step,
                                       gnc_error *err)
{
    char msg[1024];
    if (!s || !path)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_session_load_checkpoint: NULL argument");
    rt_ckpt_meta meta = {0};
    gnc_status pushed = push(s, err); /* the host copy whole, should the file not fit */
    if (pushed != GNC_OK)
        return pushed;
    if (rt_session_load(s->s, path, &meta, msg, sizeof msg) != 0) {
        /* several lines when several tensors differ: one line of them */
        char *w = msg;
        for (const char *r = msg; *r; r++)
            if (*r != '\n' && !(*r == ' ' && w > msg && w[-1] == ' '))
                *w++ = *r;
            else if (*r == '\n' && r[1])
                *w++ = ' ';
        *w = '\0';
        rt_ckpt_meta_free(&meta);
        return rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_FORMAT), "%s", msg);
    }
    const char *st = rt_ckpt_meta_get(&meta, "step");
    int64_t n = 0;
    if (st && !base_parse_i64(st, 0, INT64_MAX, &n)) {
        gnc_status bad = rt_api_error(err, GNC_ERROR_FORMAT, "%s: the metadata's step is '%.40s', "
                                      "not a count of steps (0 or more)", path, st);
        rt_ckpt_meta_free(&meta);
        return bad;
    }
    if (step)
        *step = n;
    rt_ckpt_meta_free(&meta);
    return ok(err);
}
