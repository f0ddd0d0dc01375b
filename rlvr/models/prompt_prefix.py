"""One prompt forward for all of a prompt's samples when the trainer scores completions.

GRPO draws n completions per prompt, and the per-sample forward computes each prompt n times. Here each distinct
prompt of a batch goes through the model once; every sample's completion forward reads its prompt's keys and values
from a cache (Prefix Grouper, Liu et al. 2025, "Efficient GRPO Training through Shared-Prefix Forward"). With
gradients, the prompt's keys, values and last logits (or hidden state) are made leaves: each micro-batch's backward leaves their
gradient there, and `backward()` carries the sum through the prompt forward once, so the parameter gradients are the
per-sample forward's (up to float rounding), whatever the micro-batches.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from rlvr.models.kv_cache import cache_keyword
from rlvr.models.logprobs import head_for_chunks, head_logprobs, token_logprobs


def shares_prompt_forward(model) -> bool:
    """Whether the model's attention is full causal attention in every layer with a plain dynamic cache (no sliding
    window, no linear-attention or recurrent layers) and trains without activation checkpointing (which turns the
    cache off): the models a cached prompt reproduces exactly."""
    config = getattr(model, "config", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and any(t != "full_attention" for t in layer_types):
        return False
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return False
    checkpointing = ("is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing")
                     else "is_gradient_checkpointing")  # renamed in transformers 5.2x
    return not getattr(model, checkpointing, False)


class PromptPrefix:
    """The keys/values and last-position logits of U distinct prompts (left-padded `prompt_ids` [U, P] with
    `prompt_mask`), computed `chunk` prompts per forward. With a chunked head (`head_for_chunks`: `chunked_head`, by
    default on CUDA) the last position's hidden state instead, and the completions' logprobs come from hidden states
    through the head a chunk at a time, as in `completion_logprobs`."""

    def __init__(self, model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, grad: bool, chunk: int,
                 chunked_head: bool | None = None):
        self.model, self.mask = model, prompt_mask
        self.split = head_for_chunks(model, chunked_head, prompt_ids.is_cuda)
        self.lengths = prompt_mask.sum(-1)
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        self._sources: list[torch.Tensor] = []  # the prompt forward's outputs, in the graph (with grad)
        keys, values, last = [], [], []
        for s in range(0, len(prompt_ids), chunk):
            cache = DynamicCache()
            with torch.set_grad_enabled(grad):
                final = self._forward(input_ids=prompt_ids[s : s + chunk], attention_mask=prompt_mask[s : s + chunk],
                                      position_ids=positions[s : s + chunk], cache=cache, keep=1)[:, -1]
            if any(type(layer) is not DynamicLayer for layer in cache.layers):
                raise TypeError(f"{type(model).__name__}: a cache layer is not a plain DynamicLayer; "
                                f"train it with optim.share_prompt_forward=false")
            keys.append([layer.keys for layer in cache.layers])
            values.append([layer.values for layer in cache.layers])
            last.append(final)
            if grad:
                self._sources += [*keys[-1], *values[-1], final]
        self.keys = [self._leaf(torch.cat(ks), grad) for ks in zip(*keys)]
        self.values = [self._leaf(torch.cat(vs), grad) for vs in zip(*values)]
        self.last = self._leaf(torch.cat(last), grad)  # logits, or hidden states
        self._chunks = [len(c) for c in last]

    @staticmethod
    def _leaf(t: torch.Tensor, grad: bool) -> torch.Tensor:
        return t.detach().requires_grad_() if grad else t

    def _forward(self, cache: DynamicCache, keep: int, **inputs) -> torch.Tensor:
        """The last `keep` positions' logits, or hidden states with a chunked head."""
        if self.split is not None:
            decoder = self.split[0]
            return decoder(**inputs, use_cache=True, **{cache_keyword(decoder): cache}).last_hidden_state[:, -keep:]
        return self.model(**inputs, use_cache=True, logits_to_keep=keep, **{cache_keyword(self.model): cache}).logits

    def completion_logprobs(self, prompt_index: torch.Tensor, completion_ids: torch.Tensor,
                            completion_attention: torch.Tensor, temperature: float, with_entropy: bool = False,
                            entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As `completion_logprobs` for rows whose prompt is `prompt_index` [B] (into this prefix) and whose
        completion region is `completion_ids` [B, C] (right-padded, attention `completion_attention`)."""
        out = self.last[prompt_index][:, None]  # predicts each completion's first token
        width = completion_ids.shape[1]
        if width > 1:
            inputs, attention = completion_ids[:, :-1], completion_attention[:, :-1]
            cache = DynamicCache(ddp_cache_data=[(k[prompt_index], v[prompt_index])
                                                 for k, v in zip(self.keys, self.values)])
            positions = self.lengths[prompt_index, None] + attention.cumsum(-1) - 1
            rest = self._forward(input_ids=inputs, attention_mask=torch.cat([self.mask[prompt_index], attention], 1),
                                 position_ids=positions.clamp(min=0), cache=cache, keep=width - 1)
            out = torch.cat([out, rest], 1)
        if self.split is not None:  # hidden states
            return head_logprobs(out, self.split[1], completion_ids, temperature, with_entropy, entropy_grad)
        return token_logprobs(out, completion_ids, temperature, with_entropy, entropy_grad)

    def backward(self) -> None:
        """Carry the gradient the completion forwards left on the prompt's keys, values and last output through the
        prompt forward (once, after the last micro-batch's backward)."""
        leaves = [*self.keys, *self.values, self.last]
        pairs = []
        for i, leaf in enumerate(leaves):
            if leaf.grad is None:
                continue
            parts = leaf.grad.split(self._chunks)
            pairs += [(self._sources[c * len(leaves) + i], part) for c, part in enumerate(parts)]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])
        self._sources = []
