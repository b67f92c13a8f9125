"""E/I input currents on a 3-neuron network by hand; selectivity, PCA, PSTH and tuning on
constructed cases; the currents against a real layer's input current."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from snrl.analysis import (
    NetworkAnalysis,
    PSTHAccumulator,
    SpikeStats,
    TuningAccumulator,
    layer_weights,
    pca,
    selectivity,
    synaptic_currents,
)


def test_three_neuron_currents_by_hand():
    # neurons 0, 1 excitatory (rows >= 0), neuron 2 inhibitory (row <= 0); no autapses
    w = np.array([[0.0, 0.5, 0.2], [0.3, 0.0, 0.4], [-1.0, -0.6, 0.0]])
    z = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=float)
    ext = np.full((3, 3), 0.1)
    cur = synaptic_currents(z, w, ext=ext)
    # step 0: no spikes before -> 0; step 1: z0 = [1,0,1]: E = row0 = [0, .5, .2],
    # I = row2 = [-1, -.6, 0]; step 2: z1 = [0,1,1]: E = row1 = [.3, 0, .4], I = row2
    np.testing.assert_allclose(cur["exc"], [[0, 0, 0], [0, 0.5, 0.2], [0.3, 0, 0.4]])
    np.testing.assert_allclose(cur["inh"], [[0, 0, 0], [-1, -0.6, 0], [-1, -0.6, 0]])
    np.testing.assert_allclose(cur["ext"], ext)
    acc = SpikeStats(3, sign=[1, 1, -1])
    acc.add(z, cur)
    per = acc.neuron_stats()
    np.testing.assert_allclose(per["current_exc"], [0.1, 0.5 / 3, 0.2])
    # neuron 0: E = [0, 0, .3], -I = [0, 1, 1] -> ratio (2/3) / 0.1
    assert per["ei_ratio"][0] == pytest.approx((2 / 3) / 0.1)
    assert per["ei_correlation"][0] == pytest.approx(np.corrcoef([0, 0, 0.3], [0, 1, 1])[0, 1])


def test_deeper_layer_feed_forward_split_by_sign():
    z = np.zeros((2, 2))
    pre = np.array([[1.0, 1.0], [0.0, 1.0]])
    wff = np.array([[0.5, 0.25], [-0.75, -0.1]])
    cur = synaptic_currents(z, np.zeros((2, 2)), pre_spikes=pre, w_ff=wff, bias=[0.1, 0.2])
    np.testing.assert_allclose(cur["exc"], [[0.5, 0.25], [0, 0]])
    np.testing.assert_allclose(cur["inh"], [[-0.75, -0.1], [-0.75, -0.1]])
    np.testing.assert_allclose(cur["ext"], [[0.1, 0.2], [0.1, 0.2]])


def test_currents_sum_to_the_layers_input_current():
    """exc + inh + ext equals I_t = x W_in + z_{t-1} W_rec + b, recovered from a real LIF
    layer's membrane (v_t = alpha v_{t-1} + I_t - threshold z_{t-1})."""
    from snrl.networks.spiking import SpikingBackbone

    torch.manual_seed(0)
    net = SpikingBackbone(3, 12, None, force_dale_law=True, seed=1, dt=1e-3, tau_m=20e-3)
    x = torch.randn(40, 1, 3) * 3
    with torch.no_grad():
        res = net.run(x, net.initial_state(1))
    z = res.activity[0].spikes[:, 0].numpy().astype(float)
    v = res.activity[0].v[:, 0].detach().numpy().astype(float)
    w = layer_weights(net)["lif0"]
    cur = synaptic_currents(z, w.w_rec, ext=x[:, 0].numpy() @ w.w_in + w.bias)
    alpha = np.exp(-1e-3 / 20e-3)
    v_prev = np.vstack([np.zeros((1, 12)), v[:-1]])
    z_prev = np.vstack([np.zeros((1, 12)), z[:-1]])
    current = v - alpha * v_prev + 1.0 * z_prev
    np.testing.assert_allclose(cur["exc"] + cur["inh"] + cur["ext"], current, atol=1e-4)
    assert (cur["inh"] <= 0).all() and (cur["exc"] >= 0).all()
    assert z.sum() > 10 and (cur["inh"] < 0).any()  # spikes and inhibition happened


