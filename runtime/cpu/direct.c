/* Convolutions of few output channels as direct loops over the kernel's taps,
 * in AVX2 and FMA (where the CPU has them; elsewhere the caller's paths run).
 *
 * im2col and a GEMM waste such a convolution: LeNet's first layer is a GEMM of
 * 6 rows by 25, which OpenBLAS runs at a tenth of the CPU's speed, and the
 * columns it reads are 25 copies of the image.  Here each image is copied
 * once, zero-padded, into rows of wp = ow + kw - 1 floats, and the output is
 * computed in the same rows: output (oy, ox) sits at p = oy * wp + ox, and
 * its tap (ci, ky, kx) reads the padded image at ci * plane + ky * wp + kx + p.
 * So every tap is one contiguous stretch, and 16 consecutive outputs of up
 * to 6 channels take 2 loads and 6 weights per tap into 12 registers of sums.
 * The last kw - 1 outputs of each row are computed and thrown away.
 *
 *   forward:     y[o, p] = sum over taps t of w[o, t] x[off(t) + p]   (+ bias)
 *   input grad:  the forward convolution of dy with the kernels turned by 180
 *                degrees, in and out channels swapped, padding k - 1 - pad
 *   weight grad: dw[o, t] = sum over images and p of dy[o, p] x[off(t) + p],
 *                with dy laid out in the same rows (zeros where x's rows run
 *                past the output), 4 channels by 3 taps in 12 registers
 *
 * Each output is summed over its taps in order (ci, ky, kx), on one thread:
 * the forward pass and the input's gradient give the same bits on any number
 * of threads.  The weight's gradient sums its images in chunks fixed by the
 * shapes (rt_conv_dw_chunks, as grad.c's), each image's products into 8 lanes,
 * the lanes added in order at the end of a chunk and the chunks in order:
 * the same bits on any number of threads too.  Against im2col and OpenBLAS
 * the last bits differ (another order of the same sums).
 *
 * On AVX-512 the forward pass and the input's gradient take 16 lanes: 32
 * consecutive outputs of up to 6 channels a step, as above; or, where that
 * wastes more of the lanes (LeNet's second layer: 16 channels, rows of 10
 * outputs in 14 floats), the 16 lanes hold the output channels: a row's
 * outputs, up to 14 at a time, each a register of its channels, every tap
 * one load of its 16 weights against the broadcast input.  Each output is
 * still one sum of its taps in order, fused multiply-adds from zero, so both
 * give the AVX2 kernels' bits.
 *
 * Which convolutions: stride 1, no dilation, one group, float32, padding at
 * most the kernel's size less one, and few output channels (DIRECT_MAX_OUT:
 * the rows of the GEMM it replaces; for the input's gradient, the input
 * channels; for the weight's, at most DIRECT_MAX_DW weights too).
 * GNC_DIRECT=0 in the environment turns it off; GNC_DIRECT=avx2 keeps the
 * AVX2 kernels on an AVX-512 CPU. */
#include "kernels.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define fail base_fail

#define DIRECT_MAX_OUT 16
/* The weight's gradient keeps 8 lanes of sums per weight, a thread's within
 * its L2 cache: at most this many weights (LeNet's second layer has 2400). */
#define DIRECT_MAX_DW 16384

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define INLINE_AVX512 static inline __attribute__((always_inline, target("avx512f,avx2,fma")))

/* Whether a convolution of geometry g has the shape the direct kernels take */
static int fits(const conv_geom *g)
{
    return g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->groups == 1 &&
           g->ph >= 0 && g->pw >= 0 && g->ph < g->kh && g->pw < g->kw && g->o <= DIRECT_MAX_OUT &&
           g->oh == g->h + 2 * g->ph - g->kh + 1 && g->ow == g->w + 2 * g->pw - g->kw + 1 &&
           g->oh >= 1 && g->ow >= 1;
}

/* A stride-1 convolution's images in rows of the output's width plus the
 * kernel's (see the top of the file). */
typedef struct {
    int64_t hp, wp, plane; /* the padded image: hp rows of wp floats a channel */
    int64_t f;             /* outputs computed a channel: oh rows of wp, rounded up to 32 */
    int64_t padded;        /* floats of a padded image, with what the last outputs read */
    int64_t kdim;          /* taps: c * kh * kw */
} rows;

static rows rows_of(const conv_geom *g)
{
    rows r;
    r.hp = g->oh + g->kh - 1;
    r.wp = g->ow + g->kw - 1;
    r.plane = r.hp * r.wp;
    r.f = (g->oh * r.wp + 31) / 32 * 32;
    r.padded = (g->c - 1) * r.plane + (g->kh - 1) * r.wp + g->kw - 1 + r.f;
    r.kdim = g->c * g->kh * g->kw;
    return r;
}

