"""A task whose problems are played as episodes in an environment: `data.tasks[].env`.

The wrapped task still supplies the problems, the label, the answer parsing and the tiny tokenizer's corpus; the
environment runs the episode; the verifier becomes the episode's own verdict (`episode_verdict`), which the
reward pool reads from the fields the episode runner attaches to each sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rlvr.config import EnvConfig
from rlvr.envs.base import ENVIRONMENTS, ChatModels, Environment, NoChatModels
from rlvr.envs.render import PLAIN
from rlvr.errors import ConfigError
from rlvr.tasks.base import Problem, Task, make_task


class EnvTask(Task):
    """`task`'s problems as episodes of the environment `config.name`."""

    verifier = "rlvr.envs.base:episode_verdict"

    def __init__(self, task: Task, config: EnvConfig):
        self.task, self.config = task, config
        self.env_class = ENVIRONMENTS.get(config.name)
        # its episodes are driven by a program of their own (an agent, rlvr.envs.agent), not stepped turn by turn
        self.plays_itself = bool(getattr(self.env_class, "plays_itself", False))
        self.name = task.name
        self.has_rows, self.skipped_rows, self.label_override = task.has_rows, task.skipped_rows, task.label_override
        needed = getattr(self.env_class, "turns_needed", None)
        if needed is not None and config.max_turns < needed:
            raise ConfigError(f"Environment '{config.name}' of task {task.label} needs up to {needed} turns per "
                              f"episode; data.tasks[].env.max_turns is {config.max_turns}. Set it to {needed}.")
        for env in self.make_envs(task.problem("eval" if task.size("eval") else "train", 0), 2):  # bad args fail here
            env.close()

    def make_env(self, problem: Problem, models: ChatModels | None = None) -> Environment:
        """A fresh environment for one episode of `problem`."""
        return self.make_envs(problem, 1, models)[0]

    def make_envs(self, problem: Problem, n: int, models: ChatModels | None = None) -> list[Environment]:
        """Fresh environments for a group's `n` episodes of `problem` (a game pairs them into matches); `models`:
        the models besides the policy they may talk to (the episode runner's; None: none)."""
        try:
            return self.env_class.for_group(problem, self.task, n, models or NoChatModels(), **self.config.args)
        except TypeError as e:
            raise ConfigError(f"Bad arguments for environment '{self.config.name}' (data.tasks[].env.args): {e}") \
                from None

    @property
    def default_label(self) -> str:
        return self.task.default_label

    def size(self, split: str) -> int | None:
        return self.task.size(split)

    def problem(self, split: str, index: int) -> Problem:
        return self.task.problem(split, index)

    def screen_prompts(self, encode: Callable[[str], list[int]]) -> None:
        self.task.screen_prompts(encode)

    def final_answer(self, completion: str) -> str | None:
        return self.task.final_answer(completion)

    def same_answer(self, a: str, b: str) -> bool:
        return self.task.same_answer(a, b)

    def corpus(self, n: int = 2000) -> Iterator[str]:
        """The task's text, then the environment's own phrases as plain-text replies (a tiny tokenizer then
        knows every character the environment writes)."""
        yield from self.task.corpus(n)
        for hint in getattr(self.env_class, "corpus_hint", ()):
            yield from (template.format(content=hint) for template in PLAIN.values())


def with_environment(task: Task, env) -> Task:
    """`task` played as episodes when data.tasks[].env is set or the task names its own environment."""
    if env is None and task.environment is None:
        return task
    return EnvTask(task, env if env is not None else EnvConfig.model_validate(task.environment))


def make_tasks(configs: list, seed: int, bad_rows: str = "error") -> list[Task]:
    """The tasks of data.tasks; their labels must differ, since metrics and statistics are keyed by them."""
    tasks = [with_environment(make_task(t.name, seed, t.args, bad_rows, t.label), getattr(t, "env", None))
             for t in configs]
    labels = [t.label for t in tasks]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"data.tasks: several tasks are labelled {', '.join(map(repr, repeated))}; give each a "
                          "distinct `label` (used in per-source metrics).")
    return tasks
