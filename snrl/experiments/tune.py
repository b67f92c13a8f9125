"""Hyperparameter search on Optuna: ``snrl tune`` and ``snrl.tune(...)`` (docs/tune.md).

A study samples config values from a search space (a default per algorithm and backbone, or
the user's TOML file), trains each trial as an ordinary snrl run directory
``DIR/trials/<number>`` and scores it by the mean of its last ``last_k`` periodic
evaluations (``eval_return_mean``; ``eval_trial_accuracy`` on trial tasks). Optuna's
MedianPruner stops a trial whose evaluations fall below the median of earlier trials at the
same env step. The study lives in Optuna's storage: a journal file (``DIR/study.log``) by
default, or an RDB URL, so several processes (or machines sharing the storage) work one
study; Optuna hands each trial to exactly one of them.

A space file holds one entry per config key::

    lr = {low = 1e-4, high = 3e-3, log = true}   # a range (int or float, by the field's type)
    hidden_size = {choices = [32, 64, 128]}      # a choice
    n_envs = 8                                   # a fixed value for every trial

With ``baseline=True`` (``--baseline``) the study's first trial trains the defaults (the
space's fixed values, nothing sampled) on the same seed and steps, so ``best.toml`` and
``report.md`` say whether, and by how much, the best sampled trial beat them.

Outputs, written by every ``tune`` call when its workers are done: ``DIR/best.toml`` (the
best trial's values in the zoo's format, snrl/zoo/*.toml), ``DIR/report.md`` (best trials,
parameter importances, ``DIR/history.png``). :func:`reproduce` re-runs a trial from its
saved config.

Optuna is the ``[tune]`` extra; it is imported only when a study runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import socket
import types
import typing
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from snrl.agents import ALGOS
from snrl.callbacks import Callback
from snrl.config import config_from_dict, load_config, load_toml, unknown_key_error
from snrl.errors import UserError, describe
from snrl.experiments.runner import train_run
from snrl.io import atomic_write_text, load_json
from snrl.zoo import FIXED_KEYS

__all__ = [
    "Param",
    "TuneResult",
    "default_space",
    "load_space",
    "reproduce",
    "tune",
]

#: Backbones whose neurons spike: their spaces add the neuron keys.
SPIKING = ("lif", "alif", "spylif")

#: Keys a space may not set: what the study fixes (env, backbone, seed, steps) and what
#: belongs to the machine or the run.
NOT_TUNABLE = (*FIXED_KEYS, "total_steps", "eval_interval")


@dataclasses.dataclass(frozen=True)
class Param:
    """One entry of a search space: a range (``low``..``high``, ``log`` scale), a list of
    ``choices``, or a ``fixed`` value."""

    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    fixed: Any = None

    def to_toml(self) -> str:
        """The entry as written in a space file."""
        if self.choices is not None:
            return "{choices = [" + ", ".join(_toml_value(c) for c in self.choices) + "]}"
        if self.low is None:
            return _toml_value(self.fixed)
        log = ", log = true" if self.log else ""
        return f"{{low = {_toml_value(self.low)}, high = {_toml_value(self.high)}{log}}}"


_PPO_SPACE = {
    "lr": Param(1e-4, 3e-3, log=True),
    "n_steps": Param(choices=(16, 32, 64, 128)),
    "n_epochs": Param(2, 10),
    "n_minibatches": Param(choices=(1, 2, 4)),
    "gamma": Param(0.9, 0.999),
    "gae_lambda": Param(0.8, 0.99),
    "ent_coef": Param(1e-5, 0.05, log=True),
    "clip_coef": Param(0.1, 0.3),
    "hidden_size": Param(choices=(32, 64, 128)),
}
_A2C_SPACE = {
    "lr": Param(1e-4, 3e-3, log=True),
    "n_steps": Param(choices=(5, 8, 16, 32)),
    "gamma": Param(0.9, 0.999),
    "gae_lambda": Param(0.9, 1.0),
    "ent_coef": Param(1e-5, 0.05, log=True),
    "hidden_size": Param(choices=(32, 64, 128)),
}
_DQN_SPACE = {
    "lr": Param(1e-4, 3e-3, log=True),
    "gamma": Param(0.9, 0.999),
    "n_step": Param(1, 5),
    "batch_size": Param(choices=(32, 64, 128)),
    "target_update_interval": Param(choices=(250, 500, 1000)),
    "train_freq": Param(choices=(1, 4, 8)),
    "eps_end": Param(0.01, 0.1),
    "hidden_size": Param(choices=(32, 64, 128)),
}
_NEURON_SPACE = {
    "tau_m": Param(5e-3, 40e-3, log=True),
    "readout_tau_m": Param(2e-3, 20e-3, log=True),
    "recurrent_sign": Param(0.1, 0.3),
    "rate_reg": Param(choices=(0.0, 0.01, 0.1)),
}


def default_space(algo: str, backbone: str) -> dict[str, Param]:
    """The default search space of ``algo`` (ppo | a2c | dqn) with ``backbone``: the algorithm's
    keys, plus the neuron keys (``tau_m`` and ``readout_tau_m`` in seconds, the inhibitory
    fraction ``recurrent_sign``, ``rate_reg``) for spiking backbones."""
    _check_algo(algo)
    space = dict({"ppo": _PPO_SPACE, "a2c": _A2C_SPACE}.get(algo, _DQN_SPACE))
    if backbone in SPIKING:
        space.update(_NEURON_SPACE)
    return space


def load_space(path: str | os.PathLike, algo: str) -> dict[str, Param]:
    """The search space of a TOML file (the module docstring shows the format), checked
    against ``algo``'s config class: known keys (with a did-you-mean), values the config
    accepts at both bounds and for every choice, ``low < high``, ``log`` only above zero.

    Raises:
        UserError: A missing or unreadable file, or any entry that does not fit.
    """
    _check_algo(algo)
    p = Path(path)
    try:
        data = load_toml(p, what="space file", flag="--space")
    except OSError as e:  # the other failures are load_toml's UserErrors
        raise UserError(f"space file {p} cannot be read: {e} (pass a UTF-8 .toml file)") from None
    return check_space(data, algo, source=str(p))


def check_space(data: Mapping[str, Any], algo: str, *, source: str) -> dict[str, Param]:
    """:func:`load_space` on a parsed table (``source`` names it in messages)."""
    cls = ALGOS[algo].Config
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _key_types(cls)
    space: dict[str, Param] = {}
    if not data:
        raise UserError(f"space file {source} has no entries (add e.g. lr = {{low = 1e-4, ...}})")
    for key, spec in data.items():
        if key not in fields:
            raise unknown_key_error(key, fields, source)
        if key in NOT_TUNABLE:
            raise UserError(
                f"{key!r} in {source} is set by snrl tune, not searched (remove it; "
                "--env, --backbone, --seed and --steps set these)"
            )
        where = f"{key} in {source}"
        if not isinstance(spec, dict):
            _check_value(cls, key, spec, where)
            space[key] = Param(fixed=spec)
            continue
        extra = set(spec) - {"low", "high", "log", "choices"}
        if extra:
            raise UserError(
                f"{where}: unknown field(s) {', '.join(sorted(extra))} "
                "(write {low = ..., high = ..., log = true|false} or {choices = [...]})"
            )
        if "choices" in spec:
            choices = spec["choices"]
            if set(spec) != {"choices"} or not isinstance(choices, list) or not choices:
                raise UserError(f"{where}: choices must be a non-empty list, alone in the table")
            for c in choices:
                _check_value(cls, key, c, where)
            space[key] = Param(choices=tuple(choices))
            continue
        tp = hints[key]
        if tp not in (int, float):
            raise UserError(
                f"{where}: a range needs a number key and {key} is "
                f"{getattr(tp, '__name__', tp)} (use {{choices = [...]}})"
            )
        low, high, log = spec.get("low"), spec.get("high"), spec.get("log", False)
        for name, v in (("low", low), ("high", high)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise UserError(f"{where}: {name} = {v!r} (must be a finite number)")
            if tp is int and not float(v).is_integer():
                raise UserError(f"{where}: {name} = {v!r} ({key} is an integer)")
        if not isinstance(log, bool):
            raise UserError(f"{where}: log = {log!r} (true or false)")
        if not low < high:
            raise UserError(f"{where}: low = {low!r} is not below high = {high!r} (swap them)")
        if log and low <= 0:
            raise UserError(f"{where}: log = true needs low > 0 (got {low!r})")
        _check_value(cls, key, tp(low), where)
        _check_value(cls, key, tp(high), where)
        space[key] = Param(low=tp(low), high=tp(high), log=log)
    return space


def _key_types(cls: type) -> dict[str, Any]:
    """Each config key's type, ``X`` for ``X | None`` (``tau_m``'s None means "from the
    task's clock"; a search samples numbers), ``float`` for a number that may also be a
    range (``tau_m``, ``tau_a``: a search samples one value for every neuron)."""
    out = {}
    for key, tp in typing.get_type_hints(cls).items():
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        union = typing.get_origin(tp) in (typing.Union, types.UnionType)
        if union and float in args:
            out[key] = float
        else:
            optional = union and len(args) == 1
            out[key] = args[0] if optional and type(None) in typing.get_args(tp) else tp
    return out


def _check_value(
    cls: type, key: str, value: Any, where: str, base: Mapping[str, Any] | None = None
) -> None:
    """A UserError unless the config accepts ``key = value`` (alone, over the defaults and
    ``base``)."""
    try:
        load_config(cls, base={"tuned": False, **(base or {}), key: value})
    except UserError as e:
        raise UserError(f"{where}: {e}") from None


def _check_algo(algo: str) -> None:
    if algo not in ALGOS:
        raise UserError(f"unknown algorithm {algo!r} (choose one of {', '.join(ALGOS)})")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


# ---- the study -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` leaves: the study's best trial and the files written."""

    best_trial: int
    best_value: float
    best_params: dict[str, Any]
    n_complete: int
    n_pruned: int
    n_failed: int
    best_toml: Path
    report: Path
    baseline_value: float | None = None
    """The defaults' score (the baseline trial); None without one or before it completed."""


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise UserError("snrl tune needs Optuna (install it: pip install 'snrl[tune]')") from None
    return optuna


