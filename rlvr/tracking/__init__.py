"""A run's logs behind one logger: metrics.jsonl and completions.jsonl always, the console (banner, progress,
summary), and registered sinks: TensorBoard, Weights & Biases, MLflow, trackio (docs/tracking.md).

May import rollout, tasks, config and below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.config import RunConfig
from rlvr.tracking import mlflow_sink, tensorboard_sink, trackio_sink, wandb_sink  # noqa: F401 (registration)
from rlvr.tracking.base import SINKS, RunIds, Sink
from rlvr.tracking.logger import MetricsLogger, QuietLogger


def make_sinks(cfg: RunConfig, start_step: int) -> list[Sink]:
    """The sinks of tracking.report_to (TensorBoard as tracking.tensorboard says), each handed the resolved
    config; a fresh run forgets the tracker runs of an earlier one in its output directory."""
    if start_step == 0:
        RunIds(cfg.tracking.output_dir).path.unlink(missing_ok=True)
    config: dict[str, Any] = cfg.model_dump(mode="json")
    sinks: list[Sink] = []
    try:
        for name in cfg.tracking.sinks():
            sinks.append(SINKS.get(name)(cfg.tracking, config, start_step))
    except BaseException:
        for sink in sinks:
            sink.close()
        raise
    return sinks


def run_logger(cfg: RunConfig, start_step: int) -> MetricsLogger:
    """The training run's logger, as cfg.tracking says."""
    Path(cfg.tracking.output_dir).mkdir(parents=True, exist_ok=True)
    return MetricsLogger(cfg.tracking.output_dir, cfg.steps, start_step, cfg.tracking.console,
                         log_every=cfg.tracking.log_every, sinks=make_sinks(cfg, start_step))


__all__ = ["SINKS", "MetricsLogger", "QuietLogger", "Sink", "make_sinks", "run_logger"]
