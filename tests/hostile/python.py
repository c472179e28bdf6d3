#!/usr/bin/python3
"""The Python module (python/gnc/) against hostile use: threads sharing a
session, integers that ctypes would wrap, NUL bytes that C would cut at, and
labels that a conversion would wrap.  Each must be counted exactly or refused
with gnc.Error naming what is wrong, never taken silently.

Run by CTest as hostile_python (tests/python.cmake) with GNC_LIBRARY (the
libgnc just built) and GNC_SOURCE_DIR; exits 77 (skipped) without NumPy.
"""
import os
import sys
import tempfile
import threading
import unittest

try:
    import numpy as np
except ImportError:
    print("SKIP: NumPy is not installed")
    sys.exit(77)

SOURCE_DIR = os.environ.get("GNC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
import gnc  # noqa: E402

LENET = os.path.join(SOURCE_DIR, "models", "lenet.net")
TINY = """\
model tiny(batch = 6) {
    input x: f32[batch, 5]
    input target: f32[batch, 3]
    y = dense(x, 3, name = "fc")
    output y
    loss mse(y, target)
}
"""
A = gnc.Status.ARGUMENT


class Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="gnc-hostile-python-")
        cls.tiny = os.path.join(cls.dir.name, "tiny.net")
        with open(cls.tiny, "w") as f:
            f.write(TINY)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def raises(self, status, text, fn, *args, **kwargs):
        with self.assertRaises(gnc.Error) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.status, status, str(cm.exception))
        self.assertIn(text, str(cm.exception))

    def test_threads_count_every_step(self):
        """Two threads taking 200 steps each on one session: step ends at 400,
        and the checkpoint says so (it ended between 288 and 398 before)."""
        rng = np.random.default_rng(1)
        batch = {"x": rng.standard_normal((6, 5), np.float32),
                 "target": rng.standard_normal((6, 3), np.float32)}
        path = os.path.join(self.dir.name, "threads.safetensors")
        with gnc.compile(self.tiny, train=True) as plan, plan.session(device="cpu") as s:
            s.set_inputs(batch)
            errors = []

            def steps():
                try:
                    for _ in range(200):
                        s.train_step(0.01)
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(e)

            threads = [threading.Thread(target=steps) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
            self.assertEqual(s.step, 400)
            s.save_checkpoint(path)
        with gnc.compile(self.tiny, train=True) as plan, plan.session(device="cpu") as s:
            self.assertEqual(s.load_checkpoint(path), 400)

    def test_labels_never_wrap(self):
        """convert=True takes int64 labels into an int32 input only where every
        value fits: 2^40 would become 0."""
        with gnc.compile(LENET, defines={"batch": 4}) as plan, plan.session(device="cpu") as s:
            s.set_input("label", np.array([0, 1, 2, 3], np.int64), convert=True)
            self.raises(A, "1099511627776 does not fit int32", s.set_input, "label",
                        np.array([0, 1, 2, 2 ** 40], np.int64), convert=True)
            self.raises(A, "-2147483649 does not fit int32", s.set_input, "label",
                        np.array([0, -(2 ** 31) - 1, 2, 3], np.int64), convert=True)
            self.raises(A, "does not fit int32", s.set_input, "label",
                        np.array([0, 1, 2, 2 ** 63], np.uint64), convert=True)

    def test_integers_never_wrap(self):
        """Integers that ctypes would truncate to fit a C type are refused."""
        self.raises(A, "devices 1099511627776 is outside", gnc.compile, self.tiny,
                    devices=2 ** 40)
        self.raises(A, "devices -1 is outside", gnc.compile, self.tiny, devices=-1)
        self.raises(A, "devices must be an integer", gnc.compile, self.tiny, devices=2.5)
        with gnc.compile(self.tiny, train=True) as plan:
            self.raises(A, "seed 1180591620717411303424 is outside", plan.session,
                        device="cpu", seed=2 ** 70)
            self.raises(A, "seed -1 is outside", plan.session, device="cpu", seed=-1)
            with plan.session(device="cpu", seed=2 ** 64 - 1) as s:
                s.set_inputs({"x": np.zeros((6, 5), np.float32),
                              "target": np.zeros((6, 3), np.float32)})
                self.raises(A, "step 36893488147419103232 is outside", s.train_step, 0.1,
                            step=2 ** 65)
                s.step = 2 ** 64
                self.raises(A, "step 18446744073709551616 is outside", s.train_step, 0.1)
                self.raises(A, "step 18446744073709551616 is outside", s.save_checkpoint,
                            os.path.join(self.dir.name, "never.st"))
                self.assertFalse(os.path.exists(os.path.join(self.dir.name, "never.st")))
                s.step = 0
                s.train_step(0.1)
                self.assertEqual(s.step, 1)

    def test_nul_bytes_refused(self):
        """C strings end at a NUL: 'batch=4\\0junk' would compile as batch=4."""
        self.raises(A, "holds a NUL byte", gnc.compile, LENET, defines=["batch=4\0junk"])
        self.raises(A, "holds a NUL byte", gnc.compile, LENET, defines={"batch": "4\0junk"})
        self.raises(A, "holds a NUL byte", gnc.compile, LENET + "\0.other")
        self.raises(A, "holds a NUL byte", gnc.compile, LENET, precision="bf16\0x")
        with gnc.compile(LENET, defines={"batch": 4}) as plan:
            self.raises(A, "holds a NUL byte", plan.session, device="cpu\0cuda")
            with plan.session(device="cpu") as s:
                self.raises(A, "holds a NUL byte", s.save_checkpoint,
                            os.path.join(self.dir.name, "a\0b.st"))
                self.raises(A, "holds a NUL byte", s.load_checkpoint, "x\0y")


if __name__ == "__main__":
    unittest.main(verbosity=2)
