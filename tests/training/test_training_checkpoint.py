"""Checkpoints: round trip, atomicity, refusal of pickled objects and corrupt files; RNG state."""

from __future__ import annotations

import collections
import os
import pickle
import random
import warnings

import numpy as np
import pytest
import torch

from snrl.errors import UserError
from snrl.training import load_checkpoint, rng_state, save_checkpoint, set_rng_state


def _payload() -> dict:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "env_step": 1234,
        "best_return": 17.5,
        "name": "lif",
        "flags": [True, None, (1, 2)],
    }


def test_round_trip_with_optimizer_state(tmp_path):
    payload = _payload()
    path = tmp_path / "deep" / "dir" / "last.pt"  # parents created
    save_checkpoint(path, payload)
    loaded = load_checkpoint(path)
    assert set(loaded) == set(payload)
    for k, v in payload["model"].items():
        torch.testing.assert_close(loaded["model"][k], v)
    assert loaded["optimizer"]["param_groups"] == payload["optimizer"]["param_groups"]
    assert loaded["env_step"] == 1234 and loaded["best_return"] == 17.5
    assert loaded["flags"] == [True, None, (1, 2)]
    # only the final file remains: no temp files left behind
    assert os.listdir(path.parent) == ["last.pt"]


def test_arbitrary_objects_refused_at_save(tmp_path):
    path = tmp_path / "c.pt"
    with pytest.raises(TypeError, match=r"payload\['a'\]\[0\] is a numpy.ndarray"):
        save_checkpoint(path, {"a": [np.zeros(2)]})
    with pytest.raises(TypeError, match=r"must be str or int"):
        save_checkpoint(path, {"a": {(1, 2): 3}})
    assert not path.exists()


def test_crash_between_temp_write_and_rename_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"env_step": 1})
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(path, {"env_step": 2, "w": torch.zeros(1000)})
    monkeypatch.undo()
    assert path.read_bytes() == before  # old checkpoint intact, not partially overwritten
    assert load_checkpoint(path) == {"env_step": 1}
    assert os.listdir(tmp_path) == ["last.pt"]  # temp file cleaned up

    new = tmp_path / "new.pt"
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        save_checkpoint(new, {"env_step": 3})
    monkeypatch.undo()
    assert not new.exists()  # no partial final file


def test_missing_and_directory(tmp_path):
    with pytest.raises(UserError, match=r"checkpoint .*nope.pt does not exist \("):
        load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(UserError, match="is a directory"):
        load_checkpoint(tmp_path)


class Evil:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickled_object_refused_as_unsafe_without_torch_advice(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "snrl-checkpoint", "version": 1, "payload": {"x": Evil(marker)}}, path)
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps(collections.Counter(a=1), protocol=4))
    for bad in (path, plain):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch's pickle-protocol warning is swallowed too
            with pytest.raises(UserError) as info:
                load_checkpoint(bad)
        msg = str(info.value)
        assert msg.startswith(f"checkpoint {bad} is not a safe snrl checkpoint (")
        assert "weights_only" not in msg and "\n" not in msg  # no advice to load unsafely
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["empty", "truncated", "text", "foreign"])
def test_corrupt_files(tmp_path, kind):
    good = tmp_path / "good.pt"
    save_checkpoint(good, _payload())
    path = tmp_path / "bad.pt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "text":
        path.write_text("hello, not a checkpoint\n")
    else:  # a valid torch file that snrl did not write
        torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(UserError, match=rf"checkpoint {path} is corrupt or not an snrl checkpoint"):
        load_checkpoint(path)


def test_rng_state_round_trip_through_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gaussian in python's state
    np.random.standard_normal()
    save_checkpoint(tmp_path / "r.pt", {"rng": rng_state()})
    expected = (random.random(), np.random.random(3), torch.rand(3))
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    set_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    got = (random.random(), np.random.random(3), torch.rand(3))
    assert got[0] == expected[0]
    np.testing.assert_array_equal(got[1], expected[1])
    torch.testing.assert_close(got[2], expected[2])


def test_ctrl_c_inside_torch_save_arrives_after_a_complete_checkpoint(tmp_path, monkeypatch):
    # Ctrl-C inside torch.save left its zip writer half-closed: a RuntimeError traceback
    # hid the interrupt. Held until the write is done, it arrives as KeyboardInterrupt
    # with the file complete and no temp file left.
    import signal

    import snrl.training.checkpoint as ckpt

    real_save = torch.save
    calls = []

    def save_interrupted(obj, f):
        calls.append(1)
        signal.raise_signal(signal.SIGINT)  # the user presses Ctrl-C mid-write
        real_save(obj, f)

    monkeypatch.setattr(ckpt.torch, "save", save_interrupted)
    path = tmp_path / "last.pt"
    # Python's own handler, as in a terminal: a process started in the background by a
    # script inherits SIGINT ignored, and an ignored Ctrl-C stays ignored (the next test)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            save_checkpoint(path, {"w": torch.arange(4.0)})
        assert calls == [1]
        assert torch.equal(load_checkpoint(path)["w"], torch.arange(4.0))
        assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_deferred_signals_keep_an_ignored_signal_ignored():
    import signal

    from snrl.io import deferred_signals

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with deferred_signals():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
