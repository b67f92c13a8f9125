"""Bad input ends in one clear line, NaN/inf stops training cleanly, costs are checked before
anything is allocated (issue 10, docs/reliability.md "Inputs").

CLI cases run as a user runs them (a subprocess) where the process matters (exit code, no
traceback); the many others go through ``snrl.cli.main`` in this process, which prints the
same line and returns the same code.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import subprocess

import numpy as np
import pytest
import torch

import snrl
from snrl.agents import DQN, PPO, DQNConfig, PPOConfig
from snrl.agents.limits import MAX_ENVS, check_finite, check_parameters
from snrl.errors import EnvError, NonFiniteError, UserError
from tests.cli_run import snrl as snrl_cli
from tests.cli_run import snrl_inproc as cli_inproc

TINY = dict(backbone="mlp", hidden_size=8, n_envs=1, eval_interval=0, eval_episodes=1)


def run_cli(*args: object, timeout: float = 180) -> subprocess.CompletedProcess:
    return snrl_cli(*args, timeout=timeout)


def assert_one_line(res: subprocess.CompletedProcess, *fragments: str) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


# ---- 1, 6, 7: the user's env fails, NaN/inf during training --------------------------------
def test_env_that_raises_names_env_and_step_and_keeps_last_checkpoint(tmp_path):
    out = tmp_path / "crash"
    res = run_cli(
        "train",
        "--env",
        "tests.input_envs:CrashAt300Env",
        "--backbone",
        "mlp",
        "--hidden",
        8,
        "--n-envs",
        1,
        "--steps",
        1000,
        "--set",
        "n_steps=64",
        "--set",
        "checkpoint_interval=1",
        "--set",
        "eval_interval=0",
        "--out",
        out,
        "--quiet",
    )
    line = assert_one_line(
        res, "env tests.input_envs:CrashAt300Env raised RuntimeError in step 300", "second line"
    )
    assert "step 20 of its episode" in line
    algo = snrl.PPO.load(out / "checkpoints" / "last.pt", trust_env_module=True)
    assert algo.env_step == 256  # the last update finished before step 300


def test_dqn_reward_1e300_stops_instead_of_storing_inf(tmp_path):
    out = tmp_path / "huge"
    res = run_cli(
        "train",
        "--algo",
        "dqn",
        "--env",
        "tests.input_envs:HugeRewardEnv",
        "--backbone",
        "mlp",
        "--hidden",
        8,
        "--steps",
        2000,
        "--out",
        out,
        "--quiet",
    )
    assert_one_line(res, "training stopped at env step 4: the reward (as float32) is inf")
    assert "TransformReward" in res.stderr  # the fix is named


def test_ppo_reward_beyond_float32_stops():
    algo = PPO("tests.input_envs:HugeRewardEnv", **TINY, n_steps=16)
    with pytest.raises(NonFiniteError, match=r"env step 1: the reward \(as float32\) is inf"):
        algo.learn(64, progress=False)
    algo.close()


def test_ppo_value_loss_overflow_stops_and_keeps_last_good_checkpoint(tmp_path):
    algo = PPO(
        "tests.input_envs:BigRewardEnv",
        **TINY,
        n_steps=64,
        checkpoint_interval=1,
        run_dir=tmp_path,
    )
    with pytest.raises(NonFiniteError, match=r"env step 256: the value loss is inf") as info:
        algo.learn(1024, progress=False)
    assert "likely cause" in str(info.value) and "last.pt" in str(info.value)
    algo.close()
    last = PPO.load(tmp_path / "checkpoints" / "last.pt", trust_env_module=True)
    assert last.env_step == 192
    assert all(bool(torch.isfinite(p).all()) for p in last.agent.parameters())


def test_dqn_td_loss_overflow_stops():
    algo = DQN(
        "tests.input_envs:BigRewardEnv",
        **TINY,
        loss="mse",
        learning_starts=32,
        batch_size=8,
        train_freq=1,
        log_interval=64,
    )
    with pytest.raises(NonFiniteError, match=r"the TD loss is inf .*likely cause: TD targets"):
        algo.learn(2000, progress=False)
    algo.close()


@pytest.mark.parametrize(
    "value, bad",
    [
        (1.5, None),
        (math.nan, "nan"),
        (np.array([0.5, 2.0], dtype=np.float32), None),
        (np.array([0.5, -np.inf], dtype=np.float32), "-inf"),
        (np.array([1, 2]), None),
        (np.array([True, False]), None),
        (torch.tensor([0.0, math.inf]), "inf"),
        (torch.tensor([1.0]), None),
    ],
)
def test_check_finite_on_floats_arrays_and_tensors(value, bad):
    if bad is None:
        check_finite(value, "reward", env_step=3, cause="c")
        return
    with pytest.raises(NonFiniteError, match=rf"env step 3: the reward is {bad} \(likely cause: c"):
        check_finite(value, "reward", env_step=3, cause="c")


def test_nan_parameters_are_named_instead_of_torch_distribution_text():
    algo = PPO("CartPole-v1", **TINY, n_steps=8)
    with torch.no_grad():
        next(algo.agent.policy.parameters()).fill_(math.nan)
    with pytest.raises(NonFiniteError, match=r"env step 0: the parameter policy\.\S+ is nan"):
        algo.learn(16, progress=False)
    algo.close()
    net = torch.nn.Linear(2, 2)
    with torch.no_grad():
        net.bias[1] = math.inf
    with pytest.raises(NonFiniteError, match="parameter bias is inf"):
        check_parameters(net, env_step=7)


def test_rollout_checks_nan_observations_like_evaluate():
    algo = PPO("tests.input_envs:NanObsAt3Env", **TINY)
    for call in (lambda: algo.rollout(seed=0, record=False), lambda: algo.evaluate(2)):
        with pytest.raises(UserError, match="non-finite observation at step 3"):
            call()


def test_wrong_observation_shape_is_named(capsys, tmp_path):
    res = cli_inproc(
        capsys, "train", "--env", "tests.input_envs:WrongShapeEnv", "--out", tmp_path / "r"
    )
    assert_one_line(res, "observation of shape (3,) at step 1", "has shape (2,)")


def test_two_line_message_is_not_cut(capsys, tmp_path):
    res = cli_inproc(
        capsys, "train", "--env", "tests.input_envs:MultiDiscrete2DEnv", "--out", tmp_path / "r"
    )
    line = assert_one_line(res, "MultiDiscrete")
    assert line.count("(") == line.count(")")  # the message ends with its fix, not mid-repr


def test_env_error_is_a_user_error_with_the_cause_chained():
    from snrl.envs import FiniteCheck
    from tests.input_envs import CrashAt300Env

    env = FiniteCheck(CrashAt300Env(), env_id="crash")
    env.reset(seed=0)
    env.unwrapped.n = 299
    with pytest.raises(EnvError, match=r"env crash raised RuntimeError in step 1 ") as info:
        env.step(0)
    assert isinstance(info.value.__cause__, RuntimeError)


# ---- 2, 4, 7: the CLI's arguments and their costs -----------------------------------------
@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["train", "--threads", "1025"], ["--threads: 1025 is out of range (pass one in [0, "]),
        (["train", "--threads", "-3"], ["--threads: -3 is out of range"]),
        (["train", "--set", "device=garbage"], ["device='garbage' (use cpu"]),
        (["train", "--seed", "1e20"], ["--seed: '1e20' is not an integer"]),
        (["train", "--set", "seed=1e20"], ["seed=100000000000000000000 is beyond"]),
        (["train", "--set", "seed=-1"], ["seed=-1 (must be an integer in [0, 2147483647])"]),
        (["eval", "somewhere", "--seed", "-1"], ["--seed: -1 is out of range"]),
        (["render", "somewhere", "--out", "x.gif", "--seed", "-1"], ["-1 is out of range"]),
        (["render", "somewhere", "--out", "x.gif", "--fps", "0"], ["--fps: 0 is out of range"]),
        (["eval", "somewhere", "--episodes", "100000000"], ["--episodes: 100000000 is out of"]),
        (["eval", "somewhere", "--episodes", "3.5"], ["--episodes: '3.5' is not an integer"]),
        (["train", "--steps", "9" * 23], ["total_steps=" + "9" * 23 + " is beyond"]),
        (["train", "--steps", "10000000000000"], ["total_steps=10000000000000 (must be <="]),
        (["train", "--n-envs", "100000000"], ["n_envs=100000000 is more envs", f"{MAX_ENVS}"]),
        (["train", "--set", "lr=inf"], ["lr=inf is not finite"]),
        (["train", "--set", "ent_coef=nan"], ["ent_coef=nan is not finite"]),
        (["train", "--set", "log_std_init=inf"], ["log_std_init=inf is not finite"]),
        (["train", "--hidden", "100000"], ["needs about", "GiB of memory", "lower hidden_size"]),
        (["train", "--set", "n_steps=100000000"], ["rollout", "GiB"]),
        (
            ["train", "--algo", "dqn", "--backbone", "mlp", "--set", "buffer_size=10000000000"],
            ["replay", "GiB"],
        ),
    ],
)
def test_cli_refuses_before_allocating(capsys, tmp_path, monkeypatch, args, fragments):
    monkeypatch.chdir(tmp_path)
    if args[0] == "train":
        args = [*args, "--out", "run"]
    assert_one_line(cli_inproc(capsys, *args), *fragments)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cli_bad_values_from_real_processes(tmp_path):
    for args, fragment in (
        (["train", "--threads", "-1", "--out", tmp_path / "a"], "--threads"),
        (["train", "--set", "device=garbage", "--out", tmp_path / "b"], "device="),
        (["eval", tmp_path, "--episodes", "100000000"], "--episodes: 100000000 is out of range"),
        (["train", "--steps", "9" * 23, "--out", tmp_path / "c"], "total_steps"),
    ):
        assert_one_line(run_cli(*args), fragment)
    assert list(tmp_path.iterdir()) == []


def test_device_cuda_without_cuda(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = cli_inproc(capsys, "train", "--set", "device=cuda", "--out", tmp_path / "r")
    assert_one_line(res, "device='cuda' but this torch build has no CUDA device", "device=cpu")
    with pytest.raises(UserError, match="no CUDA device"):
        PPO("CartPole-v1", device="cuda:1")


def test_non_utf8_files_are_named(capsys, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(b'env = "\xff\xfe"\n')
    res = cli_inproc(capsys, "train", "--config", cfg, "--out", tmp_path / "r")
    assert_one_line(res, f"config file {cfg} is not UTF-8 text")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_bytes(b"env_step,episode_return_mean\n1,\xff\n")
    assert_one_line(cli_inproc(capsys, "plot", run), f"metrics file {run / 'metrics.csv'} is not")


def test_plot_without_env_step_says_so(capsys, tmp_path):
    (tmp_path / "metrics.csv").write_text("step,return\n1,2\n")
    assert_one_line(
        cli_inproc(capsys, "plot", tmp_path), "has no env_step column (columns: step, return"
    )


def test_toml_integer_too_large_through_the_cli(capsys, tmp_path):
    cfg = tmp_path / "big.toml"
    cfg.write_text("lr = " + "9" * 400 + "\n")
    assert_one_line(cli_inproc(capsys, "train", "--config", cfg, "--out", tmp_path / "r"), "'lr'")
    cfg.write_text("hidden_size = " + "9" * 400 + "\n")
    assert_one_line(
        cli_inproc(capsys, "train", "--config", cfg, "--out", tmp_path / "r"), "beyond ±2**53"
    )


def test_os_errors_name_the_path_and_a_fix(capsys, tmp_path):
    from snrl.errors import error_message

    e = OSError(errno.EACCES, "Permission denied", "/data/run/metrics.csv")
    assert error_message(e) == (
        "Permission denied: /data/run/metrics.csv (check its permissions or choose another path)"
    )
    e = OSError(errno.ENOSPC, "No space left on device", "/v.mp4")
    assert error_message(e) == (
        "No space left on device: /v.mp4 (the disk is full; free some space or choose another path)"
    )
    assert error_message(ValueError("two\nlines")) == "two lines"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    res = cli_inproc(
        capsys, "train", "--backbone", "mlp", "--hidden", 8, "--out", a_file / "run", "--quiet"
    )
    line = assert_one_line(res, str(a_file))
    assert not line.startswith("error: [Errno")


def test_mp4_writer_reports_a_full_disk_not_a_broken_pipe(tmp_path, monkeypatch):
    from snrl.render import _encode

    writer = _encode.Mp4Writer(tmp_path / "v.mp4", size=(16, 16), fps=10)

    def broken(_frame):
        raise OSError("[Errno 32] Broken pipe\n\nFFMPEG COMMAND:\nffmpeg -y ...")

    writer._gen = type("G", (), {"send": staticmethod(broken), "close": lambda self: None})()
    monkeypatch.setattr(_encode.shutil, "disk_usage", lambda p: type("U", (), {"free": 1024})())
    with pytest.raises(OSError) as info:
        writer.write(np.zeros((16, 16, 3), dtype=np.uint8))
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "v.mp4")
    monkeypatch.setattr(_encode.shutil, "disk_usage", lambda p: type("U", (), {"free": 2**40})())
    with pytest.raises(OSError, match=r"ffmpeg stopped while writing the video \(\[Errno 32"):
        writer.write(np.zeros((16, 16, 3), dtype=np.uint8))
    writer.abort()


# ---- 5: --resume and flags that would change the saved config -----------------------------
def test_resume_refuses_changed_flags_and_accepts_the_same_command(capsys, tmp_path):
    out = tmp_path / "run"
    base = ["train", "--backbone", "mlp", "--hidden", 8, "--n-envs", 2, "--out", out, "--quiet"]
    sets = ["--set", "n_steps=16", "--set", "eval_interval=0", "--set", "eval_episodes=1"]
    assert cli_inproc(capsys, *base, *sets, "--steps", 32).returncode == 0
    for extra, fragment in (
        (["--backbone", "lif"], "backbone='lif' (saved 'mlp')"),
        (["--hidden", 16], "hidden_size=16 (saved 8)"),
        (["--set", "lr=5"], "lr=5.0 (saved 0.001)"),
        (["--algo", "dqn"], "--algo dqn but the run"),
        (["--seed", 3], "seed=3 (saved 0)"),
    ):
        res = cli_inproc(capsys, *base, *sets, "--resume", *extra)
        assert_one_line(res, fragment, "--resume")
    # the same command line plus --resume and a longer --steps continues the run
    res = cli_inproc(capsys, *base, *sets, "--steps", 64, "--resume")
    assert res.returncode == 0, res.stderr
    assert snrl.PPO.load(out / "checkpoints" / "last.pt").env_step == 64


# ---- 3: the Python API checks its arguments where they enter --------------------------------
def _float_fields(cls: type) -> list[str]:
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    return [k for k, t in hints.items() if "float" in str(t)]


@pytest.mark.parametrize("cls", [PPOConfig, DQNConfig])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_every_float_field_refuses_non_finite(cls, bad):
    fields = _float_fields(cls)
    assert {"lr", "gamma", "tau_m", "dt"} <= set(fields)
    tuples = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith("tuple")}
    for name in fields:
        value = (0.1, bad) if name in tuples else bad  # e.g. rate_range: (low, high)
        where = rf"{name}\[1\]" if name in tuples else name  # the item that is not finite
        with pytest.raises(UserError, match=rf"config key {where}=.+ is not finite"):
            cls(**{name: value})


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"lr": "0.1"}, r"lr='0.1' is a str \(pass float\)"),
        ({"seed": 1.5}, r"seed=1.5 is a float \(pass int\)"),
        ({"force_dale_law": "no"}, r"force_dale_law='no' is a str \(pass bool"),
        ({"n_envs": "8"}, r"n_envs='8' is a str"),
        ({"hiden_size": 8}, r"unknown PPO option 'hiden_size' .*did you mean 'hidden_size'"),
        ({"lerning_rate": 8}, r"unknown PPO option 'lerning_rate'"),
        ({"policy": "lif"}, r"policy='lif' is not a recurrent backbone"),
        ({"critic": torch.nn.Linear(4, 1)}, r"critic=Linear is not a recurrent backbone"),
        ({"config": DQNConfig()}, r"config= is a DQNConfig, snrl.PPO needs a PPOConfig"),
        ({"hidden_size": 10**5}, r"needs about .* GiB of memory"),
        ({"recurrent_sign": 1.5}, r"recurrent_sign=1.5"),
        ({"vf_coef": -1.0}, r"vf_coef=-1.0"),
    ],
)
def test_ppo_arguments_checked_at_construction(kwargs, pattern):
    with pytest.raises(UserError, match=pattern):
        PPO("CartPole-v1", **kwargs)


def test_dqn_arguments_checked_at_construction():
    with pytest.raises(UserError, match=r"unknown DQN option 'bufer_size' .*'buffer_size'"):
        DQN("CartPole-v1", bufer_size=10)
    with pytest.raises(UserError, match="config= is a PPOConfig, snrl.DQN needs a DQNConfig"):
        DQN(config=PPOConfig())
    with pytest.raises(UserError, match="replay"):
        DQN("CartPole-v1", backbone="mlp", buffer_size=10**11)


def test_custom_backbone_with_wrong_output_width_names_expected_and_got():
    wrong = snrl.build_backbone("mlp", 4, 3, hidden_size=8, seed=0)
    with pytest.raises(UserError, match="policy= has output width 3, expected 2"):
        PPO("CartPole-v1", policy=wrong, n_envs=1)
    with pytest.raises(UserError, match="critic= has output width 3, expected 1"):
        PPO("CartPole-v1", critic=wrong, n_envs=1)
    with pytest.raises(UserError, match="policy= has output width 3, expected 2"):
        DQN("CartPole-v1", policy=wrong, n_envs=1)
    with pytest.raises(UserError, match="policy= failed on one observation of 4 values"):
        PPO("CartPole-v1", policy=snrl.build_backbone("mlp", 5, 2, hidden_size=8), n_envs=1)
    right = snrl.build_backbone("mlp", 4, 2, hidden_size=8, seed=0)
    assert PPO("CartPole-v1", policy=right, n_envs=1).agent.policy is right


def test_evaluate_rollout_and_learn_check_their_arguments():
    algo = PPO("CartPole-v1", **TINY)
    for kwargs, pattern in (
        ({"n_episodes": "3"}, r"n_episodes='3' is a str"),
        ({"n_episodes": 0}, r"n_episodes=0 is out of range"),
        ({"n_episodes": 100_000_000}, r"one env per episode is built at once"),
        ({"seed": -1}, r"seed=-1 is out of range"),
        ({"seed": 1.5}, r"seed=1.5 is a float"),
        ({"deterministic": "no"}, r"deterministic='no'"),
    ):
        with pytest.raises(UserError, match=pattern):
            algo.evaluate(**kwargs)
    with pytest.raises(UserError, match=r"seed=-1 is out of range"):
        algo.rollout(seed=-1)
    with pytest.raises(UserError, match=r"total_steps=1(0){23} is out of range"):
        algo.learn(10**23)


def test_config_accepts_what_fits():
    cfg = PPOConfig(lr=1, seed=2**31 - 1, n_envs=MAX_ENVS, eval_episodes=1, device="cpu")
    assert cfg.lr == 1 and cfg.seed == 2**31 - 1
    assert PPOConfig(force_dale_law=np.bool_(False)).force_dale_law == np.False_


@pytest.mark.parametrize(
    ("text", "hint", "not_hint"),
    [
        ('MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`', "mujoco]", "box2d"),
        ('Box2D is not installed, run `pip install "gymnasium[box2d]"`', "snrl[box2d]", "mujoco"),
    ],
)
def test_missing_dependency_hint_follows_the_package(monkeypatch, text, hint, not_hint):
    import gymnasium as gym

    from snrl.envs import make_env

    def missing(*args, **kwargs):
        raise gym.error.DependencyNotInstalled(text)

    monkeypatch.setattr(gym, "make", missing)
    with pytest.raises(UserError) as info:
        make_env("Ant-v5")
    fix = str(info.value).rsplit("(", 1)[1]
    assert hint in fix and not_hint not in fix