@contextlib.contextmanager
def _quiet(optuna: Any) -> Iterator[None]:
    """Optuna's log at WARNING (no line per trial) while a study runs; restored after."""
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)


def _storage(optuna: Any, storage: str | None, out: Path) -> Any:
    """The study's storage: an RDB URL (``sqlite:///...``, ``postgresql://...``) as given,
    else a journal file (default ``out/study.log``)."""
    if storage is not None and "://" in storage:
        return storage
    path = Path(storage) if storage is not None else out / "study.log"
    if path.is_dir():
        raise UserError(f"storage {path} is a directory (pass a journal file or an RDB URL)")
    path.parent.mkdir(parents=True, exist_ok=True)
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    return JournalStorage(JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path))))


def _base_config(s: Mapping[str, Any]) -> dict[str, Any]:
    """The config values every trial shares (the space's values go over them)."""
    evals = max(1, s["n_evals"])
    return {
        "env": s["env"],
        "backbone": s["backbone"],
        "seed": s["seed"],  # each trial's seeds go over it (trial_seeds)
        "total_steps": s["steps"],
        "eval_interval": max(1, s["steps"] // evals),
        "tuned": False,  # the search starts from the built-in defaults, as best.toml applies
        "threads": 1,
        **s["base"],
    }


def _is_baseline(trial: Any) -> bool:
    """The study's baseline trial: the defaults, nothing sampled (``baseline=True``)."""
    return bool(trial.user_attrs.get("baseline"))


def _sample(trial: Any, space: Mapping[str, Param], cls: type) -> dict[str, Any]:
    """The trial's values: one sample per range or choice, the fixed values as they are (the
    baseline trial: the fixed values only)."""
    hints = _key_types(cls)
    values: dict[str, Any] = {}
    for key, p in space.items():
        if p.choices is None and p.low is None:
            values[key] = p.fixed
        elif _is_baseline(trial):
            continue
        elif p.choices is not None:
            values[key] = trial.suggest_categorical(key, list(p.choices))
        elif hints[key] is int:
            values[key] = trial.suggest_int(key, int(p.low), int(p.high), log=p.log)
        else:
            values[key] = trial.suggest_float(key, float(p.low), float(p.high), log=p.log)
    return values


def _score_column(row: Mapping[str, Any]) -> str:
    acc = row.get("eval_trial_accuracy")
    if isinstance(acc, float) and math.isfinite(acc):
        return "eval_trial_accuracy"
    return "eval_return_mean"


#: A worker stops after this many failed trials in a row (a study whose every trial fails
#: would otherwise sample forever).
MAX_FAILURES_IN_A_ROW = 3


def _objective(s: Mapping[str, Any], status: dict[str, Any]) -> Any:
    """The objective of one worker; ``status["error"]`` is the last trial's failure (None:
    it finished or was pruned)."""
    optuna = _optuna()

    def objective(trial: Any) -> float:
        status["error"] = None
        trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
        try:
            return _run_trial(s, trial, optuna)
        except optuna.TrialPruned:
            raise
        except Exception as e:  # a failing trial is recorded; the worker goes on
            status["error"] = describe(e)
            trial.set_user_attr("error", status["error"])
            raise

    return objective


class _ReportEvaluations(Callback):
    """Report each periodic evaluation of a trial's run to Optuna; stop the run (cleanly,
    last.pt written) when the pruner says so. The last evaluation scores the trial: a run
    that reached it is complete, never pruned."""

    def __init__(self, trial: Any, total_steps: int, offset: int = 0, last: bool = True) -> None:
        # a trial of several seeds reports seed j's evaluations at j * steps + env step, so
        # the pruner compares the same seed at the same step across trials
        self.trial, self.total_steps, self.offset, self.last = trial, total_steps, offset, last
        self.scores: list[float] = []
        self.pruned_at: int | None = None

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> bool | None:
        column = _score_column(stats)
        value = stats.get(column)
        if value is None or not math.isfinite(float(value)):
            return None  # not an evaluated row
        self.scores.append(float(value))
        self.trial.set_user_attr("metric", column)
        step = int(stats["env_step"])
        self.trial.report(self.scores[-1], step=self.offset + step)
        final = self.last and step >= self.total_steps
        if not final and not _is_baseline(self.trial) and self.trial.should_prune():
            self.pruned_at = step
            return False
        return None


def trial_seeds(s: Mapping[str, Any]) -> list[int]:
    """The seeds each trial trains: ``seed``, ``seed + 1``, ... (``seeds`` of them)."""
    return [s["seed"] + j for j in range(s.get("seeds", 1))]


def trial_dir(out: str | os.PathLike, number: int, seed: int | None = None) -> Path:
    """Trial ``number``'s run directory: ``trials/<number>``, or with several seeds per
    trial ``trials/<number>.seed<seed>`` for each seed."""
    name = str(number) if seed is None else f"{number}.seed{seed}"
    return Path(out) / "trials" / name


def _run_trial(s: Mapping[str, Any], trial: Any, optuna: Any) -> float:
    """Sample, train the trial's run directory for each seed with the pruner watching, and
    score: the mean over seeds of each seed's last ``last_k`` evaluations."""
    cls = ALGOS[s["algo"]].Config
    values = _sample(trial, s["space"], cls)
    seeds = trial_seeds(s)
    per_seed: list[float] = []
    for j, seed in enumerate(seeds):
        cfg = load_config(cls, base={**_base_config(s), **values, "seed": seed})
        run_dir = trial_dir(s["out"], trial.number, seed if len(seeds) > 1 else None)
        pruner = _ReportEvaluations(
            trial, cfg.total_steps, offset=j * cfg.total_steps, last=j == len(seeds) - 1
        )
        train_run(
            run_dir, algo=s["algo"], config=cfg, force=True, progress=False, callbacks=[pruner]
        )
        if pruner.pruned_at is not None:
            raise optuna.TrialPruned(f"pruned at env step {pruner.pruned_at} of seed {seed}")
        if not pruner.scores:
            raise UserError("the trial made no evaluation (raise --steps)")
        last = pruner.scores[-s["last_k"] :]
        per_seed.append(sum(last) / len(last))
        trial.set_user_attr("seed_scores", per_seed)
    return float(sum(per_seed) / len(per_seed))


def fail_stale_trials(study: Any) -> list[int]:
    """Mark failed the RUNNING trials of this study whose worker was a process of this
    machine that is gone (SIGKILLed, crashed), and enqueue their parameters again (the
    journal storage has no heartbeat). A dead worker of another machine cannot be seen from
    here: its trial stays RUNNING (an RDB storage with a heartbeat does not have this limit).

    Returns:
        The numbers of the trials marked failed.
    """
    optuna = _optuna()
    host = socket.gethostname()
    failed = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = str(t.user_attrs.get("worker", ""))
        name, _, pid = worker.rpartition(":")
        if name != host or not pid.isdigit() or _alive(int(pid)):
            continue
        if study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL):
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
            failed.append(t.number)
    return failed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (killed, not yet reaped by its parent) is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _work(s: Mapping[str, Any]) -> None:
    """One worker: trials until the study holds ``trials`` finished or running ones."""
    optuna = _optuna()
    study = optuna.load_study(
        study_name=s["study"],
        storage=_storage(optuna, s["storage"], Path(s["out"])),
        sampler=optuna.samplers.TPESampler(seed=None),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
    )
    status: dict[str, Any] = {"error": None}
    objective = _objective(s, status)
    failures = 0
    counted = (
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.PRUNED,
        optuna.trial.TrialState.RUNNING,
    )
    while True:
        fail_stale_trials(study)  # before each trial: a sibling that died is retried now
        if len(study.get_trials(deepcopy=False, states=counted)) >= s["trials"]:
            return
        study.optimize(objective, n_trials=1, catch=(Exception,))
        failures = failures + 1 if status["error"] else 0
        if failures >= MAX_FAILURES_IN_A_ROW:
            raise UserError(
                f"{failures} trials in a row failed, the last with {status['error']} (see "
                f"{Path(s['out']) / 'trials'}; fix the space or the fixed values)"
            )


