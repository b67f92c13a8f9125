"""Which stored items a replay batch draws: uniformly, or in proportion to priority.

Prioritized replay (Schaul et al. 2016, proportional variant): item ``i`` is drawn with
probability ``P(i) = p_i^alpha / sum_k p_k^alpha`` by stratified sampling over a
:class:`~snrl.buffers.sumtree.SumTree`; importance weights
``w_i = (N P(i))^-beta / max_j (N P(j))^-beta`` (the max weight belongs to the smallest
probability, tracked by the tree's min). New items get the largest priority so far, so each
is replayed soon. An item's priority comes from its TD errors: ``|delta| + eps`` for a
transition, R2D2's mix ``eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t| + eps`` over
the valid trained steps of a sequence.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from snrl.buffers.storage import make_rng, require
from snrl.buffers.sumtree import SumTree
from snrl.errors import UserError


def _as_np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


class UniformSampler:
    """Every stored item equally likely (with replacement); weights are ones.

    Args:
        seed: seed or ``np.random.Generator`` for sampling.
    """

    kind = "uniform"

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        self.rng = make_rng(seed)

    def attach(self, capacity: int) -> None:
        """Called once by the buffer with its capacity."""

    def on_write(self, idx: np.ndarray) -> None:
        """Rows ``idx`` were (over)written."""

    def draw(self, size: int, batch_size: int, step: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``batch_size`` indices in ``[0, size)`` and their importance weights."""
        return self.rng.integers(0, size, size=batch_size), np.ones(batch_size)

    def update(self, idx: Any, td_errors: Any, mask: Any, size: int) -> np.ndarray:
        raise UserError(
            "uniform replay has no priorities (build the buffer with a PrioritizedSampler)"
        )

    def describe(self) -> str:
        return "uniform"

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> UniformSampler:
        return cls()

    def arrays(self, size: int) -> dict[str, np.ndarray]:
        return {}

    def restore(self, arrays: dict[str, np.ndarray], size: int, path: str | os.PathLike) -> None:
        pass


