"""Environments: creation, vectorization (SAME_STEP autoreset), space checks."""

from snrl.envs.make import finished_episodes, make_env, make_vector_env
from snrl.envs.spaces import ActionMap, ObsFlattener, check_spaces, flatten_obs_size
from snrl.envs.wrappers import FiniteCheck, SeedOnFirstReset

__all__ = [
    "ActionMap",
    "FiniteCheck",
    "ObsFlattener",
    "SeedOnFirstReset",
    "check_spaces",
    "finished_episodes",
    "flatten_obs_size",
    "make_env",
    "make_vector_env",
]
