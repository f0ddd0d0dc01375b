"""Which prompts a step generates for, as a registry of samplers. Each one's state is counters, RNG states and
posteriors, so a resumed run draws the identical sequence of prompts (tests/test_curriculum.py)."""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rlvr.curriculum.stats import CurriculumStats, GroupOutcome, prompt_key
from rlvr.errors import ConfigError
from rlvr.registry import Registry
from rlvr.tasks.base import Problem, Task

Draw = tuple[int, Problem]  # (source index, problem)
Admit = Callable[[int, Problem], bool]
SAMPLERS: Registry[type[PromptSampler]] = Registry("sampler")
MAX_SKIPS_PER_PROMPT = 20  # an admission filter may turn down this many candidates per requested prompt


def epoch_order(size: int, *key: object) -> list[int]:
    """range(size) in a shuffle fixed by `key` (e.g. seed, source, epoch)."""
    order = list(range(size))
    random.Random("-".join(map(str, key))).shuffle(order)
    return order


class PromptSampler(ABC):
    """Draws prompts from `tasks` (the sources). `observe` hands it each step's group outcomes after the shared
    `stats` were updated; `admit`, when given, may turn a candidate down (an admission filter such as the
    pass-rate band), up to MAX_SKIPS_PER_PROMPT per prompt, after which candidates are taken as they come."""

    def __init__(self, tasks: list[Task], weights: list[float], seed: int, stats: CurriculumStats | None = None):
        self.tasks, self.seed = tasks, seed
        self.stats = stats if stats is not None else CurriculumStats(len(tasks))
        total = sum(weights)
        self.weights = [w / total for w in weights]
        self.skipped = 0  # candidates turned down in the last batch

    def next_batch(self, n: int, admit: Admit | None = None) -> list[Draw]:
        out, self.skipped = [], 0
        if n <= 0:
            return out
        for draw in self._candidates():
            if admit is not None and self.skipped < MAX_SKIPS_PER_PROMPT * n and not admit(*draw):
                self.skipped += 1
                continue
            out.append(draw)
            if len(out) == n:  # stop before drawing more: a resumed sampler must be exactly where this one is
                break
        return out

    @abstractmethod
    def _candidates(self) -> Iterator[Draw]:
        """Prompts in the order this sampler offers them, drawn lazily (only those taken or turned down count)."""

    def observe(self, groups: list[GroupOutcome]) -> None:  # noqa: B027 (an optional hook)
        """Feedback after a step (the shared stats already include it)."""

    def metrics(self) -> dict[str, float]:
        """Numbers worth logging about the sampler's current choice, keyed by metric name."""
        return {}

    @abstractmethod
    def state_dict(self) -> dict[str, Any]: ...

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class SourceCursors:
    """Each source's problems in order: procedural ones by index, finite ones in a fresh shuffle every epoch."""

    def __init__(self, tasks: list[Task], seed: int):
        self.tasks, self.seed = tasks, seed
        self.positions = [0] * len(tasks)
        self._order: tuple[int, int, list[int]] | None = None  # (source, epoch, order) last used

    def next(self, source: int) -> Problem:
        position = self.positions[source]
        self.positions[source] += 1
        size = self.tasks[source].size("train")
        if size is None:
            return self.tasks[source].problem("train", position)
        epoch = position // size
        if self._order is None or self._order[:2] != (source, epoch):
            self._order = (source, epoch, epoch_order(size, "epoch", self.seed, source, epoch))
        return self.tasks[source].problem("train", self._order[2][position % size])


