"""Building typed, frozen, keyword-only dataclass configs: one merge, one validation.

Every way to make a config goes through the same two steps: :func:`merge` takes
:class:`Layer` s in the order of precedence (later wins: the dataclass defaults, then e.g. a
tuned entry, a TOML file, CLI flags or keywords, ``--set`` items), checks each key and
converts each value of a text or TOML layer; :func:`build` then constructs the config once,
and its ``__post_init__`` is the one validation. :func:`load_config` (defaults < ``base`` <
file < ``--set``) and :func:`config_from_dict` (a saved config) are such merges;
:func:`snrl.zoo.configure` adds the tuned layer and is what both ``snrl train`` and
``snrl.PPO(env, **keywords)`` call.

Values of untyped layers are converted to the field's annotated type:

* ``int``: ``"3"``, ``"100_000"``, ``"1e6"`` (an integral float); ``float``: ``"3e-4"``;
* ``bool``: ``true/false/1/0/yes/no`` (any case);
* ``str``; ``pathlib.Path``;
* ``X | None``: ``"none"`` (any case) gives ``None``;
* ``tuple[int, ...]``: ``"64,64"`` (also ``"[64, 64]"``, ``"(64,64)"``, ``""`` for empty),
  ``tuple[int, float]`` (fixed length), ``list[...]``;
* ``Literal["a", "b"]``: one of the listed values.

TOML values are checked the same way (a TOML integer is accepted for a float field and an
array for a tuple field). Bad keys and values raise :class:`~snrl.errors.UserError`; the
dataclass's own ``__post_init__`` ValueErrors propagate unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import pathlib
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

from snrl.errors import MIGRATING, MigrationError, UserError
from snrl.io import MAX_DEPTH, check_depth, check_json_depth, load_json

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "FOREIGN_OPTIONS",
    "MAX_INT",
    "SAVED_KEY_DEFAULTS",
    "SAVED_KEY_RENAMES",
    "Layer",
    "add_set_flag",
    "build",
    "check_host",
    "check_values",
    "config_from_dict",
    "load_toml",
    "loads_toml",
    "config_to_dict",
    "file_layer",
    "load_config",
    "merge",
    "parse_set",
    "sets_layer",
    "unknown_key_error",
]

C = TypeVar("C")

#: Largest magnitude of an integer config value: exact in float64, JSON and numpy int64.
MAX_INT = 2**53

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class _BadValue(Exception):
    """Internal: a value does not fit a type."""


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("none" if a is type(None) else _type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is dict or tp is dict:
        return 'a table / JSON object with string keys, e.g. {"dt": 100}'
    if origin in (tuple, list):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return f"comma-separated {_type_name(args[0])}s, e.g. 64,64"
        if origin is list and args:
            return f"comma-separated {_type_name(args[0])}s"
        return f"{len(args)} comma-separated values ({', '.join(_type_name(a) for a in args)})"
    if tp is bool:
        return "bool (true/false/1/0)"
    return getattr(tp, "__name__", str(tp))


def _split_sequence(text: str) -> list[str]:
    text = text.strip()
    if len(text) >= 2 and text[0] + text[-1] in ("[]", "()"):
        text = text[1:-1].strip()
    if not text:
        return []
    return [part.strip() for part in text.split(",")]


def _convert(tp: Any, value: Any, from_string: bool) -> Any:
    """Convert ``value`` to ``tp``; raise _BadValue if it does not fit."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            if type(None) in args:
                return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, from_string)
            except _BadValue:
                continue
        raise _BadValue
    if origin is typing.Literal:
        for arg in args:
            if value == arg or (isinstance(value, str) and value.strip() == str(arg)):
                return arg
        raise _BadValue
    if origin is dict or tp is dict:  # env_kwargs: a TOML table, a dict, or JSON text
        if isinstance(value, str):
            try:
                value = load_json(value) if value.strip() else {}
            except UserError:  # nested too deeply: its own message
                raise
            except ValueError:
                raise _BadValue from None
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            return dict(value)
        raise _BadValue
    if origin in (tuple, list):
        if isinstance(value, str):
            items: list[Any] = _split_sequence(value)
            item_from_string = True
        elif isinstance(value, (list, tuple)):
            items = list(value)
            item_from_string = from_string
        else:
            raise _BadValue
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if args and len(items) != len(args):
                raise _BadValue
            item_types = list(args) if args else [Any] * len(items)
        else:
            item_types = [args[0] if args else Any] * len(items)
        converted = [_convert(t, v, item_from_string) for t, v in zip(item_types, items)]
        return tuple(converted) if origin is tuple else converted
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            low = value.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
        raise _BadValue
    if tp is int:
        if isinstance(value, bool):
            raise _BadValue
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                pass
            try:
                value = float(text)
            except ValueError:
                raise _BadValue from None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        raise _BadValue
    if tp is float:
        if isinstance(value, bool):
            raise _BadValue
        try:
            if isinstance(value, (int, float)):
                return float(value)
            if isinstance(value, str):
                return float(value.strip())
        except (ValueError, OverflowError):  # not a number, or an integer beyond float
            raise _BadValue from None
        raise _BadValue
    if tp is str:
        if isinstance(value, str):
            return value
        raise _BadValue
    if tp in (pathlib.Path, os.PathLike):
        if isinstance(value, (str, os.PathLike)):
            return pathlib.Path(value)
        raise _BadValue
    if isinstance(tp, type) and callable(getattr(tp, "from_config", None)):
        # a structured value that parses itself (snrl.Curriculum: a TOML [[curriculum.lesson]]
        # array of tables, a list, JSON text); its UserError names what is wrong
        return tp.from_config(value)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _BadValue
    return value  # an annotation we do not interpret: pass through


