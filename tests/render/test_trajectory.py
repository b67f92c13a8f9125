"""Trajectory: construction checks, derived values, npz round trip without pickle."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch

from snrl.errors import UserError
from snrl.networks import Activity, LayerActivity
from snrl.networks.protocol import LayerInfo
from snrl.trajectory import Trajectory, layer_dicts


def _minimal(t: int = 4, **kw):
    base = dict(
        observations=np.zeros((t, 3)),
        actions=np.zeros(t, dtype=np.int64),
        rewards=np.arange(t, dtype=float),
        terminated=np.zeros(t, dtype=bool),
        truncated=np.zeros(t, dtype=bool),
        env="CartPole-v1",
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


def _spiking(t: int, n: int, **kw) -> Activity:
    return Activity([LayerActivity("lif0", "spiking", n, spikes=np.zeros((t, n)), **kw)])


def test_activity_and_policy_shapes_checked():
    with pytest.raises(ValueError, match="lif0.spikes"):
        _minimal(4, activity=_spiking(3, 5))  # 3 steps for a trajectory of 4
    with pytest.raises(ValueError, match="probs"):
        _minimal(4, policy={"probs": np.zeros((5, 2))})
    with pytest.raises(ValueError, match="size 6"):
        _minimal(4, activity=Activity([LayerActivity("lif0", "spiking", 6, v=np.zeros((4, 5)))]))
    with pytest.raises(ValueError, match="sign"):
        _minimal(4, activity=_spiking(4, 3, sign=np.array([1, 0, -1])))
    with pytest.raises(TypeError, match="layers"):  # an Activity carries its layers
        _minimal(4, activity=_spiking(4, 3), layers=[dict(name="lif0", kind="spiking", size=3)])
    # A 1-D policy output is read as (T, 1).
    assert _minimal(4, policy={"value": np.zeros(4)}).policy["value"].shape == (4, 1)


def test_tensors_become_numpy_and_layers_plain_data():
    sign = torch.tensor([1.0, 1.0, -1.0])
    act = Activity(
        [LayerActivity("lif0", "spiking", 3, spikes=torch.zeros(2, 3), v=torch.ones(2, 3),
                       threshold=1.0, sign=sign)]
    )  # fmt: skip
    traj = _minimal(2, activity=act)
    assert traj.layers == [
        {"name": "lif0", "kind": "spiking", "size": 3, "threshold": 1.0, "sign": [1, 1, -1]}
    ]
    assert traj.layer("lif0") == traj.layers[0] and traj.layer("nope") is None
    assert isinstance(traj.activity["lif0"].v, np.ndarray)
    assert traj.activity[0].v.tolist() == [[1.0, 1.0, 1.0]] * 2
    json.dumps(traj.layers)  # plain data
    with pytest.raises(ValueError, match="kind"):
        LayerActivity("x", "conv", 3)


def test_a_flat_activity_mapping_is_refused_with_the_conversion():
    """The format before the Activity structure ('<layer>.<field>' keys plus LayerInfo) is
    converted by Activity.from_flat; the constructor takes an Activity only."""
    sign = torch.tensor([1.0, -1.0, -1.0])
    info = LayerInfo("lif0", "spiking", 3, 4, 5, 1.0, sign)
    flat = {"lif0.spikes": np.eye(3)[:2], "lif0.v": torch.zeros(2, 3), "readout.v": np.ones((2, 1))}
    with pytest.raises(UserError, match=r"pass a snrl.Activity .*Activity.from_flat"):
        _minimal(2, activity=flat)
    traj = _minimal(2, activity=Activity.from_flat(flat, layer_dicts([info])))
    assert traj.activity.names == ["lif0", "readout"]
    lif = traj.activity["lif0"]
    assert (lif.kind, lif.size, lif.threshold, lif.sign.tolist()) == (
        "spiking",
        3,
        1.0,
        [1, -1, -1],
    )
    np.testing.assert_array_equal(lif.spikes, np.eye(3)[:2])
    ro = traj.activity["readout"]  # not described: kind from its fields, size from its arrays
    assert (ro.kind, ro.size, ro.spikes, ro.sign) == ("readout", 1, None, None)


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
    assert loaded.activity.names == spiking_traj.activity.names == ["lif0", "readout"]
    flat, loaded_flat = spiking_traj.activity.flat(), loaded.activity.flat()
    assert list(loaded_flat) == list(flat) == ["lif0.spikes", "lif0.v", "readout.v"]
    for key in flat:
        np.testing.assert_array_equal(loaded_flat[key], flat[key])
    np.testing.assert_array_equal(loaded.policy["probs"], spiking_traj.policy["probs"])
    assert loaded.layers == spiking_traj.layers
    assert (loaded.env, loaded.seed, loaded.meta) == ("CartPole-v1", 1, spiking_traj.meta)
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


def test_loads_files_of_format_version_1(tmp_path):
    """Version 1 stored activity under '<layer>.<field>' keys with a separate layer list."""
    header = {
        "format": "snrl.trajectory",
        "version": 1,
        "env_id": "CartPole-v1",
        "seed": 3,
        "meta": {"algo": "ppo"},
        "layers": [
            {"name": "lif0", "kind": "spiking", "size": 2, "threshold": 1.0, "sign": [1, -1]},
            {"name": "readout", "kind": "readout", "size": 1, "threshold": None, "sign": None},
        ],
        "activity_keys": ["lif0.spikes", "lif0.v", "readout.v"],
        "policy_keys": ["probs"],
        "has_frames": False,
    }
    path = tmp_path / "v1.npz"
    np.savez(
        path,
        header=np.array(json.dumps(header)),
        observations=np.zeros((3, 4)),
        actions=np.array([0, 1, 0]),
        rewards=np.ones(3),
        terminated=np.array([False, False, True]),
        truncated=np.zeros(3, bool),
        activity_0=np.array([[1, 0], [0, 1], [1, 1]], np.float32),
        activity_1=np.full((3, 2), 0.5, np.float32),
        activity_2=np.arange(3, dtype=np.float32)[:, None],
        policy_0=np.full((3, 2), 0.5),
    )
    traj = Trajectory.load(path)
    assert traj.activity.names == ["lif0", "readout"]
    assert traj.activity["lif0"].spikes.tolist() == [[1, 0], [0, 1], [1, 1]]
    assert traj.activity["lif0"].sign.tolist() == [1, -1]
    assert traj.activity["readout"].v[:, 0].tolist() == [0, 1, 2]
    assert traj.layers == header["layers"] and traj.seed == 3
    # Saved again, it is written in the current format and reads back the same.
    again = Trajectory.load(traj.save(tmp_path / "v2.npz"))
    with np.load(tmp_path / "v2.npz", allow_pickle=False) as data:
        assert json.loads(str(data["header"][()]))["version"] == 3  # the current format
    assert again.layers == traj.layers
    np.testing.assert_array_equal(again.activity["lif0"].v, traj.activity["lif0"].v)
