"""Policy losses: (logp, old_logp, advantages, mask, config) -> (per-token loss [B, C], per-token stats).

Per-token stats are float tensors of the same shape; the trainer averages them over valid tokens for
metrics. Every loss reports clip_frac_high, clip_frac_low (zeros where nothing is clipped) and ppo_kl.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algorithms.settings import AlgorithmSettings
from rlvr.registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss")

LOG_RATIO_LIMIT = 20.0  # log-ratios are clamped to +-20 before exp (verl)


def _ppo_kl(logp: Tensor, old_logp: Tensor) -> Tensor:
    """k1 estimate of KL(old || new) per token, without gradient."""
    return (old_logp - logp).detach()


def _clipped_surrogate(ratio: Tensor, advantages: Tensor, low, high) -> tuple[Tensor, dict[str, Tensor]]:
    """L = max(-A rho, -A clip(rho, low, high)) and where the clip removed the gradient: rho above `high` with
    A > 0, or below `low` with A < 0. `low`/`high` are floats or per-token tensors."""
    loss = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, low, high))
    stats = {
        "clip_frac_high": ((ratio > high) & (advantages > 0)).float().detach(),
        "clip_frac_low": ((ratio < low) & (advantages < 0)).float().detach(),
    }
    return loss, stats


def _dual_clip(loss: Tensor, advantages: Tensor, c: float, stats: dict[str, Tensor]) -> Tensor:
    """Dual clip (Ye et al. 2020): for A < 0, L = min(L, -A c)."""
    dual = -advantages * c
    stats["clip_frac_dual"] = ((advantages < 0) & (dual < loss)).float().detach()
    return torch.where(advantages < 0, torch.minimum(loss, dual), loss)


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(logp, old_logp, advantages, mask, cfg: AlgorithmSettings):
    """PPO clipped surrogate (Schulman et al. 2017) with clip-higher eps_low/eps_high (DAPO) and optional
    dual clip c for negative advantages (Ye et al. 2020):
    rho = exp(clamp(logp - old, -20, 20)); L = max(-A rho, -A clip(rho, 1-eps_low, 1+eps_high));
    for A < 0: L = min(L, -A c). Only the upper bound binds for A > 0 and only the lower one for A < 0, so
    NGRPO's asymmetric clipping (looser for positive samples) is eps_high > eps_low."""
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    loss, stats = _clipped_surrogate(ratio, advantages, 1 - cfg.clip_eps_low, 1 + cfg.clip_eps_high)
    if cfg.dual_clip_c is not None:
        loss = _dual_clip(loss, advantages, cfg.dual_clip_c, stats)
    stats["ppo_kl"] = _ppo_kl(logp, old_logp)
    return loss, stats


@POLICY_LOSSES.register("gspo")
def gspo(logp, old_logp, advantages, mask, cfg: AlgorithmSettings):
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"), token form GSPO-token:
    log s_i = sum_t m_t (logp_t - old_t) / sum_t m_t (clamped to +-20); token ratio
    s_i,t = exp(logp_t - sg(logp_t) + sg(log s_i)) (value s_i, gradient of logp_t);
    L = max(-A s_i,t, -A clip(s_i,t, 1-eps_low, 1+eps_high)). The paper uses eps 3e-4/4e-4 and
    seq-mean-token-mean aggregation."""
    mask = mask.to(logp.dtype)
    seq_log_ratio = ((logp - old_logp) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    seq_log_ratio = seq_log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT).detach()
    ratio = torch.exp(logp - logp.detach() + seq_log_ratio[:, None])
    loss, stats = _clipped_surrogate(ratio, advantages, 1 - cfg.clip_eps_low, 1 + cfg.clip_eps_high)
    stats["ppo_kl"] = _ppo_kl(logp, old_logp)
    return loss, stats


@POLICY_LOSSES.register("cispo")
def cispo(logp, old_logp, advantages, mask, cfg: AlgorithmSettings):
    """CISPO (MiniMax-M1, arXiv 2506.13585): L = -sg(w) A logp with the clipped importance weight
    w = min(rho, 1+eps_high) (one-sided, the default: MiniMax-M1 set no lower bound, TRL caps only from
    above) or w = clip(rho, 1-eps_low, 1+eps_high) with `cispo_two_sided`. Every token keeps a gradient;
    clip fractions count truncated weights regardless of the sign of A."""
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)).detach()
    high = 1 + cfg.clip_eps_high
    low = 1 - cfg.clip_eps_low if cfg.cispo_two_sided else 0.0
    weight = ratio.clamp(low, high)
    loss = -weight * advantages * logp
    stats = {
        "clip_frac_high": (ratio > high).float(),
        "clip_frac_low": (ratio < low).float(),
        "ppo_kl": _ppo_kl(logp, old_logp),
    }
    return loss, stats


@POLICY_LOSSES.register("reinforce")
def reinforce(logp, old_logp, advantages, mask, cfg: AlgorithmSettings):
    """On-policy REINFORCE (Williams 1992): L = -A logp, no ratio and no clipping (only valid when the update
    uses the samples' own policy: one epoch, one mini-batch)."""
    zeros = torch.zeros_like(logp).detach()
    return -advantages * logp, {"clip_frac_high": zeros, "clip_frac_low": zeros, "ppo_kl": _ppo_kl(logp, old_logp)}


def dcpo_ratio_bounds(old_logp: Tensor, eps_low: float, eps_high: float, ratio_max: float) -> tuple[Tensor, Tensor]:
    """DCPO dynamic-adaptive clipping bounds (Yang et al. 2025, arXiv 2509.02333) from q = exp(old_logp).

    DCPO bounds the probability-weighted relative change |rho - 1| * p <= eps with p = rho q the new
    probability, i.e. |rho - 1| rho q <= eps. Solving the quadratic in rho:
        low  = 0.5 + 0.5 sqrt(max(1 - 4 eps_low / q, 0))
        high = min(0.5 + 0.5 sqrt(1 + 4 eps_high / q), ratio_max)
    For q -> 1 this is ~[1 - eps, 1 + eps] (PPO); rare tokens get a wider range (high ~ sqrt(eps / q),
    low down to 0.5), so their exploration is not clipped away. The paper caps high at r_max = 10."""
    q = old_logp.detach().exp().clamp(min=torch.finfo(old_logp.dtype).tiny)
    low = 0.5 + 0.5 * (1 - 4 * eps_low / q).clamp(min=0).sqrt()
    high = (0.5 + 0.5 * (1 + 4 * eps_high / q).sqrt()).clamp(max=ratio_max)
    return low, high


@POLICY_LOSSES.register("dcpo")
def dcpo(logp, old_logp, advantages, mask, cfg: AlgorithmSettings):
    """DCPO (Yang et al. 2025, arXiv 2509.02333): the PPO clipped surrogate with per-token bounds
    [low(q), high(q)] from `dcpo_ratio_bounds` (q = old token probability, eps = clip_eps_low/high, paper
    0.16/0.2, cap `dcpo_ratio_max` = 10); optional dual clip as in ppo_clip."""
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    low, high = dcpo_ratio_bounds(old_logp, cfg.clip_eps_low, cfg.clip_eps_high, cfg.dcpo_ratio_max)
    loss, stats = _clipped_surrogate(ratio, advantages, low, high)
    if cfg.dual_clip_c is not None:
        loss = _dual_clip(loss, advantages, cfg.dual_clip_c, stats)
    stats["ppo_kl"] = _ppo_kl(logp, old_logp)
    return loss, stats
