/* 3x3 convolutions of stride 1 as Winograd's F(2x2, 3x3) (Lavin and Gray,
 * "Fast Algorithms for Convolutional Neural Networks", CVPR 2016).
 *
 * Each 2x2 block of the output (a tile) comes from the 4x4 block of the input
 * around it.  Transformed, the 3x3 convolution of the block becomes 16
 * products instead of 36:
 *
 *     Y = A^T [ (G g G^T) . (B^T d B) ] A        (. elementwise, over 4x4)
 *
 * and summed over the input channels each of the 16 positions e of the 4x4
 * transform is a GEMM: M_e[k, t] = sum_c U_e[k, c] V_e[c, t] over tiles t.  So
 * a convolution is (1) the input transform V = B^T d B of every tile of every
 * channel, (2) 16 GEMMs of [out channels x in channels] by [in channels x
 * tiles], (3) the output transform Y = A^T M A of every tile of every output
 * channel, plus the bias.  2.25x fewer multiplications than the direct
 * convolution, for the price of the transforms (memory-bound: they read and
 * write every tile 16/4 times) which the deep layers' many channels amortize.
 *
 * The weights' transform U = G g G^T is made once per inference program and
 * kept (made again after rt_exec_weights_changed), like oneDNN's reordered
 * weights (dnnl.c); a training program's, at every run.  Images go through in chunks, so that the transformed
 * tiles of a chunk fit a bounded workspace (rt_scratch).  Every GEMM runs on
 * one thread, the 16 of a chunk spread across the threads; the transforms
 * are elementwise: the bits do not depend on the number of threads.
 *
 * Numerics: the transforms add and subtract (and halve, in G) before the
 * products, so the rounding differs from the direct convolution's: a relative
 * error of a few float32 ulps of the largest term, within the tolerance of
 * every golden test (tests/test_cpu_conv.c holds it to a float64 reference).
 *
 * Which convolutions: conv2d with a 3x3 kernel, stride 1, no dilation, one
 * group, float32, in and out channels both at least WINO_MIN_CHANNELS (the
 * transforms cost per channel what the GEMMs save per channel pair: on the
 * development machine, 64 channels at 28x28 ran slower than oneDNN's direct
 * convolution, 128 and more ran faster), and in training both its gradients:
 * the input's (conv2d_grad_input: itself such a convolution, see
 * rt_wino_conv) and the weights' (conv2d_grad_weight: the forward pass's
 * adjoint, step by step: dY's tiles through A, a GEMM over the tiles per
 * position, the result through G, wino_grad_weight).  tests/grad/test_grad.c holds
 * resnet18's gradients to PyTorch's float64 ones with it as before (worst
 * 1.5e-5 of the 1e-4 allowed).  GNC_WINOGRAD=0 in the environment turns it
 * off, to compare the paths in one build. */
#include "kernels.h"

#include <omp.h>
#include <stdlib.h>

#define fail base_fail

#define WINO_MIN_CHANNELS 128
#define WINO_BUDGET ((int64_t)1 << 23) /* floats of transformed tiles per chunk: 32 MiB */

struct rt_wino {
    float **u;            /* by the node's result id: U [16][out][in] (dU for a
                             weight gradient), or NULL */
    unsigned char *kept;  /* by id: u holds the program's current weights */
    int nvalues;
    int off;              /* GNC_WINOGRAD=0 */
    int64_t bytes;        /* of the u's allocated (rt_wino_bytes) */
};

int64_t rt_wino_bytes(const struct rt_wino *w)
{
    return w ? w->bytes + (int64_t)w->nvalues * (int64_t)(sizeof *w->u + 1) : 0;
}

void rt_wino_free(struct rt_wino *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nvalues; i++)
        free(w->u[i]);
    free(w->u);
    free(w->kept);
    free(w);
}

static struct rt_wino *state(rt_exec *x)
{
    if (x->wino)
        return x->wino;
    struct rt_wino *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    const char *env = getenv("GNC_WINOGRAD");
    w->off = env && strcmp(env, "0") == 0;
    w->nvalues = x->nvalues;
    w->u = calloc((size_t)x->nvalues, sizeof *w->u);
    w->kept = calloc((size_t)x->nvalues, 1);
    if (!w->u || !w->kept) {
        rt_wino_free(w);
        return NULL;
    }
    return x->wino = w;
}

