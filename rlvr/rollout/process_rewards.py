"""Process credit's rewards as a collection stage (rlvr.rollout.stages): once the step's groups are chosen, each
trained completion's spans are scored by the configured process reward (rewards.step_reward, rlvr.rewards.process)
in the reward pool, like every reward, and each span's score is placed on the token holding the span's last
character (`Completion.span_rewards`), where the process-credit estimators read it (PURE, Cheng et al. 2025;
rlvr.algorithms.process_credit). In the run only when the estimator reads step rewards (the composer's `process`,
rlvr.rewards.process.process_reward_for): nothing is scored that no estimator uses."""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.errors import RlvrError
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.failures import FailureBudget
from rlvr.rewards.process import span_token_positions, token_text_ends
from rlvr.rollout.stages import CollectionStage, StageSetup, StepDraft, register_stage
from rlvr.rollout.steps import Group


@register_stage("process_rewards")
class ProcessRewards(CollectionStage):
    """The composer's process reward scored for the trained samples, its failures counted in the run's failure
    budget (a sample whose scoring failed has no span, and is counted)."""

    supports_async = True  # it scores the chosen groups in the trainer's process, whichever collector made them
    enabled_by = "rewards.step_reward"

    def __init__(self, composer: RewardComposer, budget: FailureBudget, tokenizer, labels: Sequence[str]):
        self.composer, self.budget, self.tokenizer, self.labels = composer, budget, tokenizer, list(labels)
        self._metrics: dict[str, float] = {}

    @classmethod
    def configured(cls, setup: StageSetup) -> ProcessRewards | None:
        if setup.composer is None or setup.composer.process is None:
            return None
        return cls(setup.composer, setup.failures, setup.encode.tokenizer, [t.label for t in setup.tasks])

    def after_choice(self, draft: StepDraft, trained: list[Group]) -> list[Group]:
        self._metrics = self.score(trained)
        return trained

    def metrics(self, trained: list[Group]) -> dict[str, float]:
        return self._metrics

    def score(self, groups: Sequence[Group]) -> dict[str, float]:
        """Set each completion's `span_rewards` ((token, score) pairs; spans ending on the same token count as one
        with the lower reward) and return the step's process/* figures."""
        rows = [(g, i, c) for g in groups for i, c in enumerate(g.completions)]
        where = [f"task {self.labels[g.source]}, problem {g.problem.uid}, sample {i}" for g, i, _ in rows]
        for (_, _, c), place in zip(rows, where):
            if getattr(c, "turns", None) is not None:
                raise RlvrError(f"rewards.step_reward scores single completions; {place} is a multi-turn episode "
                                "(use algorithm.turn_credit for episodes)")
        scoring = self.composer.score_spans(
            [(g.problem, c.text, {"completion_tokens": c.policy_tokens, "truncated": c.truncated}) for g, _, c in rows],
            where)
        self.budget.record(len(rows), {scoring.name: scoring.failures},
                           {scoring.name: scoring.first_error} if scoring.first_error else {})
        counts, scores, minima = [], [], []
        for (_, _, c), spans in zip(rows, scoring.spans):
            spans = spans or []
            positions = span_token_positions(spans, token_text_ends(self.tokenizer, c.token_ids)) if c.token_ids else []
            placed: dict[int, float] = {}
            for span, pos in zip(spans, positions):
                placed[pos] = min(placed[pos], span.score) if pos in placed else span.score
            c.span_rewards = tuple(placed.items())
            counts.append(len(positions))
            scores += [s.score for s in spans[: len(positions)]]
            if positions:
                minima.append(min(s.score for s in spans))
        metrics = {"process/spans_per_sample": sum(counts) / max(len(counts), 1),
                   "process/no_span_frac": sum(n == 0 for n in counts) / max(len(counts), 1)}
        if scores:
            metrics["process/score_mean"] = sum(scores) / len(scores)
            metrics["process/min_mean"] = sum(minima) / len(minima)
        return metrics
