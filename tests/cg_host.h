/* Running generated programs on the host, for the tests: the kernels compiled
 * by the host C++ compiler through tests/cg_emu.h, the library calls by the
 * reference the stand-in libraries compute with too (tests/fakecuda/ref.h:
 * cuBLASLt's column-major matmul with its epilogues, cuDNN's convolutions;
 * the same bits as the stand-ins for the same call), the NCCL calls between
 * the devices' memories in rank order.  A program's devices run
 * in lockstep: each to its next communication step, which runs when every
 * device of it is there. */
#ifndef GNC_CG_HOST_H
#define GNC_CG_HOST_H

#include <stddef.h>

#include "codegen.h"

typedef struct cg_host cg_host;

/* Compiles the kernels of programs progs[0 .. n-1] into one shared object in
 * dir and loads it.  NULL with the compiler's first complaints in err. */
cg_host *cg_host_build(cg_program *const *progs, int n, const char *dir, char *err, size_t errlen);
void cg_host_free(cg_host *h);

/* The host emulation of kernel k of program prog: entry(grid, block,
 * kernelParams) runs it, returning NULL or what went wrong. */
typedef const char *(*cg_host_kernel)(const unsigned *grid, const unsigned *block, void **args);
cg_host_kernel cg_host_entry(const cg_host *h, int prog, int k);

/* The memory of every device of a program: its regions, zeroed. */
typedef struct {
    unsigned char *region[CG_NREGIONS];
} cg_host_mem;

cg_host_mem *cg_host_mem_new(const cg_program *p);
void cg_host_mem_free(const cg_program *p, cg_host_mem *m);

/* Runs program prog (its index in cg_host_build's list): the init steps, or
 * one run.  Returns 0, or -1 with the first failure in err (a kernel's
 * divergent barrier, a deadlock between devices, ...). */
int cg_host_run(cg_host *h, int prog, const cg_program *p, cg_host_mem *m, int init, char *err,
                size_t errlen);

/* Value v of device d (the executor's layout: floats as float, integers as
 * themselves), converted from or to its storage dtype.  0, or -1 when d does
 * not hold v. */
int cg_host_write(const cg_program *p, cg_host_mem *m, int d, const ir_value *v, const void *data);
int cg_host_read(const cg_program *p, cg_host_mem *m, int d, const ir_value *v, void *out);

#endif
