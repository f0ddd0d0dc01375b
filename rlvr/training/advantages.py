"""The advantages phase of a step: the batch's scores (and, with KL in the reward, the per-token KL penalty) turned
into token advantages by the configured estimator, and the loss mask (overlong filtering, forking tokens)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.algorithms import (
    KL_ESTIMATORS,
    AdvantageInputs,
    compute_advantages,
    high_entropy_token_mask,
    kl_penalized_rewards,
    last_token_rewards,
    overlong_mask,
)
from rlvr.config import AlgorithmConfig
from rlvr.training.batch import RolloutBatch


def assign_advantages(batch: RolloutBatch, a: AlgorithmConfig, labels: list[str], history: dict, kl_coef: float,
                      reference_logprobs: Callable[[RolloutBatch], torch.Tensor]) -> dict:
    """Set `batch.advantages` and `batch.loss_mask` (and `batch.ref_logprobs` when KL is on); returns the
    estimator's history (DCPO's cumulative statistics). `labels[t]` names task t in the prompts' uids."""
    mask = batch.completion_mask
    token_rewards = None
    if a.kl_coef > 0:
        batch.ref_logprobs = reference_logprobs(batch)
        if a.kl_placement == "reward":
            kl = KL_ESTIMATORS.get(a.kl_estimator)(batch.rollout_logprobs, batch.ref_logprobs)
            token_rewards = kl_penalized_rewards(last_token_rewards(batch.scores, mask), kl, kl_coef, mask)
    batch.advantages, history = compute_advantages(
        AdvantageInputs(scores=batch.scores, group_ids=batch.group_ids, mask=mask,
                        uids=[f"{labels[m['task']]}/{m['uid']}" for m in batch.metadata],
                        token_rewards=token_rewards, history=history),
        a,
    )
    loss_mask = overlong_mask(batch.truncated, mask) if a.mask_truncated else mask
    if a.high_entropy_fraction is not None:
        loss_mask = loss_mask * high_entropy_token_mask(batch.rollout_entropy, loss_mask, a.high_entropy_fraction)
    batch.loss_mask = loss_mask
    return history
