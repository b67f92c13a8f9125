"""snrl compare: layout, skip/resume, failure isolation, bad input refused up front."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from snrl.errors import UserError
from snrl.experiments import CompareSpec, compare, plan_runs
from snrl.experiments.cli import parse_grid
from snrl.experiments.runner import train_run
from snrl.training.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
# plumbing-sized runs: 2 updates of 4 envs x 32 steps, one epoch, tiny MLP
TINY = dict(
    hidden_size=8,
    n_envs=4,
    n_steps=32,
    n_epochs=1,
    eval_interval=0,
    eval_episodes=1,
    checkpoint_interval=1,
)
TINY_SETS = [f"{k}={v}" for k, v in TINY.items()]


def tiny_mlp_compare(out: Path, *, seeds: int, steps: int) -> list[str]:
    """The command line of a one-worker comparison of tiny MLP runs (a subprocess's argv)."""
    args = [sys.executable, "-m", "snrl.cli", "compare", "--env", "CartPole-v1"]
    args += ["--backbones", "mlp", "--seeds", str(seeds), "--steps", str(steps), "--workers", "1"]
    args += ["--eval-episodes", "2", "--out", str(out), "--quiet"]
    for s in TINY_SETS:
        args += ["--set", s]
    return args


def _spec(out: Path, **kw) -> CompareSpec:
    kw.setdefault("env", "CartPole-v1")
    kw.setdefault("backbones", ["mlp"])
    kw.setdefault("overrides", TINY)
    return CompareSpec(out=out, **kw)


def _status(out: Path, name: str) -> dict:
    return json.loads((out / "status" / f"{name}.json").read_text())


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_compare_layout_summary_and_skip(tmp_path, capsys):
    out = tmp_path / "cmp"
    spec = _spec(
        out,
        seeds=2,
        steps=256,
        grid={"hidden_size": [4, 8]},
        eval_episodes=2,
        workers=2,
        threshold=15.0,
    )
    res = compare(spec)
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
    res2 = compare(spec)
    assert "4 already recorded, 0 to run" in capsys.readouterr().out
    assert {n: _status(out, n) for n in names} == before
    assert {n: (out / "runs" / n / "metrics.csv").stat().st_mtime_ns for n in names} == mtimes
    assert len(_csv_rows(out / "runs.csv")) == 4
    assert len(_csv_rows(out / "summary.csv")) == 2
    assert res2.summary[0]["eval_mean"] == res.summary[0]["eval_mean"]


def test_killed_run_is_resumed_from_last_checkpoint(tmp_path):
    out = tmp_path / "cmp"
    cmp_spec = _spec(out, seeds=1, steps=512, eval_episodes=2, workers=1)
    (spec,) = plan_runs(cmp_spec)
    # a run killed after 2 of its 4 updates: last.pt at 256 env steps, metrics up to there
    from snrl.agents import ALGOS
    from snrl.config import config_from_dict
    from snrl.experiments.store import write_manifest

    write_manifest(out, cmp_spec.to_dict())  # what compare writes before its first run
    cfg = config_from_dict(ALGOS["ppo"].Config, spec.config)
    train_run(spec.run_dir, algo="ppo", config=cfg, total_steps=256, progress=False)
    with open(Path(spec.run_dir) / "metrics.csv", "a") as f:
        f.write("384,0.1,")  # a torn row from the kill
    res = compare(cmp_spec)
    (rec,) = res.runs
    assert rec["status"] == "done" and rec["resumed"] is True
    assert rec["env_steps"] == 512
    steps = read_metrics(Path(spec.run_dir) / "metrics.csv")["env_step"]
    np.testing.assert_array_equal(steps, [128, 256, 384, 512])  # no duplicate, no torn row


def test_failures_are_recorded_and_do_not_stop_other_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # the spawned workers import tests.experiments
    out = tmp_path / "cmp"
    env = "tests.experiments.crash_env:CrashOnSeed"
    res = compare(_spec(out, env=env, seeds=[0, 20, 30], steps=256, eval_episodes=2, workers=2))
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


def test_spec_refuses_bad_fields(tmp_path):
    base = dict(env="CartPole-v1", out=tmp_path / "x", seeds=1, steps=64)
    bad = [
        (dict(backbones=["lif", "lifx"]), "unknown backbone 'lifx'"),
        (dict(backbones=["mlp", "mlp"]), "listed twice"),
        (dict(backbones="lif"), "pass a list"),
        (dict(grid={"tau": [1.0]}), "unknown grid key 'tau'"),
        (dict(grid={"tau_m": []}), "has no values"),
        (dict(grid={"hh_init": "zeros"}), "must be a list"),
        (dict(overrides={"seed": 3}), r"use seeds \(--seeds\)"),
        (dict(overrides={"lr_x": 3}), "unknown overrides key 'lr_x'"),
        (dict(algo="sac"), "unknown algorithm"),
        (dict(threshold=math.nan), "threshold=nan"),
        (dict(threshold=math.inf), "must be a finite return"),
        (dict(seeds=0), "at least one seed"),
        (dict(seeds=[1, 1]), "repeated seeds"),
        (dict(seeds=[-1]), "integer >= 0"),
        (dict(steps=0), "steps=0"),
        (dict(steps=1.5), "steps=1.5"),
        (dict(workers=0), "workers=0"),
        (dict(backend="dask"), "unknown backend"),
        (dict(address="h:1"), "Ray backend"),
        (dict(eval_episodes=0), "eval_episodes=0"),
        (dict(out=""), "out=''"),
        (dict(env=""), "env=''"),
    ]
    for extra, fragment in bad:
        with pytest.raises(UserError, match=fragment):
            CompareSpec(**{**base, **extra})
    spec = CompareSpec(**base, backbones=("lif",), grid={"tau_m": [0.01]})
    assert spec.seeds == (0,) and spec.grid == {"tau_m": (0.01,)}
    assert isinstance(spec.out, Path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.steps = 3  # type: ignore[misc]


def test_cli_strings_become_typed_values(tmp_path):
    from snrl.experiments import spec_from_strings

    toml = tmp_path / "c.toml"
    toml.write_text("hidden_size = 16\nlr = 0.001\nseed = 7\n")
    spec = spec_from_strings(
        "CartPole-v1",
        out=tmp_path / "x",
        sets=["lr=3e-4", "target_kl=none"],
        grid=parse_grid(["force_dale_law=on,off", "n_envs=3", "n_minibatches=3"]),
        config_file=toml,
        seeds=2,
    )
    # the file, then --set; the file's seed is the comparison's (seeds), not an override
    assert spec.overrides == {"hidden_size": 16, "lr": 3e-4, "target_kl": None}
    # n_envs=3 and n_minibatches=3 are each invalid with the other's default, valid together
    assert spec.grid == {"force_dale_law": (True, False), "n_envs": (3,), "n_minibatches": (3,)}
    assert [r.config["n_envs"] for r in plan_runs(spec)] == [3] * 6  # lif x 2 Dale x 2, mlp x 2
    with pytest.raises(UserError, match="has no values"):
        parse_grid(["tau_m="])
    with pytest.raises(UserError, match="given twice"):
        parse_grid(["tau_m=1", "tau_m=2"])


def test_a_grid_crosses_time_constant_ranges_with_numbers(tmp_path):
    from snrl.experiments import spec_from_strings

    grid = parse_grid(["tau_a=[0.1,2], 1.5", "tau_m=0.01,0.02"])
    assert grid == {"tau_a": ["[0.1,2]", "1.5"], "tau_m": ["0.01", "0.02"]}
    spec = spec_from_strings(
        "CartPole-v1", out=tmp_path / "x", backbones=["alif"], seeds=1, grid=grid
    )
    assert spec.grid["tau_a"] == ((0.1, 2.0), 1.5)
    names = [r.name for r in plan_runs(spec)]
    assert "alif__tau_a=0.1-2__tau_m=0.01__seed0" in names and len(names) == 4
    with pytest.raises(UserError, match="tau_a"):  # a range of three is no range
        spec_from_strings("CartPole-v1", out=tmp_path / "y", grid=parse_grid(["tau_a=[0.1,1,2]"]))


def test_plan_builds_every_config_and_checks_the_env_up_front(tmp_path):
    base = dict(out=tmp_path / "x", seeds=1, steps=64)
    # spiking-only grid keys do not repeat an ANN backbone; values are typed
    specs = plan_runs(
        _spec(backbones=["lif", "mlp"], grid={"force_dale_law": [True, False]}, **base)
    )
    assert [s.name for s in specs] == [
        "lif__force_dale_law=true__seed0",
        "lif__force_dale_law=false__seed0",
        "mlp__seed0",
    ]
    assert specs[1].config["force_dale_law"] is False and specs[0].config["hidden_size"] == 8
    # a value the config class refuses, named with its run
    with pytest.raises(UserError, match=r"run lif tau_m=-1 seed 0: .*tau_m"):
        plan_runs(_spec(backbones=["lif"], grid={"tau_m": [0.01, -1.0]}, **base))
    with pytest.raises(UserError, match="bad value 'many'"):
        plan_runs(_spec(overrides={"hidden_size": "many"}, **base))
    with pytest.raises(UserError, match="unknown env id 'CartPole-v9'"):
        plan_runs(_spec(env="CartPole-v9", **base))
    with pytest.raises(UserError, match="DQN needs a Discrete action space"):
        plan_runs(_spec(env="Pendulum-v1", algo="dqn", overrides={}, **base))
    assert not (tmp_path / "x").exists()


def test_existing_run_with_another_config_is_refused(tmp_path):
    spec = _spec(tmp_path / "c", seeds=1, steps=128)
    (run,) = plan_runs(spec)
    Path(run.run_dir).mkdir(parents=True)
    Path(run.run_dir, "config.json").write_text(json.dumps({**run.config, "lr": 0.5}))
    (tmp_path / "c" / "compare.json").write_text(json.dumps({"kind": "snrl compare"}))
    with pytest.raises(UserError, match=r"different config \(lr\)"):
        compare(spec)


def test_compare_refuses_a_non_empty_directory_it_did_not_write(tmp_path):
    out = tmp_path / "project"
    out.mkdir()
    (out / "README.md").write_text("mine")
    (out / "src").mkdir()
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UserError, match=r"not an snrl compare directory \(it holds README.md, src"):
        compare(_spec(out, seeds=1, steps=128))
    assert sorted(p.name for p in out.iterdir()) == before  # not even a lock file
    # a compare.json that is not ours does not make it one
    (out / "compare.json").write_text('{"name": "my own file"}')
    with pytest.raises(UserError, match="not an snrl compare directory"):
        compare(_spec(out, seeds=1, steps=128))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UserError, match="is not a directory"):
        compare(_spec(f, seeds=1, steps=128))


