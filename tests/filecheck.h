/* A small FileCheck (after LLVM's) for the tests: "# CHECK: text" lines must
 * match output lines in order (as substrings), "# CHECK-NEXT: text" the very
 * next line, and "# CHECK-NOT: text" no line between the matches around it. */
#ifndef GNC_FILECHECK_H
#define GNC_FILECHECK_H

#include <stddef.h>

/* Matches the CHECK lines of text against out: 1 when all hold, else 0 with the
 * first that does not in err. */
int file_check(const char *text, const char *out, char *err, size_t errlen);

/* Splits text into lines in place; *lines is malloc'd.  Returns the count. */
int split_lines(char *text, char ***lines);

#endif
