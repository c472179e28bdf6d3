/* Fused attention on the CPU: attention (out, lse = softmax(q k^T scale) v)
 * and attention_grad, tile by tile as FlashAttention computes them, so that
 * no [l, s] tensor of scores exists: what a kernel holds is a block of keys'
 * (and values') columns and one row of scores at a time, per thread.
 * Grouped-query attention (k and v with fewer heads than q, ops.def): the
 * batch elements of q (its heads the fastest) go in groups of `group` to one
 * of k and v, query element b reading key/value element b / group.
 *
 *   forward:  each query row i walks the key blocks in order, keeping its
 *             running maximum m, sum l and unnormalized output o: a block's
 *             scores s_j = q_i . k_j scale (j <= i where causal) move m to
 *             m', then l = l e^(m - m') + sum e^(s_j - m') and
 *             o = o e^(m - m') + sum e^(s_j - m') v_j; at the end out_i =
 *             o / l and lse_i = m + log l.
 *   backward: D_i = dy_i . out_i; for each key block, for each query row,
 *             p_ij = e^(s_ij - lse_i) (recomputed, not kept),
 *             ds_ij = p_ij (dy_i . v_j - D_i), and
 *             dv_j += p_ij dy_i, dk_j += ds_ij q_i scale, dq_i += ds_ij k_j scale.
 *
 * A block of keys is copied transposed (features by keys) so that a row's
 * scores are sums over the features of contiguous runs of keys, which the
 * compiler vectorizes across the keys.  The forward pass splits the work by
 * (batch, block of query rows), the backward pass by key/value batch element
 * (a query row's dq sums over every key block, a key's dk over every query
 * row of its group's query heads, taken in order): each output is summed in
 * one fixed order on one thread, so the bits do not depend on the number of
 * threads.  Sums are in float, as the GPU's. */
#include "kernels.h"

#include <math.h>
#include <omp.h>

#define KEYS 64  /* keys per block */
#define ROWS 32  /* query rows per forward task */

typedef struct {
    int64_t batch, group, l, s, e, ev; /* q's batch elements; of them, per k's */
    float scale;
    int causal;
} geom;

static geom geometry(const ir_node *n, int grad)
{
    const ir_type *q = &n->in[grad]->type, *k = &n->in[grad + 1]->type,
                  *v = &n->in[grad + 2]->type;
    int r = q->rank;
    geom g = {1, 1, q->dims[r - 2], v->dims[r - 2], q->dims[r - 1], v->dims[r - 1],
              (float)ir_attr_float(n, "scale"), (int)ir_attr_int(n, "causal")};
    for (int i = 0; i < r - 2; i++)
        g.batch *= q->dims[i];
    if (r >= 3 && k->dims[r - 3] > 0)
        g.group = q->dims[r - 3] / k->dims[r - 3];
    return g;
}

/* The keys [j0, j0 + nb) of k (rows of e floats) as t[e][KEYS]. */
static void keys_transposed(const float *k, int64_t j0, int64_t nb, int64_t e, float *t)
{
    for (int64_t j = 0; j < nb; j++)
        for (int64_t f = 0; f < e; f++)
            t[f * KEYS + j] = k[(j0 + j) * e + f];
}

/* s[0, nb) = q . kt[., j] scale for the transposed keys kt (keys_transposed),
 * -inf past the causal edge: key j0 + j for query i only where j0 + j <= i. */
static void scores(const float *q, const float *kt, int64_t nb, int64_t e, float scale,
                   int64_t causal_edge, float *s)
{
    for (int64_t j = 0; j < nb; j++)
        s[j] = 0;
    for (int64_t f = 0; f < e; f++) {
        float qf = q[f];
        const float *t = kt + f * KEYS;
        for (int64_t j = 0; j < nb; j++)
            s[j] += qf * t[j];
    }
    for (int64_t j = 0; j < nb; j++)
        s[j] = j < causal_edge ? s[j] * scale : -INFINITY;
}

/* The keys that query row i sees: all s, or the first i + 1 where causal. */
static int64_t keys_seen(const geom *g, int64_t i)
{
    return g->causal && i + 1 < g->s ? i + 1 : g->s;
}

