"""Reward functions and the worker pool that runs them with timeouts (stage 3 of a step: scoring).

May import tasks, verifiers, sandbox and below; never rollout or training (a completion hands its own fields)."""

from rlvr.rewards import (  # noqa: F401  (the shipped rewards and process rewards: the registry is full from here on)
    arithmetic_steps,
    judge,
    process_reward_model,
    reward_model,
    rlpr,
)
from rlvr.rewards.loading import REWARDS, resolve_function
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest

__all__ = ["REWARDS", "resolve_function", "RewardOutcome", "RewardPool", "RewardRequest"]
