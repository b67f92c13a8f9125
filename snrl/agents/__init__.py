"""Agents (one base: spaces -> preprocessing -> backbones -> heads -> env actions) and the
algorithms that train them."""

from snrl.agents.a2c import A2C, A2CConfig
from snrl.agents.agent import (
    ActorCriticAgent,
    Agent,
    AgentState,
    ObsNormalizer,
    SharedActorCriticAgent,
    StepResult,
    TrunkState,
)
from snrl.agents.dqn import DQN, DQNConfig, QAgent
from snrl.agents.dqn_math import (
    double_dqn_target,
    dueling_aggregate,
    polyak_update,
    sequence_nstep_targets,
    td_loss,
)
from snrl.agents.exploration import (
    EpsGreedy,
    GaussianEpsGreedy,
    Greedy,
    PassThrough,
    make_exploration,
)
from snrl.agents.ppo import PPO, PPOConfig

__all__ = [
    "A2C",
    "DQN",
    "PPO",
    "A2CConfig",
    "ActorCriticAgent",
    "Agent",
    "AgentState",
    "DQNConfig",
    "EpsGreedy",
    "GaussianEpsGreedy",
    "Greedy",
    "ObsNormalizer",
    "PPOConfig",
    "PassThrough",
    "QAgent",
    "SharedActorCriticAgent",
    "StepResult",
    "TrunkState",
    "double_dqn_target",
    "dueling_aggregate",
    "load_algo",
    "make_exploration",
    "polyak_update",
    "sequence_nstep_targets",
    "td_loss",
]

ALGOS = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
"""Algorithm classes by the name stored in their checkpoints."""


def load_algo(path, *, run_dir=None, env=None, trust_env_module=False, device=None):
    """Load any snrl algorithm checkpoint (PPO, A2C or DQN), choosing the class it was saved by
    (``run_dir``, ``env``, ``trust_env_module``, ``device``: as for ``PPO.load``)."""
    from snrl.errors import UserError
    from snrl.training.checkpoint import load_checkpoint

    name = load_checkpoint(path).get("algo")
    if not isinstance(name, str) or name not in ALGOS:
        raise UserError(f"{path} holds no snrl agent (algo={name!r}; pass a checkpoints/*.pt file)")
    return ALGOS[name].load(
        path, run_dir=run_dir, env=env, trust_env_module=trust_env_module, device=device
    )
