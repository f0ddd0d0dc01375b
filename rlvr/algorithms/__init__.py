"""Algorithm math as pure, registered functions: advantage estimators, turn-level credit, policy losses, KL,
aggregation, token selection, and named presets.

Imports nothing of rlvr but the registry and errors: the math knows no config, model or trainer."""

from rlvr.algorithms.advantages import (
    ADVANTAGES,
    AdvantageInputs,
    compute_advantages,
    estimator_needs,
    last_token_rewards,
)
from rlvr.algorithms.aggregation import aggregate
from rlvr.algorithms.kl import KL_ESTIMATORS, AdaptiveKLController, kl_penalized_rewards
from rlvr.algorithms.losses import POLICY_LOSSES
from rlvr.algorithms.presets import PRESETS, get_preset
from rlvr.algorithms.process_credit import future_step_returns
from rlvr.algorithms.token_selection import high_entropy_token_mask, overlong_mask
from rlvr.algorithms.tree_credit import subtree_centred
from rlvr.algorithms.turn_credit import TURN_CREDIT, TurnInputs, step_group_metrics

__all__ = [
    "ADVANTAGES",
    "POLICY_LOSSES",
    "KL_ESTIMATORS",
    "PRESETS",
    "TURN_CREDIT",
    "TurnInputs",
    "step_group_metrics",
    "AdvantageInputs",
    "AdaptiveKLController",
    "aggregate",
    "compute_advantages",
    "estimator_needs",
    "future_step_returns",
    "get_preset",
    "high_entropy_token_mask",
    "kl_penalized_rewards",
    "last_token_rewards",
    "overlong_mask",
    "subtree_centred",
]
