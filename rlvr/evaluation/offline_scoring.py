"""Score a file of completions with a task's verifier (or any reward function) outside training, through the
reward worker pool, for debugging rewards: `rlvr verify --task NAME FILE.jsonl`.

A run's completions.jsonl is read as what it is: its `reference` is the verifier's `answer`, its `truncated` flag is
handed on, the other logged columns (the answer shown, rewards, advantage) are compared with the new scoring rather
than passed to the verifier, and every rewarded row is checked: is the answer it showed the reference?"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from rlvr.errors import ConfigError, DataError
from rlvr.rewards.loading import resolve_function
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest
from rlvr.tasks import TASKS
from rlvr.tasks.dataset import read_rows
from rlvr.verifiers.guards import equation_result

CHUNK = 256  # requests per pool call, so that the progress bar moves


def task_verifier(task_name: str) -> str:
    """The verifier spec of a registered task: its class's `verifier`, or its constructor's `verifier`
    argument default (tasks such as 'dataset' take the verifier as an argument)."""
    cls = TASKS.get(task_name)
    spec = getattr(cls, "verifier", None)
    if isinstance(spec, str):
        return spec
    parameter = inspect.signature(cls.__init__).parameters.get("verifier")
    if parameter is not None and isinstance(parameter.default, str):
        return parameter.default
    raise ConfigError(f"Task '{task_name}' names no fixed verifier; pass one with --verifier module:function.")


def score_requests(pool: RewardPool, requests: Sequence[RewardRequest], what: str = "scoring",
                   show_progress: bool = True) -> dict[Hashable, RewardOutcome]:
    """Score requests in chunks through the pool, with a progress bar."""
    outcomes: dict[Hashable, RewardOutcome] = {}
    with Progress(transient=True, disable=not show_progress) as progress:
        bar = progress.add_task(what, total=len(requests))
        for start in range(0, len(requests), CHUNK):
            chunk = requests[start : start + CHUNK]
            outcomes.update(pool.score(chunk))
            progress.advance(bar, len(chunk))
    return outcomes


RUN_LOG_COLUMNS = ("step", "reference", "reward", "completion")  # a row of a run's completions.jsonl


@dataclass
class ScoredRow:
    line: int
    row_id: str
    outcome: RewardOutcome
    completion: str = ""
    reference: Any = None  # the row's 'answer' (a run log's 'reference'), when it has one
    logged: dict[str, Any] | None = None  # a run log row's logged columns: answer, correct, reward, ...

    @property
    def answer(self) -> tuple:
        """(answer,) the verifier said it scored now, () when it did not say."""
        return self.outcome.answer if self.outcome.status == "ok" else ()


def is_run_log_row(row: dict[str, Any]) -> bool:
    return all(column in row for column in RUN_LOG_COLUMNS)


def row_label(row: dict[str, Any], line: int) -> str:
    """How tables name a row: its `id`; a run's completion by step, problem and sample; else its line."""
    if is_run_log_row(row):
        return f"step {row['step']} {row.get('uid', '')} #{row.get('sample', '')}"
    return str(row.get("id", line))


def _request(line: int, spec: str, row: dict[str, Any], args: dict[str, Any]) -> RewardRequest:
    if is_run_log_row(row):  # completions.jsonl: the reference is the verifier's answer; the rest is the log
        fields = {"answer": row["reference"], "truncated": bool(row.get("truncated", False))}
    else:
        fields = {k: v for k, v in row.items() if k not in ("prompt", "completion")}
    return RewardRequest(line, spec, row.get("prompt", "") or "", row["completion"], {**fields, **args})


def completion_requests(path: str | Path, spec: str, args: dict[str, Any]) -> list[RewardRequest]:
    """One request per row of a completions file: `completion` (required), `prompt` (optional, default ''),
    every other column handed to the verifier as a keyword, then `args` on top. A run's completions.jsonl row
    hands `reference` as `answer` and its `truncated` flag, nothing else it logged."""
    resolve_function(spec)  # a bad spec fails here with a clear message, not in every worker
    requests = []
    for line, row in enumerate(read_rows(path), 1):
        if not isinstance(row.get("completion"), str):
            found = ", ".join(sorted(row)) or "none"
            raise DataError(f"{path}, row {line}: needs a text column 'completion'. Columns found: {found}.")
        requests.append(_request(line, spec, row, args))
    if not requests:
        raise DataError(f"{path} has no rows.")
    return requests


def score_file(path: str | Path, spec: str, args: dict[str, Any], pool: RewardPool,
               show_progress: bool = True) -> list[ScoredRow]:
    """Each row's outcome (status, score, extras, message, the answer it read), in file order."""
    rows = read_rows(path)
    requests = completion_requests(path, spec, args)
    outcomes = score_requests(pool, requests, f"scoring {Path(path).name}", show_progress)
    return [ScoredRow(r.key, row_label(row, r.key), outcomes[r.key], r.completion, r.fields.get("answer"),
                      {k: v for k, v in row.items() if k not in ("prompt", "completion")} if is_run_log_row(row)
                      else None)
            for r, row in zip(requests, rows)]


def _same_text(a: Any, b: Any) -> bool:
    """Two answers written alike: the same text with whitespace collapsed, or the same plain number (`154` and
    `154.0`); an answer shown as an equation counts by its right-hand side (`58 + 96 = 154.` shows 154)."""
    a, b = " ".join(str(a).split()), " ".join(str(b).split())
    a = equation_result(a).rstrip(" .") or a
    if a == b:
        return True
    try:
        return float(a.replace(",", "")) == float(b.replace(",", ""))
    except ValueError:
        return False


def run_log_checks(rows: list[ScoredRow]) -> dict[str, Any]:
    """For a run's completions.jsonl: rewarded rows (logged `correct`) whose shown answer is not written as the
    reference (a plain check, independent of the verifier: the hack the issue found), rows whose shown answer
    differs from the one the verifier reads now, and rows whose verdict differs now."""
    logged = [r for r in rows if r.logged is not None]
    rewarded = [r for r in logged if r.logged.get("correct")]
    mismatched = [r for r in rewarded if r.logged.get("answer") is None or not _same_text(r.logged["answer"], r.reference)]
    changed_answer = [r for r in logged if r.answer and r.answer[0] != r.logged.get("answer")]
    changed_verdict = [r for r in logged if r.outcome.status == "ok"
                       and (r.outcome.value >= 1) != bool(r.logged.get("correct"))]
    return {"run_log_rows": len(logged), "rewarded": len(rewarded),
            "rewarded_answer_not_reference": [r.line for r in mismatched],
            "shown_answer_differs_now": [r.line for r in changed_answer],
            "verdict_differs_now": [r.line for r in changed_verdict]}
