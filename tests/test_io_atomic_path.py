"""snrl.io.atomic_path: a temp path next to the target that replaces it only on success."""

from __future__ import annotations

import os
import stat

import pytest

from snrl.io import atomic_path


def _temps(directory) -> list[str]:
    return [
        p.name for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")
    ]


def test_commit_replaces_the_target_with_the_open_mode(tmp_path):
    target = tmp_path / "sub" / "video.mp4"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".video.mp4.")
        assert tmp.name.endswith(".tmp") and tmp.is_file()
        assert not target.exists()  # nothing under the final name while writing
        tmp.write_bytes(b"frames")
    assert target.read_bytes() == b"frames"
    assert _temps(target.parent) == []
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_failure_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = tmp_path / "out.gif"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="encoder died"):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("encoder died")
    assert target.read_bytes() == b"old"
    assert _temps(tmp_path) == []


def test_explicit_commit_and_discard_for_writers_that_stay_open(tmp_path):
    target = tmp_path / "a.bin"
    kept = atomic_path(target)
    kept.tmp.write_bytes(b"1")
    dropped = atomic_path(tmp_path / "b.bin")
    dropped.tmp.write_bytes(b"2")
    kept.commit()
    dropped.discard()
    assert target.read_bytes() == b"1" and not (tmp_path / "b.bin").exists()
    assert _temps(tmp_path) == []


def test_unwritable_directory_raises_oserror(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        atomic_path(blocker / "x.mp4")
    assert blocker.read_text() == "x"
