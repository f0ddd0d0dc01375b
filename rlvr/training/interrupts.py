"""Stop a run cleanly on SIGINT (Ctrl-C) or SIGTERM (a scheduler's pre-emption): the first signal lets the
current step finish, then the run writes a checkpoint and stops; a second signal aborts at once. A step that is
waiting (on reward workers, rollout workers) rather than computing gets `checkpoint.stop_wait_s` more seconds; then
its wait is given up (rlvr.watchdog), the step is dropped, and the run stops with the checkpoint of the last finished
step, so a stop never waits on something that may never come.

Reward workers run in their own session (rlvr.rewards.pool), so a terminal's Ctrl-C, which goes to the
foreground process group, never reaches them mid-step."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from rlvr.distributed import all_reduce_sum
from rlvr.errors import RlvrError
from rlvr.watchdog import WATCH

SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
    """Between install() and restore(), SIGINT/SIGTERM request a stop instead of raising (and give waits
    `wait_s` more seconds: rlvr.watchdog); a second one raises KeyboardInterrupt. Handlers are installed only in the
    main thread (elsewhere signals keep their handlers)."""

    def __init__(self, wait_s: float = 10.0) -> None:
        self.signum: int | None = None
        self.wait_s = wait_s
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        WATCH.request_stop(self.wait_s)
        print(f"\n{signal.Signals(signum).name}: finishing the current step, then writing a checkpoint; a step "
              f"waiting on workers is given up after {self.wait_s:g} s (send it again to abort)", file=sys.stderr,
              flush=True)

    def requested(self) -> bool:
        """Whether any rank was signalled (every rank must call this at the same point of a step)."""
        return all_reduce_sum(float(self.signum is not None)) > 0

    def install(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def restore(self) -> None:
        """Put the handlers found at install() back."""
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
        WATCH.clear_stop()
