"""The step rewards of a step's trained samples as token tensors for process credit: each completion scored by the
configured step reward (rewards.step_reward, rlvr.rewards.steps), each step's reward placed on the token holding the
step's last character."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlvr.config import StepRewardConfig
from rlvr.errors import RlvrError
from rlvr.rewards.steps import checked_steps, resolve_step_reward, step_reward_args, step_token_positions, token_ends
from rlvr.rollout.steps import Group


class StepRewards:
    """rewards.step_reward, scored in the trainer's process for the trained samples (None: no step rewards)."""

    def __init__(self, config: StepRewardConfig | None):
        self.name = config.function if config is not None else None
        self.function = resolve_step_reward(config.function) if config is not None else None
        self.args = step_reward_args(self.function, config.args) if config is not None else {}

    def token_rewards(self, groups: Sequence[Group], tokenizer, width: int, labels: Sequence[str]
                      ) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, dict[str, float]]:
        """((step rewards [N, C], step-end mask [N, C]), metrics) for the groups' samples in batch order (C =
        `width`); (None, {}) without a step reward. Steps ending on the same token count as one step with the lower
        reward. `labels[t]` names task t in error messages."""
        if self.function is None:
            return None, {}
        rows = [(g, i, c) for g in groups for i, c in enumerate(g.completions)]
        rewards, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
        counts, scores, minima = [], [], []
        for r, (group, i, c) in enumerate(rows):
            where = f"task {labels[group.source]}, problem {group.problem.uid}, sample {i}"
            if getattr(c, "turns", None) is not None:
                raise RlvrError(f"rewards.step_reward scores single completions; {where} is a multi-turn episode "
                                "(use algorithm.turn_credit for episodes)")
            fields = {**group.problem.reward_fields(), "completion_tokens": c.policy_tokens, "truncated": c.truncated}
            try:
                raw = self.function(group.problem.prompt, c.text, **fields, **self.args)
            except Exception as e:
                raise RlvrError(f"step reward '{self.name}' failed on {where}: {type(e).__name__}: {e}") from e
            steps = checked_steps(raw, c.text, self.name, where)
            positions = step_token_positions(steps, token_ends(tokenizer, c.token_ids)) if c.token_ids else []
            for step, pos in zip(steps, positions):
                taken = mask[r, pos] > 0
                rewards[r, pos] = min(float(rewards[r, pos]), step.score) if taken else step.score
                mask[r, pos] = 1.0
            counts.append(len(positions))
            scores += [s.score for s in steps[: len(positions)]]
            if positions:
                minima.append(min(s.score for s in steps))
        metrics = {"steps/per_sample": sum(counts) / max(len(counts), 1),
                   "steps/no_step_frac": sum(n == 0 for n in counts) / max(len(counts), 1)}
        if scores:
            metrics["steps/score_mean"] = sum(scores) / len(scores)
            metrics["steps/min_mean"] = sum(minima) / len(minima)
        return (rewards, mask), metrics
