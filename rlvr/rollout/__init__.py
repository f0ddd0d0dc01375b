"""Rollout engines behind one interface."""

from rlvr.rollout import auto, hf, static  # noqa: F401  (register the engines)
from rlvr.rollout.base import (
    ENGINES,
    Completion,
    RolloutEngine,
    SamplingParams,
    group_generator,
    make_engine,
)

__all__ = ["ENGINES", "Completion", "RolloutEngine", "SamplingParams", "group_generator",
           "make_engine"]
