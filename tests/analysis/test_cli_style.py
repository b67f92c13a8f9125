"""`snrl analyze/perturb/eval --style paper|talk` as a user runs them, on a tiny trained
NeuroGym decision run: the figures' sizes and files, trial markers, a bad style (exit 2)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.cli_run import assert_user_error, snrl_inproc

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    res = snrl_inproc(
        capsys, "train", "--env", "PerceptualDecisionMaking-v0", "--hidden", 16, "--steps", 512,
        "--n-envs", 4, "--set", "n_steps=64", "--set", "eval_episodes=1", "--seed", 0,
        "--quiet", "--out", out,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out


def test_analyze_perturb_eval_in_a_style(run_dir, capsys):
    res = snrl_inproc(capsys, "analyze", run_dir, "--style", "talk", "--episodes", 2)
    assert res.returncode == 0, res.stderr
    out = run_dir / "analysis"
    files = json.loads(res.stdout)["files"]
    for name in ("raster", "ei_currents", "rates_cv"):
        assert f"{name}.png" in files and f"{name}.svg" in files, files
        with Image.open(out / f"{name}.png") as im:
            assert im.size == (1920, 1080)  # a 16:9 slide
    svg = (out / "raster.svg").read_text(encoding="utf-8")
    assert "trial start" in svg and "fixation period" in svg  # the markers' legend
    assert not (out / "raster.pdf").exists()  # talk: PNG + SVG

    res = snrl_inproc(capsys, "analyze", run_dir, "--style", "paper", "--episodes", 2)
    assert res.returncode == 0, res.stderr
    with Image.open(out / "raster.png") as im:
        assert round(im.info["dpi"][0]) == 300
    assert (out / "raster.pdf").read_bytes().startswith(b"%PDF")
    # a rerun without a style drops the vector files snrl wrote before, nothing else
    (out / "mine.pdf").write_text("mine")
    res = snrl_inproc(capsys, "analyze", run_dir, "--episodes", 1)
    assert res.returncode == 0, res.stderr
    assert not (out / "raster.pdf").exists() and not (out / "raster.svg").exists()
    assert (out / "mine.pdf").read_text() == "mine"

    res = snrl_inproc(
        capsys, "perturb", run_dir, "--silence", "I", "--episodes", 1, "--style", "paper"
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["files"] == [
        "perturb.json", "perturb.png", "perturb.pdf", "perturb.svg"
    ]  # fmt: skip
    manifest = json.loads((run_dir / ".snrl-run.json").read_text())["entries"]
    assert "perturb/perturb.pdf" in manifest  # `train --force` may remove it
    perturb = run_dir / "perturb"
    report = json.loads((perturb / "perturb.json").read_text())
    assert report["files"] == ["perturb.png", "perturb.pdf", "perturb.svg"]
    # a rerun without a style removes the vector files the last report listed
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "I", "--episodes", 1)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in perturb.iterdir()) == ["perturb.json", "perturb.png"]
    # a PDF snrl did not list there is someone else's: refused, nothing written
    (perturb / "perturb.pdf").write_text("mine")
    res = snrl_inproc(
        capsys, "perturb", run_dir, "--silence", "I", "--episodes", 1, "--style", "paper"
    )
    assert_user_error(res, "perturb.pdf exists and snrl did not write it")
    assert (perturb / "perturb.pdf").read_text() == "mine"
    (perturb / "perturb.pdf").unlink()

    res = snrl_inproc(capsys, "eval", run_dir, "--episodes", 2, "--style", "talk")
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    for key in ("psychometric_png", "behaviour_png"):
        if key in line:  # where the task has the figure: its SVG beside it, and claimed
            svg = line[key].replace(".png", ".svg")
            assert (run_dir / svg.rsplit("/", 1)[-1]).is_file()


@pytest.mark.parametrize("command", ["analyze", "perturb", "eval"])
def test_an_unknown_style_exits_2_and_writes_nothing(tmp_path, capsys, command):
    run = tmp_path / "run"
    run.mkdir()
    extra = ["--silence", "I"] if command == "perturb" else []
    res = snrl_inproc(capsys, command, run, *extra, "--style", "poster")
    assert_user_error(res, "invalid choice: 'poster'")
    assert list(run.iterdir()) == []
