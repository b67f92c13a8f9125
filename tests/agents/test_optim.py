"""FlatAdam: the same steps as torch's Adam with the global-norm clip, over one flat buffer
(with ``fused=False``, PPO's: bit for bit)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from snrl.agents import optim
from snrl.agents.optim import FlatAdam


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2)
    )


def _batches(n: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(8, 3, generator=g) * 3 for _ in range(n)]


def _ref_step(net, opt, x, max_norm):
    opt.zero_grad(set_to_none=True)
    net(x).square().mean().backward()
    norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    opt.step()
    return norm


def _flat_step(net, opt, x, max_norm):
    opt.zero_grad()
    net(x).square().mean().backward()
    norm = opt.clip_grad_norm_(max_norm)
    opt.step()
    return norm


def test_unfused_flat_adam_steps_bit_for_bit_as_torch_adam_with_the_clip():
    """PPO's optimizer: torch.optim.Adam's and clip_grad_norm_'s own arithmetic, so a run
    steps exactly as with them (clipping on some steps and not on others)."""
    ref, net = _net(), _net()
    ro = torch.optim.Adam(ref.parameters(), lr=1e-2, eps=1e-5)
    fo = FlatAdam(net.parameters(), lr=1e-2, eps=1e-5, fused=False)
    clipped = []
    for x in _batches(30):
        rn, fn = _ref_step(ref, ro, x, 0.2), _flat_step(net, fo, x, 0.2)
        assert torch.equal(fn, rn)
        clipped.append(bool(rn > 0.2))
    assert any(clipped) and not all(clipped)
    _assert_same(ref, net, atol=0)


def _assert_same(a: nn.Module, b: nn.Module, atol: float = 1e-6) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=atol, rtol=0, msg=name)


def test_the_probe_finds_torchs_fused_kernel():
    assert optim._fused_kernel_works() == hasattr(torch, "_fused_adam_")


@pytest.mark.parametrize("kernel", [True, False])  # torch's fused kernel / the public path
@pytest.mark.parametrize("max_norm", [0.05, 100.0])  # clipping on every step / never
def test_flat_adam_steps_as_torch_adam_with_the_clip(max_norm, kernel, monkeypatch):
    monkeypatch.setattr(optim, "_fused_kernel_works", lambda: kernel)
    ref, net = _net(), _net()
    ro = torch.optim.Adam(ref.parameters(), lr=1e-2, eps=1e-8)
    fo = FlatAdam(net.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in net.parameters()]
    for x in _batches(20):
        rn, fn = _ref_step(ref, ro, x, max_norm), _flat_step(net, fo, x, max_norm)
        torch.testing.assert_close(fn, rn, atol=1e-6, rtol=1e-5)
    _assert_same(ref, net)
    assert all(not torch.equal(p, b) for p, b in zip(net.parameters(), before))
    # every parameter and gradient is a view of the flat buffers (no copies lying around)
    size = fo.flat.element_size()
    offset = 0
    for p in net.parameters():
        assert p.data_ptr() == fo.flat.data_ptr() + offset * size
        assert p.grad.data_ptr() == fo.flat.grad.data_ptr() + offset * size
        offset += p.numel()
    assert offset == fo.flat.numel() == sum(p.numel() for p in ref.parameters())


def test_flat_adam_rebinds_parameters_and_gradients_that_were_replaced():
    ref, net = _net(), _net()
    ro = torch.optim.Adam(ref.parameters(), lr=1e-2)
    fo = FlatAdam(net.parameters(), lr=1e-2)
    xs = _batches(6)
    for i, x in enumerate(xs):
        if i == 2:  # a user clears the gradients the torch way: autograd makes new tensors
            for p in net.parameters():
                p.grad = None
            ro.zero_grad(set_to_none=True)
            net(x).square().mean().backward()
            ref(x).square().mean().backward()
            ro.step()
            fo.step()  # notices the new gradient tensors and takes them
            continue
        if i == 4:  # a parameter's storage is swapped (as .data = or a load with assign)
            with torch.no_grad():
                net[0].weight.data = net[0].weight.data.clone()
        _ref_step(ref, ro, x, 1.0)
        _flat_step(net, fo, x, 1.0)
    _assert_same(ref, net)
    assert net[0].weight.data_ptr() == fo.flat.data_ptr()


def test_flat_adam_state_dict_round_trip_and_legacy_per_tensor_state():
    xs = _batches(10)
    ref, net = _net(), _net()
    ro = torch.optim.Adam(ref.parameters(), lr=1e-2)
    fo = FlatAdam(net.parameters(), lr=1e-2)
    for x in xs[:5]:
        _ref_step(ref, ro, x, 1.0)
        _flat_step(net, fo, x, 1.0)
    # flat -> flat
    net2 = copy.deepcopy(net)
    fo2 = FlatAdam(net2.parameters(), lr=1e-2)
    fo2.load_state_dict(copy.deepcopy(fo.state_dict()))  # as from a file: no shared tensors
    # a torch.optim.Adam state dict (a checkpoint from before FlatAdam) -> flat
    net3 = copy.deepcopy(ref)
    fo3 = FlatAdam(net3.parameters(), lr=1e-2)
    fo3.load_state_dict(ro.state_dict())
    assert int(fo3.state[fo3.flat]["step"]) == 5
    for x in xs[5:]:
        _ref_step(ref, ro, x, 1.0)
        for n_, o_ in ((net, fo), (net2, fo2), (net3, fo3)):
            _flat_step(n_, o_, x, 1.0)
    _assert_same(ref, net)
    _assert_same(net, net2, atol=0)
    _assert_same(ref, net3)
    bad = ro.state_dict()
    bad["state"][0]["exp_avg"] = torch.zeros(5)
    with pytest.raises(ValueError, match="exp_avg of parameter 0 has 5 values"):
        FlatAdam(_net().parameters(), lr=1e-2).load_state_dict(bad)
