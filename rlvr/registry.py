"""Name -> object registries, so variants plug in without touching the trainer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from rlvr.errors import ConfigError, did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of functions or classes with one-line descriptions."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        if name not in self._items:
            raise ConfigError(
                f"Unknown {self.kind} '{name}'.{did_you_mean(name, self._items)} "
                f"Available: {', '.join(sorted(self._items))}."
            )
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def summary(self, name: str) -> str:
        """The first paragraph of the docstring, on one line."""
        doc = (getattr(self._items[name], "__doc__", None) or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def __contains__(self, name: str) -> bool:
        return name in self._items
