"""The process rewards of a step's trained samples as token tensors for process credit: each completion's spans
scored by the configured process reward (rewards.step_reward, rlvr.rewards.process) in the reward pool, each span's
score placed on the token holding the span's last character."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlvr.errors import RlvrError
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.failures import FailureBudget
from rlvr.rewards.process import span_token_positions, token_text_ends
from rlvr.rollout.steps import Group


class ProcessRewards:
    """The composer's process reward (None when the run's estimator reads none: nothing is scored), its failures
    counted in the run's failure budget."""

    def __init__(self, composer: RewardComposer, budget: FailureBudget):
        self.composer, self.budget = composer, budget

    def token_rewards(self, groups: Sequence[Group], tokenizer, width: int, labels: Sequence[str]
                      ) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, dict[str, float]]:
        """((span rewards [N, C], span-end mask [N, C]), metrics) for the groups' samples in batch order (C =
        `width`); (None, {}) without a process reward. Spans ending on the same token count as one with the lower
        reward; a sample whose scoring failed has none (and is counted). `labels[t]` names task t in messages."""
        if self.composer.process is None:
            return None, {}
        rows = [(g, i, c) for g in groups for i, c in enumerate(g.completions)]
        where = [f"task {labels[g.source]}, problem {g.problem.uid}, sample {i}" for g, i, _ in rows]
        for (_, _, c), place in zip(rows, where):
            if getattr(c, "turns", None) is not None:
                raise RlvrError(f"rewards.step_reward scores single completions; {place} is a multi-turn episode "
                                "(use algorithm.turn_credit for episodes)")
        scoring = self.composer.score_spans(
            [(g.problem, c.text, {"completion_tokens": c.policy_tokens, "truncated": c.truncated}) for g, _, c in rows],
            where)
        self.budget.record(len(rows), {scoring.name: scoring.failures},
                           {scoring.name: scoring.first_error} if scoring.first_error else {})
        rewards, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
        counts, scores, minima = [], [], []
        for r, ((_, _, c), spans) in enumerate(zip(rows, scoring.spans)):
            spans = spans or []
            positions = span_token_positions(spans, token_text_ends(tokenizer, c.token_ids)) if c.token_ids else []
            for span, pos in zip(spans, positions):
                taken = mask[r, pos] > 0
                rewards[r, pos] = min(float(rewards[r, pos]), span.score) if taken else span.score
                mask[r, pos] = 1.0
            counts.append(len(positions))
            scores += [s.score for s in spans[: len(positions)]]
            if positions:
                minima.append(min(s.score for s in spans))
        metrics = {"process/spans_per_sample": sum(counts) / max(len(counts), 1),
                   "process/no_span_frac": sum(n == 0 for n in counts) / max(len(counts), 1)}
        if scores:
            metrics["process/score_mean"] = sum(scores) / len(scores)
            metrics["process/min_mean"] = sum(minima) / len(minima)
        return (rewards, mask), metrics
