/* Inside codegen: the generator's state and what its files share.  Not a
 * public header.  codegen.c walks the graph and makes the steps; kernels.c
 * writes the CUDA C of kernels; library.c describes cuBLASLt and cuDNN calls;
 * nvrtc.c compiles. */
#ifndef GNC_CG_INTERNAL_H
#define GNC_CG_INTERNAL_H

#include <stdarg.h>

#include "base.h"
#include "codegen.h"

/* ---- small things ---- */

typedef struct {
    char *s;
    size_t len, cap;
} cg_sb;

void cg_sb_printf(cg_sb *b, const char *fmt, ...) DIAG_PRINTF(2, 3);
void cg_sb_vprintf(cg_sb *b, const char *fmt, va_list ap);
void cg_sb_put(cg_sb *b, const char *s, size_t n);
void cg_sb_free(cg_sb *b);

/* Allocations that live as long as the program (freed by cg_program_free). */
void *cg_palloc(cg_program *p, size_t n);
char *cg_pstrdup(cg_program *p, const char *s);
char *cg_pprintf(cg_program *p, const char *fmt, ...) DIAG_PRINTF(2, 3);
void cg_pool_free(cg_program *p);

typedef struct {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t n;
} cg_sha256;

void cg_sha256_init(cg_sha256 *s);
void cg_sha256_update(cg_sha256 *s, const void *data, size_t n);
void cg_sha256_final(cg_sha256 *s, unsigned char out[32]);
uint64_t cg_hash64(const void *data, size_t n);      /* FNV-1a, for tables */

extern const char cg_prelude[];        /* codegen/prelude.cuh, embedded */
extern const size_t cg_prelude_len;

/* ---- the generator ---- */

/* One memory access of a step, for the stream dependences (cg_step.wait) and
 * the check that a fused kernel never writes what it reads elsewhere. */
typedef struct {
    cg_ref at;
    int64_t bytes;
    int write;
    int aligned;       /* element i read or written by the thread of element i */
    ir_dtype dtype;
} cg_access;

typedef struct {
    cg_step step;
    int naccess;
    cg_access *access;
} cg_pending;

/* n elements from src (as sdt) to dst (as ddt): a cast to make; with perm a
 * filter [k, c, r s] of c channels and rs taps at once permuted, KCRS to KRSC
 * (CG_PERM_KRSC: a channels-last shadow) or back (CG_PERM_KCRS: a gradient
 * cuDNN wrote channels-last). */
enum { CG_PERM_NONE, CG_PERM_KRSC, CG_PERM_KCRS };
typedef struct {
    cg_ref src, dst;
    ir_dtype sdt, ddt;
    int64_t n;
    int perm;
    int64_t c, rs;
} cg_cast;

typedef struct cg_gen {
    const ir_graph *g;
    const mp_plan *mp;
    cg_options o;
    diag *d;
    cg_program *p;
    int nvalues;
    int nnodes;
    int *pos;                   /* by out[0]'s id: the node's position in the list */
    ir_dtype *dtype;            /* by value id: as stored */
    unsigned char *nhwc;        /* by value id: stored channels-last (layout.c) */
    ir_type *ptype;             /* by value id: its type as a channels-last kernel
                                   sees it (cg_nhwc_type) */
    unsigned char *weight;      /* by value id: computed from weights alone */
    unsigned char *external;    /* by value id: an output, the loss or an update source */
    int *rstart, *readers;      /* by value id: the positions of the nodes reading it */
    const ir_node **node_at;    /* by position */
    int failed;

    /* the device being generated */
    int dev;
    cg_device *D;
    int init;                   /* generating its init steps */
    cg_pending *list;           /* the steps so far of the list being made */
    int nlist, caplist;
    int64_t ws_top, ws_max;     /* the workspace of the unit being made */
    int64_t staging_top;        /* communication staging (above the rest) */
    cg_ref *alias;              /* by value id: read from here instead (a free reshape) */
    unsigned char *aliased;
    unsigned char *shadow_fresh;/* by value id: its shadow is up to date in this list */
    cg_cast *casts;             /* the run's 16-bit shadows still to make, all in one
                                   launch at casts_at (codegen.c flush_casts) */
    int ncasts, casts_at;
    cg_cast *gcasts;            /* filter gradients still in 16 bits: converted to
                                   float in one launch before their first reader
                                   (codegen.c cg_grad_stage) */
    const ir_value **gcast_v;
    int ngcasts;
    /* a convolution's result whose bias is still to add: the batchnorm_train
       kernel reading it next adds it in place (library.c bias_folds) */
    const ir_value *bias_pending, *bias_of;
    /* a sum_to of a batchnorm_gradient's dx per channel (a convolution's bias
       gradient) that the batchnorm_grad kernel computed (kernels.c
       bias_grad_of); no_sum_fold: that kernel would overlap, compute it apart */
    const ir_node *sum_done;
    int no_sum_fold;
    int *dev_kernels;           /* the kernels this device uses, first use first */
    int ndev_kernels, capdev_kernels;

    /* kernels, program-wide: text with the name as "@K@", deduplicated */
    int capkernels;
    char **khead, **kbody;      /* the first instance's comment and text */
    char **kkey;                /* the body with value-made identifiers numbered */
    uint64_t *khash;
    cg_sb *kalso;               /* the other nodes a shared kernel computes */
    int *nalso;
} cg_gen;

