"""One srkit.torch.AdamW step stores the weights and state sr-train writes for
the same step from the same gradients, for every preset.

The gradients come out of sr-train itself: with beta1 = 0 the first moment
after a step is m = 0 * m_old + 1 * g, the step's gradient exactly (no clip,
constant learning rate), and m's dtype holds every gradient of these
strategies exactly. So checkpoint t gives the weights and state, checkpoint
t + 1 the gradient and the expected result."""

import pytest
import torch

import checkpoint
import srkit.torch

STATE = {"exp_avg": "adam_m", "exp_avg_sq": "adam_v", "master": "master",
         "master_rem16": "master_rem16", "kahan": "kahan_c"}
DECAY = ("wte", "wpe", "h.attn.c_attn.weight", "h.attn.c_proj.weight", "h.mlp.c_fc.weight",
         "h.mlp.c_proj.weight")  # sr-train decays matrices and embeddings (param_layout.cpp)
LR, BETA2, EPS, WD, SEED = 1e-3, 0.95, 1e-8, 0.1, 5

STRATEGIES = ["fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16", "amp",
              "bf16-sr:mround=sr,vround=sr"]


def layout(tensors):
    """(name, flat offset, tensor) in sr-train's order, each at a multiple of 64 elements."""
    at, out = 0, []
    for name, t in tensors.items():
        if name.startswith("optimizer."):
            continue
        out.append((name, at, t))
        at += (t.numel() + 63) // 64 * 64
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_step_equals_sr_train(tmp_path, strategy):
    folder = checkpoint.train(tmp_path, strategy, 3, SEED,
                              ["--beta1", "0", "--beta2", str(BETA2), "--eps", str(EPS),
                               "--weight-decay", str(WD), "--clip", "0", "--schedule", "constant",
                               "--warmup", "0", "--lr", str(LR)])
    before, meta = checkpoint.read(folder / "ckpt_00000002.safetensors")
    after, _ = checkpoint.read(folder / "ckpt_00000003.safetensors")
    assert meta["step"] == "2"
    entries = layout(before)
    params = {name: torch.nn.Parameter(t.clone()) for name, _, t in entries}
    groups = [{"params": [], "offsets": [], "weight_decay": WD},
              {"params": [], "offsets": [], "weight_decay": 0.0}]
    for name, offset, _ in entries:
        g = groups[0] if name in DECAY else groups[1]
        g["params"].append(params[name])
        g["offsets"].append(offset)
    opt = srkit.torch.AdamW(groups, lr=LR, betas=(0.0, BETA2), eps=EPS, strategy=strategy,
                            seed=SEED)
    # The state of step 2 from sr-train's flat arrays, through load_state_dict.
    sd = opt.state_dict()
    order = [p for g in opt.param_groups for p in g["params"]]
    offsets = {id(p): o for g in opt.param_groups for p, o in zip(g["params"], g["offsets"])}
    state = {}
    for i, p in enumerate(order):
        lo, hi = offsets[id(p)], offsets[id(p)] + p.numel()
        state[i] = {"step": 2}
        for key, saved in STATE.items():
            if f"optimizer.{saved}" in before:
                state[i][key] = before[f"optimizer.{saved}"][lo:hi].clone()
        grad = after["optimizer.adam_m"][lo:hi].reshape(p.shape)
        p.grad = grad.to(p.dtype)
        assert torch.equal(p.grad.to(grad.dtype), grad), "m must hold the gradient exactly"
    sd["state"] = state
    opt.load_state_dict(sd)
    opt.step()
    names = {id(p): n for n, p in params.items()}
    for p in order:
        name, lo = names[id(p)], offsets[id(p)]
        assert torch.equal(p.detach().view(torch.int16 if p.dtype == torch.bfloat16
                                           else torch.int32),
                           after[name].view(torch.int16 if p.dtype == torch.bfloat16
                                            else torch.int32)), name
        for key, saved in STATE.items():
            if key in opt.state[p]:
                want = after[f"optimizer.{saved}"][lo:lo + p.numel()]
                assert torch.equal(opt.state[p][key], want), f"{name} {key}"
        assert opt.state[p]["step"] == 3
    # The step moved the weights (round-to-nearest may erase every update of a
    # LayerNorm gain, but not of a matrix).
    for name in DECAY:
        assert not torch.equal(params[name].detach(), before[name]), name
