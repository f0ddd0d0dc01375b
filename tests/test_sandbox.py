"""The sandbox against hostile programs: each attack is contained, scores 0, and leaves the host as it was.

Every attack on the host (files dropped in /tmp, /dev/shm or the parent's working directory; reading /etc/shadow or
/root; ptrace-forging the verdict; network; environment; resource exhaustion) runs at every isolation level rlvr
allows on this machine (the `level` fixture). bubblewrap is the default and must work: without it these tests
fail, naming the install command, rather than skip. A weaker level the code refuses here (e.g. landlock as root
with a private Python) is skipped with the reason the code gives."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from rlvr.sandbox import (
    Limits,
    RunResult,
    SandboxUnavailable,
    check_function_tests,
    check_io_cases,
    isolation_level,
    landlock,
    run_python,
)
from rlvr.sandbox.isolation import LEVELS, interpreter
from rlvr.sandbox.policy import ENV_VAR
from rlvr.sandbox.run import works

FAST = Limits(cpu_s=2, wall_s=3)
INSTALL = ("bubblewrap is the sandbox rlvr requires by default and it does not work here ({why}). Install it: "
           "apt-get install bubblewrap (or `make install` as root); see docs/sandbox.md.")


@pytest.fixture
def bubblewrap() -> None:
    """Fail, not skip, when bubblewrap is missing or cannot start."""
    ok, why = works("bwrap")
    if not ok:
        pytest.fail(INSTALL.format(why=why))


needs_bwrap = pytest.mark.usefixtures("bubblewrap")


@pytest.fixture(params=LEVELS)
def level(request, monkeypatch) -> str:
    """Each isolation level rlvr allows here, opted in to as a user would (the minimum set to it)."""
    name = request.param
    ok, why = works(name)
    if not ok:
        if name == "bwrap":
            pytest.fail(INSTALL.format(why=why))
        pytest.skip(f"rlvr refuses the {name} level on this machine: {why}")
    monkeypatch.setenv(ENV_VAR, name)
    return name


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


def score(body: str, limits: Limits = FAST, isolation: str = "bwrap") -> float:
    """The harness's verdict (under bubblewrap unless another level is named)."""
    return check_function_tests(PROMPT + body, TESTS, "add_scaled", limits, prelude=PROMPT, isolation=isolation)


def run_bwrapped(code: str, limits: Limits = FAST) -> RunResult:
    return run_python(code, limits=limits, isolation="bwrap")


def sandbox_processes() -> list[int]:
    """Host pids of this test process's sandboxes still running: any process whose command line or working
    directory names one of its sandbox directories (bwrap's binds, unshare's and landlock's working directory).
    Programs inside bwrap/unshare die with their pid namespace, whose first process is one of those. Other
    processes' sandboxes on a shared machine are not counted."""
    mark = f"rlvr-sandbox-{os.getpid()}-"
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if mark in cwd or mark.encode() in argv:
            pids.append(int(pid))
    return pids


def leftover_dirs() -> set[str]:
    """This process's sandbox directories (other processes on the machine may be running sandboxes too)."""
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"rlvr-sandbox-{os.getpid()}-")}


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


def test_infinite_loop_is_stopped_by_the_cpu_limit(level):
    result = run_python("while True:\n    pass\n", limits=Limits(cpu_s=1, wall_s=8), isolation=level)
    assert result.status == "killed"  # by RLIMIT_CPU: the wall clock would have made it a 'timeout'
    assert score("    while True:\n        pass\n", Limits(cpu_s=1, wall_s=5), level) == 0.0


def test_sleeping_program_is_stopped_by_the_wall_clock_with_its_children(level):
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)\n"
    start = time.monotonic()
    assert run_python(code, limits=Limits(wall_s=1), isolation=level).status == "timeout"
    assert time.monotonic() - start < 3


def test_fork_bomb_is_capped_at_the_process_limit(level):
    code = textwrap.dedent("""\
        import os, time
        root = os.getpid()
        count = 1
        while True:
            try:
                if os.fork() == 0:
                    time.sleep(60)
                count += 1
            except OSError:
                break
        print(count, flush=True)
        time.sleep(60)
    """)
    result = run_python(code, limits=Limits(processes=16, wall_s=2), isolation=level)
    assert result.status == "timeout"
    assert 2 <= int(result.stdout) <= 16


