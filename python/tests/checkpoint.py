"""Reads an sr-train checkpoint (safetensors: JSON header + raw little-endian
tensors) into torch tensors, and runs sr-train for the tests."""

import json
import os
import struct
import subprocess
from pathlib import Path

import torch

_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "I16": torch.int16}
REPO = Path(__file__).resolve().parents[2]


def read(path):
    """(tensors by name in file order, metadata dict)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        raw = torch.frombuffer(bytearray(body[lo:hi]), dtype=torch.uint8)
        tensors[name] = raw.view(_DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors, meta


def sr_train():
    exe = os.environ.get("SRKIT_SR_TRAIN", str(REPO / "build" / "bin" / "sr-train"))
    if not Path(exe).is_file():
        raise FileNotFoundError(f"{exe}: sr-train not built (set SRKIT_SR_TRAIN)")
    return exe


def train(out, strategy, steps, seed, extra=()):
    """A tiny sr-train run writing a checkpoint after every step; returns its checkpoint folder."""
    subprocess.run([sr_train(), "--model", "tiny", "--batch", "2", "--seq-len", "32",
                    "--steps", str(steps), "--ckpt-interval", "1", "--strategy", strategy,
                    "--seed", str(seed), "--eval-interval", "0", "--eval-batches", "1",
                    "--sample-tokens", "0", "--threads", "2", "--out", str(out), "-q", *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return Path(out) / f"ckpt-{strategy}"
