/* Partition plans: what runs where, what is communicated, what it costs
 * (docs/partition.md).  An analysis, not a rewrite: it reads a partitioned
 * program, its memory plan (memplan.c) and a simulation of its step (cost.c).
 *
 * Per device:
 *   - its ops, by the names the DSL gave them (a replica's "rR." and a device
 *     copy's "dD." prefixes taken off);
 *   - its memory: parameters, buffers and optimizer state it holds (a copy of
 *     each it reads), the weights it computes once, inputs, the planned arena
 *     of node results (activations, gradients, temporaries), and the staging
 *     buffers of what it sends; the peak is their sum, exact for the executor:
 *     it allocates just these;
 *   - its predicted time, and every communication it takes part in with its
 *     bytes, predicted time and (data parallelism's gradient buckets) the
 *     compute still left on the device when it can start: what it can hide
 *     behind.
 *
 * pt_plan_check_caps refuses a plan whose peak exceeds a device's memory cap,
 * naming what is live at that device's peak. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "passes.h"

/* name without a replica's or device copy's prefix ("r3.", "d1.") */
const char *pt_dsl_name(const char *name)
{
    if ((name[0] == 'r' || name[0] == 'd') && name[1] >= '0' && name[1] <= '9') {
        const char *p = name + 1;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == '.')
            return p + 1;
    }
    return name;
}

pt_plan *pt_plan_new(const ir_graph *g, const mp_plan *mp, const cost_device *cost,
                     const char *strategy)
{
    pt_plan *p = base_xcalloc(1, sizeof *p);
    snprintf(p->strategy, sizeof p->strategy, "%s", strategy);
    p->cost = *cost;
    p->ndevices = mp->ndevices;
    p->dev = base_xcalloc((size_t)p->ndevices, sizeof *p->dev);
    p->sim = cost_simulate(g, cost);
    for (int d = 0; d < p->ndevices; d++) {
        pt_device_plan *x = &p->dev[d];
        x->param_bytes = mp->dev[d].param_bytes;
        x->input_bytes = mp->dev[d].input_bytes;
        x->arena_bytes = mp->dev[d].arena_bytes;
        x->lower_bound = mp->dev[d].lower_bound;
        x->predicted_ms = d < p->sim->ndevices ? p->sim->device_ms[d] : 0;
        x->compute_ms = d < p->sim->ndevices ? p->sim->compute_ms[d] : 0;
        x->comm_ms = d < p->sim->ndevices ? p->sim->comm_ms[d] : 0;
    }
    ir_for_each_node(g, n) {
        pt_device_plan *x = &p->dev[n->device];
        if (n->op == IR_OP_SEND)
            x->comm_bytes += mp_value_bytes(n->in[0]);
        else if (!ir_op_communicates(n->op))
            x->nops++;
    }
    for (int d = 0; d < p->ndevices; d++) {
        pt_device_plan *x = &p->dev[d];
        x->peak_bytes = x->param_bytes + x->input_bytes + x->arena_bytes + x->comm_bytes;
    }
    p->step_ms = p->sim->step_ms;
    p->bubble = p->sim->bubble;
    return p;
}

void pt_plan_free(pt_plan *p)
{
    if (!p)
        return;
    cost_sim_free(p->sim);
    base_free(p->dev);
    base_free(p);
}

/* The devices a communication node involves, as "0,1" (into buf). */
static const char *comm_devices(const ir_node *n, char *buf, size_t len)
{
    if (n->op == IR_OP_SEND) {
        snprintf(buf, len, "%d -> %lld", n->device, (long long)ir_attr_int(n, "peer"));
        return buf;
    }
    int size;
    const int64_t *group = ir_attr_ints(n, "group", &size);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < size && at + 16 < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)group[i]);
    return buf;
}

/* What a communication carries: its operands' DSL names, shortened. */
static const char *comm_what(const ir_node *n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n->nin && at + 40 < len; i++) {
        if (i == 3 && n->nin > 4) {
            snprintf(buf + at, len - at, ", ... (%d tensors)", n->nin);
            break;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                               pt_dsl_name(n->in[i]->name));
    }
    return buf;
}

/* The names of device d's nodes that run every step, each once, wrapped at 100
 * columns. */