def test_allocating_10_gb_fails_inside_the_sandbox(level):
    result = run_python("data = bytearray(10 * 1024**3)\nprint('allocated')\n", limits=FAST, isolation=level)
    assert result.status == "error" and "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_printing_1_gb_is_cut_at_the_output_cap(level):
    start = time.monotonic()
    code = "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))\n"
    result = run_python(code, limits=Limits(output_bytes=1 << 20, wall_s=5), isolation=level)
    assert result.status == "output_limit" and result.truncated and len(result.stdout) == 1 << 20
    assert time.monotonic() - start < 3


ATTEMPTS = textwrap.dedent("""\
    import os
    for name, attempt in ATTEMPTS.items():
        try:
            result = attempt()
            print("succeeded:", name, repr(result)[:200])
        except Exception as e:
            print("blocked:", name, type(e).__name__)
""")


def attempts(code: str, level: str, **paths) -> dict[str, str]:
    """Run attacks {name: lambda} in the sandbox; name -> 'succeeded: ...' / 'blocked: ...' lines."""
    result = run_python(f"{code}\n{ATTEMPTS}", limits=FAST, isolation=level)
    assert result.status == "ok", result.stderr
    return {line.split()[1]: line for line in result.stdout.splitlines()}


def test_files_dropped_outside_the_working_directory_never_reach_the_host(level, host_unchanged, tmp_path,
                                                                          monkeypatch):
    """Drops into the host's /tmp, /dev/shm and the parent's working directory, and edits of a host file, are
    contained: what the program may write lands in its own fresh tmpfs or fails."""
    monkeypatch.chdir(tmp_path)  # the parent's working directory
    tag = f"rlvr-drop-{os.getpid()}-{level}"
    targets = {"tmp": f"/tmp/{tag}", "shm": f"/dev/shm/{tag}", "parent_cwd": str(tmp_path / tag),
               "repository": str(Path(__file__).resolve().parent / tag),  # a host directory outside /tmp
               "next_to_python": os.path.join(os.path.dirname(interpreter()), tag), "usr": f"/usr/{tag}",
               "root_dir": f"/{tag}"}
    code = "ATTEMPTS = {\n" + "".join(f"    {name!r}: lambda: open({path!r}, 'w').write('pwned'),\n"
                                       for name, path in targets.items())
    code += f"    'overwrite_sentinel': lambda: open({str(host_unchanged)!r}, 'w').write('pwned'),\n"
    code += f"    'delete_sentinel': lambda: os.remove({str(host_unchanged)!r}),\n"
    code += "    'own_dir': lambda: open('scratch.txt', 'w').write('fine'),\n}"
    try:
        outcome = attempts(code, level)
        assert outcome["own_dir"].startswith("succeeded"), outcome["own_dir"]
        for name in ("repository", "next_to_python", "usr", "root_dir", "overwrite_sentinel", "delete_sentinel"):
            assert outcome[name].startswith("blocked"), outcome[name]
        escaped = [path for path in targets.values() if os.path.exists(path)]
        assert escaped == [], f"files dropped on the host at {level}: {escaped}"
    finally:
        for path in targets.values():
            if os.path.exists(path):
                os.remove(path)


def test_host_secrets_cannot_be_read(level, tmp_path):
    """/etc/shadow, /root and a root-only file of the host stay unreadable at every level."""
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret-token")
    secret.chmod(0o600)
    code = ("ATTEMPTS = {'shadow': lambda: open('/etc/shadow').read(), 'root': lambda: sorted(os.listdir('/root')),"
            f" 'secret': lambda: open({str(secret)!r}).read()}}")
    outcome = attempts(code, level)
    assert outcome["shadow"].startswith("blocked"), outcome["shadow"]
    assert outcome["secret"].startswith("blocked"), outcome["secret"]
    if outcome["root"].startswith("succeeded"):  # bwrap and unshare show an empty /root holding only the Python path
        python_path = {Path(sys.base_prefix).relative_to("/root").parts[0]} if sys.base_prefix.startswith("/root/") \
            else set()
        listed = eval(outcome["root"].split(" ", 2)[2])
        assert set(listed) <= python_path, listed


# Forge a pass: while the tests' process waits on the pipe for the function's result, attach to it and make the
# interrupted read() restart as exit_group(0). CAP_SYS_PTRACE (root keeping its capabilities) would override the
# harness's non-dumpable flag; the sandbox must leave the program without it.
PTRACE_FORGERY = textwrap.dedent("""\
    import ctypes, os


    def add_scaled(a, b):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        tests = os.getppid()
        if libc.ptrace(16, tests, None, None) != 0:  # PTRACE_ATTACH
            return "attach refused: " + os.strerror(ctypes.get_errno())
        os.waitpid(tests, 0x40000000)  # __WALL
        regs = (ctypes.c_ulong * 27)()  # user_regs_struct (x86-64)
        libc.ptrace(12, tests, None, regs)  # PTRACE_GETREGS
        regs[15], regs[14] = 231, 0  # orig_rax = exit_group, rdi = 0
        libc.ptrace(13, tests, None, regs)  # PTRACE_SETREGS
        libc.ptrace(17, tests, None, None)  # PTRACE_DETACH: read() restarts as exit_group(0)
        return 0
""")
FORGERY_TESTS = "assert add_scaled(1, 2) == 12\n"
needs_x86_64 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the forgery pokes x86-64 registers")


