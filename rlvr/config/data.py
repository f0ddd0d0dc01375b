"""The `data` section: prompt sources (tasks, optionally played in an environment), the sampler and filter of
a step's prompts, and the checks of dataset rows. Sampler, filter and environment names are checked against their
registries by kind (rlvr.registry), so this module imports no plug-in package."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rlvr.config.base import NamedPart, Section
from rlvr.errors import ConfigError
from rlvr.registry import registry_of


class EnvConfig(Section):
    """Episodes in an environment over a task's problems (docs/environments.md)."""

    name: str = Field(..., description="A registered environment (see `rlvr tasks`), e.g. tools, try_again.")
    args: dict[str, Any] = Field(default_factory=dict, description="Environment-specific arguments.")
    max_turns: int = Field(4, gt=0, description="Assistant turns per episode at most.")
    max_tokens: int | None = Field(None, gt=0, description="Token budget of an episode after its prompt (assistant "
                                   "and environment tokens); default max_turns * rollout.max_new_tokens.")
    reward: Literal["final", "sum", "discounted"] = Field(
        "final", description="Episode reward: the environment's final reward ('final'), plus the turn rewards "
        "('sum'), or both discounted by gamma per assistant turn ('discounted').")
    gamma: float = Field(1.0, gt=0, le=1, description="Discount per assistant turn for reward=discounted.")

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        """`env: try_again` is short for `{name: try_again}`."""
        return {"name": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _known_environment(self) -> EnvConfig:
        registry_of("environment").get(self.name)
        return self


class TaskConfig(Section):
    name: str = Field(..., description="A registered task (see `rlvr tasks`).")
    weight: float = Field(1.0, gt=0, description="Share of prompts drawn from this task by the mixture sampler "
        "(relative to the others).")
    args: dict[str, Any] = Field(default_factory=dict, description="Task-specific arguments.")
    label: str | None = Field(None, description="Name in per-source metrics; defaults to the task's own label.")
    env: EnvConfig | None = Field(None, description="Run this task's problems as multi-turn episodes in an "
                                  "environment (tools, feedback, games); default: single completions.")


class DataConfig(Section):
    tasks: list[TaskConfig] = Field(
        default_factory=lambda: [TaskConfig(name="arithmetic")], min_length=1, description="Prompt sources, each a "
        "registered task with arguments (see `rlvr tasks`); e.g. {name: dataset, args: {path: train.jsonl}}.")
    prompts_per_step: int = Field(16, gt=0, description="Distinct prompts per RL step (each gets "
        "rollout.samples_per_prompt completions).")
    sampler: NamedPart = Field(default_factory=lambda: NamedPart(name="mixture"), description=(
        "Which prompts a step generates for: mixture (by data.tasks[].weight), uniform (epochs over all sources), "
        "ucb (DUMP), mopps; see docs/curriculum.md."))
    filter: NamedPart = Field(default_factory=lambda: NamedPart(name="none"), description=(
        "Which generated groups a step trains on: none, dynamic_sampling (DAPO: rewards not all equal), pass_rate "
        "(online difficulty filtering: pass rate in [low, high]); filters other than none regenerate."))
    max_sampling_rounds: int = Field(4, gt=0, description="Generation rounds per step at most (filters that "
                                     "regenerate); a step still short is topped up with rejected groups.")
    stats_window: int = Field(64, gt=0, description="Recent trained groups per source kept for its mean |advantage| "
                                                    "(the ucb sampler's learnability).")

    @model_validator(mode="after")
    def _known_parts(self) -> DataConfig:
        for key, kind, part in (("sampler", "sampler", self.sampler), ("filter", "group filter", self.filter)):
            try:
                registry_of(kind).get(part.name)
            except ConfigError as e:
                raise ConfigError(f"data.{key}.name: {e}") from None
        return self
    system_prompt: str | None = Field(None, description="System message put before every prompt (conversational rows "
        "with their own system message keep theirs); without a chat template it is prepended as text.")
    max_prompt_tokens: int = Field(
        1024, gt=0, description="Longest prompt in tokens; the model's context minus rollout.max_new_tokens caps it too."
    )
    bad_rows: Literal["error", "skip"] = Field(
        "error", description="Dataset rows that cannot be used (malformed JSON, not UTF-8, a missing or empty column, "
        "a prompt over the token limit): 'error' stops before training naming the file and line; 'skip' drops them "
        "and counts them in data/skipped_rows."
    )
