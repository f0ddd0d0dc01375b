"""Open-domain question answering from JSONL / Parquet files in the fields NQ, TriviaQA and HotpotQA use (and
Search-R1 / FlashRAG ship them in): `question`; the references as `golden_answers` (a list), or `answer` (a string,
a list, or TriviaQA's {"value", "aliases"}); HotpotQA's `supporting_facts` and any `extra_columns` are handed to the
verifier as fields. Scored by exact match (rlvr.verifiers.qa) unless `verifier` says otherwise. The shipped fictional
corpus's questions (recipes/data/make_search_qa.py) are read the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError, DataError
from rlvr.tasks.base import RESERVED_FIELDS, TASKS, Problem, Task
from rlvr.tasks.dataset import BAD_ROW_POLICIES, read_records

PASSED_ON = ("supporting_facts", "entity", "hops")  # handed to the verifier when a row has them


def golden_answers(row: dict[str, Any]) -> list[str]:
    """A row's reference answers, from `golden_answers` or `answer` in any of the datasets' forms."""
    found = row.get("golden_answers", row.get("answer"))
    if isinstance(found, dict):  # TriviaQA: {"value": ..., "aliases": [...]}
        found = [found.get("value"), *(found.get("aliases") or [])]
    if isinstance(found, (str, int, float)):
        found = [found]
    if not isinstance(found, (list, tuple)):
        return []
    return list(dict.fromkeys(str(a).strip() for a in found if a is not None and str(a).strip()))


@TASKS.register("qa")
class QATask(Task):
    """Questions with reference answers (args: path, eval_path or eval_size, prompt_template over the row's columns,
    default '{question}', verifier, extra_columns, bad_rows)."""

    name = "qa"
    has_rows = True

    def __init__(self, seed: int = 0, path: str = "", eval_path: str | None = None, eval_size: int = 0,
                 prompt_template: str = "{question}", verifier: str = "rlvr.verifiers.qa:exact_match",
                 extra_columns: list[str] | None = None, bad_rows: str = "error"):
        if not path:
            raise ConfigError("The qa task needs data.tasks[].args.path: a .jsonl/.parquet file with question and "
                              "golden_answers (or answer).")
        if bad_rows not in BAD_ROW_POLICIES:
            raise ConfigError(f"bad_rows must be one of {', '.join(BAD_ROW_POLICIES)}, got {bad_rows!r}.")
        clash = [c for c in extra_columns or [] if c in RESERVED_FIELDS]
        if clash:
            raise ConfigError(f"data.tasks[].args.extra_columns: {', '.join(clash)} cannot be handed to the verifier.")
        self.verifier, self.bad_rows, self.template = verifier, bad_rows, prompt_template
        self.extra = list(dict.fromkeys([*PASSED_ON, *(extra_columns or [])]))
        self.skipped_rows: list[str] = []
        rows = self._load(path)
        if eval_path:
            self._splits = {"train": rows, "eval": self._load(eval_path)}
        else:
            cut = len(rows) - eval_size
            if cut <= 0:
                raise DataError(f"{path}: eval_size={eval_size} leaves no training rows (file has {len(rows)}).")
            self._splits = {"train": rows[:cut], "eval": rows[cut:]}

    def _row(self, values: dict[str, Any], uid: str) -> Problem:
        question = values.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"column 'question' is missing or empty (columns found: {', '.join(sorted(values))})")
        refs = golden_answers(values)
        if not refs:
            raise DataError("no reference answer: give 'golden_answers' (a list) or 'answer' (a string, a list, or "
                            "{'value', 'aliases'})")
        try:
            prompt = self.template.format(**values)
        except (KeyError, IndexError, ValueError) as e:
            raise DataError(f"data.tasks[].args.prompt_template cannot be filled from this row ({e!r})") from None
        fields = {c: values[c] for c in self.extra if c in values}
        return Problem(uid=uid, prompt=prompt, answer=refs[0], fields={"golden_answers": refs, **fields})

    def _load(self, path: str) -> list[Problem]:
        problems = []
        for i, row in enumerate(read_records(path), 1):
            try:
                if row.problem is not None:
                    raise DataError(row.problem)
                problems.append(self._row(row.values, f"{Path(path).name}-{i}"))
            except DataError as e:
                if self.bad_rows == "error":
                    raise DataError(f"{row.where}: {e}. (data.bad_rows=skip drops such rows and counts them.)") \
                        from None
                self.skipped_rows.append(f"{row.where}: {e}")
        if not problems:
            raise DataError(f"Question file '{path}' has no usable questions.")
        return problems

    def size(self, split: str) -> int | None:
        return len(self._splits[split])

    def problem(self, split: str, index: int) -> Problem:
        return self._splits[split][index]

    def final_answer(self, completion: str) -> str | None:
        from rlvr.verifiers.qa import normalize_answer, stated_answers

        return normalize_answer(stated_answers(completion)[0][-1]) or None
