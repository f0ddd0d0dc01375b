"""Reward functions and the worker pool that runs them with timeouts."""

from rlvr.rewards.loading import resolve_function
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest

__all__ = ["resolve_function", "RewardOutcome", "RewardPool", "RewardRequest"]
