"""snrl tune: the search space and its checks, a study through the CLI as a user runs it
(best.toml, report.md, the score against the trial's metrics.csv), two workers on one journal,
a SIGKILLed worker's trial, and --reproduce."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snrl.errors import UserError
from snrl.experiments.tune import (
    check_space,
    default_space,
    fail_stale_trials,
    load_space,
)
from snrl.zoo import parse

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import optuna  # noqa: E402  (the [tune] extra, in the test command)

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "n_envs=4", "--set", "n_steps=16", "--set", "hidden_size=8"]
TINY += ["--set", "eval_episodes=2"]
SPACE = "lr = {low = 1e-4, high = 1e-2, log = true}\nn_epochs = {choices = [1, 2]}\n"


def snrl_cmd(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "snrl.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---- the space -----------------------------------------------------------------------------


@pytest.mark.parametrize("algo,backbone", [("ppo", "lif"), ("ppo", "mlp"), ("dqn", "alif")])
def test_default_space_is_a_valid_space_file(algo, backbone):
    space = default_space(algo, backbone)
    text = "\n".join(f"{k} = {p.to_toml()}" for k, p in space.items())
    # written out as a space file, it is read back unchanged (and every bound is checked)
    assert check_space(tomllib.loads(text), algo, source="x") == space
    assert ("tau_m" in space) == (backbone != "mlp")


@pytest.mark.parametrize(
    "text,match",
    [
        ("lrr = {low = 1e-4, high = 1e-3}", r"unknown config key 'lrr'.*did you mean 'lr'"),
        ("lr = {low = 1e-3, high = 1e-4}", r"low = 0.001 is not below high = 0.0001"),
        ("ent_coef = {low = 0, high = 0.1, log = true}", r"log = true needs low > 0"),
        ("gamma = {low = 0.9, high = 1.5}", r"gamma in .*: .*gamma=1.5"),
        ("hidden_size = {low = 8, high = 16.5}", r"high = 16.5 \(hidden_size is an integer"),
        ("hidden_size = {choices = [32, 0]}", r"hidden_size"),
        ("hidden_size = {choices = []}", r"non-empty list"),
        ("encoder = {low = 1, high = 2}", r"a range needs a number key"),
        ("lr = {lo = 1e-4, high = 1e-3}", r"unknown field\(s\) lo"),
        ("seed = {choices = [1, 2]}", r"'seed' .* is set by snrl tune"),
        ("lr = {low = 1e-4, high = 1e-3, log = 1}", r"log = 1 \(true or false\)"),
    ],
)
def test_space_file_mistakes_are_refused(tmp_path, text, match):
    path = tmp_path / "space.toml"
    path.write_text(text + "\n")
    with pytest.raises(UserError, match=match):
        load_space(path, "ppo")


def test_space_fixed_values_and_choices_are_kept(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(SPACE + "n_envs = 4\n")
    space = load_space(path, "ppo")
    assert space["lr"].low == 1e-4 and space["lr"].high == 1e-2 and space["lr"].log
    assert space["n_epochs"].choices == (1, 2)
    assert space["n_envs"].fixed == 4 and space["n_envs"].low is None


# ---- a study, as a user runs it ------------------------------------------------------------


def test_tune_cli_writes_best_toml_report_and_reproduces(tmp_path):
    (tmp_path / "space.toml").write_text(SPACE)
    out = tmp_path / "study"
    r = snrl_cmd(
        "tune", "--env", "CartPole-v1", "--trials", "3", "--steps", "256", "--evals", "4",
        "--last-k", "2", "--space", "space.toml", *TINY, "--out", "study", "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / "study.log"))
    )
    study = optuna.load_study(study_name="ppo-lif-CartPole-v1", storage=storage)
    trials = study.get_trials()
    assert len(trials) == 3
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0", "1", "2"]
    for t in trials:  # the score is the mean of the last 2 evaluations of the trial's run
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        evals = [
            float(row["eval_return_mean"])
            for row in rows(out / "trials" / str(t.number) / "metrics.csv")
            if row["eval_return_mean"] not in ("", "nan")
        ]
        assert len(evals) == 4
        assert t.value == pytest.approx(sum(evals[-2:]) / 2)
    best = study.best_trial
    text = (out / "best.toml").read_text()
    (entry,) = parse("ppo", text).values()  # the zoo's own parser takes it
    assert (entry.env, entry.backbone) == ("CartPole-v1", "lif")
    assert dict(entry.values) == best.params
    assert f"# trial {best.number}, seed 0, 256 env steps: score {best.value:.6g}" in text
    report = (out / "report.md").read_text()
    assert f"| {best.number} | {best.value:.6g} |" in report
    assert "## Parameter importances" in report and "| lr |" in report
    assert (out / "history.png").stat().st_size > 1000
    assert f"best trial {best.number}" in r.stdout

    # --reproduce: the same learning columns, row for row
    r = snrl_cmd("tune", "--reproduce", "study", "--trial", str(best.number), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    one = ("tune", "--reproduce", "study", "--trial", str(best.number), "--seed", "0")
    r2 = snrl_cmd(*one, cwd=tmp_path)  # a trial of one seed has no seed to pick
    assert r2.returncode == 2 and "is one run (one seed): leave out --seed" in r2.stderr
    original = rows(out / "trials" / str(best.number) / "metrics.csv")
    again = rows(out / "reproduce" / str(best.number) / "metrics.csv")
    assert len(again) == len(original) > 0
    learning = [c for c in original[0] if "time" not in c and "per_s" not in c]
    assert {"env_step", "episode_return_mean", "eval_return_mean"} <= set(learning)
    for a, b in zip(original, again):
        assert {c: a[c] for c in learning} == {c: b[c] for c in learning}


def test_tune_cli_bad_space_file_exits_2_with_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "space.toml").write_text("lrr = {low = 1e-4, high = 1e-3}\n")
    r = snrl_cmd(
        "tune", "--env", "CartPole-v1", "--trials", "2", "--steps", "64", "--space",
        "space.toml", "--out", "o", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "unknown config key 'lrr'" in r.stderr and "did you mean 'lr'" in r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args,match",
    [
        (["--env", "CartPole-v1", "--steps", "64", "--out", "o"], "needs --trials"),
        (["--gpus-per-trial", "1", "--env", "E", "--trials", "1", "--steps", "1", "--out", "o"],
         "are for backend='ray'"),
        (["--env", "CartPole-v1", "--trials", "0", "--steps", "64", "--out", "o"], "trials=0"),
        (["--env", "CartPole-v1", "--trials", "1", "--steps", "64", "--seeds", "0",
          "--out", "o"], "seeds=0"),
        (["--reproduce", "nowhere", "--trial", "0"], "no trial 0 in nowhere"),
        (["--reproduce", "nowhere", "--trial", "0", "--seed", "3"], "no trial 0 in nowhere"),
        (["--reproduce", "nowhere"], "--reproduce needs --trial"),
        (["--env", "CartPole-v1", "--trials", "1", "--steps", "64", "--set", "hiden=3",
          "--out", "o"], "did you mean 'hidden"),
        (["--algo", "sac", "--env", "CartPole-v1", "--trials", "1", "--steps", "64",
          "--out", "o"], "unknown algorithm 'sac'"),
        (["--env", "NoSuchEnv-v0", "--trials", "1", "--steps", "64", "--out", "o"],
         "NoSuchEnv-v0"),
        (["--env", "CartPole-v1", "--trials", "1", "--steps", "64", "--set", "n_envs=4",
          "--space", "mb.toml", "--out", "o"], "n_minibatches = 8 of the space"),
    ],
)  # fmt: skip
def test_tune_cli_bad_input_exits_2_with_one_line(tmp_path, monkeypatch, capsys, args, match):
    from snrl.cli import main  # in-process (the subprocess case is the test above)

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mb.toml").write_text("n_minibatches = {choices = [2, 8]}\n")  # 8 > n_envs
    assert main(["tune", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert match in err
    assert not (tmp_path / "o").exists()  # nothing written


# ---- several workers, one storage -----------------------------------------------------------


def _study(out: Path) -> optuna.Study:
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / "study.log"))
    )
    return optuna.load_study(study_name="ppo-lif-CartPole-v1", storage=storage)


def _tune_args(trials: int, steps: int) -> list[str]:
    return [
        "tune", "--env", "CartPole-v1", "--trials", str(trials), "--steps", str(steps),
        "--space", "space.toml", *TINY, "--out", "study", "--quiet",
    ]  # fmt: skip


def test_workers_on_one_journal_run_each_trial_once(tmp_path):
    (tmp_path / "space.toml").write_text(SPACE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "snrl.cli", *_tune_args(5, 512)]
    procs = [  # two commands, one of them with two worker processes: three workers
        subprocess.Popen(c, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for c in (cmd, [*cmd, "--jobs", "2"])
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    trials = _study(tmp_path / "study").get_trials()
    numbers = [t.number for t in trials]
    assert numbers == list(range(len(trials)))
    # each worker checks the count before its next trial: at most one extra per other worker
    assert 5 <= len(trials) <= 7
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert all(t.state in finished for t in trials)
    # one run directory per trial, each trained once: its metrics.csv starts at the first update
    assert sorted(int(p.name) for p in (tmp_path / "study" / "trials").iterdir()) == numbers
    for t in trials:  # and each directory holds its own trial's parameters, trained once
        run = tmp_path / "study" / "trials" / str(t.number)
        cfg = json.loads((run / "config.json").read_text())
        assert (cfg["lr"], cfg["n_epochs"]) == (t.params["lr"], t.params["n_epochs"])
        steps = [int(r["env_step"]) for r in rows(run / "metrics.csv")]
        assert steps == list(range(64, 64 * len(steps) + 1, 64)) and steps[-1] <= 512
    # every trial names the worker that ran it; how the trials spread over the three workers
    # depends on start-up times (one may finish the study before another imports torch)
    workers = {t.user_attrs["worker"] for t in trials}
    assert 1 <= len(workers) <= 3 and len(trials) <= 5 + len(workers) - 1


def test_a_killed_workers_trial_is_failed_and_retried_by_the_other_worker(tmp_path):
    (tmp_path / "space.toml").write_text(SPACE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "snrl.cli", *_tune_args(4, 1024)]
    a, b = (
        subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for _ in range(2)
    )
    deadline = time.monotonic() + 300
    victim = None
    while victim is None:  # a trial of worker a, mid-training
        assert a.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
        if not (tmp_path / "study" / "study.log").is_file():
            continue
        for t in _study(tmp_path / "study").get_trials():
            metrics = tmp_path / "study" / "trials" / str(t.number) / "metrics.csv"
            if (
                t.state == optuna.trial.TrialState.RUNNING
                and t.user_attrs.get("worker", "").endswith(f":{a.pid}")
                and metrics.is_file()
                and len(rows(metrics)) >= 1
            ):
                victim = t.number
    a.send_signal(signal.SIGKILL)
    a.wait()
    _, err = b.communicate(timeout=600)
    assert b.returncode == 0, err
    trials = _study(tmp_path / "study").get_trials()
    assert [t.number for t in trials] == list(range(len(trials)))
    assert trials[victim].state == optuna.trial.TrialState.FAIL
    retry = [t for t in trials if t.user_attrs.get("retry_of") == victim]
    assert len(retry) == 1 and retry[0].params == trials[victim].params
    assert retry[0].user_attrs["worker"].endswith(f":{b.pid}")
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert sum(t.state in finished for t in trials) == 4  # nothing lost, nothing extra
    assert all(t.state in finished for t in trials if t.number != victim)


def test_only_dead_local_workers_trials_are_failed(tmp_path):
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "s.log"))
    )
    study = optuna.create_study(study_name="s", storage=storage)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid is free
    host = socket.gethostname()
    workers = [f"{host}:{dead.pid}", f"{host}:{os.getpid()}", f"elsewhere:{dead.pid}"]
    for w in workers:
        t = study.ask()
        t.suggest_float("x", 0, 1)
        t.set_user_attr("worker", w)
    assert fail_stale_trials(study) == [0]
    states = [t.state for t in study.get_trials()]
    running, fail, waiting = (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.FAIL,
                              optuna.trial.TrialState.WAITING)  # fmt: skip
    assert states == [fail, running, running, waiting]
    assert study.get_trials()[3].user_attrs["retry_of"] == 0
    retry = study.ask()  # the enqueued trial is the next one handed out, with the same x
    assert retry.number == 3
    assert math.isclose(retry.suggest_float("x", 0, 1), study.get_trials()[0].params["x"])


def test_median_pruner_stops_a_poor_trial_but_never_at_its_final_evaluation(tmp_path):
    from snrl.experiments.tune import tune

    out = tmp_path / "study"
    out.mkdir()
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / "study.log"))
    )
    study = optuna.create_study(
        study_name="ppo-lif-CartPole-v1", storage=storage, direction="maximize"
    )
    lr = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    for _ in range(2):  # two earlier trials far above anything CartPole scores
        study.add_trial(
            optuna.trial.create_trial(
                params={"lr": 1e-3},
                distributions={"lr": lr},
                value=1e9,
                intermediate_values={64: 1e9, 128: 1e9, 192: 1e9, 256: 1e9},
            )
        )
    kw = dict(out=out, space={"lr": {"low": 1e-4, "high": 1e-2, "log": True}}, n_evals=4)
    kw["config"] = {"n_envs": 4, "n_steps": 16, "hidden_size": 8, "eval_episodes": 2}
    tune("CartPole-v1", trials=3, steps=256, last_k=2, **kw)
    poor = _study(out).get_trials()[2]
    assert poor.state == optuna.trial.TrialState.PRUNED
    assert list(poor.intermediate_values) == [64]  # pruned at the first evaluation
    assert len(rows(out / "trials" / "2" / "metrics.csv")) == 1  # and its training stopped

    # a trial whose only evaluation is its last is scored, however poor
    tune("CartPole-v1", trials=4, steps=64, last_k=1, **{**kw, "n_evals": 1})
    last = _study(out).get_trials()[3]
    assert last.state == optuna.trial.TrialState.COMPLETE and last.value < 1e9


def test_ray_backend_runs_each_trial_once_on_one_journal(tmp_path):
    import ray

    from snrl.experiments.tune import tune

    kw = dict(out=tmp_path / "study", space={"lr": {"low": 1e-4, "high": 1e-2, "log": True}})
    kw["config"] = {"n_envs": 4, "n_steps": 16, "hidden_size": 8, "eval_episodes": 2}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        res = tune("CartPole-v1", trials=4, steps=64, jobs=2, backend="ray", **kw)
        with pytest.raises(UserError, match=r"gpus_per_trial=1 but the Ray cluster has 0 GPU"):
            tune("CartPole-v1", trials=5, steps=64, backend="ray", gpus_per_trial=1, **kw)
    finally:
        ray.shutdown()
    trials = _study(tmp_path / "study").get_trials()
    numbers = [t.number for t in trials]
    assert numbers == list(range(len(trials))) and 4 <= len(trials) <= 5
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert all(t.state in finished for t in trials)
    assert sorted(int(p.name) for p in (tmp_path / "study" / "trials").iterdir()) == numbers
    workers = {t.user_attrs["worker"] for t in trials}
    assert all(w.rsplit(":", 1)[1] != str(os.getpid()) for w in workers)  # Ray's processes
    assert res.best_value == max(t.value for t in trials if t.value is not None)


def test_a_worker_stops_after_three_failed_trials_in_a_row(tmp_path, monkeypatch):
    from snrl.experiments import tune as tune_module

    def broken(*args, **kwargs):
        raise RuntimeError("the simulator broke")

    monkeypatch.setattr(tune_module, "train_run", broken)
    with pytest.raises(UserError, match=r"3 trials in a row failed, the last with RuntimeError"):
        tune_module.tune("CartPole-v1", out=tmp_path / "s", trials=10, steps=64)
    trials = _study(tmp_path / "s").get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.FAIL] * 3
    assert trials[0].user_attrs["error"] == "RuntimeError: the simulator broke"


def test_snrl_tune_in_python_on_an_rdb_storage(tmp_path):
    import snrl

    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.logging.set_verbosity(optuna.logging.INFO)
    res = snrl.tune(
        "CartPole-v1",
        out=tmp_path / "s",
        trials=2,
        steps=128,
        storage=url,
        study="mine",
        space={"lr": {"low": 1e-4, "high": 1e-2, "log": True}, "n_envs": 4},
        config={"n_steps": 16, "hidden_size": 8, "eval_episodes": 2},
    )
    assert optuna.logging.get_verbosity() == optuna.logging.INFO  # the caller's, restored
    study = optuna.load_study(study_name="mine", storage=url)
    assert res.best_value == study.best_value and res.best_params == study.best_params
    assert res.n_complete + res.n_pruned == 2 and res.n_failed == 0
    assert not (tmp_path / "s" / "study.log").exists()  # the study is in the database
    (entry,) = parse("ppo", res.best_toml.read_text()).values()
    assert entry.values == {"n_envs": 4, **study.best_params}  # fixed values too
    cfg = snrl.load(tmp_path / "s" / "trials" / "0" / "checkpoints" / "last.pt").config
    assert (cfg.n_envs, cfg.total_steps, cfg.hidden_size, cfg.tuned) == (4, 128, 8, False)


def test_the_score_column_is_trial_accuracy_on_trial_tasks():
    from snrl.experiments.tune import _score_column

    assert _score_column({"eval_return_mean": 3.0, "eval_trial_accuracy": 0.75}) == (
        "eval_trial_accuracy"
    )
    assert _score_column({"eval_return_mean": 3.0, "eval_trial_accuracy": math.nan}) == (
        "eval_return_mean"
    )
    assert _score_column({"eval_return_mean": 3.0}) == "eval_return_mean"


def test_a_space_file_nested_too_deeply_is_one_user_error(tmp_path):
    """The space file is read by snrl.config.load_toml, as --config files are: nesting that
    would make the TOML parser recurse past its limit ends in one UserError."""
    from snrl.experiments.tune import load_space

    deep = tmp_path / "deep.toml"
    deep.write_text("lr = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UserError, match="space file .* nests more than"):
        load_space(deep, "ppo")


# ---- --baseline: the defaults as the study's first trial -----------------------------------


def test_baseline_trial_trains_the_defaults_and_the_outputs_compare_against_it(tmp_path):
    (tmp_path / "space.toml").write_text(SPACE + "eval_episodes = 2\n")
    tiny = ["--set", "n_envs=4", "--set", "n_steps=16", "--set", "hidden_size=8"]
    r = snrl_cmd(
        "tune", "--env", "CartPole-v1", "--trials", "3", "--steps", "128", "--evals", "2",
        "--last-k", "1", "--space", "space.toml", *tiny, "--baseline", "--out", "study",
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = tmp_path / "study"
    trials = _study(out).get_trials()
    base = trials[0]
    assert base.user_attrs["baseline"] is True and base.params == {}  # nothing sampled
    assert base.state == optuna.trial.TrialState.COMPLETE
    assert all(t.params.keys() == {"lr", "n_epochs"} for t in trials[1:])
    cfg = json.loads((out / "trials" / "0" / "config.json").read_text())
    defaults = __import__("snrl").PPOConfig()
    assert (cfg["lr"], cfg["n_epochs"]) == (defaults.lr, defaults.n_epochs)  # the defaults
    assert (cfg["eval_episodes"], cfg["n_envs"], cfg["tuned"]) == (2, 4, False)  # fixed values
    evals = [float(row["eval_return_mean"]) for row in rows(out / "trials/0/metrics.csv")]
    assert base.value == pytest.approx([e for e in evals if not math.isnan(e)][-1])
    best = max(trials[1:], key=lambda t: t.value)  # the baseline is never best.toml's entry
    text = (out / "best.toml").read_text()
    assert f"# trial {best.number}," in text
    assert f"the defaults (trial 0, nothing sampled) scored {base.value:.6g}" in text
    (entry,) = parse("ppo", text).values()
    assert dict(entry.values) == {"eval_episodes": 2, **best.params}
    assert f"the defaults {base.value:.6g}" in r.stdout
    assert "the defaults (nothing sampled)" in (out / "report.md").read_text()


@pytest.mark.parametrize("sampled, verdict", [(15.0, "+5 over them"), (5.0, "NOT above them")])
def test_best_toml_says_whether_the_best_trial_beat_the_defaults(tmp_path, sampled, verdict):
    from snrl.experiments.tune import write_outputs

    out = tmp_path / "study"
    out.mkdir()
    s = dict(
        env="CartPole-v1", algo="ppo", backbone="lif", study="s", storage=None, out=str(out),
        space=check_space({"lr": {"low": 1e-4, "high": 1e-2}}, "ppo", source="t"), seed=0,
        steps=64, last_k=1, n_evals=1,
    )  # fmt: skip
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(out / "study.log"))
    )
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    lr = optuna.distributions.FloatDistribution(1e-4, 1e-2)
    study.add_trial(optuna.trial.create_trial(value=10.0, user_attrs={"baseline": True}))
    study.add_trial(
        optuna.trial.create_trial(params={"lr": 3e-3}, distributions={"lr": lr}, value=sampled)
    )
    res = write_outputs(s)
    assert (res.best_trial, res.best_value, res.baseline_value) == (1, sampled, 10.0)
    text = (out / "best.toml").read_text()
    assert f"scored 10; the best trial {sampled:g}, {verdict}" in text
    assert (out / "report.md").read_text().count(verdict) == 1


def test_history_png_is_slide_sized_with_the_defaults_dashed(tmp_path):
    """history.png like learning_curve.png (issue 39): 1600 x 1000 px, 20 pt+ title naming the
    env and study, whole-number trial ticks, the best-so-far step and the defaults' line."""
    from types import SimpleNamespace

    from snrl.experiments.tune import _plot_history

    trials = [
        SimpleNamespace(number=0, value=0.5, user_attrs={"baseline": True}),
        SimpleNamespace(number=1, value=0.7, user_attrs={}),
        SimpleNamespace(number=2, value=None, user_attrs={}),  # failed: not drawn
        SimpleNamespace(number=3, value=0.6, user_attrs={}),
    ]
    path = tmp_path / "history.png"
    fig = _plot_history(trials, path, "eval_trial_accuracy", "snrl tune · PPO · lif · T · s")
    (ax,) = fig.axes
    fig.canvas.draw()
    assert fig.dpi == 100 and tuple(fig.get_size_inches()) == (16.0, 10.0)
    assert ax.title.get_text() == "snrl tune · PPO · lif · T · s"
    assert ax.title.get_fontsize() >= 20 and ax.xaxis.label.get_fontsize() >= 18
    assert min(t.get_fontsize() for t in ax.get_xticklabels()) >= 16
    ticks = [t for t in ax.get_xticks() if 0 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
    (best,) = [ln for ln in ax.lines if ln.get_label() == "best so far"]
    assert list(best.get_ydata()) == [0.5, 0.7, 0.7]
    (base,) = [ln for ln in ax.lines if ln.get_label() == "the defaults"]
    assert base.get_linestyle() == "--" and list(base.get_ydata()) == [0.5, 0.5]
    import imageio.v3 as iio

    assert iio.imread(path).shape[:2] == (1000, 1600)


def test_seeds_per_trial_score_the_mean_over_seeds_and_reproduce_one_seed(tmp_path):
    """--seeds 2: each trial (the baseline too) trains trials/<n>.seed<S> for S = seed,
    seed + 1; its score is the mean over the seeds of each one's last evaluation; the pruner
    sees seed 1's evaluations after seed 0's steps; --reproduce --seed re-runs one of them."""
    (tmp_path / "space.toml").write_text(SPACE + "eval_episodes = 2\n")
    tiny = ["--set", "n_envs=4", "--set", "n_steps=16", "--set", "hidden_size=8"]
    r = snrl_cmd(
        "tune", "--env", "CartPole-v1", "--trials", "2", "--steps", "128", "--evals", "2",
        "--last-k", "1", "--space", "space.toml", *tiny, "--seed", "5", "--seeds", "2",
        "--baseline", "--out", "study", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = tmp_path / "study"
    assert sorted(p.name for p in (out / "trials").iterdir()) == [
        "0.seed5", "0.seed6", "1.seed5", "1.seed6",
    ]  # fmt: skip
    for t in _study(out).get_trials():
        assert t.state == optuna.trial.TrialState.COMPLETE
        last = []
        for seed in (5, 6):
            run = out / "trials" / f"{t.number}.seed{seed}"
            assert json.loads((run / "config.json").read_text())["seed"] == seed
            evals = [float(row["eval_return_mean"]) for row in rows(run / "metrics.csv")]
            last.append([e for e in evals if not math.isnan(e)][-1])
        assert t.user_attrs["seed_scores"] == pytest.approx(last)
        assert t.value == pytest.approx(sum(last) / 2)
        assert sorted(t.intermediate_values) == [64, 128, 192, 256]
        assert t.intermediate_values[192] == pytest.approx(  # seed 6's first evaluation
            [
                float(row["eval_return_mean"])
                for row in rows(out / "trials" / f"{t.number}.seed6" / "metrics.csv")
                if row["eval_return_mean"] not in ("", "nan")
            ][0]
        )
    text = (out / "best.toml").read_text()
    assert "# trial 1, seeds 5-6, 128 env steps: score" in text and "; per seed " in text
    assert "averaged over the seeds" in (out / "report.md").read_text()

    r = snrl_cmd("tune", "--reproduce", "study", "--trial", "1", "--seed", "6", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    original = rows(out / "trials" / "1.seed6" / "metrics.csv")
    again = rows(out / "reproduce" / "1.seed6" / "metrics.csv")
    learning = [c for c in original[0] if "time" not in c and "per_s" not in c]
    assert [[row[c] for c in learning] for row in again] == [
        [row[c] for c in learning] for row in original
    ]
    r = snrl_cmd("tune", "--reproduce", "study", "--trial", "1", "--seed", "9", cwd=tmp_path)
    assert r.returncode == 2 and "has no seed 9 (its seeds: 5, 6)" in r.stderr
    assert not (out / "reproduce" / "1.seed9").exists()
