"""Run one training into a run directory, fresh or resumed: what ``snrl train`` and
``snrl compare`` share.

Layout of a run directory (DESIGN.md): ``config.json`` (``{"algo": ..., **config}``),
``metrics.csv``, ``checkpoints/best.pt``, ``checkpoints/last.pt``, ``learning_curve.png``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from snrl.agents import ALGOS, load_algo
from snrl.config import config_to_dict
from snrl.errors import UserError
from snrl.io import write_json_atomic
from snrl.training.rundir import lock_run_dir, prepare_run_dir

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
    callbacks: Any = None,
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
        callbacks: passed to ``learn`` (:mod:`snrl.callbacks`); their ``on_training_start``
            sees the algorithm built, its config resolved (the neuron ``dt`` derived from
            the task): ``snrl train`` prints the neuron time there.

    Returns:
        The algorithm object after training (its envs closed; ``evaluate`` still works).

    The run directory's lock (:func:`snrl.training.rundir.lock_run_dir`) is held from the
    first check to the end of training, so a second run into the same directory is refused
    (naming this one) instead of mixing its files with this run's.

    Raises:
        UserError: unknown algorithm, missing config, a run directory that does not fit the
            request (see :func:`snrl.training.rundir.prepare_run_dir`), another process
            writing ``run_dir``.
    """
    with lock_run_dir(run_dir):
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
            write_json_atomic(
                obj.run_dir / "config.json", {"algo": algo, **config_to_dict(obj.config)}
            )
            total = total_steps if total_steps is not None else config.total_steps
        try:
            obj.learn(total, callbacks=callbacks, progress=progress)
        finally:
            obj.close()
        return obj
