"""Data-parallel plumbing over torch.distributed: start-up from torchrun's environment, which groups a rank
owns, and the reductions the loop needs. Every helper is a no-op in a single process."""

from __future__ import annotations

import datetime
import os
import socket
from typing import Any

import torch
import torch.distributed as dist

from rlvr.watchdog import WATCH


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    """Rank 0: the one process that logs, prints and writes files."""
    return rank() == 0


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_process_group(single: bool = False, timeout_s: float = 1800.0, cuda: bool | None = None) -> None:
    """Join the process group torchrun described (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK): nccl
    on GPUs (`cuda`, default: when available), each rank on cuda:LOCAL_RANK; gloo on CPUs. With `single`, a process
    not started by torchrun forms a group of one (FSDP2 needs a group even alone). Does nothing when already
    initialized."""
    if is_distributed() or not (launched_by_torchrun() or single):
        return
    if not launched_by_torchrun():
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))
    cuda = torch.cuda.is_available() if cuda is None else cuda
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=timeout_s))


def end_processes() -> None:
    """Leave the process group (at the end of a torchrun run)."""
    if is_distributed():
        dist.destroy_process_group()


def _collective(name: str):
    """The watchdog's wait for a collective: what this rank waits for, in a stall line."""
    return WATCH.waiting(f"rank {rank()} of {world_size()}: the other ranks at {name}")


def barrier() -> None:
    if is_distributed():
        with _collective("a barrier"):
            dist.barrier()


def shard(count: int) -> range:
    """This rank's contiguous block of `count` items (groups are never split; the first `count % world` ranks
    take one more)."""
    world, r = world_size(), rank()
    base, extra = divmod(count, world)
    start = r * base + min(r, extra)
    return range(start, start + base + (r < extra))


def all_reduce_tensor(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks, in place (e.g. rows each rank filled, zeros elsewhere); nccl reduces on the GPU."""
    if not is_distributed():
        return t
    if dist.get_backend() == "nccl" and not t.is_cuda:
        t.copy_(all_reduce_tensor(t.cuda()))
    else:
        with _collective("an all-reduce"):
            dist.all_reduce(t)
    return t


def all_reduce_sum(value: float) -> float:
    """Sum a number over ranks (loss denominators are global counts)."""
    return float(all_reduce_tensor(torch.tensor([value], dtype=torch.float64))) if is_distributed() else value


def all_reduce_sums(values: dict[str, float]) -> dict[str, float]:
    """Sum each number of a dict over ranks; every rank must hold the same keys."""
    if not is_distributed() or not values:
        return dict(values)
    keys = sorted(values)
    return dict(zip(keys, all_reduce_tensor(torch.tensor([values[k] for k in keys], dtype=torch.float64)).tolist()))


def all_ranks(flag: bool) -> bool:
    """Whether `flag` holds on every rank (e.g. every rank's generation has finished)."""
    return all_reduce_sum(0.0 if flag else 1.0) == 0.0


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj` (picklable), in rank order."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * world_size()
    with _collective("an all-gather"):
        dist.all_gather_object(out, obj)
    return out


def sum_gradients(model: torch.nn.Module) -> None:
    """Add up gradients over ranks, in one flat all-reduce. Each rank's loss is already divided by global counts,
    so the sum is the gradient of the whole step, independent of how samples are split over ranks and
    micro-batches. A parameter without a gradient on this rank (no samples in the mini-batch) counts as zero."""
    if not is_distributed():
        return
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    with _collective("the gradient all-reduce"):
        dist.all_reduce(flat)
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
        offset += p.numel()
