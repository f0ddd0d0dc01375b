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


def completion_requests(path: str | Path, spec: str, args: dict[str, Any]) -> list[RewardRequest]:
    """One request per row of a completions file: `completion` (required), `prompt` (optional, default ''),
    every other column handed to the verifier as a keyword, then `args` on top."""
    resolve_function(spec)  # a bad spec fails here with a clear message, not in every worker
    requests = []
    for line, row in enumerate(read_rows(path), 1):
        if not isinstance(row.get("completion"), str):
            found = ", ".join(sorted(row)) or "none"
            raise DataError(f"{path}, row {line}: needs a text column 'completion'. Columns found: {found}.")
        fields = {k: v for k, v in row.items() if k not in ("prompt", "completion")}
        requests.append(RewardRequest(line, spec, str(row.get("prompt", "")), row["completion"], {**fields, **args}))
    if not requests:
        raise DataError(f"{path} has no rows.")
    return requests


def score_file(path: str | Path, spec: str, args: dict[str, Any], pool: RewardPool,
               show_progress: bool = True) -> list[ScoredRow]:
    """Each row's outcome (status, score, extras, message), in file order."""
    requests = completion_requests(path, spec, args)
    outcomes = score_requests(pool, requests, f"scoring {Path(path).name}", show_progress)
    return [ScoredRow(r.key, str(r.fields.get("id", r.key)), outcomes[r.key], r.completion, r.fields.get("answer"))
            for r in requests]
