"""Name -> object registries, so variants plug in without touching the trainer.

Every registry is also listed by its kind (`registry_of("sampler")`), so the config schema can check a name
against the registry that owns it without importing the plug-in package that fills it (the layers run one way).
The built-in plug-in packages are imported by `rlvr/__init__.py`, so their registries are full whenever any part
of rlvr is imported."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from rlvr.errors import ConfigError, did_you_mean

T = TypeVar("T")
_BY_KIND: dict[str, Registry] = {}


class Registry(Generic[T]):
    """A named collection of functions or classes with one-line descriptions, and what each needs."""

    def __init__(self, kind: str):
        if kind in _BY_KIND:
            raise ValueError(f"a registry of {kind} exists already")
        self.kind = kind
        self._items: dict[str, T] = {}
        self._needs: dict[str, frozenset[str]] = {}
        _BY_KIND[kind] = self

    def register(self, name: str, needs: Iterable[str] = ()) -> Callable[[T], T]:
        """Register under `name`; `needs` names what the piece reads that only some runs provide (an advantage
        estimator's step rewards, tree paths or roles), so a config that does not provide it is refused at load."""

        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = obj
            self._needs[name] = frozenset(needs)
            return obj

        return add

    def get(self, name: str) -> T:
        if name not in self._items:
            raise ConfigError(
                f"Unknown {self.kind} '{name}'.{did_you_mean(name, self._items)} "
                f"Available: {', '.join(sorted(self._items))}."
            )
        return self._items[name]

    def needs(self, name: str) -> frozenset[str]:
        """What `name` was registered as needing (an unknown name is a ConfigError, as in `get`)."""
        self.get(name)
        return self._needs[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def summary(self, name: str) -> str:
        """The first paragraph of the docstring, on one line."""
        doc = (getattr(self._items[name], "__doc__", None) or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def __contains__(self, name: str) -> bool:
        return name in self._items


def registry_of(kind: str) -> Registry:
    """The registry of `kind` (its `Registry(kind)` name, e.g. 'sampler', 'environment')."""
    if kind not in _BY_KIND:
        raise LookupError(f"no registry of {kind} is loaded (known: {', '.join(sorted(_BY_KIND))}); import rlvr, "
                          "whose __init__ loads the built-in plug-in packages")
    return _BY_KIND[kind]
