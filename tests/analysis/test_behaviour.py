"""Behaviour readouts against known answers: binomial intervals computed by hand, a planted
logistic with lapses recovered, accuracy tables counted by hand on synthetic trial logs, a
planted linear produced-vs-sample relation with scalar noise, and ReadySetGo's produced
interval against the one NeuroGym's own task rewards."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snrl.analysis.behaviour import (
    accuracy_by_delay,
    behaviour_readouts,
    chronometric_curve,
    comparison_accuracy,
    context_accuracy,
    error_counts,
    interval_production,
    save_behaviour,
)
from snrl.analysis.psychometric import (
    binomial_ci,
    fit_logistic_lapse,
    logistic_lapse,
    psychometric_curve,
    save_psychometric,
)
from snrl.errors import UserError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

COHS = np.array([-51.2, -25.6, -12.8, -6.4, 0.0, 6.4, 12.8, 25.6, 51.2])


# ---- binomial intervals ----------------------------------------------------------------------
def test_wilson_interval_by_hand():
    # Wilson, z = 1.959964: centre (p + z^2/2n) / (1 + z^2/n), half-width
    # z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n); k = 3, n = 10
    z = 1.959963984540054
    p, n = 0.3, 10
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    lo, hi = binomial_ci(3, 10)
    assert lo == pytest.approx(centre - half, abs=1e-12)
    assert hi == pytest.approx(centre + half, abs=1e-12)
    assert (lo, hi) == pytest.approx((0.107791, 0.603222), abs=1e-6)


def test_clopper_pearson_interval_by_hand():
    # k = 0: [0, 1 - (alpha/2)^(1/n)]; k = n: [(alpha/2)^(1/n), 1]
    assert binomial_ci(0, 10, method="exact") == pytest.approx((0.0, 1 - 0.025**0.1))
    assert binomial_ci(10, 10, method="exact") == pytest.approx((0.025**0.1, 1.0))
    assert all(math.isnan(v) for v in binomial_ci(0, 0))
    with pytest.raises(UserError, match="wilson"):
        binomial_ci(1, 2, method="normal")
    with pytest.raises(UserError, match="0 <= k <= n"):
        binomial_ci(3, 2)


# ---- lapses ----------------------------------------------------------------------------------
@pytest.mark.parametrize("guess,lapse", [(0.05, 0.1), (0.0, 0.2)])
def test_lapse_fit_recovers_a_planted_logistic(guess, lapse):
    rng = np.random.default_rng(3)
    slope, bias = 0.15, 2.0
    n = np.full(COHS.size, 4000)
    k = rng.binomial(n, logistic_lapse(COHS, slope, bias, guess, lapse))
    fit = fit_logistic_lapse(COHS, k, n)
    assert fit["converged"]
    assert fit["guess"] == pytest.approx(guess, abs=0.015)
    assert fit["lapse"] == pytest.approx(lapse, abs=0.015)
    assert fit["slope"] == pytest.approx(slope, rel=0.2)
    assert fit["bias"] == pytest.approx(bias, abs=1.0)
    assert 0 <= fit["guess"] <= 0.25 and 0 <= fit["lapse"] <= 0.25  # the bounds hold


def test_lapse_fit_needs_four_points():
    with pytest.raises(UserError, match="four or more"):
        fit_logistic_lapse([-1, 0, 1], [0, 5, 10], [10, 10, 10])


def _pdm(coh, gt, choice):
    return {"conditions": {"coh": coh, "ground_truth": gt - 1}, "gt": gt, "choice": choice}


def test_psychometric_points_carry_intervals_and_the_lapse_fit(tmp_path):
    rng = np.random.default_rng(0)
    trials = []
    for c in (6.4, 12.8, 25.6, 51.2):
        for gt in (1, 2):
            x = c if gt == 2 else -c
            for _ in range(40):
                right = rng.random() < logistic_lapse(x, 0.1, 0.0, 0.05, 0.05)
                trials.append(_pdm(c, gt, 2 if right else 1))
    curve = psychometric_curve(trials)
    for p in curve["points"]:
        assert (p["ci_low"], p["ci_high"]) == pytest.approx(binomial_ci(p["n_right"], p["n"]))
        assert p["ci_low"] <= p["p_right"] <= p["ci_high"]
    assert set(curve["fit_lapse"]) >= {"slope", "bias", "guess", "lapse"}
    png = save_psychometric(curve, tmp_path / "psychometric.png")  # error bars, lapse curve
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- trial logs ------------------------------------------------------------------------------
def _trial(correct, *, decision_time=1.0, periods=None, **conditions):
    return {
        "correct": correct,
        "decision_time": decision_time,
        "conditions": conditions,
        "periods": periods or {},
    }


def test_error_counts_by_hand():
    trials = [
        _trial(True),
        _trial(True),
        _trial(False),  # wrong choice
        _trial(False, decision_time=None),  # no response
        _trial(None),  # unscored
    ]
    assert error_counts(trials) == {
        "n_trials": 5,
        "n_correct": 2,
        "n_error": 2,
        "n_wrong_choice": 1,
        "n_no_response": 1,
        "n_unscored": 1,
    }


def _cdm(context, gt, other, correct, coh_1=5, coh_2=50):
    return _trial(correct, context=context, ground_truth=gt, other_choice=other,
                  coh_1=coh_1, coh_2=coh_2)  # fmt: skip


def test_context_and_congruency_table_by_hand():
    trials = [
        # context 0, congruent (other == gt): 2 of 3 correct
        _cdm(0, 1, 1, True),
        _cdm(0, 2, 2, True),
        _cdm(0, 1, 1, False),
        # context 0, incongruent: 0 of 1
        _cdm(0, 1, 2, False),
        # context 1, congruent: 1 of 1; incongruent: 1 of 2
        _cdm(1, 2, 2, True),
        _cdm(1, 1, 2, True),
        _cdm(1, 2, 1, False),
    ]
    r = context_accuracy(trials)
    ctx = {row["key"]: (row["n_correct"], row["n"]) for row in r["by_context"]}
    assert ctx == {0: (2, 4), 1: (2, 3)}
    cong = {row["key"]: (row["n_correct"], row["n"]) for row in r["by_congruency"]}
    assert cong == {"congruent": (3, 4), "incongruent": (1, 3)}
    both = {tuple(row["key"]): row["accuracy"] for row in r["by_context_congruency"]}
    assert both == {
        (0, "congruent"): pytest.approx(2 / 3),
        (0, "incongruent"): 0.0,
        (1, "congruent"): 1.0,
        (1, "incongruent"): 0.5,
    }
    # relevant coherence: coh_1 (5) in context 0, coh_2 (50) in context 1
    coh = {row["key"]: (row["n_correct"], row["n"]) for row in r["by_coherence"]}
    assert coh == {5: (2, 4), 50: (2, 3)}
    with pytest.raises(UserError, match="ContextDecisionMaking"):
        context_accuracy([_trial(True, coh=5)])


def test_f1_f2_matrix_and_weber_curve_by_hand():
    trials = [
        _trial(True, v1=10.0, v2=18.0),
        _trial(False, v1=10.0, v2=18.0),
        _trial(True, v1=18.0, v2=10.0),
        _trial(True, v1=20.0, v2=24.0),
        _trial(False, v1=20.0, v2=24.0),
        _trial(False, v1=20.0, v2=24.0),
        _trial(True, v1=20.0, v2=16.0),
    ]
    r = comparison_accuracy(trials)
    assert r["f1"] == [10.0, 18.0, 20.0] and r["f2"] == [10.0, 16.0, 18.0, 24.0]
    m = np.array(r["matrix"])
    want = np.full((3, 4), np.nan)
    want[0, 2] = 0.5  # (10, 18)
    want[1, 0] = 1.0  # (18, 10)
    want[2, 3] = 1 / 3  # (20, 24)
    want[2, 1] = 1.0  # (20, 16)
    np.testing.assert_allclose(m, want)
    assert r["n"] == [[0, 0, 2, 0], [1, 0, 0, 0], [0, 1, 0, 3]]
    # Weber fractions: 8/10 = 0.8 (1 of 2), 8/18 (1 of 1), 4/20 = 0.2 (2 of 4)
    weber = {row["key"]: (row["n_correct"], row["n"]) for row in r["weber"]}
    assert weber == {0.2: (2, 4), round(8 / 18, 9): (1, 1), 0.8: (1, 2)}


def _rsg(ts, tp, *, gain=1.0, set_len=0.08):
    """A ReadySetGo trial: measure from 0.1 s for ts, then set; go at set onset + tp."""
    end = 0.1 + ts
    periods = {"measure": [0.1, end], "set": [end, end + set_len],
               "production": [end + set_len, end + set_len + 2 * ts]}  # fmt: skip
    return _trial(tp is not None, decision_time=None if tp is None else end + tp,
                  periods=periods, measure=ts * 1000, production=gain * ts * 1000)  # fmt: skip


def test_produced_interval_of_a_planted_linear_relation():
    # t_p = 0.1 + 0.8 t_s exactly: slope 0.8, intercept 0.1, r = 1; unanswered trials counted
    samples = [0.8, 0.96, 1.12, 1.28, 1.44]
    trials = [_rsg(ts, 0.1 + 0.8 * ts) for ts in samples for _ in range(3)]
    trials.append(_rsg(1.0, None))
    r = interval_production(trials)
    assert (r["n_trials"], r["n_produced"], r["n_no_response"]) == (16, 15, 1)
    assert r["fit"]["slope"] == pytest.approx(0.8, abs=1e-9)
    assert r["fit"]["intercept"] == pytest.approx(0.1, abs=1e-9)
    assert r["fit"]["r"] == pytest.approx(1.0)
    assert [p["sample"] for p in r["points"]] == samples
    assert all(p["sd"] == pytest.approx(0, abs=1e-12) for p in r["points"])
    assert r["points"][0]["target"] == pytest.approx(0.8)


def test_scalar_variability_of_planted_noise():
    # t_p ~ Normal(t_s, (0.1 t_s)^2): CV 0.1 at every t_s, sd proportional to the mean
    rng = np.random.default_rng(5)
    samples = [0.8, 1.0, 1.2, 1.4]
    trials = [_rsg(ts, float(rng.normal(ts, 0.1 * ts))) for ts in samples for _ in range(2000)]
    r = interval_production(trials)
    assert r["fit"]["slope"] == pytest.approx(1.0, abs=0.03)
    for p in r["points"]:
        assert p["cv"] == pytest.approx(0.1, abs=0.006)
    assert r["cv_mean"] == pytest.approx(0.1, abs=0.004)
    assert r["sd_vs_mean"]["slope"] == pytest.approx(0.1, abs=0.02)
    assert r["sd_vs_mean"]["intercept"] == pytest.approx(0.0, abs=0.02)


def _delay(d, correct):
    return _trial(correct, periods={"delay": [1.0, 1.0 + d]})


def test_accuracy_by_delay_by_hand():
    trials = [_delay(0.3, True), _delay(0.3, True), _delay(0.5, False), _delay(0.5, True),
              _delay(0.9, False)]  # fmt: skip
    rows = accuracy_by_delay(trials)
    got = [(r["delay_low"], r["n_correct"], r["n"]) for r in rows]
    assert got == [(0.3, 2, 2), (0.5, 1, 2), (0.9, 0, 1)]
    # two bins cut at the median of the five delays (0.5): d <= 0.5 and d > 0.5
    rows = accuracy_by_delay(trials, max_bins=2)
    got = [(r["delay_low"], r["delay_high"], r["n_correct"], r["n"]) for r in rows]
    assert got == [(0.3, 0.5, 3, 4), (0.9, 0.9, 0, 1)]
    assert rows[0]["delay_mean"] == pytest.approx((0.3 + 0.3 + 0.5 + 0.5) / 4)
    with pytest.raises(UserError, match="does not vary"):
        accuracy_by_delay([_delay(0.3, True), _delay(0.3, False)])


# ---- chronometric curve ----------------------------------------------------------------------
_RT_PERIODS = {"fixation": [0.0, 0.1], "stimulus": [0.1, 2.1], "decision": [0.2, 2.1]}


def _rt(coh, correct, rt):
    t = _trial(correct, periods=_RT_PERIODS, coh=coh, ground_truth=0)
    t["reaction_time"] = rt
    t["decision_time"] = None if rt is None else 0.1 + rt
    return t


def test_chronometric_curve_by_hand():
    trials = [_rt(0.0, True, 0.8), _rt(0.0, True, 0.6), _rt(0.0, False, 0.9),
              _rt(51.2, True, 0.2), _rt(51.2, True, 0.3), _rt(51.2, True, 0.4),
              _rt(12.8, False, 0.5), _rt(12.8, False, None)]  # fmt: skip
    c = chronometric_curve(trials)
    assert (c["n_trials"], c["n_timed"], c["n_no_response"], c["unit"]) == (8, 7, 1, "s")
    right = {r["key"]: r for r in c["correct"]}
    assert sorted(right) == [0.0, 51.2]
    # coh 0: 0.8, 0.6 -> mean 0.7, sd sqrt(0.02), sem sqrt(0.02 / 2) = 0.1
    assert right[0.0]["n"] == 2 and right[0.0]["mean"] == pytest.approx(0.7)
    assert right[0.0]["sem"] == pytest.approx(0.1) and right[0.0]["sd"] == pytest.approx(0.02**0.5)
    # coh 51.2: 0.2, 0.3, 0.4 -> mean 0.3, sd 0.1, sem 0.1 / sqrt(3), median 0.3
    assert right[51.2]["mean"] == pytest.approx(0.3)
    assert right[51.2]["sem"] == pytest.approx(0.1 / 3**0.5)
    assert right[51.2]["median"] == pytest.approx(0.3)
    wrong = {r["key"]: r for r in c["error"]}
    assert wrong[0.0]["n"] == 1 and wrong[0.0]["mean"] == pytest.approx(0.9)
    assert math.isnan(wrong[0.0]["sem"]) and math.isnan(wrong[0.0]["sd"])
    assert wrong[12.8]["n"] == 1  # the unanswered 12.8 trial is counted, not timed
    # correct RTs fall with coherence: every 51.2 trial is faster than every 0 trial
    assert c["trend"]["n"] == 5 and c["trend"]["rho"] < -0.8
    # a fixed-timing task (the decision opens after the stimulus) has no chronometric curve
    fixed = _rt(0.0, True, None)
    fixed["periods"] = {"stimulus": [0.1, 2.1], "decision": [2.1, 2.2]}
    with pytest.raises(UserError, match="reaction-time structure"):
        chronometric_curve([fixed])
    assert "chronometric" not in behaviour_readouts([fixed])
    assert set(behaviour_readouts(trials)) == {"errors", "chronometric"}


def _rt_oracle_agent(n_samples):
    """A scripted agent for PerceptualDecisionMaking with reaction_time=True and sigma=0: it
    reads the coherence and side from the two stimulus channels (their difference is coh /
    100) and answers on its ``n_samples[coh]``-th stimulus sample, the right side except at
    6.4 % (always the wrong side) and at 0 % (always side 1)."""
    cohs = np.array(sorted(n_samples))

    def act(obs, seen):
        acts = np.zeros(len(obs), dtype=np.int64)
        for i, o in enumerate(obs):
            if o[0] > 0.5:  # fixation shown: no stimulus sample
                continue
            seen[i] += 1
            coh = cohs[np.argmin(np.abs(cohs - abs(o[1] - o[2]) * 100))]
            side = 1 if o[1] >= o[2] else 2
            wrong = {1: 2, 2: 1}[side] if coh == 6.4 else side
            if seen[i] >= n_samples[coh]:
                acts[i] = 1 if coh == 0 else wrong
        return acts

    return act


def test_chronometric_curve_of_an_agent_whose_rt_is_known():
    """Oracle: the agent answers at the step where it sees its n(coh)-th stimulus sample. An
    agent sees a step's observation when it acts at that step, so the answer comes n - 1
    steps after the onset and every reaction time is (n(coh) - 1) x 100 ms (n >= 2: the
    decision opens one step after the onset); the curve has those means with SEM 0, its n
    per point are the trials of each coherence, and the 6.4 % trials are all errors at
    700 ms."""
    from snrl.envs.trials import TrialTracker
    from snrl.tasks import make_vector_env

    n_samples = {0.0: 9, 6.4: 8, 12.8: 5, 25.6: 3, 51.2: 2}
    act = _rt_oracle_agent(n_samples)
    n_envs = 16
    envs = make_vector_env("PerceptualDecisionMaking-v0", n_envs, seed=3,
                           env_kwargs={"reaction_time": True, "sigma": 0.0})  # fmt: skip
    obs, infos = envs.reset(seed=3)
    tracker = TrialTracker(n_envs)
    tracker.reset(infos)
    seen = np.zeros(n_envs, dtype=np.int64)
    trials = []
    for _ in range(150):
        a = act(obs, seen)
        obs, _, _, _, infos = envs.step(a)
        trials += tracker.step(a, infos)
        seen[np.asarray(infos["new_trial"], dtype=bool)] = 0
    envs.close()
    assert len(trials) > 200
    c = chronometric_curve(trials)
    assert c["n_no_response"] == 0 and c["n_timed"] == len(trials)
    by_coh = {}
    for t in trials:
        by_coh.setdefault(t["conditions"]["coh"], []).append(t)
    right = {r["key"]: r for r in c["correct"]}
    wrong = {r["key"]: r for r in c["error"]}
    for coh, n in n_samples.items():
        group = by_coh[coh]
        n_right = sum(bool(t["correct"]) for t in group)
        if coh == 6.4:
            assert n_right == 0 and coh not in right
        elif coh != 0.0:
            assert n_right == len(group) and coh not in wrong
        for rows, k in ((right, n_right), (wrong, len(group) - n_right)):
            if k:
                assert rows[coh]["n"] == k
                assert rows[coh]["mean"] == pytest.approx((n - 1) * 0.1)
                assert rows[coh]["median"] == pytest.approx((n - 1) * 0.1)
                assert rows[coh]["sem"] == pytest.approx(0.0, abs=1e-12) or k == 1
    # side 1 at 0 %: right on about half the trials, wrong on the others
    assert 0.0 in right and 0.0 in wrong
    assert c["trend"]["rho"] < -0.9


def test_readouts_report_what_applies(tmp_path):
    assert set(behaviour_readouts([_trial(True, coh=5)])) == {"errors"}
    assert save_behaviour(behaviour_readouts([_trial(True)]), tmp_path / "b.png") is None
    assert not (tmp_path / "b.png").exists()
    cdm = [_cdm(0, 1, 1, True), _cdm(1, 1, 2, False)]
    for t, d in zip(cdm, (0.3, 0.6)):
        t["periods"] = {"delay": [1.0, 1.0 + d]}
    r = behaviour_readouts(cdm)
    assert set(r) == {"errors", "context", "accuracy_by_delay"}
    png = save_behaviour(r, tmp_path / "b.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(behaviour_readouts([_rsg(0.8, 0.8), _rsg(1.0, 1.1)])) == {"errors", "production"}
    assert set(behaviour_readouts([_trial(True, v1=10.0, v2=18.0)])) == {"errors", "comparison"}
    with pytest.raises(UserError, match="must end in .png"):
        save_behaviour(r, tmp_path / "b.jpg")


def test_readysetgo_produced_interval_is_neurogyms(tmp_path):
    """The tracker's go in the production period, minus the end of ``measure``, is the
    interval NeuroGym's ReadySetGo rewards (``t - end_t['measure']`` at the go step)."""
    pytest.importorskip("neurogym")
    from snrl.envs import make_env
    from snrl.envs.neurogym import wrap_task
    from snrl.envs.trials import TrialTracker

    env = wrap_task(make_env("ReadySetGo-v0"))
    u = env.unwrapped
    tracker = TrialTracker(1)
    _, info = env.reset(seed=0)
    tracker.reset(info)
    trials, rewarded = [], []
    waits = iter([300, 500, 900, 1100, 1300] * 4)
    wait = next(waits)
    for _ in range(400):
        go = u.in_period("production") and u.t - u.end_t["measure"] >= wait
        if go:
            rewarded.append((u.t - u.end_t["measure"]) / 1000.0)
        _, _, _, _, info = env.step(int(go))
        done = tracker.step(int(go), info)
        trials += done
        if done and go:
            wait = next(waits, 1000)
    assert len(trials) >= 8
    answered = [t for t in trials if t["decision_time"] is not None]
    assert [t["choice"] for t in answered] == [1] * len(answered)
    produced = [t["decision_time"] - t["periods"]["measure"][1] for t in answered]
    assert produced == pytest.approx(rewarded[: len(produced)])
    r = interval_production(trials)
    assert r["n_produced"] == len(answered)


