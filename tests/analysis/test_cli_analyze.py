"""`snrl analyze` as a user runs it: a tiny trained CartPole run, its files, exit codes."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import assert_user_error, snrl, snrl_inproc


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    res = snrl(
        "train",
        "--env",
        "CartPole-v1",
        "--hidden",
        "16",
        "--steps",
        2048,
        "--out",
        out,
        "--set",
        "eval_episodes=2",
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    return out


def test_analyze_a_trained_run(run_dir, capsys):
    res = snrl_inproc(capsys, "analyze", run_dir, "--episodes", 3, "--export", "neo")
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    out = run_dir / "analysis"
    assert line["out"] == str(out)
    for name in (
        "summary.json",
        "raster.png",
        "rates_cv.png",
        "ei_currents.png",
        "tuning.png",
        "connectivity.png",
        "spikes_neo.mat",
    ):
        assert (out / name).stat().st_size > 0, name
    assert not (out / "decoding.png").exists()  # not a trial task
    radius = line["spectral_radius"]
    assert radius["layer"] == "lif0" and radius["initial"] > 0 and radius["trained"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["rate_unit"] == "Hz" and summary["dt"] == 1e-3
    pops = summary["layers"]["lif0"]["populations"]
    assert set(pops) == {"all", "E", "I"}  # Dale by default: 80/20
    assert pops["E"]["n_neurons"]["value"] + pops["I"]["n_neurons"]["value"] == 16
    for key in (
        "rate_mean",
        "cv_isi_mean",
        "corr_mean",
        "fraction_silent",
        "ei_ratio",
        "ei_correlation",
        "current_exc_mean",
        "current_inh_mean",
    ):
        entry = pops["all"][key]
        assert set(entry) == {"value", "unit", "definition"} and entry["definition"], key
    assert pops["all"]["rate_mean"]["unit"] == "Hz"
    assert pops["all"]["current_inh_mean"]["value"] <= 0 <= pops["all"]["current_exc_mean"]["value"]
    assert len(summary["layers"]["lif0"]["neurons"]["rate"]) == 16
    # the run's manifest claims the folder, so `train --force` can clean it up
    manifest = json.loads((run_dir / ".snrl-run.json").read_text())["entries"]
    assert "analysis/summary.json" in manifest

    # a rerun without --export replaces snrl's files and drops its stale export only
    (out / "notes.txt").write_text("mine")
    res = snrl_inproc(capsys, "analyze", run_dir, "--episodes", 1)
    assert res.returncode == 0, res.stderr
    assert not (out / "spikes_neo.mat").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "summary.json").read_text())["episodes"] == 1


def test_analyze_refuses_what_is_not_its_own(tmp_path, capsys):
    assert_user_error(snrl_inproc(capsys, "analyze", tmp_path / "nope"), "does not exist")
    run = tmp_path / "run"
    run.mkdir()
    assert_user_error(snrl_inproc(capsys, "analyze", run), "best.pt does not exist")
    assert_user_error(snrl_inproc(capsys, "analyze", run, "--out", "../x"), "not a folder inside")
    (run / "analysis").mkdir()
    (run / "analysis" / "summary.json").write_text("{}")
    res = snrl_inproc(capsys, "analyze", run)
    assert_user_error(res, "which snrl did not write")
    assert (run / "analysis" / "summary.json").read_text() == "{}"
    assert sorted(p.name for p in (run / "analysis").iterdir()) == ["summary.json"]


def test_analyze_an_ann_run_is_a_user_error(tmp_path, capsys):
    import snrl

    run = tmp_path / "mlp"
    algo = snrl.PPO("CartPole-v1", backbone="mlp", hidden_size=8, seed=0)
    algo.save(run / "checkpoints" / "best.pt")
    algo.close()
    assert_user_error(snrl_inproc(capsys, "analyze", run, "--episodes", 1), "no spiking layer")
    assert not (run / "analysis").exists()
