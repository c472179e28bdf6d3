/* Small things every stage uses, in one place: a message into a caller's
 * buffer, a 64-bit mixer, byte counts for people, allocation with out of
 * memory caught where a caller asks, and arenas. */
#ifndef GNC_BASE_H
#define GNC_BASE_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* s, the whole of it, as a decimal integer: base_parse_i64 one in [lo, hi]
 * (an optional '-', then digits), base_parse_u64 digits alone.  1 with *out
 * set, else 0 (empty, a sign or space where none belongs, another character,
 * out of range): numbers read from files are read so, never with atoll. */
int base_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int base_parse_u64(const char *s, uint64_t *out);

/* An output file written safely (ir/outfile.c; docs/reliability.md, "Output
 * paths and temporaries").  base_out_open: where path is absent or a regular
 * file (or a link to one), f writes a new file beside it, made by mkstemp (a
 * unique name, created exclusively, never through a link; the old file's
 * mode, else 0666 less the umask), which base_out_commit flushes to the disk
 * and renames over the file (a link stays a link); where path is a
 * character device, a FIFO or a socket (or a link to one: /dev/null,
 * /dev/stdout), f writes path itself and nothing is ever renamed over it; a
 * directory, a block device or a link to nothing is refused, naming its
 * kind.  base_out_abandon closes and removes the temporary (after a failure:
 * no partial output file).  base_out_remove_pending unlinks the temporary
 * being written, from a signal handler (async-signal-safe), once
 * base_out_track_pending has been called (by a program that writes one file
 * at a time: not thread-safe, so a library never calls it). */
typedef struct {
    FILE *f;
    char *path;                 /* the file written (a link's target) */
    char *tmp;                  /* the temporary renamed over it, or NULL: in place */
} base_out;
int base_out_open(base_out *o, const char *path, char *err, size_t errlen);
int base_out_commit(base_out *o, char *err, size_t errlen);
void base_out_abandon(base_out *o);
void base_out_remove_pending(void);
void base_out_track_pending(void);

/* b bytes as "512 B", "1.5 KiB", ... "2.0 TiB" into buf. */
void base_human_bytes(double b, char *buf, size_t len);

/* Milliseconds on the monotonic clock (durations: its origin is arbitrary). */
double base_now_ms(void);

/* All n bytes of p to fd, again after EINTR and short writes: 0, or -1 with
 * errno set. */
int base_write_all(int fd, const void *p, size_t n);

/* malloc, calloc, realloc, strdup, strndup and free.  The allocations
 * return NULL when out of memory (a zero size asks for one byte, so that
 * NULL always means failure).  The stages allocate and free through these
 * alone: the test hook sees every allocation, and a catch (below) knows
 * what was allocated under it. */
void *base_malloc(size_t n);
void *base_calloc(size_t n, size_t size);
void *base_realloc(void *p, size_t n);
char *base_strdup(const char *s);
char *base_strndup(const char *s, size_t n);
void base_free(void *p);

/* The same, never NULL: out of memory, they call base_oom. */
void *base_xmalloc(size_t n);
void *base_xcalloc(size_t n, size_t size);
void *base_xrealloc(void *p, size_t n);
char *base_xstrdup(const char *s);

/* Out of memory: base_oom frees what was allocated under this thread's
 * innermost catch and is still live, and jumps to it; with no catch it
 * prints "gnc: out of memory" and aborts (the gnc command).  A library entry
 * point, which must never abort, catches:
 *
 *     base_catch c;
 *     base_catch_push(&c);
 *     if (setjmp(c.jump))              // c is popped, its memory freed
 *         return an "out of memory" error;
 *     ... build something new ...
 *     base_catch_pop(&c);              // what was built is the caller's
 *
 * So a catch needs no cleanup code for memory, but the work under it must
 * not grow or free memory that outlives a jump (allocated before the push
 * and kept after), and what it allocates is freed by its own thread.  A
 * catch popped inside another hands what it owns to the outer one. */
typedef struct base_catch {
    jmp_buf jump;
    struct base_catch *outer;
    void **owned;          /* a set of pointers, open addressing */
    size_t cap, used;      /* slots, and slots not empty (live or deleted) */
} base_catch;
void base_catch_push(base_catch *c);
void base_catch_pop(base_catch *c);
_Noreturn void base_oom(void);

/* Testing: the n-th allocation from now in this thread fails (1 is the next;
 * 0 fails none), as Lua's ltests.c does to prove that every allocation's
 * failure is survived.  base_alloc_failed says whether one has since. */
void base_alloc_fail_at(long n);
int base_alloc_failed(void);

/* The whole file at path, NUL-terminated (len bytes before the NUL), or NULL
 * and *why (strerror's text, "out of memory" or "file too large": 1 GiB or
 * more).  Its allocations may fail without a jump: the file is open. */
char *base_read_file(const char *path, size_t *len, const char **why);
/* Makes folder dir and those above it that do not exist (as mkdir -p), new
 * ones with mode (less the umask).  0, or an errno value with the folder that
 * could not be made in failed (ENOTDIR where a file stands in the way). */
int base_make_dirs(const char *dir, unsigned mode, char *failed, size_t len);
/* The folder of gnc's caches (NVRTC's images, cuDNN's timed algorithms): want
 * if not NULL, else $GNC_CACHE_DIR, else ~/.cache/gnc; "" where none says
 * (no HOME). */
void base_cache_dir(const char *want, char *out, size_t len);
/* Bytes that stand for the file at path on this thread: a file that cannot be
 * read twice (a pipe: gnc compile /dev/stdin), read once by the command line
 * before anything else reads it, or a model libgnc's gnc_compile_memory was
 * given, for that call.  base_read_file gives a copy of these bytes for that
 * path from then on; base_preloaded gives them back, or NULL for any other
 * path.  data is kept, not copied (NULL: none).  One per thread. */
void base_preload(const char *path, const char *data, size_t len);
const char *base_preloaded(const char *path, size_t *len);

/* An arena: blocks freed together, NULL when empty.  Allocations are zeroed
 * and 16-byte aligned; out of memory calls base_oom. */
typedef struct base_arena base_arena;
void *base_arena_alloc(base_arena **a, size_t size);
void base_arena_free(base_arena **a);

#endif
