"""Nothing waits in silence: what the run is waiting on, a thread that says so when nothing has progressed for a
while, and rate-limited notices of failures as they happen. (The stop request that ends a wait is
rlvr.cancellation's.)

Code that waits says what it waits for (`with WATCH.waiting("rewards of step 3")`, or a function that describes the
wait when asked, such as the reward pool's per-worker states) and reports progress as it happens (`WATCH.progress()`
at each decode step, reward result, micro-batch, collective). While a run is watched (`with WATCH.watch(...)`), a
thread looks now and then (`Watchdog.look`) and prints one line once the last progress is `warn_after_s` old, naming
every open wait and how long it has lasted, then again each time the silence has doubled."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

LOOK_EVERY_S = 1.0
"""The watching thread looks at most this often (seconds; and at least four times per `warn_after_s`)."""


def _to_stderr(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


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


class Watchdog:
    """Open waits and the time of the last progress, for the whole process (every thread reports to one).
    `clock`: seconds, monotonic (injectable: tests move a fake clock and call `look` instead of sleeping)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._looking = threading.Lock()
        self._waits: list[_Wait] = []
        self._last_progress = clock()
        self._next_warning: float | None = None
        self._printer: Callable[[str], None] = _to_stderr
        self._warn_after_s = 0.0
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()

    # ------------------------------------------------------------------ progress and waits

    def progress(self) -> None:
        """Something moved on (a token, a result, a micro-batch): the silence starts again."""
        self._last_progress = self._clock()
        self._next_warning = None

    @contextmanager
    def waiting(self, what: str | Callable[[], str]) -> Iterator[None]:
        """An open wait, named in the stall line while it lasts; entering and leaving it count as progress."""
        wait = _Wait(what, self._clock())
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
        now = self._clock() if now is None else now
        with self._lock:
            waits = list(self._waits)
        described = "; ".join(w.describe(now) for w in waits) or "no wait is open (the run is computing)"
        since = time.strftime("%H:%M:%S", time.localtime(time.time() - (now - self._last_progress)))
        return f"no progress for {now - self._last_progress:.0f} s (since {since}): waiting for {described}"

    def say(self, line: str) -> None:
        """Print `line` where the stall lines go (the run's log while watched, else stderr)."""
        self._printer(line)

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

    def look(self) -> None:
        """One wake-up of the watching thread: print the stall line once the silence has reached `warn_after_s`,
        then again only when it has doubled (whoever looks, the same clock prints the same lines once)."""
        with self._looking:
            now = self._clock()
            silent = now - self._last_progress
            if self._warn_after_s <= 0 or silent < self._warn_after_s:
                return
            if self._next_warning is not None and now < self._next_warning:
                return
            self._next_warning = self._last_progress + 2 * silent  # again when the silence has doubled
            self._printer(self.stall_line(now))

    def _run(self) -> None:
        while not self._finished.wait(min(LOOK_EVERY_S, self._warn_after_s / 4)):
            self.look()


class Notices:
    """Notices of failures as they happen (a reward timed out, a worker replaced), printed through `say`, at most
    one per key every `every_s` seconds: the ones held back are counted, and the next one printed says how many.
    `clock`: seconds, monotonic (injectable for tests)."""

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._say, self._clock = say, clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when last printed, notices held back since)

    def notice(self, key: str, message: str, every_s: float = 10.0) -> None:
        """Print `message` now, unless a notice with the same `key` was printed less than `every_s` ago: then it is
        counted and the next one printed says how many were held back."""
        now = self._clock()
        with self._lock:
            last, held = self._last.get(key, (-float("inf"), 0))
            if now - last < every_s:
                self._last[key] = (last, held + 1)
                return
            self._last[key] = (now, 0)
        self._say(message + (f" ({held} more like it since the last notice)" if held else ""))


WATCH = Watchdog()
NOTICES = Notices(WATCH.say)  # printed where the stall lines go
