"""The declarative trial spec of a batched task, and the tensors of a batch of trials.

A trial-structured task (NeuroGym's convention, Molano-Mazon et al., 2022) is a sequence of
*periods* (``fixation``, ``stimulus``, ``delay``, ``decision`` ...), each lasting a duration
drawn from a distribution and quantized down to whole steps of ``dt`` ms. What a trial shows,
what it asks for and what it pays is written once, as data:

* :class:`TaskSpec` ``conditions``: a function that draws the trial's variables (ground truth,
  coherence ...) through a :class:`Draw`, for ``n`` trials at once;
* ``periods``: :class:`Period` (start after the previous period, or after a named one;
  duration from ``timing`` or from a trial variable);
* ``shows``: :class:`Show` rules applied in order, as NeuroGym's ``add_ob`` / ``set_ob``
  (a value on some channels during some periods), and :class:`Noise` (Gaussian noise added
  per step on some channels during some periods, optionally only on the channels a trial
  variable picks);
* ring stimuli (Yang et al., 2019): :class:`RingBump`, a Gaussian bump of activity around a
  trial's direction on one of several rings of ``dim`` channels, a :class:`Show` value; the
  response on a ring is action ``1 + direction`` (:func:`ring_directions` gives the grid);
* ``targets``: :class:`Target`, the ground-truth action per period (0 elsewhere);
* ``rule``: the reward rule (:class:`ChoiceRule` or :class:`ProductionRule`) with NeuroGym's
  reward table (:class:`Rewards`).

:func:`build_trials` turns the spec into the tensors of ``n`` trials: the observation of every
step ``(n, T, C)``, the ground truth ``(n, T)`` and, for every step and action, the reward,
whether the trial ends and the performance it reports ``(n, T, A, 3)``. The engine
(:mod:`snrl.tasks.engine`) steps ``N`` envs by indexing these tables, so a rule is evaluated
once per trial for all steps and actions, never per env step.

Times are in ms here, as in NeuroGym (``dt=100`` is a 100 ms step); the infos the engine
reports are in seconds, as everywhere else in snrl.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor

from snrl.errors import UserError

__all__ = [
    "ChoiceRule",
    "Choice",
    "Const",
    "Draw",
    "Duration",
    "Noise",
    "Period",
    "ProductionRule",
    "Rewards",
    "RingBump",
    "Show",
    "Target",
    "TaskSpec",
    "Trials",
    "TruncExp",
    "Uniform",
    "as_duration",
    "build_trials",
    "draw_trials",
    "period_bounds",
    "ring_directions",
    "trial_tables",
]


# ---- durations --------------------------------------------------------------------------------
class Duration(Protocol):
    """A distribution of period durations (ms)."""

    def sample(self, gen: torch.Generator, n: int, device: torch.device) -> Tensor:
        """``n`` durations, float64 ms (not yet quantized to ``dt``)."""
        ...


@dataclass(frozen=True)
class Const:
    """Always ``ms``."""

    ms: float

    def sample(self, gen: torch.Generator, n: int, device: torch.device) -> Tensor:  # noqa: D102
        return torch.full((n,), float(self.ms), dtype=torch.float64, device=device)


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (ms), each equally likely."""

    values: tuple[float, ...]

    def sample(self, gen: torch.Generator, n: int, device: torch.device) -> Tensor:  # noqa: D102
        table = torch.tensor(self.values, dtype=torch.float64, device=device)
        return table[torch.randint(len(self.values), (n,), generator=gen, device=device)]


@dataclass(frozen=True)
class Uniform:
    """Uniform on ``[lo, hi)`` ms."""

    lo: float
    hi: float

    def sample(self, gen: torch.Generator, n: int, device: torch.device) -> Tensor:  # noqa: D102
        u = torch.rand(n, generator=gen, dtype=torch.float64, device=device)
        return self.lo + (self.hi - self.lo) * u


