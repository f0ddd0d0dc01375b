"""Data-parallel plumbing over torch.distributed; every helper is a no-op in a single process."""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def all_reduce_sum(value: float) -> float:
    """Sum a number over ranks (loss denominators are global counts)."""
    if not is_distributed():
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t)


def sum_gradients(model: torch.nn.Module) -> None:
    """Add up gradients over ranks. Each rank's loss is already divided by global counts, so the sum is the
    gradient of the whole step, independent of how samples are split over ranks and micro-batches."""
    if not is_distributed():
        return
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
