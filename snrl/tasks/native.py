"""NeuroGym's tasks as batched specs: the same timing, channels, noise and rewards as
neurogym 2.3.1's classes of the same names (Molano-Mazon et al., 2022), written as data for
:func:`snrl.tasks.spec.build_trials`. Each factory takes NeuroGym's keyword arguments.
One task NeuroGym lacks is written the same way, from its paper: EvidenceAccumulation-v0
(the cue-counting task of Morcos & Harvey, 2016, as Bellec et al., 2020, train it).

Where NeuroGym departs from the paper its task cites, the paper's definition is used (and
docs/tasks.md says so):

* GoNogo: a no-go trial the agent rightly withholds reports performance 1 (NeuroGym 2.3.1
  reports 0: ``TrialEnv.step`` zeroes the performance ``_new_trial`` set).
* IntervalDiscrimination: the two intervals always differ (Genovesio et al., 2009, compare
  two different durations); NeuroGym labels a tie "the second is longer". Here a tie is
  redrawn (``ties="redraw"``); ``ties="second"`` keeps NeuroGym's labels.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from snrl.errors import UserError
from snrl.tasks.spec import (
    ChoiceRule,
    Draw,
    Duration,
    Noise,
    Period,
    ProductionRule,
    Rewards,
    Show,
    Target,
    TaskSpec,
    Uniform,
    as_duration,
)
from snrl.tasks.spec import TruncExp as _TruncExp

__all__ = ["TASKS"]

#: NeuroGym's reward table of most tasks
_DEFAULT_REWARDS = {"abort": -0.1, "correct": 1.0, "fail": 0.0}


def _timing(
    task: str, defaults: Mapping[str, Any], user: Mapping[str, Any] | None
) -> dict[str, Duration]:
    table = dict(defaults)
    for key, value in (user or {}).items():
        if key not in table:
            raise UserError(
                f"{task} has no period {key!r} in timing (its periods: {', '.join(table)})"
            )
        table[key] = value
    return {k: as_duration(v, k) for k, v in table.items()}


def _width(names: Mapping[str, Any]) -> int:
    """The channels (or actions) a name table covers: one past its highest index."""
    return 1 + max(max(v) if isinstance(v, list) else v for v in names.values())


def _decide_ground_truth(v: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return v["ground_truth"]


@dataclass(frozen=True)
class _Common:
    """The arguments every task takes (``dt``, ``timing``, ``rewards``), checked and merged
    over the task's defaults (by :class:`_Task`); :meth:`spec` builds the task around them."""

    name: str
    """The task's id (NeuroGym's)."""
    dt: float
    """Step, ms (checked > 0)."""
    timing: dict[str, Duration]
    """The task's period durations with the user's ``timing`` over them."""
    rewards: Rewards
    """The task's reward table with the user's ``rewards`` over it."""

    def periods(self) -> tuple[Period, ...]:
        """The periods of the timing table, in its order (a task whose periods all take
        their durations from it)."""
        return tuple(Period(p) for p in self.timing)

    def noise_std(self, sigma: Any) -> float:
        """NeuroGym's per-step noise of a ``sigma`` (checked >= 0): ``sigma / sqrt(dt)``."""
        return _check_sigma(sigma) / math.sqrt(self.dt)

    def spec(
        self,
        *,
        obs_names: Mapping[str, Any],
        act_names: Mapping[str, Any],
        reported: tuple[str, ...],
        periods: tuple[Period, ...] | None = None,
        noise: tuple[Noise, ...] = (),
        targets: tuple[Target, ...] | None = None,
        rule: ChoiceRule | ProductionRule | None = None,
        **fields: Any,
    ) -> TaskSpec:
        """The :class:`TaskSpec` with these common fields; ``n_obs`` and ``n_act`` follow
        from the name tables, the types of the ``reported`` variables from
        :data:`_REPORTED_TYPES`; by default the periods of the timing table (:meth:`periods`),
        no noise, the ground truth as the target of the ``decision`` period, and the
        fixate-then-choose rule."""
        return TaskSpec(
            name=self.name,
            dt=self.dt,
            obs_names=obs_names,
            act_names=act_names,
            n_obs=_width(obs_names),
            n_act=_width(act_names),
            reported={name: _REPORTED_TYPES[name] for name in reported},
            periods=self.periods() if periods is None else periods,
            timing=self.timing,
            rewards=self.rewards,
            noise=noise,
            targets=(Target(_decide_ground_truth, "decision"),) if targets is None else targets,
            rule=ChoiceRule() if rule is None else rule,
            **fields,
        )


