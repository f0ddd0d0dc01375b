"""A weighted sum of named reward functions, scored in the worker pool; each is reported separately.

Scoring runs in two stages. First the task's verifier, which is always scored (weight 0 when not listed)
because `accuracy` is its verdict. Then every other function, handed the verifier's score as `verifier_score`,
so shaping terms that depend on correctness (a gate, a length bonus for correct answers) never verify twice.
A batched function is called once per prompt group (consecutive samples of the same problem) with lists.
A verifier returning {"score": s, "correct": 0/1} states its verdict apart from its score (an environment's
episode: a discounted reward for a solved episode is still a success). What the verifier hands back to its task
(`RewardResult.payload`, rlvr.rewards.contract) is kept per sample (`Scored.payloads`).

With a process reward (rewards.step_reward, when the advantage estimator reads it: rlvr.rewards.process) the
composer also scores the spans of samples on request (`score_spans`), in the same pool as every reward.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from rlvr.config import NoiseCorrectionConfig, RewardFunctionConfig, StepRewardConfig
from rlvr.errors import ConfigError
from rlvr.rewards.callables import pickle_reward
from rlvr.rewards.loading import REWARDS
from rlvr.rewards.noise import NoisyChannel
from rlvr.rewards.pool import RewardLoad, RewardOutcome, RewardPool, RewardRequest, spec_label
from rlvr.rewards.process import process_reward_args, resolve_process_reward
from rlvr.tasks.base import Problem, Task
from rlvr.verifiers.verdict import SpanScore


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
    # [N] what the task verifier handed back to its task (RewardResult.payload; None where it did not)
    payloads: list[Any] = field(default_factory=list)

    def payload(self, i: int) -> Any:
        """What the task verifier handed back to its task for sample i (None when nothing)."""
        return self.payloads[i] if i < len(self.payloads) else None

    def reported_answer(self, i: int) -> tuple:
        """(answer,) that the task verifier said it scored for sample i, () when it did not say."""
        return self.answers[i] if i < len(self.answers) else ()

    def select(self, rows: list[int]) -> Scored:
        """The scores of samples `rows` (failure counts and first errors stay those of the whole set)."""
        index = torch.tensor(rows, dtype=torch.long)
        return Scored(self.total[index], {k: v[index] for k, v in self.per_function.items()}, self.correct[index],
                      self.failures, {k: v[index] for k, v in self.extras.items()}, self.first_errors,
                      [self.answers[i] for i in rows] if self.answers else [],
                      [self.payloads[i] for i in rows] if self.payloads else [])

    def with_totals(self, total: torch.Tensor) -> Scored:
        """The same samples with other weighted totals (a self-play task's late rewards added, docs/self_play.md)."""
        if total.shape != self.total.shape:
            raise ValueError(f"{len(total)} totals for {len(self.total)} samples")
        return Scored(total.to(self.total.dtype), self.per_function, self.correct, self.failures, self.extras,
                      self.first_errors, self.answers, self.payloads)

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
        payloads = [a for p in parts for a in (p.payloads or [None] * len(p.total))]
        return Scored(torch.cat([p.total for p in parts]),
                      {k: torch.cat([p.per_function[k] for p in parts]) for k in parts[0].per_function},
                      torch.cat([p.correct for p in parts]), failures, extras, first, answers, payloads)


@dataclass
class Term:
    name: str
    spec: str | bytes  # 'task', 'module:function', or a pickled callable
    weight: float
    args: dict[str, Any]
    batched: bool
    uses_policy: bool = False  # scored in this process with the trainer's policy (rlvr.rewards.rlpr)

    @property
    def label(self) -> str:
        """How messages name it: "'length' (rewards.py:length)"."""
        return f"'{self.name}' ({spec_label(self.spec)})"


@dataclass
class SpanScoring:
    """A process reward's spans for each sample (None where it failed: scored as no span, and counted), and its
    failures as the failure budget counts them (rlvr.rewards.failures)."""

    name: str
    spans: list[list[SpanScore] | None]
    failures: Counter
    first_error: str | None


def verifier_label(task: Task) -> str:
    return f"verifier {spec_label(task.verifier)}"


def sample_groups(samples: list[tuple[Task, Problem, str, dict]]) -> list[range]:
    """Row ranges of consecutive samples of the same problem."""
    starts = [i for i in range(len(samples)) if i == 0 or samples[i][1] is not samples[i - 1][1]]
    return [range(a, b) for a, b in zip(starts, starts[1:] + [len(samples)])]


class RewardComposer:
    """Scores samples with the configured reward functions. `noise` (rewards.noise_correction) flips and corrects
    the task verifier's verdicts in training (rlvr.rewards.noise); a reward that scores with the policy (`rlpr`)
    needs the trainer's `attach_policy`."""

    def __init__(self, functions: list[RewardFunctionConfig], pool: RewardPool,
                 noise: NoiseCorrectionConfig | None = None, process: StepRewardConfig | None = None):
        self.pool = pool
        self.process = None if process is None else Term(
            "step_reward", process.function, 1.0,
            process_reward_args(resolve_process_reward(process.function), process.args), False)
        self.terms: list[Term] = []
        self.policy = None
        self.noise = NoisyChannel(noise) if noise is not None and (noise.method != "none" or noise.inject) else None
        for f in functions:
            registered = None
            if callable(f.function):
                spec = pickle_reward(f.function, f.metric_name)
            elif f.function != "task":
                # A file or module is imported by the reward workers (and checked by the trainer at start-up:
                # rlvr.rewards.loading.check_reward_functions), not here, so the workers can start loading first.
                spec = f.function
                registered = REWARDS.get(f.function) if f.function in REWARDS else None
            else:
                spec = "task"
            batched = (f.batched or (registered is not None and registered.batched)) and spec != "task"
            self.terms.append(Term(f.metric_name, spec, f.weight, f.args, batched,
                                   registered is not None and registered.uses_policy))
        if not any(t.spec == "task" for t in self.terms):
            self.terms.append(Term("verifier", "task", 0.0, {}, False))
        self.verifier = next(t for t in self.terms if t.spec == "task")
        self._lock = threading.Lock()  # one scoring at a time in the pool (background jobs and direct calls)
        self._background: ThreadPoolExecutor | None = None

    def loads(self, tasks: list[Task]) -> list[RewardLoad]:
        """What the reward workers load before the first request: every task's verifier and every reward function
        scored in a worker (with its args, for what a registered reward preloads)."""
        verifiers = {task.verifier: verifier_label(task) for task in tasks}
        terms = [t for t in self.terms if t.spec != "task" and not t.uses_policy] + [self.process] * bool(self.process)
        return ([RewardLoad(spec, {}, label) for spec, label in verifiers.items()] +
                [RewardLoad(t.spec, t.args, t.label) for t in terms])

    def attach_policy(self, model, tokenizer, encode) -> None:
        """Lend the policy (model, tokenizer, prompt encoder) to the rewards that score with it (`rlpr`)."""
        from rlvr.rewards.rlpr import Policy

        self.policy = Policy(model, tokenizer, encode)

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
            verifier = term.spec == "task"
            return [RewardRequest((id(term), i), task.verifier if verifier else term.spec, problem.prompt, text,
                                  {**fields[i], **term.args}, label=verifier_label(task) if verifier else term.label)
                    for i, (task, problem, text, _) in enumerate(samples)]
        return [RewardRequest((id(term), g), term.spec, [samples[i][1].prompt for i in rows],
                              [samples[i][2] for i in rows],
                              {**{k: [fields[i][k] for i in rows] for k in fields[rows[0]]}, **term.args}, batched=True,
                              label=term.label)
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
                spread[i] = (RewardOutcome("ok", out.value[j], out.extras[j], answer=out.answer[j] if out.answer else (),
                                           spans=out.spans[j] if out.spans else None,
                                           payload=out.payload[j] if out.payload else None)
                             if out.status == "ok"
                             else RewardOutcome(out.status, message=out.message))
        return spread

    def score(self, samples: list[tuple[Task, Problem, str, dict]], noisy: bool = True) -> Scored:
        """Score (task, problem, completion text, extra fields such as completion_tokens) samples; blocks.
        `noisy=False` (held-out evaluation) skips `rewards.noise_correction`: the clean verdicts and rewards."""
        with self._lock:
            return self._score(samples, noisy)

    def _score(self, samples: list[tuple[Task, Problem, str, dict]], noisy: bool = True) -> Scored:
        n, groups = len(samples), sample_groups(samples)
        fields = [{**problem.reward_fields(), **extra} for _, problem, _, extra in samples]
        outcomes = self.pool.score(self._requests(self.verifier, samples, fields, groups))
        verdicts = self._per_sample(self.verifier, outcomes, n, groups)
        clean = None
        noise = self.noise if noisy else None
        if noise is not None and noise.generator is not None:
            verdicts, clean = self._flipped(verdicts)
        fields = [{**f, "verifier_score": v.value if v.status == "ok" else 0.0} for f, v in zip(fields, verdicts)]
        others = [t for t in self.terms if t is not self.verifier and not t.uses_policy]
        outcomes = self.pool.score([r for t in others for r in self._requests(t, samples, fields, groups)])
        outcomes.update(self._policy_outcomes([t for t in self.terms if t.uses_policy], samples, groups))
        per_function, failures, extras, first_errors = {}, {}, {}, {}
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
        correct = per_function[self.verifier.name] >= 1.0
        stated = extras.get(f"{self.verifier.name}/correct")  # a verifier may state its verdict apart from its score
        if stated is not None:
            correct = torch.where(stated.isnan(), correct, stated > 0.5)
        verifier_reward = per_function[self.verifier.name]
        if noise is not None and noise.cfg.method != "none":  # on the (noisy) verdicts, 0/1
            verifier_reward = noise.reward(correct)
            extras[f"{self.verifier.name}/corrected"] = verifier_reward.clone()
        if clean is not None:
            extras[f"{self.verifier.name}/clean_correct"] = clean.to(torch.float64)
        total = torch.zeros(n, dtype=torch.float64)
        for term in self.terms:  # in the configured order
            total += term.weight * (verifier_reward if term is self.verifier else per_function[term.name])
        answers = [v.answer if v.status == "ok" else () for v in verdicts]
        payloads = [v.payload if v.status == "ok" else None for v in verdicts]
        return Scored(total, per_function, correct, failures, extras, first_errors, answers, payloads)

    def score_spans(self, samples: list[tuple[Problem, str, dict]], where: list[str]) -> SpanScoring:
        """The process reward's spans of (problem, completion text, extra fields) samples, scored in the pool like
        every reward; blocks. `where[i]` names sample i in the first error."""
        term = self.process
        requests = [RewardRequest(("spans", i), term.spec, problem.prompt, text,
                                  {**problem.reward_fields(), **extra, **term.args}, label=term.label, spans=True)
                    for i, (problem, text, extra) in enumerate(samples)]
        with self._lock:
            outcomes = self.pool.score(requests)
        spans, failures, first = [], Counter(), None
        for i in range(len(samples)):
            out = outcomes[("spans", i)]
            spans.append(out.spans if out.status == "ok" else None)
            if out.status != "ok":
                failures[out.status] += 1
                first = first or f"{out.status} on {where[i]}: {out.message}"
        return SpanScoring(term.name, spans, failures, first)

    def _flipped(self, verdicts: list[RewardOutcome]) -> tuple[list[RewardOutcome], torch.Tensor]:
        """The verifier's outcomes with injected noise: each scored verdict (score >= 1, or a stated 'correct')
        flipped with the configured rates, its score set to the noisy 0/1 verdict; and the clean verdicts [N]."""
        clean = torch.tensor([v.status == "ok" and (v.extras["correct"] > 0.5 if "correct" in v.extras
                                                    else v.value >= 1.0) for v in verdicts])
        noisy = self.noise.flip(clean)
        flipped = []
        for v, was, now in zip(verdicts, clean.tolist(), noisy.tolist()):
            if v.status != "ok" or was == now:
                flipped.append(v)
                continue
            extras = {**v.extras, "correct": float(now)} if "correct" in v.extras else v.extras
            flipped.append(replace(v, value=float(now), extras=extras))
        return flipped, clean

    def _policy_outcomes(self, terms: list[Term], samples: list[tuple[Task, Problem, str, dict]],
                         groups: list[range]) -> dict:
        """Outcomes, keyed as the pool's, of the rewards that score with the policy (in this process, per prompt
        group); a failure is counted as the pool counts a reward's error."""
        outcomes = {}
        for term in terms:
            if self.policy is None:
                raise ConfigError(f"reward '{term.name}' ({term.spec}) scores with the policy, which only a training "
                                  "run lends it; it cannot score evaluations or offline files.")
            function = REWARDS.get(term.spec)
            settings = function.settings(**term.args)
            for g, rows in enumerate(groups):
                try:
                    values = function(self.policy, [samples[i][1].prompt for i in rows],
                                      [samples[i][2] for i in rows], [samples[i][1].answer for i in rows], settings)
                    outcomes[(id(term), g)] = RewardOutcome("ok", values, [{} for _ in rows], answer=[() for _ in rows])
                except Exception as e:  # like a worker's reward error: scored 0, counted by the failure budget
                    outcomes[(id(term), g)] = RewardOutcome("error", message=f"{type(e).__name__}: {e}")
        return outcomes
