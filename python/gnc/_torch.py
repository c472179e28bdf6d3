"""gnc.from_torch: a PyTorch module compiled into a gnc plan through its ONNX
export in memory, and its weights both ways under PyTorch's names.

The module is exported in eval mode with training=TrainingMode.PRESERVE and
no constant folding, so that torch.onnx.export keeps every parameter and
buffer an initializer of its own under its state_dict key, batch norms
included (EVAL would fold them into the convolutions).  gnc's importer keeps
each initializer's name as its parameter's source (docs/ir.md), so the plan
maps gnc names to PyTorch's; what the export leaves out (num_batches_tracked,
tensors the forward pass does not read) is kept here, so that a session's
state_dict() is the module's whole state_dict.  Dropout layers are exported
in eval mode, that is left out: a warning says so where train=True.

Imported lazily: torch is needed only here.
"""

import collections
import io
import re
import warnings

from ._lib import Error, Status

_LOSSES = ("cross_entropy", "mse")


def _as_tuple(example_inputs, torch):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    try:
        inputs = tuple(example_inputs)
    except TypeError:
        raise Error(Status.ARGUMENT, "example_inputs must be a tensor or a tuple of tensors, "
                    "not %s" % type(example_inputs).__name__) from None
    for x in inputs:
        if not isinstance(x, torch.Tensor):
            raise Error(Status.ARGUMENT, "example_inputs must be tensors, not %s"
                        % type(x).__name__)
    return inputs


def _names(given, count, what):
    if given is None:
        return [what] if count == 1 else ["%s%d" % (what, i) for i in range(count)]
    given = list(given)
    if len(given) != count:
        raise Error(Status.ARGUMENT, "%d %s names for %d %ss" % (len(given), what, count, what))
    return given


# an ONNX node's name from torch.onnx.export: "/layers.0/self_attn/Softmax_1"
_NODE = re.compile(r"node '?(/[^' ]*)'?")


def _torch_words(message):
    """message, with the PyTorch module and op an ONNX node came from named
    where the message names the node (torch.onnx.export names nodes by their
    module's path and the op)."""
    m = _NODE.search(message)
    if not m:
        return message
    parts = m.group(1).strip("/").split("/")
    op = re.sub(r"_\d+$", "", parts[-1])
    where = ".".join(p for p in parts[:-1] if p) or "the module itself"
    return "%s (PyTorch: %s in %s)" % (message, op, where)


def from_torch(module, example_inputs, *, loss=None, train=False, devices=1, strategy="auto",
               precision=None, momentum=0.0, input_names=None, output_names=None,
               no_kernels=False, opset=17):
    import torch
    from . import compile_bytes

    if not isinstance(module, torch.nn.Module):
        raise Error(Status.ARGUMENT, "from_torch needs a torch.nn.Module, not %s"
                    % type(module).__name__)
    if loss is not None and loss not in _LOSSES:
        raise Error(Status.ARGUMENT, "loss is %s or None, not %r" % (" or ".join(_LOSSES), loss))
    if train and loss is None:
        raise Error(Status.ARGUMENT, "from_torch(train=True) needs a loss (loss='cross_entropy' "
                    "or 'mse'): the plan's training step minimizes it")
    inputs = _as_tuple(example_inputs, torch)
    input_names = _names(input_names, len(inputs), "input")

    dropouts = [name or "the module" for name, m in module.named_modules()
                if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]
    if train and dropouts:
        warnings.warn("gnc.from_torch: the export in eval mode leaves out %s: the plan trains "
                      "without dropout" % ", ".join(dropouts[:4] + (["..."] if len(dropouts) > 4
                                                                      else [])), stacklevel=2)
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            y = module(*inputs)
        outputs = y if isinstance(y, (tuple, list)) else (y,)
        output_names = _names(output_names, len(outputs), "output")
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PRESERVE's advice on constant folding
            torch.onnx.export(module, inputs, buf, opset_version=opset,
                              do_constant_folding=False,
                              training=torch.onnx.TrainingMode.PRESERVE,
                              input_names=input_names, output_names=output_names)
        state = module.state_dict()
    finally:
        for m, was in modes:
            m.training = was

    spec = "%s:%s" % (loss, output_names[0]) if loss else None
    try:
        plan = compile_bytes(buf.getvalue(), name="%s.onnx" % type(module).__name__, train=train,
                             momentum=momentum, devices=devices, precision=precision,
                             no_kernels=no_kernels, loss=spec,
                             strategy=strategy if devices > 1 else None)
    except Error as e:
        raise Error(e.status, _torch_words(e.message)) from None

    by_source = {}
    for t in plan.params:
        if t.source is not None:
            by_source.setdefault(t.source, t.name)
    keys, extra = {}, {}
    for k, v in state.items():
        if k in by_source:
            keys[k] = by_source[k]
        else:
            extra[k] = v.detach().clone()
    plan._torch = {"keys": keys, "extra": extra, "order": list(state),
                   "shapes": {k: tuple(v.shape) for k, v in state.items()},
                   "dtypes": {k: v.dtype for k, v in state.items()}}
    return plan


def state_dict(session):
    """session's weights as the module's state_dict (Session.state_dict)."""
    import torch

    names = session.plan._torch
    out = collections.OrderedDict()
    for k in names["order"]:
        if k in names["keys"]:
            a = session.read_param(names["keys"][k])
            out[k] = torch.from_numpy(a).reshape(names["shapes"][k]).to(names["dtypes"][k])
        else:
            v = names["extra"][k].clone()
            if k.endswith("num_batches_tracked"):  # one a training step, as in train mode
                v += session.step
            out[k] = v
    return out
