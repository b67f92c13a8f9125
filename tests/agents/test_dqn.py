"""DQN: sequence replay rebuilds the actor's Q-values, targets, save/load, learning, errors."""

import dataclasses
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl
from snrl.agents.dqn import DQN, DQNConfig
from snrl.buffers import SequenceWriter
from snrl.errors import UserError
from snrl.functional.state import state_leaves
from snrl.training.metrics import read_metrics
from tests.cli_run import snrl as _snrl

TINY = dict(hidden_size=16, n_envs=2, eval_interval=0, eval_episodes=2, log_interval=200)


def _record_actor(algo: DQN) -> dict[bytes, torch.Tensor]:
    """Wrap the actor's Q step (``_q_step``, what acting calls) so that every (raw
    observation -> Q) it computes is kept."""
    seen: dict[bytes, torch.Tensor] = {}
    q_step = algo.agent._q_step

    def recording(x, state, **kw):
        q, new_state, activity = q_step(x, state, **kw)
        for row, qrow in zip(x, q):
            seen[row.numpy().astype(np.float32).tobytes()] = qrow.clone()
        return q, new_state, activity

    algo.agent._q_step = recording
    return seen


@pytest.mark.parametrize(
    "backbone,extra",
    [
        ("lif", {}),
        ("lif", {"hh_init": "random", "dueling": "avg"}),
        ("alif", {"burn_in": 0, "seq_len": 5}),
        ("gru", {}),
        ("mlp", {"replay": "sequence"}),
    ],
)
def test_sequence_replay_rebuilds_actor_q_from_stored_state(backbone, extra):
    """Before the first gradient step the learner's pass over a window, started from the stored
    state (burn-in included, reset where an episode starts), gives exactly the Q-values the
    actor computed at every valid step."""
    algo = DQN(
        "CartPole-v1",
        backbone=backbone,
        seed=4,
        normalize_obs=False,  # the actor and the learner see the same inputs
        learning_starts=10**6,  # collect only
        **{**TINY, "seq_len": 8, "burn_in": 4, **extra},
    )
    seen = _record_actor(algo)
    algo.learn(400, progress=False)
    assert isinstance(algo.buffer.writer, SequenceWriter)
    batch = algo.buffer.sample(32)
    assert batch["starts"].any(), "some windows should begin an episode"
    q = algo.sequence_q(batch)  # (T + 1, B, A)
    q_target = algo.sequence_q(batch, target=True)
    T, B = batch["mask"].shape
    checked = 0
    for b in range(B):
        for t in range(T):
            if batch["mask"][t, b] == 0:
                continue
            actor_q = seen[batch["seq_obs"][t, b].astype(np.float32).tobytes()]
            torch.testing.assert_close(q[t, b].detach(), actor_q, atol=1e-5, rtol=0)
            torch.testing.assert_close(q_target[t, b], actor_q, atol=1e-5, rtol=0)
            checked += 1
    assert checked > T * B // 2
    algo.close()


@pytest.mark.parametrize("reward_scale", [1.0, 0.5])
def test_sequence_loss_masks_padding_and_respects_termination(reward_scale):
    """The trained steps' targets: 0 on padding; a terminated last step is its (scaled)
    reward only."""
    algo = DQN(
        "CartPole-v1",
        backbone="lif",
        seed=1,
        reward_scale=reward_scale,
        normalize_obs=False,
        n_step=3,
        seq_len=6,
        burn_in=2,
        learning_starts=10**6,
        **TINY,
    )
    algo.learn(400, progress=False)
    batch = algo.buffer.sample(64)
    bi = algo.config.burn_in
    loss, td, mask, q = algo._sequence_loss(batch)
    assert td.shape == mask.shape == (algo.config.seq_len, 64)
    assert torch.all(td[mask == 0] == 0)
    y = td + q  # target = TD error + Q(s, a) on valid steps
    dones = torch.as_tensor(batch["dones"][bi:])
    rewards = torch.as_tensor(batch["rewards"][bi:]) * reward_scale
    terminal = (dones == 1) & (mask == 1)
    assert terminal.any()
    torch.testing.assert_close(y[terminal], rewards[terminal])
    assert math.isfinite(loss.item())
    algo.close()


