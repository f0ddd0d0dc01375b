"""Setting a run up before its first step: seeds, the output directory it may claim (fresh, or resumed), the
settings data parallelism cannot honour, and the optimizer with its learning-rate schedule."""

from __future__ import annotations

import fcntl
import math
import os
import random
import sys
from pathlib import Path
from typing import IO

import numpy as np
import torch

from rlvr.config import OptimConfig, RunConfig
from rlvr.distributed import is_main
from rlvr.errors import ConfigError, RlvrError
from rlvr.training.checkpoint import discard_best_model, list_checkpoints, resolve_resume
from rlvr.training.resources import ensure_writable_dir


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def lr_lambda(schedule: str, warmup: int, total: int):
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def check_data_parallel(cfg: RunConfig, strategy: str, world: int) -> None:
    """Settings a run over `world` data-parallel processes cannot honour, named before any work is done."""
    if world == 1:
        return
    if cfg.data.prompts_per_step % world:
        raise ConfigError(f"data.prompts_per_step={cfg.data.prompts_per_step} must be a multiple of the number of "
                          f"data-parallel processes ({world}): each process generates whole groups.")
    if cfg.rollout.seed_per_group is False:
        raise ConfigError("rollout.seed_per_group=false cannot be used with several processes: each group must be "
                          "sampled from its own generator. Leave it unset or set it to true.")
    if strategy == "fsdp2" and cfg.optim.mini_batches > 1:
        raise ConfigError("optim.mini_batches > 1 is not supported with distributed.strategy=fsdp2 on several "
                          "processes (ranks could get unequal mini-batches); use 1, or distributed.strategy=ddp.")


def claim_output_dir(out: Path, resume: str | None) -> Path | None:
    """The checkpoint to resume from (None: a fresh run), after making sure the run writes nowhere it must not:
    a fresh run never overwrites an earlier run's checkpoints or metrics."""
    resume_path = resolve_resume(resume, out) if resume else None
    if resume == "auto" and resume_path is None and (out / "metrics.jsonl").is_file():
        raise RlvrError(f"--resume auto: {out} holds an earlier run (metrics.jsonl) but no checkpoint to "
                        "continue from; starting again would overwrite its metrics. Start a new run without "
                        "--resume (in another tracking.output_dir to keep this one), or set "
                        "checkpoint.every_steps so the next run can be resumed.")
    existing = list_checkpoints(out / "checkpoints")
    if existing and resume_path is None:
        raise RlvrError(
            f"{out} already holds checkpoints (newest {existing[-1].name}). Continue that run with "
            f"--resume auto, or choose another tracking.output_dir."
        )
    ensure_writable_dir(out)
    if is_main():
        hold_output_dir(out)
    if is_main() and resume_path is None and discard_best_model(out):
        print(f"note: removed the best model an earlier, checkpoint-less run left in {out}", file=sys.stderr)
    return resume_path


LOCK_FILE = ".rlvr-run.lock"
_held: dict[Path, IO[str]] = {}  # output dirs this process holds (a later Trainer in the same process may reuse one)


def hold_output_dir(out: Path) -> None:
    """Hold an exclusive lock on `out` for this process, or fail naming the process that holds it: two runs writing
    one directory interleave their metrics and overwrite each other's checkpoints. An flock, so a run that dies
    (even by SIGKILL) frees the directory for `--resume auto` at once."""
    key = out.resolve()
    if key in _held:
        return
    handle = open(key / LOCK_FILE, "a+")  # noqa: SIM115 (held open for the run's life)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = named_holder(handle)
        handle.close()
        raise RlvrError(f"{out} is in use by another run ({holder}) that is still writing to it. Wait for it to "
                        "finish or stop it (it checkpoints on SIGINT or SIGTERM) before resuming, or choose another "
                        "tracking.output_dir.") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
    handle.flush()
    _held[key] = handle


def output_dir_holder(out: Path) -> str | None:
    """Who holds `out` (its lock file's "pid P on HOST"; this process too), or None when no live process does: for
    tools that would delete or reuse a run's directory and must leave one in use alone."""
    lock = out / LOCK_FILE
    if not lock.exists():
        return None
    with open(lock) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return named_holder(handle)
    return None


def named_holder(handle) -> str:
    """The holder a lock file names (written by `hold_output_dir`)."""
    handle.seek(0)
    return handle.read().strip() or "another process"


def release_output_dir(out: Path) -> None:
    """Let other runs write `out` again (the end of `Trainer.fit`)."""
    handle = _held.pop(out.resolve(), None)
    if handle is not None:
        handle.close()


def make_optimizer(model, o: OptimConfig, steps: int, fused: bool) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the trainable parameters (`fused`: one kernel per step, on CUDA) and its schedule over every
    optimizer update of the run (steps x ppo_epochs x mini_batches)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay, fused=fused or None)
    total_updates = steps * o.ppo_epochs * o.mini_batches
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(o.schedule, o.warmup_steps, total_updates))
