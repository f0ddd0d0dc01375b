"""Roles (docs/self_play.md): the part the policy plays in a sample, a problem's (a proposer, a solver) or the
sample's own (a game's seat). Each sample's role is resolved once, when its group is collected (`Group`, in
rlvr.rollout.steps: `Completion.role` is then the sample's own or its problem's); everything after reads
`Completion.role`. Here: how metrics and role-aware advantages name a role, and the per-role figures of a step."""

from __future__ import annotations

from collections import defaultdict

from rlvr.rollout.stages import CollectionStage, StageSetup, register_stage
from rlvr.rollout.steps import Group
from rlvr.tasks import Task


def role_key(label: str, role: str | None) -> str:
    """How metrics and role-aware advantages name a role: '<task label>/<role>', the label alone without one."""
    return label if role is None else f"{label}/{role}"


@register_stage("roles")
class RoleMetrics(CollectionStage):
    """Per role among the trained samples (only samples that have one): role/<key>/samples, reward (mean total),
    accuracy (the verifier's verdicts) and length (policy tokens). In every run (nothing is logged where no sample
    has a role), the asynchronous one included."""

    supports_async = True

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks

    @classmethod
    def configured(cls, setup: StageSetup) -> RoleMetrics:
        return cls(setup.tasks)

    def metrics(self, trained: list[Group]) -> dict[str, float]:
        sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        for group in trained:
            for i, c in enumerate(group.completions):
                if c.role is None:
                    continue
                s = sums[role_key(self.tasks[group.source].label, c.role)]
                s[0] += 1
                s[1] += float(group.scored.total[i])
                s[2] += float(group.scored.correct[i])
                s[3] += c.policy_tokens
        m = {}
        for key, (n, reward, correct, length) in sorted(sums.items()):
            m.update({f"role/{key}/samples": n, f"role/{key}/reward": reward / n, f"role/{key}/accuracy": correct / n,
                      f"role/{key}/length": length / n})
        return m
