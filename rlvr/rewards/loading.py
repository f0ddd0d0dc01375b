"""Resolve a reward function: a shipped reward by its registered name (`judge`, `reward_model`, `rlpr`), or one
named as 'package.module:function' or 'path/to/file.py:function'.

A registered reward carries its settings schema (the `args` of its rewards.functions entry, validated at start-up),
whether it is batched or a process reward returning spans (rlvr.rewards.process) (called once per prompt group with lists), whether it scores with the policy itself
(computed in the trainer's process, not in a reward worker), and what it loads before its first call (a judge's or
reward model's weights: `preload`, run by a reward worker before it reports ready, so loading never counts against
an item's time limit)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from rlvr.errors import ConfigError, did_you_mean
from rlvr.registry import Registry

REWARDS: Registry[Callable] = Registry("reward")


def register_reward(name: str, settings: type[BaseModel], batched: bool = False, uses_policy: bool = False,
                    preload: Callable[[BaseModel], object] | None = None, spans: bool = False):
    """Register a shipped reward under `name`, with the schema of its `args` (`settings`); `preload(settings)` loads
    what its calls will use (kept by the reward's own cache); `spans`: a process reward, returning a score per span
    of the completion (rlvr.rewards.process), named in rewards.step_reward rather than rewards.functions."""

    def add(function: Callable) -> Callable:
        function.settings, function.batched, function.uses_policy = settings, batched, uses_policy
        function.preload, function.spans = preload, spans
        return REWARDS.register(name)(function)

    return add


def split_settings(settings: type[BaseModel], fields: dict) -> tuple[BaseModel, dict]:
    """A registered reward's keyword arguments as (its validated settings, the remaining per-sample fields)."""
    mine = {k: v for k, v in fields.items() if k in settings.model_fields}
    return settings(**mine), {k: v for k, v in fields.items() if k not in settings.model_fields}


@functools.cache
def resolve_function(spec: str) -> Callable:
    if spec.startswith("python:"):
        raise ConfigError(f"Reward '{spec}' was a Python callable handed to rlvr.train; a config file records only its "
                          "name. Pass the callable again from Python, or name it as 'package.module:function' or "
                          "'path/file.py:function'.")
    if spec in REWARDS:
        return REWARDS.get(spec)
    if ":" not in spec:
        raise ConfigError(f"Reward function '{spec}' must be a shipped reward ({', '.join(REWARDS.names())}), "
                          f"'package.module:function' or 'path/file.py:function'.{did_you_mean(spec, REWARDS.names())}")
    target, func_name = spec.rsplit(":", 1)
    if target.endswith(".py"):
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"Reward file '{target}' (from '{spec}') does not exist.")
        mod_name = f"rlvr_user_reward_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[mod_name]
            raise ConfigError(f"Reward file '{target}' (from '{spec}') failed while importing: "
                              f"{import_failure(e, path)}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise ConfigError(f"Cannot import module '{target}' for reward '{spec}': {e}") from None
        except Exception as e:
            raise ConfigError(f"Module '{target}' (from reward '{spec}') failed while importing: "
                              f"{import_failure(e)}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ConfigError(f"'{target}' has no function '{func_name}'.{did_you_mean(func_name, names)}")
    return func

def resolve_setting(spec: str, setting: str) -> Callable:
    """`resolve_function(spec)` for the config setting `setting`, which its error names first."""
    try:
        return resolve_function(spec)
    except ConfigError as e:
        raise ConfigError(f"{setting}: {e}") from None



def import_failure(error: BaseException, path: Path | None = None) -> str:
    """'NameError: name 'x' is not defined (at reward.py line 3)': the exception and the deepest line of the
    reward's own file (or of any file, without `path`) it came from."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    if isinstance(error, SyntaxError) and error.filename:
        where = f" (at {error.filename} line {error.lineno})"
    else:
        own = [f for f in frames if path is None or Path(f.filename).resolve() == path]
        where = f" (at {own[-1].filename} line {own[-1].lineno})" if own else ""
    return f"{type(error).__name__}: {error}{where}"


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
    for i, f in enumerate(functions):
        if isinstance(f.function, str) and f.function in REWARDS and REWARDS.get(f.function).spans:
            raise ConfigError(f"rewards.functions[{i}].function = '{f.function}' is a process reward: it scores the "
                              "spans of a completion, not the completion. Name it in rewards.step_reward.function "
                              "(with algorithm.advantage: process_min or process_sum; docs/credit.md).")
        if isinstance(f.function, str) and f.function in REWARDS:
            check_settings(REWARDS.get(f.function), f.args, f"rewards.functions[{i}].args ({f.function})")


def check_settings(function: Callable, args: dict, where: str) -> None:
    """A registered reward's `args` against its schema: a clear error naming the field."""
    try:
        function.settings(**args)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(args)'}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{where}: {problems}") from None
