"""Which generated groups a step trains on, as a registry of group filters. A filter that regenerates makes the
trainer over-generate: groups it rejects are set aside and new prompts are drawn until the step is full or
`data.max_sampling_rounds` is reached (then it is topped up with set-aside groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlvr.curriculum.stats import CurriculumStats
from rlvr.errors import ConfigError
from rlvr.registry import Registry

if TYPE_CHECKING:
    import torch

GROUP_FILTERS: Registry[type[GroupFilter]] = Registry("group filter")


class GroupFilter:
    regenerates = False

    def keep(self, rewards: torch.Tensor, correct: torch.Tensor) -> bool:
        """Whether a group (its samples' total rewards and verifier verdicts) is trained on."""
        return True

    def admit(self, stats: CurriculumStats, key: str) -> bool:
        """Whether a prompt is worth generating for, from what is known of it before generation."""
        return True


@GROUP_FILTERS.register("none")
class KeepAll(GroupFilter):
    """Train on every generated group."""


@GROUP_FILTERS.register("dynamic_sampling")
class NonzeroRewardSpread(GroupFilter):
    """DAPO dynamic sampling (Yu et al. 2025, sec. 3.2): drop groups whose rewards are all equal, generate more.

    Such groups have zero advantage under group normalization: keep iff std(rewards) > 0."""

    regenerates = True

    def keep(self, rewards: torch.Tensor, correct: torch.Tensor) -> bool:
        return len(rewards) > 1 and float(rewards.std(unbiased=False)) > 0


@GROUP_FILTERS.register("pass_rate")
class PassRateBand(GroupFilter):
    """Online difficulty filtering (Bae et al. 2025): train only on groups whose pass rate lies in [low, high].

    "Online Difficulty Filtering for Reasoning Oriented Reinforcement Learning": keep iff
    low <= mean(verifier verdicts of the group) <= high. Prompts whose observed pass rate (over at least
    `min_attempts` samples in earlier steps) lies outside the band are not generated for again."""

    regenerates = True

    def __init__(self, low: float = 0.25, high: float = 0.75, min_attempts: int = 8):
        if not 0 <= low <= high <= 1 or min_attempts < 1:
            raise ConfigError(f"data.filter.args: pass_rate needs 0 <= low <= high <= 1 and min_attempts >= 1, got "
                              f"low={low}, high={high}, min_attempts={min_attempts}")
        self.low, self.high, self.min_attempts = low, high, min_attempts

    def keep(self, rewards: torch.Tensor, correct: torch.Tensor) -> bool:
        return self.low <= float(correct.float().mean()) <= self.high

    def admit(self, stats: CurriculumStats, key: str) -> bool:
        rate = stats.pass_rate(key, self.min_attempts)
        return rate is None or self.low <= rate <= self.high


@GROUP_FILTERS.register("reward_std")
class RewardStdFilter(GroupFilter):
    """RLPR's standard-deviation filter (Yu et al. 2025, arXiv 2506.18254): drop groups whose rewards barely vary.

    Keep iff std(rewards) >= beta, generate more. beta is `min_std`; with `ema` (a momentum in [0, 1)) it follows
    the groups seen instead, beta <- ema * beta + (1 - ema) * std(group), starting at `min_std`, as RLPR adapts
    its threshold to the run's reward spread. For continuous rewards (rlpr, judge probabilities, reward models),
    where dynamic_sampling's std > 0 keeps nearly everything."""

    regenerates = True

    def __init__(self, min_std: float = 0.05, ema: float | None = None):
        if min_std < 0 or (ema is not None and not 0 <= ema < 1):
            raise ConfigError(f"data.filter.args: reward_std needs min_std >= 0 and ema in [0, 1) or null, got "
                              f"min_std={min_std}, ema={ema}")
        self.beta, self.ema = min_std, ema

    def keep(self, rewards: torch.Tensor, correct: torch.Tensor) -> bool:
        std = float(rewards.std(unbiased=False)) if len(rewards) > 1 else 0.0
        keep = std >= self.beta and std > 0
        if self.ema is not None:
            self.beta = self.ema * self.beta + (1 - self.ema) * std
        return keep


def make_filter(name: str, args: dict) -> GroupFilter:
    cls = GROUP_FILTERS.get(name)
    try:
        return cls(**args)
    except TypeError as e:
        raise ConfigError(f"data.filter.args for filter '{name}': {e}. See docs/curriculum.md.") from None
