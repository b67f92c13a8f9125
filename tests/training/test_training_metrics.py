"""MetricsWriter rows, resume truncation (later rows, torn line), read_metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from snrl.errors import UserError
from snrl.training.metrics import MetricsWriter, read_metrics

FIELDS = ["env_step", "wall_time", "episode_return_mean", "loss"]


def _write_rows(path, steps):
    with MetricsWriter(path, FIELDS) as w:
        for s in steps:
            w.write({"env_step": s, "wall_time": s / 100, "episode_return_mean": s * 0.5})


def test_rows_round_trip(tmp_path):
    path = tmp_path / "run" / "metrics.csv"
    with MetricsWriter(path, FIELDS) as w:
        w.write({"env_step": 128, "wall_time": 0.25, "episode_return_mean": 9.5, "loss": 0.1})
        w.write({"env_step": np.int64(256), "loss": torch.tensor(0.125)})  # missing -> empty
        w.append({"env_step": 384, "episode_return_mean": float("nan"), "loss": None})
    text = path.read_text()
    assert text.splitlines()[0] == "env_step,wall_time,episode_return_mean,loss"
    assert text.splitlines()[2] == "256,,,0.125"
    m = read_metrics(path)
    assert list(m) == FIELDS
    np.testing.assert_array_equal(m["env_step"], [128, 256, 384])
    assert m["episode_return_mean"][0] == 9.5
    assert math.isnan(m["episode_return_mean"][1]) and math.isnan(m["episode_return_mean"][2])
    assert m["loss"][1] == 0.125
    assert m["env_step"].dtype == np.float64


def test_unknown_key_refused(tmp_path):
    with MetricsWriter(tmp_path / "m.csv", FIELDS) as w:
        with pytest.raises(ValueError, match=r"unknown columns \['lr'\]"):
            w.write({"env_step": 1, "lr": 3e-4})
    assert read_metrics(tmp_path / "m.csv")["env_step"].size == 0  # nothing written


def test_bad_fieldnames(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        MetricsWriter(tmp_path / "m.csv", ["a", "a"])
    with pytest.raises(ValueError, match="non-empty"):
        MetricsWriter(tmp_path / "m.csv", [])


def test_resume_drops_later_rows_and_torn_line(tmp_path):
    path = tmp_path / "metrics.csv"
    _write_rows(path, [100, 200, 300, 400])
    with open(path, "a") as f:
        f.write("500,5.0,25")  # torn: a crash in the middle of a row
    w = MetricsWriter.resume(path, FIELDS, upto_env_step=200)  # last checkpoint at 200
    w.write({"env_step": 300, "episode_return_mean": -1.0})
    w.close()
    m = read_metrics(path)
    np.testing.assert_array_equal(m["env_step"], [100, 200, 300])  # no duplicates
    np.testing.assert_array_equal(m["episode_return_mean"], [50.0, 100.0, -1.0])
    assert path.read_text().count("\n") == 4  # header + 3 rows, each on its own line


def test_resume_keeps_everything_up_to_checkpoint_and_drops_only_torn(tmp_path):
    path = tmp_path / "metrics.csv"
    _write_rows(path, [100, 200])
    with open(path, "a") as f:
        f.write("300,3.0")  # torn, no newline
    MetricsWriter.resume(path, FIELDS, upto_env_step=10**9).close()
    np.testing.assert_array_equal(read_metrics(path)["env_step"], [100, 200])
    assert path.read_text().endswith("\n")


def test_resume_header_mismatch_and_missing_file(tmp_path):
    path = tmp_path / "metrics.csv"
    _write_rows(path, [1])
    with pytest.raises(UserError, match=r"metrics file .* has columns .* expected"):
        MetricsWriter.resume(path, [*FIELDS, "spike_rate"], upto_env_step=1)
    with pytest.raises(ValueError, match="must include 'env_step'"):
        MetricsWriter.resume(path, ["step"], upto_env_step=1)
    fresh = tmp_path / "fresh.csv"
    MetricsWriter.resume(fresh, FIELDS, upto_env_step=0).close()
    assert fresh.read_text() == "env_step,wall_time,episode_return_mean,loss\n"


def test_read_metrics_errors_and_torn_line(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_metrics(tmp_path / "nope.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(UserError, match="is empty"):
        read_metrics(empty)
    path = tmp_path / "m.csv"
    path.write_text("env_step,name\n1,lif\n2,mlp\n3,ml")
    m = read_metrics(path)
    np.testing.assert_array_equal(m["env_step"], [1, 2])
    assert list(m["name"]) == ["lif", "mlp"]
