"""Regional compilation of a policy's decoder layers for the training passes (`model.compile_layers`).

Each decoder layer's forward goes through `torch.compile` (with dynamic shapes, so micro-batches of any length
reuse one graph; layers of one class share the compiled code, so compile time does not grow with depth, the
"regional compilation" of the PyTorch recipes). Inductor fuses the elementwise work between the matmuls (norms,
RoPE, the gated activation, residual adds) in forward and backward, which on a GPU cuts kernel launches and
memory traffic. Only calls with gradient take the compiled path: generation and no-grad scoring run the layers
eagerly (the static engine calls the layers' submodules anyway; the hf engine's growing KV cache would recompile).
Activation checkpointing wraps the compiled forward, so the recomputation in backward is compiled too.
"""

from __future__ import annotations

from functools import partial

import torch
from transformers.modeling_layers import GradientCheckpointingLayer

from rlvr.errors import ConfigError


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's decoder layers: the modules transformers builds as GradientCheckpointingLayer."""
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def _by_grad_mode(compiled, layer: torch.nn.Module, *args, **kwargs):
    return (compiled if torch.is_grad_enabled() else type(layer).forward)(layer, *args, **kwargs)


def compile_training_layers(model: torch.nn.Module) -> int:
    """Route each decoder layer's forward with gradient through torch.compile (the class's forward, compiled once
    per class, with the layer as its argument, so a deep copy of the model calls its own layers); returns how many
    layers."""
    layers = decoder_layers(model)
    if not layers:
        raise ConfigError(f"model.compile_layers=true compiles the policy's decoder layers, but {type(model).__name__} "
                          f"has none that transformers marks as such (GradientCheckpointingLayer). Set "
                          f"model.compile_layers=false.")
    compiled = {cls: torch.compile(cls.forward, dynamic=True) for cls in {type(layer) for layer in layers}}
    for layer in layers:
        layer.forward = partial(_by_grad_mode, compiled[type(layer)], layer)
    return len(layers)
