"""optimizer / optimizer_kwargs / weight_decay / lr_schedule / loss_terms: each is used when
asked, checkpoints keep what the optimizer needs, Python-only callables are refused where a
file would have to hold them."""

from __future__ import annotations

import math

import pytest
import torch

import snrl
from snrl.agents.optim import FlatAdam

TINY = dict(
    backbone="mlp",
    hidden_size=8,
    n_envs=2,
    n_steps=16,
    n_epochs=2,
    eval_interval=0,
    eval_episodes=1,
    seed=0,
)
DQN_TINY = dict(
    backbone="mlp",
    hidden_size=8,
    n_envs=2,
    learning_starts=40,
    batch_size=8,
    log_interval=40,
    eval_interval=0,
    eval_episodes=1,
    seed=0,
)


def test_adam_is_the_default_and_sgd_is_used_when_asked(tmp_path):
    assert isinstance(snrl.PPO("CartPole-v1", **TINY).optimizer, FlatAdam)
    algo = snrl.PPO(
        "CartPole-v1",
        optimizer="sgd",
        optimizer_kwargs={"momentum": 0.9},
        weight_decay=1e-3,
        lr=0.05,
        **TINY,
    )
    opt = algo.optimizer
    assert type(opt) is torch.optim.SGD
    group = opt.param_groups[0]
    assert (group["momentum"], group["weight_decay"], group["lr"]) == (0.9, 1e-3, 0.05)
    assert sum(p.numel() for p in group["params"]) == sum(
        p.numel() for p in algo.agent.parameters() if p.requires_grad
    )
    before = [p.detach().clone() for p in group["params"]]
    algo.learn(64, progress=False)
    # SGD stepped every parameter and keeps a momentum buffer for each
    assert all(not torch.equal(a, p) for a, p in zip(before, group["params"]))
    assert all("momentum_buffer" in opt.state[p] for p in group["params"])
    algo.save(tmp_path / "c.pt")
    again = snrl.PPO.load(tmp_path / "c.pt")
    assert type(again.optimizer) is torch.optim.SGD
    for p, q in zip(group["params"], again.optimizer.param_groups[0]["params"]):
        assert torch.equal(
            opt.state[p]["momentum_buffer"], again.optimizer.state[q]["momentum_buffer"]
        )
    algo.close()


@pytest.mark.parametrize(
    "name, cls", [("adamw", torch.optim.AdamW), ("rmsprop", torch.optim.RMSprop)]
)
def test_the_other_torch_optimizers(name, cls):
    algo = snrl.DQN("CartPole-v1", optimizer=name, weight_decay=0.01, **DQN_TINY)
    assert type(algo.optimizer) is cls and algo.optimizer.param_groups[0]["weight_decay"] == 0.01
    algo.learn(80, progress=False)
    assert algo.n_grad_steps > 0 and len(algo.optimizer.state) > 0
    algo.close()


def test_cosine_schedule_sets_the_lr_of_every_update_by_the_formula():
    total, lr = 6 * 32, 2e-3
    algo = snrl.PPO("CartPole-v1", lr=lr, lr_schedule="cosine", **TINY)
    hist = algo.learn(total, progress=False)
    expect = [lr * 0.5 * (1 + math.cos(math.pi * 32 * i / total)) for i in range(6)]
    assert hist["lr"] == pytest.approx(expect, rel=1e-12)
    assert algo.optimizer.param_groups[0]["lr"] == pytest.approx(expect[-1], rel=1e-12)
    # linear (PPO's default), constant, and a callable of the progress
    for schedule, fn in (
        ("linear", lambda p: 1 - p),
        ("constant", lambda p: 1.0),
        (lambda p: 1 - p * p, lambda p: 1 - p * p),
    ):
        a = snrl.PPO("CartPole-v1", lr=lr, lr_schedule=schedule, **TINY)
        h = a.learn(4 * 32, progress=False)
        assert h["lr"] == pytest.approx([lr * fn(i / 4) for i in range(4)], rel=1e-12)
        a.close()
    algo.close()


def test_dqn_schedule_is_set_per_row():
    seen = []

    class LrSpy(snrl.callbacks.Callback):
        def on_rollout_end(self, algo):
            seen.append((algo.env_step, algo.optimizer.param_groups[0]["lr"]))

    algo = snrl.DQN("CartPole-v1", lr=1e-3, lr_schedule="cosine", optimizer="sgd", **DQN_TINY)
    algo.learn(160, callbacks=[LrSpy()], progress=False)
    # the lr of a row is set from the progress where the row starts (env_step - 40)
    assert [s for s, _ in seen] == [40, 80, 120, 160]
    assert [v for _, v in seen] == pytest.approx(
        [1e-3 * 0.5 * (1 + math.cos(math.pi * (s - 40) / 160)) for s, _ in seen], rel=1e-12
    )
    algo.close()


