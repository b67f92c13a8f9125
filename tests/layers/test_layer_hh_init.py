"""Hidden-state initialization modes and reset_state."""

from __future__ import annotations

import pytest
import torch

from snrl.layers import ALIFLayer, LIFLayer, LILayer, SpyLIFLayer

LAYERS = [LIFLayer, ALIFLayer, SpyLIFLayer, LILayer]


@pytest.mark.parametrize("cls", LAYERS)
def test_zeros(cls) -> None:
    state = cls(3, 4, seed=0).initial_state(2)
    assert type(state) is cls.state_type
    for t in state:
        assert torch.equal(t, torch.zeros(2, 4))


@pytest.mark.parametrize("cls", LAYERS)
def test_random_is_seeded_and_advances_across_calls(cls) -> None:
    a = cls(3, 4, hh_init="random", hh_init_seed=7)
    b = cls(3, 4, hh_init="random", hh_init_seed=7)
    s1, s2 = a.initial_state(5), a.initial_state(5)
    assert torch.equal(s1.v, b.initial_state(5).v)  # runs repeat
    assert not torch.equal(s1.v, s2.v)  # episodes differ
    assert torch.equal(s2.v, b.initial_state(5).v)
    if hasattr(s1, "z"):
        assert torch.equal(s1.z, torch.zeros(5, 4))  # spikes start at 0
    if hasattr(s1, "a"):
        assert torch.equal(s1.a, torch.zeros(5, 4))
    if hasattr(s1, "i"):
        assert not torch.equal(s1.i, s1.v) and s1.i.abs().sum() > 0


def test_random_moments_on_a_large_batch() -> None:
    layer = SpyLIFLayer(2, 50, hh_init="random", hh_init_mu=0.3, hh_init_std=0.5, hh_init_seed=1)
    s = layer.initial_state(4000)
    for t in (s.v, s.i):
        assert t.mean().item() == pytest.approx(0.3, abs=0.01)
        assert t.std().item() == pytest.approx(0.5, abs=0.01)


def test_random_seed_none_follows_the_global_rng() -> None:
    torch.manual_seed(5)
    a = LIFLayer(2, 3, hh_init="random").initial_state(2).v
    torch.manual_seed(5)
    b = LIFLayer(2, 3, hh_init="random").initial_state(2).v
    assert torch.equal(a, b)


def test_random_does_not_touch_the_global_rng() -> None:
    layer = LIFLayer(2, 3, hh_init="random", hh_init_seed=0, seed=0)
    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    layer.initial_state(8)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("cls", LAYERS)
def test_inputs_sets_the_membrane(cls) -> None:
    layer = cls(4, 4, hh_init="inputs", seed=0)
    x = torch.arange(8.0).reshape(2, 4)
    s = layer.initial_state(2, inputs=x)
    assert torch.equal(s.v, x)
    for t in s[1:]:
        assert torch.equal(t, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="inputs="):
        layer.initial_state(2)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 4\)"):
        layer.initial_state(2, inputs=torch.zeros(3, 4))


def test_inputs_needs_equal_sizes() -> None:
    with pytest.raises(ValueError, match="3 != 4"):
        LIFLayer(3, 4, hh_init="inputs")


@pytest.mark.parametrize("cls", LAYERS)
def test_given_h0_per_neuron_or_per_row_with_shape_checks(cls) -> None:
    layer = cls(2, 3, hh_init="given", seed=0)
    h0 = torch.tensor([0.1, 0.2, 0.3])
    assert torch.equal(layer.initial_state(2, h0=h0).v, h0.expand(2, 3))
    hb = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(layer.initial_state(2, h0=hb).v, hb)
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\) or \(2, 3\)"):
        layer.initial_state(2, h0=torch.zeros(4))
    with pytest.raises(ValueError, match=r"\(5, 3\).*\(3,\) or \(2, 3\)"):
        layer.initial_state(2, h0=torch.zeros(5, 3))
    with pytest.raises(ValueError, match="h0="):
        layer.initial_state(2)


def test_h0_with_another_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="hh_init='given'"):
        LIFLayer(2, 3).initial_state(1, h0=torch.zeros(3))


@pytest.mark.parametrize("cls", LAYERS)
def test_learned_init_is_broadcast_and_gets_gradient(cls) -> None:
    layer = cls(2, 3, hh_init="learned", hh_init_mu=0.5, seed=0)
    assert isinstance(layer.h0, torch.nn.Parameter) and layer.h0.shape == (3,)
    s = layer.initial_state(4)
    assert torch.equal(s.v, torch.full((4, 3), 0.5))
    out, _ = layer(torch.randn(6, 4, 2, generator=torch.Generator().manual_seed(0)), s)
    out.sum().backward()
    assert layer.h0.grad is not None and layer.h0.grad.abs().sum() > 0


@pytest.mark.parametrize("mode", ["zeros", "random", "inputs", "given", "learned"])
@pytest.mark.parametrize("cls", LAYERS)
def test_reset_state_touches_only_done_rows(cls, mode: str) -> None:
    layer = cls(3, 3, hh_init=mode, hh_init_seed=0, seed=0)
    kw = {}
    if mode == "given":
        kw["h0"] = torch.tensor([0.5, -0.5, 0.25])
    if mode == "inputs":
        kw["inputs"] = torch.full((4, 3), 0.7)
    state = layer.initial_state(4, **kw)
    x = torch.randn(8, 4, 3, generator=torch.Generator().manual_seed(3)) * 2
    with torch.no_grad():
        _, state = layer(x, state)
    done = torch.tensor([False, True, False, True])
    new = layer.reset_state(state, done, **kw)
    assert type(new) is type(state)
    fresh_template = layer.initial_state(4, **kw)
    for old_t, new_t, fresh_t in zip(state, new, fresh_template):
        assert torch.equal(new_t[~done], old_t[~done])
        if mode != "random":
            assert torch.equal(new_t[done], fresh_t[done].detach())
    if mode == "random":
        assert not torch.equal(new.v[done], state.v[done])
        assert torch.equal(new[1][done], torch.zeros(2, 3)) if cls is not LILayer else True


def test_reset_state_checks_done_shape() -> None:
    layer = LIFLayer(2, 3)
    s = layer.initial_state(4)
    with pytest.raises(ValueError, match=r"done has shape \(3,\).*batch 4"):
        layer.reset_state(s, torch.zeros(3, dtype=torch.bool))


def test_unknown_hh_init_lists_allowed() -> None:
    with pytest.raises(ValueError, match="'warm'.*zeros, random, inputs, given, learned"):
        LIFLayer(2, 3, hh_init="warm")
