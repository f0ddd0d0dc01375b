"""Audit the math verifier against labelled rows: how often it rejects an equivalent answer (false negative) and
accepts a wrong one (false positive), per class of answer, beside math-verify alone on the same rows. Rule-based
checkers drift toward false negatives as policies grow stronger (Pitfalls of Rule- and Model-based Verifiers,
2025); the rates also feed noisy-reward corrections (Verifiable yet Noisy Rewards, 2025).
`rlvr verify audit FILE.jsonl`; data/math_audit.jsonl ships with rlvr.

A row: {"gold": ..., "answer": ... | "completion": ..., "expected": true/false, "id"?, "class"?}. Every row is
judged three ways: rlvr's raw comparison (`answers_match(text, gold)`), rlvr's completion path (`math_score`, as
the `math` task scores), and math-verify alone (`verify(parse(gold), parse(text))`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.errors import DataError
from rlvr.evaluation.offline_scoring import score_requests
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest
from rlvr.tasks.dataset import read_rows

JUDGES = {  # name -> reward function spec
    "raw": "rlvr.evaluation.verifier_audit:raw_comparison",
    "completion": "rlvr.verifiers.math:math_score",
    "math_verify": "rlvr.evaluation.verifier_audit:math_verify_alone",
}
JUDGE_TITLES = {"raw": "rlvr answers_match", "completion": "rlvr math_score", "math_verify": "math-verify alone"}


def raw_comparison(prompt: str, completion: str, answer: str, **_: Any) -> float:
    """rlvr's raw comparison as a reward function: answers_match(completion, answer)."""
    from rlvr.verifiers.math import answers_match

    return float(answers_match(completion, answer))


def math_verify_alone(prompt: str, completion: str, answer: str, **_: Any) -> float:
    """The peer: math-verify with its defaults and nothing else, verify(parse(gold), parse(prediction))."""
    from math_verify import parse, verify

    return float(verify(parse(answer), parse(completion)))


@dataclass
class AuditRow:
    line: int
    row_id: str
    row_class: str
    gold: str
    text: str  # the answer or the completion
    expected: bool


@dataclass
class AuditCase:
    row: AuditRow
    outcomes: dict[str, RewardOutcome]  # judge name -> outcome

    def verdict(self, judge: str) -> bool:
        outcome = self.outcomes[judge]
        return outcome.status == "ok" and outcome.value >= 1.0

    def is_error(self, judge: str) -> bool:
        return self.verdict(judge) != self.row.expected


def read_audit_rows(path: str | Path) -> list[AuditRow]:
    rows = []
    for line, raw in enumerate(read_rows(path), 1):
        texts = [k for k in ("answer", "completion") if raw.get(k) is not None]
        if raw.get("gold") is None or len(texts) != 1 or not isinstance(raw.get("expected"), bool):
            raise DataError(f"{path}, row {line}: an audit row needs 'gold', exactly one of 'answer' or "
                            f"'completion', and 'expected' (true/false). Columns found: {', '.join(sorted(raw))}.")
        row_class = raw.get("class", raw.get("category", ""))
        rows.append(AuditRow(line, str(raw.get("id", line)), str(row_class), str(raw["gold"]), str(raw[texts[0]]),
                             raw["expected"]))
    if not rows:
        raise DataError(f"{path} has no rows.")
    return rows


def run_audit(rows: list[AuditRow], pool: RewardPool, judges: tuple[str, ...] = tuple(JUDGES),
              show_progress: bool = True) -> list[AuditCase]:
    """Judge every row with each of `judges` (names of JUDGES) through the reward pool."""
    requests = [RewardRequest((name, r.line), JUDGES[name], "", r.text, {"answer": r.gold})
                for name in judges for r in rows]
    outcomes = score_requests(pool, requests, "auditing", show_progress)
    return [AuditCase(r, {name: outcomes[(name, r.line)] for name in judges}) for r in rows]


