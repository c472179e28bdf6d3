/* Diagnostics: see diag.h. */
#include "base.h"
#include "diag.h"

#include <stdlib.h>
#include <string.h>

struct diag_source {
    char *file;
    char *text;
    size_t len;
    struct diag_source *next;
};

void diag_init(diag *d)
{
    memset(d, 0, sizeof *d);
    d->max_errors = 50;
}

void diag_free(diag *d)
{
    for (int i = 0; i < d->n; i++)
        base_free(d->entries[i].msg);
    base_free(d->entries);
    for (struct diag_source *s = d->sources, *next; s; s = next) {
        next = s->next;
        base_free(s->file);
        base_free(s->text);
        base_free(s);
    }
    memset(d, 0, sizeof *d);
}

/* The entry for file, made (without text) when there is none: entries keep
 * the file names that locations point to, so a message outlives the graph or
 * buffer its location came from. */
static struct diag_source *source_entry(diag *d, const char *file)
{
    for (struct diag_source *s = d->sources; s; s = s->next)
        if (strcmp(s->file, file) == 0)
            return s;
    struct diag_source *s = base_xrealloc(NULL, sizeof *s);
    s->file = base_xrealloc(NULL, strlen(file) + 1);
    strcpy(s->file, file);
    s->text = NULL;
    s->len = 0;
    s->next = d->sources;
    d->sources = s;
    return s;
}

const char *diag_add_source(diag *d, const char *file, const char *text, size_t len)
{
    struct diag_source *s = source_entry(d, file);
    if (!s->text) {
        s->text = base_xrealloc(NULL, len + 1);
        memcpy(s->text, text, len);
        s->text[len] = '\0';
        s->len = len;
    }
    return s->file;
}

void diag_vreport(diag *d, diag_level level, ir_loc loc, const char *fmt, va_list ap)
{
    if (level == DIAG_ERROR) {
        d->nerrors++;
        if (d->max_errors && d->nerrors > d->max_errors)
            return;
    } else if (level == DIAG_NOTE && d->max_errors && d->nerrors > d->max_errors) {
        return; /* a note belongs to the error before it */
    }
    va_list aq;
    va_copy(aq, ap);
    int len = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *msg = base_xrealloc(NULL, (size_t)(len < 0 ? 0 : len) + 1);
    vsnprintf(msg, (size_t)(len < 0 ? 0 : len) + 1, fmt, ap);
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 16;
        d->entries = base_xrealloc(d->entries, (size_t)d->cap * sizeof *d->entries);
    }
    if (loc.file)
        loc.file = source_entry(d, loc.file)->file;
    d->entries[d->n++] = (diag_entry){level, loc, msg};
}

#define DIAG_FN(fn, level)                                \
    void fn(diag *d, ir_loc loc, const char *fmt, ...)    \
    {                                                     \
        va_list ap;                                       \
        va_start(ap, fmt);                                \
        diag_vreport(d, level, loc, fmt, ap);             \
        va_end(ap);                                       \
    }
DIAG_FN(diag_error, DIAG_ERROR)
DIAG_FN(diag_note, DIAG_NOTE)

static const struct diag_source *find_source(const diag *d, const char *file)
{
    if (!file)
        return NULL;
    for (const struct diag_source *s = d->sources; s; s = s->next)
        if (strcmp(s->file, file) == 0)
            return s;
    return NULL;
}

/* Text from a file as a terminal may show it: a control byte (C0 but tab and,
 * where newlines are kept, newline; DEL) as '?', one byte for one, so that a
 * caret still lines up and no escape sequence reaches the terminal. */
static void put_clean(FILE *f, const char *p, size_t n, int newlines)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        int control = (c < 0x20 && c != '\t' && !(newlines && c == '\n')) || c == 0x7f;
        fputc(control ? '?' : c, f);
    }
}

/* Quotes line `line` of s and puts a caret under column col (1-based, counted in
 * bytes; tabs are kept so the caret lines up). */
static void quote_line(FILE *f, const struct diag_source *s, int line, int col)
{
    const char *p = s->text, *end = s->text + s->len;
    for (int l = 1; l < line && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return;
        p = nl + 1;
    }
    if (p >= end && line > 1)
        return;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
        eol = end;
    if (eol > p && eol[-1] == '\r')
        eol--;
    fputs("    ", f);
    put_clean(f, p, (size_t)(eol - p), 0);
    fputs("\n    ", f);
    for (int c = 1; c < col && p + c - 1 < eol; c++)
        fputc(p[c - 1] == '\t' ? '\t' : ' ', f);
    fputs("^\n", f);
}

void diag_print(const diag *d, FILE *f)
{
    static const char *const names[] = {"error", "warning", "note"};
    for (int i = 0; i < d->n; i++) {
        const diag_entry *e = &d->entries[i];
        if (e->loc.file && e->loc.line > 0)
            fprintf(f, "%s:%d:%d: %s: ", e->loc.file, e->loc.line, e->loc.col,
                    names[e->level]);
        else if (e->loc.file)
            fprintf(f, "%s: %s: ", e->loc.file, names[e->level]);
        else
            fprintf(f, "gnc: %s: ", names[e->level]);
        put_clean(f, e->msg, strlen(e->msg), 1);
        fputc('\n', f);
        const struct diag_source *s = find_source(d, e->loc.file);
        if (s && s->text && e->loc.line > 0)
            quote_line(f, s, e->loc.line, e->loc.col);
    }
    if (d->max_errors && d->nerrors > d->max_errors)
        fprintf(f, "gnc: too many errors (%d), the first %d shown\n", d->nerrors,
                d->max_errors);
}

static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1 << 20;
    int row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diagonal + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = up;
        }
    }
    return row[lb];
}

const char *diag_suggest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL;
    int best_d = 1 << 20;
    int limit = (int)strlen(name) / 3 + 1; /* about one typo per three letters */
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        int dist = edit_distance(name, cands[i]);
        if (dist < best_d) {
            best_d = dist;
            best = cands[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
