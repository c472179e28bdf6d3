/* What of the CUDA runtime (runtime/cuda/cuda.c) can be tested without a GPU: the
 * messages of its refusals.  A driver that is not there gives "no CUDA
 * driver"; a plan larger than the free memory gives both numbers; a status
 * word is worded as the CPU executor words the same failure; a program not
 * compiled for the GPU is refused before any driver is loaded.  Runs
 * everywhere: with or without the toolkit.  The executor's runs are tested
 * on stand-in libraries (tests/fakecuda/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "cuda.h"
#include "passes.h"

static int nfailed, npassed;

static void expect(const char *what, const char *got, const char *want)
{
    if (!strstr(got, want)) {
        printf("FAIL %s: got \"%s\", want it to contain \"%s\"\n", what, got, want);
        nfailed++;
    } else {
        npassed++;
    }
}

static cg_program *program(const char *text, ir_graph **g, mp_plan **mp)
{
    diag d;
    diag_init(&d);
    *g = ir_parse("t", text, strlen(text), &d);
    if (!*g || ir_verify(*g, &d)) {
        diag_print(&d, stdout);
        diag_free(&d);
        return NULL;
    }
    *mp = mp_plan_graph(*g);
    cg_options o = cg_options_default();
    cg_program *p = cg_generate(*g, *mp, &o, &d);
    diag_free(&d);
    return p;
}

int main(void)
{
    char err[512];
#ifdef GNC_HAVE_CUDA_DRIVER
    const int built = 1;
#else
    const int built = 0;
#endif
    /* the free-memory check */
    int64_t regions[CG_NREGIONS] = {3 << 20, 1 << 20, 0, 1 << 20};
    if (rt_cuda_check_memory(0, "NVIDIA H100", regions, 1u << 20, 6u << 20, err, sizeof err) != 0) {
        printf("FAIL memory: 5 MiB needed and 1 reserved, 6 free, refused: %s\n", err);
        nfailed++;
    }
    err[0] = 0;
    if (rt_cuda_check_memory(1, "NVIDIA H100", regions, 1u << 20, 5u << 20, err, sizeof err) == 0) {
        printf("FAIL memory: 5 MiB needed and 1 reserved, 5 free, accepted\n");
        nfailed++;
    }
    expect("plan too large", err, "device 1 (NVIDIA H100): the plan needs 5.0 MiB and the CUDA "
           "libraries about 1.0 MiB more (GNC_CUDA_RESERVE_MIB), 5.0 MiB free");

    /* no driver */
    rt_cuda_probe("/nonexistent-gnc", err, sizeof err);
    expect("no driver", err, built ? "no CUDA driver (/nonexistent-gnc/libcuda.so.1)" : "no CUDA runtime");

    /* a program of kernels only, opened without a driver */
    ir_graph *g;
    mp_plan *mp;
    cg_program *p = program("graph t {\n  input %x: f32[4, 64]\n  %y: f32[4, 64] = relu(%x)\n"
                            "  output y = %y\n}\n", &g, &mp);
    if (!p) {
        printf("FAIL the relu program does not generate\n");
        return 1;
    }
    if (rt_cuda_reserve(p, 0, NULL) != 0) {
        printf("FAIL reserve: kernels alone reserve %llu bytes\n",
               (unsigned long long)rt_cuda_reserve(p, 0, NULL));
        nfailed++;
    }
    rt_cuda_options o = {0};
    o.libdir = "/nonexistent-gnc";
    if (rt_cuda_open_ex(p, &o, err, sizeof err)) {
        printf("FAIL opened without a driver\n");
        nfailed++;
    }
    /* the program is not compiled here (no cg_compile): that comes first */
    expect("not compiled", err, built ? "not compiled" : "no CUDA runtime");
    cg_program_free(p);
    mp_plan_free(mp);
    ir_graph_free(g);

    /* a program of a cuBLASLt step alone (no modules to compile): only the
     * driver is missing */
    p = program("graph t {\n  input %a: f32[3, 5]\n  input %b: f32[5, 4]\n"
                "  %y: f32[3, 4] = matmul(%a, %b)\n  output y = %y\n}\n", &g, &mp);
    if (p) {
        if (rt_cuda_open_ex(p, &o, err, sizeof err))
            nfailed++;
        expect("gemm without a driver", err, built ? "no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
                                                   : "no CUDA runtime");
        /* the libraries' own memory: 256 MiB beside a library step, NCCL's
           buffers by its variables, or what GNC_CUDA_RESERVE_MIB says */
        const uint64_t mib = 1u << 20, conn = 4 * mib + 512 * 1024 + 4915200;
        static const char *const vars[] = {"NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS",
                                           "NCCL_MAX_P2P_NCHANNELS", "GNC_CUDA_RESERVE_MIB"};
        for (int i = 0; i < 4; i++)
            unsetenv(vars[i]);
        rt_cuda_nccl_use none = {0, 0, 0}, world = {1, 0, 0}, all = {1, 2, 3};
        uint64_t r0 = rt_cuda_reserve(p, 0, &none), rn = rt_cuda_reserve(p, 0, NULL);
        uint64_t rw = rt_cuda_reserve(p, 0, &world), ra = rt_cuda_reserve(p, 0, &all);
        uint64_t want_w = 256 * mib + 16 * 2 * conn + 16 * mib;
        uint64_t want_a = want_w + 3 * 2 * (4 * mib + 512 * 1024) + 2 * 16 * mib;
        setenv("NCCL_BUFFSIZE", "1048576", 1);
        setenv("NCCL_MAX_NCHANNELS", "4", 1);
        setenv("NCCL_MAX_P2P_NCHANNELS", "8", 1); /* no more than the channels */
        uint64_t small = rt_cuda_nccl_reserve(&all);
        uint64_t conn1 = 1 * mib + 512 * 1024 + 4915200;
        uint64_t want_s = 4 * 2 * conn1 + 3 * 4 * (1 * mib + 512 * 1024) + 3 * 16 * mib;
        setenv("NCCL_BUFFSIZE", "many", 1); /* not a number: the default */
        uint64_t bad = rt_cuda_nccl_reserve(&world);
        setenv("GNC_CUDA_RESERVE_MIB", "100", 1);
        uint64_t rset = rt_cuda_reserve(p, 0, &all);
        for (int i = 0; i < 4; i++)
            unsetenv(vars[i]);
        if (r0 != 256 * mib || rn != r0 || rw != want_w || ra != want_a || small != want_s ||
            bad != 4 * 2 * conn + 16 * mib || rset != 100 * mib) {
            printf("FAIL reserve: %llu, NULL %llu, with NCCL %llu (want %llu), with splits "
                   "and peers %llu (want %llu), NCCL's variables set %llu (want %llu), "
                   "NCCL_BUFFSIZE=many %llu, GNC_CUDA_RESERVE_MIB=100 %llu bytes\n",
                   (unsigned long long)r0, (unsigned long long)rn, (unsigned long long)rw,
                   (unsigned long long)want_w, (unsigned long long)ra,
                   (unsigned long long)want_a, (unsigned long long)small,
                   (unsigned long long)want_s, (unsigned long long)bad,
                   (unsigned long long)rset);
            nfailed++;
        } else {
            npassed++;
        }
        cg_program_free(p);
        mp_plan_free(mp);
        ir_graph_free(g);
    }

    /* status words, worded as the CPU executor's failures */
    p = program("graph t {\n  input %x: f32[6, 10]\n  input %label: i32[6]\n"
                "  %y: f32[] = cross_entropy(%x, %label) {label_smoothing = 0.0, ignore_index = -100, split = 1}\n  output y = %y\n}\n", &g, &mp);
    if (p) {
        cg_status st = {CG_STATUS_LABEL, 0, 4, 12};
        rt_cuda_status_message(&st, g->head, err, sizeof err);
        expect("label status", err, "cross_entropy label 12 at position 4 of 'label' is out of range [0, 10)");
        cg_program_free(p);
        mp_plan_free(mp);
        ir_graph_free(g);
    }
    printf("%d passed, %d failed\n", npassed, nfailed);
    return nfailed ? 1 : 0;
}
