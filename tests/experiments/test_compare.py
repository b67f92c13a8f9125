"""snrl.experiments.comparison: layout, skip/resume, failure isolation, bad input."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from snrl.experiments import compare, plan_runs
from snrl.experiments.comparison import parse_grid
from snrl.experiments.runner import train_run
from snrl.training.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
# plumbing-sized runs: 2 updates of 4 envs x 32 steps, one epoch, tiny MLP
TINY = [
    "hidden_size=8",
    "n_envs=4",
    "n_steps=32",
    "n_epochs=1",
    "eval_interval=0",
    "eval_episodes=1",
    "checkpoint_interval=1",
]


def _status(out: Path, name: str) -> dict:
    return json.loads((out / "status" / f"{name}.json").read_text())


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_compare_layout_summary_and_skip(tmp_path, capsys):
    out = tmp_path / "cmp"
    kw = dict(
        out=out,
        backbones=["mlp"],
        seeds=2,
        steps=256,
        sets=TINY,
        grid={"hidden_size": [4, 8]},
        eval_episodes=2,
        workers=2,
        threshold=15.0,
    )
    res = compare("CartPole-v1", **kw)
    names = [
        "mlp__hidden_size=4__seed0",
        "mlp__hidden_size=4__seed1",
        "mlp__hidden_size=8__seed0",
        "mlp__hidden_size=8__seed1",
    ]
    assert [r["name"] for r in res.runs] == names
    assert all(r["status"] == "done" for r in res.runs)
    for name in names:  # an ordinary run directory
        run = out / "runs" / name
        for f in ("config.json", "metrics.csv", "learning_curve.png"):
            assert (run / f).is_file(), f
        assert (run / "checkpoints" / "last.pt").is_file()
        assert (run / "checkpoints" / "best.pt").is_file()
        cfg = json.loads((run / "config.json").read_text())
        assert cfg["algo"] == "ppo" and cfg["backbone"] == "mlp" and cfg["total_steps"] == 256
        assert cfg["hidden_size"] == int(name.split("=")[1].split("__")[0])
        np.testing.assert_array_equal(read_metrics(run / "metrics.csv")["env_step"], [128, 256])
    # snrl eval works on any run of the comparison
    from snrl.cli import main

    capsys.readouterr()
    assert main(["eval", str(out / "runs" / names[0]), "--episodes", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["n_episodes"] == 2
    for f in ("curves.png", "curves.svg", "summary.csv", "summary.md", "report.md", "runs.csv"):
        assert (out / f).is_file(), f
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = _csv_rows(out / "summary.csv")
    assert [s["group"] for s in summary] == ["mlp hidden_size=4", "mlp hidden_size=8"]
    for s, row in zip(summary, res.summary):
        seeds = [r for r in res.runs if r["group"] == s["group"]]
        evals = [r["eval_mean"] for r in seeds]
        assert float(s["eval_mean"]) == pytest.approx(np.mean(evals))
        assert float(s["eval_ci_low"]) <= float(s["eval_mean"]) <= float(s["eval_ci_high"])
        assert int(s["n_done"]) == 2
        # MACs per env step: 4 obs -> H -> 2 logits
        h = int(s["group"].split("=")[1])
        assert float(s["macs_per_step"]) == 4 * h + h * 2
        assert row["params"] == seeds[0]["params"]
    # threshold 15: the median / IQR of the first env step reaching it
    reach = []
    for name in names[:2]:
        m = read_metrics(out / "runs" / name / "metrics.csv")
        hit = np.flatnonzero(m["episode_return_mean"] >= 15.0)
        reach.append(m["env_step"][hit[0]] if hit.size else np.inf)
    med = float(summary[0]["steps_to_threshold_median"])
    assert med == pytest.approx(np.median(reach)) if np.isfinite(reach).all() else True
    assert int(summary[0]["n_reached"]) == int(np.isfinite(reach).sum())
    report = (out / "report.md").read_text()
    assert "![learning curves](curves.png)" in report and "| mlp hidden_size=4 |" in report
    assert "Mann-Whitney" in (out / "summary.md").read_text()
    pw = _csv_rows(out / "pairwise.csv")
    assert len(pw) == 1 and 0.0 < float(pw[0]["p_value"]) <= 1.0

    # re-run: nothing is trained again, the outputs are rebuilt without duplicate rows
    before = {n: _status(out, n) for n in names}
    mtimes = {n: (out / "runs" / n / "metrics.csv").stat().st_mtime_ns for n in names}
    capsys.readouterr()
    res2 = compare("CartPole-v1", **kw)
    assert "4 already recorded, 0 to run" in capsys.readouterr().out
    assert {n: _status(out, n) for n in names} == before
    assert {n: (out / "runs" / n / "metrics.csv").stat().st_mtime_ns for n in names} == mtimes
    assert len(_csv_rows(out / "runs.csv")) == 4
    assert len(_csv_rows(out / "summary.csv")) == 2
    assert res2.summary[0]["eval_mean"] == res.summary[0]["eval_mean"]


def test_killed_run_is_resumed_from_last_checkpoint(tmp_path):
    out = tmp_path / "cmp"
    kw = dict(out=out, backbones=["mlp"], seeds=1, steps=512, sets=TINY, eval_episodes=2)
    (spec,) = plan_runs("CartPole-v1", **kw)
    # a run killed after 2 of its 4 updates: last.pt at 256 env steps, metrics up to there
    from snrl.agents import ALGOS
    from snrl.config import config_from_dict

    cfg = config_from_dict(ALGOS["ppo"].Config, spec.config)
    train_run(spec.run_dir, algo="ppo", config=cfg, total_steps=256, progress=False)
    with open(Path(spec.run_dir) / "metrics.csv", "a") as f:
        f.write("384,0.1,")  # a torn row from the kill
    res = compare("CartPole-v1", workers=1, **kw)
    (rec,) = res.runs
    assert rec["status"] == "done" and rec["resumed"] is True
    assert rec["env_steps"] == 512
    steps = read_metrics(Path(spec.run_dir) / "metrics.csv")["env_step"]
    np.testing.assert_array_equal(steps, [128, 256, 384, 512])  # no duplicate, no torn row


def test_failures_are_recorded_and_do_not_stop_other_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # the spawned workers import tests.experiments
    out = tmp_path / "cmp"
    env = "tests.experiments.crash_env:CrashOnSeed"
    kw = dict(out=out, backbones=["mlp"], seeds=[0, 20, 30], steps=256, sets=TINY)
    res = compare(env, eval_episodes=2, workers=2, **kw)
    status = {r["seed"]: r for r in res.runs}
    assert status[0]["status"] == "done"
    assert status[20]["status"] == "failed" and "boom at seed 20" in status[20]["error"]
    assert status[30]["status"] == "failed" and "worker process died" in status[30]["error"]
    assert _status(out, "mlp__seed20")["status"] == "failed"
    report = (out / "report.md").read_text()
    assert "boom at seed 20" in report and "worker process died" in report
    (row,) = _csv_rows(out / "summary.csv")
    assert (row["n_done"], row["n_failed"]) == ("1", "2")
    assert float(row["eval_mean"]) == pytest.approx(status[0]["eval_mean"])


def test_bad_requests_raise_user_errors(tmp_path):
    from snrl.errors import UserError

    base = dict(out=tmp_path / "x", seeds=1, steps=64)
    with pytest.raises(UserError, match="unknown backbone 'lifx'"):
        plan_runs("CartPole-v1", backbones=["lif", "lifx"], **base)
    with pytest.raises(UserError, match="unknown --grid key 'tau'"):
        plan_runs("CartPole-v1", grid={"tau": ["1"]}, **base)
    with pytest.raises(UserError, match="has no values"):
        plan_runs("CartPole-v1", grid={"tau_m": []}, **base)
    with pytest.raises(UserError, match="has no values"):
        parse_grid(["tau_m="])
    with pytest.raises(UserError, match="use --seeds"):
        plan_runs("CartPole-v1", sets=["seed=3"], **base)
    with pytest.raises(UserError, match="unknown algorithm"):
        plan_runs("CartPole-v1", algo="a2c", **base)
    # spiking-only grid keys do not repeat an ANN backbone
    specs = plan_runs(
        "CartPole-v1", backbones=["lif", "mlp"], grid={"force_dale_law": ["on", "off"]}, **base
    )
    assert [s.name for s in specs] == [
        "lif__force_dale_law=true__seed0",
        "lif__force_dale_law=false__seed0",
        "mlp__seed0",
    ]
    # an existing run with another config is not silently reused
    compare_kw = dict(backbones=["mlp"], seeds=1, steps=128, sets=TINY, out=tmp_path / "c")
    (spec,) = plan_runs("CartPole-v1", **compare_kw)
    Path(spec.run_dir).mkdir(parents=True)
    Path(spec.run_dir, "config.json").write_text(json.dumps({**spec.config, "lr": 0.5}))
    with pytest.raises(UserError, match=r"different config \(lr\)"):
        compare("CartPole-v1", **compare_kw)


def _cli(capsys, *args):
    from snrl.cli import main

    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--backbones", "lif,foo"], "unknown backbone 'foo'"),
        (["--grid", "bogus=1,2"], "unknown --grid key 'bogus'"),
        (["--grid", "tau_m="], "--grid tau_m has no values"),
        (["--backend", "ray", "--address", "127.0.0.1:1"], "cannot reach the Ray cluster"),
        (["--workers", "0"], "--workers 0"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, monkeypatch, extra, fragment):
    import snrl.experiments.comparison as cmp

    monkeypatch.setattr(cmp, "_import_ray", lambda: None)  # the address check needs no Ray
    rc, cap = _cli(
        capsys, "compare", "--env", "CartPole-v1", "--steps", "64", "--out", tmp_path, *extra
    )
    assert rc == 2
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], cap.err


def test_cli_ray_not_installed_says_how_to_install(tmp_path, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    rc, cap = _cli(capsys, "compare", "--env", "CartPole-v1", "--backend", "ray", "--out", tmp_path)
    assert rc == 2
    assert "pip install 'snrl[ray]'" in cap.err and len(cap.err.strip().splitlines()) == 1
    assert not any((tmp_path / "runs").glob("*"))


def test_cli_plot_writes_history_figure(tmp_path, capsys):
    run = tmp_path / "run"
    from snrl.agents import PPO

    cfg = PPO.Config(backbone="lif", **{k: int(v) for k, v in (s.split("=") for s in TINY)})
    train_run(run, algo="ppo", config=cfg, total_steps=256, progress=False)
    rc, cap = _cli(capsys, "plot", run)
    assert rc == 0, cap.err
    png = run / "history.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, cap = _cli(capsys, "plot", run, "--out", tmp_path / "h.svg")
    assert rc == 0 and (tmp_path / "h.svg").read_text().lstrip().startswith("<?xml")
    rc, cap = _cli(capsys, "plot", run, "--out", tmp_path / "h.txt")
    assert rc == 2 and "unknown extension" in cap.err
    rc, cap = _cli(capsys, "plot", tmp_path / "nope")
    assert rc == 2 and "does not exist" in cap.err


@pytest.mark.slow
def test_sigkill_compare_then_rerun_finishes_without_redoing(tmp_path):
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "snrl.cli", "compare", "--env", "CartPole-v1"]
    args += ["--backbones", "mlp", "--seeds", "3", "--steps", "1024", "--workers", "1"]
    args += ["--eval-episodes", "2", "--out", str(out), "--quiet"]
    for s in TINY:
        args += ["--set", s]
    proc = subprocess.Popen(args, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "status" / "mlp__seed0.json").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # into the second run
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def snapshot():
        return {p: p.stat().st_size for p in sorted((out / "runs").glob("*/metrics.csv"))}

    seen = snapshot()
    time.sleep(2.0)
    assert snapshot() == seen, "a worker outlived the killed compare process"
    first = (out / "status" / "mlp__seed0.json").read_text()
    assert not (out / "status" / "mlp__seed2.json").exists(), "kill the comparison mid-way"
    res = subprocess.run(args, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (out / "status" / "mlp__seed0.json").read_text() == first  # not redone
    rows = _csv_rows(out / "runs.csv")
    assert [r["name"] for r in rows] == ["mlp__seed0", "mlp__seed1", "mlp__seed2"]
    assert all(r["status"] == "done" for r in rows)
    for r in rows:
        steps = read_metrics(out / "runs" / r["name"] / "metrics.csv")["env_step"]
        np.testing.assert_array_equal(steps, np.arange(1, 9) * 128)
