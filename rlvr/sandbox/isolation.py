"""The command that wraps the sandboxed interpreter at each isolation level.

- "bwrap": bubblewrap with new pid/net/ipc/uts namespaces (no network), read-only system and Python
  directories, a size-capped tmpfs working directory and /tmp, no host files beyond those.
- "unshare": util-linux `unshare` with new pid/net/ipc/uts/mount namespaces (no network, host processes
  invisible); the host filesystem stays visible, guarded only by file permissions.
- "rlimits": resource limits and a separate session only.

When the caller is root, the sandboxed program runs as a throwaway uid (`setpriv` drops to it), so
root's file permissions don't apply and the process limit (which the kernel never enforces for root)
counts only this run's processes.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys

from rlvr.sandbox.limits import Limits

LEVELS = ("bwrap", "unshare", "rlimits")
SANDBOX_DIR = "/sandbox"  # the working directory inside bubblewrap
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")


def interpreter() -> str:
    """The real Python binary (a virtualenv's python is a symlink into the base install)."""
    return os.path.realpath(sys.executable)


def python_is_world_readable() -> bool:
    """Whether another uid can run our Python outside bubblewrap (every directory down to it o+rx)."""
    path, parts = "/", sys.base_prefix.strip("/").split("/")
    for part in ["", *parts]:
        path = os.path.join(path, part)
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
    return True


def throwaway_uid(level: str) -> int | None:
    """A random unused uid to run as when we are root, else None (stay the calling user). Outside bubblewrap a
    Python under a private home (e.g. /root/.pyenv) is unreadable to other uids, so root stays root there."""
    if os.geteuid() != 0 or (level != "bwrap" and not python_is_world_readable()):
        return None
    return 200_000 + secrets.randbelow(800_000)


def wrapper_binary(name: str) -> str:
    """The absolute path of `bwrap`/`unshare` on the caller's PATH (the sandbox's own PATH is minimal)."""
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not installed (not on PATH)")
    return path


def minimal_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


def bwrap_command(script: str, limits: Limits, as_root: bool) -> list[str]:
    """bubblewrap up to the `--`: `script` (a host file) appears read-only as /sandbox/main.py.

    As root no user namespace is made (a real uid is needed to drop to); only CAP_SETUID/CAP_SETGID are kept
    for `setpriv`, which gives them up with the uid. Otherwise every namespace is unshared."""
    if as_root:
        namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                      "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        namespaces = ["--unshare-all"]
    command = [wrapper_binary("bwrap"), *namespaces, "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in minimal_env(SANDBOX_DIR).items():
        command += ["--setenv", key, value]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            command += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            command += ["--ro-bind", path, path]
    prefix = sys.base_prefix
    if not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS):
        parent = os.path.dirname(prefix)
        ancestors = []
        while parent != "/":
            ancestors.insert(0, parent)
            parent = os.path.dirname(parent)
        for path in ancestors:  # traversable by the uid the program runs as (bwrap would make them 0700)
            command += ["--perms", "0755", "--dir", path]
        command += ["--ro-bind", prefix, prefix]
    size = str(limits.scratch_bytes)
    command += [
        "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
        "--perms", "1777", "--size", size, "--tmpfs", SANDBOX_DIR,
        "--ro-bind", script, f"{SANDBOX_DIR}/main.py",
        "--remount-ro", "/",
        "--chdir", SANDBOX_DIR, "--",
    ]
    return command


def unshare_command(as_root: bool) -> list[str]:
    """util-linux unshare up to the `--`; unprivileged callers map themselves to root in a new user namespace."""
    user = [] if as_root else ["--user", "--map-root-user"]
    return [wrapper_binary("unshare"), *user, "--net", "--ipc", "--uts", "--mount", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--"]
