"""The ``snrl`` command: demo, train, eval, render, analyze, serve-env, dashboard.

Errors a user can cause end with exit code 2 and one line ``error: <what> (<how to fix>)`` on
stderr, without a traceback: :func:`main` is the one place that turns them into that line
(a ``ValueError``, which :class:`~snrl.errors.UserError` is, an ``OSError``, given the path
and a hint by its errno, and ``MemoryError``). Anything else is a bug and keeps its
traceback; ``SNRL_DEBUG=1`` shows the traceback of a user error too.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from snrl.agents import ALGOS, load_algo
from snrl.agents.base import MAX_ENVS, MAX_SEED, MAX_TOTAL_STEPS, check_int
from snrl.config import config_from_dict, config_to_dict, load_config
from snrl.errors import UserError, first_line
from snrl.experiments.runner import train_run
from snrl.io import write_json_atomic
from snrl.networks.factory import BACKBONES, SPIKING
from snrl.training.checkpoint import load_checkpoint
from snrl.training.rundir import (
    DEMO_FILES,
    MANIFEST,
    claim_files,
    is_run_dir,
    read_manifest,
    remove_stale_temps,
)
from snrl.zoo import resolve as resolve_tuned

VIDEO_EXTS = (".gif", ".mp4")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"error: {_one_line(message)} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _int_in(lo: int, hi: int):
    """An argparse type: an integer in ``[lo, hi]`` (``1e3``-style text is refused)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer (pass one in [{lo}, {hi}])"
            ) from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range (pass one in [{lo}, {hi}])")
        return value

    return parse


SEED = _int_in(0, MAX_SEED)
THREADS = _int_in(1, 1024)
EPISODES = _int_in(1, MAX_ENVS)  # one env per episode is built at once
FPS = _int_in(1, 1000)

#: How to fix an OSError, by errno (the path is named in the message).
_OS_HINTS = {
    errno.ENOSPC: "the disk is full; free some space or choose another path",
    errno.EDQUOT: "the disk quota is used up; free some space or choose another path",
    errno.EACCES: "check its permissions or choose another path",
    errno.EPERM: "check its permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose another path",
    errno.ENOENT: "check that the path exists",
    errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
    errno.EISDIR: "it is a directory; pass a file name",
    errno.EEXIST: "remove it or choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOTEMPTY: "the directory is not empty; choose another path",
    errno.EMFILE: "too many open files; raise `ulimit -n` or lower n_envs",
    errno.ENOMEM: "out of memory; lower n_envs, hidden_size or buffer_size",
    errno.EPIPE: "a helper process (e.g. ffmpeg) stopped early; check free disk space",
}


def _one_line(text: str) -> str:
    """``text`` with its lines joined, so a message is never cut at a newline."""
    return " ".join(text.split())


def error_message(e: BaseException) -> str:
    """The one line ``snrl`` prints (after ``error: ``) for a user error ``e``.

    An ``OSError`` with an errno becomes ``"<reason>: <path> (<hint>)"``, e.g.
    ``"Permission denied: /data/run (check its permissions or choose another path)"``.
    """
    if isinstance(e, OSError) and e.errno is not None and e.strerror:
        paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
        what = f"{e.strerror}: {' -> '.join(paths)}" if paths else e.strerror
        hint = _OS_HINTS.get(e.errno, f"errno {errno.errorcode.get(e.errno, e.errno)}")
        return f"{what} ({hint})"
    if isinstance(e, MemoryError):
        return "out of memory (lower n_envs, hidden_size, n_steps or buffer_size)"
    return _one_line(str(e)) or type(e).__name__


def _checkpoint_path(run_dir: str, which: str) -> Path:
    d = Path(run_dir)
    if not d.is_dir():
        raise UserError(f"run directory {d} does not exist (pass the --out of `snrl train`)")
    path = d / "checkpoints" / f"{which}.pt"
    if not path.exists():
        raise UserError(
            f"{path} does not exist (train first, or pass --checkpoint last/best that exists)"
        )
    return path


def _video_path(out: str) -> Path:
    path = Path(out)
    if path.suffix.lower() not in VIDEO_EXTS:
        raise UserError(f"--out {out} has an unknown extension (use .gif or .mp4)")
    return path


