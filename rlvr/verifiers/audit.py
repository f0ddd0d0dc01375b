"""Audit a verifier against labelled rows: how often it rejects an equivalent answer (false negative) and
accepts a wrong one (false positive). Rule-based checkers drift toward false negatives as policies grow
stronger (Pitfalls of Rule- and Model-based Verifiers, 2025); the rates also feed noisy-reward corrections
(Verifiable yet Noisy Rewards, 2025). `rlvr verify audit FILE.jsonl`; data/math_audit.jsonl ships with rlvr.

A row: {"gold": ..., "answer": ... | "completion": ..., "expected": true/false, "id"?, "category"?}. An
`answer` row is compared as a final answer; a `completion` row goes through answer extraction first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.errors import DataError
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest
from rlvr.tasks.dataset import read_rows
from rlvr.verifiers.offline import score_requests

MATH_SCORE = "rlvr.verifiers.math:math_score"


@dataclass
class AuditRow:
    line: int
    row_id: str
    category: str
    gold: str
    text: str  # the answer or the completion
    is_completion: bool
    expected: bool


@dataclass
class AuditCase:
    row: AuditRow
    outcome: RewardOutcome

    @property
    def verdict(self) -> bool:
        return self.outcome.status == "ok" and self.outcome.value >= 1.0

    @property
    def is_error(self) -> bool:
        return self.verdict != self.row.expected


def read_audit_rows(path: str | Path) -> list[AuditRow]:
    rows = []
    for line, raw in enumerate(read_rows(path), 1):
        texts = [k for k in ("answer", "completion") if raw.get(k) is not None]
        if raw.get("gold") is None or len(texts) != 1 or not isinstance(raw.get("expected"), bool):
            raise DataError(f"{path}, row {line}: an audit row needs 'gold', exactly one of 'answer' or "
                            f"'completion', and 'expected' (true/false). Columns found: {', '.join(sorted(raw))}.")
        rows.append(AuditRow(line, str(raw.get("id", line)), str(raw.get("category", "")), str(raw["gold"]),
                             str(raw[texts[0]]), texts[0] == "completion", raw["expected"]))
    if not rows:
        raise DataError(f"{path} has no rows.")
    return rows


def run_audit(rows: list[AuditRow], pool: RewardPool, spec: str = MATH_SCORE,
              show_progress: bool = True) -> list[AuditCase]:
    """Score every row with `spec` (answers with extract='whole', completions with the default extraction)."""
    requests = [RewardRequest(r.line, spec, "", r.text, {"answer": r.gold, **({} if r.is_completion else
                                                                              {"extract": "whole"})})
                for r in rows]
    outcomes = score_requests(pool, requests, "auditing", show_progress)
    return [AuditCase(r, outcomes[r.line]) for r in rows]


def summary(cases: list[AuditCase]) -> dict[str, Any]:
    """Counts and rates: false-negative rate over rows labelled equivalent, false-positive rate over the rest."""
    positives = [c for c in cases if c.row.expected]
    negatives = [c for c in cases if not c.row.expected]
    fn = sum(c.is_error for c in positives)
    fp = sum(c.is_error for c in negatives)
    return {
        "rows": len(cases), "equivalent": len(positives), "not_equivalent": len(negatives),
        "false_negatives": fn, "false_positives": fp,
        "false_negative_rate": fn / len(positives) if positives else 0.0,
        "false_positive_rate": fp / len(negatives) if negatives else 0.0,
        "errors": sum(c.outcome.status != "ok" for c in cases),
    }


def failing_rows(cases: list[AuditCase]) -> list[dict[str, Any]]:
    return [{"line": c.row.line, "id": c.row.row_id, "category": c.row.category, "gold": c.row.gold,
             "text": c.row.text, "expected": c.row.expected, "verdict": c.verdict, "status": c.outcome.status,
             "message": c.outcome.message} for c in cases if c.is_error]


def render(cases: list[AuditCase], console) -> None:
    """Print the failing rows and the rates as rich tables."""
    from rich.table import Table

    failures = failing_rows(cases)
    if failures:
        table = Table(title="Rows where the verifier disagrees with the label")
        for column in ("id", "category", "gold", "answer / completion", "expected", "verdict", "note"):
            table.add_column(column, overflow="fold")
        for f in failures:
            text = f["text"] if len(f["text"]) <= 80 else "…" + f["text"][-79:]
            note = "" if f["status"] == "ok" else f"{f['status']}: {f['message']}"
            table.add_row(f["id"], f["category"], f["gold"], text, str(f["expected"]), str(f["verdict"]), note)
        console.print(table)
    s = summary(cases)
    table = Table(title=f"Verifier audit: {s['rows']} rows")
    for column in ("", "rows", "wrong", "rate"):
        table.add_column(column, justify="right")
    table.add_row("false negatives (equivalent, rejected)", str(s["equivalent"]), str(s["false_negatives"]),
                  f"{s['false_negative_rate']:.2%}")
    table.add_row("false positives (not equivalent, accepted)", str(s["not_equivalent"]), str(s["false_positives"]),
                  f"{s['false_positive_rate']:.2%}")
    console.print(table)
    if s["errors"]:
        console.print(f"{s['errors']} rows failed to score (timeouts or errors count as rejections).")
