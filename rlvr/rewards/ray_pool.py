"""Reward scoring as Ray tasks spread over a cluster's CPUs (the optional 'ray' extra).

Requests are cut into chunks and each chunk is one Ray task. A task scores its chunk in a local `RewardPool` of
one worker process that lives as long as its Ray worker, so per-item timeouts, errors and crashes behave exactly
as on one machine. A task whose Ray worker dies (a node lost, a process killed) is run again by Ray, up to
`cluster.max_retries` times; outcomes are keyed by request, so every request gets exactly one outcome. Chunks
still failing after the retries are recorded as crashes (scored 0), like an item that keeps killing its worker.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from rlvr.config import ClusterConfig
from rlvr.errors import RlvrError
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest
from rlvr.sandbox.policy import configure, minimum_isolation

_POOLS: dict[tuple, RewardPool] = {}  # inside a Ray worker process: its reward pool, by its limits


def _ray():
    try:
        import ray
    except ImportError:
        raise RlvrError("cluster.ray_address / rewards.backend=ray need Ray: pip install 'rlvr[ray]'.") from None
    return ray


def init_ray(address: str, num_cpus: int | None = None) -> bool:
    """Connect to Ray: 'local' starts a Ray instance in this process, anything else ('auto', 'ray://host:port')
    joins a running cluster. Returns whether this call started or joined it (False when already connected)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:
            raise RlvrError(f"cluster.ray_address={address}: no Ray cluster there ({e}). Start one with "
                            f"`ray start --head`, or use cluster.ray_address=local.") from None
    return True


def score_chunk(requests: list[RewardRequest], limits: tuple[float, float, int],
                sandbox_isolation: str = "bwrap") -> list[tuple[Hashable, RewardOutcome]]:
    """Run in a Ray worker: score `requests` in the worker's own reward pool, in order, with the driver's minimum
    sandbox isolation (a Ray worker does not inherit the driver's environment). `limits`: the item timeout, the
    load timeout and the timeouts in a row that stop the run (each reward is loaded outside the item's limit)."""
    configure(sandbox_isolation)
    pool = _POOLS.get(limits)
    if pool is None:
        timeout_s, load_timeout_s, in_a_row = limits
        pool = _POOLS[limits] = RewardPool(num_workers=1, timeout_s=timeout_s, load_timeout_s=load_timeout_s,
                                           max_timeouts_in_a_row=in_a_row)
        pool.start()  # each reward loads before its first item, outside the item's limit
    outcomes = pool.score(requests)
    return [(r.key, outcomes[r.key]) for r in requests]


class RayRewardPool:
    """The `RewardPool` interface (score, close) over Ray tasks."""

    def __init__(self, cluster: ClusterConfig, timeout_s: float = 10.0, load_timeout_s: float = 600.0,
                 max_timeouts_in_a_row: int = 4):
        self.limits, self.chunk_size = (timeout_s, load_timeout_s, max_timeouts_in_a_row), cluster.chunk_size
        self._started = cluster.ray_address is not None and init_ray(cluster.ray_address, cluster.num_cpus)
        ray = _ray()
        if not ray.is_initialized():
            raise RlvrError("rewards.backend=ray needs cluster.ray_address ('auto' or 'local').")
        self._task = ray.remote(num_cpus=1, max_retries=cluster.max_retries)(score_chunk)

    def score(self, requests: Sequence[RewardRequest]) -> dict[Hashable, RewardOutcome]:
        ray = _ray()
        chunks = [list(requests[i : i + self.chunk_size]) for i in range(0, len(requests), self.chunk_size)]
        refs = [self._task.remote(chunk, self.limits, minimum_isolation()) for chunk in chunks]
        results: dict[Hashable, RewardOutcome] = {}
        for chunk, ref in zip(chunks, refs):
            try:
                part = ray.get(ref)
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as e:
                part = [(r.key, RewardOutcome("crash", message=f"the Ray task died on every retry: {e}"))
                        for r in chunk]
            for key, outcome in part:
                results.setdefault(key, outcome)
        return results

    def start(self, loads=()) -> None:
        """Nothing to start ahead: each Ray worker's pool loads a reward before its first item (outside the item's
        limit)."""

    def wait_ready(self) -> dict[str, float]:
        return {}

    def counts(self) -> dict[str, float]:
        return {}

    def describe(self) -> str:
        return "reward tasks on the Ray cluster"

    def close(self) -> None:
        if self._started:
            _ray().shutdown()
            self._started = False

    def __enter__(self) -> RayRewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
