"""Analyze a trained agent: roll out episodes, fold each into the accumulators, write
``summary.json`` and figures. The CLI (``snrl analyze``) and Python use the same code::

    algo = snrl.load("run/checkpoints/best.pt")
    result = snrl.analysis.analyze(algo, episodes=20, seed=0)
    result.summary()["layers"]["lif0"]["E"]["rate_mean"]     # {"value", "unit", "definition"}
    result.write("run/analysis")

Episodes are recorded one at a time and dropped after they are folded in (only the first is
kept, for the raster and current-trace figures), so memory does not grow with ``episodes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snrl.analysis.currents import LayerWeights, layer_weights, synaptic_currents
from snrl.analysis.stats import METRICS, NEURON_METRICS, SpikeStats
from snrl.analysis.trials import PSTHAccumulator, TuningAccumulator, pca, selectivity
from snrl.errors import UserError
from snrl.io import write_json_atomic
from snrl.training.rundir import ANALYSIS_FILES

__all__ = ["ANALYSIS_FILES", "NetworkAnalysis", "analyze"]

_FORMAT = "snrl.analysis"
_VERSION = 1


def _json_num(x: Any) -> Any:
    x = float(x)
    return x if np.isfinite(x) else None


class NetworkAnalysis:
    """Accumulators of every spiking layer, fed one :class:`snrl.Trajectory` at a time.

    Args:
        layers: the layers' descriptions (``traj.layers`` / ``Activity.info()``); only
            spiking layers are analysed.
        dt: neuron step in seconds, or None (rates per step).
        weights: the effective weights of each spiking layer (for the input currents), from
            :func:`snrl.analysis.currents.layer_weights`; None: no currents.
        fano_window, corr_bin: see :class:`SpikeStats` (neuron steps).
        psth_window: (pre, post) neuron steps around trial events.
    """

    def __init__(
        self,
        layers: Sequence[Mapping[str, Any]],
        *,
        dt: float | None = None,
        weights: Mapping[str, LayerWeights] | None = None,
        fano_window: int = 100,
        corr_bin: int = 10,
        psth_window: tuple[int, int] = (10, 40),
    ) -> None:
        self.layers = [dict(d) for d in layers if d["kind"] == "spiking"]
        if not self.layers:
            raise UserError(
                "the network has no spiking layer (analyze a run with a spiking backbone: "
                "lif, alif or spylif)"
            )
        self.dt = dt
        self.weights = dict(weights or {})
        self.params = {"fano_window": int(fano_window), "corr_bin": int(corr_bin)}
        self.stats = {
            d["name"]: SpikeStats(d["size"], dt=dt, sign=d.get("sign"), **self.params)
            for d in self.layers
        }
        self.psth_window = tuple(int(v) for v in psth_window)
        self.psth: dict[str, dict[str, PSTHAccumulator]] = {}
        self.tuning: dict[str, TuningAccumulator] = {}
        self.first: dict[str, Any] | None = None  # the first episode, for figures
        self.episodes = 0
        self.env_steps = 0
        self.returns: list[float] = []
        self.row_seconds: float | None = None  # task seconds per activity row (trial envs)

    # -------------------------------------------------------------- feeding
    def add(self, traj: Any, inputs: Any = None) -> None:
        """Fold in one recorded episode.

        Args:
            traj: a :class:`snrl.Trajectory` (activity of the policy backbone); trial envs
                add ``trials`` and ``substeps`` (read when present).
            inputs: (T, F) the first layer's input (the preprocessed observations), for its
                external current; None: the bias only.
        """
        substeps = int(getattr(traj, "substeps", None) or 1)
        trials = getattr(traj, "trials", None)
        keep = self.first is None
        first: dict[str, Any] = {"layers": [], "currents": {}}
        prev_spikes = None
        for k, d in enumerate(self.layers):
            name = d["name"]
            spikes = np.asarray(traj.activity[name].spikes)
            cur = None
            w = self.weights.get(name)
            if w is not None:
                if k == 0:
                    ext = None
                    if inputs is not None:
                        x = np.asarray(inputs, dtype=np.float64).reshape(len(inputs), -1)
                        if substeps > 1:
                            x = np.repeat(x, substeps, axis=0)
                        ext = x[: spikes.shape[0]] @ w.w_in + w.bias
                    cur = synaptic_currents(spikes, w.w_rec, ext=ext, bias=w.bias)
                else:
                    cur = synaptic_currents(
                        spikes, w.w_rec, pre_spikes=prev_spikes, w_ff=w.w_in, bias=w.bias
                    )
            self.stats[name].add(spikes, cur)
            if trials:
                pre, post = self.psth_window
                accs = self.psth.setdefault(name, {})
                for event in ("start", "decision"):
                    acc = accs.get(event)
                    if acc is None:
                        acc = accs[event] = PSTHAccumulator(
                            d["size"], pre=pre, post=post, event=event, by=self._group_by(trials)
                        )
                    acc.add(spikes, trials, substeps, getattr(traj, "dt", None))
            else:
                acc_t = self.tuning.get(name)
                if acc_t is None:
                    acc_t = self.tuning[name] = TuningAccumulator(d["size"])
                acc_t.add(spikes, traj.observations, substeps)
            if keep:
                first["layers"].append({"name": name, "spikes": spikes, "sign": d.get("sign")})
                if cur is not None:
                    first["currents"][name] = cur
            prev_spikes = spikes
        if keep:
            self.first = first
        self.episodes += 1
        self.env_steps += len(traj)
        env_dt = getattr(traj, "dt", None)
        if self.row_seconds is None and env_dt:
            self.row_seconds = float(env_dt) / substeps
        self.returns.append(float(np.sum(traj.rewards)))

    @staticmethod
    def _group_by(trials: Sequence[Mapping[str, Any]]) -> str:
        t = trials[0]
        return "gt" if t.get("gt") is not None else "choice"

    # -------------------------------------------------------------- results
    def _entry(self, name: str, value: Any) -> dict[str, Any]:
        m = METRICS[name]
        return {"value": _json_num(value), "unit": m.unit_for(self.dt), "definition": m.definition}

    def summary(self) -> dict[str, Any]:
        """Every number with its unit and definition (JSON-able; NaN written as null)."""
        layers: dict[str, Any] = {}
        for d in self.layers:
            st = self.stats[d["name"]]
            pops = st.summary()
            per = st.neuron_stats()
            entry: dict[str, Any] = {
                "size": d["size"],
                "populations": {
                    pop: {k: self._entry(k, v) for k, v in vals.items()}
                    for pop, vals in pops.items()
                },
                "sign": d.get("sign"),
                "neurons": {
                    k: [_json_num(v) for v in arr] for k, arr in per.items() if k in NEURON_METRICS
                },
                "neuron_definitions": {
                    k: {"unit": NEURON_METRICS[k].unit_for(self.dt), "definition": m.definition}
                    for k, m in NEURON_METRICS.items()
                    if k in per
                },
            }
            sel = self.selectivity(d["name"])
            if sel is not None:
                entry["selectivity"] = sel
            layers[d["name"]] = entry
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "episodes": self.episodes,
            "env_steps": self.env_steps,
            "mean_return": _json_num(np.mean(self.returns)) if self.returns else None,
            "dt": self.dt,
            "rate_unit": "Hz" if self.dt is not None else "spikes/step",
            "parameters": dict(self.params, saturation=0.9),
            "about": {
                "episodes": "episodes analysed (deterministic policy)",
                "env_steps": "env steps over all episodes",
                "mean_return": "mean episode return of the analysed episodes",
                "dt": "neuron step in seconds (rates in Hz); null: rates in spikes/step",
                "parameters": "fano_window and corr_bin in neuron steps; saturation: spike "
                "probability per step",
                "layers": "per spiking layer: populations (all, E, I) of numbers, each "
                "{value, unit, definition}; sign: Dale sign per neuron (+1 E, -1 I) or null; "
                "neurons: per-neuron arrays (neuron_definitions)",
            },
            "layers": layers,
        }

    def selectivity(self, name: str) -> dict[str, Any] | None:
        """Per-neuron selectivity between the first two trial groups (trial envs), or None."""
        acc = self.psth.get(name, {}).get("start")
        if acc is None:
            return None
        rates = acc.rates()
        keys = list(rates)
        if len(keys) < 2:
            return None
        sel = selectivity(rates[keys[1]], rates[keys[0]])
        return {
            "groups": f"{acc.by}={keys[1]} (A) vs {acc.by}={keys[0]} (B)",
            "definition": "index (r_A - r_B)/(r_A + r_B), dprime (r_A - r_B)/sqrt((var_A + "
            "var_B)/2), r: a neuron's mean spikes per step over a trial",
            "unit": "1",
            "index": [_json_num(v) for v in sel["index"]],
            "dprime": [_json_num(v) for v in sel["dprime"]],
        }

    # -------------------------------------------------------------- files
    def figures(self) -> dict[str, Any]:
        """File name -> matplotlib Figure, for the figures this analysis can draw."""
        from snrl.analysis import figures as F

        dt = self.dt
        unit = "Hz" if dt is not None else "spikes/step"
        scale = 1.0 / dt if dt is not None else 1.0
        out: dict[str, Any] = {}
        if self.first is not None:
            out["raster.png"] = F.raster_figure(self.first["layers"], dt)
        rc = []
        for d in self.layers:
            per = self.stats[d["name"]].neuron_stats()
            rc.append(
                {
                    "name": d["name"],
                    "rate": per["rate"],
                    "cv_isi": per["cv_isi"],
                    "sign": d.get("sign"),
                }
            )
        out["rates_cv.png"] = F.rate_cv_figure(rc, unit)
        if self.first is not None and self.first["currents"]:
            name, cur = next(iter(self.first["currents"].items()))
            rate = self.stats[name].neuron_stats()["rate"]
            out["ei_currents.png"] = F.ei_currents_figure(
                name, cur, list(np.argsort(-rate)[:3]), dt
            )
        if self.tuning:
            name, acc = next(iter(self.tuning.items()))
            centres, curves = acc.curves()
            sign = self.layers[0].get("sign")
            labels = [f"observation {j}" for j in range(len(centres))]
            out["tuning.png"] = F.tuning_figure(name, centres, curves, sign, labels, scale, unit)
        if self.psth:
            name, accs = next(iter(self.psth.items()))
            rate = self.stats[name].neuron_stats()["rate"]
            neurons = list(np.argsort(-rate)[:8])
            for event, file, label in (
                ("start", "psth.png", "trial start"),
                ("decision", "psth_decision.png", "decision"),
            ):
                acc = accs[event]
                psth = {f"{acc.by}={k}": v for k, v in acc.psth().items()}
                if psth:
                    out[file] = F.psth_figure(
                        name, psth, neurons, acc.pre, self.row_seconds or dt, scale, unit, label
                    )
            if accs["start"].psth():
                traj = self.pca_trajectories(name)
                if traj is not None:
                    by = accs["start"].by
                    labelled = {f"{by}={k}": v for k, v in traj[0].items()}
                    out["pca.png"] = F.pca_figure(name, labelled, traj[1])
        return out

    def pca_trajectories(self, name: str) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """Condition -> (time, 3) projection of the trial-start PSTHs on their first three
        principal axes (fitted on all conditions together), and the explained ratios."""
        acc = self.psth.get(name, {}).get("start")
        if acc is None:
            return None
        psth = {k: np.nan_to_num(v) for k, v in acc.psth().items()}
        if not psth:
            return None
        stacked = np.concatenate(list(psth.values()))
        if stacked.shape[0] < 2:
            return None
        res = pca(stacked, 3)
        return {k: (v - res["mean"]) @ res["components"].T for k, v in psth.items()}, res[
            "explained_variance_ratio"
        ]

    def write(self, out_dir: str | Path, *, svg: bool = False) -> list[Path]:
        """Write ``summary.json`` and the figures into ``out_dir`` (atomically, file by file).

        Returns:
            The paths written.
        """
        from snrl.analysis.figures import save_figure

        out = Path(out_dir)
        written = []
        for name, fig in self.figures().items():
            written.append(save_figure(fig, out / name))
            if svg:
                written.append(save_figure(fig, out / name.replace(".png", ".svg")))
        path = out / "summary.json"
        write_json_atomic(path, self.summary())
        written.append(path)
        return written


def analyze(
    algo: Any,
    *,
    episodes: int = 20,
    seed: int = 0,
    on_episode: Any = None,
    **kwargs: Any,
) -> NetworkAnalysis:
    """Roll out ``episodes`` deterministic episodes of ``algo`` (seeds ``seed``,
    ``seed + 1``, ...) and fold each into a :class:`NetworkAnalysis`.

    Args:
        algo: a PPO or DQN algorithm with a spiking policy backbone.
        episodes: how many episodes.
        seed: seed of the first episode's env reset.
        on_episode: optional callable ``(index, trajectory)`` after each episode (exports).
        **kwargs: passed to :class:`NetworkAnalysis` (``fano_window``, ``corr_bin`` ...).
    """
    import torch

    if int(episodes) < 1:
        raise UserError(f"episodes={episodes} (give at least 1)")
    agent = algo.agent
    backbone = agent.actor
    weights = layer_weights(backbone)
    dt = float(getattr(algo.config, "dt", None) or next(iter(weights.values())).dt)
    result = None
    for k in range(int(episodes)):
        traj = algo.rollout(seed=int(seed) + k, record=False)
        if result is None:
            result = NetworkAnalysis(traj.layers, dt=dt, weights=weights, **kwargs)
        with torch.no_grad():
            x = agent.preprocess(traj.observations).cpu().double().numpy()
        result.add(traj, inputs=x)
        if on_episode is not None:
            on_episode(k, traj)
    return result


def read_summary(path: str | Path) -> dict[str, Any]:
    """Read a ``summary.json`` written by :meth:`NetworkAnalysis.write`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc} (run `snrl analyze` first)") from exc
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise UserError(f"{path} is not an snrl analysis summary (run `snrl analyze`)")
    return data
