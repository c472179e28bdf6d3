/* What one run of a GPU program takes: each step priced by the kind of kernel
 * it runs, on a device model's rates (passes/cost.h), and summed by class.
 *
 *   convolution   cuDNN: 2 MACs' FLOPs / (peak[precision] x gemm_eff[precision]),
 *                 peak by the call's math (exact fp32, TF32, 16-bit); codegen's
 *                 implicit GEMMs at peak x igemm_eff
 *   transpose     cuDNN's own NCHW<->NHWC copies around a tensor-core convolution
 *                 of NCHW tensors (16-bit or TF32): x, w and y each read and
 *                 written once at mem_bw x transpose_eff, a launch each
 *   normalization generated kernels computing a batchnorm or a layernorm (or
 *                 their gradients): their bytes at mem_bw x norm_eff
 *   elementwise   the other generated kernels and copies: bytes at mem_bw x mem_eff
 *   gemm          cuBLASLt: FLOPs at peak x gemm_eff, or bytes at mem_bw
 *   optimizer     generated kernels of sgd and adam, and the kernels that run
 *                 over many tensors in one launch (the update, the weights'
 *                 16-bit copies): bytes at mem_bw x multi_eff
 *   communication NCCL's ring formulas (cost_comm_seconds)
 *
 * A generated kernel's grid of fewer than two blocks per SM keeps only that
 * share busy (cost_grid_seconds).  Every kernel costs dev->launch besides: the
 * gap between two kernels of a CUDA graph.  Steps add up, one after another.
 * Where the device has no peaks (cpu, or flops= given) the classes keep their
 * names and everything is priced at flops and mem_bw, as the IR's cost. */
#include <string.h>

#include "codegen.h"
#include "cost.h"
#include "driver.h"

const char *const drv_class_names[DRV_NCLASSES] = {
    [DRV_CLASS_CONV] = "convolution", [DRV_CLASS_TRANSPOSE] = "transpose",
    [DRV_CLASS_NORM] = "normalization", [DRV_CLASS_ELEMENTWISE] = "elementwise",
    [DRV_CLASS_GEMM] = "gemm", [DRV_CLASS_OPTIMIZER] = "optimizer",
    [DRV_CLASS_COMM] = "communication",
};

/* The share of mem_bw a kind reaches: eff, or 1 for a device without rates. */
static double bw(const cost_device *dev, double eff)
{
    return dev->mem_bw * (eff > 0 ? eff : 1);
}

/* FLOP/s of a library call at precision p: the peak's share, or flops. */
static double rate(const cost_device *dev, ir_precision p)
{
    return dev->peak[p] > 0 ? dev->peak[p] * dev->gemm_eff[p] : dev->flops;
}

/* The share of the SMs a grid of blocks keeps busy: all from two blocks per SM. */
static double busy(const cost_device *dev, int64_t blocks)
{
    if (dev->sms > 0 && blocks > 0 && (double)blocks < 2 * dev->sms)
        return (double)blocks / (2 * dev->sms);
    return 1;
}

_Static_assert((int)PREC_FP32 == (int)PREC_FP32 && (int)PREC_TF32 == (int)PREC_TF32 &&
               (int)PREC_BF16 == (int)PREC_BF16 && (int)PREC_FP16 == (int)PREC_FP16,
               "ir_precision and ir_precision in one order");

static int is_half(ir_dtype t)
{
    return t == IR_BF16 || t == IR_F16;
}

/* The class of a generated kernel: a layout transpose, or by the name codegen
 * gives it, the ops it computes ("relu_grad_batchnorm_grad__x") or its kind
 * ("conv2d_igemm", "multi_sgd": one launch over many tensors). */
static drv_class kernel_class(const cg_kernel *kn)
{
    const char *name = kn->name;
    if (kn->layout)
        return DRV_CLASS_TRANSPOSE;
    if (strstr(name, "igemm"))
        return DRV_CLASS_CONV;
    if (strncmp(name, "multi_", 6) == 0) /* the update, the weights' 16-bit copies */
        return DRV_CLASS_OPTIMIZER;

    const char *ops = strstr(name, "__"); /* the ops, before the value's name */
    size_t len = ops ? (size_t)(ops - name) : strlen(name);
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), name);
    if (strstr(buf, "batchnorm") || strstr(buf, "layernorm"))
        return DRV_CLASS_NORM;
    if (strstr(buf, "sgd") || strstr(buf, "adam"))
        return DRV_CLASS_OPTIMIZER;
    return DRV_CLASS_ELEMENTWISE;
}

/* A cuDNN convolution: its arithmetic; and *transpose_s, *transposes,
 * *transpose_bytes, the copies cuDNN makes around it. */
