"""Perturbations of a trained network, applied during evaluation only: silencing a fraction
of the excitatory (E) or inhibitory (I) neurons of the policy's spiking layers, optionally
only during one period of a NeuroGym trial ("stimulus", "delay", "decision" ...).

Definition: a silenced neuron's spikes are forced to 0 at every neuron step where the
perturbation is active. Its own membrane still integrates its input (it is not clamped), but
nothing of it leaves the neuron: no recurrent input to its layer at the next step, no input to
the layer above or to the readout, and no reset (its reset acts through its own spike). The
chosen neurons are a seeded random subset, ``round(fraction * n)`` of the ``n`` neurons of the
population in each spiking layer.

Where it acts (why this seam): a layer computes a step with its model's step function
(``_step``) inside its loop (``_integrate``). :func:`silence` wraps each perturbed layer's
``_step`` on the instance, so the spikes it returns and the spikes kept in its state are
masked before anything reads them, and routes the layer through the reference per-step loop
(:meth:`snrl.layers.base.RecurrentLayer._integrate`), which calls ``_step`` for every neuron
step. That loop is also what the LIF layer's one-step fast path and the compiled sequence
kernel (:mod:`snrl.functional._native`, used for training sequences with autograd on the CPU)
compute, so inside the block neither of those runs for a perturbed layer and the perturbation
applies whatever the path (substeps, sequences, CPU or GPU). Leaving the block removes both
instance attributes: nothing is written into the parameters, buffers or the checkpoint.

:func:`evaluate_perturbed` runs the evaluation (one env per episode, seeds ``seed + i``,
deterministic actions, as ``algo.evaluate``) with the perturbation switched per env and step
by the period the env is in, and :func:`perturbation_report` puts it side by side with the
same evaluation unperturbed.
"""

from __future__ import annotations

import contextlib
import functools
import json
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
    "PERTURB_FILES",
    "Silencing",
    "check_perturb_out",
    "evaluate_perturbed",
    "perturbation_figure",
    "perturbation_report",
    "silence",
    "silenced_neurons",
    "write_perturbation",
]

_FORMAT = "snrl.perturbation"

_POPULATIONS = {"E": 1, "I": -1}


