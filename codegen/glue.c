/* The program's own kernels, made for no IR node of their own: casts and
 * shadows, a bias and ReLU after a library call, layout transposes, masked
 * copies, the loss scaler's update, unpacking gathered shards. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kb.h"

/* ---------------------------------------------------------------- the program's own */

void cg_emit_casts(cg_gen *G, const ir_node *by, const char *what, const cg_cast *c, int n)
{
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %d tensors to other types, blocks of 256 elements per tensor */\n"
                 "GNC_KERNEL void __launch_bounds__(256) @K@(", n);
    for (int i = 0; i < n; i++)
        cg_sb_printf(&t, "%sconst %s *__restrict__ s%d, %s *__restrict__ d%d", i ? ", " : "",
                     cg_ctype(c[i].sdt), i, cg_ctype(c[i].ddt), i);
    cg_sb_printf(&t, ")\n{\n");
    int64_t blocks = 0;
    for (int i = 0; i < n; i++) {
        int64_t b = kb_div_up(c[i].n, 256);
        long long ch = (long long)c[i].c, rs = (long long)c[i].rs;
        /* element i of the result, and where the operand holds it: a filter
           [k][c][rs] read KCRS into KRSC [k][rs][c], or back */
        char from[160];
        if (c[i].perm == CG_PERM_KRSC)
            snprintf(from, sizeof from, "i / %lld * %lld + i %% %lld * %lld + i / %lld %% %lld",
                     ch * rs, ch * rs, ch, rs, ch, rs);
        else if (c[i].perm == CG_PERM_KCRS)
            snprintf(from, sizeof from, "i / %lld * %lld + i %% %lld * %lld + i / %lld %% %lld",
                     ch * rs, ch * rs, rs, ch, rs, ch);
        else
            snprintf(from, sizeof from, "i");
        cg_sb_printf(&t, "    if (blockIdx.x < %lld) {%s\n"
                     "        const i64 i = ((i64)blockIdx.x - %lld) * 256 + threadIdx.x;\n"
                     "        if (i < %lld)\n            st(d%d, i, ld(s%d, %s));\n"
                     "        return;\n    }\n", (long long)(blocks + b),
                     c[i].perm == CG_PERM_KRSC ? " /* KCRS to KRSC */"
                     : c[i].perm == CG_PERM_KCRS ? " /* KRSC to KCRS */" : "",
                     (long long)blocks, (long long)c[i].n, i, i, from);
        blocks += b;
    }
    cg_sb_printf(&t, "}\n");
    if (!cg_grid_fits(G, by, what, blocks, 1, 1)) {
        cg_sb_free(&t);
        return;
    }
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, "multi_cast", by, 1, 256);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = by, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)blocks, l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 2 * n;
    l->args = cg_palloc(G->p, (size_t)(2 * n) * sizeof *l->args);
    cg_access *acc = base_xmalloc((size_t)(2 * n) * sizeof *acc);
    for (int i = 0; i < n; i++) {
        l->args[2 * i] = (cg_arg){CG_ARG_BUFFER, c[i].src, 0, 0};
        l->args[2 * i + 1] = (cg_arg){CG_ARG_BUFFER, c[i].dst, 0, 0};
        acc[2 * i] = (cg_access){c[i].src, c[i].n * (int64_t)ir_dtype_size(c[i].sdt), 0,
                                 c[i].perm == CG_PERM_NONE, c[i].sdt};
        acc[2 * i + 1] = (cg_access){c[i].dst, c[i].n * (int64_t)ir_dtype_size(c[i].ddt), 1, 1,
                                     c[i].ddt};
    }
    cg_add_step(G, &st, acc, 2 * n);
    base_free(acc);
}

