"""The minimum isolation untrusted code may run under (config `sandbox.isolation`, default 'bwrap'), and the
refusal when this machine cannot provide it.

The setting travels to reward worker processes (and Ray workers) in the RLVR_SANDBOX_ISOLATION environment
variable, set by `configure` at start-up; every sandboxed run checks it, so no code ever runs weaker than asked.
"""

from __future__ import annotations

import os

from rlvr.errors import RlvrError
from rlvr.sandbox.isolation import LEVELS

ENV_VAR = "RLVR_SANDBOX_ISOLATION"
DEFAULT = "bwrap"
GIVES_UP = {
    "unshare": "namespaces and a private read-only filesystem view without bubblewrap (needs root or unprivileged "
               "user namespaces); the program still sees the host's system files",
    "landlock": "no namespaces: the host network stack is shared (TCP is blocked, UDP is not) and host processes "
                "are visible in /proc listings; file access is limited by Landlock (Linux 6.12+)",
}


class SandboxUnavailable(RlvrError):
    """Untrusted code would have to run with weaker isolation than configured."""


def configure(level: str) -> None:
    """Make `level` the minimum for this process and the worker processes it starts."""
    os.environ[ENV_VAR] = checked_level(level)


def checked_level(level: str) -> str:
    if level not in LEVELS:
        raise RlvrError(f"sandbox.isolation must be one of {', '.join(LEVELS)}, got {level!r}")
    return level


def minimum_isolation() -> str:
    """The configured minimum isolation (RLVR_SANDBOX_ISOLATION, default 'bwrap')."""
    return checked_level(os.environ.get(ENV_VAR) or DEFAULT)


def at_least(level: str, minimum: str) -> bool:
    return LEVELS.index(level) <= LEVELS.index(minimum)


def refusal(minimum: str, why: dict[str, str]) -> SandboxUnavailable:
    """The error naming what is missing, the install command and the explicit opt-ins with what they give up
    (`why`: level -> why it does not work here, '' when it does)."""
    missing = "; ".join(f"{level}: {why.get(level) or 'does not work here'}"
                        for level in LEVELS[: LEVELS.index(minimum) + 1])
    options = "".join(f"\n  - sandbox.isolation: {level}  (gives up: {GIVES_UP[level]})"
                      + (f" [does not work here either: {why[level]}]" if why.get(level) else "")
                      for level in LEVELS[LEVELS.index(minimum) + 1 :])
    return SandboxUnavailable(
        f"Refusing to run untrusted code: sandbox.isolation is '{minimum}' (the minimum), and it is not available "
        f"here ({missing}).\nInstall bubblewrap: apt-get install bubblewrap (Debian/Ubuntu; dnf install bubblewrap "
        "on Fedora), or `make install` as root."
        + (f"\nOr opt in to weaker isolation explicitly (docs/sandbox.md):{options}" if options else "")
        + f"\n(Outside a recipe: {ENV_VAR}=LEVEL.)"
    )
