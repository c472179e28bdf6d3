/* Code generation for NVIDIA GPUs: an optimized graph in, a program of steps
 * and the CUDA C of its kernels out (docs/codegen.md).
 *
 *   // given: const ir_graph *g, diag *d, char *err, size_t errlen
 *   mp_plan *mp = mp_plan_graph(g);                 after pm_run's passes
 *   cg_options o = cg_options_default();
 *   o.precision = PREC_TF32;
 *   cg_program *p = cg_generate(g, mp, &o, d);      NULL after reporting on d
 *   cg_compile(p, NULL, NULL, err, errlen);         NVRTC: cubin per arch, PTX
 *   for (int i = 0; i < p->devices[0].nsteps; i++)  // what device 0 runs, in order
 *       puts(p->devices[0].steps[i].what);
 *   cg_program_free(p);
 *   mp_plan_free(mp);
 *
 * For each device the program is an ordered list of steps.  A step is a
 * launch of a generated kernel, a cuBLASLt matmul, a cuDNN convolution, a
 * collective or point-to-point transfer (NCCL), or a copy.  Steps name memory
 * as (region, offset): the device's arena (node results at the memory plan's
 * offsets), its parameters (parameters, buffers, optimizer state, weights
 * computed once, low-precision shadows, the program's own state), its inputs,
 * and a workspace that lives only from one step to the next.  Shapes are
 * static: every step is fully described, every kernel is specialized to its
 * shapes, and nothing is decided at run time but where the regions are.
 *
 * The program borrows g and mp (names, values, locations): both must outlive it.
 *
 * Errors: cg_generate reports on d what the graph asks that codegen cannot do
 * (a dtype or op it has no kernel for) and returns NULL; cg_compile returns -1
 * with a message naming the kernel and the line of its generated source. */
#ifndef GNC_CODEGEN_H
#define GNC_CODEGEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "ir.h"
#include "passes.h"
#include "program.h"

/* Generates the program of g (verified; fused or not) with memory plan mp
 * (mp_plan_graph(g) after the last pass).  Returns NULL after reporting on d. */
cg_program *cg_generate(const ir_graph *g, const mp_plan *mp, const cg_options *o, diag *d);

/* ---- compiling (nvrtc.c; only where CMake found the CUDA toolkit) ---- */

typedef struct {
    const char *cache_dir;      /* NULL: $GNC_CACHE_DIR, else ~/.cache/gnc; "": no cache */
    int threads;                /* compiles at once; 0: the online CPUs */
    int ptxas_info;             /* fill cg_kernel's registers and spills */
    /* called after each image, done of total, one call at a time (from any of
       the compiling threads); NULL: none */
    void (*progress)(void *ctx, int done, int total);
    void *ctx;
} cg_compile_options;

typedef struct {
    int compiles;               /* NVRTC runs */
    int cache_hits;             /* images read from the cache */
    int cache_corrupt;          /* entries found damaged, compiled again */
    int cache_unwritten;        /* images compiled but not stored: the cache's folder
                                   cannot be made or written (a warm compile will
                                   compile them again) */
    double ms;                  /* wall time */
} cg_compile_stats;

/* 1 when this build has NVRTC (the CUDA toolkit), else 0 and cg_compile fails. */
int cg_have_nvrtc(void);
/* "13.0": the NVRTC version, or NULL without it. */
const char *cg_nvrtc_version(void);

/* Compiles every module of p for each of its archs (a cubin each) and the
 * newest as PTX, architectures and modules on parallel threads, through the
 * cache: an image is looked up by the SHA-256 of its source, the options and
 * the NVRTC version; an entry that fails its checksum is compiled again and
 * rewritten.  Returns 0, or -1 with the first error: a compile error names the
 * kernel, the line of the generated source and that line. */
int cg_compile(cg_program *p, const cg_compile_options *o, cg_compile_stats *stats, char *err,
               size_t errlen);

#endif
