"""make_env / make_vector_env: ids, user classes, SAME_STEP autoreset, seeding, FiniteCheck."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from snrl.envs import finished_episodes, make_env, make_vector_env
from snrl.errors import UserError


class NanEnv(gym.Env):
    """1-D env whose observation (or reward) is NaN at step ``nan_at`` of an episode."""

    def __init__(
        self, nan_at: int = 3, nan_in: str = "obs", episode_len: int = 100, nan_episode: int = 0
    ):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.nan_at = nan_at
        self.nan_in = nan_in
        self.episode_len = episode_len
        self.nan_episode = nan_episode
        self.episode = -1
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.episode += 1
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(1, float(self.t), dtype=np.float32)
        reward = 1.0
        if self.t == self.nan_at and self.episode == self.nan_episode:
            if self.nan_in == "obs":
                obs[0] = np.nan
            else:
                reward = float("inf")
        return obs, reward, False, self.t >= self.episode_len, {}


class NotAnEnv:
    pass


HERE = __name__  # the module name pytest imported this file as


def test_make_env_registered_id():
    env = make_env("CartPole-v1")
    assert env.spec.id == "CartPole-v1"
    assert env.action_space == spaces.Discrete(2)
    env.close()


def test_make_env_passes_kwargs_and_render_mode():
    env = make_env("CartPole-v1", render_mode="rgb_array", max_episode_steps=7)
    assert env.render_mode == "rgb_array"
    env.reset(seed=0)
    steps = 0
    truncated = terminated = False
    while not (truncated or terminated):
        _, _, terminated, truncated, _ = env.step(0 if steps % 2 else 1)
        steps += 1
    assert steps == 7 and truncated
    env.close()


def test_unknown_id_suggests_close_matches():
    with pytest.raises(UserError, match=r"unknown env id 'CartPol-v1'.*'CartPole-v1'"):
        make_env("CartPol-v1")
    with pytest.raises(UserError, match=r"'CartPole-v1'"):
        make_env("cartpole-v1")  # case differs
    with pytest.raises(UserError, match=r"unknown env id 'zzzzzz'.*pprint_registry"):
        make_env("zzzzzz")


def test_user_class_via_module_path():
    env = make_env(f"{HERE}:NanEnv", nan_at=5)
    assert isinstance(env, NanEnv) and env.nan_at == 5


@pytest.mark.parametrize(
    ("env_id", "kwargs", "pattern"),
    [
        ("no_such_module_snrl:Foo", {}, r"cannot import module 'no_such_module_snrl'"),
        (f"{HERE}:Missing", {}, r"has no class 'Missing'"),
        (f"{HERE}:NotAnEnv", {}, r"not a gymnasium.Env subclass"),
        (f"{HERE}:NanEnv", {"bogus": 1}, r"creating env .*NanEnv.*\['bogus'\] failed"),
        ("CartPole-v1", {"bogus": 1}, r"does not accept the arguments \['bogus'\]"),
        ("", {}, r"non-empty string"),
    ],
)
def test_bad_env_ids(env_id, kwargs, pattern):
    with pytest.raises(UserError, match=pattern):
        make_env(env_id, **kwargs)


def test_bad_n_envs():
    with pytest.raises(UserError, match="n_envs must be an integer >= 1"):
        make_vector_env("CartPole-v1", 0, seed=0)


def test_same_step_autoreset_matches_independent_single_envs():
    """Oracle: n independent CartPoles reset with seed+i and reset() again when done."""
    n, seed, steps = 3, 11, 120
    envs = make_vector_env("CartPole-v1", n, seed=seed)
    assert envs.autoreset_mode == gym.vector.AutoresetMode.SAME_STEP
    refs = [gym.make("CartPole-v1") for _ in range(n)]
    obs, _ = envs.reset()
    ref_obs = np.stack([r.reset(seed=seed + i)[0] for i, r in enumerate(refs)])
    np.testing.assert_array_equal(obs, ref_obs)
    rng = np.random.default_rng(0)
    n_finished = 0
    ep_len = np.zeros(n, dtype=np.int64)
    for _ in range(steps):
        actions = rng.integers(0, 2, size=n)
        obs, reward, term, trunc, infos = envs.step(actions)
        done = term | trunc
        if done.any():
            assert set(infos) >= {"final_obs", "_final_obs"}
            np.testing.assert_array_equal(infos["_final_obs"], done)
        else:
            assert "final_obs" not in infos and "_final_obs" not in infos
        idx, returns, lengths = finished_episodes(infos)
        np.testing.assert_array_equal(idx, np.flatnonzero(done))
        ep_len += 1
        for i, r in enumerate(refs):
            o, rew, te, tr, _ = r.step(int(actions[i]))
            assert (te, tr) == (bool(term[i]), bool(trunc[i]))
            assert reward[i] == rew
            if te or tr:
                n_finished += 1
                np.testing.assert_array_equal(infos["final_obs"][i], o)
                # CartPole terminates outside |x| <= 2.4, |theta| <= 12 degrees
                assert abs(o[0]) > 2.4 or abs(o[2]) > 12 * 2 * np.pi / 360
                o, _ = r.reset()
                # the returned obs is a fresh reset obs: all components in [-0.05, 0.05]
                assert np.all(np.abs(obs[i]) <= 0.05)
                k = list(idx).index(i)
                assert lengths[k] == ep_len[i]
                assert returns[k] == ep_len[i]  # CartPole pays 1 per step
                ep_len[i] = 0
            else:
                assert infos.get("final_obs", np.full(n, None))[i] is None
            np.testing.assert_array_equal(obs[i], o)
    assert n_finished >= 5  # random CartPole episodes last ~20 steps
    envs.close()


def test_reset_with_and_without_seed_agree_and_envs_differ():
    a = make_vector_env("CartPole-v1", 2, seed=3)
    b = make_vector_env("CartPole-v1", 2, seed=3)
    oa, _ = a.reset()
    ob, _ = b.reset(seed=3)
    np.testing.assert_array_equal(oa, ob)
    assert not np.array_equal(oa[0], oa[1])
    np.testing.assert_array_equal(a.action_space.sample(), b.action_space.sample())
    a.close()
    b.close()


@pytest.mark.parametrize(("nan_in", "what"), [("obs", "observation"), ("reward", "reward")])
def test_finite_check_names_the_step(nan_in, what):
    envs = make_vector_env(f"{HERE}:NanEnv", 2, seed=0, env_kwargs={"nan_in": nan_in})
    envs.reset()
    envs.step(np.zeros(2, dtype=np.int64))
    envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(UserError, match=rf"non-finite {what} at step 3 \(sub-env 0, step 3 of"):
        envs.step(np.zeros(2, dtype=np.int64))
    envs.close()


def test_finite_check_counts_steps_across_episodes():
    kwargs = {"nan_at": 2, "episode_len": 3, "nan_episode": 1}
    envs = make_vector_env(f"{HERE}:NanEnv", 1, seed=0, env_kwargs=kwargs)
    envs.reset()
    for _ in range(4):
        envs.step(np.zeros(1, dtype=np.int64))
    with pytest.raises(UserError, match=r"at step 5 \(sub-env 0, step 2 of its episode"):
        envs.step(np.zeros(1, dtype=np.int64))
    envs.close()


def test_async_vector_env_same_step():
    envs = make_vector_env("CartPole-v1", 2, seed=0, asynchronous=True)
    try:
        ref = make_vector_env("CartPole-v1", 2, seed=0)
        o1, _ = envs.reset()
        o2, _ = ref.reset()
        np.testing.assert_array_equal(o1, o2)
        for _ in range(40):
            a = np.array([0, 1])
            r1 = envs.step(a)
            r2 = ref.step(a)
            np.testing.assert_array_equal(r1[0], r2[0])
            np.testing.assert_array_equal(r1[2] | r1[3], r2[2] | r2[3])
            if "_final_obs" in r2[4]:
                np.testing.assert_array_equal(r1[4]["_final_obs"], r2[4]["_final_obs"])
        ref.close()
    finally:
        envs.close()


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium logs the worker's traceback
def test_async_errors_surface_as_user_error():
    with pytest.raises(UserError, match="unknown env id"):
        make_vector_env("CartPol-v1", 2, seed=0, asynchronous=True)
    envs = make_vector_env(f"{HERE}:NanEnv", 2, seed=0, asynchronous=True)
    try:
        envs.reset()
        envs.step(np.zeros(2, dtype=np.int64))
        envs.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(UserError, match=r"non-finite observation at step 3"):
            envs.step(np.zeros(2, dtype=np.int64))
    finally:
        envs.close(terminate=True)


@pytest.mark.parametrize(
    ("value", "finite"),
    [
        (1.0, True),
        (float("nan"), False),
        (-float("inf"), False),
        (3, True),
        (True, True),
        (np.float32(np.inf), False),
        (np.float64(2.5), True),
        (np.array([0.0, np.nan], dtype=np.float32), False),
        (np.array([[1.0, 2.0]]), True),
        (np.array([1, 2]), True),
        (np.array(complex(1, np.inf)), False),
        ([0.5, float("inf")], False),
        ([0.5, 1.5], True),
    ],
)
def test_finite_check_short_paths_agree_with_numpy(value, finite):
    """FiniteCheck's per-step test (Python numbers and arrays take short ways) gives the
    same answer as numpy's isfinite over the value."""
    from snrl.envs.wrappers import _all_finite

    assert _all_finite(value) is finite
    arr = np.asarray(value)
    assert finite == (arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all()))
