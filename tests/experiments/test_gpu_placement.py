"""Where comparison runs go on machines with GPUs (issue 33): the local pool gives each
worker one visible GPU, round robin; Ray takes ``gpus_per_run`` per task."""

from __future__ import annotations

import pytest

from snrl.errors import UserError
from snrl.experiments.backends import ray_gpu_limit, visible_gpus, worker_gpu
from snrl.experiments.spec import CompareSpec


def test_workers_take_the_visible_gpus_round_robin():
    gpus = ["2", "5", "7"]
    assert [worker_gpu(i, gpus) for i in range(7)] == ["2", "5", "7", "2", "5", "7", "2"]
    assert worker_gpu(3, []) is None


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1, 3")
    assert visible_gpus() == ["1", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


def test_ray_packs_runs_by_their_gpu_share():
    assert ray_gpu_limit({"CPU": 16, "GPU": 1}, 0.25) == 4
    assert ray_gpu_limit({"CPU": 16, "GPU": 2}, 0.5) == 4
    assert ray_gpu_limit({"CPU": 16}, None) is None
    with pytest.raises(UserError, match="has 0 GPU"):
        ray_gpu_limit({"CPU": 16}, 0.25)  # Ray would wait for a GPU forever


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(gpus_per_run=0.25), "for the Ray backend"),
        (dict(gpus_per_run=0, backend="ray"), r"in \(0, 64\]"),
        (dict(gpus_per_run=True, backend="ray"), r"in \(0, 64\]"),
        (dict(gpus_per_run="1", backend="ray"), r"in \(0, 64\]"),
    ],
)
def test_bad_gpus_per_run_is_refused(tmp_path, kw, msg):
    with pytest.raises(UserError, match=msg):
        CompareSpec(env="CartPole-v1", out=tmp_path / "c", backbones=["mlp"], **kw)


def test_the_flag_reaches_the_spec(tmp_path):
    spec = CompareSpec(
        env="CartPole-v1", out=tmp_path / "c", backbones=["mlp"], backend="ray", gpus_per_run=0.25
    )
    assert spec.gpus_per_run == 0.25 and spec.to_dict()["gpus_per_run"] == 0.25
