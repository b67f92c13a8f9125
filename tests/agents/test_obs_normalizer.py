"""The agent's running observation statistics against numpy on the concatenated data."""

import numpy as np
import torch

from snrl.agents.agent import ObsNormalizer


def test_running_moments_match_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 64, 3)]
    norm = ObsNormalizer(4)
    for b in batches:
        norm.update(torch.as_tensor(b))
    data = np.concatenate(batches)
    # the prior count 1e-4 (mean 0, var 1) shifts the moments by O(1e-4 / N)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-4, atol=1e-4)
    x = torch.as_tensor(data[:5], dtype=torch.float32)
    expected = (data[:5] - data.mean(0)) / np.sqrt(data.var(0) + 1e-8)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4, atol=1e-4)


def test_clip_and_disabled():
    norm = ObsNormalizer(2, clip=5.0)
    norm.update(torch.zeros(10, 2))
    assert torch.all(norm(torch.full((1, 2), 1e6)) == 5.0)
    off = ObsNormalizer(2, enabled=False)
    off.update(torch.ones(3, 2) * 7)
    x = torch.randn(3, 2)
    assert torch.equal(off(x), x) and torch.equal(off.mean, torch.zeros(2, dtype=torch.float64))
