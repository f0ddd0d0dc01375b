"""Which problems a step trains on. State is counters plus one RNG, so a resumed run draws the
identical sequence of prompts."""

from __future__ import annotations

import random
from typing import Any

from rlvr.tasks.base import Problem, Task


class MixtureSampler:
    """Draws each prompt's task by weight, then the task's next problem: procedural tasks in index order,
    finite datasets in a fresh shuffle every epoch."""

    def __init__(self, tasks: list[Task], weights: list[float], seed: int):
        self.tasks, self.seed = tasks, seed
        total = sum(weights)
        self.weights = [w / total for w in weights]
        self.drawn = [0] * len(tasks)
        self._rng = random.Random(f"mixture-{seed}")
        self._orders: dict[tuple[int, int], list[int]] = {}

    def _index(self, t: int, position: int) -> int:
        size = self.tasks[t].size("train")
        if size is None:
            return position
        epoch = position // size
        if (t, epoch) not in self._orders:
            order = list(range(size))
            random.Random(f"epoch-{self.seed}-{t}-{epoch}").shuffle(order)
            self._orders = {(t, epoch): order}  # keep only the current epoch's order
        return self._orders[(t, epoch)][position % size]

    def next_batch(self, n: int) -> list[tuple[int, Problem]]:
        out = []
        for _ in range(n):
            t = 0 if len(self.tasks) == 1 else self._rng.choices(range(len(self.tasks)), self.weights)[0]
            out.append((t, self.tasks[t].problem("train", self._index(t, self.drawn[t]))))
            self.drawn[t] += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"drawn": list(self.drawn), "rng": self._rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.drawn = list(state["drawn"])
        self._rng.setstate(state["rng"])
