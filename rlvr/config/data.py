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


class HintConfig(Section):
    """Hint scaffolding (docs/credit.md): a group whose samples all fail is sampled again with the first part of a
    reference solution as a hint, as much of it as the problem currently needs; hinted samples are trained with the
    rollout correction (algorithm.rollout_correction, tis unless set) and left out of accuracy."""

    source: NamedPart = Field(default_factory=lambda: NamedPart(name="solution"), description=(
        "Where a problem's hint comes from: solution (the task's reference solution, e.g. a dataset's "
        "solution_column), {name: field, args: {name: COLUMN}} (a column listed in extra_columns), or {name: "
        "function, args: {function: 'module:fn'}} (fn(problem) -> text)."))
    placement: Literal["prompt", "response"] = Field("prompt", description=(
        "prompt: the hint is appended to the question (`template`) and the samples, drawn with it, are trained as "
        "completions of the question without it (off-policy: the rollout correction weighs pi(y|question) / "
        "pi(y|question, hint)); response: the hint opens the answer and the policy continues it (the hint tokens "
        "are context, never trained; the continuation is on-policy given them)."))
    template: str = Field("Hint: a correct solution begins with:\n{hint}", description=(
        "placement=prompt: the text appended to the question (after a blank line); {hint} is the hint."))
    target_pass_rate: float = Field(0.5, gt=0, lt=1, description="The pass rate the hint amount aims a hinted group "
                                    "at (SEELE's sweet spot, 0.5).")
    initial_fraction: float = Field(0.5, ge=0, le=1, description="Fraction of the hint's characters shown to the "
                                    "first hinted problem of a run.")
    gain: float = Field(0.5, gt=0, description="Step of the adaptation: fraction += gain * (target - pass rate) after a "
                        "hinted group, -= gain * pass rate after an unhinted one.")
    min_fraction: float = Field(0.1, ge=0, le=1, description="Least fraction of its hint a hinted problem is shown.")
    max_fraction: float = Field(1.0, gt=0, le=1, description="Most fraction of its hint a problem is shown.")
    max_rounds: int = Field(2, ge=1, description="Hinted generation rounds per all-fail group in a step: a hinted "
                            "group that still all fails is sampled again with the larger hint the rule gives.")
    prior_momentum: float = Field(0.9, ge=0, lt=1, description="Momentum of the run's prior fraction (where a problem "
                                  "never hinted starts): prior <- m * prior + (1 - m) * the fraction a hinted group "
                                  "ended at.")

    @model_validator(mode="after")
    def _checked(self) -> HintConfig:
        try:
            registry_of("hint source").get(self.source.name)
        except ConfigError as e:
            raise ConfigError(f"data.hints.source.name: {e}") from None
        if "{hint}" not in self.template:
            raise ValueError("data.hints.template must contain {hint} (where the hint text goes)")
        if self.min_fraction > self.max_fraction:
            raise ValueError(f"data.hints.min_fraction={self.min_fraction} exceeds max_fraction={self.max_fraction}")
        return self


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
    hints: HintConfig | None = Field(None, description="Hint scaffolding for groups where every sample fails "
                                     "(docs/credit.md); None: off.")

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
