"""Atomic checkpoints: an HF-format model directory (loadable with plain transformers) plus trainer
state (optimizer, scheduler, RNG, sampler, step). Written to a temporary directory, marked complete,
then renamed into place, so a kill at any point leaves the previous checkpoint intact."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.errors import RlvrError
from rlvr.models import save_pretrained

STATE_FILE = "trainer_state.pt"
BEST = "best"  # <output_dir>/best: a link to the best model so far (see save_best_model)
BEST_INFO = "best.json"
COMPLETE = "COMPLETE"
_NAME = re.compile(r"^step-(\d+)$")


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(root: str | Path, step: int, model, tokenizer, state: dict[str, Any], keep_last: int) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:07d}"
    tmp = root / f".tmp-step-{step:07d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_pretrained(model, tokenizer, tmp)
    torch.save({**state, "step": step, "rng": rng_state()}, tmp / STATE_FILE)
    (tmp / COMPLETE).write_text(str(step))
    for f in tmp.iterdir():
        with f.open("rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    for old in list_checkpoints(root)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _NAME.match(p.name) and (p / COMPLETE).is_file()]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def resolve_resume(resume: str, output_dir: str | Path) -> Path | None:
    """'auto' -> newest complete checkpoint of the run (None when there is none); else a checkpoint path."""
    if resume == "auto":
        found = list_checkpoints(Path(output_dir) / "checkpoints")
        return found[-1] if found else None
    path = Path(resume)
    if not (path / STATE_FILE).is_file() or not (path / COMPLETE).is_file():
        raise RlvrError(
            f"--resume {resume}: not a complete rlvr checkpoint (needs {STATE_FILE} and {COMPLETE}). "
            f"Use --resume auto to pick the newest complete checkpoint of the run."
        )
    return path


def load_state(path: str | Path) -> dict[str, Any]:
    return torch.load(Path(path) / STATE_FILE, weights_only=False)


def save_best_model(output_dir: str | Path, step: int, model, tokenizer, info: dict[str, Any]) -> Path:
    """Keep `model` as the run's best: an HF model directory best-step-N (with best.json: step, metric, value)
    written completely, then the `best` link switched to it in one atomic rename, then the previous best
    removed. Checkpoint retention (keep_last) never sees it; `<output_dir>/best` always holds a whole model."""
    out = Path(output_dir)
    target = out / f"{BEST}-step-{step:07d}"
    tmp = out / f".tmp-{target.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_pretrained(model, tokenizer, tmp)
    (tmp / BEST_INFO).write_text(json.dumps({"step": step, **info}, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    link, new_link = out / BEST, out / f".tmp-{BEST}-link"
    previous = link.resolve() if link.is_symlink() else None
    new_link.unlink(missing_ok=True)
    new_link.symlink_to(target.name)
    os.replace(new_link, link)
    _fsync_dir(out)
    if previous is not None and previous != target.resolve():
        shutil.rmtree(previous, ignore_errors=True)
    return link


def best_model_info(output_dir: str | Path) -> dict[str, Any] | None:
    """best.json of the run's best model (step, metric, value), or None before one is kept."""
    path = Path(output_dir) / BEST / BEST_INFO
    return json.loads(path.read_text()) if path.is_file() else None
