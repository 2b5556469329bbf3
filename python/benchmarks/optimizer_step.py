"""The optimizer step alone, in parameters per second: srkit.torch.AdamW against
torch.optim.AdamW (fused where torch has it on the device, else foreach) and
torchao's _AdamW with bf16 stochastic rounding, when torchao imports.

  python python/benchmarks/optimizer_step.py --params 67108864 --tensors 16 --steps 10

Every optimizer steps the same tensors (one model's worth, split in --tensors
equal parts) with fixed random gradients; the figure is the median of --steps
timed steps after --warmup untimed ones (docs/python.md, BENCHMARKS.md)."""

import argparse
import statistics
import time

import torch

import srkit.torch


def make(n, tensors, dtype, device):
    gen = torch.Generator().manual_seed(0)
    params = []
    for _ in range(tensors):
        p = torch.nn.Parameter((torch.randn(n // tensors, generator=gen) * 0.02).to(dtype))
        p.grad = (torch.randn(n // tensors, generator=gen) * 1e-3).to(dtype)
        params.append(p.to(device) if device != "cpu" else p)
    return params


def candidates():
    """(label, weight dtype, constructor over a parameter list)."""
    out = []
    for s in ("bf16-sr", "bf16", "mixed", "bf16-kahan"):
        out.append((f"srkit.torch.AdamW strategy={s}", torch.bfloat16,
                    lambda ps, s=s: srkit.torch.AdamW(ps, lr=1e-3, strategy=s, seed=1)))
    out.append(("srkit.torch.AdamW strategy=fp32", torch.float32,
                lambda ps: srkit.torch.AdamW(ps, lr=1e-3, strategy="fp32", seed=1)))
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        out.append((f"torch.optim.AdamW(fused=True) {name}", dtype,
                    lambda ps: torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.95), fused=True)))
    try:
        from torchao.optim import _AdamW

        out.append(("torchao _AdamW(bf16_stochastic_round=True) bf16", torch.bfloat16,
                    lambda ps: _AdamW(ps, lr=1e-3, betas=(0.9, 0.95),
                                      bf16_stochastic_round=True)))
    except ImportError as e:
        print(f"torchao: not available ({e})")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=1 << 26)
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="", help="run candidates whose label contains this")
    args = ap.parse_args()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print(f"{args.params} parameters in {args.tensors} tensors, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}, device {args.device}")
    print("| optimizer | ms/step (median) | Gparam/s |\n| --- | ---: | ---: |")
    for label, dtype, build in candidates():
        if args.only not in label:
            continue
        params = make(args.params, args.tensors, dtype, args.device)
        opt = build(params)
        times = []
        for i in range(args.warmup + args.steps):
            sync()
            t0 = time.perf_counter()
            opt.step()
            sync()
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
        ms = statistics.median(times) * 1e3
        print(f"| {label} | {ms:.1f} | {args.params / (ms * 1e-3) / 1e9:.3f} |", flush=True)
        del opt, params


if __name__ == "__main__":
    main()
