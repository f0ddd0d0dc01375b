"""The rollout interface: prompts (token ids) in, n completions per prompt out, with the logprob of
each sampled token.

Logprobs convention (shared with the trainer, see `rlvr.logprobs`): a token's logprob is taken from
log_softmax(logits / temperature), the temperature-scaled distribution *before* top-k/top-p
truncation. The trainer computes exactly the same quantity, so with top_p=1 and top_k=0 the
sampling distribution and the one the trainer differentiates are identical (ratio 1 on-policy);
top-k/top-p act as sampling heuristics that the importance ratio does not see (as in verl and TRL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import torch

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
    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        """For each prompt, `params.n` completions; with `generators` (one per prompt), prompt i's samples are drawn
        from generators[i] alone, so they do not depend on which other prompts share the batch."""
        ...


ENGINES: Registry[type] = Registry("rollout engine")


def group_generator(device: torch.device, *key: object) -> torch.Generator:
    """A generator seeded from `key` (e.g. seed, step, round, group index) by a stable hash: the same group gets the
    same random stream in every process."""
    digest = hashlib.blake2b("-".join(map(str, key)).encode(), digest_size=8).digest()
    return torch.Generator(device).manual_seed(int.from_bytes(digest, "little") >> 1)


def generate_batches(engine: RolloutEngine, prompts: list[list[int]], params: SamplingParams,
                     generators: list[torch.Generator] | None = None) -> Iterator[list[list[Completion]]]:
    """The groups of `prompts` one engine batch (`engine.batch_size` sequences, whole groups) at a time, so a
    batch can be scored while the next one is generated. The same samples as one `generate` call, which draws
    batch after batch in the same order; an engine may offer its own `generate_batches`."""
    if hasattr(engine, "generate_batches"):
        yield from engine.generate_batches(prompts, params, generators)
        return
    per_batch = max(1, getattr(engine, "batch_size", len(prompts) * params.n) // params.n)
    for i in range(0, len(prompts), per_batch):
        yield engine.generate(prompts[i : i + per_batch], params,
                              generators[i : i + per_batch] if generators is not None else None)


def make_engine(name: str, model, tokenizer, batch_size: int) -> RolloutEngine:
    return ENGINES.get(name)(model, tokenizer, batch_size=batch_size)
