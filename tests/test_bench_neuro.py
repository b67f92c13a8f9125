"""benchmarks/bench_neuro.py's agents against what ``snrl train`` runs: ``zoo`` is the no-flag
default field for field, ``lif`` is not (8 envs, not 16). A "no-flag default" number measured
with ``--only lif`` is a different training config (docs/neuro.md, "Time profiles")."""

from __future__ import annotations

import dataclasses

import snrl
from snrl.cli.commands import _train_config
from snrl.cli.parser import build_parser
from tests.bench_scripts import load_benchmark

TASK = "GoNogo-v0"
NO_EFFECT = {"eval_interval"}  # periodic evaluations do not change the trained weights


def _differences(agent: str) -> dict[str, tuple]:
    """The config fields where the benchmark's ``agent`` differs from ``snrl train --env
    TASK`` with no other flag, both resolved on the task's 100 ms clock."""
    bench = load_benchmark("bench_neuro")
    args = build_parser().parse_args(["train", "--env", TASK, "--seed", "4", "--out", "unused"])
    cli = dataclasses.asdict(_train_config(args).resolve_time(0.1))
    algo = snrl.PPO(TASK, seed=4, eval_interval=0, **bench._agent_kwargs(agent, n_envs=8))
    algo.close()
    ours = dataclasses.asdict(algo.config)
    assert set(bench.CONFIG_KEYS) <= set(ours)  # what each result records is a config field
    return {k: (cli[k], v) for k, v in ours.items() if v != cli[k] and k not in NO_EFFECT}


def test_zoo_agent_is_the_no_flag_default() -> None:
    assert _differences("zoo") == {}


def test_lif_agent_differs_from_the_default_in_n_envs_only() -> None:
    diff = _differences("lif")
    tuned = {k: diff.pop(k) for k in ("tuned", "tuned_from")}  # no entry for the task
    assert tuned["tuned"] == (True, False)
    assert diff == {"n_envs": (16, 8)}  # tau_m = readout_tau_m = 1 s: the resolved default