@pytest.mark.parametrize("reward_scale", [1.0, 0.1])
def test_transition_target_is_double_dqn_of_the_two_nets(reward_scale):
    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        seed=2,
        learning_starts=300,
        reward_scale=reward_scale,
        **TINY,
    )
    algo.learn(400, progress=False)
    # make the target net differ from the online one
    with torch.no_grad():
        for p in algo.target_net.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    batch = algo.buffer.sample(16)
    _, td, _, q = algo._transition_loss(batch)
    x_next = algo.agent.preprocess(batch["next_obs"])
    q_online = algo.agent.q_net(x_next, ())[0]
    q_target = algo.target_net(x_next, ())[0]
    a_star = q_online.argmax(-1)
    boot = q_target[torch.arange(16), a_star]
    rewards = torch.as_tensor(batch["rewards"]) * reward_scale
    expected = rewards + torch.as_tensor(batch["discounts"]) * boot * (
        1 - torch.as_tensor(batch["dones"])
    )
    torch.testing.assert_close(td + q, expected.detach())
    algo.close()


def test_target_network_draws_its_own_current_noise():
    """With ``noise_std > 0`` the target network (a copy of the online one, same weights and
    layer seeds) draws other current noise than the online network: fed the same inputs in
    training mode they differ, and put back on the online stream they agree bit for bit."""
    algo = DQN("CartPole-v1", backbone="lif", seed=0, noise_std=0.3, **TINY)
    online, target = algo.agent.q_net, algo.target_net
    assert online.training and target.training
    x = torch.rand(6, 3, 4)

    def q_values(net):
        out, _ = net(x, net.initial_state(3))
        return out

    noisy = q_values(online)
    assert not torch.equal(q_values(target), noisy)
    for m in target.modules():
        if hasattr(m, "noise_stream"):
            m.noise_stream, m._noise_generators = 0, {}
    for m in online.modules():
        if hasattr(m, "noise_stream"):
            m._noise_generators = {}
    assert torch.equal(q_values(target), q_values(online))
    algo.close()


def test_hard_and_polyak_target_updates():
    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        seed=0,
        learning_starts=64,
        target_update_interval=10**6,
        **TINY,
    )
    algo.learn(400, progress=False)
    online = torch.cat([p.flatten() for p in algo.agent.q_net.parameters()])
    target = torch.cat([p.flatten() for p in algo.target_net.parameters()])
    assert not torch.equal(online, target), "no target update yet: the nets differ"
    algo.close()

    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        seed=0,
        learning_starts=64,
        target_update_interval=400,
        **TINY,
    )
    algo.learn(400, progress=False)  # the last env step is a multiple of 400: hard copy
    for p, t in zip(algo.agent.q_net.parameters(), algo.target_net.parameters()):
        assert torch.equal(p, t)
    algo.close()

    tau = 0.25
    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        seed=0,
        learning_starts=64,
        tau=tau,
        target_update_interval=400,
        **TINY,
    )
    before = [t.clone() for t in algo.target_net.parameters()]
    algo.learn(400, progress=False)
    for p, t, b in zip(algo.agent.q_net.parameters(), algo.target_net.parameters(), before):
        torch.testing.assert_close(t, (1 - tau) * b + tau * p)
    algo.close()


@pytest.mark.parametrize("backbone", ["mlp", "lif"])
def test_prioritized_replay_updates_priorities(backbone):
    algo = DQN(
        "CartPole-v1",
        backbone=backbone,
        seed=0,
        prioritized=True,
        learning_starts=200,
        batch_size=8,
        **TINY,
    )
    algo.learn(200, progress=False)  # one gradient step, at env step 200
    buf = algo.buffer
    p = buf.sampler.tree.priorities[: len(buf)]
    assert algo.n_grad_steps == 1
    changed = np.flatnonzero(p != 1.0)  # new items enter with the max priority, 1
    assert 0 < len(changed) <= 8
    hist = algo.learn(400, progress=False)
    assert buf.sampler.max_priority >= 1.0 and math.isfinite(hist["loss"][-1])
    algo.close()


