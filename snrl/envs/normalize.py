"""Running mean and variance of observations (or returns) for input normalization.

Batches are merged with the parallel-variance formula of Chan, Golub & LeVeque (1979):
for a running (mean ``m_a``, variance ``v_a``, count ``n_a``) and a batch
(``m_b``, ``v_b``, ``n_b``), with ``d = m_b - m_a`` and ``n = n_a + n_b``::

    m = m_a + d * n_b / n
    v = (v_a * n_a + v_b * n_b + d**2 * n_a * n_b / n) / n

Variances are population variances (ddof=0), so after any sequence of updates ``mean`` and
``var`` equal ``np.mean`` / ``np.var`` of all the data seen, up to rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["RunningMeanStd"]


class RunningMeanStd:
    """Running per-feature mean and variance, in float64.

    Before the first update ``mean`` is 0, ``var`` is 1 and ``count`` is 0, so
    ``normalize`` is the identity (up to clipping).

    Args:
        shape: Feature shape, e.g. ``(obs_size,)``; ``()`` for a scalar such as the return.
        epsilon: Added to the variance before the square root in ``normalize``.
    """

    def __init__(self, *, shape: int | tuple[int, ...] = (), epsilon: float = 1e-8) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.epsilon = float(epsilon)
        self.mean = np.zeros(self.shape, dtype=np.float64)
        self.var = np.ones(self.shape, dtype=np.float64)
        self.count = 0.0

    def update(self, x: np.ndarray | torch.Tensor) -> None:
        """Merge a batch.

        Args:
            x: (B, *shape) samples (numpy or torch). An empty batch is ignored.

        Raises:
            ValueError: If the trailing shape is not ``shape``.
        """
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1:] != self.shape:
            raise ValueError(
                f"RunningMeanStd of shape {self.shape} got a batch of shape {x.shape} "
                f"(expected (B, {', '.join(map(str, self.shape))}))"
            )
        n_b = x.shape[0]
        if n_b == 0:
            return
        m_b = x.mean(axis=0)
        v_b = x.var(axis=0)
        n_a = self.count
        n = n_a + n_b
        delta = m_b - self.mean
        self.mean = self.mean + delta * (n_b / n)
        self.var = (self.var * n_a + v_b * n_b + delta**2 * (n_a * n_b / n)) / n
        self.count = n

    @property
    def std(self) -> np.ndarray:
        """sqrt(var + epsilon), (*shape,) float64."""
        return np.sqrt(self.var + self.epsilon)

    def normalize(self, x: np.ndarray, clip: float | None = 10.0) -> np.ndarray:
        """``clip((x - mean) / sqrt(var + epsilon), -clip, clip)`` as float32.

        Args:
            x: (..., *shape) array.
            clip: Symmetric bound after normalizing; ``None`` for no clipping.

        Returns:
            Array of the shape of ``x``, float32.
        """
        out = (np.asarray(x, dtype=np.float64) - self.mean) / self.std
        if clip is not None:
            out = np.clip(out, -clip, clip)
        return out.astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """Plain tensors and floats, loadable with ``torch.load(weights_only=True)``."""
        return {
            "mean": torch.from_numpy(self.mean.copy()),
            "var": torch.from_numpy(self.var.copy()),
            "count": float(self.count),
            "epsilon": self.epsilon,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` output (tensors or lists).

        Raises:
            ValueError: If the stored shape differs from ``shape``.
        """
        mean = np.asarray(
            state["mean"].numpy() if isinstance(state["mean"], torch.Tensor) else state["mean"],
            dtype=np.float64,
        )
        var = np.asarray(
            state["var"].numpy() if isinstance(state["var"], torch.Tensor) else state["var"],
            dtype=np.float64,
        )
        if mean.shape != self.shape or var.shape != self.shape:
            raise ValueError(
                f"RunningMeanStd state has shape {mean.shape}, expected {self.shape} "
                "(the checkpoint was made for a different observation space)"
            )
        self.mean = mean.copy()
        self.var = var.copy()
        self.count = float(state["count"])
        self.epsilon = float(state.get("epsilon", self.epsilon))