/* One image's channels, zero-padded into dst (r->padded floats): each row
 * fits whole, the padding being non-negative (fits). */
static void pad_image(const conv_geom *g, const rows *r, const float *img, float *dst)
{
    memset(dst, 0, (size_t)r->padded * sizeof *dst);
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t iy = 0; iy < g->h; iy++)
            memcpy(dst + c * r->plane + (iy + g->ph) * r->wp + g->pw, img + (c * g->h + iy) * g->w,
                   (size_t)g->w * sizeof *dst);
}

/* Output channels [o0, o0 + nb) of one image into out [nb][r->f] rows: 16
 * outputs at a time, every tap's weight broadcast against two loads. */
INLINE_AVX2 void fwd_block(const conv_geom *g, const rows *r, const float *pad, const float *w,
                           int64_t o0, int nb, float *out)
{
    const float *wo = w + o0 * r->kdim; /* packed: [tap][nb] */
    for (int64_t p = 0; p < r->f; p += 16) {
        __m256 a[6][2];
        for (int o = 0; o < nb; o++)
            a[o][0] = a[o][1] = _mm256_setzero_ps();
        int64_t t = 0;
        for (int64_t c = 0; c < g->c; c++)
            for (int64_t ky = 0; ky < g->kh; ky++) {
                const float *s = pad + c * r->plane + ky * r->wp + p;
                for (int64_t kx = 0; kx < g->kw; kx++, t++) {
                    __m256 v0 = _mm256_loadu_ps(s + kx), v1 = _mm256_loadu_ps(s + kx + 8);
                    for (int o = 0; o < nb; o++) {
                        __m256 k = _mm256_broadcast_ss(wo + t * nb + o);
                        a[o][0] = _mm256_fmadd_ps(k, v0, a[o][0]);
                        a[o][1] = _mm256_fmadd_ps(k, v1, a[o][1]);
                    }
                }
            }
        for (int o = 0; o < nb; o++) {
            _mm256_storeu_ps(out + (o0 + o) * r->f + p, a[o][0]);
            _mm256_storeu_ps(out + (o0 + o) * r->f + p + 8, a[o][1]);
        }
    }
}

AVX2 static void fwd_image(const conv_geom *g, const rows *r, const float *pad, const float *w,
                           float *out)
{
    for (int64_t o0 = 0; o0 < g->o; o0 += 6)
        switch (g->o - o0 < 6 ? g->o - o0 : 6) { /* constant blocks, unrolled */
        case 1: fwd_block(g, r, pad, w, o0, 1, out); break;
        case 2: fwd_block(g, r, pad, w, o0, 2, out); break;
        case 3: fwd_block(g, r, pad, w, o0, 3, out); break;
        case 4: fwd_block(g, r, pad, w, o0, 4, out); break;
        case 5: fwd_block(g, r, pad, w, o0, 5, out); break;
        default: fwd_block(g, r, pad, w, o0, 6, out); break;
        }
}

/* fwd_block in 16 lanes: 32 outputs a step */
INLINE_AVX512 void fwd_block16(const conv_geom *g, const rows *r, const float *pad,
                               const float *w, int64_t o0, int nb, float *out)
{
    const float *wo = w + o0 * r->kdim;
    for (int64_t p = 0; p < r->f; p += 32) {
        __m512 a[6][2];
        for (int o = 0; o < nb; o++)
            a[o][0] = a[o][1] = _mm512_setzero_ps();
        int64_t t = 0;
        for (int64_t c = 0; c < g->c; c++)
            for (int64_t ky = 0; ky < g->kh; ky++) {
                const float *s = pad + c * r->plane + ky * r->wp + p;
                for (int64_t kx = 0; kx < g->kw; kx++, t++) {
                    __m512 v0 = _mm512_loadu_ps(s + kx), v1 = _mm512_loadu_ps(s + kx + 16);
                    for (int o = 0; o < nb; o++) {
                        __m512 k = _mm512_set1_ps(wo[t * nb + o]);
                        a[o][0] = _mm512_fmadd_ps(k, v0, a[o][0]);
                        a[o][1] = _mm512_fmadd_ps(k, v1, a[o][1]);
                    }
                }
            }
        for (int o = 0; o < nb; o++) {
            _mm512_storeu_ps(out + (o0 + o) * r->f + p, a[o][0]);
            _mm512_storeu_ps(out + (o0 + o) * r->f + p + 16, a[o][1]);
        }
    }
}

