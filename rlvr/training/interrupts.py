"""Stop a run cleanly on SIGINT (Ctrl-C) or SIGTERM (a scheduler's pre-emption): the first signal lets the
current step finish, then the run writes a checkpoint and stops; a signal more than `REPEAT_WINDOW_S` after the first
aborts at once, one within it is the same request. A step that is waiting (on reward workers, rollout workers) rather
than computing gets `checkpoint.stop_wait_s` more seconds; then its wait is given up (rlvr.cancellation), the step is
dropped, and the run stops with the checkpoint of the last finished step, so a stop never waits on something that
may never come.

Reward workers run in their own session (rlvr.rewards.pool), so a terminal's Ctrl-C, which goes to the
foreground process group, never reaches them mid-step."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rlvr.cancellation import Cancellation
from rlvr.distributed import all_reduce_sum
from rlvr.errors import RlvrError

SIGNALS = (signal.SIGINT, signal.SIGTERM)

REPEAT_WINDOW_S = 1.5
"""A signal this many seconds or less after the first is the same stop request, not a request to abort: `timeout -s
INT` sends its signal to the process and then to its process group, and torchrun forwards a terminal's Ctrl-C to
workers that got it from the terminal too, so one request arrives twice within milliseconds. A person who means to
abort presses Ctrl-C again later than that."""


class TrainingInterrupted(RlvrError):
    """A run stopped by a signal after finishing a step and writing its checkpoint."""

    def __init__(self, step: int, signum: int, checkpoint: Path | None, gave_up: str | None = None):
        self.step, self.signum, self.checkpoint = step, signum, checkpoint
        saved = f" (checkpoint {checkpoint})" if checkpoint else ""
        if gave_up is None:
            super().__init__(f"interrupted at step {step}; continue with --resume auto{saved}")
        elif checkpoint is None:
            super().__init__(f"interrupted while waiting for {gave_up}; gave up the wait after checkpoint.stop_wait_s; "
                             "no step had finished, so there is no checkpoint: start the run again")
        else:
            super().__init__(f"interrupted while waiting for {gave_up}; gave up the wait after "
                             f"checkpoint.stop_wait_s; step {step} is the last finished step; continue with "
                             f"--resume auto{saved}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class StepGivenUp(RlvrError):
    """Step `step`'s rollout was given up while waiting for `what` after a stop request; `checkpoint` is that of the
    last finished step (None when none was ever written)."""

    def __init__(self, step: int, what: str, checkpoint: Path | None):
        self.step, self.what, self.checkpoint = step, what, checkpoint
        super().__init__(f"step {step} given up while waiting for {what}")


class StopRequests:
    """Between install() and restore(), SIGINT/SIGTERM request a stop instead of raising (`cancellation` gives
    waits `wait_s` more seconds); a signal more than REPEAT_WINDOW_S after the first raises KeyboardInterrupt.
    Handlers are installed only in the main thread (elsewhere signals keep their handlers). `clock`: seconds,
    monotonic (injectable for tests)."""

    def __init__(self, cancellation: Cancellation, wait_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.signum: int | None = None
        self.cancellation, self.wait_s = cancellation, wait_s
        self._clock = clock
        self._first_at = 0.0
        self._previous: dict[int, object] = {}
        self._blocked: set[int] = set()

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            if self._clock() - self._first_at <= REPEAT_WINDOW_S:
                return  # the same request, delivered twice
            raise KeyboardInterrupt
        self.signum, self._first_at = signum, self._clock()
        self.cancellation.request(self.wait_s)
        print(f"\n{signal.Signals(signum).name}: finishing the current step, then writing a checkpoint; a step "
              f"waiting on workers is given up after {self.wait_s:g} s (to abort, send it again more than "
              f"{REPEAT_WINDOW_S:g} s from now; a repeat sooner is this same request)", file=sys.stderr, flush=True)

    def requested(self) -> bool:
        """Whether any rank was signalled (every rank must call this at the same point of a step)."""
        return all_reduce_sum(float(self.signum is not None)) > 0

    def install(self) -> StopRequests:
        """Handle SIGINT and SIGTERM from here on; a mask inherited from the launching process that blocks them (a
        blocked signal waits unseen) is lifted for the main thread."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
            self._blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS) & set(SIGNALS)
        return self

    def restore(self) -> None:
        """Put the handlers and the mask found at install() back."""
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        if self._blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, self._blocked)
        self._previous, self._blocked = {}, set()
        self.cancellation.clear()