def _fields(cls: type) -> tuple[dict[str, dataclasses.Field], dict[str, Any]]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass type")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    return fields, hints


#: Option names of Stable-Baselines3 and huskarl-style DQNs that snrl spells otherwise, and
#: what to write instead (the error of such an unknown key says it; docs/migrating.md).
FOREIGN_OPTIONS: Mapping[str, str] = types.MappingProxyType(
    {
        "policy_kwargs": "Stable-Baselines3's policy_kwargs are options here: backbone=, "
        "hidden_size=, n_layers=, activation= (or policy=/critic= modules)",
        "learning_rate": "Stable-Baselines3's learning_rate is lr",
        "total_timesteps": "Stable-Baselines3's total_timesteps is total_steps",
        "clip_range": "Stable-Baselines3's clip_range is clip_coef",
        "verbose": "snrl prints a progress bar (learn(progress=False) for silence)",
        "tensorboard_log": "metrics go to metrics.csv of the run directory (run_dir=)",
        "exploration_fraction": "exploration is eps_start, eps_end, eps_decay_steps",
        "exploration_initial_eps": "Stable-Baselines3's exploration_initial_eps is eps_start",
        "exploration_final_eps": "Stable-Baselines3's exploration_final_eps is eps_end",
        "actions": "the actions come from the env's action space (pass the env first)",
        "nsteps": "huskarl's nsteps is n_step",
        "memsize": "huskarl's memsize is buffer_size",
        "target_update": "the target network follows target_update_interval (or tau)",
        "enable_double_dqn": "double Q-learning is double=True (the default)",
        "enable_dueling_network": 'a dueling head is dueling="avg" (or "max", "naive")',
    }
)


def unknown_key_error(
    key: str, valid: Iterable[str], source: str, *, what: str = "config key"
) -> UserError:
    """The error for an unknown ``key`` among ``valid`` names, with a "did you mean" hint, or
    with snrl's name when ``key`` is another library's (:data:`FOREIGN_OPTIONS`: then a
    :class:`~snrl.errors.MigrationError` pointing to docs/migrating.md).

    Args:
        key: The name the user wrote.
        valid: The names that exist.
        source: Where it was written (``"--set"``, a file name, ``"snrl.PPO(...)"``).
        what: What a key is called in the message.
    """
    valid = sorted(valid)
    if key in FOREIGN_OPTIONS:
        return MigrationError(
            f"unknown {what} {key!r} in {source} ({FOREIGN_OPTIONS[key]}; see {MIGRATING})"
        )
    close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return UserError(f"unknown {what} {key!r} in {source} ({hint}valid keys: {', '.join(valid)})")


