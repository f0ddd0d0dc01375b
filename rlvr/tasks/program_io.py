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


def labelled(text: str, label: str) -> list[str]:
    """What follows each '<label>:' (any case) up to the end of its line, backticks and spaces stripped: a reply's
    'Output: `[1, 2]`'."""
    return [m.strip().strip("`").strip() for m in re.findall(rf"\b{label}\s*:[ \t]*([^\n]*)", text, re.IGNORECASE)]


def call_arguments(text: str) -> list[str]:
    """The argument text of each call `f(...)` written in a reply (a usage line such as `f([7, 4, 3])`), in order;
    `def f(...)` headers are skipped."""
    found = []
    for m in re.finditer(r"(?<![\w.])f\(", text):
        if text[max(0, m.start() - 4) : m.start()] == "def ":
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found.append(text[m.end() : i - 1])
    return found


def stated_inputs(text: str) -> list[str]:
    """The inputs a reply states, as argument lists that are literals: its ```input blocks, else its 'Input:' lines,
    else the arguments of the calls of f it writes (duplicates dropped, order kept)."""
    for candidates in (tagged_blocks(text, "input"), labelled(text, "input"), call_arguments(text)):
        inputs = [shown_arguments(a) for a in map(parse_arguments, candidates) if a is not None]
        if inputs:
            return list(dict.fromkeys(inputs))
    return []


def stated_value(text: str, label: str) -> str:
    """A reply's answer: its last ```<label> block, else what follows its last '<label>:', else its last fenced block
    that is not a program, else the whole reply (stripped)."""
    tagged = tagged_blocks(text, label)
    if tagged:
        return tagged[-1]
    after = [a for a in labelled(text, label) if a]
    if after:
        return after[-1]
    blocks = [body.strip() for _, body in fenced_blocks(text) if not re.search(r"^\s*def f\(", body, re.MULTILINE)]
    return blocks[-1] if blocks else text.strip()


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
