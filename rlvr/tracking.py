"""Metric sinks: a JSONL row per step (always), a rich progress bar with ETA plus a compact line,
and TensorBoard when installed."""

from __future__ import annotations

import json
import math
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

COMPACT = {"reward/mean": "reward", "accuracy": "acc", "eval/accuracy": "eval_acc", "actor/entropy": "entropy",
           "response_length/mean": "len", "perf/step_s": "s/step"}


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def progress_bar(console: Console | None = None) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[line]}"),
        console=console, transient=False,
    )


class MetricsLogger:
    def __init__(self, output_dir: str | Path, total_steps: int, start_step: int = 0, console: bool = True,
                 tensorboard: str = "auto", description: str = "train"):
        self.path = Path(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_after(start_step)
        self._file = self.path.open("a")
        self._progress = None
        if console:
            self._progress = progress_bar()
            self._progress.start()
            self._task = self._progress.add_task(description, total=total_steps, completed=start_step, line="")
        self._tb = None
        if tensorboard != "off":
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(output_dir) / "tensorboard"))
            except ImportError:
                if tensorboard == "on":
                    raise

    def _truncate_after(self, step: int) -> None:
        """A fresh run starts a fresh file; a resumed one drops rows after its checkpoint, and a row torn by a
        kill mid-write, so the file reads as one run."""
        if not self.path.exists():
            return
        if step == 0:
            self.path.unlink()
            return
        kept = []
        for line in self.path.read_text(errors="replace").splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except ValueError:
                continue
        self.path.write_text("".join(r + "\n" for r in kept))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
        if self._progress is not None:
            line = "  ".join(f"{short}={metrics[k]:.3g}" for k, short in COMPACT.items()
                             if isinstance(metrics.get(k), (int, float)))
            self._progress.update(self._task, completed=step, line=line)

    def warn(self, message: str) -> None:
        console = self._progress.console if self._progress is not None else Console(stderr=True)
        console.print(f"[yellow]warning:[/yellow] {message}")

    def close(self) -> None:
        self._file.close()
        if self._progress is not None:
            self._progress.stop()
        if self._tb is not None:
            self._tb.close()


class QuietLogger:
    """What data-parallel ranks other than 0 log: nothing (rank 0 logs the globally reduced metrics)."""

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def warn(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass
