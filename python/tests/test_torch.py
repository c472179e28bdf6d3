"""gnc.from_torch and PyTorch's weights both ways, against PyTorch itself.

    1. Inference: an MLP, a transformer encoder (nn.TransformerEncoder, two
       layers) and a torchvision-style ResNet-18 built here (no download):
       from_torch, run, the outputs within 1e-5 of the module's, relative to
       their largest.
    2. Training: 5 SGD steps in gnc (from_torch(train=True, loss=...)) and 5
       in PyTorch from the same weights and batches; the losses step by step;
       then session.state_dict() into a fresh copy of the module with
       strict=True, and its tensors against PyTorch's.  The MLP and the
       encoder within 1e-5 relative.  ResNet-18's batch norms amplify
       rounding (two float32 PyTorch runs whose weights differ by 1e-6 part
       differ by 5% of a bias after two steps), so there the reference is
       PyTorch in float64 and each tensor's distance from it must stay within
       10 times PyTorch's own float32 distance from it (as tests/grad does).
       num_batches_tracked comes back advanced by the steps taken.
       The MLP again on two virtual devices (devices=2, strategy auto).
    3. Weights into a session: load_state_dict of another module's weights,
       then its outputs; a missing, an unknown and a misshapen key refused
       with nothing changed.
    4. Names: every parameter of the plans maps to the module's state_dict key
       (TensorInfo.source); `gnc inspect` of a plan compiled from the same
       export shows them ('from NAME'); `gnc run --weights` takes a
       safetensors file under those names where the gnc names differ.
    5. Errors: an op gnc cannot take is named with the PyTorch module it
       came from; train=True without a loss.
    6. docs/api.md's "From PyTorch" example runs.

Run by CTest as python_torch (tests/python.cmake) with the environment of
python_api; exits 77 (skipped) where NumPy or PyTorch is missing.
"""

import copy
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import warnings

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("test_torch: skipped: %s (Debian: python3-numpy, python3-torch)" % e)
    sys.exit(77)

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PYTHON_DIR)
import gnc  # noqa: E402  (the package of this source tree)

torch.set_num_threads(2)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18's layout and names."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for i, (c, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
            setattr(self, "layer%d" % (i + 1),
                    nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c, 1)))
            cin = c
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def mlp():
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(),
                         nn.Linear(16, 3))


def encoder():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2)


def resnet18():
    net = ResNet18()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():  # statistics and affine parameters away from 0 and 1
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return net


# name: (build, input shape, loss, the target's maker, learning rate)
MODELS = {
    "mlp": (mlp, (8, 10), "cross_entropy", lambda g, x: torch.randint(0, 3, (8,), generator=g),
            0.1),
    "encoder": (encoder, (2, 8, 32), "mse", lambda g, x: torch.randn(x.shape, generator=g),
                0.05),
    "resnet18": (resnet18, (8, 3, 64, 64), "cross_entropy",
                 lambda g, x: torch.randint(0, 10, (8,), generator=g), 0.01),
}


