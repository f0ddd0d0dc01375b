"""The `rewards` and `sandbox` sections: the reward functions and their weights, the worker pool, the failure
budget, and the isolation untrusted code must run under."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_serializer, model_validator

from rlvr.config.base import Section


class RewardFunctionConfig(Section):
    function: str | Callable[..., Any] = Field(..., description="'task' (the task's verifier), 'package.module:fn' "
                                               "or 'path/file.py:fn'; from Python also a callable (rlvr.train).")
    weight: float = Field(1.0, description="Multiplies this function's reward in the total.")
    name: str | None = Field(None, description="Metric name; defaults to the function's name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Extra keyword arguments for this function.")
    batched: bool = Field(False, description="Call f(prompts, completions, **fields) once per prompt group, with "
                                             "lists (one entry per sample); it returns one reward per sample.")

    @field_serializer("function", when_used="json")
    def _callable_as_text(self, function: str | Callable) -> str:
        """A callable is written to config.yaml as 'python:module.name' (a record; it cannot be loaded back)."""
        return function if isinstance(function, str) else f"{PYTHON_CALLABLE}{callable_name(function, True)}"

    @property
    def metric_name(self) -> str:
        """`name`, else 'verifier' for the task's verifier, else the function's name."""
        if callable(self.function):
            return self.name or callable_name(self.function)
        return self.name or ("verifier" if self.function == "task" else self.function.rsplit(":", 1)[-1])


PYTHON_CALLABLE = "python:"


def callable_name(function: Callable, qualified: bool = False) -> str:
    """A reward callable's name: its __name__ ('lambda' for a lambda), with its module when `qualified`."""
    name = getattr(function, "__qualname__" if qualified else "__name__", None) or type(function).__name__
    name = name.replace("<lambda>", "lambda").replace("<locals>.", "")
    return f"{getattr(function, '__module__', None) or '?'}.{name}" if qualified else name


class RewardsConfig(Section):
    functions: list[RewardFunctionConfig] = Field(
        default_factory=lambda: [RewardFunctionConfig(function="task", name="verifier")], min_length=1,
        description="Reward functions summed with their weights; 'task' is the task's verifier (always scored: it "
        "defines accuracy)."
    )
    timeout_s: float = Field(10.0, gt=0, description="Per-item wall-clock limit.")
    num_workers: int = Field(2, ge=1, description="Reward worker processes scoring in parallel (each item limited to "
        "timeout_s).")
    worker_max_memory_mb: int = Field(4096, ge=64, description="A worker whose resident memory grows past this "
                                      "(a leaking reward) is replaced between items.")
    max_failure_rate: float = Field(
        0.1, ge=0, le=1, description="Stop the run when a reward fails (raises, returns NaN/inf/None/non-numbers, "
        "times out, crashes) on more than this fraction of its last failure_window samples, or on every sample "
        "of a step; failed samples score 0 until then. 1: never stop."
    )
    failure_window: int = Field(256, ge=1, description="Samples over which max_failure_rate is judged.")
    backend: Literal["auto", "local", "ray"] = Field(
        "auto", description="Where rewards are scored: 'local' worker processes, or 'ray' tasks spread over a Ray "
        "cluster's CPUs (needs cluster.ray_address); auto: ray when cluster.ray_address is set."
    )

    @model_validator(mode="after")
    def _names_are_unique(self) -> RewardsConfig:
        names = [f.metric_name for f in self.functions]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"reward metric names must be unique, {', '.join(repeated)} repeats: give each "
                             "rewards.functions entry its own `name`")
        return self


class SandboxConfig(Section):
    """Isolation of untrusted code, such as the programs code tasks run (docs/sandbox.md)."""

    isolation: Literal["bwrap", "unshare", "landlock"] = Field(
        "bwrap", description="The weakest isolation untrusted code may run under; without it a run that scores code "
        "is refused at start-up. 'bwrap' (bubblewrap, the default), or an explicit opt-in to 'unshare' (namespaces "
        "without bubblewrap) or 'landlock' (no namespaces: Landlock file rules); docs/sandbox.md says what each "
        "gives up."
    )
