"""Task time: how long one env step lasts, for the envs that say so.

A spiking backbone's neuron step is ``dt`` seconds and it runs ``substeps`` neuron steps per
env step (docs/architecture.md, "Time"). When the task declares the duration of its step,
the agents derive the neuron ``dt`` from it, so that a 10 ms membrane means 10 ms of task
time. Only NeuroGym tasks are trusted to declare it: their ``dt`` is the step in
milliseconds (Molano-Mazon et al., NeuroGym, 2022); so are env classes that set
``declares_task_time = True``, with ``dt`` in ms as NeuroGym's (snrl.tasks' multitask env).
Other envs' attributes of the same name mean other things (MuJoCo's ``dt`` is in seconds
and includes the frame skip; CartPole's ``tau`` is its integration step, not a time the
agent lives in), so they are not read.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["env_time_step"]


def _neurogym_base() -> type | None:
    """NeuroGym's env base class if NeuroGym is imported (a NeuroGym env imports it)."""
    core = sys.modules.get("neurogym.core")
    return getattr(core, "BaseEnv", None) if core is not None else None


def env_time_step(env: Any) -> float | None:
    """Seconds of task time per env step, or None when the env does not declare it.

    Args:
        env: a gymnasium env (wrapped or not); its ``unwrapped`` env is inspected.

    Returns:
        ``env.unwrapped.dt / 1000`` for a NeuroGym task (``dt`` in ms, positive and finite),
        else None.
    """
    base = _neurogym_base()
    inner = getattr(env, "unwrapped", env)
    # snrl's own task envs that are no NeuroGym class (snrl.tasks' multitask env) say so
    declared = getattr(type(inner), "declares_task_time", False) is True
    if not declared and (base is None or not isinstance(inner, base)):
        return None
    dt = getattr(inner, "dt", None)
    try:
        ms = float(dt)
    except (TypeError, ValueError):
        return None
    return ms / 1000.0 if math.isfinite(ms) and ms > 0 else None
