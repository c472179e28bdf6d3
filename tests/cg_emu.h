/* Host emulation of the CUDA C that codegen writes, for the tests: the same
 * source compiled by the host C++ compiler, each thread block run on one host
 * thread with its CUDA threads as fibers (blocks on several host threads).
 *
 *   - threadIdx, blockIdx, blockDim, gridDim: per host thread, set for the
 *     fiber that runs;
 *   - __shared__: a static thread_local, so the fibers of one block share it;
 *   - __syncthreads(): the fiber waits until every thread of its block is
 *     there; a thread that returns while others wait, or threads of one warp
 *     waiting at different places, are reported (divergent barriers: bugs a
 *     GPU would only sometimes show);
 *   - __shfl_xor_sync, __shfl_sync: the lanes of a warp exchange values at a
 *     barrier of that warp alone;
 *   - atomics and __threadfence: the host's;
 *   - alignment, as a GPU needs it: the vector accesses of the prelude's
 *     ldv<4>/stv<4> (float4: 16 bytes; uint2, four 16-bit values: 8 bytes), ldv<8>/stv<8>
 *     (two float4s; uint4, eight 16-bit values: 16 bytes)
 *     at an address that is a multiple of their size, WMMA's
 *     load_matrix_sync/store_matrix_sync at a 32-byte aligned pointer with
 *     ldm a multiple of 16 bytes; a misaligned one fails the kernel, naming
 *     the access (a failure a GPU shows as wrong values or a fault).
 * A failure inside a thread (a misaligned access) is kept as its block's
 * first and returned by the launch once the block has run, as a divergent
 * barrier is.
 * Fibers switch by a few instructions of assembly on x86-64 (ucontext
 * elsewhere): a block of 1024 threads reducing with shuffles runs in
 * microseconds, where an OS thread per CUDA thread took milliseconds per
 * barrier.
 *
 * Use: include this header, then the generated sources (each in a namespace
 * of its own); EMU_ENTRY(ns::kernel) is a launcher for the table the test
 * writes.  Not shipped: codegen's kernels never include it. */
#ifndef GNC_CG_EMU_H
#define GNC_CG_EMU_H

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>
#include <utility>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define GNC_KERNEL static

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };

namespace emu {
/* Whether p is a multiple of align bytes; else the running kernel fails,
 * naming what accessed it. */
static bool aligned(const void *p, unsigned align, const char *what);

/* n bytes from src to dst, at whatever alignment (the compiler may not
 * assume a type's: the addresses go through an empty asm). */
static inline void copy_bytes(void *dst, const void *src, size_t n)
{
    __asm__("" : "+r"(dst), "+r"(src));
    memcpy(dst, src, n);
}
}

/* The vector types through which the prelude's ldv and stv load and store
 * (a 16-byte access of 4 floats, an 8-byte access of 4 16-bit values, a
 * 16-byte access of 8).  On a GPU such an access needs an address that is a multiple of
 * its size (the CUDA C++ Programming Guide, "Device Memory Accesses", Size
 * and Alignment Requirement: one instruction only for naturally aligned
 * words, and "reading non-naturally aligned 8-byte or 16-byte words produces
 * incorrect results"), so a kernel that makes one by a pointer cast
 * (reinterpret_cast<const float4 *>(p + e)) fails here on a misaligned
 * address: the copy from such an lvalue is the load, the assignment to one
 * the store (EMU_VECTOR_ACCESS gives each type both, naming the access).
 * The copy itself is bytewise, so that the host never faults on the address
 * it reports. */
#define EMU_VECTOR_ACCESS(T, load, store)                                              \
    T(const T &o)                                                                      \
    {                                                                                  \
        emu::aligned(&o, sizeof(T), load);                                             \
        emu::copy_bytes(this, &o, sizeof o);                                           \
    }                                                                                  \
    T &operator=(const T &o)                                                           \
    {                                                                                  \
        emu::aligned(this, sizeof(T), store);                                          \
        emu::copy_bytes(this, &o, sizeof o);                                           \
        return *this;                                                                  \
    }
