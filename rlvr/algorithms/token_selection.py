"""Which completion tokens receive policy gradient: masks derived from the completion mask."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def high_entropy_token_mask(entropy: Tensor, mask: Tensor, rho: float = 0.2) -> Tensor:
    """Forking tokens (Wang et al. 2025, "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective
    RL for LLM Reasoning"): keep the k = ceil(rho * n_valid) highest-entropy valid tokens of the whole step
    [N, C]. Ties are broken by position in row-major order (earlier sample, then earlier token first), so
    exactly k tokens are kept."""
    if not 0 < rho <= 1:
        raise ValueError(f"rho must be in (0, 1], got {rho}")
    valid = mask.reshape(-1) > 0
    k = math.ceil(rho * int(valid.sum()))
    scores = torch.where(valid, entropy.reshape(-1).detach().to(torch.float64), -math.inf)
    order = torch.sort(scores, descending=True, stable=True).indices[:k]
    keep = torch.zeros_like(valid)
    keep[order] = True
    return (keep & valid).reshape(mask.shape).to(mask.dtype)


def overlong_mask(truncated: Tensor, mask: Tensor) -> Tensor:
    """DAPO overlong filtering (Yu et al. 2025): completions cut at max_new_tokens get no loss."""
    return mask * (~truncated.bool()).to(mask.dtype)[:, None]
