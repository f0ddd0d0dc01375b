"""Token logprobs (and entropy) of completions under the policy, as the trainer differentiates them.

Same convention as the rollout engines: log_softmax(logits / temperature), no top-k/top-p.
Layout: prompts left-padded to width P, completions right-padded to width C; positions count only
real tokens, so a padded row sees exactly what it saw while sampling.
"""

from __future__ import annotations

import torch

from rlvr.models.head import plain_head
from rlvr.models.vision import model_positions

LEAN_CHUNK_POSITIONS = 256  # token positions per fp32 chunk in the lean path: 256 x 152k vocabulary = 0.16 GB


def _chunk_logits(rows: torch.Tensor, weight: torch.Tensor | None, temperature: float) -> torch.Tensor:
    """A chunk's fp32 logits / temperature (no division pass over the vocabulary at temperature 1)."""
    z = (rows if weight is None else torch.nn.functional.linear(rows, weight)).float()
    return z if temperature == 1.0 else z / temperature


class TokenLogprobs(torch.autograd.Function):
    """logp = z[y] - logsumexp(z) with z = logits / T, computed in fp32 a chunk of positions at a time, and the
    entropy of softmax(z) (no gradient). `x` is the half-precision logits [..., V] (`weight` None), or the hidden
    states [..., H] before the output projection `weight` [V, H]: then each chunk's logits are made here, forward and
    backward, and the logits never exist whole (Cut Cross-Entropy, Wijmans et al. 2024). Only `x` and the fp32
    logsumexp are kept for the backward pass, which rebuilds softmax chunk by chunk: d logp / d logits =
    (onehot(y) - softmax(z)) / T. So no fp32 copy of a micro-batch's logits ever exists, the memory idea of fused
    cross-entropy kernels (Liger Kernel, Hsu et al. 2024) without a kernel of its own."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor | None, targets: torch.Tensor, temperature: float,
                chunk: int):
        flat, ids = x.reshape(-1, x.shape[-1]), targets.reshape(-1)
        lse = torch.empty(ids.shape, dtype=torch.float32, device=x.device)
        logp, entropy = torch.empty_like(lse), torch.empty_like(lse)
        for s in range(0, len(ids), chunk):
            z = _chunk_logits(flat[s : s + chunk], weight, temperature)
            lse[s : s + chunk] = torch.logsumexp(z, -1)
            logp[s : s + chunk] = z.gather(-1, ids[s : s + chunk, None]).squeeze(-1) - lse[s : s + chunk]
            entropy[s : s + chunk] = lse[s : s + chunk] - (torch.softmax(z, -1) * z).sum(-1)
        ctx.save_for_backward(x, weight, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.mark_non_differentiable(entropy)
        return logp.view(targets.shape), entropy.view(targets.shape)

    @staticmethod
    def backward(ctx, grad_logp: torch.Tensor, _grad_entropy: torch.Tensor):
        x, weight, targets, lse = ctx.saved_tensors
        flat, ids, g = x.reshape(-1, x.shape[-1]), targets.reshape(-1), grad_logp.reshape(-1).float()
        grad_x = torch.empty_like(flat)
        # The head's gradient is summed over chunks in its own dtype, as its .grad sums micro-batches.
        grad_w = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        for s in range(0, len(ids), ctx.chunk):
            rows = flat[s : s + ctx.chunk]
            d = torch.exp(_chunk_logits(rows, weight, ctx.temperature) - lse[s : s + ctx.chunk, None])
            d.mul_(-g[s : s + ctx.chunk, None]).scatter_add_(-1, ids[s : s + ctx.chunk, None], g[s : s + ctx.chunk, None])
            d = (d if ctx.temperature == 1.0 else d.div_(ctx.temperature)).to(x.dtype)  # d logp / d logits here
            if weight is None:
                grad_x[s : s + ctx.chunk] = d
                continue
            grad_x[s : s + ctx.chunk] = d @ weight
            if grad_w is not None:
                grad_w.addmm_(d.T, rows)
        return grad_x.view_as(x), grad_w, None, None, None


def completion_logprobs(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_width: int,
    temperature: float,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    chunk_rows: int = 8,
    model_inputs: dict[str, torch.Tensor] | None = None,
    chunked_head: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of the last C tokens of `input_ids` (and per-token entropy when asked; it carries
    gradient only with `entropy_grad`). `model_inputs`: the rows' images (rlvr.models.vision.collate_inputs).

    With `chunked_head` (default: on CUDA), a half-precision text model whose logits are its head's projection
    (`plain_head`: Llama, Qwen2/3, Mistral) goes through `TokenLogprobs` from the decoder's hidden states at
    completion positions, so its logits never exist whole, for one more head product in backward (about 1% of a GPU
    step; on a CPU, where memory is rarely what binds, 30% more time in the head: benchmarks/logprob_memory.py).
    Other half-precision models compute the completion positions' logits (`logits_to_keep`) and take
    `TokenLogprobs` from them (nothing but the logits kept for backward); fp32 logits (CPU runs) take the fp32
    log-softmax a few rows at a time, so full-vocabulary fp32 logits never exist twice.
    """
    inputs = model_inputs or {}
    positions = model_positions(model, input_ids, attention_mask, inputs)
    targets = input_ids[:, -completion_width:]
    split = None if inputs else head_for_chunks(model, chunked_head, input_ids.is_cuda)
    if split is not None:
        hidden = split[0](input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                          use_cache=False).last_hidden_state[:, -completion_width - 1 : -1]
        return head_logprobs(hidden, split[1], targets, temperature, with_entropy, entropy_grad)
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False,
        logits_to_keep=completion_width + 1, **inputs,
    ).logits[:, :-1]
    return token_logprobs(logits, targets, temperature, with_entropy, entropy_grad, chunk_rows)


