"""The Task interface and its registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr.errors import ConfigError
from rlvr.models.prompts import prompt_text
from rlvr.registry import Registry
from rlvr.verifiers.extraction import extract_answer

# What every reward call is handed besides a problem's fields (rlvr.rewards.composite): no field may take these names.
RESERVED_FIELDS = ("prompt", "completion", "completion_tokens", "truncated", "max_new_tokens", "verifier_score")


@dataclass
class Problem:
    """One prompt with what its verifier needs. `fields` are handed to reward functions as keywords."""

    uid: str
    prompt: str | list[dict[str, Any]]  # text, or a conversation of {role, content} messages
    answer: str | None = None
    solution: str | None = None  # a reference completion, for SFT
    fields: dict[str, Any] = field(default_factory=dict)
    # The part the policy plays in this problem (self-play: a proposer or a solver, docs/self_play.md); per-role
    # metrics, completions and role-aware advantage estimators are keyed by '<task label>/<role>'.
    role: str | None = None

    def reward_fields(self) -> dict[str, Any]:
        return {"answer": self.answer, **self.fields}


@dataclass
class GroupResult:
    """What a task that derives problems hears about one of its scored groups (`Task.follow_ups`,
    `Task.late_rewards`): the problem, each sample's text, total reward and verdict, and what its verifier handed back
    (its `RewardResult.payload`, rlvr.verifiers.verdict; None where it did not, or failed)."""

    problem: Problem
    texts: list[str]
    scores: list[float]
    correct: list[bool]
    payloads: list[Any]


class Task(ABC):
    """A prompt source plus its verifier."""

    name: str
    verifier: str  # 'module:function' with signature f(prompt, completion, **fields) -> float | dict
    has_rows = False  # problems come from a file, and its constructor takes the data.bad_rows policy
    skipped_rows: Sequence[str] = ()  # 'file, line N: why' for each row the bad-row policy dropped
    runs_untrusted_code = False  # its verifier runs completions in the sandbox (checked at start-up)

    label_override: str | None = None  # data.tasks[].label
    # an environment this task's problems are always played in (a game): its name, or its data.tasks[].env mapping
    environment: str | dict[str, Any] | None = None
    # It derives problems from the policy's own generations (Absolute Zero's proposals, docs/self_play.md): the
    # follow-up stage (rlvr.rollout.follow_ups) asks it for follow-up problems and late rewards each step, and it holds
    # state that checkpoints save (`state_dict`). (Games are self-play too, but derive no problems.)
    derives_problems = False
    # Its samples have roles (Problem.role or an episode's seat), which role-aware estimators (task_relative,
    # role_baseline) need: the config refuses those estimators without such a task
    gives_roles = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "self_play" in cls.__dict__:  # a task written for the earlier name would silently derive nothing
            raise TypeError(f"Task {cls.__name__} sets self_play, which is now called derives_problems "
                            "(docs/self_play.md); rename the attribute.")

    @property
    def label(self) -> str:
        """Name used in per-source metrics and statistics: data.tasks[].label, else the task's default."""
        return self.label_override or self.default_label

    @property
    def default_label(self) -> str:
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

    def final_answer(self, completion: str) -> str | None:
        """The answer a completion states, as text with whitespace collapsed (what majority votes and answer
        diversity count), or None when it states none. Default: by the final-answer rule, the last \\boxed{}, an
        'Answer:' line, or the last number of the final answer's region (rlvr.verifiers.extraction)."""
        found = extract_answer(completion)
        return None if found is None else " ".join(found.split())

    def same_answer(self, a: str, b: str) -> bool:
        """Whether two final answers are one answer (their votes count together). Default: equal text."""
        return a == b

    def follow_ups(self, step: int, groups: list[GroupResult]) -> list[Problem]:
        """With `derives_problems`: problems to generate in the same step, derived from this step's scored groups of
        this task (a proposer's checked proposals become the solver's problems). Asked again with the follow-ups' own
        groups until it returns none."""
        return []

    def late_rewards(self, groups: list[GroupResult]) -> list[list[float] | None]:
        """With `derives_problems`: per group of this step (follow-ups included), rewards known only once the whole
        step was scored (a proposal's learnability, from the solver's groups on it), added to the samples' totals;
        None leaves a group as it was scored."""
        return [None] * len(groups)

    def metrics(self) -> dict[str, float]:
        """Numbers about the task's own state after a step (a self-play buffer's size), logged under
        task/<label>/<name>."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must keep for a resumed run to draw the same problems (a self-play buffer)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 (optional hook)
        """Restore `state_dict()`."""

    def corpus(self, n: int = 2000) -> Iterator[str]:
        """Text to train a tiny model's tokenizer on: prompts and solutions of the train split."""
        size = self.size("train")
        for i in range(n if size is None else min(n, size)):
            p = self.problem("train", i)
            yield prompt_text(p.prompt)
            yield p.solution or p.answer or ""


TASKS: Registry[type[Task]] = Registry("task")


def make_task(name: str, seed: int, args: dict[str, Any], bad_rows: str = "error", label: str | None = None) -> Task:
    """The task `name` built from its config args; a task read from a file also gets the bad-row policy
    (its own args.bad_rows wins). `label` names it in metrics (data.tasks[].label)."""
    cls = TASKS.get(name)
    if cls.has_rows:
        args = {"bad_rows": bad_rows, **args}
    try:
        task = cls(seed=seed, **args)
    except TypeError as e:
        raise ConfigError(f"Bad arguments for task '{name}' (data.tasks[].args): {e}") from None
    task.label_override = label
    return task