@dataclass(frozen=True)
class TruncExp:
    """Exponential with mean ``mean`` ms, truncated to ``[lo, hi)``: the distribution of
    NeuroGym's ``TruncExp`` (which draws until a sample falls inside), drawn here in one step
    by inverting the truncated distribution's CDF. ``lo >= hi`` gives ``hi`` (as NeuroGym)."""

    mean: float
    lo: float = 0.0
    hi: float = math.inf

    def sample(self, gen: torch.Generator, n: int, device: torch.device) -> Tensor:  # noqa: D102
        if self.lo >= self.hi:
            return Const(self.hi).sample(gen, n, device)
        u = torch.rand(n, generator=gen, dtype=torch.float64, device=device)
        mass = -math.expm1(-(self.hi - self.lo) / self.mean)  # P(lo <= x < hi) / P(x >= lo)
        return self.lo - self.mean * torch.log1p(-u * mass)


def as_duration(value: Any, name: str = "period") -> Duration:
    """:func:`_as_duration`, refusing negative durations."""
    dist = _as_duration(value, name)
    low = {
        Const: lambda d: d.ms,
        Choice: lambda d: min(d.values),
        Uniform: lambda d: min(d.lo, d.hi),
        TruncExp: lambda d: min(d.lo, d.mean),
    }.get(type(dist))
    if low is not None and not low(dist) >= 0:
        raise UserError(f"timing of {name!r} is {value!r}: durations are ms >= 0")
    return dist


def _as_duration(value: Any, name: str = "period") -> Duration:
    """A duration from NeuroGym's ``timing`` forms: a number (constant), a list of numbers
    (a choice), ``("uniform", (lo, hi))``, ``("choice", [...])``, ``("constant", ms)``,
    ``("truncated_exponential", (mean, lo, hi))``, NeuroGym's ``TruncExp`` object, or a
    :class:`Duration`.

    Raises:
        UserError: Any other value (a callable cannot be batched).
    """
    if hasattr(value, "sample") and not isinstance(value, (list, tuple)):
        return value
    if type(value).__name__ == "TruncExp" and hasattr(value, "vmean"):  # NeuroGym's object
        return TruncExp(float(value.vmean), float(value.vmin), float(value.vmax))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Const(float(value))
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return Choice(tuple(float(v) for v in value))
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str):
        dist, args = value
        if dist == "constant":
            return Const(float(args))
        if dist == "uniform":
            return Uniform(float(args[0]), float(args[1]))
        if dist == "choice":
            return Choice(tuple(float(v) for v in args))
        if dist == "truncated_exponential":
            return TruncExp(*(float(a) for a in args))
    raise UserError(
        f"timing of {name!r} is {value!r}, which the batched engine cannot draw (use a number, "
        "a list of numbers, or ('uniform'|'choice'|'constant'|'truncated_exponential', args))"
    )


# ---- trial variables ----------------------------------------------------------------------------
class Draw:
    """Draws the variables of ``n`` trials; ``fixed`` values (a test's, a user's) replace the
    draws of the same name. Every value is a float64 tensor ``(n,)`` in :attr:`values`.

    Args:
        gen: The generator to draw from.
        n: Number of trials.
        dt: The task step, ms (durations are quantized to it).
        fixed: Values to use instead of drawing (scalars or ``(n,)``).
    """

    def __init__(
        self,
        gen: torch.Generator,
        n: int,
        dt: float,
        fixed: Mapping[str, Any] | None = None,
    ) -> None:
        self.gen = gen
        self.n = n
        self.dt = float(dt)
        self.device = gen.device
        self.fixed = dict(fixed or {})
        self.values: dict[str, Tensor] = {}

    def _keep(self, name: str, value: Tensor) -> Tensor:
        if name in self.fixed:
            value = torch.as_tensor(self.fixed[name], dtype=torch.float64, device=self.device)
            value = value.expand(self.n).clone()
        self.values[name] = value
        return value

    def choice(self, name: str, options: Sequence[float]) -> Tensor:
        """One of ``options`` per trial, equally likely (NeuroGym's ``rng.choice``)."""
        table = torch.as_tensor(np.asarray(options, dtype=np.float64), device=self.device)
        idx = torch.randint(len(options), (self.n,), generator=self.gen, device=self.device)
        return self._keep(name, table[idx])

    def duration(self, name: str, dist: Duration) -> Tensor:
        """A duration quantized down to whole steps (NeuroGym's ``(t // dt) * dt``)."""
        ms = dist.sample(self.gen, self.n, self.device)
        return self._keep(name, torch.floor(ms / self.dt) * self.dt)

    def set(self, name: str, value: Tensor | float) -> Tensor:
        """A variable derived from others (replaced by ``fixed`` too)."""
        value = torch.as_tensor(value, dtype=torch.float64, device=self.device)
        return self._keep(name, value.expand(self.n).clone())


