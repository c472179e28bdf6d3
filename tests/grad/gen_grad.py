#!/usr/bin/env python3
"""Makes the PyTorch golden files of tests/grad/test_grad.c: gradients and optimizer steps.

    /usr/bin/python3 tests/grad/gen_grad.py [CASE ...]   (needs python3-torch, python3-numpy)

With CASEs (the golden files' names without .txt: lenet, attention_gqa, ...)
it remakes only those; without, every one.

Data come from the fill formula of tests/golden/gen_golden.py (Feed), by gnc tensor name.

  lenet.txt, resnet18.txt  one training step at batch 8 (batchnorm on batch
      statistics), computed in float64 from the float32 data: the loss and, for every parameter by its gnc name, the sum, the
      sum of squares and 8 sampled elements (indices i * 7919 mod n) of its gradient.
  convs.txt  conv1d and conv_transpose2d layers (convs.net), loss mean(b^2) + mean(v^2):
      as lenet.txt, in float64.
  pooling.txt, ...  one per model of ops.net, likewise: ops whose gradients the
      models above do not reach, a parameter x standing for the op's input.
  losses.txt, layers.txt  tests/grad/losses.net (cross_entropy with its options,
      nll_loss, smooth_l1_loss, huber_loss) and layers.net (groupnorm,
      instancenorm, layernorm and batchnorm without affine, embedding's
      padding_idx): the loss and every
      parameter's gradient as above, in float64; attention.txt likewise
      (attention.net: fused attention, causal and not), and attention_gqa.txt
      (attention_gqa.net: grouped-query attention, enable_gqa).
  optim.txt  a parameter p[3, 5] and a target t, loss mse(p, t) (models: optim.net),
      5 steps of each optimizer; p after every step.
"""
import copy
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
    """In float64, from the float32 data: the reference for gnc's float32.  Then the
    same step in float32 twice, NCHW and channels-last (the same arithmetic summed
    in other orders): how far float32 rounding alone moves each gradient."""
    fill = gg.Feed()
    sd = model.state_dict()
    for key, t in sd.items():
        name = to_gnc(key)
        if name is not None:
            t.copy_(fill(name, list(t.shape)))
    initial = copy.deepcopy(model.state_dict())
    image = fill("image", [batch, 1, 28, 28])
    label = fill("label", [batch], integer=True)

    def step(dtype, memory_format=torch.contiguous_format):
        model.load_state_dict(initial)
        model.zero_grad()
        m = model.to(dtype=dtype, memory_format=memory_format)
        m.train()
        loss = F.cross_entropy(m(image.to(dtype).contiguous(memory_format=memory_format)), label)
        loss.backward()
        return loss, [(to_gnc(key), p.grad.detach().double().clone())
                      for key, p in m.named_parameters()]

    loss, grads = step(torch.float64)
    noise = [0.0] * len(grads)
    for fmt in (torch.contiguous_format, torch.channels_last):
        _, g32 = step(torch.float32, fmt)
        for i, ((_, g), (_, h)) in enumerate(zip(grads, g32)):
            noise[i] = max(noise[i], (h - g).pow(2).mean().sqrt().item())
    write_grads(case, "models/%s.net" % case, "batch=%d" % batch, loss, grads, noise)


def write_grads(case, source, define, loss, grads, noise=None):
    """CASE.txt: the loss and, for each (gnc name, gradient), its sum, sum of squares
    and samples; where noise is given, each gradient's rms distance from float32
    runs of the same step (see grad_case)."""
    path = os.path.join(HERE, case + ".txt")
    with open(path, "w") as f:
        header(f)
        f.write("source %s\n" % source)
        if define:
            f.write("define %s\n" % define)
        f.write("loss %.9g\n" % loss.item())
        for name, g in grads:
            g = g.detach().reshape(-1).double()
            n = g.numel()
            idx = [(i * 7919) % n for i in range(SAMPLES)]
            f.write("grad %s %d %.9g %.9g %s\n" % (name, n, g.sum().item(), (g * g).sum().item(),
                                                   " ".join("%.9g" % g[i].item() for i in idx)))
        for (name, _), rms in zip(grads, noise or []):
            f.write("noise %s %.3g\n" % (name, rms))
    print("wrote", os.path.relpath(path, ROOT))


