"""Step functions against hand-computed trajectories (plain Python floats as the oracle)."""

from __future__ import annotations

import io
import math

import pytest
import torch

from snrl.functional import (
    ALIFState,
    LIFState,
    LIState,
    SpyLIFState,
    alif_step,
    default_spike_grad,
    heaviside,
    li_step,
    lif_step,
    spylif_step,
)

DT, TAU = 1e-3, 20e-3
ALPHA = math.exp(-DT / TAU)


def _t(x: float) -> torch.Tensor:
    return torch.tensor([[x]], dtype=torch.float64)


def test_alpha_value_by_hand() -> None:
    assert ALPHA == pytest.approx(0.951229424500714, abs=1e-12)


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_step_golden_trajectory(reset: str) -> None:
    # Constant current 0.3, threshold 1: v = 0.3, 0.58537, 0.85682, 1.11503 -> spike at step 3.
    expected_v = []
    v, z = 0.0, 0.0
    for _ in range(8):
        if reset == "subtract":
            v = ALPHA * v + 0.3 - 1.0 * z
        else:
            v = ALPHA * v * (1 - z) + 0.3
        z = 1.0 if v > 1.0 else 0.0
        expected_v.append((v, z))
    assert expected_v[3][1] == 1.0 and expected_v[2][1] == 0.0
    assert expected_v[3][0] == pytest.approx(1.1150324, abs=1e-6)
    # step 4 by hand: subtract -> 1.11503*alpha + 0.3 - 1 = 0.36065; zero -> 0.3
    assert expected_v[4][0] == pytest.approx(0.3606517 if reset == "subtract" else 0.3, abs=1e-6)

    state = LIFState(_t(0.0), _t(0.0))
    alpha = torch.tensor([ALPHA], dtype=torch.float64)
    for v_exp, z_exp in expected_v:
        z, state = lif_step(_t(0.3), state, alpha, 1.0, None, reset)
        assert state.v.item() == pytest.approx(v_exp, abs=1e-12)
        assert z.item() == z_exp == state.z.item()


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_alif_step_golden_trajectory(reset: str) -> None:
    rho = math.exp(-DT / 0.2)
    beta, cur = 1.8, 0.6
    v = z = a = 0.0
    expected = []
    for _ in range(30):
        a = rho * a + (1 - rho) * z
        thr = 1.0 + beta * a
        v = ALPHA * v + cur - thr * z if reset == "subtract" else ALPHA * v * (1 - z) + cur
        z = 1.0 if v > thr else 0.0
        expected.append((v, z, a))
    assert sum(e[1] for e in expected) >= 3  # it does fire, so adaptation is exercised
    state = ALIFState(_t(0.0), _t(0.0), _t(0.0))
    al = torch.tensor([ALPHA], dtype=torch.float64)
    rh = torch.tensor([rho], dtype=torch.float64)
    for v_exp, z_exp, a_exp in expected:
        z, state = alif_step(_t(cur), state, al, rh, 1.0, beta, None, reset)
        assert state.v.item() == pytest.approx(v_exp, abs=1e-12)
        assert state.a.item() == pytest.approx(a_exp, abs=1e-12)
        assert z.item() == z_exp


def test_spylif_step_golden_current_filtering() -> None:
    alpha_syn = math.exp(-DT / 5e-3)
    state = SpyLIFState(_t(0.0), _t(0.0), _t(0.0))
    al = torch.tensor([ALPHA], dtype=torch.float64)
    asyn = torch.tensor([alpha_syn], dtype=torch.float64)
    i = v = z = 0.0
    for t in range(12):
        inp = 0.2 if t < 3 else 0.0  # a short pulse: the current decays after it
        i = alpha_syn * i + inp
        v = ALPHA * v + i - z
        z = 1.0 if v > 1.0 else 0.0
        out, state = spylif_step(_t(inp), state, al, asyn, 1.0, None, "subtract")
        assert state.i.item() == pytest.approx(i, abs=1e-12)
        assert state.v.item() == pytest.approx(v, abs=1e-12)
        assert out.item() == z
    # by hand: after the pulse the current decays by alpha_syn per step
    assert i == pytest.approx(0.2 * (1 + alpha_syn + alpha_syn**2) * alpha_syn**9, rel=1e-12)


