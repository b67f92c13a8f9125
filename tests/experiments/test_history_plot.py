"""snrl plot's history figure: sized and lettered like learning_curve.png (issue 39 item 6),
one quantity per axis with a log axis where it helps (item 3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.image import imread

from snrl.experiments import plot_history
from snrl.experiments import plots as plots_module
from snrl.training import MetricsWriter, read_metrics
from tests.figure_checks import assert_step_ticks

FIELDS = ["env_step", "episode_return_mean", "eval_return_mean", "policy_loss", "value_loss"]
FIELDS += ["approx_kl", "entropy", "explained_variance", "spike_rate_lif0"]


def _run(tmp_path, config=None):
    run = tmp_path / "lif__seed3"
    run.mkdir()
    with MetricsWriter(run / "metrics.csv", FIELDS) as w:
        for i in range(1, 6):
            w.write(
                {
                    "env_step": 10_000 * i,
                    "episode_return_mean": 20.0 * i,
                    "eval_return_mean": 25.0 * i if i % 2 == 0 else None,
                    "policy_loss": -0.01 * i,
                    "value_loss": 30.0 / i,
                    "approx_kl": 10.0 ** -(i - 1),  # 1 ... 1e-4: four decades
                    "entropy": 0.69 - 0.05 * i,
                    "explained_variance": -80.0 + 20 * i,
                    "spike_rate_lif0": 0.05,
                }
            )
    if config is not None:
        (run / "config.json").write_text(json.dumps(config))
    return run


CONFIG = {"algo": "ppo", "env": "CartPole-v1", "backbone": "lif", "hidden_size": 128}
CONFIG |= {"force_dale_law": True, "recurrent_sign": 0.2, "seed": 3}


def test_history_png_size_title_and_fonts(tmp_path):
    run = _run(tmp_path, CONFIG)
    png = plot_history(run)
    height, width = imread(png).shape[:2]
    assert width == 1600 and abs(height - 1120) <= 1  # 7 panels: 3 rows of 3.4 in, + 1 in

    m = read_metrics(run / "metrics.csv")
    panels = [("return", ["episode_return_mean", "eval_return_mean"]), ("KL", ["approx_kl"])]
    panels += [("value loss", ["value_loss"]), ("entropy", ["entropy"])]
    fig = plots_module._figure(m, panels, plots_module._run_title(run))
    fig.canvas.draw()
    title = fig._suptitle.get_text()
    assert title == "PPO · LIF · Dale 80/20 · 128 neurons · seed 3 · CartPole-v1"
    assert fig._suptitle.get_fontsize() >= 20
    for ax in fig.axes:
        assert ax.title.get_fontsize() >= 16
        assert min(t.get_fontsize() for t in ax.get_xticklabels()) >= 14
        assert_step_ticks(ax, "20k")
    scales = {ax.get_title(): ax.get_yscale() for ax in fig.axes}
    # KL spans four decades; the value loss only one; entropy is not all positive-spanning
    assert scales == {"return": "linear", "KL": "log", "value loss": "linear", "entropy": "linear"}
    bottom = "environment steps"
    assert [ax.get_xlabel() for ax in fig.axes] == ["", "", bottom, bottom]  # 2 rows of 2


def test_history_title_without_config_is_the_folder(tmp_path):
    run = _run(tmp_path)
    (run / "config.json").write_text("[1, 2]")  # not snrl's
    assert plots_module._run_title(run) == "training history"
    assert plot_history(run, tmp_path / "h.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("values", "log"),
    [([1.0, 0.5, 0.001], True), ([1.0, 0.02], False), ([1.0, 0.0, 1e-5], False), ([3.0], False)],
)
def test_log_scale_rule(values, log):
    assert plots_module.log_scale(np.array(values)) is log


def test_history_long_title_stays_inside(tmp_path):
    run = _run(tmp_path, CONFIG | {"env": "neurogym:PerceptualDecisionMakingDelayResponse-v0"})
    m = read_metrics(run / "metrics.csv")
    title = f"{plots_module._run_title(run)}\n{run.name}" + " · a long tail" * 8
    fig = plots_module._figure(m, [("return", ["episode_return_mean"])], title)
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
