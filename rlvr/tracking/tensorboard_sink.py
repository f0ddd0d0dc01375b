"""TensorBoard event files under <output_dir>/tensorboard: scalars per step, sampled completions as text."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlvr.config import TrackingConfig
from rlvr.errors import ConfigError
from rlvr.tracking.base import SINKS, Sink, flat_params


@SINKS.register("tensorboard")
class TensorBoardSink(Sink):
    """TensorBoard event files (<output_dir>/tensorboard): scalars, the config and completions as text."""

    def __init__(self, tracking: TrackingConfig, config: dict[str, Any], start_step: int):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError("tracking.report_to lists tensorboard (or tracking.tensorboard=on) but tensorboard is "
                              "not installed: pip install 'rlvr[tensorboard]'.") from None
        self.writer = SummaryWriter(str(Path(tracking.output_dir) / "tensorboard"), purge_step=start_step or None)
        if config:
            self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in flat_params(config).items()), 0)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(key, value, step)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        self.writer.add_text("completions", "\n\n".join(f"    {json.dumps(r, ensure_ascii=False)}" for r in rows),
                             step)

    def close(self) -> None:
        self.writer.close()
