"""The outputs of a comparison: runs.csv, summary.csv/.md, pairwise.csv, curves.png/.svg and
report.md, all rebuilt from the run records (never appended to)."""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snrl.agents.base import EVAL_SEED_OFFSET
from snrl.experiments.stats import (
    bootstrap_ci,
    bootstrap_ci_columns,
    mann_whitney_u,
    quantile,
    steps_to_threshold,
)
from snrl.io import atomic_write_bytes, atomic_write_text

__all__ = ["aggregate_curves", "summarize", "write_outputs", "ENERGY_FORMULAS"]

ENERGY_FORMULAS = (
    "Energy proxies are per env step for the policy network at inference, with S network "
    "steps per env step, N_l units, F_l fan-in and O_l fan-out (recurrent synapses + next "
    "layer's width) of layer l, and r_l its mean spike rate (spikes per neuron per network "
    "step) measured during the final deterministic evaluation. Spiking: "
    "SOP = S * sum_l r_l * N_l * O_l over the spiking layers (spikes x fan-out); their dense "
    "input current from the observation is MAC = S * F_0 * N_0. ANN: MAC = F_0 * N_0 + "
    "sum_l N_l * O_l (every weight once; GRU/LSTM: gates g = 3/4, MAC = g N (F + N) + "
    "N (O - N)). Biases, nonlinearities and membrane updates are not counted."
)


def eval_note(specs: Sequence[Any]) -> str:
    """Why the final eval of ``specs`` (the runs) and the last ``eval_return_mean`` of their
    ``metrics.csv`` differ, with the numbers these runs used."""

    def values(xs: Any) -> str:
        return ", ".join(str(x) for x in sorted(set(xs))) or "none"

    return (
        "The final eval here and the last `eval_return_mean` in a run's `metrics.csv` "
        "evaluate the same last weights on different episodes: the final eval plays "
        f"{values(s.eval_episodes for s in specs)} episodes (`--eval-episodes`) with env `i` "
        f"seeded `--eval-seed + i` (`--eval-seed` {values(s.eval_seed for s in specs)}), the "
        "periodic evaluation during training plays the config's `eval_episodes` "
        f"({values(s.config['eval_episodes'] for s in specs)}) with env `i` seeded "
        f"`seed + {EVAL_SEED_OFFSET} + i`, so the two means differ."
    )


def _num(value: Any) -> float:
    if value is None:
        return math.nan
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    return float(value)


def _read_curve(run_dir: str | Path) -> tuple[np.ndarray, np.ndarray] | None:
    from snrl.training.metrics import read_metrics

    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        return None
    try:
        m = read_metrics(path)
    except ValueError:
        return None
    if "env_step" not in m or "episode_return_mean" not in m or m["env_step"].size == 0:
        return None
    return m["env_step"].astype(np.float64), m["episode_return_mean"].astype(np.float64)


def aggregate_curves(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], *, n_points: int = 200, seed: int = 0
) -> dict[str, np.ndarray]:
    """Mean learning curve over seeds with a 95% bootstrap band.

    Each curve is linearly interpolated (ignoring NaN rows) onto ``n_points`` env steps
    spanning the longest curve; a curve contributes only inside its own range.

    Returns:
        ``{"steps", "mean", "low", "high", "n"}``, each (n_points,).
    """
    curves = [(s[np.isfinite(r)], r[np.isfinite(r)]) for s, r in curves]
    curves = [(s, r) for s, r in curves if s.size]
    if not curves:
        empty = np.zeros(0)
        return {"steps": empty, "mean": empty, "low": empty, "high": empty, "n": empty}
    lo = min(float(s[0]) for s, _ in curves)
    hi = max(float(s[-1]) for s, _ in curves)
    steps = np.linspace(lo, hi, n_points) if hi > lo else np.array([lo])
    vals = np.full((len(curves), steps.size), np.nan)
    for i, (s, r) in enumerate(curves):
        inside = (steps >= s[0]) & (steps <= s[-1])
        vals[i, inside] = np.interp(steps[inside], s, r)
    mean = np.full(steps.size, np.nan)
    low = np.full(steps.size, np.nan)
    high = np.full(steps.size, np.nan)
    finite = np.isfinite(vals)
    n = finite.sum(axis=0)
    # one bootstrap per set of seeds that covers a step (usually one set for all steps)
    for mask in {tuple(col) for col in finite.T if col.any()}:
        cols = np.flatnonzero((finite.T == np.array(mask)).all(axis=1))
        block = vals[np.array(mask)][:, cols]
        mean[cols] = block.mean(axis=0)
        low[cols], high[cols] = bootstrap_ci_columns(block, n_boot=2000, seed=seed)
    return {"steps": steps, "mean": mean, "low": low, "high": high, "n": n}


