"""Rollout engines behind one interface."""

from rlvr.rollout import hf  # noqa: F401  (registers the transformers engine)
from rlvr.rollout.base import (
    ENGINES,
    Completion,
    RolloutEngine,
    SamplingParams,
    generate_batches,
    group_generator,
    make_engine,
)

__all__ = ["ENGINES", "Completion", "RolloutEngine", "SamplingParams", "generate_batches", "group_generator", "make_engine"]
