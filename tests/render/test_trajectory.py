"""Trajectory: construction checks, derived values, npz round trip without pickle."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch

from snrl.errors import UserError
from snrl.networks.protocol import LayerInfo
from snrl.render import Trajectory


def _minimal(t: int = 4, **kw):
    base = dict(
        observations=np.zeros((t, 3)),
        actions=np.zeros(t, dtype=np.int64),
        rewards=np.arange(t, dtype=float),
        terminated=np.zeros(t, dtype=bool),
        truncated=np.zeros(t, dtype=bool),
        env_id="CartPole-v1",
    )
    base.update(kw)
    return Trajectory(**base)


def test_len_and_rewards():
    traj = _minimal(4, rewards=[1.0, 0.5, -2.0, 3.0])
    assert len(traj) == 4
    assert traj.total_reward == pytest.approx(2.5)
    np.testing.assert_allclose(traj.cumulative_reward, [1.0, 1.5, -0.5, 2.5])


def test_positional_arguments_rejected():
    with pytest.raises(TypeError):
        Trajectory(np.zeros((2, 3)), np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2))


@pytest.mark.parametrize("field", ["actions", "rewards", "terminated", "truncated"])
def test_length_mismatch_names_field(field):
    with pytest.raises(ValueError, match=field):
        _minimal(4, **{field: np.zeros(3)})


def test_frames_must_be_t_plus_one_uint8():
    with pytest.raises(ValueError, match="T \\+ 1"):
        _minimal(4, frames=np.zeros((4, 8, 8, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        _minimal(4, frames=np.zeros((5, 8, 8, 3), np.float32))
    assert _minimal(4, frames=np.zeros((5, 8, 8, 3), np.uint8)).has_frames


def test_activity_and_policy_shapes_checked():
    with pytest.raises(ValueError, match="lif0.spikes"):
        _minimal(4, activity={"lif0.spikes": np.zeros((3, 5))})
    with pytest.raises(ValueError, match="probs"):
        _minimal(4, policy={"probs": np.zeros((5, 2))})
    with pytest.raises(ValueError, match="size 6"):
        _minimal(
            4,
            activity={"lif0.spikes": np.zeros((4, 5))},
            layers=[dict(name="lif0", kind="spiking", size=6, threshold=1.0, sign=None)],
        )
    # A 1-D policy output is read as (T, 1).
    assert _minimal(4, policy={"value": np.zeros(4)}).policy["value"].shape == (4, 1)


def test_layer_info_and_tensors_converted_to_plain_data():
    sign = torch.tensor([1.0, 1.0, -1.0])
    info = LayerInfo("lif0", "spiking", 3, 4, 5, 1.0, sign)
    traj = _minimal(2, activity={"lif0.v": torch.zeros(2, 3)}, layers=[info])
    assert traj.layers == [
        {"name": "lif0", "kind": "spiking", "size": 3, "threshold": 1.0, "sign": [1, 1, -1]}
    ]
    assert isinstance(traj.activity["lif0.v"], np.ndarray)
    json.dumps(traj.layers)  # plain data
    with pytest.raises(ValueError, match="kind"):
        _minimal(2, layers=[dict(name="x", kind="conv", size=3)])


def test_meta_must_be_json():
    with pytest.raises(ValueError, match="JSON"):
        _minimal(2, meta={"x": object()})


def test_empty_trajectory_allowed():
    traj = _minimal(0, frames=np.zeros((1, 4, 4, 3), np.uint8))
    assert len(traj) == 0 and traj.total_reward == 0.0


def test_save_load_round_trip(tmp_path, spiking_traj):
    path = spiking_traj.save(tmp_path / "sub" / "ep.npz")
    assert path.is_file()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    loaded = Trajectory.load(path)
    for name in ("observations", "actions", "rewards", "terminated", "truncated", "frames"):
        a, b = getattr(spiking_traj, name), getattr(loaded, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert loaded.activity.keys() == spiking_traj.activity.keys()
    for key in spiking_traj.activity:
        np.testing.assert_array_equal(loaded.activity[key], spiking_traj.activity[key])
    np.testing.assert_array_equal(loaded.policy["probs"], spiking_traj.policy["probs"])
    assert loaded.layers == spiking_traj.layers
    assert (loaded.env_id, loaded.seed, loaded.meta) == ("CartPole-v1", 1, spiking_traj.meta)
    # Nothing pickled inside: every member loads with allow_pickle=False.
    with np.load(path, allow_pickle=False) as data:
        assert all(data[k].dtype != object for k in data.files)
    with zipfile.ZipFile(path) as zf:
        assert "header.npy" in zf.namelist()


def test_save_without_frames_and_exact_name(tmp_path):
    traj = _minimal(3)
    path = traj.save(tmp_path / "traj.data", compress=False)
    assert path.name == "traj.data"
    assert Trajectory.load(path).frames is None


def test_load_bad_files(tmp_path):
    with pytest.raises(ValueError, match="no trajectory file"):
        Trajectory.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="cannot read trajectory"):
        Trajectory.load(junk)
    other = tmp_path / "other.npz"
    np.savez(other, header=np.array(json.dumps({"format": "x"})))
    with pytest.raises(ValueError, match="not a snrl trajectory"):
        Trajectory.load(other)


def test_save_unwritable_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="writable"):
        _minimal(2).save(blocker / "ep.npz")
    assert blocker.read_text() == "x"
