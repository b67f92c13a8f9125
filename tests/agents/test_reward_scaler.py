"""PPO's ``normalize_reward``: the return scaler against a hand-computed oracle, and in a run
(scaled rewards for learning, raw returns reported, moments kept across save/load)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from snrl.agents.agent import ReturnScaler


def _oracle_var(values: list[float]) -> float:
    """Variance of the prior (mean 0, var 1, count 1e-4, as the scaler's moments start)
    pooled with every return seen, computed in one go."""
    c0, x = 1e-4, np.asarray(values, dtype=np.float64)
    n = c0 + x.size
    mean = x.sum() / n
    m2 = c0 * 1.0 + ((x - mean) ** 2).sum() + c0 * mean**2
    return m2 / n


def test_scaled_rewards_follow_the_discounted_returns_by_hand():
    gamma = 0.5
    scaler = ReturnScaler(2, gamma, clip=100.0)
    rewards = [np.array([1.0, -2.0]), np.array([3.0, 0.5]), np.array([-1.0, 4.0])]
    dones = [np.array([False, True]), np.array([False, False]), np.array([True, False])]
    ret, seen = np.zeros(2), []
    for r, d in zip(rewards, dones, strict=True):
        ret = ret * gamma + r  # G_t per env, restarted after an episode ends
        seen += ret.tolist()
        expected = r / np.sqrt(_oracle_var(seen) + 1e-8)
        np.testing.assert_allclose(scaler(r, d), expected, rtol=1e-9)
        ret[d] = 0.0
    np.testing.assert_allclose(scaler.ret, ret)


def test_scaled_rewards_are_clipped():
    scaler = ReturnScaler(1, 0.99, clip=2.0)
    for _ in range(50):
        scaler(np.array([0.01]), np.array([False]))
    out = scaler(np.array([1e6]), np.array([False]))
    assert out[0] == 2.0


@pytest.mark.filterwarnings("ignore")
def test_ppo_learns_from_scaled_rewards_and_reports_raw_returns(tmp_path):
    from snrl import PPO

    kw = dict(backbone="mlp", hidden_size=8, n_envs=4, n_steps=16, n_epochs=1, eval_interval=0)
    algo = PPO("CartPole-v1", normalize_reward=True, seed=0, run_dir=tmp_path / "run", **kw)
    hist = algo.learn(640, progress=False)
    # CartPole pays 1 per step: raw episode returns are episode lengths (>= 8), while the
    # rewards PPO learns from are 1 / std(G), well below 1 once G has spread
    assert min(r for r in hist["episode_return_mean"] if r == r) >= 8
    buf, _ = algo._collect()
    learned = buf.rewards  # (T, B): one scale per vector step, the same for every env
    assert torch.equal(learned, learned[:, :1].expand_as(learned))
    assert 0 < float(learned.min()) and float(learned.max()) < 0.5
    var = float(algo.reward_scaler.moments.var[0])  # after the last step of the rollout
    np.testing.assert_allclose(float(learned[-1, 0]), 1 / np.sqrt(var + 1e-8), rtol=1e-5)
    # the moments are part of the checkpoint
    algo.save(tmp_path / "a.pt")
    again = PPO.load(tmp_path / "a.pt")
    for k, v in algo.reward_scaler.state_dict().items():
        torch.testing.assert_close(again.reward_scaler.state_dict()[k], v, rtol=0, atol=0)
    off = PPO("CartPole-v1", seed=0, **kw)
    assert off.reward_scaler is None and off.extra_state() == {}
