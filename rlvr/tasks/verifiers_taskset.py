"""Problems from a PrimeIntellect `verifiers` taskset: `data.tasks: [{name: verifiers, args: {taskset: ID}}]`.

verifiers >= 0.4 (its v1 API: a Taskset of Tasks with `@reward` methods, played by a Harness whose model calls go to
an OpenAI-compatible endpoint). `taskset` is the taskset's id (an installed package or module exporting its
`Taskset` subclass, as verifiers loads it, or a dotted module path, `package.module`), `taskset_args` its config
fields (a config field `seed` the args leave unset is the run's seed). Its tasks, in `load()` order, are the
problems (the last `eval_size` held out; `max_tasks` bounds an infinite taskset). With `eval_taskset_args` the
held-out problems are instead the taskset's tasks under those config fields (over `taskset_args`: a split of its
own, `{split: test}`), and the train problems all of its tasks under `taskset_args`, drawn in order when endless.
Each is played as an episode of the environment `verifiers` (rlvr.envs.verifiers_env), whose rewards are the reward.
`pip install 'rlvr[verifiers]'`.
"""

from __future__ import annotations

import importlib
import json
import sys
from itertools import islice
from typing import Any

from rlvr.errors import ConfigError
from rlvr.tasks.base import TASKS, Problem, Task


def taskset_id(taskset: str) -> str:
    """verifiers' id for `taskset`. verifiers imports an id as a top-level module (a dotted one it looks up among
    its own tasksets), so a dotted module path is imported here and registered under a top-level alias."""
    if "." not in taskset or "/" in taskset or "@" in taskset:  # an installed id, a Hub id (owner/name@version)
        return taskset
    alias = "rlvr_taskset__" + taskset.replace(".", "__")
    if alias not in sys.modules:
        try:
            sys.modules[alias] = importlib.import_module(taskset)
        except ImportError as e:
            raise ConfigError(f"data.tasks[].args.taskset={taskset!r}: cannot import it: {e}") from None
    return alias


def load_taskset(taskset: str, taskset_args: dict[str, Any], seed: int | None = None):
    """The verifiers taskset `taskset` with its config fields `taskset_args`, and `seed` for a config field `seed`
    they leave unset: (the taskset, the config fields it was loaded with)."""
    try:
        from verifiers.v1.utils.loaders import load_taskset as load
        from verifiers.v1.utils.loaders import taskset_config_type
    except ImportError:
        raise ConfigError("Task 'verifiers' needs the verifiers package: pip install 'rlvr[verifiers]'.") from None
    try:
        config = taskset_config_type(taskset_id(taskset))
        if seed is not None and "seed" in config.model_fields and "seed" not in taskset_args:
            taskset_args = {**taskset_args, "seed": seed}
        return load(config.model_validate({**taskset_args, "id": taskset_id(taskset)})), taskset_args
    except ConfigError:
        raise
    except Exception as e:  # an unknown id, bad config fields: verifiers' own message
        raise ConfigError(f"data.tasks[].args.taskset={taskset!r}: verifiers could not load it: {type(e).__name__}: "
                          f"{e}") from None


@TASKS.register("verifiers")
class VerifiersTaskset(Task):
    """The tasks of a verifiers (>= 0.4) taskset as problems, played in the environment `verifiers` (args: taskset,
    taskset_args, eval_size, max_tasks, eval_taskset_args; pip install 'rlvr[verifiers]')."""

    name = "verifiers"
    verifier = "rlvr.envs.base:episode_verdict"  # the episode's rewards (rlvr.envs.verifiers_env)

    def __init__(self, seed: int = 0, taskset: str = "", taskset_args: dict[str, Any] | None = None,
                 eval_size: int = 0, max_tasks: int | None = None, eval_taskset_args: dict[str, Any] | None = None):
        if not taskset:
            raise ConfigError("Task 'verifiers' needs args.taskset: the id of a verifiers taskset (an installed "
                              "package or module exporting its Taskset subclass).")
        self.taskset, self.max_tasks = taskset, max_tasks
        source, self.taskset_args = load_taskset(taskset, dict(taskset_args or {}), seed)
        self.eval_taskset_args, self.endless = None, False
        if eval_taskset_args is None:
            tasks = self.listed(source, "taskset_args")
            if not 0 <= eval_size < len(tasks):
                raise ConfigError(f"data.tasks[].args.eval_size={eval_size} must leave some of the {len(tasks)} "
                                  f"tasks of {taskset!r} to train on.")
            self.tasks = {"train": tasks[:len(tasks) - eval_size], "eval": tasks[len(tasks) - eval_size:]}
        else:
            if eval_size:
                raise ConfigError(f"data.tasks[].args.eval_size={eval_size} holds out the last tasks of taskset_args; "
                                  "eval_taskset_args holds out a split of its own: set one of them.")
            held_out, self.eval_taskset_args = load_taskset(taskset, {**self.taskset_args, **eval_taskset_args})
            self.endless = not source.bounded and max_tasks is None
            self.tasks = {"train": [] if self.endless else self.listed(source, "taskset_args"),
                          "eval": self.listed(held_out, "eval_taskset_args")}
        self.stream = iter(source)  # an endless train split's tasks, drawn as problems ask for them
        self.environment = {"name": "verifiers", "args": {"taskset": taskset, "taskset_args": self.taskset_args,
                                                          "eval_taskset_args": self.eval_taskset_args}}

    def listed(self, source, args: str) -> list:
        """The tasks' data of a finite `source` (its first `max_tasks`)."""
        if not source.bounded and self.max_tasks is None:
            raise ConfigError(f"verifiers taskset {self.taskset!r} under {args} is infinite; set "
                              "data.tasks[].args.max_tasks.")
        return [t.data for t in islice(iter(source), self.max_tasks)]

    @property
    def default_label(self) -> str:
        return self.taskset

    def size(self, split: str) -> int | None:
        return None if split == "train" and self.endless else len(self.tasks[split])

    def problem(self, split: str, index: int) -> Problem:
        """The task's problem; the episode finds the task by its place in its taskset (`vf_index`) and whether that
        is the one under eval_taskset_args (`vf_eval`)."""
        tasks = self.tasks[split]
        if split == "train" and self.endless:
            tasks.extend(t.data for t in islice(self.stream, max(0, index + 1 - len(tasks))))
        i = index if split == "train" and self.endless else index % len(tasks)
        held_apart = split == "eval" and self.eval_taskset_args is not None
        data = tasks[i]
        prompt = data.prompt if isinstance(data.prompt, str) or data.prompt is None else \
            [m.model_dump(mode="json", exclude_none=True) for m in data.prompt]
        answer = getattr(data, "answer", None)
        return Problem(uid=f"{self.taskset}-{'eval-' if held_apart else ''}{data.idx}", prompt=prompt or "",
                       answer=None if answer is None else str(answer) if not isinstance(answer, (dict, list))
                       else json.dumps(answer),
                       fields={"vf_index": i if held_apart or split == "train" else len(self.tasks["train"]) + i,
                               "vf_eval": held_apart})
