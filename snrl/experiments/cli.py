"""Sub-commands of ``snrl`` that belong to experiments (``compare``, ``plot``, ``tune``)."""

from __future__ import annotations

import argparse
import sys

from snrl.config import add_set_flag
from snrl.experiments.spec import CompareSpec


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _grid_values(text: str) -> list[str]:
    """``"0.01,0.02"`` -> ``["0.01", "0.02"]``; commas inside brackets stay in their value
    (``"[0.1,2],1.5"`` -> ``["[0.1,2]", "1.5"]``: a range of ``tau_a`` is one value)."""
    values, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            values.append(text[start:i].strip())
            start = i + 1
    return [v for v in values if v]


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["tau_m=0.01,0.02", "hidden_size=16"]`` -> ``{"tau_m": ["0.01", "0.02"], ...}``;
    a bracketed value keeps its commas (``tau_a=[0.1,2],1.5``: a range and a number).

    Raises:
        UserError: an item without ``=``, an empty value list, a repeated key.
    """
    from snrl.errors import UserError

    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"bad --grid item {item!r} (use key=v1,v2, e.g. tau_m=0.01,0.02)")
        vals = _grid_values(values)
        if not vals:
            raise UserError(f"--grid {key} has no values (use {key}=v1,v2,...)")
        if key in grid:
            raise UserError(f"--grid {key} given twice (list all its values in one item)")
        grid[key] = vals
    return grid


def spec_from_args(args: argparse.Namespace):
    """The :class:`~snrl.experiments.spec.CompareSpec` that ``snrl compare``'s flags describe."""
    from snrl.experiments.spec import spec_from_strings

    return spec_from_strings(
        args.env,
        out=args.out,
        algo=args.algo,
        sets=list(args.set),
        grid=parse_grid(args.grid),
        config_file=args.config,
        backbones=_csv_list(args.backbones),
        seeds=args.seeds,
        steps=args.steps,
        threshold=args.threshold,
        eval_episodes=args.eval_episodes,
        eval_seed=args.eval_seed,
        workers=args.workers,
        backend=args.backend,
        address=args.address,
        retry_failed=args.retry_failed,
        gpus_per_run=args.gpus_per_run,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    """``snrl compare``: train, evaluate and summarize every (backbone, grid point, seed)."""
    import torch

    from snrl.experiments.comparison import compare

    torch.set_num_threads(1)
    try:
        res = compare(spec_from_args(args), verbose=not args.quiet)
    except KeyboardInterrupt:
        print("error: interrupted (run the same command again to resume)", file=sys.stderr)
        return 130
    n_failed = sum(r.get("status") != "done" for r in res.runs)
    out = res.out
    print(
        f"wrote {out / 'report.md'}, {out / 'summary.md'}, {out / 'summary.csv'}, "
        f"{out / 'curves.png'} ({len(res.runs) - n_failed}/{len(res.runs)} runs done)"
    )
    return 1 if n_failed else 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``snrl plot RUN_DIR``: the training-history figure of a run."""
    from snrl.experiments.plots import plot_history

    print(f"wrote {plot_history(args.run_dir, args.out)}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    """``snrl tune``: a hyperparameter study (docs/tune.md), or ``--reproduce`` one trial."""
    from snrl.errors import UserError

    if args.reproduce is not None:
        from snrl.experiments.tune import reproduce

        if args.trial is None:
            raise UserError("--reproduce needs --trial K (the trial number to re-run)")
        dest = reproduce(args.reproduce, args.trial, seed=args.seed, progress=not args.quiet)
        print(f"wrote {dest}")
        return 0
    missing = [f for f in ("env", "trials", "steps", "out") if getattr(args, f) is None]
    if missing:
        raise UserError(
            f"snrl tune needs {', '.join('--' + m for m in missing)} (or --reproduce DIR --trial K)"
        )
    import torch

    from snrl.agents import ALGOS
    from snrl.config import load_config, parse_set
    from snrl.experiments.tune import tune

    if args.algo not in ALGOS:
        raise UserError(f"unknown algorithm {args.algo!r} (choose one of {', '.join(ALGOS)})")
    given = [parse_set(item)[0] for item in args.set]
    fixed = load_config(ALGOS[args.algo].Config, sets=list(args.set))
    torch.set_num_threads(1)
    res = tune(
        args.env,
        out=args.out,
        algo=args.algo,
        backbone=args.backbone,
        trials=args.trials,
        steps=args.steps,
        space=args.space,
        storage=args.storage,
        study=args.study,
        jobs=args.jobs,
        seed=0 if args.seed is None else args.seed,
        seeds=args.seeds,
        n_evals=args.evals,
        last_k=args.last_k,
        config={k: getattr(fixed, k) for k in given},
        backend=args.backend,
        address=args.address,
        gpus_per_trial=args.gpus_per_trial,
        baseline=args.baseline,
    )
    defaults = "" if res.baseline_value is None else f"; the defaults {res.baseline_value:.6g}"
    print(
        f"best trial {res.best_trial}: score {res.best_value:.6g}{defaults} ({res.n_complete} "
        f"complete, {res.n_pruned} pruned, {res.n_failed} failed); wrote {res.best_toml}, "
        f"{res.report}"
    )
    return 0


def _ray_flags(
    p: argparse.ArgumentParser, unit: str, example: str, backend_help: str | None = None
) -> None:
    """``--backend local|ray``, ``--address`` and ``--gpus-per-<unit>`` (a run or a trial)."""
    p.add_argument("--backend", choices=("local", "ray"), default="local", help=backend_help)
    p.add_argument("--address", default=None, help="Ray cluster address (default: local Ray)")
    p.add_argument(
        f"--gpus-per-{unit}",
        type=float,
        default=None,
        metavar="F",
        help=f"Ray: GPUs per {unit} ({example}); with --set device=cuda",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register the experiment sub-commands on the ``snrl`` parser."""
    c = sub.add_parser(
        "compare",
        help="multi-seed comparison of backbones (spiking vs ANN), with ablation grids",
        description=(
            "Train every (backbone, grid point, seed) into DIR/runs/<name> (ordinary run "
            "directories), evaluate them, and write curves.png/.svg, summary.csv/.md, "
            "pairwise.csv and report.md into DIR (a new or empty directory, or an earlier "
            "comparison: its compare.json). Re-running skips finished runs and resumes "
            "killed ones. Exit status: 0 all runs done, 1 some runs failed (recorded in "
            "report.md), 2 bad input (checked before the first run; nothing is written)."
        ),
    )
    c.set_defaults(func=cmd_compare)
    c.add_argument("--env", required=True, help="gymnasium id or module:Class")
    c.add_argument("--algo", default="ppo", help="ppo | a2c | dqn (default ppo)")
    c.add_argument("--backbones", default="lif,mlp", help="comma-separated (default lif,mlp)")
    c.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    c.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    c.add_argument("--out", required=True, help="comparison directory")
    c.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="config values to cross (repeatable; the runs cover the product)",
    )
    add_set_flag(c)
    c.add_argument("--config", default=None, metavar="FILE.toml")
    c.add_argument("--workers", type=int, default=None, help="parallel runs (default: cores)")
    _ray_flags(c, "run", "0.25 packs four runs on a GPU")
    c.add_argument(
        "--threshold", type=float, default=None, help="solved return (default: env spec)"
    )
    c.add_argument("--eval-episodes", type=int, default=CompareSpec.eval_episodes)
    c.add_argument("--eval-seed", type=int, default=CompareSpec.eval_seed)
    c.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    c.add_argument("--quiet", action="store_true")

    p = sub.add_parser("plot", help="training-history figure of a run directory")
    p.add_argument("run_dir")
    p.add_argument("--out", default=None, help="image path (default RUN_DIR/history.png)")
    p.set_defaults(func=cmd_plot)

    t = sub.add_parser(
        "tune",
        help="hyperparameter search on Optuna (needs the [tune] extra)",
        description=(
            "Sample config values from a search space, train each trial into "
            "OUT/trials/<number> (ordinary run directories) and score it by its last "
            "periodic evaluations; a median pruner stops poor trials early. The study is "
            "kept in --storage (default OUT/study.log), which several snrl tune processes "
            "may share. Writes OUT/best.toml (zoo format), OUT/report.md, OUT/history.png. "
            "Exit status: 0 done, 2 bad input."
        ),
    )
    t.add_argument("--env", default=None, help="gymnasium id")
    t.add_argument("--algo", default="ppo", help="ppo | a2c | dqn (default ppo)")
    t.add_argument("--backbone", default="lif", help="backbone (default lif)")
    t.add_argument("--trials", type=int, default=None, help="trials of the study in all")
    t.add_argument("--steps", type=int, default=None, help="env steps per trial")
    t.add_argument("--space", default=None, metavar="FILE.toml", help="search space file")
    t.add_argument("--storage", default=None, metavar="PATH|URL", help="journal file or RDB URL")
    t.add_argument("--study", default=None, help="study name (default algo-backbone-env)")
    t.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    t.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of every trial (default 0); with --reproduce: which seed's run to re-run",
    )
    t.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="runs per trial, on seeds SEED, SEED+1, ...; the score is their mean (default 1)",
    )
    t.add_argument("--evals", type=int, default=5, help="evaluations per trial (default 5)")
    t.add_argument(
        "--last-k", type=int, default=3, help="score: mean of the last K evaluations (3)"
    )
    add_set_flag(t, help="fixed config value")
    t.add_argument(
        "--baseline",
        action="store_true",
        help="the first trial trains the defaults (nothing sampled): best.toml and report.md "
        "say whether the best trial beat them",
    )
    _ray_flags(
        t,
        "trial",
        "0.5 packs two on a GPU",
        backend_help="local: --jobs processes here; ray: --jobs Ray tasks on the same --storage",
    )
    t.add_argument("--out", default=None, help="study directory")
    t.add_argument("--reproduce", default=None, metavar="DIR", help="re-run a trial of DIR")
    t.add_argument("--trial", type=int, default=None, help="with --reproduce: trial number")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=cmd_tune)
