"""Rollout correction: importance weights and masks between the policy that sampled a completion (the rollout
engine, possibly with older weights) and the policy the trainer scores it with.

With r_t = pi_train(y_t) / pi_rollout(y_t) (log r_t = trainer logprob - rollout logprob, clamped to +-20 before
exp as in verl):
  token weight       w_t = r_t                                  (TIS, Yao et al. 2025, "Your Efficient RL Framework
                                                                 Secretly Brings You Off-Policy RL Training")
  sequence weight    w   = prod_t r_t = exp(sum_t log r_t)      (sequence-level IS, verl rollout_is=sequence)
  geometric weight   w   = exp(mean_t log r_t)                  (length-normalised, verl's "geo" rejection)
A weight is *truncated* at a cap C (w <- min(w, C): TIS, C = 2) or used to *mask*: tokens (or whole sequences)
whose weight falls outside [low, high] get no gradient (IcePop, Ling team 2025, "Small Leak Can Sink a Great
Ship": token mask [0.5, 5]; verl's rejection sampling). Weights are detached multipliers of the per-token policy
loss (decoupled PPO, Hilton et al. 2021: the PPO ratio is taken against the proximal policy and the weight
corrects proximal -> behaviour); masked tokens keep their place in the loss normaliser.

Everything here is a pure function of tensors; `rollout_correction` combines them as a config names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

LOG_RATIO_LIMIT = 20.0
Level = Literal["none", "token", "sequence", "geometric"]
LEVELS: tuple[str, ...] = ("none", "token", "sequence", "geometric")


def importance_weights(log_ratio: Tensor, mask: Tensor, level: str) -> Tensor:
    """[B, C] weights (zeros on padding) at `level`: token r_t; sequence exp(sum_t m_t log r_t); geometric
    exp(sum_t m_t log r_t / sum_t m_t). Sequence and geometric weights are repeated over the sequence's tokens."""
    mask = mask.to(log_ratio.dtype)
    if level == "token":
        log_w = log_ratio
    elif level == "sequence":
        log_w = (log_ratio * mask).sum(-1, keepdim=True).expand_as(log_ratio)
    elif level == "geometric":
        log_w = ((log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)).expand_as(
            log_ratio)
    else:
        raise ValueError(f"unknown importance weight level '{level}'; one of token, sequence, geometric")
    return torch.exp(log_w.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)) * mask


def truncate(weights: Tensor, cap: float) -> Tensor:
    """Truncated importance sampling: min(w, cap)."""
    return weights.clamp(max=cap)


def keep_mask(weights: Tensor, mask: Tensor, low: float, high: float) -> Tensor:
    """1 where low <= w <= high on a valid token, else 0 (float, like `mask`)."""
    return ((weights >= low) & (weights <= high)).to(mask.dtype) * mask


@dataclass(frozen=True)
class CorrectionSpec:
    """What to do with the rollout/trainer mismatch: weight at `weight` level truncated at `weight_cap`, and/or
    mask at `mask` level outside [mask_low, mask_high]. 'none' turns either off."""

    weight: str = "none"
    weight_cap: float = 2.0
    mask: str = "none"
    mask_low: float = 0.5
    mask_high: float = 2.0

    @property
    def active(self) -> bool:
        return self.weight != "none" or self.mask != "none"


# Named presets as the anchors ship them (values of CorrectionSpec).
CORRECTION_PRESETS: dict[str, CorrectionSpec] = {
    "none": CorrectionSpec(),
    # TIS (Yao et al. 2025; verl rollout_is=token, threshold 2; OpenRLHF tis): per-token weight capped at 2.
    "tis": CorrectionSpec(weight="token", weight_cap=2.0),
    # Sequence-level TIS (verl decoupled_seq_is): product of token ratios capped at 2.
    "seq_tis": CorrectionSpec(weight="sequence", weight_cap=2.0),
    # IcePop (Ling team 2025): two-sided token masking, no reweighting, [0.5, 5].
    "icepop": CorrectionSpec(mask="token", mask_low=0.5, mask_high=5.0),
    # Geometric-mean sequence masking (verl decoupled_geo_rs, seq_mean_k1 with bounds 0.999_1.001).
    "geo_mask": CorrectionSpec(mask="geometric", mask_low=0.999, mask_high=1.001),
    # Sequence-mask TIS (verl decoupled_geo_rs_seq_tis): geometric-mean sequence mask plus sequence TIS at 2.
    "seq_mask_tis": CorrectionSpec(weight="sequence", weight_cap=2.0, mask="geometric", mask_low=0.999,
                                   mask_high=1.001),
}


def rollout_correction(trainer_logp: Tensor, rollout_logp: Tensor, mask: Tensor,
                       spec: CorrectionSpec) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """(weight [B, C], keep [B, C], per-token stats) for samples drawn by the rollout policy and scored by the
    trainer's (proximal) policy. `weight` multiplies the per-token policy loss (ones when no weighting), `keep`
    multiplies the loss mask (ones when no masking); both are detached. Stats are per-token float tensors (summed
    over loss tokens by the caller): k1 = log pi_rollout - log pi_train and k3 = r - 1 - log r (estimates of
    KL(rollout || trainer)), the weight used, and whether a token was truncated or masked."""
    log_ratio = (trainer_logp - rollout_logp).detach()
    mask = mask.to(log_ratio.dtype)
    safe = log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    ones = torch.ones_like(log_ratio)
    weight, keep = ones, ones
    stats = {"rollout_corr/kl_k1": -log_ratio, "rollout_corr/kl_k3": torch.exp(safe) - 1 - safe}
    if spec.weight != "none":
        raw = importance_weights(log_ratio, mask, spec.weight)
        weight = truncate(raw, spec.weight_cap)
        stats["rollout_corr/truncated_frac"] = (raw > spec.weight_cap).to(log_ratio.dtype)
        stats["rollout_corr/weight"] = weight
    if spec.mask != "none":
        keep = keep_mask(importance_weights(log_ratio, mask, spec.mask), ones, spec.mask_low, spec.mask_high)
        stats["rollout_corr/masked_frac"] = 1 - keep
    return weight, keep, stats


def ratio_summary(log_ratios: Tensor) -> dict[str, float]:
    """Quantiles, min and max of the token ratios r_t = exp(log r_t) (a flat tensor of valid tokens' log ratios),
    and the token-level chi^2 divergence E[r^2] - 1 (verl's chi2_token)."""
    values = log_ratios.double().clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT).exp()
    if not len(values):
        return {}
    q = torch.quantile(values, torch.tensor([0.05, 0.5, 0.95], dtype=values.dtype)).tolist()
    return {"rollout_corr/ratio_min": float(values.min()), "rollout_corr/ratio_p05": q[0],
            "rollout_corr/ratio_p50": q[1], "rollout_corr/ratio_p95": q[2],
            "rollout_corr/ratio_max": float(values.max()), "rollout_corr/chi2_token": float((values**2).mean() - 1)}
