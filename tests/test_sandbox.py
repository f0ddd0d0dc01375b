"""The sandbox against hostile programs: each attack is contained, scores 0, and leaves the host as it was.

The attacks run under bubblewrap (what CI installs); a machine without bwrap skips them. If bwrap is installed
but cannot start (e.g. user namespaces blocked), they fail rather than silently test a weaker sandbox."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import textwrap
import time

import pytest

from rlvr.sandbox import Limits, RunResult, check_function_tests, check_io_cases, isolation_level, run_python
from rlvr.sandbox.isolation import interpreter
from rlvr.sandbox.run import works

FAST = Limits(cpu_s=2, wall_s=3)
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
FALLBACKS = [level for level in ("unshare", "rlimits") if works(level)[0]]

# A task in HumanEval's shape: the prompt is trusted and defines a helper the tests rely on.
PROMPT = textwrap.dedent('''\
    def scale(x):
        return 10 * x


    def add_scaled(a, b):
        """Return scale(a) + b."""
''')
SOLUTION = "    return scale(a) + b\n"
TESTS = textwrap.dedent("""\
    def check(candidate):
        assert candidate(1, 2) == scale(1) + 2
        assert candidate(0, 5) == 5
        assert abs(candidate(2, -1) - 19) < 1e-9
""")
WRONG = "    return a + b\n"
WRONG_FOR_NEGATIVE_B = "    return scale(a) + b if b >= 0 else 0\n"  # fails only the abs() assert


def score(body: str, limits: Limits = FAST) -> float:
    """The harness's verdict under bubblewrap: hostile programs never run with a weaker fallback."""
    return check_function_tests(PROMPT + body, TESTS, "add_scaled", limits, prelude=PROMPT, isolation="bwrap")


def run_bwrapped(code: str, limits: Limits = FAST) -> RunResult:
    return run_python(code, limits=limits, isolation="bwrap")


def sandbox_processes() -> list[int]:
    """Host pids of sandboxed programs (setpriv/prlimit launchers exec into the main.py interpreter) or of bwrap
    still running."""
    program = [interpreter().encode(), b"-I", b"-S", b"main.py"]
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        launcher = argv[0].endswith((b"setpriv", b"prlimit")) and b"main.py" in argv
        if argv[:4] == program or launcher or (argv[0].endswith(b"bwrap") and b"/sandbox" in argv):
            pids.append(int(pid))
    return pids


def leftover_dirs() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("rlvr-sandbox-")}


@pytest.fixture(autouse=True)
def host_unchanged(tmp_path):
    """Every test: a sentinel file outside the sandbox is untouched, no sandbox process or temp dir is left."""
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("untouched")
    dirs = leftover_dirs()
    yield sentinel
    assert sentinel.read_text() == "untouched"
    assert leftover_dirs() <= dirs
    deadline = time.monotonic() + 2
    while sandbox_processes() and time.monotonic() < deadline:  # a dying pid namespace takes a moment
        time.sleep(0.05)
    assert sandbox_processes() == []


def test_genuine_solution_passes_and_wrong_one_fails():
    def verdict(body: str) -> float:
        return check_function_tests(PROMPT + body, TESTS, "add_scaled", FAST, prelude=PROMPT)

    assert verdict(SOLUTION) == 1.0
    assert verdict(WRONG) == 0.0
    assert verdict("    return scale(a) +\n") == 0.0  # syntax error


def test_run_python_reports_output_status_and_isolation():
    result = run_python("import sys\nprint(input()[::-1])\nprint('oops', file=sys.stderr)\nsys.exit(3)", stdin="abc\n")
    assert (result.status, result.returncode, result.stdout, result.stderr.strip()) == ("error", 3, "cba\n", "oops")
    assert result.isolation == isolation_level()
    assert run_python("print('x' * 200_000)").stdout == "x" * 200_000 + "\n"  # more than a pipe buffer


@needs_bwrap
def test_bwrap_is_the_isolation_in_force():
    assert isolation_level() == "bwrap", "bubblewrap is installed but failed to start: see the sandbox warning log"