static void print_ops(const ir_graph *g, const unsigned char *weight, int d, FILE *f)
{
    int col = 0;
    const char *prev = NULL;
    ir_for_each_node(g, n) {
        if (n->device != d || ir_op_communicates(n->op) || n->op == IR_OP_CONST ||
            weight[n->out[0]->id])
            continue;
        const char *name = pt_dsl_name(n->out[0]->name);
        if (prev && strcmp(prev, name) == 0)
            continue;
        prev = name;
        int w = (int)strlen(name) + 2;
        if (col == 0 || col + w > 100) {
            fprintf(f, "%s\n      ", col ? "," : "");
            col = 6;
        } else {
            fputs(", ", f);
        }
        fputs(name, f);
        col += w;
    }
    fputc('\n', f);
}

void pt_plan_print(const pt_plan *p, const ir_graph *g, FILE *f)
{
    char a[32], b[32], c[32], e[32], dv[64], what[256];
    unsigned char *weight = base_xcalloc((size_t)g->nvalues + 1, 1);
    ir_weight_only(g, weight);
    fprintf(f, "plan: %s on %d device%s (%s): predicted step %.3f ms", p->strategy, p->ndevices,
            p->ndevices == 1 ? "" : "s", p->cost.name, p->step_ms);
    if (p->ndevices > 1)
        fprintf(f, ", devices idle %.1f%% of it%s", 100 * p->bubble,
                strstr(p->strategy, "pipeline") || strstr(p->strategy, "pp=")
                    ? " (the pipeline bubble)" : "");
    fputc('\n', f);
    /* model FLOPs utilisation, as Megatron-LM and PaLM count it: the GEMMs'
       (and attention's) FLOPs of a step over what the devices' datasheet
       peak would do in the predicted time */
    double flops = p->model_flops, peak = p->cost.peak[p->cost.precision] > 0
                                               ? p->cost.peak[p->cost.precision] : p->cost.flops;
    if (flops <= 0)
        ir_for_each_node(g, n)
            flops += cost_gemm_flops(n);
    if (flops > 0 && p->step_ms > 0 && peak > 0)
        fprintf(f, "  model FLOPs utilisation %.1f%%: %.4g TFLOP a step on %d x %.4g TFLOP/s "
                "(%s peak)\n", 100 * flops / (p->ndevices * peak * p->step_ms / 1e3), flops / 1e12,
                p->ndevices, peak / 1e12, ir_precision_name(p->cost.precision));
    for (int i = 0; i < p->ncandidates; i++) {
        const pt_candidate *k = &p->candidates[i];
        if (i == 0)
            fprintf(f, "  chosen among %d candidates, simplest first: the simplest predicted "
                    "within the model's error (%.0f%%) of the fastest\n", p->ncandidates,
                    100 * p->cost.error);
        base_human_bytes((double)k->peak_bytes, a, sizeof a);
        fprintf(f, "    %-28s ", k->name);
        if (k->error)
            fprintf(f, "rejected: %s\n", k->error);
        else
            fprintf(f, "%9.3f ms  peak %s per device%s%s\n", k->step_ms, a,
                    k->chosen ? "  <- chosen" : "",
                    k->fastest && !k->chosen ? "  <- fastest predicted" : "");
    }
    for (int d = 0; d < p->ndevices; d++) {
        const pt_device_plan *x = &p->dev[d];
        base_human_bytes((double)x->param_bytes, a, sizeof a);
        base_human_bytes((double)x->arena_bytes, b, sizeof b);
        base_human_bytes((double)x->peak_bytes, c, sizeof c);
        base_human_bytes((double)x->comm_bytes, e, sizeof e);
        fprintf(f, "device %d: %d ops, predicted %.3f ms (compute %.3f, communication %.3f)\n", d,
                x->nops, x->predicted_ms, x->compute_ms, x->comm_ms);
        fprintf(f, "  memory: peak %s = parameters and state %s + activations %s (planned peak) + "
                "send buffers %s", c, a, b, e);
        if (x->input_bytes) {
            base_human_bytes((double)x->input_bytes, a, sizeof a);
            fprintf(f, " + inputs %s", a);
        }
        fputc('\n', f);
        fputs("  ops:", f);
        print_ops(g, weight, d, f);
        int shown = 0;
        for (int i = 0; i < p->sim->ncomms; i++) {
            const cost_comm *cm = &p->sim->comms[i];
            const ir_node *n = cm->node;
            int mine = n->device == d;
            if (!mine && n->op != IR_OP_SEND) {
                int size;
                const int64_t *group = ir_attr_ints(n, "group", &size);
                for (int r = 0; r < size; r++)
                    mine |= group[r] == d;
            } else if (!mine) {
                mine = ir_attr_int(n, "peer") == d;
            }
            if (!mine)
                continue;
            if (!shown++)
                fputs("  communication:\n", f);
            base_human_bytes((double)cm->bytes, a, sizeof a);
            fprintf(f, "    %-14s %10s  devices %-8s %.3f ms", ir_ops[n->op].name, a,
                    comm_devices(n, dv, sizeof dv), cm->end_ms - cm->start_ms);
            if (n->op == IR_OP_ALL_REDUCE)
                fprintf(f, ", starts with %.3f ms of compute left", cm->compute_left_ms);
            fprintf(f, "  [%s]\n", comm_what(n, what, sizeof what));
        }
    }
    base_free(weight);
}

