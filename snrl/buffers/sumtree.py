"""A sum tree (and min tree) over a flat float64 array, for prioritized replay.

The tree is a complete binary tree stored heap-style in one array of size ``2 * P`` where
``P`` is the capacity rounded up to a power of two: node ``i`` has children ``2i`` and
``2i + 1``, the root is node 1 and leaf ``j`` is node ``P + j``. Every internal node holds
the sum of its children (and, in a second array, their minimum), so

    total = sum_j p_j,            min = min_j p_j over the leaves that were ever set,

and a prefix sum ``s in [0, total)`` is mapped to the leaf ``j`` with
``sum_{k<j} p_k <= s < sum_{k<=j} p_k`` by one descent from the root. All operations are
vectorized over a batch of leaves / prefix sums (one numpy pass per tree level).

Parents are recomputed from their children (never updated by adding differences), so the
sums do not drift however many updates are made.
"""

from __future__ import annotations

import numpy as np

from snrl.errors import UserError


class SumTree:
    """Sums and minima of ``capacity`` non-negative priorities, with batched prefix search.

    Args:
        capacity: number of leaves (>= 1).
    """

    def __init__(self, capacity: int) -> None:
        capacity = int(capacity)
        if capacity < 1:
            raise UserError(f"SumTree capacity must be >= 1, got {capacity} (pass capacity >= 1)")
        self.capacity = capacity
        size = 1
        while size < capacity:
            size *= 2
        self._size = size
        self._depth = size.bit_length() - 1  # number of levels below the root
        self._sum = np.zeros(2 * size, dtype=np.float64)
        # Leaves that were never set hold +inf so they do not count towards the minimum.
        self._min = np.full(2 * size, np.inf, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self._sum[1])

    @property
    def min(self) -> float:
        """Smallest priority among the leaves set so far (``inf`` when none was set)."""
        return float(self._min[1])

    @property
    def priorities(self) -> np.ndarray:
        """(capacity,) a copy of the leaf priorities (0 for leaves never set)."""
        return self._sum[self._size : self._size + self.capacity].copy()

    def __getitem__(self, indices: np.ndarray | int) -> np.ndarray:
        """Priorities of the given leaves."""
        idx = np.asarray(indices, dtype=np.int64)
        return self._sum[self._size + idx]

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of a batch of leaves.

        Args:
            indices: (K,) int leaf indices in ``[0, capacity)``; when an index repeats, its
                last priority wins.
            priorities: (K,) non-negative finite priorities (or a scalar for all).
        """
        idx = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        pri = np.broadcast_to(np.asarray(priorities, dtype=np.float64), idx.shape)
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.capacity:
            raise UserError(
                f"SumTree index out of range [0, {self.capacity}): got {idx.min()}..{idx.max()} "
                "(pass indices returned by sample)"
            )
        if not np.all(np.isfinite(pri)) or np.any(pri < 0):
            raise UserError("priorities must be finite and >= 0 (check the TD errors for NaN)")
        # Keep the last occurrence of each index: reverse, then unique keeps the first.
        rev_idx, first = np.unique(idx[::-1], return_index=True)
        nodes = rev_idx + self._size
        vals = pri[::-1][first]
        self._sum[nodes] = vals
        self._min[nodes] = vals
        for _ in range(self._depth):
            # Repeated parents are harmless: each gets the same value from its children.
            nodes = nodes // 2
            left, right = 2 * nodes, 2 * nodes + 1
            self._sum[nodes] = self._sum[left] + self._sum[right]
            self._min[nodes] = np.minimum(self._min[left], self._min[right])

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """Leaves whose cumulative-priority interval contains each prefix sum.

        Args:
            prefix_sums: (K,) values in ``[0, total)``; values outside are clipped.

        Returns:
            (K,) int64 leaf indices. Leaves with priority 0 are never returned while
            ``total > 0``.
        """
        if self._sum[1] <= 0:
            raise UserError("cannot sample from an empty SumTree (add transitions first)")
        s = np.clip(np.asarray(prefix_sums, dtype=np.float64).reshape(-1), 0.0, self._sum[1])
        node = np.ones(s.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * node
            left_sum = self._sum[left]
            # Go right when the prefix passes the left subtree, unless the right one is empty
            # (guards against rounding at s == total and zero-priority padding leaves).
            go_right = (s >= left_sum) & (self._sum[left + 1] > 0)
            go_right |= left_sum <= 0
            s = np.where(go_right, s - left_sum, s)
            node = np.where(go_right, left + 1, left)
        return node - self._size

    def load_priorities(self, priorities: np.ndarray, n_set: int) -> None:
        """Rebuild the tree from saved leaf priorities; leaves ``>= n_set`` stay unset."""
        self._sum[:] = 0.0
        self._min[:] = np.inf
        if n_set > 0:
            self.update(np.arange(n_set), np.asarray(priorities, dtype=np.float64)[:n_set])
