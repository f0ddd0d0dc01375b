"""Checks that a run can write its outputs, made before any compute is spent."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from rlvr.errors import RlvrError


def ensure_writable_dir(path: str | Path) -> None:
    """Create the output directory and write a probe file into it, or say why that is impossible."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path) as probe:
            probe.write(b"rlvr")
    except OSError as e:
        raise RlvrError(f"tracking.output_dir '{path}' is not a writable directory ({e.strerror or e}). "
                        f"Choose a directory this user can write to.") from None


def checkpoint_bytes(model: torch.nn.Module) -> int:
    """Estimated size of one checkpoint: the weights plus AdamW's two moments, each the size of the weights."""
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters())


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def ensure_disk_space(path: str | Path, needed: int, mid_run: bool = False) -> None:
    """Refuse to start, or mid-run to write the next checkpoint, when the disk holding `path` has less free space
    than one checkpoint needs (a write that runs out of space part way would fail with the writer's own error)."""
    free = shutil.disk_usage(path).free
    if free < needed:
        then = ("The checkpoints already written are intact: free some space and continue with --resume auto."
                if mid_run else "Free some space or choose another tracking.output_dir.")
        raise RlvrError(f"Not enough disk space for a checkpoint in '{path}': {gib(free)} free, one checkpoint needs "
                        f"about {gib(needed)} (weights plus optimizer state). {then}")
