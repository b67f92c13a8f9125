"""Generalized state-dependent exploration (PPO ``use_sde``): the noise law, holding the
exploration matrix, the rollout/update agreement, save/load and errors."""

import math

import numpy as np
import pytest
import torch

import snrl
from snrl.agents.ppo import PPO
from snrl.errors import UserError

SMALL = dict(hidden_size=16, n_envs=4, n_steps=48, eval_episodes=2, eval_interval=0, tuned=False)


def _features_by_hand(activity, backbone):
    """z of the last hidden layer, computed from its recorded arrays."""
    layer = [a for a in activity if a.kind != "readout"][-1]
    if backbone == "mlp":
        return layer.extra["h"]
    v = layer.v[-1] if layer.v.dim() == 3 else layer.v  # after the last neuron step
    return torch.tanh(v / layer.threshold)


@pytest.mark.parametrize("backbone,extra", [("lif", {}), ("lif", {"substeps": 2}), ("mlp", {})])
def test_sde_std_and_noise_follow_the_features(backbone, extra):
    algo = PPO("Pendulum-v1", backbone=backbone, seed=2, use_sde=True, **SMALL, **extra)
    agent = algo.agent
    assert agent.log_std.shape == (16, 1)
    with torch.no_grad():
        agent.log_std.copy_(torch.linspace(-2.0, 0.5, 16)[:, None])
    x = torch.randn(5, agent.obs_size, generator=torch.Generator().manual_seed(0))
    state = agent.initial_state(5)
    agent.reset_sde_noise(5)
    theta = agent.sde_noise.clone()
    res = agent.step(x, state)
    pol = agent.policy.run(x, state.policy)
    z = _features_by_hand(pol.activity, backbone)
    sigma = torch.exp(torch.linspace(-2.0, 0.5, 16))
    std = torch.sqrt((z**2 * sigma**2).sum(-1, keepdim=True) + 1e-6)  # per action dim
    torch.testing.assert_close(res.outputs["std"], std)
    noise = torch.stack([z[b] @ theta[b] for b in range(5)])
    torch.testing.assert_close(res.action, pol.out + noise)
    # the log-probability is that of N(mean, std) at the action taken
    lp = -((res.action - pol.out) ** 2) / (2 * std**2) - std.log() - 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(res.log_prob, lp.sum(-1))
    # held: the same inputs give the same action until a new matrix is drawn
    torch.testing.assert_close(agent.step(x, state).action, res.action)
    agent.reset_sde_noise(5)
    assert not torch.allclose(agent.step(x, state).action, res.action)
    # deterministic: the mean
    torch.testing.assert_close(agent.step(x, state, deterministic=True).action, pol.out)
    algo.close()


def test_sde_noise_has_the_law_the_log_prob_assumes():
    """Over many draws of the matrix, the noise z @ theta is N(0, z**2 @ sigma**2)."""
    algo = PPO("Pendulum-v1", backbone="lif", seed=0, use_sde=True, log_std_init=-1.0, **SMALL)
    agent = algo.agent
    n = 40_000
    z = torch.tanh(torch.randn(16, generator=torch.Generator().manual_seed(1)))
    agent.reset_sde_noise(n)
    noise = agent._sde_noise(z.expand(n, 16))[:, 0]
    expected = math.sqrt(float((z**2).sum()) * math.exp(-2.0))
    assert abs(float(noise.mean())) < 4 * expected / math.sqrt(n)
    assert abs(float(noise.std()) / expected - 1) < 0.02
    algo.close()


@pytest.mark.parametrize("backbone,extra", [("lif", {}), ("lif", {"substeps": 2}), ("mlp", {})])
def test_discrete_sde_adds_held_state_dependent_offsets_to_the_logits(backbone, extra):
    algo = PPO(
        "CartPole-v1", backbone=backbone, seed=2, use_sde=True, log_std_init=-0.5,
        **SMALL, **extra,
    )  # fmt: skip
    agent = algo.agent
    assert agent.log_std.shape == (16, 2) and not agent.log_std.requires_grad  # fixed scale
    x = torch.randn(5, agent.obs_size, generator=torch.Generator().manual_seed(0))
    state = agent.initial_state(5)
    agent.reset_sde_noise(5)
    theta = agent.sde_noise.clone()
    assert abs(float(theta.std()) / torch.exp(torch.tensor(-0.5)) - 1) < 0.15
    res = agent.step(x, state)
    pol = agent.policy.run(x, state.policy)
    z = _features_by_hand(pol.activity, backbone)
    noise = torch.stack([z[b] @ theta[b] for b in range(5)])
    torch.testing.assert_close(res.outputs["logit_noise"], noise)
    logits = pol.out + noise
    torch.testing.assert_close(res.outputs["probs"], torch.softmax(logits, -1))
    lp = torch.log_softmax(logits, -1).gather(-1, res.action[:, None])[:, 0]
    torch.testing.assert_close(res.log_prob, lp)
    # held until a new draw; then other offsets
    torch.testing.assert_close(agent.step(x, state).outputs["logit_noise"], noise)
    agent.reset_sde_noise(5)
    assert not torch.allclose(agent.step(x, state).outputs["logit_noise"], noise)
    # deterministic: the argmax of the logits without offsets
    det = agent.step(x, state, deterministic=True)
    torch.testing.assert_close(det.action, pol.out.argmax(-1))
    assert "logit_noise" not in det.outputs
    algo.close()


