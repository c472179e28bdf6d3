"""The Python module (python/gnc/) over libgnc, checked against NumPy.

    1. Plans: a plan file made by the gnc command, loaded from the file and
       from its bytes; plans compiled by gnc.compile; their inputs and outputs.
    2. Inference: LeNet with the weights a session drew (read back from the
       checkpoint it saves) and a two-layer perceptron with weights this test
       chose (given through a safetensors file it writes), both against a
       float64 forward pass computed here with NumPy; the loss likewise.
    3. Training: one SGD step of the perceptron against its gradient computed
       here, steps that lower the loss (the perceptron's and LeNet's), and a
       checkpoint that a new session resumes from to the same bits.
    4. Errors: wrong shapes, dtypes, strides and names, missing files, bad
       models, unknown devices and cuda without a driver, closed objects, and
       no libgnc to be found: gnc.Error with libgnc's status and message.
    5. Resources: context managers, close() of a plan with open sessions, the
       ResourceWarning of an object dropped unclosed.
    6. docs/api.md's example, run: it prints what the C example prints.
    7. Installing: `pip install --no-build-isolation --no-index` of a copy of
       python/ into a venv (offline), then the module from there, and libgnc
       found next to the package.

Run by CTest as python_api (tests/python.cmake) with GNC_LIBRARY (the libgnc
just built), GNC_BINARY (the gnc command), GNC_API_EXAMPLE (the C example,
api_example), GNC_SOURCE_DIR and GNC_TEST_DIR (a scratch folder); exits 77
(skipped) where NumPy is missing.
"""

import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import warnings

try:
    import numpy as np
except ImportError:
    print("test_gnc: skipped: NumPy is not installed (Debian: python3-numpy)")
    sys.exit(77)

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PYTHON_DIR)
import gnc  # noqa: E402  (the package of this source tree)

SOURCE_DIR = os.environ.get("GNC_SOURCE_DIR", os.path.dirname(PYTHON_DIR))
LENET = os.path.join(SOURCE_DIR, "models", "lenet.net")
WORK = None  # the scratch folder, made in setUpModule

TINY = """\
model tiny(batch = 6) {
    input x: f32[batch, 5]
    input target: f32[batch, 3]
    y = dense(relu(dense(x, 4, name = "a")), 3, name = "b")
    output y
    loss mse(y, target)
}
"""


def setUpModule():
    global WORK
    base = os.environ.get("GNC_TEST_DIR")
    if base:
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        WORK = base
    else:
        WORK = tempfile.mkdtemp(prefix="gnc-python-")
    with open(os.path.join(WORK, "tiny.net"), "w") as f:
        f.write(TINY)


def tearDownModule():
    if not os.environ.get("GNC_TEST_DIR"):  # a folder of its own: gone
        shutil.rmtree(WORK, ignore_errors=True)


def work(name):
    return os.path.join(WORK, name)


# ---- safetensors with the standard library (and NumPy for the arrays) ----

_ST_DTYPES = {"F32": "<f4", "I32": "<i4", "I64": "<i8", "U8": "u1"}


