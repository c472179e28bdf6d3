"""gnc: compiled neural-network plans from Python, over libgnc (docs/api.md).

The C API (include/gnc/gnc.h) through ctypes, with NumPy arrays for data:

    import numpy as np
    import gnc

    # Runs a plan once on inputs of zeros; prints its first output.
    with gnc.load_plan("lenet.gnc") as plan, plan.session(device="cpu", seed=1) as s:
        for t in plan.inputs:
            s.set_input(t.name, np.zeros(t.shape, t.numpy_dtype))
        t = plan.outputs[0]
        y = s.run()[t.name]
        print("%s: %d values, the first %g" % (t.name, y.size, y.flat[0]))

Plans are loaded from a file (load_plan), from bytes (load_plan_bytes) or
compiled from a model (compile).  A Session runs a plan on a device: set
inputs from arrays, run an inference or take a training step, read outputs
and the loss, save and load checkpoints.  Every failure raises gnc.Error with
libgnc's message and status.  Plans and sessions hold C memory: close them
(or use them in `with`); an object dropped unclosed is freed when Python
collects it, with a ResourceWarning.  A session is used by one thread at a
time (calls on one session from several threads wait for each other).

libgnc is found, on first use, at $GNC_LIBRARY if set, else next to this
package, else where the loader finds it (ctypes.util.find_library), else in
the build folders of the checkout this package sits in; library_path() says
which.
"""

import ctypes
import numbers
import os
import threading
import warnings

import numpy as np

from . import _lib
from ._lib import Error, LibraryNotFound, Status

__version__ = "0.2.0"
__all__ = ["Error", "LibraryNotFound", "Status", "TensorInfo", "Plan", "Session", "compile",
           "compile_bytes", "from_torch", "load_plan", "load_plan_bytes", "version",
           "library_path"]

# gnc_dtype's names as the IR writes them, and the NumPy dtype of their data
# as sessions take and give it: float32 for every floating-point dtype (the
# C API's rule, f16 and bf16 included).  ORDER: gnc_dtype (include/gnc/gnc.h)
_DTYPES = [("f32", np.float32), ("f16", np.float32), ("bf16", np.float32),
           ("i32", np.int32), ("i64", np.int64), ("u8", np.uint8)]


def version():
    """libgnc's version, "0.2.0"."""
    return _lib.lib().gnc_version().decode()


def library_path():
    """The file libgnc was loaded from."""
    return _lib.path()


def _check(status, err):
    if status != Status.OK:
        raise Error(status, err.message.decode(errors="replace"))


def _path_arg(path):
    b = os.fsencode(os.fspath(path))
    if b"\0" in b:
        raise Error(Status.ARGUMENT, "the path %r holds a NUL byte" % (path,))
    return b


def _text_arg(what, text):
    """text (str or bytes) as C's char *: a NUL inside would cut it short."""
    b = text.encode() if isinstance(text, str) else bytes(text)
    if b"\0" in b:
        raise Error(Status.ARGUMENT, "%s %r holds a NUL byte" % (what, text))
    return b


_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = (0, (1 << 64) - 1)


