"""Per-neuron current noise (``noise_std``): off by default and bit-identical when 0, the
analytic stationary variance of a non-spiking LIF, training mode only, seeded by the layer."""

from __future__ import annotations

import math

import pytest
import torch

from snrl.agents.config import AgentConfig
from snrl.errors import UserError
from snrl.layers import ALIFLayer, LIFLayer, LIFParameters, SpyLIFLayer


def _drive(layer, x, steps_at_once: bool):
    """The membranes (T, B, N) of ``layer`` on ``x`` (T, B, F): one call on the sequence
    (the fused path, with autograd) or one call per step (the rollout path, no graph)."""
    state = layer.initial_state(x.shape[1])
    if steps_at_once:
        with torch.enable_grad():
            return layer.run(x, state).v.detach()
    vs = []
    with torch.no_grad():
        for x_t in x:
            res = layer.run(x_t, state)
            state = res.state
            vs.append(res.v)
    return torch.stack(vs)


@pytest.mark.parametrize("steps_at_once", [True, False])
def test_stationary_variance_of_a_silent_lif_is_analytic(steps_at_once):
    """No input, no recurrence, a threshold never reached: ``v_t = alpha v_{t-1} + sigma
    eps_t``, an AR(1) process of stationary variance ``sigma^2 / (1 - alpha^2)`` and lag-1
    autocorrelation ``alpha`` (tau_m 20 ms, dt 1 ms: alpha = exp(-1/20))."""
    sigma, tau, dt = 0.3, 20e-3, 1e-3
    layer = LIFLayer(
        2, 32, tau_m=tau, dt=dt, threshold=1e9, noise_std=sigma, seed=3,
        use_recurrent_connection=False,
    ).double()  # fmt: skip
    t_total, burn = 1200, 200  # burn-in: 10 membrane time constants
    x = torch.zeros(t_total, 64, 2, dtype=torch.float64)
    v = _drive(layer, x, steps_at_once)[burn:]
    alpha = math.exp(-dt / tau)
    expected = sigma**2 / (1 - alpha**2)
    n = v.numel()
    # the sample variance of an AR(1) series: relative standard error
    # sqrt(2 (1 + alpha^2) / ((1 - alpha^2) n)) (n values, chains independent)
    rel_se = math.sqrt(2 * (1 + alpha**2) / ((1 - alpha**2) * n))
    var = float(v.var())
    assert abs(var / expected - 1) < 5 * rel_se, (var, expected, rel_se)
    assert abs(float(v.mean())) < 5 * math.sqrt(expected * (1 + alpha) / ((1 - alpha) * n))
    lag1 = float((v[1:] * v[:-1]).mean() / (v * v).mean())
    assert abs(lag1 - alpha) < 0.01


def test_noise_zero_is_bit_identical_and_the_default():
    """``noise_std=0`` (the default) changes nothing: the same spikes and membranes, bit for
    bit, as the layer in eval mode, and no generator is drawn from."""
    assert LIFParameters().noise_std == 0.0
    torch.manual_seed(0)
    x = torch.randn(30, 4, 3)
    layer = LIFLayer(3, 8, tau_m=10e-3, seed=1)
    on = layer.run(x, layer.initial_state(4))
    layer.eval()
    off = layer.run(x, layer.initial_state(4))
    assert torch.equal(on.out, off.out) and torch.equal(on.v, off.v)
    assert layer._noise_generators == {}


@pytest.mark.parametrize("cls", [LIFLayer, ALIFLayer, SpyLIFLayer])
def test_noise_only_in_training_mode_seeded_and_off_the_global_rng(cls):
    """Training mode: the current noise changes the membranes, the same layer seed gives the
    same noise, another seed other noise, and the global RNG is untouched; eval mode: the
    noise-free dynamics, deterministic."""
    x = torch.rand(25, 4, 3)

    def membranes(seed, train=True):
        layer = cls(3, 8, tau_m=10e-3, noise_std=0.5, seed=seed, hh_init_seed=0)
        quiet = cls(3, 8, tau_m=10e-3, seed=seed, hh_init_seed=0)
        layer.train(train)
        return layer.run(x, layer.initial_state(4)).v, quiet.run(x, quiet.initial_state(4)).v

    before = torch.get_rng_state()
    noisy, quiet = membranes(5)
    assert torch.equal(torch.get_rng_state(), before)
    assert not torch.allclose(noisy, quiet)
    assert torch.equal(membranes(5)[0], noisy)
    assert not torch.allclose(membranes(6)[0], noisy)
    evaluated, quiet = membranes(5, train=False)
    assert torch.equal(evaluated, quiet)


def test_a_noisy_backbone_steps_alone_not_grouped():
    """PPO's grouped update path (run_together) leaves noisy backbones to their own run, so
    each layer draws its noise; noiseless ones still group."""
    from snrl.networks.spiking import SpikingBackbone, run_together

    x = torch.rand(6, 2, 3)
    nets = [SpikingBackbone(3, 8, noise_std=0.2, seed=s) for s in (0, 1)]
    assert run_together(nets, x, [n.initial_state(2) for n in nets]) is None
    for n in nets:
        n.eval()
    assert run_together(nets, x, [n.initial_state(2) for n in nets]) is not None


def test_bad_noise_and_the_agent_config_key():
    with pytest.raises(UserError, match="noise_std"):
        LIFParameters(noise_std=-0.1)
    with pytest.raises(UserError, match="noise_std"):
        LIFParameters(noise_std=float("nan"))
    with pytest.raises(UserError, match="noise_std"):
        AgentConfig(noise_std=-1.0)
    net = AgentConfig(noise_std=0.25, tau_m=0.02, readout_tau_m=0.02, dt=1e-3).build_backbone(
        4, 2, seed=0
    )
    assert [layer.params.noise_std for layer in net.spiking_layers] == [0.25]
