"""Per-prompt and per-source statistics gathered from each step's groups, for samplers and metrics; saved in
checkpoints and restored exactly."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from rlvr.tasks.base import Problem, Task


@dataclass
class GroupOutcome:
    """What one generated group says about its prompt: the verifier's verdict per sample and, when the group
    was trained on, the mean |advantage| of its samples (None for groups a filter set aside)."""

    source: int
    key: str  # '<task label>/<problem uid>'
    correct: list[bool]
    mean_reward: float
    abs_advantage: float | None = None


@dataclass
class PromptRecord:
    attempts: int = 0  # samples generated
    successes: int = 0  # samples the verifier accepted
    last_step: int = 0
    abs_advantage: float | None = None  # mean |advantage| of its most recent trained group
    hint_fraction: float | None = None  # how much of its hint it is shown next when its group all fails (data.hints)

    @property
    def pass_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else float("nan")


@dataclass
class SourceRecord:
    drawn: int = 0  # prompts drawn
    samples: int = 0
    successes: int = 0
    reward_sum: float = 0.0
    recent_abs_advantage: deque = field(default_factory=deque)  # one entry per trained group, newest last


class CurriculumStats:
    """Counters per prompt (attempts, pass rate, last step seen, recent mean |advantage|) and per source
    (prompts drawn, samples, accuracy, reward, a window of recent group mean |advantage|)."""

    def __init__(self, num_sources: int, window: int = 64):
        self.window = window
        self.prompts: dict[str, PromptRecord] = {}
        self.sources = [SourceRecord() for _ in range(num_sources)]
        self.hint_prior: float | None = None  # where a problem never hinted starts (rlvr.curriculum.hints)

    def record_draws(self, sources: list[int]) -> None:
        for s in sources:
            self.sources[s].drawn += 1

    def record(self, step: int, groups: list[GroupOutcome]) -> None:
        for g in groups:
            prompt = self.prompts.setdefault(g.key, PromptRecord())
            prompt.attempts += len(g.correct)
            prompt.successes += sum(g.correct)
            prompt.last_step = step
            source = self.sources[g.source]
            source.samples += len(g.correct)
            source.successes += sum(g.correct)
            source.reward_sum += g.mean_reward * len(g.correct)
            if g.abs_advantage is not None:
                prompt.abs_advantage = g.abs_advantage
                source.recent_abs_advantage.append(g.abs_advantage)
                while len(source.recent_abs_advantage) > self.window:
                    source.recent_abs_advantage.popleft()

    def pass_rate(self, key: str, min_attempts: int = 1) -> float | None:
        """The prompt's observed pass rate, or None with fewer than `min_attempts` samples."""
        record = self.prompts.get(key)
        return record.pass_rate if record is not None and record.attempts >= min_attempts else None

    def pass_rate_histogram(self, bins: int = 5) -> list[int]:
        """How many seen prompts have a pass rate in each of `bins` equal bins of [0, 1] (the last one closed)."""
        counts = [0] * bins
        for record in self.prompts.values():
            if record.attempts:  # a prompt only hinted so far has no pass rate of its own
                counts[min(int(record.pass_rate * bins), bins - 1)] += 1
        return counts

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.window, "prompts": {k: asdict(v) for k, v in self.prompts.items()},
                "hint_prior": self.hint_prior,
                "sources": [{**asdict(s), "recent_abs_advantage": list(s.recent_abs_advantage)} for s in self.sources]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window = state["window"]
        self.hint_prior = state.get("hint_prior")
        self.prompts = {k: PromptRecord(**v) for k, v in state["prompts"].items()}
        self.sources = [SourceRecord(**{**s, "recent_abs_advantage": deque(s["recent_abs_advantage"])})
                        for s in state["sources"]]


def prompt_key(task: Task, problem: Problem) -> str:
    """How statistics name a prompt: '<task label>/<problem uid>'."""
    return f"{task.label}/{problem.uid}"
