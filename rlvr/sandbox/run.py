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

from rlvr.sandbox.isolation import (
    LEVELS,
    bwrap_command,
    interpreter,
    minimal_env,
    throwaway_uid,
    unshare_command,
)
from rlvr.sandbox.limits import Limits

logger = logging.getLogger("rlvr.sandbox")

Status = Literal["ok", "error", "killed", "timeout", "output_limit"]
Isolation = Literal["bwrap", "unshare", "rlimits"]

PRLIMIT_FLAGS = {"RLIMIT_CPU": "--cpu", "RLIMIT_AS": "--as", "RLIMIT_FSIZE": "--fsize", "RLIMIT_NOFILE": "--nofile",
                 "RLIMIT_NPROC": "--nproc", "RLIMIT_CORE": "--core"}


def launcher(uid: int | None, limits: Limits) -> list[str]:
    """What runs first inside the sandbox, each step exec'ing the next in the same process: util-linux's
    `setpriv` drops root to the throwaway uid (clearing groups and, with the uid change, all capabilities),
    `prlimit` sets the rlimits (the process limit is set here, inside the new namespaces, so it counts only
    this run's processes), then a fresh interpreter runs main.py. Two small C programs instead of a Python
    bootstrap save an interpreter start per run."""
    drop = [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    prlimit = [shutil.which("prlimit") or "/usr/bin/prlimit",
               *(f"{PRLIMIT_FLAGS[name]}={soft}:{hard}" for name, soft, hard in limits.rlimits()), "--"]
    return (drop if uid is not None else []) + prlimit + [interpreter(), "-I", "-S", "main.py"]


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
    """Run `code` as a script in a fresh sandbox (see `isolation_level`) and return its output and status.

    The whole process tree is killed at `limits.wall_s` or when an output passes `limits.output_bytes`,
    and the temporary working directory is removed afterwards."""
    level = isolation or isolation_level()
    if level not in LEVELS:
        raise ValueError(f"isolation must be one of {', '.join(LEVELS)}, got {level!r}")
    uid = throwaway_uid(level)
    host_dir = tempfile.mkdtemp(prefix="rlvr-sandbox-")
    try:
        script = os.path.join(host_dir, "main.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(code)
        os.chmod(script, 0o644)
        if uid is not None and level != "bwrap":
            os.chown(host_dir, uid, uid)  # the program's working directory
        python = launcher(uid, limits)
        if level == "bwrap":
            command = bwrap_command(script, limits, as_root=uid is not None) + python
        elif level == "unshare":
            command = unshare_command(as_root=uid is not None) + python
        else:
            command = python
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=host_dir,
            env=minimal_env(host_dir), start_new_session=True,
            preexec_fn=None if level == "bwrap" else die_with_parent_hook(),
        )
        try:
            stdout, stderr, stop = exchange(proc, stdin.encode(), limits)
        finally:
            kill_tree(proc, uid if level == "rlimits" else None)
    finally:
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
    """ok / error / killed from an exit code; bubblewrap reports a child killed by signal N as 128 + N."""
    if returncode == 0:
        return "ok"
    if returncode < 0 or (level == "bwrap" and returncode - 128 in {s.value for s in signal.Signals}):
        return "killed"
    return "error"


def kill_tree(proc: subprocess.Popen, uid: int | None) -> None:
    """Kill the run's process group; with `uid`, also every process of that throwaway uid (one that left the
    group). Under bwrap/unshare the pid namespace goes down with its first process, taking everything in it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if uid is not None:  # kill(-1) as that uid signals all its processes but the caller
        subprocess.run([interpreter(), "-I", "-S", "-c", "import os; os.kill(-1, 9)"], user=uid, group=uid,
                       extra_groups=[], env={}, check=False)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()


@functools.cache
def die_with_parent_hook():
    """A preexec_fn that has the child SIGKILLed when its parent (e.g. a reward worker killed for a timeout) dies;
    prctl is looked up here, before the fork."""
    import ctypes

    prctl, pr_set_pdeathsig, sigkill = ctypes.CDLL(None, use_errno=True).prctl, 1, int(signal.SIGKILL)
    return lambda: prctl(pr_set_pdeathsig, sigkill)


def works(level: Isolation) -> tuple[bool, str]:
    """Whether `level` runs a trivial program here, and what went wrong if not."""
    try:
        result = run_python("print('ok')", limits=Limits(wall_s=20), isolation=level)
    except OSError as e:  # e.g. the wrapper binary is missing
        return False, str(e)
    return result.stdout.strip() == "ok", result.stderr.strip()[-500:]


@functools.cache
def isolation_level() -> Isolation:
    """The strongest isolation that works here: 'bwrap', else 'unshare', else 'rlimits' (logged once)."""
    level: Isolation = "rlimits"
    for candidate in ("bwrap", "unshare"):
        ok, why = works(candidate)
        if ok:
            level = candidate
            break
        logger.warning("sandbox: %s is not usable here (%s)", candidate, why or "no output")
    logger.log(logging.INFO if level == "bwrap" else logging.WARNING, "sandbox isolation: %s%s", level,
               "" if level == "bwrap" else "; install bubblewrap for filesystem isolation")
    if level != "bwrap" and os.geteuid() == 0 and throwaway_uid(level) is None:
        logger.warning("sandbox: programs run as root (Python is not readable by other users), so the process "
                       "limit is not enforced and host files are writable")
    return level
