"""The launch form: generated from the config classes, validated by the CLI's own code.

The fields, their types, defaults and one-line documentation come from the algorithm's
config dataclass (``snrl.agents.ALGOS[algo].Config``: :func:`dataclasses.fields`, the type
hints, :func:`snrl.config.field_docs`); choices come from ``Literal`` types or from the
``a | b | c`` list a field's documentation gives; ``positive_ints`` gives the minimum 1. There
is no second list of fields here: a field added to a config class appears in the form.

The values are the text a user types, exactly what ``snrl train --set key=value`` takes:
:func:`validate` runs :func:`snrl.config.load_config` (the CLI's parser and the config's
``__post_init__`` checks) on them and keys each error by the field it names, with the CLI's
message; the launched process receives the same ``--set`` items, so it builds the same config.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

# _type_name and _jsonable: the CLI's words for a type and config.json's form of a value
from snrl.config import _jsonable, _type_name, field_docs, load_config
from snrl.dashboard.runs import MAX_JSON_DEPTH, NAME_RE, json_text_depth
from snrl.errors import error_message

__all__ = ["FORM_ERROR", "NAME_RE", "algo_classes", "schema", "validate"]

#: The key of an error that names no field.
FORM_ERROR = "_form"
#: Most ``--set`` items one launch passes, and the longest value.
MAX_ITEMS = 200
MAX_VALUE_CHARS = 64 * 1024

_CHOICES_RE = re.compile(r"(?:^|:\s)((?:[a-z_][a-z0-9_]*\s\|\s)+[a-z_][a-z0-9_]*)")


def algo_classes() -> dict[str, type]:
    """``{"ppo": PPOConfig, "dqn": DQNConfig}``: the config class of each algorithm."""
    from snrl.agents import ALGOS

    return {name: cls.Config for name, cls in ALGOS.items()}


def _kind(tp: Any) -> tuple[str, bool, list[Any] | None]:
    """(input kind, whether none is allowed, choices) of a type hint."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    optional = False
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        if len(rest) == 1:
            tp = rest[0]
            origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "choice", optional, list(args)
    if tp is bool:
        return "bool", optional, None
    if tp is int:
        return "int", optional, None
    if tp is float:
        return "float", optional, None
    if tp is str:
        return "str", optional, None
    if origin is dict or tp is dict:
        return "json", optional, None
    if origin in (tuple, list):
        return "list", optional, None
    if isinstance(tp, type) and callable(getattr(tp, "from_config", None)):
        return "json", optional, None  # a structured value (snrl.Curriculum): JSON text
    return "str", optional, None


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _jsonable_default(value: Any) -> Any:
    """A default as config.json writes it (tuples as lists, a curriculum as its lessons)."""
    return None if value is dataclasses.MISSING else _jsonable(value)


def schema(cls: type) -> list[dict[str, Any]]:
    """The form fields of config class ``cls``, in declaration order.

    Each field: ``name``, ``kind`` (int, float, bool, str, list, json, choice), ``optional``
    (none allowed), ``default`` (JSON), ``type`` (the CLI's words for the type), ``doc``,
    ``choices`` (or None), ``min`` (or None), ``override`` (why the default departs from the
    table of neuron defaults, or None).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    positive = set(getattr(cls, "positive_ints", ()))
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints.get(f.name, Any)
        kind, optional, choices = _kind(tp)
        doc = docs.get(f.name, "")
        if choices is None and kind == "str":
            m = _CHOICES_RE.search(doc)
            if m:
                choices = [c.strip() for c in m.group(1).split("|")]
        out.append(
            {
                "name": f.name,
                "kind": kind,
                "optional": optional,
                "default": _jsonable_default(_default(f)),
                "type": _type_name(tp),
                "doc": doc,
                "choices": choices,
                "min": 1 if f.name in positive else None,
                "override": f.metadata.get("override"),
            }
        )
    return out


def _field_of(message: str, names: list[str], given: list[str]) -> str:
    """The field an error message is about: the one it names in the CLI's patterns
    (``config key 'x'``, ``config key x=``, ``x=...`` first), else the first field it names
    among those given, else :data:`FORM_ERROR`."""
    for pattern in (
        r"config key '(\w+)'",
        r"config key (\w+)=",
        r"^(\w+)=",
        r"^(\w+)[ ,]",
        r"^curriculum",
    ):
        m = re.search(pattern, message)
        if m:
            name = m.group(1) if m.groups() else "curriculum"
            if name in names:
                return name
    for word in re.findall(r"[A-Za-z_]\w*", message):
        if word in given:
            return word
    return FORM_ERROR


def validate(algo: str, values: Mapping[str, Any]) -> tuple[Any | None, list[str], dict[str, str]]:
    """Check form values (text, as ``--set`` takes it) with the CLI's config code.

    Args:
        algo: ``"ppo"`` or ``"dqn"``.
        values: field name -> text. Fields left out keep their defaults.

    Returns:
        ``(config, items, errors)``: the config and the ``key=value`` items that build it
        (``snrl train --set`` each), or ``(None, [], errors)`` with ``errors`` keyed by field
        name (:data:`FORM_ERROR` for a message that names no field), each the line
        ``snrl train`` would print after ``error:``.
    """
    classes = algo_classes()
    if algo not in classes:
        return (
            None,
            [],
            {"algo": f"unknown algorithm {algo!r} (choose one of {', '.join(classes)})"},
        )
    cls = classes[algo]
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    errors: dict[str, str] = {}
    items: dict[str, str] = {}
    if len(values) > MAX_ITEMS:
        return None, [], {FORM_ERROR: f"{len(values)} fields (at most {MAX_ITEMS})"}
    for key, value in values.items():
        if not isinstance(value, str):
            value = "none" if value is None else str(value)
        if len(value) > MAX_VALUE_CHARS:
            errors[str(key)] = f"value of {len(value)} characters (at most {MAX_VALUE_CHARS})"
            continue
        if "\x00" in value:
            errors[str(key)] = "value holds a NUL character (remove it)"
            continue
        if json_text_depth(value) > MAX_JSON_DEPTH:
            errors[str(key)] = f"value nested deeper than {MAX_JSON_DEPTH} levels (flatten it)"
            continue
        items[str(key)] = f"{key}={value}"
    # the whole config at once, as the CLI builds it; an error is keyed by the field it
    # names, that item is set aside and the rest checked again, so every bad field shows
    for _ in range(len(items) + 1):
        try:
            cfg = load_config(cls, sets=[i for k, i in items.items() if k not in errors])
        except (ValueError, OSError, RecursionError) as e:
            msg = error_message(e) if not isinstance(e, RecursionError) else "nested too deeply"
            key = _field_of(msg, names, [k for k in items if k not in errors])
            if key in errors or key == FORM_ERROR or key not in items:
                errors.setdefault(key, msg)
                break
            errors[key] = msg
            continue
        if errors:
            break
        env_error = _check_env(cfg.env)
        if env_error:
            return None, [], {"env": env_error}
        return cfg, list(items.values()), {}
    return None, [], errors


def _check_env(env: str) -> str | None:
    """The CLI's message for a gymnasium id that is not registered, or None.

    Only plain ids are checked (``snrl train`` would stop at the same place, before writing
    anything); ``module:Class`` and ``http://`` envs are left to the run, which would import
    a module or reach a server."""
    import gymnasium as gym

    from snrl.envs import make_env

    if env.startswith(("http://", "https://")) or ":" in env or env in gym.registry:
        return None
    try:
        make_env(env).close()
    except (ValueError, OSError) as e:
        return error_message(e)
    return None
