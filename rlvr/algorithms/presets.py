"""Named algorithm presets: AlgorithmConfig values from a paper, filled in under the keys a user did not set.

`requires` names loop features outside AlgorithmConfig that the recipe also depends on (the trainer
refuses a preset whose features it lacks, with a clear error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class Preset:
    name: str
    paper: str
    description: str
    values: dict[str, Any]
    requires: tuple[str, ...] = field(default_factory=tuple)


PRESETS: dict[str, Preset] = {}


def _preset(name: str, paper: str, description: str, values: dict[str, Any], requires: tuple[str, ...] = ()) -> None:
    PRESETS[name] = Preset(name, paper, description, values, requires)


_NO_KL = {"kl_coef": 0.0}

_preset(
    "grpo", "DeepSeekMath (Shao et al. 2024, arXiv 2402.03300)",
    "Group-normalized advantages, PPO clip 0.2, per-sequence token mean, k3 KL in the loss with beta 0.04.",
    {"advantage": "grpo", "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
     "loss_aggregation": "seq-mean-token-mean", "kl_coef": 0.04, "kl_estimator": "k3", "kl_placement": "loss"},
)
_preset(
    "dr_grpo", "Understanding R1-Zero-Like Training (Liu et al. 2025, arXiv 2503.20783)",
    "No std division, token sum divided by a constant (max_new_tokens), no KL.",
    {"advantage": "dr_grpo", "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
     "loss_aggregation": "seq-mean-token-sum-norm", **_NO_KL},
)
_preset(
    "dapo", "DAPO (Yu et al. 2025, arXiv 2503.14476)",
    "Clip-higher 0.2/0.28, token-mean loss, no KL; plus dynamic sampling and overlong reward shaping.",
    {"advantage": "grpo", "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.28,
     "loss_aggregation": "token-mean", **_NO_KL},
    requires=("dynamic_sampling", "overlong_shaping"),
)
_preset(
    "gspo", "Group Sequence Policy Optimization (Zheng et al. 2025, arXiv 2507.18071)",
    "Sequence-level importance ratio (GSPO-token), clip 3e-4/4e-4, per-sequence token mean, no KL.",
    {"advantage": "grpo", "policy_loss": "gspo", "clip_eps_low": 3e-4, "clip_eps_high": 4e-4,
     "loss_aggregation": "seq-mean-token-mean", **_NO_KL},
)
_preset(
    "cispo", "MiniMax-M1 (MiniMax 2025, arXiv 2506.13585)",
    "Stop-gradient importance weight capped from above at 1 + 4.0 = 5 (no lower bound), token-mean, no KL. "
    "The cap is our choice: MiniMax-M1 tunes it without publishing a value.",
    {"advantage": "grpo", "policy_loss": "cispo", "clip_eps_high": 4.0, "cispo_two_sided": False,
     "loss_aggregation": "token-mean", **_NO_KL},
)
_preset(
    "rloo", "Back to Basics: REINFORCE Style Optimization (Ahmadian et al. 2024, arXiv 2402.14740)",
    "Leave-one-out baseline, sequence log-probability (token sum per sequence, mean over sequences), PPO clip "
    "0.2 (the REINFORCE gradient when on-policy), no KL.",
    {"advantage": "rloo", "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.2,
     "loss_aggregation": "seq-mean-token-sum", **_NO_KL},
)
_preset(
    "reinforce_pp", "REINFORCE++ (Hu 2025, arXiv 2501.03262)",
    "Discounted token returns (gamma 1) whitened over the batch, k1 KL in the reward with coefficient 0.01, "
    "PPO clip 0.2, token-mean.",
    {"advantage": "reinforce_pp", "gamma": 1.0, "policy_loss": "ppo_clip", "clip_eps_low": 0.2,
     "clip_eps_high": 0.2, "loss_aggregation": "token-mean", "kl_coef": 0.01, "kl_estimator": "k1",
     "kl_placement": "reward"},
)
_preset(
    "w_reinforce", "The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning (Zhu et al. 2025, "
    "arXiv 2506.01347)",
    "W-REINFORCE with lambda = 0.1: for 0/1 rewards A = +0.1 (correct) and -1 (incorrect), from the constant "
    "baseline 0.5 and sign weights 0.2/2.0; PPO clip 0.2 as in the released code, token-mean, no KL.",
    {"advantage": "reinforce", "reward_baseline": 0.5, "positive_weight": 0.2, "negative_weight": 2.0,
     "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.2, "loss_aggregation": "token-mean",
     **_NO_KL},
)
_preset(
    "forking_tokens", "Beyond the 80/20 Rule (Wang et al. 2025, arXiv 2506.01939)",
    "DAPO with policy gradient only on the top 20% highest-entropy tokens of each step.",
    {"advantage": "grpo", "policy_loss": "ppo_clip", "clip_eps_low": 0.2, "clip_eps_high": 0.28,
     "loss_aggregation": "token-mean", "high_entropy_fraction": 0.2, **_NO_KL},
    requires=("dynamic_sampling", "overlong_shaping"),
)
_preset(
    "ngrpo", "NGRPO (Nan et al. 2025, arXiv 2509.18851)",
    "Virtual maximum-reward sample (r_max 1.0) in each group's statistics; asymmetric clip 0.16 (negative "
    "samples) / 0.24 (positive samples), token-mean, no KL. The released script also drops all-correct groups, "
    "which this preset does not do.",
    {"advantage": "ngrpo", "ngrpo_max_reward": 1.0, "policy_loss": "ppo_clip", "clip_eps_low": 0.16,
     "clip_eps_high": 0.24, "loss_aggregation": "token-mean", **_NO_KL},
)
_preset(
    "dcpo", "DCPO: Dynamic Clipping Policy Optimization (Yang et al. 2025, arXiv 2509.02333)",
    "Smooth advantage standardization across steps, dynamic-adaptive clip bounds from the old token probability "
    "(eps 0.16/0.2, ratio cap 10), per-sequence token mean (our reading of 'only token mean'), no KL.",
    {"advantage": "dcpo_smooth", "policy_loss": "dcpo", "clip_eps_low": 0.16, "clip_eps_high": 0.2,
     "dcpo_ratio_max": 10.0, "loss_aggregation": "seq-mean-token-mean", **_NO_KL},
)


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(
            f"Unknown algorithm preset '{name}'.{did_you_mean(name, PRESETS)} Available: {', '.join(sorted(PRESETS))}."
        )
    return PRESETS[name]


def apply_preset(raw: dict[str, Any]) -> dict[str, Any]:
    """The `algorithm` section with its preset's values under every key the user did not set (explicit keys win)."""
    name = raw.get("preset")
    if name is None:
        return raw
    return {**get_preset(name).values, **raw}
