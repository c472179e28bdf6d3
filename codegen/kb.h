/* The kernel builder, shared by the files that write kernels with it: kb.c
 * (a kernel's parameters, registers and names, literals and operands, the
 * kernel finished into the program), kernels.c (map ops and map kernels),
 * special.c (the special ops' templates), attention.c (attention's) and
 * glue.c (the program's own kernels).  codegen/internal.h has what the rest
 * of codegen calls. */
#ifndef GNC_CODEGEN_KB_H
#define GNC_CODEGEN_KB_H

#include "internal.h"

#define MAX_PARAMS 480     /* a multi-tensor kernel's pointers: 3840 of CUDA's 4096 bytes */
#define MAX_REGS 512       /* registers in one kernel's scopes */

typedef struct {
    const ir_value *v;          /* the first value read or written here (its name) */
    cg_ref at;
    ir_dtype dt;
    int64_t bytes;
    int read_aligned, read_other, write_aligned, write_other;
    char name[96];
} kparam;

typedef struct {
    cg_gen *G;
    const ir_node *const *m;
    int nm, sp;
    const ir_type *iter;        /* the shape a map kernel (or an epilogue) runs over, as
                                   stored (kb_type) */
    int nhwc;                   /* it runs over channels-last tensors (layout.c) */
    cg_sb head;                 /* the comment over the kernel */
    cg_sb body;
    cg_sb pre;                  /* statements before a map kernel's loop */
    int indent;
    kparam par[MAX_PARAMS];
    int npar;
    int status, scaler, scaler_write;
    int vec;                    /* map kernels: elements per thread */
    int array;                  /* registers as arrays NAME_v[j] (vec 4) */
    const char *idx;            /* the element index in the current scope */
    const char *itype;          /* "int" or "i64" */
    /* registers: value id -> name, in the current scope */
    int nregs;
    int reg_id[MAX_REGS];
    char *reg_name[MAX_REGS];
    int reg_array[MAX_REGS];
    /* identifiers in use; those made from value names (a multi-tensor
       kernel has thousands: every one counts, or two would be declared alike) */
    int nnames, capnames;
    const char **names;
    int nvnames, capvnames;
    const char **vnames;
    /* strings the builder made */
    int nstrs, capstrs;
    char **strs;
    int overflow;
    int unaligned;              /* reads in this scope are at any element (x_at) */
    cg_sb shared;               /* __shared__ declarations */
    int red_f, red_d;           /* the reduction scratch declared */
    const char *lane0;          /* row kernels: the first index of a thread, its step */
    int64_t lstep;
    int warp_rows;              /* a warp per row (else a block) */
    int nt;                     /* threads per block */
    /* a split reduction (parts_of): each group's elements in parts of plen,
       a block each; grid: the blocks of a first kernel (the partial sums) */
    int64_t parts, plen, grid, pbytes;
} kb;

static inline int64_t kb_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* the type registers of storage dtype t have */
static inline const char *kb_rtype(ir_dtype t) { return ir_is_float(t) ? "float" : cg_ctype(t); }

/* int where every tensor the kernel touches has at most CG_INT_ELEMENTS, so
 * the common kernels keep 32-bit arithmetic (64-bit division is several
 * times slower on a GPU); else i64. */
static inline const char *kb_index_type(int64_t most)
{
    return most <= CG_INT_ELEMENTS ? "int" : "i64";
}

/* ---- kb.c ---- */

void kb_init(kb *k, cg_gen *G, const ir_node *const *m, int nm, int sp, const char *what);
void kb_free(kb *k);

/* A string the builder keeps until kb_free; a line of the body at the
 * current indent; a fresh identifier from base. */
char *kb_kstr(kb *k, const char *fmt, ...) DIAG_PRINTF(2, 3);
void kb_line(kb *k, const char *fmt, ...) DIAG_PRINTF(2, 3);
const char *kb_tmp(kb *k, const char *base);

/* The kernel's parameter for the bytes at (at, dt, bytes), named after base;
 * v's parameter. */