def convs_case():
    """tests/grad/convs.net: F.conv1d and F.conv_transpose2d, in float64."""
    fill = gg.Feed()
    names = [("c1.weight", [6, 2, 3]), ("c1.bias", [6]), ("c2.weight", [5, 6, 2]), ("c2.bias", [5]),
             ("t1.weight", [4, 3, 3, 3]), ("t1.bias", [6]), ("t2.weight", [6, 3, 2, 3])]
    p = {n: fill(n, s).double().requires_grad_() for n, s in names}
    x, z = fill("x", [2, 4, 11]).double(), fill("z", [2, 4, 5, 4]).double()
    a = F.conv1d(x, p["c1.weight"], p["c1.bias"], stride=2, padding=2, dilation=2, groups=2)
    b = F.conv1d(torch.tanh(a), p["c2.weight"], p["c2.bias"])
    u = F.conv_transpose2d(z, p["t1.weight"], p["t1.bias"], stride=2, padding=1, output_padding=1,
                           dilation=(2, 1), groups=2)
    v = F.conv_transpose2d(torch.tanh(u), p["t2.weight"], stride=(1, 2))
    loss = (b * b).mean() + (v * v).mean()
    loss.backward()
    write_grads("convs", "tests/grad/convs.net", None, loss, [(n, p[n].grad) for n, _ in names])


def op_grad_case(case, shapes, loss_of):
    """Model case of tests/grad/ops.net: shapes maps its tensors' gnc names to
    shapes; loss_of(tensors) is the loss, x the parameter.  In float64, as above."""
    fill = gg.Feed()
    ts = {name: fill(name, shape).double() for name, shape in shapes.items()}
    x = ts["x"].requires_grad_()
    loss = loss_of(ts)
    loss.backward()
    path = os.path.join(HERE, case + ".txt")
    with open(path, "w") as f:
        header(f)
        f.write("source tests/grad/ops.net\nmodel %s\nloss %.9g\n" % (case, loss.item()))
        g = x.grad.detach().reshape(-1)
        n = g.numel()
        idx = [(i * 7919) % n for i in range(SAMPLES)]
        f.write("grad x %d %.9g %.9g %s\n" % (n, g.sum().item(), (g * g).sum().item(),
                                             " ".join("%.9g" % g[i].item() for i in idx)))
    print("wrote", os.path.relpath(path, ROOT))


def pooling_loss(ts):
    x, t, u = ts["x"], ts["t"], ts["u"]
    a = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
    b = F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
    c = F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)
    d = F.max_pool2d(x, 3, stride=(3, 2), ceil_mode=True)
    e = F.avg_pool2d(x, 3, stride=(3, 2), ceil_mode=True)
    return F.mse_loss(a + b * c, t) + F.mse_loss(d * e, u)


def adaptive_avgpool_loss(ts):
    x, t, u, v = ts["x"], ts["t"], ts["u"], ts["v"]
    a = F.adaptive_avg_pool2d(x, (4, 5))
    b = F.adaptive_avg_pool2d(x, (11, 6))
    c = F.adaptive_avg_pool2d(x, (3, 2)) + F.adaptive_avg_pool2d(x, 1)
    return F.mse_loss(a * a, t) + F.mse_loss(b * b, u) + F.mse_loss(c, v)


