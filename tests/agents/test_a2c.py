"""A2C (snrl.A2C): n-step TD targets against a hand-computed oracle, the online e-prop seam
(the window's gradient against the offline e-prop of the same sequence and signal), Dale's
signs after many online updates, the traces carried across windows and restarted with the
envs, and the command line (train, resume, eval) as a user runs it."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import snrl
from snrl.functional.eprop import filter_backward
from snrl.learning import OnlineEProp, eprop_layer_gradients
from snrl.learning.rules import apply_layer_gradients
from snrl.training.metrics import read_metrics
from tests.cli_run import snrl as snrl_cmd

GAMMA, V = 0.5, 2.0


class CountEnv(gym.Env):
    """Rewards 1, 2, 3 on the steps of an episode of 3 steps, which then terminates (or, with
    ``truncate``, is cut by a time limit)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, truncate: bool = False):
        self.truncate = truncate
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= 3
        obs = np.zeros(2, dtype=np.float32)
        return obs, float(self.t), end and not self.truncate, end and self.truncate, {}


def _constant_critic(algo, value: float) -> None:
    """Make the critic answer ``value`` for every observation (a known V for the oracle)."""
    linears = [m for m in algo.agent.critic.modules() if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for p in algo.agent.critic.parameters():
            p.zero_()
        linears[-1].bias.fill_(value)


@pytest.mark.parametrize(
    "truncate,windows",
    [
        # R_t by hand, gamma 0.5, V = 2: rewards 1,2,3 | 1,2,3 | ...; windows of 4 steps
        # termination: 1 + .5*2 + .25*3 = 2.75; 2 + .5*3 = 3.5; 3; then 1 + .5*V = 2 (cut by
        # the window: bootstrap); next window: 3.5; 3; 1 + .5*2 + .25*V = 2.5; 2 + .5*V = 3
        (False, [[2.75, 3.5, 3.0, 2.0], [3.5, 3.0, 2.5, 3.0]]),
        # truncation bootstraps from V(final obs): 3 + .5*2 = 4; 2 + .5*4 = 4; 1 + .5*4 = 3
        (True, [[3.0, 4.0, 4.0, 2.0], [4.0, 4.0, 2.5, 3.0]]),
    ],
)
def test_nstep_returns_and_advantages_against_hand_oracle(truncate, windows):
    algo = snrl.A2C(
        lambda: CountEnv(truncate),
        backbone="mlp",
        hidden_size=8,
        n_envs=1,
        n_steps=4,
        gamma=GAMMA,
        seed=0,
        eval_interval=0,
    )
    assert algo.config.gae_lambda == 1.0  # the default: plain n-step returns
    _constant_critic(algo, V)
    algo._start_envs()
    for want in windows:
        buf, _ = algo._collect()
        want = torch.tensor(want)
        torch.testing.assert_close(buf.values[:, 0], torch.full((4,), V))
        torch.testing.assert_close(buf.returns[:, 0], want)
        torch.testing.assert_close(buf.advantages[:, 0], want - V)


def test_window_loss_is_the_a2c_loss():
    algo = snrl.A2C(
        lambda: CountEnv(),
        backbone="mlp",
        hidden_size=8,
        n_envs=2,
        n_steps=4,
        seed=0,
        eval_interval=0,
        rate_reg=0.0,
    )
    algo._start_envs()
    buf, _ = algo._collect()
    mb = buf.minibatch(torch.arange(2), 0, 4)
    loss, parts, _ = algo.window_loss(mb)
    logp, ent, values, _ = algo.agent.evaluate_sequence(mb.obs, mb.actions, mb.starts, mb.states)
    torch.testing.assert_close(logp, mb.log_probs)  # the rollout's own forward, rebuilt
    pg = -(mb.advantages * logp).mean()
    vl = 0.5 * ((values - mb.returns) ** 2).mean()
    want = pg - 0.01 * ent.mean() + 0.5 * vl
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(parts["policy"], pg)


TINY = dict(hidden_size=12, n_envs=2, seed=3, eval_interval=0)


@pytest.mark.parametrize("backbone", ["lif", "alif"])
@pytest.mark.parametrize("feedback", ["symmetric", "random"])
def test_online_window_from_zero_traces_equals_offline_eprop(backbone, feedback):
    algo = snrl.A2C(
        "CartPole-v1",
        backbone=backbone,
        learning_rule="eprop",
        eprop_feedback=feedback,
        n_steps=48,
        **TINY,
    )
    rule = algo.learning_rule
    assert isinstance(rule, OnlineEProp) and rule.traces == {}
    algo._start_envs()
    buf, _ = algo._collect()
    mb = buf.minibatch(torch.arange(2), 0, 48)
    assert bool(mb.starts[0].all()) and bool(mb.starts[1:].any())  # whole episodes inside
    algo.optimizer.zero_grad()
    loss, _, _ = algo.window_loss(mb)
    rec = {r["name"]: r for r in rule._records}
    rule.backward(loss)
    got = {n: p.grad.clone() for n, p in algo.agent.named_parameters() if p.grad is not None}
    for name in ("policy", "critic"):
        net, r = getattr(algo.agent, name), rec[name]
        layer, readout = net.spiking_layers[0], net.readout
        back = filter_backward(r["grad_out"][0], readout.decay("tau_m"), mb.starts)
        signal = back @ rule.feedback_matrix(name, net).T
        if r["z"].grad is not None:  # the rate penalty's local signal (policy)
            signal = signal + r["z"].grad
        for p in layer.parameters():
            p.grad = None
        grads = eprop_layer_gradients(layer, mb.obs, r["state"], signal, starts=mb.starts)
        apply_layer_gradients(layer, *grads)
        for n, p in layer.named_parameters():
            if p.grad is not None:
                want = got[f"{name}.layers.{backbone}0.{n}"]
                torch.testing.assert_close(want, p.grad, rtol=1e-5, atol=1e-7)
        assert float(got[f"{name}.layers.{backbone}0.weight_rec"].abs().max()) > 0
        assert rule.traces[name].fe is not None  # carried on to the next window


def test_traces_are_carried_and_restart_with_the_envs():
    algo = snrl.A2C("CartPole-v1", learning_rule="eprop", n_steps=5, **TINY)
    algo.learn(20)
    carried = algo.learning_rule.traces["policy"]
    assert float(carried.fe.abs().max()) > 0
    algo.learn(40)  # continues: the same envs, the traces carried on
    assert algo.learning_rule.traces["policy"] is not carried
    algo.close()
    algo._start_envs()  # new envs (a resume, a curriculum lesson): every trace at zero
    assert algo.learning_rule.traces == {}


def test_online_eprop_keeps_dale_after_many_updates():
    algo = snrl.A2C(
        "CartPole-v1",
        learning_rule="eprop",
        n_steps=4,
        optimizer="adamw",
        weight_decay=0.1,
        lr=3e-3,
        **TINY,
    )
    layers = [algo.agent.policy.spiking_layers[0], algo.agent.critic.spiking_layers[0]]
    w0 = [lay.recurrent_weights.detach().clone() for lay in layers]
    algo.learn(2 * 4 * 150, progress=False)  # 150 updates
    assert algo.n_updates == 150
    for lay, before in zip(layers, w0):
        w = lay.recurrent_weights.detach()
        assert not torch.allclose(w, before)
        sign = lay.recurrent_sign[:, None]
        assert bool((w * sign >= 0).all())  # every row keeps its neuron's sign
        assert bool((w.diagonal() == 0).all())  # no autapse grows


def test_bptt_runs_are_deterministic():
    def weights():
        algo = snrl.A2C("CartPole-v1", n_steps=5, **TINY)
        algo.learn(100, progress=False)
        return torch.cat([p.detach().flatten() for p in algo.agent.parameters()])

    assert torch.equal(weights(), weights())


# three `snrl` processes each: e-prop by default (the online traces through a resume), BPTT slow
@pytest.mark.parametrize("rule", ["eprop", pytest.param("bptt", marks=pytest.mark.slow)])
def test_cli_train_resume_eval(tmp_path, rule):
    out = tmp_path / "run"
    common = ("--env", "CartPole-v1", "--hidden", 16, "--n-envs", 4, "--quiet")
    res = snrl_cmd(
        "train",
        "--algo",
        "a2c",
        *common,
        "--learning-rule",
        rule,
        "--steps",
        320,
        "--out",
        out,
        "--set",
        "n_steps=8",
        "--set",
        "eval_interval=160",
    )
    assert res.returncode == 0, res.stderr
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["algo"] == "a2c" and cfg["learning_rule"] == rule and cfg["n_steps"] == 8
    assert "n_epochs" not in cfg and "clip_coef" not in cfg  # PPO's own keys are not A2C's
    m = read_metrics(out / "metrics.csv")
    np.testing.assert_array_equal(m["env_step"], np.arange(1, 11) * 32)
    assert np.all(np.isfinite(m["policy_loss"])) and np.all(np.isfinite(m["value_loss"]))
    res = snrl_cmd("train", "--algo", "a2c", *common, "--steps", 640, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    m = read_metrics(out / "metrics.csv")
    np.testing.assert_array_equal(m["env_step"], np.arange(1, 21) * 32)
    res = snrl_cmd("eval", out, "--episodes", 2, "--seed", 5)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n_episodes"] == 2
    algo = snrl.load(out / "checkpoints" / "last.pt")
    assert isinstance(algo, snrl.A2C) and algo.env_step == 640


def _clone_traces(traces: dict) -> dict:
    return {
        k: type(el)(*(None if t is None else t.clone() for t in el)) for k, el in traces.items()
    }


def _layer_grads(layer) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("backbone", ["lif", "alif"])
@pytest.mark.parametrize("feedback", ["symmetric", "random"])
@pytest.mark.parametrize("shared", [True, False])
def test_online_windows_add_up_to_offline_eprop(backbone, feedback, shared):
    """Two consecutive windows (the weights held: no optimizer step between), the traces
    carried from the first to the second, give gradients that add up to the offline e-prop
    gradient of the whole 2-window sequence with the readout's error fed back through its
    leak (filter_backward, across the window boundary) and B, plus the rate penalty's local
    signal. With ``shared_trunk`` one spiking layer sits under one readout of 3 columns (2
    logits, the value), so B is (N, 3) and both errors reach the same neurons. An env whose
    episode starts at the second window's first step restarts its traces there."""
    n = 24
    algo = snrl.A2C(
        "CartPole-v1",
        backbone=backbone,
        learning_rule="eprop",
        eprop_feedback=feedback,
        n_steps=n,
        shared_trunk=shared,
        **TINY,
    )
    rule, names = algo.learning_rule, algo.agent.backbones
    assert isinstance(rule, OnlineEProp) and names == (
        ("trunk",) if shared else ("policy", "critic")
    )
    layers = {name: getattr(algo.agent, name).spiking_layers[0] for name in names}
    algo._start_envs()
    mbs, recs, online = [], [], []
    for _ in range(2):
        buf, _ = algo._collect()
        mb = buf.minibatch(torch.arange(2), 0, n)
        algo.optimizer.zero_grad()
        loss, _, _ = algo.window_loss(mb)
        recs.append({r["name"]: r for r in rule._records})
        rule.backward(loss)
        mbs.append(mb)
        online.append({name: _layer_grads(layer) for name, layer in layers.items()})
    obs = torch.cat([m.obs for m in mbs])
    starts = torch.cat([m.starts for m in mbs])
    # CartPole seed 3: env 1's episode ends with the first window, the second starts anew
    assert bool(starts[0].all()) and starts[n].tolist() == [False, True]
    for name, layer in layers.items():
        net, rec = getattr(algo.agent, name), [r[name] for r in recs]
        assert float(rule.traces[name].fe.abs().max()) > 0 and rec[0]["fresh"] is None
        g_out = torch.cat([r["grad_out"][0] for r in rec])
        fb = rule.feedback_matrix(name, net)
        assert fb.shape == (layer.output_size, g_out.shape[-1])
        if shared:  # the value's error is the third column
            assert g_out.shape[-1] == 3 and float(g_out[..., 2].abs().max()) > 0
        signal = filter_backward(g_out, net.readout.decay("tau_m"), starts) @ fb.T
        if rec[0]["z"].grad is not None:  # the rate penalty's local signal (the actor)
            signal = signal + torch.cat([r["z"].grad for r in rec])
        for p in layer.parameters():
            p.grad = None
        grads = eprop_layer_gradients(layer, obs, rec[0]["state"], signal, starts=starts)
        apply_layer_gradients(layer, *grads)
        want = _layer_grads(layer)
        got = [o[name] for o in online]
        assert set(want) == set(got[0]) and float(want["weight_rec"].abs().max()) > 0
        for k, w in want.items():
            torch.testing.assert_close(got[0][k] + got[1][k], w, rtol=1e-5, atol=1e-6)
    algo.close()


def test_shared_trunk_policy_and_value_signals_add_online():
    """With carried traces (the second window), the shared trunk's online e-prop gradient of
    the A2C loss is the sum of the gradients of its policy side (policy gradient, entropy,
    rate penalty) and of its value side alone, and the value side alone reaches the trunk's
    neurons only through the value's readout column."""
    n = 12
    algo = snrl.A2C("CartPole-v1", learning_rule="eprop", n_steps=n, shared_trunk=True, **TINY)
    rule, layer = algo.learning_rule, algo.agent.trunk.spiking_layers[0]
    algo._start_envs()
    algo.learn(2 * n, progress=False)  # one update: the traces are carried from here on
    carried = _clone_traces(rule.traces)
    assert float(carried["trunk"].fe.abs().max()) > 0
    buf, _ = algo._collect()
    mb = buf.minibatch(torch.arange(2), 0, n)
    vf = algo.config.vf_coef

    def grad(part):
        rule.traces = _clone_traces(carried)
        algo.optimizer.zero_grad()
        loss, parts, _ = algo.window_loss(mb)
        value = vf * parts["value"]
        (rec,) = rule._records
        rule.backward({"all": loss, "policy": loss - value, "value": value}[part])
        return _layer_grads(layer), rec["grad_out"][0], rule.traces["trunk"]

    g_all, out_all, el_all = grad("all")
    g_pol, out_pol, _ = grad("policy")
    g_val, out_val, el_val = grad("value")
    assert float(out_val[..., :2].abs().max()) == 0 < float(out_val[..., 2].abs().max())
    assert float(out_pol[..., 2].abs().max()) == 0 < float(out_pol[..., :2].abs().max())
    for name, g in g_all.items():
        assert float(g_val[name].abs().max()) > 0, name  # the value's error reaches the trunk
        torch.testing.assert_close(g_pol[name] + g_val[name], g, rtol=1e-5, atol=1e-7)
    for a, b in zip(el_all, el_val):  # the traces do not depend on the signal
        if a is not None:
            torch.testing.assert_close(a, b)
    algo.close()
