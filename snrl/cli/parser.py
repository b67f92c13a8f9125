"""The parser of the ``snrl`` command: one ``_add_<command>`` per sub-command, each flag a
documented alias of one config key (docs/cli.md). The bodies are in :mod:`snrl.cli.commands`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from snrl.agents import ALGOS
from snrl.agents.limits import MAX_ENVS, MAX_SEED
from snrl.agents.runtime import MAX_THREADS
from snrl.cli.commands import (
    cmd_analyze,
    cmd_dashboard,
    cmd_demo,
    cmd_eval,
    cmd_export,
    cmd_perturb,
    cmd_render,
    cmd_serve_env,
    cmd_train,
)
from snrl.config import add_set_flag
from snrl.errors import one_line
from snrl.networks.factory import BACKBONES


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"error: {one_line(message)} (see `{self.prog} --help`)", file=sys.stderr)
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
THREADS = _int_in(0, MAX_THREADS)  # the config key's range: 0 leaves torch's setting
EPISODES = _int_in(1, MAX_ENVS)  # one env per episode is built at once
FPS = _int_in(1, 1000)
#: ``--style`` choices: :data:`snrl.analysis.style.STYLE_NAMES` (a test checks; not
#: imported here, so that the parser does not load the analysis package)
FIGURE_STYLES = ("paper", "talk")


def _style_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--style",
        choices=FIGURE_STYLES,
        default=None,
        help=f"{what} for a paper (journal fonts at a column width; 300 dpi PNG, PDF, SVG) "
        "or a talk (slide fonts on a 16:9 slide; 1920x1080 PNG, SVG); default: the plain PNG",
    )


def _trust_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-env-module",
        action="store_true",
        help="import the module:Class env that the run's checkpoint names (only for runs "
        "you trust: importing a module runs its code)",
    )


def _checkpoint_flag(p: argparse.ArgumentParser) -> None:
    """``--checkpoint best|last``: which of the run's checkpoints to load (default best)."""
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")


def _server_flags(p: argparse.ArgumentParser, port: int, token_help: str) -> None:
    """``--host``, ``--port`` and ``--token`` of a local server (127.0.0.1 and a token by
    default: docs/remote.md, docs/dashboard.md)."""
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; another one warns)",
    )
    p.add_argument("--port", type=_int_in(0, 65535), default=port, help=f"default {port}; 0: free")
    p.add_argument("--token", default=None, help=token_help)


def _env_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env",
        default=None,
        help="the env to use instead of the run's (gymnasium id, or module:Class, which is "
        "imported)",
    )
    _trust_flag(p)


def _run_parser(
    sub: Any, name: str, func: Any, help: str, run_dir_help: str | None = None
) -> argparse.ArgumentParser:
    """The parser of a sub-command that reads a run directory, with ``func`` its body: the
    ``run_dir`` argument and the env flags (:func:`_env_flags`); the caller adds its own."""
    p = sub.add_parser(name, help=help)
    p.add_argument("run_dir", help=run_dir_help)
    _env_flags(p)
    p.set_defaults(func=func)
    return p


def _add_demo(sub: Any) -> None:
    """``snrl demo``: train, evaluate, plot and render the demo agent."""
    d = sub.add_parser("demo", help="train, evaluate, plot and render a Dale LIF agent on CartPole")
    d.add_argument("--out", default="snrl-demo", help="run directory (default: snrl-demo)")
    add_set_flag(d, help="override a PPO hyperparameter (repeatable)")
    d.add_argument("--no-video", action="store_true", help="skip demo.mp4 / demo.gif")
    d.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    d.set_defaults(func=cmd_demo)


