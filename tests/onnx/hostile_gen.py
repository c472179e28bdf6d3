#!/usr/bin/python3
"""Writes the hostile ONNX models of tests/onnx/hostile_cases.txt into a work folder:

    hostile_gen.py WORK_DIR            the hostile corpus (tests/onnx/hostile.sh)
    hostile_gen.py --seeds DIR         small valid models, the fuzzer's seeds
                                       (tests/fuzz/onnx/, tools/fuzz.sh onnx)

Python's standard library only: the protobuf wire format is written here by hand
(a few lines: varints, tags, lengths) rather than with python3-onnx, whose helper
API needs numpy and, worse, will not write most of what follows.  The field
numbers are onnx.proto's (ModelProto.graph = 7, NodeProto.op_type = 4, ...).

Every hostile file is the baseline model with one thing broken, so a case cannot
pass by failing for another reason: the baseline (good.onnx; sym.onnx with its
symbolic batch given by -D; ext/good.onnx with its weights in an external file)
must import.  The baseline is a small CNN named so that each error can be
recognised by a word:

    image f32[2, 3, 8, 8] -> conv0 (Conv, conv0.weight [4, 3, 3, 3], conv0.bias)
      -> relu0 (Relu) -> pool0 (MaxPool 2x2) -> flat0 (Flatten)
      -> fc0 (Gemm, transB, fc0.weight [10, 64], fc0.bias) -> logits f32[2, 10]
"""
import math
import os
import random
import struct
import sys

# --- the protobuf wire format ---------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1            # a negative int64 is its two's complement, 10 bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def f_int(field, n):                      # int32, int64, enum (wire type 0)
    return key(field, 0) + varint(n)


def f_bytes(field, b):                    # string, bytes, message (wire type 2)
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, x):                    # float (wire type 5)
    return key(field, 5) + struct.pack("<f", x)


def f_packed_floats(field, xs):
    return f_bytes(field, b"".join(struct.pack("<f", x) for x in xs))


def f_packed_ints(field, ns):
    return f_bytes(field, b"".join(varint(n) for n in ns))


# --- onnx.proto's messages --------------------------------------------------------

FLOAT, INT64, STRING = 1, 7, 8                       # TensorProto.DataType
A_FLOAT, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_INTS = 1, 2, 3, 4, 5, 7   # AttributeProto.type


def attr(name, value, kind=None):
    """An AttributeProto: an int, a float, a str, a list of ints, or kind and
    bytes already encoded (a tensor, a graph)."""
    b = f_bytes(1, name)
    if kind == A_TENSOR:
        return b + f_int(20, A_TENSOR) + f_bytes(5, value)
    if kind == A_GRAPH:
        return b + f_int(20, A_GRAPH) + f_bytes(6, value)
    if isinstance(value, bool) or isinstance(value, int):
        return b + f_int(20, A_INT) + f_int(3, int(value))
    if isinstance(value, float):
        return b + f_int(20, A_FLOAT) + f_float(2, value)
    if isinstance(value, str):
        return b + f_int(20, A_STRING) + f_bytes(4, value)
    return b + f_int(20, A_INTS) + b"".join(f_int(8, n) for n in value)


def node(op, inputs, outputs, name, attrs=(), domain=None):
    b = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    b += f_bytes(3, name) + f_bytes(4, op)
    if domain is not None:
        b += f_bytes(7, domain)
    return b + b"".join(f_bytes(5, a) for a in attrs)


def value_info(name, dims, elem=FLOAT):
    """A ValueInfoProto of a tensor; a str dim is symbolic (dim_param)."""
    shape = b"".join(f_bytes(1, f_bytes(2, d) if isinstance(d, str) else f_int(1, d))
                     for d in dims)
    tensor = f_int(1, elem) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor))


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def values(name, count):
    """count float values in [-0.25, 0.25], different for each tensor and element
    and exact in float32, so every copy of a tensor holds the same bytes."""
    seed = sum(name.encode())
    return [((seed + 37 * i) % 101 - 50) / 200.0 for i in range(count)]