def test_a_callable_optimizer_and_schedule_are_refused_unless_passed_again(tmp_path):
    def make(params):
        return torch.optim.SGD(params, lr=0.01)

    def sched(p):
        return 1.0 - 0.5 * p

    algo = snrl.PPO("CartPole-v1", optimizer=make, lr_schedule=sched, **TINY)
    assert algo.config.optimizer == "custom" and algo.config.lr_schedule == "custom"
    assert type(algo.optimizer) is torch.optim.SGD
    algo.learn(32, progress=False)
    algo.save(tmp_path / "c.pt")
    with pytest.raises(snrl.UserError, match="optimizer='custom'.*load\\(path, optimizer=fn\\)"):
        snrl.PPO.load(tmp_path / "c.pt")
    with pytest.raises(snrl.UserError, match="lr_schedule='custom'"):
        snrl.PPO.load(tmp_path / "c.pt", optimizer=make)
    again = snrl.PPO.load(tmp_path / "c.pt", optimizer=make, lr_schedule=sched)
    assert (
        again.optimizer.state_dict()["state"].keys() == algo.optimizer.state_dict()["state"].keys()
    )
    with pytest.raises(snrl.UserError, match="optimizer='custom' stands for a function"):
        snrl.PPO("CartPole-v1", optimizer="custom", **TINY)
    with pytest.raises(snrl.UserError, match="must return a torch.optim.Optimizer"):
        snrl.PPO("CartPole-v1", optimizer=lambda params: None, **TINY)
    bad = snrl.PPO("CartPole-v1", lr_schedule=lambda p: -1.0, **TINY)
    with pytest.raises(snrl.UserError, match="finite multiplier >= 0"):
        bad.learn(32, progress=False)
    algo.close()


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(optimizer="lbfgs"), "optimizer='lbfgs'"),
        (dict(lr_schedule="step"), "lr_schedule='step'"),
        (dict(weight_decay=-0.1), "weight_decay=-0.1"),
        (dict(optimizer_kwargs={"momentum": 0.9}), "not taken by optimizer='adam'"),
        (dict(optimizer="sgd", optimizer_kwargs={"betas": (0.9, 0.99)}), "torch.optim.SGD"),
        (dict(loss_terms=["my_penalty"]), "loss_terms has 'my_penalty'"),
    ],
)
def test_bad_optimizer_settings_are_user_errors(kw, match):
    with pytest.raises(snrl.UserError, match=match):
        snrl.PPO("CartPole-v1", **{**TINY, **kw})


# ---- loss_terms: docs/agents.md's examples -------------------------------------------------
def ei_rate_target(activity, batch):
    """Pull the mean rate of the E and the I population of each spiking layer to a target."""
    loss = torch.zeros(())
    for layer in activity.spiking():
        rates = layer.spikes.reshape(-1, layer.size).mean(0)  # spikes per step, per neuron
        inh = torch.as_tensor(layer.sign) < 0
        loss = loss + (rates[~inh].mean() - 0.05) ** 2 + (rates[inh].mean() - 0.1) ** 2
    return 10.0 * loss


def _grads(algo, loss):
    algo.agent.zero_grad(set_to_none=True)
    loss.backward()
    return [
        torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in algo.agent.parameters()
    ]


def test_a_loss_term_changes_the_gradient_by_exactly_its_own_gradient():
    def l2_recurrent(activity, batch):  # 1e-3 x the squared recurrent weights of the policy
        layers = [m for m in algo.agent.policy.modules() if hasattr(m, "weight_rec")]
        return 1e-3 * sum(layer.recurrent_weights.pow(2).sum() for layer in layers)

    algo = snrl.PPO("CartPole-v1", **{**TINY, "backbone": "lif", "hidden_size": 12})
    algo._start_envs()
    buf, _ = algo._collect()
    mb = buf.minibatch(torch.arange(2), 0, 16)
    g0 = _grads(algo, algo.minibatch_loss(mb)[0])
    _, _, activity = algo.minibatch_loss(mb)
    own = _grads(algo, l2_recurrent(activity, mb) + ei_rate_target(activity, mb))
    algo.loss_terms = [l2_recurrent, ei_rate_target]
    g1 = _grads(algo, algo.minibatch_loss(mb)[0])
    assert any(o.abs().max() > 1e-4 for o in own)  # both terms pull on the weights
    for a, b, o in zip(g0, g1, own):
        torch.testing.assert_close(b - a, o, rtol=1e-4, atol=1e-7)
    algo.close()


def test_dqn_loss_terms_see_the_q_networks_activity_and_the_batch(tmp_path):
    calls = []

    def term(activity, batch):
        calls.append((activity.names, sorted(batch)))
        return torch.zeros((), requires_grad=True)

    algo = snrl.DQN(
        "CartPole-v1",
        loss_terms=[term],
        **{**DQN_TINY, "backbone": "lif", "seq_len": 4, "burn_in": 2},
    )
    assert algo.config.loss_terms == (
        f"{__name__}.test_dqn_loss_terms_see_the_q_networks_activity_and_the_batch.<locals>.term",
    )
    algo.learn(80, progress=False)
    assert len(calls) == algo.n_grad_steps > 0
    assert "lif0" in calls[0][0] and "seq_obs" in calls[0][1]
    algo.save(tmp_path / "c.pt")
    with pytest.raises(snrl.UserError, match="trained with loss_terms"):
        snrl.DQN.load(tmp_path / "c.pt")
    assert snrl.DQN.load(tmp_path / "c.pt", loss_terms=[term]).loss_terms == [term]
    mlp = snrl.DQN("CartPole-v1", loss_terms=[term], **DQN_TINY)  # transitions: no hand gradient
    assert not mlp._manual_grad()
    mlp.learn(80, progress=False)
    assert (
        calls[-1][0]
        == mlp.agent.q_net.run(torch.zeros(1, 4), mlp.agent.q_net.initial_state(1)).activity.names
    )
    algo.close()
    mlp.close()
