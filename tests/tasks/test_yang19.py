"""snrl.tasks.yang19 against NeuroGym's yang19 collection (neurogym 2.3.1), task by task:

* the observation, ground-truth and reward tables of trials drawn by NeuroGym (their
  variables and durations given to ours) are identical, apart from the documented
  departures toward the paper (Yang et al., 2019), each asserted as such: the fixation cue
  and the fixation requirement up to the response period, a withheld no-go matching trial
  paid and counted correct;
* period durations and stimulus noise have NeuroGym's distributions (two-sample KS);
* the ring a stimulus is shown on is drawn per trial (NeuroGym alternates), and dmc's
  categories are the same halves for sample and test (NeuroGym's sample at pi is not).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("neurogym")
from neurogym.envs.collections import yang19 as ng19  # noqa: E402
from scipy import stats  # noqa: E402

import snrl.tasks as tasks  # noqa: E402
from snrl.tasks.spec import build_trials  # noqa: E402
from snrl.tasks.yang19 import TASKS  # noqa: E402
from tests.tasks.test_equivalence import _ng_tables  # noqa: E402

REACH = ["go", "rtgo", "dlygo", "anti", "rtanti", "dlyanti"]
DM = ["dm1", "dm2", "ctxdm1", "ctxdm2", "multidm"]
DLYDM = ["dlydm1", "dlydm2", "ctxdlydm1", "ctxdlydm2", "multidlydm"]
MATCH = ["dms", "dnms", "dmc", "dnmc"]
DIM = 16


def _index(theta: float) -> int:
    return int(round(theta / (2 * np.pi / DIM))) % DIM


def _ng_env(short: str, modality: int, **kwargs):
    """NeuroGym's trial env of the task (of the modality's sub-env for go/anti and matching,
    which NeuroGym schedules), its rng seeded."""
    env = getattr(ng19, short)(**kwargs)
    if hasattr(env, "envs"):
        env = env.envs[modality].unwrapped
    return env


def _fixed(short: str, env, modality: int, gt: np.ndarray) -> dict:
    """Our trial variables for NeuroGym's trial ``env.trial`` (durations included)."""
    trial = env.trial
    fixed = {f"_duration_{p}": env.end_t[p] - env.start_t[p] for p in env.start_t}
    fixed["ground_truth"] = int(gt.max())
    if short in REACH:
        fixed.update(direction=int(trial["ground_truth"]), modality=modality)
    elif short in MATCH:
        fixed.update(
            modality=modality,
            match=int(trial["ground_truth"] == "match"),
            sample_direction=_index(trial["sample_theta"]),
            test_direction=_index(trial["test_theta"]),
        )
    else:
        fixed.update(direction1=_index(trial["theta1"]), direction2=_index(trial["theta2"]))
        fixed.update({k: v for k, v in trial.items() if k.startswith("coh")})
    return fixed


