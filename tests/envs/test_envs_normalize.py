"""RunningMeanStd against numpy on the concatenated data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from snrl.envs import RunningMeanStd


def test_matches_numpy_over_uneven_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=3.0, scale=s, size=(n, 4)) for n, s in [(1, 1), (7, 2), (50, 0.5)]]
    rms = RunningMeanStd(shape=(4,))
    for b in batches:
        rms.update(b)
    data = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-12)
    assert rms.count == 58


def test_identity_before_update_and_normalize_clips():
    rms = RunningMeanStd(shape=2)
    np.testing.assert_allclose(rms.normalize(np.array([[0.5, -0.25]])), [[0.5, -0.25]], rtol=1e-6)
    rms.update(np.array([[0.0, 0.0], [2.0, 4.0]]))  # mean (1, 2), var (1, 4)
    out = rms.normalize(np.array([[3.0, 2.0], [1000.0, -1000.0]]), clip=10.0)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[2.0, 0.0], [10.0, -10.0]], rtol=1e-6)


def test_scalar_shape_and_torch_input():
    rms = RunningMeanStd()
    rms.update(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert rms.mean == pytest.approx(2.5)
    assert rms.var == pytest.approx(1.25)


def test_empty_batch_ignored_and_shape_checked():
    rms = RunningMeanStd(shape=(3,))
    rms.update(np.zeros((0, 3)))
    assert rms.count == 0
    with pytest.raises(ValueError, match=r"shape \(3,\) got a batch of shape \(2, 4\)"):
        rms.update(np.zeros((2, 4)))


def test_state_dict_round_trip_weights_only(tmp_path):
    rms = RunningMeanStd(shape=(2,))
    rms.update(np.array([[1.0, 5.0], [3.0, 9.0], [2.0, 1.0]]))
    path = tmp_path / "rms.pt"
    torch.save(rms.state_dict(), path)
    state = torch.load(path, weights_only=True)
    other = RunningMeanStd(shape=(2,))
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.mean, rms.mean)
    np.testing.assert_array_equal(other.var, rms.var)
    assert other.count == 3
    lists = {"mean": [0.0, 1.0], "var": [1.0, 2.0], "count": 4}
    other.load_state_dict(lists)
    np.testing.assert_array_equal(other.var, [1.0, 2.0])
    with pytest.raises(ValueError, match="different observation space"):
        RunningMeanStd(shape=(3,)).load_state_dict(state)
