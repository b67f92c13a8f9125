"""Never lose a user's files, never run code named by a run directory, say the truth when
stopped: the cases of issue 10, run as a user runs them (a subprocess; exit code, one line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import snrl
from snrl.errors import UserError
from snrl.io import make_temp
from snrl.training.checkpoint import load_checkpoint, save_checkpoint
from snrl.training.metrics import read_metrics
from snrl.training.rundir import MANIFEST, prepare_run_dir
from tests.cli_run import ctrl_c_works

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
# 8 envs x 32 steps = 256 env steps per update (PPO's default is 16 envs since issue 12)
FAST = ["--backbone", "mlp", "--hidden", "16", "--n-envs", "8", "--set", "eval_episodes=2"]


def snrl_cli(*args, cwd=ROOT, env=None, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "snrl.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=timeout,
        cwd=cwd,
    )


def assert_user_error(res, *fragments, code=2):
    assert res.returncode == code, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> content)."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def project(path: Path) -> Path:
    """A user's project folder that happens to hold a config.json."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "model.py").write_text("x = 1\n")
    (path / "README.md").write_text("my project\n")
    (path / "config.json").write_text('{"lr": 1}\n')
    return path


# ---- data loss --------------------------------------------------------------------------------


def test_demo_refuses_a_project_folder_with_a_config_json(tmp_path):
    proj = project(tmp_path / "proj")
    before = tree(proj)
    res = snrl_cli("demo", "--out", proj, "--quiet", "--no-video")
    assert_user_error(res, "not an snrl run directory", "README.md", "config.json", "src/")
    assert tree(proj) == before


def test_force_refuses_a_folder_with_a_stray_metrics_csv(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    (d / "metrics.csv").write_text("a\n1\n")
    (d / "data.txt").write_text("precious")
    before = tree(d)
    res = snrl_cli("train", *FAST, "--steps", 256, "--out", d, "--force", "--quiet")
    assert_user_error(res, "not an snrl run directory", "data.txt, metrics.csv")
    assert tree(d) == before


def test_empty_out_never_resolves_to_the_cwd(tmp_path):
    cwd = project(tmp_path / "cwd")
    before = tree(cwd)
    for extra in ([], ["--force"]):
        res = snrl_cli("train", *FAST, "--steps", 256, "--out", "", *extra, "--quiet", cwd=cwd)
        assert_user_error(res, "run directory path '' is empty")
    assert_user_error(snrl_cli("demo", "--out", "", "--quiet", cwd=cwd), "--out '' is empty")
    res = snrl_cli("train", "--out", "x", "--trust-env-module", cwd=cwd)
    assert_user_error(res, "--trust-env-module applies to --resume only")
    assert tree(cwd) == before


def test_force_replaces_only_snrl_files_and_never_the_cwd(tmp_path):
    out = tmp_path / "run"
    args = ["train", *FAST, "--steps", 256, "--set", "eval_interval=0", "--quiet"]
    assert snrl_cli(*args, "--out", out).returncode == 0
    (out / "notes.txt").write_text("mine")
    (out / "checkpoints" / "keep.pt").write_bytes(b"mine")
    res = snrl_cli(*args, "--out", out)
    assert_user_error(res, "holds an earlier run", "--resume", "--force")
    old_last = (out / "checkpoints" / "last.pt").read_bytes()
    res = snrl_cli(*args, "--out", ".", "--force", cwd=out)  # the run is the cwd: refused
    assert_user_error(res, "it is the current directory")
    assert (out / "checkpoints" / "last.pt").read_bytes() == old_last
    res = snrl_cli(*args, "--seed", 3, "--out", out, "--force")
    assert res.returncode == 0, res.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "checkpoints" / "keep.pt").read_bytes() == b"mine"
    assert load_checkpoint(out / "checkpoints" / "last.pt")["config"]["seed"] == 3


