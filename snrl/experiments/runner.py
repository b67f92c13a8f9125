"""Run one training into a run directory, fresh or resumed: what ``snrl train`` and
``snrl compare`` share.

Layout of a run directory (DESIGN.md): ``config.json`` (``{"algo": ..., **config}``),
``metrics.csv``, ``checkpoints/best.pt``, ``checkpoints/last.pt``, ``learning_curve.png``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from snrl.agents import ALGOS, load_algo
from snrl.config import config_to_dict
from snrl.errors import UserError
from snrl.io import write_json_atomic
from snrl.training.rundir import prepare_run_dir

__all__ = ["train_run"]


def train_run(
    run_dir: str | os.PathLike,
    *,
    algo: str | None = None,
    config: Any = None,
    total_steps: int | None = None,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    env: str | None = None,
    trust_env_module: bool = False,
    threads: int | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """Train into ``run_dir``: a fresh run from ``algo`` + ``config``, or ``resume`` from
    ``run_dir/checkpoints/last.pt`` (the algorithm's own resume: counters, optimizer, RNG and
    metrics.csv continue where the checkpoint was written).

    Args:
        run_dir: the run directory (see :mod:`snrl.training.rundir` for what may be
            created, reused or replaced).
        algo: algorithm name (a key of ``snrl.agents.ALGOS``); fresh runs only.
        config: that algorithm's config; fresh runs only.
        total_steps: env steps to train to (default: the config's ``total_steps``).
        resume: continue the run in ``run_dir``.
        force: replace an existing run in ``run_dir`` (fresh runs; deletes only the files
            snrl wrote there).
        progress: show a progress bar.
        env: resume only: the env, named by the caller (replaces the saved ``env``).
        trust_env_module: resume only: import a ``module:Class`` env named by the checkpoint.
        threads: resume only: torch threads instead of the saved ``threads`` (None: saved).
        on_eval: called with each metrics row that has a periodic evaluation, after the row
            is logged (and best.pt / last.pt written); an exception it raises ends the run
            there (``snrl tune``'s pruner). Until ``snrl.callbacks`` exists, the row is taken
            from the algorithm's row logger of this object only.

    Returns:
        The algorithm object after training (its envs closed; ``evaluate`` still works).

    Raises:
        UserError: unknown algorithm, missing config, a run directory that does not fit the
            request (see :func:`snrl.training.rundir.prepare_run_dir`).
    """
    if resume:
        out = prepare_run_dir(run_dir, resume=True, force=False)
        obj = load_algo(
            out / "checkpoints" / "last.pt",
            run_dir=out,
            env=env,
            trust_env_module=trust_env_module,
        )
        total = total_steps if total_steps is not None else obj.config.total_steps
        if threads is not None:  # how fast, not what: the one key a resume may change
            obj.config = dataclasses.replace(obj.config, threads=threads)
    else:
        if algo not in ALGOS:
            raise UserError(f"unknown algorithm {algo!r} (choose one of {', '.join(ALGOS)})")
        if config is None:
            raise UserError("a fresh run needs a config (pass config=ALGOS[algo].Config(...))")
        # validates env and spaces before the run directory is touched
        obj = ALGOS[algo](config=config, run_dir=run_dir, overwrite=force)
        # the resolved config (dt derived from the task): what the run used
        write_json_atomic(obj.run_dir / "config.json", {"algo": algo, **config_to_dict(obj.config)})
        total = total_steps if total_steps is not None else config.total_steps
    if on_eval is not None:
        _watch_evaluations(obj, on_eval)
    try:
        obj.learn(total, progress=progress)
    finally:
        obj.close()
    return obj


def _watch_evaluations(obj: Any, on_eval: Callable[[dict[str, Any]], None]) -> None:
    """Call ``on_eval(row)`` after each evaluated row that ``obj`` logs (this object only: the
    class is untouched)."""
    log_row = obj._log_row

    def watched(logger: Any, row: dict[str, Any], elapsed: float, *, evaluated: bool) -> None:
        log_row(logger, row, elapsed, evaluated=evaluated)
        if evaluated:
            on_eval(dict(row))

    obj._log_row = watched