@dataclasses.dataclass(frozen=True)
class Layer:
    """One source of config values, in the order of precedence (a later layer wins).

    ``items`` are ``(key, value)`` pairs. A ``typed`` layer (keywords of ``snrl.PPO(...)``, a
    config object) is used as given: its values are checked once, by the config's own
    validation (:func:`check_values` in ``__post_init__``). Other layers (a TOML file, ``--set``
    text, CLI flags, a tuned entry, a saved ``config.json``) are converted by the field types
    first (:func:`_convert`), naming ``source`` in the error of a value that does not fit.
    """

    source: str
    """Where the values come from, as the messages name it (``"--set"``, a file name ...)."""
    items: tuple[tuple[str, Any], ...] = ()
    """The ``(key, value)`` pairs, in order (a repeated key: the last wins)."""
    typed: bool = False
    """Whether the values are used as given (True) or converted by the field types."""
    what: str = "config key"
    """What a key is called in the message of an unknown one."""

    @classmethod
    def of(cls, source: str, values: Mapping[str, Any] | None, **kwargs: Any) -> Layer:
        """A layer of the ``values`` mapping (None: empty)."""
        return cls(source, tuple((values or {}).items()), **kwargs)


def file_layer(toml_path: str | os.PathLike | None) -> Layer:
    """The layer of a TOML file whose top-level keys are config keys (None: empty).

    Raises:
        UserError: A missing, unreadable, non-UTF-8 or invalid TOML file.
    """
    if toml_path is None:
        return Layer("no config file")
    path = pathlib.Path(toml_path)
    return Layer.of(str(path), load_toml(path, what="config file", flag="--config"))


def loads_toml(text: str) -> dict[str, Any]:
    """The TOML ``text`` as a dict (``tomllib``, or ``tomli`` on Python 3.10): for snrl's own
    files; a user's go through :func:`load_toml`."""
    return tomllib.loads(text)


def load_toml(path: str | os.PathLike, *, what: str, flag: str) -> dict[str, Any]:
    """A TOML file a user passes (``--config``, ``--space``), read as snrl reads every one:
    nested at most :data:`~snrl.io.MAX_DEPTH` levels.

    Args:
        path: The file.
        what: How messages name it (``"config file"``).
        flag: The flag that named it, for the hint (``"--config"``).

    Raises:
        UserError: A missing, non-UTF-8, invalid or too deeply nested file, or a directory.
        OSError: Any other failure to read it (the CLI names its cause and fix).
    """
    path = pathlib.Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist (check the {flag} path)") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path} is a directory (pass a .toml file)") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {path} is not valid TOML: {e} (fix the file)") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise UserError(
            f"{what} {path} nests more than {MAX_DEPTH} levels of tables and arrays "
            "(write a flatter file)"
        ) from None
    except UnicodeDecodeError as e:
        raise UserError(
            f"{what} {path} is not UTF-8 text (byte {e.start}: {e.reason}; save it as UTF-8)"
        ) from None
    check_depth(data, what=f"{what} {path}")
    return data


def add_set_flag(parser: Any, help: str | None = None) -> None:
    """Give an ``argparse`` parser the repeatable ``--set KEY=VALUE`` flag (a list, default
    empty) whose items :func:`sets_layer` reads."""
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help)


def sets_layer(sets: Iterable[str]) -> Layer:
    """The layer of ``--set key=value`` items (text, converted by the field types)."""
    return Layer("--set", tuple(parse_set(item) for item in sets))


def merge(cls: type, layers: Iterable[Layer]) -> dict[str, Any]:
    """The config values of ``layers`` merged by precedence (a later layer wins).

    Every key is checked against the fields of ``cls`` and every value of an untyped layer
    converted to its field's type; nothing is built (:func:`build` does that, once).

    Raises:
        UserError: An unknown key (with a close match) or a value that does not fit its
            field's type, naming the layer's source.
    """
    fields, hints = _fields(cls)
    values: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items:
            if key not in fields:
                raise unknown_key_error(key, fields, layer.source, what=layer.what)
            if layer.typed:  # checked by the config's own validation (check_values)
                values[key] = value
                continue
            tp = hints.get(key, Any)
            what = f"config key {key!r} in {layer.source}"
            if isinstance(value, str):  # JSON text (env_kwargs, curriculum), checked first
                check_json_depth(value, what=what)
            else:
                check_depth(value, what=what)
            try:
                values[key] = _convert(tp, value, False)
            except _BadValue:
                raise UserError(
                    f"bad value {value!r} for config key {key!r} in {layer.source} "
                    f"(expected {_type_name(tp)})"
                ) from None
    return values


