"""Runs inside the sandbox (stdlib only): the untrusted program in a forked child process, its assert-style tests
in this process; the verdict is this process's exit status (0 only when every test ran and passed).

Reads one JSON object from stdin: program, tests, entry_point, prelude (trusted helpers) and calls_check.
The tests call a proxy of the function under test that sends the arguments to the child and gets the result back
as plain data (numbers, str, bytes, None and lists/tuples/sets/dicts of them) in a tagged JSON encoding, so no object of the program's (say, one
whose __eq__ is always true) ever reaches the tests. The program cannot reach the tests either: they live in
another process, made non-dumpable before the fork, so the child can neither ptrace it nor open its
/proc/<pid>/mem or fds. Whatever the program does (exit 0, patch builtins, rewrite frames of its own process),
it cannot change this process's exit status except by killing it, which is a failure.
"""

import json
import os
import sys

HEADER = 8  # bytes of the length prefix of each message


def make_non_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no ptrace, no /proc/<pid>/{mem,fd,environ} for other processes of the same uid."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


SEQUENCE_TAGS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
SEQUENCES = {tag: kind for kind, tag in SEQUENCE_TAGS.items()}


def encode(value):
    """A JSON tree for plain data; scalars stay as they are, everything else is [tag, payload]. Only exact
    built-in types pass (an int subclass is refused)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind in SEQUENCE_TAGS:
        return [SEQUENCE_TAGS[kind], [encode(v) for v in value]]
    if kind is dict:
        return ["dict", [[encode(k), encode(v)] for k, v in value.items()]]
    if kind is bytes:
        return ["bytes", value.decode("latin-1")]
    if kind is complex:
        return ["complex", [value.real, value.imag]]
    raise TypeError(f"only plain data (numbers, str, bytes, None and lists/tuples/sets/dicts of them) can be passed "
                    f"to or returned from the function under test, got {kind.__name__}")


def decode(tree):
    if not isinstance(tree, list):
        return tree
    tag, payload = tree
    if tag in SEQUENCES:
        return SEQUENCES[tag](decode(v) for v in payload)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in payload}
    if tag == "bytes":
        return payload.encode("latin-1")
    if tag == "complex":
        return complex(*payload)
    raise ValueError(f"unknown tag {tag!r}")


def send(fd: int, message) -> None:
    data = json.dumps(message).encode()
    data = len(data).to_bytes(HEADER, "big") + data
    while data:
        data = data[os.write(fd, data):]


def receive(fd: int):
    def exactly(n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(fd, n)
            if not chunk:
                raise EOFError("the program's process ended")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    return json.loads(exactly(int.from_bytes(exactly(HEADER), "big")))


def serve_program(program: str, entry_point: str, calls: int, results: int) -> None:
    """The child: run the program, then answer calls of its `entry_point` until the tests are done."""
    namespace = {"__name__": "solution"}
    try:
        exec(compile(program, "solution.py", "exec", dont_inherit=True), namespace)
        function, failure = namespace[entry_point], None
    except BaseException as e:  # the program does not load: every call reports it
        function, failure = None, f"the program failed: {type(e).__name__}: {e}"
    while True:
        args, kwargs = decode(receive(calls))
        try:
            if function is None:
                raise RuntimeError(failure)
            reply = ["ok", encode(function(*args, **kwargs))]
        except BaseException as e:
            reply = ["error", f"{type(e).__name__}: {e}"]
        send(results, reply)


class CandidateError(Exception):
    """The function under test raised, returned something other than plain data, or its process ended."""


def remote(entry_point: str, calls: int, results: int):
    """The function under test as the tests see it: each call runs in the program's process."""

    def candidate(*args, **kwargs):
        send(calls, encode((args, kwargs)))
        try:
            status, payload = receive(results)
        except EOFError as e:
            raise CandidateError(str(e)) from None
        if status != "ok":
            raise CandidateError(str(payload))
        return decode(payload)

    candidate.__name__ = entry_point
    return candidate


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    entry_point = job["entry_point"]
    make_non_dumpable()
    calls_read, calls_write = os.pipe()
    results_read, results_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(calls_write)
        os.close(results_read)
        try:
            serve_program(job["program"], entry_point, calls_read, results_write)
        finally:
            os._exit(0)
    os.close(calls_read)
    os.close(results_write)
    try:
        namespace = {"__name__": "tests"}
        exec(compile(job["prelude"], "prelude.py", "exec", dont_inherit=True), namespace)
        candidate = namespace[entry_point] = remote(entry_point, calls_write, results_read)
        exec(compile(job["tests"], "tests.py", "exec", dont_inherit=True, optimize=0), namespace)
        if job["calls_check"]:
            namespace["check"](candidate)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


main()
