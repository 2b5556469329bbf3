"""The C ABI through ctypes with numpy arrays: parsing, errors, a known answer,
and the random-bits contract across shards. Needs numpy, not torch."""

import numpy as np
import pytest

from srkit import SrkitError, parse_strategy
from srkit import _capi

PRESETS = ["fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16", "amp"]


def ptr(a):
    return a.ctypes.data if a is not None else None


def bf16_from_f32(x):
    """Round-to-nearest-even fp32 -> bf16 bits (finite values)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def f32_from_bf16(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def state_arrays(rule, n):
    """Zeroed m, v (and master, kahan) in the rule's dtypes; master widened from w by the caller."""
    dt = {_capi.F32: np.float32, _capi.BF16: np.uint16}
    arrays = {"m": np.zeros(n, dt[rule.m]), "v": np.zeros(n, dt[rule.v])}
    if rule.master == _capi.MASTER_F32:
        arrays["master"] = np.zeros(n, np.float32)
    elif rule.master == _capi.MASTER_REM16:
        arrays["master"] = np.zeros(n, np.int16)
    if rule.kahan:
        arrays["kahan"] = np.zeros(n, np.uint16)
    return arrays


def step(rule, arrays, offset, count, decay, hyper, telemetry=None):
    _capi.adamw_step_cpu(rule, {k: ptr(a) for k, a in arrays.items()}, offset, count, decay,
                         hyper, telemetry, "test")


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_parses(name):
    rule = parse_strategy(name)
    assert rule.spec == name and rule.describe


def test_spec_overrides_a_preset():
    rule = parse_strategy("bf16-sr:m=f32,vround=sr")
    assert rule.m == _capi.F32 and rule.v_sr and rule.weight_sr


@pytest.mark.parametrize("spec", ["bf17", "bf16-sr:m=f16", "fp32:update=sr", ""])
def test_bad_strategy_is_one_line_error(spec):
    with pytest.raises(SrkitError) as e:
        parse_strategy(spec)
    assert "\n" not in str(e.value) and f"strategy '{spec}'" in str(e.value)


def test_step_zero_is_refused():
    rule = parse_strategy("fp32")
    n = 8
    arrays = {"weights": np.ones(n, np.float32), "grads": np.ones(n, np.float32),
              **state_arrays(rule, n)}
    with pytest.raises(SrkitError, match="1-based"):
        step(rule, arrays, 0, n, True, (1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0, 1, 0))


def test_fp32_step_equals_the_formula_bit_for_bit():
    # kernels/common/adamw.h's order of fp32 operations, in numpy float32 (no FMA).
    rng = np.random.default_rng(7)
    n = 1000
    w = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    m0 = (rng.standard_normal(n) * 0.1).astype(np.float32)
    v0 = (rng.random(n) * 0.1).astype(np.float32)
    lr, b1, b2, eps, wd, t = 1e-3, 0.9, 0.95, 1e-8, 0.1, 3
    rule = parse_strategy("fp32")
    arrays = {"weights": w.copy(), "grads": g, "m": m0.copy(), "v": v0.copy()}
    step(rule, arrays, 0, n, True, (lr, b1, b2, eps, wd, 1.0, 5, t))
    f = np.float32
    b1f, b2f = f(b1), f(b2)
    m = b1f * m0 + (f(1) - b1f) * g
    v = b2f * v0 + (f(1) - b2f) * (g * g)
    bc1, bc2 = f(1.0 - float(b1f) ** t), f(1.0 - float(b2f) ** t)
    d = (m / bc1) / (np.sqrt(v / bc2) + f(eps))
    d = d + f(wd) * w
    w_new = w + (-f(lr)) * d
    assert np.array_equal(arrays["m"].view(np.uint32), m.view(np.uint32))
    assert np.array_equal(arrays["v"].view(np.uint32), v.view(np.uint32))
    assert np.array_equal(arrays["weights"].view(np.uint32), w_new.view(np.uint32))


@pytest.mark.parametrize("name", PRESETS)
def test_two_shards_equal_the_whole_tensor(name):
    # The bits of element i depend on its global index only: shards at offsets
    # 1000 + [0, 333) and 1000 + [333, 1000) store what the whole tensor does.
    rule = parse_strategy(name)
    rng = np.random.default_rng(11)
    n, base, cut = 1000, 1000, 333
    w32 = (rng.standard_normal(n) * 0.02).astype(np.float32)
    g32 = (rng.standard_normal(n) * 1e-3).astype(np.float32)
    as_w = (lambda x: x.copy()) if rule.weights == _capi.F32 else bf16_from_f32
    as_g = (lambda x: x.copy()) if rule.grads == _capi.F32 else bf16_from_f32

    def fresh():
        arrays = {"weights": as_w(w32), "grads": as_g(g32), **state_arrays(rule, n)}
        if rule.master == _capi.MASTER_F32:
            arrays["master"][:] = f32_from_bf16(arrays["weights"])
        return arrays

    whole, parts = fresh(), fresh()
    for t in (1, 2, 3):
        hyper = (1e-2, 0.9, 0.95, 1e-8, 0.1, 1.0, 1234, t)
        step(rule, whole, base, n, True, hyper)
        for lo, hi in ((0, cut), (cut, n)):
            step(rule, {k: a[lo:hi] for k, a in parts.items()}, base + lo, hi - lo, True, hyper)
    for k in whole:
        assert np.array_equal(whole[k], parts[k]), k
    assert not np.array_equal(whole["weights"], as_w(w32))


def test_sr_bits_follow_the_offset_and_the_seed():
    rule = parse_strategy("bf16-sr")
    n = 4096
    rng = np.random.default_rng(3)
    w = bf16_from_f32(rng.standard_normal(n).astype(np.float32))
    g = bf16_from_f32((rng.standard_normal(n) * 1e-3).astype(np.float32))

    def run(offset, seed):
        arrays = {"weights": w.copy(), "grads": g, **state_arrays(rule, n)}
        step(rule, arrays, offset, n, False, (1e-3, 0.9, 0.95, 1e-8, 0.0, 1.0, seed, 1))
        return arrays["weights"]

    assert np.array_equal(run(0, 1), run(0, 1))
    assert not np.array_equal(run(0, 1), run(0, 2))
    assert not np.array_equal(run(0, 1), run(4096, 1))


def test_telemetry_counts_every_element():
    rule = parse_strategy("bf16")
    n = 512
    arrays = {"weights": bf16_from_f32(np.full(n, 1.0, np.float32)),
              "grads": bf16_from_f32(np.full(n, 1e-3, np.float32)), **state_arrays(rule, n)}
    tel = _capi.Telemetry()
    step(rule, arrays, 0, n, False, (1e-5, 0.9, 0.95, 1e-8, 0.0, 1.0, 1, 1), tel)
    # |update| = lr = 1e-5 < half an ulp of 1.0 (2^-9): round-to-nearest erases every one.
    assert tel.n == n and tel.nonzero == n and tel.erased == n
    assert np.all(arrays["weights"] == bf16_from_f32(np.full(n, 1.0, np.float32)))
