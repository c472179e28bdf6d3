"""Finding and loading libgnc, and the C API's types and prototypes.

The declarations here mirror include/gnc/gnc.h one for one (ORDER: gnc.h):
ctypes cannot read the header, so a struct or enum that changes there must
change here too.  The library's version is checked when it loads, so a
libgnc whose ABI this module does not know is refused instead of misread.
"""

import ctypes
import ctypes.util
import enum
import glob
import os
import threading

# The libgnc versions whose ABI these declarations match: "0.2.x" (gnc.h has not
# changed since 0.1, but the Python module ships with its libgnc and says so).
ABI_VERSION = "0.2"

MAX_RANK = 8  # GNC_MAX_RANK


class ErrorStruct(ctypes.Structure):  # gnc_error
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512)]


class TensorInfoStruct(ctypes.Structure):  # gnc_tensor_info
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.c_int64 * MAX_RANK), ("bytes", ctypes.c_size_t)]


class CompileOptionsStruct(ctypes.Structure):  # gnc_compile_options
    _fields_ = [("defines", ctypes.POINTER(ctypes.c_char_p)), ("ndefines", ctypes.c_int),
                ("train", ctypes.c_int), ("momentum", ctypes.c_double),
                ("devices", ctypes.c_int), ("precision", ctypes.c_char_p),
                ("no_kernels", ctypes.c_int), ("loss", ctypes.c_char_p),
                ("strategy", ctypes.c_char_p)]


class SessionOptionsStruct(ctypes.Structure):  # gnc_session_options
    _fields_ = [("device", ctypes.c_char_p), ("seed", ctypes.c_uint64), ("eager", ctypes.c_int),
                ("timeout_s", ctypes.c_double), ("share_gpus", ctypes.c_int)]


class Status(enum.IntEnum):  # gnc_status
    OK = 0
    IO = 1           # a file cannot be read or written
    FORMAT = 2       # a plan or checkpoint is malformed, corrupt or does not fit
    ARGUMENT = 3     # a bad argument: an unknown name, a wrong size or dtype, a closed object
    UNSUPPORTED = 4  # valid, but not here (the cuda device without a driver)
    RUN = 5          # running failed (an embedding index or label out of range)
    MEMORY = 6       # out of memory