struct alignas(16) float4 {
    float x, y, z, w;
    float4() = default;
    float4(float a, float b, float c, float d) : x(a), y(b), z(c), w(d) {}
    EMU_VECTOR_ACCESS(float4, "a 16-byte float4 load (ldv<4> of float)",
                      "a 16-byte float4 store (stv<4> of float)")
};
struct alignas(8) uint2 {
    unsigned x, y;
    uint2() = default;
    EMU_VECTOR_ACCESS(uint2, "an 8-byte uint2 load (ldv<4> of 16-bit values)",
                      "an 8-byte uint2 store (stv<4> of 16-bit values)")
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
    uint4() = default;
    EMU_VECTOR_ACCESS(uint4, "a 16-byte uint4 load (ldv<8> of 16-bit values)",
                      "a 16-byte uint4 store (stv<8> of 16-bit values)")
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4(x, y, z, w); }

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }

static inline int atomicCAS(int *p, int expect, int want)
{
    __atomic_compare_exchange_n(p, &expect, want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expect;
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int atomicOr(int *p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static inline int atomicMax(int *p, int v)
{
    int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST,
                                                   __ATOMIC_SEQ_CST)) {
    }
    return old;
}

namespace emu {

enum { RUN, AT_BLOCK, AT_WARP, DONE };
enum { STACK = 64 << 10, MAX_THREADS = 1024 };

struct fiber {
    void *sp;
    int state;
    unsigned parity;            /* shuffles so far: which exchange slots are its */
};

struct block {
    int n;                      /* threads */
    int cur;
    fiber f[MAX_THREADS];
    char *stacks;
    void *sched_sp;
    double slot[2][MAX_THREADS];
    void (*call)(void *);
    void *arg;
    const char *error;          /* the block's first failure: a scheduling one, or message */
    char message[320];          /* what kernel_fail reported */
#if !defined(__x86_64__)
    ucontext_t sched_uc, uc[MAX_THREADS];
#endif
};

inline thread_local block *cur_block;
inline thread_local block *own_block; /* this host thread's, reused from launch to launch */
inline block *all_blocks[256];        /* every host thread's, for release() */
inline int nall_blocks;

#if defined(__x86_64__)
extern "C" void gnc_emu_switch(void **save, void *to);
asm(".text\n"
    ".globl gnc_emu_switch\n"
    ".hidden gnc_emu_switch\n"
    ".type gnc_emu_switch, @function\n"
    "gnc_emu_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size gnc_emu_switch, .-gnc_emu_switch\n"
    ".section .note.GNU-stack,\"\",@progbits\n"
    ".text\n");
#endif

/* from the running fiber back to the scheduler */
static inline void yield_to_scheduler()
{
    block *b = cur_block;
#if defined(__x86_64__)
    gnc_emu_switch(&b->f[b->cur].sp, b->sched_sp);
#else
    swapcontext(&b->uc[b->cur], &b->sched_uc);
#endif
}

static void fiber_main()
{
    block *b = cur_block;
    b->call(b->arg);
    b = cur_block;
    b->f[b->cur].state = DONE;
    yield_to_scheduler();
    abort(); /* never resumed */
}

#if !defined(__x86_64__)
static void fiber_main_uc() { fiber_main(); }
#endif

static void start_fiber(block *b, int t)
{
    char *top = b->stacks + (size_t)(t + 1) * STACK;
#if defined(__x86_64__)
    void **sp = (void **)((uintptr_t)top & ~(uintptr_t)15) - 8;
    for (int i = 0; i < 6; i++)
        sp[i] = 0;
    sp[6] = (void *)&fiber_main;
    sp[7] = 0;
    b->f[t].sp = sp;
#else
    getcontext(&b->uc[t]);
    b->uc[t].uc_stack.ss_sp = top - STACK;
    b->uc[t].uc_stack.ss_size = STACK;
    b->uc[t].uc_link = NULL;
    makecontext(&b->uc[t], fiber_main_uc, 0);
#endif
    b->f[t].state = RUN;
    b->f[t].parity = 0;
}

static void resume(block *b, int t)
{
    b->cur = t;
    threadIdx.x = (unsigned)t % blockDim.x;
    threadIdx.y = (unsigned)t / blockDim.x % blockDim.y;
    threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
#if defined(__x86_64__)
    gnc_emu_switch(&b->sched_sp, b->f[t].sp);
#else
    swapcontext(&b->sched_uc, &b->uc[t]);
#endif
}

/* Runs one block to its end; returns an error or NULL. */
static const char *schedule_block(block *b);
static const char *run_block(block *b)
{
    b->error = NULL;
    const char *e = schedule_block(b);
    return b->error ? b->error : e;
}

/* The fibers of block b until every thread has returned; a scheduling error
 * (a divergent barrier) or NULL. */
static const char *schedule_block(block *b)
{
    for (int t = 0; t < b->n; t++)
        start_fiber(b, t);
    int done = 0;
    while (done < b->n) {
        for (int t = 0; t < b->n; t++)
            if (b->f[t].state == RUN) {
                resume(b, t);
                if (b->f[t].state == DONE)
                    done++;
            }
        if (done == b->n)
            break;
        int released = 0;
        /* warps whose every lane waits at the warp's barrier */
        for (int w = 0; w * 32 < b->n; w++) {
            int lo = w * 32, hi = lo + 32 < b->n ? lo + 32 : b->n, at = 0, gone = 0, other = 0;
            for (int t = lo; t < hi; t++)
                at += b->f[t].state == AT_WARP, gone += b->f[t].state == DONE,
                    other += b->f[t].state == AT_BLOCK;
            if (!at)
                continue;
            if (gone || other)
                return gone ? "a lane returned while its warp waits at a shuffle"
                            : "the lanes of a warp wait at a shuffle and at __syncthreads";
            for (int t = lo; t < hi; t++)
                b->f[t].state = RUN;
            released = 1;
        }
        if (released)
            continue;
        int at = 0;
        for (int t = 0; t < b->n; t++)
            at += b->f[t].state == AT_BLOCK;
        if (at && done)
            return "a thread returned while others wait at __syncthreads";
        if (at == b->n - done && at) {
            for (int t = 0; t < b->n; t++)
                b->f[t].state = RUN;
            continue;
        }
        return "threads wait forever";
    }
    return NULL;
}

/* A failure of the running thread's kernel (the first of its block is
 * kept): the launch returns it once the block has run, as it returns a
 * divergent barrier.  The thread goes on. */
static void kernel_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void kernel_fail(const char *fmt, ...)
{
    block *b = cur_block;
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (!b) { /* not in a kernel: nothing can report it */
        fprintf(stderr, "cg_emu: %s\n", text);
        abort();
    }
    if (b->error)
        return;
    snprintf(b->message, sizeof b->message, "%s (thread (%u, %u, %u) of block (%u, %u, %u))", text,
             threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z);
    b->error = b->message;
}

static bool aligned(const void *p, unsigned align, const char *what)
{
    uintptr_t u = (uintptr_t)p;
    __asm__("" : "+r"(u)); /* the address as it is: the compiler may assume a type's alignment */
    if (u % align == 0)
        return true;
    kernel_fail("%s at %p, which is not %u-byte aligned", what, p, align);
    return false;
}

static inline void wait_warp()
{
    block *b = cur_block;
    b->f[b->cur].state = AT_WARP;
    yield_to_scheduler();
}

template <class T> static inline T exchange(T v, int src)
{
    block *b = cur_block;
    int t = b->cur;
    unsigned par = b->f[t].parity++ & 1;
    memcpy(&b->slot[par][t], &v, sizeof v);
    wait_warp();
    b = cur_block;
    T r;
    memcpy(&r, &b->slot[par][src], sizeof r);
    return r;
}

} /* namespace emu */

static inline void __syncthreads()
{
    emu::block *b = emu::cur_block;
    b->f[b->cur].state = emu::AT_BLOCK;
    emu::yield_to_scheduler();
}

static inline void __syncwarp(unsigned = 0xffffffffu) { emu::wait_warp(); }

template <class T> static inline T __shfl_xor_sync(unsigned, T v, int mask)
{
    int t = emu::cur_block->cur;
    return emu::exchange(v, (t & ~31) | ((t & 31) ^ mask));
}

template <class T> static inline T __shfl_sync(unsigned, T v, int lane)
{
    int t = emu::cur_block->cur;
    return emu::exchange(v, (t & ~31) | (lane & 31));
}

namespace emu {

/* One block per host thread at a time; the blocks of a grid on all of them. */
template <class F> static const char *launch(const unsigned grid[3], const unsigned blk[3], F &body)
{
    unsigned n = blk[0] * blk[1] * blk[2];
    if (n == 0 || n > MAX_THREADS)
        return "a block of more than 1024 threads";
    if (grid[0] == 0 || grid[1] > 65535 || grid[2] > 65535 || grid[1] == 0 || grid[2] == 0)
        return "a grid out of range";
    long nblocks = (long)grid[0] * grid[1] * grid[2];
    const char *err = NULL;
#pragma omp parallel
    {
        if (!own_block) {
            own_block = (block *)calloc(1, sizeof *own_block);
            own_block->stacks = (char *)malloc((size_t)MAX_THREADS * STACK);
#pragma omp critical(gnc_emu_blocks)
            if (nall_blocks < 256)
                all_blocks[nall_blocks++] = own_block;
        }
        block *mine = cur_block = own_block;
        blockDim = dim3{blk[0], blk[1], blk[2]};
        gridDim = dim3{grid[0], grid[1], grid[2]};
        mine->n = (int)n;
        mine->call = [](void *a) { (*(F *)a)(); };
        mine->arg = &body;
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < nblocks; i++) {
            if (__atomic_load_n(&err, __ATOMIC_SEQ_CST))
                continue;
            blockIdx = uint3{(unsigned)(i % grid[0]), (unsigned)(i / grid[0] % grid[1]),
                             (unsigned)(i / ((long)grid[0] * grid[1]))};
            const char *e = run_block(mine);
            if (e)
                __atomic_store_n(&err, e, __ATOMIC_SEQ_CST);
        }
    }
    return err;
}

template <class F> struct thunk;
template <class... A> struct thunk<void (*)(A...)> {
    template <void (*K)(A...), size_t... I>
    static const char *go(const unsigned *grid, const unsigned *blk, void **args,
                          std::index_sequence<I...>)
    {
        auto body = [args]() { K(*(A *)args[I]...); };
        return launch(grid, blk, body);
    }
    template <void (*K)(A...)>
    static const char *run(const unsigned *grid, const unsigned *blk, void **args)
    {
        return go<K>(grid, blk, args, std::index_sequence_for<A...>{});
    }
};

typedef const char *(*entry)(const unsigned *grid, const unsigned *blk, void **args);

} /* namespace emu */