def build(cls: type[C], values: Mapping[str, Any]) -> C:
    """``cls(**values)``: the one validation of a merged config (its ``__post_init__``).

    Raises:
        UserError: A required key without a value.
        ValueError: Whatever the dataclass's ``__post_init__`` raises.
    """
    fields, _ = _fields(cls)
    missing = [
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise UserError(
            f"missing required config key(s) {', '.join(missing)} "
            f"(set them in the TOML file or with --set {missing[0]}=...)"
        )
    return cls(**values)


def parse_set(item: str) -> tuple[str, str]:
    """Split one ``--set key=value`` item into ``(key, value)`` (both stripped).

    Raises:
        UserError: If there is no ``=`` or the key is empty.
    """
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"bad --set item {item!r} (use key=value, e.g. --set lr=3e-4)")
    return key.strip(), value.strip()


def load_config(
    cls: type[C],
    *,
    toml_path: str | os.PathLike | None = None,
    sets: Iterable[str] = (),
    base: Mapping[str, Any] | None = None,
) -> C:
    """Build a ``cls`` instance from defaults, ``base``, a TOML file and ``--set`` items.

    Args:
        cls: A dataclass type (typically frozen and keyword-only).
        toml_path: A TOML file whose top-level keys are field names.
        sets: ``"key=value"`` strings, converted by the field types.
        base: Field values applied before the TOML file (converted like the file's).

    Returns:
        The config.

    Raises:
        UserError: Missing/unparsable TOML file, unknown key (with a close match), bad
            value (naming key, value and expected type), missing required key.
        ValueError: Whatever the dataclass's ``__post_init__`` raises.
    """
    base_layer = Layer.of("the base config", base)
    return build(cls, merge(cls, [base_layer, file_layer(toml_path), sets_layer(sets)]))


