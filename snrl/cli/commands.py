"""The bodies of the ``snrl`` sub-commands: demo, train, eval, render, analyze, export,
serve-env, dashboard (the parser that calls them is :mod:`snrl.cli.parser`; the entry point
that turns user errors into one line is :func:`snrl.cli.main`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from snrl.agents import ALGOS, load_algo
from snrl.agents.base import MAX_TOTAL_STEPS, check_int
from snrl.callbacks import Callback, load_callbacks
from snrl.config import (
    Layer,
    build,
    config_from_dict,
    config_to_dict,
    file_layer,
    load_config,
    merge,
    sets_layer,
)
from snrl.errors import UserError, first_line
from snrl.experiments.runner import train_run
from snrl.io import json_safe, load_json, write_json_atomic
from snrl.networks.factory import SPIKING
from snrl.training.progress import say
from snrl.training.rundir import (
    DEMO_FILES,
    claim_files,
    is_run_dir,
    lock_run_dir,
    read_manifest,
    remove_stale_temps,
)
from snrl.zoo import configure

VIDEO_EXTS = (".gif", ".mp4")


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


def _load_run(args: argparse.Namespace, ckpt: Path) -> Any:
    """The algorithm of checkpoint ``ckpt``, on ``--env`` (None: the run's own env) under
    the ``--trust-env-module`` rule: how every sub-command that reads a run directory
    (:func:`snrl.cli.parser._run_parser`) loads it."""
    return load_algo(ckpt, env=args.env, trust_env_module=args.trust_env_module)


def _video_path(out: str) -> Path:
    path = Path(out)
    if path.suffix.lower() not in VIDEO_EXTS:
        raise UserError(f"--out {out} has an unknown extension (use .gif or .mp4)")
    return path


#: The config flags of ``snrl train``: flag, its config key, and its value in ``args``.
CONFIG_FLAGS: tuple[tuple[str, str, Any], ...] = (
    ("--env", "env", lambda a: a.env),
    ("--tasks", "env", lambda a: _tasks_env(getattr(a, "tasks", None))),
    ("--env-kwargs", "env_kwargs", lambda a: a.env_kwargs),
    ("--backbone", "backbone", lambda a: a.backbone),
    ("--hidden", "hidden_size", lambda a: a.hidden),
    ("--dale/--no-dale", "force_dale_law", lambda a: a.dale),
    ("--steps", "total_steps", lambda a: a.steps),
    ("--n-envs", "n_envs", lambda a: a.n_envs),
    ("--seed", "seed", lambda a: a.seed),
    ("--learning-rule", "learning_rule", lambda a: getattr(a, "learning_rule", None)),
    ("--eprop-feedback", "eprop_feedback", lambda a: getattr(a, "eprop_feedback", None)),
    ("--shared-trunk", "shared_trunk", lambda a: getattr(a, "shared_trunk", None)),
    ("--threads", "threads", lambda a: getattr(a, "threads", None)),
    ("--no-tuned", "tuned", lambda a: False if getattr(a, "no_tuned", False) else None),
)


def _tasks_env(tasks: str | None) -> str | None:
    """The env id of ``--tasks A,B``: ``snrl.tasks:A,B`` (ids checked here, before anything is
    written)."""
    if tasks is None:
        return None
    from snrl.tasks import multitask_env_id

    return multitask_env_id(tasks)


def _flag_layers(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> list[Layer]:
    """The config flags given to ``snrl train`` (not those of keys in ``skip``), one layer
    each, with their typed values (``--env-kwargs`` is JSON text, converted by the config)."""
    layers = []
    for flag, key, get in CONFIG_FLAGS:
        value = get(args)
        if value is not None and key not in skip:
            layers.append(Layer(flag, ((key, value),)))
    return layers


def _caller_layers(args: argparse.Namespace, skip: tuple[str, ...] = ()) -> list[Layer]:
    """Precedence of ``snrl train``'s values: the --config file < the flags < --set."""
    return [file_layer(args.config), *_flag_layers(args, skip), sets_layer(args.set)]


def _train_config(args: argparse.Namespace):
    algo = args.algo or "ppo"
    # precedence: defaults < tuned settings (snrl/zoo) < --config file < flags < --set
    cfg, entry, _ = configure(ALGOS[algo].Config, algo, _caller_layers(args))
    if entry is not None:
        print(f"tuned settings: {cfg.tuned_from} (--no-tuned: the defaults)", file=sys.stderr)
    return cfg


#: What ``--resume`` may change: the run's length. Everything else is the saved config.
#: what `snrl eval` prints (DESIGN.md's contract; evaluate() also has mean_length, spike_rates)
EVAL_KEYS = ("mean_return", "std_return", "n_episodes", "returns")
#: what `snrl eval` adds on a trial task (NeuroGym; docs/neuro.md)
EVAL_TRIAL_KEYS = (
    "n_trials",
    "accuracy",
    "accuracy_fixation_held",
    "fixation_breaks",
    "accuracy_by_condition",
)
#: the figure `snrl eval` writes into the run directory of a two-choice coherence task
PSYCHOMETRIC_PNG = "psychometric.png"
#: the figure of the behaviour readouts `snrl eval` writes where one applies (docs/analysis.md)
BEHAVIOUR_PNG = "behaviour.png"
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
    flags = _flag_layers(args, skip=RESUME_FLAGS_FREE)
    if not (args.algo or args.config or args.set or flags):
        return steps
    path = Path(args.out) / "config.json"
    if not Path(args.out).is_dir():
        return steps  # train_run says what is missing
    try:
        saved = load_json(path.read_text(encoding="utf-8"))
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
    saved_layer = Layer.of(f"the saved config {path}", config_to_dict(old))
    new = build(cls, merge(cls, [saved_layer, *_caller_layers(args, skip=RESUME_FLAGS_FREE)]))
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
    # --callback module:Name: imported because you named it; on --resume, the run's recorded
    # callbacks only under the rule of env modules (snrl.callbacks.load_callbacks)
    callbacks = load_callbacks(
        args.callback, run_dir=args.out, resume=args.resume, trusted=args.trust_env_module
    )
    if args.resume:
        steps = _resume_steps(args)
        if steps is not None:
            check_int("--steps", steps, 1, MAX_TOTAL_STEPS)
        train_run(
            args.out,
            resume=True,
            total_steps=steps,
            threads=args.threads,
            progress=not args.quiet,
            env=args.env,
            trust_env_module=args.trust_env_module,
            callbacks=[_NeuronTime(), *callbacks],
        )
    else:
        config = _train_config(args)
        train_run(
            args.out,
            algo=args.algo or "ppo",
            config=config,
            force=args.force,
            progress=not args.quiet,
            callbacks=[_NeuronTime(), *callbacks],
        )
    print(f"run directory: {args.out} (checkpoints/best.pt, metrics.csv, learning_curve.png)")
    return 0


def _seconds(tau: float | tuple[float, float]) -> str:
    """A config's time constant for people: ``0.02 s``, or ``0.1-2 s per neuron``."""
    if isinstance(tau, tuple):
        return f"{tau[0]:g}-{tau[1]:g} s per neuron"
    return f"{tau:g} s"


class _NeuronTime(Callback):
    """Prints the resolved neuron time of a spiking run when training starts, before its
    first env step (the ``dt`` derived from the task is what a user checks first;
    docs/architecture.md, "Time")."""

    def on_training_start(self, algo: Any) -> None:
        cfg = algo.config
        if cfg.backbone in SPIKING:
            taus = f"tau_m={_seconds(cfg.tau_m)}, readout_tau_m={cfg.readout_tau_m:g} s"
            if cfg.backbone == "alif":
                taus += f", tau_a={_seconds(cfg.tau_a)}, beta={cfg.beta:g}"
            say(
                f"neuron time: dt={cfg.dt:g} s, substeps={cfg.substeps} per env step, {taus} "
                f"(time_profile={cfg.time_profile})"
            )


def cmd_eval(args: argparse.Namespace) -> int:
    algo = _load_run(args, _checkpoint_path(args.run_dir, args.checkpoint))
    if args.lesson is not None and algo.config.curriculum is None:
        raise UserError(
            f"--lesson {args.lesson}: the run in {args.run_dir} has no curriculum (drop --lesson)"
        )
    res = algo.evaluate(n_episodes=args.episodes, seed=args.seed, lesson=args.lesson)
    # a run with a curriculum also says which lesson was evaluated (default: the final one)
    out = {k: res[k] for k in (*EVAL_KEYS, "lesson") if k in res}
    if "n_trials" in res:  # a trial task (NeuroGym): accuracy, and for decisions the curve
        out.update({k: res[k] for k in EVAL_TRIAL_KEYS})
        for key in ("accuracy_by_task", "accuracy_fixation_held_by_task"):
            if key in res:  # a multitask env (snrl train --tasks)
                out[key] = res[key]
        run_dir = Path(args.run_dir)
        out.update(_psychometric(run_dir, res["trials"], algo.config.env, args.style))
        out.update(_behaviour(run_dir, res["trials"], algo.config.env, args.style))
    print(json.dumps(json_safe(out)))
    return 0


def _figure_names(png: str, style: str | None) -> list[str]:
    """The files a figure of ``snrl eval`` takes in ``style`` (the PNG, its vector files)."""
    from snrl.analysis.style import FIGURE_STYLES

    extra = FIGURE_STYLES[style].vector_formats if style else ()
    return [png, *(str(Path(png).with_suffix(s)) for s in extra)]


def _psychometric(
    run_dir: Path, trials: list, env: str, style: str | None = None
) -> dict[str, Any]:
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
        claim_files(run_dir, _figure_names(PSYCHOMETRIC_PNG, style))
    n = sum(p["n"] for p in curve["points"])
    save_psychometric(curve, png, title=f"{env}: {n} trials", style=style)
    return {"psychometric": curve, "psychometric_png": str(png)}


def _behaviour(run_dir: Path, trials: list, env: str, style: str | None) -> dict[str, Any]:
    """``{"behaviour": readouts}`` of a trial task (the ones that apply to it,
    :func:`snrl.analysis.behaviour.behaviour_readouts`), and ``"behaviour_png"`` where a
    readout beyond the error counts applies (the figure, written into the run directory)."""
    from snrl.analysis.behaviour import behaviour_readouts, save_behaviour

    readouts = behaviour_readouts(trials)
    if len(readouts) == 1:  # the error counts only: no figure
        return {"behaviour": readouts}
    png = run_dir / BEHAVIOUR_PNG
    if is_run_dir(run_dir):
        claim_files(run_dir, _figure_names(BEHAVIOUR_PNG, style))
    if save_behaviour(readouts, png, title=f"{env}: {len(trials)} trials", style=style) is None:
        return {"behaviour": readouts}  # nothing to draw (no interval was produced)
    return {"behaviour": readouts, "behaviour_png": str(png)}


def _render(
    algo: Any,
    out: Path,
    *,
    seed: int,
    fps: int,
    activity: bool,
    scale: float = 1.0,
    layout: str | None = None,
) -> Path:
    from snrl.render import TrajectoryRenderer

    traj = algo.rollout(seed=seed, record=True)
    renderer = TrajectoryRenderer(traj, activity=activity, scale=scale, layout=layout)
    return renderer.to_file(out, fps=fps)


def cmd_render(args: argparse.Namespace) -> int:
    out = _video_path(args.out)
    algo = _load_run(args, _checkpoint_path(args.run_dir, "best"))
    # temp videos of renders killed earlier (untouched for a minute: not a live writer's)
    remove_stale_temps(out.parent, min_age_s=60.0)
    written = _render(
        algo,
        out,
        seed=args.seed,
        fps=args.fps,
        activity=not args.no_activity,
        scale=args.scale,
        layout=args.layout,
    )
    print(f"wrote {written}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``snrl export DIR --nir FILE.nir``: the policy backbone as a NIR graph (docs/interop.md);
    the observation normalization, which the graph's input expects, in its metadata."""
    from snrl.export import write_nir

    out = Path(args.nir)
    if out.suffix.lower() != ".nir":
        raise UserError(f"--nir {args.nir} has an unknown extension (use FILE.nir)")
    if out.exists():
        raise UserError(f"--nir {out} exists (snrl does not overwrite it: remove it or rename)")
    algo = _load_run(args, _checkpoint_path(args.run_dir, args.checkpoint))
    print(f"wrote {write_nir(algo, out)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Train a Dale-constrained LIF PPO agent on CartPole-v1, evaluate, plot and render."""
    if not args.out.strip():  # Path("") would be the current directory
        raise UserError("--out '' is empty (pass a directory name, e.g. --out snrl-demo)")
    out = Path(args.out)
    with lock_run_dir(out):  # held from the first check to the last video
        return _demo(args, out)


def _demo(args: argparse.Namespace, out: Path) -> int:
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

    result = analyze(
        algo,
        episodes=args.episodes,
        seed=args.seed,
        on_episode=collect,
        decode=getattr(args, "decode", True),
        n_shuffles=getattr(args, "shuffles", 20),
        compare_initial=getattr(args, "compare_initial", True),
        fixed_points=getattr(args, "fixed_points", False),
        fixed_points_beta=getattr(args, "fixed_points_beta", 0.3),
        dpca=getattr(args, "dpca", False),
    )
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
    if getattr(args, "dpca", False) and not getattr(args, "decode", True):
        raise UserError("--dpca needs the trial activity that --no-decode skips (drop one)")
    check_output_dir(base, args.out)  # nothing is written before the inputs are checked
    if args.export:  # fail before loading anything when the extra is missing
        from snrl.analysis.export import require_extra

        require_extra("pynwb" if args.export == "nwb" else "neo")
    if (base / "compare.json").is_file() and not (base / "checkpoints").exists():
        return _analyze_compare(args, base)
    algo = _load_run(args, _checkpoint_path(args.run_dir, args.checkpoint))
    result, exporter = _analyze_one(algo, args, base)
    algo.close()
    if result.task_variance is not None:  # which weights the clusters are of (--lesion)
        ckpt = _checkpoint_path(args.run_dir, args.checkpoint)
        result.task_variance["checkpoint"] = {"name": args.checkpoint, "sha256": _sha256(ckpt)}
    out = claim_output_dir(base, args.out)
    written = result.write(out, svg=args.svg, style=args.style)
    if exporter is not None:
        if args.export == "nwb":
            written.append(exporter.write_nwb(out / "spikes.nwb", meta={"run": str(base)}))
        else:
            written.append(exporter.write_neo(out / "spikes_neo.mat"))
    finish_output_dir(out, written)
    summary = result.summary()
    line = {"out": str(out), "episodes": summary["episodes"], "files": [p.name for p in written]}
    # which networks: policy (+ critic, its files critic_*), or one trunk for policy and value
    line["networks"] = [summary["network"], *summary.get("networks", {})]
    for name, layer in summary["layers"].items():
        pops = layer["populations"]
        line[name] = {
            pop: {k: pops[pop][k]["value"] for k in ("rate_mean", "cv_isi_mean") if k in pops[pop]}
            for pop in pops
        }
    line["rate_unit"] = summary["rate_unit"]
    line.update(_dynamics_line(summary))
    fp = summary.get("fixed_points")
    if fp:  # per frozen input: how many points of each kind
        line["fixed_points"] = {
            e["label"]: {k: e[f"n_{k}"] for k in ("stable", "unstable", "slow")}
            for e in fp["inputs"]
        }
    tv = summary.get("task_variance")
    if tv:  # a multitask run: its clusters, for snrl perturb --lesion cluster --cluster K
        line["task_variance"] = {
            "n_active": tv["n_active"],
            "n_clusters": tv["n_clusters"],
            "cluster_sizes": [c["size"] for c in tv["clusters"]],
        }
    print(json.dumps(line))
    return 0


def _dynamics_line(summary: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of the decoding, dimensionality and connectivity analyses for
    the printed line: peak decoding accuracy per variable, cv dimensionality, spectral
    radius after (and before) training of the first layer."""
    out: dict[str, Any] = {}
    dyn = summary.get("dynamics")
    if dyn:
        out["decoding_peak"] = {
            var: max((a for a in res["accuracy"] if a is not None), default=None)
            for var, res in dyn["decoding"].items()
        }
        dim = dyn.get("dimensionality") or {}
        out["cv_dimensionality"] = dim.get("cv_dimensionality")
        out.update(_tdr_line(dyn.get("tdr") or {}))
        dp = dyn.get("dpca")
        if dp is not None:  # --dpca: per marginalization, its components' explained variance
            out["dpca_explained_variance"] = (
                {k: m["explained_variance"] for k, m in dp["marginalizations"].items()}
                if "marginalizations" in dp
                else {"skipped": dp.get("skipped")}
            )
    name, layer = next(iter(summary["layers"].items()))
    c = layer.get("connectivity") or {}
    out["spectral_radius"] = {
        k: c[k]["spectral_radius"] for k in ("initial", "trained") if k in c
    } | {"layer": name}
    return out


def _tdr_line(tdr: dict[str, Any]) -> dict[str, Any]:
    """TDR's headline numbers: each axis's share of the condition-mean variance and the
    demixed variance shares (absent when skipped)."""
    out: dict[str, Any] = {}
    if "axes" in tdr:
        out["tdr_explained_variance"] = {k: v["explained_variance"] for k, v in tdr["axes"].items()}
    shares = (tdr.get("demixed_variance") or {}).get("shares")
    if shares:
        out["demixed_variance"] = shares
    return out


def _perturb_spec(args: argparse.Namespace) -> Any:
    """The perturbation the flags of ``snrl perturb`` describe (checked before anything
    runs)."""
    from snrl.analysis.perturb import PerturbationSpec

    kind = (
        "silence" if args.silence else "stimulate" if args.stimulate
        else "noise" if args.noise is not None else "lesion"
    )  # fmt: skip
    if args.current is not None and kind != "stimulate":
        raise UserError("--current goes with --stimulate E|I (drop --current)")
    if kind == "stimulate" and args.current is None:
        raise UserError("--stimulate needs --current X (the current added per neuron step)")
    if (args.cluster is not None or args.clusters is not None) and kind != "lesion":
        raise UserError("--cluster/--clusters go with --lesion cluster (drop them)")
    if kind == "lesion" and args.cluster is None:
        raise UserError("--lesion cluster needs --cluster K (see `snrl analyze`'s clusters)")
    if args.fraction is not None and kind in ("noise", "lesion"):
        raise UserError(f"--fraction goes with --silence or --stimulate, not --{kind}")
    if args.fraction is not None and not 0.0 <= args.fraction <= 1.0:
        raise UserError(f"--fraction {args.fraction} (give a share in [0, 1])")
    return PerturbationSpec(
        kind=kind,
        population=args.silence or args.stimulate,
        fraction=1.0 if args.fraction is None else args.fraction,
        current=0.0 if args.current is None else args.current,
        noise_std=0.0 if args.noise is None else args.noise,
        cluster=args.cluster,
        period=args.period,
        choice_seed=args.choice_seed,
        noise_seed=args.noise_seed,
    )


def _lesion_clusters(args: argparse.Namespace, ckpt: Path) -> dict[str, Any]:
    """The task-variance entry of ``snrl analyze``'s summary, checked against the checkpoint
    being perturbed (its SHA-256, recorded by ``snrl analyze``)."""
    from snrl.analysis.run import read_summary

    path = (
        Path(args.clusters) if args.clusters else Path(args.run_dir) / "analysis" / "summary.json"
    )
    if not path.is_file():
        raise UserError(
            f"{path} does not exist (run `snrl analyze {args.run_dir}` first: its task-variance "
            "clusters are what --lesion cluster silences)"
        )
    entry = read_summary(path).get("task_variance")
    if not entry:
        raise UserError(
            f"{path} has no task_variance entry (analyze a multitask run with this snrl: "
            f"`snrl analyze {args.run_dir}`)"
        )
    made = (entry.get("checkpoint") or {}).get("sha256")
    if made != _sha256(ckpt):
        raise UserError(
            f"the clusters in {path} were not computed from {ckpt} (rerun `snrl analyze "
            f"{args.run_dir} --checkpoint {args.checkpoint}`)"
        )
    return entry


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cmd_perturb(args: argparse.Namespace) -> int:
    """Evaluation with the policy perturbed (silenced or stimulated E or I neurons, current
    noise, a lesioned task-variance cluster), beside the same evaluation unperturbed:
    ``perturb.json`` and ``perturb.png`` (docs/analysis.md)."""
    from snrl.analysis.perturb import check_perturb_out, perturbation_report, write_perturbation

    spec = _perturb_spec(args)
    out = check_perturb_out(args.run_dir, args.out)  # before anything runs
    ckpt = _checkpoint_path(args.run_dir, args.checkpoint)
    algo = _load_run(args, ckpt)
    try:
        clusters = None
        if spec.kind == "lesion":
            from snrl.analysis.perturb import is_multitask

            if not is_multitask(algo):
                raise UserError(
                    f"--lesion cluster needs a run trained on several tasks (snrl train --tasks "
                    f"A,B,...); {args.run_dir} was trained on {algo.config.env} (use --silence)"
                )
            clusters = _lesion_clusters(args, ckpt)
        report = perturbation_report(
            algo, spec, n_episodes=args.episodes, seed=args.seed, clusters=clusters
        )
    finally:
        algo.close()
    written = write_perturbation(report, out, style=args.style)
    line = {"out": str(out), "files": [p.name for p in written]}
    for key in ("unperturbed", "perturbed"):
        line[key] = {
            k: report[key].get(k)
            for k in ("mean_return", "accuracy", "accuracy_by_task")
            if k in report[key]
        }
    line["effect"] = report["effect"]
    print(json.dumps(json_safe(line)))
    return 0


def _analyze_compare(args: argparse.Namespace, base: Path) -> int:
    """The analysis of every finished run of a comparison, side by side by variant."""
    from snrl.analysis.compare import compare_figure, compare_summaries
    from snrl.analysis.outdir import claim_output_dir, finish_output_dir
    from snrl.analysis.style import write_figure
    from snrl.experiments.stats import bootstrap_ci
    from snrl.experiments.store import read_status

    if args.export or getattr(args, "fixed_points", False) or getattr(args, "dpca", False):
        flag = (
            "--export"
            if args.export
            else ("--fixed-points" if getattr(args, "fixed_points", False) else "--dpca")
        )
        raise UserError(f"{flag} applies to one run (pass a run directory: DIR/runs/<name>)")
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
        algo = _load_run(args, ckpt)
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
    written = [path, *write_figure(compare_figure(res), out / "compare.png", style=args.style)]
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
            kwargs = load_json(args.env_kwargs, what="--env-kwargs")
        except UserError:
            raise
        except ValueError as e:
            raise UserError(f"--env-kwargs is not JSON: {e} (pass a JSON object)") from None
        if not isinstance(kwargs, dict):
            raise UserError("--env-kwargs must be a JSON object (e.g. '{\"dt\": 100}')")
    names = ("host", "port", "max_body", "max_sessions", "max_client_sessions", "idle_timeout")
    options = {name: getattr(args, name) for name in (*names, "max_connections")}  # = serve's
    options["token"] = args.token or os.environ.get(TOKEN_ENV_VAR) or None
    return _serve_until_stopped("env server", serve, args.env_id, env_kwargs=kwargs, **options)


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the web dashboard over RUNS_DIR until Ctrl-C (docs/dashboard.md)."""
    from snrl.dashboard import serve

    options = {name: getattr(args, name) for name in ("host", "port", "token", "max_runs")}
    return _serve_until_stopped("dashboard", serve, args.runs_dir, **options)


def _serve_until_stopped(what: str, serve: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run a server until Ctrl-C / SIGTERM (how a server is stopped); exit status 0."""
    try:
        serve(*args, **kwargs)
    except KeyboardInterrupt:
        print(f"{what} stopped", file=sys.stderr)
    return 0
