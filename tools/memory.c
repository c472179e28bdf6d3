/* gnc compile --dump-memory=FILE: the memory plan as JSON (FILE.json) or as a
 * picture of each device's arena over the step (FILE.svg): a rectangle per
 * buffer from the node that defines it to the last that reads it, at its
 * offset and of its size, under the arena's top and the lower bound (the most
 * bytes live at once, which no plan beats) drawn as lines (docs/cli.md,
 * docs/gallery.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "cli.h"


static cJSON *plan_json(const ir_graph *g, const mp_plan *p)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "nodes", g->nnodes);
    cJSON_AddNumberToObject(root, "align", MP_ALIGN);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (int d = 0; d < p->ndevices; d++) {
        const mp_device *x = &p->dev[d];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d);
        cJSON_AddNumberToObject(o, "arena_bytes", (double)x->arena_bytes);
        cJSON_AddNumberToObject(o, "lower_bound", (double)x->lower_bound);
        cJSON_AddNumberToObject(o, "no_reuse_bytes", (double)x->no_reuse_bytes);
        cJSON_AddNumberToObject(o, "param_bytes", (double)x->param_bytes);
        cJSON_AddNumberToObject(o, "input_bytes", (double)x->input_bytes);
        cJSON_AddItemToArray(devs, o);
    }
    cJSON *bufs = cJSON_AddArrayToObject(root, "buffers");
    for (int i = 0; i < p->nbufs; i++) {
        const mp_buffer *b = &p->bufs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "value", b->value->name);
        cJSON_AddNumberToObject(o, "device", b->device);
        cJSON_AddNumberToObject(o, "offset", (double)b->offset);
        cJSON_AddNumberToObject(o, "bytes", (double)b->size);
        cJSON_AddNumberToObject(o, "first", b->first);
        cJSON_AddNumberToObject(o, "last", b->last);
        cJSON_AddNumberToObject(o, "members", b->members);
        cJSON_AddItemToArray(bufs, o);
    }
    return root;
}


enum { WIDTH = 960, PANEL = 300, MARGIN = 60, GAP = 50 };

static void plan_svg(const ir_graph *g, const mp_plan *p, FILE *f)
{
    static const char *const fills[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    int height = p->ndevices * (PANEL + GAP) + MARGIN;
    double w = WIDTH - 2 * MARGIN, steps = g->nnodes > 0 ? g->nnodes + 1 : 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"Helvetica\" font-size=\"11\">\n", WIDTH, height);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    for (int d = 0; d < p->ndevices; d++) {
        const mp_device *x = &p->dev[d];
        double top = MARGIN / 2 + d * (PANEL + GAP) + 20, full = x->arena_bytes > 0
                                                                   ? (double)x->arena_bytes : 1;
        double scale = PANEL / (full > (double)x->lower_bound ? full : (double)x->lower_bound);
        char who[32] = "arena";
        if (p->ndevices > 1)
            snprintf(who, sizeof who, "device %d: arena", d);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"13\">%s %.2f MiB planned, "
                "lower bound %.2f MiB (%.3fx), %.2f MiB without reuse</text>\n", MARGIN,
                top - 8, who,
                (double)x->arena_bytes / 1048576, (double)x->lower_bound / 1048576,
                x->lower_bound ? (double)x->arena_bytes / (double)x->lower_bound : 1.0,
                (double)x->no_reuse_bytes / 1048576);
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
                "stroke=\"#888\"/>\n", MARGIN, top, w, PANEL);
        for (int i = 0; i < p->nbufs; i++) {
            const mp_buffer *b = &p->bufs[i];
            if (b->device != d)
                continue;
            /* offset 0 at the bottom: the arena fills upwards over time */
            double x0 = MARGIN + w * b->first / steps, x1 = MARGIN + w * (b->last + 1) / steps;
            double y = top + PANEL - scale * (double)(b->offset + b->size);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                    "fill=\"%s\" fill-opacity=\"0.8\" stroke=\"white\" stroke-width=\"0.3\">"
                    "<title>", x0, y, x1 - x0 > 0.5 ? x1 - x0 : 0.5,
                    scale * (double)b->size, fills[i % 10]);
            cli_put_xml(f, b->value->name);
            fprintf(f, ": %lld bytes at %lld, nodes %d-%d</title></rect>\n", (long long)b->size,
                    (long long)b->offset, b->first, b->last);
        }
        double lb = top + PANEL - scale * (double)x->lower_bound;
        fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"red\" "
                "stroke-dasharray=\"6,3\"/><text x=\"%.1f\" y=\"%.2f\" fill=\"red\" "
                "text-anchor=\"end\">lower bound</text>\n", MARGIN, lb, MARGIN + w, lb,
                MARGIN + w - 4, lb - 3);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f MiB</text>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">0</text>\n", MARGIN - 4,
                top + 10, full / 1048576, MARGIN - 4, top + PANEL);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">node (execution order, "
                "0-%d)</text>\n", MARGIN + w / 2, top + PANEL + 16, g->nnodes);
    }
    fputs("</svg>\n", f);
}

typedef struct {
    const ir_graph *g;
    const mp_plan *p;
    int svg;
} memory_out;

static int fill_memory(FILE *f, void *ctx)
{
    const memory_out *m = ctx;
    if (m->svg) {
        plan_svg(m->g, m->p, f);
        return 0;
    }
    cJSON *root = plan_json(m->g, m->p);
    int rc = cli_put_json(f, root);
    cJSON_Delete(root);
    return rc;
}

int cli_write_memory(const ir_graph *g, const mp_plan *p, const char *path)
{
    memory_out m = {g, p, cli_has_suffix(path, ".svg")};
    if (!m.svg && !cli_has_suffix(path, ".json")) {
        fprintf(stderr, "gnc: error: --dump-memory=%s: write FILE.json or FILE.svg\n", path);
        return 1;
    }
    return cli_write_atomic(path, "--dump-memory", fill_memory, &m);
}
