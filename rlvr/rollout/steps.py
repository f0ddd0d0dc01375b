"""What collecting a step hands the trainer: scored groups (the samples of one prompt) and the step they make up.

Shared by the synchronous collector (rlvr.rollout.collect) and the asynchronous rollout workers
(rlvr.rollout.workers), which both produce them."""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.rewards.composite import Scored
from rlvr.rollout.base import Completion
from rlvr.tasks import Problem


@dataclass
class Hint:
    """The hint a group was sampled with (data.hints, rlvr.rollout.hints): its text, the fraction of the problem's
    hint it is, and where it was put (prompt or response)."""

    text: str
    fraction: float
    placement: str


@dataclass
class Group:
    """The `n` samples of one prompt, scored."""

    source: int  # index of the task in data.tasks
    problem: Problem
    prompt_ids: list[int]
    completions: list[Completion]
    scored: Scored  # this group's samples only (failure counts: those of its whole round)
    version: int = 0  # policy version that generated it: the number of training steps its weights had taken
    hint: Hint | None = None  # sampled with a hint (its samples are off-policy and stay out of accuracy)

    def __post_init__(self):
        """Each sample's role is resolved here, once, as its group is collected: its own (a game's seat) or else its
        problem's (a proposer, a solver); what reads a role afterwards reads `Completion.role` (rlvr.rollout.roles)."""
        for completion in self.completions:
            if completion.role is None:
                completion.role = self.problem.role


@dataclass
class CollectedStep:
    trained: list[Group]  # prompts_per_step groups, in order
    generated: list[Group]  # every group generated this step (trained ones included)
    scored: Scored  # every generated sample, with the rounds' failure counts and first errors
    metrics: dict[str, float]


def staleness_metrics(step: int, trained: list[Group]) -> dict[str, float]:
    """How many training steps behind the weights that train step `step` (version step - 1) each trained group's
    generating weights were: policy/staleness_mean and policy/staleness_max (0 in the synchronous loop)."""
    ages = [step - 1 - g.version for g in trained]
    return {"policy/staleness_mean": sum(ages) / len(ages), "policy/staleness_max": max(ages),
            "policy/version": step - 1}