# ---- the spec ---------------------------------------------------------------------------------
ValueFn = Callable[[Mapping[str, Tensor]], Tensor]


@dataclass(frozen=True)
class Period:
    """A period of the trial.

    Args:
        name: The period's name (``"fixation"``, ``"decision"`` ...).
        length: Where its duration comes from: ``None``, the task's ``timing[name]``
            (drawn, quantized); a string, the trial variable of that name (ms, used as is);
            a function of the trial variables (durations included) giving ms per trial.
        after: The period it starts after (``None``: the previous one; the first starts at 0).
        offset: ms from that start point to the period's start (a reaction-time decision
            period opens one step after the stimulus onset).
    """

    name: str
    length: str | ValueFn | None = None
    after: str | None = None
    offset: float = 0.0


@dataclass(frozen=True)
class Show:
    """Observation rule, NeuroGym's ``add_ob`` (``mode="add"``) or ``set_ob`` (``"set"``).

    Args:
        value: A number, or a function of the trial variables returning ``(n,)`` or
            ``(n, len(channels))`` float64.
        channels: Observation channels (indices).
        periods: The periods it covers (``None``: the whole trial).
        mode: ``"add"`` adds ``value``; ``"set"`` replaces what the channels showed.
    """

    value: float | ValueFn
    channels: tuple[int, ...]
    periods: tuple[str, ...] | None = None
    mode: str = "add"


@dataclass(frozen=True)
class Noise:
    """Gaussian noise of standard deviation ``std`` added at every step of ``periods`` on
    ``channels`` (``None``: all) — NeuroGym's ``add_randn``. ``where``: a function of the
    trial variables giving a 0/1 ``(n, len(channels))`` mask of the channels that get it
    (a stimulus shown on one ring of two: only that ring is noisy)."""

    std: float
    periods: tuple[str, ...]
    channels: tuple[int, ...] | None = None
    where: ValueFn | None = None


def ring_directions(dim: int) -> np.ndarray:
    """The preferred directions of a ring of ``dim`` channels, radians: ``2 pi k / dim``."""
    return np.linspace(0.0, 2.0 * np.pi, dim + 1)[:-1]


@dataclass(frozen=True)
class RingBump:
    """A bump of activity on a ring of ``dim`` channels (a :class:`Show` value), centred on a
    direction of the ring, as the stimuli of Yang et al. (2019) and NeuroGym's ``yang19``
    tasks: channel ``k`` (preferred direction ``theta_k``) shows
    ``peak * exp(-(d / width) ** 2 / 2) * strength``, ``d`` the circular distance from
    ``theta_k`` to the centre.

    Args:
        centre: The trial variable holding the centre's direction index (``0 .. dim - 1``).
        dim: Channels per ring.
        strength: A number, or the trial variable scaling the bump.
        rings: Rings side by side in the shown channels (``rings * dim`` values per trial).
        ring: The ring it is shown on: a number, or the trial variable holding it; the
            other rings' channels get 0.
        shift: Radians added to the centre's direction, modulo 2 pi (an anti task's
            stimulus is opposite its response: ``pi``).
        width: The bump's width, radians.
        peak: Its height at strength 1.
    """

    centre: str
    dim: int
    strength: str | float = 1.0
    rings: int = 1
    ring: str | int = 0
    shift: float = 0.0
    width: float = math.pi / 8
    peak: float = 0.8

    def __call__(self, values: Mapping[str, Tensor]) -> Tensor:
        """``(n, rings * dim)`` float64: each trial's bump on its ring."""
        index = values[self.centre]
        device = index.device
        grid = torch.as_tensor(ring_directions(self.dim), dtype=torch.float64, device=device)
        centre = grid[index.round().long()]
        if self.shift:
            centre = torch.remainder(centre + self.shift, 2 * math.pi)
        gap = (centre[:, None] - grid[None, :]).abs()
        d = torch.minimum(gap, 2 * math.pi - gap) / self.width
        strength = values[self.strength] if isinstance(self.strength, str) else self.strength
        strength = torch.as_tensor(strength, dtype=torch.float64, device=device)
        bump = self.peak * torch.exp(-(d**2) / 2) * strength.reshape(-1, 1)
        if self.rings == 1:
            return bump
        ring = (
            values[self.ring]
            if isinstance(self.ring, str)
            else torch.full_like(index, float(self.ring))
        )
        on = ring.round().long()[:, None] == torch.arange(self.rings, device=device)
        return (on[:, :, None] * bump[:, None, :]).reshape(index.shape[0], -1)


