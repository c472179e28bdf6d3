#!/usr/bin/env python3
"""Makes the PyTorch-exported ONNX models that tests/onnx/torch_models.sh checks gnc against.

    /usr/bin/python3 tests/onnx/gen.py [NAME...]   (needs python3-torch, python3-numpy,
                                                   python3-onnx; NAMEs: only those models)

PyTorch is the second oracle of the ONNX importer (the first is ONNX's own
conformance suite): five models, built here with fixed seeds, are exported with
torch.onnx.export (static shapes, batch 2, do_constant_folding) and kept in
tests/onnx/models/, each as

    NAME.onnx          the model with its weights as initializers
    NAME.input.npy     its input (float32)
    NAME.output.npy    PyTorch's output on it, eval mode (float32)

so that the test needs neither torch nor numpy.  The models:

  lenet      models/lenet.net (../shared/bench/torch_fmnist.py's lenet): 5x5
             convolutions, ReLU, average pooling, three dense layers; 1x28x28
             input; opset 13.  Exported in eval mode, as a user would.  Its
             pools say count_include_pad=False, which changes nothing without
             padding: PyTorch 1.13 exports the default (True) as a Pad of zeros
             before the AveragePool, and Pad is not among the importer's ops.
  resnet18   models/resnet18.net (torch_fmnist.py's d2l ResNet-18: 3x3 stem,
             stride 1, no max-pool, 1x1 shortcut convolutions) at widths
             8-16-32-64 instead of 64-128-256-512, so the file stays small;
             1x28x28 input; opset 15.  Exported with training=PRESERVE from an
             eval-mode model, so the batch norms stay BatchNormalization nodes
             instead of being folded into the convolutions.
  dwcnn      a depthwise-separable CNN: 3x3 convolutions with groups = channels,
             then 1x1 convolutions, each with BatchNormalization and ReLU6 (Clip)
             or ReLU, a stride-2 stage, GlobalAveragePool, Flatten, Linear;
             3x32x32 input; opset 16, training=PRESERVE as resnet18.
  encoder    a two-layer transformer encoder (post-norm as
             nn.TransformerEncoderLayer, batch_first): embed 32, 2 heads,
             feed-forward 64 with ReLU; float input [2, 8, 32]; opset 17, so the
             layer norms export as LayerNormalization.  Written out with
             Linear, matmul, softmax and LayerNorm rather than
             nn.TransformerEncoderLayer, whose export in eval mode may take its
             fused fast path; reshapes use fixed sizes, so no Shape op is left.
  decoder    the encoder's layers with causal self-attention as GPT code writes
             it, the scores divided by sqrt(d / heads): layer 0
             masked_fill(mask == 0, -inf) of a tril buffer (a Where of a bool
             initializer and a -inf Constant), layer 1 an additive buffer of 0
             and -inf; opset 17.  gnc fuses both into attention nodes.

The batch norms' running statistics and affine parameters are drawn (not the
fresh 0/1 a new model has), so that they matter.  Every op of each exported
graph must be one the importer claims (IMPORTER_OPS, from issue 29): a newer
PyTorch that exports something else fails here, not in the test.

Regenerating with the same PyTorch on the same machine reproduces the files
(fixed seeds, one thread); another PyTorch may change them.  Prints each file
and its size.
"""
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "models")
sys.path.insert(0, os.path.join(ROOT, "..", "shared", "bench"))
import torch_fmnist  # noqa: E402

BATCH = 2

# The ops the importer maps (issue 29); Erf is left out, the encoder uses ReLU.
IMPORTER_OPS = {
    "Conv", "Gemm", "MatMul", "BatchNormalization", "Relu", "Sigmoid", "Tanh", "LeakyRelu",
    "Gelu", "Add", "Sub", "Mul", "Div", "MaxPool", "AveragePool", "GlobalAveragePool",
    "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
    "Gather", "Softmax", "LogSoftmax", "LayerNormalization", "Dropout", "Identity",
    "Constant", "Clip", "Pow", "Sqrt", "ReduceMean", "Where",
}


# --- the models ----------------------------------------------------------------


def lenet():
    """torch_fmnist.lenet, its pools without the Pad op (see above)."""
    net = torch_fmnist.lenet()
    for i, m in enumerate(net):
        if isinstance(m, nn.AvgPool2d):
            net[i] = nn.AvgPool2d(2, 2, count_include_pad=False)
    return net


def resnet18_small():
    """torch_fmnist.resnet18 with widths 8-16-32-64: the same layers, 1/64 of the weights."""
    Residual = torch_fmnist.Residual

    def block(cin, cout, n, first=False):
        layers = []
        for i in range(n):
            if i == 0 and not first:
                layers.append(Residual(cin, cout, use_1x1conv=True, strides=2))
            else:
                layers.append(Residual(cout, cout))
        return nn.Sequential(*layers)

    w = (8, 16, 32, 64)
    return nn.Sequential(
        nn.Conv2d(1, w[0], 3, stride=1, padding=1), nn.BatchNorm2d(w[0]), nn.ReLU(),
        block(w[0], w[0], 2, first=True), block(w[0], w[1], 2), block(w[1], w[2], 2),
        block(w[2], w[3], 2),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(w[3], 10))


