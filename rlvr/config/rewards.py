"""The `rewards` and `sandbox` sections: the reward functions and their weights, the worker pool, the failure
budget, and the isolation untrusted code must run under."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_serializer, field_validator, model_validator

from rlvr.config.base import Section


class RewardFunctionConfig(Section):
    function: str | Callable[..., Any] = Field(..., description="'task' (the task's verifier), a shipped reward by "
                                               "name (judge, reward_model, rlpr: docs/rewards.md), "
                                               "'package.module:fn' or 'path/file.py:fn'; from Python also a "
                                               "callable (rlvr.train).")
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


class JudgeSettings(Section):
    """`args` of the `judge` reward: a local causal LM asked whether a reply answers the question as the reference
    does, its verdict read from the next-token probabilities of yes and no (docs/rewards.md)."""

    model: str = Field(..., description="The judge: an HF directory, hub name, .gguf file or packaged model "
                       "(smollm2-135m-instruct), loaded once per reward worker.")
    reads: Literal["reply", "answer"] = Field("reply", description="What the judge reads of a reply: the whole "
                                              "reply, or only its final answer (as require_answer's extraction reads "
                                              "it, on one line) set against the reference by a few-shot "
                                              "answer-matching prompt: a small judge compares two answers far better "
                                              "than it grades a solution.")
    template: str | None = Field(None, description="The judge's prompt, with {question}, {reference} and "
                                 "{response} (the reply, or its final answer with reads=answer); default: "
                                 "rlvr.rewards.judge.TEMPLATE (reference-guided, asks Yes/No), with reads=answer "
                                 "rlvr.rewards.judge.ANSWER_TEMPLATE (few-shot, ends at 'Same:').")
    prompt: Literal["auto", "chat", "plain"] = Field("auto", description="chat: the template is a user turn of the "
                                                     "judge's chat template and the verdict is the first token of "
                                                     "its turn; plain: the template is the whole text and the verdict "
                                                     "its next token (after '\\nVerdict:' unless the template ends "
                                                     "with ':'); auto: chat for reads=reply when the tokenizer has a "
                                                     "chat template, plain otherwise.")
    yes: list[str] = Field(default_factory=lambda: ["Yes", "yes", " Yes", " yes", "YES"], min_length=1,
                           description="Words whose first token counts as a yes verdict.")
    no: list[str] = Field(default_factory=lambda: ["No", "no", " No", " no", "NO"], min_length=1,
                          description="Words whose first token counts as a no verdict.")
    threshold: float | Literal["auto"] = Field("auto", description="Pass when P(yes) / (P(yes) + P(no)) at the "
                                               "verdict position is at least this (a confidence threshold, in (0, 1)); "
                                               "auto: calibrated when the judge loads, on seeded right and wrong "
                                               "answers to additions (rlvr.rewards.judge.Judge.calibrate), as the threshold "
                                               "that best tells them apart while passing wrong answers at most half "
                                               "as often as right ones.")
    output: Literal["verdict", "probability"] = Field("verdict", description="The reward: 1/0 by the threshold, "
                                                      "or the probability itself (0 when a defence refused).")
    require_answer: bool = Field(True, description="Defence: a reply with no extractable final answer (after "
                                 "removing sentences copied from the question, an answer that restates the "
                                 "question, one that speaks of the grading: 'the same as the reference', or one "
                                 "without a number where the reference is a number) scores "
                                 "0 without asking the judge.")
    sealed_reply: bool = Field(True, description="Defence: the reply cannot write the verdict position: its "
                               "special-token strings are broken up and it is fenced inside the user turn, so it "
                               "cannot open an assistant turn of its own.")
    extract: str = Field("boxed,answer_line,final_number", description="require_answer's extraction order "
                         "(rlvr.verifiers.extraction: boxed, answer_line, final_number, whole).")
    system_prompt: str | None = Field(None, description="A system message for the judge's chat template.")
    max_reply_chars: int = Field(4000, ge=1, description="Longer replies are cut to their last this many "
                                 "characters (where the final answer is).")
    max_answer_chars: int = Field(200, ge=1, description="reads=answer: longer final answers are cut to their "
                                  "first this many characters.")
    batch_size: int = Field(16, ge=1, description="Judge prompts per forward pass.")
    cache_size: int = Field(4096, ge=0, description="(question, reference, reply) verdicts kept per worker.")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field("float32", description="The judge's dtype.")
    device: str = Field("cpu", pattern=r"^(auto|cpu|cuda(:\d+)?)$", description="Where the judge runs.")

    @field_validator("threshold")
    @classmethod
    def _threshold_between_0_and_1(cls, value: float | str) -> float | str:
        if value != "auto" and not 0 < value < 1:
            raise ValueError("must be 'auto' or a number strictly between 0 and 1")
        return value


class RewardModelSettings(Section):
    """`args` of the `reward_model` reward: the score of an AutoModelForSequenceClassification."""

    model: str = Field(..., description="An HF directory or hub name of a sequence-classification model.")
    label: int | None = Field(None, description="With several labels: the label whose probability is the reward "
                              "(default: the last). One label: its logit.")
    normalize: Literal["none", "sigmoid", "group"] = Field("none", description="none: the raw score; sigmoid; "
                                                          "group: (s - mean) / (std + 1e-6) over the prompt's group.")
    scale: float = Field(1.0, description="The reward is scale * normalized score + shift.")
    shift: float = Field(0.0, description="See scale.")
    max_tokens: int = Field(2048, ge=8, description="Longer (prompt, reply) inputs keep their last this many tokens.")
    batch_size: int = Field(16, ge=1, description="Inputs per forward pass.")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field("float32", description="The model's dtype.")
    device: str = Field("cpu", pattern=r"^(auto|cpu|cuda(:\d+)?)$", description="Where the model runs.")


class RlprSettings(Section):
    """`args` of the `rlpr` reward: the policy's own probability of the reference answer (RLPR)."""

    marker: str = Field("<answer>", min_length=1, description="The reasoning is the completion up to the last "
                        "marker (all of it when there is none); the reference is scored after reasoning + marker.")
    debias: bool = Field(True, description="Subtract the probability of the reference without the reasoning and "
                         "clip to [0, 1] (RLPR's debiasing).")
    batch_size: int = Field(8, ge=1, description="Sequences per forward pass.")


