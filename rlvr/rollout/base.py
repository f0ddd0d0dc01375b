"""The rollout interface: prompts (token ids) in, n completions per prompt out, with the logprob of
each sampled token.

Logprobs convention (shared with the trainer, see `rlvr.models.logprobs`): a token's logprob is taken from
log_softmax(logits / temperature), the temperature-scaled distribution *before* top-k/top-p
truncation. The trainer computes exactly the same quantity, so with top_p=1 and top_k=0 the
sampling distribution and the one the trainer differentiates are identical (ratio 1 on-policy);
top-k/top-p act as sampling heuristics that the importance ratio does not see (as in verl and TRL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from rlvr.errors import ConfigError
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
    suppress_tokens: tuple[int, ...] = ()  # never sampled (a VLM's image placeholders); not in the logprobs


@dataclass
class Completion:
    token_ids: list[int]
    text: str
    logprobs: list[float]
    truncated: bool  # hit max_new_tokens before EOS or a stop string
    entropies: list[float] = field(default_factory=list)  # temperature-scaled, per token (if asked for)
    # Multi-turn episodes (rlvr.rollout.episodes): per token, True where the policy sampled it and False where the
    # environment wrote it (None: every token is the policy's); logprobs and entropies are 0 on environment tokens.
    policy_mask: list[bool] | None = None
    fields: dict = field(default_factory=dict)  # handed to reward functions besides the text (an episode's verdict)
    # Tree rollouts (rlvr.rollout.tree): its root, then its child index at each boundary; and the tokens the engine
    # decoded for it alone (a leaf shares its prefix with its siblings; None: all of its tokens).
    tree_path: tuple[int, ...] = ()
    decoded_tokens: int | None = None
    # The part the policy plays in this sample (docs/self_play.md): its own (a game's seat), or once its group is
    # collected (rlvr.rollout.steps.Group) its problem's where it has none of its own
    role: str | None = None
    # Process credit (rlvr.rollout.process_rewards): (token index, reward) of each scored span's last token; None when
    # the run scores no spans
    span_rewards: tuple[tuple[int, float], ...] | None = None

    @property
    def policy_tokens(self) -> int:
        """How many of the tokens the policy sampled."""
        return len(self.token_ids) if self.policy_mask is None else sum(self.policy_mask)

    @property
    def decoded(self) -> int:
        """How many tokens the engine decoded for this completion alone."""
        return self.policy_tokens if self.decoded_tokens is None else self.decoded_tokens

    def reward_fields(self, max_new_tokens: int) -> dict:
        """What every reward function is handed about this completion besides its text."""
        return {"completion_tokens": self.policy_tokens, "truncated": self.truncated, "max_new_tokens": max_new_tokens,
                **self.fields}


@dataclass(kw_only=True)
class TokenSequence:
    """Token ids built only by appending, with per token whether the policy sampled it (else the environment wrote
    it), its sampling logprob and entropy (0 on environment tokens): an episode in progress, an agent's segment."""

    ids: list[int] = field(default_factory=list)
    policy: list[bool] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)

    def append(self, ids: list[int], policy: bool, logprobs: list[float] | None = None,
               entropies: list[float] | None = None) -> None:
        self.ids += ids
        self.policy += [policy] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        self.entropies += entropies if entropies else [0.0] * len(ids)


@dataclass
class Episode(Completion):
    """A finished episode. `text` is the environment's view of the answer: the last assistant turn's text."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # after the opening: assistant turns and replies
    turns: int = 0  # assistant turns
    reward: float = 0.0  # by the task's env.reward rule
    success: bool = False
    # Per assistant turn (for turn-level credit, rlvr.algorithms.turn_credit): where its tokens start in token_ids,
    # the turn reward the episode reward counts for it (the outcome is not in it), and its anchor state: the
    # environment state the turn starts from (Environment.state_key: by default the whole conversation so far).
    turn_starts: list[int] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    anchors: list[Hashable] = field(default_factory=list)
    # An agent episode's model calls as the endpoint recorded them (rlvr.rollout.agent_trace.CallRecord: prompt ids,
    # each choice's completion ids and logprobs, the policy version), earlier segments' included
    calls: list[Any] = field(default_factory=list)


class RolloutEngine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        """For each prompt, `params.n` completions; with `generators` (one per prompt), prompt i's samples are drawn
        from generators[i] alone, so they do not depend on which other prompts share the batch."""
        ...


ENGINES: Registry[type] = Registry("rollout engine")


class BatchedEngine:
    """`generate` in engine batches of whole groups (`batch_size` sequences), the model in eval mode meanwhile;
    an engine implements `_generate_batch(prompts, params, generators) -> flat completions, n per prompt`."""

    model: torch.nn.Module
    batch_size: int

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None) -> list[list[Completion]]:
        per_batch = max(1, self.batch_size // params.n)
        out: list[list[Completion]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for i in range(0, len(prompts), per_batch):
                flat = self._generate_batch(prompts[i : i + per_batch], params,
                                            generators[i : i + per_batch] if generators is not None else None)
                out.extend(flat[j : j + params.n] for j in range(0, len(flat), params.n))
        finally:
            self.model.train(was_training)
        return out


def group_generator(device: torch.device, *key: object) -> torch.Generator:
    """A generator seeded from `key` (e.g. seed, step, round, group index) by a stable hash: the same group gets the
    same random stream in every process."""
    digest = hashlib.blake2b("-".join(map(str, key)).encode(), digest_size=8).digest()
    return torch.Generator(device).manual_seed(int.from_bytes(digest, "little") >> 1)


def make_engine(name: str, model, tokenizer, batch_size: int, compile_layers: bool = False) -> RolloutEngine:
    """The engine registered as `name`; `compile_layers` (rollout.compile_layers) compiles a static engine's layers
    and is refused for an engine that has none to compile."""
    engine = ENGINES.get(name)(model, tokenizer, batch_size=batch_size)
    if compile_layers:
        if not hasattr(engine, "compile_layers"):
            raise ConfigError(f"rollout.compile_layers=true compiles the static engine's decoder layers, but "
                              f"rollout.engine={name} generates with {type(engine).__name__} here (auto picks the "
                              f"static engine only on CUDA, for Llama/Qwen2/Qwen3/Mistral text models). Set "
                              f"rollout.engine=static or rollout.compile_layers=false.")
        engine.compile_layers()
    return engine
