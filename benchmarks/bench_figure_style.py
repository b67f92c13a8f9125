"""The analysis figures of a trained run in the ``paper`` and ``talk`` styles
(:mod:`snrl.analysis.style`), and the example of docs/analysis.md ("Figures for a paper or a
talk").

The run directory is only read: its checkpoint is loaded, ``--episodes`` episodes are
analysed (seeds ``--seed`` ...; no decoding, which these figures do not need) and the figures
are written into ``OUT/paper`` and ``OUT/talk``. Reported: the wall time of each step, and
per style the PNG size in pixels, its dpi and the files written. The policy's raster of the
first ``--window`` neuron steps (with the trial starts and period bands of a trial task) is
also drawn by itself, through the Python API, in the talk style (``OUT/raster_window.png``):
``snrl analyze``'s raster shows 500 steps, too many to see a 100 ms period. With
``--docs-img`` that figure is copied into the given path as a 256-colour PNG
(``benchmarks/docs_png.py``).

Usage::

    python benchmarks/bench_figure_style.py /work/runs/pdm100 --out /tmp/pdm100_styles \\
        --docs-img docs/img/raster_pdm_talk.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="a trained run directory (read only)")
    p.add_argument("--out", type=Path, required=True, help="folder for the figures")
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.add_argument("--window", type=int, default=80, help="neuron steps of the window raster")
    p.add_argument("--docs-img", type=Path, default=None, help="copy the window raster here")
    args = p.parse_args(argv)

    import torch
    from PIL import Image

    import snrl
    from snrl.analysis import analyze, write_figure
    from snrl.analysis.figures import raster_figure, trial_markers

    torch.set_num_threads(1)
    ckpt = args.run_dir / "checkpoints" / f"{args.checkpoint}.pt"
    if args.out.resolve().is_relative_to(args.run_dir.resolve()):
        p.error(f"--out {args.out} is inside the run directory (it is only read)")
    t0 = time.perf_counter()
    algo = snrl.load(ckpt)
    result = analyze(algo, episodes=args.episodes, seed=args.seed, decode=False)
    algo.close()
    report: dict = {
        "run": str(args.run_dir),
        "checkpoint": args.checkpoint,
        "episodes": args.episodes,
        "analyze_s": round(time.perf_counter() - t0, 1),
    }
    for style in ("paper", "talk"):
        t0 = time.perf_counter()
        written = result.write(args.out / style, style=style)
        with Image.open(args.out / style / "raster.png") as im:
            size, dpi = im.size, round(im.info["dpi"][0])
        report[style] = {
            "write_s": round(time.perf_counter() - t0, 1),
            "raster_px": size,
            "dpi": dpi,
            "files": sorted(w.name for w in written),
        }
    first = result.first
    markers = trial_markers(*first["markers"]) if "markers" in first else None
    layers = [dict(ly, name=f"policy: {ly['name']}") for ly in first["layers"]]
    fig = raster_figure(layers, result.dt, max_steps=args.window, markers=markers)
    window = write_figure(fig, args.out / "raster_window.png", style="talk")
    report["window"] = {"steps": args.window, "files": [w.name for w in window]}
    if markers:
        report["window"]["trials_started"] = sum(r < args.window for r in markers["starts"])
    if args.docs_img is not None:
        sys.path.insert(0, str(Path(__file__).parent))
        from docs_png import palette_png

        palette_png(window[0], args.docs_img)
        report["docs_img"] = str(args.docs_img)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
