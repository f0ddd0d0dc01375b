"""What a verifier or reward returns beyond a plain number (the reward contract, read by rlvr.rewards.contract): a
score together with the answer it scored (`Verdict`), so that what a run shows is what it paid for; scores per span
of the completion (`SpanScore`); and `RewardResult`, which carries a score, spans and a payload for the task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class Verdict(float):
    """A score (a float: compares, adds and serializes as its value) that also carries `answer`, the final answer
    the verifier read from the completion and judged, or None when it found none. The reward workers hand
    `answer` on to completions.jsonl, the run report and `rlvr verify`. A reward function may equally return
    {"score": s, "answer": text}."""

    __slots__ = ("answer",)

    def __new__(cls, score: float, answer: str | None = None) -> Verdict:
        verdict = super().__new__(cls, score)
        verdict.answer = answer
        return verdict

    def __repr__(self) -> str:
        return f"Verdict({float(self)!r}, answer={self.answer!r})"

    def __reduce__(self):
        return (Verdict, (float(self), self.answer))


@dataclass(frozen=True)
class SpanScore:
    """A score for the characters [start, end) of a completion's text (a reasoning step of it, for process
    credit)."""

    start: int
    end: int
    score: float


@dataclass(frozen=True)
class RewardResult:
    """What a reward returns when a number or a dict is not enough: `score` (a number, a Verdict, or a dict of
    'score' and named numbers), `spans` (SpanScore or (start, end, score) per span of the completion) and `payload`
    (anything picklable the task that asked for the scoring reads back, `Scored.payloads`)."""

    score: float | dict[str, Any] | None = None
    spans: Sequence[SpanScore | tuple[int, int, float]] | None = None
    payload: Any = None


def shown_answer(text: str | None) -> str | None:
    """An answer as shown: whitespace collapsed, None when empty."""
    if text is None:
        return None
    return " ".join(str(text).split()) or None