@needs_x86_64
def test_the_ptrace_forgery_passes_a_wrong_program_outside_the_sandbox():
    """The attack is real: run the harness as a plain root process and the wrong program 'passes'. The forgery
    races the harness (it rewrites the syscall the harness is blocked in); it loses about one try in eight on a busy
    machine, so it gets five tries, as an attacker would."""
    if os.geteuid() != 0:
        pytest.skip("forging needs CAP_SYS_PTRACE, which only root holds")
    from rlvr.sandbox.checks import HARNESS_SOURCE

    job = {"program": PTRACE_FORGERY, "tests": FORGERY_TESTS, "entry_point": "add_scaled", "prelude": "",
           "calls_check": False}
    import json

    codes = []
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", HARNESS_SOURCE], input=json.dumps(job), text=True, timeout=30,
                              capture_output=True)
        codes.append(done.returncode)
        if done.returncode == 0:  # exit_group(0) before the assert could fail
            break
    assert 0 in codes, f"the forgery never won its race: exit codes {codes}"


@needs_x86_64
def test_ptrace_on_the_tests_process_cannot_forge_a_pass(level):
    assert check_function_tests(PTRACE_FORGERY, FORGERY_TESTS, "add_scaled", FAST, isolation=level) == 0.0
    # and it failed because the attach was refused, not by accident
    refused = "assert add_scaled(1, 2).startswith('attach refused: Operation not permitted')\n"
    assert check_function_tests(PTRACE_FORGERY, refused, "add_scaled", FAST, isolation=level) == 1.0


def test_no_tcp_even_to_localhost(level):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n" \
               "    print('connected')\nexcept OSError as e:\n    print('blocked', e)\n"
        result = run_python(code, limits=FAST, isolation=level)
        assert result.stdout.startswith("blocked"), result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()


def test_parent_environment_is_not_visible(level, monkeypatch):
    secret = f"s3cret-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("RLVR_SANDBOX_TEST_SECRET", secret)
    code = textwrap.dedent("""\
        import os
        print(dict(os.environ))
        for pid in filter(str.isdigit, os.listdir("/proc")) if os.access("/proc", os.R_OK) else ():
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
    """)
    result = run_python(code, limits=FAST, isolation=level)
    assert result.status == "ok" and secret not in result.stdout
    assert "RLVR_SANDBOX_TEST_SECRET" not in result.stdout


def test_the_program_holds_no_capability_and_cannot_gain_one(level):
    code = ("import re\ntry:\n    status = open('/proc/self/status').read()\n"
            "    print(*re.findall(r'(?:CapEff|CapPrm|CapBnd|NoNewPrivs):\\s*(\\S+)', status))\n"
            "except OSError as e:\n    print('no /proc', e)\n")
    result = run_python(code, limits=FAST, isolation=level)
    if level == "landlock":
        assert result.stdout.startswith("no /proc")  # Landlock hides /proc entirely
    else:
        eff, prm, bnd, no_new_privs = result.stdout.split()
        assert int(eff, 16) == int(prm, 16) == 0 and no_new_privs == "1"
        assert level == "bwrap" or int(bnd, 16) == 0


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


# --- failing closed ----------------------------------------------------------------------------------------