def read_safetensors(path):
    """{name: float64 array}, metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        a = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=_ST_DTYPES[t["dtype"]])
        tensors[name] = a.reshape(t["shape"]).astype(np.float64)
    return tensors, header.get("__metadata__", {})


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(a)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- the models in float64 NumPy ----

def conv2d(x, w, b, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("ncijkl,ockl->noij", windows, w) + b[None, :, None, None]


def avgpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


def dense(x, p, name):
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def relu(x):
    return np.maximum(x, 0)


def lenet(p, image):
    x = avgpool2(relu(conv2d(image.astype(np.float64), p["conv1.weight"], p["conv1.bias"], 2)))
    x = avgpool2(relu(conv2d(x, p["conv2.weight"], p["conv2.bias"], 0)))
    x = relu(dense(x.reshape(len(x), -1), p, "fc1"))
    return dense(relu(dense(x, p, "fc2")), p, "fc3")


def cross_entropy(logits, label):
    m = logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(axis=1)) + m[:, 0]
    return float(np.mean(lse - logits[np.arange(len(label)), label]))


def tiny(p, x):
    return dense(relu(dense(x.astype(np.float64), p, "a")), p, "b")


def tiny_sgd(p, x, t, lr):
    """The parameters after one SGD step on mse(tiny(x), t), and the loss."""
    x = x.astype(np.float64)
    z = dense(x, p, "a")
    h = relu(z)
    y = dense(h, p, "b")
    dy = 2 * (y - t) / y.size
    dz = (dy @ p["b.weight"]) * (z > 0)
    grads = {"b.weight": dy.T @ h, "b.bias": dy.sum(0), "a.weight": dz.T @ x,
             "a.bias": dz.sum(0)}
    return {k: p[k] - lr * g for k, g in grads.items()}, float(np.mean((y - t) ** 2))


def tiny_weights(seed):
    rng = np.random.default_rng(seed)
    return {"a.weight": rng.normal(0, 0.5, (4, 5)), "a.bias": rng.normal(0, 0.1, 4),
            "b.weight": rng.normal(0, 0.5, (3, 4)), "b.bias": rng.normal(0, 0.1, 3)}


def tiny_batch(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(0, 1, (6, 5)).astype(np.float32),
            "target": rng.normal(0, 1, (6, 3)).astype(np.float32)}


def lenet_batch(seed, n):
    rng = np.random.default_rng(seed)
    return {"image": rng.random((n, 1, 28, 28), dtype=np.float32),
            "label": rng.integers(0, 10, n, dtype=np.int32)}


def gnc_command(*args):
    binary = os.environ.get("GNC_BINARY") or os.path.join(SOURCE_DIR, "build", "gnc")
    subprocess.run([binary] + list(args), check=True, stdout=subprocess.DEVNULL)


class TestPlans(unittest.TestCase):
    def test_library(self):
        # libgnc's version is CMakeLists.txt's; the module's own copies agree
        self.assertEqual(gnc.version(), os.environ.get("GNC_VERSION", gnc.version()))
        self.assertEqual(gnc.__version__, gnc.version())
        self.assertEqual(gnc._lib.ABI_VERSION, ".".join(gnc.version().split(".")[:2]))
        with open(os.path.join(PYTHON_DIR, "pyproject.toml")) as f:
            self.assertIn('version = "%s"' % gnc.version(), f.read())
        if os.environ.get("GNC_LIBRARY"):
            self.assertEqual(os.path.realpath(gnc.library_path()),
                             os.path.realpath(os.environ["GNC_LIBRARY"]))

    def test_file_and_bytes(self):
        gnc_command("compile", LENET, "-D", "batch=3", "-o", work("lenet3.gnc"))
        with open(work("lenet3.gnc"), "rb") as f:
            data = f.read()
        batch = lenet_batch(1, 3)
        outputs = []
        for plan in (gnc.load_plan(work("lenet3.gnc")), gnc.load_plan_bytes(data),
                     gnc.load_plan_bytes(memoryview(bytearray(data)))):
            with plan:
                self.assertEqual(plan.devices, 1)
                self.assertFalse(plan.is_training)
                self.assertEqual([(t.name, t.dtype, t.shape, t.nbytes) for t in plan.inputs],
                                 [("image", "f32", (3, 1, 28, 28), 3 * 784 * 4),
                                  ("label", "i32", (3,), 12)])
                self.assertEqual(plan.input("label").numpy_dtype, np.int32)
                out = plan.output("logits")
                self.assertEqual((out.dtype, out.shape, out.numpy_dtype), ("f32", (3, 10),
                                                                          np.float32))
                self.assertIn("logits", repr(plan))
                with plan.session(device="cpu", seed=2) as s:
                    self.assertEqual(s.device, "cpu")
                    self.assertIsNone(s.warning)
                    outputs.append(s.run(batch)["logits"])
        self.assertEqual(outputs[0].shape, (3, 10))
        for y in outputs[1:]:
            self.assertTrue(np.array_equal(y, outputs[0]), "a plan from bytes runs otherwise")

    def test_compile(self):
        with gnc.compile(LENET, defines={"batch": 2}, train=True, momentum=0.9,
                         no_kernels=True) as step:
            self.assertTrue(step.is_training)
            names = [t.name for t in step.inputs]
            self.assertEqual(names[:2], ["image", "label"])
            self.assertIn("train.lr", names)
            self.assertEqual(step.input("image").shape, (2, 1, 28, 28))
        with gnc.compile(work("tiny.net"), defines=["batch=2"], devices=2) as p:
            self.assertEqual(p.devices, 2)
            self.assertEqual(p.output("y").shape, (2, 3))

    def test_compile_bytes(self):
        # the bytes of a model compile as its file does: the same outputs
        with open(LENET, "rb") as f:
            text = f.read()
        batch = lenet_batch(7, 4)
        with gnc.compile(LENET, defines={"batch": 4}) as a, \
                gnc.compile_bytes(text, "lenet.net", defines={"batch": 4}) as b, \
                a.session(device="cpu", seed=3) as sa, b.session(device="cpu", seed=3) as sb:
            self.assertTrue(np.array_equal(sa.run(batch)["logits"], sb.run(batch)["logits"]))
        with gnc.compile_bytes(memoryview(bytearray(text)), defines=["batch=2"]) as p:
            self.assertEqual(p.input("image").shape, (2, 1, 28, 28))
        with self.assertRaisesRegex(gnc.Error, r"m\.net:1:1: error"):
            gnc.compile_bytes(b"nonsense(", "m.net")
        with self.assertRaisesRegex(gnc.Error, "NUL"):
            gnc.compile_bytes(text, "a\0b.net")


class TestInference(unittest.TestCase):
    def test_lenet_against_numpy(self):
        batch = lenet_batch(7, 4)
        with gnc.compile(LENET, defines={"batch": 4}) as plan, \
                plan.session(device="cpu", seed=11) as s:
            logits = s.run(batch)["logits"]
            loss = s.loss
            s.save_checkpoint(work("lenet-init.safetensors"))
            again = s.output("logits", out=np.empty((4, 10), np.float32))
        self.assertTrue(np.array_equal(logits, again))
        params, meta = read_safetensors(work("lenet-init.safetensors"))
        self.assertEqual(meta.get("seed"), "11")
        self.assertEqual(len(params), 10)
        want = lenet(params, batch["image"])
        self.assertGreater(np.abs(want).max(), 1e-3)  # not a comparison of zeros
        np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-5)
        self.assertAlmostEqual(loss, cross_entropy(want, batch["label"]), places=5)

    def test_tiny_with_known_weights(self):
        p = tiny_weights(3)
        write_safetensors(work("tiny-known.safetensors"), p)
        batch = tiny_batch(4)
        with gnc.compile(work("tiny.net")) as plan, plan.session(device="cpu") as s:
            before = s.run(batch)["y"]
            self.assertEqual(s.load_checkpoint(work("tiny-known.safetensors")), 0)
            y = s.run()["y"]  # the inputs stay set
            loss = s.loss
        want = tiny(p, batch["x"])
        self.assertFalse(np.allclose(before, want, atol=1e-3), "the file changed nothing")
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        self.assertAlmostEqual(loss, float(np.mean((want - batch["target"]) ** 2)), places=5)

    def test_inputs_converted_when_asked(self):
        batch = lenet_batch(2, 4)
        with gnc.compile(LENET, defines={"batch": 4}) as plan, plan.session(device="cpu") as s:
            want = s.run(batch)["logits"]
            image64 = batch["image"].astype(np.float64)
            fortran = np.asfortranarray(batch["image"])
            big_endian = batch["image"].astype(">f4")
            for image in (image64, fortran, big_endian, batch["image"].tolist()):
                s.set_input("image", np.zeros((4, 1, 28, 28), np.float32))
                s.set_input("image", image, convert=True)
                self.assertTrue(np.array_equal(s.run()["logits"], want))
            s.set_input("label", batch["label"].astype(np.int64), convert=True)
            self.assertTrue(np.array_equal(s.run()["logits"], want))


class TestTraining(unittest.TestCase):
    def test_one_sgd_step_against_numpy(self):
        p = tiny_weights(5)
        batch = tiny_batch(6)
        write_safetensors(work("tiny-start.safetensors"), p)
        with gnc.compile(work("tiny.net"), train=True) as plan, \
                plan.session(device="cpu") as s:
            self.assertTrue(plan.is_training)
            s.load_checkpoint(work("tiny-start.safetensors"))
            loss = s.train_step(0.5, batch)
            self.assertEqual(s.step, 1)
            s.save_checkpoint(work("tiny-step1.safetensors"))
        want, want_loss = tiny_sgd(p, batch["x"], batch["target"], 0.5)
        self.assertAlmostEqual(loss, want_loss, places=5)
        got, meta = read_safetensors(work("tiny-step1.safetensors"))
        self.assertEqual(meta.get("step"), "1")
        for name in want:
            self.assertGreater(np.abs(want[name] - p[name]).max(), 1e-4, name + " did not move")
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)

    def test_loss_falls_and_checkpoint_resumes(self):
        batch = tiny_batch(8)
        with gnc.compile(work("tiny.net"), train=True, momentum=0.9) as plan:
            with plan.session(device="cpu", seed=1) as a:
                a.set_inputs(batch)
                losses = [a.train_step(0.05) for _ in range(20)]
                a.save_checkpoint(work("tiny-20.safetensors"))
                after = [a.train_step(0.05) for _ in range(3)]
            self.assertLess(losses[-1], 0.7 * losses[0], losses)
            with plan.session(device="cpu", seed=99) as b:
                self.assertEqual(b.load_checkpoint(work("tiny-20.safetensors")), 20)
                resumed = [b.train_step(0.05, batch) for _ in range(3)]
                self.assertEqual(b.step, 23)
            self.assertEqual(resumed, after, "resumed from the checkpoint, other losses")
        # an inference session takes the trained weights: two give the same
        # outputs, and those of the weights in the file
        with gnc.compile(work("tiny.net")) as inf:
            ys = []
            for seed in (1, 2):
                with inf.session(device="cpu", seed=seed) as s:
                    s.load_checkpoint(work("tiny-20.safetensors"))
                    ys.append(s.run(batch)["y"])
        self.assertTrue(np.array_equal(ys[0], ys[1]))
        params, _ = read_safetensors(work("tiny-20.safetensors"))
        np.testing.assert_allclose(ys[0], tiny(params, batch["x"]), rtol=1e-5, atol=1e-6)

    def test_lenet_steps(self):
        batch = lenet_batch(3, 8)
        with gnc.compile(LENET, defines={"batch": 8}, train=True, momentum=0.9) as plan, \
                plan.session(device="cpu", seed=4) as s:
            first = s.train_step(0.05, batch)
            for _ in range(19):
                last = s.train_step(0.05)
        self.assertLess(last, 0.9 * first, (first, last))


class TestErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plan = gnc.compile(LENET, defines={"batch": 4})
        cls.s = cls.plan.session(device="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.s.close()
        cls.plan.close()

    def raises(self, status, text, f, *args, **kwargs):
        with self.assertRaises(gnc.Error) as cm:
            f(*args, **kwargs)
        self.assertEqual(cm.exception.status, status, cm.exception.message)
        self.assertIn(text, cm.exception.message)
        self.assertEqual(str(cm.exception), cm.exception.message)
        return cm.exception.message

    def test_inputs(self):
        A = gnc.Status.ARGUMENT
        s = self.s
        msg = self.raises(A, "got shape [4, 1, 28, 27]", s.set_input, "image",
                          np.zeros((4, 1, 28, 27), np.float32))
        self.assertIn("input image is f32[4, 1, 28, 28]", msg)
        self.raises(A, "got float64", s.set_input, "image", np.zeros((4, 1, 28, 28)))
        self.raises(A, "got >f4", s.set_input, "image", np.zeros((4, 1, 28, 28), ">f4"))
        self.raises(A, "strided", s.set_input, "image",
                    np.zeros((4, 1, 28, 56), np.float32)[..., ::2])
        self.raises(A, "not a NumPy array", s.set_input, "label", [0, 1, 2, 3])
        self.raises(A, "cannot convert", s.set_input, "label", np.zeros(4), convert=True)
        self.raises(A, "got shape [5]", s.set_input, "label", np.zeros(5, np.int64),
                    convert=True)
        self.raises(A, "no input 'nope'", s.set_input, "nope", np.zeros(1, np.float32))
        self.raises(A, "no output 'probs'", s.output, "probs")
        self.raises(A, "out must be", s.output, "logits", out=np.empty((4, 10)))

    def test_libgnc_messages(self):
        # these come from libgnc, as the C API words them (tests/api/test_api.c)
        with gnc.compile(LENET, defines={"batch": 4}) as plan:
            with plan.session(device="cpu") as s:
                self.raises(gnc.Status.ARGUMENT, "no results yet", s.output, "logits")
                self.raises(gnc.Status.ARGUMENT, "no training step", s.train_step, 0.1)
                self.raises(gnc.Status.IO, "none.safetensors", s.load_checkpoint,
                            work("none.safetensors"))
                self.raises(gnc.Status.IO, "", s.save_checkpoint, "/nonexistent-dir/x.st")
        with gnc.compile(work("tiny.net")) as tiny_plan, tiny_plan.session(device="cpu") as t:
            t.save_checkpoint(work("tiny-any.safetensors"))
            self.raises(gnc.Status.FORMAT, "does not match the model", self.s.load_checkpoint,
                        work("tiny-any.safetensors"))
        with gnc.compile(work("tiny.net"), train=True) as step, step.session(device="cpu") as t:
            self.raises(gnc.Status.ARGUMENT, "gnc_session_train_step", t.run)
            self.raises(gnc.Status.ARGUMENT, "", t.train_step, -1.0)
            self.raises(gnc.Status.ARGUMENT, "", t.train_step, float("nan"))
            self.raises(gnc.Status.ARGUMENT, "", t.save_checkpoint, work("neg.st"), step=-5)
            self.assertFalse(os.path.exists(work("neg.st")))

    def test_files_and_models(self):
        self.raises(gnc.Status.IO, "missing.gnc: cannot read", gnc.load_plan,
                    work("missing.gnc"))
        self.raises(gnc.Status.FORMAT, "not a gnc plan file", gnc.load_plan_bytes,
                    b"hello, world")
        with open(work("bad.net"), "w") as f:
            f.write("model m(batch = 4) {\n  input x: f32[batch, 8]\n  y = relu(z)\n"
                    "  output y\n}\n")
        self.raises(gnc.Status.FORMAT, "bad.net:3:12: error: unknown name 'z'", gnc.compile,
                    work("bad.net"))
        self.raises(gnc.Status.ARGUMENT, "NAME=VALUE", gnc.compile, LENET, defines=["batch"])
        self.raises(gnc.Status.ARGUMENT, "unknown precision 'fp8'", gnc.compile, LENET,
                    precision="fp8")

    def test_devices(self):
        self.raises(gnc.Status.ARGUMENT, "unknown device 'tpu'", self.plan.session,
                    device="tpu")
        # cuda where the driver cannot load, even on a machine with a GPU
        old = os.environ.get("GNC_CUDA_LIBDIR")
        os.environ["GNC_CUDA_LIBDIR"] = "/nonexistent-gnc"
        try:
            msg = self.raises(gnc.Status.UNSUPPORTED, "", self.plan.session, device="cuda")
            self.assertRegex(msg, "CUDA (driver|runtime)")
        finally:
            if old is None:
                del os.environ["GNC_CUDA_LIBDIR"]
            else:
                os.environ["GNC_CUDA_LIBDIR"] = old
        self.raises(gnc.Status.ARGUMENT, "", self.plan.session, device="cpu", timeout_s=-1)
        # the options' struct as gnc.h has it, its last member share_gpus
        # included (a shorter one would leave the library reading past it)
        fields = [f[0] for f in gnc._lib.SessionOptionsStruct._fields_]
        self.assertEqual(fields, ["device", "seed", "eager", "timeout_s", "share_gpus"])
        with self.plan.session(device="cpu", share_gpus=True) as s:
            self.assertEqual(s.device, "cpu")

    def test_closed(self):
        plan = gnc.compile(work("tiny.net"))
        s = plan.session(device="cpu")
        s.close()
        s.close()  # twice is fine
        self.assertTrue(s.closed)
        self.raises(gnc.Status.ARGUMENT, "the session is closed", s.run)
        self.raises(gnc.Status.ARGUMENT, "the session is closed", s.set_input, "x",
                    np.zeros((6, 5), np.float32))
        plan.close()
        self.raises(gnc.Status.ARGUMENT, "the plan is closed", plan.session)
        self.raises(gnc.Status.ARGUMENT, "needs a gnc.Plan", gnc.Session, "tiny.gnc")

    def test_no_library(self):
        code = ("import gnc\ntry:\n    gnc.version()\nexcept gnc.LibraryNotFound as e:\n"
                "    print(e.status.name, e)\n")
        env = dict(os.environ, GNC_LIBRARY=work("nowhere/libgnc.so"), PYTHONPATH=PYTHON_DIR)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("IO cannot find libgnc; looked at: GNC_LIBRARY=" +
                      work("nowhere/libgnc.so"), out)
        # without GNC_LIBRARY, in a copy of the package in a checkout without
        # a build: every place is named; then in that checkout's build/
        root = work("checkout")
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(os.path.join(PYTHON_DIR, "gnc"), os.path.join(root, "python", "gnc"),
                        ignore=shutil.ignore_patterns("__pycache__", "libgnc.so*"))
        os.makedirs(os.path.join(root, "include", "gnc"))
        open(os.path.join(root, "include", "gnc", "gnc.h"), "w").close()
        env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"))
        env.pop("GNC_LIBRARY", None)
        code += "else:\n    print('found', gnc.library_path())\n"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        if out.startswith("found"):
            self.skipTest("a libgnc is installed where the loader finds it: " + out)
        for place in ("GNC_LIBRARY (not set)", os.path.join(root, "python", "gnc", "libgnc.so*"),
                      "find_library('gnc')", os.path.join(root, "build", "libgnc.so")):
            self.assertIn(place, out)
        os.makedirs(os.path.join(root, "build"))
        shutil.copy(os.environ.get("GNC_LIBRARY") or gnc.library_path(),
                    os.path.join(root, "build", "libgnc.so"))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertEqual(out.strip(), "found " + os.path.join(root, "build", "libgnc.so"))


class TestResources(unittest.TestCase):
    def test_plan_outlives_its_sessions(self):
        plan = gnc.compile(work("tiny.net"))
        s = plan.session(device="cpu")
        plan.close()  # s still needs it: freed when s closes
        self.assertTrue(plan.closed)
        self.assertIsNotNone(plan._handle)
        y = s.run(tiny_batch(1))["y"]
        self.assertEqual(y.shape, (6, 3))
        s.close()
        self.assertIsNone(plan._handle)

    def test_with_closes(self):
        with gnc.compile(work("tiny.net")) as plan:
            with plan.session(device="cpu") as s:
                s.run(tiny_batch(1))
            self.assertTrue(s.closed)
        self.assertIsNone(plan._handle)

    def test_dropped_unclosed(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = gnc.compile(work("tiny.net"))
            s = plan.session(device="cpu")
            del s, plan
            gc.collect()
        texts = sorted(str(w.message) for w in caught if w.category is ResourceWarning)
        self.assertEqual(texts, ["gnc.Plan was not closed", "gnc.Session was not closed"])


class TestExample(unittest.TestCase):
    """docs/api.md's Python example, cut out of the page and run: it prints
    what the C example (api_example, GNC_API_EXAMPLE) prints on the same plan,
    and what this module computes for it."""

    def test_doc_example(self):
        with open(os.path.join(SOURCE_DIR, "docs", "api.md")) as f:
            doc = f.read()
        section = doc[doc.index("\n## Python\n"):]
        start = section.index("```python\n") + len("```python\n")
        code = section[start:section.index("```", start)]
        self.assertIn("Runs the plan in sys.argv[1]", code)
        with open(work("example.py"), "w") as f:
            f.write(code)
        gnc_command("compile", LENET, "-D", "batch=4", "-o", work("lenet4.gnc"))
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
        run = subprocess.run([sys.executable, work("example.py"), work("lenet4.gnc")], env=env,
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with gnc.load_plan(work("lenet4.gnc")) as plan, \
                plan.session(device="cpu", seed=1) as s:
            first = s.run({"image": np.zeros((4, 1, 28, 28), np.float32),
                           "label": np.zeros(4, np.int32)})["logits"][0, 0]
        self.assertEqual(run.stdout, "logits: 40 values, the first %g\n" % first)
        c_example = os.environ.get("GNC_API_EXAMPLE")
        if c_example:
            c = subprocess.run([c_example, work("lenet4.gnc")], capture_output=True, text=True)
            self.assertEqual((c.returncode, c.stdout), (0, run.stdout))
        bad = subprocess.run([sys.executable, work("example.py"), work("missing.gnc")], env=env,
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("example: " + work("missing.gnc") + ": cannot read", bad.stderr)


class TestInstall(unittest.TestCase):
    def test_pip_install_offline(self):
        venv = work("venv")
        shutil.rmtree(venv, ignore_errors=True)
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                              capture_output=True, text=True)
        pip = os.path.join(venv, "bin", "pip")
        if made.returncode != 0 or not os.path.exists(pip):
            self.skipTest("no venv with pip here (Debian: python3-venv): " + made.stderr.strip())
        # a copy, so that the build leaves nothing in the source tree; libgnc
        # beside the package, so that it goes with it
        src = work("python-src")
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns(
            "__pycache__", "build", "*.egg-info", "libgnc.so*"))
        library = os.environ.get("GNC_LIBRARY") or gnc.library_path()
        shutil.copy(library, os.path.join(src, "gnc", "libgnc.so"))
        # nothing shared with other runs or the user's pip: no wheel cache (pip
        # kept each run's wheel, libgnc inside, in ~/.cache/pip, keyed by this
        # folder's path), no pip configuration, temporary files in WORK
        tmp = work("pip-tmp")
        os.makedirs(tmp, exist_ok=True)
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
                   PIP_CONFIG_FILE=os.devnull, TMPDIR=tmp)
        env.pop("PYTHONPATH", None)
        done = subprocess.run([pip, "install", "--no-build-isolation", "--no-index", src],
                              env=env, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        env.pop("GNC_LIBRARY", None)
        code = ("import gnc\nprint(gnc.__file__)\nprint(gnc.library_path())\n"
                "print(gnc.version())\n")
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code], env=env,
                             cwd=WORK, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        where, lib, version = out.stdout.split("\n")[:3]
        self.assertTrue(where.startswith(os.path.realpath(venv)) or where.startswith(venv), where)
        self.assertEqual(os.path.dirname(lib), os.path.dirname(where))
        self.assertEqual(version, gnc.version())


if __name__ == "__main__":
    unittest.main(verbosity=2)
