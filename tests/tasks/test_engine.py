"""TaskVectorEnv: gymnasium's VectorEnv contract (SAME_STEP autoreset), hand-computed steps of
a trial, episode ends, seeding, errors, and snrl's env maker on ``snrl.tasks:<id>``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl.tasks as tasks
from snrl.envs import make_vector_env
from snrl.envs.make import check_env_id_trusted
from snrl.errors import UserError

# one trial: fixation (step 0), stimulus (steps 1-20), decision (step 21); coherence 51.2
PDM = {"sigma": 0.0, "cohs": [51.2]}
HIGH, LOW = np.float32(np.cos(0.0) * 0.256 + 0.5), np.float32(np.cos(np.pi) * 0.256 + 0.5)


def test_spaces_and_autoreset_mode():
    envs = tasks.make_vector_env("ContextDecisionMaking-v0", 6, seed=0)
    assert envs.metadata["autoreset_mode"] is gym.vector.AutoresetMode.SAME_STEP
    assert envs.single_observation_space.shape == (5,)
    assert envs.single_action_space == gym.spaces.Discrete(3)
    obs, info = envs.reset()
    assert obs.shape == (6, 5) and obs.dtype == np.float32
    obs, reward, terminated, truncated, info = envs.step(np.zeros(6, dtype=np.int64))
    assert reward.dtype == np.float64 and terminated.dtype == truncated.dtype == bool
    assert info["gt"].shape == (6,) and info["new_trial"].dtype == bool


def test_a_trial_step_by_step():
    """Fixate through the stimulus, answer in the decision step: the reward table's cells."""
    envs = tasks.make_vector_env("PerceptualDecisionMaking-v0", 2, seed=3, env_kwargs=PDM)
    obs, info = envs.reset()
    gt = info["trial_start"]["conditions"]["ground_truth"]
    assert info["trial_start"]["t0"] == pytest.approx([0.1, 0.1])  # NeuroGym's reset step
    expected = np.where(gt[:, None] == 0, [HIGH, LOW], [LOW, HIGH]).astype(np.float32)
    np.testing.assert_array_equal(obs[:, 0], [0.0, 0.0])
    np.testing.assert_array_equal(obs[:, 1:], expected)
    for _ in range(20):  # steps 1..20: the stimulus; fixating pays 0
        obs, reward, *_, info = envs.step([0, 0])
        assert not info["new_trial"].any() and (reward == 0).all()
    np.testing.assert_array_equal(obs, 0.0)  # the decision step shows nothing
    wrong = np.array([2 - gt[0], 1 + gt[1]])  # env 0 answers wrong, env 1 right
    obs, reward, _, _, info = envs.step(wrong)
    np.testing.assert_array_equal(info["gt"], gt + 1)
    np.testing.assert_array_equal(reward, [0.0, 1.0])
    np.testing.assert_array_equal(info["new_trial"], [True, True])
    np.testing.assert_array_equal(info["performance"], [0.0, 1.0])
    np.testing.assert_allclose(info["trial_periods"]["decision"], [[2.1, 2.2]] * 2)
    np.testing.assert_array_equal(obs, [[1, 0, 0], [1, 0, 0]])  # the next trial's fixation
    assert info["trial_start"]["t0"] == pytest.approx([0.0, 0.0])
    obs, reward, *_ = envs.step([1, 0])  # breaking fixation: NeuroGym's abort reward
    assert reward[0] == -0.1 and reward[1] == 0.0  # exact, as NeuroGym


def test_abort_at_reset_like_neurogym():
    """With abort=True NeuroGym's reset step (action n - 1, in fixation) aborts the trial:
    the agent starts at the next trial's first step."""
    envs = tasks.make_vector_env("PerceptualDecisionMaking-v0", 3, env_kwargs={"abort": True})
    obs, info = envs.reset(seed=0)
    np.testing.assert_array_equal(obs, [[1, 0, 0]] * 3)
    assert info["trial_start"]["t0"] == pytest.approx([0.0] * 3)


