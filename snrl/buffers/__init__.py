"""Rollout buffer (PPO, with the recurrent state of every step) and replay (DQN), composed
from storage x writer (n-step transitions or R2D2 sequences) x sampler (uniform or
prioritized)."""

from snrl.buffers.nstep import NStepWriter
from snrl.buffers.replay import ReplayBuffer
from snrl.buffers.rollout import RolloutBuffer, compute_gae
from snrl.buffers.samplers import PrioritizedSampler, UniformSampler
from snrl.buffers.sequence import SequenceWriter
from snrl.buffers.storage import RingStorage
from snrl.buffers.sumtree import SumTree

__all__ = [
    "NStepWriter",
    "PrioritizedSampler",
    "ReplayBuffer",
    "RingStorage",
    "RolloutBuffer",
    "SequenceWriter",
    "SumTree",
    "UniformSampler",
    "compute_gae",
]
