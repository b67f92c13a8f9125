"""`snrl train` and `snrl eval` of a tiny NeuroGym run, as a user calls them."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("neurogym")

from snrl.cli import main  # noqa: E402
from snrl.training.metrics import read_metrics  # noqa: E402
from snrl.training.rundir import read_manifest  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_train_and_eval_a_decision_task(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--env",
            "PerceptualDecisionMaking-v0",
            "--hidden",
            "16",
            "--steps",
            "512",
            "--n-envs",
            "2",
            "--set",
            "n_steps=64",
            "--set",
            "eval_episodes=2",
            "--set",
            "eval_interval=256",
            "--set",
            "max_episode_steps=88",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    m = read_metrics(out / "metrics.csv")
    for col in ("trials", "trial_accuracy", "eval_trial_accuracy"):
        assert col in m
    assert len(m["env_step"]) == 4
    # Trials of this task last 22 steps (the decision period is one step), the first of an
    # episode 21 (NeuroGym's reset takes a step). Per env 256 steps = episodes of 88, 88, 80
    # steps holding 4 + 4 + 3 whole trials; two envs: 22.
    assert m["trials"].sum() == 22
    acc = m["trial_accuracy"][np.isfinite(m["trial_accuracy"])]
    assert np.all((acc >= 0) & (acc <= 1))
    evaluated = np.isfinite(m["eval_trial_accuracy"])
    assert evaluated.tolist() == [False, True, False, True]
    assert json.loads((out / "config.json").read_text())["max_episode_steps"] == 88
    capsys.readouterr()

    assert main(["eval", str(out), "--episodes", "6", "--seed", "1"]) == 0
    printed = capsys.readouterr().out.strip()
    res = json.loads(printed)  # one JSON object
    assert res["n_episodes"] == 6 and len(res["returns"]) == 6
    assert res["n_trials"] == 6 * 4  # 88 steps: 21 + 22 + 22 + 22 (+ one step of a cut trial)
    assert 0 <= res["accuracy"] <= 1
    # the cue was read from NeuroGym's own env (null, NaN, if it were not)
    assert 0 <= res["fixation_breaks"] <= 1
    assert res["accuracy_fixation_held"] <= res["accuracy"]
    assert set(res["accuracy_by_condition"]) == {"coh", "ground_truth"}
    assert sum(v["n"] for v in res["accuracy_by_condition"]["coh"].values()) == res["n_trials"]
    psy = res["psychometric"]
    assert {"points", "fit", "right_action", "left_action"} <= set(psy)
    assert sum(p["n"] + p["n_no_response"] for p in psy["points"]) == res["n_trials"]
    assert res["psychometric_png"] == str(out / "psychometric.png")
    assert (out / "psychometric.png").read_bytes()[:4] == b"\x89PNG"
    assert "psychometric.png" in read_manifest(out)


def test_eval_of_a_task_without_coherences_has_accuracy_but_no_curve(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--env", "GoNogo-v0", "--hidden", "8", "--steps", "64", "--n-envs", "1"]
    args += ["--set", "n_steps=64", "--set", "eval_episodes=1", "--set", "max_episode_steps=30"]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_trials"] >= 2 and "psychometric" not in res
    assert not (out / "psychometric.png").exists()


def test_train_a_neurogym_id_with_a_bad_task_option_is_a_one_line_error(tmp_path, capsys):
    code = main(
        ["train", "--env", "GoNogo-v0", "--env-kwargs", '{"cohs": [1]}', "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_eval_of_an_agent_that_never_answers_prints_accuracy_without_a_curve(tmp_path, capsys):
    # trials of a two-choice task at several coherences, none answered: no fit is possible,
    # and that must not turn the evaluation into an error
    from snrl.cli.commands import _psychometric

    trials = [
        {"gt": gt, "choice": 0, "correct": False, "conditions": {"coh": coh, "ground_truth": gt}}
        for gt in (1, 2)
        for coh in (6.4, 12.8, 25.6)
    ]
    assert _psychometric(tmp_path, trials, "PerceptualDecisionMaking-v0") == {
        "psychometric": None
    }
    assert "no psychometric curve" in capsys.readouterr().err
    assert not (tmp_path / "psychometric.png").exists()


@pytest.mark.parametrize("env", ["GoNogo-v0", "snrl.tasks:GoNogo-v0"])
def test_train_says_neuron_time_first_and_no_ansi_warning(env, tmp_path, capsys, monkeypatch):
    """The resolved neuron dt is printed before training starts (before the first env
    step); gymnasium's warning about NeuroGym's metadata (raw ANSI codes) is not shown, with
    NeuroGym's env or the batched engine's (whose one env is NeuroGym's); the learning curve
    shows accuracy."""
    import warnings

    from snrl.agents import ALGOS

    printed_before: list[str] = []
    collect = ALGOS["ppo"]._collect_rollout

    def spy(self, *args, **kwargs):
        printed_before.append(capsys.readouterr().out)
        return collect(self, *args, **kwargs)

    monkeypatch.setattr(ALGOS["ppo"], "_collect_rollout", spy)
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(
            ["train", "--env", env, "--hidden", "8", "--steps", "128", "--n-envs",
             "2", "--set", "n_steps=32", "--set", "eval_episodes=1", "--set",
             "eval_interval=64", "--quiet", "--out", str(out)]
        )  # fmt: skip
    assert code == 0
    assert printed_before and "neuron time: dt=0.1 s, substeps=1" in printed_before[0]
    assert not any("neuron time" in p for p in printed_before[1:])  # once, before
    assert "neuron time" not in capsys.readouterr().out  # not at the end
    ansi = [str(w.message) for w in caught if "\x1b[" in str(w.message)]
    assert not ansi, ansi
    assert (out / "learning_curve.svg").is_file()
