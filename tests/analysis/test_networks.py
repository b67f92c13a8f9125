"""`analyze` covers every network of the run: the policy and the critic, each labelled."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import snrl
from snrl.analysis import analyze
from tests.cli_run import snrl_inproc


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


def test_write_puts_the_critic_in_its_own_files(tmp_path):
    """Separate networks: today's files are the policy's (names unchanged), and the critic
    gets its own summary and figures, prefixed ``critic_``, that say what it is."""
    algo = snrl.PPO("CartPole-v1", backbone="lif", hidden_size=10, n_envs=1, seed=0)
    res = analyze(algo, episodes=2, seed=3)
    written = {p.name for p in res.write(tmp_path)}
    for name in ("summary.json", "raster.png", "rates_cv.png", "ei_currents.png"):
        assert name in written and (tmp_path / name).stat().st_size > 0
    for name in ("critic_summary.json", "critic_raster.png", "critic_rates_cv.png"):
        assert name in written and (tmp_path / name).stat().st_size > 0
    assert {"critic_ei_currents.png", "critic_connectivity.png", "critic_tuning.png"} <= written
    main = json.loads((tmp_path / "summary.json").read_text())
    critic = json.loads((tmp_path / "critic_summary.json").read_text())
    assert main["network"] == "policy" and "critic_summary.json" in main["network_role"]
    assert critic["network"] == "critic" and "own E/I assignment" in critic["network_role"]
    assert "networks" not in critic
    # the critic's file holds the numbers of networks.critic in the policy's summary
    assert critic["layers"] == main["networks"]["critic"]["layers"]
    sign = algo.agent.critic.layers["lif0"].recurrent_sign.int().tolist()
    assert critic["layers"]["lif0"]["sign"] == sign != main["layers"]["lif0"]["sign"]
    # the critic's own figures show the critic only, labelled as such
    title = res.others["critic"].figures()["raster.png"].axes[0].get_title()
    assert title.startswith("critic: lif0 (own E/I)")
    assert len(res.others["critic"].figures()["raster.png"].axes) == 1
    algo.close()


def test_a_shared_trunk_is_one_network(tmp_path):
    algo = snrl.PPO(
        "CartPole-v1", backbone="lif", hidden_size=10, n_envs=1, seed=0, shared_trunk=True
    )
    res = analyze(algo, episodes=2, seed=3)
    assert res.network == "trunk" and res.others == {}
    summ = res.summary()
    assert summ["network"] == "trunk" and "networks" not in summ
    assert summ["network_role"].startswith("one network serves policy and value")
    sign = algo.agent.trunk.layers["lif0"].recurrent_sign.int().tolist()
    assert summ["layers"]["lif0"]["sign"] == sign
    # the rates are the recorded activity of the trunk while it acted
    spikes = [algo.rollout(seed=3 + k, record=False).activity["lif0"].spikes for k in range(2)]
    rate = np.concatenate(spikes).astype(np.float64).mean(0) / 1e-3
    np.testing.assert_allclose(summ["layers"]["lif0"]["neurons"]["rate"], rate, rtol=1e-9)
    written = {p.name for p in res.write(tmp_path)}
    assert "summary.json" in written and not any(n.startswith("critic_") for n in written)
    title = res.figures()["raster.png"].axes[0].get_title()
    assert title.startswith("trunk: lif0 (policy + value)")
    # the initial weights are rebuilt for the trunk too
    assert "initial" in summ["layers"]["lif0"]["connectivity"]
    algo.close()


@pytest.mark.parametrize("shared", [False, True])
def test_snrl_analyze_writes_each_network_of_the_run(tmp_path, capsys, shared):
    run = tmp_path / "run"
    algo = snrl.PPO(
        "CartPole-v1",
        backbone="lif",
        hidden_size=8,
        n_envs=2,
        n_steps=16,
        eval_interval=32,
        eval_episodes=1,
        seed=0,
        shared_trunk=shared,
        run_dir=run,
    )
    algo.learn(64, progress=False)
    algo.close()
    res = snrl_inproc(capsys, "analyze", run, "--episodes", 1, "--no-initial")
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    out = run / "analysis"
    critic_files = sorted(p.name for p in out.glob("critic_*"))
    if shared:
        assert line["networks"] == ["trunk"] and critic_files == []
        summ = json.loads((out / "summary.json").read_text())
        assert summ["network_role"].startswith("one network serves policy and value")
    else:
        assert line["networks"] == ["policy", "critic"]
        assert "critic_summary.json" in critic_files and "critic_raster.png" in critic_files
        assert set(critic_files) <= set(line["files"])
        marker = json.loads((out / ".snrl-analysis.json").read_text())["files"]
        assert "critic_summary.json" in marker  # snrl's own: a rerun may replace it
    assert (out / "summary.json").is_file() and (out / "raster.png").is_file()
