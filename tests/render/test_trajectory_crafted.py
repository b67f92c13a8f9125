"""Trajectory.load of crafted ``.npz`` files (issue 32): every one ends in a UserError that
says what is wrong, never a TypeError/AttributeError/KeyError, and nothing is unpickled.

The files are generated from one valid trajectory (frames, a spiking layer, a readout,
policy and task arrays) by changing one thing each: the header's type and each key's type
or value, missing keys and arrays, arrays of the wrong dtype, shape or length, object
arrays, broken archives.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snrl.errors import UserError
from snrl.io import MAX_DEPTH
from snrl.networks import Activity, LayerActivity
from snrl.trajectory import Trajectory

T = 3


def _valid() -> Trajectory:
    activity = Activity(
        [
            LayerActivity(
                "lif0",
                "spiking",
                2,
                spikes=np.zeros((T, 2), np.float32),
                v=np.zeros((T, 2), np.float32),
                threshold=1.0,
                sign=np.array([1, -1]),
            ),
            LayerActivity("readout", "readout", 1, v=np.zeros((T, 1), np.float32)),
        ]
    )
    return Trajectory(
        observations=np.zeros((T, 4)),
        actions=np.array([0, 1, 0]),
        rewards=np.ones(T),
        terminated=np.array([False, False, True]),
        truncated=np.zeros(T, bool),
        env="CartPole-v1",
        seed=3,
        frames=np.zeros((T + 1, 4, 4, 3), np.uint8),
        activity=activity,
        policy={"probs": np.full((T, 2), 0.5)},
        task={"gt": np.zeros(T)},
        trials=[{"start_step": 0, "end_step": 2}],
        dt=0.1,
    )


def _parts(tmp_path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a valid file, to be changed."""
    path = _valid().save(tmp_path / "valid.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays.pop("header")[()]))
    return header, arrays


def _set(key: str, value: Any) -> Callable:
    def change(h: dict, a: dict) -> None:
        h[key] = value

    return change


def _drop(key: str) -> Callable:
    def change(h: dict, a: dict) -> None:
        h.pop(key)

    return change


def _layer(key: str, value: Any, index: int = 0) -> Callable:
    def change(h: dict, a: dict) -> None:
        h["activity"][index][key] = value

    return change


def _array(key: str, value: Any) -> Callable:
    def change(h: dict, a: dict) -> None:
        if value is None:
            a.pop(key)
        else:
            a[key] = value

    return change


def _raw_header(value: np.ndarray) -> Callable:
    def change(h: dict, a: dict) -> None:
        a["header"] = value

    return change


def _v1(change_v1: Callable) -> Callable:
    """A format-1 header (activity under flat keys), then ``change_v1``."""

    def change(h: dict, a: dict) -> None:
        layers = h.pop("activity")
        h["version"] = 1
        h["layers"] = [{k: v for k, v in d.items() if k != "fields"} for d in layers]
        h["activity_keys"] = [f"{d['name']}.{f}" for d in layers for f in d["fields"]]
        for i, key in enumerate([k for k in a if k.startswith("activity_")]):
            a[f"activity_{i}"] = a.pop(key)
        change_v1(h, a)

    return change


_DEEP = "[" * 5000 + "]" * 5000
#: name -> (change of the valid file's header / arrays, a fragment the message must hold)
CASES: dict[str, tuple[Callable, str]] = {
    # the header entry itself
    "header a JSON list": (_raw_header(np.array(json.dumps([1, 2]))), "not a snrl trajectory"),
    "header a JSON number": (_raw_header(np.array("5")), "not a snrl trajectory"),
    "header a JSON string": (_raw_header(np.array('"snrl"')), "not a snrl trajectory"),
    "header not JSON": (_raw_header(np.array("{")), "cannot read trajectory"),
    "header nested too deep": (_raw_header(np.array(_DEEP)), f"more than {MAX_DEPTH} levels"),
    "header an int array": (_raw_header(np.array(5)), "header is a int64 array"),
    "header a 1-D array": (_raw_header(np.array(["{}", "{}"])), "of shape (2,)"),
    "header bytes": (_raw_header(np.array(b"{}")), "header is a |S2 array"),
    "header missing": (lambda h, a: h.clear(), "cannot read trajectory"),
    # format and version
    "format another": (_set("format", "other"), "not a snrl trajectory"),
    "version a string": (_set("version", "3"), "version '3'"),
    "version a bool": (_set("version", True), "version True"),
    "version a float": (_set("version", 1.5), "version 1.5"),
    "version 0": (_set("version", 0), "version 0"),
    "version from the future": (_set("version", 99), "upgrade snrl"),
    # each header key
    "policy_keys a number": (_set("policy_keys", 5), "policy_keys=5 is not a list of strings"),
    "policy_keys numbers": (_set("policy_keys", [1, 2]), "policy_keys=[1, 2]"),
    "policy_keys missing": (_drop("policy_keys"), "header lacks 'policy_keys'"),
    "policy_keys name a missing array": (_set("policy_keys", ["a", "b"]), "policy_1"),
    "seed a string": (_set("seed", "abc"), "seed='abc' is not an integer"),
    "seed a float": (_set("seed", 1.5), "seed=1.5"),
    "seed missing": (_drop("seed"), "header lacks 'seed'"),
    "has_frames a string": (_set("has_frames", "yes"), "has_frames='yes'"),
    "has_frames without frames": (_array("frames", None), "frames"),
    "meta a list": (_set("meta", [1]), "meta=[1] is not an object"),
    "meta missing": (_drop("meta"), "header lacks 'meta'"),
    "env a number": (_set("env", 5), "env=5 is not a string"),
    "task_keys a number": (_set("task_keys", 7), "task_keys=7"),
    "task_keys name a missing array": (_set("task_keys", ["gt", "x"]), "task_1"),
    "trials a string": (_set("trials", "x"), "trials='x'"),
    "trials numbers": (_set("trials", [1]), "trials=[1]"),
    "dt a string": (_set("dt", "0.1"), "dt='0.1'"),
    "dt negative": (_set("dt", -1), "dt=-1"),
    "substeps 0": (_set("substeps", 0), "substeps=0"),
    "substeps a string": (_set("substeps", "2"), "substeps='2'"),
    "substeps disagrees with activity": (_set("substeps", 2), "x substeps 2"),
    # the layers of the activity
    "activity a number": (_set("activity", 5), "activity=5 is not a list"),
    "activity a list of numbers": (_set("activity", [5]), "activity[0]=5 is not an object"),
    "activity layer without name": (
        lambda h, a: h["activity"][0].pop("name"),
        "activity[0] lacks 'name'",
    ),
    "activity layer size a string": (_layer("size", "8"), "size='8'"),
    "activity layer size negative": (_layer("size", -1), "size=-1"),
    "activity layer size wrong": (_layer("size", 5), "for size 5"),
    "activity layer kind unknown": (_layer("kind", "quantum"), "kind 'quantum'"),
    "activity layer fields a string": (_layer("fields", "spikes"), "fields='spikes'"),
    "activity layer sign a string": (_layer("sign", "x"), "sign='x'"),
    "activity layer sign too short": (_layer("sign", [1]), "sign has 1 entries"),
    "activity layer sign not ±1": (_layer("sign", [2, 1]), "sign has 2 entries"),
    "activity layer threshold a string": (_layer("threshold", "1"), "threshold='1'"),
    "activity field names a missing array": (
        _layer("fields", ["spikes", "v", "x"]),
        "activity_0_2",
    ),
    # format 1
    "v1 activity_keys a number": (_v1(_set("activity_keys", 3)), "activity_keys"),
    "v1 layers an object": (_v1(_set("layers", {})), "layers={} is not a list"),
    "v1 activity key without a dot": (_v1(_set("activity_keys", ["x", "y", "z"])), "'<layer>"),
    # the arrays
    "observations missing": (_array("observations", None), "observations"),
    "observations a scalar": (_array("observations", np.array(1.0)), "time axis"),
    "observations strings": (_array("observations", np.array(["a", "b", "c"])), "dtype <U1"),
    "observations complex": (_array("observations", np.zeros((T, 4), complex)), "complex128"),
    "rewards strings": (_array("rewards", np.array(["x", "y", "z"])), "rewards has dtype"),
    "rewards records": (
        _array("rewards", np.zeros(T, dtype=[("a", "f8"), ("b", "i4")])),
        "rewards has dtype",
    ),
    "rewards 2-D": (_array("rewards", np.ones((T, 2))), "rewards has shape"),
    "actions too short": (_array("actions", np.zeros(T - 1)), "actions has length 2"),
    "terminated 2-D": (_array("terminated", np.zeros((T, 2), bool)), "terminated has shape"),
    "frames float": (_array("frames", np.zeros((T + 1, 4, 4, 3))), "uint8"),
    "frames gray": (_array("frames", np.zeros((T + 1, 4, 4), np.uint8)), "frames have shape"),
    "frames too few": (_array("frames", np.zeros((T, 4, 4, 3), np.uint8)), "T + 1"),
    "activity array too long": (_array("activity_0_0", np.zeros((T + 1, 2))), "activity lif0"),
    "activity array strings": (_array("activity_0_0", np.full((T, 2), "s")), "dtype <U1"),
    "policy array 3-D": (_array("policy_0", np.zeros((T, 2, 2))), "policy['probs']"),
    "task array too short": (_array("task_0", np.zeros(T - 1)), "task['gt']"),
}


def _write(path: Path, header: Any, arrays: dict[str, np.ndarray]) -> Path:
    if "header" not in arrays and header:
        arrays = {"header": np.array(json.dumps(header)), **arrays}
    np.savez(path, **arrays)
    return path


def _assert_user_error(path: Path, fragment: str) -> str:
    try:
        Trajectory.load(path)
    except UserError as e:
        message = str(e)
    else:  # pragma: no cover - what the test is there to catch
        raise AssertionError(f"{path.name} loaded")
    assert fragment in message, (fragment, message)
    assert "\n" not in message
    return message


def test_the_valid_file_loads(tmp_path):
    header, arrays = _parts(tmp_path)
    traj = Trajectory.load(_write(tmp_path / "ok.npz", header, arrays))
    assert traj.activity.names == ["lif0", "readout"] and traj.task["gt"].shape == (T,)
    v1 = dict(arrays)
    h1 = json.loads(json.dumps(header))
    _v1(lambda h, a: None)(h1, v1)
    assert Trajectory.load(_write(tmp_path / "v1.npz", h1, v1)).activity.names == [
        "lif0",
        "readout",
    ]


def test_at_least_sixty_crafted_files():
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", list(CASES))
def test_crafted_file_is_a_user_error(tmp_path, name):
    change, fragment = CASES[name]
    header, arrays = _parts(tmp_path)
    change(header, arrays)
    path = _write(tmp_path / "crafted.npz", header, arrays)
    _assert_user_error(path, fragment)


def test_object_arrays_are_never_unpickled(tmp_path):
    """An object array in any slot (it needs pickle) is refused, and its pickle never runs."""
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (marker.write_text, ("pwned",))

    for key in ("header", "observations", "policy_0", "activity_0_0", "frames"):
        header, arrays = _parts(tmp_path)
        arrays[key] = np.array([Evil(), 1], dtype=object)
        path = _write(tmp_path / f"object_{key}.npz", header, arrays)
        _assert_user_error(path, "cannot read trajectory")
    assert not marker.exists()
    # the archive does hold the pickle (np.savez wrote it), so the refusal is the loader's
    with zipfile.ZipFile(tmp_path / "object_frames.npz") as zf:
        assert b"pickle" not in zf.read("header.npy")  # the header stayed JSON text
        with pytest.raises(ValueError, match="allow_pickle"):
            np.lib.format.read_array(io.BytesIO(zf.read("frames.npy")), allow_pickle=False)
    assert pickle.dumps(1)  # pickle itself is importable: the refusal is not an accident


@pytest.mark.parametrize(
    "content",
    [b"", b"not a zip at all", b"PK\x03\x04" + b"\x00" * 40],
    ids=["empty", "text", "zip magic only"],
)
def test_broken_archives(tmp_path, content):
    path = tmp_path / "broken.npz"
    path.write_bytes(content)
    _assert_user_error(path, "cannot read trajectory")


def test_damaged_compressed_member_and_unknown_compression(tmp_path):
    header, arrays = _parts(tmp_path)
    arrays["observations"] = np.arange(4000.0).reshape(1000, 4)[:T]
    src = tmp_path / "src.npz"
    np.savez_compressed(src, header=np.array(json.dumps(header)), **arrays)
    damaged = tmp_path / "damaged.npz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(damaged, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    raw = bytearray(damaged.read_bytes())
    with zipfile.ZipFile(damaged) as zf:
        info = zf.getinfo("observations.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 2, start + info.compress_size - 2):
        raw[i] ^= 0x5A  # the deflate stream of observations.npy, not the zip's own records
    damaged.write_bytes(bytes(raw))
    _assert_user_error(damaged, "cannot read trajectory")
    odd = tmp_path / "odd.npz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(odd, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info.filename), compress_type=zipfile.ZIP_STORED)
    raw = bytearray(odd.read_bytes())
    with zipfile.ZipFile(odd) as zf:
        offsets = [i.header_offset for i in zf.infolist()]
    for off in offsets:  # the method field of each local header: 99 (AES), which zipfile lacks
        raw[off + 8 : off + 10] = (99).to_bytes(2, "little")
    cd = raw.rfind(b"PK\x01\x02")
    while cd != -1:  # ... and of each central directory entry
        raw[cd + 10 : cd + 12] = (99).to_bytes(2, "little")
        cd = raw.rfind(b"PK\x01\x02", 0, cd)
    odd.write_bytes(bytes(raw))
    _assert_user_error(odd, "cannot read trajectory")


def test_truncated_archive_and_garbage_member(tmp_path):
    header, arrays = _parts(tmp_path)
    good = _write(tmp_path / "good.npz", header, arrays).read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good[: len(good) // 2])
    _assert_user_error(cut, "cannot read trajectory")
    garbage = tmp_path / "garbage.npz"
    with zipfile.ZipFile(garbage, "w") as zf:
        zf.writestr("header.npy", b"\x93NUMPY garbage")
        zf.writestr("observations.npy", b"junk")
    _assert_user_error(garbage, "cannot read trajectory")
