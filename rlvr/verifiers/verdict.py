"""A verifier's score together with the answer it scored, so that what a run shows is what it paid for."""

from __future__ import annotations


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


def shown_answer(text: str | None) -> str | None:
    """An answer as shown: whitespace collapsed, None when empty."""
    if text is None:
        return None
    return " ".join(str(text).split()) or None
