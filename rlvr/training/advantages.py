"""The advantages phase of a step: the batch's scores (and, with KL in the reward, the per-token KL penalty) turned
into token advantages by the configured estimator, and the loss mask (overlong filtering, forking tokens)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.algorithms import (
    KL_ESTIMATORS,
    AdvantageInputs,
    TurnInputs,
    compute_advantages,
    high_entropy_token_mask,
    kl_penalized_rewards,
    last_token_rewards,
    overlong_mask,
    step_group_metrics,
)
from rlvr.config import AlgorithmConfig
from rlvr.rollout.base import Completion
from rlvr.rollout.episodes import Episode
from rlvr.rollout.roles import role_key
from rlvr.training.batch import RolloutBatch


def episode_turns(completions: list[Completion], batch: RolloutBatch) -> TurnInputs:
    """The turn layout of the batch's episode rows (`completions[i]` is row i). Turn rewards are the episode's
    counted turn rewards, with the rest of the sample's score (the outcome, any shaping) on the last turn, so a
    row's turn rewards sum to its score."""
    rows = [i for i, c in enumerate(completions) if isinstance(c, Episode) and c.turns > 0]
    width = max((completions[i].turns for i in rows), default=1)
    rewards = torch.zeros(len(rows), width, dtype=batch.scores.dtype)
    turn_mask = torch.zeros(len(rows), width)
    token_turns = torch.full((len(rows), batch.completion_width), -1, dtype=torch.long)
    for e, i in enumerate(rows):
        c = completions[i]
        earlier = sum(c.turn_rewards[:-1])
        rewards[e, : c.turns] = torch.tensor([*c.turn_rewards[:-1], float(batch.scores[i]) - earlier])
        turn_mask[e, : c.turns] = 1
        for t, (start, end) in enumerate(zip(c.turn_starts, [*c.turn_starts[1:], len(c.token_ids)])):
            policy = torch.tensor(c.policy_mask[start:end], dtype=torch.bool)
            token_turns[e, start:end] = torch.where(policy, t, -1)
    index = torch.tensor(rows, dtype=torch.long)
    return TurnInputs(rows=index, rewards=rewards, turn_mask=turn_mask, group_ids=batch.group_ids[index],
                      token_turns=token_turns, anchors=[completions[i].anchors for i in rows])


def assign_advantages(batch: RolloutBatch, a: AlgorithmConfig, labels: list[str], history: dict, kl_coef: float,
                      reference_logprobs: Callable[[RolloutBatch], torch.Tensor],
                      completions: list[Completion] | None = None,
                      teacher_logprobs: Callable[[RolloutBatch], torch.Tensor] | None = None
                      ) -> tuple[dict, dict[str, float]]:
    """Set `batch.advantages` and `batch.loss_mask` (and `batch.ref_logprobs` when KL is on, `batch.teacher_logprobs`
    with a teacher); returns the estimator's history (DCPO's cumulative statistics) and the step's credit metrics
    (GiGPO's step groups). `labels[t]` names task t in the prompts' uids; `completions` (row by row) give the
    episodes' turns to `algorithm.turn_credit`, their tree paths, and their span rewards (process credit,
    rlvr.rollout.process_rewards) as the estimator's step_rewards and step_mask; `teacher_logprobs` scores the batch
    under the teacher (on-policy distillation: the student's side is the sampling logprobs, those of the policy that
    sampled, as verl and Tinker take them)."""
    mask = batch.completion_mask
    spans = span_tensors(completions, mask.shape[1]) if completions else None
    if teacher_logprobs is not None:
        batch.teacher_logprobs = teacher_logprobs(batch) * mask
    token_rewards = None
    if a.kl_coef > 0:
        batch.ref_logprobs = reference_logprobs(batch)
        if a.kl_placement == "reward":
            kl = KL_ESTIMATORS.get(a.kl_estimator)(batch.rollout_logprobs, batch.ref_logprobs)
            token_rewards = kl_penalized_rewards(last_token_rewards(batch.scores, mask), kl, kl_coef, mask)
    turns = episode_turns(completions, batch) if a.turn_credit and completions else None
    batch.advantages, history = compute_advantages(
        AdvantageInputs(scores=batch.scores, group_ids=batch.group_ids, mask=mask,
                        uids=[f"{labels[m['task']]}/{m['uid']}" for m in batch.metadata],
                        roles=[role_key(labels[m["task"]], m.get("role")) for m in batch.metadata],
                        token_rewards=token_rewards, history=history,
                        turns=turns,
                        step_rewards=spans[0] if spans else None, step_mask=spans[1] if spans else None,
                        tree_paths=[c.tree_path for c in completions] if completions else None,
                        logprobs=batch.rollout_logprobs * mask, teacher_logprobs=batch.teacher_logprobs),
        a,
    )
    loss_mask = overlong_mask(batch.truncated, mask) if a.mask_truncated else mask
    if a.high_entropy_fraction is not None:
        loss_mask = loss_mask * high_entropy_token_mask(batch.rollout_entropy, loss_mask, a.high_entropy_fraction)
    batch.loss_mask = loss_mask
    return history, step_group_metrics(turns) if a.turn_credit == "gigpo" and turns is not None else {}


def span_tensors(completions: list[Completion], width: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The completions' span rewards as (rewards [N, width], span-end mask [N, width]); None where no completion was
    scored for spans (the run's estimator reads none)."""
    if all(c.span_rewards is None for c in completions):
        return None
    rewards, mask = torch.zeros(len(completions), width), torch.zeros(len(completions), width)
    for r, c in enumerate(completions):
        for pos, score in c.span_rewards or ():
            rewards[r, pos], mask[r, pos] = score, 1.0
    return rewards, mask
