"""A run's whole config (`RunConfig`), its remaining sections (checkpoint, eval, sft, distributed, cluster) and
the checks that span sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from rlvr.config.algorithm import AlgorithmConfig, OptimConfig
from rlvr.config.base import Section
from rlvr.config.data import DataConfig
from rlvr.config.implied import implied_settings
from rlvr.config.model import ModelConfig, TeacherConfig
from rlvr.config.needs import check_estimator_needs
from rlvr.config.rewards import RewardsConfig, SandboxConfig
from rlvr.config.rollout import RolloutConfig
from rlvr.config.tracking import TrackingConfig


class DistributedConfig(Section):
    """Data-parallel training under torchrun (docs/scaling.md)."""

    strategy: Literal["auto", "ddp", "fsdp2"] = Field(
        "auto", description="ddp: a full replica per rank, gradients summed by all-reduce (CPUs, gloo); fsdp2: "
        "parameters, gradients and optimizer state sharded with fully_shard; auto: fsdp2 when several torchrun "
        "processes have CUDA devices, else ddp."
    )


class ClusterConfig(Section):
    """A Ray cluster for reward scoring and, with rollout.max_staleness > 0, the rollout workers (the 'ray' extra)."""

    ray_address: str | None = Field(
        None, description="None: no Ray; 'auto': join the running cluster (ray start --head); 'local': start a "
        "local Ray in this process; or a cluster address such as 'ray://host:10001'. With rollout.max_staleness > 0 "
        "the rollout workers run as Ray actors there (docs/async.md)."
    )
    num_cpus: int | None = Field(None, gt=0, description="CPUs of a local Ray (ray_address=local); default: all.")
    chunk_size: int = Field(32, gt=0, description="Reward requests per Ray task.")
    max_retries: int = Field(3, ge=0, description="Times a Ray task whose worker died is run again.")


class CheckpointConfig(Section):
    every_steps: int = Field(0, ge=0, description="0: only at the end.")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept (older ones deleted; the best model is kept apart).")
    stop_wait_s: float = Field(10.0, ge=0, description="After a first SIGINT/SIGTERM, how long a step that is "
                               "waiting (on reward workers or rollout workers) may still wait; then the step is given "
                               "up and the run stops with the checkpoint of the last finished step (a step that is "
                               "computing finishes and is checkpointed as usual).")


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
    log_completions: int = Field(0, ge=0, description="Held-out problems whose greedy completion (prompt, "
                                 "reference, stated answer, verdict) is written to eval_completions.jsonl at every "
                                 "evaluation, the first N of each evaluation (verl's log_val_generations); 0: none.")

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
    epochs: int = Field(10, gt=0, description="Passes over the demonstrations (a cap when stop_at_accuracy is set).")
    stop_at_accuracy: float | None = Field(
        None, gt=0, le=1, description="Stop once the greedy exact-match accuracy on held_out demonstrations the model "
        "does not train on (the tasks' train stream after the demonstrations) reaches this, so SFT ends at a chosen "
        "level of skill rather than wherever a number of epochs leaves an initialisation; logged as "
        "sft/val_accuracy. None: train all the epochs.")
    check_every: int = Field(8, gt=0, description="Optimizer steps between the held-out checks of stop_at_accuracy.")
    held_out: int = Field(200, gt=0, description="Held-out demonstrations stop_at_accuracy is measured on.")
    time_budget_s: float | None = Field(None, gt=0, description="Stop after this many seconds (epochs still cap).")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate of SFT.")
    batch_size: int = Field(32, gt=0, description="Sequences per optimizer step.")
    micro_batch_size: int | None = Field(
        None, gt=0, description="Sequences per forward and backward pass; a step's gradients accumulate over its "
        "micro-batches, each weighted by its share of the step's target tokens (the same update up to float "
        "rounding, a fraction of the activation memory). None: the whole batch at once.")
    output_dir: str | None = Field(None, description="Default: <tracking.output_dir>/sft.")


class RunConfig(Section):
    plugins: list[str] = Field(default_factory=list, description=(
        "Modules imported before the config is checked, so the advantage estimators, losses, tasks, samplers ... "
        "they register can be named in it: 'my_pkg.my_losses' or 'path/to/file.py' (relative to the working "
        "directory); see docs/extending.md."))
    seed: int = Field(0, description="Seeds model initialisation (tiny), prompt sampling and generation.")
    steps: int = Field(100, gt=0, description="RL steps: each generates, scores and trains on one batch.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    teacher: TeacherConfig | None = Field(None, description="The teacher of on-policy distillation, scoring the "
                                          "student's sampled tokens (advantage=distill, algorithm.distill_weight); "
                                          "None: no teacher.")
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    rewards: RewardsConfig = Field(default_factory=RewardsConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    _implied: tuple[str, ...] = PrivateAttr(default=())  # what resolved() filled in, and why

    def resolved(self) -> RunConfig:
        """A copy with the settings that others imply filled in where the recipe left them unset (rlvr.config.implied:
        hints' rollout correction, a preset's loop features): what a run trains with, resolved once at set-up."""
        settings = implied_settings(self.algorithm, self.data, self.rewards)
        out = self.model_copy(deep=True)
        for setting in settings:
            section, key = setting.key.split(".")
            setattr(getattr(out, section), key, setting.value)
        out._implied = self._implied + tuple(s.text for s in settings)
        return out

    @property
    def implied(self) -> tuple[str, ...]:
        """What `resolved()` filled in, and why (empty for a config as validated)."""
        return self._implied

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
    def _estimator_needs_met(self) -> RunConfig:
        """The estimator's registered needs (step rewards, tree paths, roles, a teacher's logprobs) against the
        settings providing them; a teacher or a step reward that nothing reads is refused too."""
        check_estimator_needs(self.algorithm, self.data, self.rollout, self.rewards, self.teacher)
        return self

    @model_validator(mode="after")
    def _ray_backend_has_an_address(self) -> RunConfig:
        if self.rewards.backend == "ray" and self.cluster.ray_address is None:
            raise ValueError("rewards.backend=ray needs cluster.ray_address ('auto' to join a running cluster, "
                             "'local' to start one here)")
        return self