def test_selectivity_on_two_conditions():
    a = np.array([[4.0, 1.0, 0.0], [6.0, 1.0, 0.0]])  # neuron 0 prefers A, 1 equal, 2 silent
    b = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    sel = selectivity(a, b)
    # neuron 0: (5 - 1)/(5 + 1) = 2/3; d' = 4 / sqrt((1 + 0)/2)
    assert sel["index"][0] == pytest.approx(2 / 3)
    assert sel["dprime"][0] == pytest.approx(4 / np.sqrt(0.5))
    assert sel["index"][1] == 0.0 and np.isnan(sel["index"][2]) and np.isnan(sel["dprime"][1])


def test_pca_finds_the_known_axis():
    rng = np.random.default_rng(0)
    axis = np.array([3.0, 4.0, 0.0]) / 5.0
    x = rng.normal(size=(500, 1)) * 5.0 * axis + rng.normal(size=(500, 3)) * 0.1 + 7.0
    res = pca(x, 2)
    np.testing.assert_allclose(res["components"][0], axis, atol=0.01)
    assert res["explained_variance_ratio"][0] > 0.99
    np.testing.assert_allclose(res["mean"], 7.0 + 0 * axis, atol=0.5)
    assert res["scores"].shape == (500, 2)


def test_psth_and_trial_rates_by_condition():
    s = np.zeros((30, 2))
    s[5:8, 0] = 1  # neuron 0 fires in the first trial (gt 0)
    s[20:23, 1] = 1  # neuron 1 in the second (gt 1)
    trials = [
        {"start_step": 5, "end_step": 9, "gt": 0, "choice": 0},
        {"start_step": 20, "end_step": 24, "gt": 1, "choice": 1},
    ]
    acc = PSTHAccumulator(2, pre=2, post=5, event="start", by="gt")
    acc.add(s, trials)
    psth = acc.psth()
    # the two steps before a trial start belong to no trial: masked (NaN), not 0
    nan = np.nan
    np.testing.assert_allclose(psth["0"][:, 0], [nan, nan, 1, 1, 1, 0, 0])
    np.testing.assert_allclose(psth["1"][:, 1], [nan, nan, 1, 1, 1, 0, 0])
    rates = acc.rates()
    np.testing.assert_allclose(rates["0"], [[0.6, 0.0]])  # 3 spikes over steps 5..9


def test_tuning_curve_of_a_threshold_neuron():
    obs = np.linspace(-1, 1, 200)[:, None]
    s = (obs > 0).astype(float)  # fires only for positive observations
    acc = TuningAccumulator(1, n_bins=4, min_count=1)
    acc.add(s, obs)
    centres, curves = acc.curves()
    # bins of width (0.98 - -0.98) / 4 = 0.49 from -0.98: the 1st and 99th percentiles
    assert len(curves) == 1 and curves[0].shape[1] == 1
    # values below -0.98 and at/above 0.98 open bins -1 and 4: six bins in all
    np.testing.assert_allclose(curves[0][:, 0], [0, 0, 0, 1, 1, 1])
    np.testing.assert_allclose(np.diff(centres[0]), 0.49, rtol=1e-6)
    # a later episode further out adds bins on that side only
    acc.add(np.ones((10, 1)), np.full((10, 1), 2.5))
    c2, k2 = acc.curves()
    assert c2[0].size == 7 and k2[0][-1, 0] == 1.0 and c2[0][-1] == pytest.approx(2.695)


def test_network_analysis_on_a_stand_in_trial_trajectory():
    class Stand:  # a trajectory of a trial env, before Trajectory grows these attributes
        def __init__(self, rng):
            from snrl.networks import Activity, LayerActivity

            t = 60
            spikes = (rng.random((t, 4)) < 0.2).astype(np.float32)
            self.activity = Activity(
                [LayerActivity("lif0", "spiking", 4, spikes=spikes, v=spikes, sign=[1, 1, 1, -1])]
            )
            self.layers = self.activity.info()
            self.observations = np.zeros((t, 2))
            self.rewards = np.zeros(t)
            self.substeps = 1
            self.dt = 0.1
            self.trials = [
                {
                    "start_step": 10 * k,
                    "end_step": 10 * k + 9,
                    "gt": k % 2,
                    "choice": k % 2,
                    "decision_time": 0.5,
                    "t0": 0.0,
                    "conditions": {"coh": 6.4},
                }
                for k in range(6)
            ]

        def __len__(self):
            return 60

    rng = np.random.default_rng(0)
    res = NetworkAnalysis(Stand(rng).layers, dt=1e-3, psth_window=(2, 8))
    for _ in range(3):
        res.add(Stand(rng))
    summ = res.summary()
    sel = summ["layers"]["lif0"]["selectivity"]
    assert len(sel["index"]) == 4 and "gt=1" in sel["groups"]
    figs = res.figures()
    assert {"raster.png", "rates_cv.png", "psth.png", "pca.png"} <= set(figs)
    trajs, ratio = res.pca_trajectories("lif0")
    # the 2 steps before each trial start are masked: 8 bins in the trajectories
    assert set(trajs) == {"0", "1"} and trajs["0"].shape == (8, 3)
    assert 0 < ratio.sum() <= 1 + 1e-9


