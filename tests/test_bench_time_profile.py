"""benchmarks/bench_time_profile.py reads the firing statistics snrl analyze writes and
prints one table row per run (the runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import json

from tests.bench_scripts import load_benchmark


def _stat(value: float, unit: str = "1") -> dict:
    return {"value": value, "unit": unit, "definition": "..."}


def test_firing_and_row_from_a_summary(tmp_path) -> None:
    bench = load_benchmark("bench_time_profile")
    pops = {
        pop: {"rate_mean": _stat(r, "Hz"), "cv_isi_mean": _stat(cv), "fano_mean": _stat(f)}
        for pop, r, cv, f in (("E", 10.4, 3.11, 12.38), ("I", 13.6, 3.18, 14.25))
    }
    summary = {
        "dt": 0.01,
        "parameters": {"fano_window": 100},
        "layers": {"lif0": {"populations": pops}},
    }
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "summary.json").write_text(json.dumps(summary))
    firing = bench._firing(tmp_path)
    assert firing["E"] == {"rate_mean": 10.4, "cv_isi_mean": 3.11, "fano_mean": 12.38}
    assert firing["dt"] == 0.01 and firing["I"]["rate_mean"] == 13.6
    result = {
        "task": "PerceptualDecisionMaking-v0", "backbone": "lif", "time_profile": "biological",
        "accuracy": 0.7914, "accuracy_fixation_held": 0.6021, "fixation_breaks": 0.2349,
        "train_s": 126.0, "firing": firing, "time": {"dt": 0.01, "substeps": 10, "tau_m": 0.02},
    }  # fmt: skip
    assert bench._row(result) == (
        "| PerceptualDecisionMaking | lif | biological | 10 ms x 10, tau_m 20 ms | 0.791 "
        "| 0.602 (0.23) | 2.1 | 10.4 / 3.11 / 12.38 | 13.6 / 3.18 / 14.25 |"
    )
    # a GRU; snrl eval's null (NaN: no trial with a response period) and an older result
    gru = {**result, "backbone": "gru", "time_profile": "task", "firing": None}
    gru["fixation_breaks"] = None
    assert bench._row(gru).endswith("| gru | task | - | 0.791 | 0.602 (-) | 2.1 | - | - |")
    del gru["accuracy_fixation_held"]
    assert bench._row(gru).endswith("| gru | task | - | 0.791 | - | 2.1 | - | - |")