int pt_plan_write_json(const pt_plan *p, const ir_graph *g, FILE *f)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "strategy", p->strategy);
    cJSON_AddNumberToObject(root, "devices", p->ndevices);
    cJSON_AddStringToObject(root, "device_model", p->cost.name);
    cJSON_AddNumberToObject(root, "predicted_step_ms", p->step_ms);
    cJSON_AddNumberToObject(root, "idle_fraction", p->bubble);
    cJSON_AddNumberToObject(root, "model_error", p->cost.error);
    if (p->ncandidates) {
        cJSON *cands = cJSON_AddArrayToObject(root, "candidates");
        for (int i = 0; i < p->ncandidates; i++) {
            const pt_candidate *k = &p->candidates[i];
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "strategy", k->name);
            if (k->error) {
                cJSON_AddStringToObject(c, "rejected", k->error);
            } else {
                cJSON_AddNumberToObject(c, "predicted_step_ms", k->step_ms);
                cJSON_AddNumberToObject(c, "peak_bytes", (double)k->peak_bytes);
            }
            cJSON_AddBoolToObject(c, "chosen", k->chosen);
            cJSON_AddBoolToObject(c, "fastest", k->fastest);
            cJSON_AddItemToArray(cands, c);
        }
    }
    cJSON *devs = cJSON_AddArrayToObject(root, "per_device");
    for (int d = 0; d < p->ndevices; d++) {
        const pt_device_plan *x = &p->dev[d];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d);
        cJSON_AddNumberToObject(o, "param_bytes", (double)x->param_bytes);
        cJSON_AddNumberToObject(o, "activation_peak_bytes", (double)x->arena_bytes);
        cJSON_AddNumberToObject(o, "activation_lower_bound_bytes", (double)x->lower_bound);
        cJSON_AddNumberToObject(o, "input_bytes", (double)x->input_bytes);
        cJSON_AddNumberToObject(o, "send_buffer_bytes", (double)x->comm_bytes);
        cJSON_AddNumberToObject(o, "peak_bytes", (double)x->peak_bytes);
        cJSON_AddNumberToObject(o, "predicted_ms", x->predicted_ms);
        cJSON_AddNumberToObject(o, "compute_ms", x->compute_ms);
        cJSON_AddNumberToObject(o, "communication_ms", x->comm_ms);
        cJSON *ops = cJSON_AddArrayToObject(o, "ops");
        ir_for_each_node(g, n)
            if (n->device == d && !ir_op_communicates(n->op) && n->op != IR_OP_CONST) {
                cJSON *op = cJSON_CreateObject();
                cJSON_AddStringToObject(op, "name", pt_dsl_name(n->out[0]->name));
                cJSON_AddStringToObject(op, "op", ir_ops[n->op].name);
                cJSON_AddItemToArray(ops, op);
            }
        cJSON *comms = cJSON_AddArrayToObject(o, "communications");
        for (int i = 0; i < p->sim->ncomms; i++) {
            const cost_comm *cm = &p->sim->comms[i];
            const ir_node *n = cm->node;
            int size = 0;
            const int64_t *group = n->op == IR_OP_SEND ? NULL : ir_attr_ints(n, "group", &size);
            int mine = n->device == d || (n->op == IR_OP_SEND && ir_attr_int(n, "peer") == d);
            for (int r = 0; r < size; r++)
                mine |= group[r] == d;
            if (!mine)
                continue;
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "op", ir_ops[n->op].name);
            cJSON_AddNumberToObject(c, "id", (double)ir_attr_int(n, "id"));
            cJSON_AddNumberToObject(c, "bytes", (double)cm->bytes);
            cJSON *with = cJSON_AddArrayToObject(c, "devices");
            if (n->op == IR_OP_SEND) {
                cJSON_AddItemToArray(with, cJSON_CreateNumber(n->device));
                cJSON_AddItemToArray(with, cJSON_CreateNumber((double)ir_attr_int(n, "peer")));
            }
            for (int r = 0; r < size; r++)
                cJSON_AddItemToArray(with, cJSON_CreateNumber((double)group[r]));
            cJSON_AddNumberToObject(c, "predicted_ms", cm->end_ms - cm->start_ms);
            cJSON_AddNumberToObject(c, "start_ms", cm->start_ms);
            cJSON_AddNumberToObject(c, "compute_left_ms", cm->compute_left_ms);
            cJSON *tensors = cJSON_AddArrayToObject(c, "tensors");
            for (int k = 0; k < n->nin; k++)
                cJSON_AddItemToArray(tensors, cJSON_CreateString(pt_dsl_name(n->in[k]->name)));
            cJSON_AddItemToArray(comms, c);
        }
        cJSON_AddItemToArray(devs, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return -1;
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    base_free(text);
    return ok ? 0 : -1;
}