def tensor(name, dims, raw=None, floats=None, dtype=FLOAT, external=None, extra=b""):
    """A TensorProto; its data as raw_data (raw: bytes, or None for the right
    values), as float_data (floats), or in an external file (external: a list
    of (key, value) pairs).  raw=b"" leaves the data out."""
    b = b"".join(f_int(1, d) for d in dims) + f_int(2, dtype) + f_bytes(8, name)
    if external is not None:
        b += b"".join(f_bytes(13, f_bytes(1, k) + f_bytes(2, v)) for k, v in external)
        b += f_int(14, 1)                                   # data_location EXTERNAL
    elif floats is not None:
        b += f_packed_floats(4, floats)
    else:
        if raw is None:
            raw = struct.pack(f"<{numel(dims)}f", *values(name, numel(dims)))
        if raw:
            b += f_bytes(9, raw)
    return b + extra


def graph(nodes, inits, inputs, outputs, name="hostile"):
    return (b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
            + b"".join(f_bytes(5, t) for t in inits)
            + b"".join(f_bytes(11, v) for v in inputs)
            + b"".join(f_bytes(12, v) for v in outputs))


def model(g, opsets=(("", 13),), ir_version=8):
    """A ModelProto; the graph last, so that a cut inside it is a truncated field."""
    b = f_int(1, ir_version)
    for domain, version in opsets:
        b += f_bytes(8, f_bytes(1, domain) + f_int(2, version))
    return b + f_bytes(2, "gnc hostile_gen.py") + f_bytes(7, g)


# --- the baseline -------------------------------------------------------------------

W_DIMS = {"conv0.weight": [4, 3, 3, 3], "conv0.bias": [4], "fc0.weight": [10, 64],
          "fc0.bias": [10]}


def conv0(attrs=None, inputs=("image", "conv0.weight", "conv0.bias")):
    if attrs is None:
        attrs = [attr("kernel_shape", [3, 3]), attr("pads", [1, 1, 1, 1]),
                 attr("strides", [1, 1])]
    return node("Conv", list(inputs), ["c"], "conv0", attrs)


def relu0(inputs=("c",), outputs=("r",), op="Relu", name="relu0", domain=None):
    return node(op, list(inputs), list(outputs), name, domain=domain)


def pool0(extra=(), outputs=("p",)):
    return node("MaxPool", ["r"], list(outputs), "pool0",
                [attr("kernel_shape", [2, 2]), attr("strides", [2, 2])] + list(extra))


NODES = {
    "conv0": conv0(),
    "relu0": relu0(),
    "pool0": pool0(),
    "flat0": node("Flatten", ["p"], ["f"], "flat0", [attr("axis", 1)]),
    "fc0": node("Gemm", ["f", "fc0.weight", "fc0.bias"], ["logits"], "fc0",
                [attr("transB", 1)]),
}


def inits(**replace):
    """The initializers, those named (with '.' as '_') replaced or left out (None)."""
    out = []
    for name, dims in W_DIMS.items():
        k = name.replace(".", "_")
        if k in replace:
            if replace[k] is not None:
                out.append(replace[k])
        else:
            out.append(tensor(name, dims))
    return out


def baseline(nodes=None, initializers=None, inputs=None, outputs=None, opsets=(("", 13),),
             **node_replace):
    """The baseline model, with the given parts (encoded) replacing its own;
    node_replace: nodes by name (None: left out)."""
    if nodes is None:
        nodes = [node_replace.get(k, v) for k, v in NODES.items()]
        nodes = [n for n in nodes if n is not None]
    if initializers is None:
        initializers = inits()
    if inputs is None:
        inputs = [value_info("image", [2, 3, 8, 8])]
    if outputs is None:
        outputs = [value_info("logits", [2, 10])]
    return model(graph(nodes, initializers, inputs, outputs), opsets)


def deep(levels):
    """The baseline with relu0 given an attribute holding a graph whose node has
    an attribute holding a graph ... levels deep: a parser that recurses once per
    nested message, with no limit, runs out of stack.  Written from the inside
    out as one run of headers, each a field's tag and the length of all that is
    inside it."""
    headers, inside = [], 0
    for _ in range(levels):
        # NodeProto.attribute(5) { AttributeProto.g(6) { GraphProto.node(1) { ... } } }
        for field in (1, 6, 5):
            h = key(field, 2) + varint(inside)
            headers.append(h)
            inside += len(h)
    return baseline(relu0=relu0() + b"".join(reversed(headers)))