def test_episodes_end_at_the_step_limit_same_step():
    envs = tasks.make_vector_env("GoNogo-v0", 3, seed=0, max_episode_steps=4)
    envs.reset()
    for _ in range(4):
        obs, reward, terminated, truncated, info = envs.step([0, 0, 0])
        assert not terminated.any()
    assert truncated.all() and info["_final_obs"].all()
    assert info["final_info"]["episode"]["l"].tolist() == [4, 4, 4]
    np.testing.assert_array_equal(np.stack(info["final_obs"]).shape, (3, 3))
    assert info["_trial_start"].all()  # the new episodes' first trials
    assert info["trial_start"]["t0"] == pytest.approx([0.1] * 3)
    obs, reward, terminated, truncated, info = envs.step([0, 0, 0])
    assert not truncated.any() and "final_obs" not in info


def test_default_step_limit_is_twenty_mean_trials():
    # GoNogo's trials all last 15 steps: 20 trials are 300 steps
    assert tasks.make_vector_env("GoNogo-v0", 1).max_episode_steps == 300


def _rollout(env_id, n, seed, steps, action_seed, pool_size=None):
    """Observations (reset included) and rewards of ``steps`` seeded random actions on ``n``
    batched envs, and the envs."""
    envs = tasks.make_vector_env(env_id, n, seed=seed)
    if pool_size is not None:
        envs.pool_size = pool_size
    out = [envs.reset()[0]]
    rng = np.random.default_rng(action_seed)
    rewards = []
    for _ in range(steps):
        obs, reward, *_ = envs.step(rng.integers(0, 3, n))
        out.append(obs)
        rewards.append(reward)
    return np.stack(out), np.stack(rewards), envs


def _run(seed, steps=40):
    return _rollout("ContextDecisionMaking-v0", 8, seed, steps, action_seed=0)[0]


def test_seeded_runs_repeat_and_seeds_differ():
    np.testing.assert_array_equal(_run(5), _run(5))
    assert not np.array_equal(_run(5), _run(6))


def test_as_tensors():
    envs = tasks.make_vector_env("GoNogo-v0", 4, env_kwargs={"device": "cpu"})
    envs.as_tensors = True
    obs, _ = envs.reset(seed=0)
    obs, reward, terminated, truncated, _ = envs.step(torch.zeros(4, dtype=torch.int64))
    assert isinstance(obs, torch.Tensor) and obs.shape == (4, 3)
    assert reward.dtype == torch.float64 and truncated.dtype == torch.bool


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: tasks.make_vector_env("PerceptualDecisionMakin-v0", 2), "did you mean"),
        (lambda: tasks.make_vector_env("GoNogo-v0", 2, env_kwargs={"sigma": 1}), "no argument"),
        (lambda: tasks.make_vector_env("GoNogo-v0", 0), "num_envs"),
        (
            lambda: tasks.make_vector_env("GoNogo-v0", 2, env_kwargs={"timing": {"x": 1}}),
            "no period 'x'",
        ),
        (
            lambda: tasks.make_vector_env(
                "GoNogo-v0", 2, env_kwargs={"timing": {"delay": lambda: 3}}
            ),
            "cannot draw",
        ),
        (
            lambda: tasks.make_vector_env("GoNogo-v0", 2, env_kwargs={"timing": {"delay": -5}}),
            "ms >= 0",
        ),
        (
            lambda: tasks.make_vector_env(
                "ContextDecisionMaking-v0", 2, env_kwargs={"dim_ring": 1}
            ),
            "dim_ring",
        ),
        (
            lambda: tasks.make_vector_env("GoNogo-v0", 2, env_kwargs={"rewards": {"x": 1}}),
            "abort, correct",
        ),
        (lambda: tasks.make_vector_env("GoNogo-v0", 2, env_kwargs={"dt": 0}), "dt must"),
    ],
)
def test_bad_input_is_a_user_error(call, match):
    with pytest.raises(UserError, match=match):
        call()


def test_bad_actions_are_user_errors():
    envs = tasks.make_vector_env("GoNogo-v0", 2, seed=0)
    with pytest.raises(UserError, match="before reset"):
        envs.step([0, 0])
    envs.reset()
    with pytest.raises(UserError, match="2 envs"):
        envs.step([0, 0, 0])
    with pytest.raises(UserError, match=r"\[0, 2\)"):
        envs.step([0, 5])


