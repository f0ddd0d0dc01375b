"""rlvr: post-training language models with reinforcement learning from verifiable rewards."""

from rlvr.config import RunConfig, load_config
from rlvr.errors import RlvrError

__version__ = "0.1.0"
__all__ = ["RunConfig", "load_config", "RlvrError", "train"]


def train(config: RunConfig | str, overrides: list[str] | None = None):
    """Train a policy with the run described by `config` (a RunConfig or a YAML path)."""
    from rlvr.trainer import Trainer

    if not isinstance(config, RunConfig):
        config = load_config(config, overrides or [])
    return Trainer(config).fit()
