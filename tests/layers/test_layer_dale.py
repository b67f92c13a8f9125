"""Hard Dale's law on the layers: by construction, after optimizers and hostile loads."""

from __future__ import annotations

import pytest
import torch

from snrl.errors import UserError
from snrl.functional.dale import balance_scale
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


@pytest.mark.parametrize("cls", SPIKING)
@pytest.mark.parametrize(
    ("sign", "a", "b"), [(0.2, 0.5, 2.0), (0.5, 1.0, 1.0), (0.25, 3**-0.5, 3**0.5)]
)
def test_balanced_init_scales_excitatory_and_inhibitory_rows_by_hand(cls, sign, a, b) -> None:
    # f = 0.2: (1 - f) a = f b and (1 - f) a^2 + f b^2 = 1 give a = 1/2, b = 2; f = 0.5 is
    # the unscaled matrix; f = 0.25 (5 of 20): a = sqrt(1/3), b = sqrt(3).
    free = cls(6, 20, seed=5)
    dale = cls(6, 20, seed=5, force_dale_law=True, recurrent_sign=sign)
    rs = dale.recurrent_sign
    assert int((rs < 0).sum()) == round(sign * 20)
    expected = free.recurrent_weights.abs() * torch.where(rs < 0, b, a)[:, None]
    torch.testing.assert_close(dale.recurrent_weights.abs(), expected)
    # stated init: raw |W_rec| ~ U(0, 1/sqrt(N)) before the scale, bias 0
    assert free.recurrent_weights.abs().max() <= 20**-0.5
    assert not dale.bias.any()


def test_forward_sign_rows_are_balanced_too() -> None:
    # a downstream layer receives the upstream signs as forward_sign: its input rows get the
    # same rule (here 1 inhibitory input of 5: f = 0.2, a = 1/2, b = 2)
    fs = torch.tensor([1.0, -1.0, 1.0, 1.0, 1.0])
    free = LIFLayer(5, 8, seed=2)
    signed = LIFLayer(5, 8, seed=2, forward_sign=fs)
    scale = torch.tensor([0.5, 2.0, 0.5, 0.5, 0.5])[:, None]
    torch.testing.assert_close(signed.forward_weights.abs(), free.forward_weights.abs() * scale)
    # all-excitatory inputs (f = 0) cannot be balanced: left as drawn
    ones = LIFLayer(5, 8, seed=2, forward_sign=torch.ones(5))
    assert torch.equal(ones.forward_weights, free.forward_weights.abs())


def test_balanced_init_zero_expected_recurrent_input_per_neuron() -> None:
    # Neuron j's recurrent input when every presynaptic neuron fires at the same rate is
    # proportional to its column sum. Over 20 seeds x 300 neurons (6000 columns) the mean
    # column sum has standard error std / sqrt(6000) (~0.004 here); balanced, its
    # expectation is 0, so it must lie within 4 standard errors. Unbalanced 80/20 it would
    # be (1 - 2f) E|W| (N - 1) = 0.6 * sqrt(N) / 2 ~ 5.2, over a thousand standard errors.
    sums = torch.cat(
        [
            LIFLayer(2, 300, force_dale_law=True, seed=s).recurrent_weights.detach().sum(0)
            for s in range(20)
        ]
    ).double()
    stderr = sums.std() / sums.numel() ** 0.5
    assert abs(sums.mean()) < 4 * stderr
    assert stderr < 0.01


def test_balanced_init_same_input_variance_and_spectral_radius_as_without_dale() -> None:
    # Input variance of neuron j for unit-variance independent presynaptic activity is
    # sum_i W_ij^2: its mean over 400 neurons x 10 seeds must match the unconstrained
    # matrix's to 3 % (per-neuron sums of 399 terms fluctuate by ~4 %, the mean of 4000 by
    # ~0.1 %). The spectral radius: the bulk is the same (same second moment), while the
    # rank-one mean part, nilpotent once balanced, moves the largest eigenvalue by ~0.1 from
    # seed to seed, so the mean over 10 seeds is held to 25 % (about 4 standard errors).
    # Without the balance (signs only) the radius is ~ 0.3 sqrt(N) = 6: the test would fail.
    def radius(w: torch.Tensor) -> float:
        return torch.linalg.eigvals(w.double()).abs().max().item()

    free_var, dale_var, free_r, dale_r, unbalanced_r = [], [], [], [], []
    for s in range(10):
        free = LIFLayer(2, 400, seed=s).recurrent_weights.detach()
        layer = LIFLayer(2, 400, force_dale_law=True, seed=s)
        dale = layer.recurrent_weights.detach()
        free_var.append((free**2).sum(0).mean())
        dale_var.append((dale**2).sum(0).mean())
        free_r.append(radius(free))
        dale_r.append(radius(dale))
        if s < 2:
            unbalanced_r.append(radius(dale / balance_scale(layer.recurrent_sign)[:, None]))
    assert sum(dale_var) / sum(free_var) == pytest.approx(1.0, rel=0.03)
    assert sum(dale_r) / sum(free_r) == pytest.approx(1.0, rel=0.25)
    assert min(unbalanced_r) > 5 * max(free_r)


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
