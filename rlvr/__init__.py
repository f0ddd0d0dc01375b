"""rlvr: post-training language models with reinforcement learning from verifiable rewards."""

from rlvr import curriculum, envs, tasks  # noqa: F401  (the built-in plug-ins: their registries are full from here on)
from rlvr.config import RunConfig, load_config
from rlvr.errors import RlvrError

__version__ = "0.1.0"
__all__ = ["RunConfig", "load_config", "RlvrError", "TrainResult", "sft", "train", "__version__"]


def __getattr__(name: str):
    """The Python API (`rlvr.train`, `rlvr.sft`, `rlvr.TrainResult`) on first use: it imports torch and transformers,
    which a reward worker or `rlvr --version` never needs (PEP 562)."""
    if name in ("TrainResult", "sft", "train"):
        from rlvr import api

        return getattr(api, name)
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
