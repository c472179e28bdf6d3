/* libgnc's gnc_compile and gnc_compile_memory (include/gnc/gnc.h): a model
 * compiled into a plan in memory by the compile driver.  It lives here, beside the driver it calls,
 * so that the runtime (runtime/api/api.c, the other entry points) depends on
 * nothing above it. */
#include <gnc/gnc.h>

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "codegen.h"
#include "driver.h"
#include "libgnc.h"
#include "passes.h"
#include "plan.h"

gnc_status gnc_compile(gnc_plan **out, const char *path, const gnc_compile_options *options,
                       gnc_error *err)
{
    gnc_compile_options o = options ? *options : (gnc_compile_options){0};
    if (!out || !path || (o.ndefines && !o.defines) || o.ndefines < 0)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: NULL argument");
    *out = NULL;
    if (o.ndefines > DRV_MAX_DEFINES)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: more than %d defines",
                            DRV_MAX_DEFINES);
    int precision = o.precision ? ir_precision_lookup(o.precision) : PREC_FP32; /* -1: unknown */
    if (precision < 0)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: unknown precision '%s' (fp32, "
                            "tf32, bf16, fp16)", o.precision);
    if (o.devices < 0 || o.devices > IR_MAX_DEVICES || !(o.momentum >= 0 && o.momentum < 1))
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: %s out of range",
                            o.devices < 0 || o.devices > IR_MAX_DEVICES ? "devices" : "momentum");
    drv_config c = {.file = path, .train = o.train, .opt = ad_optimizer_default(AD_SGD),
                    .part = {.devices = o.devices > 1 ? o.devices : 1, .strategy = PT_DATA},
                    .precision = precision, .no_kernels = o.no_kernels, .flags = ""};
    c.opt.momentum = o.momentum;
    c.loss = o.loss;
    if (o.strategy && drv_set_strategy(&c, o.strategy) != 0)
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: strategy '%s' is none of "
                            "data, zero1, zero2, zero3, pipeline, tensor, hybrid:dp=A,pp=B, "
                            "auto", o.strategy);
    char *buf = NULL;
    size_t used = 0;
    for (int i = 0; i < o.ndefines; i++) {
        const char *eq = o.defines[i] ? strchr(o.defines[i], '=') : NULL;
        if (!eq || eq == o.defines[i]) {
            base_free(buf);
            return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile: a define is NAME=VALUE, "
                                "not '%s'", o.defines[i] ? o.defines[i] : "(null)");
        }
        used += strlen(o.defines[i]) + 1;
    }
    /* the names cut from "NAME=VALUE": one buffer for all of them */
    char *names = buf = base_malloc(used + 1);
    if (!buf)
        return rt_api_error(err, GNC_ERROR_MEMORY, "out of memory");
    for (int i = 0; i < o.ndefines; i++) {
        size_t k = (size_t)(strchr(o.defines[i], '=') - o.defines[i]);
        memcpy(names, o.defines[i], k);
        names[k] = '\0';
        c.define_names[i] = names;
        c.define_values[i] = o.defines[i] + k + 1;
        names += k + 1;
    }
    c.ndefines = o.ndefines;
    FILE *quiet = fopen("/dev/null", "w"); /* the passes' log, which gnc prints */
    if (!quiet) {
        base_free(buf);
        return rt_api_error(err, GNC_ERROR_IO, "gnc_compile: cannot open /dev/null");
    }
    c.log = quiet;
    base_catch oom;
    base_catch_push(&oom);
    if (setjmp(oom.jump)) {
        fclose(quiet);
        base_free(buf);
        return rt_api_out_of_memory(err);
    }
    diag d;
    diag_init(&d);
    drv_program p;
    char msg[1024];
    gnc_status st = GNC_OK;
    rt_plan *plan = NULL;
    if (drv_compile(&c, NULL, 0, c.train, &p, &d) != 0) {
        const diag_entry *e = NULL;
        for (int i = 0; i < d.n && !e; i++)
            if (d.entries[i].level == DIAG_ERROR)
                e = &d.entries[i];
        if (e && e->loc.file && e->loc.line)
            st = rt_api_error(err, GNC_ERROR_FORMAT, "%s:%d:%d: error: %s", e->loc.file,
                              e->loc.line, e->loc.col, e->msg);
        else if (e && e->loc.file)
            st = rt_api_error(err, rt_api_kind_of(e->msg, GNC_ERROR_FORMAT), "%s: error: %s",
                              e->loc.file, e->msg);
        else
            st = rt_api_error(err, rt_api_kind_of(e ? e->msg : "", GNC_ERROR_FORMAT), "%s",
                              e ? e->msg : "the model does not compile");
    } else {
        if (drv_plan(&c, &p, path, &plan, msg, sizeof msg) != 0)
            st = rt_api_error(err, rt_api_kind_of(msg, GNC_ERROR_FORMAT), "%s", msg);
        drv_candidates_free(p.plan);
        drv_program_free(&p);
    }
    diag_free(&d);
    if (st == GNC_OK)
        st = rt_api_plan_made(out, plan, "", err);
    base_catch_pop(&oom);
    fclose(quiet);
    base_free(buf);
    return st;
}

gnc_status gnc_compile_memory(gnc_plan **out, const void *data, size_t size, const char *name,
                              const gnc_compile_options *options, gnc_error *err)
{
    if (!out || (!data && size))
        return rt_api_error(err, GNC_ERROR_ARGUMENT, "gnc_compile_memory: NULL argument");
    *out = NULL;
    if (!name || !*name)
        name = "<memory>";
    /* the driver reads the model as a file named name: on this thread, for
       this call, the bytes stand for it (base_preload) */
    base_preload(name, data ? data : "", size);
    gnc_status st = gnc_compile(out, name, options, err);
    base_preload(NULL, NULL, 0);
    return st;
}
