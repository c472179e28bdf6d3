/* Small things every stage uses (base.h). */
#include "base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int base_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return 0;
        v = 10 * v + (uint64_t)(*s - '0');
    }
    *out = v;
    return 1;
}

int base_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    uint64_t mag;
    int neg = s && *s == '-';
    if (!s || !base_parse_u64(s + neg, &mag) || mag > (uint64_t)INT64_MAX + neg)
        return 0;
    int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    if (v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
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

/* ---- allocation ---- */

/* Per thread, in the static TLS block (initial-exec): no __tls_get_addr on
 * every allocation, and, in the stand-ins that dlopen this file's code, no
 * dynamic TLS for LeakSanitizer to walk at exit (its tracer has crashed
 * there) */
#define BASE_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static BASE_TLS base_catch *catcher; /* the innermost */
static BASE_TLS long fail_countdown; /* the test hook's: 0 is off */
static BASE_TLS int failed;

void base_alloc_fail_at(long n)
{
    fail_countdown = n > 0 ? n : 0;
    failed = 0;
}

int base_alloc_failed(void) { return failed; }

static int fail_now(void)
{
    if (fail_countdown == 0 || --fail_countdown > 0)
        return 0;
    failed = 1;
    return 1;
}

/* A catch's set of the pointers it owns.  An empty slot is NULL, a deleted
 * one GONE; the set's own memory comes from malloc, outside the hook. */
static char gone_;
#define GONE ((void *)&gone_)

static size_t slot_of(const base_catch *c, const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * BASE_GOLDEN_GAMMA;
    return (size_t)(h >> 32 ^ h >> 4) & (c->cap - 1);
}

static void set_put(base_catch *c, void *p)
{
    size_t i = slot_of(c, p);
    while (c->owned[i] && c->owned[i] != GONE)
        i = (i + 1) & (c->cap - 1);
    if (!c->owned[i])
        c->used++;
    c->owned[i] = p;
}

/* Room in c's set for one more pointer; 0 when there is no memory for it. */
static int set_reserve(base_catch *c)
{
    if (2 * (c->used + 1) <= c->cap)
        return 1;
    size_t live = 0;
    for (size_t i = 0; i < c->cap; i++)
        live += c->owned[i] && c->owned[i] != GONE;
    size_t cap = 64;
    while (cap < 4 * (live + 1))
        cap *= 2;
    void **old = c->owned, **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return 0;
    size_t oldcap = c->cap;
    c->owned = slots;
    c->cap = cap;
    c->used = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i] && old[i] != GONE)
            set_put(c, old[i]);
    free(old);
    return 1;
}

static int set_drop(base_catch *c, const void *p)
{
    if (!c->cap)
        return 0;
    for (size_t i = slot_of(c, p); c->owned[i]; i = (i + 1) & (c->cap - 1))
        if (c->owned[i] == p) {
            c->owned[i] = GONE;
            return 1;
        }
    return 0;
}

static void disown(const void *p)
{
    for (base_catch *c = catcher; p && c && !set_drop(c, p); c = c->outer)
        ;
}

/* p, just allocated, owned by the innermost catch (room was reserved) */
static void *own(void *p)
{
    if (p && catcher)
        set_put(catcher, p);
    return p;
}

/* Whether an allocation may go ahead: not failed by the hook, and room for
 * it in the innermost catch's set. */
static int may_allocate(void) { return !fail_now() && (!catcher || set_reserve(catcher)); }

void *base_malloc(size_t n) { return may_allocate() ? own(malloc(n ? n : 1)) : NULL; }

void *base_calloc(size_t n, size_t size)
{
    return may_allocate() ? own(calloc(n ? n : 1, size ? size : 1)) : NULL;
}

void *base_realloc(void *p, size_t n)
{
    if (!may_allocate())
        return NULL;
    disown(p); /* before: p may not be read after realloc */
    void *q = realloc(p, n ? n : 1);
    own(q ? q : p);
    return q;
}

char *base_strndup(const char *s, size_t n)
{
    size_t k = strnlen(s, n);
    char *p = base_malloc(k + 1);
    if (p) {
        memcpy(p, s, k);
        p[k] = '\0';
    }
    return p;
}

char *base_strdup(const char *s) { return base_strndup(s, strlen(s)); }

void base_free(void *p)
{
    disown(p);
    free(p);
}

