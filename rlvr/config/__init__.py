"""The config of a run: the typed schema of each section (one module per section), YAML recipes, dotted overrides
and docs/config.md.

The ground floor of the pipeline: it imports only rlvr.errors, rlvr.registry and rlvr.algorithms (presets, what an
estimator needs). Names of registered pieces (samplers, filters, environments, tasks) are checked against their
registries by kind, through rlvr.registry, so no plug-in package is imported here; the advantage estimator is checked
against what it is registered as needing (needs.py). Settings that others imply are filled in by
`RunConfig.resolved()` at set-up (implied.py), never by a validator. Everything else imports the config from this
face."""

from rlvr.config.algorithm import AlgorithmConfig, OptimConfig, RolloutCorrectionConfig
from rlvr.config.base import NamedPart, Section
from rlvr.config.data import DataConfig, EnvConfig, HintConfig, TaskConfig
from rlvr.config.loading import (
    RECIPES,
    build_config,
    dump_config,
    import_plugins,
    load_config,
    read_yaml,
    resolve_recipe,
    shipped_recipes,
)
from rlvr.config.model import LoraSettings, ModelConfig, TeacherConfig, TinyModelConfig
from rlvr.config.overrides import Origins, apply_overrides, parse_override, set_value
from rlvr.config.rewards import (
    PYTHON_CALLABLE,
    ArithmeticStepSettings,
    JudgeSettings,
    NoiseCorrectionConfig,
    NoiseInjection,
    ProcessRewardModelSettings,
    RewardFunctionConfig,
    RewardModelSettings,
    RewardsConfig,
    RlprSettings,
    SandboxConfig,
    StepRewardConfig,
    callable_name,
)
from rlvr.config.rollout import RolloutConfig, TreeConfig
from rlvr.config.run import CheckpointConfig, ClusterConfig, DistributedConfig, EvalConfig, RunConfig, SFTConfig
from rlvr.config.tracking import MlflowSettings, TrackingConfig, TrackioSettings, WandbSettings

__all__ = [
    "AlgorithmConfig", "ArithmeticStepSettings", "HintConfig", "ProcessRewardModelSettings", "StepRewardConfig", "CheckpointConfig", "ClusterConfig", "DataConfig", "DistributedConfig", "EnvConfig",
    "EvalConfig", "JudgeSettings", "LoraSettings", "MlflowSettings", "ModelConfig", "NamedPart", "NoiseCorrectionConfig", "NoiseInjection", "OptimConfig", "Origins",
    "PYTHON_CALLABLE", "RECIPES", "RewardFunctionConfig", "RewardModelSettings", "RewardsConfig", "RlprSettings", "RolloutConfig", "RolloutCorrectionConfig",
    "RunConfig", "SFTConfig", "SandboxConfig", "Section", "TaskConfig", "TeacherConfig", "TinyModelConfig", "TrackingConfig", "TreeConfig",
    "TrackioSettings", "WandbSettings", "apply_overrides", "build_config", "callable_name", "dump_config",
    "import_plugins", "load_config", "parse_override", "read_yaml", "resolve_recipe", "set_value", "shipped_recipes",
]
