"""Settings that other settings imply, where the recipe left them unset: data.hints draws off-policy samples, so it
implies a rollout correction (TIS); a preset that depends on loop features (DAPO) implies its group filter and its
reward shaping. They are resolved once at set-up (`RunConfig.resolved()`), never written into the user's sections by
a validator, so the config as validated is what the recipe says, and the start banner lists what was added."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlvr.config.algorithm import AlgorithmConfig, RolloutCorrectionConfig
from rlvr.config.base import NamedPart
from rlvr.config.data import DataConfig
from rlvr.config.rewards import RewardFunctionConfig, RewardsConfig

OVERLONG = "rlvr.rewards.shaping:overlong_penalty"


@dataclass(frozen=True)
class Implied:
    """One implied setting: the dotted key ('section.field') it sets, its value, and what and why (the banner's
    line)."""

    key: str
    value: Any
    text: str


def implied_settings(algorithm: AlgorithmConfig, data: DataConfig, rewards: RewardsConfig) -> list[Implied]:
    """The settings these sections imply and leave unset, in the order they are applied."""
    out = []
    if data.hints is not None and "rollout_correction" not in algorithm.model_fields_set:
        out.append(Implied("algorithm.rollout_correction", RolloutCorrectionConfig(preset="tis"),
                           "algorithm.rollout_correction=tis: hinted samples (data.hints) are off-policy; set "
                           "algorithm.rollout_correction to choose another (docs/credit.md)"))
    if algorithm.preset is not None:
        from rlvr.algorithms.presets import get_preset

        preset = f"algorithm.preset={algorithm.preset}"
        requires = get_preset(algorithm.preset).requires
        if "dynamic_sampling" in requires and "filter" not in data.model_fields_set:
            out.append(Implied("data.filter", NamedPart(name="dynamic_sampling"),
                               f"data.filter=dynamic_sampling: {preset} (set data.filter to choose another)"))
        if "overlong_shaping" in requires and not any(f.function == OVERLONG for f in rewards.functions):
            out.append(Implied("rewards.functions",
                               [*rewards.functions, RewardFunctionConfig(function=OVERLONG, name="overlong")],
                               f"rewards.functions + overlong ({OVERLONG}): {preset}"))
    return out