@needs_bwrap
def test_infinite_loop_is_stopped_by_the_cpu_limit():
    start = time.monotonic()
    result = run_bwrapped("while True:\n    pass\n", Limits(cpu_s=1, wall_s=5))
    assert result.status == "killed" and time.monotonic() - start < 4
    assert score("    while True:\n        pass\n", Limits(cpu_s=1, wall_s=5)) == 0.0


@needs_bwrap
def test_sleeping_program_is_stopped_by_the_wall_clock_with_its_children():
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)\n"
    start = time.monotonic()
    assert run_bwrapped(code, Limits(wall_s=1)).status == "timeout"
    assert time.monotonic() - start < 3


@needs_bwrap
def test_fork_bomb_is_capped_at_the_process_limit():
    code = textwrap.dedent("""\
        import os, time
        root = os.getpid()
        while True:
            try:
                os.fork()
            except OSError:
                break
        if os.getpid() == root:
            time.sleep(0.5)
            print(sum(name.isdigit() for name in os.listdir("/proc")), flush=True)
        time.sleep(60)
    """)
    result = run_bwrapped(code, Limits(processes=16, wall_s=2))
    assert result.status == "timeout"
    assert 2 <= int(result.stdout) <= 16 + 1  # its own processes plus bwrap's init in the pid namespace


@needs_bwrap
def test_allocating_10_gb_fails_inside_the_sandbox():
    result = run_bwrapped("data = bytearray(10 * 1024**3)\nprint('allocated')\n")
    assert result.status == "error" and "MemoryError" in result.stderr and "allocated" not in result.stdout


@needs_bwrap
def test_files_outside_the_working_directory_cannot_be_changed(host_unchanged):
    sentinel = str(host_unchanged)
    escape = os.path.join(tempfile.gettempdir(), f"rlvr-escape-{os.getpid()}")
    beside_python = os.path.join(os.path.dirname(interpreter()), f"rlvr-escape-{os.getpid()}")
    code = textwrap.dedent(f"""\
        import os
        attempts = {{
            "overwrite sentinel": lambda: open({sentinel!r}, "w").write("pwned"),
            "delete sentinel": lambda: os.remove({sentinel!r}),
            "write host tmp": lambda: open({escape!r}, "w").write("pwned"),
            "write /usr": lambda: open("/usr/pwned", "w"),
            "write /": lambda: open("/pwned", "w"),
            "write next to python": lambda: open({beside_python!r}, "w"),
            "big file": lambda: open("big", "wb").write(b"x" * (64 << 20)),
        }}
        for name, attempt in attempts.items():
            try:
                attempt()
                print("succeeded:", name)
            except Exception as e:
                print("blocked:", name, type(e).__name__)
        open("scratch.txt", "w").write("fine")  # its own working directory is writable
        print(open("scratch.txt").read())
    """)
    result = run_bwrapped(code)
    assert result.stdout.count("blocked:") == 6 and "fine" in result.stdout, result.stdout
    assert "succeeded: write host tmp" in result.stdout  # the sandbox's own /tmp, a tmpfs
    assert not os.path.exists(escape) and not os.path.exists(beside_python)


@needs_bwrap
def test_no_network_even_to_localhost():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n" \
               "    print('connected')\nexcept OSError as e:\n    print('blocked', e)\n"
        result = run_bwrapped(code)
        assert result.stdout.startswith("blocked"), result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()


@needs_bwrap
def test_parent_environment_is_not_visible(monkeypatch):
    secret = f"s3cret-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("RLVR_SANDBOX_TEST_SECRET", secret)
    code = textwrap.dedent("""\
        import os
        print(dict(os.environ))
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
    """)
    result = run_bwrapped(code)
    assert result.status == "ok" and secret not in result.stdout
    assert "RLVR_SANDBOX_TEST_SECRET" not in result.stdout


