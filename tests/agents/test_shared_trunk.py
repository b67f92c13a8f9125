"""shared_trunk: one backbone (one E/I assignment, one state) for PPO's policy and value."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import snrl
from snrl.agents import SharedActorCriticAgent, TrunkState
from snrl.errors import UserError
from snrl.training.metrics import read_metrics
from tests.cli_run import snrl_inproc

TINY = dict(
    hidden_size=12,
    n_envs=2,
    n_steps=16,
    n_epochs=2,
    seed=5,
    eval_interval=0,
    eval_episodes=1,
    shared_trunk=True,
)


def _batch(algo):
    algo._start_envs()
    buf, _ = algo._collect()
    return buf.minibatch(torch.arange(algo.config.n_envs), 0, algo.config.n_steps)


def test_one_backbone_one_state_one_parameter_set():
    algo = snrl.PPO("CartPole-v1", **TINY)
    agent = algo.agent
    assert isinstance(agent, SharedActorCriticAgent)
    assert agent.backbones == ("trunk",) and agent.actor is agent.trunk
    assert not hasattr(agent, "policy") and not hasattr(agent, "critic")
    state = agent.initial_state(3)
    assert isinstance(state, TrunkState) and len(state) == 1
    # one spiking layer, one readout of head_size + 1 (2 logits and the value)
    layers = agent.trunk.layer_info()
    assert [d.kind for d in layers] == ["spiking", "readout"]
    assert layers[1].size == agent.head_size + 1 == 3
    # every parameter of the agent is the trunk's (CartPole: no log-std)
    assert {id(p) for p in agent.parameters()} == {id(p) for p in agent.trunk.parameters()}
    separate = snrl.PPO("CartPole-v1", **{**TINY, "shared_trunk": False})
    n_shared = sum(p.numel() for p in agent.parameters())
    n_sep = sum(p.numel() for p in separate.agent.parameters())
    # two networks minus one: the readouts have the same units (2 + 1), the critic's
    # spiking layer is gone
    critic_layer = separate.agent.critic.spiking_layers[0]
    assert n_sep - n_shared == sum(p.numel() for p in critic_layer.parameters()) > 0
    algo.close()
    separate.close()


def test_value_and_logits_are_the_readout_columns():
    algo = snrl.PPO("CartPole-v1", **TINY)
    agent = algo.agent
    x = torch.randn(4, agent.obs_size)
    state = agent.initial_state(4)
    res = agent.step(x, state, deterministic=True)
    out, _ = agent.trunk(x, state.trunk)
    torch.testing.assert_close(res.value, out[:, 2])
    torch.testing.assert_close(res.outputs["probs"], torch.softmax(out[:, :2], -1))
    torch.testing.assert_close(agent.value(x, agent.value_state(state)), out[:, 2])
    # the same state comes out of the step as a trunk run gives
    torch.testing.assert_close(res.state.trunk, agent.trunk(x, state.trunk)[1])
    algo.close()


def test_both_losses_reach_the_trunk():
    algo = snrl.PPO("CartPole-v1", **TINY)
    mb = _batch(algo)
    trunk = algo.agent.trunk
    layer = trunk.spiking_layers[0]
    grads = {}
    for part in ("policy", "value"):
        algo.optimizer.zero_grad()
        _, parts, _ = algo.minibatch_loss(mb)
        parts[part].backward()
        grads[part] = {
            "in": layer.weight_in.grad.clone(),
            "rec": layer.weight_rec.grad.clone(),
            "readout": trunk.readout.weight_in.grad.clone(),
        }
    for part in ("policy", "value"):
        assert grads[part]["in"].abs().sum() > 0, part
        assert grads[part]["rec"].abs().sum() > 0, part
    # each loss reaches only its own readout columns (2 logits, then the value)
    assert grads["policy"]["readout"][:, 2].abs().sum() == 0
    assert grads["policy"]["readout"][:, :2].abs().sum() > 0
    assert grads["value"]["readout"][:, :2].abs().sum() == 0
    assert grads["value"]["readout"][:, 2].abs().sum() > 0
    algo.close()


@pytest.mark.parametrize("rule", ["bptt", "eprop"])
def test_dale_signs_exact_after_training(rule):
    algo = snrl.PPO("CartPole-v1", learning_rule=rule, weight_decay=0.01, **TINY)
    trunk = algo.agent.trunk
    layer = trunk.spiking_layers[0]
    w0 = layer.recurrent_weights.detach().clone()
    r0 = trunk.readout.forward_weights.detach().clone()
    algo.learn(6 * 32, progress=False)
    w = layer.recurrent_weights.detach()
    r = trunk.readout.forward_weights.detach()
    assert not torch.equal(w, w0) and not torch.equal(r, r0)
    sign = layer.recurrent_sign
    assert bool((w * sign[:, None] >= 0).all())  # every outgoing synapse has its neuron's sign
    assert bool((r * sign[:, None] >= 0).all())  # both readouts too
    assert int((sign < 0).sum()) == round(0.2 * 12)
    algo.close()


def test_eprop_learning_signals_of_both_readouts_add():
    """e-prop with a shared trunk: the layer's gradient is the sum of the gradients the policy
    loss and the value loss give alone (the readouts broadcast into the same neurons)."""
    algo = snrl.PPO("CartPole-v1", learning_rule="eprop", **TINY)
    mb = _batch(algo)
    layer = algo.agent.trunk.spiking_layers[0]

    def grad(fn):
        algo.optimizer.zero_grad()
        with algo.learning_rule.applied(algo.agent):
            logp, _, values, _ = algo.agent.evaluate_sequence(
                mb.obs, mb.actions, mb.starts, mb.states
            )
        algo.learning_rule.backward(fn(logp, values))
        return layer.weight_rec.grad.clone()

    g_pol = grad(lambda lp, v: -(lp * mb.advantages).mean())
    g_val = grad(lambda lp, v: ((v - mb.returns) ** 2).mean())
    g_both = grad(lambda lp, v: -(lp * mb.advantages).mean() + ((v - mb.returns) ** 2).mean())
    assert g_pol.abs().sum() > 0 and g_val.abs().sum() > 0
    torch.testing.assert_close(g_both, g_pol + g_val, rtol=1e-5, atol=1e-7)
    algo.close()


@pytest.mark.parametrize("backbone", ["mlp", "gru"])
def test_ann_backbones_share_a_trunk_too(backbone):
    algo = snrl.PPO("CartPole-v1", **{**TINY, "backbone": backbone})
    assert algo.agent.backbones == ("trunk",)
    algo.learn(64, progress=False)
    assert np.isfinite(algo.evaluate(n_episodes=1)["mean_return"])
    algo.close()


def test_dqn_and_custom_networks_refuse_it():
    with pytest.raises(UserError, match="DQN has no critic"):
        snrl.DQN("CartPole-v1", shared_trunk=True)
    net = snrl.build_backbone("lif", 4, 2, hidden_size=8, seed=0)
    with pytest.raises(UserError, match="shared_trunk=true builds one network"):
        snrl.PPO("CartPole-v1", policy=net, shared_trunk=True)


def test_cli_dqn_shared_trunk_exits_2(tmp_path, capsys):
    res = snrl_inproc(
        capsys, "train", "--algo", "dqn", "--shared-trunk", "--out", tmp_path / "r", "--quiet"
    )
    assert res.returncode == 2
    assert "DQN has no critic" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


class _StopAfter:
    """A callback that stops ``learn`` after ``n`` updates."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def on_update_end(self, algo, row):
        self.seen += 1
        return False if self.seen >= self.n else None


