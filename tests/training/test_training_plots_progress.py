"""plot_learning_curve and Progress."""

from __future__ import annotations

import os

import numpy as np
import pytest
from matplotlib.image import imread

from snrl.errors import UserError
from snrl.training import MetricsWriter, Progress, plot_learning_curve, read_metrics
from snrl.training import plots as plots_module
from snrl.training import progress as progress_module
from tests.figure_checks import assert_slide_figure

FIELDS = ["env_step", "episode_return_mean", "eval_return_mean"]


def _metrics(path):
    with MetricsWriter(path, FIELDS) as w:
        w.write({"env_step": 100, "episode_return_mean": 10.0})
        w.write({"env_step": 200, "episode_return_mean": 20.0, "eval_return_mean": 25.0})
        w.write({"env_step": 300})  # no finished episode in this update
        w.write({"env_step": 400, "episode_return_mean": 40.0, "eval_return_mean": 45.0})
    return path


def test_curves_skip_missing_values(tmp_path):
    metrics = read_metrics(_metrics(tmp_path / "metrics.csv"))
    fig = plots_module._figure(metrics, "t")
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == [
        "training episodes (mean return)",
        "evaluation (mean return)",
    ]
    np.testing.assert_array_equal(lines[0].get_xdata(), [100, 200, 400])
    np.testing.assert_array_equal(lines[0].get_ydata(), [10, 20, 40])
    np.testing.assert_array_equal(lines[1].get_xdata(), [200, 400])
    np.testing.assert_array_equal(lines[1].get_ydata(), [25, 45])


