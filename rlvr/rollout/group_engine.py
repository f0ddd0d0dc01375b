"""The engine a step's groups are generated with: the run's engine in the wrappers that rollout settings add, which
the engines do not know about (rollout.tree: `TreeRollout`, rlvr.rollout.tree). Built once at set-up, by the trainer
for its own engine and by each rollout worker for its copy; evaluation generates with the engine itself."""

from __future__ import annotations

from rlvr.config import RolloutConfig
from rlvr.rollout.base import RolloutEngine
from rlvr.rollout.tree import TreeRollout


def group_engine(engine: RolloutEngine, rollout: RolloutConfig) -> RolloutEngine:
    """`engine` wrapped in what `rollout` adds to a step's groups (a ConfigError where the engine lacks what a
    wrapper needs, such as tree rollouts' cache sessions); the engine itself when nothing is added."""
    if rollout.tree is not None:
        return TreeRollout(engine, rollout.tree, rollout.engine)
    return engine
