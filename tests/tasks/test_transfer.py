"""An agent trained on snrl.tasks keeps its trial accuracy on NeuroGym's own env (issue 34:
within 2 pp, or within three standard errors of the difference where the trial counts are
too small for 2 pp to be resolved)."""

from __future__ import annotations

import math
import warnings

import pytest

pytest.importorskip("neurogym")
import snrl  # noqa: E402
from snrl.agents.evaluation import evaluate_agent  # noqa: E402


@pytest.mark.slow
def test_agent_trained_on_snrl_tasks_scores_the_same_on_neurogym():
    algo = snrl.PPO("snrl.tasks:PerceptualDecisionMaking-v0", backbone="gru", n_envs=16, seed=0)
    algo.learn(40_000, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = evaluate_agent(
            algo.agent, "snrl.tasks:PerceptualDecisionMaking-v0", n_episodes=64, seed=7
        )
        ng = evaluate_agent(algo.agent, "PerceptualDecisionMaking-v0", n_episodes=64, seed=7)
    a, b = ours["accuracy"], ng["accuracy"]
    se = math.sqrt(a * (1 - a) / ours["n_trials"] + b * (1 - b) / ng["n_trials"])
    assert a > 0.6  # it learned something to transfer
    assert abs(a - b) <= max(0.02, 3 * se), (a, b, ours["n_trials"], ng["n_trials"])
