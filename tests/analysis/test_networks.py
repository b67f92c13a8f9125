"""`analyze` covers every network of the run: the policy and the critic, each labelled."""

from __future__ import annotations

import numpy as np
import torch

import snrl
from snrl.analysis import analyze


def test_policy_and_critic_are_both_analysed_and_labelled():
    algo = snrl.PPO("CartPole-v1", backbone="lif", hidden_size=10, n_envs=1, seed=0)
    res = analyze(algo, episodes=2, seed=3)
    assert res.network == "policy" and set(res.others) == {"critic"}
    summ = res.summary()
    critic = summ["networks"]["critic"]
    assert summ["network"] == "policy" and critic["network"] == "critic"
    # the critic's numbers are those of running the critic on the episodes' observations
    spikes = []
    for k in range(2):
        traj = algo.rollout(seed=3 + k, record=False)
        with torch.no_grad():
            x = algo.agent.preprocess(traj.observations)[:, None]
            out = algo.agent.critic.run(x, algo.agent.critic.initial_state(1))
            spikes.append(out.activity["lif0"].spikes[:, 0].double().numpy())
    rate = np.concatenate(spikes).mean(0) / 1e-3
    np.testing.assert_allclose(critic["layers"]["lif0"]["neurons"]["rate"], rate, rtol=1e-9)
    sign = algo.agent.critic.layers["lif0"].recurrent_sign.int().tolist()
    assert critic["layers"]["lif0"]["sign"] == sign
    figs = res.figures()
    titles = [ax.get_title() for ax in figs["raster.png"].axes]
    assert titles[0].startswith("policy: lif0") and titles[1].startswith("critic: lif0")
    titles = [ax.get_title() for ax in figs["rates_cv.png"].axes]
    assert any(t.startswith("critic: lif0") for t in titles)
    # input currents: E and I neurons of the policy, each labelled, units stated
    cur = figs["ei_currents.png"]
    labels = [ax.get_ylabel() for ax in cur.axes]
    assert sum("(E: excitatory)" in s for s in labels) == 2
    assert sum("(I: inhibitory)" in s for s in labels) == 2
    title = cur.axes[0].get_title()
    assert title.startswith("policy: lif0") and "per 1 ms neuron step" in title
    assert "threshold 1" in title
    algo.close()


def test_a_dqn_run_has_one_network():
    algo = snrl.DQN("CartPole-v1", backbone="lif", hidden_size=8, seed=0)
    res = analyze(algo, episodes=1)
    assert res.others == {} and "networks" not in res.summary()
    algo.close()
