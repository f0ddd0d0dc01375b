"""Collecting a step as a pipeline of registered stages: the mechanisms that act between generating a step's groups
and handing them to the trainer (hint scaffolding, follow-up problems, per-role figures, the next ones) are
`CollectionStage`s in their own modules, and the collectors call them at fixed points, never by name.

The points (hooks), in the order a step reaches them:

- `after_round(draft, round_index, groups)`: a generation round has been generated and scored; the stage may put
  other groups in place of some (hints rescue all-fail groups) before the group filter judges them.
- `after_choice(draft, trained)`: the groups the step trains on are chosen; the stage may add groups (follow-up
  problems derived from them) or revise their rewards (late rewards), in `trained` and in `draft.generated`.
- `metrics(trained)`: the stage's figures for the step.

Which stages a run has is decided once, at set-up, by `make_stages` from the config and the tasks: every registered
stage's `configured` says whether the run needs it. A stage declares whether the asynchronous collector (rollout
workers, rollout.max_staleness > 0) can run it (`supports_async`); there the draft has no in-process generation
(`draft.generate` is None), each received group is its own round, and a stage it cannot run is refused at
start-up, naming the setting that enabled it (`refuse_unsupported`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from rlvr.config import DataConfig
from rlvr.curriculum import CurriculumStats
from rlvr.errors import ConfigError
from rlvr.models.prompts import PromptEncoder
from rlvr.registry import Registry
from rlvr.rewards.composite import RewardComposer, Scored
from rlvr.rewards.failures import FailureBudget
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.steps import Group
from rlvr.tasks import Task

Generate = Callable[..., tuple[list[Group], Scored]]
"""The collector's one generation path, bound to the step: `generate(key, work, *, prompts=None, where='problem',
finish=None)` samples and scores the groups of `work` ((task index, problem) pairs), each group's random stream
keyed by (seed, step, *key, group index); `prompts` are the prompt ids to sample from (default: each problem's
encoded prompt) and `finish(i, completion)` turns item i's completions into what is scored and trained. Every rank
gets every group."""


@dataclass
class StepDraft:
    """A step being collected, as its stages see it."""

    step: int
    generate: Generate | None  # the collector's generation path (None in the asynchronous collector)
    generated: list[Group] = field(default_factory=list)  # every group sampled for the step, what accuracy sees
    scorings: list[Scored] = field(default_factory=list)  # the scorings of `generated`, in order
    # scorings of samples that are not in `generated` (hinted samples): their reward failures count, the samples not
    side_scorings: list[Scored] = field(default_factory=list)
    rounds: int = 0  # generation rounds run so far

    def scored(self) -> Scored:
        """Every generated sample with its current total, the failures of every reward call of the step (side
        scorings included, so a failing side call raises the failure rate over the generated samples, never hides
        it)."""
        scored = Scored.concat(self.scorings)
        if self.side_scorings:
            failures = {name: sum((s.failures.get(name, Counter()) for s in self.side_scorings), count)
                        for name, count in scored.failures.items()}
            first = dict(scored.first_errors)
            for s in self.side_scorings:
                first = {**s.first_errors, **first}
            scored = replace(scored, failures=failures, first_errors=first)
        return scored.with_totals(torch.cat([g.scored.total for g in self.generated]))


@dataclass
class StageSetup:
    """What a stage may be built from: the run's data section (data.hints, ...), its tasks, and the collector's
    pieces (curriculum statistics, the prompt encoder, sampling parameters, the reward composer and the run's reward
    failure budget)."""

    data: DataConfig | None
    tasks: list[Task]
    stats: CurriculumStats | None = None
    encode: PromptEncoder | None = None
    params: SamplingParams | None = None
    composer: RewardComposer | None = None
    failures: FailureBudget | None = None


class CollectionStage:
    """A mechanism that acts at the hooks of collecting a step (module docstring). Every hook defaults to doing
    nothing, so a stage implements the ones it needs."""

    name = ""  # its registered name (register_stage)
    supports_async = False  # whether the asynchronous collector can run it
    enabled_by = ""  # the setting or task that put it in the run (named when it is refused)

    @classmethod
    def configured(cls, setup: StageSetup) -> CollectionStage | None:
        """The stage this run needs, built from `setup`, or None when the run does not use it."""
        raise NotImplementedError

    def after_round(self, draft: StepDraft, round_index: int, groups: list[Group]) -> list[Group]:
        return groups

    def after_choice(self, draft: StepDraft, trained: list[Group]) -> list[Group]:
        return trained

    def metrics(self, trained: list[Group]) -> dict[str, float]:
        return {}


COLLECTION_STAGES: Registry[type[CollectionStage]] = Registry("collection stage")


def register_stage(name: str) -> Callable[[type[CollectionStage]], type[CollectionStage]]:
    """Register a stage class under `name` (also its `name`, how messages call it)."""

    def add(cls: type[CollectionStage]) -> type[CollectionStage]:
        cls.name = name
        return COLLECTION_STAGES.register(name)(cls)

    return add


def make_stages(setup: StageSetup) -> list[CollectionStage]:
    """The stages this run's config and tasks ask for, in name order (each registered stage decides)."""
    stages = [COLLECTION_STAGES.get(name).configured(setup) for name in COLLECTION_STAGES.names()]
    return [stage for stage in stages if stage is not None]


def refuse_unsupported(stages: list[CollectionStage]) -> None:
    """A ConfigError for the first stage the asynchronous collector cannot run, naming what enabled it and the fix."""
    for stage in stages:
        if not stage.supports_async:
            raise ConfigError(f"{stage.enabled_by} adds the '{stage.name}' stage to collecting a step, which "
                              "generates in the trainer's process during the step; the asynchronous collector "
                              "(rollout.max_staleness > 0) cannot run it. Set rollout.max_staleness=0, or run without "
                              "it (docs/architecture.md, 'Collecting a step: stages').")