def upsample_loss(ts):
    x, t, u, v, r = ts["x"], ts["t"], ts["u"], ts["v"], ts["r"]
    a = F.interpolate(x, scale_factor=(2, 2))
    b = F.interpolate(x, size=(9, 5))
    c = F.interpolate(x, scale_factor=(1.5, 1.4)) + F.interpolate(x, size=(4, 7))
    d = F.interpolate(x, scale_factor=(1.5, 1.4), mode="bilinear")
    e = F.interpolate(x, size=(4, 7), mode="bilinear", align_corners=True)
    f = F.interpolate(x, size=(2, 3), mode="bilinear") + F.interpolate(x, scale_factor=0.7)
    return (F.mse_loss(a * a, t) + F.mse_loss(b * b * b, u) + F.mse_loss(c * c, v)
            + F.mse_loss(d * e, v) + F.mse_loss(f * f, r))


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


def sdpa(q, k, v, causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention (PyTorch 2) as its documented reference
    computes it; python3-torch 1.13 has no such function.  enable_gqa: k and v
    repeat_interleave'd along dim -3 to q's head count, as that reference does."""
    if enable_gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
    s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


def attention(fill):
    t, u = fill("t", [2, 3, 6, 4]).double(), fill("u", [2, 5, 3]).double()
    ps = [(n, param(fill, n, s)) for n, s in [("q", [2, 3, 6, 4]), ("k", [2, 3, 6, 4]),
                                              ("v", [2, 3, 6, 4]), ("a", [2, 5, 8]),
                                              ("b", [2, 9, 8]), ("c", [2, 9, 3])]]
    q, k, v, a, b, c = (p for _, p in ps)
    loss = (F.mse_loss(sdpa(q * 3, k, v, causal=True), t) +
            F.mse_loss(sdpa(a, b, c, scale=0.6), u))
    return loss, ps


def attention_gqa(fill):
    t, u = fill("t", [2, 4, 6, 3]).double(), fill("u", [6, 5, 4]).double()
    ps = [(n, param(fill, n, s)) for n, s in [("q", [2, 4, 6, 4]), ("k", [2, 2, 6, 4]),
                                              ("v", [2, 2, 6, 3]), ("a", [6, 5, 8]),
                                              ("b", [1, 9, 8]), ("c", [1, 9, 4])]]
    q, k, v, a, b, c = (p for _, p in ps)
    loss = (F.mse_loss(sdpa(q * 3, k, v, causal=True, enable_gqa=True), t) +
            F.mse_loss(sdpa(a, b, c, scale=0.6, enable_gqa=True), u))
    return loss, ps


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


def main(only):
    torch.set_num_threads(1)

    def models(name):
        import torch_fmnist
        return getattr(torch_fmnist, name)()
    cases = {
        "lenet": lambda: grad_case("lenet", models("lenet"), gg.lenet_name),
        "resnet18": lambda: grad_case("resnet18", models("resnet18"), gg.resnet18_name),
        "pooling": lambda: op_grad_case("pooling", {"x": [2, 3, 8, 8], "t": [2, 3, 5, 5],
                                                    "u": [2, 3, 3, 4]}, pooling_loss),
        "adaptive_avgpool": lambda: op_grad_case(
            "adaptive_avgpool", {"x": [2, 3, 9, 6], "t": [2, 3, 4, 5], "u": [2, 3, 11, 6],
                                 "v": [2, 3, 3, 2]}, adaptive_avgpool_loss),
        "upsample": lambda: op_grad_case("upsample", {"x": [2, 3, 3, 5], "t": [2, 3, 6, 10],
                                                      "u": [2, 3, 9, 5], "v": [2, 3, 4, 7],
                                                      "r": [2, 3, 2, 3]}, upsample_loss),
        "optim": optim_case,
        "convs": convs_case,
        "losses": lambda: module_case("losses", losses),
        "layers": lambda: module_case("layers", layers),
        "attention": lambda: module_case("attention", attention),
        "attention_gqa": lambda: module_case("attention_gqa", attention_gqa),
    }
    unknown = [c for c in only if c not in cases]
    if unknown:
        sys.exit("gen_grad.py: no case %s (cases: %s)" % (", ".join(unknown), ", ".join(cases)))
    for name, make in cases.items():
        if not only or name in only:
            make()


if __name__ == "__main__":
    main(sys.argv[1:])
