"""Landlock (Linux 6.12+, ABI 6): an unprivileged, path-based allow-list for a process and its children, used by the
`landlock` isolation level where namespaces cannot be made. The sandboxed program may read and execute only
the system and Python directories, read and write only its working directory, reach no TCP port, and neither
signal nor connect (abstract unix sockets) to any process outside its sandbox. See the kernel's
Documentation/userspace-api/landlock.rst; the syscalls are called through ctypes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterable

ABI_NEEDED = 6  # signal and abstract-socket scoping
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
ALL_FS = (1 << 16) - 1  # ABI 5: execute .. ioctl_dev, refer and truncate included
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_EXECUTE = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    version = _libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                            ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, int(version))


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock {what}: {os.strerror(errno)}")
    return result


def ruleset(read_only: Iterable[str], read_write: Iterable[str]) -> int:
    """A ruleset fd (close-on-exec): everything denied but reading/executing beneath `read_only` and every file
    operation beneath `read_write` (paths that do not exist are left out); no TCP; scoped signals and sockets."""
    if abi_version() < ABI_NEEDED:
        raise OSError(f"Landlock ABI {ABI_NEEDED} (Linux 6.12+) is needed, this kernel has ABI {abi_version()}")
    attr = RulesetAttr(ALL_FS, NET_BIND_TCP | NET_CONNECT_TCP, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    fd = _check(_libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                              ctypes.c_uint32(0)), "create_ruleset")
    try:
        for paths, access in ((read_only, READ_EXECUTE), (read_write, ALL_FS)):
            for path in paths:
                _allow(fd, path, access)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _allow(ruleset_fd: int, path: str, access: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            access &= FILE_ONLY
        rule = PathBeneathAttr(access, target)
        _check(_libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset_fd), ctypes.c_int(RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0)), f"add_rule {path}")
    finally:
        os.close(target)


def enforcer(ruleset_fd: int) -> Callable[[], None]:
    """A preexec_fn that sets no_new_privs and enforces the ruleset on the child before it execs."""
    prctl, syscall = _libc.prctl, _libc.syscall

    def enforce() -> None:
        if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")  # never run the program unconfined

    return enforce
