"""The neuron parameter objects: one frozen, validated object per model, taken by the layers
as ``params=`` or as keywords (the same layer either way), passed unchanged through the
backbone and the factory."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
import torch

from snrl.config import NEURON_DEFAULTS, config_table
from snrl.functional.surrogate import Surrogate
from snrl.layers import (
    ALIFLayer,
    ALIFParameters,
    LIFLayer,
    LIFParameters,
    LILayer,
    LIParameters,
    SpyLIFLayer,
    SpyLIFParameters,
)
from snrl.networks.factory import build_backbone
from snrl.networks.spiking import SpikingBackbone

PAIRS = [
    (LIFLayer, LIFParameters),
    (ALIFLayer, ALIFParameters),
    (SpyLIFLayer, SpyLIFParameters),
    (LILayer, LIParameters),
]
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_each_model_adds_only_its_own_fields():
    li = ["dt", "tau_m", "hh_init", "hh_init_mu", "hh_init_std", "learn_tau"]
    assert _names(LIParameters) == li
    assert _names(LIFParameters) == [*li, "threshold", "reset", "spike_grad", "noise_std"]
    assert _names(ALIFParameters) == [*_names(LIFParameters), "tau_a", "beta"]
    assert _names(SpyLIFParameters) == [*_names(LIFParameters), "tau_syn"]
    assert issubclass(ALIFParameters, LIFParameters) and issubclass(LIFParameters, LIParameters)


@pytest.mark.parametrize("cls", [LIParameters, LIFParameters, ALIFParameters, SpyLIFParameters])
def test_defaults_come_from_the_one_table_and_the_object_is_frozen(cls):
    p = cls()
    for f in dataclasses.fields(cls):
        if f.name in NEURON_DEFAULTS:
            assert getattr(p, f.name) == NEURON_DEFAULTS[f.name], f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.dt = 2e-3  # type: ignore[misc]
    with pytest.raises(TypeError):
        cls(1e-3)  # keyword-only


@pytest.mark.parametrize(
    ("cls", "kw", "match"),
    [
        (LIParameters, {"dt": 0.0}, r"dt=0\.0 is not positive"),
        (LIParameters, {"tau_m": -0.02}, r"tau_m=-0\.02 is not positive"),
        (LIParameters, {"tau_m": float("inf")}, "tau_m=inf"),
        (LIParameters, {"tau_m": torch.tensor([0.02, -0.01])}, r"tau_m holds -0\.01"),
        (LIParameters, {"tau_m": torch.ones(2, 2)}, r"tau_m has shape \(2, 2\)"),
        (LIParameters, {"hh_init": "ones"}, "hh_init='ones'.*zeros, random"),
        (LIParameters, {"hh_init_std": -1.0}, r"hh_init_std=-1\.0 is negative"),
        (LIParameters, {"learn_tau": "yes"}, "learn_tau='yes'"),
        (LIFParameters, {"threshold": 0.0}, r"threshold=0\.0 is not positive"),
        (LIFParameters, {"threshold": "1"}, "threshold='1'"),
        (LIFParameters, {"reset": "soft"}, "reset='soft'.*subtract, zero"),
        (LIFParameters, {"spike_grad": "atan"}, "spike_grad='atan' is not callable"),
        (ALIFParameters, {"tau_a": 0.0}, r"tau_a=0\.0"),
        (ALIFParameters, {"beta": -0.5}, r"beta=-0\.5 is negative"),
        (SpyLIFParameters, {"tau_syn": -1.0}, r"tau_syn=-1\.0"),
    ],
)
def test_bad_values_are_refused_with_the_value_and_the_range(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls(**kw)


def test_values_are_normalized_and_a_tensor_is_copied():
    p = LIFParameters(threshold=1, dt=1, learn_tau=False)
    assert type(p.threshold) is float and type(p.dt) is float
    assert p.spike_grad == Surrogate("fast_sigmoid", 10.0)  # None: the default surrogate
    tau = torch.tensor([0.01, 0.02], dtype=torch.float64)
    q = LIFParameters(tau_m=tau)
    tau[0] = 5.0  # the caller's tensor changes; the frozen object does not
    assert q.tau_m.dtype == torch.float32 and q.tau_m.tolist() == pytest.approx([0.01, 0.02])


def test_equality_and_hash_take_tensors_by_value():
    a = ALIFParameters(tau_m=torch.tensor([0.01, 0.02]), beta=1.0)
    b = ALIFParameters(tau_m=torch.tensor([0.01, 0.02]), beta=1.0)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != ALIFParameters(tau_m=torch.tensor([0.01, 0.03]), beta=1.0)
    assert a != ALIFParameters(tau_m=0.01, beta=1.0)
    assert LIFParameters() != ALIFParameters() and LIParameters() == LIParameters()
    assert dataclasses.replace(a, beta=2.0).beta == 2.0


@pytest.mark.parametrize(("layer_cls", "params_cls"), PAIRS)
def test_params_and_keywords_build_the_same_layer(layer_cls, params_cls):
    kw = {"tau_m": 0.015, "dt": 2e-3, "hh_init": "random", "hh_init_std": 0.3}
    if params_cls is not LIParameters:
        kw["threshold"] = 0.6
    p = params_cls(**kw)
    wiring = dict(force_dale_law=True, seed=3, hh_init_seed=4)
    a = layer_cls(5, 12, params=p, **wiring)
    b = layer_cls(5, 12, **kw, **wiring)
    assert a.params is p and b.params == p
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    x = torch.randn(20, 3, 5, generator=torch.Generator().manual_seed(0)) * 2
    ra, rb = a.run(x, a.initial_state(3)), b.run(x, b.initial_state(3))
    assert torch.equal(ra.out, rb.out) and torch.equal(ra.v, rb.v)
    if params_cls is not LIParameters:
        assert 0 < float(ra.out.detach().mean()) < 1  # it spikes, and not always


def test_the_layer_reads_its_neuron_values_from_the_object():
    p = ALIFParameters(threshold=0.8, beta=0.5, reset="zero", hh_init="learned", hh_init_mu=0.2)
    layer = ALIFLayer(3, 4, params=p)
    assert (layer.threshold, layer.beta, layer.reset, layer.hh_init) == (
        0.8,
        0.5,
        "zero",
        "learned",
    )
    assert layer.spike_grad is p.spike_grad and layer.hh_init_mu == 0.2
    layer.dt = 3e-3  # a new time step: a new object, checked; the given one is unchanged
    assert layer.params.dt == 3e-3 and p.dt == NEURON_DEFAULTS["dt"]
    assert layer.params.beta == 0.5
    with pytest.raises(ValueError, match="dt=0"):
        layer.dt = 0.0


def test_wrong_ways_to_give_the_parameters():
    with pytest.raises(ValueError, match="params= and the neuron keywords tau_m"):
        LIFLayer(3, 4, params=LIFParameters(), tau_m=0.01)
    with pytest.raises(ValueError, match="LIFLayer takes LIFParameters, got params=ALIFParameters"):
        LIFLayer(3, 4, params=ALIFParameters())
    with pytest.raises(ValueError, match="LILayer takes LIParameters"):
        LILayer(3, 4, params=LIFParameters())
    with pytest.raises(TypeError, match="unexpected keyword argument 'tau_a'"):
        LIFLayer(3, 4, tau_a=0.1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'threshold'"):
        LILayer(3, 4, threshold=0.5)


def test_the_signature_shows_every_keyword_with_its_default():
    """The keyword constructor of docs/layers.md: each layer's signature lists its wiring
    and the fields of its parameter object, with the defaults the layer uses."""
    lif = inspect.signature(LIFLayer).parameters
    want = {
        "use_recurrent_connection": True,
        "use_rec_eye_mask": True,
        "dt": 1e-3,
        "tau_m": 20e-3,
        "threshold": 1.0,
        "reset": "subtract",
        "spike_grad": None,
        "noise_std": 0.0,
        "force_dale_law": False,
        "forward_sign": None,
        "recurrent_sign": 0.2,
        "hh_init": "zeros",
        "hh_init_mu": 0.0,
        "hh_init_std": 1.0,
        "hh_init_seed": None,
        "learn_tau": False,
        "seed": None,
        "params": None,
    }
    assert {k: p.default for k, p in lif.items() if k in want} == want
    assert set(lif) == {"input_size", "output_size", *want}
    alif = inspect.signature(ALIFLayer).parameters
    assert alif["tau_a"].default == 0.2 and alif["beta"].default == 1.8
    assert inspect.signature(SpyLIFLayer).parameters["tau_syn"].default == 5e-3
    li = inspect.signature(LILayer).parameters
    assert "threshold" not in li and li["use_recurrent_connection"].default is False
    assert LILayer(3, 4).weight_rec is None and LIFLayer(3, 4).weight_rec is not None
    # an instance's own signature is its forward call, not the constructor's
    assert "input_size" not in inspect.signature(LIFLayer(3, 4)).parameters


@pytest.mark.parametrize(
    ("layer", "keys"),
    [
        (
            LIFLayer(3, 4, force_dale_law=True, forward_sign=torch.ones(3)),
            ["weight_in", "bias", "weight_rec", "recurrent_sign", "forward_sign", "log_tau_m"],
        ),
        (
            ALIFLayer(3, 4, hh_init="learned", learn_tau=True),
            ["weight_in", "bias", "weight_rec", "log_tau_m", "h0", "log_tau_a"],
        ),
        (
            SpyLIFLayer(3, 4, use_recurrent_connection=False),
            ["weight_in", "bias", "log_tau_m", "log_tau_syn"],
        ),
        (LILayer(3, 4), ["weight_in", "bias", "log_tau_m"]),
    ],
)
def test_state_dict_keys_and_order_are_those_of_saved_checkpoints(layer, keys):
    """Checkpoints written before the parameter objects must load: the same names, in the
    same order (the order of parameters is also the optimizer's)."""
    assert list(layer.state_dict()) == keys


def test_the_backbone_and_the_factory_pass_one_object_unchanged():
    p = ALIFParameters(tau_m=0.01, tau_a=0.1, dt=2e-3)
    net = SpikingBackbone(3, [6, 5], 2, backbone="alif", params=p, seed=0)
    assert all(layer.params is p for layer in net.spiking_layers) and net.params is p
    ro = net.readout.params
    assert (
        type(ro) is LIParameters and ro.dt == 2e-3 and ro.tau_m == NEURON_DEFAULTS["readout_tau_m"]
    )
    made = build_backbone("alif", 3, 2, hidden_size=[6, 5], params=p, seed=0)
    assert all(layer.params is p for layer in made.spiking_layers)
    sa, sb = net.state_dict(), made.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    # the keywords of SpikingBackbone build the same object
    kw = SpikingBackbone(3, [6, 5], 2, backbone="alif", tau_m=0.01, tau_a=0.1, dt=2e-3, seed=0)
    assert kw.params == p


def test_the_factory_refuses_parameters_that_do_not_fit_the_backbone():
    with pytest.raises(ValueError, match="takes LIFParameters, got params=ALIFParameters"):
        build_backbone("lif", 3, 2, hidden_size=4, params=ALIFParameters())
    with pytest.raises(ValueError, match="backbone 'mlp' has no neurons"):
        build_backbone("mlp", 3, 2, hidden_size=4, params=LIFParameters())
    with pytest.raises(ValueError, match="hidden_size"):
        build_backbone("lif", 3, 2, hidden_size=[], params=LIFParameters())


def test_an_agent_config_builds_the_object_from_its_fields():
    from snrl.agents import PPOConfig

    cfg = PPOConfig(backbone="spylif", tau_m=0.03, dt=2e-3, hh_init="random", hidden_size=8)
    net = cfg.build_backbone(4, 2, seed=0)
    p = net.spiking_layers[0].params
    assert p == SpyLIFParameters(tau_m=0.03, dt=2e-3, hh_init="random")
    # readout_tau_m unset and no task to take a clock from: the clockless rule
    assert cfg.readout_tau_m is None
    assert net.readout.params.tau_m == PPOConfig.clockless_tau["readout_tau_m"]
    assert cfg.build_backbone(4, 2, seed=0).spiking_layers[0].params == p  # the same values
    assert PPOConfig(backbone="gru", hidden_size=8).build_backbone(4, 2, seed=0) is not None


def test_the_table_in_the_docs_is_the_code():
    """docs/layers.md carries the table of LIFParameters, generated by
    ``snrl.config.config_table`` (the defaults and the one-line docs of the fields), and
    names what the other models add or lack."""
    text = (DOCS / "layers.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- generated: config_table\(LIFParameters\) -->\n((?:\|.*\n)+)", text)
    assert m, "docs/layers.md has no table of LIFParameters"
    assert m.group(1) == config_table(LIFParameters)
    for cls in (ALIFParameters, SpyLIFParameters):
        for name in sorted(set(_names(cls)) - set(_names(LIFParameters))):
            assert f"`{name}`" in text, (cls.__name__, name)
