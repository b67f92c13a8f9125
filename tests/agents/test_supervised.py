"""The supervised term (``supervised_coef``, ``supervised_steps``): PPO's and A2C's policy
trained toward a trial task's ground-truth action beside the rewards."""

from __future__ import annotations

import csv
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from snrl.agents import PPO
from snrl.agents.a2c import A2C
from snrl.envs.trials import ground_truth
from snrl.errors import UserError
from tests.cli_run import snrl as snrl_cli

PDM = "PerceptualDecisionMaking-v0"
SMALL = dict(backbone="lif", hidden_size=16, n_envs=8, n_steps=64, eval_interval=0)
SMALL["eval_episodes"] = 1


def test_ground_truth_reads_each_env_its_mask_and_the_final_step_of_an_ended_episode():
    all4 = np.ones(4, bool)
    infos = {
        "gt": np.array([1, 0, 2, 1]),
        "_gt": np.array([True, True, False, True]),
        "_final_info": np.array([False, False, False, True]),
        "final_info": {"gt": np.array([0, 0, 0, 2]), "_gt": all4},
    }
    assert ground_truth(infos, 4).tolist() == [1, 0, -1, 2]
    # every env ended at once: the step's ground truth is only in final_info
    ended = {"_final_info": all4, "final_info": {"gt": np.array([2, 1, 0, 1]), "_gt": all4}}
    assert ground_truth(ended, 4).tolist() == [2, 1, 0, 1]
    assert ground_truth({"gt": np.array([1.0, 0.5, np.nan, 2.0])}, 4).tolist() == [1, -1, -1, 2]
    assert ground_truth({"new_trial": np.zeros(4, bool)}, 4) is None


def test_the_stored_target_is_the_ground_truth_that_the_step_was_rewarded_against():
    # PerceptualDecisionMaking rewards +1 for the ground-truth choice in the decision period
    # and -0.1 for leaving fixation before it: a target one step off would disagree
    algo = PPO(PDM, seed=4, supervised_coef=1.0, **SMALL)
    algo._start_envs()
    buf, _ = algo._collect()
    algo.close()
    targets, actions, rewards = buf.targets, buf.actions, buf.rewards
    assert targets is not None and bool((targets >= 0).all())  # NeuroGym gives gt every step
    correct, broke = rewards > 0.5, (rewards < 0) & (rewards > -0.5)
    assert int(correct.sum()) >= 3 and int(broke.sum()) >= 3
    assert torch.equal(actions[correct], targets[correct])
    assert bool((targets[broke] == 0).all()) and bool((actions[broke] != 0).all())
    assert set(targets[targets != 0].tolist()) == {1, 2}  # both choices occur


def test_the_term_is_the_cross_entropy_of_the_policy_against_the_targets():
    algo = PPO(PDM, seed=2, supervised_coef=0.5, **SMALL)
    algo._start_envs()
    buf, _ = algo._collect()
    buf.targets[5:9, 2] = -1  # steps without a ground truth are left out
    mb = buf.minibatch(torch.arange(algo.config.n_envs))
    *_, per_step = algo.agent.evaluate_sequence(
        mb.obs, mb.actions, mb.starts, mb.states, targets=mb.targets
    )
    nll = algo.config.supervised_term(per_step, mb.targets)
    # oracle: the log-probability of every action through the ordinary log-prob path
    n = algo.agent.head_size
    logp = torch.stack(
        [
            algo.agent.evaluate_sequence(
                mb.obs, torch.full_like(mb.actions, a), mb.starts, mb.states
            )[0]
            for a in range(n)
        ],
        dim=-1,
    )
    # balanced over the target actions: each action's steps averaged, then the actions
    flat_logp, flat_t = logp.reshape(-1, n), mb.targets.reshape(-1)
    per_action = [
        torch.nn.functional.nll_loss(flat_logp[flat_t == a], flat_t[flat_t == a])
        for a in range(n)
        if bool((flat_t == a).any())
    ]
    assert len(per_action) == 3  # fixation and both choices occur in the segment
    torch.testing.assert_close(nll, torch.stack(per_action).mean(), atol=1e-5, rtol=1e-5)
    # not the plain mean over steps, which fixation (most steps) would dominate: that is
    # supervised_balance=false
    plain = torch.nn.functional.nll_loss(flat_logp, flat_t, ignore_index=-1)
    assert abs(nll.item() - plain.item()) > 0.05
    unbalanced = dataclasses.replace(algo.config, supervised_balance=False)
    torch.testing.assert_close(
        unbalanced.supervised_term(per_step, mb.targets), plain, atol=1e-5, rtol=1e-5
    )
    no_target = torch.full_like(mb.targets, -1)
    assert algo.config.supervised_term(per_step * 0, no_target).item() == 0.0
    # PPO's loss carries it with the weight of the schedule
    loss, parts, _ = algo.minibatch_loss(mb)
    algo.config = dataclasses.replace(algo.config, supervised_coef=0.0)
    loss0, _, _ = algo.minibatch_loss(mb)
    torch.testing.assert_close(loss - loss0, 0.5 * parts["supervised"], atol=1e-5, rtol=1e-5)
    algo.close()


