"""The self-play part of collecting a step (docs/self_play.md): tasks whose problems come from the policy's own
generations derive follow-up problems from the step's scored groups (Absolute Zero: a proposer's checked proposals
become the solver's problems), generated and scored in the same step, then add the rewards known only once every
group was scored (a proposal's learnability). Also the per-role figures every self-play run logs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace

import torch

from rlvr.rewards.composite import Scored
from rlvr.rollout.steps import Group
from rlvr.tasks.base import GroupResult, Problem, Task

MAX_FOLLOW_UP_ROUNDS = 8  # a task asking for follow-ups of its follow-ups more often than this is a bug in it

Generate = Callable[[list[tuple[int, Problem]], int], tuple[list[Group], Scored]]


def group_result(group: Group) -> GroupResult:
    scored = group.scored
    return GroupResult(group.problem, [c.text for c in group.completions], scored.total.tolist(),
                       [bool(x) for x in scored.correct],
                       [scored.payload(i) for i in range(len(scored.total))])


def _by_task(groups: list[Group], t: int) -> list[Group]:
    return [g for g in groups if g.source == t]


def follow_up_groups(step: int, groups: list[Group], tasks: list[Task], generate: Generate) -> list[Group]:
    """The groups of every follow-up problem the self-play tasks derive from `groups` (and then from those
    follow-ups' own groups, until none asks for more); `generate(work, k)` samples and scores round k's work."""
    out: list[Group] = []
    latest = groups
    for k in range(MAX_FOLLOW_UP_ROUNDS + 1):
        work = [(t, problem) for t, task in enumerate(tasks) if task.self_play
                for problem in task.follow_ups(step, [group_result(g) for g in _by_task(latest, t)])]
        if not work:
            return out
        if k == MAX_FOLLOW_UP_ROUNDS:
            labels = sorted({tasks[t].label for t, _ in work})
            raise RuntimeError(f"Task {labels[0]} asked for follow-up problems {MAX_FOLLOW_UP_ROUNDS + 1} rounds in a "
                               "row in one step; a self-play task must stop deriving problems.")
        latest, _ = generate(work, k)
        out += latest
    return out


def settle_late_rewards(tasks: list[Task], trained: list[Group], generated: list[Group]
                        ) -> tuple[list[Group], list[Group]]:
    """`trained` and `generated` (the same Group objects where they overlap) with each self-play task's late
    rewards added to its groups' totals."""
    revised: dict[int, Group] = {}
    for t, task in enumerate(tasks):
        mine = _by_task(generated, t)
        if not task.self_play or not mine:
            continue
        extra = task.late_rewards([group_result(g) for g in mine])
        if len(extra) != len(mine):
            raise RuntimeError(f"Task {task.label}: late_rewards returned {len(extra)} entries for {len(mine)} groups.")
        for group, bonus in zip(mine, extra):
            if bonus is not None:
                total = group.scored.total + torch.tensor(bonus, dtype=group.scored.total.dtype)
                revised[id(group)] = replace(group, scored=group.scored.with_totals(total))
    return [revised.get(id(g), g) for g in trained], [revised.get(id(g), g) for g in generated]


def sample_roles(group: Group) -> list[str | None]:
    """Each sample's role: its own (a seat of a game) or its problem's (a proposer, a solver)."""
    return [c.role if c.role is not None else group.problem.role for c in group.completions]


def role_key(label: str, role: str | None) -> str:
    """How metrics and role-aware advantages name a role: '<task label>/<role>', the label alone without one."""
    return label if role is None else f"{label}/{role}"


def self_play_metrics(tasks: list[Task], trained: list[Group]) -> dict[str, float]:
    """Per role among the trained samples (only samples that have one): role/<key>/samples, reward (mean
    total), accuracy (the verifier's verdicts) and length (policy tokens); and each self-play task's own figures
    as task/<label>/<name>."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for group in trained:
        for i, (c, role) in enumerate(zip(group.completions, sample_roles(group))):
            if role is None:
                continue
            s = sums[role_key(tasks[group.source].label, role)]
            s[0] += 1
            s[1] += float(group.scored.total[i])
            s[2] += float(group.scored.correct[i])
            s[3] += c.policy_tokens
    m = {}
    for key, (n, reward, correct, length) in sorted(sums.items()):
        m.update({f"role/{key}/samples": n, f"role/{key}/reward": reward / n, f"role/{key}/accuracy": correct / n,
                  f"role/{key}/length": length / n})
    for task in tasks:
        if task.self_play:
            m.update({f"task/{task.label}/{name}": value for name, value in task.metrics().items()})
    return m
