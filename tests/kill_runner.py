"""Fault injection: `python tests/kill_runner.py PHASE N train ARGS...` runs `rlvr train ARGS...` and SIGKILLs
itself right after the N-th call of PHASE, one of the steps rlvr.training.checkpoint takes to write a checkpoint."""

from __future__ import annotations

import os
import signal
import sys

import rlvr.training.checkpoint as checkpoint
from rlvr.cli.main import main

# In the order a save runs them: model files, trainer state, manifest, COMPLETE marker, rename into place,
# deletion of an old checkpoint, retention as a whole.
PHASES = ("save_pretrained", "_save_state", "write_manifest", "_mark_complete", "write_dir_atomically", "_discard",
          "prune_checkpoints")


def kill_after(phase: str, nth: int) -> None:
    original = getattr(checkpoint, phase)
    calls = 0

    def wrapped(*args, **kwargs):
        nonlocal calls
        result = original(*args, **kwargs)
        calls += 1
        if calls == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(checkpoint, phase, wrapped)


if __name__ == "__main__":
    phase, nth = sys.argv[1], int(sys.argv[2])
    if phase not in PHASES:
        raise SystemExit(f"unknown phase {phase}; one of {PHASES}")
    kill_after(phase, nth)
    sys.exit(main(sys.argv[3:]))