def silenced_neurons(
    backbone: Any, population: str, fraction: float, seed: int = 0
) -> dict[str, np.ndarray]:
    """The neurons to silence in each spiking layer of ``backbone``.

    Args:
        backbone: a :class:`snrl.networks.SpikingBackbone` with Dale's law.
        population: ``"E"`` or ``"I"``.
        fraction: in [0, 1], the share of that population silenced in each layer.
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
    names = list(getattr(backbone, "spiking_names", None) or [])
    if not names:
        raise UserError(
            "the policy has no spiking layer (perturb a run with a spiking backbone: lif, "
            "alif or spylif)"
        )
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


class Silencing:
    """A silencing perturbation: which neurons, and whether it is active now.

    Args:
        neurons: layer name -> indices of the neurons silenced (see :func:`silenced_neurons`).

    ``active`` is True (always), False (never), or a bool (B,) tensor: per batch row (one
    env each), set by the evaluation loop before each env step.
    """

    def __init__(self, neurons: Mapping[str, Any]) -> None:
        self.neurons = {k: np.asarray(v, dtype=np.int64) for k, v in neurons.items()}
        self.active: bool | torch.Tensor = True
        self._keep: dict[tuple, torch.Tensor] = {}  # (layer, device, dtype) -> (N,) 0/1

    def _keep_vector(self, layer: str, idx: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        """(N,) 1 for kept neurons, 0 for silenced ones: made once per layer, device and
        dtype (this runs on every neuron step)."""
        key = (layer, like.device, like.dtype, like.shape[-1])
        keep = self._keep.get(key)
        if keep is None:
            keep = torch.ones(like.shape[-1], dtype=like.dtype, device=like.device)
            keep[torch.as_tensor(idx, device=like.device)] = 0
            self._keep[key] = keep
        return keep

    def keep_mask(self, layer: str, z: torch.Tensor) -> torch.Tensor | None:
        """(B, N) 1 where the spikes of ``z`` (B, N) are kept, 0 where silenced; None when
        nothing is silenced now."""
        idx = self.neurons.get(layer)
        if idx is None or self.active is False:
            return None
        keep = self._keep_vector(layer, idx, z)
        if isinstance(self.active, torch.Tensor):
            act = self.active.to(device=z.device, dtype=z.dtype).reshape(-1, 1)
            return 1 - act * (1 - keep)  # (B, N): rows not in the period keep all
        return keep.expand_as(z)


@contextlib.contextmanager
def silence(backbone: Any, perturbation: Silencing) -> Iterator[Silencing]:
    """A block in which ``backbone``'s layers named in ``perturbation.neurons`` run with
    those neurons' spikes forced to 0 where ``perturbation.active`` (module docstring).

    The parameters, buffers and state dict are untouched; on leaving, the layers are as
    before (the instance attributes set here are removed).
    """
    patched = []
    try:
        for name in perturbation.neurons:
            layer = backbone.layers[name]
            orig = layer._step

            def step(current, state, consts, spike_fn, _orig=orig, _name=name):  # noqa: ANN001
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


def _env_source(algo: Any) -> Any:
    fresh = getattr(algo, "_fresh_env", None)
    return fresh() if callable(fresh) else algo.config.env


@torch.no_grad()
def evaluate_perturbed(
    algo: Any,
    perturbation: Silencing | None = None,
    *,
    n_episodes: int = 20,
    seed: int = 123,
    period: str | None = None,
) -> dict[str, Any]:
    """Evaluate ``algo`` (deterministic actions, env ``i`` seeded ``seed + i``) with the
    policy under ``perturbation`` (None: unperturbed), active in every step or, with
    ``period``, only in the steps where a NeuroGym trial is in that period.

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
    gate = _Gate(perturbation, period)
    ctx = (
        silence(agent.actor, perturbation)
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
                env_kwargs=algo.lesson_env_kwargs(None),
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

    def __init__(self, perturbation: Silencing | None, period: str | None) -> None:
        self.perturbation, self.period = perturbation, period
        self.active_steps = self.total_steps = 0

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


def perturbation_report(
    algo: Any,
    *,
    population: str,
    fraction: float = 1.0,
    period: str | None = None,
    n_episodes: int = 20,
    seed: int = 123,
    choice_seed: int = 0,
) -> dict[str, Any]:
    """The evaluation with and without silencing, side by side (JSON-able).

    Args:
        algo: a PPO or DQN algorithm with a spiking Dale policy.
        population: ``"E"`` or ``"I"``.
        fraction: share of that population silenced in each spiking layer of the policy.
        period: a NeuroGym period during which it acts (None: always).
        n_episodes, seed: the evaluation's episodes and the first env seed (both runs).
        choice_seed: seed of the choice of neurons.

    Returns:
        ``{"perturbation": {...}, "unperturbed": {...}, "perturbed": {...}, "effect": {...}}``;
        each run holds the numbers of :func:`evaluate_perturbed` without the trial log, and
        ``psychometric`` (a :func:`snrl.analysis.psychometric.psychometric_curve`) where the
        task has one.
    """
    from snrl.analysis.psychometric import has_psychometric, psychometric_curve

    neurons = silenced_neurons(algo.agent.actor, population, fraction, choice_seed)
    # the perturbed run first: it checks the period before the longer part runs
    pert = evaluate_perturbed(
        algo, Silencing(neurons), n_episodes=n_episodes, seed=seed, period=period
    )
    base = evaluate_perturbed(algo, None, n_episodes=n_episodes, seed=seed)
    runs = {}
    for key, res in (("unperturbed", base), ("perturbed", pert)):
        trials = res.pop("trials", None)
        if trials and has_psychometric(trials):
            try:
                res["psychometric"] = psychometric_curve(trials)
            except UserError as exc:  # too few answered trials for a fit: say so
                res["psychometric"] = None
                res["psychometric_error"] = str(exc)
        runs[key] = res
    sizes = {name: int(algo.agent.actor.layers[name].output_size) for name in neurons}
    effect = {"mean_return": pert["mean_return"] - base["mean_return"]}
    if "accuracy" in base and base["accuracy"] is not None and pert.get("accuracy") is not None:
        effect["accuracy"] = pert["accuracy"] - base["accuracy"]
    return {
        "format": _FORMAT,
        "version": 1,
        "network": "policy",
        "perturbation": {
            "kind": "silence",
            "population": population,
            "fraction": float(fraction),
            "period": period,
            "choice_seed": int(choice_seed),
            "neurons": {k: [int(i) for i in v] for k, v in neurons.items()},
            "layer_sizes": sizes,
            "definition": "the spikes of the listed neurons of the policy's spiking layers are "
            "forced to 0 in every neuron step (with a period: only while the trial is in that "
            "period); evaluation only, nothing is written into the checkpoint",
        },
        "episodes": int(n_episodes),
        "seed": int(seed),
        **runs,
        "effect": effect,
        "about": {
            "effect": "perturbed minus unperturbed (mean_return; accuracy on trial tasks)",
            "active_fraction": "share of the env steps in which the perturbation was active",
            "spike_rates": "spikes per neuron per neuron step of each policy layer",
        },
    }


def perturbation_figure(report: Mapping[str, Any]) -> Any:
    """Unperturbed vs perturbed side by side: returns per episode (and accuracy), and the
    psychometric curves when the task has them. A bare matplotlib Figure."""
    from matplotlib.figure import Figure

    from snrl.palette import GROUP_COLORS, MUTED_COLOR

    runs = [("unperturbed", report["unperturbed"]), ("perturbed", report["perturbed"])]
    colors = {"unperturbed": MUTED_COLOR, "perturbed": GROUP_COLORS[0]}
    psy = all(r.get("psychometric") for _, r in runs)
    fig = Figure(figsize=(8.5 if psy else 4.5, 3.6), layout="constrained")
    axes = fig.subplots(1, 2 if psy else 1, squeeze=False)[0]
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
    where = f"during '{p['period']}'" if p["period"] else "throughout"
    fig.suptitle(
        f"policy network: {100 * p['fraction']:g} % of {p['population']} neurons silenced "
        f"{where} (evaluation only)",
        fontsize=9,
    )
    if psy:
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
PERTURB_FILES = ("perturb.json", "perturb.png")


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
    if (folder / PERTURB_FILES[1]).exists() and not ours:
        raise UserError(
            f"{folder / PERTURB_FILES[1]} exists and snrl did not write it (move it away or "
            "choose another --out)"
        )
    return folder


def write_perturbation(report: Mapping[str, Any], folder: str | Path) -> list[Path]:
    """Write ``perturb.json`` and ``perturb.png`` (atomically) into ``folder``."""
    from snrl.analysis.figures import save_figure

    folder = Path(folder)
    make_dirs(folder, "the output folder", "choose another --out")
    png = save_figure(perturbation_figure(report), folder / PERTURB_FILES[1])
    path = folder / PERTURB_FILES[0]
    # bound to its folder (as a run's manifest): a rerun replaces only reports written here
    write_json_atomic(path, {**json_safe(report), **dir_binding(folder)})
    return [path, png]
