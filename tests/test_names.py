"""One name per idea: the spellings of snrl 0.1 are gone from the API (0.1 was never
published; CHANGELOG.md), while run files written by 0.1 are still read."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import snrl
from snrl.config import config_from_dict, load_config
from snrl.errors import UserError

TINY = dict(backbone="mlp", hidden_size=8, n_envs=1, seed=0)


def test_env_id_keyword_is_gone_with_a_hint():
    """snrl 0.1's spelling was never published: an unknown option, pointing at the name."""
    with pytest.raises(UserError, match=r"unknown PPO option 'env_id' .*did you mean 'env'\?"):
        snrl.PPO(env_id="Acrobot-v1", **TINY)
    assert not hasattr(snrl.PPOConfig(), "env_id")


def test_a_saved_run_of_snrl_0_1_is_read_and_a_toml_file_is_not(tmp_path):
    """Run files are data: a config.json with env_id reads as env, with no warning. A TOML
    file or --set item is input of today's snrl: env_id there is an unknown key."""
    saved = snrl.config.config_to_dict(snrl.PPOConfig(env="Acrobot-v1"))
    saved["env_id"] = saved.pop("env")  # a config.json written by snrl 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config_from_dict(snrl.PPOConfig, saved).env == "Acrobot-v1"
    toml = tmp_path / "c.toml"
    toml.write_text('env_id = "MountainCar-v0"\n')
    with pytest.raises(UserError, match=r"unknown config key 'env_id' in .*c.toml"):
        load_config(snrl.DQNConfig, toml_path=toml)
    with pytest.raises(UserError, match="unknown config key 'env_id' in --set"):
        load_config(snrl.PPOConfig, sets=["env_id=Pendulum-v1"])
    assert json.loads(json.dumps(snrl.config.config_to_dict(snrl.PPOConfig())))["env"]


def test_trajectory_takes_env_only():
    kw = dict(
        observations=np.zeros((2, 1)),
        actions=np.zeros(2),
        rewards=np.zeros(2),
        terminated=np.zeros(2, bool),
        truncated=np.zeros(2, bool),
    )
    assert snrl.Trajectory(env="CartPole-v1", **kw).env == "CartPole-v1"
    with pytest.raises(TypeError, match="env_id"):
        snrl.Trajectory(env_id="CartPole-v1", **kw)
    assert not hasattr(snrl.Trajectory(**kw), "env_id")


@pytest.mark.parametrize("algo_cls", [snrl.PPO, snrl.DQN])
def test_building_and_training_leave_the_global_rngs_alone(algo_cls):
    """Constructing, learning, evaluating and saving never reseed or draw from the global
    torch/numpy RNGs, and two runs with one seed are still identical."""
    import torch

    torch.manual_seed(1234)
    np.random.seed(1234)
    before = torch.get_rng_state().clone(), np.random.get_state()[1].copy()
    runs = []
    for _ in range(2):
        dqn = dict(learning_starts=128, batch_size=4)
        extra = dqn if algo_cls is snrl.DQN else dict(n_steps=16)
        algo = algo_cls(
            "CartPole-v1", backbone="lif", hidden_size=8, n_envs=2, seed=3, eval_interval=0,
            eval_episodes=1, **extra,
        )
        hist = algo.learn(total_steps=256, progress=False)
        algo.evaluate(n_episodes=1, deterministic=False)
        runs.append({k: v for k, v in hist.items() if k not in ("wall_time",)})
        algo.close()
    assert torch.equal(torch.get_rng_state(), before[0])
    assert np.array_equal(np.random.get_state()[1], before[1])
    assert runs[0].keys() == runs[1].keys()
    for k in runs[0]:
        assert np.allclose(runs[0][k], runs[1][k], equal_nan=True), k


def test_env_kwargs_reach_every_env_the_algorithm_makes(tmp_path):
    """env_kwargs (config key, --env-kwargs JSON, TOML table) go to the training envs, the
    evaluation envs and recorded rollouts: a CartPole whose episodes last 7 steps at most."""
    import subprocess
    import sys

    kw = {"max_episode_steps": 7}
    algo = snrl.PPO("CartPole-v1", env_kwargs=kw, **TINY, n_steps=16, eval_interval=0)
    algo.learn(total_steps=64, progress=False)
    assert algo.evaluate(n_episodes=3)["mean_length"] <= 7
    assert len(algo.rollout(seed=0, record=False)) <= 7
    sets = ['env_kwargs={"max_episode_steps": 7}']
    assert load_config(snrl.PPOConfig, sets=sets).env_kwargs == kw
    toml = tmp_path / "c.toml"
    toml.write_text("[env_kwargs]\nmax_episode_steps = 7\n")
    assert load_config(snrl.PPOConfig, toml_path=toml).env_kwargs == kw
    out = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-m", "snrl.cli", "train", "--env", "CartPole-v1", "--env-kwargs",
         '{"max_episode_steps": 7}', "--backbone", "mlp", "--hidden", "8", "--steps", "256",
         "--n-envs", "2", "--set", "eval_interval=0", "--set", "eval_episodes=2", "--out",
         str(out), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "config.json").read_text())["env_kwargs"] == kw
    res = subprocess.run(
        [sys.executable, "-m", "snrl.cli", "train", "--env-kwargs", "[1, 2]", "--out",
         str(tmp_path / "bad")], capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 2 and res.stderr.startswith("error: bad value '[1, 2]'")
    assert not (tmp_path / "bad").exists()


def test_snrl_load_picks_the_algorithm_of_the_checkpoint(tmp_path):
    for cls in (snrl.PPO, snrl.DQN):
        algo = cls("CartPole-v1", **TINY)
        algo.save(tmp_path / f"{cls.algo_name}.pt")
        back = snrl.load(tmp_path / f"{cls.algo_name}.pt")
        assert type(back) is cls and back.config == algo.config


def test_one_version_number():
    """snrl.__version__ is the version pyproject.toml declares (0.2.0: CHANGELOG.md)."""
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert snrl.__version__ == project["version"]
    assert f"## {snrl.__version__}" in (root / "CHANGELOG.md").read_text(encoding="utf-8")


def test_every_data_file_is_package_data():
    """Each non-Python file snrl reads at run time (the zoo's TOML, NIR's mapping table, the
    C kernel, the dashboard's page) matches a package-data pattern of pyproject.toml, so that
    an installed wheel has it too."""
    import fnmatch
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    root = Path(__file__).resolve().parents[1]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    patterns = setuptools["setuptools"]["package-data"]
    files = [
        p.relative_to(root)
        for p in (root / "snrl").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert "snrl/networks/nir_mapping.toml" in {p.as_posix() for p in files}
    for f in files:
        package = ".".join(f.parent.parts)
        owners = [
            (pkg, globs)
            for pkg, globs in patterns.items()
            if package == pkg or package.startswith(pkg + ".")
        ]
        assert any(
            fnmatch.fnmatch(f.relative_to(Path(*pkg.split("."))).as_posix(), g)
            for pkg, globs in owners
            for g in globs
        ), f"{f} is not package data in pyproject.toml"
