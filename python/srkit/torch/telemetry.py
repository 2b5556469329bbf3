"""The last step's rounding telemetry per parameter group, as sr-train logs it
per tensor group (lib/train/group_telemetry.h)."""

import math

import torch

from srkit import _capi


def _sums(raw):
    """A telemetry record: a ctypes Telemetry (CPU) or a 56-byte device tensor (CUDA)."""
    if isinstance(raw, _capi.Telemetry):
        return {name: getattr(raw, name) for name in _capi.TELEMETRY_FIELDS}
    host = raw.cpu()
    doubles = host[:16].view(torch.float64).tolist()
    counts = host[16:].view(torch.int64).tolist()
    return dict(zip(_capi.TELEMETRY_FIELDS, doubles + counts))


def telemetry(optimizer):
    """One dict per parameter group of the last step: erased_frac (updates round-to-nearest
    of a bf16 weight would erase, over nonzero updates), update_weight_ratio (rms(update) /
    rms(weight)), and the raw sums. The optimizer needs telemetry=True."""
    if not getattr(optimizer, "collect_telemetry", False):
        raise ValueError("srkit.torch.telemetry: the optimizer was built without telemetry=True")
    out = []
    for records in optimizer.last_telemetry():
        total = dict.fromkeys(_capi.TELEMETRY_FIELDS, 0)
        for raw in records:
            for name, value in _sums(raw).items():
                total[name] += value
        erased = total["erased"] / total["nonzero"] if total["nonzero"] else 0.0
        ratio = math.sqrt(total["update_sq"] / total["weight_sq"]) if total["weight_sq"] else 0.0
        out.append({"erased_frac": erased, "update_weight_ratio": ratio, **total})
    return out
