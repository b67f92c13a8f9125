"""Task variance and its clusters (Yang et al. 2019): values by hand on a tiny example, the
silhouette by hand, planted clusters recovered, and the analysis of a multitask run."""

from __future__ import annotations

import json

import numpy as np
import pytest

import snrl
from snrl.analysis.dynamics import smooth_trial
from snrl.analysis.perturb import cluster_neurons
from snrl.analysis.taskvar import (
    cluster_task_variance,
    silhouette_score,
    task_variance,
    task_variance_analysis,
    task_variance_figure,
)
from snrl.errors import UserError


def test_task_variance_by_hand():
    # one neuron; task A: trials [0, 1] and [1, 1, 1]; task B: [2, 2] and [0, 4]
    acts = {
        "A": [np.array([[0.0], [1.0]]), np.array([[1.0], [1.0], [1.0]])],
        "B": [np.array([[2.0], [2.0]]), np.array([[0.0], [4.0]])],
    }
    tv = task_variance(acts)
    # A: t=0 var(0, 1) = 0.25, t=1 var(1, 1) = 0, t=2 one trial only (left out) -> 0.125
    # B: t=0 var(2, 0) = 1, t=1 var(2, 4) = 1 -> 1
    assert tv.shape == (1, 2)
    assert tv[0, 0] == pytest.approx(0.125) and tv[0, 1] == pytest.approx(1.0)
    # with min_trials=1 step 2 of A counts too (variance 0 of one trial): 0.25 / 3
    assert task_variance(acts, min_trials=1)[0, 0] == pytest.approx(0.25 / 3)


def test_smoothing_is_causal_and_stays_in_the_trial():
    x = np.array([[3.0], [0.0], [0.0], [6.0]])
    assert smooth_trial(x, 2)[:, 0].tolist() == [3.0, 1.5, 0.0, 3.0]


def test_silhouette_by_hand():
    x = np.array([[0.0], [1.0], [10.0]])
    # point 0: a = 1, b = 10 -> 0.9; point 1: a = 1, b = 9 -> 8/9; point 2 alone -> 0
    assert silhouette_score(x, np.array([0, 0, 1])) == pytest.approx((0.9 + 8 / 9) / 3)
    x = np.array([[0.0], [2.0], [3.0], [7.0]])
    # {0, 2} vs {3, 7}: a0 = 2, b0 = 5 -> 0.6; a1 = 2, b1 = 3 -> 1/3;
    # a2 = 4, b2 = 2 -> -0.5; a3 = 4, b3 = 6 -> 1/3
    assert silhouette_score(x, np.array([1, 1, 5, 5])) == pytest.approx(
        (0.6 + 1 / 3 - 0.5 + 1 / 3) / 4
    )


def _planted(seed=0, n_per=10, n_idle=5, n_trials=30, length=12):
    """Two tasks; neurons 0..9 vary only in A, 10..19 only in B, 20..29 in both, the last
    ``n_idle`` never vary."""
    rng = np.random.default_rng(seed)
    n = 3 * n_per + n_idle
    groups = {"A": np.r_[0:n_per, 2 * n_per : 3 * n_per], "B": np.r_[n_per : 3 * n_per]}
    acts = {}
    for task, varying in groups.items():
        trials = []
        for _ in range(n_trials):
            x = np.full((length, n), 0.2)
            x[:, varying] = rng.uniform(0, 1, (length, varying.size))
            trials.append(x)
        acts[task] = trials
    return acts, n_per, n_idle


def test_planted_clusters_come_out_as_three():
    acts, n_per, n_idle = _planted()
    tv = task_variance(acts)
    assert np.allclose(tv[:n_per, 1], 0) and np.allclose(tv[n_per : 2 * n_per, 0], 0)
    assert np.all(tv[:n_per, 0] > 0.05)  # uniform(0, 1): variance 1/12
    res = cluster_task_variance(tv)
    lab = res["labels"]
    assert res["n_clusters"] == 3
    assert np.all(lab[-n_idle:] == -1) and not res["active"][-n_idle:].any()
    groups = [lab[:n_per], lab[n_per : 2 * n_per], lab[2 * n_per : 3 * n_per]]
    assert all(np.unique(g).size == 1 for g in groups)
    assert len({int(g[0]) for g in groups}) == 3
    assert lab[0] == 0  # numbered by the task of the largest mean: the A-only cluster first
    assert np.max(res["normalized"][: 3 * n_per], axis=1) == pytest.approx(1.0)
    # the order lists each cluster's neurons together, the inactive ones last
    order_lab = lab[res["order"]]
    assert list(order_lab[-n_idle:]) == [-1] * n_idle
    assert np.all(np.diff(order_lab[:-n_idle]) >= 0)
    assert res["silhouette"][3] == max(res["silhouette"].values())


def test_cluster_neurons_checks_the_index():
    entry = {"layer": "lif0", "n_clusters": 2, "labels": [0, 1, -1, 1]}
    assert cluster_neurons(entry, 1)["lif0"].tolist() == [1, 3]
    with pytest.raises(UserError, match="--cluster 2 .* 0..1"):
        cluster_neurons(entry, 2)


def test_task_variance_of_a_multitask_run():
    algo = snrl.PPO(
        "snrl.tasks:PerceptualDecisionMaking-v0,GoNogo-v0", backbone="lif", hidden_size=12,
        n_envs=2, seed=0,
    )  # fmt: skip
    entry = task_variance_analysis(algo, episodes=2, seed=3)
    assert entry["tasks"] == ["PerceptualDecisionMaking-v0", "GoNogo-v0"]
    assert entry["episodes"] == 2 and all(n > 2 for n in entry["n_trials"].values())
    assert len(entry["variance"]) == 12 and len(entry["labels"]) == 12
    assert set(entry["accuracy_by_task"]) == set(entry["tasks"])
    json.dumps(entry)  # JSON-able
    task_variance_figure(entry)
    # the same seed gives the same numbers (deterministic policy, seeded tasks)
    assert task_variance_analysis(algo, episodes=2, seed=3)["variance"] == entry["variance"]
    algo.close()
    single = snrl.PPO("snrl.tasks:GoNogo-v0", backbone="lif", hidden_size=8, n_envs=1, seed=0)
    with pytest.raises(UserError, match="several tasks"):
        task_variance_analysis(single, episodes=1)
    single.close()
