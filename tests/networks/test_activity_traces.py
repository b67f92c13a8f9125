"""Model-specific state variables are part of the activity: ALIF's adaptation ``a`` and
SpyLIF's synaptic current ``i``, after every step, the same from a sequence call, a loop of
one-step calls and a recorded trajectory."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from snrl.networks.spiking import SpikingBackbone


@pytest.mark.parametrize(("backbone", "field"), [("alif", "a"), ("spylif", "i")])
def test_traces_of_a_sequence_equal_the_step_loop_and_the_state(backbone, field):
    net = SpikingBackbone(3, 6, 2, backbone=backbone, force_dale_law=True, seed=0)
    x = torch.randn(12, 4, 3, generator=torch.Generator().manual_seed(1)) * 3
    seq = net.run(x, net.initial_state(4))
    trace = seq.activity[0].extra[field]
    assert trace.shape == (12, 4, 6)
    assert torch.equal(trace[-1], getattr(seq.state[0], field))  # the last step is the state
    assert trace.abs().sum() > 0  # the input drives it (a dead trace would pass the rest)
    state = net.initial_state(4)
    for t in range(12):
        step = net.run(x[t], state)
        state = step.state
        torch.testing.assert_close(step.activity[0].extra[field], trace[t])
    assert "a" not in net.run(x, net.initial_state(4)).activity["readout"].extra


def test_lif_has_no_extra_trace_and_alif_adaptation_follows_its_spikes():
    lif = SpikingBackbone(3, 5, 2, backbone="lif", seed=0)
    assert dict(lif.run(torch.randn(4, 2, 3), lif.initial_state(2)).activity[0].extra) == {}
    alif = SpikingBackbone(3, 5, 2, backbone="alif", dt=1e-3, tau_a=0.2, seed=0)
    x = torch.randn(30, 2, 3, generator=torch.Generator().manual_seed(2)) * 4
    with torch.no_grad():
        layer = alif.run(x, alif.initial_state(2)).activity[0]
    a, z = layer.extra["a"].numpy(), layer.spikes.numpy()
    assert z.sum() > 0
    rho = np.exp(-1e-3 / 0.2)  # by hand: a_t = rho a_{t-1} + (1 - rho) z_{t-1}, a_{-1} = 0
    np.testing.assert_allclose(a[0], 0.0)
    np.testing.assert_allclose(a[1:], rho * a[:-1] + (1 - rho) * z[:-1], atol=1e-6)


def test_a_recorded_alif_rollout_keeps_its_adaptation_through_a_file(tmp_path):
    import snrl

    algo = snrl.PPO("CartPole-v1", backbone="alif", hidden_size=8, n_envs=1, seed=0)
    traj = algo.rollout(seed=0, record=False, max_steps=20)
    a = traj.activity["alif0"].extra["a"]
    assert a.shape == (len(traj), 8)
    back = snrl.Trajectory.load(traj.save(tmp_path / "t.npz"))
    np.testing.assert_array_equal(back.activity["alif0"].extra["a"], a)