def test_delay_comparison_draws_romos_stimulus_set_and_takes_other_pairs():
    """NeuroGym 2.3.1's DelayComparison draws only f2 = f1 +- 8 Hz: the ten (f1, f2) pairs of
    Romo et al. (1999), f1 in 10..34 Hz in 4 Hz steps with f2 = f1 +- 8 inside 10..34. The
    native task draws the same set, and takes others through ``vpairs`` (NeuroGym's option),
    which is what a Weber curve at a fixed f1 needs."""
    pytest.importorskip("neurogym")
    import neurogym as ngym

    from snrl.tasks import make_vector_env

    romo = {(f1, f1 + s) for f1 in range(10, 35, 4) for s in (-8, 8) if 10 <= f1 + s <= 34}
    assert len(romo) == 10
    env = ngym.make("DelayComparison-v0").unwrapped
    env.reset(seed=0)
    seen = set()
    for _ in range(400):
        trial = env.new_trial()
        seen.add((int(trial["v1"]), int(trial["v2"])))
    assert seen == romo

    def native_pairs(**kwargs):
        envs = make_vector_env("DelayComparison-v0", 64, seed=0, env_kwargs=kwargs)
        pairs = set()
        _, info = envs.reset(seed=0)
        for _ in range(120):
            c = info.get("trial_start", {}).get("conditions", {})
            if "v1" in c:
                mask = info.get("_trial_start", np.ones(64, bool))
                pairs |= {(int(a), int(b)) for a, b, m in zip(c["v1"], c["v2"], mask) if m}
            _, _, _, _, info = envs.step(np.zeros(64, dtype=np.int64))
        envs.close()
        return pairs

    assert native_pairs() == romo
    assert native_pairs(vpairs=[(22, 20), (24, 20), (28, 20)]) == {
        (22, 20),
        (20, 22),
        (24, 20),
        (20, 24),
        (28, 20),
        (20, 28),
    }
