"""Evaluation settings a run cannot honour, found before it trains: a warning where part of what was asked
can still happen, an error where nothing can."""

from __future__ import annotations

from rlvr.config import RunConfig
from rlvr.errors import ConfigError


def eval_setting_warnings(cfg: RunConfig, tasks: list) -> list[str]:
    """Warnings for eval settings that take no effect; ConfigError when evaluation was asked for and no task has
    a held-out problem to evaluate."""
    e = cfg.eval
    if not e.every_steps:
        ignored = [key for key, value in (("eval.best_metric", e.best_metric), ("eval.samples", e.samples),
                                          ("eval.k", e.k)) if value]
        return [f"{', '.join(ignored)} set but eval.every_steps=0: no evaluation runs during training, so "
                f"{'they are' if len(ignored) > 1 else 'it is'} ignored. Set eval.every_steps=N to evaluate every "
                f"N steps (and at the end)."] if ignored else []
    empty = [task.label for task in tasks if task.size("eval") == 0]
    if len(empty) == len(tasks):
        raise ConfigError(f"eval.every_steps={e.every_steps} but no task has held-out problems (eval split empty: "
                          f"{', '.join(empty)}); give a task an eval split (e.g. data.tasks[].args.eval_size or an "
                          f"eval file), or set eval.every_steps=0.")
    if empty:
        return [f"task(s) {', '.join(empty)} have no held-out problems: evaluation every {e.every_steps} steps "
                f"covers only {', '.join(t.label for t in tasks if t.label not in empty)}."]
    return []
