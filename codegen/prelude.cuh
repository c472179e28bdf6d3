/* gnc: the prelude of every generated module (codegen/prelude.cuh, embedded in
 * the library at build time).  Types and helpers the kernels share: storage
 * types and their conversions, loads and stores that convert (so a kernel's
 * text is the same at every precision but for its parameter types), vector
 * loads, warp and block reductions, the dropout generator, error reports.
 *
 * It is compiled by NVRTC as device code, and for the tests by the host C++
 * compiler through tests/cg_emu.h, which defines the CUDA built-ins.  Rules
 * the kernels keep for that emulation: shared memory is static; warp shuffles
 * run in all 32 lanes of a warp at once; __syncthreads in all threads of a
 * block.  Arithmetic is float, sums of many terms in double where the CPU
 * executor's are; no fast-math intrinsics. */
#ifndef GNC_KERNEL
#define GNC_KERNEL extern "C" __global__
#endif

typedef long long i64;
typedef unsigned long long u64;

#define NEG_INF __uint_as_float(0xff800000u)
#define POS_INF __uint_as_float(0x7f800000u)

/* bfloat16 and float16 as storage: bits only, arithmetic in float */
struct bf16 { unsigned short bits; };
struct f16 { unsigned short bits; };

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(bf16 v) { return __uint_as_float((unsigned)v.bits << 16); }
__device__ __forceinline__ float to_f32(f16 v)
{
#ifdef __CUDA_ARCH__
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
    return f;
#else
    unsigned s = (unsigned)(v.bits & 0x8000u) << 16, e = (v.bits >> 10) & 31u, m = v.bits & 1023u;
    if (e == 31)                                   /* inf, nan */
        return __uint_as_float(s | 0x7f800000u | (m << 13));
    if (e == 0) {                                  /* zero, subnormal: m 2^-24 */
        float f = (float)m * 5.9604644775390625e-8f;
        return s ? -f : f;
    }
    return __uint_as_float(s | ((e + 112) << 23) | (m << 13));
#endif
}

/* float to bfloat16 and float16, rounding to nearest even */
__device__ __forceinline__ bf16 to_bf16(float f)
{
    bf16 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)           /* nan: keep it quiet */
        r.bits = (unsigned short)((u >> 16) | 0x40u);
    else
        r.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
    return r;
}

__device__ __forceinline__ f16 to_f16(float f)
{
    f16 r;
#ifdef __CUDA_ARCH__
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
#else
    unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {                         /* nan */
        r.bits = (unsigned short)(s | 0x7e00u);
    } else if (a >= 0x477ff000u) {                 /* rounds to 65520 or more: inf */
        r.bits = (unsigned short)(s | 0x7c00u);
    } else if (a < 0x38800000u) {                  /* below 2^-14: a multiple of 2^-24 */
        float q = __uint_as_float(a) * 16777216.0f;  /* exact; rint rounds to even */
        r.bits = (unsigned short)(s | (unsigned)rintf(q));
    } else {
        unsigned h = ((a >> 13) - (112u << 10)), rest = a & 0x1fffu;
        h += rest > 0x1000u || (rest == 0x1000u && (h & 1u));
        r.bits = (unsigned short)(s | h);
    }
#endif
    return r;
}

/* Loads give float for every floating-point storage type; stores take float. */
__device__ __forceinline__ float ld(const float *p, i64 i) { return p[i]; }
__device__ __forceinline__ float ld(const bf16 *p, i64 i) { return to_f32(p[i]); }
__device__ __forceinline__ float ld(const f16 *p, i64 i) { return to_f32(p[i]); }
__device__ __forceinline__ int ld(const int *p, i64 i) { return p[i]; }
__device__ __forceinline__ i64 ld(const i64 *p, i64 i) { return p[i]; }
__device__ __forceinline__ unsigned char ld(const unsigned char *p, i64 i) { return p[i]; }