@dataclass(frozen=True)
class _Task:
    """A task of :data:`TASKS`, called with NeuroGym's keyword arguments of its class. The
    ones every task takes (``dt``, ``timing``, ``rewards``) are checked here, once, over this
    task's NeuroGym defaults; ``build`` gets them as a :class:`_Common` and the task's own
    keywords (``sigma``, ``dim_ring`` ...). Made by :func:`_task`."""

    name: str
    """The task's id (NeuroGym's)."""
    build: Callable[..., TaskSpec]
    """``build(common, **own_keywords) -> TaskSpec``."""
    dt: float
    """NeuroGym's default step, ms."""
    timing: Mapping[str, Any]
    """NeuroGym's default period durations (ms, or a distribution), in the periods' order."""
    rewards: Mapping[str, float]
    """NeuroGym's default reward table."""
    neurogym: bool = True
    """NeuroGym has the task under this id (False: a task of a paper that NeuroGym lacks;
    its single env is :class:`snrl.tasks.engine.TaskEnv`)."""

    @property
    def arguments(self) -> tuple[str, ...]:
        """The keyword arguments it takes: the common ones, then the task's own."""
        own = list(inspect.signature(self.build).parameters)[1:]
        return ("dt", "rewards", "timing", *own)

    def __call__(self, **kwargs: Any) -> TaskSpec:
        """The spec with NeuroGym's keyword arguments ``kwargs`` (:attr:`arguments`)."""
        common = _Common(
            self.name,
            _check_dt(kwargs.pop("dt", self.dt)),
            _timing(self.name.removesuffix("-v0"), self.timing, kwargs.pop("timing", None)),
            Rewards.merged(self.rewards, kwargs.pop("rewards", None)),
        )
        return self.build(common, **kwargs)


def _task(
    name: str,
    *,
    dt: float,
    timing: Mapping[str, Any],
    rewards: Mapping[str, float] = _DEFAULT_REWARDS,
    neurogym: bool = True,
) -> Callable[[Callable[..., TaskSpec]], _Task]:
    """Declare a task: its id and NeuroGym's defaults of the common arguments (the paper's,
    for a task NeuroGym lacks: ``neurogym=False``), over the function that builds it from
    them and its own keywords."""
    return lambda build: _Task(name, build, dt, timing, rewards, neurogym)


def _ring(n: int, endpoint_trick: bool) -> np.ndarray:
    """NeuroGym's preferred directions: ``linspace(0, 2 pi, n, endpoint=False)`` or
    ``linspace(0, 2 pi, n + 1)[:-1]`` (the same numbers, two spellings)."""
    if endpoint_trick:
        return np.linspace(0, 2 * np.pi, n + 1)[:-1]
    return np.linspace(0, 2 * np.pi, n, endpoint=False)


