"""Isolated execution of untrusted Python (model-written code) for verifiable rewards.

`run_python` runs a script in a fresh sandbox (bubblewrap by default; never weaker than the configured minimum,
see `isolation_level` and rlvr.sandbox.policy) under CPU, memory, file-size, open-file, process and output limits
and a wall-clock timeout.
`check_function_tests` scores a program against assert-style tests (HumanEval); `check_io_cases` against
stdin/stdout cases (competitive programming). See docs/sandbox.md.

Imports nothing of rlvr but errors: policy.py (the configured minimum) below run.py (the runner).
"""

from rlvr.sandbox.checks import check_function_tests, check_io_cases
from rlvr.sandbox.limits import Limits
from rlvr.sandbox.policy import SandboxUnavailable
from rlvr.sandbox.run import RunResult, isolation_level, run_python

__all__ = ["Limits", "RunResult", "SandboxUnavailable", "check_function_tests", "check_io_cases", "isolation_level",
           "run_python"]
