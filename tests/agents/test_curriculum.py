"""Curricula: lesson validation (Python and TOML), promotion rules, the env rebuilt at a
promotion with the agent's state kept, checkpoints and ``--resume`` across a promotion,
``snrl eval --lesson`` and the promotions on the learning curve."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import snrl
from snrl.agents import DQNConfig, PPOConfig
from snrl.agents.curriculum import Curriculum, CurriculumProgress, Lesson, merge_env_kwargs
from snrl.config import config_from_dict, config_to_dict, load_config
from snrl.errors import UserError
from snrl.training.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
#: CartPole's Sutton-Barto reward (0 per step, -1 at the fall) makes an easy-to-tell lesson
SB = {"sutton_barto_reward": True}
SMALL = dict(n_envs=2, n_steps=16, hidden_size=16, eval_episodes=2, seed=0, backbone="mlp")


# ---- lessons and their errors --------------------------------------------------------------
@pytest.mark.parametrize(
    ("lessons", "expected"),
    [
        ([{"threshold": 1}, {}], "curriculum lesson 0: threshold=1 without a metric"),
        (
            [
                {"max_steps": 10},
                {"name": "long", "metric": "eval_return_mean", "threshold": 1, "window": 0},
            ],
            "curriculum lesson 1 ('long'): window=0",
        ),
        ([{"metric": "return", "threshold": 1}, {}], "curriculum lesson 0: metric='return'"),
        ([{"metric": "eval_return_mean"}, {}], "metric='eval_return_mean' needs a threshold"),
        ([{"treshold": 1}, {}], "did you mean 'threshold'?"),
        ([{"max_steps": 0}, {}], "curriculum lesson 0: max_steps=0"),
        ([{"max_steps": 5}, {"name": "mid"}, {}], "curriculum lesson 1 ('mid'): no promotion"),
        ([{"env_kwargs": [1, 2], "max_steps": 5}, {}], "curriculum lesson 0: env_kwargs=[1, 2]"),
        ([{"max_steps": 5, "threshold": math.nan, "metric": "eval_return_mean"}, {}], "finite"),
        ([], "curriculum has 0 lessons"),
        ([{"name": "a", "max_steps": 1}, {"name": "a"}], "two lessons are named 'a'"),
        ([3], "curriculum lesson 0 is a int"),
    ],
)
def test_a_bad_lesson_is_refused_naming_the_lesson_and_the_field(lessons, expected):
    with pytest.raises(UserError, match=None) as e:
        Curriculum(lessons)
    assert expected in str(e.value)


def test_lessons_given_as_objects_or_dicts_are_the_same_curriculum():
    a = Curriculum([Lesson(env_kwargs={"x": 1}, max_steps=5), Lesson(name="last")])
    b = Curriculum([{"env_kwargs": {"x": 1}, "max_steps": 5}, {"name": "last"}])
    assert a == b and len(a) == 2 and a.final == 1
    assert a.index("last") == 1 and a.index(None) == 1 and a.index("0") == 0 and a.index(-1) == 1
    with pytest.raises(UserError, match="no lesson named 'nope'"):
        a.index("nope")
    with pytest.raises(UserError, match=r"lesson=2 \(pass a lesson number 0..1"):
        a.index(2)


def test_lesson_env_kwargs_are_merged_into_nested_tables():
    base = {"dt": 100, "timing": {"stimulus": 500, "delay": 0}}
    assert merge_env_kwargs(base, {"timing": {"delay": 2000}}) == {
        "dt": 100,
        "timing": {"stimulus": 500, "delay": 2000},
    }
    assert base["timing"]["delay"] == 0  # the run's own options are untouched


def test_toml_lessons_parse_validate_and_round_trip_through_config_json(tmp_path):
    toml = tmp_path / "cur.toml"
    toml.write_text(
        'env = "CartPole-v1"\n'
        "[[curriculum.lesson]]\n"
        'name = "easy"\n'
        "max_steps = 64\n"
        'metric = "eval_return_mean"\n'
        "threshold = 20\n"
        "window = 2\n"
        "[curriculum.lesson.env_kwargs]\n"
        "sutton_barto_reward = true\n"
        "[[curriculum.lesson]]\n"
        'name = "hard"\n'
    )
    cfg = load_config(PPOConfig, toml_path=toml)
    cur = cfg.curriculum
    assert [x.name for x in cur] == ["easy", "hard"]
    assert cur[0].env_kwargs == SB and cur[0].threshold == 20.0 and cur[0].window == 2
    again = config_from_dict(PPOConfig, json.loads(json.dumps(config_to_dict(cfg))))
    assert again == cfg
    bad = tmp_path / "bad.toml"
    bad.write_text("[[curriculum.lesson]]\nmax_steps = 5\n[[curriculum.lesson]]\nwindow = -1\n")
    with pytest.raises(UserError, match=r"curriculum lesson 1: window=-1"):
        load_config(DQNConfig, toml_path=bad)
    bad.write_text("[curriculum]\nlessons = []\n")
    with pytest.raises(UserError, match="unknown key 'lessons' in \\[curriculum\\]"):
        load_config(PPOConfig, toml_path=bad)


# ---- promotion rules ----------------------------------------------------------------------
def test_promotion_takes_the_mean_of_the_last_window_evaluations_or_the_step_budget():
    cur = Curriculum(
        [
            {"metric": "eval_return_mean", "threshold": 10, "window": 2},
            {"max_steps": 100},
            {"metric": "eval_return_mean", "threshold": 0},
        ]
    )
    p = CurriculumProgress()
    ev = lambda v: {"eval_return_mean": v}  # noqa: E731
    assert not p.observe(cur, 10, ev(30.0))  # one evaluation: the window is not full
    assert not p.observe(cur, 20, None)  # a row without evaluation changes nothing
    assert not p.observe(cur, 30, ev(-11.0))  # mean(30, -11) = 9.5 < 10
    assert not p.observe(cur, 40, ev(math.nan))  # no trial ended: never promotes
    assert not p.observe(cur, 50, ev(12.0))  # mean(nan, 12) is nan
    assert p.observe(cur, 60, ev(8.0)) and p.lesson == 1  # mean(12, 8) = 10
    assert p.lesson_start == 60 and p.recent == []
    assert not p.observe(cur, 159, ev(1e9))  # lesson 1 has no metric: only its 100 steps
    assert p.observe(cur, 160, None) and p.lesson == 2 and p.promotions == [60, 160]
    assert not p.observe(cur, 170, ev(1e9)) and p.lesson == 2  # the last lesson stays
    with pytest.raises(UserError, match="promotes on eval_trial_accuracy"):
        q = CurriculumProgress()
        cur2 = Curriculum([{"metric": "eval_trial_accuracy", "threshold": 0.8}, {}])
        q.observe(cur2, 10, ev(1.0))
    q = CurriculumProgress()  # trial accuracy, where the evaluations report it
    assert q.observe(cur2, 10, {"eval_return_mean": 0.0, "eval_trial_accuracy": 0.8})
    back = CurriculumProgress.from_dict(p.to_dict(), cur)
    assert back == p
    with pytest.raises(UserError, match="at lesson 2 but the curriculum has 2 lessons"):
        CurriculumProgress.from_dict(p.to_dict(), cur2)


# ---- training ------------------------------------------------------------------------------
def _sb(envs) -> list[bool]:
    return [e.unwrapped._sutton_barto_reward for e in envs.envs]


def test_ppo_promotion_rebuilds_the_envs_and_keeps_agent_optimizer_and_normalizer(tmp_path):
    cur = snrl.Curriculum([{"name": "sb", "env_kwargs": SB, "max_steps": 64}, {"name": "std"}])
    algo = snrl.PPO(
        "CartPole-v1", curriculum=cur, eval_interval=64, run_dir=tmp_path / "run", **SMALL
    )
    starts = []  # (lesson, env step) of every env build
    real_start = algo._start_envs

    def start_envs():
        real_start()
        assert bool(algo._start.all())  # every episode restarts, states re-initialized
        starts.append((algo.lesson, algo.env_step, _sb(algo._envs)))

    algo._start_envs = start_envs
    algo.learn(64, progress=False)  # lesson 0 ends with this call's last row
    assert algo.lesson == 1 and algo.progress.promotions == [64]
    assert algo._envs is None  # the run ended at the promotion: no envs built for nothing
    norm_count = float(algo.agent.obs_norm.count)
    adam_steps = int(next(iter(algo.optimizer.state.values()))["step"])
    weights = [p.detach().clone() for p in algo.agent.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights, algo.agent.parameters()))
    algo.learn(96, progress=False)
    assert starts == [(0, 0, [True, True]), (1, 64, [False, False])]
    assert float(algo.agent.obs_norm.count) > norm_count  # the statistics keep accumulating
    assert int(next(iter(algo.optimizer.state.values()))["step"]) > adam_steps
    m = read_metrics(tmp_path / "run" / "metrics.csv")
    assert list(m["env_step"]) == [32, 64, 96] and list(m["lesson"]) == [0, 0, 1]
    # the evaluation of the promoting row was on lesson 0 (Sutton-Barto returns are < 0),
    # the next one on lesson 1 (+1 per step)
    assert m["eval_return_mean"][1] < 0 < m["eval_return_mean"][2]
    assert algo.evaluate(n_episodes=2, lesson="sb")["mean_return"] < 0
    res = algo.evaluate(n_episodes=2)  # default: the final lesson
    assert res["lesson"] == 1 and res["mean_return"] > 0
    algo.save(tmp_path / "ck.pt")
    back = snrl.PPO.load(tmp_path / "ck.pt")
    assert back.progress == algo.progress and back.config.curriculum == cur
    algo.close()


def test_a_lesson_that_changes_the_spaces_or_that_the_env_refuses_is_named():
    with pytest.raises(UserError, match=r"curriculum lesson 1 \('big'\): .*observation space"):
        snrl.PPO(
            "neurogym:DelayMatchSample-v0",
            curriculum=[{"max_steps": 10}, {"name": "big", "env_kwargs": {"dim_ring": 4}}],
            **SMALL,
        )
    with pytest.raises(UserError, match=r"curriculum lesson 0: .*bogus"):
        snrl.PPO("CartPole-v1", curriculum=[{"env_kwargs": {"bogus": 1}, "max_steps": 5}, {}])


def test_dqn_flushes_its_replay_at_a_promotion_and_learns_on():
    algo = snrl.DQN(
        "CartPole-v1",
        curriculum=[{"env_kwargs": SB, "max_steps": 64}, {}],
        learning_starts=48,
        batch_size=4,
        log_interval=32,
        eval_interval=0,
        **{k: v for k, v in SMALL.items() if k != "n_steps"},
    )
    algo.learn(64, progress=False)
    assert algo.lesson == 1 and algo.buffer is None  # flushed (rebuilt with the envs)
    grad_steps = algo.n_grad_steps
    assert grad_steps > 0
    algo.learn(96, progress=False)
    assert 0 < len(algo.buffer) <= 32 and algo.n_grad_steps == grad_steps  # refilling
    assert _sb(algo._envs) == [False, False]
    algo.learn(160, progress=False)
    assert algo.n_grad_steps > grad_steps  # learning_starts steps of the new lesson later
    algo.close()


def test_learning_curve_marks_the_promotions(tmp_path):
    from snrl.training.plots import _figure

    metrics = {
        "env_step": np.array([10.0, 20, 30, 40]),
        "episode_return_mean": np.array([1.0, 2, 3, 4]),
        "lesson": np.array([0.0, 0, 1, 2]),
    }
    ax = _figure(metrics, "t").axes[0]
    marks = [ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert marks == [20.0, 30.0]
    assert [t.get_text() for t in ax.texts] == ["lesson 1 ", "lesson 2 "]
    assert "promotion" in [t.get_text() for t in ax.get_legend().get_texts()]


# ---- the command ----------------------------------------------------------------------------
CUR_TOML = """\
env = "CartPole-v1"
backbone = "mlp"
hidden_size = 16
n_envs = 2
n_steps = 16
eval_interval = 64
eval_episodes = 2
checkpoint_interval = 1
[[curriculum.lesson]]
name = "sb"
env_kwargs = {sutton_barto_reward = true}
max_steps = 64
[[curriculum.lesson]]
name = "mid"
max_steps = 128
[[curriculum.lesson]]
name = "last"
"""


def test_kill_after_a_promotion_and_resume_continues_the_lesson(tmp_path, capsys):
    """SIGKILL during the second evaluation (lesson 1, after the promotion at 64 steps);
    --resume continues lesson 1 from its own start (64), so lesson 2 begins at 64 + 128."""
    (tmp_path / "cur.toml").write_text(CUR_TOML)
    out = tmp_path / "run"
    train = ["train", "--config", tmp_path / "cur.toml", "--out", out, "--steps", 256, "--quiet"]
    env = {**ENV, "SNRL_KILL_AT": "eval:2"}
    res = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "crash_run.py"), *map(str, train)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    killed = read_metrics(out / "metrics.csv")
    # rows every 32 steps: 64 promoted, killed in the evaluation at 128 (last.pt at 96)
    assert list(killed["env_step"]) == [32, 64, 96] and list(killed["lesson"]) == [0, 0, 1]
    res = subprocess.run(
        [sys.executable, "-m", "snrl.cli", "train", "--out", str(out), "--resume", "--quiet"],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    m = read_metrics(out / "metrics.csv")
    assert list(m["env_step"]) == list(range(32, 257, 32))
    assert list(m["lesson"]) == [0, 0, 1, 1, 1, 1, 2, 2]  # not restarted from lesson 0
    last = snrl.load(out / "checkpoints" / "last.pt")
    assert last.progress.promotions == [64, 192] and last.lesson == 2
    saved = json.loads((out / "config.json").read_text())
    assert [x["name"] for x in saved["curriculum"]] == ["sb", "mid", "last"]
    # snrl eval: the final lesson by default, any lesson with --lesson (in this process)
    from snrl.cli import main

    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2", "--lesson", "sb"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["lesson"] == 0 and got["mean_return"] < 0  # Sutton-Barto: -1 at the fall
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["lesson"] == 2 and got["mean_return"] > 0


def test_eval_lesson_errors_are_one_line(tmp_path, capsys):
    from snrl.cli import main

    algo = snrl.PPO("CartPole-v1", run_dir=tmp_path / "plain", **SMALL)
    algo.save(tmp_path / "plain" / "checkpoints" / "best.pt")
    assert main(["eval", str(tmp_path / "plain"), "--lesson", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --lesson 1: the run in") and "has no curriculum" in err
    assert err.count("\n") == 1
    algo = snrl.PPO(
        "CartPole-v1",
        run_dir=tmp_path / "cur",
        curriculum=[{"max_steps": 5}, {}],
        **SMALL,
    )
    algo.save(tmp_path / "cur" / "checkpoints" / "best.pt")
    assert main(["eval", str(tmp_path / "cur"), "--lesson", "7"]) == 2
    err = capsys.readouterr().err
    assert "lesson=7 (pass a lesson number 0..1" in err and err.count("\n") == 1