def counts(cases: list[AuditCase], judge: str) -> dict[str, int]:
    """rows, equivalent, false negatives, false positives, agreeing rows, rows that failed to score."""
    return {
        "rows": len(cases), "equivalent": sum(c.row.expected for c in cases),
        "false_negatives": sum(c.row.expected and c.is_error(judge) for c in cases),
        "false_positives": sum(not c.row.expected and c.is_error(judge) for c in cases),
        "agree": sum(not c.is_error(judge) for c in cases),
        "errors": sum(c.outcomes[judge].status != "ok" for c in cases),
    }


def summary(cases: list[AuditCase]) -> dict[str, Any]:
    """Per judge: counts over all rows, rates, and counts per class."""
    judges = list(cases[0].outcomes)
    by_class: dict[str, list[AuditCase]] = defaultdict(list)
    for c in cases:
        by_class[c.row.row_class].append(c)
    result: dict[str, Any] = {"rows": len(cases), "equivalent": sum(c.row.expected for c in cases), "judges": {}}
    for judge in judges:
        total = counts(cases, judge)
        positives, negatives = total["equivalent"], total["rows"] - total["equivalent"]
        result["judges"][judge] = {
            **total, "agreement": total["agree"] / total["rows"],
            "false_negative_rate": total["false_negatives"] / positives if positives else 0.0,
            "false_positive_rate": total["false_positives"] / negatives if negatives else 0.0,
            "classes": {name: counts(group, judge) for name, group in sorted(by_class.items())},
        }
    return result


def failing_rows(cases: list[AuditCase], judges: tuple[str, ...] = ("raw", "completion")) -> list[dict[str, Any]]:
    """Rows where any of rlvr's judges disagrees with the label."""
    return [{"line": c.row.line, "id": c.row.row_id, "class": c.row.row_class, "gold": c.row.gold,
             "text": c.row.text, "expected": c.row.expected,
             **{f"verdict_{j}": c.verdict(j) for j in c.outcomes},
             "notes": "; ".join(f"{j}: {o.status}: {o.message}" for j, o in c.outcomes.items() if o.status != "ok")}
            for c in cases if any(c.is_error(j) for j in judges if j in c.outcomes)]


def render(cases: list[AuditCase], console) -> None:
    """Print the failing rows, the per-class table and the agreement of each judge as rich tables."""
    from rich.table import Table

    failures = failing_rows(cases)
    judges = list(cases[0].outcomes)
    if failures:
        table = Table(title="Rows where rlvr disagrees with the label")
        for column in ("id", "class", "gold", "answer / completion", "expected", *judges, "note"):
            table.add_column(column, overflow="fold")
        for f in failures:
            text = f["text"] if len(f["text"]) <= 80 else "…" + f["text"][-79:]
            table.add_row(f["id"], f["class"], f["gold"], text, str(f["expected"]),
                          *(str(f[f"verdict_{j}"]) for j in judges), f["notes"])
        console.print(table)
    s = summary(cases)
    table = Table(title=f"False negatives / false positives per class ({s['rows']} rows, {s['equivalent']} equivalent)")
    table.add_column("class")
    table.add_column("rows", justify="right")
    for judge in judges:
        table.add_column(f"{JUDGE_TITLES[judge]}\nFN / FP", justify="right")
    for name in s["judges"][judges[0]]["classes"]:
        cells = [s["judges"][j]["classes"][name] for j in judges]
        table.add_row(name or "(none)", str(cells[0]["rows"]),
                      *(f"{c['false_negatives']} / {c['false_positives']}" for c in cells))
    table.add_row("all", str(s["rows"]), *(f"{s['judges'][j]['false_negatives']} / {s['judges'][j]['false_positives']}"
                                           for j in judges), style="bold")
    console.print(table)
    for judge in judges:
        j = s["judges"][judge]
        console.print(f"{JUDGE_TITLES[judge]:20s} agrees with the labels on {j['agree']}/{j['rows']} rows "
                      f"({j['agreement']:.1%}); false negatives {j['false_negative_rate']:.1%}, false positives "
                      f"{j['false_positive_rate']:.1%}" + (f"; {j['errors']} failed to score" if j["errors"] else ""))
