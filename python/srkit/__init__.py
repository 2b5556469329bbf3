"""srkit from Python: the fused AdamW step of every srkit precision strategy.

``srkit.torch.AdamW`` is a ``torch.optim.Optimizer`` over it (docs/python.md).
The C ABI it calls is ``srkit._capi``; importing ``srkit`` alone needs no torch.
"""

from srkit._capi import SrkitError, Rule, parse_strategy

__all__ = ["SrkitError", "Rule", "parse_strategy"]