def npy(shape, vals):
    """A float32 .npy file (format 1.0), its header padded to 64 bytes."""
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(
        f"{d}, " for d in shape).rstrip(" ")
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode()
            + struct.pack(f"<{len(vals)}f", *vals))


def reference(x):
    """The baseline's logits for input x (a flat list, [2, 3, 8, 8]), from its
    weights: what the baselines must compute, whichever way they hold them."""
    w, b = values("conv0.weight", 108), values("conv0.bias", 4)
    fw, fb = values("fc0.weight", 640), values("fc0.bias", 10)

    def at(n, c, i, j):
        return x[((n * 3 + c) * 8 + i) * 8 + j] if 0 <= i < 8 and 0 <= j < 8 else 0.0

    logits = []
    for n in range(2):
        conv = [[[max(0.0, b[o] + sum(w[((o * 3 + c) * 3 + ki) * 3 + kj]
                                      * at(n, c, i + ki - 1, j + kj - 1)
                                      for c in range(3) for ki in range(3) for kj in range(3)))
                  for j in range(8)] for i in range(8)] for o in range(4)]
        flat = [max(conv[o][2 * i + di][2 * j + dj] for di in (0, 1) for dj in (0, 1))
                for o in range(4) for i in range(4) for j in range(4)]
        logits += [fb[k] + sum(fw[k * 64 + m] * flat[m] for m in range(64)) for k in range(10)]
    return logits


# --- the corpus ---------------------------------------------------------------------


