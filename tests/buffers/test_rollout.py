"""GAE and returns against a hand-computed oracle (terminated vs truncated)."""

import pytest
import torch

from snrl.buffers.rollout import RolloutBuffer, compute_gae, normalized_advantages


def test_gae_oracle_terminated_and_truncated():
    # One env, 4 steps, gamma=0.5, lambda=0.5.
    # step 0: r=1, V=2, continues            -> next value V(s1) = 3
    # step 1: r=1, V=3, TERMINATED           -> no bootstrap
    # step 2: r=2, V=1, TRUNCATED, V(final)=4 -> bootstraps from the final observation
    # step 3: r=0, V=1, continues, V(s4)=2   -> bootstraps from the last value
    g, lam = 0.5, 0.5
    rewards = torch.tensor([[1.0], [1.0], [2.0], [0.0]])
    values = torch.tensor([[2.0], [3.0], [1.0], [1.0]])
    next_values = torch.tensor([[3.0], [99.0], [4.0], [2.0]])  # 99 must not be used
    terminated = torch.tensor([[False], [True], [False], [False]])
    dones = torch.tensor([[False], [True], [True], [False]])
    adv, ret = compute_gae(rewards, values, next_values, terminated, dones, g, lam)
    d3 = 0.0 + 0.5 * 2.0 - 1.0  # 0.0
    d2 = 2.0 + 0.5 * 4.0 - 1.0  # 3.0
    d1 = 1.0 - 3.0  # -2.0
    d0 = 1.0 + 0.5 * 3.0 - 2.0  # 0.5
    a3 = d3
    a2 = d2  # episode ended at 2: nothing from step 3 flows back
    a1 = d1  # episode ended at 1
    a0 = d0 + g * lam * a1  # 0.5 - 0.5 = 0.0
    expected = torch.tensor([[a0], [a1], [a2], [a3]])
    assert torch.allclose(adv, expected)
    assert torch.allclose(ret, expected + values)


def test_buffer_finish_uses_final_values_only_where_done():
    buf = RolloutBuffer(n_steps=3, n_envs=2, obs_size=1, action_shape=(), action_dtype=torch.long)
    vals = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 6.0])]
    dones = [torch.tensor([False, True]), torch.tensor([False, False]), torch.tensor([True, False])]
    for t in range(3):
        buf.add(
            obs=torch.zeros(2, 1),
            state=(),
            start=torch.zeros(2, dtype=torch.bool),
            action=torch.zeros(2, dtype=torch.long),
            log_prob=torch.zeros(2),
            value=vals[t],
            reward=torch.ones(2),
            terminated=torch.zeros(2, dtype=torch.bool),
            done=dones[t],
        )
    final = torch.full((3, 2), 10.0)
    buf.finish(final_values=final, last_value=torch.tensor([7.0, 8.0]), gamma=1.0, lam=1.0)
    expected_next = torch.tensor([[3.0, 10.0], [5.0, 6.0], [10.0, 8.0]])
    assert torch.equal(buf.next_values, expected_next)
    # lambda=gamma=1, no termination: return = sum of rewards to the episode end + bootstrap
    assert torch.allclose(buf.returns[:, 0], torch.tensor([13.0, 12.0, 11.0]))
    assert torch.allclose(buf.returns[:, 1], torch.tensor([11.0, 10.0, 9.0]))


def test_finish_requires_full_segment():
    buf = RolloutBuffer(n_steps=2, n_envs=1, obs_size=1, action_shape=(), action_dtype=torch.long)
    with pytest.raises(RuntimeError):
        buf.finish(final_values=torch.zeros(2, 1), last_value=torch.zeros(1), gamma=1, lam=1)


def test_minibatch_states_are_the_stored_rows_at_the_first_step_and_the_starts():
    T, B = 5, 4
    buf = RolloutBuffer(n_steps=T, n_envs=B, obs_size=2, action_shape=(), action_dtype=torch.long)
    starts = torch.zeros(T, B, dtype=torch.bool)
    starts[3, 2] = True
    for t in range(T):
        state = (torch.arange(B, dtype=torch.float32) + 10 * t).unsqueeze(-1)
        buf.add(
            obs=torch.zeros(B, 2),
            state=(state,),
            start=starts[t],
            action=torch.zeros(B),
            log_prob=torch.zeros(B),
            value=torch.zeros(B),
            reward=torch.zeros(B),
            terminated=torch.zeros(B, dtype=torch.bool),
            done=torch.zeros(B, dtype=torch.bool),
        )
    idx = torch.tensor([2, 0])
    mb = buf.minibatch(idx, 1, 5)
    assert len(mb.states) == 4
    assert mb.states[0][0].flatten().tolist() == [12.0, 10.0]  # step 1, rows 2 and 0
    assert mb.states[1] is None and mb.states[3] is None  # no start there: never needed
    assert mb.states[2][0].flatten().tolist() == [32.0, 30.0]  # step 3 holds a start
    assert [s is None for s in mb.states] == [False, True, False, True]
    assert mb.states[-2] is mb.states[2]
    with pytest.raises(IndexError):
        mb.states[4]


def test_advantages_normalized_within_each_task():
    """Per-task normalization: each group's entries have mean 0 and std 1 on their own, the
    values of one group do not move another's, a lone entry gets 0, and without groups (or
    with one group) it is the usual normalization over all entries."""
    gen = torch.Generator().manual_seed(0)
    adv = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    adv[:, 1] = 100.0 * adv[:, 1] + 7.0  # one task with a far larger scale
    groups = torch.tensor([0, 1, 0, 2]).expand(6, 4).clone()
    groups[5, 3] = 3  # a task seen at one step only
    out = normalized_advantages(adv, groups)
    for g in (0, 1, 2):
        m = groups == g
        a = adv[m]
        assert torch.allclose(out[m], (a - a.mean()) / a.std(), atol=1e-6)
        assert abs(float(out[m].mean())) < 1e-9 and abs(float(out[m].std()) - 1) < 1e-6
    assert float(out[5, 3]) == 0.0
    scaled = adv.clone()
    scaled[:, 1] *= 1000.0
    assert torch.allclose(normalized_advantages(scaled, groups)[:, 0], out[:, 0])
    flat = (adv - adv.mean()) / (adv.std() + 1e-8)
    assert torch.allclose(normalized_advantages(adv), flat)
    assert torch.allclose(normalized_advantages(adv, torch.zeros_like(groups)), flat)
    assert not torch.allclose(out, flat)
