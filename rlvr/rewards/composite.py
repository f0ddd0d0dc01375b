"""A weighted sum of named reward functions, scored in the worker pool; each is reported separately.

Scoring runs in two stages. First the task's verifier, which is always scored (weight 0 when not listed)
because `accuracy` is its verdict. Then every other function, handed the verifier's score as `verifier_score`,
so shaping terms that depend on correctness (a gate, a length bonus for correct answers) never verify twice.
A batched function is called once per prompt group (consecutive samples of the same problem) with lists.
A verifier returning {"score": s, "correct": 0/1} states its verdict apart from its score (an environment's
episode: a discounted reward for a solved episode is still a success).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from rlvr.config import RewardFunctionConfig
from rlvr.rewards.callables import pickle_reward
from rlvr.rewards.loading import resolve_function
from rlvr.rewards.pool import RewardOutcome, RewardPool, RewardRequest
from rlvr.tasks.base import Problem, Task


@dataclass
class Scored:
    total: torch.Tensor  # [N] weighted sum
    per_function: dict[str, torch.Tensor]  # name -> [N]
    correct: torch.Tensor  # [N] bool, the task verifier's verdict (score >= 1)
    failures: dict[str, Counter]  # name -> Counter(error=, timeout=, crash=), in samples
    extras: dict[str, torch.Tensor]  # 'name/key' -> [N] extra numbers returned in dicts
    first_errors: dict[str, str]
    # [N] the final answer the task verifier scored, as (text or None,), or () where it did not say (see RewardOutcome)
    answers: list[tuple] = field(default_factory=list)

    def reported_answer(self, i: int) -> tuple:
        """(answer,) that the task verifier said it scored for sample i, () when it did not say."""
        return self.answers[i] if i < len(self.answers) else ()

    def select(self, rows: list[int]) -> Scored:
        """The scores of samples `rows` (failure counts and first errors stay those of the whole set)."""
        index = torch.tensor(rows, dtype=torch.long)
        return Scored(self.total[index], {k: v[index] for k, v in self.per_function.items()}, self.correct[index],
                      self.failures, {k: v[index] for k, v in self.extras.items()}, self.first_errors,
                      [self.answers[i] for i in rows] if self.answers else [])

    @staticmethod
    def concat(parts: list[Scored]) -> Scored:
        """Samples of several scorings, in order; failure counts added up."""
        failures = {name: sum((p.failures[name] for p in parts), Counter()) for name in parts[0].failures}
        extras = {k: torch.cat([p.extras.get(k, torch.full((len(p.total),), float("nan"))) for p in parts])
                  for k in {k for p in parts for k in p.extras}}
        first = {}
        for p in parts:
            first = {**p.first_errors, **first}
        answers = [a for p in parts for a in (p.answers or [()] * len(p.total))]
        return Scored(torch.cat([p.total for p in parts]),
                      {k: torch.cat([p.per_function[k] for p in parts]) for k in parts[0].per_function},
                      torch.cat([p.correct for p in parts]), failures, extras, first, answers)


@dataclass
class Term:
    name: str
    spec: str | bytes  # 'task', 'module:function', or a pickled callable
    weight: float
    args: dict[str, Any]
    batched: bool


def sample_groups(samples: list[tuple[Task, Problem, str, dict]]) -> list[range]:
    """Row ranges of consecutive samples of the same problem."""
    starts = [i for i in range(len(samples)) if i == 0 or samples[i][1] is not samples[i - 1][1]]
    return [range(a, b) for a, b in zip(starts, starts[1:] + [len(samples)])]


class RewardComposer:
    def __init__(self, functions: list[RewardFunctionConfig], pool: RewardPool):
        self.pool = pool
        self.terms: list[Term] = []
        for f in functions:
            if callable(f.function):
                spec = pickle_reward(f.function, f.metric_name)
            elif f.function != "task":
                spec = f.function
                resolve_function(f.function)  # fail early, in the parent, with a clear message
            else:
                spec = "task"
            self.terms.append(Term(f.metric_name, spec, f.weight, f.args, f.batched and spec != "task"))
        if not any(t.spec == "task" for t in self.terms):
            self.terms.append(Term("verifier", "task", 0.0, {}, False))
        self.verifier = next(t for t in self.terms if t.spec == "task")
        self._lock = threading.Lock()  # one scoring at a time in the pool (background jobs and direct calls)
        self._background: ThreadPoolExecutor | None = None

    def submit(self, samples: list[tuple[Task, Problem, str, dict]]) -> Future[Scored]:
        """Score `samples` in the background and return at once: a scoring thread runs the jobs in submission order
        (each as `score`, both stages), so rewards of groups already generated are computed while later ones are
        being generated. `.result()` waits for a job."""
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="rlvr-scoring")
        return self._background.submit(self.score, samples)

    def _requests(self, term: Term, samples: list[tuple[Task, Problem, str, dict]], fields: list[dict],
                  groups: list[range]) -> list[RewardRequest]:
        if not term.batched:
            return [RewardRequest((id(term), i), task.verifier if term.spec == "task" else term.spec, problem.prompt,
                                  text, {**fields[i], **term.args})
                    for i, (task, problem, text, _) in enumerate(samples)]
        return [RewardRequest((id(term), g), term.spec, [samples[i][1].prompt for i in rows],
                              [samples[i][2] for i in rows],
                              {**{k: [fields[i][k] for i in rows] for k in fields[rows[0]]}, **term.args}, batched=True)
                for g, rows in enumerate(groups)]

    @staticmethod
    def _per_sample(term: Term, outcomes: dict, n: int, groups: list[range]) -> list[RewardOutcome]:
        """Each sample's outcome of `term`; a batched call's outcome is spread over its group."""
        if not term.batched:
            return [outcomes[(id(term), i)] for i in range(n)]
        spread: list[RewardOutcome] = [RewardOutcome("ok")] * n
        for g, rows in enumerate(groups):
            out = outcomes[(id(term), g)]
            for j, i in enumerate(rows):
                spread[i] = (RewardOutcome("ok", out.value[j], out.extras[j], answer=out.answer[j] if out.answer else ())
                             if out.status == "ok"
                             else RewardOutcome(out.status, message=out.message))
        return spread

    def score(self, samples: list[tuple[Task, Problem, str, dict]]) -> Scored:
        """Score (task, problem, completion text, extra fields such as completion_tokens) samples; blocks."""
        with self._lock:
            return self._score(samples)

    def _score(self, samples: list[tuple[Task, Problem, str, dict]]) -> Scored:
        n, groups = len(samples), sample_groups(samples)
        fields = [{**problem.reward_fields(), **extra} for _, problem, _, extra in samples]
        outcomes = self.pool.score(self._requests(self.verifier, samples, fields, groups))
        verdicts = self._per_sample(self.verifier, outcomes, n, groups)
        fields = [{**f, "verifier_score": v.value if v.status == "ok" else 0.0} for f, v in zip(fields, verdicts)]
        others = [t for t in self.terms if t is not self.verifier]
        outcomes = self.pool.score([r for t in others for r in self._requests(t, samples, fields, groups)])
        per_function, failures, extras, first_errors = {}, {}, {}, {}
        total = torch.zeros(n, dtype=torch.float64)
        for term in self.terms:
            results = verdicts if term is self.verifier else self._per_sample(term, outcomes, n, groups)
            values = torch.zeros(n, dtype=torch.float64)
            failures[term.name] = Counter()
            for i, out in enumerate(results):
                if out.status == "ok":
                    values[i] = out.value
                    for k, v in out.extras.items():
                        extras.setdefault(f"{term.name}/{k}", torch.full((n,), float("nan")))[i] = v
                else:
                    failures[term.name][out.status] += 1
                    first_errors.setdefault(term.name, f"{out.status}: {out.message}")
            per_function[term.name] = values
            total += term.weight * values
        correct = per_function[self.verifier.name] >= 1.0
        stated = extras.get(f"{self.verifier.name}/correct")  # a verifier may state its verdict apart from its score
        if stated is not None:
            correct = torch.where(stated.isnan(), correct, stated > 0.5)
        answers = [v.answer if v.status == "ok" else () for v in verdicts]
        return Scored(total, per_function, correct, failures, extras, first_errors, answers)