/* Where v is read from on the current device (a free reshape's alias
 * included), and as what. */
cg_ref cg_ref_of(cg_gen *G, const ir_value *v);
ir_dtype cg_dtype_of(cg_gen *G, const ir_value *v);
/* The DSL name of v (without a partition prefix). */
const char *cg_name(const ir_value *v);
/* Whether v is a const node's result that kernels take as a literal. */
int cg_const_inline(cg_gen *G, const ir_value *v);
/* Whether the gradient constant v is scaled by the fp16 loss scale. */
int cg_const_scaled(cg_gen *G, const ir_value *v);
/* v as dt for a library call: its own bytes, a 16-bit copy of a parameter or
 * an input (made once per list), or a converted copy in the workspace. */
cg_ref cg_operand_as(cg_gen *G, const ir_value *v, ir_dtype dt);
/* v, NCHW (or a KCRS filter), channels-last (NHWC, KRSC) as dt for a cuDNN
 * call of node n: a shadow of a parameter (made by a step of n if this is its
 * first reader in the list), else a copy in the workspace that one transpose
 * of n ("what") makes and converts, setting *copied; where one channel or one
 * pixel makes both orders the same bytes, cg_operand_as. */
cg_ref cg_operand_nhwc(cg_gen *G, const ir_node *n, const char *what, const ir_value *v,
                       ir_dtype dt, int *copied);
/* Where a library call writes v, stored as float, in 16 bits (dt; with krsc
 * a filter gradient channels-last): bytes of its own in the params region,
 * converted (and permuted to KCRS) into v by one launch with the others so
 * written before the first step that reads any of them. */
cg_ref cg_grad_stage(cg_gen *G, const ir_value *v, ir_dtype dt, int krsc);
/* Whether a 4-d NCHW (or KCRS) tensor has the same bytes channels-last: one
 * channel, or one pixel. */
int cg_nhwc_same(const ir_type *t);
/* Whether the layout of v matters: a 4-d tensor whose bytes differ between
 * NCHW and NHWC. */
int cg_layout_matters(const ir_value *v);
/* Whether v is read by optimizer steps alone, as their gradient. */
int cg_only_optimizers(const cg_gen *G, const ir_value *v);
/* The root of x's set in a union-find forest (parent: by value id). */
int cg_find(int *parent, int x);
/* Chooses each value's layout (G->nhwc, G->ptype): layout.c. */
void cg_choose_layouts(cg_gen *G);
/* Whether convolution node n runs as a cuDNN call on channels-last tensors:
 * --conv cudnn-nhwc, or a call whose activations (its operands, its result
 * res as the call writes it after its epilogue, its residual z; NULL: none)
 * are stored channels-last as many as not. */
int cg_conv_nhwc(cg_gen *G, const ir_node *n, const ir_value *res, const ir_value *z);
/* Bytes of the workspace for this unit, 256-byte aligned. */
cg_ref cg_workspace(cg_gen *G, int64_t bytes);
/* Appends a step; access lists are copied.  Returns its index in the list. */
int cg_add_step(cg_gen *G, const cg_step *s, const cg_access *acc, int nacc);
/* The kernel of head (a comment) and body (its name written "@K@"), named from
 * base.  A kernel whose body is the same but for the identifiers made from
 * value names (idents) is shared: the first one's text is kept, and its
 * comment lists the nodes it also computes.  Returns its index. */
int cg_add_kernel(cg_gen *G, const char *head, const char *body, const char *const *idents,
                  int nidents, const char *base, const ir_node *node, int elementwise, int block);
/* An internal error: reported on d at n's location, generation fails. */
void cg_fail(cg_gen *G, const ir_node *n, const char *fmt, ...) DIAG_PRINTF(3, 4);