#define EMU_ENTRY(f) (&emu::thunk<decltype(&f)>::run<&f>)

/* The tensor cores' wmma API, for the implicit-GEMM convolutions
 * (codegen/prelude.cuh).  A fragment holds its whole tile in every lane of
 * the warp (a GPU spreads it over the lanes in an unspecified layout, which
 * the kernels never depend on): each lane loads, multiplies and stores the
 * same tile, products exact in float and summed in k order.  Loads and
 * stores are checked as the CUDA C++ Programming Guide's WMMA description
 * asks (check_matrix).  Not checked: the PTX ISA's stricter reading for
 * wmma.load/store ("the starting address of each instance of the leading
 * dimension (row or column) must be aligned with the size of the
 * corresponding fragment in bytes": 32 for an .f16 matrix_a or matrix_b of
 * m16n16k16, so a stride of 16 fp16 elements), and that every lane passes
 * the same mptr, ldm and layout. */
#define GNC_EMU 1
#define __align__(n) __attribute__((aligned(n)))

struct __nv_bfloat16 { unsigned short x; };
struct __half { unsigned short x; };

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    unsigned u = __float_as_uint(f);
    __nv_bfloat16 r;
    r.x = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)((u >> 16) | 0x40u)
                                           : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}

static inline __half __float2half_rn(float f)
{
    _Float16 h = (_Float16)f;           /* the host's conversion rounds to nearest even */
    __half r;
    memcpy(&r.x, &h, 2);
    return r;
}

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };

/* cvt.rna.tf32.f32: 10 bits of mantissa, to nearest, ties away from zero */
static inline float __float_to_tf32(float f)
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    return __uint_as_float(u);
}

static inline float value(float v) { return v; }
static inline float value(__nv_bfloat16 v) { return __uint_as_float((unsigned)v.x << 16); }
static inline float value(__half v)
{
    _Float16 h;
    memcpy(&h, &v.x, 2);
    return (float)h;
}

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    enum {
        rows = std::is_same<Use, matrix_b>::value ? K : M,
        cols = std::is_same<Use, matrix_a>::value ? K : N,
        num_elements = rows * cols
    };
    float x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float v)
{
    for (int i = 0; i < f.num_elements; i++)
        f.x[i] = v;
}

/* What the CUDA C++ Programming Guide's WMMA description asks of
 * load_matrix_sync and store_matrix_sync: "mptr must be a 256-bit aligned
 * pointer", and ldm, the stride in elements, "a multiple of 8 for __half
 * element type or multiple of 4 for float element type (i.e., multiple of 16
 * bytes in both cases)".  Else the kernel fails, naming the call. */
template <class S> static inline void check_matrix(const char *who, const S *p, unsigned ldm)
{
    uintptr_t u = (uintptr_t)p;
    __asm__("" : "+r"(u)); /* the address as it is (above) */
    if (u % 32)
        emu::kernel_fail("%s: mptr %p is not 256-bit (32-byte) aligned", who, (const void *)p);
    else if (ldm * sizeof(S) % 16)
        emu::kernel_fail("%s: ldm %u is not a multiple of %u (16 bytes of %zu-byte elements)", who,
                         ldm, (unsigned)(16 / sizeof(S)), sizeof(S));
}