def write(work, name, data):
    path = os.path.join(work, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def corpus(work):
    os.makedirs(os.path.join(work, "out"), exist_ok=True)   # where outputs must not appear
    w = lambda name, data: write(work, name, data)          # noqa: E731

    good = baseline()
    w("good.onnx", good)
    image = values("image", 2 * 3 * 8 * 8)
    w("image.npy", npy([2, 3, 8, 8], image))
    w("logits.expected.npy", npy([2, 10], reference(image)))
    w("sym.onnx", baseline(inputs=[value_info("image", ["batch", 3, 8, 8])],
                           outputs=[value_info("logits", ["batch", 10])]))
    # the baseline with conv0.weight in ext/weights.bin, after 16 bytes of something else
    cw = struct.pack("<108f", *values("conv0.weight", 108))
    w("ext/weights.bin", b"\xee" * 16 + cw)
    w("secret.bin", cw)                                      # beside ext/, not in it

    def ext(name, pairs):
        w(f"ext/{name}", baseline(initializers=inits(conv0_weight=tensor(
            "conv0.weight", W_DIMS["conv0.weight"], external=pairs))))

    ext("good.onnx", [("location", "weights.bin"), ("offset", "16"), ("length", "432")])

    # the file itself
    w("empty.onnx", b"")
    rng = random.Random(29)
    w("garbage.onnx", bytes(rng.randrange(256) for _ in range(1000)))
    w("text.onnx", b"ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n")
    # cut inside the model's header, the graph's nodes, its initializers (1000
    # to 3000: fc0.weight's 2560 bytes), and one byte short
    assert len(good) > 3000, "the cuts below are meant to fall inside good.onnx"
    for cut in (1, 3, 100, 1000, 2000, 3000):
        w(f"truncated-{cut}.onnx", good[:cut])
    w("truncated-last.onnx", good[:-1])
    w("deep.onnx", deep(30000))

    # shapes
    w("huge-dim-input.onnx", baseline(inputs=[value_info("image", [10 ** 12, 3, 8, 8])]))
    w("huge-dim-init.onnx", baseline(initializers=inits(conv0_weight=tensor(
        "conv0.weight", [10 ** 12, 3, 3, 3], raw=b""))))
    w("huge-numel-init.onnx", baseline(initializers=inits(fc0_weight=tensor(
        "fc0.weight", [1 << 40, 1 << 40, 1 << 40], raw=b"\0" * 16))))
    w("negative-dim-input.onnx", baseline(inputs=[value_info("image", [2, -3, 8, 8])]))
    w("negative-dim-init.onnx", baseline(initializers=inits(fc0_bias=tensor(
        "fc0.bias", [-10], raw=b""))))
    w("input-not-float.onnx", baseline(inputs=[value_info("image", [2, 3, 8, 8], elem=STRING)]))

    # tensors whose data does not match their shape
    w("raw-short.onnx", baseline(initializers=inits(conv0_weight=tensor(
        "conv0.weight", W_DIMS["conv0.weight"], raw=b"\0" * (432 - 4)))))
    w("raw-long.onnx", baseline(initializers=inits(conv0_weight=tensor(
        "conv0.weight", W_DIMS["conv0.weight"], raw=b"\0" * (432 + 4)))))
    w("float-data-short.onnx", baseline(initializers=inits(fc0_bias=tensor(
        "fc0.bias", [10], floats=[0.5] * 9))))
    w("init-no-data.onnx", baseline(initializers=inits(fc0_bias=tensor(
        "fc0.bias", [10], raw=b""))))
    w("init-missing.onnx", baseline(initializers=inits(fc0_bias=None)))
    w("init-duplicate.onnx", baseline(initializers=inits() + [tensor("fc0.bias", [10])]))
    w("init-wrong-shape.onnx", baseline(initializers=inits(fc0_weight=tensor(
        "fc0.weight", [10, 63]))))

    # ops and attributes gnc cannot express
    w("unknown-op.onnx", baseline(relu0=relu0(op="FrobnicateV2", name="mystery0")))
    w("other-domain.onnx", baseline(relu0=relu0(domain="com.example.hostile"),
                                    opsets=(("", 13), ("com.example.hostile", 1))))
    w("conv-auto-pad.onnx", baseline(conv0=conv0(
        [attr("kernel_shape", [3, 3]), attr("auto_pad", "FOO"), attr("strides", [1, 1])])))
    w("conv-strides-float.onnx", baseline(conv0=conv0(
        [attr("kernel_shape", [3, 3]), attr("pads", [1, 1, 1, 1]), attr("strides", 1.5)])))
    w("conv-strides-zero.onnx", baseline(conv0=conv0(
        [attr("kernel_shape", [3, 3]), attr("pads", [1, 1, 1, 1]), attr("strides", [0, 0])])))
    w("conv-one-input.onnx", baseline(conv0=conv0(inputs=("image",))))
    # column-major indices: storage_order matters only with the Indices output
    w("maxpool-storage-order.onnx", baseline(pool0=pool0([attr("storage_order", 1)],
                                                         outputs=("p", "pool0_indices"))))
    # a constant shape whose product overflows int64 (found by the fuzzer)
    w("reshape-overflow.onnx", baseline(
        flat0=node("Reshape", ["p", "shape0"], ["f"], "reshape0"),
        initializers=inits() + [tensor("shape0", [2], raw=struct.pack("<2q", 1 << 62, 8),
                                       dtype=INT64)]))
    # a Range named as gnc export's arange (an IR node, not folded) is
    # bounded all the same: 3e12 elements
    w("range-pattern-huge.onnx", baseline(
        nodes=list(NODES.values()) + [node("Range", ["r0.start", "r0.limit", "r0.delta"],
                                           ["r0"], "r0")],
        initializers=inits() + [tensor("r0." + k, [], raw=struct.pack("<f", v))
                                for k, v in (("start", 0), ("limit", 3e12), ("delta", 1))]))
    # Resize in a form gnc's upsample2d does not compute, or of the batch
    w("resize-cubic.onnx", baseline(
        relu0=node("Resize", ["c", "", "scales0"], ["r"], "resize0", [attr("mode", "cubic")]),
        initializers=inits() + [tensor("scales0", [4], raw=struct.pack("<4f", 1, 1, 1, 1))]))
    w("resize-batch.onnx", baseline(
        relu0=node("Resize", ["c", "", "", "sizes0"], ["r"], "resize0",
                   [attr("mode", "nearest"), attr("coordinate_transformation_mode", "asymmetric"),
                    attr("nearest_mode", "floor")]),
        initializers=inits() + [tensor("sizes0", [4], raw=struct.pack("<4q", 4, 4, 8, 8),
                                       dtype=INT64)]))
    w("reshape-dynamic.onnx", baseline(
        flat0=node("Reshape", ["p", "shape_in"], ["f"], "reshape0"),
        inputs=[value_info("image", [2, 3, 8, 8]), value_info("shape_in", [2], elem=INT64)]))

    # the graph's structure
    w("cycle-self.onnx", baseline(relu0=relu0(inputs=("c", "r"), op="Add", name="loop0")))
    w("cycle-two.onnx", baseline(nodes=[
        NODES["conv0"], node("Add", ["c", "s"], ["r"], "ping0"), node("Relu", ["r"], ["s"], "pong0"),
        NODES["pool0"], NODES["flat0"], NODES["fc0"]]))
    w("undefined-input.onnx", baseline(relu0=relu0(inputs=("nowhere",))))
    w("duplicate-output.onnx", baseline(nodes=[
        NODES["conv0"], NODES["relu0"], node("Sigmoid", ["c"], ["r"], "dup0"),
        NODES["pool0"], NODES["flat0"], NODES["fc0"]]))
    w("output-listed-twice.onnx", baseline(outputs=[value_info("logits", [2, 10])] * 2))
    w("output-undefined.onnx", baseline(outputs=[value_info("nothing_makes_me", [2, 10])]))
    w("no-graph.onnx", f_int(1, 8) + f_bytes(8, f_bytes(1, "") + f_int(2, 13)))

    # opsets
    w("opset-6.onnx", baseline(opsets=(("", 6),)))
    w("opset-99.onnx", baseline(opsets=(("", 99),)))
    w("opset-none.onnx", baseline(opsets=()))
    w("opset-negative.onnx", baseline(opsets=(("", -13),)))

    # external data, each refused for its path or its extent (each file exists)
    ext("abs.onnx", [("location", os.path.abspath(os.path.join(work, "secret.bin"))),
                     ("length", "432")])
    ext("dotdot.onnx", [("location", "../secret.bin"), ("length", "432")])
    ext("dotdot-inner.onnx", [("location", "sub/../../secret.bin")])
    ext("past-end.onnx", [("location", "weights.bin"), ("offset", "100"), ("length", "432")])
    ext("offset-huge.onnx", [("location", "weights.bin"), ("offset", "18446744073709551000"),
                             ("length", "432")])
    ext("length-short.onnx", [("location", "weights.bin"), ("offset", "16"), ("length", "400")])
    ext("missing-file.onnx", [("location", "no-such-weights.bin")])
    ext("no-location.onnx", [("offset", "16"), ("length", "432")])
    ext("dir.onnx", [("location", "."), ("length", "432")])
    gelu_corpus(work)
    # valid models whose graph names a plan's meta cannot hold as they are
    w("name/newline.onnx", model(graph(list(NODES.values()), inits(),
                                       [value_info("image", [2, 3, 8, 8])],
                                       [value_info("logits", [2, 10])], name="two\nlines\x1b[31m")))
    w("name/long.onnx", model(graph(list(NODES.values()), inits(),
                                    [value_info("image", [2, 3, 8, 8])],
                                    [value_info("logits", [2, 10])], name="n" * 5000)))


def gelu_models():
    """Valid models of GELU as PyTorch exports it before opset 20,
    Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> h, then h halved: h's halving
    taken by several nodes, in each form (times 0.5 either side, / 2), or h
    used besides.  Yields (name, model, {output: its values for input x}), x
    being values("x", 8) as [2, 4]."""
    x = values("x", 8)
    g = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    consts = [tensor("sqrt2", [], floats=[math.sqrt(2)]), tensor("one", [], floats=[1.0]),
              tensor("half", [], floats=[0.5]), tensor("two", [], floats=[2.0])]
    head = [node("Div", ["x", "sqrt2"], ["d"], "div0"), node("Erf", ["d"], ["e"], "erf0"),
            node("Add", ["e", "one"], ["e1"], "add0"), node("Mul", ["x", "e1"], ["h"], "mul0")]
    halves = {"y_mul": node("Mul", ["h", "half"], ["y_mul"], "half0"),
              "y_div": node("Div", ["h", "two"], ["y_div"], "half1"),
              "y_lmul": node("Mul", ["half", "h"], ["y_lmul"], "half2")}
    variants = {
        "gelu-once": (["y_mul"], [], {}),
        "gelu-twice": (["y_mul", "y_div"], [], {}),
        "gelu-thrice": (["y_lmul", "y_mul", "y_div"], [], {}),
        # h itself used too (2 gelu(x)), before and after its halvings
        "gelu-beside": (["y_mul", "y_div"],
                        [node("Relu", ["h"], ["y_relu"], "relu0")],
                        {"y_relu": [max(0.0, 2 * v) for v in g]}),
        # a halving's result used by the next: gelu(x) + gelu(x) / 2
        "gelu-chained": (["y_div", "y_mul"],
                         [node("Add", ["y_mul", "y_div"], ["y_sum"], "sum0")],
                         {"y_sum": [2 * v for v in g]}),
    }
    for name, (picked, extra, more) in variants.items():
        nodes = head + [halves[k] for k in picked] + extra
        if name == "gelu-beside":
            nodes = head + extra + [halves[k] for k in picked]
        outs = {k: g for k in picked}
        outs.update(more)
        yield name, model(graph(nodes, consts, [value_info("x", [2, 4])],
                                [value_info(k, [2, 4]) for k in outs])), outs


def gelu_corpus(work):
    w = lambda name, data: write(work, name, data)          # noqa: E731
    w("gelu/x.npy", npy([2, 4], values("x", 8)))
    for name, m, outs in gelu_models():
        w(f"gelu/{name}.onnx", m)
        for k, v in outs.items():
            w(f"gelu/{name}.expected/{k}.npy", npy([2, 4], v))


# --- the fuzzer's seeds: small valid models ---------------------------------------


def seeds(out):
    os.makedirs(out, exist_ok=True)
    w = lambda name, data: write(out, name, data)           # noqa: E731
    w("seed_cnn.onnx", baseline())
    w("seed_cnn-sym.onnx", baseline(inputs=[value_info("image", ["batch", 3, 8, 8])],
                               outputs=[value_info("logits", ["batch", 10])]))
    # elementwise, shape and reduction ops over small tensors, with constants
    shape = tensor("shape", [2], raw=struct.pack("<2q", 2, 12), dtype=INT64)
    w("seed_ops.onnx", model(graph(
        [node("Constant", [], ["k"], "const0", [attr("value", tensor("k", [1], floats=[0.5]),
                                                     A_TENSOR)]),
         node("Mul", ["a", "k"], ["m"], "mul0"),
         node("Add", ["m", "b"], ["s"], "add0"),
         node("Transpose", ["s"], ["t"], "tr0", [attr("perm", [0, 2, 1])]),
         node("Reshape", ["t", "shape"], ["r"], "reshape0"),
         node("Softmax", ["r"], ["y"], "softmax0", [attr("axis", -1)]),
         node("ReduceMean", ["y"], ["z"], "mean0", [attr("axes", [1]), attr("keepdims", 0)])],
        [tensor("b", [1, 3, 4]), shape],
        [value_info("a", [2, 3, 4])], [value_info("z", [2])]), opsets=(("", 13),)))
    w("seed_mlp.onnx", model(graph(
        [node("MatMul", ["x", "w1"], ["h"], "mm0"), node("Add", ["h", "b1"], ["hb"], "add0"),
         node("Tanh", ["hb"], ["a"], "tanh0"),
         node("LayerNormalization", ["a", "g", "beta"], ["n"], "ln0", [attr("axis", -1)]),
         node("Gemm", ["n", "w2"], ["y"], "fc0", [attr("transB", 1), attr("alpha", 0.5)])],
        [tensor("w1", [4, 6]), tensor("b1", [6]), tensor("g", [6]), tensor("beta", [6]),
         tensor("w2", [3, 6])],
        [value_info("x", [2, 4])], [value_info("y", [2, 3])]), opsets=(("", 17),)))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--seeds":
        seeds(sys.argv[2])
    elif len(sys.argv) == 2:
        corpus(sys.argv[1])
    else:
        sys.exit("usage: hostile_gen.py WORK_DIR | --seeds DIR")


if __name__ == "__main__":
    main()
