"""Tuned settings per env and backbone (snrl/zoo): the shipped files, the precedence
defaults < tuned < config file < flags/--set, the opt-out, the CLI's notice and record,
resume, and the Python API's parity with the CLI."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import pytest
import torch

import snrl
from snrl import zoo
from snrl.agents import ALGOS, DQNConfig, PPOConfig
from snrl.config import config_to_dict, load_config
from snrl.envs.neurogym import resolve_env_id
from snrl.errors import UserError
from snrl.networks.factory import BACKBONES
from snrl.tasks.multitask import is_multitask_env, multitask_env_id
from tests.cli_run import assert_user_error, snrl_inproc

PEND = ("Pendulum-v1", "lif")
FOUR_TASKS = ("PerceptualDecisionMaking", "GoNogo", "DelayMatchSample", "ContextDecisionMaking")
ENTRY = zoo.lookup("ppo", *PEND)


def _all_entries():
    return [(algo, key) for algo in zoo.ALGOS for key in zoo.entries(algo)]


@pytest.mark.parametrize(("algo", "key"), _all_entries(), ids=lambda x: str(x))
def test_every_shipped_entry_is_a_valid_config(algo, key):
    """Every key of every entry is a config key of its algorithm with a valid value (the
    config validation of a file, then the dataclass's own checks), for a registered env id
    and a built-in backbone. A multitask id must be the one `snrl train --tasks` and the API
    record (full ids), or no run would ever match it."""
    env, backbone = key
    entry = zoo.entries(algo)[key]
    if is_multitask_env(env):
        assert multitask_env_id(env) == env
    else:
        resolve_env_id(env)  # a NeuroGym id is registered when neurogym is imported
        assert env in gym.registry, env
    assert backbone in BACKBONES
    assert entry.values, "an empty entry would only add a record"
    cfg = load_config(ALGOS[algo].Config, base={"env": env, "backbone": backbone, **entry.values})
    for k, v in entry.values.items():
        assert getattr(cfg, k) == v, k


def test_the_files_hold_the_verified_entries():
    """The entries the benchmark verifies are there; PPO CartPole has none (its defaults)."""
    for algo, env in [
        ("ppo", "Acrobot-v1"),
        ("ppo", "Pendulum-v1"),
        ("ppo", "LunarLander-v3"),
        ("ppo", "MountainCarContinuous-v0"),
        ("ppo", "MountainCar-v0"),
        ("ppo", "IntervalDiscrimination-v0"),
        ("ppo", "ContextDecisionMaking-v0"),
        ("ppo", "snrl.tasks:" + ",".join(f"{t}-v0" for t in FOUR_TASKS)),
        ("dqn", "CartPole-v1"),
        ("dqn", "Acrobot-v1"),
    ]:
        assert zoo.lookup(algo, env, "lif") is not None, (algo, env)
    assert zoo.lookup("ppo", "CartPole-v1", "lif") is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('["Acrobot-v1".lif]\nseed = 3\n', "sets seed, which a tuned entry may not set"),
        ('["Acrobot-v1".lif]\ntuned = false\n', "sets tuned"),
        ('"Acrobot-v1" = 3\n', "is not a table of backbone tables"),
        ('["Acrobot-v1"]\nlif = 3\n', "is not a table of keys"),
    ],
)
def test_a_malformed_file_is_refused(text, fragment):
    with pytest.raises(UserError, match=fragment):
        zoo.parse("ppo", text)


def test_unknown_algo():
    with pytest.raises(UserError, match="one of ppo, a2c, dqn"):
        zoo.entries("sac")


def test_precedence_defaults_tuned_file_set(tmp_path):
    """defaults < tuned < base < --config file < --set, key by key."""
    assert PPOConfig().gamma == 0.98 and ENTRY.values["gamma"] == 0.9
    assert PPOConfig().n_steps == 32 and ENTRY.values["n_steps"] == 128
    assert PPOConfig().gae_lambda == 0.8 and ENTRY.values["gae_lambda"] == 0.95
    env = {"env": "Pendulum-v1"}
    # tuned over the defaults
    cfg, entry = zoo.resolve(PPOConfig, "ppo", base=env)
    assert entry is ENTRY
    assert (cfg.gamma, cfg.n_steps, cfg.gae_lambda, cfg.substeps) == (0.9, 128, 0.95, 2)
    assert cfg.clip_coef == PPOConfig().clip_coef  # a key the entry does not set: the default
    # the file over the tuned values
    toml = tmp_path / "c.toml"
    toml.write_text('env = "Pendulum-v1"\ngamma = 0.95\nn_envs = 4\n')
    cfg, _ = zoo.resolve(PPOConfig, "ppo", toml_path=toml)
    assert (cfg.gamma, cfg.n_envs, cfg.gae_lambda) == (0.95, 4, 0.95)
    # --set over the file
    cfg, _ = zoo.resolve(PPOConfig, "ppo", toml_path=toml, sets=["gamma=0.97"])
    assert (cfg.gamma, cfg.n_envs, cfg.gae_lambda) == (0.97, 4, 0.95)
    # a base value (a CLI flag, a benchmark's override) over the tuned value, under the file
    cfg, _ = zoo.resolve(PPOConfig, "ppo", base={**env, "n_envs": 8, "gamma": 0.5})
    assert (cfg.n_envs, cfg.gamma) == (8, 0.5)
    cfg, _ = zoo.resolve(PPOConfig, "ppo", toml_path=toml, base={"n_envs": 8})
    assert cfg.n_envs == 4
    # a key the caller gives is not listed in the record
    cfg, _ = zoo.resolve(PPOConfig, "ppo", base=env, sets=["substeps=1"])
    assert cfg.substeps == 1 and "substeps" not in cfg.tuned_from
    # a value equal to the default still counts as given
    cfg, _ = zoo.resolve(PPOConfig, "ppo", base=env, sets=["gamma=0.98"])
    assert cfg.gamma == 0.98


def test_the_record_lists_the_applied_keys_only(tmp_path):
    cfg, _ = zoo.resolve(PPOConfig, "ppo", base={"env": "Pendulum-v1"}, sets=["gamma=0.5"])
    assert cfg.tuned_from.startswith('snrl/zoo/ppo.toml ["Pendulum-v1".lif]: ')
    listed = dict(item.split("=", 1) for item in cfg.tuned_from.split(": ", 1)[1].split(", "))
    assert set(listed) == set(ENTRY.values) - {"gamma"}
    assert listed["n_envs"] == "16" and listed["substeps"] == "2"


def test_opt_out_and_unknown_env_and_backbone_are_the_plain_config(tmp_path):
    # tuned_from: empty with tuned off, else it names the table the file lacks
    none = 'none: snrl/zoo/ppo.toml has no ["{}".{}] entry'
    for base, sets, record in [
        ({"env": "Pendulum-v1"}, ["tuned=false"], ""),
        ({"env": "Pendulum-v1", "tuned": False}, [], ""),
        ({"env": "Pendulum-v1", "backbone": "mlp"}, [], none.format("Pendulum-v1", "mlp")),
        ({"env": "CartPole-v1"}, [], none.format("CartPole-v1", "lif")),  # CartPole's defaults
        ({"env": "MountainCar-v0", "backbone": "gru"}, [], none.format("MountainCar-v0", "gru")),
    ]:
        cfg, entry = zoo.resolve(PPOConfig, "ppo", base=base, sets=sets)
        assert entry is None
        plain = load_config(PPOConfig, base=base, sets=sets)
        assert cfg == dataclasses.replace(plain, tuned_from=record)
        assert cfg.tuned_from == record


def _same(algo_cfg, cfg):
    """The algorithm's config is ``cfg`` with its clock and time constants resolved from the
    env (``dt``, ``tau_m``, ``readout_tau_m``, ``tau_a``: docs/neuro.md, "Time")."""
    assert cfg.dt is None  # a zoo entry may set a tau; unset ones are resolved
    assert algo_cfg.tau_m is not None and algo_cfg.readout_tau_m is not None
    clock = {k: getattr(algo_cfg, k) for k in ("dt", "tau_m", "readout_tau_m", "tau_a", "beta")}
    assert config_to_dict(algo_cfg) == config_to_dict(dataclasses.replace(cfg, **clock))


def test_api_applies_the_same_settings_as_the_cli_resolution():
    """snrl.PPO(env, **kw) == zoo.resolve with kw as the caller's values, and keywords win."""
    algo = snrl.PPO("Pendulum-v1", n_envs=4, gamma=0.95)
    cfg, _ = zoo.resolve(PPOConfig, "ppo", base={"env": "Pendulum-v1", "n_envs": 4, "gamma": 0.95})
    _same(algo.config, cfg)
    assert algo.config.substeps == 2 and algo.config.n_envs == 4 and algo.config.gamma == 0.95
    assert "n_envs" not in algo.config.tuned_from and "substeps=2" in algo.config.tuned_from
    algo.close()
    dqn = snrl.DQN("Acrobot-v1")
    dcfg, _ = zoo.resolve(DQNConfig, "dqn", base={"env": "Acrobot-v1"})
    _same(dqn.config, dcfg)
    assert (
        dqn.config.gradient_steps
        == zoo.lookup("dqn", "Acrobot-v1", "lif").values["gradient_steps"]
        != DQNConfig().gradient_steps
    )
    dqn.close()


def test_api_opt_out_config_objects_and_no_global_state():
    before = config_to_dict(PPOConfig())
    rng = torch.random.get_rng_state()
    tuned = snrl.PPO("Pendulum-v1")
    plain = snrl.PPO("Pendulum-v1", tuned=False)
    given = snrl.PPO(config=PPOConfig(env="Pendulum-v1"))  # a config object is used as given
    assert tuned.config.substeps == 2
    for algo in (plain, given):
        assert algo.config.substeps == 1 and algo.config.gamma == 0.98
        assert algo.config.tuned_from == ""
    assert config_to_dict(PPOConfig()) == before
    assert torch.equal(torch.random.get_rng_state(), rng)
    cart = snrl.PPO("CartPole-v1")  # no entry: the defaults, and tuned_from says why
    none = 'none: snrl/zoo/ppo.toml has no ["CartPole-v1".lif] entry'
    _same(cart.config, PPOConfig(tuned_from=none))
    for algo in (tuned, plain, given, cart):
        algo.close()


def test_api_logs_what_it_applied(caplog):
    with caplog.at_level("INFO", logger="snrl"):
        snrl.PPO("Pendulum-v1").close()
    assert 'tuned settings snrl/zoo/ppo.toml ["Pendulum-v1".lif]' in caplog.text


TINY = ["--n-envs", "4", "--set", "n_steps=8", "--set", "n_epochs=1", "--set", "eval_episodes=1"]


def test_cli_prints_records_and_resumes_without_resolving_again(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    res = snrl_inproc(
        capsys, "train", "--env", "Pendulum-v1", "--steps", "16", "--quiet", "--out", out, *TINY
    )
    assert res.returncode == 0, res.stderr
    notice = [line for line in res.stderr.splitlines() if line.startswith("tuned settings:")]
    assert len(notice) == 1, res.stderr
    assert 'snrl/zoo/ppo.toml ["Pendulum-v1".lif]' in notice[0] and "--no-tuned" in notice[0]
    assert "substeps=2" in notice[0] and "n_envs" not in notice[0] and "n_epochs" not in notice[0]
    saved = json.loads((out / "config.json").read_text())
    assert (
        saved["tuned"] is True
        and saved["tuned_from"] == notice[0].split(": ", 1)[1].split(" (--no-tuned")[0]
    )
    assert (saved["substeps"], saved["gamma"], saved["n_envs"], saved["n_epochs"]) == (2, 0.9, 4, 1)
    # --resume continues the saved config, even if the shipped entry changed meanwhile
    changed = dataclasses.replace(ENTRY, values={**ENTRY.values, "gamma": 0.5})
    monkeypatch.setattr(zoo, "lookup", lambda *a: changed)
    res = snrl_inproc(capsys, "train", "--out", out, "--resume", "--steps", "48", "--quiet")
    assert res.returncode == 0, res.stderr
    assert "tuned settings" not in res.stderr
    assert json.loads((out / "config.json").read_text()) == saved
    ckpt = snrl.PPO.load(out / "checkpoints" / "last.pt")
    assert ckpt.config.gamma == 0.9 and ckpt.env_step > 16
    ckpt.close()


def test_cli_no_tuned(tmp_path, capsys):
    out = tmp_path / "run"
    res = snrl_inproc(
        capsys,
        "train",
        "--env",
        "Pendulum-v1",
        "--steps",
        "16",
        "--quiet",
        "--no-tuned",
        "--out",
        out,
        *TINY,
    )
    assert res.returncode == 0, res.stderr
    assert "tuned settings" not in res.stderr
    saved = json.loads((out / "config.json").read_text())
    assert (saved["tuned"], saved["tuned_from"], saved["substeps"], saved["gamma"]) == (
        False,
        "",
        1,
        0.98,
    )


def test_cli_cartpole_has_no_notice(tmp_path, capsys):
    res = snrl_inproc(capsys, "train", "--steps", "16", "--quiet", "--out", tmp_path / "r", *TINY)
    assert res.returncode == 0, res.stderr
    assert "tuned settings" not in res.stderr
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["gamma"] == PPOConfig().gamma
    assert saved["tuned_from"] == 'none: snrl/zoo/ppo.toml has no ["CartPole-v1".lif] entry'


def test_every_tuned_key_given_by_you_is_said():
    entry = zoo.lookup("ppo", "Pendulum-v1", "lif")
    cfg, used = zoo.resolve(PPOConfig, "ppo", base={"env": "Pendulum-v1", **entry.values})
    assert used is None
    assert cfg.tuned_from == (
        'snrl/zoo/ppo.toml ["Pendulum-v1".lif]: (no key applied: you gave every key of it)'
    )


def test_a_tuned_key_that_clashes_with_yours_is_left_out_and_said(tmp_path, capsys):
    """The tuned n_minibatches=4 does not divide n_envs=2: that one key is left out (the rest
    of the entry applies), with a notice in the CLI, a warning in the API, and the record."""
    out = tmp_path / "r"
    res = snrl_inproc(
        capsys, "train", "--env", "Pendulum-v1", "--steps", "16", "--quiet", "--out", out,
        "--n-envs", "2", "--set", "n_steps=8", "--set", "n_epochs=1", "--set", "eval_episodes=1",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "not applied: n_minibatches=4 (must divide n_envs=2)" in res.stderr
    saved = json.loads((out / "config.json").read_text())
    assert (saved["n_minibatches"], saved["substeps"], saved["n_envs"]) == (1, 2, 2)
    assert saved["tuned_from"].endswith("; not applied: n_minibatches=4 (must divide n_envs=2)")
    assert "n_minibatches" not in saved["tuned_from"].split("; not applied")[0]
    with pytest.warns(UserWarning, match=r"not applied n_minibatches=4 \(must divide n_envs=2"):
        algo = snrl.PPO("Pendulum-v1", n_envs=2)
    assert (algo.config.n_minibatches, algo.config.substeps) == (1, 2)
    algo.close()


def test_your_own_bad_value_is_still_your_error(capsys, tmp_path):
    """A value that is wrong whatever the entry says: the usual error, not the entry's."""
    res = snrl_inproc(capsys, "train", "--env", "Pendulum-v1", "--set", "n_minibatches=3",
                      "--n-envs", "4", "--out", tmp_path / "r")  # fmt: skip
    assert_user_error(res, "n_minibatches=3 (must divide n_envs=4)")
    assert "tuned" not in res.stderr and not (tmp_path / "r" / "config.json").exists()


def test_fit_leaves_out_the_whole_entry_when_no_single_key_is_to_blame():
    entry = zoo.TunedEntry("ppo", "X-v0", "lif", {"a": 1, "b": 2})

    def build(keys):
        if keys:
            raise UserError("a and b clash with yours")

    assert zoo._fit(entry, ["a", "b"], build) == (
        [],
        ["the whole entry (a and b clash with yours)"],
    )


def _train_config(*argv):
    """The config `snrl train ARGV --out x` would train (the CLI's own path, nothing run)."""
    from snrl.cli import build_parser
    from snrl.cli.commands import _train_config

    return _train_config(build_parser().parse_args(["train", *argv, "--out", "x"]))


def test_merge_order_is_defaults_tuned_file_flags_set(tmp_path, capsys):
    """One key decided at each level of the CLI's merge, all in one command: clip_coef by the
    defaults, gae_lambda by the tuned entry, gamma by the file (over the entry), n_envs and
    hidden_size by the flags (over the file and the entry), total_steps by --set (over a flag
    and the file)."""
    default, tuned = PPOConfig(), ENTRY.values
    assert "clip_coef" not in tuned and tuned["gae_lambda"] != default.gae_lambda
    assert tuned["gamma"] == 0.9 and tuned["n_envs"] == 16
    toml = tmp_path / "c.toml"
    toml.write_text("gamma = 0.95\nn_envs = 4\nhidden_size = 64\ntotal_steps = 5000\n")
    cfg = _train_config(
        "--env", "Pendulum-v1", "--config", str(toml), "--n-envs", "8", "--hidden", "32",
        "--steps", "1024", "--set", "total_steps=2048",
    )  # fmt: skip
    assert cfg.clip_coef == default.clip_coef  # defaults
    assert cfg.gae_lambda == tuned["gae_lambda"]  # tuned < ...
    assert cfg.gamma == 0.95  # ... < file
    assert (cfg.n_envs, cfg.hidden_size) == (8, 32)  # ... < flags
    assert cfg.total_steps == 2048  # ... < --set
    # the record lists the tuned keys that decided something, no other
    listed = {i.split("=", 1)[0] for i in cfg.tuned_from.split(": ", 1)[1].split(", ")}
    assert "gae_lambda" in listed and not {"gamma", "n_envs", "total_steps"} & listed
    assert "tuned settings:" in capsys.readouterr().err


def test_the_api_and_the_cli_give_the_same_config_from_the_same_values():
    """snrl.PPO's keywords and `snrl train`'s flags are one layer of the same merge."""
    cli = _train_config("--env", "Pendulum-v1", "--n-envs", "8", "--hidden", "32", "--no-dale")
    layer = zoo.Layer.of(
        "snrl.PPO(...)",
        {"env": "Pendulum-v1", "n_envs": 8, "hidden_size": 32, "force_dale_law": False},
        typed=True,
    )
    api, entry, skipped = zoo.configure(PPOConfig, "ppo", [layer])
    assert entry is ENTRY and skipped == []
    assert api == cli
    algo = snrl.PPO("Pendulum-v1", n_envs=8, hidden_size=32, force_dale_law=False)
    _same(algo.config, api)
    algo.close()


def test_a_config_is_built_and_validated_once(monkeypatch):
    """The tuned entry, the file, the flags: merged as dicts, then one construction (a retry
    only when a tuned key clashes with the caller's values)."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Counted:
        env: str = "E-v0"
        backbone: str = "lif"
        tuned: bool = True
        tuned_from: str = ""
        a: int = 1
        b: int = 1

        def __post_init__(self):
            built.append(self)
            if self.a > self.b:
                raise UserError(f"a={self.a} must be <= b={self.b}")

    built: list = []
    entry = zoo.TunedEntry("ppo", "E-v0", "lif", {"a": 5, "b": 9})
    monkeypatch.setattr(zoo, "lookup", lambda *args: entry)
    sets = zoo.sets_layer(["b=7"])
    cfg, used, skipped = zoo.configure(Counted, "ppo", [sets])
    assert (cfg.a, cfg.b, used, skipped) == (5, 7, entry, []) and len(built) == 1
    assert cfg.tuned_from.endswith(": a=5")
    built.clear()  # the caller's b=3 clashes with the tuned a=5: a is left out, and said
    cfg, _, skipped = zoo.configure(Counted, "ppo", [zoo.sets_layer(["b=3"])])
    assert (cfg.a, cfg.b) == (1, 3) and skipped == ["a=5 must be <= b=3"] and len(built) > 1
