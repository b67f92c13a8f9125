"""time_profile: "task" (today's rule, the default) and "biological" (ms neuron steps, 20 ms
membranes, a readout of one task step, 1.5 s ALIF adaptation of strength 20), resolved in
AgentConfig.resolve_time; the config key through config.json and the CLI."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import snrl
from snrl.cli import main
from snrl.config import config_from_dict, config_to_dict, load_config
from snrl.errors import UserError

GONOGO = "neurogym.envs.native.gonogo:GoNogo"  # NeuroGym, dt = 100 ms by default


def _time(cfg) -> tuple:
    return cfg.dt, cfg.substeps, cfg.tau_m, cfg.readout_tau_m, cfg.tau_a, cfg.beta


def _bio(**kwargs) -> snrl.PPOConfig:
    return snrl.PPOConfig(backbone="alif", time_profile="biological", **kwargs)


def test_task_profile_is_the_default_and_unchanged() -> None:
    assert snrl.PPOConfig().time_profile == "task"
    # 100 ms task step: one 100 ms neuron step, membranes of 10 task steps, ALIF 200 ms, 1.8
    assert _time(snrl.PPOConfig(backbone="alif").resolve_time(0.1)) == pytest.approx(
        (0.1, 1, 1.0, 1.0, 0.2, 1.8)
    )
    assert snrl.PPOConfig(backbone="alif").resolve_time(None).beta == 1.8  # no clock


@pytest.mark.parametrize(
    "task_dt, want",
    [
        (0.1, (0.01, 10, 0.02, 0.1, 1.5, 20)),  # 100 ms: ten 10 ms neuron steps, readout 100 ms
        (0.02, (0.01, 2, 0.02, 0.02, 1.5, 20)),  # 20 ms: two 10 ms steps, readout 20 ms
        (0.03, (0.01, 3, 0.02, 0.03, 1.5, 20)),  # 30 ms: 0.03 / 0.01 is 2.99999... in floats
        (0.005, (0.005, 1, 0.02, 0.005, 1.5, 20)),  # already finer than 10 ms: one step
    ],
)
def test_biological_profile_by_hand(task_dt, want) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 20 ms membranes under a 100 ms task step: no warning
        got = _bio().resolve_time(task_dt)
    assert _time(got) == pytest.approx(want)
    assert got.time_profile == "biological"


def test_biological_profile_keeps_what_the_user_set() -> None:
    cfg = _bio(tau_m=0.05, readout_tau_m=0.3, tau_a=2.0, substeps=20, beta=1.8)
    cfg = cfg.resolve_time(0.1)
    assert _time(cfg) == pytest.approx((0.005, 20, 0.05, 0.3, 2.0, 1.8))  # more substeps stay
    # a dt you set: as many substeps as it takes to cover the task step with it
    got = _time(_bio(dt=0.002).resolve_time(0.1))
    assert got == pytest.approx((0.002, 50, 0.02, 0.1, 1.5, 20))
    # resolving a resolved config changes nothing (a checkpoint is loaded the same)
    once = _bio().resolve_time(0.1)
    assert once.resolve_time(0.1) == once


def test_biological_profile_needs_a_clock_and_bptt() -> None:
    with pytest.raises(UserError, match=r"time_profile='biological' needs a task with a clock"):
        _bio(env="CartPole-v1").resolve_time(None)
    with pytest.raises(UserError, match="e-prop does not take"):
        _bio(learning_rule="eprop").resolve_time(0.1)
    # ANN backbones have no neuron time: the profile changes nothing for them
    gru = snrl.PPOConfig(backbone="gru", time_profile="biological")
    assert gru.resolve_time(0.1).substeps == 1
    assert gru.resolve_time(None).dt == 1e-3


def test_bad_profile_names_the_choices() -> None:
    with pytest.raises(UserError, match="time_profile.*'task', 'biological'"):
        load_config(snrl.PPOConfig, sets=["time_profile=biologic"])
    with pytest.raises(UserError, match="tau_a"):
        snrl.PPOConfig(tau_a=0.0)


def test_alif_layers_get_the_profile(tmp_path) -> None:
    pytest.importorskip("neurogym")
    algo = snrl.PPO(GONOGO, n_envs=1, hidden_size=8, backbone="alif", time_profile="biological")
    for net in (algo.agent.policy, algo.agent.critic):
        layer, readout = net.layers["alif0"], net.layers["readout"]
        assert net.substeps == 10 and layer.dt == pytest.approx(0.01)
        assert layer.tau_m.tolist() == pytest.approx([0.02] * 8)
        assert layer.tau_a.tolist() == pytest.approx([1.5] * 8)
        assert float(layer.beta) == 20.0
        assert readout.tau_m.tolist() == pytest.approx([0.1] * readout.output_size)
    algo.save(tmp_path / "ckpt.pt")
    back = snrl.PPO.load(tmp_path / "ckpt.pt", trust_env_module=True)
    assert _time(back.config) == pytest.approx(_time(algo.config))
    assert back.agent.policy.layers["alif0"].tau_a.tolist() == pytest.approx([1.5] * 8)
    assert float(back.agent.policy.layers["alif0"].beta) == 20.0


def test_a_run_saved_before_beta_was_a_key_keeps_its_adaptation() -> None:
    # config.json / checkpoints written before `beta` existed lack it, and every such run had
    # 1.8: loading or resuming one must not rebuild its ALIF layers with the profile's 20
    saved = config_to_dict(_bio(env=GONOGO).resolve_time(0.1))
    assert saved.pop("beta") == 20.0
    old = config_from_dict(snrl.PPOConfig, saved)
    assert old.beta == 1.8 and old.resolve_time(0.1).beta == 1.8
    assert config_from_dict(snrl.PPOConfig, {**saved, "beta": None}).resolve_time(0.1).beta == 20


def test_beta_reaches_the_alif_layers_and_the_checkpoint(tmp_path) -> None:
    # the config's adaptation strength is the layers' (policy and critic), survives a
    # save/load, and changes the dynamics: a stronger adaptation fires less to the same drive
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=8, backbone="alif", beta=6.0)
    for net in (algo.agent.policy, algo.agent.critic):
        assert float(net.layers["alif0"].beta) == pytest.approx(6.0)
    algo.save(tmp_path / "ckpt.pt")
    back = snrl.PPO.load(tmp_path / "ckpt.pt")
    assert back.config.beta == 6.0
    assert float(back.agent.policy.layers["alif0"].beta) == pytest.approx(6.0)
    counts = []
    for beta in (0.0, 6.0):
        cfg = snrl.PPOConfig(backbone="alif", beta=beta, force_dale_law=False).resolve_time(None)
        layer = cfg.build_backbone(4, 2, seed=0).layers["alif0"]
        drive = torch.full((200, 1, layer.input_size), 2.0)
        with torch.no_grad():
            spikes, _ = layer(drive, layer.initial_state(1))
        counts.append(float(spikes.sum()))
    assert counts[1] < 0.8 * counts[0]
    with pytest.raises(UserError, match="beta"):
        snrl.PPOConfig(beta=-1.0)


def _train_bio_gonogo(out, *, hidden: int, sets: tuple[str, ...] = ()) -> int:
    """``snrl train`` of a tiny biological-profile ALIF on GoNogo-v0 (64 env steps)."""
    sets = ("n_steps=32", "eval_interval=0", "eval_episodes=1", "time_profile=biological", *sets)
    argv = ["train", "--env", "GoNogo-v0", "--backbone", "alif", "--hidden", str(hidden)]
    argv += ["--steps", "64", "--n-envs", "2", "--quiet", "--out", str(out)]
    return main(argv + [x for s in sets for x in ("--set", s)])


def test_cli_set_time_profile_reaches_config_json(tmp_path, capsys) -> None:
    pytest.importorskip("neurogym")
    out = tmp_path / "run"
    assert _train_bio_gonogo(out, hidden=8) == 0
    printed = capsys.readouterr().out
    assert "neuron time: dt=0.01 s, substeps=10 per env step, tau_m=0.02 s" in printed
    assert "readout_tau_m=0.1 s, tau_a=1.5 s, beta=20 (time_profile=biological)" in printed
    saved = json.loads((out / "config.json").read_text())
    assert saved["time_profile"] == "biological"
    assert (saved["dt"], saved["substeps"], saved["tau_m"]) == pytest.approx((0.01, 10, 0.02))
    assert (saved["readout_tau_m"], saved["tau_a"], saved["beta"]) == pytest.approx((0.1, 1.5, 20))


@pytest.mark.parametrize(
    "sets, env, match",
    [
        (["time_profile=fast"], "GoNogo-v0", "time_profile"),
        (["time_profile=biological"], "CartPole-v1", "needs a task with a clock"),
        (["tau_a=2,0.1"], "GoNogo-v0", "0 < low <= high"),
        (["tau_m=0.005,0.01,0.02"], "GoNogo-v0", "tau_m"),
    ],
)
def test_cli_bad_profile_exits_2_and_writes_nothing(tmp_path, capsys, sets, env, match) -> None:
    pytest.importorskip("neurogym")
    out = tmp_path / "run"
    argv = ["train", "--env", env, "--hidden", "8", "--steps", "64", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err and "Traceback" not in err
    assert not out.exists()


def test_spread_time_by_hand() -> None:
    # (low, high): the range's log-uniform quantiles low * (high / low) ** ((i + 1/2) / n)
    from snrl.agents.config import spread_time

    got = spread_time((0.1, 1.6), 4, seed=0)
    assert sorted(got.tolist()) == pytest.approx([0.1 * 16 ** (k / 8) for k in (1, 3, 5, 7)])
    assert got.dtype == torch.float32
    assert spread_time(0.02, 4, seed=0) == 0.02  # a number stays one number
    assert spread_time((0.3, 0.3), 3, seed=0).tolist() == pytest.approx([0.3] * 3)
    # the order comes from the seed: the same seed the same neurons, another seed others
    a, b = spread_time((0.1, 2.0), 64, seed=5), spread_time((0.1, 2.0), 64, seed=6)
    assert torch.equal(a, spread_time((0.1, 2.0), 64, seed=5))
    assert not torch.equal(a, b) and torch.equal(a.sort().values, b.sort().values)


def test_time_constant_ranges_reach_every_neuron_and_the_checkpoint(tmp_path, capsys) -> None:
    pytest.importorskip("neurogym")
    out = tmp_path / "run"
    assert _train_bio_gonogo(out, hidden=40, sets=("tau_a=0.1,2", "tau_m=[0.005, 0.05]")) == 0
    printed = capsys.readouterr().out
    assert "tau_m=0.005-0.05 s per neuron, readout_tau_m=0.1 s" in printed
    assert "tau_a=0.1-2 s per neuron, beta=20" in printed
    saved = json.loads((out / "config.json").read_text())
    assert (saved["tau_m"], saved["tau_a"]) == ([0.005, 0.05], [0.1, 2.0])
    algo = snrl.PPO.load(out / "checkpoints" / "last.pt", trust_env_module=True)
    assert (algo.config.tau_m, algo.config.tau_a) == ((0.005, 0.05), (0.1, 2.0))
    for net in (algo.agent.policy, algo.agent.critic):
        layer = net.layers["alif0"]
        tau_m, tau_a = layer.tau_m.detach(), layer.tau_a.detach()
        want_m = [0.005 * 10 ** ((i + 0.5) / 40) for i in range(40)]
        want_a = [0.1 * 20 ** ((i + 0.5) / 40) for i in range(40)]
        assert sorted(tau_m.tolist()) == pytest.approx(want_m, rel=1e-5)
        assert sorted(tau_a.tolist()) == pytest.approx(want_a, rel=1e-5)
        # per neuron in the dynamics, and in another order than the membranes'
        assert layer.decay("tau_a").tolist() == pytest.approx(torch.exp(-0.01 / tau_a).tolist())
        assert not torch.equal(tau_m.argsort(), tau_a.argsort())
        assert float(net.layers["readout"].tau_m.min()) == pytest.approx(0.1)
        # the inhibitory fifth spans the range too, not one end of it
        inhibitory = layer.recurrent_sign < 0
        assert tau_a[inhibitory].min() < 0.3 and tau_a[inhibitory].max() > 0.6


def test_a_membrane_range_warns_by_its_shortest() -> None:
    with pytest.warns(UserWarning, match="tau_m=0.01 s is shorter than the task's step"):
        snrl.PPOConfig(tau_m=(0.01, 2.0)).resolve_time(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        snrl.PPOConfig(tau_m=(0.5, 2.0)).resolve_time(0.1)


def test_tune_samples_one_number_for_a_key_that_may_be_a_range() -> None:
    from snrl.experiments.tune import _key_types

    types_ = _key_types(snrl.PPOConfig)
    assert types_["tau_m"] is float and types_["tau_a"] is float
    assert types_["readout_tau_m"] is float and types_["n_steps"] is int
