/* libFuzzer target for the plan loader (runtime/format/plan.c, docs/plan.md): the
 * input bytes are a plan file.  Each input is decoded twice: as it is, which
 * mostly exercises the header, the table and the checksums, and with every
 * checksum recomputed (rt_plan_fix_checksums), which lets a mutation reach the
 * checks behind them: the sections' kinds and places, the IR text, the device
 * counts, the memory plan, the meta lines, the kernels' sections (and
 * rt_plan_program on a plan with kernels).  A plan that loads must hold: its
 * memory plan passes mp_check again, and it encodes back to bytes that load.
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

#include "passes.h"
#include "plan.h"

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