def _jsonable(value: Any) -> Any:
    if callable(getattr(value, "to_config", None)):  # e.g. snrl.Curriculum -> list of dicts
        return _jsonable(value.to_config())
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The init fields of a dataclass config as a JSON-able dict (tuples become lists)."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"{cfg!r} is not a dataclass instance")
    return {f.name: _jsonable(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.init}


#: Keys that run files of snrl 0.1 (a run's ``config.json``, a checkpoint's config) spell
#: otherwise, and their names now. A saved run is data, not API: old runs stay loadable and
#: resumable, so :func:`config_from_dict`, and nothing else, reads these keys as the new ones
#: (keywords, TOML files and ``--set`` take only today's names).
SAVED_KEY_RENAMES: Mapping[str, str] = types.MappingProxyType(
    {"env_id": "env", "sim_steps": "substeps"}
)


#: Keys that run files written before they existed lack, and the value every such run had: a
#: default that is now resolved otherwise (``beta``: 20 under ``time_profile="biological"``)
#: must not change an old run's network when it is loaded or resumed.
SAVED_KEY_DEFAULTS: Mapping[str, Any] = types.MappingProxyType({"beta": 1.8})


def config_from_dict(cls: type[C], d: Mapping[str, Any]) -> C:
    """Rebuild a config from :func:`config_to_dict` output (e.g. a run's ``config.json``).

    Keys absent from ``d`` take the value such a file was written with
    (:data:`SAVED_KEY_DEFAULTS`), else the dataclass defaults; a key of an snrl 0.1 run file
    (:data:`SAVED_KEY_RENAMES`) is read as its name now.

    Raises:
        UserError: Unknown key, bad value, missing required key.
        ValueError: Whatever the dataclass's ``__post_init__`` raises.
    """
    fields, _ = _fields(cls)

    def name(key: str) -> str:
        new = SAVED_KEY_RENAMES.get(key)
        return new if key not in fields and new in fields else key

    items = tuple((name(k), v) for k, v in d.items())
    given = {k for k, _ in items}
    items += tuple((k, v) for k, v in SAVED_KEY_DEFAULTS.items() if k in fields and k not in given)
    return build(cls, merge(cls, [Layer("the saved config", items)]))


# ---------------------------------------------------------------- the one table of defaults
#: Defaults of the neuron and network parameters, the one source of truth: the layers
#: (snrl.layers), the backbones (snrl.networks) and the agent configs (snrl.agents) read them
#: from here. An agent config that needs another value declares it with :func:`override`,
#: which records why; docs/architecture.md shows the table generated by :func:`defaults_table`.
NEURON_DEFAULTS: Mapping[str, Any] = types.MappingProxyType(
    {
        "dt": 1e-3,
        "tau_m": 20e-3,
        "threshold": 1.0,
        "reset": "subtract",
        "force_dale_law": False,
        "recurrent_sign": 0.2,
        "hh_init": "zeros",
        "readout_tau_m": 20e-3,
        "tau_a": 200e-3,
        "beta": 1.8,
        "tau_syn": 5e-3,
        "noise_std": 0.0,
    }
)

#: What each entry of :data:`NEURON_DEFAULTS` means (units in seconds).
NEURON_DEFAULT_DOCS: Mapping[str, str] = types.MappingProxyType(
    {
        "dt": "simulation step, s",
        "tau_m": "membrane time constant of spiking layers, s",
        "threshold": "spike threshold",
        "reset": "reset after a spike: subtract or zero",
        "force_dale_law": "hard Dale's law (fixed ±1 sign per presynaptic neuron)",
        "recurrent_sign": "fraction of inhibitory neurons with Dale's law (80/20)",
        "hh_init": "initial hidden state: zeros, random, inputs, given or learned",
        "readout_tau_m": "membrane time constant of the leaky-integrator readout, s",
        "tau_a": "ALIF adaptation time constant, s",
        "beta": "ALIF adaptation strength",
        "tau_syn": "SpyLIF synaptic time constant, s",
        "noise_std": "std of the Gaussian current per spiking neuron and step (training mode)",
    }
)


def override(value: Any, why: str) -> Any:
    """A config field whose default departs from :data:`NEURON_DEFAULTS`, and why.

    Use as ``tau_m: float = override(10e-3, "measured: ...")`` in a config dataclass; the
    reason shows in the generated table of defaults.
    """
    return dataclasses.field(default=value, metadata={"override": why})


def defaults_table(*config_classes: type) -> str:
    """The Markdown table of :data:`NEURON_DEFAULTS` and each config class's value.

    A value a config overrides is bold, with its reason in the last column.
    """

    def fmt(v: Any) -> str:
        if isinstance(v, str):
            return f"`{v!r}`"
        return f"`{v:g}`" if isinstance(v, float) else f"`{v}`"

    names = [c.__name__ for c in config_classes]
    lines = [
        "| key | meaning | layers and backbones | " + " | ".join(names) + " | why it differs |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]
    for key, value in NEURON_DEFAULTS.items():
        cells: list[str] = []
        whys: dict[str, list[str]] = {}  # reason -> the classes that give it
        for cls in config_classes:
            field = {f.name: f for f in dataclasses.fields(cls)}.get(key)
            if field is None:
                cells.append("—")
                continue
            why = field.metadata.get("override")
            cells.append(f"**{fmt(field.default)}**" if why else fmt(field.default))
            if why:
                whys.setdefault(why, []).append(cls.__name__)
        reasons = "; ".join(f"{', '.join(names)}: {why}" for why, names in whys.items())
        lines.append(
            f"| `{key}` | {NEURON_DEFAULT_DOCS[key]} | {fmt(value)} | "
            + " | ".join(cells)
            + f" | {reasons} |"
        )
    return "\n".join(lines) + "\n"


def _fits(tp: Any, value: Any) -> bool:
    """Whether ``value`` already is of type ``tp`` (no conversion; an int is a float)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_fits(a, value) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return len(value) == len(args) and all(_fits(t, v) for t, v in zip(args, value))
        return not args or all(_fits(args[0], v) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    if tp is bool:
        return isinstance(value, (bool, np.bool_))
    if tp is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, bool
        )
    if tp in (pathlib.Path, os.PathLike):
        return isinstance(value, (str, os.PathLike))
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True  # an annotation we do not interpret


def _bad_number(value: Any, where: str) -> str | None:
    """Why a number anywhere inside ``value`` (whose name is ``where``) cannot be used, as
    ``"<where>[i].key=<number> <why> (<fix>)"``, or None. ``value`` nests at most
    :data:`~snrl.io.MAX_DEPTH` levels (checked first)."""
    if isinstance(value, (bool, np.bool_, str)):
        return None
    if isinstance(value, (int, np.integer)):
        ok = abs(int(value)) <= MAX_INT
        return None if ok else f"{where}={value!r} is beyond ±2**53 (pass a smaller integer)"
    if isinstance(value, (float, np.floating)):
        ok = math.isfinite(value)
        return None if ok else f"{where}={value!r} is not finite (pass a finite number)"
    if isinstance(value, (tuple, list)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"{where}.{k}", v) for k, v in value.items())
    else:
        return None
    return next((r for r in (_bad_number(v, w) for w, v in items) if r), None)


def check_values(cfg: Any) -> None:
    """Check every field of a dataclass config against its annotation, without converting.

    The one type check of a config, called by its ``__post_init__``: a ``str`` for a
    ``bool`` field (``force_dale_law="no"``) or a number field (``lr="0.1"``), a float for
    an int field (``seed=1.5``), a non-finite float anywhere (``nan``, ``inf``, also inside
    tuples, dicts and the lessons of a curriculum) and an integer beyond ``±MAX_INT`` (also
    there) are refused, as is a value nested deeper than :data:`~snrl.io.MAX_DEPTH` levels.
    An int is accepted where a float is expected. Strings are parsed only by
    :func:`load_config` (``--set``, TOML), never here.

    Raises:
        UserError: Naming the field, the value, its type and what is expected.
    """
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        if not f.init:
            continue
        value = getattr(cfg, f.name)
        tp = hints.get(f.name, Any)
        if not _fits(tp, value):
            raise UserError(
                f"config key {f.name}={value!r} is a {type(value).__name__} (pass {_type_name(tp)})"
            )
        if callable(getattr(value, "to_config", None)):  # a curriculum: its lessons' data
            value = value.to_config()
        check_depth(value, what=f"config key {f.name}")  # before anything recurses into it
        why = _bad_number(_jsonable(value), f.name)
        if why:
            raise UserError(f"config key {why}")


def check_host(host: Any) -> str:
    """The address a server binds (``--host`` of ``snrl serve-env`` and ``snrl dashboard``),
    refused when empty, blank or holding whitespace or control characters: ``""`` binds
    every interface, without the warning that ``0.0.0.0`` gets, and the address printed
    for it (``http://:8765``) leads nowhere.

    Raises:
        UserError: Naming the value and what to pass instead.
    """
    if not isinstance(host, str) or not host.strip():
        raise UserError(
            f"host {host!r} is empty (pass the address to bind: 127.0.0.1 for this machine "
            "only, 0.0.0.0 for every interface)"
        )
    if any(c.isspace() or not c.isprintable() for c in host):
        raise UserError(
            f"host {host!r} holds spaces or control characters (pass an address such as "
            "127.0.0.1 or a host name)"
        )
    return host


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstrings written under each field of a config dataclass (and of its
    bases), read from the source: the text of the generated tables of every config key."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (e.g. built in a REPL)
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def config_table(cls: type) -> str:
    """The Markdown table of a config class's keys: default and meaning (generated for the
    docs; a default that departs from :data:`NEURON_DEFAULTS` says why)."""
    docs = field_docs(cls)
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        meaning = docs.get(f.name, "").replace("|", "\\|")
        if "override" in f.metadata:
            meaning += f" (default {NEURON_DEFAULTS[f.name]!r} elsewhere: {f.metadata['override']})"
        lines.append(f"| `{f.name}` | `{default}` | {meaning} |")
    return "\n".join(lines) + "\n"
