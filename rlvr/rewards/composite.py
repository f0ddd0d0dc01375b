"""A weighted sum of named reward functions, scored in the worker pool; each is reported separately.

The task's verifier is always scored (weight 0 when not listed) because `accuracy` is its verdict.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from rlvr.config import RewardFunctionConfig
from rlvr.rewards.loading import resolve_function
from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.tasks.base import Problem, Task

VERIFIER = "verifier"


@dataclass
class Scored:
    total: torch.Tensor  # [N] weighted sum
    per_function: dict[str, torch.Tensor]  # name -> [N]
    correct: torch.Tensor  # [N] bool, the task verifier's verdict (score >= 1)
    failures: dict[str, Counter]  # name -> Counter(error=, timeout=, crash=)
    extras: dict[str, torch.Tensor]  # 'name/key' -> [N] extra numbers returned in dicts
    first_errors: dict[str, str]


class RewardComposer:
    def __init__(self, functions: list[RewardFunctionConfig], pool: RewardPool):
        self.pool = pool
        self.terms: list[tuple[str, str, float]] = []  # (name, spec or 'task', weight)
        for f in functions:
            name = f.name or (VERIFIER if f.function == "task" else f.function.rsplit(":", 1)[-1])
            if f.function != "task":
                resolve_function(f.function)  # fail early, in the parent, with a clear message
            self.terms.append((name, f.function, f.weight))
        if not any(spec == "task" for _, spec, _ in self.terms):
            self.terms.append((VERIFIER, "task", 0.0))
        self.verifier_name = next(name for name, spec, _ in self.terms if spec == "task")

    def score(self, samples: list[tuple[Task, Problem, str]]) -> Scored:
        requests = [
            RewardRequest((i, j), task.verifier if spec == "task" else spec, problem.prompt, text,
                          problem.reward_fields())
            for i, (task, problem, text) in enumerate(samples)
            for j, (_, spec, _) in enumerate(self.terms)
        ]
        outcomes = self.pool.score(requests)
        n = len(samples)
        per_function, failures, extras, first_errors = {}, {}, {}, {}
        total = torch.zeros(n, dtype=torch.float64)
        for j, (name, _, weight) in enumerate(self.terms):
            values = torch.zeros(n, dtype=torch.float64)
            failures[name] = Counter()
            for i in range(n):
                out = outcomes[(i, j)]
                if out.status == "ok":
                    values[i] = out.value
                    for k, v in out.extras.items():
                        extras.setdefault(f"{name}/{k}", torch.full((n,), float("nan")))[i] = v
                else:
                    failures[name][out.status] += 1
                    first_errors.setdefault(name, f"{out.status}: {out.message}")
            per_function[name] = values
            total += weight * values
        correct = per_function[self.verifier_name] >= 1.0
        return Scored(total, per_function, correct, failures, extras, first_errors)