def test_python_run_dir_refuses_an_earlier_run_and_foreign_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    states = torch.get_rng_state(), np.random.get_state()
    kw = dict(backbone="mlp", hidden_size=8, n_envs=2, n_steps=16, eval_interval=0, seed=0)
    algo = snrl.PPO("CartPole-v1", run_dir="runs/lif", **kw)  # the README example, twice
    algo.learn(64, progress=False)
    algo.close()
    metrics = (tmp_path / "runs/lif/metrics.csv").read_bytes()
    best = (tmp_path / "runs/lif/checkpoints/best.pt").read_bytes()
    with pytest.raises(UserError, match=r"runs/lif holds an earlier run \(.*overwrite=True"):
        snrl.PPO("CartPole-v1", run_dir="runs/lif", **kw)
    with pytest.raises(UserError, match=r"runs/lif holds an earlier run"):
        snrl.DQN("CartPole-v1", run_dir="runs/lif", backbone="mlp", hidden_size=8)
    assert (tmp_path / "runs/lif/metrics.csv").read_bytes() == metrics
    assert (tmp_path / "runs/lif/checkpoints/best.pt").read_bytes() == best
    # explicit: continue it, or replace it
    again = snrl.PPO.load("runs/lif/checkpoints/last.pt", run_dir="runs/lif")
    again.learn(96, progress=False)
    again.close()
    assert list(read_metrics("runs/lif/metrics.csv")["env_step"]) == [32, 64, 96]
    again.save(tmp_path / "elsewhere.pt")
    algo = snrl.PPO("CartPole-v1", run_dir="runs/lif", overwrite=True, **kw)
    assert not (tmp_path / "runs/lif/metrics.csv").exists()
    # a folder that is not a run
    proj = project(tmp_path / "proj")
    before = tree(proj)
    with pytest.raises(UserError, match="not an snrl run directory"):
        snrl.PPO("CartPole-v1", run_dir=proj, overwrite=True, **kw)
    with pytest.raises(UserError, match="not an snrl run directory"):
        snrl.PPO.load(tmp_path / "elsewhere.pt", run_dir=proj)
    assert tree(proj) == before
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])


# ---- code execution from a run directory -------------------------------------------------------

EVIL = """import pathlib
pathlib.Path("{marker}").write_text("code from the bundle ran")
from gymnasium.envs.classic_control import CartPoleEnv


class Env(CartPoleEnv):
    pass
"""


@pytest.fixture
def bundle(tmp_path):
    """A run directory someone sent: its checkpoints name ``evil_env:Env``, shipped beside."""
    states = torch.get_rng_state(), np.random.get_state()
    out = prepare_run_dir(tmp_path / "bundle")
    algo = snrl.PPO("CartPole-v1", backbone="mlp", hidden_size=8, n_envs=1, seed=0)
    algo.save(out / "checkpoints" / "last.pt")
    payload = load_checkpoint(out / "checkpoints" / "last.pt")
    payload["config"] = {**payload["config"], "env": "evil_env:Env", "eval_episodes": 1}
    for name in ("best.pt", "last.pt"):
        save_checkpoint(out / "checkpoints" / name, payload)
    marker = tmp_path / "marker"
    (out / "evil_env.py").write_text(EVIL.format(marker=marker))
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])
    return out, marker


def test_eval_render_resume_do_not_import_the_bundles_module(bundle):
    out, marker = bundle
    env = {**ENV, "PYTHONPATH": f"{ROOT}{os.pathsep}."}
    for args in (
        ["eval", ".", "--episodes", 1],
        ["render", ".", "--out", "x.gif"],
        ["train", "--out", ".", "--resume", "--steps", 16, "--quiet"],
    ):
        res = snrl_cli(*args, cwd=out, env=env)
        assert_user_error(res, "names the env 'evil_env:Env'", "--trust-env-module", "--env")
        assert not marker.exists(), args
    assert not (out / "x.gif").exists()
    # the user may name a registered env, or trust the module (then it is imported)
    res = snrl_cli("eval", ".", "--episodes", 1, "--env", "CartPole-v1", cwd=out, env=env)
    assert res.returncode == 0, res.stderr
    assert not marker.exists()
    res = snrl_cli("eval", ".", "--episodes", 1, "--trust-env-module", cwd=out, env=env)
    assert res.returncode == 0, res.stderr
    assert marker.exists()


# ---- checkpoints --------------------------------------------------------------------------------


class _Pwn:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_raw_pickle_and_crafted_checkpoints_via_the_cli(bundle, tmp_path):
    out, _ = bundle
    marker = tmp_path / "pwned"
    torch.save({"payload": _Pwn(marker)}, out / "checkpoints" / "best.pt")
    res = snrl_cli("eval", out)
    assert_user_error(res, "is not a safe snrl checkpoint", "use a checkpoint written by snrl")
    assert "weights_only" not in res.stderr and not marker.exists()
    payload = load_checkpoint(out / "checkpoints" / "last.pt")
    del payload["counters"]
    save_checkpoint(out / "checkpoints" / "best.pt", payload)
    res = snrl_cli("eval", out)
    assert_user_error(res, "is corrupt or not an snrl checkpoint", "['counters'] is missing")


