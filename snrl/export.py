"""A trained policy out of snrl: :func:`to_nir` (docs/interop.md).

``snrl.export.to_nir(algo)`` is what ``snrl export DIR --nir FILE.nir`` writes: the policy
backbone and its readout as a NIR graph (:func:`snrl.networks.nir_io.to_nir`, the parameter
mapping there), with the observation normalization that the graph's input expects in its
metadata. Needs the ``nir`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from snrl.networks import nir_io

__all__ = ["to_nir", "write_nir"]


def to_nir(algo: Any) -> Any:
    """The policy of ``algo`` (a :class:`snrl.PPO` / :class:`snrl.DQN`, trained or loaded) as
    a ``nir.NIRGraph``.

    Its ``metadata`` holds ``dt`` (seconds: run the graph at that step), the reset rule of
    each layer, ``obs_normalized`` and, when the run normalizes its observations,
    ``obs_mean``, ``obs_std`` and ``obs_clip``: feed the graph
    ``clip((obs - obs_mean) / obs_std, -obs_clip, obs_clip)``.

    A shared trunk (``shared_trunk``) is exported whole: its readout's first
    ``metadata["policy_outputs"]`` outputs are the policy's and output
    ``metadata["value_output"]`` is the value.

    Raises:
        UserError: a policy NIR cannot hold (ALIF, an ANN, the population encoder, ...: see
            :func:`snrl.networks.nir_io.to_nir`), or without the ``nir`` package.
    """
    graph = nir_io.to_nir(algo.agent.actor)
    if getattr(algo.agent, "shared_trunk", False):  # one readout: policy outputs, then value
        graph.metadata["policy_outputs"] = int(algo.agent.head_size)
        graph.metadata["value_output"] = int(algo.agent.head_size)
    norm = algo.agent.obs_norm
    graph.metadata["obs_normalized"] = bool(norm.enabled)
    if norm.enabled:  # the input is clip((obs - obs_mean) / obs_std, -obs_clip, obs_clip)
        graph.metadata["obs_mean"] = norm.mean.cpu().numpy().astype(np.float32)
        std = (norm.var + norm.eps).sqrt()
        graph.metadata["obs_std"] = std.cpu().numpy().astype(np.float32)
        graph.metadata["obs_clip"] = float(norm.clip)
    return graph


def write_nir(algo: Any, path: str | Path) -> Path:
    """Write :func:`to_nir` of ``algo`` to ``path`` (``FILE.nir``; atomic, an existing file
    refused: :func:`snrl.networks.nir_io.write_nir`)."""
    return nir_io.write_nir(to_nir(algo), path)
