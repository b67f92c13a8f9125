"""snntorch networks behind snrl's recurrent protocol, and snrl backbones as snntorch networks.

Oracles: the snntorch module run by hand, step by step, as snntorch's docs do (the wrapper
must give the same spikes and membranes, bit for bit); an snrl backbone and its
``to_snntorch`` conversion on the same random input (same spikes for 500 steps).
"""

import copy

import numpy as np
import pytest
import snntorch as snn
import torch
from torch import nn

import snrl
from snrl.errors import UserError
from snrl.networks import SnntorchBackbone, from_snntorch, to_snntorch
from snrl.networks.sequence import run_with_resets
from snrl.networks.spiking import SpikingBackbone
from snrl.plot.labels import layer_label


def _stack(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(5, 32),
        snn.RLeaky(beta=0.9, linear_features=32, init_hidden=True),
        nn.Linear(32, 16),
        snn.Synaptic(alpha=0.8, beta=0.7, init_hidden=True),
        nn.Linear(16, 8),
        snn.Leaky(beta=0.85, init_hidden=True),
    )


def _reset(net: nn.Sequential) -> None:
    """snntorch's hidden-state reset of every neuron (zeros)."""
    for m in net:
        if isinstance(m, snn.SpikingNeuron):
            m.reset_mem()


def _by_hand(net: nn.Sequential, x: torch.Tensor) -> list[list[torch.Tensor]]:
    """snntorch's own way: reset the hidden states, then call the Sequential step by step;
    returns per step the spikes of each neuron layer."""
    _reset(net)
    out = []
    for t in range(x.shape[0]):
        h = x[t]
        spikes = []
        for m in net:
            h = m(h)
            if isinstance(m, snn.SpikingNeuron):
                spikes.append((h[0] if isinstance(h, tuple) else h).clone())
        out.append(spikes)
    return out


def _input(t: int, b: int, f: int, seed: int = 1, scale: float = 3.0) -> torch.Tensor:
    return torch.rand(t, b, f, generator=torch.Generator().manual_seed(seed)) * scale


@torch.no_grad()
def test_wrapped_sequential_gives_snntorchs_own_spikes():
    net = _stack()
    x = _input(60, 3, 5)
    ref = _by_hand(net, x)
    wrapped = from_snntorch(net)
    res = wrapped.run(x, wrapped.initial_state(3))
    names = [a.name for a in res.activity]
    assert names == ["rleaky1", "synaptic3", "leaky5"]
    for k, act in enumerate(res.activity):
        spikes = torch.stack([step[k] for step in ref])
        assert torch.equal(act.spikes, spikes), act.name
        assert act.spikes.shape == (60, 3, act.size)
    assert torch.equal(res.out, torch.stack([step[-1] for step in ref]))
    # every layer fired, and none always: the comparison compared something
    for act in res.activity:
        assert 0 < float(act.spikes.mean()) < 1, act.name
    # a Synaptic layer reports its synaptic current under the activity's name for it
    assert res.activity["synaptic3"].extra["i"].shape == (60, 3, 16)


@torch.no_grad()
def test_one_step_calls_equal_the_sequence_and_leave_no_state_on_the_module():
    net = _stack()
    wrapped = from_snntorch(net, output_size=2, seed=0)
    x = _input(20, 4, 5)
    seq = wrapped.run(x, wrapped.initial_state(4))
    state = wrapped.initial_state(4)
    outs = []
    for t in range(20):
        r = wrapped.run(x[t], state)
        state = r.state
        outs.append(r.out)
        assert r.activity["rleaky1"].spikes.shape == (4, 32)
    assert torch.equal(torch.stack(outs), seq.out)
    assert seq.out.shape == (20, 4, 2) and seq.activity["readout"].v.shape == (20, 4, 2)
    assert net[1].mem.numel() == 0 and net[1].spk.numel() == 0  # nothing kept on the module