def test_dueling_head_and_exploration_from_config():
    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        seed=0,
        dueling="max",
        exploration="gaussian_eps_greedy",
        eps_std=0.2,
        learning_starts=100,
        **TINY,
    )
    assert algo.agent.head_size == 3  # V + 2 advantages
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    out = algo.agent.q_net(x, ())[0]
    q = algo.agent.q_values(out)
    torch.testing.assert_close(q.max(-1).values, out[:, 0])  # max-advantage is 0 at the best
    hist = algo.learn(400, progress=False)
    assert all(0 <= e <= 1 for e in hist["epsilon"])
    algo.close()
    algo = DQN("CartPole-v1", backbone="mlp", exploration="pass_through", **TINY)
    hist = algo.learn(200, progress=False)
    assert hist["episodes"][0] > 0
    algo.close()


def test_epsilon_schedule_and_metrics_row():
    algo = DQN(
        "CartPole-v1",
        backbone="lif",
        seed=0,
        eps_start=1.0,
        eps_end=0.1,
        eps_decay_steps=400,
        learning_starts=200,
        batch_size=4,
        **TINY,
    )
    hist = algo.learn(600, progress=False)
    assert hist["env_step"] == [200, 400, 600]
    np.testing.assert_allclose(hist["epsilon"], [0.55, 0.1, 0.1])
    assert all(math.isfinite(v) for v in hist["loss"] + hist["q_mean"])
    assert all(0 < r < 1 for r in hist["spike_rate_lif0"])
    assert math.isfinite(hist["eval_return_mean"][-1])
    # with 2 envs and train_freq=4, one gradient step per 8 env steps from env step 200 on
    assert hist["grad_steps"] == [1, 26, 51]
    algo.close()


def test_save_load_acts_identically(tmp_path):
    algo = DQN("CartPole-v1", backbone="lif", seed=5, learning_starts=100, batch_size=4, **TINY)
    algo.learn(400, progress=False)
    algo.save(tmp_path / "a.pt")
    loaded = DQN.load(tmp_path / "a.pt")
    assert loaded.env_step == 400 and loaded.n_grad_steps == algo.n_grad_steps
    for p, q in zip(algo.target_net.parameters(), loaded.target_net.parameters()):
        assert torch.equal(p, q)
    a, b = algo.rollout(seed=3, record=False), loaded.rollout(seed=3, record=False)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.policy["q_values"], b.policy["q_values"])
    assert algo.evaluate(n_episodes=3, seed=9) == loaded.evaluate(n_episodes=3, seed=9)
    # learning continues after a reload (the replay buffer refills first)
    hist = loaded.learn(800, progress=False)
    assert hist["env_step"][-1] == 800
    assert snrl.agents.load_algo(tmp_path / "a.pt").algo_name == "dqn"
    algo.close()
    loaded.close()


def test_relu_mlp_saves_and_loads_with_its_activation(tmp_path):
    """``activation="relu"`` (SB3's DQN network) reaches the Q-network and survives a reload;
    the Q-network's parameters live in the optimizer's flat buffer."""
    algo = DQN(
        "CartPole-v1",
        backbone="mlp",
        activation="relu",
        seed=1,
        learning_starts=100,
        batch_size=4,
        **TINY,
    )
    assert algo.agent.q_net.activation == algo.target_net.activation == "relu"
    algo.learn(300, progress=False)
    # the Q-network trains through one flat buffer (FlatAdam); the target net is its own copy
    flat = algo.optimizer.flat.untyped_storage().data_ptr()
    assert all(p.untyped_storage().data_ptr() == flat for p in algo.agent.q_net.parameters())
    assert all(p.untyped_storage().data_ptr() != flat for p in algo.target_net.parameters())
    assert int(algo.optimizer.state[algo.optimizer.flat]["step"]) == algo.n_grad_steps > 0
    algo.save(tmp_path / "r.pt")
    loaded = DQN.load(tmp_path / "r.pt")
    assert loaded.config.activation == "relu" and loaded.agent.q_net.activation == "relu"
    a, b = algo.rollout(seed=3, record=False), loaded.rollout(seed=3, record=False)
    np.testing.assert_array_equal(a.policy["q_values"], b.policy["q_values"])
    x = algo.agent.preprocess(np.array([[0.1, -0.2, 0.03, 0.4]], dtype=np.float32))
    h = algo.agent.q_net.run(x).activity["mlp0"].extra["h"]
    assert (h >= 0).all() and (h == 0).any()
    algo.close()
    loaded.close()


