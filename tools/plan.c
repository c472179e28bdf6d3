/* Plan files from the command line (docs/plan.md): gnc compile -o writes one,
 * gnc run, train, eval and dump open one in place of a model, gnc inspect
 * prints what one holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "cli.h"
#include "cuda.h"
#include "device.h"
#include "driver.h"
#include "plan.h"
#include "session.h"

int cli_is_plan(const char *path)
{
    size_t n = strlen(path), len;
    if (n >= 4 && strcmp(path + n - 4, ".gnc") == 0)
        return 1;
    const char *kept = base_preloaded(path, &len);
    if (kept)
        return len >= 8 && rt_plan_is_plan(kept, 8);
    unsigned char head[8];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(head, 1, 8, f) == 8 && rt_plan_is_plan(head, 8);
    if (f)
        fclose(f);
    return yes;
}

/* The options that shape a compiled program, and those that only print
 * something while compiling: a plan was compiled with its own, so neither
 * applies to one.  The plan's meta records the first kind (cli_flag_record).
 * Keep in step with tools/gnc.c's flags. */
static const char *const shaping_flags[] = {
    "-D", "--model", "--loss", "--passes", "--train", "--optimizer", "--momentum", "--nesterov",
    "--weight-decay", "--remat", "--gpus", "--devices", "--strategy", "--microbatches",
    "--pipeline-schedule", "--bucket-mb", "--sync-bn", "--sequence-parallel", "--recompute", "--deterministic", "--micro-shards", "--accumulate",
    "--mem-cap", "--device-model", "--batch", "--precision", "--conv", "--layout", "--arch",
    "--no-kernels",
    "--autotune",
};
static const char *const compiling_flags[] = {
    "--dump-ir", "--dump-dir", "--time-passes", "--dump-memory", "--stats", "--dump-plan",
    "--verify-each",
};

static int listed(const char *flag, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(flag, list[i]) == 0)
            return 1;
    return 0;
}

int cli_is_program_flag(const char *flag)
{
    /* --devices may name a plan's own count (cli_plan_open checks it) */
    return strcmp(flag, "--devices") != 0 &&
           (listed(flag, shaping_flags, sizeof shaping_flags / sizeof *shaping_flags) ||
            listed(flag, compiling_flags, sizeof compiling_flags / sizeof *compiling_flags));
}

void cli_flag_record(options *o, const char *flag, const char *value)
{
    if (!listed(flag, shaping_flags, sizeof shaping_flags / sizeof *shaping_flags))
        return;
    size_t at = strlen(o->flags), len = sizeof o->flags;
    if (at + strlen(flag) + 2 >= len)
        return;
    at += (size_t)snprintf(o->flags + at, len - at, "%s%s", at ? " " : "", flag);
    if (!value || at + 4 >= len)
        return;
    int quote = value[0] == '\0' || strpbrk(value, " \t'\"\\") != NULL;
    o->flags[at++] = ' ';
    if (quote)
        o->flags[at++] = '\'';
    for (const char *c = value; *c && at + 2 < len; c++)
        o->flags[at++] = *c == '\'' || *c < 0x20 || *c > 0x7e ? '?' : *c;
    if (quote)
        o->flags[at++] = '\'';
    o->flags[at] = '\0';
}

