"""rlvr: post-training language models with reinforcement learning from verifiable rewards."""

from rlvr import curriculum, envs, tasks  # noqa: F401  (the built-in plug-ins: their registries are full from here on)
from rlvr.api import TrainResult, sft, train
from rlvr.config import RunConfig, load_config
from rlvr.errors import RlvrError

__version__ = "0.1.0"
__all__ = ["RunConfig", "load_config", "RlvrError", "TrainResult", "sft", "train", "__version__"]
