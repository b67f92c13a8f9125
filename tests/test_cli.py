"""The `snrl` command, run as a user would: files, exit codes, one-line errors."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from snrl.training.metrics import read_metrics
from tests.cli_run import ENV, ROOT, assert_user_error, snrl, snrl_inproc

# 8 envs x 32 steps = 256 env steps per update (PPO's default is 16 envs since issue 12)
FAST = ["--backbone", "mlp", "--hidden", "16", "--n-envs", "8", "--set", "eval_episodes=2"]


def test_train_then_eval(tmp_path):
    out = tmp_path / "run"
    res = snrl(
        "train",
        "--env",
        "CartPole-v1",
        *FAST,
        "--steps",
        1024,
        "--out",
        out,
        "--set",
        "eval_interval=512",
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    for f in (
        "config.json",
        "metrics.csv",
        "learning_curve.png",
        "checkpoints/best.pt",
        "checkpoints/last.pt",
    ):
        assert (out / f).exists(), f
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["backbone"] == "mlp" and cfg["hidden_size"] == 16 and cfg["total_steps"] == 1024
    m = read_metrics(out / "metrics.csv")
    per_update = cfg["n_envs"] * cfg["n_steps"]  # one metrics row per update
    np.testing.assert_array_equal(m["env_step"], np.arange(1, 1024 // per_update + 1) * per_update)
    assert np.isfinite(m["eval_return_mean"]).sum() == 2
    res = snrl("eval", out, "--episodes", 3, "--seed", 7)
    assert res.returncode == 0, res.stderr
    ev = json.loads(res.stdout)
    assert ev["n_episodes"] == 3 and len(ev["returns"]) == 3
    assert ev["mean_return"] == pytest.approx(np.mean(ev["returns"]))
    assert snrl("eval", out, "--episodes", 3, "--seed", 7).stdout == res.stdout


def test_bad_input_from_a_real_process():
    assert_user_error(snrl("train", "--env", "CartPol-v1", "--out", "unused"), "CartPole-v1")
    assert not (ROOT / "unused").exists()


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r"

    def snrl(*args):
        return snrl_inproc(capsys, *args)

    assert_user_error(snrl("train", "--env", "CartPol-v1", "--out", out), "CartPole-v1")
    assert not out.exists()
    bad_space = "tests.input_envs:MultiDiscrete2DEnv"  # (Blackjack's Tuple is flattened now)
    assert_user_error(snrl("train", "--env", bad_space, "--out", out), "supports")
    assert_user_error(snrl("train", "--out", out, "--set", "hiden_size=3"), "hidden_size")
    assert_user_error(snrl("train", "--out", out, "--set", "lr=-1"), "lr=")
    assert_user_error(snrl("train", "--out", out, "--config", tmp_path / "no.toml"), "no.toml")
    assert_user_error(snrl("train", "--algo", "ppo", "--out", out, "--steps", "x"), "invalid")
    assert not out.exists()
    assert_user_error(snrl("eval", tmp_path / "missing"), "does not exist")
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "best.pt").write_bytes(b"not a checkpoint")
    assert_user_error(snrl("eval", out), "corrupt")
    assert_user_error(snrl("render", out, "--out", tmp_path / "x.avi"), ".gif or .mp4")
    assert_user_error(
        snrl("train", "--out", out), "not an snrl run directory (it holds checkpoints/"
    )
    unwritable = tmp_path / "file"
    unwritable.write_text("x")
    assert_user_error(snrl("train", *FAST, "--steps", 256, "--out", unwritable / "run"), "")


def test_non_finite_observation_stops_with_step_and_keeps_checkpoint(tmp_path):
    out = tmp_path / "nan"
    res = snrl(
        "train",
        "--env",
        "tests.cli_envs:NanAfterEnv",
        *FAST,
        "--n-envs",
        1,
        "--steps",
        5000,
        "--set",
        "n_steps=64",
        "--set",
        "checkpoint_interval=1",
        "--set",
        "eval_interval=0",
        "--out",
        out,
        "--quiet",
    )
    assert_user_error(res, "step 600")
    from snrl.agents import load_algo

    algo = load_algo(out / "checkpoints" / "last.pt", trust_env_module=True)  # our own module
    assert algo.env_step == 576  # 9 full segments of 64 steps before the bad step
    m = read_metrics(out / "metrics.csv")
    assert m["env_step"][-1] == 576


def test_resume_after_sigkill_loses_nothing_twice(tmp_path):
    out = tmp_path / "kill"
    args = [
        sys.executable,
        "-m",
        "snrl.cli",
        "train",
        "--env",
        "CartPole-v1",
        *FAST,
        "--steps",
        "6144",
        "--set",
        "checkpoint_interval=2",
        "--set",
        "eval_interval=0",
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.Popen(
        args, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    metrics = out / "metrics.csv"
    deadline = time.time() + 60
    while time.time() < deadline:
        if (out / "checkpoints" / "last.pt").exists() and metrics.exists():
            if len(metrics.read_text().splitlines()) >= 6:
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_rows = len(read_metrics(metrics)["env_step"])
    assert 0 < killed_rows < 24, "kill the run mid-way"
    res = snrl("train", "--out", out, "--resume", "--quiet")
    assert res.returncode == 0, res.stderr
    steps = read_metrics(metrics)["env_step"]
    np.testing.assert_array_equal(steps, np.arange(1, 25) * 256)  # no duplicate, no torn row


def test_demo_writes_everything_and_can_run_again(tmp_path):
    out = tmp_path / "demo"
    args = (
        "demo",
        "--out",
        out,
        "--set",
        "total_steps=512",
        "--set",
        "eval_interval=256",
        "--set",
        "hidden_size=16",
        "--quiet",
    )
    res = snrl(*args)
    assert res.returncode == 0, res.stderr
    for f in (
        "config.json",
        "metrics.csv",
        "learning_curve.png",
        "eval.json",
        "demo.mp4",
        "demo.gif",
        "checkpoints/best.pt",
        "checkpoints/last.pt",
    ):
        assert (out / f).exists(), f
    for f in ("metrics.csv", "learning_curve.png", "demo.mp4", "demo.gif", "checkpoints/best.pt"):
        assert str(out / f) in res.stdout  # it says where everything is
    assert json.loads((out / "eval.json").read_text())["n_episodes"] == 20
    assert snrl(*args).returncode == 0  # over its own run directory
    other = tmp_path / "not_a_run"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert_user_error(snrl("demo", "--out", other), "not an snrl run directory")
    assert (other / "notes.txt").read_text() == "keep me"


def test_a_bad_flag_value_names_the_flag(tmp_path, capsys):
    """Flags are typed values merged with the file and --set; a value the config refuses
    names the flag it came from, and nothing is written."""
    res = snrl_inproc(capsys, "train", "--env-kwargs", "[1, 2]", "--out", tmp_path / "r")
    assert_user_error(res, "bad value '[1, 2]' for config key 'env_kwargs' in --env-kwargs")
    res = snrl_inproc(capsys, "train", "--hidden", "0", "--out", tmp_path / "r")
    assert_user_error(res, "hidden_size")
    assert not (tmp_path / "r").exists()
