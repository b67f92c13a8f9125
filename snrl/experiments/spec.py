"""What a comparison is: the typed, frozen :class:`CompareSpec`, and its plan.

A spec names the env, the algorithm, the backbones, the seeds, the env steps per run, an
ablation grid (config key -> typed values), config overrides for every run (config key ->
typed value), how to decide "solved" (``threshold``), the final evaluation, and where and
how to run it (``out``, ``workers``, ``backend``, ``address``). Its ``__post_init__`` checks
every field on its own; :func:`plan_runs` then builds every run's config once (the config
classes' own validation), resolves the env and checks its spaces against the algorithm, so a
bad request is refused before the first run and before anything is written.

:func:`spec_from_strings` turns the command line's strings (``--set key=value``,
``--grid key=v1,v2``, ``--config FILE.toml``) into typed values, with the same conversion
and precedence as ``snrl train`` (defaults < file < ``--set`` < grid).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from snrl.errors import UserError

__all__ = [
    "BACKENDS",
    "CompareSpec",
    "RESERVED",
    "RunSpec",
    "SPIKING_ONLY",
    "check_keys",
    "format_value",
    "plan_runs",
    "spec_from_strings",
]

#: Config keys that only change spiking backbones; an ANN backbone is not repeated over them.
SPIKING_ONLY = frozenset(
    {
        "force_dale_law",
        "recurrent_sign",
        "tau_m",
        "readout_tau_m",
        "dt",
        "hh_init",
        "encoder",
        "substeps",
    }
)
#: Config keys the spec sets itself, and the spec field (CLI flag) that sets them.
RESERVED = {
    "env": "env (--env)",
    "backbone": "backbones (--backbones)",
    "seed": "seeds (--seeds)",
    "total_steps": "steps (--steps)",
}
BACKENDS = ("local", "ray")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _config_class(algo: str) -> type:
    from snrl.agents import ALGOS

    if algo not in ALGOS:
        raise UserError(f"unknown algorithm {algo!r} (choose one of {', '.join(sorted(ALGOS))})")
    return ALGOS[algo].Config


def check_keys(cls: type, keys: Sequence[str], what: str) -> None:
    """Refuse config keys that ``cls`` does not have or that the spec sets itself.

    Args:
        cls: the algorithm's config class.
        keys: the keys to check.
        what: how the keys were given, for the message (``"grid"``, ``"overrides"``).

    Raises:
        UserError: naming the key and the valid keys (or the spec field to use).
    """
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in keys:
        if key in RESERVED:
            raise UserError(f"{what} key {key!r} is set by the comparison (use {RESERVED[key]})")
        if key not in fields:
            raise UserError(
                f"unknown {what} key {key!r} for {cls.__name__} (valid keys: "
                f"{', '.join(sorted(fields - set(RESERVED)))})"
            )


def _seed_tuple(seeds: Any) -> tuple[int, ...]:
    """``N`` -> ``(0, ..., N-1)``; a sequence of distinct integers >= 0 -> a tuple."""
    if _is_int(seeds):
        if seeds < 1:
            raise UserError(f"seeds={seeds} (need at least one seed)")
        return tuple(range(seeds))
    if not isinstance(seeds, Sequence) or isinstance(seeds, str):
        raise UserError(f"seeds={seeds!r} (pass a count N or a list of seeds)")
    out = tuple(seeds)
    if not out:
        raise UserError("no seeds (pass a count N >= 1 or a non-empty list)")
    if not all(_is_int(s) and s >= 0 for s in out):
        raise UserError(f"seeds={list(out)} (each seed must be an integer >= 0)")
    if len(set(out)) != len(out):
        raise UserError(f"repeated seeds {list(out)} (each seed once)")
    return out


def _grid_dict(grid: Any) -> dict[str, tuple[Any, ...]]:
    """A grid mapping with each key's values as a non-empty tuple."""
    if not isinstance(grid, Mapping):
        raise UserError(f"grid={grid!r} (pass a dict: config key -> list of values)")
    out: dict[str, tuple[Any, ...]] = {}
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise UserError(f"grid values of {key!r} must be a list (e.g. [{values!r}])")
        if len(values) == 0:
            raise UserError(f"grid key {key!r} has no values (give at least one)")
        out[key] = tuple(values)
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompareSpec:
    """A multi-seed comparison of backbones under one algorithm (see docs/compare.md).

    Sequences are stored as tuples and mappings as plain dicts (copies of what was passed).
    """

    env: str
    """Gymnasium id (or ``module:Class``) every run trains on."""
    out: Path
    """The comparison directory (created; pass it again to resume); a str is converted."""
    algo: str = "ppo"
    """A key of ``snrl.agents.ALGOS``: ``"ppo"`` or ``"dqn"``."""
    backbones: tuple[str, ...] = ("lif", "mlp")
    """Backbone names (``lif, alif, spylif, mlp, gru, lstm``), each once."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """The seeds of every group; an int ``N`` means ``0..N-1``."""
    steps: int = 100_000
    """Env steps per run (the config's ``total_steps``)."""
    grid: Mapping[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    """Config key -> typed values; the runs cover the Cartesian product (ablations)."""
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Config key -> typed value for every run (the grid wins over it)."""
    threshold: float | None = None
    """Return counted as solved for "env steps to threshold" (None: the env's gymnasium
    ``reward_threshold``)."""
    eval_episodes: int = 20
    """Episodes of the final deterministic evaluation of each run."""
    eval_seed: int = 123
    """Seed of the first evaluation episode (episode ``i`` uses ``eval_seed + i``)."""
    workers: int | None = None
    """Runs in parallel (None: the usable cores; Ray: the cluster's CPUs)."""
    backend: str = "local"
    """``"local"`` (a process pool) or ``"ray"``."""
    address: str | None = None
    """Ray cluster address (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``); None starts a
    local Ray instance. Ray backend only."""
    retry_failed: bool = False
    """Run again the runs recorded as failed (else a re-run keeps their failure)."""
    gpus_per_run: float | None = None
    """GPUs each run takes on the Ray backend (0.25 packs four runs on one GPU; None: none).
    Runs with ``device="cuda"`` on the local backend spread over the visible GPUs."""

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if not isinstance(self.env, str) or not self.env.strip():
            raise UserError(f"env={self.env!r} (pass a gymnasium id, e.g. CartPole-v1)")
        if not isinstance(self.out, (str, os.PathLike)) or not os.fspath(self.out):
            raise UserError(f"out={self.out!r} (pass the comparison directory as a path)")
        put("out", Path(self.out))
        cls = _config_class(self.algo)
        from snrl.networks.factory import BACKBONES

        if isinstance(self.backbones, str) or not isinstance(self.backbones, Sequence):
            raise UserError(f"backbones={self.backbones!r} (pass a list, e.g. ['lif', 'mlp'])")
        backbones = tuple(self.backbones)
        if not backbones:
            raise UserError("no backbones given (pass e.g. backbones=['lif', 'mlp'])")
        for b in backbones:
            if b not in BACKBONES:
                raise UserError(f"unknown backbone {b!r} (choose from {', '.join(BACKBONES)})")
        if len(set(backbones)) != len(backbones):
            raise UserError(f"backbone listed twice in {','.join(backbones)} (list each once)")
        put("backbones", backbones)
        put("seeds", _seed_tuple(self.seeds))
        if not _is_int(self.steps) or self.steps < 1:
            raise UserError(f"steps={self.steps!r} (must be an integer >= 1)")
        grid = _grid_dict(self.grid)
        check_keys(cls, list(grid), "grid")
        put("grid", grid)
        if not isinstance(self.overrides, Mapping):
            raise UserError(f"overrides={self.overrides!r} (pass a dict: config key -> value)")
        overrides = dict(self.overrides)
        check_keys(cls, list(overrides), "overrides")
        put("overrides", overrides)
        if self.threshold is not None:
            if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
                raise UserError(f"threshold={self.threshold!r} (pass a number or None)")
            if not math.isfinite(self.threshold):
                raise UserError(
                    f"threshold={self.threshold} (must be a finite return; omit it to use "
                    "the env's reward_threshold)"
                )
            put("threshold", float(self.threshold))
        if not _is_int(self.eval_episodes) or self.eval_episodes < 1:
            raise UserError(f"eval_episodes={self.eval_episodes!r} (must be an integer >= 1)")
        if not _is_int(self.eval_seed) or self.eval_seed < 0:
            raise UserError(f"eval_seed={self.eval_seed!r} (must be an integer >= 0)")
        if self.workers is not None and (not _is_int(self.workers) or self.workers < 1):
            raise UserError(f"workers={self.workers!r} (must be an integer >= 1, or None)")
        if self.backend not in BACKENDS:
            raise UserError(f"unknown backend {self.backend!r} (choose local or ray)")
        if self.address is not None and not isinstance(self.address, str):
            raise UserError(f"address={self.address!r} (pass HOST:PORT as a string)")
        if self.address and self.backend != "ray":
            raise UserError("address is for the Ray backend (set backend='ray' / --backend ray)")
        if self.gpus_per_run is not None:
            g = self.gpus_per_run
            if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 64:
                raise UserError(f"gpus_per_run={g!r} (a number in (0, 64], e.g. 0.25)")
            if self.backend != "ray":
                raise UserError(
                    "gpus_per_run is for the Ray backend (add --backend ray; the local backend "
                    "spreads runs with device=cuda over the visible GPUs by itself)"
                )
            put("gpus_per_run", float(g))
        if not isinstance(self.retry_failed, bool):
            raise UserError(f"retry_failed={self.retry_failed!r} (must be True or False)")

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able values (``compare.json``)."""
        from snrl.config import config_to_dict

        d = config_to_dict(self)
        d["out"] = str(self.out)
        return json.loads(json.dumps(d, default=str))


class RunSpec(NamedTuple):
    """One planned run."""

    name: str
    """Directory name under ``DIR/runs``."""
    group: str
    """Backbone and grid point, e.g. ``"lif force_dale_law=false"``."""
    backbone: str
    grid: dict[str, str]
    """Grid key -> formatted value of this run."""
    seed: int
    algo: str
    config: dict[str, Any]
    """The resolved config (JSON-able)."""
    run_dir: str
    status_path: str
    eval_episodes: int
    eval_seed: int


def format_value(value: Any) -> str:
    """A config value as it appears in run and group names (``true``, ``0.01``, ``64-64``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "-".join(format_value(v) for v in value)
    return str(value)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "-", text)


def _check_env(env_id: str, algo: str, env_kwargs: Mapping[str, Any]) -> None:
    """Create the env once: its id must resolve and its spaces must fit ``algo``."""
    from snrl.agents import ALGOS
    from snrl.envs import make_env

    env = make_env(env_id, **dict(env_kwargs))
    try:
        ALGOS[algo].check_spaces(env.observation_space, env.action_space)
    finally:
        env.close()


def plan_runs(spec: CompareSpec) -> list[RunSpec]:
    """Validate a comparison in full and list its runs; nothing is written.

    Each backbone is crossed with every grid point and seed; an ANN backbone is not repeated
    over grid keys that only change spiking backbones (:data:`SPIKING_ONLY`). Every run's
    config is built here (so its class's validation runs on the exact values of that run),
    and the env is created once to check that it resolves and that its spaces fit the
    algorithm.

    Raises:
        UserError: a config that its class refuses (named by run), an unknown env, spaces
            the algorithm cannot train on.
    """
    from snrl.config import config_to_dict, load_config

    cls = _config_class(spec.algo)
    keys = list(spec.grid)
    points = list(itertools.product(*(spec.grid[k] for k in keys)))
    base = spec.out
    runs: list[RunSpec] = []
    seen: set[str] = set()
    envs: dict[str, Mapping[str, Any]] = {}
    from snrl.networks.factory import ANN

    for backbone in spec.backbones:
        for point in points:
            items = list(zip(keys, point))
            if backbone in ANN:
                items = [(k, v) for k, v in items if k not in SPIKING_ONLY]
            for seed in spec.seeds:
                values = {
                    **spec.overrides,
                    **dict(items),
                    "env": spec.env,
                    "backbone": backbone,
                    "total_steps": spec.steps,
                    "seed": seed,
                }
                label = " ".join([backbone, *(f"{k}={format_value(v)}" for k, v in items)])
                try:
                    cfg = load_config(cls, base=values)
                except ValueError as e:
                    raise UserError(f"run {label} seed {seed}: {e}") from None
                shown = {k: format_value(getattr(cfg, k)) for k, _ in items}
                group = " ".join([backbone, *(f"{k}={v}" for k, v in shown.items())])
                name = _safe("__".join([backbone, *(f"{k}={v}" for k, v in shown.items())]))
                name = f"{name}__seed{seed}"
                if name in seen:
                    continue
                seen.add(name)
                envs.setdefault(
                    json.dumps([cfg.env, getattr(cfg, "env_kwargs", None)], default=str),
                    getattr(cfg, "env_kwargs", None) or {},
                )
                runs.append(
                    RunSpec(
                        name=name,
                        group=group,
                        backbone=backbone,
                        grid=shown,
                        seed=seed,
                        algo=spec.algo,
                        config=json.loads(json.dumps(config_to_dict(cfg))),
                        run_dir=str(base / "runs" / name),
                        status_path=str(base / "status" / f"{name}.json"),
                        eval_episodes=spec.eval_episodes,
                        eval_seed=spec.eval_seed,
                    )
                )
    for key, kwargs in envs.items():
        _check_env(json.loads(key)[0], spec.algo, kwargs)
    return runs


def spec_from_strings(
    env: str,
    *,
    out: str | os.PathLike,
    algo: str = "ppo",
    sets: Sequence[str] = (),
    grid: Mapping[str, Sequence[str]] | None = None,
    config_file: str | os.PathLike | None = None,
    **fields: Any,
) -> CompareSpec:
    """A :class:`CompareSpec` from command-line strings (what ``snrl compare`` does).

    The TOML file and the ``--set`` items are converted by :func:`snrl.config.load_config`
    (the same types, messages and precedence as ``snrl train``); every value of the file
    that differs from the config's default, and every ``--set`` key, becomes an override.
    Grid values are converted the same way, each in a config together with the other grid
    keys' values, so a value that is only valid with another grid key's value converts.

    Args:
        env: gymnasium id or ``module:Class``.
        out: the comparison directory.
        algo: ``"ppo"`` or ``"dqn"``.
        sets: ``"key=value"`` items for every run.
        grid: config key -> value strings.
        config_file: a TOML config (applied before ``sets``).
        **fields: the other :class:`CompareSpec` fields, already typed.

    Raises:
        UserError: a bad key or value, and whatever :class:`CompareSpec` refuses.
    """
    from snrl.config import load_config, parse_set

    cls = _config_class(algo)
    grid = {k: list(v) for k, v in (grid or {}).items()}
    check_keys(cls, list(grid), "--grid")
    for key, values in grid.items():
        if not values:
            raise UserError(f"grid key {key!r} has no values (use --grid {key}=v1,v2,...)")
    set_keys = [parse_set(item)[0] for item in sets]
    check_keys(cls, set_keys, "--set")
    base = load_config(cls, toml_path=config_file, sets=sets)
    default = cls()
    overrides = {
        f.name: getattr(base, f.name)
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in RESERVED
        and (f.name in set_keys or getattr(base, f.name) != getattr(default, f.name))
    }
    keys = list(grid)
    typed: dict[str, list[Any]] = {k: [None] * len(grid[k]) for k in keys}
    converted: dict[str, list[bool]] = {k: [False] * len(grid[k]) for k in keys}
    first_error: ValueError | None = None
    for combo in itertools.product(*(range(len(grid[k])) for k in keys)):
        items = [f"{k}={grid[k][i]}" for k, i in zip(keys, combo)]
        try:
            cfg = load_config(cls, toml_path=config_file, sets=[*sets, *items])
        except ValueError as e:
            first_error = first_error or e
            continue
        for k, i in zip(keys, combo):
            typed[k][i] = getattr(cfg, k)
            converted[k][i] = True
    for k in keys:
        if not all(converted[k]):
            bad = grid[k][converted[k].index(False)]
            raise UserError(f"--grid {k}={bad}: {first_error}") from None
    return CompareSpec(
        env=env,
        out=out,
        algo=algo,
        grid={k: tuple(v) for k, v in typed.items()},
        overrides=overrides,
        **fields,
    )
