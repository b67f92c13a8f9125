"""Input encoders for spiking backbones and the wrapper that applies them.

- ``"direct"`` (default): the (normalized) observation is the input current of the first layer.
- ``"population"``: each observation feature is seen by ``k`` neurons with Gaussian tuning
  curves whose centres tile ``[-span, span]``: ``c_{f,j} = exp(-(x_f - mu_j)^2 / (2 sigma^2))``
  with ``sigma = 2 span / (k - 1)`` — a graded current, no sampling, so it is deterministic.

:class:`EncodedBackbone` puts an encoder in front of a backbone. Neuron steps per env step are
the backbone's own ``substeps`` (:class:`snrl.networks.spiking.SpikingBackbone`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from snrl.networks.protocol import BackboneOutput, LayerInfo


class PopulationEncoder(nn.Module):
    """Gaussian population code: (..., F) -> (..., F * k).

    Args:
        n_features: observation features F.
        k: neurons per feature (>= 2).
        span: centres tile [-span, span] (observations are normalized, so ~3).
    """

    def __init__(self, n_features: int, *, k: int = 8, span: float = 3.0):
        super().__init__()
        if k < 2:
            raise ValueError(f"population encoder needs k >= 2 neurons per feature, got {k}")
        if span <= 0:
            raise ValueError(f"population encoder span must be > 0, got {span}")
        self.register_buffer("centres", torch.linspace(-span, span, k))
        self.sigma = 2.0 * span / (k - 1)
        self.output_size = n_features * k

    def forward(self, x: Tensor) -> Tensor:
        d = x.unsqueeze(-1) - self.centres
        return torch.exp(-0.5 * (d / self.sigma) ** 2).flatten(-2)


class EncodedBackbone(nn.Module):
    """An encoder in front of a backbone (the backbone's ``substeps`` are its own).

    Follows the recurrent protocol of :mod:`snrl.networks.protocol`.
    """

    def __init__(self, encoder: nn.Module, backbone: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.backbone = backbone
        self.output_size = backbone.output_size

    @property
    def substeps(self) -> int:
        """Neuron steps per input step: the backbone's ``substeps``."""
        return int(getattr(self.backbone, "substeps", 1))

    def initial_state(self, batch_size: int, **kwargs):
        return self.backbone.initial_state(batch_size, **kwargs)

    def reset_state(self, state, done: Tensor, **kwargs):
        return self.backbone.reset_state(state, done, **kwargs)

    def run(self, x: Tensor, state) -> BackboneOutput:
        return self.backbone.run(self.encoder(x), state)

    def forward(self, x: Tensor, state):
        out, state, _ = self.run(x, state)
        return out, state

    def layer_info(self) -> list[LayerInfo]:
        return self.backbone.layer_info()
