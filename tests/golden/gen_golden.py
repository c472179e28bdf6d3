#!/usr/bin/env python3
"""Makes the PyTorch golden files that tests/golden/test_golden.c checks gnc against.

    /usr/bin/python3 tests/golden/gen_golden.py      (needs python3-torch, python3-numpy)

Each case is a gnc model (tests/golden/ops.net, models/resnet18.net, models/lenet.net)
and the same computation in PyTorch, both fed the same data: every input, parameter
and buffer is filled by `fill` below, a formula of the tensor's gnc name that
test_golden.c computes identically in uint64 arithmetic, so no weights are stored.
Each file NAME.txt holds, after a comment line:

    source FILE             the .net file, relative to the source root
    model NAME              the model in it (absent: the file's last)
    define NAME=VALUE       -D overrides of model parameters
    tensor NAME D0 D1 ...   every tensor PyTorch was fed, by its gnc name and shape
    output NAME COUNT       a gnc output ("loss": the loss), then COUNT values
    sample NAME COUNT       a gnc value inside the graph, then COUNT "index value" pairs

Values are PyTorch's (float32, eval mode) printed with %.9g.  Regenerating with the
same PyTorch reproduces the files byte for byte (one thread, fixed data).

Parameter names, gnc -> PyTorch (the nn.Sequential models of
../shared/bench/torch_fmnist.py; PyTorch index = position in the Sequential):

  resnet18  stem.{weight,bias}                -> 0.{weight,bias}        (Conv2d)
            batchnorm0.*                      -> 1.*                    (BatchNorm2d)
            layerS.blockK.conv2d0.*           -> (S+2).K.conv1.*        S = 1..4, K = 0, 1
            layerS.blockK.batchnorm0.*        -> (S+2).K.bn1.*
            layerS.blockK.conv2d1.*           -> (S+2).K.conv2.*
            layerS.blockK.batchnorm1.*        -> (S+2).K.bn2.*
            layerS.block0.shortcut.*          -> (S+2).0.conv3.*        S = 2..4
            fc.{weight,bias}                  -> 9.{weight,bias}        (Linear)
            batchnorm * = weight, bias, running_mean, running_var; PyTorch's
            num_batches_tracked has no gnc counterpart (it only matters in training
            with momentum=None).
            e.g. layer2.block0.shortcut.weight -> 4.0.conv3.weight
  lenet     conv1 -> 0, conv2 -> 3, fc1 -> 7, fc2 -> 9, fc3 -> 11  (.weight, .bias)

The mapping is checked from both sides: this script fails on a PyTorch tensor the
table does not cover or on two tensors mapped to one name, and test_golden.c fails
unless the `tensor` lines are exactly gnc's inputs, parameters and buffers with the
same shapes.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "..", "shared", "bench"))
import torch_fmnist  # noqa: E402

M64 = (1 << 64) - 1


def fnv1a(name):
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) & M64
    return h


def unit(name, n):
    """n values in [-1, 1): splitmix64 of fnv1a(name) + i * golden gamma."""
    with np.errstate(over="ignore"):
        z = np.uint64(fnv1a(name)) + np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 * 2 - 1


class Feed:
    """Fills tensors by gnc name and remembers each one for the `tensor` lines."""

    def __init__(self):
        self.tensors = {}

    def __call__(self, name, shape, integer=False):
        """The data of gnc tensor `name`; test_golden.c's fill() is the same formula."""
        assert name not in self.tensors, "two tensors named " + name
        self.tensors[name] = list(shape)
        n = int(np.prod(shape)) if shape else 1
        if integer:  # class labels
            return torch.tensor([(i * 7 + 3) % 10 for i in range(n)], dtype=torch.int64).reshape(shape)
        v = unit(name, n)
        if name.endswith(".running_var"):
            v = 1 + 0.5 * v
        elif name.endswith(".running_mean") or name.endswith(".bias"):
            v = 0.1 * v
        elif name.endswith(".weight") and len(shape) == 1:  # batchnorm scale
            v = 1 + 0.1 * v
        elif name.endswith(".weight"):
            # Kaiming-uniform, U(+-sqrt(6 / fan_in)): variance 2 / fan_in, so that
            # activations keep their size through conv + relu and the outputs of the
            # deep models depend on the input, not only on the last biases.
            v = v * np.sqrt(6 / (n / shape[0]))
        return torch.tensor(v.astype(np.float32)).reshape(shape)