def _int_arg(what, value, bounds):
    """value as a C integer in bounds (lo, hi): ctypes would wrap it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Error(Status.ARGUMENT, "%s must be an integer, not %s"
                    % (what, type(value).__name__))
    value = int(value)
    if not bounds[0] <= value <= bounds[1]:
        raise Error(Status.ARGUMENT, "%s %d is outside [%d, %d]" % (what, value, *bounds))
    return value


def _shape_text(dtype, shape):
    return "%s[%s]" % (dtype, ", ".join(str(d) for d in shape))


class TensorInfo:
    """An input, output or weight of a plan: name, dtype (the IR's name:
    "f32", "i32", ...), shape (a tuple), nbytes (of its data), numpy_dtype
    (that of the arrays a session takes and gives for it); source, for a
    weight, the name it had in the model it came from (an ONNX initializer's:
    the PyTorch state_dict key for a model torch.onnx.export wrote), else
    None."""

    __slots__ = ("name", "dtype", "shape", "nbytes", "numpy_dtype", "source")

    def __init__(self, c, source=None):
        self.source = source
        if not 0 <= c.dtype < len(_DTYPES) or not 0 <= c.rank <= _lib.MAX_RANK:
            raise Error(Status.FORMAT, "libgnc gave an unknown dtype %d or rank %d"
                        % (c.dtype, c.rank))
        self.name = c.name.decode()
        self.dtype, np_dtype = _DTYPES[c.dtype]
        self.numpy_dtype = np.dtype(np_dtype)
        self.shape = tuple(int(c.dims[i]) for i in range(c.rank))
        self.nbytes = int(c.bytes)

    def __repr__(self):
        return "<gnc.TensorInfo %s: %s>" % (self.name, _shape_text(self.dtype, self.shape))


class Plan:
    """A compiled program, read-only once loaded; several sessions may share
    it.  close() frees it at once, or, while sessions of it are open, when the
    last of them closes."""

    def __init__(self, handle):
        # not for users: load_plan, load_plan_bytes and compile make plans
        self._handle = handle
        self._closing = False
        self._sessions = 0  # open sessions, under _lock: the plan is freed after the last
        self._lock = threading.Lock()
        lib = _lib.lib()
        try:
            # copied once: the names are the plan's, and a TensorInfo outlives it
            self.inputs = self._infos(lib.gnc_plan_input_count, lib.gnc_plan_input)
            self.outputs = self._infos(lib.gnc_plan_output_count, lib.gnc_plan_output)
        except Error:
            self.close()
            raise
        self.devices = lib.gnc_plan_devices(handle)
        self.is_training = bool(lib.gnc_plan_is_training(handle))
        c = _lib.TensorInfoStruct()
        source = ctypes.c_char_p()
        params = []
        for i in range(lib.gnc_plan_param_count(handle)):
            if lib.gnc_plan_param(handle, i, ctypes.byref(c), ctypes.byref(source)) != Status.OK:
                self.close()
                raise Error(Status.FORMAT, "libgnc gave no weight %d" % i)
            params.append(TensorInfo(c, source.value.decode() if source.value else None))
        self.params = tuple(params)
        self._torch = None  # from_torch's names (gnc/_torch.py)

    def _infos(self, count, get):
        c = _lib.TensorInfoStruct()
        infos = []
        n = count(self._handle)
        for i in range(n):
            if get(self._handle, i, ctypes.byref(c)) != Status.OK:
                raise Error(Status.FORMAT, "libgnc gave no tensor %d of %d" % (i, n))
            infos.append(TensorInfo(c))
        return tuple(infos)

    def param(self, name):
        """The TensorInfo of weight name: a parameter or buffer, by its gnc
        name or by its source (see TensorInfo)."""
        for t in self.params:
            if t.name == name:
                return t
        found = [t for t in self.params if t.source == name]
        if len(found) == 1:
            return found[0]
        if found:
            raise Error(Status.ARGUMENT, "'%s' is the source of several weights (%s): name one"
                        % (name, ", ".join(t.name for t in found)))
        raise Error(Status.ARGUMENT, "no parameter or buffer '%s'" % name)

    def input(self, name):
        """The TensorInfo of input name."""
        return self._find(self.inputs, "input", name)

    def output(self, name):
        """The TensorInfo of output name."""
        return self._find(self.outputs, "output", name)

    @staticmethod
    def _find(infos, what, name):
        for t in infos:
            if t.name == name:
                return t
        raise Error(Status.ARGUMENT, "no %s '%s' (the plan has %s)"
                    % (what, name, ", ".join(t.name for t in infos) or "none"))

    def session(self, device=None, seed=0, eager=False, timeout_s=0.0, share_gpus=False):
        """A Session of this plan (see Session)."""
        return Session(self, device=device, seed=seed, eager=eager, timeout_s=timeout_s,
                       share_gpus=share_gpus)

    @property
    def closed(self):
        return self._closing

    def close(self):
        with self._lock:
            self._closing = True
            if self._sessions == 0 and self._handle:
                _lib.lib().gnc_plan_free(self._handle)
                self._handle = None

    def _session_opening(self):
        with self._lock:
            if self._closing:
                raise Error(Status.ARGUMENT, "the plan is closed")
            self._sessions += 1
            return self._handle

    def _session_closed(self):
        with self._lock:
            self._sessions -= 1
        if self._closing:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # sessions hold their plan, so none is open here
        if getattr(self, "_handle", None):
            warnings.warn("gnc.Plan was not closed", ResourceWarning, stacklevel=2)
            try:
                _lib.lib().gnc_plan_free(self._handle)
            except Exception:  # interpreter shutdown: the process frees it
                pass
            self._handle = None

    def __repr__(self):
        state = "closed" if self._closing else "%d device%s" % (
            self.devices, "" if self.devices == 1 else "s")
        return "<gnc.Plan %s, %s: %s -> %s>" % (
            "training" if self.is_training else "inference", state,
            ", ".join(t.name for t in self.inputs), ", ".join(t.name for t in self.outputs))


def load_plan(path):
    """Reads and checks a plan file (gnc compile MODEL -o FILE.gnc)."""
    handle = ctypes.c_void_p()
    err = _lib.ErrorStruct()
    _check(_lib.lib().gnc_plan_load(ctypes.byref(handle), _path_arg(path), ctypes.byref(err)),
           err)
    return Plan(handle.value)


def load_plan_bytes(data):
    """The same from the bytes of a plan (bytes, bytearray, memoryview)."""
    data = bytes(data)  # contiguous and immutable while libgnc reads it
    handle = ctypes.c_void_p()
    err = _lib.ErrorStruct()
    _check(_lib.lib().gnc_plan_load_memory(ctypes.byref(handle), data, len(data),
                                           ctypes.byref(err)), err)
    return Plan(handle.value)


def _compile_options(defines, train, momentum, devices, precision, no_kernels, loss=None,
                     strategy=None):
    """gnc_compile_options, and the define strings it points at (keep them)."""
    if defines is None:
        defines = []
    elif hasattr(defines, "items"):
        defines = ["%s=%s" % (k, v) for k, v in defines.items()]
    elif isinstance(defines, (str, bytes)):
        defines = [defines]
    encoded = [_text_arg("the define", d) for d in defines]
    array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
    opts = _lib.CompileOptionsStruct(
        defines=array, ndefines=len(encoded), train=bool(train), momentum=float(momentum),
        devices=_int_arg("devices", devices, (1, _INT32[1])),
        precision=_text_arg("the precision", precision) if precision else None,
        no_kernels=bool(no_kernels), loss=_text_arg("the loss", loss) if loss else None,
        strategy=_text_arg("the strategy", strategy) if strategy else None)
    return opts, array


def compile(model, defines=None, train=False, momentum=0.0, devices=1, precision=None,
            no_kernels=False, loss=None, strategy=None):
    """Compiles a model (.net, or IR text) into a Plan, as `gnc compile MODEL
    -o FILE.gnc` with the same options writes one.  defines: model parameters
    (gnc compile -D) as a mapping ({"batch": 4}) or "NAME=VALUE" strings;
    train: the training step (SGD with momentum); devices: data parallel over
    this many; precision: the CUDA program's ("fp32", "tf32", "bf16",
    "fp16"); no_kernels: leave the CUDA kernels out; loss: "cross_entropy:OUTPUT"
    or "mse:OUTPUT" gives a model without a loss (an imported one) one, its
    target a new input ("label", "target"), as gnc compile --loss; strategy:
    how devices share the work, as --strategy ("data" by default, "auto",
    "zero1", "tensor", "pipeline", ...).  A model with errors raises Error
    with its first diagnostic, "file:line:col: error: ..."."""
    opts, _keep = _compile_options(defines, train, momentum, devices, precision, no_kernels,
                                   loss, strategy)
    handle = ctypes.c_void_p()
    err = _lib.ErrorStruct()
    _check(_lib.lib().gnc_compile(ctypes.byref(handle), _path_arg(model), ctypes.byref(opts),
                                  ctypes.byref(err)), err)
    return Plan(handle.value)


def compile_bytes(data, name=None, defines=None, train=False, momentum=0.0, devices=1,
                  precision=None, no_kernels=False, loss=None, strategy=None):
    """compile() of a model given as bytes (bytes, bytearray, memoryview): an
    ONNX model (what torch.onnx.export writes into an io.BytesIO), .net text
    or IR text, told apart by name's suffix (.onnx, .net, .gir) or else by
    the bytes; name (default "<memory>") names it in messages."""
    data = bytes(data)  # contiguous and immutable while libgnc reads it
    opts, _keep = _compile_options(defines, train, momentum, devices, precision, no_kernels,
                                   loss, strategy)
    handle = ctypes.c_void_p()
    err = _lib.ErrorStruct()
    _check(_lib.lib().gnc_compile_memory(ctypes.byref(handle), data, len(data),
                                         _text_arg("the name", name) if name else None,
                                         ctypes.byref(opts), ctypes.byref(err)), err)
    return Plan(handle.value)


class Session:
    """A plan running on a device: "cpu", "cuda", or None for the default
    (cuda where a GPU is present, docs/api.md).  seed: the parameters'
    initializers and dropout masks; eager: cuda without CUDA graphs;
    timeout_s: how long a device of a partitioned plan waits for another
    (0: 300 s); share_gpus: cuda, a plan of more devices than GPUs runs with
    devices sharing them (else it is an error).  Inputs start at zero and
    stay set for later runs.

    step is the count of training steps taken: train_step uses and advances
    it, save_checkpoint records it, load_checkpoint sets it from the file."""

    def __init__(self, plan, device=None, seed=0, eager=False, timeout_s=0.0, share_gpus=False):
        if not isinstance(plan, Plan):
            raise Error(Status.ARGUMENT, "a session needs a gnc.Plan, not %s"
                        % type(plan).__name__)
        self._handle = None
        self._lock = threading.Lock()
        opts = _lib.SessionOptionsStruct(
            device=_text_arg("the device", device) if device is not None else None,
            seed=_int_arg("seed", seed, _UINT64),
            eager=bool(eager), timeout_s=float(timeout_s), share_gpus=bool(share_gpus))
        handle = ctypes.c_void_p()
        err = _lib.ErrorStruct()
        # counted as open first, so that the plan is not freed meanwhile
        status = _lib.lib().gnc_session_init(ctypes.byref(handle), plan._session_opening(),
                                             ctypes.byref(opts), ctypes.byref(err))
        if status != Status.OK:
            plan._session_closed()
            _check(status, err)
        self._handle = handle.value
        self.plan = plan  # it must outlive the session: held here
        self.step = 0

    def _h(self):
        if not self._handle:
            raise Error(Status.ARGUMENT, "the session is closed")
        return self._handle

    @property
    def device(self):
        """"cpu" or "cuda"."""
        return _lib.lib().gnc_session_device(self._h()).decode()

    @property
    def warning(self):
        """What went wrong without failing (a run that could not be captured
        into a CUDA graph), or None."""
        with self._lock:  # valid until the next call on the session: copied under the lock
            w = _lib.lib().gnc_session_warning(self._h())
            return w.decode() if w else None

    def set_input(self, name, array, convert=False):
        """Copies array into input name.  It must have the input's shape and
        NumPy dtype (TensorInfo.numpy_dtype) and be C-contiguous; convert=True
        converts one that is not (a dtype of the same kind: float64 to
        float32, int64 to int32; never a float to an integer), and anything
        np.asarray takes.  The shape is never changed."""
        info = self.plan.input(name)
        cname = _text_arg("the input name", name)
        want = "input %s is %s (NumPy %s, C-contiguous)" % (
            name, _shape_text(info.dtype, info.shape), info.numpy_dtype)
        if convert:
            try:
                given = np.asarray(array)
                array = np.ascontiguousarray(given.astype(
                    info.numpy_dtype, casting="same_kind", copy=False))
            except (TypeError, ValueError) as e:
                raise Error(Status.ARGUMENT, "%s: cannot convert: %s" % (want, e)) from None
            if (given.dtype.kind in "iub" and array.dtype.kind in "iu" and given.size and
                    not np.can_cast(given.dtype, array.dtype)):
                # a narrower integer: every value must fit, never wrap
                lo, hi = np.iinfo(array.dtype).min, np.iinfo(array.dtype).max
                small, large = given.min(), given.max()
                if small < lo or large > hi:
                    raise Error(Status.ARGUMENT, "%s: cannot convert: %d does not fit %s"
                                % (want, small if small < lo else large, array.dtype))
        elif not isinstance(array, np.ndarray):
            raise Error(Status.ARGUMENT, "%s: got %s, not a NumPy array (convert=True converts)"
                        % (want, type(array).__name__))
        if array.shape != info.shape:
            raise Error(Status.ARGUMENT, "%s: got shape %s" % (want, list(array.shape)))
        if array.dtype != info.numpy_dtype:
            raise Error(Status.ARGUMENT, "%s: got %s (convert=True converts)"
                        % (want, array.dtype.str if array.dtype.byteorder == ">"
                           else array.dtype))
        if not array.flags.c_contiguous:
            raise Error(Status.ARGUMENT, "%s: got a strided view (convert=True copies it)" % want)
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_set_input(self._h(), cname,
                                                    array.ctypes.data_as(ctypes.c_void_p),
                                                    array.nbytes, ctypes.byref(err)), err)

    def set_inputs(self, inputs, convert=False):
        """set_input for each name: array of a mapping."""
        for name, array in inputs.items():
            self.set_input(name, array, convert=convert)

    def run(self, inputs=None, convert=False):
        """One inference (an inference plan), after setting inputs (a mapping
        of name: array, if given); returns every output, {name: array}."""
        if inputs:
            self.set_inputs(inputs, convert=convert)
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_run(self._h(), ctypes.byref(err)), err)
        return self.outputs()

    def train_step(self, lr, inputs=None, step=None, convert=False):
        """One training step (a training plan) at learning rate lr, after
        setting inputs if given; step: the steps taken before it (Adam's bias
        correction, dropout masks), self.step when None.  self.step becomes
        step + 1.  Returns the loss."""
        if inputs:
            self.set_inputs(inputs, convert=convert)
        err = _lib.ErrorStruct()
        with self._lock:  # the step read, taken and counted as one, by one thread at a time
            taken = _int_arg("step", self.step if step is None else step, (0, _INT64[1] - 1))
            _check(_lib.lib().gnc_session_train_step(self._h(), float(lr), taken,
                                                     ctypes.byref(err)), err)
            self.step = taken + 1
            return self._loss_locked()

    def output(self, name, out=None):
        """Output name of the last run as a new array, or copied into out (an
        array of its shape and dtype, C-contiguous)."""
        info = self.plan.output(name)
        if out is None:
            out = np.empty(info.shape, info.numpy_dtype)
        elif (not isinstance(out, np.ndarray) or out.shape != info.shape or
              out.dtype != info.numpy_dtype or not out.flags.c_contiguous or
              not out.flags.writeable):
            raise Error(Status.ARGUMENT, "output %s is %s: out must be a writable C-contiguous "
                        "NumPy %s array of that shape" % (name, _shape_text(info.dtype, info.shape),
                                                          info.numpy_dtype))
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_output(self._h(), _text_arg("the output name", name),
                                                 out.ctypes.data_as(ctypes.c_void_p), out.nbytes,
                                                 ctypes.byref(err)), err)
        return out

    def outputs(self):
        """Every output of the last run, {name: array}."""
        return {t.name: self.output(t.name) for t in self.plan.outputs}

    @property
    def loss(self):
        """The loss of the last run or step (a model that has one)."""
        with self._lock:
            return self._loss_locked()

    def _loss_locked(self):
        value = ctypes.c_double()
        err = _lib.ErrorStruct()
        _check(_lib.lib().gnc_session_loss(self._h(), ctypes.byref(value),
                                           ctypes.byref(err)), err)
        return value.value

    def read_param(self, name, out=None):
        """Weight name (a parameter or buffer, by gnc name or source: see
        Plan.param) as the session holds it now, as a new array or copied
        into out."""
        info = self.plan.param(name)
        if out is None:
            out = np.empty(info.shape, info.numpy_dtype)
        elif (not isinstance(out, np.ndarray) or out.shape != info.shape or
              out.dtype != info.numpy_dtype or not out.flags.c_contiguous or
              not out.flags.writeable):
            raise Error(Status.ARGUMENT, "%s is %s: out must be a writable C-contiguous NumPy "
                        "%s array of that shape" % (info.name, _shape_text(info.dtype, info.shape),
                                                    info.numpy_dtype))
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_read_param(self._h(), info.name.encode(),
                                                     out.ctypes.data_as(ctypes.c_void_p),
                                                     out.nbytes, ctypes.byref(err)), err)
        return out

    def write_param(self, name, array):
        """Sets weight name (by gnc name or source) from array: its shape, or
        any shape of as many elements (PyTorch's, where an import reshaped
        it); converted to the weight's dtype where the kind agrees.  The next
        run or step uses it."""
        info = self.plan.param(name)
        want = "%s is %s" % (info.name, _shape_text(info.dtype, info.shape))
        try:
            given = np.asarray(array)
            a = np.ascontiguousarray(given.astype(info.numpy_dtype, casting="same_kind",
                                                  copy=False))
        except (TypeError, ValueError) as e:
            raise Error(Status.ARGUMENT, "%s: cannot convert: %s" % (want, e)) from None
        if a.size != int(np.prod(info.shape, dtype=np.int64)):
            raise Error(Status.ARGUMENT, "%s: got shape %s" % (want, list(given.shape)))
        a = a.reshape(info.shape)
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_write_param(self._h(), info.name.encode(),
                                                      a.ctypes.data_as(ctypes.c_void_p),
                                                      a.nbytes, ctypes.byref(err)), err)

    def state_dict(self, names="source"):
        """Every weight (parameters and buffers) as the session holds it now,
        {name: array}, in the plan's order.  names="source" keys each by its
        source where it has one (PyTorch's state_dict key for a model
        torch.onnx.export wrote), "gnc" by its gnc name.  For a plan of
        gnc.from_torch: torch tensors in the module's shapes, under its keys,
        in its order, with what the export left out (num_batches_tracked,
        advanced by the steps taken; tensors the forward pass does not read),
        so that module.load_state_dict(state, strict=True) takes it."""
        if names not in ("source", "gnc"):
            raise Error(Status.ARGUMENT, "names is 'source' or 'gnc', not %r" % (names,))
        if self.plan._torch is not None and names == "source":
            from . import _torch
            return _torch.state_dict(self)
        out = {}
        for t in self.plan.params:
            key = t.source if names == "source" and t.source else t.name
            out[key] = self.read_param(t.name)
        return out

    def load_state_dict(self, state, strict=True):
        """Sets weights from state, {name: array or torch tensor}: names as
        state_dict gives them (sources, gnc names, a PyTorch module's keys for
        a plan of gnc.from_torch).  strict: every weight of the plan must be
        there, and nothing else (for a plan of from_torch, the module's
        tensors the plan has no use for are let through).  Nothing is changed
        when a name or shape does not fit.  Returns (missing, unexpected):
        the plan's weights not given and the names not used."""
        if not hasattr(state, "items"):
            raise Error(Status.ARGUMENT, "state must be a mapping of name: array, not %s"
                        % type(state).__name__)
        ignored = set(self.plan._torch["extra"]) if self.plan._torch is not None else set()
        plan_items, unexpected = [], []
        for key, value in state.items():
            try:
                info = self.plan.param(key)
            except Error:
                if key not in ignored:
                    unexpected.append(key)
                continue
            if hasattr(value, "detach"):  # a torch tensor
                value = value.detach().cpu().numpy()
            plan_items.append((info, value))
        given = {info.name for info, _ in plan_items}
        # a plan of from_torch needs the module's tensors, not the constants of its forward pass
        needed = (list(self.plan._torch["keys"].values()) if self.plan._torch is not None
                  else [t.name for t in self.plan.params])
        missing = [name for name in needed if name not in given]
        if strict and (missing or unexpected):
            raise Error(Status.ARGUMENT, "load_state_dict: %s" % "; ".join(
                part for part in (
                    "missing %s" % ", ".join(missing) if missing else "",
                    "unexpected %s" % ", ".join(unexpected) if unexpected else "") if part))
        for info, value in plan_items:  # shapes first: nothing changes unless all fit
            if np.size(value) != int(np.prod(info.shape, dtype=np.int64)):
                raise Error(Status.ARGUMENT, "load_state_dict: %s is %s, got shape %s"
                            % (info.name, _shape_text(info.dtype, info.shape),
                               list(np.shape(value))))
        for info, value in plan_items:
            self.write_param(info.name, value)
        return missing, unexpected

    def save_checkpoint(self, path, step=None):
        """Writes every parameter, buffer and optimizer state to path
        (safetensors, as gnc train writes them), with step (self.step when
        None) in its metadata."""
        path = _path_arg(path)
        err = _lib.ErrorStruct()
        with self._lock:
            taken = _int_arg("step", self.step if step is None else step, _INT64)
            _check(_lib.lib().gnc_session_save_checkpoint(self._h(), path, taken,
                                                          ctypes.byref(err)), err)

    def load_checkpoint(self, path):
        """Loads a checkpoint (every parameter and buffer of the plan must be
        in it); self.step becomes its step, which is returned."""
        step = ctypes.c_int64()
        path = _path_arg(path)
        err = _lib.ErrorStruct()
        with self._lock:
            _check(_lib.lib().gnc_session_load_checkpoint(self._h(), path, ctypes.byref(step),
                                                          ctypes.byref(err)), err)
            self.step = step.value
            return self.step

    @property
    def closed(self):
        return not self._handle

    def close(self):
        with self._lock:
            if self._handle:
                _lib.lib().gnc_session_free(self._handle)
                self._handle = None
                self.plan._session_closed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            warnings.warn("gnc.Session was not closed", ResourceWarning, stacklevel=2)
            try:
                self.close()
            except Exception:  # interpreter shutdown: the process frees it
                pass

    def __repr__(self):
        if not self._handle:
            return "<gnc.Session closed>"
        return "<gnc.Session on %s, step %d>" % (self.device, self.step)


def from_torch(module, example_inputs, **options):
    """A Plan of a PyTorch nn.Module, compiled from its ONNX export in memory,
    starting from the module's current weights (gnc/_torch.py; docs/api.md,
    "From PyTorch"):

        from_torch(module, example_inputs, *, loss=None, train=False, devices=1,
                   strategy="auto", precision=None, momentum=0.0,
                   input_names=None, output_names=None, no_kernels=False,
                   opset=17)

    example_inputs: a tensor or a tuple of them, whose shapes the plan takes;
    loss: "cross_entropy" or "mse" on the module's output (its target a new
    input, "label" or "target"), so that the plan trains (train=True makes
    the training step); the rest as compile().  Errors name the PyTorch
    module and op that gnc cannot take."""
    from . import _torch
    return _torch.from_torch(module, example_inputs, **options)
