"""The Python tool against hostile cells: each attack is contained as code rewards' are, the episode goes on with
a tool message, and the host is left as it was. Modelled on tests/test_sandbox.py."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time

import pytest

from rlvr.envs.python_tool import PythonSession
from rlvr.sandbox import Limits

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
FAST = Limits(cpu_s=2, wall_s=3)


@pytest.fixture(autouse=True)
def host_unchanged(tmp_path, monkeypatch):
    """Every test: a sentinel file outside the sandbox is untouched and no sandbox directory is left. The runs'
    temporary directories go under this test's own directory, so other processes' sandboxes do not count."""
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("untouched")
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    yield sentinel
    assert sentinel.read_text() == "untouched"
    assert not [n for n in os.listdir(private) if n.startswith("rlvr-sandbox-")]


def test_state_carries_over_between_cells_and_errors_are_answers():
    session = PythonSession(FAST)
    assert session.python("x = 6\nprint('set')") == "set"
    assert session.python("x * 7") == "42"
    assert session.python("1/0").endswith("ZeroDivisionError: division by zero")
    assert session.python("x + 1") == "7"  # the failed cell was not kept
    assert session.python("pass") == "(no output)"


def test_an_endless_cell_times_out_as_a_tool_message():
    session = PythonSession(FAST)
    start = time.monotonic()
    answer = session.python("while True:\n    pass")
    assert time.monotonic() - start < 10
    assert "Error" in answer or "killed" in answer or "status" in answer
    assert session.python("'still alive'") == "'still alive'"


@needs_bwrap
def test_a_cell_cannot_change_files_outside_its_directory(host_unchanged):
    sentinel = str(host_unchanged)
    escape = os.path.join(tempfile.gettempdir(), f"rlvr-tool-escape-{os.getpid()}")
    answer = PythonSession(FAST).python(
        f"import os\nfor attempt in (lambda: open({sentinel!r}, 'w').write('pwned'), lambda: os.remove({sentinel!r}), "
        "lambda: open('/usr/pwned', 'w')):\n    try:\n        attempt()\n        print('succeeded')\n"
        "    except Exception as e:\n        print('blocked', type(e).__name__)\n"
        f"open({escape!r}, 'w').write('x')")
    assert answer.count("blocked") == 3 and "succeeded" not in answer, answer
    assert not os.path.exists(escape)  # the sandbox's /tmp is its own


@needs_bwrap
def test_a_cell_has_no_network_and_no_parent_environment(monkeypatch):
    secret = f"s3cret-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("RLVR_TOOL_TEST_SECRET", secret)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        answer = PythonSession(FAST).python(
            "import os, socket\nprint(dict(os.environ))\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    print('connected')\n"
            "except OSError as e:\n    print('blocked')\n")
        assert "blocked" in answer and "connected" not in answer
        assert secret not in answer
        with pytest.raises(BlockingIOError):
            server.accept()


def test_a_flood_of_output_is_cut():
    answer = PythonSession(FAST, max_output_chars=100).python("print('x' * 10**6)")
    assert len(answer) < 200 and answer.endswith("[truncated]")
