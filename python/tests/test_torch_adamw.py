"""srkit.torch.AdamW: resume bit for bit through state_dict, shards of a tensor,
replicas, telemetry and the one-line errors of bad input (CPU)."""

import copy

import pytest
import torch

import srkit.torch
from srkit import SrkitError

STRATEGIES = ["fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16",
              "bf16-sr:m=f32,vround=sr"]


def dtype_of(strategy):
    return torch.float32 if strategy in ("fp32", "amp") else torch.bfloat16


def model(dtype, seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    return net.to(dtype)


def train(net, opt, steps, seed=1):
    gen = torch.Generator().manual_seed(seed)
    dtype = next(net.parameters()).dtype
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen).to(dtype)
        y = torch.randn(8, 4, generator=gen).to(dtype)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x).float(), y.float()).backward()
        opt.step()


def bits(net):
    return [p.detach().clone() for p in net.parameters()]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_resume_from_state_dict_is_bit_for_bit(strategy):
    # Six steps straight, against three steps, a save, a fresh model and
    # optimizer loaded from the save, and three more: the same bits.
    dtype = dtype_of(strategy)
    straight = model(dtype)
    opt = srkit.torch.AdamW(straight.parameters(), lr=1e-2, strategy=strategy, seed=9)
    train(straight, opt, 3, seed=1)
    train(straight, opt, 3, seed=2)

    first = model(dtype)
    opt1 = srkit.torch.AdamW(first.parameters(), lr=1e-2, strategy=strategy, seed=9)
    train(first, opt1, 3, seed=1)
    saved_model = copy.deepcopy(first.state_dict())
    saved_opt = copy.deepcopy(opt1.state_dict())
    del first, opt1

    resumed = model(dtype, seed=123)  # other weights: the save must restore them all
    resumed.load_state_dict(saved_model)
    opt2 = srkit.torch.AdamW(resumed.parameters(), lr=1e-2, strategy=strategy, seed=0)
    opt2.load_state_dict(saved_opt)  # seed 9 and step 3 come back with it
    assert opt2.param_groups[0]["seed"] == 9
    train(resumed, opt2, 3, seed=2)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a.detach(), b.detach())
        sa, sb = opt.state[a], opt2.state[b]
        assert sa.keys() == sb.keys() and sb["step"] == 6
        for key in sa:
            if key != "step":
                assert sa[key].dtype == sb[key].dtype and torch.equal(sa[key], sb[key]), key


def test_state_keeps_the_strategy_dtypes_through_load():
    net = model(torch.bfloat16)
    opt = srkit.torch.AdamW(net.parameters(), strategy="mixed", seed=1)
    train(net, opt, 1)
    sd = copy.deepcopy(opt.state_dict())
    opt2 = srkit.torch.AdamW(net.parameters(), strategy="mixed", seed=1)
    opt2.load_state_dict(sd)
    state = opt2.state[next(net.parameters())]
    assert state["master"].dtype == torch.float32 and state["exp_avg"].dtype == torch.float32
    assert torch.equal(state["master"], sd["state"][0]["master"])


@pytest.mark.parametrize("strategy", ["bf16-sr", "bf16-kahan", "mixed", "bf16-rem16"])
def test_two_shards_equal_the_whole_tensor(strategy):
    # A tensor of 3 x 1000 elements at global offset 4096, and its two row
    # shards (as FSDP2 splits dim 0) given the global offsets of their first elements.
    torch.manual_seed(4)
    w = (torch.randn(3, 1000) * 0.02).to(torch.bfloat16)
    whole = torch.nn.Parameter(w.clone())
    top, bottom = torch.nn.Parameter(w[:1].clone()), torch.nn.Parameter(w[1:].clone())
    o_whole = srkit.torch.AdamW([{"params": [whole], "offsets": [4096]}], lr=1e-2,
                                strategy=strategy, seed=77)
    o_shards = srkit.torch.AdamW([{"params": [top, bottom], "offsets": [4096, 5096]}], lr=1e-2,
                                 strategy=strategy, seed=77)
    for step in range(4):
        g = (torch.randn(3, 1000) * 1e-3).to(torch.bfloat16)
        whole.grad, top.grad, bottom.grad = g.clone(), g[:1].clone(), g[1:].clone()
        o_whole.step()
        o_shards.step()
    assert torch.equal(whole.detach(), torch.cat([top.detach(), bottom.detach()]))
    for key in o_whole.state[whole]:
        if key != "step":
            joined = torch.cat([o_shards.state[top][key], o_shards.state[bottom][key]])
            assert torch.equal(o_whole.state[whole][key], joined), key
    assert not torch.equal(whole.detach(), w)


