"""One decode step's token choice, shared by the engines: temperature, min-new-tokens, top-k/top-p, the token's
logprob under log_softmax(logits / temperature) (before truncation, the convention of rlvr.rollout.base), its
entropy when asked, and the stop-string check over the recent tokens."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.rollout.base import SamplingParams


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Mask logits outside the top-k tokens and outside the smallest set with cumulative probability >= top_p."""
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def banned_tokens(step: int, params: SamplingParams, eos: torch.Tensor) -> torch.Tensor | None:
    """Token ids that may not be drawn at `step`: EOS before min_new_tokens and `suppress_tokens` (sampling
    constraints, like top-k: not in the logprobs); None when there are none."""
    banned = [eos] if step < params.min_new_tokens else []
    if params.suppress_tokens:
        banned.append(torch.tensor(params.suppress_tokens, device=eos.device))
    return torch.cat(banned) if len(banned) > 1 else (banned[0] if banned else None)


def next_tokens(logits: torch.Tensor, step: int, params: SamplingParams, eos: torch.Tensor,
                draw: Callable[[torch.Tensor], torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The next token of every row (drawn by `draw` from the truncated probabilities, or greedy), its logprob under
    log_softmax(logits / temperature) before top-k/top-p and min-new-tokens, and that distribution's entropy when
    asked.

    At a 150k vocabulary the passes over the [rows, vocabulary] logits weigh on a decode step beside the model, so
    plain sampling (no top-k/top-p), the rollout's case, makes few: one log-softmax in float32 (straight from
    half-precision logits at temperature 1), its exp, which is both the entropy's weights and the probabilities
    `draw` gets (banned tokens zeroed in place), and the entropy's product."""
    banned = banned_tokens(step, params, eos)
    if params.temperature == 1.0:
        logp_all = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
    else:
        logp_all = torch.log_softmax(logits.float() / params.temperature, dim=-1)
    plain = not (params.greedy or params.top_k or params.top_p < 1.0)
    probs = logp_all.exp() if plain or params.return_entropy else None
    entropy = -(probs * logp_all).sum(-1) if params.return_entropy else None
    if not plain:
        scaled = logits.float() / params.temperature
        if banned is not None:
            scaled = scaled.index_fill(-1, banned, float("-inf"))
        if params.greedy:
            tok = scaled.argmax(-1)
        else:
            tok = draw(filter_logits(scaled, params.top_k, params.top_p).softmax(-1))
    else:
        if banned is not None:
            probs.index_fill_(-1, banned, 0.0)
        tok = draw(probs)
    logp = logp_all.gather(-1, tok[:, None]).squeeze(-1)
    return tok, logp, entropy


def stop_window(stops: list[str]) -> int:
    """How many recent tokens can hold a stop string: every token is at least one character, plus a little slack."""
    return max(len(s) for s in stops) + 4


def stop_reached(tokenizer, recent: torch.Tensor, finished: torch.Tensor, stops: list[str]) -> torch.Tensor:
    """Rows (not yet finished) whose recent tokens [rows, T] decode to text containing a stop string."""
    recent = recent[:, -stop_window(stops) :].tolist()
    hit = torch.zeros_like(finished)
    for row in (~finished).nonzero().flatten().tolist():
        text = tokenizer.decode(recent[row], skip_special_tokens=True)
        hit[row] = any(s in text for s in stops)
    return hit
