"""check_spaces, flatten_obs_size, ObsFlattener, ActionMap."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from snrl.envs import ActionMap, ObsFlattener, check_spaces, flatten_obs_size
from snrl.errors import UserError

BOX = spaces.Box(-1.0, 1.0, shape=(2, 3), dtype=np.float32)
DISC = spaces.Discrete(4)


@pytest.mark.parametrize("obs", [BOX, DISC, spaces.Box(0, 255, shape=(4, 4, 3), dtype=np.uint8)])
@pytest.mark.parametrize(
    "act", [DISC, spaces.MultiDiscrete([3, 2]), spaces.Box(-1, 1, shape=(2,), dtype=np.float32)]
)
def test_ppo_accepts(obs, act):
    check_spaces(obs, act)  # no exception


def test_discrete_requirement_accepts_discrete():
    check_spaces(BOX, DISC, discrete_actions=True)


@pytest.mark.parametrize(
    "act", [spaces.MultiDiscrete([3, 2]), spaces.Box(-1, 1, shape=(2,), dtype=np.float32)]
)
def test_discrete_requirement_refuses_the_others(act):
    with pytest.raises(UserError, match=r"DQN needs a Discrete action space.*use --algo ppo"):
        check_spaces(BOX, act, discrete_actions=True, who="DQN", hint="use --algo ppo")


@pytest.mark.parametrize(
    "obs",
    [
        spaces.MultiBinary(3),
        spaces.Text(5),
        spaces.MultiDiscrete([2, 2]),
    ],
)
def test_unsupported_observation_space(obs):
    name = type(obs).__name__
    with pytest.raises(UserError, match=rf"unsupported observation space {name}.*Box.*Discrete"):
        check_spaces(obs, DISC)


@pytest.mark.parametrize("obs", [spaces.Tuple((BOX, DISC)), spaces.Dict({"a": BOX})])
def test_a_dict_or_tuple_reaching_the_check_is_an_env_snrl_could_not_flatten(obs):
    """snrl flattens Dict/Tuple observations in the envs it makes (tests/envs/test_dict_obs.py);
    one that reaches the check belongs to an env object used as given: the fix is named."""
    with pytest.raises(UserError, match=r"pass a factory.*FlattenObservation"):
        check_spaces(obs, DISC)
    with pytest.raises(UserError, match=r"unsupported observation space Text .* inside Dict"):
        check_spaces(spaces.Dict({"a": BOX, "t": spaces.Text(3)}), DISC)


@pytest.mark.parametrize(
    "act", [spaces.Tuple((DISC, DISC)), spaces.MultiBinary(3), spaces.Dict({"a": DISC})]
)
def test_unsupported_action_space(act):
    name = type(act).__name__
    with pytest.raises(UserError, match=rf"unsupported action space {name}.*Discrete, Multi"):
        check_spaces(BOX, act)


def test_multidiscrete_2d_refused_in_one_line():
    with pytest.raises(UserError, match="1-D nvec") as err:
        check_spaces(BOX, spaces.MultiDiscrete(np.array([[2, 2], [3, 3]])))
    assert "\n" not in str(err.value)


def test_action_map_honours_start_and_box_shape():
    """Agent indices 0..n-1 become start..start+n-1; a flat Box vector becomes the space's
    shape, clipped to its bounds, in its dtype."""
    disc = ActionMap(spaces.Discrete(3, start=-1))
    assert disc.shape == () and disc.size == 3
    np.testing.assert_array_equal(disc.to_env(np.array([0, 1, 2])), [-1, 0, 1])
    multi = ActionMap(spaces.MultiDiscrete([2, 3], start=[5, -2]))
    assert multi.shape == (2,) and multi.size == 5 and multi.nvec == [2, 3]
    np.testing.assert_array_equal(multi.to_env(np.array([[0, 0], [1, 2]])), [[5, -2], [6, 0]])
    low = np.array([[-1.0, -2.0], [0.0, 0.0]], dtype=np.float32)
    box = ActionMap(spaces.Box(low, 1.0, dtype=np.float32))
    assert box.shape == (4,) and box.size == 4
    out = box.to_env(np.array([[-5.0, -1.5, 0.5, 9.0]]))
    assert out.shape == (1, 2, 2) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [[[-1.0, -1.5], [0.5, 1.0]]])
    with pytest.raises(ValueError, match=r"shape \(B, 4\)"):
        box.to_env(np.zeros((1, 2, 2)))


def test_flattener_keeps_leading_batch_dims():
    f = ObsFlattener(spaces.Discrete(3, start=1))
    out = f(np.array([[1, 3], [2, 1]]))
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[0, 1], [0, 0, 1])
    g = ObsFlattener(BOX)
    assert g(np.zeros((4, 5, 2, 3))).shape == (4, 5, 6)
    with pytest.raises(ValueError, match=r"shape \(B, 2, 3\)"):
        g(np.zeros((2, 3)))


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
