"""Run-directory rules: the manifest, what --force may delete, resume, stale temps."""

from __future__ import annotations

import json
import os
import time

import pytest

from snrl.errors import UserError
from snrl.io import make_temp, write_json_atomic
from snrl.training import prepare_run_dir
from snrl.training.rundir import (
    LAYOUT,
    LOCK,
    MANIFEST,
    claim_files,
    continue_run_dir,
    is_run_dir,
    read_manifest,
    remove_stale_temps,
)


def _tree(root):
    """Every path under root (relative, sorted), directories with a trailing slash."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out.append(os.path.normpath(os.path.join(rel, d)) + "/")
        for f in filenames:
            out.append(os.path.normpath(os.path.join(rel, f)))
    return sorted(out)


def _fake_run(out):
    """A run directory after some training: every file of LAYOUT written."""
    prepare_run_dir(out)
    for name in LAYOUT:
        if not name.endswith("/"):
            (out / name).write_text("ours")
    return out


def test_fresh_and_empty_dir_get_a_manifest(tmp_path):
    out = prepare_run_dir(tmp_path / "run", resume=False, force=False)
    assert out == tmp_path / "run" and (out / "checkpoints").is_dir()
    assert read_manifest(out) == list(LAYOUT) and is_run_dir(out)
    assert _tree(out) == [MANIFEST, LOCK, "checkpoints/"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (prepare_run_dir(empty) / "checkpoints").is_dir()
    # a run that has written no file yet is reused without a flag
    assert prepare_run_dir(out) == out


def test_existing_run_needs_a_flag(tmp_path):
    out = prepare_run_dir(tmp_path / "run")
    (out / "config.json").write_text("{}")
    with pytest.raises(UserError, match=r"run directory .*run holds an earlier run \(.*--resume"):
        prepare_run_dir(out)
    assert (out / "config.json").read_text() == "{}"


def test_force_deletes_only_what_the_manifest_lists(tmp_path):
    out = _fake_run(tmp_path / "run")
    (out / "notes.txt").write_text("mine")
    (out / "checkpoints" / "mine.pt").write_text("mine")
    (out / "extra").mkdir()
    (out / "extra" / "a.txt").write_text("mine")
    prepare_run_dir(out, force=True)
    assert _tree(out) == sorted(
        [
            MANIFEST,
            LOCK,
            "checkpoints/",
            "checkpoints/mine.pt",
            "extra/",
            "extra/a.txt",
            "notes.txt",
        ]
    )
    assert (out / "notes.txt").read_text() == "mine"
    # and a listed directory that holds only our files goes and comes back empty
    out2 = _fake_run(tmp_path / "run2")
    prepare_run_dir(out2, force=True)
    assert _tree(out2) == [MANIFEST, LOCK, "checkpoints/"]


def test_project_folder_with_a_config_json_is_never_touched(tmp_path):
    proj = tmp_path / "project"
    (proj / "src").mkdir(parents=True)
    (proj / "src" / "main.py").write_text("print(1)")
    (proj / "README.md").write_text("readme")
    (proj / "config.json").write_text("{}")
    before = _tree(proj)
    for force in (False, True):
        with pytest.raises(UserError, match=r"not an snrl run directory \(it holds README.md, "):
            prepare_run_dir(proj, force=force)
    assert _tree(proj) == before and (proj / "README.md").read_text() == "readme"


def test_stray_metrics_csv_does_not_make_a_run(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "metrics.csv").write_text("a,b\n")
    (d / "data.txt").write_text("precious")
    with pytest.raises(UserError, match=r"holds data.txt, metrics.csv;"):
        prepare_run_dir(d, force=True)
    assert (d / "data.txt").read_text() == "precious"


def test_never_clears_cwd_its_parents_or_home(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="path '' is empty"):
        prepare_run_dir("", force=True)
    parent = _fake_run(tmp_path / "a")
    out = _fake_run(tmp_path / "a" / "run")
    monkeypatch.chdir(out)
    with pytest.raises(UserError, match="it is the current directory"):
        prepare_run_dir(".", force=True)
    with pytest.raises(UserError, match="it is a parent of the current directory"):
        prepare_run_dir(parent, force=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(out))
    with pytest.raises(UserError, match="it is your home directory"):
        prepare_run_dir(out, force=True)
    assert (out / "config.json").read_text() == "ours"  # all refused before deleting


def test_crafted_manifest_cannot_reach_outside(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = _fake_run(tmp_path / "run")
    for entry in ("../victim.txt", str(victim), "a/../../victim.txt", ".", 3):
        write_json_atomic(out / MANIFEST, {"format": "snrl-run", "version": 1, "entries": [entry]})
        with pytest.raises(UserError, match=r"run manifest .* is corrupt"):
            prepare_run_dir(out, force=True)
    (out / MANIFEST).write_text("[1, 2")
    with pytest.raises(UserError, match=r"run manifest .* is corrupt"):
        prepare_run_dir(out, force=True)
    assert victim.read_text() == "keep" and (out / "config.json").exists()


def test_a_manifest_listing_a_name_snrl_never_writes_deletes_nothing(tmp_path):
    """A folder someone sent may carry a crafted manifest: it cannot make --force delete a
    file of a name snrl never writes (the user's notes.txt, src/)."""
    out = _fake_run(tmp_path / "run")
    (out / "notes.txt").write_text("mine")
    (out / "src").mkdir()
    (out / "src" / "main.py").write_text("mine")
    for entry in ("notes.txt", "src/main.py", "src/", "checkpoints/other.pt"):
        entries = [*LAYOUT, entry]
        write_json_atomic(out / MANIFEST, {"format": "snrl-run", "version": 1, "entries": entries})
        with pytest.raises(UserError, match=r"lists .*, which snrl never writes"):
            prepare_run_dir(out, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "src" / "main.py").read_text() == "mine"
    assert (out / "config.json").exists()


@pytest.mark.parametrize("link", ["checkpoints", "metrics.csv"])
def test_resume_refuses_to_write_through_a_link(tmp_path, link):
    """A bundle whose checkpoints/ (or metrics.csv) links elsewhere: resuming it would write
    out of the run, so it is refused and the link's target is untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "last.pt").write_text("keep")
    (elsewhere / "metrics.csv").write_text("keep")
    out = _fake_run(tmp_path / "run")
    target = out / link
    if target.is_dir():
        for p in target.iterdir():
            p.unlink()
        target.rmdir()
        target.symlink_to(elsewhere)
    else:
        target.unlink(missing_ok=True)
        target.symlink_to(elsewhere / "metrics.csv")
    with pytest.raises(UserError, match=rf"holds symbolic links \({link}\)"):
        prepare_run_dir(out, resume=True)
    with pytest.raises(UserError, match="will not write through a link"):
        continue_run_dir(out)
    assert sorted(p.read_text() for p in elsewhere.iterdir()) == ["keep", "keep"]


def test_force_never_follows_links_out_of_the_run(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("best.pt", "last.pt", "precious.txt"):
        (elsewhere / name).write_text("keep")
    out = _fake_run(tmp_path / "run")
    for name in ("best.pt", "last.pt"):
        (out / "checkpoints" / name).unlink()
    (out / "checkpoints").rmdir()
    (out / "checkpoints").symlink_to(elsewhere)  # a crafted bundle
    (out / "config.json").unlink()
    (out / "config.json").symlink_to(elsewhere / "precious.txt")
    # the files behind the links are not ours: a run with links is refused before anything
    # is deleted or written (a new run would write through the checkpoints link)
    with pytest.raises(UserError, match=r"holds symbolic links \(checkpoints, config.json\)"):
        prepare_run_dir(out, force=True)
    for name in ("best.pt", "last.pt", "precious.txt"):
        assert (elsewhere / name).read_text() == "keep"
    assert (out / "config.json").is_symlink() and (out / "checkpoints").is_symlink()


def test_a_file_of_the_layout_that_is_not_ours_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    write_json_atomic(out / MANIFEST, {"format": "snrl-run", "version": 1, "entries": []})
    (out / "metrics.csv").write_text("theirs")
    with pytest.raises(UserError, match=r"holds metrics.csv, which snrl did not write"):
        prepare_run_dir(out, force=True)
    assert (out / "metrics.csv").read_text() == "theirs"


def test_claim_files(tmp_path):
    out = prepare_run_dir(tmp_path / "run")
    claim_files(out, ["eval.json"])
    assert read_manifest(out)[-1] == "eval.json"
    (out / "demo.gif").write_text("theirs")
    with pytest.raises(UserError, match="holds demo.gif, which snrl did not write"):
        claim_files(out, ["demo.gif"])
    with pytest.raises(UserError, match="not an snrl run directory"):
        claim_files(tmp_path, ["x"])


def test_resume_requires_last_checkpoint(tmp_path):
    out = prepare_run_dir(tmp_path / "run")
    with pytest.raises(UserError, match=r"checkpoints/last.pt does not exist, so there is nothing"):
        prepare_run_dir(out, resume=True)
    with pytest.raises(UserError, match="nothing to resume"):
        prepare_run_dir(tmp_path / "missing", resume=True)
    (out / "checkpoints" / "last.pt").write_bytes(b"x")
    (out / "metrics.csv").write_text("keep")
    assert prepare_run_dir(out, resume=True) == out
    assert (out / "metrics.csv").read_text() == "keep"  # resume deletes nothing


def test_continue_adopts_an_old_run_and_refuses_other_folders(tmp_path):
    old = tmp_path / "old"  # a run written before manifests existed
    (old / "checkpoints").mkdir(parents=True)
    (old / "checkpoints" / "last.pt").write_bytes(b"x")
    (old / "metrics.csv").write_text("keep")
    assert continue_run_dir(old) == old and is_run_dir(old)
    assert (old / "metrics.csv").read_text() == "keep"
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("x")
    with pytest.raises(UserError, match="not an snrl run directory"):
        continue_run_dir(other)
    assert _tree(other) == ["a.txt"]


def test_both_flags(tmp_path):
    with pytest.raises(UserError, match="--resume and --force are mutually exclusive"):
        prepare_run_dir(tmp_path / "run", resume=True, force=True)


def test_unwritable_or_file_path(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(UserError, match=r"afile exists and is not a directory"):
        prepare_run_dir(f)
    with pytest.raises(UserError, match=r"cannot create run directory .*afile/run \("):
        prepare_run_dir(f / "run")


def _killed_write(path):
    """The temp file a process killed while writing ``path`` leaves: made by snrl.io."""
    fd, tmp = make_temp(path)
    os.write(fd, b"half")
    os.close(fd)
    return tmp


def test_stale_temps_of_ours_are_removed_on_start_and_nothing_else(tmp_path):
    out = _fake_run(tmp_path / "run")
    ours = [
        _killed_write(out / "checkpoints" / "last.pt"),
        _killed_write(out / "metrics.csv"),
        _killed_write(out / MANIFEST),
        _killed_write(out / "demo.mp4"),
        _killed_write(out / ".snrl-write-test"),
    ]
    # the user's hidden files, some shaped like snrl 0.1's temp names (issue 32, item 3): a
    # name that only looks like a temp of ours is the user's
    theirs = [
        ".notes.tmp",
        ".backup.20240101.tmp",
        ".thesis.chapter1.tmp",
        ".last.pt.k2j_9x0a.tmp",
        ".demo.zz99zz99.tmp.mp4",
        ".snrl-write-test.q1w2e3r4",
        f".{ours[0].name}",  # one of ours, renamed: the tag covers the whole name
        ours[1].name.replace(".tmp", "0.tmp"),
        "x.a1b2c3d4.tmp",
    ]
    for name in theirs:
        (out / name).write_bytes(b"mine")
    prepare_run_dir(out, resume=True)
    for path in ours:
        assert not path.exists(), path.name
    for name in theirs:
        assert (out / name).read_bytes() == b"mine", name


def test_remove_stale_temps_keeps_fresh_ones_when_asked(tmp_path):
    old, new = _killed_write(tmp_path / "a.mp4"), _killed_write(tmp_path / "b.gif")
    t = time.time() - 600
    os.utime(old, (t, t))
    assert remove_stale_temps(tmp_path, min_age_s=60) == [old]
    assert new.exists()
    assert remove_stale_temps(tmp_path / "missing") == []


def test_write_json_atomic(tmp_path):
    path = tmp_path / "sub" / "config.json"
    write_json_atomic(path, {"a": 1, "b": [1.5, "x"]})
    assert json.loads(path.read_text()) == {"a": 1, "b": [1.5, "x"]}
    assert path.read_text().endswith("\n")
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1, "b": [1.5, "x"]}  # old file intact
    assert os.listdir(path.parent) == ["config.json"]


def test_a_deeply_nested_manifest_or_marker_is_corrupt_not_a_recursion_error(tmp_path):
    """A crafted folder: manifest and analysis marker nested past any parser's recursion."""
    from snrl.analysis.outdir import check_output_dir
    from snrl.training.rundir import MANIFEST, read_manifest

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / MANIFEST).write_text(deep)
    with pytest.raises(UserError, match="is corrupt"):
        read_manifest(tmp_path)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / ".snrl-analysis.json").write_text(deep)
    with pytest.raises(UserError, match="is corrupt"):
        check_output_dir(tmp_path, "analysis")


def test_finishing_an_analysis_deletes_nothing_an_unbound_marker_lists(tmp_path):
    """finish_output_dir deletes snrl's earlier files only where a marker bound to the folder
    lists them: a copied or planted marker vouches for nothing."""
    import json

    from snrl.analysis.outdir import claim_output_dir, finish_output_dir

    out = tmp_path / "analysis"
    out.mkdir()
    (out / ".snrl-analysis.json").write_text(
        json.dumps({"format": "snrl-analysis", "files": ["raster.png"]})  # no binding
    )
    (out / "raster.png").write_bytes(b"mine")
    finish_output_dir(out, [out / "summary.json"])
    assert (out / "raster.png").read_bytes() == b"mine"
    bound = claim_output_dir(tmp_path / "run", "analysis")  # a folder snrl claimed itself
    (bound / "raster.png").write_bytes(b"an earlier analysis")
    finish_output_dir(bound, [bound / "summary.json"])
    assert not (bound / "raster.png").exists()  # its own earlier file goes
