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
from rlvr.rollout.base import Completion
from rlvr.tasks.base import Problem, Task

VERIFIER = "verifier"


def completion_fields(completion: Completion, max_new_tokens: int) -> dict:
    """What every reward function is handed about the completion besides its text."""
    return {"completion_tokens": len(completion.token_ids), "truncated": completion.truncated,
            "max_new_tokens": max_new_tokens}


@dataclass
class Scored:
    total: torch.Tensor  # [N] weighted sum
    per_function: dict[str, torch.Tensor]  # name -> [N]
    correct: torch.Tensor  # [N] bool, the task verifier's verdict (score >= 1)
    failures: dict[str, Counter]  # name -> Counter(error=, timeout=, crash=)
    extras: dict[str, torch.Tensor]  # 'name/key' -> [N] extra numbers returned in dicts
    first_errors: dict[str, str]

    def select(self, rows: list[int]) -> Scored:
        """The scores of samples `rows` (failure counts and first errors stay those of the whole set)."""
        index = torch.tensor(rows, dtype=torch.long)
        return Scored(self.total[index], {k: v[index] for k, v in self.per_function.items()}, self.correct[index],
                      self.failures, {k: v[index] for k, v in self.extras.items()}, self.first_errors)

    @staticmethod
    def concat(parts: list[Scored]) -> Scored:
        """Samples of several scorings, in order; failure counts added up."""
        failures = {name: sum((p.failures[name] for p in parts), Counter()) for name in parts[0].failures}
        extras = {k: torch.cat([p.extras.get(k, torch.full((len(p.total),), float("nan"))) for p in parts])
                  for k in {k for p in parts for k in p.extras}}
        first = {}
        for p in parts:
            first = {**p.first_errors, **first}
        return Scored(torch.cat([p.total for p in parts]),
                      {k: torch.cat([p.per_function[k] for p in parts]) for k in parts[0].per_function},
                      torch.cat([p.correct for p in parts]), failures, extras, first)


class RewardComposer:
    def __init__(self, functions: list[RewardFunctionConfig], pool: RewardPool):
        self.pool = pool
        self.terms: list[tuple[str, str, float, dict]] = []  # (name, spec or 'task', weight, extra kwargs)
        for f in functions:
            name = f.name or (VERIFIER if f.function == "task" else f.function.rsplit(":", 1)[-1])
            if f.function != "task":
                resolve_function(f.function)  # fail early, in the parent, with a clear message
            self.terms.append((name, f.function, f.weight, f.args))
        if not any(spec == "task" for _, spec, _, _ in self.terms):
            self.terms.append((VERIFIER, "task", 0.0, {}))
        self.verifier_name = next(name for name, spec, _, _ in self.terms if spec == "task")

    def score(self, samples: list[tuple[Task, Problem, str, dict]]) -> Scored:
        """Score (task, problem, completion text, extra fields such as completion_tokens) samples."""
        requests = [
            RewardRequest((i, j), task.verifier if spec == "task" else spec, problem.prompt, text,
                          {**problem.reward_fields(), **extra, **args})
            for i, (task, problem, text, extra) in enumerate(samples)
            for j, (_, spec, _, args) in enumerate(self.terms)
        ]
        outcomes = self.pool.score(requests)
        n = len(samples)
        per_function, failures, extras, first_errors = {}, {}, {}, {}
        total = torch.zeros(n, dtype=torch.float64)
        for j, (name, _, weight, _) in enumerate(self.terms):
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
