/* Helpers of the test drivers, and a small FileCheck (after LLVM's): "# CHECK: text" lines must
 * match output lines in order (as substrings), "# CHECK-NEXT: text" the very
 * next line, and "# CHECK-NOT: text" no line between the matches around it. */
#ifndef GNC_FILECHECK_H
#define GNC_FILECHECK_H

#include <stddef.h>

#include "diag.h"
#include "ir.h"

/* Matches the CHECK lines of text against out: 1 when all hold, else 0 with the
 * first that does not in err. */
int file_check(const char *text, const char *out, char *err, size_t errlen);

/* Splits text into lines in place; *lines is malloc'd.  Returns the count. */
int split_lines(char *text, char ***lines);

/* The other helpers the test drivers share. */
/* The whole file, NUL-terminated (len, if not NULL, gets its size); NULL when it
 * cannot be read. */
char *read_file(const char *path, size_t *len);
/* ir_print's text of g, malloc'd. */
char *graph_text(const ir_graph *g);
/* diag_print's text of d, malloc'd. */
char *diag_text(const diag *d);

#endif
