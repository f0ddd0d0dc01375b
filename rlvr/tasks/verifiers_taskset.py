"""Problems from a PrimeIntellect `verifiers` taskset: `data.tasks: [{name: verifiers, args: {taskset: ID}}]`.

verifiers >= 0.4 (its v1 API: a Taskset of Tasks with `@reward` methods, played by a Harness whose model calls go to
an OpenAI-compatible endpoint). `taskset` is the taskset's id (an installed package or module exporting its
`Taskset` subclass, as verifiers loads it), `taskset_args` its config fields. Its tasks, in `load()` order, are the
problems (the last `eval_size` held out; `max_tasks` bounds an infinite taskset); each is played as an episode of
the environment `verifiers` (rlvr.envs.verifiers_env), whose rewards are the reward. `pip install 'rlvr[verifiers]'`.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any

from rlvr.errors import ConfigError
from rlvr.tasks.base import TASKS, Problem, Task


def load_taskset(taskset: str, taskset_args: dict[str, Any]):
    """The verifiers taskset `taskset` with its config fields `taskset_args`."""
    try:
        from verifiers.v1.utils.loaders import load_taskset as load
        from verifiers.v1.utils.loaders import taskset_config_type
    except ImportError:
        raise ConfigError("Task 'verifiers' needs the verifiers package: pip install 'rlvr[verifiers]'.") from None
    try:
        return load(taskset_config_type(taskset).model_validate({**taskset_args, "id": taskset}))
    except Exception as e:  # an unknown id, bad config fields: verifiers' own message
        raise ConfigError(f"data.tasks[].args.taskset={taskset!r}: verifiers could not load it: {type(e).__name__}: "
                          f"{e}") from None


@TASKS.register("verifiers")
class VerifiersTaskset(Task):
    """The tasks of a verifiers (>= 0.4) taskset as problems, played in the environment `verifiers` (args: taskset,
    taskset_args, eval_size, max_tasks; pip install 'rlvr[verifiers]')."""

    name = "verifiers"
    verifier = "rlvr.envs.base:episode_verdict"  # the episode's rewards (rlvr.envs.verifiers_env)

    def __init__(self, seed: int = 0, taskset: str = "", taskset_args: dict[str, Any] | None = None,
                 eval_size: int = 0, max_tasks: int | None = None):
        if not taskset:
            raise ConfigError("Task 'verifiers' needs args.taskset: the id of a verifiers taskset (an installed "
                              "package or module exporting its Taskset subclass).")
        self.taskset, self.taskset_args = taskset, dict(taskset_args or {})
        source = load_taskset(taskset, self.taskset_args)
        if not source.bounded and max_tasks is None:
            raise ConfigError(f"verifiers taskset {taskset!r} is infinite; set data.tasks[].args.max_tasks.")
        self.tasks = [t.data for t in islice(iter(source), max_tasks)]
        if not 0 <= eval_size < len(self.tasks):
            raise ConfigError(f"data.tasks[].args.eval_size={eval_size} must leave some of the {len(self.tasks)} "
                              f"tasks of {taskset!r} to train on.")
        self.split = {"train": range(len(self.tasks) - eval_size), "eval": range(len(self.tasks) - eval_size,
                                                                               len(self.tasks))}
        self.environment = {"name": "verifiers", "args": {"taskset": taskset, "taskset_args": self.taskset_args}}

    @property
    def default_label(self) -> str:
        return self.taskset

    def size(self, split: str) -> int | None:
        return len(self.split[split])

    def problem(self, split: str, index: int) -> Problem:
        i = self.split[split][index % len(self.split[split])]
        data = self.tasks[i]
        prompt = data.prompt if isinstance(data.prompt, str) or data.prompt is None else \
            [m.model_dump(mode="json", exclude_none=True) for m in data.prompt]
        answer = getattr(data, "answer", None)
        return Problem(uid=f"{self.taskset}-{data.idx}", prompt=prompt or "",
                       answer=None if answer is None else str(answer) if not isinstance(answer, (dict, list))
                       else json.dumps(answer), fields={"vf_index": i})
