"""check_spaces, flatten_obs_size, ObsFlattener."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from snrl.envs import ObsFlattener, check_spaces, flatten_obs_size
from snrl.errors import UserError

BOX = spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32)
DISC = spaces.Discrete(4)


@pytest.mark.parametrize("obs", [BOX, DISC, spaces.Box(0, 255, shape=(4, 4, 3), dtype=np.uint8)])
@pytest.mark.parametrize(
    "act", [DISC, spaces.MultiDiscrete([3, 2]), spaces.Box(-1, 1, shape=(2,), dtype=np.float32)]
)
def test_ppo_accepts(obs, act):
    check_spaces(obs, act, algo="ppo")  # no exception


def test_dqn_accepts_discrete():
    check_spaces(BOX, DISC, algo="dqn")


@pytest.mark.parametrize(
    "act", [spaces.MultiDiscrete([3, 2]), spaces.Box(-1, 1, shape=(2,), dtype=np.float32)]
)
def test_dqn_refuses_non_discrete(act):
    with pytest.raises(UserError, match=r"DQN needs a Discrete action space.*use --algo ppo"):
        check_spaces(BOX, act, algo="dqn")


@pytest.mark.parametrize(
    "obs",
    [
        spaces.Tuple((BOX, DISC)),
        spaces.Dict({"a": BOX}),
        spaces.MultiBinary(3),
        spaces.Text(5),
        spaces.MultiDiscrete([2, 2]),
    ],
)
def test_unsupported_observation_space(obs):
    name = type(obs).__name__
    with pytest.raises(UserError, match=rf"unsupported observation space {name}.*Box.*Discrete"):
        check_spaces(obs, DISC, algo="ppo")


@pytest.mark.parametrize(
    "act", [spaces.Tuple((DISC, DISC)), spaces.MultiBinary(3), spaces.Dict({"a": DISC})]
)
def test_unsupported_action_space(act):
    name = type(act).__name__
    with pytest.raises(UserError, match=rf"unsupported action space {name}.*Discrete, Multi"):
        check_spaces(BOX, act, algo="ppo")


def test_multidiscrete_2d_refused():
    with pytest.raises(UserError, match="1-D nvec"):
        check_spaces(BOX, spaces.MultiDiscrete(np.array([[2, 2], [3, 3]])), algo="ppo")


def test_unknown_algo():
    with pytest.raises(UserError, match=r"unknown algorithm 'sac' \(use one of: ppo, dqn\)"):
        check_spaces(BOX, DISC, algo="sac")


def test_flatten_sizes():
    assert flatten_obs_size(BOX) == 6
    assert flatten_obs_size(DISC) == 4
    with pytest.raises(UserError, match="unsupported observation space"):
        flatten_obs_size(spaces.MultiBinary(2))


def test_flattener_box():
    f = ObsFlattener(BOX)
    x = np.arange(12, dtype=np.float64).reshape(2, 2, 3)
    out = f(x)
    assert out.dtype == np.float32 and out.shape == (2, 6)
    np.testing.assert_array_equal(out[1], [6, 7, 8, 9, 10, 11])
    np.testing.assert_array_equal(f.single(x[0]), [0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match=r"shape \(B, 2, 3\)"):
        f(np.zeros((2, 6)))


def test_flattener_discrete_one_hot_with_start():
    f = ObsFlattener(spaces.Discrete(3, start=2))
    out = f(np.array([2, 4, 3]))
    np.testing.assert_array_equal(out, [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(f.single(3), [0, 1, 0])
    with pytest.raises(ValueError, match="out of range"):
        f(np.array([5]))