static int by_size(const void *a, const void *b)
{
    const mp_buffer *x = *(const mp_buffer *const *)a, *y = *(const mp_buffer *const *)b;
    return (x->size < y->size) - (x->size > y->size);
}

int pt_plan_check_caps(const pt_plan *p, const mp_plan *mp, const int64_t *caps, diag *d)
{
    int over = 0;
    char a[32], b[32], c[32];
    for (int dev = 0; dev < p->ndevices; dev++) {
        const pt_device_plan *x = &p->dev[dev];
        if (!caps[dev] || x->peak_bytes <= caps[dev])
            continue;
        over++;
        base_human_bytes((double)x->peak_bytes, a, sizeof a);
        base_human_bytes((double)caps[dev], b, sizeof b);
        diag_error(d, (ir_loc){0}, "device %d needs %s (%lld bytes), over its cap of %s (%lld "
                   "bytes)", dev, a, (long long)x->peak_bytes, b, (long long)caps[dev]);
        base_human_bytes((double)x->param_bytes, a, sizeof a);
        diag_note(d, (ir_loc){0}, "parameters, buffers and optimizer state held: %s", a);
        /* the arena at its fullest: the buffers live at that node */
        int at = -1;
        int64_t most = -1;
        for (int i = 0; i < mp->nbufs; i++) {
            const mp_buffer *q = &mp->bufs[i];
            if (q->device != dev)
                continue;
            int64_t live = 0;
            for (int j = 0; j < mp->nbufs; j++)
                if (mp->bufs[j].device == dev && mp->bufs[j].first <= q->first &&
                    q->first <= mp->bufs[j].last)
                    live += mp->bufs[j].size;
            if (live > most)
                most = live, at = q->first;
        }
        const mp_buffer **live = base_xcalloc((size_t)mp->nbufs, sizeof *live);
        int nlive = 0;
        for (int j = 0; j < mp->nbufs; j++)
            if (mp->bufs[j].device == dev && mp->bufs[j].first <= at && at <= mp->bufs[j].last)
                live[nlive++] = &mp->bufs[j];
        qsort(live, (size_t)nlive, sizeof *live, by_size);
        base_human_bytes((double)(most > 0 ? most : 0), a, sizeof a);
        diag_note(d, (ir_loc){0}, "activations live at the peak: %s in %d buffers, the largest:",
                  a, nlive);
        for (int j = 0; j < nlive && j < 8; j++) {
            base_human_bytes((double)live[j]->size, c, sizeof c);
            diag_note(d, (ir_loc){0}, "  %s: %s", pt_dsl_name(live[j]->value->name), c);
        }
        base_free(live);
    }
    return over ? -1 : 0;
}
