"""Dale sign vectors and sign-constrained weights."""

from __future__ import annotations

import pytest
import torch

from snrl.functional import check_sign_vector, make_sign_vector, signed_weights
from snrl.functional.dale import balance_scale, dale_init, spectral_radius


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


def test_dale_init_by_hand() -> None:
    # sign (+, +, -): f = 1/3, a = sqrt(1/2), b = sqrt(2).
    # step 1, rows: |W| * (a, a, b) = [[a, a/2], [a/2, a/2], [b, b/2]]
    # step 2, columns: col 0 has E = 1.5 a = 1.0607, I = b = 1.4142, so E entries x
    #   sqrt(I/E) = sqrt(4/3) and I x sqrt(3/4): (sqrt(2/3), 1/sqrt(6), sqrt(3/2)), sum E = I;
    #   col 1 has E = a = I = b/2: unchanged (1/(2 sqrt 2), 1/(2 sqrt 2), 1/sqrt 2).
    # step 3, variance: rows centred on their means, the squared deviations summed:
    #   row 0: (sqrt(2/3) - 1/(2 sqrt 2)) ^ 2 / 2, row 1: (1/sqrt 6 - 1/(2 sqrt 2)) ^ 2 / 2,
    #   row 2: (sqrt(3/2) - 1/sqrt 2) ^ 2 / 2; the target sum W_raw^2 = 3, c = sqrt(3 / that).
    w_raw = torch.tensor([[1.0, -0.5], [-0.5, 0.5], [1.0, 0.5]])
    sign = torch.tensor([1.0, 1.0, -1.0])
    r2, r3, r6 = 2**0.5, 3**0.5, 6**0.5
    balanced = torch.tensor([[r2 / r3, 1 / (2 * r2)], [1 / r6, 1 / (2 * r2)], [r3 / r2, 1 / r2]])
    dev = (r2 / r3 - 1 / (2 * r2)) ** 2 + (1 / r6 - 1 / (2 * r2)) ** 2 + (r3 / r2 - 1 / r2) ** 2
    c = (3.0 / (dev / 2)) ** 0.5
    out = dale_init(w_raw, sign)
    torch.testing.assert_close(out, balanced * c)
    w = signed_weights(out, sign)
    torch.testing.assert_close(w.sum(0), torch.zeros(2), atol=1e-6, rtol=0)


def test_dale_init_mask_and_one_sign() -> None:
    g = torch.Generator().manual_seed(0)
    w_raw = torch.rand(10, 10, generator=g) * 2 - 1
    sign = torch.ones(10)
    sign[[2, 7]] = -1.0
    mask = 1 - torch.eye(10)
    out = dale_init(w_raw, sign, mask)
    assert (out >= 0).all()
    eff = signed_weights(out, sign, mask)
    torch.testing.assert_close(eff.sum(0), torch.zeros(10), atol=1e-6, rtol=0)
    assert not out.diagonal().any()  # masked synapses are 0 in the raw matrix too
    # one sign only (f = 0 or 1): no balance possible, |W_raw| as drawn
    assert torch.equal(dale_init(w_raw, torch.ones(10), mask), w_raw.abs())
    assert torch.equal(dale_init(w_raw, -torch.ones(10)), w_raw.abs())


def test_spectral_radius_by_hand() -> None:
    # [[0, 2], [-2, 0]] has eigenvalues ±2i; [[3, 1], [0, -4]] has 3 and -4
    assert spectral_radius(torch.tensor([[0.0, 2.0], [-2.0, 0.0]])) == pytest.approx(2.0)
    assert spectral_radius(torch.tensor([[3.0, 1.0], [0.0, -4.0]])) == pytest.approx(4.0)