@needs_bwrap
def test_printing_1_gb_is_cut_at_the_output_cap():
    start = time.monotonic()
    code = "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))\n"
    result = run_bwrapped(code, Limits(output_bytes=1 << 20, wall_s=5))
    assert result.status == "output_limit" and result.truncated and len(result.stdout) == 1 << 20
    assert time.monotonic() - start < 3


@needs_bwrap
@pytest.mark.parametrize("cheat", [
    "import sys\nsys.exit(0)\n",  # exits 0 before the tests run
    "import os\nos._exit(0)\n",
    "    import os; os._exit(0)\n",  # exits 0 from inside the call under test
    "    raise SystemExit(0)\n",
    "import atexit, os\natexit.register(lambda: print('all tests passed'))\nos._exit(0)\n",
])
def test_exiting_early_with_status_0_scores_0(cheat):
    body = cheat if cheat.startswith("    ") else WRONG + cheat
    assert run_bwrapped(PROMPT + body).status == "ok"
    assert score(body) == 0.0


@needs_bwrap
@pytest.mark.parametrize("program", [
    WRONG_FOR_NEGATIVE_B + "import builtins\nbuiltins.abs = lambda x: 0\n",  # fools a harness sharing builtins
    WRONG + "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n",
    WRONG + "import builtins\nbuiltins.print = lambda *a, **k: None\n",
    WRONG + "import sys\nsys.exit = lambda *a: None\n",
    WRONG + "__builtins__ = {}\n",
    WRONG + "import builtins\nbuiltins.__dict__.clear()\n",
    WRONG + "__debug__ = False\n",  # `assert` itself can't be switched off
])
def test_overriding_builtins_scores_0(program):
    assert score(program) == 0.0


@needs_bwrap
def test_a_right_answer_still_passes_when_it_patches_builtins():
    patches = "import builtins, sys\nbuiltins.print = None\nbuiltins.AssertionError = None\nsys.exit = None\n"
    assert score(SOLUTION + patches) == 1.0


@needs_bwrap
@pytest.mark.parametrize("returned", [
    "class Equal:\n        def __eq__(self, other): return True\n        def __sub__(self, other): return 0\n"
    "    return Equal()",
    "class Twelve(int):\n        def __eq__(self, other): return True\n        def __sub__(self, other): return 0\n"
    "    return Twelve(12)",
])
def test_objects_with_rigged_equality_score_0(returned):
    assert score(f"    {returned}\n") == 0.0


@needs_bwrap
@pytest.mark.parametrize("program", [
    # redefine the prompt's helper that the tests compare against
    "    return a + b if b >= 0 else 19\ndef scale(x):\n    return x\n",
    # replace the harness's functions and module state
    WRONG + "import __main__\n__main__.plain_data_guard = lambda: (lambda f: f)\n"
    "__main__.defines_check = lambda s: False\n__main__.main = lambda: None\n",
    # a trace hook that swaps check()'s candidate for a right answer
    WRONG + "import sys\ndef swap(frame, event, arg):\n    if frame.f_code.co_name == 'check':\n"
    "        frame.f_locals['candidate'] = lambda a, b: 10 * a + b\n    return swap\nsys.settrace(swap)\n",
    # rewrite whatever the harness prints
    WRONG + "import os, sys\nwrite = os.write\n"
    "os.write = lambda fd, data: write(fd, data.replace(b'failed', b'passed'))\nsys.stdout.write = lambda s: 0\n",
    # stop the tests from running at all
    WRONG + "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
    "builtins.compile = lambda *a, **k: compile('', '', 'exec')\n",
])
def test_patching_the_harness_scores_0(program):
    assert score(program) == 0.0


@needs_bwrap
@pytest.mark.parametrize("cheat", [
    # walk every frame of its own process looking for a verdict to forge, then leave with status 0
    "import os, sys\nframe = sys._getframe()\nwhile frame.f_back:\n    frame = frame.f_back\nos._exit(0)\n",
    # take the tests' process down with it
    "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    # stop the tests' process (a stopped run is a timeout, not a pass)
    "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
])
def test_the_program_cannot_reach_the_verdict_in_the_tests_process(cheat):
    assert score(WRONG + cheat) == 0.0


