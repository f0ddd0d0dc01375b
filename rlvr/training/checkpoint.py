"""Crash-safe checkpoints: an HF-format model directory (loadable with plain transformers) plus trainer
state (optimizer, scheduler, RNG, sampler, step).

A checkpoint is written into a hidden temporary directory, given a manifest (size and sha256 of every
file) and a COMPLETE marker, fsynced, then renamed into place; old ones are renamed aside before they
are deleted. So a kill at any point leaves every `step-N` directory either absent or whole, and a
damaged one (a disk fault, a hand edit) is caught by its manifest when it is resumed from.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.errors import RlvrError
from rlvr.models.loading import save_pretrained
from rlvr.training.resources import gib

STATE_FILE = "trainer_state.pt"
MANIFEST = "MANIFEST.json"
BEST = "best"  # <output_dir>/best: a link to the best model so far (see save_best_model)
BEST_INFO = "best.json"
COMPLETE = "COMPLETE"
_NAME = re.compile(r"^step-(\d+)$")
_LEFTOVER = re.compile(r"^\.(tmp|trash)-")


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _discard(path: Path) -> None:
    """Delete a directory without ever leaving a half-deleted one under its name: rename it aside first."""
    trash = path.with_name(f".trash-{path.name}")
    shutil.rmtree(trash, ignore_errors=True)
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


# A writer that runs out of space says so in its own words (safetensors' SafetensorError, torch.save's RuntimeError):
# a failed write that leaves less than this free is taken as the disk being full.
NEARLY_FULL_BYTES = 2**30


def write_dir_atomically(path: str | Path, fill: Callable[[Path], None]) -> Path:
    """Run `fill` on a hidden sibling directory, fsync what it wrote, then rename it to `path` (replacing an
    existing one), so `path` is either the old directory or the whole new one, never a partial one."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{path.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        for f in tmp.rglob("*"):
            _fsync(f)
        _fsync(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed write gives its space back at once
        raise
    if path.exists():
        _discard(path)
    os.rename(tmp, path)
    _fsync(path.parent)
    return path


def _save_state(directory: Path, state: dict[str, Any]) -> None:
    torch.save(state, directory / STATE_FILE)


def write_manifest(directory: Path) -> None:
    """Record the size and sha256 of every file under `directory` (by relative path)."""
    files = {f.relative_to(directory).as_posix(): {"bytes": f.stat().st_size, "sha256": _sha256(f)}
             for f in sorted(directory.rglob("*")) if f.is_file() and f.name not in (MANIFEST, COMPLETE)}
    (directory / MANIFEST).write_text(json.dumps(files, indent=1))


def _mark_complete(directory: Path, step: int) -> None:
    (directory / COMPLETE).write_text(str(step))


def prune_checkpoints(root: Path, keep_last: int, protected: Collection[str | Path] = ()) -> None:
    """Delete all but the newest `keep_last` checkpoints, never one in `protected`, and the leftovers of
    saves that were interrupted."""
    keep = {Path(p).name for p in protected}
    for old in list_checkpoints(root)[:-keep_last]:
        if old.name not in keep:
            _discard(old)
    for leftover in root.iterdir():
        if _LEFTOVER.match(leftover.name):
            shutil.rmtree(leftover, ignore_errors=True)


def save_checkpoint(root: str | Path, step: int, model, tokenizer, state: dict[str, Any], keep_last: int,
                    protected: Collection[str | Path] = (), model_state: dict[str, torch.Tensor] | None = None) -> Path:
    """Write checkpoint `step-N` under `root` and apply retention (`protected` checkpoints are always kept).
    `model_state`: the full weights when the model's own parameters are shards."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)

    def fill(directory: Path) -> None:
        save_pretrained(model, tokenizer, directory, model_state)
        _save_state(directory, {"rng": rng_state(), **state, "step": step})  # the state's own rng if it has one
        write_manifest(directory)
        _mark_complete(directory, step)

    final = root / f"step-{step:07d}"
    try:
        write_dir_atomically(final, fill)
    except Exception as e:
        free = shutil.disk_usage(root).free
        if not isinstance(e, OSError) and free >= NEARLY_FULL_BYTES:
            raise
        raise RlvrError(f"Could not write checkpoint {final}: {e} ({gib(free)} free on its disk). The "
                        f"earlier checkpoints under {root} are intact; free disk space (or fix the directory) and "
                        f"continue with --resume auto.") from e
    prune_checkpoints(root, keep_last, protected)
    return final


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _NAME.match(p.name) and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def checkpoint_damage(path: str | Path) -> str | None:
    """What is wrong with the checkpoint at `path` (a missing marker, manifest or file, a file whose size or
    sha256 differs from its manifest), or None when it is intact."""
    path = Path(path)
    if not (path / COMPLETE).is_file():
        return f"{path} has no {COMPLETE} marker (its save was interrupted)"
    try:
        files = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return f"{path / MANIFEST} is missing or unreadable"
    for name, expected in files.items():
        f = path / name
        if not f.is_file():
            return f"{f} is missing"
        if f.stat().st_size != expected["bytes"] or _sha256(f) != expected["sha256"]:
            return f"{f} is damaged (its size or sha256 differs from {MANIFEST})"
    if STATE_FILE not in files:
        return f"{path} has no {STATE_FILE}"
    return None


def resolve_resume(resume: str, output_dir: str | Path) -> Path | None:
    """'auto' -> the run's newest intact checkpoint (None when it has none; damaged ones are skipped with a
    warning); otherwise a checkpoint path, which must be intact."""
    if resume == "auto":
        found = list_checkpoints(Path(output_dir) / "checkpoints")
        damaged = []
        for path in reversed(found):
            problem = checkpoint_damage(path)
            if problem is None:
                return path
            damaged.append(problem)
            print(f"warning: skipping damaged checkpoint: {problem}", file=sys.stderr)
        if damaged:
            raise RlvrError(f"--resume auto: every checkpoint of {output_dir} is damaged ({'; '.join(damaged)}). "
                            f"Start a new run in another tracking.output_dir.")
        return None
    if not Path(resume).expanduser().exists():
        raise RlvrError(f"--resume {resume}: no such directory (relative paths are resolved against the working "
                        f"directory {Path.cwd()}). Give a checkpoint directory such as "
                        f"{Path(output_dir) / 'checkpoints' / 'step-0000010'}, or --resume auto for the run's newest.")
    problem = checkpoint_damage(resume)
    if problem is not None:
        raise RlvrError(f"--resume {resume}: not an intact rlvr checkpoint: {problem}. "
                        f"Use --resume auto to pick the newest intact checkpoint of the run, or an older checkpoint.")
    return Path(resume)


def load_state(path: str | Path) -> dict[str, Any]:
    return torch.load(Path(path) / STATE_FILE, weights_only=False)


def save_best_model(output_dir: str | Path, step: int, model, tokenizer, info: dict[str, Any],
                    model_state: dict[str, torch.Tensor] | None = None) -> Path:
    """Keep `model` as the run's best: an HF model directory best-step-N (with best.json: step, metric, value)
    written completely, then the `best` link switched to it in one atomic rename, then the previous best
    removed. Checkpoint retention (keep_last) never sees it; `<output_dir>/best` always holds a whole model."""
    out = Path(output_dir)

    def fill(directory: Path) -> None:
        save_pretrained(model, tokenizer, directory, model_state)
        (directory / BEST_INFO).write_text(json.dumps({"step": step, **info}, indent=2))

    target = write_dir_atomically(out / f"{BEST}-step-{step:07d}", fill)
    link, new_link = out / BEST, out / f".tmp-{BEST}-link"
    previous = link.resolve() if link.is_symlink() else None
    new_link.unlink(missing_ok=True)
    new_link.symlink_to(target.name)
    os.replace(new_link, link)
    _fsync(out)
    if previous is not None and previous != target.resolve():
        _discard(previous)
    return link


def discard_best_model(output_dir: str | Path) -> bool:
    """Remove a best model an earlier run left in `output_dir` (a fresh run must not compare against it)."""
    link = Path(output_dir) / BEST
    if not link.is_symlink():
        return False
    target = link.resolve()
    link.unlink()
    if target.is_dir():
        _discard(target)
    return True


def best_model_info(output_dir: str | Path) -> dict[str, Any] | None:
    """best.json of the run's best model (step, metric, value), or None before one is kept."""
    path = Path(output_dir) / BEST / BEST_INFO
    return json.loads(path.read_text()) if path.is_file() else None
