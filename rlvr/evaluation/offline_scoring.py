"""Score a file of completions with a task's verifier (or any reward function) outside training, through the
reward worker pool, for debugging rewards: `rlvr verify --task NAME FILE.jsonl`."""

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


@dataclass
class ScoredRow:
    line: int
    row_id: str
    outcome: RewardOutcome
    completion: str = ""
    reference: Any = None  # the row's 'answer', when it has one


def is_run_completion(row: dict[str, Any]) -> bool:
    """Whether `row` is a row of a training run's completions.jsonl (rlvr.tracking.completions): there `answer` is
    the answer the completion stated and `reference` the problem's."""
    return "reference" in row and "answer_matches" in row


def verifier_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a row hands the verifier: every column but prompt and completion; for a row of a run's
    completions.jsonl only its reference, as `answer` (its own `answer` is what the completion stated, and scoring
    against that would accept whatever the model said; its scores and bookkeeping are not the verifier's)."""
    if is_run_completion(row):
        return {} if row["reference"] is None else {"answer": row["reference"]}
    return {k: v for k, v in row.items() if k not in ("prompt", "completion")}


def row_label(row: dict[str, Any], line: int) -> str:
    """How the table names a row: its `id`; a run's completion by step, problem and sample; else its line."""
    if "id" in row:
        return str(row["id"])
    if is_run_completion(row):
        return f"step {row.get('step')} {row.get('uid')} #{row.get('sample')}"
    return str(line)


def completion_requests(path: str | Path, spec: str, args: dict[str, Any]) -> tuple[list[RewardRequest], list[str]]:
    """One request per row of a completions file: `completion` (required), `prompt` (optional, default ''; a
    conversation, a list of messages, is handed on as it is, as in training), every other column handed to the
    verifier as a keyword (a run's completions.jsonl: its reference as `answer`), then `args` on top; with each
    row's label for tables (row_label)."""
    resolve_function(spec)  # a bad spec fails here with a clear message, not in every worker
    requests, labels = [], []
    for line, row in enumerate(read_rows(path), 1):
        if not isinstance(row.get("completion"), str):
            found = ", ".join(sorted(row)) or "none"
            raise DataError(f"{path}, row {line}: needs a text column 'completion'. Columns found: {found}.")
        prompt = row.get("prompt", "")
        prompt = prompt if isinstance(prompt, (str, list)) else str(prompt)
        requests.append(RewardRequest(line, spec, prompt, row["completion"], {**verifier_fields(row), **args}))
        labels.append(row_label(row, line))
    if not requests:
        raise DataError(f"{path} has no rows.")
    return requests, labels


def score_file(path: str | Path, spec: str, args: dict[str, Any], pool: RewardPool,
               show_progress: bool = True) -> list[ScoredRow]:
    """Each row's outcome (status, score, extras, message), in file order."""
    requests, labels = completion_requests(path, spec, args)
    outcomes = score_requests(pool, requests, f"scoring {Path(path).name}", show_progress)
    return [ScoredRow(r.key, label, outcomes[r.key], r.completion, r.fields.get("answer"))
            for r, label in zip(requests, labels)]
