"""Algorithm math as pure, registered functions: advantage estimators, policy losses, KL, aggregation."""

from rlvr.algorithms.advantages import ADVANTAGES
from rlvr.algorithms.aggregation import aggregate
from rlvr.algorithms.kl import KL_ESTIMATORS
from rlvr.algorithms.losses import POLICY_LOSSES

__all__ = ["ADVANTAGES", "POLICY_LOSSES", "KL_ESTIMATORS", "aggregate"]
