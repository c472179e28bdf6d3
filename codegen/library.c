/* Library calls: the GEMM-shaped ops as cuBLASLt matmuls, the convolutions as
 * cuDNN calls, as generated implicit-GEMM kernels with --conv igemm (igemm.c),
 * or as cuDNN calls on channels-last copies with --conv cudnn-nhwc
 * (docs/codegen.md says how to choose).
 *
 * cuBLAS sees memory column-major: a row-major matrix X[r, c] is the
 * column-major X^T[c, r] with leading dimension c.  So a row-major product
 * Y = A B is computed as Y^T = B^T A^T, operands swapped:
 *
 *   dense              y[rows, out] = x[rows, in] w[out, in]^T (+ b)
 *                      D[out, rows] = W^T X: A = w (T), B = x (N), bias per row of D
 *   matmul             y[m, n] = a[m, k] b[k, n]:  D[n, m] = B A, batched
 *   dense_grad_input   dx[rows, in] = dy[rows, out] w[out, in]:  D[in, rows] = W DY
 *   dense_grad_weight  dw[out, in] = dy[rows, out]^T x[rows, in]:  D[in, out] = X DY^T
 *
 * An epilogue takes what follows in the fused node where the library can: a
 * dense's ReLU (CUBLASLT_EPILOGUE_RELU_BIAS), a convolution's residual add
 * (cuDNN's beta and z) and its bias and ReLU (cudnnConvolutionBiasActivation-
 * Forward, where that is documented to run: emit_conv; elsewhere a kernel of
 * their own after the call).  The rest of a fused node is a kernel reading the
 * library's result.
 *
 * At bf16 and fp16 the operands are 16-bit (a weight through its 16-bit copy),
 * the accumulation float; a matmul may write float, a convolution writes its
 * data type, converted afterwards where the result is kept in float. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int cg_conv_layout_copies(const cg_conv *c)
{
    int tensor_cores = c->dtype == IR_BF16 || c->dtype == IR_F16 || c->math == CG_MATH_TENSOR_OP;
    if (!tensor_cores || c->nhwc || (c->kind == CG_CONV_FORWARD && c->c == 1))
        return 0;
    return 3;
}

int cg_is_library(ir_op op)
{
    switch (op) {
    case IR_OP_DENSE: case IR_OP_MATMUL: case IR_OP_CONV2D: case IR_OP_DENSE_GRAD_INPUT:
    case IR_OP_DENSE_GRAD_WEIGHT: case IR_OP_CONV2D_GRAD_INPUT: case IR_OP_CONV2D_GRAD_WEIGHT:
        return 1;
    default:
        return 0;
    }
}

static int lowp(const cg_gen *G)
{
    return G->o.precision == PREC_BF16 || G->o.precision == PREC_FP16;
}

static ir_dtype half_type(const cg_gen *G) { return G->o.precision == PREC_BF16 ? IR_BF16 : IR_F16; }

/* Whether the member after the running value v is the only reader of v. */
static int only_reader(cg_gen *G, const ir_value *v, const ir_node *next)
{
    return !G->external[v->id] && G->rstart[v->id + 1] - G->rstart[v->id] == 1 &&
           G->node_at[G->readers[G->rstart[v->id]]] == next;
}

/* ---------------------------------------------------------------- cuBLASLt */

typedef struct {
    const ir_value *a, *b, *bias, *d;
} gemm_values;

/* Bytes of workspace a cuBLASLt call may use: cg_options.gemm_workspace, else
 * what NVIDIA advises: 32 MiB for Hopper (sm_90) and later, 4 MiB before.  A
 * program runs on any of its targets, so one of sm_90 or later decides. */
static int64_t gemm_workspace(const cg_gen *G)
{
    if (G->o.gemm_workspace > 0)
        return G->o.gemm_workspace;
    for (int i = 0; i < G->p->narchs; i++)
        if (atoi(G->p->archs[i] + 3) >= 90)
            return (int64_t)32 << 20;
    return (int64_t)4 << 20;
}

