#!/usr/bin/env python3
"""Makes the PyTorch golden files of tests/grad/test_grad.c: gradients and optimizer steps.

    /usr/bin/python3 tests/grad/gen_grad.py      (needs python3-torch, python3-numpy)

Data come from the fill formula of tests/golden/gen_golden.py (Feed), by gnc tensor name.

  lenet.txt, resnet18.txt  one training step at batch 8 (batchnorm on batch
      statistics), computed in float64 from the float32 data: the loss and, for every parameter by its gnc name, the sum, the
      sum of squares and 8 sampled elements (indices i * 7919 mod n) of its gradient.
  losses.txt, layers.txt  tests/grad/losses.net (cross_entropy with its options,
      nll_loss, smooth_l1_loss, huber_loss) and layers.net (groupnorm,
      instancenorm, layernorm and batchnorm without affine, embedding's
      padding_idx): the loss and every
      parameter's gradient as above, in float64.
  optim.txt  a parameter p[3, 5] and a target t, loss mse(p, t) (models: optim.net),
      5 steps of each optimizer; p after every step.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
import gen_golden as gg  # noqa: E402

SAMPLES = 8


def header(f):
    f.write("# made by tests/grad/gen_grad.py with PyTorch %s; do not edit\n" % torch.__version__)


def grad_case(case, model, to_gnc, batch=8):
    """In float64, from the float32 data: the reference for gnc's float32."""
    fill = gg.Feed()
    sd = model.state_dict()
    for key, t in sd.items():
        name = to_gnc(key)
        if name is not None:
            t.copy_(fill(name, list(t.shape)))
    model = model.double()
    model.train()
    image = fill("image", [batch, 1, 28, 28]).double()
    label = fill("label", [batch], integer=True)
    loss = F.cross_entropy(model(image), label)
    loss.backward()
    path = os.path.join(HERE, case + ".txt")
    with open(path, "w") as f:
        header(f)
        f.write("source models/%s.net\ndefine batch=%d\nloss %.9g\n" % (case, batch, loss.item()))
        for key, p in model.named_parameters():
            g = p.grad.detach().reshape(-1).double()
            n = g.numel()
            idx = [(i * 7919) % n for i in range(SAMPLES)]
            f.write("grad %s %d %.9g %.9g %s\n" % (to_gnc(key), n, g.sum().item(), (g * g).sum().item(),
                                                   " ".join("%.9g" % g[i].item() for i in idx)))
    print("wrote", os.path.relpath(path, ROOT))


def module_case(case, run):
    """tests/grad/CASE.net: run(fill) gives its loss and its parameters by gnc name,
    in float64 from the float32 data; the loss and every parameter's gradient."""
    fill = gg.Feed()
    loss, params = run(fill)
    loss.backward()
    path = os.path.join(HERE, case + ".txt")
    with open(path, "w") as f:
        header(f)
        f.write("source tests/grad/%s.net\nloss %.9g\n" % (case, loss.item()))
        for name, t in params:
            g = t.grad.detach().reshape(-1)
            n = g.numel()
            idx = [(i * 7919) % n for i in range(SAMPLES)]
            f.write("grad %s %d %.9g %.9g %s\n" % (name, n, g.sum().item(), (g * g).sum().item(),
                                                   " ".join("%.9g" % g[i].item() for i in idx)))
    print("wrote", os.path.relpath(path, ROOT))


def param(fill, name, shape):
    return fill(name, shape).double().requires_grad_()


def losses(fill):
    label, label2 = fill("label", [4, 3, 2], integer=True), fill("label2", [6], integer=True)
    z, w = param(fill, "z", [4, 10, 3, 2]), param(fill, "w", [6, 10])
    p, q = param(fill, "p", [5, 4]), param(fill, "q", [5, 4])
    loss = (F.cross_entropy(z * 2, label, label_smoothing=0.1, ignore_index=3) +
            F.cross_entropy(w * 3, label2, label_smoothing=0.25) +
            F.nll_loss(torch.log_softmax(z, 1), label, ignore_index=7) +
            F.smooth_l1_loss(p * 3, q, beta=0.5) + F.smooth_l1_loss(p, q) +
            F.huber_loss(p * 2, q, delta=0.7) + F.smooth_l1_loss(p, q * 2, beta=0.0))
    return loss, [("z", z), ("w", w), ("p", p), ("q", q)]


def layers(fill):
    t = fill("t", [2, 6, 3, 3]).double()
    x = param(fill, "x", [2, 6, 3, 3])
    gw, gb = param(fill, "gn.weight", [6]), param(fill, "gn.bias", [6])
    iw, ib = param(fill, "inorm.weight", [6]), param(fill, "inorm.bias", [6])
    rm, rv = fill("bn.running_mean", [6]).double(), fill("bn.running_var", [6]).double()
    g = F.group_norm(x * 2, 3, gw, gb, eps=1e-5)
    i = F.instance_norm(x, weight=iw, bias=ib, eps=1e-5)
    i2 = F.instance_norm(x * 3, eps=0.01)
    ln = F.layer_norm(x, [3, 3])
    b = F.batch_norm(x, rm, rv, None, None, training=True, eps=1e-5)
    tok, u = fill("tok", [2, 5], integer=True), fill("u", [2, 5, 4]).double()
    ew = param(fill, "emb.weight", [10, 4])
    e = F.embedding(tok, ew, padding_idx=3)
    loss = F.mse_loss(g + i * i2 + ln * b, t) + F.mse_loss(e * e, u)
    return loss, [("x", x), ("gn.weight", gw), ("gn.bias", gb), ("inorm.weight", iw),
                  ("inorm.bias", ib), ("emb.weight", ew)]


def optim_case():
    path = os.path.join(HERE, "optim.txt")
    runs = [
        ("sgd", dict(lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
        ("sgd_momentum", dict(lr=0.1, momentum=0.9, weight_decay=0.01),
         lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
        ("sgd_nesterov", dict(lr=0.05, momentum=0.8, nesterov=True),
         lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True)),
        ("adam", dict(lr=0.01, weight_decay=0.01),
         lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.01)),
        ("adamw", dict(lr=0.01, weight_decay=0.1),
         lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
    ]
    with open(path, "w") as f:
        header(f)
        f.write("source tests/grad/optim.net\n")
        for name, cfg, make in runs:
            fill = gg.Feed()
            p = torch.nn.Parameter(fill("p", [3, 5]))
            t = fill("t", [3, 5])
            opt = make([p])
            f.write("run %s %s\n" % (name, " ".join("%s=%s" % (k, v) for k, v in cfg.items())))
            for step in range(5):
                opt.zero_grad()
                F.mse_loss(p, t).backward()
                opt.step()
                f.write("step %d %s\n" % (step + 1, " ".join("%.9g" % v for v in p.detach().reshape(-1).tolist())))
    print("wrote", os.path.relpath(path, ROOT))


def main():
    torch.set_num_threads(1)
    import torch_fmnist
    grad_case("lenet", torch_fmnist.lenet(), gg.lenet_name)
    grad_case("resnet18", torch_fmnist.resnet18(), gg.resnet18_name)
    optim_case()
    module_case("losses", losses)
    module_case("layers", layers)


if __name__ == "__main__":
    main()
