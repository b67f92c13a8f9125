"""The 20 tasks of Yang et al. (2019, Nature Neuroscience 22:297) as batched specs, under the
ids of NeuroGym's ``yang19`` collection (``yang19.go-v0`` ... ``yang19.dnmc-v0``), with its
defaults (neurogym 2.3.1: 100 ms steps, its timings, coherences and noise).

Every task shares one layout: observation channel 0 is the fixation cue, channels
``1 .. dim_ring`` the first modality's ring and ``dim_ring + 1 .. 2 dim_ring`` the second's
(33 channels at the default ``dim_ring=16``); action 0 is fixation and action ``1 + k``
a response in direction ``k`` (17 actions). A response is right when it is the target's
direction (NeuroGym's rule; the paper also counts a response within 36 degrees, which on 16
directions would take the two neighbours). Stimuli are :class:`~snrl.tasks.spec.RingBump`.

Four families:

* go / anti (``go rtgo dlygo anti rtanti dlyanti``): one stimulus on one ring; respond in its
  direction (anti: the opposite one) once the fixation cue goes off; ``rt``: the stimulus
  appears when the fixation cue goes off; ``dly``: a 500 ms delay after the stimulus.
* decision making (``dm1 dm2 ctxdm1 ctxdm2 multidm``): two bumps at once on modality 1,
  2 or both; respond toward the stronger one (of modality 1 or 2 for ``ctx``, of the sum
  for ``multi``).
* delayed decision making (``dlydm1 ... multidlydm``): the same with the two stimuli shown
  one after the other, with a delay between.
* matching (``dms dnms dmc dnmc``): a sample, a delay, a test on one ring; respond toward the
  test when it matches the sample (``dms``, ``dmc``) or does not (``dnms``, ``dnmc``), else
  keep fixating; "match" is the same direction (``dms``, ``dnms``) or the same half of the
  ring (``dmc``, ``dnmc``; the categories of Freedman & Assad, 2006).

Where NeuroGym 2.3.1 departs from the paper, the paper's definition is used (docs/tasks.md
lists these, tests/tasks/test_yang19.py shows each):

* the fixation cue stays on until the response period (``decision``) in every task, and a
  response before it breaks fixation (pays ``abort``); NeuroGym shows the cue in the first
  period only in the dm and matching families, and pays ``abort`` only there;
* withholding the response through the decision period of a no-go matching trial is a
  correct trial: it pays ``correct`` and reports performance 1 (NeuroGym pays 0 and reports 0);
* the ring a go/anti or matching stimulus appears on is drawn per trial (NeuroGym's
  ``RandomSchedule`` of two modalities alternates them, trial after trial);
* the categories of ``dmc``/``dnmc`` are the halves ``[0, pi)`` and ``[pi, 2 pi)`` for the
  sample as for the test (NeuroGym puts a sample at ``pi`` in the first).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from snrl.errors import UserError
from snrl.tasks.native import _check_ring, _Common, _Task, _task
from snrl.tasks.spec import (
    ChoiceRule,
    Draw,
    Noise,
    Period,
    RingBump,
    Show,
    Target,
    TaskSpec,
)

__all__ = ["COLLECTION", "TASKS", "yang19_ids"]

#: The collection's name (``snrl train --tasks yang19``).
COLLECTION = "yang19"

Values = Mapping[str, torch.Tensor]


def _names(dim: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The observation and action name tables of the layout (module docstring)."""
    obs = {
        "fixation": 0,
        "stimulus_mod1": list(range(1, dim + 1)),
        "stimulus_mod2": list(range(dim + 1, 2 * dim + 1)),
    }
    return obs, {"fixation": 0, "choice": list(range(1, dim + 1))}


def _respond_to(variable: str) -> Callable[[Values], torch.Tensor]:
    """The action of a response in the direction held by ``variable``."""
    return lambda v: v[variable] + 1.0


def _fixation_cue(before: tuple[str, ...]) -> Show:
    """The fixation cue, on until the response period (the paper)."""
    return Show(1.0, (0,), before)


def _spec(
    c: _Common,
    dim: int,
    *,
    periods: tuple[Period, ...],
    conditions: Callable[[Draw], None],
    reported: tuple[str, ...],
    shows: tuple[Show, ...],
    noise: tuple[Noise, ...] = (),
    rule: ChoiceRule | None = None,
) -> TaskSpec:
    """A task of the layout: the fixation cue and the fixation requirement on every period
    before ``decision``, the response toward ``ground_truth - 1`` in it (``ground_truth`` is
    the right action)."""
    before = tuple(p.name for p in periods if p.name != "decision")
    obs_names, act_names = _names(dim)
    return c.spec(
        obs_names=obs_names,
        act_names=act_names,
        periods=periods,
        conditions=conditions,
        reported=("ground_truth", *reported),
        shows=(_fixation_cue(before), *shows),
        noise=noise,
        targets=(Target(lambda v: v["ground_truth"], "decision"),),
        rule=rule or ChoiceRule(fixate=before),
    )


