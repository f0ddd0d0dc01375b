"""trackio: the resolved config, metrics per step, completions as a trackio.Table, in a local SQLite store or a
Hugging Face Space."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rlvr.config import TrackingConfig
from rlvr.errors import ConfigError, RlvrError
from rlvr.tracking.base import SINKS, Sink, flat_params, run_name, table_columns


@SINKS.register("trackio")
class TrackioSink(Sink):
    """trackio: a local store (tracking.trackio.dir, else trackio's default) or a Hugging Face Space."""

    def __init__(self, tracking: TrackingConfig, config: dict[str, Any], start_step: int):
        t = tracking.trackio
        if t.dir:
            wanted = Path(t.dir).resolve()
            loaded = sys.modules.get("trackio.utils")
            if loaded is not None and Path(loaded.TRACKIO_DIR).resolve() != wanted:
                raise RlvrError(f"tracking.trackio.dir={t.dir}: trackio was already imported in this process with "
                                f"its store at {loaded.TRACKIO_DIR}; it reads TRACKIO_DIR once, at import.")
            os.environ["TRACKIO_DIR"] = str(wanted)
        try:
            import trackio
        except ImportError:
            raise ConfigError("tracking.report_to lists trackio but it is not installed: pip install "
                              "'rlvr[trackio]'.") from None
        self.trackio = trackio
        self.run = trackio.init(project=tracking.project, name=run_name(tracking), group=t.group,
                                space_id=t.space_id, config=flat_params(config),
                                resume="allow" if start_step else "never", embed=False, auto_log_cpu=False,
                                auto_log_gpu=False)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        columns = table_columns(rows)
        self.run.log({"completions": self.trackio.Table(columns=columns,
                                                         data=[[row.get(c) for c in columns] for row in rows])},
                     step=step)

    def close(self) -> None:
        self.run.finish()
