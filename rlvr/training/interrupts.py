"""Stop a run cleanly on SIGINT (Ctrl-C) or SIGTERM (a scheduler's pre-emption): the first signal lets the
current step finish, then the run writes a checkpoint and stops; a second signal aborts at once.

Reward workers run in their own session (rlvr.rewards.pool), so a terminal's Ctrl-C, which goes to the
foreground process group, never reaches them mid-step."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from rlvr.distributed import all_reduce_sum
from rlvr.errors import RlvrError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(RlvrError):
    """A run stopped by a signal after finishing a step and writing its checkpoint."""

    def __init__(self, step: int, signum: int, checkpoint: Path | None):
        self.step, self.signum, self.checkpoint = step, signum, checkpoint
        saved = f" (checkpoint {checkpoint})" if checkpoint else ""
        super().__init__(f"interrupted at step {step}; continue with --resume auto{saved}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class StopRequests:
    """Between install() and restore(), SIGINT/SIGTERM request a stop instead of raising; a second one raises
    KeyboardInterrupt. Handlers are installed only in the main thread (elsewhere signals keep their handlers)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: finishing the current step, then writing a checkpoint "
              "(send it again to abort)", file=sys.stderr, flush=True)

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