class Error(Exception):
    """A failure of libgnc or of a call into it: .status (a Status) and
    .message (libgnc's one-line message, or this module's for what it checks
    before calling)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = Status(status)
        self.message = message

    def __str__(self):
        return self.message


class LibraryNotFound(Error):
    """No libgnc could be loaded; the message lists every place looked at."""

    def __init__(self, message):
        super().__init__(Status.IO, message)


_P = ctypes.c_void_p
_ERR = ctypes.POINTER(ErrorStruct)
_INFO = ctypes.POINTER(TensorInfoStruct)
_S = ctypes.c_int  # gnc_status

# name: (return type, argument types)
_PROTOTYPES = {
    "gnc_version": (ctypes.c_char_p, []),
    "gnc_plan_load": (_S, [ctypes.POINTER(_P), ctypes.c_char_p, _ERR]),
    "gnc_plan_load_memory": (_S, [ctypes.POINTER(_P), ctypes.c_void_p, ctypes.c_size_t, _ERR]),
    "gnc_plan_free": (None, [_P]),
    "gnc_plan_devices": (ctypes.c_int, [_P]),
    "gnc_plan_is_training": (ctypes.c_int, [_P]),
    "gnc_plan_input_count": (ctypes.c_int, [_P]),
    "gnc_plan_input": (_S, [_P, ctypes.c_int, _INFO]),
    "gnc_plan_output_count": (ctypes.c_int, [_P]),
    "gnc_plan_output": (_S, [_P, ctypes.c_int, _INFO]),
    "gnc_plan_param_count": (ctypes.c_int, [_P]),
    "gnc_plan_param": (_S, [_P, ctypes.c_int, _INFO, ctypes.POINTER(ctypes.c_char_p)]),
    "gnc_compile": (_S, [ctypes.POINTER(_P), ctypes.c_char_p,
                         ctypes.POINTER(CompileOptionsStruct), _ERR]),
    "gnc_compile_memory": (_S, [ctypes.POINTER(_P), ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.c_char_p, ctypes.POINTER(CompileOptionsStruct), _ERR]),
    "gnc_session_init": (_S, [ctypes.POINTER(_P), _P, ctypes.POINTER(SessionOptionsStruct),
                              _ERR]),
    "gnc_session_free": (None, [_P]),
    "gnc_session_device": (ctypes.c_char_p, [_P]),
    "gnc_session_warning": (ctypes.c_char_p, [_P]),
    "gnc_session_set_input": (_S, [_P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                   _ERR]),
    "gnc_session_run": (_S, [_P, _ERR]),
    "gnc_session_train_step": (_S, [_P, ctypes.c_double, ctypes.c_int64, _ERR]),
    "gnc_session_output": (_S, [_P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, _ERR]),
    "gnc_session_loss": (_S, [_P, ctypes.POINTER(ctypes.c_double), _ERR]),
    "gnc_session_read_param": (_S, [_P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                    _ERR]),
    "gnc_session_write_param": (_S, [_P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                     _ERR]),
    "gnc_session_save_checkpoint": (_S, [_P, ctypes.c_char_p, ctypes.c_int64, _ERR]),
    "gnc_session_load_checkpoint": (_S, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64),
                                         _ERR]),
}

_lock = threading.Lock()
_lib = None
_path = None


def _candidates():
    """Where libgnc may be, in order, as (description, path or None); None:
    nothing there to try, the description says why."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("GNC_LIBRARY")
    if env:
        # named explicitly: the only place looked at, so a wrong path is an
        # error and not a silent fall back to another libgnc
        yield "GNC_LIBRARY=" + env, env
        return
    yield "GNC_LIBRARY (not set)", None
    bundled = sorted(glob.glob(os.path.join(here, "libgnc.so*")))
    if bundled:
        yield bundled[0], bundled[0]
    else:
        yield os.path.join(here, "libgnc.so*") + " (none)", None
    found = ctypes.util.find_library("gnc")
    if found:
        yield "ctypes.util.find_library('gnc') = " + found, found
    else:
        yield "ctypes.util.find_library('gnc') (found nothing)", None
    # the checkout this package sits in (python/gnc/ of one): its build
    # folders, build/ first
    root = os.path.dirname(os.path.dirname(here))
    if not os.path.exists(os.path.join(root, "include", "gnc", "gnc.h")):
        yield "the build folders of a checkout (%s is not in one)" % here, None
        return
    builds = [os.path.join(root, "build", "libgnc.so")]
    builds += [p for p in sorted(glob.glob(os.path.join(root, "build*", "libgnc.so")))
               if p not in builds]
    for p in builds:
        yield (p, p) if os.path.exists(p) else (p + " (no such file)", None)


def _load():
    looked = []
    for where, path in _candidates():
        if path is None:
            looked.append(where)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            looked.append("%s (%s)" % (where, e))
    raise LibraryNotFound(
        "cannot find libgnc; looked at: " + "; ".join(looked) +
        ". Set GNC_LIBRARY to the path of libgnc.so (build/libgnc.so after a build), "
        "or install it (cmake --install build)")


def lib():
    """The loaded libgnc with its prototypes declared; loaded on first use."""
    global _lib, _path
    with _lock:
        if _lib is None:
            handle, path = _load()
            for name, (restype, argtypes) in _PROTOTYPES.items():
                f = getattr(handle, name)
                f.restype = restype
                f.argtypes = argtypes
            version = handle.gnc_version().decode()
            if version.split(".")[:2] != ABI_VERSION.split("."):
                raise LibraryNotFound(
                    "%s is libgnc %s; this module speaks the ABI of libgnc %s.x"
                    % (path, version, ABI_VERSION))
            _lib, _path = handle, path
        return _lib


def path():
    """The file libgnc was loaded from (loading it if it was not yet)."""
    lib()
    return _path
