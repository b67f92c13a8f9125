"""curves.png and report.md of a comparison, read back from the figure and the text (issue 39
item 5), on hand-written run records: no training."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from snrl.experiments.report import MIN_SEEDS, curves_figure, write_outputs
from tests.figure_checks import assert_slide_figure


def _curve(lo: float, hi: float) -> dict[str, np.ndarray]:
    steps = np.linspace(0, 1000, 5)
    mean = np.linspace(lo, hi, 5)
    return {"steps": steps, "mean": mean, "low": mean - 2, "high": mean + 2, "n": np.full(5, 2)}


def _texts(fig) -> list[str]:
    ax = fig.axes[0]
    return [t.get_text() for t in fig.texts + ax.texts]


def test_threshold_far_above_the_data_does_not_set_the_y_range():
    fig = curves_figure({"lif": _curve(10, 40)}, title="t", threshold=475.0)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    # the curves fill the axes: the bands' 8..42 plus matplotlib's 5% margins (1.7 each)
    assert (lo, hi) == pytest.approx((6.3, 43.7))
    assert not any(line.get_label().startswith("threshold") for line in ax.get_lines())
    assert "threshold 475: above this range" in _texts(fig)


def test_threshold_inside_the_data_is_drawn_and_keeps_the_range():
    fig = curves_figure({"lif": _curve(100, 500)}, title="t", threshold=475.0)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() == "threshold 475"]
    assert len(lines) == 1 and lines[0].get_ydata()[0] == 475.0
    lo, hi = ax.get_ylim()
    assert (lo, hi) == pytest.approx((77.8, 522.2))  # 98..502 plus 5% margins of 404


def test_warning_is_printed_on_the_figure():
    fig = curves_figure({"lif": _curve(0, 1)}, title="t", threshold=None, warning="few seeds!")
    assert "few seeds!" in [t.get_text() for t in fig.texts]


def _write_run(run_dir, returns, evals):
    run_dir.mkdir(parents=True)
    rows = ["env_step,episode_return_mean,eval_return_mean"]
    rows += [f"{100 * (i + 1)},{r},{e}" for i, (r, e) in enumerate(zip(returns, evals))]
    (run_dir / "metrics.csv").write_text("\n".join(rows) + "\n")


def _compare_dir(tmp_path, n_seeds):
    specs, runs = [], []
    for backbone in ("lif", "mlp"):
        for seed in range(n_seeds):
            name = f"{backbone}__seed{seed}"
            run_dir = tmp_path / "runs" / name
            _write_run(run_dir, [10.0 + seed, 20.0, 30.0], ["", "", 35.0])
            specs.append(SimpleNamespace(name=name, group=backbone, backbone=backbone,
                                         grid={}, run_dir=str(run_dir), eval_episodes=7,
                                         eval_seed=55, config={"eval_episodes": 3}))  # fmt: skip
            runs.append({"name": name, "group": backbone, "seed": seed, "status": "done",
                         "eval_mean": 31.0 + seed})  # fmt: skip
    write_outputs(tmp_path, specs, runs, env_id="CartPole-v1", algo="ppo", threshold=475.0)
    return (tmp_path / "report.md").read_text()


def test_report_warns_with_two_seeds_and_explains_the_two_evals(tmp_path):
    report = _compare_dir(tmp_path, 2)
    assert "**Warning:** Only 2 seeds per group: the 95% CIs and p-values mean little" in report
    # one sentence on why summary's final eval and metrics.csv's last eval differ
    assert "evaluate the same last weights on different episodes" in report
    assert "`--eval-seed + i`" in report and "`seed + 10000 + i`" in report
    # with the numbers these runs used, not the defaults
    assert "plays 7 episodes" in report and "`--eval-seed` 55" in report
    assert "the config's `eval_episodes` (3)" in report
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_has_no_warning_with_enough_seeds(tmp_path):
    report = _compare_dir(tmp_path, MIN_SEEDS)
    assert "Warning" not in report
    assert "different episodes" in report


def test_curves_png_is_slide_sized_with_readable_text(tmp_path):
    """curves.png had learning_curve.png's old faults (640x400, 8-10 pt, ticks "100000")."""
    from matplotlib.image import imread

    from snrl.experiments.report import plot_curves

    groups = {"lif": _curve(10, 40)}
    groups["lif"]["steps"] = np.linspace(0, 100_000, 5)
    fig = curves_figure(groups, title="t", threshold=475.0, warning="few seeds!")
    ax = fig.axes[0]
    assert_slide_figure(fig, ax, "100k")
    assert min(t.get_fontsize() for t in fig.texts + ax.texts) >= 16  # warning, threshold note
    plot_curves(groups, tmp_path / "c.png", tmp_path / "c.svg", title="t", threshold=None)
    assert imread(tmp_path / "c.png").shape[:2] == (1000, 1600)
    assert "<svg" in (tmp_path / "c.svg").read_text()