def test_snrl_env_maker_builds_the_batched_engine():
    envs = make_vector_env("snrl.tasks:GoNogo-v0", 5, seed=0, max_episode_steps=30)
    assert isinstance(envs, tasks.TaskVectorEnv)
    assert envs.num_envs == 5 and envs.max_episode_steps == 30
    check_env_id_trusted("snrl.tasks:GoNogo-v0", source="config.json")  # snrl's own module
    with pytest.raises(UserError, match="trust-env-module"):
        check_env_id_trusted("mymod:GoNogo-v0", source="config.json")


def test_single_env_is_neurogyms():
    pytest.importorskip("neurogym")
    from snrl.envs import make_env

    env = make_env("snrl.tasks:GoNogo-v0")
    assert type(env.unwrapped).__name__ == "GoNogo"


def test_dual_dms_first_test_pays_without_ending_and_performance_sticks():
    """NeuroGym's DualDelayMatchSample: a right answer in the first test pays 1 and sets
    performance 1, the trial goes on; a wrong answer in the second ends it, paying 0, and the
    trial reports performance 1 (set earlier)."""
    envs = tasks.make_vector_env("DualDelayMatchSample-v0", 1, seed=0, env_kwargs={"sigma": 0})
    _, info = envs.reset()  # the agent is at step 1; test1 is steps 20-24, test2 35-39
    cond = info["trial_start"]["conditions"]
    first, second = cond["ground_truth1"][0], cond["ground_truth2"][0]
    if cond["test_order"][0] == 1:
        first, second = second, first
    for _ in range(20):  # steps 1-20
        _, reward, *_, info = envs.step([0])
    _, reward, *_, info = envs.step([first])  # step 21: the first test, answered right
    assert reward[0] == 1.0 and not info["new_trial"][0] and info["gt"][0] == first
    for _ in range(13):  # steps 22-34
        _, reward, *_, info = envs.step([0])
    _, reward, *_, info = envs.step([3 - second])  # step 35: the second test, wrong
    assert info["gt"][0] == second
    assert reward[0] == 0.0 and info["new_trial"][0] and info["performance"][0] == 1.0


@pytest.mark.parametrize("distinct", [3, 100_000])
def test_unique_rows_is_torch_unique_up_to_order(distinct):
    """The mixed-radix path (few distinct values) and the fallback (too many to code in an
    int64) both give each row's distinct row back."""
    from snrl.tasks.engine import _unique_rows

    gen = torch.Generator().manual_seed(0)
    keys = torch.randint(distinct, (3000, 4), generator=gen).double()
    uniq, inverse = _unique_rows(keys)
    assert torch.equal(uniq[inverse], keys)
    assert uniq.shape[0] == torch.unique(keys, dim=0).shape[0]


def test_distinct_rows_are_bit_for_bit(monkeypatch):
    """Rows are told apart by their bits (-0.0 is not 0.0), and with hashes that all
    collide the fallback gives the same rows back."""
    import snrl.tasks.engine as engine

    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(3, (500, 6), generator=gen).float() - 1.0
    rows[::7, 0] = -0.0  # rows equal to others by == but not by bits
    for _ in range(2):
        distinct, inverse = engine._distinct_rows(rows)
        assert torch.equal(distinct[inverse].view(torch.int32), rows.view(torch.int32))
        assert distinct.shape[0] == torch.unique(rows.view(torch.int32), dim=0).shape[0]
        assert distinct.shape[0] > torch.unique(rows, dim=0).shape[0]
        monkeypatch.setattr(engine, "_row_hash", lambda keys: keys.sum(1) * 0.0)


def test_the_bank_holds_every_trials_table_once():
    """Each banked trial's rows, read through the bank's index, are its tables built afresh
    (bit for bit, every step of the trial), and no distinct row is stored twice."""
    envs = tasks.make_vector_env("ContextDecisionMaking-v0", 64, seed=0)
    envs.reset()
    for _ in range(50):
        envs.step(np.zeros(64, dtype=np.int64))
    keys = envs._bank_keys
    values = {k: keys[:, j] for j, k in enumerate(envs._keys)}
    tables, meta = envs._rows_of(values, envs._index.shape[1])
    length = meta[:, -1].long()
    inside = torch.arange(tables.shape[1])[None, :] < length[:, None]
    banked = envs._rows[envs._index]
    assert torch.equal(banked[inside].view(torch.int32), tables[inside].view(torch.int32))
    bits = envs._rows.view(torch.int32)
    assert torch.unique(bits, dim=0).shape[0] == bits.shape[0] < 100 < keys.shape[0]


