/* Graph-to-graph transformations.  Each pass is one file with a comment saying
 * what it expects of the IR and what it guarantees afterwards. */
#ifndef GNC_PASSES_H
#define GNC_PASSES_H

#include "diag.h"
#include "ir.h"

typedef enum { AD_SGD, AD_ADAM, AD_ADAMW } ad_optimizer_kind;

/* The optimizer the training step applies; defaults as PyTorch's. */
typedef struct {
    ad_optimizer_kind kind;
    double momentum;        /* SGD */
    int nesterov;           /* SGD */
    double weight_decay;    /* all: L2 added to the gradient; AdamW: decoupled */
    double beta1, beta2, eps;  /* Adam, AdamW */
} ad_optimizer;

/* PyTorch's defaults for kind: momentum 0, betas (0.9, 0.999), eps 1e-8, and
 * weight decay 0 (0.01 for AdamW). */
ad_optimizer ad_optimizer_default(ad_optimizer_kind kind);

/* Names of the run-time scalars a training-step graph reads, as graph inputs. */
#define AD_INPUT_LR   "train.lr"     /* f32[]: the learning rate of this step */
#define AD_INPUT_STEP "train.step"   /* i64[]: steps taken before this one */
#define AD_INPUT_SEED "train.seed"   /* i64[]: the run's seed (dropout masks) */

/* Turns a model graph into one training step: the forward pass in training mode
 * (batchnorm on batch statistics, updating its running statistics; dropout
 * masks), the backward pass from the loss, and the optimizer's update of every
 * trainable parameter.  Reports on d and returns -1 when the graph has no loss
 * or an op on the path to it cannot be differentiated. */
int ad_training_graph(ir_graph *g, const ad_optimizer *opt, diag *d);

#endif