def _work_quietly(s: Mapping[str, Any]) -> None:
    """:func:`_work` in a worker process or Ray task."""
    with _quiet(_optuna()):
        _work(s)


def _work_on_ray(s: Mapping[str, Any], jobs: int, address: str | None, gpus: float | None) -> None:
    """``jobs`` Ray tasks of one CPU and ``gpus`` GPUs each, each one :func:`_work` on the
    study's storage (so Ray's and local workers mix on one study; the journal file must be
    on a file system every node sees, or use an RDB URL)."""
    from snrl.experiments.backends import ray_gpu_limit, ray_session

    with ray_session(address, jobs) as ray:
        # not one trial fits: an error, not a hang
        ray_gpu_limit(ray.cluster_resources(), gpus, name="gpus_per_trial")
        task = ray.remote(num_cpus=1, num_gpus=gpus or 0, max_retries=0)(_work_quietly)
        refs = [task.remote(dict(s)) for _ in range(jobs)]
        errors = []
        for ref in refs:
            try:
                ray.get(ref)
            except Exception as e:  # a task whose worker died: its trial is retried later
                errors.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
        if len(errors) == len(refs):
            raise UserError(f"every Ray task failed: {errors[0]} (see the Ray logs)")


def tune(
    env: str,
    *,
    out: str | os.PathLike,
    algo: str = "ppo",
    backbone: str = "lif",
    trials: int = 20,
    steps: int = 50_000,
    space: str | os.PathLike | Mapping[str, Any] | None = None,
    storage: str | None = None,
    study: str | None = None,
    jobs: int = 1,
    seed: int = 0,
    seeds: int = 1,
    n_evals: int = 5,
    last_k: int = 3,
    config: Mapping[str, Any] | None = None,
    backend: str = "local",
    address: str | None = None,
    gpus_per_trial: float | None = None,
    baseline: bool = False,
) -> TuneResult:
    """Search hyperparameters of ``algo`` with ``backbone`` on ``env``.

    Args:
        env: Env id.
        out: The study's directory: ``trials/<number>/`` (run directories), ``study.log``
            (the default storage), ``best.toml``, ``report.md``, ``history.png``.
        algo: ppo | a2c | dqn.
        backbone: Any snrl backbone (spiking ones add the neuron keys to the default space).
        trials: Trials of the study in all (complete, pruned or running; failed ones do not
            count, and a dead worker's are retried), over every process working it.
        steps: Env steps per trial.
        space: A space file, or its table as a dict (None: :func:`default_space`).
        storage: A journal file path or an RDB URL (None: ``out/study.log``).
        study: The study name (None: ``<algo>-<backbone>-<env>``).
        jobs: Worker processes on this machine.
        seed: The seed of every trial (the trials differ in their parameters only).
        seeds: Runs per trial, on seeds ``seed``, ``seed + 1``, ...; the score is their
            mean (a setting must then do well on every seed, not rescue one). Each run is
            ``trials/<number>.seed<seed>`` (one seed: ``trials/<number>``).
        n_evals: Periodic evaluations per trial (``eval_interval = steps // n_evals``); the
            pruner sees each.
        last_k: The score is the mean of the last ``last_k`` evaluations.
        config: Config values every trial uses (under the sampled ones).
        backend: local (``jobs`` processes here) | ray (``jobs`` Ray tasks, each a worker
            on the same storage).
        address: Ray cluster address (None: a local Ray instance of ``jobs`` CPUs).
        gpus_per_trial: Ray: GPUs per task (0.5 packs two on a GPU); set ``device`` to
            ``cuda`` in ``config``.
        baseline: Make the study's first trial the defaults (``config`` and the space's
            fixed values, nothing sampled; never pruned; one of ``trials``), so the outputs
            say how far the best sampled trial is above (or below) them on the same seed.

    Returns:
        The best trial and the files written.

    Raises:
        UserError: Bad arguments, a space that does not fit the config, Optuna missing.
    """
    optuna = _optuna()
    with _quiet(optuna):
        return _tune(**{k: v for k, v in locals().items() if k != "optuna"})


