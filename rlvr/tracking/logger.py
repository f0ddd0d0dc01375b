"""One logger in front of every sink: <output_dir>/metrics.jsonl and completions.jsonl (always), the console,
and the trackers of tracking.report_to."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from rlvr.tracking.base import Sink
from rlvr.tracking.console import ConsoleProgress
from rlvr.tracking.jsonl import read_jsonl


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class JsonlFile:
    """An append-only JSONL log keyed by step. A fresh run starts a fresh file; a resumed one drops rows after
    its checkpoint, and a row torn by a kill mid-write, so the file reads as one run."""

    def __init__(self, path: Path, start_step: int):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            if start_step == 0:
                path.unlink()
            else:
                kept = [row for row in read_jsonl(path) if row.get("step", 0) <= start_step]
                path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept))
        self._file = None

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._file is None:
            self._file = self.path.open("a")
        for row in rows:
            self._file.write(json.dumps({k: _clean(v) for k, v in row.items()}, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class MetricsLogger:
    """A run's logs: a metrics row per step to metrics.jsonl, the console and every sink; sampled completions to
    completions.jsonl and every sink; warnings to the console."""

    def __init__(self, output_dir: str | Path, total_steps: int, start_step: int = 0, console: bool = True,
                 description: str = "train", *, log_every: int = 10, sinks: list[Sink] | None = None,
                 until: str | None = None):
        out = Path(output_dir)
        self.path = out / "metrics.jsonl"
        self.metrics = JsonlFile(self.path, start_step)
        self.completions = JsonlFile(out / "completions.jsonl", start_step)
        self.eval_completions = JsonlFile(out / "eval_completions.jsonl", start_step)
        self.sinks = list(sinks or [])
        self.console = ConsoleProgress(total_steps, start_step, log_every, description, until=until) if console \
            else None

    def banner(self, title: str, facts: dict[str, str]) -> None:
        if self.console is not None:
            self.console.banner(title, facts)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.metrics.write([{"step": step, **metrics}])
        for sink in self.sinks:
            sink.log_metrics(step, metrics)
        if self.console is not None:
            self.console.update(step, metrics)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.completions.write(rows)
        for sink in self.sinks:
            sink.log_completions(step, rows)

    def log_eval_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Held-out completions of an evaluation (eval.log_completions), to eval_completions.jsonl."""
        if rows:
            self.eval_completions.write(rows)

    def info(self, message: str) -> None:
        """A line on the console (nothing without one)."""
        if self.console is not None:
            self.console.print(message)

    def warn(self, message: str) -> None:
        if self.console is not None:
            self.console.warn(message)
        else:
            print(f"warning: {message}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Stop the progress display and finish every sink (each is closed even when another fails)."""
        if self.console is not None:
            self.console.stop()
        self.metrics.close()
        self.completions.close()
        self.eval_completions.close()
        errors = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as e:  # noqa: BLE001 (a tracker failing to finish must not hide the others' logs)
                errors.append(f"{type(sink).__name__}: {e}")
        if errors:
            self.warn("some trackers failed to finish: " + "; ".join(errors))


class QuietLogger:
    """What data-parallel ranks other than 0 log: nothing (rank 0 logs the globally reduced metrics)."""

    def banner(self, title: str, facts: dict[str, str]) -> None:
        pass

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def log_eval_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def info(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass
