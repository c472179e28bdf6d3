/* The test drivers' helpers and a small FileCheck: see filecheck.h. */
#include "filecheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits text into lines (in place); returns the count. */
int split_lines(char *text, char ***lines)
{
    int n = 0, cap = 0;
    *lines = NULL;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        if (n == cap)
            *lines = realloc(*lines, (size_t)(cap = 2 * cap + 16) * sizeof **lines);
        (*lines)[n++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* Matches the CHECK lines of text against out, FileCheck style.  Returns 1 when
 * all hold, else 0 with the first that does not in err. */
int file_check(const char *text, const char *out, char *err, size_t errlen)
{
    char *src = strdup(text), *res = strdup(out), **sl, **ol;
    int ns = split_lines(src, &sl), no = split_lines(res, &ol);
    int pos = -1;           /* the line of the last match */
    int nnot = 0, ok = 1, nchecks = 0;
    const char *nots[64];
    for (int i = 0; i <= ns && ok; i++) {
        const char *l = i < ns ? sl[i] + strspn(sl[i], " \t") : "# CHECK-END";
        const char *pat = NULL;
        int next = 0;
        if (strncmp(l, "# CHECK-NOT: ", 13) == 0) {
            if (nnot < 64)
                nots[nnot++] = l + 13;
            continue;
        }
        if (strncmp(l, "# CHECK: ", 9) == 0)
            pat = l + 9;
        else if (strncmp(l, "# CHECK-NEXT: ", 14) == 0)
            pat = l + 14, next = 1;
        else if (strcmp(l, "# CHECK-END") != 0)
            continue;
        int at = no; /* CHECK-END: the end of the output */
        if (pat) {
            nchecks++;
            for (at = pos + 1; at < no && !strstr(ol[at], pat); at++)
                if (next)
                    at = no - 1;
            if (at == no || (next && at != pos + 1)) {
                snprintf(err, errlen, "%s '%s' not found after output line %d",
                         next ? "CHECK-NEXT" : "CHECK", pat, pos + 1);
                ok = 0;
                break;
            }
        }
        for (int k = 0; k < nnot && ok; k++)
            for (int j = pos + 1; j < at; j++)
                if (strstr(ol[j], nots[k])) {
                    snprintf(err, errlen, "CHECK-NOT '%s' found on output line %d: %s", nots[k],
                             j + 1, ol[j]);
                    ok = 0;
                    break;
                }
        nnot = 0;
        pos = at;
    }
    if (ok && nchecks == 0) {
        snprintf(err, errlen, "no CHECK lines");
        ok = 0;
    }
    free(sl);
    free(ol);
    free(src);
    free(res);
    return ok;
}

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 4096 + 1 > cap)
            s = realloc(s, cap = 2 * cap + 4096 + 1);
        if (!s)
            abort();
        got = fread(s + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

char *graph_text(const ir_graph *g)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        abort();
    ir_print(g, f);
    fclose(f);
    return s;
}

char *diag_text(const diag *d)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f)
        abort();
    diag_print(d, f);
    fclose(f);
    return s;
}
