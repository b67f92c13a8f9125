"""Silencing E or I neurons during evaluation: known answers on a hand-built backbone, the
identity when nothing is silenced, period gating, and `snrl perturb` as a user runs it."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

import snrl
from snrl.analysis.perturb import (
    PerturbationSpec,
    Silencing,
    build_perturbation,
    evaluate_perturbed,
    perturbed,
    silence,
    silenced_neurons,
)
from snrl.errors import UserError
from snrl.layers.base import cached_weights
from snrl.networks.spiking import SpikingBackbone
from tests.cli_run import assert_user_error, snrl_inproc


def _backbone(substeps=1, backbone="lif"):
    sign = torch.tensor([1.0] * 9 + [-1.0] * 3)
    net = SpikingBackbone(
        3, [12], 2, force_dale_law=True, recurrent_sign=[sign], seed=1, dt=1e-3, tau_m=20e-3,
        substeps=substeps, backbone=backbone,
    )  # fmt: skip
    with torch.no_grad():  # the readout hears only the E neurons
        net.layers["readout"].weight_in[9:] = 0.0
    return net


def _inputs(t=60, b=2):
    return torch.randn(t, b, 3, generator=torch.Generator().manual_seed(0)) * 3


def _run_steps(net, x):
    """One step per call, as evaluation does (the one-step fast path)."""
    state = net.initial_state(x.shape[1])
    outs, spikes = [], []
    with torch.no_grad(), cached_weights():
        for x_t in x:
            res = net.run(x_t, state)
            state = res.state
            outs.append(res.out)
            name = net.spiking_names[0]
            spikes.append(res.activity[name].spikes.reshape(-1, x.shape[1], 12))
    return torch.stack(outs), torch.cat(spikes)


@pytest.mark.parametrize(
    ("substeps", "backbone"), [(1, "lif"), (2, "lif"), (1, "alif"), (1, "spylif")]
)
def test_silencing_every_e_neuron_leaves_a_constant_readout(substeps, backbone):
    net = _backbone(substeps, backbone)
    x = _inputs()
    out, z = _run_steps(net, x)
    assert z[..., :9].sum() > 20 and out.std() > 0  # it spikes and reads out otherwise
    perturbation = Silencing(silenced_neurons(net, "E", 1.0))
    name = net.spiking_names[0]
    assert perturbation.neurons[name].tolist() == list(range(9))
    with silence(net, perturbation):
        out_s, z_s = _run_steps(net, x)
        # the training path too: a sequence with autograd on (the compiled kernel's path)
        with torch.enable_grad():
            seq = net.run(x, net.initial_state(2))
    assert z_s[..., :9].sum() == 0 and z_s[..., 9:].sum() > 0  # I neurons still fire
    # the readout integrates its bias only (0 at init): constant, whatever the input
    assert torch.equal(out_s, torch.zeros_like(out_s))
    assert seq.activity[name].spikes[..., :9].sum() == 0
    assert torch.equal(seq.out, torch.zeros_like(seq.out))
    # leaving the block restores the layer: same outputs as before, bit for bit
    out_after, _ = _run_steps(net, x)
    assert torch.equal(out_after, out)


def test_silencing_nothing_changes_nothing():
    net = _backbone()
    x = _inputs()
    out, z = _run_steps(net, x)
    with silence(net, Silencing(silenced_neurons(net, "I", 0.0))):
        out0, z0 = _run_steps(net, x)
    assert torch.equal(out, out0) and torch.equal(z, z0)


def test_period_gating_per_row():
    net = _backbone()
    x = _inputs(b=2)
    p = Silencing(silenced_neurons(net, "E", 1.0))
    p.active = torch.tensor([True, False])  # row 0 silenced, row 1 not
    _, z = _run_steps(net, x)
    with silence(net, p):
        _, z_p = _run_steps(net, x)
    assert z_p[:, 0, :9].sum() == 0
    assert torch.equal(z_p[:, 1], z[:, 1])


def test_choice_of_neurons_is_seeded_and_checked():
    net = _backbone()
    a = silenced_neurons(net, "E", 0.5, seed=3)["lif0"]
    assert len(a) == 4 or len(a) == 5  # round(0.5 * 9)
    assert set(a) <= set(range(9))
    assert np.array_equal(a, silenced_neurons(net, "E", 0.5, seed=3)["lif0"])
    with pytest.raises(UserError, match="fraction"):
        silenced_neurons(net, "E", 1.5)
    plain = SpikingBackbone(3, [6], 2, force_dale_law=False, seed=0)
    with pytest.raises(UserError, match="Dale"):
        silenced_neurons(plain, "I", 0.5)


@pytest.mark.parametrize("algo_cls", [snrl.PPO, snrl.DQN])
def test_evaluation_with_nothing_silenced_is_bit_identical(algo_cls):
    algo = algo_cls("CartPole-v1", backbone="lif", hidden_size=10, seed=0)
    base = evaluate_perturbed(algo, None, n_episodes=2, seed=5)
    none = evaluate_perturbed(
        algo, Silencing(silenced_neurons(algo.agent.actor, "I", 0.0)), n_episodes=2, seed=5
    )
    assert none["returns"] == base["returns"]
    assert base["returns"] == algo.evaluate(n_episodes=2, seed=5)["returns"]
    every_i = Silencing(silenced_neurons(algo.agent.actor, "I", 1.0))
    res = evaluate_perturbed(algo, every_i, n_episodes=2, seed=5)
    assert res["active_fraction"] == 1.0
    algo.close()


def test_period_gating_on_a_neurogym_task():
    algo = snrl.PPO("PerceptualDecisionMaking-v0", backbone="lif", hidden_size=8, n_envs=1, seed=0)
    p = Silencing(silenced_neurons(algo.agent.actor, "E", 1.0))
    res = evaluate_perturbed(algo, p, n_episodes=1, seed=0, period="stimulus")
    # NeuroGym PDM: fixation 100 ms, stimulus 2000 ms, decision 100 ms (dt 100 ms)
    assert res["active_fraction"] == pytest.approx(20 / 22, abs=0.02)
    with pytest.raises(UserError, match="no period 'sample'.*stimulus"):
        evaluate_perturbed(algo, p, n_episodes=1, seed=0, period="sample")
    algo.close()


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "run"
    algo = snrl.PPO(
        "PerceptualDecisionMaking-v0", backbone="lif", hidden_size=8, n_envs=1, seed=0,
        run_dir=out,
    )  # fmt: skip
    algo.learn(128)
    algo.close()
    return out


def test_snrl_perturb_as_a_user_runs_it(run_dir, capsys):
    ckpt = run_dir / "checkpoints" / "best.pt"
    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    res = snrl_inproc(
        capsys, "perturb", run_dir, "--silence", "I", "--fraction", "0.5",
        "--period", "stimulus", "--episodes", 2,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout)
    out = run_dir / "perturb"
    assert line["out"] == str(out) and set(line["files"]) == {"perturb.json", "perturb.png"}
    report = json.loads((out / "perturb.json").read_text())
    assert report["perturbation"]["population"] == "I"
    assert report["perturbation"]["period"] == "stimulus"
    assert len(report["perturbation"]["neurons"]["lif0"]) == 1  # round(0.5 * 2) of 8 x 20 %
    for key in ("unperturbed", "perturbed"):
        assert report[key]["n_episodes"] == 2 and "accuracy" in report[key]
    assert report["effect"]["mean_return"] == pytest.approx(
        report["perturbed"]["mean_return"] - report["unperturbed"]["mean_return"]
    )
    assert (out / "perturb.png").stat().st_size > 0
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == digest  # checkpoint untouched
    # a rerun replaces its own files
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--episodes", 1)
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "perturb.json").read_text())["perturbation"]["population"] == "E"

    # a period the task does not have, and a fraction out of range: exit 2, one line
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--period", "sample")
    assert_user_error(res, "no period 'sample'")
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--fraction", "2")
    assert_user_error(res, "--fraction 2")


def test_snrl_perturb_never_overwrites_a_foreign_file(run_dir, tmp_path, capsys):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "perturb.json").write_text('{"mine": 1}')
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--out", other)
    assert_user_error(res, "not an snrl perturbation report")
    assert (other / "perturb.json").read_text() == '{"mine": 1}'
    assert not (other / "perturb.png").exists()


def test_a_copied_or_planted_report_vouches_for_nothing(run_dir, tmp_path, capsys):
    """A perturb.json of snrl's format that was not written in this folder (copied from a
    real run, or planted) does not let a rerun replace it or the perturb.png beside it."""
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--episodes", 1)
    assert res.returncode == 0, res.stderr
    other = tmp_path / "elsewhere"
    other.mkdir()
    report = (run_dir / "perturb" / "perturb.json").read_text()
    (other / "perturb.json").write_text(report)  # a real report, copied
    (other / "perturb.png").write_bytes(b"my figure")
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--out", other)
    assert_user_error(res, "was not written in")
    assert (other / "perturb.json").read_text() == report
    assert (other / "perturb.png").read_bytes() == b"my figure"
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "I", "--out", other / "new")
    assert res.returncode == 0, res.stderr  # a report written there is replaced by a rerun
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--out", other / "new")
    assert res.returncode == 0, res.stderr


def test_stimulation_adds_exactly_the_current_to_the_membrane():
    """No spikes (a huge threshold): the stimulated neurons' membrane moves by
    X (1 - alpha^t) / (1 - alpha) after t steps, the others' not at all."""
    sign = torch.tensor([1.0] * 9 + [-1.0] * 3)
    net = SpikingBackbone(
        3, [12], 2, force_dale_law=True, recurrent_sign=[sign], seed=1, dt=1e-3, tau_m=20e-3,
        threshold=1e9,
    )  # fmt: skip
    x = _inputs(t=30, b=2)
    spec = PerturbationSpec(kind="stimulate", population="E", current=0.3)
    p = build_perturbation(net, spec)
    assert p.stimulated["lif0"].tolist() == list(range(9))

    def membranes():
        state, vs = net.initial_state(2), []
        with torch.no_grad(), cached_weights():
            for x_t in x:
                res = net.run(x_t, state)
                state = res.state
                vs.append(res.activity["lif0"].v.reshape(2, 12).double())
        return torch.stack(vs)

    v0 = membranes()
    with perturbed(net, p):
        v1 = membranes()
    alpha = np.exp(-1e-3 / 20e-3)
    t = np.arange(1, 31)
    expect = 0.3 * (1 - alpha**t) / (1 - alpha)
    diff = (v1 - v0).numpy()
    assert np.allclose(diff[:, :, :9], expect[:, None, None], rtol=1e-5, atol=1e-5)
    assert np.array_equal(diff[:, :, 9:], np.zeros_like(diff[:, :, 9:]))


