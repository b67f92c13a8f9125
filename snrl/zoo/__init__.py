"""Tuned settings per environment, shipped with snrl (like rl-baselines3-zoo's hyperparameter
files).

One TOML file per algorithm in this package (``ppo.toml``, ``a2c.toml``, ``dqn.toml``), one
table per env id and backbone; the keys are that algorithm's config keys::

    ["Acrobot-v1".lif]
    n_envs = 16
    gamma = 0.99

A run picks the entry of its algorithm, env and backbone. Precedence, later wins:

    built-in defaults < tuned settings < the caller's values (a --config file < flags <
    --set; keywords of snrl.PPO / snrl.DQN)

:func:`configure` is the one function that does it, for the CLI and the Python API alike.

``tuned = false`` (``--no-tuned``) skips them; an env or backbone without an entry is
unchanged. The config key ``tuned_from`` records what was applied (``config.json`` keeps it), or
``none: snrl/zoo/<algo>.toml has no ["<env>".<backbone>] entry`` (empty with ``tuned = false``
or a config object), so a resumed or loaded run uses its saved config and is never resolved
again.

This module sits on the floor of :mod:`snrl.config` (docs/architecture.md): it knows config
classes only through the class it is given.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, NamedTuple, TypeVar

from snrl.config import Layer, build, file_layer, loads_toml, merge, sets_layer
from snrl.errors import UserError, first_line

__all__ = [
    "ALGOS",
    "FIXED_KEYS",
    "Configured",
    "TunedEntry",
    "configure",
    "entries",
    "lookup",
    "no_entry_note",
    "parse",
    "resolve",
]

C = TypeVar("C")

#: The algorithms with a file of tuned settings (``snrl/zoo/<algo>.toml``).
ALGOS = ("ppo", "a2c", "dqn")

#: Keys an entry may not set: what selects the entry, the opt-out and its record, and what
#: belongs to the machine or the run rather than to the env.
FIXED_KEYS = ("env", "backbone", "tuned", "tuned_from", "seed", "device", "threads", "curriculum")


@dataclasses.dataclass(frozen=True)
class TunedEntry:
    """The tuned settings of one algorithm, env and backbone."""

    algo: str
    env: str
    backbone: str
    values: Mapping[str, Any]

    @property
    def source(self) -> str:
        """Where the entry is: ``snrl/zoo/ppo.toml ["Acrobot-v1".lif]``."""
        return f'snrl/zoo/{self.algo}.toml ["{self.env}".{self.backbone}]'

    def describe(self, keys: Iterable[str] | None = None) -> str:
        """``source: key=value, ...`` for ``keys`` (default: every key of the entry)."""
        keys = list(self.values) if keys is None else list(keys)
        items = ", ".join(f"{k}={self.values[k]!r}" for k in keys)
        return f"{self.source}: {items}" if keys else f"{self.source}: (no key applied)"


@functools.cache
def entries(algo: str) -> dict[tuple[str, str], TunedEntry]:
    """Every entry of ``algo``'s file, keyed by ``(env id, backbone)``.

    Raises:
        UserError: An unknown algorithm, or a file that is not a table of env tables of
            backbone tables (the files ship with snrl; tests/test_zoo.py checks them).
    """
    if algo not in ALGOS:
        raise UserError(f"no tuned settings for algo {algo!r} (one of {', '.join(ALGOS)})")
    text = resources.files(__name__).joinpath(f"{algo}.toml").read_text(encoding="utf-8")
    return parse(algo, text)


def parse(algo: str, text: str) -> dict[tuple[str, str], TunedEntry]:
    """The entries of one file's ``text`` (see :func:`entries`)."""
    name = f"{algo}.toml"
    data = loads_toml(text)
    found: dict[tuple[str, str], TunedEntry] = {}
    for env, backbones in data.items():
        if not isinstance(backbones, dict):
            raise UserError(f"snrl/zoo/{name}: {env!r} is not a table of backbone tables")
        for backbone, values in backbones.items():
            if not isinstance(values, dict):
                raise UserError(f"snrl/zoo/{name}: {env!r}.{backbone} is not a table of keys")
            fixed = [k for k in values if k in FIXED_KEYS]
            if fixed:
                raise UserError(
                    f"snrl/zoo/{name}: [{env!r}.{backbone}] sets {', '.join(fixed)}, which a "
                    "tuned entry may not set"
                )
            found[(env, backbone)] = TunedEntry(algo, env, backbone, dict(values))
    return found


def lookup(algo: str, env: str, backbone: str) -> TunedEntry | None:
    """The entry of ``algo`` for ``env`` and ``backbone``, or None."""
    return entries(algo).get((env, backbone))


class Configured(NamedTuple):
    """What :func:`configure` returns."""

    config: Any
    """The config, built and validated once."""
    entry: TunedEntry | None
    """The tuned entry used (None: no entry applied)."""
    skipped: list[str]
    """A note per tuned key left out because it clashed with the caller's values."""


