"""PPO: sequence minibatches rebuild the rollout exactly, state resets per env, heads."""

import math

import numpy as np
import pytest
import torch

import snrl
from snrl.agents.ppo import PPO, PPOConfig

SMALL = dict(hidden_size=16, n_envs=4, n_steps=48, eval_episodes=2, eval_interval=0)


@pytest.mark.parametrize(
    "backbone,extra",
    [
        ("lif", {}),
        ("lif", {"hh_init": "random"}),
        ("lif", {"chunk_len": 10, "force_dale_law": False}),
        ("alif", {}),
        ("spylif", {}),
        ("lif", {"encoder": "population", "substeps": 2}),
        ("mlp", {}),
        ("gru", {}),
        ("lstm", {"n_minibatches": 2}),
    ],
)
def test_first_minibatch_ratio_is_exactly_one(backbone, extra):
    algo = PPO("CartPole-v1", backbone=backbone, seed=3, **{**SMALL, **extra})
    algo._start_envs()
    buf, _ = algo._collect()
    assert bool(buf.starts[1:].any()), "the segment should contain episode ends"
    cfg = algo.config
    L = cfg.chunk_len or cfg.n_steps
    idx = torch.arange(cfg.n_envs)
    for t0 in range(0, cfg.n_steps, L):
        mb = buf.minibatch(idx, t0, min(t0 + L, cfg.n_steps))
        logp, _, values, _ = algo.agent.evaluate_sequence(mb.obs, mb.actions, mb.starts, mb.states)
        torch.testing.assert_close(logp, mb.log_probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(values, mb.values, atol=1e-5, rtol=0)
    algo.close()


def test_reset_touches_only_finished_envs():
    algo = PPO("CartPole-v1", backbone="lif", seed=1, **SMALL)
    algo._start_envs()
    buf, _ = algo._collect()
    fresh = algo.agent.initial_state(algo.config.n_envs)
    for t in range(1, algo.config.n_steps):
        v_now = buf.states[t].policy[0].v
        starts = buf.starts[t]
        # rows that start an episode hold the initial membrane (zeros) ...
        assert torch.equal(v_now[starts], fresh.policy[0].v[starts])
        # ... and the others carry the state across the env step (membranes not re-zeroed)
        if (~starts).any():
            assert v_now[~starts].abs().sum() > 0
    algo.close()


def test_box_log_prob_is_of_the_unclipped_sample():
    algo = PPO("Pendulum-v1", backbone="mlp", seed=0, **SMALL)
    agent = algo.agent
    x = torch.zeros(5, agent.obs_size)
    state = agent.initial_state(5)
    torch.manual_seed(0)
    res = agent.step(x, state)
    out, _ = agent.policy(x, state.policy)
    std = agent.log_std.exp()
    by_hand = (
        -((res.action - out) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * math.log(2 * math.pi)
    ).sum(-1)
    torch.testing.assert_close(res.log_prob, by_hand)
    agent.log_std.data.fill_(2.0)  # wide: samples leave [-2, 2]
    res = agent.step(x, state)
    env_a = agent.env_action(res.action)
    assert env_a.shape == (5, 1)
    assert np.all(np.abs(env_a) <= 2.0)
    assert (res.action.abs() > 2.0).any()
    algo.close()


def test_multidiscrete_heads_split_logits():
    import gymnasium as gym
    from torch import nn

    from snrl.agents.agent import ActorCriticAgent
    from snrl.networks.ann import MLP

    obs = gym.spaces.Box(-1, 1, (3,))
    act = gym.spaces.MultiDiscrete([2, 3])
    agent = ActorCriticAgent(obs, act, policy=MLP(3, [8], 5), critic=MLP(3, [8], 1))
    x = torch.randn(4, 3)
    res = agent.step(x, agent.initial_state(4))
    assert res.action.shape == (4, 2)
    logits = agent.policy(x, ())[0]
    lp0 = torch.log_softmax(logits[:, :2], -1).gather(1, res.action[:, :1])[:, 0]
    lp1 = torch.log_softmax(logits[:, 2:], -1).gather(1, res.action[:, 1:])[:, 0]
    torch.testing.assert_close(res.log_prob, lp0 + lp1)
    assert isinstance(agent.policy, nn.Module)


def test_save_load_acts_identically(tmp_path):
    algo = PPO("CartPole-v1", backbone="lif", seed=2, **SMALL)
    algo.learn(400, progress=False)
    path = tmp_path / "ckpt.pt"
    algo.save(path)
    loaded = snrl.PPO.load(path)
    a = algo.rollout(seed=5, record=False)
    b = loaded.rollout(seed=5, record=False)
    assert np.array_equal(a.actions, b.actions)
    assert np.array_equal(a.activity["lif0"].spikes, b.activity["lif0"].spikes)
    assert torch.equal(algo.agent.obs_norm.mean, loaded.agent.obs_norm.mean)
    algo.close()
    loaded.close()


def test_same_seed_same_learning_curve():
    def run():
        algo = PPO("CartPole-v1", backbone="lif", seed=4, **SMALL)
        h = algo.learn(3 * 4 * 48, progress=False)
        algo.close()
        return h

    h1, h2 = run(), run()
    for k in ("episode_return_mean", "policy_loss", "value_loss", "approx_kl"):
        np.testing.assert_array_equal(np.asarray(h1[k]), np.asarray(h2[k]))


def test_config_validation_names_the_value():
    with pytest.raises(ValueError, match="n_minibatches=3"):
        PPOConfig(n_envs=8, n_minibatches=3)
    with pytest.raises(ValueError, match="unknown PPO option"):
        PPO("CartPole-v1", hiden_size=3)
    with pytest.raises(ValueError, match="backbone"):
        PPOConfig(backbone="transformer")
    with pytest.raises(ValueError, match="rate_reg=-1"):
        PPOConfig(rate_reg=-1.0)
    with pytest.raises(ValueError, match=r"rate_range=\(0.3, 0.2\)"):
        PPOConfig(rate_range=(0.3, 0.2))


def test_rate_regularization_lowers_the_policy_rate():
    # same seed, same first batch; a pull below 0.01 spikes per step (lr high and no KL stop,
    # so six updates can move the rates) must leave the policy firing far less than without it
    def rates(reg: float) -> list[float]:
        algo = PPO(
            "CartPole-v1", backbone="lif", seed=3, rate_reg=reg, rate_range=(0.0, 0.01),
            target_kl=None, lr=1e-2, **SMALL,
        )  # fmt: skip
        h = algo.learn(6 * 4 * 48, progress=False)
        algo.close()
        return h["spike_rate_lif0"]

    free, pulled = rates(0.0), rates(10.0)
    assert np.mean(pulled[-3:]) < 0.5 * np.mean(free[-3:])
