"""Targeted dimensionality reduction and demixed variance of a trained run: the numbers and
the figure of docs/analysis.md ("Worked example: PDM, targeted dimensionality reduction").

Loads ``RUN/checkpoints/best.pt`` (read only), analyses ``--episodes`` deterministic
episodes (env seeds ``--seed``, ``--seed + 1``, ...) as ``snrl analyze RUN --episodes N``
does (same defaults: 3-step causal boxcar, 40 steps from each trial start, 20 label shuffles
for the decoding), prints the TDR and demixed-variance numbers as one JSON object, and
writes the TDR figure (``--png``) and the demixed PCA figure of ``snrl analyze --dpca``
(``--dpca-png``; 256-colour PNGs as benchmarks/docs_png.py makes).

Usage::

    python benchmarks/bench_tdr.py /work/runs/pdm100 --png docs/img/tdr_pdm.png
    python benchmarks/bench_tdr.py runs/pdm100 --dpca-png docs/img/dpca_pdm.png
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

# one BLAS thread, as torch gets one (a benchmark script may; a library never does)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402


def _first_significant(res: dict, p_max: float) -> int | None:
    """The first bin from which every later decoded bin has p <= p_max."""
    p = [1.0 if v is None else v for v in res["p_value"]]
    acc = [v for v in res["accuracy"]]
    last = max((i for i, a in enumerate(acc) if a is not None), default=-1)
    for i in range(last + 1):
        if all(q <= p_max for q in p[i : last + 1]):
            return i
    return None


def _dpca_numbers(dp: dict, tdr: dict) -> dict:
    """Demixed PCA (``snrl analyze --dpca``: the same z-scored condition-mean table as the
    demixed variance): each marginalization's first two components (explained variance, the
    share of the first component's variance from its own marginalization) and the cosine of
    the decision and stimulus encoders with the TDR choice and stimulus axes."""
    if "marginalizations" not in dp:
        return dp
    margs = dp["marginalizations"]
    out = {
        k: {
            "share": round(float(v["share"]), 4),
            "explained_variance": np.round(v["explained_variance"][:2], 4).tolist(),
            "own_share_first": round(float(v["demixing"][k][0]), 4),
        }
        for k, v in margs.items()
    }
    for marg, axis in (("decision", "choice"), ("stimulus", "stimulus")):
        if axis in tdr.get("axes", {}):
            vec = np.asarray(tdr["axes"][axis]["vector"], dtype=np.float64)
            enc = np.asarray(margs[marg]["encoder"], dtype=np.float64)[:, 0]
            out[marg][f"abs_cos_with_tdr_{axis}"] = round(float(abs(enc @ vec)), 3)
    out["table"] = {"stimulus_levels": dp["stimulus_levels"], "decisions": dp["decisions"]}
    return out


def _palette_png(fig, path: Path, name: str) -> None:
    import sys

    from snrl.analysis.figures import save_figure

    sys.path.insert(0, str(Path(__file__).parent))
    from docs_png import palette_png

    with tempfile.TemporaryDirectory() as tmp:
        src = save_figure(fig, Path(tmp) / name)
        before, after = palette_png(src, path)
    print(f"{path}: {before / 1e3:.0f} kB -> {after / 1e3:.0f} kB")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--dpca-png", type=Path, default=None, help="the dPCA figure (dpca.png)")
    args = ap.parse_args(argv)

    import snrl
    from snrl.analysis import analyze
    from snrl.analysis.tdr import dpca_figure, tdr_figure

    algo = snrl.load(str(args.run / "checkpoints" / "best.pt"))
    res = analyze(algo, episodes=args.episodes, seed=args.seed, compare_initial=False, dpca=True)
    algo.close()
    dyn = res.dynamics()
    tdr = dyn["tdr"]
    step = dyn["bin_seconds"]
    order = tdr["order"]
    cos = np.asarray(tdr["cos_raw"])
    proj = tdr["projections"]
    out = {
        "episodes": args.episodes,
        "n_trials": tdr["n_trials"],
        "variables": tdr["variables"],
        "n_pcs": tdr["n_pcs"],
        "pcs_variance": round(tdr["pcs_variance"], 4),
        "axes": {
            k: {
                "t_max_s": round((v["t_max_bin"] + 1) * step, 3),
                "explained_variance": round(v["explained_variance"], 4),
            }
            for k, v in tdr["axes"].items()
        },
        "angle_deg_before_qr": {
            f"{order[i]}-{order[j]}": round(float(np.degrees(np.arccos(abs(cos[i, j])))), 1)
            for i in range(len(order))
            for j in range(i + 1, len(order))
        },
        "demixed_variance": {
            k: (np.round(v, 4).tolist() if isinstance(v, (np.ndarray, float)) else v)
            for k, v in tdr["demixed_variance"].items()
        },
        "choice_decoding_significant_from_s": None,
        "projection_at": {},
    }
    first = _first_significant(dyn["decoding"]["choice"], 1 / 21 + 1e-9)
    if first is not None:
        out["choice_decoding_significant_from_s"] = round((first + 1) * step, 3)
    for t_s in (0.5, 1.0, 2.0):
        b = int(round(t_s / step)) - 1
        out["projection_at"][f"{t_s}s"] = {
            g: [round(float(p[name][b]), 2) for name in order] for g, p in proj.items()
        }
    out["n"] = tdr["n"]
    out["dpca"] = _dpca_numbers(dyn["dpca"], tdr)
    print(json.dumps(out, indent=1))
    if args.png is not None:
        _palette_png(tdr_figure(f"{res.network}: {dyn['layer']}", tdr, step), args.png, "tdr.png")
    if args.dpca_png is not None and "marginalizations" in dyn["dpca"]:
        fig = dpca_figure(f"{res.network}: {dyn['layer']}", dyn["dpca"], step)
        _palette_png(fig, args.dpca_png, "dpca.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