@SAMPLERS.register("mixture")
class MixtureSampler(PromptSampler):
    """Weighted mixture: each prompt's source drawn by `data.tasks[].weight`, then that source's next problem
    (finite datasets reshuffled every epoch)."""

    def __init__(self, tasks, weights, seed, stats=None):
        super().__init__(tasks, weights, seed, stats)
        self.cursors = SourceCursors(tasks, seed)
        self._rng = random.Random(f"mixture-{seed}")

    def _candidates(self) -> Iterator[Draw]:
        while True:
            source = 0 if len(self.tasks) == 1 else self._rng.choices(range(len(self.tasks)), self.weights)[0]
            yield source, self.cursors.next(source)

    def state_dict(self) -> dict[str, Any]:
        return {"positions": list(self.cursors.positions), "rng": self._rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursors.positions = list(state["positions"])
        self._rng.setstate(state["rng"])


@SAMPLERS.register("uniform")
class UniformEpochSampler(PromptSampler):
    """Uniform epochs: every problem of every source once per epoch, in a fresh shuffle of the whole pool.

    A procedural source (no fixed size) adds `pool_size` new problems to each epoch."""

    def __init__(self, tasks, weights, seed, stats=None, pool_size: int = 10_000):
        super().__init__(tasks, weights, seed, stats)
        self.sizes = [task.size("train") or pool_size for task in tasks]
        self.procedural = [task.size("train") is None for task in tasks]
        self.position = 0
        self._epoch: tuple[int, list[int]] | None = None

    def _candidates(self) -> Iterator[Draw]:
        total = sum(self.sizes)
        while True:
            epoch, offset = divmod(self.position, total)
            self.position += 1
            if self._epoch is None or self._epoch[0] != epoch:
                self._epoch = (epoch, epoch_order(total, "uniform", self.seed, epoch))
            flat, source = self._epoch[1][offset], 0
            while flat >= self.sizes[source]:
                flat -= self.sizes[source]
                source += 1
            index = epoch * self.sizes[source] + flat if self.procedural[source] else flat
            yield source, self.tasks[source].problem("train", index)

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = state["position"]


@SAMPLERS.register("ucb")
class UCBSourceSampler(MixtureSampler):
    """DUMP (Wang et al. 2025): sources scheduled by UCB on their recent mean |advantage|.

    "Automated Distribution-Level Curriculum Learning for RL-based LLM Post-training": a source's
    learnability is the mean |advantage| of its recent trained groups (the last
    `data.stats_window` groups), and sources are scheduled by UCB:
        score_j = mean|A|_j + c * sqrt(ln N / n_j)
    with n_j the prompts drawn from source j and N over all sources; a source never drawn scores +inf. Each
    step's source weights are softmax(score / temperature), or the argmax with temperature 0 (ties share);
    a prompt's source is drawn by these weights, then the source's next problem."""

    def __init__(self, tasks, weights, seed, stats=None, c: float = 1.0, temperature: float = 0.1):
        super().__init__(tasks, weights, seed, stats)
        if c < 0 or temperature < 0:
            raise ConfigError(f"data.sampler.args: ucb needs c >= 0 and temperature >= 0, got c={c}, "
                              f"temperature={temperature}")
        self.c, self.temperature = c, temperature
        self.weights = self.weights_from(self.scores())

    def scores(self) -> list[float]:
        sources = self.stats.sources
        total = sum(s.drawn for s in sources)
        out = []
        for s in sources:
            if s.drawn == 0:
                out.append(math.inf)
                continue
            recent = s.recent_abs_advantage
            learnability = sum(recent) / len(recent) if recent else 0.0
            out.append(learnability + self.c * math.sqrt(math.log(total) / s.drawn))
        return out

    def weights_from(self, scores: list[float]) -> list[float]:
        top = max(scores)
        if math.isinf(top) or self.temperature == 0:
            best = [float(s == top) for s in scores]
            return [b / sum(best) for b in best]
        exp = [math.exp((s - top) / self.temperature) for s in scores]
        return [e / sum(exp) for e in exp]

    def next_batch(self, n: int, admit: Admit | None = None) -> list[Draw]:
        self.weights = self.weights_from(self.scores())
        return super().next_batch(n, admit)

    def metrics(self) -> dict[str, float]:
        return {f"source/{task.label}/{name}": value
                for task, score, weight in zip(self.tasks, self.scores(), self.weights)
                for name, value in (("ucb_score", score), ("weight", weight))}


@SAMPLERS.register("mopps")
class MoPPSSampler(PromptSampler):
    """MoPPS (Qu et al. 2025): Thompson sampling of per-prompt Beta pass-rate posteriors toward a target.

    "Can Prompt Difficulty be Online Predicted for Accelerating RL Finetuning of Reasoning Models?": each
    candidate prompt's pass rate has a Beta posterior, updated from every group generated for it with forgetting
    factor `decay` (lambda):
        alpha <- lambda * alpha + (1 - lambda) * alpha_0 + successes
        beta  <- lambda * beta  + (1 - lambda) * beta_0  + failures
    A step samples theta ~ Beta(alpha, beta) for every candidate (Thompson sampling) and takes the n prompts
    whose theta is closest to `target`. Candidates: every problem of a finite source, the first `pool_size`
    of a procedural one."""

    def __init__(self, tasks, weights, seed, stats=None, target: float = 0.5, decay: float = 1.0,
                 prior_alpha: float = 1.0, prior_beta: float = 1.0, pool_size: int = 1000):
        super().__init__(tasks, weights, seed, stats)
        if not (0 <= target <= 1 and 0 < decay <= 1 and prior_alpha > 0 and prior_beta > 0):
            raise ConfigError("data.sampler.args: mopps needs 0 <= target <= 1, 0 < decay <= 1 and positive priors, "
                              f"got target={target}, decay={decay}, prior_alpha={prior_alpha}, "
                              f"prior_beta={prior_beta}")
        self.target, self.decay, self.prior = target, decay, (prior_alpha, prior_beta)
        self.candidates = [(s, task.problem("train", i)) for s, task in enumerate(tasks)
                           for i in range(task.size("train") or pool_size)]
        self.index = {prompt_key(tasks[s], p): i for i, (s, p) in enumerate(self.candidates)}
        self.alpha = np.full(len(self.candidates), prior_alpha)
        self.beta = np.full(len(self.candidates), prior_beta)
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def _candidates(self) -> Iterator[Draw]:
        theta = self._rng.beta(self.alpha, self.beta)
        for i in np.argsort(np.abs(theta - self.target), kind="stable"):
            yield self.candidates[i]

    def observe(self, groups: list[GroupOutcome]) -> None:
        lam, (a0, b0) = self.decay, self.prior
        for g in groups:
            i = self.index.get(g.key)
            if i is not None:
                successes = sum(g.correct)
                self.alpha[i] = lam * self.alpha[i] + (1 - lam) * a0 + successes
                self.beta[i] = lam * self.beta[i] + (1 - lam) * b0 + len(g.correct) - successes

    def state_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha.tolist(), "beta": self.beta.tolist(), "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha, self.beta = np.array(state["alpha"]), np.array(state["beta"])
        self._rng.bit_generator.state = state["rng"]


def make_sampler(name: str, args: dict[str, Any], tasks: list[Task], weights: list[float], seed: int,
                 stats: CurriculumStats) -> PromptSampler:
    cls = SAMPLERS.get(name)
    try:
        return cls(tasks, weights, seed, stats, **args)
    except TypeError as e:
        raise ConfigError(f"data.sampler.args for sampler '{name}': {e}. See docs/curriculum.md.") from None
