"""A task read from a dataset on disk: JSONL, Parquet, CSV, or a `datasets` directory saved with
save_to_disk, with a column mapping. Rows are checked up front: a bad row names file, row and column."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from rlvr.errors import DataError
from rlvr.tasks.base import TASKS, Problem, Task


def exact_match(prompt: str, completion: str, answer: str, **_: Any) -> float:
    """1.0 when the stripped completion equals the stripped answer."""
    return float(completion.strip() == str(answer).strip())


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a JSONL / JSON / Parquet / CSV file or a saved `datasets` directory."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"Dataset file '{path}' does not exist.")
    if p.is_dir():
        try:
            from datasets import load_from_disk
        except ImportError:
            raise DataError(f"'{path}' is a directory; reading saved datasets needs `pip install datasets`.") from None
        data = load_from_disk(str(p))
        if hasattr(data, "keys"):  # a DatasetDict: take its train split
            data = data["train"] if "train" in data else data[next(iter(data.keys()))]
        return [dict(r) for r in data]
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        with p.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}, line {line_no}: not valid JSON ({e.msg}).") from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}, line {line_no}: expected a JSON object, got {type(row).__name__}.")
                rows.append(row)
        return rows
    if suffix == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise DataError(f"{path}: a .json dataset must hold a list of objects.")
        return data
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(p).to_pylist()
    if suffix in (".csv", ".tsv"):
        with p.open(encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ","))
    raise DataError(f"Dataset file '{path}' has an unknown format '{suffix}'; use .jsonl, .json, .parquet or .csv.")


@TASKS.register("dataset")
class DatasetTask(Task):
    """Problems with reference answers from a file on disk (args: path, prompt_column, answer_column, ...)."""

    name = "dataset"

    def __init__(self, seed: int = 0, path: str = "", prompt_column: str = "prompt", answer_column: str = "answer",
                 solution_column: str | None = None, eval_path: str | None = None, eval_size: int = 0,
                 verifier: str = "rlvr.tasks.dataset:exact_match", extra_columns: list[str] | None = None):
        if not path:
            raise DataError("The dataset task needs data.tasks[].args.path: a .jsonl/.parquet/.csv file or a saved dataset.")
        self.verifier = verifier
        self.columns = {"prompt": prompt_column, "answer": answer_column}
        if solution_column:
            self.columns["solution"] = solution_column
        self.extra = extra_columns or []
        rows = self._load(path)
        if eval_path:
            self._splits = {"train": rows, "eval": self._load(eval_path)}
        else:
            cut = len(rows) - eval_size
            if cut <= 0:
                raise DataError(f"{path}: eval_size={eval_size} leaves no training rows (file has {len(rows)}).")
            self._splits = {"train": rows[:cut], "eval": rows[cut:]}

    def _load(self, path: str) -> list[Problem]:
        rows = read_rows(path)
        if not rows:
            raise DataError(f"Dataset file '{path}' has no rows.")
        line_word = "line" if str(path).endswith((".jsonl", ".ndjson")) else "row"
        problems = []
        for i, row in enumerate(rows, 1):
            for role, col in [*self.columns.items(), *((c, c) for c in self.extra)]:
                value = row.get(col)
                if value is None or (isinstance(value, str) and not value.strip()):
                    found = ", ".join(sorted(row)) or "none"
                    what = "is missing" if col not in row else "is empty"
                    raise DataError(
                        f"{path}, {line_word} {i}: column '{col}' ({role}) {what}. Columns found: {found}. "
                        f"Fix the row, or map the column with data.tasks[].args.{role}_column=NAME."
                        if role in self.columns
                        else f"{path}, {line_word} {i}: extra column '{col}' {what}. Columns found: {found}."
                    )
            problems.append(
                Problem(
                    uid=f"{Path(path).name}-{i}",
                    prompt=str(row[self.columns["prompt"]]),
                    answer=str(row[self.columns["answer"]]),
                    solution=str(row[self.columns["solution"]]) if "solution" in self.columns else None,
                    fields={c: row[c] for c in self.extra},
                )
            )
        return problems

    def size(self, split: str) -> int | None:
        return len(self._splits[split])

    def final_answer(self, completion: str) -> str | None:
        if self.verifier == "rlvr.tasks.dataset:exact_match":  # the whole completion is the answer
            return completion.strip() or None
        return super().final_answer(completion)

    def problem(self, split: str, index: int) -> Problem:
        return self._splits[split][index]
