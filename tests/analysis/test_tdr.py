"""Targeted dimensionality reduction and demixed variance (snrl/analysis/tdr.py): oracles on
a planted mixture with known axes, time courses and variance shares."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.analysis.tdr import (
    demixed_variance,
    demixed_variance_trials,
    dpca,
    marginalize,
    targeted_dimensionality_reduction,
    task_variables,
    zscore_activity,
)
from snrl.errors import UserError

STIM = np.array([-1.0, -0.5, -0.2, 0.2, 0.5, 1.0])


def _planted(seed: int = 0, k: int = 960, length: int = 20, n: int = 60, context: bool = True):
    """Trials of N neurons: rate = base + m(t) a_time + choice c(t) a_choice + stim g(t)
    a_stim (+ context a_ctx) + noise; choice = sign(stim + noise) (errors included, so choice
    and stimulus are correlated but not redundant). a_stim has cosine ~0.5 with a_choice."""
    rng = np.random.default_rng(seed)
    stim = STIM[rng.integers(0, STIM.size, k)]
    choice = np.where(stim + 0.6 * rng.normal(size=k) > 0, 1.0, -1.0)
    ctx = rng.choice([-1.0, 1.0], k)
    a_choice = rng.normal(size=n)
    a_stim = 0.5 * a_choice + rng.normal(size=n)
    a_ctx, a_time, base = rng.normal(size=(3, n))
    t = np.arange(length)
    c_t = t / length  # the choice ramps up
    g_t = np.exp(-((t - 6.0) ** 2) / 8.0)  # the stimulus response is transient
    m_t = np.sin(t / 3.0)
    x = (
        base
        + m_t[None, :, None] * a_time
        + (choice[:, None] * c_t)[..., None] * a_choice
        + (stim[:, None] * g_t)[..., None] * a_stim
        + (ctx[:, None, None] * a_ctx if context else 0.0)
        + 0.3 * rng.normal(size=(k, length, n))
    )
    values = np.stack([choice, stim] + ([ctx] if context else []), axis=1)
    axes = [a_choice, a_stim] + ([a_ctx] if context else [])
    return x, values, axes, (c_t, g_t)


def test_tdr_recovers_planted_axes_in_the_planted_order():
    x, values, axes, (c_t, g_t) = _planted()
    res = targeted_dimensionality_reduction(x, values, ["choice", "stimulus", "context"])
    # z-scoring divides neuron i by its std: the planted axes in z-space are a / sd
    sd = np.nanstd(x.reshape(-1, x.shape[2]), axis=0)
    planted, r = np.linalg.qr(np.stack([a / sd for a in axes], axis=1))
    cos = np.abs(np.sum(res["axes"].T * planted, axis=0))
    assert cos.min() > 0.95, cos
    # raw (unorthogonalized) choice-stimulus cosine as planted (~0.45 here)
    u = np.stack([a / sd for a in axes[:2]], axis=1)
    u /= np.linalg.norm(u, axis=0)
    assert res["cos_raw"][0, 1] == pytest.approx(u[:, 0] @ u[:, 1], abs=0.05)
    np.testing.assert_allclose(res["axes"] @ res["axes"].T, np.eye(3), atol=1e-10)
    # time of largest norm: the choice ramp peaks at the last bin, the stimulus bump at 6
    assert res["t_max"][0] >= len(c_t) - 2 and abs(res["t_max"][1] - np.argmax(g_t)) <= 1
    # the stimulus axis (orthogonal to the choice axis) carries no choice: conditions that
    # differ only in choice project onto it alike; on the choice axis they separate
    proj = res["projections"]
    late = slice(12, 20)
    sep_choice, leak = [], []
    for s in STIM:
        a = proj[f"choice=-1, stimulus={s:g}, context=1"]
        b = proj[f"choice=1, stimulus={s:g}, context=1"]
        sep_choice.append(np.mean(b[late, 0] - a[late, 0]))
        leak.append(np.max(np.abs(b[:, 1] - a[:, 1])))
    assert min(sep_choice) > 1.0
    assert max(leak) < 0.1 * min(sep_choice)
    assert res["n_trials"] == len(x) and sum(res["n"].values()) == len(x)


def test_tdr_input_errors():
    x, values, _, _ = _planted(k=200, context=False)
    with pytest.raises(UserError, match="single condition"):
        targeted_dimensionality_reduction(x, np.c_[np.ones(200), values[:, 1]], ["c", "s"])
    with pytest.raises(UserError, match="at least 4 trials"):
        targeted_dimensionality_reduction(x[:3], values[:3], ["choice", "stimulus"])
    with pytest.raises(UserError, match="two or more conditions"):
        targeted_dimensionality_reduction(x, values, ["choice", "stimulus"], min_trials=1000)


def _planted_means(rng, n=30, t=15):
    """Condition means X = a f(t) + b s g(t) + c d h(t) + e s d (s, d centred): one planted
    axis per marginalization (time a, stimulus b, decision c, interaction e)."""
    a, b, c, e = rng.normal(size=(4, n)) * np.array([[1.0], [0.7], [1.3], [0.4]])
    tt = np.arange(t)
    f, g, h = 1.0 + np.cos(tt / 2.0), np.exp(-((tt - 5) ** 2) / 6.0), tt / t
    s = STIM - STIM.mean()
    d = np.array([-1.0, 1.0])
    xc = (
        a[:, None, None, None] * f[None, :, None, None]
        + (b[:, None] * g)[:, :, None, None] * s[None, None, :, None]
        + (c[:, None] * h)[:, :, None, None] * d[None, None, None, :]
        + e[:, None, None, None] * s[None, None, :, None] * d[None, None, None, :]
    )
    return xc, (a, b, c, e), (f, g, h), (s, d)


def test_dpca_finds_one_demixed_axis_per_planted_marginalization():
    rng = np.random.default_rng(3)
    xc, axes, _, _ = _planted_means(rng)
    xc = xc + 0.01 * rng.normal(size=xc.shape)
    res = dpca(xc, n_components=2)
    shares = demixed_variance(xc)
    for name, planted in zip(("time", "stimulus", "decision", "interaction"), axes):
        enc, dec = res[name]["encoder"], res[name]["decoder"]
        cos = abs(enc[:, 0] @ planted) / np.linalg.norm(planted)
        assert cos > 0.99, (name, cos)
        # the first component reconstructs (about) its marginalization's share, the second
        # almost nothing; its decoder reads its own marginalization only
        assert res[name]["explained_variance"][0] == pytest.approx(shares[name], abs=0.01)
        assert res[name]["explained_variance"][1] < 0.01
        assert res[name]["demixing"][name][0] > 0.99
        assert dec.shape == (2, xc.shape[0])
    with pytest.raises(UserError, match="vary"):
        dpca(np.ones((3, 4, 2, 2)))


def _hand_shares(a, b, c, e, f, g, h, s, d):
    """Variance shares of X = a f(t) + b s g(t) + c d h(t) + e s d by hand (s, d centred)."""
    n_t, n_s, n_d = len(f), len(s), len(d)
    ss = {
        "time": np.sum(a**2) * n_s * n_d * np.sum((f - f.mean()) ** 2),
        "stimulus": np.sum(b**2) * n_d * np.sum(s**2) * np.sum(g**2),
        "decision": np.sum(c**2) * n_s * np.sum(d**2) * np.sum(h**2),
        "interaction": np.sum(e**2) * np.sum(s**2) * np.sum(d**2) * n_t,
    }
    total = sum(ss.values())
    return {k: v / total for k, v in ss.items()}


def test_demixed_variance_equals_hand_computed_shares():
    rng = np.random.default_rng(1)
    n, t = 30, 15
    xc, (a, b, c, e), (f, g, h), (s, d) = _planted_means(rng, n, t)
    hand = _hand_shares(a, b, c, e, f, g, h, s, d)
    got = demixed_variance(xc)
    for k in hand:
        assert got[k] == pytest.approx(hand[k], rel=1e-9)
    parts = marginalize(xc)
    np.testing.assert_allclose(sum(parts.values()), xc - xc.mean(axis=(1, 2, 3), keepdims=True))
    # trials: the same design as single trials with noise, through the trial pipeline
    k = 2400
    si = rng.integers(0, s.size, k)
    di = rng.integers(0, 2, k)
    x = xc[:, :, si, di].transpose(2, 1, 0) + 0.5 * rng.normal(size=(k, t, n))
    res = demixed_variance_trials(x, STIM[si], d[di])
    assert res["stimulus_levels"] == [f"{v:g}" for v in STIM] and res["levels_left_out"] == []
    assert res["n"].sum() == k and res["bins"] == t
    for key in hand:
        assert res["shares"][key] == pytest.approx(hand[key], abs=0.02)


def test_pure_time_data_is_all_time_and_errors():
    rng = np.random.default_rng(2)
    k, t, n = 600, 12, 40
    x = np.sin(np.arange(t) / 2.0)[None, :, None] * rng.normal(size=n) + 0.2 * rng.normal(
        size=(k, t, n)
    )
    stim = STIM[rng.integers(0, STIM.size, k)]
    dec = rng.choice([1, 2], k)
    res = demixed_variance_trials(zscore_activity(x), stim, dec)
    assert res["shares"]["time"] > 0.95
    with pytest.raises(UserError, match="two or more stimulus levels"):
        demixed_variance_trials(x, stim, np.ones(k))  # a single decision
    # strong stimuli without wrong choices are left out of the table, not filled in
    dec2 = np.where(np.abs(stim) > 0.6, np.sign(stim), np.where(rng.random(k) < 0.5, -1, 1))
    res = demixed_variance_trials(x, stim, dec2)
    assert res["levels_left_out"] == ["-1", "1"] and len(res["stimulus_levels"]) == 4


def test_task_variables_from_trials():
    trials = [
        {"choice": 1, "gt": 1, "conditions": {"coh": 25.6}},
        {"choice": 2, "gt": 2, "conditions": {"coh": 51.2}},
        {"choice": 2, "gt": 1, "conditions": {"coh": 0.0}},
        {"choice": 0, "gt": 2, "conditions": {"coh": 6.4}},  # no answer: left out
        {"choice": 1, "gt": 2, "conditions": {"coh": 12.8}},
        {"choice": 1, "gt": 1, "conditions": {"coh": 12.8}},
    ]
    var = task_variables(trials)
    assert var["names"] == ["choice", "stimulus"]
    v = var["values"]
    np.testing.assert_allclose(v[:, 0], [-1, 1, 1, np.nan, -1, -1])
    np.testing.assert_allclose(v[:, 1], np.array([-25.6, 51.2, 0, 6.4, 12.8, -12.8]) / 51.2)
    assert list(var["groups"]) == [
        "choice=1, coh=-25.6", "choice=2, coh=51.2", "choice=2, coh=0", "",
        "choice=1, coh=12.8", "choice=1, coh=-12.8",
    ]  # fmt: skip
    ctx = [dict(t, conditions=dict(t["conditions"], context=j % 2)) for j, t in enumerate(trials)]
    assert task_variables(ctx)["names"] == ["choice", "stimulus", "context"]
    # labels that are not numbers (a task's named actions) work as well
    named = [
        {"choice": c, "gt": g, "conditions": {}} for c, g in [("L", "L"), ("R", "L"), ("R", "R")]
    ]
    var = task_variables(named)
    np.testing.assert_allclose(var["values"], [[-1, -1], [1, -1], [1, 1]])
    assert list(var["groups"]) == [
        "choice=L, stimulus=-1",
        "choice=R, stimulus=-1",
        "choice=R, stimulus=1",
    ]


def _episode(rng, a_choice, a_stim, n_trials=40, length=12):
    """One recorded episode of back-to-back PDM-like trials whose Bernoulli spikes carry a
    planted choice ramp (a_choice) and a transient signed-coherence response (a_stim)."""
    from snrl.networks import Activity, LayerActivity
    from snrl.trajectory import Trajectory

    n = a_choice.size
    cohs = np.array([0.0, 6.4, 12.8, 25.6, 51.2])
    t = np.arange(length)
    spikes, trials = [], []
    for j in range(n_trials):
        gt = int(rng.integers(1, 3))
        coh = float(cohs[rng.integers(0, cohs.size)])
        stim = (1.0 if gt == 2 else -1.0) * coh / 51.2
        choice = 2 if stim + 0.5 * rng.normal() > 0 else 1
        c = 1.0 if choice == 2 else -1.0
        p = 0.3 + 0.12 * (c * t / length)[:, None] * a_choice
        p = p + 0.12 * (stim * np.exp(-((t - 3.0) ** 2) / 4.0))[:, None] * a_stim
        spikes.append((rng.random((length, n)) < np.clip(p, 0, 1)).astype(np.float32))
        trials.append(
            {"start_step": j * length, "end_step": (j + 1) * length - 1, "choice": choice,
             "gt": gt, "correct": choice == gt, "conditions": {"coh": coh}}
        )  # fmt: skip
    s = np.concatenate(spikes)
    steps = len(s)
    return Trajectory(
        observations=np.zeros((steps, 3)),
        actions=np.zeros(steps, np.int64),
        rewards=np.zeros(steps),
        terminated=np.zeros(steps, bool),
        truncated=np.zeros(steps, bool),
        activity=Activity([LayerActivity("lif0", "spiking", n, spikes=s)]),
        trials=trials,
        dt=0.1,
    )


def test_network_analysis_reports_tdr_and_draws_it():
    import json

    from snrl.analysis import NetworkAnalysis

    rng = np.random.default_rng(5)
    n = 40
    a_choice, a_stim = rng.choice([-1.0, 1.0], (2, n))
    eps = [_episode(rng, a_choice, a_stim) for _ in range(10)]
    layers = [{"name": "lif0", "kind": "spiking", "size": n, "sign": None}]
    res = NetworkAnalysis(layers, dt=0.1, n_shuffles=0, decode_steps=12)
    for ep in eps:
        res.add(ep)
    tdr = json.loads(json.dumps(res.summary()))["dynamics"]["tdr"]
    assert tdr["order"] == ["choice", "stimulus"] and tdr["n_trials"] == 400
    x = res.trial_activity.tensor()
    sd = np.nanstd(x.reshape(-1, n), axis=0)
    planted, _ = np.linalg.qr(np.stack([a_choice / sd, a_stim / sd], axis=1))
    for j, name in enumerate(tdr["order"]):
        vec = np.asarray(tdr["axes"][name]["vector"])
        assert abs(vec @ planted[:, j]) > 0.9, name
    assert tdr["axes"]["choice"]["t_max_bin"] >= 9  # the ramp ends the trial
    assert 1 <= tdr["axes"]["stimulus"]["t_max_bin"] <= 6  # the transient peaks at 3 (+ smoothing)
    shares = tdr["demixed_variance"]["shares"]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["decision"] > shares["interaction"]
    assert "tdr.png" in res.figures()
    off = NetworkAnalysis(layers, dt=0.1, decode=False)
    off.add(eps[0])
    assert "tdr.png" not in off.figures() and "dynamics" not in off.summary()


def test_network_analysis_reports_dpca_components_with_the_flag():
    """``dpca=True`` (``snrl analyze --dpca``): the components of the same condition table as
    the demixed variance (equal shares); the first decision component lies on the planted
    choice axis (|cos| > 0.9) and its time course separates the two choices at every stimulus
    level at the trial's end; the first stimulus component near the planted stimulus axis
    (|cos| > 0.75; 0.83 here)."""
    import json

    from snrl.analysis import NetworkAnalysis

    rng = np.random.default_rng(5)
    n = 40
    a_choice, a_stim = rng.choice([-1.0, 1.0], (2, n))
    eps = [_episode(rng, a_choice, a_stim) for _ in range(10)]
    layers = [{"name": "lif0", "kind": "spiking", "size": n, "sign": None}]
    res = NetworkAnalysis(layers, dt=0.1, n_shuffles=0, decode_steps=12, dpca=True)
    for ep in eps:
        res.add(ep)
    dyn = json.loads(json.dumps(res.summary()))["dynamics"]
    dp, dv = dyn["dpca"], dyn["tdr"]["demixed_variance"]
    assert list(dp["marginalizations"]) == ["time", "stimulus", "decision", "interaction"]
    assert dp["stimulus_levels"] == dv["stimulus_levels"] and dp["decisions"] == dv["decisions"]
    assert dp["n"] == dv["n"] and dp["n_components"] == 3
    assert dp["bin_index"] == list(range(dp["bins"]))  # every cell covers the 12 bins
    s_levels, n_dec = len(dp["stimulus_levels"]), len(dp["decisions"])
    x = res.trial_activity.tensor()
    sd = np.nanstd(x.reshape(-1, n), axis=0)
    # the stimulus transient is weaker (a few trials per level): a lower bar, still far
    # above a random direction's |cos| of about 1 / sqrt(40) = 0.16
    for name, axis, bar in (("decision", a_choice, 0.9), ("stimulus", a_stim, 0.75)):
        m = dp["marginalizations"][name]
        assert m["share"] == pytest.approx(dv["shares"][name])
        enc = np.asarray(m["encoder"])[:, 0]
        assert abs(enc @ (axis / sd)) / np.linalg.norm(axis / sd) > bar, name
        assert 0 < m["explained_variance"][0] <= m["share"] + 1e-9
        assert m["demixing"][name][0] > 0.5  # it reads mostly its own marginalization
        z = np.asarray(m["projections"])
        assert z.shape == (3, dp["bins"], s_levels, n_dec)
    z = np.asarray(dp["marginalizations"]["decision"]["projections"])[0, -1]  # (S, D) at the end
    assert (np.sign(z[:, 0]) == np.sign(z[0, 0])).all()
    assert (np.sign(z[:, 1]) == -np.sign(z[0, 0])).all()
    assert "dpca.png" in res.figures()
    plain = NetworkAnalysis(layers, dt=0.1, n_shuffles=0, decode_steps=12)
    plain.add(eps[0])
    assert "dpca" not in plain.summary()["dynamics"] and "dpca.png" not in plain.figures()


def test_dpca_analysis_skips_with_a_reason():
    from snrl.analysis.dynamics import TrialActivity
    from snrl.analysis.tdr import dpca_analysis

    ta = TrialActivity(4, length=5)
    # one choice only: no decision marginalization
    trials = [{"start_step": 5 * j, "end_step": 5 * j + 4, "choice": 1, "gt": 1 + j % 2,
               "correct": j % 2 == 0, "conditions": {"coh": 12.8}} for j in range(12)]  # fmt: skip
    ta.add(np.random.default_rng(0).random((60, 4)), trials)
    out = dpca_analysis(ta)
    assert set(out) == {"skipped"} and out["skipped"]


def test_printed_line_carries_the_tdr_numbers():
    from snrl.cli.commands import _tdr_line

    tdr = {
        "axes": {"choice": {"explained_variance": 0.2}, "stimulus": {"explained_variance": 0.1}},
        "demixed_variance": {"shares": {"time": 0.7, "stimulus": 0.1, "decision": 0.15}},
    }
    line = _tdr_line(tdr)
    assert line["tdr_explained_variance"] == {"choice": 0.2, "stimulus": 0.1}
    assert line["demixed_variance"]["decision"] == 0.15
    assert _tdr_line({"skipped": "one choice"}) == {}