void base_catch_push(base_catch *c)
{
    c->outer = catcher;
    c->owned = NULL;
    c->cap = c->used = 0;
    catcher = c;
}

void base_catch_pop(base_catch *c)
{
    catcher = c->outer;
    for (size_t i = 0; i < c->cap; i++)
        if (c->owned[i] && c->owned[i] != GONE) {
            if (catcher && !set_reserve(catcher))
                break; /* no memory to say so: the outer catch will not free the rest */
            own(c->owned[i]);
        }
    free(c->owned);
    c->owned = NULL;
}

void base_oom(void)
{
    base_catch *c = catcher;
    if (!c) {
        fputs("gnc: out of memory\n", stderr);
        abort();
    }
    for (size_t i = 0; i < c->cap; i++)
        if (c->owned[i] && c->owned[i] != GONE)
            free(c->owned[i]);
    free(c->owned);
    c->owned = NULL;
    catcher = c->outer;
    longjmp(c->jump, 1);
}

static void *or_oom(void *p)
{
    if (!p)
        base_oom();
    return p;
}

void *base_xmalloc(size_t n) { return or_oom(base_malloc(n)); }
void *base_xcalloc(size_t n, size_t size) { return or_oom(base_calloc(n, size)); }
void *base_xrealloc(void *p, size_t n) { return or_oom(base_realloc(p, n)); }
char *base_xstrdup(const char *s) { return or_oom(base_strdup(s)); }

static _Thread_local struct {
    const char *path;
    const char *data;
    size_t len;
} preload;

void base_preload(const char *path, const char *data, size_t len)
{
    preload.path = data ? path : NULL;
    preload.data = data;
    preload.len = len;
}

const char *base_preloaded(const char *path, size_t *len)
{
    if (!preload.path || strcmp(path, preload.path) != 0)
        return NULL;
    *len = preload.len;
    return preload.data;
}

int base_make_dirs(const char *dir, unsigned mode, char *failed, size_t len)
{
    char path[4096];
    snprintf(failed, len, "%s", dir);
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return ENAMETOOLONG;
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char was = *p;
        *p = 0;
        struct stat st;
        int e = mkdir(path, (mode_t)mode) == 0 ? 0 : errno != EEXIST ? errno
                : stat(path, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
        if (e) {
            snprintf(failed, len, "%s", path);
            return e;
        }
        if (!(*p = was))
            return 0;
    }
}

void base_cache_dir(const char *want, char *out, size_t len)
{
    const char *env = getenv("GNC_CACHE_DIR"), *home = getenv("HOME");
    if (want)
        snprintf(out, len, "%s", want);
    else if (env && *env)
        snprintf(out, len, "%s", env);
    else if (home && *home)
        snprintf(out, len, "%s/.cache/gnc", home);
    else if (len)
        out[0] = 0;
}

char *base_read_file(const char *path, size_t *len, const char **why)
{
    const char *kept = base_preloaded(path, len);
    if (kept) {
        char *copy = base_malloc(*len + 1);
        if (!copy)
            *why = "out of memory";
        else
            memcpy(copy, kept, *len), copy[*len] = '\0';
        return copy;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = base_malloc(cap);
    if (!buf)
        *why = "out of memory";
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *bigger = NULL;
            if (cap >= (size_t)1 << 30)
                *why = "file too large";
            else if (!(bigger = base_realloc(buf, cap *= 2)))
                *why = "out of memory";
            if (!bigger)
                base_free(buf);
            buf = bigger;
        }
    }
    if (buf && ferror(f)) {
        *why = strerror(errno);
        base_free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

/* ---- arenas: a chain of blocks ---- */

struct base_arena {
    struct base_arena *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *base_arena_alloc(base_arena **arena, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    base_arena *a = *arena;
    if (!a || a->cap - a->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        base_arena *b = base_xmalloc(sizeof *b + cap);
        b->next = a;
        b->used = 0;
        b->cap = cap;
        *arena = a = b;
    }
    void *p = a->data + a->used;
    a->used += size;
    memset(p, 0, size);
    return p;
}

void base_arena_free(base_arena **arena)
{
    for (base_arena *a = *arena, *next; a; a = next) {
        next = a->next;
        base_free(a);
    }
    *arena = NULL;
}

double base_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int base_write_all(int fd, const void *p, size_t n)
{
    for (const char *q = p; n > 0;) {
        ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        q += w;
        n -= (size_t)w;
    }
    return 0;
}
