"""`snrl eval` reports the behaviour readouts that apply to the task of a tiny trained run
(batched native tasks), as a user calls it."""

from __future__ import annotations

import json

import pytest

from snrl.cli import main
from snrl.training.rundir import read_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CASES = [
    ("ContextDecisionMaking-v0", '{"use_expl_context": true}', {"context", "accuracy_by_delay"}),
    ("DelayComparison-v0", "{}", {"comparison"}),
    ("ReadySetGo-v0", "{}", {"production"}),
    ("GoNogo-v0", "{}", set()),
    ("PerceptualDecisionMaking-v0", '{"reaction_time": true}', {"chronometric"}),
]


@pytest.mark.parametrize("task,kwargs,keys", CASES)
def test_eval_reports_the_readouts_of_the_task(tmp_path, capsys, task, kwargs, keys):
    out = tmp_path / "run"
    args = ["train", "--env", f"snrl.tasks:{task}", "--env-kwargs", kwargs, "--hidden", "16"]
    args += ["--steps", "1024", "--n-envs", "8", "--set", "n_steps=64", "--seed", "0"]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "4"]) == 0
    res = json.loads(capsys.readouterr().out)
    beh = res["behaviour"]
    assert set(beh) == {"errors", *keys}
    errors = beh["errors"]
    assert errors["n_trials"] == res["n_trials"] > 0
    assert errors["n_correct"] + errors["n_error"] + errors["n_unscored"] == res["n_trials"]
    assert errors["n_correct"] == round(res["accuracy"] * (res["n_trials"] - errors["n_unscored"]))
    if "context" in keys:
        ctx = beh["context"]
        assert {r["key"] for r in ctx["by_context"]} == {0, 1}
        assert sum(r["n"] for r in ctx["by_congruency"]) == res["n_trials"]
        assert sum(r["n"] for r in beh["accuracy_by_delay"]) == res["n_trials"]
    if "comparison" in keys:
        cmp_ = beh["comparison"]
        assert cmp_["f1"] == [10.0, 14.0, 18.0, 22.0, 26.0, 30.0, 34.0]
        assert {abs(p["f1"] - p["f2"]) for p in cmp_["pairs"]} == {8.0}
        assert sum(map(sum, cmp_["n"])) == res["n_trials"]
    if "production" in keys:
        prod = beh["production"]
        assert prod["n_produced"] + prod["n_no_response"] == res["n_trials"]
        assert set(prod) >= {"fit", "points", "cv_mean", "sd_vs_mean"}
    if "chronometric" in keys:
        chrono = beh["chronometric"]
        assert chrono["n_timed"] + chrono["n_no_response"] == res["n_trials"]
        timed = chrono["correct"] + chrono["error"]
        assert sum(r["n"] for r in timed) == chrono["n_timed"]
        assert all(0.0 < r["mean"] <= 2.0 for r in timed)  # within the 2 s stimulus
        assert res["psychometric"] is not None  # a reaction-time task keeps its psychometric
    png = out / "behaviour.png"
    if "behaviour_png" in res:
        assert res["behaviour_png"] == str(png) and png.read_bytes()[:4] == b"\x89PNG"
        assert "behaviour.png" in read_manifest(out)
    else:
        assert not png.exists()
        # an agent that never went (or never answered): nothing to draw
        assert keys <= {"production", "chronometric"}