def test_discrete_sde_offsets_change_what_is_sampled():
    """Large offsets make each env's policy a near-deterministic function of its state that
    differs between envs (between draws), where the near-uniform initial policy does not."""
    algo = PPO("CartPole-v1", backbone="lif", seed=4, use_sde=True, log_std_init=1.0, **SMALL)
    agent = algo.agent
    x = torch.randn(1, agent.obs_size, generator=torch.Generator().manual_seed(1)).expand(64, -1)
    state = agent.initial_state(64)
    agent.reset_sde_noise(64)
    probs = agent.step(x, state).outputs["probs"]
    plain = agent.step(x, state, deterministic=True, train=False).outputs["probs"]
    assert float((plain[:, 0] - 0.5).abs().max()) < 0.1  # near uniform without offsets
    assert float(probs.max(-1).values.median()) > 0.9  # near deterministic with them
    assert 0.1 < float((probs[:, 0] > 0.5).float().mean()) < 0.9  # and not the same for all
    algo.close()


@pytest.mark.parametrize(
    "env,backbone,extra",
    [
        ("Pendulum-v1", "lif", {}),
        ("Pendulum-v1", "lif", {"substeps": 2}),
        ("Pendulum-v1", "mlp", {}),
        ("Pendulum-v1", "gru", {}),
        ("Pendulum-v1", "lif", {"chunk_len": 10}),
        ("CartPole-v1", "lif", {}),
        ("CartPole-v1", "gru", {}),
        ("CartPole-v1", "lif", {"chunk_len": 10, "substeps": 2}),
    ],
)
def test_sde_first_minibatch_ratio_is_exactly_one(env, backbone, extra):
    """New matrices every 4 steps inside the rollout: the log-probs do not depend on them
    (Box), or the rollout's logit offsets are stored and added again (Discrete), so the
    update's first pass reproduces the rollout's exactly."""
    algo = PPO(
        env, backbone=backbone, seed=3, use_sde=True, sde_sample_freq=4, **{**SMALL, **extra}
    )
    algo._start_envs()
    draws = []
    reset = algo.agent.reset_sde_noise
    algo.agent.reset_sde_noise = lambda b: (draws.append(b), reset(b))
    buf, _ = algo._collect()
    assert draws == [algo.config.n_envs] * (algo.config.n_steps // 4)
    L = algo.config.chunk_len or algo.config.n_steps
    for t0 in range(0, algo.config.n_steps, L):
        mb = buf.minibatch(torch.arange(4), t0, min(t0 + L, algo.config.n_steps))
        assert (mb.logit_noise is not None) == (env == "CartPole-v1")
        logp, _, values, _ = algo.agent.evaluate_sequence(
            mb.obs, mb.actions, mb.starts, mb.states, mb.logit_noise
        )
        torch.testing.assert_close(logp, mb.log_probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(values, mb.values, atol=1e-5, rtol=0)
    algo.close()


def test_sde_trains_saves_and_loads(tmp_path):
    algo = PPO("Pendulum-v1", backbone="lif", seed=1, use_sde=True, log_std_init=-2.0, **SMALL)
    before = algo.agent.log_std.detach().clone()
    algo.learn(2 * 4 * 48, progress=False)
    assert not torch.equal(before, algo.agent.log_std.detach())  # the scale is learned
    algo.save(tmp_path / "a.pt")
    loaded = snrl.load(tmp_path / "a.pt")
    assert loaded.agent.use_sde and loaded.agent.log_std.shape == (16, 1)
    r1 = algo.evaluate(n_episodes=2, seed=5)["returns"]
    r2 = loaded.evaluate(n_episodes=2, seed=5)["returns"]
    assert r1 == r2
    algo.close()
    loaded.close()


def test_discrete_sde_trains_saves_and_loads(tmp_path):
    algo = PPO("CartPole-v1", backbone="lif", seed=1, use_sde=True, log_std_init=-1.0, **SMALL)
    algo.learn(2 * 4 * 48, progress=False)
    algo.save(tmp_path / "a.pt")
    loaded = snrl.load(tmp_path / "a.pt")
    assert loaded.agent.use_sde
    torch.testing.assert_close(loaded.agent.log_std, torch.full((16, 2), -1.0))
    for a in (algo, loaded):
        a.agent.reset_sde_noise(1)
    r1 = algo.rollout(seed=5, record=False, deterministic=False)
    r2 = loaded.rollout(seed=5, record=False, deterministic=False)
    assert np.array_equal(r1.actions, r2.actions)
    # a stochastic rollout records the offsets it acted with, held for the whole rollout
    noise = r1.policy["logit_noise"]
    assert noise.shape == (len(r1.actions), 2) and np.abs(noise).max() > 0
    det = algo.rollout(seed=5, record=False, deterministic=True)
    assert "logit_noise" not in det.policy
    algo.close()
    loaded.close()


def test_sde_errors():
    with pytest.raises(UserError, match="Box or Discrete"):
        PPO("tests.input_envs:MultiDiscreteEnv", backbone="lif", use_sde=True, **SMALL)
    with pytest.raises(UserError, match="sde_sample_freq"):
        PPO("Pendulum-v1", backbone="lif", use_sde=True, sde_sample_freq=0, **SMALL)