static void add_gemm(cg_gen *G, const ir_node *n, cg_gemm *m, const gemm_values *v,
                     const char *what)
{
    cg_step s = {.kind = CG_STEP_GEMM, .node = n, .what = what};
    m->compute = G->o.precision == PREC_TF32 ? CG_COMPUTE_32F_FAST_TF32 : CG_COMPUTE_32F;
    m->workspace_bytes = gemm_workspace(G);
    m->workspace = cg_workspace(G, m->workspace_bytes);
    m->c = m->d;
    s.u.gemm = *m;
    cg_access acc[5];
    int na = 0;
    int64_t abytes = (m->batch - 1) * m->stride_a + (m->trans_a ? m->m : m->k) * m->lda;
    int64_t bbytes = (m->batch - 1) * m->stride_b + (m->trans_b ? m->k : m->n) * m->ldb;
    int64_t dbytes = (m->batch - 1) * m->stride_c + m->n * m->ldc;
    acc[na++] = (cg_access){m->a, abytes * (int64_t)ir_dtype_size(m->type_a), 0, 0, m->type_a};
    acc[na++] = (cg_access){m->b, bbytes * (int64_t)ir_dtype_size(m->type_b), 0, 0, m->type_b};
    if (v->bias)
        acc[na++] = (cg_access){m->bias, m->m * (int64_t)ir_dtype_size(m->type_bias), 0, 0,
                                m->type_bias};
    acc[na++] = (cg_access){m->d, dbytes * (int64_t)ir_dtype_size(m->type_d), 1, 0, m->type_d};
    acc[na++] = (cg_access){m->workspace, m->workspace_bytes, 1, 0, IR_U8};
    cg_add_step(G, &s, acc, na);
}

static int emit_dense(cg_gen *G, const ir_node *const *mm, int nm)
{
    const ir_node *n = mm[0];
    const ir_value *x = n->in[0], *w = n->in[1], *b = n->nin == 3 ? n->in[2] : NULL;
    const ir_value *res = n->out[0];
    int take = 1, relu = 0;
    if (nm > 1 && mm[1]->op == IR_OP_RELU && mm[1]->in[0] == res && only_reader(G, res, mm[1])) {
        relu = 1;
        take = 2;
        res = mm[1]->out[0];
    }
    int64_t in = w->type.dims[1], out = w->type.dims[0], rows = ir_type_numel(&x->type) / in;
    ir_dtype op_t = lowp(G) ? half_type(G) : IR_F32;
    cg_gemm m;
    memset(&m, 0, sizeof m);
    m.type_a = m.type_b = op_t;
    m.a = cg_operand_as(G, w, op_t);
    m.b = cg_operand_as(G, x, op_t);
    m.type_d = cg_dtype_of(G, res);
    m.d = cg_ref_of(G, res);
    if (b) {
        m.type_bias = m.type_d;
        m.bias = cg_operand_as(G, b, m.type_bias);
    }
    m.trans_a = 1;
    m.m = out, m.n = rows, m.k = in;
    m.lda = in, m.ldb = in, m.ldc = out;
    m.batch = 1;
    m.alpha = 1;
    m.epilogue = b ? (relu ? CG_EPI_RELU_BIAS : CG_EPI_BIAS) : (relu ? CG_EPI_RELU : CG_EPI_DEFAULT);
    gemm_values v = {w, x, b, res};
    add_gemm(G, n, &m, &v, cg_pprintf(G->p, "dense%s %%%s", relu ? "+relu" : "", cg_name(res)));
    return take;
}

/* Offset in elements of operand t's matrix for batch index bi of out. */
static int64_t batch_offset(const ir_type *t, const ir_type *out, int64_t bi)
{
    int r = out->rank - 2, tr = t->rank - 2;
    int64_t off = 0, stride = t->dims[t->rank - 1] * t->dims[t->rank - 2];
    for (int i = r - 1, k = tr - 1; i >= 0; i--, k--) {
        int64_t idx = bi % out->dims[i];
        bi /= out->dims[i];
        if (k >= 0) {
            if (t->dims[k] != 1)
                off += idx * stride;
            stride *= t->dims[k];
        }
    }
    return off;
}

/* The batch stride of operand t when one stride serves every batch index (its
 * batch dims all out's, or none of them), else -1. */