def write(case, source, model, defines, feed, outputs, samples=()):
    path = os.path.join(HERE, case + ".txt")
    with open(path, "w") as f:
        f.write("# made by tests/golden/gen_golden.py with PyTorch %s; do not edit\n" % torch.__version__)
        f.write("source %s\n" % source)
        if model:
            f.write("model %s\n" % model)
        for d in defines:
            f.write("define %s\n" % d)
        for name in sorted(feed.tensors):
            f.write("tensor %s %s\n" % (name, " ".join(str(d) for d in feed.tensors[name])))
        for name, t in outputs:
            flat = t.detach().reshape(-1).double().tolist()
            f.write("output %s %d\n" % (name, len(flat)))
            for i in range(0, len(flat), 6):
                f.write(" ".join("%.9g" % v for v in flat[i:i + 6]) + "\n")
        for name, t in samples:
            # 24 elements, one in each 24th of the tensor (every batch item and
            # many channels), at varying offsets within it
            flat = t.detach().reshape(-1).double().tolist()
            step = len(flat) // 24
            idx = [k * step + (k * 7919 + 13) % step for k in range(24)]
            f.write("sample %s %d\n" % (name, len(idx)))
            for i in idx:
                f.write("%d %.9g\n" % (i, flat[i]))
    print("wrote", os.path.relpath(path, ROOT))


