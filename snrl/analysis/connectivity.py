"""Recurrent connectivity by E/I type, its eigenspectrum, and connectivity conditioned on
selectivity.

Weights are the layer's *effective* recurrent weights (signed, masked:
``layer.recurrent_weights``), row i = presynaptic neuron i, column j = postsynaptic j. A
block ``"E->I"`` holds the synapses from E rows onto I columns. The diagonal (autapses;
zero under ``use_rec_eye_mask``) is left out of every block statistic.

Per block: ``mean``, ``std``, ``mean_abs`` of the weights, ``fraction_nonzero``,
``in_degree`` (nonzero synapses onto a postsynaptic neuron, mean over them),
``out_degree`` (nonzero synapses from a presynaptic neuron, mean), ``in_strength`` (sum of
the weights onto a postsynaptic neuron, mean), and for the square blocks (E->E, I->I) their
own spectral radius. The spectrum is the eigenvalues of the whole matrix; its spectral
radius ``max |lambda|``. (The matrix acts as ``z_{t-1} W``; ``W`` and ``W^T`` have the same
eigenvalues.)

Selectivity-conditioned connectivity: E neurons are given a preference (the sign of a
selectivity index between two trial groups; neurons with no preference are left out); the
mean E->E weight between pairs of the same preference (i != j) is compared with that
between pairs of opposite preference, ``difference = same - opposite``, with a permutation
test (preferences shuffled among the E neurons; ``p_value = (1 + #|null| >= |difference|) /
(1 + n_shuffles)``, two-sided).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snrl.errors import UserError

__all__ = [
    "BLOCKS",
    "block_stats",
    "connectivity_summary",
    "ei_blocks",
    "eigenspectrum",
    "selectivity_connectivity",
    "spectral_radius",
]

#: The four E/I blocks, presynaptic -> postsynaptic.
BLOCKS = ("E->E", "E->I", "I->E", "I->I")


def _check(w: Any, sign: Any) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(w, dtype=np.float64)
    s = np.asarray(sign)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or s.shape != (w.shape[0],):
        raise UserError(
            f"connectivity needs an (N, N) matrix and N signs, got {w.shape} and {s.shape}"
        )
    return w, s


def ei_blocks(w: Any, sign: Any) -> dict[str, dict[str, np.ndarray]]:
    """The four blocks of ``w`` by the presynaptic and postsynaptic sign.

    Returns:
        ``{"E->E": {"weights": (n_pre, n_post), "pre": indices, "post": indices}, ...}``.
    """
    w, s = _check(w, sign)
    idx = {"E": np.flatnonzero(s > 0), "I": np.flatnonzero(s < 0)}
    out = {}
    for block in BLOCKS:
        pre, post = idx[block[0]], idx[block[-1]]
        out[block] = {"weights": w[np.ix_(pre, post)], "pre": pre, "post": post}
    return out


def eigenspectrum(w: Any) -> np.ndarray:
    """Eigenvalues of the square matrix (complex, sorted by decreasing modulus)."""
    ev = np.linalg.eigvals(np.asarray(w, dtype=np.float64))
    return ev[np.argsort(-np.abs(ev), kind="stable")]


def spectral_radius(w: Any) -> float:
    """``max |lambda|`` of the square matrix (0 for an empty one)."""
    w = np.asarray(w, dtype=np.float64)
    return float(np.max(np.abs(np.linalg.eigvals(w)))) if w.size else 0.0


def block_stats(w: Any, sign: Any) -> dict[str, dict[str, float]]:
    """Statistics of each E/I block (module docstring); NaN where a block is empty."""
    blocks = ei_blocks(w, sign)
    out = {}
    for name, b in blocks.items():
        m = b["weights"]
        off = b["pre"][:, None] != b["post"][None, :]  # leave out autapses
        vals = m[off]
        nz = (m != 0) & off
        nan = float("nan")
        st = {
            "n_pre": int(b["pre"].size),
            "n_post": int(b["post"].size),
            "mean": float(vals.mean()) if vals.size else nan,
            "std": float(vals.std()) if vals.size else nan,
            "mean_abs": float(np.abs(vals).mean()) if vals.size else nan,
            "fraction_nonzero": float(nz.sum() / vals.size) if vals.size else nan,
            "in_degree": float(nz.sum(0).mean()) if m.shape[1] else nan,
            "out_degree": float(nz.sum(1).mean()) if m.shape[0] else nan,
            "in_strength": float(np.where(off, m, 0).sum(0).mean()) if m.shape[1] else nan,
        }
        if name in ("E->E", "I->I"):
            st["spectral_radius"] = spectral_radius(m)
        out[name] = st
    return out


def selectivity_connectivity(
    w: Any, sign: Any, preference: Any, *, n_shuffles: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Mean E->E weight between same- and opposite-preference pairs, with a permutation
    test (module docstring).

    Args:
        w: (N, N) effective recurrent weights, row = presynaptic.
        sign: (N,) Dale signs.
        preference: (N,) a neuron's preferred group as +1 / -1 (0 or NaN: none).
        n_shuffles: permutations of the preferences among the E neurons with one.
        seed: seeds the permutations.

    Returns:
        ``{"same", "opposite", "difference", "p_value", "n_same_pairs",
        "n_opposite_pairs", "n_neurons"}`` (None entries when either kind of pair is
        missing).
    """
    w, s = _check(w, sign)
    pref = np.nan_to_num(np.asarray(preference, dtype=np.float64))
    cells = np.flatnonzero((s > 0) & (pref != 0))
    p = np.sign(pref[cells])
    m = w[np.ix_(cells, cells)]
    off = ~np.eye(cells.size, dtype=bool)

    def diff(q: np.ndarray) -> tuple[float, float, int, int]:
        same = (q[:, None] == q[None, :]) & off
        opp = q[:, None] != q[None, :]
        if not same.any() or not opp.any():
            return float("nan"), float("nan"), int(same.sum()), int(opp.sum())
        return float(m[same].mean()), float(m[opp].mean()), int(same.sum()), int(opp.sum())

    same, opp, n_same, n_opp = diff(p)
    out: dict[str, Any] = {
        "same": None,
        "opposite": None,
        "difference": None,
        "p_value": None,
        "n_same_pairs": n_same,
        "n_opposite_pairs": n_opp,
        "n_neurons": int(cells.size),
    }
    if not np.isfinite(same):
        return out
    d = same - opp
    rng = np.random.default_rng(seed)
    null = np.array([np.subtract(*diff(rng.permutation(p))[:2]) for _ in range(n_shuffles)])
    out.update(same=same, opposite=opp, difference=d)
    if n_shuffles > 0:
        out["p_value"] = float((1 + np.sum(np.abs(null) >= abs(d) - 1e-15)) / (1 + n_shuffles))
    return out


def connectivity_summary(w: Any, sign: Any | None) -> dict[str, Any]:
    """Spectral radius and (with Dale signs) the block statistics of one matrix."""
    w = np.asarray(w, dtype=np.float64)
    out: dict[str, Any] = {"spectral_radius": spectral_radius(w), "n": int(w.shape[0])}
    if sign is not None:
        out["blocks"] = block_stats(w, sign)
    return out
