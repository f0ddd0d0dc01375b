"""The reward contract: reading what a reward function returns (docs/rewards.md, "What a reward returns"; the
types it may return live beside `Verdict` in rlvr.verifiers.verdict, so verifiers and tasks can return them).

A reward `f(prompt, completion, **fields)` returns
- a number: the score;
- a dict holding 'score' and other named numbers (logged as `reward/<name>/<key>`), optionally the 'answer' it
  scored (text or None; a `Verdict` carries it as an attribute);
- or a `RewardResult`, when it has more to say: its `score` (a number or such a dict), `spans` (a score per span of
  the completion's characters, `SpanScore`, for process credit) and `payload` (anything picklable the task that
  asked for the scoring reads back, such as Absolute Zero's proposed task).
A process reward (rewards.step_reward) returns its spans: a `RewardResult(spans=...)`, or the plain list of
`SpanScore` / (start, end, score) it has always returned; its score is optional.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr.verifiers.verdict import RewardResult, SpanScore


def reported_answer(value) -> tuple:
    """(answer,) when a reward says which final answer it scored: a Verdict (rlvr.verifiers.verdict), or a dict with
    an 'answer' key (text, or None for no answer); () when it does not say."""
    if isinstance(value, RewardResult):
        value = value.score
    if isinstance(value, dict):
        if "answer" not in value:
            return ()
        answer = value["answer"]
    elif isinstance(value, float) and hasattr(value, "answer"):
        answer = value.answer
    else:
        return ()
    return (None if answer is None else str(answer),)


def as_reward(value, spans: bool = False) -> tuple[float, dict[str, float]]:
    """A float, or a dict holding 'score' plus extra numbers to log (and optionally the 'answer' it scored, see
    `reported_answer`), also as a RewardResult's score. With `spans` (a process reward) the score may be left out
    (0.0)."""
    if isinstance(value, RewardResult):
        value = value.score
        if value is None and spans:
            return 0.0, {}
    elif spans and isinstance(value, (list, tuple)):  # a process reward's plain list of spans
        return 0.0, {}
    if isinstance(value, dict):
        if "score" not in value:
            raise ValueError(f"a reward dict must have a 'score' key, got keys {sorted(value)}")
        extras = {k: float(v) for k, v in value.items() if k not in ("score", "answer")}
        value = value["score"]
    else:
        extras = {}
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a reward must be a number or a dict with 'score', got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"a reward must be finite, got {value}")
    return value, extras


def as_rewards(values, count: int) -> tuple[list[float], list[dict[str, float]]]:
    """What a batched reward returns: a list (or tuple) of `count` rewards, each as in `as_reward`."""
    if not isinstance(values, (list, tuple)) or len(values) != count:
        got = f"{len(values)} values" if isinstance(values, (list, tuple)) else type(values).__name__
        raise ValueError(f"a batched reward must return a list of {count} rewards (one per completion), got {got}")
    scores, extras = zip(*(as_reward(v) for v in values))
    return list(scores), list(extras)


def result_payload(value) -> Any:
    """The payload a reward returned (None without one)."""
    return value.payload if isinstance(value, RewardResult) else None


def result_spans(value, text: str, spans: bool) -> list[SpanScore] | None:
    """A reward's spans, checked against its completion `text` (`checked_spans`); None when it returned none. With
    `spans` (a process reward) a returned list is its spans and returning none is an error."""
    if isinstance(value, RewardResult):
        raw = value.spans
    else:
        raw = value if spans and isinstance(value, (list, tuple)) else None
    if raw is None:
        if spans:
            raise TypeError(f"a process reward must return its spans (a list of SpanScore(start, end, score) or "
                            f"(start, end, score), or RewardResult(spans=...)), got {type(value).__name__}")
        return None
    return checked_spans(raw, text)


def checked_spans(raw: Any, text: str) -> list[SpanScore]:
    """Spans as SpanScores ordered by end, each a non-empty range inside the text with a finite score; anything else
    raises naming the span (a reward that cannot be computed is never a quiet zero)."""
    if not isinstance(raw, (list, tuple)):
        raise TypeError(f"spans must be a list of SpanScore(start, end, score) or (start, end, score) tuples, got "
                        f"{type(raw).__name__}")
    out = []
    for k, item in enumerate(raw):
        if isinstance(item, SpanScore):
            start, end, score = item.start, item.end, item.score
        elif isinstance(item, (list, tuple)) and len(item) == 3:
            start, end, score = item
        else:
            raise ValueError(f"span {k}: {item!r} is not (start, end, score)")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise ValueError(f"span {k}: score {score!r} is not a finite number")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise ValueError(f"span {k}: [{start}, {end}) is not a non-empty range of the completion's {len(text)} "
                             "characters")
        out.append(SpanScore(start, end, float(score)))
    return sorted(out, key=lambda s: (s.end, s.start))
