"""Psychometric curve: the logistic fit recovers a known slope and bias from synthetic
choices; the curve of a trial log counts choices per signed coherence; the figure is a PNG."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.analysis.psychometric import (
    fit_logistic,
    has_psychometric,
    logistic,
    psychometric_curve,
    save_psychometric,
)
from snrl.errors import UserError

COHS = np.array([-51.2, -25.6, -12.8, -6.4, 0.0, 6.4, 12.8, 25.6, 51.2])


@pytest.mark.parametrize("slope,bias", [(0.12, 3.0), (0.05, -8.0)])
def test_fit_recovers_slope_and_bias_of_synthetic_choices(slope, bias):
    rng = np.random.default_rng(1)
    n = np.full(COHS.size, 2000)
    k = rng.binomial(n, logistic(COHS, slope, bias))
    fit = fit_logistic(COHS, k, n)
    assert fit["converged"]
    # within 4 standard errors, and the standard errors are small
    assert abs(fit["slope"] - slope) < 4 * fit["slope_se"] and fit["slope_se"] < 0.1 * slope
    assert abs(fit["bias"] - bias) < 4 * fit["bias_se"] and fit["bias_se"] < 1.5


def test_fit_is_the_maximum_of_the_likelihood():
    rng = np.random.default_rng(2)
    n = np.full(COHS.size, 50)
    k = rng.binomial(n, logistic(COHS, 0.1, 2.0))
    fit = fit_logistic(COHS, k, n)

    def loglik(s, b):
        p = logistic(COHS, s, b)
        return np.sum(k * np.log(p) + (n - k) * np.log1p(-p))

    best = loglik(fit["slope"], fit["bias"])
    assert best == pytest.approx(fit["log_likelihood"], abs=1e-6)
    for ds, db in [(0.01, 0), (-0.01, 0), (0, 0.5), (0, -0.5)]:
        assert loglik(fit["slope"] + ds, fit["bias"] + db) < best


def _trial(coh, gt, choice):
    return {"conditions": {"coh": coh, "ground_truth": gt - 1}, "gt": gt, "choice": choice}


def test_curve_counts_choices_per_signed_coherence(tmp_path):
    # right = action 2. +25.6: 3 right of 4; -25.6 (gt left): 1 right of 2, one no-response;
    # 0 pools both sides: 1 right of 2.
    trials = [
        _trial(25.6, 2, 2),
        _trial(25.6, 2, 2),
        _trial(25.6, 2, 2),
        _trial(25.6, 2, 1),
        _trial(25.6, 1, 2),
        _trial(25.6, 1, 1),
        _trial(25.6, 1, 0),
        _trial(0.0, 1, 2),
        _trial(0.0, 2, 1),
    ]
    assert has_psychometric(trials)
    curve = psychometric_curve(trials)
    assert (curve["left_action"], curve["right_action"]) == (1, 2)
    pts = {p["coherence"]: p for p in curve["points"]}
    assert list(pts) == [-25.6, 0.0, 25.6]
    assert (pts[25.6]["n"], pts[25.6]["n_right"], pts[25.6]["p_right"]) == (4, 3, 0.75)
    assert (pts[-25.6]["n"], pts[-25.6]["n_right"], pts[-25.6]["n_no_response"]) == (2, 1, 1)
    assert (pts[0.0]["n"], pts[0.0]["n_right"]) == (2, 1)
    png = save_psychometric(curve, tmp_path / "psychometric.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(UserError, match="must end in .png"):
        save_psychometric(curve, tmp_path / "p.jpg")


def test_tasks_without_two_choices_and_coherences_have_no_curve():
    go_nogo = [{"conditions": {"ground_truth": g}, "gt": g, "choice": 0} for g in (0, 1)]
    assert not has_psychometric(go_nogo)
    with pytest.raises(UserError, match="two-choice task"):
        psychometric_curve(go_nogo)
    with pytest.raises(UserError, match="two or more coherences"):
        fit_logistic([1.0, 1.0], [1, 2], [3, 3])