def _flag_items(args: argparse.Namespace) -> list[str]:
    """The config flags of ``snrl train`` as ``key=value`` items (those given)."""
    flags: list[str] = []
    for key, value in (
        ("env", args.env),
        ("env_kwargs", args.env_kwargs),
        ("backbone", args.backbone),
        ("hidden_size", args.hidden),
        ("force_dale_law", args.dale),
        ("total_steps", args.steps),
        ("n_envs", args.n_envs),
        ("seed", args.seed),
        ("threads", getattr(args, "threads", None)),
        ("tuned", False if getattr(args, "no_tuned", False) else None),
    ):
        if value is not None:
            flags.append(f"{key}={value}")
    return flags


def _train_config(args: argparse.Namespace):
    algo = args.algo or "ppo"
    # precedence: defaults < tuned settings (snrl/zoo) < --config file < flags < --set
    cfg, entry = resolve_tuned(
        ALGOS[algo].Config, algo, toml_path=args.config, sets=[*_flag_items(args), *args.set]
    )
    if entry is not None:
        print(f"tuned settings: {cfg.tuned_from} (--no-tuned: the defaults)", file=sys.stderr)
    return cfg


#: What ``--resume`` may change: the run's length. Everything else is the saved config.
#: what `snrl eval` prints (DESIGN.md's contract; evaluate() also has mean_length, spike_rates)
EVAL_KEYS = ("mean_return", "std_return", "n_episodes", "returns")
#: what `snrl eval` adds on a trial task (NeuroGym; docs/neuro.md)
EVAL_TRIAL_KEYS = ("n_trials", "accuracy", "accuracy_by_condition")
#: the figure `snrl eval` writes into the run directory of a two-choice coherence task
PSYCHOMETRIC_PNG = "psychometric.png"
RESUME_CHANGEABLE = ("total_steps", "threads")
#: train flags that --resume takes without comparing them with config.json
RESUME_FLAGS_FREE = ("total_steps", "env", "threads")


def _resume_steps(args: argparse.Namespace) -> int | None:
    """The env steps to resume to; refuse flags that would change the saved config.

    Flags equal to the saved values are fine (the same command line plus ``--resume``);
    ``--steps`` (``total_steps``) may change; any other difference is refused.
    """
    steps = args.steps
    # --steps may change and --env names the env to load the run with (train_run checks it)
    items = [i for i in _flag_items(args) if i.split("=", 1)[0] not in RESUME_FLAGS_FREE]
    if not (args.algo or args.config or args.set or items):
        return steps
    path = Path(args.out) / "config.json"
    if not Path(args.out).is_dir():
        return steps  # train_run says what is missing
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        algo = saved.pop("algo")
        cls = ALGOS[algo].Config
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"cannot compare the flags with the saved config {path} (it is missing or not "
            "written by snrl; resume without config flags)"
        ) from None
    if args.algo is not None and args.algo != algo:
        raise UserError(
            f"--algo {args.algo} but the run in {args.out} is {algo} (--resume continues the "
            "saved config: drop --algo, or start a new run with another --out)"
        )
    old = config_from_dict(cls, saved)
    new = load_config(
        cls, toml_path=args.config, sets=[*items, *args.set], base=config_to_dict(old)
    )
    changed = [
        f"{k}={getattr(new, k)!r} (saved {getattr(old, k)!r})"
        for k in config_to_dict(old)
        if k not in RESUME_CHANGEABLE and getattr(new, k) != getattr(old, k)
    ]
    if changed:
        raise UserError(
            f"--resume continues the saved config of {args.out}, but the flags change "
            f"{', '.join(changed)} (drop them to resume, or start a new run with another --out)"
        )
    if steps is None and new.total_steps != old.total_steps:
        steps = new.total_steps
    return steps