def _tune(
    env: str,
    *,
    out: str | os.PathLike,
    algo: str,
    backbone: str,
    trials: int,
    steps: int,
    space: str | os.PathLike | Mapping[str, Any] | None,
    storage: str | None,
    study: str | None,
    jobs: int,
    seed: int,
    seeds: int,
    n_evals: int,
    last_k: int,
    config: Mapping[str, Any] | None,
    backend: str,
    address: str | None,
    gpus_per_trial: float | None,
    baseline: bool,
) -> TuneResult:
    optuna = _optuna()
    _check_algo(algo)
    for name, v, lo in (
        ("trials", trials, 1),
        ("steps", steps, 1),
        ("jobs", jobs, 1),
        ("seeds", seeds, 1),
        ("n_evals", n_evals, 1),
        ("last_k", last_k, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise UserError(f"{name}={v!r} (must be an integer >= {lo})")
    if backend not in ("local", "ray"):
        raise UserError(f"backend={backend!r} (local or ray)")
    if backend == "local" and (address is not None or gpus_per_trial):
        raise UserError("address and gpus_per_trial are for backend='ray' (add it)")
    if gpus_per_trial is not None and not (
        isinstance(gpus_per_trial, (int, float)) and 0 <= gpus_per_trial <= 64
    ):
        raise UserError(f"gpus_per_trial={gpus_per_trial!r} (a number of GPUs in [0, 64])")
    if not 1 <= last_k <= n_evals:
        raise UserError(f"last_k={last_k} (must be in [1, n_evals={n_evals}])")
    if isinstance(space, Mapping):
        space_ = check_space(space, algo, source="the space")
    elif space is not None:
        space_ = load_space(space, algo)
    else:
        space_ = default_space(algo, backbone)
    out_ = Path(out)
    s = dict(
        env=env,
        algo=algo,
        backbone=backbone,
        trials=trials,
        steps=steps,
        space=space_,
        storage=storage,
        study=study or f"{algo}-{backbone}-{env}",
        out=str(out_),
        seed=seed,
        seeds=seeds,
        n_evals=n_evals,
        last_k=last_k,
        base=dict(config or {}),
    )
    # one config with the space's lowest values: bad env ids and keys fail here, not per trial
    cls = ALGOS[algo].Config
    base = _base_config(s)
    ALGOS[algo](config=load_config(cls, base=base)).close()  # the env and its spaces fit
    for key, p in space_.items():  # each value of the space with the study's fixed values
        values = p.choices or ((p.fixed,) if p.low is None else (p.low, p.high))
        for v in values:
            _check_value(cls, key, v, f"{key} = {v!r} of the space", base)
    out_.mkdir(parents=True, exist_ok=True)
    created = optuna.create_study(
        study_name=s["study"],
        storage=_storage(optuna, storage, out_),
        direction="maximize",
        load_if_exists=True,
    )
    if baseline and not any(_is_baseline(t) for t in created.get_trials(deepcopy=False)):
        # the first trial when the study is new (processes starting one study at the same
        # moment may each add one: the outputs use the first to complete)
        created.enqueue_trial({}, user_attrs={"baseline": True})
    if backend == "ray":
        _work_on_ray(s, jobs, address, gpus_per_trial)
    elif jobs == 1:
        _work(s)
    else:
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_work_quietly, args=(s,)) for _ in range(jobs)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if all(p.exitcode != 0 for p in procs):
            raise UserError(
                f"every worker process failed (exit codes {[p.exitcode for p in procs]}; "
                "run with --jobs 1 to see why)"
            )
    return write_outputs(s)


# ---- outputs -------------------------------------------------------------------------------


def write_outputs(s: Mapping[str, Any]) -> TuneResult:
    """Write ``best.toml``, ``report.md`` and ``history.png`` for the study of ``s``."""
    optuna = _optuna()
    out = Path(s["out"])
    study = optuna.load_study(study_name=s["study"], storage=_storage(optuna, s["storage"], out))
    states = optuna.trial.TrialState
    done = [t for t in study.get_trials(deepcopy=False) if t.state == states.COMPLETE]
    if not done:
        raise UserError(
            f"no trial of study {s['study']!r} completed (see {out / 'trials'}; raise --steps "
            "or check the env)"
        )
    sampled = [t for t in done if not _is_baseline(t)]
    if not sampled:
        raise UserError(
            f"no sampled trial of study {s['study']!r} completed, only the defaults' (raise "
            "--trials)"
        )
    best = max(sampled, key=lambda t: t.value)
    base = next((t for t in done if _is_baseline(t)), None)
    versus = _versus_defaults(best, base) if base is not None else ""
    fixed = {k: p.fixed for k, p in s["space"].items() if p.low is None and p.choices is None}
    values = {**fixed, **best.params}
    metric = best.user_attrs.get("metric", "eval_return_mean")
    lines = [
        f"# snrl tune: study {s['study']!r}, best of {len(sampled)} complete trial(s)",
        f"# trial {best.number}, {_seeds_text(s)}, {s['steps']} env steps: score "
        f"{best.value:.6g} ({_score_text(s, metric)}{_per_seed(best)})",
        *([f"# {versus}"] if versus else []),
        f"# reproduce: snrl tune --reproduce {out} --trial {best.number}",
        f'["{s["env"]}".{s["backbone"]}]',
        *(f"{k} = {_toml_value(v)}" for k, v in values.items()),
    ]
    best_toml = out / "best.toml"
    atomic_write_text(best_toml, "\n".join(lines) + "\n")
    plot = out / "history.png"
    title = f"snrl tune · {s['algo'].upper()} · {s['backbone']} · {s['env']} · study {s['study']}"
    _plot_history(study.get_trials(deepcopy=False), plot, metric, title)
    importances, evaluator = _importances(optuna, study, len(done))
    report = out / "report.md"
    atomic_write_text(report, _report(s, study, done, importances, evaluator, metric, versus))
    trials = study.get_trials(deepcopy=False)
    return TuneResult(
        best_trial=best.number,
        best_value=float(best.value),
        best_params=dict(best.params),
        n_complete=len(done),
        n_pruned=sum(t.state == states.PRUNED for t in trials),
        n_failed=sum(t.state == states.FAIL for t in trials),
        best_toml=best_toml,
        report=report,
        baseline_value=None if base is None else float(base.value),
    )


def _seeds_text(s: Mapping[str, Any]) -> str:
    """``seed 3`` or ``seeds 3-5`` (each a run of its own)."""
    seeds = trial_seeds(s)
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def _score_text(s: Mapping[str, Any], metric: str) -> str:
    """How a trial is scored, in words."""
    text = f"mean of the last {s['last_k']} evaluations of {metric}"
    return text if len(trial_seeds(s)) == 1 else f"{text}, averaged over the seeds"


def _per_seed(trial: Any) -> str:
    """``; per seed 0.9 / 0.95`` for a trial of several seeds, else empty."""
    scores = trial.user_attrs.get("seed_scores") or []
    return f"; per seed {' / '.join(f'{v:.4g}' for v in scores)}" if len(scores) > 1 else ""


def _versus_defaults(best: Any, base: Any) -> str:
    """One line: the best sampled trial against the defaults' trial, on the same seeds."""
    diff = best.value - base.value
    verdict = (
        f"{diff:+.4g} over them"
        if diff > 0
        else "NOT above them: the defaults did as well on the study's seed(s); keep them"
    )
    return (
        f"the defaults (trial {base.number}, nothing sampled) scored {base.value:.6g}; "
        f"the best trial {best.value:.6g}, {verdict}"
    )


def _importances(optuna: Any, study: Any, n_done: int) -> tuple[dict[str, float], str]:
    """Parameter importances: fANOVA when scikit-learn is installed, else Optuna's default
    evaluator (PED-ANOVA); empty below 2 complete trials."""
    if n_done < 2:
        return {}, "none (fewer than 2 complete trials)"
    try:
        import sklearn  # noqa: F401

        evaluator, name = optuna.importance.FanovaImportanceEvaluator(seed=0), "fANOVA"
    except ImportError:
        evaluator, name = None, "PED-ANOVA (Optuna's default; fANOVA needs scikit-learn)"
    try:
        with warnings.catch_warnings(record=True) as caught:  # the report says them
            warnings.simplefilter("always")
            found = dict(optuna.importance.get_param_importances(study, evaluator=evaluator))
    except (RuntimeError, ValueError) as e:  # e.g. a parameter that never varied
        return {}, f"{name}: not computed ({e})"
    notes = "; ".join(dict.fromkeys(str(w.message) for w in caught))
    return found, f"{name}; note: {notes}" if notes else name


def _plot_history(trials: list[Any], path: Path, metric: str, title: str) -> Any:
    """The study's scores by trial, sized and lettered like ``learning_curve.png`` (1600 x
    1000 px at 100 dpi, :data:`snrl.training.plots.FONT`); returns the figure."""
    from snrl.plot._util import new_figure
    from snrl.training.plots import DPI, FONT, SIZE, fit_title

    fig = new_figure(*SIZE, dpi=DPI)
    ax = fig.add_subplot()
    xs = [t.number for t in trials if t.value is not None]
    ys = [t.value for t in trials if t.value is not None]
    ax.scatter(xs, ys, s=60, label="trial score")
    best, running = [], -math.inf
    for y in ys:
        running = max(running, y)
        best.append(running)
    ax.step(xs, best, where="post", lw=2.5, label="best so far")
    for t in trials:
        if _is_baseline(t) and t.value is not None:
            ax.axhline(t.value, color="0.4", ls="--", lw=2, label="the defaults")
            break
    ax.set_xlabel("trial", fontsize=FONT["label"])
    ax.set_ylabel(f"score (last evaluations of {metric})", fontsize=FONT["label"])
    ax.tick_params(labelsize=FONT["tick"])
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="lower right", fontsize=FONT["tick"])
    heading = ax.set_title(title, fontsize=FONT["title"])
    fig.tight_layout()
    if fit_title(heading, fig):
        fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=DPI)
    os.replace(tmp, path)
    return fig


