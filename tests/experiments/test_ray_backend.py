"""The Ray backend gives the same per-run results as the local process pool (same seeds).

Slow (a local Ray instance takes 10-30 s to start on 2 shared cores); needs ``snrl[ray]``.
"""

from __future__ import annotations

import numpy as np

from snrl.experiments import CompareSpec, compare
from snrl.training.metrics import read_metrics

TINY = dict(
    hidden_size=8,
    n_envs=4,
    n_steps=32,
    n_epochs=2,
    eval_interval=0,
    eval_episodes=1,
    checkpoint_interval=4,
)


def test_ray_and_local_backends_give_the_same_runs(tmp_path):
    # ray is in the dev extra: this test runs in CI on a local Ray instance
    kw = dict(
        env="CartPole-v1",
        backbones=["lif", "mlp"],
        seeds=2,
        steps=2048,
        overrides=TINY,
        eval_episodes=3,
        workers=2,
    )
    local = compare(CompareSpec(out=tmp_path / "local", **kw))
    ray = compare(CompareSpec(out=tmp_path / "ray", backend="ray", **kw))
    assert [r["name"] for r in local.runs] == [r["name"] for r in ray.runs]
    assert len(local.runs) == 4
    for a, b in zip(local.runs, ray.runs):
        assert a["status"] == b["status"] == "done"
        assert a["eval_returns"] == b["eval_returns"]
        assert a["spike_rates"] == b["spike_rates"]
        assert a["sops_per_step"] == b["sops_per_step"] or np.isnan(a["sops_per_step"])
        ma = read_metrics(tmp_path / "local" / "runs" / a["name"] / "metrics.csv")
        mb = read_metrics(tmp_path / "ray" / "runs" / b["name"] / "metrics.csv")
        assert ma.keys() == mb.keys()
        for col in ma:
            if col != "wall_time":
                np.testing.assert_array_equal(ma[col], mb[col], err_msg=col)
        for f in ("config.json", "checkpoints/best.pt", "checkpoints/last.pt"):
            assert (tmp_path / "ray" / "runs" / b["name"] / f).is_file()
    for f in ("summary.csv", "curves.png", "report.md"):
        assert (tmp_path / "ray" / f).is_file()
