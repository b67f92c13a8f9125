"""load_config / config_to_dict / config_from_dict with a frozen keyword-only dataclass."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Literal

import pytest

from snrl.config import (
    MAX_INT,
    check_values,
    config_from_dict,
    config_to_dict,
    load_config,
    parse_set,
    unknown_key_error,
)
from snrl.errors import UserError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cfg:
    """A config like PPOConfig."""

    env_id: str = "CartPole-v1"
    """Gymnasium id."""
    total_steps: int = 1000
    """Env steps."""
    learning_rate: float = 3e-4
    """Adam step size."""
    dale: bool = False
    """Dale's law."""
    target_kl: float | None = None
    """KL stop."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Layer widths."""
    backbone: Literal["lif", "mlp"] = "lif"
    """Backbone name."""
    log_dir: pathlib.Path | None = None
    """Where to log."""

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Checked(Cfg):
    """Cfg whose __post_init__ checks every value (as the algorithms' configs do)."""

    extra: dict = dataclasses.field(default_factory=dict)
    """Free-form options."""

    def __post_init__(self):
        check_values(self)
        super().__post_init__()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Required:
    """A config with a required field."""

    env_id: str
    seed: int = 0


def test_defaults():
    assert load_config(Cfg) == Cfg()


@pytest.mark.parametrize(
    ("item", "field", "expected"),
    [
        ("total_steps=5000", "total_steps", 5000),
        ("total_steps=100_000", "total_steps", 100_000),
        ("total_steps=1e6", "total_steps", 1_000_000),
        ("learning_rate=1e-3", "learning_rate", 1e-3),
        ("learning_rate = 2", "learning_rate", 2.0),
        ("dale=true", "dale", True),
        ("dale=TRUE", "dale", True),
        ("dale=1", "dale", True),
        ("dale=0", "dale", False),
        ("dale=false", "dale", False),
        ("target_kl=none", "target_kl", None),
        ("target_kl=None", "target_kl", None),
        ("target_kl=0.02", "target_kl", 0.02),
        ("hidden_sizes=128,32", "hidden_sizes", (128, 32)),
        ("hidden_sizes=[8, 4, 2]", "hidden_sizes", (8, 4, 2)),
        ("hidden_sizes=16", "hidden_sizes", (16,)),
        ("hidden_sizes=", "hidden_sizes", ()),
        ("backbone=mlp", "backbone", "mlp"),
        ("env_id=LunarLander-v3", "env_id", "LunarLander-v3"),
        ("env_id=a=b", "env_id", "a=b"),  # split at the first '='
        ("log_dir=runs/x", "log_dir", pathlib.Path("runs/x")),
    ],
)
def test_set_coercion(item, field, expected):
    cfg = load_config(Cfg, sets=[item])
    value = getattr(cfg, field)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("item", "pattern"),
    [
        (
            "total_steps=abc",
            r"bad value 'abc' for config key 'total_steps' in --set \(expected int\)",
        ),
        ("total_steps=1.5", r"'1.5' for config key 'total_steps'"),
        ("learning_rate=fast", r"'fast' for config key 'learning_rate' .*expected float"),
        ("dale=maybe", r"'maybe' for config key 'dale' .*expected bool \(true/false/1/0\)"),
        ("target_kl=x", r"'x' for config key 'target_kl' .*expected float or none"),
        ("hidden_sizes=64,a", r"'64,a' for config key 'hidden_sizes' .*comma-separated ints"),
        ("backbone=gru", r"'gru' for config key 'backbone' .*one of 'lif', 'mlp'"),
    ],
)
def test_set_bad_values(item, pattern):
    with pytest.raises(UserError, match=pattern):
        load_config(Cfg, sets=[item])


def test_unknown_key_suggests():
    with pytest.raises(
        UserError,
        match=r"unknown config key 'learning_rat' in --set \(did you "
        r"mean 'learning_rate'\? valid keys: backbone, dale, env_id",
    ):
        load_config(Cfg, sets=["learning_rat=1"])
    with pytest.raises(UserError, match=r"unknown config key 'zzz' in --set \(valid keys:"):
        load_config(Cfg, sets=["zzz=1"])