@pytest.fixture
def without_bwrap(tmp_path, monkeypatch) -> dict[str, str]:
    """A PATH on which bubblewrap is missing (as on a fresh machine) but util-linux is there; the environment for
    subprocesses is returned."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "setpriv", "prlimit"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    path = f"{bin_dir}:{os.path.dirname(sys.executable)}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    works.cache_clear()
    yield {**os.environ, "PATH": path}
    works.cache_clear()


def test_without_bwrap_and_no_opt_in_untrusted_code_is_refused(without_bwrap, monkeypatch):
    assert shutil.which("bwrap") is None
    with pytest.raises(SandboxUnavailable) as refused:
        isolation_level()
    message = str(refused.value)
    assert "apt-get install bubblewrap" in message and "sandbox.isolation: unshare" in message
    assert "bwrap is not installed" in message
    with pytest.raises(SandboxUnavailable):
        run_python("print('never runs')")
    with pytest.raises(SandboxUnavailable):
        check_function_tests(PROMPT + SOLUTION, TESTS, "add_scaled", FAST, prelude=PROMPT)
    monkeypatch.setenv(ENV_VAR, "unshare")  # the explicit opt-in
    assert isolation_level() == "unshare"
    assert run_python("print('ok')", limits=FAST).isolation == "unshare"


def test_an_explicit_level_below_the_minimum_is_refused(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "bwrap")
    with pytest.raises(SandboxUnavailable, match="sandbox.isolation: unshare"):
        run_python("print('x')", isolation="unshare")


def test_the_minimum_reaches_the_reward_workers(without_bwrap, tmp_path, monkeypatch):
    from rlvr.rewards.pool import RewardPool, RewardRequest

    reward = tmp_path / "sandboxed.py"
    reward.write_text("from rlvr.sandbox import run_python\n\n\ndef level(prompt, completion, **_):\n"
                      "    return {'score': 1.0, 'unshare': float(run_python('print(1)').isolation == 'unshare')}\n")
    request = RewardRequest(0, f"{reward}:level", "", "")
    with RewardPool(num_workers=1, timeout_s=30) as pool:
        pool.start()
        refused = pool.score([request])[0]
    assert refused.status == "error" and "apt-get install bubblewrap" in refused.message
    monkeypatch.setenv(ENV_VAR, "unshare")
    with RewardPool(num_workers=1, timeout_s=30) as pool:
        pool.start()
        ran = pool.score([request])[0]
    assert ran.status == "ok" and ran.extras == {"unshare": 1.0}


def code_io_recipe(tmp_path) -> str:
    problems = tmp_path / "problems.jsonl"
    problems.write_text('{"prompt": "Echo.", "tests": [{"input": "1\\n", "output": "1\\n"}]}\n' * 4)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"steps: 1\nmodel: {{name: tiny}}\ndata:\n  tasks:\n    - name: code_io\n"
                      f"      args: {{path: {problems}}}\ntracking: {{output_dir: {tmp_path / 'run'}}}\n")
    return str(recipe)


def test_rlvr_train_with_a_code_task_refuses_at_start_up_without_bwrap(without_bwrap, tmp_path):
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rlvr", "train", code_io_recipe(tmp_path)], env=without_bwrap,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "apt-get install bubblewrap" in done.stderr and "sandbox.isolation: unshare" in done.stderr
    assert not (tmp_path / "run" / "initial-model").exists()  # refused before any model was built
    assert time.monotonic() - start < 60


def test_rlvr_verify_with_a_code_task_refuses_without_bwrap(without_bwrap, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"completion": "print(input())", "tests": [{"input": "1\\n", "output": "1\\n"}]}\n')
    done = subprocess.run([sys.executable, "-m", "rlvr", "verify", "--task", "code_io", str(rows)],
                          env=without_bwrap, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "apt-get install bubblewrap" in done.stderr, done.stderr


def test_landlock_rules_confine_a_process(tmp_path):
    """The Landlock mechanism itself (the landlock level uses it): reads only beneath the allowed directories,
    writes only beneath the working directory, no TCP, no signals out."""
    if landlock.abi_version() < landlock.ABI_NEEDED:
        pytest.skip(f"Landlock ABI {landlock.ABI_NEEDED} is not available on this kernel")
    allowed = tmp_path / "work"
    allowed.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    ruleset = landlock.ruleset(["/usr", "/lib", "/lib64", "/bin", sys.base_prefix, "/etc/ld.so.cache"], [str(allowed)])
    code = textwrap.dedent(f"""\
        import os, socket
        def attempt(f):
            try:
                f()
                return "ok"
            except OSError as e:
                return type(e).__name__
        print(attempt(lambda: open({str(outside)!r}).read()), attempt(lambda: open("/etc/passwd").read()),
              attempt(lambda: open("/tmp/rlvr-landlock-drop", "w")), attempt(lambda: open("mine.txt", "w").write("x")),
              attempt(lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)),
              attempt(lambda: os.kill({os.getpid()}, 0)))
    """)
    try:
        done = subprocess.run([interpreter(), "-I", "-S", "-c", code], cwd=allowed, capture_output=True, text=True,
                              preexec_fn=landlock.enforcer(ruleset), timeout=30)
    finally:
        os.close(ruleset)
    assert done.stdout.split() == ["PermissionError"] * 3 + ["ok", "PermissionError", "PermissionError"], done.stderr
    assert not os.path.exists("/tmp/rlvr-landlock-drop")
