"""Agents keep every tensor on ``config.device`` (issue 33).

On this CPU-only machine :class:`DeviceDiscipline` stands in for a GPU: it fails on an
operation that mixes a tensor the agent made on the host with one of the agent's own, which
is what crashed every CUDA run. The tests marked ``cuda`` run the same paths on a GPU where
there is one.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl
from snrl.training.checkpoint import load_checkpoint, save_checkpoint
from tests.device_check import DeviceDiscipline

SMALL = dict(n_envs=2, seed=0, eval_interval=64, eval_episodes=1, hidden_size=16)
DQN_SMALL = dict(learning_starts=64, batch_size=8, train_freq=4, seq_len=8, burn_in=2)
CASES = {
    "ppo": ("ppo", "CartPole-v1", dict(n_steps=16)),
    "ppo-reward-norm-pendulum": (
        "ppo",
        "Pendulum-v1",
        dict(n_steps=16, normalize_reward=True, backbone="alif"),
    ),
    "ppo-gru": ("ppo", "CartPole-v1", dict(n_steps=16, backbone="gru")),
    "dqn-sequence": ("dqn", "CartPole-v1", DQN_SMALL),
    "dqn-per-dueling": ("dqn", "CartPole-v1", DQN_SMALL | dict(prioritized=True, dueling="avg")),
    "dqn-mlp-nstep-per": (
        "dqn",
        "CartPole-v1",
        dict(
            learning_starts=64,
            batch_size=8,
            train_freq=4,
            backbone="mlp",
            replay="transition",
            prioritized=True,
            n_step=3,
        ),
    ),  # fmt: skip
}


def _build(case: str, device: str = "cpu"):
    algo, env, kw = CASES[case]
    cls = snrl.PPO if algo == "ppo" else snrl.DQN
    return cls(env, device=device, **SMALL, **kw)


def _exercise(algo) -> None:
    """Every path a user runs: learn (collection, updates, periodic evaluation), evaluate,
    rollout, predict with a carried state."""
    algo.learn(128, progress=False)
    algo.evaluate(n_episodes=1)
    algo.rollout(max_steps=5, record=False)
    env = gym.make(algo.config.env)
    obs, _ = env.reset(seed=0)
    env.close()
    action, state = algo.predict(obs)
    algo.predict(obs, state=state, episode_start=np.array([True]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_host_tensor_meets_the_agent(monkeypatch, case):
    monkeypatch.setenv("SNRL_NATIVE", "0")  # the CPU kernel: the path a GPU run does not take
    algo = _build(case)
    check = DeviceDiscipline()
    with check:
        check.mark_module(algo.agent)
        _exercise(algo)
    assert check.violations == []


def test_the_check_fails_on_the_bug_it_was_written_for(monkeypatch):
    """Yesterday's ``ObsNormalizer.update``: raw observations made on the host folded into
    statistics on the device."""
    monkeypatch.setenv("SNRL_NATIVE", "0")
    algo = _build("ppo")
    norm = algo.agent.obs_norm
    check = DeviceDiscipline()
    with check, pytest.raises(AssertionError, match="mixes device and host"):
        check.mark_module(algo.agent)
        host = torch.as_tensor(np.ones((5, 4)))
        host.mean(0) - norm.mean  # what update() did before the fix


def _same_actions(a, b, n: int = 20) -> None:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    act_a, _ = a.predict(obs)
    act_b, _ = b.predict(obs)
    np.testing.assert_array_equal(np.asarray(act_a), np.asarray(act_b))


def test_a_gpu_checkpoint_loads_and_acts_on_a_cpu_machine(tmp_path, capsys):
    algo = _build("ppo")
    algo.learn(64, progress=False)
    path = tmp_path / "ckpt.pt"
    algo.save(path)
    d = load_checkpoint(path)
    d["config"]["device"] = "cuda:0"  # as a GPU run writes it
    save_checkpoint(path, d)
    if torch.cuda.is_available():
        loaded = snrl.load(path, device="cpu")
    else:
        loaded = snrl.load(path)
        assert "it runs on cpu" in capsys.readouterr().err
    assert loaded.config.device == "cpu"
    assert all(p.device.type == "cpu" for p in loaded.agent.parameters())
    _same_actions(algo, loaded)


def test_an_asked_device_that_is_missing_is_a_user_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal is for machines without it")
    algo = _build("ppo")
    algo.save(tmp_path / "c.pt")
    with pytest.raises(snrl.errors.UserError, match="no CUDA device"):
        snrl.load(tmp_path / "c.pt", device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_path_runs_on_cuda(case):
    algo = _build(case, device="cuda")
    _exercise(algo)
    assert all(p.device.type == "cuda" for p in algo.agent.parameters())


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["ppo", "dqn-sequence"])
def test_checkpoints_move_between_cpu_and_cuda(tmp_path, case):
    for src, dst in (("cuda", "cpu"), ("cpu", "cuda")):
        algo = _build(case, device=src)
        algo.learn(64, progress=False)
        algo.save(tmp_path / f"{src}.pt")
        loaded = snrl.load(tmp_path / f"{src}.pt", device=dst)
        assert {p.device.type for p in loaded.agent.parameters()} == {dst}
        _same_actions(algo, loaded)


def test_the_check_fails_on_numpy_of_a_device_tensor():
    algo = _build("ppo")
    check = DeviceDiscipline()
    with check, pytest.raises(AssertionError, match=r"call \.cpu\(\) first"):
        check.mark_module(algo.agent)
        algo.agent.obs_norm.mean.numpy()
    with DeviceDiscipline() as ok:
        ok.mark_module(algo.agent)
        algo.agent.obs_norm.mean.cpu().numpy()  # the way the recorders do it