@torch.no_grad()
def test_state_is_per_env_swapped_in_and_reset_per_row():
    net = _stack()
    wrapped = from_snntorch(net)
    x = _input(30, 2, 5)
    # env 0 and env 1 run together; each alone must give the same numbers (state per env)
    both = wrapped.run(x, wrapped.initial_state(2))
    for b in range(2):
        alone = wrapped.run(x[:, b : b + 1], wrapped.initial_state(1))
        assert torch.equal(alone.activity[0].spikes[:, 0], both.activity[0].spikes[:, b])
    # reset env 1 only: its rows become the initial state, env 0's are kept
    state = both.state
    done = torch.tensor([False, True])
    reset = wrapped.reset_state(state, done)
    for old, new in zip(state[0], reset[0]):
        for o, n in zip(old, new):
            assert torch.equal(n[0], o[0]) and not bool(n[1].any())
    # after the reset, env 1 continues as a fresh episode would
    cont = wrapped.run(x[:10, 1:], (tuple(type(s)(*(t[1:] for t in s)) for s in reset[0]),))
    fresh = wrapped.run(x[:10, 1:], wrapped.initial_state(1))
    assert torch.equal(cont.out, fresh.out)


def test_sequences_with_episode_starts_train_through_time():
    net = _stack()
    wrapped = from_snntorch(net, output_size=2, seed=0)
    x = _input(12, 3, 5)
    starts = torch.zeros(12, 3, dtype=torch.bool)
    starts[5, 1] = True
    res = run_with_resets(wrapped, x, wrapped.initial_state(3), starts)
    # row 1 after its start equals a fresh run from that step
    with torch.no_grad():
        fresh = wrapped.run(x[5:, 1:2], wrapped.initial_state(1))
    assert torch.allclose(res.out[5:, 1:2], fresh.out)
    res.out.sum().backward()  # BPTT reaches the user's weights, the recurrent ones too
    assert net[0].weight.grad.abs().sum() > 0
    assert net[1].recurrent.weight.grad.abs().sum() > 0