def _report(
    s: Mapping[str, Any],
    study: Any,
    done: list[Any],
    importances: Mapping[str, float],
    evaluator: str,
    metric: str,
    versus: str = "",
) -> str:
    trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
    lines = [
        f"# snrl tune: {s['algo']} {s['backbone']} on {s['env']}",
        "",
        f"Study `{s['study']}`: {len(trials)} trial(s) "
        f"({', '.join(f'{n} {k}' for k, n in sorted(counts.items()))}), {s['steps']} env "
        f"steps each, {_seeds_text(s)}. Score: mean of the last {s['last_k']} of "
        f"{s['n_evals']} evaluations of `{metric}`"
        f"{'' if len(trial_seeds(s)) == 1 else ', averaged over the seeds'}.",
        *(["", versus[0].upper() + versus[1:] + "."] if versus else []),
        "",
        "## Best trials",
        "",
        "| trial | score | parameters |",
        "|---|---|---|",
    ]
    for t in sorted(done, key=lambda t: -t.value)[:5]:
        params = ", ".join(f"{k}={_toml_value(v)}" for k, v in t.params.items())
        params = params if not _is_baseline(t) else "the defaults (nothing sampled)"
        lines.append(f"| {t.number} | {t.value:.6g} | {params} |")
    failed = [t for t in trials if t.state.name == "FAIL"]
    if failed:
        lines += ["", "## Failed trials", ""]
        lines += [
            f"- trial {t.number}: {t.user_attrs.get('error', 'its worker died')}" for t in failed
        ]
    lines += ["", f"## Parameter importances ({evaluator})", ""]
    if importances:
        lines += ["| parameter | importance |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in importances.items()]
    else:
        lines.append("Not computed.")
    lines += ["", "## History", "", "![history](history.png)", ""]
    return "\n".join(lines)


# ---- reproduce -----------------------------------------------------------------------------


def reproduce(
    study_dir: str | os.PathLike, trial: int, *, seed: int | None = None, progress: bool = False
) -> Path:
    """Re-run trial ``trial`` of the study in ``study_dir`` from its saved config (same seed,
    same steps) into ``study_dir/reproduce/<trial>``; its metrics.csv learning columns match
    the original's (on the same machine and torch build). A trial of several seeds
    (``trials/<trial>.seed<S>``) re-runs the run of ``seed`` (None: its first) into
    ``reproduce/<trial>.seed<S>``.

    Returns:
        The new run directory.

    Raises:
        UserError: No such trial (or seed) directory, or no readable config.json in it.
    """
    runs = {}
    for p in (Path(study_dir) / "trials").glob(f"{trial}.seed*"):
        tail = p.name[len(f"{trial}.seed") :]
        if tail.isdigit():
            runs[int(tail)] = p
    if runs:
        pick = min(runs) if seed is None else seed
        if pick not in runs:
            raise UserError(
                f"trial {trial} of {study_dir} has no seed {seed} (its seeds: "
                f"{', '.join(map(str, sorted(runs)))})"
            )
        src_dir = runs[pick]
    elif seed is not None and trial_dir(study_dir, trial).is_dir():
        raise UserError(f"trial {trial} of {study_dir} is one run (one seed): leave out --seed")
    else:
        src_dir = trial_dir(study_dir, trial)
    src = src_dir / "config.json"
    if not src.is_file():
        raise UserError(f"no trial {trial} in {study_dir} ({src} is missing; see its trials/)")
    data = load_json(src.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("algo") not in ALGOS:
        raise UserError(f"{src} is not an snrl run config (re-run the trial with snrl tune)")
    algo = data.pop("algo")
    cfg = config_from_dict(ALGOS[algo].Config, data)
    dest = Path(study_dir) / "reproduce" / src_dir.name
    train_run(dest, algo=algo, config=cfg, force=True, progress=progress)
    return dest