static int64_t batch_stride(const ir_type *t, const ir_type *out)
{
    int64_t tb = 1, ob = 1;
    for (int i = 0; i < t->rank - 2; i++)
        tb *= t->dims[i];
    for (int i = 0; i < out->rank - 2; i++)
        ob *= out->dims[i];
    if (tb == 1)
        return 0;
    if (tb != ob)
        return -1;
    return t->dims[t->rank - 1] * t->dims[t->rank - 2];
}

static int emit_matmul(cg_gen *G, const ir_node *n)
{
    const ir_value *a = n->in[0], *b = n->in[1], *y = n->out[0];
    const ir_type *ta = &a->type, *tb = &b->type, *ty = &y->type;
    int64_t M = ta->dims[ta->rank - 2], K = ta->dims[ta->rank - 1], N = tb->dims[tb->rank - 1];
    int64_t batch = ir_type_numel(ty) / (M * N);
    ir_dtype op_t = lowp(G) ? half_type(G) : IR_F32;
    cg_gemm m;
    memset(&m, 0, sizeof m);
    m.type_a = m.type_b = op_t;
    cg_ref ra = cg_operand_as(G, b, op_t), rb = cg_operand_as(G, a, op_t);
    m.type_d = cg_dtype_of(G, y);
    cg_ref rd = cg_ref_of(G, y);
    m.m = N, m.n = M, m.k = K;
    m.lda = N, m.ldb = K, m.ldc = N;
    m.alpha = 1;
    int64_t sa = batch_stride(tb, ty), sb = batch_stride(ta, ty);
    gemm_values v = {b, a, NULL, y};
    if (sa >= 0 && sb >= 0) {
        m.a = ra, m.b = rb, m.d = rd;
        m.batch = batch;
        m.stride_a = sa, m.stride_b = sb, m.stride_c = M * N;
        add_gemm(G, n, &m, &v, cg_pprintf(G->p, "matmul %%%s", cg_name(y)));
        return 1;
    }
    /* batch dims broadcast in a way no one stride says: a call per matrix */
    m.batch = 1;
    for (int64_t bi = 0; bi < batch; bi++) {
        m.a = ra, m.b = rb, m.d = rd;
        m.a.offset += batch_offset(tb, ty, bi) * (int64_t)ir_dtype_size(op_t);
        m.b.offset += batch_offset(ta, ty, bi) * (int64_t)ir_dtype_size(op_t);
        m.d.offset += bi * M * N * (int64_t)ir_dtype_size(m.type_d);
        add_gemm(G, n, &m, &v, cg_pprintf(G->p, "matmul %%%s [%lld]", cg_name(y), (long long)bi));
    }
    return 1;
}

static int emit_dense_grad(cg_gen *G, const ir_node *n)
{
    const ir_value *dy = n->in[0], *other = n->in[1], *res = n->out[0];
    const ir_type *tdy = &dy->type;
    int64_t out = tdy->dims[tdy->rank - 1], rows = ir_type_numel(tdy) / out;
    ir_dtype op_t = lowp(G) ? half_type(G) : IR_F32;
    cg_gemm m;
    memset(&m, 0, sizeof m);
    m.type_a = m.type_b = op_t;
    m.type_d = cg_dtype_of(G, res);
    m.d = cg_ref_of(G, res);
    m.batch = 1;
    m.alpha = 1;
    gemm_values v = {other, dy, NULL, res};
    if (n->op == IR_OP_DENSE_GRAD_INPUT) {   /* D[in, rows] = W[in, out] DY[out, rows] */
        int64_t in = other->type.dims[1];
        m.a = cg_operand_as(G, other, op_t);
        m.b = cg_operand_as(G, dy, op_t);
        m.m = in, m.n = rows, m.k = out;
        m.lda = in, m.ldb = out, m.ldc = in;
    } else {                                 /* D[in, out] = X[in, rows] DY^T[rows, out] */
        int64_t in = other->type.dims[other->type.rank - 1];
        m.a = cg_operand_as(G, other, op_t);
        m.b = cg_operand_as(G, dy, op_t);
        m.trans_b = 1;
        m.m = in, m.n = out, m.k = rows;
        m.lda = in, m.ldb = out, m.ldc = in;
    }
    add_gemm(G, n, &m, &v, cg_pprintf(G->p, "%s %%%s", ir_ops[n->op].name, cg_name(res)));
    return 1;
}

