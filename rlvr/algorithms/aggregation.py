"""Loss aggregation over tokens and sequences with *global* denominators, so the gradient of a step does
not depend on how it is split into micro-batches (or ranks): each micro-batch divides by the totals of
the whole mini-batch, and the micro-batch gradients are summed."""

from __future__ import annotations

import torch


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    global_tokens: float,
    global_seqs: float,
    norm_constant: float | None = None,
) -> torch.Tensor:
    """Reduce a [B, C] per-token loss of one micro-batch to its share of the mini-batch loss.

    token-mean:              sum(L m) / N_tokens_global                       (DAPO; verl default)
    seq-mean-token-sum:      sum_i sum_t(L m) / B_global
    seq-mean-token-mean:     sum_i [sum_t(L m) / sum_t m] / B_global          (original GRPO)
    seq-mean-token-sum-norm: sum(L m) / (B_global * C), C a constant          (Dr. GRPO)
    """
    mask = mask.to(per_token.dtype)
    if mode == "token-mean":
        return (per_token * mask).sum() / max(global_tokens, 1.0)
    if mode == "seq-mean-token-sum":
        return (per_token * mask).sum() / max(global_seqs, 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / max(global_seqs, 1.0)
    if mode == "seq-mean-token-sum-norm":
        if not norm_constant:
            raise ValueError("seq-mean-token-sum-norm needs a normalizing constant")
        return (per_token * mask).sum() / (max(global_seqs, 1.0) * norm_constant)
    raise ValueError(f"unknown loss aggregation '{mode}'")
