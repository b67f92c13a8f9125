"""PPO and DQN on snrl.tasks without a numpy round trip (``Algorithm.env_tensors``): a batched
env on the agent's device hands out tensors, and a seeded run computes the same numbers as
with numpy (metrics.csv and weights), single task and multitask; nothing the env hands out
is turned into numpy on the way (the replay's host rings aside)."""

from __future__ import annotations

import contextlib
import csv

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl
from snrl.agents.agent import ReturnScaler
from snrl.buffers.replay import ReplayBuffer
from snrl.envs import make_vector_env
from snrl.envs.spaces import ActionMap, ObsFlattener
from snrl.tasks.engine import TaskVectorEnv
from snrl.tasks.multitask import MultiTaskVectorEnv

pytestmark = pytest.mark.filterwarnings("ignore")

PDM = "snrl.tasks:PerceptualDecisionMaking-v0"
MULTI = "snrl.tasks:PerceptualDecisionMaking-v0,GoNogo-v0"
# tiny runs whose 10-step episodes end several times (final observations, V(final obs),
# episode returns and trial logs all take part)
PPO_KW = dict(backbone="lif", hidden_size=12, n_envs=4, n_steps=8, n_epochs=2, eval_episodes=2)
DQN_KW = dict(
    backbone="mlp", hidden_size=12, n_envs=4, learning_starts=32, log_interval=32,
    n_step=3, batch_size=16, eval_episodes=2,
)  # fmt: skip


def _train(cls, env, run_dir, tensors: bool, **kw):
    algo = cls(env, seed=3, eval_interval=64, max_episode_steps=10, run_dir=run_dir, **kw)
    algo.env_tensors = tensors
    algo.learn(160, progress=False)
    return algo


def _metrics(run_dir) -> tuple[list[str], list[list[str]]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.reader(f))
    keep = [i for i, name in enumerate(rows[0]) if name != "wall_time"]
    return [rows[0][i] for i in keep], [[r[i] for i in keep] for r in rows[1:]]


@pytest.mark.parametrize("env", [PDM, MULTI], ids=["one-task", "tasks"])
@pytest.mark.parametrize("cls,kw", [(snrl.PPO, PPO_KW), (snrl.DQN, DQN_KW)], ids=["ppo", "dqn"])
def test_tensor_path_gives_the_numpy_path_run(tmp_path, cls, kw, env):
    on = _train(cls, env, tmp_path / "on", True, **kw)
    off = _train(cls, env, tmp_path / "off", False, **kw)
    assert on._tensor_env and not off._tensor_env  # the two paths really ran
    header, rows_on = _metrics(tmp_path / "on")
    assert _metrics(tmp_path / "off") == (header, rows_on)
    assert len(rows_on) >= 4 and "trial_accuracy" in header and "eval_return_mean" in header
    episodes = [float(r[header.index("episodes")]) for r in rows_on]
    assert sum(episodes) >= 8  # episodes ended (10 steps each) in both runs
    if env == MULTI:
        assert "trial_accuracy/GoNogo-v0" in header
    sd_on, sd_off = on.agent.state_dict(), off.agent.state_dict()
    assert sd_on.keys() == sd_off.keys()
    for k in sd_on:
        assert torch.equal(sd_on[k], sd_off[k]), k
    # the weights did change: the runs learned something, identically
    fresh = cls(env, seed=3, max_episode_steps=10, **kw).agent.state_dict()
    assert any(not torch.equal(fresh[k], sd_on[k]) for k in fresh if k in sd_on)