@dataclass(frozen=True)
class Target:
    """Ground-truth action ``value`` during ``period`` (a number or a function of the trial
    variables); with ``at`` (a function giving a step offset within the period) only at that
    one step."""

    value: float | ValueFn
    period: str
    at: ValueFn | None = None


@dataclass(frozen=True)
class Rewards:
    """NeuroGym's reward table: breaking fixation, a correct and a wrong response, and a
    missed response (paid when a trial times out, scaled by the task's miss weight)."""

    abort: float = -0.1
    correct: float = 1.0
    fail: float = 0.0
    miss: float = 0.0

    @classmethod
    def merged(cls, defaults: Mapping[str, float], user: Mapping[str, Any] | None) -> Rewards:
        """The defaults updated by a user's ``rewards`` (NeuroGym's ``rewards=`` argument)."""
        table = dict(defaults)
        for key, value in (user or {}).items():
            if key not in ("abort", "correct", "fail", "miss"):
                raise UserError(f"rewards has the key {key!r} (use abort, correct, fail or miss)")
            table[key] = float(value)
        return cls(**table)


@dataclass(frozen=True)
class ChoiceRule:
    """The rule of fixate-then-choose tasks (NeuroGym's ``_step`` of most tasks).

    A non-fixation action in a ``fixate`` period pays ``abort`` (and ends the trial when
    ``abort_ends``); in the ``decision`` period it ends the trial and pays ``correct`` when it
    equals the ground truth, else ``fail``; in a ``respond`` period it pays the same without
    ending the trial (DualDelayMatchSample's first test). A trial that runs out pays
    ``timeout_reward`` (GoNogo's miss on a go trial) and reports ``timeout_performance``.

    Performance is NeuroGym's: a right response (in ``decision`` or ``respond``) sets the
    trial's performance to 1, which it keeps to its end (the engine's running maximum of the
    outcome table's performance column).
    """

    fixate: tuple[str, ...] = ("fixation",)
    decision: str = "decision"
    respond: tuple[str, ...] = ()
    abort_ends: bool = False
    timeout_reward: ValueFn | None = None
    timeout_performance: ValueFn | None = None


@dataclass(frozen=True)
class ProductionRule:
    """The rule of interval-production tasks (NeuroGym's ReadySetGo): ``go`` in ``period``
    ends the trial; the produced interval is the time since the end of ``since`` and the
    target the trial variable ``target`` (ms); an error within ``margin * target + 25`` ms
    pays ``correct * max((1 - error / threshold) ** 1.5, 0.1)``, a larger one ``fail``.
    A non-fixation action in a ``fixate`` period pays ``abort``."""

    period: str = "production"
    since: str = "measure"
    target: str = "production"
    margin: float = 0.2
    go: int = 1
    fixate: tuple[str, ...] = ("fixation",)


