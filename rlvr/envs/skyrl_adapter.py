"""Environments written for SkyRL-gym (`pip install skyrl-gym`, extra `rlvr[envs]`) played through rlvr.

SkyRL-gym's `BaseTextEnv` is the closest shape to rlvr's protocol (text in, OpenAI-style messages out, a reward
and `done` per step), it installs from PyPI with light dependencies, and its environments (gsm8k, multi-turn
gsm8k, AIME, ...) run offline. The problem's reference answer becomes the environment's
`extras["reward_spec"]["ground_truth"]`, as SkyRL's datasets provide it.
"""

from __future__ import annotations

from typing import Any, Literal

from rlvr.envs.base import ENVIRONMENTS, Environment, EnvStep, Outcome
from rlvr.errors import ConfigError
from rlvr.tasks.base import Problem, Task


@ENVIRONMENTS.register("skyrl")
class SkyRLEnvironment(Environment):
    """A SkyRL-gym environment by id (e.g. gsm8k_multi_turn). Its per-step rewards are the turn rewards; the
    episode's outcome is its last step's reward ('last') or their sum ('sum'); success when the outcome >= 1.

    Args: id, env_config (passed to the environment), extras (merged into SkyRL's per-sample extras), outcome."""

    def __init__(self, problem: Problem, task: Task, id: str = "gsm8k_multi_turn",  # noqa: A002 (SkyRL's name)
                 env_config: dict[str, Any] | None = None, extras: dict[str, Any] | None = None,
                 outcome: Literal["last", "sum"] = "last"):
        super().__init__(problem, task)
        try:
            import skyrl_gym
        except ImportError:
            raise ConfigError("Environment 'skyrl' needs SkyRL-gym: pip install 'rlvr[envs]' (or skyrl-gym).") from None
        if id not in skyrl_gym.registry:
            raise ConfigError(f"Unknown SkyRL-gym environment {id!r}; registered: {', '.join(sorted(skyrl_gym.registry))}")
        if outcome not in ("last", "sum"):
            raise ConfigError(f"outcome must be 'last' or 'sum', got {outcome!r}")
        sample_extras = {"reward_spec": {"method": "rule", "ground_truth": problem.answer}, "extra_info": {},
                         **(extras or {})}
        self.env = skyrl_gym.make(id, env_config=env_config or {}, extras=sample_extras)
        self.outcome_rule, self.rewards = outcome, []

    def reset(self) -> list[dict]:
        prompt = self.problem.prompt  # a conversational prompt opens as it is
        messages, _ = self.env.init(list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}])
        return list(messages)

    def step(self, text: str) -> EnvStep:
        out = self.env.step(text)
        self.rewards.append(float(out["reward"]))
        return EnvStep(list(out["observations"] or []), self.rewards[-1], bool(out["done"]))

    def outcome(self) -> Outcome:
        value = (self.rewards[-1] if self.outcome_rule == "last" else sum(self.rewards)) if self.rewards else 0.0
        return Outcome(value, value >= 1.0)

    def metrics(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.env.get_metrics().items() if isinstance(v, (int, float))}

    def close(self) -> None:
        self.env.close()