def test_png_written_atomically(tmp_path):
    csv = _metrics(tmp_path / "run" / "metrics.csv")
    png = plot_learning_curve(csv, tmp_path / "run" / "learning_curve.png", title="CartPole")
    image = imread(png)
    assert image.shape[:2] == (1000, 1600)  # a slide's size, not 640 x 400
    assert sorted(os.listdir(tmp_path / "run")) == [
        "learning_curve.png",
        "learning_curve.svg",
        "metrics.csv",
    ]
    svg = (tmp_path / "run" / "learning_curve.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "CartPole" in svg


def test_readable_fonts_and_tick_labels(tmp_path):
    metrics = read_metrics(_metrics(tmp_path / "metrics.csv"))
    metrics["env_step"] = metrics["env_step"] * 100  # 10k ... 40k
    fig = plots_module._figure(metrics, "PPO · LIF · Dale 80/20 · 128 neurons · seed 3")
    ax = fig.axes[0]
    assert_slide_figure(fig, ax, "20k")
    assert "Dale 80/20" in ax.get_title() and "seed 3" in ax.get_title()


@pytest.mark.parametrize(
    ("x", "text"), [(500, "500"), (20_000, "20k"), (1_500_000, "1.5M"), (0, "0"), (2500, "2.5k")]
)
def test_steps_label(x, text):
    assert plots_module.steps_label(x) == text


def test_trial_task_gets_an_accuracy_panel(tmp_path):
    path = tmp_path / "m.csv"
    fields = [*FIELDS, "trial_accuracy", "eval_trial_accuracy"]
    with MetricsWriter(path, fields) as w:
        w.write({"env_step": 100, "episode_return_mean": 15.0, "trial_accuracy": 0.5})
        w.write(
            {
                "env_step": 200,
                "episode_return_mean": 15.5,
                "trial_accuracy": 0.7,
                "eval_return_mean": 15.0,
                "eval_trial_accuracy": 0.85,
            }
        )
    fig = plots_module._figure(read_metrics(path), "t")
    assert len(fig.axes) == 2
    acc = fig.axes[1]
    assert acc.get_ylabel() == "trial accuracy"
    assert acc.get_ylim()[0] <= 0 and acc.get_ylim()[1] >= 1
    lines = {ln.get_label(): ln for ln in acc.get_lines()}
    np.testing.assert_array_equal(lines["training trials (accuracy)"].get_ydata(), [0.5, 0.7])
    np.testing.assert_array_equal(lines["evaluation (trial accuracy)"].get_ydata(), [0.85])
    # a task without trials keeps one panel
    assert len(plots_module._figure(read_metrics(_metrics(tmp_path / "n.csv")), "t").axes) == 1


@pytest.mark.parametrize("n_tasks", [2, 20])
def test_per_task_curves_named_up_to_six_tasks(tmp_path, n_tasks):
    """A multitask run draws one dashed line per task; past six tasks (yang19's 20) they
    share one legend entry instead of a legend taller than the panel."""
    path = tmp_path / "m.csv"
    tasks = [f"yang19.t{k}-v0" for k in range(n_tasks)]
    fields = [*FIELDS, "eval_trial_accuracy", *(f"eval_trial_accuracy/{t}" for t in tasks)]
    with MetricsWriter(path, fields) as w:
        for step in (100, 200):
            row = {"env_step": step, "episode_return_mean": 1.0, "eval_trial_accuracy": 0.5}
            w.write({**row, **{f"eval_trial_accuracy/{t}": 0.5 for t in tasks}})
    acc = plots_module._figure(read_metrics(path), "t").axes[1]
    dashed = [ln for ln in acc.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == n_tasks
    labels = [t.get_text() for t in acc.get_legend().get_texts()]
    task_labels = [label for label in labels if label.startswith("eval: ")]
    if n_tasks <= plots_module.MAX_TASK_LABELS:
        assert task_labels == [f"eval: yang19.t{k}" for k in range(n_tasks)]
    else:
        assert task_labels == [f"eval: each of {n_tasks} tasks"]


def test_plot_without_eval_column_and_empty(tmp_path):
    path = tmp_path / "m.csv"
    with MetricsWriter(path, ["env_step", "episode_return_mean"]) as w:
        w.write({"env_step": 1})
    fig = plots_module._figure(read_metrics(path), "t")
    assert fig.axes[0].get_lines() == []
    assert plot_learning_curve(path, tmp_path / "c.png").stat().st_size > 0


def test_plot_errors(tmp_path):
    with pytest.raises(UserError, match="must end in .png"):
        plot_learning_curve(tmp_path / "m.csv", tmp_path / "c.jpg")
    with pytest.raises(UserError, match="does not exist"):
        plot_learning_curve(tmp_path / "m.csv", tmp_path / "c.png")
    path = tmp_path / "m.csv"
    with MetricsWriter(path, ["env_step", "loss"]) as w:
        w.write({"env_step": 1, "loss": 0.5})
    with pytest.raises(UserError, match="has no column.*episode_return_mean"):
        plot_learning_curve(path, tmp_path / "c.png")


def test_progress_writes_lines_when_not_a_tty(capsys):
    with Progress(1000) as bar:  # pytest's captured stderr is not a terminal: log lines
        assert bar.disabled and bar.mode == "lines"
        bar.update(100, ret=1.5)
        assert bar.n == 100
    assert "env_step 100/1,000 (10 %)" in capsys.readouterr().err
    with Progress(1000, disable=True) as bar:
        bar.update(100, ret=1.5)
    assert capsys.readouterr().err == ""


def test_progress_shows_steps_return_and_sps(capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "_stderr_is_tty", lambda: True)
    bar = Progress(1000, initial=200)
    assert not bar.disabled
    bar.update(300, ret=12.3456, loss=None)
    bar.close()
    err = capsys.readouterr().err
    assert "500/1" in err  # 500 of 1.00k steps (unit_scale)
    assert "ret=12.35" in err and "sps=" in err and "loss" not in err
    assert Progress(10, disable=True).disabled


def test_long_title_breaks_at_separators_inside_the_figure(tmp_path):
    metrics = read_metrics(_metrics(tmp_path / "metrics.csv"))
    env = "neurogym:PerceptualDecisionMakingDelayResponse-v0"
    title = f"PPO · LIF · Dale 80/20 · 128 neurons · seed 1 · {env}"
    fig = plots_module._figure(metrics, title)
    fig.canvas.draw()
    heading = fig.axes[0].title
    box = heading.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # ran 70 px off the right edge before
    assert heading.get_text() == title.replace(f" · {env}", f"\n{env}")
    short = plots_module._figure(metrics, "PPO · LIF · CartPole-v1")
    assert short.axes[0].title.get_text() == "PPO · LIF · CartPole-v1"  # fits: unchanged
