"""`snrl compare --grid learning_rule=bptt,eprop`: BPTT vs e-prop in one command."""

from __future__ import annotations

import csv
import json

import pytest

from snrl.cli import main


@pytest.mark.slow
def test_compare_grid_learning_rule(tmp_path, capsys):
    out = tmp_path / "rules"
    sets = ["n_envs=2", "n_steps=32", "n_epochs=1", "eval_interval=0", "hidden_size=8"]
    args = [
        "compare",
        "--env",
        "CartPole-v1",
        "--algo",
        "ppo",
        "--backbones",
        "lif",
        "--seeds",
        "1",
        "--steps",
        "64",
        "--eval-episodes",
        "1",
        "--out",
        str(out),
        "--grid",
        "learning_rule=bptt,eprop",
    ]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert len(runs) == 2
    for name in runs:
        cfg = json.loads((out / "runs" / name / "config.json").read_text())
        assert f"learning_rule={cfg['learning_rule']}" in name
    with open(out / "summary.csv", newline="") as f:
        groups = [row["group"] for row in csv.DictReader(f)]
    assert groups == ["lif learning_rule=bptt", "lif learning_rule=eprop"]
    capsys.readouterr()


def test_train_flags_and_refusals(tmp_path, capsys):
    base = ["train", "--env", "CartPole-v1", "--out", str(tmp_path / "r"), "--steps", "64"]
    assert main([*base, "--backbone", "mlp", "--learning-rule", "eprop"]) == 2
    err = capsys.readouterr().err
    assert "learning_rule=eprop with backbone='mlp'" in err and "Traceback" not in err
    assert main([*base, "--algo", "dqn", "--learning-rule", "eprop"]) == 2
    assert "not implemented for DQN" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing half-written
