"""Multi-seed comparisons of backbones (spiking vs ANN) under one algorithm.

One comparison is a set of ordinary run directories, one per (backbone, grid point, seed)::

    DIR/
      compare.json           the request (env, algo, backbones, seeds, steps, grid, sets)
      runs/<name>/           config.json, metrics.csv, checkpoints/{best,last}.pt,
                             learning_curve.png  (same layout as ``snrl train --out``)
      status/<name>.json     "done" (with the run's results) or "failed" (with its error)
      runs.csv               one row per run
      summary.csv/.md        one row per backbone / grid point; pairwise tests
      pairwise.csv
      curves.png/.svg        mean episode return vs env steps, 95% bootstrap band over seeds
      report.md              the figures and tables together

Re-running the same request skips runs whose status is ``done`` (and, unless
``retry_failed``, ``failed``), resumes runs that have ``checkpoints/last.pt`` from it
(the algorithm's own resume), and starts the others afresh. Summaries are rebuilt from the
status files each time, so there are never duplicate rows.

Backends: ``"local"`` runs the runs in a process pool (``concurrent.futures``, workers
forked from a ``forkserver`` that has imported snrl, one torch thread each); ``"ray"`` runs
them as Ray tasks (``ray.init(address)``: an existing cluster, or a local instance when
``address`` is None). On a multi-node cluster ``DIR`` must be on a filesystem every node
mounts at the same path.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import itertools
import json
import math
import multiprocessing as mp
import os
import re
import socket
import sys
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from snrl.errors import UserError

__all__ = [
    "CompareResult",
    "RunSpec",
    "compare",
    "evaluate_with_activity",
    "execute_run",
    "plan_runs",
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
        "sim_steps",
    }
)
#: Keys set by the comparison itself (use the dedicated arguments instead of --set/--grid).
_RESERVED = {
    "env_id": "--env",
    "backbone": "--backbones",
    "seed": "--seeds",
    "total_steps": "--steps",
}
BACKENDS = ("local", "ray")


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


class CompareResult(NamedTuple):
    """What :func:`compare` returns."""

    out: Path
    """The comparison directory."""
    runs: list[dict[str, Any]]
    """One record per run (``status`` done/failed/missing, results, ``error``)."""
    summary: list[dict[str, Any]]
    """One row per group (see ``summary.csv``)."""
    pairwise: list[dict[str, Any]]
    """Mann-Whitney U tests between groups on the final evaluation returns."""


# ---------------------------------------------------------------------------- planning
def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "-".join(_fmt(v) for v in value)
    return str(value)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "-", text)


def parse_grid(items: Iterable[str]) -> dict[str, list[str]]:
    """``["tau_m=0.01,0.02", "hidden_size=16"]`` -> ``{"tau_m": ["0.01", "0.02"], ...}``.

    Raises:
        UserError: an item without ``=``, an empty value list, a repeated key.
    """
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"bad --grid item {item!r} (use key=v1,v2, e.g. tau_m=0.01,0.02)")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not vals:
            raise UserError(f"--grid {key} has no values (use {key}=v1,v2,...)")
        if key in grid:
            raise UserError(f"--grid {key} given twice (list all its values in one item)")
        grid[key] = vals
    return grid


def _check_keys(keys: Iterable[str], cls: type, what: str) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    for key in keys:
        if key in _RESERVED:
            raise UserError(f"{what} key {key!r} is set by the comparison (use {_RESERVED[key]})")
        if key not in fields:
            raise UserError(
                f"unknown {what} key {key!r} for {cls.__name__} (valid keys: "
                f"{', '.join(sorted(fields - set(_RESERVED)))})"
            )


def plan_runs(
    env_id: str,
    *,
    out: str | os.PathLike,
    algo: str = "ppo",
    backbones: Sequence[str] = ("lif", "mlp"),
    seeds: int | Sequence[int] = 5,
    steps: int = 100_000,
    grid: Mapping[str, Sequence[Any]] | None = None,
    sets: Sequence[str] = (),
    config_file: str | os.PathLike | None = None,
    eval_episodes: int = 20,
    eval_seed: int = 123,
) -> list[RunSpec]:
    """Validate a comparison request and list its runs (nothing is written).

    Each backbone is crossed with every grid point and seed; an ANN backbone is not repeated
    over grid keys that only change spiking backbones (:data:`SPIKING_ONLY`).

    Raises:
        UserError: unknown algorithm, backbone or grid key, an empty grid or backbone list,
            a bad value (from the config), fewer than one seed or step.
    """
    from snrl.agents import ALGOS
    from snrl.config import config_to_dict, load_config
    from snrl.networks.factory import ANN, BACKBONES

    if algo not in ALGOS:
        raise UserError(f"unknown algorithm {algo!r} (choose one of {', '.join(sorted(ALGOS))})")
    cls = ALGOS[algo].Config
    backbones = [b.strip() for b in backbones if b.strip()]
    if not backbones:
        raise UserError("no backbones given (pass e.g. --backbones lif,mlp)")
    for b in backbones:
        if b not in BACKBONES:
            raise UserError(f"unknown backbone {b!r} (choose from {', '.join(BACKBONES)})")
    if len(set(backbones)) != len(backbones):
        raise UserError(f"backbone listed twice in {','.join(backbones)} (list each once)")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise UserError("no seeds (pass --seeds N with N >= 1)")
    if len(set(seed_list)) != len(seed_list):
        raise UserError(f"repeated seeds {seed_list} (each seed once)")
    if int(steps) < 1:
        raise UserError(f"--steps {steps} (must be >= 1)")
    if eval_episodes < 1:
        raise UserError(f"eval_episodes={eval_episodes} (must be >= 1)")
    grid = {
        k: [_fmt(v) if not isinstance(v, str) else v for v in vs] for k, vs in (grid or {}).items()
    }
    for key, values in grid.items():
        if len(values) == 0:
            raise UserError(f"grid key {key!r} has no values (give at least one)")
    _check_keys(grid, cls, "--grid")
    set_keys = [s.partition("=")[0].strip() for s in sets]
    _check_keys(set_keys, cls, "--set")

    keys = list(grid)
    points = list(itertools.product(*(grid[k] for k in keys)))
    base = Path(out)
    specs: list[RunSpec] = []
    seen: set[str] = set()
    for backbone in backbones:
        for point in points:
            items = list(zip(keys, point))
            if backbone in ANN:
                items = [(k, v) for k, v in items if k not in SPIKING_ONLY]
            fixed = [
                f"env_id={env_id}",
                f"backbone={backbone}",
                f"total_steps={int(steps)}",
                *sets,
                *(f"{k}={v}" for k, v in items),
            ]
            for seed in seed_list:
                cfg = load_config(cls, toml_path=config_file, sets=[*fixed, f"seed={seed}"])
                shown = {k: _fmt(getattr(cfg, k)) for k, _ in items}
                group = " ".join([backbone, *(f"{k}={v}" for k, v in shown.items())])
                name = _safe("__".join([backbone, *(f"{k}={v}" for k, v in shown.items())]))
                name = f"{name}__seed{seed}"
                if name in seen:
                    continue
                seen.add(name)
                specs.append(
                    RunSpec(
                        name=name,
                        group=group,
                        backbone=backbone,
                        grid=shown,
                        seed=seed,
                        algo=algo,
                        config=json.loads(json.dumps(config_to_dict(cfg))),
                        run_dir=str(base / "runs" / name),
                        status_path=str(base / "status" / f"{name}.json"),
                        eval_episodes=int(eval_episodes),
                        eval_seed=int(eval_seed),
                    )
                )
    return specs


def _check_existing(spec: RunSpec) -> None:
    """An existing run directory must hold the same config (else a different experiment)."""
    path = Path(spec.run_dir) / "config.json"
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return  # torn or unreadable: the run is restarted afresh
    stored.pop("algo", None)
    if stored != spec.config:
        diff = sorted(
            k for k in set(stored) | set(spec.config) if stored.get(k) != spec.config.get(k)
        )
        raise UserError(
            f"run {spec.run_dir} exists with a different config ({', '.join(diff)}) "
            "(use another --out, or delete that run directory)"
        )


# ---------------------------------------------------------------------------- one run
def _read_status(path: str | os.PathLike) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_status(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    from snrl.io import write_json_atomic

    write_json_atomic(path, _jsonable(dict(record)))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def evaluate_with_activity(
    agent: Any, env_id: str, *, n_episodes: int = 20, seed: int = 123
) -> dict[str, Any]:
    """Deterministic evaluation (one episode per env, env ``i`` seeded ``seed + i``) that
    also measures the policy's mean firing rate per spiking layer.

    Returns:
        ``{"returns": (n_episodes,) list, "mean_return", "std_return", "rates": {layer:
        spikes per neuron per network step over all live env steps}}``.
    """
    import torch

    from snrl.envs import make_vector_env

    envs = make_vector_env(env_id, n_episodes, seed=seed)
    agent.eval()
    spikes: dict[str, float] = {}
    counts: dict[str, float] = {}
    try:
        with torch.no_grad():
            obs, _ = envs.reset(seed=seed)
            state = agent.initial_state(n_episodes)
            returns = np.zeros(n_episodes)
            finished = np.zeros(n_episodes, dtype=bool)
            while not finished.all():
                res = agent.step(agent.preprocess(obs), state, deterministic=True)
                live = ~finished
                for key, a in res.activity.items():
                    if key.endswith(".spikes"):
                        layer = key[: -len(".spikes")]
                        rows = a[torch.as_tensor(live)]
                        spikes[layer] = spikes.get(layer, 0.0) + float(rows.sum())
                        counts[layer] = counts.get(layer, 0.0) + rows.numel()
                obs, reward, term, trunc, _ = envs.step(agent.env_action(res.action))
                returns[live] += reward[live]
                done = np.logical_or(term, trunc)
                finished |= done
                state = agent.reset_state(res.state, torch.as_tensor(done))
    finally:
        envs.close()
        agent.train()
    return {
        "returns": [float(r) for r in returns],
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "rates": {k: spikes[k] / counts[k] for k in spikes if counts[k] > 0},
    }


def _exit_when_gone(pid: int) -> None:
    """Exit this worker as soon as process ``pid`` (the compare process) has ended, so no
    orphan keeps writing into a run directory that a re-run resumes.

    A daemon thread waits on a pidfd (Linux >= 5.3; readable once the process has exited)
    or else polls ``os.kill(pid, 0)`` once a second. The worker's own parent is the
    forkserver, not the compare process, so ``PR_SET_PDEATHSIG`` alone would not do.
    """
    import select
    import threading

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except OSError:
                    pass
                time.sleep(1.0)
        os._exit(70)

    threading.Thread(target=watch, name="snrl-compare-watchdog", daemon=True).start()


def _init_worker(parent_pid: int, sys_path: Sequence[str] = ()) -> None:
    import torch

    _exit_when_gone(parent_pid)
    # like ``spawn``: the caller's import path at the time of the call (user env modules)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    torch.set_num_threads(1)


def execute_run(spec: RunSpec | Mapping[str, Any]) -> dict[str, Any]:
    """Train (fresh, or resumed from ``checkpoints/last.pt``), evaluate and record one run.

    Never raises for a failing run: the error is returned and written to the status file as
    ``{"status": "failed", "error": ...}``. Safe to call in any process (local pool worker,
    Ray task, the caller's own process).

    Returns:
        The run record (also written to ``spec.status_path``).
    """
    import torch

    from snrl.experiments.energy import count_ops, count_parameters
    from snrl.experiments.runner import train_run

    spec = RunSpec(**spec) if isinstance(spec, Mapping) else spec
    torch.set_num_threads(1)
    record: dict[str, Any] = {
        "name": spec.name,
        "group": spec.group,
        "backbone": spec.backbone,
        "grid": dict(spec.grid),
        "seed": spec.seed,
        "algo": spec.algo,
        "run_dir": spec.run_dir,
    }
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        from snrl.agents import ALGOS
        from snrl.config import config_from_dict

        run_dir = Path(spec.run_dir)
        resumed = (run_dir / "checkpoints" / "last.pt").is_file()
        cfg = config_from_dict(ALGOS[spec.algo].Config, spec.config)
        if resumed:  # the env is the one the user named in the spec, not the file's
            algo = train_run(run_dir, resume=True, progress=False, env=cfg.env_id)
        else:
            algo = train_run(run_dir, algo=spec.algo, config=cfg, force=True, progress=False)
        ev = evaluate_with_activity(
            algo.agent, algo.config.env_id, n_episodes=spec.eval_episodes, seed=spec.eval_seed
        )
        if not all(math.isfinite(r) for r in ev["returns"]):
            raise FloatingPointError("non-finite evaluation return")
        params = [p for p in algo.agent.parameters()]
        if not all(bool(torch.isfinite(p).all()) for p in params):
            raise FloatingPointError("non-finite network parameters after training")
        layers = algo.agent.policy.layer_info()
        ops = count_ops(layers, ev["rates"], sim_steps=int(getattr(algo.config, "sim_steps", 1)))
        wall = float(getattr(algo, "wall_time", math.nan))
        record.update(
            status="done",
            error=None,
            resumed=resumed,
            env_steps=int(algo.env_step),
            wall_time_s=wall,
            env_steps_per_s=algo.env_step / wall if wall > 0 else math.nan,
            eval_mean=ev["mean_return"],
            eval_std=ev["std_return"],
            eval_returns=ev["returns"],
            firing_rates=ev["rates"],
            params=count_parameters(algo.agent),
            policy_params=count_parameters(algo.agent.policy),
            **ops,
        )
    except Exception as e:  # a failing run is recorded, never propagated
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        record.update(
            status="failed",
            error=f"{type(e).__name__}: {first}" if first else type(e).__name__,
            traceback=traceback.format_exc(),
        )
    record["seconds"] = time.perf_counter() - t0  # this call: training + evaluation
    record["cpu_seconds"] = time.process_time() - c0
    with contextlib.suppress(OSError):
        _write_status(spec.status_path, record)
    return _jsonable(record)


# ---------------------------------------------------------------------------- backends
def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _mp_context() -> Any:
    """Workers fork from a server process that has imported snrl once (Linux
    ``forkserver``: fast start, no threads inherited from this process); ``spawn`` elsewhere."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    with contextlib.suppress(Exception):
        ctx.set_forkserver_preload(["snrl.experiments._forkserver"])
    return ctx


def _run_local(
    specs: list[RunSpec], workers: int, on_result: Any, *, isolate: bool = False
) -> None:
    """Run ``specs`` in a process pool; a worker that dies (a crash outside Python)
    fails only its own run: the runs caught in the broken pool are retried one per pool."""
    ctx = _mp_context()
    broken: list[RunSpec] = []
    with cf.ProcessPoolExecutor(
        max_workers=1 if isolate else workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(os.getpid(), list(sys.path)),
    ) as pool:
        futures = {pool.submit(execute_run, s): s for s in specs}
        for fut in cf.as_completed(futures):
            spec = futures[fut]
            try:
                on_result(fut.result())
            except cf.process.BrokenProcessPool:
                broken.append(spec)
    if not broken:
        return
    if isolate:  # the single run of this pool killed its worker
        spec = broken[0]
        record = {
            "name": spec.name,
            "group": spec.group,
            "backbone": spec.backbone,
            "grid": dict(spec.grid),
            "seed": spec.seed,
            "algo": spec.algo,
            "run_dir": spec.run_dir,
            "status": "failed",
            "error": "worker process died (a crash outside Python, e.g. out of memory)",
        }
        _write_status(spec.status_path, record)
        on_result(record)
        return
    for spec in broken:
        _run_local([spec], 1, on_result, isolate=True)


def _parse_address(address: str) -> tuple[str, int] | None:
    text = address.strip()
    if text == "auto":
        return None
    text = re.sub(r"^[a-z]+://", "", text)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UserError(f"bad --address {address!r} (use HOST:PORT, ray://HOST:PORT or auto)")
    return host.strip("[]"), int(port)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    hp = _parse_address(address)
    if hp is None:
        return
    try:
        with socket.create_connection(hp, timeout=timeout):
            pass
    except OSError as e:
        raise UserError(
            f"cannot reach the Ray cluster at {address} ({e.strerror or e}; start it with "
            "`ray start --head` and pass its address, or omit --address for a local instance)"
        ) from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(
            "the ray backend needs Ray, which is not installed (pip install 'snrl[ray]')"
        ) from None
    return ray


def _run_ray(specs: list[RunSpec], workers: int | None, address: str | None, on_result) -> None:
    """Run ``specs`` as Ray tasks (one CPU each, at most ``workers`` in flight)."""
    ray = _import_ray()
    if address:
        _check_reachable(address)
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = dict(
            include_dashboard=False, log_to_driver=False, configure_logging=False
        )
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = workers or _default_workers()
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UserError(f"cannot start or join Ray at {address or 'local'}: {first}") from None
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(execute_run)
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = list(specs)
        inflight: dict[Any, RunSpec] = {}
        while queue or inflight:
            while queue and len(inflight) < limit:
                spec = queue.pop(0)
                inflight[task.remote(spec._asdict())] = spec
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                spec = inflight.pop(ref)
                try:
                    on_result(ray.get(ref))
                except Exception as e:  # the task's worker died
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    record = {
                        "name": spec.name,
                        "group": spec.group,
                        "backbone": spec.backbone,
                        "grid": dict(spec.grid),
                        "seed": spec.seed,
                        "algo": spec.algo,
                        "run_dir": spec.run_dir,
                        "status": "failed",
                        "error": f"Ray task failed: {type(e).__name__}: {first}",
                    }
                    _write_status(spec.status_path, record)
                    on_result(record)
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------------- the entry
@contextlib.contextmanager
def _lock(out: Path):
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / ".compare.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(
                f"another `snrl compare` is running on {out} (wait for it, or use another --out)"
            ) from None
        yield
    finally:
        os.close(fd)