class StepRewardConfig(Section):
    """A process reward: a score per reasoning step of a completion with the step's character span (a span score),
    turned into token-level advantages by the process credit estimators (algorithm.advantage: process_min |
    process_sum; docs/credit.md)."""

    function: str = Field(..., description="A shipped process reward (arithmetic_steps: each `a op b = c` checked "
                          "exactly; process_reward_model: a learned PRM) or 'package.module:fn' / 'path/file.py:fn' "
                          "returning [(start, end, score), ...] (or RewardResult(spans=...)) for f(prompt, completion, **fields).")
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the process reward (checked "
                                 "against a shipped one's settings at start-up).")


class ArithmeticStepSettings(Section):
    """`args` of the `arithmetic_steps` process reward."""

    correct: float = Field(1.0, description="Reward of a step whose equality holds.")
    wrong: float = Field(-1.0, description="Reward of a step whose equality does not hold.")


class ProcessRewardModelSettings(Section):
    """`args` of the `process_reward_model` process reward: a learned process reward model scoring each step (a line of
    the completion), with a sequence-classification head (the prefix up to each step is scored) or a
    token-classification head (one forward; the score is read at each step's last token)."""

    model: str = Field(..., description="An HF directory or hub name of a sequence- or token-classification model.")
    head: Literal["auto", "sequence", "token"] = Field("auto", description="auto: from the model's architecture "
                                                       "(ForTokenClassification reads per-token scores).")
    score: Literal["probability", "difference", "logit"] = Field(
        "difference", description="A step's reward: the probability of `label`, p(label) - p(other) for two labels "
        "(PURE's p(good) - p(bad), in [-1, 1]), or the logit of a one-label head.")
    label: int | None = Field(None, description="The label whose probability is the step's score (default: the "
                              "last).")
    separator: str = Field("\n", min_length=1, description="Steps are the non-empty pieces of the completion "
                           "between separators.")
    max_tokens: int = Field(2048, ge=8, description="Longer inputs keep their last this many tokens.")
    batch_size: int = Field(16, ge=1, description="Inputs per forward pass.")
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field("float32", description="The model's dtype.")
    device: str = Field("cpu", pattern=r"^(auto|cpu|cuda(:\d+)?)$", description="Where the model runs.")


