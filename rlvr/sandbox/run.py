"""Run untrusted Python in a separate, isolated, resource-limited process and collect its output."""

from __future__ import annotations

import functools
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Literal

from rlvr.sandbox import landlock
from rlvr.sandbox.isolation import (
    LEVELS,
    bwrap_command,
    interpreter,
    landlock_paths,
    minimal_env,
    privilege_drop,
    throwaway_uid,
    unshare_command,
    working_dir,
    wrapper_binary,
)
from rlvr.sandbox.limits import Limits
from rlvr.sandbox.policy import ENV_VAR, SandboxUnavailable, at_least, configure, minimum_isolation, refusal

logger = logging.getLogger("rlvr.sandbox")

Status = Literal["ok", "error", "killed", "timeout", "output_limit"]
Isolation = Literal["bwrap", "unshare", "landlock"]

PRLIMIT_FLAGS = {"RLIMIT_CPU": "--cpu", "RLIMIT_AS": "--as", "RLIMIT_FSIZE": "--fsize", "RLIMIT_NOFILE": "--nofile",
                 "RLIMIT_NPROC": "--nproc", "RLIMIT_CORE": "--core"}
PR_SET_CHILD_SUBREAPER = 36


def launcher(level: str, uid: int | None, limits: Limits) -> list[str]:
    """What runs first inside the sandbox, each step exec'ing the next in the same process: util-linux's
    `setpriv` drops root to the throwaway uid and every capability (isolation.privilege_drop), `prlimit` sets the
    rlimits (the process limit is set here, inside the new namespaces, so it counts only this run's processes),
    then a fresh interpreter runs main.py. Two small C programs instead of a Python bootstrap save an interpreter
    start per run."""
    prlimit = [wrapper_binary("prlimit"),
               *(f"{PRLIMIT_FLAGS[name]}={soft}:{hard}" for name, soft, hard in limits.rlimits()), "--"]
    return privilege_drop(level, uid) + prlimit + [interpreter(), "-I", "-S", "main.py"]


@dataclass
class RunResult:
    """How a sandboxed run ended. `status`: ok (exit 0), error (other exit code), killed (by a signal, e.g. the
    CPU limit), timeout (wall clock), output_limit (stdout or stderr passed the cap; `truncated` is then True)."""

    status: Status
    returncode: int
    stdout: str
    stderr: str
    truncated: bool
    isolation: Isolation


def run_python(code: str, stdin: str = "", limits: Limits = Limits(), isolation: Isolation | None = None) -> RunResult:
    """Run `code` as a script in a fresh sandbox and return its output and status.

    The sandbox is `isolation`, by default the strongest level that works here (`isolation_level`); either way
    never one weaker than the configured minimum (rlvr.sandbox.policy), which raises SandboxUnavailable. The
    whole process tree is killed at `limits.wall_s` or when an output passes `limits.output_bytes`, and the
    temporary working directory is removed afterwards."""
    if isolation is None:
        return _run(code, stdin, limits, isolation_level())
    if isolation not in LEVELS:
        raise ValueError(f"isolation must be one of {', '.join(LEVELS)}, got {isolation!r}")
    minimum = minimum_isolation()
    if not at_least(isolation, minimum):
        raise SandboxUnavailable(f"Refusing to run untrusted code with isolation '{isolation}': the configured minimum "
                                 f"is '{minimum}'. Opt in with sandbox.isolation: {isolation} ({ENV_VAR}={isolation} "
                                 "outside a recipe); docs/sandbox.md says what it gives up.")
    return _run(code, stdin, limits, isolation)


def _run(code: str, stdin: str, limits: Limits, level: str) -> RunResult:
    uid = throwaway_uid(level)
    host_dir = tempfile.mkdtemp(prefix=f"rlvr-sandbox-{os.getpid()}-")  # the pid: whose run left it, if one did
    ruleset = None
    try:
        script = os.path.join(host_dir, "main.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(code)
        os.chmod(script, 0o644)
        python = launcher(level, uid, limits)
        hooks = [die_with_parent_hook()]
        if level == "bwrap":
            command, hooks = bwrap_command(script, limits, as_root=uid is not None) + python, []
        elif level == "unshare":
            command = unshare_command(limits, as_root=os.geteuid() == 0) + python
        else:
            if os.geteuid() == 0 and uid is None:
                raise OSError("as root, the landlock level needs a Python install other users can read, so that the "
                              "program runs as a throwaway uid (the kernel caps no process count for uid 0)")
            if uid is not None:
                os.chown(host_dir, uid, uid)  # the program's working directory
            ruleset = landlock.ruleset(*landlock_paths(host_dir))
            hooks.append(landlock.enforcer(ruleset))
            command = python
        children = adopt_orphans() if level == "landlock" else set()
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=host_dir,
            env=minimal_env(working_dir(level, host_dir)), start_new_session=True,
            preexec_fn=(lambda: [hook() for hook in hooks]) if hooks else None,
        )
        try:
            stdout, stderr, stop = exchange(proc, stdin.encode(), limits)
        finally:
            kill_tree(proc, uid if level == "landlock" else None, children if level == "landlock" else None)
    finally:
        if ruleset is not None:
            os.close(ruleset)
        shutil.rmtree(host_dir, ignore_errors=True)
    rc = proc.returncode
    return RunResult(stop or status_of(rc, level), rc, stdout.decode(errors="replace"),
                     stderr.decode(errors="replace"), stop == "output_limit", level)