/* ---------------------------------------------------------------- cuDNN */

/* Operand v of convolution s as dt, and channels-last for a channels-last
 * call (cg_operand_nhwc: as stored, if it is; copied, if not NULL, says
 * whether the copy is s's own). */
static cg_ref conv_operand(cg_gen *G, const cg_step *s, const ir_value *v, ir_dtype dt, int nhwc,
                           const char *name, int *copied)
{
    int own;
    if (!nhwc && G->nhwc[v->id]) { /* stored channels-last, for an NCHW call */
        const int64_t *d = v->type.dims;
        cg_ref t = cg_workspace(G, ir_type_numel(&v->type) * (int64_t)ir_dtype_size(dt));
        cg_emit_transpose(G, s->node, cg_pprintf(G->p, "%s: %s to NCHW", s->what, name),
                          cg_ref_of(G, v), G->dtype[v->id], t, dt, d[0], d[2] * d[3], d[1]);
        *(copied ? copied : &own) = 1;
        return t;
    }
    if (!nhwc)
        return cg_operand_as(G, v, dt);
    return cg_operand_nhwc(G, s->node, cg_pprintf(G->p, "%s: %s channels-last", s->what, name),
                           v, dt, copied ? copied : &own);
}

/* Whether the bias of convolution n (its result y, no ReLU, no residual)
 * may be left to the batchnorm_train that reads y next: its first pass over
 * y adds the bias in place, one launch and one pass over y fewer (the bias
 * kernel's).  y holds the bias once that kernel ran, for every later reader
 * (the batchnorm's gradient). */
static int bias_folds(cg_gen *G, const ir_node *n, const ir_value *y)
{
    const ir_node *next = n->next;
    while (next && next->device != G->dev)
        next = next->next;
    return next && next->op == IR_OP_BATCHNORM_TRAIN && next->in[0] == y && !G->init &&
           !G->weight[next->out[0]->id];
}

