"""``predict(obs, state, episode_start, deterministic)`` as Stable-Baselines3's: checked against
``rollout`` (the actions of predict in a loop over a seeded env are the rollout's), with the
state carried and reset by ``episode_start``; and the thread count of library calls."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl
from snrl.errors import UserError

COMMON = dict(hidden_size=16, n_envs=2, eval_interval=0, eval_episodes=1)
SMALL = dict(COMMON, n_steps=8, n_epochs=1)


def _episode_actions(algo, env: gym.Env, seed: int, state, start: bool):
    obs, _ = env.reset(seed=seed)
    actions = []
    done = False
    while not done:
        action, state = algo.predict(obs, state=state, episode_start=start)
        start = False
        actions.append(np.asarray(action))
        obs, _, term, trunc, _ = env.step(action)
        done = term or trunc
    return np.stack(actions), state


@pytest.mark.parametrize(
    "cls, kw",
    [
        (snrl.PPO, SMALL),
        (snrl.DQN, dict(COMMON, learning_starts=32, batch_size=2, seq_len=4, burn_in=2)),
    ],
)
def test_predict_in_a_loop_gives_the_rollout_actions(cls, kw):
    algo = cls("CartPole-v1", seed=0, **kw)
    algo.learn(64, progress=False)  # normalization statistics and weights away from init
    env = gym.make("CartPole-v1")
    # two episodes in a row: the state carried across steps, reset by episode_start
    first, state = _episode_actions(algo, env, seed=3, state=None, start=True)
    second, _ = _episode_actions(algo, env, seed=4, state=state, start=True)
    assert np.array_equal(first, algo.rollout(seed=3, record=False).actions)
    assert np.array_equal(second, algo.rollout(seed=4, record=False).actions)
    assert first.dtype.kind == "i" and first.ndim == 1  # CartPole's actions: ints


def _leaves(state) -> list[torch.Tensor]:
    """The tensors of a (nested) state."""
    if isinstance(state, torch.Tensor):
        return [state]
    return [t for s in state for t in _leaves(s)] if isinstance(state, tuple) else []


def test_episode_start_resets_the_carried_state_and_batches_are_rows():
    algo = snrl.PPO("CartPole-v1", seed=1, **SMALL)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    state = None
    for _ in range(5):  # carry the state over a few steps
        action, state = algo.predict(obs, state=state)
        obs, *_ = env.step(action)
    _, carried = algo.predict(obs, state=state)
    fresh_action, fresh = algo.predict(obs)
    _, reset = algo.predict(obs, state=state, episode_start=True)
    assert any(not torch.equal(a, b) for a, b in zip(_leaves(carried), _leaves(fresh)))
    assert all(torch.equal(a, b) for a, b in zip(_leaves(reset), _leaves(fresh)))
    # a batch is rows of single calls; episode_start resets only its rows
    actions, rows = algo.predict(np.stack([obs, obs]))
    assert actions.shape == (2,) and (actions == fresh_action).all()
    assert all(torch.equal(t[0], t[1]) for t in _leaves(rows))


def test_predict_box_actions_and_bad_input():
    algo = snrl.PPO("Pendulum-v1", seed=0, **SMALL)
    obs, _ = gym.make("Pendulum-v1").reset(seed=0)
    action, _ = algo.predict(obs)
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0
    actions, _ = algo.predict(np.stack([obs] * 3), deterministic=False)
    assert actions.shape == (3, 1)
    with pytest.raises(UserError, match=r"shape \(2,\) does not fit"):
        algo.predict(np.zeros(2))
    with pytest.raises(UserError, match="episode_start has 2 values for 3"):
        algo.predict(np.stack([obs] * 3), episode_start=[True, False])


def test_library_calls_restore_the_thread_count():
    before = torch.get_num_threads()
    algo = snrl.PPO("CartPole-v1", seed=0, threads=2, **SMALL)
    seen = []
    original = algo._collect

    def spy():
        seen.append(torch.get_num_threads())
        return original()

    algo._collect = spy
    algo.learn(16, progress=False)
    algo.evaluate(n_episodes=1)
    assert seen == [2] and torch.get_num_threads() == before
    # the policy: one thread for small networks, whatever torch had before
    torch.set_num_threads(2)
    try:
        small = snrl.PPO("CartPole-v1", seed=0, **SMALL)
        small._collect = lambda: (seen.append(torch.get_num_threads()), original.__func__(small))[1]
        small.learn(16, progress=False)
        assert seen[-1] == 1 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_library_calls_flush_denormals_and_restore_the_setting():
    from snrl.agents.runtime import denormals_flushed, flush_denormals

    assert not denormals_flushed()  # torch's default
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        assert denormals_flushed()  # the probe sees the setting
    finally:
        torch.set_flush_denormal(False)
    seen = []
    for on in (True, False):
        algo = snrl.PPO("CartPole-v1", seed=0, flush_denormals=on, **SMALL)
        original = algo._collect
        algo._collect = lambda o=original: (seen.append(denormals_flushed()), o())[1]
        algo.learn(16, progress=False)
        assert not denormals_flushed()  # given back as it was
    assert seen == [True, False]
    torch.set_flush_denormal(True)  # a caller's own setting is left on
    try:
        with flush_denormals(True):
            assert denormals_flushed()
        assert denormals_flushed()
    finally:
        torch.set_flush_denormal(False)


def test_misspelled_keyword_says_did_you_mean():
    with pytest.raises(UserError, match=r"did you mean 'hidden_size'\?"):
        snrl.DQN("CartPole-v1", hiden_size=64)
    with pytest.raises(UserError, match=r"threads=-1"):
        snrl.PPO("CartPole-v1", threads=-1)


def test_thread_policy_follows_the_widest_layer_and_the_key():
    from snrl.agents.runtime import policy_threads

    cfg = snrl.PPOConfig()
    assert policy_threads(cfg) == 1 and policy_threads(cfg, width=513) is None
    assert policy_threads(snrl.PPOConfig(threads=3), width=4096) == 3
    assert policy_threads(snrl.PPOConfig(threads=0)) is None  # torch's own count
    wide = snrl.SpikingBackbone(4, [600], 2, seed=0)
    algo = snrl.PPO("CartPole-v1", policy=wide, **SMALL)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with algo._runtime():
            assert torch.get_num_threads() == 2  # a 600-neuron policy: torch's count
    finally:
        torch.set_num_threads(before)


def test_cli_threads_is_the_config_key_and_may_change_on_resume(tmp_path, capsys):
    import json

    from snrl.cli import main

    out = tmp_path / "run"
    args = ["train", "--backbone", "mlp", "--hidden", "8", "--n-envs", "2", "--quiet"]
    args += ["--set", "n_steps=8", "--set", "eval_interval=0", "--set", "eval_episodes=1"]
    assert main([*args, "--steps", "16", "--threads", "3", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["threads"] == 3
    before = torch.get_num_threads()
    resume = ["train", "--out", str(out), "--resume", "--steps", "32", "--threads", "2"]
    assert main([*resume, "--quiet"]) == 0  # a changed --threads is no changed config
    assert torch.get_num_threads() == before
    assert "error" not in capsys.readouterr().err
