"""Hard Dale's law on the layers: by construction, after optimizers and hostile loads."""

from __future__ import annotations

import pytest
import torch

from snrl.errors import UserError
from snrl.functional.dale import spectral_radius
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
    layer = cls(4, 20, force_dale_law=True, forward_sign=fsign, seed=0)  # 80/20, balanced
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


@pytest.mark.parametrize(
    "bad",
    [[1.0, -1.0, 0.3, 1.0], [1.0, -1.0, float("nan"), 1.0], [1.0, 0.0, 1.0, 1.0], [1.0, -1.0]],
)
@pytest.mark.parametrize("name", ["recurrent_sign", "forward_sign"])
def test_load_state_dict_rejects_a_sign_buffer_that_is_not_pm1(name: str, bad: list) -> None:
    layer = LIFLayer(4, 4, force_dale_law=True, forward_sign=torch.ones(4), seed=0)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    sd = layer.state_dict()
    sd[name] = torch.tensor(bad)
    with pytest.raises(UserError, match=name):
        layer.load_state_dict(sd)
    for k, v in layer.state_dict().items():  # nothing was loaded
        assert torch.equal(v, before[k])


def test_a_sign_buffer_cannot_be_smuggled_into_a_layer_without_dale() -> None:
    layer = LIFLayer(3, 4, seed=0)
    sd = layer.state_dict()
    sd["recurrent_sign"] = -torch.ones(4)
    with pytest.raises(RuntimeError, match="recurrent_sign"):
        layer.load_state_dict(sd)
    assert layer.recurrent_sign is None


def test_rec_mask_is_derived_from_the_flags_not_persisted() -> None:
    layer = LIFLayer(3, 5, force_dale_law=True, seed=0)
    assert "rec_mask" not in layer.state_dict()
    assert torch.equal(layer.rec_mask, 1.0 - torch.eye(5))
    fresh = LIFLayer(3, 5, force_dale_law=True, seed=1)
    fresh.load_state_dict(layer.state_dict())
    assert torch.equal(fresh.recurrent_weights, layer.recurrent_weights)


@pytest.mark.parametrize(
    "mask",
    [
        lambda m: -m,  # negative entries: would flip every sign
        lambda m: torch.ones_like(m),  # autapses back
        lambda m: m * 3.0,  # scaled synapses
        lambda m: m[:4, :4],  # wrong shape
    ],
)
@pytest.mark.parametrize("cls", SPIKING + [LILayer])
def test_hostile_rec_mask_in_a_state_dict_is_rejected(cls, mask) -> None:
    kw = {"use_recurrent_connection": True} if cls is LILayer else {}
    layer = cls(3, 5, force_dale_law=True, seed=0, **kw)
    weights = layer.recurrent_weights.detach().clone()
    sd = layer.state_dict()
    sd["rec_mask"] = mask(1.0 - torch.eye(5))
    with pytest.raises(UserError, match="rec_mask .*use_rec_eye_mask=True"):
        layer.load_state_dict(sd)
    assert torch.equal(layer.recurrent_weights, weights)
    _assert_rows_signed(layer.recurrent_weights, layer.recurrent_sign)


def test_old_checkpoint_with_its_true_mask_still_loads() -> None:
    # checkpoints written while the mask was persisted carry it; the true mask is accepted
    layer = LIFLayer(3, 5, force_dale_law=True, seed=0)
    old = dict(layer.state_dict(), rec_mask=1.0 - torch.eye(5))
    fresh = LIFLayer(3, 5, force_dale_law=True, seed=1)
    fresh.load_state_dict(old)
    assert torch.equal(fresh.recurrent_weights, layer.recurrent_weights)
    # but a layer built without the eye mask rejects it (its flags imply no mask)
    with pytest.raises(UserError, match="use_rec_eye_mask=False"):
        LIFLayer(3, 5, force_dale_law=True, use_rec_eye_mask=False, seed=1).load_state_dict(old)


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


