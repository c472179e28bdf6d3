#!/usr/bin/env python3
"""Samples text from a trained byte-level language model with `gnc run`.

    python3 tools/sample.py GNC MODEL.net WEIGHTS.safetensors [--prompt TEXT]
        [--chars N] [--temperature T] [--seed S] [--seq N]

The model takes `tokens` and `next` (i32 [1, seq]) and outputs `logits`
[1, seq, 256], as models/gpt_tiny.net.  Each step writes the last seq bytes
of the text so far (left-padded with spaces) as tokens.npy, runs
`gnc run MODEL -D batch=1 --weights WEIGHTS --input tokens=... -o DIR`, reads
the logits at the last position from DIR/logits.npy and draws the next byte
from softmax(logits / T) (T = 0: the most likely byte).  The standard library
alone: .npy files are written and read by hand.
"""
import argparse
import math
import os
import random
import struct
import subprocess
import sys
import tempfile


def write_i32(path, values):
    """values as an i32 [1, len] .npy file"""
    head = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, %d), }" % len(values)
    head += " " * (-(len(head) + 11) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack("<%di" % len(values), *values))


def read_f32(path):
    """the values of a little-endian f32 .npy file, flattened"""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit("sample: %s is not a .npy file" % path)
    major = data[6]
    hlen, start = (struct.unpack("<H", data[8:10])[0], 10) if major == 1 else \
        (struct.unpack("<I", data[8:12])[0], 12)
    header = data[start:start + hlen].decode()
    if "'<f4'" not in header:
        sys.exit("sample: %s does not hold f32 values: %s" % (path, header.strip()))
    body = data[start + hlen:]
    return struct.unpack("<%df" % (len(body) // 4), body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gnc")
    ap.add_argument("model")
    ap.add_argument("weights")
    ap.add_argument("--prompt", default="The ")
    ap.add_argument("--chars", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq", type=int, default=64, help="the model's seq (default 64)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    text = list(a.prompt.encode())
    sys.stdout.write(a.prompt)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.npy")
        out = os.path.join(tmp, "out")
        for _ in range(a.chars):
            window = ([32] * a.seq + text)[-a.seq:]
            write_i32(tokens, window)
            run = subprocess.run([a.gnc, "run", a.model, "-D", "batch=1", "-D", "seq=%d" % a.seq,
                                  "--weights", a.weights, "--input", "tokens=" + tokens,
                                  "-o", out], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit("sample: gnc run failed:\n" + run.stderr)
            logits = read_f32(os.path.join(out, "logits.npy"))[-256:]
            if a.temperature <= 0:
                byte = max(range(256), key=lambda k: logits[k])
            else:
                top = max(logits)
                weights = [math.exp((x - top) / a.temperature) for x in logits]
                byte = rng.choices(range(256), weights)[0]
            text.append(byte)
            sys.stdout.write(bytes([byte]).decode("latin-1"))
            sys.stdout.flush()
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
