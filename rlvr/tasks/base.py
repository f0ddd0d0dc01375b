"""The Task interface and its registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr.errors import ConfigError
from rlvr.registry import Registry


@dataclass
class Problem:
    """One prompt with what its verifier needs. `fields` are handed to reward functions as keywords."""

    uid: str
    prompt: str
    answer: str | None = None
    solution: str | None = None  # a reference completion, for SFT
    fields: dict[str, Any] = field(default_factory=dict)

    def reward_fields(self) -> dict[str, Any]:
        return {"answer": self.answer, **self.fields}


class Task(ABC):
    """A prompt source plus its verifier."""

    name: str
    verifier: str  # 'module:function' with signature f(prompt, completion, **fields) -> float | dict
    has_rows = False  # problems come from a file, and its constructor takes the data.bad_rows policy
    skipped_rows: Sequence[str] = ()  # 'file, line N: why' for each row the bad-row policy dropped

    @property
    def label(self) -> str:
        """Name used in per-task metrics."""
        return self.name

    @abstractmethod
    def size(self, split: str) -> int | None:
        """Number of problems in `split`, or None for an unbounded procedural source."""

    @abstractmethod
    def problem(self, split: str, index: int) -> Problem:
        """The problem at `index` of `split` (deterministic)."""

    def screen_prompts(self, encode: Callable[[str], list[int]]) -> None:  # noqa: B027 (optional hook)
        """Encode every prompt up front so an unusable one is found before training (tasks read from files);
        procedural tasks have nothing to screen."""

    def corpus(self, n: int = 2000) -> Iterator[str]:
        """Text to train a tiny model's tokenizer on: prompts and solutions of the train split."""
        size = self.size("train")
        for i in range(n if size is None else min(n, size)):
            p = self.problem("train", i)
            yield p.prompt
            yield p.solution or p.answer or ""


TASKS: Registry[type[Task]] = Registry("task")


def make_task(name: str, seed: int, args: dict[str, Any], bad_rows: str = "error") -> Task:
    """The task `name` built from its config args; a task read from a file also gets the bad-row policy
    (its own args.bad_rows wins)."""
    cls = TASKS.get(name)
    if cls.has_rows:
        args = {"bad_rows": bad_rows, **args}
    try:
        return cls(seed=seed, **args)
    except TypeError as e:
        raise ConfigError(f"Bad arguments for task '{name}' (data.tasks[].args): {e}") from None