def separable(cin, cout, stride, act):
    """A depthwise 3x3 convolution (groups = cin) then a pointwise 1x1 one, each
    followed by a batch norm and act."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False),
        nn.BatchNorm2d(cin), act(),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), act())


def dwcnn():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        separable(16, 32, 1, nn.ReLU6),
        separable(32, 64, 2, nn.ReLU),
        separable(64, 64, 1, nn.ReLU6),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(64, 10))


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer(d, heads, ff, dropout=0, batch_first=True,
    norm_first=False) in eval mode, written out: self-attention, add, norm,
    feed-forward, add, norm.  seq is fixed, so every reshape has constant sizes."""

    def __init__(self, batch, seq, d, heads, ff):
        super().__init__()
        self.batch, self.seq, self.d, self.heads = batch, seq, d, heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def heads_of(self, x):  # [b, s, d] -> [b, h, s, d/h]
        b, s, h = self.batch, self.seq, self.heads
        return x.reshape(b, s, h, self.d // h).transpose(1, 2)

    def forward(self, x):
        dh = self.d // self.heads
        q, k, v = self.heads_of(self.q(x)), self.heads_of(self.k(x)), self.heads_of(self.v(x))
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * (1.0 / dh ** 0.5), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(self.batch, self.seq, self.d)
        x = self.norm1(x + self.proj(y))
        return self.norm2(x + self.ff2(F.relu(self.ff1(x))))


def encoder():
    return nn.Sequential(*[EncoderLayer(BATCH, 8, 32, 2, 64) for _ in range(2)])


class DecoderLayer(EncoderLayer):
    """EncoderLayer with causal self-attention, the mask written as GPT code
    writes it: a tril buffer and masked_fill(mask == 0, -inf), or (additive)
    a buffer of 0 on and below the diagonal and -inf above, added to the
    scores; the scores divided by sqrt(d / heads)."""

    def __init__(self, batch, seq, d, heads, ff, additive):
        super().__init__(batch, seq, d, heads, ff)
        self.additive = additive
        tril = torch.tril(torch.ones(seq, seq))
        self.register_buffer("mask", torch.zeros(seq, seq).masked_fill(tril == 0, float("-inf"))
                             if additive else tril)

    def forward(self, x):
        dh = self.d // self.heads
        q, k, v = self.heads_of(self.q(x)), self.heads_of(self.k(x)), self.heads_of(self.v(x))
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dh)
        s = s + self.mask if self.additive else s.masked_fill(self.mask == 0, float("-inf"))
        y = torch.matmul(torch.softmax(s, dim=-1), v)
        y = y.transpose(1, 2).reshape(self.batch, self.seq, self.d)
        x = self.norm1(x + self.proj(y))
        return self.norm2(x + self.ff2(F.relu(self.ff1(x))))


def decoder():
    return nn.Sequential(DecoderLayer(BATCH, 8, 32, 2, 64, False),
                         DecoderLayer(BATCH, 8, 32, 2, 64, True))


def draw_norms(net, g):
    """Running statistics and affine parameters away from a new model's 0 and 1."""
    for m in net.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


# name: (build, input shape without the batch, opset, keep batch norms, input name, output name)
MODELS = {
    "lenet": (lenet, (1, 28, 28), 13, False, "image", "logits"),
    "resnet18": (resnet18_small, (1, 28, 28), 15, True, "image", "logits"),
    "dwcnn": (dwcnn, (3, 32, 32), 16, True, "image", "logits"),
    "encoder": (encoder, (8, 32), 17, False, "x", "y"),
    "decoder": (decoder, (8, 32), 17, False, "x", "y"),
}


def export(name, build, shape, opset, keep_bn, in_name, out_name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = build()
    draw_norms(net, g)
    net.eval()
    x = torch.rand((BATCH,) + shape, generator=g)
    with torch.no_grad():
        y = net(x)
    path = os.path.join(OUT, name + ".onnx")
    mode = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(net, (x,), path, opset_version=opset, do_constant_folding=True,
                      input_names=[in_name], output_names=[out_name], training=mode)
    np.save(os.path.join(OUT, name + ".input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(OUT, name + ".output.npy"), y.numpy().astype(np.float32))

    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = sorted({n.op_type for n in m.graph.node})
    extra = [op for op in ops if op not in IMPORTER_OPS]
    if extra:
        sys.exit(f"gen.py: {name}: PyTorch exported ops the importer does not claim: {extra}")
    if keep_bn and "BatchNormalization" not in ops:
        sys.exit(f"gen.py: {name}: the batch norms were folded away")
    if [i.name for i in m.graph.input] != [in_name] or [o.name for o in m.graph.output] != [out_name]:
        sys.exit(f"gen.py: {name}: inputs {[i.name for i in m.graph.input]}, "
                 f"outputs {[o.name for o in m.graph.output]}")
    print(f"{name}: opset {opset}, {len(m.graph.node)} nodes: {' '.join(ops)}")
    for f in (".onnx", ".input.npy", ".output.npy"):
        p = os.path.join(OUT, name + f)
        print(f"  {os.path.relpath(p, ROOT)}: {os.path.getsize(p)} bytes")


def main():
    torch.set_num_threads(1)
    # PRESERVE with constant folding warns about models in training mode; these
    # are in eval mode, where folding changes no parameter
    warnings.filterwarnings("ignore", message="It is recommended that constant folding")
    os.makedirs(OUT, exist_ok=True)
    for name, spec in MODELS.items():
        if len(sys.argv) < 2 or name in sys.argv[1:]:
            export(name, *spec)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"total {total} bytes in {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
