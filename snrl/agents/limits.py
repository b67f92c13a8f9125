"""What one run may ask for, checked before anything is allocated (docs/reliability.md,
"Inputs"): the limits of seeds, envs, steps and memory, the environment variables that cap a
call for smoke runs (docs/cli.md, "Small budgets"), and the finite checks that stop training
on a NaN before it reaches a checkpoint."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np
import torch
from torch import nn

from snrl.errors import NonFiniteError, UserError


def check(cond: bool, msg: str) -> None:
    """Raise :class:`UserError` with ``msg`` unless ``cond`` (config validation)."""
    if not cond:
        raise UserError(msg)


# ---- limits: what one run may ask for (docs/reliability.md, "Inputs") ------------------------
#: Seeds are integers in [0, MAX_SEED] (numpy's legacy seeding takes < 2**32; derived seeds
#: such as ``seed + 10_000`` must stay valid).
MAX_SEED = 2**31 - 1
#: Envs built at once: ``n_envs``, ``eval_episodes`` and ``evaluate(n_episodes=...)`` (one
#: env per episode).
MAX_ENVS = 4096
#: Envs of an ``asynchronous`` vector env (one process each).
MAX_ASYNC_ENVS = 256
#: Env steps of one run (at 10^5 steps/s, about four months).
MAX_TOTAL_STEPS = 10**12
#: Neuron steps per env step of a spiking backbone (``substeps``).
MAX_SUBSTEPS = 1000
#: Share of this machine's physical memory that the estimated buffers and networks may take.
MEMORY_FRACTION = 0.8


def check_int(name: str, value: Any, lo: int, hi: int, hint: str = "") -> int:
    """``value`` as an int in ``[lo, hi]``, else :class:`UserError` naming ``name``.

    Used for arguments of the algorithms' methods (``evaluate(n_episodes=...)``), which a
    config does not check. ``hint`` ends the message (e.g. why there is an upper bound).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise UserError(
            f"{name}={value!r} is a {type(value).__name__} (pass an integer in [{lo}, {hi}])"
        )
    if not lo <= value <= hi:
        raise UserError(f"{name}={value} is out of range (pass an integer in [{lo}, {hi}]{hint})")
    return int(value)


# ---- small budgets for smoke runs (docs/cli.md, "Small budgets") ---------------------------
#: Environment variables that cap what one call may run: ``SNRL_MAX_STEPS`` caps
#: ``learn(total_steps)`` and the length of a ``rollout``; ``SNRL_MAX_EPISODES`` caps
#: ``evaluate(n_episodes)``. The docs' code blocks run under them in the tests.
CAP_VARS = ("SNRL_MAX_STEPS", "SNRL_MAX_EPISODES")
_noticed: set[str] = set()  # the notices already printed by this process (one line each)


def env_cap(var: str) -> int | None:
    """The cap set by the environment variable ``var`` (None when unset or empty)."""
    text = os.environ.get(var, "").strip()
    if not text:
        return None
    try:
        cap = int(text.replace("_", ""))
    except ValueError:
        cap = 0
    if cap < 1:
        raise UserError(f"{var}={text!r} (set it to an integer >= 1, or unset it)")
    return cap


def capped(value: int, var: str, what: str) -> int:
    """``value``, or the cap of ``var`` when it is smaller; then a one-line notice on stderr
    (once per process and message)."""
    cap = env_cap(var)
    if cap is None or value <= cap:
        return value
    notice(f"snrl: {what} {value} capped at {cap} by {var}")
    return cap


def notice(line: str) -> None:
    """Print ``line`` on stderr, once per process."""
    if line not in _noticed:
        _noticed.add(line)
        print(line, file=sys.stderr, flush=True)


def memory_limit() -> int:
    """Bytes a run may plan to allocate: ``MEMORY_FRACTION`` of the physical memory (16 GiB
    where the platform does not say)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        total = 16 * 2**30
    return int(total * MEMORY_FRACTION)


def gib(n: float) -> str:
    g = n / 2**30
    return f"{g:.3g} GiB" if g < 1000 else f"{g:,.0f} GiB"


def check_finite(value: Any, quantity: str, *, env_step: int, cause: str) -> None:
    """Stop training with :class:`NonFiniteError` unless ``value`` (a float, array or
    tensor) is finite everywhere.

    Called before anything computed from ``value`` is stored or checkpointed, so
    ``checkpoints/last.pt`` keeps the last good state.

    Args:
        value: What to check.
        quantity: Its name in the message ("policy loss", "reward").
        env_step: The env step of the run where it happened.
        cause: The likely cause and its fix, named in the message.
    """
    # the short ways (the env's rewards are checked every step)
    if isinstance(value, float) and math.isfinite(value):
        return
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        if value.dtype.kind != "f" or np.isfinite(value).all():
            return
    t = torch.as_tensor(value)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        bad = t[~torch.isfinite(t)].flatten()[0].item()
        raise NonFiniteError(
            f"training stopped at env step {env_step}: the {quantity} is {bad} "
            f"(likely cause: {cause}; checkpoints/last.pt keeps the last good state)"
        )


def check_parameters(module: nn.Module, *, env_step: int) -> None:
    """:func:`check_finite` for every parameter of ``module``, naming the first bad one."""
    for name, p in module.named_parameters():
        check_finite(
            p.detach(),
            f"parameter {name}",
            env_step=env_step,
            cause="a diverging update; lower lr or max_grad_norm, or scale the rewards down",
        )