@dataclass(frozen=True)
class TaskSpec:
    """A batched trial-structured task, as data (see the module docstring).

    Args:
        name: The task's id (``"PerceptualDecisionMaking-v0"``).
        dt: Step, ms.
        obs_names: Observation channel names (NeuroGym's ``observation_space.name``).
        act_names: Action names (NeuroGym's ``action_space.name``).
        n_obs: Number of observation channels.
        n_act: Number of actions (action 0 is fixation).
        conditions: Draws the trial variables: ``conditions(draw)``.
        reported: The trial variables reported per trial, with their type (``int``/``float``).
        periods: The periods, in order.
        timing: Duration of each period without a ``length`` (ms distributions).
        shows: Observation rules, applied in order.
        noise: Noise rules, applied after the shows.
        targets: Ground truth per period.
        rule: The reward rule.
        rewards: The reward table.
    """

    name: str
    dt: float
    obs_names: Mapping[str, Any]
    act_names: Mapping[str, Any]
    n_obs: int
    n_act: int
    conditions: Callable[[Draw], None]
    reported: Mapping[str, type]
    periods: tuple[Period, ...]
    timing: Mapping[str, Duration]
    shows: tuple[Show, ...]
    noise: tuple[Noise, ...]
    targets: tuple[Target, ...]
    rule: ChoiceRule | ProductionRule
    rewards: Rewards
    fixation_action: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def period_names(self) -> tuple[str, ...]:
        """The periods' names, in order."""
        return tuple(p.name for p in self.periods)


class Trials(NamedTuple):
    """The tensors of ``n`` trials (``T``: steps of the longest)."""

    values: dict[str, Tensor]  # trial variables, float64 (n,)
    start: Tensor  # (n, P) float64 ms, period starts
    end: Tensor  # (n, P) float64 ms, period ends
    length: Tensor  # (n,) int64 steps of each trial
    obs: Tensor  # (n, T, C) float32 observation at each step
    gt: Tensor  # (n, T) int64 ground-truth action at each step
    outcome: Tensor  # (n, T, A, 3) float32: reward, ends trial (0/1), performance it sets
    noise_std: Tensor  # (n, T, C) float32: standard deviation of the noise at each step


def _period_mask(spec: TaskSpec, names: Sequence[str] | None, inside: Tensor) -> Tensor:
    """(n, T) bool: steps in any of the periods ``names`` (all steps for ``None``)."""
    if names is None:
        return torch.ones(inside.shape[1:], dtype=torch.bool, device=inside.device)
    index = [spec.period_names.index(p) for p in names]
    return inside[index].any(dim=0)


def _channels(channels: tuple[int, ...] | None, n_obs: int) -> slice | list[int]:
    """Channel indices as a slice where they are contiguous (a view, not a copy)."""
    if channels is None:
        return slice(None)
    ch = list(channels)
    if ch == list(range(ch[0], ch[-1] + 1)):
        return slice(ch[0], ch[-1] + 1)
    return ch


def _value(value: float | ValueFn, values: Mapping[str, Tensor], n: int, width: int) -> Tensor:
    """A rule's value as float64 (n, width)."""
    if callable(value):
        v = value(values).to(torch.float64)
        return v.reshape(n, 1).expand(n, width) if v.dim() == 1 else v
    device = next(iter(values.values())).device
    return torch.full((n, width), float(value), dtype=torch.float64, device=device)


def draw_trials(
    spec: TaskSpec, gen: torch.Generator, n: int, fixed: Mapping[str, Any] | None = None
) -> dict[str, Tensor]:
    """The variables of ``n`` trials: the task's conditions and every period's duration
    (``_duration_<period>``), float64 ``(n,)`` each; ``fixed`` values replace draws."""
    draw = Draw(gen, n, spec.dt, fixed)
    spec.conditions(draw)
    for p in spec.periods:
        if p.length is None:
            draw.duration(f"_duration_{p.name}", spec.timing[p.name])
    return draw.values


def build_trials(
    spec: TaskSpec,
    gen: torch.Generator,
    n: int,
    *,
    fixed: Mapping[str, Any] | None = None,
    steps: int | None = None,
    noise: bool = True,
) -> Trials:
    """Draw ``n`` trials of ``spec`` and build their tables (:func:`draw_trials`, then
    :func:`trial_tables` with noise drawn from ``gen`` when ``noise``)."""
    values = draw_trials(spec, gen, n, fixed)
    return trial_tables(spec, values, gen=gen if noise else None, steps=steps)


