"""A wall-clock limit on a block of Python code, by SIGALRM.

Reward workers (rlvr.rewards.pool) are processes whose main thread runs the reward, so a signal can
interrupt a slow parse or simplification there. Off the main thread signals cannot be used and the block
runs unbounded: the pool's per-item timeout, which kills and replaces the worker, bounds it instead. The
same holds for native code that does not return to the interpreter until it finishes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class TimeLimitExceeded(TimeoutError):
    """The block ran past its limit."""


class _Alarm(BaseException):
    """Raised inside the block; a BaseException, so library code's `except Exception` cannot swallow it."""


def _on_alarm(signum, frame) -> None:
    raise _Alarm


@contextmanager
def time_limit(seconds: float, what: str = "the block") -> Iterator[None]:
    """Raise TimeLimitExceeded when the block runs longer than `seconds` (no limit when <= 0 or off the main
    thread). Limits do not nest: an inner one replaces the outer timer."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds)
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)  # an alarm firing before this line is caught below
    except _Alarm:
        raise TimeLimitExceeded(f"{what} took longer than {seconds:g} s") from None
    finally:
        signal.signal(signal.SIGALRM, previous)
