"""Step rewards: a score for each step of a completion, with the step's character span, for process credit
(`algorithm.advantage: process_min | process_sum`, rlvr.algorithms.process_credit).

A step reward is a function `f(prompt, completion, **fields) -> list[StepScore | (start, end, score)]`: `start` and
`end` index the completion text (end exclusive) and `score` is the step's reward. It is named in
`rewards.step_reward.function` by a registered name (`arithmetic_steps`, the verifiable checker of `a op b = c`
steps; `process_reward_model`, a learned PRM) or as 'package.module:function' / 'path/file.py:function'. Step
rewards are computed in the trainer's process for the trained samples only (a PRM loads once there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rlvr.errors import ConfigError, RlvrError, did_you_mean
from rlvr.registry import Registry
from rlvr.rewards.loading import resolve_function

STEP_REWARDS: Registry[Callable] = Registry("step reward")


@dataclass(frozen=True)
class StepScore:
    """One step of a completion: the characters [start, end) of its text and the step's reward."""

    start: int
    end: int
    score: float


def register_step_reward(name: str, settings: type[BaseModel]):
    """Register a shipped step reward under `name`, with the schema of its `args` (`settings`)."""

    def add(function: Callable) -> Callable:
        function.settings = settings
        return STEP_REWARDS.register(name)(function)

    return add


def resolve_step_reward(spec: str) -> Callable:
    """A registered step reward by name, or a function named 'package.module:function' / 'path/file.py:function'."""
    if spec in STEP_REWARDS:
        return STEP_REWARDS.get(spec)
    if ":" not in spec:
        raise ConfigError(f"rewards.step_reward.function: '{spec}' is not a shipped step reward "
                          f"({', '.join(STEP_REWARDS.names())}) nor 'package.module:function' / "
                          f"'path/file.py:function'.{did_you_mean(spec, STEP_REWARDS.names())}")
    try:
        return resolve_function(spec)
    except ConfigError as e:
        raise ConfigError(f"rewards.step_reward.function = '{spec}': {e}") from None


def step_reward_args(function: Callable, args: dict[str, Any]) -> dict[str, Any]:
    """`args` checked against a shipped step reward's settings (a clear error naming the field), as keywords."""
    settings = getattr(function, "settings", None)
    if settings is None:
        return dict(args)
    try:
        return settings(**args).model_dump()
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(args)'}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"rewards.step_reward.args: {problems}") from None


def checked_steps(raw: Any, text: str, name: str, where: str) -> list[StepScore]:
    """A step reward's return value as StepScores ordered by end, each a non-empty span inside the text with a finite
    score; anything else is a clear error naming the step reward and the sample (a step reward that cannot be computed
    is never a quiet zero)."""
    if not isinstance(raw, (list, tuple)):
        raise RlvrError(f"step reward '{name}' returned {type(raw).__name__} for {where}; it must return a list of "
                        "StepScore(start, end, score) or (start, end, score) tuples")
    steps = []
    for k, item in enumerate(raw):
        if isinstance(item, StepScore):
            start, end, score = item.start, item.end, item.score
        elif isinstance(item, (list, tuple)) and len(item) == 3:
            start, end, score = item
        else:
            raise RlvrError(f"step reward '{name}', step {k} of {where}: {item!r} is not (start, end, score)")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise RlvrError(f"step reward '{name}', step {k} of {where}: score {score!r} is not a finite number")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise RlvrError(f"step reward '{name}', step {k} of {where}: span [{start}, {end}) is not a non-empty "
                            f"range of the completion's {len(text)} characters")
        steps.append(StepScore(start, end, float(score)))
    return sorted(steps, key=lambda s: (s.end, s.start))


def token_ends(tokenizer, token_ids: list[int]) -> list[int]:
    """For each token, the length of the text decoded from the tokens up to and including it (the character just
    past the token in `decode(token_ids)`, as rollout engines decode a completion's text)."""
    return [len(tokenizer.decode(token_ids[: i + 1], skip_special_tokens=True)) for i in range(len(token_ids))]


def step_token_positions(steps: list[StepScore], ends: list[int]) -> list[int]:
    """The token each step's reward is placed on: the token holding the step's last character (the first token whose
    decoded text reaches the step's end); a step ending past the text lands on the last token."""
    positions, i = [], 0
    for step in steps:
        while i < len(ends) - 1 and ends[i] < step.end:
            i += 1
        positions.append(i)
    return positions