def test_cli_train_checkpoint_and_resume(tmp_path, capsys):
    """`snrl train --shared-trunk` is the config key; a run stopped after 3 updates and
    resumed with `snrl train --resume` holds one trunk in its checkpoints and ends with the
    rows of the uninterrupted run, the learning columns before the stop bit-identical."""
    common = ["--backbone", "lif", "--hidden", "8", "--n-envs", "2", "--seed", "1"]
    common += ["--set", "n_steps=16", "--set", "n_epochs=2", "--set", "eval_interval=0"]
    common += ["--set", "checkpoint_interval=1", "--shared-trunk", "--quiet"]
    full = tmp_path / "full"
    res = snrl_inproc(capsys, "train", *common, "--steps", 160, "--out", full)
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    cfg = snrl.load(full / "checkpoints" / "last.pt").config
    algo = snrl.PPO(config=cfg, run_dir=run)
    algo.learn(160, callbacks=_StopAfter(3), progress=False)
    algo.close()
    assert algo.env_step == 96
    res = snrl_inproc(capsys, "train", "--out", run, "--resume", "--quiet")
    assert res.returncode == 0, res.stderr
    from snrl.agents import load_algo
    from snrl.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run / "checkpoints" / "last.pt")
    assert ckpt["config"]["shared_trunk"] is True
    assert all(k.startswith(("trunk.", "obs_norm.")) for k in ckpt["agent"])
    algo = load_algo(run / "checkpoints" / "last.pt")
    assert isinstance(algo.agent, SharedActorCriticAgent) and algo.env_step == 160
    algo.close()
    m, ref = (read_metrics(d / "metrics.csv") for d in (run, full))
    np.testing.assert_array_equal(m["env_step"], ref["env_step"])
    for col in ("policy_loss", "value_loss", "entropy", "approx_kl", "spike_rate_lif0"):
        np.testing.assert_array_equal(m[col][:3], ref[col][:3])  # before the stop
        assert np.isfinite(m[col]).all()
