"""snrl.io.atomic_path: a temp path next to the target that replaces it only on success."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from snrl.io import _holder, atomic_path


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


def test_the_umask_is_never_changed_and_still_applies(tmp_path, monkeypatch):
    """io.py used to set the process umask to 0 and back to read it: a file another thread
    made in that moment came out world-writable. The kernel applies the umask now."""
    import snrl.io

    old = os.umask(0o027)
    try:

        def no_umask(_mask):
            raise AssertionError("snrl.io changed the process umask")

        monkeypatch.setattr(snrl.io.os, "umask", no_umask)
        snrl.io.atomic_write_text(tmp_path / "a.txt", "x")
        with atomic_path(tmp_path / "b.mp4") as tmp:
            tmp.write_bytes(b"v")
    finally:
        monkeypatch.undo()
        os.umask(old)
    for name in ("a.txt", "b.mp4"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name


def test_only_temps_that_snrl_made_are_its_own(tmp_path):
    from snrl.io import is_own_temp, make_temp, remove_stale_temps

    fd, tmp = make_temp(tmp_path / "video.gif")
    os.close(fd)
    assert tmp.parent == tmp_path and tmp.name.startswith(".video.gif.") and is_own_temp(tmp.name)
    lookalikes = [
        ".backup.20240101.tmp",
        ".thesis.chapter1.tmp",
        ".video.gif.k2j_9x0a.tmp",
        ".video.gif.k2j_9x0a.tmp.gif",
        tmp.name[:-5] + ("0" if tmp.name[-5] != "0" else "1") + ".tmp",  # the tag, one digit off
        tmp.name.replace(".video.gif.", ".other.gif."),  # a tag of another name
    ]
    assert not any(is_own_temp(n) for n in lookalikes)
    for n in lookalikes:
        (tmp_path / n).write_text("mine")
    assert remove_stale_temps(tmp_path) == [tmp]
    assert sorted(os.listdir(tmp_path)) == sorted(lookalikes)
    # a long name is shortened to a legal file name, and still proved
    fd, long_tmp = make_temp(tmp_path / ("x" * 250))
    os.close(fd)
    assert len(long_tmp.name.encode()) <= 255 and is_own_temp(long_tmp.name)


def test_the_key_is_per_user_and_a_process_key_stands_in(tmp_path, monkeypatch):
    import snrl.io

    monkeypatch.setattr(snrl.io, "_KEYS", {})
    monkeypatch.setenv("SNRL_CACHE_DIR", str(tmp_path / "cache"))
    key = snrl.io.temp_key()
    key_file = tmp_path / "cache" / "temp-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert bytes.fromhex(key_file.read_text().strip()) == key
    fd, tmp = snrl.io.make_temp(tmp_path / "a.txt")
    os.close(fd)
    # another process of the same user reads the same key: it recognizes the temp
    monkeypatch.setattr(snrl.io, "_KEYS", {})
    assert snrl.io.is_own_temp(tmp.name)
    # a cache that cannot hold a key (a file where the directory should be): a key of this
    # process only, so the temps of earlier processes are left alone, never deleted by guess
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    monkeypatch.setenv("SNRL_CACHE_DIR", str(blocker / "cache"))
    assert snrl.io.temp_key() != key and not snrl.io.is_own_temp(tmp.name)
    assert snrl.io.remove_stale_temps(tmp_path) == [] and tmp.exists()
    # a key file that is not a key is not trusted either, and not overwritten
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "temp-key").write_text("not a key\n")
    monkeypatch.setenv("SNRL_CACHE_DIR", str(bad))
    assert len(snrl.io.temp_key()) == 32 and (bad / "temp-key").read_text() == "not a key\n"


def test_a_lock_file_removed_between_open_and_lock_is_not_the_lock(tmp_path, monkeypatch):
    """A refused run removes the lock file it made; a process that had opened that file in
    the meantime must not count its lock on the removed file: it locks the file the path
    names (else two processes would each hold "the" lock)."""
    import fcntl
    import os

    import snrl.io as sio

    path = tmp_path / ".snrl-run.lock"
    opened = []
    real_open = sio._open_lock_file

    def open_then_removed(p):
        fd = real_open(p)
        if not opened:
            os.unlink(p)  # the other run's cleanup, after our open and before our lock
        opened.append(fd)
        return fd

    monkeypatch.setattr(sio, "_open_lock_file", open_then_removed)
    with sio.hold_lock(path, what="run directory x", hint="wait"):
        assert len(opened) == 2  # it opened the path again
        probe = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the file the path names is locked
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)


def test_a_lock_holder_that_writes_its_record_late_is_still_named(tmp_path):
    # two runs started together: the loser reads the lock file before the winner has written
    # who it is; it waits a moment for the record instead of naming nobody
    path = tmp_path / ".snrl-lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _holder(fd, wait=0.0) == "a process that has not said who it is yet"
        record = {"format": "snrl-lock", "pid": 4242, "host": "here", "started": time.time()}
        later = threading.Timer(0.1, path.write_text, args=(json.dumps(record),))
        later.start()
        try:
            assert _holder(fd, wait=5.0).startswith("pid 4242 on here, since ")
        finally:
            later.join()
    finally:
        os.close(fd)