def test_li_step_integrates() -> None:
    state = LIState(_t(0.5))
    al = torch.tensor([ALPHA], dtype=torch.float64)
    out, state = li_step(_t(0.25), state, al)
    assert out.item() == pytest.approx(0.5 * ALPHA + 0.25, abs=1e-12)
    assert state.v is out


def test_surrogate_forward_equals_heaviside_and_gradient_is_finite_nonzero() -> None:
    x = torch.linspace(-2, 2, 41, dtype=torch.float32).reshape(1, -1)
    spike_grad = default_spike_grad()
    assert torch.equal(spike_grad(x).to(x.dtype), heaviside(x))
    v = (x + 1.0).requires_grad_()
    state = LIFState(torch.zeros_like(x), torch.zeros_like(x))
    z, _ = lif_step(v, state, torch.ones(41), 1.0, spike_grad, "subtract")
    (g,) = torch.autograd.grad(z.sum(), v)
    assert torch.isfinite(g).all() and (g > 0).all()
    # fast sigmoid, slope 10: derivative 1 at threshold, 1/121 one unit away
    assert g[0, 20].item() == pytest.approx(1.0)
    assert g[0, 10].item() == pytest.approx(1 / 121, rel=1e-5)


def test_gradient_flows_through_subtractive_reset() -> None:
    z_prev = torch.ones(1, 1, requires_grad=True)
    state = LIFState(torch.zeros(1, 1), z_prev)
    _, new = lif_step(torch.zeros(1, 1), state, torch.ones(1), 0.7, default_spike_grad())
    (g,) = torch.autograd.grad(new.v.sum(), z_prev)
    assert g.item() == pytest.approx(-0.7)


@pytest.mark.parametrize(
    "state",
    [
        LIFState(torch.randn(2, 3), torch.ones(2, 3)),
        ALIFState(torch.randn(2, 3), torch.zeros(2, 3), torch.rand(2, 3)),
        SpyLIFState(torch.randn(2, 3), torch.zeros(2, 3), torch.randn(2, 3)),
        LIState(torch.randn(2, 3)),
        (LIFState(torch.randn(2, 3), torch.ones(2, 3)), LIState(torch.randn(2, 1))),
    ],
)
def test_state_round_trips_through_torch_save_weights_only(state: tuple) -> None:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    assert type(loaded) is type(state)
    flat = [loaded] if hasattr(loaded, "_fields") else list(loaded)
    orig = [state] if hasattr(state, "_fields") else list(state)
    for a, b in zip(flat, orig):
        assert type(a) is type(b)
        for ta, tb in zip(a, b):
            assert torch.equal(ta, tb)


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_step_into_buffers_equals_the_plain_step(reset: str) -> None:
    # out= (used by the fused sequence) writes the same v_t, z_t into given buffers, and the
    # current may already sit in out.v
    g = torch.Generator().manual_seed(0)
    current = torch.rand(3, 5, generator=g, dtype=torch.float64) * 2
    state = LIFState(torch.rand(3, 5, generator=g, dtype=torch.float64), torch.zeros(3, 5))
    state = LIFState(state.v, (torch.rand(3, 5, generator=g) > 0.5).double())
    alpha = torch.full((5,), 0.9, dtype=torch.float64)
    z, new = lif_step(current, state, alpha, 1.0, None, reset)
    slot = LIFState(current.clone(), torch.empty(3, 5, dtype=torch.float64))
    z2, new2 = lif_step(slot.v, state, alpha, 1.0, None, reset, out=slot)
    assert new2.v is slot.v and new2.z is slot.z and z2 is slot.z
    assert torch.equal(new2.v, new.v) and torch.equal(z2, z)
    assert 0 < z.sum() < z.numel()