AVX512 static void fwd_image16(const conv_geom *g, const rows *r, const float *pad,
                               const float *w, float *out)
{
    for (int64_t o0 = 0; o0 < g->o; o0 += 6)
        switch (g->o - o0 < 6 ? g->o - o0 : 6) {
        case 1: fwd_block16(g, r, pad, w, o0, 1, out); break;
        case 2: fwd_block16(g, r, pad, w, o0, 2, out); break;
        case 3: fwd_block16(g, r, pad, w, o0, 3, out); break;
        case 4: fwd_block16(g, r, pad, w, o0, 4, out); break;
        case 5: fwd_block16(g, r, pad, w, o0, 5, out); break;
        default: fwd_block16(g, r, pad, w, o0, 6, out); break;
        }
}

/* Channels in the lanes: outputs [x0, x0 + np) of row oy, all channels, into
 * out's rows; w packed [taps][16], zeros past the channels. */
#define CHAN_MAX_RUN 14
INLINE_AVX512 void chan_run(const conv_geom *g, const rows *r, const float *pad, const float *w,
                            int64_t oy, int64_t x0, int np, float *out)
{
    __m512 a[CHAN_MAX_RUN];
    for (int j = 0; j < np; j++)
        a[j] = _mm512_setzero_ps();
    int64_t t = 0;
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t ky = 0; ky < g->kh; ky++) {
            const float *s = pad + c * r->plane + (oy + ky) * r->wp + x0;
            for (int64_t kx = 0; kx < g->kw; kx++, t++) {
                __m512 k = _mm512_loadu_ps(w + t * 16);
                for (int j = 0; j < np; j++)
                    a[j] = _mm512_fmadd_ps(_mm512_set1_ps(s[kx + j]), k, a[j]);
            }
        }
    float lanes[CHAN_MAX_RUN][16];
    for (int j = 0; j < np; j++)
        _mm512_storeu_ps(lanes[j], a[j]);
    for (int64_t o = 0; o < g->o; o++)
        for (int j = 0; j < np; j++)
            out[o * r->f + oy * r->wp + x0 + j] = lanes[j][o];
}

AVX512 static void chan_image(const conv_geom *g, const rows *r, const float *pad, const float *w,
                              float *out)
{
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t x0 = 0; x0 < g->ow; x0 += CHAN_MAX_RUN)
            switch (g->ow - x0 < CHAN_MAX_RUN ? g->ow - x0 : CHAN_MAX_RUN) {
#define RUN(np) case np: chan_run(g, r, pad, w, oy, x0, np, out); break;
            RUN(1) RUN(2) RUN(3) RUN(4) RUN(5) RUN(6) RUN(7)
            RUN(8) RUN(9) RUN(10) RUN(11) RUN(12) RUN(13) RUN(14)
#undef RUN
            }
}

/* The weight of channel o at tap t (ci, ky, kx) of the convolution g: of w
 * [o][taps], or where turned (the input's gradient, g the transposed
 * convolution) of the forward convolution's w [ci][o][kh][kw], turned by 180
 * degrees. */
static float weight_at(const conv_geom *g, const float *w, int turned, int64_t o, int64_t t)
{
    int64_t khw = g->kh * g->kw;
    return turned ? w[(t / khw * g->o + o) * khw + khw - 1 - t % khw] : w[o * g->c * khw + t];
}

/* One image's outputs from their rows into y [o][oh][ow], plus the bias */
AVX2 static void store_image(const conv_geom *g, const rows *r, const float *rowsout,
                             const float *bias, float *y)
{
    for (int64_t o = 0; o < g->o; o++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const float *s = rowsout + o * r->f + oy * r->wp;
            float *d = y + (o * g->oh + oy) * g->ow;
            if (bias)
                for (int64_t ox = 0; ox < g->ow; ox++)
                    d[ox] = s[ox] + bias[o];
            else
                memcpy(d, s, (size_t)g->ow * sizeof *d);
        }
}

/* The kernels that run a forward pass */
enum { LANES8, LANES16, CHANNELS16 };

/* Which kernels: AVX2's; on AVX-512 the one of fewer multiply-adds, the 16
 * lanes across positions costing f / 16 a channel and tap, across channels
 * oh * ow for all of them. */
static int kernels_for(const conv_geom *g, const rows *r, int avx512)
{
    if (!avx512)
        return LANES8;
    return r->f / 16 * g->o > g->oh * g->ow ? CHANNELS16 : LANES16;
}

/* y = epilogue(conv(x, w) + bias), image by image across the threads.  The weights
 * (weight_at) are packed as the kernels read them: for lanes across
 * positions, each block of 6 channels (fewer in the last) [taps][6], in place
 * of its rows; across channels, [taps][16] with zeros past the channels. */
