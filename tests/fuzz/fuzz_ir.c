/* libFuzzer target for the IR text parser and the verifier: the input bytes are
 * a .gir file (docs/ir.md).  Each input is parsed; a graph that comes back is
 * verified, and when it verifies it is printed, parsed again and printed again,
 * which must give the same text (the round trip of docs/ir.md).  A crash, a
 * sanitizer report, a leak, a timeout or a broken round trip is a bug.
 *
 * Build and run: bash tools/fuzz.sh SECONDS ir (see tests/fuzz/fuzz.cmake). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "ir.h"

static char *text_of(const ir_graph *g, size_t *len)
{
    char *s = NULL;
    FILE *f = open_memstream(&s, len);
    ir_print(g, f);
    fclose(f);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    if (!devnull)
        return 0;
    diag d;
    diag_init(&d);
    ir_graph *g = ir_parse("fuzz.gir", (const char *)data, size, &d);
    if (g && ir_verify(g, &d) == 0) {
        size_t n1, n2;
        char *t1 = text_of(g, &n1);
        diag d2;
        diag_init(&d2);
        ir_graph *h = ir_parse("fuzz.gir", t1, n1, &d2);
        char *t2 = h ? text_of(h, &n2) : NULL;
        if (!h || n1 != n2 || memcmp(t1, t2, n1) != 0) {
            diag_print(&d2, stderr);
            fputs("fuzz_ir: a verified graph does not round-trip through its text\n", stderr);
            abort();
        }
        free(t1);
        free(t2);
        ir_graph_free(h);
        diag_free(&d2);
    }
    if (g)
        ir_graph_free(g);
    diag_print(&d, devnull);
    diag_free(&d);
    return 0;
}
