/* libFuzzer target for the frontend: the input bytes are a .net file.
 *
 * Each input is parsed and elaborated by fe_load_string with a fresh diag
 * context; a graph that comes back is verified and printed (to /dev/null), the
 * diagnostics are rendered (to /dev/null, which quotes source lines), and
 * everything is freed.  A crash, a sanitizer report, a leak, a timeout, or a
 * returned graph that fails ir_verify is a bug; errors reported on the diag are
 * the expected outcome for most inputs.
 *
 * Build and run: bash tools/fuzz.sh SECONDS (see tests/fuzz/fuzz.cmake). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "frontend.h"
#include "ir.h"

/* Imports are resolved relative to this name, in a folder that does not exist,
 * so a relative import fails cleanly without touching the file system. */
#define FUZZ_NAME "/nonexistent-gnc-fuzz/input.net"

static int has(const uint8_t *data, size_t size, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(data + i, s, n) == 0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    if (!devnull)
        return 0;
    /* An absolute import ("/dev/stdin", "/dev/zero") would read the host's files;
     * a string starts with '/' only as "/... or "\/... */
    if (has(data, size, "import") && (has(data, size, "\"/") || has(data, size, "\"\\/")))
        return 0;

    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_string(FUZZ_NAME, (const char *)data, size, NULL, &d);
    if (g) {
        /* the frontend promises a graph that verifies (elab.c) */
        if (ir_verify(g, &d) > 0) {
            diag_print(&d, stderr);
            fputs("fuzz_frontend: the frontend returned a graph that does not verify\n", stderr);
            abort();
        }
        ir_print(g, devnull);
        ir_graph_free(g);
    }
    diag_print(&d, devnull);
    diag_free(&d);
    return 0;
}
