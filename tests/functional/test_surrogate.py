"""Surrogate: closed-form derivatives against autograd through snntorch's own surrogates."""

from __future__ import annotations

import math

import pytest
import snntorch.surrogate as snn_surrogate
import torch

from snrl.errors import UserError
from snrl.functional.surrogate import (
    SURROGATE_KINDS,
    Surrogate,
    autograd_derivative,
    default_spike_grad,
    derivative_fn,
    heaviside,
)

# kind -> (snntorch factory call with the same parameters, our description)
PAIRS = {
    "fast_sigmoid": (lambda: snn_surrogate.fast_sigmoid(slope=7.0), Surrogate("fast_sigmoid", 7.0)),
    "atan": (lambda: snn_surrogate.atan(alpha=3.0), Surrogate("atan", 3.0)),
    "sigmoid": (lambda: snn_surrogate.sigmoid(slope=4.0), Surrogate("sigmoid", 4.0)),
    "triangular": (lambda: snn_surrogate.triangular(threshold=0.5), Surrogate("triangular", 0.5)),
    "straight_through": (snn_surrogate.straight_through_estimator, Surrogate("straight_through")),
    "spike_rate_escape": (
        lambda: snn_surrogate.spike_rate_escape(beta=2.0, slope=3.0),
        Surrogate("spike_rate_escape", 3.0, beta=2.0),
    ),
}


def test_every_kind_is_checked_against_snntorch() -> None:
    assert set(PAIRS) == set(SURROGATE_KINDS)


@pytest.mark.parametrize("kind", sorted(PAIRS))
def test_closed_form_equals_autograd_through_snntorch(kind: str) -> None:
    make, ours = PAIRS[kind]
    # |x| <= 6 keeps snntorch's sigmoid formula (exp(-k x) in a ratio) finite; 0 is included.
    x = torch.linspace(-6.0, 6.0, 1201, dtype=torch.float64)
    want = autograd_derivative(make(), x)
    got = ours.derivative(x)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
    # the same through our own autograd function, and the in-place variant
    torch.testing.assert_close(autograd_derivative(ours, x), want, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(ours.derivative(x.clone(), inplace=True), want)
    assert torch.equal(x, torch.linspace(-6.0, 6.0, 1201, dtype=torch.float64))


@pytest.mark.parametrize(
    ("surrogate", "x", "expected"),
    [
        (Surrogate("fast_sigmoid", 10.0), [0.0, 0.1, -1.0], [1.0, 0.25, 1 / 121]),
        (Surrogate("atan", 2.0), [0.0, 1 / math.pi], [1.0, 0.5]),
        (Surrogate("sigmoid", 8.0), [0.0], [2.0]),  # k/4 at threshold
        (Surrogate("triangular", 0.5), [-1.0, 0.0, 2.0], [0.5, -0.5, -0.5]),
        (Surrogate("straight_through"), [-3.0, 5.0], [1.0, 1.0]),
        (Surrogate("spike_rate_escape", 3.0, beta=2.0), [1.0, 0.0], [3.0, 3.0 * math.exp(-2.0)]),
    ],
)
def test_closed_forms_by_hand(surrogate: Surrogate, x: list, expected: list) -> None:
    got = surrogate.derivative(torch.tensor(x, dtype=torch.float64))
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))


def test_sigmoid_derivative_stays_finite_far_from_threshold() -> None:
    got = Surrogate("sigmoid", 25.0).derivative(torch.tensor([-100.0, 100.0]))
    assert torch.isfinite(got).all() and (got >= 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_is_heaviside_in_the_input_dtype(dtype: torch.dtype) -> None:
    x = torch.tensor([-1.0, 0.0, 1e-6, 2.0], dtype=dtype)
    for kind in SURROGATE_KINDS:
        z = Surrogate(kind)(x)
        assert z.dtype == dtype
        assert torch.equal(z, heaviside(x))


def test_defaults_are_snntorchs_and_the_layer_default_is_fast_sigmoid_10() -> None:
    assert Surrogate("fast_sigmoid").slope == 25.0
    assert Surrogate("atan").slope == 2.0
    assert Surrogate("spike_rate_escape").beta == 1.0
    assert Surrogate("straight_through").slope is None
    assert default_spike_grad() == Surrogate("fast_sigmoid", 10.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "gauss"}, "unknown surrogate kind 'gauss'"),
        ({"kind": "atan", "slope": -1.0}, "not positive"),
        ({"kind": "fast_sigmoid", "slope": float("nan")}, "not positive"),
        ({"kind": "atan", "beta": 1.0}, "takes no beta"),
        ({"kind": "straight_through", "slope": 2.0}, "takes no slope"),
    ],
)
def test_bad_descriptions_raise_user_error(kwargs: dict, match: str) -> None:
    with pytest.raises(UserError, match=match):
        Surrogate(**kwargs)


class _Custom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: ANN001
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001
        (x,) = ctx.saved_tensors
        return grad * torch.exp(-x.abs())


def test_derivative_fn_closed_form_for_surrogates_autograd_for_other_callables() -> None:
    x = torch.tensor([-1.0, -0.1, 0.0, 0.2, 3.0], dtype=torch.float64)
    fast = Surrogate("fast_sigmoid", 10.0)
    assert derivative_fn(fast).func == fast.derivative  # the closed form, no autograd
    torch.testing.assert_close(derivative_fn(fast)(x.clone()), 1 / (1 + 10 * x.abs()) ** 2)
    torch.testing.assert_close(derivative_fn(_Custom.apply)(x), torch.exp(-x.abs()))
    # a snntorch closure is an unknown callable too: autograd gives its derivative
    torch.testing.assert_close(
        derivative_fn(snn_surrogate.fast_sigmoid(slope=10.0))(x), 1 / (1 + 10 * x.abs()) ** 2
    )
    # a function without a surrogate graph has derivative 0
    assert not derivative_fn(heaviside)(x).any()
