/* Small things every stage uses (base.h). */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int base_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

uint64_t base_splitmix64(uint64_t x)
{
    x += BASE_GOLDEN_GAMMA;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void base_human_bytes(double b, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

static void *or_abort(void *p)
{
    if (!p) {
        fputs("gnc: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *base_xmalloc(size_t n) { return or_abort(malloc(n ? n : 1)); }
void *base_xcalloc(size_t n, size_t size) { return or_abort(calloc(n ? n : 1, size ? size : 1)); }
void *base_xrealloc(void *p, size_t n) { return or_abort(realloc(p, n ? n : 1)); }

char *base_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(base_xmalloc(n), s, n);
}
