"""Runs inside the sandbox (stdlib only): a program, then its assert-style tests; prints the run's nonce only
when every test ran and passed.

Reads one JSON object from stdin: nonce, program, tests, entry_point, prelude, plain_returns. Everything used
after the program starts is bound to locals beforehand, so a program that patches builtins, `sys`, `os` or this
module can make the run fail but not make it print the nonce: any exception or exit ends the run without it.
The nonce arrives on stdin, which is drained and replaced by /dev/null before the program runs.
"""

import ast
import builtins
import json
import os
import sys
import threading


def plain_data_guard():
    """A wrapper factory: wrap(f) raises TypeError when f returns anything but plain data (exact built-in
    scalars, str, bytes and containers of them), so an object whose __eq__ is always true can't pass an
    `==` assert. Every name it needs is bound now, before untrusted code runs."""
    leaf_types = (type(None), bool, int, float, complex, str, bytes)
    sequence_types = (list, tuple, set, frozenset)
    dict_type, type_of, error = dict, type, TypeError

    def wrap(function):
        def guarded(*args, **kwargs):
            result = function(*args, **kwargs)
            stack = [result]
            while stack:
                value = stack.pop()
                kind = type_of(value)
                if kind is dict_type:
                    stack.extend(value.keys())
                    stack.extend(value.values())
                elif kind in sequence_types:
                    stack.extend(value)
                elif kind not in leaf_types:
                    raise error("the function under test must return plain data (numbers, str, bytes, None, "
                                f"and lists/tuples/sets/dicts of them), got {kind.__name__}")
            return result

        return guarded

    return wrap


def without_definition(source: str, name: str) -> str:
    """`source` minus its top-level definition of `name` (the prompt's stub of the function under test)."""
    tree = ast.parse(source)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    tree.body = [n for n in tree.body if not (isinstance(n, functions) and n.name == name)]
    return ast.unparse(tree)


def defines_check(source: str) -> bool:
    """Whether test code defines `check(candidate)` to be called (HumanEval) rather than asserting directly."""
    return any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in ast.parse(source).body)


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    write, exit_now, run, out = os.write, os._exit, exec, os.dup(1)
    untrace = (sys.settrace, sys.setprofile, threading.settrace, threading.setprofile)
    marker = f"\n{job['nonce']} all tests passed\n".encode()
    pristine_builtins = dict(vars(builtins))
    entry_point = job["entry_point"]
    program = compile(job["program"], "solution.py", "exec", dont_inherit=True, optimize=0)
    prelude = compile(without_definition(job["prelude"], entry_point), "prelude.py", "exec", dont_inherit=True,
                      optimize=0)
    tests = compile(job["tests"], "tests.py", "exec", dont_inherit=True, optimize=0)
    calls_check = defines_check(job["tests"])
    guard = plain_data_guard() if job["plain_returns"] else None
    del job
    namespace = {"__name__": "solution"}

    run(program, namespace)  # the untrusted program
    for unset in untrace:  # drop trace/profile hooks that could skip or rewrite assert lines
        unset(None)
    namespace["__builtins__"] = pristine_builtins
    run(prelude, namespace)  # the trusted helpers the tests rely on, in case the program redefined them
    candidate = namespace[entry_point]
    if guard is not None:
        candidate = guard(candidate)
        if not calls_check:  # asserts call the function by name
            namespace[entry_point] = candidate
    run(tests, namespace)
    if calls_check:
        namespace["check"](candidate)
    write(out, marker)
    exit_now(0)


main()
