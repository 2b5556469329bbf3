"""srkit's fused AdamW as a torch optimizer (docs/python.md)."""

from srkit.torch.optimizer import AdamW
from srkit.torch.telemetry import telemetry

__all__ = ["AdamW", "telemetry"]