static int forward(rt_exec *x, const conv_geom *g, const float *in, const float *w, int turned,
                   const float *bias, const struct epilogue *epi, float *out, int avx512)
{
    rows r = rows_of(g);
    int kernels = kernels_for(g, &r, avx512);
    int64_t each = r.padded + g->o * r.f;
    int64_t nw = kernels == CHANNELS16 ? 16 * r.kdim : g->o * r.kdim;
    float *scratch = rt_scratch(x, (size_t)(nw + omp_get_max_threads() * each));
    if (!scratch)
        return -1;
    float *packed = scratch;
    scratch += nw;
    if (kernels == CHANNELS16)
        for (int64_t t = 0; t < r.kdim; t++)
            for (int64_t o = 0; o < 16; o++)
                packed[t * 16 + o] = o < g->o ? weight_at(g, w, turned, o, t) : 0;
    else
        for (int64_t o0 = 0; o0 < g->o; o0 += 6) {
            int64_t nb = g->o - o0 < 6 ? g->o - o0 : 6;
            for (int64_t t = 0; t < r.kdim; t++)
                for (int64_t o = 0; o < nb; o++)
                    packed[o0 * r.kdim + t * nb + o] = weight_at(g, w, turned, o0 + o, t);
        }
    w = packed;
    int64_t plane = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->n * g->o * plane > PAR_MIN)
    for (int64_t b = 0; b < g->n; b++) {
        float *pad = scratch + omp_get_thread_num() * each, *rowsout = pad + r.padded;
        pad_image(g, &r, in + b * g->c * g->h * g->w, pad);
        if (kernels == CHANNELS16)
            chan_image(g, &r, pad, w, rowsout);
        else if (kernels == LANES16)
            fwd_image16(g, &r, pad, w, rowsout);
        else
            fwd_image(g, &r, pad, w, rowsout);
        store_image(g, &r, rowsout, bias, out + b * g->o * plane);
        rt_epilogue_range(x, epi, b * g->o * plane, (b + 1) * g->o * plane);
    }
    return 0;
}

/* Adds one image's products to the sums acc [o][kdim][8] of channels
 * [o0, o0 + nb) and taps [t0, t0 + tb): dy in rows (dyr [o][r->f]). */
INLINE_AVX2 void dw_block(const conv_geom *g, const rows *r, const float *pad, const float *dyr,
                          int64_t o0, int nb, int64_t t0, int tb, float *acc)
{
    __m256 a[4][3];
    const float *s[3];
    for (int t = 0; t < tb; t++) {
        int64_t tap = t0 + t, khw = g->kh * g->kw;
        s[t] = pad + tap / khw * r->plane + tap % khw / g->kw * r->wp + tap % g->kw;
    }
    for (int o = 0; o < nb; o++)
        for (int t = 0; t < tb; t++)
            a[o][t] = _mm256_loadu_ps(acc + ((o0 + o) * r->kdim + t0 + t) * 8);
    for (int64_t p = 0; p < r->f; p += 8) {
        __m256 v[3];
        for (int t = 0; t < tb; t++)
            v[t] = _mm256_loadu_ps(s[t] + p);
        for (int o = 0; o < nb; o++) {
            __m256 d = _mm256_loadu_ps(dyr + (o0 + o) * r->f + p);
            for (int t = 0; t < tb; t++)
                a[o][t] = _mm256_fmadd_ps(d, v[t], a[o][t]);
        }
    }
    for (int o = 0; o < nb; o++)
        for (int t = 0; t < tb; t++)
            _mm256_storeu_ps(acc + ((o0 + o) * r->kdim + t0 + t) * 8, a[o][t]);
}

AVX2 static void dw_image(const conv_geom *g, const rows *r, const float *pad, const float *dyr,
                          float *acc)
{
    for (int64_t o0 = 0; o0 < g->o; o0 += 4) {
        int nb = g->o - o0 < 4 ? (int)(g->o - o0) : 4;
        for (int64_t t0 = 0; t0 < r->kdim; t0 += 3) {
            int tb = r->kdim - t0 < 3 ? (int)(r->kdim - t0) : 3;
            switch (nb * 4 + tb) { /* constant blocks, unrolled */
#define DW(nb, tb) case nb * 4 + tb: dw_block(g, r, pad, dyr, o0, nb, t0, tb, acc); break;
            DW(1, 1) DW(1, 2) DW(1, 3) DW(2, 1) DW(2, 2) DW(2, 3)
            DW(3, 1) DW(3, 2) DW(3, 3) DW(4, 1) DW(4, 2) DW(4, 3)
#undef DW
            }
        }
    }
}

