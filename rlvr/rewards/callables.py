"""Reward functions handed over as Python callables (rlvr.train(reward_funcs=[f, lambda ...])): shipped to the
reward workers with cloudpickle, so they keep the workers' per-item timeouts and failure accounting.

A callable is pickled by value together with the module that defines it (its helpers and constants come along),
so a worker can run it without importing that module: lambdas, closures and functions of a script or notebook
work alike."""

from __future__ import annotations

import functools
import pickle
import sys
from collections.abc import Callable

from rlvr.errors import ConfigError


def pickle_reward(function: Callable, name: str) -> bytes:
    """The callable as bytes a worker can load; a clear error when it cannot be shipped."""
    try:
        import cloudpickle
    except ImportError:
        raise ConfigError("Reward callables are shipped to the reward workers with cloudpickle: pip install "
                          "cloudpickle (or name the function as 'package.module:function').") from None
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    by_value = module is not None and module.__name__ != "__main__" and module.__name__.split(".")[0] != "rlvr"
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(function)
    except Exception as e:
        raise ConfigError(f"Reward '{name}' cannot be sent to the reward workers ({type(e).__name__}: {e}). Keep "
                          "what it uses picklable (no open files, locks or models), or define it in a module and "
                          "name it as 'package.module:function'.") from None
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


@functools.cache
def load_reward(blob: bytes) -> Callable:
    """The callable `pickle_reward` wrote (loaded once per worker)."""
    return pickle.loads(blob)