class ExplicitNet(nn.Module):
    """A user's network with explicit state (init_hidden=False), as the docs describe."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.fc1 = nn.Linear(4, 24)
        self.lif1 = snn.RLeaky(beta=0.9, linear_features=24)
        self.fc2 = nn.Linear(24, 3)
        self.lif2 = snn.Leaky(beta=0.8)

    def initial_state(self, batch_size):
        z24, z3 = torch.zeros(batch_size, 24), torch.zeros(batch_size, 3)
        return (z24, z24.clone(), z3)

    def forward(self, x, state):
        spk1, mem1, mem2 = state
        spk1, mem1 = self.lif1(self.fc1(x), spk1, mem1)
        spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
        return spk2, (spk1, mem1, mem2)


@torch.no_grad()
def test_explicit_state_module_is_wrapped_and_recorded():
    net = ExplicitNet()
    x = _input(40, 2, 4)
    state, ref = net.initial_state(2), []
    for t in range(40):
        out, state = net(x[t], state)
        ref.append(out)
    wrapped = from_snntorch(net)
    res = wrapped.run(x, wrapped.initial_state(2))
    assert torch.equal(res.out, torch.stack(ref))
    assert [a.name for a in res.activity] == ["lif1", "lif2"]
    assert res.activity["lif1"].spikes.shape == (40, 2, 24)
    assert [i.size for i in wrapped.layer_info()] == [24, 3]
    done = torch.tensor([True, False])
    reset = wrapped.reset_state(res.state, done)
    assert not bool(reset[0][1][0].any()) and torch.equal(reset[0][1][1], res.state[0][1][1])


def test_layer_info_counts_the_synapses_leaving_each_layer():
    net = nn.Sequential(
        nn.Linear(4, 8),
        snn.RLeaky(beta=0.9, linear_features=8, init_hidden=True),
        nn.Linear(8, 5),
        snn.Leaky(beta=0.9, init_hidden=True),
        nn.Linear(5, 3),
    )
    infos = from_snntorch(net).layer_info()
    assert [(i.name, i.size, i.fan_in, i.fan_out) for i in infos] == [
        ("rleaky1", 8, 4, 8 + 5),  # all-to-all recurrence (autapses included) + next layer
        ("leaky3", 5, 8, 3),  # the final nn.Linear
    ]
    with_readout = from_snntorch(net, output_size=2).layer_info()
    assert with_readout[-1][:5] == ("readout", "readout", 2, 3, 0)


def test_unsupported_modules_are_refused_by_name():
    with pytest.raises(UserError, match=r"snn.Alpha at index 1 .*supported: nn.Linear"):
        from_snntorch(nn.Sequential(nn.Linear(4, 8), snn.Alpha(alpha=0.9, beta=0.8)))
    with pytest.raises(UserError, match=r"torch.nn.modules.conv.Conv1d at index 2"):
        from_snntorch(
            nn.Sequential(
                nn.Linear(4, 8), snn.Leaky(beta=0.9, init_hidden=True), nn.Conv1d(1, 1, 1)
            )
        )
    with pytest.raises(UserError, match="starts with snn.Leaky"):
        from_snntorch(nn.Sequential(snn.Leaky(beta=0.9, init_hidden=True)))
    with pytest.raises(UserError, match="neither an nn.Sequential nor an explicit-state"):
        from_snntorch(nn.GRU(4, 8))

    class Hidden(ExplicitNet):
        def __init__(self):
            super().__init__()
            self.lif2 = snn.Leaky(beta=0.8, init_hidden=True)

    with pytest.raises(UserError, match="'lif2' of Hidden has init_hidden=True"):
        from_snntorch(Hidden())


def test_ppo_takes_a_users_snntorch_network_as_backbone(tmp_path):
    net = nn.Sequential(
        nn.Linear(4, 16), snn.RLeaky(beta=0.9, linear_features=16, init_hidden=True)
    )
    algo = snrl.PPO("CartPole-v1", backbone=net, n_envs=2, n_steps=32, seed=0, eval_interval=0)
    policy, critic = algo.agent.policy, algo.agent.critic
    assert isinstance(policy, SnntorchBackbone) and policy.module is net
    assert critic.module is not net  # the critic trains its own copy
    before = net[1].recurrent.weight.detach().clone()
    history = algo.learn(128, progress=False)
    assert not torch.equal(net[1].recurrent.weight, before)  # the user's weights trained
    assert "spike_rate_rleaky1" in history
    traj = algo.rollout(seed=0, record=True)
    assert traj.activity["rleaky1"].spikes.shape[1] == 16
    assert traj.meta["backbone"] == "snntorch"  # what the video's title says, not "lif"
    assert layer_label(traj.activity["rleaky1"], 0) == "Layer 1: snntorch RLeaky, 16 neurons"
    # saved and loaded with modules of the same shape, as any custom backbone
    algo.save(tmp_path / "ckpt.pt")
    fresh = [copy.deepcopy(net) for _ in range(2)]
    for m in fresh:
        torch.nn.init.zeros_(m[0].weight)
    loaded = snrl.PPO.load(
        tmp_path / "ckpt.pt",
        policy=from_snntorch(fresh[0], 2),
        critic=from_snntorch(fresh[1], 1),
    )
    x = torch.rand(6, 1, 4)
    with torch.no_grad():
        mine = algo.agent.policy.run(x, algo.agent.policy.initial_state(1)).out
        back = loaded.agent.policy.run(x, loaded.agent.policy.initial_state(1)).out
    assert torch.equal(mine, back)
    algo.close()
    loaded.close()
    with pytest.raises(UserError, match="backbone=<an nn.Module> and policy="):
        snrl.PPO("CartPole-v1", backbone=net, policy=from_snntorch(copy.deepcopy(net), 2))


def test_the_video_of_a_users_snntorch_network_draws_its_spikes():
    """The renderer draws the wrapped network's own spikes: the same frame with those spikes
    removed is another picture."""
    import dataclasses

    from snrl.networks.activity import Activity
    from snrl.render import TrajectoryRenderer

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(4, 16), snn.RLeaky(beta=0.9, linear_features=16, init_hidden=True)
    )
    algo = snrl.PPO("CartPole-v1", backbone=net, n_envs=1, seed=0, eval_interval=0)
    traj = algo.rollout(seed=0, record=True, max_steps=30)
    algo.close()
    spikes = traj.activity["rleaky1"].spikes
    k = int(np.flatnonzero(spikes.sum(1) > 0)[0])  # a step where the user's neurons spiked
    silent = traj.replace(
        activity=Activity(
            [
                layer if layer.name != "rleaky1"
                else dataclasses.replace(layer, spikes=np.zeros_like(layer.spikes))
                for layer in traj.activity
            ]
        )
    )  # fmt: skip
    drawn = TrajectoryRenderer(traj, activity=True).frame(k)
    assert not np.array_equal(drawn, TrajectoryRenderer(silent, activity=True).frame(k))


def test_dqn_takes_a_users_snntorch_network_as_backbone():
    net = nn.Sequential(nn.Linear(4, 16), snn.Leaky(beta=0.9, init_hidden=True))
    algo = snrl.DQN("CartPole-v1", backbone=net, seed=0)
    assert algo.agent.q_net.module is net and algo.agent.q_net.output_size == 2
    algo.close()


# ------------------------------------------------------------------------ to_snntorch
@pytest.mark.parametrize("kind", ["lif", "spylif"])
@pytest.mark.parametrize("dale", [True, False])
@torch.no_grad()
def test_to_snntorch_gives_the_same_spikes_for_500_steps(kind, dale):
    bb = SpikingBackbone(6, [64, 32], 3, backbone=kind, force_dale_law=dale, seed=1)
    net = to_snntorch(bb)
    x = _input(500, 4, 6, seed=0)
    mine = bb.run(x, bb.initial_state(4))
    theirs = _by_hand(net, x)
    spiking = [a for a in mine.activity if a.spikes is not None]
    for k, act in enumerate(spiking):
        spikes = torch.stack([step[k] for step in theirs])
        assert torch.equal(act.spikes, spikes), act.name
        assert 0 < float(act.spikes.mean()) < 1
    # the readout: snntorch's Leaky without reset returns (spikes, membrane); the membrane is
    # the output (float32 sums in another order: equal to rounding)
    _reset(net)
    out = torch.stack([net(x[t])[1] for t in range(500)])
    assert torch.allclose(out, mine.out, atol=1e-4)
    assert type(net[1]) is (snn.RLeaky if kind == "lif" else snn.RSynaptic)
    if dale:  # the signs are in the weights: row i of snrl's matrix is column i of snntorch's
        sign = bb.layers[f"{kind}0"].recurrent_sign
        w = net[1].recurrent.weight  # (post, pre)
        assert bool(((w * sign[None, :]) >= 0).all())


@torch.no_grad()
def test_round_trip_is_exact():
    bb = SpikingBackbone(6, 32, 3, force_dale_law=True, seed=4)
    net = to_snntorch(bb)
    back = to_snntorch(from_snntorch(net))
    assert back is not net
    a, b = net.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # and the wrapped snntorch module runs to the backbone's spikes and output
    wrapped = from_snntorch(net)
    x = _input(200, 2, 6, seed=5)
    mine = bb.run(x, bb.initial_state(2))
    res = wrapped.run(x, wrapped.initial_state(2))
    assert torch.equal(mine.activity["lif0"].spikes, res.activity["rleaky1"].spikes)
    assert res.activity[-1].kind == "readout"
    assert torch.allclose(mine.out, res.out, atol=1e-4)


def test_to_snntorch_refuses_what_snntorch_cannot_run():
    with pytest.raises(UserError, match="no snntorch neuron .*adaptive-threshold"):
        to_snntorch(SpikingBackbone(4, 8, 2, backbone="alif", seed=0))
    with pytest.raises(UserError, match="reset='zero' in a recurrent lif layer"):
        to_snntorch(SpikingBackbone(4, 8, 2, seed=0, reset="zero"))
    with pytest.raises(UserError, match="substeps=2"):
        to_snntorch(SpikingBackbone(4, 8, 2, seed=0, substeps=2))
    with pytest.raises(UserError, match="takes a SpikingBackbone, got MLP"):
        to_snntorch(snrl.build_backbone("mlp", 4, 2))
    # a LIF layer without recurrence maps its zero reset exactly (snn.Leaky's is the same)
    bb = SpikingBackbone(4, 8, None, seed=0, reset="zero", use_recurrent_connection=False)
    net = to_snntorch(bb)
    x = _input(100, 2, 4, seed=2)
    with torch.no_grad():
        mine = bb.run(x, bb.initial_state(2)).out
    theirs = torch.stack([s[0] for s in _by_hand(net, x)])
    assert torch.equal(mine, theirs) and 0 < float(mine.mean()) < 1


def test_snntorch_is_a_real_dependency():
    import snrl.networks.interop as interop

    assert interop.snn is snn
    assert np.isfinite(float(SpikingBackbone(2, 4, 1, seed=0).layers["lif0"].tau_m.mean()))
