"""Reward functions and the worker pool that runs them with timeouts (stage 3 of a step: scoring).

May import tasks, verifiers, sandbox and below; never rollout or training (a completion hands its own fields)."""

from rlvr.rewards.loading import resolve_function
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest

__all__ = ["resolve_function", "RewardOutcome", "RewardPool", "RewardRequest"]