def _compare(short: str, seed: int, modality: int) -> None:
    kwargs = {} if short in REACH else {"sigma": 0.0}
    env = _ng_env(short, modality, **kwargs)
    env.seed(seed)
    obs, gt, outcome = _ng_tables(env, {})
    spec = tasks.make_spec(f"yang19.{short}-v0", **kwargs)
    fixed = _fixed(short, env, modality, gt)
    tr = build_trials(spec, torch.Generator().manual_seed(0), 1, fixed=fixed)
    n = int(tr.length[0])
    my_obs, my_gt = tr.obs[0, :n].numpy(), tr.gt[0, :n].numpy()
    my_outcome = tr.outcome[0, :n].double().numpy()
    assert my_obs.shape == obs.shape
    np.testing.assert_array_equal(my_gt, gt)
    # the paper's departures: the fixation cue and requirement up to the response period
    before = np.zeros(n, dtype=bool)
    for p in env.start_t:
        if p != "decision":
            before[env.start_ind[p] : env.end_ind[p]] = True
    late = before.copy()
    late[env.start_ind["fixation"] : env.end_ind["fixation"]] = False
    if short not in REACH:  # NeuroGym shows the cue in the first period only
        assert late.any() and (obs[late, 0] == 0).all()
    assert (my_obs[before, 0] == 1).all()
    expected_obs = obs.copy()
    expected_obs[before, 0] = 1.0
    np.testing.assert_array_equal(my_obs, expected_obs)
    expected = outcome.copy()
    assert (outcome[late, 1:, 0] == 0).all()  # NeuroGym: a response there costs nothing
    expected[late, 1:, 0] = spec.rewards.abort
    if short in MATCH and gt.max() == 0:  # a no-go trial withheld to its end
        assert outcome[-1, 0, 0] == 0 and outcome[-1, 0, 2] == 0  # NeuroGym: unpaid, wrong
        expected[-1, 0, 0] = spec.rewards.correct
        expected[-1, 0, 2] = 1.0
    my_outcome[..., 2] *= my_outcome[..., 1]  # NeuroGym reports performance at trial ends
    np.testing.assert_allclose(my_outcome, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("short", REACH + DM + DLYDM + MATCH)
def test_tables_match_neurogym(short):
    for seed, modality in ((0, 0), (1, 1)):
        _compare(short, seed, modality)


@pytest.mark.slow
@pytest.mark.parametrize("short", MATCH + ["multidm", "multidlydm"])
def test_tables_match_neurogym_many_trials(short):
    for seed in range(3, 13):
        _compare(short, seed, seed % 2)


def test_ids_layout_and_order():
    assert list(TASKS) == [f"yang19.{s}-v0" for s in REACH + DM + DLYDM + MATCH]
    for name in TASKS:
        spec = tasks.make_spec(name)
        assert (spec.n_obs, spec.n_act, spec.dt) == (33, 17, 100.0)
        assert name in tasks.TASKS


# ---- distributions ----------------------------------------------------------------------------
def _check_lengths(short: str, n: int) -> None:
    env = _ng_env(short, 0)
    env.seed(0)
    ng = []
    for _ in range(n):
        env.new_trial()
        ng.append(env.ob.shape[0])
    tr = build_trials(tasks.make_spec(f"yang19.{short}-v0"), torch.Generator().manual_seed(0), n)
    assert stats.ks_2samp(np.asarray(ng), tr.length.numpy()).pvalue > 0.01
    assert np.ptp(ng) > 0  # there are random durations to compare


@pytest.mark.parametrize("short", ["dm1", "ctxdm2", "dlydm1"])
def test_trial_lengths_match_neurogym(short):
    _check_lengths(short, 2000)


@pytest.mark.slow
@pytest.mark.parametrize("short", ["dm1", "multidm", "dlydm2", "ctxdlydm1"])
def test_trial_lengths_match_neurogym_10k(short):
    _check_lengths(short, 10_000)


def _check_noise(short: str, n: int) -> None:
    """The first stimulus step on a channel away from both bumps (trials drawn by each)."""
    env = _ng_env(short, 0)
    env.seed(0)
    period = "stimulus" if short in DM else "sample" if short in MATCH else "stim1"
    ng = []
    spec = tasks.make_spec(f"yang19.{short}-v0")
    tr = build_trials(spec, torch.Generator().manual_seed(0), n)
    first = (tr.start[:, spec.period_names.index(period)] / spec.dt).long()
    # ring 2's channels carry noise only in the dm family (both rings); ring 1 of the matching
    # tasks' modality-0 trials: the ring the bump is on, read on the channel opposite it
    if short in MATCH:
        keep = tr.values["modality"] == 0
        ch = 1 + torch.remainder(tr.values["sample_direction"] + DIM // 2, DIM).long()
    else:
        keep = torch.ones(n, dtype=torch.bool)
        ch = torch.full((n,), 2 * DIM)
    mine = tr.obs[torch.arange(n), first, ch][keep].numpy()
    for _ in range(n):
        env.new_trial()
        if short in MATCH:
            c = 1 + (_index(env.trial["sample_theta"]) + DIM // 2) % DIM
        else:
            c = 2 * DIM
        ng.append(env.ob[env.start_ind[period], c])
    # the bump's tail there: 0.8 exp(-32) strengths, far below the noise
    assert stats.ks_2samp(np.asarray(ng), mine).pvalue > 0.01
    assert np.std(mine) > 0.05


@pytest.mark.parametrize("short", ["dm1", "dms"])
def test_noise_matches_neurogym(short):
    _check_noise(short, 2000)


@pytest.mark.slow
@pytest.mark.parametrize("short", ["dm2", "dlydm1", "dnmc"])
def test_noise_matches_neurogym_10k(short):
    _check_noise(short, 10_000)


def test_matching_noise_only_on_the_shown_ring():
    spec = tasks.make_spec("yang19.dms-v0")
    tr = build_trials(spec, torch.Generator().manual_seed(3), 200)
    ring = tr.values["modality"].long()
    std = tr.noise_std.amax(dim=1)  # (n, C): the largest std over the trial
    for k in range(200):
        on = slice(1 + DIM * int(ring[k]), 1 + DIM * (int(ring[k]) + 1))
        off = slice(1 + DIM * (1 - int(ring[k])), 1 + DIM * (2 - int(ring[k])))
        assert (std[k, on] > 0.09).all() and (std[k, off] == 0).all()


# ---- departures toward the paper --------------------------------------------------------------
def test_ring_is_drawn_per_trial_where_neurogym_alternates():
    sched = ng19.go()
    rings = []
    for _ in range(40):
        sched.new_trial()
        rings.append(sched.i_env)
    assert all(a != b for a, b in zip(rings, rings[1:]))  # NeuroGym: always the other ring
    tr = build_trials(tasks.make_spec("yang19.go-v0"), torch.Generator().manual_seed(0), 4000)
    ring = tr.values["modality"].numpy()
    assert abs(ring.mean() - 0.5) < 0.03
    assert abs((ring[1:] == ring[:-1]).mean() - 0.5) < 0.03  # repeats half the time


def test_category_halves_are_the_same_for_sample_and_test():
    """dmc: a sample at pi (index 8) is in the second half, as tests at pi are; NeuroGym
    puts the sample in the first half (a match then tests in [0, pi))."""
    spec = tasks.make_spec("yang19.dmc-v0")
    tr = build_trials(spec, torch.Generator().manual_seed(0), 400, fixed={"sample_direction": 8})
    match = tr.values["match"] == 1
    test = tr.values["test_direction"]
    assert (test[match] >= 8).all() and (test[~match] < 8).all()
    env = _ng_env("dmc", 0)
    env.seed(0)
    seen = False
    for _ in range(2000):
        env.new_trial(ground_truth="match")
        if _index(env.trial["sample_theta"]) == 8:
            assert _index(env.trial["test_theta"]) < 8
            seen = True
    assert seen


def test_a_withheld_nogo_trial_is_correct():
    """dnms on a match trial: fixating through the decision pays 1 and reports performance
    1 at the trial's last step; a response there is wrong."""
    spec = tasks.make_spec("yang19.dnms-v0", sigma=0.0)
    tr = build_trials(spec, torch.Generator().manual_seed(0), 8, fixed={"match": 1})
    assert (tr.gt == 0).all()
    last = int(tr.length[0]) - 1
    reward, ends, perf = tr.outcome[0, last, 0]
    assert (float(reward), float(ends), float(perf)) == (1.0, 1.0, 1.0)
    assert tr.outcome[0, last, 1:, 0].eq(0).all() and tr.outcome[0, last, 1:, 2].eq(0).all()


# ---- a scripted policy ------------------------------------------------------------------------
#: (task, trials, tolerance): about 3 standard errors of the difference (go/anti: exact)
ORACLE = [("go", 400, 0.01), ("rtanti", 400, 0.01), ("dm1", 400, 0.06)]
ORACLE_SLOW = [("dlyanti", 400, 0.01), ("dm1", 3000, 0.025), ("multidm", 3000, 0.025),
               ("ctxdlydm2", 3000, 0.025), ("multidlydm", 3000, 0.025)]  # fmt: skip


@pytest.mark.parametrize(("short", "n_trials", "tol"), ORACLE)
def test_oracle_accuracy_matches_neurogym(short, n_trials, tol):
    _check_oracle(short, n_trials, tol)


@pytest.mark.slow
@pytest.mark.parametrize(("short", "n_trials", "tol"), ORACLE_SLOW)
def test_oracle_accuracy_matches_neurogym_3k(short, n_trials, tol):
    _check_oracle(short, n_trials, tol)


def _check_oracle(short, n_trials, tol):
    """The same observation-reading policy scores the same accuracy on NeuroGym's env (snrl's
    vector env of it) and on ours, trials scored by snrl's TrialTracker on both."""
    import warnings

    from snrl.envs import make_vector_env
    from tests.tasks.oracles import Yang19Oracle
    from tests.tasks.test_oracle import oracle_accuracy

    name = f"yang19.{short}-v0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ng = oracle_accuracy(make_vector_env(name, 32, seed=0), name, n_trials,
                             oracle=Yang19Oracle(short, 32))  # fmt: skip
    ours = oracle_accuracy(tasks.make_vector_env(name, 32, seed=0), name, n_trials,
                           oracle=Yang19Oracle(short, 32))  # fmt: skip
    assert abs(ours - ng) <= tol, (ours, ng)
    assert ours > 0.6  # the oracle does the task
