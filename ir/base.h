/* Small things every stage uses, in one place: a message into a caller's
 * buffer, a 64-bit mixer, byte counts for people, allocation or abort. */
#ifndef GNC_BASE_H
#define GNC_BASE_H

#include <stddef.h>
#include <stdint.h>

/* The message fmt, ... into err (errlen bytes, cut to fit); returns -1, so
 * that "return base_fail(err, errlen, ...)" reports and fails at once. */
int base_fail(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* SplitMix64's output for state x (Steele, Lea and Flood 2014): x plus the
 * golden gamma, mixed.  A stream is base_splitmix64(s), s += the gamma. */
uint64_t base_splitmix64(uint64_t x);
#define BASE_GOLDEN_GAMMA 0x9e3779b97f4a7c15ull

/* b bytes as "512 B", "1.5 KiB", ... "2.0 TiB" into buf. */
void base_human_bytes(double b, char *buf, size_t len);

/* malloc, calloc, realloc and strdup that never return NULL: out of memory,
 * they print "gnc: out of memory" and abort.  (A zero size asks for one
 * byte, so that NULL always means failure.) */
void *base_xmalloc(size_t n);
void *base_xcalloc(size_t n, size_t size);
void *base_xrealloc(void *p, size_t n);
char *base_xstrdup(const char *s);

#endif
