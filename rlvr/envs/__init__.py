"""Environments for multi-turn episodes (tools, feedback, games) and the registry they live in.
See docs/environments.md.

May import rewards, tasks, verifiers, sandbox and below; `make_tasks` builds a run's tasks, each wrapped in its
environment when it has one."""

from rlvr.envs import (  # noqa: F401  (register the built-ins)
    agent,
    frozen_lake,
    guess_number,
    kuhn_poker,
    openenv_adapter,
    search,
    skyrl_adapter,
    tictactoe,
    tool_use,
    try_again,
    verifiers_env,
)
from rlvr.envs.base import ENVIRONMENTS, REWARD_RULES, Environment, EnvStep, Outcome
from rlvr.envs.task import EnvTask, make_tasks, with_environment

__all__ = ["ENVIRONMENTS", "REWARD_RULES", "EnvStep", "EnvTask", "Environment", "Outcome", "make_tasks", "with_environment"]
