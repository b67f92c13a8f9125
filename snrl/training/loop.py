"""What every algorithm's training loop shares: the metrics row sink (history, metrics.csv,
progress bar), best/last checkpoints, the learning curve, and checkpoint save/load.

The algorithm object is duck-typed: ``config`` (a frozen dataclass with ``checkpoint_interval``
and ``seed``), ``agent`` (an ``nn.Module``), ``optimizer``, ``run_dir`` (Path or None),
``env_step``, ``n_updates``, ``best_eval``, ``generator`` (torch.Generator), ``algo_name``,
``custom_backbones`` and ``Config``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from snrl.config import config_from_dict, config_to_dict
from snrl.envs.make import check_env_id_trusted
from snrl.errors import UserError
from snrl.training.checkpoint import (
    ListOf,
    Where,
    check_schema,
    generator_state_schema,
    load_checkpoint,
    rng_state,
    rng_state_schema,
    save_checkpoint,
)
from snrl.training.metrics import MetricsWriter
from snrl.training.plots import plot_learning_curve
from snrl.training.progress import Progress
from snrl.training.rundir import continue_run_dir


class RunLogger:
    """Receives one metrics row per update and does the run-directory bookkeeping."""

    def __init__(self, algo: Any, total_steps: int, *, progress: bool = True):
        self.algo = algo
        self.total = total_steps
        self.history: dict[str, list] = {}
        self.writer: MetricsWriter | None = None
        self.wall_offset = float(getattr(algo, "wall_time", 0.0))
        self.progress = Progress(total_steps, initial=algo.env_step, disable=not progress)
        self._last_step = algo.env_step

    def _metrics_path(self) -> Path | None:
        return None if self.algo.run_dir is None else self.algo.run_dir / "metrics.csv"

    def _open(self, row: dict[str, Any]) -> None:
        path = self._metrics_path()
        if path is None:
            return
        fields = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean"]
        fields += [k for k in row if k not in fields]
        if path.exists() and self.algo.n_updates > 1:
            self.writer = MetricsWriter.resume(path, fields, upto_env_step=self._last_step)
        else:
            self.writer = MetricsWriter(path, fields)

    def log(self, row: dict[str, Any], elapsed: float, *, evaluated: bool) -> None:
        algo = self.algo
        row = dict(row)
        row["wall_time"] = self.wall_offset + elapsed
        algo.wall_time = row["wall_time"]
        row.setdefault("eval_return_mean", math.nan)
        if self.writer is None:
            self._open(row)
        for k, v in row.items():
            self.history.setdefault(k, []).append(v)
        if self.writer is not None:
            self.writer.append({k: v for k, v in row.items() if k in self.writer.fieldnames})
        self.progress.update(
            algo.env_step - self._last_step,
            ret=row.get("episode_return_mean", math.nan),
            eval=row["eval_return_mean"],
        )
        self._last_step = algo.env_step
        if algo.run_dir is None:
            if evaluated:
                algo.best_eval = max(algo.best_eval, row["eval_return_mean"])
            return
        ckpt = algo.run_dir / "checkpoints"
        if evaluated and row["eval_return_mean"] >= algo.best_eval:
            algo.best_eval = row["eval_return_mean"]
            save_algo_checkpoint(algo, ckpt / "best.pt")
        if algo.n_updates % algo.config.checkpoint_interval == 0 or algo.env_step >= self.total:
            save_algo_checkpoint(algo, ckpt / "last.pt")

    def close(self) -> None:
        self.progress.close()
        if self.writer is not None:
            self.writer.close()
            plot_learning_curve(
                self._metrics_path(),
                self.algo.run_dir / "learning_curve.png",
                title=f"{self.algo.algo_name.upper()} {self.algo.config.backbone} on "
                f"{self.algo.config.env}",
            )


def save_algo_checkpoint(algo: Any, path: str | Path) -> None:
    """Write config, agent, optimizer, counters and RNG states atomically."""
    save_checkpoint(
        Path(path),
        {
            "algo": algo.algo_name,
            "config": config_to_dict(algo.config),
            "custom_backbones": bool(algo.custom_backbones),
            "agent": algo.agent.state_dict(),
            "optimizer": algo.optimizer.state_dict(),
            "counters": {
                "env_step": int(algo.env_step),
                "n_updates": int(algo.n_updates),
                "best_eval": float(algo.best_eval),
                "wall_time": float(getattr(algo, "wall_time", 0.0)),
            },
            "rng": rng_state(),  # read by snrl 0.1; snrl never draws from the global RNGs
            "generator": algo.generator.get_state(),
            "agent_generator": algo.agent.generator.get_state(),
            "extra": algo.extra_state() if hasattr(algo, "extra_state") else {},
        },
    )


def checkpoint_schema() -> dict[str, Any]:
    """The schema every algorithm checkpoint's payload must match before any of it is used."""
    finite_nonneg = Where(float, lambda v: math.isfinite(v) and v >= 0, "finite and >= 0")
    return {
        "algo": str,
        "config": dict,
        "custom_backbones": bool,
        "agent": dict,  # contents: load_state_dict checks them against the built agent
        "optimizer": {"state": dict, "param_groups": ListOf(dict)},
        "counters": {
            "env_step": Where(int, lambda v: v >= 0, ">= 0"),
            "n_updates": Where(int, lambda v: v >= 0, ">= 0"),
            "best_eval": Where(float, lambda v: not math.isnan(v), "a number (not NaN)"),
            "wall_time": finite_nonneg,
        },
        "rng": rng_state_schema(),
        "generator": generator_state_schema(),
        "agent_generator?": generator_state_schema(),
        "extra?": dict,
    }


