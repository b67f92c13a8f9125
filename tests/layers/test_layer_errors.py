"""Bad input raises ValueError naming the value and what is allowed."""

from __future__ import annotations

import pytest
import torch

from snrl.layers import ALIFLayer, LIFLayer, LILayer, SpyLIFLayer

LAYERS = [LIFLayer, ALIFLayer, SpyLIFLayer, LILayer]


@pytest.mark.parametrize("cls", LAYERS)
def test_wrong_feature_size(cls) -> None:
    layer = cls(3, 4)
    with pytest.raises(ValueError, match=r"\(2, 5\).*\(B, 3\)"):
        layer(torch.zeros(2, 5), layer.initial_state(2))
    with pytest.raises(ValueError, match=r"\(2,\)"):
        layer(torch.zeros(2), layer.initial_state(2))


@pytest.mark.parametrize("cls", LAYERS)
def test_batch_mismatch_names_both_shapes_and_never_rezeroes(cls) -> None:
    layer = cls(3, 4)
    state = layer.initial_state(2)
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(5, 3\)"):
        layer(torch.zeros(5, 3), state)
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(7, 5, 3\)"):
        layer(torch.zeros(7, 5, 3), state)


def test_state_of_the_wrong_type() -> None:
    with pytest.raises(ValueError, match="ALIFState"):
        ALIFLayer(3, 4)(torch.zeros(2, 3), LIFLayer(3, 4).initial_state(2))


@pytest.mark.parametrize("kw", [{"reset": "soft"}, {"threshold": 0.0}, {"threshold": -1.0}])
def test_bad_reset_or_threshold(kw) -> None:
    with pytest.raises(ValueError, match=repr(next(iter(kw.values())))):
        LIFLayer(2, 3, **kw)


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("kw", [{"tau_m": 0.0}, {"tau_m": -0.02}, {"dt": 0.0}, {"dt": -1e-3}])
def test_nonpositive_tau_or_dt(cls, kw) -> None:
    with pytest.raises(ValueError, match=repr(next(iter(kw.values())))):
        cls(2, 3, **kw)


def test_bad_tau_tensors_and_extra_time_constants() -> None:
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        LIFLayer(2, 3, tau_m=torch.tensor([0.02, 0.03]))
    with pytest.raises(ValueError, match="-0.01"):
        LIFLayer(2, 2, tau_m=torch.tensor([0.02, -0.01]))
    with pytest.raises(ValueError, match="tau_a"):
        ALIFLayer(2, 3, tau_a=0.0)
    with pytest.raises(ValueError, match="tau_syn"):
        SpyLIFLayer(2, 3, tau_syn=-1.0)
    with pytest.raises(ValueError, match="beta"):
        ALIFLayer(2, 3, beta=-0.5)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"force_dale_law": True, "recurrent_sign": torch.ones(2)}, r"\(2,\).*\(3,\)"),
        ({"force_dale_law": True, "recurrent_sign": torch.tensor([1.0, 0.0, -1.0])}, "0.0"),
        ({"force_dale_law": True, "recurrent_sign": 1.2}, "1.2"),
        ({"forward_sign": torch.ones(3)}, r"forward_sign.*\(3,\).*\(2,\)"),
        ({"forward_sign": torch.tensor([2.0, 1.0])}, "2.0"),
    ],
)
def test_bad_sign_arguments(kw, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LIFLayer(2, 3, **kw)


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_bad_sizes(n) -> None:
    with pytest.raises(ValueError, match=repr(n)):
        LIFLayer(2, n)


@pytest.mark.parametrize("cls", [LIFLayer, ALIFLayer, SpyLIFLayer])
def test_spike_grad_that_is_not_callable(cls) -> None:
    with pytest.raises(ValueError, match="spike_grad='atan' is not callable.*Surrogate"):
        cls(2, 3, spike_grad="atan")