def head_for_chunks(model, chunked_head: bool | None, on_cuda: bool) -> tuple[torch.nn.Module, torch.nn.Linear] | None:
    """(decoder, head) when token logprobs are to come from hidden states through the head a chunk at a time:
    `chunked_head` asked (None: on CUDA) and the model has a plain head (`plain_head`) in half precision."""
    if not (on_cuda if chunked_head is None else chunked_head):
        return None
    split = plain_head(model)
    return split if split is not None and split[1].weight.dtype in (torch.bfloat16, torch.float16) else None


def head_logprobs(hidden: torch.Tensor, head: torch.nn.Linear, targets: torch.Tensor, temperature: float,
                  with_entropy: bool = False, entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of `targets` from the hidden states [B, C, H] before `head` (and entropy, see
    completion_logprobs): chunk by chunk through `TokenLogprobs`; an entropy with gradient needs the whole logits."""
    if with_entropy and entropy_grad:
        return token_logprobs(torch.nn.functional.linear(hidden, head.weight), targets, temperature, True, True)
    logp, entropy = TokenLogprobs.apply(hidden, head.weight, targets, temperature, LEAN_CHUNK_POSITIONS)
    return logp, (entropy if with_entropy else None)


def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool = False,
    entropy_grad: bool = False, chunk_rows: int = 8,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of `targets` under `logits` [B, C, V] / temperature (and entropy, see completion_logprobs)."""
    if logits.dtype != torch.float32 and not (with_entropy and entropy_grad):
        logp, entropy = TokenLogprobs.apply(logits, None, targets, temperature, LEAN_CHUNK_POSITIONS)
        return logp, (entropy if with_entropy else None)
    logps, entropies = [], []
    for start in range(0, logits.shape[0], chunk_rows):
        scaled = logits[start : start + chunk_rows].float() / temperature
        logp_all = torch.log_softmax(scaled, dim=-1)
        logps.append(logp_all.gather(-1, targets[start : start + chunk_rows, :, None]).squeeze(-1))
        if with_entropy:
            lp = logp_all if entropy_grad else logp_all.detach()
            entropies.append(-(lp.exp() * lp).sum(-1))
    return torch.cat(logps), (torch.cat(entropies) if with_entropy else None)
