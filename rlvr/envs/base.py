"""The environment protocol: an episode starts from a problem, the environment answers each assistant turn.

An `Environment` is built per episode from a task's `Problem`. `reset()` gives the opening messages (by default
the problem's prompt as a user message); each assistant turn goes to `step(text)`, which returns the
environment's reply messages (tool results, feedback, a game's answer), a turn reward if any, and whether the
episode is over. `outcome()` is the environment's final verdict: a reward and whether the episode succeeded.
Rewards read this view (the assistant's text and what the environment made of it), never the raw token sequence.

The episode reward combines the outcome with the turn rewards by a named rule (`REWARD_RULES`); it reaches
the advantage estimators as any sample's score does (see `episode_verdict`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlvr.errors import RlvrError
from rlvr.registry import Registry
from rlvr.tasks.base import Problem, Task

Message = dict[str, Any]  # {"role": "user" | "tool" | "assistant" | "system", "content": str, ...}


@dataclass
class EnvStep:
    """The environment's answer to one assistant turn."""

    messages: list[Message] = field(default_factory=list)  # appended to the episode unless it is over
    reward: float | None = None  # a turn reward, if the environment gives one
    done: bool = False
    # the reply depends on other episodes (another seat's move): the episode awaits it, and `reply()` gives it later
    awaiting_reply: bool = False


@dataclass
class Outcome:
    """The environment's verdict on a finished episode."""

    reward: float
    success: bool


class Chat(Protocol):
    """One conversation with a model other than the policy."""

    def reply(self, messages: list[Message]) -> str:
        """The model's next turn after `messages` (text, special tokens removed)."""
        ...


class ChatModels(Protocol):
    """The models besides the policy that environments may talk to (a game's frozen-checkpoint opponent). The
    episode runner hands its own to `Environment.for_group`: each model generates through a rollout engine
    (rlvr.rollout.chat_models), so no environment loads or runs a model itself."""

    def open(self, model: str, seed: int, max_new_tokens: int) -> Chat:
        """A conversation with the saved model directory `model`, sampled from a stream seeded by `seed`, at most
        `max_new_tokens` tokens a turn."""
        ...


class NoChatModels:
    """Where no episode runner plays the environments (a task checking its arguments, a test of an environment
    alone): a conversation with a model is refused when it begins."""

    def open(self, model: str, seed: int, max_new_tokens: int) -> Chat:
        raise RlvrError(f"An environment asked to talk to the model {model}, but it was built without chat models; "
                        "environments that consult a model are played by rlvr.rollout's EpisodeRunner, which "
                        "supplies them.")


