"""A Python tool with per-episode state, run in the sandbox (rlvr.sandbox.run_python).

Each call runs in a fresh sandboxed process, as code rewards do. State carries over the way a notebook's does
from the episode's point of view: the cells that ran without error are replayed (their output discarded) before
the new cell, so variables and functions defined earlier exist. A cell whose last statement is an expression
prints its value, as a REPL would. Errors, timeouts and output limits come back as the tool's answer.
"""

from __future__ import annotations

import json

from rlvr.sandbox import Limits, run_python

RUNNER = '''\
import ast, contextlib, io, json, sys
cells = json.loads({cells!r})
scope = {{"__name__": "__main__"}}
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for cell in cells[:-1]:
        exec(compile(cell, "<cell>", "exec"), scope)
tree = ast.parse(cells[-1])
last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
exec(compile(tree, "<cell>", "exec"), scope)
if last is not None:
    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), scope)
    if value is not None:
        print(repr(value))
'''


class PythonSession:
    """One episode's Python state: the cells that ran cleanly so far."""

    def __init__(self, limits: Limits = Limits(cpu_s=4, wall_s=6), max_output_chars: int = 2000):
        self.limits, self.max_output_chars = limits, max_output_chars
        self.cells: list[str] = []

    def python(self, code: str) -> str:
        """Run Python code; variables persist between calls. The value of a final expression is printed.

        Args:
            code: The Python code to run.
        """
        result = run_python(RUNNER.format(cells=json.dumps([*self.cells, code])), limits=self.limits)
        out = result.stdout
        if result.status == "ok":
            self.cells.append(code)
        elif result.status == "timeout":
            out += f"\nError: timed out after {self.limits.wall_s:g} s"
        elif result.status == "output_limit":
            out += "\nError: output limit reached"
        else:
            err = result.stderr.strip().splitlines()
            out += "\n" + (err[-1] if err else f"Error: the process ended with status {result.status}")
        out = out.strip()
        if len(out) > self.max_output_chars:
            out = out[: self.max_output_chars] + " ...[truncated]"
        return out or "(no output)"
