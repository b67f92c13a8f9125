"""Dale sign vectors and sign-constrained weights."""

from __future__ import annotations

import pytest
import torch

from snrl.functional import check_sign_vector, make_sign_vector, signed_weights
from snrl.functional.dale import balance_scale


@pytest.mark.parametrize(
    ("n", "r"), [(10, 0.2), (7, 0.5), (128, 0.2), (5, 0.0), (5, 1.0), (9, 0.3)]
)
def test_ratio_gives_round_r_n_inhibitory(n: int, r: float) -> None:
    sign = make_sign_vector(n, r, torch.Generator().manual_seed(1))
    assert sign.shape == (n,)
    assert set(sign.tolist()) <= {1.0, -1.0}
    assert int((sign == -1).sum()) == round(r * n)


def test_choice_of_inhibitory_neurons_is_seeded() -> None:
    a = make_sign_vector(50, 0.2, torch.Generator().manual_seed(3))
    b = make_sign_vector(50, 0.2, torch.Generator().manual_seed(3))
    c = make_sign_vector(50, 0.2, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("r", [-0.1, 1.5])
def test_ratio_out_of_range_raises(r: float) -> None:
    with pytest.raises(ValueError, match=str(r)):
        make_sign_vector(10, r, torch.Generator())


def test_bad_sign_vectors_raise_naming_the_value() -> None:
    with pytest.raises(ValueError, match=r"\(3,\).*expected \(4,\)"):
        check_sign_vector(torch.ones(3), 4, "recurrent_sign")
    with pytest.raises(ValueError, match="0.5"):
        check_sign_vector(torch.tensor([1.0, -1.0, 0.5, 1.0]), 4, "recurrent_sign")
    ok = check_sign_vector([1, -1, 1], 3, "forward_sign")
    assert ok.dtype == torch.float32 and ok.tolist() == [1.0, -1.0, 1.0]


def test_signed_weights_rows_carry_the_sign(gen: torch.Generator) -> None:
    w = torch.randn(6, 5, generator=gen)
    sign = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    eff = signed_weights(w, sign)
    assert torch.equal(eff.abs(), w.abs())
    assert ((eff * sign[:, None]) >= 0).all()
    mask = torch.ones(6, 5)
    mask[0, 0] = 0
    assert signed_weights(w, None, mask)[0, 0] == 0
    assert torch.equal(signed_weights(w), w)


@pytest.mark.parametrize(("n", "n_inh"), [(10, 2), (128, 26), (7, 3), (4, 2), (9, 8)])
def test_balance_scale_zero_mean_and_unit_second_moment(n: int, n_inh: int) -> None:
    sign = torch.ones(n)
    sign[:n_inh] = -1.0
    scale = balance_scale(sign)
    # over the rows: sum of signed scales is 0 (zero expected input) and the mean square is 1
    assert (scale * sign).sum().item() == pytest.approx(0.0, abs=1e-5)
    assert (scale**2).mean().item() == pytest.approx(1.0, rel=1e-6)
    assert len(set(scale[sign > 0].tolist())) == 1 and len(set(scale[sign < 0].tolist())) == 1


def test_balance_scale_by_hand() -> None:
    sign = torch.tensor([1.0, 1.0, -1.0, 1.0, 1.0])  # f = 0.2: a = 1/2, b = 2
    torch.testing.assert_close(balance_scale(sign), torch.tensor([0.5, 0.5, 2.0, 0.5, 0.5]))
    assert torch.equal(balance_scale(torch.tensor([1.0, -1.0])), torch.ones(2))  # f = 0.5
    assert torch.equal(balance_scale(torch.ones(3)), torch.ones(3))  # f = 0: no balance
    assert torch.equal(balance_scale(-torch.ones(3)), torch.ones(3))  # f = 1: no balance