@pytest.mark.parametrize("item", ["novalue", "=3", ""])
def test_set_without_key_value(item):
    with pytest.raises(UserError, match=r"bad --set item .* \(use key=value"):
        load_config(Cfg, sets=[item])


def test_parse_set():
    assert parse_set(" lr = 3e-4 ") == ("lr", "3e-4")


def test_post_init_error_propagates():
    with pytest.raises(ValueError, match="learning_rate must be > 0, got -1.0") as info:
        load_config(Cfg, sets=["learning_rate=-1"])
    assert not isinstance(info.value, UserError)


def test_toml_and_precedence(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'env_id = "Acrobot-v1"\ntotal_steps = 20000\nlearning_rate = 1\n'
        "hidden_sizes = [32, 16]\ndale = true\n"
    )
    cfg = load_config(
        Cfg, toml_path=path, base={"total_steps": 7, "backbone": "mlp"}, sets=["total_steps=9"]
    )
    assert cfg == Cfg(
        env_id="Acrobot-v1",
        total_steps=9,
        learning_rate=1.0,
        hidden_sizes=(32, 16),
        dale=True,
        backbone="mlp",
    )
    assert type(cfg.learning_rate) is float  # TOML integer accepted for a float field
    assert load_config(Cfg, toml_path=path, base={"backbone": "mlp"}).total_steps == 20000


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("lr = 1\n", r"unknown config key 'lr' in .*c.toml"),
        ('dale = "yes-ish"\n', r"bad value 'yes-ish' for config key 'dale' in .*c.toml"),
        ("total_steps = 1.5\n", r"bad value 1.5 for config key 'total_steps'"),
        ("env_id = 3\n", r"bad value 3 for config key 'env_id' .*expected str"),
        ("hidden_sizes = [1, 2.5]\n", r"config key 'hidden_sizes'"),
        ("[ppo]\nlr = 1\n", r"unknown config key 'ppo'"),
        ("total_steps = \n", r"is not valid TOML"),
    ],
)
def test_toml_errors(tmp_path, text, pattern):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=pattern):
        load_config(Cfg, toml_path=path)


def test_toml_missing_file(tmp_path):
    with pytest.raises(UserError, match=r"config file .*nope.toml does not exist"):
        load_config(Cfg, toml_path=tmp_path / "nope.toml")
    with pytest.raises(UserError, match="is a directory"):
        load_config(Cfg, toml_path=tmp_path)


def test_base_is_checked():
    with pytest.raises(UserError, match="unknown config key 'nope' in the base config"):
        load_config(Cfg, base={"nope": 1})


def test_required_field():
    with pytest.raises(UserError, match=r"missing required config key\(s\) env_id"):
        load_config(Required)
    assert load_config(Required, sets=["env_id=X"]) == Required(env_id="X")


def test_dict_round_trip_through_json():
    cfg = Cfg(total_steps=5, hidden_sizes=(3, 2), target_kl=0.1, log_dir=pathlib.Path("a/b"))
    d = json.loads(json.dumps(config_to_dict(cfg)))
    assert d["hidden_sizes"] == [3, 2] and d["log_dir"] == "a/b"
    assert config_from_dict(Cfg, d) == cfg
    del d["total_steps"]  # absent keys take the defaults
    assert config_from_dict(Cfg, d).total_steps == 1000