def _add_train(sub: Any) -> None:
    """``snrl train``: its flags, each an alias of one config key (docs/cli.md)."""
    t = sub.add_parser("train", help="train an agent into a run directory")
    t.add_argument("--algo", choices=sorted(ALGOS), default=None, help="default ppo")
    which = t.add_mutually_exclusive_group()
    which.add_argument("--env", default=None, help="gymnasium id or module:Class")
    which.add_argument(
        "--tasks",
        default=None,
        metavar="ID,ID,...",
        help="one agent on interleaved tasks of snrl.tasks with a rule input, e.g. "
        "PerceptualDecisionMaking-v0,GoNogo-v0 (config key env = snrl.tasks:ID,ID; docs/tasks.md)",
    )
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
    t.add_argument(
        "--learning-rule",
        choices=("bptt", "eprop"),
        default=None,
        help="bptt (default) or eprop: e-prop's eligibility traces (docs/learning_rules.md)",
    )
    t.add_argument(
        "--eprop-feedback",
        choices=("symmetric", "random"),
        default=None,
        help="e-prop's feedback: the readout's weights (default) or a fixed random matrix",
    )
    t.add_argument(
        "--shared-trunk",
        action="store_true",
        default=None,
        help="PPO: one network for policy and value, two readouts (config key shared_trunk; "
        "docs/agents.md)",
    )
    t.add_argument("--config", default=None, metavar="FILE.toml")
    add_set_flag(t)
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
        help="torch threads while training (config key threads; 0: torch's own setting; "
        "default: 1 up to 512 neurons per layer, torch's own count above)",
    )
    t.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    t.add_argument(
        "--callback",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="a snrl.callbacks.Callback to run (repeatable; the module is imported: name only "
        "code you trust; recorded in callbacks.json, --resume needs --trust-env-module or the "
        "same --callback again)",
    )
    t.set_defaults(func=cmd_train)


def _add_eval(sub: Any) -> None:
    """``snrl eval``: a deterministic evaluation of a run."""
    e = _run_parser(
        sub, "eval", cmd_eval, "deterministic evaluation of a run; prints one JSON object"
    )
    e.add_argument("--episodes", type=EPISODES, default=20)
    e.add_argument("--seed", type=SEED, default=123)
    _checkpoint_flag(e)
    e.add_argument(
        "--lesson",
        default=None,
        metavar="N|NAME",
        help="a run with a curriculum: evaluate on this lesson (number from 0, or name; "
        "default: the final lesson)",
    )
    _style_flag(e, "trial tasks: psychometric.png and behaviour.png")


def _add_render(sub: Any) -> None:
    """``snrl render``: one episode of a run as a video."""
    r = _run_parser(sub, "render", cmd_render, "roll out one episode of a run and write a video")
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
    r.add_argument(
        "--layout",
        choices=("16:9", "compact"),
        default=None,
        help="frame shape: 16:9 fills a slide (default for MP4), compact is as large as the "
        "content needs (default for GIF)",
    )


def _add_analyze(sub: Any) -> None:
    """``snrl analyze``: spike-train statistics and figures of a run."""
    a = _run_parser(
        sub,
        "analyze",
        cmd_analyze,
        "spike-train statistics, E/I balance and figures of a run (or of a comparison)",
        run_dir_help="a run directory, or a comparison directory",
    )
    a.add_argument(
        "--episodes",
        type=_int_in(1, 10**6),  # one at a time, in constant memory: no env-count bound
        default=20,
        help="episodes (default 20)",
    )
    _checkpoint_flag(a)
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
    _style_flag(a, "the figures")
    a.add_argument(
        "--no-decode",
        dest="decode",
        action="store_false",
        help="trial tasks: skip decoding, dimensionality and TDR (decoding.png, tdr.png)",
    )
    a.add_argument(
        "--shuffles",
        type=_int_in(0, 10_000),
        default=20,
        metavar="N",
        help="label shuffles of the decoding's null distribution (default 20; 0: none)",
    )
    a.add_argument(
        "--dpca",
        action="store_true",
        help="trial tasks: also the demixed PCA components of the policy's first layer "
        "(Kobak et al. 2016, fixed ridge; dpca.png and dynamics.dpca in summary.json)",
    )
    a.add_argument(
        "--no-initial",
        dest="compare_initial",
        action="store_false",
        help="skip rebuilding the initial weights from the run's seed (connectivity after "
        "training only)",
    )
    a.add_argument(
        "--fixed-points",
        action="store_true",
        help="also find the fixed and slow points of the policy's first LIF/ALIF layer under "
        "each frozen task input (mean-field rate approximation; fixed_points.png)",
    )
    a.add_argument(
        "--fixed-points-beta",
        type=float,
        default=0.3,
        metavar="W",
        help="escape-noise width of the rate approximation, membrane units (default 0.3)",
    )


