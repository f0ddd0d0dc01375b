"""Score untrusted programs against tests, each run in a sandbox: assert-style function tests (HumanEval) and
stdin/stdout cases (competitive programming)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Literal

from rlvr.sandbox.limits import Limits
from rlvr.sandbox.run import Isolation, run_python

HARNESS_SOURCE = (Path(__file__).with_name("function_harness.py")).read_text(encoding="utf-8")


def check_function_tests(program: str, test_code: str, entry_point: str, limits: Limits = Limits(), *,
                         prelude: str = "", plain_returns: bool = True, isolation: Isolation | None = None) -> float:
    """1.0 when `program` passes every assert of `test_code`, else 0.0.

    `test_code` either asserts directly or defines `check(candidate)`, which is then called with the function
    `entry_point` (HumanEval). `prelude` is trusted code (HumanEval's prompt) whose top-level definitions other
    than `entry_point` are re-run after the program, so the tests use the real helpers. With `plain_returns`,
    `entry_point` must return plain data (no objects with a rigged __eq__). The verdict is a per-run random
    nonce that the harness prints only after all tests passed (see function_harness.py)."""
    nonce = secrets.token_hex(16)
    job = {"nonce": nonce, "program": program, "tests": test_code, "entry_point": entry_point, "prelude": prelude,
           "plain_returns": plain_returns}
    result = run_python(HARNESS_SOURCE, stdin=json.dumps(job), limits=limits, isolation=isolation)
    return float(f"{nonce} all tests passed" in result.stdout.splitlines())


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