def op_cases():
    src = "tests/golden/ops.net"

    def case(name, run):
        feed = Feed()
        write(name, src, name, [], feed, run(feed))

    case("conv_basic", lambda f: [
        ("y", F.conv2d(f("x", [2, 3, 9, 9]), f("c.weight", [4, 3, 3, 3]), f("c.bias", [4])))])
    case("conv_stride_pad", lambda f: [
        ("y", F.conv2d(f("x", [2, 3, 10, 9]), f("c.weight", [5, 3, 3, 2]), f("c.bias", [5]),
                       stride=2, padding=(1, 2)))])
    case("conv_dilation_groups", lambda f: [
        ("y", F.conv2d(f("x", [2, 6, 11, 10]), f("c.weight", [4, 3, 3, 3]), None,
                       padding=1, dilation=2, groups=2))])

    def depthwise(f):
        x = f("x", [2, 4, 9, 8])
        return [("depthwise", F.conv2d(x, f("dw.weight", [8, 1, 3, 3]), f("dw.bias", [8]),
                                       stride=(2, 1), padding=1, groups=4)),
                ("shortcut", F.conv2d(x, f("sc.weight", [6, 4, 1, 1]), f("sc.bias", [6]), stride=2))]
    case("conv_depthwise_1x1", depthwise)

    def convs(f):
        x, z = f("x", [2, 4, 11]), f("z", [2, 4, 5, 4])
        return [("y1", F.conv1d(x, f("c1.weight", [6, 2, 3]), f("c1.bias", [6]), stride=2,
                                padding=2, dilation=2, groups=2)),
                ("y1_plain", F.conv1d(x, f("c1b.weight", [3, 4, 4]))),
                ("yt", F.conv_transpose2d(z, f("t1.weight", [4, 3, 3, 3]), f("t1.bias", [6]),
                                          stride=2, padding=1, output_padding=1, groups=2,
                                          dilation=(2, 1))),
                ("yt_plain", F.conv_transpose2d(z, f("t2.weight", [4, 3, 2, 3]), stride=(1, 2)))]
    case("convs", convs)

    def bn(f, name, x, eps):
        c = x.shape[1]
        return F.batch_norm(x, f(name + ".running_mean", [c]), f(name + ".running_var", [c]),
                            f(name + ".weight", [c]), f(name + ".bias", [c]), training=False, eps=eps)
    case("batchnorm", lambda f: [("y", bn(f, "bn", f("x", [3, 4, 5, 5]), 0.05)),
                                 ("y1d", bn(f, "bn1d", f("z", [6, 4]), 1e-5))])

    def pooling(f):
        x = f("x", [2, 3, 9, 8])
        return [("max", F.max_pool2d(x, 3, stride=2, padding=1)),
                ("max_dilated", F.max_pool2d(x, 2, stride=1, dilation=2)),
                ("max_rect", F.max_pool2d(x, (3, 2), stride=(1, 2), padding=(1, 0))),
                ("avg", F.avg_pool2d(x, 3, stride=2, padding=1)),
                ("avg_exclude", F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)),
                ("avg_plain", F.avg_pool2d(x, 2)),
                ("global", F.adaptive_avg_pool2d(x, 1)),
                ("max_ceil", F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)),
                ("max_ceil_drop", F.max_pool2d(x, 2, stride=2, padding=1, ceil_mode=True)),
                ("max_ceil_rect", F.max_pool2d(x, (4, 3), stride=3, dilation=(1, 2), ceil_mode=True)),
                ("avg_ceil", F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)),
                ("avg_ceil_exclude", F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                                                  count_include_pad=False)),
                ("avg_ceil_plain", F.avg_pool2d(x, 2, ceil_mode=True)),
                ("adaptive", F.adaptive_avg_pool2d(x, (4, 5))),
                ("adaptive_square", F.adaptive_avg_pool2d(x, 5)),
                ("adaptive_tiles", F.adaptive_avg_pool2d(x, (3, 4))),
                ("adaptive_past", F.adaptive_avg_pool2d(x, (11, 13))),
                ("adaptive_one", F.adaptive_avg_pool2d(x, (1, 3)))]
    case("pooling", pooling)

    def upsample(f):
        x = f("x", [2, 3, 4, 5])
        return [("twice", F.interpolate(x, scale_factor=2)),
                ("rect", F.interpolate(x, scale_factor=(3, 1.0))),
                ("sized", F.interpolate(x, size=(8, 15), mode="nearest")),
                ("thrice", F.interpolate(x, scale_factor=3)),
                ("frac", F.interpolate(x, scale_factor=1.5)),
                ("shrink", F.interpolate(x, scale_factor=(0.7, 1.3))),
                ("sized_frac", F.interpolate(x, size=(7, 3))),
                ("bilinear", F.interpolate(x, scale_factor=1.5, mode="bilinear")),
                ("bilinear_copy", F.interpolate(x, scale_factor=(1, 2.5), mode="bilinear")),
                ("bilinear_down", F.interpolate(x, size=(3, 4), mode="bilinear")),
                ("corners", F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True)),
                ("corners_one", F.interpolate(x, size=(1, 8), mode="bilinear",
                                              align_corners=True))]
    case("upsample", upsample)
    case("dense", lambda f: [
        ("y", F.linear(f("x", [5, 12]), f("fc.weight", [7, 12]), f("fc.bias", [7]))),
        ("y3d", F.linear(f("z", [2, 3, 12]), f("fc3d.weight", [4, 12])))])

    def softmax(f):
        x = f("x", [3, 4, 5])
        return [("last", torch.softmax(x, -1)), ("middle", torch.softmax(x, 1)),
                ("large", torch.softmax(x * 100, -1)), ("log", torch.log_softmax(x * 10, -1)),
                ("log_first", torch.log_softmax(x, 0))]
    case("softmax", softmax)

    def unary(f):
        x = f("x", [4, 9])
        q = x * x + 0.5
        return [("y_exp", torch.exp(x * 3)), ("y_log", torch.log(q)), ("y_sqrt", torch.sqrt(q)),
                ("y_rsqrt", torch.rsqrt(q)), ("y_abs", torch.abs(x)),
                ("y_softplus", F.softplus(x * 30)), ("y_hardswish", F.hardswish(x * 5)),
                ("y_leaky", F.leaky_relu(x, 0.2)), ("y_elu", F.elu(x * 3, 0.7)),
                ("y_softsign", F.softsign(x * 3))]
    case("unary", unary)

    def compare(f):
        x, z = f("x", [4, 9]), f("z", [9])
        c = torch.clamp(x, min=-0.3, max=0.4)
        return [("y_max", torch.maximum(x, z)), ("y_min", torch.minimum(x * 2, torch.tensor(0.25))),
                ("y_gt", (x > z).float()), ("y_le", torch.le(x, 0.0).float()),
                ("y_eq", torch.eq(c, 0.4).float()),
                ("y_ge", torch.ge(c, torch.clamp(z, max=0.4)).float()),
                ("y_ne", (x != z).float()), ("y_lt", torch.lt(c, -0.3).float()),
                ("y_where", torch.where(x > 0, x * 3, z)), ("y_pow", torch.pow(x * x + 0.5, 1.5)),
                ("y_cube", x ** 3), ("y_clamp", c), ("y_clamp_max", torch.clamp(x * 2, max=0.1)),
                ("y_gelu_tanh", F.gelu(x * 3, approximate="tanh")),
                ("y_max1", torch.max(x, 1).values), ("y_min0", torch.min(c, 0, keepdim=True).values),
                ("y_max_all", torch.max(x)), ("y_max_ab", torch.max(x, z))]
    case("compare", compare)

    def reduce(f):
        x, t = f("x", [2, 3, 4]), f("t", [2, 3, 4])
        return [("y_sum", x.sum()), ("y_sum1", x.sum(1)),
                ("y_mean02", x.mean((0, 2), keepdim=True)), ("y_mean_last", x.mean(-1)),
                ("y_l1", F.l1_loss(x, t)),
                ("y_bce", F.binary_cross_entropy_with_logits(x * 4, torch.sigmoid(t)))]
    case("reduce", reduce)
    def shaping(f):
        x, v, w = f("x", [3, 6, 5]), f("v", [5]), f("w", [5, 4])
        a, b = torch.split(x, [2, 4], dim=1)
        return [("y_range", x[:, 1:4]), ("y_index", x[-1]), ("y_step", x[..., ::2]),
                ("y_mixed", x[1, 1::3, -2]), ("y_neg", x[:, -4:-1, 3:]), ("y_split", b),
                ("y_chunk", torch.chunk(x, 2, dim=-1)[1]),
                ("y_stack", torch.stack([a, a * 2], dim=1)),
                ("y_squeeze", v.unsqueeze(0).squeeze(0)),
                ("y_expand", v.unsqueeze(1).expand(2, 5, 3)),
                ("y_reflect", F.pad(x, [2, 1], mode="reflect")),
                ("y_replicate", F.pad(x, [1, 2, 0, 1], mode="replicate")),
                ("y_circular", F.pad(x, [1, 2], mode="circular")),
                ("y_constant", F.pad(x, [1, -1, 2, 0], value=0.5)),
                ("y_vm", torch.matmul(v, w)), ("y_mv", torch.matmul(x, v)),
                ("y_dot", torch.matmul(v, v)),
                ("y_argmax", torch.argmax(x, dim=1)), ("y_argmax_all", torch.argmax(x)),
                ("y_arange", torch.arange(-1.5, 2.0, 0.25)), ("y_arange_int", torch.arange(2, 11, 3)),
                ("y_tril", torch.tril(x, diagonal=-1)), ("y_triu", torch.triu(x[0], diagonal=2)),
                ("y_cast", (x * 7).to(torch.int32).float()), ("y_full", torch.full((2, 3), -0.5))]
    case("shaping", shaping)
    case("cross_entropy", lambda f: [
        ("loss", F.cross_entropy(f("x", [6, 10]) * 5, f("label", [6], integer=True)))])
    case("cross_entropy_large", lambda f: [
        ("loss", F.cross_entropy(f("x", [6, 10]) * 200, f("label", [6], integer=True)))])


