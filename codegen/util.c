/* What the codegen files share: string building, checked allocation, the
 * program's own allocations, SHA-256 (the compile cache's keys) and FNV-1a
 * (tables). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void cg_sb_put(cg_sb *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->s = base_xrealloc(b->s, cap);
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void cg_sb_vprintf(cg_sb *b, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    IR_ASSERT(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        b->s = base_xrealloc(b->s, cap);
        b->cap = cap;
    }
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void cg_sb_printf(cg_sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cg_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void cg_sb_free(cg_sb *b)
{
    base_free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

/* ---- the program's allocations: an arena ---- */

void *cg_palloc(cg_program *p, size_t n) { return base_arena_alloc(&p->pool, n); }

void cg_pool_free(cg_program *p) { base_arena_free(&p->pool); }

char *cg_pstrdup(cg_program *p, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(cg_palloc(p, n), s, n);
}

char *cg_pprintf(cg_program *p, const char *fmt, ...)
{
    cg_sb b = {0};
    va_list ap;
    va_start(ap, fmt);
    cg_sb_vprintf(&b, fmt, ap);
    va_end(ap);
    char *r = cg_pstrdup(p, b.s ? b.s : "");
    cg_sb_free(&b);
    return r;
}

/* ---- SHA-256 (FIPS 180-4) ---- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(cg_sha256 *s, const unsigned char *p)
{
    uint32_t w[64], a[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, s->h, sizeof a);
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25);
        uint32_t ch = (a[4] & a[5]) ^ (~a[4] & a[6]);
        uint32_t t1 = a[7] + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22);
        uint32_t mj = (a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]);
        uint32_t t2 = S0 + mj;
        memmove(a + 1, a, 7 * sizeof *a);
        a[4] += t1;
        a[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += a[i];
}

void cg_sha256_init(cg_sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0;
    s->n = 0;
}

void cg_sha256_update(cg_sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->len += n;
    while (n) {
        size_t k = 64 - s->n < n ? 64 - s->n : n;
        memcpy(s->buf + s->n, p, k);
        s->n += k, p += k, n -= k;
        if (s->n == 64) {
            sha_block(s, s->buf);
            s->n = 0;
        }
    }
}

void cg_sha256_final(cg_sha256 *s, unsigned char out[32])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    cg_sha256_update(s, &pad, 1);
    while (s->n != 56)
        cg_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    cg_sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (unsigned char)(s->h[i] >> (24 - 8 * k));
}

uint64_t cg_hash64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

void cg_sha256_of(const void *data, size_t n, unsigned char out[32])
{
    cg_sha256 s;
    cg_sha256_init(&s);
    cg_sha256_update(&s, data, n);
    cg_sha256_final(&s, out);
}

/* ---- 16-bit floats (codegen.h) ---- */

float cg_half_to_f32(unsigned short h, ir_dtype t)
{
    unsigned u;
    float f;
    if (t == IR_BF16) {
        u = (unsigned)h << 16;
        memcpy(&f, &u, 4);
        return f;
    }
    unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 31) {
        u = s | 0x7f800000u | (m << 13);
    } else if (e == 0) {
        f = (float)m * 5.9604644775390625e-8f;
        return s ? -f : f;
    } else {
        u = s | ((e + 112) << 23) | (m << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

unsigned short cg_f32_to_half(float f, ir_dtype t)
{
    unsigned u;
    memcpy(&u, &f, 4);
    if (t == IR_BF16) {
        if ((u & 0x7fffffffu) > 0x7f800000u)
            return (unsigned short)((u >> 16) | 0x40u);
        return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    unsigned s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (unsigned short)(s | 0x7e00u);
    if (a >= 0x477ff000u)
        return (unsigned short)(s | 0x7c00u);
    if (a < 0x38800000u) {
        float q;
        memcpy(&q, &a, 4);
        return (unsigned short)(s | (unsigned)rintf(q * 16777216.0f));
    }
    unsigned h = (a >> 13) - (112u << 10), rest = a & 0x1fffu;
    h += rest > 0x1000u || (rest == 0x1000u && (h & 1u));
    return (unsigned short)(s | h);
}