static int emit_conv(cg_gen *G, const ir_node *const *mm, int nm)
{
    const ir_node *n = mm[0];
    cg_conv c;
    memset(&c, 0, sizeof c);
    const int64_t *st = ir_attr_ints(n, "stride", NULL), *pd = ir_attr_ints(n, "pad", NULL),
                  *dl = ir_attr_ints(n, "dilation", NULL);
    c.groups = (int)ir_attr_int(n, "groups");
    for (int i = 0; i < 2; i++)
        c.stride[i] = (int)st[i], c.pad[i] = (int)pd[i], c.dilation[i] = (int)dl[i];
    const ir_type *tx, *tw, *ty;
    const ir_value *res = n->out[0];
    if (n->op == IR_OP_CONV2D)
        tx = &n->in[0]->type, tw = &n->in[1]->type, ty = &n->out[0]->type;
    else if (n->op == IR_OP_CONV2D_GRAD_INPUT)
        tx = &n->out[0]->type, tw = &n->in[1]->type, ty = &n->in[0]->type;
    else
        tx = &n->in[1]->type, tw = &n->out[0]->type, ty = &n->in[0]->type;
    c.n = tx->dims[0], c.c = tx->dims[1], c.h = tx->dims[2], c.w = tx->dims[3];
    c.k = tw->dims[0], c.r = tw->dims[2], c.s = tw->dims[3];
    c.p = ty->dims[2], c.q = ty->dims[3];
    c.dtype = lowp(G) ? half_type(G) : IR_F32;
    c.math = G->o.precision == PREC_FP32 ? CG_MATH_FMA : CG_MATH_TENSOR_OP;
    c.alpha = 1;
    int take = 1;
    const ir_value *z = NULL;
    if (n->op == IR_OP_CONV2D) {
        c.kind = CG_CONV_FORWARD;
        const ir_value *run = res;
        if (take < nm && mm[take]->op == IR_OP_ADD && only_reader(G, run, mm[take])) {
            const ir_node *a = mm[take];
            const ir_value *other = a->in[0] == run ? a->in[1] : a->in[0];
            if (ir_type_eq(&other->type, &run->type) && other != run &&
                !(other->def && other->def->op == IR_OP_CONST)) {
                z = other;
                run = a->out[0];
                take++;
            }
        }
        if (take < nm && mm[take]->op == IR_OP_RELU && mm[take]->in[0] == run &&
            only_reader(G, run, mm[take])) {
            c.relu = 1;
            run = mm[take]->out[0];
            take++;
        }
        res = run;
    } else {
        c.kind = n->op == IR_OP_CONV2D_GRAD_INPUT ? CG_CONV_BACKWARD_DATA : CG_CONV_BACKWARD_FILTER;
    }
    /* the operands in the data type (and channels-last with nhwc); the result
       in place, or as dt (and channels-last) in the workspace and moved after */
    ir_dtype dt = c.dtype, out_dt = cg_dtype_of(G, res);
    int64_t es = (int64_t)ir_dtype_size(dt);
    int64_t xb = c.n * c.c * c.h * c.w * es, wb = c.k * (c.c / c.groups) * c.r * c.s * es,
            yb = c.n * c.k * c.p * c.q * es;
    int igemm = cg_conv_of(&G->o, n) == CG_CONV_IGEMM && cg_igemm_fits(&c);
    int nhwc = !igemm && cg_conv_nhwc(G, n, res, z);
    /* a result stored the other way from the call's: transposed after */
    int back = !cg_nhwc_same(&res->type) && G->nhwc[res->id] != nhwc;
    /* cudnnConvolutionBiasActivationForward is deprecated, and documented for
       fewer cases than cudnnConvolutionForward: its IDENTITY activation (a
       bias without a ReLU) runs with IMPLICIT_PRECOMP_GEMM alone, and its data
       types are FLOAT_CONFIG (fp32) and the half configs, NCHW; bf16 and NHWC
       are not among them.  So cuDNN takes the bias and ReLU only with a ReLU,
       at fp32 or fp16, NCHW; elsewhere the call is cudnnConvolutionForward (z
       through beta) and a kernel adds the bias and applies the ReLU in place,
       before the result moves.  A generated kernel (igemm) takes them all. */
    int relu = c.relu, bias = n->op == IR_OP_CONV2D && n->nin == 3;
    int fused = relu && !nhwc && (dt == IR_F32 || dt == IR_F16);
    int act_kernel = !igemm && !fused && (relu || bias);
    if (act_kernel)
        c.relu = 0;
    static const char *const what[] = {"conv2d", "conv2d_grad_input", "conv2d_grad_weight"};
    cg_step s = {.kind = CG_STEP_CONV, .node = n};
    s.what = cg_pprintf(G->p, "%s%s%s %%%s", what[c.kind], z ? "+add" : "", relu ? "+relu" : "",
                        cg_name(res));
    /* a generated kernel writes the result as it is stored; cuDNN writes dt */
    int moved = igemm ? 0 : back || out_dt != dt;
    int z_copied = 0, staged = 0;
    cg_access acc[7];
    int na = 0;
    if (n->op == IR_OP_CONV2D) {
        c.x = conv_operand(G, &s, n->in[0], dt, nhwc, "x", NULL);
        c.wt = conv_operand(G, &s, n->in[1], dt, nhwc, "w", NULL);
        if (bias && !act_kernel) {
            c.has_bias = 1;
            c.bias = cg_operand_as(G, n->in[2], dt);
            acc[na++] = (cg_access){c.bias, c.k * es, 0, 0, dt};
        }
        if (z) {
            c.has_z = 1;
            c.beta = 1;
            c.z = conv_operand(G, &s, z, dt, nhwc, "z", &z_copied);
            acc[na++] = (cg_access){c.z, yb, 0, 1, dt};
        }
        /* cuDNN may write y over z: over z's channels-last copy, if it has one */
        c.y = !moved ? cg_ref_of(G, res) : z_copied ? c.z : cg_workspace(G, yb);
        acc[na++] = (cg_access){c.x, xb, 0, 0, dt};
        acc[na++] = (cg_access){c.wt, wb, 0, 0, dt};
        acc[na++] = (cg_access){c.y, yb, 1, 1, dt};
    } else if (n->op == IR_OP_CONV2D_GRAD_INPUT) {
        c.y = conv_operand(G, &s, n->in[0], dt, nhwc, "dy", NULL);
        c.wt = conv_operand(G, &s, n->in[1], dt, nhwc, "w", NULL);
        c.x = moved ? cg_workspace(G, xb) : cg_ref_of(G, res);
        acc[na++] = (cg_access){c.y, yb, 0, 0, dt};
        acc[na++] = (cg_access){c.wt, wb, 0, 0, dt};
        acc[na++] = (cg_access){c.x, xb, 1, 0, dt};
    } else {
        c.y = conv_operand(G, &s, n->in[0], dt, nhwc, "dy", NULL);
        c.x = conv_operand(G, &s, n->in[1], dt, nhwc, "x", NULL);
        /* a float gradient in 16 bits until one launch converts it with the
           others (cg_grad_stage; from KRSC where the call is channels-last),
           not a cast after each call */
        staged = moved && out_dt != dt && !G->init;
        c.wt = staged ? cg_grad_stage(G, res, dt, back && nhwc) : moved ? cg_workspace(G, wb)
                                                                : cg_ref_of(G, res);
        acc[na++] = (cg_access){c.y, yb, 0, 0, dt};
        acc[na++] = (cg_access){c.x, xb, 0, 0, dt};
        acc[na++] = (cg_access){c.wt, wb, 1, 0, dt};
    }
    if (igemm) {
        cg_emit_igemm(G, n, &c, out_dt, s.what);
        return take;
    }
    c.nhwc = nhwc;
    c.deterministic = G->o.deterministic;
    c.workspace_bytes = G->o.conv_workspace > 0 ? G->o.conv_workspace : (int64_t)64 << 20;
    c.workspace = cg_workspace(G, c.workspace_bytes);
    acc[na++] = (cg_access){c.workspace, c.workspace_bytes, 1, 0, IR_U8};
    s.u.conv = c;
    cg_add_step(G, &s, acc, na);
    static const char *const result[] = {"y", "dx", "dw"};
    cg_ref written = c.kind == CG_CONV_FORWARD ? c.y : c.kind == CG_CONV_BACKWARD_DATA ? c.x : c.wt;
    if (act_kernel && bias && !relu && !moved && !z && take == 1 && bias_folds(G, n, res)) {
        G->bias_pending = res;
        G->bias_of = n->in[2];
    } else if (act_kernel) { /* the bias in its own type (a parameter's float), no 16-bit copy */
        cg_ref b = bias ? cg_ref_of(G, n->in[2]) : (cg_ref){CG_WORKSPACE, 0};
        cg_emit_bias_relu(G, n, cg_pprintf(G->p, "%s: %s%s%s", s.what, bias ? "bias" : "",
                                           bias && relu ? " and " : "", relu ? "ReLU" : ""),
                          written, dt, bias ? &b : NULL, bias ? cg_dtype_of(G, n->in[2]) : dt,
                          c.n, c.k, c.p * c.q, nhwc, relu);
    }
    const int64_t *rd = res->type.dims;
    if (moved && back && !staged)
        cg_emit_transpose(G, n, cg_pprintf(G->p, "%s: %s back", s.what, result[c.kind]), written,
                          dt, cg_ref_of(G, res), out_dt, rd[0], nhwc ? rd[2] * rd[3] : rd[1],
                          nhwc ? rd[1] : rd[2] * rd[3]);
    else if (moved && !staged)
        cg_emit_cast(G, n, cg_pprintf(G->p, "%%%s to %s", res->name, ir_dtype_name(out_dt)),
                     written, dt, cg_ref_of(G, res), out_dt, ir_type_numel(&res->type));
    return take;
}

int cg_emit_library(cg_gen *G, const ir_node *const *m, int nm)
{
    switch (m[0]->op) {
    case IR_OP_DENSE: return emit_dense(G, m, nm);
    case IR_OP_MATMUL: return emit_matmul(G, m[0]);
    case IR_OP_DENSE_GRAD_INPUT: case IR_OP_DENSE_GRAD_WEIGHT: return emit_dense_grad(G, m[0]);
    default: return emit_conv(G, m, nm);
    }
}