/* dw = sum over images of dy (x) x: chunks of consecutive images, each on one
 * thread into its own partial sums (chunk 0's into dw), added in order. */
static int weight_grad(rt_exec *x, const conv_geom *g, const float *dy, const float *in,
                       float *dw)
{
    rows r = rows_of(g);
    int64_t wsize = g->o * r.kdim, plane = g->oh * g->ow;
    int64_t chunks = rt_conv_dw_chunks(g->n, wsize);
    int64_t each = r.padded + g->o * r.f + wsize * 8;
    float *scratch = rt_scratch(x, (size_t)(omp_get_max_threads() * each + (chunks - 1) * wsize));
    if (!scratch)
        return -1;
    float *part = scratch + omp_get_max_threads() * each;
#pragma omp parallel for schedule(static) if (g->n * g->o * plane > PAR_MIN)
    for (int64_t ch = 0; ch < chunks; ch++) {
        float *pad = scratch + omp_get_thread_num() * each, *dyr = pad + r.padded,
              *acc = dyr + g->o * r.f;
        float *sum = ch ? part + (ch - 1) * wsize : dw;
        memset(dyr, 0, (size_t)(g->o * r.f) * sizeof *dyr); /* the rows' tails stay 0 */
        memset(acc, 0, (size_t)(wsize * 8) * sizeof *acc);
        for (int64_t b = ch * g->n / chunks; b < (ch + 1) * g->n / chunks; b++) {
            pad_image(g, &r, in + b * g->c * g->h * g->w, pad);
            for (int64_t o = 0; o < g->o; o++)
                for (int64_t oy = 0; oy < g->oh; oy++)
                    memcpy(dyr + o * r.f + oy * r.wp, dy + ((b * g->o + o) * g->oh + oy) * g->ow,
                           (size_t)g->ow * sizeof *dyr);
            dw_image(g, &r, pad, dyr, acc);
        }
        for (int64_t i = 0; i < wsize; i++) {
            float s = 0;
            for (int l = 0; l < 8; l++)
                s += acc[i * 8 + l];
            sum[i] = s;
        }
    }
    rt_conv_dw_add_chunks(dw, part, chunks, wsize);
    return 0;
}

static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int have_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

int rt_direct_conv(rt_exec *x, const ir_node *n, const struct epilogue *epi, char *err,
                   size_t errlen)
{
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT, dweight = n->op == IR_OP_CONV2D_GRAD_WEIGHT;
    if ((n->op != IR_OP_CONV2D && !bwd && !dweight) || n->out[0]->type.dtype != IR_F32)
        return 0;
    const char *env = getenv("GNC_DIRECT");
    if ((env && strcmp(env, "0") == 0) || !have_avx2())
        return 0;
    /* g: the convolution that runs (for the input's gradient, the transposed
       one: dy's channels in, x's out, padding k - 1 - pad) */
    conv_geom g;
    if (bwd) {
        conv_geom f = rt_conv_geometry(n, &n->out[0]->type, &n->in[1]->type, &n->in[0]->type);
        g = f;
        g.c = f.o, g.h = f.oh, g.w = f.ow, g.o = f.c, g.oh = f.h, g.ow = f.w;
        g.ph = f.kh - 1 - f.ph, g.pw = f.kw - 1 - f.pw;
    } else if (dweight) {
        g = rt_conv_geometry(n, &n->in[1]->type, &n->out[0]->type, &n->in[0]->type);
    } else {
        g = rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type, &n->out[0]->type);
    }
    if (!fits(&g) || (dweight && g.o * g.c * g.kh * g.kw > DIRECT_MAX_DW))
        return 0;
    if (rt_exec_nchw(x, n->in[0]) || rt_epilogue_ready(x, epi))
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    int rc = dweight ? weight_grad(x, &g, IN(0), IN(1), OUT)
                     : forward(x, &g, IN(0), IN(1), bwd, n->nin == 3 ? IN(2) : NULL, epi, OUT,
                               have_avx512() && !(env && strcmp(env, "avx2") == 0));
    if (rc)
        return fail(err, errlen, "%s: out of memory for the direct convolution's rows",
                    ir_ops[n->op].name);
    x->direct_convs++;
    return 1;
}

#else /* not x86-64: the other paths */

int rt_direct_conv(rt_exec *x, const ir_node *n, const struct epilogue *epi, char *err,
                   size_t errlen)
{
    (void)x, (void)n, (void)epi, (void)err, (void)errlen;
    return 0;
}

#endif
