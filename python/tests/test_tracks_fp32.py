"""A small regression model trained in one loop with torch.optim.AdamW (fp32)
and with srkit.torch.AdamW: the bf16-sr run tracks fp32 AdamW, as sr-train's
does, where round-to-nearest bf16 stalls (fixed seeds, stated tolerances)."""

import torch

import srkit.torch

LR, STEPS = 1e-3, 300


def final_loss(strategy):
    torch.manual_seed(0)
    x = torch.randn(512, 32)
    y = x @ (torch.randn(32, 8) * 0.5)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    dtype = torch.float32 if strategy in ("torch", "fp32") else torch.bfloat16
    net = net.to(dtype)
    if strategy == "torch":
        opt = torch.optim.AdamW(net.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.0)
    else:
        opt = srkit.torch.AdamW(net.parameters(), lr=LR, weight_decay=0.0, strategy=strategy,
                                seed=1)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x.to(dtype)).float(), y).backward()
        opt.step()
    with torch.no_grad():
        return torch.nn.functional.mse_loss(net(x.to(dtype)).float(), y).item()


def test_bf16_sr_tracks_fp32_adamw_where_round_to_nearest_stalls():
    ref = final_loss("torch")
    # srkit's fp32 step is AdamW's formula in fp32 (another operation order than torch's).
    assert abs(final_loss("fp32") - ref) <= 1e-4 * ref
    assert abs(final_loss("mixed") - ref) <= 0.02 * ref
    sr = final_loss("bf16-sr")
    rn = final_loss("bf16")
    # Measured on the build machine: ref 0.0799, bf16-sr 0.0814 (+2%), bf16 0.121 (+51%).
    assert sr <= 1.05 * ref
    assert rn >= 1.25 * ref
