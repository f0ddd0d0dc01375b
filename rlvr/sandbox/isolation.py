"""The command that wraps the sandboxed interpreter at each isolation level, strongest first.

- "bwrap": bubblewrap with new pid/net/ipc/uts namespaces (no network), read-only system and Python
  directories, a size-capped tmpfs working directory and /tmp, no host files beyond those.
- "unshare": util-linux `unshare` with new pid/net/ipc/uts/mount namespaces; in the private mount namespace every
  mount is read-only, /tmp, /dev/shm and the working directory are fresh tmpfs, and the home directory holding
  the Python install (e.g. /root) is replaced by an empty one holding only that install.
- "landlock": no namespaces; a Landlock ruleset (rlvr/sandbox/landlock.py) lets the program read only the system
  and Python directories and write only its working directory, with no TCP and no signals out. As root it needs a
  world-readable Python install (to run as a throwaway uid), else it refuses to run.

At every level the program holds no capability (bubblewrap drops them; elsewhere `setpriv --bounding-set=-all
--inh-caps=-all`), runs with no_new_privs, and, when the caller is root, runs as a throwaway uid.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys

from rlvr.sandbox.limits import Limits

LEVELS = ("bwrap", "unshare", "landlock")  # strongest first
SANDBOX_DIR = "/sandbox"  # the working directory inside bubblewrap
UNSHARE_DIR = "/tmp/sandbox"  # the working directory inside unshare's mount namespace
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

# Runs as root inside unshare's new mount namespace, in the host working directory holding main.py; then runs
# "$@" (setpriv ... prlimit ... python) as its child, so that the program is not the pid namespace's init (which
# would ignore signals) and its death by a signal is reported as 128 + N. $1: tmpfs size, $2: Python install,
# $3: its ancestor to hide ('' for none), $4: the working directory to create.
UNSHARE_SETUP = r"""
set -eu
size=$1 prefix=$2 hide=$3 work=$4
shift 4
exec 3< main.py
mount -t tmpfs -o "size=$size,mode=1777" tmpfs /tmp
mkdir /tmp/.python
mount --bind "$prefix" /tmp/.python
if [ -n "$hide" ]; then
  mount -t tmpfs -o size=1m,mode=0755 tmpfs "$hide"
  mkdir -p "$prefix"
  mount --bind /tmp/.python "$prefix"
fi
umount /tmp/.python
rmdir /tmp/.python
mount -t tmpfs -o "size=$size,mode=1777" tmpfs /dev/shm
mkdir "$work"
mount -t tmpfs -o "size=$size,mode=1777" tmpfs "$work"
cat <&3 > "$work/main.py"
exec 3<&-
chmod 0644 "$work/main.py"
mounts=$(while read -r _ target _; do printf '%b\n' "$target"; done < /proc/self/mounts)
echo "$mounts" | while IFS= read -r target; do
  case $target in /tmp|/dev/shm|"$work") continue ;; esac
  mount -o remount,bind,ro "$target" 2>/dev/null || { echo "sandbox: cannot make $target read-only" >&2; exit 125; }
done
cd "$work"
"$@"
"""


def interpreter() -> str:
    """The real Python binary (a virtualenv's python is a symlink into the base install)."""
    return os.path.realpath(sys.executable)


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b']."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def python_is_world_readable() -> bool:
    """Whether another uid can run our Python as installed (every directory down to it o+rx)."""
    return all(os.stat(p).st_mode & 0o005 == 0o005 for p in ["/", *_ancestors(sys.base_prefix), sys.base_prefix])


def private_home() -> str:
    """The topmost directory above the Python install that other uids cannot enter ('' for none): the unshare
    level replaces it by an empty directory holding only the install (so a throwaway uid can run Python, and
    nothing else of it is visible)."""
    return next((p for p in _ancestors(sys.base_prefix) if os.stat(p).st_mode & 0o001 == 0), "")


def throwaway_uid(level: str) -> int | None:
    """A random unused uid to run as when we are root, else None (stay the calling user). Under landlock (no mount
    namespace) only when other uids can read the Python install; otherwise that level refuses to run as root."""
    if os.geteuid() != 0 or (level == "landlock" and not python_is_world_readable()):
        return None
    return 200_000 + secrets.randbelow(800_000)


def wrapper_binary(name: str) -> str:
    """The absolute path of `bwrap`/`unshare`/`setpriv`/`prlimit` on the caller's PATH (the sandbox's own PATH is
    minimal)."""
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not installed (not on PATH)")
    return os.path.realpath(path)


def minimal_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


def working_dir(level: str, host_dir: str) -> str:
    """The program's working directory as it sees it."""
    return {"bwrap": SANDBOX_DIR, "unshare": UNSHARE_DIR}.get(level, host_dir)


def privilege_drop(level: str, uid: int | None) -> list[str]:
    """`setpriv` arguments that switch to `uid` and, outside bubblewrap (which drops capabilities itself and sets
    no_new_privs), empty the bounding and inheritable capability sets and set no_new_privs, so that even a
    program left as uid 0 holds no capability after its exec."""
    args = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    if level != "bwrap" and (os.geteuid() == 0 or level == "unshare"):  # unshare maps a non-root caller to root
        args += ["--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
    return [wrapper_binary("setpriv"), *args] if args else []


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
        for path in _ancestors(prefix):  # traversable by the uid the program runs as (bwrap would make them 0700)
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


def unshare_command(limits: Limits, as_root: bool) -> list[str]:
    """util-linux unshare and the mount set-up (UNSHARE_SETUP) up to the command it execs; unprivileged callers map
    themselves to root in a new user namespace."""
    user = [] if as_root else ["--user", "--map-root-user"]
    hide = private_home() if as_root else ""
    return [wrapper_binary("unshare"), *user, "--net", "--ipc", "--uts", "--mount", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--", "/bin/sh", "-c", UNSHARE_SETUP, "sandbox-setup", str(limits.scratch_bytes),
            sys.base_prefix, hide, UNSHARE_DIR]


def landlock_paths(host_dir: str) -> tuple[list[str], list[str]]:
    """(read-only, read-write) paths of the landlock level: system and Python directories and the loader cache;
    the working directory and harmless devices."""
    return [*SYSTEM_DIRS, sys.base_prefix, "/etc/ld.so.cache"], [host_dir, *DEVICES]
