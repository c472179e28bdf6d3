/* The arithmetic of the elementwise unary ops and of their gradients, written
 * once for every place that computes them: the CPU executor
 * (runtime/cpu/exec.c, grad.c) in float, the CUDA kernels in float (the
 * build copies this file into the prelude, codegen/prelude.cuh, which NVRTC
 * compiles), and the tests' reference (tests/ref64.c) in double.  ops.def's
 * UNARY table says which op each function computes and what it takes.
 *
 *   ar_NAME(x, a...)          op NAME (ops.def's name) of one element x
 *   ar_NAME_grad(dy, v, a...) its gradient: dy times the derivative, v the
 *                             operand x or the result y as the UNARY line says
 *
 * a... are the op's float attributes in its schema's order (leaky_relu's slope,
 * clamp's min and max).  Semantics are PyTorch's, including its float
 * arithmetic where it has one (the order of the operations is part of the
 * result: keep it when editing).  Write constants as integers (converted to
 * ar_real exactly) or through AR_K, never as bare double literals: in float
 * those would turn the arithmetic into double's.  The C compilers check this
 * (-Wdouble-promotion is an error here).
 *
 * An edit here changes every plan's kernel source, which a plan's loader
 * compares with the one it generates: `bash tests/fuzz/plans/make.sh
 * build/gnc` writes the plan loader's seed plans again (ctest plan_cli).
 *
 * The includer chooses:
 *   AR_DOUBLE   defined: ar_real is double (the reference), else float
 *   AR_FN       the functions' qualifiers (default static inline; the
 *               prelude's __device__ __forceinline__) */
#ifndef GNC_ARITH_H
#define GNC_ARITH_H

#ifndef AR_FN
#define AR_FN static inline
#endif
#ifndef __CUDACC_RTC__
#include <math.h>
#endif

#if defined(__GNUC__) && !defined(__CUDACC_RTC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wdouble-promotion"
#endif

#ifdef AR_DOUBLE
typedef double ar_real;
#define AR_K(c) c
#define AR_M(fn) fn         /* the math library's function at ar_real's precision */
#else
typedef float ar_real;
#define AR_K(c) c##f
#define AR_M(fn) fn##f
#endif

/* the math library at ar_real's precision: expf or exp, ... */
AR_FN ar_real m_exp(ar_real x) { return AR_M(exp)(x); }
AR_FN ar_real m_expm1(ar_real x) { return AR_M(expm1)(x); }
AR_FN ar_real m_log(ar_real x) { return AR_M(log)(x); }
AR_FN ar_real m_log1p(ar_real x) { return AR_M(log1p)(x); }
AR_FN ar_real m_sqrt(ar_real x) { return AR_M(sqrt)(x); }
AR_FN ar_real m_tanh(ar_real x) { return AR_M(tanh)(x); }
AR_FN ar_real m_erf(ar_real x) { return AR_M(erf)(x); }
AR_FN ar_real m_fabs(ar_real x) { return AR_M(fabs)(x); }
AR_FN ar_real m_pow(ar_real x, ar_real y) { return AR_M(pow)(x, y); }
AR_FN ar_real m_fmin(ar_real x, ar_real y) { return AR_M(fmin)(x, y); }
AR_FN ar_real m_fmax(ar_real x, ar_real y) { return AR_M(fmax)(x, y); }

/* The arguments after the operands in a call of the function of an op whose
 * UNARY line (ops.def) says N, for the C dispatchers: AR_ATTRS##N, of their
 * variables p and q (the op's float attributes, ir_float_attrs). */
#define AR_ATTRS0
#define AR_ATTRS1 , p
#define AR_ATTRS2 , p, q

/* sqrt(2 / pi), 1 / sqrt(2), 1 / sqrt(2 pi), and gelu_tanh's cubic term */
#define AR_SQRT_2_OVER_PI AR_K(0.7978845608028654)
#define AR_SQRT1_2 AR_K(0.7071067811865476)
#define AR_INV_SQRT_2PI AR_K(0.3989422804014327)
#define AR_GELU_KAPPA AR_K(0.044715)

AR_FN ar_real ar_neg(ar_real x) { return -x; }

/* NaN stays NaN, as PyTorch's relu; -0 becomes 0 */
AR_FN ar_real ar_relu(ar_real x) { return x > 0 || x != x ? x : 0; }
AR_FN ar_real ar_relu_grad(ar_real dy, ar_real y) { return y <= 0 ? 0 : dy; } /* NaN passes dy */

AR_FN ar_real ar_sigmoid(ar_real x) { return 1 / (1 + m_exp(-x)); }
AR_FN ar_real ar_sigmoid_grad(ar_real dy, ar_real y) { return dy * y * (1 - y); }

AR_FN ar_real ar_tanh(ar_real x) { return m_tanh(x); }
AR_FN ar_real ar_tanh_grad(ar_real dy, ar_real y) { return dy * (1 - y * y); }

/* x Phi(x), the exact (erf) form; the gradient Phi(x) + x phi(x), as PyTorch's
   GeluBackward */
AR_FN ar_real ar_gelu(ar_real x) { return AR_K(0.5) * x * (1 + m_erf(x * AR_SQRT1_2)); }
AR_FN ar_real ar_gelu_grad(ar_real dy, ar_real x)
{
    ar_real cdf = AR_K(0.5) * (1 + m_erf(x * AR_SQRT1_2));
    ar_real pdf = AR_INV_SQRT_2PI * m_exp(x * x * -AR_K(0.5));
    return dy * (cdf + x * pdf);
}