# ---- go / anti ---------------------------------------------------------------------------------
def _reach(anti: bool, reaction: bool) -> Callable[..., TaskSpec]:
    def build(c: _Common, *, dim_ring: int = 16) -> TaskSpec:
        dim = _check_ring(dim_ring)

        def conditions(d: Draw) -> None:
            direction = d.choice("direction", range(dim))
            d.choice("modality", [0, 1])
            d.set("ground_truth", direction + 1.0)

        shown = "decision" if reaction else "stimulus"
        names = (
            ("fixation", "decision") if reaction else ("fixation", "stimulus", "delay", "decision")
        )
        bump = RingBump("direction", dim, rings=2, ring="modality", shift=math.pi * anti)
        return _spec(
            c,
            dim,
            periods=tuple(Period(p) for p in names),
            conditions=conditions,
            reported=("direction", "modality"),
            shows=(Show(bump, tuple(range(1, 2 * dim + 1)), (shown,)),),
        )

    return build


def _reach_task(name: str, *, anti: bool, reaction: bool = False, delay: float = 0) -> _Task:
    timing = {"fixation": 500, "stimulus": 500, "delay": delay, "decision": 500}
    return _task(f"yang19.{name}-v0", dt=100, timing=timing, neurogym=False)(_reach(anti, reaction))


# ---- decision making, with and without a delay -------------------------------------------------
def _other(d: Draw, first: torch.Tensor, count: int) -> torch.Tensor:
    """Per trial an index in ``0 .. count - 1`` other than ``first``, each equally likely."""
    step = torch.randint(count - 1, (d.n,), generator=d.gen, device=d.device)
    return torch.remainder(first + 1 + step.to(torch.float64), count)


def _dm(
    weights: tuple[float, float], shown: tuple[bool, bool], delayed: bool
) -> Callable[..., TaskSpec]:
    def build(
        c: _Common,
        *,
        dim_ring: int = 16,
        sigma: float = 1.0,
        cohs: list[float] | None = None,
    ) -> TaskSpec:
        dim = _check_ring(dim_ring)
        levels = [0.3, 0.6, 1.0] if delayed else [0.08, 0.16, 0.32, 0.64]
        levels = [float(x) for x in (levels if cohs is None else cohs)]
        if len(levels) < 1 + delayed:
            raise UserError(f"cohs needs at least {1 + delayed} values, got {cohs!r}")
        mods = [m for m in (1, 2) if shown[m - 1]]

        def conditions(d: Draw) -> None:
            first = d.choice("direction1", range(dim))
            d.set("direction2", _other(d, first, dim))
            strength = [torch.zeros(d.n, dtype=torch.float64, device=d.device)] * 2
            for m in mods:
                if delayed:  # two different coherences, one per stimulus
                    i = d.choice(f"_coh_index_mod{m}", range(len(levels)))
                    j = _other(d, i, len(levels))
                    table = torch.tensor(levels, dtype=torch.float64, device=d.device)
                    c1, c2 = d.set(f"coh1_mod{m}", table[i.long()]), table[j.long()]
                    c2 = d.set(f"coh2_mod{m}", c2)
                else:
                    coh = d.choice(f"_coh_mod{m}", levels) * d.choice(f"_sign_mod{m}", [-1, 1])
                    c1 = d.set(f"coh1_mod{m}", 0.5 + coh / 2)
                    c2 = d.set(f"coh2_mod{m}", 0.5 - coh / 2)
                w = weights[m - 1]
                strength = [strength[0] + w * c1, strength[1] + w * c2]
            # a tie (multidm's opposite coherences) is a coin flip, as NeuroGym's jitter
            coin = d.choice("_tie", [0, 1])
            diff = strength[0] - strength[1]
            first_wins = torch.where(diff.abs() < 1e-6, coin == 1, diff > 0)
            target = torch.where(first_wins, d.values["direction1"], d.values["direction2"])
            d.set("ground_truth", target + 1.0)

        stim = ("stim1", "stim2") if delayed else ("stimulus", "stimulus")
        shows = tuple(
            Show(
                RingBump(f"direction{k}", dim, strength=f"coh{k}_mod{m}"),
                tuple(range(1 + (m - 1) * dim, 1 + m * dim)),
                (stim[k - 1],),
            )
            for m in mods
            for k in (1, 2)
        )
        noise = Noise(c.noise_std(sigma), tuple(dict.fromkeys(stim)), tuple(range(1, 2 * dim + 1)))
        reported = [f"coh{k}_mod{m}" for m in mods for k in (1, 2)]
        return _spec(
            c,
            dim,
            periods=c.periods(),
            conditions=conditions,
            reported=("direction1", "direction2", *reported),
            shows=shows,
            noise=(noise,) if sigma else (),
        )

    return build


