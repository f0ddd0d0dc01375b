"""The messages between the reward pool and its worker processes (rlvr.rewards.pool, rlvr.rewards.worker), as named
types both sides share.

Pool to worker: a list of `RewardLoad` first (what to load before reporting ready), then lists of `RewardRequest`
(a chunk to score in order), and `Stop`. Worker to pool: `Loading` / `Loaded` around each load (a load failure is
`LoadFailed`, after which the worker exits), `Ready` once the start-up loads are done, and `ItemScored` per request
as it finishes.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlvr.verifiers.verdict import SpanScore

Status = Literal["ok", "error", "timeout", "crash"]


def spec_label(spec: str | bytes) -> str:
    """How a reward spec is named in messages: a file path relative to the working directory where it lies below
    it; a pickled callable as such."""
    if isinstance(spec, bytes):
        return "a Python callable"
    target, _, function = spec.rpartition(":")
    if target.endswith(".py"):
        try:
            target = str(Path(target).resolve().relative_to(Path.cwd()))
        except ValueError:
            pass
        return f"{target}:{function}"
    return spec


@dataclass
class RewardLoad:
    """A reward function a worker loads before it reports ready: its spec, the `args` of its config entry (what a
    registered reward preloads for), and how messages name it."""

    spec: str | bytes
    args: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or spec_label(self.spec)


@dataclass
class RewardRequest:
    """One call of a reward function. A batched request holds lists (prompts, completions, and each field
    per sample) and is answered with one value per sample. `spans`: a process reward's call, answered with its
    spans (rlvr.rewards.contract)."""

    key: Hashable
    spec: str | bytes  # 'module:function', 'file.py:function', or a pickled callable (rlvr.rewards.callables)
    prompt: str | list[str]
    completion: str | list[str]
    fields: dict[str, Any] = field(default_factory=dict)
    batched: bool = False
    label: str = ""  # how messages name the reward (default: from the spec)
    spans: bool = False

    @property
    def name(self) -> str:
        return self.label or spec_label(self.spec)


@dataclass
class RewardOutcome:
    """`value`, `extras`, `answer`, `spans` and `payload` are per sample lists for a batched request. `answer` is
    (text or None,) when the reward said which final answer it scored (rlvr.rewards.contract.reported_answer), ()
    when it did not; `spans` the spans it returned (None: none); `payload` what it handed back to its task."""

    status: Status
    value: float | list[float] = 0.0
    extras: dict[str, float] | list[dict[str, float]] = field(default_factory=dict)
    message: str = ""
    answer: tuple | list[tuple] = ()
    spans: list[SpanScore] | None | list[list[SpanScore] | None] = None
    payload: Any = None


@dataclass
class Stop:
    """Pool to worker: exit."""


@dataclass
class Loading:
    """Worker to pool: loading `label` began (its time counts against rewards.load_timeout_s, not an item's)."""

    label: str


@dataclass
class Loaded:
    label: str
    seconds: float


@dataclass
class LoadFailed:
    label: str
    message: str


@dataclass
class Ready:
    """Worker to pool: every start-up load is done; send items."""


@dataclass
class ItemScored:
    """Worker to pool: the outcome of the request with `key` (requests are answered in the order sent)."""

    key: Hashable
    outcome: RewardOutcome


WorkerMessage = Loading | Loaded | LoadFailed | Ready | ItemScored