def test_same_seed_same_learning_curve():
    def run():
        algo = DQN("CartPole-v1", backbone="lif", seed=7, learning_starts=100, batch_size=4, **TINY)
        h = algo.learn(400, progress=False)
        algo.close()
        return h["loss"], h["q_mean"]

    assert run() == run()


def test_replay_buffer_save_load_and_corrupt_file(tmp_path):
    algo = DQN("CartPole-v1", backbone="lif", seed=0, learning_starts=10**6, **TINY)
    algo.learn(200, progress=False)
    algo.save_replay_buffer(tmp_path / "buf.npz")
    other = DQN("CartPole-v1", backbone="lif", seed=0, learning_starts=10**6, **TINY)
    other.load_replay_buffer(tmp_path / "buf.npz")
    assert len(other.buffer) == len(algo.buffer)
    np.testing.assert_array_equal(other.buffer.storage["obs"], algo.buffer.storage["obs"])
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    with pytest.raises(UserError, match="corrupt"):
        other.load_replay_buffer(tmp_path / "bad.npz")
    wider = DQN("CartPole-v1", backbone="lif", seed=0, **{**TINY, "n_envs": 4})
    with pytest.raises(UserError, match=r"of 2 envs .*, not a uniform replay .* of 4 envs"):
        wider.load_replay_buffer(tmp_path / "buf.npz")
    algo.close()


def test_bad_inputs_are_user_errors():
    with pytest.raises(UserError, match="Discrete.*ppo"):
        DQN("Pendulum-v1")
    with pytest.raises(UserError, match="shorter than burn_in"):
        DQNConfig(seq_len=4, burn_in=8)
    with pytest.raises(UserError, match="batch_size=64 is larger"):
        DQNConfig(backbone="mlp", batch_size=64, learning_starts=32)
    with pytest.raises(UserError, match="replay='transition'"):
        DQNConfig(backbone="lif", replay="transition")
    with pytest.raises(UserError, match="dueling"):
        DQNConfig(dueling="mean")
    with pytest.raises(UserError, match="unknown DQN option"):
        DQN("CartPole-v1", gama=0.9)
    with pytest.raises(UserError, match="activation='gelu'"):
        DQNConfig(backbone="mlp", activation="gelu")
    # sequence replay: too few windows when learning starts
    algo = DQN("CartPole-v1", backbone="lif", learning_starts=8, batch_size=500, **TINY)
    with pytest.raises(UserError, match="batch_size=500 is larger"):
        algo.learn(400, progress=False)
    algo.close()


