"""The follow-up stage of collecting a step (docs/self_play.md): tasks that derive problems from the policy's own
generations (`Task.derives_problems`) derive follow-up problems from the step's chosen groups (Absolute Zero, Zhao et
al. 2025: a proposer's checked proposals become the solver's problems), generated and scored in the same step, then
add the rewards known only once every group was scored (a proposal's learnability)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from rlvr.rewards.composite import Scored
from rlvr.rollout.stages import CollectionStage, StageSetup, StepDraft, register_stage
from rlvr.rollout.steps import Group
from rlvr.tasks.base import GroupResult, Problem, Task

MAX_FOLLOW_UP_ROUNDS = 8  # a task asking for follow-ups of its follow-ups more often than this is a bug in it

GenerateRound = Callable[[list[tuple[int, Problem]], int], tuple[list[Group], Scored]]


def group_result(group: Group) -> GroupResult:
    scored = group.scored
    return GroupResult(group.problem, [c.text for c in group.completions], scored.total.tolist(),
                       [bool(x) for x in scored.correct],
                       [scored.payload(i) for i in range(len(scored.total))])


def _by_task(groups: list[Group], t: int) -> list[Group]:
    return [g for g in groups if g.source == t]


def follow_up_groups(step: int, groups: list[Group], tasks: list[Task], generate: GenerateRound) -> list[Group]:
    """The groups of every follow-up problem the deriving tasks derive from `groups` (and then from those
    follow-ups' own groups, until none asks for more); `generate(work, k)` samples and scores round k's work."""
    out: list[Group] = []
    latest = groups
    for k in range(MAX_FOLLOW_UP_ROUNDS + 1):
        work = [(t, problem) for t, task in enumerate(tasks) if task.derives_problems
                for problem in task.follow_ups(step, [group_result(g) for g in _by_task(latest, t)])]
        if not work:
            return out
        if k == MAX_FOLLOW_UP_ROUNDS:
            labels = sorted({tasks[t].label for t, _ in work})
            raise RuntimeError(f"Task {labels[0]} asked for follow-up problems {MAX_FOLLOW_UP_ROUNDS + 1} rounds in a "
                               "row in one step; a task that derives problems must stop deriving them.")
        latest, _ = generate(work, k)
        out += latest
    return out


def settle_late_rewards(tasks: list[Task], trained: list[Group], generated: list[Group]
                        ) -> tuple[list[Group], list[Group]]:
    """`trained` and `generated` (the same Group objects where they overlap) with each deriving task's late
    rewards added to its groups' totals."""
    revised: dict[int, Group] = {}
    for t, task in enumerate(tasks):
        mine = _by_task(generated, t)
        if not task.derives_problems or not mine:
            continue
        extra = task.late_rewards([group_result(g) for g in mine])
        if len(extra) != len(mine):
            raise RuntimeError(f"Task {task.label}: late_rewards returned {len(extra)} entries for {len(mine)} groups.")
        for group, bonus in zip(mine, extra):
            if bonus is not None:
                total = group.scored.total + torch.tensor(bonus, dtype=group.scored.total.dtype)
                revised[id(group)] = replace(group, scored=group.scored.with_totals(total))
    return [revised.get(id(g), g) for g in trained], [revised.get(id(g), g) for g in generated]


@register_stage("follow_ups")
class FollowUpProblems(CollectionStage):
    """Tasks that derive problems (`Task.derives_problems`): after the step's groups are chosen, their follow-up
    problems are generated and scored (trained with them, and part of what the step generated), then every such
    task's late rewards are added; its own figures are logged as task/<label>/<name>."""

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks
        self.deriving = [task for task in tasks if task.derives_problems]
        self.enabled_by = f"task {self.deriving[0].label} (it derives follow-up problems)"

    @classmethod
    def configured(cls, setup: StageSetup) -> FollowUpProblems | None:
        return cls(setup.tasks) if any(task.derives_problems for task in setup.tasks) else None

    def after_choice(self, draft: StepDraft, trained: list[Group]) -> list[Group]:
        def generate(work: list[tuple[int, Problem]], k: int) -> tuple[list[Group], Scored]:
            groups, scored = draft.generate((draft.rounds + k,), work)
            draft.scorings.append(scored)
            return groups, scored

        follow = follow_up_groups(draft.step, trained, self.tasks, generate)
        trained, draft.generated = settle_late_rewards(self.tasks, trained + follow, draft.generated + follow)
        return trained

    def metrics(self, trained: list[Group]) -> dict[str, float]:
        return {f"task/{task.label}/{name}": value for task in self.deriving for name, value in task.metrics().items()}