def cmd_train(args: argparse.Namespace) -> int:
    if args.trust_env_module and not args.resume:
        raise UserError(
            "--trust-env-module applies to --resume only (a fresh run makes the --env you name)"
        )
    if args.resume:
        steps = _resume_steps(args)
        if steps is not None:
            check_int("--steps", steps, 1, MAX_TOTAL_STEPS)
        obj = train_run(
            args.out,
            resume=True,
            total_steps=steps,
            threads=args.threads,
            progress=not args.quiet,
            env=args.env,
            trust_env_module=args.trust_env_module,
        )
    else:
        config = _train_config(args)
        obj = train_run(
            args.out,
            algo=args.algo or "ppo",
            config=config,
            force=args.force,
            progress=not args.quiet,
        )
    print(f"run directory: {args.out} (checkpoints/best.pt, metrics.csv, learning_curve.png)")
    cfg = getattr(obj, "config", None)
    if cfg is not None and cfg.backbone in SPIKING:  # docs/architecture.md, "Time"
        print(f"neuron time: dt={cfg.dt:g} s, substeps={cfg.substeps} per env step")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    algo = load_algo(
        _checkpoint_path(args.run_dir, args.checkpoint),
        env=args.env,
        trust_env_module=args.trust_env_module,
    )
    if args.lesson is not None and algo.config.curriculum is None:
        raise UserError(
            f"--lesson {args.lesson}: the run in {args.run_dir} has no curriculum (drop --lesson)"
        )
    res = algo.evaluate(n_episodes=args.episodes, seed=args.seed, lesson=args.lesson)
    # a run with a curriculum also says which lesson was evaluated (default: the final one)
    out = {k: res[k] for k in (*EVAL_KEYS, "lesson") if k in res}
    if "n_trials" in res:  # a trial task (NeuroGym): accuracy, and for decisions the curve
        out.update({k: res[k] for k in EVAL_TRIAL_KEYS})
        out.update(_psychometric(Path(args.run_dir), res["trials"], algo.config.env))
    print(json.dumps(_json_safe(out)))
    return 0


def _psychometric(run_dir: Path, trials: list, env: str) -> dict[str, Any]:
    """``{"psychometric": numbers, "psychometric_png": path}`` of a two-choice task with
    coherences (the figure is written into the run directory); ``{}`` for other tasks. Too few
    answered trials for a fit (an agent that barely trained) is not an error of the eval: the
    accuracy is still printed, with ``"psychometric": null`` and the reason on stderr."""
    from snrl.analysis.psychometric import has_psychometric, psychometric_curve, save_psychometric

    if not has_psychometric(trials):
        return {}
    try:
        curve = psychometric_curve(trials)
    except UserError as e:
        print(f"snrl: no psychometric curve: {first_line(e)}", file=sys.stderr)
        return {"psychometric": None}
    png = run_dir / PSYCHOMETRIC_PNG
    if is_run_dir(run_dir):
        claim_files(run_dir, [PSYCHOMETRIC_PNG])
    save_psychometric(curve, png, title=f"{env}: {sum(p['n'] for p in curve['points'])} trials")
    return {"psychometric": curve, "psychometric_png": str(png)}


def _json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats as None (the printed JSON stays strict JSON)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _render(
    algo: Any, out: Path, *, seed: int, fps: int, activity: bool, scale: float = 1.0
) -> Path:
    from snrl.render import TrajectoryRenderer

    traj = algo.rollout(seed=seed, record=True)
    return TrajectoryRenderer(traj, activity=activity, scale=scale).to_file(out, fps=fps)


