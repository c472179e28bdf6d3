/* Chrome traces (the Trace Event Format that Perfetto and chrome://tracing
 * open): gnc compile --trace, the predicted step of the cost model's
 * simulation; gnc run and gnc train --profile=FILE, the kernels as the CPU
 * executor ran them.  Both the same way: a process per device, a thread per
 * stream (compute, communication), a complete event ("ph": "X") per kernel or
 * communication, times in microseconds from the first start, so that the
 * predicted and the measured step can be laid side by side (docs/cli.md,
 * docs/gallery.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "cost.h"
#include "exec.h"

enum { COMPUTE, COMMUNICATION };

typedef struct {
    cJSON *events;
    double t0_ms;
} trace;

/* "conv2d+relu": the ops of a kernel's members */
static void ops_of(const ir_node *first, const ir_node *last, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (const ir_node *n = first; n && at + 1 < len; n = n->next) {
        at += (size_t)snprintf(buf + at, len - at, "%s%s", n == first ? "" : "+",
                               ir_ops[n->op].name);
        if (n == last)
            break;
    }
}

static void slice(trace *t, int device, int stream, const ir_node *first, const ir_node *last,
                  double start_ms, double end_ms, double flops, double bytes)
{
    char ops[256];
    ops_of(first, last, ops, sizeof ops);
    cJSON *e = cJSON_CreateObject(), *args = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", pt_dsl_name(first->out[0]->name));
    cJSON_AddStringToObject(e, "cat", ops);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", (start_ms - t->t0_ms) * 1e3);
    cJSON_AddNumberToObject(e, "dur", (end_ms - start_ms) * 1e3);
    cJSON_AddNumberToObject(e, "pid", device);
    cJSON_AddNumberToObject(e, "tid", stream);
    cJSON_AddStringToObject(args, "value", first->out[0]->name);
    if (flops > 0)
        cJSON_AddNumberToObject(args, "flops", flops);
    if (bytes > 0)
        cJSON_AddNumberToObject(args, "bytes", bytes);
    cJSON_AddItemToObject(e, "args", args);
    cJSON_AddItemToArray(t->events, e);
}

/* The names of device d's process and its two threads. */
static void names(trace *t, int d)
{
    static const char *const streams[] = {"compute", "communication"};
    char name[32];
    snprintf(name, sizeof name, "device %d", d);
    for (int k = -1; k < 2; k++) {
        cJSON *e = cJSON_CreateObject(), *args = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", k < 0 ? "process_name" : "thread_name");
        cJSON_AddStringToObject(e, "ph", "M");
        cJSON_AddNumberToObject(e, "pid", d);
        cJSON_AddNumberToObject(e, "tid", k < 0 ? 0 : k);
        cJSON_AddStringToObject(args, "name", k < 0 ? name : streams[k]);
        cJSON_AddItemToObject(e, "args", args);
        cJSON_AddItemToArray(t->events, e);
    }
}

/* Writes root to path through a temporary file: 0, or 1 after saying why. */
static int write_json(cJSON *root, const char *path, const char *flag)
{
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t n = strlen(path) + 32;
    char *tmp = base_malloc(n);
    if (!text || !tmp) {
        base_free(text);
        base_free(tmp);
        fprintf(stderr, "gnc: error: %s: out of memory\n", flag);
        return 1;
    }
    snprintf(tmp, n, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = (f && fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "gnc: error: %s: cannot write '%s': %s\n", flag, path, strerror(errno));
        remove(tmp);
        ok = 0;
    }
    base_free(text);
    base_free(tmp);
    return ok ? 0 : 1;
}

static cJSON *begin(trace *t, const char *what, int ndevices)
{
    cJSON *root = cJSON_CreateObject(), *other = cJSON_CreateObject();
    t->events = cJSON_AddArrayToObject(root, "traceEvents");
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    cJSON_AddStringToObject(other, "gnc", what);
    cJSON_AddItemToObject(root, "otherData", other);
    for (int d = 0; d < ndevices; d++)
        names(t, d);
    return root;
}

int cli_write_predicted_trace(const pt_plan *p, const char *path)
{
    const cost_sim *s = p->sim;
    trace t = {0};
    cJSON *root = begin(&t, "predicted", s->ndevices);
    cJSON *other = cJSON_GetObjectItem(root, "otherData");
    cJSON_AddStringToObject(other, "strategy", p->strategy);
    cJSON_AddStringToObject(other, "device_model", p->cost.name);
    cJSON_AddNumberToObject(other, "step_ms", s->step_ms);
    cJSON_AddNumberToObject(other, "bubble", s->bubble);
    for (int k = 0; k < s->nkernels; k++) {
        const cost_kernel *c = &s->kernels[k];
        double bytes = 0;
        for (const ir_node *n = c->first; n; n = n->next) {
            bytes += cost_node_bytes(n);
            if (n == c->last)
                break;
        }
        slice(&t, c->device, COMPUTE, c->first, c->first == c->last ? c->first : c->last,
              c->start_ms, c->end_ms, c->flops, bytes);
    }
    /* a communication on the communication stream of each device it joins: a
       collective's group, a send's device and its peer */
    for (int k = 0; k < s->ncomms; k++) {
        const cost_comm *c = &s->comms[k];
        int n = 0;
        const int64_t *group = ir_get_attr(c->node, "group")
                                   ? ir_attr_ints(c->node, "group", &n) : NULL;
        if (!group) {
            slice(&t, c->node->device, COMMUNICATION, c->node, c->node, c->start_ms, c->end_ms,
                  0, (double)c->bytes);
            if (ir_get_attr(c->node, "peer"))
                slice(&t, (int)ir_attr_int(c->node, "peer"), COMMUNICATION, c->node, c->node,
                      c->start_ms, c->end_ms, 0, (double)c->bytes);
            continue;
        }
        for (int i = 0; i < n; i++)
            slice(&t, (int)group[i], COMMUNICATION, c->node, c->node, c->start_ms, c->end_ms, 0,
                  (double)c->bytes);
    }
    return write_json(root, path, "--trace");
}

int cli_write_measured_trace(struct rt_exec *x, const char *what, const char *path)
{
    int n;
    const rt_event *ev = rt_exec_events(x, &n);
    int ndevices = 1;
    trace t = {.t0_ms = n ? ev[0].start_ms : 0};
    for (int i = 0; i < n; i++) {
        ndevices = ev[i].device + 1 > ndevices ? ev[i].device + 1 : ndevices;
        t.t0_ms = ev[i].start_ms < t.t0_ms ? ev[i].start_ms : t.t0_ms;
    }
    cJSON *root = begin(&t, what, ndevices);
    for (int i = 0; i < n; i++)
        slice(&t, ev[i].device, ir_op_communicates(ev[i].first->op) ? COMMUNICATION : COMPUTE,
              ev[i].first, ev[i].last, ev[i].start_ms, ev[i].end_ms, 0, 0);
    return write_json(root, path, "--profile");
}
