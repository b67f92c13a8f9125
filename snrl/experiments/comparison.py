"""Multi-seed comparisons of backbones (spiking vs ANN) under one algorithm: :func:`compare`.

One comparison is a set of ordinary run directories, one per (backbone, grid point, seed)::

    DIR/
      compare.json           the manifest: marks DIR as a comparison, records the request
      runs/<name>/           config.json, metrics.csv, checkpoints/{best,last}.pt,
                             learning_curve.png  (same layout as ``snrl train --out``)
      status/<name>.json     "done" (with the run's results) or "failed" (with its error)
      runs.csv               one row per run
      summary.csv/.md        one row per backbone / grid point; pairwise tests
      pairwise.csv
      curves.png/.svg        mean episode return vs env steps, 95% bootstrap band over seeds
      report.md              the figures and tables together

The parts, by job: :mod:`~snrl.experiments.spec` (the spec and its plan),
:mod:`~snrl.experiments.store` (manifest, lock, status files),
:mod:`~snrl.experiments.execution` (one run), :mod:`~snrl.experiments.backends` (local
pool, Ray), :mod:`~snrl.experiments.report` (the summary files).

Re-running the same request skips runs whose status is ``done`` (and, unless
``retry_failed``, ``failed``), resumes runs that have ``checkpoints/last.pt`` from it
(the algorithm's own resume), and starts the others afresh. Summaries are rebuilt from the
status files each time, so there are never duplicate rows.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, NamedTuple

from snrl.experiments.spec import (
    CompareSpec,
    RunSpec,
    plan_runs,
)
from snrl.experiments.store import (
    check_compare_dir,
    check_existing_run,
    lock,
    read_status,
    write_manifest,
)

__all__ = ["CompareResult", "compare", "default_threshold"]


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


def default_threshold(env_id: str) -> float | None:
    """The env's ``reward_threshold`` from its gymnasium spec (None if unknown)."""
    try:
        import gymnasium as gym

        value = gym.spec(env_id).reward_threshold
    except Exception:
        return None
    return None if value is None else float(value)


def compare(spec: CompareSpec, *, verbose: bool = True) -> CompareResult:
    """Train every (backbone, grid point, seed) of ``spec``, evaluate, and write the
    comparison into ``spec.out``.

    The whole spec is validated first (every run's config, the env and its spaces, the
    directory, Ray when asked for): a bad request raises before anything is written.

    Args:
        spec: the comparison (:class:`CompareSpec`; from text, as the CLI gives it:
            :func:`~snrl.experiments.spec.spec_from_strings`).
        verbose: print one line per finished run.

    Returns:
        :class:`CompareResult`.

    Raises:
        UserError: a bad request (see :class:`CompareSpec` and
            :func:`~snrl.experiments.spec.plan_runs`), a non-empty ``out`` that is not a
            comparison directory, Ray missing or unreachable, an existing run directory
            with a different config, another comparison running on ``out``.
    """
    from snrl.experiments.backends import (
        check_reachable,
        default_workers,
        import_ray,
        run_local,
        run_ray,
    )
    from snrl.experiments.report import write_outputs

    if not isinstance(spec, CompareSpec):
        raise TypeError(
            f"compare() takes a CompareSpec, got {type(spec).__name__} (build one: "
            "CompareSpec(env=..., out=..., overrides={...}, grid={...}), or spec_from_strings)"
        )
    out = spec.out
    check_compare_dir(out)
    runs_planned = plan_runs(spec)
    if spec.backend == "ray":
        import_ray()
        if spec.address:
            check_reachable(spec.address)
    for run in runs_planned:
        check_existing_run(run.run_dir, run.config)
    threshold = spec.threshold if spec.threshold is not None else default_threshold(spec.env)
    with lock(out):
        request = spec.to_dict()
        request.pop("out")
        write_manifest(out, {**request, "threshold": threshold})
        (out / "status").mkdir(parents=True, exist_ok=True)
        (out / "runs").mkdir(parents=True, exist_ok=True)
        records: dict[str, dict[str, Any]] = {}
        todo: list[RunSpec] = []
        for run in runs_planned:
            st = read_status(run.status_path)
            if st and (
                st.get("status") == "done"
                or (st.get("status") == "failed" and not spec.retry_failed)
            ):
                records[run.name] = st
            else:
                todo.append(run)
        n_total, n_skip = len(runs_planned), len(runs_planned) - len(todo)
        if verbose:
            print(
                f"snrl compare: {n_total} runs in {out}/runs ({n_skip} already recorded, "
                f"{len(todo)} to run, backend {spec.backend})",
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
            if spec.backend == "local":
                k = min(spec.workers or default_workers(), len(todo))
                run_local(todo, k, on_result)
            else:
                run_ray(todo, spec.workers, spec.address, on_result, spec.gpus_per_run)
        runs = [records.get(r.name, {"name": r.name, "status": "missing"}) for r in runs_planned]
        summary, pairwise = write_outputs(
            out, runs_planned, runs, env_id=spec.env, algo=spec.algo, threshold=threshold
        )
    return CompareResult(out=out, runs=runs, summary=summary, pairwise=pairwise)
