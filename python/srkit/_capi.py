"""ctypes binding of libsrkit_capi.so (python/csrc/srkit_capi.h).

The library is found at $SRKIT_LIBRARY, else next to this file (where
``pip install ./python`` copies it from the CMake build folder).
"""

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

F32, BF16 = 0, 1
MASTER_NONE, MASTER_F32, MASTER_REM16 = 0, 1, 2
CAPI_VERSION = 1


class SrkitError(ValueError):
    """A one-line error from srkit: bad input, or a call the kernels refused."""


class _Rule(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in
                ("weights", "grads", "master", "m", "v", "weight_sr", "m_sr", "v_sr", "kahan")]


class _Hyper(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_float), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
                ("eps", ctypes.c_float), ("weight_decay", ctypes.c_float),
                ("grad_scale", ctypes.c_float), ("seed", ctypes.c_uint64),
                ("step", ctypes.c_uint64)]


class _Buffers(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in
                ("weights", "grads", "master", "m", "v", "kahan")]


class Telemetry(ctypes.Structure):
    """Sums over the elements of one step (AdamWTelemetry in kernels/common/adamw.h)."""
    _fields_ = [("update_sq", ctypes.c_double), ("weight_sq", ctypes.c_double),
                ("n", ctypes.c_uint64), ("nonzero", ctypes.c_uint64), ("erased", ctypes.c_uint64),
                ("m_stalled", ctypes.c_uint64), ("v_stalled", ctypes.c_uint64)]


TELEMETRY_FIELDS = [name for name, _ in Telemetry._fields_]


@dataclass(frozen=True)
class Rule:
    """A parsed strategy: storage dtype codes (F32, BF16) and roundings per array."""
    spec: str
    describe: str
    weights: int
    grads: int
    master: int
    m: int
    v: int
    weight_sr: bool
    m_sr: bool
    v_sr: bool
    kahan: bool

    def _c(self):
        return _Rule(self.weights, self.grads, self.master, self.m, self.v, int(self.weight_sr),
                     int(self.m_sr), int(self.v_sr), int(self.kahan))


def _library_path():
    env = os.environ.get("SRKIT_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "libsrkit_capi.so"


def _load():
    path = _library_path()
    if not path.is_file():
        raise ImportError(f"srkit: {path} not found (build it with `cmake --build build --target "
                          "srkit_capi`, then `pip install ./python` or set SRKIT_LIBRARY)")
    lib = ctypes.CDLL(str(path))
    lib.srkit_capi_version.restype = ctypes.c_int
    if lib.srkit_capi_version() != CAPI_VERSION:
        raise ImportError(f"srkit: {path} has C ABI version {lib.srkit_capi_version()}, "
                          f"this package expects {CAPI_VERSION}")
    lib.srkit_last_error.restype = ctypes.c_char_p
    u64, ptr = ctypes.c_uint64, ctypes.c_void_p
    signatures = {
        "srkit_strategy_parse": [ctypes.c_char_p, ctypes.POINTER(_Rule), ctypes.c_char_p,
                                 ctypes.c_size_t],
        "srkit_adamw_step_cpu": [ctypes.POINTER(_Rule), ctypes.POINTER(_Buffers), u64, u64,
                                 ctypes.c_int, ctypes.POINTER(_Hyper), ptr],
        "srkit_has_cuda": [],
        "srkit_adamw_cuda_plan_bytes": [u64, u64, ctypes.c_int, ctypes.POINTER(u64)],
        "srkit_adamw_cuda_plan_image": [u64, u64, ctypes.c_int, ptr, u64],
        "srkit_adamw_step_cuda": [ctypes.POINTER(_Rule), ctypes.POINTER(_Buffers), u64, u64,
                                  ctypes.c_int, ctypes.POINTER(_Hyper), ptr, ptr, ptr],
    }
    for name, args in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    return lib


_lib = _load()


def _check(rc, context):
    if rc != 0:
        raise SrkitError(f"{context}: {_lib.srkit_last_error().decode()}")


def parse_strategy(spec):
    """The rule of a strategy in sr-train's --strategy grammar; SrkitError if it does not parse."""
    if not isinstance(spec, str):
        raise SrkitError(f"strategy: expected a string such as 'bf16-sr', got {spec!r}")
    rule = _Rule()
    describe = ctypes.create_string_buffer(256)
    _check(_lib.srkit_strategy_parse(spec.encode(), ctypes.byref(rule), describe, 256),
           f"strategy '{spec}'")
    return Rule(spec, describe.value.decode(), rule.weights, rule.grads, rule.master, rule.m,
                rule.v, bool(rule.weight_sr), bool(rule.m_sr), bool(rule.v_sr), bool(rule.kahan))


def has_cuda():
    return bool(_lib.srkit_has_cuda())


def _hyper(lr, beta1, beta2, eps, weight_decay, grad_scale, seed, step):
    return _Hyper(lr, beta1, beta2, eps, weight_decay, grad_scale, seed, step)


def adamw_step_cpu(rule, ptrs, offset, count, decay, hyper, telemetry, context):
    """One step over host arrays. ptrs: dict of addresses (weights, grads, master, m, v, kahan)."""
    buffers = _Buffers(*(ptrs.get(name) for name, _ in _Buffers._fields_))
    _check(_lib.srkit_adamw_step_cpu(ctypes.byref(rule._c()), ctypes.byref(buffers), offset,
                                     count, int(decay), ctypes.byref(_hyper(*hyper)),
                                     ctypes.byref(telemetry) if telemetry is not None else None),
           context)


def cuda_plan_image(offset, count, decay, context):
    """The host bytes of the CUDA step's plan of one tensor, to copy to the device once."""
    nbytes = ctypes.c_uint64()
    _check(_lib.srkit_adamw_cuda_plan_bytes(offset, count, int(decay), ctypes.byref(nbytes)),
           context)
    image = (ctypes.c_ubyte * nbytes.value)()
    _check(_lib.srkit_adamw_cuda_plan_image(offset, count, int(decay), image, nbytes.value),
           context)
    return bytes(image)


def adamw_step_cuda(rule, ptrs, offset, count, decay, hyper, plan, telemetry, stream, context):
    """One step over device arrays on `stream` (a cudaStream_t as an int); plan, telemetry:
    device addresses (telemetry may be None)."""
    buffers = _Buffers(*(ptrs.get(name) for name, _ in _Buffers._fields_))
    _check(_lib.srkit_adamw_step_cuda(ctypes.byref(rule._c()), ctypes.byref(buffers), offset,
                                      count, int(decay), ctypes.byref(_hyper(*hyper)), plan,
                                      telemetry, stream), context)
