"""Neuron time in the agents: substeps, dt derived from the task, Dale 80/20 defaults."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import snrl
from snrl.config import config_from_dict, load_config
from snrl.errors import UserError
from snrl.experiments.runner import train_run

GONOGO = "neurogym.envs.native.gonogo:GoNogo"  # NeuroGym, dt = 100 ms by default


def _dts(backbone) -> list[float]:
    return [layer.dt for layer in backbone.layers.values()]


def test_cartpole_keeps_the_default_neuron_dt() -> None:
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=8)
    assert algo.config.dt == 1e-3
    assert _dts(algo.agent.policy) == [1e-3, 1e-3] and algo.agent.policy.substeps == 1


def test_neurogym_task_dt_sets_the_neuron_dt() -> None:
    pytest.importorskip("neurogym")
    # 100 ms of task time per env step, 4 neuron steps: 25 ms each
    algo = snrl.PPO(GONOGO, n_envs=1, hidden_size=8, substeps=4)
    assert algo.config.dt == pytest.approx(0.025)
    assert algo.agent.policy.substeps == 4 and algo.agent.critic.substeps == 4
    for net in (algo.agent.policy, algo.agent.critic):
        assert _dts(net) == pytest.approx([0.025, 0.025])
    # the task's own dt option changes it; an explicit dt wins over the task's
    assert snrl.PPO(GONOGO, n_envs=1, hidden_size=8, env_kwargs={"dt": 20}).config.dt == (
        pytest.approx(0.02)
    )
    assert snrl.PPO(GONOGO, n_envs=1, hidden_size=8, dt=2e-3).config.dt == 2e-3


def test_checkpoint_and_config_json_keep_substeps_and_resolved_dt(tmp_path) -> None:
    pytest.importorskip("neurogym")
    algo = snrl.PPO(GONOGO, n_envs=1, hidden_size=8, substeps=2)
    algo.save(tmp_path / "ckpt.pt")
    back = snrl.PPO.load(tmp_path / "ckpt.pt", trust_env_module=True)
    assert (back.config.substeps, back.config.dt) == (2, pytest.approx(0.05))
    assert back.agent.policy.substeps == 2 and _dts(back.agent.policy) == pytest.approx(
        [0.05, 0.05]
    )
    x = torch.randn(3, 1, back.agent.policy.input_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = algo.agent.policy.run(x, algo.agent.policy.initial_state(1)).out
        b = back.agent.policy.run(x, back.agent.policy.initial_state(1)).out
    assert torch.equal(a, b)


def test_config_json_holds_the_resolved_dt(tmp_path) -> None:
    # dt=None in the config given; the run's config.json holds what the run used
    cfg = snrl.PPOConfig(
        env="CartPole-v1",
        n_envs=1,
        hidden_size=8,
        substeps=2,
        n_steps=8,
        n_epochs=1,
        total_steps=8,
        eval_interval=0,
        eval_episodes=1,
    )
    assert cfg.dt is None
    train_run(tmp_path / "run", algo="ppo", config=cfg, progress=False)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["dt"] == 1e-3 and saved["substeps"] == 2


def test_substeps_validation_and_old_name() -> None:
    with pytest.raises(UserError, match="substeps=0"):
        snrl.PPOConfig(substeps=0)
    with pytest.raises(UserError, match="substeps"):
        load_config(snrl.PPOConfig, sets=["substeps=1001"])
    with warnings.catch_warnings():  # a run file of snrl 0.1 is read as it is (data, no warning)
        warnings.simplefilter("error")
        assert config_from_dict(snrl.PPOConfig, {"sim_steps": 3}).substeps == 3
    with pytest.raises(UserError, match=r"unknown config key 'sim_steps' in --set"):
        load_config(snrl.PPOConfig, sets=["sim_steps=3"])  # the old name is gone from the API
    assert not hasattr(snrl.PPOConfig(), "sim_steps")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(snrl.DQNConfig, sets=["substeps=2", "dt=none"]).dt is None


def test_agents_default_to_dale_80_20_in_both_backbones() -> None:
    algo = snrl.PPO("CartPole-v1", backbone="lif", n_envs=1)
    assert algo.config.force_dale_law and algo.config.recurrent_sign == 0.2
    for net in (algo.agent.policy, algo.agent.critic):
        lif, ro = net.layers["lif0"], net.layers["readout"]
        assert int((lif.recurrent_sign < 0).sum()) == round(0.2 * 128) == 26
        assert torch.equal(ro.forward_sign, lif.recurrent_sign)
        # balanced: every neuron's recurrent input sums to 0
        w = lif.recurrent_weights.detach()
        torch.testing.assert_close(w.sum(0), torch.zeros(128), atol=1e-5, rtol=0)


def test_evaluate_counts_spikes_per_neuron_step_with_substeps() -> None:
    # one env step is (substeps, B, N) of activity: evaluate indexes the batch axis
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=16, substeps=2)
    res = algo.evaluate(n_episodes=3, seed=0)
    assert 0.0 < res["spike_rates"]["lif0"] <= 1.0


def test_rollout_records_every_neuron_step() -> None:
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=16, substeps=2)
    traj = algo.rollout(seed=0, record=False, max_steps=20)
    assert traj.substeps == 2
    assert traj.activity["lif0"].spikes.shape == (2 * len(traj.actions), 16)


def _taus(net) -> list[float]:
    return [layer.tau_m for layer in net.layers.values()]


def test_unset_time_constants_follow_the_task_clock() -> None:
    pytest.importorskip("neurogym")
    # no clock: the clockless defaults (PPO 10 ms / 10 ms; DQN's readout 3 ms)
    ppo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=8)
    assert (ppo.config.tau_m, ppo.config.readout_tau_m) == (0.01, 0.01)
    assert snrl.DQN("CartPole-v1", hidden_size=8).config.readout_tau_m == 0.003
    # a clock of 100 ms: 10 task steps = 1 s, whatever the substeps; 20 ms -> 0.2 s
    for kwargs, want in (({}, 1.0), ({"substeps": 4}, 1.0), ({"env_kwargs": {"dt": 20}}, 0.2)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the rule's own values never warn
            algo = snrl.PPO(GONOGO, n_envs=1, hidden_size=8, **kwargs)
        assert (algo.config.tau_m, algo.config.readout_tau_m) == pytest.approx((want, want))
        assert _taus(algo.agent.policy) == pytest.approx([want, want])
    # what a user sets stays, and the task-scale rule fills only what is unset
    algo = snrl.PPO(GONOGO, n_envs=1, hidden_size=8, tau_m=0.5)
    assert (algo.config.tau_m, algo.config.readout_tau_m) == pytest.approx((0.5, 1.0))


def test_membranes_shorter_than_the_task_step_warn_once() -> None:
    pytest.importorskip("neurogym")
    with pytest.warns(UserWarning, match=r"tau_m=0\.02 s is shorter than the task's step") as rec:
        snrl.PPO(GONOGO, n_envs=1, hidden_size=8, tau_m=0.02, readout_tau_m=0.5)
    assert len([w for w in rec if "shorter than the task's step" in str(w.message)]) == 1
    assert "keeps 0.0067 of itself per step" in str(rec[0].message)  # exp(-100 ms / 20 ms)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an ANN backbone has no membranes: no warning
        snrl.PPO(GONOGO, n_envs=1, hidden_size=8, backbone="gru", tau_m=0.02)