template <class Use, int M, int N, int K, class T, class L, class S>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const S *p, unsigned ldm)
{
    typedef fragment<Use, M, N, K, T, L> F;
    check_matrix("load_matrix_sync", p, ldm);
    for (int r = 0; r < F::rows; r++)
        for (int c = 0; c < F::cols; c++)
            f.x[r * F::cols + c] = value(std::is_same<L, col_major>::value ? p[(size_t)c * ldm + r]
                                                                           : p[(size_t)r * ldm + c]);
}

template <int M, int N, int K, class TA, class TB, class LA, class LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
                            const fragment<matrix_a, M, N, K, TA, LA> &a,
                            const fragment<matrix_b, M, N, K, TB, LB> &b,
                            const fragment<accumulator, M, N, K, float> &c)
{
    float out[M * N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = c.x[i * N + j];
            for (int k = 0; k < K; k++)
                s += a.x[i * K + k] * b.x[k * N + j];
            out[i * N + j] = s;
        }
    memcpy(d.x, out, sizeof out);
}

template <int M, int N, int K>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                                     unsigned ldm, layout_t layout)
{
    check_matrix("store_matrix_sync", p, ldm);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            p[layout == mem_col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c] = f.x[r * N + c];
}

} /* namespace wmma */
} /* namespace nvcuda */

/* Frees what the host threads hold (before the library is closed). */
extern "C" void gnc_emu_release(void)
{
    for (int i = 0; i < emu::nall_blocks; i++) {
        free(emu::all_blocks[i]->stacks);
        free(emu::all_blocks[i]);
    }
    emu::nall_blocks = 0;
#pragma omp parallel
    emu::own_block = NULL;
}

#endif