__device__ __forceinline__ void st(float *p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void st(bf16 *p, i64 i, float v) { p[i] = to_bf16(v); }
__device__ __forceinline__ void st(f16 *p, i64 i, float v) { p[i] = to_f16(v); }
__device__ __forceinline__ void st(int *p, i64 i, int v) { p[i] = v; }
__device__ __forceinline__ void st(i64 *p, i64 i, i64 v) { p[i] = v; }
__device__ __forceinline__ void st(unsigned char *p, i64 i, unsigned char v) { p[i] = v; }

/* N consecutive elements from element e (a multiple of N): 16-byte
 * accesses for float (one for 4, two for 8), for the 16-bit types one 8-byte
 * access for 4 and one 16-byte access for 8 (every buffer is 256-byte
 * aligned). */
template <int N> __device__ __forceinline__ void ldv(const float *p, i64 e, float *v)
{
    if constexpr (N == 4 || N == 8) {
        for (int h = 0; h < N; h += 4) {
            const float4 t = *reinterpret_cast<const float4 *>(p + e + h);
            v[h] = t.x, v[h + 1] = t.y, v[h + 2] = t.z, v[h + 3] = t.w;
        }
    } else {
        for (int j = 0; j < N; j++)
            v[j] = p[e + j];
    }
}

/* the 16-bit value in the low (hi = 0) or high half of word w, as a float */
template <class H> __device__ __forceinline__ float half_of(unsigned w, int hi)
{
    H h;
    h.bits = (unsigned short)(hi ? w >> 16 : w & 0xffffu);
    return to_f32(h);
}

template <int N, class H> __device__ __forceinline__ void ldv(const H *p, i64 e, float *v)
{
    if constexpr (N == 4) {
        const uint2 t = *reinterpret_cast<const uint2 *>(p + e);
        const unsigned w[2] = {t.x, t.y};
        for (int j = 0; j < 4; j++)
            v[j] = half_of<H>(w[j / 2], j % 2);
    } else if constexpr (N == 8) {
        const uint4 t = *reinterpret_cast<const uint4 *>(p + e);
        const unsigned w[4] = {t.x, t.y, t.z, t.w};
        for (int j = 0; j < 8; j++)
            v[j] = half_of<H>(w[j / 2], j % 2);
    } else {
        for (int j = 0; j < N; j++)
            v[j] = to_f32(p[e + j]);
    }
}

template <int N> __device__ __forceinline__ void stv(float *p, i64 e, const float *v)
{
    if constexpr (N == 4 || N == 8) {
        for (int h = 0; h < N; h += 4)
            *reinterpret_cast<float4 *>(p + e + h) =
                make_float4(v[h], v[h + 1], v[h + 2], v[h + 3]);
    } else {
        for (int j = 0; j < N; j++)
            p[e + j] = v[j];
    }
}

__device__ __forceinline__ void round_to(bf16 &h, float f) { h = to_bf16(f); }
__device__ __forceinline__ void round_to(f16 &h, float f) { h = to_f16(f); }

/* v[j], v[j + 1] rounded to H, as one word */
template <class H> __device__ __forceinline__ unsigned pair_of(const float *v, int j)
{
    H lo, hi;
    round_to(lo, v[j]);
    round_to(hi, v[j + 1]);
    return (unsigned)lo.bits | (unsigned)hi.bits << 16;
}

template <int N, class H> __device__ __forceinline__ void stv(H *p, i64 e, const float *v)
{
    if constexpr (N == 4) {
        uint2 t;
        t.x = pair_of<H>(v, 0), t.y = pair_of<H>(v, 2);
        *reinterpret_cast<uint2 *>(p + e) = t;
    } else if constexpr (N == 8) {
        uint4 t;
        t.x = pair_of<H>(v, 0), t.y = pair_of<H>(v, 2), t.z = pair_of<H>(v, 4),
        t.w = pair_of<H>(v, 6);
        *reinterpret_cast<uint4 *>(p + e) = t;
    } else {
        for (int j = 0; j < N; j++)
            st(p, e + j, v[j]);
    }
}

/* ---- the unary ops' arithmetic and their gradients' (ops.def's UNARY
   table): ir/arith.h, which the build copies here in place of the #include,
   as the CPU executor computes them ---- */
#define AR_FN __device__ __forceinline__
#undef GNC_ARITH_H /* a copy in every module: the tests' host build holds several in one file */
#include "arith.h"

/* cast of a float to an integer, as the CPU executor's: toward zero, saturated, NaN to 0 */
__device__ __forceinline__ int cast_i32_f(float a)
{
    return a != a ? 0 : a <= -2147483648.0f ? -2147483647 - 1 : a >= 2147483648.0f ? 2147483647 : (int)a;
}
__device__ __forceinline__ i64 cast_i64_f(float a)
{
    return a != a ? 0
         : a <= -9223372036854775808.0f ? (i64)(-9223372036854775807LL - 1)
         : a >= 9223372036854775808.0f ? (i64)9223372036854775807LL : (i64)a;
}
__device__ __forceinline__ unsigned char cast_u8_f(float a)
{
    return a != a || a <= 0.0f ? 0 : a >= 255.0f ? 255 : (unsigned char)a;
}
/* PyTorch's maximum and minimum: NaN from either operand */
__device__ __forceinline__ float maximum_f(float a, float b) { return a > b || a != a ? a : b; }
__device__ __forceinline__ float minimum_f(float a, float b) { return a < b || a != a ? a : b; }
/* upsample2d's taps: ir_upsample_taps (ir/ops.c) again, keep the two in step.
 * Products rounded as the host's, never fused into an fma with the sum. */
__device__ __forceinline__ float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__device__ __forceinline__ void upsample_taps(i64 dst, i64 in, i64 out, int bilinear, int align,
                                              float ratio, i64 *i0, i64 *i1, float *l0, float *l1)
{
    *l0 = 1.0f;
    *l1 = 0.0f;
    if (out == in) {
        *i0 = *i1 = dst;
        return;
    }
    if (!bilinear) {
        i64 src = out == 2 * in ? dst >> 1 : (i64)floorf(mul_rn((float)dst, ratio));
        *i0 = *i1 = src < in - 1 ? src : in - 1;
        return;
    }
    float real = align ? mul_rn(ratio, (float)dst) : mul_rn(ratio, (float)dst + 0.5f) - 0.5f;
    if (real < 0.0f)
        real = 0.0f;
    i64 src = (i64)floorf(real);
    *i0 = src < in - 1 ? src : in - 1;
    float lam = real - (float)*i0;
    *l1 = lam < 0.0f ? 0.0f : lam > 1.0f ? 1.0f : lam;
    *i1 = *i0 + (*i0 < in - 1);
    *l0 = 1.0f - *l1;
}
/* The first output whose i0 is at least j (ir/ops.c's upsample_first). */
__device__ __forceinline__ i64 upsample_first(i64 j, i64 in, i64 out, int bilinear, int align,
                                              float ratio)
{
    i64 lo = 0, hi = out;
    while (lo < hi) {
        i64 mid = lo + (hi - lo) / 2, i0, i1;
        float l0, l1;
        upsample_taps(mid, in, out, bilinear, align, ratio, &i0, &i1, &l0, &l1);
        if (i0 < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
/* Output dst's weight on input j along an axis. */
__device__ __forceinline__ float upsample_weight(i64 dst, i64 j, i64 in, i64 out, int bilinear,
                                                 int align, float ratio)
{
    i64 i0, i1;
    float l0, l1;
    upsample_taps(dst, in, out, bilinear, align, ratio, &i0, &i1, &l0, &l1);
    return (i0 == j ? l0 : 0.0f) + (i1 == j ? l1 : 0.0f);
}

/* ---- reductions: every lane or thread gets the same total, summed in a
 * fixed tree (the same bits every run) ---- */

template <class T> __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* NT threads (a multiple of 32); red: 32 elements of shared memory. */
template <int NT, class T> __device__ __forceinline__ T block_sum(T v, T *red)
{
    v = warp_sum(v);
    if constexpr (NT > 32) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0)
            red[warp] = v;
        __syncthreads();
        v = lane < NT / 32 ? red[lane] : (T)0;
        v = warp_sum(v);
        __syncthreads();
    }
    return v;
}

template <int NT> __device__ __forceinline__ float block_max(float v, float *red)
{
    v = warp_max(v);
    if constexpr (NT > 32) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0)
            red[warp] = v;
        __syncthreads();
        v = lane < NT / 32 ? red[lane] : NEG_INF;
        v = warp_max(v);
        __syncthreads();
    }
    return v;
}

