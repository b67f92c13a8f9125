"""Hard Dale's law on the layers: by construction, after optimizers and hostile loads."""

from __future__ import annotations

import pytest
import torch

from snrl.layers import ALIFLayer, LIFLayer, LILayer, SpyLIFLayer

SPIKING = [LIFLayer, ALIFLayer, SpyLIFLayer]


def _assert_rows_signed(w: torch.Tensor, sign: torch.Tensor) -> None:
    assert ((w * sign[:, None]) >= 0).all(), "a synapse has the wrong sign"


def _flip_everything_loss(layer) -> torch.Tensor:
    """A loss whose gradient pushes every effective weight towards the opposite sign."""
    rs, fs = layer.recurrent_sign, layer.forward_sign
    return (layer.recurrent_weights * rs[:, None]).sum() + (
        layer.forward_weights * fs[:, None]
    ).sum()


@pytest.mark.parametrize("cls", SPIKING)
def test_signs_hold_after_50_adamw_steps_with_weight_decay(cls) -> None:
    fsign = torch.tensor([1.0, -1.0, 1.0, -1.0])
    layer = cls(4, 16, force_dale_law=True, forward_sign=fsign, recurrent_sign=0.25, seed=0)
    rs = layer.recurrent_sign.clone()
    opt = torch.optim.AdamW(layer.parameters(), lr=0.05, weight_decay=0.1)
    x = torch.randn(10, 3, 4, generator=torch.Generator().manual_seed(0))
    raw_before = layer.weight_rec.detach().clone()
    for _ in range(50):
        out, _ = layer(x, layer.initial_state(3))
        loss = _flip_everything_loss(layer) + out.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    # raw weights did cross zero, effective ones kept their signs; signs are not learned
    assert (torch.sign(layer.weight_rec) != torch.sign(raw_before)).any()
    assert torch.equal(layer.recurrent_sign, rs)
    assert "recurrent_sign" not in dict(layer.named_parameters())
    _assert_rows_signed(layer.recurrent_weights, rs)
    _assert_rows_signed(layer.forward_weights, fsign)
    assert (layer.recurrent_weights != 0).sum() > 0


@pytest.mark.parametrize("cls", SPIKING + [LILayer])
def test_signs_hold_after_hostile_load_state_dict(cls) -> None:
    kw = {"use_recurrent_connection": True} if cls is LILayer else {}
    layer = cls(5, 12, force_dale_law=True, forward_sign=torch.ones(5), seed=3, **kw)
    g = torch.Generator().manual_seed(9)
    hostile = {k: torch.randn(v.shape, generator=g) * 5 for k, v in layer.state_dict().items()}
    hostile["recurrent_sign"] = layer.recurrent_sign.clone()
    hostile["forward_sign"] = layer.forward_sign.clone()
    hostile["rec_mask"] = layer.rec_mask.clone()
    layer.load_state_dict(hostile)
    _assert_rows_signed(layer.recurrent_weights, layer.recurrent_sign)
    _assert_rows_signed(layer.forward_weights, torch.ones(5))
    assert (layer.recurrent_weights.diagonal() == 0).all()


def test_load_state_dict_rejects_a_sign_buffer_that_is_not_pm1() -> None:
    layer = LIFLayer(3, 4, force_dale_law=True, seed=0)
    sd = layer.state_dict()
    sd["recurrent_sign"] = torch.tensor([1.0, -1.0, 0.3, 1.0])
    with pytest.raises(ValueError, match="0.3"):
        layer.load_state_dict(sd)


@pytest.mark.parametrize(("n", "r"), [(10, 0.2), (128, 0.2), (7, 0.5), (3, 0.0)])
def test_float_recurrent_sign_gives_round_r_n_inhibitory(n: int, r: float) -> None:
    layer = LIFLayer(2, n, force_dale_law=True, recurrent_sign=r, seed=4)
    assert int((layer.recurrent_sign == -1).sum()) == round(r * n)
    assert layer.recurrent_sign.abs().eq(1).all()


def test_sign_tensor_is_used_as_given_and_seeded_choice_repeats() -> None:
    s = torch.tensor([1.0, -1.0, -1.0, 1.0])
    assert torch.equal(LIFLayer(2, 4, force_dale_law=True, recurrent_sign=s).recurrent_sign, s)
    a = LIFLayer(2, 40, force_dale_law=True, seed=11).recurrent_sign
    b = LIFLayer(2, 40, force_dale_law=True, seed=11).recurrent_sign
    c = LIFLayer(2, 40, force_dale_law=True, seed=12).recurrent_sign
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_seed_none_draws_from_the_global_rng() -> None:
    torch.manual_seed(123)
    a = LIFLayer(3, 8, force_dale_law=True)
    torch.manual_seed(123)
    b = LIFLayer(3, 8, force_dale_law=True)
    assert torch.equal(a.weight_rec, b.weight_rec)
    assert torch.equal(a.recurrent_sign, b.recurrent_sign)


@pytest.mark.parametrize("cls", SPIKING)
def test_init_scale_is_the_same_with_and_without_dale(cls) -> None:
    free = cls(6, 64, seed=5)
    dale = cls(6, 64, seed=5, force_dale_law=True, forward_sign=torch.ones(6))
    assert torch.equal(free.recurrent_weights.abs(), dale.recurrent_weights.abs())
    assert torch.equal(free.forward_weights.abs(), dale.forward_weights.abs())
    # stated init: |W_rec| ~ U(0, 1/sqrt(N)), |W_in| ~ U(0, 1/sqrt(F))
    assert dale.recurrent_weights.abs().max() <= 64**-0.5
    assert dale.forward_weights.abs().max() <= 6**-0.5
    assert dale.recurrent_weights.abs().mean().item() == pytest.approx(
        0.5 * 64**-0.5 * 63 / 64, rel=0.05
    )


@pytest.mark.parametrize("dale", [False, True])
def test_eye_mask_zero_diagonal_and_no_gradient_on_it(dale: bool) -> None:
    layer = LIFLayer(3, 6, force_dale_law=dale, seed=0)
    assert (layer.recurrent_weights.diagonal() == 0).all()
    x = torch.randn(15, 2, 3, generator=torch.Generator().manual_seed(1)) * 3
    out, _ = layer(x, layer.initial_state(2))
    out.sum().backward()
    assert (layer.weight_rec.grad.diagonal() == 0).all()
    assert layer.weight_rec.grad.abs().sum() > 0


def test_without_eye_mask_the_diagonal_is_used() -> None:
    layer = LIFLayer(3, 6, use_rec_eye_mask=False, seed=0)
    assert layer.rec_mask is None
    assert (layer.recurrent_weights.diagonal() != 0).all()


def test_forward_sign_without_dale_signs_input_rows_only() -> None:
    fs = torch.tensor([-1.0, 1.0])
    layer = LIFLayer(2, 5, forward_sign=fs, seed=0)
    _assert_rows_signed(layer.forward_weights, fs)
    assert layer.recurrent_sign is None
    assert torch.equal(layer.recurrent_weights, layer.weight_rec * layer.rec_mask)


def test_recurrent_weights_without_recurrence_are_zero() -> None:
    layer = LIFLayer(2, 4, use_recurrent_connection=False, seed=0)
    assert torch.equal(layer.recurrent_weights, torch.zeros(4, 4))
