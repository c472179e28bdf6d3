/* libFuzzer target for the plan loader (runtime/format/plan.c, docs/plan.md): the
 * input bytes are a plan file.  Each input is decoded twice: as it is, which
 * mostly exercises the header, the table and the checksums, and with every
 * checksum recomputed (rt_plan_fix_checksums), which lets a mutation reach the
 * checks behind them: the sections' kinds and places, the IR text, the device
 * counts, the memory plan, the meta lines, the kernels' sections (and
 * rt_plan_program on a plan with kernels).  A plan that loads must hold: its
 * memory plan passes mp_check again, and it encodes back to bytes that load.
 * A small plan that loads also runs, on the CPU executor with its devices on
 * threads: the verifier proves a loaded plan cannot hang, so a hang is a
 * finding (libFuzzer's -timeout; tools/fuzz.sh gives 10 s).
 * A crash, a sanitizer report, a leak, a timeout, or a loaded plan that does
 * not hold is a bug; a rejection with a message is the expected outcome.
 *
 * Build and run: bash tools/fuzz.sh SECONDS plan (see tests/fuzz/fuzz.cmake);
 * the seeds are tests/fuzz/plans/*.gnc. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "passes.h"
#include "plan.h"

/* Runs a plan of at most 2^16 elements in all and 256 nodes once, its inputs
 * zero, its parameters from their initializers: it ends, well or with a
 * message (a label out of range), and never hangs. */
static void run_small(const rt_plan *p)
{
    int64_t elems = 0;
    int nodes = 0;
    ir_for_each_node(p->g, n) {
        nodes++;
        for (int k = 0; k < n->nout; k++)
            elems += ir_type_numel(&n->out[k]->type);
    }
    for (int i = 0; i < p->g->ninputs; i++)
        elems += ir_type_numel(&p->g->inputs[i]->type);
    for (int i = 0; i < p->g->nparams; i++)
        elems += ir_type_numel(&p->g->params[i]->type);
    if (elems > (1 << 16) || nodes > 256)
        return;
    char err[1024] = "";
    rt_exec *x = rt_exec_new_planned(p->g, p->mp->offset_by_id, p->mp->device_bytes, err,
                                     sizeof err);
    if (!x) {
        if (err[0] == '\0') {
            fputs("fuzz_plan: rt_exec_new_planned failed without a message\n", stderr);
            abort();
        }
        return;
    }
    rt_exec_init_params(x, 1);
    for (int i = 0; i < p->g->ninputs; i++) {
        const ir_value *v = p->g->inputs[i];
        size_t es = v->type.dtype == IR_I64 ? 8 : v->type.dtype == IR_U8 ? 1 : 4;
        void *d = rt_exec_data(x, v);
        if (d)
            memset(d, 0, (size_t)ir_type_numel(&v->type) * es);
    }
    err[0] = '\0';
    if (rt_exec_run(x, err, sizeof err) != 0 && err[0] == '\0') {
        fputs("fuzz_plan: a run failed without a message\n", stderr);
        abort();
    }
    rt_exec_free(x);
}

static void decode(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    rt_plan *p = rt_plan_decode(data, size, "fuzz.gnc", err, sizeof err);
    if (!p) {
        if (err[0] == '\0') {
            fputs("fuzz_plan: a plan was rejected without a message\n", stderr);
            abort();
        }
        return;
    }
    unsigned char *again = NULL;
    size_t n;
    if (mp_check(p->g, p->mp, err, sizeof err) != 0 ||
        rt_plan_encode(p->g, p->mp, p->meta, p->nmeta, &again, &n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_plan: a loaded plan does not hold: %s\n", err);
        abort();
    }
    free(again);
    run_small(p);
    /* a plan with kernels: the CUDA runtime's program, or a message */
    if (p->nmodules) {
        err[0] = '\0';
        cg_program *cg = rt_plan_program(p, err, sizeof err);
        if (!cg && err[0] == '\0') {
            fputs("fuzz_plan: rt_plan_program failed without a message\n", stderr);
            abort();
        }
        cg_program_free(cg);
    }
    rt_plan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    rt_plan_fix_checksums(fixed, size);
    decode(fixed, size);
    free(fixed);
    return 0;
}