/* ---- dropout: the counter-based generator of runtime/grad.c, bit for bit ---- */

__device__ __forceinline__ u64 splitmix64(u64 z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 dropout_key(i64 seed, i64 step, i64 salt)
{
    return splitmix64(splitmix64((u64)seed) ^ splitmix64((u64)step * 0x100000001b3ull + (u64)salt));
}

/* kept when the 53-bit draw u satisfies u 2^-53 >= p, that is u >= threshold */
__device__ __forceinline__ bool dropout_keep(u64 key, i64 at, u64 threshold)
{
    return (splitmix64(key ^ splitmix64((u64)at)) >> 11) >= threshold;
}

/* ---- the program's state ---- */

struct gnc_status {           /* codegen.h, cg_status */
    int code, step;
    i64 index, value;
};

__device__ __forceinline__ void report(gnc_status *s, int code, int step, i64 index, i64 value)
{
    if (atomicCAS(&s->code, 0, code) == 0) {
        s->step = step;
        s->index = index;
        s->value = value;
    }
}

struct gnc_scaler {           /* codegen.h, cg_loss_scale */
    float scale;
    int good_steps, found_inf;
    float inv_scale;
};

/* ---- channels-last copies (--conv cudnn-nhwc, codegen/library.c) ----
 * out[b][j][i] = in[b][i][j] for in of [B][R][C] elements: NCHW to NHWC is
 * R = channels, C = pixels; back is R = pixels, C = channels; KCRS filters to
 * KRSC is R = C/groups, C = taps.  A block of 32 x 8 threads moves a 32 x 32
 * tile through shared memory (a row of 33: no bank conflicts), so both the
 * loads and the stores are coalesced; grid (C / 32, R / 32, B), rounded up. */
template <int R, int C, class TI, class TO>
__device__ __forceinline__ void transpose_tiles(const TI *__restrict__ in, TO *__restrict__ out)
{
    __shared__ float tile[32][33];
    const i64 b = blockIdx.z;
    const int i0 = blockIdx.y * 32, j0 = blockIdx.x * 32;
    in += b * R * C;
    out += b * R * C;
    for (int di = threadIdx.y; di < 32; di += 8) {
        const int i = i0 + di, j = j0 + threadIdx.x;
        if (i < R && j < C)
            tile[di][threadIdx.x] = ld(in, (i64)i * C + j);
    }
    __syncthreads();
    for (int dj = threadIdx.y; dj < 32; dj += 8) {
        const int j = j0 + dj, i = i0 + threadIdx.x;
        if (i < R && j < C)
            st(out, (i64)j * R + i, tile[threadIdx.x][dj]);
    }
}

/* ---- implicit-GEMM convolutions (codegen/igemm.c) ----
 * A convolution as a matrix product per group g,
 *     C[m][j] = sum over k of A(g, m, k) B(g, k, j),
 * whose operands are gathered from the tensors by a problem P that codegen
 * writes for each convolution: its sizes (M, N, K, G groups, SPLIT parts of
 * K), MFAST (m, not j, is the contiguous index of the result and of A's
 * tensor), a(g, m, k) and b(g, k, j) (0 outside the tensors), and out(g, m, j,
 * v), the epilogue and the store.
 *
 * A block of 256 threads computes a 64 x 64 tile of C in steps of 16 along k:
 * each thread loads its 4 + 4 elements of the next step into registers while
 * the current step, in shared memory, is multiplied.  MODE says how:
 *   0  fp32 fused multiply-adds, a thread 4 x 4 elements (exact fp32)
 *   1  TF32 tensor cores (wmma m16n16k8), operands rounded to TF32
 *   2  bf16 tensor cores (wmma m16n16k16), float accumulation
 *   3  fp16 likewise
 * (tensor cores: 8 warps of 16 x 32 elements, 4 along m, 2 along j).  With
 * SPLIT > 1 the parts of k (block z) write partial sums and a second launch
 * (igemm_reduce) adds them in part order: the same bits on every run. */
#define IG_BM 64
#define IG_BN 64
#define IG_BK 16
#define IG_LD 72        /* a row of a shared tile: 64 + 8, keeping wmma's 32-byte alignment */

#if defined(GNC_WMMA) && !defined(GNC_EMU)
#include <mma.h>
#endif

/* MODE's element in shared memory, and the conversion to it */
template <int MODE> struct ig_elem {
    typedef float T;
    static __device__ __forceinline__ float put(float v) { return v; }
};
#ifdef GNC_WMMA
template <> struct ig_elem<1> {
    typedef float T;
    static __device__ __forceinline__ float put(float v) { return nvcuda::wmma::__float_to_tf32(v); }
};
template <> struct ig_elem<2> {
    typedef __nv_bfloat16 T;
    static __device__ __forceinline__ T put(float v) { return __float2bfloat16_rn(v); }
};
template <> struct ig_elem<3> {
    typedef __half T;
    static __device__ __forceinline__ T put(float v) { return __float2half_rn(v); }
};
#endif

/* The accumulators of one thread (MODE 0) or warp (tensor cores).  step
 * multiplies a step's tiles As[k][m], Bs[k][j]; store writes C as Cs[j][m]. */
template <int MODE, bool TC = (MODE > 0)> struct ig_acc {
    float c[4][4];
    __device__ __forceinline__ void zero()
    {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                c[i][j] = 0.0f;
    }
    __device__ __forceinline__ void step(const float (*As)[IG_LD], const float (*Bs)[IG_LD])
    {
        const int tm = threadIdx.x / 16 * 4, tj = threadIdx.x % 16 * 4;
        for (int k = 0; k < IG_BK; k++) {
            float a[4], b[4];
            for (int i = 0; i < 4; i++)
                a[i] = As[k][tm + i], b[i] = Bs[k][tj + i];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    c[i][j] = fmaf(a[i], b[j], c[i][j]);
        }
    }
    __device__ __forceinline__ void store(float (*Cs)[IG_LD])
    {
        const int tm = threadIdx.x / 16 * 4, tj = threadIdx.x % 16 * 4;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                Cs[tj + j][tm + i] = c[i][j];
    }
};

#ifdef GNC_WMMA
template <int MODE> struct ig_wmma;             /* a fragment's depth and element */
template <> struct ig_wmma<1> { enum { K = 8 }; typedef nvcuda::wmma::precision::tf32 E; };
template <> struct ig_wmma<2> { enum { K = 16 }; typedef __nv_bfloat16 E; };
template <> struct ig_wmma<3> { enum { K = 16 }; typedef __half E; };

template <int MODE> struct ig_acc<MODE, true> {
    typedef typename ig_wmma<MODE>::E E;
    typedef typename ig_elem<MODE>::T T;
    enum { KK = ig_wmma<MODE>::K };
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, KK, float> c[2];
    __device__ __forceinline__ void zero()
    {
        nvcuda::wmma::fill_fragment(c[0], 0.0f);
        nvcuda::wmma::fill_fragment(c[1], 0.0f);
    }
    __device__ __forceinline__ void step(const T (*As)[IG_LD], const T (*Bs)[IG_LD])
    {
        using namespace nvcuda::wmma;
        const int warp = threadIdx.x / 32, wm = warp / 2 * 16, wj = warp % 2 * 32;
        for (int k = 0; k < IG_BK; k += KK) {
            fragment<matrix_a, 16, 16, KK, E, col_major> a;
            fragment<matrix_b, 16, 16, KK, E, row_major> b;
            load_matrix_sync(a, &As[k][wm], IG_LD);
            for (int j = 0; j < 2; j++) {
                load_matrix_sync(b, &Bs[k][wj + 16 * j], IG_LD);
                mma_sync(c[j], a, b, c[j]);
            }
        }
    }
    __device__ __forceinline__ void store(float (*Cs)[IG_LD])
    {
        const int warp = threadIdx.x / 32, wm = warp / 2 * 16, wj = warp % 2 * 32;
        for (int j = 0; j < 2; j++)
            nvcuda::wmma::store_matrix_sync(&Cs[wj + 16 * j][wm], c[j], IG_LD,
                                            nvcuda::wmma::mem_col_major);
    }
};
#endif

/* Where the partial sum or result (g, m, j) of C lies, contiguous index fastest. */
template <class P> __device__ __forceinline__ i64 ig_at(int g, int m, int j)
{
    return P::MFAST ? ((i64)g * P::N + j) * P::M + m : ((i64)g * P::M + m) * P::N + j;
}

/* This thread's elements i = 0..3 of a step's tiles: A's by its contiguous
 * index, B's along k (the weights' and the images' contiguous index). */
template <class P> __device__ __forceinline__ void ig_fetch(const P &pr, int g, int m0, int j0, int k0,
                                                            int kend, float *ra, float *rb)
{
    const int t = threadIdx.x;
    for (int i = 0; i < 4; i++) {
        const int m = m0 + (P::MFAST ? t % IG_BM : t / IG_BK + 16 * i);
        const int k = k0 + (P::MFAST ? t / IG_BM + 4 * i : t % IG_BK);
        ra[i] = m < P::M && k < kend ? pr.a(g, m, k) : 0.0f;
        const int kb = k0 + t % IG_BK, j = j0 + t / IG_BK + 16 * i;
        rb[i] = j < P::N && kb < kend ? pr.b(g, kb, j) : 0.0f;
    }
}

template <int MODE, class P> __device__ __forceinline__ void igemm(const P &pr,
                                                                   float *__restrict__ partial)
{
    typedef typename ig_elem<MODE>::T T;
    __shared__ __align__(32) T As[IG_BK][IG_LD];
    __shared__ __align__(32) T Bs[IG_BK][IG_LD];
    __shared__ __align__(32) float Cs[IG_BN][IG_LD];
    const int t = threadIdx.x;
    const int g = blockIdx.z / P::SPLIT, part = blockIdx.z % P::SPLIT;
    const int m0 = blockIdx.x * IG_BM, j0 = blockIdx.y * IG_BN;
    const int steps = (P::K + IG_BK - 1) / IG_BK, per = (steps + P::SPLIT - 1) / P::SPLIT;
    const int kbegin = part * per * IG_BK;
    const int kend = P::K < kbegin + per * IG_BK ? P::K : kbegin + per * IG_BK;
    ig_acc<MODE> acc;
    acc.zero();
    float ra[4], rb[4];
    if (kbegin < kend)
        ig_fetch(pr, g, m0, j0, kbegin, kend, ra, rb);
    for (int k0 = kbegin; k0 < kend; k0 += IG_BK) {
        for (int i = 0; i < 4; i++) {
            if (P::MFAST)
                As[t / IG_BM + 4 * i][t % IG_BM] = ig_elem<MODE>::put(ra[i]);
            else
                As[t % IG_BK][t / IG_BK + 16 * i] = ig_elem<MODE>::put(ra[i]);
            Bs[t % IG_BK][t / IG_BK + 16 * i] = ig_elem<MODE>::put(rb[i]);
        }
        __syncthreads();
        if (k0 + IG_BK < kend)
            ig_fetch(pr, g, m0, j0, k0 + IG_BK, kend, ra, rb);
        acc.step(As, Bs);
        __syncthreads();
    }
    acc.store(Cs);
    __syncthreads();
    for (int e = t; e < IG_BM * IG_BN; e += 256) {
        const int dm = P::MFAST ? e % IG_BM : e / IG_BN, dj = P::MFAST ? e / IG_BM : e % IG_BN;
        const int m = m0 + dm, j = j0 + dj;
        if (m >= P::M || j >= P::N)
            continue;
        if (P::SPLIT == 1)
            pr.out(g, m, j, Cs[dj][dm]);
        else
            partial[(i64)part * P::G * P::M * P::N + ig_at<P>(g, m, j)] = Cs[dj][dm];
    }
}

/* The second launch of a split product: thread e adds element e's parts. */
template <class P> __device__ __forceinline__ void igemm_reduce(const P &pr,
                                                                const float *__restrict__ partial)
{
    const i64 total = (i64)P::G * P::M * P::N, e = (i64)blockIdx.x * 256 + threadIdx.x;
    if (e >= total)
        return;
    float v = 0.0f;
    for (int s = 0; s < P::SPLIT; s++)
        v += partial[s * total + e];
    const int g = (int)(e / ((i64)P::M * P::N)), r = (int)(e % ((i64)P::M * P::N));
    pr.out(g, P::MFAST ? r % P::M : r / P::N, P::MFAST ? r / P::M : r % P::N, v);
}

/* ---- attention (codegen/attention.c): FlashAttention-2's tiling, in float.
 * q[b][l][E], k[b / G][s][E], v[b / G][s][EV] (any storage type; G query
 * heads a key/value head, grouped-query attention, 1 without), lse and the
 * rows' D = dy . out as float.  Every tile is staged in shared memory as float;
 * each output element is summed by one thread in one order (no atomics):
 * the same bits on every run.  A row of a tile is held by TPR = NT / rows
 * neighbouring lanes of one warp, which exchange its maximum and sum by
 * shuffles. ---- */

/* Forward: block (batch, tile of BR query rows) walks the key tiles of BC in
 * order (causal: up to its last row's diagonal), keeping each row's running
 * maximum m, its lanes' sums of e^(s - m) and their columns of the
 * unnormalized output in registers; y_put(i, value) takes out's element i,
 * lse (or null) each row's m + log(sum). */
template <int NT, int BR, int BC, int E, int EV, bool CAUSAL, int G, class I, class TQ,
          class TK, class TV, class TL, class Y>
__device__ __forceinline__ void attn_fwd(const TQ *__restrict__ q, const TK *__restrict__ k,
                                         const TV *__restrict__ v, TL *__restrict__ lse,
                                         I l, I s, float scale, Y y_put)
{
    constexpr int TPR = NT / BR, NS = BC / TPR, NO = (EV + TPR - 1) / TPR;
    constexpr int D = E < EV ? EV : E;
    __shared__ float qs[BR][E + 1];      /* + 1: the rows of a warp in other banks */
    __shared__ float kv[BC * D];         /* the tile's keys as [E][BC], then values [BC][EV] */
    __shared__ float ps[BR][BC + 1];     /* the tile's e^(s - m) */
    const I tiles = (l + BR - 1) / BR, b = blockIdx.x / tiles, i0 = blockIdx.x % tiles * BR;
    const int row = threadIdx.x / TPR, sub = threadIdx.x % TPR;
    const I i = i0 + row;
    q += b * l * E, k += b / G * s * E, v += b / G * s * EV;
    for (int x = threadIdx.x; x < BR * E; x += NT)
        qs[x / E][x % E] = i0 + x / E < l ? ld(q, (i0 + x / E) * E + x % E) : 0.0f;
    float m = NEG_INF, sum = 0.0f, o[NO];
    for (int c = 0; c < NO; c++)
        o[c] = 0.0f;
    const I last = i0 + BR < l ? i0 + BR : l, seen = CAUSAL && last < s ? last : s;
    for (I j0 = 0; j0 < seen; j0 += BC) {
        __syncthreads();                 /* qs written; the last tile's values read */
        for (int x = threadIdx.x; x < BC * E; x += NT)
            kv[x % E * BC + x / E] = j0 + x / E < s ? ld(k, (j0 + x / E) * E + x % E) : 0.0f;
        __syncthreads();
        float sc[NS];
        for (int c = 0; c < NS; c++)
            sc[c] = 0.0f;
        for (int f = 0; f < E; f++) {
            const float qf = qs[row][f];
            for (int c = 0; c < NS; c++)
                sc[c] += qf * kv[f * BC + sub + c * TPR];
        }
        float mx = m;
        for (int c = 0; c < NS; c++) {
            const I j = j0 + sub + c * TPR;
            sc[c] = j < s && (!CAUSAL || j <= i) ? sc[c] * scale : NEG_INF;
            mx = sc[c] > mx ? sc[c] : mx;
        }
        for (int off = TPR / 2; off > 0; off >>= 1) {
            const float w = __shfl_xor_sync(0xffffffffu, mx, off);
            mx = w > mx ? w : mx;
        }
        __syncthreads();                 /* every lane done with the keys */
        for (int x = threadIdx.x; x < BC * EV; x += NT)
            kv[x] = j0 + x / EV < s ? ld(v, (j0 + x / EV) * EV + x % EV) : 0.0f;
        const float alpha = mx == NEG_INF ? 1.0f : expf(m - mx);
        float part = 0.0f;
        for (int c = 0; c < NS; c++) {
            const float p = mx == NEG_INF ? 0.0f : expf(sc[c] - mx);
            ps[row][sub + c * TPR] = p;
            part += p;
        }
        sum = sum * alpha + part;
        m = mx;
        for (int c = 0; c < NO; c++)
            o[c] *= alpha;
        __syncthreads();
        for (int j = 0; j < BC; j++) {
            const float p = ps[row][j];
            for (int c = 0; c < NO; c++)
                if (sub + c * TPR < EV)
                    o[c] += p * kv[j * EV + sub + c * TPR];
        }
    }
    for (int off = TPR / 2; off > 0; off >>= 1) /* each lane the same total: a + b = b + a */
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (i >= l)
        return;
    const float inv = 1.0f / sum;
    for (int c = 0; c < NO; c++)
        if (sub + c * TPR < EV)
            y_put((b * l + i) * EV + sub + c * TPR, o[c] * inv);
    if (lse && sub == 0)
        st(lse, b * l + i, m + logf(sum));
}

/* Backward, one side: KEYS, a block owns BO keys (their rows of k and v) and
 * walks the query tiles of BS (causal: from its first key's diagonal) of
 * each of its group's G query heads in order, summing dk (put_a) and dv
 * (put_b) in registers; else it owns BO query rows (q and dy) and walks the
 * key tiles of its key/value head, summing dq (put_a).  For each pair the
 * probability is recomputed from lse, p = e^(q.k scale - lse), and ds =
 * p (dy.v - D) scale; dv += p dy, dk += ds q, dq += ds k.  put(i, value) takes
 * the result's element i. */
template <int NT, int BO, int BS, int E, int EV, bool CAUSAL, bool KEYS, int G, class I,
          class TY, class TQ, class TK, class TV, class TL, class PA, class PB>
__device__ __forceinline__ void attn_bwd(const TY *__restrict__ dy, const TQ *__restrict__ q,
                                         const TK *__restrict__ k, const TV *__restrict__ v,
                                         const TL *__restrict__ lse,
                                         const float *__restrict__ dd, I l, I s, float scale,
                                         PA put_a, PB put_b)
{
    constexpr int TPR = NT / BO, NS = BS / TPR, NA = (E + TPR - 1) / TPR,
                  NB = KEYS ? (EV + TPR - 1) / TPR : 1;
    __shared__ float xa[BO][E + 1];      /* own rows: k (KEYS) or q */
    __shared__ float za[BO][EV + 1];     /* v or dy */
    __shared__ float xb[E][BS + 1];      /* the walked tile, transposed: q or k */
    __shared__ float zb[EV][BS + 1];     /* dy or v */
    __shared__ float pp[KEYS ? BO : 1][BS + 1], ds[BO][BS + 1];
    __shared__ float lb[BS], db[BS];     /* KEYS: the walked rows' lse and D */
    const I na = KEYS ? s : l, nb = KEYS ? l : s, tiles = (na + BO - 1) / BO;
    const I b = blockIdx.x / tiles, a0 = blockIdx.x % tiles * BO;
    const I bq = KEYS ? b * G : b, bk = KEYS ? b : b / G;   /* q's batch element, k's */
    const int row = threadIdx.x / TPR, sub = threadIdx.x % TPR;
    const I a = a0 + row;
    q += bq * l * E, k += bk * s * E, v += bk * s * EV, dy += bq * l * EV, lse += bq * l,
        dd += bq * l;
    for (int x = threadIdx.x; x < BO * E; x += NT) {
        const I r = a0 + x / E;
        xa[x / E][x % E] = r >= na ? 0.0f : KEYS ? ld(k, r * E + x % E) : ld(q, r * E + x % E);
    }
    for (int x = threadIdx.x; x < BO * EV; x += NT) {
        const I r = a0 + x / EV;
        za[x / EV][x % EV] = r >= na ? 0.0f : KEYS ? ld(v, r * EV + x % EV)
                                                   : ld(dy, r * EV + x % EV);
    }
    const float la = !KEYS && a < na ? ld(lse, a) : 0.0f, da = !KEYS && a < na ? dd[a] : 0.0f;
    float acc_a[NA], acc_b[NB];
    for (int c = 0; c < NA; c++)
        acc_a[c] = 0.0f;
    for (int c = 0; c < NB; c++)
        acc_b[c] = 0.0f;
    const I last = a0 + BO < na ? a0 + BO : na;
    const I from = KEYS && CAUSAL ? a0 / BS * BS : 0, to = !KEYS && CAUSAL && last < nb ? last : nb;
    for (int h = 0; h < (KEYS ? G : 1); h++) { /* KEYS: the group's query heads, in order */
        for (I b0 = from; b0 < to; b0 += BS) {
            __syncthreads();                 /* own rows written; the last tile read */
            for (int x = threadIdx.x; x < BS * E; x += NT) {
                const I r = b0 + x / E;
                xb[x % E][x / E] = r >= nb ? 0.0f : KEYS ? ld(q, r * E + x % E)
                                                         : ld(k, r * E + x % E);
            }
            for (int x = threadIdx.x; x < BS * EV; x += NT) {
                const I r = b0 + x / EV;
                zb[x % EV][x / EV] = r >= nb ? 0.0f : KEYS ? ld(dy, r * EV + x % EV)
                                                           : ld(v, r * EV + x % EV);
            }
            if (KEYS)
                for (int x = threadIdx.x; x < BS; x += NT) {
                    lb[x] = b0 + x < nb ? ld(lse, b0 + x) : 0.0f;
                    db[x] = b0 + x < nb ? dd[b0 + x] : 0.0f;
                }
            __syncthreads();
            float sc[NS], dp[NS];
            for (int c = 0; c < NS; c++)
                sc[c] = dp[c] = 0.0f;
            for (int f = 0; f < E; f++) {
                const float xf = xa[row][f];
                for (int c = 0; c < NS; c++)
                    sc[c] += xf * xb[f][sub + c * TPR];
            }
            for (int f = 0; f < EV; f++) {
                const float zf = za[row][f];
                for (int c = 0; c < NS; c++)
                    dp[c] += zf * zb[f][sub + c * TPR];
            }
            for (int c = 0; c < NS; c++) {
                const int t = sub + c * TPR;
                const I r = b0 + t, i = KEYS ? r : a, j = KEYS ? a : r;
                const bool ok = a < na && r < nb && (!CAUSAL || j <= i);
                const float p = ok ? expf(sc[c] * scale - (KEYS ? lb[t] : la)) : 0.0f;
                if (KEYS)
                    pp[row][t] = p;
                ds[row][t] = ok ? p * (dp[c] - (KEYS ? db[t] : da)) * scale : 0.0f;
            }
            __syncthreads();
            for (int t = 0; t < BS; t++) {
                const float g = ds[row][t];
                for (int c = 0; c < NA; c++)
                    if (sub + c * TPR < E)
                        acc_a[c] += g * xb[sub + c * TPR][t];
                if (KEYS) {
                    const float p = pp[row][t];
                    for (int c = 0; c < NB; c++)
                        if (sub + c * TPR < EV)
                            acc_b[c] += p * zb[sub + c * TPR][t];
                }
            }
        }
        if (KEYS)
            q += l * E, dy += l * EV, lse += l, dd += l; /* the group's next head */
    }
    if (a >= na)
        return;
    for (int c = 0; c < NA; c++)
        if (sub + c * TPR < E)
            put_a((b * na + a) * E + sub + c * TPR, acc_a[c]);
    for (int c = 0; KEYS && c < NB; c++)
        if (sub + c * TPR < EV)
            put_b((b * na + a) * EV + sub + c * TPR, acc_b[c]);
}