_DM_TIMING = {"fixation": ("uniform", (200, 500)), "stimulus": 500, "decision": 200}
_DLY_TIMING = {
    "fixation": ("uniform", (200, 500)),
    "stim1": 500,
    "delay": 1000,
    "stim2": 500,
    "decision": 200,
}


def _dm_task(
    name: str, weights: tuple[float, float], shown: tuple[bool, bool], delayed: bool
) -> _Task:
    timing = dict(_DLY_TIMING if delayed else _DM_TIMING)
    if name == "dm1":  # NeuroGym's dm1 alone draws its stimulus duration
        timing["stimulus"] = ("choice", [200, 400, 600])
    return _task(f"yang19.{name}-v0", dt=100, timing=timing, neurogym=False)(
        _dm(weights, shown, delayed)
    )


# ---- matching ----------------------------------------------------------------------------------
def _match(category: bool, go_on_match: bool) -> Callable[..., TaskSpec]:
    def build(c: _Common, *, dim_ring: int = 16, sigma: float = 1.0) -> TaskSpec:
        dim = _check_ring(dim_ring)
        if dim % 2:
            raise UserError(f"dim_ring must be even (two halves of the ring), got {dim_ring!r}")
        half = dim // 2
        correct = c.rewards.correct

        def conditions(d: Draw) -> None:
            match = d.choice("match", [1, 0])
            d.choice("modality", [0, 1])
            sample = d.choice("sample_direction", range(dim))
            if category:
                same = torch.floor(sample / half)  # the sample's half: 0 or 1
                half_of_test = torch.where(match == 1, same, 1 - same)
                test = d.choice("_test_offset", range(half)) + half * half_of_test
            else:
                test = torch.where(match == 1, sample, torch.remainder(sample + half, dim))
            test = d.set("test_direction", test)
            go = match == 1 if go_on_match else match == 0
            d.set("ground_truth", torch.where(go, test + 1.0, torch.zeros_like(test)))

        def withheld(v: Values) -> torch.Tensor:
            return (v["ground_truth"] == 0).to(torch.float64)

        channels = tuple(range(1, 2 * dim + 1))

        def on_ring(v: Values) -> torch.Tensor:
            ring = v["modality"].round().long()[:, None]
            return (torch.arange(2 * dim, device=ring.device) // dim == ring).to(torch.float64)

        shows = (
            Show(
                RingBump("sample_direction", dim, rings=2, ring="modality"), channels, ("sample",)
            ),
            Show(RingBump("test_direction", dim, rings=2, ring="modality"), channels, ("test",)),
        )
        noise = Noise(c.noise_std(sigma), ("sample", "test"), channels, where=on_ring)
        before = ("fixation", "sample", "delay", "test")
        return _spec(
            c,
            dim,
            periods=c.periods(),
            conditions=conditions,
            reported=("match", "modality", "sample_direction", "test_direction"),
            shows=shows,
            noise=(noise,) if sigma else (),
            rule=ChoiceRule(
                fixate=before,
                timeout_reward=lambda v: withheld(v) * correct,
                timeout_performance=withheld,
            ),
        )

    return build


def _match_task(name: str, *, category: bool, go_on_match: bool) -> _Task:
    timing = {"fixation": 300, "sample": 500, "delay": 1000, "test": 500, "decision": 900}
    return _task(f"yang19.{name}-v0", dt=100, timing=timing, neurogym=False)(
        _match(category, go_on_match)
    )


#: The collection's tasks by id, in the paper's order (the rule input's order).
TASKS: dict[str, _Task] = {
    t.name: t
    for t in (
        _reach_task("go", anti=False),
        _reach_task("rtgo", anti=False, reaction=True),
        _reach_task("dlygo", anti=False, delay=500),
        _reach_task("anti", anti=True),
        _reach_task("rtanti", anti=True, reaction=True),
        _reach_task("dlyanti", anti=True, delay=500),
        _dm_task("dm1", (1, 1), (True, False), delayed=False),
        _dm_task("dm2", (1, 1), (False, True), delayed=False),
        _dm_task("ctxdm1", (1, 0), (True, True), delayed=False),
        _dm_task("ctxdm2", (0, 1), (True, True), delayed=False),
        _dm_task("multidm", (1, 1), (True, True), delayed=False),
        _dm_task("dlydm1", (1, 1), (True, False), delayed=True),
        _dm_task("dlydm2", (1, 1), (False, True), delayed=True),
        _dm_task("ctxdlydm1", (1, 0), (True, True), delayed=True),
        _dm_task("ctxdlydm2", (0, 1), (True, True), delayed=True),
        _dm_task("multidlydm", (1, 1), (True, True), delayed=True),
        _match_task("dms", category=False, go_on_match=True),
        _match_task("dnms", category=False, go_on_match=False),
        _match_task("dmc", category=True, go_on_match=True),
        _match_task("dnmc", category=True, go_on_match=False),
    )
}


def yang19_ids() -> tuple[str, ...]:
    """The 20 ids, in the rule input's order."""
    return tuple(TASKS)
