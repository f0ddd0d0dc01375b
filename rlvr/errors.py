"""User-facing errors: one message that names the problem and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RlvrError(Exception):
    """A mistake the user can fix; the CLI prints the message alone, without a traceback."""


class ConfigError(RlvrError):
    """A bad config key, type or value."""


class DataError(RlvrError):
    """A bad dataset file, row or column."""


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The closest valid name to `name`, or None when nothing is close."""
    matches = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return matches[0] if matches else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' Did you mean 'x'?' when a close valid name exists, else ''."""
    best = nearest(name, choices)
    return f" Did you mean '{best}'?" if best else ""
