"""Process rewards: a score for each span of a completion (a reasoning step of it, with its character span), for
process credit (`algorithm.advantage: process_min | process_sum`, rlvr.algorithms.process_credit).

A process reward is a reward like any other (rlvr.rewards.contract): `f(prompt, completion, **fields)` returning its
spans, `[SpanScore(start, end, score) | (start, end, score), ...]` or `RewardResult(spans=...)`, where `start` and
`end` index the completion text (end exclusive). It is named in `rewards.step_reward.function` by a registered name
(`arithmetic_steps`, the verifiable checker of `a op b = c` steps; `process_reward_model`, a learned PRM) or as
'package.module:function' / 'path/file.py:function', and it is scored in the reward workers with every other reward:
the same time limit, failure budget and loading before the first step. It is scored only when the advantage
estimator reads its spans (`process_reward_for`), and each span's score is placed on the token holding the span's
last character (`token_text_ends`, `span_token_positions`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from rlvr.config import RunConfig, StepRewardConfig
from rlvr.errors import ConfigError, did_you_mean
from rlvr.rewards.loading import REWARDS, register_reward, resolve_setting
from rlvr.verifiers.verdict import SpanScore

WINDOW = 8  # tokens of context before each token when its text's end is measured (token_text_ends)


def process_reward_for(cfg: RunConfig) -> StepRewardConfig | None:
    """rewards.step_reward when the run's advantage estimator reads step rewards, else None: the one place that
    decides whether process rewards are scored at all (nothing is computed that no estimator uses)."""
    from rlvr.algorithms import estimator_needs  # here: the reward workers import this module without torch

    return cfg.rewards.step_reward if "step_rewards" in estimator_needs(cfg.algorithm.advantage) else None


def register_process_reward(name: str, settings: type[BaseModel],
                            preload: Callable[[BaseModel], object] | None = None):
    """Register a shipped process reward under `name` (in the one reward registry, marked as returning spans), with
    the schema of its `args` (`settings`) and what a worker loads before its first call (`preload`)."""
    return register_reward(name, settings, preload=preload, spans=True)


def process_reward_names() -> list[str]:
    return [name for name in REWARDS.names() if REWARDS.get(name).spans]


def resolve_process_reward(spec: str) -> Callable:
    """A shipped process reward by name, or a function named 'package.module:function' / 'path/file.py:function'
    (imported here, so a typo stops the run at start)."""
    if spec in REWARDS and REWARDS.get(spec).spans:
        return REWARDS.get(spec)
    names = process_reward_names()
    if ":" not in spec:
        kind = "a reward that returns a score, not spans" if spec in REWARDS else "not a shipped process reward"
        raise ConfigError(f"rewards.step_reward.function: '{spec}' is {kind} ({', '.join(names)}) nor "
                          f"'package.module:function' / 'path/file.py:function'.{did_you_mean(spec, names)}")
    return resolve_setting(spec, f"rewards.step_reward.function = '{spec}'")


def process_reward_args(function: Callable, args: dict[str, Any]) -> dict[str, Any]:
    """`args` checked against a shipped process reward's settings (a clear error naming the field), as keywords."""
    settings = getattr(function, "settings", None)
    if settings is None:
        return dict(args)
    try:
        return settings(**args).model_dump()
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(args)'}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"rewards.step_reward.args: {problems}") from None


def token_text_ends(tokenizer, token_ids: Sequence[int], window: int = WINDOW) -> list[int]:
    """For each token, the length of the text decoded from the tokens up to and including it,
    `len(tokenizer.decode(token_ids[: i + 1], skip_special_tokens=True))`: the character just past the token in the
    text the rollout engines decode, `decode(token_ids, skip_special_tokens=True)`. O(L): two decodes of at most
    `window` + 1 tokens per token, in one batch.

    Token i's end is token i-1's plus what appending it adds to the decoded text, measured on the `window` tokens
    before it. That is the prefix decode's difference exactly when appending a token changes only the text of the
    last `window` tokens: byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM2, rlvr's tiny tokenizers) completes or
    replaces (U+FFFD) one UTF-8 character of at most 4 bytes, so at most 3 tokens back; a sentencepiece decoder
    strips only the first token's leading space, which both decodes of a window share; the clean-up of spaces
    before punctuation reaches one character back. A decoder whose effects reach further (sentencepiece's byte
    fallback over a run of byte tokens longer than the window) is caught where the last end differs from the
    decoded text's length, and that completion's ends are then decoded prefix by prefix (exact, quadratic)."""
    ids = list(token_ids)
    pieces = []
    for i in range(len(ids)):
        start = max(0, i - window)
        pieces += [ids[start:i], ids[start : i + 1]]
    texts = tokenizer.batch_decode(pieces, skip_special_tokens=True)
    ends, end = [], 0
    for i in range(len(ids)):
        end += len(texts[2 * i + 1]) - len(texts[2 * i])
        ends.append(end)
    if ids and ends[-1] != len(tokenizer.decode(ids, skip_special_tokens=True)):
        return [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)) for i in range(len(ids))]
    return ends


def span_token_positions(spans: Sequence[SpanScore], ends: Sequence[int]) -> list[int]:
    """The token each span's score is placed on: the token holding the span's last character (the first token
    whose decoded text reaches the span's end, spans taken in order of their ends); a span ending past the text
    lands on the last token."""
    positions, i = [], 0
    for span in spans:
        while i < len(ends) - 1 and ends[i] < span.end:
            i += 1
        positions.append(i)
    return positions
