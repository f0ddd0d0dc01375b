"""What the advantage estimators and policy losses read from a run's `algorithm` section.

`rlvr.config.AlgorithmConfig` is one such object; the algorithms name this protocol instead of the config class, so
the algorithm math depends on nothing above it (and a plugin or a test may pass any object with these attributes)."""

from __future__ import annotations

from typing import Protocol


class AlgorithmSettings(Protocol):
    advantage: str  # the registered estimator's name
    advantage_epsilon: float  # added to the group std
    std_unbiased: bool  # group std with N-1 (verl) or N
    gamma: float  # discount of token returns (reinforce_pp)
    reward_baseline: float  # constant baseline of 'reinforce'
    ngrpo_max_reward: float  # NGRPO's virtual sample's reward
    role_baseline_decay: float  # SPIRAL's role baseline: b <- decay b + (1 - decay) reward
    positive_weight: float  # PSR weight on positive advantages
    negative_weight: float  # NSR weight on negative advantages
    clip_eps_low: float  # PPO clip: ratio floor 1 - clip_eps_low
    clip_eps_high: float  # PPO clip: ratio ceiling 1 + clip_eps_high
    dual_clip_c: float | None  # dual-clip bound for negative advantages
    cispo_two_sided: bool  # CISPO: also clip from below
    dcpo_ratio_max: float  # DCPO: ceiling of the dynamic upper bound
    turn_credit: str | None  # a registered turn-level credit for episode rows, None: the estimator's on every token
    turn_gamma: float  # discount per assistant turn of the turn returns
    gigpo_step_weight: float  # GiGPO's omega: weight of the step-level (anchor-state) advantage
    process_outcome_weight: float  # process credit: weight of the outcome score added to the step-reward returns
    distill_weight: float  # on-policy distillation: weight of the teacher's term added to the estimator's advantage
    distill_gamma: float  # on-policy distillation: discount of the reverse-KL rewards over later tokens (0: per token)
