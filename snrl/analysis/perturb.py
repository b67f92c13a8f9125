"""Perturbations of a trained network, applied during evaluation only, each optionally only
during one period of a NeuroGym trial ("stimulus", "delay", "decision" ...). Four kinds, one
description (:class:`PerturbationSpec`) and one mechanism (:func:`perturbed`):

* **silence** a population: a seeded random ``round(fraction * n)`` of the ``n`` E (or I)
  neurons of each spiking layer of the policy. A silenced neuron's spikes are forced to 0
  at every neuron step where the perturbation is active. Its own membrane still integrates
  its input (it is not clamped), but nothing of it leaves the neuron: no recurrent input to
  its layer at the next step, no input to the layer above or to the readout, and no reset
  (its reset acts through its own spike).
* **lesion** a task-variance cluster (:mod:`snrl.analysis.taskvar`, multitask runs): its
  neurons are silenced as above.
* **stimulate** a population (chosen as for silencing) with a constant current ``X``: ``X``
  is added to the input current ``I_t`` of each chosen neuron at every neuron step,
  ``v_t = alpha v_{t-1} + I_t + X - reset``. Unit: the layer's input current, i.e. membrane
  units (the threshold is 1 by default) per neuron step; a constant ``X`` alone holds the
  membrane at ``X / (1 - alpha)``, ``alpha = exp(-dt / tau_m)``.
* **noise**: ``S * eps`` is added to the input current of every neuron of each spiking layer
  at every neuron step, ``eps`` standard normal, drawn from a generator seeded by
  ``noise_seed`` (same unit as ``X``; ``S = 0`` is the unperturbed network, bit for bit).

Where it acts (why this seam): a layer computes a step with its model's step function
(``_step``) inside its loop (``_integrate``). :func:`perturbed` wraps each perturbed layer's
``_step`` on the instance, so the current it receives is changed before the step and the
spikes it returns and the spikes kept in its state are masked before anything reads them,
and routes the layer through the reference per-step loop
(:meth:`snrl.layers.base.RecurrentLayer._integrate`), which calls ``_step`` for every neuron
step. That loop is also what the LIF layer's one-step fast path and the compiled sequence
kernel (:mod:`snrl.functional._native`, used for training sequences with autograd on the CPU)
compute, so inside the block neither of those runs for a perturbed layer and the perturbation
applies whatever the path (substeps, sequences, CPU or GPU). Leaving the block removes both
instance attributes: nothing is written into the parameters, buffers or the checkpoint.

:func:`evaluate_perturbed` runs the evaluation (one env per episode, seeds ``seed + i``,
deterministic actions, as ``algo.evaluate``) with the perturbation switched per env and step
by the period the env is in, and :func:`perturbation_report` puts it side by side with the
same evaluation unperturbed (per task on a multitask run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snrl.agents.evaluation import evaluate_agent
from snrl.envs.trials import TrialTracker
from snrl.errors import UserError
from snrl.io import binding_mismatch, dir_binding, json_safe, make_dirs, write_json_atomic
from snrl.layers.base import RecurrentLayer, cached_weights
from snrl.training.rundir import PERTURB_DIR, PERTURB_OUTPUTS, claim_files

__all__ = [
    "KINDS",
    "PERTURB_FILES",
    "Perturbation",
    "PerturbationSpec",
    "Silencing",
    "build_perturbation",
    "check_perturb_out",
    "cluster_neurons",
    "evaluate_perturbed",
    "is_multitask",
    "perturbation_figure",
    "perturbation_report",
    "perturbed",
    "silence",
    "silenced_neurons",
    "write_perturbation",
]

_FORMAT = "snrl.perturbation"

_POPULATIONS = {"E": 1, "I": -1}

#: The kinds of perturbation (module docstring).
KINDS = ("silence", "stimulate", "noise", "lesion")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PerturbationSpec:
    """What a perturbation does (module docstring); JSON-able with ``dataclasses.asdict``.
    :func:`build_perturbation` resolves it to neurons on a network."""

    kind: str
    """One of :data:`KINDS`."""
    population: str | None = None
    """``"E"`` or ``"I"``: the population silenced or stimulated (None for noise: all)."""
    fraction: float = 1.0
    """Share of the population chosen in each spiking layer, in [0, 1]."""
    current: float = 0.0
    """stimulate: the current added per neuron step (membrane units, threshold 1)."""
    noise_std: float = 0.0
    """noise: the standard deviation of the current noise per neuron step (same unit)."""
    cluster: int | None = None
    """lesion: the task-variance cluster silenced."""
    period: str | None = None
    """A NeuroGym trial period during which it acts (None: always)."""
    choice_seed: int = 0
    """Seed of the choice of neurons (numpy ``default_rng``)."""
    noise_seed: int = 0
    """Seed of the noise generator (torch)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"perturbation kind {self.kind!r} (use one of {', '.join(KINDS)})")
        if self.kind in ("silence", "stimulate") and self.population not in _POPULATIONS:
            raise UserError(f"population {self.population!r} (use E or I)")
        if self.kind in ("noise", "lesion") and self.population is not None:
            raise UserError(f"{self.kind} takes no population (it acts on all neurons)"
                            if self.kind == "noise" else "lesion takes no population (its "
                            "neurons are the cluster's)")  # fmt: skip
        if not 0.0 <= float(self.fraction) <= 1.0:
            raise UserError(
                f"--fraction {self.fraction} (give a share of the population in [0, 1])"
            )
        if self.kind == "stimulate" and not math.isfinite(float(self.current)):
            raise UserError(f"--current {self.current} (give a finite current)")
        std = float(self.noise_std)
        if self.kind == "noise" and not (math.isfinite(std) and std >= 0):
            raise UserError(f"--noise {self.noise_std} (give a standard deviation >= 0)")
        if self.kind == "lesion" and (self.cluster is None or int(self.cluster) < 0):
            raise UserError(f"--cluster {self.cluster} (give a cluster index >= 0)")

    def describe(self) -> str:
        """A human-readable label (figure titles)."""
        where = f" during '{self.period}'" if self.period else ""
        share = f"{100 * self.fraction:g} % of " if self.fraction < 1 else "all "
        if self.kind == "silence":
            what = f"{share}{self.population} neurons silenced"
        elif self.kind == "stimulate":
            what = f"{share}{self.population} neurons stimulated, +{self.current:g} per step"
        elif self.kind == "noise":
            what = f"current noise, SD {self.noise_std:g} per step"
        else:
            what = f"task-variance cluster {self.cluster} lesioned (silenced)"
        return what + where