def test_noise_of_zero_is_the_unperturbed_network_and_noise_is_seeded():
    net = _backbone()
    x = _inputs()
    out, z = _run_steps(net, x)
    with perturbed(net, build_perturbation(net, PerturbationSpec(kind="noise", noise_std=0.0))):
        out0, z0 = _run_steps(net, x)
    assert torch.equal(out, out0) and torch.equal(z, z0)
    runs = []
    for _ in range(2):
        spec = PerturbationSpec(kind="noise", noise_std=2.0, noise_seed=4)
        with perturbed(net, build_perturbation(net, spec)):
            runs.append(_run_steps(net, x)[1])
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], z)


def test_perturbation_spec_checks_its_values():
    with pytest.raises(UserError, match="--noise -1"):
        PerturbationSpec(kind="noise", noise_std=-1.0)
    with pytest.raises(UserError, match="kind 'zap'"):
        PerturbationSpec(kind="zap")
    with pytest.raises(UserError, match="population"):
        PerturbationSpec(kind="stimulate", population="X", current=1.0)
    with pytest.raises(UserError, match="--current inf"):
        PerturbationSpec(kind="stimulate", population="E", current=float("inf"))
    net = _backbone()
    with pytest.raises(UserError, match="snrl analyze"):
        build_perturbation(net, PerturbationSpec(kind="lesion", cluster=0))
    entry = {"layer": "lif0", "n_clusters": 2, "labels": [0] * 6 + [1] * 6}
    p = build_perturbation(net, PerturbationSpec(kind="lesion", cluster=1), entry)
    assert p.silenced["lif0"].tolist() == list(range(6, 12))
    with pytest.raises(UserError, match="--cluster 2"):
        build_perturbation(net, PerturbationSpec(kind="lesion", cluster=2), entry)