kparam *kb_param_at(kb *k, const ir_value *v, const char *base, cg_ref at, ir_dtype dt,
                    int64_t bytes);
kparam *kb_param(kb *k, const ir_value *v);
/* The parameter of v, read (written) at elements aligned with the kernel's
 * or not. */
const char *kb_reads(kb *k, const ir_value *v, int aligned);
const char *kb_writes(kb *k, const ir_value *v, int aligned);

/* v's register in the current scope: its slot (-1: none), its name (NULL:
 * none); a register named name for v (a lambda's parameter); expr assigned
 * to v's register (declaring it in scalar mode). */
int kb_reg_slot(const kb *k, const ir_value *v);
const char *kb_reg(kb *k, const ir_value *v);
void kb_bind_reg(kb *k, const ir_value *v, const char *name);
void kb_set(kb *k, const ir_value *v, const char *expr);

/* x as a float (double) literal that reads back the same. */
const char *kb_flit(kb *k, double x);
const char *kb_dlit(kb *k, double x);
/* (idx / div) % mod * mul, leaving out what is 1 (mod <= 0: no modulo) */
void kb_term(cg_sb *b, const char *idx, int64_t div, int64_t mod, int64_t mul);
/* The index into t (which broadcasts to out) of out's element idx. */
const char *kb_bcast_index(kb *k, const ir_type *t, const ir_type *out, const char *idx);

/* v's type as the kernel indexes it: channels-last in a channels-last kernel
 * (cg_gen.ptype), else its own. */
const ir_type *kb_type(kb *k, const ir_value *v);
/* Whether the kernel indexes v across layouts: v's bytes differ between NCHW
 * and NHWC, and it is stored the other way from the kernel's. */
int kb_crossed(kb *k, const ir_value *v);
/* The index into v (crossed, broadcasting to the kernel's shape) of the
 * kernel's element idx. */
const char *kb_cross_index(kb *k, const ir_value *v, const char *idx);
/* Store of register val into v at the kernel's element idx: aligned, or
 * across layouts. */
void kb_store(kb *k, const ir_value *v, const char *idx, const char *val);

/* Whether v, made by a member, must be stored: read after the kernel. */
int kb_needs_store(kb *k, const ir_value *v);
/* Operand v at element idx of the kernel's shape (k->iter), as an expression. */
const char *kb_opnd(kb *k, const ir_value *v);
/* Operand v read at an index the op computes (never aligned). */
const char *kb_at_index(kb *k, const ir_value *v, const char *index);

/* Whether the accesses are safe: a buffer written is read or written
 * elsewhere only by the thread of the same element. */
int kb_accesses_safe(const kb *k);
/* Writes the kernel (signature from its parameters), adds it and its launch.
 * Returns -1 when its accesses are unsafe (nothing added). */
int kb_finish(kb *k, const char *base, int block, int64_t grid, int elementwise,
              const ir_node *node, const char *what);

/* ---- kernels.c ---- */

/* outer x len x inner around axis */
void kb_around(const ir_type *t, int axis, int64_t *outer, int64_t *len, int64_t *inner);
/* Emits the statements computing n's results at element k->idx. */
void kb_emit_map(kb *k, const ir_node *n);
/* A map kernel of the members; the most elements a member's tensor has. */
int kb_map_kernel(kb *k);
int64_t kb_max_numel(const kb *k);
/* "dense_relu__fc1": the members' ops, then the last result's name; what the
 * kernel computes, for the steps' listing. */
const char *kb_kernel_base(kb *k, const char *prefix);
const char *kb_kernel_what(kb *k);
/* Replaces the body with text, then the body built so far. */
void kb_body_prepend(kb *k, const cg_sb *text);

/* ---- attention.c ---- */

/* The kernels of the special member attention or attention_grad, its
 * epilogue's y_put written already (special.c): the launches added, 0; -1
 * when their accesses are unsafe (nothing added). */
int kb_attention(kb *k);

#endif
