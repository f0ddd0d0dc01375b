"""The `algorithm` and `optim` sections: advantage estimator, policy loss, aggregation, KL, rollout correction
(formulas: docs/algorithms.md), and the optimizer over micro- and mini-batches."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rlvr.config.base import Section
from rlvr.errors import did_you_mean


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
    role_baseline_decay: float = Field(0.95, ge=0, lt=1, description="role_baseline (SPIRAL): the running baseline "
        "of each role moves as b <- decay * b + (1 - decay) * reward after each of its samples.")
    positive_weight: float = Field(1.0, ge=0, description="Multiplies positive advantages (PSR weight).")
    negative_weight: float = Field(1.0, ge=0, description="Multiplies negative advantages (NSR weight).")
    turn_credit: str | None = Field(
        None, description="Turn-level credit for multi-turn episodes (docs/algorithms.md): returns (per-turn "
        "discounted returns, episode baseline), turn_baseline (baseline per turn index over the group's episodes) or "
        "gigpo (episode plus anchor-state step groups); each token gets its turn's advantage. Samples of tasks "
        "without an environment keep the estimator's. None: the episode's advantage on every token.")
    turn_gamma: float = Field(1.0, ge=0, le=1, description="Discount per assistant turn of the turn returns "
        "(turn_credit).")
    gigpo_step_weight: float = Field(1.0, ge=0, description="GiGPO's omega: weight of the step-level (anchor-state "
        "group) advantage added to the episode-level one (turn_credit=gigpo).")
    process_outcome_weight: float = Field(1.0, ge=0, description="Process credit (advantage process_min / "
        "process_sum): weight of the sample's outcome score added to every token's return of step rewards "
        "(rewards.step_reward); 0: step rewards alone.")
    distill_weight: float = Field(0.0, ge=0, description="On-policy distillation added to the estimator's advantage "
        "(docs/algorithms.md): A += distill_weight * the teacher's per-token term -(log p_student - log p_teacher), "
        "so the verifier's group advantage and the teacher's judgement of each token train together. Needs a "
        "`teacher` section; 0: none. advantage=distill is the teacher's term alone.")
    distill_gamma: float = Field(0.0, ge=0, le=1, description="On-policy distillation: discount of the per-token "
        "reverse-KL rewards over the completion's later tokens (0: each token's own, Tinker's default; 1: the sum "
        "of the rest of the completion's).")
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


    @field_validator("turn_credit")
    @classmethod
    def _known_turn_credit(cls, name: str | None) -> str | None:
        from rlvr.algorithms.turn_credit import TURN_CREDIT

        if name is not None and name not in TURN_CREDIT:
            raise ValueError(f"unknown turn credit '{name}'.{did_you_mean(name, TURN_CREDIT.names())} Available: "
                             f"{', '.join(TURN_CREDIT.names())}")
        return name

    @model_validator(mode="after")
    def _distill_once(self) -> AlgorithmConfig:
        if self.distill_weight and self.advantage == "distill":
            raise ValueError("algorithm.distill_weight adds the teacher's term to an outcome estimator's advantage; "
                             "with advantage=distill the advantage is that term already. Unset distill_weight, or "
                             "choose an outcome estimator (e.g. advantage=grpo) to mix the two.")
        return self

    @model_validator(mode="after")
    def _turn_credit_without_kl_reward(self) -> AlgorithmConfig:
        if self.turn_credit is not None and self.kl_coef > 0 and self.kl_placement == "reward":
            raise ValueError("turn_credit does not combine with kl_placement='reward' (the KL penalty is a token "
                             "reward the turn returns do not read); use kl_placement='loss'.")
        return self


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
    share_prompt_forward: bool = Field(True, description="Compute each distinct prompt of a step once and let its "
        "samples' completion forwards read its keys/values (Prefix Grouper, Liu et al. 2025); the gradients are the "
        "per-sample forward's. Applies to text models with full attention under the ddp strategy (or one process); "
        "fsdp2, images, sliding-window models and gradient checkpointing take the per-sample forward.")
    skip_zero_advantage: bool = Field(True, description="Do not compute the forward/backward of samples whose "
        "advantage is zero on every token (GRPO groups whose samples all scored alike): with no KL or entropy term in "
        "the loss they add exactly nothing to the gradient, and their tokens still count in the loss normalisers. "
        "actor/entropy stays over every sample (the sampler's entropy for skipped ones); the figures that need the "
        "trainer's logprobs (clip fractions, rollout/logprob_abs_diff) are over the computed samples; "
        "actor/zero_advantage_skip_frac says how many were skipped. Not under fsdp2 (every rank runs the same forwards).")
    ppo_epochs: int = Field(1, gt=0, description="Passes over each step's samples (TRL num_iterations, verl "
        "ppo_epochs); above 1 the importance ratio leaves 1 and the clip matters.")
    mini_batches: int = Field(1, gt=0, description="Optimizer steps per epoch over the step's samples.")
    max_nonfinite_steps: int = Field(
        10, ge=1, description="Stop the run after this many steps in a row whose loss or gradient was NaN/inf "
        "(such updates are always skipped)."
    )
