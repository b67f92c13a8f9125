"""Trial-aligned PSTHs stay inside their trial; decisions without a choice are placed from
the task's periods; the PSTH figure shows E and I neurons, both groupings, SEM and counts."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pytest

from snrl.analysis import NetworkAnalysis, PSTHAccumulator
from snrl.palette import E_COLOR, GROUP_COLORS, I_COLOR


def _two_trials():
    """Trial 0 (env steps 0-9, choice at step 9), trial 1 (10-19) whose stimulus (steps
    12-14) drives neuron 0 hard: without masking it would appear 3-5 steps after trial 0's
    decision."""
    s = np.zeros((20, 2))
    s[12:15, 0] = 1.0  # the next trial's stimulus response
    s[9, 1] = 1.0  # neuron 1 spikes at trial 0's decision
    trials = [
        {"start_step": 0, "end_step": 9, "t0": 0.0, "decision_time": 0.9, "gt": 0, "choice": 0},
        {"start_step": 10, "end_step": 19, "t0": 0.0, "decision_time": 0.9, "gt": 1, "choice": 1},
    ]
    return s, trials


def test_decision_psth_masks_the_next_trials_stimulus():
    s, trials = _two_trials()
    acc = PSTHAccumulator(2, pre=3, post=7, event="decision", by="gt")
    acc.add(s, trials[:1], env_dt=0.1)
    psth = acc.psth()["0"]
    # window rows 6..15: rows 6..9 are trial 0's, rows 10..15 belong to trial 1 -> masked
    np.testing.assert_array_equal(psth[:4, 0], [0, 0, 0, 0])
    assert np.isnan(psth[4:, 0]).all()  # no post-decision "bump" of the next stimulus
    np.testing.assert_array_equal(psth[:4, 1], [0, 0, 0, 1])
    np.testing.assert_array_equal(acc.counts()["0"], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    assert acc.alignment == {"choice": 1}


def test_start_psth_masks_the_previous_trial():
    s, trials = _two_trials()
    s[8, 0] = 1.0  # the previous trial, just before trial 1 starts
    acc = PSTHAccumulator(2, pre=4, post=6, event="start", by="gt")
    acc.add(s, trials[1:])
    psth = acc.psth()["1"][:, 0]
    assert np.isnan(psth[:4]).all()
    np.testing.assert_array_equal(psth[4:], [0, 0, 1, 1, 1, 0])


def test_sem_and_counts_across_trials():
    # one neuron, three trials of 4 steps with spikes at the first step in 2 of them
    s = np.zeros((12, 1))
    s[0, 0] = s[4, 0] = 1.0
    trials = [{"start_step": 4 * k, "end_step": 4 * k + 3, "gt": 0} for k in range(3)]
    acc = PSTHAccumulator(1, pre=0, post=4, event="start", by="gt")
    acc.add(s, trials)
    mean, sem = acc.psth()["0"][:, 0], acc.sem()["0"][:, 0]
    np.testing.assert_allclose(mean, [2 / 3, 0, 0, 0])
    # samples (1, 1, 0): sample sd sqrt(1/3), SEM sqrt(1/3) / sqrt(3) = 1/3
    np.testing.assert_allclose(sem, [1 / 3, 0, 0, 0])
    assert acc.n_trials() == {"0": 3}


def test_decision_without_a_choice_is_the_decision_period_onset():
    # decision period from 0.45 s of trial time, t0 = 0.1 s, env dt 0.1 s: the step acting
    # at t = 0.5 s (the first with t >= 0.45) is 4 steps in -> env step 7
    trial = {"start_step": 3, "end_step": 12, "t0": 0.1, "decision_time": None, "gt": 1,
             "periods": {"stimulus": [0.1, 0.45], "decision": [0.45, 0.85]}}  # fmt: skip
    acc = PSTHAccumulator(1, pre=0, post=1, event="decision", by="gt")
    assert acc.event_step(trial, 0.1) == (7, "decision period onset")
    no_periods = dict(trial, periods={})
    assert acc.event_step(no_periods, 0.1) == (12, "trial end")


def test_delay_response_task_decisions_come_from_its_periods():
    """PerceptualDecisionMakingDelayResponse names no actions, so no trial has a choice:
    every decision is placed at the onset of the trial's decision period, and the output
    says so."""
    import snrl

    algo = snrl.PPO(
        "PerceptualDecisionMakingDelayResponse-v0", backbone="lif", hidden_size=8, n_envs=1,
        seed=0, env_kwargs={"timing": {"delay": 300}},
    )  # fmt: skip
    traj = algo.rollout(seed=0, record=False)
    algo.close()
    assert traj.trials and all(t["decision_time"] is None for t in traj.trials)
    res = NetworkAnalysis(traj.layers, dt=1e-3, psth_window=(2, 4))
    res.add(traj)
    acc = next(iter(res.psth["lif0"]["decision"].values()))
    for trial in traj.trials:
        step, rule = acc.event_step(trial, traj.dt)
        dec_onset = trial["periods"]["decision"][0]
        k = step - trial["start_step"]
        assert rule == "decision period onset"
        assert trial["t0"] + k * traj.dt == pytest.approx(dec_onset, abs=1e-9)
    summ = res.summary()["layers"]["lif0"]["trials"]
    assert summ["decision_alignment"] == {"decision period onset": len(traj.trials)}
    fig = res.figures()["psth_decision.png"]
    assert f"{len(traj.trials)} at the decision period onset" in fig._suptitle.get_text()


class _Stand:
    """A trial-env trajectory with a planted selective E neuron (0) and I neuron (5)."""

    def __init__(self, rng):
        from snrl.networks import Activity, LayerActivity

        t, n = 80, 6
        self.trials = []
        spikes = (rng.random((t, n)) < 0.05).astype(np.float32)
        spikes[:, 3] = rng.random(t) < 0.6  # a busy, unselective E neuron
        for k in range(8):
            gt = k % 2
            a = 10 * k
            if gt == 1:
                spikes[a + 2 : a + 6, 0] = 1  # E neuron 0 prefers gt 1
            else:
                spikes[a + 2 : a + 6, 5] = 1  # I neuron 5 prefers gt 0
            choice = gt if k < 6 else 1 - gt
            self.trials.append(
                {"start_step": a, "end_step": a + 9, "gt": gt, "choice": choice,
                 "decision_time": 0.8, "t0": 0.0}
            )  # fmt: skip
        sign = [1, 1, 1, 1, -1, -1]
        self.activity = Activity(
            [LayerActivity("lif0", "spiking", n, spikes=spikes, v=spikes, sign=sign)]
        )
        self.layers = self.activity.info()
        self.observations = np.zeros((t, 2))
        self.rewards = np.zeros(t)
        self.substeps = 1
        self.dt = 0.1

    def __len__(self):
        return 80


def test_psth_figure_shows_selective_e_and_i_by_gt_and_choice():
    rng = np.random.default_rng(1)
    res = NetworkAnalysis(_Stand(rng).layers, dt=1e-3, psth_window=(2, 8))
    for _ in range(2):
        res.add(_Stand(rng))
    neurons = res.psth_neurons("lif0", per_population=1)
    assert neurons == [(0, "E"), (5, "I")]  # the selective ones, not the busy neuron 3
    fig = res.figures()["psth.png"]
    axes = fig.axes
    titles = [ax.get_title() for ax in axes]
    assert "neuron 0 (E, excitatory); by gt" in titles[0] and "by choice" in titles[1]
    assert any("(I, inhibitory)" in t for t in titles)
    legend = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert legend == ["gt=0 (n=8)", "gt=1 (n=8)"]  # 4 trials x 2 episodes each
    legend = [t.get_text() for t in axes[1].get_legend().get_texts()]
    assert legend == ["choice=0 (n=8)", "choice=1 (n=8)"]
    assert "masked" in fig._suptitle.get_text() and "SEM" in fig._suptitle.get_text()
    assert axes[0].collections  # the SEM bands
    for line in axes[0].get_lines()[:2]:  # condition lines: Okabe-Ito group colours
        assert mcolors.to_hex(line.get_color()).upper() in GROUP_COLORS


def test_raster_and_histograms_agree_with_the_palette():
    from matplotlib.ticker import MaxNLocator

    rng = np.random.default_rng(2)
    res = NetworkAnalysis(_Stand(rng).layers, dt=1e-3, psth_window=(2, 8))
    res.add(_Stand(rng))
    figs = res.figures()
    ax = figs["raster.png"].axes[0]
    legend = ax.get_legend()
    handles = {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert mcolors.to_hex(handles["E (excitatory)"].get_color()) == E_COLOR.lower()
    assert mcolors.to_hex(handles["I (inhibitory)"].get_color()) == I_COLOR.lower()
    drawn = {mcolors.to_hex(np.atleast_2d(c.get_color())[0]) for c in ax.collections}
    assert drawn == {E_COLOR.lower(), I_COLOR.lower()}
    for ax in figs["rates_cv.png"].axes:
        assert isinstance(ax.yaxis.get_major_locator(), MaxNLocator)
        ticks = [t for t in ax.get_yticks() if t >= 0]
        assert all(float(t).is_integer() for t in ticks)
        assert {p.get_fill() for p in ax.patches} == {False}  # step outlines
