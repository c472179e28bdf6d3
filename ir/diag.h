/* Diagnostics: user errors with a source location, collected on a context.
 *
 * Stages report problems with diag_error()/diag_note(); nothing is printed until
 * the caller asks, so a library user decides where messages go.  Rendering looks
 * like a C compiler's:
 *
 *   models/x.net:3:9: error: conv2d expects 4-d input, got f32[32, 784]
 *       y = conv2d(x, 64, kernel = 3)
 *           ^
 *
 * Sources registered with diag_add_source() supply the quoted line and caret.
 * A message keeps its own copy of its location's file name: callers free a graph
 * that fails (it owns the names its locations point to) before they print. */
#ifndef GNC_DIAG_H
#define GNC_DIAG_H

#include <stdarg.h>
#include <stdio.h>

#include "ir.h"

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_level;

typedef struct {
    diag_level level;
    ir_loc loc;
    char *msg;
} diag_entry;

typedef struct diag {
    diag_entry *entries;
    int n, cap;
    int nerrors;
    int max_errors;              /* further errors are counted, not stored; 0: no limit */
    struct diag_source *sources; /* registered file texts */
} diag;

void diag_init(diag *d);
void diag_free(diag *d);

/* Keeps a copy of text so messages about file can quote its lines; returns the
 * stored file name, which stays valid as long as d. */
const char *diag_add_source(diag *d, const char *file, const char *text, size_t len);

#if defined(__GNUC__)
#define DIAG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DIAG_PRINTF(f, a)
#endif

void diag_error(diag *d, ir_loc loc, const char *fmt, ...) DIAG_PRINTF(3, 4);
void diag_note(diag *d, ir_loc loc, const char *fmt, ...) DIAG_PRINTF(3, 4);
void diag_vreport(diag *d, diag_level level, ir_loc loc, const char *fmt, va_list ap);

/* Writes every entry in order, with source lines and carets. */
void diag_print(const diag *d, FILE *f);

/* The closest of n candidate names to name by edit distance, or NULL when none is
 * close enough to be a plausible typo. */
const char *diag_suggest(const char *name, const char *const *cands, int n);

#endif
