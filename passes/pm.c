/* The pass manager: named passes, pipelines, and what a user can ask to see
 * between them (the IR before or after a pass, the time each took), with the
 * verifier run after every pass on request.  See passes.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "passes.h"

static int pass_partition(ir_graph *g, const pm_options *o, diag *d)
{
    return o->partition ? pt_partition(g, o->partition, d) : 0;
}

static const pass_info passes[] = {
    {"simplify", "fold, cse and dce until nothing changes", pass_simplify, NULL},
    {"fold", "constant folding and algebraic identities", pass_fold, NULL},
    {"cse", "common-subexpression elimination", pass_cse, NULL},
    {"dce", "dead-code elimination", pass_dce, NULL},
    {"schedule", "a node order that keeps the peak of live activations low", pass_schedule, NULL},
    {"fuse", "producers and their elementwise epilogues into fused nodes", pass_fuse, NULL},
    {"fold_bn", "fold inference batchnorms into the conv2d or dense before them", pass_fold_bn, NULL},
    {"attention", "softmax(q k^T scale (causal mask)) v into one attention node (models: at "
     "load)", pass_attention, NULL},
    {"remat", "recompute batchnorm-ReLU results in the backward pass (training)", pass_remat,
     NULL},
    {"partition", "split the program between devices (--gpus, --strategy)", NULL,
     pass_partition},
};

const pass_info *pass_lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof passes / sizeof *passes; i++)
        if (strlen(passes[i].name) == len && strncmp(passes[i].name, name, len) == 0)
            return &passes[i];
    return NULL;
}

const char *pm_default_pipeline(int training, int remat, int partitioned)
{
    if (!training)
        return partitioned ? "simplify,fold_bn,schedule,partition,fuse"
                           : "simplify,fold_bn,schedule,fuse";
    if (partitioned)
        return remat ? "simplify,remat,schedule,partition,fuse" : "simplify,schedule,partition,fuse";
    return remat ? "simplify,remat,schedule,fuse" : "simplify,schedule,fuse";
}

/* Whether spec ("all", "before:P", "after:P") asks for the IR at this point. */
static int wants_dump(const char *spec, const char *when, const char *pass)
{
    if (!spec)
        return 0;
    if (strcmp(spec, "all") == 0)
        return strcmp(when, "after") == 0 || strcmp(pass, "input") == 0;
    size_t n = strlen(when);
    return strncmp(spec, when, n) == 0 && spec[n] == ':' && strcmp(spec + n + 1, pass) == 0;
}

/* Writes g's IR to the dump directory as NN-when-pass.gir, or to o->out. */
static int dump(const pm_options *o, const ir_graph *g, int index, const char *when,
                const char *pass, diag *d)
{
    if (!o->dump_dir) {
        fprintf(o->out, "# ---- IR %s %s\n", when, pass);
        ir_print(g, o->out);
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%02d-%s-%s.gir", o->dump_dir, index, when, pass);
    char err[1024];
    base_out out;
    if (base_out_open(&out, path, err, sizeof err) == 0) {
        ir_print(g, out.f);
        if (base_out_commit(&out, err, sizeof err) == 0)
            return 0;
    }
    diag_error(d, (ir_loc){0}, "%s", err);
    return -1;
}

int pm_run(ir_graph *g, const char *pipeline, const pm_options *o, diag *d)
{
    int index = 0;
    if (wants_dump(o->dump_ir, "before", "input") && dump(o, g, index, "before", "input", d))
        return -1;
    for (const char *p = pipeline; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const pass_info *pi = pass_lookup(p, len);
        if (!pi) {
            diag_error(d, (ir_loc){0}, "unknown pass '%.*s'", (int)len, p);
            return -1;
        }
        p += len + (end != NULL);
        index++;
        if (wants_dump(o->dump_ir, "before", pi->name) &&
            dump(o, g, index, "before", pi->name, d))
            return -1;
        int errors = d->nerrors;
        double t0 = base_now_ms();
        int changes = pi->run_with ? pi->run_with(g, o, d) : pi->run(g, d);
        double ms = base_now_ms() - t0;
        if (changes < 0 || d->nerrors > errors)
            return -1;
        if (o->time_passes)
            fprintf(o->out, "pass %-10s %8.3f ms  %d change%s\n", pi->name, ms, changes,
                    changes == 1 ? "" : "s");
        if (o->verify_each && ir_verify(g, d) > 0) {
            diag_error(d, (ir_loc){0}, "the IR does not verify after pass '%s'", pi->name);
            return -1;
        }
        if (wants_dump(o->dump_ir, "after", pi->name) && dump(o, g, index, "after", pi->name, d))
            return -1;
    }
    return 0;
}
