"""Token logprobs (and entropy) of completions under the policy, as the trainer differentiates them.

Same convention as the rollout engines: log_softmax(logits / temperature), no top-k/top-p.
Layout: prompts left-padded to width P, completions right-padded to width C; positions count only
real tokens, so a padded row sees exactly what it saw while sampling.
"""

from __future__ import annotations

import torch


def completion_logprobs(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_width: int,
    temperature: float,
    with_entropy: bool = False,
    entropy_grad: bool = False,
    chunk_rows: int = 8,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [B, C] of the last C tokens of `input_ids` (and per-token entropy when asked; it carries
    gradient only with `entropy_grad`).

    Logits are computed only for completion positions (`logits_to_keep`), and the fp32 log-softmax is
    taken a few rows at a time so full-vocabulary fp32 logits never exist for the whole micro-batch.
    """
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=False,
        logits_to_keep=completion_width + 1,
    ).logits[:, :-1]
    targets = input_ids[:, -completion_width:]
    logps, entropies = [], []
    for start in range(0, logits.shape[0], chunk_rows):
        scaled = logits[start : start + chunk_rows].float() / temperature
        logp_all = torch.log_softmax(scaled, dim=-1)
        logps.append(logp_all.gather(-1, targets[start : start + chunk_rows, :, None]).squeeze(-1))
        if with_entropy:
            lp = logp_all if entropy_grad else logp_all.detach()
            entropies.append(-(lp.exp() * lp).sum(-1))
    return torch.cat(logps), (torch.cat(entropies) if with_entropy else None)
