"""Generating a step: rollout engines behind one interface (hf, static), multi-turn episodes over an engine,
collecting one step's scored groups (collect.py, and the asynchronous rollout workers, workers.py), and the types
they hand the trainer (steps.py).

May import envs, curriculum, rewards, tasks, models and below; never tracking, evaluation or training."""

from rlvr.rollout import auto, hf, static  # noqa: F401  (register the engines)
from rlvr.rollout.base import (
    ENGINES,
    Completion,
    RolloutEngine,
    SamplingParams,
    group_generator,
    make_engine,
)
from rlvr.rollout.group_engine import group_engine

__all__ = ["ENGINES", "Completion", "RolloutEngine", "SamplingParams", "group_engine", "group_generator",
           "make_engine"]
