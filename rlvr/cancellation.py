"""The stop request that ends a wait: one `Cancellation` per run, created by the trainer and handed to what waits.

A first SIGINT/SIGTERM (rlvr.training.interrupts) calls `request(grace_s)`. Inside an `abandonable()` region (the
trainer's rollout, one process), a wait that polls `check()` at least every `POLL_S` seconds (the reward pool's,
the rollout workers') raises `WaitAbandoned` once the grace has passed, so a step that waits on something that
never comes ends within a bounded time instead of waiting for it. Outside such a region, or on a `Cancellation`
nobody requests (a pool scoring for `rlvr eval`), a wait goes on as before."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

POLL_S = 0.25
"""How often a polling wait looks at its `Cancellation` (seconds); a given-up wait ends at most this late."""


class WaitAbandoned(Exception):
    """A wait given up after a stop request (its grace passed): the step it belonged to did not finish."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"stopped while waiting for {what}")


class Cancellation:
    """A stop request with a grace, and how many abandonable regions are open (waits in any thread see both).
    `clock`: seconds, monotonic (injectable for tests)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._deadline: float | None = None
        self._abandonable = 0

    def request(self, grace_s: float) -> None:
        """A stop was asked for: waits inside an abandonable region may go on for `grace_s` more seconds."""
        self._deadline = self._clock() + grace_s

    def clear(self) -> None:
        """No stop is requested any more."""
        self._deadline = None

    @contextmanager
    def abandonable(self, enabled: bool = True) -> Iterator[None]:
        """A region whose waits a stop request may end (`check`); with enabled=False, an ordinary region."""
        if not enabled:
            yield
            return
        self._abandonable += 1
        try:
            yield
        finally:
            self._abandonable -= 1

    def check(self, what: str | Callable[[], str]) -> None:
        """Raise WaitAbandoned (naming `what`, or what it returns) when a stop was requested, its grace has passed
        and an abandonable region is open; polling waits call it at least every POLL_S seconds."""
        if self._abandonable and self._deadline is not None and self._clock() >= self._deadline:
            raise WaitAbandoned(what() if callable(what) else what)