def default_threshold(env_id: str) -> float | None:
    """The env's ``reward_threshold`` from its gymnasium spec (None if unknown)."""
    try:
        import gymnasium as gym

        value = gym.spec(env_id).reward_threshold
    except Exception:
        return None
    return None if value is None else float(value)


def compare(
    env_id: str,
    *,
    out: str | os.PathLike,
    algo: str = "ppo",
    backbones: Sequence[str] = ("lif", "mlp"),
    seeds: int | Sequence[int] = 5,
    steps: int = 100_000,
    grid: Mapping[str, Sequence[Any]] | None = None,
    sets: Sequence[str] = (),
    config_file: str | os.PathLike | None = None,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    threshold: float | None = None,
    eval_episodes: int = 20,
    eval_seed: int = 123,
    retry_failed: bool = False,
    verbose: bool = True,
) -> CompareResult:
    """Train every (backbone, grid point, seed), evaluate, and write the comparison.

    Args:
        env_id: gymnasium id (or ``module:Class``).
        out: the comparison directory (created; re-use it to resume).
        algo: a key of ``snrl.agents.ALGOS`` (``"ppo"``, ``"dqn"``).
        backbones: backbone names (``lif, alif, spylif, mlp, gru, lstm``).
        seeds: a count N (seeds 0..N-1) or the seeds themselves.
        steps: env steps per run.
        grid: config key -> values; the runs cover the Cartesian product (ablations).
        sets: ``"key=value"`` config overrides for every run.
        config_file: a TOML config applied before ``sets`` and the grid.
        workers: parallel runs (default: the usable CPU cores; Ray: the cluster's CPUs).
        backend: ``"local"`` (process pool) or ``"ray"``.
        address: Ray cluster address (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``); None
            starts a local Ray instance.
        threshold: return that counts as solved for "env steps to threshold" (default: the
            env's gymnasium ``reward_threshold``).
        eval_episodes: episodes of the final deterministic evaluation of each run.
        eval_seed: seed of the first evaluation episode.
        retry_failed: run again the runs recorded as failed.
        verbose: print one line per finished run.

    Returns:
        :class:`CompareResult`.

    Raises:
        UserError: bad request (see :func:`plan_runs`), unknown backend, Ray missing or
            unreachable, an existing run directory with a different config.
    """
    from snrl.experiments.report import write_outputs

    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r} (choose local or ray)")
    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers} (must be >= 1)")
    if address and backend != "ray":
        raise UserError("--address is for the Ray backend (add --backend ray)")
    specs = plan_runs(
        env_id,
        out=out,
        algo=algo,
        backbones=backbones,
        seeds=seeds,
        steps=steps,
        grid=grid,
        sets=sets,
        config_file=config_file,
        eval_episodes=eval_episodes,
        eval_seed=eval_seed,
    )
    if backend == "ray":
        _import_ray()
        if address:
            _check_reachable(address)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory (choose another --out)")
    for spec in specs:
        _check_existing(spec)
    if threshold is None:
        threshold = default_threshold(env_id)
    with _lock(out):
        (out / "status").mkdir(parents=True, exist_ok=True)
        (out / "runs").mkdir(parents=True, exist_ok=True)
        from snrl.io import write_json_atomic

        write_json_atomic(
            out / "compare.json",
            _jsonable(
                dict(
                    env_id=env_id,
                    algo=algo,
                    backbones=list(backbones),
                    seeds=seeds if isinstance(seeds, int) else list(seeds),
                    steps=int(steps),
                    grid={k: list(v) for k, v in (grid or {}).items()},
                    sets=list(sets),
                    threshold=threshold,
                    eval_episodes=eval_episodes,
                    eval_seed=eval_seed,
                    backend=backend,
                )
            ),
        )
        records: dict[str, dict[str, Any]] = {}
        todo: list[RunSpec] = []
        for spec in specs:
            st = _read_status(spec.status_path)
            if st and (
                st.get("status") == "done" or (st.get("status") == "failed" and not retry_failed)
            ):
                records[spec.name] = st
            else:
                todo.append(spec)
        n_total, n_skip = len(specs), len(specs) - len(todo)
        if verbose:
            print(
                f"snrl compare: {n_total} runs in {out}/runs ({n_skip} already recorded, "
                f"{len(todo)} to run, backend {backend})",
                flush=True,
            )
        counter = itertools.count(n_skip + 1)

        def on_result(rec: dict[str, Any]) -> None:
            records[rec["name"]] = rec
            if verbose:
                i = next(counter)
                if rec.get("status") == "done":
                    msg = f"eval {rec['eval_mean']:.1f}, {rec.get('wall_time_s', 0):.0f} s"
                else:
                    msg = f"FAILED: {rec.get('error')}"
                print(f"[{i}/{n_total}] {rec['name']}: {msg}", flush=True)

        if todo:
            if backend == "local":
                k = min(workers or _default_workers(), len(todo))
                _run_local(todo, k, on_result)
            else:
                _run_ray(todo, workers, address, on_result)
        runs = [records.get(s.name, {"name": s.name, "status": "missing"}) for s in specs]
        summary, pairwise = write_outputs(
            out, specs, runs, env_id=env_id, algo=algo, threshold=threshold
        )
    return CompareResult(out=out, runs=runs, summary=summary, pairwise=pairwise)
