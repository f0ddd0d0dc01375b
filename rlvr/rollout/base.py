"""The rollout interface: prompts (token ids) in, n completions per prompt out, with the logprob of
each sampled token.

Logprobs convention (shared with the trainer, see `rlvr.logprobs`): a token's logprob is taken from
log_softmax(logits / temperature), the temperature-scaled distribution *before* top-k/top-p
truncation. The trainer computes exactly the same quantity, so with top_p=1 and top_k=0 the
sampling distribution and the one the trainer differentiates are identical (ratio 1 on-policy);
top-k/top-p act as sampling heuristics that the importance ratio does not see (as in verl and TRL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rlvr.registry import Registry


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    min_new_tokens: int = 0  # EOS is not sampled before this many tokens (fixed-length benchmarks)
    stop: list[str] = field(default_factory=list)
    greedy: bool = False
    return_entropy: bool = False  # per-token entropy costs a full-vocabulary pass per step: only when needed


@dataclass
class Completion:
    token_ids: list[int]
    text: str
    logprobs: list[float]
    truncated: bool  # hit max_new_tokens before EOS or a stop string
    entropies: list[float] = field(default_factory=list)  # temperature-scaled, per token (if asked for)


class RolloutEngine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[list[Completion]]:
        """For each prompt, `params.n` completions."""
        ...


ENGINES: Registry[type] = Registry("rollout engine")


def make_engine(name: str, model, tokenizer, batch_size: int) -> RolloutEngine:
    return ENGINES.get(name)(model, tokenizer, batch_size=batch_size)