def is_multitask(algo: Any) -> bool:
    """Whether ``algo`` was trained on several tasks (``snrl train --tasks``)."""
    from snrl.tasks.multitask import is_multitask_env

    return is_multitask_env(getattr(algo.config, "env", None))


def cluster_neurons(entry: Mapping[str, Any], cluster: int) -> dict[str, np.ndarray]:
    """The neurons of task-variance cluster ``cluster`` of an analysis entry
    (:func:`snrl.analysis.taskvar.task_variance_analysis`), as ``{layer: indices}``.

    Raises:
        UserError: ``cluster`` is not one of the entry's clusters.
    """
    n = int(entry.get("n_clusters") or 0)
    if not 0 <= int(cluster) < n:
        raise UserError(
            f"--cluster {cluster} is not a task-variance cluster of this run (it has {n}: "
            f"0..{n - 1})"
            if n
            else f"--cluster {cluster}: this run's task-variance analysis found no cluster"
        )
    labels = np.asarray(entry["labels"])
    return {str(entry["layer"]): np.flatnonzero(labels == int(cluster))}


def silenced_neurons(
    backbone: Any, population: str, fraction: float, seed: int = 0
) -> dict[str, np.ndarray]:
    """The neurons of one population chosen in each spiking layer of ``backbone`` (to
    silence or to stimulate).

    Args:
        backbone: a :class:`snrl.networks.SpikingBackbone` with Dale's law.
        population: ``"E"`` or ``"I"``.
        fraction: in [0, 1], the share of that population chosen in each layer.
        seed: seed of the choice (numpy ``default_rng``).

    Returns:
        Layer name -> sorted neuron indices.

    Raises:
        UserError: no spiking layer, no Dale signs, or a bad population or fraction.
    """
    if population not in _POPULATIONS:
        raise UserError(f"population {population!r} (use E or I)")
    f = float(fraction)
    if not 0.0 <= f <= 1.0:
        raise UserError(f"fraction={fraction} (give a share of the population in [0, 1])")
    names = _spiking_names(backbone)
    rng = np.random.default_rng(int(seed))
    out = {}
    for name in names:
        sign = backbone.layers[name].recurrent_sign
        if sign is None:
            raise UserError(
                f"layer {name} has no E/I signs (perturb a run trained with Dale's law, --dale)"
            )
        idx = np.flatnonzero(sign.detach().cpu().numpy() == _POPULATIONS[population])
        k = int(round(f * idx.size))
        out[name] = np.sort(rng.choice(idx, size=k, replace=False)) if k else idx[:0]
    return out


