"""Programs, inputs and outputs as code-reasoning tasks (Absolute Zero's triplets, Zhao et al. 2025): reading them
from a completion, checking them statically, running them in the sandbox and comparing values.

A program defines a function `f`; an input is the argument list of one call, written as Python literals
(`'abc', 2`); an output is the `repr` of what the call returns, which must itself be a literal. Values are compared
as Python values (`ast.literal_eval`), so `'abc'` and `"abc"` are one output. A call runs in a fresh sandboxed
process (rlvr.sandbox, docs/sandbox.md) with the program's own printing discarded; a proposal is run twice, in two
processes, and kept only when both runs return the same output (hash randomisation, `id`, time and randomness show
up as differences).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from rlvr.sandbox import Limits, run_python

FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)
# Imports a program may use: pure, deterministic standard-library modules
ALLOWED_IMPORTS = frozenset({"math", "string", "itertools", "functools", "collections", "re", "heapq", "bisect",
                             "operator", "fractions", "decimal", "statistics"})
# Names a program may not use: I/O, code execution, introspection, and the nondeterministic modules
BANNED_NAMES = frozenset({"open", "input", "exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                          "breakpoint", "exit", "quit", "help", "memoryview", "random", "time", "datetime", "os",
                          "sys", "subprocess", "socket", "threading", "multiprocessing", "secrets", "uuid"})
MAX_PROGRAM_CHARS = 2000
MAX_VALUE_CHARS = 200  # longest input or output repr a task may hold
LIMITS = Limits(cpu_s=2.0, wall_s=4.0, memory_bytes=512 << 20, output_bytes=64 << 10)
REJECTIONS = ("format", "syntax", "banned", "error", "limit", "nondeterministic", "output")
RESULT = "<<rlvr-result>>"


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of each fenced block, in order."""
    return [(lang.lower(), body) for lang, body in FENCE.findall(text)]


def program_block(text: str) -> str | None:
    """The first fenced block that defines `f` (tagged python or untagged), None when there is none."""
    for lang, body in fenced_blocks(text):
        if lang in ("python", "py", "") and re.search(r"^\s*def f\(", body, re.MULTILINE):
            return body.strip("\n")
    return None


def tagged_blocks(text: str, tag: str) -> list[str]:
    """The bodies of the blocks fenced as ```<tag>, stripped."""
    return [body.strip() for lang, body in fenced_blocks(text) if lang == tag]


def parse_arguments(text: str) -> tuple | None:
    """An input as the tuple of its literal arguments (`'abc', 2` -> ('abc', 2)), None when it is not literals."""
    text = text.strip()
    if not text or len(text) > MAX_VALUE_CHARS:
        return None
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, tuple) else None


def literal(text: str) -> tuple[bool, Any]:
    """(True, value) when `text` is a Python literal, else (False, None)."""
    try:
        return True, ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def same_value(expected_repr: str, answer: str) -> bool:
    """Whether `answer` states the value whose repr is `expected_repr`: equal as literals; an answer that is not a
    literal counts as the string it spells (so a string output may be written without quotes)."""
    _, expected = literal(expected_repr)
    ok, value = literal(answer)
    if not ok:
        value = answer.strip()
    if type(value) is type(expected):
        return value == expected
    numbers = (int, float)
    return (isinstance(value, numbers) and isinstance(expected, numbers) and not isinstance(value, bool)
            and not isinstance(expected, bool) and value == expected)


def static_problem(program: str) -> str | None:
    """Why `program` is refused before it runs ('syntax' or 'banned'), None when it may run: it must parse, define
    a function `f`, import only ALLOWED_IMPORTS and use none of BANNED_NAMES or dunder attributes."""
    if len(program) > MAX_PROGRAM_CHARS:
        return "syntax"
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "syntax"
    if not any(isinstance(node, ast.FunctionDef) and node.name == "f" for node in tree.body):
        return "syntax"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] not in ALLOWED_IMPORTS for a in node.names):
            return "banned"
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] not in ALLOWED_IMPORTS:
            return "banned"
        if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            return "banned"
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            return "banned"
    return None


def harness(program: str, calls: list[tuple]) -> str:
    """A script that runs `program`, then prints the repr of f(*arguments) for each call after a marker (the
    program's own output goes to a discarded buffer). Arguments are written back as their reprs, literals only."""
    return (f"import io as _io, sys as _sys\n_out = _sys.stdout\n_sys.stdout = _io.StringIO()\n"
            f"exec(compile({program!r}, 'program', 'exec'))\n_rs = [repr(f(*_a)) for _a in {calls!r}]\n"
            f"_sys.stdout = _out\nfor _r in _rs:\n    print({RESULT!r} + _r.replace(chr(10), ' '))\n")


@dataclass
class Run:
    """The outputs (reprs) of a program's calls, or why there are none: a REJECTIONS reason and a detail."""

    outputs: list[str] | None
    rejection: str | None = None
    detail: str = ""


def call(program: str, calls: list[tuple], limits: Limits = LIMITS) -> Run:
    """f(*arguments) for each of `calls` (argument tuples, as `parse_arguments` reads them), in one fresh
    sandboxed process: every output, or the reason there are none ('error': a call raised; 'limit': the run hit a
    sandbox limit; 'output': an output that is not a literal or too long)."""
    result = run_python(harness(program, calls), limits=limits)
    if result.status in ("timeout", "killed", "output_limit"):
        return Run(None, "limit", result.status)
    if result.status != "ok":
        last = (result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"])[0][:200]
        # the address-space and recursion limits surface as exceptions: limits, not the program's own failures
        return Run(None, "limit" if last.startswith(("MemoryError", "RecursionError")) else "error", last)
    outputs = [line[len(RESULT):] for line in result.stdout.splitlines() if line.startswith(RESULT)]
    if len(outputs) != len(calls):
        return Run(None, "error", "results missing")
    for output in outputs:
        if len(output) > MAX_VALUE_CHARS or not literal(output)[0]:
            return Run(None, "output", output[:80])
    return Run(outputs)


def checked_outputs(program: str, inputs: list[str], runs: int = 2) -> Run:
    """The outputs of `program` on `inputs` (argument lists as text) when it passes the static checks, every input
    is literals, and `runs` sandboxed runs all return the same outputs; else the first reason it does not (one of
    REJECTIONS)."""
    problem = static_problem(program)
    if problem is not None:
        return Run(None, problem)
    calls = [parse_arguments(text) for text in inputs]
    if not calls or any(c is None for c in calls):
        return Run(None, "format", "an input is not Python literals")
    first = call(program, calls)
    for _ in range(runs - 1):
        if first.outputs is None:
            break
        again = call(program, calls)
        if again.outputs is None:
            return again
        if again.outputs != first.outputs:
            return Run(None, "nondeterministic", f"{first.outputs[0][:40]} then {again.outputs[0][:40]}")
    return first


def shown_arguments(arguments: tuple) -> str:
    """An argument tuple as it is written in a call: `'abc', 2`."""
    return ", ".join(repr(a) for a in arguments)


def program_lines(program: str) -> int:
    """Non-blank lines of a program (how Absolute Zero measures a proposal's size)."""
    return sum(1 for line in program.splitlines() if line.strip())


def as_json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True)
