/* gnc export: a model (.net or .gir) as an ONNX file (frontend/onnx.h;
 * docs/onnx.md, "Export").
 *
 * The model is loaded as gnc run loads it (-D, --model, --batch), and its
 * inference part is what exports: the loss, the nodes only it reads and the
 * inputs only they read (the labels) are dropped.  The weights come from a
 * CPU executor: the initializers drawn with --seed, or a checkpoint's
 * (--weights).  The file is written whole or not at all. */
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "exec.h"
#include "onnx.h"

/* fe_values_fn over an executor: the values it holds for v. */
static const float *exec_values(void *ctx, const ir_value *v)
{
    return rt_exec_data(ctx, v);
}

/* g without its loss: the nodes that only the loss read go, and then the
 * inputs no node reads (the labels). */
static int drop_loss(ir_graph *g, diag *d)
{
    if (!g->loss)
        return 0;
    g->loss = NULL;
    pm_options pm = {.out = stderr};
    if (pm_run(g, "dce", &pm, d) != 0)
        return -1;
    int kept = 0;
    for (int i = 0; i < g->ninputs; i++) {
        int used = 0;
        ir_for_each_node(g, n) {
            for (int k = 0; k < n->nin && !used; k++)
                used = n->in[k] == g->inputs[i];
        }
        for (int k = 0; k < g->noutputs && !used; k++)
            used = g->outputs[k].value == g->inputs[i];
        if (used)
            g->inputs[kept++] = g->inputs[i];
    }
    g->ninputs = kept;
    return 0;
}

int cmd_export(const options *o)
{
    char err[1024];
    if (!fe_onnx_available()) {
        fe_export_onnx(NULL, NULL, NULL, o->out ? o->out : "export", err, sizeof err);
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    if (!o->out) {
        fprintf(stderr, "gnc: error: export needs -o FILE.onnx\n(see 'gnc export --help')\n");
        return 2;
    }
    if (cli_is_plan(o->c.file)) {
        fprintf(stderr, "gnc: error: %s is a plan, compiled for gnc's devices: export the "
                "model it was compiled from (.net or .gir)\n", o->c.file);
        return 1;
    }
    diag d;
    diag_init(&d);
    ir_graph *g = drv_load(&o->c, o->batch, &d);
    if (g && (drop_loss(g, &d) != 0 || ir_verify(g, &d) > 0)) {
        ir_graph_free(g);
        g = NULL;
    }
    diag_print(&d, stderr);
    diag_free(&d);
    if (!g)
        return 1;
    int rc = 1;
    rt_exec *x = NULL;
    /* IR text names imported weights ("data") without holding them: they
       would export as zeros */
    for (int i = 0; i < g->nparams && !o->weights; i++)
        if (g->params[i]->init.kind == IR_INIT_DATA && !g->params[i]->init.data) {
            fprintf(stderr, "gnc: error: %s: the values of '%s' (initializer 'data') are not "
                    "in IR text: give them with --weights FILE\n", o->c.file,
                    g->params[i]->name);
            goto done;
        }
    x = rt_exec_new(g, err, sizeof err);
    if (!x) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    rt_exec_init_params(x, o->seed);
    if (o->weights && rt_checkpoint_load(g, x, o->weights, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    if (fe_export_onnx(g, exec_values, x, o->out, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    rc = 0;
done:
    if (x)
        rt_exec_free(x);
    ir_graph_free(g);
    return rc;
}
