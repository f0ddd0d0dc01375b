"""Hint scaffolding's curriculum: where a problem's hint text comes from (registered hint sources) and how much of
it a problem is shown (the hint schedule), adapted from the pass rates its hinted and unhinted groups reach.

When every sample of a problem's group fails, GRPO learns nothing from it. The rollout stage (rlvr.rollout.hints)
then samples the problem again with the first part of a reference solution as a hint. How much to show follows
"Staying in the Sweet Spot" (SEELE, Li et al. 2025, arXiv 2509.06923), which shows the loss falls fastest at a
rollout accuracy near 50% and sets each problem's hint length to reach it: here a stochastic-approximation step on
the pass rate instead of SEELE's fitted item-response model,

    after a hinted group at fraction f with pass rate p:   f <- clip(f + gain (target - p), min_fraction, max_fraction)
    after an unhinted group with pass rate p0 > 0:          f <- clip(f - gain p0, min_fraction, max_fraction)

and a problem never hinted starts from the run's prior, a moving average of the fractions recent hinted groups
ended at (initial_fraction at first), so problems seen once (procedural tasks) still get the amount the policy
currently needs. The fractions live in the curriculum statistics (saved in checkpoints)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlvr.curriculum.stats import CurriculumStats, PromptRecord
from rlvr.errors import ConfigError
from rlvr.registry import Registry
from rlvr.tasks.base import Problem

HINT_SOURCES: Registry[Callable[..., str | None]] = Registry("hint source")


@HINT_SOURCES.register("solution")
def solution_hint(problem: Problem) -> str | None:
    """The task's reference solution (a dataset's solution_column, a procedural task's worked solution)."""
    return problem.solution


@HINT_SOURCES.register("field")
def field_hint(problem: Problem, name: str = "") -> str | None:
    """A problem field (a dataset column listed in extra_columns): args {name: COLUMN}."""
    if not name:
        raise ConfigError("data.hints.source: the 'field' hint source needs args {name: COLUMN}")
    value = problem.fields.get(name)
    return None if value is None else str(value)


@HINT_SOURCES.register("function")
def function_hint(problem: Problem, function: str = "") -> str | None:
    """Any text: args {function: 'package.module:fn' or 'path/file.py:fn'}, fn(problem) -> str or None."""
    from rlvr.rewards.loading import resolve_function

    if not function:
        raise ConfigError("data.hints.source: the 'function' hint source needs args {function: 'module:fn'}")
    text = resolve_function(function)(problem)
    return None if text is None else str(text)


def hint_prefix(text: str, fraction: float) -> str:
    """The first ceil(fraction x len(text)) characters of `text`, trailing whitespace dropped ('' for fraction 0,
    all of it for 1). Characters, not words, so a worked answer can be revealed digit by digit."""
    return text[: math.ceil(fraction * len(text) - 1e-9)].rstrip()


class HintSchedule:
    """How much of its hint each problem is shown (see the module docstring for the rule). `stats` holds the state:
    each prompt's `hint_fraction` and the run's `hint_prior`."""

    def __init__(self, stats: CurriculumStats, target_pass_rate: float = 0.5, initial_fraction: float = 0.5,
                 gain: float = 0.5, min_fraction: float = 0.1, max_fraction: float = 1.0,
                 prior_momentum: float = 0.9):
        self.stats, self.target, self.initial, self.gain = stats, target_pass_rate, initial_fraction, gain
        self.low, self.high, self.momentum = min_fraction, max_fraction, prior_momentum

    def _clip(self, fraction: float) -> float:
        return min(self.high, max(self.low, fraction))

    @property
    def prior(self) -> float:
        """Where a problem never hinted starts."""
        return self._clip(self.stats.hint_prior if self.stats.hint_prior is not None else self.initial)

    def fraction(self, key: str) -> float:
        """The fraction of its hint problem `key` is shown next."""
        record = self.stats.prompts.get(key)
        known = record.hint_fraction if record is not None else None
        return self._clip(known) if known is not None else self.prior

    def _set(self, key: str, fraction: float) -> None:
        self.stats.prompts.setdefault(key, PromptRecord()).hint_fraction = fraction

    def observe_hinted(self, key: str, fraction: float, pass_rate: float) -> float:
        """After a hinted group at `fraction` passed at `pass_rate`: the problem's next fraction (also folded into
        the prior)."""
        updated = self._clip(fraction + self.gain * (self.target - pass_rate))
        self._set(key, updated)
        prior = self.stats.hint_prior if self.stats.hint_prior is not None else self.initial
        self.stats.hint_prior = self.momentum * prior + (1 - self.momentum) * updated
        return updated

    def observe_unhinted(self, key: str, pass_rate: float) -> None:
        """After an unhinted group: a problem with a hint level needs less of it the more it passes alone."""
        record = self.stats.prompts.get(key)
        if pass_rate > 0 and record is not None and record.hint_fraction is not None:
            record.hint_fraction = self._clip(record.hint_fraction - self.gain * pass_rate)


def hint_text(source: str, args: dict[str, Any], problem: Problem) -> str | None:
    """The full hint text of `problem` from the registered source (None or '' when it has none)."""
    text = HINT_SOURCES.get(source)(problem, **args)
    return text if text and text.strip() else None