def cmd_render(args: argparse.Namespace) -> int:
    out = _video_path(args.out)
    algo = load_algo(
        _checkpoint_path(args.run_dir, "best"), env=args.env, trust_env_module=args.trust_env_module
    )
    # temp videos of renders killed earlier (untouched for a minute: not a live writer's)
    remove_stale_temps(out.parent, min_age_s=60.0)
    written = _render(
        algo, out, seed=args.seed, fps=args.fps, activity=not args.no_activity, scale=args.scale
    )
    print(f"wrote {written}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Train a Dale-constrained LIF PPO agent on CartPole-v1, evaluate, plot and render."""
    if not args.out.strip():  # Path("") would be the current directory
        raise UserError("--out '' is empty (pass a directory name, e.g. --out snrl-demo)")
    out = Path(args.out)
    replace = is_run_dir(out)  # its own earlier demo (or run): replaced, and only its files
    if replace:
        listed = read_manifest(out) or []
        clash = [n for n in DEMO_FILES if (out / n).exists() and n not in listed]
        if clash:
            raise UserError(
                f"{out} holds {', '.join(clash)}, which snrl did not write and will not "
                "overwrite (move it away or choose another --out)"
            )
    cfg = load_config(ALGOS["ppo"].Config, sets=list(args.set))
    print(
        f"snrl demo: PPO, {cfg.backbone.upper()} backbone ({cfg.hidden_size} neurons, Dale's law "
        f"{'on' if cfg.force_dale_law else 'off'}), {cfg.env}, {cfg.total_steps} env steps"
    )
    t0 = time.perf_counter()
    train_run(
        out,
        algo="ppo",
        config=cfg,
        force=replace,
        progress=not args.quiet,
    )
    train_s = time.perf_counter() - t0
    claim_files(out, DEMO_FILES)
    best = load_algo(out / "checkpoints" / "best.pt", env=cfg.env)  # the env the user chose
    res = best.evaluate(n_episodes=20, seed=123)
    write_json_atomic(out / "eval.json", res)
    lines = [
        f"trained in {train_s:.0f} s; best checkpoint: deterministic eval over 20 episodes = "
        f"{res['mean_return']:.1f} ± {res['std_return']:.1f}",
        f"run directory:   {out}/",
        f"  checkpoints:   {out / 'checkpoints' / 'best.pt'}, {out / 'checkpoints' / 'last.pt'}",
        f"  metrics:       {out / 'metrics.csv'}",
        f"  learning curve: {out / 'learning_curve.png'}",
        f"  evaluation:    {out / 'eval.json'}",
    ]
    if not args.no_video:
        from snrl.render import TrajectoryRenderer

        renderer = TrajectoryRenderer(best.rollout(seed=0, record=True), activity=True)
        for name in ("demo.mp4", "demo.gif"):  # one episode, two formats
            lines.append(f"  video:         {renderer.to_file(out / name, fps=30)}")
    best.close()
    print("\n".join(lines))
    return 0


def _analyze_one(algo: Any, args: argparse.Namespace, out_check: Path) -> tuple[Any, Any]:
    """Roll out ``--episodes`` episodes of ``algo`` into the analysis (and the export)."""
    from snrl.analysis import analyze

    exporter: list[Any] = []

    def collect(k: int, traj: Any) -> None:
        if args.export:
            from snrl.analysis.export import SpikeExport

            if not exporter:
                exporter.append(SpikeExport(traj.layers, dt=float(algo.config.dt)))
            exporter[0].add(traj)

    result = analyze(algo, episodes=args.episodes, seed=args.seed, on_episode=collect)
    return result, (exporter[0] if exporter else None)


def cmd_analyze(args: argparse.Namespace) -> int:
    """Spike-train statistics, E/I currents and figures of a run (or of every run of a
    comparison) into ``DIR/<--out>`` (docs/analysis.md)."""
    from snrl.analysis.outdir import check_output_dir, claim_output_dir, finish_output_dir

    base = Path(args.run_dir)
    if not base.is_dir():
        raise UserError(
            f"directory {base} does not exist (pass the --out of `snrl train` or `snrl compare`)"
        )
    check_output_dir(base, args.out)  # nothing is written before the inputs are checked
    if args.export:  # fail before loading anything when the extra is missing
        from snrl.analysis.export import require_extra

        require_extra("pynwb" if args.export == "nwb" else "neo")
    if (base / "compare.json").is_file() and not (base / "checkpoints").exists():
        return _analyze_compare(args, base)
    algo = load_algo(
        _checkpoint_path(args.run_dir, args.checkpoint),
        env=args.env,
        trust_env_module=args.trust_env_module,
    )
    result, exporter = _analyze_one(algo, args, base)
    algo.close()
    out = claim_output_dir(base, args.out)
    written = result.write(out, svg=args.svg)
    if exporter is not None:
        if args.export == "nwb":
            written.append(exporter.write_nwb(out / "spikes.nwb", meta={"run": str(base)}))
        else:
            written.append(exporter.write_neo(out / "spikes_neo.mat"))
    finish_output_dir(out, written)
    summary = result.summary()
    line = {"out": str(out), "episodes": summary["episodes"], "files": [p.name for p in written]}
    for name, layer in summary["layers"].items():
        pops = layer["populations"]
        line[name] = {
            pop: {k: pops[pop][k]["value"] for k in ("rate_mean", "cv_isi_mean") if k in pops[pop]}
            for pop in pops
        }
    line["rate_unit"] = summary["rate_unit"]
    print(json.dumps(line))
    return 0


def _analyze_compare(args: argparse.Namespace, base: Path) -> int:
    """The analysis of every finished run of a comparison, side by side by variant."""
    from snrl.analysis.compare import compare_figure, compare_summaries
    from snrl.analysis.figures import save_figure
    from snrl.analysis.outdir import claim_output_dir, finish_output_dir
    from snrl.experiments.stats import bootstrap_ci
    from snrl.experiments.store import read_status

    if args.export:
        raise UserError("--export applies to one run (pass a run directory: DIR/runs/<name>)")
    statuses = sorted((base / "status").glob("*.json"))
    runs = []
    for path in statuses:
        rec = read_status(path) or {}
        if rec.get("status") != "done":
            continue
        name = rec.get("name", path.stem)
        entry = {"name": name, "group": rec.get("group", name), "seed": rec.get("seed")}
        ckpt = base / "runs" / name / "checkpoints" / f"{args.checkpoint}.pt"
        if not ckpt.is_file():
            runs.append({**entry, "skipped": f"no {ckpt.name}"})
            continue
        algo = load_algo(ckpt, env=args.env, trust_env_module=args.trust_env_module)
        if not getattr(algo.agent.actor, "spiking_names", None):
            runs.append({**entry, "skipped": f"{algo.config.backbone} has no spiking layer"})
            algo.close()
            continue
        result, _ = _analyze_one(algo, args, base)
        algo.close()
        runs.append({**entry, "summary": result.summary()})
    if not any("summary" in r for r in runs):
        raise UserError(
            f"{base} has no finished spiking run to analyze (run `snrl compare` with a "
            "spiking backbone first)"
        )
    res = compare_summaries(runs, lambda v: bootstrap_ci(v, seed=args.seed))
    out = claim_output_dir(base, args.out)
    path = out / "compare.json"
    write_json_atomic(path, res)
    written = [path, save_figure(compare_figure(res), out / "compare.png")]
    finish_output_dir(out, written)
    print(json.dumps({"out": str(out), "groups": list(res["groups"]), "runs": len(runs)}))
    return 0


def cmd_serve_env(args: argparse.Namespace) -> int:
    """Serve a gymnasium env over HTTP until Ctrl-C (docs/remote.md)."""
    from snrl.envs.remote import TOKEN_ENV_VAR
    from snrl.envs.remote_server import serve

    kwargs: dict[str, Any] = {}
    if args.env_kwargs is not None:
        try:
            kwargs = json.loads(args.env_kwargs)
        except ValueError as e:
            raise UserError(f"--env-kwargs is not JSON: {e} (pass a JSON object)") from None
        if not isinstance(kwargs, dict):
            raise UserError("--env-kwargs must be a JSON object (e.g. '{\"dt\": 100}')")
    try:
        serve(
            args.env_id,
            host=args.host,
            port=args.port,
            token=args.token or os.environ.get(TOKEN_ENV_VAR) or None,
            env_kwargs=kwargs,
            max_body=args.max_body,
            max_sessions=args.max_sessions,
            max_client_sessions=args.max_client_sessions,
            idle_timeout=args.idle_timeout,
            max_connections=args.max_connections,
        )
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM is how a server is stopped
        print("env server stopped", file=sys.stderr)
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the web dashboard over RUNS_DIR until Ctrl-C (docs/dashboard.md)."""
    from snrl.dashboard import serve

    try:
        serve(
            args.runs_dir,
            host=args.host,
            port=args.port,
            token=args.token,
            max_runs=args.max_runs,
        )
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM is how a server is stopped
        print("dashboard stopped", file=sys.stderr)
    return 0


def _trust_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-env-module",
        action="store_true",
        help="import the module:Class env that the run's checkpoint names (only for runs "
        "you trust: importing a module runs its code)",
    )


def _env_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env",
        default=None,
        help="the env to use instead of the run's (gymnasium id, or module:Class, which is "
        "imported)",
    )
    _trust_flag(p)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="snrl", description="Reinforcement learning with spiking neural networks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("demo", help="train, evaluate, plot and render a Dale LIF agent on CartPole")
    d.add_argument("--out", default="snrl-demo", help="run directory (default: snrl-demo)")
    d.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a PPO hyperparameter (repeatable)",
    )
    d.add_argument("--no-video", action="store_true", help="skip demo.mp4 / demo.gif")
    d.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    d.set_defaults(func=cmd_demo)

    t = sub.add_parser("train", help="train an agent into a run directory")
    t.add_argument("--algo", choices=sorted(ALGOS), default=None, help="default ppo")
    t.add_argument("--env", default=None, help="gymnasium id or module:Class")
    t.add_argument(
        "--env-kwargs",
        default=None,
        metavar="JSON",
        help="env options as a JSON object (config key env_kwargs), e.g. '{\"dt\": 100}'",
    )
    t.add_argument("--backbone", choices=BACKBONES, default=None)
    t.add_argument("--hidden", type=int, default=None, help="neurons per hidden layer")
    t.add_argument("--dale", dest="dale", action="store_true", default=None)
    t.add_argument("--no-dale", dest="dale", action="store_false")
    t.add_argument("--steps", type=int, default=None, help="total env steps")
    t.add_argument(
        "--no-tuned",
        action="store_true",
        help="skip snrl's tuned settings for the env and backbone (config key tuned)",
    )
    t.add_argument("--n-envs", type=int, default=None)
    t.add_argument("--seed", type=SEED, default=None)
    t.add_argument("--config", default=None, metavar="FILE.toml")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    t.add_argument("--out", required=True, help="run directory")
    g = t.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="continue from checkpoints/last.pt")
    g.add_argument(
        "--force",
        action="store_true",
        help="replace the run in --out (deletes only the files snrl wrote there)",
    )
    _trust_flag(t)
    t.add_argument(
        "--threads",
        type=THREADS,
        default=None,
        help="torch threads while training (config key threads; default: 1 up to 512 "
        "neurons per layer, torch's own count above)",
    )
    t.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval", help="deterministic evaluation of a run; prints one JSON object")
    e.add_argument("run_dir")
    e.add_argument("--episodes", type=EPISODES, default=20)
    e.add_argument("--seed", type=SEED, default=123)
    e.add_argument("--checkpoint", choices=("best", "last"), default="best")
    e.add_argument(
        "--lesson",
        default=None,
        metavar="N|NAME",
        help="a run with a curriculum: evaluate on this lesson (number from 0, or name; "
        "default: the final lesson)",
    )
    _env_flags(e)
    e.set_defaults(func=cmd_eval)

    r = sub.add_parser("render", help="roll out one episode of a run and write a video")
    r.add_argument("run_dir")
    r.add_argument("--out", required=True, metavar="FILE.gif|FILE.mp4")
    r.add_argument("--seed", type=SEED, default=0)
    r.add_argument("--fps", type=FPS, default=30)
    r.add_argument("--no-activity", action="store_true", help="frames only, no network panel")
    r.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="video size factor (1: at least 540 px high, text >= 14 px; 2: twice that)",
    )
    _env_flags(r)
    r.set_defaults(func=cmd_render)

    a = sub.add_parser(
        "analyze",
        help="spike-train statistics, E/I balance and figures of a run (or of a comparison)",
    )
    a.add_argument("run_dir", help="a run directory, or a comparison directory")
    a.add_argument(
        "--episodes",
        type=_int_in(1, 10**6),  # one at a time, in constant memory: no env-count bound
        default=20,
        help="episodes (default 20)",
    )
    a.add_argument("--checkpoint", choices=("best", "last"), default="best")
    a.add_argument("--seed", type=SEED, default=0, help="seed of the first episode (default 0)")
    a.add_argument(
        "--export",
        choices=("nwb", "neo"),
        default=None,
        help="also write the spikes as NWB (spikes.nwb) or Neo (spikes_neo.mat); "
        "needs pip install 'snrl[export]'",
    )
    a.add_argument(
        "--out",
        default="analysis",
        metavar="SUBDIR",
        help="output folder inside the directory (default analysis)",
    )
    a.add_argument("--svg", action="store_true", help="also write the figures as SVG")
    _env_flags(a)
    a.set_defaults(func=cmd_analyze)
    v = sub.add_parser(
        "serve-env", help="serve a gymnasium env over HTTP for `--env http://...` (docs/remote.md)"
    )
    v.add_argument("env_id", metavar="ENV_ID", help="gymnasium id or module:Class to serve")
    v.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; another one warns)",
    )
    v.add_argument("--port", type=_int_in(0, 65535), default=8765, help="default 8765; 0: free")
    v.add_argument(
        "--token",
        default=None,
        help="the token clients send (default: $SNRL_ENV_TOKEN, else a new one, printed once)",
    )
    v.add_argument("--env-kwargs", default=None, metavar="JSON", help="options of every env")
    v.add_argument(
        "--max-body", type=_int_in(1024, 1 << 30), default=1 << 20, help="bytes (default 1 MiB)"
    )
    v.add_argument("--max-sessions", type=_int_in(1, 4096), default=64, help="default 64")
    v.add_argument(
        "--max-client-sessions",
        type=_int_in(1, 4096),
        default=None,
        help="most sessions of one client process (default: --max-sessions)",
    )
    v.add_argument(
        "--idle-timeout",
        type=_int_in(0, 10**7),
        default=1800,
        metavar="S",
        help="close sessions unused for S seconds (default 1800; 0: never)",
    )
    v.add_argument(
        "--max-connections",
        type=_int_in(1, 65536),
        default=None,
        help="most open connections (default 2 x --max-sessions + 32)",
    )
    v.set_defaults(func=cmd_serve_env)

    w = sub.add_parser(
        "dashboard", help="a local web page to launch, watch and compare runs (docs/dashboard.md)"
    )
    w.add_argument("runs_dir", nargs="?", default="runs", metavar="RUNS_DIR", help="default runs")
    w.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; another one warns)",
    )
    w.add_argument("--port", type=_int_in(0, 65535), default=8770, help="default 8770; 0: free")
    w.add_argument("--token", default=None, help="the token of the URL (default: a new one)")
    w.add_argument(
        "--max-runs",
        type=_int_in(1, 64),
        default=2,
        help="most runs (and renders) the page starts at once (default 2)",
    )
    w.set_defaults(func=cmd_dashboard)

    from snrl.experiments.cli import add_parsers

    add_parsers(sub)
    return p


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process was, so it unwinds like Ctrl-C (temp
    files removed, metrics closed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def _install_signal_handlers() -> dict[int, Any]:
    """SIGTERM/SIGHUP -> :class:`Interrupted`; returns the handlers to restore."""
    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            previous[signum] = signal.signal(signum, _raise_interrupted)
        except (ValueError, OSError):  # not the main thread
            pass
    return previous


def _where_the_run_is(out: Path, command: str) -> str:
    """What an interrupted training left in ``out``, and what to do next."""
    last = out / "checkpoints" / "last.pt"
    try:
        step = int(load_checkpoint(last)["counters"]["env_step"])
    except (ValueError, OSError, KeyError, TypeError):
        step = None
    if step is not None:
        if command == "demo":
            return (
                f"the run in {out} is consistent up to env step {step} (its last checkpoint); "
                f"`snrl demo --out {out}` starts it again"
            )
        return (
            f"the run in {out} is consistent and resumable from env step {step} (continue it "
            f"with `snrl train --out {out} --resume`)"
        )
    if not is_run_dir(out):
        return "nothing was written"
    again = f"snrl demo --out {out}" if command == "demo" else f"snrl train ... --out {out} --force"
    return (
        f"no checkpoint was written yet, so there is nothing to resume (start again: `{again}` "
        f"replaces the partial run, deleting only the files listed in {out / MANIFEST})"
    )


def _interrupt_message(args: argparse.Namespace, signum: int) -> str:
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    if args.command in ("train", "demo"):
        note = _where_the_run_is(Path(args.out), args.command)
    elif args.command == "render":
        note = f"{args.out} was not written"
    elif args.command == "eval":
        note = "nothing was written"
    else:
        note = "run the same command again"
    return f"error: interrupted by {how} ({note})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = _install_signal_handlers()
    try:
        return args.func(args)
    except (ValueError, OSError, MemoryError) as e:
        if os.environ.get("SNRL_DEBUG"):
            raise
        print(f"error: {error_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(_interrupt_message(args, signum), file=sys.stderr)
        return 128 + int(signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
