"""The `rlpr` reward: the policy's own mean per-token probability of the reference answer after its reasoning
(Yu et al. 2025, "RLPR: Extrapolating RLVR to General Domains without Verifiers", arXiv 2506.18254), for answers no
rule checker can score.

The reasoning z is the completion up to its last answer marker (all of it when it has none); with x the prompt
and y* the reference's tokens,
    r   = 1/|y*| sum_t p_theta(y*_t | x, z, marker, y*_<t)        (mean probability, not log-probability)
    r'  = the same without the reasoning:  p_theta(y*_t | x, marker, y*_<t)
    r^  = clip(r - r', 0, 1)                                       (debiasing; `debias: false` keeps r)
The prompts whose rewards barely vary are dropped by the `reward_std` group filter (data.filter), RLPR's
standard-deviation filter.

It scores with the policy, so it cannot run in a reward worker: the trainer lends its model to the reward
composer (`RewardComposer.attach_policy`), which calls `rlpr_rewards` in the scoring thread of the trainer's
process, under no_grad, with the weights of the step being trained (one extra forward over completion-length
sequences, no second model). It needs a single-process run (no FSDP/DDP ranks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.config import RlprSettings
from rlvr.models.prompts import prompt_key
from rlvr.rewards.loading import register_reward


@dataclass
class Policy:
    """What a policy reward needs from the trainer: the model, its tokenizer and the prompt encoder the rollout
    uses (prompt -> token ids, chat template included)."""

    model: Any
    tokenizer: Any
    encode: Callable[[Any], list[int]]


def mean_target_probability(model, rows: list[tuple[list[int], list[int]]], batch_size: int) -> list[float]:
    """For each (context ids, target ids): the mean over target tokens of p(target_t | context, target_<t) under
    `model` at temperature 1 (right padded; positions count real tokens)."""
    import torch

    device = next(model.parameters()).device
    out: list[float] = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        seqs = [ctx + tgt for ctx, tgt in chunk]
        width = max(len(s) for s in seqs)
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits.float()
        logp = torch.log_softmax(logits, -1)
        for b, (ctx, tgt) in enumerate(chunk):
            positions = torch.arange(len(ctx) - 1, len(ctx) + len(tgt) - 1, device=device)
            probs = logp[b, positions, torch.tensor(tgt, device=device)].exp()
            out.append(float(probs.mean()))
    return out


def reasoning_of(completion: str, marker: str) -> str:
    """The completion up to its last `marker` (the whole completion when it has none)."""
    at = completion.rfind(marker)
    return completion if at < 0 else completion[:at]


@register_reward("rlpr", RlprSettings, batched=True, uses_policy=True)
def rlpr_rewards(policy: Policy, prompts: list, completions: list[str], references: list[Any],
                 settings: RlprSettings) -> list[float]:
    """RLPR's probability reward of each completion (see the module); computed with the trainer's policy."""
    tok = policy.tokenizer
    marker_ids = tok.encode(settings.marker, add_special_tokens=False)
    encoded: dict[str, list[int]] = {}
    rows, plain_rows, keys = [], {}, []
    for prompt, completion, reference in zip(prompts, completions, references):
        if reference is None or not str(reference).strip():
            raise ValueError("rlpr: a problem without a reference answer (the 'answer' field) cannot be scored")
        key = (prompt_key(prompt), str(reference))
        prompt_ids = encoded.setdefault(key[0], list(policy.encode(prompt)))
        target = tok.encode(str(reference), add_special_tokens=False)
        reasoning = tok.encode(reasoning_of(completion, settings.marker) + settings.marker, add_special_tokens=False)
        rows.append((prompt_ids + reasoning, target))
        plain_rows.setdefault(key, (prompt_ids + marker_ids, target))
        keys.append(key)
    rewards = mean_target_probability(policy.model, rows, settings.batch_size)
    if not settings.debias:
        return rewards
    unique = list(plain_rows)
    plain = dict(zip(unique, mean_target_probability(policy.model, [plain_rows[k] for k in unique],
                                                     settings.batch_size)))
    return [min(1.0, max(0.0, r - plain[k])) for r, k in zip(rewards, keys)]
