"""Nothing waits in silence: what the run is waiting on, a thread that says so when nothing has progressed for a
while, rate-limited notices of failures as they happen, and the stop request that ends a wait.

Code that waits says what it waits for (`with WATCH.waiting("rewards of step 3")`, or a function that describes the
wait when asked, such as the reward pool's per-worker states) and reports progress as it happens (`WATCH.progress()`
at each decode step, reward result, micro-batch, collective). While a run is watched (`with WATCH.watch(...)`), a
thread prints one line once the last progress is `warn_after_s` old, naming every open wait and how long it has
lasted, then again each time the silence has doubled.

A first SIGINT/SIGTERM (rlvr.training.interrupts) calls `request_stop(grace_s)`: inside an `abandonable()` region
(the trainer's rollout), a wait that polls `check_stop()` then raises `WaitAbandoned` once the grace has passed, so a
step that waits on something that never comes ends within a bounded time instead of waiting for it."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

POLL_S = 0.25  # how often a polling wait looks at the stop request; the watchdog thread looks at most this often


class WaitAbandoned(Exception):
    """A wait given up after a stop request (its grace passed): the step it belonged to did not finish."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"stopped while waiting for {what}")


@dataclass
class _Wait:
    what: str | Callable[[], str]
    since: float

    def describe(self, now: float) -> str:
        try:
            what = self.what() if callable(self.what) else self.what
        except Exception as e:  # noqa: BLE001 (a description must never break the watchdog)
            what = f"(could not describe the wait: {type(e).__name__}: {e})"
        return f"{what} (for {now - self.since:.0f} s)"


def _clock(monotonic: float) -> str:
    """A monotonic time as the wall clock's HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(time.time() - (time.monotonic() - monotonic)))


class Watchdog:
    """Open waits and the time of the last progress, for the whole process (every thread reports to one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: list[_Wait] = []
        self._last_progress = time.monotonic()
        self._next_warning: float | None = None
        self._printer: Callable[[str], None] = lambda line: print(f"warning: {line}", file=sys.stderr, flush=True)
        self._warn_after_s = 60.0
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()
        self._notices: dict[str, tuple[float, int]] = {}  # key -> (when last printed, notices held back since)
        self._stop_deadline: float | None = None
        self._stop_requested_at: float | None = None
        self._abandonable = 0

    # ------------------------------------------------------------------ progress and waits

    def progress(self) -> None:
        """Something moved on (a token, a result, a micro-batch): the silence starts again."""
        self._last_progress = time.monotonic()
        self._next_warning = None

    @contextmanager
    def waiting(self, what: str | Callable[[], str]) -> Iterator[None]:
        """An open wait, named in the stall line while it lasts; entering and leaving it count as progress."""
        wait = _Wait(what, time.monotonic())
        with self._lock:
            self._waits.append(wait)
        self.progress()
        try:
            yield
        finally:
            with self._lock:
                self._waits.remove(wait)
            self.progress()

    def stall_line(self, now: float | None = None) -> str:
        """'no progress for 75 s (since 12:00:01): <each open wait>', as the watchdog prints it."""
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = list(self._waits)
        described = "; ".join(w.describe(now) for w in waits) or "no wait is open (the run is computing)"
        return (f"no progress for {now - self._last_progress:.0f} s (since {_clock(self._last_progress)}): "
                f"waiting for {described}")

    # ------------------------------------------------------------------ the watching thread

    @contextmanager
    def watch(self, warn_after_s: float, printer: Callable[[str], None] | None = None) -> Iterator[None]:
        """While inside, a thread prints the stall line through `printer` after `warn_after_s` without progress,
        then each time the silence has doubled (0: never)."""
        previous = (self._warn_after_s, self._printer)
        self._warn_after_s = warn_after_s
        if printer is not None:
            self._printer = printer
        self.progress()
        self._finished.clear()
        thread = None
        if warn_after_s > 0 and self._thread is None:
            thread = self._thread = threading.Thread(target=self._run, name="rlvr-watchdog", daemon=True)
            thread.start()
        try:
            yield
        finally:
            if thread is not None:
                self._finished.set()
                thread.join()
                self._thread = None
            self._warn_after_s, self._printer = previous

    def _run(self) -> None:
        while not self._finished.wait(min(POLL_S * 4, self._warn_after_s / 4)):
            now = time.monotonic()
            silent = now - self._last_progress
            if silent < self._warn_after_s:
                continue
            if self._next_warning is None or now >= self._next_warning:
                self._next_warning = self._last_progress + 2 * silent  # again when the silence has doubled
                self._printer(self.stall_line(now))

    # ------------------------------------------------------------------ notices

    def notice(self, key: str, message: str, every_s: float = 10.0) -> None:
        """Print `message` now, unless a notice with the same `key` was printed less than `every_s` ago: then it is
        counted and the next one printed says how many were held back."""
        now = time.monotonic()
        with self._lock:
            last, held = self._notices.get(key, (-float("inf"), 0))
            if now - last < every_s:
                self._notices[key] = (last, held + 1)
                return
            self._notices[key] = (now, 0)
        self._printer(message + (f" ({held} more like it since the last notice)" if held else ""))

    # ------------------------------------------------------------------ stopping

    def request_stop(self, grace_s: float) -> None:
        """A stop was asked for: waits inside an abandonable region may go on for `grace_s` more seconds."""
        self._stop_requested_at = time.monotonic()
        self._stop_deadline = self._stop_requested_at + grace_s

    def clear_stop(self) -> None:
        self._stop_deadline = self._stop_requested_at = None

    @contextmanager
    def abandonable(self, enabled: bool = True) -> Iterator[None]:
        """A region whose waits a stop request may end (`check_stop`); with enabled=False, an ordinary region."""
        if not enabled:
            yield
            return
        self._abandonable += 1
        try:
            yield
        finally:
            self._abandonable -= 1

    def check_stop(self, what: str | Callable[[], str]) -> None:
        """Raise WaitAbandoned when a stop was requested, its grace has passed and this is an abandonable region;
        polling waits call it at least every POLL_S seconds."""
        if self._abandonable and self._stop_deadline is not None and time.monotonic() >= self._stop_deadline:
            raise WaitAbandoned(what() if callable(what) else what)


WATCH = Watchdog()