def _input_variance(w: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over neurons j of sum_i Var(W_ij), each row's entries centred on the row's mean
    over its existing synapses (a Dale row has a nonzero mean; a free row has mean 0)."""
    live = torch.ones_like(w) if mask is None else mask
    mu = (w * live).sum(1, keepdim=True) / live.sum(1, keepdim=True)
    return (((w - mu) * live) ** 2).sum(0).mean()


@pytest.mark.parametrize("cls", SPIKING)
@pytest.mark.parametrize("sign", [0.2, 0.5, 0.25])
def test_balanced_init_signs_column_sums_and_radius(cls, sign) -> None:
    # f = 0.2, 0.5, 0.25 of 20: every neuron's recurrent input sums to 0 (exact balance), the
    # spectral radius is the free layer's (the recipe by hand: tests/functional/test_dale.py).
    free = cls(6, 20, seed=5)
    dale = cls(6, 20, seed=5, force_dale_law=True, recurrent_sign=sign)
    rs = dale.recurrent_sign
    assert int((rs < 0).sum()) == round(sign * 20)
    w = dale.recurrent_weights.detach()
    _assert_rows_signed(w, rs)
    torch.testing.assert_close(w.sum(0), torch.zeros(20), atol=1e-5, rtol=0)
    assert spectral_radius(w) == pytest.approx(spectral_radius(free.recurrent_weights), rel=1e-5)
    # stated init: raw |W_rec| ~ U(0, 1/sqrt(N)) for the free layer, bias 0
    assert free.recurrent_weights.abs().max() <= 20**-0.5
    assert not dale.bias.any()


def test_forward_sign_rows_are_balanced_too() -> None:
    # a downstream layer receives the upstream signs as forward_sign: its input matrix gets
    # the same rule (1 inhibitory input of 5: f = 0.2): each neuron's input sums to 0 and has
    # the free layer's input variance (exactly: the scale factor is computed from the draw)
    fs = torch.tensor([1.0, -1.0, 1.0, 1.0, 1.0])
    free = LIFLayer(5, 8, seed=2)
    signed = LIFLayer(5, 8, seed=2, forward_sign=fs)
    w = signed.forward_weights.detach()
    _assert_rows_signed(w, fs)
    torch.testing.assert_close(w.sum(0), torch.zeros(8), atol=1e-6, rtol=0)
    ref = (free.forward_weights.detach() ** 2).sum(0).mean()
    torch.testing.assert_close(_input_variance(w), ref)
    # all-excitatory inputs (f = 0) cannot be balanced: left as drawn
    ones = LIFLayer(5, 8, seed=2, forward_sign=torch.ones(5))
    assert torch.equal(ones.forward_weights, free.forward_weights.abs())


@pytest.mark.parametrize("n", [128, 512])
def test_balanced_init_zero_expected_recurrent_input_per_neuron(n: int) -> None:
    # Neuron j's recurrent input when every presynaptic neuron fires at the same rate is
    # proportional to its column sum: 0 for every neuron, not only on average. Split by
    # sign, the excitatory and inhibitory parts cancel; unbalanced 80/20 (signs only) the
    # column sums would be (1 - 2f) E|W| (N - 1) ~ 0.3 sqrt(N) ~ 3.4 at N = 128.
    layer = LIFLayer(2, n, force_dale_law=True, seed=3)
    w = layer.recurrent_weights.detach().double()
    inh = layer.recurrent_sign < 0
    e_part, i_part = w[~inh].sum(0), w[inh].sum(0)
    assert (e_part > 0).all() and (i_part < 0).all()
    torch.testing.assert_close(
        e_part + i_part, torch.zeros(n, dtype=torch.float64), atol=1e-5, rtol=0
    )
    assert int(inh.sum()) == round(0.2 * n)


@pytest.mark.parametrize("n", [128, 512])
def test_balanced_init_same_spectral_radius_and_input_variance_as_without_dale(n: int) -> None:
    # Same layer config and seed with and without Dale: the spectral radius is the same (the
    # Dale matrix is scaled to it; ~0.6 = sqrt(1/3), the circular law for U(-k, k), k =
    # 1/sqrt(N)), for several seeds. Each neuron's input variance, sum_i Var(W_ij), is the
    # free matrix's up to a factor: measured 0.48-0.91 at N = 128 (12 seeds), 0.78-0.89 at
    # N = 512 (4 seeds). The zero diagonal of a balanced matrix whose rows have nonzero means
    # shifts the spectrum outwards, so matching the radius leaves the variance lower, less so
    # as N grows. The second moment is not kept: a Dale synapse's mean carries most of it.
    # Without the column balance (rows balanced in expectation only) the radius is off by
    # tens of percent and grows with N: the outliers of Rajan & Abbott (2006).
    mask = 1 - torch.eye(n)
    ratios = []
    for s in range(3 if n == 128 else 2):
        free = LIFLayer(2, n, seed=s).recurrent_weights.detach()
        dale = LIFLayer(2, n, force_dale_law=True, seed=s).recurrent_weights.detach()
        r_free = spectral_radius(free)
        assert 0.5 < r_free < 0.7
        assert spectral_radius(dale) == pytest.approx(r_free, rel=1e-4)
        ratios.append(float(_input_variance(dale, mask) / _input_variance(free, mask)))
    assert 0.4 < min(ratios) and max(ratios) < 1.05
    assert sum(ratios) / len(ratios) > (0.6 if n == 128 else 0.75)


def test_balanced_80_20_layer_does_not_saturate() -> None:
    # 128 LIF neurons, tau_m 10 ms, dt 1 ms, random input: the unbalanced 80/20 layer fired at
    # every step (rate 1.0); balanced, the rate is that of the unconstrained layer (~0.05).
    g = torch.Generator().manual_seed(100)
    x = torch.randn(300, 4, 4, generator=g)
    rates = {}
    for dale in (False, True):
        layer = LIFLayer(4, 128, tau_m=10e-3, force_dale_law=dale, seed=0)
        with torch.no_grad():
            z, _ = layer(x, layer.initial_state(4))
        rates[dale] = z[100:].mean().item()
    assert 0 < rates[True] < 0.2
    assert rates[True] == pytest.approx(rates[False], rel=0.5)


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


def test_mask_check_works_inside_a_parent_module() -> None:
    # prefixed keys (a layer inside a backbone): the old true mask loads, a hostile one fails
    def net(seed: int) -> torch.nn.ModuleDict:
        return torch.nn.ModuleDict({"lif0": LIFLayer(3, 5, force_dale_law=True, seed=seed)})

    src = net(0)
    old = dict(src.state_dict(), **{"lif0.rec_mask": 1.0 - torch.eye(5)})
    dst = net(1)
    dst.load_state_dict(old)
    assert torch.equal(dst["lif0"].recurrent_weights, src["lif0"].recurrent_weights)
    old["lif0.rec_mask"] = -(1.0 - torch.eye(5))
    with pytest.raises(UserError, match="lif0.rec_mask"):
        net(2).load_state_dict(old)
