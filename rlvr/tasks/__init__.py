"""Tasks: a prompt source plus the verifier that scores its completions.

A task lists problems by split ('train' / 'eval') and index; procedural tasks are unbounded
(`size` is None) and deterministic in (seed, split, index), so a sampler's state is just counters.
The verifier is named as 'module:function' so reward workers can import it by itself.

May import verifiers, sandbox, models and below; a task knows no environment (rlvr.envs wraps tasks).
"""

from __future__ import annotations

# Register the built-in tasks.
from rlvr.tasks import (  # noqa: E402,F401
    absolute_zero,
    arithmetic,
    arithmetic_chain,
    code,
    dataset,
    qa,
    reasoning_gym,
    shapes,
    verifiers_taskset,
)
from rlvr.tasks import math as math_task  # noqa: E402,F401
from rlvr.tasks.base import TASKS, GroupResult, Problem, Task, make_task

__all__ = ["GroupResult", "Problem", "Task", "TASKS", "make_task"]