def _corrupt(path: Any, what: str) -> UserError:
    return UserError(
        f"checkpoint {path} is corrupt or not an snrl checkpoint ({what}; re-create it or use "
        "another checkpoint)"
    )


def load_algo_checkpoint(
    cls: Any,
    path: str | Path,
    *,
    policy=None,
    critic=None,
    run_dir=None,
    env: str | None = None,
    trust_env_module: bool = False,
):
    """Rebuild an algorithm from :func:`save_algo_checkpoint`'s file.

    The payload is checked against :func:`checkpoint_schema` before any of it is used. The
    env named by the file is made only when it is a registered gymnasium id: a
    ``module:Class`` env is imported only when ``trust_env_module`` is True, or when the
    caller names the env itself with ``env`` (which replaces the saved ``env``).
    ``run_dir`` (optional) is opened with
    :func:`snrl.training.rundir.continue_run_dir`: training continues into it.
    """
    d = load_checkpoint(Path(path))
    if "algo" not in d or "config" not in d or "agent" not in d:
        raise UserError(f"{path} is not an snrl agent checkpoint (pass a checkpoints/*.pt file)")
    err = check_schema(d, checkpoint_schema(), "payload")
    if err:
        raise _corrupt(path, err)
    if d["algo"] != cls.algo_name:
        raise UserError(
            f"{path} holds a {d['algo']!r} checkpoint, not {cls.algo_name!r} "
            f"(load it with snrl.{d['algo'].upper()}.load)"
        )
    if d["custom_backbones"] and policy is None and critic is None:
        raise UserError(
            f"{path} was trained with custom backbones (pass policy=/critic= modules to load)"
        )
    saved = dict(d["config"])
    if env is not None:
        saved.pop("env_id", None)  # the key of snrl 0.1 run files
        saved["env"] = env
    else:
        check_env_id_trusted(
            saved.get("env", saved.get("env_id")),
            source=f"checkpoint {path}",
            trusted=trust_env_module,
        )
    try:
        cfg = config_from_dict(cls.Config, saved)
    except ValueError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _corrupt(path, f"its config: {first}") from None
    algo = cls(config=cfg, policy=policy, critic=critic, run_dir=None)
    try:
        algo.agent.load_state_dict(d["agent"])
        algo.optimizer.load_state_dict(d["optimizer"])
    except Exception as e:  # shapes, keys, optimizer state of another layout
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"checkpoint {path} does not fit this agent: {first} (was it written by another "
            "snrl version or config?)"
        ) from None
    c = d["counters"]
    algo.env_step, algo.n_updates = c["env_step"], c["n_updates"]
    algo.best_eval, algo.wall_time = float(c["best_eval"]), float(c["wall_time"])
    algo.generator.set_state(d["generator"])
    if "agent_generator" in d:  # absent from snrl 0.1 checkpoints (they drew from torch's RNG)
        algo.agent.generator.set_state(d["agent_generator"])
    if hasattr(algo, "load_extra_state"):
        try:
            algo.load_extra_state(d.get("extra", {}))
        except UserError:
            raise
        except Exception as e:
            raise _corrupt(path, f"its {algo.algo_name} state: {type(e).__name__}: {e}") from None
    if run_dir is not None:
        algo.run_dir = continue_run_dir(run_dir)
    return algo
