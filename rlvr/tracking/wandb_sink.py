"""Weights & Biases: the resolved config, a history row per step, completions as a wandb.Table."""

from __future__ import annotations

from typing import Any

from rlvr.config import TrackingConfig
from rlvr.errors import ConfigError
from rlvr.tracking.base import SINKS, RunIds, Sink, run_name, table_columns


@SINKS.register("wandb")
class WandbSink(Sink):
    """Weights & Biases (online, or offline under tracking.wandb.dir for a later `wandb sync`)."""

    def __init__(self, tracking: TrackingConfig, config: dict[str, Any], start_step: int):
        try:
            import wandb
        except ImportError:
            raise ConfigError("tracking.report_to lists wandb but it is not installed: pip install 'rlvr[wandb]'.") \
                from None
        w = tracking.wandb
        ids = RunIds(tracking.output_dir)
        previous = ids.get("wandb") if start_step else None
        self.wandb = wandb
        self.run = wandb.init(project=tracking.project, entity=w.entity, name=run_name(tracking), tags=tracking.tags,
                              group=w.group, dir=w.dir or tracking.output_dir, mode=w.mode, config=config,
                              id=previous, resume="allow" if previous else None, reinit="create_new")
        ids.set("wandb", self.run.id)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        columns = table_columns(rows)
        table = self.wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
        self.run.log({"completions": table}, step=step)

    def close(self) -> None:
        self.run.finish()