int cli_plan_write(const options *o, const drv_program *p, const char *path)
{
    char err[1024];
    if (drv_plan(&o->c, p, path, NULL, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "gnc: error: %s\n", err);
    return -1;
}

int cli_plan_memory(const options *o, drv_program *p, int train)
{
    char err[1024];
    if (drv_plan_memory(&o->c, p, train, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "gnc: error: %s\n", err);
    return -1;
}

int cli_device(options *o)
{
    char err[1024];
    rt_device_kind kind = RT_DEVICE_CPU;
    const char *name = o->device;
    if (!name && o->world->ranks > 1)
        name = RT_GPU_VALIDATED && cli_mpi_gpus(o->world) ? "cuda" : "cpu"; /* each rank its GPU */
    if (rt_device_pick(name, &kind, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    o->cuda = kind == RT_DEVICE_CUDA;
    if (!o->cuda && o->share_gpus) {
        fprintf(stderr, "gnc: error: --share-gpus places devices on GPUs: it needs --device "
                "cuda%s\n", o->device ? "" : " (the default here is cpu)");
        return 1;
    }
    if (!o->cuda && o->eager) {
        fprintf(stderr, "gnc: error: --eager launches CUDA step by step: it needs --device cuda%s\n",
                o->device ? "" : " (the default here is cpu)");
        return 1;
    }
    if (!o->cuda && (o->c.precision != PREC_FP32 || o->c.conv != CG_CONV_CUDNN ||
                     o->c.layout != CG_LAYOUT_AUTO)) {
        fprintf(stderr, "gnc: error: --precision, --conv and --layout choose the GPU kernels: "
                "they need "
                "--device cuda%s\n", o->device ? "" : " (the default here is cpu)");
        return 1;
    }
    /* on the GPU, the trace of its steps alone (--profile=FILE): the op table
       is the CPU executor's */
    if (o->cuda && o->profile && !o->profile_file) {
        fprintf(stderr, "gnc: error: --profile times the CPU executor's ops: add --device cpu, "
                "or write the GPU's steps with --profile=FILE.json\n");
        return 1;
    }
    if (o->cuda && rt_cuda_probe(NULL, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: device cuda%s: %s\n", o->device ? ""
                : " (the default; --device cpu runs on the CPU)", err);
        return 1;
    }
    return 0;
}

void cli_session_warn(const struct rt_session *s)
{
    static int told;
    const char *w = rt_session_warning(s);
    if (w && !told) {
        fprintf(stderr, "gnc: warning: %s\n", w);
        told = 1;
    }
}

/* A parameter initialized from data that p does not hold: IR text of an
 * imported model, whose weights only a checkpoint gives then. */
static const ir_value *missing_data(const drv_program *p)
{
    if (p->file && p->file->weights)
        return NULL;
    for (int i = 0; i < p->g->nparams; i++)
        if (p->g->params[i]->init.kind == IR_INIT_DATA && !p->g->params[i]->init.data)
            return p->g->params[i];
    return NULL;
}

struct rt_session *cli_session_new(const options *o, const drv_program *p, int per_rank,
                                   uint64_t seed, char *err, size_t errlen)
{
    const ir_value *v = missing_data(p);
    if (v && !o->weights && !o->resume) {
        char name[96];
        snprintf(err, errlen, "%s: the values of '%s' (init data) are not in IR text: run the "
                 "model it was imported from, or give --weights FILE", o->c.file,
                 ir_name_str(name, sizeof name, v->name));
        return NULL;
    }
    if (o->cuda) {
        if (!p->file) { /* cli_plan_memory makes one of a model */
            snprintf(err, errlen, "internal error: a program for the cuda device without its plan");
            return NULL;
        }
        rt_session_options so = {.device = RT_DEVICE_CUDA, .seed = seed, .eager = o->eager,
                                 .share_gpus = o->share_gpus, .program = p->cuda};
        const cli_world *w = o->world;
        if (w->ranks <= 1)
            return rt_session_open(p->file, &so, err, errlen);
        /* under mpirun: the GPU of this rank's local rank; a training step's
           device `rank` of it, NCCL across the ranks (collectively); an
           inference program whole */
        char why[512];
        int count = rt_cuda_gpu_count(NULL, why, sizeof why);
        int n = p->file->ndevices, *gpus = calloc((size_t)n, sizeof *gpus);
        rt_cuda_id id;
        if (!gpus) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        for (int d = 0; d < n; d++)
            gpus[d] = count > 0 ? w->local_rank % count : 0;
        so.gpus = gpus;
        if (per_rank && n == w->ranks && count > 0 && w->local_ranks > count) {
            /* NCCL's user guide, "Creating a Communicator": "Using the same CUDA device
               multiple times as different ranks of the same NCCL communicator is not
               supported and may lead to hangs." Every rank of the node says so. */
            snprintf(err, errlen, "mpirun started %d ranks on this node, which has %d GPU%s: "
                     "local ranks 0 and %d would share GPU 0, and NCCL does not support two "
                     "ranks of one communicator on one GPU: start at most %d rank%s a node",
                     w->local_ranks, count, count == 1 ? "" : "s", count, count,
                     count == 1 ? "" : "s");
            free(gpus);
            return NULL;
        }
        if (per_rank && n == w->ranks) {
            if (cli_mpi_cuda_id(w, id.bytes, sizeof id.bytes, err, errlen) != 0 ||
                !(so.host = cli_exec_new(o, p, 1, err, errlen))) {
                free(gpus);
                return NULL;
            }
            so.ranks = w->ranks, so.rank = w->rank, so.id = &id;
            cli_mpi_watch(w, "ncclCommInitRank on the other ranks");
        }
        struct rt_session *s = rt_session_open(p->file, &so, err, errlen);
        if (so.id)
            cli_mpi_watch(w, NULL);
        free(gpus);
        return s;
    }
    struct rt_exec *x = cli_exec_new(o, p, per_rank, err, errlen);
    if (!x)
        return NULL;
    rt_session *s = rt_session_adopt(p->g, x, seed);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* a plan with weights starts from them (as rt_session_open does) */
    const struct rt_plan *f = p->file;
    if (f && f->weights && rt_checkpoint_load_bytes(p->g, x, f->weights, f->weights_size,
                                                    "the plan's weights", NULL, err,
                                                    errlen) != 0) {
        rt_session_free(s);
        return NULL;
    }
    return s;
}

/* rt_plan_load, or the bytes a pipe gave (base_preload) */
static rt_plan *plan_load(const char *path, char *err, size_t errlen)
{
    size_t len;
    const char *kept = base_preloaded(path, &len);
    return kept ? rt_plan_decode(kept, len, path, err, errlen) : rt_plan_load(path, err, errlen);
}

int cli_plan_open(const options *o, drv_program *out)
{
    char err[1024];
    memset(out, 0, sizeof *out);
    rt_plan *p = plan_load(o->c.file, err, sizeof err);
    if (!p) {
        o->world->together = 1; /* every rank reads the same file */
        if (o->world->rank == 0)
            fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    if (o->world->ranks > 1 && p->ndevices != o->world->ranks) {
        o->world->together = 1; /* every rank reads the same file */
        if (o->world->rank == 0)
            fprintf(stderr, "gnc: error: %s is compiled for %d device%s, but mpirun started %d "
                    "ranks: each rank runs one device\n", o->c.file, p->ndevices,
                    p->ndevices == 1 ? "" : "s", o->world->ranks);
        rt_plan_free(p);
        return -1;
    }
    if (o->world->ranks <= 1 && o->devices_given && o->c.part.devices != p->ndevices) {
        fprintf(stderr, "gnc: error: --devices cpu:%d, but %s is compiled for %d device%s\n",
                o->c.part.devices, o->c.file, p->ndevices, p->ndevices == 1 ? "" : "s");
        rt_plan_free(p);
        return -1;
    }
    out->file = p;
    out->g = p->g;
    out->mp = p->mp;
    const char *s = rt_plan_meta(p, "strategy");
    snprintf(out->strategy, sizeof out->strategy, "%s", s ? s : "as partitioned in the plan");
    return 0;
}

/* ---- gnc inspect ---- */

static const char *init_str(const ir_init *in, char *buf, size_t len)
{
    int n;
    switch (in->kind) {
    case IR_INIT_ZEROS: n = snprintf(buf, len, "zeros"); break;
    case IR_INIT_ONES: n = snprintf(buf, len, "ones"); break;
    case IR_INIT_UNIFORM: n = snprintf(buf, len, "uniform(%.6g, %.6g)", in->a, in->b); break;
    case IR_INIT_NORMAL: n = snprintf(buf, len, "normal(%.6g, %.6g)", in->a, in->b); break;
    case IR_INIT_DATA: n = snprintf(buf, len, "data"); break;
    default: return "none";
    }
    if (in->zero_row > 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " zero_row(%lld)", (long long)(in->zero_row - 1));
    return buf;
}

/* Device d's holdings: nodes, arena buffers, and the bytes of the parameters
 * (and weights computed once) and inputs it reads or updates. */
static void device_summary(const ir_graph *g, const mp_plan *mp, int d, unsigned char *seen)
{
    int nodes = 0, bufs = 0;
    int64_t params = 0, inputs = 0;
    memset(seen, 0, (size_t)g->nvalues + 1);
    ir_for_each_node(g, n) {
        if (n->device != d)
            continue;
        nodes++;
        for (int i = 0; i < n->nout; i++) {
            if (mp->offset_by_id[n->out[i]->id] >= 0)
                bufs++;
            else
                params += mp_value_bytes(n->out[i]);
        }
        for (int i = 0; i < n->nin; i++) {
            const ir_value *v = n->in[i];
            if (v->kind == IR_VALUE_NODE || seen[v->id])
                continue;
            seen[v->id] = 1;
            *(v->kind == IR_VALUE_INPUT ? &inputs : &params) += mp_value_bytes(v);
        }
    }
    for (int i = 0; i < g->nupdates; i++) {
        const ir_value *t = g->updates[i].target;
        if (g->updates[i].device == d && !seen[t->id]) {
            seen[t->id] = 1;
            params += mp_value_bytes(t);
        }
    }
    char a[32], pb[32], ib[32];
    base_human_bytes((double)mp->device_bytes[d], a, sizeof a);
    base_human_bytes((double)params, pb, sizeof pb);
    base_human_bytes((double)inputs, ib, sizeof ib);
    printf("  device %d: %d nodes; arena %s (%lld bytes) holding %d buffers; parameters %s, "
           "inputs %s\n", d, nodes, a, (long long)mp->device_bytes[d], bufs, pb, ib);
}

/* Device d's collectives and transfers, one line each (the first 12). */
static void device_comm(const ir_graph *g, int d)
{
    int count = 0;
    int64_t total = 0;
    ir_for_each_node(g, n)
        if (n->device == d && ir_op_communicates(n->op)) {
            count++;
            total += cost_comm_bytes(n);
        }
    char b[32];
    base_human_bytes((double)total, b, sizeof b);
    if (!count) {
        printf("  device %d: none\n", d);
        return;
    }
    printf("  device %d: %d, %s in all\n", d, count, b);
    int shown = 0;
    ir_for_each_node(g, n) {
        if (n->device != d || !ir_op_communicates(n->op) || shown++ >= 12)
            continue;
        char where[128] = "";
        const ir_attr *grp = ir_get_attr(n, "group"), *peer = ir_get_attr(n, "peer");
        if (grp && grp->kind == IR_ATTR_INTS) {
            size_t at = (size_t)snprintf(where, sizeof where, " over [");
            for (int k = 0; k < grp->n && at + 16 < sizeof where; k++)
                at += (size_t)snprintf(where + at, sizeof where - at, "%s%lld", k ? ", " : "",
                                       (long long)grp->ints[k]);
            snprintf(where + at, sizeof where - at, "]");
        } else if (peer && peer->kind == IR_ATTR_INT) {
            snprintf(where, sizeof where, " %s device %lld",
                     n->op == IR_OP_SEND ? "to" : "from", (long long)peer->i);
        }
        const ir_attr *id = ir_get_attr(n, "id");
        base_human_bytes((double)cost_comm_bytes(n), b, sizeof b);
        int tensors = n->op == IR_OP_RECV ? n->nout : n->nin;
        printf("    %s #%lld%s: %d tensor%s, %s\n", ir_ops[n->op].name,
               id && id->kind == IR_ATTR_INT ? (long long)id->i : 0LL, where, tensors,
               tensors == 1 ? "" : "s", b);
    }
    if (shown > 12)
        printf("    ... and %d more\n", shown - 12);
}

static void print_ref(cg_ref r)
{
    static const char *const names[] = {"arena", "params", "inputs", "workspace"};
    printf("%s+%lld", r.region < CG_NREGIONS ? names[r.region] : "?", (long long)r.offset);
}

/* A cuDNN choice kept on this machine (rt_cudnn_kept), under its step. */
static void print_kept(void *ctx, const char *where, int algo, double ms)
{
    (void)ctx;
    printf("           cuDNN, timed on %s: algorithm %d, %.4f ms\n", where, algo, ms);
}

/* One step on one line: what it runs and its shape, not every argument; a
 * convolution's algorithms timed and kept on this machine beneath. */
static void print_step(const cg_program *cg, const cg_step *s, int i)
{
    printf("    %4d ", i);
    switch (s->kind) {
    case CG_STEP_KERNEL: {
        const cg_launch *l = &s->u.launch;
        printf("kernel %s grid %ux%ux%u block %u", cg->kernels[l->kernel].name, l->grid[0],
               l->grid[1], l->grid[2], l->block[0]);
        if (l->block[1] > 1 || l->block[2] > 1)
            printf("x%ux%u", l->block[1], l->block[2]);
        printf(" smem %d, %d args", l->shared_bytes, l->nargs);
        break;
    }
    case CG_STEP_GEMM: {
        const cg_gemm *m = &s->u.gemm;
        printf("gemm %c%c m=%lld n=%lld k=%lld", m->trans_a ? 'T' : 'N', m->trans_b ? 'T' : 'N',
               (long long)m->m, (long long)m->n, (long long)m->k);
        if (m->batch > 1)
            printf(" batch=%lld", (long long)m->batch);
        printf(" %s%s%s", ir_dtype_name(m->type_a),
               m->compute == CG_COMPUTE_32F_FAST_TF32 ? " tf32" : "", m->tuned ? ", tuned" : "");
        break;
    }
    case CG_STEP_CONV: {
        const cg_conv *c = &s->u.conv;
        static const char *const kind[] = {"forward", "backward_data", "backward_filter"};
        printf("conv %s x=[%lld,%lld,%lld,%lld] w=[%lld,%lld,%lld,%lld] y=[%lld,%lld,%lld,%lld] "
               "stride %d pad %d %s%s%s", kind[c->kind], (long long)c->n, (long long)c->c,
               (long long)c->h, (long long)c->w, (long long)c->k,
               (long long)(c->c / (c->groups ? c->groups : 1)), (long long)c->r, (long long)c->s,
               (long long)c->n, (long long)c->k, (long long)c->p, (long long)c->q, c->stride[0],
               c->pad[0], ir_dtype_name(c->dtype), c->math == CG_MATH_TENSOR_OP ? " tensor-op" : "",
               c->nhwc ? " channels-last" : "");
        if (c->tuned)
            printf(", algorithm %d (tuned)", c->algo);
        break;
    }
    case CG_STEP_COMM: {
        const cg_comm *c = &s->u.comm;
        char b[32];
        base_human_bytes((double)c->bytes, b, sizeof b);
        printf("%s #%lld group [", ir_ops[c->op].name, (long long)c->id);
        for (int k = 0; k < c->ngroup; k++)
            printf("%s%lld", k ? "," : "", (long long)c->group[k]);
        printf("] rank %d, %d tensor%s, %s %s", c->rank, c->ntensors, c->ntensors == 1 ? "" : "s",
               b, ir_dtype_name(c->dtype));
        break;
    }
    case CG_STEP_COPY:
        printf("copy %lld bytes ", (long long)s->u.copy.bytes);
        print_ref(s->u.copy.src);
        printf(" -> ");
        print_ref(s->u.copy.dst);
        break;
    }
    printf("   # %s\n", s->what ? s->what : "");
    if (s->kind == CG_STEP_CONV && !s->u.conv.tuned)
        rt_cudnn_kept(&s->u.conv, print_kept, NULL);
}

/* The plan's CUDA program: per device its regions and steps, then the
 * modules and their images. */
static void print_cuda(const cg_program *cg)
{
    char b[4][32], how[96];
    int count[CG_CONV_NIMPLS] = {0};
    for (const ir_node *n = cg->graph->head; cg->opts.conv_choice && n; n = n->next)
        if (cg_is_conv(n))
            count[cg_conv_of(&cg->opts, n)]++;
    if (cg->opts.conv_choice)
        snprintf(how, sizeof how, "each timed: %d by cudnn, %d by igemm, %d by cudnn-nhwc",
                 count[CG_CONV_CUDNN], count[CG_CONV_IGEMM], count[CG_CONV_CUDNN_NHWC]);
    else
        snprintf(how, sizeof how, "by %s", cg_conv_name(cg->opts.conv));
    printf("cuda: %s, convolutions %s, %d kernels in %d modules, archs",
           ir_precision_name(cg->opts.precision), how, cg->nkernels, cg->nmodules);
    for (int a = 0; a < cg->narchs; a++)
        printf(" %s", cg->archs[a]);
    putchar('\n');
    for (int d = 0; d < cg->ndevices; d++) {
        const cg_device *D = &cg->devices[d];
        for (int r = 0; r < CG_NREGIONS; r++)
            base_human_bytes((double)D->region_bytes[r], b[r], sizeof b[r]);
        printf("  device %d: arena %s, params %s, inputs %s, workspace %s\n", d, b[0], b[1],
               b[2], b[3]);
        if (D->ninit)
            printf("   init: %d steps\n", D->ninit);
        for (int i = 0; i < D->ninit; i++)
            print_step(cg, &D->init[i], i);
        cg_run_stats st;
        char rb[32], wb[32];
        cg_run_stats_of(cg, d, &st);
        base_human_bytes((double)st.copy_bytes, b[0], sizeof b[0]);
        base_human_bytes((double)st.kernel_read_bytes, rb, sizeof rb);
        base_human_bytes((double)st.kernel_written_bytes, wb, sizeof wb);
        printf("   steps: %d (%d kernels, %d library calls, %d communication, %d copies of %s); "
               "kernels read %s, write %s", D->nsteps, st.kernels, st.library, st.comms,
               st.copies, b[0], rb, wb);
        if (st.big_min_step)
            printf("; smallest grid over 1M elements: %lld blocks (%s)",
                   (long long)st.big_min_blocks, st.big_min_step->what);
        putchar('\n');
        for (int i = 0; i < D->nsteps; i++)
            print_step(cg, &D->steps[i], i);
    }
    for (int m = 0; m < cg->nmodules; m++) {
        const cg_module *M = &cg->modules[m];
        base_human_bytes((double)M->source_len, b[0], sizeof b[0]);
        printf("  module %d: %d kernels, source %s;", m, M->nkernels, b[0]);
        for (int i = 0; i < M->nimages; i++) {
            base_human_bytes((double)M->images[i].size, b[1], sizeof b[1]);
            printf(" %s %s %s%s", M->images[i].ptx ? "ptx" : "cubin", M->images[i].arch, b[1],
                   i + 1 < M->nimages ? "," : "\n");
        }
    }
}

typedef struct {
    cJSON *list;
    int step;
    const char *what;
} kept_json;

/* One kept choice of a step, for --json ("ms": null where not timed). */
static void add_kept(void *ctx, const char *where, int algo, double ms)
{
    kept_json *k = ctx;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "step", k->step);
    cJSON_AddStringToObject(c, "what", k->what ? k->what : "");
    cJSON_AddStringToObject(c, "timed_on", where);
    cJSON_AddNumberToObject(c, "algorithm", algo);
    if (ms >= 0)
        cJSON_AddNumberToObject(c, "ms", ms);
    else
        cJSON_AddNullToObject(c, "ms");
    cJSON_AddItemToArray(k->list, c);
}

/* gnc inspect --json: per device what one run asks of the GPU. */
static int inspect_json(const rt_plan *p, const char *file)
{
    char err[1024];
    cg_program *cg = NULL;
    for (int i = 0; i < p->nsections && !cg; i++)
        if (p->sections[i].kind == RT_SECTION_CUDA_SOURCE &&
            !(cg = rt_plan_program(p, err, sizeof err))) {
            fprintf(stderr, "gnc: error: %s: %s\n", file, err);
            return 1;
        }
    cJSON *root = cJSON_CreateObject(), *devs = cJSON_AddArrayToObject(root, "devices");
    cJSON_AddStringToObject(root, "plan", file);
    cJSON_AddStringToObject(root, "model", p->g->name);
    cJSON_AddBoolToObject(root, "training", p->training);
    cJSON_AddBoolToObject(root, "kernels", cg != NULL);
    for (int d = 0; d < p->ndevices; d++) {
        cJSON *o = cJSON_CreateObject();
        int nodes = 0;
        ir_for_each_node(p->g, n)
            nodes += n->device == d;
        cJSON_AddNumberToObject(o, "device", d);
        cJSON_AddNumberToObject(o, "graph_nodes", nodes);
        if (cg) {
            cg_run_stats st;
            cg_run_stats_of(cg, d, &st);
            cJSON_AddNumberToObject(o, "steps", cg->devices[d].nsteps);
            cJSON_AddNumberToObject(o, "kernels", st.kernels);
            cJSON_AddNumberToObject(o, "library_calls", st.library);
            cJSON_AddNumberToObject(o, "communication", st.comms);
            cJSON_AddNumberToObject(o, "copies", st.copies);
            cJSON_AddNumberToObject(o, "copy_bytes", (double)st.copy_bytes);
            cJSON_AddNumberToObject(o, "kernel_read_bytes", (double)st.kernel_read_bytes);
            cJSON_AddNumberToObject(o, "kernel_written_bytes", (double)st.kernel_written_bytes);
            cJSON_AddNumberToObject(o, "layout_transposes", st.layout_own);
            cJSON_AddNumberToObject(o, "library_layout_transposes", st.layout_library);
            /* what the run's kernels of each class read and write */
            drv_prediction r;
            drv_predict(cg, d, cost_device_lookup("h200"), &r, NULL);
            cJSON *by = cJSON_AddObjectToObject(o, "bytes_by_class");
            for (int k = 0; k < DRV_NCLASSES; k++)
                cJSON_AddNumberToObject(by, drv_class_names[k], r.bytes[k]);
            /* the convolutions' algorithms timed and kept on this machine */
            cJSON *kept = cJSON_AddArrayToObject(o, "cudnn_choices");
            for (int i = 0; i < cg->devices[d].nsteps; i++) {
                const cg_step *s = &cg->devices[d].steps[i];
                if (s->kind != CG_STEP_CONV)
                    continue;
                kept_json k = {kept, i, s->what};
                if (s->u.conv.tuned)
                    add_kept(&k, "the plan (--autotune)", s->u.conv.algo, -1);
                else
                    rt_cudnn_kept(&s->u.conv, add_kept, &k);
            }
            if (st.big_min_step) {
                cJSON_AddNumberToObject(o, "smallest_big_grid", (double)st.big_min_blocks);
                cJSON_AddStringToObject(o, "smallest_big_grid_step",
                                        st.big_min_step->what ? st.big_min_step->what : "");
            } else {
                cJSON_AddNullToObject(o, "smallest_big_grid");
            }
        }
        cJSON_AddItemToArray(devs, o);
    }
    char *text = cJSON_Print(root);
    int ok = text && puts(text) >= 0;
    free(text);
    cJSON_Delete(root);
    cg_program_free(cg);
    if (!ok)
        fprintf(stderr, "gnc: error: out of memory\n");
    return ok && fflush(stdout) == 0 ? 0 : 1;
}

int cmd_inspect(const options *o)
{
    char err[1024], t[160], b[32], nb[160], ib[96];
    rt_plan *p = plan_load(o->c.file, err, sizeof err);
    if (!p) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    if (o->json) {
        int rc = inspect_json(p, o->c.file);
        rt_plan_free(p);
        return rc;
    }
    const ir_graph *g = p->g;
    printf("plan %s: gnc plan format %u, %llu bytes, %d sections\n", o->c.file, p->version,
           (unsigned long long)p->file_bytes, p->nsections);
    int kernels = 0;
    for (int i = 0; i < p->nsections; i++) {
        const rt_plan_section *s = &p->sections[i];
        const char *name = rt_section_name(s->kind);
        char dev[24] = "all devices";
        if (s->device != RT_PLAN_ALL_DEVICES)
            snprintf(dev, sizeof dev, "device %u", s->device);
        snprintf(t, sizeof t, "kind %u", s->kind);
        int used = rt_section_is_read(s->kind);
        printf("  %-12s %-11s %10llu bytes  crc %08x%s%s\n", name ? name : t, dev,
               (unsigned long long)s->size, s->crc,
               s->flags & RT_SECTION_REQUIRED ? "  required" : "",
               used ? "" : "  (not read by this gnc)");
        kernels += s->kind == RT_SECTION_CUDA_SOURCE;
    }
    printf("model %s: %s on %d device%s\n", ir_name_str(nb, sizeof nb, g->name),
           p->training ? "a training step" : "an inference program", p->ndevices,
           p->ndevices == 1 ? "" : "s");
    for (int i = 0; i < p->nmeta; i++)
        printf("  %s: %s\n", p->meta[i].key, p->meta[i].value);

    printf("devices: %d\n", p->ndevices);
    unsigned char *seen = malloc((size_t)g->nvalues + 1);
    if (!seen) {
        rt_plan_free(p);
        fprintf(stderr, "gnc: error: out of memory\n");
        return 1;
    }
    for (int d = 0; d < p->ndevices; d++)
        device_summary(g, p->mp, d, seen);
    free(seen);

    printf("inputs: %d\n", g->ninputs);
    for (int i = 0; i < g->ninputs; i++)
        printf("  %-24s %s\n", ir_name_str(nb, sizeof nb, g->inputs[i]->name),
               ir_type_str(&g->inputs[i]->type, t, sizeof t));
    printf("outputs: %d\n", g->noutputs);
    for (int i = 0; i < g->noutputs; i++)
        printf("  %-24s %s\n", ir_name_str(nb, sizeof nb, g->outputs[i].name),
               ir_type_str(&g->outputs[i].value->type, t, sizeof t));
    if (g->loss)
        printf("loss: %s %s\n", ir_name_str(nb, sizeof nb, g->loss->name),
               ir_type_str(&g->loss->type, t, sizeof t));

    int64_t elems = 0, bytes = 0;
    int counts[3] = {0};
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        elems += ir_type_numel(&v->type);
        bytes += (int64_t)ir_type_bytes(&v->type);
        counts[v->kind == IR_VALUE_PARAM ? 0 : v->kind == IR_VALUE_BUFFER ? 1 : 2]++;
    }
    base_human_bytes((double)bytes, b, sizeof b);
    printf("parameters: %d tensors (%d trainable, %d buffers, %d optimizer state), %lld values, "
           "%s\n", g->nparams, counts[0], counts[1], counts[2], (long long)elems, b);
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        const char *kind = v->kind == IR_VALUE_PARAM ? "param" : v->kind == IR_VALUE_BUFFER
                         ? "buffer" : "state";
        printf("  %-6s %-32s %-22s %s", kind, ir_name_str(nb, sizeof nb, v->name),
               ir_type_str(&v->type, t, sizeof t), init_str(&v->init, ib, sizeof ib));
        if (v->shard.of)
            printf("  shard of %s %s, axis %d from %lld", ir_name_str(nb, sizeof nb, v->shard.of),
                   ir_type_str(&v->shard.type, t, sizeof t), v->shard.axis,
                   (long long)v->shard.start);
        if (v->source) /* the ONNX initializer's name, PyTorch's under torch.onnx.export */
            printf("  from %s", ir_name_str(nb, sizeof nb, v->source));
        putchar('\n');
    }

    printf("collectives and transfers:\n");
    for (int d = 0; d < p->ndevices; d++)
        device_comm(g, d);
    int rc = 0;
    if (kernels) {
        cg_program *cg = rt_plan_program(p, err, sizeof err);
        if (cg) {
            print_cuda(cg);
            cg_program_free(cg);
        } else {
            fprintf(stderr, "gnc: error: %s: %s\n", o->c.file, err);
            rc = 1;
        }
    } else {
        printf("kernels: none: compiled with --no-kernels or by a gnc without NVRTC (the CPU "
               "executor runs the program)\n");
    }
    rt_plan_free(p);
    return fflush(stdout) == 0 ? rc : 1;
}