RESNET18_LAYERS = {"conv1": "conv2d0", "bn1": "batchnorm0", "conv2": "conv2d1",
                   "bn2": "batchnorm1", "conv3": "shortcut"}


def resnet18_name(key):
    """PyTorch state_dict key of resnet18 -> gnc name (None: not a gnc tensor)."""
    p = key.split(".")
    if p[-1] == "num_batches_tracked":
        return None
    if len(p) == 2 and p[0] in ("0", "1", "9"):
        return {"0": "stem", "1": "batchnorm0", "9": "fc"}[p[0]] + "." + p[1]
    if len(p) == 4 and p[0] in ("3", "4", "5", "6") and p[2] in RESNET18_LAYERS:
        return "layer%d.block%s.%s.%s" % (int(p[0]) - 2, p[1], RESNET18_LAYERS[p[2]], p[3])
    raise KeyError("resnet18: no gnc name for PyTorch tensor " + key)


def lenet_name(key):
    p = key.split(".")
    layers = {"0": "conv1", "3": "conv2", "7": "fc1", "9": "fc2", "11": "fc3"}
    if len(p) != 2 or p[0] not in layers:
        raise KeyError("lenet: no gnc name for PyTorch tensor " + key)
    return layers[p[0]] + "." + p[1]


def model_case(case, model, to_gnc, batch, probes):
    """probes: Sequential index -> gnc name of the value that module's output is."""
    feed = Feed()
    for key, t in model.state_dict().items():
        name = to_gnc(key)
        if name is not None:
            t.copy_(feed(name, list(t.shape)))
    model.eval()
    seen = {}
    for i, gnc_name in probes.items():
        model[i].register_forward_hook(lambda m, a, out, gnc_name=gnc_name: seen.__setitem__(gnc_name, out))
    image = feed("image", [batch, 1, 28, 28])
    label = feed("label", [batch], integer=True)
    with torch.no_grad():
        logits = model(image)
        loss = F.cross_entropy(logits, label)
    write(case, "models/%s.net" % case, None, ["batch=%d" % batch], feed,
          [("logits", logits), ("loss", loss)], [(n, seen[n]) for n in probes.values()])


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    op_cases()
    model_case("resnet18", torch_fmnist.resnet18(), resnet18_name, 2,
               {2: "relu0", 3: "layer1.block1.relu1", 4: "layer2.block1.relu1",
                5: "layer3.block1.relu1", 6: "layer4.block1.relu1", 7: "global_avgpool0"})
    model_case("lenet", torch_fmnist.lenet(), lenet_name, 4,
               {2: "avgpool2d0", 5: "avgpool2d1", 8: "relu2"})


if __name__ == "__main__":
    main()
