"""Oracles for the fixed-point finder (a linear map, bistable 2-unit rate networks, a slow
point), the rate maps of LIF and ALIF layers, the frozen task inputs, and the analysis run
through ``analyze``."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from snrl.analysis.fixed_points import (
    FrozenInputs,
    classify_points,
    find_fixed_points,
    lif_rate_map,
)
from snrl.errors import UserError
from snrl.layers import ALIFLayer, LIFLayer


def test_linear_map_fixed_point_and_eigenvalues():
    a = torch.tensor([[0.5, 0.2], [-0.1, 0.3]], dtype=torch.float64)
    b = torch.tensor([1.0, -2.0], dtype=torch.float64)
    res = find_fixed_points(lambda h: h @ a.T + b, np.random.default_rng(0).normal(size=(3, 2)))
    want = np.linalg.solve(np.eye(2) - a.numpy(), b.numpy())
    np.testing.assert_allclose(res["points"], np.tile(want, (3, 1)), atol=1e-7)
    ev = np.sort_complex(np.linalg.eigvals(a.numpy()))
    for row in res["eigenvalues"]:
        np.testing.assert_allclose(np.sort_complex(row), ev, atol=1e-10)
    assert res["stable"].all() and res["speed"].max() < 1e-14
    # an expanding map: same fixed point, unstable
    res2 = find_fixed_points(lambda h: 2.0 * h + 1.0, np.ones((1, 2)))
    np.testing.assert_allclose(res2["points"], [[-1.0, -1.0]], atol=1e-8)
    assert not res2["stable"][0]


def test_bistable_two_unit_rate_network():
    # h' = tanh(2 h) per unit: fixed points 0 (slope 2, unstable) and +-x* (x* = tanh 2x*)
    xs = brentq(lambda x: x - np.tanh(2 * x), 0.5, 1.0)
    starts = np.array([[0.7, 0.8], [-0.6, 0.9], [-1.2, -0.8], [0.02, 0.9]])
    res = find_fixed_points(lambda h: torch.tanh(2.0 * h), starts)
    np.testing.assert_allclose(res["points"][:3], [[xs, xs], [-xs, xs], [-xs, -xs]], atol=1e-7)
    assert res["stable"][:3].all()
    np.testing.assert_allclose(np.abs(res["eigenvalues"][0]), 2 * (1 - xs**2), atol=1e-7)
    # near the saddle: found with one unstable direction (eigenvalue 2)
    np.testing.assert_allclose(res["points"][3], [0.0, xs], atol=1e-6)
    assert not res["stable"][3]
    assert np.abs(res["eigenvalues"][3]).max() == pytest.approx(2.0, abs=1e-6)


def test_lif_rate_map_is_the_smoothed_lif_step():
    layer = LIFLayer(3, 4, dt=1e-3, tau_m=20e-3, force_dale_law=True, recurrent_sign=0.25)
    x = np.array([0.5, -1.0, 2.0])
    step = lif_rate_map(layer, x, beta=0.05)
    v = torch.tensor([[0.2, 1.5, -0.3, 1.0]], dtype=torch.float64)
    alpha = np.exp(-1e-3 / 20e-3)
    r = 1 / (1 + np.exp(-(v.numpy() - 1.0) / 0.05))
    w_in = layer.forward_weights.detach().double().numpy()
    w_rec = layer.recurrent_weights.detach().double().numpy()
    b = layer.bias.detach().double().numpy()
    want = alpha * v.numpy() + x @ w_in + b + r @ w_rec - r
    np.testing.assert_allclose(step(v).numpy(), want, rtol=1e-6)  # alpha is float32
    with pytest.raises(UserError, match="beta"):
        lif_rate_map(layer, x, beta=0)


def test_dedup_and_classify_two_attractors_and_a_saddle():
    # h' = h/2 + tanh(2 M h)/2, M swaps the units: stable points +-(x*, x*) (x* = tanh 2x*,
    # Jacobian 1/2 + (1 - x*^2) M: eigenvalues 1/2 +- (1 - x*^2)) and a saddle at 0
    # (eigenvalues 1/2 +- 1 = 1.5, -0.5); the anti-diagonal is the saddle's stable manifold
    xs = brentq(lambda x: x - np.tanh(2 * x), 0.5, 1.0)
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)

    def step(h):
        return 0.5 * h + 0.5 * torch.tanh(2.0 * h @ swap)

    grid = np.linspace(-1.5, 1.5, 5)
    starts = np.array([[a, b] for a in grid for b in grid])
    res = find_fixed_points(step, starts)
    kept, lost = classify_points(
        res["points"], res["speed"], res["eigenvalues"], fixed_tol=1e-14, slow_tol=1e-8,
        merge_tol=1e-5,
    )  # fmt: skip
    assert lost == 0 and len(kept) == 3
    assert sum(k["n_starts"] for k in kept) == 25
    by_kind = {}
    for k in kept:
        by_kind.setdefault(k["kind"], []).append(k)
    assert sorted(by_kind) == ["stable", "unstable"] and len(by_kind["stable"]) == 2
    stable = sorted(res["points"][k["index"]][0] for k in by_kind["stable"])
    np.testing.assert_allclose(stable, [-xs, xs], atol=1e-7)
    for k in by_kind["stable"]:
        np.testing.assert_allclose(res["points"][k["index"]][1], res["points"][k["index"]][0])
        assert k["max_abs_eigenvalue"] == pytest.approx(0.5 + (1 - xs**2), abs=1e-7)
        assert k["n_unstable_modes"] == 0
    (saddle,) = by_kind["unstable"]
    np.testing.assert_allclose(res["points"][saddle["index"]], [0.0, 0.0], atol=1e-9)
    assert saddle["max_abs_eigenvalue"] == pytest.approx(1.5, abs=1e-9)
    assert saddle["n_unstable_modes"] == 1
    assert saddle["n_starts"] == 5  # the five starts on the anti-diagonal
    assert [k["speed"] for k in kept] == sorted(k["speed"] for k in kept)


def test_a_slow_point_is_classified_slow_or_dropped():
    # h' = h + 0.1 (h^2 + 1e-3): no fixed point; q is least at h = 0, q = (1e-4)^2 / 2
    def step(h):
        return h + 0.1 * (h**2 + 1e-3)

    res = find_fixed_points(step, np.array([[0.3], [-0.2], [0.05]]))
    # G = dF/dh - 1 = 0.2 h vanishes there: the search converges linearly and stops on the
    # plateau (its ``stall`` rule), close to the minimum
    np.testing.assert_allclose(res["points"][:, 0], 0.0, atol=1e-4)
    np.testing.assert_allclose(res["speed"], 0.5e-8, rtol=1e-4)
    kept, lost = classify_points(
        res["points"], res["speed"], res["eigenvalues"], fixed_tol=1e-12, slow_tol=1e-6,
        merge_tol=1e-4,
    )  # fmt: skip
    assert lost == 0 and len(kept) == 1 and kept[0]["kind"] == "slow"
    assert kept[0]["n_starts"] == 3 and kept[0]["max_abs_eigenvalue"] == pytest.approx(
        1.0, abs=1e-4
    )
    kept, lost = classify_points(
        res["points"], res["speed"], res["eigenvalues"], fixed_tol=1e-12, slow_tol=1e-9,
        merge_tol=1e-4,
    )  # fmt: skip
    assert kept == [] and lost == 3
    with pytest.raises(UserError, match="fixed_tol"):
        classify_points(res["points"], res["speed"], res["eigenvalues"], fixed_tol=1.0,
                        slow_tol=0.1, merge_tol=0.0)  # fmt: skip


def test_alif_rate_map_is_the_smoothed_alif_step():
    layer = ALIFLayer(2, 3, dt=1e-3, tau_m=20e-3, tau_a=0.2, beta=1.5)
    x = np.array([0.5, -1.0])
    step = lif_rate_map(layer, x, beta=0.2)
    v = np.array([[0.4, 1.3, -0.2]])
    a = np.array([[0.1, 0.0, 0.3]])
    out = step(torch.tensor(np.concatenate([v, a], 1))).numpy()
    alpha, rho = np.exp(-1e-3 / 20e-3), np.exp(-1e-3 / 0.2)
    r = 1 / (1 + np.exp(-(v - 1.0 - 1.5 * a) / 0.2))
    a_next = rho * a + (1 - rho) * r
    w_in = layer.forward_weights.detach().double().numpy()
    w_rec = layer.recurrent_weights.detach().double().numpy()
    b = layer.bias.detach().double().numpy()
    v_next = alpha * v + x @ w_in + b + r @ w_rec - (1.0 + 1.5 * a_next) * r
    np.testing.assert_allclose(out, np.concatenate([v_next, a_next], 1), rtol=1e-5, atol=1e-7)


def test_lif_rate_map_analytic_jacobian_matches_autograd():
    layer = LIFLayer(3, 6, dt=1e-3, tau_m=20e-3, force_dale_law=True)
    step = lif_rate_map(layer, np.array([0.2, 0.1, -0.4]), beta=0.3)
    h = torch.tensor(np.random.default_rng(1).normal(size=(4, 6)) + 1.0)
    auto = torch.stack(
        [torch.autograd.functional.jacobian(lambda v: step(v[None])[0], r) for r in h]
    )
    np.testing.assert_allclose(step.jacobian(h).numpy(), auto.numpy(), atol=1e-12)


def _trial(start, cond, t0=0.0):
    periods = {"fixation": [0.0, 0.2], "stimulus": [0.2, 0.4], "delay": [0.4, 0.4]}
    return {"start_step": start, "end_step": start + 3 - (t0 > 0), "t0": t0,
            "conditions": cond, "periods": periods}  # fmt: skip


def test_frozen_inputs_are_period_means_split_by_condition_where_they_differ():
    # dt 0.1: steps at t = 0, 0.1 (fixation), 0.2, 0.3 (stimulus); the first trial starts
    # at t0 = 0.1 (NeuroGym's reset step), so it has one fixation step
    x = np.array(
        [[2, 0], [1, 5], [1, 7],           # trial 0 (t0 0.1): fixation, stimulus, stimulus
         [2, 0], [2, 0], [1, 1], [1, 3]],  # trial 1: fixation x2, stimulus x2
        dtype=float,
    )  # fmt: skip
    trials = [_trial(0, {"coh": 6.4}, t0=0.1), _trial(3, {"coh": 0.0})]
    fi = FrozenInputs()
    fi.add(x, trials, 0.1)
    got = {i["label"]: i for i in fi.inputs()}
    assert list(got) == ["fixation", "stimulus coh=0", "stimulus coh=6.4"]  # by period, value
    np.testing.assert_allclose(got["fixation"]["x"], [2.0, 0.0])
    assert got["fixation"]["n_steps"] == 3 and got["fixation"]["conditions"] == {}
    np.testing.assert_allclose(got["stimulus coh=6.4"]["x"], [1.0, 6.0])
    np.testing.assert_allclose(got["stimulus coh=0"]["x"], [1.0, 2.0])
    assert got["stimulus coh=0"]["conditions"] == {"coh": "0"}
    # the same stimulus under both conditions: one pooled input
    fi = FrozenInputs()
    fi.add(np.array([[1, 0], [1, 2], [1, 2], [1, 0], [1, 0], [1, 2], [1, 2]], float), trials, 0.1)
    assert [i["label"] for i in fi.inputs()] == ["fixation", "stimulus"]
    # no trials: the mean of every step
    fi = FrozenInputs()
    fi.add(x, None, None)
    (only,) = fi.inputs()
    assert only["label"] == "all steps"
    np.testing.assert_allclose(only["x"], x.mean(0))


def test_analyze_finds_points_of_lif_and_alif_policies():
    import json

    import snrl
    from snrl.analysis import analyze

    for backbone, state in (("lif", "v (N)"), ("alif", "v and a (2N)")):
        name = backbone + "0"
        algo = snrl.PPO(
            "PerceptualDecisionMaking-v0", backbone=backbone, hidden_size=10, n_envs=1, seed=0
        )
        res = analyze(algo, episodes=1, decode=False, compare_initial=False, fixed_points=True)
        fp = json.loads(json.dumps(res.summary()))["fixed_points"]
        assert fp["state"] == state and fp["layer"] == name and "not states" in fp["approximation"]
        labels = [e["label"] for e in fp["inputs"]]
        assert labels[0] == "fixation" and any(lab.startswith("stimulus coh=") for lab in labels)
        for e in fp["inputs"]:
            kinds = [p["kind"] for p in e["points"]]
            assert e["n_points"] == len(kinds) == e["n_stable"] + e["n_unstable"] + e["n_slow"]
            assert e["n_points"] + e["n_not_converged"] <= fp["parameters"]["n_starts"]
            for p in e["points"]:
                fixed = p["speed"] <= fp["parameters"]["fixed_tol"]
                assert p["kind"] == ("slow" if not fixed else "stable" if
                                     p["max_abs_eigenvalue"] < 1 else "unstable")  # fmt: skip
                assert len(p["pc"]) == 3
            assert len(e["input"]) == 3  # PDM: fixation and two stimulus channels
        assert "fixed_points.png" in res.figures()
        algo.close()


def test_analyze_fixed_points_of_a_non_trial_env_and_refusals():
    import snrl
    from snrl.analysis import analyze

    algo = snrl.PPO("CartPole-v1", backbone="lif", hidden_size=8, n_envs=1, seed=0)
    res = analyze(algo, episodes=1, compare_initial=False, fixed_points=True)
    assert [e["label"] for e in res.summary()["fixed_points"]["inputs"]] == ["all steps"]
    off = analyze(algo, episodes=1, compare_initial=False)
    assert "fixed_points" not in off.summary() and "fixed_points.png" not in off.figures()
    algo.close()
    algo = snrl.PPO("CartPole-v1", backbone="spylif", hidden_size=8, n_envs=1, seed=0)
    calls = []
    with pytest.raises(UserError, match="LIF or ALIF"):
        analyze(algo, episodes=1, fixed_points=True, on_episode=lambda k, t: calls.append(k))
    assert calls == []  # refused before any episode ran
    algo.close()


@pytest.mark.slow  # trains a run and analyzes it twice: about 26 s on 2 busy cores
def test_snrl_analyze_fixed_points(tmp_path, capsys):
    import json

    from tests.cli_run import assert_user_error, snrl_inproc, train_tiny_pdm

    run = train_tiny_pdm(tmp_path / "pdm")
    res = snrl_inproc(capsys, "analyze", run, "--fixed-points-beta", "0", "--fixed-points")
    assert_user_error(res, "beta=0")
    assert not (run / "analysis").exists()  # nothing half-written
    res = snrl_inproc(
        capsys, "analyze", run, "--episodes", 1, "--no-decode", "--fixed-points",
        "--fixed-points-beta", "0.5",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    assert "fixed_points.png" in line["files"]
    assert (run / "analysis" / "fixed_points.png").stat().st_size > 0
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    fp = summary["fixed_points"]
    assert fp["parameters"]["beta"] == 0.5 and fp["n_visited_states"] > 0
    assert set(line["fixed_points"]) == {e["label"] for e in fp["inputs"]}
    for e in fp["inputs"]:
        assert line["fixed_points"][e["label"]]["stable"] == e["n_stable"]
    # a rerun without the flag drops snrl's stale figure
    res = snrl_inproc(capsys, "analyze", run, "--episodes", 1, "--no-decode")
    assert res.returncode == 0, res.stderr
    assert not (run / "analysis" / "fixed_points.png").exists()