/* n elements of one type into another: one kernel per pair of types, n an argument. */
void cg_emit_cast(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                  cg_ref dst, ir_dtype ddt, int64_t numel)
{
    int64_t vec = numel % 4 == 0 ? 4 : 1;
    if (!cg_grid_fits(G, n, what, kb_div_up(numel / vec, 256), 1, 1))
        return;
    const char *s = cg_ctype(sdt), *d = cg_ctype(ddt);
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %s elements to %s, 4 a thread (n a multiple of 4) or 1 */\n", s, d);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, "
                 "%s *__restrict__ dst, i64 n, i64 vec)\n{\n", s, d);
    cg_sb_printf(&t, "    const i64 e = ((i64)blockIdx.x * 256 + threadIdx.x) * vec;\n"
                     "    if (e >= n)\n        return;\n"
                     "    if (vec == 4) {\n"
                     "        float v[4];\n        ldv<4>(src, e, v);\n        stv<4>(dst, e, v);\n"
                     "    } else {\n        st(dst, e, ld(src, e));\n    }\n}\n");
    char base[64];
    snprintf(base, sizeof base, "cast_%s_to_%s", ir_dtype_name(sdt), ir_dtype_name(ddt));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 1, 256);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)kb_div_up(numel / vec, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 4;
    l->args = cg_palloc(G->p, 4 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    l->args[2] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, numel, 0};
    l->args[3] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, vec, 0};
    cg_access acc[2] = {{src, numel * (int64_t)ir_dtype_size(sdt), 0, 1, sdt},
                        {dst, numel * (int64_t)ir_dtype_size(ddt), 1, 1, ddt}};
    cg_add_step(G, &st, acc, 2);
}

/* A convolution's bias and ReLU as a kernel of their own, where library.c
 * leaves them out of the cuDNN call: y[i] = relu(y[i] + bias[channel of i]) in
 * place, 4 elements a thread where the count allows, the channel by
 * constants of the shape in NCHW or NHWC. */
void cg_emit_bias_relu(cg_gen *G, const ir_node *n, const char *what, cg_ref y, ir_dtype ydt,
                       const cg_ref *bias, ir_dtype bdt, int64_t images, int64_t k, int64_t px,
                       int nhwc, int relu)
{
    int64_t numel = images * k * px, vec = numel % 4 == 0 ? 4 : 1;
    if (!cg_grid_fits(G, n, what, kb_div_up(numel / vec, 256), 1, 1))
        return;
    const char *it = kb_index_type(numel), *yt = cg_ctype(ydt);
    cg_sb v = {0}, t = {0}, head = {0};
    if (bias && nhwc)
        cg_sb_printf(&v, "a + ld(bias, i %% %lld)", (long long)k);
    else if (bias)
        cg_sb_printf(&v, "a + ld(bias, i / %lld %% %lld)", (long long)px, (long long)k);
    else
        cg_sb_printf(&v, "a");
    cg_sb_printf(&head, "/* %s%s%s of a cuDNN convolution, in place on its %s result (%lld "
                 "images, %lld channels, %lld pixels): library.c says why not in the call\n",
                 bias ? "the bias" : "", bias && relu ? " and " : "", relu ? "the ReLU" : "",
                 nhwc ? "NHWC" : "NCHW", (long long)images, (long long)k, (long long)px);
    cg_describe_node(&head, n);
    cg_sb_put(&head, " */\n", 4);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(%s *__restrict__ y", yt);
    if (bias)
        cg_sb_printf(&t, ", const %s *__restrict__ bias", cg_ctype(bdt));
    cg_sb_printf(&t, ")\n{\n    const %s e = ((%s)blockIdx.x * 256 + threadIdx.x) * %lld;\n"
                 "    if (e >= %lld)\n        return;\n", it, it, (long long)vec,
                 (long long)numel);
    cg_sb_printf(&t, "    auto out = [&](%s i, float a) -> float { return %s%s%s; };\n", it,
                 relu ? "ar_relu(" : "", v.s, relu ? ")" : "");
    if (vec == 4)
        cg_sb_printf(&t, "    float v[4];\n    ldv<4>(y, e, v);\n#pragma unroll\n"
                     "    for (int j = 0; j < 4; j++)\n        v[j] = out(e + j, v[j]);\n"
                     "    stv<4>(y, e, v);\n}\n");
    else
        cg_sb_printf(&t, "    st(y, e, out(e, ld(y, e)));\n}\n");
    char base[64];
    snprintf(base, sizeof base, "conv_%s%s%s_%s", bias ? "bias" : "", bias && relu ? "_" : "",
             relu ? "relu" : "", nhwc ? "nhwc" : "nchw");
    int kernel = cg_add_kernel(G, head.s, t.s, NULL, 0, base, n, 1, 256);
    cg_sb_free(&v);
    cg_sb_free(&t);
    cg_sb_free(&head);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)kb_div_up(numel / vec, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = bias ? 2 : 1;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, y, 0, 0};
    int64_t ybytes = numel * (int64_t)ir_dtype_size(ydt);
    cg_access acc[3] = {{y, ybytes, 0, 1, ydt}, {y, ybytes, 1, 1, ydt}};
    if (bias) {
        l->args[1] = (cg_arg){CG_ARG_BUFFER, *bias, 0, 0};
        acc[2] = (cg_access){*bias, k * (int64_t)ir_dtype_size(bdt), 0, 0, bdt};
    }
    cg_add_step(G, &st, acc, bias ? 3 : 2);
}

