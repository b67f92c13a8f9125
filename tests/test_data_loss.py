"""The data-loss cases of issue 32, run as a user runs them (a subprocess: exit code 2, one
`error:` line, the user's files byte for byte as they were): a manifest planted in a user's
folder or reached through a link, two runs into one directory at once, an output folder
behind a symlinked parent, a remote env's token in env_kwargs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snrl.errors import UserError
from snrl.experiments.runner import train_run
from snrl.training.rundir import LOCK, MANIFEST, prepare_run_dir, read_manifest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
FAST = ["--backbone", "mlp", "--hidden", "16", "--n-envs", "8", "--set", "eval_episodes=2"]
FAST += ["--quiet"]


def snrl_cli(*args, env=None, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "snrl.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=timeout,
        cwd=ROOT,
    )


def snrl_popen(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "snrl.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
    )


def assert_user_error(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> content), links as their target's name."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = b"-> " + os.fsencode(os.readlink(p))
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def user_folder(path: Path) -> Path:
    """A user's folder whose files carry snrl's names."""
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.json").write_text('{"mine": true}\n')
    (path / "metrics.csv").write_text("my,data\n1,2\n")
    (path / "checkpoints" / "best.pt").write_bytes(b"my weights")
    (path / "thesis.tex").write_text("chapter 1\n")
    return path


def plant_manifest(folder: Path, **extra) -> None:
    entries = ["checkpoints/", "config.json", "metrics.csv", "checkpoints/best.pt"]
    manifest = {"format": "snrl-run", "version": 1, **extra, "entries": entries}
    (folder / MANIFEST).write_text(json.dumps(manifest))


# ---- item 4: a manifest snrl did not write here deletes nothing ------------------------------


def test_force_refuses_a_planted_manifest_in_a_users_folder(tmp_path):
    folder = user_folder(tmp_path / "proj")
    plant_manifest(folder)  # the shape snrl 0.1 wrote: no binding
    before = tree(folder)
    res = snrl_cli("train", *FAST, "--steps", 256, "--out", folder, "--force")
    assert_user_error(res, "refusing to clear the run", "records no directory", "by hand")
    assert tree(folder) == before

    # a planted manifest that names another directory (or this one's path, not its inode)
    st = os.stat(folder)
    for binding in (
        {"dir": str(tmp_path / "elsewhere"), "device": st.st_dev, "inode": st.st_ino},
        {"dir": str(folder.resolve()), "device": st.st_dev, "inode": st.st_ino + 1},
    ):
        plant_manifest(folder, **binding)
        before = tree(folder)
        res = snrl_cli("train", *FAST, "--steps", 256, "--out", folder, "--force")
        assert_user_error(res, "refusing to clear the run", "written for another directory")
        assert tree(folder) == before


def test_force_refuses_a_symlinked_out(tmp_path):
    run = prepare_run_dir(tmp_path / "run")  # a real snrl run, reached through a link
    (run / "config.json").write_text("{}")
    link = tmp_path / "lnk"
    link.symlink_to(run)
    before = tree(run)
    res = snrl_cli("train", *FAST, "--steps", 256, "--out", link, "--force")
    assert_user_error(res, "--force will not replace a run through the symbolic link")
    assert tree(run) == before and link.is_symlink()


def test_a_moved_or_copied_run_is_not_cleared_and_a_bound_one_is(tmp_path):
    run = prepare_run_dir(tmp_path / "run")
    (run / "config.json").write_text("{}")
    data = json.loads((run / MANIFEST).read_text())
    st = os.stat(run)
    assert data["dir"] == str(run.resolve())
    assert (data["device"], data["inode"]) == (st.st_dev, st.st_ino)
    moved = tmp_path / "moved"
    run.rename(moved)
    with pytest.raises(UserError, match="written for another directory"):
        prepare_run_dir(moved, force=True)
    assert (moved / "config.json").read_text() == "{}"
    moved.rename(run)  # back where it was written: its own run, cleared
    prepare_run_dir(run, force=True)
    assert not (run / "config.json").exists() and read_manifest(run) is not None


def test_a_run_of_the_previous_version_resumes_but_is_not_cleared(tmp_path):
    """Backward compatibility: a manifest without a binding (snrl 0.1) is kept as it is,
    never bound after the fact, and never trusted to delete."""
    run = prepare_run_dir(tmp_path / "run")
    for name in ("config.json", "metrics.csv", "checkpoints/last.pt"):
        (run / name).write_text("old")
    plant_manifest(run)  # rewrite it as 0.1 did
    assert prepare_run_dir(run, resume=True) == run
    assert "dir" not in json.loads((run / MANIFEST).read_text())
    with pytest.raises(UserError, match="records no directory"):
        prepare_run_dir(run, force=True)
    assert (run / "config.json").read_text() == "old"


# ---- item 5: two runs into one directory ------------------------------------------------------


def _lock_record(run: Path) -> dict | None:
    try:
        return json.loads((run / LOCK).read_text())
    except (OSError, ValueError):
        return None


def test_a_second_train_into_a_running_directory_exits_2_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    first = snrl_popen(
        "train", *FAST, "--steps", 10_000_000, "--set", "checkpoint_interval=1", "--out", run
    )
    try:
        deadline = time.monotonic() + 120
        while _lock_record(run) is None and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lock_record(run)["pid"] == first.pid, first.communicate(timeout=30)
        for extra in ([], ["--force"]):
            res = snrl_cli("train", *FAST, "--steps", 256, "--out", run, *extra)
            assert_user_error(res, f"run directory {run} is in use by pid {first.pid} on ")
        (run / "checkpoints").mkdir(exist_ok=True)
        while not (run / "checkpoints" / "last.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        res = snrl_cli("train", "--out", run, "--resume", "--quiet")
        assert_user_error(res, f"is in use by pid {first.pid}")
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.terminate()
        first.communicate(timeout=60)
    assert first.returncode != 0  # stopped by us; its run is there to resume
    assert (run / "config.json").is_file() and (run / "checkpoints" / "last.pt").is_file()
    res = snrl_cli("train", "--out", run, "--resume", "--steps", 256, "--quiet")
    assert res.returncode == 0, res.stderr  # the lock went with the process


def test_two_trains_started_together_one_wins_and_its_run_is_whole(tmp_path):
    run = tmp_path / "run"
    procs = [snrl_popen("train", *FAST, "--steps", 512, "--out", run) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2], results
    loser = next(r for r in results if r[0] == 2)
    lines = loser[2].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), loser[2]
    # the winner named, or (a record not written within the loser's wait, on a loaded
    # machine) the run folder in use all the same, or the winner's finished run refused
    named = ("is in use by pid", "is in use by a process that has not said", "holds an earlier run")
    assert any(words in lines[0] for words in named), lines[0]
    from snrl.training.checkpoint import load_checkpoint
    from snrl.training.metrics import read_metrics

    assert read_metrics(run / "metrics.csv")["env_step"][-1] == 512
    assert load_checkpoint(run / "checkpoints" / "last.pt")["counters"]["env_step"] == 512
    assert json.loads((run / "config.json").read_text())["total_steps"] == 512


def test_the_lock_file_is_snrls_or_refused(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK).write_text("my notes, not a lock\n")
    with pytest.raises(UserError, match="was not written by snrl"):
        prepare_run_dir(folder)
    assert (folder / LOCK).read_text() == "my notes, not a lock\n"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep")
    (folder / LOCK).unlink()
    (folder / LOCK).symlink_to(elsewhere)
    with pytest.raises(UserError, match="is a symbolic link"):
        prepare_run_dir(folder)
    assert elsewhere.read_text() == "keep"


def test_a_refused_folder_is_left_without_a_lock_file(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="is not an snrl run directory"):
        prepare_run_dir(folder)
    assert sorted(os.listdir(folder)) == ["notes.txt"]
    # a resume of a run that is not there makes no folder on the way
    with pytest.raises(UserError, match="nothing to resume"):
        train_run(tmp_path / "a" / "b" / "run", resume=True)
    assert sorted(os.listdir(tmp_path)) == ["proj"]


# ---- item 6: no output through a symlinked folder on the way -----------------------------------


def test_analyze_refuses_an_out_behind_a_symlinked_parent(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    (run / "lnk").symlink_to(elsewhere)
    for out in ("lnk/sub", "lnk", "lnk/a/b"):
        res = snrl_cli("analyze", run, "--out", out)
        assert_user_error(res, f"{run / 'lnk'} is a symbolic link")
    assert sorted(os.listdir(elsewhere)) == ["keep.txt"]


def test_claim_output_dir_checks_every_component(tmp_path):
    from snrl.analysis.outdir import claim_output_dir

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    base = tmp_path / "run"
    (base / "a").mkdir(parents=True)
    (base / "a" / "b").symlink_to(elsewhere)
    with pytest.raises(UserError, match=r"a/b is a symbolic link"):
        claim_output_dir(base, "a/b/deep/sub")
    assert sorted(os.listdir(elsewhere)) == ["deep"] and not os.listdir(elsewhere / "deep")
    assert claim_output_dir(base, "a/c").is_dir()  # real directories are fine


def test_run_and_compare_directories_with_a_symlinked_folder_are_refused(tmp_path):
    from snrl.experiments.store import check_compare_dir

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = prepare_run_dir(tmp_path / "run")
    (run / "checkpoints").rmdir()
    (run / "checkpoints").symlink_to(elsewhere)
    for call in (lambda: prepare_run_dir(run), lambda: prepare_run_dir(run, force=True)):
        with pytest.raises(UserError, match=r"holds symbolic links \(checkpoints\)"):
            call()
    cmp_dir = tmp_path / "cmp"
    cmp_dir.mkdir()
    (cmp_dir / "compare.json").write_text(json.dumps({"kind": "snrl compare"}))
    (cmp_dir / "runs").symlink_to(elsewhere)
    with pytest.raises(UserError, match=r"runs is a symbolic link"):
        check_compare_dir(cmp_dir)
    (cmp_dir / "runs").unlink()
    (cmp_dir / "runs").mkdir()
    (cmp_dir / "runs" / "lif_s0").symlink_to(elsewhere)  # one run of it
    with pytest.raises(UserError, match=r"runs/lif_s0 is a symbolic link"):
        check_compare_dir(cmp_dir)
    assert os.listdir(elsewhere) == []


def test_an_analysis_marker_snrl_did_not_write_there_vouches_for_nothing(tmp_path):
    """The sibling of the planted run manifest: `snrl analyze` replaces and deletes only the
    files of a marker bound to its folder."""
    from snrl.analysis.outdir import MARKER, claim_output_dir, finish_output_dir

    run = tmp_path / "run"
    folder = run / "figs"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text('{"mine": 1}')
    (folder / "pca.png").write_bytes(b"my figure")
    (folder / MARKER).write_text(
        json.dumps({"format": "snrl-analysis", "files": [MARKER, "summary.json", "pca.png"]})
    )
    before = tree(folder)
    res = snrl_cli("analyze", run, "--out", "figs")
    assert_user_error(res, "which snrl did not write there", "records no directory")
    assert tree(folder) == before
    # a marker snrl wrote in another folder, copied here: the same
    other = claim_output_dir(tmp_path / "other", "figs")
    finish_output_dir(other, [other / "summary.json"])
    (folder / MARKER).write_bytes((other / MARKER).read_bytes())
    before = tree(folder)
    res = snrl_cli("analyze", run, "--out", "figs")
    assert_user_error(res, "which snrl did not write there", "written for another directory")
    assert tree(folder) == before


# ---- item 12: a remote env's token is never written ------------------------------------------

TOKEN = "s3cret-token-0123456789abcdef"


def test_a_token_in_env_kwargs_is_refused_before_anything_is_written(tmp_path):
    run = tmp_path / "run"
    kwargs = json.dumps({"token": TOKEN, "timeout": 5})
    for args in (
        ["--env-kwargs", kwargs],
        ["--set", f"env_kwargs={kwargs}"],
    ):
        res = snrl_cli("train", "--env", "http://127.0.0.1:9", *args, *FAST, "--out", run)
        assert_user_error(res, "env_kwargs holds token for the remote env", "SNRL_ENV_TOKEN")
        assert TOKEN not in res.stderr
        assert not run.exists()


def test_a_checkpoint_or_config_with_a_token_is_never_written(tmp_path):
    from snrl.training.checkpoint import check_persistable, save_checkpoint

    cfg = {"env": "http://127.0.0.1:9", "env_kwargs": {"token": TOKEN}}
    with pytest.raises(UserError, match="env_kwargs holds token"):
        save_checkpoint(tmp_path / "c.pt", {"config": cfg})
    assert os.listdir(tmp_path) == []
    lessons = [{"env_kwargs": {}}, {"env_kwargs": {"token": TOKEN}}]
    with pytest.raises(UserError, match="env_kwargs holds token"):
        check_persistable({"env": "https://example.org", "env_kwargs": {}, "curriculum": lessons})
    check_persistable({"env": "CartPole-v1", "env_kwargs": {"token": "a local env's option"}})


def test_the_token_is_in_no_file_of_a_remote_run(tmp_path):
    """docs/remote.md's promise, checked by reading every byte the run wrote."""
    pytest.importorskip("uvicorn")
    from snrl.envs.remote_server import EnvServer

    run = tmp_path / "run"
    with EnvServer("CartPole-v1", token=TOKEN) as server:
        res = snrl_cli(
            "train", "--env", server.url, *FAST, "--steps", 256, "--out", run,
            env={**ENV, "SNRL_ENV_TOKEN": TOKEN},
        )  # fmt: skip
    assert res.returncode == 0, res.stderr
    files = tree(run)
    assert {"config.json", "checkpoints/best.pt", "checkpoints/last.pt"} <= set(files)
    assert not [name for name, data in files.items() if TOKEN.encode() in data]