def test_a_spec_from_strings_runs_and_a_bare_env_id_is_refused(tmp_path):
    from snrl.experiments import spec_from_strings

    out = tmp_path / "old"
    with pytest.raises(TypeError, match=r"compare\(\) takes a CompareSpec, got str"):
        compare("CartPole-v1")
    spec = spec_from_strings(
        "CartPole-v1",
        out=out,
        backbones=["lif"],
        seeds=1,
        steps=128,
        sets=TINY_SETS,
        grid={"hidden_size": ["4"]},
        eval_episodes=1,
        workers=1,
    )
    res = compare(spec, verbose=False)
    assert [r["status"] for r in res.runs] == ["done"]
    cfg = json.loads((out / "runs" / "lif__hidden_size=4__seed0" / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["n_steps"]) == (4, 32)
    manifest = json.loads((out / "compare.json").read_text())
    assert manifest["kind"] == "snrl compare" and manifest["grid"] == {"hidden_size": [4]}
    assert manifest["overrides"]["n_envs"] == 4
    # the spike rate has one name in every output: spike_rate_<layer>
    (rates,) = [r["spike_rates"] for r in res.runs]
    assert rates and all(0.0 <= v <= 1.0 for v in rates.values())
    row = _csv_rows(out / "summary.csv")[0]
    assert [c for c in row if "rate" in c] == [f"spike_rate_{k}" for k in rates]
    for layer, rate in rates.items():
        assert float(row[f"spike_rate_{layer}"]) == pytest.approx(rate)  # one seed: its rate
        for f in ("summary.md", "report.md"):
            text = (out / f).read_text()
            assert f"| spike_rate_{layer} |" in text and "| rate_" not in text


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
        (["--workers", "0"], "workers=0"),
        (["--threshold", "nan"], "threshold=nan"),
        (["--threshold", "inf"], "must be a finite return"),
        (["--set", "seed=3"], "use seeds (--seeds)"),
        (["--set", "lr=fast"], "bad value 'fast' for config key 'lr'"),
        (["--grid", "tau_m=0.01,x"], "bad value 'x' for config key 'tau_m'"),
        (["--seeds", "0"], "at least one seed"),
        (["--env", "CartPole-v9"], "unknown env id 'CartPole-v9'"),
        (["--env", "Pendulum-v1", "--algo", "dqn"], "DQN needs a Discrete action space"),
        (["--config", "missing.toml"], "config file missing.toml does not exist"),
        (["--eval-seed", "-1"], "eval_seed=-1"),
        (["--eval-episodes", "0"], "eval_episodes=0"),
        (["--backbones", ","], "no backbones given"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, monkeypatch, extra, fragment):
    import snrl.experiments.backends as backends

    monkeypatch.setattr(backends, "import_ray", lambda: None)  # the address check needs no Ray
    out = tmp_path / "cmp"
    rc, cap = _cli(capsys, "compare", "--env", "CartPole-v1", "--steps", "64", "--out", out, *extra)
    assert rc == 2
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], cap.err
    assert not out.exists()  # refused before anything was written