def period_bounds(
    spec: TaskSpec, values: Mapping[str, Tensor]
) -> tuple[dict[str, Tensor], dict[str, Tensor], Tensor]:
    """Each period's start and end (ms, float64 ``(n,)``) of the trials whose variables are
    ``values``, and each trial's length in steps (int64 ``(n,)``)."""
    n = int(next(iter(values.values())).shape[0])
    device = next(iter(values.values())).device
    starts: dict[str, Tensor] = {}
    ends: dict[str, Tensor] = {}
    previous: str | None = None
    for p in spec.periods:
        if callable(p.length):
            duration = p.length(values).to(torch.float64)
        else:
            duration = values[f"_duration_{p.name}" if p.length is None else p.length]
        after = p.after if p.after is not None else previous
        start = (
            ends[after] if after is not None else torch.zeros(n, dtype=torch.float64, device=device)
        )
        if p.offset:
            start = start + float(p.offset)
        starts[p.name], ends[p.name] = start, start + duration
        previous = p.name
    last = torch.stack([ends[p] for p in spec.period_names], dim=1).max(dim=1).values
    # NeuroGym: tmax = int(max end / dt) * dt; the trial has tmax / dt steps
    return starts, ends, torch.floor(last / float(spec.dt)).to(torch.int64)


def trial_tables(
    spec: TaskSpec,
    values: Mapping[str, Tensor],
    *,
    gen: torch.Generator | None = None,
    steps: int | None = None,
) -> Trials:
    """The tables of the trials whose variables are ``values`` (from :func:`draw_trials`).

    Args:
        spec: The task.
        values: The trials' variables, float64 ``(n,)`` each (durations included).
        gen: Draws the observation noise into ``obs``; ``None``: no noise in ``obs`` (its
            standard deviation is in ``noise_std`` either way).
        steps: Width ``T`` of the tables (at least the longest trial; ``None``: exactly it).

    Returns:
        The trials' tensors.
    """
    n = int(next(iter(values.values())).shape[0])
    device = next(iter(values.values())).device
    dt = float(spec.dt)
    starts, ends, length = period_bounds(spec, values)
    start = torch.stack([starts[p] for p in spec.period_names], dim=1)
    end = torch.stack([ends[p] for p in spec.period_names], dim=1)
    t_max = int(length.max())
    width = max(t_max, steps or 0)
    t = torch.arange(width, dtype=torch.float64, device=device) * dt
    # the rules ask "is t in the period" by time (NeuroGym's in_period); the observation and
    # ground-truth tables are filled by index, from int(start / dt) to int(end / dt) (its
    # view_ob): the same steps unless a duration is not a whole number of steps
    inside = (start.T[:, :, None] <= t) & (t < end.T[:, :, None])  # (P, n, T)
    k = torch.arange(width, device=device)
    first_i = torch.floor(start.T / dt).to(torch.int64)[:, :, None]
    last_i = torch.floor(end.T / dt).to(torch.int64)[:, :, None]
    by_index = (first_i <= k) & (k < last_i)  # (P, n, T)

    # float32 throughout: a value is computed in float64 and rounded once, as NeuroGym adds
    # float64 values into its float32 table
    obs = torch.zeros(n, width, spec.n_obs, dtype=torch.float32, device=device)
    for rule in spec.shows:
        mask = _period_mask(spec, rule.periods, by_index)[..., None].to(torch.float32)
        ch = _channels(rule.channels, spec.n_obs)
        width_ch = (
            spec.n_obs
            if isinstance(ch, slice) and ch == slice(None)
            else len(range(spec.n_obs)[ch])
        )
        v = _value(rule.value, values, n, width_ch)[:, None, :]
        if rule.mode == "set":
            obs[:, :, ch] = obs[:, :, ch] * (1.0 - mask) + mask * v.to(torch.float32)
        else:  # the sum in float64, rounded once (NeuroGym adds float64 to its float32 table)
            obs[:, :, ch] = (obs[:, :, ch].double() + mask.double() * v).to(torch.float32)
    variance = torch.zeros(n, width, spec.n_obs, dtype=torch.float32, device=device)
    for rule in spec.noise:
        mask = _period_mask(spec, rule.periods, by_index)[..., None].to(torch.float32)
        ch = _channels(rule.channels, spec.n_obs)
        if rule.where is not None:
            mask = mask * rule.where(values).to(torch.float32)[:, None, :]
        variance[:, :, ch] += mask * float(rule.std) ** 2
    noise_std = variance.sqrt_()
    if gen is not None and spec.noise:
        obs += torch.randn(obs.shape, generator=gen, dtype=torch.float32, device=device).mul_(
            noise_std
        )

    gt = torch.zeros(n, width, dtype=torch.int64, device=device)
    for target in spec.targets:
        mask = _period_mask(spec, (target.period,), by_index)
        if target.at is not None:
            first = torch.floor(starts[target.period] / dt).to(torch.int64)
            offset = target.at(values).to(torch.int64)
            mask = mask & (k == (first + offset)[:, None])
        v = _value(target.value, values, n, 1)[:, 0].round().to(torch.int64)
        gt = torch.where(mask, v[:, None], gt)

    outcome = _outcome(spec, values, inside, t, ends, gt, length)
    return Trials(dict(values), start, end, length, obs, gt, outcome, noise_std)


