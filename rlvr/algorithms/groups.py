"""Group statistics of sample rewards, shared by the advantage estimators and turn-level credit."""

from __future__ import annotations

import torch
from torch import Tensor


def group_moments(
    scores: Tensor, group_ids: Tensor, unbiased: bool, virtual_reward: float | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-group (mean, std, group index of each sample), optionally with one virtual sample of reward
    `virtual_reward` added to every group. A group of one real sample and no virtual one has std 0."""
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n = counts.to(scores.dtype)
    zeros = torch.zeros(len(counts), dtype=scores.dtype, device=scores.device)
    sums = zeros.index_add(0, inverse, scores)
    if virtual_reward is not None:
        sums, n = sums + virtual_reward, n + 1
    means = sums / n
    sq = zeros.index_add(0, inverse, (scores - means[inverse]) ** 2)
    if virtual_reward is not None:
        sq = sq + (virtual_reward - means) ** 2
    denom = (n - 1).clamp(min=1) if unbiased else n
    return means, (sq / denom).sqrt(), inverse


def group_stats(scores: Tensor, group_ids: Tensor, unbiased: bool) -> tuple[Tensor, Tensor]:
    """Per-sample mean and std of its group. A group of one has mean 0 and std 1 (verl's convention)."""
    means, stds, inverse = group_moments(scores, group_ids, unbiased)
    single = torch.bincount(inverse)[inverse] == 1
    return means[inverse].masked_fill(single, 0.0), stds[inverse].masked_fill(single, 1.0)
