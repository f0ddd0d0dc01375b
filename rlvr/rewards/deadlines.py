"""The reward pool's clocks: when a worker's load or item runs out of time, and the policy that stops a run whose
reward keeps timing out on fresh workers instead of replacing them for ever."""

from __future__ import annotations

import statistics
from collections import deque

from rlvr.rewards.failures import RewardLoadError, RewardTimeoutLoop
from rlvr.rewards.worker_process import WorkerProcess


def deadline(worker: WorkerProcess, timeout_s: float, load_timeout_s: float) -> float | None:
    """When `worker` overruns: its current load's limit, or its current item's; None when it is idle."""
    if worker.loading is not None:
        return worker.since + load_timeout_s
    if worker.pending:
        return worker.last_progress + timeout_s
    return None


def load_overrun(worker: WorkerProcess, load_timeout_s: float) -> RewardLoadError:
    return RewardLoadError(f"reward worker {worker.number} did not finish loading {worker.loading} within "
                           f"rewards.load_timeout_s={load_timeout_s:g} s. Raise rewards.load_timeout_s if loading it "
                           "legitimately takes longer (a large model on a cold machine).")


class TimeoutLoop:
    """Stops the run with RewardTimeoutLoop when `max_in_a_row` items of one reward time out (each counted once, at
    its first attempt) with no item of it finishing in between, naming the reward, the limit and the times measured
    (0: never)."""

    def __init__(self, max_in_a_row: int, timeout_s: float):
        self.max_in_a_row, self.timeout_s = max_in_a_row, timeout_s
        self.timed_out: dict[str, list[float]] = {}  # name -> its timed-out attempts since its last finished item
        self.item_s: dict[str, deque[float]] = {}  # name -> how long its recent finished items took

    def finished(self, name: str, seconds: float) -> None:
        self.timed_out.pop(name, None)
        self.item_s.setdefault(name, deque(maxlen=256)).append(seconds)

    def first_timeout(self, name: str, ran_s: float, load_s: dict[str, float]) -> None:
        """Count an item's first timed-out attempt; raise when the reward is in a loop (`load_s`: what loading each
        reward took, for the message)."""
        if not self.max_in_a_row:
            return
        attempts = self.timed_out.setdefault(name, [])
        attempts.append(ran_s)
        if len(attempts) >= self.max_in_a_row:
            raise RewardTimeoutLoop(self.message(name, attempts, load_s))

    def message(self, name: str, attempts: list[float], load_s: dict[str, float]) -> str:
        finished = self.item_s.get(name)
        took = (f"; its items that finished took {statistics.median(finished):.2f} s (median), at most "
                f"{max(finished):.2f} s" if finished else "; none of its items has finished yet")
        loaded = f"; loading it took {load_s[name]:.1f} s, outside the item limit" if name in load_s else ""
        return (f"reward {name}: {len(attempts)} items in a row timed out at rewards.timeout_s={self.timeout_s:g} s "
                f"(stopped after {', '.join(f'{s:.1f}' for s in attempts)} s), with "
                f"no item of it finishing in between{took}{loaded}. Stopping rather than replacing workers for ever. "
                f"Raise rewards.timeout_s above what one item takes, or make the reward faster "
                f"(rewards.max_timeouts_in_a_row={self.max_in_a_row} sets how many such timeouts stop the run).")
