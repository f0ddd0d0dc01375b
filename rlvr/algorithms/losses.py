"""Policy losses: (logp, old_logp, advantages, mask, config) -> (per-token loss [B, C], per-token stats).

Per-token stats are float tensors of the same shape (e.g. clip indicators); the trainer averages
them over valid tokens for metrics.
"""

from __future__ import annotations

import torch

from rlvr.config import AlgorithmConfig
from rlvr.registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss")


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(logp, old_logp, advantages, mask, cfg: AlgorithmConfig):
    """PPO clipped surrogate (Schulman et al. 2017) with clip-higher eps_low/eps_high (DAPO) and optional
    dual clip c for negative advantages (Ye et al. 2020):
    rho = exp(clamp(logp - old, -20, 20)); L = max(-A rho, -A clip(rho, 1-eps_low, 1+eps_high));
    for A < 0: L = min(L, -A c)."""
    ratio = torch.exp((logp - old_logp).clamp(-20, 20))
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - cfg.clip_eps_low, 1 + cfg.clip_eps_high)
    loss = torch.maximum(unclipped, clipped)
    stats = {
        "clip_frac_high": ((ratio > 1 + cfg.clip_eps_high) & (advantages > 0)).float(),
        "clip_frac_low": ((ratio < 1 - cfg.clip_eps_low) & (advantages < 0)).float(),
    }
    if cfg.dual_clip_c is not None:
        dual = -advantages * cfg.dual_clip_c
        use_dual = (advantages < 0) & (dual < loss)
        loss = torch.where(advantages < 0, torch.minimum(loss, dual), loss)
        stats["clip_frac_dual"] = use_dual.float()
    with torch.no_grad():
        stats["ppo_kl"] = old_logp - logp  # k1 estimate of KL(old || new)
    return loss, stats
