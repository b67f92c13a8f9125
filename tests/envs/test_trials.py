"""TrialTracker against a hand-written info stream and a hand-computed trial log (oracle),
for one env and for a gymnasium vector env with SAME_STEP autoreset."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from snrl.envs.trials import TrialTracker, summarize_trials, unbatch_info
from snrl.training.metrics import trial_columns


def _start(conditions, t0):
    return {"conditions": conditions, "t0": t0, "dt": 0.1, "fixation": 0}


# Trial A: fixed timing (decision after the stimulus); an early 1 during the stimulus, then
#   fixation, then 2 in the decision period at t = 0.4. Steps 0-3.
# Trial B: reaction-time layout (decision [0.2, 0.4) inside stimulus [0.1, 0.4)); a 1 during
#   the stimulus before the decision (t = 0.1) does not count; 1 at t = 0.2 does. The env
#   reports performance 0 (as NeuroGym's GoNogo does for withheld no-go trials). Steps 4-6.
# Trial C: no response: fixation to the end. Steps 7-9.
# Trial D: starts at step 10, cut by the end of the episode after step 11: not reported.
PERIODS_A = {"fixation": [0.0, 0.1], "stimulus": [0.1, 0.3], "decision": [0.3, 0.5]}
PERIODS_B = {"fixation": [0.0, 0.1], "stimulus": [0.1, 0.4], "decision": [0.2, 0.4]}
PERIODS_C = {"fixation": [0.0, 0.1], "decision": [0.1, 0.3]}
RESET_INFO = {"trial_start": _start({"ground_truth": 1, "coh": 6.4}, 0.1)}
ACTIONS = [1, 0, 0, 2, 0, 1, 1, 0, 0, 0, 0, 0]
# the fixation cue in the observation each action was taken on: on until the decision period
CUES = [1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1]
STREAM = [
    {"new_trial": False, "gt": 0},
    {"new_trial": False, "gt": 0},
    {"new_trial": False, "gt": 2},
    {
        "new_trial": True,
        "gt": 2,
        "performance": 1,
        "trial_periods": PERIODS_A,
        "trial_start": _start({"ground_truth": 0, "coh": 0.0, "stim": np.zeros(20)}, 0.0),
    },
    {"new_trial": False, "gt": 0},
    {"new_trial": False, "gt": 1},
    {
        "new_trial": True,
        "gt": 1,
        "performance": 0,
        "trial_periods": PERIODS_B,
        "trial_start": _start({"ground_truth": 1, "coh": 51.2}, 0.0),
    },
    {"new_trial": False, "gt": 0},
    {"new_trial": False, "gt": 2},
    {
        "new_trial": True,
        "gt": 2,
        "performance": 0,
        "trial_periods": PERIODS_C,
        "trial_start": _start({"ground_truth": 0, "coh": 6.4}, 0.0),
    },
    {"new_trial": False, "gt": 0},
    {"new_trial": False, "gt": 0},
]

ORACLE = [
    {
        "env": 0,
        "index": 0,
        "start_step": 0,
        "end_step": 3,
        "n_steps": 4,
        "t0": 0.1,
        "choice": 2,
        "gt": 2,
        "correct": True,
        "fixation_break": True,  # the 1 at t = 0.1, with the cue on
        "performance": 1.0,
        "decision_time": 0.4,
        "reaction_time": None,
        "conditions": {"ground_truth": 1, "coh": 6.4},
        "periods": PERIODS_A,
    },
    {
        "env": 0,
        "index": 1,
        "start_step": 4,
        "end_step": 6,
        "n_steps": 3,
        "t0": 0.0,
        "choice": 1,
        "gt": 1,
        "correct": True,
        "fixation_break": True,  # the 1 at t = 0.1, with the cue on (decision from 0.2)
        "performance": 0.0,
        "decision_time": 0.2,
        "reaction_time": 0.1,  # 0.2 s (choice) - 0.1 s (stimulus onset)
        "conditions": {"ground_truth": 0, "coh": 0.0},  # the 20-value array is dropped
        "periods": PERIODS_B,
    },
    {
        "env": 0,
        "index": 2,
        "start_step": 7,
        "end_step": 9,
        "n_steps": 3,
        "t0": 0.0,
        "choice": 0,
        "gt": 2,
        "correct": False,
        "fixation_break": False,
        "performance": 0.0,
        "decision_time": None,
        "reaction_time": None,
        "conditions": {"ground_truth": 1, "coh": 51.2},
        "periods": PERIODS_C,
    },
]


def _close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _assert_log(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k in w:
            assert _close(g[k], w[k]), (k, g[k], w[k])


def test_one_env_stream_gives_the_hand_computed_trial_log():
    tracker = TrialTracker(1)
    tracker.reset(RESET_INFO)
    got = []
    for action, info, cue in zip(ACTIONS, STREAM, CUES):
        got += tracker.step(action, info, cue=bool(cue))
    assert tracker.active
    _assert_log(got, ORACLE)


def test_summary_and_metrics_columns_of_the_oracle_log():
    s = summarize_trials(ORACLE)
    assert s["n_trials"] == 3
    assert s["accuracy"] == pytest.approx(2 / 3)
    assert s["accuracy_by_condition"]["coh"] == {
        "0.0": {"n": 1, "accuracy": 1.0},
        "6.4": {"n": 1, "accuracy": 1.0},
        "51.2": {"n": 1, "accuracy": 0.0},
    }
    assert s["accuracy_by_condition"]["ground_truth"]["1"] == {"n": 2, "accuracy": 0.5}
    # A and B were right but left fixation before their decision periods; C held it and
    # missed: by Yang et al.'s criterion no trial counts
    assert s["fixation_breaks"] == pytest.approx(2 / 3)
    assert s["accuracy_fixation_held"] == 0.0
    cols = trial_columns(ORACLE)
    assert cols["trials"] == 3 and cols["trial_accuracy"] == pytest.approx(2 / 3)
    assert math.isnan(cols["eval_trial_accuracy"])
    assert math.isnan(trial_columns([])["trial_accuracy"])


def test_fixation_held_accuracy_per_task_counts_only_trials_without_a_break():
    def trial(task, correct, broke):
        return {"correct": correct, "fixation_break": broke, "conditions": {"task": task}}

    log = [
        trial("a", True, False),
        trial("a", True, True),
        trial("a", False, False),
        trial("a", True, None),  # no response period: counts as `correct` says
        trial("b", True, True),
        trial("b", None, None),  # not scored
    ]
    s = summarize_trials(log)
    assert s["accuracy_by_task"] == {"a": 0.75, "b": 1.0}
    assert s["accuracy_fixation_held_by_task"] == {"a": 0.5, "b": 0.0}
    assert s["accuracy"] == pytest.approx(4 / 5)
    assert s["accuracy_fixation_held"] == pytest.approx(2 / 5)
    assert s["fixation_breaks"] == pytest.approx(2 / 4)
    assert math.isnan(summarize_trials([trial("a", True, None)])["fixation_breaks"])


def test_an_env_without_trials_reports_nothing():
    tracker = TrialTracker(1)
    tracker.reset({})
    assert tracker.step(0, {"new_trial": True, "gt": 1, "performance": 1}) == []
    assert not tracker.active


class _Scripted(gym.Env):
    """Replays RESET_INFO and STREAM (observations are zeros; actions are not checked)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k = 0
        return np.zeros(1, np.float32), dict(RESET_INFO)

    def step(self, action):
        info = dict(STREAM[self.k % len(STREAM)])
        self.k += 1
        return np.zeros(1, np.float32), 0.0, False, False, info