/* batch matrices of rows x cols elements from src (sdt) transposed into dst
 * (ddt): prelude.cuh's transpose_tiles, one kernel per shape and types. */
void cg_emit_transpose(cg_gen *G, const ir_node *n, const char *what, cg_ref src, ir_dtype sdt,
                       cg_ref dst, ir_dtype ddt, int64_t batch, int64_t rows, int64_t cols)
{
    /* a matrix's rows and columns are int template arguments; each matrix
       starts at an i64 offset */
    if (!cg_grid_fits(G, n, what, kb_div_up(cols, 32), kb_div_up(rows, 32), batch))
        return;
    if (rows > CG_INT_ELEMENTS || cols > CG_INT_ELEMENTS) {
        cg_fail(G, n, "%%%s, %s: %lld x %lld matrices are over the int indices of a transpose",
                n->out[0]->name, what, (long long)rows, (long long)cols);
        return;
    }
    const char *s = cg_ctype(sdt), *d = cg_ctype(ddt);
    cg_sb t = {0};
    cg_sb_printf(&t, "/* %lld matrices of %lld x %lld %s elements transposed to %s */\n",
                 (long long)batch, (long long)rows, (long long)cols, s, d);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, "
                 "%s *__restrict__ dst)\n{\n    transpose_tiles<%lld, %lld>(src, dst);\n}\n",
                 s, d, (long long)rows, (long long)cols);
    char base[64];
    snprintf(base, sizeof base, "transpose_%s_to_%s", ir_dtype_name(sdt), ir_dtype_name(ddt));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 0, 256);
    G->p->kernels[kernel].layout = 1;
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n, .what = what};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)kb_div_up(cols, 32), l->grid[1] = (unsigned)kb_div_up(rows, 32);
    l->grid[2] = (unsigned)batch;
    l->block[0] = 32, l->block[1] = 8, l->block[2] = 1;
    l->nargs = 2;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    int64_t numel = batch * rows * cols;
    cg_access acc[2] = {{src, numel * (int64_t)ir_dtype_size(sdt), 0, 0, sdt},
                        {dst, numel * (int64_t)ir_dtype_size(ddt), 1, 0, ddt}};
    cg_add_step(G, &st, acc, 2);
}

void cg_emit_masked_copy(cg_gen *G, const ir_value *target, const ir_value *source)
{
    const char *t =
        "/* an update of an fp16 step: the optimizer's result, unless a gradient overflowed */\n"
        "GNC_KERNEL void __launch_bounds__(256) @K@(const float *__restrict__ src, "
        "float *__restrict__ dst, const gnc_scaler *__restrict__ scaler, i64 n)\n{\n"
        "    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x;\n"
        "    if (i < n && !scaler->found_inf)\n        dst[i] = src[i];\n}\n";
    int64_t numel = ir_type_numel(&target->type);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = source->def};
    st.what = cg_pprintf(G->p, "update %%%s = %%%s unless a gradient overflowed", cg_name(target),
                         cg_name(source));
    if (!cg_grid_fits(G, source->def, st.what, kb_div_up(numel, 256), 1, 1))
        return;
    int kernel = cg_add_kernel(G, "", t, NULL, 0, "update_unless_overflow", source->def, 1, 256);
    cg_ref src = cg_ref_of(G, source), dst = cg_ref_of(G, target);
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)kb_div_up(numel, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 4;
    l->args = cg_palloc(G->p, 4 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, src, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, dst, 0, 0};
    l->args[2] = (cg_arg){CG_ARG_BUFFER, G->D->loss_scale, 0, 0};
    l->args[3] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, numel, 0};
    cg_access acc[3] = {{src, numel * 4, 0, 1, IR_F32}, {dst, numel * 4, 1, 1, IR_F32},
                        {G->D->loss_scale, 16, 0, 0, IR_U8}};
    cg_add_step(G, &st, acc, 3);
}

