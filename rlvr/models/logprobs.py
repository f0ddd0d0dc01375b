"""Token logprobs (and entropy) of completions under the policy, as the trainer differentiates them.

Same convention as the rollout engines: log_softmax(logits / temperature), no top-k/top-p.
Layout: prompts left-padded to width P, completions right-padded to width C; positions count only
real tokens, so a padded row sees exactly what it saw while sampling.
"""

from __future__ import annotations

import torch

from rlvr.models.vision import model_positions

LEAN_CHUNK_POSITIONS = 1024  # token positions per fp32 chunk in the lean path: 1024 x 152k vocabulary = 0.6 GB


class TokenLogprobs(torch.autograd.Function):
    """logp = z[y] - logsumexp(z) with z = logits / T, computed in fp32 a chunk of positions at a time, and the
    entropy of softmax(z) (no gradient). Only the half-precision logits and the fp32 logsumexp are kept for the
    backward pass, which rebuilds softmax chunk by chunk: d logp / d logits = (onehot(y) - softmax(z)) / T. So no
    fp32 copy of a micro-batch's logits ever exists, the memory idea of fused cross-entropy kernels (Liger Kernel,
    Hsu et al. 2024) without fusing the head."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, temperature: float, chunk: int):
        flat, ids = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        lse = torch.empty(ids.shape, dtype=torch.float32, device=logits.device)
        logp, entropy = torch.empty_like(lse), torch.empty_like(lse)
        for s in range(0, len(ids), chunk):
            z = flat[s : s + chunk].float() / temperature
            lse[s : s + chunk] = torch.logsumexp(z, -1)
            logp[s : s + chunk] = z.gather(-1, ids[s : s + chunk, None]).squeeze(-1) - lse[s : s + chunk]
            entropy[s : s + chunk] = lse[s : s + chunk] - (torch.softmax(z, -1) * z).sum(-1)
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.mark_non_differentiable(entropy)
        return logp.view(targets.shape), entropy.view(targets.shape)

    @staticmethod
    def backward(ctx, grad_logp: torch.Tensor, _grad_entropy: torch.Tensor):
        logits, targets, lse = ctx.saved_tensors
        flat, ids, g = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), grad_logp.reshape(-1).float()
        grad = torch.empty_like(flat)
        for s in range(0, len(ids), ctx.chunk):
            z = flat[s : s + ctx.chunk].float() / ctx.temperature
            d = torch.exp(z - lse[s : s + ctx.chunk, None]).mul_(-g[s : s + ctx.chunk, None])
            d.scatter_add_(-1, ids[s : s + ctx.chunk, None], g[s : s + ctx.chunk, None])
            grad[s : s + ctx.chunk] = d.div_(ctx.temperature)
        return grad.view_as(logits), None, None, None


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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of the last C tokens of `input_ids` (and per-token entropy when asked; it carries
    gradient only with `entropy_grad`). `model_inputs`: the rows' images (rlvr.models.vision.collate_inputs).

    Logits are computed only for completion positions (`logits_to_keep`). Half-precision logits go through
    `TokenLogprobs` (fp32 a chunk at a time, nothing but the logits kept for backward); fp32 logits (CPU runs)
    take the fp32 log-softmax a few rows at a time, so full-vocabulary fp32 logits never exist twice.
    """
    inputs = model_inputs or {}
    positions = model_positions(model, input_ids, attention_mask, inputs)
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False,
        logits_to_keep=completion_width + 1, **inputs,
    ).logits[:, :-1]
    return token_logprobs(logits, input_ids[:, -completion_width:], temperature, with_entropy, entropy_grad,
                          chunk_rows)


def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool = False,
    entropy_grad: bool = False, chunk_rows: int = 8,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of `targets` under `logits` [B, C, V] / temperature (and entropy, see completion_logprobs)."""
    if logits.dtype != torch.float32 and not (with_entropy and entropy_grad):
        logp, entropy = TokenLogprobs.apply(logits, targets, temperature, LEAN_CHUNK_POSITIONS)
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