def _spiking_names(backbone: Any) -> list[str]:
    names = list(getattr(backbone, "spiking_names", None) or [])
    if not names:
        raise UserError(
            "the policy has no spiking layer (perturb a run with a spiking backbone: lif, "
            "alif or spylif)"
        )
    return names


class Perturbation:
    """A perturbation resolved on a network: which neurons, what is done to them, and
    whether it is active now (module docstring).

    Args:
        silenced: layer name -> indices of the neurons whose spikes are forced to 0.
        stimulated: layer name -> indices of the neurons that receive ``current``.
        current: added to the stimulated neurons' input current per neuron step.
        noisy: layer name -> indices of the neurons that receive current noise.
        noise_std: its standard deviation per neuron step.
        noise_seed: seed of the noise generator (one per device, made on first use).

    ``active`` is True (always), False (never), or a bool (B,) tensor: per batch row (one
    env each), set by the evaluation loop before each env step.
    """

    def __init__(
        self,
        *,
        silenced: Mapping[str, Any] | None = None,
        stimulated: Mapping[str, Any] | None = None,
        current: float = 0.0,
        noisy: Mapping[str, Any] | None = None,
        noise_std: float = 0.0,
        noise_seed: int = 0,
    ) -> None:
        def idx(m: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
            return {k: np.asarray(v, dtype=np.int64) for k, v in (m or {}).items()}

        self.silenced, self.stimulated, self.noisy = idx(silenced), idx(stimulated), idx(noisy)
        self.current, self.noise_std = float(current), float(noise_std)
        self.noise_seed = int(noise_seed)
        self.active: bool | torch.Tensor = True
        self._vectors: dict[tuple, torch.Tensor] = {}  # (what, layer, device, dtype, N)
        self._generators: dict[str, torch.Generator] = {}

    @property
    def neurons(self) -> dict[str, np.ndarray]:
        """The silenced neurons (layer name -> indices)."""
        return self.silenced

    def layers(self) -> list[str]:
        """The layers this perturbation touches."""
        return list(dict.fromkeys([*self.silenced, *self.stimulated, *self.noisy]))

    def _vector(self, what: str, layer: str, idx: np.ndarray, like: torch.Tensor, fill: float):
        """(N,) ``fill`` at ``idx`` and ``1 - fill`` elsewhere: made once per layer, device
        and dtype (this runs on every neuron step)."""
        key = (what, layer, like.device, like.dtype, like.shape[-1])
        vec = self._vectors.get(key)
        if vec is None:
            vec = torch.full((like.shape[-1],), 1.0 - fill, dtype=like.dtype, device=like.device)
            vec[torch.as_tensor(idx, device=like.device)] = fill
            self._vectors[key] = vec
        return vec

    def _rows(self, like: torch.Tensor) -> torch.Tensor | None:
        """(B, 1) 1 where the perturbation is active now, or None when it is active in all
        rows."""
        if isinstance(self.active, torch.Tensor):
            return self.active.to(device=like.device, dtype=like.dtype).reshape(-1, 1)
        return None

    def keep_mask(self, layer: str, z: torch.Tensor) -> torch.Tensor | None:
        """(B, N) 1 where the spikes of ``z`` (B, N) are kept, 0 where silenced; None when
        nothing is silenced now."""
        idx = self.silenced.get(layer)
        if idx is None or self.active is False:
            return None
        keep = self._vector("keep", layer, idx, z, 0.0)
        rows = self._rows(z)
        if rows is not None:
            return 1 - rows * (1 - keep)  # (B, N): rows not in the period keep all
        return keep.expand_as(z)

    def drive(self, layer: str, current: torch.Tensor) -> torch.Tensor:
        """The input current (B, N) of one neuron step with the stimulation and the noise
        of ``layer`` added where active."""
        if self.active is False:
            return current
        rows = self._rows(current)
        idx = self.stimulated.get(layer)
        if idx is not None and self.current != 0.0:
            add = self._vector("stim", layer, idx, current, 1.0) * self.current
            current = current + (add if rows is None else rows * add)
        idx = self.noisy.get(layer)
        if idx is not None:
            gen = self._generator(current.device)
            eps = torch.randn(
                current.shape, generator=gen, device=current.device, dtype=current.dtype
            )
            eps = eps * (self._vector("noise", layer, idx, current, 1.0) * self.noise_std)
            current = current + (eps if rows is None else rows * eps)
        return current

    def _generator(self, device: torch.device) -> torch.Generator:
        gen = self._generators.get(str(device))
        if gen is None:
            gen = torch.Generator(device=device)
            gen.manual_seed(self.noise_seed)
            self._generators[str(device)] = gen
        return gen


class Silencing(Perturbation):
    """A silencing perturbation of ``neurons`` (layer name -> indices; see
    :func:`silenced_neurons`)."""

    def __init__(self, neurons: Mapping[str, Any]) -> None:
        super().__init__(silenced=neurons)


def build_perturbation(
    backbone: Any,
    spec: PerturbationSpec,
    clusters: Mapping[str, Any] | None = None,
) -> Perturbation:
    """Resolve ``spec`` on ``backbone`` (the policy's spiking backbone).

    Args:
        backbone: a :class:`snrl.networks.SpikingBackbone` (Dale's law for silence and
            stimulate).
        spec: the description.
        clusters: lesion: the task-variance analysis entry of this network
            (:func:`snrl.analysis.taskvar.task_variance_analysis`, or ``summary.json``'s
            ``task_variance``).

    Raises:
        UserError: as :func:`silenced_neurons`; a lesion without clusters, or a cluster the
            analysis does not have.
    """
    if spec.kind == "silence":
        neurons = silenced_neurons(backbone, spec.population, spec.fraction, spec.choice_seed)
        return Perturbation(silenced=neurons)
    if spec.kind == "stimulate":
        neurons = silenced_neurons(backbone, spec.population, spec.fraction, spec.choice_seed)
        return Perturbation(stimulated=neurons, current=spec.current)
    if spec.kind == "noise":
        every = {
            n: np.arange(int(backbone.layers[n].output_size)) for n in _spiking_names(backbone)
        }
        return Perturbation(noisy=every, noise_std=spec.noise_std, noise_seed=spec.noise_seed)
    if clusters is None:
        raise UserError(
            "--lesion cluster needs the run's task-variance clusters (run `snrl analyze RUN` "
            "on the multitask run first)"
        )
    neurons = cluster_neurons(clusters, int(spec.cluster))
    for name in neurons:
        size = int(backbone.layers[name].output_size) if name in backbone.layers else -1
        if size != len(clusters["labels"]):
            raise UserError(
                f"the task-variance clusters are of a layer {name} of {len(clusters['labels'])}"
                f" neurons, this policy's has {size} (rerun `snrl analyze` on this run)"
            )
    return Perturbation(silenced=neurons)


@contextlib.contextmanager
def perturbed(backbone: Any, perturbation: Perturbation) -> Iterator[Perturbation]:
    """A block in which ``backbone``'s layers run under ``perturbation`` where
    ``perturbation.active`` (module docstring): the input current of each neuron step is
    changed by :meth:`Perturbation.drive`, the silenced neurons' spikes are forced to 0.

    The parameters, buffers and state dict are untouched; on leaving, the layers are as
    before (the instance attributes set here are removed).
    """
    patched = []
    try:
        for name in perturbation.layers():
            layer = backbone.layers[name]
            orig = layer._step

            def step(current, state, consts, spike_fn, _orig=orig, _name=name):  # noqa: ANN001
                current = perturbation.drive(_name, current)
                out, new = _orig(current, state, consts, spike_fn)
                keep = perturbation.keep_mask(_name, out)
                if keep is None:
                    return out, new
                return out * keep, new._replace(z=new.z * keep)

            layer.__dict__["_step"] = step
            layer.__dict__["_integrate"] = functools.partial(RecurrentLayer._integrate, layer)
            patched.append(layer)
        yield perturbation
    finally:
        for layer in patched:
            layer.__dict__.pop("_step", None)
            layer.__dict__.pop("_integrate", None)


#: The name of :func:`perturbed` from when silencing was the only kind.
silence = perturbed


def _env_source(algo: Any) -> Any:
    fresh = getattr(algo, "_fresh_env", None)
    return fresh() if callable(fresh) else algo.config.env


@torch.no_grad()
def evaluate_perturbed(
    algo: Any,
    perturbation: Perturbation | None = None,
    *,
    n_episodes: int = 20,
    seed: int = 123,
    period: str | None = None,
    record: Any = None,
) -> dict[str, Any]:
    """Evaluate ``algo`` (deterministic actions, env ``i`` seeded ``seed + i``) with the
    policy under ``perturbation`` (None: unperturbed), active in every step or, with
    ``period``, only in the steps where a NeuroGym trial is in that period.

    ``record`` (optional) is called as ``record.after_step(res, live)`` after every step of
    the agent (e.g. :class:`snrl.analysis.taskvar.TaskActivityRecorder`).

    Returns:
        ``{"mean_return", "std_return", "n_episodes", "returns", "mean_length",
        "spike_rates", "active_fraction"}`` (``spike_rates``: spikes per neuron per neuron
        step of each policy layer, silenced neurons included; ``active_fraction``: the share
        of env steps the perturbation was active); on a trial task also ``"n_trials"``,
        ``"accuracy"``, ``"accuracy_by_condition"`` and ``"trials"``.

    Raises:
        UserError: ``period`` on an env without trials, or a period the task does not have.
    """
    n = int(n_episodes)
    if n < 1:
        raise UserError(f"episodes={n_episodes} (give at least 1)")
    agent = algo.agent
    gate = _Gate(perturbation, period, record)
    ctx = (
        perturbed(agent.actor, perturbation)
        if perturbation is not None
        else contextlib.nullcontext(None)
    )
    was_training = agent.training
    agent.eval()
    try:
        with cached_weights(), ctx:
            out = evaluate_agent(
                agent,
                _env_source(algo),
                n_episodes=n,
                seed=int(seed),
                deterministic=True,
                env_kwargs=algo.eval_env_kwargs(n),
                max_episode_steps=algo.config.max_episode_steps,
                hook=gate,
            )
    finally:
        agent.train(was_training)
    out["active_fraction"] = gate.active_steps / max(gate.total_steps, 1)
    return out


class _Gate:
    """The hook of :func:`evaluate_perturbed` in :func:`evaluate_agent`: checks ``period``
    once the envs are reset, switches the perturbation on per env in that period, and counts
    the live env steps it was active in."""

    def __init__(
        self, perturbation: Perturbation | None, period: str | None, record: Any = None
    ) -> None:
        self.perturbation, self.period, self.record = perturbation, period, record
        self.active_steps = self.total_steps = 0

    def after_step(self, res: Any, live: np.ndarray) -> None:
        if self.record is not None:
            self.record.after_step(res, live)

    def start(self, envs: Any, tracker: TrialTracker) -> None:
        if self.period is not None:
            _check_period(envs, self.period, tracker)

    def step(self, envs: Any, live: np.ndarray) -> None:
        if self.perturbation is not None and self.period is not None:
            act = np.asarray(envs.call("in_period", self.period), dtype=bool)
            self.perturbation.active = torch.as_tensor(act)
            self.active_steps += int((act & live).sum())
        elif self.perturbation is not None:
            self.active_steps += int(live.sum())
        self.total_steps += int(live.sum())


def _check_period(envs: Any, period: str, tracker: TrialTracker) -> None:
    if not tracker.active:
        raise UserError(
            f"--period {period} needs a trial task (NeuroGym); this env has no trials "
            "(drop --period)"
        )
    periods = set()
    for start_t in envs.get_attr("start_t"):
        periods |= set(dict(start_t))
    if period not in periods:
        raise UserError(
            f"the task has no period {period!r} (its periods: {', '.join(sorted(periods))})"
        )


_DEFINITIONS = {
    "silence": "the spikes of the listed neurons of the policy's spiking layers are forced to 0 "
    "in every neuron step",
    "lesion": "the neurons of the task-variance cluster (snrl analyze's task_variance) are "
    "silenced: their spikes are forced to 0 in every neuron step",
    "stimulate": "current is added to the input current of each listed neuron in every neuron "
    "step (membrane units, threshold 1, per neuron step)",
    "noise": "noise_std times a standard normal draw is added to the input current of every "
    "neuron of the policy's spiking layers in every neuron step (membrane units per step)",
}


def perturbation_report(
    algo: Any,
    spec: PerturbationSpec | None = None,
    *,
    population: str | None = None,
    fraction: float = 1.0,
    period: str | None = None,
    n_episodes: int = 20,
    seed: int = 123,
    choice_seed: int = 0,
    clusters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The evaluation with and without the perturbation, side by side (JSON-able).

    Args:
        algo: a PPO or DQN algorithm with a spiking policy.
        spec: the perturbation; None: silencing ``population`` (the keywords below).
        population, fraction, period, choice_seed: without ``spec``, silencing that share of
            ``"E"`` or ``"I"`` (during ``period``), neurons chosen with ``choice_seed``.
        n_episodes, seed: the evaluation's episodes and the first env seed (both runs); on a
            multitask run rounded up to a multiple of the task count (every task in the same
            share).
        clusters: lesion: the task-variance entry (``summary.json``'s ``task_variance``).

    Returns:
        ``{"perturbation": {...}, "unperturbed": {...}, "perturbed": {...}, "effect": {...}}``;
        each run holds the numbers of :func:`evaluate_perturbed` without the trial log, and
        ``psychometric`` (a :func:`snrl.analysis.psychometric.psychometric_curve`) where the
        task has one; ``effect`` has ``accuracy_by_task`` on a multitask run.

    Raises:
        UserError: a lesion on a single-task run, ``--period`` on a multitask run, and as
            :func:`build_perturbation`.
    """
    from snrl.analysis.psychometric import has_psychometric, psychometric_curve

    if spec is None:
        spec = PerturbationSpec(
            kind="silence",
            population=population,
            fraction=fraction,
            period=period,
            choice_seed=choice_seed,
        )
    multitask = is_multitask(algo)
    if spec.kind == "lesion" and not multitask:
        raise UserError(
            "--lesion cluster needs a run trained on several tasks (snrl train --tasks A,B,...; "
            "its task-variance clusters); use --silence on this run"
        )
    if multitask and spec.period is not None:
        raise UserError("--period is not supported on a multitask run (drop --period)")
    n = int(n_episodes)
    if multitask:
        from snrl.tasks.multitask import parse_task_ids

        k = len(parse_task_ids(algo.config.env))
        n = -(-max(n, 1) // k) * k
    pert_obj = build_perturbation(algo.agent.actor, spec, clusters)
    # the perturbed run first: it checks the period before the longer part runs
    pert = evaluate_perturbed(algo, pert_obj, n_episodes=n, seed=seed, period=spec.period)
    base = evaluate_perturbed(algo, None, n_episodes=n, seed=seed)
    runs = {}
    for key, res in (("unperturbed", base), ("perturbed", pert)):
        trials = res.pop("trials", None)
        if trials and not multitask and has_psychometric(trials):
            try:
                res["psychometric"] = psychometric_curve(trials)
            except UserError as exc:  # too few answered trials for a fit: say so
                res["psychometric"] = None
                res["psychometric_error"] = str(exc)
        runs[key] = res
    touched = {**pert_obj.noisy, **pert_obj.stimulated, **pert_obj.silenced}
    sizes = {name: int(algo.agent.actor.layers[name].output_size) for name in touched}
    effect: dict[str, Any] = {"mean_return": pert["mean_return"] - base["mean_return"]}
    if "accuracy" in base and base["accuracy"] is not None and pert.get("accuracy") is not None:
        effect["accuracy"] = pert["accuracy"] - base["accuracy"]
    if base.get("accuracy_by_task") and pert.get("accuracy_by_task"):
        effect["accuracy_by_task"] = {
            t: (None if a is None or pert["accuracy_by_task"].get(t) is None
                else pert["accuracy_by_task"][t] - a)
            for t, a in base["accuracy_by_task"].items()
        }  # fmt: skip
    desc = dataclasses.asdict(spec)
    return {
        "format": _FORMAT,
        "version": 2,
        # one network serves policy and value with a shared trunk: the perturbation hits both
        "network": "trunk" if getattr(algo.agent, "shared_trunk", False) else "policy",
        "perturbation": {
            **desc,
            "label": spec.describe(),
            "neurons": {k: [int(i) for i in v] for k, v in touched.items() if spec.kind != "noise"},
            "layer_sizes": sizes,
            "definition": _DEFINITIONS[spec.kind] + " (with a period: only while the trial "
            "is in that period); evaluation only, nothing is written into the checkpoint",
        },
        "episodes": n,
        "seed": int(seed),
        **runs,
        "effect": effect,
        "about": {
            "effect": "perturbed minus unperturbed (mean_return; accuracy on trial tasks; "
            "accuracy_by_task on multitask runs)",
            "active_fraction": "share of the env steps in which the perturbation was active",
            "spike_rates": "spikes per neuron per neuron step of each policy layer",
        },
    }


def perturbation_figure(report: Mapping[str, Any]) -> Any:
    """Unperturbed vs perturbed side by side: returns per episode (and accuracy), and the
    psychometric curves when the task has them, or the accuracy per task on a multitask
    run. A bare matplotlib Figure."""
    from matplotlib.figure import Figure

    from snrl.palette import GROUP_COLORS, MUTED_COLOR

    runs = [("unperturbed", report["unperturbed"]), ("perturbed", report["perturbed"])]
    colors = {"unperturbed": MUTED_COLOR, "perturbed": GROUP_COLORS[0]}
    psy = all(r.get("psychometric") for _, r in runs)
    by_task = all(r.get("accuracy_by_task") for _, r in runs)
    fig = Figure(figsize=(8.5 if psy or by_task else 4.5, 3.6), layout="constrained")
    axes = fig.subplots(1, 2 if psy or by_task else 1, squeeze=False)[0]
    ax = axes[0]
    for k, (key, res) in enumerate(runs):
        r = np.asarray(res["returns"], dtype=np.float64)
        ax.bar(k, r.mean(), color=colors[key], alpha=0.6, width=0.6)
        ax.errorbar(k, r.mean(), yerr=r.std(), color="k", capsize=4)
        ax.plot(np.full(r.size, k), r, "o", color="k", ms=3)
        acc = res.get("accuracy")
        if acc is not None:
            ax.annotate(
                f"accuracy {acc:.2f}\n({res.get('n_trials', 0)} trials)",
                (k, r.max()),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=7,
            )
    ax.set_xticks([0, 1], ["unperturbed", "perturbed"])
    ax.set_ylabel(f"episode return (mean \u00b1 SD, n={report['episodes']})")
    p = report["perturbation"]
    label = p.get("label") or (
        f"{100 * p['fraction']:g} % of {p['population']} neurons silenced"
        + (f" during '{p['period']}'" if p.get("period") else "")
    )
    fig.suptitle(f"policy network: {label} (evaluation only)", fontsize=9)
    if by_task:
        ax = axes[1]
        tasks = list(runs[0][1]["accuracy_by_task"])
        x = np.arange(len(tasks))
        for j, (key, res) in enumerate(runs):
            acc = [res["accuracy_by_task"].get(t) for t in tasks]
            y = np.array([np.nan if a is None else a for a in acc], dtype=np.float64)
            ax.bar(x + (j - 0.5) * 0.38, y, width=0.38, color=colors[key], label=key)
        ax.set_xticks(x, [t.removesuffix("-v0") for t in tasks], rotation=20, ha="right",
                      fontsize=7)  # fmt: skip
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy per task")
        ax.legend(fontsize=7, frameon=False)
    elif psy:
        ax = axes[1]
        for key, res in runs:
            pts = res["psychometric"]["points"]
            x = np.array([q["coherence"] for q in pts])
            y = np.array([q["p_right"] for q in pts], dtype=np.float64)
            nn = np.array([max(q["n"], 1) for q in pts])
            err = np.sqrt(np.clip(y * (1 - y), 0, None) / nn)  # binomial SE per point
            ax.errorbar(x, y, yerr=err, fmt="o-", ms=3, color=colors[key], label=key)
        ax.axhline(0.5, color="0.85", lw=0.8, zorder=0)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("signed coherence (%; + = right is correct)")
        ax.set_ylabel("P(choice = right) \u00b1 binomial SE")
        ax.legend(fontsize=7, frameon=False)
    return fig


#: The files ``snrl perturb`` writes into its output folder.
#: (the report, the figure, then the figure's vector files of ``--style``)
PERTURB_FILES = ("perturb.json", "perturb.png", "perturb.svg", "perturb.pdf")


def check_perturb_out(run_dir: str | Path, out: str | Path | None) -> Path:
    """The output folder of ``snrl perturb`` (default ``RUN_DIR/perturb``), checked before
    anything runs: a ``perturb.json`` there that is not an snrl perturbation report, or a
    ``perturb.png`` without one, belongs to someone else and is refused (a rerun replaces
    snrl's own two files). The default folder is claimed in the run's manifest (which
    refuses files there that snrl did not write), so ``snrl train --force`` removes it.

    Raises:
        UserError: ``out`` is a file, or the run would overwrite someone else's file.
    """
    if out is None:
        claim_files(run_dir, PERTURB_OUTPUTS)
    folder = Path(run_dir) / PERTURB_DIR if out is None else Path(out)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--out {folder} is a file (give a directory)")
    report = folder / PERTURB_FILES[0]
    ours = False
    if report.exists():
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
            ours = data.get("format") == _FORMAT
        except (OSError, ValueError, AttributeError):
            data, ours = None, False
        if not ours:
            raise UserError(
                f"{report} exists and is not an snrl perturbation report (move it away or "
                "choose another --out)"
            )
        why = binding_mismatch(folder, data)  # a report copied or planted vouches for nothing
        if why is not None:
            raise UserError(
                f"{report} was not written in {folder} by snrl ({why}); it and perturb.png "
                "are left alone (move them away or choose another --out)"
            )
    listed = _figure_files(data) if ours else []
    for name in PERTURB_FILES[1:]:
        if (folder / name).exists() and name not in listed:
            raise UserError(
                f"{folder / name} exists and snrl did not write it (move it away or "
                "choose another --out)"
            )
    return folder


def _figure_files(data: Any) -> list[str]:
    """The figure files an snrl report lists as written with it (a report without the list,
    of an earlier snrl, wrote ``perturb.png`` only)."""
    files = data.get("files") if isinstance(data, Mapping) else None
    if not isinstance(files, list):
        return [PERTURB_FILES[1]]
    return [f for f in files if f in PERTURB_FILES[1:]]


def write_perturbation(
    report: Mapping[str, Any], folder: str | Path, *, style: str | None = None
) -> list[Path]:
    """Write ``perturb.json`` and ``perturb.png`` (atomically) into ``folder``; with a
    ``style`` (``"paper"``, ``"talk"``: :mod:`snrl.analysis.style`) the figure in that
    style, with its SVG (and PDF). The report lists the figure files (``"files"``); the
    ones an earlier report of this folder listed and this run does not write again (the PDF
    of an earlier ``--style paper``) are removed (call :func:`check_perturb_out` first)."""
    from snrl.analysis.style import write_figure

    folder = Path(folder)
    make_dirs(folder, "the output folder", "choose another --out")
    path = folder / PERTURB_FILES[0]
    before: list[str] = []
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if isinstance(old, Mapping) and old.get("format") == _FORMAT:
            if binding_mismatch(folder, old) is None:
                before = _figure_files(old)
    figs = write_figure(perturbation_figure(report), folder / PERTURB_FILES[1], style=style)
    names = [f.name for f in figs]
    # bound to its folder (as a run's manifest): a rerun replaces only reports written here
    write_json_atomic(path, {**json_safe(report), "files": names, **dir_binding(folder)})
    for name in before:
        stale = folder / name
        if name not in names and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    return [path, *figs]
