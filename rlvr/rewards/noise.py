"""Noisy verifiers (`rewards.noise_correction`): the task verifier as a stochastic channel that flips a wrong
verdict to 1 with the false-positive rate rho_0 and a right one to 0 with the false-negative rate rho_1 (Cai et al.
2025, "Reinforcement Learning with Verifiable yet Noisy Rewards under Imperfect Verifiers", arXiv 2510.00915).

- backward correction: r_hat = (r~ - rho_0) / (1 - rho_0 - rho_1), an unbiased estimate of the clean reward:
  E[r_hat | right] = ((1 - rho_1) - rho_0) / (1 - rho_0 - rho_1) = 1 and E[r_hat | wrong] = (rho_0 - rho_0) / ... = 0;
- forward correction: the score-function weight w_1 = rho_1 for r~ = 1 and w_0 = rho_1 - 1 for r~ = 0, so that
  E[w | right] = 0 and E[w | wrong] = -(1 - rho_0 - rho_1): the expected update pushes down wrong answers only,
  the clean gradient's direction (sum_y grad pi(y) = 0), and needs only rho_1.

Both are per-sample affine maps of the verdict, so an advantage estimator that centres and scales each group (GRPO)
cancels them exactly; they change the update under estimators without the group's std (dr_grpo, rloo: a scale),
with a fixed baseline (reinforce) or no baseline, and when the verifier is summed with other reward terms.
`inject` flips verdicts with given rates, seeded, for experiments.
"""

from __future__ import annotations

import torch

from rlvr.config import NoiseCorrectionConfig


def inject_noise(correct: torch.Tensor, false_positive_rate: float, false_negative_rate: float,
                 generator: torch.Generator) -> torch.Tensor:
    """Verdicts [N] bool with each wrong one flipped to True with the false-positive rate and each right one to
    False with the false-negative rate (one uniform draw per sample, from `generator`)."""
    u = torch.rand(correct.shape, generator=generator, dtype=torch.float64)
    return torch.where(correct, u >= false_negative_rate, u < false_positive_rate)


def corrected_reward(noisy: torch.Tensor, method: str, rho_0: float, rho_1: float) -> torch.Tensor:
    """The reward of observed 0/1 verdicts `noisy` under `method` (none, backward, forward); see the module."""
    noisy = noisy.to(torch.float64)
    if method == "backward":
        return (noisy - rho_0) / (1.0 - rho_0 - rho_1)
    if method == "forward":
        return noisy + (rho_1 - 1.0)  # w_1 = rho_1, w_0 = rho_1 - 1
    return noisy


class NoisyChannel:
    """`rewards.noise_correction` for one run: a seeded generator for injected flips, and the correction."""

    def __init__(self, cfg: NoiseCorrectionConfig):
        self.cfg = cfg
        self.generator = torch.Generator().manual_seed(cfg.inject.seed) if cfg.inject is not None else None

    def flip(self, correct: torch.Tensor) -> torch.Tensor:
        """The verdicts after the injected noise (unchanged without `inject`)."""
        if self.generator is None:
            return correct
        return inject_noise(correct, self.cfg.inject.false_positive_rate, self.cfg.inject.false_negative_rate,
                            self.generator)

    def reward(self, verdicts: torch.Tensor) -> torch.Tensor:
        """The verifier's reward for (possibly noisy) 0/1 verdicts, corrected as configured."""
        return corrected_reward(verdicts, self.cfg.method, self.cfg.false_positive_rate,
                                self.cfg.false_negative_rate)
