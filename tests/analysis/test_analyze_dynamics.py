"""Decoding, dimensionality and connectivity inside `analyze`: the initial weights rebuilt
from the seed, the summary fields and the figures on a (tiny, untrained) NeuroGym run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import snrl
from snrl.analysis import analyze
from snrl.analysis.run import initial_weights


def test_initial_weights_are_rebuilt_from_the_seed_after_training():
    algo = snrl.PPO("CartPole-v1", backbone="lif", hidden_size=10, n_envs=2, n_steps=32, seed=4)
    before = {
        net: m.layers["lif0"].recurrent_weights.detach().double().numpy().copy()
        for net, m in (("policy", algo.agent.actor), ("critic", algo.agent.critic))
    }
    algo.learn(128, progress=False)
    trained = algo.agent.actor.layers["lif0"].recurrent_weights.detach().double().numpy()
    assert not np.allclose(trained, before["policy"])  # training moved them
    state = torch.random.get_rng_state()
    rebuilt = initial_weights(algo)
    assert torch.equal(state, torch.random.get_rng_state())  # global RNG untouched
    for net in ("policy", "critic"):
        np.testing.assert_array_equal(rebuilt[net]["lif0"].w_rec, before[net])
    algo.close()


def test_analyze_a_trial_task_decodes_and_reports_connectivity():
    algo = snrl.PPO("PerceptualDecisionMaking-v0", backbone="lif", hidden_size=12, n_envs=1, seed=0)
    res = analyze(algo, episodes=2, seed=0, n_shuffles=2)
    summ = json.loads(json.dumps(res.summary()))  # JSON-able, NaN as null
    dyn = summ["dynamics"]
    assert dyn["layer"] == "lif0" and dyn["n_trials"] > 20
    # NeuroGym's ground_truth condition repeats gt: decoded once
    assert list(dyn["decoding"]) == ["choice", "gt", "coh"]
    assert dyn["decoding"]["coh"]["classes"] == ["0", "6.4", "12.8", "25.6", "51.2"]
    gt = dyn["decoding"]["gt"]
    acc = [a for a in gt["accuracy"] if a is not None]
    assert acc and all(0 <= a <= 1 for a in acc)
    assert len(gt["accuracy"]) == dyn["parameters"]["decode_steps"]
    assert gt["p_value"][0] is None or 1 / 3 <= gt["p_value"][0] <= 1  # 2 shuffles
    assert dyn["bin_seconds"] == 0.1
    conn = summ["layers"]["lif0"]["connectivity"]
    assert set(conn["trained"]["blocks"]) == {"E->E", "E->I", "I->E", "I->I"}
    w = algo.agent.actor.layers["lif0"].recurrent_weights.detach().double().numpy()
    radius = np.abs(np.linalg.eigvals(w)).max()
    assert conn["trained"]["spectral_radius"] == np.float64(radius).item()
    # untrained: the initial weights are the weights
    assert conn["initial"]["spectral_radius"] == conn["trained"]["spectral_radius"]
    ee = conn["trained"]["blocks"]["E->E"]
    assert ee["n_pre"] == 10 and ee["mean"] > 0 and conn["trained"]["blocks"]["I->E"]["mean"] < 0
    assert "selectivity" in conn
    figs = res.figures()
    assert {"decoding.png", "connectivity.png"} <= set(figs)
    assert "critic" in summ["networks"] and "dynamics" not in summ["networks"]["critic"]
    off = analyze(algo, episodes=1, seed=0, decode=False, compare_initial=False)
    s_off = off.summary()
    assert "dynamics" not in s_off and "initial" not in s_off["layers"]["lif0"]["connectivity"]
    assert "decoding.png" not in off.figures()
    algo.close()


@pytest.mark.slow  # trains a run and analyzes it twice: about 11 s on 2 shared cores
def test_snrl_analyze_decoding_flags(tmp_path, capsys):
    from tests.cli_run import snrl_inproc, train_tiny_pdm

    run = train_tiny_pdm(tmp_path / "pdm")
    res = snrl_inproc(capsys, "analyze", run, "--episodes", 1, "--shuffles", 2)
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    out = run / "analysis"
    assert {"decoding.png", "connectivity.png"} <= set(line["files"])
    assert set(line["decoding_peak"]) >= {"gt"} and "initial" in line["spectral_radius"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dynamics"]["parameters"]["n_shuffles"] == 2
    tdr = summary["dynamics"]["tdr"]  # computed, or skipped with its reason (tiny run)
    assert ("tdr.png" in line["files"]) == ("axes" in tdr) and ("axes" in tdr or tdr["skipped"])
    # --dpca: the components (dpca.png) where the run's trials allow them, else the reason
    res = snrl_inproc(capsys, "analyze", run, "--episodes", 3, "--shuffles", 0, "--dpca",
                      "--no-initial")  # fmt: skip
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    dp = json.loads((out / "summary.json").read_text())["dynamics"]["dpca"]
    assert (
        ("dpca.png" in line["files"]) == ("marginalizations" in dp) == (out / "dpca.png").exists()
    )
    if "marginalizations" in dp:
        assert line["dpca_explained_variance"] == {
            k: m["explained_variance"] for k, m in dp["marginalizations"].items()
        }
    else:  # a tiny untrained policy rarely makes two choices: skipped, with its reason
        assert dp["skipped"] and line["dpca_explained_variance"] == {"skipped": dp["skipped"]}
    res = snrl_inproc(capsys, "analyze", run, "--episodes", 1, "--no-decode", "--no-initial")
    assert res.returncode == 0, res.stderr
    assert not (out / "decoding.png").exists()  # snrl's own stale figure is removed
    assert not (out / "tdr.png").exists() and not (out / "dpca.png").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert "dynamics" not in summary
    assert "initial" not in summary["layers"]["lif0"]["connectivity"]
    res = snrl_inproc(capsys, "analyze", run, "--shuffles", "-1")
    assert res.returncode == 2


def test_snrl_analyze_dpca_needs_the_decoding(tmp_path, capsys):
    """--dpca with --no-decode is refused before anything is read or written."""
    from tests.cli_run import assert_user_error, snrl_inproc

    run = tmp_path / "run"
    run.mkdir()
    res = snrl_inproc(capsys, "analyze", run, "--dpca", "--no-decode")
    assert_user_error(res, "--dpca needs the trial activity")
    assert list(run.iterdir()) == []