def test_from_dict_is_strict():
    with pytest.raises(UserError, match="unknown config key 'extra' in the saved config"):
        config_from_dict(Cfg, {"extra": 1})
    with pytest.raises(UserError, match="bad value 'x' for config key 'total_steps'"):
        config_from_dict(Cfg, {"total_steps": "x"})


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"learning_rate": "0.1"}, r"learning_rate='0.1' is a str \(pass float\)"),
        ({"total_steps": 1.5}, r"total_steps=1.5 is a float \(pass int\)"),
        ({"total_steps": True}, r"total_steps=True is a bool"),
        ({"dale": "no"}, r"dale='no' is a str \(pass bool"),
        ({"dale": 0}, r"dale=0 is a int"),
        ({"target_kl": "none"}, r"target_kl='none' is a str \(pass float or none\)"),
        ({"hidden_sizes": (64, "64")}, r"hidden_sizes=\(64, '64'\)"),
        ({"backbone": "gru"}, r"backbone='gru' is a str \(pass one of 'lif', 'mlp'\)"),
        ({"env_id": 3}, r"env_id=3 is a int \(pass str\)"),
        ({"learning_rate": float("inf")}, r"learning_rate=inf is not finite"),
        ({"target_kl": float("nan")}, r"target_kl=nan is not finite"),
        ({"extra": {"a": [1.0, float("-inf")]}}, r"extra\.a\[1\]=-inf is not finite"),
        ({"total_steps": MAX_INT + 1}, r"total_steps=9007199254740993 is beyond"),
        ({"hidden_sizes": (1, -(10**30))}, r"hidden_sizes\[1\]=-10{30} is beyond"),
    ],
)
def test_check_values_refuses(kwargs, pattern):
    with pytest.raises(UserError, match=pattern):
        Checked(**kwargs)


def test_check_values_accepts_what_fits():
    cfg = Checked(learning_rate=2, total_steps=MAX_INT, target_kl=None, extra={"k": 1.5})
    assert cfg.learning_rate == 2 and cfg.total_steps == MAX_INT
    import numpy as np

    assert Checked(total_steps=np.int64(5), dale=np.bool_(True)).total_steps == 5


@pytest.mark.parametrize("item", ["learning_rate=inf", "learning_rate=nan", "total_steps=1e300"])
def test_set_non_finite_or_huge_refused(item):
    with pytest.raises(UserError, match="config key"):
        load_config(Checked, sets=[item])


def test_toml_integer_too_large_for_any_field(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("learning_rate = " + "9" * 400 + "\n")
    with pytest.raises(UserError, match=r"config key 'learning_rate' .*expected float"):
        load_config(Checked, toml_path=path)
    path.write_text("total_steps = " + "9" * 400 + "\n")
    with pytest.raises(UserError, match=r"config key total_steps=9+ is beyond"):
        load_config(Checked, toml_path=path)


def test_toml_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('env_id = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(UserError, match=r"config file .*latin1.toml is not UTF-8 text \(byte 13"):
        load_config(Cfg, toml_path=path)


def test_unknown_key_error_names_what():
    e = unknown_key_error("hiden_size", ["hidden_size", "lr"], "snrl.PPO(...)", what="PPO option")
    assert str(e).startswith(
        "unknown PPO option 'hiden_size' in snrl.PPO(...) (did you mean 'hidden_size'?"
    )


def test_merge_later_layer_wins_and_errors_name_their_layer():
    from snrl.config import Layer, build, merge, sets_layer

    layers = [
        Layer.of("the base config", {"total_steps": "5", "learning_rate": 0.5}),
        Layer.of("snrl.X(...)", {"total_steps": 7}, typed=True),
        sets_layer(["learning_rate=0.25"]),
    ]
    assert merge(Cfg, layers) == {"total_steps": 7, "learning_rate": 0.25}
    assert build(Checked, merge(Checked, layers)) == Checked(total_steps=7, learning_rate=0.25)
    with pytest.raises(UserError, match=r"bad value 'x' for config key 'total_steps' in --steps"):
        merge(Cfg, [Layer("--steps", (("total_steps", "x"),))])
    with pytest.raises(UserError, match=r"unknown X option 'nope' in snrl.X\(...\)"):
        merge(Cfg, [Layer.of("snrl.X(...)", {"nope": 1}, typed=True, what="X option")])


def test_a_typed_layer_is_used_as_given_and_validated_by_the_config():
    """Keywords are not parsed from text: lr="0.1" is refused by the config's own check."""
    from snrl.config import Layer, build, merge

    typed = [Layer.of("snrl.X(...)", {"learning_rate": "0.1"}, typed=True)]
    assert merge(Checked, typed) == {"learning_rate": "0.1"}
    with pytest.raises(UserError, match=r"learning_rate='0.1' is a str \(pass float\)"):
        build(Checked, merge(Checked, typed))
