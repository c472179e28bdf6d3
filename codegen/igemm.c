/* Convolutions as generated implicit-GEMM kernels (cg_options.conv =
 * CG_CONV_IGEMM, `gnc compile --conv igemm`), the alternative to cuDNN.
 *
 * Each of a convolution's three forms is a matrix product per group g,
 * C[m][j] = sum over k of A(m, k) B(k, j), whose operands are read from the
 * tensors where they lie (no im2col buffer):
 *
 *   forward          m = (n, p, q)   j = k out    k = (c, r, s)   A = x, B = w
 *   backward data    m = (n, h, w)   j = c in     k = (k, r, s)   A = dy, B = w
 *   backward filter  m = k out       j = (c, r, s)  k = (n, p, q) A = dy, B = x
 *
 * This file writes, per convolution, a problem struct (the sizes as
 * constants, the gathers a() and b(), the epilogue out()) and a kernel that
 * hands it to the igemm template of codegen/prelude.cuh, which tiles the
 * product 64 x 64 x 16 on fp32 FMAs (fp32) or the tensor cores through wmma
 * (tf32, bf16, fp16).  A product with too few tiles to fill the GPU splits
 * its k over blocks; a second launch of the same kernel adds the parts in a
 * fixed order, so results are the same bits on every run.
 *
 * Backward data with a stride reads dy only at the taps that land on a
 * multiple of the stride; the others are zeros it multiplies anyway (a
 * quarter of the work is useful at stride 2).  cuDNN does better there: the
 * choice between them is measured (docs/codegen.md). */
#include <stdint.h>
#include <string.h>

#include "internal.h"

enum { TILE_M = 64, TILE_N = 64, TILE_K = 16, THREADS = 256 };

/* Blocks that keep a GPU of ~132 SMs busy; a product with fewer tiles splits k. */
enum { WANT_BLOCKS = 264, MIN_STEPS_PER_PART = 8 };

static int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

int cg_igemm_fits(const cg_conv *c)
{
    int64_t x = c->n * c->c * c->h * c->w, w = c->k * (c->c / c->groups) * c->r * c->s,
            y = c->n * c->k * c->p * c->q;
    /* the grid's y counts the tiles along j, its z the groups times the parts
       of k: at most max(groups, groups + WANT_BLOCKS), as only a product of
       fewer than WANT_BLOCKS tiles (groups included) splits */
    int64_t j = c->kind == CG_CONV_FORWARD ? c->k / c->groups
              : c->kind == CG_CONV_BACKWARD_DATA ? c->c / c->groups
                                                 : (c->c / c->groups) * c->r * c->s;
    return x <= CG_INT_ELEMENTS && w <= CG_INT_ELEMENTS && y <= CG_INT_ELEMENTS &&
           div_up(j, TILE_N) <= 65535 && c->groups + (int64_t)WANT_BLOCKS <= 65535;
}

/* "p * 2 - 1 + r * 2": a tap's input row from an output row, or back */
static void lin(cg_sb *b, const char *v, int mul, int add, const char *u, int umul)
{
    cg_sb_printf(b, "%s", v);
    if (mul != 1)
        cg_sb_printf(b, " * %d", mul);
    if (add)
        cg_sb_printf(b, " %c %d", add < 0 ? '-' : '+', add < 0 ? -add : add);
    cg_sb_printf(b, " %c %s", umul < 0 ? '-' : '+', u);
    if (umul != 1 && umul != -1)
        cg_sb_printf(b, " * %d", umul < 0 ? -umul : umul);
}

/* x at image n, channel c of group g, under output pixel (p, q) at tap
 * (r, s): 0 in the padding. */
static void read_x(cg_sb *b, const cg_conv *c)
{
    cg_sb_printf(b, "        const int ih = ");
    lin(b, "p", c->stride[0], -c->pad[0], "r", c->dilation[0]);
    cg_sb_printf(b, ", iw = ");
    lin(b, "q", c->stride[1], -c->pad[1], "s", c->dilation[1]);
    cg_sb_printf(b, ";\n        if ((unsigned)ih >= %lldu || (unsigned)iw >= %lldu)\n"
                    "            return 0.0f;\n", (long long)c->h, (long long)c->w);
    cg_sb_printf(b, "        return ld(x, ((n * %lld + g * %lld + c) * %lld + ih) * %lld + iw);\n",
                 (long long)c->c, (long long)(c->c / c->groups), (long long)c->h, (long long)c->w);
}