def test_the_weight_falls_linearly_to_zero_at_supervised_steps():
    cfg = PPO(PDM, supervised_coef=2.0, supervised_steps=1000, **SMALL).config
    weights = [cfg.supervised_weight(s) for s in (0, 250, 1000, 5000)]
    assert weights == pytest.approx([2.0, 1.5, 0.0, 0.0])
    constant = dataclasses.replace(cfg, supervised_steps=0)
    assert constant.supervised_weight(10**9) == 2.0


@pytest.mark.parametrize("algo_cls", [PPO, A2C])
def test_training_with_the_term_lowers_the_cross_entropy_it_logs(tmp_path, algo_cls):
    extra = dict(n_steps=32) if algo_cls is PPO else {}
    algo = algo_cls(
        PDM,
        seed=5,
        backbone="lif",
        n_envs=16,
        eval_interval=0,
        eval_episodes=1,
        supervised_coef=1.0,
        run_dir=tmp_path / "run",
        **extra,
    )
    algo.learn(6000, progress=False)
    algo.close()
    with open(tmp_path / "run" / "metrics.csv", newline="") as f:
        ce = [float(r["supervised_loss"]) for r in csv.DictReader(f)]
    # the first update starts near chance over 3 actions (ln 3 = 1.10); fixation is most
    # steps' target and the two choices follow the stimulus, which the term teaches within a
    # few thousand steps (balanced over the three: about 0.6 at 6,000 steps)
    assert ce[0] > 0.9 and np.mean(ce[-3:]) < 0.75 * ce[0], ce


def test_refusals(tmp_path):
    with pytest.raises(UserError, match="must be >= 0"):
        PPO(PDM, supervised_coef=-1.0, **SMALL)
    with pytest.raises(UserError, match="supervised_steps"):
        PPO(PDM, supervised_coef=1.0, supervised_steps=-5, **SMALL)
    with pytest.raises(UserError, match="Pendulum-v1 is none"):
        PPO("Pendulum-v1", supervised_coef=1.0, **SMALL)
    with pytest.raises(UserError, match="CartPole-v1 is none"):
        PPO("CartPole-v1", supervised_coef=1.0, **SMALL)
    # an env object is checked for its ground truth at its first step, its actions at once
    one = {**SMALL, "n_envs": 1, "n_minibatches": 1}
    with pytest.raises(UserError, match="needs Discrete actions"):
        PPO(gym.make("Pendulum-v1"), supervised_coef=1.0, **one)
    out = tmp_path / "cartpole"
    res = snrl_cli(
        "train", "--env", "CartPole-v1", "--steps", "500", "--set", "supervised_coef=1",
        "--out", out,
    )  # fmt: skip
    assert res.returncode == 2 and "ground-truth action of a trial task" in res.stderr
    assert not out.exists()  # refused before anything was written
