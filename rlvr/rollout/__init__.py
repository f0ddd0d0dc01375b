"""Generating a step: rollout engines behind one interface (hf, static), multi-turn episodes over an engine (and
the models besides the policy that their environments talk to, chat_models.py), collecting one step's scored groups
(collect.py, and the asynchronous rollout workers, workers.py) with the collection stages that act in between
(stages.py: hints.py, follow_ups.py, roles.py), and the types they hand the trainer (steps.py).

May import envs, curriculum, rewards, tasks, models and below; never tracking, evaluation or training."""

# register the engines (auto, hf, static) and the collection stages (follow_ups, hints, roles)
from rlvr.rollout import auto, follow_ups, hf, hints, process_rewards, roles, static  # noqa: F401
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
