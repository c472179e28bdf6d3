#!/usr/bin/python3
# Writes the hostile-input corpus of tests/hostile/cases.txt into a work folder:
#   gen.py WORK_DIR SOURCE_DIR
# Python's standard library only.  Everything is made here, at test time, so
# no binary file is committed: a tiny model and a small synthetic IDX data set
# that work (the baseline each case breaks one thing of), safetensors
# checkpoints that break the format or do not fit the model, IDX data folders
# with one bad file each, plans corrupted from the fuzzer's seed plans
# (tests/fuzz/plans/, their checksums fixed where the case is past them), and
# DSL and IR text with errors.  Each file's name says what is wrong with it.
import gzip
import json
import os
import shutil
import struct
import sys
import zlib

work, src = sys.argv[1], sys.argv[2]


def write(name, data):
    path = os.path.join(work, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# --- the baseline: a model that trains in milliseconds, and data for it -----

TINY = """\
# One dense layer over a 28x28 image: trains and evaluates in milliseconds.
model tiny(batch = 16, classes = 10) {
    input image: f32[batch, 1, 28, 28]
    input label: i32[batch]
    logits = dense(flatten(image), classes, name = "fc")
    output logits
    loss cross_entropy(logits, label)
}
"""
write("tiny.net", TINY)
shutil.copy(os.path.join(src, "tests/train/batches.net"), os.path.join(work, "batches.net"))
os.makedirs(os.path.join(work, "out"), exist_ok=True)      # where outputs must not appear
os.makedirs(os.path.join(work, "model-dir.net"), exist_ok=True)


def idx(dims, payload, magic=b"\0\0\x08"):
    return magic + bytes([len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def images(n, h=28, w=28):
    return idx([n, h, w], bytes((i * 7) % 256 for i in range(n * h * w)))


def labels(n, top=10):
    return idx([n], bytes(i % top for i in range(n)))


GOOD = {"train-images-idx3-ubyte": images(64), "train-labels-idx1-ubyte": labels(64),
        "t10k-images-idx3-ubyte": images(32), "t10k-labels-idx1-ubyte": labels(32)}


def dataset(name, **replace):
    """A data folder: the good files, with those named replaced (by None: left
    out; a name ending in _gz: that file's .gz holds the bytes instead)."""
    for f, data in GOOD.items():
        key = f.replace("-", "_")
        gz = key + "_gz"
        if gz in replace:
            write(f"{name}/{f}.gz", replace[gz])
        elif key in replace:
            if replace[key] is not None:
                write(f"{name}/{f}", replace[key])
        else:
            write(f"{name}/{f}", data)


dataset("data")
dataset("data-gz", train_images_idx3_ubyte_gz=gzip.compress(GOOD["train-images-idx3-ubyte"]))

# --- IDX data: one bad file a folder -----------------------------------------

dataset("idx-bad-magic", train_images_idx3_ubyte=idx([64, 28, 28], b"\0" * 64 * 784, b"\0\0\x0d"))
dataset("idx-bad-rank", train_images_idx3_ubyte=idx([64 * 784], b"\0" * 64 * 784))
dataset("idx-overflow", train_images_idx3_ubyte=idx([1 << 17, 1 << 17, 1 << 30], b""))
dataset("idx-empty", train_labels_idx1_ubyte=b"")
dataset("idx-truncated", train_images_idx3_ubyte=GOOD["train-images-idx3-ubyte"][:10000])
dataset("idx-trailing", t10k_labels_idx1_ubyte=GOOD["t10k-labels-idx1-ubyte"] + b"\x01")
dataset("idx-count-mismatch", train_labels_idx1_ubyte=labels(60))
dataset("idx-missing", t10k_images_idx3_ubyte=None)
dataset("idx-dir", train_labels_idx1_ubyte=None)
os.makedirs(os.path.join(work, "idx-dir/train-labels-idx1-ubyte"), exist_ok=True)
dataset("idx-label-range", train_labels_idx1_ubyte=labels(64, top=200))
dataset("idx-image-size", train_images_idx3_ubyte=images(64, 32, 32),
        t10k_images_idx3_ubyte=images(32, 32, 32))
dataset("idx-small", train_images_idx3_ubyte=images(8), train_labels_idx1_ubyte=labels(8))
gz = gzip.compress(GOOD["train-images-idx3-ubyte"])
dataset("idx-gz-truncated", train_images_idx3_ubyte_gz=gz[: len(gz) // 2])
dataset("idx-gz-garbage", t10k_images_idx3_ubyte_gz=b"\x1f\x8b" + b"not deflate at all" * 4)

# --- safetensors checkpoints of tiny.net --------------------------------------

W = {"dtype": "F32", "shape": [10, 784], "data_offsets": [0, 31360]}
B = {"dtype": "F32", "shape": [10], "data_offsets": [31360, 31400]}
DATA = b"\0" * 31400
META = {"step": "4", "epoch": "1", "seed": "0", "batch": "16", "optimizer": "sgd"}


def st(name, header, data=DATA, hlen=None):
    """A safetensors file: header (a dict, or the JSON text itself) and data;
    hlen, when given, is the header length written instead of the true one."""
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    text = text.encode()
    write(f"ckpt/{name}", struct.pack("<Q", len(text) if hlen is None else hlen) + text + data)


def meta(**kv):
    m = dict(META, **kv)
    return {"__metadata__": {k: v for k, v in m.items() if v is not None},
            "fc.weight": W, "fc.bias": B}


st("good.st", meta())
write("ckpt/empty.st", b"")
write("ckpt/short-length.st", b"\x10\0\0\0\0")
st("length-past-end.st", meta(), data=b"", hlen=1 << 20)
st("not-object.st", "[1,2,3]", data=b"")
st("nested-deep.st", '{"a":' + "[" * 100000 + "]" * 100000 + "}", data=b"")
st("duplicate-key.st", '{"fc.bias":%s,"fc.weight":%s,"fc.bias":%s}' % (
    json.dumps(B), json.dumps(W), json.dumps(B)))
st("overlap.st", {"fc.weight": W, "fc.bias": dict(B, data_offsets=[31000, 31040])},
   data=DATA[:31360])
st("aliased.st", {"fc.weight": W, "fc.bias": B, "fc.alias": B})
st("fractional.st", {"fc.weight": W, "fc.bias": dict(B, data_offsets=[31360.5, 31400.5])},
   data=DATA + b"\0")
st("trailing-text.st", json.dumps(meta(), separators=(",", ":")) + " x")
st("trailing-data.st", meta(), data=DATA + b"\0" * 8)
st("gap.st", {"fc.weight": W, "fc.bias": dict(B, data_offsets=[31368, 31408])},
   data=DATA + b"\0" * 8)
st("past-data.st", meta(), data=DATA[:100])
st("unknown-dtype.st", {"fc.weight": dict(W, dtype="F33"), "fc.bias": B})
st("wrong-dtype.st", {"fc.weight": dict(W, dtype="I32"), "fc.bias": B})
st("wrong-shape.st", {"fc.weight": dict(W, shape=[784, 10]), "fc.bias": B})
st("shape-overflow.st", {"fc.weight": dict(W, shape=[1 << 40, 1 << 40]), "fc.bias": B})
st("missing-tensor.st", {"fc.weight": W}, data=DATA[:31360])
st("metadata-not-strings.st", {"__metadata__": {"step": 4}, "fc.weight": W, "fc.bias": B})
st("step-negative.st", meta(step="-100"))
st("step-abc.st", meta(step="abc"))
st("step-overflow.st", meta(step="99999999999999999999"))
st("seed-zzz.st", meta(seed="zzz"))
st("no-step.st", meta(step=None))
st("loss-sum-nan.st", meta(step="2", epoch_loss_sum="nan", epoch_loss_steps="2"))
st("loss-steps-wrong.st", meta(step="2", epoch_loss_sum="4.5", epoch_loss_steps="3"))

# --- data sets in one safetensors file (gnc train --data FILE) ---------------
# image F32 [32, 1, 28, 28] and label I32 [32]: the baseline; the broken ones
# differ from it by one thing each, as the checkpoints above do

IMG = {"dtype": "F32", "shape": [32, 1, 28, 28], "data_offsets": [0, 32 * 784 * 4]}
LAB = {"dtype": "I32", "shape": [32], "data_offsets": [32 * 784 * 4, 32 * 785 * 4]}
DSDATA = (b"".join(struct.pack("<f", (i % 251) / 251.0) for i in range(32 * 784))
          + b"".join(struct.pack("<i", i % 10) for i in range(32)))


def dst(name, header, data=DSDATA, hlen=None):
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    text = text.encode()
    write(f"dst/{name}", struct.pack("<Q", len(text) if hlen is None else hlen) + text + data)


dst("good.st", {"image": IMG, "label": LAB})
# a second label, all zeros: the first one must not win silently
dst("duplicate-key.st", '{"label":%s,"image":%s,"label":%s}' % (
    json.dumps(LAB), json.dumps(IMG),
    json.dumps(dict(LAB, data_offsets=[LAB["data_offsets"][1], LAB["data_offsets"][1] + 128]))),
    data=DSDATA + b"\0" * 128)
dst("train-and-plain.st", {"image": IMG, "label": LAB, "train.label": dict(
    LAB, data_offsets=[LAB["data_offsets"][1], LAB["data_offsets"][1] + 128])},
    data=DSDATA + b"\0" * 128)
dst("overlap.st", {"image": IMG, "label": LAB, "extra": dict(LAB, data_offsets=[0, 128])})
dst("fractional.st", {"image": IMG, "label": dict(LAB, data_offsets=[100352.5, 100480.5])},
    data=DSDATA + b"\0")
dst("string-offsets.st", {"image": IMG, "label": dict(LAB, data_offsets=["100352", "100480"])})
dst("trailing-data.st", {"image": IMG, "label": LAB}, data=DSDATA + b"\0" * 8)
dst("rank-9.st", {"image": IMG, "label": LAB,
                  "deep": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [100480, 100481]}},
    data=DSDATA + b"\0")
# images of infinity: the first update is not finite, so the run fails before a
# --log row (and must leave no log of a header alone)
dst("huge-images.st", {"image": IMG, "label": LAB},
    data=struct.pack("<f", float("inf")) * (32 * 784) + DSDATA[-128:])
dst("bf16.st", {"image": dict(IMG, dtype="BF16", data_offsets=[0, 32 * 784 * 2]),
                "label": dict(LAB, data_offsets=[32 * 784 * 2, 32 * 784 * 2 + 128])},
    data=DSDATA[:32 * 784 * 2] + DSDATA[-128:])

# --- plans: the fuzzer's seeds, corrupted -------------------------------------


def plan_parts(data):
    """(version, flags, devices, [(kind, flags, device, bytes)]) of a plan."""
    version, flags, ndev, nsec = struct.unpack_from("<4I", data, 8)
    secs = []
    for i in range(nsec):
        kind, sflags, dev, _crc, off, size = struct.unpack_from("<4I2Q", data, 40 + 32 * i)
        secs.append([kind, sflags, dev, data[off:off + size]])
    return version, flags, ndev, secs


def plan_bytes(version, flags, ndev, secs):
    """A plan laid out as docs/plan.md has it, every checksum right."""
    at = 40 + 32 * len(secs)
    table, body = b"", b""
    at8 = (at + 7) & ~7
    body += b"\0" * (at8 - at)
    at = at8
    for kind, sflags, dev, payload in secs:
        table += struct.pack("<4I2Q", kind, sflags, dev, zlib.crc32(payload), at, len(payload))
        pad = ((len(payload) + 7) & ~7) - len(payload)
        body += payload + b"\0" * pad
        at += len(payload) + pad
    head = b"\x89GNC\r\n\x1a\n" + struct.pack("<4IQI", version, flags, ndev, len(secs), at, 0)
    return head + struct.pack("<I", zlib.crc32(head + table)) + table + body


with open(os.path.join(src, "tests/fuzz/plans/small.gnc"), "rb") as f:
    small = f.read()
write("plan/good.gnc", small)
assert plan_bytes(*plan_parts(small)) == small, "plan_bytes does not rebuild small.gnc"
version, flags, ndev, secs = plan_parts(small)
secs_at = [struct.unpack_from("<Q", small, 40 + 32 * i + 16)[0] for i in range(len(secs))]
ALL = 0xFFFFFFFF


def plan(name, version=version, flags=flags, ndev=ndev, secs=secs):
    write(f"plan/{name}", plan_bytes(version, flags, ndev, secs))


def with_section(i, **change):
    s = [list(x) for x in secs]
    for k, v in change.items():
        s[i][["kind", "flags", "device", "payload"].index(k)] = v
    return s


write("plan/bad-magic.gnc", b"\x89GNX" + small[4:])
write("plan/truncated.gnc", small[: len(small) // 2])
flip = bytearray(small)
flip[len(small) - 100] ^= 0x10
write("plan/bit-flip.gnc", bytes(flip))
hflip = bytearray(small)
hflip[12] ^= 0x02                       # the flags, under the header's CRC
write("plan/header-crc.gnc", bytes(hflip))
plan("version-7.gnc", version=7)
plan("unknown-required.gnc", secs=secs + [[99, 1, ALL, b"from the future"]])
plan("reserved-required.gnc", secs=secs + [[18, 1, 0, b""]])
plan("no-memory.gnc", secs=[s for s in secs if s[0] != 2])
program = secs[0][3]
plan("program-garbage.gnc",
     secs=with_section(0, payload=b"graph small {\n  %x = frobnicate()\n}\n"))
plan("program-renamed.gnc",
     secs=with_section(0, payload=program.replace(b"%fc0.weight", b"%fc0.w", 1)))
mem = bytearray(secs[1][3])
struct.pack_into("<q", mem, len(mem) - 8, 8)     # a result's offset off the 256 grid
plan("memory-misaligned.gnc", secs=with_section(1, payload=bytes(mem)))
mem = bytearray(secs[1][3])
struct.pack_into("<Q", mem, 8, 1 << 62)           # an arena of 4 EiB
plan("memory-huge-arena.gnc", secs=with_section(1, payload=bytes(mem)))
mem = bytearray(secs[1][3])                       # every result at 0, in an arena of 256
struct.pack_into("<Q", mem, 8, 256)
for i in range(struct.unpack_from("<Q", mem, 16)[0]):
    struct.pack_into("<q", mem, 24 + 8 * i, 0)
plan("memory-overlap.gnc", secs=with_section(1, payload=bytes(mem)))
meta_i = [i for i, s in enumerate(secs) if s[0] == 3][0]
plan("meta-devices.gnc",
     secs=with_section(meta_i, payload=secs[meta_i][3].replace(b"devices=1", b"devices=9")))
padded = bytearray(small)                        # a padding byte after a section
i = [i for i, s in enumerate(secs) if len(s[3]) % 8][0]
padded[secs_at[i] + len(secs[i][3])] = 7
write("plan/padding.gnc", bytes(padded))

# --- DSL and IR text -----------------------------------------------------------

write("dsl/syntax.net", "model m() {\n    input x: f32[2]\n    output y = relu(x) +\n}\n")
write("dsl/shape.net", "model m() {\n    input a: f32[2, 3]\n    input b: f32[4]\n"
      "    output y = a + b\n}\n")
write("dsl/undefined.net", "model m() {\n    input x: f32[2]\n    output y = relu(z)\n}\n")
# a terminal's escape sequence and bell in the line an error quotes
write("dsl/control-bytes.net",
      "model m() {\n    input x: f32[2]\n    output y = relu(z) # \x1b[2J\x07\n}\n")
write("dsl/unknown-layer.net",
      "model m() {\n    input x: f32[2]\n    output y = frobnicate(x)\n}\n")
write("dsl/numel-overflow.net", "model m() {\n    input x: f32[4294967296, 4294967296, 65536]\n"
      "    output y = relu(x)\n}\n")
write("dsl/unterminated-string.net", 'const s = "abc\nmodel m() {\n    input x: f32[2]\n'
      "    output y = relu(x)\n}\n")
write("dsl/binary.net", bytes(range(256)) * 4)
write("dsl/deep.net", "model m() {\n    input x: f32[2]\n    output y = " + "(" * 100000 + "x"
      + ")" * 100000 + "\n}\n")
write("ir/unknown-op.gir", "graph g {\n  input %x: f32[2]\n  %y: f32[2] = frobnicate(%x)\n"
      "  output y = %y\n}\n")