@pytest.fixture
def multitask_run(tmp_path):
    out = tmp_path / "mt"
    algo = snrl.PPO(
        "snrl.tasks:PerceptualDecisionMaking-v0,GoNogo-v0", backbone="lif", hidden_size=12,
        n_envs=2, seed=0, run_dir=out,
    )  # fmt: skip
    algo.learn(64)
    algo.close()
    return out


def test_lesion_of_a_task_variance_cluster_as_a_user_runs_it(multitask_run, run_dir, capsys):
    ckpt = multitask_run / "checkpoints" / "best.pt"
    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    lesion = ("perturb", multitask_run, "--lesion", "cluster", "--episodes", 2)
    # no analysis yet: say to run it
    assert_user_error(snrl_inproc(capsys, *lesion, "--cluster", 0), "snrl analyze")
    res = snrl_inproc(capsys, "analyze", multitask_run, "--episodes", 2, "--no-decode")
    assert res.returncode == 0, res.stderr
    summary = json.loads((multitask_run / "analysis" / "summary.json").read_text())
    tv = summary["task_variance"]
    assert tv["tasks"] == ["PerceptualDecisionMaking-v0", "GoNogo-v0"]
    assert tv["checkpoint"]["sha256"] == digest
    assert (multitask_run / "analysis" / "task_variance.png").stat().st_size > 0
    assert json.loads(res.stdout)["task_variance"]["n_clusters"] == tv["n_clusters"]
    assert tv["n_clusters"] >= 1
    res = snrl_inproc(capsys, *lesion, "--cluster", 0)
    assert res.returncode == 0, res.stderr
    report = json.loads((multitask_run / "perturb" / "perturb.json").read_text())
    members = [i for i, c in enumerate(tv["labels"]) if c == 0]
    assert report["perturbation"]["neurons"] == {tv["layer"]: members}
    assert set(report["effect"]["accuracy_by_task"]) == set(tv["tasks"])
    for t, d in report["effect"]["accuracy_by_task"].items():
        pert, base = (report[k]["accuracy_by_task"][t] for k in ("perturbed", "unperturbed"))
        assert d == pytest.approx(pert - base)
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == digest  # checkpoint untouched
    # bad combinations: exit 2, one line
    assert_user_error(snrl_inproc(capsys, *lesion, "--cluster", 99), "--cluster 99")
    assert_user_error(snrl_inproc(capsys, *lesion), "needs --cluster")
    assert_user_error(
        snrl_inproc(capsys, "perturb", run_dir, "--lesion", "cluster", "--cluster", 0),
        "several tasks",
    )
    assert_user_error(snrl_inproc(capsys, "perturb", run_dir, "--stimulate", "E"), "--current")
    assert_user_error(
        snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--current", 1), "--current"
    )
    assert_user_error(
        snrl_inproc(capsys, "perturb", run_dir, "--noise", 1, "--fraction", 0.5), "--fraction"
    )
    res = snrl_inproc(capsys, "perturb", run_dir, "--silence", "E", "--noise", 1)
    assert res.returncode == 2


def test_snrl_perturb_stimulate_and_noise(run_dir, capsys):
    ckpt = run_dir / "checkpoints" / "best.pt"
    digest = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    res = snrl_inproc(capsys, "perturb", run_dir, "--noise", 0, "--episodes", 2)
    assert res.returncode == 0, res.stderr
    report = json.loads((run_dir / "perturb" / "perturb.json").read_text())
    assert report["perturbed"]["returns"] == report["unperturbed"]["returns"]
    res = snrl_inproc(
        capsys, "perturb", run_dir, "--stimulate", "I", "--current", "0.5", "--episodes", 2
    )
    assert res.returncode == 0, res.stderr
    report = json.loads((run_dir / "perturb" / "perturb.json").read_text())
    assert report["perturbation"]["kind"] == "stimulate"
    assert report["perturbation"]["current"] == 0.5
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == digest