def exchange(proc: subprocess.Popen, stdin: bytes, limits: Limits) -> tuple[bytes, bytes, Status | None]:
    """Feed stdin and read stdout/stderr until the process closes them and exits, the wall clock runs out
    ('timeout') or an output passes its cap ('output_limit')."""
    deadline = time.monotonic() + limits.wall_s
    outputs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    selector = selectors.DefaultSelector()
    for stream in outputs:
        selector.register(stream, selectors.EVENT_READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    with selector:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(outputs[proc.stdout]), bytes(outputs[proc.stderr]), "timeout"
            for key, _ in selector.select(remaining):
                stream = key.fileobj
                if stream is proc.stdin:
                    try:
                        pending = pending[os.write(stream.fileno(), pending[:1 << 16]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program stopped reading its input
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(stream)
                        stream.close()
                    continue
                data = os.read(stream.fileno(), 1 << 16)
                if not data:
                    selector.unregister(stream)
                    continue
                buffer = outputs[stream]
                buffer += data
                if len(buffer) > limits.output_bytes:
                    del buffer[limits.output_bytes:]
                    return bytes(outputs[proc.stdout]), bytes(outputs[proc.stderr]), "output_limit"
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(outputs[proc.stdout]), bytes(outputs[proc.stderr]), "timeout"
    return bytes(outputs[proc.stdout]), bytes(outputs[proc.stderr]), None


def status_of(returncode: int, level: str) -> Status:
    """ok / error / killed from an exit code; bubblewrap and the unshare set-up shell report a child killed by
    signal N as 128 + N."""
    if returncode == 0:
        return "ok"
    if returncode < 0 or (level != "landlock" and returncode - 128 in {s.value for s in signal.Signals}):
        return "killed"
    return "error"


def kill_tree(proc: subprocess.Popen, uid: int | None, children_before: set[int] | None = None) -> None:
    """Kill the run's process group; with `uid`, also every process of that throwaway uid (one that left the
    group); with `children_before`, also every new child this process adopted (landlock: an orphan that left the
    group is re-parented here, see adopt_orphans). Under bwrap/unshare the pid namespace goes down with its first
    process, taking everything in it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if uid is not None:  # kill(-1) as that uid signals all its processes but the caller
        subprocess.run([interpreter(), "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid, group=uid,
                       extra_groups=[], env={}, check=False)
    proc.wait()
    if children_before is not None:
        for _ in range(100):
            orphans = own_children() - children_before
            if not orphans:
                break
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()


def own_children() -> set[int]:
    """Pids of this process's children (all threads), from /proc."""
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return pids


def adopt_orphans() -> set[int]:
    """Make this process a child subreaper (descendants that lose their parent are re-parented here, not to init,
    so a program that detaches with setsid() can still be found and killed); returns the children it has now."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return own_children()


@functools.cache
def die_with_parent_hook():
    """A preexec_fn that has the child SIGKILLed when its parent (e.g. a reward worker killed for a timeout) dies;
    prctl is looked up here, before the fork."""
    import ctypes

    prctl, pr_set_pdeathsig, sigkill = ctypes.CDLL(None, use_errno=True).prctl, 1, int(signal.SIGKILL)
    return lambda: prctl(pr_set_pdeathsig, sigkill)


@functools.cache
def works(level: Isolation) -> tuple[bool, str]:
    """Whether `level` runs a trivial program here, and what went wrong if not (cached per process)."""
    try:
        result = _run("print('ok')", "", Limits(wall_s=20), level)
    except (OSError, subprocess.SubprocessError) as e:  # e.g. the wrapper binary is missing, no Landlock
        return False, str(e)
    ok = result.stdout.strip() == "ok"
    return ok, "" if ok else (result.stderr.strip()[-500:] or f"exit status {result.returncode}")


def isolation_level() -> Isolation:
    """The strongest isolation that works here, if it is at least the configured minimum (sandbox.isolation,
    default 'bwrap'); otherwise SandboxUnavailable, naming the install command and the explicit opt-ins."""
    minimum = minimum_isolation()
    for level in LEVELS:
        ok, why = works(level)
        if ok:
            if not at_least(level, minimum):
                break
            _log_level(level)
            return level
        logger.warning("sandbox: %s is not usable here (%s)", level, why)
    raise refusal(minimum, {level: works(level)[1] for level in LEVELS})


def prepare_sandbox(level: str, tasks) -> None:
    """At start-up: make `level` the minimum for this process and its workers, and when a task runs untrusted code
    (`Task.runs_untrusted_code`), refuse now, before any compute, if this machine cannot isolate it that well."""
    configure(level)
    if any(getattr(task, "runs_untrusted_code", False) for task in tasks):
        isolation_level()


@functools.cache
def _log_level(level: str) -> None:
    logger.log(logging.INFO if level == "bwrap" else logging.WARNING, "sandbox isolation: %s%s", level,
               "" if level == "bwrap" else " (opted in with sandbox.isolation; see docs/sandbox.md for what it gives up)")