def test_replicas_with_one_seed_agree_and_other_seeds_differ():
    nets = [model(torch.bfloat16) for _ in range(3)]
    opts = [srkit.torch.AdamW(n.parameters(), lr=1e-2, seed=s) for n, s in zip(nets, (5, 5, 6))]
    for n, o in zip(nets, opts):
        train(n, o, 3)
    same = all(torch.equal(a, b) for a, b in zip(bits(nets[0]), bits(nets[1])))
    other = all(torch.equal(a, b) for a, b in zip(bits(nets[0]), bits(nets[2])))
    assert same and not other


def test_default_offsets_pack_parameters_at_multiples_of_64():
    a, b = torch.nn.Parameter(torch.zeros(100)), torch.nn.Parameter(torch.zeros(3))
    c = torch.nn.Parameter(torch.zeros(5))
    opt = srkit.torch.AdamW([{"params": [a, b]}, {"params": [c], "weight_decay": 0.0}],
                            strategy="fp32")
    assert opt.param_groups[0]["offsets"] == [0, 128]
    assert opt.param_groups[1]["offsets"] == [192]


def test_telemetry_per_group():
    net = model(torch.bfloat16)
    decay = [p for p in net.parameters() if p.dim() == 2]
    rest = [p for p in net.parameters() if p.dim() == 1]
    opt = srkit.torch.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-6, strategy="bf16-sr", telemetry=True)
    train(net, opt, 1)
    tel = srkit.torch.telemetry(opt)
    assert len(tel) == 2
    assert tel[0]["n"] == sum(p.numel() for p in decay)
    # lr 1e-6: nearly every update is below half an ulp of its weight.
    assert tel[0]["erased_frac"] > 0.9 and 0 < tel[0]["update_weight_ratio"] < 1e-4
    with pytest.raises(ValueError, match="telemetry=True"):
        srkit.torch.telemetry(srkit.torch.AdamW(net.parameters()))


def test_named_parameters_name_the_culprit():
    net = model(torch.float32)
    with pytest.raises(SrkitError) as e:
        srkit.torch.AdamW(net.named_parameters(), strategy="bf16-sr")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("parameter 0.weight:") and "torch.bfloat16" in msg


def test_bad_strategy_is_one_line():
    with pytest.raises(SrkitError) as e:
        srkit.torch.AdamW(model(torch.bfloat16).parameters(), strategy="bf16-sr:update=maybe")
    assert "\n" not in str(e.value) and "group 0" in str(e.value) and "update" in str(e.value)


def test_wrong_dtype_names_the_parameter():
    net = model(torch.bfloat16)
    with pytest.raises(SrkitError, match=r"parameter param_groups\[0\]\[0\]: strategy 'fp32' "
                                         r"stores weights as torch.float32, got torch.bfloat16"):
        srkit.torch.AdamW(net.parameters(), strategy="fp32")


def test_sparse_gradient_is_refused():
    emb = torch.nn.Embedding(10, 4, sparse=True).to(torch.bfloat16)
    opt = srkit.torch.AdamW(emb.named_parameters())
    emb(torch.tensor([1, 2])).float().sum().backward()
    with pytest.raises(SrkitError, match="parameter weight: sparse gradients are not supported"):
        opt.step()


def test_gradient_of_another_dtype_is_refused():
    p = torch.nn.Parameter(torch.zeros(8, dtype=torch.bfloat16))
    opt = srkit.torch.AdamW([p], strategy="bf16-sr:g=f32")
    p.grad = torch.ones(8, dtype=torch.bfloat16)
    with pytest.raises(SrkitError, match="needs torch.float32 gradients, got torch.bfloat16"):
        opt.step()