int cg_local_reduce_kernel(cg_gen *G, ir_dtype t, int max)
{
    cg_sb b = {0};
    const char *ct = cg_ctype(t);
    cg_sb_printf(&b, "/* a collective between devices that share a GPU, reduced without NCCL: "
                 "acc %s= x */\n"
                 "GNC_KERNEL void __launch_bounds__(256) @K@(%s *__restrict__ acc, "
                 "const %s *__restrict__ x, i64 n)\n{\n"
                 "    const i64 i = (i64)blockIdx.x * 256 + threadIdx.x;\n"
                 "    if (i < n) {\n"
                 "        const auto a = ld(acc, i), v = ld(x, i);\n"
                 "        st(acc, i, %s);\n    }\n}\n",
                 max ? "max" : "+", ct, ct, max ? "a > v ? a : v" : "a + v");
    char base[64];
    snprintf(base, sizeof base, "local_%s_%s", max ? "max" : "sum", ir_dtype_name(t));
    int k = cg_add_kernel(G, "", b.s, NULL, 0, base, NULL, 1, 256);
    cg_sb_free(&b);
    return k;
}

void cg_emit_scaler_update(cg_gen *G)
{
    const cg_loss_scale *ls = &G->p->loss_scale;
    kb k;
    memset(&k, 0, sizeof k);
    cg_sb t = {0};
    cg_sb_printf(&t,
                 "/* the loss scale after a step: x%g after an overflow, x%g after %d good steps */\n"
                 "GNC_KERNEL void __launch_bounds__(32) @K@(gnc_scaler *__restrict__ scaler)\n{\n"
                 "    if (threadIdx.x != 0)\n        return;\n"
                 "    if (scaler->found_inf) {\n"
                 "        scaler->scale *= %s;\n        scaler->good_steps = 0;\n"
                 "    } else if (++scaler->good_steps == %d) {\n"
                 "        scaler->scale *= %s;\n        scaler->good_steps = 0;\n    }\n"
                 "    scaler->inv_scale = 1.0f / scaler->scale;\n"
                 "    scaler->found_inf = 0;\n}\n",
                 ls->backoff, ls->growth, ls->interval, kb_flit(&k, ls->backoff), ls->interval,
                 kb_flit(&k, ls->growth));
    kb_free(&k);
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, "loss_scale_update", NULL, 0, 32);
    cg_sb_free(&t);
    cg_step st = {.kind = CG_STEP_KERNEL, .what = "the loss scale's update"};
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = l->grid[1] = l->grid[2] = 1;
    l->block[0] = 32, l->block[1] = l->block[2] = 1;
    l->nargs = 1;
    l->args = cg_palloc(G->p, sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, G->D->loss_scale, 0, 0};
    cg_access acc = {G->D->loss_scale, 16, 1, 0, IR_U8};
    cg_add_step(G, &st, &acc, 1);
}

/* An all_gather along axis > 0 gathers rank-major into staging: unpack it
 * into the result.  A reduce_scatter along axis > 0 packs its operand
 * rank-major into staging first (pack).  Operand j's slice for rank r goes to
 * staging[r * block + off ...]: block is one rank's share of every operand
 * (numel / group size for one operand, where off is 0), so that a
 * reduce_scatter of several operands packs them all into one buffer. */