def _cos_bump(theta: np.ndarray, centre: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``cos(theta - centre) * scale + 0.5`` per trial: (n, len(theta)) float64."""
    th = torch.as_tensor(theta, dtype=torch.float64, device=centre.device)
    return torch.cos(th[None, :] - centre[:, None]) * scale[:, None] + 0.5


def _check_ring(dim_ring: Any) -> int:
    if isinstance(dim_ring, bool) or not isinstance(dim_ring, int) or dim_ring < 2:
        raise UserError(f"dim_ring must be an integer >= 2, got {dim_ring!r}")
    return dim_ring


def _pick(table: np.ndarray, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` per trial, float64 on ``index``'s device."""
    return torch.as_tensor(table, dtype=torch.float64, device=index.device)[index.long()]


def _check_sigma(sigma: Any) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or sigma < 0:
        raise UserError(f"sigma must be a number >= 0, got {sigma!r}")
    return float(sigma)


def _check_dt(dt: Any) -> float:
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not dt > 0:
        raise UserError(f"dt must be a number of ms > 0, got {dt!r}")
    return float(dt)


def _reaction_periods(dt: float) -> tuple[Period, ...]:
    """Fixation, stimulus, and a ``decision`` period from one step after the stimulus onset
    to its end (NeuroGym's ``ReactionTime`` wrapper: ``start_t["decision"] =
    start_t["stimulus"] + dt``, the trial cut at the stimulus's end)."""
    return (
        Period("fixation"),
        Period("stimulus"),
        Period(
            "decision",
            length=lambda v: (v["_duration_stimulus"] - dt).clamp(min=0.0),
            after="fixation",
            offset=dt,
        ),
    )


@_task(
    "PerceptualDecisionMaking-v0",
    dt=100,
    timing={"fixation": 100, "stimulus": 2000, "delay": 0, "decision": 100},
)
def perceptual_decision_making(
    c: _Common,
    *,
    dim_ring: int = 2,
    cohs: list[float] | None = None,
    sigma: float = 1.0,
    abort: bool = False,
    reaction_time: bool = False,
) -> TaskSpec:
    """Two-alternative motion discrimination (Britten et al., 1992).

    ``reaction_time=True``: the reaction-time version (Roitman & Shadlen, 2002: the monkey
    answers whenever it is ready after the motion onset), as NeuroGym's ``ReactionTime``
    wrapper makes it (its ``perceptualdecisionmaking.roitman02-v0``): the ``decision``
    period opens one step after the stimulus onset and lasts to the stimulus's end, where
    the trial ends (the timing's ``delay`` and ``decision`` are not used); the stimulus
    stays on until the answer. (An agent sees a step's observation when it acts at that
    step, so at the earliest answer it has seen two stimulus samples.)
    """
    if not isinstance(reaction_time, bool):
        raise UserError(f"reaction_time must be true or false, got {reaction_time!r}")
    dim_ring = _check_ring(dim_ring)
    theta = _ring(int(dim_ring), endpoint_trick=False)
    coh_list = list(cohs or [0, 6.4, 12.8, 25.6, 51.2])
    stim = tuple(range(1, dim_ring + 1))

    def conditions(d: Draw) -> None:
        d.choice("ground_truth", list(range(dim_ring)))
        d.choice("coh", coh_list)

    return c.spec(
        obs_names={"fixation": 0, "stimulus": list(stim)},
        act_names={"fixation": 0, "choice": list(stim)},
        conditions=conditions,
        reported=("ground_truth", "coh"),
        periods=_reaction_periods(c.dt) if reaction_time else None,
        shows=(
            Show(1.0, (0,), ("fixation",)),
            Show(
                lambda v: _cos_bump(theta, _pick(theta, v["ground_truth"]), v["coh"] / 200),
                stim,
                ("stimulus",),
            ),
        ),
        noise=(Noise(c.noise_std(sigma), ("stimulus",), stim),),
        targets=(Target(lambda v: v["ground_truth"] + 1, "decision"),),
        rule=ChoiceRule(abort_ends=bool(abort)),
    )


@_task(
    "GoNogo-v0",
    dt=100,
    timing={"fixation": 0, "stimulus": 500, "delay": 500, "decision": 500},
    rewards={"abort": -0.1, "correct": 1.0, "fail": -0.5, "miss": -0.5},
)
def go_nogo(c: _Common) -> TaskSpec:
    """Go/no-go with a delayed response (Zhang et al., 2019, eLife)."""

    def conditions(d: Draw) -> None:
        d.choice("ground_truth", [0, 1])

    return c.spec(
        obs_names={"fixation": 0, "nogo": 1, "go": 2},
        act_names={"fixation": 0, "go": 1},
        conditions=conditions,
        reported=("ground_truth",),
        shows=(
            Show(1.0, (0,)),
            Show(lambda v: 1.0 - v["ground_truth"], (1,), ("stimulus",)),
            Show(lambda v: v["ground_truth"], (2,), ("stimulus",)),
            Show(0.0, (0, 1, 2), ("decision",), mode="set"),
        ),
        rule=ChoiceRule(
            timeout_reward=lambda v: c.rewards.miss * v["ground_truth"],
            # the paper's definition: withholding on a no-go trial is correct
            timeout_performance=lambda v: 1.0 - v["ground_truth"],
        ),
    )


@_task(
    "DelayMatchSample-v0",
    dt=100,
    timing={
        "fixation": 300,
        "sample": 500,
        "delay": 1000,
        "test": 500,
        "decision": 900,
    },
)
def delay_match_sample(
    c: _Common,
    *,
    sigma: float = 1.0,
    dim_ring: int = 2,
) -> TaskSpec:
    """Delayed match-to-sample (Miller et al., 1996)."""
    dim_ring = _check_ring(dim_ring)
    theta = _ring(int(dim_ring), endpoint_trick=True)
    stim = tuple(range(1, dim_ring + 1))

    def conditions(d: Draw) -> None:
        gt = d.choice("ground_truth", [1, 2])
        sample = d.choice("sample_theta", list(theta))
        d.set(
            "test_theta", torch.where(gt == 1, sample, torch.remainder(sample + np.pi, 2 * np.pi))
        )

    half = lambda v: torch.full_like(v["ground_truth"], 0.5)  # noqa: E731
    return c.spec(
        obs_names={"fixation": 0, "stimulus": list(stim)},
        act_names={"fixation": 0, "match": 1, "non-match": 2},
        conditions=conditions,
        reported=("ground_truth", "sample_theta", "test_theta"),
        shows=(
            Show(1.0, (0,)),
            Show(0.0, (0,), ("decision",), mode="set"),
            Show(lambda v: _cos_bump(theta, v["sample_theta"], half(v)), stim, ("sample",)),
            Show(lambda v: _cos_bump(theta, v["test_theta"], half(v)), stim, ("test",)),
        ),
        noise=(Noise(c.noise_std(sigma), ("sample", "test"), stim),),
    )


@_task(
    "ContextDecisionMaking-v0",
    dt=100,
    timing={
        "fixation": 300,
        "stimulus": 750,
        "delay": _TruncExp(600, 300, 3000),
        "decision": 100,
    },
)
def context_decision_making(
    c: _Common,
    *,
    use_expl_context: bool = False,
    impl_context_modality: int = 0,
    dim_ring: int = 2,
    sigma: float = 1.0,
    abort: bool = False,
) -> TaskSpec:
    """Context-dependent integration of one of two modalities (Mante et al., 2013)."""
    if not use_expl_context and impl_context_modality not in (0, 1):
        raise UserError(f"impl_context_modality must be 0 or 1, got {impl_context_modality!r}")
    contexts = [0, 1] if use_expl_context else [int(impl_context_modality)]
    dim_ring = _check_ring(dim_ring)
    theta = _ring(int(dim_ring), endpoint_trick=True)
    mod1 = tuple(range(1, dim_ring + 1))
    mod2 = tuple(range(dim_ring + 1, 2 * dim_ring + 1))
    names: dict[str, Any] = {"fixation": 0}
    names.update({f"stim{i + 1}_mod1": i + 1 for i in range(dim_ring)})
    names.update({f"stim{i + 1}_mod2": i + 1 + dim_ring for i in range(dim_ring)})
    if use_expl_context:
        names.update({"context1": 1 + 2 * dim_ring, "context2": 2 + 2 * dim_ring})

    def conditions(d: Draw) -> None:
        choices = list(range(1, dim_ring + 1))
        gt = d.choice("ground_truth", choices)
        other = d.choice("other_choice", choices)
        ctx = d.choice("context", contexts)
        d.choice("coh_1", [5, 15, 50])
        d.choice("coh_2", [5, 15, 50])
        d.set("_choice_1", torch.where(ctx == 1, other, gt))
        d.set("_choice_2", torch.where(ctx == 1, gt, other))

    def bump(which: int) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        def value(v: Mapping[str, torch.Tensor]) -> torch.Tensor:
            centre = _pick(theta, v[f"_choice_{which}"] - 1)
            return _cos_bump(theta, centre, v[f"coh_{which}"] / 200)

        return value

    shows = [
        Show(1.0, (0,), ("fixation",)),
        Show(bump(1), mod1, ("stimulus",)),
        Show(bump(2), mod2, ("stimulus",)),
        Show(0.0, tuple(range(1 + 2 * dim_ring)), ("decision",), mode="set"),
    ]
    if use_expl_context:
        c1 = 1 + 2 * dim_ring
        shows.append(Show(lambda v: 1.0 - v["context"], (c1,)))
        shows.append(Show(lambda v: v["context"], (c1 + 1,)))
    return c.spec(
        obs_names=names,
        act_names={"fixation": 0, "choice": list(range(1, dim_ring + 1))},
        conditions=conditions,
        reported=("ground_truth", "other_choice", "context", "coh_1", "coh_2"),
        shows=tuple(shows),
        noise=(Noise(c.noise_std(sigma), ("stimulus",), mod1 + mod2),),
        rule=ChoiceRule(abort_ends=bool(abort)),
    )


@_task(
    "DelayComparison-v0",
    dt=100,
    timing={
        "fixation": 500,
        "stimulus1": 500,
        "delay": 1000,
        "stimulus2": 500,
        "decision": 100,
    },
)
def delay_comparison(
    c: _Common,
    *,
    vpairs: list[tuple[float, float]] | None = None,
    sigma: float = 1.0,
) -> TaskSpec:
    """Compare two vibration frequencies across a delay (Romo et al., 1999)."""
    pairs = np.asarray(vpairs or [(18, 10), (22, 14), (26, 18), (30, 22), (34, 26)], float)
    vmin, vmax = float(pairs.min()), float(pairs.max())

    def conditions(d: Draw) -> None:
        gt = d.choice("ground_truth", [1, 2])
        k = d.choice("_vpair", list(range(len(pairs)))).long()
        table = torch.as_tensor(pairs, device=gt.device)
        hi, lo = table[k, 0], table[k, 1]
        d.set("v1", torch.where(gt == 2, lo, hi))
        d.set("v2", torch.where(gt == 2, hi, lo))

    def represent(name: str) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        return lambda v: (1 + (v[name] - vmin) / (vmax - vmin)) / 2

    return c.spec(
        obs_names={"fixation": 0, "stimulus": 1},
        act_names={"fixation": 0, "choice": [1, 2]},
        conditions=conditions,
        reported=("ground_truth", "v1", "v2"),
        shows=(
            Show(1.0, (0,)),
            Show(represent("v1"), (1,), ("stimulus1",)),
            Show(represent("v2"), (1,), ("stimulus2",)),
            Show(0.0, (0, 1), ("decision",), mode="set"),
        ),
        # NeuroGym adds the noise to every channel, the fixation channel included
        noise=(Noise(c.noise_std(sigma), ("stimulus1", "stimulus2")),),
    )


@_task(
    "IntervalDiscrimination-v0",
    dt=80,
    timing={
        "fixation": 300,
        "stim1": Uniform(300, 600),
        "delay1": Uniform(800, 1500),
        "stim2": Uniform(300, 600),
        "delay2": 500,
        "decision": 300,
    },
)
def interval_discrimination(
    c: _Common,
    *,
    ties: str = "redraw",
) -> TaskSpec:
    """Which of two intervals lasted longer (Genovesio et al., 2009)."""
    if ties not in ("redraw", "second"):
        raise UserError(f"ties must be 'redraw' or 'second', got {ties!r}")

    def conditions(d: Draw) -> None:
        d1 = d.duration("duration1", c.timing["stim1"])
        d2 = d.duration("duration2", c.timing["stim2"])
        if ties == "redraw" and "duration2" not in d.fixed:
            for _ in range(64):  # P(tie) <= 0.3 per draw: 64 rounds leave none in practice
                tie = d1 == d2
                if not bool(tie.any()):
                    break
                again = d.duration("_redraw", c.timing["stim2"])
                d2 = torch.where(tie, again, d2)
            d.values.pop("_redraw", None)  # not a variable of the trial: keep trials distinct
            d.values["duration2"] = d2
        d.set("ground_truth", torch.where(d1 > d2, 1.0, 2.0))

    return c.spec(
        obs_names={"fixation": 0, "stim1": 1, "stim2": 2},
        act_names={"fixation": 0, "choice1": 1, "choice2": 2},
        conditions=conditions,
        reported=("duration1", "duration2", "ground_truth"),
        periods=(
            Period("fixation"),
            Period("stim1", length="duration1"),
            Period("delay1"),
            Period("stim2", length="duration2"),
            Period("delay2"),
            Period("decision"),
        ),
        shows=(
            Show(1.0, (0,)),
            Show(1.0, (1,), ("stim1",)),
            Show(1.0, (2,), ("stim2",)),
            Show(0.0, (0, 1, 2), ("decision",), mode="set"),
        ),
        options={"ties": ties},
    )


@_task(
    "ReadySetGo-v0",
    dt=80,
    timing={"fixation": 100, "ready": 83, "measure": Uniform(800, 1500), "set": 83},
)
def ready_set_go(
    c: _Common,
    *,
    gain: float = 1,
    prod_margin: float = 0.2,
) -> TaskSpec:
    """Measure an interval between two flashes, then produce it (Jazayeri & Shadlen, 2015)."""

    def conditions(d: Draw) -> None:
        measure = d.duration("measure", c.timing["measure"])
        g = d.set("gain", float(gain))
        d.set("production", measure * g)
        d.set("_production_period", 2 * measure * g)

    return c.spec(
        obs_names={"fixation": 0, "ready": 1, "set": 2},
        act_names={"fixation": 0, "go": 1},
        conditions=conditions,
        reported=("measure", "gain", "production"),
        periods=(
            Period("fixation"),
            Period("ready"),
            Period("measure", length="measure", after="fixation"),
            Period("set", after="measure"),
            Period("production", length="_production_period", after="set"),
        ),
        shows=(
            Show(1.0, (0,)),
            Show(0.0, (0,), ("production",), mode="set"),
            Show(1.0, (1,), ("ready",)),
            Show(1.0, (2,), ("set",)),
        ),
        targets=(Target(1.0, "production", at=lambda v: torch.floor(v["production"] / c.dt)),),
        rule=ProductionRule(margin=float(prod_margin)),
    )


@_task(
    "DualDelayMatchSample-v0",
    dt=100,
    timing=dict.fromkeys(
        ("fixation", "sample", "delay1", "cue1", "test1", "delay2", "cue2", "test2"), 500
    ),
)
def dual_delay_match_sample(
    c: _Common,
    *,
    sigma: float = 1.0,
) -> TaskSpec:
    """Two samples held at once, each tested after its cue (Rose et al., 2016). A response in
    the first test pays without ending the trial; one in the second ends it."""

    def conditions(d: Draw) -> None:
        g1 = d.choice("ground_truth1", [1, 2])
        g2 = d.choice("ground_truth2", [1, 2])
        s1 = d.choice("sample1", [0.0, 0.5])
        s2 = d.choice("sample2", [0.0, 0.5])
        d.choice("test_order", [0, 1])
        d.set("test1", torch.where(g1 == 1, s1, 0.5 - s1))
        d.set("test2", torch.where(g2 == 1, s2, 0.5 - s2))

    def angle(name: str) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        def value(v: Mapping[str, torch.Tensor]) -> torch.Tensor:
            theta = v[name] * np.pi
            return torch.stack([torch.cos(theta), torch.sin(theta)], dim=1)

        return value

    def when(order: int, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        """``fn`` on trials with this test order, 0 on the others (the probed item's test
        is shown in the first or the second test period)."""
        return lambda v: fn(v) * (v["test_order"] == order).to(torch.float64)[:, None]

    one = lambda v: torch.ones_like(v["test_order"])[:, None]  # noqa: E731
    shows = [
        Show(1.0, (0,)),
        Show(angle("sample1"), (1, 2), ("sample",)),
        Show(angle("sample2"), (3, 4), ("sample",)),
        # test order 0: item 1 is cued and tested first; 1: item 2 first
        Show(when(0, one), (5,), ("cue1",)),
        Show(when(1, one), (5,), ("cue2",)),
        Show(when(0, one), (6,), ("cue2",)),
        Show(when(1, one), (6,), ("cue1",)),
        Show(when(0, angle("test1")), (1, 2), ("test1",)),
        Show(when(1, angle("test1")), (1, 2), ("test2",)),
        Show(when(0, angle("test2")), (3, 4), ("test2",)),
        Show(when(1, angle("test2")), (3, 4), ("test1",)),
    ]
    first = lambda v: torch.where(v["test_order"] == 0, v["ground_truth1"], v["ground_truth2"])  # noqa: E731
    second = lambda v: torch.where(v["test_order"] == 0, v["ground_truth2"], v["ground_truth1"])  # noqa: E731
    return c.spec(
        obs_names={
            "fixation": 0,
            "stimulus1": [1, 2],
            "stimulus2": [3, 4],
            "cue1": 5,
            "cue2": 6,
        },
        act_names={"fixation": 0, "match": 1, "non-match": 2},
        conditions=conditions,
        reported=(
            "ground_truth1",
            "ground_truth2",
            "sample1",
            "sample2",
            "test_order",
            "test1",
            "test2",
        ),
        shows=tuple(shows),
        noise=(Noise(c.noise_std(sigma), ("sample", "test1", "test2")),),
        targets=(Target(first, "test1"), Target(second, "test2")),
        rule=ChoiceRule(
            fixate=("fixation", "sample", "delay1", "cue1", "delay2", "cue2"),
            decision="test2",
            respond=("test1",),
        ),
    )


# ---- a task of a paper that NeuroGym lacks ----------------------------------------------------
#: Cues of EvidenceAccumulation-v0 (Morcos & Harvey, 2016; Bellec et al., 2020, Fig. 3).
N_CUES = 7
_CUE_NAMES = tuple(f"cue{k}" for k in range(1, N_CUES + 1))
_CUE_TIMING: dict[str, Any] = {}
for _k in range(1, N_CUES + 1):
    _CUE_TIMING[f"gap{_k}"] = 50
    _CUE_TIMING[f"cue{_k}"] = 100


@_task(
    "EvidenceAccumulation-v0",
    dt=50,
    timing={**_CUE_TIMING, "delay": 1050, "decision": 150},
    neurogym=False,
)
def evidence_accumulation(c: _Common, *, p_cue: float = 0.7, sigma: float = 0.0) -> TaskSpec:
    """Evidence accumulation over a delay: the virtual T-maze of Morcos & Harvey (2016, Nat.
    Neurosci. 19:1672), as Bellec et al. (2020, Nat. Commun. 11:3625, Fig. 3) train spiking
    networks on it. Seven cues, each on the left (channel 1) or the right (channel 2) for
    100 ms after 50 ms of silence, then a 1050 ms delay, then a 150 ms decision period in which
    the fixation input (channel 0) goes off and the agent must choose the side that showed
    more cues (action 1 left, 2 right); 7 cues leave no tie. The timing is that of the
    authors' released code for the figure (cue spacing 150 ms, a 2250 ms trial). A trial
    favours one side (``favoured``, equally likely): each cue is on that side with
    probability ``p_cue`` (the paper's 0.7), independently. Breaking fixation before the
    decision pays ``abort`` (NeuroGym's table: -0.1, the trial goes on); the first response
    in the decision period ends the trial, ``correct`` 1 or ``fail`` 0.

    Args:
        c: The common arguments (``dt`` 50 ms: every period is a whole number of steps).
        p_cue: Probability that a cue is on the trial's favoured side, in [0, 1].
        sigma: Gaussian input noise on the cue channels before the decision, NeuroGym's
            ``sigma / sqrt(dt)`` per step (0: none; the paper's inputs are Poisson spikes).
    """
    if isinstance(p_cue, bool) or not isinstance(p_cue, (int, float)) or not 0 <= p_cue <= 1:
        raise UserError(f"p_cue must be a probability in [0, 1], got {p_cue!r}")
    p = float(p_cue)
    before = tuple(name for name in c.timing if name != "decision")

    def conditions(d: Draw) -> None:
        favoured = d.choice("favoured", [0, 1])  # 0 left, 1 right
        u = torch.rand((d.n, N_CUES), generator=d.gen, dtype=torch.float64, device=d.device)
        right = torch.where(favoured[:, None] == 1, u < p, u >= p).to(torch.float64)
        for k in range(N_CUES):
            d.set(f"cue{k + 1}", right[:, k])
        n_right = sum(d.values[f"cue{k + 1}"] for k in range(N_CUES))
        d.set("n_right", n_right)
        d.set("ground_truth", (n_right > N_CUES // 2).to(torch.float64))

    def side(k: int, value: int) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        """1 on the cue's channel: channel 1 shows left cues (value 0), 2 right (1)."""
        return lambda v: (v[f"cue{k}"] == value).to(torch.float64)

    cues = tuple(
        Show(side(k, ch - 1), (ch,), (f"cue{k}",)) for k in range(1, N_CUES + 1) for ch in (1, 2)
    )
    noise = (Noise(c.noise_std(sigma), before, (1, 2)),) if _check_sigma(sigma) > 0 else ()
    return c.spec(
        obs_names={"fixation": 0, "left": 1, "right": 2},
        act_names={"fixation": 0, "left": 1, "right": 2},
        conditions=conditions,
        reported=("ground_truth", "favoured", "n_right", *_CUE_NAMES),
        shows=(Show(1.0, (0,)), Show(0.0, (0,), ("decision",), mode="set"), *cues),
        noise=noise,
        targets=(Target(lambda v: v["ground_truth"] + 1, "decision"),),
        rule=ChoiceRule(fixate=before),
    )


#: The type of every trial variable the tasks above report (their ``reported`` names), by
#: name: one name means one thing, with one type, in every task (int: a label, a choice or a
#: count; float: a quantity). The engine casts the reported values to it (infos, trial records).
_REPORTED_TYPES: dict[str, type] = {
    "ground_truth": int,
    "coh": float,
    "sample_theta": float,
    "test_theta": float,
    "other_choice": int,
    "context": int,
    "coh_1": int,
    "coh_2": int,
    "v1": float,
    "v2": float,
    "duration1": float,
    "duration2": float,
    "measure": float,
    "gain": float,
    "production": float,
    "ground_truth1": int,
    "ground_truth2": int,
    "sample1": float,
    "sample2": float,
    "test_order": int,
    "test1": float,
    "test2": float,
    "favoured": int,
    "n_right": int,
    **dict.fromkeys(_CUE_NAMES, int),
    # Yang et al.'s tasks (snrl.tasks.yang19): directions are indices on the ring
    "direction": int,
    "modality": int,
    "direction1": int,
    "direction2": int,
    "coh1_mod1": float,
    "coh2_mod1": float,
    "coh1_mod2": float,
    "coh2_mod2": float,
    "match": int,
    "sample_direction": int,
    "test_direction": int,
}

#: The batched tasks by id (NeuroGym's ids, and the paper tasks' own), each called with
#: NeuroGym's keyword arguments.
TASKS: dict[str, _Task] = {
    task.name: task
    for task in (
        perceptual_decision_making,
        go_nogo,
        delay_match_sample,
        context_decision_making,
        delay_comparison,
        interval_discrimination,
        ready_set_go,
        dual_delay_match_sample,
        evidence_accumulation,
    )
}
