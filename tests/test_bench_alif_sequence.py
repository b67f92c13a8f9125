"""benchmarks/bench_alif_sequence.py: its agreement check passes for the fused ALIF path and
catches one whose spikes differ; the layer rows print a ratio per shape."""

from __future__ import annotations

import pytest
import torch

import snrl.layers.alif as alif_module
from tests.bench_scripts import load_benchmark


def test_agreement_check_and_layer_rows(capsys, monkeypatch):
    bench = load_benchmark("bench_alif_sequence")
    monkeypatch.setattr(bench, "SHAPES", ((12, 3, "short"),))
    assert bench.main(["--repeats", "1", "--train-rounds", "0"]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| layer")]
    assert len(rows) == 2 and all(r.endswith("x** |") for r in rows)  # the shape, the rollout
    assert alif_module._alif_sequence is alif_module.alif_sequence  # switched back on

    def shifted(*args, **kwargs):  # a "fused" path whose spikes are one step late
        z, v, a = alif_module.alif_sequence(*args, **kwargs)
        return torch.cat([torch.zeros_like(z[:1]), z[:-1]]), v, a

    monkeypatch.setattr(bench, "FUSED", shifted)
    layer = bench._layer()
    x = torch.rand(12, 3, 8, generator=torch.Generator().manual_seed(0)) * 3.0
    with pytest.raises(AssertionError, match="spikes differ"):
        bench.check_agreement(layer, x, torch.ones(12, 3, 128))
