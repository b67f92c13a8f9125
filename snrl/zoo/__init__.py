"""Tuned settings per environment, shipped with snrl (like rl-baselines3-zoo's hyperparameter
files).

One TOML file per algorithm in this package (``ppo.toml``, ``dqn.toml``), one table per env id
and backbone; the keys are that algorithm's config keys::

    ["Acrobot-v1".lif]
    n_envs = 16
    gamma = 0.99

A run picks the entry of its algorithm, env and backbone. Precedence, later wins:

    built-in defaults < tuned settings < the caller's values (a --config file, flags, --set;
    keywords of snrl.PPO / snrl.DQN)

``tuned = false`` (``--no-tuned``) skips them; an env or backbone without an entry is
unchanged. The config key ``tuned_from`` records what was applied (``config.json`` keeps it), so
a resumed or loaded run uses its saved config and is never resolved again.

This module sits on the floor of :mod:`snrl.config` (docs/architecture.md): it knows config
classes only through the class it is given.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any, TypeVar

from snrl.config import RENAMED_KEYS, load_config, parse_set
from snrl.errors import UserError, first_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "ALGOS",
    "FIXED_KEYS",
    "TunedEntry",
    "entries",
    "lookup",
    "parse",
    "resolve",
    "tuned_overrides",
]

C = TypeVar("C")

#: The algorithms with a file of tuned settings (``snrl/zoo/<algo>.toml``).
ALGOS = ("ppo", "dqn")

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
    data = tomllib.loads(text)
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


def resolve(
    cls: type[C],
    algo: str,
    *,
    toml_path: Any = None,
    sets: Iterable[str] = (),
    base: Mapping[str, Any] | None = None,
) -> tuple[C, TunedEntry | None]:
    """:func:`snrl.config.load_config` with the tuned settings under everything the caller
    gives: defaults < tuned < ``base`` < the TOML file < ``sets``.

    The env, backbone and ``tuned`` that select the entry are those of the config built
    without it. The returned config's ``tuned_from`` names the entry and the keys it set
    (the keys the caller gave are not listed: theirs won); with no entry, or ``tuned`` off,
    it is the config ``load_config`` builds.
    """
    sets = list(sets)
    plain = load_config(cls, toml_path=toml_path, sets=sets, base=base)
    entry = lookup(algo, plain.env, plain.backbone) if plain.tuned else None
    if entry is None:
        return plain, None
    # a key the caller names (base, file or --set) wins over the entry and is not recorded
    given = _given_keys(toml_path, sets, base)
    applied = [k for k in entry.values if k not in given]
    if not applied:  # the caller gave every key: nothing of the entry is used
        return plain, None

    def build(keys: list[str]) -> Any:
        return load_config(
            cls,
            toml_path=toml_path,
            sets=sets,
            base={**{k: entry.values[k] for k in keys}, **(base or {})},
        )

    applied, skipped = _fit(entry, applied, build)
    return dataclasses.replace(build(applied), tuned_from=_record(entry, applied, skipped)), entry


def _given_keys(toml_path: Any, sets: list[str], base: Mapping[str, Any] | None) -> set[str]:
    """The config keys the caller sets: ``base``'s keys, the TOML file's, the ``--set`` items'
    (an old key name counts as its new one, as in :func:`snrl.config.load_config`)."""
    keys = set(base or {})
    if toml_path is not None:
        with open(toml_path, "rb") as f:  # load_config has read (and checked) it already
            keys |= set(tomllib.load(f))
    keys |= {parse_set(item)[0] for item in sets}
    return keys | {RENAMED_KEYS[k] for k in keys if k in RENAMED_KEYS}


def tuned_overrides(
    cls: type, algo: str, overrides: dict[str, Any]
) -> tuple[dict[str, Any], TunedEntry | None]:
    """The Python API's resolution: the keyword ``overrides`` of ``snrl.PPO(...)`` /
    ``snrl.DQN(...)`` over the tuned entry of their env and backbone (the class defaults
    where they are not given), with ``tuned_from`` recording the keys applied. Entry values
    are converted and checked like a config file's. Returns the new overrides and the entry
    (None: unchanged)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
    env = overrides.get("env", defaults.get("env"))
    backbone = overrides.get("backbone", defaults.get("backbone"))
    if not overrides.get("tuned", defaults.get("tuned", True)) or not isinstance(env, str):
        return overrides, None
    entry = lookup(algo, env, backbone)
    if entry is None:
        return overrides, None
    applied = [k for k in entry.values if k not in overrides]
    if not applied:  # every key given: nothing of the entry is used (and no record)
        return overrides, None
    typed = load_config(cls, base={"env": env, **{k: entry.values[k] for k in applied}})
    given = {k: v for k, v in overrides.items() if k in defaults}

    def build(keys: list[str]) -> Any:
        return dataclasses.replace(cls(), **{k: getattr(typed, k) for k in keys}, **given)

    applied, skipped = _fit(entry, applied, build)
    if skipped:
        warnings.warn(
            f"tuned settings {entry.source}: not applied {'; '.join(skipped)}", stacklevel=4
        )
    new = {k: getattr(typed, k) for k in applied}
    new.update(overrides)
    new["tuned_from"] = _record(entry, applied, skipped)
    return new, entry


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
