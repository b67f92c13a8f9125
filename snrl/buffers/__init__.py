"""Rollout buffer (PPO, with the recurrent state of every step) and replay buffers (DQN)."""

from snrl.buffers.replay import PrioritizedReplayBuffer, ReplayBuffer
from snrl.buffers.rollout import RolloutBuffer, compute_gae
from snrl.buffers.sequence import PrioritizedSequenceReplayBuffer, SequenceReplayBuffer
from snrl.buffers.sumtree import SumTree

__all__ = [
    "PrioritizedReplayBuffer",
    "PrioritizedSequenceReplayBuffer",
    "ReplayBuffer",
    "RolloutBuffer",
    "SequenceReplayBuffer",
    "SumTree",
    "compute_gae",
]