def test_vector_env_with_autoreset_gives_the_same_log_per_env():
    n = 2
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.TimeLimit(_Scripted(), len(STREAM)) for _ in range(n)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    tracker = TrialTracker(n)
    _, info = envs.reset(seed=0)
    tracker.reset(info)
    got, truncs = [], []
    # one whole episode (the last step truncates: trial D is dropped), then 4 more steps of
    # the next episode: its first trial again, counted from step 0
    actions = ACTIONS + ACTIONS[:4]
    for a, cue in zip(actions, CUES + CUES[:4]):
        _, _, _, trunc, info = envs.step(np.full(n, a))
        got += tracker.step(np.full(n, a), info, cue=np.full(n, bool(cue)))
        truncs.append(trunc.copy())
    assert truncs[len(STREAM) - 1].all() and not np.any(truncs[: len(STREAM) - 1])
    envs.close()
    want = []
    for trial in ORACLE:
        want += [dict(trial, env=i) for i in range(n)]
    want += [dict(ORACLE[0], env=i) for i in range(n)]
    _assert_log(got, want)


def test_unbatch_info_follows_the_masks():
    infos = {
        "a": np.array([1, 2]),
        "_a": np.array([True, False]),
        "d": {"x": np.array([0.5, 0.7]), "_x": np.array([False, True])},
        "_d": np.array([True, True]),
    }
    assert unbatch_info(infos, 0) == {"a": 1, "d": {}}
    assert unbatch_info(infos, 1) == {"d": {"x": 0.7}}


def _traj(**kw):
    from snrl.trajectory import Trajectory

    t = 4
    return Trajectory(
        observations=np.zeros((t, 2)),
        actions=np.zeros(t, np.int64),
        rewards=np.zeros(t),
        terminated=np.zeros(t, bool),
        truncated=np.zeros(t, bool),
        **kw,
    )


def test_trajectory_keeps_task_arrays_trials_dt_and_substeps(tmp_path):
    import json

    from snrl.errors import UserError
    from snrl.trajectory import Trajectory

    task = {
        "gt": np.array([0.0, 0.0, 2.0, 2.0]),
        "new_trial": np.array([False, False, False, True]),
        "performance": np.array([np.nan, np.nan, np.nan, 1.0]),
    }
    traj = _traj(task=task, trials=ORACLE[:1], dt=0.1)
    back = Trajectory.load(traj.save(tmp_path / "t.npz"))
    assert back.trials == ORACLE[:1] and back.dt == 0.1 and back.substeps == 1
    np.testing.assert_array_equal(back.task["performance"], task["performance"])
    with pytest.raises(UserError, match="task\\['gt'\\] has shape"):
        _traj(task={"gt": np.zeros(3)})
    with pytest.raises(UserError, match="substeps"):
        _traj(substeps=0)
    with pytest.raises(UserError, match="dt="):
        _traj(dt=-1.0)
    # a file of format 2 (before task fields) still loads, without them
    path = tmp_path / "v2.npz"
    _traj().save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays["header"][()]))
    for k in ("task_keys", "trials", "dt", "substeps"):
        header.pop(k)
    header["version"] = 2
    arrays["header"] = np.array(json.dumps(header))
    np.savez(path, **arrays)
    old = Trajectory.load(path)
    assert old.task is None and old.trials is None and old.dt is None and old.substeps == 1


def test_activity_of_substeps_has_t_times_substeps_rows():
    from snrl.errors import UserError
    from snrl.networks.activity import Activity
    from snrl.trajectory import layer_dicts

    layers = layer_dicts([{"name": "lif0", "kind": "spiking", "size": 3}])
    act = Activity.from_flat({"lif0.spikes": np.zeros((8, 3))}, layers)
    assert _traj(activity=act, substeps=2).substeps == 2
    with pytest.raises(UserError, match="substeps 3"):
        _traj(activity=act, substeps=3)
