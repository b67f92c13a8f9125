"""Replay (storage x n-step writer x uniform/prioritized sampler): n-step returns against an
oracle around episode ends, PER weights, files."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.buffers import NStepWriter, PrioritizedSampler, ReplayBuffer, UniformSampler
from snrl.errors import UserError


def nstep_buffer(capacity, obs_shape, *, seed=None, **writer):
    """Uniform replay of n-step transitions."""
    return ReplayBuffer(capacity, NStepWriter(obs_shape, **writer), UniformSampler(seed))


def per_buffer(
    capacity, obs_shape, *, alpha=0.6, beta0=0.4, beta_steps=100_000, seed=None, **writer
):
    """Prioritized replay of n-step transitions."""
    sampler = PrioritizedSampler(alpha=alpha, beta0=beta0, beta_steps=beta_steps, seed=seed)
    return ReplayBuffer(capacity, NStepWriter(obs_shape, **writer), sampler)


def _stored(buf):
    """Stored transitions as a dict keyed by the obs id (obs are unique scalars here)."""
    out = {}
    for i in range(len(buf)):
        key = float(buf.storage["obs"][i, 0])
        assert key not in out
        out[key] = (
            int(buf.storage["actions"][i]),
            float(buf.storage["rewards"][i]),
            float(buf.storage["next_obs"][i, 0]),
            float(buf.storage["discounts"][i]),
            float(buf.storage["dones"][i]),
        )
    return out


def test_nstep_hand_values_at_termination():
    """n=3, gamma=0.5, rewards 1,2,3,4, terminated after the 4th step (obs ids 0..3, final 4)."""
    buf = nstep_buffer(16, (1,), n_step=3, gamma=0.5)
    for t in range(4):
        buf.add([[t]], [t], [t + 1.0], [[t + 1]], [t == 3], [False])
    got = _stored(buf)
    assert got == {
        0.0: (0, 1 + 0.5 * 2 + 0.25 * 3, 3.0, 0.125, 0.0),  # full 3 steps, bootstrap obs 3
        1.0: (1, 2 + 0.5 * 3 + 0.25 * 4, 4.0, 0.125, 1.0),  # ends on the terminal step
        2.0: (2, 3 + 0.5 * 4, 4.0, 0.25, 1.0),
        3.0: (3, 4.0, 4.0, 0.5, 1.0),
    }
    assert buf.n_pending == 0


def test_nstep_hand_values_at_truncation():
    """Same rewards but truncated: shortened returns bootstrap from the final observation."""
    buf = nstep_buffer(16, (1,), n_step=3, gamma=0.5)
    for t in range(4):
        buf.add([[t]], [t], [t + 1.0], [[t + 1]], [False], [t == 3])
    got = _stored(buf)
    assert got[1.0] == (1, 4.5, 4.0, 0.125, 0.0)
    assert got[2.0] == (2, 5.0, 4.0, 0.25, 0.0)
    assert got[3.0] == (3, 4.0, 4.0, 0.5, 0.0)


def _oracle(episodes, n, gamma):
    """Expected transitions from whole episodes, written from the definition.

    ``episodes``: list of (obs ids (T+1,), rewards (T,), end) with end in
    {"terminated", "truncated", None (still running)}.
    """
    out = {}
    for obs, rew, end in episodes:
        t_len = len(rew)
        for t in range(t_len):
            m = min(n, t_len - t)
            if m < n and end is None:
                continue  # not complete yet: still pending in the buffer
            ret = sum(gamma**k * rew[t + k] for k in range(m))
            done = 1.0 if (end == "terminated" and t + m == t_len) else 0.0
            out[float(obs[t])] = (int(obs[t]), ret, float(obs[t + m]), gamma**m, done)
    return out


def test_nstep_two_envs_ending_at_different_steps_against_oracle():
    n, gamma = 3, 0.9
    rng = np.random.default_rng(0)
    # Per env: a list of episode lengths and how each ends; the last one keeps running.
    plans = [
        [(2, "terminated"), (5, "truncated"), (1, "terminated"), (4, None)],
        [(6, "truncated"), (3, "terminated"), (3, None)],
    ]
    n_steps = 12
    assert all(sum(length for length, _ in p) == n_steps for p in plans)
    buf = nstep_buffer(100, (1,), n_envs=2, n_step=n, gamma=gamma)
    next_id = [0, 1000]  # unique obs ids per env
    episodes = []
    cursors = []
    for e, plan in enumerate(plans):
        eps = []
        for length, end in plan:
            ids = np.arange(next_id[e], next_id[e] + length + 1)
            next_id[e] += length + 1
            eps.append([ids, rng.normal(size=length).round(3), end])
        episodes.append(eps)
        cursors.append([0, 0])  # (episode, step)
    for _ in range(n_steps):
        obs, act, rew, nxt, term, trunc = [], [], [], [], [], []
        for e in range(2):
            ep, t = cursors[e]
            ids, rews, end = episodes[e][ep]
            last = t == len(rews) - 1
            obs.append([ids[t]])
            act.append(ids[t])
            rew.append(rews[t])
            nxt.append([ids[t + 1]])
            term.append(last and end == "terminated")
            trunc.append(last and end == "truncated")
            cursors[e] = [ep + 1, 0] if last and end is not None else [ep, t + 1]
        buf.add(np.array(obs), np.array(act), np.array(rew), np.array(nxt), term, trunc)

    expected = _oracle([ep for eps in episodes for ep in eps], n, gamma)
    got = _stored(buf)
    assert got.keys() == expected.keys()
    for k in expected:
        a, r, nx, d, done = got[k]
        ea, er, enx, ed, edone = expected[k]
        assert (a, nx, done) == (ea, enx, edone), k
        assert r == pytest.approx(er, abs=1e-5)
        assert d == pytest.approx(ed, rel=1e-6)
    # No transition lost: everything added is either stored or still pending (< n steps old).
    assert len(buf) + buf.n_pending == 2 * n_steps
    assert buf.n_pending == (n - 1) * 2


def test_nstep_one_is_plain_td_and_ring_overwrites_oldest():
    buf = nstep_buffer(3, (2,), n_step=1, gamma=0.9)
    for t in range(5):
        buf.add([[t, -t]], [t], [1.0], [[t + 1, 0]], [False], [t == 4])
    assert len(buf) == 3
    assert sorted(buf.storage["obs"][:, 0].tolist()) == [2.0, 3.0, 4.0]
    np.testing.assert_allclose(buf.storage["discounts"], 0.9)
    assert buf.storage["dones"].sum() == 0.0


def test_sample_more_than_stored_is_a_clear_error():
    buf = nstep_buffer(10, (1,), n_step=2)
    buf.add([[0]], [0], [1.0], [[1]], [True], [False])
    with pytest.raises(UserError, match=r"only 1 stored.*learning_starts"):
        buf.sample(2)
    assert buf.sample(1)["obs"].shape == (1, 1)


def test_sample_shapes_and_iter_batches():
    buf = nstep_buffer(50, (3,), action_shape=(2,), action_dtype=np.float32, n_envs=2, seed=0)
    for t in range(10):
        buf.add(np.full((2, 3), t), np.zeros((2, 2)), np.ones(2), np.zeros((2, 3)), [0, 0], [0, 0])
    batches = list(buf.iter_batches(4, 3))
    assert len(batches) == 3
    b = batches[0]
    assert b["obs"].shape == (4, 3) and b["actions"].shape == (4, 2)
    assert b["actions"].dtype == np.float32
    for key in ("rewards", "discounts", "dones", "weights", "indices"):
        assert b[key].shape == (4,)
    np.testing.assert_array_equal(b["weights"], 1.0)
    np.testing.assert_array_equal(b["obs"], buf.storage["obs"][b["indices"]])


def test_add_rejects_wrong_shapes():
    buf = nstep_buffer(10, (3,), n_envs=2)
    with pytest.raises(UserError, match=r"obs has shape \(3,\), expected \(2, 3\)"):
        buf.add(np.zeros(3), [0, 0], [0, 0], np.zeros((2, 3)), [0, 0], [0, 0])


@pytest.mark.parametrize("cls", [nstep_buffer, per_buffer])
def test_save_load_round_trip_continues_identically(tmp_path, cls):
    a = cls(20, (2,), n_step=3, gamma=0.5, n_envs=2, seed=3)
    rng = np.random.default_rng(0)

    def step(buf, t):
        obs = rng.normal(size=(2, 2))
        return buf.add(obs, [t, t + 1], [1.0, 2.0], obs + 1, [t % 4 == 3, False], [False, False])

    for t in range(9):
        step(a, t)
    if cls is per_buffer:
        a.update_priorities(np.arange(5), np.arange(5) * 0.3)
        a.sample(4)
    path = tmp_path / "buf.npz"
    a.save(path)
    b = ReplayBuffer.load(path)
    assert len(b) == len(a) and b.n_pending == a.n_pending
    state = rng.bit_generator.state
    for t in range(9, 12):
        step(a, t)
    rng.bit_generator.state = state
    for t in range(9, 12):
        step(b, t)
    for key in ("obs", "next_obs", "actions", "rewards", "discounts", "dones"):
        np.testing.assert_array_equal(a.storage[key], b.storage[key])
    sa, sb = a.sample(6), b.sample(6)
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key])
    assert not list(tmp_path.glob(".*tmp"))  # no temp file left behind


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    with pytest.raises(UserError, match="corrupt"):
        ReplayBuffer.load(bad)
    with pytest.raises(UserError, match="not found"):
        ReplayBuffer.load(tmp_path / "missing.npz")
    buf = nstep_buffer(5, (1,))
    buf.add([[0]], [0], [0.0], [[1]], [True], [False])
    good = tmp_path / "good.npz"
    buf.save(good)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(UserError):
        ReplayBuffer.load(cut)
    with pytest.raises(UserError, match=r"holds a uniform replay of 1-step.*not a prioritized"):
        ReplayBuffer.load(good, like=per_buffer(5, (1,)))
    assert len(ReplayBuffer.load(good, like=nstep_buffer(9, (1,)))) == 1


def _per_with_priorities(pri, **kwargs):
    buf = per_buffer(len(pri), (1,), seed=0, **kwargs)
    for i in range(len(pri)):
        buf.add([[i]], [i], [0.0], [[i]], [False], [True])
    buf.update_priorities(np.arange(len(pri)), np.asarray(pri) - buf.sampler.eps)
    return buf


def test_per_importance_weights_by_hand():
    # alpha = 1: P = (0.1, 0.2, 0.3, 0.4); N = 4, beta = 0.5:
    # w_i = (4 P_i)^-0.5 / (4 * 0.1)^-0.5 = sqrt(0.1 / P_i) = 1, 1/sqrt(2), 1/sqrt(3), 1/2.
    buf = _per_with_priorities([1.0, 2.0, 3.0, 4.0], alpha=1.0, beta0=0.5, beta_steps=10)
    batches = [buf.sample(4, step=0) for _ in range(16)]  # step=0 holds beta at beta0
    b = {k: np.concatenate([x[k] for x in batches]) for k in ("weights", "indices")}
    hand = np.array([1.0, 1 / np.sqrt(2), 1 / np.sqrt(3), 0.5])
    np.testing.assert_allclose(b["weights"], hand[b["indices"]], rtol=1e-5)
    assert set(b["indices"].tolist()) == {0, 1, 2, 3}
    # At the end of annealing beta = 1: w_i = 0.1 / P_i.
    b = buf.sample(4, step=10)
    np.testing.assert_allclose(b["weights"], (0.1 / np.array([0.1, 0.2, 0.3, 0.4]))[b["indices"]])


def test_per_sampling_frequencies_follow_priority_power_alpha():
    pri = np.array([1.0, 4.0, 9.0, 16.0, 0.25])
    buf = _per_with_priorities(pri, alpha=0.5)
    counts = np.zeros(len(pri))
    for _ in range(4000):
        counts += np.bincount(buf.sample(5)["indices"], minlength=len(pri))
    expected = np.sqrt(pri) / np.sqrt(pri).sum()
    np.testing.assert_allclose(counts / counts.sum(), expected, atol=0.01)


def test_per_new_transitions_get_max_priority_and_beta_anneals():
    buf = _per_with_priorities([0.5, 3.0], alpha=1.0, beta0=0.4, beta_steps=4)
    assert buf.sampler.max_priority == pytest.approx(3.0)
    buf2 = per_buffer(4, (1,), alpha=1.0, beta0=0.4, beta_steps=4, seed=0)
    buf2.add([[0]], [0], [0.0], [[0]], [False], [True])
    buf2.update_priorities([0], [7.0])
    buf2.add([[1]], [1], [0.0], [[1]], [False], [True])
    assert buf2.sampler.tree[1] == pytest.approx(7.0 + buf2.sampler.eps)
    assert [buf.sampler.beta(s) for s in (0, 2, 4, 100)] == pytest.approx([0.4, 0.7, 1.0, 1.0])
    assert buf.sampler.beta() == pytest.approx(0.4)
    buf.sample(2)
    buf.sample(2)
    assert buf.sampler.beta() == pytest.approx(0.7)  # two sample calls so far


def test_per_update_priorities_errors():
    buf = _per_with_priorities([1.0, 2.0])
    with pytest.raises(UserError, match="one TD error per"):
        buf.update_priorities([0, 1], [1.0])
    with pytest.raises(UserError, match="out of range"):
        buf.update_priorities([5], [1.0])


def test_add_accepts_torch_tensors():
    import torch

    buf = nstep_buffer(4, (2,), n_envs=2)
    obs = torch.ones(2, 2, requires_grad=True)
    buf.add(obs, torch.tensor([0, 1]), torch.ones(2), obs * 2, torch.tensor([True, False]),
            torch.zeros(2, dtype=torch.bool))  # fmt: skip
    np.testing.assert_array_equal(buf.storage["next_obs"][:2], 2.0)
    np.testing.assert_array_equal(buf.storage["dones"][:2], [1.0, 0.0])


def test_a_saved_sampler_state_names_only_a_numpy_bit_generator(tmp_path):
    """The file names the generator; anything but a bit generator (e.g. ``seed``, which would
    reseed numpy's global RNG) is refused before it is called."""
    import numpy as np
    import pytest

    from snrl.buffers.storage import rng_from_state
    from snrl.errors import UserError

    good = np.random.default_rng(3)
    again = rng_from_state(good.bit_generator.state, tmp_path / "b.npz")
    assert again.integers(1 << 30) == good.integers(1 << 30)
    before = np.random.get_state()[1].copy()
    for name in ("seed", "default_rng", "__class__", 5):
        with pytest.raises(UserError, match="bad sampler state"):
            rng_from_state({"bit_generator": name, "state": {}}, tmp_path / "b.npz")
    assert (np.random.get_state()[1] == before).all()