class _NoNumpy(torch.Tensor):
    """A tensor the env handed out: turning it into numpy fails (outside the replay's add);
    what is computed from it is a plain tensor."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    allowed = [False]

    def _refuse(self) -> None:
        if not _NoNumpy.allowed[0]:
            raise AssertionError("an env output was turned into numpy on the tensor path")

    def __array__(self, *args, **kwargs):
        self._refuse()
        return super().__array__(*args, **kwargs)

    def numpy(self, *args, **kwargs):
        self._refuse()
        return super().numpy(*args, **kwargs)

    def tolist(self):
        self._refuse()
        return super().tolist()


def _guard(monkeypatch, cls) -> list[int]:
    """Wrap ``cls``'s reset and step where it hands out tensors (the training env; evaluation
    envs stay numpy): their outputs must be tensors (the engine's numpy output is not used),
    handed on as :class:`_NoNumpy`. Returns a counter of guarded steps."""
    steps = [0]
    reset, step = cls.reset, cls.step

    def guarded_reset(self, **kwargs):
        obs, infos = reset(self, **kwargs)
        if not self.as_tensors:
            return obs, infos
        assert isinstance(obs, torch.Tensor), "the engine's numpy output was used"
        return obs.as_subclass(_NoNumpy), infos

    def guarded_step(self, actions):
        out = step(self, actions)
        if not self.as_tensors:
            return out
        assert all(isinstance(x, torch.Tensor) for x in out[:4]), "numpy output was used"
        steps[0] += 1
        return (*(x.as_subclass(_NoNumpy) for x in out[:4]), out[4])

    monkeypatch.setattr(cls, "reset", guarded_reset)
    monkeypatch.setattr(cls, "step", guarded_step)
    return steps


def test_the_guard_catches_a_conversion():
    x = torch.arange(3.0).as_subclass(_NoNumpy)
    for convert in (np.asarray, lambda t: t.numpy(), lambda t: t.cpu().numpy(), np.stack):
        with pytest.raises(AssertionError, match="numpy"):
            convert(x if convert is not np.stack else [x, x])


@pytest.mark.parametrize(
    "cls,kw,env,engine",
    [
        (snrl.PPO, PPO_KW, PDM, TaskVectorEnv),
        (snrl.PPO, PPO_KW, MULTI, MultiTaskVectorEnv),
        (snrl.DQN, DQN_KW, PDM, TaskVectorEnv),
    ],
    ids=["ppo", "ppo-tasks", "dqn"],
)
def test_no_env_output_becomes_numpy_on_the_tensor_path(monkeypatch, cls, kw, env, engine):
    steps = _guard(monkeypatch, engine)
    add = ReplayBuffer.add

    def host_add(self, *args, **kwargs):  # the replay's rings are numpy: its copy is allowed
        _NoNumpy.allowed[0] = True
        try:
            return add(self, *args, **kwargs)
        finally:
            _NoNumpy.allowed[0] = False

    monkeypatch.setattr(ReplayBuffer, "add", host_add)
    algo = cls(env, seed=0, eval_interval=0, max_episode_steps=10, **kw)
    algo.env_tensors = True  # on the CPU too (its default there is off)
    hist = algo.learn(96, progress=False)
    assert algo._tensor_env and algo._envs.as_tensors and steps[0] >= 96 // kw["n_envs"]
    assert sum(hist["episodes"]) >= 4  # episode ends ran through the tensor path too
    if cls is snrl.PPO:  # PPO's actions go to the env as tensors
        seen = []
        step = engine.step

        def recording_step(self, actions):
            if self.as_tensors:  # the training env (evaluation envs take numpy)
                seen.append(actions)
            return step(self, actions)

        monkeypatch.setattr(engine, "step", recording_step)
        algo.learn(96 + kw["n_envs"] * kw["n_steps"], progress=False)
        assert seen and all(isinstance(a, torch.Tensor) for a in seen)


def test_default_asks_for_tensors_off_the_cpu_only():
    """``env_tensors=None``: numpy on the CPU (where the engine steps on numpy and tensors cost
    time), tensors where the agent's device is another (a GPU)."""
    algo = snrl.PPO(PDM, seed=0, eval_interval=0, **PPO_KW)
    assert algo.env_tensors is None and not algo._want_tensors()
    algo.learn(32, progress=False)
    assert not algo._tensor_env and isinstance(algo._obs, np.ndarray)
    algo.device = torch.device("meta")  # any device but the CPU (only asked, never used)
    assert algo._want_tensors()
    algo.env_tensors = False
    assert not algo._want_tensors()


def test_make_vector_env_hands_out_tensors_only_on_the_device_asked():
    on = make_vector_env(PDM, 3, seed=0, tensors_on="cpu")
    off = make_vector_env(PDM, 3, seed=0)
    elsewhere = make_vector_env(PDM, 3, seed=0, tensors_on=torch.device("meta"))
    plain = make_vector_env("CartPole-v1", 2, seed=0, tensors_on="cpu")
    with contextlib.ExitStack() as stack:
        for e in (on, off, elsewhere, plain):
            stack.callback(e.close)
        obs_on, _ = on.reset(seed=1)
        obs_off, _ = off.reset(seed=1)
        assert isinstance(obs_on, torch.Tensor) and torch.equal(obs_on, torch.from_numpy(obs_off))
        out_on = on.step(torch.tensor([1, 2, 0]))
        out_off = off.step(np.array([1, 2, 0]))
        for a, b in zip(out_on[:4], out_off[:4]):
            assert isinstance(a, torch.Tensor) and np.array_equal(a.numpy(), b)
        assert isinstance(elsewhere.reset(seed=1)[0], np.ndarray)  # another device: numpy
        assert isinstance(plain.reset(seed=1)[0], np.ndarray)  # not a batched env: numpy


def test_tensor_flattening_and_actions_equal_the_numpy_ones():
    g = np.random.default_rng(0)
    box = gym.spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float64)
    obs = g.normal(size=(5, 2, 3))
    flat = ObsFlattener(box)
    got = flat(torch.from_numpy(obs))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert np.array_equal(got.numpy(), flat(obs))
    with pytest.raises(ValueError, match="shape"):
        flat(torch.zeros(5, 3, 2))
    disc = ObsFlattener(gym.spaces.Discrete(4, start=1))
    assert np.array_equal(disc(torch.tensor([1, 4])), disc(np.array([1, 4])))
    spaces = [
        (gym.spaces.Discrete(3, start=-1), torch.tensor([0, 2, 1])),
        (gym.spaces.MultiDiscrete([2, 3], start=[1, 0]), torch.tensor([[0, 2], [1, 0]])),
        (gym.spaces.Box(-0.5, 0.5, shape=(2,), dtype=np.float32), torch.tensor([[-2.0, 0.25]])),
    ]
    for space, action in spaces:
        amap = ActionMap(space)
        t = amap.to_env_tensor(action)
        want = amap.to_env(action.numpy())
        assert isinstance(t, torch.Tensor) and t.numpy().dtype == want.dtype
        assert np.array_equal(t.numpy(), want), space


