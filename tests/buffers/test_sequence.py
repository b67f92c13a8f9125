"""Sequence replay (storage x sequence writer x uniform/prioritized sampler): episode
boundaries, stored state + burn-in vs the actor, padding, files."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from snrl.agents.dqn_math import sequence_nstep_targets
from snrl.buffers import PrioritizedSampler, ReplayBuffer, SequenceWriter, UniformSampler
from snrl.errors import UserError
from snrl.functional.state import mask_state


def seq_buffer(capacity, obs_shape, *, seed=None, **writer):
    """Uniform replay of R2D2 windows."""
    return ReplayBuffer(capacity, SequenceWriter(obs_shape, **writer), UniformSampler(seed))


def per_seq_buffer(
    capacity, obs_shape, *, alpha=0.9, beta0=0.6, beta_steps=100_000, eta=0.9, seed=None,
    **writer,
):  # fmt: skip
    """Prioritized replay of R2D2 windows (R2D2's alpha, beta0 and eta by default)."""
    sampler = PrioritizedSampler(
        alpha=alpha, beta0=beta0, beta_steps=beta_steps, eta=eta, seed=seed
    )
    return ReplayBuffer(capacity, SequenceWriter(obs_shape, **writer), sampler)


class HState(NamedTuple):
    h: Tensor  # (B, 3) leaky trace
    count: Tensor  # (B, 1) steps since the episode start


class Leaky(nn.Module):
    """h_t = 0.5 h_{t-1} + x_t, count_t = count_{t-1} + 1; output h_t. State (HState, (B, 2))."""

    def initial_state(self, batch_size: int):
        return (
            HState(torch.zeros(batch_size, 3, dtype=torch.float64), torch.zeros(batch_size, 1)),
            torch.zeros(batch_size, 2, dtype=torch.float64),
        )

    def forward(self, x: Tensor, state):
        inner, extra = state
        h = 0.5 * inner.h + x
        return h, (HState(h, inner.count + 1), 0.25 * extra + x[:, :2])

    def reset_state(self, state, done: Tensor):
        return mask_state(done, self.initial_state(done.shape[0]), state)


class Record(NamedTuple):
    """What the actor saw, keyed by (episode id, step in episode)."""

    out: dict  # actor's output h after feeding that step's observation
    reward: dict
    next_obs: dict  # the true next observation (3,) of that step
    length: dict  # episode id -> number of steps (finished episodes only)
    final: dict  # episode id -> (final observation (3,), terminated)
    finished: set  # (episode id, step) of finished episodes


def _run_actor(buf, n_steps=70, seed=0, max_len=12):
    """Two envs with random episode lengths; obs = (episode id, step in episode, noise).

    ``next_obs`` is the env's true next observation (the final one at an episode end), and
    the state passed to ``add`` is the one fed with ``obs``.
    """
    rng = np.random.default_rng(seed)
    net = Leaky()
    n_envs = buf.n_envs
    state = net.initial_state(n_envs)
    next_ep = n_envs
    ep = list(range(n_envs))
    t = [0] * n_envs
    length = [int(rng.integers(1, max_len + 1)) for _ in range(n_envs)]
    rec = Record({}, {}, {}, {}, {}, set())
    obs = np.array([[ep[i], 0, rng.normal()] for i in range(n_envs)])
    for _ in range(n_steps):
        last = np.array([t[i] == length[i] - 1 for i in range(n_envs)])
        kind = rng.random(n_envs) < 0.5
        term, trunc = last & kind, last & ~kind
        next_obs = np.array([[ep[i], t[i] + 1, rng.normal()] for i in range(n_envs)])
        reward = rng.normal(size=n_envs)
        buf.add(obs, np.array(t), reward, next_obs, term, trunc, state)
        out, state = net(torch.from_numpy(obs), state)
        obs = next_obs.copy()
        for i in range(n_envs):
            rec.out[(ep[i], t[i])] = out[i].clone()
            rec.reward[(ep[i], t[i])] = reward[i]
            rec.next_obs[(ep[i], t[i])] = next_obs[i]
        for i in np.flatnonzero(last):
            rec.finished.update((ep[i], s) for s in range(length[i]))
            rec.length[ep[i]] = length[i]
            rec.final[ep[i]] = (next_obs[i], bool(term[i]))
            ep[i], next_ep, t[i] = next_ep, next_ep + 1, 0
            length[i] = int(rng.integers(1, max_len + 1))
            obs[i] = [ep[i], 0, rng.normal()]  # the reset observation
        for i in np.flatnonzero(~last):
            t[i] += 1
        state = net.reset_state(state, torch.from_numpy(last))
    return rec


@pytest.mark.parametrize("stride", [None, 2])
def test_sequences_never_cross_episodes_and_cover_every_step(stride):
    buf = seq_buffer(500, (3,), seq_len=4, burn_in=3, stride=stride, n_envs=2)
    finished = _run_actor(buf).finished
    d = buf.storage
    trained = {}
    for j in range(len(buf)):
        valid = np.flatnonzero(d["mask"][j] == 1)
        assert len(valid) > 0
        assert np.array_equal(valid, np.arange(valid[0], valid[-1] + 1))  # one contiguous block
        ids, steps = d["obs"][j, valid, 0], d["obs"][j, valid, 1]
        assert np.all(ids == ids[0])  # one episode per sequence
        np.testing.assert_array_equal(np.diff(steps), 1)
        np.testing.assert_array_equal(
            d["starts"][j], (d["mask"][j] == 1) & (d["obs"][j, :, 1] == 0)
        )
        assert np.all(d["obs"][j][d["mask"][j] == 0] == 0)  # padding is zero
        ended = (d["dones"][j] + d["truncated"][j]) > 0
        assert ended.sum() <= 1 and (not ended.any() or np.flatnonzero(ended)[0] == valid[-1])
        if valid[-1] < buf.writer.length - 1:  # tail padding only after the episode's last step
            assert ended[valid[-1]]
        for pos in valid[valid >= buf.writer.burn_in]:
            key = (int(d["obs"][j, pos, 0]), int(d["obs"][j, pos, 1]))
            trained[key] = trained.get(key, 0) + 1
    assert finished <= trained.keys()  # no step of a finished episode is lost
    if stride is None:
        assert all(trained[k] == 1 for k in finished)


def _replay(net, batch, state, burn_in):
    outs = []
    obs = torch.from_numpy(batch["obs"])
    starts = torch.from_numpy(batch["starts"])
    for t in range(obs.shape[0]):
        state = net.reset_state(state, starts[t])
        out, state = net(obs[t], state)
        outs.append(out)
    return torch.stack(outs)


def test_stored_state_replays_the_actor_exactly_and_burn_in_repairs_a_zero_state():
    burn_in = 6
    buf = seq_buffer(500, (3,), seq_len=6, burn_in=burn_in, n_envs=2, obs_dtype=np.float64, seed=0)
    actor_out = _run_actor(buf, n_steps=120, seed=1, max_len=40).out
    batch = buf.sample(len(buf))
    assert isinstance(batch["state"][0], HState)
    net = Leaky()
    from_stored = _replay(net, batch, batch["state"], burn_in)
    from_zero = _replay(net, batch, net.initial_state(len(buf)), burn_in)
    mask, obs = batch["mask"], batch["obs"]
    stored_h = batch["state"][0].h
    saw_difference = False
    for b in range(len(buf)):
        for t in np.flatnonzero(mask[:, b] == 1):
            expected = actor_out[(int(obs[t, b, 0]), int(obs[t, b, 1]))]
            torch.testing.assert_close(from_stored[t, b], expected, rtol=0, atol=1e-12)
            if t >= burn_in:
                # From a zero state the error halves every step: |e_t| <= 0.5^(t+1) |h_stored|
                # (or 0 once an episode start inside the window resets the state).
                err = (from_zero[t, b] - expected).abs()
                assert torch.all(err <= 0.5 ** (t + 1) * stored_h[b].abs() + 1e-12)
                saw_difference |= bool(err.max() > 0)
    assert saw_difference  # the stored state did matter somewhere


@pytest.mark.parametrize("stride", [None, 3])
def test_seq_obs_and_nstep_targets_match_the_actor(stride):
    """One pass over seq_obs + sequence_nstep_targets == n-step targets from the actor's record.

    Q-values are the Leaky net's output h (3 "actions"), bootstrapped with max_a.
    """
    n, gamma, burn_in = 3, 0.8, 2
    buf = seq_buffer(
        500, (3,), seq_len=5, burn_in=burn_in, stride=stride, n_envs=2,
        obs_dtype=np.float64, seed=0,
    )  # fmt: skip
    rec = _run_actor(buf, n_steps=90, seed=5, max_len=14)
    batch = buf.sample(len(buf))
    obs, next_obs, mask = batch["obs"], batch["next_obs"], batch["mask"]
    t_len, b_len = mask.shape
    # seq_obs[t + 1] is the true next observation of every valid step t.
    for b in range(b_len):
        for t in np.flatnonzero(mask[:, b] == 1):
            np.testing.assert_array_equal(batch["seq_obs"][t + 1, b], next_obs[t, b])
    valid_steps = mask == 1
    np.testing.assert_array_equal(batch["seq_obs"][:t_len][valid_steps], obs[valid_steps])
    assert not batch["seq_starts"][t_len].any()

    net = Leaky()
    state, outs = batch["state"], []
    seq_obs, seq_starts = torch.from_numpy(batch["seq_obs"]), torch.from_numpy(batch["seq_starts"])
    for t in range(t_len + 1):
        state = net.reset_state(state, seq_starts[t])
        out, state = net(seq_obs[t], state)
        outs.append(out)
    q = torch.stack(outs)  # (T + 1, B, 3)
    q_boot = q[1:].max(dim=-1).values
    y = sequence_nstep_targets(
        torch.from_numpy(batch["rewards"]).double(), torch.from_numpy(batch["dones"]),
        torch.from_numpy(mask), q_boot, gamma, n,
    )  # fmt: skip

    def h_after(ep, step):  # the actor's h after feeding the observation of ``step``
        if (ep, step) in rec.out:
            return rec.out[(ep, step)]
        # Not fed by the actor (final observation, or the run stopped): one more step.
        return 0.5 * rec.out[(ep, step - 1)] + torch.from_numpy(rec.next_obs[(ep, step - 1)])

    checked = 0
    for b in range(b_len):
        valid = np.flatnonzero(mask[:, b] == 1)
        ep, last_step = int(obs[valid[0], b, 0]), int(obs[valid[-1], b, 1])
        for t in valid:
            s0 = int(obs[t, b, 1])
            m = min(n, last_step - s0 + 1)
            # rewards are stored as float32
            ret = sum(gamma**k * float(np.float32(rec.reward[(ep, s0 + k)])) for k in range(m))
            ends = rec.length.get(ep) == s0 + m
            terminal = ends and rec.final[ep][1]
            boot = 0.0 if terminal else float(h_after(ep, s0 + m).max())
            assert float(y[t, b]) == pytest.approx(ret + gamma**m * boot, abs=1e-9)
            checked += 1
        assert float(y[mask[:, b] == 0, b].abs().sum()) == 0.0
    assert checked > 100


def test_padding_by_hand():
    """seq_len 4, burn_in 2: episodes of 3 and 9 steps in one env."""
    buf = seq_buffer(10, (1,), seq_len=4, burn_in=2)
    net = Leaky()
    state = net.initial_state(1)
    for length in (3, 9):
        for t in range(length):
            end = t == length - 1
            buf.add([[t + 1]], [t], [float(t)], [[t + 2]], [end], [False], state)
    d = buf.storage
    assert len(buf) == 4
    np.testing.assert_array_equal(d["mask"][0], [0, 0, 1, 1, 1, 0])
    np.testing.assert_array_equal(d["starts"][0], [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(d["obs"][0, :, 0], [0, 0, 1, 2, 3, 0])
    np.testing.assert_array_equal(d["dones"][0], [0, 0, 0, 0, 1, 0])
    # 9 steps: [pad pad 1 2 3 4 | 5 6 7 8 | 9] cut every 4 positions, the last one padded.
    np.testing.assert_array_equal(d["obs"][1, :, 0], [0, 0, 1, 2, 3, 4])
    np.testing.assert_array_equal(d["obs"][2, :, 0], [3, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(d["mask"][2], 1)
    np.testing.assert_array_equal(d["starts"][2], 0)
    np.testing.assert_array_equal(d["obs"][3, :, 0], [7, 8, 9, 0, 0, 0])
    np.testing.assert_array_equal(d["mask"][3], [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(d["dones"][3], [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(d["next_obs"][3, :3, 0], [8, 9, 10])


def test_validation_errors():
    with pytest.raises(UserError, match="shorter than burn-in"):
        seq_buffer(10, (1,), seq_len=4, burn_in=5)
    with pytest.raises(UserError, match="seq_len must be >= 1"):
        seq_buffer(10, (1,), seq_len=0)
    with pytest.raises(UserError, match="burn_in must be >= 0"):
        seq_buffer(10, (1,), seq_len=4, burn_in=-1)
    for stride in (0, 5):
        with pytest.raises(UserError, match="stride"):
            seq_buffer(10, (1,), seq_len=4, stride=stride)
    buf = seq_buffer(10, (1,), seq_len=2, n_envs=2)
    net = Leaky()
    with pytest.raises(UserError, match=r"state tensor 0 has shape \(3, 3\), expected \(2, 3\)"):
        buf.add(np.zeros((2, 1)), [0, 0], [0, 0], np.zeros((2, 1)), [0, 0], [0, 0],
                net.initial_state(3))  # fmt: skip
    buf.add(
        np.zeros((2, 1)), [0, 0], [0, 0], np.zeros((2, 1)), [1, 0], [0, 0], net.initial_state(2)
    )
    with pytest.raises(UserError, match=r"only 1 stored.*learning_starts"):
        buf.sample(2)


def test_sample_shapes_time_first():
    buf = seq_buffer(50, (3,), seq_len=4, burn_in=2, n_envs=2, seed=0)
    _run_actor(buf, n_steps=30)
    b = buf.sample(5)
    assert b["obs"].shape == (6, 5, 3) and b["next_obs"].shape == (6, 5, 3)
    for key in ("actions", "rewards", "dones", "truncated", "mask", "starts"):
        assert b[key].shape == (6, 5), key
    assert b["starts"].dtype == np.bool_
    assert b["state"][0].h.shape == (5, 3) and b["state"][1].shape == (5, 2)
    assert b["state"][0].h.dtype == torch.float64
    np.testing.assert_array_equal(b["weights"], 1.0)


@pytest.mark.parametrize("cls", [seq_buffer, per_seq_buffer])
def test_save_load_round_trip(tmp_path, cls):
    a = cls(40, (3,), seq_len=3, burn_in=2, stride=2, n_envs=2, seed=4)
    _run_actor(a, n_steps=25, seed=2)  # leaves open windows mid-episode
    path = tmp_path / "seq.npz"
    a.save(path)
    b = ReplayBuffer.load(path)
    c = ReplayBuffer.load(path, state_example=Leaky().initial_state(1))
    _run_actor(a, n_steps=20, seed=3)
    _run_actor(b, n_steps=20, seed=3)
    assert a.storage.fields.keys() == b.storage.fields.keys()
    for key in a.storage.fields:  # steps and the state leaves
        np.testing.assert_array_equal(a.storage[key], b.storage[key])
    sa, sb, sc = a.sample(7), b.sample(7), c.sample(7)
    assert type(sb["state"][0]).__name__ == "HState" and sb["state"][0]._fields == ("h", "count")
    assert type(sc["state"][0]) is HState
    for key in ("obs", "mask", "starts", "indices", "weights"):
        np.testing.assert_array_equal(sa[key], sb[key])
    torch.testing.assert_close(sa["state"][0].h, sb["state"][0].h)
    with pytest.raises(UserError, match="state_example"):
        ReplayBuffer.load(path, state_example=(torch.zeros(1, 4),))


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(UserError, match="corrupt"):
        ReplayBuffer.load(bad)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(UserError, match="config"):
        ReplayBuffer.load(tmp_path / "other.npz")


def test_prioritized_sequence_priorities_and_weights_by_hand():
    buf = per_seq_buffer(4, (1,), seq_len=2, alpha=1.0, beta0=0.5, eta=0.9, seed=0)
    state = Leaky().initial_state(1)
    for t in range(4):  # two sequences of 2 steps
        buf.add([[t]], [0], [0.0], [[t + 1]], [False], [False], state)
    assert len(buf) == 2
    td = np.array([[1.0, -4.0], [3.0, 0.0]])
    mask = np.array([[1.0, 1.0], [1.0, 0.0]])
    pri = buf.update_priorities([0, 1], td, mask)
    # seq 0: 0.9 * max(1, 3) + 0.1 * mean(1, 3) = 2.9; seq 1: only |-4| is valid -> 4.
    np.testing.assert_allclose(pri, [2.9 + 1e-6, 4.0 + 1e-6])
    # P = 2.9 / 6.9, 4 / 6.9; w = (P / P_min)^-0.5 -> seq 0: 1, seq 1: sqrt(2.9 / 4)
    b = buf.sample(2, step=0)
    hand = np.array([1.0, np.sqrt((2.9 + 1e-6) / (4.0 + 1e-6))])
    np.testing.assert_allclose(b["weights"], hand[b["indices"]], rtol=1e-6)
    with pytest.raises(UserError, match=r"expected \(T, 2\)"):
        buf.update_priorities([0, 1], td[:, :1])


def test_empty_state_of_an_mlp_round_trips(tmp_path):
    buf = seq_buffer(8, (2,), seq_len=2, burn_in=1, seed=0)
    for t in range(5):
        buf.add(torch.full((1, 2), float(t)), [0], [1.0], np.zeros((1, 2)), [t == 4], [False], ())
    assert len(buf) == 3
    assert buf.sample(2)["state"] == ()
    buf.save(tmp_path / "mlp.npz")
    loaded = ReplayBuffer.load(tmp_path / "mlp.npz")
    assert loaded.sample(3)["state"] == ()
    np.testing.assert_array_equal(loaded.storage["obs"], buf.storage["obs"])


def test_uniform_has_no_priorities_and_load_checks_the_composition(tmp_path):
    buf = seq_buffer(8, (1,), seq_len=2, seed=0)
    state = Leaky().initial_state(1)
    for t in range(2):
        buf.add([[t]], [0], [0.0], [[t + 1]], [False], [False], state)
    assert len(buf) == 1
    with pytest.raises(UserError, match="uniform replay has no priorities"):
        buf.update_priorities([0], np.ones((2, 1)))
    path = tmp_path / "seq.npz"
    buf.save(path)
    with pytest.raises(UserError, match=r"holds a uniform replay of sequences.*not a prior"):
        ReplayBuffer.load(path, like=per_seq_buffer(8, (1,), seq_len=2))
    with pytest.raises(UserError, match=r"not a uniform replay of sequences of 3 steps"):
        ReplayBuffer.load(path, like=seq_buffer(8, (1,), seq_len=3))
    same = ReplayBuffer.load(path, like=seq_buffer(4, (1,), seq_len=2, state_example=state))
    assert type(same.sample(1)["state"][0]) is HState  # the states' types come from ``like``