int rt_wino_fits(const conv_geom *g)
{
    return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->groups == 1 && g->ph >= 0 && g->pw >= 0 && g->c >= WINO_MIN_CHANNELS && g->o >= WINO_MIN_CHANNELS &&
           g->oh >= 1 && g->ow >= 1 && g->oh <= g->h + 2 * g->ph - 2 &&
           g->ow <= g->w + 2 * g->pw - 2;
}

/* U = G g G^T of every (out, in) pair of g's 3x3 kernels, into u [16][o][c]:
 * G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].  The kernels are w [o, c, 3, 3],
 * or where flip is set w [c, o, 3, 3] turned by 180 degrees (the input
 * gradient's: see rt_wino_conv). */
static void transform_weights(const conv_geom *g, const float *w, int flip, float *u)
{
    int64_t oc = g->o * g->c;
#pragma omp parallel for if (oc * 16 > PAR_MIN)
    for (int64_t p = 0; p < oc; p++) {
        float k[9], t[4][3], r[4][4];
        const float *src = flip ? w + (p % g->c * g->o + p / g->c) * 9 : w + p * 9;
        for (int j = 0; j < 9; j++)
            k[j] = src[flip ? 8 - j : j];
        for (int j = 0; j < 3; j++) { /* G g: rows */
            t[0][j] = k[j];
            t[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
            t[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
            t[3][j] = k[6 + j];
        }
        for (int i = 0; i < 4; i++) { /* (G g) G^T: columns */
            r[i][0] = t[i][0];
            r[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
            r[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
            r[i][3] = t[i][2];
        }
        for (int e = 0; e < 16; e++)
            u[e * oc + p] = r[e / 4][e % 4];
    }
}

/* Where tile t of a convolution with th x tw tiles an image lies: image b,
 * row ty, column tx; tile_next steps to the next one, row by row, image by
 * image. */
typedef struct {
    int64_t b, ty, tx, th, tw;
} tile_pos;

static tile_pos tile_at(int64_t th, int64_t tw, int64_t t)
{
    return (tile_pos){t / (th * tw), t % (th * tw) / tw, t % tw, th, tw};
}

static void tile_next(tile_pos *p)
{
    if (++p->tx == p->tw && (p->tx = 0, ++p->ty == p->th))
        p->ty = 0, p->b++;
}

/* V = B^T d B of tiles [t0, t0 + nt) of channel c into v[e * es + j] (tile
 * t0 + j, position e of its 4x4), counting tiles image by image, row by row
 * (th rows of tw): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. */
static void tiles_in(const conv_geom *g, const float *in, int64_t th, int64_t tw, int64_t c,
                     int64_t t0, int64_t nt, float *v, int64_t es)
{
    tile_pos at = tile_at(th, tw, t0);
    for (int64_t j = 0; j < nt; j++) {
        const float *img = in + (at.b * g->c + c) * g->h * g->w;
        int64_t y0 = 2 * at.ty - g->ph, x0 = 2 * at.tx - g->pw;
        float d[4][4], r[4][4];
        if (y0 >= 0 && x0 >= 0 && y0 + 4 <= g->h && x0 + 4 <= g->w) { /* inside */
            const float *p = img + y0 * g->w + x0;
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++)
                    d[i][k] = p[i * g->w + k];
        } else { /* over the padding */
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++) {
                    int64_t y = y0 + i, xx = x0 + k;
                    d[i][k] = y >= 0 && y < g->h && xx >= 0 && xx < g->w ? img[y * g->w + xx]
                                                                          : 0.0f;
                }
        }
        for (int k = 0; k < 4; k++) { /* B^T d: rows */
            float a0 = d[0][k], a1 = d[1][k], a2 = d[2][k], a3 = d[3][k];
            d[0][k] = a0 - a2, d[1][k] = a1 + a2, d[2][k] = a2 - a1, d[3][k] = a1 - a3;
        }
        for (int i = 0; i < 4; i++) { /* (B^T d) B: columns */
            r[i][0] = d[i][0] - d[i][2];
            r[i][1] = d[i][1] + d[i][2];
            r[i][2] = d[i][2] - d[i][1];
            r[i][3] = d[i][1] - d[i][3];
        }
        for (int e = 0; e < 16; e++)
            v[e * es + j] = r[e / 4][e % 4];
        tile_next(&at);
    }
}

/* Y = A^T M A + bias of tiles [t0, t0 + nt) of output channel k, M[e] at
 * m[e * es + j] for tile t0 + j, into out: A^T = [1 1 1 0; 0 1 -1 -1]. */
static void tiles_out(const conv_geom *g, const float *m, int64_t es, float bias, int64_t th,
                      int64_t tw, int64_t k, int64_t t0, int64_t nt, float *out)
{
    tile_pos at = tile_at(th, tw, t0);
    for (int64_t j = 0; j < nt; j++) {
        const float *s = m + j;
        float *img = out + (at.b * g->o + k) * g->oh * g->ow, t[2][4];
        for (int q = 0; q < 4; q++) { /* A^T M: rows */
            float a0 = s[q * es], a1 = s[(4 + q) * es], a2 = s[(8 + q) * es],
                  a3 = s[(12 + q) * es];
            t[0][q] = a0 + a1 + a2;
            t[1][q] = a1 - a2 - a3;
        }
        for (int i = 0; i < 2 && 2 * at.ty + i < g->oh; i++) { /* (A^T M) A: columns */
            float *row = img + (2 * at.ty + i) * g->ow + 2 * at.tx;
            row[0] = t[i][0] + t[i][1] + t[i][2] + bias;
            if (2 * at.tx + 1 < g->ow)
                row[1] = t[i][1] - t[i][2] - t[i][3] + bias;
        }
        tile_next(&at);
    }
}

/* Product e of the tiles whose transforms v [16][c][nt] hold, into
 * m [16][o][nt]: one GEMM, on the calling thread. */
static void product(const conv_geom *g, const float *u, const float *v, int64_t nt, float *m,
                    int e)
{
    rt_gemm1(0, 0, g->o, nt, g->c, 1.0f, u + e * g->o * g->c, g->c, v + e * g->c * nt, nt, 0.0f,
             m + e * g->o * nt, nt);
}

/* dM = A dY A^T of tiles [t0, t0 + nt) of output channel k of dy (outputs
 * past the edge are 0) into m[e * es + j]: the output transform's adjoint. */
static void tiles_dy(const conv_geom *g, const float *dy, int64_t th, int64_t tw, int64_t k,
                     int64_t t0, int64_t nt, float *m, int64_t es)
{
    tile_pos at = tile_at(th, tw, t0);
    for (int64_t j = 0; j < nt; j++) {
        const float *img = dy + (at.b * g->o + k) * g->oh * g->ow;
        float d[2][2], r[4][2];
        for (int i = 0; i < 2; i++)
            for (int q = 0; q < 2; q++) {
                int64_t y = 2 * at.ty + i, xx = 2 * at.tx + q;
                d[i][q] = y < g->oh && xx < g->ow ? img[y * g->ow + xx] : 0.0f;
            }
        for (int q = 0; q < 2; q++) { /* A dY: A = [1 0; 1 1; 1 -1; 0 -1] */
            r[0][q] = d[0][q];
            r[1][q] = d[0][q] + d[1][q];
            r[2][q] = d[0][q] - d[1][q];
            r[3][q] = -d[1][q];
        }
        for (int i = 0; i < 4; i++) { /* (A dY) A^T */
            float *o = m + 4 * i * es + j;
            o[0] = r[i][0];
            o[es] = r[i][0] + r[i][1];
            o[2 * es] = r[i][0] - r[i][1];
            o[3 * es] = -r[i][1];
        }
        tile_next(&at);
    }
}

/* dw = G^T dU G of every (out, in) pair, du [16][o][c] into dw [o, c, 3, 3]:
 * the weights' transform's adjoint. */
static void weights_grad(const conv_geom *g, const float *du, float *dw)
{
    int64_t oc = g->o * g->c;
#pragma omp parallel for if (oc * 16 > PAR_MIN)
    for (int64_t p = 0; p < oc; p++) {
        float d[4][4], t[3][4];
        for (int e = 0; e < 16; e++)
            d[e / 4][e % 4] = du[e * oc + p];
        for (int j = 0; j < 4; j++) { /* G^T dU: G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1] */
            t[0][j] = d[0][j] + 0.5f * (d[1][j] + d[2][j]);
            t[1][j] = 0.5f * (d[1][j] - d[2][j]);
            t[2][j] = 0.5f * (d[1][j] + d[2][j]) + d[3][j];
        }
        float *o = dw + p * 9;
        for (int i = 0; i < 3; i++) { /* (G^T dU) G */
            o[3 * i] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
            o[3 * i + 1] = 0.5f * (t[i][1] - t[i][2]);
            o[3 * i + 2] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
        }
    }
}

/* A convolution's tiles, th x tw an image, taken in chunks of whole images
 * (as many as fit WINO_BUDGET, step tiles), and one chunk's workspace:
 * v [16][c][step], the input's transforms, then m [16][o][step]. */
typedef struct {
    int64_t th, tw, all, step;
    float *v, *m;
} chunks;

/* -1: out of memory */
static int chunks_of(rt_exec *x, const conv_geom *g, chunks *ch)
{
    ch->th = (g->oh + 1) / 2, ch->tw = (g->ow + 1) / 2, ch->all = g->n * ch->th * ch->tw;
    int64_t images = WINO_BUDGET / (16 * ch->th * ch->tw * (g->c + g->o));
    images = images < 1 ? 1 : images > g->n ? g->n : images;
    ch->step = images * ch->th * ch->tw;
    ch->v = rt_scratch(x, (size_t)(16 * ch->step * (g->c + g->o)));
    ch->m = ch->v ? ch->v + 16 * g->c * ch->step : NULL;
    return ch->v ? 0 : -1;
}

/* The chunk of tiles from t0: V of every input channel into ch->v, the
 * channels across the threads.  Returns its number of tiles. */
static int64_t chunk_in(const conv_geom *g, const float *in, const chunks *ch, int64_t t0)
{
    int64_t nt = ch->all - t0 < ch->step ? ch->all - t0 : ch->step;
#pragma omp parallel for if (g->c * nt * 16 > PAR_MIN)
    for (int64_t c = 0; c < g->c; c++)
        tiles_in(g, in, ch->th, ch->tw, c, t0, nt, ch->v + c * nt, g->c * nt);
    return nt;
}

/* The convolution of geometry g (that fits) of in by the transformed kernels
 * u, plus bias, into out: chunk by chunk, each step across the threads.
 * -1: out of memory. */
static int wino_forward(rt_exec *x, const conv_geom *g, const float *in, const float *u,
                        const float *bias, float *out)
{
    chunks ch;
    if (chunks_of(x, g, &ch))
        return -1;
    float *v = ch.v, *m = ch.m;
    for (int64_t t0 = 0; t0 < ch.all; t0 += ch.step) {
        int64_t nt = chunk_in(g, in, &ch, t0);
#pragma omp parallel
        {
            omp_set_num_threads(1); /* the GEMMs on this thread alone */
#pragma omp for schedule(static)
            for (int e = 0; e < 16; e++)
                product(g, u, v, nt, m, e);
        }
#pragma omp parallel for if (g->o * nt * 16 > PAR_MIN)
        for (int64_t k = 0; k < g->o; k++)
            tiles_out(g, m + k * nt, g->o * nt, bias ? bias[k] : 0.0f, ch.th, ch.tw, k, t0, nt,
                      out);
    }
    return 0;
}

/* The weights' gradient of a convolution of geometry g that fits: the
 * adjoint of the forward pass, step by step (dU_e = dM_e V_e^T, a GEMM over
 * the tiles, chunk after chunk), so 2.25x fewer multiplications too.
 * -1: out of memory. */
static int wino_grad_weight(rt_exec *x, const conv_geom *g, const float *dy, const float *in,
                            float *du, float *dw)
{
    chunks ch;
    if (chunks_of(x, g, &ch))
        return -1;
    float *v = ch.v, *m = ch.m;
    for (int64_t t0 = 0; t0 < ch.all; t0 += ch.step) {
        int64_t nt = chunk_in(g, in, &ch, t0);
#pragma omp parallel for if (g->o * nt * 16 > PAR_MIN)
        for (int64_t k = 0; k < g->o; k++)
            tiles_dy(g, dy, ch.th, ch.tw, k, t0, nt, m + k * nt, g->o * nt);
#pragma omp parallel
        {
            omp_set_num_threads(1); /* the GEMMs on this thread alone */
#pragma omp for schedule(static)
            for (int e = 0; e < 16; e++)
                rt_gemm1(0, 1, g->o, g->c, nt, 1.0f, m + e * g->o * nt, nt, v + e * g->c * nt,
                         nt, t0 ? 1.0f : 0.0f, du + e * g->o * g->c, g->c);
        }
    }
    weights_grad(g, du, dw);
    return 0;
}

int rt_wino_conv(rt_exec *x, const ir_node *n, char *err, size_t errlen)
{
    int bwd = n->op == IR_OP_CONV2D_GRAD_INPUT, dweight = n->op == IR_OP_CONV2D_GRAD_WEIGHT;
    if ((n->op != IR_OP_CONV2D && !bwd && !dweight) || n->out[0]->type.dtype != IR_F32)
        return 0;
    /* g: the convolution that runs.  The input's gradient of a 3x3 stride-1
       convolution with padding p is one too: dy convolved with the kernels
       turned by 180 degrees, in and out channels swapped, padding 2 - p.
       The weights' gradient is the forward convolution's adjoint. */
    conv_geom g;
    if (bwd) {
        conv_geom f = rt_conv_geometry(n, &n->out[0]->type, &n->in[1]->type, &n->in[0]->type);
        g = f;
        g.c = f.o, g.h = f.oh, g.w = f.ow, g.o = f.c, g.oh = f.h, g.ow = f.w;
        g.ph = 2 - f.ph, g.pw = 2 - f.pw; /* (f's kernel is 3x3 where g fits) */
    } else if (dweight) {
        g = rt_conv_geometry(n, &n->in[1]->type, &n->out[0]->type, &n->in[0]->type);
    } else {
        g = rt_conv_geometry(n, &n->in[0]->type, &n->in[1]->type, &n->out[0]->type);
    }
    if (!rt_wino_fits(&g) || rt_dnnl_beats_wino(x, &g, dweight))
        return 0;
    struct rt_wino *w = state(x);
    if (!w)
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    if (w->off)
        return 0;
    if (rt_exec_nchw(x, n->in[0]))
        return fail(err, errlen, "%s: out of memory", ir_ops[n->op].name);
    /* u[id]: the transformed kernels, or a weight gradient's transformed
       gradient dU */
    int id = n->out[0]->id;
    size_t ufloats = (size_t)(16 * g.o * g.c);
    if (!w->u[id]) {
        if (!(w->u[id] = malloc(ufloats * sizeof(float))))
            return fail(err, errlen, "%s: out of memory for %zu floats of Winograd's weights",
                        ir_ops[n->op].name, ufloats);
        w->bytes += (int64_t)(ufloats * sizeof(float));
    }
    int rc;
    if (dweight) {
        rc = wino_grad_weight(x, &g, IN(0), IN(1), w->u[id], OUT);
    } else {
        int keep = rt_weight_static(x, n->in[1]);
        if (!(keep && x->weights_ready && w->kept[id]))
            transform_weights(&g, IN(1), bwd, w->u[id]);
        w->kept[id] = (unsigned char)keep;
        rc = wino_forward(x, &g, IN(0), w->u[id], !bwd && n->nin == 3 ? IN(2) : NULL, OUT);
    }
    if (rc)
        return fail(err, errlen, "%s: out of memory for Winograd's tiles", ir_ops[n->op].name);
    x->wino_convs++;
    return 1;
}
