"""Score untrusted programs against tests, each run in a sandbox: assert-style function tests (HumanEval) and
stdin/stdout cases (competitive programming)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Literal

from rlvr.sandbox.limits import Limits
from rlvr.sandbox.run import Isolation, run_python

HARNESS_SOURCE = (Path(__file__).with_name("function_harness.py")).read_text(encoding="utf-8")


def without_definition(source: str, name: str) -> str:
    """`source` minus its top-level definition of `name` (the prompt's stub of the function under test)."""
    tree = ast.parse(source)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    tree.body = [n for n in tree.body if not (isinstance(n, functions) and n.name == name)]
    return ast.unparse(tree)


def defines_check(source: str) -> bool:
    """Whether test code defines `check(candidate)` to be called (HumanEval) rather than asserting directly."""
    return any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in ast.parse(source).body)


def check_function_tests(program: str, test_code: str, entry_point: str, limits: Limits = Limits(), *,
                         prelude: str = "", isolation: Isolation | None = None) -> float:
    """1.0 when `program` passes every assert of `test_code`, else 0.0.

    `test_code` either asserts directly on `entry_point` or defines `check(candidate)`, which is then called with
    it (HumanEval). The tests run in their own process beside the program's and see `entry_point` as a proxy
    that passes plain data both ways, plus the top-level definitions of `prelude`, trusted code such as
    HumanEval's prompt (minus its stub of `entry_point`). The verdict is the tests' process exit status, which
    the program cannot reach (see function_harness.py)."""
    job = {"program": program, "tests": test_code, "entry_point": entry_point,
           "prelude": without_definition(prelude, entry_point), "calls_check": defines_check(test_code)}
    result = run_python(HARNESS_SOURCE, stdin=json.dumps(job), limits=limits, isolation=isolation)
    return float(result.status == "ok")


def normalize_output(text: str) -> str:
    """Output as compared: trailing whitespace on each line and blank lines at the start and end dropped."""
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def check_io_cases(program: str, cases: list[dict[str, Any]], mode: Literal["fraction", "all"] = "fraction",
                   limits: Limits = Limits(), *, isolation: Isolation | None = None) -> float:
    """Score `program` on stdin/stdout cases ({"input": str, "output": str}), each in its own sandboxed process.

    A case passes when the program exits 0 and its normalized stdout equals the case's normalized output.
    mode 'fraction': the fraction of cases passed; 'all': 1.0 only if every case passes (stops at the first
    failure)."""
    if mode not in ("fraction", "all"):
        raise ValueError(f"mode must be 'fraction' or 'all', got {mode!r}")
    if not cases:
        raise ValueError("check_io_cases needs at least one case")
    passed = 0
    for case in cases:
        result = run_python(program, stdin=case["input"], limits=limits, isolation=isolation)
        if result.status == "ok" and normalize_output(result.stdout) == normalize_output(case["output"]):
            passed += 1
        elif mode == "all":
            return 0.0
    return passed / len(cases)
