"""Per-token KL estimators between the policy and a reference, with delta = ref_logp - logp
(Schulman, "Approximating KL Divergence", 2020)."""

from __future__ import annotations

import torch

from rlvr.registry import Registry

KL_ESTIMATORS: Registry = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref_logp (unbiased, high variance)."""
    return logp - ref_logp


@KL_ESTIMATORS.register("abs")
def kl_abs(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """|logp - ref_logp|."""
    return (logp - ref_logp).abs()


@KL_ESTIMATORS.register("k2")
def k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (logp - ref_logp)^2 / 2."""
    return 0.5 * (logp - ref_logp) ** 2


@KL_ESTIMATORS.register("k3")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(delta) - delta - 1, delta = ref_logp - logp clamped to +-20, value clamped to +-10 (verl)."""
    delta = (ref_logp - logp).clamp(-20, 20)
    return (delta.exp() - delta - 1).clamp(-10, 10)