def test_deeper_layer_currents_sum_to_its_input_current():
    """Layer 2 of a Dale backbone: feed-forward spikes of layer 1 at the same step, split by
    the upstream signs, plus its own recurrence, add up to its integrated current."""
    from snrl.networks.spiking import SpikingBackbone

    torch.manual_seed(0)
    net = SpikingBackbone(3, [10, 8], None, force_dale_law=True, seed=2, dt=1e-3, tau_m=20e-3)
    x = torch.randn(50, 1, 3) * 4
    with torch.no_grad():
        res = net.run(x, net.initial_state(1))
    z0 = res.activity[0].spikes[:, 0].numpy().astype(float)
    z1 = res.activity[1].spikes[:, 0].numpy().astype(float)
    v1 = res.activity[1].v[:, 0].numpy().astype(float)
    w = layer_weights(net)["lif1"]
    cur = synaptic_currents(z1, w.w_rec, pre_spikes=z0, w_ff=w.w_in, bias=w.bias)
    alpha = np.exp(-1e-3 / 20e-3)
    v_prev = np.vstack([np.zeros((1, 8)), v1[:-1]])
    z_prev = np.vstack([np.zeros((1, 8)), z1[:-1]])
    np.testing.assert_allclose(
        cur["exc"] + cur["inh"] + cur["ext"], v1 - alpha * v_prev + z_prev, atol=1e-4
    )
    assert z0.sum() > 10 and (cur["inh"] < 0).any()


def test_decision_psth_is_aligned_to_the_choice_step():
    # env dt 0.1 s, 2 neuron steps per env step; trial from env step 3 (t0 = 0.1 s):
    # decision_time 0.5 s -> 4 env steps in -> env step 7 -> neuron row 14
    s = np.zeros((40, 1))
    s[14, 0] = 1
    trial = {"start_step": 3, "end_step": 12, "t0": 0.1, "decision_time": 0.5, "gt": 1}
    acc = PSTHAccumulator(1, pre=2, post=3, event="decision", by="gt")
    acc.add(s, [trial], substeps=2, env_dt=0.1)
    np.testing.assert_allclose(acc.psth()["1"][:, 0], [0, 0, 1, 0, 0])
    # without a choice (or dt): the trial's last step, env step 12 -> row 24
    acc = PSTHAccumulator(1, pre=0, post=1, event="decision", by="gt")
    s[24, 0] = 1
    acc.add(s, [dict(trial, decision_time=None)], substeps=2, env_dt=0.1)
    np.testing.assert_allclose(acc.psth()["1"][:, 0], [1])


def test_nan_mean_sem_by_hand():
    from snrl.analysis.trials import nan_mean_sem

    # three trials x two bins; the third trial does not cover bin 1
    x = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, np.nan]])
    mean, sem = nan_mean_sem(x)
    # bin 0: mean 3, sample variance ((-2)^2 + 0 + 2^2) / 2 = 4, sem sqrt(4 / 3)
    # bin 1: mean 4, sample variance (4 + 4) / 1 = 8, sem sqrt(8 / 2) = 2
    np.testing.assert_allclose(mean, [3.0, 4.0])
    np.testing.assert_allclose(sem, [np.sqrt(4 / 3), 2.0])
    # one finite value: a mean, no SEM; none: neither
    m1, s1 = nan_mean_sem(np.array([[7.0, np.nan], [np.nan, np.nan]]))
    assert m1[0] == 7.0 and np.isnan(s1[0]) and np.isnan(m1[1]) and np.isnan(s1[1])
    # integers are counted as floats; a 1-d input gives 0-d results
    m2, s2 = nan_mean_sem(np.array([1, 3]))
    assert m2.shape == () and float(m2) == 2.0 and float(s2) == 1.0