@needs_bwrap
def test_the_tests_process_is_closed_to_the_program():
    """The tests run in a non-dumpable process: the program can open neither its memory nor its fds."""
    probe = textwrap.dedent("""\
        import os


        def probe():
            blocked = []
            for path in (f"/proc/{os.getppid()}/mem", f"/proc/{os.getppid()}/fd/0", f"/proc/{os.getppid()}/environ"):
                try:
                    open(path, "rb").close()
                    blocked.append(False)
                except PermissionError:
                    blocked.append(True)
            return blocked
    """)
    assert check_function_tests(probe, "assert probe() == [True, True, True]", "probe", FAST,
                                isolation="bwrap") == 1.0


def test_values_cross_between_processes_as_exact_plain_data():
    echo = "def echo(*args, **kwargs):\n    return [args, kwargs]\n"
    values = "(None, True, 3, -0.0, float('inf'), 'é', b'\\xff', 2j, [1, (2,)], {3, frozenset({4})}, {(1, 2): [3]})"
    tests = f"values = {values}\nassert echo(*values, key=values) == [values, {{'key': values}}]\n"
    assert check_function_tests(echo, tests, "echo", FAST) == 1.0
    # an int subclass with a rigged __eq__ does not come back
    rigged = "class Always(int):\n    def __eq__(self, other):\n        return True\n\n\ndef f():\n    return Always(0)\n"
    assert check_function_tests(rigged, "assert f() == 42", "f", FAST) == 0.0


@needs_bwrap
def test_io_cases_each_run_in_their_own_process():
    cases = [{"input": f"{n}\n", "output": f"{n * n}\n"} for n in (2, 3, 4)]

    def judge(program: str, mode: str = "fraction") -> float:
        return check_io_cases(program, cases, mode, FAST, isolation="bwrap")

    assert judge("print(int(input()) ** 2)", "all") == 1.0
    assert judge("print(int(input()) ** 2, ' ')\n\n", "all") == 1.0  # whitespace is normalized
    # printing the expected output of another case passes only that case
    assert (judge("print(4)"), judge("print(4)", "all")) == (pytest.approx(1 / 3), 0.0)
    # state kept between cases (files in the working directory) does not carry over
    assert judge("import os\nn = len(os.listdir('.'))\nopen(f'seen{n}', 'w')\nprint([4, 9, 16][n - 1])") == \
        pytest.approx(1 / 3)
    # a right answer followed by a crash is not a pass
    assert judge("print(int(input()) ** 2)\nraise SystemExit(1)") == 0.0


@pytest.mark.parametrize("level", FALLBACKS)
def test_fallback_isolation_still_limits_time_output_memory_and_environment(level, monkeypatch):
    monkeypatch.setenv("RLVR_SANDBOX_TEST_SECRET", "fallback-secret")
    fast = Limits(wall_s=1, output_bytes=1000)
    assert run_python("import time\ntime.sleep(30)", limits=fast, isolation=level).status == "timeout"
    assert run_python("print('x' * 5000)", limits=fast, isolation=level).status == "output_limit"
    assert "MemoryError" in run_python("bytearray(10 * 1024**3)", limits=FAST, isolation=level).stderr
    result = run_python("import os\nprint(sorted(os.environ))", limits=FAST, isolation=level)
    assert result.isolation == level and "RLVR_SANDBOX_TEST_SECRET" not in result.stdout
    assert check_function_tests(PROMPT + SOLUTION, TESTS, "add_scaled", FAST, prelude=PROMPT, isolation=level) == 1.0


@pytest.mark.skipif("unshare" not in FALLBACKS, reason="unshare cannot create namespaces here")
def test_unshare_fallback_has_no_network():
    code = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError as e:\n" \
           "    print(e.errno)\n"
    assert run_python(code, limits=FAST, isolation="unshare").stdout.strip() in {"101", "111"}  # unreachable/refused