def test_the_prime_banks_rare_trials_before_the_first_step():
    """ContextDecisionMaking can draw 972 trials (27 delays of 300-2900 ms x 2 ground truths
    x 2 other choices x 3 x 3 coherences), the longest delays once in ~18,000 draws each:
    priming goes on past the first 10,000 draws (907 trials) while it finds new ones."""
    envs = tasks.make_vector_env("ContextDecisionMaking-v0", 4, seed=0)
    delays = envs._bank_keys[:, envs._keys.index("_duration_delay")]
    assert 970 <= envs._bank_keys.shape[0] <= 972
    assert float(delays.max()) == 2900.0


def test_a_compacted_bank_steps_the_same(monkeypatch):
    """A bank rebuilt from the trials in use (BANK_FLOATS reached) changes no step."""
    import snrl.tasks.engine as engine

    def run():
        obs, rewards, envs = _rollout(
            "ContextDecisionMaking-v0", 64, 1, 150, action_seed=0, pool_size=256
        )
        return obs, rewards, envs._bank_keys.shape[0]

    obs, rewards, banked = run()
    monkeypatch.setattr(engine, "BANK_FLOATS", 40 * 256 * 24)  # compacts at every refill
    obs_c, rewards_c, banked_c = run()
    assert banked_c < banked
    np.testing.assert_array_equal(obs_c, obs)
    np.testing.assert_array_equal(rewards_c, rewards)


def test_a_hash_collision_gives_no_wrong_trial(monkeypatch):
    """Every bank lookup is checked against the trials' variables: with a hash that makes
    every trial collide, a seeded run steps exactly as with the real one."""
    import snrl.tasks.engine as engine

    def run():
        return _rollout("DualDelayMatchSample-v0", 32, 4, 120, action_seed=1)[:2]

    obs, rewards = run()
    monkeypatch.setattr(engine, "_row_hash", lambda keys: keys.sum(1) * 0.0)
    obs_c, rewards_c = run()
    np.testing.assert_array_equal(obs_c, obs)
    np.testing.assert_array_equal(rewards_c, rewards)


def test_bank_lookup_finds_every_banked_trial():
    """A trial drawn again is found in the bank, not built twice (no two bank rows hold the
    same variables)."""
    envs = tasks.make_vector_env("ContextDecisionMaking-v0", 64, seed=0)
    envs.reset()
    for _ in range(100):
        envs.step(np.zeros(64, dtype=np.int64))
    keys = envs._bank_keys
    assert torch.unique(keys, dim=0).shape[0] == keys.shape[0]
    ids, missing = envs._find(keys)
    assert not bool(missing.any())
    assert torch.equal(ids, torch.arange(keys.shape[0]))


@pytest.mark.parametrize("env_id", ["ContextDecisionMaking-v0", "GoNogo-v0"])
def test_the_tensor_step_is_the_numpy_step(monkeypatch, env_id):
    """The step other devices run (on the tensors) gives, on the CPU, the numpy step's
    outputs bit for bit: observations, rewards, truncations and the trial infos, across
    trial and episode ends."""
    import snrl.tasks.engine as engine

    def run():
        envs = tasks.make_vector_env(env_id, 16, seed=2, max_episode_steps=30)
        obs, info = envs.reset()
        out = [obs, info["trial_start"]["conditions"]["ground_truth"]]
        rng = np.random.default_rng(3)
        for _ in range(70):
            obs, reward, _, trunc, info = envs.step(rng.integers(0, 2, 16))
            out += [obs, reward, trunc, info["gt"], info["new_trial"]]
            if "performance" in info:
                out += [info["performance"], info["trial_start"]["t0"]]
            if "final_info" in info:
                out.append(info["final_info"]["episode"]["r"])
        return out

    numpy_run = run()
    monkeypatch.setattr(engine, "_NUMPY_ON_CPU", False)
    tensor_run = run()
    assert len(tensor_run) == len(numpy_run)
    for a, b in zip(tensor_run, numpy_run):
        assert a.dtype == b.dtype and np.array_equal(a, b)
