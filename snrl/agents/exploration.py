"""Exploration policies for value-based agents, acting on a batch of envs.

``EpsGreedy`` anneals epsilon from ``start`` to ``end`` over ``decay_steps`` steps, then holds:

    linear:       eps(t) = start + (end - start) * min(1, t / decay_steps)
    exponential:  eps(t) = start * (end / start) ** min(1, t / decay_steps)   (start, end > 0)

``GaussianEpsGreedy`` anneals a location ``mu(t)`` linearly from ``mean_start`` to
``mean_end`` and draws each env's epsilon every step from ``Normal(mu(t), std)`` truncated to
``[0, 1]`` (rejection sampling, with an inverse-CDF fallback built on ``math.erf``).

Each row of a batch explores independently: with probability epsilon its action is uniform
over the A actions, otherwise ``argmax_a Q``. ``step`` is the caller's counter (env steps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from snrl.errors import UserError


def _as_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_q(q_values: Any) -> np.ndarray:
    q = _as_numpy(q_values)
    if q.ndim != 2:
        raise UserError(
            f"q_values has shape {q.shape}, expected (B, A) (add a batch dimension for one env)"
        )
    return q


class Greedy:
    """Always ``argmax_a Q`` (evaluation)."""

    def __init__(self, *, seed: int | np.random.Generator | None = None) -> None:
        self.rng = _rng(seed)

    def epsilon(self, step: int) -> float:
        """0 at every step."""
        return 0.0

    def select(self, q_values: Any, step: int) -> np.ndarray:
        """(B,) int64 greedy actions for (B, A) Q-values (numpy or tensor)."""
        return _check_q(q_values).argmax(axis=1).astype(np.int64)


class _EpsilonBase(Greedy):
    """Epsilon-greedy given per-row epsilons, on a schedule of ``decay_steps`` env steps."""

    def __init__(self, *, decay_steps: int, seed: int | np.random.Generator | None) -> None:
        super().__init__(seed=seed)
        if int(decay_steps) < 1:
            raise UserError(f"decay_steps must be >= 1, got {decay_steps} (pass a step count)")
        self.decay_steps = int(decay_steps)

    def _progress(self, step: int) -> float:
        """The part of the schedule done at env step ``step``, in [0, 1]."""
        return min(1.0, max(0, int(step)) / self.decay_steps)

    def _epsilons(self, step: int, batch: int) -> float | np.ndarray:
        """Epsilon of each of ``batch`` rows: one float for all of them, or (batch,)."""
        return self.epsilon(step)

    def select(self, q_values: Any, step: int) -> np.ndarray:
        """(B,) int64 actions: uniform with probability epsilon per row, else greedy."""
        q = _check_q(q_values)
        b, n_actions = q.shape
        greedy = q.argmax(axis=1)
        explore = self.rng.random(b) < self._epsilons(step, b)
        random_actions = self.rng.integers(0, n_actions, size=b)
        return np.where(explore, random_actions, greedy).astype(np.int64, copy=False)


class EpsGreedy(_EpsilonBase):
    """Epsilon-greedy with a linear or exponential schedule.

    Args:
        start: epsilon at step 0, in [0, 1].
        end: epsilon from ``decay_steps`` on, in [0, 1] (> 0 for ``"exponential"``).
        decay_steps: steps over which epsilon moves from start to end (>= 1).
        schedule: ``"linear"`` or ``"exponential"`` (geometric interpolation).
        seed: seed or ``np.random.Generator``.
    """

    def __init__(
        self,
        *,
        start: float = 1.0,
        end: float = 0.05,
        decay_steps: int = 10_000,
        schedule: str = "linear",
        seed: int | np.random.Generator | None = None,
    ) -> None:
        for name, v in (("start", start), ("end", end)):
            if not 0.0 <= float(v) <= 1.0:
                raise UserError(f"{name} must be in [0, 1], got {v} (it is a probability)")
        super().__init__(decay_steps=decay_steps, seed=seed)
        if schedule not in ("linear", "exponential"):
            raise UserError(f"unknown schedule {schedule!r} (use 'linear' or 'exponential')")
        if schedule == "exponential" and (float(start) <= 0 or float(end) <= 0):
            raise UserError(
                f"an exponential schedule needs start > 0 and end > 0, got {start}, {end} "
                "(use schedule='linear' to reach 0)"
            )
        self.start = float(start)
        self.end = float(end)
        self.schedule = schedule

    def epsilon(self, step: int) -> float:
        """Epsilon at env step ``step``."""
        frac = self._progress(step)
        if self.schedule == "linear":
            return self.start + (self.end - self.start) * frac
        return self.start * (self.end / self.start) ** frac


def _normal_cdf(x: float) -> float:
    # erfc keeps relative precision in the lower tail, where 1 + erf(x) would round to 0.
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def truncated_normal(
    rng: np.random.Generator,
    mean: float,
    std: float,
    size: int,
    low: float = 0.0,
    high: float = 1.0,
) -> np.ndarray:
    """Draw ``size`` values of ``Normal(mean, std)`` conditioned on ``[low, high]``.

    Rejection sampling for a few rounds; rows still missing (when the interval holds little
    mass) are drawn by inverting the CDF with bisection on ``math.erf``.
    """
    out = np.full(size, np.nan)
    for _ in range(8):
        missing = np.isnan(out)
        if not missing.any():
            return out
        draw = rng.normal(mean, std, size=int(missing.sum()))
        ok = (draw >= low) & (draw <= high)
        draw[~ok] = np.nan
        out[missing] = draw
    # Reflect so that the interval lies in the lower tail, where the CDF is accurate.
    flip = mean > 0.5 * (low + high)
    m = low + high - mean if flip else mean
    c_low = _normal_cdf((low - m) / std)
    c_high = _normal_cdf((high - m) / std)
    for i in np.flatnonzero(np.isnan(out)):
        u = c_low + rng.random() * (c_high - c_low)
        lo, hi = low, high
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if _normal_cdf((mid - m) / std) < u:
                lo = mid
            else:
                hi = mid
        x = 0.5 * (lo + hi)
        out[i] = low + high - x if flip else x
    return out


class GaussianEpsGreedy(_EpsilonBase):
    """Epsilon-greedy whose epsilon is drawn per row and step from a truncated normal.

    Args:
        mean_start: location of the normal at step 0.
        mean_end: location from ``decay_steps`` on (linear in between).
        std: scale of the normal (> 0).
        decay_steps: steps of the linear decay of the location (>= 1).
        seed: seed or ``np.random.Generator``.
    """

    def __init__(
        self,
        *,
        mean_start: float = 1.0,
        mean_end: float = 0.05,
        std: float = 0.1,
        decay_steps: int = 10_000,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if not float(std) > 0:
            raise UserError(f"std must be > 0, got {std} (e.g. 0.1)")
        super().__init__(decay_steps=decay_steps, seed=seed)
        self.mean_start = float(mean_start)
        self.mean_end = float(mean_end)
        self.std = float(std)

    def epsilon(self, step: int) -> float:
        """Location ``mu(step)`` of the (untruncated) normal epsilon is drawn from."""
        frac = self._progress(step)
        return self.mean_start + (self.mean_end - self.mean_start) * frac

    def sample_epsilon(self, step: int, size: int) -> np.ndarray:
        """(size,) epsilons in [0, 1] drawn at ``step``."""
        return truncated_normal(self.rng, self.epsilon(step), self.std, size)

    def _epsilons(self, step: int, batch: int) -> np.ndarray:
        return self.sample_epsilon(step, batch)


class PassThrough(Greedy):
    """Returns the actions it is given (for policies that explore by themselves)."""

    def select(self, q_values: Any, step: int) -> np.ndarray:
        """The given (B, ...) actions, as a numpy array."""
        return _as_numpy(q_values)


EXPLORATIONS: dict[str, type[Greedy]] = {
    "greedy": Greedy,
    "eps_greedy": EpsGreedy,
    "gaussian_eps_greedy": GaussianEpsGreedy,
    "pass_through": PassThrough,
}


def make_exploration(name: str, **kwargs: Any) -> Greedy:
    """Build an exploration policy by config name.

    Args:
        name: one of ``greedy``, ``eps_greedy``, ``gaussian_eps_greedy``, ``pass_through``.
        **kwargs: the class's keyword arguments (e.g. ``start``, ``end``, ``decay_steps``,
            ``seed``).
    """
    cls = EXPLORATIONS.get(name)
    if cls is None:
        raise UserError(
            f"unknown exploration {name!r} (use one of {', '.join(sorted(EXPLORATIONS))})"
        )
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise UserError(
            f"bad arguments for exploration {name!r}: {e} (check the keyword names)"
        ) from e