int rt_attention(rt_exec *x, const ir_node *n)
{
    geom g = geometry(n, 0);
    const float *Q = IN(0), *K = IN(1), *V = IN(2);
    float *O = OUT, *lse = OUTK(1);
    int64_t each = g.e * KEYS + KEYS + ROWS * 2;
    float *scratch = rt_scratch(x, (size_t)(omp_get_max_threads() * each));
    if (!scratch)
        return -1;
    int64_t blocks = (g.l + ROWS - 1) / ROWS;
#pragma omp parallel for collapse(2) schedule(dynamic) \
    if (g.batch * g.l * g.s * (g.e + g.ev) > PAR_MIN)
    for (int64_t b = 0; b < g.batch; b++)
        for (int64_t rb = 0; rb < blocks; rb++) {
            float *kt = scratch + omp_get_thread_num() * each, *s = kt + g.e * KEYS,
                  *m = s + KEYS, *l = m + ROWS;
            int64_t bk = b / g.group;
            const float *q = Q + b * g.l * g.e, *k = K + bk * g.s * g.e,
                        *v = V + bk * g.s * g.ev;
            float *o = O + b * g.l * g.ev;
            int64_t i0 = rb * ROWS, i1 = i0 + ROWS < g.l ? i0 + ROWS : g.l;
            for (int64_t i = i0; i < i1; i++) {
                m[i - i0] = -INFINITY, l[i - i0] = 0;
                for (int64_t f = 0; f < g.ev; f++)
                    o[i * g.ev + f] = 0;
            }
            int64_t seen = keys_seen(&g, i1 - 1);
            for (int64_t j0 = 0; j0 < seen; j0 += KEYS) {
                int64_t nb = seen - j0 < KEYS ? seen - j0 : KEYS;
                keys_transposed(k, j0, nb, g.e, kt);
                for (int64_t i = i0; i < i1; i++) {
                    int64_t edge = keys_seen(&g, i) - j0;
                    if (edge <= 0)
                        continue;
                    scores(q + i * g.e, kt, nb, g.e, g.scale, edge, s);
                    float mx = m[i - i0];
                    for (int64_t j = 0; j < nb; j++)
                        mx = s[j] > mx ? s[j] : mx;
                    float c = expf(m[i - i0] - mx), sum = 0, *oi = o + i * g.ev;
                    for (int64_t f = 0; f < g.ev; f++)
                        oi[f] *= c;
                    for (int64_t j = 0; j < nb; j++) {
                        float p = expf(s[j] - mx);
                        const float *vj = v + (j0 + j) * g.ev;
                        sum += p;
                        for (int64_t f = 0; f < g.ev; f++)
                            oi[f] += p * vj[f];
                    }
                    l[i - i0] = l[i - i0] * c + sum;
                    m[i - i0] = mx;
                }
            }
            for (int64_t i = i0; i < i1; i++) {
                float inv = 1 / l[i - i0], *oi = o + i * g.ev;
                for (int64_t f = 0; f < g.ev; f++)
                    oi[f] *= inv;
                lse[b * g.l + i] = m[i - i0] + logf(l[i - i0]);
            }
        }
    return 0;
}

int rt_attention_grad(rt_exec *x, const ir_node *n)
{
    geom g = geometry(n, 1);
    const float *DY = IN(0), *Q = IN(1), *K = IN(2), *V = IN(3), *O = IN(4), *LSE = IN(5);
    float *DQ = OUTK(0), *DK = OUTK(1), *DV = OUTK(2);
    int64_t each = (g.e + g.ev) * KEYS + 2 * KEYS + g.l;
    float *scratch = rt_scratch(x, (size_t)(omp_get_max_threads() * each));
    if (!scratch)
        return -1;
#pragma omp parallel for schedule(dynamic) if (g.batch * g.l * g.s * (g.e + g.ev) > PAR_MIN)
    for (int64_t bk = 0; bk < g.batch / g.group; bk++) {
        float *kt = scratch + omp_get_thread_num() * each, *vt = kt + g.e * KEYS,
              *s = vt + g.ev * KEYS, *dp = s + KEYS, *D = dp + KEYS;
        const float *k = K + bk * g.s * g.e, *v = V + bk * g.s * g.ev;
        float *dk = DK + bk * g.s * g.e, *dv = DV + bk * g.s * g.ev;
        memset(dk, 0, (size_t)(g.s * g.e) * sizeof *dk);
        memset(dv, 0, (size_t)(g.s * g.ev) * sizeof *dv);
        for (int64_t b = bk * g.group; b < (bk + 1) * g.group; b++) { /* the group, in order */
            const float *q = Q + b * g.l * g.e, *dy = DY + b * g.l * g.ev, *o = O + b * g.l * g.ev,
                        *lse = LSE + b * g.l;
            float *dq = DQ + b * g.l * g.e;
            memset(dq, 0, (size_t)(g.l * g.e) * sizeof *dq);
            for (int64_t i = 0; i < g.l; i++) {
                float d = 0;
                for (int64_t f = 0; f < g.ev; f++)
                    d += dy[i * g.ev + f] * o[i * g.ev + f];
                D[i] = d;
            }
            for (int64_t j0 = 0; j0 < g.s; j0 += KEYS) {
                int64_t nb = g.s - j0 < KEYS ? g.s - j0 : KEYS;
                keys_transposed(k, j0, nb, g.e, kt);
                keys_transposed(v, j0, nb, g.ev, vt);
                for (int64_t i = g.causal ? j0 : 0; i < g.l; i++) {
                    int64_t edge = keys_seen(&g, i) - j0;
                    if (edge > nb)
                        edge = nb;
                    scores(q + i * g.e, kt, nb, g.e, g.scale, edge, s);
                    scores(dy + i * g.ev, vt, nb, g.ev, 1, edge, dp);
                    const float *qi = q + i * g.e, *dyi = dy + i * g.ev;
                    float *dqi = dq + i * g.e;
                    for (int64_t j = 0; j < edge; j++) {
                        float p = expf(s[j] - lse[i]), ds = p * (dp[j] - D[i]) * g.scale;
                        float *dvj = dv + (j0 + j) * g.ev, *dkj = dk + (j0 + j) * g.e;
                        const float *kj = k + (j0 + j) * g.e;
                        for (int64_t f = 0; f < g.ev; f++)
                            dvj[f] += p * dyi[f];
                        for (int64_t f = 0; f < g.e; f++) {
                            dkj[f] += ds * qi[f];
                            dqi[f] += ds * kj[f];
                        }
                    }
                }
            }
        }
    }
    return 0;
}