/* x sigmoid(x); the gradient s (1 + x (1 - s)), s = sigmoid(x) */
AR_FN ar_real ar_silu(ar_real x) { return x / (1 + m_exp(-x)); }
AR_FN ar_real ar_silu_grad(ar_real dy, ar_real x)
{
    ar_real s = 1 / (1 + m_exp(-x));
    return dy * s * (1 + x * (1 - s));
}

AR_FN ar_real ar_exp(ar_real x) { return m_exp(x); }
AR_FN ar_real ar_exp_grad(ar_real dy, ar_real y) { return dy * y; }

AR_FN ar_real ar_log(ar_real x) { return m_log(x); }
AR_FN ar_real ar_log_grad(ar_real dy, ar_real x) { return dy / x; }

AR_FN ar_real ar_sqrt(ar_real x) { return m_sqrt(x); }
AR_FN ar_real ar_sqrt_grad(ar_real dy, ar_real y) { return dy * AR_K(0.5) / y; }

AR_FN ar_real ar_rsqrt(ar_real x) { return 1 / m_sqrt(x); }
AR_FN ar_real ar_rsqrt_grad(ar_real dy, ar_real y) { return -AR_K(0.5) * dy * y * y * y; }

/* the gradient sign(x) dy, 0 at 0 */
AR_FN ar_real ar_abs(ar_real x) { return m_fabs(x); }
AR_FN ar_real ar_abs_grad(ar_real dy, ar_real x) { return x > 0 ? dy : x < 0 ? -dy : 0; }

/* PyTorch's softplus (beta 1, threshold 20): x itself past 20; the gradient
   sigmoid(x), dy past the threshold */
AR_FN ar_real ar_softplus(ar_real x) { return x > 20 ? x : m_log1p(m_exp(x)); }
AR_FN ar_real ar_softplus_grad(ar_real dy, ar_real x)
{
    return x > 20 ? dy : dy / (1 + m_exp(-x));
}

/* x min(max(x + 3, 0), 6) / 6; the gradient in PyTorch's pieces */
AR_FN ar_real ar_hardswish(ar_real x) { return x * m_fmin(m_fmax(x + 3, 0), 6) / 6; }
AR_FN ar_real ar_hardswish_grad(ar_real dy, ar_real x)
{
    return x < -3 ? 0 : x <= 3 ? dy * (x / 3 + AR_K(0.5)) : dy;
}

/* x / (1 + |x|); the gradient 1 / (1 + |x|)^2 */
AR_FN ar_real ar_softsign(ar_real x) { return x / (1 + m_fabs(x)); }
AR_FN ar_real ar_softsign_grad(ar_real dy, ar_real x)
{
    ar_real d = 1 + m_fabs(x);
    return dy / (d * d);
}

AR_FN ar_real ar_leaky_relu(ar_real x, ar_real slope) { return x > 0 ? x : x * slope; }
AR_FN ar_real ar_leaky_relu_grad(ar_real dy, ar_real x, ar_real slope)
{
    return x > 0 ? dy : dy * slope;
}

/* alpha (exp(x) - 1) below 0 */
AR_FN ar_real ar_elu(ar_real x, ar_real alpha) { return x > 0 ? x : alpha * m_expm1(x); }
AR_FN ar_real ar_elu_grad(ar_real dy, ar_real x, ar_real alpha)
{
    return x > 0 ? dy : dy * alpha * m_exp(x);
}

/* PyTorch's gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
   and its GeluBackward */
AR_FN ar_real ar_gelu_tanh(ar_real x)
{
    return AR_K(0.5) * x * (1 + m_tanh(AR_SQRT_2_OVER_PI * (x + AR_GELU_KAPPA * x * x * x)));
}
AR_FN ar_real ar_gelu_tanh_grad(ar_real dy, ar_real x)
{
    ar_real sq = x * x, th = m_tanh(AR_SQRT_2_OVER_PI * (x + AR_GELU_KAPPA * sq * x));
    ar_real left = AR_K(0.5) * x, right = 1 + th;
    return dy * (AR_K(0.5) * right +
                 left * (1 - th * th) * AR_SQRT_2_OVER_PI * (1 + 3 * AR_GELU_KAPPA * sq));
}

/* x^p, p a number (NaN for x < 0 and p not whole, as PyTorch's); the gradient
   p x^(p-1), 0 for p = 0 (PyTorch's pow_backward) */
AR_FN ar_real ar_pow(ar_real x, ar_real p) { return m_pow(x, p); }
AR_FN ar_real ar_pow_grad(ar_real dy, ar_real x, ar_real p)
{
    return p == 0 ? 0 : dy * (p * m_pow(x, p - 1));
}

/* min(max(x, lo), hi), NaN stays NaN (an absent bound is infinite); the
   gradient dy in [lo, hi], bounds included, 0 for NaN */
AR_FN ar_real ar_clamp(ar_real x, ar_real lo, ar_real hi)
{
    return x != x ? x : m_fmin(m_fmax(x, lo), hi);
}
AR_FN ar_real ar_clamp_grad(ar_real dy, ar_real x, ar_real lo, ar_real hi)
{
    return x >= lo && x <= hi ? dy : 0;
}

#if defined(__GNUC__) && !defined(__CUDACC_RTC__)
#pragma GCC diagnostic pop
#endif

#endif