def _groups(specs: Sequence[Any]) -> list[str]:
    seen: list[str] = []
    for s in specs:
        if s.group not in seen:
            seen.append(s.group)
    return seen


def summarize(
    specs: Sequence[Any], runs: Sequence[dict[str, Any]], *, threshold: float | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One summary row per group and the pairwise Mann-Whitney tests (see summary.md)."""
    by_name = {r["name"]: r for r in runs}
    thr = math.nan if threshold is None else float(threshold)
    summary: list[dict[str, Any]] = []
    finals: dict[str, list[float]] = {}
    for group in _groups(specs):
        members = [s for s in specs if s.group == group]
        recs = [by_name.get(s.name, {}) for s in members]
        done = [(s, r) for s, r in zip(members, recs) if r.get("status") == "done"]
        evals = [_num(r.get("eval_mean")) for _, r in done]
        finals[group] = evals
        low, high = bootstrap_ci(evals) if evals else (math.nan, math.nan)
        reach = []
        for s, _ in done:
            curve = _read_curve(s.run_dir)
            reach.append(steps_to_threshold(*curve, thr) if curve else math.nan)
        reach = [x for x in reach if not math.isnan(x)]
        row: dict[str, Any] = {
            "group": group,
            "backbone": members[0].backbone,
            "grid": ";".join(f"{k}={v}" for k, v in members[0].grid.items()),
            "n_runs": len(members),
            "n_done": len(done),
            "n_failed": sum(r.get("status") == "failed" for r in recs),
            "eval_mean": float(np.mean(evals)) if evals else math.nan,
            "eval_ci_low": low,
            "eval_ci_high": high,
            "threshold": thr,
            "steps_to_threshold_median": quantile(reach, 0.5) if reach else math.nan,
            "steps_to_threshold_q25": quantile(reach, 0.25) if reach else math.nan,
            "steps_to_threshold_q75": quantile(reach, 0.75) if reach else math.nan,
            "n_reached": sum(math.isfinite(x) for x in reach),
        }
        for key in ("wall_time_s", "env_steps_per_s", "params", "policy_params"):
            vals = [_num(r.get(key)) for _, r in done]
            row[key] = float(np.mean(vals)) if vals else math.nan
        for key in ("sops_per_step", "macs_per_step"):
            vals = [_num(r.get(key)) for _, r in done]
            vals = [v for v in vals if not math.isnan(v)]
            row[key] = float(np.mean(vals)) if vals else math.nan
        layers: dict[str, list[float]] = {}
        for _, r in done:
            # ``firing_rates``: the key in status files of earlier versions
            for layer, rate in (r.get("spike_rates", r.get("firing_rates")) or {}).items():
                layers.setdefault(layer, []).append(_num(rate))
        row["spike_rates"] = {k: float(np.mean(v)) for k, v in layers.items()}
        summary.append(row)
    pairwise = []
    for a, b in itertools.combinations(finals, 2):
        if not finals[a] or not finals[b]:
            continue
        test = mann_whitney_u(finals[a], finals[b])
        pairwise.append(
            {
                "group_a": a,
                "group_b": b,
                "n_a": len(finals[a]),
                "n_b": len(finals[b]),
                "mean_a": float(np.mean(finals[a])),
                "mean_b": float(np.mean(finals[b])),
                "u": test.u,
                "p_value": test.p_value,
                "method": test.method,
            }
        )
    return summary, pairwise


def _csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in columns])
    return buf.getvalue()


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) or math.isinf(v) else "nan"
    return str(v)


def _flat_summary(summary: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    layers: list[str] = []
    for row in summary:
        for k in row["spike_rates"]:
            if k not in layers:
                layers.append(k)
    flat = []
    for row in summary:
        r = {k: v for k, v in row.items() if k != "spike_rates"}
        for k in layers:
            r[f"spike_rate_{k}"] = row["spike_rates"].get(k, math.nan)
        flat.append(r)
    cols = [k for k in summary[0] if k != "spike_rates"] if summary else []
    return flat, cols + [f"spike_rate_{k}" for k in layers]


def _g(v: Any, fmt: str = ".1f") -> str:
    v = _num(v)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "never"
    return format(v, fmt)


def _steps(v: Any) -> str:
    v = _num(v)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "not reached"
    return f"{v / 1000:.1f}k"


def summary_markdown(
    summary: Sequence[dict[str, Any]], pairwise: Sequence[dict[str, Any]], *, threshold: Any
) -> str:
    """The tables of summary.md (Markdown)."""
    thr = _g(threshold, "g")
    layers: list[str] = []
    for r in summary:
        layers += [k for k in r["spike_rates"] if k not in layers]
    lines = [
        "| backbone / grid point | runs done | final eval mean [95% CI] | "
        f"env steps to {thr} (median [IQR], reached) | wall time (s) | env steps/s | "
        f"params | {''.join(f'spike_rate_{k} | ' for k in layers)}SOP / env step | "
        "MAC / env step |",
        "|---" * (9 + len(layers)) + "|",
    ]
    for r in summary:
        rates = "".join(f"{_g(r['spike_rates'].get(k), '.3f')} | " for k in layers)
        reach = (
            f"{_steps(r['steps_to_threshold_median'])} [{_steps(r['steps_to_threshold_q25'])}, "
            f"{_steps(r['steps_to_threshold_q75'])}], {r['n_reached']}/{r['n_done']}"
        )
        lines.append(
            f"| {r['group']} | {r['n_done']}/{r['n_runs']} | {_g(r['eval_mean'])} "
            f"[{_g(r['eval_ci_low'])}, {_g(r['eval_ci_high'])}] | {reach} | "
            f"{_g(r['wall_time_s'], '.0f')} | {_g(r['env_steps_per_s'], '.0f')} | "
            f"{_g(r['params'], '.0f')} | {rates}{_g(r['sops_per_step'], '.0f')} | "
            f"{_g(r['macs_per_step'], '.0f')} |"
        )
    lines += [
        "",
        "Final eval: deterministic evaluation of the last checkpoint of each seed; the "
        "interval is a 95% percentile bootstrap of the mean over seeds. Env steps to the "
        "threshold: first logged update whose mean training return over the last 100 "
        "episodes reaches it. spike_rate_<layer>: spikes per neuron per network step of "
        "that spiking policy layer during the final evaluation (mean over seeds).",
        "",
        ENERGY_FORMULAS,
    ]
    if pairwise:
        lines += [
            "",
            "Pairwise two-sided Mann-Whitney U tests on the per-seed final eval means:",
            "",
            "| A | B | mean A | mean B | U | p-value | method |",
            "|---|---|---|---|---|---|---|",
        ]
        for p in pairwise:
            lines.append(
                f"| {p['group_a']} | {p['group_b']} | {_g(p['mean_a'])} | {_g(p['mean_b'])} "
                f"| {p['u']:g} | {p['p_value']:.4g} | {p['method']} |"
            )
    return "\n".join(lines) + "\n"


#: Fewer done seeds than this in a group: the report and the figure warn that the bootstrap
#: intervals and the Mann-Whitney p-values say little.
MIN_SEEDS = 3


def few_seeds_warning(n_seeds: int) -> str:
    """The warning printed in report.md and on curves.png when a group has few seeds."""
    return (
        f"Only {n_seeds} seed{'s' if n_seeds != 1 else ''} per group: the 95% CIs and "
        f"p-values mean little with so few seeds (use at least {MIN_SEEDS}, better 5)."
    )


def curves_figure(
    groups: dict[str, dict[str, np.ndarray]],
    *,
    title: str,
    threshold: float | None,
    warning: str | None = None,
) -> Any:
    """The figure of :func:`plot_curves` (a matplotlib Figure on its own canvas).

    The y-range comes from the curves and their bands alone; the threshold line is drawn
    only where it falls inside that range, else a note on the axes says where it lies.
    ``warning`` (e.g. too few seeds) is printed on the figure under the title.
    """
    from matplotlib.ticker import FuncFormatter

    from snrl.palette import group_styles
    from snrl.plot._util import new_figure
    from snrl.plot.labels import group_label
    from snrl.training.plots import DPI, FONT, SIZE, fit_title, steps_label

    fig = new_figure(*SIZE, dpi=DPI)  # its own canvas: no pyplot, no global backend change
    ax = fig.add_subplot()
    # one distinct (colour, line style) per group, however many groups there are
    drawn = False
    for (label, c), (color, ls) in zip(groups.items(), group_styles(len(groups))):
        if c["steps"].size == 0:
            continue
        n = int(c["n"].max()) if c["n"].size else 0
        ax.plot(c["steps"], c["mean"], lw=2.5, color=color, ls=ls,
                label=f"{group_label(label)} (n={n})")  # fmt: skip
        ax.fill_between(c["steps"], c["low"], c["high"], color=color, alpha=0.15)
        drawn = True
    if threshold is not None and math.isfinite(threshold):
        lo, hi = ax.get_ylim()  # the data's range (autoscaled, with matplotlib's margins)
        if not drawn or lo <= threshold <= hi:
            ax.axhline(threshold, color="0.4", ls="--", lw=1.5, label=f"threshold {threshold:g}")
        else:
            where = "above" if threshold > hi else "below"
            ax.text(0.99, 0.98 if where == "above" else 0.02,
                    f"threshold {threshold:g}: {where} this range",
                    transform=ax.transAxes, ha="right", va="top" if where == "above" else "bottom",
                    fontsize=FONT["tick"], color="0.3")  # fmt: skip
        if drawn:
            ax.set_ylim(lo, hi)
    ax.set_xlabel("environment steps", fontsize=FONT["label"])
    ax.set_ylabel("training episode return (running mean)", fontsize=FONT["label"])
    ax.xaxis.set_major_formatter(FuncFormatter(steps_label))
    ax.tick_params(labelsize=FONT["tick"])
    heading = ax.set_title(title, fontsize=FONT["title"])
    if warning:
        fig.text(0.5, 0.005, warning, ha="center", va="bottom", fontsize=FONT["tick"],
                 color="#b00000", wrap=True)  # fmt: skip
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT["tick"], loc="best")
    rect = (0, 0.05 if warning else 0, 1, 1)
    fig.tight_layout(rect=rect)
    if fit_title(heading, fig):
        fig.tight_layout(rect=rect)
    return fig


def plot_curves(
    groups: dict[str, dict[str, np.ndarray]],
    out_png: Path,
    out_svg: Path | None,
    *,
    title: str,
    threshold: float | None,
    warning: str | None = None,
) -> None:
    """Mean episode return vs env steps per group with its 95% bootstrap band (see
    :func:`curves_figure`), written to ``out_png`` and ``out_svg``."""
    fig = curves_figure(groups, title=title, threshold=threshold, warning=warning)
    try:
        for path, fmt in ((out_png, "png"), (out_svg, "svg")):
            if path is None:
                continue
            buf = io.BytesIO()
            fig.savefig(
                buf, format=fmt, dpi=fig.dpi, metadata={"Date": None} if fmt == "svg" else None
            )
            atomic_write_bytes(path, buf.getvalue())
    finally:
        fig.clear()


RUN_COLUMNS = [
    "name",
    "group",
    "seed",
    "status",
    "eval_mean",
    "eval_std",
    "env_steps",
    "wall_time_s",
    "env_steps_per_s",
    "params",
    "sops_per_step",
    "macs_per_step",
    "resumed",
    "seconds",
    "cpu_seconds",
    "error",
]


def write_outputs(
    out: Path,
    specs: Sequence[Any],
    runs: Sequence[dict[str, Any]],
    *,
    env_id: str,
    algo: str,
    threshold: float | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Write runs.csv, summary.csv, summary.md, pairwise.csv, curves.png/.svg, report.md."""
    out = Path(out)
    summary, pairwise = summarize(specs, runs, threshold=threshold)
    atomic_write_text(out / "runs.csv", _csv_text(runs, RUN_COLUMNS))
    flat, cols = _flat_summary(summary)
    atomic_write_text(out / "summary.csv", _csv_text(flat, cols))
    pw_cols = ["group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b", "u", "p_value", "method"]
    atomic_write_text(out / "pairwise.csv", _csv_text(pairwise, pw_cols))
    tables = summary_markdown(summary, pairwise, threshold=threshold)
    atomic_write_text(out / "summary.md", f"# Summary: {algo.upper()} on {env_id}\n\n{tables}")
    done = {r["name"] for r in runs if r.get("status") == "done"}
    curves: dict[str, dict[str, np.ndarray]] = {}
    for group in _groups(specs):
        cs = [_read_curve(s.run_dir) for s in specs if s.group == group and s.name in done]
        curves[group] = aggregate_curves([c for c in cs if c is not None])
    title = f"{algo.upper()} on {env_id}: mean over seeds, 95% bootstrap CI"
    n_done = [r["n_done"] for r in summary if r["n_done"]]
    few = min(n_done) if n_done and min(n_done) < MIN_SEEDS else None
    warning = few_seeds_warning(few) if few is not None else None
    plot_curves(curves, out / "curves.png", out / "curves.svg", title=title,
                threshold=threshold, warning=warning)  # fmt: skip
    failed = [r for r in runs if r.get("status") != "done"]
    lines = [
        f"# Comparison: {algo.upper()} on {env_id}",
        "",
        f"{len(runs)} runs ({len(runs) - len(failed)} done) in `runs/`; each is an ordinary "
        "run directory (`snrl eval runs/<name>`, `snrl render runs/<name> --out x.gif`, "
        "`snrl plot runs/<name>`).",
        "",
        "![learning curves](curves.png)",
        "",
    ]
    if warning:
        lines += [f"**Warning:** {warning}", ""]
    lines += ["## Summary", "", tables, eval_note(specs), ""]
    if failed:
        lines += ["## Runs that did not finish", ""]
        lines += [f"- `{r['name']}`: {r.get('status')} — {r.get('error') or ''}" for r in failed]
        lines.append("")
    atomic_write_text(out / "report.md", "\n".join(lines))
    return summary, pairwise
