"""Where a causal LM's logits come from: the transformers model inside a peft wrapper, and its output projection
when the logits are nothing but that projection of the decoder's last hidden states."""

from __future__ import annotations

import torch

# Families whose causal-LM forward is `logits = lm_head(model(...).last_hidden_state)`, with no scaling or
# soft-capping after the head (unlike, e.g., Gemma 2's final_logit_softcapping or Cohere's logit_scale).
PLAIN_HEAD_FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


def causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers causal LM inside a peft wrapper (its LoRA layers still apply their adapters), or `model`."""
    get_base = getattr(model, "peft_config", None) is not None and getattr(model, "get_base_model", None)
    return get_base() if get_base else model


def plain_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Linear] | None:
    """(decoder, lm_head) of `model` when its logits are exactly `lm_head(decoder(...).last_hidden_state)` and the
    head is a bias-free `nn.Linear` over ordinary tensors; None otherwise (another family, a LoRA-wrapped head, or
    FSDP2-sharded weights, which only the root module's forward gathers)."""
    from torch.distributed.tensor import DTensor

    lm = causal_lm(model)
    if getattr(getattr(lm, "config", None), "model_type", None) not in PLAIN_HEAD_FAMILIES:
        return None
    head, decoder = lm.get_output_embeddings(), getattr(lm, "model", None)
    if type(head) is not torch.nn.Linear or head.bias is not None or isinstance(head.weight, DTensor) or decoder is None:
        return None
    return decoder, head