def test_return_scaler_on_tensors_equals_it_on_numpy():
    a, b = ReturnScaler(3, 0.9), ReturnScaler(3, 0.9)
    g = np.random.default_rng(1)
    for t in range(20):
        r, d = g.normal(size=3) * 5, g.random(3) < 0.2
        out_np = a(r, d)
        out_t = b(torch.from_numpy(r), torch.from_numpy(d))
        assert isinstance(out_np, np.ndarray) and isinstance(out_t, torch.Tensor)
        assert np.array_equal(out_np, out_t.numpy()), t
    assert torch.equal(a.moments.var, b.moments.var)


@pytest.mark.cuda
def test_tensor_path_on_a_gpu_stays_there():
    """On a GPU (skipped without one): the engine on the agent's device hands out CUDA
    tensors, and a run equals the numpy path's to float tolerance."""
    kw = dict(PPO_KW, device="cuda", env_kwargs={"device": "cuda"}, max_episode_steps=10)
    runs = []
    for tensors in (True, False):
        algo = snrl.PPO(PDM, seed=0, eval_interval=0, **kw)
        algo.env_tensors = tensors
        algo.learn(64, progress=False)
        runs.append(algo)
    assert runs[0]._tensor_env and runs[0]._obs.is_cuda and not runs[1]._tensor_env
    for k, v in runs[0].agent.state_dict().items():
        torch.testing.assert_close(v, runs[1].agent.state_dict()[k])
