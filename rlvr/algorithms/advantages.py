"""Advantage estimators: (scores [N], group_ids [N], mask [N, C], config) -> token advantages [N, C].

`scores` is each sample's total reward; `group_ids` ties the samples of one prompt together.
"""

from __future__ import annotations

import torch

from rlvr.config import AlgorithmConfig
from rlvr.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator")


def group_stats(scores: torch.Tensor, group_ids: torch.Tensor, unbiased: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample mean and std of its group. A group of one has mean 0 and std 1 (verl's convention)."""
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=scores.dtype).index_add_(0, inverse, scores)
    means = sums / counts
    sq = torch.zeros(len(counts), dtype=scores.dtype).index_add_(0, inverse, (scores - means[inverse]) ** 2)
    denom = (counts - 1).clamp(min=1) if unbiased else counts
    stds = (sq / denom).sqrt()
    single = counts == 1
    means, stds = means.masked_fill(single, 0.0), stds.masked_fill(single, 1.0)
    return means[inverse], stds[inverse]


def _broadcast(per_sample: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return per_sample[:, None] * mask


@ADVANTAGES.register("grpo")
def grpo(scores, group_ids, mask, cfg: AlgorithmConfig) -> torch.Tensor:
    """GRPO (DeepSeekMath, Shao et al. 2024): A_i = (s_i - mean_group) / (std_group + eps)."""
    mean, std = group_stats(scores, group_ids, cfg.std_unbiased)
    return _broadcast((scores - mean) / (std + cfg.advantage_epsilon), mask)


@ADVANTAGES.register("dr_grpo")
def dr_grpo(scores, group_ids, mask, cfg: AlgorithmConfig) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): A_i = s_i - mean_group, no std division."""
    mean, _ = group_stats(scores, group_ids, cfg.std_unbiased)
    return _broadcast(scores - mean, mask)


@ADVANTAGES.register("rloo")
def rloo(scores, group_ids, mask, cfg: AlgorithmConfig) -> torch.Tensor:
    """RLOO (Ahmadian et al. 2024): A_i = s_i - mean of the other samples of the group (0 for a group of one)."""
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=scores.dtype).index_add_(0, inverse, scores)
    n = counts[inverse].to(scores.dtype)
    others = (sums[inverse] - scores) / (n - 1).clamp(min=1)
    return _broadcast(torch.where(n > 1, scores - others, torch.zeros_like(scores)), mask)