class PrioritizedSampler:
    """Proportional prioritization over a sum tree, with annealed importance weights.

    ``beta`` rises linearly from ``beta0`` to 1 over ``beta_steps`` draws; pass ``step=`` to
    the buffer's ``sample`` to anneal by your own counter instead (e.g. env steps), then
    ``beta_steps`` is in that unit.

    Args:
        alpha: priority exponent (0 = uniform; 0.6 for transitions, R2D2 uses 0.9).
        beta0: importance-sampling exponent at the start (0.4; R2D2 0.6).
        beta_steps: draws (or ``step`` units) over which beta reaches 1.
        eta: weight of the max in a sequence's priority (R2D2: 0.9).
        eps: added to priorities so none is 0.
        seed: seed or ``np.random.Generator`` for sampling.
    """

    kind = "prioritized"

    def __init__(
        self,
        *,
        alpha: float = 0.6,
        beta0: float = 0.4,
        beta_steps: int = 100_000,
        eta: float = 0.9,
        eps: float = 1e-6,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if not float(alpha) >= 0:
            raise UserError(f"alpha must be >= 0, got {alpha} (0.6 is usual, 0.9 in R2D2)")
        if not 0.0 <= float(beta0) <= 1.0:
            raise UserError(f"beta0 must be in [0, 1], got {beta0} (0.4 is usual, 0.6 in R2D2)")
        if int(beta_steps) < 1:
            raise UserError(f"beta_steps must be >= 1, got {beta_steps} (pass a positive count)")
        if not 0.0 <= float(eta) <= 1.0:
            raise UserError(f"eta must be in [0, 1], got {eta} (0.9 in R2D2)")
        if not float(eps) > 0:
            raise UserError(f"eps must be > 0, got {eps} (1e-6 is usual)")
        self.alpha = float(alpha)
        self.beta0 = float(beta0)
        self.beta_steps = int(beta_steps)
        self.eta = float(eta)
        self.eps = float(eps)
        self.rng = make_rng(seed)
        self.max_priority = 1.0
        self.n_sampled = 0
        self.tree = SumTree(1)

    def attach(self, capacity: int) -> None:
        """Called once by the buffer: one tree leaf per storage row."""
        self.tree = SumTree(int(capacity))

    def on_write(self, idx: np.ndarray) -> None:
        """New rows get the largest priority seen so far."""
        self.tree.update(idx, self.max_priority**self.alpha)

    def beta(self, step: int | None = None) -> float:
        """Importance-sampling exponent at ``step`` (default: the number of draws so far)."""
        t = self.n_sampled if step is None else int(step)
        return self.beta0 + (1.0 - self.beta0) * min(1.0, max(t, 0) / self.beta_steps)

    def draw(self, size: int, batch_size: int, step: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Stratified proportional draw: ``batch_size`` equal segments of the priority mass,
        one item uniformly within each; weights ``(N P_i)^-beta / (N P_min)^-beta``."""
        b = int(batch_size)
        beta = self.beta(step)
        self.n_sampled += 1
        total = self.tree.total
        idx = self.tree.find((np.arange(b) + self.rng.random(b)) * (total / b))
        weights = ((self.tree[idx] / total) / (self.tree.min / total)) ** (-beta)
        return idx, weights

    def update(self, idx: Any, td_errors: Any, mask: Any, size: int) -> np.ndarray:
        """Set the priorities of sampled items from their TD errors.

        Args:
            idx: (B,) indices of a sampled batch.
            td_errors: (B,) one TD error per transition, or (T', B) time-first TD errors of
                the trained steps of sequences.
            mask: None, or (T', B) 1 for the valid steps of sequences.
            size: the number of stored items.

        Returns:
            (B,) the new priorities (before ``alpha``).
        """
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        td = np.abs(_as_np(td_errors))
        if td.ndim == 2:
            if td.shape[1] != idx.size:
                raise UserError(
                    f"td_errors has shape {td.shape}, expected (T, {idx.size}) "
                    "(pass time-first TD errors of the sampled batch)"
                )
            m = np.ones_like(td) if mask is None else _as_np(mask)
            if m.shape != td.shape:
                raise UserError(f"mask has shape {m.shape}, expected {td.shape} (match td_errors)")
            mean = (td * m).sum(axis=0) / np.maximum(m.sum(axis=0), 1.0)
            peak = np.where(m > 0, td, 0.0).max(axis=0)
            pri = self.eta * peak + (1.0 - self.eta) * mean + self.eps
        else:
            pri = td.reshape(-1) + self.eps
            if pri.shape != idx.shape:
                raise UserError(
                    f"td_errors has {pri.size} values for {idx.size} indices "
                    "(pass one TD error per sampled transition)"
                )
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise UserError(
                f"indices out of range [0, {size}) (pass the indices returned by sample)"
            )
        self.tree.update(idx, pri**self.alpha)
        if pri.size:
            self.max_priority = max(self.max_priority, float(pri.max()))
        return pri

    def describe(self) -> str:
        return f"prioritized (alpha {self.alpha})"

    #: The constructor's keywords, saved in the config under their names.
    _CONFIG_KEYS = ("alpha", "beta0", "beta_steps", "eta", "eps")

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: getattr(self, k) for k in self._CONFIG_KEYS}}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> PrioritizedSampler:
        return cls(**{k: cfg[k] for k in cls._CONFIG_KEYS})

    def arrays(self, size: int) -> dict[str, np.ndarray]:
        return {
            "priorities": self.tree.priorities[:size],
            "per_counters": np.array([self.max_priority, float(self.n_sampled)]),
        }

    def restore(self, arrays: dict[str, np.ndarray], size: int, path: str | os.PathLike) -> None:
        pri = require(arrays, "priorities", path)
        if pri.shape != (size,) or not np.all(np.isfinite(pri)) or np.any(pri < 0):
            raise UserError(f"buffer file {str(path)!r} has bad priorities (save it again)")
        self.tree.load_priorities(pri, size)
        counters = require(arrays, "per_counters", path)
        self.max_priority = float(counters[0])
        self.n_sampled = int(counters[1])
