"""Which reward pool a run scores in: local worker processes, or Ray tasks over a cluster."""

from __future__ import annotations

from rlvr.cancellation import Cancellation
from rlvr.config import ClusterConfig, RewardsConfig
from rlvr.rewards.pool import RewardPool


def timeouts_in_a_row(rewards: RewardsConfig) -> int:
    """rewards.max_timeouts_in_a_row, or 0 (never stop) when rewards.max_failure_rate 1 tolerates every failure."""
    return 0 if rewards.max_failure_rate >= 1 else rewards.max_timeouts_in_a_row


def local_reward_pool(rewards: RewardsConfig, cancellation: Cancellation | None = None) -> RewardPool:
    """Worker processes on this machine, with the rewards section's limits; `cancellation` may give up its waits."""
    return RewardPool(rewards.num_workers, rewards.timeout_s, max_memory_mb=rewards.worker_max_memory_mb,
                      load_timeout_s=rewards.load_timeout_s, max_timeouts_in_a_row=timeouts_in_a_row(rewards),
                      cancellation=cancellation)


def make_reward_pool(rewards: RewardsConfig, cluster: ClusterConfig, cancellation: Cancellation | None = None):
    """rewards.backend: 'local' -> RewardPool; 'ray' -> RayRewardPool; 'auto' -> ray when cluster.ray_address is set.
    `cancellation`: the run's, which may give up the local pool's waits (a Ray task's wait is not given up)."""
    backend = rewards.backend if rewards.backend != "auto" else ("ray" if cluster.ray_address else "local")
    if backend == "ray":
        from rlvr.rewards.ray_pool import RayRewardPool

        return RayRewardPool(cluster, rewards.timeout_s, rewards.load_timeout_s, timeouts_in_a_row(rewards))
    return local_reward_pool(rewards, cancellation)