class CueBandit(gym.Env):
    """One-step episodes: the observation is a cue of +-1, action 1 pays 1 on +1, action 0 pays
    1 on -1; the optimal Q-values are Q(+1) = (0, 1), Q(-1) = (1, 0)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue = 1.0 if self.np_random.random() < 0.5 else -1.0
        return np.array([self.cue], dtype=np.float32), {}

    def step(self, action):
        reward = float((self.cue > 0) == (int(action) == 1))
        return np.zeros(1, dtype=np.float32), reward, True, False, {}


if "SnrlCueBandit-v0" not in gym.registry:
    gym.register("SnrlCueBandit-v0", entry_point=CueBandit)


@pytest.mark.parametrize("backbone", ["mlp", "lif"])
def test_q_values_learn_a_cue_bandit(backbone):
    """Fast learning check: Q converges to the known optimal values of a one-step task."""
    algo = DQN(
        "SnrlCueBandit-v0",
        backbone=backbone,
        seed=0,
        hidden_size=32,
        n_envs=4,
        learning_starts=200,
        batch_size=32,
        train_freq=1,
        seq_len=1,  # one-step episodes: windows of one step
        burn_in=0,
        eps_decay_steps=500,
        eval_interval=0,
        log_interval=500,
        lr=3e-3,
    )
    algo.learn(1_500, progress=False)
    x = algo.agent.preprocess(np.array([[1.0], [-1.0]], dtype=np.float32))
    q, _, _ = algo.agent.q_step(x, algo.agent.initial_state(2))
    torch.testing.assert_close(q, torch.tensor([[0.0, 1.0], [1.0, 0.0]]), atol=0.15, rtol=0)
    assert algo.evaluate(n_episodes=10, seed=0)["mean_return"] == 1.0
    algo.close()


def test_mlp_dqn_improves_on_cartpole():
    """Single-transition (mlp) DQN: measured 22.0 -> 70.0 over 8k env steps (seed 0)."""
    algo = DQN(
        "CartPole-v1", backbone="mlp", hidden_size=64, seed=0, eval_interval=0, log_interval=2_000
    )
    before = algo.evaluate(n_episodes=10, seed=100)["mean_return"]
    algo.learn(8_000, progress=False)
    after = algo.evaluate(n_episodes=10, seed=100)["mean_return"]
    algo.close()
    assert after >= 50 and after >= 2 * before, (before, after)


@pytest.mark.slow
def test_dale_lif_dqn_improves_on_cartpole():
    """Dale LIF DQN with sequence replay (the defaults, 64 neurons): measured 12.9 -> 157.2
    over 15k env steps (seed 0, ~8 CPU-seconds); a random policy lasts ~20 steps."""
    algo = DQN("CartPole-v1", hidden_size=64, seed=0, eval_interval=0, log_interval=2_000)
    assert algo.config.backbone == "lif" and algo.config.force_dale_law
    assert algo.config.replay_kind == "sequence"
    before = algo.evaluate(n_episodes=10, seed=100)["mean_return"]
    history = algo.learn(15_000, progress=False)
    after = algo.evaluate(n_episodes=10, seed=100)["mean_return"]
    algo.close()
    assert after >= 100 and after >= 3 * before, (before, after)
    assert 0.01 < history["spike_rate_lif0"][-1] < 0.95


def test_cli_train_eval_render_a_dqn_run(tmp_path):
    """`snrl train --algo dqn`, then `snrl eval` and `snrl render` dispatch on the checkpoint."""
    out = tmp_path / "run"
    res = _snrl(
        "train",
        "--algo",
        "dqn",
        "--env",
        "CartPole-v1",
        "--backbone",
        "lif",
        "--hidden",
        16,
        "--steps",
        600,
        "--out",
        out,
        "--set",
        "eval_interval=300",
        "--set",
        "eval_episodes=2",
        "--set",
        "log_interval=300",
        "--set",
        "learning_starts=200",
        "--set",
        "batch_size=8",
        "--set",
        "dueling=avg",
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    for f in ("config.json", "metrics.csv", "learning_curve.png"):
        assert (out / f).exists(), f
    assert {p.name for p in (out / "checkpoints").iterdir()} >= {"best.pt", "last.pt"}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["algo"] == "dqn" and cfg["dueling"] == "avg" and cfg["hidden_size"] == 16
    m = read_metrics(out / "metrics.csv")
    np.testing.assert_array_equal(m["env_step"], [300, 600])
    assert np.isfinite(m["eval_return_mean"]).all() and np.isfinite(m["loss"]).all()
    assert "spike_rate_lif0" in m and "epsilon" in m and "q_mean" in m

    res = _snrl("eval", out, "--episodes", 3, "--seed", 7)
    assert res.returncode == 0, res.stderr
    ev = json.loads(res.stdout)
    assert set(ev) == {"mean_return", "std_return", "n_episodes", "returns"}
    assert ev["n_episodes"] == 3 and ev["mean_return"] == pytest.approx(np.mean(ev["returns"]))
    best = DQN.load(out / "checkpoints" / "best.pt")
    assert best.evaluate(n_episodes=3, seed=7)["returns"] == ev["returns"]

    res = _snrl("render", out, "--out", tmp_path / "dqn.gif", "--fps", 10)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "dqn.gif").stat().st_size > 1000

    res = _snrl("train", "--algo", "dqn", "--env", "Pendulum-v1", "--out", tmp_path / "p")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Discrete" in lines[0]
    assert "ppo" in lines[0] and not (tmp_path / "p").exists()
    res = _snrl(
        "train",
        "--algo",
        "dqn",
        "--out",
        tmp_path / "q",
        "--set",
        "seq_len=2",
        "--set",
        "burn_in=5",
    )
    assert res.returncode == 2 and "shorter than burn_in" in res.stderr


def test_rate_regularization_is_added_and_lowers_the_rates():
    """``rate_reg`` adds rate_reg * mean_j (r_j - clip(r_j, lo, hi))**2 over the online net's
    trained (post-burn-in) steps to the TD loss, and gradient steps on it lower the rates."""
    kw = dict(TINY, learning_starts=400, batch_size=8, seq_len=8, burn_in=2, rate_range=(0, 0.01))
    kw["lr"] = 3e-3
    rates = {}
    for c in (0.0, 200.0):
        algo = DQN("CartPole-v1", backbone="lif", seed=0, rate_reg=c, **kw)
        algo.learn(400, progress=False)
        batch = algo.buffer.sample(8, step=algo.env_step)
        cfg = algo.config
        algo.config = dataclasses.replace(cfg, rate_reg=0.0)
        loss0 = algo._sequence_loss(batch)[0]
        algo.config = cfg
        loss_c = algo._sequence_loss(batch)[0]
        _, activity = algo._sequence_q(batch, target=False)
        spikes = activity["lif0"].spikes  # the seq_len + 1 steps after the burn-in
        assert spikes.shape[0] == 8 + 1
        r = spikes.reshape(-1, spikes.shape[-1]).mean(0)
        penalty = ((r - r.clamp(0, 0.01)) ** 2).mean()
        torch.testing.assert_close(loss_c - loss0, c * penalty)
        before = float(r.mean())
        stats = snrl.agents.dqn._Stats()
        for _ in range(30):
            algo._gradient_step(stats)
        _, activity = algo._sequence_q(batch, target=False)
        rates[c] = (before, float(activity["lif0"].spikes.mean()))
        algo.close()
    assert rates[200.0][1] < 0.7 * rates[200.0][0], rates
    assert rates[200.0][1] < 0.5 * rates[0.0][1], rates


@pytest.mark.parametrize("backbone", ["mlp", "gru", "lif"])
def test_acting_without_a_record_gives_the_recorded_q_values_and_state(backbone):
    """An acting step of a Q-network without spiking layers skips the activity record
    (``forward`` instead of ``run``): the same Q-values and next state as ``q_step``; a
    spiking network's acting step keeps its record for the spike-rate metrics."""
    algo = DQN("CartPole-v1", backbone=backbone, seed=2, **TINY)
    agent = algo.agent
    x = torch.randn(3, 4)
    state = agent.initial_state(3)
    for _ in range(3):  # a few steps, so that a recurrent state is not the initial one
        q, nxt, act = agent.q_step(x, state)
        with torch.no_grad():
            q2, nxt2, act2 = agent._q_step(x, state, activity=False)
        torch.testing.assert_close(q2, q, rtol=0, atol=0)
        for a, b in zip(state_leaves(nxt2), state_leaves(nxt), strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert len(act) > 0 and len(act2) == 0
        state = nxt
    assert algo._record_spikes == (backbone == "lif")
    algo.close()
