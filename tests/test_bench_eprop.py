"""benchmarks/bench_eprop.py runs (its numbers are in docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_benchmark


@pytest.mark.parametrize("method", ["bptt", "eprop"])
@pytest.mark.parametrize("neuron", ["lif", "alif"])
def test_memory_cell_runs(method, neuron):
    b = load_benchmark("bench_eprop")
    row = b._memory_one(method, 5, neuron)
    assert row["method"] == method and row["T"] == 5 and row["extra_bytes"] >= 0


#: a hand-made metrics.csv of six updates of 100 env steps: trials per update, their
#: accuracy (actions sampled), and periodic evaluations after updates 2, 4 and 6
METRICS_CSV = """env_step,trials,trial_accuracy,eval_trial_accuracy
100,40,0.5,
200,50,0.6,0.80
300,60,0.9,
400,0,,0.85
500,100,0.95,
600,80,0.8,0.90
"""


def test_trials_to_criterion_eval_is_the_first_evaluation_at_85(tmp_path):
    from snrl.training.metrics import read_metrics

    b = load_benchmark("bench_eprop")
    path = tmp_path / "metrics.csv"
    path.write_text(METRICS_CSV)
    cols = read_metrics(path)
    # 0.80 at 200 misses; 0.85 at 400 reaches it (>=); trials 40 + 50 + 60 + 0
    assert b.trials_to_criterion(cols) == {"env_step": 400, "trials": 150, "updates": 4}
    assert b.trials_to_criterion(cols, criterion=0.9)["env_step"] == 600
    assert b.trials_to_criterion(cols, criterion=0.95) is None


def test_trials_to_criterion_train_uses_the_fewest_rows_that_hold_the_window(tmp_path):
    from snrl.training.metrics import read_metrics

    b = load_benchmark("bench_eprop")
    path = tmp_path / "metrics.csv"
    path.write_text(METRICS_CSV)
    cols = read_metrics(path)
    # window 100: after row 3 the last rows holding >= 100 trials are rows 2-3 (110 trials,
    # (30 + 54) / 110 = 0.764); row 4 adds no trials; after row 5 row 5 alone (100 trials,
    # 0.95): reached at 500 env steps, 250 trials
    got = b.trials_to_criterion(cols, source="train", window=100)
    assert got == {"env_step": 500, "trials": 250, "updates": 5}
    # window 150: rows 1-3 (150 trials, (20 + 30 + 54) / 150 = 0.693), rows 3-5 (160 trials,
    # (54 + 95) / 160 = 0.931) -> row 5; at 0.94 rows 5-6 (180, (95 + 64) / 180 = 0.883) miss
    assert b.trials_to_criterion(cols, source="train", window=150)["updates"] == 5
    assert b.trials_to_criterion(cols, source="train", window=150, criterion=0.94) is None
    # no trial columns (CartPole): nothing to reach
    assert b.trials_to_criterion({"env_step": [1, 2]}) is None
