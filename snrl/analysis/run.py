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

from snrl.analysis import connectivity as conn
from snrl.analysis import dynamics as dyn
from snrl.analysis.currents import LayerWeights, layer_weights, synaptic_currents
from snrl.analysis.perturb import is_multitask
from snrl.analysis.stats import METRICS, NEURON_METRICS, SpikeStats
from snrl.analysis.taskvar import task_variance_analysis
from snrl.analysis.trials import PSTHAccumulator, TuningAccumulator, pca, selectivity
from snrl.errors import UserError
from snrl.io import write_json_atomic
from snrl.training.rundir import ANALYSIS_FILES

__all__ = ["ANALYSIS_FILES", "NetworkAnalysis", "analyze", "initial_weights"]

_FORMAT = "snrl.analysis"
_VERSION = 1

#: What each network of an agent is, for ``summary.json`` (``network_role``) and the figures:
#: the policy (with a critic beside it, or without: DQN's Q-network), the critic, the trunk.
NETWORK_ROLES = {
    "policy": "the policy network: it chooses the actions (its activity is recorded while it acts)",
    "policy+critic": "the policy network: it chooses the actions (its activity is recorded "
    "while it acts); the critic is a separate network with its own E/I assignment, analysed "
    "in critic_summary.json and the critic_*.png figures",
    "critic": "the critic network: it estimates the value; a separate network with its own "
    "E/I assignment, run on the observations of the same evaluation episodes from its initial "
    "state",
    "trunk": "one network serves policy and value (shared trunk: one E/I assignment, one "
    "state, two leaky-integrator readouts: the policy's and the value's)",
}
#: What figure labels add to ``"<network>: <layer>"``.
_LABEL_NOTES = {"critic": " (own E/I)", "trunk": " (policy + value)"}


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
        network: which network of the agent this is (``"policy"``, ``"critic"``, or
            ``"trunk"``: one network for policy and value): named in every figure title and in
            ``summary.json``.
        role: what the network is, in words (``summary.json``'s ``network_role``; default:
            :data:`NETWORK_ROLES` of ``network``).
        decode: trial envs: decode the task variables over time and measure the
            dimensionality of the first spiking layer (:mod:`snrl.analysis.dynamics`).
        n_shuffles: label shuffles of the decoding's null distribution.
        decode_steps: env steps from each trial's start that are decoded.
        smooth: causal boxcar (env steps) of the decoded activity.
        max_trials: trials kept for decoding (the first ones).
        initial_weights: the layers' weights before training (see :func:`initial_weights`),
            for the connectivity before/after comparison; None: after only.
        fixed_points: a :class:`snrl.analysis.fixed_points.FixedPointAnalysis` of the first
            spiking layer, fed each episode (``fixed_points.png``, ``summary["fixed_points"]``);
            None: no fixed points.
        dpca: trial envs with ``decode``: also the demixed PCA components of the first
            spiking layer's trial activity (:func:`snrl.analysis.tdr.dpca_analysis`;
            ``summary["dynamics"]["dpca"]``, ``dpca.png``).

    ``others`` holds the analyses of the agent's other networks (:func:`analyze` adds the
    critic of an actor-critic run): their layers join the raster, rate/CV and current
    figures (labelled by network) and their summaries ``summary()["networks"]``.
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
        network: str = "policy",
        role: str | None = None,
        decode: bool = True,
        n_shuffles: int = 20,
        decode_steps: int = 40,
        smooth: int = 3,
        max_trials: int = 2000,
        initial_weights: Mapping[str, LayerWeights] | None = None,
        fixed_points: Any = None,
        dpca: bool = False,
    ) -> None:
        self.network = str(network)
        self.role = NETWORK_ROLES.get(self.network, "") if role is None else str(role)
        self.dpca = bool(dpca)
        self.decode = bool(decode)
        self.decode_params = {
            "n_shuffles": int(n_shuffles),
            "decode_steps": int(decode_steps),
            "smooth": int(smooth),
            "max_trials": int(max_trials),
            "folds": 5,
        }
        self.initial_weights = dict(initial_weights or {})
        self.fixed_points = fixed_points
        self.trial_activity: dyn.TrialActivity | None = None
        self._dynamics: dict[str, Any] | None = None
        self.others: dict[str, NetworkAnalysis] = {}
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
        # layer -> event ("start", "decision") -> grouping ("gt", "choice") -> accumulator
        self.psth: dict[str, dict[str, dict[str, PSTHAccumulator]]] = {}
        self.tuning: dict[str, TuningAccumulator] = {}
        self.first: dict[str, Any] | None = None  # the first episode, for figures
        self.episodes = 0
        self.env_steps = 0
        self.returns: list[float] = []
        self.row_seconds: float | None = None  # task seconds per activity row (trial envs)
        self.env_dt: float | None = None  # task seconds per env step (trial envs)
        self._connectivity: dict[str, dict[str, Any]] = {}
        #: a multitask run's task variance and clusters (:mod:`snrl.analysis.taskvar`)
        self.task_variance: dict[str, Any] | None = None

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
                    by_acc = accs.setdefault(event, {})
                    for by in self._group_by(trials):
                        acc = by_acc.get(by)
                        if acc is None:
                            acc = by_acc[by] = PSTHAccumulator(
                                d["size"], pre=pre, post=post, event=event, by=by
                            )
                        acc.add(spikes, trials, substeps, getattr(traj, "dt", None))
                if k == 0 and self.decode:
                    if self.trial_activity is None:
                        p = self.decode_params
                        self.trial_activity = dyn.TrialActivity(
                            d["size"],
                            length=p["decode_steps"],
                            smooth=p["smooth"],
                            max_trials=p["max_trials"],
                        )
                    self.trial_activity.add(spikes, trials, substeps)
                    self._dynamics = None
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
            if trials:  # where the trials and their periods lie in the figures
                first["markers"] = (list(trials), substeps, getattr(traj, "dt", None))
            self.first = first
        if self.fixed_points is not None:
            name = self.layers[0]["name"]
            env_dt = getattr(traj, "dt", None)
            self.fixed_points.add(traj.activity[name], inputs, trials, env_dt)
        self.episodes += 1
        self.env_steps += len(traj)
        env_dt = getattr(traj, "dt", None)
        if self.row_seconds is None and env_dt:
            self.row_seconds = float(env_dt) / substeps
            self.env_dt = float(env_dt)
        self.returns.append(float(np.sum(traj.rewards)))

    @staticmethod
    def _group_by(trials: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Groupings of the trials: by ground truth (when the task has one) and by choice."""
        t = trials[0]
        return ("gt", "choice") if t.get("gt") is not None else ("choice",)

    def _start_acc(self, name: str) -> PSTHAccumulator | None:
        """The trial-start accumulator of the first grouping (ground truth, else choice)."""
        by_acc = self.psth.get(name, {}).get("start", {})
        return next(iter(by_acc.values()), None)

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
            trials = self._trial_summary(d["name"])
            if trials is not None:
                entry["trials"] = trials
            entry["connectivity"] = _jsonable(self.connectivity(d["name"]))
            layers[d["name"]] = entry
        out = {
            "format": _FORMAT,
            "version": _VERSION,
            "network": self.network,
            "network_role": self.role,
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
                "neurons: per-neuron arrays (neuron_definitions); trials (trial envs): "
                "trials per condition and how the decision was placed (alignment)",
                "network": "the agent's network these layers belong to (policy: chooses the "
                "actions; critic: estimates the value, a separate network with its own E/I "
                "assignment; trunk: one network serves policy and value); network_role says "
                "it in words",
                "networks": "the analyses of the agent's other networks, same format",
            },
            "layers": layers,
        }
        dynamics = self.dynamics()
        if dynamics is not None:
            out["dynamics"] = _jsonable(dynamics)
            out["about"]["dynamics"] = (
                "trial envs: the first spiking layer's task-variable decoding over time "
                "(cross-validated shrinkage LDA with a label-shuffle null), the held-out "
                "choice axis by stimulus condition, the dimensionality (cross-validated "
                "PCA, participation ratio), and tdr: targeted dimensionality reduction (Mante "
                "et al. 2013) with the demixed variance (Kobak et al. 2016 marginalization, not "
                "dPCA); definitions inside"
            )
        out["about"]["connectivity"] = (
            "layers.<layer>.connectivity: the effective recurrent weights by E/I block "
            "(trained, and initial: rebuilt from the run's seed), their spectral radius, and "
            "the mean E->E weight between same- vs opposite-preference E cells"
        )
        if self.fixed_points is not None:
            out["fixed_points"] = _jsonable(self.fixed_points.summary())
            out["about"]["fixed_points"] = (
                "the first spiking layer's fixed and slow points under each frozen task input "
                "(Sussillo & Barak 2013) with their Jacobian spectra; approximation and "
                "parameters inside"
            )
        if self.task_variance is not None:
            out["task_variance"] = _jsonable(self.task_variance)
            out["about"]["task_variance"] = (
                "multitask runs: each neuron's task variance (Yang et al. 2019), normalized per "
                "neuron, and the clusters of the active neurons (snrl perturb --lesion cluster "
                "--cluster K silences one); definition inside"
            )
        if self.others:
            out["networks"] = {k: v.summary() for k, v in self.others.items()}
        return out

    def connectivity(self, name: str) -> dict[str, Any]:
        """Connectivity of one layer's recurrent weights: ``trained`` and (when known)
        ``initial`` summaries (:func:`snrl.analysis.connectivity.connectivity_summary`) and
        ``selectivity``, the same- vs opposite-preference E->E comparison (trial envs with
        Dale signs; a cell's preference is the sign of its selectivity index)."""
        if name in self._connectivity:
            return self._connectivity[name]
        out: dict[str, Any] = {"definition": conn.__doc__.split("\n\n", 1)[1].strip()}
        w = self.weights.get(name)
        sign = next(d.get("sign") for d in self.layers if d["name"] == name)
        if w is not None:
            out["trained"] = conn.connectivity_summary(w.w_rec, sign)
        w0 = self.initial_weights.get(name)
        if w0 is not None:
            out["initial"] = conn.connectivity_summary(w0.w_rec, sign)
        sel = self.selectivity(name)
        if w is not None and sign is not None and sel is not None:
            pref = np.sign(np.array([np.nan if v is None else v for v in sel["index"]], float))
            res = conn.selectivity_connectivity(w.w_rec, sign, pref, n_shuffles=1000)
            out["selectivity"] = dict(res, groups=sel["groups"])
            if w0 is not None:
                res0 = conn.selectivity_connectivity(w0.w_rec, sign, pref, n_shuffles=1000)
                out["selectivity_initial"] = dict(res0, groups=sel["groups"])
        self._connectivity[name] = out
        return out

    def dynamics(self) -> dict[str, Any] | None:
        """Decoding over time, the held-out choice axis and the dimensionality of the first
        spiking layer's trial activity (trial envs with ``decode``), or None; computed once.
        """
        ta = self.trial_activity
        if ta is None or not ta.x:
            return None
        if self._dynamics is not None:
            return self._dynamics
        p = self.decode_params
        x = ta.tensor()
        variables = ta.variables()
        decoding = {}
        for i, var in enumerate(variables):
            decoding[var] = dyn.decode_over_time(
                x, ta.labels(var), k=p["folds"], n_shuffles=p["n_shuffles"], seed=1000 * i
            )
        stim = [v for v in variables if v != "choice"]
        groups = np.array(
            [
                ", ".join(f"{v}={lab}" for v, lab in zip(stim, labs)) if all(labs) else ""
                for labs in zip(*[ta.labels(v) for v in stim])
            ]
            if stim
            else [""] * len(ta.trials),
            dtype=object,
        )
        self._dynamics = {
            "layer": self.layers[0]["name"],
            "n_trials": len(ta.trials),
            "trials_left_out": ta.dropped,
            "bin_seconds": self.env_dt,
            "parameters": dict(p),
            "definition": dyn.__doc__.split("\n\n", 1)[1].strip(),
            "decoding": decoding,
            "choice_axis": dyn.choice_axis_projection(x, ta.labels("choice"), groups),
            "dimensionality": dyn.trial_dimensionality(x, groups if stim else ta.labels("choice")),
            "tdr": _tdr_entry(ta),
        }
        if self.dpca:
            from snrl.analysis.tdr import dpca_analysis

            self._dynamics["dpca"] = dpca_analysis(ta)
        return self._dynamics

    def _trial_summary(self, name: str) -> dict[str, Any] | None:
        accs = self.psth.get(name)
        if not accs:
            return None
        start = accs["start"]
        dec = next(iter(accs["decision"].values()))
        return {
            "n_trials": {by: acc.n_trials() for by, acc in start.items()},
            "decision_alignment": dict(dec.alignment),
            "definition": "n_trials: trials per condition, grouped by ground truth (gt) and by "
            "choice; decision_alignment: how many trials had their decision placed at the "
            "agent's choice, at the onset of the task's decision period (no choice: the agent "
            "never left fixation, or the task names no fixation action), or at the trial's "
            "last step (neither known); PSTH windows are cut at the trial's own steps",
        }

    def selectivity(self, name: str) -> dict[str, Any] | None:
        """Per-neuron selectivity between the first two trial groups (trial envs), or None."""
        acc = self._start_acc(name)
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
    def _label(self, name: str) -> str:
        return f"{self.network}: {name}{_LABEL_NOTES.get(self.network, '')}"

    def figures(self) -> dict[str, Any]:
        """File name -> matplotlib Figure, for the figures this analysis can draw.

        The raster, rate/CV and current figures show every network (this one and
        ``others``), each layer labelled ``"<network>: <layer>"``; the trial and tuning
        figures are of this network (the policy), named in their titles."""
        from snrl.analysis import figures as F

        dt = self.dt
        unit = "Hz" if dt is not None else "spikes/step"
        scale = 1.0 / dt if dt is not None else 1.0
        nets = [self, *self.others.values()]
        out: dict[str, Any] = {}
        markers = None
        if self.first is not None and "markers" in self.first:
            markers = F.trial_markers(*self.first["markers"])
        if self.first is not None:
            raster = []
            for net in nets:
                if net.first is not None:
                    raster += [dict(ly, name=net._label(ly["name"])) for ly in net.first["layers"]]
            out["raster.png"] = F.raster_figure(raster, dt, markers=markers)
        rc = []
        for net in nets:
            for d in net.layers:
                per = net.stats[d["name"]].neuron_stats()
                rc.append(
                    {
                        "name": net._label(d["name"]),
                        "rate": per["rate"],
                        "cv_isi": per["cv_isi"],
                        "sign": d.get("sign"),
                    }
                )
        out["rates_cv.png"] = F.rate_cv_figure(rc, unit)
        if self.first is not None and self.first["currents"]:
            name, cur = next(iter(self.first["currents"].items()))
            rate = self.stats[name].neuron_stats()["rate"]
            sign = next(d.get("sign") for d in self.layers if d["name"] == name)
            w = self.weights.get(name)
            out["ei_currents.png"] = F.ei_currents_figure(
                self._label(name),
                cur,
                _pick_by_population(-rate, sign, 2),
                dt,
                threshold=getattr(w, "threshold", None),
                markers=markers,
            )
        first = self.layers[0]
        if first["name"] in self.weights:
            c = self.connectivity(first["name"])
            w0 = self.initial_weights.get(first["name"])
            out["connectivity.png"] = F.connectivity_figure(
                self._label(first["name"]),
                self.weights[first["name"]].w_rec,
                None if w0 is None else w0.w_rec,
                first.get("sign"),
                c.get("selectivity"),
            )
        if self.tuning:
            name, acc = next(iter(self.tuning.items()))
            centres, curves = acc.curves()
            sign = self.layers[0].get("sign")
            labels = [f"observation {j}" for j in range(len(centres))]
            out["tuning.png"] = F.tuning_figure(
                self._label(name), centres, curves, sign, labels, scale, unit
            )
        if self.psth:
            name, accs = next(iter(self.psth.items()))
            neurons = self.psth_neurons(name)
            for event, file, label in (
                ("start", "psth.png", "trial start"),
                ("decision", "psth_decision.png", "decision"),
            ):
                panels = {
                    by: {"psth": acc.psth(), "sem": acc.sem(), "n": acc.n_trials()}
                    for by, acc in accs[event].items()
                }
                if any(p["psth"] for p in panels.values()):
                    if event == "decision":
                        label = _decision_label(next(iter(accs[event].values())).alignment)
                    out[file] = F.psth_figure(
                        self._label(name),
                        panels,
                        neurons,
                        next(iter(accs[event].values())).pre,
                        self.row_seconds or dt,
                        scale,
                        unit,
                        label,
                    )
            dynamics = self.dynamics()
            if dynamics is not None and dynamics["decoding"]:
                out["decoding.png"] = F.decoding_figure(self._label(dynamics["layer"]), dynamics)
            if dynamics is not None and "axes" in dynamics["tdr"]:
                from snrl.analysis.tdr import tdr_figure

                out["tdr.png"] = tdr_figure(
                    self._label(dynamics["layer"]), dynamics["tdr"], dynamics["bin_seconds"]
                )
            if dynamics is not None and "marginalizations" in dynamics.get("dpca", {}):
                from snrl.analysis.tdr import dpca_figure

                out["dpca.png"] = dpca_figure(
                    self._label(dynamics["layer"]), dynamics["dpca"], dynamics["bin_seconds"]
                )
            traj = self.pca_trajectories(name)
            if traj is not None:
                by = self._start_acc(name).by
                labelled = {f"{by}={k}": v for k, v in traj[0].items()}
                out["pca.png"] = F.pca_figure(self._label(name), labelled, traj[1])
        if self.task_variance is not None:
            from snrl.analysis.taskvar import task_variance_figure

            out["task_variance.png"] = task_variance_figure(self.task_variance, self.network)
        if self.fixed_points is not None and self.episodes:
            out["fixed_points.png"] = self.fixed_points.figure(self._label(self.layers[0]["name"]))
        return out

    def psth_neurons(self, name: str, per_population: int = 3) -> list[tuple[int, str]]:
        """The neurons the PSTH figures show: the ``per_population`` most selective E
        neurons and as many I neurons (largest |d'| between the first two trial groups;
        by firing rate where d' is undefined), as ``(index, population)``."""
        rate = self.stats[name].neuron_stats()["rate"]
        sign = next(d.get("sign") for d in self.layers if d["name"] == name)
        sel = self.selectivity(name)
        score = np.asarray(rate, dtype=np.float64) * 0.0
        if sel is not None:
            dp = np.abs(np.array([np.nan if v is None else v for v in sel["dprime"]], float))
            score = np.where(np.isfinite(dp), dp, -1.0)
        # ties (and undefined d') broken by rate, highest first
        order_key = -(score * 1e6 + np.asarray(rate, dtype=np.float64) / (1 + np.max(rate)))
        return _pick_by_population(order_key, sign, per_population)

    def pca_trajectories(self, name: str) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
        """Condition -> (time, 3) projection of the trial-start PSTHs on their first three
        principal axes (fitted on all conditions together), and the explained ratios; only
        the time bins that trials of every condition cover (no neighbouring trial)."""
        acc = self._start_acc(name)
        if acc is None:
            return None
        psth = acc.psth()
        if not psth:
            return None
        # only the bins every condition's trials cover (windows are cut at trial bounds)
        ok = np.logical_and.reduce([np.isfinite(v).all(axis=1) for v in psth.values()])
        psth = {k: v[ok] for k, v in psth.items()}
        stacked = np.concatenate(list(psth.values()))
        if stacked.shape[0] < 2:
            return None
        res = pca(stacked, 3)
        return {k: (v - res["mean"]) @ res["components"].T for k, v in psth.items()}, res[
            "explained_variance_ratio"
        ]

    def write(
        self,
        out_dir: str | Path,
        *,
        svg: bool = False,
        style: str | None = None,
        prefix: str = "",
    ) -> list[Path]:
        """Write ``summary.json`` and the figures into ``out_dir`` (atomically, file by file),
        then those of each network in ``others`` on their own, their names prefixed with the
        network's (``critic_summary.json``, ``critic_raster.png``, ...).

        Args:
            svg: also write each figure as SVG (a style always does).
            style: ``"paper"`` or ``"talk"`` (:mod:`snrl.analysis.style`): the figures in
                that style, with their PDF/SVG; None: the default PNGs.
            prefix: put before every file name (the other networks' files).

        Returns:
            The paths written.
        """
        from snrl.analysis.figures import save_figure
        from snrl.analysis.style import write_figure

        out = Path(out_dir)
        written = []
        for name, fig in self.figures().items():
            name = prefix + name
            if style is not None:  # every style writes an SVG too
                written += write_figure(fig, out / name, style=style)
                continue
            written.append(save_figure(fig, out / name))
            if svg:
                written.append(save_figure(fig, out / name.replace(".png", ".svg")))
        path = out / f"{prefix}summary.json"
        write_json_atomic(path, self.summary())
        written.append(path)
        for key, other in self.others.items():  # each network's own files
            written += other.write(out, svg=svg, style=style, prefix=f"{prefix}{key}_")
        return written


def analyze(
    algo: Any,
    *,
    episodes: int = 20,
    seed: int = 0,
    on_episode: Any = None,
    compare_initial: bool = True,
    task_variance: bool = True,
    fixed_points: bool = False,
    fixed_points_beta: float = 0.3,
    **kwargs: Any,
) -> NetworkAnalysis:
    """Roll out ``episodes`` deterministic episodes of ``algo`` (seeds ``seed``,
    ``seed + 1``, ...) and fold each into a :class:`NetworkAnalysis` of each network.

    The policy's activity is the one recorded while it acted. An actor-critic agent's critic
    (PPO: a separate network with its own E/I assignment) does not act, so evaluation skips
    it; its activity is computed by running it on the same preprocessed observations of each
    episode from its initial state (exactly the states it would pass through, since it
    sees only the observations; with ``hh_init="random"`` its initial state is a fresh
    draw). It is analysed as ``result.others["critic"]`` when it has spiking layers. A
    shared-trunk agent (``shared_trunk``) has one network for policy and value: it is
    analysed once, as ``network="trunk"``.

    Args:
        algo: a PPO or DQN algorithm with a spiking policy backbone.
        episodes: how many episodes.
        seed: seed of the first episode's env reset.
        on_episode: optional callable ``(index, trajectory)`` after each episode (exports).
        compare_initial: rebuild the networks' initial weights from the run's seed
            (:func:`initial_weights`) for the connectivity before/after training.
        task_variance: on a multitask run (``snrl train --tasks``), also evaluate
            ``episodes`` episodes (rounded up to a multiple of the task count, every task
            in the same share) for the task variance of each neuron and its clusters
            (:func:`snrl.analysis.taskvar.task_variance_analysis`), in
            ``result.task_variance``.
        fixed_points: also find the fixed and slow points of the policy's first spiking
            layer (LIF or ALIF) under each frozen task input
            (:class:`snrl.analysis.fixed_points.FixedPointAnalysis`), in
            ``result.fixed_points``.
        fixed_points_beta: their escape-noise width (membrane units).
        **kwargs: passed to :class:`NetworkAnalysis` (``fano_window``, ``corr_bin``,
            ``decode``, ``n_shuffles`` ...); the critic is not decoded.

    Returns:
        The policy's analysis (``network="policy"``, or ``"trunk"`` for a shared trunk), with
        ``others`` holding the critic's.
    """
    import torch

    if int(episodes) < 1:
        raise UserError(f"episodes={episodes} (give at least 1)")
    agent = algo.agent
    backbone = agent.actor
    weights = layer_weights(backbone)
    dt = float(getattr(algo.config, "dt", None) or next(iter(weights.values())).dt)
    critic = getattr(agent, "critic", None)
    critic_weights = layer_weights(critic) if critic is not None else {}
    if not critic_weights:
        critic = None
    network = _network_name(agent)
    role = NETWORK_ROLES["policy+critic" if critic is not None else network]
    fpa = None
    if fixed_points:  # checked before any episode runs
        from snrl.analysis.fixed_points import FixedPointAnalysis

        first = next(iter(weights), None)
        if first is None:
            raise UserError("fixed points need a spiking policy layer (lif or alif backbone)")
        fpa = FixedPointAnalysis(backbone.layers[first], name=first, beta=fixed_points_beta)
    before = initial_weights(algo) if compare_initial else {}
    result = None
    for k in range(int(episodes)):
        traj = algo.rollout(seed=int(seed) + k, record=False)
        if result is None:
            result = NetworkAnalysis(
                traj.layers,
                dt=dt,
                weights=weights,
                network=network,
                role=role,
                initial_weights=before.get(network),
                fixed_points=fpa,
                **kwargs,
            )
        with torch.no_grad():
            xt = agent.preprocess(traj.observations)
            x = xt.cpu().double().numpy()
        result.add(traj, inputs=x)
        if critic is not None:
            with torch.no_grad():
                res = critic.run(xt[:, None], critic.initial_state(1, device=xt.device))
            ctraj = _CriticTrajectory(traj, res.activity)
            if "critic" not in result.others:
                result.others["critic"] = NetworkAnalysis(
                    ctraj.layers,
                    dt=dt,
                    weights=critic_weights,
                    network="critic",
                    initial_weights=before.get("critic"),
                    **{**kwargs, "decode": False},
                )
            result.others["critic"].add(ctraj, inputs=x)
        if on_episode is not None:
            on_episode(k, traj)
    if task_variance and is_multitask(algo):
        result.task_variance = task_variance_analysis(algo, episodes=int(episodes), seed=seed)
    return result


def _tdr_entry(ta: dyn.TrialActivity) -> dict[str, Any]:
    """Targeted dimensionality reduction and demixed variance of the trial activity
    (:func:`snrl.analysis.tdr.tdr_analysis`), with their definition."""
    from snrl.analysis import tdr

    return dict(tdr.tdr_analysis(ta), definition=tdr.__doc__.split("\n\n", 1)[1].strip())


class _CriticTrajectory:
    """A recorded episode seen through the critic: the critic's activity (batch row 0),
    the episode's observations, rewards and trials."""

    def __init__(self, traj: Any, activity: Any) -> None:
        from snrl.networks import Activity

        layers = [la.map(lambda a: a[:, 0]).to_numpy() for la in activity]
        self.activity = Activity(layers)
        self.layers = self.activity.info()
        for key in ("observations", "rewards", "trials", "substeps", "dt"):
            setattr(self, key, getattr(traj, key, None))
        self._len = len(traj)

    def __len__(self) -> int:
        return self._len


def _jsonable(x: Any) -> Any:
    """Arrays, tuples and numpy scalars as JSON values (non-finite numbers as None)."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in (x.tolist() if isinstance(x, np.ndarray) else x)]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return _json_num(x)
    return x


def initial_weights(algo: Any) -> dict[str, dict[str, LayerWeights]]:
    """The spiking layers' weights before training, rebuilt deterministically: a fresh
    algorithm of the same class from the run's config (its ``seed`` builds the networks,
    :meth:`snrl.agents.base.Algorithm._seeded`), without the checkpoint's parameters.

    Returns:
        ``{"policy": {layer: LayerWeights}, "critic": {...}}`` (networks with spiking
        layers; a shared trunk's under ``"trunk"``); empty when the run cannot be rebuilt
        from its config (custom backbones).
    """
    try:
        fresh = type(algo)(None, config=algo.config, run_dir=None)
    except Exception:  # custom backbones, an env that needs an object: no "before"
        return {}
    try:
        out = {_network_name(fresh.agent): layer_weights(fresh.agent.actor)}
        critic = getattr(fresh.agent, "critic", None)
        if critic is not None:
            out["critic"] = layer_weights(critic)
    finally:
        fresh.close()
    return {k: v for k, v in out.items() if v}


def _network_name(agent: Any) -> str:
    """The name the analysis gives an agent's acting network: ``"trunk"`` when one network
    serves policy and value (``shared_trunk``), else ``"policy"``."""
    return "trunk" if getattr(agent, "shared_trunk", False) else "policy"


def _pick_by_population(order_key: Any, sign: Any, k: int) -> list[tuple[int, str]]:
    """The ``k`` neurons of each population (E, I; ``all`` without signs, 2k) with the
    smallest ``order_key``, as ``(index, population)``."""
    key = np.asarray(order_key, dtype=np.float64)
    if sign is None:
        return [(int(j), "all") for j in np.argsort(key, kind="stable")[: 2 * k]]
    s = np.asarray(sign)
    out = []
    for pop, idx in (("E", np.flatnonzero(s > 0)), ("I", np.flatnonzero(s < 0))):
        out += [(int(j), pop) for j in idx[np.argsort(key[idx], kind="stable")][:k]]
    return out


def _decision_label(alignment: Mapping[str, int]) -> str:
    """The PSTH's event name, saying how the decision was placed."""
    rules = [r for r in ("choice", "decision period onset", "trial end") if alignment.get(r)]
    if rules == ["choice"] or not rules:
        return "decision (the agent's choice)"
    parts = ", ".join(f"{alignment[r]} at the {r}" for r in rules)
    return f"decision ({parts})"


def read_summary(path: str | Path) -> dict[str, Any]:
    """Read a ``summary.json`` written by :meth:`NetworkAnalysis.write`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc} (run `snrl analyze` first)") from exc
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise UserError(f"{path} is not an snrl analysis summary (run `snrl analyze`)")
    return data
