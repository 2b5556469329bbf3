"""On a GPU: srkit.torch.AdamW on CUDA tensors stores the CPU step's bits, on
the current stream, telemetry counts included. Skips without a GPU or without a
CUDA build of the library."""

import pytest
import torch

import srkit.torch
from srkit import _capi

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and _capi.has_cuda()),
                                reason="needs a CUDA device and a CUDA build of libsrkit_capi")

STRATEGIES = ["fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16",
              "bf16-sr:mround=sr,vround=sr"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cuda_step_equals_cpu_step(strategy):
    dtype = torch.float32 if strategy == "fp32" else torch.bfloat16
    torch.manual_seed(2)
    w = [(torch.randn(n) * 0.02).to(dtype) for n in (3000, 70000, 5)]
    cpu = [torch.nn.Parameter(t.clone()) for t in w]
    gpu = [torch.nn.Parameter(t.clone().cuda()) for t in w]
    o_cpu = srkit.torch.AdamW(cpu, lr=1e-2, strategy=strategy, seed=3, telemetry=True)
    o_gpu = srkit.torch.AdamW(gpu, lr=1e-2, strategy=strategy, seed=3, telemetry=True)
    stream = torch.cuda.Stream()
    for _ in range(3):
        for a, b in zip(cpu, gpu):
            g = (torch.randn(a.shape) * 1e-3).to(dtype)
            a.grad, b.grad = g.clone(), g.clone().cuda()
        o_cpu.step()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            o_gpu.step()
        torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    for a, b in zip(cpu, gpu):
        assert torch.equal(a.detach(), b.detach().cpu())
        for key, t in o_cpu.state[a].items():
            if key != "step":
                assert torch.equal(t, o_gpu.state[b][key].cpu()), key
    tc, tg = srkit.torch.telemetry(o_cpu)[0], srkit.torch.telemetry(o_gpu)[0]
    for key in ("n", "nonzero", "erased", "m_stalled", "v_stalled"):
        assert tc[key] == tg[key], key
