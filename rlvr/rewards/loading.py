"""Resolve a reward function named as 'package.module:function' or 'path/to/file.py:function'."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from rlvr.errors import ConfigError, did_you_mean


@functools.cache
def resolve_function(spec: str) -> Callable:
    if spec.startswith("python:"):
        raise ConfigError(f"Reward '{spec}' was a Python callable handed to rlvr.train; a config file records only its "
                          "name. Pass the callable again from Python, or name it as 'package.module:function' or "
                          "'path/file.py:function'.")
    if ":" not in spec:
        raise ConfigError(f"Reward function '{spec}' must be 'package.module:function' or 'path/file.py:function'.")
    target, func_name = spec.rsplit(":", 1)
    if target.endswith(".py"):
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"Reward file '{target}' (from '{spec}') does not exist.")
        mod_name = f"rlvr_user_reward_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"Cannot import module '{target}' for reward '{spec}': {e}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ConfigError(f"'{target}' has no function '{func_name}'.{did_you_mean(func_name, names)}")
    return func


def check_reward_functions(functions, tasks) -> None:
    """Resolve every reward function (rewards.functions) and every task's verifier now, in the parent, so that a
    typo is a start-up error naming the setting and the nearest name, never a zero reward in every worker."""
    specs = [(f.function, f"rewards.functions[{i}].function") for i, f in enumerate(functions)
             if isinstance(f.function, str) and f.function != "task"]  # a Python callable is already resolved
    specs += [(task.verifier, f"the verifier of task '{task.label}'") for task in tasks]
    for spec, where in specs:
        try:
            resolve_function(spec)
        except ConfigError as e:
            raise ConfigError(f"{where} = '{spec}': {e}") from None
