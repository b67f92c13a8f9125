"""The behaviour readouts of docs/analysis.md ("Behaviour"), from real runs.

Trains PPO (Dale LIF, the defaults otherwise) on the batched native tasks
ContextDecisionMaking-v0 (explicit context), DelayComparison-v0, ReadySetGo-v0 and the
reaction-time PerceptualDecisionMaking-v0 (``reaction_time=True``) with ``snrl train``,
evaluates each with ``snrl eval --episodes N`` (env seeds 123...), prints the numbers
docs/analysis.md quotes and, with ``--img-dir``, copies each run's ``behaviour.png`` there as
``behaviour_<short>.png``.

Usage::

    python benchmarks/bench_behaviour.py --out runs/behaviour --img-dir docs/img
    python benchmarks/bench_behaviour.py --steps 20000 --episodes 10    # a quick look
    python benchmarks/bench_behaviour.py --tasks pdm_rt --img-dir docs/img   # one task
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
from pathlib import Path

from snrl.cli import main

TASKS = [
    ("cdm", "ContextDecisionMaking-v0", '{"use_expl_context": true}'),
    ("dc", "DelayComparison-v0", "{}"),
    ("rsg", "ReadySetGo-v0", "{}"),
    ("pdm_rt", "PerceptualDecisionMaking-v0", '{"reaction_time": true}'),
    # the same with a 2 s fixation and an error costing -1: waiting costs less reward rate
    (
        "pdm_rt_wait",
        "PerceptualDecisionMaking-v0",
        '{"reaction_time": true, "timing": {"fixation": 2000}, "rewards": {"fail": -1.0}}',
    ),
]


def _eval(run: Path, episodes: int) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["eval", str(run), "--episodes", str(episodes)]) == 0
    return json.loads(buf.getvalue())


def _summary(short: str, res: dict) -> list[str]:
    beh = res["behaviour"]
    e = beh["errors"]
    lines = [
        f"accuracy {res['accuracy']:.3f} over {res['n_trials']} trials; errors "
        f"{e['n_error']} ({e['n_wrong_choice']} wrong choice, {e['n_no_response']} no response)"
    ]

    def row(r: dict) -> str:
        return f"{r['accuracy']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] (n={r['n']})"

    if "context" in beh:
        for r in beh["context"]["by_context_congruency"]:
            lines.append(f"context {r['key'][0]} {r['key'][1]}: {row(r)}")
        for r in beh["context"].get("by_coherence", []):
            lines.append(f"relevant coherence {r['key']}: {row(r)}")
    if "accuracy_by_delay" in beh:
        for r in beh["accuracy_by_delay"]:
            lines.append(f"delay {r['delay_low']:.1f}-{r['delay_high']:.1f} s: {row(r)}")
    if "comparison" in beh:
        for r in beh["comparison"]["pairs"]:
            lines.append(f"f1 {r['f1']:g} f2 {r['f2']:g}: {row(r)}")
        for r in beh["comparison"]["weber"]:
            lines.append(f"|f1-f2|/f1 {r['key']:.3f}: {row(r)}")
    if "production" in beh:
        p = beh["production"]
        if p["fit"]:
            f = p["fit"]
            lines.append(
                f"t_p = {f['intercept']:.3f} + {f['slope']:.3f} t_s (slope se "
                f"{f['slope_se']:.3f}, r {f['r']:.3f}); {p['n_produced']} produced, "
                f"{p['n_no_response']} no response; mean CV {p['cv_mean']:.3f}"
            )
        if p["sd_vs_mean"]:
            sv = p["sd_vs_mean"]
            lines.append(f"sd = {sv['intercept']:.3f} + {sv['slope']:.3f} mean")
        for q in p["points"]:
            lines.append(
                f"t_s {q['sample']:.2f}: mean {q['mean']:.3f} sd {q['sd']:.3f} cv {q['cv']:.3f} "
                f"(n={q['n']})"
            )
    if "chronometric" in beh:
        c = beh["chronometric"]
        lines.append(f"{c['n_timed']} timed, {c['n_no_response']} no response; trend {c['trend']}")
        for kind in ("correct", "error"):
            for r in c[kind]:
                lines.append(
                    f"{kind} coh {r['key']:g}: RT mean {1000 * r['mean']:.0f} ms "
                    f"sem {1000 * r['sem']:.0f} median {1000 * r['median']:.0f} (n={r['n']})"
                )
    return [f"[{short}] {line}" for line in lines]


def run(
    out: Path, steps: int, episodes: int, seed: int, img_dir: Path | None, only: str = ""
) -> None:
    chosen = [t for t in TASKS if not only or t[0] in only.split(",")]
    for short, task, kwargs in chosen:
        d = out / (task if short != "pdm_rt_wait" else f"{task}-wait")
        args = ["train", "--env", f"snrl.tasks:{task}", "--env-kwargs", kwargs]
        args += ["--steps", str(steps), "--seed", str(seed), "--quiet", "--force", "--out", str(d)]
        assert main(args) == 0
        res = _eval(d, episodes)
        print("\n".join(_summary(short, res)), flush=True)
        if img_dir is not None and "behaviour_png" in res:
            shutil.copyfile(res["behaviour_png"], img_dir / f"behaviour_{short}.png")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/behaviour"))
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--img-dir", type=Path, default=None)
    ap.add_argument("--tasks", default="", help="comma-separated: " + ",".join(t[0] for t in TASKS))
    a = ap.parse_args()
    run(a.out, a.steps, a.episodes, a.seed, a.img_dir, a.tasks)