class Environment(ABC):
    """One episode's environment. Subclasses take the problem and the task (its verifier, its answer parser)
    plus their own keyword arguments from `data.tasks[].env.args`."""

    tools: list = []  # rlvr.envs.tools.Tool objects offered to the model (schemas go to the chat template)
    # The episode opens awaiting a reply: its first assistant turn comes after one (`reply()`), e.g. a game's seat told
    # its side and the board; the group's shared prompt is the opening without the assistant header.
    starts_awaiting_reply = False

    def __init__(self, problem: Problem, task: Task):
        self.problem, self.task = problem, task

    @classmethod
    def for_group(cls, problem: Problem, task: Task, n: int, models: ChatModels, **args: Any) -> list[Environment]:
        """The environments of one group's `n` episodes (`args`: data.tasks[].env.args; `models`: the models besides
        the policy they may talk to). Episodes that play each other (the seats of a game, docs/self_play.md) share
        their match here; by default n independent ones."""
        return [cls(problem, task, **args) for _ in range(n)]

    def reset(self) -> list[Message]:
        """The opening messages. Every episode of one problem must open the same way (they share a prompt). A
        conversational prompt (a list of messages) opens the episode as it is."""
        prompt = self.problem.prompt
        return list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]

    @abstractmethod
    def step(self, text: str) -> EnvStep:
        """React to the assistant's turn `text` (special tokens removed)."""

    @abstractmethod
    def outcome(self) -> Outcome:
        """The final verdict, called once when the episode has ended (for whatever reason)."""

    def metrics(self) -> dict[str, float]:
        """Numbers about the finished episode (tool calls, attempts), logged as reward/verifier/<name> means."""
        return {}

    def state_key(self, history: list[Message]) -> Hashable:
        """The environment state the next turn starts from, as a key: GiGPO's anchor state (Feng et al. 2025,
        "Group-in-Group Policy Optimization for LLM Agent Training", arXiv 2505.10978), whose equal keys across a
        group's episodes form one step group. `history`: the episode's conversation so far (the opening, every turn
        and reply). By default the whole history, so two turns share a state only when everything before them was
        the same (never the last reply alone: "higher" after different guesses is not one state); an environment
        that knows its state exactly (a position, an interval) returns it, so equal states reached by different
        paths are compared with each other."""
        return json.dumps(history, sort_keys=True, ensure_ascii=False)

    def reply(self) -> EnvStep | None:
        """While the episode awaits a reply (after `step` returned `awaiting_reply`, or before its first turn when
        `starts_awaiting_reply`): the reply once the episodes it depends on have moved, None while they have not. Its
        reward, if any, is added to the last turn's."""
        raise NotImplementedError(f"{type(self).__name__} made an episode await a reply but does not implement "
                                  "reply()")

    def abandon(self) -> None:  # noqa: B027 (optional hook)
        """The episode was ended before the environment ended it (its token budget or turn limit ran out); an
        environment whose other episodes await this one's move ends them too (a seat that cannot move forfeits)."""

    @property
    def role(self) -> str | None:
        """The episode's own role where it differs within a group (a game's seat), for per-role metrics and
        role-aware advantages; None: the problem's."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release what the episode held (processes, files)."""


ENVIRONMENTS: Registry[type[Environment]] = Registry("environment")


def verify(task: Task, problem: Problem, text: str) -> float:
    """The task's own verifier on `text`, in this process (environments that judge turns while the episode
    runs, e.g. "try again", need the verdict before the next turn)."""
    from rlvr.rewards.loading import resolve_function
    from rlvr.verifiers.timelimit import time_limit

    with time_limit(10.0, f"verifier of task {task.label}"):
        value = resolve_function(task.verifier)(problem.prompt, text, **problem.reward_fields())
    return float(value["score"] if isinstance(value, dict) else value)


def final_only(outcome: float, turn_rewards: list[float], gamma: float) -> float:
    """R = outcome."""
    return outcome


def final_plus_turns(outcome: float, turn_rewards: list[float], gamma: float) -> float:
    """R = outcome + sum_t r_t."""
    return outcome + sum(turn_rewards)


def discounted(outcome: float, turn_rewards: list[float], gamma: float) -> float:
    """R = sum_t gamma^(t-1) r_t + gamma^(T-1) outcome, over the T assistant turns (earlier success pays more)."""
    turns = max(1, len(turn_rewards))
    return sum(gamma**t * r for t, r in enumerate(turn_rewards)) + gamma ** (turns - 1) * outcome


REWARD_RULES: dict[str, Callable[[float, list[float], float], float]] = {
    "final": final_only, "sum": final_plus_turns, "discounted": discounted}


def episode_verdict(prompt: str, completion: str, episode_reward: float, episode_success: bool,
                    episode_metrics: dict[str, float] | None = None, episode_error: str | None = None,
                    **_: object) -> dict[str, float]:
    """The verifier of an environment task: the episode's reward as the environment computed it, its success
    as the verdict (`correct`, so accuracy and pass@k count successful episodes), and the episode's metrics. An episode
    that failed (`episode_error`: an agent program that raised or hung, rlvr.rollout.agents) has no reward: its error is
    this verifier's, counted by the failure budget."""
    if episode_error:
        raise RlvrError(episode_error)
    return {**(episode_metrics or {}), "score": float(episode_reward), "correct": float(bool(episode_success))}
