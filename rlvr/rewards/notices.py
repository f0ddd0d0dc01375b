"""What the reward pool tells a user while it works: the stall line's account of each worker, and the notices of
replaced workers (rate-limited, rlvr.watchdog)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rlvr.watchdog import WATCH

if TYPE_CHECKING:
    from rlvr.rewards.worker_process import WorkerProcess


def describe(workers: Iterable[WorkerProcess], queued: int) -> str:
    """What each worker is doing, for the watchdog's stall line."""
    now = time.monotonic()
    parts, idle = [], 0
    for w in workers:
        if w.loading is not None:
            parts.append(f"reward worker {w.number}: loading {w.loading} for {now - w.since:.0f} s")
        elif w.pending:
            parts.append(f"reward worker {w.number}: scoring an item of {w.pending[0].name} for "
                         f"{now - w.last_progress:.0f} s")
        else:
            idle += 1
    return "; ".join(parts + [f"{idle} reward worker(s) idle, {queued} item(s) queued"])


def notice_recycled(number: int, limit_mb: float, recycled: int) -> None:
    WATCH.notice("reward-memory", f"reward worker {number} grew past rewards.worker_max_memory_mb={limit_mb:g} MB; "
                 f"replaced ({recycled} so far)")


def notice_replaced(name: str, status: str, ran_s: float, number: int, timeouts: int, crashes: int) -> None:
    happened = "timed out after" if status == "timeout" else "killed its worker after"
    WATCH.notice(f"reward-{status}", f"reward {name}: an item {happened} {ran_s:.1f} s; reward worker {number} "
                 f"replaced ({timeouts} timeout(s), {crashes} crash(es) so far)")
