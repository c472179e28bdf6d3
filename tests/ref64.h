/* Float64 reference implementations of every op in ir/ops.def, for checking the
 * executor (tests/test_ops.c).
 *
 * Each function is the op's definition written as the plainest loops that could
 * compute it: one output element at a time, indices spelled out, no blocking, no
 * tricks, nothing shared with runtime/.  Semantics are inference ones (dropout is
 * the identity, batchnorm uses its running statistics) and follow the PyTorch
 * namesakes, as ops.def says.
 *
 * Each function works out its result's shape itself (into *out, so the caller can
 * hold it against ir_infer's) and returns a malloc'd array of that many doubles,
 * row-major; the caller frees it.  Integer operands (indices, labels) come as
 * int64_t.  ref_embedding and ref_cross_entropy return NULL / NAN when an index or
 * label is out of range: the op is undefined there. */
#ifndef GNC_REF64_H
#define GNC_REF64_H

#include <stdint.h>

#include "ir.h"

double *ref_const(const ir_type *t, double value);
/* neg, relu, sigmoid, tanh, gelu, gelu_tanh, silu, exp, log, sqrt, rsqrt, abs, softplus,
 * hardswish, leaky_relu (p: its slope), elu (p: its alpha), pow (p: the exponent), clamp
 * (p: min, q: max), dropout; out has the shape of a */
double *ref_unary(ir_op op, const double *a, const ir_type *ta, double p, double q);
/* add, sub, mul, div, maximum, minimum and the comparisons (1 or 0), with NumPy
 * broadcasting */
double *ref_binary(ir_op op, const double *a, const ir_type *ta, const double *b,
                   const ir_type *tb, ir_type *out);
/* where(cond, a, b): a where cond is nonzero (NaN included), else b; the three broadcast */
double *ref_where(const double *c, const ir_type *tc, const double *a, const ir_type *ta,
                  const double *b, const ir_type *tb, ir_type *out);
/* reduce_max, reduce_min (values) and argmax (positions) along axis, which
 * stays with size 1: the first extreme of each line, the first NaN if it has one */
double *ref_extreme(ir_op op, const double *a, const ir_type *ta, int axis, ir_type *out);
double *ref_matmul(const double *a, const ir_type *ta, const double *b, const ir_type *tb,
                   ir_type *out);
/* x[..., in], w[out, in], bias[out] or NULL */
double *ref_dense(const double *x, const ir_type *tx, const double *w, const ir_type *tw,
                  const double *bias, ir_type *out);
/* x[n, c, h, w], w[o, c/groups, kh, kw], bias[o] or NULL; stride, pad, dilation: {h, w} */
double *ref_conv2d(const double *x, const ir_type *tx, const double *w, const ir_type *tw,
                   const double *bias, const int64_t stride[2], const int64_t pad[2],
                   const int64_t dilation[2], int64_t groups, ir_type *out);
/* The transposed convolution (conv2d_grad_input, PyTorch's conv_transpose2d without
 * bias): x[n, o, h, w], w[o, c/groups, kh, kw] -> [shape], each x element spread
 * over its window, as the conv2d of the same attributes gathers it */
double *ref_conv_transpose2d(const double *x, const ir_type *tx, const double *w,
                             const ir_type *tw, const int64_t stride[2], const int64_t pad[2],
                             const int64_t dilation[2], int64_t groups, const int64_t shape[4]);
/* x[n, c, ...]; weight, bias, mean, var: [c] */
double *ref_batchnorm(const double *x, const ir_type *tx, const double *weight,
                      const double *bias, const double *mean, const double *var, double eps);
/* normalizes over the trailing rank(tw) dims of x; weight and bias of type tw */
double *ref_layernorm(const double *x, const ir_type *tx, const double *weight,
                      const double *bias, const ir_type *tw, double eps);
/* softmax along axis, or log_softmax when take_log */
double *ref_softmax(const double *x, const ir_type *tx, int axis, int take_log);
/* attention (F.scaled_dot_product_attention): q[..., l, e], k[..., s, e],
 * v[..., s, ev] -> out[..., l, ev]; each row's log-sum-exp of its scaled
 * scores into lse[..., l] where lse is not NULL.  k and v may have fewer
 * heads (dim -3) than q, a count dividing q's (enable_gqa): query batch
 * element b reads key/value element b / (q's elements / k's) */
double *ref_attention(const double *q, const ir_type *tq, const double *k, const ir_type *tk,
                      const double *v, const ir_type *tv, int causal, double scale, double *lse);
double *ref_maxpool2d(const double *x, const ir_type *tx, const int64_t kernel[2],
                      const int64_t stride[2], const int64_t pad[2], const int64_t dilation[2],
                      int ceil_mode, ir_type *out);
double *ref_avgpool2d(const double *x, const ir_type *tx, const int64_t kernel[2],
                      const int64_t stride[2], const int64_t pad[2], int count_include_pad,
                      int ceil_mode, ir_type *out);
double *ref_global_avgpool(const double *x, const ir_type *tx, ir_type *out);
double *ref_adaptive_avgpool2d(const double *x, const ir_type *tx, const int64_t size[2],
                               ir_type *out);
/* F.interpolate on [n, c, h, w] to size, nearest (bilinear 0) or bilinear; scale
 * the scale factors as PyTorch gets them (0: none); and its gradient, dy to
 * shape. */
double *ref_upsample2d(const double *x, const ir_type *tx, const int64_t size[2], int bilinear,
                       int align, const double scale[2], ir_type *out);
double *ref_upsample2d_grad(const double *dy, const ir_type *tdy, const int64_t shape[4],
                            int bilinear, int align, const double scale[2], ir_type *out);
double *ref_reshape(const double *x, const ir_type *tx, int rank, const int64_t *shape,
                    ir_type *out);
double *ref_transpose(const double *x, const ir_type *tx, const int64_t *perm, ir_type *out);
double *ref_concat(int n, const double *const *xs, const ir_type *ts, int axis, ir_type *out);
/* v of dtype from as cast converts it to dtype to (ops.def) */
double ref_cast(double v, ir_dtype from, ir_dtype to);
/* x with before[k] and after[k] elements of value around dimension k */
double *ref_pad(const double *x, const ir_type *tx, const int64_t *before, const int64_t *after,
                double value, ir_type *out);
/* x's elements [start, start + size) along axis */
double *ref_slice(const double *x, const ir_type *tx, int axis, int64_t start, int64_t size,
                  ir_type *out);
/* idx of type ti, w[num, dim]; NULL when an index is outside [0, num) */
double *ref_embedding(const int64_t *idx, const ir_type *ti, const double *w,
                      const ir_type *tw, ir_type *out);
/* F.cross_entropy(reduction="mean", label_smoothing=eps, ignore_index=ignore):
 * logits [n, c, d...], labels [n, d...]; over the positions whose label is not
 * ignore, the mean of (1 - eps) (-log softmax[label]) + eps / c sum over the
 * classes of -log softmax; NAN when a label is neither ignore nor in
 * [0, classes) (and, as PyTorch's 0/0, when all are ignored) */
double ref_cross_entropy(const double *logits, const ir_type *tl, const int64_t *label,
                         double eps, int64_t ignore);
/* F.nll_loss(reduction="mean", ignore_index=ignore): -x[label] over the
 * positions not ignored, shaped and averaged as ref_cross_entropy's */
double ref_nll_loss(const double *x, const ir_type *tx, const int64_t *label, int64_t ignore);
double ref_mse(const double *a, const double *b, int64_t n);

#endif
