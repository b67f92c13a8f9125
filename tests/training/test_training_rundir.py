"""prepare_run_dir rules and write_json_atomic."""

from __future__ import annotations

import json
import os

import pytest

from snrl.errors import UserError
from snrl.io import write_json_atomic
from snrl.training import prepare_run_dir


def test_fresh_and_empty_dir(tmp_path):
    out = prepare_run_dir(tmp_path / "run", resume=False, force=False)
    assert out == tmp_path / "run" and (out / "checkpoints").is_dir()
    # an existing empty directory is fine too
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (prepare_run_dir(empty, resume=False, force=False) / "checkpoints").is_dir()


def test_existing_run_needs_a_flag(tmp_path):
    out = prepare_run_dir(tmp_path / "run", resume=False, force=False)
    (out / "config.json").write_text("{}")
    with pytest.raises(UserError, match=r"run directory .*run exists \(pass --resume .* --force"):
        prepare_run_dir(out, resume=False, force=False)


def test_force_clears_old_contents(tmp_path):
    out = prepare_run_dir(tmp_path / "run", resume=False, force=False)
    (out / "metrics.csv").write_text("env_step\n1\n")
    (out / "checkpoints" / "last.pt").write_bytes(b"x")
    prepare_run_dir(out, resume=False, force=True)
    assert sorted(os.listdir(out)) == ["checkpoints"]
    assert os.listdir(out / "checkpoints") == []


def test_force_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="does not look like an snrl run"):
        prepare_run_dir(tmp_path, resume=False, force=True)
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_resume_requires_last_checkpoint(tmp_path):
    out = prepare_run_dir(tmp_path / "run", resume=False, force=False)
    with pytest.raises(UserError, match=r"cannot resume: .*checkpoints/last.pt does not exist"):
        prepare_run_dir(out, resume=True, force=False)
    with pytest.raises(UserError, match="cannot resume"):
        prepare_run_dir(tmp_path / "missing", resume=True, force=False)
    (out / "checkpoints" / "last.pt").write_bytes(b"x")
    (out / "metrics.csv").write_text("keep")
    assert prepare_run_dir(out, resume=True, force=False) == out
    assert (out / "metrics.csv").read_text() == "keep"  # resume deletes nothing


def test_both_flags(tmp_path):
    with pytest.raises(UserError, match="--resume and --force are mutually exclusive"):
        prepare_run_dir(tmp_path / "run", resume=True, force=True)


def test_unwritable_or_file_path(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(UserError, match=r"afile exists and is not a directory"):
        prepare_run_dir(f, resume=False, force=False)
    with pytest.raises(UserError, match=r"cannot create run directory .*afile/run \("):
        prepare_run_dir(f / "run", resume=False, force=False)


def test_write_json_atomic(tmp_path):
    path = tmp_path / "sub" / "config.json"
    write_json_atomic(path, {"a": 1, "b": [1.5, "x"]})
    assert json.loads(path.read_text()) == {"a": 1, "b": [1.5, "x"]}
    assert path.read_text().endswith("\n")
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1, "b": [1.5, "x"]}  # old file intact
    assert os.listdir(path.parent) == ["config.json"]
