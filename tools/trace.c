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
#include "session.h"

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



enum { WIDTH = 1200, ROW = 28, LEFT = 150 };

/* The trace as a timeline picture: a row per device and stream, a box per
 * event (its name and times in a tooltip), idle time left blank. */
static void timeline_svg(cJSON *root, FILE *f)
{
    static const char *const fills[] = {"#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948",
                                        "#b07aa1", "#9c755f", "#bab0ac"};
    cJSON *ev = cJSON_GetObjectItem(root, "traceEvents"), *e;
    double end = 0;
    int ndev = 0;
    cJSON_ArrayForEach(e, ev) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0)
            continue;
        double t = cJSON_GetObjectItem(e, "ts")->valuedouble +
                   cJSON_GetObjectItem(e, "dur")->valuedouble;
        int pid = cJSON_GetObjectItem(e, "pid")->valueint;
        end = t > end ? t : end;
        ndev = pid + 1 > ndev ? pid + 1 : ndev;
    }
    double w = WIDTH - LEFT - 20, scale = end > 0 ? w / end : 1;
    int height = 60 + 2 * ndev * ROW + 30;
    cJSON *other = cJSON_GetObjectItem(root, "otherData");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"Helvetica\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
            "fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-size=\"13\">", WIDTH, height);
    cli_put_xml(f, cJSON_GetObjectItem(other, "gnc")->valuestring);
    cJSON *strategy = cJSON_GetObjectItem(other, "strategy");
    if (strategy) {
        fputs(", ", f);
        cli_put_xml(f, strategy->valuestring);
    }
    fprintf(f, ": %.3f ms</text>\n", end / 1e3);
    for (int r = 0; r < 2 * ndev; r++)
        fprintf(f, "<text x=\"10\" y=\"%d\">device %d %s</text><line x1=\"%d\" y1=\"%d\" "
                "x2=\"%.0f\" y2=\"%d\" stroke=\"#ddd\"/>\n", 40 + r * ROW + ROW / 2 + 4, r / 2,
                r % 2 ? "communication" : "compute", LEFT, 40 + (r + 1) * ROW, LEFT + w,
                40 + (r + 1) * ROW);
    int k = 0;
    cJSON_ArrayForEach(e, ev) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0)
            continue;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        int row = 2 * cJSON_GetObjectItem(e, "pid")->valueint +
                  cJSON_GetObjectItem(e, "tid")->valueint;
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                "<title>", LEFT + ts * scale, 42 + row * ROW, dur * scale > 0.3 ? dur * scale : 0.3,
                ROW - 4, row % 2 ? "#e15759" : fills[k++ % 8]);
        cli_put_xml(f, cJSON_GetObjectItem(e, "name")->valuestring);
        fputs(" (", f);
        cli_put_xml(f, cJSON_GetObjectItem(e, "cat")->valuestring);
        fprintf(f, "): %.1f us at %.1f us</title></rect>\n", dur, ts);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\">0</text><text x=\"%.0f\" y=\"%d\" "
            "text-anchor=\"end\">%.3f ms</text>\n</svg>\n", LEFT, height - 10, LEFT + w,
            height - 10, end / 1e3);
}

/* root as JSON text, or (FILE.svg) as a timeline: cli_write_atomic's fill */
typedef struct {
    cJSON *root;
    int svg;
} trace_out;

static int fill_trace(FILE *f, void *ctx)
{
    const trace_out *t = ctx;
    if (t->svg) {
        timeline_svg(t->root, f);
        return 0;
    }
    return cli_put_json(f, t->root);
}

static int write_json(cJSON *root, const char *path, const char *flag)
{
    trace_out t = {root, cli_has_suffix(path, ".svg")};
    int rc = cli_write_atomic(path, flag, fill_trace, &t);
    cJSON_Delete(root);
    return rc;
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

int cli_write_measured_trace(struct rt_session *s, const char *what, const char *path)
{
    int n;
    const rt_event *ev = rt_session_gpu(s) ? rt_cuda_events(rt_session_gpu(s), &n)
                                           : rt_exec_events(rt_session_host(s), &n);
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

int cli_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void cli_put_xml(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s >= 0x20 && *s < 0x7f ? *s : '?', f);
        }
}

int cli_put_json(FILE *f, const cJSON *root)
{
    char *text = cJSON_PrintUnformatted(root);
    int ok = text && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    base_free(text);
    return ok ? 0 : -1;
}

int cli_write_atomic(const char *path, const char *flag, int (*fill)(FILE *f, void *ctx),
                     void *ctx)
{
    char err[1024];
    base_out o;
    if (base_out_open(&o, path, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s: %s\n", flag, err);
        return 1;
    }
    if (fill(o.f, ctx) != 0 || ferror(o.f)) {
        fprintf(stderr, "gnc: error: %s: cannot write '%s': %s\n", flag, path, strerror(errno));
        base_out_abandon(&o);
        return 1;
    }
    if (base_out_commit(&o, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s: %s\n", flag, err);
        return 1;
    }
    return 0;
}