def _add_perturb(sub: Any) -> None:
    """``snrl perturb``: evaluation with part of the policy silenced (docs/analysis.md)."""
    p = _run_parser(
        sub,
        "perturb",
        cmd_perturb,
        "evaluate a run with E or I neurons silenced or stimulated, current noise, or a "
        "task-variance cluster lesioned, side by side with the unperturbed run (evaluation "
        "only; the checkpoint is not changed)",
    )
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--silence", choices=("E", "I"), help="silence this population")
    kind.add_argument(
        "--stimulate",
        choices=("E", "I"),
        help="add --current X to the input current of this population's neurons",
    )
    kind.add_argument(
        "--noise",
        type=float,
        default=None,
        metavar="S",
        help="add Gaussian current noise of SD S per neuron step to every neuron",
    )
    kind.add_argument(
        "--lesion",
        choices=("cluster",),
        help="silence the neurons of task-variance cluster --cluster K (multitask runs; "
        "run `snrl analyze` first)",
    )
    p.add_argument(
        "--current",
        type=float,
        default=None,
        metavar="X",
        help="--stimulate: current added per neuron step (membrane units, threshold 1)",
    )
    p.add_argument(
        "--cluster", type=int, default=None, metavar="K", help="--lesion cluster: which one"
    )
    p.add_argument(
        "--clusters",
        default=None,
        metavar="FILE",
        help="--lesion cluster: the summary.json of `snrl analyze` holding the clusters "
        "(default DIR/analysis/summary.json)",
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=None,
        help="--silence/--stimulate: share of the population chosen in each spiking layer, "
        "in [0, 1] (default 1)",
    )
    p.add_argument(
        "--period",
        default=None,
        help="NeuroGym tasks: perturb only during this trial period (e.g. stimulus, delay, "
        "decision; default: always)",
    )
    p.add_argument("--episodes", type=EPISODES, default=20)
    p.add_argument("--seed", type=SEED, default=123, help="first env seed (default 123)")
    p.add_argument(
        "--choice-seed", type=SEED, default=0, help="seed of the choice of neurons (default 0)"
    )
    p.add_argument(
        "--noise-seed", type=SEED, default=0, help="seed of the current noise (default 0)"
    )
    _checkpoint_flag(p)
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default DIR/perturb)")
    _style_flag(p, "perturb.png")


def _add_export(sub: Any) -> None:
    """``snrl export``: a run's policy out of snrl (docs/interop.md)."""
    x = _run_parser(sub, "export", cmd_export, "write a run's policy as a NIR graph")
    x.add_argument("--nir", required=True, metavar="FILE.nir", help="the NIR file to write")
    _checkpoint_flag(x)


def _add_serve_env(sub: Any) -> None:
    """``snrl serve-env``: an env served over HTTP (docs/remote.md)."""
    v = sub.add_parser(
        "serve-env", help="serve a gymnasium env over HTTP for `--env http://...` (docs/remote.md)"
    )
    v.add_argument("env_id", metavar="ENV_ID", help="gymnasium id or module:Class to serve")
    _server_flags(
        v, 8765, "the token clients send (default: $SNRL_ENV_TOKEN, else a new one, printed once)"
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


def _add_dashboard(sub: Any) -> None:
    """``snrl dashboard``: the local web dashboard (docs/dashboard.md)."""
    w = sub.add_parser(
        "dashboard", help="a local web page to launch, watch and compare runs (docs/dashboard.md)"
    )
    w.add_argument(
        "runs_dir",
        nargs="?",
        default="runs",
        metavar="RUNS_DIR",
        help="the folder that holds your runs (default runs), or one run directory: that run alone",
    )
    _server_flags(w, 8770, "the token of the URL (default: a new one)")
    w.add_argument(
        "--max-runs",
        type=_int_in(1, 64),
        default=2,
        help="most runs (and renders) the page starts at once (default 2)",
    )
    w.set_defaults(func=cmd_dashboard)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="snrl", description="Reinforcement learning with spiking neural networks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_demo(sub)
    _add_train(sub)
    _add_eval(sub)
    _add_render(sub)
    _add_analyze(sub)
    _add_perturb(sub)
    _add_export(sub)
    _add_serve_env(sub)
    _add_dashboard(sub)

    from snrl.experiments.cli import add_parsers

    add_parsers(sub)
    return p
