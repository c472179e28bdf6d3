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

/* N consecutive elements from element e (a multiple of N): one 16-byte access
 * for float, one 8-byte access for the 16-bit types (every buffer is 256-byte
 * aligned). */
template <int N> __device__ __forceinline__ void ldv(const float *p, i64 e, float *v)
{
    if constexpr (N == 4) {
        const float4 t = *reinterpret_cast<const float4 *>(p + e);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        for (int j = 0; j < N; j++)
            v[j] = p[e + j];
    }
}

template <int N, class H> __device__ __forceinline__ void ldv(const H *p, i64 e, float *v)
{
    if constexpr (N == 4) {
        const uint2 t = *reinterpret_cast<const uint2 *>(p + e);
        H h[4];
        h[0].bits = (unsigned short)(t.x & 0xffffu), h[1].bits = (unsigned short)(t.x >> 16);
        h[2].bits = (unsigned short)(t.y & 0xffffu), h[3].bits = (unsigned short)(t.y >> 16);
        for (int j = 0; j < 4; j++)
            v[j] = to_f32(h[j]);
    } else {
        for (int j = 0; j < N; j++)
            v[j] = to_f32(p[e + j]);
    }
}

template <int N> __device__ __forceinline__ void stv(float *p, i64 e, const float *v)
{
    if constexpr (N == 4) {
        *reinterpret_cast<float4 *>(p + e) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        for (int j = 0; j < N; j++)
            p[e + j] = v[j];
    }
}

template <int N> __device__ __forceinline__ void stv(bf16 *p, i64 e, const float *v)
{
    if constexpr (N == 4) {
        uint2 t;
        t.x = (unsigned)to_bf16(v[0]).bits | (unsigned)to_bf16(v[1]).bits << 16;
        t.y = (unsigned)to_bf16(v[2]).bits | (unsigned)to_bf16(v[3]).bits << 16;
        *reinterpret_cast<uint2 *>(p + e) = t;
    } else {
        for (int j = 0; j < N; j++)
            p[e + j] = to_bf16(v[j]);
    }
}

template <int N> __device__ __forceinline__ void stv(f16 *p, i64 e, const float *v)
{
    if constexpr (N == 4) {
        uint2 t;
        t.x = (unsigned)to_f16(v[0]).bits | (unsigned)to_f16(v[1]).bits << 16;
        t.y = (unsigned)to_f16(v[2]).bits | (unsigned)to_f16(v[3]).bits << 16;
        *reinterpret_cast<uint2 *>(p + e) = t;
    } else {
        for (int j = 0; j < N; j++)
            p[e + j] = to_f16(v[j]);
    }
}

/* ---- the ops' arithmetic, as runtime/exec.c and grad.c do it ---- */

__device__ __forceinline__ float relu_f(float a) { return a > 0.0f ? a : 0.0f; }
__device__ __forceinline__ float sigmoid_f(float a) { return 1.0f / (1.0f + expf(-a)); }
__device__ __forceinline__ float gelu_f(float a)
{
    return 0.5f * a * (1.0f + erff(a * 0.707106781f));
}
__device__ __forceinline__ float gelu_grad_f(float dy, float x)
{
    return dy * (0.5f * (1.0f + erff(x * 0.707106781f)) + x * expf(-0.5f * x * x) * 0.398942280f);
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
