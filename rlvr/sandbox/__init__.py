"""Isolated execution of untrusted Python (model-written code) for verifiable rewards.

`run_python` runs a script in a fresh sandbox (bubblewrap when usable; see `isolation_level`) under
CPU, memory, file-size, open-file, process and output limits and a wall-clock timeout.
`check_function_tests` scores a program against assert-style tests (HumanEval); `check_io_cases` against
stdin/stdout cases (competitive programming). See docs/sandbox.md.
"""

from rlvr.sandbox.checks import check_function_tests, check_io_cases
from rlvr.sandbox.limits import Limits
from rlvr.sandbox.run import RunResult, isolation_level, run_python

__all__ = ["Limits", "RunResult", "check_function_tests", "check_io_cases", "isolation_level", "run_python"]
