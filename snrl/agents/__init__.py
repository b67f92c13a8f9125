"""Agents (spaces -> heads -> distributions) and the algorithms that train them."""

from snrl.agents.agent import Agent, AgentState, ObsNormalizer, StepResult
from snrl.agents.ppo import PPO, PPOConfig

__all__ = ["PPO", "Agent", "AgentState", "ObsNormalizer", "PPOConfig", "StepResult"]