void cg_emit_igemm(cg_gen *G, const ir_node *n, const cg_conv *c, ir_dtype out_dt,
                   const char *what)
{
    const long long N = c->n, C = c->c, H = c->h, W = c->w, K = c->k, R = c->r, S = c->s,
                    P = c->p, Q = c->q, groups = c->groups, CG = C / groups, KG = K / groups;
    int mode = (int)G->o.precision;          /* fp32, tf32, bf16, fp16: 0 .. 3 */
    long long gm, gn, gk;
    int mfast = c->kind != CG_CONV_BACKWARD_FILTER;
    if (c->kind == CG_CONV_FORWARD)
        gm = N * P * Q, gn = KG, gk = CG * R * S;
    else if (c->kind == CG_CONV_BACKWARD_DATA)
        gm = N * H * W, gn = CG, gk = KG * R * S;
    else
        gm = KG, gn = CG * R * S, gk = N * P * Q;
    int64_t tiles = div_up(gm, TILE_M) * div_up(gn, TILE_N) * groups;
    int64_t split = 1, steps = div_up(gk, TILE_K);
    if (tiles < WANT_BLOCKS) {
        split = div_up(WANT_BLOCKS, tiles);
        if (split > steps / MIN_STEPS_PER_PART)
            split = steps / MIN_STEPS_PER_PART;
        if (split < 1)
            split = 1;
    }
    const char *t = cg_ctype(c->dtype), *to = cg_ctype(out_dt);
    static const char *const how[] = {"fp32 FMA", "TF32 tensor cores", "bf16 tensor cores",
                                      "fp16 tensor cores"};
    static const char *const form[] = {"m = (n, p, q), j = k, k = (c, r, s)",
                                       "m = (n, h, w), j = c, k = (k, r, s)",
                                       "m = k, j = (c, r, s), k = (n, p, q)"};

    cg_sb head = {0}, b = {0};
    cg_sb_printf(&head, "/* %s as an implicit GEMM on %s: %s\n", what, how[mode], form[c->kind]);
    cg_describe_node(&head, n);
    cg_sb_put(&head, " */\n", 4);

    /* the problem: members, sizes */
    int fwd = c->kind == CG_CONV_FORWARD, bwd_data = c->kind == CG_CONV_BACKWARD_DATA;
    cg_sb_printf(&b, "struct @K@_p {\n");
    if (fwd)
        cg_sb_printf(&b, "    const %s *x, *wt;\n    %s *y;\n", t, to);
    else if (bwd_data)
        cg_sb_printf(&b, "    const %s *dy, *wt;\n    %s *dx;\n", t, to);
    else
        cg_sb_printf(&b, "    const %s *dy, *x;\n    %s *dw;\n", t, to);
    if (c->has_bias)
        cg_sb_printf(&b, "    const %s *bias;\n", t);
    if (c->has_z)
        cg_sb_printf(&b, "    const %s *z;\n", t);
    cg_sb_printf(&b, "    static constexpr int M = %lld, N = %lld, K = %lld, G = %lld, SPLIT = %d, "
                     "MFAST = %d;\n", gm, gn, gk, groups, (int)split, mfast);

    /* a(g, m, k) and b(g, k, j) */
    cg_sb_printf(&b, "    __device__ __forceinline__ float a(int g, int m, int k) const\n    {\n");
    if (fwd) {
        cg_sb_printf(&b, "        const int q = m %% %lld, p = m / %lld %% %lld, n = m / %lld;\n"
                         "        const int s = k %% %lld, r = k / %lld %% %lld, c = k / %lld;\n",
                     Q, Q, P, P * Q, S, S, R, R * S);
        read_x(&b, c);
    } else if (bwd_data) {
        cg_sb_printf(&b, "        const int iw = m %% %lld, ih = m / %lld %% %lld, n = m / %lld;\n"
                         "        const int s = k %% %lld, r = k / %lld %% %lld, kk = k / %lld;\n",
                     W, W, H, H * W, S, S, R, R * S);
        cg_sb_printf(&b, "        const int th = ");
        lin(&b, "ih", 1, c->pad[0], "r", -c->dilation[0]);
        cg_sb_printf(&b, ", tw = ");
        lin(&b, "iw", 1, c->pad[1], "s", -c->dilation[1]);
        cg_sb_printf(&b, ";\n        if (th < 0 || tw < 0");
        if (c->stride[0] != 1)
            cg_sb_printf(&b, " || th %% %d", c->stride[0]);
        if (c->stride[1] != 1)
            cg_sb_printf(&b, " || tw %% %d", c->stride[1]);
        cg_sb_printf(&b, ")\n            return 0.0f;\n");
        if (c->stride[0] != 1 || c->stride[1] != 1)
            cg_sb_printf(&b, "        const int p = th / %d, q = tw / %d;\n", c->stride[0],
                         c->stride[1]);
        else
            cg_sb_printf(&b, "        const int p = th, q = tw;\n");
        cg_sb_printf(&b, "        if (p >= %lld || q >= %lld)\n            return 0.0f;\n", P, Q);
        cg_sb_printf(&b, "        return ld(dy, ((n * %lld + g * %lld + kk) * %lld + p) * %lld + q);\n",
                     K, KG, P, Q);
    } else {
        cg_sb_printf(&b, "        return ld(dy, (k / %lld * %lld + g * %lld + m) * %lld + k %% %lld);\n",
                     P * Q, K, KG, P * Q, P * Q);
    }
    cg_sb_printf(&b, "    }\n    __device__ __forceinline__ float b(int g, int k, int j) const\n    {\n");
    if (fwd) {
        cg_sb_printf(&b, "        return ld(wt, (g * %lld + j) * %lld + k);\n", KG, CG * R * S);
    } else if (bwd_data) {
        cg_sb_printf(&b, "        return ld(wt, ((g * %lld + k / %lld) * %lld + j) * %lld + k %% %lld);\n",
                     KG, R * S, CG, R * S, R * S);
    } else {
        cg_sb_printf(&b, "        const int q = k %% %lld, p = k / %lld %% %lld, n = k / %lld;\n"
                         "        const int s = j %% %lld, r = j / %lld %% %lld, c = j / %lld;\n",
                     Q, Q, P, P * Q, S, S, R, R * S);
        read_x(&b, c);
    }

    /* out(g, m, j, v): the epilogue */
    cg_sb_printf(&b, "    }\n    __device__ __forceinline__ void out(int g, int m, int j, float v) const\n"
                     "    {\n");
    const char *alpha = "";
    char abuf[48];
    if (c->alpha != 1) {
        snprintf(abuf, sizeof abuf, "%.9gf * ", c->alpha);
        alpha = abuf;
    }
    if (fwd) {
        cg_sb_printf(&b, "        const int q = m %% %lld, p = m / %lld %% %lld, n = m / %lld;\n"
                         "        const int i = ((n * %lld + g * %lld + j) * %lld + p) * %lld + q;\n",
                     Q, Q, P, P * Q, K, KG, P, Q);
        cg_sb_printf(&b, "        v = %sv", alpha);
        if (c->has_z)
            cg_sb_printf(&b, c->beta == 1 ? " + ld(z, i)" : " + %.9gf * ld(z, i)", c->beta);
        if (c->has_bias)
            cg_sb_printf(&b, " + ld(bias, g * %lld + j)", KG);
        cg_sb_printf(&b, ";\n");
        if (c->relu)
            cg_sb_printf(&b, "        v = ar_relu(v);\n");
        cg_sb_printf(&b, "        st(y, i, v);\n");
    } else if (bwd_data) {
        cg_sb_printf(&b, "        const int iw = m %% %lld, ih = m / %lld %% %lld, n = m / %lld;\n"
                         "        st(dx, ((n * %lld + g * %lld + j) * %lld + ih) * %lld + iw, %sv);\n",
                     W, W, H, H * W, C, CG, H, W, alpha);
    } else {
        cg_sb_printf(&b, "        st(dw, (g * %lld + m) * %lld + j, %sv);\n", KG, CG * R * S, alpha);
    }
    cg_sb_printf(&b, "    }\n};\n\n");

    /* the kernel: its parameters are the members', then the parts' buffer */
    /* two blocks an SM at least: with the bare bound ptxas picks too few
       registers for some of these and spills */
    cg_sb_printf(&b, "GNC_KERNEL void __launch_bounds__(%d, 2) @K@(", THREADS);
    if (fwd)
        cg_sb_printf(&b, "const %s *__restrict__ x, const %s *__restrict__ wt, %s *y", t, t, to);
    else if (bwd_data)
        cg_sb_printf(&b, "const %s *__restrict__ dy, const %s *__restrict__ wt, %s *__restrict__ dx",
                     t, t, to);
    else
        cg_sb_printf(&b, "const %s *__restrict__ dy, const %s *__restrict__ x, %s *__restrict__ dw",
                     t, t, to);
    if (c->has_bias)
        cg_sb_printf(&b, ", const %s *__restrict__ bias", t);
    if (c->has_z)
        cg_sb_printf(&b, ", const %s *z", t);            /* z may be y */
    if (split > 1)
        cg_sb_printf(&b, ", float *__restrict__ parts, i64 phase");
    cg_sb_printf(&b, ")\n{\n    const @K@_p pr = {%s%s%s};\n", fwd ? "x, wt, y" : bwd_data ? "dy, wt, dx" : "dy, x, dw",
                 c->has_bias ? ", bias" : "", c->has_z ? ", z" : "");
    if (split > 1)
        cg_sb_printf(&b, "    if (phase)\n        igemm_reduce(pr, parts);\n    else\n"
                         "        igemm<%d>(pr, parts);\n}\n", mode);
    else
        cg_sb_printf(&b, "    igemm<%d>(pr, nullptr);\n}\n", mode);

    static const char *const base[] = {"conv2d_igemm", "conv2d_grad_input_igemm",
                                       "conv2d_grad_weight_igemm"};
    int kernel = cg_add_kernel(G, head.s, b.s, NULL, 0, base[c->kind], n, 0, THREADS);
    G->p->kernels[kernel].wmma = mode > 0;
    cg_sb_free(&head);
    cg_sb_free(&b);

    /* the launches and what they touch */
    int64_t es = (int64_t)ir_dtype_size(c->dtype), eo = (int64_t)ir_dtype_size(out_dt);
    int64_t xb = N * C * H * W, wb = K * CG * R * S, yb = N * K * P * Q;
    cg_ref in0, in1, res;
    int64_t in0b, in1b, resb;
    if (fwd)
        in0 = c->x, in0b = xb, in1 = c->wt, in1b = wb, res = c->y, resb = yb;
    else if (bwd_data)
        in0 = c->y, in0b = yb, in1 = c->wt, in1b = wb, res = c->x, resb = xb;
    else
        in0 = c->y, in0b = yb, in1 = c->x, in1b = xb, res = c->wt, resb = wb;
    cg_ref parts = {CG_WORKSPACE, 0};
    int64_t parts_bytes = split * groups * gm * gn * 4;
    if (split > 1)
        parts = cg_workspace(G, parts_bytes);
    for (int phase = 0; phase < (split > 1 ? 2 : 1); phase++) {
        cg_step s = {.kind = CG_STEP_KERNEL, .node = n};
        s.what = split == 1 ? what
                 : phase ? cg_pprintf(G->p, "%s: the %d parts' sum", what, (int)split)
                         : cg_pprintf(G->p, "%s: %d parts of k", what, (int)split);
        cg_launch *l = &s.u.launch;
        l->kernel = kernel;
        if (phase) {
            l->grid[0] = (unsigned)div_up(groups * gm * gn, THREADS), l->grid[1] = l->grid[2] = 1;
        } else {
            l->grid[0] = (unsigned)div_up(gm, TILE_M);
            l->grid[1] = (unsigned)div_up(gn, TILE_N);
            l->grid[2] = (unsigned)(groups * split);
        }
        l->block[0] = THREADS, l->block[1] = l->block[2] = 1;
        l->args = cg_palloc(G->p, 7 * sizeof *l->args);
        cg_access acc[7];
        int na = 0, last = split == 1 || phase == 1;
        l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, in0, 0, 0};
        l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, in1, 0, 0};
        l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, res, 0, 0};
        if (!phase) {
            acc[na++] = (cg_access){in0, in0b * es, 0, 0, c->dtype};
            acc[na++] = (cg_access){in1, in1b * es, 0, 0, c->dtype};
        }
        if (last)
            acc[na++] = (cg_access){res, resb * eo, 1, fwd, out_dt};
        if (c->has_bias) {
            l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, c->bias, 0, 0};
            if (last)
                acc[na++] = (cg_access){c->bias, KG * groups * es, 0, 0, c->dtype};
        }
        if (c->has_z) {
            l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, c->z, 0, 0};
            if (last)
                acc[na++] = (cg_access){c->z, yb * es, 0, 1, c->dtype};
        }
        if (split > 1) {
            l->args[l->nargs++] = (cg_arg){CG_ARG_BUFFER, parts, 0, 0};
            l->args[l->nargs++] = (cg_arg){CG_ARG_I64, {CG_ARENA, 0}, phase, 0};
            acc[na++] = (cg_access){parts, parts_bytes, !phase, 0, IR_F32};
        }
        cg_add_step(G, &s, acc, na);
    }
}