void cg_emit_gather_unpack(cg_gen *G, const ir_node *n, int j, cg_ref staging, int64_t block,
                           int64_t off, int pack)
{
    const ir_value *whole = pack ? n->in[j] : n->out[j];
    int ng;
    ir_attr_ints(n, "group", &ng);
    int64_t outer, len, inner;
    kb_around(&whole->type, (int)ir_attr_int(n, "axis"), &outer, &len, &inner);
    int64_t part = len / ng, numel = ir_type_numel(&whole->type);
    ir_dtype dt = cg_dtype_of(G, whole);
    const char *ct = cg_ctype(dt), *it = kb_index_type(block * ng);
    cg_step st = {.kind = CG_STEP_KERNEL, .node = n};
    st.what = cg_pprintf(G->p, "%s %%%s", pack ? "pack for" : "unpack", cg_name(n->out[j]));
    if (!cg_grid_fits(G, n, st.what, kb_div_up(numel, 256), 1, 1))
        return;
    cg_sb t = {0};
    cg_sb_printf(&t,
                 "/* %s along axis %lld through rank-major staging: [%lld][%lld, %lld, %lld] %s "
                 "[%lld, %lld x %lld, %lld] */\n", ir_ops[n->op].name,
                 (long long)ir_attr_int(n, "axis"), (long long)ng, (long long)outer,
                 (long long)part, (long long)inner, pack ? "from" : "into", (long long)outer,
                 (long long)ng, (long long)part, (long long)inner);
    cg_sb_printf(&t, "GNC_KERNEL void __launch_bounds__(256) @K@(const %s *__restrict__ src, %s "
                 "*__restrict__ dst)\n{\n", ct, ct);
    cg_sb_printf(&t, "    const %s i = (%s)blockIdx.x * 256 + threadIdx.x; /* in the whole */\n"
                 "    if (i >= %lld)\n        return;\n", it, it, (long long)numel);
    cg_sb_printf(&t, "    const %s u = i / %lld, pos = i / %lld %% %lld, r = pos / %lld, "
                 "q = pos %% %lld, w = i %% %lld;\n", it, (long long)(len * inner),
                 (long long)inner, (long long)len, (long long)part, (long long)part,
                 (long long)inner);
    if (n->nin == 1)
        cg_sb_printf(&t, "    const %s s = ((r * %lld + u) * %lld + q) * %lld + w; "
                     "/* in staging */\n", it, (long long)outer, (long long)part, (long long)inner);
    else /* operand j of a bucket: its place in each rank's block */
        cg_sb_printf(&t, "    const %s s = r * %lld + %lld + (u * %lld + q) * %lld + w; "
                     "/* in staging */\n", it, (long long)block, (long long)off,
                     (long long)part, (long long)inner);
    cg_sb_printf(&t, pack ? "    dst[s] = src[i];\n}\n" : "    dst[i] = src[s];\n}\n");
    const char *base = cg_pprintf(G->p, "%s__%s", pack ? "pack" : "unpack", cg_name(n->out[j]));
    int kernel = cg_add_kernel(G, "", t.s, NULL, 0, base, n, 0, 256);
    cg_sb_free(&t);
    cg_ref w = cg_ref_of(G, whole);
    cg_launch *l = &st.u.launch;
    l->kernel = kernel;
    l->grid[0] = (unsigned)kb_div_up(numel, 256), l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256, l->block[1] = l->block[2] = 1;
    l->nargs = 2;
    l->args = cg_palloc(G->p, 2 * sizeof *l->args);
    l->args[0] = (cg_arg){CG_ARG_BUFFER, pack ? w : staging, 0, 0};
    l->args[1] = (cg_arg){CG_ARG_BUFFER, pack ? staging : w, 0, 0};
    /* a bucket's operand lands in every rank's block: the whole staging */
    int64_t es = (int64_t)ir_dtype_size(dt), bytes = numel * es;
    int64_t staged = n->nin > 1 ? block * ng * es : bytes;
    cg_access acc[2] = {{l->args[0].buf, pack ? bytes : staged, 0, 0, dt},
                        {l->args[1].buf, pack ? staged : bytes, 1, 0, dt}};
    cg_add_step(G, &st, acc, 2);
}
