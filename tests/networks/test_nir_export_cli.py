"""``snrl export DIR --nir FILE.nir`` as a user runs it, and the exported policy read back.

Oracle: for 500 CartPole steps (episodes reset as they end) the graph read back with
``nir.read`` and built by ``from_nir`` gives the run's own policy's spikes and actions exactly,
fed the observations normalized as the graph's metadata says.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch

from snrl.agents import load_algo
from snrl.networks import from_nir
from tests.cli_run import assert_user_error, snrl, snrl_inproc

nir = pytest.importorskip("nir")


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    res = snrl(
        "train", "--algo", "ppo", "--env", "CartPole-v1", "--hidden", "32", "--steps", "1024",
        "--seed", "3", "--out", out,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out


@torch.no_grad()
def test_export_writes_a_graph_that_acts_as_the_policy(run_dir, tmp_path):
    path = tmp_path / "policy.nir"
    res = snrl("export", run_dir, "--nir", path)
    assert res.returncode == 0, res.stderr
    assert f"wrote {path}" in res.stdout
    graph = nir.read(path)  # with nir's type inference
    meta = graph.metadata
    assert float(meta["dt"]) == 1e-3 and bool(meta["obs_normalized"])
    net = from_nir(graph)
    algo = load_algo(run_dir / "checkpoints" / "best.pt")
    policy = algo.agent.actor
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=11)
    s_mine, s_nir = policy.initial_state(1), net.initial_state(1)
    n_spikes = 0
    for _ in range(500):
        raw = torch.as_tensor(obs, dtype=torch.float32)[None]
        x = algo.agent.preprocess(obs[None])
        # the graph's input: the normalization its metadata states
        mean, std = torch.as_tensor(meta["obs_mean"]), torch.as_tensor(meta["obs_std"])
        x_meta = torch.clamp((raw - mean) / std, -meta["obs_clip"], meta["obs_clip"])
        assert torch.allclose(x_meta, x, atol=1e-5)
        a, b = policy.run(x, s_mine), net.run(x, s_nir)
        s_mine, s_nir = a.state, b.state
        assert torch.equal(a.activity["lif0"].spikes, b.activity["lif0"].spikes)
        assert torch.equal(a.out, b.out)
        n_spikes += int(a.activity["lif0"].spikes.sum())
        obs, _, term, trunc, _ = env.step(int(a.out.argmax()))
        if term or trunc:
            obs, _ = env.reset()
            s_mine, s_nir = policy.initial_state(1), net.initial_state(1)
    env.close()
    assert n_spikes > 0


def test_export_refuses_bad_paths(run_dir, tmp_path, capsys):
    assert_user_error(
        snrl_inproc(capsys, "export", run_dir, "--nir", tmp_path / "p.onnx"), "unknown extension"
    )
    taken = tmp_path / "taken.nir"
    taken.write_text("mine")
    assert_user_error(snrl_inproc(capsys, "export", run_dir, "--nir", taken), "exists")
    assert taken.read_text() == "mine"  # not overwritten
    assert_user_error(
        snrl_inproc(capsys, "export", tmp_path / "nope", "--nir", tmp_path / "x.nir"),
        "does not exist",
    )
    assert not (tmp_path / "x.nir").exists()


@torch.no_grad()
def test_a_neurogym_policy_round_trips_at_the_tasks_dt(tmp_path):
    pytest.importorskip("neurogym")
    import snrl
    from snrl.networks import to_nir

    algo = snrl.PPO("PerceptualDecisionMaking-v0", tau_m=1.0, readout_tau_m=1.0, n_envs=2, seed=0)
    policy = algo.agent.actor
    dt = policy.params.dt
    assert dt != 1e-3  # the task's own step (docs/neuro.md), not the default
    path = tmp_path / "task.nir"
    nir.write(path, to_nir(policy))
    graph = nir.read(path)
    assert float(graph.metadata["dt"]) == dt
    net = from_nir(graph)
    steps, seed, n_spikes = 0, 1, 0
    while steps < 500:  # whole episodes, each from rest, until 500 task steps
        traj = algo.rollout(seed=seed, record=False, max_steps=500)
        obs = algo.agent.preprocess(np.asarray(traj.observations))[:, None]  # (T, 1, F)
        a = policy.run(obs, policy.initial_state(1))
        b = net.run(obs, net.initial_state(1))
        assert torch.equal(a.activity[0].spikes, b.activity[0].spikes)
        assert torch.equal(a.out, b.out)
        steps, seed = steps + obs.shape[0], seed + 1
        n_spikes += int(a.activity[0].spikes.sum())
    assert n_spikes > 0
    algo.close()


@torch.no_grad()
def test_a_dqn_q_network_is_exported_too():
    import snrl
    import snrl.export

    algo = snrl.DQN("CartPole-v1", seed=0)
    q_net = algo.agent.actor
    graph = snrl.export.to_nir(algo)
    net = from_nir(graph)
    x = torch.rand(100, 1, 4, generator=torch.Generator().manual_seed(2)) * 2
    a, b = q_net.run(x, q_net.initial_state(1)), net.run(x, net.initial_state(1))
    assert torch.equal(a.activity["lif0"].spikes, b.activity["lif0"].spikes)
    assert torch.equal(a.out, b.out)  # the Q-values, so the greedy actions too
    algo.close()


@torch.no_grad()
def test_a_shared_trunk_is_exported_with_its_value_output_named():
    import snrl
    import snrl.export

    algo = snrl.PPO("CartPole-v1", hidden_size=16, seed=0, shared_trunk=True)
    trunk = algo.agent.actor
    graph = snrl.export.to_nir(algo)
    assert graph.metadata["policy_outputs"] == 2 and graph.metadata["value_output"] == 2
    net = from_nir(graph)
    x = torch.rand(50, 1, 4, generator=torch.Generator().manual_seed(3)) * 2
    a, b = trunk.run(x, trunk.initial_state(1)), net.run(x, net.initial_state(1))
    assert torch.equal(a.out, b.out) and a.out.shape[-1] == 3  # logits, logits, value
    torch.testing.assert_close(
        algo.agent.value(x[0], algo.agent.initial_state(1).trunk), b.out[0, :, 2]
    )
    algo.close()