/* Whether op is computed by a library call (library.c). */
int cg_is_library(ir_op op);
/* Steps of the library call heading members m[0 .. nm-1] and of the members it
 * takes as its epilogue.  Returns how many members it took (1 or more). */
int cg_emit_library(cg_gen *G, const ir_node *const *m, int nm);

/* Whether op's element i can be computed from its operands by index alone
 * (kernels.c: elementwise ops, gathers, pooling, data movement, optimizers). */
int cg_is_map(const ir_node *n);
/* A kernel for members m[0 .. nm-1]: map ops, then at most one other op
 * (special: its index, or -1), then map ops on its first result.  Returns 0,
 * or -1 when the kernel would write memory it reads at other elements (the
 * caller splits it). */
int cg_emit_kernel(cg_gen *G, const ir_node *const *m, int nm, int special);
/* One launch for map ops m[0 .. n-1], each standing alone (the optimizer's
 * steps of many parameters), n <= nm as many as one kernel's parameters
 * hold: returns n, or 0 (nothing emitted) when their accesses would be
 * unsafe in one kernel. */
int cg_emit_multi(cg_gen *G, const ir_node *const *m, int nm);
/* casts[0 .. n-1] in one launch (blocks per tensor), a step of node by. */
void cg_emit_casts(cg_gen *G, const ir_node *by, const char *what, const cg_cast *casts, int n);
/* The most elements a generated kernel indexes in int: 2^31 less a margin,
 * because the threads of a grid's last block compute their index (up to a
 * block of 1024 threads of 4 elements past the end) before they test it.
 * Larger tensors are indexed in i64 (kernels.c), or stay library calls
 * (cg_igemm_fits). */
#define CG_INT_ELEMENTS (((int64_t)1 << 31) - 4096)
/* Whether a launch of grid x * y * z blocks is within CUDA's limits (x below
 * 2^31, y and z at most 65535); if not, generation fails naming n and what. */
int cg_grid_fits(cg_gen *G, const ir_node *n, const char *what, int64_t x, int64_t y, int64_t z);
/* A kernel converting n elements from src (sdt) to dst (ddt). */
void cg_emit_cast(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                  cg_ref dst, ir_dtype ddt, int64_t numel);
/* A kernel transposing batch matrices of rows x cols elements from src (sdt)
 * into dst (ddt): the channels-last copies of --conv cudnn-nhwc. */
void cg_emit_transpose(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                       cg_ref dst, ir_dtype ddt, int64_t batch, int64_t rows, int64_t cols);
/* A kernel adding a convolution's bias (bias: NULL for none; k elements of
 * bdt) and applying its ReLU (relu), in place on its result y (ydt) of n
 * images of k channels of px pixels, NCHW or NHWC (nhwc): where cuDNN's
 * fused call is not documented to run (library.c, emit_conv). */
void cg_emit_bias_relu(cg_gen *G, const ir_node *n, const char *what, cg_ref y, ir_dtype ydt,
                       const cg_ref *bias, ir_dtype bdt, int64_t images, int64_t k, int64_t px,
                       int nhwc, int relu);
/* Kernels of the program's own: the updates of an fp16 step (copies unless a
 * gradient overflowed), the scaler's update, staging of collectives. */
void cg_emit_masked_copy(cg_gen *G, const ir_value *target, const ir_value *source);
void cg_emit_scaler_update(cg_gen *G);
/* The kernel that reduces a collective locally (cg_comm.local_kernel). */
int cg_local_reduce_kernel(cg_gen *G, ir_dtype t, int max);
void cg_emit_gather_unpack(cg_gen *G, const ir_node *n, int j, cg_ref staging, int64_t block,
                           int64_t off, int pack);
/* A line " *   %y: f32[..] = op(%x, ...) {attrs}  @file:line:col" of a kernel's
 * comment, for node n. */
void cg_describe_node(cg_sb *b, const ir_node *n);
/* Whether convolution c can be an implicit-GEMM kernel (igemm.c): its tensors'
 * elements are counted in int (at most CG_INT_ELEMENTS: a tile's rows and
 * columns run up to 63 past the product's), and its grid is within CUDA's
 * limits.  The others stay cuDNN calls. */
int cg_igemm_fits(const cg_conv *c);
/* The launches of convolution c (from node n; the result written as out_dt,
 * the operands read as c->dtype) as a generated implicit-GEMM kernel. */
void cg_emit_igemm(cg_gen *G, const ir_node *n, const cg_conv *c, ir_dtype out_dt,
                   const char *what);
/* The C type of a storage dtype in kernels ("float", "bf16", "int", ...). */
const char *cg_ctype(ir_dtype t);

#endif
