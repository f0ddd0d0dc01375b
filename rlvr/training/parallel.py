"""How the policy (and the frozen reference) is spread over data-parallel ranks.

- `ddp`: every rank holds the whole model (on cuda:LOCAL_RANK when it has a GPU, else the CPU) and the
  optimizer state; after a mini-batch's micro-batches are all backwarded, its gradients are summed over ranks in
  one flat all-reduce (`sum_gradients`). Summing, not averaging, because each rank's loss is already divided by
  the global token/sequence counts. Any split of samples over ranks (even none on a rank) stays exact.
- `fsdp2`: torch's `fully_shard` on each decoder layer and the root, so parameters, gradients and optimizer
  state are sharded over ranks; gradients reduce-scattered as sums (divide factor 1) on the last micro-batch.
  Every rank must run the same number of forwards, so generation stops only when every rank is done.

Checkpoint state goes through torch.distributed.checkpoint's full state dicts (parameter names as keys), so a
run saved with N processes resumes with M, under either strategy.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from rlvr.distributed import init_process_group, sum_gradients, world_size
from rlvr.models.loading import resolve_device

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def resolve_strategy(name: str, device: str = "auto") -> str:
    """'auto' -> fsdp2 when several torchrun processes train on CUDA devices, ddp otherwise (in one process that is
    the plain model, unwrapped)."""
    if name != "auto":
        return name
    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return "fsdp2" if resolve_device(device).type == "cuda" and several else "ddp"


class Replicated:
    """`ddp`: a full replica per rank, gradients summed after backward."""

    lockstep_forward = False  # ranks may run different numbers of forwards
    shares_prompt_forward = True  # a backward through a prompt forward after the micro-batches' (BatchScorer)

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.device = device
        self.model = model.to(device)

    def wrap_frozen(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.to(self.device)

    def before_backward(self, last: bool) -> None:
        """Told before each micro-batch's backward whether it is the mini-batch's last."""

    def finish_gradients(self) -> None:
        sum_gradients(self.model)

    def model_state(self) -> dict[str, torch.Tensor] | None:
        """The full weights to save, or None to let the model save its own (a replica holds them all)."""
        return None

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return get_optimizer_state_dict(self.model, optimizer, options=FULL)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        set_optimizer_state_dict(self.model, optimizer, state, options=StateDictOptions(full_state_dict=True))


class FullyShardedV2(Replicated):
    """`fsdp2`: parameters, gradients and optimizer state sharded with `fully_shard`."""

    lockstep_forward = True
    # A prompt forward's backward after the last micro-batch's would come after fully_shard's reduce-scatter, and the
    # number of prompt forwards differs between ranks.
    shares_prompt_forward = False

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.device = device
        self.model = self.wrap_frozen(model)
        for module in self._sharded(self.model):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no pre-multiplied sum)

    @staticmethod
    def _sharded(model: torch.nn.Module) -> list:
        from torch.distributed.fsdp import FSDPModule

        return [m for m in model.modules() if isinstance(m, FSDPModule)]

    def wrap_frozen(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(self.device.type, (world_size(),))
        layers = set(getattr(model, "_no_split_modules", None) or [])  # HF: the decoder layer classes
        for module in list(model.modules()):
            if type(module).__name__ in layers:
                fully_shard(module, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    def _reshard(self) -> None:
        """Back to sharded parameters: after forwards without a backward (generation, evaluation) the root module
        keeps its gathered ones, which are not the parameters the optimizer holds."""
        for module in self._sharded(self.model):
            module.reshard()

    def before_backward(self, last: bool) -> None:
        self.model.set_requires_gradient_sync(last)

    def finish_gradients(self) -> None:
        """fully_shard reduce-scattered the gradients during the last backward."""

    def model_state(self) -> dict[str, torch.Tensor]:
        """The full weights (on rank 0; empty elsewhere), without second names of tied weights (lm_head tied to the
        embeddings), as save_pretrained writes them."""
        self._reshard()
        state = get_model_state_dict(self.model, options=FULL)
        tied = ({n for n, _ in self.model.named_parameters(remove_duplicate=False)}
                - {n for n, _ in self.model.named_parameters()})
        return {k: v for k, v in state.items() if k not in tied}

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        self._reshard()
        return super().optimizer_state(optimizer)


def make_parallel(model: torch.nn.Module, strategy: str, device: str = "auto") -> Replicated:
    """Place `model` on `device` (model.device, see rlvr.models.loading.resolve_device) for data-parallel training under
    `strategy` ('ddp' or 'fsdp2', see resolve_strategy), after `start_processes`."""
    return (FullyShardedV2 if strategy == "fsdp2" else Replicated)(model, resolve_device(device))


def start_processes(strategy: str, device: str = "auto") -> str:
    """Join the process group torchrun started (or, for fsdp2 in a plain process, form a group of one: FSDP2 on a
    single GPU runs over NCCL); returns the resolved strategy."""
    strategy = resolve_strategy(strategy, device)
    init_process_group(single=strategy == "fsdp2", cuda=resolve_device(device).type == "cuda")
    return strategy
