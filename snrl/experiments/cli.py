"""Sub-commands of ``snrl`` that belong to experiments (``compare``, ``plot``)."""

from __future__ import annotations

import argparse
import sys


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["tau_m=0.01,0.02", "hidden_size=16"]`` -> ``{"tau_m": ["0.01", "0.02"], ...}``.

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
        vals = _csv_list(values)
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
    c.add_argument("--env", required=True, help="gymnasium id or module:Class")
    c.add_argument("--algo", default="ppo", help="ppo | dqn (default ppo)")
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
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--config", default=None, metavar="FILE.toml")
    c.add_argument("--workers", type=int, default=None, help="parallel runs (default: cores)")
    c.add_argument("--backend", choices=("local", "ray"), default="local")
    c.add_argument("--address", default=None, help="Ray cluster address (default: local Ray)")
    c.add_argument(
        "--gpus-per-run",
        type=float,
        default=None,
        metavar="F",
        help="Ray: GPUs per run (0.25 packs four runs on a GPU); with --set device=cuda",
    )
    c.add_argument(
        "--threshold", type=float, default=None, help="solved return (default: env spec)"
    )
    c.add_argument("--eval-episodes", type=int, default=20)
    c.add_argument("--eval-seed", type=int, default=123)
    c.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    c.add_argument("--quiet", action="store_true")
    c.set_defaults(func=cmd_compare)

    p = sub.add_parser("plot", help="training-history figure of a run directory")
    p.add_argument("run_dir")
    p.add_argument("--out", default=None, help="image path (default RUN_DIR/history.png)")
    p.set_defaults(func=cmd_plot)