# ---- signals and stale temps --------------------------------------------------------------------


def _start_training(out, *extra):
    args = [sys.executable, "-m", "snrl.cli", "train", *FAST, "--steps", "100000"]
    args += [*extra, "--set", "eval_interval=0", "--out", str(out), "--quiet"]
    return subprocess.Popen(
        args,
        env=ENV,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_works,  # the Ctrl-C test sends SIGINT
    )


def _wait_for(cond, proc, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("training did not get there in time")


def _rows(out):
    path = out / "metrics.csv"
    return len(read_metrics(path)["env_step"]) if path.exists() else 0


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_say_where_the_run_was_left(tmp_path, sig):
    out = tmp_path / "run"
    proc = _start_training(out, "--set", "checkpoint_interval=1")
    _wait_for(lambda: (out / "checkpoints" / "last.pt").exists() and _rows(out) >= 2, proc)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    assert_user_error(
        res,
        f"interrupted by {sig}",
        "consistent and resumable from env step",
        "--resume",
        code=128 + getattr(signal, sig),
    )
    step = int(err.split("from env step ")[1].split(" ")[0])
    assert step == load_checkpoint(out / "checkpoints" / "last.pt")["counters"]["env_step"]
    res = snrl_cli("train", "--out", out, "--resume", "--steps", step + 256, "--quiet")
    assert res.returncode == 0, res.stderr
    steps = read_metrics(out / "metrics.csv")["env_step"]
    np.testing.assert_array_equal(steps, np.arange(1, len(steps) + 1) * 256)


def test_ctrl_c_before_the_first_checkpoint_says_there_is_nothing_to_resume(tmp_path):
    out = tmp_path / "run"
    proc = _start_training(out, "--set", "checkpoint_interval=1000")
    _wait_for(lambda: _rows(out) >= 1, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    assert_user_error(res, "interrupted by Ctrl-C", "nothing to resume", "--force", code=130)
    assert "resume with --resume" not in err
    assert_user_error(snrl_cli("train", "--out", out, "--resume"), "nothing to resume")
    # and what it says works: --force replaces the partial run
    res = snrl_cli("train", *FAST, "--steps", 256, "--out", out, "--force", "--quiet")
    assert res.returncode == 0, res.stderr


def _killed_write(path: Path) -> Path:
    """The temp file that a process killed while writing ``path`` leaves (snrl.io's)."""
    fd, tmp = make_temp(path)
    os.write(fd, b"\0" * 1000)
    os.close(fd)
    return tmp


#: Hidden files of a user that look like snrl 0.1's temp names (issue 32, item 3).
LOOKALIKES = (".backup.20240101.tmp", ".thesis.chapter1.tmp", ".ep.q9w8e7r6.tmp.gif")


def test_stale_temps_are_cleaned_on_the_next_start(bundle):
    out, _ = bundle
    ckpt = out / "checkpoints"
    stale = [_killed_write(ckpt / "last.pt"), _killed_write(out / "metrics.csv")]
    videos = out / "videos"
    videos.mkdir()
    for d in (out, ckpt, videos):
        for name in LOOKALIKES:
            (d / name).write_bytes(b"keep")
    old_video = _killed_write(videos / "ep.gif")  # a render killed an hour ago
    hour_ago = time.time() - 3600
    os.utime(old_video, (hour_ago, hour_ago))
    res = snrl_cli(
        "train", "--out", out, "--resume", "--env", "CartPole-v1", "--steps", 32, "--quiet"
    )
    assert res.returncode == 0, res.stderr
    assert not any(p.exists() for p in stale)
    res = snrl_cli("render", out, "--out", videos / "ep.gif", "--env", "CartPole-v1")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in videos.iterdir()) == sorted(["ep.gif", *LOOKALIKES])
    for d in (out, ckpt, videos):
        for name in LOOKALIKES:
            assert (d / name).read_bytes() == b"keep", d / name
    assert MANIFEST in os.listdir(out)
