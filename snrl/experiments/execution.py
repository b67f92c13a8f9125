"""One run of a comparison, in whatever process runs it: train (fresh or resumed from
``checkpoints/last.pt``), evaluate with spike counting, count parameters and operations, and
record the result in the run's status file. A failing run is recorded, never raised."""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snrl.errors import describe
from snrl.experiments.spec import RunSpec
from snrl.experiments.store import jsonable, write_status

__all__ = ["execute_run", "failed_record", "run_record"]


def run_record(spec: RunSpec) -> dict[str, Any]:
    """The fields of a run's status record that come from its plan."""
    return {
        "name": spec.name,
        "group": spec.group,
        "backbone": spec.backbone,
        "grid": dict(spec.grid),
        "seed": spec.seed,
        "algo": spec.algo,
        "run_dir": spec.run_dir,
    }


def failed_record(spec: RunSpec, error: str) -> dict[str, Any]:
    """Record (and write) a run that failed outside :func:`execute_run` (its worker died)."""
    record = {**run_record(spec), "status": "failed", "error": error}
    write_status(spec.status_path, record)
    return record


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
    record = run_record(spec)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        from snrl.agents import ALGOS
        from snrl.config import config_from_dict

        run_dir = Path(spec.run_dir)
        resumed = (run_dir / "checkpoints" / "last.pt").is_file()
        cfg = config_from_dict(ALGOS[spec.algo].Config, spec.config)
        if resumed:  # the env is the one the user named in the spec, not the file's
            algo = train_run(run_dir, resume=True, progress=False, env=cfg.env)
        else:
            algo = train_run(run_dir, algo=spec.algo, config=cfg, force=True, progress=False)
        ev = algo.evaluate(n_episodes=spec.eval_episodes, seed=spec.eval_seed)
        if not all(math.isfinite(r) for r in ev["returns"]):
            raise FloatingPointError("non-finite evaluation return")
        params = [p for p in algo.agent.parameters()]
        if not all(bool(torch.isfinite(p).all()) for p in params):
            raise FloatingPointError("non-finite network parameters after training")
        layers = algo.agent.actor.layer_info()
        substeps = int(getattr(algo.config, "substeps", 1))
        ops = count_ops(layers, ev["spike_rates"], substeps=substeps)
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
            spike_rates=ev["spike_rates"],
            params=count_parameters(algo.agent),
            policy_params=count_parameters(algo.agent.actor),
            **ops,
        )
    except Exception as e:  # a failing run is recorded, never propagated
        record.update(
            status="failed",
            error=describe(e),
            traceback=traceback.format_exc(),
        )
    record["seconds"] = time.perf_counter() - t0  # this call: training + evaluation
    record["cpu_seconds"] = time.process_time() - c0
    with contextlib.suppress(OSError):
        write_status(spec.status_path, record)
    return jsonable(record)