def test_cli_refuses_a_non_empty_non_compare_dir_as_a_user_runs_it(tmp_path):
    out = tmp_path / "project"
    out.mkdir()
    (out / "data.txt").write_text("precious")
    args = [sys.executable, "-m", "snrl.cli", "compare", "--env", "CartPole-v1"]
    args += ["--backbones", "mlp", "--seeds", "1", "--steps", "64", "--out", str(out)]
    res = subprocess.run(args, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: --out {out} is not empty and is not an snrl compare directory (it holds "
        "data.txt; no compare.json written by snrl compare) (choose a new or empty --out)"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["data.txt"]
    assert (out / "data.txt").read_text() == "precious"


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

    cfg = PPO.Config(backbone="lif", **TINY)
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
    args = tiny_mlp_compare(out, seeds=3, steps=1024)
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


def test_docs_python_example_builds_the_spec_it_describes():
    text = (ROOT / "docs" / "compare.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {"__name__": "docs_example"}  # not __main__: build the spec, run nothing
    exec(compile(code, "docs/compare.md", "exec"), scope)
    spec = scope["spec"]
    assert isinstance(spec, CompareSpec)
    assert (spec.env, spec.seeds, spec.overrides) == (
        "CartPole-v1",
        (0, 1, 2, 3, 4),
        {"hidden_size": 64},
    )
    names = [r.name for r in plan_runs(spec)]
    assert len(names) == 15 and "lif__force_dale_law=true__seed0" in names
