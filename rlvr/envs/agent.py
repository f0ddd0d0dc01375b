"""Agent programs as environments: `data.tasks[].env: {name: agent, args: {function: ...}}`.

An episode is a user function `agent(client, row) -> float | dict`, sync or async, that runs any agent loop (tools,
ReAct, its own memory) with the `openai` client it is handed; the client points at the run's endpoint over the
policy (rlvr.rollout.chat_endpoint) with the episode's own API key, so its calls are sampled by the current policy
and recorded token-exact (rlvr.rollout.agent_trace). `row` is the problem: {"uid", "prompt", "answer", "model",
"system_prompt", and the task's fields}; `row["model"]` is the name to call (`model_name`, default "policy"),
`row["system_prompt"]` the run's data.system_prompt (None when unset) for the agent to put in front of its
messages. The reward is the function's return value (a number, or a dict with "reward", optional "success" and
other numbers logged as metrics), or, with `reward: module:function`, that function's verdict over the captured
trajectory, `reward(messages, row, result) -> float | dict`. An episode whose agent raises, runs past
`episode_timeout_s`, returns something else or never calls the model fails with that error (rlvr.rollout.agents
plays the episodes).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from rlvr.envs.base import ENVIRONMENTS, ChatModels
from rlvr.envs.tools import check_call_format
from rlvr.errors import ConfigError, RlvrError
from rlvr.tasks.base import Problem, Task

# An episode's key in a header, for clients whose API key is not the episode's (verifiers' relay sends its own).
EPISODE_HEADER = "X-Rlvr-Episode"


def _function(spec: Any, key: str) -> Callable:
    from rlvr.rewards.loading import resolve_setting

    if callable(spec):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"data.tasks[].env.args.{key} must name a function as 'package.module:function' or "
                          f"'path/file.py:function'; got {spec!r}.")
    return resolve_setting(spec, f"data.tasks[].env.args.{key}")


@ENVIRONMENTS.register("agent")
class AgentProgram:
    """An agent program `agent(client, row)` whose `openai` client calls the policy through an OpenAI-compatible
    endpoint (args: function, reward, episode_timeout_s, call_timeout_s, model_name, tool_call_format: how the model
    writes tool calls, 'json' Hermes blocks or 'tags' `<name>argument</name>`, rlvr.rollout.openai_format). Not
    stepped turn by turn: the program drives the episode, and rlvr.rollout.agents runs it (`plays_itself`)."""

    plays_itself = True
    tools: list = []

    def __init__(self, problem: Problem, task: Task, function: Any = None, reward: Any = None,
                 model_name: str = "policy", episode_timeout_s: float = 300.0, call_timeout_s: float = 120.0,
                 tool_call_format: str = "json"):
        if function is None:
            raise ConfigError("Environment 'agent' needs data.tasks[].env.args.function: the agent program, "
                              "'package.module:function' or 'path/file.py:function', called as agent(client, row).")
        check_call_format(tool_call_format, "data.tasks[].env.args.tool_call_format")
        if not (episode_timeout_s > 0 and call_timeout_s > 0):
            raise ConfigError("data.tasks[].env.args.episode_timeout_s and call_timeout_s must be positive seconds.")
        self.problem, self.task = problem, task
        self.function = _function(function, "function")
        self.reward = _function(reward, "reward") if reward is not None else None
        self.model_name, self.episode_timeout_s, self.call_timeout_s = model_name, episode_timeout_s, call_timeout_s
        self.tool_call_format = tool_call_format

    @classmethod
    def for_group(cls, problem: Problem, task: Task, n: int, models: ChatModels, **args: Any) -> list[AgentProgram]:
        return [cls(problem, task, **args) for _ in range(n)]

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)

    def row(self) -> dict[str, Any]:
        """What the agent is handed about its problem."""
        p = self.problem
        return {**p.fields, "uid": p.uid, "prompt": p.prompt, "answer": p.answer, "model": self.model_name}

    def verdict(self, result: Any, messages: list[dict[str, Any]]) -> tuple[float, bool, dict[str, float]]:
        """(reward, success, metrics) from what the agent returned (through `reward` when given); RlvrError when it
        is not a reward."""
        if self.reward is not None:
            result = self.reward(messages, self.row(), result)
        where = f"{'reward' if self.reward is not None else 'agent'} function of task {self.task.label}"
        metrics: dict[str, float] = {}
        success = None
        if isinstance(result, dict):
            if "reward" not in result:
                raise RlvrError(f"The {where} returned a dict without 'reward': {str(result)[:120]}")
            success = result.get("success")
            for name, value in result.items():
                if name not in ("reward", "success") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics[name] = float(value)
            result = result["reward"]
        if isinstance(result, bool) or not isinstance(result, (int, float)) or not math.isfinite(result):
            raise RlvrError(f"The {where} returned {str(result)[:80]!r} ({type(result).__name__}); it must return a "
                            "finite number or a dict with a 'reward' number.")
        reward = float(result)
        return reward, bool(success) if success is not None else reward >= 1.0, metrics

    def close(self) -> None:
        """Nothing to release: the program's thread is the runner's."""
