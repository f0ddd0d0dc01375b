"""KL to the reference policy: per-token estimators with delta = ref_logp - logp (Schulman, "Approximating
KL Divergence", 2020), straight-through "+" variants, KL as a reward penalty, and the adaptive coefficient."""

from __future__ import annotations

from torch import Tensor

from rlvr.registry import Registry

KL_ESTIMATORS: Registry = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = logp - ref_logp (unbiased, high variance)."""
    return logp - ref_logp


@KL_ESTIMATORS.register("abs")
def kl_abs(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """|logp - ref_logp|."""
    return (logp - ref_logp).abs()


@KL_ESTIMATORS.register("k2")
def k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = (logp - ref_logp)^2 / 2."""
    return 0.5 * (logp - ref_logp) ** 2


@KL_ESTIMATORS.register("k3")
def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(delta) - delta - 1, delta = ref_logp - logp clamped to +-20, value clamped to +-10 (verl)."""
    delta = (ref_logp - logp).clamp(-20, 20)
    return (delta.exp() - delta - 1).clamp(-10, 10)


def _with_k2_gradient(value: Tensor, logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Straight-through: sg(value) + k2 - sg(k2): forward `value`, gradient of k2 alone (= logp - ref_logp per
    token), as in verl's "+" modes."""
    k2_value = k2(logp, ref_logp)
    return value.detach() + (k2_value - k2_value.detach())


@KL_ESTIMATORS.register("k1+")
def k1_plus(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1+ : the value of k1 with the gradient of k2 (sg(k1) + k2 - sg(k2))."""
    return _with_k2_gradient(k1(logp, ref_logp), logp, ref_logp)


@KL_ESTIMATORS.register("k3+")
def k3_plus(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3+ : the value of k3 with the gradient of k2 (sg(k3) + k2 - sg(k2))."""
    return _with_k2_gradient(k3(logp, ref_logp), logp, ref_logp)


def kl_penalized_rewards(token_rewards: Tensor, kl: Tensor, coef: float, mask: Tensor) -> Tensor:
    """KL in the reward (Ziegler et al. 2019; REINFORCE++): r_t <- r_t - coef * KL_t on valid tokens, no gradient."""
    return token_rewards - coef * kl.detach() * mask


class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences"):
    coef <- coef * (1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon)."""

    def __init__(self, init_coef: float, target: float, horizon: int):
        self.value, self.target, self.horizon = init_coef, target, horizon

    def update(self, current_kl: float, n_steps: int) -> float:
        error = min(max(current_kl / self.target - 1, -0.2), 0.2)
        self.value *= 1 + error * n_steps / self.horizon
        return self.value

    def state_dict(self) -> dict[str, float]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.value = state["value"]


def sampled_reverse_kl(student_logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor) -> float:
    """The mean per-token reverse KL to the teacher on sampled tokens (k1): mean over `mask` of log p_student -
    log p_teacher, an unbiased estimate of KL(student || teacher) per token when the tokens are the student's
    samples (Thinking Machines' 'teacher KL')."""
    return float(((student_logprobs - teacher_logprobs) * mask).sum() / mask.sum().clamp(min=1))
