"""Fixed and slow points of a network's dynamics (Sussillo & Barak 2013), with their stability.

For a discrete-time map ``h_{t+1} = F(h_t)`` with the input frozen, a fixed point solves
``F(h) = h``; a slow point makes the speed ``q(h) = ||F(h) - h||^2 / 2`` small. The search
minimizes ``q`` from many initial states (typically states the network visited) with
Levenberg-Marquardt (torch autograd, float64); each point's stability comes from the
eigenvalues of the Jacobian ``dF/dh`` there: stable when every ``|lambda| < 1`` (a
discrete-time map).

A spiking network has no smooth map: its state jumps with every spike. The approximation
offered here (:func:`lif_rate_map`) is a LIF layer whose spikes are replaced by their
expected value under a sigmoid escape noise, ``r = sigmoid((v - threshold) / beta)``:
``v' = alpha v + x W_in + b + r W_rec - threshold r`` (``reset="subtract"``), with the
input ``x`` frozen. As ``beta -> 0`` it approaches the deterministic LIF; its fixed points
are those of the mean-field (rate) dynamics, not states the spiking net sits in exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from snrl.errors import UserError

__all__ = [
    "APPROXIMATION",
    "FixedPointAnalysis",
    "FrozenInputs",
    "classify_points",
    "find_fixed_points",
    "lif_rate_map",
]

#: What the points of :class:`FixedPointAnalysis` are (figure caption, summary.json, docs).
APPROXIMATION = (
    "fixed and slow points of the mean-field rate map of the spiking layer (lif_rate_map): "
    "each spike replaced by its probability r = sigmoid((v - threshold) / beta) under escape "
    "noise of width beta, the reset by threshold r, the input frozen at a period's mean; "
    "they are points of this smooth approximation, not states the spiking network sits in "
    "exactly"
)


def _jacobians(step: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor) -> torch.Tensor:
    """(K, N, N) Jacobians ``dF/dh`` of ``step`` at each row of ``h``. The rows of ``F`` are
    independent, so the Jacobian of ``sum_k F(h)_k`` gives them all at once (torch.func);
    row by row where the map does not allow that. A map with a ``jacobian`` attribute (e.g.
    :func:`lif_rate_map`'s) gives its own."""
    if callable(getattr(step, "jacobian", None)):
        return step.jacobian(h)  # type: ignore[attr-defined]
    try:
        return torch.func.jacrev(lambda x: step(x).sum(0))(h).permute(1, 0, 2)
    except Exception:  # a map that torch.func cannot trace (in-place code)

        def one(v: torch.Tensor) -> torch.Tensor:
            return step(v[None])[0]

        return torch.stack([torch.autograd.functional.jacobian(one, row) for row in h])


def find_fixed_points(
    step: Callable[[torch.Tensor], torch.Tensor],
    initial: Any,
    *,
    max_iter: int = 200,
    tol: float = 1e-10,
    stall: float = 1e-6,
) -> dict[str, np.ndarray]:
    """Minimize the speed ``q`` of ``step`` from each initial state (module docstring).

    Levenberg-Marquardt on the residual ``g(h) = F(h) - h`` of each start (its own damping,
    float64, Jacobians by torch autograd): the step ``d`` solves ``(G'G + lambda I) d =
    -G'g`` with ``G = dF/dh - I``; it is kept when it lowers ``q`` (``lambda / 3``), else
    ``lambda x 10``. Near a fixed point this is Newton's method (quadratic convergence, also
    to unstable points); at a slow point (a local minimum of ``q > 0``) the step vanishes.

    Args:
        step: ``F``, mapping a (K, N) batch of states to the next states (rows independent).
        initial: (K, N) initial states.
        max_iter: iterations.
        tol: a start stops when ``q < tol^2`` or its step is below ``tol (1 + |h|)``.
        stall: ... or when a step lowers ``q`` by less than ``stall q`` (the plateau of a
            slow point, where the search converges only linearly), or ``lambda`` reaches
            ``1e12``.

    Returns:
        ``{"points": (K, N), "speed": (K,) q at each point, "eigenvalues": (K, N) complex,
        sorted by decreasing modulus, "stable": (K,) bool (all |lambda| < 1)}``.
    """
    h = torch.as_tensor(np.asarray(initial, dtype=np.float64)).clone()
    if h.ndim != 2 or not h.shape[0]:
        raise UserError(f"initial states must be (K >= 1, N), got shape {tuple(h.shape)}")
    eye = torch.eye(h.shape[1], dtype=h.dtype)
    lam = torch.full((h.shape[0],), 1e-3, dtype=h.dtype)
    active = torch.ones(h.shape[0], dtype=torch.bool)

    def speed_of(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return 0.5 * ((step(x) - x) ** 2).sum(1)

    q = speed_of(h)
    for _ in range(int(max_iter)):
        idx = torch.nonzero(active & (q >= tol * tol)).flatten()
        if not idx.numel():
            break
        hk = h[idx]
        with torch.no_grad():
            g = step(hk) - hk
        jg = _jacobians(step, hk).detach() - eye
        a = jg.transpose(1, 2) @ jg + lam[idx, None, None] * eye
        d = -torch.linalg.solve(a, (jg.transpose(1, 2) @ g[..., None]))[..., 0]
        q_new = speed_of(hk + d)
        better = q_new < q[idx]
        stalled = better & (q[idx] - q_new <= stall * q[idx])  # a slow point's plateau
        h[idx[better]] = hk[better] + d[better]
        q[idx[better]] = q_new[better]
        lam[idx] = torch.where(better, lam[idx] / 3.0, lam[idx] * 10.0).clamp(1e-12, 1e12)
        small = d.norm(dim=1) <= tol * (1.0 + hk.norm(dim=1))
        active[idx[small | stalled | (lam[idx] >= 1e12)]] = False
    ev = torch.linalg.eigvals(_jacobians(step, h).detach()).numpy()
    eig_arr = np.take_along_axis(ev, np.argsort(-np.abs(ev), axis=1, kind="stable"), axis=1)
    return {
        "points": h.numpy(),
        "speed": q.numpy(),
        "eigenvalues": eig_arr,
        "stable": np.abs(eig_arr).max(axis=1) < 1.0,
    }


def _reset_of(layer: Any) -> Any:
    return getattr(getattr(layer, "params", None), "reset", None)


def lif_rate_map(
    layer: Any, x: Any, *, beta: float = 0.1
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The smoothed-rate map of a LIF (or ALIF) layer's state with the input ``x`` frozen
    (module docstring): ``v -> alpha v + x W_in + b + r W_rec - threshold r``,
    ``r = sigmoid((v - threshold) / beta)``.

    For an :class:`snrl.layers.ALIFLayer` the state is ``(v, a)`` side by side, (K, 2N), and
    the map follows :func:`snrl.functional.neurons.alif_step` with ``z`` replaced by ``r``:
    ``r = sigmoid((v - threshold - b_a a) / beta)``, ``a' = rho a + (1 - rho) r``,
    ``v' = alpha v + x W_in + b + r W_rec - (threshold + b_a a') r`` (``b_a``: the layer's
    adaptation strength ``layer.beta``, ``rho = exp(-dt / tau_a)``).

    Args:
        layer: a :class:`snrl.layers.LIFLayer` or ALIFLayer with ``reset="subtract"`` (its
            effective weights are used).
        x: (F,) the frozen input (e.g. the preprocessed observation of the stimulus period).
        beta: escape-noise width in membrane units (> 0); not the ALIF adaptation strength.
    """
    from snrl.layers import ALIFLayer, LIFLayer

    if not beta > 0:
        raise UserError(f"beta={beta} (give a width > 0)")
    if type(layer) not in (LIFLayer, ALIFLayer) or layer.params.reset != "subtract":
        raise UserError(
            "lif_rate_map needs a LIFLayer or ALIFLayer with reset='subtract', got "
            f"{type(layer).__name__} (reset={_reset_of(layer)!r})"
        )
    with torch.no_grad():
        w_in = layer.forward_weights.detach().double().cpu()
        w_rec = layer.recurrent_weights.detach().double().cpu()
        bias = layer.bias.detach().double().cpu()
        alpha = torch.as_tensor(layer.decay("tau_m")).detach().double().cpu()
    threshold = float(layer.params.threshold)
    drive = torch.as_tensor(np.asarray(x, dtype=np.float64)) @ w_in + bias

    if type(layer) is LIFLayer:

        def step(v: torch.Tensor) -> torch.Tensor:
            r = torch.sigmoid((v - threshold) / beta)
            return alpha * v + drive + r @ w_rec - threshold * r

        w_t = (w_rec - threshold * torch.eye(w_rec.shape[0], dtype=w_rec.dtype)).T

        def jacobian(v: torch.Tensor) -> torch.Tensor:  # (K, N, N): [k, out j, in i]
            r = torch.sigmoid((v - threshold) / beta)
            leak = torch.diag_embed(alpha * torch.ones_like(v))
            return leak + w_t * (r * (1 - r) / beta)[:, None]

        step.jacobian = jacobian  # type: ignore[attr-defined]  # analytic, for the search
        return step
    with torch.no_grad():
        rho = torch.as_tensor(layer.decay("tau_a")).detach().double().cpu()
    b_a = float(layer.params.beta)
    n = w_rec.shape[0]

    def step_alif(s: torch.Tensor) -> torch.Tensor:
        v, a = s[:, :n], s[:, n:]
        r = torch.sigmoid((v - threshold - b_a * a) / beta)
        a_next = rho * a + (1.0 - rho) * r
        v_next = alpha * v + drive + r @ w_rec - (threshold + b_a * a_next) * r
        return torch.cat([v_next, a_next], dim=1)

    return step_alif


# ---- de-duplication and classification ------------------------------------------------------
def classify_points(
    points: Any,
    speed: Any,
    eigenvalues: Any,
    *,
    fixed_tol: float,
    slow_tol: float,
    merge_tol: float,
) -> tuple[list[dict[str, Any]], int]:
    """De-duplicate the solutions of :func:`find_fixed_points` and classify each distinct one.

    Solutions are taken slowest first; one within ``merge_tol`` (Euclidean) of a kept point
    joins it, else it is a new point. A point with speed ``q <= fixed_tol`` is a fixed point,
    ``"stable"`` when every Jacobian eigenvalue has ``|lambda| < 1`` and ``"unstable"``
    otherwise (a saddle when some are inside the unit circle); one with ``fixed_tol < q <=
    slow_tol`` is a ``"slow"`` point; a faster one did not converge and is dropped.

    Args:
        points: (K, D) solutions; speed: (K,) their ``q``; eigenvalues: (K, D) complex.
        fixed_tol, slow_tol: speed thresholds (state units squared per step squared).
        merge_tol: distance under which two solutions are one point (state units).

    Returns:
        ``(kept, n_not_converged)``: ``kept`` a list, slowest first, of ``{"index"`` (the
        row of the representative), ``"kind", "speed", "max_abs_eigenvalue",
        "n_unstable_modes"`` (eigenvalues with ``|lambda| >= 1``), ``"n_starts"`` (solutions
        merged into it)``}``.
    """
    p = np.asarray(points, dtype=np.float64)
    q = np.asarray(speed, dtype=np.float64)
    ev = np.abs(np.asarray(eigenvalues))
    if not 0 <= fixed_tol <= slow_tol or merge_tol < 0:
        raise UserError(
            f"need 0 <= fixed_tol <= slow_tol and merge_tol >= 0, got {fixed_tol}, "
            f"{slow_tol}, {merge_tol}"
        )
    kept: list[dict[str, Any]] = []
    lost = 0
    for i in np.argsort(q, kind="stable"):
        if not q[i] <= slow_tol:
            lost += 1
            continue
        for k in kept:
            if np.linalg.norm(p[i] - p[k["index"]]) <= merge_tol:
                k["n_starts"] += 1
                break
        else:
            fixed = q[i] <= fixed_tol
            stable = bool(ev[i].max() < 1.0)
            kept.append(
                {
                    "index": int(i),
                    "kind": ("stable" if stable else "unstable") if fixed else "slow",
                    "speed": float(q[i]),
                    "max_abs_eigenvalue": float(ev[i].max()),
                    "n_unstable_modes": int((ev[i] >= 1.0).sum()),
                    "n_starts": 1,
                }
            )
    return kept, lost


# ---- frozen inputs of a recorded task ---------------------------------------------------------
def _period_of(trial: Mapping[str, Any], j: int, dt: float) -> str | None:
    """The period of the trial's ``j``-th step (trial time ``t0 + j dt``; NeuroGym's
    ``start <= t < end``, with a tolerance for float rounding)."""
    t = float(trial.get("t0") or 0.0) + j * dt
    for name, (start, end) in (trial.get("periods") or {}).items():
        if start - 1e-9 <= t < end - 1e-9:
            return str(name)
    return None


def _condition(trial: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The trial's scalar conditions as sorted ``(name, value)`` pairs."""
    from snrl.analysis.trials import condition_key

    conds = trial.get("conditions") or {}
    return tuple(
        (str(c), condition_key(trial, c) or "")
        for c in sorted(conds)
        if isinstance(conds[c], (int, float, str, bool, np.integer, np.floating))
    )


def _value_order(cond: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    """Sort conditions by their values, numerically where they are numbers."""
    out = []
    for _, v in cond:
        try:
            out.append((0, float(v), ""))
        except ValueError:
            out.append((1, 0.0, v))
    return tuple(out)


class FrozenInputs:
    """Mean input of each task period (trial tasks) or of the whole episode, fed episode by
    episode. A period whose mean input differs between trial conditions (by more than
    ``split_tol`` input standard deviations in some input dimension, e.g. the stimulus of a
    decision task) gets one input per condition; the others one input each.
    """

    def __init__(self, *, split_tol: float = 0.1) -> None:
        self.split_tol = float(split_tol)
        #: period -> condition -> [sum (F,), count]
        self.sums: dict[str, dict[tuple, list[Any]]] = {}
        self.start: dict[str, float] = {}  # period -> its start (s), for the order
        self._s = self._ss = None
        self._n = 0

    def add(self, inputs: Any, trials: Sequence[Mapping[str, Any]] | None, dt: float | None):
        """Fold in one episode's (T, F) inputs (one row per env step) and its trials."""
        x = np.asarray(inputs, dtype=np.float64).reshape(len(inputs), -1)
        self._s = x.sum(0) + (0 if self._s is None else self._s)
        self._ss = (x * x).sum(0) + (0 if self._ss is None else self._ss)
        self._n += len(x)
        if not trials or not dt:
            self._fold("all steps", (), x)
            return
        for trial in trials:
            a, b = int(trial["start_step"]), min(int(trial["end_step"]) + 1, len(x))
            cond = _condition(trial)
            for j in range(b - a):
                period = _period_of(trial, j, float(dt))
                if period is not None:
                    self.start.setdefault(period, float(trial["periods"][period][0]))
                    self._fold(period, cond, x[a + j : a + j + 1])

    def _fold(self, period: str, cond: tuple, x: np.ndarray) -> None:
        entry = self.sums.setdefault(period, {}).setdefault(cond, [0.0, 0])
        entry[0] = entry[0] + x.sum(0)
        entry[1] += len(x)

    def inputs(self) -> list[dict[str, Any]]:
        """The frozen inputs, periods in the order of their start: ``[{"label", "period",
        "conditions" ({name: value}), "n_steps", "x" (F,)}]``."""
        if not self._n:
            return []
        mean = self._s / self._n
        sd = np.sqrt(np.maximum(self._ss / self._n - mean**2, 0.0))
        live = sd > 1e-12
        out = []
        for period in sorted(self.sums, key=lambda k: self.start.get(k, 0.0)):
            groups = self.sums[period]
            n = sum(c for _, c in groups.values())
            pooled = sum(s for s, _ in groups.values()) / n
            means = {k: s / c for k, (s, c) in groups.items()}
            dev = max(
                (np.max(np.abs(m - pooled)[live] / sd[live], initial=0.0) for m in means.values()),
                default=0.0,
            )
            if len(groups) > 1 and dev > self.split_tol:
                for cond in sorted(groups, key=_value_order):
                    label = period + " " + ", ".join(f"{k}={v}" for k, v in cond)
                    out.append(
                        {"label": label, "period": period, "conditions": dict(cond),
                         "n_steps": groups[cond][1], "x": means[cond]}
                    )  # fmt: skip
            else:
                out.append(
                    {"label": period, "period": period, "conditions": {}, "n_steps": n, "x": pooled}
                )
        return out


# ---- the analysis of a recorded run --------------------------------------------------------
class FixedPointAnalysis:
    """Fixed and slow points of one LIF / ALIF layer under each frozen task input
    (:data:`APPROXIMATION`), fed the recorded episodes of ``snrl analyze``.

    The visited states (the membrane ``v``; for ALIF ``v`` and the adaptation ``a`` side by
    side) of the first ``max_states`` neuron steps are kept; :meth:`result` draws
    ``n_starts`` of them (seeded) as the starts of :func:`find_fixed_points` under each
    input of :class:`FrozenInputs` (at most ``max_inputs``, in period order), and
    :func:`classify_points` merges and classifies the solutions: fixed when ``q <=
    fixed_tol``, slow when ``q <= slow_fraction`` times the median speed of the starts
    under that input, merged within ``merge_fraction`` times the visited states' RMS
    distance from their mean.

    Args:
        layer: the :class:`snrl.layers.LIFLayer` / ALIFLayer (``reset="subtract"``).
        name: the layer's name (figure and summary).
        beta: escape-noise width of :func:`lif_rate_map` (membrane units).
    """

    def __init__(
        self,
        layer: Any,
        *,
        name: str = "lif0",
        beta: float = 0.3,
        n_starts: int = 32,
        max_inputs: int = 12,
        max_states: int = 5_000,
        max_iter: int = 200,
        fixed_tol: float = 1e-8,
        slow_fraction: float = 1e-3,
        merge_fraction: float = 1e-2,
        seed: int = 0,
    ) -> None:
        if type(layer).__name__ not in ("LIFLayer", "ALIFLayer") or _reset_of(layer) != "subtract":
            raise UserError(
                f"fixed points need a LIF or ALIF layer with reset='subtract'; {name} is a "
                f"{type(layer).__name__} with reset={_reset_of(layer)!r} (analyze a lif or alif "
                "run with the default reset, or leave out --fixed-points)"
            )
        self.n_in = int(layer.forward_weights.shape[0])
        lif_rate_map(layer, np.zeros(self.n_in), beta=beta)  # checks beta
        self.layer, self.name = layer, str(name)
        self.alif = type(layer).__name__ == "ALIFLayer"
        self.params = {
            "beta": float(beta),
            "n_starts": int(n_starts),
            "max_inputs": int(max_inputs),
            "max_states": int(max_states),
            "max_iter": int(max_iter),
            "fixed_tol": float(fixed_tol),
            "slow_fraction": float(slow_fraction),
            "merge_fraction": float(merge_fraction),
            "seed": int(seed),
        }
        self.frozen = FrozenInputs()
        self.states: list[np.ndarray] = []
        self._n_states = 0
        self._result: dict[str, Any] | None = None

    def add(
        self,
        activity: Any,
        inputs: Any,
        trials: Sequence[Mapping[str, Any]] | None = None,
        env_dt: float | None = None,
    ) -> None:
        """Fold in one episode: the layer's :class:`snrl.networks.LayerActivity` ((T, N)
        arrays), its (T_env, F) input per env step, the trials and the task's ``dt``."""
        state = np.asarray(activity.v, dtype=np.float64)
        if self.alif:
            state = np.concatenate([state, np.asarray(activity.extra["a"], np.float64)], 1)
        room = self.params["max_states"] - self._n_states
        if room > 0:
            self.states.append(state[:room].astype(np.float32))
            self._n_states += len(self.states[-1])
        self.frozen.add(inputs, trials, env_dt)
        self._result = None

    def result(self) -> dict[str, Any]:
        """The points under each frozen input (computed once; JSON-able but for the
        ``"_plot"`` entry, which :meth:`figure` draws)."""
        from snrl.agents.runtime import torch_threads

        if self._result is not None:
            return self._result
        with torch_threads(1):  # many small factorizations: one thread is fastest
            self._result = self._compute()
        return self._result

    def _compute(self) -> dict[str, Any]:
        from snrl.analysis.trials import pca

        p = self.params
        visited = np.concatenate(self.states).astype(np.float64)
        n = self.layer.recurrent_weights.shape[0]
        proj = pca(visited[:, :n], 3)
        spread = float(np.sqrt(((visited - visited.mean(0)) ** 2).sum(1).mean()))
        rng = np.random.default_rng(p["seed"])
        starts = visited[rng.choice(len(visited), min(p["n_starts"], len(visited)), False)]
        inputs = self.frozen.inputs()
        out_inputs, plot = [], []
        for inp in inputs[: p["max_inputs"]]:
            step = lif_rate_map(self.layer, inp["x"], beta=p["beta"])
            with torch.no_grad():
                h0 = torch.as_tensor(starts)
                q0 = 0.5 * ((step(h0) - h0) ** 2).sum(1).numpy()
            slow_tol = max(p["fixed_tol"], p["slow_fraction"] * float(np.median(q0)))
            res = find_fixed_points(step, starts, max_iter=p["max_iter"])
            kept, lost = classify_points(
                res["points"],
                res["speed"],
                res["eigenvalues"],
                fixed_tol=p["fixed_tol"],
                slow_tol=slow_tol,
                merge_tol=p["merge_fraction"] * spread,
            )
            pts = res["points"][[k["index"] for k in kept]] if kept else np.zeros((0, len(h0[0])))
            pcs = (pts[:, :n] - proj["mean"]) @ proj["components"].T
            main = max(range(len(kept)), key=lambda i: kept[i]["n_starts"], default=None)
            kinds = [k["kind"] for k in kept]
            entry = {
                k: inp[k] for k in ("label", "period", "conditions", "n_steps")
            } | {
                "input": inp["x"].tolist(),
                "median_start_speed": float(np.median(q0)),
                "slow_tol": slow_tol,
                "n_points": len(kept),
                **{f"n_{kind}": kinds.count(kind) for kind in ("stable", "unstable", "slow")},
                "n_not_converged": lost,
                "points": [
                    {key: v for key, v in k.items() if key != "index"} | {"pc": pc[:3].tolist()}
                    for k, pc in zip(kept, pcs)
                ],
                "main_point": main,
            }  # fmt: skip
            ev = res["eigenvalues"][kept[main]["index"]] if main is not None else np.zeros(0)
            entry["main_eigenvalues"] = {"real": ev.real.tolist(), "imag": ev.imag.tolist()}
            out_inputs.append(entry)
            plot.append({"pcs": pcs, "kinds": kinds, "eigenvalues": ev, "states": pts})
        return {
            "layer": self.name,
            "model": "ALIF" if self.alif else "LIF",
            "state": "v and a (2N)" if self.alif else "v (N)",
            "approximation": APPROXIMATION,
            "parameters": dict(p, merge_tol=p["merge_fraction"] * spread),
            "n_visited_states": len(visited),
            "pca_explained_variance_ratio": proj["explained_variance_ratio"].tolist(),
            "inputs_left_out": max(0, len(inputs) - p["max_inputs"]),
            "inputs": out_inputs,
            "_plot": {"visited": proj["scores"], "inputs": plot},
        }

    def summary(self) -> dict[str, Any]:
        """:meth:`result` without the plotting arrays."""
        return {k: v for k, v in self.result().items() if k != "_plot"}

    def figure(self, title: str) -> Any:
        """``fixed_points.png``: the visited states and the points in PC1/PC2 of the visited
        membranes, one panel per frozen input, and the Jacobian spectrum at each input's main
        point (the one most starts reached) with the unit circle."""
        from matplotlib.figure import Figure

        from snrl.palette import MUTED_COLOR, OKABE_ITO, group_styles

        res = self.result()
        plot, ratio = res["_plot"], res["pca_explained_variance_ratio"]
        n = len(res["inputs"]) + 1
        ncol = min(4, n + (n > 2))  # a free slot for the spectrum's legend
        nrow = -(-n // ncol)
        fig = Figure(figsize=(3.1 * ncol, 2.9 * nrow + 0.6), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
        vis = plot["visited"]
        vis = vis[:: max(1, len(vis) // 3000)]
        marks = {
            "stable": ("o", OKABE_ITO["bluish_green"], "stable fixed point"),
            "unstable": ("X", OKABE_ITO["vermillion"], "unstable fixed point"),
            "slow": ("^", OKABE_ITO["orange"], "slow point"),
        }
        y = 1 if vis.shape[1] > 1 else 0
        for ax, entry, pl in zip(axes, res["inputs"], plot["inputs"]):
            ax.scatter(vis[:, 0], vis[:, y], s=2, color=MUTED_COLOR, alpha=0.25, lw=0)
            for kind, (m, col, label) in marks.items():
                sel = [i for i, k in enumerate(pl["kinds"]) if k == kind]
                if sel:
                    ax.scatter(*pl["pcs"][sel][:, [0, y]].T, marker=m, s=45, color=col,
                               edgecolor="k", lw=0.5, label=label, zorder=3)  # fmt: skip
            counts = ", ".join(
                f"{entry[f'n_{k}']} {k}" for k in ("stable", "unstable", "slow") if entry[f"n_{k}"]
            )
            ax.set_title(f"{entry['label']}\n{counts or 'none found'}", fontsize=8)
            ax.set_xlabel(f"PC1 ({100 * ratio[0]:.0f} %)", fontsize=7)
            ax.set_ylabel(f"PC{y + 1} ({100 * ratio[y]:.0f} %)", fontsize=7)
            ax.tick_params(labelsize=6)
        handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
        if handles:
            axes[0].legend(handles=list(handles.values()), fontsize=6, loc="best")
        ax = axes[len(res["inputs"])]
        t = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(t), np.sin(t), color=MUTED_COLOR, lw=0.8)
        styles = group_styles(len(res["inputs"]))
        for entry, pl, (col, _) in zip(res["inputs"], plot["inputs"], styles):
            ev = pl["eigenvalues"]
            if len(ev):
                ax.scatter(ev.real, ev.imag, s=6, color=col, label=entry["label"])
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title("Jacobian eigenvalues at each input's main point\n(unit circle)", fontsize=8)
        ax.set_xlabel("Re", fontsize=7)
        ax.set_ylabel("Im", fontsize=7)
        ax.tick_params(labelsize=6)
        for extra in axes[n:]:
            extra.set_axis_off()
        if len(res["inputs"]) > 1:
            where = axes[n] if len(axes) > n else ax
            where.legend(*ax.get_legend_handles_labels(), fontsize=6, markerscale=2,
                         loc="upper left", title="main point of", title_fontsize=6)  # fmt: skip
        kind = "ALIF, state (v, a)" if self.alif else "LIF, state v"
        fig.suptitle(
            f"{title} ({kind}): fixed and slow points, input frozen, escape width beta = "
            f"{res['parameters']['beta']:g}\nmean-field rate map of the spiking layer (reset "
            "by threshold r): points of the approximation, not states the spiking net sits in",
            fontsize=9,
        )
        return fig