def _outcome(
    spec: TaskSpec,
    values: Mapping[str, Tensor],
    inside: Tensor,
    t: Tensor,
    ends: Mapping[str, Tensor],
    gt: Tensor,
    length: Tensor,
) -> Tensor:
    """(n, T, A, 3) float32: reward, ends (0/1), performance for every step and action.

    Written with products of 0/1 masks rather than ``where``: the masks are disjoint."""
    n, width = gt.shape
    device = gt.device
    f32 = torch.float32
    rw = spec.rewards
    rule = spec.rule
    act = torch.arange(spec.n_act, device=device)
    moved = (act != spec.fixation_action).to(f32)[None, None, :]  # (1, 1, A)
    fix = _period_mask(spec, rule.fixate, inside)[..., None].to(f32)  # (n, T, 1)
    broke = fix * moved  # (n, T, A)
    reward = broke * rw.abort
    timeout_reward = timeout_perf = None
    if isinstance(rule, ChoiceRule):
        decide = _period_mask(spec, (rule.decision,), inside)[..., None].to(f32)
        respond = decide * (1.0 - fix) * moved
        right = (act[None, None, :] == gt[..., None]).to(f32)
        answer = respond
        if rule.respond:
            early = _period_mask(spec, rule.respond, inside)[..., None].to(f32)
            answer = respond + early * (1.0 - fix) * (1.0 - decide) * moved
        reward += answer * (rw.fail + right * (rw.correct - rw.fail))
        ends_now = respond + broke * (1.0 - respond) if rule.abort_ends else respond
        perf = answer * right
        if rule.timeout_reward is not None:
            timeout_reward = rule.timeout_reward(values).to(f32)
        if rule.timeout_performance is not None:
            timeout_perf = rule.timeout_performance(values).to(f32)
    else:  # ProductionRule
        go = (act == rule.go).to(f32)[None, None, :]
        produce = _period_mask(spec, (rule.period,), inside)[..., None].to(f32) * go
        target = values[rule.target][:, None]
        error = (t[None, :] - ends[rule.since][:, None] - target).abs()
        threshold = rule.margin * target + 25.0
        good = (error <= threshold).to(torch.float64)
        pay = torch.clamp((1.0 - error / threshold).clamp(min=0.0) ** 1.5, min=0.1)
        pay = (good * pay * rw.correct + (1.0 - good) * rw.fail).to(f32)[..., None]
        reward = reward * (1.0 - produce) + produce * pay
        ends_now = produce
        perf = produce * good.to(f32)[..., None]
    # the last step of a trial ends it (NeuroGym: t + dt > tmax)
    last = (torch.arange(width, device=device)[None, :] == (length - 1)[:, None])[..., None]
    last = last.to(f32)
    cut = last * (1.0 - ends_now)
    if timeout_reward is not None:
        reward += cut * timeout_reward[:, None, None]
    if timeout_perf is not None:
        perf = perf * (1.0 - cut) + cut * timeout_perf[:, None, None]
    ends_now = ends_now + cut
    return torch.stack([reward + 0.0, ends_now, perf], dim=-1)  # + 0.0: no -0.0 rewards