def rel(a, b):
    """max |a - b| over max |b|"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def rms(a):
    return float(np.sqrt(np.mean(np.square(np.asarray(a, np.float64))))) if np.size(a) else 0.0


def torch_steps(net, batches, loss, lr):
    """SGD steps of net in train mode on batches [(x, target)]: the losses."""
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    fn = F.cross_entropy if loss == "cross_entropy" else F.mse_loss
    losses = []
    for x, t in batches:
        opt.zero_grad()
        out = fn(net(x.to(next(net.parameters()).dtype)),
                 t if loss == "cross_entropy" else t.to(next(net.parameters()).dtype))
        out.backward()
        opt.step()
        losses.append(out.item())
    return losses


def gnc_feed(loss, x, t):
    target = ("label", t.numpy().astype(np.int32)) if loss == "cross_entropy" else \
        ("target", t.numpy().astype(np.float32))
    return {"input": x.numpy(), target[0]: target[1]}


def write_safetensors(path, tensors):
    """tensors {name: float32 array} as a safetensors file"""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class FromTorch(unittest.TestCase):
    def model(self, name):
        torch.manual_seed(0)
        build, shape, loss, target, lr = MODELS[name]
        net = build()
        x = torch.rand(shape, generator=torch.Generator().manual_seed(2)) * 2 - 1
        return net, x, loss, target, lr

    def check_inference(self, name):
        net, x, _, _, _ = self.model(name)
        with gnc.from_torch(net, x, no_kernels=True) as plan, plan.session(device="cpu") as s:
            self.assertFalse(plan.is_training)
            keys = set(net.state_dict())
            for t in plan.params:  # every weight under its PyTorch name
                self.assertIn(t.source, keys, t.name)
            y = s.run({"input": x.numpy()})["output"]
            with torch.no_grad():
                ref = net.eval()(x).numpy()
            err = rel(y, ref)
            print("%s: inference %s, %.2g of the largest off PyTorch's" % (name, y.shape, err))
            self.assertLess(err, 1e-5)

    def test_inference_mlp(self):
        self.check_inference("mlp")

    def test_inference_encoder(self):
        self.check_inference("encoder")

    def test_inference_resnet18(self):
        self.check_inference("resnet18")

    def train_both(self, name):
        """5 steps each way; gnc's state_dict, PyTorch's module, the losses."""
        net, x, loss, target, lr = self.model(name)
        start = copy.deepcopy(net)
        g = torch.Generator().manual_seed(3)
        batches = []
        for _ in range(5):
            xb = torch.rand(x.shape, generator=g) * 2 - 1
            batches.append((xb, target(g, xb)))
        with gnc.from_torch(net, x, loss=loss, train=True, no_kernels=True) as plan, \
                plan.session(device="cpu") as s:
            self.assertTrue(plan.is_training)
            got = [s.train_step(lr, gnc_feed(loss, xb, t)) for xb, t in batches]
            state = s.state_dict()
        ref = copy.deepcopy(start)
        want = torch_steps(ref, batches, loss, lr)
        back = copy.deepcopy(start)
        result = back.load_state_dict(state, strict=True)  # raises on a missing or extra key
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        return start, back, ref, got, want, batches, loss, lr

    def check_training(self, name):
        _, back, ref, got, want, _, _, _ = self.train_both(name)
        worst_loss = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        worst = max((rel(v.detach().numpy(), ref.state_dict()[k].numpy()), k)
                    for k, v in back.state_dict().items() if v.dtype.is_floating_point)
        print("%s: 5 SGD steps, losses %s against %s (%.2g apart), the worst tensor %s %.2g "
              "off PyTorch's" % (name, ["%.6f" % v for v in got], ["%.6f" % v for v in want],
                                 worst_loss, worst[1], worst[0]))
        self.assertLess(worst_loss, 1e-5)
        self.assertLess(worst[0], 1e-5)

    def test_training_mlp(self):
        self.check_training("mlp")

    def test_training_encoder(self):
        self.check_training("encoder")

    def test_training_resnet18(self):
        start, back, ref32, got, want, batches, loss, lr = self.train_both("resnet18")
        ref64 = copy.deepcopy(start).double()
        want64 = torch_steps(ref64, batches, loss, lr)
        s64, s32, gs = ref64.state_dict(), ref32.state_dict(), back.state_dict()
        worst, checked = (0.0, ""), 0
        for k, v in s64.items():
            if not v.dtype.is_floating_point:
                self.assertTrue(torch.equal(gs[k], s32[k]), "%s: %s, PyTorch %s" % (k, gs[k],
                                                                                     s32[k]))
                continue
            noise = rms(s32[k].double() - v)
            off = rms(gs[k].double() - v)
            bound = 10 * noise + 1e-7 * rms(v)
            checked += 1
            if off / bound > worst[0]:
                worst = (off / bound, k)
            self.assertLessEqual(off, bound, "%s: %.3g from float64, PyTorch float32 %.3g"
                                 % (k, off, noise))
        print("resnet18: 5 SGD steps, losses %s, PyTorch float32 %s, float64 %s; %d tensors "
              "each within 10x PyTorch float32's distance from float64, the nearest the bound "
              "%s at %.2g of it" % (["%.5f" % v for v in got], ["%.5f" % v for v in want],
                                    ["%.5f" % v for v in want64], checked, worst[1], worst[0]))
        self.assertEqual(int(gs["bn1.num_batches_tracked"]), 5)

    def test_training_partitioned(self):
        """The MLP's 5 steps on two virtual devices (strategy auto) as on one."""
        net, x, loss, target, lr = self.model("mlp")
        start = copy.deepcopy(net)
        g = torch.Generator().manual_seed(4)
        batches = []
        for _ in range(5):
            xb = torch.rand(x.shape, generator=g) * 2 - 1
            batches.append((xb, target(g, xb)))
        with gnc.from_torch(net, x, loss=loss, train=True, devices=2,
                            no_kernels=True) as plan, plan.session(device="cpu") as s:
            self.assertEqual(plan.devices, 2)
            got = [s.train_step(lr, gnc_feed(loss, xb, t)) for xb, t in batches]
            state = s.state_dict()
        ref = copy.deepcopy(start)
        want = torch_steps(ref, batches, loss, lr)
        back = copy.deepcopy(start)
        back.load_state_dict(state, strict=True)
        worst = max(rel(v.detach().numpy(), ref.state_dict()[k].numpy())
                    for k, v in back.state_dict().items())
        print("mlp on 2 devices: losses %.2g apart, the worst tensor %.2g off PyTorch's"
              % (max(abs(a - b) / abs(b) for a, b in zip(got, want)), worst))
        self.assertLess(max(abs(a - b) / abs(b) for a, b in zip(got, want)), 1e-5)
        self.assertLess(worst, 1e-5)

    def test_docs_example(self):
        """docs/api.md's "From PyTorch" example runs to its end."""
        path = os.path.join(os.environ.get("GNC_SOURCE_DIR", os.path.dirname(PYTHON_DIR)),
                            "docs", "api.md")
        with open(path) as f:
            text = f.read()
        section = text[text.index("### From PyTorch"):]
        start = section.index("```python\n") + 10
        code = section[start:section.index("\n```", start)]
        scope = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            exec(compile(code, "docs/api.md", "exec"), scope)
        self.assertTrue(np.isfinite(scope["loss"]))
        with torch.no_grad():
            y = scope["net"](scope["x"]).numpy()
        self.assertEqual(y.shape, (64, 10))

    def test_load_state_dict(self):
        net, x, _, _, _ = self.model("encoder")
        other = encoder()  # other weights (the seed has moved on)
        with gnc.from_torch(net, x, no_kernels=True) as plan, plan.session(device="cpu") as s:
            before = s.run({"input": x.numpy()})["output"]
            bad = dict(other.state_dict())
            bad["layers.0.linear1.weight"] = torch.zeros(3, 3)
            with self.assertRaisesRegex(gnc.Error, "layers.0.linear1.weight is f32\\[64, 32\\]"):
                s.load_state_dict(bad)
            missing = dict(other.state_dict())
            del missing["layers.1.norm2.bias"]
            with self.assertRaisesRegex(gnc.Error, "missing layers.1.norm2.bias"):
                s.load_state_dict(missing)
            extra = dict(other.state_dict(), nonsense=torch.zeros(1))
            with self.assertRaisesRegex(gnc.Error, "unexpected nonsense"):
                s.load_state_dict(extra)
            same = s.run()["output"]
            self.assertTrue(np.array_equal(before, same), "a refused load changed the weights")
            self.assertEqual(s.load_state_dict(other.state_dict()), ([], []))
            after = s.run()["output"]
            with torch.no_grad():
                ref = other.eval()(x).numpy()
            self.assertLess(rel(after, ref), 1e-5)
            # numpy arrays under gnc names work too, and come back as written
            w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
            s.load_state_dict({"layers.0.linear1.weight": w}, strict=False)
            self.assertTrue(np.array_equal(s.read_param("layers.0.linear1.weight"), w))
            self.assertFalse(np.array_equal(s.run()["output"], after))

    def test_names_in_plan_files(self):
        net, x, _, _, _ = self.model("resnet18")
        binary = os.environ.get("GNC_BINARY")
        if not binary:
            self.skipTest("GNC_BINARY is not set")
        with tempfile.TemporaryDirectory(dir=os.environ.get("GNC_TEST_DIR")) as tmp:
            model = os.path.join(tmp, "r.onnx")
            net.eval()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(net, (x,), model, opset_version=17, do_constant_folding=False,
                                  training=torch.onnx.TrainingMode.PRESERVE,
                                  input_names=["input"], output_names=["output"])
            plan = os.path.join(tmp, "r.gnc")
            subprocess.run([binary, "compile", model, "-o", plan, "--no-kernels"], check=True,
                           stdout=subprocess.DEVNULL)
            text = subprocess.run([binary, "inspect", plan], check=True, capture_output=True,
                                  text=True).stdout
            for k in net.state_dict():
                if not k.endswith("num_batches_tracked"):
                    self.assertRegex(text, r"from \"?%s\"?\n" % k.replace(".", r"\."))
            # a model whose gnc names differ from the file's: --weights by the source names
            gir = os.path.join(tmp, "m.gir")
            with open(gir, "w") as f:
                f.write('# gnc IR\ngraph m {\n  input %x: f32[1, 2]\n'
                        '  param %w: f32[3, 2] = zeros from "fc.weight"\n'
                        '  param %b: f32[3] = zeros from "fc.bias"\n'
                        '  %y: f32[1, 3] = dense(%x, %w, %b)\n  output y = %y\n}\n')
            weights = os.path.join(tmp, "sd.safetensors")
            write_safetensors(weights, {"fc.weight": np.array([[1, 2], [3, 4], [5, 6]]),
                                        "fc.bias": np.array([10, 20, 30])})
            xs = os.path.join(tmp, "x.npy")
            np.save(xs, np.array([[1, 1]], np.float32))
            out = subprocess.run([binary, "run", gir, "--weights", weights, "--input",
                                  "x=" + xs], check=True, capture_output=True, text=True).stdout
            self.assertRegex(out, r"\[\s*13\s+27\s+41\s*\]")  # x w^T + b: by fc.*

    def test_errors(self):
        class Cumsum(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.cumsum(self.fc(x), dim=1)

        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Cumsum()

            def forward(self, x):
                return self.block(x)

        with self.assertRaises(gnc.Error) as e:
            gnc.from_torch(Outer(), torch.zeros(2, 4), no_kernels=True)
        print("an op gnc lacks: %s" % e.exception)
        self.assertRegex(str(e.exception), r"CumSum.*PyTorch: CumSum in block")
        with self.assertRaisesRegex(gnc.Error, "train=True.*needs a loss"):
            gnc.from_torch(mlp(), torch.zeros(8, 10), train=True)
        with self.assertRaisesRegex(gnc.Error, "loss is cross_entropy or mse"):
            gnc.from_torch(mlp(), torch.zeros(8, 10), loss="hinge")


if __name__ == "__main__":
    unittest.main(verbosity=2)