class NoiseInjection(Section):
    """Flip the task verifier's verdicts with given rates (experiments on noisy rewards)."""

    false_positive_rate: float = Field(0.0, ge=0, le=1, description="Chance a wrong verdict (0) is flipped to 1.")
    false_negative_rate: float = Field(0.0, ge=0, le=1, description="Chance a right verdict (1) is flipped to 0.")
    seed: int = Field(0, description="Seed of the flips (one generator for the run).")


class NoiseCorrectionConfig(Section):
    """The task verifier treated as a noisy channel with false-positive rate rho_0 and false-negative rate rho_1
    (Cai et al. 2025, "Reinforcement Learning with Verifiable yet Noisy Rewards under Imperfect Verifiers")."""

    method: Literal["none", "backward", "forward"] = Field("none", description="backward: r = (r~ - rho_0) / "
        "(1 - rho_0 - rho_1), unbiased; forward: r = rho_1 for r~ = 1 and rho_1 - 1 for r~ = 0 (needs only rho_1).")
    false_positive_rate: float = Field(0.0, ge=0, lt=1, description="rho_0, the verifier's known false-positive "
                                       "rate (P(verdict 1 | wrong)).")
    false_negative_rate: float = Field(0.0, ge=0, lt=1, description="rho_1, its known false-negative rate "
                                       "(P(verdict 0 | right)).")
    inject: NoiseInjection | None = Field(None, description="Flip the verifier's verdicts with these rates before "
                                          "the correction (training only; evaluation stays clean).")

    @model_validator(mode="after")
    def _rates_leave_signal(self) -> NoiseCorrectionConfig:
        if self.method == "backward" and self.false_positive_rate + self.false_negative_rate >= 1:
            raise ValueError("rewards.noise_correction: backward needs false_positive_rate + false_negative_rate < 1 "
                             f"(got {self.false_positive_rate:g} + {self.false_negative_rate:g}); at 1 the verdict "
                             "carries no information")
        return self


class RewardsConfig(Section):
    functions: list[RewardFunctionConfig] = Field(
        default_factory=lambda: [RewardFunctionConfig(function="task", name="verifier")], min_length=1,
        description="Reward functions summed with their weights; 'task' is the task's verifier (always scored: it "
        "defines accuracy)."
    )
    timeout_s: float = Field(10.0, gt=0, description="Per-item wall-clock limit on scoring (loading a reward "
                             "function is not counted: load_timeout_s).")
    load_timeout_s: float = Field(600.0, gt=0, description="How long a reward worker may take to load the reward "
                                  "functions (import a file or module, a judge's or reward model's weights) before "
                                  "it reports ready; workers start loading while the trainer loads the model, and a "
                                  "function that fails to load stops the run at start.")
    max_timeouts_in_a_row: int = Field(4, ge=0, description="Stop the run when this many items of one reward time "
                                       "out in a row with no item of it finishing in between (the limit is too short "
                                       "for it, or it hangs), instead of replacing workers for ever; 0, or "
                                       "max_failure_rate 1 (tolerate every failure): never.")
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
    noise_correction: NoiseCorrectionConfig = Field(
        default_factory=NoiseCorrectionConfig, description="Treat the task verifier as noisy: correct its verdicts "
        "for known false-positive/negative rates, or inject such noise (docs/rewards.md)."
    )
    step_reward: StepRewardConfig | None = Field(
        None, description="A process reward: a score per reasoning step of a completion (with the step's character "
        "span) for process credit (algorithm.advantage: process_min | process_sum); scored in the reward workers like "
        "every reward, for the trained samples, and only when the advantage estimator reads it.")
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
