"""`snrl analyze` over a comparison directory: spiking variants side by side with bootstrap
intervals; ANN runs are skipped; per-group numbers equal the runs' own."""

from __future__ import annotations

import json

import numpy as np
import pytest

import snrl
from snrl.analysis.compare import compare_summaries
from snrl.experiments.stats import bootstrap_ci
from snrl.experiments.store import write_manifest, write_status


def _fake_comparison(tmp_path):
    """A comparison directory as `snrl compare` leaves it (untrained agents, to be quick)."""
    base = tmp_path / "cmp"
    base.mkdir()
    write_manifest(
        base,
        {"env": "CartPole-v1", "algo": "ppo", "backbones": ["lif", "mlp"], "seeds": 2, "steps": 0},
    )
    runs = [("lif-s0", "lif", 0), ("lif-s1", "lif", 1), ("mlp-s0", "mlp", 0)]
    for name, backbone, seed in runs:
        algo = snrl.PPO("CartPole-v1", backbone=backbone, hidden_size=8, seed=seed)
        algo.save(base / "runs" / name / "checkpoints" / "best.pt")
        algo.close()
        write_status(
            base / "status" / f"{name}.json",
            {
                "name": name,
                "group": backbone,
                "backbone": backbone,
                "seed": seed,
                "status": "done",
            },
        )
    return base


def test_analyze_a_comparison(tmp_path, capsys):
    from snrl.cli import main

    base = _fake_comparison(tmp_path)
    rc = main(["analyze", str(base), "--episodes", "2"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    res = json.loads((base / "analysis" / "compare.json").read_text())
    assert list(res["groups"]) == ["lif"]  # the MLP has no spiking layer: skipped
    skipped = [r for r in res["runs"] if r.get("skipped")]
    assert [r["name"] for r in skipped] == ["mlp-s0"]
    entry = res["groups"]["lif"]["rate_mean"]
    assert entry["n"] == 2 and entry["unit"] == "Hz"
    vals = np.array(entry["values"], dtype=float)
    assert entry["mean"] == pytest.approx(vals.mean())
    assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]
    assert (base / "analysis" / "compare.png").stat().st_size > 0
    assert json.loads(out)["groups"] == ["lif"]


def test_compare_summaries_by_hand():
    def summ(rate):
        return {
            "rate_unit": "Hz",
            "layers": {
                "lif0": {
                    "populations": {
                        "all": {"rate_mean": {"value": rate}, "cv_isi_mean": {"value": None}}
                    }
                }
            },
        }

    runs = [
        {"name": "a0", "group": "a", "seed": 0, "summary": summ(10.0)},
        {"name": "a1", "group": "a", "seed": 1, "summary": summ(20.0)},
        {"name": "b0", "group": "b", "seed": 0, "summary": summ(5.0)},
    ]
    res = compare_summaries(runs, lambda v: bootstrap_ci(v, seed=0))
    a = res["groups"]["a"]["rate_mean"]
    assert a["mean"] == 15.0 and a["values"] == [10.0, 20.0]
    assert 10.0 <= a["ci_low"] <= a["ci_high"] <= 20.0
    assert res["groups"]["b"]["rate_mean"]["ci_low"] == 5.0  # one value: (x, x)
    assert res["groups"]["a"]["cv_isi_mean"]["mean"] is None  # no finite value


def test_export_refused_for_a_comparison(tmp_path, capsys):
    from snrl.cli import main

    base = tmp_path / "cmp"
    base.mkdir()
    write_manifest(base, {"env": "CartPole-v1"})
    rc = main(["analyze", str(base), "--export", "nwb"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: --export applies to one run")
    assert not (base / "analysis").exists()