static double conv_seconds(const cost_device *dev, const cg_conv *c, double *transpose_s,
                           int *transposes, double *transpose_bytes)
{
    double flops = 2.0 * (double)c->n * (double)c->k * (double)c->p * (double)c->q *
                   (double)(c->c / c->groups) * (double)c->r * (double)c->s;
    ir_precision p = is_half(c->dtype) ? (c->dtype == IR_BF16 ? PREC_BF16 : PREC_FP16)
                     : c->math == CG_MATH_TENSOR_OP ? PREC_TF32 : PREC_FP32;
    *transpose_s = 0, *transposes = 0, *transpose_bytes = 0;
    if (dev->peak[p] > 0 && (*transposes = cg_conv_layout_copies(c)) > 0) {
        double esize = is_half(c->dtype) ? 2 : 4;
        double x = (double)c->n * (double)c->c * (double)c->h * (double)c->w;
        double y = (double)c->n * (double)c->k * (double)c->p * (double)c->q;
        double w = (double)c->k * (double)(c->c / c->groups) * (double)c->r * (double)c->s;
        *transpose_bytes = 2 * esize * (x + y + w);
        *transpose_s = *transpose_bytes / bw(dev, dev->transpose_eff) + *transposes * dev->launch;
    }
    return flops / rate(dev, p) + dev->launch;
}

void drv_predict(const cg_program *p, int d, const cost_device *dev, drv_prediction *out,
                 double *step_s)
{
    const cg_device *D = &p->devices[d];
    memset(out, 0, sizeof *out);
    for (int i = 0; i < D->nsteps; i++) {
        const cg_step *st = &D->steps[i];
        const ir_node *n = st->node;
        double t = 0, bytes = (double)(st->read_bytes + st->written_bytes);
        drv_class k = DRV_CLASS_ELEMENTWISE;
        switch (st->kind) {
        case CG_STEP_KERNEL: {
            const cg_launch *l = &st->u.launch;
            int64_t blocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
            k = kernel_class(&p->kernels[l->kernel]);
            double eff = k == DRV_CLASS_NORM ? dev->norm_eff
                       : k == DRV_CLASS_OPTIMIZER ? dev->multi_eff : dev->mem_eff;
            double c = 0, m = bytes / bw(dev, eff);
            if (k == DRV_CLASS_CONV) { /* an implicit GEMM: its arithmetic, or its bytes */
                double f = n ? cost_node_flops(n) : 0;
                double peak = dev->peak[p->opts.precision];
                c = peak > 0 ? f / (peak * dev->igemm_eff) : f / dev->flops;
            }
            t = (c > m ? c : m) / busy(dev, blocks) + dev->launch;
            break;
        }
        case CG_STEP_GEMM: {
            const cg_gemm *g = &st->u.gemm;
            ir_precision pr = is_half(g->type_a) ? (g->type_a == IR_BF16 ? PREC_BF16 : PREC_FP16)
                              : g->compute == CG_COMPUTE_32F_FAST_TF32 ? PREC_TF32 : PREC_FP32;
            double f = n ? cost_node_flops(n) : 0, c = f / rate(dev, pr), m = bytes / dev->mem_bw;
            t = (c > m ? c : m) + dev->launch;
            k = DRV_CLASS_GEMM;
            break;
        }
        case CG_STEP_CONV: {
            double ts, tb;
            int nt;
            t = conv_seconds(dev, &st->u.conv, &ts, &nt, &tb);
            out->by_class[DRV_CLASS_TRANSPOSE] += ts;
            out->bytes[DRV_CLASS_TRANSPOSE] += tb;
            out->kernels[DRV_CLASS_TRANSPOSE] += nt;
            out->launch_s += nt * dev->launch;
            if (step_s)
                step_s[i] = t + ts;
            k = DRV_CLASS_CONV;
            break;
        }
        case CG_STEP_COMM: {
            const cg_comm *c = &st->u.comm;
            int64_t b = c->op == IR_OP_ALL_GATHER ? c->bytes * c->ngroup : c->bytes;
            t = cost_comm_seconds(dev, c->op, c->op == IR_OP_SEND || c->op == IR_OP_RECV
                                                  ? 2 : c->ngroup, b) + dev->launch;
            k = DRV_CLASS_COMM;
            break;
        }
        case CG_STEP_COPY:
            t = 2.0 * (double)st->u.copy.bytes / bw(dev, dev->mem_eff) + dev->launch;
            bytes = 2.0 * (double)st->u.copy.bytes;
            break;
        }
        out->by_class[k] += t;
        out->bytes[k] += bytes;
        out->kernels[k]++;
        out->launch_s += dev->launch;
        if (step_s && st->kind != CG_STEP_CONV)
            step_s[i] = t;
    }
    for (int k = 0; k < DRV_NCLASSES; k++)
        out->seconds += out->by_class[k];
}

double drv_run_seconds(const cg_program *p, int d, const cost_device *dev, double *launch_s)
{
    drv_prediction r;
    drv_predict(p, d, dev, &r, NULL);
    if (launch_s)
        *launch_s = r.launch_s;
    return r.seconds;
}
