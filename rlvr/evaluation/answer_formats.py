"""The answer-format matrix: the formats real models write their final answer in, one row per format per built-in
rule verifier (`answer_formats.jsonl` beside this module), each to be paid when the answer is right and refused when
it is wrong. The contract of the final-answer rule (rlvr.verifiers.extraction, docs/verifiers.md "The final
answer"): tests/test_answer_formats.py scores every row both ways, `rlvr verify hacks` scores the right answers as
its `formats` control class, and docs/verifiers.md publishes the table `markdown_table` draws.

A row: {"format", "verifier", "description", "prompt", "completion", "fields"?}. `prompt` and `completion` are
templates over one addition `a + b`: {a}, {b}, {answer} (the right sum, or a wrong one), {work} (`a + b = answer`),
{ones} and {tens} (the partial sums written out as intermediate results), {cut} (the answer's first digit: a
repetition the token limit cut off) and, for code, {program} (a program printing the sum, or a wrong one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MATRIX = Path(__file__).with_name("answer_formats.jsonl")
VERIFIERS = {  # verifier name in the matrix -> reward function spec
    "math_score": "rlvr.verifiers.math:math_score",
    "answers_match": "rlvr.evaluation.hack_probes:answers_match_probe",
    "exact_match": "rlvr.tasks.dataset:exact_match",
    "arithmetic": "rlvr.tasks.arithmetic:score",
    "reasoning_gym": "rlvr.tasks.reasoning_gym:score",
    "code": "rlvr.tasks.code:io_score",
}
PROGRAM = "a, b = map(int, input().split())\nprint(a + b{offset})"


@dataclass(frozen=True)
class FormatRow:
    format: str
    verifier: str
    description: str
    prompt: str
    completion: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FormatCase:
    """One row rendered for one addition, with the right or a wrong answer: what the verifier is handed."""

    row: FormatRow
    right: bool
    prompt: str
    completion: str
    reference: str
    fields: dict[str, Any]

    @property
    def spec(self) -> str:
        return VERIFIERS[self.row.verifier]


@lru_cache(maxsize=1)
def format_rows() -> tuple[FormatRow, ...]:
    """The matrix's rows, in file order."""
    rows = []
    for line in MATRIX.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = FormatRow(**json.loads(line))
            if row.verifier not in VERIFIERS:
                raise ValueError(f"{MATRIX.name}: format {row.format!r} names an unknown verifier {row.verifier!r}")
            rows.append(row)
    return tuple(rows)


def wrong_sum(a: int, b: int) -> int:
    """A wrong answer to `a + b`: off by one (as the hack probes' wrong answers are)."""
    return a + b + (1 if (a + b) % 2 else -1)


def render(row: FormatRow, a: int, b: int, right: bool = True) -> FormatCase:
    """`row` for the addition a + b, stating the right sum (`right`) or a wrong one."""
    answer = a + b if right else wrong_sum(a, b)
    values = {"a": a, "b": b, "answer": answer, "work": f"{a} + {b} = {answer}", "ones": a % 10 + b % 10,
              "tens": (a // 10 + b // 10) * 10, "cut": str(answer)[0],
              "program": PROGRAM.format(offset="" if right else " + 1")}
    fields = dict(row.fields)
    if row.verifier == "reasoning_gym":
        question = row.prompt.format(**values)
        fields.update(rg_dataset="basic_arithmetic", rg_entry={"question": question, "answer": str(a + b), "metadata": {}})
    if row.verifier == "code":
        fields.update(tests=[{"input": f"{a} {b}\n", "output": f"{a + b}\n"}], mode="all")
    return FormatCase(row, right, row.prompt.format(**values), row.completion.format(**values), str(a + b), fields)


def format_cases(a: int = 58, b: int = 14, verifiers: tuple[str, ...] | None = None) -> list[FormatCase]:
    """Every row (of `verifiers`, default all) rendered for a + b, right and wrong."""
    return [render(row, a, b, right) for row in format_rows() if verifiers is None or row.verifier in verifiers
            for right in (True, False)]


def markdown_table() -> str:
    """The matrix as docs/verifiers.md shows it: a row per format with an example (for 58 + 14), a column per
    verifier; `paid / 0` where the format applies (paid when right, 0 when wrong), `–` where it does not."""
    verifiers = list(dict.fromkeys(r.verifier for r in format_rows()))
    formats: dict[str, dict[str, FormatRow]] = {}
    for row in format_rows():
        formats.setdefault(row.format, {})[row.verifier] = row
    lines = ["| format | example (58 + 14) | " + " | ".join(f"`{v}`" for v in verifiers) + " |",
             "| --- | --- | " + " | ".join("---" for _ in verifiers) + " |"]
    for name, rows in formats.items():
        first = next(iter(rows.values()))
        example = render(first, 58, 14).completion.replace("\n", "⏎").replace("|", "\\|")
        cells = ["paid / 0" if v in rows else "–" for v in verifiers]
        lines.append(f"| `{name}`: {first.description} | `` {example} `` | " + " | ".join(cells) + " |")
    return "\n".join(lines)