def configure(
    cls: type[C], algo: str, layers: Sequence[Layer], *, tuned: bool = True
) -> Configured:
    """The one config path of snrl: the tuned entry under the caller's ``layers``, merged by
    precedence and validated once.

    Precedence, later wins: the defaults of ``cls`` < the tuned entry of ``algo`` for the
    env and backbone the caller's values select < ``layers`` in their order (``snrl train``:
    the ``--config`` file, the flags, the ``--set`` items; ``snrl.PPO(...)``: its keywords).
    ``tuned=False`` (a config object or a custom backbone passed), the config key
    ``tuned = false``, or no entry: the caller's values alone. The config's ``tuned_from``
    names the entry and the keys it set (a key the caller gives wins and is not listed).

    A tuned key that makes the caller's values invalid (e.g. ``n_minibatches = 4`` with
    the caller's ``n_envs = 2``) is left out and noted (:func:`_fit`): only then is the config
    built more than once.

    Raises:
        UserError: An unknown key or a bad value (naming its layer), or the caller's own
            values failing the config's validation.
    """
    given = merge(cls, layers)
    entry = _select(cls, algo, given) if tuned else None
    applied = [k for k in entry.values if k not in given] if entry is not None else []
    if entry is None or not applied:  # no entry, or the caller gave every key of it
        note = _no_entry(cls, algo, given, entry) if tuned else ""
        record = {} if not note or "tuned_from" in given else {"tuned_from": note}
        return Configured(build(cls, {**given, **record}), None, [])
    values = merge(cls, [Layer.of(entry.source, {k: entry.values[k] for k in applied})])

    def make(keys: list[str], skipped: list[str]) -> Any:
        record = _record(entry, keys, skipped)
        return build(cls, {**{k: values[k] for k in keys}, **given, "tuned_from": record})

    try:
        return Configured(make(applied, []), entry, [])
    except UserError:
        pass
    applied, skipped = _fit(entry, applied, lambda keys: make(keys, []))
    return Configured(make(applied, skipped), entry, skipped)


def _select(cls: type, algo: str, given: Mapping[str, Any]) -> TunedEntry | None:
    """The entry of the env and backbone that ``given`` selects (the defaults of ``cls``
    where it does not), or None with ``tuned`` off or an env that is not an id."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
    chosen = {**defaults, **given}
    env, backbone = chosen.get("env"), chosen.get("backbone")
    if not chosen.get("tuned", True) or not isinstance(env, str):
        return None
    return lookup(algo, env, backbone)


def _no_entry(cls: type, algo: str, given: Mapping[str, Any], entry: TunedEntry | None) -> str:
    """What ``tuned_from`` says when no tuned key was applied with ``tuned`` on: that the
    file has no entry for the env and backbone, or that the caller gave every key of it
    (empty with ``tuned = false``)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
    chosen = {**defaults, **given}
    if not chosen.get("tuned", True):
        return ""
    if entry is not None:
        return f"{entry.source}: (no key applied: you gave every key of it)"
    return no_entry_note(algo, chosen.get("env"), chosen.get("backbone"))


def no_entry_note(algo: str, env: Any, backbone: Any) -> str:
    """``tuned_from`` of a run whose algorithm, env and backbone have no tuned entry."""
    return f'none: snrl/zoo/{algo}.toml has no ["{env}".{backbone}] entry'


def resolve(
    cls: type[C],
    algo: str,
    *,
    toml_path: Any = None,
    sets: Iterable[str] = (),
    base: Mapping[str, Any] | None = None,
) -> tuple[C, TunedEntry | None]:
    """:func:`configure` with the layers of :func:`snrl.config.load_config`: defaults <
    tuned < ``base`` < the TOML file < ``sets``. Returns the config and the entry used."""
    layers = [Layer.of("the base config", base), file_layer(toml_path), sets_layer(sets)]
    cfg, entry, _ = configure(cls, algo, layers)
    return cfg, entry


def _record(entry: TunedEntry, applied: list[str], skipped: list[str]) -> str:
    """What ``tuned_from`` says: the entry, the keys applied, and the ones left out."""
    text = entry.describe(applied)
    return f"{text}; not applied: {'; '.join(skipped)}" if skipped else text


def _fit(
    entry: TunedEntry, applied: list[str], build: Callable[[list[str]], Any]
) -> tuple[list[str], list[str]]:
    """The tuned keys that fit the caller's values, and a note per key left out.

    ``build(keys)`` makes the config with those tuned keys under the caller's values (a
    :class:`UserError` if they do not fit). When all fit, all are kept; when leaving out one
    key makes the config valid (e.g. the tuned ``n_minibatches = 4`` with the caller's
    ``n_envs = 2``), that key is left out; otherwise the entry is (the caller's own values
    then decide, and their error is the caller's to see).
    """
    try:
        build(applied)
        return applied, []
    except UserError as e:
        why = first_line(e)
    for key in applied:
        keep = [k for k in applied if k != key]
        try:
            build(keep)
        except UserError:
            continue
        note = why if why.startswith(f"{key}=") else f"{key}={entry.values[key]!r}: {why}"
        return keep, [note]
    build([])  # the caller's values alone: their own error, if any
    return [], [f"the whole entry ({why})"]
