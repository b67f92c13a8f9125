"""A user's mistakes that used to end in a traceback (issue 32, docs/reliability.md "Inputs"):
deeply nested JSON and TOML, ``render_mode`` in ``env_kwargs``, curriculum integers beyond
±2**53, ``threads`` 0 on the command line, an empty ``--host``, names with a final newline.

CLI cases run as a user runs them (a subprocess): exit code 2, one ``error:`` line, no
traceback, nothing written.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import snrl
from snrl.agents import DQNConfig, PPOConfig
from snrl.agents.runtime import MAX_THREADS
from snrl.config import MAX_INT, check_host, config_from_dict, config_to_dict, load_config
from snrl.envs import make_vector_env
from snrl.errors import UserError
from snrl.io import MAX_DEPTH, check_depth, json_depth, load_json
from tests.cli_run import snrl as snrl_cli


def _deep_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def _deep_dict(depth: int) -> dict:
    d: dict = {"a": 1}
    for _ in range(depth - 1):
        d = {"a": d}
    return d


def assert_one_line(res: subprocess.CompletedProcess, *fragments: str) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


# ---- the depth rule: snrl.io ----------------------------------------------------------------
def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth("1") == 0
    assert json_depth('{"a": [1, {"b": "[[[{{"}]}') == 3
    assert json_depth(r'["\"[[[", "\\", [[]]]') == 3  # escaped quotes and backslashes
    assert json_depth("[" * 100_000, limit=MAX_DEPTH) == MAX_DEPTH + 1  # stops early
    assert json_depth('"' + '\\"' * 100_000) == 0  # an unterminated string: no brackets


def test_load_json_refuses_one_level_too_deep():
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) == eval("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert load_json(_deep_json(MAX_DEPTH)) == _deep_dict(MAX_DEPTH)
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "[" * 200_000):
        with pytest.raises(UserError, match=f"--x nests more than {MAX_DEPTH} levels"):
            load_json(text, what="--x")
    assert load_json(b'{"k": "[[[["}') == {"k": "[[[["}


def test_check_depth_counts_containers_without_recursion():
    check_depth(_deep_dict(MAX_DEPTH))
    with pytest.raises(UserError, match="nests more than"):
        check_depth(_deep_dict(MAX_DEPTH + 1))
    with pytest.raises(UserError, match="nests more than"):
        check_depth(_deep_dict(100_000))
    loop: list = []
    loop.append(loop)
    with pytest.raises(UserError, match="nests more than"):
        check_depth(loop)
    shared = [[[1]] * 30] * 30  # one list under many parents: fine, and walked once per depth
    check_depth({"a": shared})


# ---- deep JSON / TOML through the CLI ---------------------------------------------------------
DEEP = _deep_json(5000)
SHALLOW_BUT_TOO_DEEP = _deep_json(500)  # json.loads parses it; the code after it recursed


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--env-kwargs", DEEP], "config key 'env_kwargs'"),
        (["--set", f"env_kwargs={SHALLOW_BUT_TOO_DEEP}"], "config key 'env_kwargs'"),
        (["--set", f'curriculum=[{{"env_kwargs": {DEEP}}}]'], "config key 'curriculum'"),
        (["--set", f'curriculum=[{{"env_kwargs": {SHALLOW_BUT_TOO_DEEP}}}]'], "'curriculum'"),
    ],
    ids=["env-kwargs", "set env_kwargs", "set curriculum", "set curriculum 500"],
)
def test_deep_json_in_train_is_one_line(tmp_path, args, fragment):
    out = tmp_path / "run"
    res = snrl_cli("train", "--env", "CartPole-v1", "--out", out, *args)
    assert_one_line(res, fragment, f"nests more than {MAX_DEPTH} levels")
    assert not out.exists()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a = " + "[" * 3000 + "1" + "]" * 3000 + "\n", "levels of tables and arrays"),
        ("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "levels of tables and arrays"),
        ("[" + ".".join(["t"] * 100) + "]\nx = 1\n", "levels of objects and arrays"),
        ("env_kwargs = " + "{b = " * 40 + "1" + "}" * 40 + "\n", "levels of objects and arrays"),
    ],
    ids=["arrays", "inline tables", "dotted table header", "env_kwargs 40"],
)
def test_deep_toml_is_one_line(tmp_path, text, fragment):
    cfg = tmp_path / "deep.toml"
    cfg.write_text(text)
    out = tmp_path / "run"
    res = snrl_cli("train", "--env", "CartPole-v1", "--config", cfg, "--out", out)
    assert_one_line(res, str(cfg), fragment)
    assert not out.exists()


def test_deep_env_kwargs_of_serve_env_is_one_line():
    res = snrl_cli("serve-env", "CartPole-v1", "--env-kwargs", DEEP)
    assert_one_line(res, "--env-kwargs nests more than")


def test_deep_values_in_python_and_saved_configs():
    with pytest.raises(UserError, match="config key env_kwargs nests more than"):
        PPOConfig(env_kwargs=_deep_dict(2000))
    with pytest.raises(UserError, match="config key env_kwargs nests more than"):
        snrl.PPO("CartPole-v1", env_kwargs=_deep_dict(MAX_DEPTH + 1))
    saved = config_to_dict(DQNConfig())
    saved["env_kwargs"] = _deep_dict(5000)
    with pytest.raises(UserError, match="'env_kwargs' in the saved config nests more than"):
        config_from_dict(DQNConfig, saved)
    ok = _deep_dict(MAX_DEPTH - 1)  # env_kwargs itself is the first level
    assert load_config(PPOConfig, sets=[f"env_kwargs={json.dumps(ok)}"]).env_kwargs == ok


def test_resume_with_a_deep_saved_config_is_one_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text('{"algo": "ppo", "env_kwargs": ' + DEEP + "}")
    res = snrl_cli("train", "--out", out, "--resume", "--set", "lr=1e-3")
    assert_one_line(res, "saved config")


# ---- render_mode in env_kwargs ------------------------------------------------------------
def test_render_mode_in_env_kwargs_is_one_line(tmp_path):
    out = tmp_path / "run"
    res = snrl_cli(
        "train", "--env", "CartPole-v1", "--env-kwargs", '{"render_mode": "human"}', "--out", out
    )
    assert_one_line(res, "render_mode='human'", "snrl sets itself", "drop render_mode")
    assert not out.exists()


def test_render_mode_refused_in_every_way_in():
    for make in (
        lambda: PPOConfig(env_kwargs={"render_mode": "rgb_array"}),
        lambda: snrl.DQN("CartPole-v1", env_kwargs={"render_mode": "human"}),
        lambda: snrl.Curriculum([{"env_kwargs": {"render_mode": "human"}}]),
        lambda: make_vector_env("CartPole-v1", 1, seed=0, env_kwargs={"render_mode": "human"}),
    ):
        with pytest.raises(UserError, match="render_mode=.* which snrl sets itself"):
            make()


def test_render_mode_refused_by_the_env_server():
    pytest.importorskip("uvicorn")
    from snrl.envs.remote_server import EnvServer

    with pytest.raises(UserError, match="render_mode='human', which snrl sets itself"):
        EnvServer("CartPole-v1", port=0, env_kwargs={"render_mode": "human"})


# ---- curriculum integers: the ±2**53 rule of every config value -------------------------------
def test_curriculum_integers_beyond_2_53_are_one_line(tmp_path):
    cfg = tmp_path / "cur.toml"
    cfg.write_text(
        "[[curriculum.lesson]]\n"
        'metric = "eval_return_mean"\nthreshold = 10\nwindow = 1152921504606846976\n'
        "[[curriculum.lesson]]\nmax_steps = 1180591620717411303424\n"
    )
    out = tmp_path / "run"
    res = snrl_cli("train", "--env", "CartPole-v1", "--config", cfg, "--out", out)
    assert_one_line(res, "curriculum[0].window=1152921504606846976 is beyond ±2**53")
    assert not out.exists()


@pytest.mark.parametrize(
    "lessons, fragment",
    [
        ([{"max_steps": 2**70}, {}], "curriculum[0].max_steps=1180591620717411303424 is beyond"),
        ([{"max_steps": 10}, {"window": MAX_INT + 1}], "curriculum[1].window=9007199254740993"),
        ([{"max_steps": 10, "env_kwargs": {"x": [1, -(2**60)]}}, {}], "env_kwargs.x[1]="),
        ([{"max_steps": 10, "env_kwargs": {"x": float("nan")}}, {}], "x=nan is not finite"),
    ],
)
def test_curriculum_numbers_follow_the_config_rule(lessons, fragment):
    with pytest.raises(UserError, match="config key curriculum") as e:
        PPOConfig(curriculum=snrl.Curriculum(lessons))
    assert fragment in str(e.value)
    ok = [{"max_steps": MAX_INT, "window": MAX_INT}, {}]
    assert PPOConfig(curriculum=snrl.Curriculum(ok)).curriculum[0].max_steps == MAX_INT


# ---- threads: the flag is the config key -------------------------------------------------------
def test_threads_0_means_the_same_as_flag_and_key():
    from snrl.cli import build_parser
    from snrl.cli.commands import _train_config

    def config(*args):
        return _train_config(build_parser().parse_args(["train", "--out", "x", *args]))

    assert config("--threads", "0").threads == config("--set", "threads=0").threads == 0
    assert config("--threads", str(MAX_THREADS)).threads == MAX_THREADS


@pytest.mark.parametrize("value", ["-1", str(MAX_THREADS + 1)])
def test_threads_out_of_range_refused_by_flag_and_key(tmp_path, value):
    flag = snrl_cli("train", "--env", "CartPole-v1", "--threads", value, "--out", tmp_path / "a")
    key = snrl_cli(
        "train", "--env", "CartPole-v1", "--set", f"threads={value}", "--out", tmp_path / "b"
    )
    assert_one_line(flag, f"[0, {MAX_THREADS}]")
    assert_one_line(key, f"threads={value}")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_train_with_threads_0_runs(tmp_path):
    out = tmp_path / "run"
    res = snrl_cli(
        "train", "--env", "CartPole-v1", "--backbone", "mlp", "--hidden", 8, "--n-envs", 1,
        "--steps", 64, "--set", "n_steps=64", "--set", "eval_interval=0", "--threads", 0,
        "--out", out, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "config.json").read_text())["threads"] == 0


# ---- --host ------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["serve-env", "CartPole-v1"], ["dashboard", "."]])
@pytest.mark.parametrize(
    "host, fragment", [("", "host '' is empty"), ("local\thost", "spaces or control")]
)
def test_empty_or_blank_host_is_one_line(command, host, fragment):
    res = snrl_cli(*command, "--host", host, "--port", 0, timeout=60)
    assert_one_line(res, fragment)
    assert "http://" not in res.stdout


def test_check_host():
    assert check_host("127.0.0.1") == "127.0.0.1" and check_host("::1") == "::1"
    for bad in ("", " ", "127.0.0.1 ", "a\nb", "x\x00", None, 5):
        with pytest.raises(UserError, match="host"):
            check_host(bad)


# ---- names that end in a newline -----------------------------------------------------------------
def test_name_patterns_refuse_a_final_newline():
    from snrl.io import _temp_name, is_own_temp

    own = _temp_name("a.npz")
    assert is_own_temp(own) and not is_own_temp(own + "\n")
    pytest.importorskip("starlette")
    from snrl.dashboard.app import check_token
    from snrl.dashboard.forms import NAME_RE

    assert NAME_RE.match("nl") and not NAME_RE.match("nl\n")
    good = "t" * 20
    assert check_token(good) == good
    with pytest.raises(UserError, match="token"):
        check_token(good + "\n")
