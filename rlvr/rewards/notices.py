"""What the reward pool tells a user as it happens: a worker replaced after a timeout or crash, or for its memory
(rate-limited notices, rlvr.watchdog)."""

from __future__ import annotations

from rlvr.watchdog import NOTICES


def notice_recycled(number: int, limit_mb: float, recycled: int) -> None:
    NOTICES.notice("reward-memory", f"reward worker {number} grew past rewards.worker_max_memory_mb={limit_mb:g} MB; "
                   f"replaced ({recycled} so far)")


def notice_replaced(name: str, status: str, ran_s: float, number: int, timeouts: int, crashes: int) -> None:
    happened = "timed out after" if status == "timeout" else "killed its worker after"
    NOTICES.notice(f"reward-{status}", f"reward {name}: an item {happened} {ran_s:.1f} s; reward worker {number} "
                   f"replaced ({timeouts} timeout(s), {crashes} crash(es) so far)")
