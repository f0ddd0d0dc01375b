"""The sink interface: one destination of a run's logs (a tracker, an event file), and the registry of sinks
named in `tracking.report_to`."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rlvr.config import TrackingConfig
from rlvr.registry import Registry


class Sink(ABC):
    """Receives the run's parameters once (when built), a metric row per step and tables of sampled completions."""

    @abstractmethod
    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """One step's metrics."""

    @abstractmethod
    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Sampled completions of `step`, one dict per completion (rlvr.tracking.completions)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and finish the run."""


SINKS: Registry[type[Sink]] = Registry("tracking sink (tracking.report_to)")


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as 'section.key' -> scalar; lists and None become their JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_params(value, f"{name}."))
        elif isinstance(value, (str, int, float, bool)):
            out[name] = value
        else:
            out[name] = json.dumps(value)
    return out


def run_name(tracking: TrackingConfig) -> str:
    return tracking.run_name or Path(tracking.output_dir).resolve().name


def table_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every key of the rows, in first-seen order (a table's header)."""
    return list(dict.fromkeys(key for row in rows for key in row))


class RunIds:
    """Tracker run ids kept in <output_dir>/trackers.json, so a resumed run continues the same tracker run."""

    def __init__(self, output_dir: str | Path):
        self.path = Path(output_dir) / "trackers.json"

    def get(self, sink: str) -> str | None:
        if not self.path.is_file():
            return None
        return json.loads(self.path.read_text()).get(sink)

    def set(self, sink: str, run_id: str) -> None:
        ids = json.loads(self.path.read_text()) if self.path.is_file() else {}
        ids[sink] = run_id
        self.path.write_text(json.dumps(ids, indent=2))
