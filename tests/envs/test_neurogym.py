"""NeuroGym tasks through snrl: bare ids, default step limits, the trial log of scripted
policies, evaluation and rollouts of an agent."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("neurogym")

import snrl  # noqa: E402
from snrl.envs import make_env, make_vector_env  # noqa: E402
from snrl.envs.neurogym import default_episode_steps, episode_step_limit, wrap_task  # noqa: E402
from snrl.envs.trials import TrialTracker  # noqa: E402
from snrl.trajectory import Trajectory  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# (task, steps of one trial at dt = 100 ms: the sum of its default period durations)
TASKS = [
    ("PerceptualDecisionMaking-v0", (100 + 2000 + 0 + 100) // 100),
    ("GoNogo-v0", (0 + 500 + 500 + 500) // 100),
    ("DelayMatchSample-v0", (300 + 500 + 1000 + 500 + 900) // 100),
]


@pytest.mark.parametrize("task,trial_steps", TASKS)
def test_bare_id_resets_and_steps_with_a_limit_of_20_trials(task, trial_steps):
    env = wrap_task(make_env(task))
    assert episode_step_limit(env) == 20 * trial_steps
    assert default_episode_steps(env) == 20 * trial_steps
    obs, info = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    assert info["trial_start"]["dt"] == pytest.approx(0.1)
    assert info["trial_start"]["t0"] == pytest.approx(0.1)  # NeuroGym's reset takes a step
    trunc = False
    for t in range(20 * trial_steps):
        obs, reward, term, trunc, info = env.step(0)
        assert not term and np.isfinite(reward)
        assert trunc == (t == 20 * trial_steps - 1)
    env.close()


def _run_scripted(task, policy, steps=300, seed=0, **kwargs):
    env = wrap_task(make_env(task, **kwargs), max_episode_steps=steps)
    tracker = TrialTracker(1)
    _, info = env.reset(seed=seed)
    tracker.reset(info)
    trials = []
    for _ in range(steps):
        a = policy(env.unwrapped)
        _, _, _, trunc, info = env.step(a)
        trials += tracker.step(a, info)
    env.close()
    return trials


def test_oracle_policy_is_always_correct_and_matches_performance():
    """Acting the ground truth of every step (NeuroGym's gt_now) is correct on every trial."""
    trials = _run_scripted("PerceptualDecisionMaking-v0", lambda u: int(u.gt_now))
    assert len(trials) >= 10
    for t in trials:
        assert t["correct"] and t["performance"] == 1.0
        assert t["choice"] == t["gt"] == t["conditions"]["ground_truth"] + 1
        assert t["decision_time"] == pytest.approx(t["periods"]["decision"][0])
        assert t["n_steps"] == t["end_step"] - t["start_step"] + 1
    starts = [t["start_step"] for t in trials]
    ends = [t["end_step"] for t in trials]
    assert starts[1:] == [e + 1 for e in ends[:-1]]  # trials tile the episode


def test_gonogo_withholding_is_correct_on_nogo_trials_only():
    trials = _run_scripted("GoNogo-v0", lambda u: 0)
    assert {t["conditions"]["ground_truth"] for t in trials} == {0, 1}
    for t in trials:
        assert t["correct"] == (t["conditions"]["ground_truth"] == 0)
        assert t["choice"] == 0 and t["decision_time"] is None


def test_reaction_time_with_neurogyms_reaction_time_wrapper():
    """NeuroGym's ReactionTime wrapper opens the decision period 100 ms after the stimulus
    onset; a response 300 ms after the onset has reaction_time 0.3 s. (On gymnasium 1.x the
    wrapper must wrap the bare task: it reads task attributes through the wrapper.)"""
    from neurogym.wrappers import ReactionTime

    env = wrap_task(ReactionTime(make_env("PerceptualDecisionMaking-v0").unwrapped), 100)
    u = env.unwrapped
    tracker = TrialTracker(1)
    _, info = env.reset(seed=0)
    tracker.reset(info)
    trials = []
    for _ in range(100):
        a = 1 if u.t >= u.start_t["stimulus"] + 300 else 0
        _, _, _, _, info = env.step(a)
        trials += tracker.step(a, info)
    assert len(trials) >= 15
    for t in trials:
        assert t["periods"]["decision"][0] == pytest.approx(t["periods"]["stimulus"][0] + 0.1)
        assert t["choice"] == 1 and t["decision_time"] == pytest.approx(0.4)
        assert t["reaction_time"] == 0.3
        assert t["correct"] == (t["conditions"]["ground_truth"] == 0)


def test_vector_env_trials_match_single_env_trials():
    def script(u):
        return int(u.gt_now)

    single = _run_scripted("GoNogo-v0", script, steps=60, seed=5)
    envs = make_vector_env("GoNogo-v0", 1, seed=5, max_episode_steps=60)
    tracker = TrialTracker(1)
    _, info = envs.reset(seed=5)
    tracker.reset(info)
    got = []
    for _ in range(60):
        a = np.array([script(envs.envs[0].unwrapped)])
        _, _, _, _, info = envs.step(a)
        got += tracker.step(a, info)
    envs.close()
    assert [t["correct"] for t in got] == [t["correct"] for t in single]
    assert [t["conditions"] for t in got] == [t["conditions"] for t in single]


def test_reset_seed_draws_the_same_trials():
    """NeuroGym draws trials from its own generator; reset(seed=...) seeds it."""

    def conditions(seed):
        trials = _run_scripted("PerceptualDecisionMaking-v0", lambda u: 0, steps=220, seed=seed)
        return [t["conditions"] for t in trials]

    assert conditions(3) == conditions(3)
    assert conditions(3) != conditions(4)


def test_evaluate_and_rollout_of_an_agent_report_trials():
    algo = snrl.PPO("GoNogo-v0", hidden_size=16, n_envs=2, max_episode_steps=60, seed=0)
    res = algo.evaluate(n_episodes=2, seed=1)
    assert res["mean_length"] == 60
    assert res["n_trials"] == len(res["trials"]) >= 6
    assert 0.0 <= res["accuracy"] <= 1.0
    assert res["accuracy"] == pytest.approx(np.mean([t["correct"] for t in res["trials"]]))
    by_gt = res["accuracy_by_condition"]["ground_truth"]
    assert sum(v["n"] for v in by_gt.values()) == res["n_trials"]

    traj = algo.rollout(seed=0)
    assert len(traj) == 60 and traj.dt == pytest.approx(0.1) and traj.substeps == 1
    assert traj.frames is None
    assert traj.task["new_trial"].dtype == bool and traj.task["gt"].shape == (60,)
    ends = np.flatnonzero(traj.task["new_trial"])
    assert [t["end_step"] for t in traj.trials] == ends.tolist()
    assert np.all(np.isnan(np.delete(traj.task["performance"], ends)))
    assert np.array_equal(traj.actions[ends], [t["choice"] for t in traj.trials])


def test_trajectory_with_trials_saves_and_loads(tmp_path):
    algo = snrl.PPO("GoNogo-v0", hidden_size=8, n_envs=1, max_episode_steps=30, seed=0)
    traj = algo.rollout(seed=3)
    back = Trajectory.load(traj.save(tmp_path / "t.npz"))
    assert back.trials == traj.trials and back.dt == traj.dt and back.substeps == 1
    for k, v in traj.task.items():
        np.testing.assert_array_equal(back.task[k], v)


@pytest.mark.parametrize("algo_cls", [snrl.PPO, snrl.DQN])
def test_training_history_has_trial_columns(algo_cls):
    dqn = {"learning_starts": 64, "log_interval": 64, "batch_size": 2}
    kw = {"n_steps": 32} if algo_cls is snrl.PPO else dqn
    algo = algo_cls(
        "GoNogo-v0", hidden_size=8, n_envs=2, max_episode_steps=45, eval_interval=128, **kw
    )
    hist = algo.learn(256, progress=False)
    algo.close()
    # GoNogo trials last 15 steps (14 the first of an episode) when the agent does not answer
    # "go" before the decision period's last step, 11 at least: 128 steps per env are the
    # episodes 45 + 45 + 38 steps, which hold 3 + 3 + 2 to 4 + 4 + 3 whole trials
    assert 2 * 8 <= sum(hist["trials"]) <= 2 * 11
    acc = np.array(hist["eval_trial_accuracy"], dtype=float)
    assert np.isfinite(acc).sum() == 2 and np.nanmax(acc) <= 1
