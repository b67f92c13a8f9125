"""Algorithm checkpoints are checked against a schema before use; env modules named by a
file are not imported unless the caller trusts them or names the env."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest
import torch

import snrl
from snrl.errors import UserError
from snrl.training.checkpoint import check_schema, load_checkpoint, save_checkpoint

SMALL = dict(backbone="mlp", hidden_size=8, n_envs=1, n_steps=16, seed=0)


@pytest.fixture
def saved(tmp_path):
    """A PPO checkpoint and its payload (global RNGs restored after the test)."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    algo = snrl.PPO("CartPole-v1", **SMALL)
    path = tmp_path / "good.pt"
    algo.save(path)
    yield path, load_checkpoint(path)
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


def _mutated(payload, change):
    d = {**payload, "counters": dict(payload["counters"]), "rng": dict(payload["rng"])}
    d["rng"]["python"] = dict(d["rng"]["python"])
    d["rng"]["numpy"] = dict(d["rng"]["numpy"])
    d["optimizer"] = dict(payload["optimizer"])
    change(d)
    return d


CASES = {
    "no counters": (lambda d: d.pop("counters"), "payload['counters'] is missing"),
    "no rng": (lambda d: d.pop("rng"), "payload['rng'] is missing"),
    "no env_step": (lambda d: d["counters"].pop("env_step"), "['env_step'] is missing"),
    "torch rng size": (
        lambda d: d["rng"].__setitem__("torch", torch.zeros(10, dtype=torch.uint8)),
        "payload['rng']['torch'] has shape (10,), expected (5056,)",
    ),
    "generator size": (
        lambda d: d.__setitem__("generator", torch.zeros(3, dtype=torch.uint8)),
        "payload['generator'] has shape (3,)",
    ),
    "generator dtype": (
        lambda d: d.__setitem__("generator", torch.zeros(5056, dtype=torch.float32)),
        "payload['generator'] has dtype torch.float32, expected torch.uint8",
    ),
    "config list": (lambda d: d.__setitem__("config", [1, 2]), "payload['config'] is a list"),
    "env_step str": (
        lambda d: d["counters"].__setitem__("env_step", "12"),
        "payload['counters']['env_step'] is a str, expected int",
    ),
    "env_step negative": (
        lambda d: d["counters"].__setitem__("env_step", -5),
        "['env_step'] must be >= 0",
    ),
    "wall_time nan": (
        lambda d: d["counters"].__setitem__("wall_time", float("nan")),
        "['wall_time'] must be finite and >= 0",
    ),
    "python state": (
        lambda d: d["rng"]["python"].__setitem__("internal", torch.zeros(7, dtype=torch.int64)),
        "['internal'] has shape (7,), expected (625,)",
    ),
    "python position": (
        lambda d: d["rng"]["python"].__setitem__(
            "internal", torch.cat([torch.zeros(624, dtype=torch.int64), torch.tensor([9999])])
        ),
        "a position in [0, 624]",
    ),
    "numpy keys": (
        lambda d: d["rng"]["numpy"].__setitem__("keys", torch.full((624,), -1)),
        "['keys'] must be in [0, 2**32)",
    ),
    "numpy name": (
        lambda d: d["rng"]["numpy"].__setitem__("name", "PCG64"),
        "['name'] must be 'MT19937'",
    ),
    "agent list": (lambda d: d.__setitem__("agent", [torch.zeros(1)]), "payload['agent'] is a"),
    "optimizer": (
        lambda d: d["optimizer"].pop("param_groups"),
        "payload['optimizer']['param_groups'] is missing",
    ),
    "extra list": (lambda d: d.__setitem__("extra", [1]), "payload['extra'] is a list"),
    "custom flag": (
        lambda d: d.__setitem__("custom_backbones", "no"),
        "payload['custom_backbones'] is a str, expected bool",
    ),
    "config value": (
        lambda d: d.__setitem__("config", {**d["config"], "hidden_size": "big"}),
        "its config: ",
    ),
    "config key": (
        lambda d: d.__setitem__("config", {**d["config"], "bogus_key": 1}),
        "its config: ",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_crafted_checkpoint_is_refused_before_use(saved, tmp_path, case):
    path, payload = saved
    change, fragment = CASES[case]
    bad = tmp_path / "bad.pt"
    save_checkpoint(bad, _mutated(payload, change))
    rng_before = torch.get_rng_state()
    with pytest.raises(UserError) as info:
        snrl.PPO.load(bad)
    msg = str(info.value)
    assert msg.startswith(f"checkpoint {bad} is corrupt or not an snrl checkpoint ("), msg
    assert fragment in msg, msg
    assert "\n" not in msg
    assert torch.equal(torch.get_rng_state(), rng_before)  # refused before anything was set


@pytest.mark.parametrize("algo", [["ppo"], {"a": 1}, 3, None, "sac"])
def test_load_algo_refuses_an_algo_name_that_is_not_ours(saved, tmp_path, algo):
    from snrl.agents import load_algo

    _, payload = saved
    bad = tmp_path / "bad.pt"
    save_checkpoint(bad, {**payload, "algo": algo})
    with pytest.raises(UserError, match="holds no snrl agent"):
        load_algo(bad)


def test_agent_weights_that_do_not_fit_are_refused(saved, tmp_path):
    _, payload = saved
    for agent in (
        {**payload["agent"], "w": 3},
        {k: v.reshape(-1)[:1] for k, v in payload["agent"].items()},
    ):
        bad = tmp_path / "bad.pt"
        save_checkpoint(bad, {**payload, "agent": agent})
        with pytest.raises(UserError, match=r"checkpoint .*bad.pt does not fit this agent: "):
            snrl.PPO.load(bad)


def test_untouched_checkpoint_loads(saved):
    path, _ = saved
    algo = snrl.PPO.load(path)
    assert algo.env_step == 0 and algo.config.hidden_size == 8


def test_check_schema_messages():
    schema = {"a": int, "b?": (float, None), "c": {"d": str}}
    assert check_schema({"a": 1, "c": {"d": "x"}}, schema) is None
    assert (
        check_schema({"a": True, "c": {"d": "x"}}, schema)
        == "checkpoint['a'] is a bool, expected int"
    )
    assert check_schema({"a": 1, "b": "x", "c": {"d": "x"}}, schema) == (
        "checkpoint['b'] is a str, expected float or None"
    )
    assert check_schema({"a": 1, "c": []}, schema) == "checkpoint['c'] is a list, not a dict"


def test_env_module_named_by_a_checkpoint_is_not_imported(saved, tmp_path, monkeypatch):
    path, payload = saved
    mod = tmp_path / "bundle_env_mod.py"
    marker = tmp_path / "imported"
    mod.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from gymnasium.envs.classic_control import CartPoleEnv\n"
        "class Env(CartPoleEnv):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    bad = tmp_path / "bundle.pt"
    save_checkpoint(
        bad, {**payload, "config": {**payload["config"], "env": "bundle_env_mod:Env"}}
    )
    with pytest.raises(UserError, match=r"names the env 'bundle_env_mod:Env'.*--trust-env-module"):
        snrl.PPO.load(bad)
    assert not marker.exists() and "bundle_env_mod" not in sys.modules
    # the caller may name a registered env instead, or trust the module explicitly
    assert snrl.PPO.load(bad, env="CartPole-v1").config.env == "CartPole-v1"
    assert not marker.exists()
    algo = snrl.PPO.load(bad, trust_env_module=True)
    assert marker.exists() and algo.config.env == "bundle_env_mod:Env"
    sys.modules.pop("bundle_env_mod", None)
